//! ProvisioningRequests (Cluster Autoscaler's `autoscaling.x-k8s.io/v1` API) in the engine's
//! terms: what Quartermaster concludes about one request. Pure; the controller turns a
//! [`RequestVerdict`] into the request's conditions, `plan` into a line of output.
//!
//! - check-capacity: [`check_capacity`] solves the request's pods against what exists (nodes and
//!   in-flight claims, with what is already placed or booked on them) with every NodePool held
//!   at its current node count, so nothing is bought.
//! - best-effort-atomic (and GKE's `queued-provisioning.gke.io`, whose pods also prefer
//!   flex-start capacity where a NodePool opts in to it): the request's pods are pending pods of
//!   one gang; the engine's solver places them whole or not at all and its gang launches buy the
//!   nodes.
//!   [`Engine::request_verdict`] reads where they are: all on nodes that exist is provisioned, a
//!   waiting pod with a reason is not found (the reason says why), otherwise it is in progress.

use chrono::{DateTime, Utc};
use quartermaster_pricing::Catalog;
use quartermaster_solver::{ClusterSnapshot, Pod, PodRef};

use crate::engine::Engine;
use crate::state::{Phase, PodState};

/// The label the pods planned for a ProvisioningRequest carry (value: the request's name).
pub const LABEL_PROVISIONING_REQUEST: &str = "quartermaster.dev/provisioning-request";

/// What Quartermaster concludes about one ProvisioningRequest now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestVerdict {
    /// Being provisioned: pods placed on claims whose nodes are not there yet, or not solved
    /// yet.
    InProgress,
    /// The capacity exists for every pod (found on what exists, or bought and registered).
    Provisioned,
    /// The capacity is not there and cannot be bought now; why (from the solver).
    NotFound(String),
    /// The request was provisioned and its capacity is gone; why.
    Revoked(String),
}

/// Whether `pods` fit on what exists in `snapshot` without buying a node: every NodePool is held
/// at its current node count, the snapshot's pending pods are replaced by `pods`.
pub fn check_capacity(
    snapshot: &ClusterSnapshot,
    pods: &[Pod],
    catalog: &Catalog,
    now: DateTime<Utc>,
) -> RequestVerdict {
    if pods.is_empty() {
        return RequestVerdict::Provisioned;
    }
    let mut snapshot = snapshot.clone();
    snapshot.pending = pods.to_vec();
    for pool in &mut snapshot.node_pools {
        pool.limits.nodes = Some(pool.usage.nodes);
    }
    let plan = crate::provisioning::plan(&snapshot, catalog, now);
    if let Some(u) = plan.unschedulable.first() {
        let more = plan.unschedulable.len() - 1;
        let more = if more > 0 {
            format!(" (and {more} more pod(s) do not fit)")
        } else {
            String::new()
        };
        return RequestVerdict::NotFound(format!(
            "{} of {} pod(s) do not fit on existing nodes; {}: {}{more}",
            plan.unschedulable.len(),
            pods.len(),
            u.pod,
            u.reason
        ));
    }
    if let Some(node) = plan.new_nodes.first() {
        return RequestVerdict::NotFound(format!(
            "{} pod(s) would need a new node (first: {} in NodePool {}); check-capacity buys none",
            plan.new_nodes.iter().map(|n| n.pods.len()).sum::<usize>(),
            node.offering.instance_type,
            node.node_pool
        ));
    }
    RequestVerdict::Provisioned
}

impl Engine {
    /// check-capacity on the engine's own view: its nodes and in-flight claims with the pods
    /// placed or booked on them.
    pub fn check_capacity(&self, now: DateTime<Utc>, pods: &[Pod]) -> RequestVerdict {
        let (snapshot, _) = self.snapshot(now);
        check_capacity(&snapshot, pods, &self.setup.catalog, now)
    }

    /// Where a request's pods (given to the engine as pending pods) stand.
    /// `was_provisioned`: the request already says `Provisioned=True` (a pod waiting again
    /// means its capacity is gone).
    pub fn request_verdict(&self, pods: &[PodRef], was_provisioned: bool) -> RequestVerdict {
        let mut in_progress = false;
        for id in pods {
            let Some(entry) = self.pods.get(id) else {
                in_progress = true;
                continue;
            };
            match &entry.state {
                PodState::Waiting { reason, .. } => match (reason, was_provisioned) {
                    (Some(r), false) => return RequestVerdict::NotFound(format!("{id}: {r}")),
                    (r, true) => {
                        return RequestVerdict::Revoked(format!(
                            "{id} lost its place{}",
                            r.as_ref().map(|r| format!(": {r}")).unwrap_or_default()
                        ));
                    }
                    (None, false) => in_progress = true,
                },
                PodState::Nominated { claim } | PodState::Bound { claim } => {
                    match self.claims.get(claim) {
                        Some(c) if c.phase() >= Phase::Registered && !c.deleting => {}
                        Some(c) if c.deleting && was_provisioned => {
                            return RequestVerdict::Revoked(format!(
                                "{id}: its node {} is being deleted",
                                c.target_name()
                            ));
                        }
                        _ => in_progress = true,
                    }
                }
            }
        }
        if in_progress {
            RequestVerdict::InProgress
        } else {
            RequestVerdict::Provisioned
        }
    }
}
