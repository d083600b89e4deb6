//! ProvisioningRequests: check-capacity answers from what exists and buys nothing;
//! best-effort-atomic pods are one gang whose verdict follows their claims.

use quartermaster_pricing::CapacityType;
use quartermaster_solver::{Gang, Pod, PodRef};

use super::fixtures::*;
use crate::{Engine, Event, LABEL_PROVISIONING_REQUEST, RequestVerdict};

/// The `i`-th pod of request `job`, one GPU, in a gang of `of`.
fn booked(i: usize, of: u32, gpus: i64) -> Pod {
    let mut p = gpu_pod(&format!("provreq-job-0-{i}"));
    p.requests.set(GPU, gpus);
    p.labels
        .insert(LABEL_PROVISIONING_REQUEST.into(), "job".into());
    p.gang = Some(Gang {
        name: "default/provreq-job".into(),
        min_member: of,
    });
    p
}

fn ids(pods: &[Pod]) -> Vec<PodRef> {
    pods.iter().map(|p| p.id.clone()).collect()
}

/// Pending at t(0), polled when the batch closes.
fn pend(e: &mut Engine, pods: &[Pod]) -> Vec<crate::Action> {
    for p in pods {
        e.handle(t(0), Event::PodPending(p.clone()));
    }
    assert!(e.poll(t(0)).is_empty());
    let deadline = e.next_deadline().expect("a batch deadline");
    e.poll(deadline)
}

#[test]
fn best_effort_atomic_is_provisioned_once_every_node_registered() {
    let mut e = engine();
    let pods = [booked(0, 2, 1), booked(1, 2, 1)];
    let launched = launches(&pend(&mut e, &pods));
    assert_eq!(launched.len(), 2, "both nodes at once: {launched:?}");
    assert_eq!(
        e.request_verdict(&ids(&pods), false),
        RequestVerdict::InProgress
    );
    for (n, (claim, _, zone, capacity_type)) in launched.iter().enumerate() {
        e.handle(
            t(10),
            Event::Launched {
                claim: claim.clone(),
                instance: instance(claim, &format!("i-{n}"), zone, *capacity_type, t(10)),
            },
        );
    }
    assert_eq!(
        e.request_verdict(&ids(&pods), false),
        RequestVerdict::InProgress
    );
    for (n, (claim, _, zone, _)) in launched.iter().enumerate() {
        e.handle(
            t(60),
            Event::NodeRegistered {
                claim: claim.clone(),
                node: registered_node(&format!("node-{n}"), zone, 1, false),
            },
        );
    }
    assert_eq!(
        e.request_verdict(&ids(&pods), false),
        RequestVerdict::Provisioned
    );
}

#[test]
fn best_effort_atomic_that_cannot_be_placed_buys_nothing_and_says_why() {
    let mut e = engine();
    // One pod fits a g5.xlarge; its partner asks for 16 GPUs, which no type has.
    let pods = [booked(0, 2, 1), booked(1, 2, 16)];
    let actions = pend(&mut e, &pods);
    assert!(
        launches(&actions).is_empty(),
        "no part of the request is bought"
    );
    match e.request_verdict(&ids(&pods), false) {
        RequestVerdict::NotFound(why) => {
            assert!(why.contains("gang default/provreq-job"), "{why}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn check_capacity_answers_from_existing_nodes_and_launches_nothing() {
    let mut e = engine();
    let cpu = |n: &str| cpu_pod(n, 1000);
    assert!(matches!(
        e.check_capacity(t(0), &[cpu("c0")]),
        RequestVerdict::NotFound(_)
    ));
    // One node with pod `a` on it: 1900m CPU and no GPU left.
    let launched = launches(&pending_then_poll(&mut e, &["a"], t(0)));
    let (claim, _, zone, _) = launched[0].clone();
    e.handle(
        t(10),
        Event::Launched {
            claim: claim.clone(),
            instance: instance(&claim, "i-1", &zone, CapacityType::Spot, t(10)),
        },
    );
    e.handle(
        t(60),
        Event::NodeRegistered {
            claim,
            node: registered_node("node-1", &zone, 1, false),
        },
    );
    e.poll(t(60));
    assert_eq!(
        e.check_capacity(t(60), &[cpu("c0")]),
        RequestVerdict::Provisioned
    );
    match e.check_capacity(t(60), &[cpu("c0"), cpu("c1")]) {
        RequestVerdict::NotFound(why) => {
            assert!(
                why.starts_with("1 of 2 pod(s) do not fit on existing nodes"),
                "{why}"
            )
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        e.check_capacity(t(60), &[gpu_pod("g")]),
        RequestVerdict::NotFound(_)
    ));
    assert_eq!(e.claims().count(), 1, "a check buys nothing");
}
