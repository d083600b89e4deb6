//! Spot interruption notices: the node is cordoned and its pods placed again at once.

use chrono::{DateTime, Utc};

use crate::engine::Engine;
use crate::events::Action;

impl Engine {
    pub(crate) fn interrupted(
        &mut self,
        now: DateTime<Utc>,
        provider_id: &str,
        terminates_at: DateTime<Utc>,
    ) {
        let Some(name) = self.claim_by_provider_id(provider_id) else {
            return;
        };
        if self.vacate(now, &name, terminates_at) {
            self.stats.interruptions += 1;
        }
    }

    /// The claim's node goes at `terminates_at` whatever happens: cordoned, its pods planned
    /// again at once (they keep running until it is drained). False when it was already.
    pub(crate) fn vacate(
        &mut self,
        now: DateTime<Utc>,
        name: &str,
        terminates_at: DateTime<Utc>,
    ) -> bool {
        let name = name.to_owned();
        let Some(c) = self.claims.get_mut(&name) else {
            return false;
        };
        if c.interrupted_at.is_some() {
            return false;
        }
        c.interrupted_at = Some(terminates_at);
        if let Some(node) = c.node() {
            self.actions.push(Action::Cordon {
                node: node.name.clone(),
            });
        }
        // Launch the replacement at once: the pods are planned again now, while they keep
        // running on the old node until it is drained.
        let displaced = self.pods.release(&name, now);
        if let Some(c) = self.claims.get_mut(&name) {
            c.displaced = displaced;
        }
        self.arrive(now);
        self.batch.force = true;
        true
    }
}
