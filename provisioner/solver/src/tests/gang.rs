//! Gangs: placed whole, in one zone, or not at all.

use std::collections::BTreeSet;

use quartermaster_pricing::{CapacityType, Cloud};

use super::fixtures::*;
use crate::pod::Gang;
use crate::snapshot::OfferingKey;

/// Four eight-GPU workers of one training job.
fn workers(min_member: u32) -> Vec<crate::Pod> {
    pods("train", 4, 8000, 65536, 8)
        .into_iter()
        .map(|mut p| {
            p.gang = Some(Gang {
                name: "default/train".into(),
                min_member,
            });
            p
        })
        .collect()
}

#[test]
fn a_gang_gets_all_its_nodes_in_one_zone() {
    let plan = solve(&snapshot(workers(4), vec![on_demand_pool("gpu")]));
    assert!(plan.unschedulable.is_empty(), "{plan:#?}");
    assert_eq!(plan.new_nodes.len(), 4);
    let zones: BTreeSet<&str> = plan
        .new_nodes
        .iter()
        .map(|n| n.offering.zone.as_str())
        .collect();
    assert_eq!(zones.len(), 1, "{zones:?}");
}

#[test]
fn a_gang_that_cannot_fit_whole_buys_nothing_and_says_why() {
    // Room for three of the four eight-GPU nodes.
    let mut pool = on_demand_pool("gpu");
    pool.limits.nodes = Some(3);
    let plan = solve(&snapshot(workers(4), vec![pool]));
    assert!(
        plan.new_nodes.is_empty(),
        "no node for part of a gang: {plan:#?}"
    );
    assert_eq!(plan.unschedulable.len(), 4);
    let reason = &plan.unschedulable[0].reason;
    assert!(
        reason.starts_with(
            "gang default/train (minMember 4): 4 member(s) must be placed together in one zone, at most 3 fit"
        ),
        "{reason}"
    );
    // Without the gang, greedy packing buys the three it can.
    let mut loose = workers(4);
    for p in &mut loose {
        p.gang = None;
    }
    let mut pool = on_demand_pool("gpu");
    pool.limits.nodes = Some(3);
    assert_eq!(solve(&snapshot(loose, vec![pool])).new_nodes.len(), 3);
}

#[test]
fn a_gang_avoids_a_zone_that_cannot_hold_it_whole() {
    let mut s = snapshot(workers(4), vec![on_demand_pool("gpu")]);
    s.unavailable.insert(OfferingKey {
        cloud: Cloud::Aws,
        instance_type: "g5.48xlarge".into(),
        zone: "us-east-1a".into(),
        capacity_type: CapacityType::OnDemand,
    });
    let plan = solve(&s);
    assert_eq!(plan.new_nodes.len(), 4, "{plan:#?}");
    assert!(
        plan.new_nodes
            .iter()
            .all(|n| n.offering.zone == "us-east-1b")
    );
}

#[test]
fn min_member_below_the_gang_size_needs_only_that_many() {
    let mut pool = on_demand_pool("gpu");
    pool.limits.nodes = Some(3);
    let plan = solve(&snapshot(workers(3), vec![pool]));
    assert_eq!(plan.new_nodes.len(), 3, "{plan:#?}");
    assert_eq!(plan.unschedulable.len(), 1);
}
