//! Retirement: nodes whose pods need a small part of their price are cordoned (nothing
//! evicted), go once empty, and are reopened for pods that would need as dear a node.

use quartermaster_pricing::CapacityType;
use serde_json::json;

use super::fixtures::{first_launch_request, launches, t};
use super::fleet::*;
use crate::{Action, DeleteReason, Engine, EngineConfig, Event};

/// A `WhenEmpty` pool (consolidateAfter 30m) buying on-demand, with `annotations`.
fn when_empty(annotations: serde_json::Value) -> Engine {
    when_empty_buying("on-demand", annotations, EngineConfig::default())
}

/// A `WhenEmpty` pool (consolidateAfter 30m) buying `capacity_types`, with `annotations`, in
/// an engine with `config`.
fn when_empty_buying(
    capacity_types: &str,
    annotations: serde_json::Value,
    config: EngineConfig,
) -> Engine {
    engine_with(
        pool_annotated(
            capacity_types,
            json!({"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30m"}),
            json!({}),
            annotations,
        ),
        config,
    )
}

/// Node "big": a 16-vCPU on-demand node ($0.80/h) running `pod` since t(0).
fn dear_node(e: &mut Engine, pod: quartermaster_solver::Pod) {
    node_with(
        e,
        "big",
        "c.4xlarge",
        CapacityType::OnDemand,
        vec![pod],
        t(0),
        None,
    );
}

fn cordoned(actions: &[Action]) -> Vec<&str> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Cordon { node } => Some(node.as_str()),
            _ => None,
        })
        .collect()
}

/// The instance types launched among `actions`.
fn bought(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Launch { request, .. } => Some(request.instance_type.clone()),
            _ => None,
        })
        .collect()
}

/// Sends a 500m pod `name` at `at`: it must get a node of its size (c.large), not room on "big".
fn small_pod_gets_its_own_node(e: &mut Engine, name: &str, at: i64) {
    e.handle(t(at), Event::PodPending(pod(name, 500, 0)));
    let actions = run(e, at, at + 30);
    assert_eq!(bought(&actions), vec!["c.large".to_owned()], "{actions:?}");
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::Bind { node, .. } if node == "big")),
        "{actions:?}"
    );
}

/// Sends a 12-vCPU pod "p1" at `at`, which only a node of big's price holds: it must reopen
/// "big" instead of buying; returns the actions.
fn big_pod_reopens_big(e: &mut Engine, at: i64) -> Vec<Action> {
    e.handle(t(at), Event::PodPending(pod("p1", 12_000, 0)));
    let actions = run(e, at, at + 30);
    assert!(bought(&actions).is_empty(), "{actions:?}");
    assert!(
        actions.contains(&Action::Uncordon { node: "big".into() }),
        "{actions:?}"
    );
    actions
}

/// Asserts that `actions` delete "big", and nothing else, as empty.
fn big_goes_as_empty(actions: &[Action]) {
    assert_eq!(
        deleted(actions),
        vec![("big".to_owned(), DeleteReason::Empty)],
        "{actions:?}"
    );
}

/// A `WhenEmpty` engine whose "big" node ran a 12-vCPU pod (worth its price) that ended at
/// t(100): retired while empty by t(160).
fn dear_node_emptied() -> Engine {
    let mut e = when_empty(json!({}));
    dear_node(&mut e, pod("p0", 12_000, 0));
    assert!(cordoned(&run(&mut e, 0, 60)).is_empty());
    e.handle(t(100), Event::PodGone(pod("p0", 12_000, 0).id));
    let actions = run(&mut e, 100, 160);
    assert_eq!(cordoned(&actions), vec!["big"], "{actions:?}");
    assert!(deleted(&actions).is_empty(), "{actions:?}");
    e
}

#[test]
fn a_dear_node_running_a_small_pod_takes_no_new_pods_and_goes_when_it_is_done() {
    // A 16-vCPU node ($0.80/h) runs one 500m pod, which a 2-vCPU node ($0.10/h) would hold.
    let mut e = when_empty(json!({}));
    dear_node(&mut e, pod("p0", 500, 0));
    let actions = run(&mut e, 0, 60);
    assert_eq!(cordoned(&actions), vec!["big"], "{actions:?}");
    assert_eq!(e.stats().retirements, 1);
    assert!(
        deleted(&actions).is_empty(),
        "nothing evicted, nothing deleted"
    );
    // A new small pod gets a node of its size, not the dear node's free room.
    small_pod_gets_its_own_node(&mut e, "p1", 100);
    // Its pod done, it goes at once: not 30 minutes later.
    e.handle(t(200), Event::PodGone(pod("p0", 500, 0).id));
    big_goes_as_empty(&run(&mut e, 200, 260));
}

#[test]
fn a_node_whose_pods_need_most_of_it_stays_open() {
    // 3,500m on a 4-vCPU node: nothing smaller holds it.
    let mut e = when_empty(json!({}));
    node_with(
        &mut e,
        "fit",
        "c.xlarge",
        CapacityType::OnDemand,
        vec![pod("p0", 3500, 0)],
        t(0),
        None,
    );
    // 2,500m on an 8-vCPU node ($0.40/h) that a 4-vCPU node ($0.20/h) would hold: half its
    // price, short of the default ratio of 4.
    node_with(
        &mut e,
        "roomy",
        "c.2xlarge",
        CapacityType::OnDemand,
        vec![pod("p1", 2500, 0)],
        t(0),
        None,
    );
    let actions = run(&mut e, 0, 600);
    assert!(cordoned(&actions).is_empty(), "{actions:?}");
    assert_eq!(e.stats().retirements, 0);
}

#[test]
fn nodes_consolidation_may_move_pods_off_are_left_to_consolidation() {
    // The same dear node in a WhenEmptyOrUnderutilized pool: consolidation moves its pod (a
    // Deployment's) to a cheaper node instead.
    let mut e = engine_with(
        pool(
            "on-demand",
            json!({"budgets": [{"nodes": "100%"}]}),
            json!({}),
        ),
        EngineConfig::default(),
    );
    dear_node(&mut e, pod("p0", 500, 0));
    let actions = run(&mut e, 0, 600);
    assert_eq!(e.stats().retirements, 0, "{actions:?}");
    assert_eq!(commands(&actions).len(), 1, "{actions:?}");
}

#[test]
fn a_jobs_node_is_retired_whatever_its_pools_policy() {
    // A Job's pod is never moved, so consolidation cannot help: retirement does.
    let mut e = engine_with(
        pool(
            "on-demand",
            json!({"budgets": [{"nodes": "100%"}]}),
            json!({}),
        ),
        EngineConfig::default(),
    );
    let mut job = pod("p0", 500, 0);
    job.owner = Some("Job/train".into());
    dear_node(&mut e, job);
    let actions = run(&mut e, 0, 600);
    assert_eq!(cordoned(&actions), vec!["big"], "{actions:?}");
    assert!(commands(&actions).is_empty(), "{actions:?}");
}

#[test]
fn a_retired_node_is_reopened_for_a_pod_that_would_need_as_dear_a_node() {
    let mut e = when_empty(json!({}));
    dear_node(&mut e, pod("p0", 500, 0));
    assert_eq!(cordoned(&run(&mut e, 0, 60)), vec!["big"]);
    // 12 vCPU: only a 16-vCPU node holds it, the price of the retired one, which has room.
    let actions = big_pod_reopens_big(&mut e, 100);
    assert!(
        actions.contains(&Action::Bind {
            pod: pod("p1", 12_000, 0).id,
            node: "big".into()
        }),
        "{actions:?}"
    );
    assert_eq!(e.stats().retirements_reopened, 1);
    // It holds pods worth its price now: not retired again.
    let actions = run(&mut e, 130, 900);
    assert!(cordoned(&actions).is_empty(), "{actions:?}");
    assert_eq!(e.stats().retirements, 1);
}

#[test]
fn a_ratio_of_zero_turns_retirement_off() {
    let mut e = when_empty(json!({"quartermaster.dev/retire-price-ratio": "0"}));
    dear_node(&mut e, pod("p0", 500, 0));
    let actions = run(&mut e, 0, 600);
    assert!(cordoned(&actions).is_empty(), "{actions:?}");
    // And a pool's own ratio replaces the default: 8 is the price ratio here, so 9 keeps it.
    let mut e = when_empty(json!({"quartermaster.dev/retire-price-ratio": "9"}));
    dear_node(&mut e, pod("p0", 500, 0));
    assert!(cordoned(&run(&mut e, 0, 600)).is_empty());
}

#[test]
fn a_dear_node_that_empties_waits_out_consolidate_after_kept_for_pods_that_need_it() {
    // A 12-vCPU pod needs the whole 16-vCPU node ($0.80/h): not retired while it ran. Empty,
    // the least pod that could refill it would need a $0.10/h node, an eighth of its price:
    // retired, not deleted before consolidateAfter.
    let mut e = dear_node_emptied();
    assert_eq!(e.stats().retirements_empty, 1);
    // A small pod that arrives meanwhile gets a node of its size, not the empty node's room.
    small_pod_gets_its_own_node(&mut e, "p1", 200);
    // Still there until 30 minutes after it emptied, gone then.
    assert!(deleted(&run(&mut e, 230, 100 + 1790)).is_empty());
    big_goes_as_empty(&run(&mut e, 100 + 1790, 100 + 1900));
}

#[test]
fn a_node_retired_while_empty_is_reopened_for_a_pod_that_needs_it() {
    let mut e = dear_node_emptied();
    // The next 12-vCPU pod would buy a node of the same price: it gets this one back.
    big_pod_reopens_big(&mut e, 300);
    assert_eq!(e.stats().retirements_reopened, 1);
}

#[test]
fn an_empty_node_stays_open_when_cheap_or_when_consolidation_may_move_its_next_pods() {
    // $0.20/h: twice the pool's cheapest node, short of the ratio of 4.
    let mut e = when_empty(json!({}));
    node_with(
        &mut e,
        "small",
        "c.xlarge",
        CapacityType::OnDemand,
        vec![pod("p0", 3500, 0)],
        t(0),
        None,
    );
    run(&mut e, 0, 60);
    e.handle(t(100), Event::PodGone(pod("p0", 3500, 0).id));
    let actions = run(&mut e, 100, 400);
    assert!(cordoned(&actions).is_empty(), "{actions:?}");
    // A dear node of a WhenEmptyOrUnderutilized pool: a Deployment's pod that lands on it is
    // moved by consolidation, so it is left open.
    let mut e = engine_with(
        pool("on-demand", json!({"consolidateAfter": "30m"}), json!({})),
        EngineConfig::default(),
    );
    dear_node(&mut e, pod("p0", 12_000, 0));
    run(&mut e, 0, 60);
    e.handle(t(100), Event::PodGone(pod("p0", 12_000, 0).id));
    let actions = run(&mut e, 100, 400);
    assert!(cordoned(&actions).is_empty(), "{actions:?}");
    assert_eq!(e.stats().retirements, 0);
}

/// A `WhenEmpty` pool (consolidateAfter 30m) that buys spot and falls back to on-demand, with
/// node "od": a c.large bought on-demand ($0.10/h; the pool's cheapest node, a c.large on
/// spot, is $0.04/h) that ran a 1500m pod until t(100). The pool has `annotations`.
fn on_demand_fallback_emptied(annotations: serde_json::Value, config: EngineConfig) -> Engine {
    let mut e = when_empty_buying("spot,on-demand", annotations, config);
    node_with(
        &mut e,
        "od",
        "c.large",
        CapacityType::OnDemand,
        vec![pod("p0", 1500, 0)],
        t(0),
        None,
    );
    assert!(cordoned(&run(&mut e, 0, 60)).is_empty());
    e.handle(t(100), Event::PodGone(pod("p0", 1500, 0).id));
    e
}

#[test]
fn an_on_demand_node_that_empties_is_not_refilled_while_its_type_costs_less_than_half_on_spot() {
    // 2.5 times what its own type costs on spot, though short of 4 times the pool's cheapest
    // node: retired while it waits out consolidateAfter.
    let mut e = on_demand_fallback_emptied(json!({}), EngineConfig::default());
    let actions = run(&mut e, 100, 160);
    assert_eq!(cordoned(&actions), vec!["od"], "{actions:?}");
    assert_eq!(e.stats().retirements_empty, 1);
    // The next pod of its size gets the same machine on spot, not the on-demand node.
    e.handle(t(200), Event::PodPending(pod("p1", 1500, 0)));
    let actions = run(&mut e, 200, 230);
    assert_eq!(
        launches(&actions)
            .into_iter()
            .map(|(_, it, _, ct)| (it, ct))
            .collect::<Vec<_>>(),
        vec![("c.large".to_owned(), CapacityType::Spot)],
        "{actions:?}"
    );
    assert!(
        !actions
            .iter()
            .any(|a| matches!(a, Action::Bind { node, .. } if node == "od")),
        "{actions:?}"
    );
    // Deleted consolidateAfter after it emptied, not before.
    assert!(deleted(&run(&mut e, 230, 100 + 1790)).is_empty());
    assert!(
        deleted(&run(&mut e, 100 + 1790, 100 + 1900))
            .contains(&("od".to_owned(), DeleteReason::Empty))
    );
}

#[test]
fn the_same_type_ratio_is_a_setting_and_off_with_retirement() {
    // At 3 (more than the 2.5 here) the node stays open; so it does with retirement off.
    let config = EngineConfig {
        retire_same_type_price_ratio: 3.0,
        ..EngineConfig::default()
    };
    let mut e = on_demand_fallback_emptied(json!({}), config);
    assert!(cordoned(&run(&mut e, 100, 400)).is_empty());
    let off = json!({"quartermaster.dev/retire-price-ratio": "0"});
    let mut e = on_demand_fallback_emptied(off, EngineConfig::default());
    assert!(cordoned(&run(&mut e, 100, 400)).is_empty());
}

#[test]
fn a_pod_whose_spot_launch_fails_reopens_the_retired_on_demand_node_instead_of_buying_dearer() {
    let mut e = on_demand_fallback_emptied(json!({}), EngineConfig::default());
    assert_eq!(cordoned(&run(&mut e, 100, 160)), vec!["od"]);
    // The next pod is bought a c.large on spot ($0.04/h); it may not fall back to anything
    // costing half the retired node's $0.10/h or more (a c.xlarge on spot, $0.08/h).
    e.handle(t(200), Event::PodPending(pod("p1", 1500, 0)));
    let actions = run(&mut e, 200, 230);
    let [(claim, it, zone, ct)] = launches(&actions).try_into().expect("one launch");
    assert_eq!((it.as_str(), ct), ("c.large", CapacityType::Spot));
    let request = first_launch_request(&actions);
    assert!(request.fallbacks.is_empty(), "{:?}", request.fallbacks);
    // Spot is out: the claim is given up and the pod planned again, on the retired node.
    e.handle(
        t(231),
        Event::LaunchFailed {
            claim,
            error: quartermaster_cloud::CloudError::InsufficientCapacity {
                instance_type: it,
                zone,
                capacity_type: CapacityType::Spot,
                message: "InsufficientInstanceCapacity".into(),
            },
        },
    );
    let actions = run(&mut e, 231, 260);
    assert!(launches(&actions).is_empty(), "{actions:?}");
    assert!(
        actions.contains(&Action::Uncordon { node: "od".into() }),
        "{actions:?}"
    );
    assert_eq!(e.stats().retirements_reopened, 1);
}

/// The soft cordons put on (`true`) and taken off among `actions`, by node.
fn soft_cordons(actions: &[Action]) -> Vec<(&str, bool)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::SoftCordon { node, on } => Some((node.as_str(), *on)),
            _ => None,
        })
        .collect()
}

/// A `WhenEmpty` engine with `config` and pool `annotations`, and node "roomy": an 8-vCPU node
/// ($0.40/h) running a 2,500m pod since t(0), which a 4-vCPU node ($0.20/h) would hold.
fn roomy_node(annotations: serde_json::Value, config: EngineConfig) -> Engine {
    let mut e = when_empty_buying("on-demand", annotations, config);
    node_with(
        &mut e,
        "roomy",
        "c.2xlarge",
        CapacityType::OnDemand,
        vec![pod("p0", 2500, 0)],
        t(0),
        None,
    );
    e
}

#[test]
fn a_node_worth_twice_what_its_pods_need_is_soft_cordoned_and_lifted_once_it_is_worth_it() {
    // Twice its pods' need, short of the ratio of 4: not cordoned, but tainted
    // PreferNoSchedule so that the scheduler sends new pods to other nodes that fit.
    let mut e = roomy_node(json!({}), EngineConfig::default());
    let actions = run(&mut e, 0, 60);
    assert_eq!(soft_cordons(&actions), vec![("roomy", true)], "{actions:?}");
    assert!(cordoned(&actions).is_empty(), "{actions:?}");
    assert!(deleted(&actions).is_empty(), "{actions:?}");
    // Nothing to say again while nothing changed.
    assert!(soft_cordons(&run(&mut e, 60, 3600)).is_empty());
    // A pod that fitted nowhere else landed on it: 6,500m need the whole node now, so the
    // taint comes off (at the next look, consolidateAfter after the last).
    e.handle(
        t(3600),
        Event::PodBound {
            pod: pod("p1", 4000, 0),
            node: "roomy".into(),
        },
    );
    let actions = run(&mut e, 3600, 3600 + 1900);
    assert_eq!(
        soft_cordons(&actions),
        vec![("roomy", false)],
        "{actions:?}"
    );
    assert!(cordoned(&actions).is_empty(), "{actions:?}");
}

#[test]
fn the_soft_cordon_is_a_setting_and_gives_way_to_the_cordon() {
    // Off: nothing tainted.
    let mut e = roomy_node(
        json!({}),
        EngineConfig {
            soft_cordon_price_ratio: 0.0,
            ..EngineConfig::default()
        },
    );
    assert!(soft_cordons(&run(&mut e, 0, 600)).is_empty());
    // Off for one pool (its annotation), and a pool's own ratio replaces the default: the node
    // costs twice its pods' need here, so 2.5 keeps it open and 1.5 does not.
    for (ratio, soft) in [("0", false), ("2.5", false), ("1.5", true)] {
        let mut e = roomy_node(
            json!({"quartermaster.dev/soft-cordon-price-ratio": ratio}),
            EngineConfig::default(),
        );
        let actions = run(&mut e, 0, 600);
        assert_eq!(
            !soft_cordons(&actions).is_empty(),
            soft,
            "{ratio}: {actions:?}"
        );
    }
    // Off with retirement too (the pool's ratio 0).
    let mut e = when_empty(json!({"quartermaster.dev/retire-price-ratio": "0"}));
    dear_node(&mut e, pod("p0", 500, 0));
    let actions = run(&mut e, 0, 600);
    assert!(soft_cordons(&actions).is_empty(), "{actions:?}");
    // A node dear enough to retire is cordoned, not soft-cordoned.
    let mut e = when_empty(json!({}));
    dear_node(&mut e, pod("p0", 500, 0));
    let actions = run(&mut e, 0, 600);
    assert_eq!(cordoned(&actions), vec!["big"], "{actions:?}");
    assert!(soft_cordons(&actions).is_empty(), "{actions:?}");
}
