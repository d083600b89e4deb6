//! `catalog -o toml`: the selected instance types as a catalog file that `--catalog FILE`
//! reads back (`mode = "extend"`), every offering written out with its region, price, source,
//! date and interruption band, so `plan` and `simulate` can run on today's prices.

use chrono::NaiveDate;
use quartermaster_pricing::{Accelerator, Catalog, InstanceType, Offering, Overhead};
use serde::Serialize;

#[derive(Serialize)]
struct File<'a> {
    schema: u32,
    mode: &'static str,
    instance_type: Vec<Entry<'a>>,
}

#[derive(Serialize)]
struct Entry<'a> {
    name: &'a str,
    cloud: String,
    family: &'a str,
    vcpu: u32,
    memory_mib: u64,
    arch: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    accelerator: Option<&'a Accelerator>,
    local_nvme_gb: u64,
    network_gbps: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    interconnect: Option<String>,
    efa_count: u32,
    max_pods: u32,
    overhead: Overhead,
    offerings: Vec<OfferingEntry>,
}

#[derive(Serialize)]
struct OfferingEntry {
    region: String,
    zone: String,
    capacity_type: String,
    price: f64,
    source: String,
    as_of: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    estimate: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: Option<String>,
    available: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    interruption: Option<Band>,
}

#[derive(Serialize)]
struct Band {
    band: String,
    source: String,
    as_of: String,
}

fn date(d: NaiveDate) -> String {
    d.format("%Y-%m-%d").to_string()
}

/// Splits a source `"KEY [estimate: RULE]"` back into the key and the rule.
fn source_and_rule(o: &Offering) -> (String, Option<String>) {
    if !o.estimate {
        return (o.price_source.clone(), None);
    }
    match o
        .price_source
        .split_once(" [estimate: ")
        .and_then(|(s, r)| Some((s, r.strip_suffix(']')?)))
    {
        Some((source, rule)) => (source.to_owned(), Some(rule.to_owned())),
        None => (
            o.price_source.clone(),
            Some("as the source says".to_owned()),
        ),
    }
}

/// The TOML text of `types` (each with the offerings given for it).
pub fn to_toml(
    catalog: &Catalog,
    types: &[(&InstanceType, Vec<&Offering>)],
) -> anyhow::Result<String> {
    let file = File {
        schema: 1,
        mode: "extend",
        instance_type: types
            .iter()
            .map(|(t, offerings)| Entry {
                name: &t.name,
                cloud: t.cloud.to_string(),
                family: &t.family,
                vcpu: t.vcpu,
                memory_mib: t.memory_mib,
                arch: t.arch.to_string(),
                accelerator: t.accelerator.as_ref(),
                local_nvme_gb: t.local_nvme_gb,
                network_gbps: t.network_gbps,
                interconnect: t.interconnect.map(|i| i.to_string()),
                efa_count: t.efa_count,
                max_pods: t.max_pods,
                overhead: t.overhead,
                offerings: offerings
                    .iter()
                    .map(|o| {
                        let (source, rule) = source_and_rule(o);
                        OfferingEntry {
                            region: o.region.clone(),
                            zone: o.zone.clone(),
                            capacity_type: o.capacity_type.to_string(),
                            price: o.price_per_hour,
                            source,
                            as_of: date(o.price_as_of),
                            estimate: o.estimate,
                            rule,
                            available: o.available,
                            interruption: catalog.spot_interruption(t, o).map(|s| Band {
                                band: s.band.to_string(),
                                source: s.source.clone(),
                                as_of: date(s.as_of),
                            }),
                        }
                    })
                    .collect(),
            })
            .collect(),
    };
    Ok(toml::to_string(&file)?)
}
