//! Termination of a NodeClaim that is being deleted (by the engine, a user, or its Node's
//! deletion), in this order: cordon the node (`quartermaster.dev/disrupted:NoSchedule`), evict
//! its pods through the Eviction API (PodDisruptionBudgets honoured, 429 retried with backoff)
//! until none is left or `terminationGracePeriod` has passed, delete the instance and retry
//! until the provider says it is gone, delete the Node, and only then remove the finalizers.
//! No instance is ever left running without a NodeClaim.
//!
//! `terminationGracePeriod` (the claim's, from its NodePool template) counts from the claim's
//! deletion, as Karpenter's: do-not-disrupt pods are not evicted but waited for, and PDB-blocked
//! evictions retried, until then. A pod whose own `terminationGracePeriodSeconds` would outlast
//! the deadline is deleted early enough to get it (with the time left); once the deadline has
//! passed every pod still there is deleted, do-not-disrupt and PDB-protected ones included,
//! and the instance goes whatever still runs. [`plan_drain`] decides, from the pods and `now`.

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
use crate::translate::{
    FINALIZER, TAINT_DISRUPTED, annotated_do_not_disrupt, bound_node, is_daemon_pod, is_finished,
};
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

/// A pod on a node being terminated, as [`plan_drain`] weighs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainPod {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// Already terminating (evicted or deleted earlier): only waited for.
    pub terminating: bool,
    /// Annotated do-not-disrupt: never evicted, deleted only for the grace period.
    pub do_not_disrupt: bool,
    /// Its `terminationGracePeriodSeconds` (Kubernetes' default 30).
    pub grace_seconds: i64,
}

/// What to do with one pod in this pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodStep {
    /// Ask the Eviction API (PodDisruptionBudgets honoured).
    Evict,
    /// Delete it, bypassing PodDisruptionBudgets, with this grace period in seconds.
    Delete {
        /// The pod's grace period for this delete.
        grace_seconds: i64,
    },
    /// Leave it (terminating, or do-not-disrupt before the deadline).
    Wait,
}

/// One pass of a drain, decided: a step per pod (in the order given) and whether the
/// instance may go now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DrainPlan {
    /// The step for each pod.
    pub steps: Vec<PodStep>,
    /// True when nothing is left to wait for: no pod left, or the grace period is over.
    pub proceed: bool,
}

/// Decides one drain pass over `pods` at `now`, the grace period ending at `deadline` (none:
/// wait for the pods as long as it takes).
pub fn plan_drain(
    pods: &[DrainPod],
    deadline: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> DrainPlan {
    let over = deadline.is_some_and(|d| now >= d);
    let steps = pods
        .iter()
        .map(|pod| {
            if pod.terminating {
                // A pod evicted earlier with a grace longer than what is left is cut short.
                return if over {
                    PodStep::Delete { grace_seconds: 0 }
                } else {
                    PodStep::Wait
                };
            }
            if let Some(d) = deadline {
                let left = (d - now).num_seconds().max(0);
                if pod.grace_seconds >= left {
                    return PodStep::Delete {
                        grace_seconds: left,
                    };
                }
            }
            if pod.do_not_disrupt {
                PodStep::Wait
            } else {
                PodStep::Evict
            }
        })
        .collect();
    DrainPlan {
        steps,
        proceed: over || pods.is_empty(),
    }
}

/// Drives the termination of `name` until it is done, this replica stops leading, or the
/// claim disappears. Transient failures are retried with backoff; nothing panics.
#[tracing::instrument(name = "terminate", skip_all, fields(nodeclaim = %name))]
pub async fn terminate(ctx: Arc<Context>, name: String) {
    let mut backoff = RETRY;
    loop {
        let Some(claim) = ctx.stores.node_claim(&name) else {
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
        let left = drain(ctx, node, grace_deadline(claim), now).await?;
        if left > 0 {
            return Ok(Step::Draining(left));
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
        ctx.writer.remove_node_finalizer(node, FINALIZER).await?;
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

/// The claim's Node: by name once registered, by provider id before, and by its
/// `quartermaster.dev/nodeclaim` label when the claim's status never recorded either (a
/// controller restarted between the launch and the status write).
fn find_node(ctx: &Context, claim: &NodeClaim) -> Option<Arc<Node>> {
    let status = claim.status.as_ref();
    let by_name = status.and_then(|s| s.node_name.clone());
    let by_id = status.and_then(|s| s.provider_id.clone());
    let name = claim.metadata.name.as_deref();
    // The recorded node name is a key lookup; only a claim without one scans the nodes.
    if let Some(node) = by_name.as_deref().and_then(|n| ctx.stores.node(n)) {
        return Some(node);
    }
    ctx.stores.nodes.find(|n| {
        by_name.is_some() && n.metadata.name == by_name
            || by_id.is_some() && n.spec.as_ref().and_then(|s| s.provider_id.clone()) == by_id
            || name.is_some()
                && n.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(crate::translate::LABEL_NODECLAIM))
                    .map(String::as_str)
                    == name
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
    let name = node.metadata.name.as_deref().unwrap_or_default();
    ctx.writer
        .edit_node(name, Some(node), |n| {
            let spec = n.spec.clone().unwrap_or_default();
            let mut taints = spec.taints.unwrap_or_default();
            let tainted = taints.iter().any(|t| t.key == TAINT_DISRUPTED);
            if tainted && spec.unschedulable == Some(true) {
                return None;
            }
            if !tainted {
                taints.push(k8s_openapi::api::core::v1::Taint {
                    key: TAINT_DISRUPTED.into(),
                    effect: "NoSchedule".into(),
                    ..Default::default()
                });
            }
            Some(json!({"spec": {"unschedulable": true, "taints": taints}}))
        })
        .await
}

/// The pods of `node` a drain waits for (not finished, not DaemonSet pods).
fn drain_pods(ctx: &Context, node_name: &str) -> Vec<DrainPod> {
    let mut pods: Vec<DrainPod> = ctx
        .stores
        .pods
        .state()
        .into_iter()
        .filter(|p| bound_node(p) == Some(node_name) && !is_finished(p) && !is_daemon_pod(p))
        .map(|p| DrainPod {
            namespace: p
                .metadata
                .namespace
                .clone()
                .unwrap_or_else(|| "default".into()),
            name: p.metadata.name.clone().unwrap_or_default(),
            terminating: p.metadata.deletion_timestamp.is_some(),
            do_not_disrupt: annotated_do_not_disrupt(&p.metadata),
            grace_seconds: p
                .spec
                .as_ref()
                .and_then(|s| s.termination_grace_period_seconds)
                .unwrap_or(DEFAULT_POD_GRACE_SECONDS),
        })
        .collect();
    pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    pods
}

/// Kubernetes' default `terminationGracePeriodSeconds`.
const DEFAULT_POD_GRACE_SECONDS: i64 = 30;

/// One drain pass over `node` as [`plan_drain`] decides it; returns how many pods are left to
/// wait for (0 once the grace period is over, whatever still runs).
#[tracing::instrument(
    name = "drain",
    skip_all,
    fields(node = node.metadata.name.as_deref().unwrap_or_default(), pods = tracing::field::Empty)
)]
async fn drain(
    ctx: &Context,
    node: &Node,
    deadline: Option<DateTime<Utc>>,
    now: DateTime<Utc>,
) -> Result<usize, ControllerError> {
    let node_name = node.metadata.name.as_deref().unwrap_or_default();
    let pods = drain_pods(ctx, node_name);
    let span = tracing::Span::current();
    if !span.is_disabled() && !pods.is_empty() {
        let names: Vec<String> = pods
            .iter()
            .map(|p| format!("{}/{}", p.namespace, p.name))
            .collect();
        span.record("pods", names.join(","));
        tracing::debug!(left = pods.len(), "draining");
    }
    let plan = plan_drain(&pods, deadline, now);
    for (pod, step) in pods.iter().zip(&plan.steps) {
        let (ns, name) = (pod.namespace.as_str(), pod.name.as_str());
        match step {
            PodStep::Wait => {}
            PodStep::Evict => match ctx.writer.evict(ns, name).await? {
                Eviction::Evicted | Eviction::Gone => {}
                Eviction::Blocked => {
                    tracing::debug!(pod = %format!("{ns}/{name}"), node = node_name, "eviction blocked by a PodDisruptionBudget")
                }
            },
            PodStep::Delete { grace_seconds } => {
                tracing::info!(pod = %format!("{ns}/{name}"), node = node_name, grace_seconds, "deleting a pod: the node's terminationGracePeriod ends");
                ctx.writer.delete_pod(ns, name, *grace_seconds).await?;
            }
        }
    }
    Ok(if plan.proceed { 0 } else { pods.len() })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).expect("a time")
    }

    fn pod(name: &str) -> DrainPod {
        DrainPod {
            namespace: "ml".into(),
            name: name.into(),
            terminating: false,
            do_not_disrupt: false,
            grace_seconds: 30,
        }
    }

    #[test]
    fn without_a_grace_period_pods_are_evicted_and_do_not_disrupt_pods_waited_for() {
        let protected = DrainPod {
            do_not_disrupt: true,
            ..pod("b")
        };
        let going = DrainPod {
            terminating: true,
            ..pod("c")
        };
        let plan = plan_drain(&[pod("a"), protected, going], None, t(0));
        assert_eq!(
            plan.steps,
            vec![PodStep::Evict, PodStep::Wait, PodStep::Wait]
        );
        assert!(!plan.proceed);
        assert!(plan_drain(&[], None, t(0)).proceed);
    }

    #[test]
    fn once_the_grace_period_is_over_every_pod_is_deleted_and_the_node_goes() {
        let deadline = Some(t(600));
        let protected = DrainPod {
            do_not_disrupt: true,
            ..pod("b")
        };
        let slow = DrainPod {
            grace_seconds: 120,
            ..pod("c")
        };
        let pods = [pod("a"), protected, slow];
        // Before: evicted (PDBs honoured), do-not-disrupt waited for.
        let before = plan_drain(&pods, deadline, t(0));
        assert_eq!(
            before.steps,
            vec![PodStep::Evict, PodStep::Wait, PodStep::Evict]
        );
        assert!(!before.proceed);
        // A pod whose own grace would outlast the deadline is deleted early enough to get it.
        let near = plan_drain(&pods, deadline, t(500));
        assert_eq!(
            near.steps,
            vec![
                PodStep::Evict,
                PodStep::Wait,
                PodStep::Delete { grace_seconds: 100 }
            ]
        );
        assert!(!near.proceed);
        // After: everything left is deleted, do-not-disrupt included; the instance goes.
        let terminating = DrainPod {
            terminating: true,
            ..pod("d")
        };
        let after = plan_drain(&[pod("a"), pods[1].clone(), terminating], deadline, t(600));
        assert_eq!(after.steps, vec![PodStep::Delete { grace_seconds: 0 }; 3]);
        assert!(after.proceed);
    }
}

#[cfg(test)]
mod scenario_tests {
    use serde_json::{Value, json};

    use crate::tests::{Env, FakeApi, QM, cluster_with_gpu_pool, t0};

    fn pod_requests(api: &FakeApi, verb: &str, resource: &str) -> usize {
        api.log()
            .iter()
            .filter(|r| r.resource == resource && r.verb() == verb)
            .count()
    }

    #[tokio::test(start_paused = true)]
    async fn a_do_not_disrupt_pod_holds_the_drain_until_the_grace_period_ends_then_is_deleted() {
        let api = cluster_with_gpu_pool(&[("llm-0", 1)]);
        api.modify(
            QM,
            "nodepools",
            "gpu",
            json!({"spec": {"template": {"spec": {"terminationGracePeriod": "2m"}}}}),
        );
        api.modify(
            "",
            "pods",
            "ml/llm-0",
            json!({"metadata": {"annotations": {"karpenter.sh/do-not-disrupt": "true"}}}),
        );
        let mut env = Env::new(api);
        env.passes(0, 5).await;
        let claims: Vec<Value> = env.api.list(QM, "nodeclaims");
        let name = claims[0]["metadata"]["name"]
            .as_str()
            .expect("a claim")
            .to_owned();
        assert_eq!(
            claims[0]["spec"]["terminationGracePeriod"], "2m",
            "the claim carries its pool's grace period"
        );
        env.api.modify(
            "",
            "pods",
            "ml/llm-0",
            json!({"spec": {"nodeName": name}, "status": {"phase": "Running", "conditions": []}}),
        );
        env.passes(6, 7).await;
        env.api.clear_log();
        // A user deletes the NodeClaim at t0 + 8 s: the grace period ends at t0 + 128 s.
        let deleted_at = (t0() + chrono::TimeDelta::seconds(8)).to_rfc3339();
        env.api.modify(
            QM,
            "nodeclaims",
            &name,
            json!({"metadata": {"deletionTimestamp": deleted_at}}),
        );
        env.passes(8, 12).await;
        assert_eq!(
            pod_requests(&env.api, "create", "pods/eviction"),
            0,
            "do-not-disrupt: never evicted"
        );
        assert_eq!(pod_requests(&env.api, "delete", "pods"), 0);
        assert!(
            env.api.get(QM, "nodeclaims", &name).is_some(),
            "held by its pod"
        );
        assert!(
            env.api.get("", "nodes", &name).is_some(),
            "the instance stays"
        );

        // 25 s before the end: the pod is deleted with the 25 s left (its own grace is 30 s).
        env.pass_at(103).await;
        let deletes: Vec<_> = env
            .api
            .log()
            .into_iter()
            .filter(|r| r.resource == "pods" && r.verb() == "delete")
            .collect();
        assert!(
            !deletes.is_empty(),
            "the pod is deleted before the deadline"
        );
        assert!(
            env.api.get("", "nodes", &name).is_some(),
            "its deletion is waited for"
        );

        // The pod is still there (a kubelet that does not answer) when the period ends: the
        // node goes anyway, and so does the claim.
        env.api.insert(
            "",
            "pods",
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "stuck", "namespace": "ml",
                    "annotations": {"quartermaster.dev/do-not-disrupt": "true"}},
                "spec": {"nodeName": name, "containers": [{"name": "c", "image": "i"}]},
                "status": {"phase": "Running"}}),
        );
        env.passes(128, 134).await;
        assert!(
            env.api.get("", "nodes", &name).is_none(),
            "the node is gone"
        );
        assert!(
            env.api.get(QM, "nodeclaims", &name).is_none(),
            "and its claim"
        );
        assert!(
            env.api.log().iter().any(|r| r.resource == "pods"
                && r.verb() == "delete"
                && r.name.as_deref() == Some("stuck")),
            "a do-not-disrupt pod left at the deadline is deleted"
        );
    }
}
