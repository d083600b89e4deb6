//! Crate-level tests.
