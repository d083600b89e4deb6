//! How much of the market a catalog covers: per cloud, and within it for the accelerator types
//! and the CPU types apart, the instance types, regions, zones and offerings by capacity type (the
//! table in the README's catalog section, printed by `catalog-gen --coverage`).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::{CapacityType, Catalog, Cloud};

/// The coverage of one cloud's accelerator types, or of its CPU types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coverage {
    /// The cloud.
    pub cloud: Cloud,
    /// Whether these are the accelerator (GPU, Neuron, Gaudi) types or the CPU types.
    pub accelerators: bool,
    /// Instance types with at least one offering.
    pub types: usize,
    /// Regions with at least one offering.
    pub regions: usize,
    /// Zones with at least one offering.
    pub zones: usize,
    /// On-demand offerings (one per type and zone).
    pub on_demand: usize,
    /// Spot offerings.
    pub spot: usize,
    /// Types with a spot offering somewhere.
    pub types_with_spot: usize,
}

/// The coverage of every cloud of `catalog`, in [`Cloud::ALL`] order, accelerator types first.
pub fn coverage(catalog: &Catalog) -> Vec<Coverage> {
    let mut rows = Vec::new();
    for cloud in Cloud::ALL {
        for accelerators in [true, false] {
            let mut c = Coverage {
                cloud,
                accelerators,
                types: 0,
                regions: 0,
                zones: 0,
                on_demand: 0,
                spot: 0,
                types_with_spot: 0,
            };
            let (mut regions, mut zones) = (BTreeSet::new(), BTreeSet::new());
            for t in catalog
                .for_cloud(cloud)
                .filter(|t| !t.offerings.is_empty() && t.accelerator.is_some() == accelerators)
            {
                c.types += 1;
                let spot = t
                    .offerings
                    .iter()
                    .any(|o| o.capacity_type == CapacityType::Spot);
                c.types_with_spot += usize::from(spot);
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
            rows.push(c);
        }
    }
    rows
}

/// The coverage as a Markdown table.
pub fn markdown(rows: &[Coverage]) -> String {
    let mut s = String::from(
        "| cloud | types | instance types | regions | zones | on-demand offerings | spot offerings | types with spot |\n\
         | --- | --- | --- | --- | --- | --- | --- | --- |\n",
    );
    for c in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            c.cloud,
            if c.accelerators {
                "GPU / accelerator"
            } else {
                "CPU"
            },
            c.types,
            c.regions,
            c.zones,
            c.on_demand,
            c.spot,
            c.types_with_spot
        );
    }
    s
}
