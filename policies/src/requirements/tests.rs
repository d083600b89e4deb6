//! Requirement algebra tables.
