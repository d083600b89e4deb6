//! `explain pod`: why the pod did or did not use each reservation.
//!
//! Checked in this order, the first that applies is the answer: the pod is on one of its free
//! slots (`used`); no NodePool's NodeClass selects it (`not-selected`); the selecting pool's
//! requirements exclude it, capacity type `reserved` or its type or zone (`pool-excludes`); it
//! takes no launches now (`not-open`, `draining`); a node of it cannot hold the pod: resources,
//! node selector / affinity, taints (`does-not-fit`); its free slots are taken, by the input's
//! Nodes or by other pods of the plan, or the pool's limits leave none (`full`); otherwise a
//! free slot would hold it but the plan placed it elsewhere (`not-chosen`).

use quartermaster_engine::ReservationOffer;
use quartermaster_pricing::Catalog;
use quartermaster_solver::explain::{Explanation, Outcome};
use quartermaster_solver::pod::tolerates_all;
use quartermaster_solver::{ClusterSnapshot, Pod, PodRef};
use serde_json::{Value, json};

use super::{PoolFor, Reserved, Window, first_failure, time};

/// The answer for one reservation.
#[derive(Debug, Clone, PartialEq)]
pub struct ReservationVerdict {
    /// The reservation.
    pub id: String,
    /// `default` or `capacity-block`.
    pub kind: &'static str,
    /// Instance type.
    pub instance_type: String,
    /// Zone.
    pub zone: String,
    /// `used`, `not-selected`, `pool-excludes`, `not-open`, `draining`, `does-not-fit`,
    /// `full` or `not-chosen`.
    pub verdict: &'static str,
    /// The reason, with its figures.
    pub reason: String,
}

/// Each reservation's verdict for `pod`, given the plan `explanation` describes (solved on
/// `snapshot`, which holds the stand-ins).
pub fn verdicts(
    reserved: &Reserved,
    explanation: &Explanation,
    pod: &Pod,
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    plan_existing: &[quartermaster_solver::ExistingPlacement],
) -> Vec<ReservationVerdict> {
    let on = match &explanation.outcome {
        Outcome::Existing { node } => reserved
            .stand_in(node)
            .map(|(o, _)| o.reservation.id.clone()),
        _ => None,
    };
    reserved
        .offers
        .iter()
        .map(|offer| {
            let r = &offer.reservation;
            let (verdict, reason) = if on.as_deref() == Some(r.id.as_str()) {
                (
                    "used",
                    format!(
                        "the pod is on one of its free slots ({} {} in {}), at no added cost",
                        r.kind.as_str(),
                        r.instance_type,
                        r.zone
                    ),
                )
            } else {
                why_not(reserved, offer, pod, snapshot, catalog, plan_existing)
            };
            ReservationVerdict {
                id: r.id.clone(),
                kind: r.kind.as_str(),
                instance_type: r.instance_type.clone(),
                zone: r.zone.clone(),
                verdict,
                reason,
            }
        })
        .collect()
}

fn why_not(
    reserved: &Reserved,
    offer: &ReservationOffer,
    pod: &Pod,
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    plan_existing: &[quartermaster_solver::ExistingPlacement],
) -> (&'static str, String) {
    let r = &offer.reservation;
    let pool = match reserved.pool_for(offer, snapshot, catalog) {
        PoolFor::NotSelected => {
            return (
                "not-selected",
                "no NodePool's NodeClass selects it (capacityReservationSelectorTerms by id or tags)"
                    .to_owned(),
            );
        }
        PoolFor::Excluded { pool, detail } => {
            return (
                "pool-excludes",
                format!("NodePool {pool}'s requirements exclude it: {detail}"),
            );
        }
        PoolFor::Pool(pool) => pool,
    };
    let pool_name = &reserved.pools[pool].name;
    match Window::of(r, reserved.now) {
        Window::NotOpen(start) => {
            return (
                "not-open",
                format!("not open yet: it opens {}", time(start)),
            );
        }
        Window::Draining { drain_at, end } => {
            return (
                "draining",
                format!(
                    "it takes no launches from {} (its nodes are drained before it ends {})",
                    time(drain_at),
                    time(end)
                ),
            );
        }
        Window::Open => {}
    }
    if let Some(why) = misfit(reserved, offer, pool, pod, snapshot, catalog) {
        return (
            "does-not-fit",
            format!(
                "a {} in {} of NodePool {pool_name} cannot hold the pod: {why}",
                r.instance_type, r.zone
            ),
        );
    }
    let free = reserved.free(offer);
    let offered = reserved.offered(offer);
    if free == 0 {
        return (
            "full",
            format!(
                "full: all {} slot(s) are taken by Nodes of the input or others (none free)",
                r.count
            ),
        );
    }
    if offered == 0 {
        return (
            "full",
            format!("NodePool {pool_name}'s limits leave none of its {free} free slot(s)"),
        );
    }
    let slots: Vec<&str> = reserved
        .stand_ins
        .iter()
        .filter(|(_, id, _)| *id == r.id)
        .map(|(name, _, _)| name.as_str())
        .collect();
    let others: Vec<&PodRef> = plan_existing
        .iter()
        .filter(|e| slots.contains(&e.node.as_str()))
        .flat_map(|e| e.pods.iter())
        .collect();
    let filled = plan_existing
        .iter()
        .filter(|e| slots.contains(&e.node.as_str()) && !e.pods.is_empty())
        .count();
    if filled >= slots.len() {
        let names: Vec<String> = others.iter().take(4).map(ToString::to_string).collect();
        let more = others.len().saturating_sub(4);
        return (
            "full",
            format!(
                "full: its {} free slot(s) hold other pods of this plan ({}{})",
                slots.len(),
                names.join(", "),
                if more > 0 {
                    format!(", +{more} more")
                } else {
                    String::new()
                }
            ),
        );
    }
    (
        "not-chosen",
        format!(
            "{} of its {} free slot(s) stay empty and would hold the pod, but the plan places it elsewhere (its spread, affinity or gang)",
            slots.len() - filled,
            slots.len()
        ),
    )
}

/// Why a node of the reservation in `pool` cannot hold `pod`, if it cannot: resources, node
/// selector / affinity, taints (the packer's order).
fn misfit(
    reserved: &Reserved,
    offer: &ReservationOffer,
    pool: usize,
    pod: &Pod,
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
) -> Option<String> {
    let Some((labels, _, room)) = reserved.shape_in(offer, pool, snapshot, catalog) else {
        return Some("the catalog has no such offering".to_owned());
    };
    let table = &snapshot.resources;
    if let Some(slot) = pod.requests.first_excess(&room) {
        return Some(format!(
            "{}: requests {}, a node has {} for pods",
            table.name(slot),
            table.format(slot, pod.requests.get(slot)),
            table.format(slot, room.get(slot))
        ));
    }
    if !pod.node_terms.is_empty() && !pod.node_terms.iter().any(|t| t.matches(&labels)) {
        let detail = pod
            .node_terms
            .iter()
            .find_map(|t| first_failure(t, &labels))
            .unwrap_or_default();
        return Some(format!("node selector / affinity: {detail}"));
    }
    if let Err(taint) = tolerates_all(&pod.tolerations, &reserved.pools[pool].taints) {
        return Some(format!("taint {taint} not tolerated"));
    }
    None
}

/// `explain -o json`'s `reservations`.
pub fn to_json(verdicts: &[ReservationVerdict]) -> Value {
    verdicts
        .iter()
        .map(|v| {
            json!({
                "id": v.id,
                "type": v.kind,
                "instance_type": v.instance_type,
                "zone": v.zone,
                "verdict": v.verdict,
                "reason": v.reason,
            })
        })
        .collect()
}
