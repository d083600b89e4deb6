//! The fixed workloads the guard counts instructions of. Each is deterministic: the same build
//! runs exactly the same code on the same data every time (no clock decides anything, every
//! generator is seeded, one thread).

use anyhow::{Context, Result};
use chrono::TimeDelta;
use quartermaster_pricing::Catalog;
use quartermaster_simulation::Scenario;

/// A workload: its name (the budget file's key), what it is, and how to run it.
pub struct Workload {
    /// Key in the budget file.
    pub name: &'static str,
    /// One line for people.
    pub what: &'static str,
    /// Runs it; returns a one-line result (printed, so the work cannot be optimised away and a
    /// change of outcome is visible next to a change of cost).
    pub run: fn() -> Result<String>,
}

/// Every workload, in the order the guard runs them.
pub const WORKLOADS: [Workload; 6] = [
    Workload {
        name: "catalog-load",
        what: "parse the embedded catalog (every region), build its shared labels, cut it to the default regions",
        run: catalog_load,
    },
    Workload {
        name: "karpenter-shape-5k",
        what: "one cost-optimal solve of Karpenter's scheduling benchmark at 5,000 pods",
        run: karpenter_shape_5k,
    },
    Workload {
        name: "karpenter-shape-100k",
        what: "one cost-optimal solve of the same benchmark at 100,000 pods, without the lower bound (as the controller and `bench` time it): past 20,000 pods the improvement's budget stops growing",
        run: karpenter_shape_100k,
    },
    Workload {
        name: "week-10k-jobs-day",
        what: "scenarios/week-10k-jobs.yaml cut to its first day (engine, simulated clouds, scheduler stand-in)",
        run: week_day,
    },
    Workload {
        name: "week-10k-jobs-day-measured",
        what: "the same day with the run's measures: hindsight solves every half hour, the settle, the end audit",
        run: week_day_measured,
    },
    Workload {
        name: "consolidation",
        what: "consolidation of the bench's fragmented fleet (2,000 pods, about 800 nodes), pass after pass until it converges",
        run: consolidation_pass,
    },
];

/// The workload called `name`.
pub fn find(name: &str) -> Option<&'static Workload> {
    WORKLOADS.iter().find(|w| w.name == name)
}

fn catalog_load() -> Result<String> {
    let all = Catalog::embedded_all_regions();
    let labelled: usize = all.labels().iter().map(|t| t.offerings.len()).sum();
    let default = all.in_default_regions();
    Ok(format!(
        "{} types, {labelled} offerings labelled; {} types in the default regions",
        all.len(),
        default.len()
    ))
}

fn karpenter_shape_5k() -> Result<String> {
    let scenario = quartermaster_bench::build("karpenter-shape", 5000)?;
    let plan = quartermaster_solver::solve(
        &scenario.snapshot,
        &scenario.catalog,
        quartermaster_bench::now(),
    );
    Ok(format!(
        "{} nodes, ${:.4}/h, bound ${:.4}/h, {} unschedulable",
        plan.new_nodes.len(),
        plan.cost_per_hour,
        plan.lower_bound_per_hour,
        plan.unschedulable.len()
    ))
}

fn karpenter_shape_100k() -> Result<String> {
    let scenario = quartermaster_bench::build("karpenter-shape", 100_000)?;
    let options = quartermaster_solver::SolveOptions {
        skip_lower_bound: true,
        ..Default::default()
    };
    let plan = quartermaster_solver::solve_with(
        &scenario.snapshot,
        &scenario.catalog,
        quartermaster_bench::now(),
        &options,
    );
    Ok(format!(
        "{} nodes, ${:.4}/h, {} unschedulable",
        plan.new_nodes.len(),
        plan.cost_per_hour,
        plan.unschedulable.len()
    ))
}

fn week_day() -> Result<String> {
    week(false)
}

fn week_day_measured() -> Result<String> {
    week(true)
}

fn week(measures: bool) -> Result<String> {
    let text = include_str!("../../../scenarios/week-10k-jobs.yaml");
    let mut scenario = Scenario::parse("week-10k-jobs.yaml", text, None)
        .context("scenarios/week-10k-jobs.yaml does not parse")?;
    scenario.duration = TimeDelta::days(1);
    let run = quartermaster_simulation::driver::run_with(&scenario, scenario.seed, None, measures)?;
    Ok(format!(
        "{} instants, {} solves, {} claims, {} pods waiting, {} hindsight samples",
        run.instants,
        run.engine.solves,
        run.engine.claims_created,
        run.waiting.len(),
        run.hindsight.samples
    ))
}

fn consolidation_pass() -> Result<String> {
    let scenario = quartermaster_bench::build(quartermaster_bench::consolidation::NAME, 2000)?;
    let r = quartermaster_bench::consolidation::run(&scenario);
    let passes = r.passes.unwrap_or_default();
    let last = passes.last().map_or(r.cost_per_hour, |p| p.cost_per_hour);
    Ok(format!(
        "{} nodes: ${:.4} -> ${:.4}/h after one pass, ${last:.4}/h after {}, bound ${:.4}/h",
        r.nodes,
        r.baseline_cost_per_hour,
        r.cost_per_hour,
        passes.len(),
        r.lower_bound_per_hour
    ))
}
