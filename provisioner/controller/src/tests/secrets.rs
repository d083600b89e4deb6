//! No secret of the cluster's objects reaches anything the controller writes or serves.
//!
//! Canaries go in through every path a secret takes into the controller: an AWSNodeClass's
//! `userData` (and its annotations and tags), a NodePool's annotations, pods' environment
//! values, command-line arguments and annotations, and a cloud whose launch error quotes the
//! request's user data (as EC2 or Compute Engine do when they reject a field). The controller
//! then runs its passes (a launch through the kwok cloud, registration, a failed launch) with
//! every event at TRACE captured in both log formats, and none of these may hold a canary:
//!
//! - the log lines (JSON and text);
//! - every request body sent to the API server (Events, NodeClaims and their status
//!   conditions, Nodes, NodePool status, pod patches);
//! - the Prometheus text of `/metrics`;
//! - `/cost` (JSON and FOCUS CSV), the page `/` and `/status.json`.
//!
//! Not covered here: the process environment's credentials (the CLI's contract test
//! `tests/contracts/secrets.rs` runs the binary with them), the real clouds' SDKs (the same
//! test, against dead endpoints), and the log subscriber's own SDK filter (`quartermaster`'s
//! `logging` module; here the plain `tracing_subscriber` formatters stand in).

use std::io::Write;
use std::sync::{Arc, Mutex};

use http_body_util::BodyExt as _;
use quartermaster_cloud::{
    CloudError, CloudEvent, CloudFuture, CloudProvider, Instance, NodeClassSpec,
};
use quartermaster_pricing::InstanceType;
use tower::ServiceExt as _;
use tracing_subscriber::layer::SubscriberExt as _;

use super::*;

const CANARY_USER_DATA: &str = "CANARY-SECRET-userdata-7f3a91c2e5";
const CANARY_NODECLASS_ANNOTATION: &str = "CANARY-SECRET-ncannotation-3b8e";
const CANARY_NODECLASS_TAG: &str = "CANARY-SECRET-nctag-9d2f";
const CANARY_POOL_ANNOTATION: &str = "CANARY-SECRET-poolannotation-61ac";
const CANARY_ENV: &str = "CANARY-SECRET-podenv-0c4d";
const CANARY_ARG: &str = "CANARY-SECRET-podarg-5e7b";
const CANARY_POD_ANNOTATION: &str = "CANARY-SECRET-podannotation-a1f0";

const CANARIES: [&str; 7] = [
    CANARY_USER_DATA,
    CANARY_NODECLASS_ANNOTATION,
    CANARY_NODECLASS_TAG,
    CANARY_POOL_ANNOTATION,
    CANARY_ENV,
    CANARY_ARG,
    CANARY_POD_ANNOTATION,
];

/// Shared bytes a log formatter writes into.
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

impl Buffer {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// A cluster whose objects carry the canaries: an AWSNodeClass with user data, a NodePool, and
/// a pending 1-GPU pod with secret environment values, arguments and annotations.
fn cluster_with_secrets() -> FakeApi {
    let api = FakeApi::default();
    api.insert(
        QM,
        "awsnodeclasses",
        json!({"apiVersion": "quartermaster.dev/v1", "kind": "AWSNodeClass",
            "metadata": {"name": "default", "annotations": {"ops/note": CANARY_NODECLASS_ANNOTATION}},
            "spec": {"region": "us-east-1", "amiFamily": "AL2023", "instanceProfile": "nodes",
                "subnetSelectorTerms": [{"tags": {"k": "v"}}],
                "securityGroupSelectorTerms": [{"tags": {"k": "v"}}],
                "tags": {"team": CANARY_NODECLASS_TAG},
                "userData": format!("#!/bin/bash\nexport BOOTSTRAP_TOKEN={CANARY_USER_DATA}\n")}}),
    );
    api.insert(
        QM,
        "nodepools",
        json!({"apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
            "metadata": {"name": "gpu", "annotations": {"ops/note": CANARY_POOL_ANNOTATION}},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "default"},
                "requirements": [
                    {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g5.xlarge"]},
                    {"key": "quartermaster.dev/capacity-type", "operator": "In", "values": ["on-demand"]}
                ],
                "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
            }},
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "30s"}}}),
    );
    let mut pod = pending_pod("train", 1);
    pod["metadata"]["annotations"] = json!({"ops/token": CANARY_POD_ANNOTATION});
    pod["spec"]["containers"][0]["args"] = json!([format!("--token={CANARY_ARG}")]);
    pod["spec"]["containers"][0]["env"] = json!([
        {"name": "API_TOKEN", "value": CANARY_ENV},
        {"name": "DB_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}}}
    ]);
    api.insert("", "pods", pod);
    api
}

/// A cloud that rejects every launch quoting the request's user data back, as a cloud API does
/// when it refuses a field; it records that it saw the user data.
struct EchoingCloud {
    saw_user_data: Mutex<bool>,
}

impl CloudProvider for EchoingCloud {
    fn cloud(&self) -> Cloud {
        Cloud::Aws
    }

    fn create<'a>(
        &'a self,
        request: &'a quartermaster_cloud::LaunchRequest,
    ) -> CloudFuture<'a, Instance> {
        Box::pin(async move {
            let user_data = match &request.node_class_spec {
                Some(NodeClassSpec::Aws(spec)) => spec.user_data.clone().unwrap_or_default(),
                _ => String::new(),
            };
            *self.saw_user_data.lock().unwrap() |= user_data.contains(CANARY_USER_DATA);
            Err(CloudError::InvalidRequest {
                message: format!(
                    "InvalidParameterValue: the launch template's user data is not valid: {user_data:?}"
                ),
            })
        })
    }

    fn delete<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, ()> {
        Box::pin(async move {
            Err(CloudError::NotFound {
                provider_id: provider_id.to_owned(),
            })
        })
    }

    fn get<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, Instance> {
        Box::pin(async move {
            Err(CloudError::NotFound {
                provider_id: provider_id.to_owned(),
            })
        })
    }

    fn list(&self) -> CloudFuture<'_, Vec<Instance>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn instance_types(&self) -> CloudFuture<'_, Vec<InstanceType>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn is_drifted<'a>(&'a self, _instance: &'a Instance) -> CloudFuture<'a, Option<String>> {
        Box::pin(async { Ok(None) })
    }

    fn poll_events(&self) -> CloudFuture<'_, Vec<CloudEvent>> {
        Box::pin(async { Ok(Vec::new()) })
    }
}

/// Everything the controller served: `/metrics`, `/cost` (JSON, CSV), `/`, `/status.json`.
async fn served(env: &mut Env, seconds: i64) -> Vec<(String, String)> {
    let now = t0() + TimeDelta::seconds(seconds);
    crate::fleet::export(&mut env.driver, now);
    crate::page::record_pass(&env.driver, now);
    let router = crate::http::metrics_router(env.ctx.clone());
    let mut out = Vec::new();
    for path in ["/metrics", "/cost", "/cost?format=csv", "/", "/status.json"] {
        let response = router
            .clone()
            .oneshot(
                axum::http::Request::get(path)
                    .body(axum::body::Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let body = response.into_body().collect().await.unwrap().to_bytes();
        out.push((path.to_owned(), String::from_utf8_lossy(&body).into_owned()));
    }
    out
}

/// Every request body the API server received, as text.
fn written(api: &FakeApi) -> Vec<(String, String)> {
    api.log()
        .iter()
        .map(|r| (r.short(), r.body.to_string()))
        .collect()
}

fn assert_no_canary(what: &str, text: &str) {
    for canary in CANARIES {
        assert!(
            !text.contains(canary),
            "{canary} leaked into {what}:\n{text}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn no_secret_of_the_clusters_objects_reaches_logs_events_writes_metrics_or_cost() {
    let json_log = Buffer::default();
    let text_log = Buffer::default();
    let (json_sink, text_sink) = (json_log.clone(), text_log.clone());
    let subscriber = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .json()
                .flatten_event(true)
                .with_writer(move || json_sink.clone()),
        )
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(false)
                .with_writer(move || text_sink.clone()),
        )
        .with(tracing_subscriber::filter::LevelFilter::TRACE);
    let _guard = tracing::subscriber::set_default(subscriber);

    // A launch through the kwok cloud: the claim, its Node, registration, initialization.
    let api = cluster_with_secrets();
    let mut env = Env::new(api.clone());
    env.passes(0, 3).await;
    let node = api.list("", "nodes")[0]["metadata"]["name"]
        .as_str()
        .expect("the kwok cloud launched a Node")
        .to_owned();
    api.modify(
        "",
        "nodes",
        &node,
        json!({"status": {"allocatable": {"nvidia.com/gpu": "1"}, "capacity": {"nvidia.com/gpu": "1"}}}),
    );
    env.passes(4, 6).await;
    let mut outputs = served(&mut env, 6).await;

    // A cloud that quotes the user data back when it refuses the launch.
    let echo = Arc::new(EchoingCloud {
        saw_user_data: Mutex::new(false),
    });
    let failing = cluster_with_secrets();
    let provider = echo.clone();
    let mut env = Env::with_provider(failing.clone(), Leadership::always(), move |_, _, _| {
        provider as Arc<dyn CloudProvider>
    });
    env.passes(0, 4).await;
    assert!(
        *echo.saw_user_data.lock().unwrap(),
        "the cloud was asked to launch with the NodeClass's user data"
    );
    let failures: Vec<String> = failing
        .log()
        .iter()
        .filter(|r| r.resource == "events" && r.body["reason"] == "LaunchFailed")
        .map(|r| r.body["note"].as_str().unwrap_or_default().to_owned())
        .collect();
    assert!(
        failures
            .iter()
            .any(|n| n.contains("InvalidParameterValue")
                && n.contains(quartermaster_cloud::REDACTED)),
        "a LaunchFailed event with the cloud's words, the user data scrubbed: {failures:?}"
    );
    outputs.extend(served(&mut env, 4).await);

    for (what, text) in written(&api).into_iter().chain(written(&failing)) {
        assert_no_canary(&format!("the API request {what}"), &text);
    }
    for (path, body) in &outputs {
        assert_no_canary(path, body);
    }
    for claim in api
        .list(QM, "nodeclaims")
        .iter()
        .chain(&failing.list(QM, "nodeclaims"))
    {
        assert_no_canary("a NodeClaim", &claim.to_string());
    }
    let (json_text, plain_text) = (json_log.text(), text_log.text());
    assert!(json_text.contains("launch failed"), "{json_text}");
    assert!(plain_text.contains("launched"), "{plain_text}");
    assert_no_canary("the JSON log", &json_text);
    assert_no_canary("the text log", &plain_text);
}
