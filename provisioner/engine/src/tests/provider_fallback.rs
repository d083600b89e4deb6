//! Providers that try a claim's fallback offerings themselves (AWS CreateFleet): the launch
//! request carries them in order, an instance on a fallback offering moves the claim to it,
//! and a capacity error naming the last offering tried gives up every offering before it.

use quartermaster_pricing::CapacityType;

use super::fixtures::*;
use crate::{Action, Event};

fn fallbacks(actions: &[Action]) -> Vec<(String, CapacityType)> {
    actions
        .iter()
        .find_map(|a| match a {
            Action::Launch { request, .. } => Some(
                request
                    .fallbacks
                    .iter()
                    .map(|o| (o.zone.clone(), o.capacity_type))
                    .collect(),
            ),
            _ => None,
        })
        .expect("a launch")
}

#[test]
fn the_launch_request_carries_the_claims_fallback_offerings_in_order() {
    let mut e = engine();
    let actions = pending_then_poll(&mut e, &["a"], t(0));
    assert_eq!(
        fallbacks(&actions),
        [
            ("us-east-1b".to_owned(), CapacityType::Spot),
            ("us-east-1a".to_owned(), CapacityType::OnDemand),
            ("us-east-1b".to_owned(), CapacityType::OnDemand),
        ]
    );
}

#[test]
fn an_instance_on_a_fallback_offering_moves_the_claim_to_it() {
    let mut e = engine();
    let actions = pending_then_poll(&mut e, &["a"], t(0));
    let [(claim, _, _, _)] = launches(&actions).try_into().expect("one launch");
    e.handle(
        t(2),
        Event::Launched {
            claim: claim.clone(),
            instance: instance(&claim, "i-1", "us-east-1a", CapacityType::OnDemand, t(2)),
        },
    );
    let view = e.claims().find(|c| c.name == claim).expect("the claim");
    assert_eq!(
        (view.offering.zone.as_str(), view.offering.capacity_type),
        ("us-east-1a", CapacityType::OnDemand)
    );
    assert_eq!(
        view.labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str),
        Some("us-east-1a")
    );
    assert_eq!(view.provider_id.as_deref(), Some("sim:///us-east-1a/i-1"));
    assert_eq!(e.stats().fallbacks, 1);
}

#[test]
fn a_capacity_error_naming_the_last_offering_gives_up_every_offering_tried() {
    let mut e = engine();
    let actions = pending_then_poll(&mut e, &["a"], t(0));
    let [(claim, _, _, _)] = launches(&actions).try_into().expect("one launch");
    e.handle(
        t(2),
        Event::LaunchFailed {
            claim: claim.clone(),
            error: ice("us-east-1b", CapacityType::OnDemand),
        },
    );
    let actions = e.poll(t(2));
    assert!(
        launches(&actions).iter().all(|(c, ..)| c != &claim),
        "no offering of the claim is left to try: {actions:?}"
    );
    assert!(e.claims().all(|c| c.name != claim));
}
