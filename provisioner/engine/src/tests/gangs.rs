//! Gang launches: a gang's NodeClaims go out together in one zone, fall back only within it,
//! and are rolled back whole when one member cannot be launched, so the gang is planned again
//! elsewhere instead of three nodes idling for a fourth.

use chrono::NaiveDate;
use quartermaster_cloud::{CloudError, InstanceState};
use quartermaster_pricing::{
    Accelerator, Arch, CapacityType, Catalog, Cloud, InstanceType, Offering, Overhead,
};
use quartermaster_solver::resources::{CPU, MEMORY, PODS};
use quartermaster_solver::{Gang, Pod, PodRef, Resources};

use super::fixtures::*;
use super::fleet::deleted;
use crate::{Action, DeleteReason, Engine, EngineConfig, Event};

const GANG_LABEL: &str = "quartermaster.dev/gang";
const PLACEMENT_GROUP_LABEL: &str = "quartermaster.dev/placement-group";
const ZONE: &str = "topology.kubernetes.io/zone";
const REGION: &str = "topology.kubernetes.io/region";

fn offering(zone: &str, capacity_type: CapacityType, price: f64) -> Offering {
    Offering {
        region: "us-east-1".into(),
        zone: zone.into(),
        capacity_type,
        price_per_hour: price,
        available: true,
        price_source: "test".into(),
        price_as_of: NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(),
        estimate: false,
    }
}

/// An 8-GPU type offered in the given zones.
fn p5(offerings: Vec<Offering>) -> Catalog {
    Catalog::new(vec![InstanceType {
        cloud: Cloud::Aws,
        name: "p5.48xlarge".into(),
        family: "p5".into(),
        vcpu: 192,
        memory_mib: 2048 * 1024,
        arch: Arch::Amd64,
        accelerator: Some(Accelerator {
            manufacturer: "nvidia".into(),
            name: "h100".into(),
            count: 8,
            memory_mib: 81559,
            resource: "nvidia.com/gpu".into(),
            fraction: None,
        }),
        local_nvme_gb: 0,
        network_gbps: 3200.0,
        interconnect: None,
        efa_count: 0,
        max_pods: 100,
        overhead: Overhead {
            cpu_millis: 100,
            memory_mib: 1024,
        },
        offerings,
    }])
}

/// On-demand only, in two zones (us-east-1a cheaper): a member out of capacity in its zone has
/// no fallback there.
fn two_zones() -> Catalog {
    p5(vec![
        offering("us-east-1a", CapacityType::OnDemand, 98.0),
        offering("us-east-1b", CapacityType::OnDemand, 99.0),
    ])
}

fn gang_engine(catalog: Catalog) -> Engine {
    let mut s = setup("5m");
    s.catalog = catalog;
    Engine::new(s, EngineConfig::default())
}

/// A pod needing a whole 8-GPU node, of gang `default/train` when `gang`.
fn worker(name: &str, gang: bool) -> Pod {
    let mut r = Resources::ZERO;
    r.set(CPU, 96_000);
    r.set(MEMORY, 512 << 30);
    r.set(PODS, 1);
    r.set(GPU, 8);
    let mut p = Pod::new(PodRef::new("default", name), r);
    if gang {
        p.gang = Some(Gang {
            name: "default/train".into(),
            min_member: 4,
        });
    }
    p
}

/// Four workers pending at t(0); the actions of the poll that closes the batch.
fn four_workers(e: &mut Engine, gang: bool) -> Vec<Action> {
    for i in 0..4 {
        e.handle(t(0), Event::PodPending(worker(&format!("w{i}"), gang)));
    }
    assert!(e.poll(t(0)).is_empty(), "the batch is still open");
    let deadline = e.next_deadline().expect("a batch deadline");
    e.poll(deadline)
}

fn p5_instance(
    claim: &str,
    zone: &str,
    at: chrono::DateTime<chrono::Utc>,
) -> quartermaster_cloud::Instance {
    let mut i = instance(
        claim,
        &format!("i-{claim}"),
        zone,
        CapacityType::OnDemand,
        at,
    );
    i.instance_type = "p5.48xlarge".into();
    i.state = InstanceState::Pending;
    i
}

fn p5_ice(zone: &str) -> CloudError {
    CloudError::InsufficientCapacity {
        instance_type: "p5.48xlarge".into(),
        zone: zone.into(),
        capacity_type: CapacityType::OnDemand,
        message: "InsufficientInstanceCapacity".into(),
    }
}

#[test]
fn a_four_by_eight_gpu_gang_gets_four_nodes_in_one_zone_labelled_with_its_placement_group() {
    let mut e = gang_engine(two_zones());
    let actions = four_workers(&mut e, true);
    let requests: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Launch { request, .. } => Some(request.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(requests.len(), 4, "{actions:?}");
    for r in &requests {
        assert_eq!(
            (r.instance_type.as_str(), r.zone.as_str()),
            ("p5.48xlarge", "us-east-1a")
        );
        assert!(
            r.fallbacks.iter().all(|f| f.zone == "us-east-1a"),
            "a gang member falls back only within the gang's zone: {:?}",
            r.fallbacks
        );
        assert_eq!(r.labels.get(ZONE).map(String::as_str), Some("us-east-1a"));
        assert_eq!(r.labels.get(REGION).map(String::as_str), Some("us-east-1"));
        assert_eq!(
            r.labels.get(GANG_LABEL).map(String::as_str),
            Some("default.train")
        );
        assert_eq!(
            r.labels.get(PLACEMENT_GROUP_LABEL).map(String::as_str),
            Some("default.train-us-east-1a")
        );
    }
    // The claims (what the controller labels the Node with at registration) say the same.
    for c in e.claims() {
        assert_eq!(
            c.labels.get(GANG_LABEL).map(String::as_str),
            Some("default.train")
        );
        assert!(c.labels.contains_key(PLACEMENT_GROUP_LABEL));
    }
    for r in &requests {
        e.handle(
            t(12),
            Event::Launched {
                claim: r.claim_name.clone(),
                instance: p5_instance(&r.claim_name, "us-east-1a", t(12)),
            },
        );
    }
    let actions = e.poll(t(12));
    assert!(deleted(&actions).is_empty(), "{actions:?}");
    // Complete: its deadline no longer matters.
    let later = e.poll(t(12 + 11 * 60));
    assert!(deleted(&later).is_empty(), "{later:?}");
    assert_eq!(e.stats().gang_launches, 1);
    assert_eq!(e.stats().gang_rollbacks, 0);
}

#[test]
fn a_member_out_of_capacity_rolls_the_others_back_and_the_gang_relaunches_whole_in_another_zone() {
    let mut e = gang_engine(two_zones());
    let actions = four_workers(&mut e, true);
    let claims: Vec<String> = launches(&actions).into_iter().map(|(c, ..)| c).collect();
    assert_eq!(claims.len(), 4);
    // Three are accepted; the fourth runs out of capacity, with no other offering in us-east-1a.
    for c in &claims[..3] {
        e.handle(
            t(12),
            Event::Launched {
                claim: c.clone(),
                instance: p5_instance(c, "us-east-1a", t(12)),
            },
        );
    }
    e.handle(
        t(12),
        Event::LaunchFailed {
            claim: claims[3].clone(),
            error: p5_ice("us-east-1a"),
        },
    );
    let actions = e.poll(t(12));
    let mut rolled_back = deleted(&actions);
    rolled_back.sort();
    assert_eq!(
        rolled_back,
        claims[..3]
            .iter()
            .map(|c| (c.clone(), DeleteReason::GangRollback))
            .collect::<Vec<_>>(),
        "{actions:?}"
    );
    // The whole gang is planned again, in the other zone, in the same poll.
    let relaunched = launches(&actions);
    assert_eq!(relaunched.len(), 4, "{actions:?}");
    assert!(
        relaunched.iter().all(|(c, ty, zone, _)| !claims.contains(c)
            && ty == "p5.48xlarge"
            && zone == "us-east-1b"),
        "{relaunched:?}"
    );
    for i in 0..4 {
        let placed = e.placement(&PodRef::new("default", format!("w{i}")));
        assert!(
            placed.is_some_and(|c| relaunched.iter().any(|(r, ..)| r == c)),
            "w{i} is on {placed:?}"
        );
    }
    assert_eq!(e.stats().gang_rollbacks, 1);
    assert_eq!(e.stats().gang_claims_rolled_back, 3);
    assert_eq!(e.stats().gang_launches, 2);
}

#[test]
fn a_member_falls_back_within_the_gangs_zone_and_the_gang_completes() {
    // Spot first, on-demand as the fallback, in each zone.
    let mut e = gang_engine(p5(vec![
        offering("us-east-1a", CapacityType::Spot, 40.0),
        offering("us-east-1a", CapacityType::OnDemand, 98.0),
        offering("us-east-1b", CapacityType::Spot, 41.0),
        offering("us-east-1b", CapacityType::OnDemand, 99.0),
    ]));
    let actions = four_workers(&mut e, true);
    let first = launches(&actions);
    assert!(
        first
            .iter()
            .all(|(_, _, z, ct)| z == "us-east-1a" && *ct == CapacityType::Spot)
    );
    let failing = first[0].0.clone();
    e.handle(
        t(12),
        Event::LaunchFailed {
            claim: failing.clone(),
            error: CloudError::InsufficientCapacity {
                instance_type: "p5.48xlarge".into(),
                zone: "us-east-1a".into(),
                capacity_type: CapacityType::Spot,
                message: "InsufficientInstanceCapacity".into(),
            },
        },
    );
    let actions = e.poll(t(12));
    assert_eq!(
        launches(&actions),
        [(
            failing.clone(),
            "p5.48xlarge".to_owned(),
            "us-east-1a".to_owned(),
            CapacityType::OnDemand
        )],
        "the member falls back to on-demand in its zone, not to spot in the other: {actions:?}"
    );
    assert!(deleted(&actions).is_empty());
    assert_eq!(e.stats().gang_rollbacks, 0);
}

#[test]
fn a_gang_not_launched_by_its_deadline_is_rolled_back() {
    let mut e = gang_engine(two_zones());
    let actions = four_workers(&mut e, true);
    let claims: Vec<String> = launches(&actions).into_iter().map(|(c, ..)| c).collect();
    for c in &claims[..3] {
        e.handle(
            t(12),
            Event::Launched {
                claim: c.clone(),
                instance: p5_instance(c, "us-east-1a", t(12)),
            },
        );
    }
    // The fourth is throttled, again and again.
    let mut now = 12;
    while now < 11 * 60 {
        e.handle(
            t(now),
            Event::LaunchFailed {
                claim: claims[3].clone(),
                error: CloudError::Throttled { retry_after: None },
            },
        );
        let actions = e.poll(t(now));
        if !deleted(&actions).is_empty() {
            break;
        }
        now = (e.next_deadline().expect("a retry or the gang's deadline") - t(0)).num_seconds();
    }
    let deadline = EngineConfig::default().gang_launch_timeout.num_seconds();
    assert!(
        now >= deadline,
        "not rolled back before its deadline ({now} s)"
    );
    assert_eq!(e.stats().gang_rollbacks, 1);
    assert_eq!(e.stats().gang_claims_rolled_back, 4);
}

#[test]
fn pods_without_a_gang_launch_alone_and_fall_back_to_another_zone() {
    let mut e = gang_engine(two_zones());
    let actions = four_workers(&mut e, false);
    let requests: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Launch { request, .. } => Some(request.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(requests.len(), 4);
    assert!(requests.iter().all(
        |r| !r.labels.contains_key(GANG_LABEL) && !r.labels.contains_key(PLACEMENT_GROUP_LABEL)
    ));
    assert!(requests[0].fallbacks.iter().any(|f| f.zone == "us-east-1b"));
    let claims: Vec<String> = requests.iter().map(|r| r.claim_name.clone()).collect();
    for c in &claims[..3] {
        e.handle(
            t(12),
            Event::Launched {
                claim: c.clone(),
                instance: p5_instance(c, &requests[0].zone, t(12)),
            },
        );
    }
    e.handle(
        t(12),
        Event::LaunchFailed {
            claim: claims[3].clone(),
            error: p5_ice(&requests[3].zone),
        },
    );
    let actions = e.poll(t(12));
    assert!(deleted(&actions).is_empty(), "{actions:?}");
    assert_eq!(
        launches(&actions),
        [(
            claims[3].clone(),
            "p5.48xlarge".to_owned(),
            "us-east-1b".to_owned(),
            CapacityType::OnDemand
        )]
    );
    assert_eq!(e.stats().gang_launches, 0);
    assert_eq!(e.stats().gang_rollbacks, 0);
}

/// A claim of gang `default/train` found in the cluster after a restart: launched (with an
/// instance) or still launching, created at t(0).
fn found_member(name: &str, launched: bool) -> crate::FoundClaim {
    crate::FoundClaim {
        name: name.into(),
        node_pool: "gpu".into(),
        offering: quartermaster_solver::OfferingChoice {
            instance_type: "p5.48xlarge".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::OnDemand,
            price_per_hour: 98.0,
        },
        created_at: t(0),
        provider_id: launched.then(|| format!("aws:///us-east-1a/i-{name}")),
        launched_at: launched.then(|| t(12)),
        node: None,
        registered_at: None,
        initialized_at: None,
        deleting: false,
        template_hash: None,
        gang: Some("default.train".into()),
    }
}

#[test]
fn a_gang_half_launched_when_the_controller_restarted_is_still_rolled_back_whole() {
    // A new engine (the restarted controller) finds three launched members and one that was
    // still launching; the relaunch of that one runs out of capacity in the gang's zone.
    let mut e = gang_engine(two_zones());
    for (name, launched) in [("c0", true), ("c1", true), ("c2", true), ("c3", false)] {
        e.handle(t(60), Event::ClaimFound(found_member(name, launched)));
    }
    let relaunch = e.poll(t(60));
    assert_eq!(
        launches(&relaunch)
            .into_iter()
            .map(|(c, ..)| c)
            .collect::<Vec<_>>(),
        ["c3"],
        "{relaunch:?}"
    );
    e.handle(
        t(70),
        Event::LaunchFailed {
            claim: "c3".into(),
            error: p5_ice("us-east-1a"),
        },
    );
    let actions = e.poll(t(70));
    let mut rolled_back = deleted(&actions);
    rolled_back.sort();
    assert_eq!(
        rolled_back,
        ["c0", "c1", "c2"]
            .map(|c| (c.to_owned(), DeleteReason::GangRollback))
            .to_vec(),
        "{actions:?}"
    );
}

#[test]
fn a_gang_found_whole_after_a_restart_completes_and_stays() {
    let mut e = gang_engine(two_zones());
    for name in ["c0", "c1", "c2", "c3"] {
        e.handle(t(60), Event::ClaimFound(found_member(name, true)));
    }
    let actions = e.poll(t(60));
    assert!(deleted(&actions).is_empty(), "{actions:?}");
    let later = e.poll(t(60 + 11 * 60));
    assert!(deleted(&later).is_empty(), "{later:?}");
}

#[test]
fn a_gang_members_broken_node_is_replaced_in_the_gangs_zone_and_placement_group() {
    let mut e = gang_engine(two_zones());
    let actions = four_workers(&mut e, true);
    let claims: Vec<String> = launches(&actions).into_iter().map(|l| l.0).collect();
    assert_eq!(claims.len(), 4, "{actions:?}");
    let p5_node = |i: usize| {
        let mut n = registered_node(&format!("node-{i}"), "us-east-1a", 8, false);
        n.allocatable.set(CPU, 190_000);
        n.allocatable.set(MEMORY, 2000 << 30);
        n
    };
    for (i, c) in claims.iter().enumerate() {
        e.handle(
            t(12),
            Event::Launched {
                claim: c.clone(),
                instance: p5_instance(c, "us-east-1a", t(12)),
            },
        );
        e.handle(
            t(60),
            Event::NodeRegistered {
                claim: c.clone(),
                node: p5_node(i),
            },
        );
    }
    assert_eq!(binds(&e.poll(t(70))).len(), 4);
    // us-east-1b is now the cheaper zone: a new gang would go there, a repaired member must not.
    e.handle(
        t(80),
        Event::CatalogChanged(p5(vec![
            offering("us-east-1a", CapacityType::OnDemand, 98.0),
            offering("us-east-1b", CapacityType::OnDemand, 50.0),
        ])),
    );
    let mut broken = p5_node(2);
    broken.conditions = vec![crate::NodeCondition {
        kind: "AcceleratedHardwareReady".into(),
        status: "False".into(),
        since: Some(t(100)),
        reason: Some("NvidiaXID79Error".into()),
    }];
    e.handle(t(100), Event::NodeUpdated { node: broken });
    let mut actions = Vec::new();
    let mut at = t(100);
    while at <= t(100 + 11 * 60) {
        actions.extend(e.poll(at));
        at += chrono::TimeDelta::seconds(30);
    }
    let repaired: Vec<&String> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Delete {
                claim,
                reason: DeleteReason::Unhealthy,
                ..
            } => Some(claim),
            _ => None,
        })
        .collect();
    assert_eq!(repaired, [&claims[2]], "{actions:?}");
    let replacement: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Launch { request, .. } => Some(request),
            _ => None,
        })
        .collect();
    assert_eq!(replacement.len(), 1, "{actions:?}");
    let r = replacement[0];
    assert_eq!(r.zone, "us-east-1a", "the gang's zone, not the cheaper one");
    assert!(r.fallbacks.iter().all(|f| f.zone == "us-east-1a"));
    assert_eq!(
        r.labels.get(PLACEMENT_GROUP_LABEL).map(String::as_str),
        Some("default.train-us-east-1a")
    );
    assert_eq!(
        r.labels.get(GANG_LABEL).map(String::as_str),
        Some("default.train")
    );
}
