//! The allocation rule: a node-hour's cost split over the pods that ran on it in that hour.
//!
//! Node intervals are cut at clock hours. A node-hour's cost (price × billed part of the hour)
//! is split between the pods that ran on the node in that hour by their share of the node
//! (requests' dominant share, or a given hourly cost over the price) weighted by how much of the
//! hour they ran; when the weights add up to more than 1 they are scaled down to 1. What no pod
//! took is the idle share. The rows of one node-hour sum to its cost.

use std::collections::{BTreeMap, HashMap};

use chrono::{DateTime, TimeDelta, Timelike, Utc};

use crate::usage::{Amounts, NodeUsage, PodShare, PodUsage};

/// One allocated charge: a pod's (or the idle) share of one node-hour.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    /// Index into the nodes given.
    pub node: usize,
    /// Index into the pods given (the first interval of that `namespace/pod`); `None` for the
    /// idle share.
    pub pod: Option<usize>,
    /// The clock hour.
    pub hour: DateTime<Utc>,
    /// Share of the node-hour's cost (0..=1).
    pub share: f64,
    /// Dollars.
    pub cost: f64,
    /// Node-hours (share × billed hours).
    pub quantity: f64,
    /// Accelerator-hours requested (a pod given by hourly cost: its share of the node's
    /// accelerators × hours; idle: accelerator-hours paid and not taken).
    pub gpu_hours: f64,
}

/// The start of the clock hour holding `t`.
pub fn hour_floor(t: DateTime<Utc>) -> DateTime<Utc> {
    t.with_minute(0)
        .and_then(|t| t.with_second(0))
        .and_then(|t| t.with_nanosecond(0))
        .unwrap_or(t)
}

/// `[a, b)` cut at clock hours: `(hour, seconds in it)`.
pub fn hours(a: DateTime<Utc>, b: DateTime<Utc>) -> Vec<(DateTime<Utc>, f64)> {
    let mut out = Vec::new();
    let mut h = hour_floor(a);
    while h < b {
        let next = h + TimeDelta::hours(1);
        let secs = (b.min(next) - a.max(h)).as_seconds_f64();
        if secs > 0.0 {
            out.push((h, secs));
        }
        h = next;
    }
    out
}

/// A pod's dominant share of a node (0..=1): on a node with accelerators, a pod requesting
/// accelerators takes its share of them; otherwise the larger of its CPU and memory shares.
pub fn dominant_share(requests: &Amounts, allocatable: &Amounts) -> f64 {
    if allocatable.accelerators > 0 && requests.accelerators > 0 {
        return (requests.accelerators as f64 / allocatable.accelerators as f64).min(1.0);
    }
    let share = |r: i64, a: i64| if a > 0 { r as f64 / a as f64 } else { 0.0 };
    share(requests.cpu_millis, allocatable.cpu_millis)
        .max(share(requests.memory_bytes, allocatable.memory_bytes))
        .min(1.0)
}

/// The pod's share of this node (0..=1) and the accelerators it counts for.
fn pod_share(pod: &PodUsage, node: &NodeUsage) -> (f64, f64) {
    match pod.share {
        PodShare::Requests(r) => (dominant_share(&r, &node.allocatable), r.accelerators as f64),
        PodShare::HourlyCost(c) => {
            let share = if node.price_per_hour > 0.0 {
                (c / node.price_per_hour).clamp(0.0, 1.0)
            } else {
                0.0
            };
            (share, share * f64::from(node.accelerator_count))
        }
    }
}

/// Index of the first interval of each `namespace/pod`, per interval.
fn pod_identities(pods: &[PodUsage]) -> Vec<usize> {
    let mut first: HashMap<(&str, &str), usize> = HashMap::new();
    pods.iter()
        .enumerate()
        .map(|(j, p)| *first.entry((&p.namespace, &p.pod)).or_insert(j))
        .collect()
}

/// A pod interval clipped to a node's: `(pod index, start, end)`.
type Clipped = (usize, DateTime<Utc>, DateTime<Utc>);

/// Run seconds per clock hour per `(pod identity, share bits, accelerator bits)`.
type RunSeconds = BTreeMap<DateTime<Utc>, BTreeMap<(usize, u64, u64), f64>>;

/// For each node, the pod intervals on it, clipped to the node's billed interval.
fn pods_by_node(nodes: &[NodeUsage], pods: &[PodUsage], until: DateTime<Utc>) -> Vec<Vec<Clipped>> {
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        if !n.node.is_empty() {
            by_name.entry(&n.node).or_default().push(i);
        }
    }
    let mut out = vec![Vec::new(); nodes.len()];
    for (j, p) in pods.iter().enumerate() {
        let Some(candidates) = by_name.get(p.node.as_str()) else {
            continue;
        };
        let (ps, pe) = (p.start, p.end.unwrap_or(until));
        for &i in candidates {
            let n = &nodes[i];
            let (a, b) = (ps.max(n.start), pe.min(n.end.unwrap_or(until)));
            if a < b {
                out[i].push((j, a, b));
            }
        }
    }
    out
}

/// Every allocation, by node (in the order given), hour, then pod (first appearance; idle
/// last). Intervals still open are billed up to `until`.
pub fn allocate(nodes: &[NodeUsage], pods: &[PodUsage], until: DateTime<Utc>) -> Vec<Allocation> {
    let identity = pod_identities(pods);
    let on_node = pods_by_node(nodes, pods, until);
    let mut out = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        // Run seconds per hour per (pod, share, accelerators) on this node.
        let mut run = RunSeconds::new();
        for &(j, a, b) in &on_node[i] {
            let (share, accelerators) = pod_share(&pods[j], node);
            let key = (identity[j], share.to_bits(), accelerators.to_bits());
            for (h, secs) in hours(a, b) {
                *run.entry(h).or_default().entry(key).or_default() += secs;
            }
        }
        for (h, billed) in hours(node.start, node.end.unwrap_or(until)) {
            let cost = node.price_per_hour * billed / 3600.0;
            let billed_hours = billed / 3600.0;
            let running = run.remove(&h).unwrap_or_default();
            let mut weights: Vec<(usize, f64, f64)> = running
                .iter()
                .map(|(&(p, share, accelerators), &secs)| {
                    let secs = secs.min(billed);
                    let gpu_hours = f64::from_bits(accelerators) * secs / 3600.0;
                    (p, f64::from_bits(share) * secs / billed, gpu_hours)
                })
                .collect();
            let sum: f64 = weights.iter().map(|w| w.1).sum();
            if sum > 1.0 {
                for w in &mut weights {
                    w.1 /= sum;
                }
            }
            let mut allocated = 0.0;
            let mut gpu_taken = 0.0;
            for (p, w, gpu_hours) in weights {
                allocated += w;
                gpu_taken += gpu_hours;
                out.push(Allocation {
                    node: i,
                    pod: Some(p),
                    hour: h,
                    share: w,
                    cost: cost * w,
                    quantity: billed_hours * w,
                    gpu_hours,
                });
            }
            let idle = (1.0 - allocated).max(0.0);
            out.push(Allocation {
                node: i,
                pod: None,
                hour: h,
                share: idle,
                cost: cost * idle,
                quantity: billed_hours * idle,
                gpu_hours: (f64::from(node.accelerator_count) * billed_hours - gpu_taken).max(0.0),
            });
        }
    }
    out
}

/// One node's cost per hour at an instant, split over the pods running on it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSplit {
    /// Index into the nodes given.
    pub node: usize,
    /// `(index of the pod interval, dollars per hour)` for each pod running on it, in the order
    /// given.
    pub pods: Vec<(usize, f64)>,
    /// Dollars per hour no pod takes.
    pub idle: f64,
}

/// Who pays for each node billed at `at`, per hour: the same rule as [`allocate`] for one
/// instant (shares scaled down to 1 when they add up to more). This is what the controller
/// exports as `quartermaster_pod_allocated_hourly_cost_dollars`. Intervals still open count as
/// running.
pub fn split_at(nodes: &[NodeUsage], pods: &[PodUsage], at: DateTime<Utc>) -> Vec<NodeSplit> {
    let runs = |start: DateTime<Utc>, end: Option<DateTime<Utc>>| {
        start <= at && end.is_none_or(|e| e > at)
    };
    let mut by_name: HashMap<&str, Vec<usize>> = HashMap::new();
    for (j, p) in pods.iter().enumerate() {
        if runs(p.start, p.end) {
            by_name.entry(&p.node).or_default().push(j);
        }
    }
    let mut out = Vec::new();
    for (i, node) in nodes.iter().enumerate() {
        if !runs(node.start, node.end) {
            continue;
        }
        let mut shares: Vec<(usize, f64)> = by_name
            .get(node.node.as_str())
            .filter(|_| !node.node.is_empty())
            .map(|js| {
                js.iter()
                    .map(|&j| (j, pod_share(&pods[j], node).0))
                    .collect()
            })
            .unwrap_or_default();
        let sum: f64 = shares.iter().map(|s| s.1).sum();
        if sum > 1.0 {
            for s in &mut shares {
                s.1 /= sum;
            }
        }
        let taken: f64 = shares.iter().map(|s| s.1).sum();
        out.push(NodeSplit {
            node: i,
            pods: shares
                .into_iter()
                .map(|(j, s)| (j, node.price_per_hour * s))
                .collect(),
            idle: node.price_per_hour * (1.0 - taken).max(0.0),
        });
    }
    out
}

#[cfg(test)]
mod tests;
