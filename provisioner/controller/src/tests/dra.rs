//! Dynamic Resource Allocation (`resource.k8s.io/v1`) against the mocked API server: the DRA
//! kinds are watched where served (a cluster that does not serve them starts as well, without
//! WARN lines), they reach the snapshot with the other objects, and the kwok cloud publishes the
//! launched Node's devices as ResourceSlices so the real scheduler can allocate the claim.

use std::collections::BTreeSet;
use std::io::Write;
use std::sync::{Arc, Mutex};

use http::{Request, Response};
use k8s_openapi::api::core::v1::Pod as KubePod;
use kube::client::Body;
use quartermaster_pricing::Catalog;
use quartermaster_solver::ResourceTable;
use serde_json::json;
use tracing_subscriber::layer::SubscriberExt as _;

use super::*;
use crate::pod_readings::PodReadings;

/// The DeviceClass NVIDIA's GPU DRA driver installs.
fn nvidia_class() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression":
            "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}})
}

/// A ResourceClaimTemplate `ml/one-gpu-20gi`: one NVIDIA GPU with 20Gi of memory or more.
fn one_gpu_template() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu-20gi", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
            "deviceClassName": "gpu.nvidia.com",
            "selectors": [{"cel": {"expression":
                "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('20Gi')) >= 0"}}]}}]}}}})
}

/// A pending pod the scheduler gave up on, asking for its GPU by the template only (no
/// `nvidia.com/gpu` count).
fn dra_pod(name: &str) -> Value {
    let mut pod = pending_pod(name, 0);
    pod["spec"]["containers"][0]["resources"] = json!({
        "requests": {"cpu": "2", "memory": "8Gi"},
        "claims": [{"name": "gpu"}]});
    pod["spec"]["resourceClaims"] =
        json!([{"name": "gpu", "resourceClaimTemplateName": "one-gpu-20gi"}]);
    pod["status"]["conditions"][0]["message"] =
        json!("0/0 nodes are available: cannot allocate all claims");
    pod
}

#[test]
fn pods_naming_claims_are_read_with_the_dra_objects_never_alone() {
    let pod: KubePod = serde_json::from_value(dra_pod("llm-0")).unwrap();
    assert!(!PodReadings::standalone(&pod));
    let plain: KubePod = serde_json::from_value(pending_pod("llm-1", 1)).unwrap();
    assert!(PodReadings::standalone(&plain));
}

#[tokio::test(start_paused = true)]
async fn the_dra_objects_are_handed_to_the_snapshot_each_pass() {
    let api = cluster_with_gpu_pool(&[]);
    api.insert(RESOURCE, "deviceclasses", nvidia_class());
    api.insert(RESOURCE, "resourceclaimtemplates", one_gpu_template());
    // A slice of an existing node is passed; one published for all nodes is not.
    api.insert(
        RESOURCE,
        "resourceslices",
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "node-a-gpu-nvidia-com"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": "node-a",
                "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}]}}),
    );
    api.insert(
        RESOURCE,
        "resourceslices",
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": "fabric"},
            "spec": {"driver": "gpu.nvidia.com", "allNodes": true,
                "pool": {"name": "fabric", "generation": 1, "resourceSliceCount": 1}}}),
    );
    let env = Env::new(api);
    let stores = &env.ctx.stores;
    let objects = crate::dra::objects(
        &stores.device_classes.state(),
        &stores.resource_claims.state(),
        &stores.resource_claim_templates.state(),
        &stores.resource_slices.state(),
    );
    let ids: Vec<String> = objects
        .iter()
        .map(|v| format!("{} {}", v["kind"], v["metadata"]["name"]))
        .collect();
    assert_eq!(
        ids,
        [
            r#""DeviceClass" "gpu.nvidia.com""#,
            r#""ResourceClaimTemplate" "one-gpu-20gi""#,
            r#""ResourceSlice" "node-a-gpu-nvidia-com""#,
        ]
    );
    assert!(
        objects
            .iter()
            .all(|v| v["apiVersion"] == "resource.k8s.io/v1")
    );
    // A pass reads them only when some pod names a claim.
    let pods: Vec<Arc<KubePod>> = vec![Arc::new(
        serde_json::from_value(pending_pod("plain", 1)).unwrap(),
    )];
    assert!(crate::dra::objects_if_claimed(stores, &pods).is_empty());
    let pods: Vec<Arc<KubePod>> = vec![Arc::new(serde_json::from_value(dra_pod("llm-0")).unwrap())];
    assert_eq!(crate::dra::objects_if_claimed(stores, &pods), objects);
}

/// The GPU cluster with a second pool of cheaper T4 machines (16 GB: too small for
/// [`one_gpu_template`]), and `pod` pending.
fn cluster_with_t4_pool(pod: Value) -> FakeApi {
    let api = cluster_with_gpu_pool(&[]);
    api.insert(
        QM,
        "nodepools",
        json!({"apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
            "metadata": {"name": "t4"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "default"},
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g4dn.xlarge"]},
                    {"key": "quartermaster.dev/capacity-type", "operator": "In", "values": ["on-demand"]}
                ],
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
            }}}}),
    );
    api.insert(RESOURCE, "deviceclasses", nvidia_class());
    api.insert(RESOURCE, "resourceclaimtemplates", one_gpu_template());
    api.insert("", "pods", pod);
    api
}

/// The instance type of the one NodeClaim launched, and its name.
fn launched_type(api: &FakeApi) -> (String, String) {
    let claims = api.list(QM, "nodeclaims");
    assert_eq!(claims.len(), 1, "one pod, one claim: {claims:#?}");
    let meta = &claims[0]["metadata"];
    (
        meta["labels"]["node.kubernetes.io/instance-type"]
            .as_str()
            .unwrap()
            .to_owned(),
        meta["name"].as_str().unwrap().to_owned(),
    )
}

#[tokio::test(start_paused = true)]
async fn a_pending_pod_with_a_claim_template_gets_a_gpu_node_that_publishes_its_devices() {
    // Without its claim the pod fits the cheapest type, the T4's.
    let mut plain = dra_pod("llm-0");
    plain["spec"]["resourceClaims"].take();
    plain["spec"]["containers"][0]["resources"]["claims"].take();
    let mut env = Env::new(cluster_with_t4_pool(plain));
    env.passes(0, 3).await;
    assert_eq!(launched_type(&env.api).0, "g4dn.xlarge");

    // With it, only an NVIDIA GPU of 20Gi or more will do: an A10G.
    let mut env = Env::new(cluster_with_t4_pool(dra_pod("llm-0")));
    env.passes(0, 3).await;
    let (ty, name) = launched_type(&env.api);
    let name = name.as_str();
    assert!(
        ty.starts_with("g5."),
        "a type of the pool with an NVIDIA GPU of 20Gi or more: {ty}"
    );
    // The kwok cloud launched the Node and published its GPU for the scheduler.
    let node = env.api.get("", "nodes", name).expect("the Node");
    let slice = env
        .api
        .get(
            RESOURCE,
            "resourceslices",
            &format!("{name}-gpu-nvidia-com"),
        )
        .expect("the Node's ResourceSlice");
    assert_eq!(slice["spec"]["nodeName"], name);
    assert_eq!(slice["spec"]["driver"], "gpu.nvidia.com");
    assert_eq!(
        slice["metadata"]["ownerReferences"][0]["uid"],
        node["metadata"]["uid"]
    );
    assert!(
        slice["spec"]["devices"][0]["attributes"]["productName"]["string"]
            .as_str()
            .is_some_and(|p| p.contains("A10G")),
        "{slice}"
    );
    assert_rbac_allows_every_call(&env.api);
}

#[test]
fn a_pod_with_a_claim_template_is_read_into_a_gpu_request() {
    let pod: Arc<KubePod> = Arc::new(serde_json::from_value(dra_pod("llm-0")).unwrap());
    let objects = vec![nvidia_class(), one_gpu_template()];
    let observed = crate::translate::observe_with_requests(
        &[pod],
        &BTreeSet::new(),
        &[],
        Vec::new(),
        Vec::new(),
        objects,
        &Catalog::embedded(),
        &ResourceTable::default(),
        None,
    );
    assert!(observed.rejected.is_empty(), "{:?}", observed.rejected);
    let (_, read) = observed.pods.iter().next().expect("the pod is read");
    let gpu = observed
        .setup
        .resources
        .slot("nvidia.com/gpu")
        .expect("the claim's GPU is an accelerator request");
    assert_eq!(read.pod.requests.get(gpu), 1, "{:?}", read.pod);
}

#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An API server that serves everything the controller watches but `resource.k8s.io` (as
/// Kubernetes before 1.34, or one with the DRA APIs switched off): lists are empty, watches
/// stay open, and every `resource.k8s.io` request is a 404.
fn cluster_without_dra() -> (kube::Client, Arc<Mutex<Vec<String>>>) {
    let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    tokio::spawn(async move {
        let mut open_watches = Vec::new();
        while let Some((request, send)) = handle.next_request().await {
            let path = request.uri().path().to_owned();
            let query = request.uri().query().unwrap_or_default().to_owned();
            log.lock().unwrap().push(path.clone());
            if path.starts_with("/apis/resource.k8s.io/") {
                let body = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                    "status": "Failure", "message": "the server could not find the requested resource",
                    "reason": "NotFound", "code": 404});
                send.send_response(
                    Response::builder()
                        .status(404)
                        .body(Body::from(serde_json::to_vec(&body).unwrap()))
                        .unwrap(),
                );
            } else if query.contains("watch=true") {
                open_watches.push(send);
            } else {
                let body = json!({"kind": "List", "apiVersion": "v1",
                    "metadata": {"resourceVersion": "1"}, "items": []});
                send.send_response(
                    Response::builder()
                        .body(Body::from(serde_json::to_vec(&body).unwrap()))
                        .unwrap(),
                );
            }
        }
    });
    (kube::Client::new(service, "default"), seen)
}

#[tokio::test(start_paused = true)]
async fn a_cluster_without_resource_k8s_io_starts_and_says_so_once_without_warnings() {
    let log = Buffer::default();
    let sink = log.clone();
    let subscriber = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .json()
                .flatten_event(true)
                .with_writer(move || sink.clone()),
        )
        .with(tracing_subscriber::filter::LevelFilter::INFO);
    let _guard = tracing::subscriber::set_default(subscriber);

    let (client, seen) = cluster_without_dra();
    let (stores, watching) = Stores::start(&client);
    let run = tokio::spawn(watching);
    for _ in 0..100 {
        if stores.synced() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        stores.synced(),
        "every store synced though resource.k8s.io is not served"
    );
    assert!(stores.device_classes.state().is_empty());
    assert!(stores.resource_slices.state().is_empty());
    // Ten minutes on: looked for again every few minutes, not every second.
    tokio::time::sleep(std::time::Duration::from_secs(600)).await;
    run.abort();

    let lines: Vec<Value> = String::from_utf8_lossy(&log.0.lock().unwrap())
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let warnings: Vec<&Value> = lines.iter().filter(|l| l["level"] == "WARN").collect();
    assert!(warnings.is_empty(), "{warnings:#?}");
    for kind in [
        "DeviceClass",
        "ResourceClaim",
        "ResourceClaimTemplate",
        "ResourceSlice",
    ] {
        let said = lines
            .iter()
            .filter(|l| l["kind"] == kind && l["level"] == "INFO")
            .count();
        assert_eq!(said, 1, "{kind} not served is said once: {lines:#?}");
    }
    let dra_requests = seen
        .lock()
        .unwrap()
        .iter()
        .filter(|p| p.starts_with("/apis/resource.k8s.io/"))
        .count();
    assert!(
        dra_requests <= 4 * 3,
        "each DRA kind looked for at most once per 5 minutes: {dra_requests}"
    );
}
