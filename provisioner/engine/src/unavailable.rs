//! Offerings that recently failed with insufficient capacity, each until its TTL runs out.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use quartermaster_solver::OfferingKey;

/// Offerings not to use until a given time.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UnavailableOfferings {
    until: BTreeMap<OfferingKey, DateTime<Utc>>,
}

impl UnavailableOfferings {
    /// Marks `key` unavailable until `until` (extends, never shortens).
    pub fn mark(&mut self, key: OfferingKey, until: DateTime<Utc>) {
        let entry = self.until.entry(key).or_insert(until);
        if *entry < until {
            *entry = until;
        }
    }

    /// Whether `key` is unavailable at `now`.
    pub fn contains(&self, key: &OfferingKey, now: DateTime<Utc>) -> bool {
        self.until.get(key).is_some_and(|until| *until > now)
    }

    /// Forgets entries whose TTL ran out; returns whether any did.
    pub fn expire(&mut self, now: DateTime<Utc>) -> bool {
        let before = self.until.len();
        self.until.retain(|_, until| *until > now);
        self.until.len() != before
    }

    /// The set in force at `now`, for the solver's snapshot.
    pub fn active(&self, now: DateTime<Utc>) -> BTreeSet<OfferingKey> {
        self.until
            .iter()
            .filter(|(_, until)| **until > now)
            .map(|(k, _)| k.clone())
            .collect()
    }

    /// When the next entry expires.
    pub fn next_expiry(&self) -> Option<DateTime<Utc>> {
        self.until.values().min().copied()
    }
}

#[cfg(test)]
mod tests {
    use quartermaster_pricing::{CapacityType, Cloud};

    use super::*;

    #[test]
    fn entries_expire_after_their_ttl() {
        let t0 = DateTime::from_timestamp(0, 0).unwrap();
        let key = OfferingKey {
            cloud: Cloud::Aws,
            instance_type: "p5.48xlarge".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
        };
        let mut u = UnavailableOfferings::default();
        u.mark(key.clone(), t0 + chrono::TimeDelta::minutes(3));
        assert!(u.contains(&key, t0));
        assert_eq!(u.active(t0).len(), 1);
        assert!(!u.contains(&key, t0 + chrono::TimeDelta::minutes(3)));
        assert!(u.expire(t0 + chrono::TimeDelta::minutes(4)));
        assert_eq!(u.next_expiry(), None);
    }
}
