//! A tiny deterministic PRNG (SplitMix64), so scenarios are reproducible without a dependency.

/// The seed every scenario starts from (Karpenter's benchmark seeds `math/rand` with 42 too).
pub const SEED: u64 = 42;

/// SplitMix64 (Steele, Lea and Flood, 2014): one 64-bit state, one multiply-xorshift output.
#[derive(Debug, Clone)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform index in `0..n` (`n > 0`), by Lemire's multiply-shift (bias below 2^-32 for the
    /// small `n` used here).
    pub fn below(&mut self, n: usize) -> usize {
        debug_assert!(n > 0, "below(0)");
        // The product's high half is < n, so it fits in usize.
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }

    /// A uniform element of `items` (non-empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        // 53 random bits as a fraction in [0, 1).
        ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// A uniform integer in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_the_reference_sequence() {
        // First outputs of SplitMix64 seeded with 1234567 (from the reference C implementation).
        let mut r = Rng::new(1_234_567);
        assert_eq!(r.next_u64(), 6_457_827_717_110_365_317);
        assert_eq!(r.next_u64(), 3_203_168_211_198_807_973);
    }

    #[test]
    fn below_stays_in_range_and_covers_it() {
        let mut r = Rng::new(SEED);
        let mut seen = [false; 7];
        for _ in 0..1000 {
            let i = r.below(7);
            seen[i] = true;
        }
        assert!(seen.iter().all(|s| *s));
        assert!((0..1000).all(|_| (3..=5).contains(&r.range(3, 5))));
    }
}
