//! `quartermaster plan -f FILE...`: what to buy for the pods in ordinary Kubernetes YAML.
//!
//! Reads the files, builds a snapshot with `quartermaster-cluster`, asks `quartermaster-solver`
//! for a plan and prints it. Every decision is the solver's; this file only formats.

use std::io::Write;

use anyhow::Context;
use quartermaster_solver::{OfferingChoice, Plan};
use serde_json::{Value, json};

use super::catalog::load_catalog;
use crate::cli::{PlanArgs, PlanFormat};
use crate::output::{Table, money};
use crate::workload::{Reading, load};
use crate::{reservations, static_nodes};

/// Said when the input holds no pod to place, so an empty plan is not read as "all is well".
const NO_WORKLOAD: &str = "no workload found: the input holds no pending pod (Pods, Deployments, \
StatefulSets, ReplicaSets, Jobs or workload custom resources such as PyTorchJob, \
LeaderWorkerSet, RayService, InferenceService, JobSet)";

/// How many pod names a table cell lists before summarising the rest.
const PODS_PER_CELL: usize = 4;

pub fn run(args: &PlanArgs, out: &mut dyn Write, _err: &mut dyn Write) -> anyhow::Result<u8> {
    let catalog = load_catalog(args.catalog.as_deref())?;
    let reading = Reading {
        region: args.region.as_deref(),
        extended_resource_toleration: args.extended_resource_toleration,
    };
    let loaded = load(&args.files, &catalog, reading)?;
    let mut ingested = loaded.ingested;
    let catalog =
        quartermaster_solver::flex_start::catalog_for(catalog, &ingested.snapshot.node_pools);
    let mut notes = loaded.read_notes;
    notes.append(&mut ingested.notes);
    let now = args.at.unwrap_or_else(chrono::Utc::now);
    let given = match &args.reservations {
        Some(path) => Some(reservations::file::read(path, &catalog)?),
        None => None,
    };
    let configured_pools = ingested.snapshot.node_pools.clone();
    let reserved = static_nodes::reserve(
        &mut ingested.snapshot,
        &ingested.static_pools,
        &catalog,
        now,
        &mut notes,
    );
    // Reserved capacity: free slots stand in the snapshot as the engine's stand-ins do.
    let catalog = reservations::catalog_with(catalog, given.as_deref().unwrap_or_default());
    let reservations = given.map(|given| {
        reservations::Reserved::apply(
            given,
            &loaded.objects,
            configured_pools,
            &mut ingested.snapshot,
            &catalog,
            now,
        )
    });
    ingested
        .snapshot
        .override_preference_policy(args.preference_policy);
    let options = quartermaster_solver::SolveOptions {
        price_preferences: true,
        search_effort: args.search_effort,
        ..Default::default()
    };
    let mut plan = quartermaster_solver::solve_with(&ingested.snapshot, &catalog, now, &options);
    // CapacityBuffers: bought with the pods, each priced by the plan without it.
    let mut headroom = None;
    if !ingested.capacity_buffers.is_empty() {
        let (with, total, answers) = super::plan_buffers::plan_with_buffers(
            &ingested.capacity_buffers,
            &ingested.snapshot,
            &plan,
            &catalog,
            now,
            &options,
        );
        plan = with;
        headroom = Some((total, answers));
    }
    static_nodes::fold_into_plan(&mut plan, reserved);
    let landed = match &reservations {
        Some(r) => r.fold_into_plan(&mut plan, &ingested.snapshot),
        None => vec![None; plan.new_nodes.len()],
    };
    let reservation_rows = reservations.as_ref().map_or_else(Vec::new, |r| {
        reservations::summary::plan_rows(r, &plan, &landed, &ingested.snapshot, &catalog)
    });
    // No pod to place and none running on a given node: the input holds no workload at all.
    let nothing_pending = ingested.snapshot.pending.is_empty()
        && ingested.snapshot.nodes.iter().all(|n| n.pods.is_empty())
        && ingested.provisioning_requests.is_empty()
        && ingested.capacity_buffers.is_empty();
    if nothing_pending {
        notes.push(NO_WORKLOAD.to_owned());
    }
    notes.extend(
        plan.notes
            .iter()
            .filter(|n| !notes.contains(n))
            .cloned()
            .collect::<Vec<_>>(),
    );
    let requests = super::plan_requests::answers(
        &ingested.provisioning_requests,
        &ingested.snapshot,
        &plan,
        &catalog,
        now,
    );
    notes.extend(requests.iter().map(|r| r.note()));
    let expected = expected_costs(&plan, &ingested.snapshot, &catalog);
    match args.output {
        PlanFormat::Json => {
            let mut value = to_json(&plan, &notes);
            for (node, cost) in value["new_nodes"]
                .as_array_mut()
                .into_iter()
                .flatten()
                .zip(&expected)
            {
                node["expected_cost_per_hour"] = json!(cost);
            }
            value["provisioning_requests"] = requests.iter().map(|r| r.json()).collect();
            for (node, id) in value["new_nodes"]
                .as_array_mut()
                .into_iter()
                .flatten()
                .zip(&landed)
            {
                node["reservation"] = json!(id);
            }
            value["reservations"] = reservations::summary::plan_json(&reservation_rows, now);
            if let Some((total, answers)) = &headroom {
                value["capacity_buffers"] = answers.iter().map(|a| a.json()).collect();
                value["headroom_cost_per_hour"] = json!(total);
            }
            serde_json::to_writer_pretty(&mut *out, &value).context("writing JSON")?;
            writeln!(out)?;
        }
        PlanFormat::Table => write_table(
            &plan,
            &expected,
            &notes,
            nothing_pending,
            headroom.as_ref(),
            (&landed, &reservation_rows),
            out,
        )?,
    }
    Ok(crate::EXIT_OK)
}

/// The expected cost per hour of each new node (same order as `plan.new_nodes`): what the
/// solver ranked it by, the price plus the expected cost of spot interruptions where the
/// catalog knows the offering's band; the price otherwise.
fn expected_costs(
    plan: &Plan,
    snapshot: &quartermaster_solver::ClusterSnapshot,
    catalog: &quartermaster_pricing::Catalog,
) -> Vec<f64> {
    plan.new_nodes
        .iter()
        .map(|n| {
            snapshot
                .node_pools
                .iter()
                .find(|p| p.name == n.node_pool && p.cloud == n.cloud)
                .map_or(n.offering.price_per_hour, |pool| {
                    n.offering.expected_cost_per_hour(catalog, pool)
                })
        })
        .collect()
}

fn offering_json(o: &OfferingChoice) -> Value {
    json!({
        "instance_type": o.instance_type,
        "zone": o.zone,
        "capacity_type": o.capacity_type.to_string(),
        "price_per_hour": o.price_per_hour,
    })
}

/// The `plan -o json` contract: keys are only ever added.
fn to_json(plan: &Plan, notes: &[String]) -> Value {
    let new_nodes: Vec<Value> = plan
        .new_nodes
        .iter()
        .map(|n| {
            json!({
                "nodepool": n.node_pool,
                "cloud": n.cloud.to_string(),
                "instance_type": n.offering.instance_type,
                "zone": n.offering.zone,
                "capacity_type": n.offering.capacity_type.to_string(),
                "price_per_hour": n.offering.price_per_hour,
                "pods": n.pods.iter().map(ToString::to_string).collect::<Vec<_>>(),
                "alternatives": n.alternatives.iter().map(offering_json).collect::<Vec<_>>(),
                "accelerator_note": n.accelerator_note,
                "mig_config": n.mig_config(),
            })
        })
        .collect();
    let existing: Vec<Value> = plan
        .existing
        .iter()
        .map(|e| {
            json!({
                "node": e.node,
                "in_flight": e.in_flight,
                "pods": e.pods.iter().map(ToString::to_string).collect::<Vec<_>>(),
            })
        })
        .collect();
    let unschedulable: Vec<Value> = plan
        .unschedulable
        .iter()
        .map(|u| json!({"pod": u.pod.to_string(), "reason": u.reason}))
        .collect();
    let relaxations: Vec<Value> = plan
        .relaxations
        .iter()
        .map(|r| json!({"pod": r.pod.to_string(), "relaxed": r.relaxed}))
        .collect();
    let gap = plan.gap();
    json!({
        "new_nodes": new_nodes,
        "existing_nodes": existing,
        "unschedulable": unschedulable,
        "cost_per_hour": plan.cost_per_hour,
        "lower_bound_per_hour": plan.lower_bound_per_hour,
        "gap": if gap.is_finite() { json!(gap) } else { Value::Null },
        "relaxations": relaxations,
        "preferences": super::preferences::to_json(&plan.preferences),
        "notes": notes,
    })
}

/// `a, b, c, d, +3 more`.
fn pod_list<T: ToString>(pods: &[T]) -> String {
    let mut names: Vec<String> = pods
        .iter()
        .take(PODS_PER_CELL)
        .map(ToString::to_string)
        .collect();
    if pods.len() > PODS_PER_CELL {
        names.push(format!("+{} more", pods.len() - PODS_PER_CELL));
    }
    names.join(", ")
}

fn write_table(
    plan: &Plan,
    expected: &[f64],
    notes: &[String],
    nothing_pending: bool,
    headroom: Option<&(f64, Vec<super::plan_buffers::BufferAnswer>)>,
    (landed, reservation_rows): (&[Option<String>], &[reservations::summary::PlanRow]),
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let placed: usize = plan.new_nodes.iter().map(|n| n.pods.len()).sum::<usize>()
        + plan.existing.iter().map(|e| e.pods.len()).sum::<usize>();
    if plan.new_nodes.is_empty() && nothing_pending {
        writeln!(out, "No new nodes: no workload found in the input.")?;
    } else if plan.new_nodes.is_empty() {
        writeln!(out, "No new nodes.")?;
    } else {
        writeln!(out, "New nodes:")?;
        let mut table = Table::new([
            "NODEPOOL",
            "INSTANCE TYPE",
            "ZONE",
            "CAPACITY",
            "$/HOUR",
            "PODS",
        ]);
        for (i, n) in plan.new_nodes.iter().enumerate() {
            // Spot with a known interruption band: the price and the expected cost.
            let price = money(n.offering.price_per_hour);
            let price = match expected.get(i).map(|&e| money(e)) {
                Some(e) if e != price => format!("{price} (expected {e})"),
                _ => price,
            };
            // A MIG layout the solver chose (pool without `migConfig`) goes with the type.
            let instance_type = match n.mig_config() {
                Some(layout) => format!("{} (mig: {layout})", n.offering.instance_type),
                None => n.offering.instance_type.clone(),
            };
            // A node launched into a reservation names it.
            let capacity = match landed.get(i).and_then(Option::as_deref) {
                Some(id) => format!("{} ({id})", n.offering.capacity_type),
                None => n.offering.capacity_type.to_string(),
            };
            table.push([
                n.node_pool.clone(),
                instance_type,
                n.offering.zone.clone(),
                capacity,
                price,
                format!("{}: {}", n.pods.len(), pod_list(&n.pods)),
            ]);
        }
        table.write(out)?;
    }
    if !plan.existing.is_empty() {
        writeln!(out, "\nOn existing nodes:")?;
        let mut table = Table::new(["NODE", "PODS"]);
        for e in &plan.existing {
            let name = if e.in_flight {
                format!("{} (launching)", e.node)
            } else {
                e.node.clone()
            };
            table.push([name, format!("{}: {}", e.pods.len(), pod_list(&e.pods))]);
        }
        table.write(out)?;
    }
    writeln!(out)?;
    let gap = plan.gap();
    let gap = if gap.is_finite() {
        format!("{:.1}%", gap * 100.0)
    } else {
        "-".to_owned()
    };
    writeln!(
        out,
        "Cost: ${}/hour for {} new node(s); lower bound ${}/hour (gap {gap}). {placed} pod(s) placed, {} unschedulable.",
        money(plan.cost_per_hour),
        plan.new_nodes.len(),
        money(plan.lower_bound_per_hour),
        plan.unschedulable.len(),
    )?;
    let in_reservations = landed.iter().filter(|l| l.is_some()).count();
    if in_reservations > 0 {
        writeln!(
            out,
            "{in_reservations} of the new node(s) launch into reservations, at no added cost."
        )?;
    }
    if !plan.unschedulable.is_empty() {
        writeln!(out, "\nUnschedulable:")?;
        let mut table = Table::new(["POD", "REASON"]);
        for u in &plan.unschedulable {
            table.push([u.pod.to_string(), u.reason.clone()]);
        }
        table.write(out)?;
    }
    if !plan.relaxations.is_empty() {
        writeln!(out, "\nRelaxed to place pods:")?;
        let mut table = Table::new(["POD", "RELAXED"]);
        for r in &plan.relaxations {
            table.push([r.pod.to_string(), r.relaxed.clone()]);
        }
        table.write(out)?;
    }
    super::preferences::write_table(&plan.preferences, out)?;
    if let Some((total, answers)) = headroom {
        super::plan_buffers::write_table(answers, *total, out)?;
    }
    reservations::summary::write_plan_table(reservation_rows, out)?;
    if !notes.is_empty() {
        writeln!(out, "\nNotes:")?;
        for note in notes {
            writeln!(out, "  - {note}")?;
        }
    }
    Ok(())
}
