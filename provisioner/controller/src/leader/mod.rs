//! Leader election on a `coordination.k8s.io/v1` Lease in the controller's namespace, with
//! client-go's semantics (`k8s.io/client-go/tools/leaderelection`):
//!
//! - The Lease names its holder (`holderIdentity`), how long a silent holder keeps it
//!   (`leaseDurationSeconds`), when it was acquired and last renewed, and how many times it
//!   changed hands (`leaseTransitions`).
//! - A missing Lease is created; a Lease whose holder is empty (released) is taken at once; a
//!   Lease held by another replica is taken only when it has not changed for its
//!   `leaseDurationSeconds`, measured on **our** clock from the moment we first saw its current
//!   content. Remote timestamps are never compared with ours, so clock skew between replicas
//!   does not matter (client-go's `observedTime`).
//! - Every write carries the `resourceVersion` it was based on: when two replicas race, the API
//!   server accepts one and answers the other 409 Conflict, which loses.
//! - The leader renews every retry period and stops being the leader (before anyone else may take
//!   over: renew deadline < lease duration) when it could not renew for the renew deadline.
//! - On shutdown the leader first stops claiming leadership, then releases the Lease (empty
//!   holder, 1 s duration) so another replica takes over at once.
//!
//! API failures (network, 429, 5xx) are logged and retried; nothing here panics.
//!
//! Time is an input: [`LeaderElector`] reads a [`Clock`](quartermaster_cloud::Clock) for every timestamp it writes and every
//! expiry it decides, so tests drive it with a `ManualClock`; the loop in [`LeaderElector::run`]
//! waits on tokio timers.
//!
//! Access used: `get`, `create`, `update` on `coordination.k8s.io` `leases` in the controller's
//! namespace ([`crate::rbac::NAMESPACE_RULES`]).

mod elector;
mod leadership;
mod settings;

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;

use crate::ControllerError;

pub use elector::LeaderElector;
pub use leadership::Leadership;
pub use settings::{
    DEFAULT_LEASE_DURATION, DEFAULT_LEASE_NAME, DEFAULT_RENEW_DEADLINE, DEFAULT_RETRY_PERIOD,
    LeaderSettings,
};

/// The Lease's holder, `None` when empty (free or released).
fn holder_of(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        .filter(|h| !h.is_empty())
}

fn is_conflict(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == 409)
}

/// `now` as a Lease timestamp.
fn micro_time(now: DateTime<Utc>, lease: &str) -> Result<MicroTime, ControllerError> {
    // chrono counts a leap second as nanoseconds past 1e9; a Lease cannot hold it.
    let nanos = i32::try_from(now.timestamp_subsec_nanos().min(999_999_999)).unwrap_or(0);
    k8s_openapi::jiff::Timestamp::new(now.timestamp(), nanos)
        .map(MicroTime)
        .map_err(|e| ControllerError::InvalidObject {
            object: lease.to_string(),
            reason: format!("the clock reads {now}, which a Lease cannot hold: {e}"),
        })
}

#[cfg(test)]
mod tests;
