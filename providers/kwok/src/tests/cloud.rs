//! `KwokCloud` against a mocked API server.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::TimeDelta;
use quartermaster_cloud::{CloudError, CloudEvent, CloudProvider, InstanceState};
use quartermaster_pricing::CapacityType;
use quartermaster_sim::{CapacityLimit, CapacityOutage, LatencyTable};
use serde_json::{Value, json};

use super::fixtures::{at, clock, cloud, cpu_request, gpu_request, kwok_node, t0};
use super::mock::{expect, finish, serve, status};
use crate::KwokConfig;

const NODES: &str = "/api/v1/nodes";
const GPU_NODE: &str = "/api/v1/nodes/gpu-abc12";
/// The ResourceSlice of the g5.xlarge's A10G (driver `gpu.nvidia.com`).
const GPU_SLICE: &str = "/apis/resource.k8s.io/v1/resourceslices/gpu-abc12-gpu-nvidia-com";

fn labels_of(body: &Value) -> BTreeMap<String, String> {
    serde_json::from_value(body["metadata"]["labels"].clone()).expect("labels")
}

#[tokio::test]
async fn create_makes_one_node_with_every_label_the_taint_the_provider_id_and_a_status() {
    let (client, server) = serve(vec![
        expect("GET", GPU_NODE).not_found(),
        expect("POST", NODES)
            .body(|b| {
                assert_eq!(b["metadata"]["name"], "gpu-abc12");
                assert_eq!(b["spec"]["providerID"], "kwok://gpu-abc12");
                assert_eq!(
                    b["spec"]["taints"],
                    json!([{ "key": "quartermaster.dev/unregistered", "effect": "NoSchedule" }])
                );
                let want: BTreeMap<String, String> = [
                    ("node.kubernetes.io/instance-type", "g5.xlarge"),
                    ("topology.kubernetes.io/zone", "us-east-1a"),
                    ("topology.kubernetes.io/region", "us-east-1"),
                    ("quartermaster.dev/capacity-type", "on-demand"),
                    ("kubernetes.io/arch", "amd64"),
                    ("kubernetes.io/os", "linux"),
                    ("kubernetes.io/hostname", "gpu-abc12"),
                    ("quartermaster.dev/cloud", "aws"),
                    ("quartermaster.dev/nodepool", "gpu"),
                    ("quartermaster.dev/nodeclaim", "gpu-abc12"),
                    ("quartermaster.dev/kwok", "true"),
                    ("quartermaster.dev/instance-family", "g5"),
                    ("quartermaster.dev/instance-cpu", "4"),
                    ("quartermaster.dev/instance-memory", "16384"),
                    ("quartermaster.dev/instance-network-bandwidth", "2500"),
                    ("quartermaster.dev/instance-local-nvme", "250"),
                    ("quartermaster.dev/instance-gpu-manufacturer", "nvidia"),
                    ("quartermaster.dev/instance-gpu-name", "a10g"),
                    ("quartermaster.dev/instance-gpu-count", "1"),
                    ("quartermaster.dev/instance-gpu-memory", "22888"),
                    ("quartermaster.dev/instance-category", "g"),
                    ("quartermaster.dev/instance-generation", "5"),
                    ("quartermaster.dev/instance-size", "xlarge"),
                    ("quartermaster.dev/instance-hypervisor", "nitro"),
                    ("quartermaster.dev/instance-gpu-product", "NVIDIA-A10G"),
                    ("quartermaster.dev/instance-gpu-family", "ampere"),
                    ("team", "ml"),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
                assert_eq!(labels_of(b), want);
                let a = &b["metadata"]["annotations"];
                assert_eq!(a["kwok.x-k8s.io/node"], "fake");
                assert_eq!(a["kwok.quartermaster.dev/devices"], "nvidia.com/gpu");
                assert_eq!(
                    a["kwok.quartermaster.dev/devices-ready-at"],
                    "2026-01-01T00:00:05Z"
                );
                assert_eq!(a["kwok.quartermaster.dev/price-per-hour"], "1.006");
                assert_eq!(a["kwok.quartermaster.dev/launched-at"], "2026-01-01T00:00:00Z");
                let capacity: Value =
                    serde_json::from_str(a["kwok.quartermaster.dev/capacity"].as_str().unwrap())
                        .unwrap();
                assert_eq!(capacity["nvidia.com/gpu"], "1");
                assert!(b.get("status").is_none_or(Value::is_null), "status goes through /status");
            })
            .echo(),
        expect("PATCH", "/api/v1/nodes/gpu-abc12/status")
            .body(|b| {
                let s = &b["status"];
                assert_eq!(
                    s["capacity"],
                    json!({ "cpu": "4", "memory": "17179869184", "pods": "58", "ephemeral-storage": "250000000000" }),
                    "no GPU before the device plugin reports"
                );
                assert!(s["allocatable"].get("nvidia.com/gpu").is_none());
                assert_eq!(s["allocatable"]["pods"], "58");
                let ready = s["conditions"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|c| c["type"] == "Ready")
                    .expect("Ready condition");
                assert_eq!(ready["status"], "True");
                assert_eq!(ready["lastHeartbeatTime"], "2026-01-01T00:00:00Z");
                assert_eq!(s["nodeInfo"]["kubeletVersion"], "v1.34.0-kwok");
                assert_eq!(s["nodeInfo"]["architecture"], "amd64");
                assert_eq!(s["nodeInfo"]["operatingSystem"], "linux");
                assert_eq!(
                    s["addresses"],
                    json!([{ "type": "Hostname", "address": "gpu-abc12" }])
                );
            })
            .echo(),
        // The A10G, as the NVIDIA DRA driver would publish it, owned by the Node.
        expect("PATCH", GPU_SLICE)
            .query("fieldManager=quartermaster-kwok")
            .query("force=true")
            .body(|b| {
                assert_eq!(b["spec"]["driver"], "gpu.nvidia.com");
                assert_eq!(b["spec"]["nodeName"], "gpu-abc12");
                assert_eq!(b["spec"]["devices"].as_array().map(Vec::len), Some(1));
                assert_eq!(b["metadata"]["ownerReferences"][0]["uid"], "uid-created");
            })
            .echo(),
    ]);
    let kwok = cloud(client, KwokConfig::default(), clock());
    let instance = kwok.create(&gpu_request()).await.expect("launched");
    assert_eq!(instance.provider_id, "kwok://gpu-abc12");
    assert_eq!(instance.claim_name, "gpu-abc12");
    assert_eq!(instance.instance_type, "g5.xlarge");
    assert_eq!(instance.zone, "us-east-1a");
    assert_eq!(instance.capacity_type, CapacityType::OnDemand);
    assert_eq!(instance.price_per_hour, 1.006);
    assert_eq!(instance.state, InstanceState::Running);
    assert_eq!(instance.launched_at, t0());
    assert_eq!(instance.tags, gpu_request().tags);
    drop(kwok);
    finish(server).await;
}

#[tokio::test]
async fn create_is_idempotent_on_the_claim_name() {
    let existing = kwok_node(&gpu_request(), at(-60));
    let (client, server) = serve(vec![
        expect("GET", GPU_NODE).respond(200, existing),
        // Its slices are published again (an apply: unchanged if they exist).
        expect("PATCH", GPU_SLICE)
            .body(|b| assert_eq!(b["metadata"]["ownerReferences"][0]["uid"], "uid-gpu-abc12"))
            .echo(),
    ]);
    let kwok = cloud(client, KwokConfig::default(), clock());
    let instance = kwok
        .create(&gpu_request())
        .await
        .expect("the existing node");
    assert_eq!(instance.provider_id, "kwok://gpu-abc12");
    assert_eq!(instance.launched_at, at(-60));
    drop(kwok);
    finish(server).await; // no POST
}

#[tokio::test]
async fn a_node_of_the_claim_name_that_is_not_ours_is_an_invalid_request() {
    let foreign =
        json!({ "apiVersion": "v1", "kind": "Node", "metadata": { "name": "gpu-abc12" } });
    let (client, server) = serve(vec![expect("GET", GPU_NODE).respond(200, foreign)]);
    let kwok = cloud(client, KwokConfig::default(), clock());
    let err = kwok.create(&gpu_request()).await.unwrap_err();
    assert!(matches!(err, CloudError::InvalidRequest { .. }), "{err:?}");
    drop(kwok);
    finish(server).await;
}

#[tokio::test]
async fn an_outage_window_refuses_new_launches_without_any_api_call() {
    let config: KwokConfig = KwokConfig::parse(
        "kwok.yaml",
        "insufficientCapacity: [{ instanceType: g5.xlarge, zone: us-east-1a, from: 0s, until: 10m }]",
    )
    .unwrap();
    let (client, server) = serve(vec![]);
    let clock = clock();
    let kwok = cloud(client, config, clock.clone());
    let err = kwok.create(&gpu_request()).await.unwrap_err();
    match &err {
        CloudError::InsufficientCapacity {
            instance_type,
            zone,
            capacity_type,
            message,
        } => {
            assert_eq!(
                (instance_type.as_str(), zone.as_str(), *capacity_type),
                ("g5.xlarge", "us-east-1a", CapacityType::OnDemand)
            );
            assert!(message.contains("insufficientCapacity[0]"), "{message}");
        }
        other => panic!("expected insufficient capacity, got {other:?}"),
    }
    assert!(err.is_capacity());
    // instance_types reports the offering unavailable during the window, and only it.
    let offering = |kwok: &crate::KwokCloud, zone: &str| {
        let types = futures::executor::block_on(kwok.instance_types()).unwrap();
        let g5 = types.into_iter().find(|t| t.name == "g5.xlarge").unwrap();
        g5.offerings
            .into_iter()
            .find(|o| o.zone == zone && o.capacity_type == CapacityType::OnDemand)
            .unwrap()
            .available
    };
    assert!(!offering(&kwok, "us-east-1a"));
    assert!(offering(&kwok, "us-east-1b"));
    clock.advance(TimeDelta::minutes(10));
    assert!(offering(&kwok, "us-east-1a"), "the window has closed");
    drop(kwok);
    finish(server).await;
}

#[tokio::test]
async fn unknown_types_and_offerings_are_invalid_requests_without_any_api_call() {
    let (client, server) = serve(vec![]);
    let kwok = cloud(client, KwokConfig::default(), clock());
    let mut r = gpu_request();
    r.instance_type = "g5.huge".to_owned();
    let err = kwok.create(&r).await.unwrap_err();
    assert!(matches!(err, CloudError::InvalidRequest { .. }), "{err:?}");
    let mut r = gpu_request();
    r.zone = "eu-west-1a".to_owned();
    let err = kwok.create(&r).await.unwrap_err();
    assert!(matches!(err, CloudError::InvalidRequest { .. }), "{err:?}");
    drop(kwok);
    finish(server).await;
}

#[tokio::test]
async fn a_full_capacity_limit_refuses_with_insufficient_capacity() {
    let config = KwokConfig {
        capacity: vec![CapacityLimit {
            instance_type: None,
            family: Some("g5".to_owned()),
            zone: None,
            capacity_type: None,
            max: 1,
        }],
        ..KwokConfig::default()
    };
    let mut other = gpu_request();
    other.claim_name = "gpu-other".to_owned();
    other.zone = "us-east-1b".to_owned();
    let (client, server) = serve(vec![
        expect("GET", GPU_NODE).not_found(),
        expect("GET", NODES)
            .query("labelSelector=quartermaster.dev%2Fkwok%3Dtrue%2Cquartermaster.dev%2Fcloud%3Daws")
            .respond(
                200,
                json!({ "apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": [kwok_node(&other, at(-5))] }),
            ),
        // A CPU type is not limited: no list, straight to the create.
        expect("GET", "/api/v1/nodes/cpu-xyz89").not_found(),
        expect("POST", NODES).echo(),
        expect("PATCH", "/api/v1/nodes/cpu-xyz89/status").echo(),
    ]);
    let kwok = cloud(client, config, clock());
    let err = kwok.create(&gpu_request()).await.unwrap_err();
    match err {
        CloudError::InsufficientCapacity { message, .. } => {
            assert!(message.contains("capacity[0] of 1 nodes"), "{message}")
        }
        other => panic!("expected insufficient capacity, got {other:?}"),
    }
    let cpu = kwok.create(&cpu_request()).await.expect("launched");
    assert_eq!(cpu.provider_id, "kwok://cpu-xyz89");
    drop(kwok);
    finish(server).await;
}

#[tokio::test(start_paused = true)]
async fn create_waits_the_launch_latency_of_the_family_before_the_node_appears() {
    let config = KwokConfig {
        launch_latency: LatencyTable::uniform(Duration::from_secs(1))
            .with_family("g5", Duration::from_secs(40)),
        ..KwokConfig::default()
    };
    let (client, server) = serve(vec![
        expect("GET", GPU_NODE).not_found(),
        expect("POST", NODES).echo(),
        expect("PATCH", "/api/v1/nodes/gpu-abc12/status").echo(),
        expect("PATCH", GPU_SLICE).echo(),
    ]);
    let kwok = cloud(client, config, clock());
    // Tokio's paused clock: the latency passes instantly, but it is measured in virtual time.
    let started = tokio::time::Instant::now();
    kwok.create(&gpu_request()).await.expect("launched");
    assert!(started.elapsed() >= Duration::from_secs(40));
    drop(kwok);
    finish(server).await;
}

#[tokio::test]
async fn delete_removes_the_node_and_a_missing_node_is_not_found() {
    let (client, server) = serve(vec![
        expect("GET", GPU_NODE).respond(200, kwok_node(&gpu_request(), t0())),
        expect("DELETE", GPU_NODE)
            .body(|b| assert_eq!(b["preconditions"]["uid"], "uid-gpu-abc12"))
            .respond(200, status(200, "Success")),
        expect("GET", GPU_NODE).not_found(),
        // Gone between the look-up and the delete.
        expect("GET", GPU_NODE).respond(200, kwok_node(&gpu_request(), t0())),
        expect("DELETE", GPU_NODE).not_found(),
    ]);
    let kwok = cloud(client, KwokConfig::default(), clock());
    kwok.delete("kwok://gpu-abc12").await.expect("deleted");
    for _ in 0..2 {
        let err = kwok.delete("kwok://gpu-abc12").await.unwrap_err();
        assert_eq!(
            err,
            CloudError::NotFound {
                provider_id: "kwok://gpu-abc12".to_owned()
            }
        );
    }
    // Not a kwok provider id: nothing to look up.
    let err = kwok.delete("aws:///us-east-1a/i-0abc").await.unwrap_err();
    assert!(matches!(err, CloudError::NotFound { .. }));
    drop(kwok);
    finish(server).await;
}

#[tokio::test]
async fn get_and_list_see_only_this_clouds_kwok_nodes() {
    let mut gcp_node = kwok_node(&cpu_request(), t0());
    gcp_node["metadata"]["labels"]["quartermaster.dev/cloud"] = json!("gcp");
    let list = json!({
        "apiVersion": "v1", "kind": "NodeList", "metadata": {},
        "items": [kwok_node(&gpu_request(), t0()), kwok_node(&cpu_request(), at(1))],
    });
    let (client, server) = serve(vec![
        expect("GET", GPU_NODE).respond(200, kwok_node(&gpu_request(), t0())),
        expect("GET", "/api/v1/nodes/cpu-xyz89").respond(200, gcp_node),
        expect("GET", NODES)
            .query(
                "labelSelector=quartermaster.dev%2Fkwok%3Dtrue%2Cquartermaster.dev%2Fcloud%3Daws",
            )
            .respond(200, list),
        // The GPU node's slices, not published by this process yet (the CPU node has none).
        expect("PATCH", GPU_SLICE).echo(),
    ]);
    let kwok = cloud(client, KwokConfig::default(), clock());
    let i = kwok.get("kwok://gpu-abc12").await.expect("found");
    assert_eq!(
        (i.instance_type.as_str(), i.price_per_hour),
        ("g5.xlarge", 1.006)
    );
    let err = kwok.get("kwok://cpu-xyz89").await.unwrap_err();
    assert!(
        matches!(err, CloudError::NotFound { .. }),
        "another cloud's node"
    );
    let all = kwok.list().await.expect("listed");
    let ids: Vec<&str> = all.iter().map(|i| i.provider_id.as_str()).collect();
    assert_eq!(ids, ["kwok://gpu-abc12", "kwok://cpu-xyz89"]);
    assert!(kwok.is_drifted(&all[0]).await.unwrap().is_none());
    drop(kwok);
    finish(server).await;
}

#[tokio::test]
async fn a_node_deleted_behind_the_providers_back_is_reported_terminated() {
    let empty = json!({ "apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": [] });
    let (client, server) = serve(vec![
        expect("GET", GPU_NODE).not_found(),
        expect("POST", NODES).echo(),
        expect("PATCH", "/api/v1/nodes/gpu-abc12/status").echo(),
        expect("PATCH", GPU_SLICE).echo(),
        expect("GET", NODES).respond(200, empty.clone()),
    ]);
    let kwok = cloud(client, KwokConfig::default(), clock());
    assert_eq!(
        kwok.poll_events().await.unwrap(),
        [],
        "nothing known: no call"
    );
    kwok.create(&gpu_request()).await.expect("launched");
    assert_eq!(
        kwok.poll_events().await.unwrap(),
        [CloudEvent::Terminated {
            provider_id: "kwok://gpu-abc12".to_owned()
        }]
    );
    assert_eq!(kwok.poll_events().await.unwrap(), [], "reported once");
    drop(kwok);
    finish(server).await;
}

#[tokio::test]
async fn api_errors_are_typed() {
    let (client, server) = serve(vec![
        expect("GET", GPU_NODE).respond(429, status(429, "TooManyRequests")),
        expect("GET", GPU_NODE).respond(500, status(500, "InternalError")),
        expect("GET", GPU_NODE).not_found(),
        expect("POST", NODES).respond(422, status(422, "Invalid")),
    ]);
    let kwok = cloud(client, KwokConfig::default(), clock());
    let e = kwok.create(&gpu_request()).await.unwrap_err();
    assert_eq!(e, CloudError::Throttled { retry_after: None });
    let e = kwok.create(&gpu_request()).await.unwrap_err();
    assert!(
        matches!(e, CloudError::Transient { .. }) && e.is_retryable(),
        "{e:?}"
    );
    let e = kwok.create(&gpu_request()).await.unwrap_err();
    assert!(matches!(e, CloudError::InvalidRequest { .. }), "{e:?}");
    drop(kwok);
    finish(server).await;
}

#[test]
fn outages_count_from_the_providers_start() {
    let config = KwokConfig {
        insufficient_capacity: vec![CapacityOutage {
            instance_type: None,
            family: Some("g5".to_owned()),
            zone: None,
            capacity_type: Some(CapacityType::Spot),
            from: Duration::from_secs(60),
            until: Some(Duration::from_secs(120)),
        }],
        ..KwokConfig::default()
    };
    let catalog = quartermaster_pricing::Catalog::embedded();
    let ty = catalog
        .get(quartermaster_pricing::Cloud::Aws, "g5.xlarge")
        .unwrap();
    let spot = crate::config::OfferingRef::new(ty, "us-east-1a", CapacityType::Spot);
    let od = crate::config::OfferingRef::new(ty, "us-east-1a", CapacityType::OnDemand);
    assert_eq!(config.active_outage(&spot, t0(), at(59)), None);
    assert_eq!(config.active_outage(&spot, t0(), at(60)), Some(0));
    assert_eq!(config.active_outage(&od, t0(), at(60)), None);
    assert_eq!(config.active_outage(&spot, t0(), at(120)), None);
}
