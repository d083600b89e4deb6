//! The soft constraints of the pending pods, one entry per workload and term.
//!
//! Pods of one workload carry the same terms, so a preference is a (pod group, kind, term)
//! with the pods that carry it; the pod group is the owning workload (`Deployment/ns/name`),
//! or the pod itself when it has none.

use std::collections::HashMap;

use crate::pod::{Pod, PodAffinityTerm, WhenUnsatisfiable, tolerates_all};
use crate::snapshot::{ClusterSnapshot, PreferenceRule};

/// The weight a `ScheduleAnyway` topology spread is weighed with against weighted terms (which
/// run 1–100): spreading replicas is asked for availability, so it comes first.
pub const SPREAD_WEIGHT: i32 = 100;

/// Which kind of soft constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum PreferenceKind {
    /// A `preferredDuringSchedulingIgnoredDuringExecution` node-affinity term.
    NodeAffinity,
    /// A preferred pod-affinity term.
    PodAffinity,
    /// A preferred pod-anti-affinity term.
    PodAntiAffinity,
    /// A `whenUnsatisfiable: ScheduleAnyway` topology spread constraint.
    TopologySpread,
}

impl PreferenceKind {
    /// The Kubernetes field name (`nodeAffinity`, `podAffinity`, `podAntiAffinity`,
    /// `topologySpread`), as `plan -o json` reports it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NodeAffinity => "nodeAffinity",
            Self::PodAffinity => "podAffinity",
            Self::PodAntiAffinity => "podAntiAffinity",
            Self::TopologySpread => "topologySpread",
        }
    }
}

impl std::fmt::Display for PreferenceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One soft constraint of one pod group.
#[derive(Debug, Clone)]
pub(crate) struct Preference {
    pub pod_group: String,
    pub kind: PreferenceKind,
    /// The term, e.g. `quartermaster.dev/capacity-type In [spot]`.
    pub detail: String,
    /// The term's weight ([`SPREAD_WEIGHT`] for spreads).
    pub weight: i32,
    /// The rule of the NodePool that governs the group's pods.
    pub rule: PreferenceRule,
    /// `(index into snapshot.pending, index into the pod's list of that kind)`.
    pub members: Vec<(usize, usize)>,
}

/// Every soft constraint of `snapshot.pending`, heaviest first (then by group, kind, term).
pub(crate) fn find(snapshot: &ClusterSnapshot) -> Vec<Preference> {
    let mut out: Vec<Preference> = Vec::new();
    let mut index: HashMap<(String, PreferenceKind, usize, String), usize> = HashMap::new();
    for (p, pod) in snapshot.pending.iter().enumerate() {
        if !has_preferences(pod) {
            continue;
        }
        let group = pod
            .owner
            .clone()
            .unwrap_or_else(|| format!("Pod/{}", pod.id));
        let rule = governing_rule(snapshot, pod);
        let mut add = |kind: PreferenceKind, slot: usize, weight: i32, detail: String| {
            let key = (group.clone(), kind, slot, detail);
            let i = *index.entry(key).or_insert_with_key(|key| {
                out.push(Preference {
                    pod_group: group.clone(),
                    kind,
                    detail: key.3.clone(),
                    weight,
                    rule,
                    members: Vec::new(),
                });
                out.len() - 1
            });
            out[i].members.push((p, slot));
        };
        for (slot, term) in pod.preferred_node_terms.iter().enumerate() {
            add(
                PreferenceKind::NodeAffinity,
                slot,
                term.weight,
                term.requirements.to_string(),
            );
        }
        for (slot, spread) in pod.topology_spread.iter().enumerate() {
            if spread.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway {
                add(
                    PreferenceKind::TopologySpread,
                    slot,
                    SPREAD_WEIGHT,
                    format!(
                        "maxSkew {} over {} of {}",
                        spread.max_skew,
                        spread.topology_key,
                        selector_text(&spread.selector.to_string())
                    ),
                );
            }
        }
        for (kind, terms) in [
            (PreferenceKind::PodAffinity, &pod.affinity),
            (PreferenceKind::PodAntiAffinity, &pod.anti_affinity),
        ] {
            for (slot, term) in terms.iter().enumerate() {
                if let Some(weight) = term.preferred_weight {
                    add(kind, slot, weight, affinity_text(term));
                }
            }
        }
    }
    out.sort_by(|a, b| {
        b.weight
            .cmp(&a.weight)
            .then_with(|| a.pod_group.cmp(&b.pod_group))
            .then(a.kind.cmp(&b.kind))
            .then_with(|| a.members[0].1.cmp(&b.members[0].1))
            .then_with(|| a.detail.cmp(&b.detail))
    });
    out
}

/// Whether `pod` carries any soft constraint.
pub(crate) fn has_preferences(pod: &Pod) -> bool {
    !pod.preferred_node_terms.is_empty()
        || pod
            .topology_spread
            .iter()
            .any(|s| s.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway)
        || pod.affinity.iter().any(|t| t.preferred_weight.is_some())
        || pod
            .anti_affinity
            .iter()
            .any(|t| t.preferred_weight.is_some())
}

/// The rule of the NodePool that governs `pod`'s preferences: of the pools whose taints it
/// tolerates and whose requirements one of its required node terms can meet, the heaviest
/// (Karpenter tries pools by weight), then by name. The default rule when none can host it.
fn governing_rule(snapshot: &ClusterSnapshot, pod: &Pod) -> PreferenceRule {
    snapshot
        .node_pools
        .iter()
        .filter(|pool| tolerates_all(&pod.tolerations, &pool.taints).is_ok())
        .filter(|pool| {
            pod.node_terms.is_empty()
                || pod
                    .node_terms
                    .iter()
                    .any(|t| pool.requirements.compatible(t).is_ok())
        })
        .max_by(|a, b| a.weight.cmp(&b.weight).then_with(|| b.name.cmp(&a.name)))
        .map_or_else(PreferenceRule::default, |pool| pool.preferences)
}

fn selector_text(selector: &str) -> String {
    if selector.is_empty() {
        "all pods".to_owned()
    } else {
        format!("pods with {selector}")
    }
}

fn affinity_text(term: &PodAffinityTerm) -> String {
    format!(
        "{} within {}",
        selector_text(&term.selector.to_string()),
        term.topology_key
    )
}
