//! Disruption commands carried out: replacements first, old nodes deleted once their pods run
//! elsewhere, a move called off when its replacement fails.

use chrono::{DateTime, Utc};
use quartermaster_solver::PodRef;

use crate::disruption::consolidation::{CONSOLIDATION_BACKOFF, Proposal};
use crate::disruption::{CommandKind, DisruptionCommand, DisruptionStats};
use crate::engine::Engine;
use crate::events::{Action, DeleteReason};
use crate::provisioning::FallbackLimit;
use crate::state::{PodEntry, PodState};

impl Engine {
    /// Disruption counters so far.
    pub fn disruption_stats(&self) -> &DisruptionStats {
        &self.disruption.stats
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
            // From the claim's residents (the pod table's index), not a scan of every pod.
            let displaced: Vec<PodRef> = self
                .pods
                .residents(name)
                .into_iter()
                .flatten()
                .filter(|(id, _)| {
                    self.pods
                        .get(id)
                        .is_some_and(|e| self.running_on(e) == Some(name.as_str()))
                })
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
        // Trimmed before the launch: a provider tries the request's fallbacks itself.
        let created = self.apply(now, p.plan, &targets, FallbackLimit::Move { slack });
        for new in &created {
            if let Some(c) = self.claims.get_mut(new) {
                c.replaces = Some(p.names[0].clone());
                c.move_id = Some(id);
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
            c.soft_cordoned = false;
            let displaced = std::mem::take(&mut c.displaced);
            if let Some(node) = c.node() {
                self.actions.push(Action::Uncordon {
                    node: node.name.clone(),
                });
            }
            for pod in displaced {
                if let Some(e) = self.pods.get(&pod)
                    && let PodState::Nominated { claim } = &e.state
                    && (claim == failed || replacements.contains(claim))
                {
                    self.pods
                        .set_state(&pod, PodState::Bound { claim: o.clone() });
                }
            }
        }
        // Replacements that came up are deleted unused: what the failed one was refused is
        // kept out of moves for a while, or the same move would be launched again and again.
        let wasted = replacements
            .iter()
            .any(|r| self.claims.get(r).is_some_and(|c| c.provider_id.is_some()));
        self.disruption.refusals.called_off(failed, wasted, now);
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
