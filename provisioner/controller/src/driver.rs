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
use quartermaster_policies::{NodeClaim, NodePool};
use quartermaster_solver::{PodRef, ResourceTable};
use serde_json::Value;
use tokio::sync::mpsc;

use crate::context::Context;
use crate::launch::{error_kind, launch};
use crate::lifecycle;
use crate::sweep;
use crate::termination::terminate;
use crate::translate::{
    FINALIZER, LABEL_NODECLAIM, Observed, TAINT_DISRUPTED, found_claim, node_view,
};

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
}

/// What voluntary disruption must respect, as last told to the engine.
#[derive(Debug, Default, PartialEq)]
struct DisruptionInputs {
    pods: BTreeSet<PodRef>,
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
            registration_sent: BTreeMap::new(),
            delete_sent: BTreeMap::new(),
            deleting: BTreeSet::new(),
            seen: BTreeSet::new(),
            launching: BTreeSet::new(),
            terminating: BTreeSet::new(),
            launch_errors: BTreeMap::new(),
            initialized: BTreeSet::new(),
            unschedulable: BTreeMap::new(),
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
        if let Some(engine) = &mut self.engine {
            engine.handle(now, Event::CatalogChanged(catalog));
        }
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
            tokio::time::sleep(took.max(std::time::Duration::from_millis(50))).await;
        }
    }

    fn outcome(&mut self, outcome: Outcome) {
        let now = self.ctx.clock.now();
        match outcome {
            Outcome::Engine(event) => {
                let event = *event;
                match &event {
                    Event::LaunchFailed { claim, error } => {
                        self.ctx
                            .metrics
                            .launch_failures
                            .get_or_create(&vec![("error", error_kind(error).to_owned())])
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
        let started = Instant::now();
        while let Ok(outcome) = self.outcomes_rx.try_recv() {
            self.outcome(outcome);
        }
        self.observe(now);
        let Some(engine) = &mut self.engine else {
            return;
        };
        let solves = engine.stats().solves;
        let poll_started = Instant::now();
        let actions = engine.poll(now);
        if engine.stats().solves > solves {
            self.ctx
                .metrics
                .solve_seconds
                .observe(poll_started.elapsed().as_secs_f64());
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
        lifecycle::sync_status(self, now);
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

    // ------------------------------------------------------------------ observe

    fn observe(&mut self, now: DateTime<Utc>) {
        let stores = &self.ctx.stores;
        let claims: Vec<Arc<NodeClaim>> = stores.node_claims.state();
        let nodes = stores.nodes.state();
        // A node is ours by its NodeClaim label, or by the name or provider id a claim
        // recorded (one pass over each list, not claims × nodes).
        let mut claim_nodes: BTreeSet<&str> = BTreeSet::new();
        let mut claim_providers: BTreeSet<&str> = BTreeSet::new();
        for status in claims.iter().filter_map(|c| c.status.as_ref()) {
            if let Some(n) = &status.node_name {
                claim_nodes.insert(n);
            }
            if let Some(p) = &status.provider_id {
                claim_providers.insert(p);
            }
        }
        let our_nodes: BTreeSet<String> = nodes
            .iter()
            .filter(|n| {
                n.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(LABEL_NODECLAIM))
                    || n.metadata
                        .name
                        .as_deref()
                        .is_some_and(|name| claim_nodes.contains(name))
                    || n.spec
                        .as_ref()
                        .and_then(|s| s.provider_id.as_deref())
                        .is_some_and(|id| claim_providers.contains(id))
            })
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        let table = self.table.clone();
        let node_pools =
            with_preference_policy(stores.node_pools.state(), self.ctx.preference_policy);
        let observed = crate::translate::observe_with_readings(
            &stores.pods.state(),
            &our_nodes,
            &node_pools,
            node_class_values(stores),
            stores
                .daemon_sets
                .state()
                .iter()
                .filter_map(|d| {
                    let mut v = serde_json::to_value(d.as_ref()).ok()?;
                    v["apiVersion"] = Value::from("apps/v1");
                    v["kind"] = Value::from("DaemonSet");
                    Some(v)
                })
                .collect(),
            crate::provisioning_requests::objects(
                &stores.provisioning_requests.state(),
                &stores.pod_templates.state(),
            )
            .into_iter()
            .chain(crate::pod_groups::objects(
                &stores.volcano_pod_groups.state(),
                &stores.coscheduling_pod_groups.state(),
            ))
            .chain(crate::capacity_buffers::objects(
                &stores.capacity_buffers.state(),
                &stores.pods.state(),
            ))
            .collect(),
            &self.catalog,
            &table,
            self.ctx.region.as_deref(),
            &mut self.readings,
        );
        for (object, reason) in &observed.rejected {
            tracing::warn!(object, reason, "object left out of provisioning");
        }
        let buffer_statuses: BTreeMap<String, Value> = stores
            .capacity_buffers
            .state()
            .iter()
            .filter_map(|b| {
                Some((
                    format!(
                        "{}/{}",
                        b.metadata.namespace.as_deref().unwrap_or("default"),
                        b.metadata.name.as_deref()?
                    ),
                    b.status.clone()?,
                ))
            })
            .collect();

        if self.engine.is_none() || observed.fingerprint != self.fingerprint {
            self.rebuild(now, &observed, &claims, &nodes);
        }
        self.requests.observed = observed.provisioning_requests.clone();
        self.buffers.observed = observed.capacity_buffers.clone();
        self.buffers.found = buffer_statuses;
        self.feed_claims(now, &claims, &nodes);
        self.feed_pods(now, &observed);
        if let Some(engine) = &mut self.engine {
            crate::capacity_buffers::tell(engine, &mut self.buffers, now);
        }
        self.feed_disruption_inputs(now, &claims, &nodes);
    }

    /// Do-not-disrupt annotations (pods, nodes, NodeClaims) and PDBs, told on change.
    fn feed_disruption_inputs(
        &mut self,
        now: DateTime<Utc>,
        claims: &[Arc<NodeClaim>],
        nodes: &[Arc<k8s_openapi::api::core::v1::Node>],
    ) {
        let Some(engine) = &mut self.engine else {
            return;
        };
        let stores = &self.ctx.stores;
        let next = DisruptionInputs {
            pods: stores
                .pods
                .state()
                .iter()
                .filter(|p| crate::translate::annotated_do_not_disrupt(&p.metadata))
                .filter_map(|p| {
                    Some(PodRef::new(
                        p.metadata.namespace.clone()?,
                        p.metadata.name.clone()?,
                    ))
                })
                // Capacity booked for a ProvisioningRequest is not consolidated away.
                .chain(
                    self.requests
                        .observed
                        .iter()
                        .flat_map(|r| r.pending.clone()),
                )
                .collect(),
            nodes: nodes
                .iter()
                .map(|n| &n.metadata)
                .chain(claims.iter().map(|c| &c.metadata))
                .filter(|m| crate::translate::annotated_do_not_disrupt(m))
                .filter_map(|m| m.name.clone())
                .collect(),
            pdbs: stores
                .pdbs
                .state()
                .iter()
                .filter_map(|p| crate::translate::pdb_view(p))
                .collect(),
        };
        let last = &self.disruption_inputs;
        for pod in next.pods.symmetric_difference(&last.pods) {
            let on = next.pods.contains(pod);
            engine.handle(
                now,
                Event::PodDoNotDisrupt {
                    pod: pod.clone(),
                    on,
                },
            );
        }
        for node in next.nodes.symmetric_difference(&last.nodes) {
            let on = next.nodes.contains(node);
            engine.handle(
                now,
                Event::NodeDoNotDisrupt {
                    node: node.clone(),
                    on,
                },
            );
        }
        if next.pdbs != last.pdbs {
            engine.handle(now, Event::DisruptionBudgets(next.pdbs.clone()));
        }
        self.disruption_inputs = next;
    }

    /// Builds the engine anew from the cluster: every NodeClaim is adopted as it stands.
    fn rebuild(
        &mut self,
        now: DateTime<Utc>,
        observed: &Observed,
        claims: &[Arc<NodeClaim>],
        nodes: &[Arc<k8s_openapi::api::core::v1::Node>],
    ) {
        tracing::info!(
            pools = observed.setup.pools.len(),
            claims = claims.len(),
            "building the engine from the cluster"
        );
        let mut engine = Engine::new(observed.setup.clone(), self.config.clone());
        self.table = observed.setup.resources.clone();
        self.buffers.told = None;
        // The reservations before the claims: a claim in one is adopted with its offering.
        if let Some(offers) = &self.reservations_told {
            engine.handle(now, Event::ReservationsChanged(offers.clone()));
        }
        self.disruption_inputs = DisruptionInputs::default();
        self.reported.clear();
        self.registered.clear();
        self.deleting.clear();
        for claim in claims {
            let object = claim_node(claim, nodes);
            let mut node = object.map(|n| node_view(n, &self.table));
            let Some(mut found) = found_claim(claim, node.clone()) else {
                continue;
            };
            // A node cordoned for a command this engine never heard of (the last one died in
            // the middle of it) is schedulable again, unless its claim is being deleted.
            if !found.deleting
                && let Some(object) = object.filter(|n| lifecycle::cordoned_for_disruption(n))
                && let Some(name) = object.metadata.name.clone()
            {
                tracing::info!(node = %name, "lifting the cordon of a disruption that did not finish");
                lifecycle::cordon(&self.ctx, name, false);
                for view in node.iter_mut().chain(found.node.iter_mut()) {
                    view.taints.retain(|t| {
                        t.key != TAINT_DISRUPTED && t.key != "node.kubernetes.io/unschedulable"
                    });
                }
            }
            let name = found.name.clone();
            let deleting = found.deleting;
            if let Some(node) = node.filter(|_| found.node.is_some()) {
                self.registered.insert(name.clone(), node);
            }
            engine.handle(now, Event::ClaimFound(found));
            if deleting {
                self.deleting.insert(name);
            }
        }
        self.engine = Some(engine);
        self.fingerprint = observed.fingerprint.clone();
    }

    fn feed_claims(
        &mut self,
        now: DateTime<Utc>,
        claims: &[Arc<NodeClaim>],
        nodes: &[Arc<k8s_openapi::api::core::v1::Node>],
    ) {
        let Some(engine) = &mut self.engine else {
            return;
        };
        let in_store: BTreeSet<String> = claims
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .collect();
        // Claims that were in the cluster and are gone: deleted.
        for gone in self.seen.difference(&in_store).cloned().collect::<Vec<_>>() {
            engine.handle(
                now,
                Event::Deleted {
                    claim: gone.clone(),
                },
            );
            self.seen.remove(&gone);
            self.registered.remove(&gone);
            self.registration_sent.remove(&gone);
            self.delete_sent.remove(&gone);
            self.deleting.remove(&gone);
            self.launch_errors.remove(&gone);
            self.initialized.remove(&gone);
            self.written.forget(&gone);
        }
        self.seen.extend(in_store.iter().cloned());
        for claim in claims {
            let Some(name) = claim.metadata.name.clone() else {
                continue;
            };
            if claim.metadata.deletion_timestamp.is_some() && self.deleting.insert(name.clone()) {
                engine.handle(
                    now,
                    Event::ClaimDeleting {
                        claim: name.clone(),
                    },
                );
            }
        }
        // A claim the engine is deleting that the cluster still shows alive: the delete was
        // sent before the NodeClaim existed (its launch was under way), or failed. Sent again.
        let deleting: BTreeSet<String> = engine
            .claims()
            .filter(|c| c.deleting)
            .map(|c| c.name)
            .collect();
        for claim in claims {
            let Some(name) = claim.metadata.name.clone() else {
                continue;
            };
            let resent = self.delete_sent.get(&name).copied();
            if claim.metadata.deletion_timestamp.is_none()
                && deleting.contains(&name)
                && resent.is_none_or(|t| now - t >= DELETE_RESEND)
            {
                self.delete_sent.insert(name.clone(), now);
                let ctx = self.ctx.clone();
                self.ctx.spawn(async move {
                    if let Err(e) = ctx.writer.delete_claim(&name).await {
                        tracing::warn!(nodeclaim = %name, error = %e, "delete failed; sent again later");
                    }
                });
            }
        }
        // A Node a user deleted: its NodeClaim goes too (termination removes the Node's
        // finalizer once the instance is gone).
        for node in nodes {
            if node.metadata.deletion_timestamp.is_none() {
                continue;
            }
            let owner = node
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_NODECLAIM))
                .cloned();
            if let Some(claim) =
                owner.filter(|c| in_store.contains(c) && !self.deleting.contains(c))
            {
                let ctx = self.ctx.clone();
                self.ctx.spawn(async move {
                    if let Err(e) = ctx.writer.delete_claim(&claim).await {
                        tracing::warn!(nodeclaim = %claim, error = %e, "could not delete the NodeClaim of a deleted Node");
                    }
                });
            }
        }
        // Registration and node updates.
        let by_provider_id: BTreeMap<&str, &Arc<k8s_openapi::api::core::v1::Node>> = nodes
            .iter()
            .filter_map(|n| Some((n.spec.as_ref()?.provider_id.as_deref()?, n)))
            .collect();
        let views: Vec<ClaimView> = engine.claims().collect();
        for c in views {
            let Some(provider_id) = &c.provider_id else {
                continue;
            };
            let Some(node) = by_provider_id.get(provider_id.as_str()).copied() else {
                continue;
            };
            let view = node_view(node, &self.table);
            match self.registered.get(&c.name) {
                None => {
                    let pool = self.ctx.stores.node_pool(c.node_pool.as_str());
                    // The pods this node is for learn it (status.nominatedNodeName) before the
                    // registration patch makes the node schedulable, so a 1.34+ scheduler
                    // keeps their room from the first moment.
                    let node_name = node.metadata.name.clone().unwrap_or_default();
                    let expected: Vec<PodRef> = engine
                        .nominated_to(&c.name)
                        .filter(|p| self.reported.get(*p) == Some(&None))
                        .filter(|p| self.nominations_written.get(*p) != Some(&node_name))
                        .cloned()
                        .collect();
                    for p in &expected {
                        self.nominations_written
                            .insert(p.clone(), node_name.clone());
                    }
                    let registered = lifecycle::register(
                        &self.ctx,
                        &c,
                        node,
                        pool.as_deref(),
                        lifecycle::Registration::First { expected },
                    );
                    self.registration_sent.insert(c.name.clone(), now);
                    let view = node_view(&registered, &self.table);
                    engine.handle(
                        now,
                        Event::NodeRegistered {
                            claim: c.name.clone(),
                            node: view.clone(),
                        },
                    );
                    self.registered.insert(c.name.clone(), view);
                }
                Some(last) if *last != view => {
                    // A node that lost its registration patch (conflict, restart) gets it again,
                    // once the watch has had time to show the last one.
                    let sent = self.registration_sent.get(&c.name).copied();
                    if lifecycle::needs_registration(node)
                        && sent.is_none_or(|t| now - t >= REGISTRATION_RESEND)
                    {
                        self.registration_sent.insert(c.name.clone(), now);
                        let pool = self.ctx.stores.node_pool(c.node_pool.as_str());
                        lifecycle::register(
                            &self.ctx,
                            &c,
                            node,
                            pool.as_deref(),
                            lifecycle::Registration::Again,
                        );
                    }
                    let view = lifecycle::without_unregistered(view);
                    engine.handle(now, Event::NodeUpdated { node: view.clone() });
                    self.registered.insert(c.name.clone(), view);
                }
                Some(_) => {}
            }
        }
    }

    fn feed_pods(&mut self, now: DateTime<Utc>, observed: &Observed) {
        let Some(engine) = &mut self.engine else {
            return;
        };
        for (id, o) in &observed.pods {
            if let Some(created) = o.created_at {
                self.created.entry(id.clone()).or_insert(created);
            }
            let before = self.reported.get(id);
            match (&o.node, before) {
                (None, None) => {
                    engine.handle(now, Event::PodPending(o.pod.as_ref().clone()));
                }
                (None, Some(_)) => {}
                (Some(node), before) if before != Some(&Some(node.clone())) => {
                    self.nominations_written.remove(id);
                    if matches!(before, Some(None))
                        && let Some(created) = self.created.get(id)
                    {
                        self.ctx
                            .metrics
                            .pod_pending_seconds
                            .observe((now - *created).num_milliseconds().max(0) as f64 / 1000.0);
                    }
                    engine.handle(
                        now,
                        Event::PodBound {
                            pod: o.pod.as_ref().clone(),
                            node: node.clone(),
                        },
                    );
                }
                (Some(_), _) => {}
            }
            self.reported.insert(id.clone(), o.node.clone());
        }
        let gone: Vec<PodRef> = self
            .reported
            .keys()
            .filter(|id| !observed.pods.contains_key(*id))
            .cloned()
            .collect();
        for id in gone {
            self.reported.remove(&id);
            self.nominations_written.remove(&id);
            self.created.remove(&id);
            self.unschedulable.remove(&id);
            engine.handle(now, Event::PodGone(id));
        }
        let pending = self.reported.values().filter(|n| n.is_none()).count();
        self.ctx.metrics.pods_pending.set(pending as i64);
    }

    // ------------------------------------------------------------------ act

    fn dispatch(&mut self, now: DateTime<Utc>, action: Action) {
        match action {
            Action::Launch { claim, request } => {
                if !self.launching.insert(claim.clone()) {
                    return;
                }
                let cloud = self
                    .engine
                    .as_ref()
                    .and_then(|e| e.claim(&claim))
                    .map(|c| c.cloud);
                let Some(cloud) = cloud else {
                    self.launching.remove(&claim);
                    return;
                };
                let pool = self.ctx.stores.node_pool(request.node_pool.as_str());
                if !self.seen.contains(&claim) && !self.written.created(&claim) {
                    self.ctx
                        .metrics
                        .nodeclaims_created
                        .get_or_create(&vec![("nodepool", request.node_pool.clone())])
                        .inc();
                    self.written.mark_created(&claim);
                    lifecycle::nominated_events(self, &claim);
                    crate::page::record_decision(
                        &self.ctx,
                        now,
                        crate::page::Decision::launch(&request),
                    );
                }
                self.ctx.spawn(launch(
                    self.ctx.clone(),
                    cloud,
                    request,
                    pool,
                    self.outcomes_tx.clone(),
                    Instant::now(),
                ));
            }
            Action::Delete {
                claim,
                provider_id,
                reason,
            } => {
                let view = self.engine.as_ref().and_then(|e| e.claim(&claim));
                let pool = view
                    .as_ref()
                    .map(|v| v.node_pool.clone())
                    .unwrap_or_default();
                self.ctx
                    .metrics
                    .nodeclaims_terminated
                    .get_or_create(&vec![("nodepool", pool), ("reason", reason.to_string())])
                    .inc();
                if reason == quartermaster_engine::DeleteReason::Underutilized
                    && let Some(v) = &view
                {
                    self.ctx
                        .metrics
                        .consolidation_savings
                        .inc_by(v.offering.price_per_hour);
                }
                lifecycle::disrupting_event(self, &claim, reason, view.as_ref());
                crate::page::record_decision(
                    &self.ctx,
                    now,
                    crate::page::Decision::delete(&claim, reason, view.as_ref()),
                );
                let ctx = self.ctx.clone();
                let tx = self.outcomes_tx.clone();
                // A claim whose launch task created (or is creating) its NodeClaim is in the
                // cluster even before the store shows it: deleting only the instance would leave
                // the NodeClaim, and the instance a launch still running may create, behind.
                let in_cluster = self.seen.contains(&claim)
                    || self.written.created(&claim)
                    || self.launching.contains(&claim);
                self.ctx.spawn(async move {
                    if in_cluster {
                        if let Err(e) = ctx.writer.delete_claim(&claim).await {
                            tracing::warn!(nodeclaim = %claim, error = %e, "delete failed; retried on the next pass");
                        }
                        return;
                    }
                    // Never recorded in the cluster: delete the instance directly.
                    if let (Some(id), Some(provider)) = (
                        provider_id,
                        view.and_then(|v| ctx.provider(v.cloud).cloned()),
                    ) {
                        let _ = provider.delete(&id).await;
                    }
                    let _ = tx.send(Outcome::Engine(Box::new(Event::Deleted { claim })));
                });
            }
            // The kube-scheduler binds pods: it is told where they are expected, no more.
            Action::Bind { pod, node } => self.nominate_pod(pod, node),
            Action::Cordon { node } => lifecycle::cordon(&self.ctx, node, true),
            Action::Uncordon { node } => lifecycle::cordon(&self.ctx, node, false),
            // Pods leave a node through its NodeClaim's termination (evictions honour PDBs).
            Action::Drain { .. } => {}
            Action::Reboot {
                claim,
                provider_id,
                reason,
            } => {
                lifecycle::rebooting_event(self, &claim, &reason);
                let provider = self
                    .engine
                    .as_ref()
                    .and_then(|e| e.claim(&claim))
                    .and_then(|v| self.ctx.provider(v.cloud).cloned());
                let tx = self.outcomes_tx.clone();
                self.ctx.spawn(async move {
                    let result = match provider {
                        Some(p) => crate::repair::reboot(p.as_ref(), &provider_id).await,
                        None => Err(format!("no cloud provider for {provider_id}")),
                    };
                    if let Err(error) = result {
                        tracing::warn!(nodeclaim = %claim, %error, "reboot failed; replacing the node");
                        let _ = tx.send(Outcome::Engine(Box::new(Event::RebootFailed { claim, error })));
                    }
                });
            }
            Action::Disrupt(command) => {
                tracing::info!(
                    kind = %command.kind,
                    reason = %command.reason,
                    saving_per_hour = command.saving_per_hour,
                    nodeclaims = ?command.claims,
                    replacements = ?command.replacements,
                    pods = command.pods,
                    "disruption decided"
                );
                let labels = vec![
                    ("kind", command.kind.to_string()),
                    ("reason", command.reason.to_string()),
                ];
                self.ctx
                    .metrics
                    .disruption_commands
                    .get_or_create(&labels)
                    .inc();
                self.ctx
                    .metrics
                    .disruption_expected_savings
                    .get_or_create(&labels)
                    .inc_by(command.saving_per_hour);
                crate::page::record_decision(
                    &self.ctx,
                    now,
                    crate::page::Decision::disrupt(&command),
                );
            }
        }
    }

    /// Writes `status.nominatedNodeName` of a pod that is still pending (once per node): a
    /// hint the kube-scheduler honours from Kubernetes 1.34 (KEP-5278) by keeping the node's
    /// room for it. Nothing depends on it: the engine checks what was really bound.
    fn nominate_pod(&mut self, pod: PodRef, node: String) {
        if self.reported.get(&pod) != Some(&None)
            || self.nominations_written.get(&pod) == Some(&node)
        {
            return;
        }
        self.nominations_written.insert(pod.clone(), node.clone());
        let ctx = self.ctx.clone();
        self.ctx.spawn(async move {
            if let Err(e) = ctx
                .writer
                .nominate_pod(&pod.namespace, &pod.name, &node)
                .await
            {
                tracing::debug!(%pod, node, error = %e, "could not write nominatedNodeName");
            }
        });
    }

    /// Unschedulable events for pods the solver could not place, and Initialized events.
    fn announce(&mut self, now: DateTime<Utc>) {
        let Some(engine) = &self.engine else {
            return;
        };
        let waiting: Vec<(PodRef, String)> = engine
            .waiting()
            .filter_map(|(id, r)| Some((id.clone(), r?.to_owned())))
            // A ProvisioningRequest's pods do not exist: its conditions carry the reason.
            .filter(|(id, _)| {
                !self
                    .requests
                    .observed
                    .iter()
                    .any(|r| r.pending.contains(id))
            })
            .collect();
        // Each explanation is a solve: only the first few new reasons of a pass get one.
        let mut explained = 0;
        for (id, reason) in waiting {
            if self.unschedulable.get(&id) == Some(&reason) {
                continue;
            }
            let top = (explained < EXPLAINED_PER_PASS)
                .then(|| engine.explain(now, &id))
                .flatten()
                .map(|e| quartermaster_solver::explain::top_reasons(&e, TOP_REASONS))
                .filter(|t| !t.is_empty());
            explained += 1;
            let message = match top {
                Some(top) => format!("{reason} (offerings ruled out: {top})"),
                None => reason.clone(),
            };
            lifecycle::unschedulable_event(&self.ctx, &id, &message);
            self.unschedulable.insert(id, reason);
        }
        let newly: Vec<ClaimView> = engine
            .claims()
            .filter(|c| c.initialized && !self.initialized.contains(&c.name))
            .collect();
        for c in newly {
            self.initialized.insert(c.name.clone());
            lifecycle::initialized_event(&self.ctx, &c);
        }
    }

    fn terminations(&mut self) {
        for claim in self.ctx.stores.node_claims.state() {
            let Some(name) = claim.metadata.name.clone() else {
                continue;
            };
            let ours = claim
                .metadata
                .finalizers
                .iter()
                .flatten()
                .any(|f| f == FINALIZER);
            if claim.metadata.deletion_timestamp.is_none()
                || !ours
                || self.launching.contains(&name)
                || !self.terminating.insert(name.clone())
            {
                continue;
            }
            let ctx = self.ctx.clone();
            let tx = self.outcomes_tx.clone();
            self.ctx.spawn(async move {
                terminate(ctx, name.clone()).await;
                let _ = tx.send(Outcome::TerminationDone { claim: name });
            });
        }
    }

    /// Each cloud's capacity reservations are read now and then; they reach the engine when
    /// they (or the pools that select them) change.
    fn poll_reservations(&mut self, now: DateTime<Utc>) {
        if !due(&mut self.next_reservations, now, RESERVATIONS_INTERVAL) {
            return;
        }
        for provider in self.ctx.providers.values() {
            let provider = provider.clone();
            let tx = self.outcomes_tx.clone();
            self.ctx.spawn(async move {
                match provider.reservations().await {
                    Ok(reservations) => {
                        let _ = tx.send(Outcome::Reservations {
                            cloud: provider.cloud(),
                            reservations,
                        });
                    }
                    Err(e) => {
                        tracing::warn!(cloud = %provider.cloud(), error = %e, "could not read capacity reservations; the last ones read stand")
                    }
                }
            });
        }
    }

    /// Tells the engine the reservation offers when they changed.
    fn tell_reservations(&mut self, now: DateTime<Utc>) {
        let Some(engine) = &mut self.engine else {
            return;
        };
        let all: Vec<quartermaster_pricing::Reservation> =
            self.reservations.values().flatten().cloned().collect();
        if all.is_empty() && self.reservations_told.is_none() {
            return;
        }
        let mut ours: BTreeMap<String, u32> = BTreeMap::new();
        for c in engine
            .claims()
            .filter(|c| c.provider_id.is_some() && !c.deleting)
        {
            if let Some(id) = c
                .labels
                .get(quartermaster_pricing::reservation::LABEL_RESERVATION_ID)
            {
                *ours.entry(id.clone()).or_default() += 1;
            }
        }
        let (aws, gcp, azure) = (
            self.ctx.stores.aws_node_classes.state(),
            self.ctx.stores.gcp_node_classes.state(),
            self.ctx.stores.azure_node_classes.state(),
        );
        let offers = crate::reservations::offers(
            &all,
            &self.ctx.stores.node_pools.state(),
            crate::reservations::NodeClasses {
                aws: &aws,
                gcp: &gcp,
                azure: &azure,
            },
            &ours,
        );
        if self.reservations_told.as_ref() != Some(&offers) {
            self.reservations_told = Some(offers.clone());
            engine.handle(now, Event::ReservationsChanged(offers));
        }
    }

    /// What the clouds announced (spot interruption notices, instances gone behind our back)
    /// goes to the engine; a claim whose instance is gone is deleted so its record goes too.
    fn poll_cloud_events(&mut self, now: DateTime<Utc>) {
        if !due(&mut self.next_events, now, EVENTS_INTERVAL) {
            return;
        }
        for provider in self.ctx.providers.values() {
            self.ctx.spawn(sweep::forward_events(
                self.ctx.clone(),
                provider.clone(),
                self.outcomes_tx.clone(),
            ));
        }
    }

    /// Instances without a NodeClaim (a leak: a crash between launch and record, a claim
    /// removed by hand) are deleted.
    fn collect_garbage(&mut self, now: DateTime<Utc>) {
        if !due(&mut self.next_gc, now, GC_INTERVAL) {
            return;
        }
        let known: BTreeSet<String> = self
            .ctx
            .stores
            .node_claims
            .state()
            .iter()
            .filter_map(|c| c.metadata.name.clone())
            .chain(self.launching.iter().cloned())
            .chain(self.claims().into_iter().map(|c| c.name))
            .collect();
        // The instance each claim recorded: another one of the same claim is a duplicate.
        let recorded: BTreeMap<String, String> = self
            .ctx
            .stores
            .node_claims
            .state()
            .iter()
            .filter_map(|c| {
                let id = c.status.as_ref()?.provider_id.clone()?;
                Some((c.metadata.name.clone()?, id))
            })
            .chain(
                self.claims()
                    .into_iter()
                    .filter_map(|c| Some((c.name, c.provider_id?))),
            )
            .collect();
        for provider in self.ctx.providers.values() {
            for (name, spec) in crate::launch::node_classes(&self.ctx, provider.cloud()) {
                provider.node_class_observed(&name, &spec);
            }
            self.ctx.spawn(sweep::delete_leaks(
                provider.clone(),
                known.clone(),
                recorded.clone(),
                now,
            ));
            self.ctx.spawn(sweep::report_drift(
                provider.clone(),
                known.clone(),
                self.outcomes_tx.clone(),
            ));
        }
        self.ctx
            .spawn(sweep::release_orphan_nodes(self.ctx.clone(), known, now));
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

fn claim_node<'a>(
    claim: &NodeClaim,
    nodes: &'a [Arc<k8s_openapi::api::core::v1::Node>],
) -> Option<&'a k8s_openapi::api::core::v1::Node> {
    let status = claim.status.as_ref()?;
    nodes
        .iter()
        .find(|n| {
            status.node_name.is_some() && n.metadata.name == status.node_name
                || status.provider_id.is_some()
                    && n.spec.as_ref().and_then(|s| s.provider_id.clone()) == status.provider_id
        })
        .map(Arc::as_ref)
}

fn node_class_values(stores: &crate::stores::Stores) -> Vec<Value> {
    fn values<K: serde::Serialize>(items: Vec<Arc<K>>, kind: &str) -> Vec<Value> {
        items
            .iter()
            .filter_map(|i| {
                let mut v = serde_json::to_value(i.as_ref()).ok()?;
                v["apiVersion"] = Value::from("quartermaster.dev/v1");
                v["kind"] = Value::from(kind);
                Some(v)
            })
            .collect()
    }
    let mut out = values(stores.aws_node_classes.state(), "AWSNodeClass");
    out.extend(values(stores.gcp_node_classes.state(), "GCPNodeClass"));
    out.extend(values(stores.azure_node_classes.state(), "AzureNodeClass"));
    out
}

/// `pools` with `spec.preferencePolicy` set to `policy` (`--preference-policy`), or as they are.
fn with_preference_policy(
    pools: Vec<Arc<NodePool>>,
    policy: Option<quartermaster_policies::PreferencePolicy>,
) -> Vec<Arc<NodePool>> {
    let Some(policy) = policy else {
        return pools;
    };
    pools
        .into_iter()
        .map(|p| {
            let mut pool = p.as_ref().clone();
            pool.spec.preference_policy = Some(policy);
            Arc::new(pool)
        })
        .collect()
}
