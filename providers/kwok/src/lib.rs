//! # quartermaster-kwok
//!
//! The kwok cloud: `quartermaster controller --cloud-provider kwok` makes Quartermaster work on
//! any cluster (kind, k3d, a real one) with no cloud account, as Karpenter's kwok provider
//! does. It is a product feature, not a test double.
//!
//! * [`KwokCloud`] is a [`CloudProvider`](quartermaster_cloud::CloudProvider): launching an
//!   instance creates a Node named after the NodeClaim, with `providerID: kwok://NAME`, every
//!   label a node of the chosen instance type and offering carries (instance type, zone,
//!   region, capacity type, arch, os, cloud, NodePool, NodeClaim, the
//!   `quartermaster.dev/instance-*` and accelerator labels), the
//!   `quartermaster.dev/unregistered:NoSchedule` taint a real node registers with, and a status
//!   (written through `/status`) with capacity and allocatable from the catalog and `Ready`.
//!   The devices a node of that type would publish through its DRA drivers are published as
//!   ResourceSlices (`resource.k8s.io/v1`, one per driver, owned by the Node), so the real
//!   kube-scheduler allocates ResourceClaims on kwok Nodes. Deleting the instance deletes the
//!   Node (and the garbage collector its ResourceSlices). Launch latency, capacity limits and
//!   insufficient-capacity windows come from a [`KwokConfig`] with the simulated cloud's field
//!   names, so fallback can be watched live.
//! * [`KwokKubelet`] plays kubelet for those Nodes, since none runs: Leases in
//!   `kube-node-lease` and the `Ready` heartbeat, the accelerators appearing after the
//!   device-plugin delay, bound pods reported `Running`, deleted pods' deletion completed, and
//!   pods annotated `kwok.quartermaster.dev/run-for: DURATION` reported `Succeeded` after that
//!   long so Jobs finish.
//!
//! ```no_run
//! # async fn wiring(client: kube::Client) -> Result<(), quartermaster_kwok::KwokError> {
//! use std::sync::Arc;
//! use quartermaster_cloud::SystemClock;
//! use quartermaster_kwok::{KwokCloud, KwokConfig, KwokKubelet};
//! use quartermaster_pricing::{Catalog, Cloud};
//!
//! let config = KwokConfig::from_path("kwok.yaml".as_ref())?; // or KwokConfig::default()
//! let clock = Arc::new(SystemClock);
//! // One provider per cloud the NodePools' NodeClasses name ...
//! let aws = KwokCloud::new(client.clone(), Cloud::Aws, Catalog::embedded(), config, clock.clone())?;
//! // ... and one kubelet loop for all of them.
//! let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
//! tokio::spawn(KwokKubelet::new(client, clock).run(async { stopped.await.ok(); }));
//! # drop((aws, stop)); Ok(()) }
//! ```
//!
//! The API access both need is [`API_ACCESS`]; it stays within the controller's RBAC tables.
//!
//! Notes for operators: the Nodes carry kwok's own `kwok.x-k8s.io/node: fake` annotation, so a
//! kwok controller running in the same cluster (which by default manages Nodes so annotated)
//! would act on them too: run one or the other. Pods left on a deleted kwok Node are removed by
//! the kube-controller-manager's pod garbage collector, as for any vanished node. The
//! controller removes the `quartermaster.dev/unregistered` taint when it sees the Node
//! register; until then only pods tolerating it land there. A GPU Node offers its GPUs both
//! ways, as the `nvidia.com/gpu` extended resource (the device plugin's) and as DRA devices in
//! its ResourceSlices, and the scheduler counts the two apart (as on a real node running both
//! the device plugin and the DRA driver): give one Node pods of one kind. ResourceClaims made
//! from templates, and the slices' deletion with their Node, are the kube-controller-manager's
//! work (its resourceclaim controller and garbage collector).

#![forbid(unsafe_code)]

mod api_error;
mod cloud;
mod config;
mod error;
pub mod keys;
mod kubelet;
mod node;
mod node_status;
mod rbac;
mod slices;
mod time;

pub use cloud::KwokCloud;
pub use config::KwokConfig;
pub use error::KwokError;
pub use kubelet::{
    KwokKubelet, LEASE_RENEW_INTERVAL, MAX_LEASE_RENEW_INTERVAL, MAX_LEASE_RENEWALS_PER_SECOND,
    STATUS_INTERVAL, SYNC_PERIOD, lease_renew_interval,
};
/// The simulated cloud's config types, which [`KwokConfig`] reuses.
pub use quartermaster_sim::{CapacityLimit, CapacityOutage, LatencyTable};
pub use rbac::API_ACCESS;

#[cfg(test)]
mod tests;
