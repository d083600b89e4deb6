//! The kube-scheduler does not read nominations. A stand-in that binds against them on purpose
//! (smallest pods first, onto the node with the most free GPUs) must still leave no pod
//! pending, and no node may go as empty while a pending pod would fit on it.

use std::collections::BTreeMap;

use quartermaster_pricing::{Catalog, Cloud};
use serde_json::json;

use super::*;

/// An on-demand pool of NVIDIA GPU types.
pub(super) fn gpu_mix_cluster(mix: &[(u32, usize)]) -> FakeApi {
    let api = cluster_with_gpu_pool(&[]);
    api.modify(
        QM,
        "nodepools",
        "gpu",
        json!({"spec": {"template": {"spec": {"requirements": [
            {"key": "quartermaster.dev/instance-gpu-manufacturer", "operator": "In", "values": ["nvidia"]},
            {"key": "quartermaster.dev/instance-family", "operator": "In", "values": ["g5", "g6", "p4d", "p5"]},
            {"key": "quartermaster.dev/capacity-type", "operator": "In", "values": ["on-demand"]}
        ]}}}}),
    );
    for (gpus, count) in mix {
        for i in 0..*count {
            api.insert("", "pods", pending_pod(&format!("g{gpus}-{i}"), *gpus));
        }
    }
    api
}

fn gpus_of_pod(pod: &Value) -> i64 {
    pod["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// The device plugin of every node whose GPUs have not appeared yet reports them.
fn devices_appear(api: &FakeApi, catalog: &Catalog) {
    for node in api.list("", "nodes") {
        if node["status"]["allocatable"]["nvidia.com/gpu"].is_string() {
            continue;
        }
        let ty = node["metadata"]["labels"]["node.kubernetes.io/instance-type"]
            .as_str()
            .unwrap_or_default();
        let gpus = catalog
            .get(Cloud::Aws, ty)
            .map_or(0, |t| t.accelerator_count());
        let name = node["metadata"]["name"].as_str().unwrap_or_default();
        api.modify(
            "",
            "nodes",
            name,
            json!({"status": {"allocatable": {"nvidia.com/gpu": gpus.to_string()},
                              "capacity": {"nvidia.com/gpu": gpus.to_string()}}}),
        );
    }
}

/// Binds pending pods against the plan: smallest first, each onto the registered node with the
/// most free GPUs where it fits (nominations ignored). Returns how many it bound.
fn perverse_scheduler(api: &FakeApi) -> usize {
    let pods = api.list("", "pods");
    let mut free: BTreeMap<String, i64> = BTreeMap::new();
    for node in api.list("", "nodes") {
        let registered = node["metadata"]["labels"]["quartermaster.dev/nodepool"].is_string()
            && node["metadata"]["deletionTimestamp"].is_null()
            && !node["spec"]["unschedulable"].as_bool().unwrap_or(false);
        let gpus = node["status"]["allocatable"]["nvidia.com/gpu"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        if registered && gpus > 0 {
            free.insert(node["metadata"]["name"].as_str().unwrap().to_owned(), gpus);
        }
    }
    for pod in &pods {
        if let Some(node) = pod["spec"]["nodeName"].as_str()
            && let Some(f) = free.get_mut(node)
        {
            *f -= gpus_of_pod(pod);
        }
    }
    let mut pending: Vec<&Value> = pods
        .iter()
        .filter(|p| p["spec"]["nodeName"].is_null())
        .collect();
    pending.sort_by_key(|p| gpus_of_pod(p));
    let mut bound = 0;
    for pod in pending {
        let need = gpus_of_pod(pod);
        let best = free
            .iter()
            .filter(|(_, f)| **f >= need)
            .max_by_key(|(n, f)| (**f, std::cmp::Reverse((*n).clone())))
            .map(|(n, _)| n.clone());
        let Some(node) = best else { continue };
        *free.get_mut(&node).unwrap() -= need;
        let name = pod["metadata"]["name"].as_str().unwrap();
        api.modify(
            "",
            "pods",
            &format!("ml/{name}"),
            json!({"spec": {"nodeName": node}, "status": {"phase": "Running", "conditions": []}}),
        );
        bound += 1;
    }
    bound
}

/// What happens between two passes: new nodes' GPUs appear, the stand-in binds what it can and
/// the stores see it. Returns how many pods are still pending.
pub(super) fn bind_cycle(env: &mut Env, catalog: &Catalog) -> usize {
    devices_appear(&env.api, catalog);
    perverse_scheduler(&env.api);
    env.sync();
    env.api
        .list("", "pods")
        .iter()
        .filter(|p| p["spec"]["nodeName"].is_null())
        .count()
}

/// Whether a pending pod would fit on `node` (by GPUs, as the stand-in counts).
fn pending_fits(api: &FakeApi, free_gpus: i64) -> bool {
    api.list("", "pods")
        .iter()
        .any(|p| p["spec"]["nodeName"].is_null() && gpus_of_pod(p) <= free_gpus)
}

#[tokio::test(start_paused = true)]
async fn pods_the_scheduler_put_elsewhere_than_planned_are_solved_again_until_every_one_runs() {
    // The W2 mix: 120 × 1 GPU, 40 × 2, 30 × 4, 10 × 8.
    let mix = [(1, 120), (2, 40), (4, 30), (8, 10)];
    let api = gpu_mix_cluster(&mix);
    let catalog = Catalog::embedded();
    let mut env = Env::new(api);
    let mut second = 0;
    let mut all_bound_at = None;
    while second < 400 {
        env.pass_at(second).await;
        // Nodes whose deletion the controller asked for while a pending pod would fit there.
        for claim in env.api.list(QM, "nodeclaims") {
            if claim["metadata"]["deletionTimestamp"].is_null() {
                continue;
            }
            let node = claim["status"]["nodeName"].as_str().unwrap_or_default();
            let Some(n) = env.api.get("", "nodes", node) else {
                continue;
            };
            let gpus: i64 = n["status"]["allocatable"]["nvidia.com/gpu"]
                .as_str()
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let used: i64 = env
                .api
                .list("", "pods")
                .iter()
                .filter(|p| p["spec"]["nodeName"] == node)
                .map(gpus_of_pod)
                .sum();
            assert!(
                used > 0 || !pending_fits(&env.api, gpus - used),
                "{node} is deleted empty at {second} s while a pending pod would fit on it"
            );
        }
        if bind_cycle(&mut env, &catalog) == 0 {
            all_bound_at = Some(second);
            break;
        }
        second += 1;
    }
    let engine = env.driver.engine().expect("an engine");
    let claims = env.api.list(QM, "nodeclaims");
    eprintln!(
        "all bound at {all_bound_at:?} s; {} solves, {} nominations released, {} claims created, {} live, {} empty deletions",
        engine.stats().solves,
        engine.stats().nominations_released,
        engine.stats().claims_created,
        claims.len(),
        engine.stats().empty_deletions
    );
    assert!(
        all_bound_at.is_some(),
        "pods still pending after {second} s: {:?}",
        engine.waiting().take(5).collect::<Vec<_>>()
    );
    assert!(
        engine.stats().nominations_released > 0,
        "the stand-in did put pods elsewhere than planned"
    );
    // Pending pods were told where they were expected (status.nominatedNodeName).
    assert!(
        env.api
            .log()
            .iter()
            .any(|r| r.resource == "pods/status"
                && r.body["status"]["nominatedNodeName"].is_string()),
        "no nominatedNodeName written"
    );
}
