//! Static NodePools in `plan`: a pool with `spec.replicas` keeps that many nodes whatever the
//! pods need, so `plan` buys its missing nodes first (each the cheapest its requirements allow,
//! as the engine does), lets pods use them, and never grows the pool for pods.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use quartermaster_pricing::Catalog;
use quartermaster_solver::static_nodes::empty_node;
use quartermaster_solver::{
    ClusterSnapshot, ExistingNode, NODEPOOL_LABEL, NewNode, Plan, daemonset_overhead, to_resources,
};

/// A node bought because its pool is static, standing in the snapshot under `name`.
pub struct StaticNode {
    name: String,
    node: NewNode,
}

/// Adds the missing nodes of each static pool to `snapshot` as in-flight nodes the solver may
/// fill for free, and caps the pool at its count. Returns them for [`fold_into_plan`].
pub fn reserve(
    snapshot: &mut ClusterSnapshot,
    static_pools: &BTreeMap<String, u64>,
    catalog: &Catalog,
    now: DateTime<Utc>,
    notes: &mut Vec<String>,
) -> Vec<StaticNode> {
    let mut reserved = Vec::new();
    for index in 0..snapshot.node_pools.len() {
        let pool = &snapshot.node_pools[index];
        let Some(&replicas) = static_pools.get(&pool.name) else {
            continue;
        };
        let name = pool.name.clone();
        let have = snapshot
            .nodes
            .iter()
            .filter(|n| n.node_pool.as_deref() == Some(name.as_str()))
            .count() as u64;
        let wanted = pool.limits.nodes.map_or(replicas, |l| replicas.min(l));
        let mut bought = 0;
        for i in have..wanted {
            let Some(node) = empty_node(snapshot, catalog, now, index) else {
                notes.push(format!(
                    "NodePool {name} is static (replicas: {replicas}) but offers no instance type now: {} of its nodes cannot be bought",
                    wanted - i
                ));
                break;
            };
            let Some(stand_in) = stand_in(snapshot, catalog, index, &node, i) else {
                break;
            };
            reserved.push(StaticNode {
                name: stand_in.name.clone(),
                node,
            });
            snapshot.nodes.push(stand_in);
            bought += 1;
        }
        notes.push(format!(
            "NodePool {name} is static (replicas: {replicas}): it keeps {replicas} node(s) whatever the pods need; {have} exist, {bought} bought here; pods may use them, never make it grow"
        ));
        // The stand-ins count as the pool's nodes; the pool has no room to grow.
        let pool = &mut snapshot.node_pools[index];
        pool.usage.nodes += bought;
        pool.limits.nodes = Some(pool.usage.nodes);
    }
    reserved
}

/// The in-flight node a static node stands as while the solver places pods.
fn stand_in(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    pool_index: usize,
    node: &NewNode,
    ordinal: u64,
) -> Option<ExistingNode> {
    let pool = &snapshot.node_pools[pool_index];
    let it = catalog.get(pool.cloud, &node.offering.instance_type)?;
    let o = it
        .offerings
        .iter()
        .find(|o| o.zone == node.offering.zone && o.capacity_type == node.offering.capacity_type)?;
    let mut labels = it.offering_labels(o);
    labels.extend(pool.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    labels.insert(NODEPOOL_LABEL.to_owned(), pool.name.clone());
    let overhead = daemonset_overhead(&snapshot.daemonsets, &labels, pool);
    let allocatable = pool.node_shape.allocatable(it)?;
    let room = to_resources(&snapshot.resources, &allocatable).saturating_sub(&overhead);
    Some(ExistingNode {
        name: format!("{}-static-{ordinal}", pool.name),
        in_flight: true,
        node_pool: Some(pool.name.clone()),
        labels: labels.into(),
        taints: pool.taints.clone(),
        allocatable: room,
        pods: Vec::new(),
    })
}

/// Turns the static stand-ins back into new nodes of the plan, with the pods placed on them;
/// their price is in the plan's cost and in its lower bound (no plan can avoid them).
pub fn fold_into_plan(plan: &mut Plan, reserved: Vec<StaticNode>) {
    for StaticNode { name, mut node } in reserved {
        if let Some(i) = plan.existing.iter().position(|e| e.node == name) {
            node.pods = plan.existing.remove(i).pods;
        }
        plan.cost_per_hour += node.offering.price_per_hour;
        plan.lower_bound_per_hour += node.offering.price_per_hour;
        plan.new_nodes.push(node);
    }
}
