//! Retirement: a node whose pods need a small part of what it costs stops taking new pods.
//!
//! A node consolidation may not move pods off (a `WhenEmpty` pool's, or one running a Job or
//! a do-not-disrupt pod) is only ever removed once empty. Left open, such a node is refilled:
//! an H100 node whose training job finished takes the next notebooks that arrive, runs them
//! for hours at forty times their price, and never empties. Retirement asks the solver what
//! the node's pods would need from scratch; when the node costs at least
//! `retire_price_ratio` times that, it is cordoned. Nothing is evicted: its pods finish where
//! they are, new pods get nodes of their size, and the node goes as soon as it is empty.
//!
//! An empty node of a `WhenEmpty` pool waits out `consolidateAfter` before it goes, and any pod
//! that arrives meanwhile may land on it and keep it for its whole run: the training job's H100
//! node takes a notebook the minute the job ends, and the on-demand node bought while spot was
//! out takes the next job once spot is back. Such a node is retired while it waits when it
//! costs at least `retire_price_ratio` times the cheapest node its pool may buy (the least a
//! pod that refills it could need), or `retire_same_type_price_ratio` times the cheapest
//! offering of its own type (what a pod that needs this very machine would pay): it still goes
//! `consolidateAfter` after it emptied, and meanwhile it is kept for pods that need it
//! (reopened, below), not for any pod that fits.
//!
//! Provisioning reopens a retired node (`reopen_if_cheaper`) when a batch of pending pods
//! would otherwise buy nodes and placing them on it saves at least its own price: a training
//! job that needs the whole H100 node gets it back. A reopened node holds pods worth its
//! price, so it is not retired again at once (the two thresholds leave room between them). A
//! node retired while empty goes at its deadline unless used, so it is reopened for pods that
//! would otherwise pay `1 / retire_same_type_price_ratio` of its price: they start at once
//! instead of after a boot, and leave scarce capacity to others. While a retired node would hold
//! a new claim's pods, the claim falls back to no offering dearer than what reopening the node
//! must save: when its cheaper
//! offerings fail (spot is still out), it is given up and its pods planned again, where
//! reopening is weighed, instead of launching a second node as dear as the one left idle.
//!
//! A node that costs at least `soft_cordon_price_ratio` times what it is weighed against, short
//! of the cordon's ratio, is soft-cordoned (`Action::SoftCordon`): tainted
//! `quartermaster.dev/retiring:PreferNoSchedule`. The kube-scheduler's default profile spreads
//! pods onto the emptiest node that fits, which keeps a half-used node of a `WhenEmpty` pool
//! from ever emptying; with the taint, new pods go to other nodes that fit (TaintToleration
//! outweighs the resource scores) and to this one only when none does, so nobody waits for a
//! boot. A pod that lands on it has it weighed again, and the taint comes off once its pods
//! are worth the node (and with an uncordon).
//!
//! The cordon and the soft cordon are the only traces in the cluster. A restarted controller
//! lifts the ones it does not remember, as for any disruption command, and retirement decides
//! again.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_policies::ConsolidationPolicy;
use quartermaster_solver::resources::MAX_RESOURCES;
use quartermaster_solver::{
    OfferingKey, Plan, Pod, PoolLimits, Resources, same_class, to_resources,
};

use crate::engine::Engine;
use crate::events::Action;
use crate::provisioning::Room;
use crate::state::{Claim, Phase};

/// Per resource slot: the least an offering asks per unit of it, $/h.
pub(crate) type UnitPrices = [f64; MAX_RESOURCES];

/// What the offerings a pool may buy cost at the least ($/h): what a pod that lands on an
/// empty node of the pool could need instead.
#[derive(Debug, Clone, Default)]
pub(crate) struct PoolFloor {
    /// Its cheapest offering (0 when it can buy nothing).
    pub(crate) any: f64,
    /// Per instance type it may buy: that type's cheapest offering (the spot price of an
    /// on-demand node's type, when the pool may buy spot).
    pub(crate) by_type: std::collections::HashMap<String, f64>,
}

/// Relative slack on price comparisons (prices are sums of floats).
const PRICE_EPSILON: f64 = 1e-9;

impl Engine {
    /// Retires the nodes whose pods need at most their price divided by their pool's ratio,
    /// the most expensive first, at most `max_retire_checks` solver questions a poll. Only the
    /// nodes on the watch list are looked at.
    pub(crate) fn retire_overpriced(&mut self, now: DateTime<Utc>) {
        if self.retire_watch.is_empty() {
            self.retire_backlog = false;
            return;
        }
        let ratios = self.retire_ratios();
        // Off the list for good: gone, retired, going, or in a pool that does not retire.
        let dropped: Vec<String> = self
            .retire_watch
            .iter()
            .filter(|name| {
                self.claims.get(name.as_str()).is_none_or(|c| {
                    c.retired_at.is_some()
                        || c.deleting
                        || ratios.get(c.pool).copied().flatten().is_none()
                })
            })
            .cloned()
            .collect();
        for name in &dropped {
            self.retire_watch.remove(name);
            // A pool that no longer retires keeps no soft cordon either.
            if let Some(c) = self.claims.get_mut(name)
                && c.soft_cordoned
                && c.retired_at.is_none()
                && !c.deleting
            {
                c.soft_cordoned = false;
                if let Some(node) = c.node() {
                    self.actions.push(Action::SoftCordon {
                        node: node.name.clone(),
                        on: false,
                    });
                }
            }
        }
        let mut due: Vec<(f64, String)> = self
            .retire_watch
            .iter()
            .filter_map(|name| self.claims.get(name.as_str()))
            .filter(|c| self.retire_ready_at(c).is_some_and(|at| now >= at))
            .filter(|c| !self.is_vacant(c) || self.retires_when_empty(c))
            .map(|c| (c.offering.price_per_hour, c.name.clone()))
            .collect();
        // Dearest first (they waste the most), then by name: deterministic.
        due.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        self.retire_backlog = due.len() > self.config.max_retire_checks;
        if due.is_empty() {
            return;
        }
        self.ensure_unit_prices();
        let held = self.headroom.by_claim();
        let held: BTreeSet<String> = held.into_keys().map(str::to_owned).collect();
        for (price, name) in due.into_iter().take(self.config.max_retire_checks) {
            self.retire_watch.remove(&name);
            let Some(c) = self.claims.get(&name) else {
                continue;
            };
            let ratio = ratios[c.pool].unwrap_or(f64::INFINITY);
            let vacant = self.is_vacant(c);
            // Room a CapacityBuffer holds is kept open for it. An empty node is weighed against
            // the cheapest node its pool may buy; an occupied one against what its pods need,
            // the solver asked only when the per-unit bound leaves retirement possible.
            let dear =
                |ratio: f64, need: f64| need > 0.0 && price >= ratio * need * (1.0 - PRICE_EPSILON);
            let dear_for = |need: f64| dear(ratio, need);
            // The soft cordon's ratio, where it is below the cordon's.
            let soft_ratio = self.setup.pools[c.pool]
                .soft_cordon_price_ratio(self.config.soft_cordon_price_ratio)
                .filter(|&r| r < ratio)
                .unwrap_or(ratio);
            let (retire, soft) = if held.contains(&name) {
                (false, false)
            } else if vacant {
                let floor = self.pool_floors.get(c.pool);
                let any = floor.map_or(0.0, |f| f.any);
                let retire = dear_for(any)
                    || floor
                        .and_then(|f| f.by_type.get(&c.offering.instance_type))
                        .is_some_and(|&same| dear(self.config.retire_same_type_price_ratio, same));
                (retire, dear(soft_ratio, any))
            } else if self.movable_only_when_empty(c)
                && price >= soft_ratio * self.need_at_least(c) * (1.0 - PRICE_EPSILON)
            {
                let need = self.need_from_scratch(now, &name).unwrap_or(0.0);
                (dear_for(need), dear(soft_ratio, need))
            } else {
                (false, false)
            };
            let Some(c) = self.claims.get_mut(&name) else {
                continue;
            };
            if !retire {
                c.retire_checked = Some(now);
                if soft != c.soft_cordoned {
                    c.soft_cordoned = soft;
                    if let Some(node) = c.node() {
                        self.actions.push(Action::SoftCordon {
                            node: node.name.clone(),
                            on: soft,
                        });
                    }
                }
                continue;
            }
            c.retired_at = Some(now);
            self.stats.retirements += 1;
            if vacant {
                self.stats.retirements_empty += 1;
            }
            if let Some(node) = c.node() {
                self.actions.push(Action::Cordon {
                    node: node.name.clone(),
                });
            }
        }
    }

    /// A lower bound on what `c`'s pods need from scratch: for each resource, what they ask
    /// of it at the least any offering a pool may buy asks per unit; the largest.
    fn need_at_least(&self, c: &Claim) -> f64 {
        let Some(unit) = self.unit_prices.as_ref() else {
            return 0.0;
        };
        let used = self.resident_requests(&c.name);
        (0..MAX_RESOURCES)
            .map(|slot| used.get(slot).max(0) as f64 * unit[slot])
            .fold(0.0, f64::max)
    }

    /// What the pods on claim `name` request together.
    fn resident_requests(&self, name: &str) -> Resources {
        let mut used = Resources::ZERO;
        for (_, p) in self.pods.residents(name).into_iter().flatten() {
            used += p.requests;
        }
        used
    }

    /// Whether no pod runs on (or is nominated to) `c`.
    fn is_vacant(&self, c: &Claim) -> bool {
        self.pods.residents(&c.name).is_none_or(|r| r.is_empty())
    }

    /// Whether `c` is retired while empty when dear enough: its pool removes only empty nodes,
    /// so a pod that lands on it meanwhile keeps it for the pod's whole run.
    fn retires_when_empty(&self, c: &Claim) -> bool {
        matches!(
            self.setup.pools[c.pool].node_pool.consolidation_policy(),
            ConsolidationPolicy::WhenEmpty
        )
    }

    /// Fills [`Engine::unit_prices`] and [`Engine::pool_floors`] when the catalog or the pools
    /// changed since: per resource, the least any offering some pool may buy asks per unit of
    /// it; per pool, its cheapest offering.
    fn ensure_unit_prices(&mut self) {
        if self.unit_prices.is_some() {
            return;
        }
        let table = &self.setup.resources;
        let mut unit = [f64::INFINITY; MAX_RESOURCES];
        let mut floors = vec![PoolFloor::default(); self.setup.pools.len()];
        for (floor, spec) in floors
            .iter_mut()
            .zip(self.setup.pools.iter().map(|p| &p.spec))
        {
            floor.any = f64::INFINITY;
            for it in self.setup.catalog.for_cloud(spec.cloud) {
                // The offerings the pool may buy (reserved slots cost nothing more: no bound
                // from them).
                let Some(price) = it
                    .offerings
                    .iter()
                    .filter(|o| o.price_per_hour > 0.0)
                    .filter(|o| {
                        let mut labels = it.offering_labels(o);
                        labels.extend(spec.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
                        spec.requirements.matches(&labels)
                    })
                    .map(|o| o.price_per_hour)
                    .min_by(f64::total_cmp)
                else {
                    continue;
                };
                let Some(capacity) = spec.node_shape.capacity_in_layout(it, None) else {
                    continue;
                };
                floor.any = floor.any.min(price);
                floor.by_type.insert(it.name.clone(), price);
                let capacity = to_resources(table, &capacity);
                for (slot, u) in unit.iter_mut().enumerate() {
                    let c = capacity.get(slot);
                    if c > 0 {
                        *u = u.min(price / c as f64);
                    }
                }
            }
        }
        // A resource no offering has bounds nothing; nor does a pool that can buy nothing.
        self.unit_prices = Some(unit.map(|u| if u.is_finite() { u } else { 0.0 }));
        for f in &mut floors {
            if !f.any.is_finite() {
                f.any = 0.0;
            }
        }
        self.pool_floors = floors;
    }

    /// Per pool: its retirement ratio, `None` where retirement is off.
    fn retire_ratios(&self) -> Vec<Option<f64>> {
        self.setup
            .pools
            .iter()
            .map(|p| p.retire_price_ratio(self.config.retire_price_ratio))
            .collect()
    }

    /// When retirement may look at `c` (its nominations have had time to bind, and, unless it
    /// is empty, `consolidateAfter` passed since it last did); `None` while
    /// it is not one retirement looks at: open and initialized, not empty (unless its pool
    /// removes only empty nodes), not static, not reserved, not do-not-disrupt.
    fn retire_ready_at(&self, c: &Claim) -> Option<DateTime<Utc>> {
        if c.retired_at.is_some()
            || c.phase() != Phase::Initialized
            || !c.schedulable()
            || (c.empty_since.is_some() && !self.retires_when_empty(c))
            || c.reservation.is_some()
            || self.setup.pools[c.pool].replicas.is_some()
            || self.node_protected(c)
        {
            return None;
        }
        let grace = self.config.binding_grace;
        let mut at = c.life.initialized_at()? + grace;
        if let Some(t) = c.nominated_at {
            at = at.max(t + grace);
        }
        // An empty node is weighed without asking the solver: no need to space the checks.
        if let (Some(t), Some(after)) =
            (c.retire_checked, self.setup.pools[c.pool].consolidate_after)
            && !self.is_vacant(c)
        {
            at = at.max(t + TimeDelta::from_std(after).unwrap_or(TimeDelta::MAX));
        }
        Some(at)
    }

    /// Whether consolidation may never move `c`'s pods: its pool only removes empty nodes,
    /// or one of them is a Job's or do-not-disrupt.
    fn movable_only_when_empty(&self, c: &Claim) -> bool {
        matches!(
            self.setup.pools[c.pool].node_pool.consolidation_policy(),
            ConsolidationPolicy::WhenEmpty
        ) || self
            .pods
            .residents(&c.name)
            .into_iter()
            .flatten()
            .any(|(id, _)| !self.pod_movable(id))
    }

    /// What `name`'s pods would cost per hour on new nodes bought for them alone; `None` when
    /// the solver could not place them all. Pods like ones asked about before get the same
    /// answer while prices, pools and unavailable offerings are unchanged (and no pool has a
    /// limit, which makes the answer depend on the fleet).
    fn need_from_scratch(&mut self, now: DateTime<Utc>, name: &str) -> Option<f64> {
        let pods: Vec<Arc<Pod>> = self
            .pods
            .residents(name)
            .into_iter()
            .flatten()
            .map(|(_, p)| p.clone())
            .collect();
        let memo =
            self.need_memo_usable() && pods.iter().all(|p| p.gang.is_none() && p.devices.is_none());
        let unavailable = self.unavailable.active(now);
        if memo {
            if self.need_memo.unavailable != unavailable {
                self.need_memo = NeedMemo::default();
            }
            if let Some(need) = self.need_memo.get(&pods) {
                return need;
            }
        }
        let (snapshot, _) = self.snapshot_offering(now, &[name], false, Room::None);
        let plan = crate::provisioning::plan(&snapshot, &self.setup.catalog, now);
        let need = plan.unschedulable.is_empty().then(|| plan_cost(&plan));
        if memo {
            self.need_memo.unavailable = unavailable;
            self.need_memo.put(pods, need);
        }
        need
    }

    /// Whether a from-scratch answer depends on nothing but the pods: no pool has a limit (or
    /// is static, which limits its node count).
    fn need_memo_usable(&self) -> bool {
        self.setup.pools.iter().all(|p| {
            let l = &p.spec.limits;
            p.replicas.is_none()
                && l.nodes.is_none()
                && l.max_hourly_cost.is_none()
                && l.resources == PoolLimits::default().resources
        })
    }

    /// When retirement next has something to do by itself: the earliest time a node on its
    /// list becomes ready, or the next poll when it left nodes unasked.
    pub(crate) fn retirement_deadlines(&self, times: &mut Vec<DateTime<Utc>>) {
        if self.retire_backlog {
            times.extend(self.last_poll.map(|t| t + TimeDelta::seconds(1)));
        }
        times.extend(
            self.retire_watch
                .iter()
                .filter_map(|name| self.claims.get(name.as_str()))
                .filter_map(|c| self.retire_ready_at(c))
                .min(),
        );
    }

    /// What reopening retired `c` must save: its price; for a node retired while empty, its
    /// price divided by `retire_same_type_price_ratio`. Such a node goes at its deadline
    /// unless used, and a pod that would otherwise pay at least that share of it is better
    /// off with it at once than waiting for a boot, or taking capacity other pods need.
    fn reopen_worth(&self, c: &Claim) -> f64 {
        let retired_empty = matches!((c.retired_at, c.empty_since), (Some(r), Some(e)) if r >= e);
        if retired_empty {
            c.offering.price_per_hour / self.config.retire_same_type_price_ratio.max(1.0)
        } else {
            c.offering.price_per_hour
        }
    }

    /// The retired nodes provisioning may reopen. Empty when none is.
    pub(crate) fn reopenable_rooms(&self) -> Vec<RetiredRoom> {
        self.claims
            .values()
            .filter(|c| c.reopenable())
            .map(|c| RetiredRoom {
                name: c.name.clone(),
                pool: c.pool,
                worth: self.reopen_worth(c),
                free: c.room.saturating_sub(&self.resident_requests(&c.name)),
                labels: c.node_labels(),
            })
            .collect()
    }

    /// `plan`, or the plan that also uses retired nodes when that saves at least what the
    /// retired nodes it uses cost (they are reopened: uncordoned, open to new pods again).
    /// Returns the plan to apply with its node-name-to-claim map.
    pub(crate) fn reopen_if_cheaper(
        &mut self,
        now: DateTime<Utc>,
        plan: Plan,
        targets: std::collections::BTreeMap<String, String>,
    ) -> (Plan, std::collections::BTreeMap<String, String>) {
        let buying = plan_cost(&plan);
        if plan.new_nodes.is_empty() {
            return (plan, targets);
        }
        // A retired node saves at most what the new nodes it could take a pod from cost:
        // one that cannot pay for itself so is not offered (nor the solver asked).
        let requests: Vec<Vec<Resources>> = plan
            .new_nodes
            .iter()
            .map(|n| {
                n.pods
                    .iter()
                    .filter_map(|p| self.pods.get(p).map(|e| e.pod.requests))
                    .collect()
            })
            .collect();
        let reopen: Vec<String> = self
            .reopenable_rooms()
            .into_iter()
            .filter(|r| r.worth <= buying * (1.0 + PRICE_EPSILON))
            .filter(|r| {
                let could_save: f64 = plan
                    .new_nodes
                    .iter()
                    .zip(&requests)
                    .filter(|(_, pods)| pods.iter().any(|q| q.fits_in(&r.free)))
                    .map(|(n, _)| n.offering.price_per_hour)
                    .sum();
                could_save >= r.worth * (1.0 - PRICE_EPSILON)
            })
            .map(|r| r.name)
            .collect();
        if reopen.is_empty() {
            return (plan, targets);
        }
        let (snapshot, with_targets) =
            self.snapshot_offering(now, &[], false, Room::Reopening(&reopen));
        let with = crate::provisioning::plan(&snapshot, &self.setup.catalog, now);
        let used: BTreeSet<&String> = with
            .existing
            .iter()
            .filter_map(|p| with_targets.get(&p.node))
            .filter(|claim| reopen.contains(claim))
            .collect();
        let used_price: f64 = used
            .iter()
            .filter_map(|c| self.claims.get(*c))
            .map(|c| self.reopen_worth(c))
            .sum();
        let saving = buying - plan_cost(&with);
        if used.is_empty()
            || with.unschedulable.len() > plan.unschedulable.len()
            || saving < used_price * (1.0 - PRICE_EPSILON)
        {
            return (plan, targets);
        }
        let used: Vec<String> = used.into_iter().cloned().collect();
        for name in used {
            let Some(c) = self.claims.get_mut(&name) else {
                continue;
            };
            c.retired_at = None;
            c.retire_checked = Some(now);
            c.soft_cordoned = false;
            self.stats.retirements_reopened += 1;
            if let Some(node) = c.node() {
                self.actions.push(Action::Uncordon {
                    node: node.name.clone(),
                });
            }
            self.retire_watch.insert(name);
        }
        (with, with_targets)
    }
}

/// The from-scratch needs retirement asked the solver for, by resident pods (compared as the
/// solver groups pods, [`same_class`]), while the unavailable offerings are `unavailable`. Cleared with the unit prices
/// when the catalog, the pools or the reservations change.
#[derive(Debug, Clone, Default)]
pub(crate) struct NeedMemo {
    entries: VecDeque<(Vec<Arc<Pod>>, Option<f64>)>,
    unavailable: BTreeSet<OfferingKey>,
}

/// Answers kept (the oldest goes first).
const NEED_MEMO_ENTRIES: usize = 64;

impl NeedMemo {
    fn get(&self, pods: &[Arc<Pod>]) -> Option<Option<f64>> {
        self.entries
            .iter()
            .find(|(known, _)| same_pods(known, pods))
            .map(|(_, need)| *need)
    }

    fn put(&mut self, pods: Vec<Arc<Pod>>, need: Option<f64>) {
        if self.entries.len() == NEED_MEMO_ENTRIES {
            self.entries.pop_front();
        }
        self.entries.push_back((pods, need));
    }
}

/// Whether two sets of pods are alike pod for pod (in any order).
fn same_pods(a: &[Arc<Pod>], b: &[Arc<Pod>]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let mut used = vec![false; b.len()];
    a.iter().all(|x| {
        let found = (0..b.len()).find(|&i| !used[i] && same_class(x, &b[i]));
        found.map(|i| used[i] = true).is_some()
    })
}

/// A retired node provisioning may reopen: weighed against a batch's new nodes, and against a
/// new claim's fallbacks.
#[derive(Debug, Clone)]
pub(crate) struct RetiredRoom {
    name: String,
    pool: usize,
    /// What reopening it must save ([`Engine::reopen_worth`]), $/h.
    worth: f64,
    /// Its room left.
    free: Resources,
    labels: Arc<std::collections::BTreeMap<String, String>>,
}

/// The dearest offering a new claim of `pool` for `pods` may launch on, given the retired
/// nodes `rooms`: below what reopening one that holds them all must save. When the claim's
/// cheaper offerings all fail, it is given up and its pods planned again, where reopening
/// that node is weighed, rather than launched on a dearer offering while the node waits out
/// its deadline. Infinite when no retired node holds them.
pub(crate) fn fallback_ceiling(rooms: &[RetiredRoom], pool: usize, pods: &[&Pod]) -> f64 {
    let mut need = Resources::ZERO;
    for p in pods {
        need += p.requests;
    }
    rooms
        .iter()
        .filter(|r| r.pool == pool && need.fits_in(&r.free))
        .filter(|r| {
            pods.iter().all(|p| {
                p.node_terms.is_empty() || p.node_terms.iter().any(|t| t.matches(&r.labels))
            })
        })
        .map(|r| r.worth * (1.0 - PRICE_EPSILON))
        .fold(f64::INFINITY, f64::min)
}

/// What a plan's new nodes cost per hour.
fn plan_cost(plan: &Plan) -> f64 {
    plan.new_nodes
        .iter()
        .map(|n| n.offering.price_per_hour)
        .sum()
}
