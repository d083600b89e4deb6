//! Live EC2 prices: on-demand from the Pricing API (`GetProducts`), spot from
//! `DescribeSpotPriceHistory`, as [`PriceQuote`]s for
//! [`Catalog::with_live_prices`](quartermaster_pricing::Catalog::with_live_prices), which
//! decides which of them to believe.
//!
//! The calls sit behind the [`PriceApi`] port (SDK implementation in `sdk_pricing.rs`); this
//! file parses what they return. One API failing does not lose the other's quotes: a
//! [`PriceFetch`] carries the quotes and the failures side by side.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use quartermaster_pricing::{CapacityType, Cloud, PriceQuote};
use serde_json::Value;

use crate::port::{ApiError, PortFuture};

/// The `source` of on-demand quotes.
pub const SOURCE_PRICING_API: &str = "aws-pricing-api";
/// The `source` of spot quotes.
pub const SOURCE_SPOT_HISTORY: &str = "aws-spot-price-history";
/// The only region the client of the Pricing API uses (the API is served from us-east-1,
/// ap-south-1 and eu-central-1, and answers for every region).
pub const PRICING_API_REGION: &str = "us-east-1";

/// One point of the spot price history.
#[derive(Debug, Clone, PartialEq)]
pub struct SpotPricePoint {
    /// Instance type.
    pub instance_type: String,
    /// Availability zone.
    pub zone: String,
    /// The price as EC2 writes it (USD per hour, a decimal string).
    pub price: String,
    /// Since when the price holds.
    pub timestamp: Option<DateTime<Utc>>,
}

/// The two price calls.
pub trait PriceApi: Send + Sync {
    /// Every `priceList` document (a JSON string each) of `GetProducts` for service `AmazonEC2`
    /// in `region` with operating system Linux, shared tenancy, no pre-installed software and
    /// capacity status Used, all pages.
    fn on_demand_products(&self, region: String) -> PortFuture<'_, Vec<String>>;
    /// `DescribeSpotPriceHistory` for `Linux/UNIX` and `instance_types` from `start` on, all
    /// pages.
    fn spot_price_history(
        &self,
        instance_types: Vec<String>,
        start: DateTime<Utc>,
    ) -> PortFuture<'_, Vec<SpotPricePoint>>;
}

/// What the price APIs said.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PriceFetch {
    /// Quotes, on-demand and spot.
    pub quotes: Vec<PriceQuote>,
    /// Calls that failed (`GetProducts: …`, `DescribeSpotPriceHistory: …`); the embedded
    /// prices stay for what they would have priced.
    pub failures: Vec<String>,
    /// `priceList` documents that could not be read.
    pub unreadable: usize,
}

impl PriceFetch {
    /// True when every call failed.
    pub fn all_failed(&self) -> bool {
        self.quotes.is_empty() && !self.failures.is_empty()
    }
}

/// Asks both APIs for the prices of `instance_types` in `region` (zones are `region` + a
/// letter). Quotes are dated `now`: the Pricing API lists today's prices, and the spot history
/// asked from `now` gives the price in effect now.
pub async fn fetch(
    api: &dyn PriceApi,
    region: &str,
    instance_types: &BTreeSet<String>,
    now: DateTime<Utc>,
) -> PriceFetch {
    let mut fetch = PriceFetch::default();
    match api.on_demand_products(region.to_owned()).await {
        Ok(documents) => {
            let mut lowest: BTreeMap<String, f64> = BTreeMap::new();
            for doc in &documents {
                match on_demand_price(doc) {
                    Some((ty, doc_region, price)) if doc_region == region => {
                        if instance_types.contains(&ty) {
                            let e = lowest.entry(ty).or_insert(price);
                            // NaN never replaces, and a NaN first entry is replaced.
                            if price < *e || e.is_nan() {
                                *e = price;
                            }
                        }
                    }
                    Some(_) => {}
                    None => fetch.unreadable += 1,
                }
            }
            fetch
                .quotes
                .extend(lowest.into_iter().map(|(ty, price)| PriceQuote {
                    cloud: Cloud::Aws,
                    instance_type: ty,
                    region: region.to_owned(),
                    zone: None,
                    capacity_type: CapacityType::OnDemand,
                    price_per_hour: price,
                    source: SOURCE_PRICING_API.to_owned(),
                    fetched_at: now,
                }));
        }
        Err(e) => fetch
            .failures
            .push(format!("GetProducts: {}", describe(&e))),
    }
    match api
        .spot_price_history(instance_types.iter().cloned().collect(), now)
        .await
    {
        Ok(points) => fetch.quotes.extend(
            latest_spot(points)
                .into_iter()
                .filter(|p| quartermaster_pricing::zone_matches_region(Cloud::Aws, region, &p.zone))
                .map(|p| PriceQuote {
                    cloud: Cloud::Aws,
                    price_per_hour: p.price.trim().parse().unwrap_or(f64::NAN),
                    instance_type: p.instance_type,
                    region: region.to_owned(),
                    zone: Some(p.zone),
                    capacity_type: CapacityType::Spot,
                    source: SOURCE_SPOT_HISTORY.to_owned(),
                    fetched_at: now,
                }),
        ),
        Err(e) => fetch
            .failures
            .push(format!("DescribeSpotPriceHistory: {}", describe(&e))),
    }
    fetch
}

/// An API error in one short line (code and message, without the SDK's debug dump of the
/// raw response; never a credential).
pub fn describe(e: &ApiError) -> String {
    const MAX: usize = 300;
    let message = e
        .message
        .split(" (ServiceError")
        .next()
        .and_then(|m| m.split(" (DispatchFailure").next())
        .and_then(|m| m.split(" (TimeoutError").next())
        .and_then(|m| m.split(" (ResponseError").next())
        .unwrap_or(&e.message);
    let mut text = match &e.code {
        Some(code) => format!("{code}: {message}"),
        None => message.to_owned(),
    };
    if text.len() > MAX {
        let cut = (0..=MAX)
            .rev()
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(0);
        text.truncate(cut);
        text.push('…');
    }
    text
}

/// The latest point per (instance type, zone); an unparsable price reads as NaN so the merge
/// rejects it with its reason.
pub fn latest_spot(points: Vec<SpotPricePoint>) -> Vec<SpotPricePoint> {
    let mut latest: BTreeMap<(String, String), SpotPricePoint> = BTreeMap::new();
    for p in points {
        let key = (p.instance_type.clone(), p.zone.clone());
        match latest.get(&key) {
            Some(seen) if seen.timestamp >= p.timestamp => {}
            _ => {
                latest.insert(key, p);
            }
        }
    }
    latest.into_values().collect()
}

/// Reads one `priceList` document: `(instance type, region code, USD per hour)` from
/// `product.attributes` and `terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD` (the hourly
/// dimension). `None` when the document is not of that shape. A price that is not a number
/// reads as NaN (rejected by the merge with its reason).
pub fn on_demand_price(document: &str) -> Option<(String, String, f64)> {
    let v: Value = serde_json::from_str(document).ok()?;
    let attributes = v.pointer("/product/attributes")?;
    let instance_type = attributes.get("instanceType")?.as_str()?.to_owned();
    let region = attributes.get("regionCode")?.as_str()?.to_owned();
    let dimensions = v
        .pointer("/terms/OnDemand")?
        .as_object()?
        .values()
        .filter_map(|term| term.get("priceDimensions")?.as_object())
        .flat_map(|d| d.values());
    let mut price = None;
    for d in dimensions {
        let unit = d.get("unit").and_then(Value::as_str).unwrap_or("Hrs");
        if !unit.eq_ignore_ascii_case("hrs") {
            continue;
        }
        let usd = d.pointer("/pricePerUnit/USD")?.as_str()?;
        price = Some(usd.trim().parse::<f64>().unwrap_or(f64::NAN));
        break;
    }
    Some((instance_type, region, price?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(ty: &str, region: &str, usd: &str) -> String {
        serde_json::json!({
            "product": {
                "productFamily": "Compute Instance",
                "attributes": {
                    "instanceType": ty, "regionCode": region, "operatingSystem": "Linux",
                    "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used"
                },
                "sku": "SKU1"
            },
            "serviceCode": "AmazonEC2",
            "terms": { "OnDemand": { "SKU1.JRTCKXETXF": {
                "priceDimensions": { "SKU1.JRTCKXETXF.6YS6EN2CT7": {
                    "unit": "Hrs", "pricePerUnit": { "USD": usd },
                    "description": "$1.006 per On Demand Linux g5.xlarge Instance Hour"
                } },
                "sku": "SKU1", "effectiveDate": "2026-11-01T00:00:00Z"
            } } },
            "version": "20261120", "publicationDate": "2026-11-20T00:00:00Z"
        })
        .to_string()
    }

    #[test]
    fn reads_the_hourly_on_demand_price_of_a_price_list_document() {
        assert_eq!(
            on_demand_price(&doc("g5.xlarge", "us-east-1", "1.0060000000")),
            Some(("g5.xlarge".into(), "us-east-1".into(), 1.006))
        );
        let (_, _, nan) = on_demand_price(&doc("g5.xlarge", "us-east-1", "n/a")).unwrap();
        assert!(nan.is_nan());
        assert_eq!(on_demand_price("{\"product\": {}}"), None);
        assert_eq!(on_demand_price("not json"), None);
    }

    #[test]
    fn describe_drops_the_sdk_debug_dump() {
        let e = ApiError {
            kind: crate::port::ApiErrorKind::Dispatch,
            code: None,
            message: "dispatch failure: io error: Connection refused (DispatchFailure(DispatchFailure { source: .. }))".into(),
            status: None,
            retry_after: None,
        };
        assert_eq!(
            describe(&e),
            "dispatch failure: io error: Connection refused"
        );
        let long = ApiError {
            message: "x".repeat(1000),
            ..e
        };
        assert!(describe(&long).chars().count() <= 301);
    }

    #[test]
    fn keeps_the_latest_spot_point_per_type_and_zone() {
        let t = |h: i64| DateTime::from_timestamp(1_780_000_000 + h * 3600, 0);
        let p = |zone: &str, price: &str, ts| SpotPricePoint {
            instance_type: "g5.xlarge".into(),
            zone: zone.into(),
            price: price.into(),
            timestamp: t(ts),
        };
        let latest = latest_spot(vec![
            p("us-east-1a", "0.30", 1),
            p("us-east-1a", "0.35", 2),
            p("us-east-1b", "0.40", 0),
        ]);
        assert_eq!(latest.len(), 2);
        assert_eq!(latest[0].price, "0.35");
        assert_eq!(latest[1].price, "0.40");
    }
}
