//! Why a pod goes where the plan puts it: every candidate offering (NodePool × instance type ×
//! zone × capacity type) with its price and the first reason it was not the choice.
//!
//! Pure, like [`crate::solve`]: the plan is solved once and each candidate is checked against
//! the same facts the packer uses (availability, the pool's requirements and taints, the pod's
//! node selector and affinity, room after DaemonSets, the pool's limits).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use quartermaster_policies::Requirements;
use quartermaster_pricing::{CapacityType, Catalog, InstanceType, Offering};

use crate::pod::PodRef;
use crate::snapshot::{ClusterSnapshot, NodePoolSpec};
use crate::{NODEPOOL_LABEL, Plan, PreferenceDecision, PreferenceKind};

mod empty_pool;
mod reject;
mod verdict;

pub use empty_pool::empty_pool_reason;
pub use verdict::{Outcome, Rejection, Verdict};

use reject::{guard_rejections, reject};

/// One candidate offering.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// NodePool.
    pub node_pool: String,
    /// Instance type.
    pub instance_type: String,
    /// Zone.
    pub zone: String,
    /// Capacity type.
    pub capacity_type: CapacityType,
    /// Dollars per hour.
    pub price_per_hour: f64,
    /// Why it is or is not the choice.
    pub verdict: Verdict,
}

/// The answer of [`explain`].
#[derive(Debug, Clone, PartialEq)]
pub struct Explanation {
    /// The pod.
    pub pod: PodRef,
    /// Where the plan puts it.
    pub outcome: Outcome,
    /// Every offering of every NodePool's cloud: the choice first, then those that could hold
    /// the pod by price, then the rejected ones by price.
    pub candidates: Vec<Candidate>,
    /// The soft constraints of the pod's group: honoured or dropped, and what each costs.
    pub preferences: Vec<PreferenceDecision>,
}

/// Explains the plan's decision for `pod`, one of `snapshot.pending`. `None` when the snapshot
/// has no such pending pod.
pub fn explain(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    now: DateTime<Utc>,
    pod: &PodRef,
) -> Option<Explanation> {
    let subject = snapshot.pending.iter().find(|p| &p.id == pod)?;
    let plan = crate::solve_with(
        snapshot,
        catalog,
        now,
        &crate::SolveOptions {
            price_preferences: true,
            ..Default::default()
        },
    );
    let outcome = outcome(&plan, pod);
    let group = subject
        .owner
        .clone()
        .unwrap_or_else(|| format!("Pod/{}", subject.id));
    let preferences: Vec<PreferenceDecision> = plan
        .preferences
        .iter()
        .filter(|d| d.pod_group == group)
        .cloned()
        .collect();
    // Preferred node terms the plan honours for the pod, with what they cost.
    let honoured_terms: Vec<(&Requirements, &PreferenceDecision)> = subject
        .preferred_node_terms
        .iter()
        .filter_map(|t| {
            let text = t.requirements.to_string();
            preferences
                .iter()
                .find(|d| d.honoured && d.kind == PreferenceKind::NodeAffinity && d.detail == text)
                .map(|d| (&t.requirements, d))
        })
        .collect();
    let placed_by_rules = !subject.topology_spread.is_empty()
        || !subject.affinity.is_empty()
        || !subject.anti_affinity.is_empty();
    let mut candidates = Vec::new();
    for pool in &snapshot.node_pools {
        let offerings: Vec<(&InstanceType, &Offering)> = catalog
            .for_cloud(pool.cloud)
            .flat_map(|it| it.offerings.iter().map(move |o| (it, o)))
            .collect();
        let mut rejections: Vec<Option<Rejection>> = offerings
            .iter()
            .map(|(it, o)| reject(snapshot, pool, it, o, subject).err())
            .collect();
        guard_rejections(
            snapshot,
            pool,
            &offerings,
            subject,
            &outcome,
            &mut rejections,
        );
        for ((it, o), rejection) in offerings.into_iter().zip(rejections) {
            {
                let verdict = match (rejection, &outcome) {
                    (Some(r), _) => Verdict::Rejected(r),
                    (None, Outcome::NewNode { .. }) if is_choice(&outcome, pool, it, o) => {
                        Verdict::Chosen
                    }
                    (
                        None,
                        Outcome::NewNode {
                            price_per_hour,
                            pods,
                            ..
                        },
                    ) if o.price_per_hour < *price_per_hour => cheaper_verdict(
                        &node_labels(pool, it, o),
                        &honoured_terms,
                        o.price_per_hour,
                        *price_per_hour,
                        *pods,
                        placed_by_rules,
                    ),
                    (
                        None,
                        Outcome::NewNode {
                            price_per_hour: chosen,
                            ..
                        },
                    ) => Verdict::MoreExpensive {
                        by_per_hour: o.price_per_hour - chosen,
                    },
                    (None, _) => Verdict::MoreExpensive {
                        by_per_hour: o.price_per_hour,
                    },
                };
                candidates.push(Candidate {
                    node_pool: pool.name.clone(),
                    instance_type: it.name.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type,
                    price_per_hour: o.price_per_hour,
                    verdict,
                });
            }
        }
    }
    let rank = |v: &Verdict| match v {
        Verdict::Chosen => 0,
        Verdict::CheaperAlone { .. }
        | Verdict::Cheaper { .. }
        | Verdict::Dispreferred { .. }
        | Verdict::MoreExpensive { .. } => 1,
        Verdict::Rejected(_) => 2,
    };
    candidates.sort_by(|a, b| {
        rank(&a.verdict)
            .cmp(&rank(&b.verdict))
            .then(a.price_per_hour.total_cmp(&b.price_per_hour))
            .then_with(|| a.node_pool.cmp(&b.node_pool))
            .then_with(|| a.instance_type.cmp(&b.instance_type))
            .then_with(|| a.zone.cmp(&b.zone))
    });
    Some(Explanation {
        pod: pod.clone(),
        outcome,
        candidates,
        preferences,
    })
}

/// The verdict on an offering that could hold the pod and is cheaper than the chosen node.
fn cheaper_verdict(
    labels: &BTreeMap<String, String>,
    honoured_terms: &[(&Requirements, &PreferenceDecision)],
    price: f64,
    chosen_per_hour: f64,
    pods: usize,
    placed_by_rules: bool,
) -> Verdict {
    if let Some((_, d)) = honoured_terms.iter().find(|(t, _)| !t.matches(labels)) {
        return Verdict::Dispreferred {
            preference: d.detail.clone(),
            cost_per_hour: d.cost_per_hour,
        };
    }
    let pods = pods.max(1);
    let alone_per_hour = price * pods as f64;
    if alone_per_hour >= chosen_per_hour {
        Verdict::CheaperAlone {
            shared_with: pods - 1,
            alone_per_hour,
            chosen_per_hour,
        }
    } else {
        Verdict::Cheaper {
            pods,
            alone_per_hour,
            chosen_per_hour,
            placed_by_rules,
        }
    }
}

/// The labels a node of offering `o` in `pool` would carry.
fn node_labels(pool: &NodePoolSpec, it: &InstanceType, o: &Offering) -> BTreeMap<String, String> {
    let mut labels = it.offering_labels(o);
    labels.extend(pool.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    labels.insert(NODEPOOL_LABEL.to_owned(), pool.name.clone());
    labels
}

/// The most frequent rejection reasons among the candidates (by [`Rejection::summary`]), for an
/// `Unschedulable` event:
/// `"12 × taint nvidia.com/gpu:NoSchedule not tolerated; 3 × …"`, at most `top` of them.
pub fn top_reasons(explanation: &Explanation, top: usize) -> String {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for c in &explanation.candidates {
        if let Verdict::Rejected(r) = &c.verdict {
            *counts.entry(r.summary()).or_default() += 1;
        }
    }
    let mut ranked: Vec<(String, usize)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    ranked
        .into_iter()
        .take(top)
        .map(|(r, n)| format!("{n} × {r}"))
        .collect::<Vec<_>>()
        .join("; ")
}

fn outcome(plan: &Plan, pod: &PodRef) -> Outcome {
    if let Some(n) = plan.new_nodes.iter().find(|n| n.pods.contains(pod)) {
        return Outcome::NewNode {
            node_pool: n.node_pool.clone(),
            instance_type: n.offering.instance_type.clone(),
            zone: n.offering.zone.clone(),
            capacity_type: n.offering.capacity_type,
            price_per_hour: n.offering.price_per_hour,
            pods: n.pods.len(),
        };
    }
    if let Some(e) = plan.existing.iter().find(|e| e.pods.contains(pod)) {
        return Outcome::Existing {
            node: e.node.clone(),
        };
    }
    let reason = plan
        .unschedulable
        .iter()
        .find(|u| &u.pod == pod)
        .map(|u| u.reason.clone())
        .unwrap_or_default();
    Outcome::Unschedulable { reason }
}

fn is_choice(outcome: &Outcome, pool: &NodePoolSpec, it: &InstanceType, o: &Offering) -> bool {
    matches!(outcome, Outcome::NewNode { node_pool, instance_type, zone, capacity_type, .. }
        if *node_pool == pool.name && *instance_type == it.name && *zone == o.zone
            && *capacity_type == o.capacity_type)
}
