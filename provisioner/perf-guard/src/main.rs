//! `perf-guard`: counts the instructions of fixed workloads under valgrind's cachegrind and
//! compares them with `budget.toml` (see that file's header). CI runs `perf-guard check`.
//!
//! ```text
//! perf-guard check            # every workload under cachegrind; non-zero exit when one is over
//! perf-guard record           # the same, then write the counts as the new budget
//! perf-guard run NAME         # one workload, natively (what cachegrind runs)
//! perf-guard list             # the workloads
//! ```

mod budget;
mod workloads;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

use budget::{Budget, DEFAULT_TOLERANCE_PERCENT, Entry, Verdict, verdict};
use workloads::WORKLOADS;

#[derive(Parser)]
#[command(
    version,
    about = "Instruction-count guard for Quartermaster's hot paths"
)]
struct Cli {
    /// The budget file.
    #[arg(long, global = true, default_value_os_t = default_budget_path())]
    budget: PathBuf,
    #[command(subcommand)]
    command: Option<Cmd>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Count every workload's instructions and compare them with the budget (the default).
    Check {
        /// Only these workloads.
        names: Vec<String>,
    },
    /// Count every workload's instructions and write them as the new budget.
    Record,
    /// Run one workload natively and print its result.
    Run {
        /// The workload.
        name: String,
    },
    /// List the workloads.
    List,
}

fn default_budget_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("budget.toml")
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("perf-guard: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> Result<bool> {
    match cli.command.unwrap_or(Cmd::Check { names: Vec::new() }) {
        Cmd::List => {
            for w in WORKLOADS {
                println!("{:<20} {}", w.name, w.what);
            }
            Ok(true)
        }
        Cmd::Run { name } => {
            let Some(w) = workloads::find(&name) else {
                bail!("unknown workload `{name}`; `perf-guard list` lists them");
            };
            println!("{}", (w.run)()?);
            Ok(true)
        }
        Cmd::Record => {
            let valgrind = valgrind_version()?;
            let mut budget = Budget {
                tolerance_percent: DEFAULT_TOLERANCE_PERCENT,
                measured_with: valgrind,
                workloads: Default::default(),
            };
            for w in WORKLOADS {
                let (instructions, result) = count(w.name)?;
                println!("{:<20} {:>16} {result}", w.name, group(instructions));
                budget.workloads.insert(
                    w.name.to_owned(),
                    Entry {
                        instructions,
                        result,
                    },
                );
            }
            budget.save(&cli.budget)?;
            println!("wrote {}", cli.budget.display());
            Ok(true)
        }
        Cmd::Check { names } => check(&cli.budget, &names),
    }
}

fn check(path: &Path, names: &[String]) -> Result<bool> {
    let budget = Budget::load(path)?;
    for n in names {
        if workloads::find(n).is_none() {
            bail!("unknown workload `{n}`; `perf-guard list` lists them");
        }
    }
    println!(
        "{:<20} {:>16} {:>16} {:>8}  result",
        "WORKLOAD", "BUDGET", "MEASURED", "CHANGE"
    );
    let mut ok = true;
    for w in WORKLOADS
        .iter()
        .filter(|w| names.is_empty() || names.iter().any(|n| n == w.name))
    {
        let (instructions, result) = count(w.name)?;
        let entry = budget.workloads.get(w.name);
        let change = entry.map_or(String::from("-"), |e| {
            format!(
                "{:+.1}%",
                (instructions as f64 / e.instructions as f64 - 1.0) * 100.0
            )
        });
        println!(
            "{:<20} {:>16} {:>16} {:>8}  {result}",
            w.name,
            entry.map_or(String::from("-"), |e| group(e.instructions)),
            group(instructions),
            change
        );
        match verdict(entry, instructions, budget.tolerance_percent) {
            Verdict::Within => {}
            Verdict::Over => {
                ok = false;
                println!(
                    "  FAIL: {} is more than {}% over its budget. Find what made it slower, or \
                     raise the budget in the same commit (`perf-guard record`) and say why.",
                    w.name, budget.tolerance_percent
                );
            }
            Verdict::Unbudgeted => {
                ok = false;
                println!(
                    "  FAIL: {} has no budget in {} (`perf-guard record`).",
                    w.name,
                    path.display()
                );
            }
        }
    }
    if ok {
        println!(
            "every workload within {}% of its budget",
            budget.tolerance_percent
        );
    }
    Ok(ok)
}

/// Runs workload `name` in this binary under cachegrind; returns its instructions and result.
fn count(name: &str) -> Result<(u64, String)> {
    let exe = std::env::current_exe().context("cannot find this binary's path")?;
    let out = Command::new("valgrind")
        .args([
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
        ])
        .arg(&exe)
        .args(["run", name])
        .output()
        .context("cannot run valgrind (install Debian's `valgrind` package)")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        bail!("{name} failed under valgrind ({}):\n{stderr}", out.status);
    }
    let instructions = instructions_from(&stderr)
        .with_context(|| format!("no `I refs` line in valgrind's output for {name}:\n{stderr}"))?;
    let result = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    Ok((instructions, result))
}

/// The `I refs` count from cachegrind's summary (`==123== I   refs:      1,234,567`).
fn instructions_from(stderr: &str) -> Option<u64> {
    stderr.lines().rev().find_map(|line| {
        let (_, rest) = line
            .split_once("I   refs:")
            .or_else(|| line.split_once("I refs:"))?;
        rest.trim().replace(',', "").parse().ok()
    })
}

fn valgrind_version() -> Result<String> {
    let out = Command::new("valgrind")
        .arg("--version")
        .output()
        .context("cannot run valgrind (install Debian's `valgrind` package)")?;
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// `1234567` as `1,234,567`.
fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cachegrinds_summary_line_is_read() {
        let stderr = "==4242== Cachegrind, a cache and branch-prediction profiler\n\
                      ==4242== \n==4242== I   refs:      1,234,567,890\n";
        assert_eq!(instructions_from(stderr), Some(1_234_567_890));
        assert_eq!(instructions_from("no summary"), None);
        assert_eq!(group(1_234_567), "1,234,567");
        assert_eq!(group(999), "999");
    }
}
