//! Nominations are hints: the kube-scheduler binds where it likes. Pods whose planned room was
//! taken are solved again at once, and empty nodes wait for the scheduler.

use chrono::TimeDelta;
use quartermaster_pricing::CapacityType;
use quartermaster_solver::PodRef;

use super::fixtures::*;
use super::fleet::deleted;
use crate::{DeleteReason, Engine, EngineConfig, Event};

/// Launches and registers `claim` as `node` in us-east-1a at `at`, GPUs and all (initialized).
fn up(e: &mut Engine, claim: &str, id: &str, node: &str, at: i64) {
    e.handle(
        t(at),
        Event::Launched {
            claim: claim.to_owned(),
            instance: instance(claim, id, "us-east-1a", CapacityType::Spot, t(at)),
        },
    );
    e.handle(
        t(at),
        Event::NodeRegistered {
            claim: claim.to_owned(),
            node: registered_node(node, "us-east-1a", 1, false),
        },
    );
}

/// The claim `pod` is planned on.
fn placement(e: &Engine, pod: &str) -> String {
    e.placement(&PodRef::new("default", pod))
        .expect("placed")
        .to_owned()
}

/// The cluster reports GPU pod `pod` bound on `node` at `at`.
fn bound(e: &mut Engine, at: i64, pod: &str, node: &str) {
    e.handle(
        t(at),
        Event::PodBound {
            pod: gpu_pod(pod),
            node: node.to_owned(),
        },
    );
}

#[test]
fn a_pod_whose_room_the_scheduler_gave_away_is_planned_again_at_once_on_room_still_free() {
    let mut e = engine();
    let actions = pending_then_poll(&mut e, &["a", "b"], t(0));
    let claims: Vec<String> = launches(&actions).into_iter().map(|l| l.0).collect();
    assert_eq!(claims.len(), 2, "{actions:?}");
    let claim_of = |e: &Engine, p: &str| e.placement(&PodRef::new("default", p)).map(str::to_owned);
    let (for_a, for_b) = (claim_of(&e, "a").unwrap(), claim_of(&e, "b").unwrap());
    // a's node comes up first, and the kube-scheduler binds b there (it ignores nominations).
    up(&mut e, &for_a, "i-1", "node-a", 30);
    assert_eq!(binds(&e.poll(t(30))), vec![("a".into(), "node-a".into())]);
    bound(&mut e, 31, "b", "node-a");
    let actions = e.poll(t(31));
    // a no longer fits on its node; it is solved again now (no batch wait) and takes the room
    // still free on b's node in flight: nothing new is bought.
    assert!(launches(&actions).is_empty(), "{actions:?}");
    assert_eq!(claim_of(&e, "a").as_deref(), Some(for_b.as_str()));
    assert_eq!(claim_of(&e, "b").as_deref(), Some(for_a.as_str()));
    assert_eq!(e.stats().nominations_released, 1);
    assert_eq!(e.stats().solves, 2);
    // b's old node comes up: a is nominated there, nothing is empty.
    up(&mut e, &for_b, "i-2", "node-b", 40);
    let actions = e.poll(t(40));
    assert_eq!(binds(&actions), vec![("a".into(), "node-b".into())]);
    assert!(deleted(&actions).is_empty(), "{actions:?}");
}

#[test]
fn a_pod_nominated_to_a_node_that_is_full_of_others_gets_a_new_node() {
    let mut e = engine();
    let actions = pending_then_poll(&mut e, &["a"], t(0));
    let claim = launches(&actions)[0].0.clone();
    up(&mut e, &claim, "i-1", "node-a", 30);
    assert_eq!(binds(&e.poll(t(30))).len(), 1);
    // Another pod, never seen pending by the engine, is bound there first.
    bound(&mut e, 31, "intruder", "node-a");
    let actions = e.poll(t(31));
    assert_eq!(launches(&actions).len(), 1, "a new node for a: {actions:?}");
    assert_ne!(
        e.placement(&PodRef::new("default", "a")),
        Some(claim.as_str())
    );
}

#[test]
fn an_empty_node_waits_for_the_scheduler_and_for_pods_about_to_be_solved() {
    // consolidateAfter 0s: only the binding grace (20 s) holds an empty node.
    let mut e = Engine::new(setup("0s"), EngineConfig::default());
    let actions = pending_then_poll(&mut e, &["a"], t(0));
    let claim = launches(&actions)[0].0.clone();
    up(&mut e, &claim, "i-1", "node-a", 30);
    assert_eq!(binds(&e.poll(t(30))).len(), 1);
    // The pod goes before the scheduler bound it: the node is empty, but new.
    e.handle(t(31), Event::PodGone(PodRef::new("default", "a")));
    assert!(deleted(&e.poll(t(31))).is_empty());
    assert_eq!(e.next_deadline(), Some(t(50)), "initialized at 30 + 20 s");
    // A pod arrives just before: it waits for its batch, and the node waits for it.
    e.handle(
        t(49) + TimeDelta::milliseconds(500),
        Event::PodPending(gpu_pod("c")),
    );
    assert!(deleted(&e.poll(t(50))).is_empty(), "c may use it");
    let actions = e.poll(t(50) + TimeDelta::milliseconds(500));
    assert!(
        launches(&actions).is_empty(),
        "c goes on the empty node: {actions:?}"
    );
    assert_eq!(binds(&actions), vec![("c".into(), "node-a".into())]);
    assert!(deleted(&actions).is_empty());
    // c leaves too: the node goes 20 s after c's nomination.
    e.handle(t(55), Event::PodGone(PodRef::new("default", "c")));
    assert!(deleted(&e.poll(t(55))).is_empty());
    let deadline = e.next_deadline().expect("the empty node's deadline");
    assert_eq!(deadline, t(70) + TimeDelta::milliseconds(500));
    assert_eq!(
        deleted(&e.poll(deadline)),
        vec![(claim, DeleteReason::Empty)]
    );
}

#[test]
fn an_empty_node_is_kept_while_a_pod_waiting_for_a_node_still_in_flight_could_run_there() {
    let mut e = Engine::new(setup("0s"), EngineConfig::default());
    let actions = pending_then_poll(&mut e, &["a", "b"], t(0));
    let claims: Vec<String> = launches(&actions).into_iter().map(|l| l.0).collect();
    let for_a = placement(&e, "a");
    up(&mut e, &for_a, "i-1", "node-a", 30);
    e.poll(t(30));
    bound(&mut e, 31, "a", "node-a");
    // a finishes; b still waits for its own node, which is not up: node-a stays for it.
    e.handle(t(40), Event::PodGone(PodRef::new("default", "a")));
    let actions = e.poll(t(200));
    assert!(deleted(&actions).is_empty(), "{actions:?}");
    // The scheduler binds b there; b's own node is the one left empty now.
    bound(&mut e, 201, "b", "node-a");
    assert!(deleted(&e.poll(t(201))).is_empty());
    assert_eq!(claims.len(), 2);
}

#[test]
fn an_empty_node_is_kept_while_a_pod_nominated_to_another_node_that_is_up_is_not_bound_yet() {
    // a and b get a node each. a finishes; b's node is up and b is nominated there, but the
    // scheduler has not bound it yet and may bind it on a's empty node instead: deleting that
    // node as the scheduler binds would take b with it.
    let mut e = Engine::new(setup("0s"), EngineConfig::default());
    let actions = pending_then_poll(&mut e, &["a", "b"], t(0));
    assert_eq!(launches(&actions).len(), 2);
    let (for_a, for_b) = (placement(&e, "a"), placement(&e, "b"));
    up(&mut e, &for_a, "i-1", "node-a", 30);
    up(&mut e, &for_b, "i-2", "node-b", 30);
    e.poll(t(30));
    bound(&mut e, 31, "a", "node-a");
    e.handle(t(40), Event::PodGone(PodRef::new("default", "a")));
    assert!(deleted(&e.poll(t(200))).is_empty(), "b may land on node-a");
    // The scheduler binds b on its node: node-a is empty and nobody is waiting.
    bound(&mut e, 201, "b", "node-b");
    assert_eq!(deleted(&e.poll(t(230))), vec![(for_a, DeleteReason::Empty)]);
}
