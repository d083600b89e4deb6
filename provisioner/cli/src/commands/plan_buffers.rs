//! CapacityBuffers in `plan`: the plan buys for the pods and for every buffer's chunks together
//! (placeholders, named `capacitybuffer-<buffer>-<i>`, among the new nodes' pods), and each
//! buffer's cost is measured, not estimated: the plan without it against the plan with it.

use chrono::{DateTime, Utc};
use quartermaster_cluster::capacity_buffer::BufferPods;
use quartermaster_pricing::Catalog;
use quartermaster_solver::{ClusterSnapshot, Plan, SolveOptions};
use serde_json::{Value, json};

use crate::output::{Table, money};

/// Past this many buffers only the total headroom cost is measured (one solve per buffer).
const MEASURED_ONE_BY_ONE: usize = 8;

/// What `plan` says about one buffer.
pub struct BufferAnswer {
    /// `namespace/name`.
    pub buffer: String,
    /// What its chunk was read from.
    pub source: Option<String>,
    /// Chunks it keeps.
    pub replicas: u32,
    /// Chunks the plan placed.
    pub placed: usize,
    /// What the plan pays for it per hour (plan with every buffer − plan without this one).
    pub cost_per_hour: Option<f64>,
    /// Why it keeps nothing.
    pub problem: Option<String>,
}

impl BufferAnswer {
    /// The `capacity_buffers` entry of `plan -o json`.
    pub fn json(&self) -> Value {
        json!({
            "buffer": self.buffer,
            "source": self.source,
            "replicas": self.replicas,
            "placed": self.placed,
            "cost_per_hour": self.cost_per_hour,
            "problem": self.problem,
        })
    }
}

/// The plan for `snapshot` with every buffer's placeholders, the headroom's total cost per
/// hour (against `without`, the plan for the pods alone) and an answer per buffer.
pub fn plan_with_buffers(
    buffers: &[BufferPods],
    snapshot: &ClusterSnapshot,
    without: &Plan,
    catalog: &Catalog,
    now: DateTime<Utc>,
    options: &SolveOptions,
) -> (Plan, f64, Vec<BufferAnswer>) {
    let solve = |skip: Option<usize>| {
        let mut s = snapshot.clone();
        let kept: Vec<BufferPods> = buffers
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != skip)
            .map(|(_, b)| b.clone())
            .collect();
        s.pending.extend(quartermaster_cluster::buffer_pods(&kept));
        quartermaster_solver::solve_with(&s, catalog, now, options)
    };
    let plan = solve(None);
    let total = plan.cost_per_hour - without.cost_per_hour;
    let serving = buffers.iter().filter(|b| b.replicas > 0).count();
    let answers = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| {
            let prefix = format!("capacitybuffer-{}-", b.name);
            let ours = |id: &quartermaster_solver::PodRef| {
                id.namespace == b.namespace && id.name.starts_with(&prefix)
            };
            let placed = plan
                .new_nodes
                .iter()
                .flat_map(|n| &n.pods)
                .chain(plan.existing.iter().flat_map(|e| &e.pods))
                .filter(|p| ours(p))
                .count();
            let cost_per_hour = if b.replicas == 0 {
                Some(0.0)
            } else if serving == 1 {
                Some(total)
            } else if buffers.len() <= MEASURED_ONE_BY_ONE {
                Some(plan.cost_per_hour - solve(Some(i)).cost_per_hour)
            } else {
                None
            };
            BufferAnswer {
                buffer: b.key(),
                source: b.source.clone(),
                replicas: b.replicas,
                placed,
                cost_per_hour,
                problem: b.problem.clone(),
            }
        })
        .collect();
    (plan, total, answers)
}

/// The `Headroom:` lines of the table output.
pub fn write_table(
    answers: &[BufferAnswer],
    total: f64,
    out: &mut dyn std::io::Write,
) -> anyhow::Result<()> {
    if answers.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "\nHeadroom (CapacityBuffers): ${}/hour in all",
        money(total)
    )?;
    let mut table = Table::new(["BUFFER", "CHUNK", "PLACED", "$/HOUR", "PROBLEM"]);
    for a in answers {
        table.push([
            a.buffer.clone(),
            a.source.clone().unwrap_or_else(|| "-".into()),
            format!("{}/{}", a.placed, a.replicas),
            a.cost_per_hour.map_or_else(|| "-".into(), money),
            a.problem.clone().unwrap_or_default(),
        ]);
    }
    table.write(out)?;
    Ok(())
}
