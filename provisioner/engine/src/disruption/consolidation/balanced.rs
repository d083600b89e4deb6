//! `Balanced` consolidation: a move is taken only when the share of the pool's cost it saves
//! is worth the share of its pods it disrupts.

use quartermaster_policies::ConsolidationPolicy;

use crate::engine::Engine;

/// The least score `Balanced` consolidates at (Karpenter's `1/k` with `k = 2`).
pub(crate) const BALANCED_MIN_SCORE: f64 = 0.5;

/// `Balanced`'s score of a move: the fraction of the pool's hourly cost it saves over the
/// fraction of the pool's pods it disrupts. A move that disrupts nothing scores infinitely.
pub(crate) fn balanced_score(saving: f64, pool_cost: f64, moved: usize, pool_pods: usize) -> f64 {
    if moved == 0 || pool_pods == 0 {
        return f64::INFINITY;
    }
    if pool_cost <= 0.0 {
        return 0.0;
    }
    (saving / pool_cost) / (moved as f64 / pool_pods as f64)
}

impl Engine {
    /// Karpenter's `Balanced` rule, for moves touching a Balanced pool: worth it when the share
    /// of the pools' cost saved is at least half the share of their running pods disrupted
    /// (score `(saving / pool cost) / (pods moved / pool pods) >= 1/2`; each pod counts 1).
    pub(crate) fn balanced_approves(&self, names: &[String], saving: f64) -> bool {
        let pools: Vec<usize> = names.iter().map(|n| self.claims[n].pool).collect();
        if !pools.iter().any(|p| {
            self.setup.pools[*p].node_pool.consolidation_policy() == ConsolidationPolicy::Balanced
        }) {
            return true;
        }
        let pool_cost: f64 = self
            .claims
            .values()
            .filter(|c| pools.contains(&c.pool) && !c.deleting)
            .map(|c| c.offering.price_per_hour)
            .sum();
        let (mut moved, mut pool_pods) = (0usize, 0usize);
        for e in self.pods.values() {
            if let Some(claim) = self.running_on(e)
                && let Some(c) = self.claims.get(claim)
                && pools.contains(&c.pool)
            {
                pool_pods += 1;
                moved += usize::from(names.iter().any(|n| n == claim));
            }
        }
        balanced_score(saving, pool_cost, moved, pool_pods) >= BALANCED_MIN_SCORE
    }
}

#[cfg(test)]
mod tests {
    use super::balanced_score;
    use crate::disruption::candidates::utilisation;

    #[test]
    fn the_score_weighs_the_share_saved_against_the_share_disrupted() {
        // Saving 10% of the pool's cost by moving 10% of its pods: score 1, approved.
        assert!((balanced_score(1.0, 10.0, 1, 10) - 1.0).abs() < 1e-9);
        // Saving 2% of the cost by moving half the pods: 0.04, refused.
        assert!(balanced_score(0.2, 10.0, 5, 10) < super::BALANCED_MIN_SCORE);
        // Nothing disrupted: always worth it.
        assert!(balanced_score(0.01, 10.0, 0, 10).is_infinite());
    }

    #[test]
    fn utilisation_is_the_accelerators_share_on_accelerator_nodes() {
        use quartermaster_solver::Resources;
        use quartermaster_solver::resources::{CPU, MEMORY};
        let mut room = Resources::ZERO;
        room.set(CPU, 4000);
        room.set(MEMORY, 16 << 30);
        let mut used = Resources::ZERO;
        used.set(CPU, 3000);
        assert!((utilisation(&used, &room) - 0.75).abs() < 1e-9);
        room.set(4, 1);
        // A GPU node whose GPU is idle is idle, whatever CPU pods it holds.
        assert_eq!(utilisation(&used, &room), 0.0);
    }
}
