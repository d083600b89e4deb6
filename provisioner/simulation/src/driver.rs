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
use quartermaster_cloud::ManualClock;
use quartermaster_engine::{Engine, EngineStats, Event};
use quartermaster_pricing::Cloud;
use quartermaster_sim::{SimCloud, SimNodeEvent, SimStats};
use quartermaster_solver::PodRef;

use crate::cluster::Cluster;
use crate::disruption::{DisruptionRecord, Tracker};
use crate::error::SimulationError;
use crate::record::{EndReason, Record};
use crate::rng::cloud_seed;
use crate::scenario::Scenario;
use crate::scenario::world::{World, build};
use crate::workload::{Trace, generate};

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
    /// `catalog` cut to the regions the pools may buy in, for the measurements' solves; built
    /// when first needed, again after a price or pool change.
    measure_catalog: std::cell::OnceCell<quartermaster_pricing::Catalog>,
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
            measure_catalog: std::cell::OnceCell::new(),
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
                self.measure_catalog = std::cell::OnceCell::new();
                self.engine.handle(self.now, Event::PoolsChanged(pools));
            }
            if !change.prices.is_empty() {
                self.catalog = change.apply_prices(&self.catalog);
                self.measure_catalog = std::cell::OnceCell::new();
                self.engine
                    .handle(self.now, Event::CatalogChanged(self.catalog.clone()));
            }
        }
        Ok(())
    }

    /// What the running instances cost per hour at the prices in force now.
    fn fleet_cost(&self) -> f64 {
        (0..self.rec.instances.len())
            .filter(|i| {
                let r = &self.rec.instances[*i];
                r.end.is_none() && r.start <= self.now
            })
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
}

mod actions;
mod binding;
mod clouds;
mod disruption;
#[cfg(test)]
mod flex_start_tests;
mod headroom;
mod limits;
mod measure;
mod restart;
#[cfg(test)]
mod tests;
mod workload;

pub use measure::{Audit, Hindsight, Waiting};
pub use restart::{CrashPoint, IDLE_CRASH_AFTER};
