//! Keeping CapacityBuffers' room: placeholders placed after every real pod, refilled when
//! real pods take their room.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use quartermaster_solver::Resources;

use crate::engine::Engine;
use crate::state::PodState;

impl Engine {
    /// CapacityBuffers: placeholders that no longer fit next to the real pods of their claim
    /// (or whose claim is going) let go of it; then every loose placeholder is solved into the
    /// room that is left, nodes bought for the rest (see [`crate::headroom`]).
    pub(crate) fn keep_headroom(&mut self, now: DateTime<Utc>) {
        if self.headroom.is_empty() {
            return;
        }
        let mut used: BTreeMap<&str, Resources> = BTreeMap::new();
        for e in self.pods.values() {
            if let PodState::Nominated { claim } | PodState::Bound { claim } = &e.state {
                *used.entry(claim.as_str()).or_default() += e.pod.requests;
            }
        }
        let mut released = Vec::new();
        for (id, p) in &self.headroom.placeholders {
            let Some(claim) = &p.claim else { continue };
            match self.claims.get(claim) {
                Some(c) if c.schedulable() => {
                    let room = used.entry(claim.as_str()).or_default();
                    let need = *room + p.pod.requests;
                    if need.first_excess(&c.room).is_some() {
                        released.push(id.clone());
                    } else {
                        *room = need;
                    }
                }
                _ => released.push(id.clone()),
            }
        }
        self.headroom.release(&released);
        if !self.headroom.due(now) {
            return;
        }
        self.headroom.dirty = false;
        let (mut snapshot, targets) = self.snapshot_of(now, &[], true);
        snapshot.pending = self.headroom.loose().map(|p| (*p.pod).clone()).collect();
        if snapshot.pending.is_empty() {
            self.headroom.retry_at = None;
            return;
        }
        self.stats.solves += 1;
        self.stats.headroom_solves += 1;
        self.version += 1;
        let plan = crate::provisioning::plan(&snapshot, &self.setup.catalog, now);
        for name in self.apply(
            now,
            plan,
            &targets,
            crate::provisioning::FallbackLimit::Provisioning,
        ) {
            let Some(pool) = self.claims.get(&name).map(|c| c.pool) else {
                continue;
            };
            if self.grew_at.len() <= pool {
                self.grew_at.resize(pool + 1, None);
            }
            self.grew_at[pool] = Some(now);
        }
        let any_loose = self.headroom.loose().next().is_some();
        self.headroom.retry_at = any_loose.then(|| now + self.config.unschedulable_retry);
    }

    /// CapacityBuffer placeholders and the claims whose room they hold (for cost reports:
    /// headroom).
    pub fn headroom(&self) -> impl Iterator<Item = crate::headroom::HeadroomView<'_>> {
        self.headroom
            .placeholders
            .values()
            .map(|p| crate::headroom::HeadroomView {
                buffer: &p.buffer,
                pod: &p.pod,
                claim: p.claim.as_deref(),
            })
    }
}
