//! ProvisioningRequests in `plan`: for each request read from the files, whether its capacity
//! exists (check-capacity, answered from the given nodes without buying) or which nodes the plan
//! buys for it, all or none (best-effort-atomic), with the reason when it gets none.

use chrono::{DateTime, Utc};
use quartermaster_cluster::provisioning_request::{ProvisioningClass, RequestPods};
use quartermaster_engine::{RequestVerdict, check_capacity};
use quartermaster_pricing::Catalog;
use quartermaster_solver::{ClusterSnapshot, Plan, PodRef};
use serde_json::{Value, json};

/// What `plan` says about one request.
pub struct RequestAnswer {
    /// `namespace/name`.
    pub request: String,
    /// `check-capacity`, `best-effort-atomic`, or the class name given.
    pub class: String,
    /// `provisioned`, `not-found` or `failed`.
    pub verdict: &'static str,
    /// How many new nodes the plan buys for it.
    pub new_nodes: usize,
    /// Why (or what was found).
    pub reason: String,
}

impl RequestAnswer {
    /// One line for the plan's notes.
    pub fn note(&self) -> String {
        format!(
            "ProvisioningRequest {} ({}): {}: {}",
            self.request, self.class, self.verdict, self.reason
        )
    }

    /// The `provisioning_requests` entry of `plan -o json`.
    pub fn json(&self) -> Value {
        json!({
            "request": self.request,
            "class": self.class,
            "verdict": self.verdict,
            "new_nodes": self.new_nodes,
            "reason": self.reason,
        })
    }
}

/// Answers every request given `plan`, solved from `snapshot`.
pub fn answers(
    requests: &[RequestPods],
    snapshot: &ClusterSnapshot,
    plan: &Plan,
    catalog: &Catalog,
    now: DateTime<Utc>,
) -> Vec<RequestAnswer> {
    requests
        .iter()
        .map(|r| answer(r, snapshot, plan, catalog, now))
        .collect()
}

fn answer(
    r: &RequestPods,
    snapshot: &ClusterSnapshot,
    plan: &Plan,
    catalog: &Catalog,
    now: DateTime<Utc>,
) -> RequestAnswer {
    let class = match &r.class {
        ProvisioningClass::CheckCapacity => "check-capacity".to_owned(),
        ProvisioningClass::BestEffortAtomic => "best-effort-atomic".to_owned(),
        ProvisioningClass::QueuedProvisioning => "queued-provisioning".to_owned(),
        ProvisioningClass::Other(name) => name.clone(),
    };
    let mut a = RequestAnswer {
        request: format!("{}/{}", r.namespace, r.name),
        class,
        verdict: "failed",
        new_nodes: 0,
        reason: String::new(),
    };
    if let Some(problem) = &r.problem {
        a.reason = problem.clone();
        return a;
    }
    if r.status.is_done() {
        a.reason = "already finished (Failed, BookingExpired or CapacityRevoked); holds nothing"
            .to_owned();
        return a;
    }
    if !r.check.is_empty() {
        // The snapshot without the pods placed by this plan: what exists.
        let mut existing = snapshot.clone();
        existing.pending.clear();
        match check_capacity(&existing, &r.check, catalog, now) {
            RequestVerdict::NotFound(why) | RequestVerdict::Revoked(why) => {
                a.verdict = "not-found";
                a.reason = why;
            }
            _ => {
                a.verdict = "provisioned";
                a.reason = format!(
                    "capacity for {} pod(s) found on existing nodes",
                    r.check.len()
                );
            }
        }
        return a;
    }
    let mine = |p: &PodRef| r.pending.contains(p);
    if let Some(u) = plan.unschedulable.iter().find(|u| mine(&u.pod)) {
        a.verdict = "not-found";
        a.reason = format!("no node bought: {}: {}", u.pod, u.reason);
        return a;
    }
    a.verdict = "provisioned";
    a.new_nodes = plan
        .new_nodes
        .iter()
        .filter(|n| n.pods.iter().any(mine))
        .count();
    let on_existing: usize = plan
        .existing
        .iter()
        .map(|e| e.pods.iter().filter(|p| mine(p)).count())
        .sum();
    a.reason = format!(
        "{} pod(s): {} new node(s) bought together, {on_existing} pod(s) on existing nodes{}{}",
        r.pending.len(),
        a.new_nodes,
        if r.consumed > 0 {
            format!("; {} pod(s) already consume it", r.consumed)
        } else {
            String::new()
        },
        r.note
            .as_ref()
            .map(|n| format!("; {n}"))
            .unwrap_or_default()
    );
    a
}
