//! What the stores hold, in the engine's terms. Pure functions over Kubernetes objects: no
//! client, no clock, so every rule here is tested by feeding objects directly.

mod observe;
mod views;

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod as KubePod;
use quartermaster_engine::EngineSetup;
use quartermaster_solver::{Pod, PodRef, ResourceTable};

pub use observe::{observe, observe_with_readings, observe_with_requests};
pub use views::{
    annotated_checkpointed, annotated_do_not_disrupt, claim_offering, found_claim, node_view,
    pdb_view,
};

/// The NodeClaim label naming its NodePool (also on its Node).
pub const LABEL_NODEPOOL: &str = quartermaster_policies::labels::LABEL_NODEPOOL;
/// The Node label naming the NodeClaim it was launched for.
pub const LABEL_NODECLAIM: &str = "quartermaster.dev/nodeclaim";
/// The NodeClaim annotation holding the price the plan assumed, dollars per hour.
pub const ANNOTATION_PRICE: &str = "quartermaster.dev/price-per-hour";
/// The finalizer on NodeClaims and Nodes: the instance is deleted before they go.
pub const FINALIZER: &str = "quartermaster.dev/termination";
/// The taint a node registers with (from its user data); removed at registration.
pub const TAINT_UNREGISTERED: &str = "quartermaster.dev/unregistered";
/// The taint on a node that is going away.
pub const TAINT_DISRUPTED: &str = "quartermaster.dev/disrupted";

/// A pod the engine should know about, and where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedPod {
    /// The solver's pod (shared with the pass's readings, see [`PodReadings`](crate::pod_readings::PodReadings)).
    pub pod: std::sync::Arc<Pod>,
    /// `None` while it waits for a place; the node it is bound to otherwise.
    pub node: Option<String>,
    /// When the pod was created (pending time is measured from here).
    pub created_at: Option<DateTime<Utc>>,
}

/// One look at the stores: the engine's setup and the pods it should know.
#[derive(Debug, Clone)]
pub struct Observed {
    /// Resource table, NodePools and DaemonSets as the engine is built from them.
    pub setup: EngineSetup,
    /// Pods that wait for a place or run on a Quartermaster node, by id.
    pub pods: BTreeMap<PodRef, ObservedPod>,
    /// Objects that could not be read, with the reason (`Kind/namespace/name: field: reason`).
    pub rejected: Vec<(String, String)>,
    /// What the engine's setup depends on, to tell whether it must be rebuilt.
    pub fingerprint: String,
    /// ProvisioningRequests with their pods (those the engine places are among `pods`).
    pub provisioning_requests: Vec<quartermaster_cluster::provisioning_request::RequestPods>,
    /// CapacityBuffers with their chunk and count (the engine keeps room for them).
    pub capacity_buffers: Vec<quartermaster_cluster::capacity_buffer::BufferPods>,
}

/// Whether the kube-scheduler gave up on `pod` for want of a node: unbound, `PodScheduled=False`
/// with reason `Unschedulable`, not owned by a DaemonSet, not being deleted, not finished.
pub fn is_provisionable(pod: &KubePod) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let spec_bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if spec_bound || is_finished(pod) {
        return false;
    }
    if pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet" && o.controller == Some(true))
    {
        return false;
    }
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        })
}

/// Whether the pod has finished (phase `Succeeded` or `Failed`).
pub fn is_finished(pod: &KubePod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The node a pod is bound to.
pub fn bound_node(pod: &KubePod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// Whether a pod is owned by a DaemonSet (never evicted, never counted as a workload).
pub fn is_daemon_pod(pod: &KubePod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet")
}

/// The resource names of a table, in slot order.
pub fn table_names(table: &ResourceTable) -> String {
    (0..table.len())
        .map(|i| table.name(i))
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests;
