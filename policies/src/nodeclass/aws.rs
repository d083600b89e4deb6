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
    /// The AWS region (`us-east-1`); when unset, the cluster's region (Karpenter's
    /// EC2NodeClass has no such field: its region is the cluster's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
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
    /// Kubelet settings of the nodes (Karpenter v1 keeps them on the EC2NodeClass).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubelet: Option<KubeletConfiguration>,
    /// `RAID0`: build ephemeral storage from the instance-store volumes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_store_policy: Option<InstanceStorePolicy>,
    /// Capacity reservations (ODCRs, capacity blocks) the nodes may launch into.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capacity_reservation_selector_terms: Vec<CapacityReservationSelectorTerm>,
    /// Whether instances get a public IP address (default: the subnet's setting).
    #[serde(
        rename = "associatePublicIPAddress",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub associate_public_ip_address: Option<bool>,
    /// Enable EC2 detailed monitoring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detailed_monitoring: Option<bool>,
    /// The placement group to launch into, by `name` or `id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_group_selector: Option<PlacementGroupSelector>,
    /// Network interfaces to attach (card index, device index, `interface` or `efa-only`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_interfaces: Vec<NetworkInterface>,
    /// ENI connection-tracking timeouts, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection_tracking: Option<ConnectionTracking>,
    /// The EC2 launch context (an opaque string passed to CreateFleet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

/// Kubelet settings (Karpenter v1 `EC2NodeClass.spec.kubelet`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct KubeletConfiguration {
    /// Cluster DNS server addresses.
    #[serde(default, rename = "clusterDNS", skip_serializing_if = "Vec::is_empty")]
    pub cluster_dns: Vec<String>,
    /// Maximum pods per node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_pods: Option<i32>,
    /// Maximum pods per core (0 disables the limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub pods_per_core: Option<i32>,
    /// Resources reserved for system daemons (`cpu`, `memory`, `ephemeral-storage`, `pid`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub system_reserved: BTreeMap<String, String>,
    /// Resources reserved for Kubernetes daemons.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kube_reserved: BTreeMap<String, String>,
    /// Hard eviction thresholds (`memory.available: 5%`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_hard: BTreeMap<String, String>,
    /// Soft eviction thresholds.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_soft: BTreeMap<String, String>,
    /// Grace periods of the soft thresholds (`1m30s`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub eviction_soft_grace_period: BTreeMap<String, String>,
    /// Longest pod termination grace period honoured on soft eviction, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eviction_max_pod_grace_period: Option<i32>,
    /// Disk usage percentage that always triggers image garbage collection.
    #[serde(
        rename = "imageGCHighThresholdPercent",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_high_threshold_percent: Option<i32>,
    /// Disk usage percentage image garbage collection frees down to.
    #[serde(
        rename = "imageGCLowThresholdPercent",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 0, max = 100))]
    pub image_gc_low_threshold_percent: Option<i32>,
    /// Enforce CPU limits with CFS quota.
    #[serde(
        rename = "cpuCFSQuota",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub cpu_cfs_quota: Option<bool>,
}

/// How instance-store volumes are used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum InstanceStorePolicy {
    /// Stripe the instance-store volumes into one RAID-0 array for ephemeral storage.
    #[serde(rename = "RAID0")]
    Raid0,
}

/// Selects capacity reservations by id, or by tags (optionally with an owner).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CapacityReservationSelectorTerm {
    /// Tags every selected reservation has.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// A reservation id (`cr-0123`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The account that owns the reservation.
    #[serde(rename = "ownerID", default, skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    /// `open` or `targeted` reservations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["open", "targeted"]))]
    pub instance_match_criteria: Option<String>,
}

/// Selects one placement group by `name` or `id`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlacementGroupSelector {
    /// The placement group name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The placement group id (`pg-0123`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// One network interface of the launched instances.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NetworkInterface {
    /// The network card index.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub network_card_index: i32,
    /// The device index on the card.
    #[serde(default)]
    #[schemars(range(min = 0))]
    pub device_index: i32,
    /// `interface` (ENA, optionally with EFA) or `efa-only`.
    #[schemars(extend("enum" = ["interface", "efa-only"]))]
    pub interface_type: String,
}

/// ENI connection-tracking timeouts, in seconds.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConnectionTracking {
    /// Idle established TCP connections.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tcp_established_timeout: Option<i32>,
    /// Idle UDP stream flows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_stream_timeout: Option<i32>,
    /// Idle single-transaction UDP flows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_timeout: Option<i32>,
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
    /// An SSM parameter (name or ARN) holding the AMI id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssm_parameter: Option<String>,
}

/// The AMI family, which decides the bootstrap format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum AmiFamily {
    /// Amazon Linux 2.
    #[serde(rename = "AL2")]
    Al2,
    /// Amazon Linux 2023.
    #[serde(rename = "AL2023")]
    Al2023,
    /// Bottlerocket.
    Bottlerocket,
    /// Windows Server 2019.
    Windows2019,
    /// Windows Server 2022.
    Windows2022,
    /// Windows Server 2025.
    Windows2025,
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
    /// Initialization rate from the snapshot, in MiB/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_initialization_rate: Option<i64>,
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

impl AmiFamily {
    /// Every family, as written in manifests.
    pub const NAMES: [&'static str; 7] = [
        "AL2",
        "AL2023",
        "Bottlerocket",
        "Windows2019",
        "Windows2022",
        "Windows2025",
        "Custom",
    ];
}

/// The families an `amiSelectorTerms[].alias` may name (`family@version`).
pub const AMI_ALIAS_FAMILIES: [&str; 6] = [
    "al2",
    "al2023",
    "bottlerocket",
    "windows2019",
    "windows2022",
    "windows2025",
];

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
