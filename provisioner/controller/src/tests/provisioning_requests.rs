//! ProvisioningRequests against the mocked API server: a best-effort-atomic request gets all its
//! nodes and `Provisioned=True` once they registered; the capacity it booked is not found again
//! by a check-capacity request; conditions are written by server-side apply on the status
//! subresource, with the RBAC the chart grants.

use serde_json::json;

use super::*;

const GROUP: &str = "autoscaling.x-k8s.io";

/// A PodTemplate as Kueue creates it: one GPU per pod, tolerating the pool's taint.
fn pod_template(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "PodTemplate",
    "metadata": {"name": name, "namespace": "ml"},
    "template": {"spec": {
        "containers": [{"name": "main", "image": "trainer",
            "resources": {"requests": {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"},
                          "limits": {"nvidia.com/gpu": "1"}}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    }}})
}

fn provisioning_request(name: &str, class: &str, template: &str, count: u32) -> Value {
    json!({"apiVersion": "autoscaling.x-k8s.io/v1", "kind": "ProvisioningRequest",
        "metadata": {"name": name, "namespace": "ml", "generation": 1,
                     "creationTimestamp": "2027-01-15T08:00:00Z"},
        "spec": {"provisioningClassName": class,
                 "podSets": [{"podTemplateRef": {"name": template}, "count": count}]}})
}

/// `(type, status, reason)` of each condition of request `ml/NAME`.
fn conditions(api: &FakeApi, name: &str) -> Vec<(String, String, String)> {
    let request = api
        .get(GROUP, "provisioningrequests", &format!("ml/{name}"))
        .expect("the request");
    request["status"]["conditions"]
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
        .collect()
}

fn has(conditions: &[(String, String, String)], type_: &str, status: &str, reason: &str) -> bool {
    conditions
        .iter()
        .any(|(t, s, r)| t == type_ && s == status && r == reason)
}

#[tokio::test(start_paused = true)]
async fn best_effort_atomic_gets_every_node_then_provisioned_and_holds_them() {
    let api = cluster_with_gpu_pool(&[]);
    api.insert("", "podtemplates", pod_template("ppt-train-prov-1-main"));
    api.insert(
        GROUP,
        "provisioningrequests",
        provisioning_request(
            "train-prov-1",
            "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
            "ppt-train-prov-1-main",
            2,
        ),
    );
    let mut env = Env::new(api);
    env.passes(0, 3).await;
    assert_eq!(
        env.api.list(QM, "nodeclaims").len(),
        2,
        "both nodes of the request are bought"
    );
    let c = conditions(&env.api, "train-prov-1");
    assert!(has(&c, "Accepted", "True", "Accepted"), "{c:?}");
    env.passes(4, 8).await;
    let c = conditions(&env.api, "train-prov-1");
    assert!(
        has(&c, "Provisioned", "True", "CapacityIsProvisioned"),
        "{c:?}"
    );
    let patched = env
        .api
        .log()
        .into_iter()
        .find(|r| r.resource == "provisioningrequests/status")
        .expect("a status write");
    assert_eq!(patched.method, "PATCH");

    // The booked GPUs are not found again by a check-capacity request, and nothing is bought.
    env.api
        .insert("", "podtemplates", pod_template("ppt-probe-1-main"));
    env.api.insert(
        GROUP,
        "provisioningrequests",
        provisioning_request(
            "probe-1",
            "check-capacity.autoscaling.x-k8s.io",
            "ppt-probe-1-main",
            1,
        ),
    );
    env.passes(9, 11).await;
    let c = conditions(&env.api, "probe-1");
    assert!(
        has(&c, "Provisioned", "False", "CapacityIsNotFound"),
        "{c:?}"
    );
    assert_eq!(env.api.list(QM, "nodeclaims").len(), 2);

    assert_rbac_allows_every_call(&env.api);
}

#[tokio::test(start_paused = true)]
async fn an_unknown_class_fails_and_buys_nothing() {
    let api = cluster_with_gpu_pool(&[]);
    api.insert("", "podtemplates", pod_template("ppt-q-1-main"));
    api.insert(
        GROUP,
        "provisioningrequests",
        provisioning_request("q-1", "example.com/some-other-class", "ppt-q-1-main", 1),
    );
    let mut env = Env::new(api);
    env.passes(0, 3).await;
    let c = conditions(&env.api, "q-1");
    assert!(
        has(&c, "Failed", "True", "UnsupportedProvisioningClass"),
        "{c:?}"
    );
    assert!(env.api.list(QM, "nodeclaims").is_empty());
}
