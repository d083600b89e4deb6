//! Quartermaster's brain: `solve(&ClusterSnapshot, &Catalog, now) -> Plan`.
//!
//! Pure: no I/O, no async, no clock reads. Everything the solver needs is resolved into the
//! [`ClusterSnapshot`] first; the [`Plan`] it returns is a value that other code executes.

pub mod bound;
pub mod devices;
pub mod explain;
pub mod flex_start;
mod gang;
mod pack;
pub mod plan;
pub mod pod;
mod preferences;
pub mod resources;
pub mod snapshot;
pub mod static_nodes;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

pub use devices::DeviceFit;
/// Whether the solver treats two pods alike (the engine keys answers about pods by it).
pub use pack::classes::same_class;
/// Room helpers shared with the engine: how a catalog resource map becomes a resource vector, and
/// how much DaemonSets take from a node of a pool.
pub use pack::shapes::{MIG_CONFIG_LABEL, daemonset_overhead, to_resources};
pub use plan::{
    ExistingPlacement, NewNode, OfferingChoice, Plan, PreferenceDecision, Relaxation, Unschedulable,
};
pub use pod::{Gang, Pod, PodRef};
pub use preferences::{PreferenceKind, SPREAD_WEIGHT};
pub use quartermaster_policies::PreferencePolicy;
pub use resources::{ResourceTable, Resources};
pub use snapshot::{
    CapacityOverlay, ClusterSnapshot, EphemeralStorage, ExistingNode, NodePoolSpec, NodeShape,
    OfferingKey, OfferingLimit, PoolLimits, PoolUsage, PreferenceRule,
};

/// Label naming the NodePool that owns a node.
pub const NODEPOOL_LABEL: &str = "quartermaster.dev/nodepool";
/// Well-known instance type label.
pub const INSTANCE_TYPE_LABEL: &str = "node.kubernetes.io/instance-type";

use chrono::{DateTime, Utc};
use quartermaster_pricing::Catalog;

/// Which packing strategy to use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Quartermaster's cost-optimising packer (the default).
    #[default]
    CostOptimal,
    /// A Karpenter-style greedy baseline, for benchmarks: first-fit decreasing by CPU then memory,
    /// each new node taking as many pods as any compatible type can hold, then the cheapest type
    /// that fits them.
    KarpenterGreedy,
}

/// Knobs of one solve.
#[derive(Debug, Clone, Default)]
pub struct SolveOptions {
    /// Packing strategy.
    pub strategy: Strategy,
    /// Leave out the lower bound: [`Plan::lower_bound_per_hour`] is then 0 (the trivial
    /// bound). The engine acts on plans and never reads their bound, which is up to a third of
    /// a large solve; `plan`, `explain` and `bench` report it.
    pub skip_lower_bound: bool,
    /// Measure what every soft constraint costs ([`PreferenceDecision::cost_per_hour`]), with
    /// one more solve per preference the policy decision did not already measure. `plan` and
    /// `explain` ask; the engine does not.
    pub price_preferences: bool,
    /// How much improvement to do after construction, in percent of the default's work
    /// (`None` is 100): the phase stops when it has made that many candidate checks or finds
    /// nothing more. 0 keeps the construction's plan; more buys cheaper plans on large
    /// snapshots for time. Counted in work, never in time, so a plan never depends on the
    /// machine.
    pub search_effort: Option<u32>,
}

/// Decides what to buy for `snapshot.pending`: the cheapest plan the packer finds, with a lower
/// bound on the cost of any plan. Pure and deterministic.
pub fn solve(snapshot: &ClusterSnapshot, catalog: &Catalog, now: DateTime<Utc>) -> Plan {
    solve_with(snapshot, catalog, now, &SolveOptions::default())
}

/// [`solve`] with explicit options.
pub fn solve_with(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    now: DateTime<Utc>,
    options: &SolveOptions,
) -> Plan {
    preferences::solve(snapshot, catalog, now, options)
}
