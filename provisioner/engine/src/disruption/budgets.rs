//! Disruption budgets enforced on moves in progress.

use chrono::{DateTime, Utc};

use crate::engine::Engine;
use crate::events::DeleteReason;
use crate::state::Phase;

impl Engine {
    pub(crate) fn enforce_budgets(&mut self, now: DateTime<Utc>) {
        let mut expired = Vec::new();
        for c in self.claims.values() {
            if c.deleting {
                continue;
            }
            match c.phase() {
                Phase::Launched if self.registration_due(c).is_some_and(|t| now >= t) => {
                    expired.push((c.name.clone(), DeleteReason::RegistrationTimeout));
                }
                Phase::Registered
                    if c.life
                        .registered_at()
                        .is_some_and(|t| now >= t + self.config.accelerator_ready_budget) =>
                {
                    expired.push((c.name.clone(), DeleteReason::AcceleratorsNotReady));
                }
                _ => {}
            }
        }
        for (name, reason) in expired {
            match reason {
                DeleteReason::RegistrationTimeout => self.stats.registration_timeouts += 1,
                _ => self.stats.accelerator_timeouts += 1,
            }
            // The offering produced a broken node: avoid it for a while, as after a capacity
            // error, so the replacement is not the same broken shape again.
            if let Some(c) = self.claims.get(&name) {
                let key = Self::key(c.cloud, &c.offering);
                self.unavailable
                    .mark(key, now + self.config.unavailable_ttl);
            }
            self.delete(now, &name, reason);
        }
    }
}
