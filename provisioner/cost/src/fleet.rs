//! The fleet's cost at an instant and since its nodes started, by NodePool, namespace and
//! capacity type: the JSON of the controller's `/cost` and of `quartermaster report -o json`.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::allocate::{allocate, split_at};
use crate::usage::{NodeUsage, PodUsage};

/// Dollars per hour now and dollars since start, for one group.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct CostLine {
    /// Dollars per hour at `at` (0 for what no longer runs).
    pub cost_per_hour: f64,
    /// Dollars billed from each node's start (or the period's start) up to `at`.
    pub cost_since_start: f64,
}

impl CostLine {
    fn add(&mut self, per_hour: f64, since_start: f64) {
        self.cost_per_hour += per_hour;
        self.cost_since_start += since_start;
    }
}

/// One node (all its billed intervals).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeCost {
    /// Node name (empty if it never registered).
    pub name: String,
    /// NodeClaim name.
    pub nodeclaim: String,
    /// NodePool name.
    pub nodepool: String,
    /// Cloud (`aws`, `gcp`, `azure`).
    pub cloud: String,
    /// Zone.
    pub zone: String,
    /// Instance type.
    pub instance_type: String,
    /// Capacity type (`spot`, `on-demand`, `reserved`).
    pub capacity_type: String,
    /// Accelerator model, empty for CPU types.
    pub accelerator: String,
    /// Whole accelerators.
    pub accelerator_count: u32,
    /// Its latest price, dollars per hour.
    pub price_per_hour: f64,
    /// When billing started (or the period's start, if earlier).
    pub started_at: DateTime<Utc>,
    /// When billing ended; `null` while it runs.
    pub ended_at: Option<DateTime<Utc>>,
    /// Dollars billed since `started_at`.
    pub cost_since_start: f64,
    /// Dollars per hour no pod takes, at `at`.
    pub idle_per_hour: f64,
}

/// The fleet's cost (see the crate documentation for the JSON keys).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetCost {
    /// The instant the figures are for.
    pub at: DateTime<Utc>,
    /// The start of the period `cost_since_start` covers (the earliest node start); `null`
    /// without nodes.
    pub from: Option<DateTime<Utc>>,
    /// Always `USD`.
    pub currency: String,
    /// Dollars per hour of the nodes running at `at`.
    pub cost_per_hour: f64,
    /// Dollars billed by every node from its start up to `at`.
    pub cost_since_start: f64,
    /// The part no pod requested.
    pub idle: CostLine,
    /// By NodePool name.
    pub by_node_pool: BTreeMap<String, CostLine>,
    /// By namespace of the pods (idle not included).
    pub by_namespace: BTreeMap<String, CostLine>,
    /// By capacity type (`spot`, `on-demand`, `reserved`).
    pub by_capacity_type: BTreeMap<String, CostLine>,
    /// Every node, in the order given.
    pub nodes: Vec<NodeCost>,
}

/// The fleet's cost at `at`: intervals still open are running and billed up to `at`.
pub fn fleet_cost(nodes: &[NodeUsage], pods: &[PodUsage], at: DateTime<Utc>) -> FleetCost {
    let mut fleet = FleetCost {
        at,
        from: nodes.iter().map(|n| n.start).min(),
        currency: "USD".to_owned(),
        cost_per_hour: 0.0,
        cost_since_start: 0.0,
        idle: CostLine::default(),
        by_node_pool: BTreeMap::new(),
        by_namespace: BTreeMap::new(),
        by_capacity_type: BTreeMap::new(),
        nodes: Vec::new(),
    };
    // One entry per (node name, nodeclaim); an unnamed node is its own entry.
    let mut entry_of = vec![0usize; nodes.len()];
    let mut latest_start: Vec<DateTime<Utc>> = Vec::new();
    let mut seen: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for (i, n) in nodes.iter().enumerate() {
        let key = (n.node.as_str(), n.nodeclaim.as_str());
        let existing = if n.node.is_empty() && n.nodeclaim.is_empty() {
            None
        } else {
            seen.get(&key).copied()
        };
        let e = match existing {
            Some(e) => {
                let entry: &mut NodeCost = &mut fleet.nodes[e];
                entry.started_at = entry.started_at.min(n.start);
                entry.ended_at = match (entry.ended_at, n.end) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    _ => None,
                };
                if n.start >= latest_start[e] {
                    latest_start[e] = n.start;
                    entry.price_per_hour = n.price_per_hour;
                }
                e
            }
            None => {
                fleet.nodes.push(NodeCost {
                    name: n.node.clone(),
                    nodeclaim: n.nodeclaim.clone(),
                    nodepool: n.nodepool.clone(),
                    cloud: n.cloud.to_string(),
                    zone: n.zone.clone(),
                    instance_type: n.instance_type.clone(),
                    capacity_type: n.capacity_type.to_string(),
                    accelerator: n.accelerator.clone(),
                    accelerator_count: n.accelerator_count,
                    price_per_hour: n.price_per_hour,
                    started_at: n.start,
                    ended_at: n.end,
                    cost_since_start: 0.0,
                    idle_per_hour: 0.0,
                });
                latest_start.push(n.start);
                seen.insert(key, fleet.nodes.len() - 1);
                fleet.nodes.len() - 1
            }
        };
        entry_of[i] = e;
    }
    for a in allocate(nodes, pods, at) {
        let n = &nodes[a.node];
        fleet.cost_since_start += a.cost;
        fleet.nodes[entry_of[a.node]].cost_since_start += a.cost;
        line(&mut fleet.by_node_pool, &n.nodepool).add(0.0, a.cost);
        line(&mut fleet.by_capacity_type, n.capacity_type.as_str()).add(0.0, a.cost);
        match a.pod {
            Some(p) => line(&mut fleet.by_namespace, &pods[p].namespace).add(0.0, a.cost),
            None => fleet.idle.add(0.0, a.cost),
        }
    }
    for split in split_at(nodes, pods, at) {
        let n = &nodes[split.node];
        fleet.cost_per_hour += n.price_per_hour;
        line(&mut fleet.by_node_pool, &n.nodepool).add(n.price_per_hour, 0.0);
        line(&mut fleet.by_capacity_type, n.capacity_type.as_str()).add(n.price_per_hour, 0.0);
        for (p, per_hour) in split.pods {
            line(&mut fleet.by_namespace, &pods[p].namespace).add(per_hour, 0.0);
        }
        fleet.idle.add(split.idle, 0.0);
        fleet.nodes[entry_of[split.node]].idle_per_hour += split.idle;
    }
    fleet
}

fn line<'a>(map: &'a mut BTreeMap<String, CostLine>, key: &str) -> &'a mut CostLine {
    if !map.contains_key(key) {
        map.insert(key.to_owned(), CostLine::default());
    }
    map.get_mut(key).expect("just inserted")
}
