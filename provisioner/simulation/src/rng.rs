//! The run's randomness: `rand`'s ChaCha8 generator, one stream of the seed per consumer, and
//! the distributions the workload samples (`rand_distr`).
//!
//! Streams of a seed (ChaCha8's 64-bit stream id), fixed so that a seed means the same run in
//! every release:
//!
//! | stream | used for |
//! |---|---|
//! | `1 + cloud` ([`Cloud`] as a number) | its first 64 bits seed that cloud's `SimCloud` (which splits its own streams) |
//! | `1000 + i` | workload `i`'s trace, so adding a workload leaves the others' traces unchanged |
//!
//! Why ChaCha8 (`rand::rngs::ChaCha8Rng`): `simulate` promises the same bytes for the same
//! scenario and seed, so the generator's output must be specified: ChaCha8 is the ChaCha
//! stream cipher with 8 rounds, `rand` lists it among its portable generators (same numbers on
//! every platform and release), and its 2^64 streams per key give independent sub-streams
//! without deriving seeds by hand. `StdRng` and `SmallRng` may change between releases.

use quartermaster_pricing::Cloud;
use rand::rngs::ChaCha8Rng;
use rand::{Rng as _, RngExt, SeedableRng};
use rand_distr::{Exp1, StandardNormal};

/// The generator every random draw of a run comes from.
pub(crate) type Rng = ChaCha8Rng;

/// Stream `stream` of `seed`: the ChaCha8 key is `SeedableRng::seed_from_u64(seed)` (an
/// expansion `rand_core` documents as value-stable) and the stream id is `stream`.
pub(crate) fn stream(seed: u64, stream: u64) -> Rng {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(stream);
    rng
}

/// The seed of `cloud`'s simulated cloud in a run seeded with `seed`: the first 64 bits of
/// stream `1 + cloud`.
pub(crate) fn cloud_seed(seed: u64, cloud: Cloud) -> u64 {
    stream(seed, 1 + cloud as u64).next_u64()
}

/// The stream of workload `index`'s trace.
pub(crate) fn workload_stream(seed: u64, index: usize) -> Rng {
    stream(seed, 1_000 + index as u64)
}

/// Uniform in `[0, 1)`.
pub(crate) fn uniform(rng: &mut Rng) -> f64 {
    rng.random()
}

/// Exponential with the given rate (mean `1 / rate`).
pub(crate) fn exponential(rng: &mut Rng, rate: f64) -> f64 {
    let unit: f64 = rng.sample(Exp1);
    unit / rate
}

/// Standard normal.
pub(crate) fn normal(rng: &mut Rng) -> f64 {
    rng.sample(StandardNormal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_repeatable_and_independent() {
        assert_eq!(stream(7, 1).next_u64(), stream(7, 1).next_u64());
        assert_ne!(stream(7, 1).next_u64(), stream(7, 2).next_u64());
        assert_ne!(stream(7, 1).next_u64(), stream(8, 1).next_u64());
        assert_ne!(cloud_seed(7, Cloud::Aws), cloud_seed(7, Cloud::Gcp));
        assert_eq!(cloud_seed(7, Cloud::Aws), cloud_seed(7, Cloud::Aws));
    }

    #[test]
    fn distributions_have_the_right_means() {
        let mut r = stream(1, 0);
        let n = 50_000;
        let (mut u, mut e, mut z, mut z2) = (0.0, 0.0, 0.0, 0.0);
        for _ in 0..n {
            u += uniform(&mut r);
            e += exponential(&mut r, 4.0);
            let x = normal(&mut r);
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
