//! List prices (`ListCost`) from the price catalog, for drivers whose inputs carry only the
//! billed price (Prometheus series).

use quartermaster_pricing::{CapacityType, Catalog};

use crate::usage::NodeUsage;

/// The on-demand price of the node's instance type in its zone (else the cheapest on-demand
/// offering of the type), never below the billed price; `None` when the catalog does not know
/// the type.
pub fn catalog_list_price(catalog: &Catalog, node: &NodeUsage) -> Option<f64> {
    let it = catalog.get(node.cloud, &node.instance_type)?;
    let on_demand = it
        .offerings
        .iter()
        .find(|o| o.zone == node.zone && o.capacity_type == CapacityType::OnDemand)
        .or_else(|| it.cheapest_offering(Some(CapacityType::OnDemand)))?;
    Some(on_demand.price_per_hour.max(node.price_per_hour))
}

/// Sets `list_price_per_hour` from the catalog where it is unknown.
pub fn fill_list_prices(catalog: &Catalog, nodes: &mut [NodeUsage]) {
    for node in nodes {
        if node.list_price_per_hour.is_none() {
            node.list_price_per_hour = catalog_list_price(catalog, node);
        }
    }
}

#[cfg(test)]
mod tests {
    use chrono::DateTime;
    use quartermaster_pricing::Cloud;

    use super::*;
    use crate::usage::Amounts;

    #[test]
    fn a_spot_node_lists_at_the_on_demand_price_of_its_zone() {
        let catalog = Catalog::embedded();
        let it = catalog
            .for_cloud(Cloud::Gcp)
            .find(|it| {
                it.offerings
                    .iter()
                    .any(|o| o.capacity_type == CapacityType::Spot)
                    && it
                        .offerings
                        .iter()
                        .any(|o| o.capacity_type == CapacityType::OnDemand)
            })
            .expect("the catalog has a GCP type with spot and on-demand offerings");
        let spot = it
            .offerings
            .iter()
            .find(|o| o.capacity_type == CapacityType::Spot)
            .unwrap();
        let mut nodes = vec![NodeUsage {
            node: "n".into(),
            nodeclaim: "c".into(),
            nodepool: "p".into(),
            cloud: Cloud::Gcp,
            region: spot.region.clone(),
            zone: spot.zone.clone(),
            instance_type: it.name.clone(),
            capacity_type: CapacityType::Spot,
            price_per_hour: spot.price_per_hour,
            list_price_per_hour: None,
            price_source: String::new(),
            accelerator: String::new(),
            accelerator_count: 0,
            allocatable: Amounts::default(),
            start: DateTime::UNIX_EPOCH,
            end: None,
        }];
        let unknown = NodeUsage {
            instance_type: "no-such-type".into(),
            ..nodes[0].clone()
        };
        nodes.push(unknown);
        fill_list_prices(&catalog, &mut nodes);
        let list = nodes[0].list_price_per_hour.unwrap();
        assert!(list >= spot.price_per_hour);
        assert_eq!(nodes[1].list_price_per_hour, None);
    }
}
