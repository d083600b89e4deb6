//! A pass at rest. Observing (reading every pod, claim and node into engine events) and syncing
//! statuses (building every claim's status to compare it with the stored one) cost a pass in
//! proportion to the cluster, and at rest both find nothing. Each is skipped when nothing it
//! reads changed since it last ran and found nothing to do: no store changed (by their
//! digests), no claim of the engine changed (its claims revision), no outcome or catalog
//! arrived, and nothing was waiting to be sent again. Either runs in full at least every
//! [`FULL_PASS_EVERY`] anyway.

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_engine::Engine;

use super::Driver;
use crate::stores::StoreDigests;

/// The longest a pass skips observing or syncing statuses in a row, however still the cluster
/// looks: a bound on what a change this module failed to see could cost.
pub(super) const FULL_PASS_EVERY: TimeDelta = TimeDelta::seconds(30);

/// What observing or syncing read, when it had nothing to do.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Inputs {
    stores: StoreDigests,
    claims: u64,
}

/// The inputs of the last quiet observe and status sync, and when each last ran.
#[derive(Debug, Default)]
pub(super) struct AtRest {
    observed: Option<(Inputs, DateTime<Utc>)>,
    synced: Option<(Inputs, DateTime<Utc>)>,
    /// Observes and status syncs skipped (a measure for tests).
    skipped: u64,
}

impl AtRest {
    /// Forgets what was seen: the next pass observes and syncs in full (a new engine, an
    /// outcome, a new catalog).
    pub(super) fn forget(&mut self) {
        self.observed = None;
        self.synced = None;
    }

    /// Observes and status syncs skipped so far.
    #[cfg(test)]
    pub(super) fn skipped(&self) -> u64 {
        self.skipped
    }
}

/// Whether `kept` (inputs and when they were seen) says `now` with `inputs` changes nothing.
fn unchanged(kept: Option<(Inputs, DateTime<Utc>)>, inputs: Inputs, now: DateTime<Utc>) -> bool {
    kept.is_some_and(|(seen, at)| seen == inputs && now - at < FULL_PASS_EVERY)
}

fn claims_revision(engine: Option<&Engine>) -> Option<u64> {
    engine.map(Engine::claims_revision)
}

impl Driver {
    /// Observes, unless nothing it reads changed since an observe that had nothing to send
    /// again. `stores` are the digests taken before this pass read anything.
    pub(super) fn observe_unless_at_rest(&mut self, now: DateTime<Utc>, stores: StoreDigests) {
        if let Some(claims) = claims_revision(self.engine.as_ref())
            && unchanged(self.rest.observed, Inputs { stores, claims }, now)
        {
            self.rest.skipped += 1;
            return;
        }
        let waiting = self.observe(now, stores);
        // The revision after observing: what this observe told the engine is in it, and a
        // later change (a solve, a launch) makes the next pass observe again.
        self.rest.observed = claims_revision(self.engine.as_ref())
            .filter(|_| !waiting)
            .map(|claims| (Inputs { stores, claims }, now));
    }

    /// Syncs NodeClaim and NodePool statuses, unless nothing they are built from changed since
    /// a sync that found every status as it should be.
    pub(super) fn sync_status_unless_at_rest(&mut self, now: DateTime<Utc>, stores: StoreDigests) {
        let Some(claims) = claims_revision(self.engine.as_ref()) else {
            return;
        };
        let inputs = Inputs {
            stores: stores.of_statuses(),
            claims,
        };
        if unchanged(self.rest.synced, inputs, now) {
            self.rest.skipped += 1;
            return;
        }
        let unsettled = crate::lifecycle::sync_status(self, now);
        self.rest.synced = (!unsettled).then_some((inputs, now));
    }
}
