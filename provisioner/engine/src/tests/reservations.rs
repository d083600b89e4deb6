//! Reserved capacity: free slots of a reservation are filled before anything is bought, a
//! pool must allow capacity type `reserved`, and a Capacity Block's nodes are drained before
//! its end with their pods placed elsewhere first.

use chrono::TimeDelta;
use quartermaster_policies::{Operator, Requirement, Requirements};
use quartermaster_pricing::reservation::LABEL_RESERVATION_ID;
use quartermaster_pricing::{CapacityType, Cloud, Reservation, ReservationKind};

use super::fixtures::*;
use super::fleet::deleted;
use crate::{Action, DeleteReason, Engine, EngineConfig, Event, ReservationOffer};

fn engine_allowing(capacity_types: &[&str]) -> Engine {
    let mut setup = setup("5m");
    let mut requirements = Requirements::default();
    requirements.add(
        Requirement::new(
            "quartermaster.dev/capacity-type",
            Operator::In,
            capacity_types.iter().copied(),
        )
        .expect("valid"),
    );
    setup.pools[0].spec.requirements = requirements;
    Engine::new(setup, EngineConfig::default())
}

fn block(count: u32, start_h: i64, end_h: i64) -> ReservationOffer {
    ReservationOffer {
        reservation: Reservation {
            id: "cr-block".into(),
            cloud: Cloud::Aws,
            instance_type: "g5.xlarge".into(),
            zone: "us-east-1b".into(),
            count,
            available: None,
            kind: ReservationKind::CapacityBlock,
            price_per_hour: 0.8,
            start: Some(t(start_h * 3600)),
            end: Some(t(end_h * 3600)),
            tags: Default::default(),
        },
        pools: vec!["gpu".into()],
    }
}

/// Launches and registers every launch in `actions` (nodes `node-<claim>`), GPUs up.
fn bring_up(e: &mut Engine, actions: &[Action], at: chrono::DateTime<chrono::Utc>) -> Vec<String> {
    let mut names = Vec::new();
    for (i, (claim, _, zone, ct)) in launches(actions).into_iter().enumerate() {
        e.handle(
            at,
            Event::Launched {
                claim: claim.clone(),
                instance: instance(&claim, &format!("i-{}-{i}", at.timestamp()), &zone, ct, at),
            },
        );
        e.handle(
            at,
            Event::NodeRegistered {
                claim: claim.clone(),
                node: registered_node(&format!("node-{claim}"), &zone, 1, false),
            },
        );
        names.push(claim);
    }
    names
}

fn reserved_launches(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Launch { claim, request }
                if request.capacity_type == CapacityType::Reserved =>
            {
                assert_eq!(
                    request.labels.get(LABEL_RESERVATION_ID).map(String::as_str),
                    Some("cr-block"),
                    "the launch names its reservation"
                );
                assert_eq!(request.zone, "us-east-1b");
                assert_eq!(request.price_per_hour, 0.0, "paid whether used or not");
                Some(claim.clone())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn free_slots_of_a_reservation_are_filled_before_anything_is_bought() {
    let mut e = engine_allowing(&["spot", "on-demand", "reserved"]);
    e.handle(t(0), Event::ReservationsChanged(vec![block(2, 0, 100)]));
    let actions = pending_then_poll(&mut e, &["a", "b", "c"], t(10));
    let reserved = reserved_launches(&actions);
    assert_eq!(reserved.len(), 2, "{actions:?}");
    let all = launches(&actions);
    assert_eq!(all.len(), 3, "{actions:?}");
    assert_eq!(
        all.iter().filter(|l| l.3 == CapacityType::Spot).count(),
        1,
        "the third pod on the cheapest offering bought"
    );
    assert_eq!(e.stats().reserved_launches, 2);
}

#[test]
fn a_pool_that_does_not_allow_reserved_never_uses_a_reservation() {
    let mut e = engine_allowing(&["spot", "on-demand"]);
    e.handle(t(0), Event::ReservationsChanged(vec![block(2, 0, 100)]));
    let actions = pending_then_poll(&mut e, &["a"], t(10));
    assert!(reserved_launches(&actions).is_empty(), "{actions:?}");
    assert_eq!(launches(&actions).len(), 1);
}

#[test]
fn a_block_that_has_not_started_is_not_used_and_one_that_starts_wakes_waiting_pods() {
    // Only reserved capacity allowed: the pod waits for the block.
    let mut e = engine_allowing(&["reserved"]);
    e.handle(t(0), Event::ReservationsChanged(vec![block(1, 2, 100)]));
    let actions = pending_then_poll(&mut e, &["a"], t(10));
    assert!(launches(&actions).is_empty(), "{actions:?}");
    let mut all = Vec::new();
    while let Some(d) = e.next_deadline() {
        if d > t(3 * 3600) {
            break;
        }
        all.extend(e.poll(d));
    }
    assert_eq!(reserved_launches(&all).len(), 1, "{all:?}");
}

#[test]
fn a_capacity_block_is_drained_before_its_end_and_its_pods_run_elsewhere_first() {
    let mut e = engine_allowing(&["spot", "on-demand", "reserved"]);
    e.handle(t(0), Event::ReservationsChanged(vec![block(1, 0, 10)]));
    let actions = pending_then_poll(&mut e, &["a"], t(10));
    let claims = bring_up(&mut e, &actions, t(60));
    assert_eq!(claims.len(), 1);
    let bound = binds(&e.poll(t(60)));
    assert_eq!(bound.len(), 1);
    e.handle(
        t(61),
        Event::PodBound {
            pod: gpu_pod("a"),
            node: bound[0].1.clone(),
        },
    );
    // Nothing happens until 40 minutes before the end.
    let drain = t(10 * 3600) - TimeDelta::minutes(40);
    let mut all = Vec::new();
    while let Some(d) = e.next_deadline() {
        if d >= drain {
            break;
        }
        all.extend(e.poll(d));
    }
    assert!(deleted(&all).is_empty(), "{all:?}");
    assert_eq!(e.next_deadline(), Some(drain));
    let actions = e.poll(drain);
    assert!(
        actions.iter().any(|a| matches!(a, Action::Cordon { .. })),
        "{actions:?}"
    );
    let replacement = launches(&actions);
    assert_eq!(
        replacement.len(),
        1,
        "the pod gets a place elsewhere at once: {actions:?}"
    );
    assert_ne!(
        replacement[0].3,
        CapacityType::Reserved,
        "not in the ending block"
    );
    assert_eq!(e.stats().reservation_drains, 1);
    // The replacement comes up, the pod runs there: the block's node goes.
    let new_claims = bring_up(&mut e, &actions, drain + TimeDelta::minutes(2));
    let now = drain + TimeDelta::minutes(2);
    let mut actions = e.poll(now);
    let bound = binds(&actions);
    assert_eq!(bound.len(), 1, "{bound:?}");
    assert_ne!(bound[0].1, format!("node-{}", claims[0]));
    e.handle(
        now,
        Event::PodBound {
            pod: gpu_pod("a"),
            node: bound[0].1.clone(),
        },
    );
    actions.extend(e.poll(now));
    assert_eq!(
        deleted(&actions),
        vec![(claims[0].clone(), DeleteReason::ReservationEnding)],
        "{actions:?}"
    );
    assert_eq!(new_claims.len(), 1);
}

#[test]
fn slots_and_new_nodes_together_never_pass_a_pool_limit() {
    let mut setup = setup("5m");
    let mut requirements = Requirements::default();
    requirements.add(
        Requirement::new(
            "quartermaster.dev/capacity-type",
            Operator::In,
            ["spot", "on-demand", "reserved"],
        )
        .expect("valid"),
    );
    setup.pools[0].spec.requirements = requirements;
    setup.pools[0].spec.limits.nodes = Some(2);
    let mut e = Engine::new(setup, EngineConfig::default());
    e.handle(t(0), Event::ReservationsChanged(vec![block(3, 0, 100)]));
    let actions = pending_then_poll(&mut e, &["a", "b", "c", "d"], t(10));
    assert_eq!(launches(&actions).len(), 2, "{actions:?}");
    assert_eq!(
        reserved_launches(&actions).len(),
        2,
        "the slots first, within the limit"
    );
}
