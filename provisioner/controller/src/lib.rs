//! The in-cluster controller: `quartermaster controller`.
//!
//! It watches Pods, Nodes, NodePools, NodeClaims, the NodeClass kinds, DaemonSets,
//! PodDisruptionBudgets ([`stores`]) and, where served, the DRA kinds ([`dra`]), and drives
//! the same provisioning engine as `simulate` ([`driver`]): watch events become engine events,
//! the engine's actions are carried out against the Kubernetes API and a cloud provider
//! ([`launch`], [`lifecycle`], [`termination`]), and their outcomes are fed back. The API
//! server is the memory: a restarted controller rebuilds its engine from the NodeClaims in the
//! cluster. Only the holder of the leader Lease writes ([`writes`], [`leader`]).

pub mod capacity_buffers;
pub mod client;
pub mod context;
pub mod dra;
pub mod driver;
mod error;
pub mod fleet;
pub mod http;
pub mod launch;
pub mod leader;
pub mod lifecycle;
pub mod metrics;
pub mod page;
pub mod pod_groups;
pub mod pod_readings;
pub mod price_refresh;
pub mod provisioning_requests;
pub mod rbac;
pub mod repair;
pub mod reservations;
pub mod run;
pub mod stores;
pub mod sweep;
pub mod termination;
pub mod time;
pub mod translate;
pub mod writes;

pub use error::ControllerError;
pub use run::{Clients, Settings, run};

#[cfg(test)]
mod tests;
