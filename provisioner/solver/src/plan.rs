//! The solver's answer: a value describing what to buy and where pods go. Executing it is
//! somebody else's job.

use quartermaster_policies::{PreferencePolicy, Requirements};
use quartermaster_pricing::{CapacityType, Catalog, Cloud};

use crate::pod::PodRef;
use crate::preferences::PreferenceKind;
use crate::resources::Resources;
use crate::snapshot::NodePoolSpec;

/// One priced way to launch a node.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferingChoice {
    /// Instance type name.
    pub instance_type: String,
    /// Zone.
    pub zone: String,
    /// Capacity type.
    pub capacity_type: CapacityType,
    /// Dollars per hour.
    pub price_per_hour: f64,
}

impl OfferingChoice {
    /// Expected dollars per hour, what the solver ranks offerings by: the price plus, for spot
    /// capacity with a known interruption band in `catalog`, the expected cost of interruptions
    /// (band hourly rate × `pool`'s `spotInterruptionCost` of the node's price). The price for
    /// on-demand and reserved capacity, unknown bands and offerings `catalog` does not list.
    pub fn expected_cost_per_hour(&self, catalog: &Catalog, pool: &NodePoolSpec) -> f64 {
        let Some(it) = catalog.get(pool.cloud, &self.instance_type) else {
            return self.price_per_hour;
        };
        let Some(o) = it
            .offerings
            .iter()
            .find(|o| o.zone == self.zone && o.capacity_type == self.capacity_type)
        else {
            return self.price_per_hour;
        };
        let restart_cost = o.minutes_of_price(pool.node_shape.spot_interruption_minutes());
        catalog.expected_cost_per_hour(it, o, restart_cost)
    }
}

/// A node to buy: the seed of a NodeClaim.
#[derive(Debug, Clone, PartialEq)]
pub struct NewNode {
    /// The NodePool it belongs to.
    pub node_pool: String,
    /// Cloud of that pool.
    pub cloud: Cloud,
    /// The chosen (cheapest fitting) offering.
    pub offering: OfferingChoice,
    /// Other offerings that would also hold all of `pods`, cheapest first: the launcher falls back
    /// to them on insufficient capacity without re-solving.
    pub alternatives: Vec<OfferingChoice>,
    /// Pods placed on it.
    pub pods: Vec<PodRef>,
    /// Sum of their requests (DaemonSet overhead excluded).
    pub requests: Resources,
    /// Requirements for the NodeClaim: the pool's, narrowed by what the pods need.
    pub requirements: Requirements,
    /// Set when the node is of an accelerator type and none of its pods requests the
    /// accelerator: why the plan buys it anyway (e.g. the only types offered in a zone a
    /// topology spread forces pods into).
    pub accelerator_note: Option<String>,
}

impl NewNode {
    /// The MIG layout the solver chose for the node (`nvidia.com/mig.config`), when its pool
    /// leaves the layout to the solver (`gpuSharing: {strategy: mig}` without `migConfig`).
    /// Launch it with that label, and count its capacity with
    /// [`crate::NodeShape::capacity_in_layout`].
    pub fn mig_config(&self) -> Option<&str> {
        self.requirements
            .get(crate::pack::shapes::MIG_CONFIG_LABEL)
            .and_then(|r| r.values())
            .filter(|v| v.len() == 1)
            .and_then(|v| v.iter().next())
            .map(String::as_str)
    }
}

/// Pods placed on a node that already exists or is already launching.
#[derive(Debug, Clone, PartialEq)]
pub struct ExistingPlacement {
    /// Node (or NodeClaim) name.
    pub node: String,
    /// True when the node is an in-flight NodeClaim (the pods are nominated to it).
    pub in_flight: bool,
    /// Pods placed.
    pub pods: Vec<PodRef>,
}

/// A pod that cannot be placed, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct Unschedulable {
    /// The pod.
    pub pod: PodRef,
    /// One sentence a user can act on.
    pub reason: String,
}

/// A soft constraint the solver dropped to place a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Relaxation {
    /// The pod.
    pub pod: PodRef,
    /// What was relaxed, e.g. `preferred node affinity (weight 50)`.
    pub relaxed: String,
}

/// A soft constraint of a pod group and what the plan did with it.
#[derive(Debug, Clone, PartialEq)]
pub struct PreferenceDecision {
    /// The workload whose pods carry it (`Deployment/ns/name`), or `Pod/ns/name`.
    pub pod_group: String,
    /// Node affinity, pod affinity, pod anti-affinity or topology spread.
    pub kind: PreferenceKind,
    /// The term, e.g. `quartermaster.dev/capacity-type In [spot]`.
    pub detail: String,
    /// Its weight (1–100; 100 for a `ScheduleAnyway` spread): heavier ones are honoured first.
    pub weight: i32,
    /// The policy of the NodePool that governs the pods.
    pub policy: PreferencePolicy,
    /// How many pending pods carry it.
    pub pods: usize,
    /// Whether the plan honours it (the packer may still relax it for a pod that cannot be
    /// placed otherwise; [`Plan::relaxations`] lists those).
    pub honoured: bool,
    /// Dollars per hour honouring it adds to the plan: for an honoured preference, the plan's
    /// cost minus the cost of the same plan without it; for a dropped one, the cost of the plan
    /// with it added minus the plan's cost. Measured by solving both. `None` when not measured
    /// (the engine does not ask; `plan` and `explain` do).
    pub cost_per_hour: Option<f64>,
    /// Pods that honouring it would leave pending (then it is dropped under `CostBounded`).
    pub leaves_pending: usize,
    /// How many other preferences were decided and measured together with this one (its cost
    /// is then an even share of theirs): past a dozen, the lightest are weighed as one batch to
    /// keep the number of solves small.
    pub decided_with: usize,
}

/// The solver's answer.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// Nodes to buy.
    pub new_nodes: Vec<NewNode>,
    /// Placements on existing nodes and in-flight claims.
    pub existing: Vec<ExistingPlacement>,
    /// Pods that cannot be placed.
    pub unschedulable: Vec<Unschedulable>,
    /// Soft constraints relaxed.
    pub relaxations: Vec<Relaxation>,
    /// Every soft constraint of the pending pods, with whether it is honoured and what it costs,
    /// heaviest first.
    pub preferences: Vec<PreferenceDecision>,
    /// Added dollars per hour (sum of new nodes' prices).
    pub cost_per_hour: f64,
    /// A lower bound on the added cost of any plan that places the same pods.
    pub lower_bound_per_hour: f64,
    /// Remarks for the user (e.g. a NodePool planned without its NodeClass).
    pub notes: Vec<String>,
}

impl Plan {
    /// How far above the lower bound the plan's cost is, as a fraction (0.02 = 2%).
    pub fn gap(&self) -> f64 {
        if self.lower_bound_per_hour <= 0.0 {
            return if self.cost_per_hour <= 0.0 {
                0.0
            } else {
                f64::INFINITY
            };
        }
        (self.cost_per_hour - self.lower_bound_per_hour) / self.lower_bound_per_hour
    }
}
