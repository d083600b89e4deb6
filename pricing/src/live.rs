//! Prices read from a cloud's price API at run time ("live" prices), and how they are merged
//! into a [`Catalog`](crate::Catalog).
//!
//! Each cloud crate turns its price API's answer (AWS Pricing `GetProducts` and
//! `DescribeSpotPriceHistory`, GCP Cloud Billing Catalog SKUs, Azure Retail Prices) into
//! [`PriceQuote`]s; this module alone decides which quotes are believable and replaces the
//! embedded figures with them. A quote that is zero, not finite, or absurd next to the embedded
//! figure is rejected with its reason and the embedded price stays.

use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::{CapacityType, Cloud};

/// One price a cloud's price API gave for one way to buy an instance type.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PriceQuote {
    /// The cloud that sells it.
    pub cloud: Cloud,
    /// The cloud's instance type name, e.g. `p5.48xlarge`.
    pub instance_type: String,
    /// Region, e.g. `us-east-1`.
    pub region: String,
    /// Zone the price holds in; `None` when it holds in every zone of the region (on-demand
    /// list prices).
    pub zone: Option<String>,
    /// How the capacity is bought.
    pub capacity_type: CapacityType,
    /// USD per hour (Linux).
    pub price_per_hour: f64,
    /// Which API said so: `aws-pricing-api`, `aws-spot-price-history`,
    /// `gcp-cloud-billing-catalog`, `azure-retail-prices`.
    pub source: String,
    /// When the API was asked (or, for spot history, the timestamp of the price).
    pub fetched_at: DateTime<Utc>,
}
