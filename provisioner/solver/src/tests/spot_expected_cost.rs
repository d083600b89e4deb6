//! Spot offerings ranked by expected cost: price plus interruption band × restart cost.

use std::time::Duration;

use chrono::NaiveDate;
use quartermaster_policies::Operator;
use quartermaster_pricing::{CapacityType, Catalog, Cloud, InterruptionBand, SpotInterruption};

use super::fixtures::*;
use crate::snapshot::ClusterSnapshot;

/// One g5.xlarge-like type with spot at $0.450 in us-east-1a and $0.452 in us-east-1b.
fn two_zone_catalog() -> Catalog {
    let mut it = instance("g5.xlarge", 4, 16, 1, 1.006, Some(0.45));
    for o in &mut it.offerings {
        if o.capacity_type == CapacityType::Spot && o.zone == "us-east-1b" {
            o.price_per_hour = 0.452;
        }
    }
    Catalog::new(vec![it])
}

fn volatile_1a(catalog: Catalog) -> Catalog {
    catalog.with_spot_interruption(
        Cloud::Aws,
        "g5.xlarge",
        "us-east-1a",
        SpotInterruption {
            band: InterruptionBand::Over20,
            source: "test".into(),
            as_of: NaiveDate::from_ymd_opt(2026, 11, 30).unwrap(),
        },
    )
}

/// A spot pool in us-east-1a and us-east-1b; an interruption costs it `cost`.
fn spot_snapshot(cost: Option<Duration>) -> ClusterSnapshot {
    let mut p = pool(
        "spot",
        requirements(&[
            (
                "topology.kubernetes.io/zone",
                Operator::In,
                &["us-east-1a", "us-east-1b"],
            ),
            ("quartermaster.dev/capacity-type", Operator::In, &["spot"]),
        ]),
    );
    p.node_shape.spot_interruption_cost = cost;
    snapshot(pods("infer", 1, 2000, 8192, 1), vec![p])
}

#[test]
fn a_volatile_zone_loses_to_a_slightly_dearer_calm_one() {
    // >20%: 0.25 / 730 interruptions an hour; a restart costing 24 h of $0.45 adds ≈ $0.0037,
    // more than the $0.002 the other zone asks on top.
    let s = spot_snapshot(Some(Duration::from_secs(24 * 3600)));
    let catalog = volatile_1a(two_zone_catalog());
    let plan = crate::solve(&s, &catalog, now());
    let node = &plan.new_nodes[0];
    assert_eq!(node.offering.zone, "us-east-1b");
    assert!((node.offering.price_per_hour - 0.452).abs() < 1e-12);
    // The plan's cost stays the price; the expected cost of the node (no band) is its price.
    assert!((plan.cost_per_hour - 0.452).abs() < 1e-12, "{plan:?}");
    let expected = node
        .offering
        .expected_cost_per_hour(&catalog, &s.node_pools[0]);
    assert!((expected - 0.452).abs() < 1e-12, "{expected}");
    // The volatile zone is still an alternative, priced above: 0.45 + 0.25/730 × 24 × 0.45.
    let a = node
        .alternatives
        .iter()
        .find(|a| a.zone == "us-east-1a")
        .expect("us-east-1a is an alternative");
    let a_expected = a.expected_cost_per_hour(&catalog, &s.node_pools[0]);
    assert!(
        (a_expected - (0.45 + 0.25 / 730.0 * 24.0 * 0.45)).abs() < 1e-12,
        "{a_expected}"
    );
    assert!(a_expected > expected);
}

#[test]
fn without_bands_or_with_a_cheap_restart_the_cheaper_zone_wins() {
    let s = spot_snapshot(Some(Duration::from_secs(24 * 3600)));
    let plan = crate::solve(&s, &two_zone_catalog(), now());
    assert_eq!(plan.new_nodes[0].offering.zone, "us-east-1a");
    assert!((plan.cost_per_hour - 0.45).abs() < 1e-12);

    // The default restart cost (5 minutes of the price) adds ≈ $0.000013: not enough.
    let s = spot_snapshot(None);
    let catalog = volatile_1a(two_zone_catalog());
    let plan = crate::solve(&s, &catalog, now());
    let node = &plan.new_nodes[0];
    assert_eq!(node.offering.zone, "us-east-1a");
    let expected = node
        .offering
        .expected_cost_per_hour(&catalog, &s.node_pools[0]);
    assert!(
        (expected - (0.45 + 0.25 / 730.0 * 0.45 * 5.0 / 60.0)).abs() < 1e-12,
        "{expected}"
    );
    assert!((plan.cost_per_hour - 0.45).abs() < 1e-12);
}
