//! Batching, launch fallback, initialization, readiness budget, interruptions, empty nodes.

use chrono::TimeDelta;
use quartermaster_pricing::CapacityType;
use quartermaster_solver::PodRef;

use super::fixtures::*;
use crate::{Action, DeleteReason, Event};

#[test]
fn pending_pods_are_batched_until_the_idle_window_closes() {
    let mut e = engine();
    e.handle(t(0), Event::PodPending(gpu_pod("a")));
    assert!(e.poll(t(0)).is_empty());
    e.handle(
        t(0) + TimeDelta::milliseconds(500),
        Event::PodPending(gpu_pod("b")),
    );
    // Idle window (1 s) runs from the last arrival.
    assert_eq!(
        e.next_deadline(),
        Some(t(0) + TimeDelta::milliseconds(1500))
    );
    let actions = e.poll(t(0) + TimeDelta::milliseconds(1500));
    assert_eq!(
        launches(&actions).len(),
        2,
        "two 1-GPU pods, two 1-GPU nodes: {actions:?}"
    );
    assert_eq!(e.stats().solves, 1);
    // The window the driver reports on /metrics: first pod to solve.
    assert_eq!(e.take_batch_windows(), [TimeDelta::milliseconds(1500)]);
    assert!(e.take_batch_windows().is_empty(), "taken once");
}

#[test]
fn the_batch_closes_at_the_max_window_under_a_steady_stream() {
    let mut e = engine();
    for i in 0..25 {
        let at = t(0) + TimeDelta::milliseconds(500 * i);
        e.handle(at, Event::PodPending(gpu_pod(&format!("p{i}"))));
        let actions = e.poll(at);
        if i < 20 {
            assert!(actions.is_empty(), "batch closed early at {i}");
        } else if i == 20 {
            assert!(
                !launches(&actions).is_empty(),
                "the 10 s max window closes the batch"
            );
            assert_eq!(e.take_batch_windows(), [TimeDelta::seconds(10)]);
        }
    }
}

#[test]
fn insufficient_capacity_falls_back_to_the_next_offering_and_marks_it_unavailable() {
    let mut e = engine();
    let actions = pending_then_poll(&mut e, &["a"], t(0));
    let [(claim, _, zone, ct)] = launches(&actions).try_into().expect("one launch");
    assert_eq!(
        (zone.as_str(), ct),
        ("us-east-1a", CapacityType::Spot),
        "cheapest first"
    );

    e.handle(
        t(2),
        Event::LaunchFailed {
            claim: claim.clone(),
            error: ice("us-east-1a", CapacityType::Spot),
        },
    );
    let actions = e.poll(t(2));
    let [(again, _, zone, ct)] = launches(&actions).try_into().expect("a fallback launch");
    assert_eq!(again, claim, "the same claim, not a second one");
    assert_eq!((zone.as_str(), ct), ("us-east-1b", CapacityType::Spot));

    e.handle(
        t(3),
        Event::LaunchFailed {
            claim: claim.clone(),
            error: ice("us-east-1b", CapacityType::Spot),
        },
    );
    let actions = e.poll(t(3));
    let [(_, _, _, ct)] = launches(&actions)
        .try_into()
        .expect("falls back to on-demand");
    assert_eq!(ct, CapacityType::OnDemand);
    assert_eq!(e.stats().fallbacks, 2);
    assert_eq!(e.stats().spot_to_on_demand, 1);
    assert_eq!(e.stats().capacity_errors, 2);

    // A new pod planned while the spot offerings are marked avoids them.
    let actions = pending_then_poll(&mut e, &["b"], t(10));
    let [(_, _, _, ct)] = launches(&actions).try_into().expect("one launch");
    assert_eq!(ct, CapacityType::OnDemand);
    // After the TTL (3 min) spot is back.
    let actions = pending_then_poll(&mut e, &["c"], t(10 + 181));
    let [(_, _, _, ct)] = launches(&actions).try_into().expect("one launch");
    assert_eq!(ct, CapacityType::Spot);
}

#[test]
fn a_claim_with_no_offering_left_is_given_up_and_its_pods_planned_again() {
    let mut e = engine();
    let actions = pending_then_poll(&mut e, &["a"], t(0));
    let mut claim = launches(&actions)[0].0.clone();
    let mut now = 0;
    // Every offering fails once; the claim is abandoned and the pod re-planned after the TTLs.
    for (zone, ct) in [
        ("us-east-1a", CapacityType::Spot),
        ("us-east-1b", CapacityType::Spot),
        ("us-east-1a", CapacityType::OnDemand),
        ("us-east-1b", CapacityType::OnDemand),
    ] {
        now += 1;
        e.handle(
            t(now),
            Event::LaunchFailed {
                claim: claim.clone(),
                error: ice(zone, ct),
            },
        );
        let actions = e.poll(t(now));
        if let Some(l) = launches(&actions).first() {
            claim = l.0.clone();
        }
    }
    assert_eq!(e.stats().claims_abandoned, 1);
    assert_eq!(e.claims().count(), 0);
    assert_eq!(e.waiting().count(), 1, "the pod waits again");
    // Nothing is available until the TTLs run out; then it is planned again.
    let deadline = e.next_deadline().expect("the unavailable TTL or retry");
    let actions = e.poll(deadline.max(t(now + 181)));
    assert_eq!(launches(&actions).len(), 1);
}

#[test]
fn throttled_launches_are_retried_after_the_delay() {
    let mut e = engine();
    let actions = pending_then_poll(&mut e, &["a"], t(0));
    let claim = launches(&actions)[0].0.clone();
    e.handle(
        t(2),
        Event::LaunchFailed {
            claim: claim.clone(),
            error: quartermaster_cloud::CloudError::Throttled {
                retry_after: Some(std::time::Duration::from_secs(5)),
            },
        },
    );
    assert!(launches(&e.poll(t(3))).is_empty());
    assert_eq!(e.next_deadline(), Some(t(7)));
    let actions = e.poll(t(7));
    assert_eq!(
        launches(&actions),
        vec![(
            claim,
            "g5.xlarge".into(),
            "us-east-1a".into(),
            CapacityType::Spot
        )]
    );
    assert_eq!(e.stats().retries, 1);
}

/// Launches one pod's node and registers it; returns the claim name.
fn launched_and_registered(e: &mut crate::Engine, pod: &str, gpus_now: i64) -> String {
    let actions = pending_then_poll(e, &[pod], t(0));
    let claim = launches(&actions)[0].0.clone();
    e.handle(
        t(2),
        Event::Launched {
            claim: claim.clone(),
            instance: instance(&claim, "i-1", "us-east-1a", CapacityType::Spot, t(2)),
        },
    );
    e.handle(
        t(60),
        Event::NodeRegistered {
            claim: claim.clone(),
            node: registered_node("node-1", "us-east-1a", gpus_now, true),
        },
    );
    claim
}

/// Launches, registers and initializes node-1 for `pod`, which is bound there; returns the claim.
fn running_on_node_1(e: &mut crate::Engine, pod: &str) -> String {
    let claim = launched_and_registered(e, pod, 1);
    e.handle(
        t(70),
        Event::NodeUpdated {
            node: registered_node("node-1", "us-east-1a", 1, false),
        },
    );
    assert_eq!(binds(&e.poll(t(70))).len(), 1);
    claim
}

#[test]
fn a_node_is_initialized_only_when_its_gpus_are_allocatable_and_startup_taints_are_gone() {
    let mut e = engine();
    let _claim = launched_and_registered(&mut e, "a", 0);
    assert!(
        binds(&e.poll(t(60))).is_empty(),
        "registered is not initialized"
    );
    // GPUs appear but the startup taint is still on.
    e.handle(
        t(90),
        Event::NodeUpdated {
            node: registered_node("node-1", "us-east-1a", 1, true),
        },
    );
    assert!(binds(&e.poll(t(90))).is_empty());
    e.handle(
        t(95),
        Event::NodeUpdated {
            node: registered_node("node-1", "us-east-1a", 1, false),
        },
    );
    assert_eq!(
        binds(&e.poll(t(95))),
        vec![("a".to_owned(), "node-1".to_owned())]
    );
}

#[test]
fn a_node_whose_gpus_never_appear_is_replaced_after_the_budget() {
    let mut e = engine();
    let claim = launched_and_registered(&mut e, "a", 0);
    e.handle(
        t(70),
        Event::NodeUpdated {
            node: registered_node("node-1", "us-east-1a", 0, false),
        },
    );
    assert!(e.poll(t(70)).is_empty());
    // Default budget: 10 minutes after registration.
    assert_eq!(e.next_deadline(), Some(t(60 + 600)));
    let actions = e.poll(t(660));
    assert!(actions.iter().any(|a| matches!(a, Action::Delete { claim: c, reason: DeleteReason::AcceleratorsNotReady, .. } if *c == claim)), "{actions:?}");
    assert_eq!(e.stats().accelerator_timeouts, 1);
    // The pod is planned again at once (no batch wait) on a new claim, avoiding the offering
    // that produced the broken node.
    let replacement = launches(&actions);
    assert_eq!(replacement.len(), 1, "{actions:?}");
    assert_ne!(replacement[0].0, claim);
    assert_ne!(
        (replacement[0].2.as_str(), replacement[0].3),
        ("us-east-1a", CapacityType::Spot)
    );
    // The deleting claim's own deadlines are no longer reported.
    assert!(e.next_deadline().is_none_or(|d| d > t(660)));
}

/// Launches and registers node-1 for pod "a" without GPUs, deletes the pod, then reports the
/// node with `gpus` GPUs and no startup taint; returns the claim and whether it is initialized.
fn emptied_node_with_gpus(e: &mut crate::Engine, gpus: i64) -> (String, bool) {
    let claim = launched_and_registered(e, "a", 0);
    e.handle(t(65), Event::PodGone(gpu_pod("a").id));
    e.handle(
        t(70),
        Event::NodeUpdated {
            node: registered_node("node-1", "us-east-1a", gpus, false),
        },
    );
    e.poll(t(70));
    let view = e.claims().find(|c| c.name == claim).expect("claim");
    (claim, view.initialized)
}

#[test]
fn a_node_with_nothing_nominated_is_not_initialized_before_its_gpus_appear() {
    // The pod goes before the node is ready (or a restart rebuilt the claim without it): with
    // nothing requested, the node still waits for its GPUs. It used to be initialized at once,
    // so the next GPU pod was nominated to a node with no GPU, where it never bound.
    let mut e = engine();
    let (claim, initialized) = emptied_node_with_gpus(&mut e, 0);
    assert!(!initialized);
    // Its GPUs never appear: replaced after the budget, as a node with pods would be.
    let actions = e.poll(t(660));
    assert!(actions.iter().any(|a| matches!(a, Action::Delete { claim: c, reason: DeleteReason::AcceleratorsNotReady, .. } if *c == claim)), "{actions:?}");
}

#[test]
fn a_node_with_nothing_nominated_is_initialized_once_its_gpus_appear() {
    let mut e = engine();
    let (_, initialized) = emptied_node_with_gpus(&mut e, 1);
    assert!(initialized);
}

#[test]
fn pods_nominated_to_an_in_flight_claim_are_not_provisioned_twice() {
    let mut e = engine();
    let actions = pending_then_poll(&mut e, &["a"], t(0));
    assert_eq!(launches(&actions).len(), 1);
    // The node takes minutes; batches come and go meanwhile, the pod stays nominated.
    for minute in 1..8 {
        e.handle(
            t(60 * minute),
            Event::PodPending(gpu_pod(&format!("other-{minute}"))),
        );
        let deadline = e.next_deadline().unwrap();
        let actions = e.poll(deadline);
        for (claim, ..) in launches(&actions) {
            assert_ne!(e.placement(&PodRef::new("default", "a")), None);
            assert!(!claim.is_empty());
        }
    }
    // One claim per pod: 1 for `a` and 7 for the others, never a second one for `a`.
    assert_eq!(e.stats().claims_created, 8);
    assert_eq!(e.placement(&PodRef::new("default", "a")), Some("gpu-00000"));
}

#[test]
fn a_spot_interruption_cordons_launches_the_replacement_at_once_then_drains() {
    let mut e = engine();
    let claim = launched_and_registered(&mut e, "a", 1);
    e.handle(
        t(70),
        Event::NodeUpdated {
            node: registered_node("node-1", "us-east-1a", 1, false),
        },
    );
    assert_eq!(binds(&e.poll(t(70))).len(), 1);

    let provider_id = "sim:///us-east-1a/i-1".to_owned();
    e.handle(
        t(1000),
        Event::Interruption {
            provider_id: provider_id.clone(),
            terminates_at: t(1120),
        },
    );
    let actions = e.poll(t(1000));
    assert!(
        actions.contains(&Action::Cordon {
            node: "node-1".into()
        }),
        "{actions:?}"
    );
    let replacement = launches(&actions);
    assert_eq!(
        replacement.len(),
        1,
        "the replacement launches at once, not after a batch window"
    );
    assert_ne!(replacement[0].0, claim);
    assert_eq!(e.stats().interruptions, 1);
    // The old node is gone at the deadline: drained; the pod waits for the replacement.
    e.handle(t(1120), Event::InstanceGone { provider_id });
    let actions = e.poll(t(1120));
    assert!(
        actions.contains(&Action::Drain {
            node: "node-1".into()
        }),
        "{actions:?}"
    );
    assert!(launches(&actions).is_empty(), "no second replacement");
    assert_eq!(
        e.placement(&PodRef::new("default", "a")),
        Some(replacement[0].0.as_str())
    );
}

#[test]
fn empty_nodes_are_removed_after_consolidate_after() {
    let mut e = engine();
    let claim = running_on_node_1(&mut e, "a");
    e.handle(t(500), Event::PodGone(PodRef::new("default", "a")));
    assert!(e.poll(t(500)).is_empty());
    assert_eq!(
        e.next_deadline(),
        Some(t(800)),
        "consolidateAfter 5m from when it emptied"
    );
    let actions = e.poll(t(800));
    assert!(actions.iter().any(
        |a| matches!(a, Action::Delete { claim: c, reason: DeleteReason::Empty, .. } if *c == claim)
    ));
    e.handle(t(801), Event::Deleted { claim });
    assert_eq!(e.claims().count(), 0);
    assert_eq!(e.stats().empty_deletions, 1);
}

#[test]
fn consolidate_after_never_keeps_empty_nodes() {
    let mut e = crate::Engine::new(setup("Never"), crate::EngineConfig::default());
    let _claim = running_on_node_1(&mut e, "a");
    e.handle(t(100), Event::PodGone(PodRef::new("default", "a")));
    e.poll(t(100));
    // Nothing before the node expires (expireAfter defaults to 720h).
    assert!(
        e.next_deadline().is_none_or(|d| d >= t(720 * 3600)),
        "{:?}",
        e.next_deadline()
    );
    assert!(e.poll(t(100_000)).is_empty());
}

#[test]
fn new_pods_fill_room_on_an_initialized_node_without_buying() {
    let mut e = engine();
    let mut setup_pod = gpu_pod("small");
    setup_pod.requests.set(GPU, 0);
    setup_pod
        .requests
        .set(quartermaster_solver::resources::CPU, 500);
    setup_pod
        .requests
        .set(quartermaster_solver::resources::MEMORY, 1 << 30);
    let _claim = running_on_node_1(&mut e, "a");
    e.handle(t(100), Event::PodPending(setup_pod));
    // Retirement looks at the node first (and leaves it open: its pod needs all of it), then
    // the batch closes.
    let mut actions = Vec::new();
    while let Some(deadline) = e.next_deadline().filter(|d| *d <= t(200)) {
        actions.extend(e.poll(deadline.max(t(100))));
    }
    assert!(launches(&actions).is_empty(), "{actions:?}");
    assert_eq!(
        binds(&actions),
        vec![("small".to_owned(), "node-1".to_owned())]
    );
}

#[test]
fn a_pod_reported_again_keeps_its_nomination() {
    let mut e = engine();
    let actions = pending_then_poll(&mut e, &["a"], t(0));
    assert_eq!(launches(&actions).len(), 1);
    // A watch re-list reports the still-pending pod again.
    e.handle(t(5), Event::PodPending(gpu_pod("a")));
    assert_eq!(e.next_deadline(), None);
    assert!(e.poll(t(60)).is_empty());
    assert_eq!(e.stats().claims_created, 1);
}

#[test]
fn an_interrupted_node_is_deleted_once_its_pods_run_on_the_replacement() {
    let mut e = engine();
    let old = running_on_node_1(&mut e, "a");
    e.handle(
        t(1000),
        Event::Interruption {
            provider_id: "sim:///us-east-1a/i-1".into(),
            terminates_at: t(1120),
        },
    );
    let actions = e.poll(t(1000));
    let new = launches(&actions)[0].0.clone();
    e.handle(
        t(1010),
        Event::Launched {
            claim: new.clone(),
            instance: instance(&new, "i-2", "us-east-1b", CapacityType::Spot, t(1010)),
        },
    );
    e.handle(
        t(1050),
        Event::NodeRegistered {
            claim: new.clone(),
            node: registered_node("node-2", "us-east-1b", 1, false),
        },
    );
    let actions = e.poll(t(1050));
    assert_eq!(binds(&actions), vec![("a".to_owned(), "node-2".to_owned())]);
    assert!(
        actions.iter().any(|a| matches!(a, Action::Delete { claim, reason: DeleteReason::Interrupted, .. } if *claim == old)),
        "the vacated node goes before its reclaim: {actions:?}"
    );
}

#[test]
fn a_poll_is_skipped_only_when_nothing_happened_and_nothing_is_due() {
    let mut e = engine();
    assert!(!e.nothing_due(t(0)), "a new engine polls");
    e.handle(t(0), Event::PodPending(gpu_pod("a")));
    assert!(!e.nothing_due(t(0)), "an event was handled");
    assert!(e.poll(t(0)).is_empty(), "the batch is still open");
    // Nothing heard since, and the batch closes at 1 s: a poll before then has nothing to do.
    assert!(e.nothing_due(t(0) + TimeDelta::milliseconds(500)));
    assert!(!e.nothing_due(t(1)), "the batch window is due");
    let actions = e.poll(t(1));
    assert_eq!(launches(&actions).len(), 1);
    // A poll that decided something is followed by one that looks again.
    assert!(!e.nothing_due(t(1)));
    let again = e.poll(t(1));
    assert!(again.is_empty(), "{again:?}");
    assert!(
        e.nothing_due(t(1)),
        "an idle poll at the same instant is not repeated"
    );
}
