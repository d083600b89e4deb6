//! Feed: what changed about claims, nodes and pods since the last pass, as engine events
//! (claims found, deleting or gone; registration and node updates; pods pending, bound or gone).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, Utc};
use quartermaster_engine::Event;
use quartermaster_policies::NodeClaim;
use quartermaster_solver::PodRef;

use super::{DELETE_RESEND, Driver, REGISTRATION_RESEND};
use crate::lifecycle;
use crate::translate::{LABEL_NODECLAIM, Observed, node_view};

impl Driver {
    /// Tells the engine what changed about claims and nodes; true when a delete or a
    /// registration is waiting to show in the cluster (it is sent again after a while).
    pub(super) fn feed_claims(
        &mut self,
        now: DateTime<Utc>,
        claims: &[Arc<NodeClaim>],
        nodes: &[Arc<k8s_openapi::api::core::v1::Node>],
    ) -> bool {
        let Some(engine) = &mut self.engine else {
            return false;
        };
        let mut waiting = false;
        let in_store: BTreeSet<&str> = claims
            .iter()
            .filter_map(|c| c.metadata.name.as_deref())
            .collect();
        // Claims that were in the cluster and are gone: deleted.
        let gone: Vec<String> = self
            .seen
            .iter()
            .filter(|name| !in_store.contains(name.as_str()))
            .cloned()
            .collect();
        for gone in gone {
            engine.handle(
                now,
                Event::Deleted {
                    claim: gone.clone(),
                },
            );
            self.seen.remove(&gone);
            self.registered.remove(&gone);
            self.settled.remove(&gone);
            self.registration_sent.remove(&gone);
            self.delete_sent.remove(&gone);
            self.deleting.remove(&gone);
            self.launch_errors.remove(&gone);
            self.initialized.remove(&gone);
            self.written.forget(&gone);
        }
        if self.seen.len() != in_store.len() {
            self.seen.extend(in_store.iter().map(|n| (*n).to_owned()));
        }
        for claim in claims {
            let Some(name) = claim.metadata.name.as_deref() else {
                continue;
            };
            if claim.metadata.deletion_timestamp.is_some()
                && !self.deleting.contains(name)
                && self.deleting.insert(name.to_owned())
            {
                engine.handle(
                    now,
                    Event::ClaimDeleting {
                        claim: name.to_owned(),
                    },
                );
            }
        }
        // A claim the engine is deleting that the cluster still shows alive: the delete was
        // sent before the NodeClaim existed (its launch was under way), or failed. Sent again.
        let deleting: BTreeSet<&str> = engine.deleting_claims().collect();
        for claim in claims {
            let Some(name) = claim.metadata.name.as_deref() else {
                continue;
            };
            let alive = claim.metadata.deletion_timestamp.is_none() && deleting.contains(name);
            waiting |= alive;
            let resent = self.delete_sent.get(name).copied();
            if alive && resent.is_none_or(|t| now - t >= DELETE_RESEND) {
                let name = name.to_owned();
                self.delete_sent.insert(name.clone(), now);
                let ctx = self.ctx.clone();
                self.ctx.spawn(async move {
                    if let Err(e) = ctx.writer.delete_claim(&name).await {
                        tracing::warn!(nodeclaim = %name, error = %e, "delete failed; sent again later");
                    }
                });
            }
        }
        // A Node a user deleted: its NodeClaim goes too (termination removes the Node's
        // finalizer once the instance is gone).
        for node in nodes {
            if node.metadata.deletion_timestamp.is_none() {
                continue;
            }
            let owner = node
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_NODECLAIM))
                .cloned();
            if let Some(claim) =
                owner.filter(|c| in_store.contains(c.as_str()) && !self.deleting.contains(c))
            {
                // Sent every pass until the NodeClaim shows its deletion.
                waiting = true;
                let ctx = self.ctx.clone();
                self.ctx.spawn(async move {
                    if let Err(e) = ctx.writer.delete_claim(&claim).await {
                        tracing::warn!(nodeclaim = %claim, error = %e, "could not delete the NodeClaim of a deleted Node");
                    }
                });
            }
        }
        // Registration and node updates.
        let by_provider_id: BTreeMap<&str, &Arc<k8s_openapi::api::core::v1::Node>> = nodes
            .iter()
            .filter_map(|n| Some((n.spec.as_ref()?.provider_id.as_deref()?, n)))
            .collect();
        // Only the claims whose Node changed since its view last matched get a view built.
        let changed: Vec<(String, &Arc<k8s_openapi::api::core::v1::Node>)> = engine
            .launched_claims()
            .filter_map(|(name, provider_id)| {
                let node = by_provider_id.get(provider_id).copied()?;
                let version = node.metadata.resource_version.as_deref();
                // The Node is as it was when its view matched the one reported: nothing new.
                let settled =
                    version.is_some() && self.settled.get(name).map(String::as_str) == version;
                (!settled).then(|| (name.to_owned(), node))
            })
            .collect();
        for (name, node) in changed {
            let Some(c) = engine.claim(&name) else {
                continue;
            };
            let version = node.metadata.resource_version.as_deref();
            self.settled.remove(&c.name);
            // Until its view settles, a node may be waiting for its registration patch.
            waiting = true;
            let view = node_view(node, &self.table);
            match self.registered.get(&c.name) {
                None => {
                    let pool = self.ctx.stores.node_pool(c.node_pool.as_str());
                    // The pods this node is for learn it (status.nominatedNodeName) before the
                    // registration patch makes the node schedulable, so a 1.34+ scheduler
                    // keeps their room from the first moment.
                    let node_name = node.metadata.name.clone().unwrap_or_default();
                    let expected = expected_on_new_node(
                        self.ctx.nominate_pods,
                        engine.nominated_pods(&c.name),
                        &self.reported,
                        &mut self.nominations_written,
                        &node_name,
                    );
                    let registered = lifecycle::register(
                        &self.ctx,
                        &c,
                        node,
                        pool.as_deref(),
                        lifecycle::Registration::First { expected },
                    );
                    self.registration_sent.insert(c.name.clone(), now);
                    let view = node_view(&registered, &self.table);
                    engine.handle(
                        now,
                        Event::NodeRegistered {
                            claim: c.name.clone(),
                            node: view.clone(),
                        },
                    );
                    self.registered.insert(c.name.clone(), view);
                }
                Some(last) if *last != view => {
                    // A node that lost its registration patch (conflict, restart) gets it again,
                    // once the watch has had time to show the last one.
                    let sent = self.registration_sent.get(&c.name).copied();
                    if lifecycle::needs_registration(node)
                        && sent.is_none_or(|t| now - t >= REGISTRATION_RESEND)
                    {
                        self.registration_sent.insert(c.name.clone(), now);
                        let pool = self.ctx.stores.node_pool(c.node_pool.as_str());
                        lifecycle::register(
                            &self.ctx,
                            &c,
                            node,
                            pool.as_deref(),
                            lifecycle::Registration::Again,
                        );
                    }
                    let view = lifecycle::without_unregistered(view);
                    engine.handle(now, Event::NodeUpdated { node: view.clone() });
                    self.registered.insert(c.name.clone(), view);
                }
                Some(_) => {
                    if let Some(version) = version {
                        self.settled.insert(c.name.clone(), version.to_owned());
                    }
                }
            }
        }
        waiting
    }

    pub(super) fn feed_pods(&mut self, now: DateTime<Utc>, observed: &Observed) {
        let Some(engine) = &mut self.engine else {
            return;
        };
        for (id, o) in &observed.pods {
            if let Some(created) = o.created_at {
                self.created.entry(id.clone()).or_insert(created);
            }
            let before = self.reported.get(id);
            match (&o.node, before) {
                (None, None) => {
                    engine.handle(now, Event::PodPending(o.pod.as_ref().clone()));
                }
                (None, Some(_)) => {}
                (Some(node), before) if before != Some(&Some(node.clone())) => {
                    self.nominations_written.remove(id);
                    if matches!(before, Some(None))
                        && let Some(created) = self.created.get(id)
                    {
                        self.ctx
                            .metrics
                            .pod_pending_seconds
                            .observe((now - *created).num_milliseconds().max(0) as f64 / 1000.0);
                    }
                    engine.handle(
                        now,
                        Event::PodBound {
                            pod: o.pod.as_ref().clone(),
                            node: node.clone(),
                        },
                    );
                }
                (Some(_), _) => {}
            }
            self.reported.insert(id.clone(), o.node.clone());
        }
        let gone: Vec<PodRef> = self
            .reported
            .keys()
            .filter(|id| !observed.pods.contains_key(*id))
            .cloned()
            .collect();
        for id in gone {
            self.reported.remove(&id);
            self.nominations_written.remove(&id);
            self.created.remove(&id);
            self.unschedulable.remove(&id);
            engine.handle(now, Event::PodGone(id));
        }
        let pending = self.reported.values().filter(|n| n.is_none()).count();
        self.ctx.metrics.pods_pending.set(pending as i64);
    }
}

/// Nominations outstanding at once (written, the pod not bound yet): the kube-scheduler copies
/// every pod nominated to a node each time it considers that node for another pod, so its
/// cost per scheduling attempt grows with them. Measured on a real 1.36 scheduler with the
/// 10,000-pod mix: 6,122 outstanding nominations took 72% of its CPU (16 attempts/s, against
/// 50/s without).
pub(super) const MAX_OUTSTANDING_NOMINATIONS: usize = 256;

/// The pods planned on a node that is registering, that get `status.nominatedNodeName` now
/// (recorded in `written`): with `--nominate-pods=new-nodes`, pending pods that request an
/// accelerator, where a misplacement
/// costs most (a 1-GPU pod on the 8-GPU node bought for an 8-GPU pod), while fewer than
/// [`MAX_OUTSTANDING_NOMINATIONS`] are outstanding. Pods without one are left to the scheduler,
/// which spreads them well enough, as a cluster without Quartermaster would. `all`: every
/// pending pod planned there; `off`: none.
pub(super) fn expected_on_new_node<'a>(
    mode: crate::context::NominatePods,
    planned: impl Iterator<Item = (&'a PodRef, &'a quartermaster_solver::Pod)>,
    reported: &BTreeMap<PodRef, Option<String>>,
    written: &mut BTreeMap<PodRef, String>,
    node: &str,
) -> Vec<PodRef> {
    use crate::context::NominatePods;
    let room = match mode {
        NominatePods::Off => return Vec::new(),
        NominatePods::NewNodes => MAX_OUTSTANDING_NOMINATIONS.saturating_sub(written.len()),
        NominatePods::All => usize::MAX,
    };
    let expected: Vec<PodRef> = planned
        .filter(|(_, pod)| mode == NominatePods::All || pod.requests.has_accelerator())
        .map(|(id, _)| id)
        .filter(|id| reported.get(*id) == Some(&None))
        .filter(|id| written.get(*id).map(String::as_str) != Some(node))
        .take(room)
        .cloned()
        .collect();
    for id in &expected {
        written.insert(id.clone(), node.to_owned());
    }
    expected
}

#[cfg(test)]
mod tests {
    use quartermaster_solver::{Pod, Resources};

    use super::*;
    use crate::context::NominatePods;

    /// `n` pending pods named `{prefix}-{i}`, each with `gpus` GPUs (slot 4, the first extended
    /// resource).
    fn pods(prefix: &str, n: usize, gpus: i64) -> Vec<(PodRef, Pod)> {
        (0..n)
            .map(|i| {
                let id = PodRef::new("ns", format!("{prefix}-{i}"));
                let mut requests = Resources::single(0, 1000);
                requests.set(4, gpus);
                (id.clone(), Pod::new(id, requests))
            })
            .collect()
    }

    fn expected(
        mode: NominatePods,
        planned: &[(PodRef, Pod)],
        written: &mut BTreeMap<PodRef, String>,
    ) -> Vec<PodRef> {
        let reported = planned.iter().map(|(id, _)| (id.clone(), None)).collect();
        expected_on_new_node(
            mode,
            planned.iter().map(|(id, p)| (id, p)),
            &reported,
            written,
            "node-a",
        )
    }

    #[test]
    fn new_nodes_nominates_accelerator_pods_up_to_the_outstanding_cap() {
        let mut planned = pods("cpu", 10, 0);
        planned.extend(pods("gpu", MAX_OUTSTANDING_NOMINATIONS + 10, 1));
        let mut written = BTreeMap::new();
        // Already outstanding elsewhere: they count against the cap.
        for (id, _) in pods("old", 6, 1) {
            written.insert(id, "node-b".to_owned());
        }
        let got = expected(NominatePods::NewNodes, &planned, &mut written);
        assert_eq!(got.len(), MAX_OUTSTANDING_NOMINATIONS - 6);
        assert!(got.iter().all(|id| id.name.starts_with("gpu-")));
        assert_eq!(written.len(), MAX_OUTSTANDING_NOMINATIONS);
        // Written once per node: nothing new the second time, and the cap is full.
        assert!(expected(NominatePods::NewNodes, &planned, &mut written).is_empty());
    }

    #[test]
    fn all_nominates_every_pod_and_off_none() {
        let mut planned = pods("cpu", 300, 0);
        planned.extend(pods("gpu", 3, 1));
        let mut written = BTreeMap::new();
        assert!(expected(NominatePods::Off, &planned, &mut written).is_empty());
        assert!(written.is_empty());
        assert_eq!(
            expected(NominatePods::All, &planned, &mut written).len(),
            303
        );
    }
}
