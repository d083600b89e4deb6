//! Deleting claims: their pods released to be placed again, the claim forgotten once its
//! instance is gone.

use chrono::{DateTime, Utc};

use crate::engine::Engine;
use crate::events::{Action, DeleteReason};

impl Engine {
    /// Asks for a claim's deletion; its pods need a place again right away.
    pub(crate) fn delete(&mut self, now: DateTime<Utc>, name: &str, reason: DeleteReason) {
        let Some(c) = self.claims.get_mut(name) else {
            return;
        };
        c.deleting = true;
        let provider_id = c.provider_id.clone();
        let replaces = c.replaces.clone();
        self.release_pods(now, name, replaces.as_deref());
        self.actions.push(Action::Delete {
            claim: name.to_owned(),
            provider_id,
            reason,
        });
    }

    /// Pods nominated or bound to `name` wait again. When `name` is a consolidation replacement
    /// (`replaces`) of a node that is still there, the consolidation is called off instead and
    /// the pods stay where they run.
    pub(crate) fn release_pods(&mut self, now: DateTime<Utc>, name: &str, replaces: Option<&str>) {
        if let Some(old) = replaces
            && self.call_off_move(now, name, old)
        {
            return;
        }
        if !self.pods.release(name, now).is_empty() {
            self.arrive(now);
            self.batch.force = true;
        }
    }

    pub(crate) fn claim_by_provider_id(&self, provider_id: &str) -> Option<String> {
        self.claims
            .values()
            .find(|c| c.provider_id.as_deref() == Some(provider_id))
            .map(|c| c.name.clone())
    }

    /// The claim is gone: drain its node; pods still placed on it wait again.
    pub(crate) fn remove_claim(&mut self, now: DateTime<Utc>, name: &str) {
        let Some(c) = self.claims.remove(name) else {
            return;
        };
        // A node that ran frees the capacity it held (a replacement that never came up held
        // none): moves may ask for that kind again.
        if c.life.registered_at().is_some()
            && !self.disruption.refusals.is_empty()
            && let Some(kind) = self.capacity_kind(c.cloud, &c.offering)
        {
            self.disruption.refusals.seen(&kind);
        }
        self.repair_reasons.remove(name);
        if let Some(node) = c.node()
            && self.node_claims.get(&node.name).is_some_and(|n| n == name)
        {
            self.node_claims.remove(&node.name);
        }
        if let Some(node) = c.node() {
            self.actions.push(Action::Drain {
                node: node.name.clone(),
            });
        }
        self.release_pods(now, name, c.replaces.as_deref());
        self.disruption.refusals.forget(name);
    }
}
