//! Live prices from the Azure Retail Prices API (`GET /api/retail/prices?$filter=…`, no
//! authentication): Linux pay-as-you-go and spot meters of virtual machines in one region, as
//! [`PriceQuote`]s. Spot meters end in " Spot"; Windows products and Low Priority meters are left
//! out. The endpoint is `https://prices.azure.com` unless `AZURE_PRICES_ENDPOINT` says otherwise.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use quartermaster_pricing::{CapacityType, Cloud, PriceQuote};
use serde::Deserialize;

use crate::errors::AzureError;

/// The public Retail Prices API.
pub const DEFAULT_PRICES_ENDPOINT: &str = "https://prices.azure.com";
/// The variable that points the price look-ups elsewhere.
pub const PRICES_ENDPOINT_ENV: &str = "AZURE_PRICES_ENDPOINT";
/// What each quote's `source` says.
pub const SOURCE: &str = "azure-retail-prices";
/// VM sizes per request (each one an `armSkuName eq '…'` clause of the filter).
const SIZES_PER_REQUEST: usize = 15;
/// Pages followed per request at most.
const MAX_PAGES: usize = 20;

/// The Retail Prices endpoint: `AZURE_PRICES_ENDPOINT`, else the public one.
pub fn prices_endpoint() -> String {
    std::env::var(PRICES_ENDPOINT_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| DEFAULT_PRICES_ENDPOINT.to_owned())
}

/// One page of the API's answer.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "PascalCase")]
pub struct PricePage {
    /// The price items.
    #[serde(default)]
    pub items: Vec<PriceItem>,
    /// The next page, when there is one.
    #[serde(default)]
    pub next_page_link: Option<String>,
}

/// One price item (a meter of one SKU in one region).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PriceItem {
    /// `USD`.
    #[serde(default)]
    pub currency_code: String,
    /// The price.
    pub retail_price: f64,
    /// `eastus`.
    #[serde(default)]
    pub arm_region_name: String,
    /// `Standard_NC24ads_A100_v4`.
    #[serde(default)]
    pub arm_sku_name: String,
    /// `NC24ads A100 v4 Spot`.
    #[serde(default)]
    pub sku_name: String,
    /// `Virtual Machines NCads A100 v4 Series` (`… Windows` for Windows).
    #[serde(default)]
    pub product_name: String,
    /// `Consumption`, `Reservation`, `DevTestConsumption`.
    #[serde(default, rename = "type")]
    pub price_type: String,
    /// `1 Hour`.
    #[serde(default)]
    pub unit_of_measure: String,
    /// When the price took effect.
    #[serde(default)]
    pub effective_start_date: Option<DateTime<Utc>>,
}

/// The `$filter` for `sizes` in `region`.
pub fn filter(region: &str, sizes: &[String]) -> String {
    let skus: Vec<String> = sizes
        .iter()
        .map(|s| format!("armSkuName eq '{}'", s.replace('\'', "")))
        .collect();
    format!(
        "serviceName eq 'Virtual Machines' and priceType eq 'Consumption' and armRegionName eq '{}' and ({})",
        region.replace('\'', ""),
        skus.join(" or ")
    )
}

/// The quotes in `items`: USD hourly Linux consumption prices of `region`, on-demand and spot,
/// the newest price per (size, capacity type).
pub fn quotes(items: &[PriceItem], region: &str, now: DateTime<Utc>) -> Vec<PriceQuote> {
    let mut best: BTreeMap<(String, bool), &PriceItem> = BTreeMap::new();
    for item in items {
        let windows = item.product_name.ends_with(" Windows");
        let low_priority = item.sku_name.ends_with(" Low Priority");
        if item.price_type != "Consumption"
            || item.currency_code != "USD"
            || item.unit_of_measure != "1 Hour"
            || item.arm_region_name != region
            || item.arm_sku_name.is_empty()
            || windows
            || low_priority
        {
            continue;
        }
        let spot = item.sku_name.ends_with(" Spot");
        let key = (item.arm_sku_name.clone(), spot);
        let newer = best
            .get(&key)
            .is_none_or(|b| item.effective_start_date > b.effective_start_date);
        if newer {
            best.insert(key, item);
        }
    }
    best.into_iter()
        .map(|((size, spot), item)| PriceQuote {
            cloud: Cloud::Azure,
            instance_type: size,
            region: region.to_owned(),
            zone: None,
            capacity_type: if spot {
                CapacityType::Spot
            } else {
                CapacityType::OnDemand
            },
            price_per_hour: item.retail_price,
            source: SOURCE.to_owned(),
            fetched_at: now,
        })
        .collect()
}

/// Asks the Retail Prices API at `endpoint` for the prices of `sizes` in `region`; a call that
/// fails or cannot be read fails the whole look-up (the embedded prices stay).
pub async fn fetch_quotes(
    endpoint: &str,
    region: &str,
    sizes: &[String],
    now: DateTime<Utc>,
    timeout: Duration,
) -> Result<Vec<PriceQuote>, AzureError> {
    let http = reqwest::Client::builder()
        .connect_timeout(timeout.min(Duration::from_secs(3)))
        .timeout(timeout)
        .build()
        .map_err(|e| AzureError::Prices(e.to_string()))?;
    let base = reqwest::Url::parse(endpoint)
        .and_then(|u| u.join("/api/retail/prices"))
        .map_err(|e| AzureError::Prices(format!("bad endpoint {endpoint:?}: {e}")))?;
    let mut items = Vec::new();
    for chunk in sizes.chunks(SIZES_PER_REQUEST) {
        let mut url = base.clone();
        url.query_pairs_mut()
            .append_pair("api-version", "2023-01-01-preview")
            .append_pair("$filter", &filter(region, chunk));
        let mut next = Some(url);
        let mut pages = 0;
        while let Some(url) = next.take() {
            pages += 1;
            let page: PricePage = http
                .get(url)
                .send()
                .await
                .and_then(reqwest::Response::error_for_status)
                .map_err(|e| AzureError::Prices(e.without_url().to_string()))?
                .json()
                .await
                .map_err(|e| AzureError::Prices(format!("unreadable answer: {e}")))?;
            items.extend(page.items);
            next = page
                .next_page_link
                .and_then(|l| reqwest::Url::parse(&l).ok())
                .filter(|l| l.origin() == base.origin() && pages < MAX_PAGES);
        }
    }
    Ok(quotes(&items, region, now))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"{
      "BillingCurrency": "USD", "CustomerEntityId": "Default", "CustomerEntityType": "Retail",
      "Items": [
        {"currencyCode": "USD", "tierMinimumUnits": 0.0, "retailPrice": 3.673, "unitPrice": 3.673,
         "armRegionName": "eastus", "location": "US East", "effectiveStartDate": "2023-06-01T00:00:00Z",
         "meterName": "NC24ads A100 v4", "productName": "Virtual Machines NCads A100 v4 Series",
         "skuName": "NC24ads A100 v4", "serviceName": "Virtual Machines", "unitOfMeasure": "1 Hour",
         "type": "Consumption", "isPrimaryMeterRegion": true, "armSkuName": "Standard_NC24ads_A100_v4"},
        {"currencyCode": "USD", "retailPrice": 0.5143, "unitPrice": 0.5143,
         "armRegionName": "eastus", "effectiveStartDate": "2024-02-01T00:00:00Z",
         "meterName": "NC24ads A100 v4 Spot", "productName": "Virtual Machines NCads A100 v4 Series",
         "skuName": "NC24ads A100 v4 Spot", "serviceName": "Virtual Machines", "unitOfMeasure": "1 Hour",
         "type": "Consumption", "armSkuName": "Standard_NC24ads_A100_v4"},
        {"currencyCode": "USD", "retailPrice": 0.45, "unitPrice": 0.45,
         "armRegionName": "eastus", "effectiveStartDate": "2023-02-01T00:00:00Z",
         "meterName": "NC24ads A100 v4 Spot", "productName": "Virtual Machines NCads A100 v4 Series",
         "skuName": "NC24ads A100 v4 Spot", "serviceName": "Virtual Machines", "unitOfMeasure": "1 Hour",
         "type": "Consumption", "armSkuName": "Standard_NC24ads_A100_v4"},
        {"currencyCode": "USD", "retailPrice": 4.657, "armRegionName": "eastus",
         "productName": "Virtual Machines NCads A100 v4 Series Windows", "skuName": "NC24ads A100 v4",
         "unitOfMeasure": "1 Hour", "type": "Consumption", "armSkuName": "Standard_NC24ads_A100_v4"},
        {"currencyCode": "USD", "retailPrice": 0.73, "armRegionName": "eastus",
         "productName": "Virtual Machines NCads A100 v4 Series", "skuName": "NC24ads A100 v4 Low Priority",
         "unitOfMeasure": "1 Hour", "type": "Consumption", "armSkuName": "Standard_NC24ads_A100_v4"},
        {"currencyCode": "USD", "retailPrice": 19000.0, "armRegionName": "eastus",
         "productName": "Virtual Machines NCads A100 v4 Series", "skuName": "NC24ads A100 v4",
         "unitOfMeasure": "1 Hour", "type": "Reservation", "reservationTerm": "1 Year",
         "armSkuName": "Standard_NC24ads_A100_v4"}
      ],
      "NextPageLink": null, "Count": 6
    }"#;

    #[test]
    fn linux_on_demand_and_the_newest_spot_meter_become_quotes() {
        let page: PricePage = serde_json::from_str(PAGE).unwrap();
        let now = DateTime::parse_from_rfc3339("2026-12-01T00:00:00Z")
            .unwrap()
            .with_timezone(&Utc);
        let q = quotes(&page.items, "eastus", now);
        assert_eq!(q.len(), 2, "{q:?}");
        let od = q
            .iter()
            .find(|q| q.capacity_type == CapacityType::OnDemand)
            .unwrap();
        assert_eq!(od.instance_type, "Standard_NC24ads_A100_v4");
        assert_eq!(od.price_per_hour, 3.673);
        assert_eq!(od.source, SOURCE);
        assert_eq!(od.zone, None);
        let spot = q
            .iter()
            .find(|q| q.capacity_type == CapacityType::Spot)
            .unwrap();
        assert_eq!(spot.price_per_hour, 0.5143);
        assert_eq!(spot.fetched_at, now);
    }

    #[test]
    fn other_regions_are_left_out() {
        let page: PricePage = serde_json::from_str(PAGE).unwrap();
        assert!(quotes(&page.items, "westus2", Utc::now()).is_empty());
    }

    #[test]
    fn the_filter_names_each_size() {
        let f = filter("eastus", &["Standard_A".into(), "Standard_B".into()]);
        assert!(f.contains("armRegionName eq 'eastus'"));
        assert!(f.contains("(armSkuName eq 'Standard_A' or armSkuName eq 'Standard_B')"));
    }
}
