//! The AWS provider through the real SDK against moto (behind the fault proxy): launch, get,
//! list, delete; capacity fallback within one launch; no second instance after a lost
//! response; leaks collected; throttling; dead and slow endpoints.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_ec2::types as t;
use base64::Engine as _;
use quartermaster_aws::{AwsCloud, AwsSettings, CallLimits, ClusterInfo, CredentialSource};
use quartermaster_cloud::{
    CloudError, CloudProvider, InstanceState, LaunchOffering, LaunchRequest, NodeClassSpec,
    SystemClock,
};
use quartermaster_policies::AWSNodeClassSpec;
use quartermaster_pricing::{CapacityType, Catalog};

use crate::fault_proxy::{Fault, FaultProxy};
use crate::moto::{Moto, MotoTurn};

const SPOT: CapacityType = CapacityType::Spot;
const OD: CapacityType = CapacityType::OnDemand;

/// One test's world: moto (reset), the proxy in front of it, the provider talking to the
/// proxy, and an SDK client talking to moto directly (setup and checks).
pub(crate) struct World {
    pub(crate) _moto: MotoTurn,
    pub(crate) proxy: FaultProxy,
    pub(crate) cloud: Arc<AwsCloud>,
    pub(crate) ec2: aws_sdk_ec2::Client,
    pub(crate) spec: AWSNodeClassSpec,
}

/// Settings of an AwsCloud against moto (or the fault proxy) at `endpoint`. The timeouts are
/// patient: moto answers DescribeInstanceTypes with its whole list, which takes seconds on a
/// loaded two-core machine (the timeout test uses [`impatient`] limits of its own).
pub(crate) fn settings(endpoint: String) -> AwsSettings {
    AwsSettings {
        cluster: ClusterInfo {
            name: "test-cluster".into(),
            endpoint: "https://api.test-cluster.example".into(),
            ca_bundle: "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t".into(),
            cidr: "10.100.0.0/16".into(),
        },
        region: Some("us-east-1".into()),
        endpoint_url: Some(endpoint),
        credentials: CredentialSource::Static {
            access_key_id: "testing".into(),
            secret_access_key: "testing".into(),
        },
        call_limits: CallLimits {
            connect_timeout: Duration::from_secs(2),
            attempt_timeout: Duration::from_secs(30),
            operation_timeout: Duration::from_secs(90),
            max_attempts: 3,
            initial_backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(500),
        },
        ..AwsSettings::default()
    }
}

/// [`settings`] with short timeouts (5 s an attempt, 15 s a call), for the test that a slow
/// endpoint times out.
fn impatient(endpoint: String) -> AwsSettings {
    let mut s = settings(endpoint);
    s.call_limits.attempt_timeout = Duration::from_secs(5);
    s.call_limits.operation_timeout = Duration::from_secs(15);
    s
}

/// The SDK's configuration for test clients (EC2, SSM) of moto at `endpoint`.
pub(crate) async fn sdk_config(endpoint: String) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url(endpoint)
        .credentials_provider(aws_sdk_ec2::config::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .load()
        .await
}

async fn sdk_client(endpoint: String) -> aws_sdk_ec2::Client {
    aws_sdk_ec2::Client::new(&sdk_config(endpoint).await)
}

fn tag(key: &str, value: &str) -> t::Tag {
    t::Tag::builder().key(key).value(value).build()
}

fn tagged(resource: t::ResourceType) -> t::TagSpecification {
    t::TagSpecification::builder()
        .resource_type(resource)
        .tags(tag("discovery", "test-cluster"))
        .build()
}

pub(crate) async fn world() -> World {
    let moto = Moto::lock().await;
    let proxy = FaultProxy::start(moto.addr).await;
    let ec2 = sdk_client(format!("http://{}", moto.addr)).await;
    let vpc = ec2
        .create_vpc()
        .cidr_block("10.0.0.0/16")
        .send()
        .await
        .expect("CreateVpc");
    let vpc = vpc
        .vpc()
        .and_then(|v| v.vpc_id())
        .expect("vpc id")
        .to_owned();
    for (cidr, zone) in [("10.0.1.0/24", "us-east-1a"), ("10.0.2.0/24", "us-east-1b")] {
        ec2.create_subnet()
            .vpc_id(&vpc)
            .cidr_block(cidr)
            .availability_zone(zone)
            .tag_specifications(tagged(t::ResourceType::Subnet))
            .send()
            .await
            .expect("CreateSubnet");
    }
    ec2.create_security_group()
        .group_name("nodes")
        .description("nodes")
        .vpc_id(&vpc)
        .tag_specifications(tagged(t::ResourceType::SecurityGroup))
        .send()
        .await
        .expect("CreateSecurityGroup");
    let images = ec2
        .describe_images()
        .owners("amazon")
        .send()
        .await
        .expect("DescribeImages");
    let ami = images
        .images()
        .iter()
        .find(|i| i.architecture() == Some(&t::ArchitectureValues::X8664))
        .and_then(|i| i.image_id())
        .expect("moto has an x86_64 AMI")
        .to_owned();
    let spec: AWSNodeClassSpec = serde_json::from_value(serde_json::json!({
        "subnetSelectorTerms": [{"tags": {"discovery": "test-cluster"}}],
        "securityGroupSelectorTerms": [{"tags": {"discovery": "test-cluster"}}],
        "amiSelectorTerms": [{"id": ami}],
        "instanceProfile": "test-nodes",
        "userData": "#!/bin/bash\necho from-the-node-class\n",
        "tags": {"team": "ml"},
    }))
    .expect("AWSNodeClass spec");
    let cloud = Arc::new(
        AwsCloud::connect(
            settings(proxy.url()),
            Catalog::embedded(),
            Arc::new(SystemClock),
        )
        .await,
    );
    World {
        _moto: moto,
        proxy,
        cloud,
        ec2,
        spec,
    }
}

pub(crate) fn offering(
    instance_type: &str,
    zone: &str,
    capacity_type: CapacityType,
) -> LaunchOffering {
    LaunchOffering {
        instance_type: instance_type.into(),
        zone: zone.into(),
        capacity_type,
        price_per_hour: 1.0,
    }
}

pub(crate) fn request(world: &World, claim: &str, offerings: &[LaunchOffering]) -> LaunchRequest {
    let primary = &offerings[0];
    LaunchRequest {
        claim_name: claim.into(),
        node_pool: "gpu".into(),
        node_class: "default".into(),
        instance_type: primary.instance_type.clone(),
        zone: primary.zone.clone(),
        capacity_type: primary.capacity_type,
        price_per_hour: primary.price_per_hour,
        labels: BTreeMap::new(),
        tags: BTreeMap::from([
            ("quartermaster.dev/nodepool".into(), "gpu".into()),
            ("quartermaster.dev/nodeclaim".into(), claim.into()),
        ]),
        fallbacks: offerings[1..].to_vec(),
        node_class_spec: Some(NodeClassSpec::Aws(Box::new(world.spec.clone()))),
    }
}

/// The instances moto holds for `claim`, not terminated.
pub(crate) async fn instances_of(world: &World, claim: &str) -> Vec<t::Instance> {
    let out = world
        .ec2
        .describe_instances()
        .filters(
            t::Filter::builder()
                .name("tag:quartermaster.dev/nodeclaim")
                .values(claim)
                .build(),
        )
        .send()
        .await
        .expect("DescribeInstances");
    out.reservations()
        .iter()
        .flat_map(|r| r.instances())
        .filter(|i| i.state().and_then(|s| s.name()) != Some(&t::InstanceStateName::Terminated))
        .cloned()
        .collect()
}

#[tokio::test]
async fn launch_get_list_and_delete_through_the_sdk() {
    let w = world().await;
    let r = request(
        &w,
        "gpu-launch1",
        &[offering("g5.xlarge", "us-east-1a", OD)],
    );
    let instance = w.cloud.create(&r).await.expect("launch");
    assert!(
        instance.provider_id.starts_with("aws:///us-east-1a/i-"),
        "{}",
        instance.provider_id
    );
    assert_eq!(
        (
            instance.instance_type.as_str(),
            instance.zone.as_str(),
            instance.capacity_type
        ),
        ("g5.xlarge", "us-east-1a", OD)
    );

    // Tags: cluster, NodePool, NodeClaim, Name, and the NodeClass's own.
    let found = instances_of(&w, "gpu-launch1").await;
    assert_eq!(found.len(), 1);
    let tags: BTreeMap<&str, &str> = found[0]
        .tags()
        .iter()
        .filter_map(|t| Some((t.key()?, t.value()?)))
        .collect();
    assert_eq!(tags.get("quartermaster.dev/cluster"), Some(&"test-cluster"));
    assert_eq!(tags.get("quartermaster.dev/nodepool"), Some(&"gpu"));
    assert_eq!(tags.get("Name"), Some(&"gpu-launch1"));
    assert_eq!(tags.get("team"), Some(&"ml"));

    // The launch template: IMDSv2 required, user data that joins the cluster after the
    // NodeClass's script.
    let templates = w
        .ec2
        .describe_launch_templates()
        .send()
        .await
        .expect("DescribeLaunchTemplates");
    let lt = templates
        .launch_templates()
        .iter()
        .find(|t| {
            t.launch_template_name()
                .is_some_and(|n| n.starts_with("quartermaster/test-cluster/default/"))
        })
        .expect("a launch template for the NodeClass");
    let data = w
        .ec2
        .describe_launch_template_versions()
        .launch_template_id(lt.launch_template_id().expect("id"))
        .send()
        .await
        .expect("DescribeLaunchTemplateVersions");
    let data = data.launch_template_versions()[0]
        .launch_template_data()
        .expect("template data")
        .clone();
    assert_eq!(
        data.metadata_options().and_then(|m| m.http_tokens()),
        Some(&t::LaunchTemplateHttpTokensState::Required)
    );
    let user_data = base64::engine::general_purpose::STANDARD
        .decode(data.user_data().expect("user data"))
        .expect("base64 user data");
    let user_data = String::from_utf8(user_data).expect("UTF-8 user data");
    let ours = user_data.find("kind: NodeConfig").expect("a NodeConfig");
    let theirs = user_data
        .find("from-the-node-class")
        .expect("the NodeClass's script");
    assert!(theirs < ours, "{user_data}");
    assert!(user_data.contains("apiServerEndpoint: https://api.test-cluster.example"));

    let got = w.cloud.get(&instance.provider_id).await.expect("get");
    assert_eq!(got.claim_name, "gpu-launch1");
    assert!(matches!(
        got.state,
        InstanceState::Pending | InstanceState::Running
    ));
    let listed = w.cloud.list().await.expect("list");
    assert_eq!(
        listed
            .iter()
            .map(|i| i.provider_id.as_str())
            .collect::<Vec<_>>(),
        [instance.provider_id.as_str()]
    );

    w.cloud.delete(&instance.provider_id).await.expect("delete");
    assert!(matches!(
        w.cloud.get(&instance.provider_id).await,
        Err(CloudError::NotFound { .. })
    ));
    assert!(matches!(
        w.cloud.delete(&instance.provider_id).await,
        Err(CloudError::NotFound { .. })
    ));
    assert!(w.cloud.list().await.expect("list").is_empty());
}

#[tokio::test]
async fn node_repair_reboots_an_instance_in_place_through_the_sdk() {
    let w = world().await;
    let r = request(
        &w,
        "gpu-reboot1",
        &[offering("g5.xlarge", "us-east-1a", OD)],
    );
    let instance = w.cloud.create(&r).await.expect("launch");
    w.cloud.reboot(&instance.provider_id).await.expect("reboot");
    let asked = w.proxy.bodies("RebootInstances");
    let id = instance.provider_id.rsplit('/').next().unwrap();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains(&format!("InstanceId.1={id}")),
        "{asked:?}"
    );
    // The same instance, still there.
    let got = w.cloud.get(&instance.provider_id).await.expect("get");
    assert_eq!(got.claim_name, "gpu-reboot1");
    // A throttled reboot is retried by the SDK and goes through; a gone instance is NotFound.
    w.proxy.inject(
        "RebootInstances",
        Fault::Throttle {
            retry_after_secs: 1,
        },
    );
    w.cloud
        .reboot(&instance.provider_id)
        .await
        .expect("reboot after throttling");
    assert_eq!(w.proxy.calls("RebootInstances"), 3);
    w.cloud.delete(&instance.provider_id).await.expect("delete");
    assert!(matches!(
        w.cloud.reboot(&instance.provider_id).await,
        Err(CloudError::NotFound { .. })
    ));
}

#[tokio::test]
async fn a_capacity_error_as_a_500_falls_through_to_the_next_offering_in_the_same_launch() {
    let w = world().await;
    w.proxy.inject("CreateFleet", Fault::CapacityError500);
    let r = request(
        &w,
        "gpu-ice500",
        &[
            offering("g5.xlarge", "us-east-1a", SPOT),
            offering("g5.xlarge", "us-east-1b", OD),
        ],
    );
    let instance = w.cloud.create(&r).await.expect("launch on the fallback");
    assert_eq!(
        (instance.zone.as_str(), instance.capacity_type),
        ("us-east-1b", OD)
    );
    // Tried once (no SDK retry of a capacity error), then the next offering.
    assert_eq!(w.proxy.calls("CreateFleet"), 2);
    assert_eq!(instances_of(&w, "gpu-ice500").await.len(), 1);
}

#[tokio::test]
async fn a_capacity_error_inside_a_200_fleet_response_falls_through_to_the_next_offering() {
    let w = world().await;
    w.proxy
        .inject("CreateFleet", Fault::CapacityInFleetResponse);
    let r = request(
        &w,
        "gpu-ice200",
        &[
            offering("g5.xlarge", "us-east-1a", SPOT),
            offering("g5.2xlarge", "us-east-1a", OD),
        ],
    );
    let instance = w.cloud.create(&r).await.expect("launch on the fallback");
    assert_eq!(
        (instance.instance_type.as_str(), instance.capacity_type),
        ("g5.2xlarge", OD)
    );
    assert_eq!(w.proxy.calls("CreateFleet"), 2);
}

#[tokio::test]
async fn every_offering_out_of_capacity_names_the_last_one() {
    let w = world().await;
    w.proxy
        .inject("CreateFleet", Fault::CapacityInFleetResponse);
    w.proxy.inject("CreateFleet", Fault::CapacityError500);
    let r = request(
        &w,
        "gpu-noice",
        &[
            offering("g5.xlarge", "us-east-1a", SPOT),
            offering("g5.xlarge", "us-east-1b", OD),
        ],
    );
    match w.cloud.create(&r).await {
        Err(CloudError::InsufficientCapacity {
            zone,
            capacity_type,
            ..
        }) => assert_eq!((zone.as_str(), capacity_type), ("us-east-1b", OD)),
        other => panic!("{other:?}"),
    }
    assert!(instances_of(&w, "gpu-noice").await.is_empty());
}

#[tokio::test]
async fn a_launch_retried_after_a_lost_response_creates_no_second_instance() {
    let w = world().await;
    w.proxy.inject("CreateFleet", Fault::LoseResponse);
    let r = request(&w, "gpu-crash1", &[offering("g5.xlarge", "us-east-1a", OD)]);
    let first = w.cloud.create(&r).await;
    assert!(
        matches!(first, Err(CloudError::Transient { .. })),
        "{first:?}"
    );
    // moto launched it; the controller restarts and launches the same claim again.
    let created = instances_of(&w, "gpu-crash1").await;
    assert_eq!(created.len(), 1);
    let again = w.cloud.create(&r).await.expect("the retried launch");
    assert!(
        again
            .provider_id
            .ends_with(created[0].instance_id().expect("id"))
    );
    assert_eq!(instances_of(&w, "gpu-crash1").await.len(), 1);
    assert_eq!(
        w.proxy.calls("CreateFleet"),
        1,
        "found by its tag, not launched again"
    );
}

#[tokio::test]
async fn a_leaked_instance_is_collected_by_the_sweep() {
    let w = world().await;
    let leaked = w
        .cloud
        .create(&request(
            &w,
            "gpu-leak1",
            &[offering("g5.xlarge", "us-east-1a", OD)],
        ))
        .await
        .expect("launch");
    let kept = w
        .cloud
        .create(&request(
            &w,
            "gpu-kept1",
            &[offering("g5.xlarge", "us-east-1b", OD)],
        ))
        .await
        .expect("launch");
    let known = BTreeSet::from(["gpu-kept1".to_owned()]);
    let later = chrono::Utc::now() + chrono::TimeDelta::minutes(5);
    quartermaster_controller::sweep::delete_leaks(
        w.cloud.clone(),
        known,
        Default::default(),
        later,
    )
    .await;
    assert!(matches!(
        w.cloud.get(&leaked.provider_id).await,
        Err(CloudError::NotFound { .. })
    ));
    w.cloud
        .get(&kept.provider_id)
        .await
        .expect("a claimed instance stays");
}

#[tokio::test]
async fn a_second_instance_of_a_claim_that_recorded_another_is_collected() {
    // A launch that landed late, after its retry had launched elsewhere: both instances carry
    // the claim's tag, and the sweep keeps only the one the NodeClaim recorded.
    let w = world().await;
    let first = w
        .cloud
        .create(&request(
            &w,
            "gpu-dup1",
            &[offering("g5.xlarge", "us-east-1a", OD)],
        ))
        .await
        .expect("launch");
    let a = instances_of(&w, "gpu-dup1").await.remove(0);
    w.ec2
        .run_instances()
        .image_id(a.image_id().expect("image"))
        .instance_type(a.instance_type().expect("type").clone())
        .min_count(1)
        .max_count(1)
        .set_subnet_id(a.subnet_id().map(str::to_owned))
        .tag_specifications(
            t::TagSpecification::builder()
                .resource_type(t::ResourceType::Instance)
                .set_tags(Some(a.tags().to_vec()))
                .build(),
        )
        .send()
        .await
        .expect("RunInstances");
    assert_eq!(instances_of(&w, "gpu-dup1").await.len(), 2);
    let known = BTreeSet::from(["gpu-dup1".to_owned()]);
    let recorded =
        std::collections::BTreeMap::from([("gpu-dup1".to_owned(), first.provider_id.clone())]);
    let later = chrono::Utc::now() + chrono::TimeDelta::minutes(5);
    quartermaster_controller::sweep::delete_leaks(w.cloud.clone(), known, recorded, later).await;
    let left: Vec<t::Instance> = instances_of(&w, "gpu-dup1")
        .await
        .into_iter()
        .filter(|i| i.state().and_then(|s| s.name()) != Some(&t::InstanceStateName::ShuttingDown))
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        first
            .provider_id
            .ends_with(left[0].instance_id().expect("id")),
        "the recorded instance stays"
    );
}

#[tokio::test]
async fn throttling_is_mapped_with_the_retry_after_and_describe_calls_are_retried() {
    let w = world().await;
    w.proxy.inject(
        "CreateFleet",
        Fault::Throttle {
            retry_after_secs: 7,
        },
    );
    let r = request(
        &w,
        "gpu-throttle",
        &[offering("g5.xlarge", "us-east-1a", OD)],
    );
    assert_eq!(
        w.cloud.create(&r).await,
        Err(CloudError::Throttled {
            retry_after: Some(Duration::from_secs(7))
        })
    );
    // A throttled Describe is retried by the SDK (with backoff) and the launch goes on.
    w.proxy.inject(
        "DescribeInstances",
        Fault::Throttle {
            retry_after_secs: 1,
        },
    );
    w.cloud.create(&r).await.expect("launch after throttling");
    assert_eq!(instances_of(&w, "gpu-throttle").await.len(), 1);
}

#[tokio::test]
async fn a_slow_endpoint_times_out_and_a_dead_one_fails_in_seconds() {
    let w = world().await;
    for _ in 0..3 {
        w.proxy
            .inject("DescribeInstances", Fault::Delay(Duration::from_secs(30)));
    }
    let cloud = AwsCloud::connect(
        impatient(w.proxy.url()),
        Catalog::embedded(),
        Arc::new(SystemClock),
    )
    .await;
    // Bounded generously: the point is seconds (timeouts of 5 s × 3 attempts), not minutes.
    let slow = tokio::time::timeout(Duration::from_secs(120), cloud.list())
        .await
        .expect("the call gave up by itself");
    assert!(
        matches!(slow, Err(CloudError::Transient { .. })),
        "{slow:?}"
    );

    let dead = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr")
    };
    let cloud = AwsCloud::connect(
        impatient(format!("http://{dead}")),
        Catalog::embedded(),
        Arc::new(SystemClock),
    )
    .await;
    let result = tokio::time::timeout(Duration::from_secs(120), cloud.list())
        .await
        .expect("the call gave up by itself");
    match result {
        Err(CloudError::Transient { message }) => {
            assert!(
                message.contains("could not be reached") || message.contains("in time"),
                "{message}"
            );
            assert!(
                !message.contains("testing"),
                "no credential in errors: {message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn instance_types_are_the_catalogs_where_ec2_offers_them_with_catalog_prices() {
    let w = world().await;
    let types = w.cloud.instance_types().await.expect("instance types");
    let offered = w
        .ec2
        .describe_instance_type_offerings()
        .location_type(t::LocationType::AvailabilityZone)
        .send()
        .await
        .expect("DescribeInstanceTypeOfferings");
    let zones: BTreeSet<(String, String)> = offered
        .instance_type_offerings()
        .iter()
        .filter_map(|o| {
            Some((
                o.instance_type()?.as_str().to_owned(),
                o.location()?.to_owned(),
            ))
        })
        .collect();
    let g5 = types
        .iter()
        .find(|t| t.name == "g5.xlarge")
        .expect("g5.xlarge is offered in us-east-1");
    let catalog = Catalog::embedded();
    let listed = catalog
        .get(quartermaster_pricing::Cloud::Aws, "g5.xlarge")
        .expect("in the catalog");
    for o in &g5.offerings {
        assert!(
            zones.contains(&("g5.xlarge".to_owned(), o.zone.clone())),
            "{}",
            o.zone
        );
        let price = listed
            .offerings
            .iter()
            .find(|c| c.zone == o.zone && c.capacity_type == o.capacity_type)
            .map(|c| c.price_per_hour);
        assert_eq!(Some(o.price_per_hour), price, "the catalog's price wins");
    }
    assert!(
        types
            .iter()
            .flat_map(|t| &t.offerings)
            .all(|o| o.region == "us-east-1")
    );
}

#[test]
fn the_controller_on_aws_without_the_cluster_endpoint_says_which_flag_is_missing() {
    let out = quartermaster_tests::quartermaster(&["controller", "--cloud-provider", "aws"]);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("--cluster-endpoint"),
        "stderr: {}",
        out.stderr
    );
}

#[tokio::test]
async fn interruption_notices_from_the_queue_become_events_and_are_deleted() {
    let w = world().await;
    let launched = w
        .cloud
        .create(&request(
            &w,
            "gpu-spot1",
            &[offering("g5.xlarge", "us-east-1a", SPOT)],
        ))
        .await
        .expect("launch");
    let id = launched
        .provider_id
        .rsplit('/')
        .next()
        .expect("id")
        .to_owned();
    let sqs = sqs_client(w._moto.addr).await;
    let url = sqs
        .create_queue()
        .queue_name("qm-interruptions")
        .send()
        .await
        .expect("CreateQueue")
        .queue_url()
        .expect("url")
        .to_owned();
    for body in [
        format!(r#"{{"version":"0","detail-type":"EC2 Spot Instance Interruption Warning","source":"aws.ec2","time":"2024-05-01T10:00:00Z","detail":{{"instance-id":"{id}","instance-action":"terminate"}}}}"#),
        r#"{"detail-type":"EC2 Instance Rebalance Recommendation","source":"aws.ec2","detail":{"instance-id":"i-other"}}"#.to_owned(),
        r#"{"detail-type":"EC2 Instance State-change Notification","source":"aws.ec2","detail":{"instance-id":"i-0notours","state":"terminated"}}"#.to_owned(),
    ] {
        sqs.send_message()
            .queue_url(&url)
            .message_body(body)
            .send()
            .await
            .expect("SendMessage");
    }
    let mut settings = settings(w.proxy.url());
    settings.interruption_queue = Some("qm-interruptions".into());
    let cloud = AwsCloud::connect(settings, Catalog::embedded(), Arc::new(SystemClock)).await;
    let mut events = Vec::new();
    for _ in 0..5 {
        events.extend(cloud.poll_events().await.expect("poll the queue"));
    }
    assert_eq!(
        events,
        [quartermaster_cloud::CloudEvent::Interruption {
            provider_id: launched.provider_id.clone(),
            terminates_at: "2024-05-01T10:02:00Z".parse().expect("time"),
        }]
    );
    let left = sqs
        .get_queue_attributes()
        .queue_url(&url)
        .attribute_names(aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
        .send()
        .await
        .expect("GetQueueAttributes");
    assert_eq!(
        left.attributes()
            .and_then(
                |a| a.get(&aws_sdk_sqs::types::QueueAttributeName::ApproximateNumberOfMessages)
            )
            .map(String::as_str),
        Some("0"),
        "every message handled is deleted"
    );
}

async fn sqs_client(moto: std::net::SocketAddr) -> aws_sdk_sqs::Client {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url(format!("http://{moto}"))
        .credentials_provider(aws_sdk_ec2::config::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .load()
        .await;
    aws_sdk_sqs::Client::new(&config)
}

/// The id of moto's first x86_64 AMI.
fn node_class_ami(w: &World) -> String {
    w.spec.ami_selector_terms[0]
        .id
        .clone()
        .expect("the world's AMI id")
}

/// The image of the launch template the instance of `claim` was launched from.
async fn launched_image(w: &World, claim: &str) -> String {
    let found = instances_of(w, claim).await;
    found[0].image_id().expect("image id").to_owned()
}

#[tokio::test]
async fn an_al2023_alias_resolves_the_eks_optimized_nvidia_ami_through_ssm() {
    let mut w = world().await;
    let ami = node_class_ami(&w);
    w.spec.ami_selector_terms = vec![
        serde_json::from_value(serde_json::json!({"alias": "al2023@latest"})).expect("alias term"),
    ];
    let mut settings = settings(w.proxy.url());
    settings.kubernetes_version = Some("1.33".into());
    w.cloud =
        Arc::new(AwsCloud::connect(settings, Catalog::embedded(), Arc::new(SystemClock)).await);
    // moto cannot hold the reserved /aws/service/... parameters: the proxy answers for SSM.
    w.proxy.inject(
        "GetParameter",
        Fault::JsonReply(format!(
            r#"{{"Parameter":{{"Name":"n","Type":"String","Value":"{ami}","Version":1}}}}"#
        )),
    );
    let r = request(&w, "gpu-alias1", &[offering("g5.xlarge", "us-east-1a", OD)]);
    w.cloud
        .create(&r)
        .await
        .expect("launch with the aliased AMI");
    let asked = w.proxy.bodies("GetParameter");
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(
        asked[0].contains(
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/nvidia/recommended/image_id"
        ),
        "{}",
        asked[0]
    );
    assert_eq!(launched_image(&w, "gpu-alias1").await, ami);
}

#[tokio::test]
async fn an_ssm_parameter_term_selects_the_ami_it_holds_and_an_alias_without_a_version_is_a_clear_error()
 {
    let mut w = world().await;
    let ami = node_class_ami(&w);
    let ssm = ssm_client(w._moto.addr).await;
    ssm.put_parameter()
        .name("/quartermaster-test/node-ami")
        .value(&ami)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .send()
        .await
        .expect("PutParameter");
    w.spec.ami_selector_terms = vec![
        serde_json::from_value(serde_json::json!({"ssmParameter": "/quartermaster-test/node-ami"}))
            .expect("ssmParameter term"),
    ];
    let r = request(&w, "gpu-ssm1", &[offering("g5.xlarge", "us-east-1a", OD)]);
    w.cloud
        .create(&r)
        .await
        .expect("launch with the parameter's AMI");
    assert_eq!(launched_image(&w, "gpu-ssm1").await, ami);

    // The world's cloud knows no Kubernetes version: an alias cannot resolve, and says why.
    w.spec.ami_selector_terms = vec![
        serde_json::from_value(serde_json::json!({"alias": "al2023@latest"})).expect("alias term"),
    ];
    let r = request(&w, "gpu-ssm2", &[offering("g5.xlarge", "us-east-1a", OD)]);
    match w.cloud.create(&r).await {
        Err(CloudError::InvalidRequest { message }) => {
            assert!(message.contains("Kubernetes version"), "{message}")
        }
        other => panic!("{other:?}"),
    }
}

async fn ssm_client(moto: std::net::SocketAddr) -> aws_sdk_ssm::Client {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .http_client(aws_smithy_http_client::Builder::new().build_http())
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url(format!("http://{moto}"))
        .credentials_provider(aws_sdk_ec2::config::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .load()
        .await;
    aws_sdk_ssm::Client::new(&config)
}

/// EC2's answer to DescribeCapacityReservations (moto does not hold reservations; the proxy
/// answers in EC2's shape): a Capacity Block of 4 p5.48xlarge (3 free) in state `block_state`
/// from `start` to `end`, and an ODCR of 2 g5.xlarge.
pub(crate) fn capacity_reservations_xml(block_state: &str, start: &str, end: &str) -> String {
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<DescribeCapacityReservationsResponse xmlns="http://ec2.amazonaws.com/doc/2016-11-15/">
  <requestId>r-1</requestId>
  <capacityReservationSet>
    <item>
      <capacityReservationId>cr-0h100block</capacityReservationId>
      <instanceType>p5.48xlarge</instanceType>
      <availabilityZone>us-east-1a</availabilityZone>
      <totalInstanceCount>4</totalInstanceCount>
      <availableInstanceCount>3</availableInstanceCount>
      <state>{block_state}</state>
      <startDate>{start}</startDate>
      <endDate>{end}</endDate>
      <reservationType>capacity-block</reservationType>
      <instanceMatchCriteria>targeted</instanceMatchCriteria>
      <tagSet><item><key>team</key><value>research</value></item></tagSet>
    </item>
    <item>
      <capacityReservationId>cr-0odcr</capacityReservationId>
      <instanceType>g5.xlarge</instanceType>
      <availabilityZone>us-east-1b</availabilityZone>
      <totalInstanceCount>2</totalInstanceCount>
      <availableInstanceCount>2</availableInstanceCount>
      <state>active</state>
      <reservationType>default</reservationType>
      <instanceMatchCriteria>open</instanceMatchCriteria>
      <tagSet/>
    </item>
  </capacityReservationSet>
</DescribeCapacityReservationsResponse>"#
    )
}

#[tokio::test]
async fn reservations_are_read_through_the_sdk_and_a_reserved_launch_targets_its_block() {
    use quartermaster_pricing::ReservationKind;
    use quartermaster_pricing::reservation::{LABEL_RESERVATION_ID, LABEL_RESERVATION_TYPE};
    let w = world().await;
    w.proxy.inject(
        "DescribeCapacityReservations",
        Fault::XmlReply {
            status: 200,
            body: capacity_reservations_xml(
                "active",
                "2026-12-05T11:30:00.000Z",
                "2026-12-08T11:30:00.000Z",
            ),
        },
    );
    let reservations = w
        .cloud
        .reservations()
        .await
        .expect("DescribeCapacityReservations");
    assert_eq!(reservations.len(), 2);
    let block = &reservations[0];
    assert_eq!(
        (
            block.id.as_str(),
            block.instance_type.as_str(),
            block.zone.as_str()
        ),
        ("cr-0h100block", "p5.48xlarge", "us-east-1a")
    );
    assert_eq!((block.count, block.available), (4, Some(3)));
    assert_eq!(block.kind, ReservationKind::CapacityBlock);
    assert_eq!(
        block.end.map(|e| e.to_rfc3339()),
        Some("2026-12-08T11:30:00+00:00".into())
    );
    assert_eq!(block.tags.get("team").map(String::as_str), Some("research"));
    assert_eq!(reservations[1].kind, ReservationKind::Default);
    assert_eq!(reservations[1].end, None);
    let asked = w.proxy.bodies("DescribeCapacityReservations");
    assert!(asked[0].contains("Filter.1.Name=state"), "{asked:?}");

    // Into the ODCR: the template targets it, the fleet uses reservations first; moto launches
    // it as on-demand, the instance is reported as reserved.
    let mut r = request(
        &w,
        "gpu-reserved1",
        &[offering("g5.xlarge", "us-east-1b", CapacityType::Reserved)],
    );
    r.labels
        .insert(LABEL_RESERVATION_ID.into(), "cr-0odcr".into());
    r.labels
        .insert(LABEL_RESERVATION_TYPE.into(), "default".into());
    let instance = w.cloud.create(&r).await.expect("reserved launch");
    assert_eq!(instance.capacity_type, CapacityType::Reserved);
    assert_eq!(instances_of(&w, "gpu-reserved1").await.len(), 1);
    let template = w.proxy.bodies("CreateLaunchTemplate").join("\n");
    assert!(
        template.contains("CapacityReservationTarget.CapacityReservationId=cr-0odcr"),
        "{template}"
    );
    assert!(!template.contains("MarketType"), "{template}");
    let fleet = w.proxy.bodies("CreateFleet").join("\n");
    assert!(
        fleet.contains("UsageStrategy=use-capacity-reservations-first"),
        "{fleet}"
    );
    // Into the block: market type capacity-block in the template, capacity-block capacity
    // from the fleet (moto launches no capacity-block fleet: only the request is checked).
    let mut r = request(
        &w,
        "gpu-reserved3",
        &[offering(
            "p5.48xlarge",
            "us-east-1a",
            CapacityType::Reserved,
        )],
    );
    r.labels
        .insert(LABEL_RESERVATION_ID.into(), "cr-0h100block".into());
    r.labels
        .insert(LABEL_RESERVATION_TYPE.into(), "capacity-block".into());
    let _ = w.cloud.create(&r).await;
    let template = w.proxy.bodies("CreateLaunchTemplate").join("\n");
    assert!(
        template.contains("CapacityReservationTarget.CapacityReservationId=cr-0h100block")
            && template.contains("InstanceMarketOptions.MarketType=capacity-block"),
        "{template}"
    );
    let fleet = w.proxy.bodies("CreateFleet").join("\n");
    assert!(
        fleet.contains("DefaultTargetCapacityType=capacity-block"),
        "{fleet}"
    );
    // A reserved request that names no reservation is refused before any call.
    let mut bare = request(
        &w,
        "gpu-reserved2",
        &[offering("g5.xlarge", "us-east-1a", CapacityType::Reserved)],
    );
    bare.labels.clear();
    let err = w
        .cloud
        .create(&bare)
        .await
        .expect_err("no reservation named");
    assert!(
        err.to_string().contains("names no capacity reservation"),
        "{err}"
    );
}
