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

use quartermaster_pricing::Reservation;

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
pub(crate) fn stand_in_name(id: &str, pool: usize, i: u32) -> String {
    format!("{STAND_IN}{id}/{pool}/{i}")
}

/// The reservation id and pool index of a stand-in node's name.
pub(crate) fn parse_stand_in(name: &str) -> Option<(&str, usize)> {
    let rest = name.strip_prefix(STAND_IN)?;
    let mut parts = rest.rsplitn(3, '/');
    let _slot = parts.next()?;
    let pool = parts.next()?.parse().ok()?;
    let id = parts.next()?;
    Some((id, pool))
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
