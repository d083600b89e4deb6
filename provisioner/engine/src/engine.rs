//! The engine proper: events in, actions out.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_pricing::{Catalog, Cloud};
use quartermaster_solver::{OfferingChoice, Pod, PodRef, ResourceTable};

use crate::config::EngineConfig;
use crate::disruption::DisruptionState;
use crate::disruption::methods::{DRAINS, VOLUNTARY};
use crate::events::{Action, Event};
use crate::pools::PoolPolicy;
use crate::state::{Claim, GangLaunch, Phase, PodEntry, PodState};
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

/// Deadlines computed for a claims revision and a pools version, sorted.
pub(crate) type CachedTimes = (u64, u64, Vec<DateTime<Utc>>);
/// The earliest of such deadlines, if any.
pub(crate) type CachedTime = (u64, u64, Option<DateTime<Utc>>);

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
    /// Claims given up because no offering was left (none in their pool, or none as cheap as
    /// another pool's for the same pods); their pods were planned again.
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
    /// Consolidation moves not made because, once the kube-scheduler has bound the pods they
    /// displace by its own scores, they would not save enough (`EngineConfig::scheduler_scoring`).
    pub moves_unprofitable_as_scheduled: u64,
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
    /// Nodes retired: cordoned because their pods needed a small part of what they cost.
    pub retirements: u64,
    /// Retired nodes reopened for pods that would otherwise have needed a node costing as much.
    pub retirements_reopened: u64,
    /// Of `retirements`, nodes retired while empty (waiting out `consolidateAfter`).
    pub retirements_empty: u64,
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
            moves_unprofitable_as_scheduled,
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
            retirements,
            retirements_reopened,
            retirements_empty,
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
        self.moves_unprofitable_as_scheduled += moves_unprofitable_as_scheduled;
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
        self.retirements += retirements;
        self.retirements_reopened += retirements_reopened;
        self.retirements_empty += retirements_empty;
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

/// The provisioning engine. See the crate docs.
#[derive(Debug, Clone)]
pub struct Engine {
    pub(crate) config: EngineConfig,
    pub(crate) setup: EngineSetup,
    pub(crate) pods: crate::pod_table::PodTable,
    pub(crate) claims: crate::claim_table::ClaimTable,
    /// Node name -> the claim it registered for: a hint for [`Engine::claim_on_node`] (checked
    /// against the claim; entries of claims that are gone are dropped with them).
    pub(crate) node_claims: BTreeMap<String, String>,
    pub(crate) unavailable: UnavailableOfferings,
    pub(crate) batch: crate::provisioning::Batch,
    pub(crate) retry_unschedulable_at: Option<DateTime<Utc>>,
    pub(crate) actions: Vec<Action>,
    pub(crate) next_claim: u64,
    pub(crate) stats: EngineStats,
    pub(crate) last_poll: Option<DateTime<Utc>>,
    /// Retirement left nodes unasked at the last poll (its per-poll limit): it goes on at the
    /// next one.
    pub(crate) retire_backlog: bool,
    /// Moves whenever the NodePools change (their `consolidateAfter` and `expireAfter` are in
    /// the deadlines cached below).
    pub(crate) pools_version: u64,
    /// The empty claims' removal times, sorted, for a claims revision and pools version: the
    /// deadline walk over every claim is done once per change, not on every poll.
    pub(crate) empty_deadlines: std::cell::RefCell<Option<CachedTimes>>,
    /// The claims' launch, registration and accelerator deadlines, sorted, for a claims
    /// revision.
    pub(crate) lifecycle_deadlines: std::cell::RefCell<Option<(u64, Vec<DateTime<Utc>>)>>,
    /// The same for expiry ([`Engine::disruption_deadline`]).
    pub(crate) expiry_deadline: std::cell::Cell<Option<CachedTime>>,
    /// Claims retirement is to look at: initialized, or left by a pod, since it last did (a
    /// pod that arrives never makes a node worth retiring: what its pods need only grows).
    pub(crate) retire_watch: std::collections::BTreeSet<String>,
    /// Per resource: the least an offering some pool may buy asks per unit ($/h), for
    /// retirement's cheap bound; `None` until needed after the catalog or the pools changed.
    pub(crate) unit_prices: Option<crate::disruption::retirement::UnitPrices>,
    /// Per pool: its cheapest offering, overall and per instance type, filled with
    /// `unit_prices`: what a pod that refills an empty node could need instead.
    pub(crate) pool_floors: Vec<crate::disruption::retirement::PoolFloor>,
    /// Retirement's from-scratch answers, cleared with `unit_prices`.
    pub(crate) need_memo: crate::disruption::retirement::NeedMemo,
    /// Whether an event was handled since the last poll (a poll after none, with nothing due,
    /// is skipped: [`Engine::nothing_due`]).
    pub(crate) heard_since_poll: bool,
    /// When the provisioner last bought nodes for pending pods, by pool: a pool still growing
    /// is not consolidated (its nodes ripen `consolidateAfter` after the last such launch, so
    /// a ramp of arrivals is not met with evictions).
    pub(crate) grew_at: Vec<Option<DateTime<Utc>>>,
    /// Bumped whenever pods or nodes change; consolidation skips a look when nothing changed.
    pub(crate) version: u64,
    pub(crate) consolidation_seen: Option<u64>,
    /// Whether nominations may no longer fit: a pod was bound somewhere else than nominated, or
    /// a claim's room changed (it fell back to another offering). The solver never
    /// over-nominates, so nothing else can make them overflow.
    pub(crate) nominations_dirty: bool,
    pub(crate) consolidation_next: Option<DateTime<Utc>>,
    pub(crate) consolidation_wake: Option<DateTime<Utc>>,
    /// Per pool: when a static pool that could not get a node tries again.
    pub(crate) static_retry_at: Vec<Option<DateTime<Utc>>>,
    /// Do-not-disrupt annotations, PodDisruptionBudgets, moves in progress, counters.
    pub(crate) disruption: DisruptionState,
    /// Gang launches in progress, by gang.
    pub(crate) gangs: BTreeMap<String, GangLaunch>,
    /// Batch windows closed by a solve since the driver last took them (first pod to solve).
    pub(crate) closed_batches: Vec<TimeDelta>,
    /// Unhealthy nodes and since when (node repair).
    pub(crate) repairs: crate::repair::RepairTracker,
    /// Why node repair replaced a claim, until the claim is gone.
    pub(crate) repair_reasons: BTreeMap<String, String>,
    /// Node repair as each pool has it (the engine's defaults with the pool's `spec.repair`).
    pub(crate) repair_configs: Vec<crate::repair::RepairConfig>,
    /// CapacityBuffers' placeholders and the room they hold.
    pub(crate) headroom: crate::headroom::Headroom,
    /// Reservations the pools may launch into.
    pub(crate) reservations: Vec<crate::ReservationOffer>,
    /// Reservations that accepted launches at the last poll (one starting wakes waiting pods).
    pub(crate) reservations_open: BTreeSet<String>,
    /// Whether a flex-start claim may exist (a pool opted in, or one was adopted): until then
    /// no poll looks for flex-start nodes to drain.
    pub(crate) flex_start_seen: bool,
    /// The catalog as the driver gave it (every region); `setup.catalog` is it restricted to
    /// `pool_regions`, with reserved and flex-start offerings.
    pub(crate) given_catalog: quartermaster_pricing::Catalog,
    /// Where the pools may buy.
    pub(crate) pool_regions: crate::prices::PoolRegions,
}

impl Engine {
    /// A new engine with no pods and no nodes.
    pub fn new(mut setup: EngineSetup, config: EngineConfig) -> Self {
        let given_catalog = setup.catalog.clone();
        let pool_regions = crate::prices::pool_regions(&setup.pools);
        setup.catalog = crate::prices::for_pools(&given_catalog, &pool_regions);
        let setup = crate::flex_start::with_offerings(setup);
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
            pods: Default::default(),
            claims: Default::default(),
            node_claims: BTreeMap::new(),
            unavailable: UnavailableOfferings::default(),
            batch: Default::default(),
            retry_unschedulable_at: None,
            actions: Vec::new(),
            next_claim: 0,
            stats: EngineStats::default(),
            last_poll: None,
            retire_backlog: false,
            pools_version: 0,
            empty_deadlines: Default::default(),
            lifecycle_deadlines: Default::default(),
            expiry_deadline: Default::default(),
            retire_watch: Default::default(),
            unit_prices: None,
            pool_floors: Vec::new(),
            need_memo: Default::default(),
            heard_since_poll: true,
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
            given_catalog,
            pool_regions,
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

    /// A number that moves whenever some claim may have changed (launched, registered,
    /// initialized, deleting, gone, a new one...): equal revisions of the same engine mean
    /// equal [`Engine::claims`].
    pub fn claims_revision(&self) -> u64 {
        self.claims.revision()
    }

    /// The names of the claims being deleted (without building their views).
    pub fn deleting_claims(&self) -> impl Iterator<Item = &str> {
        self.claims
            .values()
            .filter(|c| c.deleting)
            .map(|c| c.name.as_str())
    }

    /// Each launched claim's name and provider id (without building its view).
    pub fn launched_claims(&self) -> impl Iterator<Item = (&str, &str)> {
        self.claims
            .values()
            .filter_map(|c| Some((c.name.as_str(), c.provider_id.as_deref()?)))
    }

    /// Every live NodeClaim.
    pub fn claims(&self) -> impl Iterator<Item = ClaimView> + '_ {
        self.claims.values().map(|c| self.view(c))
    }

    /// The claim named `name`, if the engine knows it.
    pub fn claim(&self, name: &str) -> Option<ClaimView> {
        self.claims.get(name).map(|c| self.view(c))
    }

    pub(crate) fn view(&self, c: &Claim) -> ClaimView {
        ClaimView {
            name: c.name.clone(),
            node_pool: self.setup.pools[c.pool].spec.name.clone(),
            cloud: c.cloud,
            offering: c.offering.clone(),
            node_name: c.node().map(|n| n.name.clone()),
            provider_id: c.provider_id.clone(),
            initialized: c.phase() == Phase::Initialized,
            created_at: c.created_at,
            initialized_at: c.life.initialized_at(),
            labels: c.node_labels(),
            deleting: c.deleting,
            template_hash: c.template_hash.clone(),
            launched_at: c.life.launched_at(),
            registered_at: c.life.registered_at(),
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
        self.nominated_pods(claim).map(|(id, _)| id)
    }

    /// [`Engine::nominated_to`] with each pod.
    pub fn nominated_pods<'a>(
        &'a self,
        claim: &'a str,
    ) -> impl Iterator<Item = (&'a PodRef, &'a Pod)> + 'a {
        // The claim's residents (nominated or bound), not every pod.
        self.pods
            .residents(claim)
            .into_iter()
            .flatten()
            .filter(move |(id, _)| {
                matches!(self.pods.get(id), Some(PodEntry { state: PodState::Nominated { claim: c }, .. }) if c == claim)
            })
            .map(|(id, pod)| (id, pod.as_ref()))
    }

    /// Records what happened at `now`.
    pub fn handle(&mut self, now: DateTime<Utc>, event: Event) {
        self.heard_since_poll = true;
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
                if let Some(entry) = self.pods.get(&pod.id)
                    && !matches!(entry.state, PodState::Waiting { .. })
                {
                    let id = pod.id.clone();
                    self.pods.set_pod(&id, pod.into());
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
                    // What a node's pods need only shrinks when one goes.
                    self.retire_watch.insert(claim);
                }
            }
            Event::Launched { claim, instance } => self.launched(now, &claim, instance),
            Event::LaunchFailed { claim, error } => self.launch_failed(now, &claim, &error),
            Event::NodeRegistered { claim, node } => {
                if let Some(c) = self.claims.get_mut(&claim) {
                    c.life.registered(now);
                    let pool = c.pool;
                    self.observe_health(pool, &claim, &node.conditions, now);
                    if let Some(c) = self.claims.get_mut(&claim) {
                        self.node_claims.insert(node.name.clone(), claim.clone());
                        c.facts.set_node(Some(node));
                    }
                    self.check_initialized(now, &claim);
                }
            }
            Event::NodeUpdated { node } => {
                let claim = self.claim_on_node(&node.name);
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
            Event::PodCheckpointed { pod, on } => self.pod_checkpointed(pod, on),
            Event::NodeDoNotDisrupt { node, on } => self.protect_node(node, on),
            Event::DisruptionBudgets(pdbs) => self.disruption.pdbs = pdbs,
            Event::CatalogChanged(catalog) => {
                self.unit_prices = None;
                self.need_memo = Default::default();
                // New prices: every node is looked at again.
                self.retire_watch
                    .extend(self.claims.values().map(|c| c.name.clone()));
                self.catalog_changed(catalog);
            }
            Event::PoolsChanged(pools) => {
                self.pools_version += 1;
                self.unit_prices = None;
                self.need_memo = Default::default();
                self.pools_changed(pools);
                self.pool_regions_changed();
                self.add_flex_start_offerings();
            }
            Event::CloudDrifted {
                provider_id,
                reason,
            } => self.cloud_drifted(&provider_id, reason),
            Event::BuffersChanged(buffers) => {
                self.headroom.set(&buffers);
            }
            Event::ReservationsChanged(offers) => {
                self.unit_prices = None;
                self.need_memo = Default::default();
                self.reservations_changed(now, offers);
            }
            Event::RebootFailed { claim, error } => self.reboot_failed(now, &claim, &error),
        }
    }

    /// The claim whose node is called `node`: found through the node index, else by looking
    /// at every claim (a node the engine did not register, or none).
    pub(crate) fn claim_on_node(&self, node: &str) -> Option<&Claim> {
        let indexed = self
            .node_claims
            .get(node)
            .and_then(|name| self.claims.get(name))
            .filter(|c| c.node().is_some_and(|n| n.name == node));
        let found = indexed.or_else(|| {
            self.claims
                .values()
                .find(|c| c.node().is_some_and(|n| n.name == node))
        });
        debug_assert_eq!(
            found.map(|c| &c.name),
            self.claims
                .values()
                .find(|c| c.node().is_some_and(|n| n.name == node))
                .map(|c| &c.name),
            "the node index and a scan agree"
        );
        found
    }

    /// Decides what to do at `now`.
    pub fn poll(&mut self, now: DateTime<Utc>) -> Vec<Action> {
        if self.nothing_due(now) {
            return Vec::new();
        }
        self.heard_since_poll = false;
        self.last_poll = Some(now);
        if self.unavailable.expire(now) && self.any_unschedulable() {
            self.batch.force = true;
        }
        self.check_nominations(now);
        self.gang_progress(now);
        self.retry_launches(now);
        self.enforce_budgets(now);
        for method in DRAINS {
            method.disrupt(self, now);
        }
        self.keep_static_pools(now);
        if self.batch_due(now) {
            self.solve(now);
        }
        self.keep_headroom(now);
        for method in VOLUNTARY {
            method.disrupt(self, now);
        }
        // A poll that decided something may have more to do once that is under way (a
        // consolidation's vacated nodes go at the next poll): only a poll that decided
        // nothing lets the next one be skipped.
        self.heard_since_poll = !self.actions.is_empty();
        std::mem::take(&mut self.actions)
    }
}
