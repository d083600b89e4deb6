//! The [`PriceApi`] port over `aws-sdk-pricing` (`GetProducts`, client region us-east-1) and
//! `aws-sdk-ec2` (`DescribeSpotPriceHistory`), and [`live_prices`], the whole fetch.

use std::collections::BTreeSet;

use aws_sdk_ec2::types as ec2t;
use aws_sdk_pricing::config::Region;
use aws_sdk_pricing::types::{Filter, FilterType};
use chrono::{DateTime, Utc};
use quartermaster_pricing::{Catalog, Cloud};

use crate::config::{AwsSettings, sdk_config};
use crate::port::{ApiError, ApiErrorKind, PortFuture};
use crate::prices::{PRICING_API_REGION, PriceApi, PriceFetch, SpotPricePoint, fetch};
use crate::rate::RateLimits;
use crate::sdk::api_error;

/// Instance types per `DescribeSpotPriceHistory` call.
const SPOT_TYPES_PER_CALL: usize = 100;

/// The price APIs through the SDK.
pub struct SdkPrices {
    pricing: aws_sdk_pricing::Client,
    ec2: aws_sdk_ec2::Client,
    limits: RateLimits,
}

impl SdkPrices {
    /// The price APIs of `config`: EC2 in its region, the Pricing API in us-east-1 (its endpoint
    /// from `AWS_ENDPOINT_URL_PRICING` / `AWS_ENDPOINT_URL` when set).
    pub(crate) fn new(config: &aws_config::SdkConfig, limits: RateLimits) -> Self {
        let pricing = aws_sdk_pricing::config::Builder::from(config)
            .region(Region::new(PRICING_API_REGION))
            .build();
        Self {
            pricing: aws_sdk_pricing::Client::from_conf(pricing),
            ec2: aws_sdk_ec2::Client::new(config),
            limits,
        }
    }
}

fn filter(field: &str, value: &str) -> Result<Filter, ApiError> {
    Filter::builder()
        .r#type(FilterType::TermMatch)
        .field(field)
        .value(value)
        .build()
        .map_err(|e| ApiError {
            kind: ApiErrorKind::Construction,
            code: None,
            message: e.to_string(),
            status: None,
            retry_after: None,
        })
}

impl PriceApi for SdkPrices {
    fn on_demand_products(&self, region: String) -> PortFuture<'_, Vec<String>> {
        Box::pin(async move {
            let filters = vec![
                filter("regionCode", &region)?,
                filter("operatingSystem", "Linux")?,
                filter("tenancy", "Shared")?,
                filter("preInstalledSw", "NA")?,
                filter("capacitystatus", "Used")?,
            ];
            let mut out = Vec::new();
            let mut token: Option<String> = None;
            loop {
                self.limits.read().await;
                let page = self
                    .pricing
                    .get_products()
                    .service_code("AmazonEC2")
                    .format_version("aws_v1")
                    .set_filters(Some(filters.clone()))
                    .max_results(100)
                    .set_next_token(token.take())
                    .send()
                    .await
                    .map_err(api_error)?;
                out.extend(page.price_list().iter().cloned());
                match page.next_token() {
                    Some(t) if !t.is_empty() => token = Some(t.to_owned()),
                    _ => return Ok(out),
                }
            }
        })
    }

    fn spot_price_history(
        &self,
        instance_types: Vec<String>,
        start: DateTime<Utc>,
    ) -> PortFuture<'_, Vec<SpotPricePoint>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for chunk in instance_types.chunks(SPOT_TYPES_PER_CALL) {
                let types: Vec<ec2t::InstanceType> = chunk
                    .iter()
                    .map(|t| ec2t::InstanceType::from(t.as_str()))
                    .collect();
                let mut token: Option<String> = None;
                loop {
                    self.limits.read().await;
                    let page = self
                        .ec2
                        .describe_spot_price_history()
                        .set_instance_types(Some(types.clone()))
                        .product_descriptions("Linux/UNIX")
                        .start_time(aws_smithy_types::DateTime::from_secs(start.timestamp()))
                        .set_next_token(token.take())
                        .send()
                        .await
                        .map_err(api_error)?;
                    for p in page.spot_price_history() {
                        let (Some(ty), Some(zone), Some(price)) =
                            (p.instance_type(), p.availability_zone(), p.spot_price())
                        else {
                            continue;
                        };
                        out.push(SpotPricePoint {
                            instance_type: ty.as_str().to_owned(),
                            zone: zone.to_owned(),
                            price: price.to_owned(),
                            timestamp: p
                                .timestamp()
                                .and_then(|t| DateTime::from_timestamp(t.secs(), 0)),
                        });
                    }
                    match page.next_token() {
                        Some(t) if !t.is_empty() => token = Some(t.to_owned()),
                        _ => break,
                    }
                }
            }
            Ok(out)
        })
    }
}

/// The AWS instance types of `catalog` offered in `region`.
pub fn catalog_types(catalog: &Catalog, region: &str) -> BTreeSet<String> {
    catalog
        .for_cloud(Cloud::Aws)
        .filter(|t| t.offerings.iter().any(|o| o.region == region))
        .map(|t| t.name.clone())
        .collect()
}

/// Live prices of the catalog's AWS types in `region`, through the SDK configured by
/// `settings` (its timeouts bound how long a dead endpoint takes).
pub async fn live_prices(
    settings: &AwsSettings,
    region: &str,
    catalog: &Catalog,
    now: DateTime<Utc>,
) -> PriceFetch {
    let mut settings = settings.clone();
    settings.region = Some(region.to_owned());
    let config = sdk_config(&settings).await;
    let api = SdkPrices::new(&config, settings.rate_limits.limits());
    fetch(&api, region, &catalog_types(catalog, region), now).await
}
