//! Consolidation: underutilized nodes are deleted or replaced by cheaper ones, one at a time.

use quartermaster_pricing::CapacityType;
use quartermaster_solver::PodRef;

use super::fixtures::*;
use crate::{Action, DeleteReason, Engine, EngineConfig, Event};

fn consolidating_engine() -> Engine {
    Engine::new(
        setup_with("WhenEmptyOrUnderutilized", "5m"),
        EngineConfig::default(),
    )
}

/// Drives every launch to an initialized node at `at` (+ a few seconds); returns node names.
fn bring_up(e: &mut Engine, actions: &[Action], at: i64, first_node: usize) -> Vec<String> {
    let mut names = Vec::new();
    for (i, (claim, _, zone, ct)) in launches(actions).into_iter().enumerate() {
        let node = format!("node-{}", first_node + i);
        let id = format!("i-{}", first_node + i);
        e.handle(
            t(at),
            Event::Launched {
                claim: claim.clone(),
                instance: instance(&claim, &id, &zone, ct, t(at)),
            },
        );
        e.handle(
            t(at + 30),
            Event::NodeRegistered {
                claim,
                node: registered_node(&node, &zone, 1, false),
            },
        );
        names.push(node);
    }
    names
}

/// Launches `pod`'s node while spot has no capacity in either zone, so the claim falls back to
/// on-demand; brings the node up with the pod bound (node-0). Returns the claim.
fn on_demand_after_spot_ran_out(e: &mut Engine, pod: quartermaster_solver::Pod) -> String {
    e.handle(t(0), Event::PodPending(pod));
    let actions = e.poll(t(2));
    let claim = launches(&actions)[0].0.clone();
    for (at, zone) in [(3, "us-east-1a"), (4, "us-east-1b")] {
        let error = ice(zone, CapacityType::Spot);
        e.handle(
            t(at),
            Event::LaunchFailed {
                claim: claim.clone(),
                error,
            },
        );
        let actions = e.poll(t(at));
        if at == 4 {
            assert_eq!(launches(&actions)[0].3, CapacityType::OnDemand);
            bring_up(e, &actions, 5, 0);
        }
    }
    assert_eq!(binds(&e.poll(t(40))).len(), 1);
    claim
}

/// Runs the engine until it is quiet, returning every action it took.
fn settle(e: &mut Engine, mut now: i64, until: i64) -> Vec<Action> {
    let mut all = Vec::new();
    loop {
        let actions = e.poll(t(now));
        all.extend(actions);
        match e.next_deadline() {
            Some(d) if d <= t(until) => now = (d - t(0)).num_seconds().max(now),
            _ => return all,
        }
    }
}

#[test]
fn an_underutilized_node_whose_pods_fit_elsewhere_is_deleted() {
    let mut e = consolidating_engine();
    // a + c share node-0; b needs its own node-1.
    e.handle(t(0), Event::PodPending(cpu_pod("a", 2500)));
    e.handle(t(0), Event::PodPending(cpu_pod("c", 1000)));
    e.handle(t(0), Event::PodPending(cpu_pod("b", 2500)));
    let actions = e.poll(t(2));
    assert_eq!(launches(&actions).len(), 2, "{actions:?}");
    bring_up(&mut e, &actions, 2, 0);
    let actions = e.poll(t(40));
    assert_eq!(binds(&actions).len(), 3);
    // a finishes: node-0 keeps only c (1000m); node-1 keeps b (2500m); together they fit one
    // node. Node-1 has been quiet since it came up (t=32), so at t=332 it is the first ripe
    // candidate: b moves beside c and node-1 goes.
    e.handle(t(100), Event::PodGone(PodRef::new("default", "a")));
    let early = settle(&mut e, 100, 331);
    assert!(
        early.iter().all(|a| !matches!(a, Action::Delete { .. })),
        "not before consolidateAfter: {early:?}"
    );
    let actions = settle(&mut e, 331, 1000);
    assert!(
        actions.contains(&Action::Cordon {
            node: "node-1".into()
        }),
        "{actions:?}"
    );
    assert_eq!(binds(&actions), vec![("b".to_owned(), "node-0".to_owned())]);
    assert!(
        actions.iter().any(|a| matches!(a, Action::Delete { claim, reason: DeleteReason::Underutilized, .. } if claim == "gpu-00001")),
        "{actions:?}"
    );
    assert!(launches(&actions).is_empty(), "nothing new is bought");
    assert_eq!(
        actions
            .iter()
            .filter(|a| matches!(a, Action::Delete { .. }))
            .count(),
        1,
        "one node goes, the other stays: {actions:?}"
    );
    assert_eq!(e.stats().consolidation_deletes, 1);
}

#[test]
fn an_on_demand_fallback_node_is_replaced_by_cheaper_spot_later() {
    let mut e = consolidating_engine();
    let claim = on_demand_after_spot_ran_out(&mut e, gpu_pod("a"));
    // Once the spot offerings are usable again and the node has been quiet for 5 minutes,
    // consolidation launches a spot replacement ($0.40 < $1.006 × 0.95).
    let actions = settle(&mut e, 40, 1000);
    let replacement = launches(&actions);
    assert_eq!(replacement.len(), 1, "{actions:?}");
    assert_eq!(replacement[0].3, CapacityType::Spot);
    assert!(actions.contains(&Action::Cordon {
        node: "node-0".into()
    }));
    assert!(
        actions.iter().all(|a| !matches!(a, Action::Delete { .. })),
        "the old node stays until the new one runs the pod"
    );
    // The replacement comes up; the pod moves; the old node goes.
    bring_up(&mut e, &actions, 1000, 1);
    let actions = settle(&mut e, 1031, 1100);
    assert_eq!(binds(&actions), vec![("a".to_owned(), "node-1".to_owned())]);
    assert!(actions.iter().any(|a| matches!(a, Action::Delete { claim: c, reason: DeleteReason::Underutilized, .. } if *c == claim)), "{actions:?}");
    assert_eq!(e.stats().consolidation_replacements, 1);
}

#[test]
fn a_fallback_node_is_looked_at_again_when_spot_is_usable_again_in_a_quiet_cluster() {
    // Capacity errors keep spot out of plans for 10 minutes here: when the node is ripe
    // (t=335) spot is still out, so no move saves anything. Nothing else happens, yet the node
    // is asked about again when spot is usable again (t=604), and replaced.
    let config = EngineConfig {
        unavailable_ttl: chrono::TimeDelta::minutes(10),
        ..EngineConfig::default()
    };
    let mut e = Engine::new(setup_with("WhenEmptyOrUnderutilized", "5m"), config);
    on_demand_after_spot_ran_out(&mut e, gpu_pod("a"));
    let actions = settle(&mut e, 40, 600);
    assert!(launches(&actions).is_empty(), "{actions:?}");
    let actions = settle(&mut e, 600, 2000);
    let replacement = launches(&actions);
    assert_eq!(replacement.len(), 1, "{actions:?}");
    assert_eq!(replacement[0].3, CapacityType::Spot);
}

#[test]
fn job_pods_are_never_moved_and_when_empty_pools_are_left_alone() {
    // The same fallback situation, but the pod belongs to a Job.
    let mut e = consolidating_engine();
    let mut pod = gpu_pod("train-0");
    pod.owner = Some("Job/default/train".into());
    on_demand_after_spot_ran_out(&mut e, pod);
    let actions = settle(&mut e, 40, 5000);
    assert!(
        launches(&actions).is_empty() && binds(&actions).is_empty(),
        "{actions:?}"
    );

    // A WhenEmpty pool never consolidates underutilized nodes.
    let mut e = engine();
    e.handle(t(0), Event::PodPending(cpu_pod("a", 2500)));
    e.handle(t(0), Event::PodPending(cpu_pod("c", 1000)));
    e.handle(t(0), Event::PodPending(cpu_pod("b", 2500)));
    let actions = e.poll(t(2));
    bring_up(&mut e, &actions, 2, 0);
    e.poll(t(40));
    e.handle(t(100), Event::PodGone(PodRef::new("default", "a")));
    let actions = settle(&mut e, 100, 5000);
    assert!(
        actions
            .iter()
            .all(|a| !matches!(a, Action::Delete { .. } | Action::Bind { .. })),
        "{actions:?}"
    );
}

#[test]
fn a_training_pod_moves_only_when_annotated_checkpointed() {
    // A Kubeflow PyTorchJob owns its pods directly: run to completion, never moved.
    let mut e = consolidating_engine();
    let mut pod = gpu_pod("llama-master-0");
    pod.owner = Some("PyTorchJob/default/llama".into());
    on_demand_after_spot_ran_out(&mut e, pod);
    let actions = settle(&mut e, 40, 5000);
    assert!(launches(&actions).is_empty(), "{actions:?}");

    // A Job's pod that resumes from a checkpoint may move: the on-demand fallback node is
    // replaced by spot once spot is back, as for any other pod.
    let mut e = consolidating_engine();
    let mut pod = gpu_pod("train-0");
    pod.owner = Some("Job/default/train".into());
    let id = pod.id.clone();
    e.handle(t(0), Event::PodCheckpointed { pod: id, on: true });
    on_demand_after_spot_ran_out(&mut e, pod);
    let actions = settle(&mut e, 40, 1000);
    let replacement = launches(&actions);
    assert_eq!(replacement.len(), 1, "{actions:?}");
    assert_eq!(replacement[0].3, CapacityType::Spot);

    // The annotation taken off again before the node is ripe: the pod stays.
    let mut e = consolidating_engine();
    let mut pod = gpu_pod("train-0");
    pod.owner = Some("Job/default/train".into());
    let id = pod.id.clone();
    e.handle(
        t(0),
        Event::PodCheckpointed {
            pod: id.clone(),
            on: true,
        },
    );
    on_demand_after_spot_ran_out(&mut e, pod);
    e.handle(t(50), Event::PodCheckpointed { pod: id, on: false });
    let actions = settle(&mut e, 50, 5000);
    assert!(launches(&actions).is_empty(), "{actions:?}");
}

#[test]
fn pods_are_not_moved_onto_a_node_that_emptied_and_goes_anyway() {
    let mut e = consolidating_engine();
    // a and b each need a node of their own.
    e.handle(t(0), Event::PodPending(cpu_pod("a", 2500)));
    e.handle(t(0), Event::PodPending(cpu_pod("b", 2500)));
    let actions = e.poll(t(2));
    assert_eq!(launches(&actions).len(), 2, "{actions:?}");
    bring_up(&mut e, &actions, 2, 0);
    for (pod, node) in binds(&e.poll(t(40))) {
        let pod = cpu_pod(&pod, 2500);
        e.handle(t(41), Event::PodBound { pod, node });
    }
    // At t=400, long after both nodes were ripe, a finishes. Moving b onto a's empty node and
    // deleting b's would save what deleting the empty node saves 5 minutes later: b stays, and
    // the empty node goes.
    let a_claim = e
        .claims()
        .find(|c| c.node_name.as_deref() == Some("node-0"))
        .map(|c| c.name.clone())
        .expect("node-0's claim");
    e.handle(t(400), Event::PodGone(PodRef::new("default", "a")));
    let actions = settle(&mut e, 400, 2000);
    assert!(binds(&actions).is_empty(), "b is not moved: {actions:?}");
    let deleted: Vec<_> = actions
        .iter()
        .filter_map(|a| match a {
            Action::Delete { claim, reason, .. } => Some((claim.clone(), *reason)),
            _ => None,
        })
        .collect();
    assert_eq!(deleted, vec![(a_claim, DeleteReason::Empty)], "{actions:?}");
    assert_eq!(e.stats().consolidation_deletes, 0);
}

#[test]
fn a_replacement_that_cannot_launch_cheaper_calls_the_consolidation_off() {
    let mut e = consolidating_engine();
    let claim = on_demand_after_spot_ran_out(&mut e, gpu_pod("a"));
    let actions = settle(&mut e, 40, 1000);
    let [(replacement, _, zone, ct)] = launches(&actions).try_into().expect("one spot replacement");
    assert_eq!(ct, CapacityType::Spot);
    // The request a provider gets (it tries the fallbacks itself) holds only offerings that
    // keep the move worth it: no on-demand.
    let request = first_launch_request(&actions);
    assert!(
        request
            .fallbacks
            .iter()
            .all(|f| f.capacity_type == CapacityType::Spot),
        "{:?}",
        request.fallbacks
    );
    // Spot fails again in both zones; on-demand would save nothing, so it is not tried.
    let other = if zone == "us-east-1a" {
        "us-east-1b"
    } else {
        "us-east-1a"
    };
    e.handle(
        t(1001),
        Event::LaunchFailed {
            claim: replacement.clone(),
            error: ice(&zone, CapacityType::Spot),
        },
    );
    let actions = e.poll(t(1001));
    let mut all = actions.clone();
    if let Some((again, ..)) = launches(&actions).first() {
        e.handle(
            t(1002),
            Event::LaunchFailed {
                claim: again.clone(),
                error: ice(other, CapacityType::Spot),
            },
        );
        all.extend(e.poll(t(1002)));
    }
    assert!(
        launches(&all).iter().all(|l| l.3 == CapacityType::Spot),
        "{all:?}"
    );
    assert!(
        all.contains(&Action::Uncordon {
            node: "node-0".into()
        }),
        "{all:?}"
    );
    assert_eq!(e.stats().consolidations_cancelled, 1);
    assert_eq!(
        e.placement(&PodRef::new("default", "a")),
        Some(claim.as_str()),
        "the pod stays where it runs"
    );
    assert_eq!(e.waiting().count(), 0);
    // Nothing else happens in the cluster: the node is asked about again once its backoff
    // (15 minutes) ends, and spot, back by then, replaces it.
    let actions = settle(&mut e, 1003, 1001 + 15 * 60 - 1);
    assert!(launches(&actions).is_empty(), "not during the backoff");
    let actions = settle(&mut e, 1001 + 15 * 60 - 1, 4000);
    let again = launches(&actions);
    assert_eq!(again.len(), 1, "{actions:?}");
    assert_eq!(again[0].3, CapacityType::Spot);
}

/// The on-demand fallback scenario under `Balanced`, with spot at `spot_price`.
fn balanced_after_fallback(spot_price: f64) -> Vec<Action> {
    let mut setup = setup_with("Balanced", "5m");
    let mut types = setup.catalog.instance_types().to_vec();
    for o in &mut types[0].offerings {
        if o.capacity_type == CapacityType::Spot {
            o.price_per_hour = spot_price;
        }
    }
    setup.catalog = quartermaster_pricing::Catalog::new(types);
    let mut e = Engine::new(setup, EngineConfig::default());
    on_demand_after_spot_ran_out(&mut e, gpu_pod("a"));
    settle(&mut e, 40, 1000)
}

#[test]
fn balanced_moves_pods_only_when_the_saving_is_worth_the_disruption() {
    // The node is the pool's only one and holds all its pods (disruption share 1): spot at
    // $0.40 saves 60% of the pool's cost (score 0.6 >= 0.5): replaced.
    let actions = balanced_after_fallback(0.40);
    assert_eq!(launches(&actions).len(), 1, "{actions:?}");
    // Spot at $0.70 saves 30% (score 0.3): WhenEmptyOrUnderutilized would move (> 5%),
    // Balanced does not.
    let actions = balanced_after_fallback(0.70);
    assert!(launches(&actions).is_empty(), "{actions:?}");
    assert!(
        !actions.iter().any(|a| matches!(a, Action::Cordon { .. })),
        "{actions:?}"
    );
}

#[test]
fn a_full_on_demand_node_is_asked_about_before_equally_full_spot_nodes() {
    // Six full spot nodes come first by name; a seventh pod falls back to on-demand. Every node
    // is equally full (no waste), so consolidation's few single-node questions must go to the
    // dearest first: the on-demand node, which spot would carry for less.
    let mut e = consolidating_engine();
    for i in 0..6 {
        e.handle(t(0), Event::PodPending(gpu_pod(&format!("s{i}"))));
    }
    let actions = e.poll(t(2));
    let spot = launches(&actions);
    assert_eq!(spot.len(), 6, "{actions:?}");
    assert!(spot.iter().all(|l| l.3 == CapacityType::Spot), "{spot:?}");
    bring_up(&mut e, &actions, 2, 0);
    assert_eq!(binds(&e.poll(t(40))).len(), 6);
    e.handle(t(50), Event::PodPending(gpu_pod("od")));
    let actions = e.poll(t(52));
    let claim = launches(&actions)[0].0.clone();
    for (at, zone) in [(53, "us-east-1a"), (54, "us-east-1b")] {
        e.handle(
            t(at),
            Event::LaunchFailed {
                claim: claim.clone(),
                error: ice(zone, CapacityType::Spot),
            },
        );
        let actions = e.poll(t(at));
        if at == 54 {
            assert_eq!(launches(&actions)[0].3, CapacityType::OnDemand);
            bring_up(&mut e, &actions, 55, 6);
        }
    }
    assert_eq!(binds(&e.poll(t(90))).len(), 1);
    let actions = settle(&mut e, 90, 2000);
    let replacement = launches(&actions);
    assert_eq!(replacement.len(), 1, "{actions:?}");
    assert_eq!(replacement[0].3, CapacityType::Spot);
    assert!(
        actions.contains(&Action::Cordon {
            node: "node-6".into()
        }),
        "{actions:?}"
    );
}

#[test]
fn a_pool_still_growing_for_pending_pods_is_not_consolidated() {
    let mut e = consolidating_engine();
    e.handle(t(0), Event::PodPending(cpu_pod("a", 2500)));
    e.handle(t(0), Event::PodPending(cpu_pod("c", 1000)));
    e.handle(t(0), Event::PodPending(cpu_pod("b", 2500)));
    let actions = e.poll(t(2));
    bring_up(&mut e, &actions, 2, 0);
    assert_eq!(binds(&e.poll(t(40))).len(), 3);
    e.handle(t(100), Event::PodGone(PodRef::new("default", "a")));
    // At t=200 a pod arrives that fits on neither node: the pool grows again, so its nodes
    // ripen consolidateAfter (5m) after that launch, not after their last pod change.
    e.handle(t(200), Event::PodPending(cpu_pod("d", 3800)));
    let actions = e.poll(t(202));
    assert_eq!(launches(&actions).len(), 1, "{actions:?}");
    bring_up(&mut e, &actions, 202, 2);
    assert_eq!(binds(&e.poll(t(240))).len(), 1);
    let early = settle(&mut e, 240, 501);
    assert!(
        early
            .iter()
            .all(|a| !matches!(a, Action::Delete { .. } | Action::Cordon { .. })),
        "not while the pool grew within consolidateAfter: {early:?}"
    );
    let actions = settle(&mut e, 501, 1200);
    assert!(
        actions.iter().any(|a| matches!(
            a,
            Action::Delete {
                reason: DeleteReason::Underutilized,
                ..
            }
        )),
        "consolidated once the pool stopped growing: {actions:?}"
    );
}

/// A pod that prefers on-demand capacity (weight 50).
fn preferring_on_demand(name: &str) -> quartermaster_solver::Pod {
    let mut pod = gpu_pod(name);
    pod.owner = Some(format!("Deployment/default/{name}"));
    let mut on_demand = quartermaster_policies::Requirements::default();
    on_demand.add(
        quartermaster_policies::Requirement::new(
            "quartermaster.dev/capacity-type",
            quartermaster_policies::Operator::In,
            ["on-demand"],
        )
        .expect("valid"),
    );
    pod.preferred_node_terms
        .push(quartermaster_solver::pod::PreferredNodeTerm {
            weight: 50,
            requirements: on_demand,
        });
    pod
}

#[test]
fn a_preference_the_policy_honours_holds_through_consolidation() {
    use quartermaster_solver::PreferencePolicy;
    // Respect: the pod gets on-demand as it prefers ($1.006 against $0.40 spot), and
    // consolidation does not move it to the cheaper spot node it would not buy for it.
    let mut setup = setup_with("WhenEmptyOrUnderutilized", "5m");
    setup.pools[0].spec.preferences.policy = PreferencePolicy::Respect;
    let mut e = Engine::new(setup, EngineConfig::default());
    e.handle(t(0), Event::PodPending(preferring_on_demand("a")));
    let actions = e.poll(t(2));
    assert_eq!(
        launches(&actions)[0].3,
        CapacityType::OnDemand,
        "{actions:?}"
    );
    bring_up(&mut e, &actions, 2, 0);
    assert_eq!(binds(&e.poll(t(40))).len(), 1);
    let later = settle(&mut e, 40, 5000);
    assert!(
        launches(&later).is_empty() && binds(&later).is_empty(),
        "{later:?}"
    );

    // CostBounded (the default, 10%): honouring it would cost 150% more, so the engine buys
    // spot, the same rule as `plan`.
    let mut e = consolidating_engine();
    e.handle(t(0), Event::PodPending(preferring_on_demand("a")));
    let actions = e.poll(t(2));
    assert_eq!(launches(&actions)[0].3, CapacityType::Spot, "{actions:?}");
}

#[test]
fn room_on_a_node_that_misses_an_honoured_preference_is_not_used() {
    use quartermaster_solver::PreferencePolicy;
    let cpu_preferring_on_demand = |name: &str| {
        let mut pod = preferring_on_demand(name);
        pod.requests.set(GPU, 0);
        pod.requests.set(quartermaster_solver::resources::CPU, 1000);
        pod.requests
            .set(quartermaster_solver::resources::MEMORY, 1 << 30);
        pod
    };
    for (policy, a_on_spot_node) in [
        (PreferencePolicy::Respect, false),
        (PreferencePolicy::CostBounded, true),
    ] {
        let mut setup = setup_with("WhenEmptyOrUnderutilized", "5m");
        setup.pools[0].spec.preferences.policy = policy;
        let mut e = Engine::new(setup, EngineConfig::default());
        // b, without preferences, gets a spot node with room to spare.
        e.handle(t(0), Event::PodPending(cpu_pod("b", 1000)));
        let actions = e.poll(t(2));
        assert_eq!(launches(&actions)[0].3, CapacityType::Spot);
        bring_up(&mut e, &actions, 2, 0);
        assert_eq!(binds(&e.poll(t(40))).len(), 1);
        // a prefers on-demand: Respect buys it an on-demand node and, later, does not
        // consolidate it onto b's spot node; CostBounded puts it beside b (honouring would
        // cost a whole node more than the room already paid for).
        e.handle(t(50), Event::PodPending(cpu_preferring_on_demand("a")));
        let actions = settle(&mut e, 52, 5000);
        let bought = launches(&actions);
        let bound = binds(&actions);
        if a_on_spot_node {
            assert!(bought.is_empty(), "{policy}: {actions:?}");
            assert_eq!(
                bound,
                vec![("a".to_owned(), "node-0".to_owned())],
                "{policy}"
            );
        } else {
            assert_eq!(bought.len(), 1, "{policy}: {actions:?}");
            assert_eq!(bought[0].3, CapacityType::OnDemand, "{policy}");
            assert!(
                bound
                    .iter()
                    .all(|(pod, node)| !(pod == "a" && node == "node-0")),
                "{policy}: {actions:?}"
            );
        }
    }
}
