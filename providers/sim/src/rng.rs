//! The simulated cloud's randomness: `rand`'s ChaCha8 generator, one stream per purpose.
//!
//! The simulation draws from independent streams (one for API behaviour, one per instance) so
//! that turning one knob, e.g. throttling, does not shift the interruption times of every
//! instance.
//!
//! Why ChaCha8 (`rand::rngs::ChaCha8Rng`): its output is specified (the ChaCha stream cipher
//! with 8 rounds, 256-bit key, 64-bit stream id) and `rand` lists it among the portable
//! generators, so a seed gives the same numbers on every platform and in every release of the
//! crate; and its 2^64 streams per key are exactly the independent sub-streams the simulation
//! wants. `rand`'s `StdRng` and `SmallRng` make no such promise.

use rand::rngs::ChaCha8Rng;
use rand::{RngExt, SeedableRng};
use rand_distr::Exp1;

/// The generator every random draw of the simulated cloud comes from.
pub(crate) type SimRng = ChaCha8Rng;

/// Sub-stream `stream` of `seed`: the ChaCha8 key is `SeedableRng::seed_from_u64(seed)` (whose
/// expansion `rand_core` documents as value-stable) and the stream id is `stream`. Different
/// streams of one seed, and the same stream of different seeds, are unrelated.
pub(crate) fn stream(seed: u64, stream: u64) -> SimRng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

/// True with probability `p`. Every probability in a [`crate::SimConfig`] is checked to be in
/// `[0, 1]` before a [`crate::SimCloud`] is built, so `random_bool` cannot refuse it.
pub(crate) fn chance(rng: &mut SimRng, p: f64) -> bool {
    rng.random_bool(p)
}

/// A sample of the exponential distribution with the given rate (events per unit); `None` when
/// the rate is not positive (the event never happens). Always draws, so the stream advances
/// the same way whatever the rate is.
pub(crate) fn exponential(rng: &mut SimRng, rate: f64) -> Option<f64> {
    let unit: f64 = rng.sample(Exp1);
    (rate > 0.0).then(|| unit / rate)
}

#[cfg(test)]
mod tests {
    use rand::Rng;

    use super::*;

    #[test]
    fn streams_are_repeatable_and_differ() {
        let a = stream(1, 0).next_u64();
        assert_eq!(a, stream(1, 0).next_u64());
        assert_ne!(a, stream(1, 1).next_u64());
        assert_ne!(a, stream(2, 0).next_u64());
    }

    #[test]
    fn chance_and_exponential_are_in_range_with_the_right_mean() {
        let mut r = stream(42, 7);
        let n = 100_000;
        let (mut hits, mut sum) = (0u32, 0.0);
        for _ in 0..n {
            hits += u32::from(chance(&mut r, 0.25));
            let e = exponential(&mut r, 2.0).unwrap_or(f64::NAN);
            assert!(e >= 0.0 && e.is_finite());
            sum += e;
        }
        assert!((f64::from(hits) / f64::from(n) - 0.25).abs() < 0.01);
        // Mean of Exp(rate) is 1 / rate.
        assert!((sum / f64::from(n) - 0.5).abs() < 0.01);
        assert_eq!(exponential(&mut r, 0.0), None);
        assert!(!chance(&mut r, 0.0));
        assert!(chance(&mut r, 1.0));
    }
}
