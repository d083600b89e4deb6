//! `AzureNodeClass`: Azure VM launch configuration.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How to launch Azure virtual machines.
// `printcolumn(..)` repeats `type_ = "string"`, which clippy mistakes for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "quartermaster.dev",
    version = "v1",
    kind = "AzureNodeClass",
    plural = "azurenodeclasses",
    shortname = "aznc",
    category = "quartermaster",
    category = "nodeclass",
    status = "AzureNodeClassStatus",
    derive = "PartialEq",
    doc = "AzureNodeClass is the Azure VM launch configuration referenced by NodePools.",
    printcolumn(name = "Location", type_ = "string", json_path = ".spec.location"),
    printcolumn(
        name = "ResourceGroup",
        type_ = "string",
        json_path = ".spec.resourceGroup"
    ),
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
pub struct AzureNodeClassSpec {
    /// The subscription id (a GUID).
    pub subscription_id: String,
    /// The resource group VMs are created in.
    pub resource_group: String,
    /// The location (`eastus`).
    pub location: String,
    /// The VNet subnet's ARM id
    /// (`/subscriptions/…/resourceGroups/…/providers/Microsoft.Network/virtualNetworks/…/subnets/…`).
    pub subnet_id: String,
    /// The OS image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<AzureImage>,
    /// ARM ids of user-assigned managed identities to attach.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub managed_identities: Vec<String>,
    /// Azure tags for VMs and disks.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub tags: BTreeMap<String, String>,
    /// OS disk size in GB.
    #[serde(
        rename = "osDiskSizeGB",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(range(min = 1))]
    pub os_disk_size_gb: Option<i32>,
    /// The Secret whose value is the VM's custom data (cloud-init or the AKS node bootstrap
    /// script, as an AKS node pool's VMs receive it), read by the controller at launch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_secret_ref: Option<AzureBootstrapSecretRef>,
    /// The SSH public key (OpenSSH format) of the VMs' admin user `azureuser`; password log-in
    /// is always disabled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_public_key: Option<String>,
    /// The ARM id of a capacity reservation group
    /// (`/subscriptions/…/resourceGroups/…/providers/Microsoft.Compute/capacityReservationGroups/…`;
    /// AKS node pools name it the same). NodePools of this class may launch into the group's
    /// capacity reservations (when their requirements allow capacity type `reserved`): such a
    /// VM is created in the group and uses its reserved capacity for its size and zone.
    #[serde(
        rename = "capacityReservationGroupID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub capacity_reservation_group_id: Option<String>,
}

/// Where a VM's bootstrap custom data is: one key of a Secret.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AzureBootstrapSecretRef {
    /// The Secret's name.
    pub name: String,
    /// Its namespace; default the controller's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The key holding the custom data (plain text; the provider base64-encodes it); default
    /// `customData`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl AzureBootstrapSecretRef {
    /// The key holding the custom data (`customData` unless set).
    pub fn key_or_default(&self) -> &str {
        self.key.as_deref().unwrap_or("customData")
    }
}

/// An OS image: a family (`Ubuntu2204`, `AzureLinux`) or an image id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AzureImage {
    /// Image family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_family: Option<String>,
    /// Image (or gallery image version) ARM id; exclusive with `imageFamily`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// Resolved Azure resources and conditions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AzureNodeClassStatus {
    /// `Ready`, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The image id resolved from the family.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
}
