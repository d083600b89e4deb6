//! AWS drift through the real SDK against moto: an instance launched from an AWSNodeClass
//! whose `ssmParameter` AMI term later resolves to a newer image has drifted (`AMIDrift`), and
//! one whose subnet the NodeClass no longer selects too (`SubnetDrift`).

use std::collections::BTreeMap;
use std::sync::Arc;

use aws_sdk_ec2::types as t;
use quartermaster_aws::AwsCloud;
use quartermaster_cloud::{CloudProvider, LaunchRequest, NodeClassSpec, SystemClock};
use quartermaster_policies::AWSNodeClassSpec;
use quartermaster_pricing::{CapacityType, Catalog};

use crate::aws::{sdk_config, settings};
use crate::moto::Moto;

const PARAMETER: &str = "/quartermaster-test/drift-ami";

fn discovery(resource: t::ResourceType, value: &str) -> t::TagSpecification {
    t::TagSpecification::builder()
        .resource_type(resource)
        .tags(t::Tag::builder().key("discovery").value(value).build())
        .build()
}

async fn put_ami(ssm: &aws_sdk_ssm::Client, ami: &str) {
    ssm.put_parameter()
        .name(PARAMETER)
        .value(ami)
        .r#type(aws_sdk_ssm::types::ParameterType::String)
        .overwrite(true)
        .send()
        .await
        .expect("PutParameter");
}

#[tokio::test]
async fn an_instance_whose_ami_parameter_moved_or_whose_subnet_is_no_longer_selected_has_drifted() {
    let moto = Moto::lock().await;
    let config = sdk_config(format!("http://{}", moto.addr)).await;
    let ec2 = aws_sdk_ec2::Client::new(&config);
    let ssm = aws_sdk_ssm::Client::new(&config);

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
    let mut subnets = Vec::new();
    for (cidr, tag) in [("10.0.1.0/24", "nodes"), ("10.0.2.0/24", "nodes-next")] {
        let s = ec2
            .create_subnet()
            .vpc_id(&vpc)
            .cidr_block(cidr)
            .availability_zone("us-east-1a")
            .tag_specifications(discovery(t::ResourceType::Subnet, tag))
            .send()
            .await
            .expect("CreateSubnet");
        subnets.push(
            s.subnet()
                .and_then(|s| s.subnet_id())
                .expect("subnet id")
                .to_owned(),
        );
    }
    ec2.create_security_group()
        .group_name("nodes")
        .description("nodes")
        .vpc_id(&vpc)
        .tag_specifications(discovery(t::ResourceType::SecurityGroup, "nodes"))
        .send()
        .await
        .expect("CreateSecurityGroup");
    let images = ec2
        .describe_images()
        .owners("amazon")
        .send()
        .await
        .expect("DescribeImages");
    let amis: Vec<String> = images
        .images()
        .iter()
        .filter(|i| i.architecture() == Some(&t::ArchitectureValues::X8664))
        .filter_map(|i| i.image_id().map(str::to_owned))
        .take(2)
        .collect();
    assert_eq!(amis.len(), 2, "moto has two x86_64 AMIs");
    put_ami(&ssm, &amis[0]).await;

    let spec: AWSNodeClassSpec = serde_json::from_value(serde_json::json!({
        "subnetSelectorTerms": [{"tags": {"discovery": "nodes"}}],
        "securityGroupSelectorTerms": [{"tags": {"discovery": "nodes"}}],
        "amiSelectorTerms": [{"ssmParameter": PARAMETER}],
        "instanceProfile": "test-nodes",
    }))
    .expect("AWSNodeClass spec");
    let cloud = AwsCloud::connect(
        settings(format!("http://{}", moto.addr)),
        Catalog::embedded(),
        Arc::new(SystemClock),
    )
    .await;
    let request = LaunchRequest {
        claim_name: "drift-1".into(),
        node_pool: "general".into(),
        node_class: "default".into(),
        instance_type: "m6i.large".into(),
        zone: "us-east-1a".into(),
        capacity_type: CapacityType::OnDemand,
        price_per_hour: 0.096,
        labels: BTreeMap::new(),
        tags: BTreeMap::new(),
        fallbacks: Vec::new(),
        node_class_spec: Some(NodeClassSpec::Aws(Box::new(spec.clone()))),
    };
    let instance = cloud.create(&request).await.expect("launch");
    assert_eq!(
        instance
            .tags
            .get("quartermaster.dev/nodeclass")
            .map(String::as_str),
        Some("default"),
        "the instance names its NodeClass"
    );
    assert_eq!(
        cloud.is_drifted(&instance).await.expect("drift check"),
        None,
        "just launched from what the NodeClass selects"
    );

    // The parameter moves to a newer AMI (as the EKS-optimized alias does on a release).
    put_ami(&ssm, &amis[1]).await;
    let reason = cloud
        .is_drifted(&instance)
        .await
        .expect("drift check")
        .expect("drifted");
    assert!(reason.starts_with("AMIDrift"), "{reason}");
    assert!(
        reason.contains(&amis[0]) && reason.contains(&amis[1]),
        "{reason}"
    );

    // Back on its AMI, but the NodeClass now selects only the other subnet.
    put_ami(&ssm, &amis[0]).await;
    let mut moved = spec.clone();
    moved.subnet_selector_terms =
        serde_json::from_value(serde_json::json!([{"tags": {"discovery": "nodes-next"}}]))
            .expect("subnet terms");
    cloud.set_node_class("default", moved);
    let reason = cloud
        .is_drifted(&instance)
        .await
        .expect("drift check")
        .expect("drifted");
    assert!(reason.starts_with("SubnetDrift"), "{reason}");
    assert!(reason.contains(&subnets[0]), "{reason}");

    // An instance of a NodeClass this process never saw is not judged.
    let mut stranger = instance.clone();
    stranger
        .tags
        .insert("quartermaster.dev/nodeclass".into(), "unknown".into());
    assert_eq!(
        cloud.is_drifted(&stranger).await.expect("drift check"),
        None
    );

    // A restarted controller has launched nothing yet: the NodeClass the cluster has now
    // (observed through the trait, as the controller's sweep does) is enough to judge.
    let restarted = AwsCloud::connect(
        settings(format!("http://{}", moto.addr)),
        Catalog::embedded(),
        Arc::new(SystemClock),
    )
    .await;
    assert_eq!(
        restarted.is_drifted(&instance).await.expect("drift check"),
        None,
        "a NodeClass not observed yet is not judged"
    );
    let mut moved = spec.clone();
    moved.subnet_selector_terms =
        serde_json::from_value(serde_json::json!([{"tags": {"discovery": "nodes-next"}}]))
            .expect("subnet terms");
    restarted.node_class_observed("default", &NodeClassSpec::Aws(Box::new(moved)));
    let reason = restarted
        .is_drifted(&instance)
        .await
        .expect("drift check")
        .expect("drifted after a restart");
    assert!(reason.starts_with("SubnetDrift"), "{reason}");
}
