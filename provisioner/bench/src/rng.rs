//! The scenarios' randomness: `rand`'s ChaCha8 generator from a fixed seed, so every run of
//! every build on every platform generates the same scenarios.
//!
//! Why ChaCha8 (`rand::rngs::ChaCha8Rng`): `rand` lists it among its portable generators (the
//! ChaCha stream cipher with 8 rounds: its output is specified, the same on every platform and
//! in every release), while `StdRng` and `SmallRng` may change between releases and would move
//! the benchmark's figures under us.

use rand::SeedableRng;
use rand::rngs::ChaCha8Rng;
use rand::seq::IndexedRandom;

/// The seed every scenario starts from (Karpenter's benchmark seeds `math/rand` with 42 too).
pub const SEED: u64 = 42;

/// The generator scenarios draw from.
pub type Rng = ChaCha8Rng;

/// A generator keyed from [`SEED`] (with `SeedableRng::seed_from_u64`, which `rand_core`
/// documents as value-stable).
pub fn seeded() -> Rng {
    ChaCha8Rng::seed_from_u64(SEED)
}

/// A uniform element of `items`, one of the generators' constant tables.
///
/// # Panics
///
/// When `items` is empty (a table in the code, never input).
pub fn pick<T: Copy>(rng: &mut Rng, items: &[T]) -> T {
    *items.choose(rng).expect("pick from an empty table")
}

#[cfg(test)]
mod tests {
    use rand::RngExt;

    use super::*;

    #[test]
    fn the_seed_gives_the_same_draws() {
        let draws = |mut r: Rng| -> Vec<u32> { (0..8).map(|_| r.random()).collect() };
        assert_eq!(draws(seeded()), draws(seeded()));
    }

    #[test]
    fn pick_covers_the_table() {
        let mut r = seeded();
        let table = [0, 1, 2, 3, 4, 5, 6];
        let mut seen = [false; 7];
        for _ in 0..1000 {
            seen[pick(&mut r, &table)] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
