//! The pods the engine tracks, with an index of each claim's residents (the pods nominated or
//! bound to it) kept as pods come, go and move. Empty-node removal and the solver's snapshot
//! read a claim's residents from the index instead of scanning every pod on every poll (on a
//! week of 100,000 jobs that scan, keyed by claim name, was a third of the run).
//!
//! Reads go through [`Deref`] to the map; every change goes through a method here, so the index
//! cannot fall behind (there is no `DerefMut`).

use std::collections::BTreeMap;
use std::ops::Deref;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use quartermaster_solver::{Pod, PodRef};

use crate::state::{PodEntry, PodState};

/// A claim's residents, in pod order, shared as the snapshot holds them.
pub(crate) type Residents = BTreeMap<PodRef, Arc<Pod>>;

/// Pods by id, and each claim's residents.
#[derive(Debug, Clone, Default)]
pub(crate) struct PodTable {
    entries: BTreeMap<PodRef, PodEntry>,
    /// Claim name -> the pods nominated or bound to it. A claim with none has no entry.
    residents: BTreeMap<String, Residents>,
    /// The pods waiting for a solve (waiting, with no reason from the last one).
    unplaced: Residents,
    /// Every waiting pod, those the last solve could not place included (a superset of
    /// `unplaced`): the solver's pending pods, without a scan of every pod.
    waiting: Residents,
    /// Claim name -> how many pods are nominated to it and not bound yet. A claim with none
    /// has no entry: the claims whose nominations the cluster may still overrule, without a
    /// scan of every pod.
    nominated: BTreeMap<String, usize>,
}

impl Deref for PodTable {
    type Target = BTreeMap<PodRef, PodEntry>;

    fn deref(&self) -> &Self::Target {
        &self.entries
    }
}

impl<'a> IntoIterator for &'a PodTable {
    type Item = (&'a PodRef, &'a PodEntry);
    type IntoIter = std::collections::btree_map::Iter<'a, PodRef, PodEntry>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter()
    }
}

/// Whether a pod waits for a solve (one the last solve could not place waits for no solve).
fn unplaced(state: &PodState) -> bool {
    matches!(state, PodState::Waiting { reason: None, .. })
}

/// Whether a pod waits (for a solve, or for one that can place it).
fn waiting(state: &PodState) -> bool {
    matches!(state, PodState::Waiting { .. })
}

/// The claim a pod is nominated to (and not bound yet), if any.
fn nominated_to(state: &PodState) -> Option<&str> {
    match state {
        PodState::Nominated { claim } => Some(claim),
        _ => None,
    }
}

/// The claim a pod holds room on, if any.
fn placed_on(state: &PodState) -> Option<&str> {
    match state {
        PodState::Nominated { claim } | PodState::Bound { claim } => Some(claim),
        PodState::Waiting { .. } => None,
    }
}

impl PodTable {
    /// Adds (or replaces) a pod.
    pub fn insert(&mut self, id: PodRef, entry: PodEntry) -> Option<PodEntry> {
        let previous = self.remove(&id);
        if let Some(claim) = placed_on(&entry.state) {
            self.residents
                .entry(claim.to_owned())
                .or_default()
                .insert(id.clone(), entry.pod.clone());
        }
        if unplaced(&entry.state) {
            self.unplaced.insert(id.clone(), entry.pod.clone());
        }
        if waiting(&entry.state) {
            self.waiting.insert(id.clone(), entry.pod.clone());
        }
        if let Some(claim) = nominated_to(&entry.state) {
            Self::count_in(&mut self.nominated, claim, true);
        }
        self.entries.insert(id, entry);
        previous
    }

    /// Forgets a pod.
    pub fn remove(&mut self, id: &PodRef) -> Option<PodEntry> {
        let entry = self.entries.remove(id)?;
        if let Some(claim) = placed_on(&entry.state) {
            self.leave(claim, id);
        }
        if unplaced(&entry.state) {
            self.unplaced.remove(id);
        }
        if waiting(&entry.state) {
            self.waiting.remove(id);
        }
        if let Some(claim) = nominated_to(&entry.state) {
            Self::count_in(&mut self.nominated, claim, false);
        }
        Some(entry)
    }

    /// Sets a pod's state; false when the pod is unknown.
    pub fn set_state(&mut self, id: &PodRef, state: PodState) -> bool {
        let Some(entry) = self.entries.get_mut(id) else {
            return false;
        };
        let before = placed_on(&entry.state);
        let after = placed_on(&state);
        if before != after {
            if let Some(claim) = before {
                Self::leave_in(&mut self.residents, claim, id);
            }
            if let Some(claim) = after {
                self.residents
                    .entry(claim.to_owned())
                    .or_default()
                    .insert(id.clone(), entry.pod.clone());
            }
        }
        for (index, holds) in [
            (&mut self.unplaced, unplaced as fn(&PodState) -> bool),
            (&mut self.waiting, waiting),
        ] {
            match (holds(&entry.state), holds(&state)) {
                (false, true) => {
                    index.insert(id.clone(), entry.pod.clone());
                }
                (true, false) => {
                    index.remove(id);
                }
                _ => {}
            }
        }
        let (before, after) = (nominated_to(&entry.state), nominated_to(&state));
        if before != after {
            if let Some(claim) = before {
                Self::count_in(&mut self.nominated, claim, false);
            }
            if let Some(claim) = after {
                Self::count_in(&mut self.nominated, claim, true);
            }
        }
        entry.state = state;
        true
    }

    /// Replaces what is known of a pod (its spec), keeping its state.
    pub fn set_pod(&mut self, id: &PodRef, pod: Arc<Pod>) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        if let Some(claim) = placed_on(&entry.state)
            && let Some(slot) = self.residents.get_mut(claim).and_then(|on| on.get_mut(id))
        {
            *slot = pod.clone();
        }
        if let Some(slot) = self.unplaced.get_mut(id) {
            *slot = pod.clone();
        }
        if let Some(slot) = self.waiting.get_mut(id) {
            *slot = pod.clone();
        }
        entry.pod = pod;
    }

    /// Every pod nominated or bound to `claim` waits again, from `since`; their ids, in pod
    /// order.
    pub fn release(&mut self, claim: &str, since: DateTime<Utc>) -> Vec<PodRef> {
        let Some(on) = self.residents.remove(claim) else {
            return Vec::new();
        };
        self.nominated.remove(claim);
        let ids: Vec<PodRef> = on.into_keys().collect();
        for id in &ids {
            if let Some(e) = self.entries.get_mut(id) {
                e.state = PodState::Waiting {
                    since,
                    reason: None,
                };
                self.unplaced.insert(id.clone(), e.pod.clone());
                self.waiting.insert(id.clone(), e.pod.clone());
            }
        }
        ids
    }

    /// Records why the last solve could not place a waiting pod; false when the pod is not
    /// waiting.
    pub fn set_waiting_reason(&mut self, id: &PodRef, why: String) -> bool {
        let Some(PodState::Waiting { reason, .. }) = self.entries.get_mut(id).map(|e| &mut e.state)
        else {
            return false;
        };
        *reason = Some(why);
        self.unplaced.remove(id);
        true
    }

    /// The pods waiting for a solve, in pod order.
    pub fn unplaced(&self) -> &Residents {
        &self.unplaced
    }

    /// Every waiting pod (for a solve, or unplaceable by the last one), in pod order.
    pub fn waiting(&self) -> &Residents {
        &self.waiting
    }

    /// Whether some waiting pod could not be placed by the last solve (it has a reason).
    pub fn any_unschedulable(&self) -> bool {
        self.waiting.len() > self.unplaced.len()
    }

    /// The pods nominated or bound to `claim`, in pod order.
    pub fn residents(&self, claim: &str) -> Option<&Residents> {
        self.residents.get(claim)
    }

    /// The claims with at least one pod nominated or bound, in name order.
    pub fn occupied(&self) -> impl Iterator<Item = &str> {
        self.residents.keys().map(String::as_str)
    }

    /// The claims with at least one pod nominated and not bound yet, in name order.
    pub fn nominated_claims(&self) -> impl Iterator<Item = &str> {
        self.nominated.keys().map(String::as_str)
    }

    /// How many pods are nominated or bound to `claim`.
    #[cfg(test)]
    pub fn resident_count(&self, claim: &str) -> usize {
        self.residents.get(claim).map_or(0, BTreeMap::len)
    }

    /// One more (`up`) or one fewer pod nominated to `claim`; a count that reaches zero goes.
    fn count_in(counts: &mut BTreeMap<String, usize>, claim: &str, up: bool) {
        if up {
            *counts.entry(claim.to_owned()).or_default() += 1;
        } else if let Some(n) = counts.get_mut(claim) {
            *n -= 1;
            if *n == 0 {
                counts.remove(claim);
            }
        }
    }

    fn leave(&mut self, claim: &str, id: &PodRef) {
        Self::leave_in(&mut self.residents, claim, id);
    }

    fn leave_in(residents: &mut BTreeMap<String, Residents>, claim: &str, id: &PodRef) {
        if let Some(on) = residents.get_mut(claim) {
            on.remove(id);
            if on.is_empty() {
                residents.remove(claim);
            }
        }
    }

    /// The residents index rebuilt from every pod's state (what the index must equal).
    pub fn recount(&self) -> BTreeMap<String, Vec<PodRef>> {
        let mut on: BTreeMap<String, Vec<PodRef>> = BTreeMap::new();
        for (id, e) in &self.entries {
            if let Some(claim) = placed_on(&e.state) {
                on.entry(claim.to_owned()).or_default().push(id.clone());
            }
        }
        on
    }

    /// Whether the index holds exactly the pods [`PodTable::recount`] finds, sharing each
    /// pod's current spec.
    pub fn index_consistent(&self) -> bool {
        let index: BTreeMap<String, Vec<PodRef>> = self
            .residents
            .iter()
            .map(|(claim, on)| (claim.clone(), on.keys().cloned().collect()))
            .collect();
        let ids_where = |keep: fn(&PodState) -> bool| -> Vec<&PodRef> {
            self.entries
                .iter()
                .filter(|(_, e)| keep(&e.state))
                .map(|(id, _)| id)
                .collect()
        };
        let (unplaced, waiting) = (ids_where(unplaced), ids_where(waiting));
        let mut nominated: BTreeMap<String, usize> = BTreeMap::new();
        for e in self.entries.values() {
            if let Some(claim) = nominated_to(&e.state) {
                *nominated.entry(claim.to_owned()).or_default() += 1;
            }
        }
        let shares = |index: &Residents| {
            index.iter().all(|(id, pod)| {
                self.entries
                    .get(id)
                    .is_some_and(|e| Arc::ptr_eq(&e.pod, pod))
            })
        };
        index == self.recount()
            && self.nominated == nominated
            && self.unplaced.keys().collect::<Vec<_>>() == unplaced
            && self.waiting.keys().collect::<Vec<_>>() == waiting
            && shares(&self.unplaced)
            && shares(&self.waiting)
            && self.residents.values().all(shares)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(i: u64) -> (PodRef, Arc<Pod>) {
        let id = PodRef::new("default", format!("p{i}"));
        let p = Pod::new(id.clone(), Default::default());
        (id, Arc::new(p))
    }

    fn waiting() -> PodState {
        PodState::Waiting {
            since: DateTime::from_timestamp(0, 0).expect("valid"),
            reason: None,
        }
    }

    /// A small deterministic generator (no dependency for one test).
    struct Lcg(u64);
    impl Lcg {
        fn next(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (self.0 >> 33) % n
        }
    }

    #[test]
    fn the_residents_index_matches_a_full_recount_after_random_changes() {
        let mut table = PodTable::default();
        let mut rng = Lcg(18);
        for step in 0..5_000 {
            let (id, p) = pod(rng.next(60));
            let claim = format!("claim-{}", rng.next(8));
            match rng.next(7) {
                0 => {
                    table.insert(
                        id,
                        PodEntry {
                            pod: p,
                            state: waiting(),
                        },
                    );
                }
                1 => {
                    table.remove(&id);
                }
                2 => {
                    table.set_state(&id, PodState::Nominated { claim });
                }
                3 => {
                    table.set_state(&id, PodState::Bound { claim });
                }
                4 => {
                    table.set_state(&id, waiting());
                }
                5 => {
                    table.set_waiting_reason(&id, "no pool".into());
                }
                _ => table.set_pod(&id, p),
            }
            assert!(table.index_consistent(), "step {step}");
        }
        let counted: usize = table
            .residents
            .keys()
            .map(|c| table.resident_count(c))
            .sum();
        assert_eq!(
            counted,
            table.recount().values().map(Vec::len).sum::<usize>()
        );
        assert!(
            table.residents.values().all(|on| !on.is_empty()),
            "a claim without residents has no entry"
        );
    }
}
