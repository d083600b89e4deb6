//! The run in numbers. `quartermaster simulate -o json` prints [`Summary`] as one object, and
//! `--report-dir` writes the same object to `summary.json`; its keys are a stable contract
//! (only ever added). It holds no wall-clock time, so the same scenario and seed give the same
//! bytes.

use std::collections::BTreeMap;

use chrono::{DateTime, SecondsFormat, Utc};
use quartermaster_engine::EngineStats;
use serde::Serialize;

use crate::driver::Run;
use crate::record::Record;
use crate::scenario::Scenario;

/// Engine counters, as reported.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineCounters {
    /// Solver runs.
    pub solves: u64,
    /// NodeClaims created.
    pub claims_created: u64,
    /// Launch calls.
    pub launches: u64,
    /// Launches refused for insufficient capacity or quota.
    pub capacity_errors: u64,
    /// Launches retried on the claim's next offering.
    pub fallbacks: u64,
    /// Of those, from spot to on-demand.
    pub spot_to_on_demand: u64,
    /// Claims given up (no offering left); their pods were planned again.
    pub claims_abandoned: u64,
    /// Throttled or failed calls retried.
    pub retries: u64,
    /// Nodes replaced because their accelerators never appeared.
    pub accelerator_timeouts: u64,
    /// Instances replaced because they never registered.
    pub registration_timeouts: u64,
    /// Spot interruption notices handled.
    pub interruptions: u64,
    /// Empty nodes removed.
    pub empty_deletions: u64,
    /// Underutilized nodes removed by consolidation (their pods fit elsewhere).
    pub consolidation_deletes: u64,
    /// Nodes replaced by a cheaper one by consolidation.
    pub consolidation_replacements: u64,
    /// Consolidation moves not made: once the kube-scheduler has bound the pods they displace by
    /// its own scores, they would not save enough (`EngineConfig::scheduler_scoring`).
    pub moves_unprofitable_as_scheduled: u64,
    /// Gangs whose NodeClaims were launched as a group.
    pub gang_launches: u64,
    /// Gang launches rolled back (a member could not be launched in the gang's zone in time).
    pub gang_rollbacks: u64,
    /// NodeClaims deleted by those rollbacks.
    pub gang_claims_rolled_back: u64,
    /// Nodes replaced by node repair (a condition said they were broken).
    pub repairs: u64,
    /// Repairs held back because too many of a pool's nodes were broken at once.
    pub repairs_held: u64,
    /// Nodes node repair rebooted in place (a rule with action `Reboot`).
    pub repair_reboots: u64,
    /// Solves that placed CapacityBuffer placeholders.
    pub headroom_solves: u64,
    /// NodeClaims launched into a reservation.
    pub reserved_launches: u64,
    /// Nodes drained because their Capacity Block was ending.
    pub reservation_drains: u64,
    /// Flex-start nodes drained because their run was ending.
    pub flex_start_drains: u64,
    /// Nodes retired (cordoned: their pods needed a small part of what they cost).
    pub retirements: u64,
    /// Retired nodes reopened for pods that would otherwise have needed as dear a node.
    pub retirements_reopened: u64,
    /// Of `retirements`, nodes retired while empty (waiting out `consolidateAfter`).
    pub retirements_empty: u64,
}

impl From<&EngineStats> for EngineCounters {
    fn from(s: &EngineStats) -> Self {
        Self {
            solves: s.solves,
            claims_created: s.claims_created,
            launches: s.launches,
            capacity_errors: s.capacity_errors,
            fallbacks: s.fallbacks,
            spot_to_on_demand: s.spot_to_on_demand,
            claims_abandoned: s.claims_abandoned,
            retries: s.retries,
            accelerator_timeouts: s.accelerator_timeouts,
            registration_timeouts: s.registration_timeouts,
            interruptions: s.interruptions,
            empty_deletions: s.empty_deletions,
            consolidation_deletes: s.consolidation_deletes,
            consolidation_replacements: s.consolidation_replacements,
            moves_unprofitable_as_scheduled: s.moves_unprofitable_as_scheduled,
            gang_launches: s.gang_launches,
            gang_rollbacks: s.gang_rollbacks,
            gang_claims_rolled_back: s.gang_claims_rolled_back,
            repairs: s.repairs,
            repairs_held: s.repairs_held,
            repair_reboots: s.repair_reboots,
            headroom_solves: s.headroom_solves,
            reserved_launches: s.reserved_launches,
            reservation_drains: s.reservation_drains,
            flex_start_drains: s.flex_start_drains,
            retirements: s.retirements,
            retirements_reopened: s.retirements_reopened,
            retirements_empty: s.retirements_empty,
        }
    }
}

/// The summary of a simulation. Money in US dollars, times in seconds or hours as named.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    /// `metadata.name` of the scenario.
    pub scenario: String,
    /// Seed used.
    pub seed: u64,
    /// Simulated start (RFC 3339).
    pub start: String,
    /// Simulated end.
    pub end: String,
    /// Simulated hours.
    pub simulated_hours: f64,
    /// Pods created over the run.
    pub pods_total: u64,
    /// Job pods that ran to completion.
    pub pods_completed: u64,
    /// Pods alive at the end that were never bound.
    pub pods_unscheduled_at_end: u64,
    /// Pods alive at the end and not running (never bound, or evicted and waiting).
    pub pods_pending_at_end: u64,
    /// Instances still billed at the end whose NodeClaim the engine no longer has (must be 0).
    pub leaked_instances: u64,
    /// NodeClaims for which the cloud created more than one instance (must be 0).
    pub duplicate_launches: u64,
    /// Instance-seconds the simulated clouds billed that the record and cost report do not
    /// hold (must be 0).
    pub unbilled_instance_seconds: f64,
    /// Instances without a NodeClaim that garbage collection deleted (leaks caught in time).
    pub collected_instances: u64,
    /// Launches that took a NodePool over its `limits` (resources, nodes, `maxHourlyCost`),
    /// checked against the clouds' live instances after every launch (must be 0).
    pub limit_violations: u64,
    /// Gangs whose NodeClaims were seen partly launched and partly not past the gang launch
    /// timeout (checked every 2 minutes; must be 0).
    pub gangs_half_launched: u64,
    /// The `--chaos` seed, when faults were laid over the scenario.
    pub chaos_seed: Option<u64>,
    /// Driver crashes (`--chaos`), each followed by a restart that rebuilt the engine from the
    /// cluster and the clouds only.
    pub restarts: u64,
    /// The same, by where the crash cut the work (`before_launch`, `launch_unrecorded`,
    /// `mid_drain`, `before_delete`, `before_disruption`, `idle`).
    pub restarts_by_crash_point: BTreeMap<String, u64>,
    /// Faults the simulated clouds injected: throttled calls, server errors, lost answers,
    /// Nodes that never registered and GPU faults (`cloud.api.*`, `cloud.nodesNeverRegister`,
    /// `cloud.gpuFaultsPerHour`, `--chaos`).
    pub faults_injected: u64,
    /// Pods waiting at the end that some NodePool can serve and that waited longer than the
    /// late window: stuck (must be 0).
    pub servable_pods_unplaced: u64,
    /// Pods waiting at the end that some NodePool can serve but that arrived (or were evicted)
    /// within the late window before the end, or that wait for a node still coming up within
    /// the engine's registration and GPU budgets: too late to be served, not stuck.
    pub late_arrivals: u64,
    /// Pods waiting at the end that no NodePool can serve.
    pub unservable_pods_at_end: u64,
    /// The late window: the longest wait of any pod the run served, at least 10 minutes,
    /// seconds.
    pub late_window_seconds: f64,
    /// Median time from creation to first bind (pods never bound count at their age at the end,
    /// or when they were deleted).
    pub pending_seconds_p50: f64,
    /// 95th percentile of the same.
    pub pending_seconds_p95: f64,
    /// Maximum of the same.
    pub pending_seconds_max: f64,
    /// Instances launched (accepted by the cloud).
    pub nodes_launched: u64,
    /// By instance type.
    pub nodes_launched_by_instance_type: BTreeMap<String, u64>,
    /// By capacity type (`spot`, `on-demand`).
    pub nodes_launched_by_capacity_type: BTreeMap<String, u64>,
    /// Most instances billed at once.
    pub nodes_peak: u64,
    /// Instances still running at the end.
    pub nodes_at_end: u64,
    /// Accelerator-hours billed (accelerators of each instance × its billed hours).
    pub gpu_hours_paid: f64,
    /// Accelerator-hours requested by running pods.
    pub gpu_hours_requested: f64,
    /// `gpu_hours_requested / gpu_hours_paid` (0 when nothing was paid).
    pub gpu_utilisation: f64,
    /// Accelerator-hours paid on nodes while no pod using accelerators ran on them (booting,
    /// empty, or holding gang members that wait for the rest of their gang).
    pub idle_gpu_hours: f64,
    /// For scenarios with gangs: gang launches rolled back (null otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gang_rollbacks: Option<u64>,
    /// Who bound pods (`scheduler`: the kube-scheduler stand-in; `planned`: the engine's plan).
    pub binder: String,
    /// Pods whose nomination the cluster did not honour (bound elsewhere, or their room
    /// taken), solved again.
    pub nominations_released: u64,
    /// Dollars billed.
    pub total_cost: f64,
    /// Dollars billed when the same trace is run with every NodePool restricted to on-demand.
    pub on_demand_only_cost: f64,
    /// `on_demand_only_cost - total_cost - reserved_cost` (reservations are spent used or not).
    pub savings: f64,
    /// `savings / on_demand_only_cost` (0 when that is 0).
    pub savings_fraction: f64,
    /// Dollars by NodePool.
    pub cost_by_node_pool: BTreeMap<String, f64>,
    /// Dollars by capacity type.
    pub cost_by_capacity_type: BTreeMap<String, f64>,
    /// Dollars by instance type.
    pub cost_by_instance_type: BTreeMap<String, f64>,
    /// Dollars billed in each hour of the run, from the start (the last entry may be a part
    /// hour).
    pub cost_by_hour: Vec<f64>,
    /// Spot interruption notices received.
    pub interruptions: u64,
    /// Pods stopped on a node before they finished (drain, reclaim, move).
    pub evictions: u64,
    /// GPU faults the simulated clouds injected (`gpuFaultsPerHour`).
    pub gpu_faults: u64,
    /// Node repair decisions (also `engine.repairs`): a node replaced because a condition said
    /// it was broken. A decision cut short by a driver crash and taken again after the restart
    /// counts twice.
    pub repairs: u64,
    /// Nodes rebooted in place by node repair (also `engine.repair_reboots`).
    pub repair_reboots: u64,
    /// Of the GPU faults, those a reboot cleared (the node kept, nothing bought).
    pub gpu_faults_cleared_by_reboot: u64,
    /// Accelerator-hours paid on nodes after one of their GPUs failed, until node repair (or
    /// the run's end) removed them, or a reboot cleared the fault.
    pub gpu_hours_lost_to_faults: f64,
    /// CapacityBuffers in the scenario (`spec.capacityBuffers`).
    pub capacity_buffers: usize,
    /// What the room they held cost: the share of each node-hour the allocation rule gives
    /// their placeholders (the workload `CapacityBuffer/<name>` in `cost.csv`), dollars.
    pub headroom_cost: f64,
    /// Accelerator-hours their placeholders held.
    pub headroom_gpu_hours: f64,
    /// What the account's reservations (`spec.cloud.reservations`) cost over the run, used or
    /// not (not in `total_cost`: instances launched into them bill nothing more).
    pub reserved_cost: f64,
    /// Instance-hours reservations offered during the run.
    pub reserved_hours_available: f64,
    /// Instance-hours nodes ran in reservations.
    pub reserved_hours_used: f64,
    /// `reserved_hours_used / reserved_hours_available`; null without reservations.
    pub reservation_utilisation: Option<f64>,
    /// Dollars billed for flex-start instances (GCP's Dynamic Workload Scheduler; part of
    /// `total_cost`, also `cost_by_capacity_type["flex-start"]`).
    pub flex_start_cost: f64,
    /// Flex-start instances launched.
    pub flex_start_launches: u64,
    /// Flex-start instances the cloud deleted at the end of their maximum run: the engine
    /// drains them before, so this stays 0.
    pub flex_start_reclaims: u64,
    /// Launches retried on another offering after a capacity error.
    pub fallbacks: u64,
    /// Engine counters.
    pub engine: EngineCounters,
    /// Calls the simulated clouds throttled.
    pub cloud_throttles: u64,
    /// Instants the event loop visited.
    pub event_loop_instants: u64,
    /// Voluntary disruption commands, by kind (`empty`, `delete`, `multi_delete`, `replace`,
    /// `split`, `multi_replace`, `drift`, `expire`).
    pub consolidation_commands: BTreeMap<String, u64>,
    /// What consolidation saved on the workload of the measure point: the fleet's cost then
    /// minus its cost once consolidation had done all it would with that workload held still
    /// (the settle), $/hour. Measured on the same snapshot as `achievable_saving_per_hour`.
    pub consolidation_saving_per_hour: f64,
    /// Sum of the expected savings of every disruption command over the run, $/hour (what
    /// `consolidation_saving_per_hour` meant before it was measured on the snapshot: repeated
    /// moves over a day curve add up here).
    pub commands_saving_per_hour: f64,
    /// At `spec.measureAt` (default: the end), the fleet's cost minus the cheapest known cost
    /// of the pods running then (every running pod solved from scratch on the same NodePools
    /// and prices, or the fleet consolidation reached with them, whichever is cheaper), $/hour;
    /// 0 when the fleet is already as cheap.
    pub achievable_saving_per_hour: f64,
    /// When the achievable saving was measured (RFC 3339).
    pub achievable_measured_at: String,
    /// The fleet's cost then, $/hour (prices in force then).
    pub fleet_cost_per_hour_at_measure: f64,
    /// The fleet's cost at the end, $/hour (prices in force then).
    pub fleet_cost_per_hour_at_end: f64,
    /// The fleet's cost after the settle, $/hour.
    pub fleet_cost_per_hour_after_settle: f64,
    /// How long the settle ran, simulated hours (it ends after an hour with nothing to do, or
    /// after 12).
    pub settle_hours: f64,
    /// `consolidation_saving_per_hour / achievable_saving_per_hour`, between 0 and 1; null
    /// only when there was nothing to save (less than a cent an hour).
    pub captured_saving_fraction: Option<f64>,
    /// The run's cost in hindsight: every half hour (sampled in its middle), every running pod
    /// solved again from scratch with free moves on the offerings no outage window refuses then
    /// and within the clouds' capacity limits, that half hour at that cost, $. Where the
    /// solver's plan
    /// is not proven optimal (it costs more than its lower bound) the lower bound is used.
    pub hindsight_cost: f64,
    /// The share of `hindsight_cost` that is a lower bound rather than a proven optimum.
    pub hindsight_lower_bound_share: f64,
    /// What the solver's own from-scratch plans cost over the same hours, $.
    pub hindsight_plan_cost: f64,
    /// `total_cost / hindsight_cost`: how well provisioning and consolidation did together
    /// (null when nothing ran).
    pub fleet_cost_over_hindsight: Option<f64>,
    /// Pods moved or evicted by voluntary disruption and expiry.
    pub pods_disrupted: u64,
    /// Voluntary evictions a PodDisruptionBudget did not allow then.
    pub pdb_violations: u64,
    /// Disruption commands that took more nodes of a pool than its budgets allowed.
    pub budget_violations: u64,
    /// Voluntary moves of do-not-disrupt pods (expiry excepted: it is forceful).
    pub do_not_disrupt_violations: u64,
}

/// Accelerator-hours billed on each accelerator instance while no pod requesting accelerators
/// ran on it: its billed time minus the union of those pods' run segments, times its
/// accelerators.
fn idle_gpu_hours(rec: &Record, end: DateTime<Utc>) -> f64 {
    type Interval = (DateTime<Utc>, DateTime<Utc>);
    let mut busy: BTreeMap<usize, Vec<Interval>> = BTreeMap::new();
    for s in &rec.segments {
        if rec.pods[s.pod].accelerators > 0 && s.end > s.start {
            busy.entry(s.instance).or_default().push((s.start, s.end));
        }
    }
    let mut idle = 0.0;
    for (i, inst) in rec.instances.iter().enumerate() {
        if inst.accelerators == 0 {
            continue;
        }
        let mut running = busy.remove(&i).unwrap_or_default();
        running.sort();
        let mut covered = 0.0;
        let mut current: Option<(DateTime<Utc>, DateTime<Utc>)> = None;
        for (a, b) in running {
            match &mut current {
                Some((_, e)) if a <= *e => *e = (*e).max(b),
                _ => {
                    if let Some((s, e)) = current {
                        covered += (e - s).as_seconds_f64();
                    }
                    current = Some((a, b));
                }
            }
        }
        if let Some((s, e)) = current {
            covered += (e - s).as_seconds_f64();
        }
        let billed = inst.hours(end) * 3600.0;
        idle += f64::from(inst.accelerators) * (billed - covered).max(0.0) / 3600.0;
    }
    idle
}

/// Rounds to 6 decimals (micro-dollars, micro-hours): stable, readable JSON.
pub(crate) fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// The nearest-rank percentile of sorted values.
fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (p * sorted.len() as f64).ceil().max(1.0) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

fn rfc3339(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

impl Summary {
    /// The invariants this run broke, one line each (empty when none): a leaked or doubly
    /// launched instance, billed time the record lacks, a broken disruption budget,
    /// PodDisruptionBudget or do-not-disrupt annotation, a servable pod left waiting.
    pub fn broken_invariants(&self) -> Vec<String> {
        let counts = [
            ("leaked_instances", self.leaked_instances),
            ("duplicate_launches", self.duplicate_launches),
            ("limit_violations", self.limit_violations),
            ("gangs_half_launched", self.gangs_half_launched),
            ("budget_violations", self.budget_violations),
            ("pdb_violations", self.pdb_violations),
            ("do_not_disrupt_violations", self.do_not_disrupt_violations),
            ("servable_pods_unplaced", self.servable_pods_unplaced),
        ];
        let mut out: Vec<String> = counts
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{k}: {n}"))
            .collect();
        if self.unbilled_instance_seconds > 0.5 {
            out.push(format!(
                "unbilled_instance_seconds: {}",
                self.unbilled_instance_seconds
            ));
        }
        out
    }
}

/// Computes the summary of `run`, with `baseline` the on-demand-only run of the same trace.
pub fn summarise(scenario: &Scenario, seed: u64, run: &Run, baseline: &Run) -> Summary {
    let end = scenario.end();
    let rec = &run.record;
    let mut pending: Vec<f64> = rec
        .pods
        .iter()
        .map(|p| (p.first_bound.or(p.gone).unwrap_or(end) - p.created).as_seconds_f64())
        .collect();
    pending.sort_by(f64::total_cmp);
    let alive = |p: &&crate::record::PodRecord| p.gone.is_none();
    let unscheduled = rec
        .pods
        .iter()
        .filter(alive)
        .filter(|p| p.first_bound.is_none())
        .count();
    let mut by_type: BTreeMap<String, u64> = BTreeMap::new();
    let mut by_capacity: BTreeMap<String, u64> = BTreeMap::new();
    let mut cost_pool: BTreeMap<String, f64> = BTreeMap::new();
    let mut cost_capacity: BTreeMap<String, f64> = BTreeMap::new();
    let mut cost_type: BTreeMap<String, f64> = BTreeMap::new();
    let mut total = 0.0;
    let mut gpu_paid = 0.0;
    for i in &rec.instances {
        *by_type.entry(i.instance_type.clone()).or_default() += 1;
        *by_capacity.entry(i.capacity_type.to_string()).or_default() += 1;
        let cost = i.cost(end);
        total += cost;
        gpu_paid += f64::from(i.accelerators) * i.hours(end);
        *cost_pool.entry(i.node_pool.clone()).or_default() += cost;
        *cost_capacity
            .entry(i.capacity_type.to_string())
            .or_default() += cost;
        *cost_type.entry(i.instance_type.clone()).or_default() += cost;
    }
    let gpu_requested: f64 = rec
        .segments
        .iter()
        .map(|s| rec.pods[s.pod].accelerators as f64 * (s.end - s.start).as_seconds_f64() / 3600.0)
        .sum();
    let hours = (scenario.duration.num_seconds() as f64 / 3600.0)
        .ceil()
        .max(1.0) as usize;
    let mut by_hour = vec![0.0; hours];
    for i in &rec.instances {
        let a = (i.start - scenario.start).as_seconds_f64();
        let b = (i.end.unwrap_or(end) - scenario.start).as_seconds_f64();
        let mut h = (a / 3600.0).floor().max(0.0) as usize;
        while h < hours && (h as f64) * 3600.0 < b {
            let lo = a.max(h as f64 * 3600.0);
            let hi = b.min((h + 1) as f64 * 3600.0);
            if hi > lo {
                by_hour[h] += i.price_per_hour * (hi - lo) / 3600.0;
            }
            h += 1;
        }
    }
    let baseline_total: f64 = baseline.record.instances.iter().map(|i| i.cost(end)).sum();
    let round_map = |m: BTreeMap<String, f64>| -> BTreeMap<String, f64> {
        m.into_iter().map(|(k, v)| (k, round6(v))).collect()
    };
    let d = &run.disruption;
    let fleet_at_end = d.fleet_cost_at_end;
    let after = d.fleet_cost_after_settle.unwrap_or(fleet_at_end);
    let best_known = d.from_scratch_cost_at_measure.min(after);
    let achievable = (d.fleet_cost_at_measure - best_known).max(0.0);
    let consolidation_saving = d.fleet_cost_at_measure - after;
    let captured =
        (achievable >= 0.01).then(|| round6((consolidation_saving / achievable).clamp(0.0, 1.0)));
    let h = &run.hindsight;
    let headroom = crate::report::focus_csv::headroom_cost(scenario, rec);
    let reservations: Vec<quartermaster_pricing::Reservation> = scenario
        .cloud
        .reservations
        .iter()
        .map(|r| r.reservation(quartermaster_pricing::Cloud::Aws, scenario.start))
        .collect();
    let reserved_available: f64 = reservations
        .iter()
        .map(|r| {
            let a = r.start.map_or(scenario.start, |s| s.max(scenario.start));
            let b = r.end.map_or(end, |e| e.min(end));
            (b - a).as_seconds_f64().max(0.0) / 3600.0 * f64::from(r.count)
        })
        .sum();
    let reserved_used: f64 = rec
        .instances
        .iter()
        .filter(|i| i.capacity_type == quartermaster_pricing::CapacityType::Reserved)
        .map(|i| i.hours(end))
        .sum();
    let total_cost = round6(total);
    let on_demand_only_cost = round6(baseline_total);
    // Reservations are money spent whether used or not: a saving counts them.
    let reserved_cost: f64 = reservations
        .iter()
        .map(|r| r.cost_between(scenario.start, end))
        .sum();
    let savings = round6(on_demand_only_cost - total_cost - reserved_cost);
    Summary {
        scenario: scenario.name.clone(),
        seed,
        start: rfc3339(scenario.start),
        end: rfc3339(end),
        simulated_hours: round6(scenario.duration.as_seconds_f64() / 3600.0),
        pods_total: rec.pods.len() as u64,
        pods_completed: rec.pods.iter().filter(|p| p.completed).count() as u64,
        pods_unscheduled_at_end: unscheduled as u64,
        pods_pending_at_end: rec.pending.current().round() as u64,
        leaked_instances: run.audit.leaked_instances,
        duplicate_launches: run.audit.duplicate_launches,
        unbilled_instance_seconds: round6(run.audit.unbilled_instance_seconds),
        collected_instances: run.audit.collected_instances,
        limit_violations: run.audit.limit_violations,
        gangs_half_launched: run.audit.gangs_half_launched,
        chaos_seed: scenario.chaos,
        restarts: run.audit.restarts.len() as u64,
        restarts_by_crash_point: run.audit.restarts.iter().fold(BTreeMap::new(), |mut m, p| {
            *m.entry(p.key().to_owned()).or_default() += 1;
            m
        }),
        faults_injected: run
            .clouds
            .iter()
            .map(|(_, s)| {
                s.throttles + s.server_errors + s.lost_responses + s.never_registered + s.gpu_faults
            })
            .sum(),
        servable_pods_unplaced: run.waiting_at_end.stuck,
        late_arrivals: run.waiting_at_end.late_arrivals,
        unservable_pods_at_end: run.waiting_at_end.unservable,
        late_window_seconds: round6(run.waiting_at_end.late_window_seconds),
        pending_seconds_p50: round6(percentile(&pending, 0.50)),
        pending_seconds_p95: round6(percentile(&pending, 0.95)),
        pending_seconds_max: round6(pending.last().copied().unwrap_or(0.0)),
        nodes_launched: rec.instances.len() as u64,
        nodes_launched_by_instance_type: by_type,
        nodes_launched_by_capacity_type: by_capacity,
        nodes_peak: rec.nodes.max().round() as u64,
        nodes_at_end: rec
            .instances
            .iter()
            .filter(|i| i.end_reason == Some(crate::record::EndReason::RunEnded))
            .count() as u64,
        gpu_hours_paid: round6(gpu_paid),
        gpu_hours_requested: round6(gpu_requested),
        gpu_utilisation: if gpu_paid > 0.0 {
            round6(gpu_requested / gpu_paid)
        } else {
            0.0
        },
        idle_gpu_hours: round6(idle_gpu_hours(rec, end)),
        gang_rollbacks: scenario.has_gangs().then_some(run.engine.gang_rollbacks),
        binder: scenario.binder.as_str().to_owned(),
        nominations_released: run.engine.nominations_released,
        total_cost,
        on_demand_only_cost,
        savings,
        savings_fraction: if on_demand_only_cost > 0.0 {
            round6(savings / on_demand_only_cost)
        } else {
            0.0
        },
        cost_by_node_pool: round_map(cost_pool),
        cost_by_capacity_type: round_map(cost_capacity),
        cost_by_instance_type: round_map(cost_type),
        cost_by_hour: by_hour.into_iter().map(round6).collect(),
        interruptions: rec.instances.iter().filter(|i| i.interrupted).count() as u64,
        evictions: rec.pods.iter().map(|p| u64::from(p.evictions)).sum(),
        gpu_faults: run.clouds.iter().map(|(_, s)| s.gpu_faults).sum(),
        repairs: run.engine.repairs,
        repair_reboots: run.engine.repair_reboots,
        gpu_faults_cleared_by_reboot: rec
            .instances
            .iter()
            .filter(|i| i.gpu_cleared_at.is_some())
            .count() as u64,
        gpu_hours_lost_to_faults: round6(
            rec.instances
                .iter()
                .map(|i| i.gpu_hours_lost_to_faults(end))
                .sum(),
        ),
        reserved_cost: round6(reserved_cost),
        reserved_hours_available: round6(reserved_available),
        reserved_hours_used: round6(reserved_used),
        reservation_utilisation: (reserved_available > 0.0)
            .then(|| round6(reserved_used / reserved_available)),
        flex_start_cost: round6(
            rec.instances
                .iter()
                .filter(|i| i.capacity_type == quartermaster_pricing::CapacityType::FlexStart)
                .fold(0.0, |sum, i| sum + i.cost(end)),
        ),
        flex_start_launches: rec
            .instances
            .iter()
            .filter(|i| i.capacity_type == quartermaster_pricing::CapacityType::FlexStart)
            .count() as u64,
        flex_start_reclaims: run.clouds.iter().map(|(_, s)| s.flex_start_reclaims).sum(),
        capacity_buffers: scenario.buffers.len(),
        headroom_cost: round6(headroom.0),
        headroom_gpu_hours: round6(headroom.1),
        fallbacks: run.engine.fallbacks,
        engine: EngineCounters::from(&run.engine),
        cloud_throttles: run.clouds.iter().map(|(_, s)| s.throttles).sum(),
        event_loop_instants: run.instants,
        consolidation_commands: d.commands.clone(),
        consolidation_saving_per_hour: round6(consolidation_saving),
        commands_saving_per_hour: round6(d.saving_per_hour),
        achievable_saving_per_hour: round6(achievable),
        achievable_measured_at: rfc3339(d.measured_at.unwrap_or(end)),
        fleet_cost_per_hour_at_measure: round6(d.fleet_cost_at_measure),
        fleet_cost_per_hour_at_end: round6(fleet_at_end),
        fleet_cost_per_hour_after_settle: round6(after),
        settle_hours: round6(d.settle_seconds / 3600.0),
        captured_saving_fraction: captured,
        hindsight_cost: round6(h.cost),
        hindsight_lower_bound_share: round6(if h.cost > 0.0 {
            h.from_lower_bound / h.cost
        } else {
            0.0
        }),
        hindsight_plan_cost: round6(h.plan_cost),
        fleet_cost_over_hindsight: (h.cost > 1e-9).then(|| round6(total / h.cost)),
        pods_disrupted: d.pods_disrupted,
        pdb_violations: d.pdb_violations,
        budget_violations: d.budget_violations,
        do_not_disrupt_violations: d.do_not_disrupt_violations,
    }
}

impl Summary {
    /// The summary as a JSON value (what `-o json` prints and `summary.json` holds).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).expect("a summary serialises")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let xs: Vec<f64> = (1..=20).map(f64::from).collect();
        assert_eq!(percentile(&xs, 0.5), 10.0);
        assert_eq!(percentile(&xs, 0.95), 19.0);
        assert_eq!(percentile(&xs, 1.0), 20.0);
        assert_eq!(percentile(&[], 0.5), 0.0);
        assert_eq!(percentile(&[3.0], 0.95), 3.0);
    }
}
