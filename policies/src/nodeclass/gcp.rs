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
    /// Which Compute Engine reservations the NodePools of this class may launch into (when
    /// their requirements allow capacity type `reserved`), in GCE's own terms
    /// (`ReservationAffinity`). Unset: none, and instances are sent without an affinity, as
    /// before (GCE's default then lets an on-demand VM consume a matching reservation on its
    /// own). Set: a launch into a reservation names it (`SPECIFIC_RESERVATION`; a reservation
    /// without `specificReservationRequired` cannot be named, so a launch into one asks for
    /// `ANY_RESERVATION`), and every other launch is sent `NO_RESERVATION`, so on-demand,
    /// spot and flex-start nodes never take a slot Quartermaster counts as free.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_affinity: Option<GcpReservationAffinity>,
}

/// The reservation key that names a reservation (`compute.googleapis.com/reservation-name`).
pub const RESERVATION_NAME_KEY: &str = "compute.googleapis.com/reservation-name";
/// The same key as the Compute Engine API reference spells it (`googleapis.com/reservation-name`);
/// accepted as [`RESERVATION_NAME_KEY`].
pub const RESERVATION_NAME_KEY_SHORT: &str = "googleapis.com/reservation-name";

/// Which reservations a GCPNodeClass's nodes may consume (Compute Engine `ReservationAffinity`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GcpReservationAffinity {
    /// `ANY_RESERVATION` (the default, as in Compute Engine: every reservation of the project
    /// that VMs consume automatically, not those with `specificReservationRequired`),
    /// `SPECIFIC_RESERVATION` (the reservations named in `values`) or `NO_RESERVATION`.
    #[serde(default)]
    pub consume_reservation_type: ConsumeReservationType,
    /// The key `values` are of: `compute.googleapis.com/reservation-name` (the default; the only
    /// key a Compute Engine reservation can be targeted by).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The reservation names (`SPECIFIC_RESERVATION` only; reservations of `spec.project`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
}

impl GcpReservationAffinity {
    /// The key (`compute.googleapis.com/reservation-name` unless set).
    pub fn key_or_default(&self) -> &str {
        self.key.as_deref().unwrap_or(RESERVATION_NAME_KEY)
    }
}

/// Compute Engine's `ReservationAffinity.consumeReservationType`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ConsumeReservationType {
    /// Any reservation that VMs consume automatically (not `specificReservationRequired`); the
    /// default.
    #[default]
    #[serde(rename = "ANY_RESERVATION")]
    AnyReservation,
    /// Only the reservations named in `values`.
    #[serde(rename = "SPECIFIC_RESERVATION")]
    SpecificReservation,
    /// No reservation.
    #[serde(rename = "NO_RESERVATION")]
    NoReservation,
}

impl ConsumeReservationType {
    /// As Compute Engine spells it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::AnyReservation => "ANY_RESERVATION",
            Self::SpecificReservation => "SPECIFIC_RESERVATION",
            Self::NoReservation => "NO_RESERVATION",
        }
    }
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
