//! `AWSNodeClass`: EC2 launch configuration.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How to launch EC2 instances: region, networking, image, IAM and tags.
// `printcolumn(..)` repeats `type_ = "string"`, which clippy mistakes for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "quartermaster.dev",
    version = "v1",
    kind = "AWSNodeClass",
    plural = "awsnodeclasses",
    shortname = "awsnc",
    category = "quartermaster",
    category = "nodeclass",
    status = "AWSNodeClassStatus",
    derive = "PartialEq",
    doc = "AWSNodeClass is the EC2 launch configuration referenced by NodePools.",
    printcolumn(name = "Region", type_ = "string", json_path = ".spec.region"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AWSNodeClassSpec {
    /// The AWS region (`us-east-1`).
    pub region: String,
    /// Subnets to launch into; each term selects by `id` or by `tags`.
    #[serde(default)]
    pub subnet_selector_terms: Vec<SubnetSelectorTerm>,
    /// Security groups; each term selects by `id`, `name` or `tags`.
    #[serde(default)]
    pub security_group_selector_terms: Vec<SecurityGroupSelectorTerm>,
    /// The AMI family; required unless `amiSelectorTerms` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ami_family: Option<AmiFamily>,
    /// AMIs to use; required with `amiFamily: Custom`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ami_selector_terms: Vec<AmiSelectorTerm>,
    /// IAM role for the instance profile Quartermaster manages (exclusive with `instanceProfile`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// Existing instance profile (exclusive with `role`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
    /// Tags for instances, volumes and network interfaces.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// User data merged with the bootstrap script.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,
    /// Attach Elastic Fabric Adapters on instance types that support them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub efa: Option<bool>,
    /// Block device mappings (root volume size, type, encryption).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub block_device_mappings: Vec<BlockDeviceMapping>,
    /// Instance metadata service options.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_options: Option<MetadataOptions>,
}

/// Selects subnets by id or by tags.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SubnetSelectorTerm {
    /// Tags every selected subnet has (`"*"` matches any value).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// A subnet id (`subnet-0123`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// Selects security groups by id, name or tags.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecurityGroupSelectorTerm {
    /// Tags every selected group has.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// A security group id (`sg-0123`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// A security group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// Selects AMIs.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AmiSelectorTerm {
    /// An alias such as `al2023@latest` or `bottlerocket@v1.20.0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alias: Option<String>,
    /// Tags every selected AMI has.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// An AMI id (`ami-0123`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// An AMI name (wildcards allowed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The AMI owner (account id or `self` / `amazon`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// The AMI family, which decides the bootstrap format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum AmiFamily {
    /// Amazon Linux 2023.
    #[serde(rename = "AL2023")]
    Al2023,
    /// Bottlerocket.
    Bottlerocket,
    /// Custom AMIs from `amiSelectorTerms`; user data is passed through.
    Custom,
}

/// One block device mapping.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BlockDeviceMapping {
    /// The device name (`/dev/xvda`).
    pub device_name: String,
    /// The EBS volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebs: Option<EbsVolume>,
    /// Whether this is the root volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_volume: Option<bool>,
}

/// An EBS volume.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EbsVolume {
    /// Size (`100Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_size: Option<Quantity>,
    /// `gp3`, `gp2`, `io2`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_type: Option<String>,
    /// Provisioned IOPS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iops: Option<i64>,
    /// Provisioned throughput in MiB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throughput: Option<i64>,
    /// Encrypt the volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub encrypted: Option<bool>,
    /// Delete the volume with the instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delete_on_termination: Option<bool>,
    /// KMS key for encryption.
    #[serde(rename = "kmsKeyID", default, skip_serializing_if = "Option::is_none")]
    pub kms_key_id: Option<String>,
    /// Snapshot to create the volume from.
    #[serde(
        rename = "snapshotID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub snapshot_id: Option<String>,
}

/// Instance metadata service options.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MetadataOptions {
    /// `enabled` or `disabled`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["enabled", "disabled"]))]
    pub http_endpoint: Option<String>,
    /// `enabled` or `disabled`.
    #[serde(
        rename = "httpProtocolIPv6",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(extend("enum" = ["enabled", "disabled"]))]
    pub http_protocol_ipv6: Option<String>,
    /// Hop limit for metadata requests (1–64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub http_put_response_hop_limit: Option<i64>,
    /// `required` (IMDSv2) or `optional`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["required", "optional"]))]
    pub http_tokens: Option<String>,
}

/// Resolved AWS resources and conditions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AWSNodeClassStatus {
    /// `Ready`, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Subnets resolved from the selector terms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subnets: Vec<ResolvedSubnet>,
    /// Security groups resolved from the selector terms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub security_groups: Vec<ResolvedSecurityGroup>,
    /// AMIs resolved from the family or selector terms.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub amis: Vec<ResolvedAmi>,
    /// The instance profile in use.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_profile: Option<String>,
}

/// A resolved subnet.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedSubnet {
    /// Subnet id.
    pub id: String,
    /// Its availability zone.
    pub zone: String,
}

/// A resolved security group.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedSecurityGroup {
    /// Group id.
    pub id: String,
    /// Group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

/// A resolved AMI.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResolvedAmi {
    /// AMI id.
    pub id: String,
    /// AMI name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Which nodes it is for (architecture, accelerators).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<NodeSelectorRequirement>,
}
