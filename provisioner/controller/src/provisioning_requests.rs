//! ProvisioningRequests (`autoscaling.x-k8s.io/v1`) served as Cluster Autoscaler serves them, so
//! Kueue's ProvisioningRequest admission check works with Quartermaster.
//!
//! The requests and the PodTemplates they name are read with the other objects
//! (`quartermaster-cluster` makes their pods: one gang for best-effort-atomic, pods to check for
//! check-capacity), the engine places the best-effort-atomic pods like any gang, and each pass
//! the conditions follow from [`quartermaster_engine::RequestVerdict`]s
//! ([`desired_conditions`]), written with server-side apply on the status subresource by the
//! leader only. Condition types and reasons are Cluster Autoscaler's: `Accepted`,
//! `Provisioned` (`CapacityIsFound`, `CapacityIsProvisioned`, `CapacityIsNotFound`), `Failed`
//! (`Expired` after 7 days unprovisioned; `UnsupportedProvisioningClass` and
//! `FailedToCreatePods` for requests Quartermaster cannot serve), `CapacityRevoked`, and
//! `BookingExpired` (`CapacityReservationTimeExpired`, 10 minutes after `Provisioned`).

use std::borrow::Cow;
use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::PodTemplate;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use quartermaster_cluster::provisioning_request::{
    ACCEPTED, API_VERSION, BOOKING_EXPIRED, CAPACITY_REVOKED, FAILED, KIND, PROVISIONED,
    ProvisioningClass, ProvisioningRequestStatus, RequestPods,
};
use quartermaster_engine::{Engine, RequestVerdict};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::time::{from_kube, to_kube};

/// How long capacity found or bought for a request is held for its pods (Cluster Autoscaler's
/// default reservation time).
pub const BOOKING_TIME: TimeDelta = TimeDelta::minutes(10);
/// A request not provisioned this long after its creation fails (`Expired`).
pub const EXPIRY: TimeDelta = TimeDelta::days(7);

/// A ProvisioningRequest as watched: spec and status kept as JSON, read by
/// `quartermaster-cluster` (a malformed spec makes the request fail, never the watch).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ProvisioningRequest {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// `spec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Value>,
    /// `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

impl kube::Resource for ProvisioningRequest {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(KIND)
    }

    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(quartermaster_cluster::provisioning_request::GROUP)
    }

    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }

    fn api_version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(API_VERSION)
    }

    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("provisioningrequests")
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The requests and PodTemplates as objects for the snapshot (with `apiVersion` and `kind`).
pub fn objects(
    requests: &[std::sync::Arc<ProvisioningRequest>],
    templates: &[std::sync::Arc<PodTemplate>],
) -> Vec<Value> {
    let mut out = Vec::new();
    for r in requests {
        if let Ok(mut v) = serde_json::to_value(r.as_ref()) {
            v["apiVersion"] = Value::from(API_VERSION);
            v["kind"] = Value::from(KIND);
            out.push(v);
        }
    }
    for t in templates {
        if let Ok(mut v) = serde_json::to_value(t.as_ref()) {
            v["apiVersion"] = Value::from("v1");
            v["kind"] = Value::from("PodTemplate");
            out.push(v);
        }
    }
    out
}

/// What the engine concludes about `request` now; `None` when there is nothing to conclude
/// (a request that cannot be served, or one that is finished).
pub fn verdict(
    engine: &Engine,
    request: &RequestPods,
    now: DateTime<Utc>,
) -> Option<RequestVerdict> {
    if request.problem.is_some() || request.status.is_done() {
        return None;
    }
    let provisioned = request.status.is_true(PROVISIONED);
    if !request.check.is_empty() {
        // Found once: the answer stands until the booking expires.
        if provisioned {
            return Some(RequestVerdict::Provisioned);
        }
        return Some(engine.check_capacity(now, &request.check));
    }
    if !request.pending.is_empty() {
        return Some(engine.request_verdict(&request.pending, provisioned));
    }
    // Every pod consumed (or none asked for).
    Some(RequestVerdict::Provisioned)
}

/// The conditions `request` should have at `now` given `verdict`; `None` when they are what it
/// has (nothing to write).
pub fn desired_conditions(
    request: &RequestPods,
    verdict: Option<&RequestVerdict>,
    now: DateTime<Utc>,
) -> Option<Vec<Condition>> {
    let mut status = request.status.clone();
    if request.status.is_done() {
        return None;
    }
    let generation = request.generation;
    let set = |status: &mut ProvisioningRequestStatus,
               type_: &str,
               on: bool,
               reason: &str,
               message: String| {
        set_condition(status, type_, on, reason, &message, generation, now);
    };
    if let Some(problem) = &request.problem {
        let reason = match request.class {
            ProvisioningClass::Other(_) => "UnsupportedProvisioningClass",
            _ => "FailedToCreatePods",
        };
        set(&mut status, FAILED, true, reason, problem.clone());
    } else {
        set(
            &mut status,
            ACCEPTED,
            true,
            "Accepted",
            match &request.note {
                // How it is served, when that is not what its class asks for.
                Some(note) => format!("ProvisioningRequest is accepted by Quartermaster; {note}"),
                None => "ProvisioningRequest is accepted by Quartermaster".to_owned(),
            },
        );
        let check = request.class == ProvisioningClass::CheckCapacity;
        match verdict {
            Some(RequestVerdict::Provisioned) => set(
                &mut status,
                PROVISIONED,
                true,
                if check {
                    "CapacityIsFound"
                } else {
                    "CapacityIsProvisioned"
                },
                if check {
                    "Capacity is found in the cluster".to_owned()
                } else {
                    "Every node of the request was launched and registered".to_owned()
                },
            ),
            Some(RequestVerdict::NotFound(why)) if !status.is_true(PROVISIONED) => set(
                &mut status,
                PROVISIONED,
                false,
                "CapacityIsNotFound",
                format!("Capacity is not found; Quartermaster will try again later: {why}"),
            ),
            Some(RequestVerdict::Revoked(why)) if status.is_true(PROVISIONED) => set(
                &mut status,
                CAPACITY_REVOKED,
                true,
                "CapacityRevoked",
                why.clone(),
            ),
            _ => {}
        }
        let provisioned_at = status
            .condition(PROVISIONED)
            .filter(|c| c.status == "True")
            .map(|c| from_kube(&c.last_transition_time));
        match provisioned_at {
            Some(at) if now >= at + BOOKING_TIME => set(
                &mut status,
                BOOKING_EXPIRED,
                true,
                "CapacityReservationTimeExpired",
                "Capacity reservation time is expired".to_owned(),
            ),
            None if request
                .created_at
                .is_some_and(|c| now >= from_kube(&Time(c)) + EXPIRY) =>
            {
                set(
                    &mut status,
                    FAILED,
                    true,
                    "Expired",
                    "ProvisioningRequest is expired".to_owned(),
                )
            }
            _ => {}
        }
    }
    (status.conditions != request.status.conditions).then_some(status.conditions)
}

/// Sets one condition; its transition time moves only when its status changes.
fn set_condition(
    status: &mut ProvisioningRequestStatus,
    type_: &str,
    on: bool,
    reason: &str,
    message: &str,
    generation: Option<i64>,
    now: DateTime<Utc>,
) {
    let value = if on { "True" } else { "False" };
    let condition = Condition {
        type_: type_.to_owned(),
        status: value.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: generation,
        last_transition_time: to_kube(now),
    };
    match status.conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) if c.status == value => {
            c.reason = condition.reason;
            c.message = condition.message;
            c.observed_generation = generation;
        }
        Some(c) => *c = condition,
        None => status.conditions.push(condition),
    }
}

/// What the driver keeps between passes: the requests of the last look, and the conditions
/// last written per request (so a lagging store does not cause the same write every pass).
#[derive(Debug, Default)]
pub struct Requests {
    /// The requests as the last look read them.
    pub observed: Vec<RequestPods>,
    written: BTreeMap<(String, String), (Vec<Condition>, DateTime<Utc>)>,
    /// When each check-capacity request was last solved.
    checked: BTreeMap<(String, String), DateTime<Utc>>,
}

/// A check-capacity request not yet provisioned is solved again at most this often (passes
/// follow every store change).
pub const CHECK_INTERVAL: TimeDelta = TimeDelta::seconds(10);

/// How long a written status is trusted before it is written again when the store still
/// shows the old one.
const REWRITE_AFTER: TimeDelta = TimeDelta::seconds(60);

/// Writes the conditions that changed (leader only: the writer refuses otherwise).
pub(crate) fn sync(
    ctx: &std::sync::Arc<crate::context::Context>,
    engine: &Engine,
    requests: &mut Requests,
    now: DateTime<Utc>,
) {
    let mut live = Vec::new();
    for request in &requests.observed {
        let key = (request.namespace.clone(), request.name.clone());
        live.push(key.clone());
        if !request.check.is_empty() && !request.status.is_true(PROVISIONED) {
            if requests
                .checked
                .get(&key)
                .is_some_and(|at| now - *at < CHECK_INTERVAL)
            {
                continue;
            }
            requests.checked.insert(key.clone(), now);
        }
        let verdict = verdict(engine, request, now);
        let Some(conditions) = desired_conditions(request, verdict.as_ref(), now) else {
            continue;
        };
        if requests
            .written
            .get(&key)
            .is_some_and(|(w, at)| same_ignoring_times(w, &conditions) && now - *at < REWRITE_AFTER)
        {
            continue;
        }
        requests
            .written
            .insert(key.clone(), (conditions.clone(), now));
        let ctx2 = ctx.clone();
        let details = request.status.provisioning_class_details.clone();
        ctx.spawn(async move {
            let status = ProvisioningRequestStatus {
                conditions,
                provisioning_class_details: details,
            };
            if let Err(e) = ctx2
                .writer
                .apply_provisioning_request_status(&key.0, &key.1, &status)
                .await
            {
                tracing::warn!(provisioningrequest = %format!("{}/{}", key.0, key.1), error = %e, "status write failed; retried on the next pass");
            }
        });
    }
    requests.written.retain(|k, _| live.contains(k));
    requests.checked.retain(|k, _| live.contains(k));
}

fn same_ignoring_times(a: &[Condition], b: &[Condition]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            (&x.type_, &x.status, &x.reason, &x.message)
                == (&y.type_, &y.status, &y.reason, &y.message)
        })
}

#[cfg(test)]
#[path = "provisioning_requests_tests.rs"]
mod tests;
