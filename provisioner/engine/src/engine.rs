//! The engine proper: events in, actions out.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_cloud::{CloudError, Instance, LaunchOffering, LaunchRequest};
use quartermaster_policies::DisruptionReason;
use quartermaster_pricing::{CapacityType, Catalog, Cloud};
use quartermaster_solver::resources::PODS;
use quartermaster_solver::{
    ClusterSnapshot, ExistingNode, MIG_CONFIG_LABEL, NODEPOOL_LABEL, OfferingChoice, OfferingKey,
    Plan, Pod, PodRef, ResourceTable, Resources, daemonset_overhead, to_resources,
};

#[path = "adopt.rs"]
mod adopt;
#[path = "consolidation.rs"]
mod consolidation;
#[path = "drift.rs"]
mod drift;
#[path = "explain.rs"]
mod explain;
#[path = "flex_start.rs"]
mod flex_start;
#[path = "gangs.rs"]
pub(crate) mod gangs;
#[path = "provisioning_requests.rs"]
pub(crate) mod provisioning_requests;
#[path = "static_pools.rs"]
mod static_pools;

/// How long a node whose consolidation was called off is left alone.
const CONSOLIDATION_BACKOFF: TimeDelta = TimeDelta::minutes(15);

use crate::config::EngineConfig;
use crate::disruption::DisruptionState;
use crate::events::{Action, DeleteReason, Event};
use crate::pools::PoolPolicy;
use crate::state::{Claim, GangLaunch, NodeFacts, Phase, PodEntry, PodState};
use crate::unavailable::UnavailableOfferings;

/// What the engine is built from.
#[derive(Debug, Clone)]
pub struct EngineSetup {
    /// Resource names used by every pod and node vector.
    pub resources: ResourceTable,
    /// NodePools.
    pub pools: Vec<PoolPolicy>,
    /// DaemonSet pod templates (overhead on every node they run on).
    pub daemonsets: Vec<Pod>,
    /// The price catalog.
    pub catalog: Catalog,
}

/// Counters for reports.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Solver runs.
    pub solves: u64,
    /// NodeClaims created.
    pub claims_created: u64,
    /// Launch calls asked for.
    pub launches: u64,
    /// Launches that failed with insufficient capacity (or quota).
    pub capacity_errors: u64,
    /// Launches retried on the claim's next offering after a capacity error.
    pub fallbacks: u64,
    /// Of those, fallbacks from spot to on-demand.
    pub spot_to_on_demand: u64,
    /// Claims given up because no offering was left; their pods were planned again.
    pub claims_abandoned: u64,
    /// Throttled or failed calls retried with backoff.
    pub retries: u64,
    /// Nodes replaced because their accelerators never appeared.
    pub accelerator_timeouts: u64,
    /// Instances replaced because they never registered.
    pub registration_timeouts: u64,
    /// Spot interruption notices handled.
    pub interruptions: u64,
    /// Empty nodes removed.
    pub empty_deletions: u64,
    /// Underutilized nodes removed because their pods moved to other nodes (completed moves).
    pub consolidation_deletes: u64,
    /// Nodes replaced by a cheaper one (completed moves).
    pub consolidation_replacements: u64,
    /// Consolidations called off because no cheaper replacement could launch.
    pub consolidations_cancelled: u64,
    /// Gangs whose planned NodeClaims were launched as a group.
    pub gang_launches: u64,
    /// Gang launches rolled back (a member could not be launched in the gang's zone in time).
    pub gang_rollbacks: u64,
    /// NodeClaims deleted by those rollbacks.
    pub gang_claims_rolled_back: u64,
    /// Nominations given up because the cluster bound other pods into their room (or the pod
    /// elsewhere): those pods were solved again.
    pub nominations_released: u64,
    /// Nodes replaced because a condition said they were broken (node repair).
    pub repairs: u64,
    /// Repairs held back because too many of a pool's nodes were unhealthy at once.
    pub repairs_held: u64,
    /// Nodes node repair rebooted in place (a rule with action `Reboot`).
    pub repair_reboots: u64,
    /// Solves that placed CapacityBuffer placeholders (after the real pods' solve).
    pub headroom_solves: u64,
    /// NodeClaims launched into a reservation (ODCR or Capacity Block).
    pub reserved_launches: u64,
    /// Nodes drained because their Capacity Block (or reservation) was ending.
    pub reservation_drains: u64,
    /// Flex-start nodes drained because their run was ending.
    pub flex_start_drains: u64,
}

impl EngineStats {
    /// Adds `other`'s counts to these (an engine rebuilt after a restart starts from zero; a
    /// driver that keeps figures across restarts sums them).
    pub fn add(&mut self, other: &EngineStats) {
        let EngineStats {
            solves,
            claims_created,
            launches,
            capacity_errors,
            fallbacks,
            spot_to_on_demand,
            claims_abandoned,
            retries,
            accelerator_timeouts,
            registration_timeouts,
            interruptions,
            empty_deletions,
            consolidation_deletes,
            consolidation_replacements,
            consolidations_cancelled,
            gang_launches,
            gang_rollbacks,
            gang_claims_rolled_back,
            nominations_released,
            repairs,
            repairs_held,
            repair_reboots,
            headroom_solves,
            reserved_launches,
            reservation_drains,
            flex_start_drains,
        } = other;
        self.solves += solves;
        self.claims_created += claims_created;
        self.launches += launches;
        self.capacity_errors += capacity_errors;
        self.fallbacks += fallbacks;
        self.spot_to_on_demand += spot_to_on_demand;
        self.claims_abandoned += claims_abandoned;
        self.retries += retries;
        self.accelerator_timeouts += accelerator_timeouts;
        self.registration_timeouts += registration_timeouts;
        self.interruptions += interruptions;
        self.empty_deletions += empty_deletions;
        self.consolidation_deletes += consolidation_deletes;
        self.consolidation_replacements += consolidation_replacements;
        self.consolidations_cancelled += consolidations_cancelled;
        self.gang_launches += gang_launches;
        self.gang_rollbacks += gang_rollbacks;
        self.gang_claims_rolled_back += gang_claims_rolled_back;
        self.nominations_released += nominations_released;
        self.repairs += repairs;
        self.repairs_held += repairs_held;
        self.repair_reboots += repair_reboots;
        self.headroom_solves += headroom_solves;
        self.reserved_launches += reserved_launches;
        self.reservation_drains += reservation_drains;
        self.flex_start_drains += flex_start_drains;
    }
}

/// A NodeClaim as reports see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClaimView {
    /// NodeClaim name.
    pub name: String,
    /// NodePool.
    pub node_pool: String,
    /// Cloud.
    pub cloud: Cloud,
    /// The offering it launched (or is launching) with.
    pub offering: OfferingChoice,
    /// Node name once registered.
    pub node_name: Option<String>,
    /// Provider id once launched.
    pub provider_id: Option<String>,
    /// Whether the node is initialized.
    pub initialized: bool,
    /// When the claim was created.
    pub created_at: DateTime<Utc>,
    /// When its node was initialized.
    pub initialized_at: Option<DateTime<Utc>>,
    /// Labels its node must carry (pool template, offering, NodePool).
    pub labels: std::sync::Arc<BTreeMap<String, String>>,
    /// Whether its deletion was asked for.
    pub deleting: bool,
    /// Hash of the NodePool template it was created from (label
    /// `quartermaster.dev/nodepool-hash`, also in `labels`).
    pub template_hash: String,
    /// When the launch was accepted.
    pub launched_at: Option<DateTime<Utc>>,
    /// When its node registered.
    pub registered_at: Option<DateTime<Utc>>,
    /// The gang it was launched for (label `quartermaster.dev/gang`), if any.
    pub gang: Option<String>,
}

/// Batch windows kept for the driver when it does not take them (the simulator): a bound, not
/// a figure anyone reads.
const MAX_CLOSED_BATCHES: usize = 1024;

/// Batching of pending pods.
#[derive(Debug, Clone, Default)]
struct Batch {
    first: Option<DateTime<Utc>>,
    last: Option<DateTime<Utc>>,
    force: bool,
}

/// The provisioning engine. See the crate docs.
#[derive(Debug, Clone)]
pub struct Engine {
    config: EngineConfig,
    setup: EngineSetup,
    pods: BTreeMap<PodRef, PodEntry>,
    claims: BTreeMap<String, Claim>,
    unavailable: UnavailableOfferings,
    batch: Batch,
    retry_unschedulable_at: Option<DateTime<Utc>>,
    actions: Vec<Action>,
    next_claim: u64,
    stats: EngineStats,
    last_poll: Option<DateTime<Utc>>,
    /// When the provisioner last bought nodes for pending pods, by pool: a pool still growing
    /// is not consolidated (its nodes ripen `consolidateAfter` after the last such launch, so
    /// a ramp of arrivals is not met with evictions).
    pub(crate) grew_at: Vec<Option<DateTime<Utc>>>,
    /// Bumped whenever pods or nodes change; consolidation skips a look when nothing changed.
    version: u64,
    consolidation_seen: Option<u64>,
    /// Whether nominations may no longer fit: a pod was bound somewhere else than nominated, or
    /// a claim's room changed (it fell back to another offering). The solver never
    /// over-nominates, so nothing else can make them overflow.
    nominations_dirty: bool,
    consolidation_next: Option<DateTime<Utc>>,
    consolidation_wake: Option<DateTime<Utc>>,
    /// Per pool: when a static pool that could not get a node tries again.
    static_retry_at: Vec<Option<DateTime<Utc>>>,
    /// Do-not-disrupt annotations, PodDisruptionBudgets, moves in progress, counters.
    disruption: DisruptionState,
    /// Gang launches in progress, by gang.
    gangs: BTreeMap<String, GangLaunch>,
    /// Batch windows closed by a solve since the driver last took them (first pod to solve).
    closed_batches: Vec<TimeDelta>,
    /// Unhealthy nodes and since when (node repair).
    repairs: crate::repair::RepairTracker,
    /// Why node repair replaced a claim, until the claim is gone.
    repair_reasons: BTreeMap<String, String>,
    /// Node repair as each pool has it (the engine's defaults with the pool's `spec.repair`).
    repair_configs: Vec<crate::repair::RepairConfig>,
    /// CapacityBuffers' placeholders and the room they hold.
    headroom: crate::headroom::Headroom,
    /// Reservations the pools may launch into.
    reservations: Vec<crate::ReservationOffer>,
    /// Reservations that accepted launches at the last poll (one starting wakes waiting pods).
    reservations_open: BTreeSet<String>,
    /// Whether a flex-start claim may exist (a pool opted in, or one was adopted): until then
    /// no poll looks for flex-start nodes to drain.
    flex_start_seen: bool,
}

impl Engine {
    /// A new engine with no pods and no nodes.
    pub fn new(setup: EngineSetup, config: EngineConfig) -> Self {
        let setup = flex_start::with_offerings(setup);
        let flex_start_seen =
            quartermaster_solver::flex_start::any_opts_in(setup.pools.iter().map(|p| &p.spec));
        let static_retry_at = vec![None; setup.pools.len()];
        let repair_configs = setup
            .pools
            .iter()
            .map(|p| p.repair.resolve(&config.repair))
            .collect();
        Self {
            config,
            setup,
            pods: BTreeMap::new(),
            claims: BTreeMap::new(),
            unavailable: UnavailableOfferings::default(),
            batch: Batch::default(),
            retry_unschedulable_at: None,
            actions: Vec::new(),
            next_claim: 0,
            stats: EngineStats::default(),
            last_poll: None,
            grew_at: Vec::new(),
            version: 0,
            consolidation_seen: None,
            nominations_dirty: false,
            consolidation_next: None,
            consolidation_wake: None,
            static_retry_at,
            disruption: DisruptionState::default(),
            gangs: BTreeMap::new(),
            closed_batches: Vec::new(),
            repairs: Default::default(),
            repair_reasons: BTreeMap::new(),
            repair_configs,
            headroom: Default::default(),
            reservations: Vec::new(),
            reservations_open: BTreeSet::new(),
            flex_start_seen,
        }
    }

    /// The batch windows closed since the last call: for each solve of pending pods, the time
    /// from the first pod of its batch to the solve (for `/metrics`).
    pub fn take_batch_windows(&mut self) -> Vec<TimeDelta> {
        std::mem::take(&mut self.closed_batches)
    }

    /// Counters so far.
    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }

    /// Pods waiting for a place, with the reason the last solve gave (if it could not place them).
    pub fn waiting(&self) -> impl Iterator<Item = (&PodRef, Option<&str>)> {
        self.pods.iter().filter_map(|(id, e)| match &e.state {
            PodState::Waiting { reason, .. } => Some((id, reason.as_deref())),
            _ => None,
        })
    }

    /// Whether the NodeClaim `name` is live (without building its view).
    pub fn has_claim(&self, name: &str) -> bool {
        self.claims.contains_key(name)
    }

    /// Every live NodeClaim.
    pub fn claims(&self) -> impl Iterator<Item = ClaimView> + '_ {
        self.claims.values().map(|c| self.view(c))
    }

    /// The claim named `name`, if the engine knows it.
    pub fn claim(&self, name: &str) -> Option<ClaimView> {
        self.claims.get(name).map(|c| self.view(c))
    }

    fn view(&self, c: &Claim) -> ClaimView {
        ClaimView {
            name: c.name.clone(),
            node_pool: self.setup.pools[c.pool].spec.name.clone(),
            cloud: c.cloud,
            offering: c.offering.clone(),
            node_name: c.node().map(|n| n.name.clone()),
            provider_id: c.provider_id.clone(),
            initialized: c.phase == Phase::Initialized,
            created_at: c.created_at,
            initialized_at: c.initialized_at,
            labels: c.node_labels(),
            deleting: c.deleting,
            template_hash: c.template_hash.clone(),
            launched_at: c.launched_at,
            registered_at: c.registered_at,
            gang: c.gang.as_ref().map(|g| g.gang.clone()),
        }
    }

    /// The claim a pod is nominated or bound to.
    pub fn placement(&self, pod: &PodRef) -> Option<&str> {
        match &self.pods.get(pod)?.state {
            PodState::Nominated { claim } | PodState::Bound { claim } => Some(claim.as_str()),
            PodState::Waiting { .. } => None,
        }
    }

    /// Pods nominated to `claim` and not bound yet (where the driver may tell the
    /// kube-scheduler they are expected).
    pub fn nominated_to<'a>(&'a self, claim: &'a str) -> impl Iterator<Item = &'a PodRef> + 'a {
        self.pods.iter().filter_map(move |(id, e)| match &e.state {
            PodState::Nominated { claim: c } if c == claim => Some(id),
            _ => None,
        })
    }

    /// Records what happened at `now`.
    pub fn handle(&mut self, now: DateTime<Utc>, event: Event) {
        // The cluster binding a pod where it was nominated changes nothing the engine decides
        // on (the room was counted already): consolidation need not look again for it.
        if !self.confirms_nomination(&event) {
            self.version += 1;
            if matches!(event, Event::PodBound { .. }) {
                self.nominations_dirty = true;
            }
        }
        match event {
            Event::PodPending(pod) => {
                // A pod seen again (a watch re-list, a duplicate event) keeps its nomination:
                // reporting it twice must never provision for it twice.
                if let Some(entry) = self.pods.get_mut(&pod.id)
                    && !matches!(entry.state, PodState::Waiting { .. })
                {
                    entry.pod = pod.into();
                    return;
                }
                let id = pod.id.clone();
                self.pods.insert(
                    id,
                    PodEntry {
                        pod: pod.into(),
                        state: PodState::Waiting {
                            since: now,
                            reason: None,
                        },
                    },
                );
                self.arrive(now);
            }
            Event::PodGone(id) => {
                if let Some(PodEntry {
                    state: PodState::Bound { claim } | PodState::Nominated { claim },
                    ..
                }) = self.pods.remove(&id)
                    && let Some(c) = self.claims.get_mut(&claim)
                {
                    c.last_change = now;
                }
            }
            Event::Launched { claim, instance } => self.launched(now, &claim, instance),
            Event::LaunchFailed { claim, error } => self.launch_failed(now, &claim, &error),
            Event::NodeRegistered { claim, node } => {
                if let Some(c) = self.claims.get_mut(&claim) {
                    c.phase = c.phase.max(Phase::Registered);
                    c.registered_at.get_or_insert(now);
                    let pool = c.pool;
                    self.observe_health(pool, &claim, &node.conditions, now);
                    if let Some(c) = self.claims.get_mut(&claim) {
                        c.facts.set_node(Some(node));
                    }
                    self.check_initialized(now, &claim);
                }
            }
            Event::NodeUpdated { node } => {
                let claim = self
                    .claims
                    .values()
                    .find(|c| c.node().is_some_and(|n| n.name == node.name));
                if let Some((name, pool)) = claim.map(|c| (c.name.clone(), c.pool)) {
                    // Repair sees every change of a node's conditions as it comes.
                    self.observe_health(pool, &name, &node.conditions, now);
                    if let Some(c) = self.claims.get_mut(&name) {
                        c.facts.set_node(Some(node));
                    }
                    self.check_initialized(now, &name);
                }
            }
            Event::Interruption {
                provider_id,
                terminates_at,
            } => self.interrupted(now, &provider_id, terminates_at),
            Event::InstanceGone { provider_id } => {
                if let Some(name) = self.claim_by_provider_id(&provider_id) {
                    self.remove_claim(now, &name);
                }
            }
            Event::Deleted { claim } => self.remove_claim(now, &claim),
            Event::ClaimFound(found) => self.adopt(now, found),
            Event::PodBound { pod, node } => self.pod_bound(now, pod, &node),
            Event::ClaimDeleting { claim } => self.deleting_elsewhere(now, &claim),
            Event::PodDoNotDisrupt { pod, on } => self.protect_pod(pod, on),
            Event::NodeDoNotDisrupt { node, on } => self.protect_node(node, on),
            Event::DisruptionBudgets(pdbs) => self.disruption.pdbs = pdbs,
            Event::CatalogChanged(catalog) => self.catalog_changed(catalog),
            Event::PoolsChanged(pools) => {
                self.pools_changed(pools);
                self.add_flex_start_offerings();
            }
            Event::CloudDrifted {
                provider_id,
                reason,
            } => self.cloud_drifted(&provider_id, reason),
            Event::BuffersChanged(buffers) => {
                self.headroom.set(&buffers);
            }
            Event::ReservationsChanged(offers) => self.reservations_changed(now, offers),
            Event::RebootFailed { claim, error } => self.reboot_failed(now, &claim, &error),
        }
    }

    /// Whether `event` is the cluster binding a pod onto the claim it was nominated to.
    fn confirms_nomination(&self, event: &Event) -> bool {
        let Event::PodBound { pod, node } = event else {
            return false;
        };
        let Some(PodEntry {
            state: PodState::Nominated { claim },
            ..
        }) = self.pods.get(&pod.id)
        else {
            return false;
        };
        self.claims
            .get(claim)
            .and_then(|c| c.node())
            .is_some_and(|n| n.name == *node)
    }

    /// Decides what to do at `now`.
    pub fn poll(&mut self, now: DateTime<Utc>) -> Vec<Action> {
        self.last_poll = Some(now);
        if self.unavailable.expire(now) && self.any_unschedulable() {
            self.batch.force = true;
        }
        self.check_nominations(now);
        self.gang_progress(now);
        self.retry_launches(now);
        self.enforce_budgets(now);
        self.repair_nodes(now);
        self.drain_reservations(now);
        self.drain_flex_start(now);
        self.keep_static_pools(now);
        if self.batch_due(now) {
            self.solve(now);
        }
        self.keep_headroom(now);
        self.remove_empty(now);
        self.expire(now);
        self.consolidate(now);
        std::mem::take(&mut self.actions)
    }

    /// The next time [`Engine::poll`] has something to do by itself (nothing else happening).
    pub fn next_deadline(&self) -> Option<DateTime<Utc>> {
        let mut times: Vec<DateTime<Utc>> = Vec::new();
        if self.batch.force
            && let Some(at) = self.batch.last.or(self.batch.first)
        {
            return Some(at);
        }
        if let (Some(first), Some(last)) = (self.batch.first, self.batch.last) {
            times.push((last + self.config.batch_idle).min(first + self.config.batch_max));
        }
        times.extend(self.retry_unschedulable_at);
        times.extend(self.repairs.next_due());
        times.extend(self.reservation_deadlines());
        if self.headroom.dirty {
            times.extend(self.last_poll.map(|t| t + TimeDelta::seconds(1)));
        }
        if self.headroom.loose().next().is_some() {
            times.extend(self.headroom.retry_at);
        }
        if self.any_unschedulable() {
            times.extend(self.unavailable.next_expiry());
        }
        for c in self.claims.values().filter(|c| !c.deleting) {
            times.extend(c.retry_at);
            match c.phase {
                Phase::Launched => times.extend(self.registration_due(c)),
                Phase::Registered => times.extend(
                    c.registered_at
                        .map(|t| t + self.config.accelerator_ready_budget),
                ),
                Phase::Initialized | Phase::Launching => {}
            }
            times.extend(self.empty_deadline(c));
            if self.flex_start_seen {
                times.extend(flex_start::deadline(c));
            }
        }
        // Consolidation counts a nomination the cluster has not bound as settled once the grace
        // is over: wake up then, only for claims that have one (pods bound at once, as the
        // simulator's planned binder does, need no wake-up).
        let pending_grace: Vec<DateTime<Utc>> = self
            .claims
            .values()
            .filter(|c| c.phase == Phase::Initialized && !c.deleting)
            .filter_map(|c| c.nominated_at.map(|t| t + self.config.binding_grace))
            .filter(|t| self.last_poll.is_none_or(|p| *t > p))
            .collect();
        if !pending_grace.is_empty() {
            let unbound: BTreeSet<&str> = self
                .pods
                .values()
                .filter_map(|e| match &e.state {
                    PodState::Nominated { claim } => Some(claim.as_str()),
                    _ => None,
                })
                .collect();
            times.extend(
                self.claims
                    .values()
                    .filter(|c| c.phase == Phase::Initialized && !c.deleting)
                    .filter(|c| unbound.contains(c.name.as_str()))
                    .filter_map(|c| c.nominated_at.map(|t| t + self.config.binding_grace)),
            );
        }
        if self.consolidation_enabled() && self.consolidation_seen != Some(self.version) {
            times.extend(self.consolidation_next);
        }
        // A wake that comes due within the consolidation interval is acted on when the interval
        // ends (polled earlier, the pass would return and the wake would be lost).
        times.extend(
            self.consolidation_wake
                .map(|w| self.consolidation_next.map_or(w, |n| w.max(n))),
        );
        times.extend(self.static_deadlines());
        times.extend(self.disruption_deadline());
        times.extend(self.gang_deadlines());
        // What was due at the last poll and is still here is blocked (a disruption budget):
        // it is looked at again when something happens, not in a busy loop.
        times
            .into_iter()
            .filter(|t| self.last_poll.is_none_or(|p| *t > p))
            .min()
    }

    // ---------------------------------------------------------------- batching and solving

    fn arrive(&mut self, now: DateTime<Utc>) {
        self.batch.first.get_or_insert(now);
        self.batch.last = Some(now);
    }

    fn any_unschedulable(&self) -> bool {
        self.pods.values().any(|e| {
            matches!(
                e.state,
                PodState::Waiting {
                    reason: Some(_),
                    ..
                }
            )
        })
    }

    fn batch_due(&self, now: DateTime<Utc>) -> bool {
        if self.batch.force {
            return true;
        }
        if self.retry_unschedulable_at.is_some_and(|t| t <= now) {
            return true;
        }
        match (self.batch.first, self.batch.last) {
            (Some(first), Some(last)) => {
                now >= last + self.config.batch_idle || now >= first + self.config.batch_max
            }
            _ => false,
        }
    }

    fn snapshot(&self, now: DateTime<Utc>) -> (ClusterSnapshot, BTreeMap<String, String>) {
        self.snapshot_without(now, &[])
    }

    /// The solver's snapshot of the waiting pods; with `without`, of those claims' pods only, as
    /// if their nodes were gone (the question consolidation asks).
    ///
    /// Consolidation's question counts CapacityBuffer placeholders as residents (and those on
    /// `without` as pods to move), so the room a buffer holds is not taken for waste; the
    /// provisioning solve does not see them (a real pod takes buffer room first).
    fn snapshot_without(
        &self,
        now: DateTime<Utc>,
        without: &[&str],
    ) -> (ClusterSnapshot, BTreeMap<String, String>) {
        self.snapshot_of(now, without, !without.is_empty())
    }

    /// [`Engine::snapshot_without`], with placeholders as residents when `headroom`.
    fn snapshot_of(
        &self,
        now: DateTime<Utc>,
        without: &[&str],
        headroom: bool,
    ) -> (ClusterSnapshot, BTreeMap<String, String>) {
        let mut pools: Vec<_> = self.setup.pools.iter().map(|p| p.spec.clone()).collect();
        for pool in &mut pools {
            pool.usage = Default::default();
        }
        let mut nodes = Vec::new();
        let mut target_to_claim = BTreeMap::new();
        let mut pods_by_claim: BTreeMap<&str, Vec<Arc<Pod>>> = BTreeMap::new();
        for entry in self.pods.values() {
            if let PodState::Nominated { claim } | PodState::Bound { claim } = &entry.state {
                pods_by_claim
                    .entry(claim.as_str())
                    .or_default()
                    .push(entry.pod.clone());
            }
        }
        let mut loose_placeholders = Vec::new();
        if headroom {
            for (claim, pods) in self.headroom.by_claim() {
                if without.contains(&claim) {
                    loose_placeholders.extend(pods.into_iter().map(|p| (**p).clone()));
                } else {
                    pods_by_claim
                        .entry(claim)
                        .or_default()
                        .extend(pods.into_iter().cloned());
                }
            }
        }
        for c in self.claims.values() {
            let usage = &mut pools[c.pool].usage;
            usage.resources += c.capacity;
            usage.nodes += 1;
            usage.hourly_cost += c.offering.price_per_hour;
            if !c.schedulable() || without.contains(&c.name.as_str()) {
                continue;
            }
            let labels = c.facts.merged_labels();
            let target = c.target_name().to_owned();
            target_to_claim.insert(target.clone(), c.name.clone());
            nodes.push(ExistingNode {
                name: target,
                in_flight: c.phase != Phase::Initialized,
                node_pool: Some(self.setup.pools[c.pool].spec.name.clone()),
                labels,
                taints: self.setup.pools[c.pool].spec.taints.clone(),
                allocatable: c.room,
                pods: pods_by_claim.remove(c.name.as_str()).unwrap_or_default(),
            });
        }
        // A static pool keeps its count: pods may use its nodes, never make it grow.
        for (spec, policy) in pools.iter_mut().zip(&self.setup.pools) {
            if policy.replicas.is_some() {
                spec.limits.nodes = Some(spec.usage.nodes);
            }
        }
        let mut pending: Vec<Pod> = self
            .pods
            .values()
            .filter(|e| match &e.state {
                PodState::Waiting { .. } => without.is_empty(),
                PodState::Bound { claim } | PodState::Nominated { claim } => {
                    without.contains(&claim.as_str())
                }
            })
            .map(|e| (*e.pod).clone())
            .collect();
        pending.extend(loose_placeholders);
        let mut unavailable = self.unavailable.active(now);
        if !self.reservations.is_empty() {
            // Reserved capacity is used through its free slots only, never bought new.
            unavailable.extend(self.reserved_keys());
            if without.is_empty() {
                nodes.extend(self.reservation_stand_ins(now, &mut pools));
            }
        }
        let snapshot = ClusterSnapshot {
            resources: self.setup.resources.clone(),
            pending,
            nodes,
            node_pools: pools,
            daemonsets: self.setup.daemonsets.clone(),
            unavailable,
        };
        (snapshot, target_to_claim)
    }

    fn solve(&mut self, now: DateTime<Utc>) {
        let opened = self.batch.first;
        self.batch = Batch::default();
        self.retry_unschedulable_at = None;
        let (snapshot, target_to_claim) = self.snapshot(now);
        if snapshot.pending.is_empty() {
            return;
        }
        if let Some(first) = opened
            && self.closed_batches.len() < MAX_CLOSED_BATCHES
        {
            self.closed_batches.push(now - first);
        }
        self.stats.solves += 1;
        let plan = crate::engine::plan(&snapshot, &self.setup.catalog, now);
        for name in self.apply(now, plan, &target_to_claim) {
            let Some(pool) = self.claims.get(&name).map(|c| c.pool) else {
                continue;
            };
            if self.grew_at.len() <= pool {
                self.grew_at.resize(pool + 1, None);
            }
            self.grew_at[pool] = Some(now);
        }
    }

    /// CapacityBuffers: placeholders that no longer fit next to the real pods of their claim
    /// (or whose claim is going) let go of it; then every loose placeholder is solved into the
    /// room that is left, nodes bought for the rest (see [`crate::headroom`]).
    fn keep_headroom(&mut self, now: DateTime<Utc>) {
        if self.headroom.is_empty() {
            return;
        }
        let mut used: BTreeMap<&str, Resources> = BTreeMap::new();
        for e in self.pods.values() {
            if let PodState::Nominated { claim } | PodState::Bound { claim } = &e.state {
                *used.entry(claim.as_str()).or_default() += e.pod.requests;
            }
        }
        let mut released = Vec::new();
        for (id, p) in &self.headroom.placeholders {
            let Some(claim) = &p.claim else { continue };
            match self.claims.get(claim) {
                Some(c) if c.schedulable() => {
                    let room = used.entry(claim.as_str()).or_default();
                    let need = *room + p.pod.requests;
                    if need.first_excess(&c.room).is_some() {
                        released.push(id.clone());
                    } else {
                        *room = need;
                    }
                }
                _ => released.push(id.clone()),
            }
        }
        self.headroom.release(&released);
        if !self.headroom.due(now) {
            return;
        }
        self.headroom.dirty = false;
        let (mut snapshot, targets) = self.snapshot_of(now, &[], true);
        snapshot.pending = self.headroom.loose().map(|p| (*p.pod).clone()).collect();
        if snapshot.pending.is_empty() {
            self.headroom.retry_at = None;
            return;
        }
        self.stats.solves += 1;
        self.stats.headroom_solves += 1;
        self.version += 1;
        let plan = crate::engine::plan(&snapshot, &self.setup.catalog, now);
        for name in self.apply(now, plan, &targets) {
            let Some(pool) = self.claims.get(&name).map(|c| c.pool) else {
                continue;
            };
            if self.grew_at.len() <= pool {
                self.grew_at.resize(pool + 1, None);
            }
            self.grew_at[pool] = Some(now);
        }
        let any_loose = self.headroom.loose().next().is_some();
        self.headroom.retry_at = any_loose.then(|| now + self.config.unschedulable_retry);
    }

    // ---------------------------------------------------------------- reservations

    /// New reservations: the catalog gains their reserved offerings (priced 0); pods that
    /// could not be placed are looked at again.
    fn reservations_changed(&mut self, now: DateTime<Utc>, offers: Vec<crate::ReservationOffer>) {
        let reservations: Vec<quartermaster_pricing::Reservation> =
            offers.iter().map(|o| o.reservation.clone()).collect();
        self.setup.catalog = self.setup.catalog.with_reserved_offerings(&reservations);
        self.reservations = offers;
        if self.any_unschedulable() {
            self.arrive(now);
            self.batch.force = true;
        }
    }

    /// The reserved offerings: never bought as new nodes (only through a stand-in).
    fn reserved_keys(&self) -> impl Iterator<Item = OfferingKey> + '_ {
        self.reservations.iter().map(|o| OfferingKey {
            cloud: o.reservation.cloud,
            instance_type: o.reservation.instance_type.clone(),
            zone: o.reservation.zone.clone(),
            capacity_type: CapacityType::Reserved,
        })
    }

    /// One empty in-flight node per free slot of every reservation that takes launches now
    /// (see [`crate::reservations::stand_ins`]: the first of its pools that allows capacity
    /// type `reserved`, within the pool's limits, each stand-in counted in `pools`' usage).
    fn reservation_stand_ins(
        &self,
        now: DateTime<Utc>,
        pools: &mut [quartermaster_solver::NodePoolSpec],
    ) -> Vec<ExistingNode> {
        let mut used: BTreeMap<&str, u32> = BTreeMap::new();
        for c in self.claims.values().filter(|c| !c.deleting) {
            if let Some(id) = &c.reservation {
                *used.entry(id.as_str()).or_default() += 1;
            }
        }
        let specs: Vec<&quartermaster_solver::NodePoolSpec> =
            self.setup.pools.iter().map(|p| &p.spec).collect();
        crate::reservations::stand_ins(
            &self.reservations,
            &used,
            now,
            &specs,
            pools,
            |pool, choice| self.offering_room(pool, choice, None),
        )
    }

    /// A NodeClaim launched into reservation `id` for pool index `pool`; its name.
    fn reserved_claim(&mut self, now: DateTime<Utc>, id: &str, pool: usize) -> Option<String> {
        let r = self
            .reservations
            .iter()
            .find(|o| o.reservation.id == id)?
            .reservation
            .clone();
        let choice = OfferingChoice {
            instance_type: r.instance_type.clone(),
            zone: r.zone.clone(),
            capacity_type: CapacityType::Reserved,
            price_per_hour: 0.0,
        };
        let pool_name = self.setup.pools.get(pool)?.spec.name.clone();
        let name = self.next_claim_name(&pool_name);
        let mut claim = self.new_claim(now, &name, pool, choice, VecDeque::new(), None)?;
        claim.reservation = Some(r.id.clone());
        claim.facts.labels_mut().extend(r.node_labels());
        self.claims.insert(name.clone(), claim);
        self.stats.claims_created += 1;
        self.stats.reserved_launches += 1;
        Some(name)
    }

    /// Nodes of a reservation that is ending are drained (its pods planned elsewhere at once)
    /// before the cloud reclaims them; claims not launched yet are deleted. A reservation that
    /// opens while pods wait has them solved again.
    fn drain_reservations(&mut self, now: DateTime<Utc>) {
        if self.reservations.is_empty() {
            return;
        }
        let due: Vec<(String, DateTime<Utc>, bool)> = self
            .claims
            .values()
            .filter(|c| !c.deleting && c.interrupted_at.is_none())
            .filter_map(|c| {
                let id = c.reservation.as_deref()?;
                let r = &self
                    .reservations
                    .iter()
                    .find(|o| o.reservation.id == id)?
                    .reservation;
                let drain = r.drain_at().filter(|d| *d <= now)?;
                let reclaim = r.reclaim_at().unwrap_or(drain).max(now);
                Some((c.name.clone(), reclaim, c.provider_id.is_some()))
            })
            .collect();
        for (name, reclaim, launched) in due {
            self.stats.reservation_drains += 1;
            if launched {
                self.vacate(now, &name, reclaim);
            } else {
                self.delete(now, &name, DeleteReason::ReservationEnding);
            }
        }
        let open: BTreeSet<String> = self
            .reservations
            .iter()
            .filter(|o| o.reservation.accepts_launches(now))
            .map(|o| o.reservation.id.clone())
            .collect();
        if open.iter().any(|id| !self.reservations_open.contains(id)) && self.any_unschedulable() {
            self.arrive(now);
            self.batch.force = true;
        }
        self.reservations_open = open;
    }

    /// When a reservation opens, and when the nodes of one must be drained.
    fn reservation_deadlines(&self) -> Vec<DateTime<Utc>> {
        let mut out = Vec::new();
        if self.reservations.is_empty() {
            return out;
        }
        let in_use: BTreeSet<&str> = self
            .claims
            .values()
            .filter_map(|c| c.reservation.as_deref())
            .collect();
        for o in &self.reservations {
            out.extend(o.reservation.start);
            if in_use.contains(o.reservation.id.as_str()) {
                out.extend(o.reservation.drain_at());
            }
        }
        out
    }

    /// CapacityBuffer placeholders and the claims whose room they hold (for cost reports:
    /// headroom).
    pub fn headroom(&self) -> impl Iterator<Item = crate::headroom::HeadroomView<'_>> {
        self.headroom
            .placeholders
            .values()
            .map(|p| crate::headroom::HeadroomView {
                buffer: &p.buffer,
                pod: &p.pod,
                claim: p.claim.as_deref(),
            })
    }

    /// Carries out a plan; returns the names of the NodeClaims it created.
    fn apply(
        &mut self,
        now: DateTime<Utc>,
        plan: Plan,
        target_to_claim: &BTreeMap<String, String>,
    ) -> Vec<String> {
        let mut created = Vec::new();
        for placement in plan.existing {
            let claim = match target_to_claim.get(&placement.node) {
                Some(claim) => claim.clone(),
                // A free slot of a reservation: launched into it now.
                None => {
                    let Some((id, pool)) = crate::reservations::parse_stand_in(&placement.node)
                    else {
                        continue;
                    };
                    let Some(name) = self.reserved_claim(now, id, pool) else {
                        continue;
                    };
                    let gang = placement
                        .pods
                        .iter()
                        .find_map(|p| self.pods.get(p)?.pod.gang.as_ref())
                        .map(|g| g.name.clone());
                    created.push((name.clone(), gang));
                    name
                }
            };
            for pod in placement.pods {
                self.nominate(now, &pod, &claim);
            }
        }
        for node in plan.new_nodes {
            let Some(pool) = self
                .setup
                .pools
                .iter()
                .position(|p| p.spec.name == node.node_pool)
            else {
                continue;
            };
            let name = self.next_claim_name(&node.node_pool);
            let layout = node.mig_config().map(str::to_owned);
            let Some(claim) = self.new_claim(
                now,
                &name,
                pool,
                node.offering,
                node.alternatives.into(),
                layout,
            ) else {
                continue;
            };
            self.claims.insert(name.clone(), claim);
            self.stats.claims_created += 1;
            for pod in &node.pods {
                self.nominate(now, pod, &name);
            }
            let gang = node
                .pods
                .iter()
                .find_map(|p| self.pods.get(p)?.pod.gang.as_ref())
                .map(|g| g.name.clone());
            created.push((name, gang));
        }
        // A gang's claims are launched together, in its zone.
        self.group_gangs(now, &created);
        let created: Vec<String> = created.into_iter().map(|(name, _)| name).collect();
        for name in &created {
            self.launch(name);
        }
        let retry = now + self.config.unschedulable_retry;
        for u in plan.unschedulable {
            if let Some(entry) = self.pods.get_mut(&u.pod)
                && let PodState::Waiting { reason, .. } = &mut entry.state
            {
                *reason = Some(u.reason);
                self.retry_unschedulable_at = Some(retry);
            }
        }
        created
    }

    /// Plans `pod` on `claim`. A nomination is a hint: the pod stays `Nominated` until the
    /// cluster reports it bound (`Event::PodBound`), wherever that is. On an initialized claim
    /// the driver is told at once (`Action::Bind`: the simulator's planned binder binds, the
    /// controller records the nomination for the kube-scheduler).
    fn nominate(&mut self, now: DateTime<Utc>, pod: &PodRef, claim: &str) {
        let Some(entry) = self.pods.get_mut(pod) else {
            // A CapacityBuffer placeholder holds the room; nothing is ever bound for it.
            self.headroom.place(pod, claim);
            return;
        };
        entry.state = PodState::Nominated {
            claim: claim.to_owned(),
        };
        let Some(c) = self.claims.get_mut(claim) else {
            return;
        };
        c.nominated_at = Some(now);
        if c.phase == Phase::Initialized {
            c.empty_since = None;
            c.last_change = now;
            let node = c.target_name().to_owned();
            self.actions.push(Action::Bind {
                pod: pod.clone(),
                node,
            });
        }
    }

    /// Nominations are hints: the kube-scheduler binds pods where it likes, and pods it bound
    /// elsewhere may have taken the room the engine planned for others. Every claim keeps the
    /// pods nominated to it only while they fit next to what is bound there (in name order);
    /// the others wait again and are solved at once against the room that is really free.
    fn check_nominations(&mut self, now: DateTime<Utc>) {
        if !std::mem::take(&mut self.nominations_dirty) {
            return;
        }
        let mut used: BTreeMap<&str, Resources> = BTreeMap::new();
        for e in self.pods.values() {
            if let PodState::Bound { claim } = &e.state {
                *used.entry(claim.as_str()).or_default() += e.pod.requests;
            }
        }
        let mut released = Vec::new();
        for (id, e) in &self.pods {
            let PodState::Nominated { claim } = &e.state else {
                continue;
            };
            let Some(c) = self.claims.get(claim) else {
                released.push(id.clone());
                continue;
            };
            // A node being vacated keeps its pods where they run until they move.
            if c.vacating() || c.deleting {
                continue;
            }
            let room = used.entry(claim.as_str()).or_default();
            let need = *room + e.pod.requests;
            if need.first_excess(&c.room).is_some() {
                released.push(id.clone());
            } else {
                *room = need;
            }
        }
        if released.is_empty() {
            return;
        }
        self.stats.nominations_released += released.len() as u64;
        for id in released {
            if let Some(e) = self.pods.get_mut(&id) {
                e.state = PodState::Waiting {
                    since: now,
                    reason: None,
                };
            }
        }
        self.arrive(now);
        self.batch.force = true;
    }

    /// A new NodeClaim name for `pool`: unique in this engine and, through the claim-name tag,
    /// across restarts.
    fn next_claim_name(&mut self, pool: &str) -> String {
        let name = format!(
            "{pool}-{}{:05}",
            self.config.claim_name_tag, self.next_claim
        );
        self.next_claim += 1;
        name
    }

    fn new_claim(
        &self,
        now: DateTime<Utc>,
        name: &str,
        pool: usize,
        offering: OfferingChoice,
        alternatives: VecDeque<OfferingChoice>,
        mig_config: Option<String>,
    ) -> Option<Claim> {
        let policy = &self.setup.pools[pool];
        let (labels, capacity, room) =
            self.offering_room(pool, &offering, mig_config.as_deref())?;
        let template_hash = policy.template_hash.clone();
        Some(Claim {
            name: name.to_owned(),
            pool,
            cloud: self.setup.pools[pool].spec.cloud,
            offering,
            alternatives,
            facts: NodeFacts::new(labels),
            capacity,
            room,
            phase: Phase::Launching,
            provider_id: None,
            created_at: now,
            launched_at: None,
            registered_at: None,
            initialized_at: None,
            empty_since: None,
            nominated_at: None,
            retry_at: None,
            attempts: 0,
            interrupted_at: None,
            displaced: Vec::new(),
            deleting: false,
            consolidating: false,
            consolidation_replaced: false,
            consolidation_backoff: None,
            replaces: None,
            move_id: None,
            disruption_reason: None,
            template_hash,
            forced_at: None,
            last_change: now,
            gang: None,
            mig_config,
            reservation: None,
        })
    }

    /// Labels, capacity and room for pods of `offering` in `pool`, in MIG `layout` when the
    /// solver chose one (the node is labelled with it).
    fn offering_room(
        &self,
        pool: usize,
        offering: &OfferingChoice,
        layout: Option<&str>,
    ) -> Option<(BTreeMap<String, String>, Resources, Resources)> {
        let spec = &self.setup.pools[pool].spec;
        let it = self
            .setup
            .catalog
            .get(spec.cloud, &offering.instance_type)?;
        let o = it
            .offerings
            .iter()
            .find(|o| o.zone == offering.zone && o.capacity_type == offering.capacity_type)?;
        let mut labels = it.offering_labels(o);
        labels.extend(spec.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        labels.insert(NODEPOOL_LABEL.to_owned(), spec.name.clone());
        labels.insert(
            crate::disruption::TEMPLATE_HASH_LABEL.to_owned(),
            self.setup.pools[pool].template_hash.clone(),
        );
        // Karpenter's, the cloud's and the GPU Operator's labels for the same facts, so
        // workloads written for them schedule here (NodePool annotation to opt out).
        let annotations = self.setup.pools[pool]
            .node_pool
            .metadata
            .annotations
            .as_ref();
        if annotations.is_none_or(quartermaster_policies::labels::alias_labels_enabled) {
            let aliases = quartermaster_policies::labels::alias_labels(&labels);
            labels.extend(aliases);
        }
        if let Some(layout) = layout {
            labels.insert(MIG_CONFIG_LABEL.to_owned(), layout.to_owned());
        }
        let table = &self.setup.resources;
        // The pool's node shape: shared GPUs, overlays, the NodeClass's root volume.
        let capacity = to_resources(table, &spec.node_shape.capacity_in_layout(it, layout)?);
        let overhead = daemonset_overhead(&self.setup.daemonsets, &labels, spec);
        let room = to_resources(table, &spec.node_shape.allocatable_in_layout(it, layout)?)
            .saturating_sub(&overhead);
        Some((labels, capacity, room))
    }

    // ---------------------------------------------------------------- launching

    fn launch(&mut self, name: &str) {
        let Some(c) = self.claims.get(name) else {
            return;
        };
        let policy = &self.setup.pools[c.pool];
        let mut tags = BTreeMap::new();
        tags.insert(
            "quartermaster.dev/nodepool".to_owned(),
            policy.spec.name.clone(),
        );
        tags.insert("quartermaster.dev/nodeclaim".to_owned(), c.name.clone());
        let request = LaunchRequest {
            claim_name: c.name.clone(),
            node_pool: policy.spec.name.clone(),
            node_class: policy.node_class.clone(),
            instance_type: c.offering.instance_type.clone(),
            zone: c.offering.zone.clone(),
            capacity_type: c.offering.capacity_type,
            price_per_hour: c.offering.price_per_hour,
            labels: c.node_labels().as_ref().clone(),
            tags,
            fallbacks: c
                .alternatives
                .iter()
                .map(|o| LaunchOffering {
                    instance_type: o.instance_type.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type,
                    price_per_hour: o.price_per_hour,
                })
                .collect(),
            node_class_spec: None,
        };
        self.stats.launches += 1;
        self.actions.push(Action::Launch {
            claim: c.name.clone(),
            request,
        });
    }

    fn retry_launches(&mut self, now: DateTime<Utc>) {
        let due: Vec<String> = self
            .claims
            .values()
            .filter(|c| c.phase == Phase::Launching && c.retry_at.is_some_and(|t| t <= now))
            .map(|c| c.name.clone())
            .collect();
        for name in due {
            if let Some(c) = self.claims.get_mut(&name) {
                c.retry_at = None;
            }
            self.launch(&name);
        }
    }

    fn key(cloud: Cloud, o: &OfferingChoice) -> OfferingKey {
        OfferingKey {
            cloud,
            instance_type: o.instance_type.clone(),
            zone: o.zone.clone(),
            capacity_type: o.capacity_type,
        }
    }

    /// The cloud accepted the launch. A provider that tried the request's fallbacks itself
    /// may have launched one of them: the claim then takes that offering (labels, capacity,
    /// room) and the alternatives before it, which the provider found without capacity, go.
    fn launched(&mut self, now: DateTime<Utc>, name: &str, instance: Instance) {
        let Some(c) = self.claims.get_mut(name) else {
            return;
        };
        let on = |o: &OfferingChoice| {
            o.instance_type == instance.instance_type
                && o.zone == instance.zone
                && o.capacity_type == instance.capacity_type
        };
        if !on(&c.offering)
            && let Some(at) = c.alternatives.iter().position(on)
        {
            let pool = c.pool;
            let chosen = c.alternatives[at].clone();
            let layout = c.mig_config.clone();
            if let Some((labels, capacity, room)) =
                self.offering_room(pool, &chosen, layout.as_deref())
            {
                let c = self.claims.get_mut(name).expect("claim exists");
                c.alternatives.drain(..=at);
                c.offering = chosen;
                *c.facts.labels_mut() = labels;
                c.capacity = capacity;
                c.room = room;
                self.stats.fallbacks += 1;
                self.nominations_dirty = true;
            }
        }
        let c = self.claims.get_mut(name).expect("claim exists");
        c.phase = Phase::Launched;
        c.provider_id = Some(instance.provider_id);
        c.launched_at = Some(now);
    }

    fn launch_failed(&mut self, now: DateTime<Utc>, name: &str, error: &CloudError) {
        let Some(c) = self.claims.get_mut(name) else {
            return;
        };
        if error.is_retryable() {
            let delay = match error {
                CloudError::Throttled {
                    retry_after: Some(d),
                } => TimeDelta::from_std(*d).unwrap_or(self.config.max_backoff),
                _ => TimeDelta::seconds(1 << c.attempts.min(6)),
            };
            c.attempts += 1;
            c.retry_at = Some(now + delay.min(self.config.max_backoff));
            self.stats.retries += 1;
            return;
        }
        // Capacity, quota, or a request this offering can never satisfy: mark the offering and
        // move on to the claim's next one.
        if matches!(
            error,
            CloudError::InsufficientCapacity { .. } | CloudError::QuotaExceeded { .. }
        ) {
            self.stats.capacity_errors += 1;
        }
        let failed = c.offering.clone();
        let cloud = c.cloud;
        self.unavailable
            .mark(Self::key(cloud, &failed), now + self.config.unavailable_ttl);
        // A provider that tried the fallbacks itself names the last one it tried: every
        // alternative up to that one failed too.
        if let CloudError::InsufficientCapacity {
            instance_type,
            zone,
            capacity_type,
            ..
        } = error
            && let Some(at) = c.alternatives.iter().position(|o| {
                &o.instance_type == instance_type
                    && &o.zone == zone
                    && o.capacity_type == *capacity_type
            })
        {
            let tried: Vec<OfferingChoice> = c.alternatives.drain(..=at).collect();
            for o in &tried {
                self.unavailable
                    .mark(Self::key(cloud, o), now + self.config.unavailable_ttl);
            }
        }
        loop {
            let c = self.claims.get_mut(name).expect("claim exists");
            let Some(next) = c.alternatives.pop_front() else {
                break;
            };
            let pool = c.pool;
            let layout = c.mig_config.clone();
            if self.unavailable.contains(&Self::key(cloud, &next), now) {
                continue;
            }
            let Some((labels, capacity, room)) = self.offering_room(pool, &next, layout.as_deref())
            else {
                continue;
            };
            if failed.capacity_type == CapacityType::Spot
                && next.capacity_type == CapacityType::OnDemand
            {
                self.stats.spot_to_on_demand += 1;
            }
            let c = self.claims.get_mut(name).expect("claim exists");
            c.offering = next;
            *c.facts.labels_mut() = labels;
            c.capacity = capacity;
            c.room = room;
            c.attempts = 0;
            self.nominations_dirty = true;
            self.stats.fallbacks += 1;
            self.launch(name);
            return;
        }
        self.stats.claims_abandoned += 1;
        self.remove_claim(now, name);
    }

    // ---------------------------------------------------------------- node lifecycle

    fn check_initialized(&mut self, now: DateTime<Utc>, name: &str) {
        let Some(c) = self.claims.get(name) else {
            return;
        };
        if c.phase == Phase::Initialized {
            return;
        }
        let Some(node) = c.node() else { return };
        let startup = &self.setup.pools[c.pool].spec.startup_taints;
        let startup_gone = !node.taints.iter().any(|t| {
            startup
                .iter()
                .any(|s| s.key == t.key && s.effect == t.effect)
        });
        // Every extended resource the claim's pods request must be allocatable.
        let mut requested = Resources::ZERO;
        for e in self.pods.values() {
            if let PodState::Nominated { claim } | PodState::Bound { claim } = &e.state
                && claim == name
            {
                requested += e.pod.requests;
            }
        }
        let extended_ready =
            (PODS + 1..quartermaster_solver::resources::MAX_RESOURCES).all(|slot| {
                requested.get(slot) == 0 || node.allocatable.get(slot) >= requested.get(slot)
            });
        if !(startup_gone && extended_ready) {
            return;
        }
        let node_name = node.name.clone();
        // A replacement that comes up is where a move's pods go now: the move is checked again
        // first (pods may have become do-not-disrupt, a PDB may no longer allow it).
        self.revalidate_move(now, name);
        let c = self.claims.get_mut(name).expect("claim exists");
        c.phase = Phase::Initialized;
        c.initialized_at = Some(now);
        c.last_change = now;
        let mut any = false;
        for (id, e) in &self.pods {
            match &e.state {
                PodState::Nominated { claim } if claim == name => {
                    self.actions.push(Action::Bind {
                        pod: id.clone(),
                        node: node_name.clone(),
                    });
                    any = true;
                }
                PodState::Bound { claim } if claim == name => any = true,
                _ => {}
            }
        }
        if !any {
            let c = self.claims.get_mut(name).expect("claim exists");
            c.empty_since = Some(now);
        }
    }

    fn enforce_budgets(&mut self, now: DateTime<Utc>) {
        let mut expired = Vec::new();
        for c in self.claims.values() {
            if c.deleting {
                continue;
            }
            match c.phase {
                Phase::Launched if self.registration_due(c).is_some_and(|t| now >= t) => {
                    expired.push((c.name.clone(), DeleteReason::RegistrationTimeout));
                }
                Phase::Registered
                    if c.registered_at
                        .is_some_and(|t| now >= t + self.config.accelerator_ready_budget) =>
                {
                    expired.push((c.name.clone(), DeleteReason::AcceleratorsNotReady));
                }
                _ => {}
            }
        }
        for (name, reason) in expired {
            match reason {
                DeleteReason::RegistrationTimeout => self.stats.registration_timeouts += 1,
                _ => self.stats.accelerator_timeouts += 1,
            }
            // The offering produced a broken node: avoid it for a while, as after a capacity
            // error, so the replacement is not the same broken shape again.
            if let Some(c) = self.claims.get(&name) {
                let key = Self::key(c.cloud, &c.offering);
                self.unavailable
                    .mark(key, now + self.config.unavailable_ttl);
            }
            self.delete(now, &name, reason);
        }
    }

    /// Node repair: replaces nodes whose conditions say they are broken for longer than their
    /// rule tolerates, pool by pool while few enough of the pool's nodes are unhealthy.
    fn repair_nodes(&mut self, now: DateTime<Utc>) {
        // Fed by node events: a poll with no unhealthy node costs nothing.
        if self.repairs.is_empty() {
            return;
        }
        self.repairs
            .retain(|c| self.claims.get(c).is_some_and(|c| !c.deleting));
        self.repairs.forget_recovered(now);
        let due = self.repairs.due_all(now);
        if due.is_empty() {
            return;
        }
        let mut nodes_per_pool: BTreeMap<usize, usize> = BTreeMap::new();
        let mut unhealthy_per_pool: BTreeMap<usize, usize> = BTreeMap::new();
        for c in self.claims.values().filter(|c| !c.deleting) {
            *nodes_per_pool.entry(c.pool).or_default() += 1;
            if self.repairs.unhealthy(&c.name) {
                *unhealthy_per_pool.entry(c.pool).or_default() += 1;
            }
        }
        for crate::repair::RepairDue {
            claim: name,
            why,
            action,
        } in due
        {
            let Some((pool, provider_id)) = self
                .claims
                .get(&name)
                .map(|c| (c.pool, c.provider_id.clone()))
            else {
                continue;
            };
            let nodes = nodes_per_pool.get(&pool).copied().unwrap_or(0);
            let unhealthy = unhealthy_per_pool.get(&pool).copied().unwrap_or(0);
            let allowed = self
                .repair_configs
                .get(pool)
                .map_or(0, |c| c.allowed_unhealthy(nodes));
            if unhealthy > allowed {
                self.stats.repairs_held += 1;
                continue;
            }
            // A reboot keeps the node and its pods (they restart there); the clock starts
            // again, and a node still broken a toleration later is replaced.
            if let (crate::repair::RepairAction::Reboot, Some(provider_id)) = (action, provider_id)
            {
                self.stats.repair_reboots += 1;
                self.repairs.rebooted(&name, now);
                self.repair_reasons.insert(name.clone(), why.clone());
                self.actions.push(Action::Reboot {
                    claim: name,
                    provider_id,
                    reason: why,
                });
                continue;
            }
            self.stats.repairs += 1;
            self.repair_reasons.insert(name.clone(), why);
            self.delete(now, &name, DeleteReason::Unhealthy);
        }
    }

    /// A reboot node repair asked for could not be done: the node is replaced instead.
    fn reboot_failed(&mut self, now: DateTime<Utc>, claim: &str, error: &str) {
        if self.claims.get(claim).is_none_or(|c| c.deleting) {
            return;
        }
        let why = self.repair_reasons.get(claim).cloned().unwrap_or_default();
        self.stats.repairs += 1;
        self.repair_reasons
            .insert(claim.to_owned(), format!("{why}; reboot failed: {error}"));
        self.delete(now, claim, DeleteReason::Unhealthy);
    }

    /// Tells node repair what `claim`'s node (of pool `pool`) reports now.
    pub(crate) fn observe_health(
        &mut self,
        pool: usize,
        claim: &str,
        conditions: &[crate::events::NodeCondition],
        now: DateTime<Utc>,
    ) {
        if let Some(config) = self.repair_configs.get(pool) {
            self.repairs.observe(config, claim, conditions, now);
        }
    }

    /// Why node repair replaced `claim` (`AcceleratedHardwareReady=False for 10m`), if it did.
    pub fn repair_reason(&self, claim: &str) -> Option<&str> {
        self.repair_reasons.get(claim).map(String::as_str)
    }

    /// Asks for a claim's deletion; its pods need a place again right away.
    fn delete(&mut self, now: DateTime<Utc>, name: &str, reason: DeleteReason) {
        let Some(c) = self.claims.get_mut(name) else {
            return;
        };
        c.deleting = true;
        let provider_id = c.provider_id.clone();
        let replaces = c.replaces.clone();
        self.release_pods(now, name, replaces.as_deref());
        self.actions.push(Action::Delete {
            claim: name.to_owned(),
            provider_id,
            reason,
        });
    }

    /// Pods nominated or bound to `name` wait again. When `name` is a consolidation replacement
    /// (`replaces`) of a node that is still there, the consolidation is called off instead and
    /// the pods stay where they run.
    fn release_pods(&mut self, now: DateTime<Utc>, name: &str, replaces: Option<&str>) {
        if let Some(old) = replaces
            && self.call_off_move(now, name, old)
        {
            return;
        }
        let mut any = false;
        for e in self.pods.values_mut() {
            if let PodState::Nominated { claim } | PodState::Bound { claim } = &e.state
                && claim == name
            {
                e.state = PodState::Waiting {
                    since: now,
                    reason: None,
                };
                any = true;
            }
        }
        if any {
            self.arrive(now);
            self.batch.force = true;
        }
    }

    fn claim_by_provider_id(&self, provider_id: &str) -> Option<String> {
        self.claims
            .values()
            .find(|c| c.provider_id.as_deref() == Some(provider_id))
            .map(|c| c.name.clone())
    }

    fn interrupted(&mut self, now: DateTime<Utc>, provider_id: &str, terminates_at: DateTime<Utc>) {
        let Some(name) = self.claim_by_provider_id(provider_id) else {
            return;
        };
        if self.vacate(now, &name, terminates_at) {
            self.stats.interruptions += 1;
        }
    }

    /// The claim's node goes at `terminates_at` whatever happens: cordoned, its pods planned
    /// again at once (they keep running until it is drained). False when it was already.
    pub(crate) fn vacate(
        &mut self,
        now: DateTime<Utc>,
        name: &str,
        terminates_at: DateTime<Utc>,
    ) -> bool {
        let name = name.to_owned();
        let Some(c) = self.claims.get_mut(&name) else {
            return false;
        };
        if c.interrupted_at.is_some() {
            return false;
        }
        c.interrupted_at = Some(terminates_at);
        if let Some(node) = c.node() {
            self.actions.push(Action::Cordon {
                node: node.name.clone(),
            });
        }
        // Launch the replacement at once: the pods are planned again now, while they keep
        // running on the old node until it is drained.
        let mut displaced = Vec::new();
        for (id, e) in self.pods.iter_mut() {
            if let PodState::Nominated { claim } | PodState::Bound { claim } = &e.state
                && *claim == name
            {
                e.state = PodState::Waiting {
                    since: now,
                    reason: None,
                };
                displaced.push(id.clone());
            }
        }
        if let Some(c) = self.claims.get_mut(&name) {
            c.displaced = displaced;
        }
        self.arrive(now);
        self.batch.force = true;
        true
    }

    /// The claim is gone: drain its node; pods still placed on it wait again.
    fn remove_claim(&mut self, now: DateTime<Utc>, name: &str) {
        let Some(c) = self.claims.remove(name) else {
            return;
        };
        self.repair_reasons.remove(name);
        if let Some(node) = c.node() {
            self.actions.push(Action::Drain {
                node: node.name.clone(),
            });
        }
        self.release_pods(now, name, c.replaces.as_deref());
    }

    // ---------------------------------------------------------------- empty nodes

    /// When an empty claim may go: `consolidateAfter` after it emptied (never, in a
    /// reservation), and never within
    /// [`EngineConfig::binding_grace`] of its initialization or of its last nomination (the
    /// kube-scheduler may not have seen the node, or bound the pods, yet).
    fn empty_deadline(&self, c: &Claim) -> Option<DateTime<Utc>> {
        // A node in a reservation costs nothing more than the reservation, used or not: kept
        // up for the next pod (it goes when its reservation ends).
        if c.reservation.is_some() {
            return None;
        }
        let after = self.setup.pools[c.pool].consolidate_after?;
        let since = c.empty_since?;
        let grace = self.config.binding_grace;
        let mut at = since + TimeDelta::from_std(after).unwrap_or(TimeDelta::MAX);
        at = at.max(c.initialized_at.map_or(since, |t| t + grace));
        if let Some(t) = c.nominated_at {
            at = at.max(t + grace);
        }
        Some(at)
    }

    /// Whether a pod that is not running yet could use empty `c` now: one waiting for a
    /// solve, or one nominated to a node that is not up yet (the kube-scheduler may well bind
    /// it here first). Such a node is not removed as empty.
    fn wanted_by_unbound_pods(&self, c: &Claim) -> bool {
        let spec = &self.setup.pools[c.pool].spec;
        let labels = c.facts.merged_labels();
        self.pods.values().any(|e| {
            let unbound = match &e.state {
                PodState::Waiting { reason, .. } => reason.is_none(),
                PodState::Nominated { claim } => self
                    .claims
                    .get(claim)
                    .is_some_and(|t| t.phase != Phase::Initialized),
                PodState::Bound { .. } => false,
            };
            unbound
                && e.pod.requests.first_excess(&c.room).is_none()
                && quartermaster_solver::pod::tolerates_all(&e.pod.tolerations, &spec.taints)
                    .is_ok()
                && (e.pod.node_terms.is_empty()
                    || e.pod.node_terms.iter().any(|t| t.matches(&labels)))
        })
    }

    fn remove_empty(&mut self, now: DateTime<Utc>) {
        let mut occupied: BTreeSet<&str> = self.headroom.by_claim().into_keys().collect();
        for e in self.pods.values() {
            if let PodState::Nominated { claim } | PodState::Bound { claim } = &e.state {
                occupied.insert(claim.as_str());
            }
        }
        let mut empty_now = Vec::new();
        let mut occupied_now = Vec::new();
        for c in self.claims.values() {
            if c.phase != Phase::Initialized || c.deleting || c.vacating() {
                continue;
            }
            if occupied.contains(c.name.as_str()) {
                if c.empty_since.is_some() {
                    occupied_now.push(c.name.clone());
                }
            } else if c.empty_since.is_none() {
                empty_now.push(c.name.clone());
            }
        }
        for name in occupied_now {
            if let Some(c) = self.claims.get_mut(&name) {
                c.empty_since = None;
            }
        }
        for name in empty_now {
            if let Some(c) = self.claims.get_mut(&name) {
                c.empty_since = Some(now);
            }
        }
        // An interrupted node whose pods all run elsewhere now goes at once: no reason to pay
        // for the rest of the notice period.
        let vacated: Vec<String> = self
            .claims
            .values()
            .filter(|c| c.vacating() && !c.deleting)
            .filter(|c| {
                c.displaced.iter().all(|p| match self.pods.get(p) {
                    None => true,
                    Some(e) => match &e.state {
                        PodState::Bound { claim } => *claim != c.name,
                        // Room kept on a node that is up: it moves there when this one drains.
                        PodState::Nominated { claim } => {
                            *claim != c.name
                                && self
                                    .claims
                                    .get(claim)
                                    .is_some_and(|t| t.phase == Phase::Initialized)
                        }
                        PodState::Waiting { .. } => false,
                    },
                })
            })
            .map(|c| c.name.clone())
            .collect();
        for name in vacated {
            let c = &self.claims[&name];
            let reason = if c.interrupted_at.is_some() && c.reservation.is_some() {
                DeleteReason::ReservationEnding
            } else if let Some(reason) = Self::flex_start_vacated(c) {
                reason
            } else if c.interrupted_at.is_some() {
                DeleteReason::Interrupted
            } else if let Some(reason) = c
                .disruption_reason
                .filter(|r| matches!(r, DeleteReason::Drifted | DeleteReason::Expired))
            {
                reason
            } else if c.consolidation_replaced {
                self.stats.consolidation_replacements += 1;
                DeleteReason::Underutilized
            } else {
                self.stats.consolidation_deletes += 1;
                DeleteReason::Underutilized
            };
            self.delete(now, &name, reason);
        }
        // Delete those empty past consolidateAfter, within each pool's budget.
        let mut per_pool: BTreeMap<usize, (usize, usize)> = BTreeMap::new(); // (total, disrupting)
        for c in self.claims.values() {
            let e = per_pool.entry(c.pool).or_default();
            e.0 += 1;
            if c.deleting || c.consolidating {
                e.1 += 1;
            }
        }
        let due: Vec<(String, usize)> = self
            .claims
            .values()
            .filter(|c| !c.deleting && c.phase == Phase::Initialized && !c.vacating())
            .filter(|c| self.setup.pools[c.pool].replicas.is_none())
            .filter(|c| !self.node_protected(c))
            .filter(|c| self.empty_deadline(c).is_some_and(|at| now >= at))
            .filter(|c| !self.wanted_by_unbound_pods(c))
            .map(|c| (c.name.clone(), c.pool))
            .collect();
        for (name, pool) in due {
            let (total, disrupting) = per_pool.get(&pool).copied().unwrap_or_default();
            let allowed =
                self.setup.pools[pool].allowed_disruptions(DisruptionReason::Empty, total, now);
            if disrupting >= allowed {
                continue;
            }
            per_pool.entry(pool).or_default().1 += 1;
            self.stats.empty_deletions += 1;
            self.announce_empty(&name);
            self.delete(now, &name, DeleteReason::Empty);
        }
    }
}

/// The solver as the engine calls it: without the lower bound, which the engine never reads.
pub(crate) fn plan(
    snapshot: &ClusterSnapshot,
    catalog: &quartermaster_pricing::Catalog,
    now: DateTime<Utc>,
) -> Plan {
    quartermaster_solver::solve_with(
        snapshot,
        catalog,
        now,
        &quartermaster_solver::SolveOptions {
            skip_lower_bound: true,
            ..Default::default()
        },
    )
}
