//! Live prices from the Cloud Billing Catalog API: the Compute Engine service's SKUs
//! (`services/6F81-5844-456A/skus`) priced per vCPU hour, per GiB of RAM hour and per GPU
//! hour, each per machine family, usage type (on-demand, spot) and region. A machine type's
//! price is the sum of its parts: vCPUs × core SKU + GiB × RAM SKU + GPUs × GPU SKU. Types
//! whose parts are not all priced get no quote (the embedded price stays).
//!
//! Parsing here; the HTTP calls are in [`fetch`].

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use quartermaster_pricing::{CapacityType, Catalog, Cloud, InstanceType, PriceQuote};
use serde::Deserialize;

use crate::errors::GcpError;

pub mod fetch;

/// The public Cloud Billing API.
pub const BILLING_ENDPOINT: &str = "https://cloudbilling.googleapis.com";
/// Compute Engine's service id in the Cloud Billing Catalog.
pub const COMPUTE_SERVICE: &str = "services/6F81-5844-456A";
/// The `source` of the quotes.
pub const SOURCE: &str = "gcp-cloud-billing-catalog";

/// One page of `services/…/skus`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkuPage {
    /// The SKUs.
    #[serde(default)]
    pub skus: Vec<Sku>,
    /// The next page's token; empty on the last page.
    #[serde(default)]
    pub next_page_token: String,
}

/// One SKU, as far as pricing reads it.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Sku {
    /// `N2 Instance Core running in Americas`, `Spot Preemptible Nvidia L4 GPU running in …`.
    #[serde(default)]
    pub description: String,
    /// Resource family and usage type.
    #[serde(default)]
    pub category: SkuCategory,
    /// Regions the price holds in.
    #[serde(default)]
    pub service_regions: Vec<String>,
    /// Prices (the current one first).
    #[serde(default)]
    pub pricing_info: Vec<PricingInfo>,
}

/// A SKU's category.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkuCategory {
    /// `Compute`, `Storage`, `Network`, ...
    #[serde(default)]
    pub resource_family: String,
    /// `OnDemand`, `Preemptible`, `Commit1Yr`, ...
    #[serde(default)]
    pub usage_type: String,
}

/// One price of a SKU.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PricingInfo {
    /// The tiers.
    #[serde(default)]
    pub pricing_expression: PricingExpression,
}

/// A SKU's tiered price.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PricingExpression {
    /// `h` (per vCPU or GPU hour) or `GiBy.h` (per GiB hour).
    #[serde(default)]
    pub usage_unit: String,
    /// Tiers by usage; the first starts at 0.
    #[serde(default)]
    pub tiered_rates: Vec<TieredRate>,
}

/// One tier.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TieredRate {
    /// Where the tier starts.
    #[serde(default)]
    pub start_usage_amount: f64,
    /// The price per usage unit.
    #[serde(default)]
    pub unit_price: Money,
}

/// `google.type.Money`: whole units (a decimal string) and nanos.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Money {
    /// ISO currency code.
    #[serde(default)]
    pub currency_code: String,
    /// Whole units, as a decimal string.
    #[serde(default)]
    pub units: String,
    /// Billionths of a unit.
    #[serde(default)]
    pub nanos: i64,
}

impl Money {
    /// The amount as a float; `None` when the units do not parse.
    pub fn value(&self) -> Option<f64> {
        let units: f64 = if self.units.is_empty() {
            0.0
        } else {
            self.units.parse().ok()?
        };
        Some(units + self.nanos as f64 / 1e9)
    }
}

/// One page of SKUs from its JSON.
pub fn parse_page(json: &str) -> Result<SkuPage, GcpError> {
    serde_json::from_str(json).map_err(|e| GcpError::Prices(format!("the SKU list: {e}")))
}

/// What a SKU prices.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Part {
    /// A vCPU of a machine family (`n2`).
    Core(String),
    /// A GiB of RAM of a machine family.
    Ram(String),
    /// A GPU (`l4`, `a100 80gb`, `h100 80gb`).
    Gpu(String),
}

/// The part a SKU description names, if it names one we price (not custom, sole-tenant,
/// commitment or reservation SKUs).
fn part(description: &str) -> Option<Part> {
    let d = description
        .strip_prefix("Spot Preemptible ")
        .unwrap_or(description);
    let d = d.split(" running in ").next().unwrap_or(d).trim();
    let lower = d.to_ascii_lowercase();
    if let Some(gpu) = lower.strip_prefix("nvidia ") {
        let gpu = gpu.strip_prefix("tesla ").unwrap_or(gpu);
        let model = gpu.strip_suffix(" gpu")?;
        return Some(Part::Gpu(model.to_owned()));
    }
    let (family, rest) = lower.split_once(' ')?;
    match rest {
        "instance core" | "predefined instance core" => Some(Part::Core(family.to_owned())),
        "instance ram" | "predefined instance ram" => Some(Part::Ram(family.to_owned())),
        _ => None,
    }
}

/// The price of a SKU's first tier, in USD.
fn price(sku: &Sku) -> Option<f64> {
    let info = sku.pricing_info.first()?;
    let rate = info
        .pricing_expression
        .tiered_rates
        .iter()
        .min_by(|a, b| a.start_usage_amount.total_cmp(&b.start_usage_amount))?;
    if !rate.unit_price.currency_code.is_empty() && rate.unit_price.currency_code != "USD" {
        return None;
    }
    rate.unit_price.value()
}

/// Prices per (capacity type, part) in `region`.
fn parts(skus: &[Sku], region: &str) -> BTreeMap<(CapacityType, Part), f64> {
    let mut out = BTreeMap::new();
    for sku in skus {
        if sku.category.resource_family != "Compute"
            || !sku.service_regions.iter().any(|r| r == region)
        {
            continue;
        }
        let capacity_type = match sku.category.usage_type.as_str() {
            "OnDemand" => CapacityType::OnDemand,
            "Preemptible" => CapacityType::Spot,
            _ => continue,
        };
        let (Some(part), Some(price)) = (part(&sku.description), price(sku)) else {
            continue;
        };
        out.entry((capacity_type, part)).or_insert(price);
    }
    out
}

/// The GPU SKU names a catalog accelerator may go by, most specific first
/// (`a100 80gb`, then `a100`).
fn gpu_keys(it: &InstanceType) -> Vec<String> {
    let Some(a) = &it.accelerator else {
        return Vec::new();
    };
    let gib = a.memory_mib / 1024;
    vec![format!("{} {gib}gb", a.name), a.name.clone()]
}

/// The price of `it` from the parts, when every part it needs is priced.
fn machine_price(
    it: &InstanceType,
    capacity_type: CapacityType,
    parts: &BTreeMap<(CapacityType, Part), f64>,
) -> Option<f64> {
    let get = |p: Part| parts.get(&(capacity_type, p)).copied();
    let core = get(Part::Core(it.family.clone()))?;
    let ram = get(Part::Ram(it.family.clone()))?;
    let mut total = f64::from(it.vcpu) * core + it.memory_mib as f64 / 1024.0 * ram;
    if let Some(a) = &it.accelerator {
        let gpu = gpu_keys(it).into_iter().find_map(|k| get(Part::Gpu(k)))?;
        total += f64::from(a.count) * gpu;
    }
    Some(total)
}

/// The quotes for every GCP machine type of `catalog` that `skus` price in `region`, fetched
/// at `now`.
pub fn quotes(
    skus: &[Sku],
    catalog: &Catalog,
    region: &str,
    now: DateTime<Utc>,
) -> Vec<PriceQuote> {
    let parts = parts(skus, region);
    let mut out = Vec::new();
    for it in catalog.for_cloud(Cloud::Gcp) {
        for capacity_type in [CapacityType::OnDemand, CapacityType::Spot] {
            if let Some(price) = machine_price(it, capacity_type, &parts) {
                out.push(PriceQuote {
                    cloud: Cloud::Gcp,
                    instance_type: it.name.clone(),
                    region: region.to_owned(),
                    zone: None,
                    capacity_type,
                    price_per_hour: price,
                    source: SOURCE.to_owned(),
                    fetched_at: now,
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A page in the shape the Billing Catalog API answers (prices made up, round).
    const PAGE: &str = r#"{
      "skus": [
        {"name": "services/6F81-5844-456A/skus/0001", "skuId": "0001",
         "description": "G2 Instance Core running in Americas",
         "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute", "resourceGroup": "CPU", "usageType": "OnDemand"},
         "serviceRegions": ["us-central1", "us-east1"],
         "pricingInfo": [{"pricingExpression": {"usageUnit": "h", "baseUnit": "s", "baseUnitConversionFactor": 3600,
            "tieredRates": [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": "0", "nanos": 25000000}}]}}]},
        {"description": "G2 Instance Ram running in Americas",
         "category": {"resourceFamily": "Compute", "usageType": "OnDemand"},
         "serviceRegions": ["us-central1"],
         "pricingInfo": [{"pricingExpression": {"usageUnit": "GiBy.h",
            "tieredRates": [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": "0", "nanos": 3000000}}]}}]},
        {"description": "Nvidia L4 GPU running in Americas",
         "category": {"resourceFamily": "Compute", "usageType": "OnDemand"},
         "serviceRegions": ["us-central1"],
         "pricingInfo": [{"pricingExpression": {"usageUnit": "h",
            "tieredRates": [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": "0", "nanos": 500000000}}]}}]},
        {"description": "Spot Preemptible G2 Instance Core running in Americas",
         "category": {"resourceFamily": "Compute", "usageType": "Preemptible"},
         "serviceRegions": ["us-central1"],
         "pricingInfo": [{"pricingExpression": {"usageUnit": "h",
            "tieredRates": [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": "0", "nanos": 10000000}}]}}]},
        {"description": "Spot Preemptible G2 Instance Ram running in Americas",
         "category": {"resourceFamily": "Compute", "usageType": "Preemptible"},
         "serviceRegions": ["us-central1"],
         "pricingInfo": [{"pricingExpression": {"usageUnit": "GiBy.h",
            "tieredRates": [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": "0", "nanos": 1000000}}]}}]},
        {"description": "Spot Preemptible Nvidia L4 GPU running in Americas",
         "category": {"resourceFamily": "Compute", "usageType": "Preemptible"},
         "serviceRegions": ["us-central1"],
         "pricingInfo": [{"pricingExpression": {"usageUnit": "h",
            "tieredRates": [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": "0", "nanos": 200000000}}]}}]},
        {"description": "Commitment v1: G2 Cpu in Americas for 1 Year",
         "category": {"resourceFamily": "Compute", "usageType": "Commit1Yr"},
         "serviceRegions": ["us-central1"],
         "pricingInfo": [{"pricingExpression": {"usageUnit": "h",
            "tieredRates": [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": "0", "nanos": 1000}}]}}]},
        {"description": "G2 Custom Instance Core running in Americas",
         "category": {"resourceFamily": "Compute", "usageType": "OnDemand"},
         "serviceRegions": ["us-central1"],
         "pricingInfo": [{"pricingExpression": {"usageUnit": "h",
            "tieredRates": [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": "9", "nanos": 0}}]}}]},
        {"description": "Storage PD Capacity",
         "category": {"resourceFamily": "Storage", "usageType": "OnDemand"},
         "serviceRegions": ["us-central1"],
         "pricingInfo": [{"pricingExpression": {"usageUnit": "GiBy.mo",
            "tieredRates": [{"startUsageAmount": 0, "unitPrice": {"currencyCode": "USD", "units": "0", "nanos": 40000000}}]}}]}
      ],
      "nextPageToken": "page-2"
    }"#;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn descriptions_name_parts() {
        assert_eq!(
            part("N1 Predefined Instance Core running in Americas"),
            Some(Part::Core("n1".into()))
        );
        assert_eq!(
            part("Spot Preemptible A2 Instance Ram running in Americas"),
            Some(Part::Ram("a2".into()))
        );
        assert_eq!(
            part("Nvidia Tesla A100 80GB GPU running in Americas"),
            Some(Part::Gpu("a100 80gb".into()))
        );
        assert_eq!(
            part("Nvidia H100 80GB GPU running in Americas"),
            Some(Part::Gpu("h100 80gb".into()))
        );
        assert_eq!(part("N2 Custom Instance Core running in Americas"), None);
        assert_eq!(
            part("N2 Sole Tenancy Instance Core running in Americas"),
            None
        );
        assert_eq!(part("Commitment v1: G2 Cpu in Americas for 1 Year"), None);
    }

    #[test]
    fn a_page_parses_with_its_token() {
        let page = parse_page(PAGE).unwrap();
        assert_eq!(page.skus.len(), 9);
        assert_eq!(page.next_page_token, "page-2");
        assert!(close(price(&page.skus[0]).unwrap(), 0.025));
        assert!(parse_page("{\"skus\": 3}").is_err());
        assert!(parse_page("{}").unwrap().skus.is_empty());
    }

    #[test]
    fn machine_types_are_priced_as_the_sum_of_cores_ram_and_gpus() {
        let page = parse_page(PAGE).unwrap();
        let now = DateTime::<Utc>::from_timestamp(1_764_547_200, 0).unwrap();
        let q = quotes(&page.skus, &Catalog::embedded(), "us-central1", now);
        let g2 = |c: CapacityType| {
            q.iter()
                .find(|q| q.instance_type == "g2-standard-4" && q.capacity_type == c)
                .map(|q| q.price_per_hour)
        };
        // g2-standard-4: 4 vCPU, 16 GiB, 1 L4.
        assert!(close(
            g2(CapacityType::OnDemand).unwrap(),
            4.0 * 0.025 + 16.0 * 0.003 + 0.5
        ));
        assert!(close(
            g2(CapacityType::Spot).unwrap(),
            4.0 * 0.01 + 16.0 * 0.001 + 0.2
        ));
        assert!(q.iter().all(|q| q.source == SOURCE && q.zone.is_none()));
        // No N2 or A2 SKUs on the page: no quote, the embedded price stays.
        assert!(!q.iter().any(|q| q.instance_type.starts_with("n2-")));
        assert!(!q.iter().any(|q| q.instance_type.starts_with("a2-")));
        // The RAM SKU does not hold in us-east1: nothing there.
        assert!(quotes(&page.skus, &Catalog::embedded(), "us-east1", now).is_empty());
    }

    #[test]
    fn money_reads_units_and_nanos() {
        let m = Money {
            currency_code: "USD".into(),
            units: "2".into(),
            nanos: 500_000_000,
        };
        assert!(close(m.value().unwrap(), 2.5));
        let bad = Money {
            units: "x".into(),
            ..m
        };
        assert_eq!(bad.value(), None);
    }
}
