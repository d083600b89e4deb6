//! Solver tests: every constraint places or rejects pods exactly.

mod accelerator;
mod constraints;
mod cost;
mod explain;
mod gang;
pub(crate) mod fixtures;
mod improve;
