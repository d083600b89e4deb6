//! Offerings a move's replacement could not get: kept out of the solver's answers to the
//! questions of consolidation and drift for longer than the unavailable TTL, so that a move the
//! cloud cannot carry out is not launched and called off again and again.
//!
//! A capacity error marks an offering unavailable for everyone for three minutes (Karpenter's
//! TTL). A called-off move's nodes then wait out [`CONSOLIDATION_BACKOFF`], by which time that
//! mark has expired: when the capacity is held by a limit that nothing frees (a zone full, a
//! family at its ceiling), the same move was launched every quarter of an hour, for good, each
//! time with replacements that came up and were deleted at once. Here, when a move is called
//! off after another of its replacements launched (the waste), the offerings the failed
//! replacement was refused stay out of moves for the backoff, doubling each time they are
//! refused again (at most [`MAX_DOUBLINGS`] times: two hours), until capacity is seen to come
//! back: a node of the same cloud, family and capacity type that ran is removed
//! (what it held is free), or a launch for pending pods gets capacity of the same cloud and
//! capacity type (a spot storm is over). Pending pods are never kept from an offering by this:
//! it only shapes the moves of consolidation and drift. A move whose only replacement is
//! refused launched nothing: it is asked for again as soon as the offerings are usable (an
//! on-demand fallback node goes back to spot when spot is back).
//!
//! [`CONSOLIDATION_BACKOFF`]: super::consolidation::CONSOLIDATION_BACKOFF

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use quartermaster_pricing::{CapacityType, Cloud};
use quartermaster_solver::OfferingKey;

use super::consolidation::CONSOLIDATION_BACKOFF;

/// How many times a refusal's wait doubles at most (15 minutes, 30, 60, then 2 hours).
pub(crate) const MAX_DOUBLINGS: u32 = 3;

/// The capacity an offering draws on, as far as the engine can tell: its cloud, instance
/// family and capacity type (a limit or an exhausted pool seldom stops at one instance size).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CapacityKind {
    /// Cloud.
    pub cloud: Cloud,
    /// Instance family, from the catalog.
    pub family: String,
    /// Capacity type.
    pub capacity_type: CapacityType,
}

#[derive(Debug, Clone)]
struct Refusal {
    kind: CapacityKind,
    /// Kept out of moves until then.
    until: DateTime<Utc>,
    /// Refusals with no capacity of its kind seen in between.
    times: u32,
}

/// Offerings kept out of moves, each with its kind and how often it was refused.
#[derive(Debug, Clone, Default)]
pub(crate) struct MoveRefusals {
    refused: BTreeMap<OfferingKey, Refusal>,
    /// Per replacement still launching, the offerings the cloud refused it so far.
    tried: BTreeMap<String, Vec<(OfferingKey, CapacityKind)>>,
}

impl MoveRefusals {
    /// The cloud refused `key` to `replacement`, a move's replacement still launching.
    pub(crate) fn tried(&mut self, replacement: &str, key: OfferingKey, kind: CapacityKind) {
        self.tried
            .entry(replacement.to_owned())
            .or_default()
            .push((key, kind));
    }

    /// `replacement`'s move was called off. When that deleted a replacement that had launched,
    /// what `replacement` was refused is kept out of moves ([`MoveRefusals::refuse`]).
    pub(crate) fn called_off(&mut self, replacement: &str, wasted: bool, now: DateTime<Utc>) {
        let tried = self.tried.remove(replacement).unwrap_or_default();
        if wasted {
            for (key, kind) in tried {
                self.refuse(key, kind, now);
            }
        }
    }

    /// `replacement` launched or is gone: what it was refused is forgotten.
    pub(crate) fn forget(&mut self, replacement: &str) {
        if !self.tried.is_empty() {
            self.tried.remove(replacement);
        }
    }

    /// Keep `key` out of moves for the backoff, twice as long as last time when no capacity of
    /// its kind was seen since.
    pub(crate) fn refuse(&mut self, key: OfferingKey, kind: CapacityKind, now: DateTime<Utc>) {
        let before = self.refused.get(&key);
        let times = before.map_or(0, |r| r.times) + 1;
        let until = now + CONSOLIDATION_BACKOFF * (1 << (times - 1).min(MAX_DOUBLINGS));
        let until = before.map_or(until, |r| r.until.max(until));
        self.refused.insert(key, Refusal { kind, until, times });
    }

    /// Whether no offering is kept out of moves (nothing to end when capacity comes back).
    pub(crate) fn is_empty(&self) -> bool {
        self.refused.is_empty()
    }

    /// Capacity of `kind` was seen (a node of that kind went, or a launch got one): its
    /// offerings may be asked for again at once. Returns whether any was kept out.
    pub(crate) fn seen(&mut self, kind: &CapacityKind) -> bool {
        let before = self.refused.len();
        self.refused.retain(|_, r| r.kind != *kind);
        self.refused.len() != before
    }

    /// A launch for pending pods got capacity of `capacity_type` in `cloud`: a cloud that sells
    /// again what it refused (a spot storm over) is seen by the launches that go on, whatever
    /// their family, so every refusal of that cloud and capacity type ends. Returns whether any
    /// was kept out.
    pub(crate) fn launched(&mut self, cloud: Cloud, capacity_type: CapacityType) -> bool {
        let before = self.refused.len();
        self.refused
            .retain(|_, r| r.kind.cloud != cloud || r.kind.capacity_type != capacity_type);
        self.refused.len() != before
    }

    /// The offerings kept out of moves at `now`.
    pub(crate) fn active(&self, now: DateTime<Utc>) -> impl Iterator<Item = &OfferingKey> {
        self.refused
            .iter()
            .filter(move |(_, r)| r.until > now)
            .map(|(k, _)| k)
    }

    /// When the next offering kept out of moves may be asked for again, after `now`.
    pub(crate) fn next_expiry(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.refused
            .values()
            .map(|r| r.until)
            .filter(|t| *t > now)
            .min()
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    fn g2(capacity_type: CapacityType) -> (OfferingKey, CapacityKind) {
        (
            OfferingKey {
                cloud: Cloud::Gcp,
                instance_type: "g2-standard-4".into(),
                zone: "us-central1-a".into(),
                capacity_type,
            },
            CapacityKind {
                cloud: Cloud::Gcp,
                family: "g2".into(),
                capacity_type,
            },
        )
    }

    #[test]
    fn only_a_move_that_wasted_a_launch_keeps_its_refusals() {
        let t0 = DateTime::from_timestamp(0, 0).unwrap();
        let (key, kind) = g2(CapacityType::Spot);
        let mut r = MoveRefusals::default();
        r.tried("replacement-1", key.clone(), kind.clone());
        r.called_off("replacement-1", false, t0);
        assert_eq!(r.active(t0).count(), 0);
        r.tried("replacement-2", key.clone(), kind.clone());
        r.forget("replacement-2");
        r.called_off("replacement-2", true, t0);
        assert_eq!(r.active(t0).count(), 0);
        r.tried("replacement-3", key, kind);
        r.called_off("replacement-3", true, t0);
        assert_eq!(r.active(t0).count(), 1);
        assert!(r.tried.is_empty());
    }

    #[test]
    fn a_refusal_doubles_until_capacity_of_its_kind_is_seen() {
        let t0 = DateTime::from_timestamp(0, 0).unwrap();
        let (key, kind) = g2(CapacityType::Spot);
        let mut r = MoveRefusals::default();
        let mut at = t0;
        for minutes in [15, 30, 60, 120, 120] {
            r.refuse(key.clone(), kind.clone(), at);
            let back = at + TimeDelta::minutes(minutes);
            assert_eq!(r.next_expiry(at), Some(back));
            assert_eq!(r.active(back - TimeDelta::seconds(1)).count(), 1);
            assert_eq!(r.active(back).count(), 0);
            at = back;
        }
        // On-demand capacity of the family says nothing about spot.
        assert!(!r.seen(&g2(CapacityType::OnDemand).1));
        assert!(r.seen(&kind));
        r.refuse(key.clone(), kind.clone(), at);
        assert_eq!(r.next_expiry(at), Some(at + TimeDelta::minutes(15)));
        // A spot launch anywhere in the cloud ends spot refusals of every family.
        assert!(!r.launched(Cloud::Gcp, CapacityType::OnDemand));
        assert!(!r.launched(Cloud::Aws, CapacityType::Spot));
        assert!(r.launched(Cloud::Gcp, CapacityType::Spot));
        assert_eq!(r.active(at).count(), 0);
    }
}
