//! Reservations the pools may launch into: free slots offered to the solver, reserved claims,
//! and nodes drained before a reservation ends.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use chrono::{DateTime, Utc};
use quartermaster_pricing::CapacityType;
use quartermaster_solver::{ExistingNode, OfferingChoice, OfferingKey};

use crate::engine::Engine;
use crate::events::DeleteReason;

impl Engine {
    /// New reservations: the catalog gains their reserved offerings (priced 0); pods that
    /// could not be placed are looked at again.
    pub(crate) fn reservations_changed(
        &mut self,
        now: DateTime<Utc>,
        offers: Vec<crate::ReservationOffer>,
    ) {
        let reservations: Vec<quartermaster_pricing::Reservation> =
            offers.iter().map(|o| o.reservation.clone()).collect();
        self.setup.catalog = self.setup.catalog.with_reserved_offerings(&reservations);
        self.reservations = offers;
        if self.any_unschedulable() {
            self.arrive(now);
            self.batch.force = true;
        }
    }

    /// The reserved offerings: never bought as new nodes (only through a stand-in).
    pub(crate) fn reserved_keys(&self) -> impl Iterator<Item = OfferingKey> + '_ {
        self.reservations.iter().map(|o| OfferingKey {
            cloud: o.reservation.cloud,
            instance_type: o.reservation.instance_type.clone(),
            zone: o.reservation.zone.clone(),
            capacity_type: CapacityType::Reserved,
        })
    }

    /// One empty in-flight node per free slot of every reservation that takes launches now
    /// (see [`crate::reservations::stand_ins`]: the first of its pools that allows capacity
    /// type `reserved`, within the pool's limits, each stand-in counted in `pools`' usage).
    pub(crate) fn reservation_stand_ins(
        &self,
        now: DateTime<Utc>,
        pools: &mut [quartermaster_solver::NodePoolSpec],
    ) -> Vec<ExistingNode> {
        let mut used: BTreeMap<&str, u32> = BTreeMap::new();
        for c in self.claims.values().filter(|c| !c.deleting) {
            if let Some(id) = &c.reservation {
                *used.entry(id.as_str()).or_default() += 1;
            }
        }
        let specs: Vec<&quartermaster_solver::NodePoolSpec> =
            self.setup.pools.iter().map(|p| &p.spec).collect();
        crate::reservations::stand_ins(
            &self.reservations,
            &used,
            now,
            &specs,
            pools,
            |pool, choice| self.offering_room(pool, choice, None),
        )
    }

    /// One stand-in per slot of every reservation that takes launches at `now`, as if no claim
    /// held one: the reserved capacity a fleet solved from scratch may fill (the simulator's
    /// hindsight). Each stand-in is counted in `pools`' usage, as for the engine's own solves.
    pub fn reservation_slots(
        &self,
        now: DateTime<Utc>,
        pools: &mut [quartermaster_solver::NodePoolSpec],
    ) -> Vec<ExistingNode> {
        let specs: Vec<&quartermaster_solver::NodePoolSpec> =
            self.setup.pools.iter().map(|p| &p.spec).collect();
        crate::reservations::stand_ins(
            &self.reservations,
            &BTreeMap::new(),
            now,
            &specs,
            pools,
            |pool, choice| self.offering_room(pool, choice, None),
        )
    }

    /// A NodeClaim launched into reservation `id` for pool index `pool`; its name.
    pub(crate) fn reserved_claim(
        &mut self,
        now: DateTime<Utc>,
        id: &str,
        pool: usize,
    ) -> Option<String> {
        let r = self
            .reservations
            .iter()
            .find(|o| o.reservation.id == id)?
            .reservation
            .clone();
        let choice = OfferingChoice {
            instance_type: r.instance_type.clone(),
            zone: r.zone.clone(),
            capacity_type: CapacityType::Reserved,
            price_per_hour: 0.0,
        };
        let pool_name = self.setup.pools.get(pool)?.spec.name.clone();
        let name = self.next_claim_name(&pool_name);
        let mut claim = self.new_claim(now, &name, pool, choice, VecDeque::new(), None)?;
        claim.reservation = Some(r.id.clone());
        claim.facts.labels_mut().extend(r.node_labels());
        self.claims.insert(name.clone(), claim);
        self.stats.claims_created += 1;
        self.stats.reserved_launches += 1;
        Some(name)
    }

    /// Nodes of a reservation that is ending are drained (its pods planned elsewhere at once)
    /// before the cloud reclaims them; claims not launched yet are deleted. A reservation that
    /// opens while pods wait has them solved again.
    pub(crate) fn drain_reservations(&mut self, now: DateTime<Utc>) {
        if self.reservations.is_empty() {
            return;
        }
        let due: Vec<(String, DateTime<Utc>, bool)> = self
            .claims
            .values()
            .filter(|c| !c.deleting && c.interrupted_at.is_none())
            .filter_map(|c| {
                let id = c.reservation.as_deref()?;
                let r = &self
                    .reservations
                    .iter()
                    .find(|o| o.reservation.id == id)?
                    .reservation;
                let drain = r.drain_at().filter(|d| *d <= now)?;
                let reclaim = r.reclaim_at().unwrap_or(drain).max(now);
                Some((c.name.clone(), reclaim, c.provider_id.is_some()))
            })
            .collect();
        for (name, reclaim, launched) in due {
            self.stats.reservation_drains += 1;
            if launched {
                self.vacate(now, &name, reclaim);
            } else {
                self.delete(now, &name, DeleteReason::ReservationEnding);
            }
        }
        let open: BTreeSet<String> = self
            .reservations
            .iter()
            .filter(|o| o.reservation.accepts_launches(now))
            .map(|o| o.reservation.id.clone())
            .collect();
        if open.iter().any(|id| !self.reservations_open.contains(id)) && self.any_unschedulable() {
            self.arrive(now);
            self.batch.force = true;
        }
        self.reservations_open = open;
    }

    /// When a reservation opens, and when the nodes of one must be drained.
    pub(crate) fn reservation_deadlines(&self) -> Vec<DateTime<Utc>> {
        let mut out = Vec::new();
        if self.reservations.is_empty() {
            return out;
        }
        let in_use: BTreeSet<&str> = self
            .claims
            .values()
            .filter_map(|c| c.reservation.as_deref())
            .collect();
        for o in &self.reservations {
            out.extend(o.reservation.start);
            if in_use.contains(o.reservation.id.as_str()) {
                out.extend(o.reservation.drain_at());
            }
        }
        out
    }
}
