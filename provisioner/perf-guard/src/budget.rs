//! The budget file: the instructions each workload may execute, checked into the repository
//! next to this crate. A change that makes a workload slower raises its budget in the same
//! commit (`perf-guard record`), where a reviewer sees it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// The default tolerance: a workload may grow this many percent over its budget.
pub const DEFAULT_TOLERANCE_PERCENT: f64 = 10.0;

/// `budget.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budget {
    /// How far over its budget a workload may go before the guard fails, in percent.
    pub tolerance_percent: f64,
    /// What counted the instructions (valgrind's version line).
    pub measured_with: String,
    /// Per workload.
    pub workloads: BTreeMap<String, Entry>,
}

/// One workload's budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Entry {
    /// Instructions (cachegrind's `I refs`) when the budget was recorded.
    pub instructions: u64,
    /// What the workload printed then.
    pub result: String,
}

const HEADER: &str = "\
# Quartermaster's performance budget: the instructions (valgrind cachegrind `I refs`) each fixed
# workload of `perf-guard` executed when it was last recorded, on the CI machine's toolchain.
# CI (`.ci/run`) fails when a workload executes more than `tolerance_percent` over its budget.
# A change that makes a workload slower on purpose raises the budget in the same commit:
#     cargo run --release -p quartermaster-perf-guard -- record
# Instruction counts, unlike wall-clock times, do not depend on what else the machine is doing.
";

impl Budget {
    /// Reads `path`.
    pub fn load(path: &Path) -> Result<Budget> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the budget file {}", path.display()))?;
        toml::from_str(&text).with_context(|| format!("{} is not a valid budget", path.display()))
    }

    /// Writes `path`, with its explanatory header.
    pub fn save(&self, path: &Path) -> Result<()> {
        let body = toml::to_string(self).context("the budget serialises")?;
        std::fs::write(path, format!("{HEADER}\n{body}"))
            .with_context(|| format!("cannot write the budget file {}", path.display()))
    }
}

/// How a measurement compares with its budget.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Verdict {
    /// Within the tolerance.
    Within,
    /// More than the tolerance over: the guard fails.
    Over,
    /// No budget recorded for it: the guard fails.
    Unbudgeted,
}

/// Compares `measured` with `entry` under `tolerance_percent`.
pub fn verdict(entry: Option<&Entry>, measured: u64, tolerance_percent: f64) -> Verdict {
    match entry {
        None => Verdict::Unbudgeted,
        Some(e) => {
            let limit = e.instructions as f64 * (1.0 + tolerance_percent / 100.0);
            if measured as f64 > limit {
                Verdict::Over
            } else {
                Verdict::Within
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(instructions: u64) -> Entry {
        Entry {
            instructions,
            result: String::new(),
        }
    }

    #[test]
    fn a_workload_may_grow_up_to_the_tolerance_and_no_further() {
        let e = entry(1_000_000);
        assert_eq!(verdict(Some(&e), 900_000, 10.0), Verdict::Within);
        assert_eq!(verdict(Some(&e), 1_100_000, 10.0), Verdict::Within);
        assert_eq!(verdict(Some(&e), 1_100_001, 10.0), Verdict::Over);
        assert_eq!(verdict(None, 1, 10.0), Verdict::Unbudgeted);
    }

    #[test]
    fn the_checked_in_budget_parses_and_names_every_workload() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("budget.toml");
        let budget = Budget::load(&path).expect("the checked-in budget parses");
        assert_eq!(budget.tolerance_percent, DEFAULT_TOLERANCE_PERCENT);
        for w in crate::workloads::WORKLOADS {
            assert!(
                budget.workloads.contains_key(w.name),
                "budget.toml has no entry for {}",
                w.name
            );
        }
    }
}
