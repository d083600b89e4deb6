//! Nominations are hints: the kube-scheduler decides. Pods whose claim can no longer host
//! them are solved again at once.

use chrono::{DateTime, Utc};
use quartermaster_solver::{PodRef, Resources};

use crate::engine::Engine;
use crate::events::{Action, Event};
use crate::state::{Phase, PodEntry, PodState};

impl Engine {
    /// Whether `event` is the cluster binding a pod onto the claim it was nominated to.
    pub(crate) fn confirms_nomination(&self, event: &Event) -> bool {
        let Event::PodBound { pod, node } = event else {
            return false;
        };
        let Some(PodEntry {
            state: PodState::Nominated { claim },
            ..
        }) = self.pods.get(&pod.id)
        else {
            return false;
        };
        self.claims
            .get(claim)
            .and_then(|c| c.node())
            .is_some_and(|n| n.name == *node)
    }

    /// Plans `pod` on `claim`. A nomination is a hint: the pod stays `Nominated` until the
    /// cluster reports it bound (`Event::PodBound`), wherever that is. On an initialized claim
    /// the driver is told at once (`Action::Bind`: the simulator's planned binder binds, the
    /// controller records the nomination for the kube-scheduler).
    pub(crate) fn nominate(&mut self, now: DateTime<Utc>, pod: &PodRef, claim: &str) {
        let nominated = PodState::Nominated {
            claim: claim.to_owned(),
        };
        if !self.pods.set_state(pod, nominated) {
            // A CapacityBuffer placeholder holds the room; nothing is ever bound for it.
            self.headroom.place(pod, claim);
            return;
        }
        let Some(c) = self.claims.get_mut(claim) else {
            return;
        };
        c.nominated_at = Some(now);
        if c.phase() == Phase::Initialized {
            c.empty_since = None;
            c.last_change = now;
            let node = c.target_name().to_owned();
            self.actions.push(Action::Bind {
                pod: pod.clone(),
                node,
            });
        }
    }

    /// Nominations are hints: the kube-scheduler binds pods where it likes, and pods it bound
    /// elsewhere may have taken the room the engine planned for others. Every claim keeps the
    /// pods nominated to it only while they fit next to what is bound there (in name order);
    /// the others wait again and are solved at once against the room that is really free.
    pub(crate) fn check_nominations(&mut self, now: DateTime<Utc>) {
        if !std::mem::take(&mut self.nominations_dirty) {
            return;
        }
        // Only claims with a nomination outstanding can have one to release: found from the
        // pod table's index, each with its residents (in pod order), not by a scan of every pod.
        let mut released = Vec::new();
        for claim in self.pods.nominated_claims() {
            let nominated = self
                .pods
                .residents(claim)
                .into_iter()
                .flatten()
                .filter(|(id, _)| {
                    matches!(
                        self.pods.get(*id).map(|e| &e.state),
                        Some(PodState::Nominated { .. })
                    )
                });
            let Some(c) = self.claims.get(claim) else {
                released.extend(nominated.map(|(id, _)| id.clone()));
                continue;
            };
            // A node being vacated keeps its pods where they run until they move.
            if c.vacating() || c.deleting {
                continue;
            }
            let mut room = Resources::ZERO;
            for (id, pod) in self.pods.residents(claim).into_iter().flatten() {
                if matches!(
                    self.pods.get(id).map(|e| &e.state),
                    Some(PodState::Bound { .. })
                ) {
                    room += pod.requests;
                }
            }
            for (id, pod) in nominated {
                let need = room + pod.requests;
                if need.first_excess(&c.room).is_some() {
                    released.push(id.clone());
                } else {
                    room = need;
                }
            }
        }
        if released.is_empty() {
            return;
        }
        self.stats.nominations_released += released.len() as u64;
        for id in released {
            self.pods.set_state(
                &id,
                PodState::Waiting {
                    since: now,
                    reason: None,
                },
            );
        }
        self.arrive(now);
        self.batch.force = true;
    }
}
