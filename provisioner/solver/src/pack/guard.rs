//! What a new node must be beyond holding its pods: within its pool's `maxGpuOvershoot`, and
//! with enough distinct values of each `minValues` key among the offerings it may launch as.
//!
//! Both look at a pool's other offerings for the same pods, so both are checked lazily, on the
//! candidate the packer would open (and on right-sizing), only in pools that set them.

use std::collections::BTreeSet;
use std::fmt;

use crate::resources::{ACCELERATORS, ResourceTable, Resources};
use crate::snapshot::NodePoolSpec;

use super::shapes::Shape;

/// Whether `slot` holds an accelerator or a share of one: the accelerator resources, their
/// `.shared` renames (time-slicing, MPS) and MIG slices (`nvidia.com/mig-…`).
pub fn is_accelerator_slot(table: &ResourceTable, slot: usize) -> bool {
    if ACCELERATORS.contains(&slot) {
        return true;
    }
    if slot >= table.len() {
        return false;
    }
    let name = table.name(slot);
    name.starts_with("nvidia.com/mig-")
        || name
            .strip_suffix(".shared")
            .is_some_and(|base| table.slot(base).is_some_and(|s| ACCELERATORS.contains(&s)))
}

/// The accelerator slots of a node's capacity, with what it has of each.
pub fn accelerator_slots(table: &ResourceTable, capacity: &Resources) -> Vec<(usize, i64)> {
    (0..table.len())
        .filter(|&s| capacity.get(s) > 0 && is_accelerator_slot(table, s))
        .map(|s| (s, capacity.get(s)))
        .collect()
}

/// Whole devices `requests` occupy on a node of `devices` accelerators advertised as `slots`:
/// each slot's share of its capacity, in devices, summed and rounded up (a MIG slice or a
/// time-sliced replica occupies part of a device), at most `devices`.
pub fn devices_used(devices: i64, slots: &[(usize, i64)], requests: &Resources) -> i64 {
    if devices == 0 {
        return 0;
    }
    let share: f64 = slots
        .iter()
        .map(|&(slot, cap)| requests.get(slot) as f64 * devices as f64 / cap as f64)
        .sum();
    ((share - 1e-9).ceil().max(0.0) as i64).min(devices)
}

/// A node with more accelerators than its pods use by more than the pool allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overshoot {
    /// Accelerators of the node.
    pub gpus: i64,
    /// Accelerators its pods occupy.
    pub requested: i64,
    /// The pool's `maxGpuOvershoot`.
    pub max: u32,
}

impl fmt::Display for Overshoot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "overshoot: {} GPUs for {} requested, maxGpuOvershoot {}",
            self.gpus, self.requested, self.max
        )
    }
}

/// The overshoot of a node of `shape` holding `requests`, when it passes `pool`'s bound.
pub fn overshoot(pool: &NodePoolSpec, shape: &Shape, requests: &Resources) -> Option<Overshoot> {
    let max = pool.limits.max_gpu_overshoot?;
    let used = devices_used(shape.accelerators, &shape.accelerator_slots, requests);
    (shape.accelerators - used > i64::from(max)).then_some(Overshoot {
        gpus: shape.accelerators,
        requested: used,
        max,
    })
}

/// Price per accelerator of an offering of `shape` (infinite for a node without any).
pub fn per_device(shape: &Shape, price: f64) -> f64 {
    if shape.accelerators == 0 {
        f64::INFINITY
    } else {
        price / shape.accelerators as f64
    }
}

/// One offering of a pool that holds a pod set: (price, shape, offering), cheapest first.
pub type Fitting = Vec<(f64, usize, usize)>;

/// Every offering of the pool's shapes (`pool_shapes`, cheapest first) that holds `requests`
/// and that `allows` accepts, cheapest first (ties on indices).
pub fn fitting(
    shapes: &[Shape],
    pool_shapes: &[usize],
    requests: &Resources,
    allows: impl Fn(usize, usize) -> bool,
) -> Fitting {
    let mut found: Fitting = Vec::new();
    for &s in pool_shapes {
        let shape = &shapes[s];
        if !requests.fits_in(&shape.allocatable) {
            continue;
        }
        for (o, off) in shape.offerings.iter().enumerate() {
            if allows(s, o) {
                found.push((off.price, s, o));
            }
        }
    }
    found.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)).then(a.2.cmp(&b.2)));
    found
}

/// Keeps the offerings of `found` (all holding `requests`) that `pool`'s `maxGpuOvershoot`
/// allows: those within the bound, and those above it whose price per accelerator is no higher
/// than that of the cheapest offering within it (none when no offering keeps within it).
pub fn within_overshoot(
    pool: &NodePoolSpec,
    shapes: &[Shape],
    requests: &Resources,
    found: &mut Fitting,
) {
    if pool.limits.max_gpu_overshoot.is_none() {
        return;
    }
    let cheapest_within = found
        .iter()
        .find(|&&(_, s, _)| overshoot(pool, &shapes[s], requests).is_none())
        .map(|&(price, s, _)| per_device(&shapes[s], price));
    found.retain(|&(price, s, _)| {
        overshoot(pool, &shapes[s], requests).is_none()
            || cheapest_within.is_some_and(|p| per_device(&shapes[s], price) <= p + 1e-9)
    });
}

/// Whether a node of `shape` at `price` holding `requests` passes `pool`'s `maxGpuOvershoot`,
/// given the other offerings of the pool that hold the same pods (`fitting`, computed only when
/// the node passes the bound, so callers pay for the scan only then).
pub fn check_overshoot(
    pool: &NodePoolSpec,
    shapes: &[Shape],
    shape: usize,
    price: f64,
    requests: &Resources,
    fitting: impl FnOnce() -> Fitting,
) -> Result<(), Overshoot> {
    let Some(over) = overshoot(pool, &shapes[shape], requests) else {
        return Ok(());
    };
    let mut found = fitting();
    found.retain(|&(_, s, _)| overshoot(pool, &shapes[s], requests).is_none());
    match found.first() {
        Some(&(p, s, _))
            if per_device(&shapes[shape], price) <= per_device(&shapes[s], p) + 1e-9 =>
        {
            Ok(())
        }
        _ => Err(over),
    }
}

/// The `minValues` requirements of `pool`: (key, minimum).
pub fn min_values(pool: &NodePoolSpec) -> Vec<(String, u32)> {
    pool.requirements
        .iter()
        .filter_map(|r| r.min_values().map(|n| (r.key().to_owned(), n)))
        .filter(|&(_, n)| n > 1)
        .collect()
}

/// The distinct values of `key` among `offerings`.
pub fn distinct_values(shapes: &[Shape], offerings: &[(usize, usize)], key: &str) -> usize {
    offerings
        .iter()
        .filter_map(|&(s, o)| shapes[s].offerings[o].labels.get(key))
        .collect::<BTreeSet<_>>()
        .len()
}

/// Why a node cannot keep a `minValues` requirement: `found` (the offerings that hold its
/// pods) has too few distinct values of the key.
pub fn check_min_values(
    pool: &NodePoolSpec,
    shapes: &[Shape],
    found: &Fitting,
) -> Result<(), String> {
    let offerings: Vec<(usize, usize)> = found.iter().map(|&(_, s, o)| (s, o)).collect();
    for (key, n) in min_values(pool) {
        let have = distinct_values(shapes, &offerings, &key);
        if have < n as usize {
            return Err(format!(
                "minValues: NodePool {} requires {n} distinct {key} values, only {have} can hold the pods",
                pool.name
            ));
        }
    }
    Ok(())
}

/// Whether `pool` has a guard of this module at all.
pub fn guarded(pool: &NodePoolSpec) -> bool {
    pool.limits.max_gpu_overshoot.is_some() || !min_values(pool).is_empty()
}

/// Extends `list` (chosen first, then alternatives; drawn from `found`) with the cheapest
/// offering of each value of every `minValues` key the list lacks, until each key has its
/// minimum (or `found` runs out).
pub fn extend_for_min_values(
    pool: &NodePoolSpec,
    shapes: &[Shape],
    found: &Fitting,
    list: &mut Vec<(usize, usize)>,
) {
    for (key, n) in min_values(pool) {
        let mut have: BTreeSet<String> = list
            .iter()
            .filter_map(|&(s, o)| shapes[s].offerings[o].labels.get(&key).cloned())
            .collect();
        for &(_, s, o) in found {
            if have.len() >= n as usize {
                break;
            }
            if let Some(v) = shapes[s].offerings[o].labels.get(&key)
                && !have.contains(v)
            {
                have.insert(v.clone());
                list.push((s, o));
            }
        }
    }
}
