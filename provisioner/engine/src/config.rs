//! Engine timings.

use chrono::TimeDelta;

/// How long the engine waits for things. Defaults follow Karpenter where it has an answer.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// A batch closes when no new pending pod arrived for this long (Karpenter: 1 s).
    pub batch_idle: TimeDelta,
    /// A batch closes at the latest this long after its first pod (Karpenter: 10 s).
    pub batch_max: TimeDelta,
    /// A registered node whose requested accelerators are not in allocatable after this long is
    /// replaced (device plugin never came up).
    pub accelerator_ready_budget: TimeDelta,
    /// A launched instance that has not registered as a node after this long is replaced
    /// (Karpenter: 15 min).
    pub registration_budget: TimeDelta,
    /// How long an offering stays unavailable after an insufficient-capacity error (Karpenter: 3 min).
    pub unavailable_ttl: TimeDelta,
    /// How often pods that could not be placed are tried again when nothing else changed.
    pub unschedulable_retry: TimeDelta,
    /// Longest wait between retries of a throttled or failed cloud call.
    pub max_backoff: TimeDelta,
    /// How often consolidation looks for a node to remove or replace with a cheaper one (only
    /// when something changed since its last look).
    pub consolidation_interval: TimeDelta,
    /// A replacement must be at least this fraction cheaper than the node it replaces (moving
    /// pods has a cost; no churn for pennies).
    pub consolidation_min_saving: f64,
    /// A spot node is replaced by another spot node only when at least this many instance types
    /// have a cheaper spot offering that fits its pods (Karpenter: 15), so that consolidation
    /// does not climb down a ladder of ever cheaper, ever more interrupted offerings. A NodePool
    /// overrides it with the annotation `quartermaster.dev/spot-to-spot-min-types`.
    pub spot_to_spot_min_types: usize,
    /// A node whose pods could run from scratch on capacity costing at most its price divided
    /// by this is retired: cordoned (nothing is evicted), so that new pods go to nodes of
    /// their size while its pods finish, and deleted once empty. It is reopened when a pod
    /// arrives that would otherwise need a node costing as much. Only nodes consolidation may
    /// not move pods off are retired (a `WhenEmpty` pool's, or those running a Job or a
    /// do-not-disrupt pod). A NodePool overrides it with the annotation
    /// `quartermaster.dev/retire-price-ratio` (`0` turns retirement off).
    pub retire_price_ratio: f64,
    /// An empty node of a `WhenEmpty` pool that costs at least this many times the cheapest
    /// offering of its own instance type the pool may buy is retired while it waits out
    /// `consolidateAfter`, as when it costs `retire_price_ratio` times the pool's cheapest
    /// offering: an on-demand node bought while spot was out is not refilled once spot is
    /// back (a pod that lands on it would buy the same machine for less than half). A node
    /// retired while empty is reopened for pods that would otherwise buy nodes costing at
    /// least its price divided by this. Off where retirement is
    /// (`quartermaster.dev/retire-price-ratio: "0"`).
    pub retire_same_type_price_ratio: f64,
    /// A node retirement looks at that costs at least this many times what it would cordon it
    /// against (and less than `retire_price_ratio` times) is soft-cordoned: tainted
    /// `quartermaster.dev/retiring:PreferNoSchedule`, so the kube-scheduler puts new pods on
    /// other nodes that fit and on it only when none does (no pod waits for a boot because of
    /// it). It drains as its pods finish instead of being refilled by a scheduler that spreads
    /// pods onto the emptiest node. `0` turns it off. A NodePool overrides it with the
    /// annotation `quartermaster.dev/soft-cordon-price-ratio`; it is off where retirement is.
    pub soft_cordon_price_ratio: f64,
    /// How the cluster's kube-scheduler scores nodes. A consolidation move is made only when it
    /// still saves once the pods it displaces are bound by that scoring (it reads no nomination:
    /// see `disruption::consolidation::binding`). `FollowsPlan`: as planned.
    pub scheduler_scoring: crate::SchedulerScoring,
    /// How many nodes one poll asks the solver about for retirement (the most expensive
    /// first; the others at the next poll). Each node is asked about again only when its
    /// pods changed.
    pub max_retire_checks: usize,
    /// The most nodes one consolidation move removes at once (also bounded by budgets, which
    /// usually bind first: 10% of a pool is 100 nodes only at 1,000). Karpenter stops at 100
    /// candidates to bound its search; ours asks the solver about halving prefixes, so a
    /// larger move costs a few more solves of a few thousand pods, and a fleet whose budget
    /// allows it converges in a handful of passes instead of one per hundred nodes (the
    /// `consolidation` bench at 4,030 nodes: 41 passes at 100, 6 at 1,000, each under 0.3 s).
    pub max_move_nodes: usize,
    /// The most existing nodes a consolidation question offers the solver as places for the
    /// moved pods (those with the most free room), which bounds a pass on a large cluster.
    pub max_target_nodes: usize,
    /// How many single nodes one consolidation pass asks the solver about (besides the
    /// multi-node moves). Together they bound the solver calls of a pass.
    pub max_single_candidates: usize,
    /// Put between the NodePool name and the counter in NodeClaim names (`gpu-k3x9q00001`),
    /// so names stay unique across controller restarts. Empty in simulations (`gpu-00001`).
    pub claim_name_tag: String,
    /// The NodeClaims planned for one gang must all be launched within this long; otherwise
    /// every one of them is deleted and the gang is planned again, whole (10 min).
    pub gang_launch_timeout: TimeDelta,
    /// An initialized node is not removed as empty until this long after it became
    /// initialized and after the last pod was nominated to it: the kube-scheduler needs time
    /// to see a new node and bind pods to it (Karpenter keeps a node "nominated" for twice the
    /// batch's longest wait for the same reason).
    pub binding_grace: TimeDelta,
    /// Node repair: which conditions, for how long, and the guard against mass repair.
    pub repair: crate::repair::RepairConfig,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            batch_idle: TimeDelta::seconds(1),
            batch_max: TimeDelta::seconds(10),
            accelerator_ready_budget: TimeDelta::minutes(10),
            registration_budget: TimeDelta::minutes(15),
            unavailable_ttl: TimeDelta::minutes(3),
            unschedulable_retry: TimeDelta::minutes(5),
            max_backoff: TimeDelta::minutes(1),
            consolidation_interval: TimeDelta::minutes(1),
            consolidation_min_saving: 0.05,
            spot_to_spot_min_types: 15,
            retire_price_ratio: 4.0,
            retire_same_type_price_ratio: 2.0,
            soft_cordon_price_ratio: 2.0,
            scheduler_scoring: crate::SchedulerScoring::LeastAllocated,
            max_retire_checks: 32,
            max_move_nodes: 1000,
            max_single_candidates: 5,
            max_target_nodes: 200,
            claim_name_tag: String::new(),
            gang_launch_timeout: TimeDelta::minutes(10),
            binding_grace: TimeDelta::seconds(20),
            repair: Default::default(),
        }
    }
}
