//! CLI contracts.
