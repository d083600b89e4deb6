//! The in-cluster controller (work in progress).

pub mod rbac;
