//! The rules that count other pods: label selectors, topology spread and pod (anti-)affinity.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, PodAffinityTerm as K8sPodAffinityTerm, TopologySpreadConstraint,
    WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use quartermaster_policies::{Operator, Requirement, Requirements};
use quartermaster_solver::pod::{PodAffinityTerm, TopologySpread, WhenUnsatisfiable};

use crate::error::ClusterError;

use super::At;

/// A label selector as requirements on pod labels; `extra` adds `key In [value]` per
/// `matchLabelKeys` entry and `key NotIn [value]` per `mismatchLabelKeys` entry, with the value taken
/// from the pod's own labels (keys the pod lacks are skipped, as Kubernetes does).
pub(super) fn label_selector(
    selector: &LabelSelector,
    match_label_keys: &[String],
    mismatch_label_keys: &[String],
    own_labels: &BTreeMap<String, String>,
) -> Result<Requirements, (String, String)> {
    let mut out = selector
        .match_labels
        .as_ref()
        .map(Requirements::from_labels)
        .unwrap_or_default();
    for (i, e) in selector.match_expressions.iter().flatten().enumerate() {
        let field = format!("matchExpressions[{i}]");
        let op: Operator = e.operator.parse().map_err(|_| {
            (
                format!("{field}.operator"),
                format!(
                    "unknown operator {:?}: expected In, NotIn, Exists or DoesNotExist",
                    e.operator
                ),
            )
        })?;
        if op.is_numeric() {
            return Err((
                format!("{field}.operator"),
                format!(
                    "operator {op} is not allowed in a label selector: expected In, NotIn, Exists or DoesNotExist"
                ),
            ));
        }
        let requirement = Requirement::new(e.key.as_str(), op, e.values.iter().flatten().cloned())
            .map_err(|err| (field.clone(), err.to_string()))?;
        out.add(requirement);
    }
    for key in match_label_keys {
        if let Some(value) = own_labels.get(key) {
            out.add(Requirement::in_values(key.as_str(), [value.as_str()]));
        }
    }
    for key in mismatch_label_keys {
        if let Some(value) = own_labels.get(key) {
            out.add(
                Requirement::new(key.as_str(), Operator::NotIn, [value.as_str()])
                    .map_err(|err| ("mismatchLabelKeys".to_owned(), err.to_string()))?,
            );
        }
    }
    Ok(out)
}

/// Topology spread constraints. A constraint without a `labelSelector` counts no pods, so it can
/// never be violated: it is dropped with a note.
pub(crate) fn topology_spread(
    list: &[TopologySpreadConstraint],
    labels: &BTreeMap<String, String>,
    at: At<'_>,
    notes: &mut Vec<String>,
) -> Result<Vec<TopologySpread>, ClusterError> {
    let mut out = Vec::new();
    for (i, c) in list.iter().enumerate() {
        let path = format!("topologySpreadConstraints[{i}]");
        if c.max_skew < 1 {
            return Err(at.err(
                format!("{path}.maxSkew"),
                format!("must be at least 1, got {}", c.max_skew),
            ));
        }
        if c.topology_key.is_empty() {
            return Err(at.err(format!("{path}.topologyKey"), "must not be empty"));
        }
        let when_unsatisfiable = match c.when_unsatisfiable.as_str() {
            "DoNotSchedule" => WhenUnsatisfiable::DoNotSchedule,
            "ScheduleAnyway" => WhenUnsatisfiable::ScheduleAnyway,
            other => {
                return Err(at.err(
                    format!("{path}.whenUnsatisfiable"),
                    format!("unknown value {other:?}: expected DoNotSchedule or ScheduleAnyway"),
                ));
            }
        };
        let min_domains = match c.min_domains {
            None => None,
            Some(n) if n >= 1 && when_unsatisfiable == WhenUnsatisfiable::DoNotSchedule => {
                Some(n as u32)
            }
            Some(n) if n >= 1 => {
                return Err(at.err(
                    format!("{path}.minDomains"),
                    "may only be set with whenUnsatisfiable: DoNotSchedule",
                ));
            }
            Some(n) => {
                return Err(at.err(
                    format!("{path}.minDomains"),
                    format!("must be at least 1, got {n}"),
                ));
            }
        };
        let Some(selector) = &c.label_selector else {
            notes.push(format!(
                "{}: {}: no labelSelector, so it counts no pods; ignored",
                at.object,
                at.field(&path)
            ));
            continue;
        };
        let selector = label_selector(
            selector,
            c.match_label_keys.as_deref().unwrap_or_default(),
            &[],
            labels,
        )
        .map_err(|(field, reason)| at.err(format!("{path}.labelSelector.{field}"), reason))?;
        out.push(TopologySpread {
            topology_key: quartermaster_policies::labels::normalize_label_key(&c.topology_key)
                .to_owned(),
            max_skew: c.max_skew as u32,
            when_unsatisfiable,
            min_domains,
            selector,
        });
    }
    Ok(out)
}

/// One pod (anti-)affinity term, or `None` when it refers to no pods.
fn pod_affinity_term(
    term: &K8sPodAffinityTerm,
    preferred_weight: Option<i32>,
    labels: &BTreeMap<String, String>,
    at: At<'_>,
    path: &str,
    notes: &mut Vec<String>,
) -> Result<Option<PodAffinityTerm>, ClusterError> {
    if term.topology_key.is_empty() {
        return Err(at.err(format!("{path}.topologyKey"), "must not be empty"));
    }
    if let Some(ns) = &term.namespace_selector {
        let all = ns.match_labels.as_ref().is_none_or(BTreeMap::is_empty)
            && ns.match_expressions.as_ref().is_none_or(Vec::is_empty);
        let counted = match term.namespaces.as_deref() {
            Some(list) if !list.is_empty() => "the namespaces listed",
            _ => "the pod's own namespace",
        };
        notes.push(format!(
            "{}: {}.namespaceSelector{} ignored: planned counting pods in {counted} only",
            at.object,
            at.field(path),
            if all { " {} (all namespaces)" } else { "" },
        ));
    }
    let Some(selector) = &term.label_selector else {
        notes.push(format!(
            "{}: {}: no labelSelector, so it matches no pods; ignored",
            at.object,
            at.field(path)
        ));
        return Ok(None);
    };
    let selector = label_selector(
        selector,
        term.match_label_keys.as_deref().unwrap_or_default(),
        term.mismatch_label_keys.as_deref().unwrap_or_default(),
        labels,
    )
    .map_err(|(field, reason)| at.err(format!("{path}.labelSelector.{field}"), reason))?;
    Ok(Some(PodAffinityTerm {
        topology_key: quartermaster_policies::labels::normalize_label_key(&term.topology_key)
            .to_owned(),
        selector,
        namespaces: term.namespaces.clone().unwrap_or_default(),
        preferred_weight,
    }))
}

/// Pod affinity and anti-affinity terms, required then preferred: `(affinity, anti_affinity)`.
pub(crate) fn pod_affinity(
    affinity: Option<&Affinity>,
    labels: &BTreeMap<String, String>,
    at: At<'_>,
    notes: &mut Vec<String>,
) -> Result<(Vec<PodAffinityTerm>, Vec<PodAffinityTerm>), ClusterError> {
    let Some(affinity) = affinity else {
        return Ok((Vec::new(), Vec::new()));
    };
    let affinity_terms = affinity.pod_affinity.as_ref().map(|a| {
        (
            a.required_during_scheduling_ignored_during_execution
                .as_deref()
                .unwrap_or_default(),
            a.preferred_during_scheduling_ignored_during_execution
                .as_deref()
                .unwrap_or_default(),
        )
    });
    let anti_terms = affinity.pod_anti_affinity.as_ref().map(|a| {
        (
            a.required_during_scheduling_ignored_during_execution
                .as_deref()
                .unwrap_or_default(),
            a.preferred_during_scheduling_ignored_during_execution
                .as_deref()
                .unwrap_or_default(),
        )
    });
    let mut convert =
        |side: &str, terms: Option<(&[K8sPodAffinityTerm], &[WeightedPodAffinityTerm])>| {
            let mut out = Vec::new();
            let Some((required, preferred)) = terms else {
                return Ok(out);
            };
            for (i, term) in required.iter().enumerate() {
                let path = format!("{side}.requiredDuringSchedulingIgnoredDuringExecution[{i}]");
                out.extend(pod_affinity_term(term, None, labels, at, &path, notes)?);
            }
            for (i, weighted) in preferred.iter().enumerate() {
                let path = format!("{side}.preferredDuringSchedulingIgnoredDuringExecution[{i}]");
                if !(1..=100).contains(&weighted.weight) {
                    return Err(at.err(
                        format!("{path}.weight"),
                        format!("must be between 1 and 100, got {}", weighted.weight),
                    ));
                }
                let term_path = format!("{path}.podAffinityTerm");
                out.extend(pod_affinity_term(
                    &weighted.pod_affinity_term,
                    Some(weighted.weight),
                    labels,
                    at,
                    &term_path,
                    notes,
                )?);
            }
            Ok(out)
        };
    let affinity_out = convert("affinity.podAffinity", affinity_terms)?;
    let anti_out = convert("affinity.podAntiAffinity", anti_terms)?;
    Ok((affinity_out, anti_out))
}
