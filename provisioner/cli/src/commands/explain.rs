//! `quartermaster explain pod NAMESPACE/NAME -f FILE...`: every candidate offering for one pod,
//! with its price and why it was chosen or not. The reasons are the solver's
//! (`quartermaster_solver::explain`); this file only formats them.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use quartermaster_pricing::CapacityType;
use quartermaster_solver::PodRef;
use quartermaster_solver::explain::{Explanation, Outcome, Verdict, explain};
use serde_json::{Value, json};

use super::catalog::load_catalog;
use crate::cli::PlanFormat;
use crate::output::{Table, money};
use crate::reservations;
use crate::workload::{Reading, load};

/// What `explain` explains.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The object.
    #[command(subcommand)]
    pub target: ExplainTarget,
}

/// Objects `explain` knows.
#[derive(Debug, Subcommand)]
pub enum ExplainTarget {
    /// One pending pod of the manifests (`NAMESPACE/NAME`; pods of a workload are named
    /// `NAME-0`, `NAME-1`, … as in `plan`).
    Pod(ExplainPodArgs),
}

/// Flags of `quartermaster explain pod`.
#[derive(Debug, Args)]
pub struct ExplainPodArgs {
    /// `NAMESPACE/NAME` (a bare `NAME` means namespace `default`).
    #[arg(value_name = "NAMESPACE/NAME")]
    pub pod: String,
    /// Kubernetes manifests, as for `plan`.
    #[arg(short = 'f', long = "filename", required = true, num_args = 1.., value_name = "FILE")]
    pub files: Vec<PathBuf>,
    /// Replace or extend the embedded catalog with this file.
    #[arg(long, value_name = "FILE")]
    pub catalog: Option<PathBuf>,
    /// The cluster's region, as for `plan`.
    #[arg(long, value_name = "REGION")]
    pub region: Option<String>,
    /// As for `plan`: the API server runs the ExtendedResourceToleration admission plugin.
    #[arg(long)]
    pub extended_resource_toleration: bool,
    /// How soft constraints (preferred affinities, `ScheduleAnyway` spreads) are weighed against
    /// cost, for every NodePool: `Respect`, `Ignore` or `CostBounded` (default: each NodePool's
    /// `spec.preferencePolicy`, itself `CostBounded` by default).
    #[arg(long, value_name = "POLICY", value_parser = crate::cli::parse_preference_policy)]
    pub preference_policy: Option<quartermaster_solver::PreferencePolicy>,
    /// Capacity reservations, as for `plan`: the answer says why the pod did or did not use
    /// each.
    #[arg(long, value_name = "FILE")]
    pub reservations: Option<PathBuf>,
    /// As for `plan`: explain as of this time (RFC 3339; default now).
    #[arg(long, value_name = "TIME", value_parser = crate::cli::parse_time)]
    pub at: Option<chrono::DateTime<chrono::Utc>>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = PlanFormat::Table)]
    pub output: PlanFormat,
}

/// How many pending pods an unknown-pod error lists.
const PODS_LISTED: usize = 10;

pub fn run(args: &ExplainArgs, out: &mut dyn Write) -> anyhow::Result<u8> {
    let ExplainTarget::Pod(args) = &args.target;
    let catalog = load_catalog(args.catalog.as_deref())?;
    let reading = Reading {
        region: args.region.as_deref(),
        extended_resource_toleration: args.extended_resource_toleration,
    };
    let mut loaded = load(&args.files, &catalog, reading)?;
    let pools = &loaded.ingested.snapshot.node_pools;
    let catalog = quartermaster_solver::flex_start::catalog_for(catalog, pools);
    let now = args.at.unwrap_or_else(chrono::Utc::now);
    // Reserved capacity: the same stand-ins as `plan`.
    let given = match &args.reservations {
        Some(path) => Some(reservations::file::read(path, &catalog)?),
        None => None,
    };
    let catalog = reservations::catalog_with(catalog, given.as_deref().unwrap_or_default());
    let reserved = given.map(|given| {
        let pools = loaded.ingested.snapshot.node_pools.clone();
        reservations::Reserved::apply(
            given,
            &loaded.objects,
            pools,
            &mut loaded.ingested.snapshot,
            &catalog,
            now,
        )
    });
    loaded
        .ingested
        .snapshot
        .override_preference_policy(args.preference_policy);
    let snapshot = &loaded.ingested.snapshot;
    let pod = match args.pod.split_once('/') {
        Some((namespace, name)) => PodRef::new(namespace, name),
        None => PodRef::new("default", args.pod.as_str()),
    };
    let Some(mut explanation) = explain(snapshot, &catalog, now, &pod) else {
        let pending: Vec<String> = snapshot
            .pending
            .iter()
            .take(PODS_LISTED)
            .map(|p| p.id.to_string())
            .collect();
        if pending.is_empty() {
            bail!("no pending pod {pod} in the input: it holds no pending pod at all");
        }
        let more = snapshot.pending.len().saturating_sub(PODS_LISTED);
        bail!(
            "no pending pod {pod} in the input; its pending pods: {}{}",
            pending.join(", "),
            if more > 0 {
                format!(", +{more} more")
            } else {
                String::new()
            }
        );
    };
    let mut notes = loaded.read_notes.clone();
    notes.extend(loaded.ingested.notes.iter().cloned());
    let verdicts = match &reserved {
        Some(reserved) => {
            // The reserved offerings are reached only through free slots, never bought: their
            // story is the reservations' verdicts, not the candidates'.
            explanation
                .candidates
                .retain(|c| c.capacity_type != CapacityType::Reserved);
            Some(reservation_verdicts(
                reserved,
                &explanation,
                snapshot,
                &catalog,
                now,
            ))
        }
        None => None,
    };
    let on = match (&reserved, &explanation.outcome) {
        (Some(reserved), Outcome::Existing { node }) => reserved.stand_in(node),
        _ => None,
    };
    match args.output {
        PlanFormat::Json => {
            let mut value = to_json(&explanation, &notes);
            if let Some((offer, _)) = on {
                value["outcome"]["reservation"] = json!(offer.reservation.id);
            }
            value["reservation"] = json!(on.map(|(offer, _)| &offer.reservation.id));
            value["reservations"] = verdicts
                .as_deref()
                .map_or_else(|| json!([]), reservations::explain::to_json);
            serde_json::to_writer_pretty(&mut *out, &value).context("writing JSON")?;
            writeln!(out)?;
        }
        PlanFormat::Table => write_table(&explanation, &notes, on, verdicts.as_deref(), out)?,
    }
    Ok(crate::EXIT_OK)
}

/// Each reservation's verdict for the explained pod, against the same plan `explain` solved.
fn reservation_verdicts(
    reserved: &reservations::Reserved,
    explanation: &Explanation,
    snapshot: &quartermaster_solver::ClusterSnapshot,
    catalog: &quartermaster_pricing::Catalog,
    now: chrono::DateTime<chrono::Utc>,
) -> Vec<reservations::explain::ReservationVerdict> {
    let Some(pod) = snapshot.pending.iter().find(|p| p.id == explanation.pod) else {
        return Vec::new();
    };
    let plan = quartermaster_solver::solve_with(
        snapshot,
        catalog,
        now,
        &quartermaster_solver::SolveOptions {
            price_preferences: true,
            ..Default::default()
        },
    );
    reservations::explain::verdicts(
        reserved,
        explanation,
        pod,
        snapshot,
        catalog,
        &plan.existing,
    )
}

fn outcome_line(outcome: &Outcome) -> String {
    match outcome {
        Outcome::NewNode {
            node_pool,
            instance_type,
            zone,
            capacity_type,
            price_per_hour,
            pods,
        } => format!(
            "a new {instance_type} ({capacity_type}, {zone}) of NodePool {node_pool} at ${}/hour, holding {pods} pod(s)",
            money(*price_per_hour)
        ),
        Outcome::Existing { node } => format!("existing node {node}, at no added cost"),
        Outcome::Unschedulable { reason } => format!("nowhere: {reason}"),
    }
}

fn write_table(
    e: &Explanation,
    notes: &[String],
    on: Option<(&quartermaster_engine::ReservationOffer, usize)>,
    verdicts: Option<&[reservations::explain::ReservationVerdict]>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let outcome = match on {
        // A free slot of a reservation stands in as an in-flight node: say which.
        Some((offer, _)) => {
            let r = &offer.reservation;
            format!(
                "a free slot of reservation {} ({} {} in {}), at no added cost",
                r.id,
                r.kind.as_str(),
                r.instance_type,
                r.zone
            )
        }
        None => outcome_line(&e.outcome),
    };
    writeln!(out, "Pod {} goes to {outcome}.", e.pod)?;
    if let Some(verdicts) = verdicts {
        match on {
            Some((offer, _)) => writeln!(out, "Reservation: uses {}.", offer.reservation.id)?,
            None if verdicts.is_empty() => writeln!(out, "Reservation: none given.")?,
            None => writeln!(
                out,
                "Reservation: none used ({}).",
                verdicts
                    .iter()
                    .map(|v| format!("{}: {}", v.id, v.verdict))
                    .collect::<Vec<_>>()
                    .join("; ")
            )?,
        }
    }
    writeln!(out)?;
    let mut table = Table::new(["NODEPOOL", "TYPE", "ZONE", "CAPACITY", "$/HOUR", "VERDICT"]);
    for c in &e.candidates {
        table.push([
            c.node_pool.clone(),
            c.instance_type.clone(),
            c.zone.clone(),
            c.capacity_type.to_string(),
            money(c.price_per_hour),
            c.verdict.to_string(),
        ]);
    }
    table.write(out)?;
    super::preferences::write_table(&e.preferences, out)?;
    if let Some(verdicts) = verdicts.filter(|v| !v.is_empty()) {
        writeln!(out)?;
        writeln!(out, "Reservations:")?;
        let mut table = Table::new(["ID", "TYPE", "ZONE", "INSTANCE TYPE", "VERDICT", "REASON"]);
        for v in verdicts {
            table.push([
                v.id.clone(),
                v.kind.to_owned(),
                v.zone.clone(),
                v.instance_type.clone(),
                v.verdict.to_owned(),
                v.reason.clone(),
            ]);
        }
        table.write(out)?;
    }
    if !notes.is_empty() {
        writeln!(out)?;
        writeln!(out, "Notes:")?;
        for n in notes {
            writeln!(out, "  {n}")?;
        }
    }
    Ok(())
}

/// The `explain -o json` contract: keys are only ever added.
fn to_json(e: &Explanation, notes: &[String]) -> Value {
    let outcome = match &e.outcome {
        Outcome::NewNode {
            node_pool,
            instance_type,
            zone,
            capacity_type,
            price_per_hour,
            pods,
        } => json!({
            "kind": "new-node",
            "nodepool": node_pool,
            "instance_type": instance_type,
            "zone": zone,
            "capacity_type": capacity_type.to_string(),
            "price_per_hour": price_per_hour,
            "pods": pods,
        }),
        Outcome::Existing { node } => json!({"kind": "existing-node", "node": node}),
        Outcome::Unschedulable { reason } => json!({"kind": "unschedulable", "reason": reason}),
    };
    let candidates: Vec<Value> = e
        .candidates
        .iter()
        .map(|c| {
            let verdict = match &c.verdict {
                Verdict::Chosen => "chosen",
                Verdict::MoreExpensive { .. } => "more-expensive",
                Verdict::CheaperAlone { .. } => "cheaper-alone",
                Verdict::Cheaper { .. } => "cheaper",
                Verdict::Dispreferred { .. } => "dispreferred",
                Verdict::Rejected(_) => "rejected",
            };
            let mut candidate = json!({
                "nodepool": c.node_pool,
                "instance_type": c.instance_type,
                "zone": c.zone,
                "capacity_type": c.capacity_type.to_string(),
                "price_per_hour": c.price_per_hour,
                "verdict": verdict,
                "reason": c.verdict.to_string(),
            });
            // The figures the reason states, for scripts (and the tests that check them).
            match &c.verdict {
                Verdict::MoreExpensive { by_per_hour } => {
                    candidate["by_per_hour"] = json!(by_per_hour);
                }
                Verdict::CheaperAlone {
                    shared_with,
                    alone_per_hour,
                    chosen_per_hour,
                } => {
                    candidate["shared_with"] = json!(shared_with);
                    candidate["alone_per_hour"] = json!(alone_per_hour);
                    candidate["chosen_per_hour"] = json!(chosen_per_hour);
                }
                Verdict::Cheaper {
                    pods,
                    alone_per_hour,
                    chosen_per_hour,
                    ..
                } => {
                    candidate["shared_with"] = json!(pods.saturating_sub(1));
                    candidate["alone_per_hour"] = json!(alone_per_hour);
                    candidate["chosen_per_hour"] = json!(chosen_per_hour);
                }
                Verdict::Dispreferred {
                    preference,
                    cost_per_hour,
                } => {
                    candidate["preference"] = json!(preference);
                    candidate["preference_cost_per_hour"] = json!(cost_per_hour);
                }
                Verdict::Chosen | Verdict::Rejected(_) => {}
            }
            candidate
        })
        .collect();
    json!({
        "pod": e.pod.to_string(),
        "outcome": outcome,
        "candidates": candidates,
        "preferences": super::preferences::to_json(&e.preferences),
        "notes": notes,
    })
}
