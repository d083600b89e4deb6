//! End to end against a real cluster, the mix a real kube-scheduler got wrong for us once: 200
//! GPU pods (120 × 1 GPU, 40 × 2, 30 × 4, 10 × 8) on one GPU NodePool. The scheduler binds
//! where it likes, not where the controller planned; the test fails unless every pod binds, and
//! fails the moment a node is deleted empty while a pending pod would fit on it. It prints the
//! figures (time to all bound, nodes, cost per hour, controller CPU seconds and peak RSS).
//!
//! Runs only when `QUARTERMASTER_E2E_KUBECONFIG` names a kubeconfig, like `e2e.rs`, and never
//! at the same time as it (they share the cluster's NodePools).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams};
use quartermaster_policies::{NodeClaim, NodePool};
use serde_json::{Value, json};

use super::e2e::{
    Controller, KWOK_2S, NAMESPACE, apply, claims_and_nodes, client, deployment, on_cluster, setup,
    wait_until_no_nodes,
};

/// How long the test watches the fleet after every pod is bound.
const SETTLE_WATCH: Duration = Duration::from_secs(120);
/// The most pods consolidation may move in that time.
const MAX_MOVED_WHILE_SETTLING: usize = 20;

/// The W2 mix: (GPUs per pod, pods).
const MIX: [(u32, i32); 4] = [(1, 120), (2, 40), (4, 30), (8, 10)];
/// How long all 200 may take to bind on a shared 2-core machine.
const BIND_TIMEOUT: Duration = Duration::from_secs(600);

#[test]
fn two_hundred_gpu_pods_all_bind_and_no_node_goes_empty_while_a_pending_pod_fits() {
    on_cluster(gpu_mix);
}

/// Once every pod is bound, consolidation settles. The kube-scheduler binds the pods a move
/// evicts by its own scores, and a move it would scatter is not made: a controller that made them
/// moved about 100 of the 200 pods every minute, each move buying nodes for the pods the
/// scheduler left over. Over [`SETTLE_WATCH`] at most [`MAX_MOVED_WHILE_SETTLING`] pods are
/// replaced (a Deployment's evicted pod comes back under a new uid).
async fn settles(client: &Client, ctl: &Controller) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let uids = |l: Vec<Pod>| -> std::collections::BTreeSet<String> {
        l.into_iter().filter_map(|p| p.metadata.uid).collect()
    };
    let before = uids(pods.list(&ListParams::default()).await.expect("pods").items);
    tokio::time::sleep(SETTLE_WATCH).await;
    let after = uids(pods.list(&ListParams::default()).await.expect("pods").items);
    let moved = after.difference(&before).count();
    let (claims, _) = claims_and_nodes(client).await;
    let cost: Value = serde_json::from_str(&ctl.get("/cost")).unwrap_or_default();
    println!(
        "W2 mix {SETTLE_WATCH:?} later: {moved} pods moved, {} NodeClaims, ${:.2}/h",
        claims.len(),
        cost["cost_per_hour"].as_f64().unwrap_or_default()
    );
    assert!(
        moved <= MAX_MOVED_WHILE_SETTLING,
        "{moved} pods moved in {SETTLE_WATCH:?} after all were bound\ncontroller log:\n{}",
        ctl.log()
            .lines()
            .filter(|l| l.contains("disruption decided"))
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
}

fn gpus(pod: &Pod) -> i64 {
    pod.spec
        .as_ref()
        .and_then(|s| s.containers.first())
        .and_then(|c| {
            c.resources
                .as_ref()?
                .requests
                .as_ref()?
                .get("nvidia.com/gpu")
        })
        .and_then(|q| q.0.parse().ok())
        .unwrap_or(0)
}

fn node_gpus(node: &Node) -> i64 {
    node.status
        .as_ref()
        .and_then(|s| s.allocatable.as_ref()?.get("nvidia.com/gpu"))
        .and_then(|q| q.0.parse().ok())
        .unwrap_or(0)
}

/// Empty nodes being deleted while a pending pod would fit on them (by GPUs).
async fn wrongly_emptied(client: &Client) -> Vec<String> {
    let pods: Vec<Pod> = Api::<Pod>::namespaced(client.clone(), NAMESPACE)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let nodes: Vec<Node> = Api::<Node>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let claims: Vec<NodeClaim> = Api::<NodeClaim>::all(client.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let pending: Vec<i64> = pods
        .iter()
        .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none())
        .map(gpus)
        .collect();
    let mut wrong = Vec::new();
    for claim in claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_some())
    {
        let Some(name) = claim.status.as_ref().and_then(|s| s.node_name.clone()) else {
            continue;
        };
        let Some(node) = nodes
            .iter()
            .find(|n| n.metadata.name.as_ref() == Some(&name))
        else {
            continue;
        };
        let on_it = pods
            .iter()
            .any(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()) == Some(&name));
        let free = node_gpus(node);
        if !on_it && free > 0 && pending.iter().any(|g| *g <= free) {
            wrong.push(name);
        }
    }
    wrong
}

/// Connections the controller may hold to the API server: its five clients, and room for one
/// being replaced.
const MAX_API_CONNECTIONS: usize = 8;

async fn gpu_mix(kubeconfig: PathBuf) {
    let client = client(&kubeconfig).await;
    setup(&client).await;
    let pools: Api<NodePool> = Api::all(client.clone());
    apply(&pools, "e2e-gpu", json!({"apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
        "metadata": {"name": "e2e-gpu"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "e2e"},
            "requirements": [
                {"key": "quartermaster.dev/instance-family", "operator": "In", "values": ["g5", "g6", "p4d", "p5"]},
                {"key": "quartermaster.dev/capacity-type", "operator": "In", "values": ["on-demand"]}],
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}},
            "disruption": {"consolidationPolicy": "WhenEmptyOrUnderutilized", "consolidateAfter": "30s",
                "budgets": [{"nodes": "100%"}]}}})).await;
    let ctl = Controller::start_for(&kubeconfig, "mix", KWOK_2S);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    for (gpus, _) in MIX {
        let _ = deployments
            .delete(&format!("mix-{gpus}"), &DeleteParams::default())
            .await;
    }
    for name in ["gpu", "cpu"] {
        let _ = deployments.delete(name, &DeleteParams::default()).await;
    }
    wait_until_no_nodes(&client, &ctl, "leftovers of an earlier run to be gone").await;
    let started = Instant::now();
    for (gpus, replicas) in MIX {
        let name = format!("mix-{gpus}");
        apply(&deployments, &name, deployment(&name, replicas, gpus)).await;
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let mut bound_after = None;
    while started.elapsed() < BIND_TIMEOUT {
        let wrong = wrongly_emptied(&client).await;
        assert!(
            wrong.is_empty(),
            "deleted empty while a pending pod would fit on them: {wrong:?}\ncontroller log:\n{}",
            ctl.log()
                .lines()
                .rev()
                .take(40)
                .collect::<Vec<_>>()
                .join("\n")
        );
        let list = pods.list(&ListParams::default()).await.map(|l| l.items);
        let (total, unbound) = list.as_ref().map_or((0, usize::MAX), |l| {
            (
                l.len(),
                l.iter()
                    .filter(|p| p.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none())
                    .count(),
            )
        });
        if total == 200 && unbound == 0 {
            bound_after = Some(started.elapsed());
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let (claims, nodes) = claims_and_nodes(&client).await;
    let cost: Value = serde_json::from_str(&ctl.get("/cost")).unwrap_or_default();
    let (cpu, rss) = ctl.usage();
    let connections = ctl.api_connections(&kubeconfig);
    println!(
        "W2 mix: all 200 bound after {:?}; {} NodeClaims, {} Nodes, ${:.2}/h; controller {cpu:.1} CPU s, peak RSS {rss:.0} MiB, {connections} connections to the API server",
        bound_after,
        claims.len(),
        nodes.len(),
        cost["cost_per_hour"].as_f64().unwrap_or_default()
    );
    assert!(
        bound_after.is_some(),
        "not every pod bound within {BIND_TIMEOUT:?}\ncontroller log:\n{}",
        ctl.log()
            .lines()
            .rev()
            .take(60)
            .collect::<Vec<_>>()
            .join("\n")
    );
    // One HTTP/2 connection per client (the loop's three, the Lease's, kwok's), however many
    // requests are in flight: HTTP/1.1 held one per request in flight, dozens after a burst.
    assert!(
        connections <= MAX_API_CONNECTIONS,
        "the controller holds {connections} connections to the API server (at most \
         {MAX_API_CONNECTIONS}: its clients should speak HTTP/2)"
    );
    settles(&client, &ctl).await;
    for (gpus, _) in MIX {
        let _ = deployments
            .delete(&format!("mix-{gpus}"), &DeleteParams::default())
            .await;
    }
    wait_until_no_nodes(&client, &ctl, "every NodeClaim and Node to be gone").await;
    ctl.kill_and_clean();
}
