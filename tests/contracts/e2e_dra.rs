//! End to end against a real cluster (issue 22): a pod that asks for its GPU only through a
//! ResourceClaimTemplate (one NVIDIA GPU with 40Gi or more of memory) scales a NodePool from
//! zero. The controller plans it by the devices each instance type would publish, the kwok
//! cloud publishes the launched node's predicted ResourceSlice, and the real kube-scheduler
//! allocates the claim and binds the pod there. The test fails unless the pod is bound to a
//! node the controller launched, its claim is allocated on that node by the `gpu.nvidia.com`
//! driver, and the node's type has a GPU with 40Gi or more (g6e here: g6's L4 has 23034Mi).
//!
//! Runs only when `QUARTERMASTER_E2E_KUBECONFIG` names a kubeconfig of a 1.34+ API server with
//! resource.k8s.io/v1 served, like `e2e.rs`, and never at the same time as it.

use std::path::PathBuf;
use std::time::Instant;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod};
use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaim, ResourceClaimTemplate};
use kube::api::{Api, DeleteParams, ListParams};
use quartermaster_policies::NodePool;
use serde_json::json;

use super::e2e::{
    Controller, NAMESPACE, apply, client, on_cluster, setup, wait_for, wait_until_no_nodes,
};

#[test]
fn a_dra_gpu_pod_scales_from_zero_and_the_real_scheduler_allocates_its_claim() {
    on_cluster(dra);
}

async fn dra(kubeconfig: PathBuf) {
    let client = client(&kubeconfig).await;
    setup(&client).await;
    let ctl = Controller::start_for(&kubeconfig, "dra", "launchLatency: {default: 1s}\n");
    let started = Instant::now();

    // The NVIDIA driver's DeviceClass (a cluster with the driver has it; the scheduler needs it).
    let classes: Api<DeviceClass> = Api::all(client.clone());
    apply(&classes, "gpu.nvidia.com", json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression":
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}})).await;
    let pools: Api<NodePool> = Api::all(client.clone());
    apply(&pools, "e2e-dra", json!({"apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
        "metadata": {"name": "e2e-dra"},
        "spec": {"template": {"spec": {
            "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "e2e"},
            "requirements": [
                {"key": "quartermaster.dev/instance-family", "operator": "In", "values": ["g6", "g6e"]},
                {"key": "quartermaster.dev/capacity-type", "operator": "In", "values": ["on-demand"]}],
            "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "15s",
                "budgets": [{"nodes": "100%"}]}}})).await;
    let templates: Api<ResourceClaimTemplate> = Api::namespaced(client.clone(), NAMESPACE);
    apply(&templates, "one-gpu-40gi", json!({
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu-40gi", "namespace": NAMESPACE},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "selectors": [{"cel": {"expression":
                "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"}}]}}]}}}})).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    apply(&deployments, "dra", json!({"apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "dra", "namespace": NAMESPACE},
        "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "dra"}},
            "template": {"metadata": {"labels": {"app": "dra"}}, "spec": {
                "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu-40gi"}],
                "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "1", "memory": "2Gi"},
                        "claims": [{"name": "gpu"}]}}]}}}})).await;

    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    let nodes: Api<Node> = Api::all(client.clone());
    let claims: Api<ResourceClaim> = Api::namespaced(client.clone(), NAMESPACE);
    wait_for(
        "the DRA pod bound and its claim allocated on a node the controller launched",
        Some(&ctl),
        || {
            let (pods, nodes, claims) = (pods.clone(), nodes.clone(), claims.clone());
            async move {
                let list = pods
                    .list(&ListParams::default().labels("app=dra"))
                    .await
                    .map_err(|e| e.to_string())?;
                let pod = list.items.first().ok_or("no pod yet")?;
                let node_name = pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.clone())
                    .ok_or("the pod is not bound yet")?;
                let node = nodes.get(&node_name).await.map_err(|e| e.to_string())?;
                let labels = node.metadata.labels.clone().unwrap_or_default();
                if labels.get("quartermaster.dev/nodepool").map(String::as_str) != Some("e2e-dra") {
                    return Err(format!(
                        "bound to {node_name}, not a node of e2e-dra: {labels:?}"
                    ));
                }
                let claim_name = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.resource_claim_statuses.as_ref())
                    .and_then(|c| c.first())
                    .and_then(|c| c.resource_claim_name.clone())
                    .ok_or("no ResourceClaim generated for the pod yet")?;
                let claim = claims.get(&claim_name).await.map_err(|e| e.to_string())?;
                let results = claim
                    .status
                    .and_then(|s| s.allocation)
                    .and_then(|a| a.devices)
                    .and_then(|d| d.results)
                    .ok_or("the claim is not allocated yet")?;
                let r = results.first().ok_or("an allocation without devices")?;
                if r.driver != "gpu.nvidia.com" || r.pool != node_name {
                    return Err(format!("allocated {r:?}, not a GPU of {node_name}"));
                }
                let instance_type = labels
                    .get("node.kubernetes.io/instance-type")
                    .cloned()
                    .unwrap_or_default();
                if !instance_type.starts_with("g6e.") {
                    return Err(format!("{instance_type} has no GPU with 40Gi or more"));
                }
                println!(
                    "DRA pod bound to {node_name} ({instance_type}), claim {claim_name} allocated \
                     {}/{} in {:.1} s",
                    r.pool,
                    r.device,
                    started.elapsed().as_secs_f64()
                );
                Ok(())
            }
        },
    )
    .await;

    // Clean up: the node goes away empty; the NodePool, template and class go.
    deployments
        .delete("dra", &DeleteParams::default())
        .await
        .expect("delete");
    wait_until_no_nodes(&client, &ctl, "the DRA node to be consolidated away").await;
    let _ = templates
        .delete("one-gpu-40gi", &DeleteParams::default())
        .await;
    let _ = pools.delete("e2e-dra", &DeleteParams::default()).await;
    let _ = classes
        .delete("gpu.nvidia.com", &DeleteParams::default())
        .await;
}
