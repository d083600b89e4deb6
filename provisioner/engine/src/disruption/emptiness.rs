//! Empty nodes removed after their pool's `consolidateAfter`, never while pending pods could
//! use them.

use std::collections::BTreeSet;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_policies::DisruptionReason;

use crate::engine::Engine;
use crate::events::DeleteReason;
use crate::state::{Claim, Phase, PodState};

impl Engine {
    /// When an empty claim may go: `consolidateAfter` after it emptied (at once when retired
    /// with pods on it; never, in a reservation), and never within
    /// [`EngineConfig::binding_grace`] of its initialization or of its last nomination (the
    /// kube-scheduler may not have seen the node, or bound the pods, yet).
    pub(crate) fn empty_deadline(&self, c: &Claim) -> Option<DateTime<Utc>> {
        // A node in a reservation costs nothing more than the reservation, used or not: kept
        // up for the next pod (it goes when its reservation ends).
        let since = c.empty_since?;
        if c.reservation.is_some() {
            return None;
        }
        let after = self.setup.pools[c.pool].consolidate_after?;
        let grace = self.config.binding_grace;
        // A node retired for its pods was kept only for them: it goes as soon as they are
        // done. One retired while empty waits out `consolidateAfter` as any empty node.
        let after = if c.retired_at.is_some_and(|r| r < since) {
            TimeDelta::zero()
        } else {
            TimeDelta::from_std(after).unwrap_or(TimeDelta::MAX)
        };
        let mut at = since + after;
        at = at.max(c.life.initialized_at().map_or(since, |t| t + grace));
        if let Some(t) = c.nominated_at {
            at = at.max(t + grace);
        }
        Some(at)
    }

    /// Whether a pod that is not running yet could use empty `c` now: one waiting for a
    /// solve, or one nominated anywhere and not bound yet (the kube-scheduler binds where it
    /// likes, and may well bind it here first: a node deleted as it does takes the pod with
    /// it). Such a node is not removed as empty.
    pub(crate) fn wanted_by_unbound_pods(&self, c: &Claim) -> bool {
        let spec = &self.setup.pools[c.pool].spec;
        let labels = c.facts.merged_labels();
        let fits = |pod: &quartermaster_solver::Pod| {
            pod.requests.first_excess(&c.room).is_none()
                && quartermaster_solver::pod::tolerates_all(&pod.tolerations, &spec.taints).is_ok()
                && (pod.node_terms.is_empty() || pod.node_terms.iter().any(|t| t.matches(&labels)))
        };
        // The pods waiting for a solve, and those nominated and not bound: from the pod
        // table's indexes, not a scan of every pod (this runs only for a claim otherwise due).
        self.pods.unplaced().values().any(|p| fits(p))
            || self
                .pods
                .nominated_claims()
                .filter(|t| self.claims.contains_key(*t))
                .filter_map(|t| self.pods.residents(t))
                .flatten()
                .any(|(id, p)| {
                    matches!(
                        self.pods.get(id).map(|e| &e.state),
                        Some(PodState::Nominated { .. })
                    ) && fits(p)
                })
    }

    pub(crate) fn remove_empty(&mut self, now: DateTime<Utc>) {
        // Each claim's residents are kept as pods move (not found by scanning every pod).
        debug_assert!(self.pods.index_consistent());
        let placeholders: BTreeSet<&str> = self.headroom.by_claim().into_keys().collect();
        let mut empty_now = Vec::new();
        let mut occupied_now = Vec::new();
        // Found on the same walk: the claims being vacated, and those empty once the walk's
        // marks are set (the only ones that can be due below).
        let mut vacating = Vec::new();
        let mut maybe_due = Vec::new();
        // Claims and occupied claims are both in name order: walked side by side, one
        // comparison per step instead of a lookup per claim (this runs on every poll).
        let mut occupied = self.pods.occupied().peekable();
        for c in self.claims.values() {
            let mut resident = false;
            while let Some(name) = occupied.peek() {
                match (*name).cmp(c.name.as_str()) {
                    std::cmp::Ordering::Less => {
                        occupied.next();
                    }
                    std::cmp::Ordering::Equal => {
                        resident = true;
                        break;
                    }
                    std::cmp::Ordering::Greater => break,
                }
            }
            if c.vacating() && !c.deleting {
                vacating.push(c.name.clone());
            }
            if c.phase() != Phase::Initialized || c.deleting || c.vacating() {
                continue;
            }
            if resident || (!placeholders.is_empty() && placeholders.contains(c.name.as_str())) {
                if c.empty_since.is_some() {
                    occupied_now.push(c.name.clone());
                }
            } else {
                if c.empty_since.is_none() {
                    empty_now.push(c.name.clone());
                }
                maybe_due.push(c.name.clone());
            }
        }
        drop(occupied);
        for name in occupied_now {
            if let Some(c) = self.claims.get_mut(&name) {
                c.empty_since = None;
            }
        }
        for name in empty_now {
            if let Some(c) = self.claims.get_mut(&name) {
                c.empty_since = Some(now);
            }
        }
        // An interrupted node whose pods all run elsewhere now goes at once: no reason to pay
        // for the rest of the notice period.
        let vacated: Vec<String> = vacating
            .into_iter()
            .filter_map(|name| self.claims.get(&name))
            .filter(|c| {
                c.displaced.iter().all(|p| match self.pods.get(p) {
                    None => true,
                    Some(e) => match &e.state {
                        PodState::Bound { claim } => *claim != c.name,
                        // Room kept on a node that is up: it moves there when this one drains.
                        PodState::Nominated { claim } => {
                            *claim != c.name
                                && self
                                    .claims
                                    .get(claim)
                                    .is_some_and(|t| t.phase() == Phase::Initialized)
                        }
                        PodState::Waiting { .. } => false,
                    },
                })
            })
            .map(|c| c.name.clone())
            .collect();
        for name in vacated {
            let c = &self.claims[&name];
            let reason = if c.interrupted_at.is_some() && c.reservation.is_some() {
                DeleteReason::ReservationEnding
            } else if let Some(reason) = Self::flex_start_vacated(c) {
                reason
            } else if c.interrupted_at.is_some() {
                DeleteReason::Interrupted
            } else if let Some(reason) = c
                .disruption_reason
                .filter(|r| matches!(r, DeleteReason::Drifted | DeleteReason::Expired))
            {
                reason
            } else if c.consolidation_replaced {
                self.stats.consolidation_replacements += 1;
                DeleteReason::Underutilized
            } else {
                self.stats.consolidation_deletes += 1;
                DeleteReason::Underutilized
            };
            self.delete(now, &name, reason);
        }
        // Delete those empty past consolidateAfter, within each pool's budget.
        let due: Vec<(String, usize)> = maybe_due
            .iter()
            .filter_map(|name| self.claims.get(name))
            .filter(|c| c.empty_since.is_some() && !c.deleting)
            .filter(|c| c.phase() == Phase::Initialized && !c.vacating())
            .filter(|c| self.empty_deadline(c).is_some_and(|at| now >= at))
            .filter(|c| self.setup.pools[c.pool].replicas.is_none())
            .filter(|c| !self.node_protected(c))
            // A retired node is cordoned: no pod the kube-scheduler binds can land there.
            .filter(|c| c.retired_at.is_some() || !self.wanted_by_unbound_pods(c))
            .map(|c| (c.name.clone(), c.pool))
            .collect();
        if due.is_empty() {
            return;
        }
        // Per pool: (claims, claims disrupted), counted only when some claim is due.
        let mut per_pool = vec![(0usize, 0usize); self.setup.pools.len()];
        for c in self.claims.values() {
            let e = &mut per_pool[c.pool];
            e.0 += 1;
            if c.deleting || c.consolidating {
                e.1 += 1;
            }
        }
        for (name, pool) in due {
            let (total, disrupting) = per_pool[pool];
            let allowed =
                self.setup.pools[pool].allowed_disruptions(DisruptionReason::Empty, total, now);
            if disrupting >= allowed {
                continue;
            }
            per_pool[pool].1 += 1;
            self.stats.empty_deletions += 1;
            self.announce_empty(&name);
            self.delete(now, &name, DeleteReason::Empty);
        }
    }
}
