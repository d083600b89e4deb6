//! Solver tests: every constraint places or rejects pods exactly.

mod accelerator;
mod constraints;
mod cost;
mod explain;
pub(crate) mod fixtures;
mod gang;
mod guardrails;
mod improve;
mod mig_layout;
mod preferences;
mod spot_expected_cost;
