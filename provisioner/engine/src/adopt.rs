//! What a driver learns from the cluster rather than from the engine's own decisions: claims
//! that outlived a controller restart, pods the kube-scheduler bound, claims deleted by a user.

use chrono::{DateTime, Utc};
use quartermaster_solver::Pod;

use crate::engine::Engine;
use crate::events::FoundClaim;
use crate::state::{Lifecycle, Phase, PodEntry, PodState};

impl Engine {
    /// Takes over a NodeClaim found in the cluster. A claim the engine already knows is left
    /// as it is; a claim of an unknown NodePool or offering is ignored (the driver decides what
    /// to do with it). A claim that never launched is launched again: providers are idempotent
    /// on the claim name, so this never makes a second instance.
    pub(crate) fn adopt(&mut self, now: DateTime<Utc>, found: FoundClaim) {
        if self.claims.contains_key(&found.name) {
            return;
        }
        let Some(pool) = self
            .setup
            .pools
            .iter()
            .position(|p| p.spec.name == found.node_pool)
        else {
            return;
        };
        // A node of a MIG pool without `migConfig` carries the layout the solver chose.
        let layout = found
            .node
            .as_ref()
            .and_then(|n| n.labels.get(quartermaster_solver::MIG_CONFIG_LABEL))
            .cloned();
        // A claim in a reservation the engine was not told about (yet): its reserved offering
        // is known all the same, so the claim is adopted with it.
        if found.offering.capacity_type == quartermaster_pricing::CapacityType::Reserved {
            let cloud = self.setup.pools[pool].spec.cloud;
            let known = self
                .setup
                .catalog
                .get(cloud, &found.offering.instance_type)
                .is_some_and(|t| {
                    t.offerings.iter().any(|o| {
                        o.zone == found.offering.zone
                            && o.capacity_type == quartermaster_pricing::CapacityType::Reserved
                    })
                });
            if !known {
                let slot = quartermaster_pricing::Reservation {
                    id: String::new(),
                    cloud,
                    instance_type: found.offering.instance_type.clone(),
                    zone: found.offering.zone.clone(),
                    count: 0,
                    available: None,
                    kind: quartermaster_pricing::ReservationKind::Default,
                    price_per_hour: 0.0,
                    start: None,
                    end: None,
                    tags: Default::default(),
                };
                self.setup.catalog = self.setup.catalog.with_reserved_offerings(&[slot]);
            }
        }
        let Some(mut claim) = self.new_claim(
            found.created_at,
            &found.name,
            pool,
            found.offering,
            Default::default(),
            layout,
        ) else {
            return;
        };
        // Launched into a reservation: its node says which (else the first of its type and zone).
        if claim.offering.capacity_type == quartermaster_pricing::CapacityType::Reserved {
            claim.reservation = found
                .node
                .as_ref()
                .and_then(|n| {
                    n.labels
                        .get(quartermaster_pricing::reservation::LABEL_RESERVATION_ID)
                })
                .cloned()
                .or_else(|| {
                    self.reservations
                        .iter()
                        .find(|o| {
                            o.reservation.instance_type == claim.offering.instance_type
                                && o.reservation.zone == claim.offering.zone
                        })
                        .map(|o| o.reservation.id.clone())
                });
            if let Some(r) = self
                .reservations
                .iter()
                .find(|o| Some(&o.reservation.id) == claim.reservation.as_ref())
            {
                claim.facts.labels_mut().extend(r.reservation.node_labels());
            }
        }
        claim.provider_id = found.provider_id;
        claim.deleting = found.deleting;
        if let Some(hash) = found.template_hash {
            claim
                .facts
                .labels_mut()
                .insert(crate::TEMPLATE_HASH_LABEL.to_owned(), hash.clone());
            claim.template_hash = hash;
        }
        claim.life = Lifecycle::found(
            now,
            claim.provider_id.is_some(),
            found.node.is_some(),
            found.initialized_at,
            found.launched_at,
            found.registered_at,
        );
        if claim.phase() == Phase::Initialized {
            claim.empty_since = Some(now);
        }
        if let Some(node) = &found.node {
            self.observe_health(claim.pool, &claim.name, &node.conditions, now);
        }
        claim.facts.set_node(found.node);
        claim.last_change = now;
        if claim.phase() == Phase::Initialized {
            self.retire_watch.insert(claim.name.clone());
        }
        let relaunch = claim.phase() == Phase::Launching && !claim.deleting;
        let name = claim.name.clone();
        let gang = found.gang.filter(|_| !claim.deleting);
        if claim.offering.capacity_type == quartermaster_pricing::CapacityType::FlexStart {
            self.flex_start_seen = true;
        }
        if let Some(node) = claim.node() {
            self.node_claims.insert(node.name.clone(), name.clone());
        }
        self.claims.insert(name.clone(), claim);
        if let Some(gang) = gang {
            self.rejoin_gang(found.created_at, &name, &gang);
        }
        if relaunch {
            self.launch(&name);
        }
    }

    /// Records that `pod` runs on `node`.
    pub(crate) fn pod_bound(&mut self, now: DateTime<Utc>, pod: Pod, node: &str) {
        let claim = self.claim_on_node(node).map(|c| c.name.clone());
        let previous = self.pods.remove(&pod.id);
        if let Some(PodEntry {
            state: PodState::Nominated { claim: old } | PodState::Bound { claim: old },
            ..
        }) = &previous
            && Some(old) != claim.as_ref()
            && let Some(c) = self.claims.get_mut(old)
        {
            c.last_change = now;
            self.retire_watch.insert(old.clone());
        }
        let Some(claim) = claim else {
            return;
        };
        if let Some(c) = self.claims.get_mut(&claim) {
            c.empty_since = None;
            // A soft-cordoned node that takes a pod may be worth its price again.
            if c.soft_cordoned {
                self.retire_watch.insert(claim.clone());
            }
            if !matches!(&previous, Some(PodEntry { state: PodState::Bound { claim: old } | PodState::Nominated { claim: old }, .. }) if *old == claim)
            {
                c.last_change = now;
            }
        }
        self.pods.insert(
            pod.id.clone(),
            PodEntry {
                pod: pod.into(),
                state: PodState::Bound { claim },
            },
        );
    }

    /// A claim whose deletion someone else asked for: it takes no more pods, and the pods
    /// nominated to it need a place again.
    pub(crate) fn deleting_elsewhere(&mut self, now: DateTime<Utc>, name: &str) {
        let Some(c) = self.claims.get_mut(name) else {
            return;
        };
        if c.deleting {
            return;
        }
        c.deleting = true;
        let replaces = c.replaces.clone();
        self.release_pods(now, name, replaces.as_deref());
    }
}
