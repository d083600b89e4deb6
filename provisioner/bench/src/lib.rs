//! Quartermaster's solver benchmark (`quartermaster bench`).
//!
//! Scenarios are generated in-process from a fixed seed ([`rng::SEED`]), so every run of the
//! same build solves exactly the same snapshot:
//!
//! | scenario | default sizes | what it is |
//! |---|---|---|
//! | `gpu-training` | 64 | 8-GPU workers of 2–16-worker jobs on AWS, GCP and Azure training pools ([`gpu::training`]) |
//! | `gpu-inference` | 1000 | 1- and 2-GPU serving replicas with GPU-memory selectors, AWS + GCP, spot allowed ([`gpu::inference`]) |
//! | `mixed` | 1000 | CPU services with zonal spread, GPU inference and training in one cluster ([`mixed`]) |
//! | `karpenter-shape` | 1000, 5000, 20000 | Karpenter's own scheduling benchmark: 400 synthetic types, five pod groups ([`karpenter`]) |
//!
//! They run in that order, smallest memory footprint first: the allocator keeps memory freed by
//! one scenario mapped, and the peak RSS of a later scenario cannot drop below it.
//!
//! [`run`] solves a scenario with [`Strategy::CostOptimal`] (timed) and with
//! [`Strategy::KarpenterGreedy`] (the baseline cost), and reports the peak resident memory.
//!
//! Unlike the other library crates this one reads a clock: measuring wall time is its job.
//! It never decides anything from the time; the solver gets a fixed `now` ([`now`]).

pub mod common;
pub mod consolidation;
pub mod gpu;
pub mod karpenter;
pub mod mixed;
pub mod passes;
pub mod rng;

use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use quartermaster_pricing::Catalog;
use quartermaster_solver::{ClusterSnapshot, SolveOptions, Strategy, solve_with};
use serde::Serialize;

/// Every scenario, in the order `quartermaster bench` runs them.
const SCENARIOS: [&str; 5] = [
    "gpu-training",
    "gpu-inference",
    "mixed",
    "karpenter-shape",
    consolidation::NAME,
];

/// At most this many timed solves per scenario...
pub const MAX_REPETITIONS: usize = 5;
/// ...and more than one only while the solves so far took less than this in total: small
/// sizes report the best of up to five runs, large ones a single run.
pub const REPETITION_BUDGET: Duration = Duration::from_secs(1);

/// A benchmark failure.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BenchError {
    /// The scenario name is not one of [`scenario_names`].
    #[error("unknown scenario `{name}`; valid scenarios: {valid}")]
    UnknownScenario {
        /// The name asked for.
        name: String,
        /// The valid names, comma-separated.
        valid: String,
    },
    /// A scenario needs at least one pod.
    #[error("a scenario needs at least one pod (got 0)")]
    NoPods,
    /// More pods than a benchmark run may generate on this kind of machine.
    #[error("--pods {pods} is more than the {max} a benchmark run may generate")]
    TooManyPods {
        /// Asked for.
        pods: usize,
        /// The ceiling.
        max: usize,
    },
}

/// The most pods one benchmark scenario may generate (five times the largest default size).
pub const MAX_PODS: usize = 100_000;

/// A generated benchmark input.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Scenario name (one of [`scenario_names`]).
    pub name: String,
    /// The cluster: pending pods, NodePools, DaemonSets.
    pub snapshot: ClusterSnapshot,
    /// The instance types the solver may buy.
    pub catalog: Catalog,
}

/// The names of every scenario, in run order.
pub fn scenario_names() -> &'static [&'static str] {
    &SCENARIOS
}

/// The pod counts a scenario runs at by default (empty for an unknown name).
pub fn default_sizes(name: &str) -> Vec<usize> {
    match name {
        "karpenter-shape" => vec![1000, 5000, 20000],
        "gpu-training" => vec![64],
        "gpu-inference" | "mixed" => vec![1000],
        // About 2,000 nodes.
        consolidation::NAME => vec![5000],
        _ => Vec::new(),
    }
}

/// Generates scenario `name` with exactly `pods` pending pods. Deterministic: the same name and
/// size always give the same snapshot.
pub fn build(name: &str, pods: usize) -> Result<Scenario, BenchError> {
    if !SCENARIOS.contains(&name) {
        return Err(BenchError::UnknownScenario {
            name: name.to_owned(),
            valid: SCENARIOS.join(", "),
        });
    }
    if pods == 0 {
        return Err(BenchError::NoPods);
    }
    if pods > MAX_PODS {
        return Err(BenchError::TooManyPods {
            pods,
            max: MAX_PODS,
        });
    }
    let (snapshot, catalog) = match name {
        "karpenter-shape" => (karpenter::snapshot(pods), karpenter::catalog()),
        "gpu-training" => (gpu::training(pods), Catalog::embedded()),
        "gpu-inference" => (gpu::inference(pods), Catalog::embedded()),
        consolidation::NAME => (consolidation::snapshot(pods), Catalog::embedded()),
        _ => (mixed::snapshot(pods), Catalog::embedded()),
    };
    Ok(Scenario {
        name: name.to_owned(),
        snapshot,
        catalog,
    })
}

/// The "now" every benchmark solve is given: 2026-01-01T00:00:00Z.
pub fn now() -> DateTime<Utc> {
    DateTime::from_timestamp(1_767_225_600, 0).expect("a valid timestamp")
}

/// What one benchmark run measured. Serialises to the `bench -o json` object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchResult {
    /// Scenario name.
    pub scenario: String,
    /// Pending pods.
    pub pods: usize,
    /// Instance types at least one NodePool admits (cloud and requirements).
    pub instance_types: usize,
    /// Wall time of the fastest cost-optimal solve, seconds.
    pub solve_seconds: f64,
    /// `pods / solve_seconds`.
    pub pods_per_second: f64,
    /// Nodes the cost-optimal plan buys.
    pub nodes: usize,
    /// Cost of the cost-optimal plan, dollars per hour.
    pub cost_per_hour: f64,
    /// The solver's lower bound on the cost of any plan placing the same pods.
    pub lower_bound_per_hour: f64,
    /// `(cost - lower bound) / lower bound` (0.02 = 2%).
    pub gap: f64,
    /// Cost of the Karpenter-style greedy plan, dollars per hour.
    pub baseline_cost_per_hour: f64,
    /// Nodes the greedy plan buys.
    pub baseline_nodes: usize,
    /// Pods the cost-optimal plan could not place.
    pub unschedulable: usize,
    /// Pods the greedy plan could not place.
    pub baseline_unschedulable: usize,
    /// `(baseline - cost) / baseline` (0.25 = 25% cheaper than the baseline).
    pub saving_vs_baseline: f64,
    /// Peak resident set size (VmHWM) during the cost-optimal solves, MiB; NaN (`null` in
    /// JSON) where `/proc/self/status` is unavailable.
    pub peak_rss_mib: f64,
    /// Resident set size (VmRSS) when the peak was reset, MiB: `peak_rss_mib - rss_at_start_mib`
    /// is what the solves added on top of the scenario's data and memory kept from earlier runs.
    pub rss_at_start_mib: f64,
    /// True when the peak was reset before the scenario (`/proc/self/clear_refs`); false means
    /// `peak_rss_mib` is the peak of the whole process so far.
    pub peak_rss_reset: bool,
    /// How many timed cost-optimal solves `solve_seconds` is the best of.
    pub repetitions: usize,
    /// Wall time of the (single) greedy solve, seconds.
    pub baseline_solve_seconds: f64,
    /// `consolidation` only: every pass until one decides nothing (the first is the timed
    /// pass above), with the fleet's cost after each.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub passes: Option<Vec<passes::Pass>>,
    /// The solver's search effort when one was asked for ([`run_with`]), in percent of the
    /// default improvement work.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub search_effort: Option<u32>,
}

/// Solves `scenario` with [`Strategy::CostOptimal`] — timed, the best of up to
/// [`MAX_REPETITIONS`] runs while they take under [`REPETITION_BUDGET`] in total — and once
/// with [`Strategy::KarpenterGreedy`] for the baseline cost.
///
/// The peak RSS is reset just before the first cost-optimal solve (writing `5` to
/// `/proc/self/clear_refs`, Linux ≥ 4.0) and read right after the last one, before the baseline
/// runs, so it covers the scenario's data plus the cost-optimal solver's working memory. If the
/// reset fails, the process peak is reported and `peak_rss_reset` is false.
pub fn run(scenario: &Scenario) -> BenchResult {
    run_with(scenario, None)
}

/// [`run`] with the cost-optimal solves at `search_effort` percent of the default improvement
/// work ([`SolveOptions::search_effort`]; `None` is the default). The consolidation scenario
/// runs the engine's passes, which keep the default.
pub fn run_with(scenario: &Scenario, search_effort: Option<u32>) -> BenchResult {
    if scenario.name == consolidation::NAME {
        return consolidation::run(scenario);
    }
    let snapshot = &scenario.snapshot;
    let catalog = &scenario.catalog;
    let now = now();
    // Timed solves leave the lower bound out, as the controller's do; it is computed once,
    // untimed, for the report (the plan is the same: the bound never changes it).
    let optimal = SolveOptions {
        strategy: Strategy::CostOptimal,
        skip_lower_bound: true,
        search_effort,
        ..SolveOptions::default()
    };
    let greedy = SolveOptions {
        strategy: Strategy::KarpenterGreedy,
        skip_lower_bound: true,
        ..SolveOptions::default()
    };

    let peak_rss_reset = reset_peak_rss();
    let rss_at_start_mib = proc_status_mib("VmRSS:").unwrap_or(f64::NAN);
    let started = Instant::now();
    let plan = solve_with(snapshot, catalog, now, &optimal);
    let mut best = started.elapsed();
    let mut total = best;
    let mut repetitions = 1;
    while repetitions < MAX_REPETITIONS && total < REPETITION_BUDGET {
        let started = Instant::now();
        let again = solve_with(snapshot, catalog, now, &optimal);
        let took = started.elapsed();
        drop(again);
        best = best.min(took);
        total += took;
        repetitions += 1;
    }
    let peak_rss_mib = proc_status_mib("VmHWM:").unwrap_or(f64::NAN);
    let bound = solve_with(
        snapshot,
        catalog,
        now,
        &SolveOptions {
            search_effort,
            ..SolveOptions::default()
        },
    );
    debug_assert_eq!(bound.cost_per_hour, plan.cost_per_hour);

    let started = Instant::now();
    let baseline = solve_with(snapshot, catalog, now, &greedy);
    let baseline_solve_seconds = started.elapsed().as_secs_f64();

    let pods = snapshot.pending.len();
    let solve_seconds = best.as_secs_f64();
    let saving_vs_baseline = if baseline.cost_per_hour > 0.0 {
        (baseline.cost_per_hour - plan.cost_per_hour) / baseline.cost_per_hour
    } else {
        0.0
    };
    BenchResult {
        scenario: scenario.name.clone(),
        pods,
        instance_types: admitted_instance_types(snapshot, catalog),
        solve_seconds,
        pods_per_second: if solve_seconds > 0.0 {
            pods as f64 / solve_seconds
        } else {
            f64::INFINITY
        },
        nodes: plan.new_nodes.len(),
        cost_per_hour: plan.cost_per_hour,
        lower_bound_per_hour: bound.lower_bound_per_hour,
        gap: bound.gap(),
        baseline_cost_per_hour: baseline.cost_per_hour,
        baseline_nodes: baseline.new_nodes.len(),
        unschedulable: plan.unschedulable.len(),
        baseline_unschedulable: baseline.unschedulable.len(),
        saving_vs_baseline,
        peak_rss_mib,
        rss_at_start_mib,
        peak_rss_reset,
        repetitions,
        baseline_solve_seconds,
        passes: None,
        search_effort,
    }
}

/// How many catalog types some NodePool could launch: same cloud, and some offering whose
/// labels (static, zone, capacity type, pool template labels) meet the pool's requirements.
pub fn admitted_instance_types(snapshot: &ClusterSnapshot, catalog: &Catalog) -> usize {
    catalog
        .instance_types()
        .iter()
        .filter(|t| {
            snapshot
                .node_pools
                .iter()
                .filter(|p| p.cloud == t.cloud)
                .any(|pool| {
                    t.offerings.iter().any(|o| {
                        let mut labels = t.offering_labels(o);
                        labels.extend(pool.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
                        pool.requirements.matches(&labels)
                    })
                })
        })
        .count()
}

/// Resets the process's peak RSS (VmHWM) to its current RSS; false where that is unsupported.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// A `kB` field of `/proc/self/status` (`VmHWM:`, `VmRSS:`), in MiB.
fn proc_status_mib(field: &str) -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: f64 = line[field.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib / 1024.0)
}

#[cfg(test)]
mod tests;
