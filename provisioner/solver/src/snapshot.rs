//! The solver's whole input: everything it may look at, resolved before solving starts.
//!
//! Nothing in here refers to a client, a clock or a cloud: the controller (or `plan`, or the
//! simulator) builds a snapshot, and the solver answers from it alone.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use quartermaster_policies::{PreferencePolicy, Requirements};
use quartermaster_pricing::resources::EPHEMERAL_STORAGE;
use quartermaster_pricing::sharing::GpuSharing;
use quartermaster_pricing::{CapacityType, Cloud, InstanceType};

use crate::pod::{Pod, Taint};
use crate::resources::{ResourceTable, Resources};

/// A NodePool, resolved for solving.
#[derive(Debug, Clone)]
pub struct NodePoolSpec {
    /// NodePool name.
    pub name: String,
    /// The cloud its NodeClass belongs to (from `nodeClassRef.kind`).
    pub cloud: Cloud,
    /// Karpenter semantics: pools of higher weight are tried first.
    pub weight: u32,
    /// `spec.template.spec.requirements` (template labels included as `In` requirements).
    pub requirements: Requirements,
    /// `spec.template.metadata.labels`, put on every node of the pool.
    pub labels: BTreeMap<String, String>,
    /// Taints put on every node; pods must tolerate them.
    pub taints: Vec<Taint>,
    /// Startup taints: removed once the node is initialised, so ignored when fitting pods.
    pub startup_taints: Vec<Taint>,
    /// `spec.limits`.
    pub limits: PoolLimits,
    /// What the pool already owns (nodes and in-flight claims), counted against the limits.
    pub usage: PoolUsage,
    /// False when the pool's NodeClass was not supplied: planned against the cloud's defaults.
    pub node_class_present: bool,
    /// How the pool's nodes differ from their instance type's defaults (shared GPUs, root
    /// volume size).
    pub node_shape: NodeShape,
    /// How the soft constraints of pods this pool governs are weighed against cost
    /// (`spec.preferencePolicy`, `spec.preferenceBudget`).
    pub preferences: PreferenceRule,
}

/// A NodePool's `spec.preferencePolicy` and `spec.preferenceBudget`, resolved.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PreferenceRule {
    /// Respect, Ignore or CostBounded.
    pub policy: PreferencePolicy,
    /// CostBounded: how much more, as a fraction of the plan without preferences, a plan may
    /// cost to honour them (0.10 for `"10%"`).
    pub budget: f64,
}

impl Default for PreferenceRule {
    /// `CostBounded` within 10%.
    fn default() -> Self {
        Self {
            policy: PreferencePolicy::CostBounded,
            budget: 0.10,
        }
    }
}

/// What a NodePool (and its NodeClass) change about a node of a given instance type.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NodeShape {
    /// How the GPUs are shared (`spec.template.spec.gpuSharing`).
    pub gpu_sharing: Option<GpuSharing>,
    /// Where the node's ephemeral storage comes from, when its NodeClass says; `None`: the
    /// type's default (its local NVMe if it has any, else the cloud's default root volume; see
    /// [`InstanceType::capacity`]).
    pub ephemeral_storage: Option<EphemeralStorage>,
    /// Capacity the cluster's NodeOverlays declare for matching instance types (Karpenter's
    /// `karpenter.sh/v1alpha1` NodeOverlay: GPU time-slicing set up in the NodeClass's user
    /// data, a device plugin's extended resources).
    pub overlays: Vec<CapacityOverlay>,
    /// What one spot interruption costs the pool, as time on the node's price
    /// (`spec.template.spec.spotInterruptionCost`: the work lost plus the time to get a new
    /// node); `None`: the default, [`DEFAULT_SPOT_INTERRUPTION_MINUTES`] minutes.
    pub spot_interruption_cost: Option<std::time::Duration>,
}

/// Minutes of a node's price one spot interruption costs when the NodePool does not say
/// (`spotInterruptionCost` default `"5m"`).
pub const DEFAULT_SPOT_INTERRUPTION_MINUTES: f64 = 5.0;

/// One NodeOverlay's capacity: the extended resources a node of a matching instance type will
/// advertise, replacing the type's own figure.
#[derive(Debug, Clone, PartialEq)]
pub struct CapacityOverlay {
    /// NodeOverlay name.
    pub name: String,
    /// `spec.weight`: of several matching overlays, the heaviest sets a resource.
    pub weight: i64,
    /// `spec.requirements`, matched against the instance type's labels.
    pub requirements: Requirements,
    /// `spec.capacity`, whole units.
    pub capacity: BTreeMap<String, u64>,
}

/// A NodeClass's word on ephemeral storage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EphemeralStorage {
    /// The root volume's size in bytes (AWSNodeClass root `blockDeviceMappings` volume,
    /// GCPNodeClass `disk.sizeGiB`, AzureNodeClass `osDiskSizeGB`); `None`: the cloud's default.
    pub root_volume_bytes: Option<u64>,
    /// Local NVMe disks hold ephemeral storage when the type has any (AWS
    /// `instanceStorePolicy: RAID0`); otherwise the root volume does.
    pub local_nvme: bool,
}

impl NodeShape {
    /// Minutes of the node's price one spot interruption costs in this pool.
    pub fn spot_interruption_minutes(&self) -> f64 {
        self.spot_interruption_cost
            .map_or(DEFAULT_SPOT_INTERRUPTION_MINUTES, |d| {
                d.as_secs_f64() / 60.0
            })
    }

    /// The capacity a node of `it` will have in this pool; `None` when the pool cannot use the
    /// type at all (GPU sharing the type's GPU does not support).
    pub fn capacity(&self, it: &InstanceType) -> Option<BTreeMap<String, u64>> {
        self.capacity_with(it, self.gpu_sharing.as_ref())
    }

    /// The MIG layouts a node of `it` may get in this pool when the pool leaves the layout to
    /// the solver (`gpuSharing: {strategy: mig}` without `migConfig`); `None` otherwise.
    pub fn auto_mig_layouts(&self, it: &InstanceType) -> Option<Vec<&'static str>> {
        if self.gpu_sharing != Some(GpuSharing::MigAuto) {
            return None;
        }
        Some(
            it.accelerator
                .as_ref()
                .filter(|a| a.count > 0 && !a.is_fractional())
                .map(|a| {
                    quartermaster_pricing::sharing::mig_layouts(a)
                        .iter()
                        .map(|l| l.name)
                        .collect()
                })
                .unwrap_or_default(),
        )
    }

    /// The capacity of a node of `it` in this pool with `layout` as its MIG layout (one of
    /// [`NodeShape::auto_mig_layouts`]), or the pool's own sharing when `None`.
    pub fn capacity_in_layout(
        &self,
        it: &InstanceType,
        layout: Option<&str>,
    ) -> Option<BTreeMap<String, u64>> {
        match layout {
            Some(config) => self.capacity_with(
                it,
                Some(&GpuSharing::Mig {
                    config: config.to_owned(),
                }),
            ),
            None => self.capacity(it),
        }
    }

    /// [`NodeShape::allocatable`] in a MIG layout (see [`NodeShape::capacity_in_layout`]).
    pub fn allocatable_in_layout(
        &self,
        it: &InstanceType,
        layout: Option<&str>,
    ) -> Option<BTreeMap<String, u64>> {
        self.capacity_in_layout(it, layout)
            .map(|c| it.allocatable_from(c))
    }

    fn capacity_with(
        &self,
        it: &InstanceType,
        sharing: Option<&GpuSharing>,
    ) -> Option<BTreeMap<String, u64>> {
        let mut capacity = match sharing {
            Some(sharing) => it.shared_capacity(sharing).ok()?,
            None => it.capacity(),
        };
        self.apply_overlays(it, &mut capacity);
        if let Some(e) = self.ephemeral_storage {
            let bytes = if e.local_nvme && it.local_nvme_gb > 0 {
                it.local_nvme_gb * quartermaster_pricing::resources::GB
            } else {
                e.root_volume_bytes.unwrap_or_else(|| {
                    quartermaster_pricing::resources::default_root_volume_bytes(it.cloud)
                })
            };
            capacity.insert(EPHEMERAL_STORAGE.to_owned(), bytes);
        }
        Some(capacity)
    }

    /// Sets the resources of every matching overlay, heaviest first (ties: by name).
    fn apply_overlays(&self, it: &InstanceType, capacity: &mut BTreeMap<String, u64>) {
        if self.overlays.is_empty() {
            return;
        }
        let Some(labels) = it.offerings.first().map(|o| it.offering_labels(o)) else {
            return;
        };
        let mut matching: Vec<&CapacityOverlay> = self
            .overlays
            .iter()
            .filter(|o| o.requirements.matches(&labels))
            .collect();
        matching.sort_by(|a, b| b.weight.cmp(&a.weight).then(a.name.cmp(&b.name)));
        let mut set: BTreeSet<&str> = BTreeSet::new();
        for overlay in matching {
            for (resource, amount) in &overlay.capacity {
                if set.insert(resource.as_str()) {
                    capacity.insert(resource.clone(), *amount);
                }
            }
        }
    }

    /// The allocatable of a node of `it` in this pool (see [`NodeShape::capacity`]).
    pub fn allocatable(&self, it: &InstanceType) -> Option<BTreeMap<String, u64>> {
        self.capacity(it).map(|c| it.allocatable_from(c))
    }
}

/// The ceilings of `spec.limits`.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolLimits {
    /// Capacity ceilings per resource; `i64::MAX` where unlimited.
    pub resources: Resources,
    /// `limits.nodes`.
    pub nodes: Option<u64>,
    /// `limits.maxHourlyCost`, dollars per hour.
    pub max_hourly_cost: Option<f64>,
    /// `spec.template.spec.maxGpuOvershoot`: a new node has at most this many accelerators
    /// more than its pods occupy, unless no node within the bound is cheaper per accelerator.
    pub max_gpu_overshoot: Option<u32>,
}

impl Default for PoolLimits {
    fn default() -> Self {
        Self {
            resources: Resources([i64::MAX; crate::resources::MAX_RESOURCES]),
            nodes: None,
            max_hourly_cost: None,
            max_gpu_overshoot: None,
        }
    }
}

/// What a pool already uses.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PoolUsage {
    /// Sum of node capacities.
    pub resources: Resources,
    /// Number of nodes and in-flight claims.
    pub nodes: u64,
    /// Sum of their prices, dollars per hour.
    pub hourly_cost: f64,
}

/// A node that exists (or a NodeClaim that is launching) with room the solver may use for free.
#[derive(Debug, Clone)]
pub struct ExistingNode {
    /// Node name (or NodeClaim name while in flight).
    pub name: String,
    /// True for a NodeClaim that has not registered yet: its pods are nominated, not bound.
    pub in_flight: bool,
    /// The NodePool that owns it, if any.
    pub node_pool: Option<String>,
    /// Node labels (zone, instance type, hostname, …), shared with the caller (an engine keeps
    /// them from one solve to the next).
    pub labels: Arc<BTreeMap<String, String>>,
    /// Taints (startup taints excluded for in-flight claims).
    pub taints: Vec<Taint>,
    /// Allocatable resources.
    pub allocatable: Resources,
    /// Pods bound (or nominated) to it, DaemonSet pods included; shared with the caller (an
    /// engine keeps its pods from one solve to the next).
    pub pods: Vec<Arc<Pod>>,
}

/// One offering the solver must not use (recently failed with insufficient capacity).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OfferingKey {
    /// Cloud.
    pub cloud: Cloud,
    /// Instance type name.
    pub instance_type: String,
    /// Zone.
    pub zone: String,
    /// Capacity type.
    pub capacity_type: CapacityType,
}

/// At most `max` new nodes of one plan on the offerings of `offerings` together: capacity the
/// cloud is known to hold only so much of (the simulator's `cloud.capacity`, which its
/// hindsight applies). The plan keeps to it where a node's alternatives allow, and the lower
/// bound counts it.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferingLimit {
    /// The offerings counted together.
    pub offerings: BTreeSet<OfferingKey>,
    /// How many new nodes they may take.
    pub max: u32,
}

/// Everything the solver looks at.
#[derive(Debug, Clone, Default)]
pub struct ClusterSnapshot {
    /// Resource names used by the resource vectors below.
    pub resources: ResourceTable,
    /// Pods to place.
    pub pending: Vec<Pod>,
    /// Nodes and in-flight NodeClaims.
    pub nodes: Vec<ExistingNode>,
    /// NodePools.
    pub node_pools: Vec<NodePoolSpec>,
    /// DaemonSet pod templates: their requests are overhead on every node they would run on.
    pub daemonsets: Vec<Pod>,
    /// Offerings marked unavailable.
    pub unavailable: BTreeSet<OfferingKey>,
    /// Limits on how many new nodes sets of offerings may take (usually none).
    pub offering_limits: Vec<OfferingLimit>,
}

impl ClusterSnapshot {
    /// Sets every NodePool's preference policy to `policy` (`--preference-policy`); `None`
    /// leaves each pool's own.
    pub fn override_preference_policy(&mut self, policy: Option<PreferencePolicy>) {
        if let Some(policy) = policy {
            for pool in &mut self.node_pools {
                pool.preferences.policy = policy;
            }
        }
    }
}
