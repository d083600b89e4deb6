//! Termination of a NodeClaim that is being deleted (by the engine, a user, or its Node's
//! deletion), in this order: cordon the node (`quartermaster.dev/disrupted:NoSchedule`), evict
//! its pods through the Eviction API (PodDisruptionBudgets honoured, 429 retried with backoff)
//! until none is left or `terminationGracePeriod` has passed, delete the instance and retry
//! until the provider says it is gone, delete the Node, and only then remove the finalizers.
//! No instance is ever left running without a NodeClaim.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::core::v1::Node;
use quartermaster_cloud::{CloudError, CloudProvider};
use quartermaster_policies::NodeClaim;
use quartermaster_policies::duration::parse_duration;
use serde_json::json;

use crate::ControllerError;
use crate::context::Context;
use crate::time::from_kube;
use crate::translate::{FINALIZER, TAINT_DISRUPTED, bound_node, is_daemon_pod, is_finished};
use crate::writes::Eviction;

/// How long to wait between two passes over a node's pods or two delete attempts.
const RETRY: Duration = Duration::from_secs(2);
/// Longest wait between retries after an error.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Where one pass of termination got to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Pods are still being evicted (how many are left).
    Draining(usize),
    /// The instance delete was asked for; waiting for the provider to say it is gone.
    Deleting,
    /// Finalizers removed: the NodeClaim (and its Node) can go.
    Done,
}

/// Drives the termination of `name` until it is done, this replica stops leading, or the
/// claim disappears. Transient failures are retried with backoff; nothing panics.
pub async fn terminate(ctx: Arc<Context>, name: String) {
    let mut backoff = RETRY;
    loop {
        let Some(claim) = ctx
            .stores
            .node_claims
            .state()
            .into_iter()
            .find(|c| c.metadata.name.as_deref() == Some(name.as_str()))
        else {
            return;
        };
        match step(&ctx, &claim, ctx.clock.now()).await {
            Ok(Step::Done) => {
                tracing::info!(nodeclaim = %name, "terminated");
                return;
            }
            Ok(step) => {
                tracing::debug!(nodeclaim = %name, ?step, "terminating");
                backoff = RETRY;
                tokio::time::sleep(RETRY).await;
            }
            Err(ControllerError::NotLeader) => return,
            Err(e) => {
                tracing::warn!(nodeclaim = %name, error = %e, "termination step failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// One pass of termination over `claim` at `now`.
pub async fn step(
    ctx: &Context,
    claim: &NodeClaim,
    now: DateTime<Utc>,
) -> Result<Step, ControllerError> {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let status = claim.status.clone().unwrap_or_default();
    let node = find_node(ctx, claim);

    if let Some(node) = &node {
        cordon(ctx, node).await?;
        let deadline = grace_deadline(claim);
        if deadline.is_none_or(|d| now < d) {
            let left = drain(ctx, node).await?;
            if left > 0 {
                return Ok(Step::Draining(left));
            }
        }
    }

    // The Node's finalizer goes first: where the Node is the instance (kwok), deleting the
    // instance deletes the Node, and nothing but the claim's finalizer is needed to make sure
    // the instance goes.
    if let Some(node) = &node
        && node
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == FINALIZER)
    {
        let finalizers: Vec<&String> = node
            .metadata
            .finalizers
            .iter()
            .flatten()
            .filter(|f| *f != FINALIZER)
            .collect();
        ctx.writer
            .patch_node(
                node.metadata.name.as_deref().unwrap_or_default(),
                json!({"metadata": {"finalizers": finalizers}}),
            )
            .await?;
    }

    // The instance: by provider id, or (never recorded: a launch that crashed before its
    // status was written) by the claim name the provider tagged it with.
    let cloud = claim_cloud(ctx, claim);
    let provider = cloud.and_then(|c| ctx.provider(c).cloned());
    if let Some(provider) = provider {
        let ids: Vec<String> = match &status.provider_id {
            Some(id) => vec![id.clone()],
            None => provider
                .list()
                .await?
                .into_iter()
                .filter(|i| i.claim_name == name)
                .map(|i| i.provider_id)
                .collect(),
        };
        for id in &ids {
            if !gone(provider.as_ref(), id).await? {
                return Ok(Step::Deleting);
            }
        }
    }

    if let Some(node) = &node {
        ctx.writer
            .delete_node(node.metadata.name.as_deref().unwrap_or_default())
            .await?;
    }
    ctx.writer.remove_claim_finalizer(claim, FINALIZER).await?;
    Ok(Step::Done)
}

/// The claim's Node: by name once registered, by provider id before.
fn find_node(ctx: &Context, claim: &NodeClaim) -> Option<Arc<Node>> {
    let status = claim.status.as_ref();
    let by_name = status.and_then(|s| s.node_name.clone());
    let by_id = status.and_then(|s| s.provider_id.clone());
    ctx.stores.nodes.state().into_iter().find(|n| {
        by_name.is_some() && n.metadata.name == by_name
            || by_id.is_some() && n.spec.as_ref().and_then(|s| s.provider_id.clone()) == by_id
    })
}

/// The cloud of the claim's NodeClass kind.
fn claim_cloud(ctx: &Context, claim: &NodeClaim) -> Option<quartermaster_pricing::Cloud> {
    use quartermaster_pricing::Cloud;
    let cloud = match claim.spec.node_class_ref.kind.as_str() {
        "AWSNodeClass" | "EC2NodeClass" => Cloud::Aws,
        "GCPNodeClass" => Cloud::Gcp,
        "AzureNodeClass" => Cloud::Azure,
        _ => return ctx.providers.keys().next().copied(),
    };
    Some(cloud)
}

/// When draining stops waiting: the deletion time plus `terminationGracePeriod`, if set.
fn grace_deadline(claim: &NodeClaim) -> Option<DateTime<Utc>> {
    let since = claim.metadata.deletion_timestamp.as_ref().map(from_kube)?;
    let grace = parse_duration(claim.spec.termination_grace_period.as_deref()?).ok()?;
    Some(since + TimeDelta::from_std(grace).unwrap_or(TimeDelta::MAX))
}

async fn cordon(ctx: &Context, node: &Node) -> Result<(), ControllerError> {
    let spec = node.spec.clone().unwrap_or_default();
    let mut taints = spec.taints.clone().unwrap_or_default();
    let tainted = taints.iter().any(|t| t.key == TAINT_DISRUPTED);
    if tainted && spec.unschedulable == Some(true) {
        return Ok(());
    }
    if !tainted {
        taints.push(k8s_openapi::api::core::v1::Taint {
            key: TAINT_DISRUPTED.into(),
            effect: "NoSchedule".into(),
            ..Default::default()
        });
    }
    ctx.writer
        .patch_node(
            node.metadata.name.as_deref().unwrap_or_default(),
            json!({"spec": {"unschedulable": true, "taints": taints}}),
        )
        .await
}

/// Evicts what still runs on `node`; returns how many pods are left to go.
async fn drain(ctx: &Context, node: &Node) -> Result<usize, ControllerError> {
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    let pods: Vec<_> = ctx
        .stores
        .pods
        .state()
        .into_iter()
        .filter(|p| bound_node(p) == Some(node_name) && !is_finished(p) && !is_daemon_pod(p))
        .collect();
    let mut left = 0;
    for pod in &pods {
        left += 1;
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let (ns, name) = (
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or_default(),
        );
        match ctx.writer.evict(ns, name).await? {
            Eviction::Evicted | Eviction::Gone => {}
            Eviction::Blocked => {
                tracing::debug!(pod = %format!("{ns}/{name}"), node = node_name, "eviction blocked by a PodDisruptionBudget")
            }
        }
    }
    Ok(left)
}

/// Deletes the instance; true once the provider says it is gone.
async fn gone(provider: &dyn CloudProvider, provider_id: &str) -> Result<bool, ControllerError> {
    match provider.delete(provider_id).await {
        Ok(()) => {}
        Err(CloudError::NotFound { .. }) => return Ok(true),
        Err(e) => return Err(e.into()),
    }
    match provider.get(provider_id).await {
        Err(CloudError::NotFound { .. }) => Ok(true),
        Ok(i) => Ok(i.state == quartermaster_cloud::InstanceState::Terminated),
        Err(e) => Err(e.into()),
    }
}
