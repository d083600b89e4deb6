//! End to end against a real cluster: the controller killed with SIGKILL (`kill -9`) at each
//! step of a NodeClaim's life, and started again. After every restart the cluster must come
//! clean: exactly one Node per NodeClaim (no duplicate, no orphan), every NodeClaim launched, no
//! finalizer stuck on a deleting NodeClaim, every pod bound to a node the controller launched.
//!
//! The steps: after a NodeClaim is created and before its launch returned; after the launch,
//! before the Node registered; after registration, before the GPUs appeared; in the middle of a
//! gang's launch (a coscheduling PodGroup of three GPU pods); in the middle of a drain (a
//! NodeClaim a user deleted, its node cordoned); and while holding the lease with a second
//! replica waiting, which must take over. Each kill waits for its step to be visible in the API
//! server; when a step went by faster than the test could see it, the kill comes at the next
//! visible point and the test says so (it never asserts on time).
//!
//! Runs only when `QUARTERMASTER_E2E_KUBECONFIG` names a kubeconfig, one end-to-end test at a
//! time (they share the NodePools).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, GroupVersionKind};
use quartermaster_policies::{NodeClaim, NodePool};
use serde_json::{Value, json};

use super::e2e::{
    Controller, NAMESPACE, apply, claims_and_nodes, client, deployment, on_cluster, scale, setup,
    unbound, wait_for, wait_until_no_nodes,
};

/// How long the test looks for a step before it kills at the next visible point.
const STEP_WINDOW: Duration = Duration::from_secs(60);

#[test]
fn kill_9_at_every_lifecycle_step_leaves_no_duplicate_no_orphan_and_no_stuck_finalizer() {
    on_cluster(restarts);
}

fn condition(claim: &NodeClaim, type_: &str) -> bool {
    claim.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == "True")
    })
}

fn launched(claim: &NodeClaim) -> bool {
    claim
        .status
        .as_ref()
        .and_then(|s| s.provider_id.as_ref())
        .is_some()
}

fn name_of(claim: &NodeClaim) -> String {
    claim.metadata.name.clone().unwrap_or_default()
}

/// Waits until `step` holds for some NodeClaim not in `seen` (polled every 100 ms), then kills
/// the controller with SIGKILL. Returns whether the step was seen (else the kill came when the
/// window ran out) and what the cluster looked like.
async fn kill_at<F>(client: &Client, ctl: Controller, what: &str, seen: &[String], step: F) -> bool
where
    F: Fn(&NodeClaim, &[Node]) -> bool,
{
    let start = Instant::now();
    let hit = loop {
        let (claims, nodes) = claims_and_nodes(client).await;
        if claims
            .iter()
            .filter(|c| !seen.contains(&name_of(c)))
            .any(|c| step(c, &nodes))
        {
            break true;
        }
        if start.elapsed() > STEP_WINDOW {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    ctl.kill();
    println!(
        "kill -9 {}: {what}",
        if hit {
            "at the step"
        } else {
            "after the window (step not seen)"
        }
    );
    hit
}

async fn claim_names(client: &Client) -> Vec<String> {
    claims_and_nodes(client)
        .await
        .0
        .iter()
        .map(name_of)
        .collect()
}

/// The cluster after a restart: one Node per NodeClaim, every NodeClaim launched, none stuck
/// deleting, every pod bound to one of our nodes.
async fn assert_clean(client: &Client, ctl: &Controller, after: &str) {
    wait_for(&format!("a clean cluster after {after}"), Some(ctl), || {
        let client = client.clone();
        async move {
            let (claims, nodes) = claims_and_nodes(&client).await;
            let mut claim_names: Vec<String> = claims.iter().map(name_of).collect();
            let mut node_names: Vec<String> = nodes
                .iter()
                .filter_map(|n| n.metadata.name.clone())
                .collect();
            claim_names.sort();
            node_names.sort();
            if claim_names != node_names {
                return Err(format!("claims {claim_names:?} vs nodes {node_names:?}"));
            }
            if let Some(c) = claims.iter().find(|c| !launched(c)) {
                return Err(format!("{} not launched", name_of(c)));
            }
            if let Some(c) = claims
                .iter()
                .find(|c| c.metadata.deletion_timestamp.is_some())
            {
                return Err(format!("{} still deleting", name_of(c)));
            }
            let left = unbound(&client).await?;
            if !left.is_empty() {
                return Err(format!("unbound: {left:?}"));
            }
            Ok(())
        }
    })
    .await;
    let (claims, _) = claims_and_nodes(client).await;
    println!("clean after {after}: {} NodeClaims", claims.len());
}

/// A minimal coscheduling PodGroup CRD (`scheduling.x-k8s.io/v1alpha1`): the controller reads
/// `spec.minMember`; the schema keeps whatever it is given.
async fn install_pod_group_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    apply(
        &crds,
        "podgroups.scheduling.x-k8s.io",
        json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "podgroups.scheduling.x-k8s.io"},
            "spec": {"group": "scheduling.x-k8s.io", "scope": "Namespaced",
                "names": {"plural": "podgroups", "singular": "podgroup", "kind": "PodGroup"},
                "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object",
                        "x-kubernetes-preserve-unknown-fields": true}}}]}}),
    )
    .await;
    wait_for("the PodGroup CRD to be established", None, || {
        let crds = crds.clone();
        async move {
            let got = crds
                .get("podgroups.scheduling.x-k8s.io")
                .await
                .map_err(|e| e.to_string())?;
            let ok = got
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            if ok {
                Ok(())
            } else {
                Err("not established".into())
            }
        }
    })
    .await;
}

fn pod_groups(client: &Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("scheduling.x-k8s.io", "v1alpha1", "PodGroup");
    let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, "podgroups");
    Api::namespaced_with(client.clone(), NAMESPACE, &resource)
}

/// Three 1-GPU pods of one gang (PodGroup `train`, `minMember: 3`).
fn gang_deployment() -> Value {
    let mut d = deployment("r-gang", 3, 1);
    d["spec"]["template"]["metadata"]["labels"]["scheduling.x-k8s.io/pod-group"] = json!("train");
    d
}

async fn cleanup(client: &Client) {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    for name in ["r-gpu", "r-gang", "gpu", "cpu"] {
        let _ = deployments.delete(name, &DeleteParams::default()).await;
    }
    let _ = pod_groups(client)
        .delete("train", &DeleteParams::default())
        .await;
}

async fn restarts(kubeconfig: PathBuf) {
    let client = client(&kubeconfig).await;
    setup(&client).await;
    install_pod_group_crd(&client).await;
    let dir =
        std::env::temp_dir().join(format!("quartermaster-e2e-restarts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Launches take 3 s and GPUs appear 4 s after the Node: each step lasts long enough to be
    // seen.
    let kwok = dir.join("kwok.yaml");
    std::fs::write(
        &kwok,
        "launchLatency: {default: 3s}\ndevicePluginDelay: {default: 4s}\n",
    )
    .unwrap();
    let log = dir.join("controller.log");
    let start = |log: &Path| Controller::start(&kubeconfig, &kwok, log.to_path_buf());
    let ctl = start(&log);
    cleanup(&client).await;
    wait_until_no_nodes(&client, &ctl, "leftovers of an earlier run to be gone").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let mut steps_seen = 0;

    // 1. After the NodeClaim is created, before its launch returned.
    apply(&deployments, "r-gpu", deployment("r-gpu", 1, 1)).await;
    let seen = claim_names(&client).await;
    steps_seen += usize::from(
        kill_at(
            &client,
            ctl,
            "NodeClaim created, launch under way",
            &seen,
            |c, _| !launched(c),
        )
        .await,
    );
    let ctl = start(&log);
    assert_clean(&client, &ctl, "a kill before the launch returned").await;

    // 2. After the launch, before the Node registered.
    let seen = claim_names(&client).await;
    scale(&client, "r-gpu", 2).await;
    steps_seen += usize::from(
        kill_at(
            &client,
            ctl,
            "launched, Node not registered",
            &seen,
            |c, nodes| {
                let node_exists = nodes
                    .iter()
                    .any(|n| n.metadata.name.as_deref() == c.metadata.name.as_deref());
                (launched(c) || node_exists) && !condition(c, "Registered")
            },
        )
        .await,
    );
    let ctl = start(&log);
    assert_clean(&client, &ctl, "a kill after the launch").await;

    // 3. After registration, before the GPUs appeared.
    let seen = claim_names(&client).await;
    scale(&client, "r-gpu", 3).await;
    steps_seen += usize::from(
        kill_at(
            &client,
            ctl,
            "registered, not initialized",
            &seen,
            |c, _| condition(c, "Registered") && !condition(c, "Initialized"),
        )
        .await,
    );
    let ctl = start(&log);
    assert_clean(&client, &ctl, "a kill after registration").await;

    // 4. In the middle of a gang's launch.
    let seen = claim_names(&client).await;
    apply(
        &pod_groups(&client),
        "train",
        json!({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": NAMESPACE},
            "spec": {"minMember": 3}}),
    )
    .await;
    apply(&deployments, "r-gang", gang_deployment()).await;
    steps_seen += usize::from(
        kill_at(&client, ctl, "gang launch under way", &seen, |c, _| {
            c.metadata
                .labels
                .as_ref()
                .is_some_and(|l| l.contains_key("quartermaster.dev/gang"))
                && !launched(c)
        })
        .await,
    );
    let ctl = start(&log);
    assert_clean(&client, &ctl, "a kill in the middle of a gang launch").await;

    // 5. In the middle of a drain: a user deletes a NodeClaim whose node runs a pod.
    let (claims, _) = claims_and_nodes(&client).await;
    let victim = claims
        .iter()
        .map(name_of)
        .find(|n| n.starts_with("e2e-gpu"))
        .expect("a GPU NodeClaim");
    let claims_api: Api<NodeClaim> = Api::all(client.clone());
    claims_api
        .delete(&victim, &DeleteParams::default())
        .await
        .expect("deleting a NodeClaim");
    let target = victim.clone();
    steps_seen += usize::from(
        kill_at(
            &client,
            ctl,
            "draining a deleted NodeClaim's node",
            &[],
            move |c, nodes| {
                name_of(c) == target
                    && nodes.iter().any(|n| {
                        n.metadata.name.as_deref() == Some(target.as_str())
                            && n.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
                    })
            },
        )
        .await,
    );
    let ctl = start(&log);
    assert_clean(&client, &ctl, "a kill in the middle of a drain").await;
    assert!(
        !claim_names(&client).await.contains(&victim),
        "the deleted NodeClaim {victim} is gone"
    );

    // 6. The leader dies holding the lease; the replica that waited takes over.
    let standby = Controller::start_as(&kubeconfig, &kwok, dir.join("standby.log"), "e2e-standby");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let seen = claim_names(&client).await;
    scale(&client, "r-gpu", 5).await;
    steps_seen += usize::from(
        kill_at(
            &client,
            ctl,
            "leader launching, standby waiting",
            &seen,
            |c, _| !launched(c),
        )
        .await,
    );
    assert_clean(&client, &standby, "the standby took over the lease").await;
    let metrics = standby.get("/metrics");
    assert!(
        metrics.contains("quartermaster_leader 1"),
        "the standby leads now"
    );
    println!("steps seen at the exact point: {steps_seen} of 6");

    // Everything goes; no finalizer stays behind.
    cleanup(&client).await;
    wait_until_no_nodes(&client, &standby, "every NodeClaim and Node to be gone").await;
    standby.kill();
    let pools: Api<NodePool> = Api::all(client.clone());
    let _ = pools.delete("e2e-gpu", &DeleteParams::default()).await;
    let _ = pools.delete("e2e-cpu", &DeleteParams::default()).await;
    let _ = std::fs::remove_dir_all(&dir);
}
