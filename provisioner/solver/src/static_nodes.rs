//! Nodes bought for their own sake: a static NodePool (`spec.replicas`) keeps its count whatever
//! the pods need, so its missing nodes are chosen without pods, as the cheapest node its
//! requirements, zones, availability and DaemonSets allow.

use chrono::{DateTime, Utc};
use quartermaster_pricing::Catalog;

use crate::pod::Toleration;
use crate::resources::PODS;
use crate::snapshot::{ClusterSnapshot, PoolLimits};
use crate::{NewNode, Pod, PodRef, Resources};

/// The node a static pool (`snapshot.node_pools[pool]`) gets next: the solver's choice for one
/// empty pod that tolerates every taint, with only that pool to buy from and its limits lifted
/// (a static pool counts nodes only; the caller holds `limits.nodes`). `None` when the pool
/// offers no instance type now.
pub fn empty_node(
    snapshot: &ClusterSnapshot,
    catalog: &Catalog,
    now: DateTime<Utc>,
    pool: usize,
) -> Option<NewNode> {
    let mut spec = snapshot.node_pools.get(pool)?.clone();
    spec.usage = Default::default();
    spec.limits = PoolLimits::default();
    let mut placeholder = Pod::new(
        PodRef::new("quartermaster.dev", format!("static-{}", spec.name)),
        Resources::single(PODS, 1),
    );
    placeholder.tolerations.push(Toleration {
        key: String::new(),
        exists: true,
        value: String::new(),
        effect: None,
    });
    let alone = ClusterSnapshot {
        resources: snapshot.resources.clone(),
        pending: vec![placeholder],
        nodes: Vec::new(),
        node_pools: vec![spec],
        daemonsets: snapshot.daemonsets.clone(),
        unavailable: snapshot.unavailable.clone(),
        offering_limits: snapshot.offering_limits.clone(),
    };
    let mut node = crate::solve(&alone, catalog, now)
        .new_nodes
        .into_iter()
        .next()?;
    node.pods.clear();
    node.requests = Resources::ZERO;
    Some(node)
}
