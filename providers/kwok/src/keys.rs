//! The label, annotation and taint keys the kwok cloud writes and reads on Nodes and Pods.
//!
//! A kwok Node describes itself: besides the labels every node of its instance type carries, its
//! annotations hold what the fake machine has (capacity, allocatable), which extended resources
//! its device plugin reports and when, and the launch facts a cloud would keep (price, launch
//! time, tags). The kubelet loop needs nothing else to keep it alive, so it serves the Nodes of
//! every cloud and survives restarts.

/// Label on every Node the kwok cloud creates (`"true"`); the kubelet loop and `list` select by it.
pub const LABEL_KWOK: &str = "quartermaster.dev/kwok";
/// The NodeClaim a Node was launched for.
pub const LABEL_NODECLAIM: &str = "quartermaster.dev/nodeclaim";

/// Annotation kwok itself puts on the Nodes it fakes (value [`KWOK_NODE_FAKE`]), so tools that
/// know kwok recognise them.
pub const ANNOTATION_KWOK_NODE: &str = "kwok.x-k8s.io/node";
/// Value of [`ANNOTATION_KWOK_NODE`].
pub const KWOK_NODE_FAKE: &str = "fake";

/// The full capacity of the fake machine, accelerators included: a JSON object of quantities.
pub const ANNOTATION_CAPACITY: &str = "kwok.quartermaster.dev/capacity";
/// The full allocatable of the fake machine, accelerators included: a JSON object of quantities.
pub const ANNOTATION_ALLOCATABLE: &str = "kwok.quartermaster.dev/allocatable";
/// Extended resources the device plugin reports late (comma-separated, e.g. `nvidia.com/gpu`).
pub const ANNOTATION_DEVICES: &str = "kwok.quartermaster.dev/devices";
/// When the device plugin reports them (RFC 3339).
pub const ANNOTATION_DEVICES_READY_AT: &str = "kwok.quartermaster.dev/devices-ready-at";
/// Dollars per hour the fake instance is billed at.
pub const ANNOTATION_PRICE: &str = "kwok.quartermaster.dev/price-per-hour";
/// When the launch was accepted (RFC 3339, from the provider's clock).
pub const ANNOTATION_LAUNCHED_AT: &str = "kwok.quartermaster.dev/launched-at";
/// The launch request's tags, a JSON object.
pub const ANNOTATION_TAGS: &str = "kwok.quartermaster.dev/tags";

/// Pod annotation: the pod's containers exit 0 this long (a Go duration, `30s`, `5m`) after
/// the pod started, and the pod becomes `Succeeded`, so Jobs finish.
pub const ANNOTATION_RUN_FOR: &str = "kwok.quartermaster.dev/run-for";

/// Taint every new Node carries until the controller sees it register (a real node gets it
/// from its user data). Effect `NoSchedule`: a `NoExecute` taint, once removed, can still evict
/// pods bound right after from the taint-eviction controller's lagging cache.
pub const TAINT_UNREGISTERED: &str = "quartermaster.dev/unregistered";

/// The namespace of node heartbeat Leases.
pub const NODE_LEASE_NAMESPACE: &str = "kube-node-lease";

/// The kubelet version kwok Nodes report.
pub const KUBELET_VERSION: &str = "v1.34.0-kwok";

/// The provider-id scheme: `kwok://NODE-NAME`.
pub const PROVIDER_ID_PREFIX: &str = "kwok://";

/// `kwok://NAME` for a node name.
pub fn provider_id(node_name: &str) -> String {
    format!("{PROVIDER_ID_PREFIX}{node_name}")
}

/// The node name in a `kwok://NAME` provider id, if it is one.
pub fn node_name(provider_id: &str) -> Option<&str> {
    provider_id
        .strip_prefix(PROVIDER_ID_PREFIX)
        .filter(|n| !n.is_empty() && !n.contains('/'))
}
