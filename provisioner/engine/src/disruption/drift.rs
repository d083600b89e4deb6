//! Drift and expiry.
//!
//! Drift: every claim records the hash of its NodePool template and NodeClass spec
//! ([`crate::TEMPLATE_HASH_LABEL`]); a claim whose hash is not its pool's current one, or whose
//! instance the cloud says no longer matches its NodeClass ([`crate::Event::CloudDrifted`]: a
//! moved AMI alias, other security groups or subnets), is replaced
//! (replacement first, within the pool's `Drifted` budget, never a do-not-disrupt pod or node,
//! never a Job's pod, never past a PodDisruptionBudget), one move per pass, before consolidation.
//!
//! Expiry: a node older than its pool's `expireAfter` is cordoned and its pods planned again at
//! once (they keep running until their new place is ready, as after a spot interruption
//! notice). It is forceful, as Karpenter's: no budget holds it back, and once
//! `terminationGracePeriod` has passed the node is deleted whatever still runs on it,
//! do-not-disrupt pods included.

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_policies::DisruptionReason;

use crate::disruption::{CommandKind, DisruptionCommand};
use crate::engine::Engine;
use crate::events::{Action, DeleteReason};
use crate::state::Phase;

impl Engine {
    /// Replaces one drifted node, if any may be; true when a move started.
    pub(crate) fn replace_drifted(&mut self, now: DateTime<Utc>) -> bool {
        let left = self.budget_left(DisruptionReason::Drifted, now);
        let claims = &self.claims;
        self.disruption
            .cloud_drifted
            .retain(|name, _| claims.get(name).is_some_and(|c| !c.deleting));
        let drifted: Vec<_> = self.movable_nodes(now, |c| {
            c.template_hash != self.setup.pools[c.pool].template_hash
                || self.disruption.cloud_drifted.contains_key(&c.name)
        });
        // Held back by a budget: looked at again later (its window ends without an event).
        if drifted.iter().any(|cand| left[cand.pool] == 0) {
            let again = now + self.config.consolidation_interval;
            self.consolidation_wake = Some(self.consolidation_wake.map_or(again, |w| w.min(again)));
        }
        let drifted: Vec<String> = drifted
            .into_iter()
            .filter(|cand| left[cand.pool] > 0)
            .filter(|cand| self.pdbs_allow(cand.pods.iter().map(|p| &*self.pods[p].pod)))
            .map(|cand| cand.name)
            .collect();
        for name in drifted {
            if let Some(p) = self.evaluate(now, vec![name], false) {
                self.execute(now, p, DeleteReason::Drifted, false);
                return true;
            }
        }
        false
    }

    /// The cloud says the instance `provider_id` drifted from its NodeClass.
    pub(crate) fn cloud_drifted(&mut self, provider_id: &str, reason: String) {
        if let Some(name) = self.claim_by_provider_id(provider_id) {
            self.disruption.cloud_drifted.insert(name, reason);
        }
    }

    /// NodePools changed: matched by name, replaced; new ones added.
    pub(crate) fn pools_changed(&mut self, pools: Vec<crate::PoolPolicy>) {
        for p in pools {
            match self
                .setup
                .pools
                .iter()
                .position(|q| q.spec.name == p.spec.name)
            {
                Some(i) => self.setup.pools[i] = p,
                None => {
                    self.setup.pools.push(p);
                    self.static_retry_at.push(None);
                }
            }
        }
    }

    /// Starts the replacement of expired nodes and deletes those past their grace period.
    pub(crate) fn expire(&mut self, now: DateTime<Utc>) {
        // Created at or before this, a pool's claim has expired (`expireAfter` taken from `now`
        // once per pool, not added to every claim's creation).
        let expired_before: Vec<Option<DateTime<Utc>>> = self
            .setup
            .pools
            .iter()
            .map(|p| now.checked_sub_signed(TimeDelta::from_std(p.expire_after?).ok()?))
            .collect();
        // One walk finds both; a forced deletion can change other claims (a move it ends), so
        // after one the expired are looked for again.
        let mut forced = Vec::new();
        let mut found = Vec::new();
        for c in self.claims.values() {
            if !c.deleting && c.forced_at.is_some_and(|t| now >= t) {
                forced.push(c.name.clone());
            } else if self.expired(c, &expired_before) {
                found.push(c.name.clone());
            }
        }
        if !forced.is_empty() {
            for name in forced {
                self.delete(now, &name, DeleteReason::Expired);
            }
            found = self
                .claims
                .values()
                .filter(|c| self.expired(c, &expired_before))
                .map(|c| c.name.clone())
                .collect();
        }
        for name in found {
            self.start_expiry(now, &name);
        }
    }

    /// Whether `c` is due for replacement by expiry: initialized, not leaving, not in a static
    /// pool, and created at or before its pool's `expired_before` time.
    fn expired(&self, c: &crate::state::Claim, expired_before: &[Option<DateTime<Utc>>]) -> bool {
        c.phase() == Phase::Initialized
            && !c.deleting
            && !c.vacating()
            && self.setup.pools[c.pool].replicas.is_none()
            && expired_before[c.pool].is_some_and(|t| c.created_at <= t)
    }

    fn start_expiry(&mut self, now: DateTime<Utc>, name: &str) {
        let grace = {
            let c = &self.claims[name];
            self.setup.pools[c.pool]
                .termination_grace_period
                .and_then(|d| TimeDelta::from_std(d).ok())
        };
        let displaced = self.pods.release(name, now);
        let c = self.claims.get_mut(name).expect("claim exists");
        c.consolidating = true;
        c.disruption_reason = Some(DeleteReason::Expired);
        c.forced_at = grace.map(|g| now + g);
        let command = DisruptionCommand {
            kind: CommandKind::Expire,
            reason: DeleteReason::Expired,
            claims: vec![c.name.clone()],
            nodes: c.node().into_iter().map(|n| n.name.clone()).collect(),
            replacements: Vec::new(),
            pods: displaced.len(),
            saving_per_hour: 0.0,
        };
        c.displaced = displaced;
        let node = c.node().map(|n| n.name.clone());
        self.disruption.stats.record(&command);
        self.actions.push(Action::Disrupt(command));
        if let Some(node) = node {
            self.actions.push(Action::Cordon { node });
        }
        self.arrive(now);
        self.batch.force = true;
    }

    /// The next expiry or forced deletion. A pool's claims expire in creation order, so only
    /// its oldest candidate's creation has `expireAfter` added (this runs on every poll).
    pub(crate) fn disruption_deadline(&self) -> Option<DateTime<Utc>> {
        let mut forced: Option<DateTime<Utc>> = None;
        let mut oldest: Vec<Option<DateTime<Utc>>> = vec![None; self.setup.pools.len()];
        for c in self.claims.values().filter(|c| !c.deleting) {
            if c.vacating() {
                forced = min_of(forced, c.forced_at);
            } else if c.phase() == Phase::Initialized {
                let pool = &self.setup.pools[c.pool];
                if pool.replicas.is_none() && pool.expire_after.is_some() {
                    oldest[c.pool] = min_of(oldest[c.pool], Some(c.created_at));
                }
            }
        }
        let expiring = oldest
            .iter()
            .enumerate()
            .filter_map(|(pool, created)| self.expiry_from(pool, (*created)?))
            .min();
        min_of(forced, expiring)
    }

    /// When a claim of `pool` created at `created` expires.
    fn expiry_from(&self, pool: usize, created: DateTime<Utc>) -> Option<DateTime<Utc>> {
        let after = TimeDelta::from_std(self.setup.pools[pool].expire_after?).ok()?;
        created.checked_add_signed(after)
    }
}

/// The earlier of two optional times.
fn min_of(a: Option<DateTime<Utc>>, b: Option<DateTime<Utc>>) -> Option<DateTime<Utc>> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
