//! Observe: the stores read into engine terms; the engine rebuilt when its configuration changed;
//! do-not-disrupt marks and PDBs told on change.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use quartermaster_engine::{Engine, Event, TAINT_RETIRING};
use quartermaster_policies::{NodeClaim, NodePool};
use quartermaster_solver::PodRef;
use serde_json::Value;

use super::{DisruptionInputs, Driver};
use crate::lifecycle;
use crate::stores::StoreDigests;
use crate::translate::{LABEL_NODECLAIM, Observed, TAINT_DISRUPTED, found_claim, node_view};

/// What a reading of the pods and the configuration was made from: the stores it read and
/// which nodes were Quartermaster's (a digest of their names).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct ReadingKey {
    stores: StoreDigests,
    our_nodes: u64,
}

impl Driver {
    /// Observes the stores; true when something is waiting to be sent again (a delete or a
    /// registration the cluster does not show yet), so the next pass must observe too.
    pub(super) fn observe(&mut self, now: DateTime<Utc>, digests: StoreDigests) -> bool {
        let ctx = self.ctx.clone();
        let stores = &ctx.stores;
        let claims: Vec<Arc<NodeClaim>> = stores.node_claims.state();
        let nodes = stores.nodes.state();
        // A node is ours by its NodeClaim label, or by the name or provider id a claim
        // recorded (one pass over each list, not claims × nodes).
        let mut claim_nodes: BTreeSet<&str> = BTreeSet::new();
        let mut claim_providers: BTreeSet<&str> = BTreeSet::new();
        for status in claims.iter().filter_map(|c| c.status.as_ref()) {
            if let Some(n) = &status.node_name {
                claim_nodes.insert(n);
            }
            if let Some(p) = &status.provider_id {
                claim_providers.insert(p);
            }
        }
        let our_nodes: BTreeSet<&str> = nodes
            .iter()
            .filter(|n| {
                n.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(LABEL_NODECLAIM))
                    || n.metadata
                        .name
                        .as_deref()
                        .is_some_and(|name| claim_nodes.contains(name))
                    || n.spec
                        .as_ref()
                        .and_then(|s| s.provider_id.as_deref())
                        .is_some_and(|id| claim_providers.contains(id))
            })
            .filter_map(|n| n.metadata.name.as_deref())
            .collect();
        // The pods and configuration are read again only when they, or which nodes are ours,
        // changed since the last reading (a Node's heartbeat changes neither).
        let key = ReadingKey {
            stores: digests.of_pods_and_config(),
            our_nodes: {
                use std::hash::BuildHasher;
                let hasher = foldhash::fast::FixedState::with_seed(0);
                our_nodes
                    .iter()
                    .fold(0u64, |sum, name| sum.wrapping_add(hasher.hash_one(name)))
            },
        };
        let (observed, fresh) = match self.last_reading.take() {
            Some((k, observed)) if k == key => (observed, false),
            _ => (self.read_stores(&our_nodes), true),
        };
        if fresh {
            for (object, reason) in &observed.rejected {
                tracing::warn!(object, reason, "object left out of provisioning");
            }
        }
        let buffer_statuses: BTreeMap<String, Value> = stores
            .capacity_buffers
            .state()
            .iter()
            .filter_map(|b| {
                Some((
                    format!(
                        "{}/{}",
                        b.metadata.namespace.as_deref().unwrap_or("default"),
                        b.metadata.name.as_deref()?
                    ),
                    b.status.clone()?,
                ))
            })
            .collect();

        let rebuilt = self.engine.is_none() || observed.fingerprint != self.fingerprint;
        if rebuilt {
            self.rebuild(now, &observed, &claims, &nodes);
        }
        if fresh || rebuilt {
            self.requests.observed = observed.provisioning_requests.clone();
            self.buffers.observed = observed.capacity_buffers.clone();
        }
        self.buffers.found = buffer_statuses;
        let waiting = self.feed_claims(now, &claims, &nodes);
        // The same reading told to the same engine tells it nothing new.
        if fresh || rebuilt {
            self.feed_pods(now, &observed);
        }
        if let Some(engine) = &mut self.engine {
            crate::capacity_buffers::tell(engine, &mut self.buffers, now);
        }
        self.feed_disruption_inputs(now, &claims, &nodes);
        self.last_reading = Some((key, observed));
        waiting
    }

    /// Reads the pods and the configuration in the stores into engine terms (only the pods
    /// that changed since they were last read are read again).
    fn read_stores(&mut self, our_nodes: &BTreeSet<&str>) -> Observed {
        let stores = &self.ctx.stores;
        let table = self.table.clone();
        let node_pools =
            with_preference_policy(stores.node_pools.state(), self.ctx.preference_policy);
        let pods = stores.pods.state();
        crate::translate::observe_with_readings(
            &pods,
            our_nodes,
            &node_pools,
            node_class_values(stores),
            stores
                .daemon_sets
                .state()
                .iter()
                .filter_map(|d| {
                    let mut v = serde_json::to_value(d.as_ref()).ok()?;
                    v["apiVersion"] = Value::from("apps/v1");
                    v["kind"] = Value::from("DaemonSet");
                    Some(v)
                })
                .collect(),
            crate::provisioning_requests::objects(
                &stores.provisioning_requests.state(),
                &stores.pod_templates.state(),
            )
            .into_iter()
            .chain(crate::pod_groups::objects(
                &stores.volcano_pod_groups.state(),
                &stores.coscheduling_pod_groups.state(),
            ))
            .chain(crate::capacity_buffers::objects(
                &stores.capacity_buffers.state(),
                &pods,
            ))
            .chain(crate::dra::objects_if_claimed(stores, &pods))
            .collect(),
            &self.catalog,
            &table,
            self.ctx.region.as_deref(),
            &mut self.readings,
        )
    }

    /// Do-not-disrupt annotations (pods, nodes, NodeClaims) and PDBs, told on change.
    fn feed_disruption_inputs(
        &mut self,
        now: DateTime<Utc>,
        claims: &[Arc<NodeClaim>],
        nodes: &[Arc<k8s_openapi::api::core::v1::Node>],
    ) {
        let Some(engine) = &mut self.engine else {
            return;
        };
        let stores = &self.ctx.stores;
        // One walk over the pod store for both pod annotations.
        let mut protected = BTreeSet::new();
        let mut checkpointed = BTreeSet::new();
        for p in stores.pods.state().iter() {
            let dnd = crate::translate::annotated_do_not_disrupt(&p.metadata);
            let ckpt = crate::translate::annotated_checkpointed(&p.metadata);
            if !(dnd || ckpt) {
                continue;
            }
            let (Some(ns), Some(name)) = (&p.metadata.namespace, &p.metadata.name) else {
                continue;
            };
            let id = PodRef::new(ns, name);
            if ckpt {
                checkpointed.insert(id.clone());
            }
            if dnd {
                protected.insert(id);
            }
        }
        // Capacity booked for a ProvisioningRequest is not consolidated away.
        protected.extend(
            self.requests
                .observed
                .iter()
                .flat_map(|r| r.pending.clone()),
        );
        let next = DisruptionInputs {
            pods: protected,
            checkpointed,
            nodes: nodes
                .iter()
                .map(|n| &n.metadata)
                .chain(claims.iter().map(|c| &c.metadata))
                .filter(|m| crate::translate::annotated_do_not_disrupt(m))
                .filter_map(|m| m.name.clone())
                .collect(),
            pdbs: stores
                .pdbs
                .state()
                .iter()
                .filter_map(|p| crate::translate::pdb_view(p))
                .collect(),
        };
        let last = &self.disruption_inputs;
        for pod in next.pods.symmetric_difference(&last.pods) {
            let on = next.pods.contains(pod);
            engine.handle(
                now,
                Event::PodDoNotDisrupt {
                    pod: pod.clone(),
                    on,
                },
            );
        }
        for pod in next.checkpointed.symmetric_difference(&last.checkpointed) {
            let on = next.checkpointed.contains(pod);
            engine.handle(
                now,
                Event::PodCheckpointed {
                    pod: pod.clone(),
                    on,
                },
            );
        }
        for node in next.nodes.symmetric_difference(&last.nodes) {
            let on = next.nodes.contains(node);
            engine.handle(
                now,
                Event::NodeDoNotDisrupt {
                    node: node.clone(),
                    on,
                },
            );
        }
        if next.pdbs != last.pdbs {
            engine.handle(now, Event::DisruptionBudgets(next.pdbs.clone()));
        }
        self.disruption_inputs = next;
    }

    /// Builds the engine anew from the cluster: every NodeClaim is adopted as it stands.
    fn rebuild(
        &mut self,
        now: DateTime<Utc>,
        observed: &Observed,
        claims: &[Arc<NodeClaim>],
        nodes: &[Arc<k8s_openapi::api::core::v1::Node>],
    ) {
        tracing::info!(
            pools = observed.setup.pools.len(),
            claims = claims.len(),
            "building the engine from the cluster"
        );
        let mut engine = Engine::new(observed.setup.clone(), self.config.clone());
        self.table = observed.setup.resources.clone();
        self.buffers.told = None;
        // The reservations before the claims: a claim in one is adopted with its offering.
        if let Some(offers) = &self.reservations_told {
            engine.handle(now, Event::ReservationsChanged(offers.clone()));
        }
        self.disruption_inputs = DisruptionInputs::default();
        self.reported.clear();
        self.registered.clear();
        self.settled.clear();
        self.deleting.clear();
        for claim in claims {
            let object = claim_node(claim, nodes);
            let mut node = object.map(|n| node_view(n, &self.table));
            let Some(mut found) = found_claim(claim, node.clone()) else {
                continue;
            };
            // A node cordoned for a command this engine never heard of (the last one died in
            // the middle of it) is schedulable again, unless its claim is being deleted.
            if !found.deleting
                && let Some(object) = object.filter(|n| lifecycle::cordoned_for_disruption(n))
                && let Some(name) = object.metadata.name.clone()
            {
                tracing::info!(node = %name, "lifting the cordon of a disruption that did not finish");
                lifecycle::cordon(&self.ctx, name, false);
                for view in node.iter_mut().chain(found.node.iter_mut()) {
                    view.taints.retain(|t| {
                        t.key != TAINT_DISRUPTED
                            && t.key != TAINT_RETIRING
                            && t.key != "node.kubernetes.io/unschedulable"
                    });
                }
            } else if let Some(object) = object.filter(|n| lifecycle::soft_cordoned(n))
                && let Some(name) = object.metadata.name.clone()
            {
                // A soft cordon this engine never decided: retirement decides it again.
                tracing::info!(node = %name, "lifting a soft cordon the last leader put on");
                lifecycle::soft_cordon(&self.ctx, name, false);
                for view in node.iter_mut().chain(found.node.iter_mut()) {
                    view.taints.retain(|t| t.key != TAINT_RETIRING);
                }
            }
            let name = found.name.clone();
            let deleting = found.deleting;
            if let Some(node) = node.filter(|_| found.node.is_some()) {
                self.registered.insert(name.clone(), node);
            }
            engine.handle(now, Event::ClaimFound(found));
            if deleting {
                self.deleting.insert(name);
            }
        }
        self.engine = Some(engine);
        self.fingerprint = observed.fingerprint.clone();
        self.rest.forget();
        self.last_reading = None;
    }
}

fn claim_node<'a>(
    claim: &NodeClaim,
    nodes: &'a [Arc<k8s_openapi::api::core::v1::Node>],
) -> Option<&'a k8s_openapi::api::core::v1::Node> {
    let status = claim.status.as_ref()?;
    nodes
        .iter()
        .find(|n| {
            status.node_name.is_some() && n.metadata.name == status.node_name
                || status.provider_id.is_some()
                    && n.spec.as_ref().and_then(|s| s.provider_id.clone()) == status.provider_id
        })
        .map(Arc::as_ref)
}

fn node_class_values(stores: &crate::stores::Stores) -> Vec<Value> {
    fn values<K: serde::Serialize>(items: Vec<Arc<K>>, kind: &str) -> Vec<Value> {
        items
            .iter()
            .filter_map(|i| {
                let mut v = serde_json::to_value(i.as_ref()).ok()?;
                v["apiVersion"] = Value::from("quartermaster.dev/v1");
                v["kind"] = Value::from(kind);
                Some(v)
            })
            .collect()
    }
    let mut out = values(stores.aws_node_classes.state(), "AWSNodeClass");
    out.extend(values(stores.gcp_node_classes.state(), "GCPNodeClass"));
    out.extend(values(stores.azure_node_classes.state(), "AzureNodeClass"));
    out
}

/// `pools` with `spec.preferencePolicy` set to `policy` (`--preference-policy`), or as they are.
fn with_preference_policy(
    pools: Vec<Arc<NodePool>>,
    policy: Option<quartermaster_policies::PreferencePolicy>,
) -> Vec<Arc<NodePool>> {
    let Some(policy) = policy else {
        return pools;
    };
    pools
        .into_iter()
        .map(|p| {
            let mut pool = p.as_ref().clone();
            pool.spec.preference_policy = Some(policy);
            Arc::new(pool)
        })
        .collect()
}
