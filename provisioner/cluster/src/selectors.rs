//! Scheduling constraints of a pod spec in the solver's terms: node selectors and node affinity,
//! tolerations, topology spread and pod (anti-)affinity.

use k8s_openapi::api::core::v1::{NodeSelectorTerm, PodSpec, Toleration as K8sToleration};
use quartermaster_policies::{Requirement, Requirements};
use quartermaster_solver::pod::{HOSTNAME, PreferredNodeTerm, TaintEffect, Toleration};

use crate::error::ClusterError;

mod pod_rules;
#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;

#[cfg(test)]
use pod_rules::label_selector;
pub(crate) use pod_rules::{pod_affinity, topology_spread};

/// Where a pod spec sits, for messages: the object and the path of its pod spec.
#[derive(Debug, Clone, Copy)]
pub(crate) struct At<'a> {
    /// `Kind/namespace/name`.
    pub object: &'a str,
    /// Path of the pod spec inside the object (`spec`, `spec.template.spec`).
    pub spec_path: &'a str,
}

impl At<'_> {
    pub(crate) fn err(&self, field: impl AsRef<str>, reason: impl Into<String>) -> ClusterError {
        ClusterError::invalid(
            self.object,
            format!("{}.{}", self.spec_path, field.as_ref()),
            reason,
        )
    }

    pub(crate) fn field(&self, field: impl AsRef<str>) -> String {
        format!("{}.{}", self.spec_path, field.as_ref())
    }
}

const NODE_AFFINITY_REQUIRED: &str =
    "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution";
const NODE_AFFINITY_PREFERRED: &str =
    "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution";

/// A term no node satisfies (Kubernetes: an empty node selector term matches no objects).
fn matches_nothing() -> Requirements {
    let mut r = Requirements::new();
    r.add(Requirement::exists(HOSTNAME));
    r.add(Requirement::does_not_exist(HOSTNAME));
    r
}

/// One `nodeSelectorTerm`'s `matchExpressions`; `matchFields` are ignored with a note.
fn node_selector_term(
    term: &NodeSelectorTerm,
    at: At<'_>,
    path: &str,
    notes: &mut Vec<String>,
) -> Result<Option<Requirements>, ClusterError> {
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if !fields.is_empty() {
        notes.push(format!(
            "{}: {}.{}.matchFields ignored (only label expressions are planned)",
            at.object, at.spec_path, path
        ));
    }
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    if expressions.is_empty() {
        return Ok(if fields.is_empty() {
            None
        } else {
            Some(Requirements::new())
        });
    }
    Requirements::from_k8s(expressions)
        .map(Some)
        .map_err(|e| at.err(format!("{path}.matchExpressions"), e.to_string()))
}

/// `nodeSelector` ANDed into each required node-affinity term (terms are ORed). Empty when the
/// pod may go anywhere.
pub(crate) fn node_terms(
    spec: &PodSpec,
    at: At<'_>,
    notes: &mut Vec<String>,
) -> Result<Vec<Requirements>, ClusterError> {
    let selector = spec
        .node_selector
        .as_ref()
        .map(Requirements::from_labels)
        .unwrap_or_default();
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let Some(required) = required else {
        return Ok(if selector.is_empty() {
            Vec::new()
        } else {
            vec![selector]
        });
    };
    let mut terms = Vec::new();
    for (i, term) in required.node_selector_terms.iter().enumerate() {
        let path = format!("{NODE_AFFINITY_REQUIRED}.nodeSelectorTerms[{i}]");
        if let Some(reqs) = node_selector_term(term, at, &path, notes)? {
            terms.push(selector.intersect(&reqs));
        }
    }
    if terms.is_empty() {
        // Kubernetes: a required node affinity whose terms are all empty matches no node.
        notes.push(format!(
            "{}: {}: no term has matchExpressions, so no node matches",
            at.object,
            at.field(NODE_AFFINITY_REQUIRED)
        ));
        terms.push(selector.intersect(&matches_nothing()));
    }
    Ok(terms)
}

/// Preferred node-affinity terms.
pub(crate) fn preferred_node_terms(
    spec: &PodSpec,
    at: At<'_>,
    notes: &mut Vec<String>,
) -> Result<Vec<PreferredNodeTerm>, ClusterError> {
    let preferred = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.preferred_during_scheduling_ignored_during_execution
                .as_deref()
        })
        .unwrap_or_default();
    let mut out = Vec::new();
    for (i, p) in preferred.iter().enumerate() {
        let path = format!("{NODE_AFFINITY_PREFERRED}[{i}]");
        if !(1..=100).contains(&p.weight) {
            return Err(at.err(
                format!("{path}.weight"),
                format!("must be between 1 and 100, got {}", p.weight),
            ));
        }
        if let Some(requirements) =
            node_selector_term(&p.preference, at, &format!("{path}.preference"), notes)?
        {
            out.push(PreferredNodeTerm {
                weight: p.weight,
                requirements,
            });
        }
    }
    Ok(out)
}

/// Parses a taint effect, naming the field on failure.
pub(crate) fn taint_effect(
    effect: &str,
    at: At<'_>,
    field: &str,
) -> Result<TaintEffect, ClusterError> {
    TaintEffect::parse(effect).ok_or_else(|| {
        at.err(
            field,
            format!(
                "unknown effect {effect:?}: expected NoSchedule, PreferNoSchedule or NoExecute"
            ),
        )
    })
}

/// Converts Kubernetes tolerations.
pub(crate) fn tolerations(
    list: &[K8sToleration],
    at: At<'_>,
    path: &str,
) -> Result<Vec<Toleration>, ClusterError> {
    let mut out = Vec::new();
    for (i, t) in list.iter().enumerate() {
        let exists = match t.operator.as_deref() {
            None | Some("Equal") | Some("") => false,
            Some("Exists") => true,
            Some(other) => {
                return Err(at.err(
                    format!("{path}[{i}].operator"),
                    format!("unknown operator {other:?}: expected Equal or Exists"),
                ));
            }
        };
        let effect = match t.effect.as_deref() {
            None | Some("") => None,
            Some(e) => Some(taint_effect(e, at, &format!("{path}[{i}].effect"))?),
        };
        out.push(Toleration {
            key: t.key.clone().unwrap_or_default(),
            exists,
            value: t.value.clone().unwrap_or_default(),
            effect,
        });
    }
    Ok(out)
}
