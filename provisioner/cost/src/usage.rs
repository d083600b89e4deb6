//! The inputs: what ran where and when. Any driver builds these — the simulator from its
//! record, the controller from the live cluster, `report` from Prometheus series.

use chrono::{DateTime, Utc};
use quartermaster_pricing::{CapacityType, Cloud};

/// Amounts of the resources a cost share is computed from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Amounts {
    /// CPU, millicores.
    pub cpu_millis: i64,
    /// Memory, bytes.
    pub memory_bytes: i64,
    /// Whole accelerators (GPUs, Gaudi cards, Neuron devices).
    pub accelerators: i64,
}

/// A node billed over `[start, end)`, at one price.
///
/// A node whose price changed is given as consecutive intervals with the same `node` name.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeUsage {
    /// Node name (empty for an instance that never registered; no pod can run on it).
    pub node: String,
    /// NodeClaim name.
    pub nodeclaim: String,
    /// NodePool name.
    pub nodepool: String,
    /// Cloud.
    pub cloud: Cloud,
    /// Region.
    pub region: String,
    /// Zone.
    pub zone: String,
    /// Instance type.
    pub instance_type: String,
    /// Capacity type.
    pub capacity_type: CapacityType,
    /// Billed price, dollars per hour.
    pub price_per_hour: f64,
    /// The list (on-demand) price of the same type in the same zone, dollars per hour; `None`
    /// when unknown (`ListCost` is then the billed cost).
    pub list_price_per_hour: Option<f64>,
    /// Where the price comes from (catalog source key).
    pub price_source: String,
    /// Accelerator model (`h100`, `l4`), empty for CPU types.
    pub accelerator: String,
    /// Whole accelerators on the node.
    pub accelerator_count: u32,
    /// Allocatable CPU and memory (and accelerators), for request-based shares.
    pub allocatable: Amounts,
    /// Billing starts.
    pub start: DateTime<Utc>,
    /// Billing ends; `None` while it still runs (billed up to the `until` of the computation).
    pub end: Option<DateTime<Utc>>,
}

/// How much of its node a pod takes while it runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PodShare {
    /// Its requests: the dominant share of the node's allocatable, accelerators first (see
    /// [`crate::dominant_share`]).
    Requests(Amounts),
    /// An hourly cost already allocated (as the controller exports it): the share is this cost
    /// over the node's price, at most 1.
    HourlyCost(f64),
}

/// A pod running on a node over `[start, end)`.
///
/// A pod may appear in several intervals (it ran, was evicted, ran again); intervals of the same
/// `namespace/pod` are one pod in the output.
#[derive(Debug, Clone, PartialEq)]
pub struct PodUsage {
    /// Namespace.
    pub namespace: String,
    /// Pod name.
    pub pod: String,
    /// Owning workload as `Kind/name` (`Deployment/vllm`, `Job/train-7`), empty if none.
    pub workload: String,
    /// Name of the node it ran on (matches [`NodeUsage::node`]).
    pub node: String,
    /// Its share of the node.
    pub share: PodShare,
    /// Started running.
    pub start: DateTime<Utc>,
    /// Stopped; `None` while it still runs.
    pub end: Option<DateTime<Utc>>,
}
