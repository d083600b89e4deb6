//! Node edits from a store that is behind the server: a patch that replaces a whole list
//! (taints, finalizers) is guarded by the `resourceVersion` it was computed from, and computed
//! again from the server's node on a conflict, so it never brings back a taint another
//! component lifted nor drops one it added.

use k8s_openapi::api::core::v1::Node;
use serde_json::json;

use super::scenarios::one_pod_running;
use super::*;
use crate::writes::NODE_EDIT_ATTEMPTS;

const OURS: &str = "quartermaster.dev/termination";

fn writer(api: &FakeApi) -> Writer {
    Writer::new(
        crate::client::LoopClients::shared(api.client()),
        Leadership::always().subscribe(),
        None,
    )
}

fn node(finalizers: &[&str]) -> Value {
    json!({"apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "n1", "finalizers": finalizers},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}})
}

fn typed_node(v: Value) -> Node {
    serde_json::from_value(v).expect("a node")
}

/// The node's taints on the server, as `key:effect`.
fn taints(api: &FakeApi, name: &str) -> Vec<String> {
    let node = api.get("", "nodes", name).expect("the node");
    node["spec"]["taints"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|t| {
            format!(
                "{}:{}",
                t["key"].as_str().unwrap(),
                t["effect"].as_str().unwrap()
            )
        })
        .collect()
}

/// Sets the node's taints on the server (as another component would) to the GPU taint and one
/// more.
fn set_second_taint(api: &FakeApi, name: &str, key: &str, effect: &str) {
    api.modify(
        "",
        "nodes",
        name,
        json!({"spec": {"taints": [
            {"key": "nvidia.com/gpu", "effect": "NoSchedule"},
            {"key": key, "effect": effect}]}}),
    );
}

#[tokio::test]
async fn a_finalizer_release_from_a_stale_copy_keeps_a_finalizer_added_since() {
    let api = FakeApi::default();
    api.insert("", "nodes", node(&[OURS]));
    let stale = typed_node(api.get("", "nodes", "n1").unwrap());
    // Another controller protects the node after the store's copy was taken.
    api.modify(
        "",
        "nodes",
        "n1",
        json!({"metadata": {"finalizers": [OURS, "example.com/protect"]}}),
    );
    writer(&api)
        .remove_node_finalizer(&stale, OURS)
        .await
        .expect("released");
    let now = api.get("", "nodes", "n1").unwrap();
    assert_eq!(
        now["metadata"]["finalizers"],
        json!(["example.com/protect"]),
        "{now}"
    );
    let calls: Vec<String> = api.log().iter().map(|r| r.short()).collect();
    assert_eq!(
        calls,
        ["patch nodes/n1", "get nodes/n1", "patch nodes/n1"],
        "the stale patch is refused, the node read again and the patch made again"
    );
    let patches: Vec<Value> = api
        .log()
        .into_iter()
        .filter(|r| r.verb() == "patch")
        .map(|r| r.body)
        .collect();
    assert!(
        patches
            .iter()
            .all(|b| b["metadata"]["resourceVersion"].is_string()),
        "every node patch is guarded: {patches:?}"
    );
    assert_rbac_allows_every_call(&api);
}

#[tokio::test]
async fn an_edit_that_keeps_meeting_a_newer_node_gives_up_with_an_error_and_changes_nothing() {
    let api = FakeApi::default();
    api.insert("", "nodes", node(&[OURS]));
    let copy = typed_node(api.get("", "nodes", "n1").unwrap());
    for _ in 0..NODE_EDIT_ATTEMPTS {
        api.fail_next("PATCH", "nodes", 409, "Conflict");
    }
    let r = writer(&api).remove_node_finalizer(&copy, OURS).await;
    assert!(r.is_err(), "left to the next pass: {r:?}");
    let now = api.get("", "nodes", "n1").unwrap();
    assert_eq!(now["metadata"]["finalizers"], json!([OURS]));
    let patches = api.log().iter().filter(|r| r.verb() == "patch").count();
    assert_eq!(patches, NODE_EDIT_ATTEMPTS);
}

#[tokio::test]
async fn an_edit_of_a_node_that_is_gone_or_needs_nothing_writes_nothing() {
    let api = FakeApi::default();
    let gone = typed_node(node(&[OURS]));
    let w = writer(&api);
    w.remove_node_finalizer(&gone, OURS)
        .await
        .expect("a node that is gone counts as released");
    api.insert("", "nodes", node(&[]));
    let copy = typed_node(api.get("", "nodes", "n1").unwrap());
    w.remove_node_finalizer(&copy, OURS)
        .await
        .expect("nothing to do");
    let calls: Vec<String> = api.log().iter().map(|r| r.short()).collect();
    assert_eq!(calls, ["patch nodes/n1"], "only the patch that met no node");
}

#[tokio::test(start_paused = true)]
async fn a_termination_cordon_from_a_stale_store_neither_restores_a_lifted_taint_nor_drops_a_new_one()
 {
    let (mut env, name) = one_pod_running(8).await;
    // The node starts with a startup taint (a GPU operator's), and its claim is deleted.
    set_second_taint(&env.api, &name, "example.com/gpu-warming", "NoSchedule");
    env.api.modify(
        QM,
        "nodeclaims",
        &name,
        json!({"metadata": {"deletionTimestamp": "2027-01-15T09:00:00Z"}}),
    );
    let now = t0() + TimeDelta::seconds(9);
    env.clock.set(now);
    env.sync();
    // Behind the store: the operator lifts its startup taint, an admin adds a maintenance one.
    set_second_taint(
        &env.api,
        &name,
        "example.com/maintenance",
        "PreferNoSchedule",
    );
    env.api.clear_log();
    env.driver.pass(now);
    env.settle().await;
    let node = env.api.get("", "nodes", &name).expect("draining, not gone");
    assert_eq!(node["spec"]["unschedulable"], json!(true), "{node}");
    assert_eq!(
        taints(&env.api, &name),
        [
            "nvidia.com/gpu:NoSchedule",
            "example.com/maintenance:PreferNoSchedule",
            "quartermaster.dev/disrupted:NoSchedule"
        ],
    );
    assert_rbac_allows_every_call(&env.api);
}
