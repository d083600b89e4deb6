//! The controller's page for people: `/` (HTML) and `/status.json` (the same data as JSON) on
//! the metrics port, next to `/metrics` and `/cost`. Read-only; no JavaScript, no external
//! assets (inline CSS and an inline SVG chart); the page refreshes itself every 15 seconds.
//!
//! What it shows:
//! - the fleet: nodes by NodePool, instance type and capacity type with their cost per hour,
//!   read from the NodeClaims at request time exactly as `/cost` reads them, so the totals are
//!   the ones `/cost` serves (any replica can answer);
//! - pending pods with the reason the engine gives (the solver's unschedulable reason), the
//!   first [`PENDING_SHOWN`] of them;
//! - recent decisions (launches of new NodeClaims, deletions, disruptions with their reason and
//!   expected saving per hour), the last [`DECISIONS_KEPT`];
//! - the fleet's cost per hour over the last day from this process's own samples (one a minute,
//!   [`HISTORY_KEPT`] kept), drawn as an SVG step chart.
//!
//! The provisioning loop feeds [`PageState`] (a field of [`Context`]) with [`record_pass`] at
//! the end of each pass and [`record_decision`] for each decision; both are cheap (a pass copies
//! at most [`PENDING_SHOWN`] reasons, and samples the cost once a minute). Pending pods,
//! decisions and the cost history are the leader's: a replica that does not lead says so.

mod html;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Mutex, MutexGuard};

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::reflector::ObjectRef;
use quartermaster_cloud::LaunchRequest;
use quartermaster_cost::fleet_cost;
use quartermaster_engine::{ClaimView, DeleteReason, DisruptionCommand};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

pub use html::{escape, render};

use crate::context::Context;
use crate::driver::Driver;
use crate::fleet::usage;

/// How many pending pods the page lists (the count covers all of them).
pub const PENDING_SHOWN: usize = 200;
/// How many recent decisions are kept.
pub const DECISIONS_KEPT: usize = 100;
/// How many cost samples are kept: a day of one a minute.
pub const HISTORY_KEPT: usize = 24 * 60;
/// The least time between two cost samples.
pub const SAMPLE_EVERY: TimeDelta = TimeDelta::minutes(1);
/// How often the page reloads itself, seconds.
pub const REFRESH_SECONDS: u32 = 15;

/// What the provisioning loop last told the page; shared by the loop and the HTTP handlers.
#[derive(Debug, Default)]
pub struct PageState {
    inner: Mutex<Recorded>,
}

/// The recorded part of the page: everything but the fleet, which is read at request time.
#[derive(Debug, Default, Clone)]
struct Recorded {
    last_pass: Option<DateTime<Utc>>,
    waiting: usize,
    shown: Vec<PendingPod>,
    decisions: VecDeque<RecordedDecision>,
    history: VecDeque<CostSample>,
}

/// A pod the engine waits to place, with the reason its last solve gave.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingPod {
    /// `namespace/name`.
    pub pod: String,
    /// Why the solver could not place it; `null` while it waits for its first solve (the
    /// batch window).
    pub reason: Option<String>,
}

/// What kind of decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DecisionKind {
    /// A new NodeClaim is launched.
    Launch,
    /// A NodeClaim is deleted (empty, consolidated, interrupted, expired, ...).
    Delete,
    /// A voluntary disruption: nodes go (and replacements come) to save money or follow drift.
    Disrupt,
}

impl DecisionKind {
    /// `launch`, `delete` or `disrupt`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Launch => "launch",
            Self::Delete => "delete",
            Self::Disrupt => "disrupt",
        }
    }
}

/// One decision of the engine, as the page lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Its kind.
    pub kind: DecisionKind,
    /// The NodeClaims it is about (those that go, for a disruption).
    pub nodeclaims: Vec<String>,
    /// Their NodePool (empty when unknown).
    pub nodepool: String,
    /// What, in a few words: the offering launched, or the shape of a disruption.
    pub summary: String,
    /// Why (deletions and disruptions).
    pub reason: Option<String>,
    /// The price of the node launched or deleted, dollars per hour.
    pub price_per_hour: Option<f64>,
    /// The expected saving of a disruption, dollars per hour (negative for drift or expiry
    /// replacements that cost more).
    pub saving_per_hour: Option<f64>,
}

impl Decision {
    /// A new NodeClaim launched with `request`.
    pub fn launch(request: &LaunchRequest) -> Self {
        let fallbacks = match request.fallbacks.len() {
            0 => String::new(),
            n => format!(", {n} fallback offering(s)"),
        };
        Self {
            kind: DecisionKind::Launch,
            nodeclaims: vec![request.claim_name.clone()],
            nodepool: request.node_pool.clone(),
            summary: format!(
                "{} {} in {}{fallbacks}",
                request.instance_type, request.capacity_type, request.zone
            ),
            reason: None,
            price_per_hour: Some(request.price_per_hour),
            saving_per_hour: None,
        }
    }

    /// NodeClaim `claim` deleted for `reason`; `view` is the engine's view of it, when known.
    pub fn delete(claim: &str, reason: DeleteReason, view: Option<&ClaimView>) -> Self {
        Self {
            kind: DecisionKind::Delete,
            nodeclaims: vec![claim.to_owned()],
            nodepool: view.map(|v| v.node_pool.clone()).unwrap_or_default(),
            summary: view
                .map(|v| {
                    format!(
                        "{} {} in {}",
                        v.offering.instance_type, v.offering.capacity_type, v.offering.zone
                    )
                })
                .unwrap_or_default(),
            reason: Some(reason.to_string()),
            price_per_hour: view.map(|v| v.offering.price_per_hour),
            saving_per_hour: None,
        }
    }

    /// A voluntary disruption the engine decided.
    pub fn disrupt(command: &DisruptionCommand) -> Self {
        Self {
            kind: DecisionKind::Disrupt,
            nodeclaims: command.claims.clone(),
            nodepool: String::new(),
            summary: format!(
                "{}: {} node(s) -> {} replacement(s), {} pod(s) moved",
                command.kind,
                command.claims.len(),
                command.replacements.len(),
                command.pods
            ),
            reason: Some(command.reason.to_string()),
            price_per_hour: None,
            saving_per_hour: Some(command.saving_per_hour),
        }
    }
}

/// A decision and when it was made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedDecision {
    /// When.
    pub at: DateTime<Utc>,
    /// What.
    #[serde(flatten)]
    pub decision: Decision,
}

/// The fleet's cost per hour at an instant.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CostSample {
    /// When.
    pub at: DateTime<Utc>,
    /// Dollars per hour of the nodes running then (what `/cost` says as `cost_per_hour`).
    pub cost_per_hour: f64,
}

impl PageState {
    fn lock(&self) -> MutexGuard<'_, Recorded> {
        // A panic while holding the lock leaves plain data behind: keep serving it.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Replaces the pending pods: `waiting` pods wait in all, `shown` are the first of them
    /// (at most [`PENDING_SHOWN`] are kept).
    pub fn record_pending(&self, at: DateTime<Utc>, waiting: usize, mut shown: Vec<PendingPod>) {
        shown.truncate(PENDING_SHOWN);
        let mut r = self.lock();
        r.last_pass = Some(at);
        r.waiting = waiting.max(shown.len());
        r.shown = shown;
    }

    /// Adds a decision made at `at` (the oldest goes beyond [`DECISIONS_KEPT`]).
    pub fn record_decision(&self, at: DateTime<Utc>, decision: Decision) {
        let mut r = self.lock();
        r.decisions.push_back(RecordedDecision { at, decision });
        while r.decisions.len() > DECISIONS_KEPT {
            r.decisions.pop_front();
        }
    }

    /// Adds a cost sample, unless the last one is less than [`SAMPLE_EVERY`] older (then it is
    /// ignored); beyond [`HISTORY_KEPT`] samples the oldest goes. Returns whether it was kept.
    pub fn record_cost(&self, at: DateTime<Utc>, cost_per_hour: f64) -> bool {
        let mut r = self.lock();
        if r.history
            .back()
            .is_some_and(|last| at - last.at < SAMPLE_EVERY)
        {
            return false;
        }
        r.history.push_back(CostSample { at, cost_per_hour });
        while r.history.len() > HISTORY_KEPT {
            r.history.pop_front();
        }
        true
    }

    /// Whether a cost sample taken at `at` would be kept.
    pub fn sample_due(&self, at: DateTime<Utc>) -> bool {
        self.lock()
            .history
            .back()
            .is_none_or(|last| at - last.at >= SAMPLE_EVERY)
    }

    /// The cost samples, oldest first.
    pub fn cost_history(&self) -> Vec<CostSample> {
        self.lock().history.iter().copied().collect()
    }

    /// The recent decisions, newest first.
    pub fn decisions(&self) -> Vec<RecordedDecision> {
        self.lock().decisions.iter().rev().cloned().collect()
    }

    fn snapshot(&self) -> Recorded {
        self.lock().clone()
    }
}

/// Records what a pass of the provisioning loop leaves for the page: the pods the engine waits
/// to place with their reasons (the first [`PENDING_SHOWN`]; a ProvisioningRequest's pods,
/// which do not exist, are left out) and, once a minute, the fleet's cost per hour. Call it at
/// the end of each pass.
pub fn record_pass(driver: &Driver, now: DateTime<Utc>) {
    let ctx = driver.ctx();
    if let Some(engine) = driver.engine() {
        let mut waiting = 0;
        let mut shown = Vec::new();
        for (id, reason) in engine.waiting() {
            waiting += 1;
            if shown.len() < PENDING_SHOWN
                && ctx
                    .stores
                    .pods
                    .get(&ObjectRef::<Pod>::new(&id.name).within(&id.namespace))
                    .is_some()
            {
                shown.push(PendingPod {
                    pod: id.to_string(),
                    reason: reason.map(str::to_owned),
                });
            }
        }
        ctx.page.record_pending(now, waiting, shown);
    } else {
        ctx.page.record_pending(now, 0, Vec::new());
    }
    if ctx.page.sample_due(now) {
        let (nodes, _) = usage(&ctx.stores.node_claims.state(), &[], &ctx.catalog);
        ctx.page
            .record_cost(now, fleet_cost(&nodes, &[], now).cost_per_hour);
    }
}

/// Records a decision of the engine made at `now` (see [`Decision::launch`],
/// [`Decision::delete`] and [`Decision::disrupt`]).
pub fn record_decision(ctx: &Context, now: DateTime<Utc>, decision: Decision) {
    ctx.page.record_decision(now, decision);
}

/// Everything the page shows (`/status.json`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// When the page was made.
    pub at: DateTime<Utc>,
    /// `--cluster-name`.
    pub cluster: String,
    /// Whether this replica leads (pending pods, decisions and cost history are the leader's).
    pub leader: bool,
    /// When the provisioning loop last reported to the page.
    pub last_pass: Option<DateTime<Utc>>,
    /// The fleet now.
    pub fleet: Fleet,
    /// Pods waiting for a node.
    pub pending: Pending,
    /// Recent decisions, newest first.
    pub decisions: Vec<RecordedDecision>,
    /// Cost per hour over the last day, oldest first.
    pub cost_history: Vec<CostSample>,
}

/// The fleet, read from the NodeClaims as `/cost` reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fleet {
    /// Dollars per hour of the running nodes (`/cost`'s `cost_per_hour`).
    pub cost_per_hour: f64,
    /// Dollars billed since each node started (`/cost`'s `cost_since_start`).
    pub cost_since_start: f64,
    /// Dollars per hour no pod requested (`/cost`'s `idle.cost_per_hour`).
    pub idle_cost_per_hour: f64,
    /// Running nodes.
    pub nodes: usize,
    /// NodeClaims not launched yet (no provider id).
    pub launching: usize,
    /// NodeClaims being deleted.
    pub deleting: usize,
    /// Running nodes by NodePool, instance type and capacity type.
    pub groups: Vec<FleetGroup>,
}

/// Running nodes of one NodePool, instance type and capacity type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetGroup {
    /// NodePool.
    pub nodepool: String,
    /// Instance type.
    pub instance_type: String,
    /// Capacity type (`spot`, `on-demand`, `reserved`).
    pub capacity_type: String,
    /// Accelerator model, empty for CPU types.
    pub accelerator: String,
    /// Accelerators per node.
    pub accelerator_count: u32,
    /// How many nodes.
    pub nodes: usize,
    /// Their cost, dollars per hour.
    pub cost_per_hour: f64,
}

/// Pods waiting for a node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pending {
    /// Pods pending for Quartermaster (`quartermaster_pods_pending`: waiting, or nominated to a
    /// node that is not there yet).
    pub pods: i64,
    /// Pods the engine waits to place (a ProvisioningRequest's stand-in pods included).
    pub waiting: usize,
    /// The first of those, with their reasons.
    pub shown: Vec<PendingPod>,
}

/// What the page shows at `now`.
pub fn status(ctx: &Context, now: DateTime<Utc>) -> Status {
    let claims = ctx.stores.node_claims.state();
    let (nodes, pods) = usage(&claims, &ctx.stores.pods.state(), &ctx.catalog);
    let cost = fleet_cost(&nodes, &pods, now);
    let mut groups: BTreeMap<(String, String, String), FleetGroup> = BTreeMap::new();
    let mut running = 0;
    for n in &cost.nodes {
        if n.started_at > now || n.ended_at.is_some_and(|e| e <= now) {
            continue;
        }
        running += 1;
        let g = groups
            .entry((
                n.nodepool.clone(),
                n.instance_type.clone(),
                n.capacity_type.clone(),
            ))
            .or_insert_with(|| FleetGroup {
                nodepool: n.nodepool.clone(),
                instance_type: n.instance_type.clone(),
                capacity_type: n.capacity_type.clone(),
                accelerator: n.accelerator.clone(),
                accelerator_count: n.accelerator_count,
                nodes: 0,
                cost_per_hour: 0.0,
            });
        g.nodes += 1;
        g.cost_per_hour += n.price_per_hour;
    }
    let deleting = claims
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_some())
        .count();
    let launching = claims
        .iter()
        .filter(|c| {
            c.metadata.deletion_timestamp.is_none()
                && c.status.as_ref().is_none_or(|s| s.provider_id.is_none())
        })
        .count();
    let recorded = ctx.page.snapshot();
    Status {
        at: now,
        cluster: ctx.cluster_name.clone(),
        leader: ctx.leadership.is_leader(),
        last_pass: recorded.last_pass,
        fleet: Fleet {
            cost_per_hour: cost.cost_per_hour,
            cost_since_start: cost.cost_since_start,
            idle_cost_per_hour: cost.idle.cost_per_hour,
            nodes: running,
            launching,
            deleting,
            groups: groups.into_values().collect(),
        },
        pending: Pending {
            pods: ctx.metrics.pods_pending.get(),
            waiting: recorded.waiting,
            shown: recorded.shown,
        },
        decisions: recorded.decisions.into_iter().rev().collect(),
        cost_history: recorded.history.into_iter().collect(),
    }
}

/// `/`: the page.
pub async fn index(State(ctx): State<Arc<Context>>) -> Response {
    let page = render(&status(&ctx, ctx.clock.now()));
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            // Nothing but what the page carries inline: no script, no external asset.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; style-src 'unsafe-inline'",
            ),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        page,
    )
        .into_response()
}

/// `/status.json`: what the page shows, as JSON ([`Status`]).
pub async fn status_json(State(ctx): State<Arc<Context>>) -> Response {
    (
        [(header::CACHE_CONTROL, "no-store")],
        axum::Json(status(&ctx, ctx.clock.now())),
    )
        .into_response()
}
