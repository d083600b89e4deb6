//! Static NodePools (`spec.replicas`): the count is kept whatever the pods need.

use quartermaster_pricing::CapacityType;
use quartermaster_solver::{OfferingChoice, PodRef};

use super::fixtures::*;
use crate::{Action, DeleteReason, Engine, EngineConfig, Event, FoundClaim};

fn static_engine(replicas: i64) -> Engine {
    let mut setup = setup("1m");
    setup.pools[0].node_pool.spec.replicas = Some(replicas);
    let node_pool = setup.pools[0].node_pool.clone();
    let spec = setup.pools[0].spec.clone();
    setup.pools[0] = crate::PoolPolicy::new(spec, node_pool).expect("valid pool");
    Engine::new(setup, EngineConfig::default())
}

fn found(name: &str) -> FoundClaim {
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
        provider_id: Some(format!("sim:///us-east-1a/{name}")),
        launched_at: Some(t(-90)),
        node: Some(registered_node(name, "us-east-1a", 1, false)),
        registered_at: Some(t(-60)),
        initialized_at: Some(t(-50)),
        deleting: false,
        template_hash: None,
        gang: None,
    }
}

#[test]
fn a_static_pool_launches_its_replicas_without_any_pod() {
    let mut e = static_engine(2);
    let actions = e.poll(t(0));
    let launched = launches(&actions);
    assert_eq!(launched.len(), 2, "{actions:?}");
    assert!(
        launched
            .iter()
            .all(|(_, ty, _, ct)| ty == "g5.xlarge" && *ct == CapacityType::Spot),
        "the cheapest offering the pool allows: {launched:?}"
    );
    assert!(
        launches(&e.poll(t(1))).is_empty(),
        "the count is kept, not exceeded"
    );
}

#[test]
fn pods_use_a_static_pool_but_never_make_it_grow() {
    let mut e = static_engine(1);
    assert_eq!(launches(&e.poll(t(0))).len(), 1);
    let actions = pending_then_poll(&mut e, &["a", "b"], t(1));
    assert!(
        launches(&actions).is_empty(),
        "one GPU per node, two GPU pods: the second waits, the pool stays at 1: {actions:?}"
    );
    let placed = ["a", "b"]
        .iter()
        .filter(|p| e.placement(&PodRef::new("default", **p)).is_some())
        .count();
    assert_eq!(placed, 1, "one pod takes the static node");
}

#[test]
fn an_empty_static_node_is_never_removed_or_consolidated() {
    let mut e = static_engine(1);
    e.handle(t(0), Event::ClaimFound(found("gpu-s00001")));
    for s in [0, 600, 3600] {
        let actions = e.poll(t(s));
        assert!(
            !actions.iter().any(|a| matches!(a, Action::Delete { .. })),
            "{actions:?}"
        );
        assert!(launches(&actions).is_empty(), "{actions:?}");
    }
}

#[test]
fn lowering_replicas_removes_the_emptiest_nodes() {
    let mut e = static_engine(1);
    e.handle(t(0), Event::ClaimFound(found("gpu-s00001")));
    e.handle(t(0), Event::ClaimFound(found("gpu-s00002")));
    e.handle(
        t(0),
        Event::PodBound {
            pod: gpu_pod("busy"),
            node: "gpu-s00001".into(),
        },
    );
    let actions = e.poll(t(0));
    let deleted: Vec<(&str, DeleteReason)> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Delete { claim, reason, .. } => Some((claim.as_str(), *reason)),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, [("gpu-s00002", DeleteReason::ScaledDown)]);
}

#[test]
fn a_negative_replica_count_is_refused() {
    let mut setup = setup("1m");
    setup.pools[0].node_pool.spec.replicas = Some(-1);
    let err = crate::PoolPolicy::new(
        setup.pools[0].spec.clone(),
        setup.pools[0].node_pool.clone(),
    )
    .unwrap_err();
    assert!(err.to_string().contains("spec.replicas"), "{err}");
}
