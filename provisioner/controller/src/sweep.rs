//! The clouds' side of the loop, run periodically by the driver: events the clouds announce,
//! instances that have no NodeClaim (leaks) deleted, and instances the cloud says drifted from
//! their NodeClass reported to the engine.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_cloud::{CloudEvent, CloudProvider};
use quartermaster_engine::Event;
use tokio::sync::mpsc;

use crate::context::Context;
use crate::driver::Outcome;

/// An instance younger than this is never collected (its NodeClaim may not be visible yet).
pub const GC_GRACE: TimeDelta = TimeDelta::minutes(1);

/// Sends what `provider` announced to the engine. A claim whose instance is gone is deleted,
/// so its record goes too.
pub async fn forward_events(
    ctx: Arc<Context>,
    provider: Arc<dyn CloudProvider>,
    outcomes: mpsc::UnboundedSender<Outcome>,
) {
    let events = match provider.poll_events().await {
        Ok(events) => events,
        Err(e) => {
            tracing::warn!(error = %e, "could not poll the cloud's events");
            return;
        }
    };
    for event in events {
        let event = match event {
            CloudEvent::Interruption {
                provider_id,
                terminates_at,
            } => Event::Interruption {
                provider_id,
                terminates_at,
            },
            CloudEvent::Terminated { provider_id } => {
                let claim = ctx.stores.node_claims.find(|c| {
                    c.status.as_ref().and_then(|s| s.provider_id.as_deref())
                        == Some(provider_id.as_str())
                });
                if let Some(name) = claim.and_then(|c| c.metadata.name.clone()) {
                    tracing::warn!(nodeclaim = %name, instance = %provider_id, "the instance is gone; deleting its NodeClaim");
                    if let Err(e) = ctx.writer.delete_claim(&name).await {
                        tracing::warn!(nodeclaim = %name, error = %e, "could not delete the NodeClaim of a vanished instance");
                    }
                }
                Event::InstanceGone { provider_id }
            }
        };
        let _ = outcomes.send(Outcome::Engine(Box::new(event)));
    }
}

/// Deletes the instances of `provider` whose claim is not in `known`, and those of a claim that
/// recorded another instance (`recorded`: claim -> provider id; a launch that landed late after
/// its retry launched elsewhere), both once older than [`GC_GRACE`].
pub async fn delete_leaks(
    provider: Arc<dyn CloudProvider>,
    known: BTreeSet<String>,
    recorded: BTreeMap<String, String>,
    now: DateTime<Utc>,
) {
    let instances = match provider.list().await {
        Ok(i) => i,
        Err(e) => {
            tracing::warn!(error = %e, "garbage collection could not list instances");
            return;
        }
    };
    for i in instances {
        if now - i.launched_at < GC_GRACE {
            continue;
        }
        let duplicate = recorded
            .get(&i.claim_name)
            .is_some_and(|id| *id != i.provider_id);
        if known.contains(&i.claim_name) && !duplicate {
            continue;
        }
        if duplicate {
            tracing::warn!(instance = %i.provider_id, nodeclaim = %i.claim_name, "deleting a second instance of a NodeClaim that recorded another");
        } else {
            tracing::warn!(instance = %i.provider_id, nodeclaim = %i.claim_name, "deleting an instance that has no NodeClaim");
        }
        if let Err(e) = provider.delete(&i.provider_id).await {
            tracing::warn!(instance = %i.provider_id, error = %e, "could not delete a leaked instance");
        }
    }
}

/// Nodes being deleted that carry our finalizer but whose NodeClaim is gone (an instance the
/// garbage collection deleted, a NodeClaim removed by hand) lose the finalizer once they have
/// been deleting for [`GC_GRACE`]: no termination will ever come for them, and the finalizer
/// alone would keep them (and, where the Node is the instance, the instance) forever.
pub async fn release_orphan_nodes(ctx: Arc<Context>, known: BTreeSet<String>, now: DateTime<Utc>) {
    for node in ctx.stores.nodes.state() {
        let meta = &node.metadata;
        let Some(since) = meta.deletion_timestamp.as_ref() else {
            continue;
        };
        let claim = meta
            .labels
            .as_ref()
            .and_then(|l| l.get(crate::translate::LABEL_NODECLAIM));
        let ours = meta
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == crate::translate::FINALIZER);
        if !ours
            || claim.is_none_or(|c| known.contains(c))
            || now - crate::time::from_kube(since) < GC_GRACE
        {
            continue;
        }
        let name = meta.name.clone().unwrap_or_default();
        tracing::warn!(node = %name, "releasing a deleted Node whose NodeClaim is gone");
        if let Err(e) = ctx
            .writer
            .remove_node_finalizer(&node, crate::translate::FINALIZER)
            .await
        {
            tracing::warn!(node = %name, error = %e, "could not release a deleted Node; retried at the next collection");
        }
    }
}

/// Asks `provider` whether each instance of a claim in `known` drifted from its NodeClass
/// (`CloudProvider::is_drifted`: AMI, security groups, subnet) and tells the engine about those
/// that did; it replaces them within the pools' `Drifted` budgets.
pub async fn report_drift(
    provider: Arc<dyn CloudProvider>,
    known: BTreeSet<String>,
    outcomes: mpsc::UnboundedSender<Outcome>,
) {
    let instances = match provider.list().await {
        Ok(i) => i,
        Err(e) => {
            tracing::warn!(error = %e, "drift detection could not list instances");
            return;
        }
    };
    for i in instances {
        if !known.contains(&i.claim_name) {
            continue;
        }
        match provider.is_drifted(&i).await {
            Ok(Some(reason)) => {
                tracing::info!(instance = %i.provider_id, nodeclaim = %i.claim_name, %reason, "drifted from its NodeClass");
                let _ = outcomes.send(Outcome::Engine(Box::new(Event::CloudDrifted {
                    provider_id: i.provider_id,
                    reason,
                })));
            }
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(instance = %i.provider_id, error = %e, "could not tell whether the instance drifted");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use quartermaster_cloud::{CloudError, CloudFuture, Instance, InstanceState, LaunchRequest};
    use quartermaster_pricing::{CapacityType, Cloud, InstanceType};

    use super::*;

    /// A cloud with two instances; `i-drifted` runs an old AMI.
    struct TwoInstances;

    fn instance(id: &str, claim: &str) -> Instance {
        Instance {
            provider_id: format!("aws:///us-east-1a/{id}"),
            claim_name: claim.into(),
            instance_type: "m6i.large".into(),
            zone: "us-east-1a".into(),
            capacity_type: CapacityType::OnDemand,
            price_per_hour: 0.096,
            state: InstanceState::Running,
            launched_at: DateTime::from_timestamp(1_800_000_000, 0).expect("a time"),
            tags: BTreeMap::new(),
        }
    }

    impl CloudProvider for TwoInstances {
        fn cloud(&self) -> Cloud {
            Cloud::Aws
        }
        fn create<'a>(&'a self, _: &'a LaunchRequest) -> CloudFuture<'a, Instance> {
            Box::pin(async {
                Err(CloudError::InvalidRequest {
                    message: "not here".into(),
                })
            })
        }
        fn delete<'a>(&'a self, _: &'a str) -> CloudFuture<'a, ()> {
            Box::pin(async { Ok(()) })
        }
        fn get<'a>(&'a self, id: &'a str) -> CloudFuture<'a, Instance> {
            Box::pin(async move {
                Err(CloudError::NotFound {
                    provider_id: id.to_owned(),
                })
            })
        }
        fn list(&self) -> CloudFuture<'_, Vec<Instance>> {
            Box::pin(async {
                Ok(vec![
                    instance("i-fresh", "a"),
                    instance("i-drifted", "b"),
                    instance("i-leaked", "nobody"),
                ])
            })
        }
        fn instance_types(&self) -> CloudFuture<'_, Vec<InstanceType>> {
            Box::pin(async { Ok(Vec::new()) })
        }
        fn is_drifted<'a>(&'a self, i: &'a Instance) -> CloudFuture<'a, Option<String>> {
            Box::pin(async move {
                Ok(i.provider_id
                    .ends_with("drifted")
                    .then(|| "AMIDrift: old".to_owned()))
            })
        }
        fn poll_events(&self) -> CloudFuture<'_, Vec<CloudEvent>> {
            Box::pin(async { Ok(Vec::new()) })
        }
    }

    #[tokio::test]
    async fn drifted_instances_of_known_claims_reach_the_engine() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let known: BTreeSet<String> = ["a", "b"].map(String::from).into();
        report_drift(Arc::new(TwoInstances), known, tx).await;
        let mut events = Vec::new();
        while let Ok(Outcome::Engine(e)) = rx.try_recv() {
            events.push(*e);
        }
        assert_eq!(
            events,
            vec![Event::CloudDrifted {
                provider_id: "aws:///us-east-1a/i-drifted".into(),
                reason: "AMIDrift: old".into(),
            }]
        );
    }
}
