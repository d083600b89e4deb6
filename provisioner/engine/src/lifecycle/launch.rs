//! Launching a claim: its offerings tried in order, insufficient capacity marking an offering
//! unavailable, retries after throttling.

use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_cloud::{CloudError, Instance, LaunchOffering, LaunchRequest};
use quartermaster_pricing::{CapacityType, Cloud};
use quartermaster_solver::{OfferingChoice, OfferingKey};

use crate::disruption::refusals::CapacityKind;
use crate::engine::Engine;
use crate::events::Action;
use crate::state::Lifecycle;

impl Engine {
    pub(crate) fn launch(&mut self, name: &str) {
        let Some(c) = self.claims.get(name) else {
            return;
        };
        let policy = &self.setup.pools[c.pool];
        let mut tags = BTreeMap::new();
        tags.insert(
            "quartermaster.dev/nodepool".to_owned(),
            policy.spec.name.clone(),
        );
        tags.insert("quartermaster.dev/nodeclaim".to_owned(), c.name.clone());
        let request = LaunchRequest {
            claim_name: c.name.clone(),
            node_pool: policy.spec.name.clone(),
            node_class: policy.node_class.clone(),
            instance_type: c.offering.instance_type.clone(),
            zone: c.offering.zone.clone(),
            capacity_type: c.offering.capacity_type,
            price_per_hour: c.offering.price_per_hour,
            labels: c.node_labels().as_ref().clone(),
            tags,
            fallbacks: c
                .alternatives
                .iter()
                .map(|o| LaunchOffering {
                    instance_type: o.instance_type.clone(),
                    zone: o.zone.clone(),
                    capacity_type: o.capacity_type,
                    price_per_hour: o.price_per_hour,
                })
                .collect(),
            node_class_spec: None,
        };
        self.stats.launches += 1;
        self.actions.push(Action::Launch {
            claim: c.name.clone(),
            request,
        });
    }

    pub(crate) fn retry_launches(&mut self, now: DateTime<Utc>) {
        let due: Vec<String> = self
            .claims
            .values()
            .filter(|c| c.life.retry_at().is_some_and(|t| t <= now))
            .map(|c| c.name.clone())
            .collect();
        for name in due {
            if let Some(Lifecycle::Launching { retry_at, .. }) =
                self.claims.get_mut(&name).map(|c| &mut c.life)
            {
                *retry_at = None;
            }
            self.launch(&name);
        }
    }

    pub(crate) fn key(cloud: Cloud, o: &OfferingChoice) -> OfferingKey {
        OfferingKey {
            cloud,
            instance_type: o.instance_type.clone(),
            zone: o.zone.clone(),
            capacity_type: o.capacity_type,
        }
    }

    /// The capacity `o` draws on (its cloud, family and capacity type), when the catalog knows
    /// its instance type.
    pub(crate) fn capacity_kind(&self, cloud: Cloud, o: &OfferingChoice) -> Option<CapacityKind> {
        let family = &self.setup.catalog.get(cloud, &o.instance_type)?.family;
        Some(CapacityKind {
            cloud,
            family: family.clone(),
            capacity_type: o.capacity_type,
        })
    }

    /// The cloud refused `o` to `replacement`, a move's replacement: noted, in case the move is
    /// called off.
    fn refused_to_move(&mut self, replacement: &str, cloud: Cloud, o: &OfferingChoice) {
        if let Some(kind) = self.capacity_kind(cloud, o) {
            self.disruption
                .refusals
                .tried(replacement, Self::key(cloud, o), kind);
        }
    }

    /// The cloud accepted the launch. A provider that tried the request's fallbacks itself
    /// may have launched one of them: the claim then takes that offering (labels, capacity,
    /// room) and the alternatives before it, which the provider found without capacity, go.
    pub(crate) fn launched(&mut self, now: DateTime<Utc>, name: &str, instance: Instance) {
        let Some(c) = self.claims.get_mut(name) else {
            return;
        };
        let on = |o: &OfferingChoice| {
            o.instance_type == instance.instance_type
                && o.zone == instance.zone
                && o.capacity_type == instance.capacity_type
        };
        if !on(&c.offering)
            && let Some(at) = c.alternatives.iter().position(on)
        {
            let pool = c.pool;
            let chosen = c.alternatives[at].clone();
            let layout = c.mig_config.clone();
            if let Some((labels, capacity, room)) =
                self.offering_room(pool, &chosen, layout.as_deref())
            {
                let c = self.claims.get_mut(name).expect("claim exists");
                c.alternatives.drain(..=at);
                c.offering = chosen;
                *c.facts.labels_mut() = labels;
                c.capacity = capacity;
                c.room = room;
                self.stats.fallbacks += 1;
                self.nominations_dirty = true;
            }
        }
        let c = self.claims.get_mut(name).expect("claim exists");
        c.life.launched(now);
        c.provider_id = Some(instance.provider_id);
        // A launch for pending pods got capacity: moves may ask for that kind again. (A move's
        // own replacement says nothing new: its move was planned without the refused ones.)
        if c.move_id.is_none() {
            let (cloud, capacity_type) = (c.cloud, c.offering.capacity_type);
            self.disruption.refusals.launched(cloud, capacity_type);
        } else {
            self.disruption.refusals.forget(name);
        }
    }

    pub(crate) fn launch_failed(&mut self, now: DateTime<Utc>, name: &str, error: &CloudError) {
        let Some(c) = self.claims.get_mut(name) else {
            return;
        };
        if error.is_retryable() {
            if let Lifecycle::Launching { attempts, retry_at } = &mut c.life {
                let delay = match error {
                    CloudError::Throttled {
                        retry_after: Some(d),
                    } => TimeDelta::from_std(*d).unwrap_or(self.config.max_backoff),
                    _ => TimeDelta::seconds(1 << (*attempts).min(6)),
                };
                *attempts += 1;
                *retry_at = Some(now + delay.min(self.config.max_backoff));
            }
            self.stats.retries += 1;
            return;
        }
        // Capacity, quota, or a request this offering can never satisfy: mark the offering and
        // move on to the claim's next one.
        let capacity = matches!(
            error,
            CloudError::InsufficientCapacity { .. } | CloudError::QuotaExceeded { .. }
        );
        if capacity {
            self.stats.capacity_errors += 1;
        }
        let failed = c.offering.clone();
        let cloud = c.cloud;
        // A move's replacement (not the node it replaces, which is launched already).
        let replacement = c.move_id.is_some() && !c.consolidating;
        self.unavailable
            .mark(Self::key(cloud, &failed), now + self.config.unavailable_ttl);
        // A provider that tried the fallbacks itself names the last one it tried: every
        // alternative up to that one failed too.
        if let CloudError::InsufficientCapacity {
            instance_type,
            zone,
            capacity_type,
            ..
        } = error
            && let Some(at) = c.alternatives.iter().position(|o| {
                &o.instance_type == instance_type
                    && &o.zone == zone
                    && o.capacity_type == *capacity_type
            })
        {
            let tried: Vec<OfferingChoice> = c.alternatives.drain(..=at).collect();
            for o in &tried {
                self.unavailable
                    .mark(Self::key(cloud, o), now + self.config.unavailable_ttl);
                if replacement {
                    self.refused_to_move(name, cloud, o);
                }
            }
        }
        if replacement && capacity {
            self.refused_to_move(name, cloud, &failed);
        }
        loop {
            let c = self.claims.get_mut(name).expect("claim exists");
            let Some(next) = c.alternatives.pop_front() else {
                break;
            };
            let pool = c.pool;
            let layout = c.mig_config.clone();
            if self.unavailable.contains(&Self::key(cloud, &next), now) {
                continue;
            }
            let Some((labels, capacity, room)) = self.offering_room(pool, &next, layout.as_deref())
            else {
                continue;
            };
            if failed.capacity_type == CapacityType::Spot
                && next.capacity_type == CapacityType::OnDemand
            {
                self.stats.spot_to_on_demand += 1;
            }
            let c = self.claims.get_mut(name).expect("claim exists");
            c.offering = next;
            *c.facts.labels_mut() = labels;
            c.capacity = capacity;
            c.room = room;
            if let Lifecycle::Launching { attempts, .. } = &mut c.life {
                *attempts = 0;
            }
            self.nominations_dirty = true;
            self.stats.fallbacks += 1;
            self.launch(name);
            return;
        }
        self.stats.claims_abandoned += 1;
        self.remove_claim(now, name);
    }
}
