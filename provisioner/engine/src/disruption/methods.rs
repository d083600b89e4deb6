//! The disruption methods, one per reason a node goes, behind one [`Method`] trait as Karpenter's
//! disruption controller has them. The engine's poll runs them in two fixed lists:
//!
//! - [`DRAINS`] before provisioning: nodes that must go whatever happens (a broken node,
//!   a reservation or a flex-start run about to end). Their pods are placed again by the same
//!   poll's solve, so they come first.
//! - [`VOLUNTARY`] after provisioning, once this poll's nominations are known: empty nodes,
//!   expired nodes, retirement (a cordon, no eviction), then drift and consolidation (one move
//!   per pass, only on a settled cluster).
//!
//! Each method also says when it next has something to do by itself
//! ([`Method::deadlines`]), which [`Engine::next_deadline`] gathers.

use chrono::{DateTime, Utc};

use crate::engine::Engine;

/// One way of disrupting nodes, for one reason (the `DeleteReason` its nodes go with).
pub(crate) trait Method: Sync {
    /// Looks at the nodes at `now` and starts what it may (within budgets, where they apply).
    fn disrupt(&self, engine: &mut Engine, now: DateTime<Utc>);
    /// Adds the times at which it has something to do by itself (nothing else happening);
    /// those at or before `after` only when `after` is `None` (they were due at the last poll
    /// and are held back).
    fn deadlines(
        &self,
        engine: &Engine,
        after: Option<DateTime<Utc>>,
        times: &mut Vec<DateTime<Utc>>,
    );
}

/// Methods run before provisioning: their nodes go whatever happens.
pub(crate) const DRAINS: &[&dyn Method] = &[&Repair, &ReservationEnding, &FlexStartEnding];

/// Methods run after provisioning, in Karpenter's order.
pub(crate) const VOLUNTARY: &[&dyn Method] =
    &[&Emptiness, &Expiration, &Retirement, &Consolidation];

/// Node repair: unhealthy nodes rebooted or replaced (`repair/`).
pub(crate) struct Repair;

impl Method for Repair {
    fn disrupt(&self, engine: &mut Engine, now: DateTime<Utc>) {
        engine.repair_nodes(now);
    }
    fn deadlines(
        &self,
        engine: &Engine,
        _after: Option<DateTime<Utc>>,
        times: &mut Vec<DateTime<Utc>>,
    ) {
        times.extend(engine.repairs.next_due());
    }
}

/// Nodes in a reservation or Capacity Block drained before it ends (`reservations/`).
pub(crate) struct ReservationEnding;

impl Method for ReservationEnding {
    fn disrupt(&self, engine: &mut Engine, now: DateTime<Utc>) {
        engine.drain_reservations(now);
    }
    fn deadlines(
        &self,
        engine: &Engine,
        _after: Option<DateTime<Utc>>,
        times: &mut Vec<DateTime<Utc>>,
    ) {
        times.extend(engine.reservation_deadlines());
    }
}

/// Flex-start nodes vacated before their run ends (`flex_start.rs`).
pub(crate) struct FlexStartEnding;

impl Method for FlexStartEnding {
    fn disrupt(&self, engine: &mut Engine, now: DateTime<Utc>) {
        engine.drain_flex_start(now);
    }
    fn deadlines(
        &self,
        engine: &Engine,
        _after: Option<DateTime<Utc>>,
        times: &mut Vec<DateTime<Utc>>,
    ) {
        if engine.flex_start_seen {
            times.extend(
                engine
                    .claims
                    .values()
                    .filter(|c| !c.deleting)
                    .filter_map(crate::flex_start::deadline),
            );
        }
    }
}

/// Empty nodes removed after their pool's `consolidateAfter` (`emptiness.rs`).
pub(crate) struct Emptiness;

impl Method for Emptiness {
    fn disrupt(&self, engine: &mut Engine, now: DateTime<Utc>) {
        engine.remove_empty(now);
    }
    fn deadlines(
        &self,
        engine: &Engine,
        after: Option<DateTime<Utc>>,
        times: &mut Vec<DateTime<Utc>>,
    ) {
        let key = (engine.claims.revision(), engine.pools_version);
        let mut cache = engine.empty_deadlines.borrow_mut();
        if cache.as_ref().is_none_or(|(r, v, _)| (*r, *v) != key) {
            let mut all: Vec<DateTime<Utc>> = engine
                .claims
                .values()
                .filter(|c| !c.deleting)
                .filter_map(|c| engine.empty_deadline(c))
                .collect();
            all.sort_unstable();
            *cache = Some((key.0, key.1, all));
        }
        // The earliest after the last poll is all the caller keeps of them (or the earliest).
        if let Some((_, _, all)) = cache.as_ref() {
            times.extend(all.iter().find(|t| after.is_none_or(|p| **t > p)).copied());
        }
    }
}

/// Nodes older than their pool's `expireAfter` replaced, and deleted once their
/// `terminationGracePeriod` is over (`drift.rs`).
pub(crate) struct Expiration;

impl Method for Expiration {
    fn disrupt(&self, engine: &mut Engine, now: DateTime<Utc>) {
        engine.expire(now);
    }
    fn deadlines(
        &self,
        engine: &Engine,
        _after: Option<DateTime<Utc>>,
        times: &mut Vec<DateTime<Utc>>,
    ) {
        let key = (engine.claims.revision(), engine.pools_version);
        let at = match engine.expiry_deadline.get() {
            Some((r, v, at)) if (r, v) == key => at,
            _ => {
                let at = engine.disruption_deadline();
                engine.expiry_deadline.set(Some((key.0, key.1, at)));
                at
            }
        };
        times.extend(at);
    }
}

/// Nodes whose pods need a small part of their price cordoned, to go once empty
/// (`retirement.rs`). Not a disruption: nothing is evicted, no budget is spent.
pub(crate) struct Retirement;

impl Method for Retirement {
    fn disrupt(&self, engine: &mut Engine, now: DateTime<Utc>) {
        engine.retire_overpriced(now);
    }
    fn deadlines(
        &self,
        engine: &Engine,
        _after: Option<DateTime<Utc>>,
        times: &mut Vec<DateTime<Utc>>,
    ) {
        engine.retirement_deadlines(times);
    }
}

/// Drift first, then consolidation: one move per pass on a settled cluster
/// (`drift.rs`, `consolidation/`).
pub(crate) struct Consolidation;

impl Method for Consolidation {
    fn disrupt(&self, engine: &mut Engine, now: DateTime<Utc>) {
        engine.consolidate(now);
    }
    fn deadlines(
        &self,
        engine: &Engine,
        after: Option<DateTime<Utc>>,
        times: &mut Vec<DateTime<Utc>>,
    ) {
        engine.consolidation_deadlines(after, times);
    }
}
