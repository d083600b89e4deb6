//! The `NodeClaim` custom resource: one requested node.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::common::{NodeClassReference, NodeSelectorRequirementWithMinValues};
pub use crate::conditions::{
    CONDITION_CONSOLIDATABLE, CONDITION_DISRUPTING, CONDITION_DRIFTED, CONDITION_INITIALIZED,
    CONDITION_LAUNCHED, CONDITION_READY, CONDITION_REGISTERED,
};
use crate::conditions::{find_condition, is_condition_true};
use crate::duration::{parse_duration, parse_nillable_duration};
use crate::error::PolicyError;
use crate::requirements::Requirements;

/// A request for one node: the constraints it must meet and the resources
/// it must offer. Status records what was launched.
// `printcolumn(..)` repeats `type_ = "string"`, which clippy mistakes for duplicated attributes.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "quartermaster.dev",
    version = "v1",
    kind = "NodeClaim",
    plural = "nodeclaims",
    shortname = "nc",
    category = "quartermaster",
    status = "NodeClaimStatus",
    derive = "PartialEq",
    doc = "NodeClaim is a request for a single node and the record of the instance launched for it.",
    printcolumn(name = "Type", type_ = "string", json_path = ".status.instanceType"),
    printcolumn(
        name = "Capacity",
        type_ = "string",
        json_path = ".status.capacityType"
    ),
    printcolumn(name = "Zone", type_ = "string", json_path = ".status.zone"),
    printcolumn(name = "Node", type_ = "string", json_path = ".status.nodeName"),
    printcolumn(
        name = "Ready",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Ready\")].status"
    ),
    printcolumn(name = "Price/h", type_ = "number", json_path = ".status.pricePerHour"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    ),
    printcolumn(
        name = "ID",
        type_ = "string",
        json_path = ".status.providerID",
        priority = 1
    ),
    printcolumn(
        name = "NodePool",
        type_ = "string",
        json_path = ".metadata.labels.quartermaster\\.dev/nodepool",
        priority = 1
    ),
    printcolumn(
        name = "NodeClass",
        type_ = "string",
        json_path = ".spec.nodeClassRef.name",
        priority = 1
    )
)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClaimSpec {
    /// Constraints on the node's labels.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requirements: Vec<NodeSelectorRequirementWithMinValues>,
    /// Resources the node must offer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequests>,
    /// Taints the node carries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    /// Taints the node carries at startup.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub startup_taints: Vec<Taint>,
    /// The NodeClass with the cloud-specific launch configuration.
    pub node_class_ref: NodeClassReference,
    /// How long the node lives before it is replaced, or `"Never"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(([0-9]+(s|m|h))+|Never)$"))]
    pub expire_after: Option<String>,
    /// How long draining may take before the node is forcibly terminated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^([0-9]+(s|m|h))+$"))]
    pub termination_grace_period: Option<String>,
}

/// Requested resources.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResourceRequests {
    /// Minimum resources (`cpu`, `memory`, `nvidia.com/gpu`, `pods`, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
}

/// What was launched for a NodeClaim.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeClaimStatus {
    /// The cloud provider's id of the instance (`aws:///us-east-1a/i-0abc`).
    #[serde(
        rename = "providerID",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub provider_id: Option<String>,
    /// The Node's name once registered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The instance type launched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance_type: Option<String>,
    /// The zone launched in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// `on-demand` or `spot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity_type: Option<String>,
    /// Price at launch, in dollars per hour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<f64>,
    /// The node's capacity.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,
    /// The node's allocatable resources.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, Quantity>,
    /// The machine image used.
    #[serde(rename = "imageID", default, skip_serializing_if = "Option::is_none")]
    pub image_id: Option<String>,
    /// `Launched`, `Registered`, `Initialized`, `Ready`, `Drifted`, `Disrupting`, ...
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

impl NodeClaimStatus {
    /// The condition of type `type_`, if present.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        find_condition(&self.conditions, type_)
    }

    /// Whether the condition of type `type_` is `"True"`.
    pub fn is_true(&self, type_: &str) -> bool {
        is_condition_true(&self.conditions, type_)
    }
}

impl NodeClaim {
    /// The parsed requirements.
    pub fn requirements(&self) -> Result<Requirements, PolicyError> {
        Requirements::from_node_selector_requirements(&self.spec.requirements)
    }

    /// `expireAfter`; `None` when unset or `"Never"`.
    pub fn expire_after(&self) -> Result<Option<Duration>, PolicyError> {
        match self.spec.expire_after.as_deref() {
            Some(text) => Ok(parse_nillable_duration(text)?),
            None => Ok(None),
        }
    }

    /// `terminationGracePeriod`, if set.
    pub fn termination_grace_period(&self) -> Result<Option<Duration>, PolicyError> {
        self.spec
            .termination_grace_period
            .as_deref()
            .map(parse_duration)
            .transpose()
            .map_err(Into::into)
    }

    /// Whether the condition of type `type_` is `"True"`.
    pub fn is_condition_true(&self, type_: &str) -> bool {
        self.status.as_ref().is_some_and(|s| s.is_true(type_))
    }
}
