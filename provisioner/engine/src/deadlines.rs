//! When the engine next has something to do by itself: the earliest of every concern's deadline.

use std::collections::BTreeSet;

use chrono::{DateTime, TimeDelta, Utc};

use crate::engine::Engine;
use crate::state::{Phase, PodState};

impl Engine {
    /// The next time [`Engine::poll`] has something to do by itself (nothing else happening).
    pub fn next_deadline(&self) -> Option<DateTime<Utc>> {
        let mut times: Vec<DateTime<Utc>> = Vec::new();
        if self.batch.force
            && let Some(at) = self.batch.last.or(self.batch.first)
        {
            return Some(at);
        }
        if let (Some(first), Some(last)) = (self.batch.first, self.batch.last) {
            times.push((last + self.config.batch_idle).min(first + self.config.batch_max));
        }
        times.extend(self.retry_unschedulable_at);
        times.extend(self.repairs.next_due());
        times.extend(self.reservation_deadlines());
        if self.headroom.dirty {
            times.extend(self.last_poll.map(|t| t + TimeDelta::seconds(1)));
        }
        if self.headroom.loose().next().is_some() {
            times.extend(self.headroom.retry_at);
        }
        if self.any_unschedulable() {
            times.extend(self.unavailable.next_expiry());
        }
        for c in self.claims.values().filter(|c| !c.deleting) {
            times.extend(c.retry_at);
            match c.phase {
                Phase::Launched => times.extend(self.registration_due(c)),
                Phase::Registered => times.extend(
                    c.registered_at
                        .map(|t| t + self.config.accelerator_ready_budget),
                ),
                Phase::Initialized | Phase::Launching => {}
            }
            times.extend(self.empty_deadline(c));
            if self.flex_start_seen {
                times.extend(crate::flex_start::deadline(c));
            }
        }
        // Consolidation counts a nomination the cluster has not bound as settled once the grace
        // is over: wake up then, only for claims that have one (pods bound at once, as the
        // simulator's planned binder does, need no wake-up).
        let pending_grace: Vec<DateTime<Utc>> = self
            .claims
            .values()
            .filter(|c| c.phase == Phase::Initialized && !c.deleting)
            .filter_map(|c| c.nominated_at.map(|t| t + self.config.binding_grace))
            .filter(|t| self.last_poll.is_none_or(|p| *t > p))
            .collect();
        if !pending_grace.is_empty() {
            let unbound: BTreeSet<&str> = self
                .pods
                .values()
                .filter_map(|e| match &e.state {
                    PodState::Nominated { claim } => Some(claim.as_str()),
                    _ => None,
                })
                .collect();
            times.extend(
                self.claims
                    .values()
                    .filter(|c| c.phase == Phase::Initialized && !c.deleting)
                    .filter(|c| unbound.contains(c.name.as_str()))
                    .filter_map(|c| c.nominated_at.map(|t| t + self.config.binding_grace)),
            );
        }
        if self.consolidation_enabled() && self.consolidation_seen != Some(self.version) {
            times.extend(self.consolidation_next);
        }
        // A wake that comes due within the consolidation interval is acted on when the interval
        // ends (polled earlier, the pass would return and the wake would be lost).
        times.extend(
            self.consolidation_wake
                .map(|w| self.consolidation_next.map_or(w, |n| w.max(n))),
        );
        times.extend(self.static_deadlines());
        times.extend(self.disruption_deadline());
        times.extend(self.gang_deadlines());
        // What was due at the last poll and is still here is blocked (a disruption budget):
        // it is looked at again when something happens, not in a busy loop.
        times
            .into_iter()
            .filter(|t| self.last_poll.is_none_or(|p| *t > p))
            .min()
    }
}
