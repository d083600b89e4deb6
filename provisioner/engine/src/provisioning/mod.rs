//! Provisioning: pending pods are batched (idle window, maximum window) and solved; the plan
//! becomes nominations onto existing room and new NodeClaims.

mod apply;
mod nominations;
mod snapshot;

pub(crate) use apply::FallbackLimit;
pub(crate) use snapshot::Room;

use chrono::{DateTime, Utc};
use quartermaster_solver::{ClusterSnapshot, Plan};

use crate::engine::Engine;

impl Engine {
    pub(crate) fn arrive(&mut self, now: DateTime<Utc>) {
        self.batch.first.get_or_insert(now);
        self.batch.last = Some(now);
    }

    pub(crate) fn any_unschedulable(&self) -> bool {
        self.pods.any_unschedulable()
    }

    pub(crate) fn batch_due(&self, now: DateTime<Utc>) -> bool {
        if self.batch.force {
            return true;
        }
        if self.retry_unschedulable_at.is_some_and(|t| t <= now) {
            return true;
        }
        match (self.batch.first, self.batch.last) {
            (Some(first), Some(last)) => {
                now >= last + self.config.batch_idle || now >= first + self.config.batch_max
            }
            _ => false,
        }
    }

    pub(crate) fn solve(&mut self, now: DateTime<Utc>) {
        let opened = self.batch.first;
        self.batch = Batch::default();
        self.retry_unschedulable_at = None;
        // Most batches close with their pods already bound by the scheduler: nothing to solve,
        // and no snapshot to build (on a week of 100,000 jobs that was a fifth of the run).
        if self.pods.waiting().is_empty() {
            return;
        }
        let (snapshot, target_to_claim) = self.snapshot(now);
        if snapshot.pending.is_empty() {
            return;
        }
        if let Some(first) = opened
            && self.closed_batches.len() < MAX_CLOSED_BATCHES
        {
            self.closed_batches.push(now - first);
        }
        self.stats.solves += 1;
        let plan = crate::provisioning::plan(&snapshot, &self.setup.catalog, now);
        let (plan, target_to_claim) = if self.claims.values().any(|c| c.reopenable()) {
            self.reopen_if_cheaper(now, plan, target_to_claim)
        } else {
            (plan, target_to_claim)
        };
        for name in self.apply(now, plan, &target_to_claim, FallbackLimit::Provisioning) {
            let Some(pool) = self.claims.get(&name).map(|c| c.pool) else {
                continue;
            };
            if self.grew_at.len() <= pool {
                self.grew_at.resize(pool + 1, None);
            }
            self.grew_at[pool] = Some(now);
        }
    }
}

/// Batch windows kept for the driver when it does not take them (the simulator): a bound, not
/// a figure anyone reads.
pub(crate) const MAX_CLOSED_BATCHES: usize = 1024;

/// Batching of pending pods.
#[derive(Debug, Clone, Default)]
pub(crate) struct Batch {
    pub(crate) first: Option<DateTime<Utc>>,
    pub(crate) last: Option<DateTime<Utc>>,
    pub(crate) force: bool,
}

/// The solver as the engine calls it: without the lower bound, which the engine never reads.
pub(crate) fn plan(
    snapshot: &ClusterSnapshot,
    catalog: &quartermaster_pricing::Catalog,
    now: DateTime<Utc>,
) -> Plan {
    quartermaster_solver::solve_with(
        snapshot,
        catalog,
        now,
        &quartermaster_solver::SolveOptions {
            skip_lower_bound: true,
            ..Default::default()
        },
    )
}
