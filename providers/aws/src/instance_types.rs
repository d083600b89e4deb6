//! The instance types this region offers: DescribeInstanceTypes / DescribeInstanceTypeOfferings
//! merged with the embedded catalog. The API says which types exist and in which zones; the
//! catalog's facts win for prices (EC2 has no price in these calls), and fill what the catalog
//! does not know (accelerator memory, EFA interfaces).

use std::collections::{BTreeMap, BTreeSet};

use quartermaster_pricing::{Catalog, Cloud, InstanceType};

use crate::port::InstanceTypeInfo;

/// The catalog's AWS types that the API lists, with the offerings in zones the API offers them
/// in (and in `region`, when known).
pub fn merge(
    catalog: &Catalog,
    region: Option<&str>,
    types: &[InstanceTypeInfo],
    offerings: &[(String, String)],
) -> Vec<InstanceType> {
    let api: BTreeMap<&str, &InstanceTypeInfo> =
        types.iter().map(|t| (t.name.as_str(), t)).collect();
    let mut zones: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
    for (ty, zone) in offerings {
        zones.entry(ty.as_str()).or_default().insert(zone.as_str());
    }
    let mut out = Vec::new();
    for it in catalog.for_cloud(Cloud::Aws) {
        let Some(info) = api.get(it.name.as_str()) else {
            continue;
        };
        let offered = zones.get(it.name.as_str());
        let mut it = it.clone();
        it.offerings.retain(|o| {
            region.is_none_or(|r| o.region == r)
                && offered.is_some_and(|z| z.contains(o.zone.as_str()))
        });
        if it.offerings.is_empty() {
            continue;
        }
        if let (Some(acc), Some(gpu)) = (it.accelerator.as_mut(), info.gpus.first())
            && acc.memory_mib == 0
        {
            acc.memory_mib = gpu.3;
        }
        if it.efa_count == 0 {
            it.efa_count = info.efa_count;
        }
        out.push(it);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(name: &str) -> InstanceTypeInfo {
        InstanceTypeInfo {
            name: name.into(),
            vcpus: 4,
            memory_mib: 16384,
            architectures: vec!["x86_64".into()],
            gpus: vec![("NVIDIA".into(), "A10G".into(), 1, 24576)],
            efa_count: 0,
        }
    }

    #[test]
    fn only_types_and_zones_the_api_offers_remain_with_catalog_prices() {
        let catalog = Catalog::embedded();
        let g5 = catalog
            .get(Cloud::Aws, "g5.xlarge")
            .expect("g5.xlarge in the catalog");
        let zone = g5.offerings[0].zone.clone();
        let region = g5.offerings[0].region.clone();
        let merged = merge(
            &catalog,
            Some(&region),
            &[info("g5.xlarge")],
            &[("g5.xlarge".into(), zone.clone())],
        );
        assert_eq!(merged.len(), 1);
        assert!(merged[0].offerings.iter().all(|o| o.zone == zone));
        let price = g5
            .offerings
            .iter()
            .find(|o| o.zone == zone)
            .map(|o| o.price_per_hour);
        assert_eq!(merged[0].offerings.first().map(|o| o.price_per_hour), price);
    }

    #[test]
    fn a_type_the_api_does_not_list_is_dropped() {
        let catalog = Catalog::embedded();
        assert!(merge(&catalog, None, &[], &[]).is_empty());
    }
}
