//! Consolidation (`consolidationPolicy: WhenEmptyOrUnderutilized`): the same solver, asked a
//! different question — "if this node were gone, where would its pods go?". When they all fit
//! on other nodes the node is deleted; when they fit on one new node that is cheaper by at least
//! `consolidation_min_saving`, that node is launched and the old one goes once its pods run on
//! it. One move at a time, within each pool's disruption budget.
//!
//! Pods owned by a Job are never moved: restarting a training or batch job throws its work
//! away, which no saving in node price pays back.

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_policies::{ConsolidationPolicy, DisruptionReason};

use super::Engine;
use crate::events::Action;
use crate::state::{Phase, PodState};

/// The least score `Balanced` consolidates at (Karpenter's `1/k` with `k = 2`).
const BALANCED_MIN_SCORE: f64 = 0.5;

/// `Balanced`'s score of a move: the fraction of the pool's hourly cost it saves over the
/// fraction of the pool's pods it disrupts. A move that disrupts nothing scores infinitely.
fn balanced_score(saving: f64, pool_cost: f64, moved: usize, pool_pods: usize) -> f64 {
    if moved == 0 || pool_pods == 0 {
        return f64::INFINITY;
    }
    if pool_cost <= 0.0 {
        return 0.0;
    }
    (saving / pool_cost) / (moved as f64 / pool_pods as f64)
}

/// What consolidation decided for one node.
enum Move {
    /// Its pods fit elsewhere: delete it.
    Delete,
    /// Its pods fit on one cheaper new node.
    Replace,
}

impl Engine {
    /// Looks for one node to consolidate, when due.
    pub(super) fn consolidate(&mut self, now: DateTime<Utc>) {
        let changed = self.consolidation_seen != Some(self.version);
        let matured = self.consolidation_wake.is_some_and(|t| now >= t);
        if !(changed || matured) || self.consolidation_next.is_some_and(|t| now < t) {
            return;
        }
        // Only a settled cluster is consolidated: nothing waiting for a first place (pods that
        // cannot be placed at all do not count), nothing launching, nothing moving.
        let settled = self.pods.values().all(|e| match &e.state {
            PodState::Waiting { reason, .. } => reason.is_some(),
            PodState::Nominated { .. } => false,
            PodState::Bound { .. } => true,
        }) && self
            .claims
            .values()
            .all(|c| c.phase == Phase::Initialized && !c.vacating() && !c.deleting);
        if !settled {
            return;
        }
        self.consolidation_next = Some(now + self.config.consolidation_interval);
        self.consolidation_seen = Some(self.version);
        let (candidates, wake) = self.consolidation_candidates(now);
        self.consolidation_wake = wake;
        for name in candidates {
            if let Some(m) = self.evaluate(now, &name) {
                self.execute(now, &name, m);
                return;
            }
        }
    }

    /// Whether any pool consolidates underutilized nodes (so a wake-up is worth scheduling).
    pub(super) fn consolidation_enabled(&self) -> bool {
        self.setup.pools.iter().any(|p| {
            matches!(
                p.node_pool.consolidation_policy(),
                ConsolidationPolicy::WhenEmptyOrUnderutilized | ConsolidationPolicy::Balanced
            )
        })
    }

    /// Nodes that may be consolidated now, the least disruptive first (fewest pods, then the
    /// most expensive), and when the next node becomes old enough to be one.
    fn consolidation_candidates(&self, now: DateTime<Utc>) -> (Vec<String>, Option<DateTime<Utc>>) {
        let mut pods_on: std::collections::BTreeMap<&str, (usize, bool)> =
            std::collections::BTreeMap::new();
        for e in self.pods.values() {
            if let PodState::Bound { claim } = &e.state {
                let entry = pods_on.entry(claim.as_str()).or_default();
                entry.0 += 1;
                entry.1 |= e
                    .pod
                    .owner
                    .as_deref()
                    .is_some_and(|o| o.starts_with("Job/"));
            }
        }
        let mut per_pool = vec![(0usize, 0usize); self.setup.pools.len()];
        for c in self.claims.values() {
            per_pool[c.pool].0 += 1;
            if c.deleting || c.consolidating {
                per_pool[c.pool].1 += 1;
            }
        }
        let mut wake: Option<DateTime<Utc>> = None;
        let mut candidates: Vec<(usize, f64, String)> = self
            .claims
            .values()
            .filter(|c| c.phase == Phase::Initialized && c.schedulable())
            .filter(|c| c.consolidation_backoff.is_none_or(|t| now >= t))
            .filter(|c| {
                let policy = &self.setup.pools[c.pool];
                if policy.replicas.is_some() {
                    return false;
                }
                if !matches!(
                    policy.node_pool.consolidation_policy(),
                    ConsolidationPolicy::WhenEmptyOrUnderutilized | ConsolidationPolicy::Balanced
                ) {
                    return false;
                }
                let Some(after) = policy
                    .consolidate_after
                    .and_then(|d| TimeDelta::from_std(d).ok())
                else {
                    return false;
                };
                let ripe = c.last_change + after;
                if now < ripe {
                    wake = Some(wake.map_or(ripe, |w| w.min(ripe)));
                }
                now >= ripe
            })
            .filter_map(|c| {
                let (pods, has_job) = pods_on.get(c.name.as_str()).copied().unwrap_or_default();
                (pods > 0 && !has_job).then(|| (pods, c.offering.price_per_hour, c.name.clone()))
            })
            .filter(|(_, _, name)| {
                let c = &self.claims[name];
                let (total, disrupting) = per_pool[c.pool];
                disrupting
                    < self.setup.pools[c.pool].allowed_disruptions(
                        DisruptionReason::Underutilized,
                        total,
                        now,
                    )
            })
            .collect();
        candidates.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.total_cmp(&a.1)).then(a.2.cmp(&b.2)));
        (
            candidates
                .into_iter()
                .take(MAX_CANDIDATES)
                .map(|(_, _, name)| name)
                .collect(),
            wake,
        )
    }

    /// Asks the solver where the pods of `name` would go without it.
    fn evaluate(&mut self, now: DateTime<Utc>, name: &str) -> Option<Move> {
        let (snapshot, _) = self.snapshot_without(now, Some(name));
        self.stats.solves += 1;
        let plan = quartermaster_solver::solve(&snapshot, &self.setup.catalog, now);
        if !plan.unschedulable.is_empty() {
            return None;
        }
        // Moving onto nodes that are still launching would leave the pods without a node for a
        // while: only initialized targets count for a delete.
        let onto_settled = plan.existing.iter().all(|p| !p.in_flight);
        let price = self.claims[name].offering.price_per_hour;
        let (m, saving) = match plan.new_nodes.len() {
            0 if onto_settled => (Move::Delete, price),
            1 if onto_settled
                && plan.new_nodes[0].offering.price_per_hour
                    < price * (1.0 - self.config.consolidation_min_saving) =>
            {
                (
                    Move::Replace,
                    price - plan.new_nodes[0].offering.price_per_hour,
                )
            }
            _ => return None,
        };
        let pool = self.claims[name].pool;
        if self.setup.pools[pool].node_pool.consolidation_policy() == ConsolidationPolicy::Balanced
            && !self.balanced_approves(pool, name, saving)
        {
            return None;
        }
        self.consolidation_plan = Some(plan);
        Some(m)
    }

    /// Karpenter's `Balanced` rule: a move is worth it when its share of the pool's cost saved is
    /// at least half its share of the pool's running pods disrupted (score
    /// `(saving / pool cost) / (pods moved / pool pods) >= 1/2`; each pod counts 1).
    fn balanced_approves(&self, pool: usize, name: &str, saving: f64) -> bool {
        let pool_cost: f64 = self
            .claims
            .values()
            .filter(|c| c.pool == pool && !c.deleting)
            .map(|c| c.offering.price_per_hour)
            .sum();
        let (mut moved, mut pool_pods) = (0usize, 0usize);
        for e in self.pods.values() {
            if let PodState::Bound { claim } = &e.state
                && let Some(c) = self.claims.get(claim)
                && c.pool == pool
            {
                pool_pods += 1;
                moved += usize::from(claim == name);
            }
        }
        balanced_score(saving, pool_cost, moved, pool_pods) >= BALANCED_MIN_SCORE
    }

    /// Carries out a move: cordon, place the pods, and let the vacated node go.
    fn execute(&mut self, now: DateTime<Utc>, name: &str, m: Move) {
        let Some(plan) = self.consolidation_plan.take() else {
            return;
        };
        let displaced: Vec<_> = self
            .pods
            .iter()
            .filter(|(_, e)| matches!(&e.state, PodState::Bound { claim } if claim == name))
            .map(|(id, _)| id.clone())
            .collect();
        let c = self.claims.get_mut(name).expect("candidate exists");
        c.consolidating = true;
        c.displaced = displaced;
        if let Some(node) = &c.node {
            self.actions.push(Action::Cordon {
                node: node.name.clone(),
            });
        }
        if let (Move::Replace, Some(c)) = (m, self.claims.get_mut(name)) {
            c.consolidation_replaced = true;
        }
        // The pods keep running where they are until their new place is ready; the plan
        // nominates them (binding at once on initialized nodes), and the node is deleted once
        // they all run elsewhere.
        let (_, targets) = self.snapshot_without(now, Some(name));
        let ceiling = self.claims[name].offering.price_per_hour
            * (1.0 - self.config.consolidation_min_saving);
        // The replacement may only fall back to offerings that still save money.
        for new in self.apply(now, plan, &targets) {
            if let Some(c) = self.claims.get_mut(&new) {
                c.replaces = Some(name.to_owned());
                c.alternatives.retain(|o| o.price_per_hour < ceiling);
            }
        }
    }
}

/// How many nodes one consolidation round asks the solver about.
const MAX_CANDIDATES: usize = 5;

#[cfg(test)]
mod balanced_tests {
    use super::balanced_score;

    #[test]
    fn the_score_weighs_the_share_saved_against_the_share_disrupted() {
        // Saving 10% of the pool's cost by moving 10% of its pods: score 1, approved.
        assert!((balanced_score(1.0, 10.0, 1, 10) - 1.0).abs() < 1e-9);
        // Saving 2% of the cost by moving half the pods: 0.04, refused.
        assert!(balanced_score(0.2, 10.0, 5, 10) < super::BALANCED_MIN_SCORE);
        // Nothing disrupted: always worth it.
        assert!(balanced_score(0.01, 10.0, 0, 10).is_infinite());
    }
}
