//! Who binds pods in a simulation. In a cluster the kube-scheduler does, and it does not read
//! the provisioner's nominations: [`Binder::Scheduler`] (the default) plays it, so a run shows
//! what happens when pods land elsewhere than planned. [`Binder::Planned`] binds every pod
//! where the engine planned it (the best case, to compare).
//!
//! The stand-in follows the kube-scheduler's default profile as far as the simulated cluster
//! has the facts: pods in queue order (oldest first), filters (node unschedulable, taints and
//! tolerations, node affinity, resources fit, host ports, required inter-pod affinity and
//! anti-affinity, `DoNotSchedule` topology spread), then scores (`NodeResourcesFit`
//! LeastAllocated and `NodeResourcesBalancedAllocation` over CPU and memory, weight 1 each, and
//! `TaintToleration` weight 3: untolerated `PreferNoSchedule` taints, counted as one whatever
//! their number);
//! ties go to the first node by name (the real one picks at random among them).

use std::collections::BTreeMap;

use quartermaster_solver::pod::{PodAffinityTerm, WhenUnsatisfiable, tolerates_all};
use quartermaster_solver::{Pod, Resources};

use crate::cluster::{Cluster, Node};

/// Who binds pods in a simulation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Binder {
    /// A stand-in for the kube-scheduler's default profile: filters, then LeastAllocated and
    /// balanced allocation, ignoring nominations.
    #[default]
    Scheduler,
    /// The same with `NodeResourcesFit` scoring `MostAllocated` (the profile GPU clusters use to
    /// pack): the fullest node that fits wins.
    MostAllocated,
    /// Every pod goes where the engine planned it (`Action::Bind`).
    Planned,
}

impl Binder {
    /// Whether a kube-scheduler stand-in binds (not the engine's plan).
    pub fn is_scheduler(self) -> bool {
        self != Self::Planned
    }

    /// How the engine should expect this binder to score nodes.
    pub fn scoring(self) -> quartermaster_engine::SchedulerScoring {
        match self {
            Self::Scheduler => quartermaster_engine::SchedulerScoring::LeastAllocated,
            Self::MostAllocated => quartermaster_engine::SchedulerScoring::MostAllocated,
            Self::Planned => quartermaster_engine::SchedulerScoring::FollowsPlan,
        }
    }

    /// The name used on the command line and in summaries.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduler => "scheduler",
            Self::MostAllocated => "most-allocated",
            Self::Planned => "planned",
        }
    }
}

/// The node the kube-scheduler would bind `pod` to now, if any. `anti_affine_residents`:
/// whether any running pod has a required anti-affinity term (else that filter is skipped).
pub fn choose<'c>(
    cluster: &'c Cluster,
    pod: &Pod,
    anti_affine_residents: bool,
    binder: Binder,
) -> Option<&'c str> {
    let most = binder == Binder::MostAllocated;
    let mut best: Option<(i64, &str)> = None;
    for (name, node) in cluster.nodes() {
        // The score is arithmetic; a node that cannot beat the best so far is not filtered
        // further (every filter must pass for a node to win, so the winner is the same).
        let Some(score) = score(node, pod, most) else {
            continue;
        };
        if best.is_some_and(|(b, _)| b >= score)
            || !labels_admit(node, pod)
            || !feasible_with_pods(cluster, node, pod, anti_affine_residents)
        {
            continue;
        }
        best = Some((score, name.as_str()));
    }
    best.map(|(_, name)| name)
}

/// The most of each resource any schedulable node has free (element-wise, over nodes), or
/// `None` without one: a pod asking for more of some resource fits on no node, and
/// [`choose`] need not look. Binding only takes room, so a bound found before a scheduling
/// cycle holds for all of it.
pub fn most_free(cluster: &Cluster) -> Option<Resources> {
    cluster
        .nodes()
        .filter(|(_, n)| !n.cordoned)
        .map(|(_, n)| n.view.allocatable - n.used - n.overhead)
        .reduce(|a, b| Resources::max(&a, &b))
}

/// Whether a pod has a required anti-affinity term (which binds other pods too).
pub fn has_required_anti_affinity(pod: &Pod) -> bool {
    pod.anti_affinity
        .iter()
        .any(|t| t.preferred_weight.is_none())
}

/// The node's score for `pod` when it is schedulable and the pod's requests fit, else `None`.
/// LeastAllocated (or MostAllocated, `most`) plus BalancedAllocation, 0..=200. The filters that
/// compare strings are [`labels_admit`]'s.
fn score(node: &Node, pod: &Pod, most: bool) -> Option<i64> {
    if node.cordoned {
        return None;
    }
    let requested = node.used + node.overhead + pod.requests;
    quartermaster_engine::kube_scheduler_score(
        &node.view.allocatable,
        &requested,
        &node.view.taints,
        pod,
        most,
    )
}

/// The per-node filters on strings: the node's taints tolerated, its labels matching the
/// pod's required node affinity.
fn labels_admit(node: &Node, pod: &Pod) -> bool {
    tolerates_all(&pod.tolerations, &node.view.taints).is_ok()
        && (pod.node_terms.is_empty()
            || pod.node_terms.iter().any(|t| t.matches(&node.view.labels)))
}

/// The filters that look at other pods: host ports, required (anti-)affinity both ways and
/// `DoNotSchedule` topology spread.
fn feasible_with_pods(
    cluster: &Cluster,
    node: &Node,
    pod: &Pod,
    anti_affine_residents: bool,
) -> bool {
    let residents = || node.pods.iter().filter_map(|id| cluster.pod(id));
    if !pod.host_ports.is_empty()
        && residents().any(|r| {
            r.host_ports
                .iter()
                .any(|h| pod.host_ports.iter().any(|p| p.conflicts(h)))
        })
    {
        return false;
    }
    let labels = &node.view.labels;
    let required = |terms: &[PodAffinityTerm]| -> Vec<PodAffinityTerm> {
        terms
            .iter()
            .filter(|t| t.preferred_weight.is_none())
            .cloned()
            .collect()
    };
    // Pods in the node's domain for `key`, anywhere in the cluster.
    let in_domain = |key: &str| -> Vec<&Pod> {
        let Some(value) = labels.get(key) else {
            return Vec::new();
        };
        cluster
            .nodes()
            .filter(|(_, n)| n.view.labels.get(key) == Some(value))
            .flat_map(|(_, n)| n.pods.iter().filter_map(|id| cluster.pod(id)))
            .collect()
    };
    for term in required(&pod.anti_affinity) {
        if in_domain(&term.topology_key)
            .iter()
            .any(|other| selects(&term, pod, other))
        {
            return false;
        }
    }
    // Existing pods' required anti-affinity against this pod.
    for (_, other_node) in cluster.nodes().filter(|_| anti_affine_residents) {
        for other in other_node.pods.iter().filter_map(|id| cluster.pod(id)) {
            for term in required(&other.anti_affinity) {
                let same_domain = other_node
                    .view
                    .labels
                    .get(&term.topology_key)
                    .is_some_and(|v| labels.get(&term.topology_key) == Some(v));
                if same_domain && selects(&term, other, pod) {
                    return false;
                }
            }
        }
    }
    for term in required(&pod.affinity) {
        let here = in_domain(&term.topology_key)
            .iter()
            .any(|other| selects(&term, pod, other));
        if here {
            continue;
        }
        // The first pod of a group that selects itself may go anywhere (as the scheduler rules).
        let anywhere = cluster
            .nodes()
            .flat_map(|(_, n)| n.pods.iter().filter_map(|id| cluster.pod(id)))
            .any(|other| selects(&term, pod, other));
        if anywhere || !selects(&term, pod, pod) || !labels.contains_key(&term.topology_key) {
            return false;
        }
    }
    for spread in &pod.topology_spread {
        if spread.when_unsatisfiable != WhenUnsatisfiable::DoNotSchedule {
            continue;
        }
        let Some(here) = labels.get(&spread.topology_key) else {
            return false;
        };
        // Domains of the nodes the pod's node affinity allows, with their matching pods.
        let mut counts: BTreeMap<&str, i64> = BTreeMap::new();
        for (_, n) in cluster.nodes() {
            if !pod.node_terms.is_empty()
                && !pod.node_terms.iter().any(|t| t.matches(&n.view.labels))
            {
                continue;
            }
            let Some(domain) = n.view.labels.get(&spread.topology_key) else {
                continue;
            };
            let matching = n
                .pods
                .iter()
                .filter_map(|id| cluster.pod(id))
                .filter(|o| {
                    o.id.namespace == pod.id.namespace && spread.selector.matches(&o.labels)
                })
                .count() as i64;
            *counts.entry(domain.as_str()).or_default() += matching;
        }
        let min = counts.values().copied().min().unwrap_or(0);
        let mine = counts.get(here.as_str()).copied().unwrap_or(0);
        if mine + 1 - min > i64::from(spread.max_skew) {
            return false;
        }
    }
    true
}

/// Whether `term` of `owner` selects `other` (its namespaces, or the owner's own by default).
fn selects(term: &PodAffinityTerm, owner: &Pod, other: &Pod) -> bool {
    let namespace_ok = if term.namespaces.is_empty() {
        other.id.namespace == owner.id.namespace
    } else {
        term.namespaces.contains(&other.id.namespace)
    };
    namespace_ok && term.selector.matches(&other.labels)
}
