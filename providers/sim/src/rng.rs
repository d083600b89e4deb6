//! A small seeded random-number generator (SplitMix64) and the two distributions the
//! simulation samples: uniform in `[0, 1)` and exponential (inverse CDF).
//!
//! The simulation draws from independent streams (one for API behaviour, one per instance) so
//! that turning one knob, e.g. throttling, does not shift the interruption times of every
//! instance.

/// SplitMix64 (Steele, Lea and Flood, 2014): 64 bits of state, passes BigCrush, and its output
/// function is a bijection, so distinct states give distinct outputs.
#[derive(Debug, Clone)]
pub(crate) struct SplitMix64 {
    state: u64,
}

const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

impl SplitMix64 {
    /// A generator seeded with `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// A generator for sub-stream `stream` of `seed`: different streams of one seed, and the
    /// same stream of different seeds, are unrelated.
    pub(crate) fn stream(seed: u64, stream: u64) -> Self {
        Self::new(mix(seed ^ mix(stream.wrapping_add(GOLDEN_GAMMA))))
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix(self.state)
    }

    /// Uniform in `[0, 1)` with 53 bits of precision.
    pub(crate) fn next_f64(&mut self) -> f64 {
        // The top 53 bits fit an f64 mantissa exactly.
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (`p <= 0` never, `p >= 1` always). Always draws one number,
    /// so the stream advances the same way whatever `p` is.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        self.next_f64() < p
    }

    /// A sample of the exponential distribution with the given rate (events per unit), by
    /// inverse CDF: `-ln(1 - u) / rate`. `None` when the rate is not positive (the event never
    /// happens). Always draws one number.
    pub(crate) fn exponential(&mut self, rate: f64) -> Option<f64> {
        let u = self.next_f64();
        (rate > 0.0).then(|| -(1.0 - u).ln() / rate)
    }
}

/// SplitMix64's output function (a bijection on `u64`).
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_sequence() {
        // First outputs of the reference implementation (Vigna's splitmix64.c) for seed 0.
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
        assert_eq!(r.next_u64(), 0x06c4_5d18_8009_454f);
    }

    #[test]
    fn uniform_and_exponential_are_in_range_with_the_right_mean() {
        let mut r = SplitMix64::stream(42, 7);
        let n = 100_000;
        let mut sum_u = 0.0;
        let mut sum_e = 0.0;
        for _ in 0..n {
            let u = r.next_f64();
            assert!((0.0..1.0).contains(&u));
            sum_u += u;
            let e = r.exponential(2.0).unwrap();
            assert!(e >= 0.0 && e.is_finite());
            sum_e += e;
        }
        assert!((sum_u / f64::from(n) - 0.5).abs() < 0.01);
        // Mean of Exp(rate) is 1 / rate.
        assert!((sum_e / f64::from(n) - 0.5).abs() < 0.01);
        assert_eq!(r.exponential(0.0), None);
        assert!(!r.chance(0.0));
        assert!(r.chance(1.0));
    }

    #[test]
    fn streams_differ() {
        let a = SplitMix64::stream(1, 0).next_u64();
        let b = SplitMix64::stream(1, 1).next_u64();
        let c = SplitMix64::stream(2, 0).next_u64();
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a, SplitMix64::stream(1, 0).next_u64());
    }
}
