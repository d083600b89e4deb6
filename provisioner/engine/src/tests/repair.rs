//! Node repair: a node whose GPUs (or kubelet) report broken for longer than the rule tolerates
//! is replaced and its pods planned again; a flap does not restart the clock; a pool where too
//! many nodes are broken at once is left alone.

use chrono::TimeDelta;
use quartermaster_pricing::CapacityType;

use super::fixtures::*;
use crate::{Action, DeleteReason, Engine, Event, NodeCondition};

/// `n` one-GPU pods on `n` registered, initialized nodes (`node-0`…); returns the claims.
fn running(e: &mut Engine, n: usize) -> Vec<String> {
    let pods: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
    let names: Vec<&str> = pods.iter().map(String::as_str).collect();
    let actions = pending_then_poll(e, &names, t(0));
    let mut claims = Vec::new();
    for (i, (claim, _, zone, ct)) in launches(&actions).into_iter().enumerate() {
        e.handle(
            t(3),
            Event::Launched {
                claim: claim.clone(),
                instance: instance(&claim, &format!("i-{i}"), &zone, ct, t(3)),
            },
        );
        e.handle(
            t(30),
            Event::NodeRegistered {
                claim: claim.clone(),
                node: registered_node(&format!("node-{i}"), &zone, 1, false),
            },
        );
        claims.push(claim);
    }
    assert_eq!(binds(&e.poll(t(40))).len(), n);
    claims
}

/// `node-i` now reports `kind=status` since `since` seconds.
fn report(e: &mut Engine, i: usize, kind: &str, status: &str, since: i64, at: i64) {
    let mut node = registered_node(&format!("node-{i}"), "us-east-1a", 1, false);
    node.conditions = vec![NodeCondition {
        kind: kind.into(),
        status: status.into(),
        since: Some(t(since)),
        reason: Some("XID 79: GPU has fallen off the bus".into()),
    }];
    e.handle(t(at), Event::NodeUpdated { node });
}

fn repaired(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Delete {
                claim,
                reason: DeleteReason::Unhealthy,
                ..
            } => Some(claim.clone()),
            _ => None,
        })
        .collect()
}

/// Polls at every deadline up to `until` seconds; every action taken.
fn run_until(e: &mut Engine, from: i64, until: i64) -> Vec<Action> {
    let mut all = e.poll(t(from));
    while let Some(d) = e.next_deadline() {
        if d > t(until) {
            break;
        }
        all.extend(e.poll(d));
    }
    all
}

#[test]
fn a_node_whose_gpu_fell_off_the_bus_is_replaced_after_ten_minutes() {
    let mut e = engine();
    let claims = running(&mut e, 3);
    report(&mut e, 0, "AcceleratedHardwareReady", "False", 100, 110);
    let early = run_until(&mut e, 110, 699);
    assert!(
        repaired(&early).is_empty(),
        "not before 10 minutes: {early:?}"
    );
    let actions = run_until(&mut e, 700, 760);
    assert_eq!(repaired(&actions), [claims[0].clone()], "{actions:?}");
    assert_eq!(
        e.repair_reason(&claims[0]),
        Some("AcceleratedHardwareReady=False for 10m")
    );
    // Its pod is planned again on a new node at once.
    let relaunch = launches(&actions);
    assert_eq!(relaunch.len(), 1, "{actions:?}");
    assert_eq!(relaunch[0].3, CapacityType::Spot);
    assert_eq!(e.stats().repairs, 1);
}

#[test]
fn a_flapping_kubelet_is_repaired_on_the_first_failures_clock() {
    let mut e = engine();
    let claims = running(&mut e, 2);
    // NotReady at 100 s, Ready again at 1000 s for 5 minutes, NotReady at 1300 s (a new
    // transition time): due 30 minutes after the first failure (1900 s), not after the last.
    report(&mut e, 1, "Ready", "False", 100, 100);
    report(&mut e, 1, "Ready", "True", 1000, 1000);
    let calm = run_until(&mut e, 1000, 1299);
    assert!(repaired(&calm).is_empty());
    report(&mut e, 1, "Ready", "False", 1300, 1300);
    let actions = run_until(&mut e, 1300, 1900 + TimeDelta::minutes(1).num_seconds());
    assert_eq!(repaired(&actions), [claims[1].clone()], "{actions:?}");
}

#[test]
fn one_broken_node_of_two_is_repaired_but_a_pool_broken_everywhere_is_left_alone() {
    // Two of two broken (a bad driver rollout?): replacing them would not help; held.
    let mut e = engine();
    running(&mut e, 2);
    report(&mut e, 0, "Ready", "Unknown", 100, 100);
    report(&mut e, 1, "Ready", "Unknown", 100, 100);
    let actions = run_until(&mut e, 100, 3000);
    assert!(repaired(&actions).is_empty(), "{actions:?}");
    assert!(e.stats().repairs_held > 0);

    // One of two: repaired (a 20% guard alone would block it).
    let mut e = engine();
    let claims = running(&mut e, 2);
    report(&mut e, 1, "Ready", "Unknown", 100, 100);
    let actions = run_until(&mut e, 100, 3000);
    assert_eq!(repaired(&actions), [claims[1].clone()]);
}

#[test]
fn a_pool_sets_its_own_tolerations_or_turns_repair_off() {
    let with_repair = |repair: serde_json::Value| {
        let mut setup = setup("5m");
        let spec: quartermaster_policies::RepairSpec =
            serde_json::from_value(repair).expect("a repair spec");
        setup.pools[0].repair =
            crate::RepairOverride::from_spec(Some(&spec)).expect("a valid repair spec");
        Engine::new(setup, crate::EngineConfig::default())
    };
    // Two minutes for a GPU fault in this pool.
    let mut e = with_repair(serde_json::json!({
        "policies": [{"conditionType": "AcceleratedHardwareReady", "toleration": "2m"}]
    }));
    let claims = running(&mut e, 2);
    report(&mut e, 0, "AcceleratedHardwareReady", "False", 100, 100);
    let actions = run_until(&mut e, 100, 230);
    assert_eq!(repaired(&actions), [claims[0].clone()], "{actions:?}");
    assert_eq!(
        e.repair_reason(&claims[0]),
        Some("AcceleratedHardwareReady=False for 2m")
    );

    // Repair off: a broken node stays (someone else repairs it).
    let mut e = with_repair(serde_json::json!({"enabled": false}));
    running(&mut e, 2);
    report(&mut e, 0, "AcceleratedHardwareReady", "False", 100, 100);
    let actions = run_until(&mut e, 100, 10_000);
    assert!(repaired(&actions).is_empty(), "{actions:?}");
}

/// `node-i` now reports a GPU fault with `reason` since `since` seconds.
fn gpu_fault(e: &mut Engine, i: usize, reason: &str, since: i64, at: i64) {
    let mut node = registered_node(&format!("node-{i}"), "us-east-1a", 1, false);
    node.conditions = vec![NodeCondition {
        kind: "AcceleratedHardwareReady".into(),
        status: "False".into(),
        since: Some(t(since)),
        reason: Some(reason.into()),
    }];
    e.handle(t(at), Event::NodeUpdated { node });
}

/// `node-i` reports its GPUs healthy again at `at`.
fn gpu_healthy(e: &mut Engine, i: usize, at: i64) {
    let mut node = registered_node(&format!("node-{i}"), "us-east-1a", 1, false);
    node.conditions = vec![NodeCondition {
        kind: "AcceleratedHardwareReady".into(),
        status: "True".into(),
        since: Some(t(at)),
        reason: None,
    }];
    e.handle(t(at), Event::NodeUpdated { node });
}

fn rebooted(actions: &[Action]) -> Vec<(String, String)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Reboot { claim, reason, .. } => Some((claim.clone(), reason.clone())),
            _ => None,
        })
        .collect()
}

#[test]
fn an_ecc_error_a_reset_clears_is_rebooted_in_place_and_nothing_is_bought() {
    let mut e = engine();
    let claims = running(&mut e, 2);
    gpu_fault(&mut e, 0, "NvidiaXID48Error", 100, 100);
    let actions = run_until(&mut e, 100, 760);
    assert_eq!(
        rebooted(&actions),
        [(
            claims[0].clone(),
            "AcceleratedHardwareReady=False (NvidiaXID48Error) for 10m".to_owned()
        )],
        "{actions:?}"
    );
    assert!(repaired(&actions).is_empty(), "{actions:?}");
    assert!(launches(&actions).is_empty(), "a reboot buys nothing");
    assert_eq!(e.stats().repair_reboots, 1);
    assert_eq!(e.stats().repairs, 0);
    // Back healthy after the reboot and healthy for a whole toleration: forgotten.
    gpu_healthy(&mut e, 0, 900);
    let later = run_until(&mut e, 900, 5000);
    assert!(
        rebooted(&later).is_empty() && repaired(&later).is_empty(),
        "{later:?}"
    );
}

#[test]
fn a_node_still_broken_after_its_reboot_is_replaced_a_toleration_later() {
    let mut e = engine();
    let claims = running(&mut e, 2);
    gpu_fault(&mut e, 1, "NvidiaXID48Error", 100, 100);
    let actions = run_until(&mut e, 100, 700);
    assert_eq!(rebooted(&actions).len(), 1, "{actions:?}");
    // Still broken (the condition keeps its old transition time): replaced 10 minutes after
    // the reboot (at 700 s), not at once and not rebooted again.
    let early = run_until(&mut e, 701, 1299);
    assert!(
        rebooted(&early).is_empty() && repaired(&early).is_empty(),
        "{early:?}"
    );
    let actions = run_until(&mut e, 1300, 1360);
    assert_eq!(repaired(&actions), [claims[1].clone()], "{actions:?}");
    assert_eq!(
        e.repair_reason(&claims[1]),
        Some(
            "AcceleratedHardwareReady=False (NvidiaXID48Error) for 10m, still broken after a reboot"
        )
    );
    assert_eq!(launches(&actions).len(), 1, "its pod is planned again");
}

#[test]
fn a_reboot_the_cloud_refuses_replaces_the_node_at_once() {
    let mut e = engine();
    let claims = running(&mut e, 2);
    gpu_fault(&mut e, 0, "NvidiaXID48Error", 100, 100);
    let actions = run_until(&mut e, 100, 760);
    assert_eq!(rebooted(&actions).len(), 1);
    e.handle(
        t(761),
        Event::RebootFailed {
            claim: claims[0].clone(),
            error: "kwok cannot reboot".into(),
        },
    );
    let actions = e.poll(t(761));
    assert_eq!(repaired(&actions), [claims[0].clone()], "{actions:?}");
    assert!(
        e.repair_reason(&claims[0])
            .is_some_and(|r| r.ends_with("reboot failed: kwok cannot reboot"))
    );
}

#[test]
fn a_pool_policy_can_reboot_a_condition_reason_first_or_replace_a_default_reboot() {
    let spec: quartermaster_policies::RepairSpec = serde_json::from_value(serde_json::json!({
        "policies": [
            {"conditionType": "AcceleratedHardwareReady", "conditionReason": "NvidiaXID94Error",
             "toleration": "1m", "action": "Reboot"},
            {"conditionType": "AcceleratedHardwareReady", "conditionReason": "NvidiaXID48Error",
             "toleration": "10m", "action": "Replace"}
        ]
    }))
    .unwrap();
    let config = crate::RepairOverride::from_spec(Some(&spec))
        .unwrap()
        .resolve(&crate::RepairConfig::default());
    let xid94 = &config.rules[0];
    assert_eq!(xid94.reason.as_deref(), Some("NvidiaXID94Error"));
    assert_eq!(xid94.action, crate::RepairAction::Reboot);
    let xid48 = config
        .rules
        .iter()
        .find(|r| r.reason.as_deref() == Some("NvidiaXID48Error"))
        .unwrap();
    assert_eq!(xid48.action, crate::RepairAction::Replace);
    let bad: quartermaster_policies::RepairSpec = serde_json::from_value(serde_json::json!({
        "policies": [{"conditionType": "Ready", "toleration": "1m", "action": "Pray"}]
    }))
    .unwrap();
    assert_eq!(
        crate::RepairOverride::from_spec(Some(&bad)).unwrap_err(),
        "spec.repair.policies[0].action: \"Pray\" is not Replace or Reboot"
    );
}
