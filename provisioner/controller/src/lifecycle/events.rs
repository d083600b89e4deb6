//! The Kubernetes Events that tell a human what was decided (launched, nominated, unschedulable,
//! initialized, rebooting, disrupting).

use k8s_openapi::api::core::v1::ObjectReference;
use quartermaster_cloud::{CloudError, Instance};
use quartermaster_engine::{ClaimView, DeleteReason};
use quartermaster_solver::PodRef;

use crate::context::Context;
use crate::driver::Driver;
use crate::metrics::RepairLabels;

fn claim_ref(ctx: &Context, claim: &str) -> ObjectReference {
    let uid = ctx
        .stores
        .node_claim(claim)
        .and_then(|c| c.metadata.uid.clone());
    ObjectReference {
        api_version: Some("quartermaster.dev/v1".into()),
        kind: Some("NodeClaim".into()),
        name: Some(claim.to_owned()),
        uid,
        ..Default::default()
    }
}

fn pod_ref(ctx: &Context, pod: &PodRef) -> ObjectReference {
    let uid = ctx
        .stores
        .pod(&pod.namespace, &pod.name)
        .and_then(|p| p.metadata.uid.clone());
    ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        name: Some(pod.name.clone()),
        namespace: Some(pod.namespace.clone()),
        uid,
        ..Default::default()
    }
}

pub(super) async fn claim_event(
    ctx: &Context,
    claim: &str,
    warning: bool,
    reason: &str,
    note: String,
) {
    ctx.writer
        .event(&claim_ref(ctx, claim), warning, reason, note)
        .await;
}

fn spawn_event(
    ctx: &std::sync::Arc<Context>,
    regarding: ObjectReference,
    warning: bool,
    reason: &'static str,
    note: String,
) {
    let ctx2 = ctx.clone();
    ctx.spawn(async move {
        ctx2.writer.event(&regarding, warning, reason, note).await;
    });
}

/// `Launched` on the claim.
pub fn launched_event(ctx: &std::sync::Arc<Context>, claim: &str, instance: &Instance) {
    tracing::info!(nodeclaim = claim, instance = %instance.provider_id, instance_type = %instance.instance_type, zone = %instance.zone, capacity_type = %instance.capacity_type, "launched");
    let note = format!(
        "launched {} ({} {}) in {} at ${:.4}/h",
        instance.provider_id,
        instance.instance_type,
        instance.capacity_type,
        instance.zone,
        instance.price_per_hour
    );
    spawn_event(ctx, claim_ref(ctx, claim), false, "Launched", note);
}

/// `InsufficientCapacity` (or the error's kind) on the claim.
pub fn launch_failed_event(ctx: &std::sync::Arc<Context>, claim: &str, error: &CloudError) {
    tracing::warn!(nodeclaim = claim, error = %error, "launch failed");
    let reason = match error {
        CloudError::InsufficientCapacity { .. } => "InsufficientCapacity",
        _ => "LaunchFailed",
    };
    spawn_event(ctx, claim_ref(ctx, claim), true, reason, error.to_string());
}

/// How many `Nominated` Events may go out: Karpenter's budget for them (10 at once, then 5 a
/// second), past which they are dropped rather than queued. A batch of 10,000 pods would
/// otherwise queue 10,000 Events behind the loop's rate limit, minutes of writes that tell a
/// human nothing the pods' binding does not tell a moment later.
#[derive(Debug)]
pub struct NominationEvents(governor::DefaultDirectRateLimiter);

impl Default for NominationEvents {
    fn default() -> Self {
        Self(governor::RateLimiter::direct(
            governor::Quota::per_second(NOMINATION_EVENTS_PER_SECOND)
                .allow_burst(NOMINATION_EVENTS_BURST),
        ))
    }
}

impl NominationEvents {
    /// Whether one more `Nominated` Event may go out now (takes it from the budget).
    pub fn allow(&self) -> bool {
        self.0.check().is_ok()
    }
}

const NOMINATION_EVENTS_PER_SECOND: std::num::NonZeroU32 = std::num::NonZeroU32::new(5).unwrap();
const NOMINATION_EVENTS_BURST: std::num::NonZeroU32 = std::num::NonZeroU32::new(10).unwrap();

/// `Nominated` on each pod the engine expects on a new claim, within the Events' budget.
pub fn nominated_events(driver: &Driver, claim: &str) {
    let Some(engine) = driver.engine() else {
        return;
    };
    let ctx = driver.ctx();
    // The claim's residents, not every pod in the cluster: a pass that launches 2,000 claims
    // over 10,000 pending pods must not scan the pods 2,000 times.
    for id in engine.nominated_to(claim) {
        if !driver.nomination_events().allow() {
            tracing::debug!(nodeclaim = claim, pod = %id, "Nominated Event dropped: over its budget");
            continue;
        }
        spawn_event(
            ctx,
            pod_ref(ctx, id),
            false,
            "Nominated",
            format!("Pod should schedule on NodeClaim {claim}"),
        );
    }
}

/// `Unschedulable` on a pod the solver could not place, with its reason.
pub fn unschedulable_event(ctx: &std::sync::Arc<Context>, pod: &PodRef, reason: &str) {
    spawn_event(
        ctx,
        pod_ref(ctx, pod),
        true,
        "Unschedulable",
        format!("Quartermaster cannot provision a node for this pod: {reason}"),
    );
}

/// `Initialized` on the claim.
pub fn initialized_event(ctx: &std::sync::Arc<Context>, claim: &ClaimView) {
    tracing::info!(nodeclaim = %claim.name, node = ?claim.node_name, "initialized");
    spawn_event(
        ctx,
        claim_ref(ctx, &claim.name),
        false,
        "Initialized",
        format!(
            "Node {} is initialized",
            claim.node_name.as_deref().unwrap_or("?")
        ),
    );
}

/// `Repairing` on the claim: node repair reboots its instance in place.
pub fn rebooting_event(driver: &Driver, claim: &str, why: &str) {
    let ctx = driver.ctx();
    let condition = why.split(" for ").next().unwrap_or_default().to_owned();
    ctx.metrics
        .repair_reboots
        .get_or_create(&RepairLabels { condition })
        .inc();
    tracing::warn!(nodeclaim = claim, condition = %why, "repairing: rebooting an unhealthy node");
    spawn_event(
        ctx,
        claim_ref(ctx, claim),
        true,
        "Repairing",
        format!("unhealthy: {why}; rebooting the node in place, it is replaced if still broken"),
    );
}

/// `Disrupting` on the claim, with the reason and what it saves.
pub fn disrupting_event(
    driver: &Driver,
    claim: &str,
    reason: DeleteReason,
    view: Option<&ClaimView>,
) {
    let ctx = driver.ctx();
    if reason == DeleteReason::Unhealthy {
        let why = driver
            .engine_ref()
            .and_then(|e| e.repair_reason(claim))
            .unwrap_or("a node condition")
            .to_owned();
        let condition = why.split(" for ").next().unwrap_or_default().to_owned();
        ctx.metrics
            .repairs
            .get_or_create(&RepairLabels { condition })
            .inc();
        tracing::warn!(nodeclaim = claim, condition = %why, "repairing: replacing an unhealthy node");
        spawn_event(
            ctx,
            claim_ref(ctx, claim),
            true,
            "Repairing",
            format!("unhealthy: {why}; replacing the node, its pods are planned again"),
        );
        return;
    }
    let saving = view.map(|v| v.offering.price_per_hour).unwrap_or_default();
    tracing::info!(nodeclaim = claim, %reason, saving_per_hour = saving, "disrupting");
    spawn_event(
        ctx,
        claim_ref(ctx, claim),
        false,
        "Disrupting",
        format!("{reason}: removing this node saves up to ${saving:.4}/h"),
    );
}

#[cfg(test)]
mod tests {
    use super::NominationEvents;

    #[test]
    fn nomination_events_past_the_burst_are_dropped_not_queued() {
        let budget = NominationEvents::default();
        let allowed = (0..1_000).filter(|_| budget.allow()).count();
        // Ten at once; a thousand asked in a moment get at most one more refill.
        assert!((10..=11).contains(&allowed), "{allowed} allowed");
    }
}
