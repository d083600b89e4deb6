//! The crate's tests: the provider and the kubelet loop against a mocked API server (every
//! request checked against the RBAC table), config files, and the pure pieces.

mod cloud;
mod config;
mod fixtures;
mod kubelet;
mod mock;
mod node;
mod rbac;
mod slices;
