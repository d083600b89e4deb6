//! `quartermaster simulate [SCENARIO]`: the engine against simulated clouds and a generated
//! workload. Loading, running and reporting are `quartermaster-simulation`'s; this file picks
//! the scenario, shows progress (`indicatif`, on a terminal only) and prints.

use std::io::Write;
use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use quartermaster_simulation::{Scenario, Simulation, Summary};

use crate::cli::{BinderArg, PlanFormat, SimulateArgs};
use quartermaster_simulation::scheduler::Binder;

/// Flattens a library error to the one line the CLI prints.
fn one_line(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!(e.to_string().replace(['\n', '\r'], " "))
}

/// Runs `simulate`. `err` carries the broken invariants of a `--chaos` run; the progress bar is
/// drawn by `indicatif` straight on the terminal's standard error, and only when
/// [`crate::terminal_progress`] says it is one.
pub fn run(args: &SimulateArgs, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<u8> {
    let scenario = match &args.scenario {
        Some(path) => Scenario::load(path),
        None => Scenario::embedded_default(),
    }
    .map_err(one_line)?;
    let scenario = if args.no_gang {
        scenario.without_gang_awareness()
    } else {
        scenario
    };
    let scenario = if args.without_buffers {
        scenario.without_buffers()
    } else {
        scenario
    };
    let scenario = if args.without_flex_start {
        scenario.without_flex_start()
    } else {
        scenario
    };
    let scenario = if args.without_disruption_rules {
        scenario.without_disruption_rules()
    } else {
        scenario
    };
    let scenario = scenario.with_binder(match args.binder {
        BinderArg::Scheduler => Binder::Scheduler,
        BinderArg::MostAllocated => Binder::MostAllocated,
        BinderArg::Planned => Binder::Planned,
    });
    let scenario = match args.preference_policy {
        Some(policy) => scenario.with_preference_policy(policy),
        None => scenario,
    };
    let scenario = match args.chaos {
        Some(seed) => scenario.with_chaos(seed),
        None => scenario,
    };
    if args.check {
        writeln!(
            out,
            "{}: valid ({} NodePools, {} workloads, {} simulated)",
            args.scenario.as_ref().map_or_else(
                || "embedded default scenario".to_owned(),
                |p| p.display().to_string()
            ),
            scenario.node_pools.len(),
            scenario.workloads.len(),
            quartermaster_simulation::scenario::format_duration(scenario.duration),
        )?;
        return Ok(crate::EXIT_OK);
    }
    let started = Instant::now();
    let sim = if crate::terminal_progress() {
        let bar = progress_bar(&scenario.name);
        let mut show = |fraction: f64| bar.set_position((fraction * PROGRESS_STEPS as f64) as u64);
        let sim = quartermaster_simulation::simulate(&scenario, args.seed, Some(&mut show));
        bar.finish_and_clear();
        sim
    } else {
        quartermaster_simulation::simulate(&scenario, args.seed, None)
    }
    .map_err(one_line)?;
    let wall = started.elapsed().as_secs_f64();
    if let Some(dir) = &args.report_dir {
        quartermaster_simulation::report::write_dir(dir, &sim).map_err(one_line)?;
    }
    match args.output {
        PlanFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &sim.summary.to_json())
                .context("writing JSON")?;
            writeln!(out)?;
        }
        PlanFormat::Table => write_table(&sim, wall, out)?,
    }
    if let Some(dir) = &args.report_dir
        && args.output == PlanFormat::Table
    {
        writeln!(
            out,
            "\nReport: {} (summary.json, cost.csv, report.html)",
            dir.display()
        )?;
    }
    if args.chaos.is_some() {
        let broken = sim.summary.broken_invariants();
        if !broken.is_empty() {
            writeln!(
                err,
                "error: invariants broken under chaos: {}",
                broken.join(", ")
            )?;
            return Ok(EXIT_INVARIANT_BROKEN);
        }
    }
    Ok(crate::EXIT_OK)
}

/// Exit code of a `--chaos` run that broke an invariant.
pub const EXIT_INVARIANT_BROKEN: u8 = 3;

/// Resolution of the progress bar (simulated time is reported as a fraction).
const PROGRESS_STEPS: u64 = 1000;

/// `simulating NAME [=====>    ]  42% (3s)` on standard error, redrawn by `indicatif` at most
/// a few times a second and cleared at the end. Only used when standard error is a terminal.
fn progress_bar(name: &str) -> ProgressBar {
    let style =
        ProgressStyle::with_template("simulating {prefix} [{bar:30}] {percent:>3}% ({elapsed})")
            .map_or_else(
                |_| ProgressStyle::default_bar(),
                |s| s.progress_chars("=> "),
            );
    let bar = ProgressBar::with_draw_target(Some(PROGRESS_STEPS), ProgressDrawTarget::stderr());
    bar.set_style(style);
    bar.set_prefix(name.to_owned());
    bar
}

fn money(v: f64) -> String {
    format!("${v:.2}")
}

fn seconds(s: f64) -> String {
    if s >= 3600.0 {
        format!("{:.1} h", s / 3600.0)
    } else if s >= 60.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{s:.0} s")
    }
}

fn counts(m: &std::collections::BTreeMap<String, u64>) -> String {
    let mut v: Vec<(&String, &u64)> = m.iter().collect();
    v.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    v.iter()
        .map(|(k, n)| format!("{k} ×{n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn dollars(m: &std::collections::BTreeMap<String, f64>) -> String {
    let mut v: Vec<(&String, &f64)> = m.iter().collect();
    v.sort_by(|a, b| b.1.total_cmp(a.1).then(a.0.cmp(b.0)));
    v.iter()
        .map(|(k, c)| format!("{k} {}", money(**c)))
        .collect::<Vec<_>>()
        .join(", ")
}

fn write_table(sim: &Simulation, wall: f64, out: &mut dyn Write) -> anyhow::Result<()> {
    let s: &Summary = &sim.summary;
    let e = &s.engine;
    writeln!(
        out,
        "Scenario {} (seed {}): {:.1} simulated hours, {} → {}, in {wall:.1} s",
        s.scenario, s.seed, s.simulated_hours, s.start, s.end
    )?;
    if let Some(d) = &sim.scenario.description {
        writeln!(out, "  {d}")?;
    }
    writeln!(out)?;
    let mut rows: Vec<(&str, String)> = vec![
        (
            "Pods",
            format!(
                "{} created, {} completed, {} never scheduled by the end ({} pending)",
                s.pods_total, s.pods_completed, s.pods_unscheduled_at_end, s.pods_pending_at_end
            ),
        ),
        (
            "Pending",
            format!(
                "p50 {}, p95 {}, max {} (creation to first bind)",
                seconds(s.pending_seconds_p50),
                seconds(s.pending_seconds_p95),
                seconds(s.pending_seconds_max)
            ),
        ),
        (
            "Nodes",
            format!(
                "{} launched ({}); peak {} at once, {} at the end",
                s.nodes_launched,
                counts(&s.nodes_launched_by_capacity_type),
                s.nodes_peak,
                s.nodes_at_end
            ),
        ),
        ("Instance types", counts(&s.nodes_launched_by_instance_type)),
        (
            "GPU hours",
            format!(
                "{:.1} paid, {:.1} requested (utilisation {:.1}%), {:.1} idle GPU-hours",
                s.gpu_hours_paid,
                s.gpu_hours_requested,
                s.gpu_utilisation * 100.0,
                s.idle_gpu_hours
            ),
        ),
        (
            "Cost",
            if s.reserved_cost > 0.0 {
                format!(
                    "{} ({}) + {} of reservations, paid used or not",
                    money(s.total_cost),
                    dollars(&s.cost_by_capacity_type),
                    money(s.reserved_cost)
                )
            } else {
                format!(
                    "{} ({})",
                    money(s.total_cost),
                    dollars(&s.cost_by_capacity_type)
                )
            },
        ),
        (
            "On-demand only",
            format!(
                "{} for the same work: saved {} ({:.1}%)",
                money(s.on_demand_only_cost),
                money(s.savings),
                s.savings_fraction * 100.0
            ),
        ),
        ("By NodePool", dollars(&s.cost_by_node_pool)),
        (
            "Interruptions",
            format!("{} (pods evicted {})", s.interruptions, s.evictions),
        ),
        (
            "Fallbacks",
            format!(
                "{} after {} capacity errors ({} spot → on-demand); {} claims abandoned, {} retries",
                s.fallbacks, e.capacity_errors, e.spot_to_on_demand, e.claims_abandoned, e.retries
            ),
        ),
        (
            "Engine",
            format!(
                "{} solves, {} claims, {} empty nodes removed, {} retired ({} while empty, {} reopened), {} accelerator / {} registration timeouts",
                e.solves,
                e.claims_created,
                e.empty_deletions,
                e.retirements,
                e.retirements_empty,
                e.retirements_reopened,
                e.accelerator_timeouts,
                e.registration_timeouts
            ),
        ),
        (
            "Consolidation",
            format!(
                "{} underutilized nodes removed, {} replaced by cheaper ones",
                e.consolidation_deletes, e.consolidation_replacements
            ),
        ),
    ];
    if let Some(rollbacks) = s.gang_rollbacks {
        rows.push(("Gangs", format!("{rollbacks} gang rollbacks")));
    }
    if let Some(u) = s.reservation_utilisation {
        rows.push((
            "Reservations",
            format!(
                "${:.2} paid used or not; {:.1} of {:.1} instance-hours ran in them ({:.0}%); {} launched in, {} drained before a block's end",
                s.reserved_cost,
                s.reserved_hours_used,
                s.reserved_hours_available,
                u * 100.0,
                s.engine.reserved_launches,
                s.engine.reservation_drains
            ),
        ));
    }
    if s.flex_start_launches > 0 {
        rows.push((
            "Flex-start",
            format!(
                "{} launched, ${:.2}; {} drained before their 7-day run ended, {} deleted by the cloud at its end",
                s.flex_start_launches,
                s.flex_start_cost,
                s.engine.flex_start_drains,
                s.flex_start_reclaims
            ),
        ));
    }
    if s.capacity_buffers > 0 {
        rows.push((
            "Headroom",
            format!(
                "{} CapacityBuffer(s) held ${:.2} of room ({:.2} GPU-hours)",
                s.capacity_buffers, s.headroom_cost, s.headroom_gpu_hours
            ),
        ));
    }
    if s.gpu_faults > 0 || s.repairs > 0 {
        rows.push((
            "Node repair",
            format!(
                "{} GPU faults, {} nodes repaired, {:.2} GPU-hours paid on broken nodes",
                s.gpu_faults, s.repairs, s.gpu_hours_lost_to_faults
            ),
        ));
    }
    rows.push((
        "Saving",
        format!(
            "${:.2}/h achievable at {}, ${:.2}/h taken by consolidation ({}; settled in {:.1} h)",
            s.achievable_saving_per_hour,
            s.achievable_measured_at,
            s.consolidation_saving_per_hour,
            s.captured_saving_fraction
                .map_or("nothing to save".to_owned(), |f| format!(
                    "{:.0}%",
                    f * 100.0
                )),
            s.settle_hours
        ),
    ));
    rows.push((
        "Hindsight",
        format!(
            "${:.2} with every running pod re-solved each half hour ({}% lower bound): fleet {}",
            s.hindsight_cost,
            (s.hindsight_lower_bound_share * 100.0).round(),
            s.fleet_cost_over_hindsight
                .map_or("n/a".to_owned(), |r| format!("{r:.2}×"))
        ),
    ));
    rows.push((
        "Audit",
        format!(
            "{} leaked instances, {} duplicate launches, {} limit / {} budget / {} PDB violations{}; waiting at the end: {} stuck, {} late, {} unservable",
            s.leaked_instances,
            s.duplicate_launches,
            s.limit_violations,
            s.budget_violations,
            s.pdb_violations,
            if s.restarts > 0 {
                format!(" over {} restarts", s.restarts)
            } else {
                String::new()
            },
            s.servable_pods_unplaced,
            s.late_arrivals,
            s.unservable_pods_at_end
        ),
    ));
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    for (k, v) in rows {
        writeln!(out, "{k:<width$}  {v}")?;
    }
    Ok(())
}
