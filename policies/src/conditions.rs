//! Status condition types and helpers.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

/// The object is ready (NodePool, NodeClaim, NodeClasses).
pub const CONDITION_READY: &str = "Ready";
/// NodeClaim: the cloud instance was created.
pub const CONDITION_LAUNCHED: &str = "Launched";
/// NodeClaim: the instance joined the cluster as a Node.
pub const CONDITION_REGISTERED: &str = "Registered";
/// NodeClaim: the Node is ready and its startup taints are gone.
pub const CONDITION_INITIALIZED: &str = "Initialized";
/// NodeClaim: the node no longer matches its NodePool / NodeClass.
pub const CONDITION_DRIFTED: &str = "Drifted";
/// NodeClaim: the node is being disrupted (consolidated, expired, drifted).
pub const CONDITION_DISRUPTING: &str = "Disrupting";
/// NodeClaim: the node can be consolidated.
pub const CONDITION_CONSOLIDATABLE: &str = "Consolidatable";
/// NodePool: the referenced NodeClass exists and is ready.
pub const CONDITION_NODE_CLASS_READY: &str = "NodeClassReady";
/// NodePool: the spec passed validation.
pub const CONDITION_VALIDATION_SUCCEEDED: &str = "ValidationSucceeded";

/// The condition of type `type_`, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of type `type_` is present with status `"True"`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == "True")
}
