//! Node repair as the engine carries it out: unhealthy nodes rebooted or replaced within the
//! pools' guards.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};

use crate::engine::Engine;
use crate::events::{Action, DeleteReason};

impl Engine {
    /// Node repair: replaces nodes whose conditions say they are broken for longer than their
    /// rule tolerates, pool by pool while few enough of the pool's nodes are unhealthy.
    pub(crate) fn repair_nodes(&mut self, now: DateTime<Utc>) {
        // Fed by node events: a poll with no unhealthy node costs nothing.
        if self.repairs.is_empty() {
            return;
        }
        self.repairs
            .retain(|c| self.claims.get(c).is_some_and(|c| !c.deleting));
        self.repairs.forget_recovered(now);
        let due = self.repairs.due_all(now);
        if due.is_empty() {
            return;
        }
        let mut nodes_per_pool: BTreeMap<usize, usize> = BTreeMap::new();
        let mut unhealthy_per_pool: BTreeMap<usize, usize> = BTreeMap::new();
        for c in self.claims.values().filter(|c| !c.deleting) {
            *nodes_per_pool.entry(c.pool).or_default() += 1;
            if self.repairs.unhealthy(&c.name) {
                *unhealthy_per_pool.entry(c.pool).or_default() += 1;
            }
        }
        for crate::repair::RepairDue {
            claim: name,
            why,
            action,
        } in due
        {
            let Some((pool, provider_id)) = self
                .claims
                .get(&name)
                .map(|c| (c.pool, c.provider_id.clone()))
            else {
                continue;
            };
            let nodes = nodes_per_pool.get(&pool).copied().unwrap_or(0);
            let unhealthy = unhealthy_per_pool.get(&pool).copied().unwrap_or(0);
            let allowed = self
                .repair_configs
                .get(pool)
                .map_or(0, |c| c.allowed_unhealthy(nodes));
            if unhealthy > allowed {
                self.stats.repairs_held += 1;
                continue;
            }
            // A reboot keeps the node and its pods (they restart there); the clock starts
            // again, and a node still broken a toleration later is replaced.
            if let (crate::repair::RepairAction::Reboot, Some(provider_id)) = (action, provider_id)
            {
                self.stats.repair_reboots += 1;
                self.repairs.rebooted(&name, now);
                self.repair_reasons.insert(name.clone(), why.clone());
                self.actions.push(Action::Reboot {
                    claim: name,
                    provider_id,
                    reason: why,
                });
                continue;
            }
            self.stats.repairs += 1;
            self.repair_reasons.insert(name.clone(), why);
            self.delete(now, &name, DeleteReason::Unhealthy);
        }
    }

    /// A reboot node repair asked for could not be done: the node is replaced instead.
    pub(crate) fn reboot_failed(&mut self, now: DateTime<Utc>, claim: &str, error: &str) {
        if self.claims.get(claim).is_none_or(|c| c.deleting) {
            return;
        }
        let why = self.repair_reasons.get(claim).cloned().unwrap_or_default();
        self.stats.repairs += 1;
        self.repair_reasons
            .insert(claim.to_owned(), format!("{why}; reboot failed: {error}"));
        self.delete(now, claim, DeleteReason::Unhealthy);
    }

    /// Tells node repair what `claim`'s node (of pool `pool`) reports now.
    pub(crate) fn observe_health(
        &mut self,
        pool: usize,
        claim: &str,
        conditions: &[crate::events::NodeCondition],
        now: DateTime<Utc>,
    ) {
        if let Some(config) = self.repair_configs.get(pool) {
            self.repairs.observe(config, claim, conditions, now);
        }
    }

    /// Why node repair replaced `claim` (`AcceleratedHardwareReady=False for 10m`), if it did.
    pub fn repair_reason(&self, claim: &str) -> Option<&str> {
        self.repair_reasons.get(claim).map(String::as_str)
    }
}
