//! Reserved capacity: AWS On-Demand Capacity Reservations and Capacity Blocks for ML (and, in
//! the same terms, GCP reservations and Azure capacity reservation groups).
//!
//! A reservation holds `count` instances of one type in one zone, paid whether used or not
//! (an ODCR at the on-demand rate while it is active; a Capacity Block prepaid for its whole
//! window). Using a free slot therefore costs nothing more: the solver fills reservations
//! before it buys anything, and an unused one is money burnt. A Capacity Block has an end:
//! EC2 reclaims its instances 30 minutes before it, so nodes are drained
//! [`CAPACITY_BLOCK_DRAIN_BEFORE`] before the end (what Karpenter does) and their pods
//! placed elsewhere in time.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};

use crate::{CapacityType, Cloud};

/// The node label carrying the reservation a node was launched into.
pub const LABEL_RESERVATION_ID: &str = "quartermaster.dev/capacity-reservation-id";
/// The node label carrying the reservation's type (`default` or `capacity-block`).
pub const LABEL_RESERVATION_TYPE: &str = "quartermaster.dev/capacity-reservation-type";
/// Karpenter's (AWS provider) spelling of [`LABEL_RESERVATION_ID`].
pub const KARPENTER_RESERVATION_ID: &str = "karpenter.k8s.aws/capacity-reservation-id";
/// Karpenter's (AWS provider) spelling of [`LABEL_RESERVATION_TYPE`].
pub const KARPENTER_RESERVATION_TYPE: &str = "karpenter.k8s.aws/capacity-reservation-type";
/// The key of [`Reservation::tags`] naming the group a reservation belongs to, so a NodeClass can
/// select a whole group (Azure: the capacity reservation group's ARM id, which the Azure provider
/// sets on each capacity reservation it reports; clouds without groups leave it out). Not a
/// cloud tag: Azure tag names cannot hold `/`, so no tag of the reservation's own collides.
pub const TAG_RESERVATION_GROUP: &str = "quartermaster.dev/capacity-reservation-group";
/// The key of [`Reservation::tags`] that marks a reservation only launches naming it may use
/// (value `"true"`; GCP: `specificReservationRequired`, consumed only by `SPECIFIC_RESERVATION`
/// affinity; without it a GCP reservation is consumed automatically by any matching VM and
/// cannot be targeted by name). Set by the GCP provider; absent elsewhere. Not a cloud tag:
/// GCE reservations have no labels.
pub const TAG_SPECIFIC_RESERVATION_REQUIRED: &str =
    "quartermaster.dev/specific-reservation-required";
/// How long before a Capacity Block ends its nodes are drained (Karpenter: 40 minutes; EC2
/// reclaims the instances 30 minutes before the end).
pub const CAPACITY_BLOCK_DRAIN_BEFORE: TimeDelta = TimeDelta::minutes(40);
/// How long before a Capacity Block ends EC2 reclaims its instances.
pub const CAPACITY_BLOCK_RECLAIM_BEFORE: TimeDelta = TimeDelta::minutes(30);

/// What kind of reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ReservationKind {
    /// An On-Demand Capacity Reservation (`default` in EC2's `ReservationType`).
    Default,
    /// A Capacity Block for ML: a fixed window, prepaid, reclaimed at its end.
    CapacityBlock,
}

impl ReservationKind {
    /// The label value (`default`, `capacity-block`), as EC2 and Karpenter spell it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::CapacityBlock => "capacity-block",
        }
    }
}

impl std::str::FromStr for ReservationKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "default" => Ok(Self::Default),
            "capacity-block" => Ok(Self::CapacityBlock),
            other => Err(format!(
                "unknown reservation type {other:?} (default or capacity-block)"
            )),
        }
    }
}

/// One reservation as the cloud reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    /// Its id (`cr-0123…`).
    pub id: String,
    /// The cloud.
    pub cloud: Cloud,
    /// Instance type.
    pub instance_type: String,
    /// Zone.
    pub zone: String,
    /// Instances it holds in all.
    pub count: u32,
    /// Instances free now as the cloud counts them (every launch into it, ours or not), when
    /// the cloud says.
    pub available: Option<u32>,
    /// ODCR or Capacity Block.
    pub kind: ReservationKind,
    /// What it costs per instance-hour, paid whether used or not (the block's upfront price
    /// spread over its window; an ODCR's on-demand rate).
    pub price_per_hour: f64,
    /// When it becomes usable (`None`: already).
    pub start: Option<DateTime<Utc>>,
    /// When it ends (`None`: until cancelled).
    pub end: Option<DateTime<Utc>>,
    /// Its tags (what selector terms match).
    pub tags: BTreeMap<String, String>,
}

impl Reservation {
    /// Whether new instances may launch into it at `now`: started, and (a Capacity Block) not
    /// within the drain time of its end.
    pub fn accepts_launches(&self, now: DateTime<Utc>) -> bool {
        self.start.is_none_or(|s| now >= s) && self.drain_at().is_none_or(|d| now < d)
    }

    /// When its nodes must be drained: [`CAPACITY_BLOCK_DRAIN_BEFORE`] before a block ends;
    /// an ODCR's end (`None` without one).
    pub fn drain_at(&self) -> Option<DateTime<Utc>> {
        let end = self.end?;
        Some(match self.kind {
            ReservationKind::CapacityBlock => end - CAPACITY_BLOCK_DRAIN_BEFORE,
            ReservationKind::Default => end,
        })
    }

    /// When the cloud takes its instances back (a block: 30 minutes before its end).
    pub fn reclaim_at(&self) -> Option<DateTime<Utc>> {
        let end = self.end?;
        Some(match self.kind {
            ReservationKind::CapacityBlock => end - CAPACITY_BLOCK_RECLAIM_BEFORE,
            ReservationKind::Default => end,
        })
    }

    /// The capacity type of the nodes launched into it.
    pub const fn capacity_type(&self) -> CapacityType {
        CapacityType::Reserved
    }

    /// The labels a node launched into it carries (ours and Karpenter's).
    pub fn node_labels(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            (LABEL_RESERVATION_ID.to_owned(), self.id.clone()),
            (
                LABEL_RESERVATION_TYPE.to_owned(),
                self.kind.as_str().to_owned(),
            ),
            (KARPENTER_RESERVATION_ID.to_owned(), self.id.clone()),
            (
                KARPENTER_RESERVATION_TYPE.to_owned(),
                self.kind.as_str().to_owned(),
            ),
        ])
    }

    /// What it costs over `[from, to)`, used or not (the part of it within its window).
    pub fn cost_between(&self, from: DateTime<Utc>, to: DateTime<Utc>) -> f64 {
        let a = self.start.map_or(from, |s| s.max(from));
        let b = self.end.map_or(to, |e| e.min(to));
        let hours = (b - a).as_seconds_f64().max(0.0) / 3600.0;
        hours * f64::from(self.count) * self.price_per_hour
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(h: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000, 0).unwrap() + TimeDelta::hours(h)
    }

    #[test]
    fn a_capacity_block_takes_launches_only_inside_its_window_and_drains_before_its_end() {
        let block = Reservation {
            id: "cr-block".into(),
            cloud: Cloud::Aws,
            instance_type: "p5.48xlarge".into(),
            zone: "us-east-1a".into(),
            count: 4,
            available: None,
            kind: ReservationKind::CapacityBlock,
            price_per_hour: 31.464,
            start: Some(at(24)),
            end: Some(at(96)),
            tags: BTreeMap::new(),
        };
        assert!(!block.accepts_launches(at(23)));
        assert!(block.accepts_launches(at(24)));
        assert_eq!(block.drain_at(), Some(at(96) - TimeDelta::minutes(40)));
        assert_eq!(block.reclaim_at(), Some(at(96) - TimeDelta::minutes(30)));
        assert!(!block.accepts_launches(at(96) - TimeDelta::minutes(39)));
        // Paid for its window, used or not.
        assert!((block.cost_between(at(0), at(200)) - 72.0 * 4.0 * 31.464).abs() < 1e-6);
        assert_eq!(
            block.node_labels()[KARPENTER_RESERVATION_TYPE],
            "capacity-block"
        );
        assert_eq!("capacity-block".parse(), Ok(ReservationKind::CapacityBlock));
    }
}
