//! The provisioning loop: the in-cluster driver of `quartermaster-engine`, as the simulator is
//! the other. Each pass it turns what the stores show into engine events (pods pending, bound
//! or gone; claims found, deleted or registered; nodes updated), polls the engine, hands each
//! action to a task that carries it out against the API server or the cloud, and feeds the
//! outcomes back as events. No provisioning decision is made here.
//!
//! State: the API server is the memory. The engine is rebuilt from the NodeClaims in the
//! cluster whenever this replica starts leading or the configuration it was built from
//! (NodePools, NodeClasses, DaemonSets, resource names) changes; what it loses (batch timers,
//! the unavailable-offering cache, fallback lists) is safe to lose.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_cloud::CloudError;
use quartermaster_engine::{Action, ClaimView, Engine, EngineConfig, Event, NodeView};
use quartermaster_solver::{PodRef, ResourceTable};
use tokio::sync::mpsc;

use crate::context::Context;
use crate::launch::error_kind;
use crate::lifecycle;
use crate::metrics::LaunchFailureLabels;

mod dispatch;
mod duties;
mod feed;
mod observe;
mod rest;

/// How many new `Unschedulable` events of one pass carry the top reasons offerings were ruled
/// out for (each is a solve of the whole snapshot).
const EXPLAINED_PER_PASS: usize = 10;
/// How many reasons such an event names.
const TOP_REASONS: usize = 3;

/// What a task reports back to the loop.
#[derive(Debug)]
pub enum Outcome {
    /// An event for the engine (a launch's result).
    Engine(Box<Event>),
    /// A launch task finished (its claim may be launched again).
    LaunchDone {
        /// NodeClaim name.
        claim: String,
    },
    /// A termination task finished.
    TerminationDone {
        /// NodeClaim name.
        claim: String,
    },
    /// A cloud's capacity reservations, as it reported them.
    Reservations {
        /// The cloud.
        cloud: quartermaster_pricing::Cloud,
        /// Its reservations.
        reservations: Vec<quartermaster_pricing::Reservation>,
    },
}

/// How often the clouds' capacity reservations are read.
const RESERVATIONS_INTERVAL: TimeDelta = TimeDelta::minutes(1);

/// The least time between two passes: while pods and nodes change all the time (a scale-up of
/// thousands of pods), a pass every 50 ms cost as much CPU as the passes saved; a fifth of the
/// batch window's idle second keeps NodeClaims within the window plus one second.
const SETTLE: std::time::Duration = std::time::Duration::from_millis(200);

/// How often the clouds' events (interruptions, instances gone) are polled.
const EVENTS_INTERVAL: TimeDelta = TimeDelta::seconds(5);
/// A registration patch is sent again (the watch still shows the node unregistered) no sooner
/// than this after the last one.
const REGISTRATION_RESEND: TimeDelta = TimeDelta::seconds(10);
/// A NodeClaim the engine deletes that the cluster still shows alive gets its delete again no
/// sooner than this after the last one.
const DELETE_RESEND: TimeDelta = TimeDelta::seconds(10);
/// How often instances without a NodeClaim are looked for.
const GC_INTERVAL: TimeDelta = TimeDelta::minutes(2);
/// How often the fleet gauges (nodes, costs, per-pod cost) are rebuilt: they cost a walk over
/// every claim and pod, and are scraped every 15 s or so, so not on every pass.
const EXPORT_INTERVAL: TimeDelta = TimeDelta::seconds(5);

/// The loop's memory between passes: only what the engine was told, so that each change is
/// reported once. Everything here is rebuilt from the cluster after a restart.
pub struct Driver {
    ctx: Arc<Context>,
    config: EngineConfig,
    engine: Option<Engine>,
    fingerprint: String,
    /// Pods reported to the engine: `None` while pending, the node once bound.
    reported: BTreeMap<PodRef, Option<String>>,
    /// Registered claims and the node view last reported for them.
    registered: BTreeMap<String, NodeView>,
    /// Registered claims whose Node, at this `resourceVersion`, gave the view in `registered`:
    /// while the Node keeps it, the pass does not read it again (a pass over 2,000 nodes built
    /// and compared 2,000 views to find none changed). Dropped whenever `registered` changes.
    settled: BTreeMap<String, String>,
    /// When a delete of each claim the engine is deleting was last sent again.
    delete_sent: BTreeMap<String, DateTime<Utc>>,
    /// When each claim's registration patch was last sent.
    registration_sent: BTreeMap<String, DateTime<Utc>>,
    /// Claims whose deletion by someone else was reported.
    deleting: BTreeSet<String>,
    /// Claims seen in the store (their disappearance is reported as `Deleted`).
    seen: BTreeSet<String>,
    /// Claims with a launch task running.
    launching: BTreeSet<String>,
    /// Claims with a termination task running.
    terminating: BTreeSet<String>,
    /// The last launch error of each claim (for its `Launched` condition).
    launch_errors: BTreeMap<String, CloudError>,
    /// Claims whose initialization was announced.
    initialized: BTreeSet<String>,
    /// The node last written as each pending pod's `status.nominatedNodeName`.
    nominations_written: BTreeMap<PodRef, String>,
    /// The reason last announced for each pod that cannot be placed.
    unschedulable: BTreeMap<PodRef, String>,
    /// The budget of `Nominated` Events (past it they are dropped).
    nomination_events: lifecycle::NominationEvents,
    /// Pods' creation times (pending time).
    created: BTreeMap<PodRef, DateTime<Utc>>,
    /// Statuses last written, to write only changes.
    pub(crate) written: lifecycle::Written,
    outcomes_tx: mpsc::UnboundedSender<Outcome>,
    outcomes_rx: mpsc::UnboundedReceiver<Outcome>,
    next_gc: Option<DateTime<Utc>>,
    next_events: Option<DateTime<Utc>>,
    next_export: Option<DateTime<Utc>>,
    /// When the fleet gauges were last rebuilt (accelerator-seconds accrue from then).
    last_export: Option<DateTime<Utc>>,
    /// How many launched claims the last rebuild counted.
    exported_fleet: usize,
    last_pass: Option<DateTime<Utc>>,
    /// The resource table of the engine in use.
    table: ResourceTable,
    /// Pods read into the solver's terms, kept until they change.
    readings: crate::pod_readings::PodReadings,
    /// Do-not-disrupt pods and nodes and PDBs last told to the engine (told again on change).
    disruption_inputs: DisruptionInputs,
    requests: crate::provisioning_requests::Requests,
    /// CapacityBuffers: as last read, told to the engine, statuses written.
    buffers: crate::capacity_buffers::Buffers,
    /// Each cloud's capacity reservations as last read, and the offers last told.
    reservations: BTreeMap<quartermaster_pricing::Cloud, Vec<quartermaster_pricing::Reservation>>,
    reservations_told: Option<Vec<quartermaster_engine::ReservationOffer>>,
    next_reservations: Option<DateTime<Utc>>,
    /// The catalog in use: the context's, until live prices replace it.
    catalog: quartermaster_pricing::Catalog,
    /// New catalogs from the price refresh ([`crate::price_refresh`]).
    catalog_rx: Option<mpsc::UnboundedReceiver<quartermaster_pricing::Catalog>>,
    /// What the last quiet observe and status sync read (a pass at rest skips them).
    rest: rest::AtRest,
    /// The last reading of the pods and configuration, and what it was made from.
    last_reading: Option<(observe::ReadingKey, crate::translate::Observed)>,
}

/// What voluntary disruption must respect, as last told to the engine.
#[derive(Debug, Default, PartialEq)]
struct DisruptionInputs {
    pods: BTreeSet<PodRef>,
    checkpointed: BTreeSet<PodRef>,
    nodes: BTreeSet<String>,
    pdbs: Vec<quartermaster_engine::PodDisruptionBudgetView>,
}

impl Driver {
    /// A driver that has not looked at the cluster yet.
    pub fn new(ctx: Arc<Context>, config: EngineConfig) -> Self {
        let (outcomes_tx, outcomes_rx) = mpsc::unbounded_channel();
        Self {
            config,
            engine: None,
            fingerprint: String::new(),
            reported: BTreeMap::new(),
            registered: BTreeMap::new(),
            settled: BTreeMap::new(),
            registration_sent: BTreeMap::new(),
            delete_sent: BTreeMap::new(),
            deleting: BTreeSet::new(),
            seen: BTreeSet::new(),
            launching: BTreeSet::new(),
            terminating: BTreeSet::new(),
            launch_errors: BTreeMap::new(),
            initialized: BTreeSet::new(),
            unschedulable: BTreeMap::new(),
            nomination_events: lifecycle::NominationEvents::default(),
            nominations_written: BTreeMap::new(),
            created: BTreeMap::new(),
            written: lifecycle::Written::default(),
            outcomes_tx,
            outcomes_rx,
            next_gc: None,
            next_events: None,
            next_export: None,
            last_export: None,
            exported_fleet: 0,
            last_pass: None,
            table: ResourceTable::default(),
            readings: Default::default(),
            disruption_inputs: DisruptionInputs::default(),
            requests: Default::default(),
            buffers: Default::default(),
            reservations: BTreeMap::new(),
            reservations_told: None,
            next_reservations: None,
            catalog: ctx.catalog.clone(),
            catalog_rx: None,
            rest: Default::default(),
            last_reading: None,
            ctx,
        }
    }

    /// The same driver taking new catalogs (live prices) from `rx`: each replaces the catalog
    /// in use and reaches the engine as `CatalogChanged`.
    pub fn with_catalog_updates(
        mut self,
        rx: mpsc::UnboundedReceiver<quartermaster_pricing::Catalog>,
    ) -> Self {
        self.catalog_rx = Some(rx);
        self
    }

    /// Uses `catalog` from now on and tells the engine (running nodes are priced again,
    /// consolidation takes a look).
    pub fn catalog_changed(&mut self, now: DateTime<Utc>, catalog: quartermaster_pricing::Catalog) {
        self.catalog = catalog.clone();
        self.rest.forget();
        self.last_reading = None;
        if let Some(engine) = &mut self.engine {
            engine.handle(now, Event::CatalogChanged(catalog));
        }
    }

    /// The budget of `Nominated` Events.
    pub(crate) fn nomination_events(&self) -> &lifecycle::NominationEvents {
        &self.nomination_events
    }

    /// The engine, once built.
    pub fn engine(&self) -> Option<&Engine> {
        self.engine.as_ref()
    }

    /// Runs passes until `stop` resolves: after any store change, task outcome or engine
    /// deadline, and at least every `resync`.
    pub async fn run(
        mut self,
        resync: std::time::Duration,
        stop: impl std::future::Future<Output = ()>,
    ) {
        let mut stop = std::pin::pin!(stop);
        loop {
            let started = Instant::now();
            if self.ctx.writer.is_leader() && self.ctx.stores.synced() {
                self.pass(self.ctx.clock.now());
            }
            let took = started.elapsed();
            let wait = self
                .engine
                .as_ref()
                .and_then(Engine::next_deadline)
                .map(|d| (d - self.ctx.clock.now()).to_std().unwrap_or_default())
                .unwrap_or(resync)
                .min(resync);
            tokio::select! {
                () = &mut stop => return,
                () = self.ctx.stores.changed() => {}
                Some(outcome) = self.outcomes_rx.recv() => self.outcome(outcome),
                Some(catalog) = next_catalog(&mut self.catalog_rx) => {
                    self.catalog_changed(self.ctx.clock.now(), catalog);
                }
                () = tokio::time::sleep(wait) => {}
            }
            // Let a burst of changes settle before the next pass, and at least as long as the
            // pass took: under a storm of changes the loop uses at most half a core, and the
            // next pass sees more of them at once.
            tokio::time::sleep(took.max(SETTLE)).await;
        }
    }

    fn outcome(&mut self, outcome: Outcome) {
        let now = self.ctx.clock.now();
        self.rest.forget();
        match outcome {
            Outcome::Engine(event) => {
                let event = *event;
                match &event {
                    Event::LaunchFailed { claim, error } => {
                        self.ctx
                            .metrics
                            .launch_failures
                            .get_or_create(&LaunchFailureLabels {
                                error: error_kind(error).to_owned(),
                            })
                            .inc();
                        self.launch_errors.insert(claim.clone(), error.clone());
                        lifecycle::launch_failed_event(&self.ctx, claim, error);
                    }
                    Event::Launched { claim, instance } => {
                        self.launch_errors.remove(claim);
                        lifecycle::launched_event(&self.ctx, claim, instance);
                    }
                    _ => {}
                }
                if let Some(engine) = &mut self.engine {
                    engine.handle(now, event);
                }
            }
            Outcome::LaunchDone { claim } => {
                self.launching.remove(&claim);
            }
            Outcome::TerminationDone { claim } => {
                self.terminating.remove(&claim);
            }
            Outcome::Reservations {
                cloud,
                reservations,
            } => {
                self.reservations.insert(cloud, reservations);
                self.tell_reservations(now);
            }
        }
    }

    /// One pass at `now`: observe, decide, dispatch, write status.
    pub fn pass(&mut self, now: DateTime<Utc>) {
        let _pass = tracing::info_span!("pass").entered();
        let started = Instant::now();
        while let Ok(outcome) = self.outcomes_rx.try_recv() {
            self.outcome(outcome);
        }
        // Taken before anything is read: a change after this shows in the next pass's digests.
        let stores = self.ctx.stores.digests();
        self.observe_unless_at_rest(now, stores);
        let Some(engine) = &mut self.engine else {
            return;
        };
        let solves = engine.stats().solves;
        let unprofitable = engine.stats().moves_unprofitable_as_scheduled;
        let poll_started = Instant::now();
        // The solve's span lists the claims it launches or deletes and the pods it binds.
        let solve = tracing::info_span!(
            "solve",
            nodeclaims = tracing::field::Empty,
            pods = tracing::field::Empty
        );
        let actions = solve.in_scope(|| engine.poll(now));
        if !solve.is_disabled() {
            record_decisions(&solve, engine, &actions);
        }
        if engine.stats().solves > solves {
            self.ctx
                .metrics
                .solve_seconds
                .observe(poll_started.elapsed().as_secs_f64());
        }
        let dropped = engine.stats().moves_unprofitable_as_scheduled - unprofitable;
        if dropped > 0 {
            self.ctx
                .metrics
                .consolidation_moves_unprofitable_as_scheduled
                .inc_by(dropped);
        }
        for window in engine.take_batch_windows() {
            self.ctx
                .metrics
                .batch_window_seconds
                .observe(window.as_seconds_f64());
        }
        for action in actions {
            self.dispatch(now, action);
        }
        self.announce(now);
        if let Some(engine) = &self.engine {
            crate::provisioning_requests::sync(&self.ctx, engine, &mut self.requests, now);
            crate::capacity_buffers::sync(&self.ctx, engine, &mut self.buffers, now);
        }
        self.sync_status_unless_at_rest(now, stores);
        self.terminations();
        self.collect_garbage(now);
        self.poll_cloud_events(now);
        self.poll_reservations(now);
        // The fleet gauges: at once when the launched claims change, else every few seconds.
        let fleet = self
            .ctx
            .stores
            .node_claims
            .state()
            .iter()
            .filter(|c| c.status.as_ref().is_some_and(|s| s.provider_id.is_some()))
            .count();
        if fleet != self.exported_fleet || due(&mut self.next_export, now, EXPORT_INTERVAL) {
            crate::fleet::export(self, now);
            self.last_export = Some(now);
            self.exported_fleet = fleet;
        }
        crate::page::record_pass(self, now);
        self.last_pass = Some(now);
        self.ctx
            .metrics
            .reconcile_seconds
            .observe(started.elapsed().as_secs_f64());
    }

    /// Claims the engine knows.
    pub(crate) fn claims(&self) -> Vec<ClaimView> {
        self.engine
            .as_ref()
            .map(|e| e.claims().collect())
            .unwrap_or_default()
    }

    /// When the fleet gauges were last rebuilt.
    pub(crate) fn last_export(&self) -> Option<DateTime<Utc>> {
        self.last_export
    }

    pub(crate) fn ctx(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The engine, once the stores have synced.
    pub(crate) fn engine_ref(&self) -> Option<&Engine> {
        self.engine.as_ref()
    }

    pub(crate) fn launch_error(&self, claim: &str) -> Option<&CloudError> {
        self.launch_errors.get(claim)
    }

    /// Pods read (turned into the solver's pods) since this driver started: a pass at rest
    /// reads none.
    #[cfg(test)]
    pub(crate) fn pod_reads(&self) -> u64 {
        self.readings.reads()
    }

    /// Observes and status syncs a pass at rest skipped since this driver started.
    #[cfg(test)]
    pub(crate) fn skipped_at_rest(&self) -> u64 {
        self.rest.skipped()
    }

    /// The resource table of the engine in use.
    #[cfg(test)]
    pub(crate) fn table(&self) -> &ResourceTable {
        &self.table
    }
}

/// The next catalog of the price refresh; never resolves without one.
async fn next_catalog(
    rx: &mut Option<mpsc::UnboundedReceiver<quartermaster_pricing::Catalog>>,
) -> Option<quartermaster_pricing::Catalog> {
    match rx {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// Whether a periodic duty is due at `now`; if so, the next one is set `interval` later.
fn due(next: &mut Option<DateTime<Utc>>, now: DateTime<Utc>, interval: TimeDelta) -> bool {
    if next.is_some_and(|t| now < t) {
        return false;
    }
    *next = Some(now + interval);
    true
}

/// Records on the solve's span the claims its actions launch or delete and the pods they are
/// for (nominated to a launched claim, or bound), and logs them there (one line per solve that
/// decided something).
fn record_decisions(span: &tracing::Span, engine: &Engine, actions: &[Action]) {
    let mut claims = Vec::new();
    let mut pods = Vec::new();
    for action in actions {
        match action {
            Action::Launch { claim, .. } => {
                claims.push(claim.as_str());
                pods.extend(engine.nominated_to(claim).map(ToString::to_string));
            }
            Action::Delete { claim, .. } => claims.push(claim.as_str()),
            Action::Bind { pod, .. } => pods.push(pod.to_string()),
            _ => {}
        }
    }
    if claims.is_empty() && pods.is_empty() {
        return;
    }
    span.record("nodeclaims", claims.join(","));
    span.record("pods", pods.join(","));
    span.in_scope(|| tracing::debug!(actions = actions.len(), "solved"));
}
