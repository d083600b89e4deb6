//! How `plan` and `explain` show the pods' soft constraints: honoured or dropped, and at what
//! cost. The decisions and the figures are the solver's ([`PreferenceDecision`]).

use std::io::Write;

use quartermaster_solver::PreferenceDecision;
use serde_json::{Value, json};

use crate::output::{Table, money};

/// The `preferences` list of `plan -o json` and `explain -o json`: keys are only ever added.
pub fn to_json(decisions: &[PreferenceDecision]) -> Value {
    decisions
        .iter()
        .map(|d| {
            json!({
                "pod_group": d.pod_group,
                "kind": d.kind.as_str(),
                "detail": d.detail,
                "honoured": d.honoured,
                "cost_per_hour": d.cost_per_hour,
                "weight": d.weight,
                "policy": d.policy.as_str(),
                "pods": d.pods,
                "leaves_pending": d.leaves_pending,
                "decided_with": d.decided_with,
            })
        })
        .collect()
}

/// A line per preference, under a `Preferences:` heading (nothing when there is none).
pub fn write_table(decisions: &[PreferenceDecision], out: &mut dyn Write) -> anyhow::Result<()> {
    if decisions.is_empty() {
        return Ok(());
    }
    writeln!(out, "\nPreferences:")?;
    let mut table = Table::new([
        "POD GROUP",
        "KIND",
        "PREFERENCE",
        "WEIGHT",
        "POLICY",
        "HONOURED",
        "COST $/HOUR",
    ]);
    for d in decisions {
        table.push([
            d.pod_group.clone(),
            d.kind.to_string(),
            d.detail.clone(),
            d.weight.to_string(),
            d.policy.to_string(),
            honoured(d),
            cost(d),
        ]);
    }
    table.write(out)?;
    Ok(())
}

fn honoured(d: &PreferenceDecision) -> String {
    match (d.honoured, d.leaves_pending) {
        (true, _) => "yes".to_owned(),
        (false, 0) => "no".to_owned(),
        (false, n) => format!("no (would leave {n} pod(s) pending)"),
    }
}

fn cost(d: &PreferenceDecision) -> String {
    let Some(c) = d.cost_per_hour else {
        return "-".to_owned();
    };
    let sign = if c > 0.0 { "+" } else { "" };
    let figure = format!("{sign}{}", money(c));
    if d.decided_with > 0 {
        format!("{figure} (share of {})", d.decided_with + 1)
    } else {
        figure
    }
}
