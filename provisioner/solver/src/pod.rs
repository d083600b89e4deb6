//! The solver's view of a pod: resolved requests and scheduling constraints, no Kubernetes types.
//!
//! Ingestion (`crate::ingest`) turns Kubernetes objects into these; tests and benchmarks build
//! them directly.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use quartermaster_policies::Requirements;

use crate::devices::DeviceFit;
use crate::resources::Resources;

/// Well-known topology key for nodes.
pub const HOSTNAME: &str = "kubernetes.io/hostname";
/// Well-known topology key for zones.
pub const ZONE: &str = "topology.kubernetes.io/zone";

/// `namespace/name` of a pod.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PodRef {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
}

impl PodRef {
    /// A reference from its parts.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl fmt::Display for PodRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A taint's effect.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TaintEffect {
    /// New pods are not scheduled without a toleration.
    NoSchedule,
    /// The scheduler avoids the node; the solver treats it like `NoSchedule` only when relaxing fails.
    PreferNoSchedule,
    /// Not scheduled, and running pods are evicted.
    NoExecute,
}

impl TaintEffect {
    /// Parses the Kubernetes spelling.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "NoSchedule" => Some(Self::NoSchedule),
            "PreferNoSchedule" => Some(Self::PreferNoSchedule),
            "NoExecute" => Some(Self::NoExecute),
            _ => None,
        }
    }
}

impl fmt::Display for TaintEffect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::NoSchedule => "NoSchedule",
            Self::PreferNoSchedule => "PreferNoSchedule",
            Self::NoExecute => "NoExecute",
        })
    }
}

/// A node taint.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Taint {
    /// Key.
    pub key: String,
    /// Value (may be empty).
    pub value: String,
    /// Effect.
    pub effect: TaintEffect,
}

impl fmt::Display for Taint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.value.is_empty() {
            write!(f, "{}:{}", self.key, self.effect)
        } else {
            write!(f, "{}={}:{}", self.key, self.value, self.effect)
        }
    }
}

/// A pod toleration.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Toleration {
    /// Key; empty with `exists` tolerates every taint.
    pub key: String,
    /// `Exists` (true) or `Equal` (false).
    pub exists: bool,
    /// Value compared under `Equal`.
    pub value: String,
    /// Effect tolerated; `None` tolerates every effect.
    pub effect: Option<TaintEffect>,
}

impl Toleration {
    /// Whether this toleration tolerates `taint` (Kubernetes semantics).
    pub fn tolerates(&self, taint: &Taint) -> bool {
        if self.effect.is_some_and(|e| e != taint.effect) {
            return false;
        }
        if self.key.is_empty() {
            return self.exists;
        }
        self.key == taint.key && (self.exists || self.value == taint.value)
    }
}

/// Whether `tolerations` tolerate every scheduling taint in `taints` (`PreferNoSchedule` never blocks).
pub fn tolerates_all(tolerations: &[Toleration], taints: &[Taint]) -> Result<(), Taint> {
    for taint in taints {
        if taint.effect == TaintEffect::PreferNoSchedule {
            continue;
        }
        if !tolerations.iter().any(|t| t.tolerates(taint)) {
            return Err(taint.clone());
        }
    }
    Ok(())
}

/// What to do when a topology spread constraint cannot be met.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WhenUnsatisfiable {
    /// Hard: the pod stays pending.
    DoNotSchedule,
    /// Soft: relaxed when it blocks placement.
    ScheduleAnyway,
}

/// A `topologySpreadConstraints` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct TopologySpread {
    /// `topology.kubernetes.io/zone`, `kubernetes.io/hostname`, or another node label.
    pub topology_key: String,
    /// Maximum allowed difference between the most and least loaded domains.
    pub max_skew: u32,
    /// Hard or soft.
    pub when_unsatisfiable: WhenUnsatisfiable,
    /// Minimum number of eligible domains (below it the global minimum counts as 0).
    pub min_domains: Option<u32>,
    /// Which pods are counted.
    pub selector: Requirements,
}

/// A pod (anti-)affinity term.
#[derive(Debug, Clone, PartialEq)]
pub struct PodAffinityTerm {
    /// `kubernetes.io/hostname` or `topology.kubernetes.io/zone` (other keys are treated like zone).
    pub topology_key: String,
    /// Which pods the term refers to.
    pub selector: Requirements,
    /// Namespaces the selector applies to (empty: the pod's own).
    pub namespaces: Vec<String>,
    /// `None` for required terms, `Some(weight)` for preferred ones.
    pub preferred_weight: Option<i32>,
}

/// A preferred node-affinity term.
#[derive(Debug, Clone, PartialEq)]
pub struct PreferredNodeTerm {
    /// 1–100.
    pub weight: i32,
    /// Node requirements preferred.
    pub requirements: Requirements,
}

/// A host port a container binds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostPort {
    /// Port number.
    pub port: u16,
    /// `TCP`, `UDP` or `SCTP`.
    pub protocol: String,
    /// Host IP (`0.0.0.0` when unset).
    pub host_ip: String,
}

impl HostPort {
    /// Whether two host ports collide on one node.
    pub fn conflicts(&self, other: &HostPort) -> bool {
        self.port == other.port
            && self.protocol == other.protocol
            && (self.host_ip == other.host_ip
                || self.host_ip == "0.0.0.0"
                || other.host_ip == "0.0.0.0")
    }
}

/// A pod as the solver sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pod {
    /// `namespace/name`.
    pub id: PodRef,
    /// Pod labels (matched by spread and affinity selectors).
    pub labels: BTreeMap<String, String>,
    /// Effective requests: max(init containers, sum of containers) + overhead, plus one `pods` slot.
    pub requests: Resources,
    /// Required node terms, ORed; each already includes `nodeSelector`. Empty: any node.
    pub node_terms: Vec<Requirements>,
    /// Preferred node-affinity terms.
    pub preferred_node_terms: Vec<PreferredNodeTerm>,
    /// Tolerations.
    pub tolerations: Vec<Toleration>,
    /// Topology spread constraints.
    pub topology_spread: Vec<TopologySpread>,
    /// Pod affinity terms (required and preferred).
    pub affinity: Vec<PodAffinityTerm>,
    /// Pod anti-affinity terms (required and preferred).
    pub anti_affinity: Vec<PodAffinityTerm>,
    /// Host ports.
    pub host_ports: Vec<HostPort>,
    /// The workload that owns the pod (`Deployment/ns/name`), for reports.
    pub owner: Option<String>,
    /// The gang the pod belongs to (all-or-nothing placement), if any.
    pub gang: Option<Gang>,
    /// What its DRA ResourceClaims make of each instance type (`None`: it has none). Already
    /// folded into `requests` and `node_terms`; kept for explanations.
    pub devices: Option<Arc<DeviceFit>>,
}

/// A gang: pods that must be placed together, in one zone, or not at all (a Volcano or
/// coscheduling PodGroup, a Volcano Job's `minAvailable`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Gang {
    /// `namespace/name` of the group.
    pub name: String,
    /// How many members must run at once (`minMember`, `minAvailable`).
    pub min_member: u32,
}

impl Pod {
    /// A pod with these requests and no constraints.
    pub fn new(id: PodRef, requests: Resources) -> Self {
        Self {
            id,
            labels: BTreeMap::new(),
            requests,
            node_terms: Vec::new(),
            preferred_node_terms: Vec::new(),
            tolerations: Vec::new(),
            topology_spread: Vec::new(),
            affinity: Vec::new(),
            anti_affinity: Vec::new(),
            host_ports: Vec::new(),
            owner: None,
            gang: None,
            devices: None,
        }
    }
}
