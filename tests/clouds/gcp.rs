//! The GCP provider through the real `google-cloud-compute-v1` client (custom endpoint,
//! anonymous credentials, no SDK retries) against our local Compute Engine: launch, get,
//! list, delete; capacity inside a finished operation falls through to the next offering in
//! the same launch; no second instance after a crash; throttling; a dead endpoint; leaks
//! listed by the cluster label; spot preemption as an interruption event.

#[path = "gcp_server.rs"]
pub(crate) mod gcp_server;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use quartermaster_cloud::{
    CloudError, CloudEvent, CloudProvider, InstanceState, LaunchOffering, LaunchRequest,
    NodeClassSpec, SystemClock,
};
use quartermaster_gcp::{GcpCloud, GcpSettings, OperationWait, parse_provider_id};
use quartermaster_policies::GCPNodeClassSpec;
use quartermaster_policies::nodeclass::gcp::GcpImage;
use quartermaster_pricing::{CapacityType, Catalog};

use gcp_server::{Call, GcpServer, HttpFault};

pub(crate) const PROJECT: &str = "test-project";
pub(crate) const ZONE_A: &str = "us-central1-a";
pub(crate) const ZONE_B: &str = "us-central1-b";

pub(crate) fn settings(endpoint: String) -> GcpSettings {
    GcpSettings {
        endpoint: Some(endpoint),
        project: Some(PROJECT.into()),
        anonymous: true,
        sdk_retries: false,
        attempt_timeout: Duration::from_secs(5),
        operation_wait: OperationWait {
            poll_interval: Duration::from_millis(10),
            max_polls: 50,
        },
        ..GcpSettings::new("test-cluster")
    }
}

pub(crate) async fn cloud(endpoint: String) -> GcpCloud {
    GcpCloud::connect(
        settings(endpoint),
        Catalog::embedded(),
        Arc::new(SystemClock),
    )
    .await
    .expect("the SDK client builds")
}

fn spec() -> GCPNodeClassSpec {
    GCPNodeClassSpec {
        project: PROJECT.into(),
        region: "us-central1".into(),
        zones: vec![ZONE_A.into(), ZONE_B.into()],
        image: Some(GcpImage {
            family: Some("cos-stable".into()),
            project: Some("cos-cloud".into()),
            self_link: None,
        }),
        network: None,
        subnetwork: None,
        service_account: None,
        labels: BTreeMap::new(),
        tags: vec![],
        disk: None,
        source_instance_template: Some(format!(
            "projects/{PROJECT}/global/instanceTemplates/gke-test-cluster-gpu-1234"
        )),
        metadata: BTreeMap::from([("team".into(), "ml".into())]),
    }
}

pub(crate) fn offering(t: &str, zone: &str, capacity_type: CapacityType) -> LaunchOffering {
    LaunchOffering {
        instance_type: t.into(),
        zone: zone.into(),
        capacity_type,
        price_per_hour: 1.0,
    }
}

pub(crate) fn request(
    claim: &str,
    primary: LaunchOffering,
    fallbacks: Vec<LaunchOffering>,
) -> LaunchRequest {
    LaunchRequest {
        claim_name: claim.into(),
        node_pool: "gpu".into(),
        node_class: "default".into(),
        instance_type: primary.instance_type,
        zone: primary.zone,
        capacity_type: primary.capacity_type,
        price_per_hour: primary.price_per_hour,
        labels: BTreeMap::new(),
        tags: BTreeMap::new(),
        fallbacks,
        node_class_spec: Some(NodeClassSpec::Gcp(Box::new(spec()))),
    }
}

#[tokio::test]
async fn launch_get_list_delete_through_the_sdk() {
    let server = GcpServer::start().await;
    let cloud = cloud(server.endpoint()).await;
    let req = request(
        "gpu-abc12",
        offering("a2-highgpu-1g", ZONE_A, CapacityType::Spot),
        vec![],
    );
    let launched = cloud.create(&req).await.expect("launch");
    assert_eq!(
        launched.provider_id,
        "gce://test-project/us-central1-a/qm-gpu-abc12"
    );
    assert_eq!(launched.instance_type, "a2-highgpu-1g");
    assert_eq!(launched.capacity_type, CapacityType::Spot);

    // What reached Compute Engine: spot scheduling, our labels, the template and metadata.
    let stored = server
        .instance(PROJECT, ZONE_A, "qm-gpu-abc12")
        .expect("the instance exists");
    assert_eq!(stored["scheduling"]["provisioningModel"], "SPOT");
    assert_eq!(stored["scheduling"]["instanceTerminationAction"], "DELETE");
    assert_eq!(stored["scheduling"]["onHostMaintenance"], "TERMINATE");
    assert_eq!(stored["labels"]["quartermaster-cluster"], "test-cluster");
    assert_eq!(stored["labels"]["quartermaster-nodeclaim"], "gpu-abc12");
    assert_eq!(stored["labels"]["quartermaster-nodepool"], "gpu");
    assert_eq!(
        stored["sourceInstanceTemplate"],
        "projects/test-project/global/instanceTemplates/gke-test-cluster-gpu-1234"
    );
    assert_eq!(stored["metadata"]["items"][0]["key"], "team");

    let got = cloud.get(&launched.provider_id).await.expect("get");
    assert_eq!(got.claim_name, "gpu-abc12");
    assert_eq!(got.state, InstanceState::Pending);
    assert_eq!(got.capacity_type, CapacityType::Spot);
    assert!(got.price_per_hour > 0.0, "priced from the catalog");

    let listed = cloud.list().await.expect("list");
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].provider_id, launched.provider_id);

    cloud.delete(&launched.provider_id).await.expect("delete");
    assert!(server.instances().is_empty());
    assert!(matches!(
        cloud.get(&launched.provider_id).await,
        Err(CloudError::NotFound { provider_id }) if provider_id == launched.provider_id
    ));
    assert!(matches!(
        cloud.delete(&launched.provider_id).await,
        Err(CloudError::NotFound { .. })
    ));
}

#[tokio::test]
async fn capacity_inside_a_finished_operation_falls_through_to_the_next_offering() {
    let server = GcpServer::start().await;
    server.exhaust("a2-highgpu-1g", ZONE_A);
    let cloud = cloud(server.endpoint()).await;
    let req = request(
        "gpu-fallback",
        offering("a2-highgpu-1g", ZONE_A, CapacityType::Spot),
        vec![offering("a2-highgpu-1g", ZONE_B, CapacityType::Spot)],
    );
    let launched = cloud.create(&req).await.expect("the fallback launches");
    assert_eq!(launched.zone, ZONE_B);
    assert_eq!(
        server.instances(),
        vec![format!("{ZONE_B}/qm-gpu-fallback")]
    );
    assert_eq!(server.calls("POST"), 2, "one insert per offering");

    // With every offering exhausted, the error names the last one tried.
    server.exhaust("a2-highgpu-1g", ZONE_B);
    let req = request(
        "gpu-none",
        offering("a2-highgpu-1g", ZONE_A, CapacityType::Spot),
        vec![offering("a2-highgpu-1g", ZONE_B, CapacityType::Spot)],
    );
    match cloud.create(&req).await {
        Err(CloudError::InsufficientCapacity { zone, message, .. }) => {
            assert_eq!(zone, ZONE_B);
            assert!(
                message.contains("does not have enough resources"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_launch_retried_after_a_crash_creates_no_second_instance() {
    let server = GcpServer::start().await;
    // The first controller launched, then crashed before recording the instance.
    let first = cloud(server.endpoint()).await;
    let req = request(
        "gpu-crash",
        offering("a2-highgpu-1g", ZONE_A, CapacityType::OnDemand),
        vec![],
    );
    let launched = first.create(&req).await.expect("first launch");
    drop(first);
    // The restarted controller launches the same claim, even on another offering.
    let second = cloud(server.endpoint()).await;
    let moved = request(
        "gpu-crash",
        offering("a2-highgpu-1g", ZONE_B, CapacityType::OnDemand),
        vec![],
    );
    let again = second.create(&moved).await.expect("retried launch");
    assert_eq!(again.provider_id, launched.provider_id);
    assert_eq!(server.instances().len(), 1);
    assert_eq!(server.calls("POST"), 1, "no second insert");

    // An instance someone else left with our claim label is found the same way.
    server.put_instance(
        PROJECT,
        ZONE_B,
        "qm-gpu-other",
        "g2-standard-4",
        &[
            ("quartermaster-cluster", "test-cluster"),
            ("quartermaster-nodeclaim", "gpu-other"),
        ],
    );
    let found = second
        .create(&request(
            "gpu-other",
            offering("g2-standard-4", ZONE_A, CapacityType::OnDemand),
            vec![],
        ))
        .await
        .expect("found");
    assert_eq!(
        found.provider_id,
        "gce://test-project/us-central1-b/qm-gpu-other"
    );
    assert_eq!(found.state, InstanceState::Running);
    assert_eq!(server.calls("POST"), 1);
}

#[tokio::test]
async fn http_429_is_throttled_and_500_is_transient() {
    let server = GcpServer::start().await;
    let cloud = cloud(server.endpoint()).await;
    let id = "gce://test-project/us-central1-a/qm-x";
    server.fail_next(Call::Get, HttpFault::throttled());
    match cloud.get(id).await {
        Err(CloudError::Throttled { retry_after }) => {
            assert_eq!(retry_after, Some(Duration::from_secs(3)));
        }
        other => panic!("{other:?}"),
    }
    server.fail_next(Call::Insert, HttpFault::internal());
    let req = request(
        "gpu-500",
        offering("a2-highgpu-1g", ZONE_A, CapacityType::Spot),
        vec![offering("a2-highgpu-1g", ZONE_B, CapacityType::Spot)],
    );
    assert!(matches!(
        cloud.create(&req).await,
        Err(CloudError::Transient { .. })
    ));
    assert_eq!(
        server.calls("POST"),
        1,
        "a 500 is not a capacity error: no fallback"
    );
    assert!(server.instances().is_empty());
    // The 429 on a list (the look-up before a launch) stops the launch the same way.
    server.fail_next(Call::List, HttpFault::throttled());
    assert!(matches!(
        cloud.create(&req).await,
        Err(CloudError::Throttled { .. })
    ));
}

#[tokio::test]
async fn a_dead_endpoint_fails_as_transient() {
    let cloud = cloud("http://127.0.0.1:1".into()).await;
    match cloud.get("gce://test-project/us-central1-a/qm-x").await {
        Err(e @ CloudError::Transient { .. }) => assert!(e.is_retryable()),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        cloud.list().await,
        Err(CloudError::Transient { .. })
    ));
}

#[tokio::test]
async fn leaks_are_listed_by_the_cluster_label_only() {
    let server = GcpServer::start().await;
    let cloud = cloud(server.endpoint()).await;
    server.put_instance(
        PROJECT,
        ZONE_A,
        "qm-leaked",
        "g2-standard-4",
        &[
            ("quartermaster-cluster", "test-cluster"),
            ("quartermaster-nodeclaim", "leaked"),
        ],
    );
    server.put_instance(
        PROJECT,
        ZONE_B,
        "qm-theirs",
        "g2-standard-4",
        &[
            ("quartermaster-cluster", "other-cluster"),
            ("quartermaster-nodeclaim", "theirs"),
        ],
    );
    server.put_instance(PROJECT, ZONE_A, "unrelated-vm", "n2-standard-4", &[]);
    let listed = cloud.list().await.expect("list");
    let ids: Vec<&str> = listed.iter().map(|i| i.provider_id.as_str()).collect();
    assert_eq!(ids, vec!["gce://test-project/us-central1-a/qm-leaked"]);
    assert_eq!(listed[0].claim_name, "leaked");
    assert_eq!(
        parse_provider_id(ids[0]),
        Some((PROJECT, ZONE_A, "qm-leaked"))
    );
}

#[tokio::test]
async fn a_preempted_spot_instance_is_an_interruption_once() {
    let server = GcpServer::start().await;
    let cloud = cloud(server.endpoint()).await;
    let req = request(
        "gpu-spot",
        offering("a2-highgpu-1g", ZONE_A, CapacityType::Spot),
        vec![],
    );
    let launched = cloud.create(&req).await.expect("launch");
    assert!(cloud.poll_events().await.expect("poll").is_empty());
    server.set_status(PROJECT, ZONE_A, "qm-gpu-spot", "STOPPING");
    let events = cloud.poll_events().await.expect("poll");
    assert!(
        matches!(events.as_slice(), [CloudEvent::Interruption { provider_id, .. }] if *provider_id == launched.provider_id),
        "{events:?}"
    );
    assert!(
        cloud.poll_events().await.expect("poll").is_empty(),
        "reported once"
    );
}

#[tokio::test]
async fn a_changed_image_is_drift() {
    let server = GcpServer::start().await;
    let cloud = cloud(server.endpoint()).await;
    let req = request(
        "gpu-drift",
        offering("a2-highgpu-1g", ZONE_A, CapacityType::OnDemand),
        vec![],
    );
    let launched = cloud.create(&req).await.expect("launch");
    let got = cloud.get(&launched.provider_id).await.expect("get");
    assert_eq!(cloud.is_drifted(&got).await.expect("drift"), None);
    let mut changed = spec();
    changed.image = Some(GcpImage {
        family: Some("cos-beta".into()),
        project: Some("cos-cloud".into()),
        self_link: None,
    });
    cloud.set_node_class("default", changed);
    let reason = cloud.is_drifted(&got).await.expect("drift");
    assert!(reason.is_some_and(|r| r.contains("cos-beta")));
}

#[test]
fn the_controller_on_gcp_without_a_project_says_which_flag_is_missing() {
    let out = quartermaster_tests::quartermaster(&["controller", "--cloud-provider", "gcp"]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("--gcp-project") && out.stderr.contains("GCP_PROJECT"),
        "stderr: {}",
        out.stderr
    );
}

/// `quartermaster doctor --cloud gcp` in-process, with `server` (on its own runtime) as the
/// Compute Engine endpoint.
fn doctor(endpoint: &str, node_class: &str) -> quartermaster_tests::Output {
    let file = std::env::temp_dir().join(format!(
        "qm-gcp-doctor-{}-{}.yaml",
        std::process::id(),
        endpoint.len()
    ));
    std::fs::write(&file, node_class).expect("writing the NodeClass");
    let file = file.display().to_string();
    quartermaster_tests::quartermaster(&[
        "doctor",
        "--cloud",
        "gcp",
        "-f",
        &file,
        "--gcp-endpoint",
        endpoint,
        "--gcp-project",
        PROJECT,
    ])
}

const DOCTOR_NODECLASS: &str = "apiVersion: quartermaster.dev/v1
kind: GCPNodeClass
metadata: {name: default}
spec:
  project: test-project
  region: us-central1
  zones: [us-central1-a]
  sourceInstanceTemplate: projects/test-project/global/instanceTemplates/gke-test-cluster-gpu-1234
";

#[test]
fn doctor_passes_against_the_local_endpoint_and_fails_against_a_dead_one() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("a runtime for the server");
    let server = rt.block_on(GcpServer::start());
    let out = doctor(&server.endpoint(), DOCTOR_NODECLASS);
    assert_eq!(
        out.code, 0,
        "stdout: {}\nstderr: {}",
        out.stdout, out.stderr
    );
    assert!(
        out.stdout.contains("compute.instances.list"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("us-central1-a"), "{}", out.stdout);
    assert!(!out.stdout.contains("FAIL"), "{}", out.stdout);

    let dead = doctor("http://127.0.0.1:1", DOCTOR_NODECLASS);
    assert_eq!(
        dead.code, 1,
        "stdout: {}\nstderr: {}",
        dead.stdout, dead.stderr
    );
    assert!(dead.stdout.contains("FAIL"), "{}", dead.stdout);
    drop(server);
}
