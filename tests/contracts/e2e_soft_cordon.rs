//! End to end against a real cluster: the soft cordon. One 4-GPU node (g6.12xlarge) holds a
//! 2-GPU pod and two 1-GPU pods; once the 2-GPU pod is gone, the two left need two 1-GPU nodes
//! (2.9 times less than the node costs: short of retirement's cordon, past the soft cordon's
//! ratio of 2), so the node gets `quartermaster.dev/retiring:PreferNoSchedule`. The real
//! kube-scheduler still binds a third 1-GPU pod there, the only node it fits on (nothing new is
//! bought), and with three pods on it the node is worth its price again: the taint comes off.
//!
//! Runs only when `QUARTERMASTER_E2E_KUBECONFIG` names a kubeconfig, like `e2e.rs`, and never
//! at the same time as it (they share the cluster's NodePools).

use std::path::PathBuf;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use super::e2e::{
    Controller, KWOK_2S, NAMESPACE, apply, claims_and_nodes, client, deployment, on_cluster, setup,
    wait_all_bound, wait_for, wait_until_no_nodes,
};

const TAINT: &str = "quartermaster.dev/retiring";

#[test]
fn a_node_worth_less_than_half_its_price_is_soft_cordoned_yet_takes_a_pod_that_fits_nowhere_else() {
    on_cluster(soft_cordon);
}

/// Whether node `name` carries the soft cordon (`None`: no such node).
async fn soft_cordoned(client: &kube::Client, name: &str) -> Option<bool> {
    let nodes: Api<Node> = Api::all(client.clone());
    let node = nodes.get(name).await.ok()?;
    Some(
        node.spec
            .and_then(|s| s.taints)
            .unwrap_or_default()
            .iter()
            .any(|t| t.key == TAINT && t.effect == "PreferNoSchedule"),
    )
}

/// Waits until node `name` carries the soft cordon (`on`) or not.
async fn wait_soft_cordon(
    client: &kube::Client,
    ctl: &Controller,
    name: &str,
    on: bool,
    what: &str,
) {
    wait_for(what, Some(ctl), || {
        let client = client.clone();
        async move {
            match soft_cordoned(&client, name).await {
                Some(tainted) if tainted == on => Ok(()),
                other => Err(format!("tainted: {other:?}")),
            }
        }
    })
    .await;
}

async fn soft_cordon(kubeconfig: PathBuf) {
    let client = client(&kubeconfig).await;
    setup(&client).await;
    let ctl = Controller::start_for(&kubeconfig, "soft", KWOK_2S);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    for name in ["soft-pair", "soft-duo"] {
        let _ = deployments.delete(name, &DeleteParams::default()).await;
    }
    wait_until_no_nodes(&client, &ctl, "leftovers of an earlier run to be gone").await;

    // One batch: a 2-GPU pod and two 1-GPU pods fit one 4-GPU node, the cheapest way.
    apply(&deployments, "soft-duo", deployment("soft-duo", 1, 2)).await;
    apply(&deployments, "soft-pair", deployment("soft-pair", 2, 1)).await;
    wait_all_bound(&client, &ctl, "the three pods bound").await;
    let (claims, nodes) = claims_and_nodes(&client).await;
    assert_eq!(
        (claims.len(), nodes.len()),
        (1, 1),
        "one node for the three pods\ncontroller log:\n{}",
        ctl.log()
    );
    let node = nodes[0].metadata.name.clone().expect("a node name");
    assert_eq!(soft_cordoned(&client, &node).await, Some(false));

    deployments
        .delete("soft-duo", &DeleteParams::default())
        .await
        .expect("delete the 2-GPU deployment");
    wait_soft_cordon(
        &client,
        &ctl,
        &node,
        true,
        "the half-used node to be soft-cordoned",
    )
    .await;
    let unschedulable = Api::<Node>::all(client.clone())
        .get(&node)
        .await
        .ok()
        .and_then(|n| n.spec)
        .and_then(|s| s.unschedulable);
    assert_ne!(unschedulable, Some(true), "soft-cordoned, not cordoned");

    // A third 1-GPU pod: the soft-cordoned node is the only one it fits on, and it binds there.
    deployments
        .patch(
            "soft-pair",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .expect("scale to three");
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    wait_for("the third pod bound", Some(&ctl), || {
        let pods = pods.clone();
        async move {
            let on: Vec<Option<String>> = pods
                .list(&ListParams::default().labels("app=soft-pair"))
                .await
                .map_err(|e| e.to_string())?
                .items
                .into_iter()
                .map(|p| p.spec.and_then(|s| s.node_name))
                .collect();
            if on.len() == 3 && on.iter().all(Option::is_some) {
                Ok(())
            } else {
                Err(format!("bound to: {on:?}"))
            }
        }
    })
    .await;
    let on: Vec<Option<String>> = pods
        .list(&ListParams::default().labels("app=soft-pair"))
        .await
        .expect("list pods")
        .items
        .into_iter()
        .map(|p| p.spec.and_then(|s| s.node_name))
        .collect();
    assert!(on.iter().all(|n| n.as_deref() == Some(&node)), "{on:?}");
    let (claims, _) = claims_and_nodes(&client).await;
    assert_eq!(claims.len(), 1, "nothing bought for the third pod");

    // Three pods need most of the node: the taint comes off.
    wait_soft_cordon(&client, &ctl, &node, false, "the soft cordon to come off").await;

    deployments
        .delete("soft-pair", &DeleteParams::default())
        .await
        .expect("delete the deployment");
    wait_until_no_nodes(&client, &ctl, "every NodeClaim and Node to be gone").await;
    ctl.kill();
}
