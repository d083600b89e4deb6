//! NodeClaim lifecycle in the cluster: registration of a claim's Node (labels, taints,
//! finalizer, `quartermaster.dev/unregistered` removed), the NodeClaim and NodePool status
//! (server-side apply, written only when it changes), and the Kubernetes Events that tell a
//! human what was decided.

mod events;
mod registration;
mod status;

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use quartermaster_policies::{NodeClaimStatus, NodePoolStatus};

pub use events::{
    NominationEvents, disrupting_event, initialized_event, launch_failed_event, launched_event,
    nominated_events, rebooting_event, unschedulable_event,
};
pub use registration::{
    Registration, cordon, cordoned_for_disruption, needs_registration, register, soft_cordon,
    soft_cordoned, without_unregistered,
};
pub use status::{claim_status, sync_status};

/// What the controller last wrote, so it writes only changes.
#[derive(Debug, Default)]
pub struct Written {
    claims: BTreeMap<String, (NodeClaimStatus, DateTime<Utc>)>,
    pools: BTreeMap<String, (NodePoolStatus, DateTime<Utc>)>,
    created: BTreeSet<String>,
}

impl Written {
    /// Forgets a claim that is gone.
    pub fn forget(&mut self, claim: &str) {
        self.claims.remove(claim);
        self.created.remove(claim);
    }

    /// Whether this replica created `claim` (counted once).
    pub fn created(&self, claim: &str) -> bool {
        self.created.contains(claim)
    }

    /// Records that this replica created `claim`.
    pub fn mark_created(&mut self, claim: &str) {
        self.created.insert(claim.to_owned());
    }
}
