//! `quartermaster bench`: generated scenarios, solved cost-optimally and by the greedy baseline.

use std::io::Write;
use std::time::Instant;

use anyhow::Context;
use quartermaster_bench::BenchResult;

use crate::cli::{BenchArgs, PlanFormat};
use crate::output::{Table, money};

pub fn run(args: &BenchArgs, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<u8> {
    let names: Vec<&str> = match &args.scenario {
        Some(name) => vec![name.as_str()],
        None => quartermaster_bench::scenario_names().to_vec(),
    };
    let mut runs = Vec::new();
    for name in names {
        let sizes = match args.pods {
            Some(pods) => vec![pods],
            None => quartermaster_bench::default_sizes(name),
        };
        // An unknown name has no default sizes: build it anyway to get the error listing the
        // valid ones.
        for pods in if sizes.is_empty() { vec![1] } else { sizes } {
            let started = Instant::now();
            let scenario = quartermaster_bench::build(name, pods)?;
            let built = started.elapsed().as_secs_f64();
            write!(
                err,
                "bench: {name}: {pods} pods (generated in {built:.3} s) ..."
            )?;
            err.flush()?;
            let result = quartermaster_bench::run_with(&scenario, args.search_effort);
            writeln!(
                err,
                " {:.3} s, {} nodes, {}/h (baseline {}/h)",
                result.solve_seconds,
                result.nodes,
                money(result.cost_per_hour),
                money(result.baseline_cost_per_hour)
            )?;
            runs.push(result);
        }
    }
    match args.output {
        PlanFormat::Json => {
            serde_json::to_writer_pretty(&mut *out, &runs).context("writing JSON")?;
            writeln!(out)?;
        }
        PlanFormat::Table => write_table(&runs, out)?,
    }
    Ok(crate::EXIT_OK)
}

fn write_table(runs: &[BenchResult], out: &mut dyn Write) -> anyhow::Result<()> {
    let mut table = Table::new([
        "SCENARIO",
        "PODS",
        "TYPES",
        "SOLVE S",
        "PODS/S",
        "NODES",
        "COST/H",
        "LOWER BOUND/H",
        "GAP %",
        "BASELINE/H",
        "SAVING %",
        "PEAK RSS MIB",
    ]);
    for r in runs {
        table.push([
            r.scenario.clone(),
            r.pods.to_string(),
            r.instance_types.to_string(),
            format!("{:.3}", r.solve_seconds),
            format!("{:.0}", r.pods_per_second),
            r.nodes.to_string(),
            money(r.cost_per_hour),
            money(r.lower_bound_per_hour),
            percent(r.gap),
            money(r.baseline_cost_per_hour),
            percent(r.saving_vs_baseline),
            if r.peak_rss_mib.is_nan() {
                "n/a".to_owned()
            } else {
                format!("{:.1}", r.peak_rss_mib)
            },
        ]);
    }
    table.write(out)?;
    let unplaced: Vec<String> = runs
        .iter()
        .filter(|r| r.unschedulable > 0 || r.baseline_unschedulable > 0)
        .map(|r| {
            format!(
                "{} ({} pods): {} unschedulable (baseline {})",
                r.scenario, r.pods, r.unschedulable, r.baseline_unschedulable
            )
        })
        .collect();
    for line in unplaced {
        writeln!(out, "note: {line}")?;
    }
    if runs.iter().any(|r| !r.peak_rss_reset) {
        writeln!(
            out,
            "note: peak RSS could not be reset between scenarios; it is the process peak so far"
        )?;
    }
    writeln!(
        out,
        "solve time: best of up to {} cost-optimal solves within {} s per scenario, without the lower bound (computed once, untimed, as the controller never needs it); the baseline is a Karpenter-style greedy packer",
        quartermaster_bench::MAX_REPETITIONS,
        quartermaster_bench::REPETITION_BUDGET.as_secs()
    )?;
    Ok(())
}

/// A fraction as a percentage with one decimal (`inf` when unbounded).
fn percent(fraction: f64) -> String {
    if fraction.is_finite() {
        format!("{:.1}", fraction * 100.0)
    } else {
        "inf".to_owned()
    }
}
