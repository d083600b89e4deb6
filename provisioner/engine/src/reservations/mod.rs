//! Reserved capacity in the engine: On-Demand Capacity Reservations and Capacity Blocks.
//!
//! A reservation is paid whether used or not, so its free slots are free room: each free slot
//! a NodePool may use stands in the provisioning snapshot as an empty node (named
//! `reservation/<id>/<pool>/<i>`, in flight, with the reserved offering's labels), and the
//! solver fills those before it buys anything. A pod placed on a stand-in becomes a NodeClaim
//! launched into the reservation (capacity type `reserved`, price 0: nothing more to pay, so
//! consolidation never moves pods off it to save money); the solver never buys a reserved
//! offering as a new node. A pool may use a reservation when its NodeClass selects it (the
//! driver says which) and its requirements allow capacity type `reserved` (Karpenter's rule).
//! A Capacity Block's nodes are drained [`CAPACITY_BLOCK_DRAIN_BEFORE`] before its end, like a
//! spot interruption: their pods are placed elsewhere at once and the node goes when they run
//! there (or when the cloud reclaims it).
//!
//! [`CAPACITY_BLOCK_DRAIN_BEFORE`]: quartermaster_pricing::reservation::CAPACITY_BLOCK_DRAIN_BEFORE

mod slots;

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use quartermaster_pricing::{CapacityType, Reservation};
use quartermaster_solver::{ExistingNode, NodePoolSpec, OfferingChoice, Resources};

/// A reservation and the NodePools whose NodeClass selects it.
#[derive(Debug, Clone, PartialEq)]
pub struct ReservationOffer {
    /// The reservation, as the cloud reports it.
    pub reservation: Reservation,
    /// Names of the NodePools that may launch into it (their NodeClass selects it).
    pub pools: Vec<String>,
}

/// The prefix of a stand-in node's name.
const STAND_IN: &str = "reservation/";

/// The name of the `i`-th free slot of reservation `id`, offered to pool index `pool`.
pub fn stand_in_name(id: &str, pool: usize, i: u32) -> String {
    format!("{STAND_IN}{id}/{pool}/{i}")
}

/// The reservation id and pool index of a stand-in node's name (`None` for any other node).
pub fn parse_stand_in(name: &str) -> Option<(&str, usize)> {
    let rest = name.strip_prefix(STAND_IN)?;
    let mut parts = rest.rsplitn(3, '/');
    let _slot = parts.next()?;
    let pool = parts.next()?.parse().ok()?;
    let id = parts.next()?;
    Some((id, pool))
}

/// What a stand-in for a free slot of a reservation looks like in one pool: its labels (the
/// reserved offering's and the pool's), its capacity (what counts against the pool's limits)
/// and its room for pods (allocatable less DaemonSets).
pub type SlotShape = (BTreeMap<String, String>, Resources, Resources);

/// One empty in-flight node per free slot of every reservation that takes launches at `now`,
/// offered to the first of its pools that allows it (the pool's requirements match the
/// reserved offering's labels, capacity type `reserved` included), as far as the pool's
/// `limits` (nodes, resources) allow; each stand-in counts against its pool's usage in
/// `usage`, so slots and new nodes together never pass a limit.
///
/// `taken` counts the slots of each reservation (by id) already held by nodes; `specs` are the
/// pools as configured (names, requirements, limits, taints) and `usage` the snapshot's pools,
/// same order; `shape` says what a node of the reserved offering is in pool `i` (`None`: the
/// pool cannot have one). The engine and `plan` both build their stand-ins here.
pub fn stand_ins(
    offers: &[ReservationOffer],
    taken: &BTreeMap<&str, u32>,
    now: DateTime<Utc>,
    specs: &[&NodePoolSpec],
    usage: &mut [NodePoolSpec],
    shape: impl Fn(usize, &OfferingChoice) -> Option<SlotShape>,
) -> Vec<ExistingNode> {
    let mut out = Vec::new();
    for offer in offers {
        let r = &offer.reservation;
        let free = r
            .count
            .saturating_sub(taken.get(r.id.as_str()).copied().unwrap_or(0));
        if free == 0 || !r.accepts_launches(now) {
            continue;
        }
        let choice = OfferingChoice {
            instance_type: r.instance_type.clone(),
            zone: r.zone.clone(),
            capacity_type: CapacityType::Reserved,
            price_per_hour: 0.0,
        };
        let usable = offer.pools.iter().find_map(|name| {
            let pool = specs
                .iter()
                .position(|p| p.name == *name && p.cloud == r.cloud)?;
            let (mut labels, capacity, room) = shape(pool, &choice)?;
            specs[pool].requirements.matches(&labels).then(|| {
                labels.extend(r.node_labels());
                (pool, labels, capacity, room)
            })
        });
        let Some((pool, labels, capacity, room)) = usable else {
            continue;
        };
        let spec = specs[pool];
        let Some(usage) = usage.get_mut(pool).map(|p| &mut p.usage) else {
            continue;
        };
        let mut slots = 0;
        while slots < free {
            let nodes = usage.nodes + 1;
            let resources = usage.resources + capacity;
            if spec.limits.nodes.is_some_and(|max| nodes > max)
                || resources.first_excess(&spec.limits.resources).is_some()
            {
                break;
            }
            usage.nodes = nodes;
            usage.resources = resources;
            slots += 1;
        }
        let labels = Arc::new(labels);
        for i in 0..slots {
            out.push(ExistingNode {
                name: stand_in_name(&r.id, pool, i),
                in_flight: true,
                node_pool: Some(spec.name.clone()),
                labels: labels.clone(),
                taints: spec.taints.clone(),
                allocatable: room,
                pods: Vec::new(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stand_in_names_round_trip() {
        let name = stand_in_name("cr-0abc", 2, 7);
        assert_eq!(parse_stand_in(&name), Some(("cr-0abc", 2)));
        assert_eq!(parse_stand_in("node-1"), None);
    }
}
