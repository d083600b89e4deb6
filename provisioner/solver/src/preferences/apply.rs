//! A snapshot whose pods carry only the preferences to honour.

use crate::pod::Pod;
use crate::snapshot::ClusterSnapshot;

use super::found::{Preference, PreferenceKind};

/// `snapshot` with every preference whose `keep` entry is false removed from its pods. The
/// preferences kept stay soft: the packer honours them and relaxes one only when a pod cannot
/// be placed otherwise.
pub(crate) fn keeping(
    snapshot: &ClusterSnapshot,
    preferences: &[Preference],
    keep: &[bool],
) -> ClusterSnapshot {
    // Per pending pod, the (kind, slot) entries to drop.
    let mut drop: Vec<Vec<(PreferenceKind, usize)>> = vec![Vec::new(); snapshot.pending.len()];
    for (p, _) in preferences.iter().zip(keep).filter(|(_, k)| !**k) {
        for &(pod, slot) in &p.members {
            drop[pod].push((p.kind, slot));
        }
    }
    let pending = snapshot
        .pending
        .iter()
        .zip(&drop)
        .map(|(pod, drop)| {
            if drop.is_empty() {
                pod.clone()
            } else {
                without(pod, drop)
            }
        })
        .collect();
    ClusterSnapshot {
        resources: snapshot.resources.clone(),
        pending,
        nodes: snapshot.nodes.clone(),
        node_pools: snapshot.node_pools.clone(),
        daemonsets: snapshot.daemonsets.clone(),
        unavailable: snapshot.unavailable.clone(),
        offering_limits: snapshot.offering_limits.clone(),
    }
}

fn without(pod: &Pod, drop: &[(PreferenceKind, usize)]) -> Pod {
    let dropped = |kind: PreferenceKind, slot: usize| drop.contains(&(kind, slot));
    let mut out = pod.clone();
    out.preferred_node_terms = keep_unless(&pod.preferred_node_terms, |i| {
        dropped(PreferenceKind::NodeAffinity, i)
    });
    out.topology_spread = keep_unless(&pod.topology_spread, |i| {
        dropped(PreferenceKind::TopologySpread, i)
    });
    out.affinity = keep_unless(&pod.affinity, |i| dropped(PreferenceKind::PodAffinity, i));
    out.anti_affinity = keep_unless(&pod.anti_affinity, |i| {
        dropped(PreferenceKind::PodAntiAffinity, i)
    });
    out
}

fn keep_unless<T: Clone>(items: &[T], dropped: impl Fn(usize) -> bool) -> Vec<T> {
    items
        .iter()
        .enumerate()
        .filter(|(i, _)| !dropped(*i))
        .map(|(_, t)| t.clone())
        .collect()
}
