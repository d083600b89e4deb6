//! The ResourceSlices a kwok Node publishes, against the mocked API server and as built.

use k8s_openapi::api::core::v1::Node;
use quartermaster_cloud::{CloudProvider, LaunchRequest};
use quartermaster_pricing::{CapacityType, Catalog, Cloud};
use serde_json::{Value, json};

use super::fixtures::{clock, cloud, gpu_request, kwok_node, t0};
use super::mock::{expect, finish, serve, status};
use crate::KwokConfig;
use crate::slices::{MAX_DEVICES_PER_SLICE, resource_slices, slice_name};

/// A launch of one `p4d.24xlarge` (8 × A100 40 GB) on demand for claim `train-p4d`.
fn p4d_request() -> LaunchRequest {
    let catalog = Catalog::embedded();
    let ty = catalog
        .get(Cloud::Aws, "p4d.24xlarge")
        .expect("p4d in the catalog");
    let offering = ty
        .offerings
        .iter()
        .find(|o| o.capacity_type == CapacityType::OnDemand)
        .expect("an on-demand offering");
    LaunchRequest {
        claim_name: "train-p4d".to_owned(),
        instance_type: ty.name.clone(),
        zone: offering.zone.clone(),
        price_per_hour: offering.price_per_hour,
        ..gpu_request()
    }
}

const P4D_SLICE: &str = "/apis/resource.k8s.io/v1/resourceslices/train-p4d-gpu-nvidia-com";

/// Checks the slice body a p4d.24xlarge Node publishes.
fn assert_p4d_slice(b: &Value) {
    assert_eq!(b["apiVersion"], "resource.k8s.io/v1");
    assert_eq!(b["kind"], "ResourceSlice");
    assert_eq!(b["metadata"]["name"], "train-p4d-gpu-nvidia-com");
    assert_eq!(
        b["metadata"]["ownerReferences"],
        json!([{"apiVersion": "v1", "kind": "Node", "name": "train-p4d",
            "uid": "uid-created", "controller": true}]),
        "owned by the Node: deleted with it by the garbage collector"
    );
    assert_eq!(b["metadata"]["labels"]["quartermaster.dev/kwok"], "true");
    let spec = &b["spec"];
    assert_eq!(spec["driver"], "gpu.nvidia.com");
    assert_eq!(spec["nodeName"], "train-p4d");
    assert_eq!(
        spec["pool"],
        json!({"name": "train-p4d", "generation": 1, "resourceSliceCount": 1})
    );
    let devices = spec["devices"].as_array().expect("devices");
    assert_eq!(devices.len(), 8, "{spec}");
    let names: Vec<&str> = devices.iter().filter_map(|d| d["name"].as_str()).collect();
    assert_eq!(
        names,
        [
            "gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"
        ]
    );
    for d in devices {
        let a = &d["attributes"];
        let product = a["productName"]["string"].as_str().unwrap_or_default();
        assert!(product.contains("A100"), "productName {product:?} in {d}");
        assert_eq!(a["type"], json!({"string": "gpu"}), "{d}");
        assert!(
            a["cudaComputeCapability"]["version"].is_string(),
            "versions are published as versions: {d}"
        );
        assert!(
            a["resource.kubernetes.io/pcieRoot"]["string"].is_string(),
            "qualified attribute names are kept as they are: {d}"
        );
        let memory = d["capacity"]["memory"]["value"]
            .as_str()
            .unwrap_or_default();
        assert!(
            memory.ends_with("Gi") || memory.ends_with("Mi"),
            "capacity is a quantity: {d}"
        );
    }
}

#[tokio::test]
async fn a_p4d_node_publishes_its_eight_gpus_in_one_slice_of_the_nvidia_driver() {
    let (client, server) = serve(vec![
        expect("GET", "/api/v1/nodes/train-p4d").not_found(),
        expect("POST", "/api/v1/nodes").echo(),
        expect("PATCH", "/api/v1/nodes/train-p4d/status").echo(),
        expect("PATCH", P4D_SLICE)
            .query("fieldManager=quartermaster-kwok")
            .query("force=true")
            .body(assert_p4d_slice)
            .echo(),
    ]);
    let kwok = cloud(client, KwokConfig::default(), clock());
    let instance = kwok.create(&p4d_request()).await.expect("launched");
    assert_eq!(instance.instance_type, "p4d.24xlarge");
    drop(kwok);
    finish(server).await;
}

#[tokio::test]
async fn a_cluster_without_dra_or_a_failed_publish_does_not_fail_the_launch() {
    let mut second = p4d_request();
    second.claim_name = "train-p4d-2".to_owned();
    // resource.k8s.io/v1 is not served (Kubernetes before 1.34): found once, not asked again.
    let (client, server) = serve(vec![
        expect("GET", "/api/v1/nodes/train-p4d").not_found(),
        expect("POST", "/api/v1/nodes").echo(),
        expect("PATCH", "/api/v1/nodes/train-p4d/status").echo(),
        expect("PATCH", P4D_SLICE).not_found(),
        expect("GET", "/api/v1/nodes/train-p4d-2").not_found(),
        expect("POST", "/api/v1/nodes").echo(),
        expect("PATCH", "/api/v1/nodes/train-p4d-2/status").echo(),
    ]);
    let kwok = cloud(client, KwokConfig::default(), clock());
    kwok.create(&p4d_request()).await.expect("launched");
    kwok.create(&second).await.expect("launched");
    drop(kwok);
    finish(server).await;

    // The API server fails the publish: the launch stands.
    let (client, server) = serve(vec![
        expect("GET", "/api/v1/nodes/train-p4d").not_found(),
        expect("POST", "/api/v1/nodes").echo(),
        expect("PATCH", "/api/v1/nodes/train-p4d/status").echo(),
        expect("PATCH", P4D_SLICE).respond(500, status(500, "InternalError")),
    ]);
    let kwok = cloud(client, KwokConfig::default(), clock());
    kwok.create(&p4d_request()).await.expect("launched");
    drop(kwok);
    finish(server).await;
}

/// A Node named `name`, with a uid, as the API server returns it.
fn node(name: &str) -> Node {
    serde_json::from_value(json!({"metadata": {"name": name, "uid": "u-1"}})).expect("a node")
}

#[test]
fn types_without_accelerators_publish_nothing_and_slices_are_named_per_driver() {
    let catalog = Catalog::embedded();
    let cpu = catalog.get(Cloud::Aws, "m6i.large").expect("m6i.large");
    assert!(resource_slices(&node("n"), cpu).is_empty());
    assert_eq!(
        slice_name("node-a", "gpu.nvidia.com", None),
        "node-a-gpu-nvidia-com"
    );
    assert_eq!(
        slice_name("node-a", "neuron.aws.com", Some(1)),
        "node-a-neuron-aws-com-1"
    );
    let inf2 = catalog
        .get(Cloud::Aws, "inf2.48xlarge")
        .expect("inf2.48xlarge");
    let slices = resource_slices(&node("n"), inf2);
    assert!(!slices.is_empty());
    for s in &slices {
        assert_ne!(s["spec"]["driver"], "gpu.nvidia.com", "{s}");
        assert_eq!(s["spec"]["pool"]["name"], "n");
    }
}

#[test]
fn a_driver_with_more_devices_than_a_slice_holds_takes_several() {
    let catalog = Catalog::embedded();
    let mut big = catalog
        .get(Cloud::Aws, "p4d.24xlarge")
        .expect("p4d")
        .clone();
    let wanted = MAX_DEVICES_PER_SLICE + 2;
    if let Some(a) = big.accelerator.as_mut() {
        a.count = u32::try_from(wanted).expect("small");
    }
    let slices = resource_slices(&node("n"), &big);
    let devices: usize = slices
        .iter()
        .map(|s| s["spec"]["devices"].as_array().map_or(0, Vec::len))
        .sum();
    assert_eq!(devices, wanted);
    let names: Vec<&str> = slices
        .iter()
        .filter_map(|s| s["metadata"]["name"].as_str())
        .collect();
    assert_eq!(names, ["n-gpu-nvidia-com-0", "n-gpu-nvidia-com-1"]);
    for s in &slices {
        assert_eq!(s["spec"]["pool"]["resourceSliceCount"], 2);
    }
}

#[tokio::test]
async fn list_publishes_the_slices_of_nodes_launched_before_a_restart_once() {
    let list = || {
        json!({"apiVersion": "v1", "kind": "NodeList", "metadata": {},
            "items": [kwok_node(&p4d_request(), t0())]})
    };
    let (client, server) = serve(vec![
        expect("GET", "/api/v1/nodes").respond(200, list()),
        expect("PATCH", P4D_SLICE).respond(500, status(500, "InternalError")),
        // Failed: tried again on the next list.
        expect("GET", "/api/v1/nodes").respond(200, list()),
        expect("PATCH", P4D_SLICE)
            .body(|b| {
                assert_eq!(b["metadata"]["ownerReferences"][0]["uid"], "uid-train-p4d");
                assert_eq!(b["spec"]["devices"].as_array().map(Vec::len), Some(8));
            })
            .echo(),
        // Published: not again.
        expect("GET", "/api/v1/nodes").respond(200, list()),
    ]);
    let kwok = cloud(client, KwokConfig::default(), clock());
    for _ in 0..3 {
        assert_eq!(kwok.list().await.expect("listed").len(), 1);
    }
    drop(kwok);
    finish(server).await;
}
