//! Shared test inputs: a clock, launch requests, kwok Nodes and pods as the API returns them.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::core::v1::{Node, Pod};
use quartermaster_cloud::{Clock, LaunchRequest, ManualClock};
use quartermaster_pricing::{CapacityType, Catalog, Cloud};
use serde_json::{Value, json};

use crate::node::Launch;
use crate::{KwokCloud, KwokConfig};

/// 2026-01-01T00:00:00Z.
pub(crate) fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_767_225_600, 0).expect("valid time")
}

/// `t0() + secs`.
pub(crate) fn at(secs: i64) -> DateTime<Utc> {
    t0() + TimeDelta::seconds(secs)
}

/// A manual clock at `t0()`.
pub(crate) fn clock() -> Arc<ManualClock> {
    Arc::new(ManualClock::new(t0()))
}

/// A launch of one `g5.xlarge` (one A10G) on demand in us-east-1a for claim `gpu-abc12`.
pub(crate) fn gpu_request() -> LaunchRequest {
    LaunchRequest {
        claim_name: "gpu-abc12".to_owned(),
        node_pool: "gpu".to_owned(),
        node_class: "default".to_owned(),
        instance_type: "g5.xlarge".to_owned(),
        zone: "us-east-1a".to_owned(),
        capacity_type: CapacityType::OnDemand,
        price_per_hour: 1.006,
        labels: BTreeMap::from([
            ("team".to_owned(), "ml".to_owned()),
            ("quartermaster.dev/nodepool".to_owned(), "gpu".to_owned()),
        ]),
        tags: BTreeMap::from([(
            "quartermaster.dev/nodeclaim".to_owned(),
            "gpu-abc12".to_owned(),
        )]),
        fallbacks: Vec::new(),
        node_class_spec: None,
    }
}

/// A launch of one `m6i.large` (CPU only) on demand in us-east-1b for claim `cpu-xyz89`.
pub(crate) fn cpu_request() -> LaunchRequest {
    LaunchRequest {
        claim_name: "cpu-xyz89".to_owned(),
        node_pool: "general".to_owned(),
        instance_type: "m6i.large".to_owned(),
        zone: "us-east-1b".to_owned(),
        price_per_hour: 0.096,
        labels: BTreeMap::new(),
        tags: BTreeMap::new(),
        ..gpu_request()
    }
}

/// An AWS kwok cloud with `config` over `client`, reading time from `clock`.
pub(crate) fn cloud(
    client: kube::Client,
    config: KwokConfig,
    clock: Arc<ManualClock>,
) -> KwokCloud {
    KwokCloud::new(client, Cloud::Aws, Catalog::embedded(), config, clock).expect("valid config")
}

/// The Node the kwok cloud creates for `request` at `launched_at` (devices 5 s later), as the
/// API server returns it: with a uid, a resourceVersion and a creation time.
pub(crate) fn kwok_node(request: &LaunchRequest, launched_at: DateTime<Utc>) -> Value {
    let catalog = Catalog::embedded();
    let ty = catalog
        .get(Cloud::Aws, &request.instance_type)
        .expect("type in catalog");
    let offering = ty
        .offerings
        .iter()
        .find(|o| o.zone == request.zone && o.capacity_type == request.capacity_type)
        .expect("offering in catalog");
    let launch = Launch::new(
        ty,
        offering,
        request,
        launched_at,
        launched_at,
        KwokConfig::DEFAULT_DEVICE_PLUGIN_DELAY,
    );
    let mut node = serde_json::to_value(launch.node()).expect("node JSON");
    node["metadata"]["uid"] = json!(format!("uid-{}", request.claim_name));
    node["metadata"]["resourceVersion"] = json!("7");
    node["metadata"]["creationTimestamp"] = json!(crate::time::rfc3339(launched_at));
    node
}

/// `node` with a status as the kubelet last reported it at `heartbeat`, with capacity and
/// allocatable as reported then.
pub(crate) fn with_status(mut node: Value, heartbeat: DateTime<Utc>) -> Value {
    let n: Node = serde_json::from_value(node.clone()).expect("node");
    let machine = crate::node::Machine::of(&n).expect("kwok annotations");
    let status = crate::node_status::reported_status(&n, Some(&machine), heartbeat);
    node["status"] = serde_json::to_value(status).expect("status JSON");
    node
}

/// A Node object from JSON.
pub(crate) fn node(v: Value) -> Arc<Node> {
    Arc::new(serde_json::from_value(v).expect("node"))
}

/// A pod `ns/name` with one container `main`, bound to `node_name`.
pub(crate) fn pod(name: &str, node_name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": name, "namespace": "team-a", "uid": format!("uid-{name}"),
            "resourceVersion": "3", "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "nodeName": node_name,
            "restartPolicy": "Never",
            "containers": [{ "name": "main", "image": "busybox:1.36" }],
        },
        "status": { "phase": "Pending" },
    })
}

/// A Pod object from JSON.
pub(crate) fn pod_obj(v: Value) -> Arc<Pod> {
    Arc::new(serde_json::from_value(v).expect("pod"))
}

/// The clock as a `dyn Clock`.
pub(crate) fn dyn_clock(c: &Arc<ManualClock>) -> Arc<dyn Clock> {
    c.clone()
}
