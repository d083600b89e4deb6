//! Flex-start capacity: offered only to pools that opt in (the engine adds the offerings to
//! its catalog itself), given the queue's wait to register, and vacated 40 minutes before its
//! seven-day run ends with its pods placed elsewhere first.

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_policies::{Operator, Requirement, Requirements};
use quartermaster_pricing::flex_start::{FLEX_START_DRAIN_BEFORE, FLEX_START_MAX_RUN};
use quartermaster_pricing::{CapacityType, Catalog, Cloud};

use super::fixtures::*;
use super::fleet::deleted;
use crate::{Action, DeleteReason, Engine, EngineConfig, EngineSetup, Event};

/// The fixture world on GCP: its one GPU type is of family `a2` (flex-start at half its
/// on-demand price), and the pool allows `capacity_types`. The catalog handed to the engine
/// has no flex-start offering.
fn gcp_setup(capacity_types: &[&str]) -> EngineSetup {
    let mut setup = setup("5m");
    let mut types = catalog().instance_types().to_vec();
    for t in &mut types {
        t.cloud = Cloud::Gcp;
        t.family = "a2".into();
    }
    setup.catalog = Catalog::new(types);
    let mut requirements = Requirements::default();
    requirements.add(
        Requirement::new(
            "quartermaster.dev/capacity-type",
            Operator::In,
            capacity_types.iter().copied(),
        )
        .expect("valid"),
    );
    let spec = &mut setup.pools[0].spec;
    spec.cloud = Cloud::Gcp;
    spec.requirements = requirements;
    setup
}

fn engine_allowing(capacity_types: &[&str]) -> Engine {
    Engine::new(gcp_setup(capacity_types), EngineConfig::default())
}

/// Launches and registers every launch in `actions` (nodes `node-<claim>`), GPUs up.
fn bring_up(e: &mut Engine, actions: &[Action], at: DateTime<Utc>) -> Vec<String> {
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

/// Pod `name` pending at `at`, placed, its node up and the pod bound there; the claim.
fn running(e: &mut Engine, name: &str, at: DateTime<Utc>) -> String {
    let actions = pending_then_poll(e, &[name], at);
    let launched = launches(&actions);
    assert_eq!(launched.len(), 1, "{actions:?}");
    assert_eq!(launched[0].3, CapacityType::FlexStart, "{actions:?}");
    let up = at + TimeDelta::minutes(5);
    let claims = bring_up(e, &actions, up);
    let bound = binds(&e.poll(up));
    assert_eq!(bound.len(), 1, "{bound:?}");
    e.handle(
        up,
        Event::PodBound {
            pod: gpu_pod(name),
            node: bound[0].1.clone(),
        },
    );
    claims[0].clone()
}

/// Polls at every deadline before `until`; the actions.
fn run_until(e: &mut Engine, until: DateTime<Utc>) -> Vec<Action> {
    let mut all = Vec::new();
    while let Some(d) = e.next_deadline() {
        if d >= until {
            break;
        }
        all.extend(e.poll(d));
    }
    all
}

#[test]
fn a_pool_that_opts_in_gets_flex_start_at_its_price_and_one_that_does_not_never_does() {
    let mut e = engine_allowing(&["on-demand", "flex-start"]);
    let actions = pending_then_poll(&mut e, &["a"], t(10));
    let request = first_launch_request(&actions);
    assert_eq!(request.capacity_type, CapacityType::FlexStart);
    assert!(
        (request.price_per_hour - 0.503).abs() < 1e-9,
        "half of on-demand $1.006: {request:?}"
    );
    assert!(
        request
            .fallbacks
            .iter()
            .any(|f| f.capacity_type == CapacityType::OnDemand),
        "on-demand stays a fallback: {request:?}"
    );

    let mut e = engine_allowing(&["on-demand"]);
    let actions = pending_then_poll(&mut e, &["a"], t(10));
    let launched = launches(&actions);
    assert_eq!(launched.len(), 1, "{actions:?}");
    assert_eq!(launched[0].3, CapacityType::OnDemand);
    let Action::Launch { request, .. } = &actions[0] else {
        panic!("{actions:?}");
    };
    assert!(
        request
            .fallbacks
            .iter()
            .all(|f| f.capacity_type != CapacityType::FlexStart)
    );
}

#[test]
fn a_flex_start_claim_has_the_queue_wait_to_register() {
    let mut e = engine_allowing(&["flex-start"]);
    let actions = pending_then_poll(&mut e, &["a"], t(10));
    let (claim, _, zone, ct) = launches(&actions).remove(0);
    e.handle(
        t(20),
        Event::Launched {
            claim: claim.clone(),
            instance: instance(&claim, "i-1", &zone, ct, t(20)),
        },
    );
    // The plain registration budget (15 min) passes: the request may still be queued.
    let actions = run_until(&mut e, t(20) + TimeDelta::minutes(60));
    assert!(deleted(&actions).is_empty(), "{actions:?}");
    // 15 min + the longest wait (2 h): given up.
    let due = t(20) + TimeDelta::minutes(15) + TimeDelta::hours(2);
    assert_eq!(e.next_deadline(), Some(due));
    let actions = e.poll(due);
    assert_eq!(
        deleted(&actions),
        vec![(claim, DeleteReason::RegistrationTimeout)]
    );
}

#[test]
fn a_flex_start_node_is_vacated_40_minutes_before_its_run_ends_its_pods_placed_first() {
    let mut e = engine_allowing(&["on-demand", "flex-start"]);
    let claim = running(&mut e, "a", t(10));
    let launched_at = t(10) + TimeDelta::minutes(5);
    let drain = launched_at + FLEX_START_MAX_RUN - FLEX_START_DRAIN_BEFORE;
    // Nothing happens for almost seven days.
    let actions = run_until(&mut e, drain);
    assert!(deleted(&actions).is_empty(), "{actions:?}");
    assert!(launches(&actions).is_empty(), "{actions:?}");
    assert_eq!(e.next_deadline(), Some(drain), "the drain is a deadline");
    let actions = e.poll(drain);
    assert!(
        actions.iter().any(|a| matches!(a, Action::Cordon { .. })),
        "{actions:?}"
    );
    assert!(
        deleted(&actions).is_empty(),
        "not before its pods run elsewhere"
    );
    let replacement = launches(&actions);
    assert_eq!(
        replacement.len(),
        1,
        "a place elsewhere at once: {actions:?}"
    );
    assert_eq!(e.stats().flex_start_drains, 1);
    // The replacement comes up and the pod runs there: the old node goes.
    let now = drain + TimeDelta::minutes(5);
    let new = bring_up(&mut e, &actions, now);
    let mut actions = e.poll(now);
    let bound = binds(&actions);
    assert_eq!(bound, vec![("a".to_owned(), format!("node-{}", new[0]))]);
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
        vec![(claim, DeleteReason::FlexStartEnding)],
        "{actions:?}"
    );
    assert_eq!(e.stats().flex_start_drains, 1, "drained once");
}

#[test]
fn a_flex_start_node_whose_pods_find_no_place_is_deleted_when_its_run_ends() {
    let mut setup = gcp_setup(&["flex-start"]);
    setup.pools[0].spec.limits.nodes = Some(1);
    let mut e = Engine::new(setup, EngineConfig::default());
    let claim = running(&mut e, "a", t(10));
    let end = t(10) + TimeDelta::minutes(5) + FLEX_START_MAX_RUN;
    let actions = run_until(&mut e, end);
    assert!(
        launches(&actions).is_empty(),
        "the pool is full: {actions:?}"
    );
    assert!(deleted(&actions).is_empty(), "{actions:?}");
    assert_eq!(e.stats().flex_start_drains, 1);
    assert_eq!(e.next_deadline(), Some(end), "the run's end is a deadline");
    assert_eq!(
        deleted(&e.poll(end)),
        vec![(claim, DeleteReason::FlexStartEnding)]
    );
}
