//! # quartermaster-policies
//!
//! The API of Quartermaster, a cost-aware GPU node provisioner for
//! Kubernetes, and the pure logic that interprets it. Group
//! `quartermaster.dev`, version `v1`, all resources cluster-scoped:
//!
//! * [`NodePool`]: Karpenter-v1-shaped pool of nodes with requirements,
//!   limits (including `maxHourlyCost`), weight and disruption budgets;
//! * [`NodeClaim`]: one requested node and what was launched for it;
//! * [`AWSNodeClass`], [`GCPNodeClass`], [`AzureNodeClass`]: per-cloud launch
//!   configuration referenced by `nodeClassRef`.
//!
//! [`crds()`] returns their `CustomResourceDefinition`s. Alongside the types:
//!
//! * [`requirements`]: the label requirements algebra (`In`, `NotIn`,
//!   `Exists`, `DoesNotExist`, `Gt`, `Lt`, `Gte`, `Lte`, `minValues`) with
//!   intersection and Karpenter-style compatibility;
//! * [`quantity`] and [`duration`]: exact Kubernetes quantities and Go-style
//!   durations;
//! * [`limits`] and [`budget`]: NodePool limits and disruption budgets (time
//!   is always an argument; nothing reads the clock);
//! * [`validate`]: checks beyond the OpenAPI schema, collecting every
//!   problem with its field path ([`validate_manifest`]).
//!
//! The crate is pure: no I/O, no async runtime, no Kubernetes client.

pub mod budget;
pub mod common;
pub mod conditions;
pub mod dra;
pub mod duration;
pub mod error;
pub mod karpenter;
pub mod labels;
pub mod limits;
pub mod nodeclaim;
pub mod nodeclass;
pub mod nodepool;
pub mod preference;
pub mod quantity;
pub mod requirements;
pub mod validate;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

pub use budget::{Budget, BudgetNodes, DisruptionReason};
pub use common::{NodeClassReference, NodeSelectorRequirementWithMinValues, TemplateMetadata};
pub use error::{DurationError, PolicyError, QuantityError};
pub use limits::{LimitExceeded, Limits, Usage};
pub use nodeclaim::{NodeClaim, NodeClaimSpec, NodeClaimStatus, ResourceRequests};
pub use nodeclass::{
    AWSNodeClass, AWSNodeClassSpec, AzureNodeClass, AzureNodeClassSpec, GCPNodeClass,
    GCPNodeClassSpec,
};
pub use nodepool::{
    ConsolidationPolicy, Disruption, GpuSharingSpec, GpuSharingStrategy, NodeClaimTemplate,
    NodeClaimTemplateSpec, NodePool, NodePoolSpec, NodePoolStatus, RepairPolicySpec, RepairSpec,
};
pub use preference::{DEFAULT_PREFERENCE_BUDGET, PreferencePolicy, parse_preference_budget};
pub use quantity::{Millis, parse_quantity};
pub use requirements::{Incompatibility, LabelLookup, Operator, Requirement, Requirements};
pub use validate::{FieldError, ValidatedObject, validate_manifest};

/// The CustomResourceDefinitions of every Quartermaster resource, in a
/// stable order: NodePool, NodeClaim, AWSNodeClass, GCPNodeClass,
/// AzureNodeClass.
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![
        NodePool::crd(),
        NodeClaim::crd(),
        AWSNodeClass::crd(),
        GCPNodeClass::crd(),
        AzureNodeClass::crd(),
    ]
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
