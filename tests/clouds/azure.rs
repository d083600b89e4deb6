//! The Azure provider through the real `azure_mgmt_compute` client (endpoint override, a static
//! test token, no SDK retries) against our local Resource Manager (azure_server.rs): launch,
//! get, list, delete; `AllocationFailed` inside the finished operation falls through to the
//! next offering; no second VM after a crash; 429 -> Throttled; a dead endpoint fails as
//! transient; resource SKUs mark offerings unavailable; Retail Prices replace embedded prices;
//! capacity reservations of every group are read across pages, a reserved launch goes into the
//! reservation's group and reads back reserved; reboot restarts the VM (a missing one is
//! NotFound).

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use crate::azure_server::{AzureServer, Call, HttpFault};
use base64::Engine as _;
use quartermaster_azure::{
    AzureCloud, AzureError, AzureSettings, BootstrapData, CallLimits, CredentialSource,
    TAG_CLUSTER, TAG_NODECLAIM,
};
use quartermaster_cloud::{
    CloudError, CloudProvider, InstanceState, LaunchOffering, LaunchRequest, NodeClassSpec,
    SystemClock,
};
use quartermaster_policies::AzureNodeClassSpec;
use quartermaster_policies::nodeclass::azure::AzureBootstrapSecretRef;
use quartermaster_pricing::{CapacityType, Catalog, Cloud};
use serde_json::json;

pub(crate) const A100: &str = "Standard_NC24ads_A100_v4";
const BOOTSTRAP: &str = "#!/bin/bash\n/opt/azure/containers/provision.sh\n";

/// The bootstrap Secret, as the controller would read it.
pub(crate) struct FixedBootstrap;

impl BootstrapData for FixedBootstrap {
    fn custom_data<'a>(
        &'a self,
        secret: &'a AzureBootstrapSecretRef,
    ) -> Pin<Box<dyn Future<Output = Result<String, AzureError>> + Send + 'a>> {
        Box::pin(async move {
            if secret.name == "aks-bootstrap" && secret.key_or_default() == "customData" {
                Ok(BOOTSTRAP.to_owned())
            } else {
                Err(AzureError::Bootstrap(format!("no Secret {}", secret.name)))
            }
        })
    }
}

pub(crate) fn settings(endpoint: String) -> AzureSettings {
    AzureSettings {
        cluster_name: "test-cluster".into(),
        subscription_id: "sub".into(),
        resource_group: "rg".into(),
        location: Some("eastus".into()),
        endpoint: Some(endpoint),
        credentials: CredentialSource::StaticToken("test-token".into()),
        call_limits: CallLimits {
            connect_timeout: Duration::from_secs(2),
            request_timeout: Duration::from_secs(5),
            poll_interval: Duration::from_millis(10),
            operation_timeout: Duration::from_secs(5),
        },
        ..AzureSettings::default()
    }
}

pub(crate) fn cloud(server: &AzureServer) -> AzureCloud {
    AzureCloud::connect(
        settings(server.endpoint()),
        Catalog::embedded(),
        Arc::new(SystemClock),
    )
    .expect("the Azure client builds")
    .with_bootstrap(Some(Arc::new(FixedBootstrap)))
}

fn spec() -> AzureNodeClassSpec {
    serde_json::from_value(json!({
        "subscriptionId": "sub",
        "resourceGroup": "rg",
        "location": "eastus",
        "subnetId": "/subscriptions/sub/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/aks-vnet/subnets/aks-subnet",
        "bootstrapSecretRef": {"name": "aks-bootstrap"},
        "sshPublicKey": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAITEST test",
        "tags": {"team": "ml"}
    }))
    .expect("a valid AzureNodeClass spec")
}

pub(crate) fn offering(size: &str, zone: &str, capacity_type: CapacityType) -> LaunchOffering {
    LaunchOffering {
        instance_type: size.into(),
        zone: zone.into(),
        capacity_type,
        price_per_hour: 1.5,
    }
}

pub(crate) fn request(claim: &str, offerings: &[LaunchOffering]) -> LaunchRequest {
    let first = &offerings[0];
    LaunchRequest {
        claim_name: claim.into(),
        node_pool: "gpu".into(),
        node_class: "default".into(),
        instance_type: first.instance_type.clone(),
        zone: first.zone.clone(),
        capacity_type: first.capacity_type,
        price_per_hour: first.price_per_hour,
        labels: BTreeMap::new(),
        tags: BTreeMap::from([("karpenter.sh/nodepool".into(), "gpu".into())]),
        fallbacks: offerings[1..].to_vec(),
        node_class_spec: Some(NodeClassSpec::Azure(Box::new(spec()))),
    }
}

#[tokio::test]
async fn azure_launches_a_spot_vm_then_gets_lists_and_deletes_it() {
    let server = AzureServer::start("rg").await;
    let cloud = cloud(&server);
    // Someone else's VM in the resource group is never ours.
    server.put_vm(
        "aks-system-1",
        "Standard_D4s_v5",
        "1",
        &[("aks-managed", "true")],
    );

    let req = request(
        "gpu-abc12",
        &[offering(A100, "eastus-2", CapacityType::Spot)],
    );
    let instance = cloud.create(&req).await.expect("launch");
    assert_eq!(
        instance.provider_id,
        "azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/qm-gpu-abc12-0"
    );
    assert_eq!(instance.instance_type, A100);
    assert_eq!(instance.zone, "eastus-2");
    assert_eq!(instance.capacity_type, CapacityType::Spot);
    assert_eq!(instance.state, InstanceState::Running);
    assert_eq!(instance.claim_name, "gpu-abc12");

    let vm = server.vm("qm-gpu-abc12-0").expect("the VM is held");
    let p = &vm["properties"];
    assert_eq!(p["priority"], "Spot");
    assert_eq!(p["evictionPolicy"], "Delete");
    assert_eq!(p["billingProfile"]["maxPrice"], -1.0);
    assert_eq!(vm["zones"], json!(["2"]));
    assert_eq!(vm["location"], "eastus");
    let custom = p["osProfile"]["customData"].as_str().expect("custom data");
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(custom)
        .expect("base64 custom data");
    assert_eq!(decoded, BOOTSTRAP.as_bytes());
    assert_eq!(vm["tags"][TAG_CLUSTER], "test-cluster");
    assert_eq!(vm["tags"][TAG_NODECLAIM], "gpu-abc12");
    assert_eq!(vm["tags"]["karpenter.sh_nodepool"], "gpu");
    assert_eq!(vm["tags"]["team"], "ml");
    assert_eq!(
        p["osProfile"]["linuxConfiguration"]["disablePasswordAuthentication"],
        true
    );

    let got = cloud.get(&instance.provider_id).await.expect("get");
    assert_eq!(got.provider_id, instance.provider_id);
    assert_eq!(got.state, InstanceState::Running);

    let listed = cloud.list().await.expect("list");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].claim_name, "gpu-abc12");

    cloud.delete(&instance.provider_id).await.expect("delete");
    assert_eq!(server.vm_names(), vec!["aks-system-1".to_owned()]);
    assert!(matches!(
        cloud.get(&instance.provider_id).await,
        Err(CloudError::NotFound { .. })
    ));
    assert!(matches!(
        cloud.delete(&instance.provider_id).await,
        Err(CloudError::NotFound { .. })
    ));
}

#[tokio::test]
async fn azure_allocation_failed_in_the_finished_operation_falls_through_to_the_next_offering() {
    let server = AzureServer::start("rg").await;
    let cloud = cloud(&server);
    server.exhaust(A100, "1");

    let req = request(
        "gpu-fall",
        &[
            offering(A100, "eastus-1", CapacityType::Spot),
            offering(A100, "eastus-3", CapacityType::OnDemand),
        ],
    );
    let instance = cloud.create(&req).await.expect("launch on the fallback");
    assert_eq!(instance.zone, "eastus-3");
    assert_eq!(instance.capacity_type, CapacityType::OnDemand);
    assert_eq!(server.calls("PUT"), 2);
    // The failed VM of the first offering is removed; only the launched one stays.
    assert_eq!(server.vm_names(), vec!["qm-gpu-fall-1".to_owned()]);
    assert_eq!(
        server.vm("qm-gpu-fall-1").unwrap()["properties"]["priority"],
        "Regular"
    );
}

#[tokio::test]
async fn azure_every_offering_without_capacity_is_insufficient_capacity_of_the_last() {
    let server = AzureServer::start("rg").await;
    let cloud = cloud(&server);
    server.exhaust(A100, "1");
    server.exhaust(A100, "2");

    let req = request(
        "gpu-none",
        &[
            offering(A100, "eastus-1", CapacityType::Spot),
            offering(A100, "eastus-2", CapacityType::Spot),
        ],
    );
    match cloud.create(&req).await {
        Err(CloudError::InsufficientCapacity { zone, message, .. }) => {
            assert_eq!(zone, "eastus-2");
            assert!(message.contains("AllocationFailed"), "{message}");
        }
        other => panic!("expected insufficient capacity, got {other:?}"),
    }
    assert!(server.vm_names().is_empty());
}

#[tokio::test]
async fn azure_a_launch_retried_after_a_crash_creates_no_second_vm() {
    let server = AzureServer::start("rg").await;
    let cloud = cloud(&server);
    // The PUT is accepted, then following the operation fails, as if the controller died.
    server.fail_next(Call::Operation, HttpFault::internal());
    let req = request(
        "gpu-crash",
        &[offering(A100, "eastus-1", CapacityType::Spot)],
    );
    assert!(matches!(
        cloud.create(&req).await,
        Err(CloudError::Transient { .. })
    ));
    assert_eq!(server.creates(), 1);

    // A new controller (a new client) retries the same NodeClaim.
    let restarted = self::cloud(&server);
    let instance = restarted
        .create(&req)
        .await
        .expect("the retry finds the VM");
    assert_eq!(instance.claim_name, "gpu-crash");
    assert!(
        instance
            .provider_id
            .ends_with("/virtualMachines/qm-gpu-crash-0")
    );
    assert_eq!(server.creates(), 1);
    assert_eq!(server.calls("PUT"), 1);
    assert_eq!(server.vm_names().len(), 1);
}

#[tokio::test]
async fn azure_throttling_is_throttled_with_retry_after() {
    let server = AzureServer::start("rg").await;
    let cloud = cloud(&server);
    server.fail_next(Call::Put, HttpFault::throttled());
    let req = request(
        "gpu-slow",
        &[offering(A100, "eastus-1", CapacityType::Spot)],
    );
    assert_eq!(
        cloud.create(&req).await,
        Err(CloudError::Throttled {
            retry_after: Some(Duration::from_secs(7))
        })
    );
    server.fail_next(Call::List, HttpFault::throttled());
    assert!(matches!(
        cloud.list().await,
        Err(CloudError::Throttled { .. })
    ));
}

#[tokio::test]
async fn azure_a_dead_endpoint_fails_as_transient() {
    // A port nobody listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let cloud = AzureCloud::connect(
        settings(endpoint),
        Catalog::embedded(),
        Arc::new(SystemClock),
    )
    .expect("the client builds");
    assert!(matches!(
        cloud.list().await,
        Err(CloudError::Transient { .. })
    ));
    let req = request(
        "gpu-dead",
        &[offering(A100, "eastus-1", CapacityType::Spot)],
    );
    assert!(matches!(
        cloud.create(&req).await,
        Err(CloudError::Transient { .. })
    ));
}

#[tokio::test]
async fn azure_a_nodeclass_of_another_resource_group_is_refused() {
    let server = AzureServer::start("rg").await;
    let cloud = cloud(&server);
    let mut req = request("gpu-rg", &[offering(A100, "eastus-1", CapacityType::Spot)]);
    let mut other = spec();
    other.resource_group = "elsewhere".into();
    req.node_class_spec = Some(NodeClassSpec::Azure(Box::new(other)));
    assert!(matches!(
        cloud.create(&req).await,
        Err(CloudError::InvalidRequest { .. })
    ));
    assert_eq!(server.calls("PUT"), 0);
}

#[tokio::test]
async fn azure_resource_skus_mark_restricted_and_unoffered_zones_unavailable() {
    let server = AzureServer::start("rg").await;
    let cloud = cloud(&server);
    server.set_skus(vec![
        json!({"resourceType": "virtualMachines", "name": A100, "family": "standardNCADSA100v4Family",
               "locations": ["eastus"], "locationInfo": [{"location": "eastus", "zones": ["2", "3"]}],
               "capabilities": [{"name": "GPUs", "value": "1"}], "restrictions": []}),
        json!({"resourceType": "virtualMachines", "name": "Standard_NC48ads_A100_v4",
               "locations": ["eastus"], "locationInfo": [{"location": "eastus", "zones": ["1", "2", "3"]}],
               "restrictions": [{"type": "Location", "values": ["eastus"], "reasonCode": "NotAvailableForSubscription"}]}),
    ]);
    let types = cloud.instance_types().await.expect("instance types");
    let a100 = types
        .iter()
        .find(|t| t.name == A100)
        .expect("the A100 size");
    for o in &a100.offerings {
        assert_eq!(o.available, o.zone != "eastus-1", "{o:?}");
    }
    let restricted = types
        .iter()
        .find(|t| t.name == "Standard_NC48ads_A100_v4")
        .expect("the 2 × A100 size");
    assert!(restricted.offerings.iter().all(|o| !o.available));
}

#[tokio::test]
async fn azure_retail_prices_replace_the_embedded_ones() {
    let server = AzureServer::start("rg").await;
    server.set_prices(vec![
        json!({"currencyCode": "USD", "retailPrice": 3.9, "armRegionName": "eastus",
               "productName": "Virtual Machines NCads A100 v4 Series", "skuName": "NC24ads A100 v4",
               "meterName": "NC24ads A100 v4", "serviceName": "Virtual Machines",
               "unitOfMeasure": "1 Hour", "type": "Consumption", "armSkuName": A100,
               "effectiveStartDate": "2026-01-01T00:00:00Z"}),
        json!({"currencyCode": "USD", "retailPrice": 0.61, "armRegionName": "eastus",
               "productName": "Virtual Machines NCads A100 v4 Series", "skuName": "NC24ads A100 v4 Spot",
               "meterName": "NC24ads A100 v4 Spot", "serviceName": "Virtual Machines",
               "unitOfMeasure": "1 Hour", "type": "Consumption", "armSkuName": A100,
               "effectiveStartDate": "2026-01-01T00:00:00Z"}),
    ]);
    let now = chrono::Utc::now();
    let quotes = quartermaster_azure::prices::fetch_quotes(
        &server.endpoint(),
        "eastus",
        &[A100.to_owned()],
        now,
        Duration::from_secs(5),
    )
    .await
    .expect("prices");
    assert_eq!(quotes.len(), 2, "{quotes:?}");
    assert_eq!(server.calls("GET /api/retail/prices"), 1);

    let merged = Catalog::embedded().with_live_prices(&quotes, now);
    assert!(merged.rejected.is_empty(), "{:?}", merged.rejected);
    let a100 = merged
        .catalog
        .get(Cloud::Azure, A100)
        .expect("the A100 size");
    let od = a100
        .offerings
        .iter()
        .find(|o| o.zone == "eastus-1" && o.capacity_type == CapacityType::OnDemand)
        .expect("on-demand in eastus-1");
    assert_eq!(od.price_per_hour, 3.9);
    assert_eq!(od.price_source, "azure-retail-prices");
    let spot = a100
        .offerings
        .iter()
        .find(|o| o.zone == "eastus-1" && o.capacity_type == CapacityType::Spot)
        .expect("spot in eastus-1");
    assert_eq!(spot.price_per_hour, 0.61);
}

#[tokio::test]
async fn azure_a_failing_price_api_is_an_error_and_the_embedded_prices_stay() {
    let server = AzureServer::start("rg").await;
    server.fail_next(Call::Prices, HttpFault::internal());
    let r = quartermaster_azure::prices::fetch_quotes(
        &server.endpoint(),
        "eastus",
        &[A100.to_owned()],
        chrono::Utc::now(),
        Duration::from_secs(5),
    )
    .await;
    assert!(matches!(r, Err(AzureError::Prices(_))), "{r:?}");
}

/// `quartermaster doctor --cloud azure … -o json` in-process: (exit code, checks).
async fn doctor(endpoint: String) -> (u8, Vec<serde_json::Value>) {
    tokio::task::spawn_blocking(move || {
        let args = [
            "quartermaster",
            "doctor",
            "--cloud",
            "azure",
            "--azure-endpoint",
            &endpoint,
            "--azure-subscription-id",
            "sub",
            "--azure-resource-group",
            "rg",
            "--region",
            "eastus",
            "-o",
            "json",
        ];
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = quartermaster::run(args, &mut out, &mut err);
        let checks: Vec<serde_json::Value> = serde_json::from_slice(&out).unwrap_or_else(|e| {
            panic!(
                "doctor printed no JSON ({e}): {} {}",
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&err)
            )
        });
        (code, checks)
    })
    .await
    .expect("doctor ran")
}

fn outcome<'a>(checks: &'a [serde_json::Value], name: &str) -> &'a str {
    checks
        .iter()
        .find(|c| c["name"] == name)
        .and_then(|c| c["outcome"].as_str())
        .unwrap_or_else(|| panic!("no check {name}: {checks:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_doctor_passes_against_the_local_endpoint() {
    let server = AzureServer::start("rg").await;
    server.set_skus(vec![json!({
        "resourceType": "virtualMachines", "name": A100, "family": "standardNCADSA100v4Family",
        "locations": ["eastus"], "locationInfo": [{"location": "eastus", "zones": ["1", "2", "3"]}],
        "restrictions": []
    })]);
    server.set_usages(&[("standardNCADSA100v4Family", 0, 96), ("cores", 4, 100)]);
    let (code, checks) = doctor(server.endpoint()).await;
    assert_eq!(code, 0, "{checks:#?}");
    assert_eq!(outcome(&checks, "credentials"), "OK");
    assert_eq!(
        outcome(&checks, "permission Microsoft.Compute/virtualMachines/read"),
        "OK"
    );
    assert_eq!(outcome(&checks, "resource group"), "OK");
    assert_eq!(outcome(&checks, "GPU sizes in eastus"), "OK");
    assert_eq!(outcome(&checks, "quota standardNCADSA100v4Family"), "OK");
    // No secret in the output: the static test token never appears.
    assert!(
        !serde_json::to_string(&checks)
            .unwrap()
            .contains("quartermaster-local-test")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn azure_doctor_fails_clearly_against_a_dead_endpoint() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let (code, checks) = doctor(endpoint).await;
    assert_eq!(code, 1, "{checks:#?}");
    let probe = checks
        .iter()
        .find(|c| c["name"] == "permission Microsoft.Compute/virtualMachines/read")
        .expect("the permission probe");
    assert_eq!(probe["outcome"], "FAIL");
    assert!(
        probe["fix"]
            .as_str()
            .unwrap_or_default()
            .contains("--azure-endpoint"),
        "{probe}"
    );
}

#[tokio::test]
async fn azure_list_finds_the_clusters_vms_even_without_a_live_claim() {
    let server = AzureServer::start("rg").await;
    let cloud = cloud(&server);
    // A VM of this cluster whose NodeClaim is gone (a leak), one of another cluster, and one of
    // no cluster at all.
    server.put_vm(
        "qm-old-0",
        A100,
        "1",
        &[(TAG_CLUSTER, "test-cluster"), (TAG_NODECLAIM, "old")],
    );
    server.put_vm(
        "qm-theirs-0",
        A100,
        "1",
        &[(TAG_CLUSTER, "other-cluster"), (TAG_NODECLAIM, "theirs")],
    );
    server.put_vm("aks-system-1", "Standard_D4s_v5", "1", &[]);
    let listed = cloud.list().await.expect("list");
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0].claim_name, "old");
    assert_eq!(listed[0].zone, "eastus-1");
    assert_eq!(listed[0].capacity_type, CapacityType::OnDemand);
    // Garbage collection deletes it by its provider id.
    cloud
        .delete(&listed[0].provider_id)
        .await
        .expect("delete the leak");
    assert!(server.vm("qm-old-0").is_none());
    assert!(server.vm("qm-theirs-0").is_some());
}

#[tokio::test]
async fn azure_a_bootstrap_secret_the_controller_cannot_read_is_an_invalid_request() {
    let server = AzureServer::start("rg").await;
    let cloud = AzureCloud::connect(
        settings(server.endpoint()),
        Catalog::embedded(),
        Arc::new(SystemClock),
    )
    .expect("the client builds");
    let req = request(
        "gpu-nosecret",
        &[offering(A100, "eastus-1", CapacityType::Spot)],
    );
    match cloud.create(&req).await {
        Err(CloudError::InvalidRequest { message }) => {
            assert!(message.contains("aks-bootstrap"), "{message}")
        }
        other => panic!("expected an invalid request, got {other:?}"),
    }
    assert_eq!(server.calls("PUT"), 0);
}

#[test]
fn the_controller_on_azure_without_a_subscription_says_which_flag_is_missing() {
    let out = quartermaster_tests::quartermaster(&["controller", "--cloud-provider", "azure"]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("--azure-subscription-id")
            && out.stderr.contains("AZURE_SUBSCRIPTION_ID"),
        "stderr: {}",
        out.stderr
    );
}

#[tokio::test]
async fn azure_a_vm_drifts_when_its_nodeclass_selects_another_image() {
    let server = AzureServer::start("rg").await;
    let cloud = cloud(&server);
    let req = request(
        "gpu-drift",
        &[offering(A100, "eastus-1", CapacityType::Spot)],
    );
    let launched = cloud.create(&req).await.expect("launch");
    let got = cloud.get(&launched.provider_id).await.expect("get");
    assert_eq!(cloud.is_drifted(&got).await.expect("drift"), None);

    let mut changed = spec();
    changed.image = Some(quartermaster_policies::nodeclass::azure::AzureImage {
        image_family: Some("AzureLinux".into()),
        id: None,
    });
    cloud.set_node_class("default", changed);
    let reason = cloud.is_drifted(&got).await.expect("drift");
    assert!(
        reason.as_deref().is_some_and(|r| r.contains("azure-linux")),
        "{reason:?}"
    );
}

const RESERVATION_ID: &str = quartermaster_pricing::reservation::LABEL_RESERVATION_ID;
const RESERVATION_GROUP: &str = quartermaster_pricing::reservation::TAG_RESERVATION_GROUP;

fn group_id(resource_group: &str, group: &str) -> String {
    format!(
        "/subscriptions/{}/resourceGroups/{resource_group}/providers/Microsoft.Compute/capacityReservationGroups/{group}",
        crate::azure_server::SUBSCRIPTION
    )
}

/// A reserved launch request into the reservation `id`.
fn reserved_request(claim: &str, zone: &str, id: &str) -> LaunchRequest {
    let mut req = request(claim, &[offering(A100, zone, CapacityType::Reserved)]);
    req.price_per_hour = 0.0;
    req.labels.insert(RESERVATION_ID.into(), id.into());
    req
}

#[tokio::test]
async fn azure_capacity_reservations_of_every_group_are_read_across_pages() {
    let server = AzureServer::start("rg").await;
    let cloud = cloud(&server);
    server.set_page_size(1);
    let z1 = server.add_capacity_reservation(
        "capacity",
        "a100",
        "eastus-1",
        A100,
        "1",
        4,
        &[("team", "research")],
    );
    let z2 = server.add_capacity_reservation("capacity", "a100", "eastus-2", A100, "2", 2, &[]);
    let other = server.add_capacity_reservation("rg", "training", "z3", A100, "3", 1, &[]);
    // Someone else's VM holds one slot of the zone 1 reservation; a VM of the group in another
    // zone holds none of it.
    let a100 = group_id("capacity", "a100");
    server.put_reserved_vm("theirs-0", A100, "1", &a100);
    server.put_reserved_vm("theirs-1", A100, "2", &a100);

    let mut rs = cloud.reservations().await.expect("reservations");
    rs.sort_by(|a, b| a.zone.cmp(&b.zone));
    assert_eq!(
        rs.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        vec![z1.as_str(), z2.as_str(), other.as_str()]
    );
    // Every page was read: two groups a page each, two reservations of the first group a page
    // each, and each group's instance view.
    assert_eq!(
        server
            .calls("GET /subscriptions/sub/providers/Microsoft.Compute/capacityReservationGroups"),
        2
    );
    assert_eq!(server.calls(&format!("GET {a100}/capacityReservations")), 2);
    assert_eq!(server.calls(&format!("GET {a100}")), 2 + 1);

    let on_demand = Catalog::embedded()
        .get(Cloud::Azure, A100)
        .and_then(|t| {
            t.offerings
                .iter()
                .find(|o| o.zone == "eastus-1" && o.capacity_type == CapacityType::OnDemand)
                .map(|o| o.price_per_hour)
        })
        .expect("the catalog prices the A100 size on demand in eastus-1");
    let r = &rs[0];
    assert_eq!(r.cloud, Cloud::Azure);
    assert_eq!(r.instance_type, A100);
    assert_eq!(r.zone, "eastus-1");
    assert_eq!(r.count, 4);
    assert_eq!(r.available, Some(3));
    assert_eq!(r.kind, quartermaster_pricing::ReservationKind::Default);
    assert_eq!(r.price_per_hour, on_demand);
    assert_eq!((r.start, r.end), (None, None));
    assert_eq!(r.tags["team"], "research");
    assert_eq!(r.tags[RESERVATION_GROUP], a100);
    assert_eq!(
        (rs[1].zone.as_str(), rs[1].available),
        ("eastus-2", Some(1))
    );
    assert_eq!(rs[2].tags[RESERVATION_GROUP], group_id("rg", "training"));
    assert_eq!(rs[2].available, Some(1));

    // A throttled list is Throttled, as every other call.
    server.fail_next(Call::ReservationGroups, HttpFault::throttled());
    assert!(matches!(
        cloud.reservations().await,
        Err(CloudError::Throttled { .. })
    ));
}

#[tokio::test]
async fn azure_a_reserved_launch_goes_into_the_reservations_group_and_reads_back_reserved() {
    let server = AzureServer::start("rg").await;
    let cloud = cloud(&server);
    let id = server.add_capacity_reservation("capacity", "a100", "eastus-2", A100, "2", 2, &[]);
    let group = group_id("capacity", "a100");

    let instance = cloud
        .create(&reserved_request("gpu-res", "eastus-2", &id))
        .await
        .expect("a reserved launch");
    assert_eq!(instance.capacity_type, CapacityType::Reserved);
    assert_eq!(instance.zone, "eastus-2");
    assert_eq!(instance.price_per_hour, 0.0);
    let vm = server.vm("qm-gpu-res-0").expect("the VM is held");
    assert_eq!(
        vm["properties"]["capacityReservation"]["capacityReservationGroup"]["id"],
        group.as_str()
    );
    assert_eq!(vm["properties"]["priority"], "Regular");
    assert_eq!(vm["zones"], json!(["2"]));

    // Read back (get and list) it is reserved capacity, priced 0 as the reservation is paid.
    let got = cloud.get(&instance.provider_id).await.expect("get");
    assert_eq!(got.capacity_type, CapacityType::Reserved);
    assert_eq!(got.price_per_hour, 0.0);
    let listed = cloud.list().await.expect("list");
    assert_eq!(listed[0].capacity_type, CapacityType::Reserved);
    // It holds one of the reservation's two slots.
    let rs = cloud.reservations().await.expect("reservations");
    assert_eq!((rs[0].count, rs[0].available), (2, Some(1)));

    // An on-demand launch of the same class stays out of the group.
    cloud
        .create(&request(
            "gpu-od",
            &[offering(A100, "eastus-2", CapacityType::OnDemand)],
        ))
        .await
        .expect("an on-demand launch");
    let vm = server.vm("qm-gpu-od-0").expect("the VM is held");
    assert!(
        vm["properties"].get("capacityReservation").is_none(),
        "{vm}"
    );

    // A reserved launch naming no reservation, or not an Azure one, is refused before any PUT.
    let puts = server.calls("PUT");
    let mut unnamed = reserved_request("gpu-none", "eastus-2", &id);
    unnamed.labels.clear();
    for req in [unnamed, reserved_request("gpu-aws", "eastus-2", "cr-0123")] {
        match cloud.create(&req).await {
            Err(CloudError::InvalidRequest { message }) => {
                assert!(message.contains(RESERVATION_ID), "{message}")
            }
            other => panic!("expected an invalid request, got {other:?}"),
        }
    }
    assert_eq!(server.calls("PUT"), puts);
}

#[tokio::test]
async fn azure_reboot_restarts_the_vm_and_follows_the_operation() {
    let server = AzureServer::start("rg").await;
    let cloud = cloud(&server);
    let instance = cloud
        .create(&request(
            "gpu-reboot",
            &[offering(A100, "eastus-1", CapacityType::OnDemand)],
        ))
        .await
        .expect("launch");
    let polls = server.calls("GET /subscriptions/sub/providers/Microsoft.Compute/locations");
    cloud
        .reboot(&instance.provider_id)
        .await
        .expect("the VM restarts");
    assert_eq!(server.restarts("qm-gpu-reboot-0"), 1);
    assert_eq!(
        server.calls("POST /subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/qm-gpu-reboot-0/restart"),
        1
    );
    // The operation was followed to its end (one poll in progress, then done).
    assert_eq!(
        server.calls("GET /subscriptions/sub/providers/Microsoft.Compute/locations") - polls,
        2
    );
    // The VM keeps its id and is still there.
    let got = cloud.get(&instance.provider_id).await.expect("get");
    assert_eq!(got.state, InstanceState::Running);

    server.fail_next(Call::Restart, HttpFault::throttled());
    assert_eq!(
        cloud.reboot(&instance.provider_id).await,
        Err(CloudError::Throttled {
            retry_after: Some(Duration::from_secs(7))
        })
    );
}

#[tokio::test]
async fn azure_reboot_of_a_missing_vm_is_not_found() {
    let server = AzureServer::start("rg").await;
    let cloud = cloud(&server);
    let gone = "azure:///subscriptions/sub/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/qm-gone-0";
    assert_eq!(
        cloud.reboot(gone).await,
        Err(CloudError::NotFound {
            provider_id: gone.to_owned()
        })
    );
    assert!(matches!(
        cloud.reboot("aws:///us-east-1a/i-0123").await,
        Err(CloudError::InvalidRequest { .. })
    ));
}
