//! CapacityBuffers against the mocked API server: room for the chunks is bought with nothing
//! pending, the status says so by server-side apply, and the RBAC the chart grants covers it.

use serde_json::json;

use super::*;

const GROUP: &str = "autoscaling.x-k8s.io";

fn pod_template(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PodTemplate",
    "metadata": {"name": name, "namespace": "ml"},
    "template": {"spec": {
        "containers": [{"name": "main", "image": "vllm",
            "resources": {"requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
                          "limits": {"nvidia.com/gpu": "1"}}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    }}})
}

fn buffer(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "autoscaling.x-k8s.io/v1alpha1", "kind": "CapacityBuffer",
        "metadata": {"name": name, "namespace": "ml", "generation": 1}, "spec": spec})
}

/// `(type, status, reason)` of each condition of buffer `ml/NAME`, and `status.replicas`.
fn status(api: &FakeApi, name: &str) -> (Vec<(String, String, String)>, Option<u64>) {
    let b = api
        .get(GROUP, "capacitybuffers", &format!("ml/{name}"))
        .expect("the buffer");
    let conditions = b["status"]["conditions"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            (
                c["type"].as_str().unwrap_or_default().to_owned(),
                c["status"].as_str().unwrap_or_default().to_owned(),
                c["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    (conditions, b["status"]["replicas"].as_u64())
}

#[tokio::test(start_paused = true)]
async fn a_buffer_buys_room_for_its_chunks_and_says_so_in_its_status() {
    let api = cluster_with_gpu_pool(&[]);
    api.insert("", "podtemplates", pod_template("gpu-shape"));
    api.insert(
        GROUP,
        "capacitybuffers",
        buffer(
            "warm",
            json!({"podTemplateRef": {"name": "gpu-shape"}, "replicas": 2}),
        ),
    );
    let mut env = Env::new(api);
    env.passes(0, 3).await;
    assert_eq!(
        env.api.list(QM, "nodeclaims").len(),
        2,
        "one node per one-GPU chunk, with no pod pending"
    );
    let (c, replicas) = status(&env.api, "warm");
    assert_eq!(replicas, Some(2));
    assert!(
        c.contains(&(
            "ReadyForProvisioning".into(),
            "True".into(),
            "AttributesSetSuccessfully".into()
        )),
        "{c:?}"
    );
    assert!(
        c.contains(&(
            "Provisioning".into(),
            "True".into(),
            "CapacityProvisioned".into()
        )),
        "{c:?}"
    );
    // Nothing is bought twice over later passes, and nothing is removed as empty.
    env.passes(4, 30).await;
    assert_eq!(env.api.list(QM, "nodeclaims").len(), 2);
    // The room is headroom in cost reports (`/cost`, the per-pod cost metric), not idle.
    crate::fleet::export(&mut env.driver, env.clock.now());
    let held = env.ctx.headroom.get();
    assert_eq!(held.len(), 2, "{held:?}");
    assert!(
        held.iter().all(|p| p.workload == "CapacityBuffer/warm"),
        "{held:?}"
    );
    let (nodes, mut pods) = crate::fleet::usage(
        &env.ctx.stores.node_claims.state(),
        &env.ctx.stores.pods.state(),
        &env.ctx.catalog,
    );
    pods.extend(held);
    let cost = quartermaster_cost::fleet_cost(&nodes, &pods, env.clock.now());
    assert!(cost.by_namespace.contains_key("ml"), "{cost:?}");

    assert_rbac_allows_every_call(&env.api);
}

#[tokio::test(start_paused = true)]
async fn a_buffer_that_cannot_be_served_says_why_and_buys_nothing() {
    let api = cluster_with_gpu_pool(&[]);
    api.insert(
        GROUP,
        "capacitybuffers",
        buffer(
            "standby",
            json!({"podTemplateRef": {"name": "missing"}, "replicas": 1}),
        ),
    );
    let mut env = Env::new(api);
    env.passes(0, 3).await;
    assert!(env.api.list(QM, "nodeclaims").is_empty());
    let (c, replicas) = status(&env.api, "standby");
    assert_eq!(replicas, Some(0));
    assert!(
        c.contains(&(
            "ReadyForProvisioning".into(),
            "False".into(),
            "Error".into()
        )),
        "{c:?}"
    );
}
