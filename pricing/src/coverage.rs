//! How much of the market a catalog covers: per cloud, its instance types, regions, zones and
//! offerings by capacity type (the table in the README's catalog section).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::{CapacityType, Catalog, Cloud};

/// The coverage of one cloud.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coverage {
    /// The cloud.
    pub cloud: Cloud,
    /// Instance types with at least one offering.
    pub types: usize,
    /// Of those, types with an accelerator (GPU, Neuron, Gaudi).
    pub accelerator_types: usize,
    /// Regions with at least one offering.
    pub regions: usize,
    /// Zones with at least one offering.
    pub zones: usize,
    /// On-demand offerings (one per type and zone).
    pub on_demand: usize,
    /// Spot offerings.
    pub spot: usize,
    /// Accelerator types with a spot offering somewhere.
    pub accelerator_types_with_spot: usize,
}

/// The coverage of every cloud of `catalog`, in [`Cloud::ALL`] order.
pub fn coverage(catalog: &Catalog) -> Vec<Coverage> {
    Cloud::ALL
        .into_iter()
        .map(|cloud| {
            let mut c = Coverage {
                cloud,
                types: 0,
                accelerator_types: 0,
                regions: 0,
                zones: 0,
                on_demand: 0,
                spot: 0,
                accelerator_types_with_spot: 0,
            };
            let (mut regions, mut zones) = (BTreeSet::new(), BTreeSet::new());
            for t in catalog.for_cloud(cloud).filter(|t| !t.offerings.is_empty()) {
                c.types += 1;
                let spot = t
                    .offerings
                    .iter()
                    .any(|o| o.capacity_type == CapacityType::Spot);
                if t.accelerator.is_some() {
                    c.accelerator_types += 1;
                    c.accelerator_types_with_spot += usize::from(spot);
                }
                for o in &t.offerings {
                    regions.insert(o.region.as_str());
                    zones.insert(o.zone.as_str());
                    match o.capacity_type {
                        CapacityType::OnDemand => c.on_demand += 1,
                        CapacityType::Spot => c.spot += 1,
                        CapacityType::Reserved | CapacityType::FlexStart => {}
                    }
                }
            }
            c.regions = regions.len();
            c.zones = zones.len();
            c
        })
        .collect()
}

/// The coverage as a Markdown table.
pub fn markdown(rows: &[Coverage]) -> String {
    let mut s = String::from(
        "| cloud | types (accelerator) | regions | zones | on-demand offerings | spot offerings | accelerator types with spot |\n\
         | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for c in rows {
        let _ = writeln!(
            s,
            "| {} | {} ({}) | {} | {} | {} | {} | {} |",
            c.cloud,
            c.types,
            c.accelerator_types,
            c.regions,
            c.zones,
            c.on_demand,
            c.spot,
            c.accelerator_types_with_spot
        );
    }
    s
}
