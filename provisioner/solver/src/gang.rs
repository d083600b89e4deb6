//! Gangs: pods that must be placed together, in one zone, or not at all.
//!
//! Distributed training needs all its workers or none: buying three of four eight-GPU nodes burns
//! money while the job waits. Each gang (in name order) is tried in every zone its pods may use,
//! restricted to that zone, and kept in the cheapest zone where at least `minMember` of its
//! members (counting members already running) are placed; when no zone holds that many, none of
//! its pending members is placed and each is told why. Other pods are packed as usual around
//! the gangs' fixed zones. The packer itself knows nothing of gangs: this wraps it, so the
//! engine, `plan` and `simulate` get the same behaviour through [`crate::solve`].

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use quartermaster_policies::{Requirement, Requirements};
use quartermaster_pricing::Catalog;

use crate::pod::{Gang, PodRef, ZONE};
use crate::snapshot::ClusterSnapshot;
use crate::{NODEPOOL_LABEL, Plan, SolveOptions, Unschedulable};

/// [`crate::solve_with`] with gangs placed whole or not at all.
pub(crate) fn solve(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    now: DateTime<Utc>,
    options: &SolveOptions,
) -> Plan {
    let mut gangs: BTreeMap<Gang, Vec<usize>> = BTreeMap::new();
    for (i, p) in snapshot.pending.iter().enumerate() {
        if let Some(g) = &p.gang {
            gangs.entry(g.clone()).or_default().push(i);
        }
    }
    if gangs.is_empty() {
        return crate::pack::solve(snapshot, catalog, now, options);
    }
    let mut working = snapshot.clone();
    let mut refused: Vec<PodRef> = Vec::new();
    let mut reasons: Vec<Unschedulable> = Vec::new();
    // Gangs kept in a zone, with their members and how many of them must be placed.
    let mut kept: Vec<(&Gang, BTreeSet<PodRef>, usize)> = Vec::new();
    for (gang, members) in &gangs {
        let ids: BTreeSet<PodRef> = members
            .iter()
            .map(|&i| snapshot.pending[i].id.clone())
            .collect();
        // Members already running, with their nodes' zones.
        let running: Vec<&str> = working
            .nodes
            .iter()
            .flat_map(|n| {
                let zone = n.labels.get(ZONE).map_or("", String::as_str);
                n.pods
                    .iter()
                    .filter(|p| p.gang.as_ref().is_some_and(|g| g.name == gang.name))
                    .map(move |_| zone)
            })
            .collect();
        let need = (gang.min_member as usize).saturating_sub(running.len());
        // Members already running fix the zone; otherwise every zone a pool may buy in.
        let zones: Vec<String> = match running.iter().find(|z| !z.is_empty()) {
            Some(z) => vec![(*z).to_owned()],
            None => candidate_zones(&working, catalog),
        };
        if need == 0 {
            // Enough members run already: the rest join them in their zone, as they fit.
            if let Some(zone) = zones.first() {
                working = restricted(&working, &ids, zone);
            }
            continue;
        }
        let mut best: Option<(f64, String)> = None;
        let mut most: Option<(usize, String, Option<String>)> = None;
        for zone in &zones {
            let trial = restricted(&working, &ids, zone);
            let plan = crate::pack::solve(&trial, catalog, now, options);
            let placed = placed_members(&plan, &ids);
            if placed >= need {
                if best.as_ref().is_none_or(|(c, _)| plan.cost_per_hour < *c) {
                    best = Some((plan.cost_per_hour, zone.clone()));
                }
            } else if most.as_ref().is_none_or(|(m, _, _)| placed > *m) {
                let why = plan
                    .unschedulable
                    .iter()
                    .find(|u| ids.contains(&u.pod))
                    .map(|u| u.reason.clone());
                most = Some((placed, zone.clone(), why));
            }
        }
        match best {
            Some((_, zone)) => {
                working = restricted(&working, &ids, &zone);
                kept.push((gang, ids, need));
            }
            None => {
                let (placed, zone, why) = most.unwrap_or_default();
                let reason = format!(
                    "gang {} (minMember {}): {} member(s) must be placed together in one zone, at most {placed} fit{}{}",
                    gang.name,
                    gang.min_member,
                    need,
                    if zone.is_empty() {
                        String::new()
                    } else {
                        format!(" (in {zone})")
                    },
                    why.map(|w| format!("; the others: {w}"))
                        .unwrap_or_default()
                );
                for id in &ids {
                    reasons.push(Unschedulable {
                        pod: id.clone(),
                        reason: reason.clone(),
                    });
                }
                refused.extend(ids.iter().cloned());
                working.pending.retain(|p| !ids.contains(&p.id));
            }
        }
    }
    // A gang placed whole in its zone on its own may not be beside everyone else (the pods
    // packed around it took a NodePool's last room): such a gang is placed not at all, and the
    // rest solved again, until every gang left is whole.
    let mut plan = crate::pack::solve(&working, catalog, now, options);
    loop {
        let mut broken = false;
        kept.retain(|(gang, ids, need)| {
            let placed = placed_members(&plan, ids);
            if placed >= *need {
                return true;
            }
            let why = plan
                .unschedulable
                .iter()
                .find(|u| ids.contains(&u.pod))
                .map(|u| format!("; the others: {}", u.reason))
                .unwrap_or_default();
            let reason = format!(
                "gang {} (minMember {}): {need} member(s) must be placed together in one zone, \
                 only {placed} fit beside the other pods{why}",
                gang.name, gang.min_member
            );
            for id in ids {
                reasons.push(Unschedulable {
                    pod: id.clone(),
                    reason: reason.clone(),
                });
            }
            refused.extend(ids.iter().cloned());
            working.pending.retain(|p| !ids.contains(&p.id));
            broken = true;
            false
        });
        if !broken {
            break;
        }
        plan = crate::pack::solve(&working, catalog, now, options);
    }
    plan.unschedulable.retain(|u| !refused.contains(&u.pod));
    plan.unschedulable.extend(reasons);
    plan
}

/// How many of `ids` the plan places (on new or existing nodes).
fn placed_members(plan: &Plan, ids: &BTreeSet<PodRef>) -> usize {
    plan.new_nodes
        .iter()
        .flat_map(|n| &n.pods)
        .chain(plan.existing.iter().flat_map(|e| &e.pods))
        .filter(|p| ids.contains(p))
        .count()
}

/// `snapshot` with the pods `ids` allowed only in `zone`.
fn restricted(snapshot: &ClusterSnapshot, ids: &BTreeSet<PodRef>, zone: &str) -> ClusterSnapshot {
    let mut only = Requirements::new();
    only.add(Requirement::in_values(ZONE, [zone]));
    let mut out = snapshot.clone();
    for p in out.pending.iter_mut().filter(|p| ids.contains(&p.id)) {
        if p.node_terms.is_empty() {
            p.node_terms.push(only.clone());
        } else {
            for t in &mut p.node_terms {
                *t = t.intersect(&only);
            }
        }
    }
    out
}

/// Every zone some NodePool may buy in (an offering whose labels its requirements allow), and
/// the zones of existing nodes, in name order.
fn candidate_zones(snapshot: &ClusterSnapshot, catalog: &Catalog) -> Vec<String> {
    let mut zones: BTreeSet<String> = snapshot
        .nodes
        .iter()
        .filter_map(|n| n.labels.get(ZONE).cloned())
        .collect();
    for pool in &snapshot.node_pools {
        for it in catalog.for_cloud(pool.cloud) {
            for o in it.offerings.iter().filter(|o| o.available) {
                if zones.contains(&o.zone) {
                    continue;
                }
                let mut labels = it.offering_labels(o);
                labels.extend(pool.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
                labels.insert(NODEPOOL_LABEL.to_owned(), pool.name.clone());
                if pool.requirements.matches(&labels) {
                    zones.insert(o.zone.clone());
                }
            }
        }
    }
    zones.into_iter().collect()
}
