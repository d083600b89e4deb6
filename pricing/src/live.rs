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

use std::collections::BTreeMap;

use crate::{CapacityType, Catalog, CatalogFile, CatalogMode, Cloud, InstanceType, Offering};

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

/// Spot dearer than this many times on-demand is not believed.
pub const MAX_SPOT_TO_ON_DEMAND: f64 = 1.5;
/// Spot cheaper than this share of on-demand is not believed (EC2's deepest spot discounts are
/// about 90%, i.e. 0.1 × on-demand; emulators answer 0.00001).
pub const MIN_SPOT_TO_ON_DEMAND: f64 = 0.05;
/// An on-demand quote below this share of the embedded on-demand price is not believed.
pub const MIN_ON_DEMAND_TO_EMBEDDED: f64 = 0.2;
/// An on-demand quote above this multiple of the embedded on-demand price is not believed.
pub const MAX_ON_DEMAND_TO_EMBEDDED: f64 = 5.0;
/// A quote dated more than this far after `now` (clock skew) is not believed.
pub const MAX_FUTURE_SKEW: chrono::TimeDelta = chrono::TimeDelta::hours(1);

/// Why a quote was not believed; the embedded price stays.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "rule", rename_all = "kebab-case")]
pub enum RejectReason {
    /// Zero or negative.
    NotPositive,
    /// NaN or infinite.
    NotFinite,
    /// Dated after `now` (beyond [`MAX_FUTURE_SKEW`]).
    FromTheFuture,
    /// A spot price above [`MAX_SPOT_TO_ON_DEMAND`] × the on-demand price of the same offering.
    SpotAboveOnDemand {
        /// The on-demand price it was compared with (the live one when accepted, else the
        /// embedded one).
        on_demand: f64,
    },
    /// A spot price below [`MIN_SPOT_TO_ON_DEMAND`] × the on-demand price of the same offering.
    SpotFarBelowOnDemand {
        /// The on-demand price it was compared with.
        on_demand: f64,
    },
    /// An on-demand price outside [`MIN_ON_DEMAND_TO_EMBEDDED`]..[`MAX_ON_DEMAND_TO_EMBEDDED`]
    /// × the embedded on-demand price.
    OnDemandFarFromEmbedded {
        /// The embedded on-demand price.
        embedded: f64,
    },
}

impl std::fmt::Display for RejectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotPositive => f.write_str("price is zero or negative"),
            Self::NotFinite => f.write_str("price is not a finite number"),
            Self::FromTheFuture => f.write_str("quote is dated in the future"),
            Self::SpotAboveOnDemand { on_demand } => write!(
                f,
                "spot price above {MAX_SPOT_TO_ON_DEMAND}x the on-demand price {on_demand}"
            ),
            Self::SpotFarBelowOnDemand { on_demand } => write!(
                f,
                "spot price below {MIN_SPOT_TO_ON_DEMAND}x the on-demand price {on_demand}"
            ),
            Self::OnDemandFarFromEmbedded { embedded } => write!(
                f,
                "on-demand price outside {MIN_ON_DEMAND_TO_EMBEDDED}x..{MAX_ON_DEMAND_TO_EMBEDDED}x \
                 the embedded price {embedded}"
            ),
        }
    }
}

/// A quote that was not believed, with its reason.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RejectedQuote {
    /// The quote.
    pub quote: PriceQuote,
    /// Why it was rejected.
    pub reason: RejectReason,
}

/// The result of [`Catalog::with_live_prices`].
#[derive(Debug, Clone, PartialEq)]
pub struct LiveMerge {
    /// The catalog with every accepted quote's price, source and date.
    pub catalog: Catalog,
    /// Quotes that replaced (or added) at least one offering's price.
    pub accepted: usize,
    /// Offerings whose price differs from before the merge.
    pub changed: usize,
    /// Quotes not believed; the catalog's price stayed.
    pub rejected: Vec<RejectedQuote>,
    /// Quotes for a cloud, instance type, region or zone the catalog does not have: ignored
    /// (the catalog never invents a type or a region from a price list).
    pub unknown: usize,
}

impl LiveMerge {
    /// True when any offering's price changed: the catalog is worth handing on.
    pub fn prices_changed(&self) -> bool {
        self.changed > 0
    }
}

impl Catalog {
    /// Merges live price quotes into a copy of the catalog.
    ///
    /// A quote for a zone replaces the price of the type's offering of that capacity type in
    /// that zone; a quote without a zone replaces it in every zone of the region the type is
    /// offered in. Where the type is offered in the zone but not with that capacity type (a
    /// spot price for a type the embedded data has no spot figure for), the offering is added.
    /// Replaced prices carry the quote's `source` as `price_source` and its date as
    /// `price_as_of`.
    ///
    /// A quote is rejected (the catalog's price stays) when it is zero or negative, not finite,
    /// dated after `now`, a spot price above 1.5 × or below 0.05 × the on-demand price of its zone, or an
    /// on-demand price below 0.2 × or above 5 × the catalog's on-demand price. On-demand
    /// quotes are merged first, so spot quotes are compared with the live on-demand price.
    /// Quotes for types, regions or zones the catalog does not have are counted in
    /// [`LiveMerge::unknown`] and ignored.
    pub fn with_live_prices(&self, quotes: &[PriceQuote], now: DateTime<Utc>) -> LiveMerge {
        let mut work = Work {
            types: self.instance_types().to_vec(),
            touched: Vec::new(),
            accepted: 0,
            changed: 0,
            rejected: Vec::new(),
            unknown: 0,
        };
        let mut ordered: Vec<&PriceQuote> = quotes.iter().collect();
        // Stable: on-demand (and reserved) before spot, otherwise the caller's order.
        ordered.sort_by_key(|q| q.capacity_type == CapacityType::Spot);
        for quote in ordered {
            work.apply(self, quote, now);
        }
        work.touched.sort_unstable();
        work.touched.dedup();
        // An extend-mode override replaces the touched types in place; their interruption
        // bands are carried over (an override drops the bands of the types it replaces).
        let mut spot_interruptions = BTreeMap::new();
        for &i in &work.touched {
            let before = &self.instance_types()[i];
            for o in &before.offerings {
                if let Some(band) = self.spot_interruption(before, o) {
                    spot_interruptions.insert(
                        (
                            before.cloud,
                            before.name.clone(),
                            o.zone.clone(),
                            o.capacity_type,
                        ),
                        band.clone(),
                    );
                }
            }
        }
        let file = CatalogFile {
            file_name: "live prices".to_owned(),
            mode: CatalogMode::Extend,
            instance_types: work
                .touched
                .iter()
                .map(|&i| work.types[i].clone())
                .collect(),
            default_regions: BTreeMap::new(),
            spot_interruptions,
        };
        LiveMerge {
            catalog: self.clone().with_override(file),
            accepted: work.accepted,
            changed: work.changed,
            rejected: work.rejected,
            unknown: work.unknown,
        }
    }
}

/// The merge in progress: a copy of the catalog's types and which of them changed.
struct Work {
    types: Vec<InstanceType>,
    touched: Vec<usize>,
    accepted: usize,
    changed: usize,
    rejected: Vec<RejectedQuote>,
    unknown: usize,
}

impl Work {
    fn apply(&mut self, before: &Catalog, quote: &PriceQuote, now: DateTime<Utc>) {
        let price = quote.price_per_hour;
        let reject = |reason| RejectedQuote {
            quote: quote.clone(),
            reason,
        };
        if !price.is_finite() {
            self.rejected.push(reject(RejectReason::NotFinite));
            return;
        }
        if price <= 0.0 {
            self.rejected.push(reject(RejectReason::NotPositive));
            return;
        }
        if quote.fetched_at > now + MAX_FUTURE_SKEW {
            self.rejected.push(reject(RejectReason::FromTheFuture));
            return;
        }
        let Some(index) = self
            .types
            .iter()
            .position(|t| t.cloud == quote.cloud && t.name == quote.instance_type)
        else {
            self.unknown += 1;
            return;
        };
        let current = &self.types[index];
        let zones = zones_of(current, quote);
        if zones.is_empty() {
            self.unknown += 1;
            return;
        }
        match quote.capacity_type {
            CapacityType::OnDemand => {
                let embedded = before
                    .get(quote.cloud, &quote.instance_type)
                    .and_then(|t| on_demand_in(t, &quote.region, &zones));
                if let Some(embedded) = embedded
                    && (price < MIN_ON_DEMAND_TO_EMBEDDED * embedded
                        || price > MAX_ON_DEMAND_TO_EMBEDDED * embedded)
                {
                    self.rejected
                        .push(reject(RejectReason::OnDemandFarFromEmbedded { embedded }));
                    return;
                }
            }
            CapacityType::Spot => {
                if let Some(on_demand) = on_demand_in(current, &quote.region, &zones) {
                    if price > MAX_SPOT_TO_ON_DEMAND * on_demand {
                        self.rejected
                            .push(reject(RejectReason::SpotAboveOnDemand { on_demand }));
                        return;
                    }
                    if price < MIN_SPOT_TO_ON_DEMAND * on_demand {
                        self.rejected
                            .push(reject(RejectReason::SpotFarBelowOnDemand { on_demand }));
                        return;
                    }
                }
            }
            CapacityType::Reserved | CapacityType::FlexStart => {}
        }
        self.changed += set_price(&mut self.types[index], quote, &zones);
        self.touched.push(index);
        self.accepted += 1;
    }
}

/// Sets the quote's price on the type's offerings in `zones`, adding the offering where the
/// zone has none of the quote's capacity type. Returns how many prices changed.
fn set_price(t: &mut InstanceType, quote: &PriceQuote, zones: &[String]) -> usize {
    let as_of = quote.fetched_at.date_naive();
    let mut changed = 0;
    for zone in zones {
        let existing = t
            .offerings
            .iter_mut()
            .find(|o| &o.zone == zone && o.capacity_type == quote.capacity_type);
        match existing {
            Some(o) => {
                if o.price_per_hour != quote.price_per_hour {
                    changed += 1;
                }
                o.price_per_hour = quote.price_per_hour;
                o.price_source = quote.source.clone();
                o.price_as_of = as_of;
                o.estimate = false;
            }
            None => {
                let available = t
                    .offerings
                    .iter()
                    .filter(|o| &o.zone == zone)
                    .any(|o| o.available);
                t.offerings.push(Offering {
                    region: quote.region.clone(),
                    zone: zone.clone(),
                    capacity_type: quote.capacity_type,
                    price_per_hour: quote.price_per_hour,
                    available,
                    price_source: quote.source.clone(),
                    price_as_of: as_of,
                    estimate: false,
                });
                changed += 1;
            }
        }
    }
    changed
}

/// The zones of the type's region the quote applies to: its zone if the type is offered
/// there, else (no zone) every zone the type is offered in within the region.
fn zones_of(t: &InstanceType, quote: &PriceQuote) -> Vec<String> {
    let mut zones: Vec<String> = t
        .offerings
        .iter()
        .filter(|o| o.region == quote.region)
        .filter(|o| quote.zone.as_ref().is_none_or(|z| &o.zone == z))
        .map(|o| o.zone.clone())
        .collect();
    zones.sort();
    zones.dedup();
    zones
}

/// The type's on-demand price in the first of `zones` that has one, else anywhere in the
/// region.
fn on_demand_in(t: &InstanceType, region: &str, zones: &[String]) -> Option<f64> {
    let on_demand = |zone: Option<&String>| {
        t.offerings
            .iter()
            .filter(|o| o.region == region && o.capacity_type == CapacityType::OnDemand)
            .find(|o| zone.is_none_or(|z| &o.zone == z))
            .map(|o| o.price_per_hour)
    };
    zones
        .iter()
        .find_map(|z| on_demand(Some(z)))
        .or_else(|| on_demand(None))
}

#[cfg(test)]
#[path = "live_tests.rs"]
mod tests;
