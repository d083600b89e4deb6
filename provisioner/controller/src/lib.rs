//! The in-cluster controller (work in progress).

pub mod client;
mod error;
pub mod leader;
pub mod rbac;

pub use error::ControllerError;
