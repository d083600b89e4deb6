//! Solver tests: every constraint places or rejects pods exactly.

mod constraints;
mod cost;
pub(crate) mod fixtures;
