//! Lifecycle scenarios: finalizer before launch, registration by providerID, initialization on
//! GPU allocatable, termination order, leader-only writes, a restart in the middle of a launch.

use serde_json::json;

use super::*;
use crate::leader::LeaderElector;
use crate::rbac::{CLUSTER_RULES, KWOK_CLUSTER_RULES, NAMESPACE_RULES, allows};

fn position(api: &FakeApi, what: impl Fn(&fake_api::Logged) -> bool) -> Option<usize> {
    api.log().iter().position(what)
}

pub(super) fn claims(api: &FakeApi) -> Vec<Value> {
    api.list(QM, "nodeclaims")
}

fn nodes(api: &FakeApi) -> Vec<Value> {
    api.list("", "nodes")
}

/// The name of the only NodeClaim.
fn only_claim(api: &FakeApi) -> String {
    claims(api)[0]["metadata"]["name"]
        .as_str()
        .expect("a named claim")
        .to_owned()
}

/// The pod `ml/NAME` runs on `node` (the scheduler bound it, the kubelet started it).
fn run_on(api: &FakeApi, pod: &str, node: &str) {
    api.modify(
        "",
        "pods",
        &format!("ml/{pod}"),
        json!({"spec": {"nodeName": node}, "status": {"phase": "Running", "conditions": []}}),
    );
}

/// The device plugin of `node` reports one GPU.
fn gpu_appears(api: &FakeApi, node: &str) {
    api.modify(
        "",
        "nodes",
        node,
        json!({"status": {"allocatable": {"nvidia.com/gpu": "1"}, "capacity": {"nvidia.com/gpu": "1"}}}),
    );
}

/// Every request the controller made is allowed by the chart's RBAC (the same tables).
fn assert_rbac(api: &FakeApi) {
    for r in api.log() {
        let allowed = allows(CLUSTER_RULES, &r.group, &r.resource, r.verb())
            || allows(KWOK_CLUSTER_RULES, &r.group, &r.resource, r.verb())
            || allows(NAMESPACE_RULES, &r.group, &r.resource, r.verb());
        assert!(
            allowed,
            "{} ({}) is not in the RBAC tables",
            r.short(),
            r.group
        );
    }
}

/// One GPU pod `llm-0` running on its initialized node, passes run until `until` s; with the
/// claim's name.
pub(super) async fn one_pod_running(until: i64) -> (Env, String) {
    let mut env = launched(cluster_with_gpu_pool(&[("llm-0", 1)])).await;
    let name = only_claim(&env.api);
    gpu_appears(&env.api, &name);
    env.passes(4, 6).await;
    run_on(&env.api, "llm-0", &name);
    env.passes(7, until).await;
    (env, name)
}

/// A pending GPU pod becomes a NodeClaim with its finalizer, then a launched Node.
async fn launched(api: FakeApi) -> Env {
    let mut env = Env::new(api);
    env.passes(0, 3).await;
    env
}

#[tokio::test(start_paused = true)]
async fn the_nodeclaim_and_its_finalizer_exist_before_the_cloud_is_called() {
    let env = launched(cluster_with_gpu_pool(&[("llm-0", 1)])).await;
    let api = &env.api;
    let claims = claims(api);
    assert_eq!(claims.len(), 1, "one pod, one claim: {claims:#?}");
    let claim = &claims[0];
    let name = claim["metadata"]["name"].as_str().unwrap().to_owned();
    assert!(name.starts_with("gpu-t"), "{name}");
    let create_claim = position(api, |r| r.verb() == "create" && r.resource == "nodeclaims")
        .expect("the NodeClaim is created");
    let create_node = position(api, |r| r.verb() == "create" && r.resource == "nodes")
        .expect("the kwok cloud creates the Node");
    assert!(
        create_claim < create_node,
        "record first, then launch: {:?}",
        api.log().iter().map(|r| r.short()).collect::<Vec<_>>()
    );
    let posted = &api.log()[create_claim].body;
    assert_eq!(
        posted["metadata"]["finalizers"],
        json!(["quartermaster.dev/termination"])
    );
    assert_eq!(
        posted["metadata"]["labels"]["quartermaster.dev/nodepool"],
        "gpu"
    );
    assert_eq!(
        posted["metadata"]["labels"]["node.kubernetes.io/instance-type"],
        "g5.xlarge"
    );
    // Launched: the status carries the providerID and the offering.
    let status = &claim["status"];
    assert_eq!(status["providerID"], format!("kwok://{name}"));
    assert_eq!(status["instanceType"], "g5.xlarge");
    assert_eq!(status["capacityType"], "on-demand");
    let launched = status["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "Launched")
        .unwrap();
    assert_eq!(launched["status"], "True");
    assert_eq!(nodes(api).len(), 1);
    assert_rbac(api);
}

#[tokio::test(start_paused = true)]
async fn a_node_with_the_claims_provider_id_is_registered_and_initialized_once_its_gpus_are_allocatable()
 {
    let mut env = launched(cluster_with_gpu_pool(&[("llm-0", 1)])).await;
    let name = only_claim(&env.api);
    env.passes(4, 5).await;
    let node = env.api.get("", "nodes", &name).expect("the Node");
    let labels = &node["metadata"]["labels"];
    assert_eq!(labels["quartermaster.dev/nodepool"], "gpu");
    assert_eq!(labels["quartermaster.dev/nodeclaim"], name.as_str());
    assert_eq!(
        labels["topology.kubernetes.io/zone"]
            .as_str()
            .map(|z| z.starts_with("us-east-1")),
        Some(true)
    );
    let taints = node["spec"]["taints"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        !taints
            .iter()
            .any(|t| t["key"] == "quartermaster.dev/unregistered"),
        "{taints:?}"
    );
    assert!(
        taints.iter().any(|t| t["key"] == "nvidia.com/gpu"),
        "the template's taint: {taints:?}"
    );
    assert_eq!(
        node["metadata"]["finalizers"],
        json!(["quartermaster.dev/termination"])
    );
    let claim = env.api.get(QM, "nodeclaims", &name).unwrap();
    let condition = |c: &Value, t: &str| {
        c["status"]["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["type"] == t)
            .map(|x| x["status"].as_str().unwrap().to_owned())
    };
    assert_eq!(condition(&claim, "Registered").as_deref(), Some("True"));
    assert_eq!(claim["status"]["nodeName"], name.as_str());
    // The device plugin has not reported the GPU yet (no kubelet loop runs here).
    assert_eq!(condition(&claim, "Initialized").as_deref(), Some("Unknown"));
    gpu_appears(&env.api, &name);
    env.passes(6, 7).await;
    let claim = env.api.get(QM, "nodeclaims", &name).unwrap();
    assert_eq!(condition(&claim, "Initialized").as_deref(), Some("True"));
    assert_eq!(condition(&claim, "Ready").as_deref(), Some("True"));
    let events: Vec<String> = env
        .api
        .log()
        .iter()
        .filter(|r| r.resource == "events")
        .map(|r| r.body["reason"].as_str().unwrap_or_default().to_owned())
        .collect();
    for reason in ["Nominated", "Launched", "Registered", "Initialized"] {
        assert!(
            events.iter().any(|e| e == reason),
            "{reason} missing from {events:?}"
        );
    }
    assert_rbac(&env.api);
}

#[tokio::test(start_paused = true)]
async fn termination_cordons_evicts_deletes_the_instance_then_removes_finalizers() {
    let mut env = launched(cluster_with_gpu_pool(&[("llm-0", 1)])).await;
    let name = only_claim(&env.api);
    env.passes(4, 5).await;
    // The pod runs on the node.
    run_on(&env.api, "llm-0", &name);
    env.passes(6, 7).await;
    env.api.clear_log();
    // A user deletes the NodeClaim: the finalizer holds it.
    env.api.modify(
        QM,
        "nodeclaims",
        &name,
        json!({"metadata": {"deletionTimestamp": "2027-01-15T09:00:00Z"}}),
    );
    env.passes(8, 9).await;
    let log = env.api.log();
    let short: Vec<String> = log.iter().map(|r| r.short()).collect();
    let cordon = position(&env.api, |r| {
        r.resource == "nodes" && r.verb() == "patch" && r.body["spec"]["unschedulable"] == true
    })
    .unwrap_or_else(|| panic!("cordon: {short:?}"));
    let evict = position(&env.api, |r| r.resource == "pods/eviction")
        .unwrap_or_else(|| panic!("eviction: {short:?}"));
    assert!(cordon < evict, "{short:?}");
    assert!(
        env.api.get(QM, "nodeclaims", &name).is_some(),
        "held while the pod drains: {short:?}"
    );
    assert!(
        env.api.get("", "nodes", &name).is_some(),
        "the instance stays while its pod drains"
    );
    assert_eq!(
        claims(&env.api).len(),
        2,
        "the pod's replacement is launched at once"
    );
    // The pod goes (its kubelet would finish it).
    let pods: Vec<Value> = env.api.list("", "pods");
    assert!(
        !pods[0]["metadata"]["deletionTimestamp"].is_null(),
        "evicted"
    );
    env.api.modify(
        "",
        "pods",
        "ml/llm-0",
        json!({"status": {"phase": "Succeeded"}}),
    );
    env.passes(10, 16).await;
    let short: Vec<String> = env.api.log().iter().map(|r| r.short()).collect();
    let delete_node = position(&env.api, |r| r.resource == "nodes" && r.verb() == "delete")
        .unwrap_or_else(|| panic!("instance delete: {short:?}"));
    let release = position(&env.api, |r| {
        r.resource == "nodeclaims"
            && r.verb() == "patch"
            && r.body["metadata"]["finalizers"] == json!([])
    })
    .unwrap_or_else(|| panic!("finalizer removal: {short:?}"));
    assert!(evict < delete_node && delete_node < release, "{short:?}");
    assert!(env.api.get(QM, "nodeclaims", &name).is_none(), "{short:?}");
    assert!(env.api.get("", "nodes", &name).is_none(), "{short:?}");
    assert_rbac(&env.api);
}

#[tokio::test(start_paused = true)]
async fn a_replica_that_does_not_lead_writes_nothing() {
    let api = cluster_with_gpu_pool(&[("llm-0", 1)]);
    let client = api.client();
    let (_elector, leadership) = LeaderElector::new(
        client,
        crate::leader::LeaderSettings::new("quartermaster", "replica-b"),
        Arc::new(ManualClock::new(t0())),
    )
    .unwrap();
    let mut env = Env::with_leadership(api, leadership);
    env.passes(0, 3).await;
    let writes: Vec<String> = env
        .api
        .log()
        .iter()
        .filter(|r| r.verb() != "get" && r.verb() != "list")
        .map(|r| r.short())
        .collect();
    assert!(writes.is_empty(), "{writes:?}");
    // And the writer refuses outright.
    let claim = quartermaster_policies::NodeClaim::new("x", serde_json::from_value(json!({"nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "default"}})).unwrap());
    assert!(matches!(
        env.ctx.writer.create_claim(&claim).await,
        Err(crate::ControllerError::NotLeader)
    ));
}

#[tokio::test(start_paused = true)]
async fn a_restart_in_the_middle_of_a_launch_never_launches_a_second_instance() {
    // The first controller recorded the claim and the cloud made the Node, then it died before
    // writing the claim's status.
    let env = launched(cluster_with_gpu_pool(&[("llm-0", 1)])).await;
    let name = only_claim(&env.api);
    env.api
        .modify(QM, "nodeclaims", &name, json!({"status": null}));
    assert!(env.api.get(QM, "nodeclaims", &name).unwrap()["status"].is_null());
    let mut env = env.restart();
    env.api.clear_log();
    env.passes(10, 14).await;
    let short: Vec<String> = env.api.log().iter().map(|r| r.short()).collect();
    assert!(
        !short.iter().any(|s| s.starts_with("create nodes")),
        "no second instance: {short:?}"
    );
    assert!(
        !short.iter().any(|s| s.starts_with("create nodeclaims")),
        "no second claim: {short:?}"
    );
    assert_eq!(nodes(&env.api).len(), 1);
    assert_eq!(claims(&env.api).len(), 1);
    let claim = env.api.get(QM, "nodeclaims", &name).unwrap();
    assert_eq!(
        claim["status"]["providerID"],
        format!("kwok://{name}"),
        "the restarted controller finished the record"
    );
    assert_rbac(&env.api);
}

#[tokio::test(start_paused = true)]
async fn a_restart_after_registration_adopts_the_node_and_buys_nothing_for_its_pods() {
    let mut env = launched(cluster_with_gpu_pool(&[("llm-0", 1), ("llm-1", 1)])).await;
    env.passes(4, 6).await;
    assert_eq!(claims(&env.api).len(), 2);
    let mut env = env.restart();
    env.api.clear_log();
    env.passes(20, 26).await;
    let short: Vec<String> = env.api.log().iter().map(|r| r.short()).collect();
    assert!(
        !short
            .iter()
            .any(|s| s.starts_with("create nodes") || s.starts_with("create nodeclaims")),
        "{short:?}"
    );
    assert_eq!(nodes(&env.api).len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_restart_lifts_the_cordon_of_a_disruption_the_last_controller_did_not_finish() {
    // The last controller cordoned a node for a consolidation and died before its claim was
    // deleted, and soft-cordoned another. A user's own cordon (no disruption taint) on another
    // is left alone.
    let mut env = launched(cluster_with_gpu_pool(&[
        ("llm-0", 1),
        ("llm-1", 1),
        ("llm-2", 1),
    ]))
    .await;
    env.passes(4, 6).await;
    let names: Vec<String> = nodes(&env.api)
        .iter()
        .map(|n| n["metadata"]["name"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(names.len(), 3, "{names:?}");
    let disrupted = json!({"spec": {"unschedulable": true, "taints": [{"key": "quartermaster.dev/disrupted", "effect": "NoSchedule"}]}});
    env.api.modify("", "nodes", &names[0], disrupted.clone());
    env.api.modify(
        "",
        "nodes",
        &names[1],
        json!({"spec": {"unschedulable": true}}),
    );
    let retiring = json!({"spec": {"taints": [{"key": "quartermaster.dev/retiring", "effect": "PreferNoSchedule"}]}});
    env.api.modify("", "nodes", &names[2], retiring);
    let mut env = env.restart();
    env.api.clear_log();
    env.passes(2, 3).await;
    let soft = env.api.get("", "nodes", &names[2]).unwrap();
    assert!(
        !soft["spec"]["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["key"] == "quartermaster.dev/retiring"),
        "{soft}"
    );
    let node = env.api.get("", "nodes", &names[0]).unwrap();
    assert_eq!(node["spec"]["unschedulable"], json!(false), "{node}");
    assert!(
        !node["spec"]["taints"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|t| t["key"] == "quartermaster.dev/disrupted"),
        "{node}"
    );
    let user_cordoned = env.api.get("", "nodes", &names[1]).unwrap();
    assert_eq!(user_cordoned["spec"]["unschedulable"], json!(true));
    assert_rbac(&env.api);
}

#[tokio::test(start_paused = true)]
async fn a_conflict_on_creating_the_nodeclaim_launches_nothing_until_the_create_succeeds() {
    // A 409 that is not `AlreadyExists` (an API server or proxy conflict) means the NodeClaim was
    // not written: launching anyway would make an instance no NodeClaim owns.
    let api = cluster_with_gpu_pool(&[("llm-0", 1)]);
    api.fail_next("POST", "nodeclaims", 409, "Conflict");
    let mut env = Env::new(api);
    env.passes(3, 4).await;
    let short: Vec<String> = env.api.log().iter().map(|r| r.short()).collect();
    let first_claim = short
        .iter()
        .position(|s| s.starts_with("create nodeclaims"));
    let first_node = short.iter().position(|s| s.starts_with("create nodes"));
    assert!(first_claim.is_some(), "{short:?}");
    // The first create failed; a node is created only after a second create of the claim.
    let creates = short
        .iter()
        .filter(|s| s.starts_with("create nodeclaims"))
        .count();
    if let Some(node) = first_node {
        assert!(creates >= 2 && node > first_claim.unwrap(), "{short:?}");
    }
    env.passes(10, 14).await;
    let claims = claims(&env.api);
    let nodes = nodes(&env.api);
    assert_eq!(claims.len(), 1, "{claims:?}");
    assert_eq!(nodes.len(), 1, "one node, and it has its claim");
    assert_eq!(
        claims[0]["metadata"]["name"], nodes[0]["metadata"]["name"],
        "the node is the claim's"
    );
}

#[tokio::test(start_paused = true)]
async fn a_deleted_node_whose_nodeclaim_is_gone_loses_the_finalizer_after_the_grace() {
    // The garbage collection deleted an instance whose NodeClaim vanished: its Node (here the
    // instance itself) carries our finalizer, which no termination will ever remove.
    let mut env = launched(cluster_with_gpu_pool(&[("llm-0", 1)])).await;
    let name = only_claim(&env.api);
    env.passes(4, 6).await;
    env.api.remove(QM, "nodeclaims", &name);
    env.api.modify(
        "",
        "nodes",
        &name,
        json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z", "finalizers": ["quartermaster.dev/termination"]}}),
    );
    env.passes(150, 160).await;
    let node = env.api.get("", "nodes", &name);
    let finalizers = node
        .as_ref()
        .map(|n| n["metadata"]["finalizers"].clone())
        .unwrap_or(Value::Null);
    assert!(
        !finalizers
            .as_array()
            .into_iter()
            .flatten()
            .any(|f| f == "quartermaster.dev/termination"),
        "{node:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn an_empty_node_is_removed_after_consolidate_after_and_every_finalizer_goes() {
    let (mut env, _) = one_pod_running(8).await;
    // The workload scales to zero.
    let pods = env.api.list("", "pods");
    assert_eq!(pods.len(), 1);
    env.api.modify(
        "",
        "pods",
        "ml/llm-0",
        json!({"status": {"phase": "Succeeded"}}),
    );
    env.passes(9, 50).await;
    assert!(claims(&env.api).is_empty(), "consolidateAfter is 30s");
    assert!(nodes(&env.api).is_empty());
    assert_rbac(&env.api);
}

#[tokio::test(start_paused = true)]
async fn a_pod_that_fits_no_pool_gets_an_unschedulable_event_with_the_reason_and_nothing_is_bought()
{
    let api = cluster_with_gpu_pool(&[]);
    api.insert("", "pods", pending_pod("huge", 64));
    let mut env = Env::new(api);
    env.passes(0, 3).await;
    assert!(claims(&env.api).is_empty());
    let event = env
        .api
        .log()
        .into_iter()
        .find(|r| r.resource == "events" && r.body["reason"] == "Unschedulable")
        .expect("an Unschedulable event");
    assert_eq!(event.body["regarding"]["name"], "huge");
    assert!(
        event.body["note"]
            .as_str()
            .unwrap()
            .contains("Quartermaster cannot provision"),
        "{}",
        event.body["note"]
    );
    // The event names what ruled the offerings out (64 GPUs: no type has that many).
    assert!(
        event.body["note"]
            .as_str()
            .unwrap()
            .contains("(offerings ruled out: "),
        "{}",
        event.body["note"]
    );
    assert!(
        event.body["note"]
            .as_str()
            .unwrap()
            .contains("× nvidia.com/gpu: requests 64"),
        "{}",
        event.body["note"]
    );
}

#[tokio::test(start_paused = true)]
async fn a_claim_whose_instance_vanished_is_deleted_and_its_record_goes() {
    let mut env = launched(cluster_with_gpu_pool(&[("llm-0", 1)])).await;
    let name = only_claim(&env.api);
    env.passes(4, 6).await;
    // Someone deletes the machine (here: the kwok Node) outside Quartermaster.
    env.api.remove("", "nodes", &name);
    env.passes(7, 20).await;
    let short: Vec<String> = env.api.log().iter().map(|r| r.short()).collect();
    assert!(
        short
            .iter()
            .any(|s| *s == format!("delete nodeclaims/{name}")),
        "{short:?}"
    );
    assert!(env.api.get(QM, "nodeclaims", &name).is_none(), "{short:?}");
    assert_rbac(&env.api);
}

#[tokio::test(start_paused = true)]
async fn a_pool_at_its_node_limit_says_limit_reached_and_its_status_counts_what_it_runs() {
    let api = cluster_with_gpu_pool(&[("llm-0", 1), ("llm-1", 1)]);
    api.modify(
        QM,
        "nodepools",
        "gpu",
        json!({"spec": {"limits": {"nodes": "1"}}}),
    );
    let mut env = launched(api).await;
    env.passes(4, 5).await;
    assert_eq!(claims(&env.api).len(), 1, "the limit allows one node");
    let pool = env.api.get(QM, "nodepools", "gpu").expect("the pool");
    let conditions = pool["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let limit = conditions
        .iter()
        .find(|c| c["type"] == "LimitReached")
        .unwrap_or_else(|| panic!("{pool}"));
    assert_eq!(limit["status"], "True", "{limit}");
    assert!(
        limit["message"].as_str().unwrap().contains("nodes"),
        "{limit}"
    );
    let ready = conditions.iter().find(|c| c["type"] == "Ready").unwrap();
    assert_eq!(ready["status"], "True");
    assert_eq!(pool["status"]["resources"]["nodes"], "1");
    assert!(
        pool["status"]["hourlyCost"].as_f64().unwrap() > 0.0,
        "{pool}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_gpu_ecc_fault_is_rebooted_first_and_replaced_when_the_cloud_cannot_reboot() {
    let mut env = launched(cluster_with_gpu_pool(&[("llm-0", 1)])).await;
    let name = only_claim(&env.api);
    gpu_appears(&env.api, &name);
    env.passes(4, 6).await;
    run_on(&env.api, "llm-0", &name);
    env.passes(7, 8).await;
    // The node agent reports a double-bit ECC error (XID 48) at 10 s.
    let since = (t0() + TimeDelta::seconds(10)).to_rfc3339();
    env.api.modify(
        "",
        "nodes",
        &name,
        json!({"status": {"conditions": [
            {"type": "Ready", "status": "True", "reason": "KubeletReady",
             "lastTransitionTime": t0().to_rfc3339()},
            {"type": "AcceleratedHardwareReady", "status": "False", "reason": "NvidiaXID48Error",
             "message": "XID 48: double-bit ECC error", "lastTransitionTime": since}
        ]}}),
    );
    env.passes(10, 12).await;
    env.pass_at(400).await;
    assert_eq!(claims(&env.api).len(), 1, "tolerated for 10 minutes");
    env.pass_at(611).await;
    env.passes(612, 614).await;
    let events: Vec<String> = env
        .api
        .log()
        .iter()
        .filter(|r| r.resource == "events" && r.verb() == "create")
        .filter(|r| r.body["reason"] == "Repairing")
        .map(|r| {
            r.body["note"]
                .as_str()
                .or(r.body["message"].as_str())
                .unwrap_or("")
                .to_owned()
        })
        .collect();
    assert!(
        events
            .iter()
            .any(|m| m.contains("rebooting the node in place")),
        "{events:?}"
    );
    // The kwok cloud cannot reboot: the node is replaced instead, with the reason.
    let engine = env.driver.engine().expect("an engine");
    assert_eq!(
        (engine.stats().repair_reboots, engine.stats().repairs),
        (1, 1)
    );
    assert!(
        engine
            .repair_reason(&name)
            .is_some_and(|r| r.contains("reboot failed")),
        "{:?}",
        engine.repair_reason(&name)
    );
    assert_eq!(claims(&env.api).len(), 2, "a replacement for llm-0");
    let metrics = env.driver.ctx().metrics.encode();
    assert!(
        metrics.contains(
            "quartermaster_repair_reboots_total{condition=\"AcceleratedHardwareReady=False (NvidiaXID48Error)\"} 1"
        ),
        "{metrics}"
    );
    let claim = env.api.get(QM, "nodeclaims", &name);
    assert!(
        claim
            .as_ref()
            .is_none_or(|c| !c["metadata"]["deletionTimestamp"].is_null()),
        "the broken node is being replaced: {claim:?}"
    );
    assert_rbac(&env.api);
}
