//! Solver tests: every constraint places or rejects pods exactly.

mod constraints;
mod cost;
mod explain;
pub(crate) mod fixtures;
