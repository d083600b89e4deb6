//! When the engine next has something to do by itself: the earliest of every concern's deadline.

use chrono::{DateTime, TimeDelta, Utc};

use crate::disruption::methods::{DRAINS, VOLUNTARY};
use crate::engine::Engine;
use crate::state::Phase;

impl Engine {
    /// The next time [`Engine::poll`] has something to do by itself (nothing else happening).
    pub fn next_deadline(&self) -> Option<DateTime<Utc>> {
        self.earliest_deadline(false)
    }

    /// Whether a poll at `now` would do nothing: no event since the last one, nothing left to
    /// hand out, and no deadline due, not even one a disruption budget held back at the last
    /// poll (that one is looked at again on every poll, as before). Polls are most of an
    /// idle engine's work: a simulated week of 100,000 jobs polls a million times, and about
    /// two in five of them follow no event.
    pub(crate) fn nothing_due(&self, now: DateTime<Utc>) -> bool {
        !self.heard_since_poll
            && self.actions.is_empty()
            && !self.batch.force
            && !self.headroom.dirty
            && self.earliest_deadline(true).is_none_or(|d| d > now)
    }

    /// The earliest deadline; with `held_too`, also those already due at the last poll (held
    /// back by a budget) and every unavailable offering's expiry.
    fn earliest_deadline(&self, held_too: bool) -> Option<DateTime<Utc>> {
        let after = if held_too { None } else { self.last_poll };
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
        if self.headroom.dirty {
            times.extend(self.last_poll.map(|t| t + TimeDelta::seconds(1)));
        }
        if self.headroom.loose().next().is_some() {
            times.extend(self.headroom.retry_at);
        }
        if held_too || self.any_unschedulable() {
            times.extend(self.unavailable.next_expiry());
        }
        // The claims' own lifecycle deadlines, walked once per change of any claim.
        {
            let revision = self.claims.revision();
            let mut cache = self.lifecycle_deadlines.borrow_mut();
            if cache.as_ref().is_none_or(|(r, _)| *r != revision) {
                let mut all = Vec::new();
                for c in self.claims.values().filter(|c| !c.deleting) {
                    all.extend(c.life.retry_at());
                    match c.phase() {
                        Phase::Launched => all.extend(self.registration_due(c)),
                        Phase::Registered => all.extend(
                            c.life
                                .registered_at()
                                .map(|t| t + self.config.accelerator_ready_budget),
                        ),
                        Phase::Initialized | Phase::Launching => {}
                    }
                }
                all.sort_unstable();
                *cache = Some((revision, all));
            }
            if let Some((_, all)) = cache.as_ref() {
                times.extend(all.iter().find(|t| after.is_none_or(|p| **t > p)).copied());
            }
        }
        times.extend(self.static_deadlines());
        for method in DRAINS.iter().chain(VOLUNTARY) {
            method.deadlines(self, after, &mut times);
        }
        times.extend(self.gang_deadlines());
        // What was due at the last poll and is still here is blocked (a disruption budget):
        // it is looked at again when something happens, not in a busy loop.
        times
            .into_iter()
            .filter(|t| after.is_none_or(|p| *t > p))
            .min()
    }
}
