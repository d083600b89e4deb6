//! Quartermaster's simulator: the provisioning engine doing its whole job against simulated
//! clouds and a generated workload, deterministic for a seed.
//!
//! A [`Scenario`] (YAML, see `scenarios/README.md`) names NodePools, DaemonSets, how the clouds
//! behave and what runs (Jobs arriving over time, Deployments following a schedule or a day
//! curve). [`simulate`] generates the workload trace, then drives the same
//! `quartermaster-engine` that runs in the cluster: it is the driver that carries out the
//! engine's actions (launch and delete through `quartermaster-sim`, bind pods in an in-memory
//! cluster) and reports the outcomes back as events, moving a manual clock from one event to
//! the next. The same trace is replayed with every NodePool restricted to on-demand capacity to
//! price the alternative. The result is a [`Summary`] and, with [`report::write_dir`], a FOCUS
//! cost allocation and an HTML report.
//!
//! No clock reads, no I/O except writing report files when asked.

mod cluster;
pub mod disruption;
pub mod driver;
mod duration;
mod error;
pub mod record;
pub mod report;
mod rng;
pub mod scenario;
pub mod scheduler;
pub mod summary;
#[cfg(test)]
mod testing;
pub mod workload;

pub use driver::Run;
pub use error::SimulationError;
pub use scenario::Scenario;
pub use summary::Summary;

/// A finished simulation.
#[derive(Debug, Clone)]
pub struct Simulation {
    /// The scenario that ran.
    pub scenario: Scenario,
    /// The seed used.
    pub seed: u64,
    /// The numbers.
    pub summary: Summary,
    /// The run as configured.
    pub run: Run,
    /// The same trace with every NodePool restricted to on-demand.
    pub baseline: Run,
}

/// Runs `scenario` (with `seed`, or the scenario's own) and its on-demand-only baseline (on a
/// second thread), and summarises. `progress` is told the fraction of simulated time done of the
/// main run.
pub fn simulate(
    scenario: &Scenario,
    seed: Option<u64>,
    progress: Option<&mut dyn FnMut(f64)>,
) -> Result<Simulation, SimulationError> {
    let seed = seed.unwrap_or(scenario.seed);
    let baseline_scenario = scenario.on_demand_only();
    let (run, baseline) = std::thread::scope(|s| {
        let handle = s.spawn(|| driver::run_with(&baseline_scenario, seed, None, false));
        let run = driver::run(scenario, seed, progress);
        let baseline = handle
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        (run, baseline)
    });
    let (run, baseline) = (run?, baseline?);
    let summary = summary::summarise(scenario, seed, &run, &baseline);
    Ok(Simulation {
        scenario: scenario.clone(),
        seed,
        summary,
        run,
        baseline,
    })
}
