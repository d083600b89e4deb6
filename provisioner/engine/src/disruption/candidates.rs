//! What voluntary disruption may touch: nodes whose pods may move (never a run-to-completion
//! pod, a Job's or a training job's, unless annotated checkpointed; never a do-not-disrupt pod or
//! node, or past a PodDisruptionBudget), and what each pool's budget leaves.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use quartermaster_policies::DisruptionReason;
use quartermaster_solver::resources::{CPU, MAX_RESOURCES, MEMORY, PODS};
use quartermaster_solver::{Pod, PodRef, Resources};

use crate::engine::Engine;
use crate::state::{Claim, Phase, PodEntry, PodState};

/// A node consolidation may move pods off.
#[derive(Debug, Clone)]
pub(crate) struct Candidate {
    pub name: String,
    pub pool: usize,
    /// Money wasted per hour: price × idle share of its scarcest resource.
    pub waste: f64,
    /// What the node costs per hour (among equally wasteful nodes, the dearest has the most a
    /// replacement could save: a full on-demand node where spot would do).
    pub price: f64,
    pub pods: Vec<PodRef>,
}

/// The share of `room` that `used` takes, by the resource that matters: the accelerators when
/// the node has any, else the larger of CPU and memory.
pub(crate) fn utilisation(used: &Resources, room: &Resources) -> f64 {
    let share = |slot: usize| {
        let r = room.get(slot);
        if r <= 0 {
            0.0
        } else {
            used.get(slot) as f64 / r as f64
        }
    };
    let extended: Vec<usize> = (PODS + 1..MAX_RESOURCES)
        .filter(|s| room.get(*s) > 0)
        .collect();
    let u = if extended.is_empty() {
        share(CPU).max(share(MEMORY))
    } else {
        extended.into_iter().map(share).fold(0.0, f64::max)
    };
    u.clamp(0.0, 1.0)
}

impl Engine {
    /// A pod's do-not-disrupt annotation changed.
    pub(crate) fn protect_pod(&mut self, pod: PodRef, on: bool) {
        if on {
            self.disruption.protected_pods.insert(pod);
        } else {
            self.disruption.protected_pods.remove(&pod);
        }
    }

    /// A pod's checkpointed annotation changed.
    pub(crate) fn pod_checkpointed(&mut self, pod: PodRef, on: bool) {
        if on {
            self.disruption.checkpointed_pods.insert(pod);
        } else {
            self.disruption.checkpointed_pods.remove(&pod);
        }
    }

    /// A node's (or NodeClaim's) do-not-disrupt annotation changed.
    pub(crate) fn protect_node(&mut self, node: String, on: bool) {
        if on {
            self.disruption.protected_nodes.insert(node);
        } else {
            self.disruption.protected_nodes.remove(&node);
        }
    }

    /// Whether a node (by claim or node name) is annotated do-not-disrupt.
    pub(crate) fn node_protected(&self, c: &Claim) -> bool {
        let p = &self.disruption.protected_nodes;
        p.contains(&c.name) || c.node().is_some_and(|n| p.contains(&n.name))
    }

    /// Whether the PodDisruptionBudgets let `pods` be evicted now: every budget selecting one of
    /// them allows at least one disruption (Karpenter's rule; the evictions themselves go
    /// through the eviction API one by one, which waits while a budget allows none).
    pub(crate) fn pdbs_allow<'a>(&self, pods: impl IntoIterator<Item = &'a Pod>) -> bool {
        let pdbs = &self.disruption.pdbs;
        if pdbs.is_empty() {
            return true;
        }
        pods.into_iter().all(|pod| {
            pdbs.iter()
                .all(|pdb| pdb.disruptions_allowed > 0 || !pdb.selects(pod))
        })
    }

    /// The claim a pod runs on as consolidation sees it: where it is bound, or where it is
    /// nominated on a node that is up (consolidation only looks at a settled cluster, where
    /// such a nomination has outlived the binding grace).
    pub(crate) fn running_on<'a>(&self, e: &'a PodEntry) -> Option<&'a str> {
        match &e.state {
            PodState::Bound { claim } => Some(claim),
            PodState::Nominated { claim }
                if self
                    .claims
                    .get(claim)
                    .is_some_and(|c| c.phase() == Phase::Initialized) =>
            {
                Some(claim)
            }
            _ => None,
        }
    }

    /// Whether a pod may be moved voluntarily: not do-not-disrupt, and not run-to-completion
    /// (a Job's, a training job's) unless annotated checkpointed.
    pub(crate) fn pod_movable(&self, id: &PodRef) -> bool {
        !self.disruption.protected_pods.contains(id)
            && (self.disruption.checkpointed_pods.contains(id)
                || !self.pods.get(id).is_some_and(|e| {
                    e.pod
                        .owner
                        .as_deref()
                        .is_some_and(crate::disruption::runs_to_completion)
                }))
    }

    /// Nodes whose pods may be moved voluntarily now (any policy): initialized, schedulable,
    /// not static, not do-not-disrupt, with pods that may all move; only claims `wanted` keeps
    /// are looked at (a method's own test on the claim, before any work on its pods).
    pub(crate) fn movable_nodes(
        &self,
        now: DateTime<Utc>,
        wanted: impl Fn(&Claim) -> bool,
    ) -> Vec<Candidate> {
        let held = self.headroom.by_claim();
        self.claims
            .values()
            .filter(|c| wanted(c))
            .filter(|c| c.phase() == Phase::Initialized && c.schedulable())
            .filter(|c| c.consolidation_backoff.is_none_or(|t| now >= t))
            .filter(|c| self.setup.pools[c.pool].replicas.is_none())
            .filter(|c| !self.node_protected(c))
            .filter_map(|c| {
                // On an initialized claim every pod nominated or bound runs there
                // ([`Engine::running_on`]): its residents, from the index.
                let pods: Vec<(&PodRef, &Arc<Pod>)> =
                    self.pods.residents(&c.name).into_iter().flatten().collect();
                if pods.iter().any(|(id, _)| !self.pod_movable(id)) {
                    return None;
                }
                let mut used = Resources::ZERO;
                for (_, p) in &pods {
                    used += p.requests;
                }
                // Room a CapacityBuffer holds is used, not waste.
                for p in held.get(c.name.as_str()).into_iter().flatten() {
                    used += p.requests;
                }
                let waste = c.offering.price_per_hour * (1.0 - utilisation(&used, &c.room));
                Some(Candidate {
                    name: c.name.clone(),
                    pool: c.pool,
                    waste,
                    price: c.offering.price_per_hour,
                    pods: pods.into_iter().map(|(id, _)| id.clone()).collect(),
                })
            })
            .collect()
    }

    /// Per pool: how many more nodes may be disrupted for `reason` now.
    pub(crate) fn budget_left(&self, reason: DisruptionReason, now: DateTime<Utc>) -> Vec<usize> {
        let mut per_pool = vec![(0usize, 0usize); self.setup.pools.len()];
        for c in self.claims.values() {
            per_pool[c.pool].0 += 1;
            if c.deleting || c.vacating() {
                per_pool[c.pool].1 += 1;
            }
        }
        per_pool
            .iter()
            .enumerate()
            .map(|(pool, (total, disrupting))| {
                self.setup.pools[pool]
                    .allowed_disruptions(reason, *total, now)
                    .saturating_sub(*disrupting)
            })
            .collect()
    }
}
