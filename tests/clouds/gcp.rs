//! The GCP provider through the real `google-cloud-compute-v1` client (custom endpoint,
//! anonymous credentials, no SDK retries) against our local Compute Engine: launch, get,
//! list, delete; capacity inside a finished operation falls through to the next offering in
//! the same launch; no second instance after a crash; throttling; a dead endpoint; leaks
//! listed by the cluster label; spot preemption as an interruption event; reservations listed
//! (every page) and launched into; flex-start launches; reset.

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
use quartermaster_pricing::reservation::{
    LABEL_RESERVATION_ID, LABEL_RESERVATION_TYPE, TAG_SPECIFIC_RESERVATION_REQUIRED,
};
use quartermaster_pricing::{CapacityType, Catalog, Cloud, ReservationKind};

use crate::gcp_server::{Call, GcpServer, HttpFault};

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
        reservation_affinity: None,
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

/// A GCPNodeClass whose pools may use `reservationAffinity` `affinity`.
fn spec_with(affinity: serde_json::Value) -> GCPNodeClassSpec {
    GCPNodeClassSpec {
        reservation_affinity: Some(serde_json::from_value(affinity).expect("an affinity")),
        ..spec()
    }
}

/// A launch into reservation `name` (as the engine asks for one: capacity type `reserved`,
/// the reservation's labels) from a class with `affinity`.
fn reserved_request(claim: &str, name: &str, affinity: serde_json::Value) -> LaunchRequest {
    let mut r = request(
        claim,
        offering("a3-highgpu-8g", ZONE_A, CapacityType::Reserved),
        vec![],
    );
    r.price_per_hour = 0.0;
    r.labels = BTreeMap::from([
        (LABEL_RESERVATION_ID.to_owned(), name.to_owned()),
        (LABEL_RESERVATION_TYPE.to_owned(), "default".to_owned()),
    ]);
    r.node_class_spec = Some(NodeClassSpec::Gcp(Box::new(spec_with(affinity))));
    r
}

/// The embedded catalog's on-demand price of `t` in `zone` (or its first zone).
fn on_demand(t: &str, zone: &str) -> f64 {
    let catalog = Catalog::embedded();
    let it = catalog.get(Cloud::Gcp, t).expect("in the catalog");
    let od = |o: &&quartermaster_pricing::Offering| o.capacity_type == CapacityType::OnDemand;
    it.offerings
        .iter()
        .filter(od)
        .find(|o| o.zone == zone)
        .or_else(|| it.offerings.iter().find(od))
        .expect("an on-demand offering")
        .price_per_hour
}

#[tokio::test]
async fn reservations_are_listed_from_every_page_with_their_free_slots() {
    let server = GcpServer::start().await;
    server.put_reservation(PROJECT, ZONE_A, "h100-block", "a3-highgpu-8g", 4, true);
    server.put_reservation(PROJECT, ZONE_B, "a100-open", "a2-highgpu-1g", 2, false);
    server.put_reservation(PROJECT, ZONE_B, "h100-new", "a3-highgpu-8g", 8, true);
    server.set_reservation_status(PROJECT, ZONE_B, "h100-new", "CREATING");
    server.put_reservation("other-project", ZONE_A, "theirs", "a3-highgpu-8g", 1, true);
    server.reservations_per_page(1);
    let cloud = cloud(server.endpoint()).await;
    // A VM sent without an affinity (GCE's default: any) consumes the open reservation.
    cloud
        .create(&request(
            "gpu-default",
            offering("a2-highgpu-1g", ZONE_B, CapacityType::OnDemand),
            vec![],
        ))
        .await
        .expect("a launch");
    assert_eq!(server.in_use(PROJECT, ZONE_B, "a100-open"), 1);

    let mut got = cloud.reservations().await.expect("reservations");
    got.sort_by(|a, b| a.id.cmp(&b.id));
    assert_eq!(
        server.calls("GET /compute/v1/projects/test-project/aggregated/reservations"),
        3,
        "one page per reservation"
    );
    let ids: Vec<&str> = got.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(
        ids,
        ["a100-open", "h100-block"],
        "not the one being created"
    );
    let (open, block) = (&got[0], &got[1]);
    assert_eq!(block.cloud, Cloud::Gcp);
    assert_eq!(block.instance_type, "a3-highgpu-8g");
    assert_eq!(block.zone, ZONE_A);
    assert_eq!((block.count, block.available), (4, Some(4)));
    assert_eq!(block.kind, ReservationKind::Default);
    assert_eq!((block.start, block.end), (None, None));
    assert_eq!(block.tags[TAG_SPECIFIC_RESERVATION_REQUIRED], "true");
    // Billed at the on-demand rate, used or not.
    assert_eq!(block.price_per_hour, on_demand("a3-highgpu-8g", ZONE_A));
    assert!(block.price_per_hour > 0.0);
    assert_eq!((open.count, open.available), (2, Some(1)));
    assert!(open.tags.is_empty());
}

#[tokio::test]
async fn a_reserved_launch_names_its_reservation_and_takes_a_slot() {
    let server = GcpServer::start().await;
    server.put_reservation(PROJECT, ZONE_A, "h100-block", "a3-highgpu-8g", 2, true);
    let cloud = cloud(server.endpoint()).await;
    let specific = serde_json::json!({
        "consumeReservationType": "SPECIFIC_RESERVATION", "values": ["h100-block"],
    });

    // Launched before any listing: the provider reads the reservation to know how to ask.
    let launched = cloud
        .create(&reserved_request("gpu-r1", "h100-block", specific.clone()))
        .await
        .expect("a reserved launch");
    assert_eq!(launched.capacity_type, CapacityType::Reserved);
    let stored = server
        .instance(PROJECT, ZONE_A, "qm-gpu-r1")
        .expect("the instance exists");
    assert_eq!(
        stored["reservationAffinity"],
        serde_json::json!({
            "consumeReservationType": "SPECIFIC_RESERVATION",
            "key": "compute.googleapis.com/reservation-name",
            "values": ["h100-block"],
        })
    );
    assert!(stored["scheduling"].get("provisioningModel").is_none());
    assert_eq!(stored["labels"]["quartermaster-reservation"], "h100-block");
    assert_eq!(server.in_use(PROJECT, ZONE_A, "h100-block"), 1);
    let listed = cloud.reservations().await.expect("reservations");
    assert_eq!(listed[0].available, Some(1));

    // Read back: reserved, priced 0 (the reservation is paid used or not).
    let got = cloud.get(&launched.provider_id).await.expect("get");
    assert_eq!(got.capacity_type, CapacityType::Reserved);
    assert_eq!(got.price_per_hour, 0.0);

    // An on-demand node of the same class never eats the reservation.
    let mut plain = request(
        "gpu-od",
        offering("a3-highgpu-8g", ZONE_A, CapacityType::OnDemand),
        vec![],
    );
    plain.node_class_spec = Some(NodeClassSpec::Gcp(Box::new(spec_with(specific.clone()))));
    let od = cloud.create(&plain).await.expect("an on-demand launch");
    assert_eq!(od.capacity_type, CapacityType::OnDemand);
    let stored = server.instance(PROJECT, ZONE_A, "qm-gpu-od").unwrap();
    assert_eq!(
        stored["reservationAffinity"]["consumeReservationType"],
        "NO_RESERVATION"
    );
    assert_eq!(server.in_use(PROJECT, ZONE_A, "h100-block"), 1);
    assert_eq!(
        cloud.get(&od.provider_id).await.expect("get").capacity_type,
        CapacityType::OnDemand
    );

    // The second slot, then none: a full reservation is a capacity error of the offering.
    cloud
        .create(&reserved_request("gpu-r2", "h100-block", specific.clone()))
        .await
        .expect("the second slot");
    assert_eq!(server.in_use(PROJECT, ZONE_A, "h100-block"), 2);
    match cloud
        .create(&reserved_request("gpu-r3", "h100-block", specific.clone()))
        .await
    {
        Err(CloudError::InsufficientCapacity {
            capacity_type,
            zone,
            message,
            ..
        }) => {
            assert_eq!(
                (capacity_type, zone.as_str()),
                (CapacityType::Reserved, ZONE_A)
            );
            assert!(message.contains("h100-block"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // A reservation that is gone is a capacity error too (the engine falls back).
    assert!(matches!(
        cloud
            .create(&reserved_request("gpu-r4", "deleted", specific))
            .await,
        Err(CloudError::InsufficientCapacity { .. })
    ));
}

#[tokio::test]
async fn a_reserved_launch_into_a_reservation_vms_consume_automatically_asks_for_any() {
    let server = GcpServer::start().await;
    server.put_reservation(PROJECT, ZONE_A, "h100-open", "a3-highgpu-8g", 1, false);
    let cloud = cloud(server.endpoint()).await;
    let any = serde_json::json!({"consumeReservationType": "ANY_RESERVATION"});
    assert_eq!(cloud.reservations().await.expect("reservations").len(), 1);

    // An on-demand node of a class with an affinity leaves it alone...
    let mut plain = request(
        "gpu-od",
        offering("a3-highgpu-8g", ZONE_A, CapacityType::OnDemand),
        vec![],
    );
    plain.node_class_spec = Some(NodeClassSpec::Gcp(Box::new(spec_with(any.clone()))));
    cloud.create(&plain).await.expect("an on-demand launch");
    assert_eq!(server.in_use(PROJECT, ZONE_A, "h100-open"), 0);

    // ...and the reserved launch takes it. Compute Engine refuses to let a VM name a
    // reservation that is not specific-only, so the launch asks for any.
    let launched = cloud
        .create(&reserved_request("gpu-r1", "h100-open", any))
        .await
        .expect("a reserved launch");
    let stored = server.instance(PROJECT, ZONE_A, "qm-gpu-r1").unwrap();
    assert_eq!(
        stored["reservationAffinity"],
        serde_json::json!({"consumeReservationType": "ANY_RESERVATION"})
    );
    assert_eq!(server.in_use(PROJECT, ZONE_A, "h100-open"), 1);
    let got = cloud.get(&launched.provider_id).await.expect("get");
    assert_eq!(got.capacity_type, CapacityType::Reserved, "by its label");
}

#[tokio::test]
async fn a_flex_start_launch_carries_its_scheduling_and_reads_back_as_flex_start() {
    let server = GcpServer::start().await;
    // Flex-start never consumes a reservation, even one it would match.
    server.put_reservation(PROJECT, ZONE_A, "h100-open", "a3-highgpu-8g", 1, false);
    let cloud = cloud(server.endpoint()).await;
    let req = request(
        "gpu-flex",
        offering("a3-highgpu-8g", ZONE_A, CapacityType::FlexStart),
        vec![],
    );
    let launched = cloud.create(&req).await.expect("a flex-start launch");
    assert_eq!(launched.capacity_type, CapacityType::FlexStart);
    let stored = server.instance(PROJECT, ZONE_A, "qm-gpu-flex").unwrap();
    let s = &stored["scheduling"];
    assert_eq!(s["provisioningModel"], "FLEX_START");
    assert_eq!(
        s["maxRunDuration"]["seconds"],
        quartermaster_pricing::flex_start::FLEX_START_MAX_RUN
            .num_seconds()
            .to_string()
    );
    assert_eq!(s["instanceTerminationAction"], "DELETE");
    assert_eq!(s["onHostMaintenance"], "TERMINATE");
    assert_eq!(s["automaticRestart"], false);
    assert_eq!(
        stored["reservationAffinity"]["consumeReservationType"],
        "NO_RESERVATION"
    );
    assert_eq!(server.in_use(PROJECT, ZONE_A, "h100-open"), 0);

    // Waiting for Dynamic Workload Scheduler capacity (PENDING) it is still pending.
    server.set_status(PROJECT, ZONE_A, "qm-gpu-flex", "PENDING");
    let got = cloud.get(&launched.provider_id).await.expect("get");
    assert_eq!(got.capacity_type, CapacityType::FlexStart);
    assert_eq!(got.state, InstanceState::Pending);
    // Priced as flex-start (the catalog's estimate: half of on-demand for A3).
    let half = on_demand("a3-highgpu-8g", ZONE_A) * 0.5;
    assert!(
        (got.price_per_hour - half).abs() < 1e-6,
        "{}",
        got.price_per_hour
    );
    let listed = cloud.list().await.expect("list");
    assert_eq!(listed[0].capacity_type, CapacityType::FlexStart);
}

#[tokio::test]
async fn reset_reboots_in_place_and_a_missing_instance_is_not_found() {
    let server = GcpServer::start().await;
    let cloud = cloud(server.endpoint()).await;
    let launched = cloud
        .create(&request(
            "gpu-reboot",
            offering("a2-highgpu-1g", ZONE_A, CapacityType::OnDemand),
            vec![],
        ))
        .await
        .expect("launch");
    cloud.reboot(&launched.provider_id).await.expect("reset");
    assert_eq!(
        server.calls(
            "POST /compute/v1/projects/test-project/zones/us-central1-a/instances/qm-gpu-reboot/reset"
        ),
        1
    );
    assert!(
        server.calls("GET /compute/v1/projects/test-project/zones/us-central1-a/operations/") >= 1,
        "the reset's operation is waited for"
    );
    assert_eq!(server.instances(), [format!("{ZONE_A}/qm-gpu-reboot")]);

    let missing = "gce://test-project/us-central1-a/qm-gone";
    match cloud.reboot(missing).await {
        Err(CloudError::NotFound { provider_id }) => assert_eq!(provider_id, missing),
        other => panic!("{other:?}"),
    }
    server.fail_next(Call::Reset, HttpFault::throttled());
    assert!(matches!(
        cloud.reboot(&launched.provider_id).await,
        Err(CloudError::Throttled { .. })
    ));
    assert!(matches!(
        cloud.reboot("aws:///us-east-1a/i-1").await,
        Err(CloudError::InvalidRequest { .. })
    ));
}
