//! Consolidation (`consolidationPolicy: WhenEmptyOrUnderutilized` or `Balanced`): the same
//! solver, asked a different question — "if these nodes were gone, where would their pods go,
//! and what would that cost?". A move removes N nodes and launches M (M may be 0, and may be
//! more than N: one large node split into smaller ones) when the total is cheaper by at least
//! `consolidation_min_saving`. Replacements are launched and initialised before the old nodes
//! go; the old nodes are deleted once every pod runs elsewhere.
//!
//! The search is bounded and deterministic: candidates are sorted by the money they waste
//! (price × the idle share of their scarcest resource: an accelerator node whose accelerator
//! pods finished wastes its whole price, so GPU nodes come first), a greedy list of them is cut
//! by the pools' disruption budgets and the PodDisruptionBudgets, and the solver is asked about
//! its prefixes of halving length (n, n/2, …, 2) and about the first few single nodes. The move
//! saving the most wins. At most `log2(max_move_nodes) + max_single_candidates` solves a pass.
//!
//! Never moved, never removed: pods owned by a Job (restarting a training or batch job throws
//! its work away), pods and nodes annotated do-not-disrupt, and moves whose evictions a
//! PodDisruptionBudget forbids.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_policies::{ConsolidationPolicy, DisruptionReason};
use quartermaster_pricing::{CapacityType, Catalog};
use quartermaster_solver::resources::{CPU, MAX_RESOURCES, MEMORY, PODS};
use quartermaster_solver::{Plan, Pod, PodRef, Resources, to_resources};

use crate::engine::Engine;

/// How long a node whose consolidation was called off is left alone.
const CONSOLIDATION_BACKOFF: TimeDelta = TimeDelta::minutes(15);
use crate::disruption::{CommandKind, DisruptionCommand, DisruptionStats};
use crate::events::{Action, DeleteReason};
use crate::state::{Claim, Phase, PodState};

/// The least score `Balanced` consolidates at (Karpenter's `1/k` with `k = 2`).
const BALANCED_MIN_SCORE: f64 = 0.5;

/// `Balanced`'s score of a move: the fraction of the pool's hourly cost it saves over the
/// fraction of the pool's pods it disrupts. A move that disrupts nothing scores infinitely.
fn balanced_score(saving: f64, pool_cost: f64, moved: usize, pool_pods: usize) -> f64 {
    if moved == 0 || pool_pods == 0 {
        return f64::INFINITY;
    }
    if pool_cost <= 0.0 {
        return 0.0;
    }
    (saving / pool_cost) / (moved as f64 / pool_pods as f64)
}

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

/// A move the solver found.
pub(crate) struct Proposal {
    pub names: Vec<String>,
    pub plan: Plan,
    pub saving: f64,
    /// Pods it moves.
    pub moved: usize,
}

/// The share of `room` that `used` takes, by the resource that matters: the accelerators when
/// the node has any, else the larger of CPU and memory.
fn utilisation(used: &Resources, room: &Resources) -> f64 {
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
    // ------------------------------------------------------------------ inputs

    /// A pod's do-not-disrupt annotation changed.
    pub(crate) fn protect_pod(&mut self, pod: PodRef, on: bool) {
        if on {
            self.disruption.protected_pods.insert(pod);
        } else {
            self.disruption.protected_pods.remove(&pod);
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

    /// New prices: claims are priced again (what they cost now is what removing them saves).
    pub(crate) fn catalog_changed(&mut self, catalog: Catalog) {
        let reservations: Vec<quartermaster_pricing::Reservation> = self
            .reservations
            .iter()
            .map(|o| o.reservation.clone())
            .collect();
        self.setup.catalog = catalog.with_reserved_offerings(&reservations);
        self.add_flex_start_offerings();
        for c in self.claims.values_mut() {
            let price = |o: &quartermaster_solver::OfferingChoice| {
                self.setup
                    .catalog
                    .get(c.cloud, &o.instance_type)?
                    .offerings
                    .iter()
                    .find(|x| x.zone == o.zone && x.capacity_type == o.capacity_type)
                    .map(|x| x.price_per_hour)
            };
            if let Some(p) = price(&c.offering) {
                c.offering.price_per_hour = p;
            }
            let updated: Vec<Option<f64>> = c.alternatives.iter().map(&price).collect();
            for (o, p) in c.alternatives.iter_mut().zip(updated) {
                if let Some(p) = p {
                    o.price_per_hour = p;
                }
            }
        }
    }

    /// Disruption counters so far.
    pub fn disruption_stats(&self) -> &DisruptionStats {
        &self.disruption.stats
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

    /// Announces the removal of an empty node.
    pub(crate) fn announce_empty(&mut self, name: &str) {
        let Some(c) = self.claims.get(name) else {
            return;
        };
        let command = DisruptionCommand {
            kind: CommandKind::Empty,
            reason: DeleteReason::Empty,
            claims: vec![c.name.clone()],
            nodes: c.node().into_iter().map(|n| n.name.clone()).collect(),
            replacements: Vec::new(),
            pods: 0,
            saving_per_hour: c.offering.price_per_hour,
        };
        self.disruption.stats.record(&command);
        self.actions.push(Action::Disrupt(command));
    }

    // ------------------------------------------------------------------ the pass

    /// Looks for one move (drift first, then consolidation), when due.
    pub(crate) fn consolidate(&mut self, now: DateTime<Utc>) {
        let changed = self.consolidation_seen != Some(self.version);
        let matured = self.consolidation_wake.is_some_and(|t| now >= t);
        if !(changed || matured) || self.consolidation_next.is_some_and(|t| now < t) {
            return;
        }
        // Only a settled cluster is consolidated: nothing waiting for a first place (pods that
        // cannot be placed at all do not count), nothing launching, nothing moving.
        // A nomination to a node that is up counts as settled once the kube-scheduler has had
        // its time to bind it (a pod it never binds must not stop consolidation for good).
        let settled = self.pods.values().all(|e| match &e.state {
            PodState::Waiting { reason, .. } => reason.is_some(),
            PodState::Nominated { claim } => self.claims.get(claim).is_some_and(|c| {
                c.phase == Phase::Initialized
                    && c.nominated_at
                        .is_none_or(|t| now >= t + self.config.binding_grace)
            }),
            PodState::Bound { .. } => true,
        }) && self
            .claims
            .values()
            .all(|c| c.phase == Phase::Initialized && !c.vacating() && !c.deleting);
        if !settled {
            return;
        }
        self.consolidation_next = Some(now + self.config.consolidation_interval);
        self.consolidation_seen = Some(self.version);
        let (candidates, wake) = self.consolidation_candidates(now);
        self.consolidation_wake = wake;
        if self.replace_drifted(now) {
            return;
        }
        // Candidates a budget holds back now are looked at again later (a budget window ends
        // without any event saying so).
        let left = self.budget_left(DisruptionReason::Underutilized, now);
        if candidates.iter().any(|c| left[c.pool] == 0) {
            let again = now + self.config.consolidation_interval;
            self.consolidation_wake = Some(self.consolidation_wake.map_or(again, |w| w.min(again)));
        }
        if let Some(p) = self.best_move(now, &candidates) {
            self.execute(now, p, DeleteReason::Underutilized, true);
        }
    }

    /// Whether any pool consolidates underutilized nodes (so a wake-up is worth scheduling).
    pub(crate) fn consolidation_enabled(&self) -> bool {
        self.setup.pools.iter().any(|p| {
            matches!(
                p.node_pool.consolidation_policy(),
                ConsolidationPolicy::WhenEmptyOrUnderutilized | ConsolidationPolicy::Balanced
            )
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
                    .is_some_and(|c| c.phase == Phase::Initialized) =>
            {
                Some(claim)
            }
            _ => None,
        }
    }

    /// Pods running on each claim ([`Engine::running_on`]).
    fn bound_pods(&self) -> BTreeMap<&str, Vec<&PodRef>> {
        let mut on: BTreeMap<&str, Vec<&PodRef>> = BTreeMap::new();
        for (id, e) in &self.pods {
            if let Some(claim) = self.running_on(e) {
                on.entry(claim).or_default().push(id);
            }
        }
        on
    }

    /// Whether a pod may be moved voluntarily (not a Job's, not do-not-disrupt).
    pub(crate) fn pod_movable(&self, id: &PodRef) -> bool {
        !self.disruption.protected_pods.contains(id)
            && !self.pods.get(id).is_some_and(|e| {
                e.pod
                    .owner
                    .as_deref()
                    .is_some_and(|o| o.starts_with("Job/"))
            })
    }

    /// Nodes whose pods may be moved voluntarily now (any policy): initialized, schedulable,
    /// not static, not do-not-disrupt, with pods that may all move.
    pub(crate) fn movable_nodes(&self, now: DateTime<Utc>) -> Vec<Candidate> {
        let on = self.bound_pods();
        let held = self.headroom.by_claim();
        self.claims
            .values()
            .filter(|c| c.phase == Phase::Initialized && c.schedulable())
            .filter(|c| c.consolidation_backoff.is_none_or(|t| now >= t))
            .filter(|c| self.setup.pools[c.pool].replicas.is_none())
            .filter(|c| !self.node_protected(c))
            .filter_map(|c| {
                let pods = on.get(c.name.as_str()).cloned().unwrap_or_default();
                if pods.iter().any(|p| !self.pod_movable(p)) {
                    return None;
                }
                let mut used = Resources::ZERO;
                for p in &pods {
                    used += self.pods[*p].pod.requests;
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
                    pods: pods.into_iter().cloned().collect(),
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

    /// Nodes that may be consolidated now, the most wasteful first, and when the next node
    /// becomes old enough to be one.
    fn consolidation_candidates(
        &self,
        now: DateTime<Utc>,
    ) -> (Vec<Candidate>, Option<DateTime<Utc>>) {
        let mut wake: Option<DateTime<Utc>> = None;
        let mut candidates: Vec<Candidate> = self
            .movable_nodes(now)
            .into_iter()
            .filter(|cand| !cand.pods.is_empty())
            .filter(|cand| {
                let c = &self.claims[&cand.name];
                let policy = &self.setup.pools[c.pool];
                if !matches!(
                    policy.node_pool.consolidation_policy(),
                    ConsolidationPolicy::WhenEmptyOrUnderutilized | ConsolidationPolicy::Balanced
                ) {
                    return false;
                }
                let Some(after) = policy
                    .consolidate_after
                    .and_then(|d| TimeDelta::from_std(d).ok())
                else {
                    return false;
                };
                // Ripe `consolidateAfter` after its last pod change, and after its pool last
                // grew for pending pods.
                let grew = self.grew_at.get(c.pool).copied().flatten();
                let ripe = c.last_change.max(grew.unwrap_or(c.last_change)) + after;
                if now < ripe {
                    wake = Some(wake.map_or(ripe, |w| w.min(ripe)));
                }
                now >= ripe
            })
            .collect();
        candidates.sort_by(|a, b| {
            b.waste
                .total_cmp(&a.waste)
                .then(b.price.total_cmp(&a.price))
                .then(a.pods.len().cmp(&b.pods.len()))
                .then(a.name.cmp(&b.name))
        });
        (candidates, wake)
    }

    /// The move saving the most among the bounded set of questions (see the module docs).
    fn best_move(&mut self, now: DateTime<Utc>, candidates: &[Candidate]) -> Option<Proposal> {
        let left = self.budget_left(DisruptionReason::Underutilized, now);
        // The greedy list: within budgets and PodDisruptionBudgets, together.
        let mut remaining = left.clone();
        let mut list: Vec<String> = Vec::new();
        let mut pods: Vec<&Pod> = Vec::new();
        for cand in candidates {
            if list.len() >= self.config.max_move_nodes {
                break;
            }
            if remaining[cand.pool] == 0 {
                continue;
            }
            let mut with = pods.clone();
            with.extend(cand.pods.iter().map(|p| &*self.pods[p].pod));
            if !self.pdbs_allow(with.iter().copied()) {
                continue;
            }
            pods = with;
            remaining[cand.pool] -= 1;
            list.push(cand.name.clone());
        }
        // Prefixes n, n-1 (the whole list may buy one node where all but one would buy none),
        // then halving.
        let mut sizes: Vec<usize> = Vec::new();
        let n = list.len();
        if n >= 2 {
            sizes.push(n);
        }
        if n >= 3 {
            sizes.push(n - 1);
        }
        let mut k = n / 2;
        while k >= 2 {
            if !sizes.contains(&k) {
                sizes.push(k);
            }
            k /= 2;
        }
        let mut questions: Vec<Vec<String>> =
            sizes.into_iter().map(|k| list[..k].to_vec()).collect();
        let singles = candidates
            .iter()
            .filter(|c| left[c.pool] > 0)
            .filter(|c| self.pdbs_allow(c.pods.iter().map(|p| &*self.pods[p].pod)))
            .take(self.config.max_single_candidates);
        for c in singles {
            questions.push(vec![c.name.clone()]);
        }
        let mut best: Option<Proposal> = None;
        for q in questions {
            // The most saved; for the same saving, the fewest pods moved and nodes bought.
            if let Some(p) = self.evaluate(now, q, true)
                && best.as_ref().is_none_or(|b| {
                    p.saving > b.saving + 1e-9
                        || (p.saving > b.saving - 1e-9
                            && (p.moved, p.plan.new_nodes.len())
                                < (b.moved, b.plan.new_nodes.len()))
                })
            {
                best = Some(p);
            }
        }
        best
    }

    /// Asks the solver where the pods of `names` would go without them. With `require_saving`
    /// (consolidation), the move must be cheaper by the configured margin, Balanced must approve
    /// and spot-to-spot rules hold; without (drift), any plan that places every pod will do.
    pub(crate) fn evaluate(
        &mut self,
        now: DateTime<Utc>,
        names: Vec<String>,
        require_saving: bool,
    ) -> Option<Proposal> {
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let (mut snapshot, _) = self.snapshot_without(now, &refs);
        self.keep_roomiest_targets(&mut snapshot);
        self.stats.solves += 1;
        let plan = crate::provisioning::plan(&snapshot, &self.setup.catalog, now);
        if !plan.unschedulable.is_empty() {
            return None;
        }
        let moved = snapshot.pending.len();
        // Moving onto nodes that are still launching would leave the pods without a node for a
        // while: only initialized targets count.
        if plan.existing.iter().any(|p| p.in_flight) {
            return None;
        }
        let old: f64 = names
            .iter()
            .map(|n| self.claims[n].offering.price_per_hour)
            .sum();
        let new: f64 = plan
            .new_nodes
            .iter()
            .map(|n| n.offering.price_per_hour)
            .sum();
        let saving = old - new;
        if require_saving {
            if new >= old * (1.0 - self.config.consolidation_min_saving) {
                return None;
            }
            if !self.spot_to_spot_allowed(&names, &plan, old) {
                return None;
            }
            if !self.balanced_approves(&names, saving) {
                return None;
            }
        }
        Some(Proposal {
            names,
            plan,
            saving,
            moved,
        })
    }

    /// Bounds the solver's work on a large cluster: of the nodes the moved pods could go to,
    /// only the `max_target_nodes` with the most free room (the larger of CPU and memory share)
    /// are offered. Any plan found is still valid; a better one through a fuller node may be
    /// missed. Not when a moved pod has topology spread or pod (anti-)affinity: those count pods
    /// on every node.
    fn keep_roomiest_targets(&self, snapshot: &mut quartermaster_solver::ClusterSnapshot) {
        let limit = self.config.max_target_nodes;
        if snapshot.nodes.len() <= limit
            || snapshot.pending.iter().any(|p| {
                !p.topology_spread.is_empty()
                    || !p.affinity.is_empty()
                    || !p.anti_affinity.is_empty()
            })
        {
            return;
        }
        let free = |n: &quartermaster_solver::ExistingNode| {
            let mut used = Resources::ZERO;
            for p in &n.pods {
                used += p.requests;
            }
            1.0 - utilisation(&used, &n.allocatable)
        };
        let mut ranked: Vec<(f64, usize)> = snapshot
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (free(n), i))
            .collect();
        ranked.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut keep = vec![false; snapshot.nodes.len()];
        for (_, i) in ranked.into_iter().take(limit) {
            keep[i] = true;
        }
        let mut i = 0;
        snapshot.nodes.retain(|_| {
            i += 1;
            keep[i - 1]
        });
    }

    /// A spot node is replaced by spot only when enough instance types have a cheaper spot
    /// offering that holds the replacement's pods (no ladder of ever cheaper replacements).
    fn spot_to_spot_allowed(&self, names: &[String], plan: &Plan, old: f64) -> bool {
        let any_spot_old = names
            .iter()
            .any(|n| self.claims[n].offering.capacity_type == CapacityType::Spot);
        if !any_spot_old {
            return true;
        }
        for new in &plan.new_nodes {
            if new.offering.capacity_type != CapacityType::Spot {
                continue;
            }
            let Some(pool) = self
                .setup
                .pools
                .iter()
                .position(|p| p.spec.name == new.node_pool)
            else {
                return false;
            };
            let policy = &self.setup.pools[pool];
            let min = policy.spot_to_spot_min_types(self.config.spot_to_spot_min_types);
            let table = &self.setup.resources;
            let cheaper = self
                .setup
                .catalog
                .instance_types()
                .iter()
                .filter(|it| it.cloud == policy.spec.cloud)
                .filter(|it| {
                    policy
                        .spec
                        .node_shape
                        .allocatable(it)
                        .is_some_and(|a| new.requests.fits_in(&to_resources(table, &a)))
                })
                .filter(|it| {
                    it.offerings.iter().any(|o| {
                        o.available
                            && o.capacity_type == CapacityType::Spot
                            && o.price_per_hour < old
                            && policy.spec.requirements.matches(&it.offering_labels(o))
                    })
                })
                .count();
            if cheaper < min {
                return false;
            }
        }
        true
    }

    /// Karpenter's `Balanced` rule, for moves touching a Balanced pool: worth it when the share
    /// of the pools' cost saved is at least half the share of their running pods disrupted
    /// (score `(saving / pool cost) / (pods moved / pool pods) >= 1/2`; each pod counts 1).
    fn balanced_approves(&self, names: &[String], saving: f64) -> bool {
        let pools: Vec<usize> = names.iter().map(|n| self.claims[n].pool).collect();
        if !pools.iter().any(|p| {
            self.setup.pools[*p].node_pool.consolidation_policy() == ConsolidationPolicy::Balanced
        }) {
            return true;
        }
        let pool_cost: f64 = self
            .claims
            .values()
            .filter(|c| pools.contains(&c.pool) && !c.deleting)
            .map(|c| c.offering.price_per_hour)
            .sum();
        let (mut moved, mut pool_pods) = (0usize, 0usize);
        for e in self.pods.values() {
            if let Some(claim) = self.running_on(e)
                && let Some(c) = self.claims.get(claim)
                && pools.contains(&c.pool)
            {
                pool_pods += 1;
                moved += usize::from(names.iter().any(|n| n == claim));
            }
        }
        balanced_score(saving, pool_cost, moved, pool_pods) >= BALANCED_MIN_SCORE
    }

    /// Carries out a move: announce, cordon, place the pods (bound at once on initialized nodes,
    /// nominated to replacements), and let the vacated nodes go once their pods run elsewhere.
    pub(crate) fn execute(
        &mut self,
        now: DateTime<Utc>,
        p: Proposal,
        reason: DeleteReason,
        require_saving: bool,
    ) {
        let id = self.disruption.next_move;
        self.disruption.next_move += 1;
        let announce_at = self.actions.len();
        let m = p.plan.new_nodes.len();
        let old: f64 = p
            .names
            .iter()
            .map(|n| self.claims[n].offering.price_per_hour)
            .sum();
        let new: f64 = p
            .plan
            .new_nodes
            .iter()
            .map(|n| n.offering.price_per_hour)
            .sum();
        let mut nodes = Vec::new();
        let mut moved = 0;
        for name in &p.names {
            let displaced: Vec<PodRef> = self
                .pods
                .iter()
                .filter(|(_, e)| self.running_on(e) == Some(name.as_str()))
                .map(|(id, _)| id.clone())
                .collect();
            moved += displaced.len();
            let c = self.claims.get_mut(name).expect("candidate exists");
            c.consolidating = true;
            c.consolidation_replaced = m > 0;
            c.displaced = displaced;
            c.move_id = Some(id);
            c.disruption_reason = Some(reason);
            if let Some(node) = c.node() {
                nodes.push(node.name.clone());
                self.actions.push(Action::Cordon {
                    node: node.name.clone(),
                });
            }
        }
        let refs: Vec<&str> = p.names.iter().map(String::as_str).collect();
        let (_, targets) = self.snapshot_without(now, &refs);
        // A replacement may only fall back to offerings that keep the move worth it.
        let slack = if require_saving && m > 0 {
            ((old * (1.0 - self.config.consolidation_min_saving) - new) / m as f64).max(0.0)
        } else {
            f64::INFINITY
        };
        let created = self.apply(now, p.plan, &targets);
        for new in &created {
            if let Some(c) = self.claims.get_mut(new) {
                c.replaces = Some(p.names[0].clone());
                c.move_id = Some(id);
                let ceiling = c.offering.price_per_hour + slack;
                c.alternatives.retain(|o| o.price_per_hour < ceiling);
            }
        }
        let command = DisruptionCommand {
            kind: CommandKind::of(reason, p.names.len(), m),
            reason,
            claims: p.names,
            nodes,
            replacements: created,
            pods: moved,
            saving_per_hour: p.saving,
        };
        self.disruption.stats.record(&command);
        self.actions.insert(announce_at, Action::Disrupt(command));
    }

    // ------------------------------------------------------------------ calling off

    /// `failed` (a replacement of the move `old` belongs to) cannot do its part: the whole
    /// move is called off — old nodes uncordoned with their pods where they run, the other
    /// replacements deleted. False when there is no move in progress to call off.
    pub(crate) fn call_off_move(&mut self, now: DateTime<Utc>, failed: &str, old: &str) -> bool {
        let Some(id) = self.claims.get(old).and_then(|c| c.move_id) else {
            return false;
        };
        let olds: Vec<String> = self
            .claims
            .values()
            .filter(|c| c.move_id == Some(id) && c.consolidating && !c.deleting)
            .map(|c| c.name.clone())
            .collect();
        if olds.is_empty() {
            return false;
        }
        let replacements: Vec<String> = self
            .claims
            .values()
            .filter(|c| c.move_id == Some(id) && !c.consolidating && c.name != failed)
            .map(|c| c.name.clone())
            .collect();
        for o in &olds {
            let c = self.claims.get_mut(o).expect("old node exists");
            c.consolidating = false;
            c.consolidation_replaced = false;
            c.move_id = None;
            c.disruption_reason = None;
            c.consolidation_backoff = Some(now + CONSOLIDATION_BACKOFF);
            let displaced = std::mem::take(&mut c.displaced);
            if let Some(node) = c.node() {
                self.actions.push(Action::Uncordon {
                    node: node.name.clone(),
                });
            }
            for pod in displaced {
                if let Some(e) = self.pods.get_mut(&pod)
                    && let PodState::Nominated { claim } = &e.state
                    && (claim == failed || replacements.contains(claim))
                {
                    e.state = PodState::Bound { claim: o.clone() };
                }
            }
        }
        for r in replacements {
            if let Some(c) = self.claims.get_mut(&r) {
                c.move_id = None;
                c.replaces = None;
                if !c.deleting {
                    self.delete(now, &r, DeleteReason::Underutilized);
                }
            }
        }
        self.stats.consolidations_cancelled += 1;
        self.disruption.stats.called_off += 1;
        true
    }

    /// A replacement came up: before its pods move, the move is checked again. Pods that became
    /// do-not-disrupt, a node annotated do-not-disrupt, or a PodDisruptionBudget that no longer
    /// allows the evictions call the move off (the replacement then stands empty and goes as
    /// an empty node).
    pub(crate) fn revalidate_move(&mut self, now: DateTime<Utc>, name: &str) {
        let Some(c) = self.claims.get(name) else {
            return;
        };
        let (Some(_), Some(old)) = (c.move_id, c.replaces.clone()) else {
            return;
        };
        if c.consolidating {
            return;
        }
        let Some(old_claim) = self.claims.get(&old) else {
            return;
        };
        if !old_claim.consolidating
            || old_claim.deleting
            || old_claim.disruption_reason == Some(DeleteReason::Expired)
        {
            return;
        }
        let moving: Vec<&PodEntry> = self
            .pods
            .values()
            .filter(|e| matches!(&e.state, PodState::Nominated { claim } if claim == name))
            .collect();
        let move_id = old_claim.move_id;
        let old_nodes_protected = self
            .claims
            .values()
            .filter(|c| c.move_id == move_id && c.consolidating)
            .any(|c| self.node_protected(c));
        let still_valid = !old_nodes_protected
            && moving.iter().all(|e| self.pod_movable(&e.pod.id))
            && self.pdbs_allow(moving.iter().map(|e| &*e.pod));
        if !still_valid {
            self.call_off_move(now, name, &old);
            if let Some(c) = self.claims.get_mut(name) {
                c.move_id = None;
                c.replaces = None;
            }
        }
    }
}

use crate::state::PodEntry;

#[cfg(test)]
mod balanced_tests {
    use super::balanced_score;

    #[test]
    fn the_score_weighs_the_share_saved_against_the_share_disrupted() {
        // Saving 10% of the pool's cost by moving 10% of its pods: score 1, approved.
        assert!((balanced_score(1.0, 10.0, 1, 10) - 1.0).abs() < 1e-9);
        // Saving 2% of the cost by moving half the pods: 0.04, refused.
        assert!(balanced_score(0.2, 10.0, 5, 10) < super::BALANCED_MIN_SCORE);
        // Nothing disrupted: always worth it.
        assert!(balanced_score(0.01, 10.0, 0, 10).is_infinite());
    }

    #[test]
    fn utilisation_is_the_accelerators_share_on_accelerator_nodes() {
        use quartermaster_solver::Resources;
        use quartermaster_solver::resources::{CPU, MEMORY};
        let mut room = Resources::ZERO;
        room.set(CPU, 4000);
        room.set(MEMORY, 16 << 30);
        let mut used = Resources::ZERO;
        used.set(CPU, 3000);
        assert!((super::utilisation(&used, &room) - 0.75).abs() < 1e-9);
        room.set(4, 1);
        // A GPU node whose GPU is idle is idle, whatever CPU pods it holds.
        assert_eq!(super::utilisation(&used, &room), 0.0);
    }
}
