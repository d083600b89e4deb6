//! The discrete-event loop. It owns the engine, one simulated cloud per cloud the NodePools use,
//! the in-memory cluster and the recorder, and moves a manual clock from one event to the next:
//! the next workload event, job completion, cloud event, engine deadline or retried call.
//!
//! At each instant it feeds the engine what happened (pods created or gone, nodes registered or
//! ready, interruptions, instances gone), then polls it until it has nothing more to do,
//! carrying out every action and reporting the outcome back as an event.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_cloud::{CloudError, CloudEvent, CloudProvider, ManualClock};
use quartermaster_engine::{Action, Engine, EngineStats, Event, NodeView};
use quartermaster_pricing::{CapacityType, Cloud};
use quartermaster_sim::{SimCloud, SimNodeEvent, SimStats};
use quartermaster_solver::{Gang, PodRef, daemonset_overhead, to_resources};

use crate::cluster::{Cluster, JobRun};
use crate::disruption::{DisruptionRecord, Tracker, pdb_view};
use crate::error::SimulationError;
use crate::record::{EndReason, InstanceRecord, Record};
use crate::rng::cloud_seed;
use crate::scenario::world::{World, build};
use crate::scenario::{Scenario, WorkloadKind};
use crate::scheduler;
use crate::workload::{Trace, TraceEvent, generate};

/// Rounds of "feed events, poll the engine" at one instant before the run is declared stuck.
pub const MAX_ROUNDS_PER_INSTANT: usize = 10_000;
/// How far the clock moves when the engine's only deadline is already past (e.g. an empty node
/// whose removal a disruption budget holds back): the engine is polled again this much later.
pub const STALE_DEADLINE_STEP: TimeDelta = TimeDelta::seconds(30);
/// How often instances without a NodeClaim are looked for, as the controller does.
pub const GC_INTERVAL: TimeDelta = TimeDelta::minutes(2);
/// An instance younger than this is never collected (its claim may not be known yet).
pub const GC_GRACE: TimeDelta = TimeDelta::minutes(1);

/// What one run leaves behind.
#[derive(Debug, Clone)]
pub struct Run {
    /// The record.
    pub record: Record,
    /// Engine counters.
    pub engine: EngineStats,
    /// Simulated cloud counters, per cloud.
    pub clouds: Vec<(Cloud, SimStats)>,
    /// Pods still waiting at the end, with the reason the engine last gave.
    pub waiting: Vec<(PodRef, Option<String>)>,
    /// Instants the loop visited.
    pub instants: u64,
    /// Trace size (job submissions and replica changes).
    pub trace_events: usize,
    /// What voluntary disruption did.
    pub disruption: DisruptionRecord,
    /// Every hour's workload solved again from scratch (empty for a run without measures).
    pub hindsight: Hindsight,
    /// Pods waiting at the end, by why.
    pub waiting_at_end: Waiting,
    /// Instances and claims checked against each other at the end.
    pub audit: Audit,
}

/// A Deployment's live pods, oldest first.
#[derive(Debug, Default)]
struct Deployment {
    pods: Vec<PodRef>,
    next: u64,
}

/// A delete call to try again.
#[derive(Debug, Clone)]
struct DeleteRetry {
    at: DateTime<Utc>,
    claim: String,
    provider_id: String,
}

/// The loop's state.
struct Driver<'s> {
    scenario: &'s Scenario,
    world: World,
    engine: Engine,
    clock: Arc<ManualClock>,
    clouds: BTreeMap<Cloud, SimCloud>,
    cluster: Cluster,
    rec: Record,
    trace: Trace,
    cursor: usize,
    deployments: BTreeMap<usize, Deployment>,
    retries: Vec<DeleteRetry>,
    now: DateTime<Utc>,
    /// Disruption figures and rules.
    tracker: Tracker,
    /// The catalog in force (after price changes).
    catalog: quartermaster_pricing::Catalog,
    /// The next change of `scenario.changes` to apply.
    change_cursor: usize,
    /// Whether the achievable saving was measured.
    measured: bool,
    /// Alive pods of workloads with a PodDisruptionBudget, by workload.
    guarded: BTreeMap<usize, std::collections::BTreeSet<PodRef>>,
    /// Workload of every alive pod.
    workload_of: BTreeMap<PodRef, usize>,
    /// The cluster's room-change and creation counters when the scheduler stand-in last ran.
    scheduled_at_change: Option<(u64, u64)>,
    /// The workload is held still (the settle after the measure): no arrivals, completions,
    /// scaling or scenario changes.
    frozen: bool,
    /// The next hindsight sample; `None` when not sampling.
    hindsight_next: Option<DateTime<Utc>>,
    /// The hindsight figures so far.
    hindsight: Hindsight,
    /// Node events of instances the driver has not heard of yet (their launch answer was
    /// lost), by provider id.
    stashed: BTreeMap<String, Vec<SimNodeEvent>>,
    /// The next garbage collection (instances without a claim).
    next_gc: DateTime<Utc>,
    /// Instances garbage collection deleted.
    collected: u64,
    /// The last hindsight solve: the cluster's population and the scenario changes applied
    /// then, plan cost and bound.
    hindsight_last: Option<measure::HindsightSolve>,
    /// Driver crashes (`--chaos`), when injected.
    crashes: Option<restart::Crashes>,
    /// NodeClaims whose launch began: in the cluster, they survive a crash.
    created_claims: std::collections::BTreeSet<String>,
    /// NodeClaims whose deletion was asked for: deleting in the cluster.
    deletes_asked: std::collections::BTreeSet<String>,
    /// Counters of the engines a crash threw away.
    stats_before: EngineStats,
    /// Live instances per NodePool (record indices), for the limit check.
    live_by_pool: BTreeMap<String, limits::LiveInPool>,
    /// Launches that took a NodePool over one of its limits.
    limit_violations: u64,
    /// Gangs seen partly launched past their launch timeout.
    half_launched_gangs: std::collections::BTreeSet<String>,
    /// CapacityBuffers told to the engine, and the room they hold now.
    buffers: headroom::BufferState,
}

/// Runs `scenario` with `seed` and measures it (the achievable saving and what consolidation
/// captured of it, the hindsight cost, why pods still wait: see [`measure`]). `progress` is
/// told the fraction of simulated time done.
pub fn run(
    scenario: &Scenario,
    seed: u64,
    progress: Option<&mut dyn FnMut(f64)>,
) -> Result<Run, SimulationError> {
    run_with(scenario, seed, progress, true)
}

/// [`run`], with the measures only when `measures` (a baseline run needs none of them).
pub fn run_with(
    scenario: &Scenario,
    seed: u64,
    mut progress: Option<&mut dyn FnMut(f64)>,
    measures: bool,
) -> Result<Run, SimulationError> {
    let mut d = Driver::new(scenario, seed)?;
    if measures {
        d.hindsight_next = Some(scenario.start + measure::HINDSIGHT_STEP / 2);
    }
    let end = scenario.end();
    let instants = d.run_until(end, false, progress.as_deref_mut())?;
    d.clock.set(end);
    d.now = end;
    if !d.measured {
        d.measure();
    }
    d.tracker.record.fleet_cost_at_end = d.fleet_cost();
    let waiting_at_end = if measures {
        d.waiting_at_end()
    } else {
        Waiting::default()
    };
    let audit = if measures {
        d.audit()
    } else {
        Audit::default()
    };
    // The run's record ends here; the settle goes on from a copy of the cluster.
    d.close_headroom(end);
    let (mut cluster, mut record) = if measures {
        (d.cluster.clone(), d.rec.clone())
    } else {
        (std::mem::take(&mut d.cluster), std::mem::take(&mut d.rec))
    };
    cluster.finish(end, &mut record);
    for i in 0..record.instances.len() {
        record.ended(i, end, EndReason::RunEnded);
    }
    let waiting = d
        .engine
        .waiting()
        .map(|(id, reason)| (id.clone(), reason.map(str::to_owned)))
        .collect();
    let mut engine = d.stats_before.clone();
    engine.add(d.engine.stats());
    let clouds = d.clouds.iter().map(|(c, s)| (*c, s.stats())).collect();
    let mut disruption = d.tracker.record.clone();
    if measures {
        // The settle starts from the measure point: here, or in a replay of the run up to it.
        let (after, seconds) = match scenario.measure_at.filter(|t| *t < end) {
            None => {
                let after = d.settle()?;
                (after, d.tracker.record.settle_seconds)
            }
            Some(at) => {
                let mut replay = Driver::new(scenario, seed)?;
                replay.run_until(at, true, None)?;
                let after = replay.settle()?;
                (after, replay.tracker.record.settle_seconds)
            }
        };
        disruption.fleet_cost_after_settle = Some(after);
        disruption.settle_seconds = seconds;
    }
    if let Some(p) = &mut progress {
        p(1.0);
    }
    Ok(Run {
        engine,
        clouds,
        waiting,
        instants,
        trace_events: d.trace.events.len(),
        disruption,
        hindsight: d.hindsight,
        waiting_at_end,
        audit,
        record,
    })
}

/// The seed of the simulated clouds: the run's, mixed with the chaos seed when there is one
/// (so that every chaos seed draws its own faults).
fn chaos_mixed(seed: u64, chaos: Option<u64>) -> u64 {
    chaos.map_or(seed, |c| seed ^ c.rotate_left(32) ^ 0x9E37_79B9_7F4A_7C15)
}

/// Resolves a future that must already be ready (the simulated cloud never waits).
fn ready<T>(
    what: &str,
    at: DateTime<Utc>,
    f: impl Future<Output = T>,
) -> Result<T, SimulationError> {
    let mut f = std::pin::pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Ok(v),
        Poll::Pending => Err(SimulationError::Inconsistent {
            at,
            what: format!("the simulated cloud's {what} future was not ready"),
        }),
    }
}

impl<'s> Driver<'s> {
    /// The loop's state at the scenario's start.
    fn new(scenario: &'s Scenario, seed: u64) -> Result<Self, SimulationError> {
        let world = build(scenario)?;
        let clock = Arc::new(ManualClock::new(scenario.start));
        let mut clouds = BTreeMap::new();
        for pool in &world.setup.pools {
            let cloud = pool.spec.cloud;
            if clouds.contains_key(&cloud) {
                continue;
            }
            let sim = SimCloud::try_new(
                cloud,
                world.setup.catalog.clone(),
                scenario.cloud.clone(),
                clock.clone(),
                scenario.start,
                cloud_seed(chaos_mixed(seed, scenario.chaos), cloud),
            )
            .map_err(|e| SimulationError::scenario(&scenario.file, "spec.cloud", e.to_string()))?;
            clouds.insert(cloud, sim);
        }
        let mut engine = Engine::new(world.setup.clone(), scenario.engine.clone());
        if !world.reservations.is_empty() {
            engine.handle(
                scenario.start,
                Event::ReservationsChanged(world.reservations.clone()),
            );
        }
        let trace = generate(scenario, seed);
        let catalog = world.setup.catalog.clone();
        Ok(Driver {
            scenario,
            world,
            engine,
            clock,
            clouds,
            cluster: Cluster::default(),
            rec: Record::default(),
            trace,
            cursor: 0,
            deployments: BTreeMap::new(),
            retries: Vec::new(),
            now: scenario.start,
            tracker: Tracker::default(),
            catalog,
            change_cursor: 0,
            measured: false,
            guarded: BTreeMap::new(),
            workload_of: BTreeMap::new(),
            scheduled_at_change: None,
            frozen: false,
            hindsight_next: None,
            hindsight: Hindsight::default(),
            hindsight_last: None,
            stashed: BTreeMap::new(),
            next_gc: scenario.start + GC_INTERVAL,
            collected: 0,
            crashes: restart::Crashes::new(
                scenario.chaos,
                scenario.driver_crashes_per_hour,
                scenario.start,
            ),
            created_claims: Default::default(),
            deletes_asked: Default::default(),
            stats_before: EngineStats::default(),
            live_by_pool: BTreeMap::new(),
            limit_violations: 0,
            half_launched_gangs: Default::default(),
            buffers: Default::default(),
        })
    }

    /// Visits every instant before `until` (and at it, when `inclusive`), taking the hindsight
    /// samples due. Returns the instants visited.
    fn run_until(
        &mut self,
        until: DateTime<Utc>,
        inclusive: bool,
        mut progress: Option<&mut (dyn FnMut(f64) + '_)>,
    ) -> Result<u64, SimulationError> {
        let start = self.scenario.start;
        let total = (until - start).as_seconds_f64().max(1.0);
        let mut instants = 0u64;
        let mut reported = -1.0;
        loop {
            self.instant()?;
            instants += 1;
            if let Some(p) = &mut progress {
                let done = (self.now - start).as_seconds_f64() / total;
                if done - reported >= 0.01 {
                    reported = done;
                    p(done.min(1.0));
                }
            }
            let next = self.next_time();
            self.sample_hindsight(next.map_or(until, |t| t.min(until)), until);
            match next {
                Some(t) if t < until || (inclusive && t == until) => {
                    self.now = t;
                    self.clock.set(t);
                }
                _ => return Ok(instants),
            }
        }
    }

    fn inconsistent(&self, what: impl Into<String>) -> SimulationError {
        SimulationError::Inconsistent {
            at: self.now,
            what: what.into(),
        }
    }

    /// Everything at the current instant, until nothing more happens.
    fn instant(&mut self) -> Result<(), SimulationError> {
        if !self.frozen {
            self.apply_changes()?;
        }
        self.collect_garbage()?;
        self.idle_crash();
        if !self.frozen && !self.measured && self.scenario.measure_at.is_some_and(|t| self.now >= t)
        {
            self.measure();
        }
        for round in 0.. {
            self.tell_pdbs();
            let mut busy = self.feed_workload();
            self.tell_buffers();
            busy |= self.feed_retries()?;
            busy |= self.feed_clouds()?;
            let actions = self.engine.poll(self.now);
            if !actions.is_empty() {
                busy = true;
                for a in actions {
                    // A crash drops the rest of the batch: the new engine decides again.
                    if let Some(point) = self.execute(a)? {
                        self.restart(point);
                        break;
                    }
                }
            }
            self.record_headroom();
            busy |= self.schedule()?;
            if !busy {
                return Ok(());
            }
            if round >= MAX_ROUNDS_PER_INSTANT {
                return Err(SimulationError::Stuck {
                    at: self.now,
                    what: format!(
                        "the engine still returned actions after {MAX_ROUNDS_PER_INSTANT} polls at one instant"
                    ),
                });
            }
        }
        Ok(())
    }

    /// The next instant anything happens.
    fn next_time(&mut self) -> Option<DateTime<Utc>> {
        let now = self.now;
        let mut times: Vec<DateTime<Utc>> = Vec::new();
        if !self.frozen {
            times.extend(self.trace.events.get(self.cursor).map(|(t, _)| *t));
            times.extend(self.cluster.next_completion());
            times.extend(self.scenario.changes.get(self.change_cursor).map(|c| c.at));
            if !self.measured {
                times.extend(self.scenario.measure_at);
            }
        }
        times.extend(self.retries.iter().map(|r| r.at));
        times.extend(self.clouds.values().filter_map(SimCloud::next_event_at));
        if let Some(d) = self.engine.next_deadline() {
            times.push(if d > now {
                d
            } else {
                now + STALE_DEADLINE_STEP
            });
        }
        times
            .into_iter()
            .map(|t| t.max(now + TimeDelta::milliseconds(1)))
            .min()
    }

    // ------------------------------------------------------------------ workload

    fn feed_workload(&mut self) -> bool {
        if self.frozen {
            return false;
        }
        let mut busy = false;
        while let Some((t, e)) = self.trace.events.get(self.cursor).cloned() {
            if t > self.now {
                break;
            }
            self.cursor += 1;
            busy = true;
            match e {
                TraceEvent::JobSubmitted {
                    workload,
                    job,
                    run_time,
                } => self.submit_job(workload, job, run_time),
                TraceEvent::Scaled { workload, replicas } => self.scale(workload, replicas),
            }
        }
        for id in self.cluster.due_completions(self.now) {
            busy = true;
            self.cluster.delete_pod(self.now, &id, true, &mut self.rec);
            self.forget(&id);
            self.engine.handle(self.now, Event::PodGone(id));
        }
        busy
    }

    fn create(&mut self, workload: usize, name: String, job: Option<JobRun>, gang: Option<Gang>) {
        let w = &self.scenario.workloads[workload];
        let mut pod = self.world.templates[workload].clone();
        pod.id = PodRef::new(&w.namespace, name);
        pod.gang = gang;
        self.cluster
            .create_pod(self.now, pod.clone(), workload, job, &mut self.rec);
        // Without gang awareness the provisioner sees each pod on its own; the cluster still
        // starts the gang's pods only together.
        if !self.scenario.gang_aware {
            pod.gang = None;
        }
        self.workload_of.insert(pod.id.clone(), workload);
        if w.max_unavailable.is_some() {
            self.guarded
                .entry(workload)
                .or_default()
                .insert(pod.id.clone());
        }
        let protected = w.do_not_disrupt();
        let id = pod.id.clone();
        self.engine.handle(self.now, Event::PodPending(pod));
        if protected {
            self.engine
                .handle(self.now, Event::PodDoNotDisrupt { pod: id, on: true });
        }
    }

    fn submit_job(&mut self, workload: usize, job: u64, run_time: TimeDelta) {
        let w = &self.scenario.workloads[workload];
        let WorkloadKind::Job(spec) = &w.kind else {
            return;
        };
        let (parallelism, checkpointed) = (spec.parallelism, spec.checkpointed);
        let base = format!("{}-{job:05}", w.name);
        let gang = spec.gang.then(|| Gang {
            name: format!("{}/{base}", w.namespace),
            min_member: parallelism,
        });
        for i in 0..parallelism {
            let name = if parallelism == 1 {
                base.clone()
            } else {
                format!("{base}-{i}")
            };
            let run = JobRun {
                run_time,
                done: TimeDelta::zero(),
                checkpointed,
            };
            self.create(workload, name, Some(run), gang.clone());
        }
    }

    fn scale(&mut self, workload: usize, replicas: u32) {
        let replicas = replicas as usize;
        let name = self.scenario.workloads[workload].name.clone();
        let current = self.deployments.entry(workload).or_default().pods.len();
        if replicas > current {
            for _ in current..replicas {
                let d = self.deployments.entry(workload).or_default();
                let pod_name = format!("{name}-{:05}", d.next);
                d.next += 1;
                let ns = &self.scenario.workloads[workload].namespace;
                d.pods.push(PodRef::new(ns, &pod_name));
                self.create(workload, pod_name, None, None);
            }
            return;
        }
        // Scale down as the ReplicaSet controller does: pending pods first, then the newest.
        let d = self.deployments.entry(workload).or_default();
        let mut victims: Vec<PodRef> = Vec::new();
        let excess = current - replicas;
        for id in d.pods.iter().rev() {
            if victims.len() < excess && !self.cluster.is_running(id) {
                victims.push(id.clone());
            }
        }
        for id in d.pods.iter().rev() {
            if victims.len() < excess && !victims.contains(id) {
                victims.push(id.clone());
            }
        }
        d.pods.retain(|id| !victims.contains(id));
        for id in victims {
            self.cluster.delete_pod(self.now, &id, false, &mut self.rec);
            self.forget(&id);
            self.engine.handle(self.now, Event::PodGone(id));
        }
    }

    // ------------------------------------------------------------------ clouds

    fn feed_clouds(&mut self) -> Result<bool, SimulationError> {
        let mut busy = false;
        let clouds: Vec<Cloud> = self.clouds.keys().copied().collect();
        for cloud in clouds {
            let node_events = self.clouds[&cloud].node_events();
            for e in node_events {
                busy = true;
                self.node_event(e);
            }
            let events = ready("poll_events", self.now, self.clouds[&cloud].poll_events())?;
            let events =
                events.map_err(|e| self.inconsistent(format!("poll_events failed: {e}")))?;
            for e in events {
                busy = true;
                self.cloud_event(e);
            }
        }
        Ok(busy)
    }

    fn node_event(&mut self, e: SimNodeEvent) {
        let table = &self.world.setup.resources;
        match e {
            SimNodeEvent::Registered {
                ref provider_id, ..
            }
            | SimNodeEvent::AcceleratorsReady {
                ref provider_id, ..
            } if self.rec.instance(provider_id).is_none() => {
                // The Node of an instance whose launch answer was lost: it waits, as a Node
                // no NodeClaim names yet waits in a cluster, until the launch is found again.
                self.stashed.entry(provider_id.clone()).or_default().push(e);
            }
            SimNodeEvent::Registered {
                provider_id,
                claim_name,
                node,
            } => {
                let Some(i) = self.rec.instance(&provider_id) else {
                    return;
                };
                if self.rec.instances[i].end.is_some() {
                    return;
                }
                let Some(pool) = self.world.pool(&self.rec.instances[i].node_pool) else {
                    return;
                };
                let spec = &self.world.setup.pools[pool].spec;
                let mut taints = spec.taints.clone();
                taints.extend(spec.startup_taints.iter().cloned());
                let view = NodeView {
                    name: node.name.clone(),
                    labels: node.labels.clone(),
                    taints,
                    allocatable: to_resources(table, &node.allocatable),
                    conditions: Vec::new(),
                };
                let overhead = daemonset_overhead(&self.world.setup.daemonsets, &node.labels, spec);
                self.rec.instances[i].node = Some(node.name.clone());
                self.cluster
                    .add_node(i, view.clone(), spec.startup_taints.clone(), overhead);
                self.engine.handle(
                    self.now,
                    Event::NodeRegistered {
                        claim: claim_name,
                        node: view,
                    },
                );
            }
            SimNodeEvent::GpuFailed {
                provider_id,
                node_name,
                allocatable,
                reason,
            } => {
                if let Some(i) = self.rec.instance(&provider_id)
                    && self.rec.instances[i].end.is_none()
                {
                    self.rec.instances[i].gpu_fault_at.get_or_insert(self.now);
                }
                let allocatable = to_resources(table, &allocatable);
                if let Some(view) =
                    self.cluster
                        .gpu_failed(self.now, &node_name, allocatable, reason)
                {
                    self.engine
                        .handle(self.now, Event::NodeUpdated { node: view });
                }
            }
            SimNodeEvent::Rebooted {
                provider_id,
                node_name,
                allocatable,
                healthy,
            } => {
                if healthy
                    && let Some(i) = self.rec.instance(&provider_id)
                    && self.rec.instances[i].gpu_fault_at.is_some()
                {
                    self.rec.instances[i].gpu_cleared_at.get_or_insert(self.now);
                }
                let allocatable = to_resources(table, &allocatable);
                if let Some(view) =
                    self.cluster
                        .rebooted(self.now, &node_name, allocatable, healthy)
                {
                    self.engine
                        .handle(self.now, Event::NodeUpdated { node: view });
                }
            }
            SimNodeEvent::AcceleratorsReady {
                node_name,
                allocatable,
                ..
            } => {
                let allocatable = to_resources(table, &allocatable);
                if let Some(view) = self.cluster.node_ready(&node_name, allocatable) {
                    self.engine
                        .handle(self.now, Event::NodeUpdated { node: view });
                }
            }
        }
    }

    fn cloud_event(&mut self, e: CloudEvent) {
        match e {
            CloudEvent::Interruption {
                provider_id,
                terminates_at,
            } => {
                if let Some(i) = self.rec.instance(&provider_id) {
                    self.rec.instances[i].interrupted = true;
                }
                self.engine.handle(
                    self.now,
                    Event::Interruption {
                        provider_id,
                        terminates_at,
                    },
                );
            }
            CloudEvent::Terminated { provider_id } => {
                if let Some(i) = self.rec.instance(&provider_id) {
                    self.gone(i, EndReason::Reclaimed);
                }
                self.engine
                    .handle(self.now, Event::InstanceGone { provider_id });
            }
        }
    }

    /// An instance stops being billed; its node (if any) leaves the cluster.
    fn gone(&mut self, instance: usize, reason: EndReason) {
        self.rec.ended(instance, self.now, reason);
        self.not_live(instance);
        if let Some(node) = self.rec.instances[instance].node.clone() {
            let on: Vec<PodRef> = self
                .cluster
                .node(&node)
                .map(|n| n.pods.iter().cloned().collect())
                .unwrap_or_default();
            // Pods still there are evicted first (with the kube-scheduler stand-in a
            // consolidated node's pods move only now), one at a time and each placed again
            // before the next goes, as termination's evictions wait for the budget.
            if self.scenario.binder.is_scheduler() && !on.is_empty() {
                self.cluster.cordon(&node);
                for pod in &on {
                    self.stopping(pod, &node);
                    self.cluster.evict(self.now, pod, &mut self.rec);
                    self.report_unbound(std::slice::from_ref(pod));
                    // A pod with no room anywhere waits for the engine, as in a cluster.
                    let _ = self.schedule_one(pod);
                }
            }
            for pod in &on {
                if self.cluster.node_of(pod) == Some(node.as_str()) {
                    self.stopping(pod, &node);
                }
            }
            self.cluster.remove_node(self.now, &node, &mut self.rec);
            self.report_unbound(&on);
        }
        // A claim whose instance is gone (deleted, reclaimed) no longer counts as disrupting.
        let claim = self.rec.instances[instance].claim.clone();
        self.tracker.ended(&claim);
    }

    // ------------------------------------------------------------------ binding

    /// The kube-scheduler stand-in's cycle ([`crate::scheduler::Binder::Scheduler`]): every unbound pod, oldest
    /// first, goes to the best node that passes the filters, whatever the engine planned. Runs
    /// only when the cluster changed since the last cycle. Returns whether it bound any.
    fn schedule(&mut self) -> Result<bool, SimulationError> {
        let seen = (self.cluster.changes(), self.cluster.created());
        if !self.scenario.binder.is_scheduler() || self.scheduled_at_change == Some(seen) {
            return Ok(false);
        }
        // Without new room only the pods created since the last cycle can be bound now (the
        // others did not fit then and nothing freed up since).
        let from = match self.scheduled_at_change {
            Some((changes, created)) if changes == seen.0 => created as usize,
            _ => 0,
        };
        let mut bound = false;
        let pending: Vec<PodRef> = self
            .cluster
            .unbound_pods(from)
            .into_iter()
            .map(|p| p.id.clone())
            .collect();
        let mut anti_affine = self
            .cluster
            .running_pods()
            .any(scheduler::has_required_anti_affinity);
        for id in pending {
            let Some(pod) = self.cluster.pod(&id) else {
                continue;
            };
            let Some(node) =
                scheduler::choose(&self.cluster, pod, anti_affine, self.scenario.binder)
                    .map(str::to_owned)
            else {
                continue;
            };
            anti_affine |= scheduler::has_required_anti_affinity(pod);
            self.cluster
                .bind(self.now, &id, &node, &mut self.rec)
                .map_err(|e| self.inconsistent(format!("the scheduler stand-in: {e}")))?;
            self.report_bound(&id, &node);
            bound = true;
        }
        self.scheduled_at_change = Some((self.cluster.changes(), self.cluster.created()));
        Ok(bound)
    }

    /// The stand-in's cycle for one unbound pod; returns whether it bound it.
    fn schedule_one(&mut self, id: &PodRef) -> Result<bool, SimulationError> {
        let anti_affine = self
            .cluster
            .running_pods()
            .any(scheduler::has_required_anti_affinity);
        let Some(pod) = self.cluster.pod(id) else {
            return Ok(false);
        };
        if self.cluster.node_of(id).is_some() {
            return Ok(false);
        }
        let Some(node) = scheduler::choose(&self.cluster, pod, anti_affine, self.scenario.binder)
            .map(str::to_owned)
        else {
            return Ok(false);
        };
        self.cluster
            .bind(self.now, id, &node, &mut self.rec)
            .map_err(|e| self.inconsistent(format!("the scheduler stand-in: {e}")))?;
        self.report_bound(id, &node);
        Ok(true)
    }

    /// Tells the engine the cluster bound `pod` to `node`, as the controller's watch would.
    fn report_bound(&mut self, pod: &PodRef, node: &str) {
        let Some(mut pod) = self.cluster.pod(pod).cloned() else {
            return;
        };
        if !self.scenario.gang_aware {
            pod.gang = None;
        }
        self.engine.handle(
            self.now,
            Event::PodBound {
                pod,
                node: node.to_owned(),
            },
        );
    }

    /// Pods a drained or lost node left unbound are pending again: with the scheduler
    /// stand-in the engine hears of them as the controller would (a pod it already placed
    /// again keeps its place).
    fn report_unbound(&mut self, pods: &[PodRef]) {
        if !self.scenario.binder.is_scheduler() {
            return;
        }
        for id in pods {
            let Some(mut pod) = self.cluster.pod(id).cloned() else {
                continue;
            };
            if !self.scenario.gang_aware {
                pod.gang = None;
            }
            self.engine.handle(self.now, Event::PodPending(pod));
        }
    }

    fn feed_retries(&mut self) -> Result<bool, SimulationError> {
        let now = self.now;
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.retries)
            .into_iter()
            .partition(|r| r.at <= now);
        self.retries = later;
        let busy = !due.is_empty();
        for r in due {
            self.delete(r.claim, r.provider_id)?;
        }
        Ok(busy)
    }

    // ------------------------------------------------------------------ actions

    /// Carries out `action`; `Some` when the driver crashed doing it (see [`restart`]).
    fn execute(&mut self, action: Action) -> Result<Option<restart::CrashPoint>, SimulationError> {
        use restart::CrashPoint;
        let crash = self.crash_due();
        match action {
            Action::Launch { claim, request } => {
                // The controller's launch task creates the NodeClaim before it calls the cloud.
                self.created_claims.insert(claim.clone());
                let lose_answer = crash && self.crashes.as_mut().is_some_and(|c| c.coin());
                if crash && !lose_answer {
                    return Ok(Some(CrashPoint::BeforeLaunch));
                }
                let Some(pool) = self.world.pool(&request.node_pool) else {
                    return Err(self.inconsistent(format!(
                        "Launch for claim {claim} names unknown NodePool {}",
                        request.node_pool
                    )));
                };
                let cloud = self.world.setup.pools[pool].spec.cloud;
                let result = ready("create", self.now, self.clouds[&cloud].create(&request))?;
                if lose_answer {
                    return Ok(Some(CrashPoint::LaunchUnrecorded));
                }
                match result {
                    Ok(instance) => {
                        let record =
                            self.instance_record(cloud, &claim, &request.node_pool, &instance);
                        let i = self.rec.launched(record);
                        self.live(i);
                        let early = self.stashed.remove(&instance.provider_id);
                        self.engine
                            .handle(self.now, Event::Launched { claim, instance });
                        for e in early.unwrap_or_default() {
                            self.node_event(e);
                        }
                    }
                    Err(error) => self
                        .engine
                        .handle(self.now, Event::LaunchFailed { claim, error }),
                }
            }
            Action::Disrupt(_) if crash => return Ok(Some(CrashPoint::BeforeDisruption)),
            Action::Delete { .. } if crash => return Ok(Some(CrashPoint::BeforeDelete)),
            Action::Disrupt(command) => {
                // One look at the claims: each pool's size, and the pool of each claim moved.
                let mut sizes: BTreeMap<String, usize> = BTreeMap::new();
                let mut pool_of: BTreeMap<&str, String> = BTreeMap::new();
                for v in self.engine.claims() {
                    *sizes.entry(v.node_pool.clone()).or_default() += 1;
                    if let Some(c) = command.claims.iter().find(|c| **c == v.name) {
                        pool_of.insert(c.as_str(), v.node_pool);
                    }
                }
                let world = &self.world;
                let lookup = |claim: &str| {
                    let name = pool_of.get(claim)?;
                    Some((&world.setup.pools[world.pool(name)?], sizes[name]))
                };
                self.tracker.command(self.now, &command, lookup);
            }
            Action::Delete {
                claim, provider_id, ..
            } => {
                self.deletes_asked.insert(claim.clone());
                match provider_id {
                    Some(id) => self.delete(claim, id)?,
                    // The engine may delete a claim before it heard of the launch's outcome (a
                    // replacement called off in the poll that launched it): whatever the cloud
                    // launched for it goes too, or it would be billed for good.
                    None => match self.rec.live_instance_of_claim(&claim) {
                        Some(i) => {
                            let id = self.rec.instances[i].provider_id.clone();
                            self.delete(claim, id)?;
                        }
                        None => {
                            self.tracker.ended(&claim);
                            self.engine.handle(self.now, Event::Deleted { claim });
                        }
                    },
                }
            }
            // The kube-scheduler does not read nominations: its stand-in binds in `schedule`.
            Action::Bind { .. } if self.scenario.binder.is_scheduler() => {}
            Action::Bind { pod, node } => {
                if self.cluster.node(&node).is_some_and(|n| n.cordoned) {
                    return Err(self
                        .inconsistent(format!("Bind of {pod} to node {node}, which is cordoned")));
                }
                if let Some(from) = self.cluster.node_of(&pod).map(str::to_owned)
                    && from != node
                {
                    self.stopping(&pod, &from);
                }
                self.cluster
                    .bind(self.now, &pod, &node, &mut self.rec)
                    .map_err(|e| self.inconsistent(e))?;
                self.report_bound(&pod, &node);
            }
            Action::Reboot {
                claim, provider_id, ..
            } => {
                // As the controller does: a few tries through throttling and transient errors,
                // then the node is replaced instead.
                let Some(i) = self.rec.instance(&provider_id) else {
                    return Ok(None);
                };
                let cloud = self.rec.instances[i].cloud;
                let mut result = Ok(());
                for _ in 0..4 {
                    result = ready("reboot", self.now, self.clouds[&cloud].reboot(&provider_id))?;
                    if !result.as_ref().is_err_and(CloudError::is_retryable) {
                        break;
                    }
                }
                match result {
                    Ok(()) | Err(CloudError::NotFound { .. }) => {}
                    Err(e) => self.engine.handle(
                        self.now,
                        Event::RebootFailed {
                            claim,
                            error: e.to_string(),
                        },
                    ),
                }
            }
            Action::Cordon { node } => self.cluster.cordon(&node),
            Action::Uncordon { node } => {
                self.tracker.uncordoned(&node);
                self.cluster.uncordon(&node);
            }
            Action::Drain { node } => {
                let on: Vec<PodRef> = self
                    .cluster
                    .node(&node)
                    .map(|n| n.pods.iter().cloned().collect())
                    .unwrap_or_default();
                for pod in &on {
                    self.stopping(pod, &node);
                }
                self.cluster.drain(self.now, &node, &mut self.rec);
                self.report_unbound(&on);
                if crash {
                    return Ok(Some(CrashPoint::MidDrain));
                }
            }
        }
        Ok(None)
    }

    // ------------------------------------------------------------------ disruption

    /// `pod` stops on `node` (moved or evicted): judged when the node is being disrupted.
    fn stopping(&mut self, pod: &PodRef, node: &str) {
        let Some(&w) = self.workload_of.get(pod) else {
            return;
        };
        let unavailable = self.unavailable(w, Some(pod));
        self.tracker
            .pod_stopped(node, &self.scenario.workloads[w], unavailable);
    }

    /// Pods of workload `w` alive and not running (besides `except`).
    fn unavailable(&self, w: usize, except: Option<&PodRef>) -> u32 {
        self.guarded.get(&w).map_or(0, |pods| {
            pods.iter()
                .filter(|p| Some(*p) != except && !self.cluster.is_running(p))
                .count() as u32
        })
    }

    fn forget(&mut self, id: &PodRef) {
        if let Some(w) = self.workload_of.remove(id)
            && let Some(pods) = self.guarded.get_mut(&w)
        {
            pods.remove(id);
        }
    }

    /// Tells the engine the PodDisruptionBudgets as the PDB controller would compute them now
    /// (only when they changed).
    fn tell_pdbs(&mut self) {
        let views: Vec<_> = self
            .scenario
            .workloads
            .iter()
            .enumerate()
            .filter_map(|(i, w)| pdb_view(w, self.unavailable(i, None)))
            .collect();
        if views != self.tracker.told {
            self.tracker.told = views.clone();
            self.engine
                .handle(self.now, Event::DisruptionBudgets(views));
        }
    }

    /// Applies the scenario's changes that are due: NodePools replaced (drift), prices changed.
    fn apply_changes(&mut self) -> Result<(), SimulationError> {
        while let Some(change) = self.scenario.changes.get(self.change_cursor) {
            if change.at > self.now {
                break;
            }
            self.change_cursor += 1;
            if !change.node_pools.is_empty() {
                let pools = crate::scenario::world::pools_after(self.scenario, change)?;
                for p in &pools {
                    if let Some(i) = self.world.pool(&p.spec.name) {
                        self.world.setup.pools[i] = p.clone();
                    }
                }
                self.engine.handle(self.now, Event::PoolsChanged(pools));
            }
            if !change.prices.is_empty() {
                self.catalog = change.apply_prices(&self.catalog);
                self.engine
                    .handle(self.now, Event::CatalogChanged(self.catalog.clone()));
            }
        }
        Ok(())
    }

    /// What the running instances cost per hour at the prices in force now.
    fn fleet_cost(&self) -> f64 {
        (0..self.rec.instances.len())
            .filter(|i| self.rec.instances[*i].end.is_none())
            .map(|i| self.instance_price(i))
            .sum()
    }

    /// What instance `i` of the record costs per hour at the prices in force now.
    fn instance_price(&self, i: usize) -> f64 {
        let i = &self.rec.instances[i];
        self.catalog
            .get(i.cloud, &i.instance_type)
            .and_then(|it| {
                it.offerings
                    .iter()
                    .find(|o| o.zone == i.zone && o.capacity_type == i.capacity_type)
            })
            .map_or(i.price_per_hour, |o| o.price_per_hour)
    }

    fn delete(&mut self, claim: String, provider_id: String) -> Result<(), SimulationError> {
        let Some(i) = self.rec.instance(&provider_id) else {
            self.tracker.ended(&claim);
            self.engine.handle(self.now, Event::Deleted { claim });
            return Ok(());
        };
        let cloud = self.rec.instances[i].cloud;
        let result = ready("delete", self.now, self.clouds[&cloud].delete(&provider_id))?;
        match result {
            Ok(()) | Err(CloudError::NotFound { .. }) => {
                self.gone(i, EndReason::Deleted);
                self.engine.handle(self.now, Event::Deleted { claim });
            }
            Err(e) if e.is_retryable() => {
                let wait = match e {
                    CloudError::Throttled {
                        retry_after: Some(d),
                    } => TimeDelta::from_std(d).unwrap_or(TimeDelta::seconds(1)),
                    _ => TimeDelta::seconds(1),
                };
                self.retries.push(DeleteRetry {
                    at: self.now + wait.max(TimeDelta::milliseconds(1)),
                    claim,
                    provider_id,
                });
            }
            Err(e) => {
                return Err(self.inconsistent(format!("delete of {provider_id} failed: {e}")));
            }
        }
        Ok(())
    }

    /// Instances without a claim the engine knows (older than [`GC_GRACE`]) are recorded (they
    /// were billed) and deleted, as the controller's garbage collection does. Runs at the
    /// instants that happen anyway, every [`GC_INTERVAL`]; a failed list waits for the next.
    fn collect_garbage(&mut self) -> Result<(), SimulationError> {
        if self.now < self.next_gc {
            return Ok(());
        }
        self.next_gc = self.now + GC_INTERVAL;
        self.check_gangs();
        let clouds: Vec<Cloud> = self.clouds.keys().copied().collect();
        for cloud in clouds {
            let Ok(instances) = ready("list", self.now, self.clouds[&cloud].list())? else {
                continue;
            };
            for inst in instances {
                if self.engine.has_claim(&inst.claim_name) || self.now - inst.launched_at < GC_GRACE
                {
                    continue;
                }
                let i = match self.rec.instance(&inst.provider_id) {
                    Some(i) => i,
                    None => {
                        let pool = inst
                            .tags
                            .get("quartermaster.dev/nodepool")
                            .cloned()
                            .unwrap_or_default();
                        let record = self.instance_record(cloud, &inst.claim_name, &pool, &inst);
                        let i = self.rec.launched(record);
                        self.live(i);
                        i
                    }
                };
                self.stashed.remove(&inst.provider_id);
                match ready(
                    "delete",
                    self.now,
                    self.clouds[&cloud].delete(&inst.provider_id),
                )? {
                    Ok(()) | Err(CloudError::NotFound { .. }) => {
                        self.collected += 1;
                        self.gone(i, EndReason::Deleted);
                    }
                    // Tried again at the next collection.
                    Err(_) => {}
                }
            }
        }
        Ok(())
    }

    fn instance_record(
        &self,
        cloud: Cloud,
        claim: &str,
        node_pool: &str,
        instance: &quartermaster_cloud::Instance,
    ) -> InstanceRecord {
        let catalog = &self.catalog;
        let it = catalog.get(cloud, &instance.instance_type);
        let offering = it.and_then(|it| {
            it.offerings
                .iter()
                .find(|o| o.zone == instance.zone && o.capacity_type == instance.capacity_type)
        });
        let list = it
            .and_then(|it| {
                it.offerings
                    .iter()
                    .find(|o| o.zone == instance.zone && o.capacity_type == CapacityType::OnDemand)
                    .or_else(|| it.cheapest_offering(Some(CapacityType::OnDemand)))
            })
            .map_or(instance.price_per_hour, |o| o.price_per_hour);
        let accelerator = it.and_then(|it| it.accelerator.as_ref());
        InstanceRecord {
            provider_id: instance.provider_id.clone(),
            cloud,
            claim: claim.to_owned(),
            node_pool: node_pool.to_owned(),
            node: None,
            instance_type: instance.instance_type.clone(),
            zone: instance.zone.clone(),
            region: offering.map(|o| o.region.clone()).unwrap_or_default(),
            capacity_type: instance.capacity_type,
            // The price in force (after the scenario's price changes).
            price_per_hour: offering.map_or(instance.price_per_hour, |o| o.price_per_hour),
            list_price_per_hour: list.max(instance.price_per_hour),
            price_source: offering.map(|o| o.price_source.clone()).unwrap_or_default(),
            accelerator_model: accelerator.map(|a| a.name.clone()).unwrap_or_default(),
            accelerators: it.map_or(0, |it| it.accelerator_count()),
            allocatable: it.map_or_else(Default::default, |it| {
                to_resources(&self.world.setup.resources, &it.allocatable())
            }),
            // When the cloud accepted it (earlier than now for a launch whose answer was lost
            // and that was found again).
            start: instance.launched_at.min(self.now),
            end: None,
            end_reason: None,
            interrupted: false,
            gpu_fault_at: None,
            gpu_cleared_at: None,
        }
    }
}

#[cfg(test)]
mod flex_start_tests;
mod headroom;
mod limits;
mod measure;
mod restart;
#[cfg(test)]
mod tests;

pub use measure::{Audit, Hindsight, Waiting};
pub use restart::{CrashPoint, IDLE_CRASH_AFTER};
