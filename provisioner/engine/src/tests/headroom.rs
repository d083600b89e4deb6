//! CapacityBuffers: room for placeholder chunks is bought and kept; a real pod takes it at once
//! and the buffer is bought again behind it; without the buffer the room goes as empty.

use quartermaster_pricing::CapacityType;
use quartermaster_solver::PodRef;

use super::fixtures::*;
use super::fleet::deleted;
use crate::{Action, Buffer, DeleteReason, Engine, Event};

fn buffer(replicas: u32) -> Buffer {
    let mut chunk = gpu_pod("capacitybuffer-warm");
    chunk.id = PodRef::new("ml", "capacitybuffer-warm");
    Buffer {
        key: "ml/warm".into(),
        chunk,
        replicas,
    }
}

/// Launches and registers every launch in `actions` (nodes `node-<claim>`), GPUs up.
fn bring_up(e: &mut Engine, actions: &[Action], at: i64) -> Vec<String> {
    let mut names = Vec::new();
    for (i, (claim, _, zone, ct)) in launches(actions).into_iter().enumerate() {
        e.handle(
            t(at),
            Event::Launched {
                claim: claim.clone(),
                instance: instance(&claim, &format!("i-{at}-{i}"), &zone, ct, t(at)),
            },
        );
        e.handle(
            t(at),
            Event::NodeRegistered {
                claim: claim.clone(),
                node: registered_node(&format!("node-{claim}"), &zone, 1, false),
            },
        );
        names.push(claim);
    }
    names
}

fn held(e: &Engine) -> Vec<Option<String>> {
    e.headroom().map(|h| h.claim.map(str::to_owned)).collect()
}

#[test]
fn a_buffer_buys_room_that_stays_a_real_pod_takes_it_at_once_and_the_buffer_is_bought_again() {
    let mut e = engine();
    e.handle(t(0), Event::BuffersChanged(vec![buffer(2)]));
    let actions = e.poll(t(0));
    let first = launches(&actions);
    assert_eq!(
        first.len(),
        2,
        "one g5.xlarge per one-GPU chunk: {actions:?}"
    );
    assert!(first.iter().all(|l| l.3 == CapacityType::Spot));
    assert!(
        binds(&actions).is_empty(),
        "nothing is bound for a placeholder"
    );
    let claims = bring_up(&mut e, &actions, 30);
    let actions = e.poll(t(30));
    assert!(binds(&actions).is_empty(), "{actions:?}");
    // Empty of pods for an hour, but holding the buffer: not removed (consolidateAfter 5m).
    let mut all = Vec::new();
    let mut now = t(31);
    while let Some(d) = e.next_deadline() {
        if d > t(3600) {
            break;
        }
        now = d;
        all.extend(e.poll(d));
    }
    assert!(deleted(&all).is_empty(), "{all:?}");
    assert!(held(&e).iter().all(Option::is_some));
    assert_eq!(e.stats().headroom_solves, 1);

    // A real pod arrives: it is placed on buffer room in the same solve (bound now, no node
    // to wait for), and one node is bought for the chunk it displaced.
    let at = t(3700).max(now);
    e.handle(at, Event::PodPending(gpu_pod("inference-0")));
    let mut actions = e.poll(at);
    let d = e.next_deadline().expect("the batch closes");
    actions.extend(e.poll(d));
    let bound = binds(&actions);
    assert_eq!(bound.len(), 1, "{actions:?}");
    assert!(claims.iter().any(|c| bound[0].1 == format!("node-{c}")));
    assert_eq!(
        launches(&actions).len(),
        1,
        "the buffer refills: {actions:?}"
    );
    assert_eq!(e.stats().headroom_solves, 2);
    let placed = held(&e);
    assert_eq!(placed.len(), 2);
    assert!(placed.iter().all(Option::is_some), "{placed:?}");
}

#[test]
fn without_its_buffer_the_room_goes_as_empty() {
    let mut e = engine();
    e.handle(t(0), Event::BuffersChanged(vec![buffer(1)]));
    let actions = e.poll(t(0));
    let claims = bring_up(&mut e, &actions, 30);
    assert_eq!(claims.len(), 1);
    e.poll(t(30));
    e.handle(t(100), Event::BuffersChanged(Vec::new()));
    let mut all = e.poll(t(100));
    while let Some(d) = e.next_deadline() {
        if d > t(2000) {
            break;
        }
        all.extend(e.poll(d));
    }
    assert_eq!(
        deleted(&all),
        vec![(claims[0].clone(), DeleteReason::Empty)]
    );
}

#[test]
fn a_buffer_that_cannot_be_placed_is_tried_again_later_not_every_poll() {
    let mut e = engine();
    // A chunk no instance type can hold (two GPUs on one-GPU types).
    let mut b = buffer(1);
    b.chunk.requests.set(GPU, 2);
    e.handle(t(0), Event::BuffersChanged(vec![b]));
    assert!(launches(&e.poll(t(0))).is_empty());
    assert_eq!(e.stats().headroom_solves, 1);
    e.poll(t(1));
    assert_eq!(e.stats().headroom_solves, 1, "not solved again at once");
    let retry = e.next_deadline().expect("a retry");
    assert!(retry > t(1));
    e.poll(retry);
    assert_eq!(e.stats().headroom_solves, 2);
}

#[test]
fn consolidation_does_not_take_buffer_room_for_waste() {
    let mut e = Engine::new(
        setup_with("WhenEmptyOrUnderutilized", "30s"),
        crate::EngineConfig::default(),
    );
    e.handle(t(0), Event::BuffersChanged(vec![buffer(2)]));
    let actions = e.poll(t(0));
    assert_eq!(bring_up(&mut e, &actions, 30).len(), 2);
    let mut all = e.poll(t(30));
    while let Some(d) = e.next_deadline() {
        if d > t(7200) {
            break;
        }
        all.extend(e.poll(d));
    }
    assert!(deleted(&all).is_empty(), "{all:?}");
    assert!(launches(&all).is_empty(), "{all:?}");
    assert!(held(&e).iter().all(Option::is_some));
}
