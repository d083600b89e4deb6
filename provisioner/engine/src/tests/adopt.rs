//! A restarted controller hands the engine what the cluster remembers: adopted claims are never
//! launched twice, their room is used before anything new is bought, and pods the scheduler
//! bound or claims a user deleted are taken as facts.

use quartermaster_pricing::CapacityType;
use quartermaster_solver::OfferingChoice;

use super::fixtures::*;
use crate::{Action, Event, FoundClaim};

fn found(name: &str, provider_id: Option<&str>, node: bool, initialized: bool) -> FoundClaim {
    FoundClaim {
        name: name.into(),
        node_pool: "gpu".into(),
        offering: OfferingChoice {
            instance_type: "g5.xlarge".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::Spot,
            price_per_hour: 0.40,
        },
        created_at: t(-100),
        provider_id: provider_id.map(str::to_owned),
        launched_at: provider_id.map(|_| t(-90)),
        node: node.then(|| registered_node(name, "us-east-1a", 1, false)),
        registered_at: node.then(|| t(-60)),
        initialized_at: initialized.then(|| t(-50)),
        deleting: false,
        template_hash: None,
        gang: None,
    }
}

#[test]
fn an_adopted_launched_claim_is_not_launched_again_and_takes_the_pending_pod() {
    let mut e = engine();
    e.handle(
        t(0),
        Event::ClaimFound(found("gpu-x00001", Some("kwok://gpu-x00001"), false, false)),
    );
    assert!(
        launches(&e.poll(t(0))).is_empty(),
        "already launched: no second launch"
    );
    let actions = pending_then_poll(&mut e, &["a"], t(1));
    assert!(
        launches(&actions).is_empty(),
        "the pod fits the adopted claim's room: nothing new is bought: {actions:?}"
    );
    assert_eq!(e.placement(&gpu_pod("a").id), Some("gpu-x00001"));
}

#[test]
fn an_adopted_claim_that_never_launched_is_launched_again_under_its_own_name() {
    let mut e = engine();
    e.handle(
        t(0),
        Event::ClaimFound(found("gpu-x00002", None, false, false)),
    );
    let actions = e.poll(t(0));
    let [(claim, it, zone, ct)] = launches(&actions).try_into().expect("one launch");
    assert_eq!(claim, "gpu-x00002");
    assert_eq!(
        (it.as_str(), zone.as_str(), ct),
        ("g5.xlarge", "us-east-1a", CapacityType::Spot)
    );
    // Reported twice (a re-list): still one claim, no second launch.
    e.handle(
        t(1),
        Event::ClaimFound(found("gpu-x00002", None, false, false)),
    );
    assert!(launches(&e.poll(t(1))).is_empty());
    assert_eq!(e.claims().count(), 1);
}

#[test]
fn claims_of_unknown_pools_are_not_adopted() {
    let mut e = engine();
    let mut f = found("other-1", Some("kwok://other-1"), false, false);
    f.node_pool = "gone".into();
    e.handle(t(0), Event::ClaimFound(f));
    assert_eq!(e.claims().count(), 0);
}

#[test]
fn a_pod_bound_on_an_initialized_node_keeps_it_from_being_empty() {
    let mut e = engine();
    e.handle(
        t(0),
        Event::ClaimFound(found("gpu-x00003", Some("kwok://gpu-x00003"), true, true)),
    );
    e.handle(
        t(0),
        Event::PodBound {
            pod: gpu_pod("a"),
            node: "gpu-x00003".into(),
        },
    );
    assert_eq!(e.placement(&gpu_pod("a").id), Some("gpu-x00003"));
    // consolidateAfter is 5 m: far past it, the node still holds its pod.
    let actions = e.poll(t(3600));
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Delete { .. })),
        "{actions:?}"
    );
    // Once the pod is gone the empty node goes after consolidateAfter.
    e.handle(t(3600), Event::PodGone(gpu_pod("a").id));
    e.poll(t(3600));
    let actions = e.poll(t(3600 + 301));
    assert!(
        actions
            .iter()
            .any(|a| matches!(a, Action::Delete { claim, .. } if claim == "gpu-x00003")),
        "{actions:?}"
    );
}

#[test]
fn a_pod_bound_to_a_node_no_claim_owns_is_dropped() {
    let mut e = engine();
    let actions = pending_then_poll(&mut e, &["a"], t(0));
    assert_eq!(launches(&actions).len(), 1);
    e.handle(
        t(5),
        Event::PodBound {
            pod: gpu_pod("a"),
            node: "someone-elses-node".into(),
        },
    );
    assert_eq!(e.placement(&gpu_pod("a").id), None);
}

#[test]
fn a_claim_deleted_by_a_user_takes_no_more_pods_and_its_pods_are_planned_again() {
    let mut e = engine();
    let actions = pending_then_poll(&mut e, &["a"], t(0));
    let [(claim, ..)] = launches(&actions).try_into().expect("one launch");
    e.handle(
        t(5),
        Event::ClaimDeleting {
            claim: claim.clone(),
        },
    );
    assert_eq!(e.placement(&gpu_pod("a").id), None, "the pod waits again");
    let deadline = e.next_deadline().expect("the pod is batched again");
    let actions = e.poll(deadline);
    let [(other, ..)] = launches(&actions).try_into().expect("a new claim");
    assert_ne!(other, claim);
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Delete { .. })),
        "the user's delete is already under way"
    );
}
