//! Quartermaster's GCP cloud: a [`quartermaster_cloud::CloudProvider`] over Compute Engine.
//!
//! A launch looks for an instance already labelled with its NodeClaim (so a retried or
//! restarted launch never creates a second one), then calls `instances.insert` for each of the
//! claim's offerings in order, with a deterministic instance name and a `requestId` per
//! offering, waits on the zone operation and reads its `error`: a finished operation can carry
//! `ZONE_RESOURCE_POOL_EXHAUSTED`, which falls through to the next offering.
//!
//! Reserved capacity: [`quartermaster_cloud::CloudProvider::reservations`] lists the project's
//! reservations (`reservations.aggregatedList`), and a reserved launch consumes the one its
//! NodeClaim names through the instance's `reservationAffinity`. Flex-start launches use the
//! `FLEX_START` provisioning model (Dynamic Workload Scheduler), run at most seven days and are
//! deleted at their end. `reboot` is `instances.reset`.
//!
//! SDK types stop in `sdk.rs`: the provider talks to the [`port::Compute`] trait.

pub mod billing;
mod cloud;
mod config;
pub mod credentials;
pub mod doctor;
pub mod errors;
pub mod instance;
pub mod names;
pub mod port;
mod rate;
pub mod sdk;

pub use cloud::{
    GcpCloud, LABEL_CLUSTER, LABEL_IMAGE, LABEL_NODECLAIM, LABEL_NODECLASS, LABEL_NODEPOOL,
    LABEL_RESERVATION, drift_reason, parse_provider_id, provider_id, reservation,
};
pub use config::{GcpSettings, OperationWait};
pub use errors::GcpError;
pub use rate::RateLimitSettings;
