//! The catalog the engine solves with: the one it was given, restricted to the regions its
//! pools may buy in (a solve never label-matches offerings no pool can use), with reserved and
//! flex-start offerings added; and new prices, which price claims again.

use std::collections::{BTreeMap, BTreeSet};

use quartermaster_policies::labels::LABEL_REGION;
use quartermaster_pricing::{Catalog, Cloud};

use crate::engine::Engine;
use crate::pools::PoolPolicy;

/// Per cloud with pools: the regions its pools may buy in, `None` when one of them may buy in
/// any region. Clouds without pools are not listed (their offerings are kept).
pub(crate) type PoolRegions = BTreeMap<Cloud, Option<BTreeSet<String>>>;

/// Where `pools` may buy.
pub(crate) fn pool_regions(pools: &[PoolPolicy]) -> PoolRegions {
    let mut out: PoolRegions = BTreeMap::new();
    for p in pools {
        let allowed = p
            .spec
            .requirements
            .get(LABEL_REGION)
            .and_then(|r| r.values().cloned());
        match (
            out.entry(p.spec.cloud).or_insert(Some(BTreeSet::new())),
            allowed,
        ) {
            (Some(set), Some(values)) => set.extend(values),
            (slot, _) => *slot = None,
        }
    }
    out
}

/// `catalog` without the offerings no pool may buy.
pub(crate) fn for_pools(catalog: &Catalog, regions: &PoolRegions) -> Catalog {
    if regions.values().all(Option::is_none) {
        return catalog.clone();
    }
    catalog.retain_regions(|cloud, region| match regions.get(&cloud) {
        Some(Some(set)) => set.contains(region),
        Some(None) | None => true,
    })
}

/// `catalog` cut to the regions `pools` may buy in, as the engine solves with it (before its
/// reserved and flex-start offerings): for a caller that solves beside the engine, such as the
/// simulator's measurements, so that offerings no pool can buy cost its solves nothing.
pub fn catalog_for_pools(catalog: &Catalog, pools: &[PoolPolicy]) -> Catalog {
    for_pools(catalog, &pool_regions(pools))
}

impl Engine {
    /// `given` as the engine solves with it: cut to the pools' regions, with the reserved
    /// offerings of the reservations it knows (flex-start offerings are added by the caller).
    fn solving_catalog(&self, given: &Catalog) -> Catalog {
        let reservations: Vec<quartermaster_pricing::Reservation> = self
            .reservations
            .iter()
            .map(|o| o.reservation.clone())
            .collect();
        for_pools(given, &self.pool_regions).with_reserved_offerings(&reservations)
    }

    /// The pools changed: when they may buy in other regions now, the catalog is restricted
    /// again from the one given (with the reservations' offerings).
    pub(crate) fn pool_regions_changed(&mut self) {
        let regions = pool_regions(&self.setup.pools);
        if regions == self.pool_regions {
            return;
        }
        self.pool_regions = regions;
        self.setup.catalog = self.solving_catalog(&self.given_catalog);
    }

    /// New prices: claims are priced again (what they cost now is what removing them saves).
    pub(crate) fn catalog_changed(&mut self, catalog: Catalog) {
        self.setup.catalog = self.solving_catalog(&catalog);
        self.given_catalog = catalog;
        self.add_flex_start_offerings();
        for c in self.claims.values_mut() {
            let price = |o: &quartermaster_solver::OfferingChoice| {
                self.setup
                    .catalog
                    .get(c.cloud, &o.instance_type)?
                    .offerings
                    .iter()
                    .find(|x| x.zone == o.zone && x.capacity_type == o.capacity_type)
                    .map(|x| x.price_per_hour)
            };
            if let Some(p) = price(&c.offering) {
                c.offering.price_per_hour = p;
            }
            let updated: Vec<Option<f64>> = c.alternatives.iter().map(&price).collect();
            for (o, p) in c.alternatives.iter_mut().zip(updated) {
                if let Some(p) = p {
                    o.price_per_hour = p;
                }
            }
        }
    }
}
