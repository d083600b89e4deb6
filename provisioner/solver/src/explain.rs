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

use crate::pack::shapes::{daemonset_overhead, to_resources};
use crate::pod::{Pod, PodRef, tolerates_all};
use crate::snapshot::{ClusterSnapshot, NodePoolSpec, OfferingKey};
use crate::{NODEPOOL_LABEL, Plan, PreferenceDecision, PreferenceKind};

/// Where the plan puts the pod.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// On a node to buy.
    NewNode {
        /// Its NodePool.
        node_pool: String,
        /// Instance type.
        instance_type: String,
        /// Zone.
        zone: String,
        /// Capacity type.
        capacity_type: CapacityType,
        /// Dollars per hour.
        price_per_hour: f64,
        /// How many pods the node holds, this one included.
        pods: usize,
    },
    /// On a node that exists or is already launching, at no added cost.
    Existing {
        /// Node (or NodeClaim) name.
        node: String,
    },
    /// Nowhere.
    Unschedulable {
        /// The solver's reason.
        reason: String,
    },
}

/// Why a candidate offering is not the choice.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The plan's choice.
    Chosen,
    /// It could hold the pod, and costs this much more per hour than the choice.
    MoreExpensive {
        /// Dollars per hour above the choice.
        by_per_hour: f64,
    },
    /// It could hold the pod and is cheaper alone, but the plan shares the chosen node with
    /// other pods, and one of these for each pod of the chosen node costs more than the chosen
    /// node: `alone_per_hour ≥ chosen_per_hour`.
    CheaperAlone {
        /// Pods that share the chosen node.
        shared_with: usize,
        /// One of these for each pod of the chosen node (`(shared_with + 1) × price`).
        alone_per_hour: f64,
        /// The chosen node's price.
        chosen_per_hour: f64,
    },
    /// It could hold the pod and is cheaper, but it does not satisfy a preferred node-affinity
    /// term the plan honours for the pod's group (see `plan`'s preferences).
    Dispreferred {
        /// The preference, e.g. `quartermaster.dev/capacity-type In [spot]`.
        preference: String,
        /// What honouring it costs the plan, when measured.
        cost_per_hour: Option<f64>,
    },
    /// It could hold the pod and is cheaper even as one node for each pod of the chosen node
    /// (`alone_per_hour < chosen_per_hour`): the plan keeps its choice for the pod's topology
    /// spread or pod affinity, or its packing heuristic did not find this one (the plan's gap
    /// to its lower bound says how far from optimal it may be).
    Cheaper {
        /// Pods on the chosen node, this one included.
        pods: usize,
        /// One of these for each of them.
        alone_per_hour: f64,
        /// The chosen node's price.
        chosen_per_hour: f64,
        /// True when the pod has topology spread or pod (anti-)affinity rules in force.
        placed_by_rules: bool,
    },
    /// It cannot hold the pod.
    Rejected(Rejection),
}

/// What rules a candidate out.
#[derive(Debug, Clone, PartialEq)]
pub enum Rejection {
    /// The offering is marked unavailable (a recent insufficient-capacity error) or not offered.
    Unavailable {
        /// Which of the two.
        detail: String,
    },
    /// The NodePool's requirements exclude it.
    PoolRequirement {
        /// The requirement, and what the node would carry.
        detail: String,
    },
    /// The pod does not tolerate one of the pool's taints.
    Taint {
        /// The taint.
        taint: String,
    },
    /// The pod's node selector / required node affinity does not match the node's labels.
    NodeSelector {
        /// The first requirement that fails, and what the node would carry.
        detail: String,
    },
    /// Too little of one resource.
    Resources {
        /// Resource name.
        resource: String,
        /// What the pod requests.
        requested: String,
        /// What a node of this type has for pods (allocatable minus DaemonSets).
        available: String,
    },
    /// A NodePool limit (`limits`, `limits.nodes`, `maxHourlyCost`) would be exceeded.
    Limit {
        /// Which limit, and by what.
        detail: String,
    },
    /// The NodePool's `maxGpuOvershoot`: the node has too many more accelerators than the pod
    /// occupies, and a node within the bound is cheaper per accelerator (or none holds it).
    Overshoot {
        /// Accelerators of the node.
        gpus: i64,
        /// Accelerators the pod occupies.
        requested: i64,
        /// The pool's `maxGpuOvershoot`.
        max: u32,
    },
    /// The NodePool's `minValues`: too few distinct values of a key among the offerings that
    /// could hold the pod.
    MinValues {
        /// The requirement and how many values it has.
        detail: String,
    },
}

impl std::fmt::Display for Rejection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Unavailable { detail } => write!(f, "unavailable: {detail}"),
            Self::PoolRequirement { detail } => write!(f, "NodePool requirement: {detail}"),
            Self::Taint { taint } => write!(f, "taint {taint} not tolerated"),
            Self::NodeSelector { detail } => write!(f, "node selector / affinity: {detail}"),
            Self::Resources {
                resource,
                requested,
                available,
            } => write!(
                f,
                "{resource}: requests {requested}, a node has {available} for pods"
            ),
            Self::Limit { detail } => write!(f, "NodePool limit: {detail}"),
            Self::Overshoot {
                gpus,
                requested,
                max,
            } => crate::pack::guard::Overshoot {
                gpus: *gpus,
                requested: *requested,
                max: *max,
            }
            .fmt(f),
            Self::MinValues { detail } => f.write_str(detail),
        }
    }
}

impl Rejection {
    /// The reason without what differs from one candidate to the next (the value the node
    /// would carry, how much a given type has), so candidates ruled out alike count together.
    pub fn summary(&self) -> String {
        let cut = |detail: &str| {
            detail
                .split(" (the node would")
                .next()
                .unwrap_or(detail)
                .to_owned()
        };
        match self {
            Self::PoolRequirement { detail } => format!("NodePool requirement: {}", cut(detail)),
            Self::NodeSelector { detail } => format!("node selector / affinity: {}", cut(detail)),
            Self::Resources {
                resource,
                requested,
                ..
            } => format!("{resource}: requests {requested}, more than a node has for pods"),
            Self::Overshoot { requested, max, .. } => format!(
                "overshoot: more than {max} GPUs beyond the {requested} requested, maxGpuOvershoot {max}"
            ),
            other => other.to_string(),
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Chosen => f.write_str("chosen"),
            Self::MoreExpensive { by_per_hour } => {
                write!(
                    f,
                    "more expensive than the choice by ${by_per_hour:.4}/hour"
                )
            }
            Self::CheaperAlone {
                shared_with,
                alone_per_hour,
                chosen_per_hour,
            } => write!(
                f,
                "cheaper alone, but the choice holds {shared_with} other pod(s) too: {} of these would cost ${alone_per_hour:.4}/hour, the choice ${chosen_per_hour:.4}/hour",
                shared_with + 1
            ),
            Self::Dispreferred {
                preference,
                cost_per_hour,
            } => {
                write!(
                    f,
                    "cheaper, but not {preference}, a preference the plan honours"
                )?;
                match cost_per_hour {
                    Some(c) => write!(f, " (for ${c:.4}/hour)"),
                    None => Ok(()),
                }
            }
            Self::Cheaper {
                pods,
                alone_per_hour,
                chosen_per_hour,
                placed_by_rules,
            } => {
                if *pods > 1 {
                    write!(
                        f,
                        "cheaper, even one for each of the choice's {pods} pods (${alone_per_hour:.4}/hour against ${chosen_per_hour:.4}/hour): "
                    )?;
                } else {
                    write!(
                        f,
                        "cheaper than the choice by ${:.4}/hour: ",
                        chosen_per_hour - alone_per_hour
                    )?;
                }
                f.write_str(if *placed_by_rules {
                    "the pod's topology spread or pod affinity keep it on the choice"
                } else {
                    "the packer's heuristic kept the choice (see the plan's gap to its lower bound)"
                })
            }
            Self::Rejected(r) => r.fmt(f),
        }
    }
}

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

/// The first reason a node of this offering in this pool cannot hold `pod`, checked in the
/// packer's order.
fn reject(
    snapshot: &ClusterSnapshot,
    pool: &NodePoolSpec,
    it: &InstanceType,
    o: &Offering,
    pod: &Pod,
) -> Result<(), Rejection> {
    let key = OfferingKey {
        cloud: it.cloud,
        instance_type: it.name.clone(),
        zone: o.zone.clone(),
        capacity_type: o.capacity_type,
    };
    if !o.available {
        return Err(Rejection::Unavailable {
            detail: "the catalog marks it not offered".into(),
        });
    }
    if snapshot.unavailable.contains(&key) {
        return Err(Rejection::Unavailable {
            detail: "insufficient capacity recently; avoided for a while".into(),
        });
    }
    if o.capacity_type == CapacityType::FlexStart && !crate::flex_start::opts_in(pool) {
        return Err(Rejection::PoolRequirement {
            detail: "flex-start is opt-in: its requirements do not name capacity type \
                     flex-start with In"
                .into(),
        });
    }
    let labels = node_labels(pool, it, o);
    if let Some(detail) = first_failure(&pool.requirements, &labels) {
        return Err(Rejection::PoolRequirement { detail });
    }
    if let Err(taint) = tolerates_all(&pod.tolerations, &pool.taints) {
        return Err(Rejection::Taint {
            taint: taint.to_string(),
        });
    }
    if !pod.node_terms.is_empty() && !pod.node_terms.iter().any(|t| t.matches(&labels)) {
        let detail = pod
            .node_terms
            .iter()
            .find_map(|t| first_failure(t, &labels))
            .unwrap_or_default();
        return Err(Rejection::NodeSelector { detail });
    }
    let table = &snapshot.resources;
    let overhead = daemonset_overhead(&snapshot.daemonsets, &labels, pool);
    // A pool that leaves the MIG layout to the solver: the first layout that holds the pod
    // (else the first), as the packer may choose any.
    let layout: Option<&str> = pool.node_shape.auto_mig_layouts(it).and_then(|names| {
        names
            .iter()
            .copied()
            .find(|l| {
                pool.node_shape
                    .allocatable_in_layout(it, Some(l))
                    .is_some_and(|a| {
                        pod.requests
                            .fits_in(&to_resources(table, &a).saturating_sub(&overhead))
                    })
            })
            .or_else(|| names.first().copied())
    });
    let Some(allocatable) = pool.node_shape.allocatable_in_layout(it, layout) else {
        return Err(Rejection::PoolRequirement {
            detail: format!(
                "its GPU sharing does not apply to {} (no GPU, or no such MIG layout)",
                it.name
            ),
        });
    };
    let room = to_resources(table, &allocatable).saturating_sub(&overhead);
    if let Some(slot) = pod.requests.first_excess(&room) {
        return Err(Rejection::Resources {
            resource: table.name(slot).to_owned(),
            requested: table.format(slot, pod.requests.get(slot)),
            available: table.format(slot, room.get(slot)),
        });
    }
    let capacity = to_resources(
        table,
        &pool
            .node_shape
            .capacity_in_layout(it, layout)
            .unwrap_or_default(),
    );
    if let Some(limit) = pool.limits.nodes
        && pool.usage.nodes + 1 > limit
    {
        return Err(Rejection::Limit {
            detail: format!("nodes={limit} reached ({} in use)", pool.usage.nodes),
        });
    }
    for slot in 0..table.len() {
        let limit = pool.limits.resources.get(slot);
        if limit == i64::MAX {
            continue;
        }
        let after = pool
            .usage
            .resources
            .get(slot)
            .saturating_add(capacity.get(slot));
        if after > limit {
            return Err(Rejection::Limit {
                detail: format!(
                    "{}={} would be exceeded ({} in use, this node adds {})",
                    table.name(slot),
                    table.format(slot, limit),
                    table.format(slot, pool.usage.resources.get(slot)),
                    table.format(slot, capacity.get(slot)),
                ),
            });
        }
    }
    if let Some(max) = pool.limits.max_hourly_cost
        && pool.usage.hourly_cost + o.price_per_hour > max
    {
        return Err(Rejection::Limit {
            detail: format!(
                "maxHourlyCost ${max:.2} would be exceeded (${:.4} in use, this node adds ${:.4})",
                pool.usage.hourly_cost, o.price_per_hour
            ),
        });
    }
    Ok(())
}

/// The first requirement of `reqs` the labels fail, with the label's value on the node.
fn first_failure(reqs: &Requirements, labels: &BTreeMap<String, String>) -> Option<String> {
    reqs.iter().find_map(|r| {
        let value = labels.get(r.key()).map(String::as_str);
        (!r.matches(value)).then(|| match value {
            Some(v) => format!("{} {r} (the node would have {}={v})", r.key(), r.key()),
            None => format!("{} {r} (the node would not carry {})", r.key(), r.key()),
        })
    })
}

/// What the catalog does not model, when a requirement asks for it.
fn catalog_gap(r: &quartermaster_policies::Requirement) -> &'static str {
    let asks = |v: &str| r.values().is_some_and(|vs| vs.contains(v));
    match r.key() {
        "kubernetes.io/os" if asks("windows") => " (the catalog prices Linux nodes only)",
        quartermaster_pricing::labels::CAPACITY_TYPE if asks("reserved") => {
            " (capacity reservations are not in the catalog)"
        }
        _ => "",
    }
}

/// Why a NodePool has no instance type at all, for the plan's note: the requirements that each
/// rule out every offering the others allow (`karpenter.sh/capacity-type In [spot]` when the
/// catalog has no spot offering of the types the other requirements pick), or, when no single
/// one does, the requirements in order up to the one that leaves nothing.
pub fn empty_pool_reason(pool: &NodePoolSpec, catalog: &Catalog) -> String {
    let offerings: Vec<BTreeMap<String, String>> = catalog
        .for_cloud(pool.cloud)
        .flat_map(|it| {
            it.offerings.iter().filter(|o| o.available).map(move |o| {
                let mut labels = it.offering_labels(o);
                labels.extend(pool.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
                labels.insert(NODEPOOL_LABEL.to_owned(), pool.name.clone());
                labels
            })
        })
        .collect();
    if offerings.is_empty() {
        return format!("the catalog has no {} offering", pool.cloud);
    }
    if let Some(sharing) = &pool.node_shape.gpu_sharing {
        let allowed: Vec<&InstanceType> = catalog
            .for_cloud(pool.cloud)
            .filter(|it| {
                it.offerings.iter().filter(|o| o.available).any(|o| {
                    let mut labels = it.offering_labels(o);
                    labels.extend(pool.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
                    labels.insert(NODEPOOL_LABEL.to_owned(), pool.name.clone());
                    pool.requirements.matches(&labels)
                })
            })
            .collect();
        if !allowed.is_empty() {
            let why: Vec<String> = allowed
                .iter()
                .filter_map(|it| it.shared_capacity(sharing).err())
                .take(3)
                .map(|e| e.to_string())
                .collect();
            return format!(
                "its gpuSharing applies to none of the {} instance type(s) its requirements allow ({}{})",
                allowed.len(),
                why.join("; "),
                if allowed.len() > 3 { "; ..." } else { "" }
            );
        }
    }
    let reqs: Vec<_> = pool.requirements.iter().collect();
    let holds = |r: &quartermaster_policies::Requirement, l: &BTreeMap<String, String>| {
        r.matches(l.get(r.key()).map(String::as_str))
    };
    let mut blocking = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        let others = offerings
            .iter()
            .filter(|l| reqs.iter().enumerate().all(|(j, o)| j == i || holds(o, l)))
            .count();
        if others > 0 {
            blocking.push(format!(
                "{} {r} rules out all {others} offering(s) the other requirements allow{}",
                r.key(),
                catalog_gap(r)
            ));
        }
    }
    if !blocking.is_empty() {
        return blocking.join("; ");
    }
    let mut left = offerings.len();
    let mut steps = Vec::new();
    let mut remaining: Vec<&BTreeMap<String, String>> = offerings.iter().collect();
    for r in &reqs {
        remaining.retain(|l| holds(r, l));
        steps.push(format!(
            "{} {r} ({} of {left} left)",
            r.key(),
            remaining.len()
        ));
        left = remaining.len();
        if left == 0 {
            break;
        }
    }
    format!("together: {}", steps.join(", "))
}

/// The NodePool's guards for the pod alone, over the offerings `reject` left open: an offering
/// with more accelerators than the pod occupies by more than `maxGpuOvershoot` is ruled out
/// unless it is no dearer per accelerator than the cheapest open offering within the bound;
/// when the open offerings left have fewer distinct values of a `minValues` key than required,
/// all of them are ruled out. The plan's choice is never ruled out here (it holds more pods).
fn guard_rejections(
    snapshot: &ClusterSnapshot,
    pool: &NodePoolSpec,
    offerings: &[(&InstanceType, &Offering)],
    pod: &Pod,
    outcome: &Outcome,
    rejections: &mut [Option<Rejection>],
) {
    use crate::pack::guard;
    let table = &snapshot.resources;
    if let Some(max) = pool.limits.max_gpu_overshoot {
        let over: Vec<Option<(i64, i64, f64)>> = offerings
            .iter()
            .zip(rejections.iter())
            .map(|((it, o), r)| {
                if r.is_some() {
                    return None;
                }
                let capacity = to_resources(table, &pool.node_shape.capacity(it)?);
                let devices = i64::from(it.accelerator_count());
                let slots = guard::accelerator_slots(table, &capacity);
                let used = guard::devices_used(devices, &slots, &pod.requests);
                let per_device = if devices == 0 {
                    f64::INFINITY
                } else {
                    o.price_per_hour / devices as f64
                };
                Some((devices, used, per_device))
            })
            .collect();
        let cheapest_within = offerings
            .iter()
            .zip(&over)
            .filter_map(|((_, o), x)| {
                x.filter(|&(d, u, _)| d - u <= i64::from(max))
                    .map(|(_, _, per)| (o.price_per_hour, per))
            })
            .min_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(_, per)| per);
        for (i, x) in over.iter().enumerate() {
            let Some((devices, used, per)) = *x else {
                continue;
            };
            let (it, o) = offerings[i];
            if devices - used > i64::from(max)
                && cheapest_within.is_none_or(|c| per > c + 1e-9)
                && !is_choice(outcome, pool, it, o)
            {
                rejections[i] = Some(Rejection::Overshoot {
                    gpus: devices,
                    requested: used,
                    max,
                });
            }
        }
    }
    for (key, n) in guard::min_values(pool) {
        let open: Vec<usize> = (0..offerings.len())
            .filter(|&i| rejections[i].is_none())
            .collect();
        let values: std::collections::BTreeSet<String> = open
            .iter()
            .filter_map(|&i| {
                let (it, o) = offerings[i];
                let mut labels = it.offering_labels(o);
                labels.extend(pool.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
                labels.insert(NODEPOOL_LABEL.to_owned(), pool.name.clone());
                labels.get(&key).cloned()
            })
            .collect();
        if values.len() < n as usize {
            for i in open {
                let (it, o) = offerings[i];
                if !is_choice(outcome, pool, it, o) {
                    rejections[i] = Some(Rejection::MinValues {
                        detail: format!(
                            "minValues: NodePool {} requires {n} distinct {key} values, only {} can hold the pod",
                            pool.name,
                            values.len()
                        ),
                    });
                }
            }
        }
    }
}
