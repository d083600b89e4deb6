//! Spec types shared by NodePool and NodeClaim.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A node selector requirement with Karpenter's `minValues` extension.
// `operator` is kept as text so that an unknown operator is reported by
// validation with its path rather than failing deserialisation.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSelectorRequirementWithMinValues {
    /// The label key.
    pub key: String,
    /// `In`, `NotIn`, `Exists`, `DoesNotExist`, `Gt`, `Lt`, `Gte` or `Lte`.
    #[schemars(extend("enum" = ["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", "Gte", "Lte"]))]
    pub operator: String,
    /// Values for `In`/`NotIn` (one or more), or the single integer for the
    /// numeric operators; empty for `Exists`/`DoesNotExist`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<String>,
    /// The minimum number of distinct values of this key that the instance
    /// types considered for a node must span (flexibility for spot).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 50))]
    pub min_values: Option<i32>,
}

impl NodeSelectorRequirementWithMinValues {
    /// A requirement without `minValues`.
    pub fn new<I, V>(key: impl Into<String>, operator: impl Into<String>, values: I) -> Self
    where
        I: IntoIterator<Item = V>,
        V: Into<String>,
    {
        Self {
            key: key.into(),
            operator: operator.into(),
            values: values.into_iter().map(Into::into).collect(),
            min_values: None,
        }
    }
}

/// A reference to the NodeClass that describes how to launch nodes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeClassReference {
    /// API group of the NodeClass (`quartermaster.dev`).
    pub group: String,
    /// `AWSNodeClass`, `GCPNodeClass` or `AzureNodeClass`.
    pub kind: String,
    /// Name of the NodeClass (cluster-scoped).
    pub name: String,
}

/// Labels and annotations stamped onto nodes launched from a template.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TemplateMetadata {
    /// Node labels.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    /// Node annotations.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl TemplateMetadata {
    /// Whether there are neither labels nor annotations.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.annotations.is_empty()
    }
}
