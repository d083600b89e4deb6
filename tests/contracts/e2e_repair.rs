//! End to end against a real cluster: node repair acts on the conditions a node agent publishes.
//! The test flips a kwok node's `AcceleratedHardwareReady` condition to `False` the way the EKS
//! node monitoring agent does (`NvidiaXID79Error`, a GPU fallen off the bus, dated 20 minutes
//! ago so it is already past its 10-minute toleration), and expects the controller to replace
//! the node: its NodeClaim goes, a new node comes, the pod binds again, and the old node's
//! `Repairing` event names the condition.
//!
//! Runs only when `QUARTERMASTER_E2E_KUBECONFIG` names a kubeconfig, like `e2e.rs`, and never
//! at the same time as it (they share the cluster's NodePools).

use std::path::PathBuf;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Event, Node};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use super::e2e::{
    Controller, KWOK_2S, NAMESPACE, apply, claims_and_nodes, client, deployment, on_cluster, setup,
    wait_all_bound, wait_for, wait_until_no_nodes,
};

#[test]
fn a_node_whose_gpu_fell_off_the_bus_is_replaced_and_its_pod_binds_again() {
    on_cluster(repair);
}

async fn repair(kubeconfig: PathBuf) {
    let client = client(&kubeconfig).await;
    setup(&client).await;
    let ctl = Controller::start_for(&kubeconfig, "repair", KWOK_2S);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let _ = deployments.delete("repair", &DeleteParams::default()).await;
    wait_until_no_nodes(&client, &ctl, "leftovers of an earlier run to be gone").await;
    apply(&deployments, "repair", deployment("repair", 1, 1)).await;
    wait_all_bound(&client, &ctl, "the GPU pod bound").await;
    let (_, nodes) = claims_and_nodes(&client).await;
    let broken = nodes
        .iter()
        .find_map(|n| n.metadata.name.clone())
        .expect("a node");

    // The node agent's verdict, as a strategic merge of the status (conditions merge by type,
    // so the kwok kubelet's own conditions stay).
    let since = chrono::Utc::now() - chrono::TimeDelta::minutes(20);
    let node_api: Api<Node> = Api::all(client.clone());
    node_api
        .patch_status(
            &broken,
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {"conditions": [{
                "type": "AcceleratedHardwareReady", "status": "False",
                "reason": "NvidiaXID79Error", "message": "XID 79: GPU has fallen off the bus",
                "lastHeartbeatTime": chrono::Utc::now().to_rfc3339(),
                "lastTransitionTime": since.to_rfc3339()}]}})),
        )
        .await
        .expect("the condition is set");

    wait_for("the broken node to be replaced", Some(&ctl), || {
        let client = client.clone();
        let broken = broken.clone();
        async move {
            let (_, nodes) = claims_and_nodes(&client).await;
            let names: Vec<String> = nodes
                .iter()
                .filter_map(|n| n.metadata.name.clone())
                .collect();
            if names.contains(&broken) || names.is_empty() {
                Err(format!("nodes: {names:?}"))
            } else {
                Ok(())
            }
        }
    })
    .await;
    wait_all_bound(&client, &ctl, "the pod bound again on the new node").await;
    let events: Api<Event> = Api::all(client.clone());
    let repairing: Vec<String> = events
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Repairing"))
        .filter_map(|e| e.message)
        .collect();
    assert!(
        repairing
            .iter()
            .any(|m| m.contains("AcceleratedHardwareReady=False for 10m")),
        "{repairing:?}\ncontroller log:\n{}",
        ctl.log()
    );
    assert!(
        ctl.get("/metrics").contains(
            "quartermaster_repairs_total{condition=\"AcceleratedHardwareReady=False\"} 1"
        ),
        "{}",
        ctl.get("/metrics")
    );
    deployments
        .delete("repair", &DeleteParams::default())
        .await
        .expect("delete the deployment");
    wait_until_no_nodes(&client, &ctl, "every NodeClaim and Node to be gone").await;
    ctl.kill();
}
