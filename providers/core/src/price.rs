//! The catalog's price of what a provider launched, for the [`Instance`](crate::Instance) it
//! reports: the offering in the instance's zone, else the same capacity type in any zone.

use quartermaster_pricing::{CapacityType, Catalog, Cloud, InstanceType};

/// The price per hour of `t` as `capacity_type` in `zone`, or in any zone when `zone` has no
/// such offering; `None` when the type has no offering of that capacity type.
pub fn offering_price(t: &InstanceType, zone: &str, capacity_type: CapacityType) -> Option<f64> {
    t.offerings
        .iter()
        .find(|o| o.zone == zone && o.capacity_type == capacity_type)
        .or_else(|| {
            t.offerings
                .iter()
                .find(|o| o.capacity_type == capacity_type)
        })
        .map(|o| o.price_per_hour)
}

/// [`offering_price`] of `cloud`'s `instance_type` in `catalog`: 0 when the catalog has no
/// such type or offering (reserved capacity, paid whether used or not).
pub fn catalog_price(
    catalog: &Catalog,
    cloud: Cloud,
    instance_type: &str,
    zone: &str,
    capacity_type: CapacityType,
) -> f64 {
    catalog
        .get(cloud, instance_type)
        .and_then(|t| offering_price(t, zone, capacity_type))
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_zones_offering_first_then_any_zones_then_zero() {
        let catalog = Catalog::embedded();
        let t = catalog
            .for_cloud(Cloud::Aws)
            .find(|t| {
                t.offerings
                    .iter()
                    .any(|o| o.capacity_type == CapacityType::OnDemand)
            })
            .expect("an AWS type with on-demand offerings");
        let o = t
            .offerings
            .iter()
            .find(|o| o.capacity_type == CapacityType::OnDemand)
            .unwrap();
        assert_eq!(
            catalog_price(
                &catalog,
                Cloud::Aws,
                &t.name,
                &o.zone,
                CapacityType::OnDemand
            ),
            o.price_per_hour
        );
        let anywhere = catalog_price(
            &catalog,
            Cloud::Aws,
            &t.name,
            "nowhere-1z",
            CapacityType::OnDemand,
        );
        assert!(anywhere > 0.0);
        assert_eq!(
            catalog_price(
                &catalog,
                Cloud::Aws,
                "no-such-type",
                &o.zone,
                CapacityType::OnDemand
            ),
            0.0
        );
    }
}
