//! Tests of [`Catalog::with_live_prices`]: one per acceptance and rejection rule.

use chrono::{DateTime, NaiveDate, TimeZone, Utc};

use super::{PriceQuote, RejectReason};
use crate::{CapacityType, Catalog, Cloud, InterruptionBand};

const FILE: &str = r#"
cloud = "aws"
region = "us-east-1"
default_region = "us-east-1"

[[instance_type]]
name = "g5.xlarge"
family = "g5"
vcpu = 4
memory_mib = 16384
arch = "amd64"
max_pods = 58
zones = ["us-east-1a", "us-east-1b"]
on_demand = { price = 1.006, source = "K-AWS-P", as_of = 2026-07-20 }
spot = [{ zone = "us-east-1a", price = 0.40, source = "SKY-AWS", as_of = 2026-11-30 }]
spot_interruption = { band = "<5%", source = "AWS-SA", as_of = 2026-11-30 }
"#;

fn catalog() -> Catalog {
    Catalog::default().with_override(Catalog::parse("test.toml", FILE).unwrap())
}

fn now() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 12, 1, 3, 0, 0).unwrap()
}

fn quote(zone: Option<&str>, ct: CapacityType, price: f64) -> PriceQuote {
    PriceQuote {
        cloud: Cloud::Aws,
        instance_type: "g5.xlarge".into(),
        region: "us-east-1".into(),
        zone: zone.map(str::to_owned),
        capacity_type: ct,
        price_per_hour: price,
        source: "aws-test-api".into(),
        fetched_at: now(),
    }
}

fn price(c: &Catalog, zone: &str, ct: CapacityType) -> Option<(f64, String, NaiveDate)> {
    c.get(Cloud::Aws, "g5.xlarge")?
        .offerings
        .iter()
        .find(|o| o.zone == zone && o.capacity_type == ct)
        .map(|o| (o.price_per_hour, o.price_source.clone(), o.price_as_of))
}

#[test]
fn regional_on_demand_quote_replaces_every_zone_with_source_and_date() {
    let m = catalog().with_live_prices(&[quote(None, CapacityType::OnDemand, 1.1)], now());
    assert_eq!((m.accepted, m.changed, m.unknown), (1, 2, 0));
    assert!(m.rejected.is_empty());
    for zone in ["us-east-1a", "us-east-1b"] {
        let (p, source, as_of) = price(&m.catalog, zone, CapacityType::OnDemand).unwrap();
        assert_eq!(p, 1.1);
        assert_eq!(source, "aws-test-api");
        assert_eq!(as_of, NaiveDate::from_ymd_opt(2026, 12, 1).unwrap());
    }
    assert!(m.prices_changed());
}

#[test]
fn zonal_spot_quote_replaces_only_its_zone_and_keeps_the_interruption_band() {
    let m = catalog().with_live_prices(
        &[quote(Some("us-east-1a"), CapacityType::Spot, 0.35)],
        now(),
    );
    assert_eq!(m.accepted, 1);
    assert_eq!(
        price(&m.catalog, "us-east-1a", CapacityType::Spot)
            .unwrap()
            .0,
        0.35
    );
    let t = m.catalog.get(Cloud::Aws, "g5.xlarge").unwrap();
    let o = t
        .offerings
        .iter()
        .find(|o| o.zone == "us-east-1a" && o.capacity_type == CapacityType::Spot)
        .unwrap();
    assert_eq!(
        m.catalog.spot_interruption(t, o).map(|s| s.band),
        Some(InterruptionBand::Under5)
    );
    // The other zone's on-demand price is untouched.
    assert_eq!(
        price(&m.catalog, "us-east-1b", CapacityType::OnDemand)
            .unwrap()
            .1,
        "K-AWS-P"
    );
}

#[test]
fn spot_quote_for_a_known_zone_without_spot_adds_the_offering() {
    let m =
        catalog().with_live_prices(&[quote(Some("us-east-1b"), CapacityType::Spot, 0.5)], now());
    assert_eq!((m.accepted, m.changed), (1, 1));
    assert_eq!(
        price(&m.catalog, "us-east-1b", CapacityType::Spot)
            .unwrap()
            .0,
        0.5
    );
}

#[test]
fn the_same_price_again_is_accepted_but_changes_nothing() {
    let m = catalog().with_live_prices(&[quote(None, CapacityType::OnDemand, 1.006)], now());
    assert_eq!((m.accepted, m.changed), (1, 0));
    assert!(!m.prices_changed());
}

#[test]
fn zero_and_negative_prices_are_rejected() {
    let m = catalog().with_live_prices(
        &[
            quote(None, CapacityType::OnDemand, 0.0),
            quote(Some("us-east-1a"), CapacityType::Spot, -1.0),
        ],
        now(),
    );
    assert_eq!(m.accepted, 0);
    assert_eq!(m.rejected.len(), 2);
    assert!(
        m.rejected
            .iter()
            .all(|r| r.reason == RejectReason::NotPositive)
    );
    assert_eq!(m.catalog, catalog());
}

#[test]
fn nan_and_infinite_prices_are_rejected() {
    let m = catalog().with_live_prices(
        &[
            quote(None, CapacityType::OnDemand, f64::NAN),
            quote(None, CapacityType::OnDemand, f64::INFINITY),
        ],
        now(),
    );
    assert_eq!(m.rejected.len(), 2);
    assert!(
        m.rejected
            .iter()
            .all(|r| r.reason == RejectReason::NotFinite)
    );
    assert_eq!(m.catalog, catalog());
}

#[test]
fn spot_above_one_and_a_half_on_demand_is_rejected() {
    let m =
        catalog().with_live_prices(&[quote(Some("us-east-1a"), CapacityType::Spot, 1.6)], now());
    assert_eq!(
        m.rejected[0].reason,
        RejectReason::SpotAboveOnDemand { on_demand: 1.006 }
    );
    assert_eq!(
        price(&m.catalog, "us-east-1a", CapacityType::Spot)
            .unwrap()
            .0,
        0.40
    );
    assert!(m.rejected[0].reason.to_string().contains("1.5x"));
}

#[test]
fn spot_below_a_twentieth_of_on_demand_is_rejected() {
    // What moto's DescribeSpotPriceHistory answers for every type.
    let m = catalog().with_live_prices(
        &[quote(Some("us-east-1a"), CapacityType::Spot, 0.00001)],
        now(),
    );
    assert_eq!(
        m.rejected[0].reason,
        RejectReason::SpotFarBelowOnDemand { on_demand: 1.006 }
    );
    assert_eq!(
        price(&m.catalog, "us-east-1a", CapacityType::Spot)
            .unwrap()
            .0,
        0.40
    );
}

#[test]
fn spot_is_compared_with_the_live_on_demand_price() {
    // On-demand rises to 2.0 live (merged first, whatever the order): spot 1.6 is believable.
    let m = catalog().with_live_prices(
        &[
            quote(Some("us-east-1a"), CapacityType::Spot, 1.6),
            quote(None, CapacityType::OnDemand, 2.0),
        ],
        now(),
    );
    assert_eq!(m.accepted, 2, "{:?}", m.rejected);
}

#[test]
fn on_demand_far_from_the_embedded_price_is_rejected() {
    let m = catalog().with_live_prices(
        &[
            quote(None, CapacityType::OnDemand, 0.19),
            quote(None, CapacityType::OnDemand, 5.1),
        ],
        now(),
    );
    assert_eq!(m.rejected.len(), 2);
    assert!(m.rejected.iter().all(|r| matches!(
        r.reason,
        RejectReason::OnDemandFarFromEmbedded { embedded } if embedded == 1.006
    )));
    // Just inside the bounds is fine.
    let m = catalog().with_live_prices(&[quote(None, CapacityType::OnDemand, 0.25)], now());
    assert_eq!(m.accepted, 1);
}

#[test]
fn quotes_from_the_future_are_rejected() {
    let mut q = quote(None, CapacityType::OnDemand, 1.1);
    q.fetched_at = now() + chrono::TimeDelta::days(2);
    let m = catalog().with_live_prices(&[q], now());
    assert_eq!(m.rejected[0].reason, RejectReason::FromTheFuture);
}

#[test]
fn unknown_types_regions_and_zones_are_counted_not_invented() {
    let mut unknown_type = quote(None, CapacityType::OnDemand, 1.0);
    unknown_type.instance_type = "x9.huge".into();
    let mut unknown_region = quote(None, CapacityType::OnDemand, 1.0);
    unknown_region.region = "eu-west-1".into();
    let unknown_zone = quote(Some("us-east-1f"), CapacityType::Spot, 0.3);
    let mut other_cloud = quote(None, CapacityType::OnDemand, 1.0);
    other_cloud.cloud = Cloud::Gcp;
    let m = catalog().with_live_prices(
        &[unknown_type, unknown_region, unknown_zone, other_cloud],
        now(),
    );
    assert_eq!((m.accepted, m.unknown), (0, 4));
    assert!(m.rejected.is_empty());
    assert_eq!(m.catalog, catalog());
}

#[test]
fn the_merged_catalog_keeps_the_default_region() {
    let m = catalog().with_live_prices(&[quote(None, CapacityType::OnDemand, 1.1)], now());
    assert_eq!(m.catalog.default_region(Cloud::Aws), Some("us-east-1"));
}
