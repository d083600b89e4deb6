//! A plan applied: new NodeClaims for its new nodes, nominations for its placements.

use std::collections::{BTreeMap, VecDeque};

use chrono::{DateTime, Utc};
use quartermaster_solver::{
    MIG_CONFIG_LABEL, NODEPOOL_LABEL, OfferingChoice, Plan, Resources, daemonset_overhead,
    to_resources,
};

use crate::disruption::retirement::fallback_ceiling;
use crate::engine::Engine;
use crate::state::{Claim, Lifecycle, NodeFacts};

/// How far the new claims of a plan may fall back from the offering the solver chose (the
/// launch request carries the fallbacks: a provider tries them itself).
#[derive(Debug, Clone, Copy)]
pub(crate) enum FallbackLimit {
    /// For pending pods: to no offering dearer than reopening a retired node that holds them
    /// must save ([`fallback_ceiling`]).
    Provisioning,
    /// For a disruption move's replacements: to offerings dearer than the chosen one by less
    /// than `slack` $/h, which keep the move worth it.
    Move {
        /// $/h.
        slack: f64,
    },
}

impl Engine {
    /// Carries out a plan, its new claims' fallbacks limited by `limit`; returns the names of
    /// the NodeClaims it created.
    pub(crate) fn apply(
        &mut self,
        now: DateTime<Utc>,
        plan: Plan,
        target_to_claim: &BTreeMap<String, String>,
        limit: FallbackLimit,
    ) -> Vec<String> {
        let mut created = Vec::new();
        for placement in plan.existing {
            let claim = match target_to_claim.get(&placement.node) {
                Some(claim) => claim.clone(),
                // A free slot of a reservation: launched into it now.
                None => {
                    let Some((id, pool)) = crate::reservations::parse_stand_in(&placement.node)
                    else {
                        continue;
                    };
                    let Some(name) = self.reserved_claim(now, id, pool) else {
                        continue;
                    };
                    let gang = placement
                        .pods
                        .iter()
                        .find_map(|p| self.pods.get(p)?.pod.gang.as_ref())
                        .map(|g| g.name.clone());
                    created.push((name.clone(), gang));
                    name
                }
            };
            for pod in placement.pods {
                self.nominate(now, &pod, &claim);
            }
        }
        let rooms = match limit {
            FallbackLimit::Provisioning if !plan.new_nodes.is_empty() => self.reopenable_rooms(),
            _ => Vec::new(),
        };
        for node in plan.new_nodes {
            let Some(pool) = self
                .setup
                .pools
                .iter()
                .position(|p| p.spec.name == node.node_pool)
            else {
                continue;
            };
            let name = self.next_claim_name(&node.node_pool);
            let layout = node.mig_config().map(str::to_owned);
            let gang = node
                .pods
                .iter()
                .find_map(|p| self.pods.get(p)?.pod.gang.as_ref())
                .map(|g| g.name.clone());
            let mut alternatives: VecDeque<OfferingChoice> = node.alternatives.into();
            match limit {
                FallbackLimit::Move { slack } => {
                    let ceiling = node.offering.price_per_hour + slack;
                    alternatives.retain(|o| o.price_per_hour < ceiling);
                }
                // No fallback dearer than reopening a retired node that holds the pods (a
                // gang's claims fall back together, in its zone: left as they are).
                FallbackLimit::Provisioning if !rooms.is_empty() && gang.is_none() => {
                    let pods: Vec<&quartermaster_solver::Pod> = node
                        .pods
                        .iter()
                        .filter_map(|p| self.pods.get(p).map(|e| &*e.pod))
                        .collect();
                    let ceiling = fallback_ceiling(&rooms, pool, &pods);
                    alternatives.retain(|o| o.price_per_hour < ceiling);
                }
                FallbackLimit::Provisioning => {}
            }
            let Some(claim) = self.new_claim(now, &name, pool, node.offering, alternatives, layout)
            else {
                continue;
            };
            self.claims.insert(name.clone(), claim);
            self.stats.claims_created += 1;
            for pod in &node.pods {
                self.nominate(now, pod, &name);
            }
            created.push((name, gang));
        }
        // A gang's claims are launched together, in its zone.
        self.group_gangs(now, &created);
        let created: Vec<String> = created.into_iter().map(|(name, _)| name).collect();
        for name in &created {
            self.launch(name);
        }
        let retry = now + self.config.unschedulable_retry;
        for u in plan.unschedulable {
            if self.pods.set_waiting_reason(&u.pod, u.reason) {
                self.retry_unschedulable_at = Some(retry);
            }
        }
        created
    }

    /// A new NodeClaim name for `pool`: unique in this engine and, through the claim-name tag,
    /// across restarts.
    pub(crate) fn next_claim_name(&mut self, pool: &str) -> String {
        let name = format!(
            "{pool}-{}{:05}",
            self.config.claim_name_tag, self.next_claim
        );
        self.next_claim += 1;
        name
    }

    pub(crate) fn new_claim(
        &self,
        now: DateTime<Utc>,
        name: &str,
        pool: usize,
        offering: OfferingChoice,
        alternatives: VecDeque<OfferingChoice>,
        mig_config: Option<String>,
    ) -> Option<Claim> {
        let policy = &self.setup.pools[pool];
        let (labels, capacity, room) =
            self.offering_room(pool, &offering, mig_config.as_deref())?;
        let template_hash = policy.template_hash.clone();
        Some(Claim {
            name: name.to_owned(),
            pool,
            cloud: self.setup.pools[pool].spec.cloud,
            offering,
            alternatives,
            facts: NodeFacts::new(labels),
            capacity,
            room,
            life: Lifecycle::launching(),
            provider_id: None,
            created_at: now,
            empty_since: None,
            nominated_at: None,
            interrupted_at: None,
            displaced: Vec::new(),
            deleting: false,
            consolidating: false,
            consolidation_replaced: false,
            consolidation_backoff: None,
            replaces: None,
            move_id: None,
            disruption_reason: None,
            template_hash,
            forced_at: None,
            last_change: now,
            gang: None,
            mig_config,
            reservation: None,
            retired_at: None,
            retire_checked: None,
            soft_cordoned: false,
        })
    }

    /// Labels, capacity and room for pods of `offering` in `pool`, in MIG `layout` when the
    /// solver chose one (the node is labelled with it).
    pub(crate) fn offering_room(
        &self,
        pool: usize,
        offering: &OfferingChoice,
        layout: Option<&str>,
    ) -> Option<(BTreeMap<String, String>, Resources, Resources)> {
        let spec = &self.setup.pools[pool].spec;
        let it = self
            .setup
            .catalog
            .get(spec.cloud, &offering.instance_type)?;
        let o = it
            .offerings
            .iter()
            .find(|o| o.zone == offering.zone && o.capacity_type == offering.capacity_type)?;
        let mut labels = it.offering_labels(o);
        labels.extend(spec.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
        labels.insert(NODEPOOL_LABEL.to_owned(), spec.name.clone());
        labels.insert(
            crate::disruption::TEMPLATE_HASH_LABEL.to_owned(),
            self.setup.pools[pool].template_hash.clone(),
        );
        // Karpenter's, the cloud's and the GPU Operator's labels for the same facts, so
        // workloads written for them schedule here (NodePool annotation to opt out).
        let annotations = self.setup.pools[pool]
            .node_pool
            .metadata
            .annotations
            .as_ref();
        if annotations.is_none_or(quartermaster_policies::labels::alias_labels_enabled) {
            let aliases = quartermaster_policies::labels::alias_labels(&labels);
            labels.extend(aliases);
        }
        if let Some(layout) = layout {
            labels.insert(MIG_CONFIG_LABEL.to_owned(), layout.to_owned());
        }
        let table = &self.setup.resources;
        // The pool's node shape: shared GPUs, overlays, the NodeClass's root volume.
        let capacity = to_resources(table, &spec.node_shape.capacity_in_layout(it, layout)?);
        let overhead = daemonset_overhead(&self.setup.daemonsets, &labels, spec);
        let room = to_resources(table, &spec.node_shape.allocatable_in_layout(it, layout)?)
            .saturating_sub(&overhead);
        Some((labels, capacity, room))
    }
}
