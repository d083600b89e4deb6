//! What a move saves once the kube-scheduler has carried it out. A move plans where the pods it
//! displaces go, but the kube-scheduler binds them by its own scores and reads no nomination:
//! by the default profile's LeastAllocated over CPU and memory, a 1-GPU pod prefers an empty
//! 4-GPU node (48 vCPUs, barely used) to the empty 1-GPU node planned for it, and the 2-GPU pods
//! planned onto the 4-GPU node then fit nowhere. New nodes are bought for them, the fleet ends no
//! cheaper, and the next pass sees another move to make: on a real API server 200 GPU pods went
//! through a 75-node move every minute.
//!
//! So before a move is made, the scheduler's choice is replayed: the displaced pods, in the
//! order they come back (node by node, as evicted), each onto the node that fits and scores best
//! among the nodes the move leaves and its replacements. Replacements it leaves empty go again;
//! pods it leaves without a node get new ones, solved from scratch. The move is made only when
//! what is left still saves the configured margin. The replay knows resources, taints and
//! required node affinity; pod (anti-)affinity, host ports and spread are left to the plan.

use std::collections::BTreeMap;

use quartermaster_solver::pod::{Taint, TaintEffect, tolerates_all};
use quartermaster_solver::resources::{CPU, MEMORY};
use quartermaster_solver::{Pod, Resources};

/// How the cluster's kube-scheduler scores nodes (`EngineConfig::scheduler_scoring`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SchedulerScoring {
    /// The default profile: `NodeResourcesFit` LeastAllocated (the emptiest node by CPU and
    /// memory) and `NodeResourcesBalancedAllocation`.
    #[default]
    LeastAllocated,
    /// A packing profile: `NodeResourcesFit` MostAllocated (the fullest node that fits).
    MostAllocated,
    /// Pods go where the engine planned them (nothing to replay).
    FollowsPlan,
}

/// A node as the replay sees it.
pub(crate) struct Bin<'a> {
    /// What pods may use.
    pub allocatable: Resources,
    /// What pods (DaemonSet pods included) already request.
    pub used: Resources,
    pub labels: &'a BTreeMap<String, String>,
    pub taints: &'a [Taint],
}

/// Binds `pods`, in order, as the kube-scheduler does (`most`: MostAllocated, else
/// LeastAllocated) among `bins`, filling them as it goes: per bin whether it received a pod, and
/// the indices of the pods that found no node.
pub(crate) fn replay(mut bins: Vec<Bin<'_>>, pods: &[&Pod], most: bool) -> (Vec<bool>, Vec<usize>) {
    let mut used = vec![false; bins.len()];
    let mut left_over = Vec::new();
    for (k, pod) in pods.iter().enumerate() {
        let mut best: Option<(i64, usize)> = None;
        for (i, bin) in bins.iter().enumerate() {
            let Some(score) = score(bin, pod, most) else {
                continue;
            };
            if best.is_some_and(|(b, _)| b >= score) || !admits(bin, pod) {
                continue;
            }
            best = Some((score, i));
        }
        match best {
            Some((_, i)) => {
                bins[i].used += pod.requests;
                used[i] = true;
            }
            None => left_over.push(k),
        }
    }
    (used, left_over)
}

fn score(bin: &Bin<'_>, pod: &Pod, most: bool) -> Option<i64> {
    kube_scheduler_score(
        &bin.allocatable,
        &(bin.used + pod.requests),
        bin.taints,
        pod,
        most,
    )
}

/// A node's score for `pod` as the kube-scheduler's default profile gives it, or `None` when
/// `requested` (what the node's pods, this one included, request) does not fit `allocatable`:
/// `NodeResourcesFit` LeastAllocated (or MostAllocated, `most`) plus
/// `NodeResourcesBalancedAllocation` over CPU and memory, weight 1 each, and `TaintToleration`
/// (weight 3) against untolerated `PreferNoSchedule` taints (counted as one whatever their
/// number), 0..=500. The simulator's stand-in for the kube-scheduler scores with it too.
pub fn kube_scheduler_score(
    allocatable: &Resources,
    requested: &Resources,
    taints: &[Taint],
    pod: &Pod,
    most: bool,
) -> Option<i64> {
    if requested.first_excess(allocatable).is_some() {
        return None;
    }
    let fraction = |slot: usize| {
        let alloc = allocatable.get(slot);
        if alloc <= 0 {
            return 0.0;
        }
        requested.get(slot) as f64 / alloc as f64
    };
    let (cpu, mem) = (fraction(CPU), fraction(MEMORY));
    let allocated = if most {
        (cpu + mem) / 2.0 * 100.0
    } else {
        ((1.0 - cpu) + (1.0 - mem)) / 2.0 * 100.0
    };
    let balanced = (1.0 - (cpu - mem).abs() / 2.0) * 100.0;
    let preferred = !taints.iter().any(|t| {
        t.effect == TaintEffect::PreferNoSchedule
            && !pod.tolerations.iter().any(|tol| tol.tolerates(t))
    });
    let taints = if preferred { 300.0 } else { 0.0 };
    Some((allocated + balanced + taints).round() as i64)
}

/// The node's taints tolerated and its labels matching the pod's required node affinity.
fn admits(bin: &Bin<'_>, pod: &Pod) -> bool {
    tolerates_all(&pod.tolerations, bin.taints).is_ok()
        && (pod.node_terms.is_empty() || pod.node_terms.iter().any(|t| t.matches(bin.labels)))
}

impl crate::engine::Engine {
    /// How much more `plan`'s move costs per hour once the kube-scheduler
    /// (`EngineConfig::scheduler_scoring`) has bound the pods `snapshot` moves than as planned
    /// (negative: less): the replacements it puts no pod on stand empty and go, and provisioning
    /// buys nodes for the pods it leaves without one (solved from scratch). `None` when those
    /// pods could not be placed at all; 0 when the scheduler follows plans.
    pub(crate) fn extra_cost_as_scheduled(
        &mut self,
        now: chrono::DateTime<chrono::Utc>,
        snapshot: &quartermaster_solver::ClusterSnapshot,
        plan: &quartermaster_solver::Plan,
    ) -> Option<f64> {
        let most = match self.config.scheduler_scoring {
            SchedulerScoring::FollowsPlan => return Some(0.0),
            SchedulerScoring::LeastAllocated => false,
            SchedulerScoring::MostAllocated => true,
        };
        // The replacements, as they will be once up: their labels, room and pool taints.
        let mut new = Vec::with_capacity(plan.new_nodes.len());
        for n in &plan.new_nodes {
            let pool = self
                .setup
                .pools
                .iter()
                .position(|p| p.spec.name == n.node_pool && p.spec.cloud == n.cloud)?;
            let (labels, _, room) = self.offering_room(pool, &n.offering, n.mig_config())?;
            new.push((labels, room, &self.setup.pools[pool].spec.taints));
        }
        let existing = snapshot.nodes.iter().filter(|n| !n.in_flight);
        let first_new = existing.clone().count();
        let bins = existing
            .map(|n| Bin {
                allocatable: n.allocatable,
                used: n
                    .pods
                    .iter()
                    .fold(Resources::ZERO, |sum, p| sum + p.requests),
                labels: &n.labels,
                taints: &n.taints,
            })
            .chain(new.iter().map(|(labels, room, taints)| Bin {
                allocatable: *room,
                used: Resources::ZERO,
                labels,
                taints,
            }))
            .collect();
        let pods: Vec<&Pod> = snapshot.pending.iter().collect();
        let (used, left_over) = replay(bins, &pods, most);
        // What the replacements left empty save.
        let unused: f64 = plan
            .new_nodes
            .iter()
            .zip(&used[first_new..])
            .filter(|(_, used)| !**used)
            .map(|(n, _)| n.offering.price_per_hour)
            .sum();
        if left_over.is_empty() {
            return Some(-unused);
        }
        // The pods left over wait, and provisioning buys for them (no existing node: the
        // replay found none; its nodes and the other pods are not copied).
        let rest = quartermaster_solver::ClusterSnapshot {
            resources: snapshot.resources.clone(),
            pending: left_over
                .iter()
                .map(|&k| snapshot.pending[k].clone())
                .collect(),
            nodes: Vec::new(),
            node_pools: snapshot.node_pools.clone(),
            daemonsets: snapshot.daemonsets.clone(),
            unavailable: snapshot.unavailable.clone(),
            offering_limits: snapshot.offering_limits.clone(),
        };
        self.stats.solves += 1;
        let bought = crate::provisioning::plan(&rest, &self.setup.catalog, now);
        bought
            .unschedulable
            .is_empty()
            .then_some(bought.cost_per_hour - unused)
    }
}

#[cfg(test)]
mod tests {
    use quartermaster_solver::PodRef;
    use quartermaster_solver::resources::{CPU, MEMORY};

    use super::*;

    const GPU: usize = 4;
    const GIB: i64 = 1 << 30;

    fn node(gpus: i64, vcpus: i64) -> Resources {
        let mut r = Resources::ZERO;
        r.set(CPU, vcpus * 1000);
        r.set(MEMORY, vcpus * 4 * GIB);
        r.set(GPU, gpus);
        r
    }

    fn pod(name: &str, gpus: i64) -> Pod {
        let mut r = Resources::ZERO;
        r.set(CPU, 1000);
        r.set(MEMORY, 2 * GIB);
        r.set(GPU, gpus);
        Pod::new(PodRef::new("ml", name), r)
    }

    /// Whether every pod finds a node.
    fn places_all(bins: Vec<Bin<'_>>, pods: &[&Pod], scoring: SchedulerScoring) -> bool {
        match scoring {
            SchedulerScoring::FollowsPlan => true,
            s => super::replay(bins, pods, s == SchedulerScoring::MostAllocated)
                .1
                .is_empty(),
        }
    }

    /// A move's replacements as planned: one 4-GPU node (48 vCPUs) for the two 2-GPU pods and
    /// two 1-GPU nodes (4 vCPUs) for the 1-GPU pods, which come back first.
    fn replay(scoring: SchedulerScoring) -> bool {
        let labels = BTreeMap::new();
        let bins = vec![
            Bin {
                allocatable: node(4, 48),
                used: Resources::ZERO,
                labels: &labels,
                taints: &[],
            },
            Bin {
                allocatable: node(1, 4),
                used: Resources::ZERO,
                labels: &labels,
                taints: &[],
            },
            Bin {
                allocatable: node(1, 4),
                used: Resources::ZERO,
                labels: &labels,
                taints: &[],
            },
        ];
        let pods = [
            pod("one-0", 1),
            pod("one-1", 1),
            pod("two-0", 2),
            pod("two-1", 2),
        ];
        let pods: Vec<&Pod> = pods.iter().collect();
        places_all(bins, &pods, scoring)
    }

    #[test]
    fn the_default_scheduler_puts_small_pods_on_the_big_empty_node_and_a_large_pod_is_left_over() {
        // LeastAllocated: 1/48 of a CPU used scores better than 1/4, so both 1-GPU pods take
        // the 4-GPU node and one 2-GPU pod finds no node.
        assert!(!replay(SchedulerScoring::LeastAllocated));
    }

    #[test]
    fn a_packing_scheduler_or_one_that_follows_the_plan_places_every_pod() {
        assert!(replay(SchedulerScoring::MostAllocated));
        assert!(replay(SchedulerScoring::FollowsPlan));
    }

    #[test]
    fn a_node_whose_taint_the_pod_does_not_tolerate_or_whose_labels_it_does_not_want_is_skipped() {
        use quartermaster_policies::{Operator, Requirement, Requirements};
        let plain = BTreeMap::new();
        let taints = [Taint {
            key: "dedicated".into(),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        }];
        let bins = || {
            vec![Bin {
                allocatable: node(1, 4),
                used: Resources::ZERO,
                labels: &plain,
                taints: &taints,
            }]
        };
        let p = pod("one-0", 1);
        assert!(!places_all(bins(), &[&p], SchedulerScoring::LeastAllocated));
        let mut wants = pod("one-1", 1);
        let mut terms = Requirements::default();
        terms.add(Requirement::new("zone", Operator::In, ["a"]).expect("valid"));
        wants.node_terms = vec![terms];
        let open = vec![Bin {
            allocatable: node(1, 4),
            used: Resources::ZERO,
            labels: &plain,
            taints: &[],
        }];
        assert!(!places_all(
            open,
            &[&wants],
            SchedulerScoring::LeastAllocated
        ));
    }
}
