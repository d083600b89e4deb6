//! Why a candidate offering cannot hold the pod: the first check it fails, in the packer's order
//! (availability, requirements, taints, the pod's node selector and affinity, room, limits, guards).

use std::collections::BTreeMap;

use quartermaster_policies::Requirements;
use quartermaster_pricing::{CapacityType, InstanceType, Offering};

use crate::NODEPOOL_LABEL;
use crate::pack::shapes::{daemonset_overhead, to_resources};
use crate::pod::{Pod, tolerates_all};
use crate::snapshot::{ClusterSnapshot, NodePoolSpec, OfferingKey};

use super::{Outcome, Rejection, is_choice, node_labels};

/// The first reason a node of this offering in this pool cannot hold `pod`, checked in the
/// packer's order.
pub(super) fn reject(
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
    if let Some(detail) = pod.devices.as_ref().and_then(|d| d.rejection(&it.name)) {
        return Err(Rejection::Devices { detail });
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
pub(super) fn first_failure(
    reqs: &Requirements,
    labels: &BTreeMap<String, String>,
) -> Option<String> {
    reqs.iter().find_map(|r| {
        let value = labels.get(r.key()).map(String::as_str);
        (!r.matches(value)).then(|| match value {
            Some(v) => format!("{} {r} (the node would have {}={v})", r.key(), r.key()),
            None => format!("{} {r} (the node would not carry {})", r.key(), r.key()),
        })
    })
}

/// What the catalog does not model, when a requirement asks for it.
pub(super) fn catalog_gap(r: &quartermaster_policies::Requirement) -> &'static str {
    let asks = |v: &str| r.values().is_some_and(|vs| vs.contains(v));
    match r.key() {
        "kubernetes.io/os" if asks("windows") => " (the catalog prices Linux nodes only)",
        quartermaster_pricing::labels::CAPACITY_TYPE if asks("reserved") => {
            " (capacity reservations are not in the catalog)"
        }
        _ => "",
    }
}

/// The NodePool's guards for the pod alone, over the offerings `reject` left open: an offering
/// with more accelerators than the pod occupies by more than `maxGpuOvershoot` is ruled out
/// unless it is no dearer per accelerator than the cheapest open offering within the bound;
/// when the open offerings left have fewer distinct values of a `minValues` key than required,
/// all of them are ruled out. The plan's choice is never ruled out here (it holds more pods).
pub(super) fn guard_rejections(
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
