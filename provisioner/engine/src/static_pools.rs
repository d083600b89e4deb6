//! Static NodePools (`spec.replicas`, Karpenter's static capacity): the pool keeps exactly that
//! many nodes whatever the pods need.
//!
//! As Karpenter (and EKS Auto Mode) defines them: the count is kept up (a missing node is
//! launched, on the cheapest offering the pool's requirements allow) and down (extra nodes go,
//! the ones holding the fewest pods first, bypassing disruption budgets); of the pool's limits
//! only `limits.nodes` applies; pending pods never make the pool grow (they may use its nodes);
//! its nodes are never consolidated, and never removed for being empty.

use std::collections::VecDeque;

use chrono::{DateTime, Utc};
use quartermaster_solver::NewNode;

use crate::engine::Engine;
use crate::events::DeleteReason;
use crate::state::PodState;

impl Engine {
    /// Launches or removes nodes so each static pool has its `replicas`.
    pub(crate) fn keep_static_pools(&mut self, now: DateTime<Utc>) {
        for pool in 0..self.setup.pools.len() {
            let Some(replicas) = self.setup.pools[pool].replicas else {
                continue;
            };
            let wanted = match self.setup.pools[pool].spec.limits.nodes {
                Some(limit) => replicas.min(limit),
                None => replicas,
            };
            let live: Vec<&str> = self
                .claims
                .values()
                .filter(|c| c.pool == pool && !c.deleting)
                .map(|c| c.name.as_str())
                .collect();
            let have = live.len() as u64;
            if have > replicas {
                self.scale_down(now, pool, (have - replicas) as usize);
            } else if have < wanted && self.static_retry_at[pool].is_none_or(|t| now >= t) {
                for _ in have..wanted {
                    if !self.launch_static(now, pool) {
                        self.static_retry_at[pool] = Some(now + self.config.unschedulable_retry);
                        break;
                    }
                }
            }
        }
    }

    /// Removes `count` nodes of a static pool: the ones with the fewest pods, newest first.
    fn scale_down(&mut self, now: DateTime<Utc>, pool: usize, count: usize) {
        let mut by_load: Vec<(usize, DateTime<Utc>, String)> = self
            .claims
            .values()
            .filter(|c| c.pool == pool && !c.deleting)
            .map(|c| {
                let pods = self
                    .pods
                    .values()
                    .filter(|e| {
                        matches!(&e.state, PodState::Nominated { claim } | PodState::Bound { claim }
                            if *claim == c.name)
                    })
                    .count();
                (pods, c.created_at, c.name.clone())
            })
            .collect();
        by_load.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
        for (_, _, name) in by_load.into_iter().take(count) {
            self.delete(now, &name, DeleteReason::ScaledDown);
        }
    }

    /// Creates and launches one node of a static pool. False when the pool offers no instance
    /// type now (all unavailable, or the requirements match none).
    fn launch_static(&mut self, now: DateTime<Utc>, pool: usize) -> bool {
        let Some(node) = self.static_offering(now, pool) else {
            return false;
        };
        let name = self.next_claim_name(&node.node_pool);
        let alternatives: VecDeque<_> = node.alternatives.into();
        let Some(claim) = self.new_claim(now, &name, pool, node.offering, alternatives, None)
        else {
            return false;
        };
        self.claims.insert(name.clone(), claim);
        self.stats.claims_created += 1;
        self.launch(&name);
        true
    }

    /// The offering a static pool's next node gets (see
    /// [`quartermaster_solver::static_nodes::empty_node`]), with unavailable offerings left out.
    fn static_offering(&self, now: DateTime<Utc>, pool: usize) -> Option<NewNode> {
        let (snapshot, _) = self.snapshot(now);
        quartermaster_solver::static_nodes::empty_node(&snapshot, &self.setup.catalog, now, pool)
    }

    /// When a static pool that could not get a node tries again.
    pub(crate) fn static_deadlines(&self) -> impl Iterator<Item = DateTime<Utc>> + '_ {
        self.static_retry_at.iter().flatten().copied()
    }
}
