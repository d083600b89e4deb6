//! Scheduling constraints of a pod spec in the solver's terms: node selectors and node affinity,
//! tolerations, topology spread and pod (anti-)affinity.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, NodeSelectorTerm, PodAffinityTerm as K8sPodAffinityTerm, PodSpec,
    Toleration as K8sToleration, TopologySpreadConstraint, WeightedPodAffinityTerm,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use quartermaster_policies::{Operator, Requirement, Requirements};
use quartermaster_solver::pod::{
    HOSTNAME, PodAffinityTerm, PreferredNodeTerm, TaintEffect, Toleration, TopologySpread,
    WhenUnsatisfiable,
};

use crate::error::ClusterError;

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

/// A label selector as requirements on pod labels; `extra` adds `key In [value]` per
/// `matchLabelKeys` entry and `key NotIn [value]` per `mismatchLabelKeys` entry, with the value taken
/// from the pod's own labels (keys the pod lacks are skipped, as Kubernetes does).
fn label_selector(
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

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use quartermaster_solver::pod::{TaintEffect, WhenUnsatisfiable};

    use crate::testing::{ingest, ingest_err, pod};

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    const APP: &str = "containers: [{name: a}]\n";

    #[test]
    fn node_selector_is_anded_into_each_ored_term() {
        let ingested = ingest(&pod(
            "p",
            &format!(
                "{APP}nodeSelector: {{kubernetes.io/arch: amd64}}\naffinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      nodeSelectorTerms:\n      - matchExpressions: [{{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}}]\n      - matchExpressions: [{{key: quartermaster.dev/instance-gpu-memory, operator: Gt, values: ['20000']}}]"
            ),
        ));
        let terms = &ingested.snapshot.pending[0].node_terms;
        assert_eq!(terms.len(), 2);
        let amd_in_a = labels(&[
            ("kubernetes.io/arch", "amd64"),
            ("topology.kubernetes.io/zone", "us-east-1a"),
        ]);
        let arm_in_a = labels(&[
            ("kubernetes.io/arch", "arm64"),
            ("topology.kubernetes.io/zone", "us-east-1a"),
        ]);
        assert!(terms[0].matches(&amd_in_a));
        assert!(
            !terms[0].matches(&arm_in_a),
            "nodeSelector applies to every term"
        );
        let big_gpu = labels(&[
            ("kubernetes.io/arch", "amd64"),
            ("quartermaster.dev/instance-gpu-memory", "81920"),
        ]);
        let small_gpu = labels(&[
            ("kubernetes.io/arch", "amd64"),
            ("quartermaster.dev/instance-gpu-memory", "16384"),
        ]);
        assert!(terms[1].matches(&big_gpu));
        assert!(!terms[1].matches(&small_gpu));
    }

    #[test]
    fn alias_keys_in_selectors_affinity_and_spread_become_canonical() {
        let ingested = ingest(&pod(
            "p",
            &format!(
                "{APP}nodeSelector: {{karpenter.sh/capacity-type: spot, nvidia.com/gpu.product: NVIDIA-A10G}}\naffinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      nodeSelectorTerms:\n      - matchExpressions: [{{key: karpenter.k8s.aws/instance-gpu-name, operator: In, values: [a10g]}}]\ntopologySpreadConstraints:\n- maxSkew: 1\n  topologyKey: karpenter.sh/capacity-type\n  whenUnsatisfiable: DoNotSchedule\n  labelSelector: {{matchLabels: {{app: p}}}}"
            ),
        ));
        let p = &ingested.snapshot.pending[0];
        let g5_spot = labels(&[
            ("quartermaster.dev/capacity-type", "spot"),
            ("quartermaster.dev/instance-gpu-name", "a10g"),
            ("quartermaster.dev/instance-gpu-product", "NVIDIA-A10G"),
        ]);
        let mut g5_on_demand = g5_spot.clone();
        g5_on_demand.insert("quartermaster.dev/capacity-type".into(), "on-demand".into());
        assert!(p.node_terms[0].matches(&g5_spot));
        assert!(!p.node_terms[0].matches(&g5_on_demand));
        assert_eq!(
            p.topology_spread[0].topology_key,
            "quartermaster.dev/capacity-type"
        );
    }

    #[test]
    fn node_selector_alone_is_one_term_and_no_constraint_is_none() {
        let s = ingest(&(pod("a", &format!("{APP}nodeSelector: {{team: ml}}")) + &pod("b", APP)))
            .snapshot;
        assert_eq!(s.pending[0].node_terms.len(), 1);
        assert!(s.pending[0].node_terms[0].matches(&labels(&[("team", "ml")])));
        assert!(s.pending[1].node_terms.is_empty());
    }

    #[test]
    fn match_fields_are_ignored_with_a_note_and_empty_terms_match_nothing() {
        let ingested = ingest(&pod(
            "p",
            &format!(
                "{APP}affinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      nodeSelectorTerms:\n      - matchFields: [{{key: metadata.name, operator: In, values: [node-1]}}]"
            ),
        ));
        assert!(
            ingested
                .notes
                .iter()
                .any(|n| n.contains("matchFields ignored")),
            "{:?}",
            ingested.notes
        );
        assert_eq!(ingested.snapshot.pending[0].node_terms.len(), 1);
        assert!(
            ingested.snapshot.pending[0].node_terms[0]
                .matches(&labels(&[("kubernetes.io/hostname", "x")]))
        );

        let ingested = ingest(&pod(
            "p",
            &format!(
                "{APP}affinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      nodeSelectorTerms: [{{}}]"
            ),
        ));
        let term = &ingested.snapshot.pending[0].node_terms[0];
        assert!(!term.matches(&labels(&[("kubernetes.io/hostname", "x")])));
        assert!(!term.matches(&labels(&[])));
    }

    #[test]
    fn preferred_node_terms_keep_their_weight() {
        let s = ingest(&pod(
            "p",
            &format!(
                "{APP}affinity:\n  nodeAffinity:\n    preferredDuringSchedulingIgnoredDuringExecution:\n    - weight: 30\n      preference: {{matchExpressions: [{{key: quartermaster.dev/capacity-type, operator: In, values: [spot]}}]}}"
            ),
        ))
        .snapshot;
        let preferred = &s.pending[0].preferred_node_terms;
        assert_eq!(preferred.len(), 1);
        assert_eq!(preferred[0].weight, 30);
        assert!(
            preferred[0]
                .requirements
                .matches(&labels(&[("quartermaster.dev/capacity-type", "spot")]))
        );
        let e = ingest_err(&pod(
            "p",
            &format!(
                "{APP}affinity:\n  nodeAffinity:\n    preferredDuringSchedulingIgnoredDuringExecution:\n    - weight: 0\n      preference: {{matchExpressions: [{{key: a, operator: Exists}}]}}"
            ),
        ));
        assert!(
            e.to_string()
                .contains("preferredDuringSchedulingIgnoredDuringExecution[0].weight"),
            "{e}"
        );
    }

    #[test]
    fn bad_operator_names_the_term() {
        let e = ingest_err(&pod(
            "p",
            &format!(
                "{APP}affinity:\n  nodeAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n      nodeSelectorTerms:\n      - matchExpressions: [{{key: a, operator: Near, values: [b]}}]"
            ),
        ));
        assert!(
            e.to_string().starts_with(
                "Pod/ns/p: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions: unknown operator"
            ),
            "{e}"
        );
    }

    #[test]
    fn tolerations() {
        let s = ingest(&pod(
            "p",
            &format!(
                "{APP}tolerations:\n- {{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}\n- {{key: team, value: ml}}\n- {{operator: Exists}}"
            ),
        ))
        .snapshot;
        let t = &s.pending[0].tolerations;
        assert_eq!(t.len(), 3);
        assert!(
            t[0].exists
                && t[0].key == "nvidia.com/gpu"
                && t[0].effect == Some(TaintEffect::NoSchedule)
        );
        assert!(!t[1].exists && t[1].value == "ml" && t[1].effect.is_none());
        assert!(t[2].exists && t[2].key.is_empty());
        let e = ingest_err(&pod(
            "p",
            &format!("{APP}tolerations: [{{key: a, effect: NoScheduleX}}]"),
        ));
        assert!(
            e.to_string()
                .starts_with("Pod/ns/p: spec.tolerations[0].effect: unknown effect"),
            "{e}"
        );
    }

    #[test]
    fn topology_spread_constraints() {
        let ingested = ingest(&pod(
            "p",
            &format!(
                "{APP}topologySpreadConstraints:\n- maxSkew: 1\n  topologyKey: topology.kubernetes.io/zone\n  whenUnsatisfiable: DoNotSchedule\n  minDomains: 3\n  labelSelector:\n    matchLabels: {{app: p}}\n    matchExpressions: [{{key: tier, operator: NotIn, values: [batch]}}]\n  matchLabelKeys: [app]\n- maxSkew: 2\n  topologyKey: kubernetes.io/hostname\n  whenUnsatisfiable: ScheduleAnyway\n  labelSelector: {{matchLabels: {{app: p}}}}\n- maxSkew: 1\n  topologyKey: kubernetes.io/hostname\n  whenUnsatisfiable: DoNotSchedule"
            ),
        ));
        let spread = &ingested.snapshot.pending[0].topology_spread;
        assert_eq!(
            spread.len(),
            2,
            "the constraint without a selector counts no pods and is dropped"
        );
        assert_eq!(spread[0].topology_key, "topology.kubernetes.io/zone");
        assert_eq!(spread[0].max_skew, 1);
        assert_eq!(spread[0].min_domains, Some(3));
        assert_eq!(
            spread[0].when_unsatisfiable,
            WhenUnsatisfiable::DoNotSchedule
        );
        assert!(spread[0].selector.matches(&labels(&[("app", "p")])));
        assert!(
            !spread[0]
                .selector
                .matches(&labels(&[("app", "p"), ("tier", "batch")]))
        );
        assert_eq!(
            spread[1].when_unsatisfiable,
            WhenUnsatisfiable::ScheduleAnyway
        );
        assert!(
            ingested
                .notes
                .iter()
                .any(|n| n.contains("topologySpreadConstraints[2]: no labelSelector")),
            "{:?}",
            ingested.notes
        );
        let e = ingest_err(&pod(
            "p",
            &format!(
                "{APP}topologySpreadConstraints: [{{maxSkew: 1, topologyKey: zone, whenUnsatisfiable: Sometimes, labelSelector: {{}}}}]"
            ),
        ));
        assert!(
            e.to_string()
                .contains("spec.topologySpreadConstraints[0].whenUnsatisfiable"),
            "{e}"
        );
    }

    #[test]
    fn pod_affinity_and_anti_affinity() {
        let ingested = ingest(&pod(
            "p",
            &format!(
                "{APP}affinity:
  podAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: topology.kubernetes.io/zone
      labelSelector: {{matchLabels: {{app: cache}}}}
      namespaces: [data]
  podAntiAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector: {{matchExpressions: [{{key: app, operator: In, values: [p]}}]}}
    preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 40
      podAffinityTerm:
        topologyKey: topology.kubernetes.io/zone
        labelSelector: {{matchLabels: {{app: p}}}}
        namespaceSelector: {{}}"
            ),
        ));
        let p = &ingested.snapshot.pending[0];
        assert_eq!(p.affinity.len(), 1);
        assert_eq!(p.affinity[0].namespaces, ["data"]);
        assert_eq!(p.affinity[0].preferred_weight, None);
        assert!(p.affinity[0].selector.matches(&labels(&[("app", "cache")])));
        assert_eq!(p.anti_affinity.len(), 2);
        assert_eq!(p.anti_affinity[0].topology_key, "kubernetes.io/hostname");
        assert_eq!(p.anti_affinity[0].preferred_weight, None);
        assert_eq!(p.anti_affinity[1].preferred_weight, Some(40));
        assert!(p.anti_affinity[1].namespaces.is_empty());
        assert!(
            ingested
                .notes
                .iter()
                .any(|n| n.contains("namespaceSelector {} (all namespaces) ignored")),
            "{:?}",
            ingested.notes
        );
        let e = ingest_err(&pod(
            "p",
            &format!(
                "{APP}affinity:\n  podAntiAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n    - {{topologyKey: kubernetes.io/hostname, labelSelector: {{matchExpressions: [{{key: app, operator: Gt, values: ['1']}}]}}}}"
            ),
        ));
        assert!(
            e.to_string().contains(
                "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector.matchExpressions[0].operator"
            ),
            "{e}"
        );
    }

    #[test]
    fn match_label_keys_narrow_the_selector_to_the_pods_own_values() {
        let s = ingest(&pod(
            "p",
            &format!(
                "{APP}affinity:\n  podAntiAffinity:\n    requiredDuringSchedulingIgnoredDuringExecution:\n    - topologyKey: kubernetes.io/hostname\n      labelSelector: {{matchExpressions: [{{key: app, operator: Exists}}]}}\n      matchLabelKeys: [app]\n      mismatchLabelKeys: [missing]"
            ),
        ))
        .snapshot;
        let sel = &s.pending[0].anti_affinity[0].selector;
        assert!(sel.matches(&labels(&[("app", "p")])));
        assert!(!sel.matches(&labels(&[("app", "q")])));
    }
}
