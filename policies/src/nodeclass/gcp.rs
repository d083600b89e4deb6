//! `GCPNodeClass`: Compute Engine launch configuration.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How to launch Compute Engine instances.
// `printcolumn(..)` repeats `type_ = "string"`, which clippy mistakes for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "quartermaster.dev",
    version = "v1",
    kind = "GCPNodeClass",
    plural = "gcpnodeclasses",
    shortname = "gcpnc",
    category = "quartermaster",
    category = "nodeclass",
    status = "GCPNodeClassStatus",
    derive = "PartialEq",
    doc = "GCPNodeClass is the Compute Engine launch configuration referenced by NodePools.",
    printcolumn(name = "Project", type_ = "string", json_path = ".spec.project"),
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
pub struct GCPNodeClassSpec {
    /// The project id.
    pub project: String,
    /// The region (`us-central1`).
    pub region: String,
    /// Zones to launch in (`us-central1-a`); all zones of the region when empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<String>,
    /// The boot image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<GcpImage>,
    /// The VPC network (name or self link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<String>,
    /// The subnetwork (name or self link).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subnetwork: Option<String>,
    /// The service account email the instances run as.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account: Option<String>,
    /// GCE labels for instances and disks.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Network tags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The boot disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<GcpDisk>,
    /// A GKE node pool's instance template
    /// (`projects/P/global/instanceTemplates/gke-CLUSTER-POOL-…`) the instances start from:
    /// its boot image and its `kube-env` metadata make the VM join the cluster. Fields set
    /// here (image, disk, network, labels, metadata) override the template's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_instance_template: Option<String>,
    /// Metadata items for the instances (added to the template's; a key given here wins).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, String>,
}

/// A boot image: an image family (optionally from another project) or a self link.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GcpImage {
    /// Image family (`cos-stable`, `ubuntu-accelerator-2204-amd64-with-nvidia-550`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub family: Option<String>,
    /// Project of the family (`cos-cloud`); defaults to `spec.project`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub project: Option<String>,
    /// A full image self link (exclusive with `family`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub self_link: Option<String>,
}

/// The boot disk.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GcpDisk {
    /// Size in GiB.
    #[serde(rename = "sizeGiB", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 10))]
    pub size_gib: Option<i64>,
    /// `pd-balanced`, `pd-ssd`, `hyperdisk-balanced`, ...
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub disk_type: Option<String>,
}

/// Resolved GCP resources and conditions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct GCPNodeClassStatus {
    /// `Ready`, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The image self link resolved from the family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
}
