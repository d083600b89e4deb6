//! The solver's view of the cluster: existing and in-flight nodes with their room, and the pods
//! to place.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use quartermaster_solver::{ClusterSnapshot, ExistingNode, Pod};

use crate::engine::Engine;
use crate::state::Phase;

/// Which existing nodes a snapshot offers as room for its pods.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Room<'a> {
    /// Every node open to new pods (initialized or in flight).
    Open,
    /// Those, and the retired claims named (the question provisioning asks before it
    /// reopens one).
    Reopening(&'a [String]),
    /// None: the pods from scratch (the question retirement asks).
    None,
}

impl Engine {
    pub(crate) fn snapshot(
        &self,
        now: DateTime<Utc>,
    ) -> (ClusterSnapshot, BTreeMap<String, String>) {
        self.snapshot_without(now, &[])
    }

    /// The solver's snapshot of the waiting pods; with `without`, of those claims' pods only, as
    /// if their nodes were gone (the question consolidation asks).
    ///
    /// Consolidation's question counts CapacityBuffer placeholders as residents (and those on
    /// `without` as pods to move), so the room a buffer holds is not taken for waste; the
    /// provisioning solve does not see them (a real pod takes buffer room first).
    pub(crate) fn snapshot_without(
        &self,
        now: DateTime<Utc>,
        without: &[&str],
    ) -> (ClusterSnapshot, BTreeMap<String, String>) {
        self.snapshot_of(now, without, !without.is_empty())
    }

    /// [`Engine::snapshot_without`], with placeholders as residents when `headroom`.
    pub(crate) fn snapshot_of(
        &self,
        now: DateTime<Utc>,
        without: &[&str],
        headroom: bool,
    ) -> (ClusterSnapshot, BTreeMap<String, String>) {
        self.snapshot_offering(now, without, headroom, Room::Open)
    }

    /// [`Engine::snapshot_of`], with the existing room `room` offers.
    pub(crate) fn snapshot_offering(
        &self,
        now: DateTime<Utc>,
        without: &[&str],
        headroom: bool,
        room: Room<'_>,
    ) -> (ClusterSnapshot, BTreeMap<String, String>) {
        let mut pools: Vec<_> = self.setup.pools.iter().map(|p| p.spec.clone()).collect();
        for pool in &mut pools {
            pool.usage = Default::default();
        }
        let mut nodes = Vec::new();
        let mut target_to_claim = BTreeMap::new();
        // A claim's residents come from the engine's index of them (kept as pods move); the
        // placeholders a claim holds follow its real pods.
        let mut placeholders_by_claim: BTreeMap<&str, Vec<Arc<Pod>>> = BTreeMap::new();
        let mut loose_placeholders = Vec::new();
        if headroom {
            for (claim, pods) in self.headroom.by_claim() {
                if without.contains(&claim) {
                    loose_placeholders.extend(pods.into_iter().map(|p| (**p).clone()));
                } else {
                    placeholders_by_claim
                        .entry(claim)
                        .or_default()
                        .extend(pods.into_iter().cloned());
                }
            }
        }
        for c in self.claims.values() {
            let usage = &mut pools[c.pool].usage;
            usage.resources += c.capacity;
            usage.nodes += 1;
            usage.hourly_cost += c.offering.price_per_hour;
            let offered = match room {
                Room::Open => c.schedulable(),
                Room::Reopening(reopen) => {
                    c.schedulable() || (c.reopenable() && reopen.contains(&c.name))
                }
                Room::None => false,
            };
            if !offered || without.contains(&c.name.as_str()) {
                continue;
            }
            let labels = c.facts.merged_labels();
            let target = c.target_name().to_owned();
            target_to_claim.insert(target.clone(), c.name.clone());
            nodes.push(ExistingNode {
                name: target,
                in_flight: c.phase() != Phase::Initialized,
                node_pool: Some(self.setup.pools[c.pool].spec.name.clone()),
                labels,
                taints: self.setup.pools[c.pool].spec.taints.clone(),
                allocatable: c.room,
                pods: self.residents_with(&c.name, &mut placeholders_by_claim),
            });
        }
        // A static pool keeps its count: pods may use its nodes, never make it grow.
        for (spec, policy) in pools.iter_mut().zip(&self.setup.pools) {
            if policy.replicas.is_some() {
                spec.limits.nodes = Some(spec.usage.nodes);
            }
        }
        // From the pod table's indexes, in pod order: the waiting pods, or the pods of the
        // claims consolidation asks about.
        let mut pending: Vec<Pod> = if without.is_empty() {
            self.pods
                .waiting()
                .values()
                .map(|p| (**p).clone())
                .collect()
        } else {
            let mut on: Vec<&Arc<Pod>> = without
                .iter()
                .filter_map(|claim| self.pods.residents(claim))
                .flat_map(|r| r.values())
                .collect();
            on.sort_by(|a, b| a.id.cmp(&b.id));
            on.dedup_by(|a, b| a.id == b.id);
            on.into_iter().map(|p| (**p).clone()).collect()
        };
        pending.extend(loose_placeholders);
        let mut unavailable = self.unavailable.active(now);
        if !without.is_empty() {
            // A move does not ask for what the cloud refused to a move's replacement lately.
            unavailable.extend(self.disruption.refusals.active(now).cloned());
        }
        if !self.reservations.is_empty() {
            // Reserved capacity is used through its free slots only, never bought new.
            unavailable.extend(self.reserved_keys());
            if without.is_empty() {
                nodes.extend(self.reservation_stand_ins(now, &mut pools));
            }
        }
        let snapshot = ClusterSnapshot {
            resources: self.setup.resources.clone(),
            pending,
            nodes,
            node_pools: pools,
            daemonsets: self.setup.daemonsets.clone(),
            unavailable,
            // The engine learns what the clouds refuse from their errors, not from limits.
            offering_limits: Vec::new(),
        };
        (snapshot, target_to_claim)
    }

    /// The pods on claim `name` for the solver: its residents in pod order, then the
    /// placeholders it holds (taken from `placeholders`).
    fn residents_with(
        &self,
        name: &str,
        placeholders: &mut BTreeMap<&str, Vec<Arc<Pod>>>,
    ) -> Vec<Arc<Pod>> {
        let held = if placeholders.is_empty() {
            None
        } else {
            placeholders.remove(name)
        };
        let Some(on) = self.pods.residents(name) else {
            return held.unwrap_or_default();
        };
        let mut pods = Vec::with_capacity(on.len() + held.as_ref().map_or(0, Vec::len));
        pods.extend(on.values().cloned());
        pods.extend(held.into_iter().flatten());
        pods
    }
}
