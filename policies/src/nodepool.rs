//! The `NodePool` custom resource (Karpenter v1 shape).

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::budget::{self, Budget, DisruptionReason};
pub use crate::common::{
    NodeClassReference, NodeSelectorRequirementWithMinValues, TemplateMetadata,
};
use crate::duration::{parse_duration, parse_nillable_duration};
use crate::error::PolicyError;
use crate::limits::Limits;
use crate::preference::{DEFAULT_PREFERENCE_BUDGET, PreferencePolicy, parse_preference_budget};
use crate::requirements::Requirements;

/// Default `expireAfter` (30 days), as in Karpenter.
pub const DEFAULT_EXPIRE_AFTER: &str = "720h";
/// Default `spotInterruptionCost`: what one spot interruption costs a pool, in minutes of the
/// node's price.
pub const DEFAULT_SPOT_INTERRUPTION_COST: &str = "5m";
/// Default `consolidateAfter`.
pub const DEFAULT_CONSOLIDATE_AFTER: &str = "0s";

/// A pool of nodes Quartermaster may launch: what they look like
/// (`template`), how many (`limits`), how they are disrupted
/// (`disruption`) and the pool's priority (`weight`).
// `printcolumn(..)` repeats `type_ = "string"`, which clippy mistakes for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "quartermaster.dev",
    version = "v1",
    kind = "NodePool",
    plural = "nodepools",
    shortname = "np",
    category = "quartermaster",
    status = "NodePoolStatus",
    derive = "PartialEq",
    doc = "NodePool describes the nodes Quartermaster may provision and how they are disrupted.",
    printcolumn(
        name = "NodeClass",
        type_ = "string",
        json_path = ".spec.template.spec.nodeClassRef.name"
    ),
    printcolumn(
        name = "Nodes",
        type_ = "string",
        json_path = ".status.resources.nodes"
    ),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "Cost/h", type_ = "number", json_path = ".status.hourlyCost"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "Weight",
        type_ = "integer",
        json_path = ".spec.weight",
        priority = 1
    ),
    printcolumn(
        name = "CPU",
        type_ = "string",
        json_path = ".status.resources.cpu",
        priority = 1
    ),
    printcolumn(
        name = "Memory",
        type_ = "string",
        json_path = ".status.resources.memory",
        priority = 1
    ),
    printcolumn(
        name = "GPUs",
        type_ = "string",
        json_path = ".status.resources.nvidia\\.com/gpu",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodePoolSpec {
    /// The template for the NodeClaims (and so nodes) of this pool.
    pub template: NodeClaimTemplate,
    /// How nodes of this pool are consolidated and disrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disruption: Option<Disruption>,
    /// Caps on the pool's total resources (`cpu`, `memory`,
    /// `nvidia.com/gpu`, `nodes`, ...) and `maxHourlyCost`, a ceiling on its
    /// summed price in dollars per hour.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, Quantity>,
    /// Priority among pools that fit a workload: higher first (1–100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 100))]
    pub weight: Option<i32>,
    /// Karpenter's static NodePool: a fixed node count. Accepted and kept; Quartermaster
    /// provisions for pending pods and does not hold the pool at this count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub replicas: Option<i64>,
    /// How the pods' soft constraints (preferred affinities, `ScheduleAnyway` spreads) are
    /// weighed against cost: `Respect` (at any price), `Ignore`, or `CostBounded` (the default:
    /// honoured, the heaviest first, while the plan costs at most `preferenceBudget` more than
    /// the plan without them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preference_policy: Option<PreferencePolicy>,
    /// `CostBounded`: how much more than the plan without preferences a plan may cost to
    /// honour them, as a percentage (default `"10%"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]+(\.[0-9]+)?%$"))]
    pub preference_budget: Option<String>,
    /// Node repair: how long each broken condition is tolerated before the node is replaced
    /// (the shape of Karpenter's NodePool repair RFC). Unset: the controller's defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repair: Option<RepairSpec>,
}

/// `spec.repair`: node repair for this pool's nodes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RepairSpec {
    /// `false` turns node repair off for this pool (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Per-condition tolerations: override the default rule of the same condition and status,
    /// or add a condition (one a node agent such as the Node Problem Detector publishes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub policies: Vec<RepairPolicySpec>,
    /// The toleration of every default rule this pool's `policies` do not name (`"30m"`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(s|m|h))+$"))]
    pub default_toleration_duration: Option<String>,
    /// Repair while at most this many of the pool's nodes are unhealthy… (default 1)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_unhealthy_nodes: Option<i64>,
    /// … or at most this percentage of them, whichever allows more (default 20).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub max_unhealthy_percentage: Option<i64>,
}

/// One condition node repair acts on.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RepairPolicySpec {
    /// The node condition type (`Ready`, `AcceleratedHardwareReady`, `NetworkUnavailable`).
    pub condition_type: String,
    /// The status that means broken: `False` (the default), `True` or `Unknown`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition_status: Option<String>,
    /// Only when the condition has this reason (`NvidiaXID48Error`, as the EKS node monitoring
    /// agent reports NVIDIA XID codes); unset: any reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub condition_reason: Option<String>,
    /// `Replace` (the default: a new node, the pods planned again) or `Reboot` (the instance
    /// is rebooted in place once, and replaced if still broken a toleration later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(Replace|Reboot)$"))]
    pub action: Option<String>,
    /// How long the node may stay so before it is replaced (`"10m"`).
    #[schemars(regex(pattern = r"^([0-9]+(s|m|h))+$"))]
    pub toleration: String,
}

/// The NodeClaim template of a NodePool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClaimTemplate {
    /// Labels and annotations for the nodes.
    #[serde(default, skip_serializing_if = "TemplateMetadata::is_empty")]
    pub metadata: TemplateMetadata,
    /// The NodeClaim spec.
    pub spec: NodeClaimTemplateSpec,
}

/// The spec part of a NodeClaim template.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClaimTemplateSpec {
    /// Constraints on the nodes' labels (instance type, zone, capacity type, GPU, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// Taints the nodes carry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints the nodes carry at startup, removed by some other agent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// The NodeClass with the cloud-specific launch configuration.
    pub node_class_ref: NodeClassReference,
    /// How long a node lives before it is replaced (`"720h"`) or `"Never"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(([0-9]+(s|m|h))+|Never)$"))]
    pub expire_after: Option<String>,
    /// How long a draining node may take before it is forcibly terminated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(s|m|h))+$"))]
    pub termination_grace_period: Option<String>,
    /// How the nodes' GPUs are shared (time-slicing, MPS or MIG), so pods asking for shared or
    /// MIG resources are counted against what the device plugin will advertise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_sharing: Option<GpuSharingSpec>,
    /// Guard against oversized GPU nodes: a new node never has more accelerators than the
    /// pods placed on it request by more than this, unless its price per accelerator is no
    /// higher than that of the cheapest node that keeps within it (an 8-GPU node for a 1-GPU
    /// pod). Unset: no guard.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_gpu_overshoot: Option<i64>,
    /// What one spot interruption costs, as time on the node (`"10m"`): the work it loses plus
    /// the time to get a new node. Spot offerings are ranked by expected cost, their price plus
    /// their interruption band's hourly rate times this duration of the node's price. Default
    /// `"5m"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(s|m|h))+$"))]
    pub spot_interruption_cost: Option<String>,
}

/// `spec.template.spec.gpuSharing`: how the GPUs of a NodePool's nodes are shared. The node
/// gets the label the GPU Operator reads (`nvidia.com/mig.config` for MIG,
/// `nvidia.com/device-plugin.config` for time-slicing and MPS) at launch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GpuSharingSpec {
    /// `time-slicing`, `mps` or `mig`.
    pub strategy: GpuSharingStrategy,
    /// Time-slicing and MPS: how many pods share one GPU (2 or more).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i64>,
    /// Time-slicing and MPS: advertise `nvidia.com/gpu.shared` instead of `nvidia.com/gpu`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rename_by_default: Option<bool>,
    /// MIG: the named layout every GPU gets (`all-1g.10gb`, `all-3g.40gb`, `all-balanced`, ...).
    /// Left out, Quartermaster chooses each node's layout (and instance type) to cover the
    /// pending slice requests at the least cost, and labels the node with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_config: Option<String>,
}

/// How GPUs are shared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum GpuSharingStrategy {
    /// CUDA time-slicing (the device plugin advertises each GPU `replicas` times).
    TimeSlicing,
    /// CUDA Multi-Process Service.
    Mps,
    /// Multi-Instance GPU partitions.
    Mig,
}

/// When nodes may be consolidated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum ConsolidationPolicy {
    /// Only nodes without workload pods.
    WhenEmpty,
    /// Empty nodes and nodes whose pods fit elsewhere or on a cheaper node.
    #[default]
    WhenEmptyOrUnderutilized,
    /// Karpenter's `Balanced`: the nodes `WhenEmptyOrUnderutilized` considers, consolidated only
    /// when the savings are worth the disruption: the share of the pool's hourly cost a move
    /// saves must be at least half the share of the pool's running pods it disrupts.
    Balanced,
}

/// Disruption settings of a NodePool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Disruption {
    /// Which nodes may be consolidated (default `WhenEmptyOrUnderutilized`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub consolidation_policy: Option<ConsolidationPolicy>,
    /// How long a node must be consolidatable before it is (`"30s"`), or `"Never"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(([0-9]+(s|m|h))+|Never)$"))]
    pub consolidate_after: Option<String>,
    /// Disruption budgets; when unset the default is `[{nodes: "10%"}]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budgets: Option<Vec<Budget>>,
}

/// Observed state of a NodePool.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodePoolStatus {
    /// `Ready`, `NodeClassReady`, `ValidationSucceeded`, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Current totals of the pool's nodes (`cpu`, `memory`, `nvidia.com/gpu`, `nodes`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub resources: BTreeMap<String, Quantity>,
    /// Current summed price of the pool's nodes, in dollars per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hourly_cost: Option<f64>,
    /// The NodeClass generation last reconciled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_observed_generation: Option<i64>,
}

impl NodePool {
    /// The template's `requirements`, parsed (template labels not included;
    /// see [`NodePool::node_requirements`]).
    pub fn requirements(&self) -> Result<Requirements, PolicyError> {
        Requirements::from_node_selector_requirements(&self.spec.template.spec.requirements)
    }

    /// The template requirements intersected with the template labels (each
    /// `key In [value]`): what every node of the pool satisfies.
    pub fn node_requirements(&self) -> Result<Requirements, PolicyError> {
        let labels = Requirements::from_labels(&self.spec.template.metadata.labels);
        Ok(self.requirements()?.intersect(&labels))
    }

    /// The weight; 0 when unset (the lowest priority).
    pub fn weight(&self) -> u32 {
        self.spec.weight.map_or(0, |w| w.max(0) as u32)
    }

    /// The parsed limits.
    pub fn limits(&self) -> Result<Limits, PolicyError> {
        Limits::from_resource_list(&self.spec.limits)
    }

    /// The node class reference.
    pub fn node_class_ref(&self) -> &NodeClassReference {
        &self.spec.template.spec.node_class_ref
    }

    /// `expireAfter` (default 720h); `None` for `"Never"`.
    pub fn expire_after(&self) -> Result<Option<Duration>, PolicyError> {
        let text = self
            .spec
            .template
            .spec
            .expire_after
            .as_deref()
            .unwrap_or(DEFAULT_EXPIRE_AFTER);
        Ok(parse_nillable_duration(text)?)
    }

    /// `terminationGracePeriod`; `None` when unset (wait for pods indefinitely).
    pub fn termination_grace_period(&self) -> Result<Option<Duration>, PolicyError> {
        self.spec
            .template
            .spec
            .termination_grace_period
            .as_deref()
            .map(parse_duration)
            .transpose()
            .map_err(Into::into)
    }

    /// `spotInterruptionCost` (default [`DEFAULT_SPOT_INTERRUPTION_COST`], 5 minutes).
    pub fn spot_interruption_cost(&self) -> Result<Duration, PolicyError> {
        let text = self
            .spec
            .template
            .spec
            .spot_interruption_cost
            .as_deref()
            .unwrap_or(DEFAULT_SPOT_INTERRUPTION_COST);
        Ok(parse_duration(text)?)
    }

    /// `spec.preferencePolicy` (default `CostBounded`).
    pub fn preference_policy(&self) -> PreferencePolicy {
        self.spec.preference_policy.unwrap_or_default()
    }

    /// `spec.preferenceBudget` as a fraction (default [`DEFAULT_PREFERENCE_BUDGET`], 0.10).
    pub fn preference_budget(&self) -> Result<f64, PolicyError> {
        let text = self
            .spec
            .preference_budget
            .as_deref()
            .unwrap_or(DEFAULT_PREFERENCE_BUDGET);
        parse_preference_budget(text)
            .map_err(|reason| PolicyError::InvalidPreferenceBudget { reason })
    }

    /// The consolidation policy (default `WhenEmptyOrUnderutilized`).
    pub fn consolidation_policy(&self) -> ConsolidationPolicy {
        self.spec
            .disruption
            .as_ref()
            .and_then(|d| d.consolidation_policy)
            .unwrap_or_default()
    }

    /// `consolidateAfter` (default 0s); `None` for `"Never"`.
    pub fn consolidate_after(&self) -> Result<Option<Duration>, PolicyError> {
        let text = self
            .spec
            .disruption
            .as_ref()
            .and_then(|d| d.consolidate_after.as_deref())
            .unwrap_or(DEFAULT_CONSOLIDATE_AFTER);
        Ok(parse_nillable_duration(text)?)
    }

    /// The budgets as written; `None` when unset (the default budget applies).
    pub fn budgets(&self) -> Option<&[Budget]> {
        self.spec
            .disruption
            .as_ref()
            .and_then(|d| d.budgets.as_deref())
    }

    /// How many of the pool's `total_nodes` may be disrupted for `reason` at
    /// `now`: the minimum over active budgets that apply to `reason`
    /// (default budget `nodes: "10%"` when none is set; `total_nodes` when
    /// no budget applies; 0 for a malformed budget).
    pub fn allowed_disruptions(
        &self,
        reason: DisruptionReason,
        total_nodes: usize,
        now: DateTime<Utc>,
    ) -> usize {
        budget::allowed_disruptions(self.budgets(), reason, total_nodes, now)
    }
}

#[cfg(test)]
mod tests;
