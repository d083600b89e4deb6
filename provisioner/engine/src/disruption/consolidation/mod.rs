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
//! saving the most wins, provided it still saves once the kube-scheduler has bound its pods
//! (`binding`). At most `log2(max_move_nodes) + max_single_candidates` solves a pass, and one
//! more for each of those moves whose replay leaves pods without a node.
//!
//! Never moved, never removed: pods owned by a Job (restarting a training or batch job throws
//! its work away), pods and nodes annotated do-not-disrupt, and moves whose evictions a
//! PodDisruptionBudget forbids.

mod balanced;
pub(crate) mod binding;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_policies::{ConsolidationPolicy, DisruptionReason};
use quartermaster_pricing::CapacityType;
use quartermaster_solver::{Plan, Pod, Resources, to_resources};

use crate::disruption::candidates::{Candidate, utilisation};
use crate::engine::Engine;

/// How long a node whose consolidation was called off is left alone.
pub(crate) const CONSOLIDATION_BACKOFF: TimeDelta = TimeDelta::minutes(15);
use crate::events::DeleteReason;
use crate::state::{Claim, Phase};

/// A move the solver found.
pub(crate) struct Proposal {
    pub names: Vec<String>,
    pub plan: Plan,
    pub saving: f64,
    /// Pods it moves.
    pub moved: usize,
    /// What the nodes it removes cost per hour.
    pub old: f64,
    /// The cluster the plan was solved on (the pods it moves pending).
    pub snapshot: quartermaster_solver::ClusterSnapshot,
}

impl Engine {
    // ------------------------------------------------------------------ inputs

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
        // Pods waiting for a place and claims with nominations outstanding come from the pod
        // table's indexes, not a scan of every pod.
        let settled = self.pods.unplaced().is_empty()
            && self.pods.nominated_claims().all(|claim| {
                self.claims.get(claim).is_some_and(|c| {
                    c.phase() == Phase::Initialized
                        && c.nominated_at
                            .is_none_or(|t| now >= t + self.config.binding_grace)
                })
            })
            && self
                .claims
                .values()
                .all(|c| c.phase() == Phase::Initialized && !c.vacating() && !c.deleting);
        if !settled {
            return;
        }
        self.consolidation_next = Some(now + self.config.consolidation_interval);
        self.consolidation_seen = Some(self.version);
        let (candidates, mut wake) = self.consolidation_candidates(now);
        // Offerings a capacity error took away may be what keeps a candidate where it is (an
        // on-demand fallback node that spot would replace once spot is back): the candidates
        // are looked at again when the first of them is usable again, even in a quiet cluster.
        if !candidates.is_empty()
            && let Some(back) = self.unavailable.next_expiry()
        {
            wake = Some(wake.map_or(back, |w| w.min(back)));
        }
        // And so is an offering a move's replacement could not get, when moves may ask again.
        if !candidates.is_empty()
            && let Some(back) = self.disruption.refusals.next_expiry(now)
        {
            wake = Some(wake.map_or(back, |w| w.min(back)));
        }
        // So is a node whose move was called off, when its backoff ends.
        let backoff_ends = self
            .claims
            .values()
            .filter_map(|c| c.consolidation_backoff)
            .filter(|t| *t > now)
            .min();
        if let Some(t) = backoff_ends {
            wake = Some(wake.map_or(t, |w| w.min(t)));
        }
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

    /// Nodes that may be consolidated now, the most wasteful first, and when the next node
    /// becomes old enough to be one.
    fn consolidation_candidates(
        &self,
        now: DateTime<Utc>,
    ) -> (Vec<Candidate>, Option<DateTime<Utc>>) {
        let mut wake: Option<DateTime<Utc>> = None;
        // Per pool, its `consolidateAfter` when it consolidates underutilized nodes: only those
        // pools' nodes are candidates (tested before any work on a node's pods).
        let after: Vec<Option<TimeDelta>> = self
            .setup
            .pools
            .iter()
            .map(|policy| {
                matches!(
                    policy.node_pool.consolidation_policy(),
                    ConsolidationPolicy::WhenEmptyOrUnderutilized | ConsolidationPolicy::Balanced
                )
                .then(|| TimeDelta::from_std(policy.consolidate_after?).ok())
                .flatten()
            })
            .collect();
        let mut candidates: Vec<Candidate> = self
            .movable_nodes(now, |c: &Claim| after[c.pool].is_some())
            .into_iter()
            .filter(|cand| !cand.pods.is_empty())
            .filter(|cand| {
                let c = &self.claims[&cand.name];
                let Some(after) = after[c.pool] else {
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
        let mut found: Vec<Proposal> = questions
            .into_iter()
            .filter_map(|q| self.evaluate(now, q, true))
            .collect();
        // The most saved; for the same saving, the fewest pods moved and nodes bought.
        found.sort_by(|a, b| {
            let key = |p: &Proposal| (p.moved, p.plan.new_nodes.len());
            b.saving.total_cmp(&a.saving).then(key(a).cmp(&key(b)))
        });
        // The first that still saves once the kube-scheduler has bound its pods by its own
        // scores (it reads no nomination): replacements it leaves empty go, pods it leaves
        // without a node get new ones (see `binding`). One replay a pass when the best passes.
        for mut p in found {
            let saving = self
                .extra_cost_as_scheduled(now, &p.snapshot, &p.plan)
                .map(|extra| p.saving - extra);
            if let Some(saving) = saving
                && saving > p.old * self.config.consolidation_min_saving
            {
                p.saving = p.saving.min(saving);
                return Some(p);
            }
            self.stats.moves_unprofitable_as_scheduled += 1;
        }
        None
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
        let (mut snapshot, target_to_claim) = self.snapshot_without(now, &refs);
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
        // An empty node the pods would move onto is about to go anyway: filling it saves its
        // price no more than its removal does. Only what the move saves beyond that counts (a
        // running job is not moved from one node onto an equal one that just emptied).
        let forgone: f64 = if require_saving {
            let held = self.headroom.by_claim();
            plan.existing
                .iter()
                .filter_map(|p| self.claims.get(target_to_claim.get(&p.node)?))
                .filter(|c| !held.contains_key(c.name.as_str()))
                .filter(|c| self.empty_deadline(c).is_some())
                .map(|c| c.offering.price_per_hour)
                .sum()
        } else {
            0.0
        };
        let saving = old - new - forgone;
        if require_saving {
            if new + forgone >= old * (1.0 - self.config.consolidation_min_saving) {
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
            old,
            snapshot,
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

    // ------------------------------------------------------------------ calling off

    /// When consolidation next has something to do by itself: its interval ending after a
    /// change, a wake it set, and nominations whose binding grace ends.
    pub(crate) fn consolidation_deadlines(
        &self,
        after: Option<DateTime<Utc>>,
        times: &mut Vec<DateTime<Utc>>,
    ) {
        // Consolidation counts a nomination the cluster has not bound as settled once the grace
        // is over: wake up then, only for claims that have one (pods bound at once, as the
        // simulator's planned binder does, need no wake-up). The claims come from the pod
        // table's index of outstanding nominations; only the earliest wake-up still ahead
        // matters to [`Engine::next_deadline`], the only reader.
        let grace = self.config.binding_grace;
        let earliest = self
            .pods
            .nominated_claims()
            .filter_map(|name| self.claims.get(name))
            .filter(|c| c.phase() == Phase::Initialized && !c.deleting)
            .filter_map(|c| c.nominated_at.map(|t| t + grace))
            .filter(|t| after.is_none_or(|p| *t > p))
            .min();
        times.extend(earliest);
        if self.consolidation_enabled() && self.consolidation_seen != Some(self.version) {
            times.extend(self.consolidation_next);
        }
        // A wake that comes due within the consolidation interval is acted on when the interval
        // ends (polled earlier, the pass would return and the wake would be lost).
        times.extend(
            self.consolidation_wake
                .map(|w| self.consolidation_next.map_or(w, |n| w.max(n))),
        );
    }
}
