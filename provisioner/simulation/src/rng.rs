//! A tiny seeded random-number generator (SplitMix64) and the distributions the workload
//! samples. Each workload draws from its own stream, so adding a workload to a scenario does not
//! change the trace of the others.

/// SplitMix64 (Steele, Lea and Flood, 2014).
#[derive(Debug, Clone)]
pub(crate) struct Rng {
    state: u64,
}

const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;

impl Rng {
    /// Stream `stream` of `seed`: different streams of one seed are unrelated.
    pub(crate) fn stream(seed: u64, stream: u64) -> Self {
        Self {
            state: mix(seed ^ mix(stream.wrapping_add(GOLDEN_GAMMA))),
        }
    }

    /// The next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        mix(self.state)
    }

    /// Uniform in `[0, 1)`.
    pub(crate) fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Exponential with the given rate (mean `1 / rate`).
    pub(crate) fn exponential(&mut self, rate: f64) -> f64 {
        -(1.0 - self.uniform()).ln() / rate
    }

    /// Standard normal (Box–Muller; one of the pair is discarded to keep the stream simple).
    pub(crate) fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform(); // (0, 1]
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// SplitMix64's output function.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_output_function_and_is_repeatable() {
        // Vigna's splitmix64.c, seed 0: the first output is mix(GOLDEN_GAMMA).
        assert_eq!(mix(GOLDEN_GAMMA), 0xe220_a839_7b1d_cdaf);
        let a: Vec<u64> = (0..4).map(|_| Rng::stream(7, 1).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(Rng::stream(7, 1).next_u64(), Rng::stream(7, 2).next_u64());
    }

    #[test]
    fn distributions_have_the_right_means() {
        let mut r = Rng::stream(1, 0);
        let n = 50_000;
        let (mut u, mut e, mut z, mut z2) = (0.0, 0.0, 0.0, 0.0);
        for _ in 0..n {
            u += r.uniform();
            e += r.exponential(4.0);
            let x = r.normal();
            z += x;
            z2 += x * x;
        }
        let n = f64::from(n);
        assert!((u / n - 0.5).abs() < 0.01);
        assert!((e / n - 0.25).abs() < 0.01);
        assert!((z / n).abs() < 0.02);
        assert!((z2 / n - 1.0).abs() < 0.03);
    }
}
