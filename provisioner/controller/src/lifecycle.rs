//! NodeClaim lifecycle in the cluster: registration of a claim's Node (labels, taints,
//! finalizer, `quartermaster.dev/unregistered` removed), the NodeClaim and NodePool status
//! (server-side apply, written only when it changes), and the Kubernetes Events that tell a
//! human what was decided.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, ObjectReference, Taint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use quartermaster_cloud::{CloudError, Instance};
use quartermaster_engine::{ClaimView, DeleteReason, NodeView};
use quartermaster_policies::conditions::{
    CONDITION_INITIALIZED, CONDITION_LAUNCHED, CONDITION_READY, CONDITION_REGISTERED,
};
use quartermaster_policies::{NodeClaimStatus, NodePool, NodePoolStatus};
use quartermaster_solver::PodRef;
use serde_json::json;

use crate::context::Context;
use crate::driver::Driver;
use crate::launch::error_kind;
use crate::time::to_kube;
use crate::translate::{
    FINALIZER, LABEL_NODECLAIM, LABEL_NODEPOOL, TAINT_DISRUPTED, TAINT_UNREGISTERED,
};

/// What the controller last wrote, so it writes only changes.
#[derive(Debug, Default)]
pub struct Written {
    claims: BTreeMap<String, (NodeClaimStatus, DateTime<Utc>)>,
    pools: BTreeMap<String, (NodePoolStatus, DateTime<Utc>)>,
    created: BTreeSet<String>,
}

impl Written {
    /// Forgets a claim that is gone.
    pub fn forget(&mut self, claim: &str) {
        self.claims.remove(claim);
        self.created.remove(claim);
    }

    /// Whether this replica created `claim` (counted once).
    pub fn created(&self, claim: &str) -> bool {
        self.created.contains(claim)
    }

    /// Records that this replica created `claim`.
    pub fn mark_created(&mut self, claim: &str) {
        self.created.insert(claim.to_owned());
    }
}

/// Whether a node still needs its registration patch.
pub fn needs_registration(node: &Node) -> bool {
    let unregistered = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == TAINT_UNREGISTERED));
    let labelled = node
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(LABEL_NODEPOOL) && l.contains_key(LABEL_NODECLAIM));
    let finalized = node
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER);
    unregistered || !labelled || !finalized
}

/// A node view without the unregistered taint (registration removes it).
pub fn without_unregistered(mut view: NodeView) -> NodeView {
    view.taints.retain(|t| t.key != TAINT_UNREGISTERED);
    view
}

/// Which registration patch of a claim's node this is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// The first: the `Registered` event follows it, and `expected` (pending pods the engine
    /// nominated to the claim) get `status.nominatedNodeName` first.
    First {
        /// Pods to nominate to the node before it becomes schedulable.
        expected: Vec<quartermaster_solver::PodRef>,
    },
    /// Sent again (the watch still shows the node unregistered): no event.
    Again,
}

/// Registers a claim's node: labels it with the NodePool, claim, capacity type, zone and
/// instance labels, applies the template's taints and startup taints, removes the
/// unregistered taint and adds the termination finalizer. Returns the node as it will be.
pub fn register(
    ctx: &std::sync::Arc<Context>,
    claim: &ClaimView,
    node: &Node,
    pool: Option<&NodePool>,
    registration: Registration,
) -> Node {
    let mut node = node.clone();
    let labels = node.metadata.labels.get_or_insert_with(BTreeMap::new);
    for (k, v) in claim.labels.iter() {
        labels.entry(k.clone()).or_insert_with(|| v.clone());
    }
    labels.insert(LABEL_NODEPOOL.to_owned(), claim.node_pool.clone());
    labels.insert(LABEL_NODECLAIM.to_owned(), claim.name.clone());
    let spec = node.spec.get_or_insert_with(Default::default);
    let mut taints: Vec<Taint> = spec.taints.clone().unwrap_or_default();
    taints.retain(|t| t.key != TAINT_UNREGISTERED);
    if let Some(pool) = pool {
        let template = &pool.spec.template.spec;
        for t in template.taints.iter().chain(&template.startup_taints) {
            if !taints
                .iter()
                .any(|x| x.key == t.key && x.effect == t.effect)
            {
                taints.push(t.clone());
            }
        }
    }
    spec.taints = Some(taints.clone());
    let finalizers = node.metadata.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == FINALIZER) {
        finalizers.push(FINALIZER.to_owned());
    }
    let patch = json!({
        "metadata": {
            "labels": node.metadata.labels,
            "finalizers": node.metadata.finalizers,
        },
        "spec": {"taints": taints},
    });
    let name = node.metadata.name.clone().unwrap_or_default();
    let ctx2 = ctx.clone();
    let claim_name = claim.name.clone();
    ctx.spawn(async move {
        let announce = matches!(registration, Registration::First { .. });
        if let Registration::First { expected } = registration {
            // Best effort: a pod that went, or an old API server, changes nothing.
            let writes = expected
                .iter()
                .map(|p| ctx2.writer.nominate_pod(&p.namespace, &p.name, &name));
            for result in futures::future::join_all(writes).await {
                if let Err(e) = result {
                    tracing::debug!(node = %name, error = %e, "could not write nominatedNodeName");
                }
            }
        }
        match ctx2.writer.patch_node(&name, patch).await {
            Ok(()) if announce => {
                claim_event(&ctx2, &claim_name, false, "Registered", format!("Node {name} registered"))
                    .await;
            }
            Ok(()) => {}
            Err(e) => tracing::warn!(node = %name, error = %e, "registration patch failed; retried on the next pass"),
        }
    });
    node
}

/// Cordons (`true`) or uncordons a node for a disruption command. A cordon carries the
/// `quartermaster.dev/disrupted:NoSchedule` taint besides `spec.unschedulable`, so that a
/// restarted controller can tell its own cordons (of commands it no longer remembers) from a
/// user's, and lift them (`Driver::rebuild`).
pub fn cordon(ctx: &std::sync::Arc<Context>, node: String, on: bool) {
    let ctx2 = ctx.clone();
    ctx.spawn(async move {
        let ctx = ctx2;
        let current = ctx.stores.node(&node);
        let mut taints = current
            .and_then(|n| n.spec.clone())
            .and_then(|s| s.taints)
            .unwrap_or_default();
        taints.retain(|t| t.key != TAINT_DISRUPTED);
        if on {
            taints.push(Taint {
                key: TAINT_DISRUPTED.into(),
                effect: "NoSchedule".into(),
                ..Default::default()
            });
        }
        if let Err(e) = ctx
            .writer
            .patch_node(
                &node,
                json!({"spec": {"unschedulable": on, "taints": taints}}),
            )
            .await
        {
            tracing::warn!(node, error = %e, "cordon failed");
        }
    });
}

/// Whether `node` carries the cordon of a disruption command ([`cordon`]).
pub fn cordoned_for_disruption(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == TAINT_DISRUPTED))
}

fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    now: DateTime<Utc>,
) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: if status { "True" } else { "False" }.to_owned(),
        reason: reason.to_owned(),
        message,
        last_transition_time: to_kube(now),
        observed_generation: None,
    }
}

fn unknown(type_: &str, reason: &str, message: String, now: DateTime<Utc>) -> Condition {
    Condition {
        status: "Unknown".to_owned(),
        ..condition(type_, false, reason, message, now)
    }
}

/// The status a claim should have now.
pub fn claim_status(
    view: &ClaimView,
    launch_error: Option<&CloudError>,
    catalog: &quartermaster_pricing::Catalog,
    previous: Option<&NodeClaimStatus>,
    now: DateTime<Utc>,
) -> NodeClaimStatus {
    let mut conditions = Vec::new();
    conditions.push(match (&view.provider_id, launch_error) {
        (Some(id), _) => condition(
            CONDITION_LAUNCHED,
            true,
            "Launched",
            format!("instance {id}"),
            now,
        ),
        (None, Some(e)) => condition(
            CONDITION_LAUNCHED,
            false,
            error_kind(e),
            format!("{e}; trying the next offering or retrying"),
            now,
        ),
        (None, None) => unknown(
            CONDITION_LAUNCHED,
            "Launching",
            "launch requested".into(),
            now,
        ),
    });
    conditions.push(match &view.node_name {
        Some(n) => condition(
            CONDITION_REGISTERED,
            true,
            "Registered",
            format!("Node {n}"),
            now,
        ),
        None => unknown(
            CONDITION_REGISTERED,
            "AwaitingRegistration",
            "waiting for a Node with this providerID to join the cluster".into(),
            now,
        ),
    });
    let init = if view.initialized {
        condition(
            CONDITION_INITIALIZED,
            true,
            "Initialized",
            "requested resources are allocatable and startup taints are gone".into(),
            now,
        )
    } else if view.node_name.is_some() {
        unknown(
            CONDITION_INITIALIZED,
            "AwaitingInitialization",
            "waiting for the requested extended resources (GPUs) to be allocatable and startup taints to be removed; check the device plugin on the node".into(),
            now,
        )
    } else {
        unknown(
            CONDITION_INITIALIZED,
            "AwaitingRegistration",
            "not registered yet".into(),
            now,
        )
    };
    conditions.push(init);
    conditions.push(if view.initialized {
        condition(CONDITION_READY, true, "Ready", String::new(), now)
    } else {
        unknown(
            CONDITION_READY,
            "NotInitialized",
            "the node is not initialized yet".into(),
            now,
        )
    });
    // Keep transition times of conditions whose status did not change.
    if let Some(previous) = previous {
        for c in &mut conditions {
            if let Some(p) = previous.conditions.iter().find(|p| p.type_ == c.type_)
                && p.status == c.status
                && p.reason == c.reason
            {
                c.last_transition_time = p.last_transition_time.clone();
            }
        }
    }
    let it = catalog.get(view.cloud, &view.offering.instance_type);
    let quantities = |m: Option<BTreeMap<String, u64>>| -> BTreeMap<String, Quantity> {
        m.unwrap_or_default()
            .into_iter()
            .map(|(k, v)| {
                let q = match k.as_str() {
                    "cpu" => format!("{v}m"),
                    _ => v.to_string(),
                };
                (k, Quantity(q))
            })
            .collect()
    };
    NodeClaimStatus {
        provider_id: view.provider_id.clone(),
        node_name: view.node_name.clone(),
        instance_type: Some(view.offering.instance_type.clone()),
        zone: Some(view.offering.zone.clone()),
        capacity_type: Some(view.offering.capacity_type.to_string()),
        price_per_hour: Some(view.offering.price_per_hour),
        capacity: quantities(it.map(|i| i.capacity())),
        allocatable: quantities(it.map(|i| i.allocatable())),
        image_id: previous.and_then(|p| p.image_id.clone()),
        conditions,
    }
}

fn same_ignoring_times(a: &NodeClaimStatus, b: &NodeClaimStatus) -> bool {
    let strip = |s: &NodeClaimStatus| {
        let mut s = s.clone();
        for c in &mut s.conditions {
            c.last_transition_time = to_kube(DateTime::<Utc>::UNIX_EPOCH);
        }
        s
    };
    strip(a) == strip(b)
}

/// A status written this long ago that the store still does not show is written again (the
/// write failed, or lost a race).
const REWRITE_AFTER: chrono::TimeDelta = chrono::TimeDelta::seconds(15);

/// Writes NodeClaim and NodePool statuses that changed.
pub fn sync_status(driver: &mut Driver, now: DateTime<Utc>) {
    let ctx = driver.ctx().clone();
    let in_store: BTreeMap<String, std::sync::Arc<quartermaster_policies::NodeClaim>> = ctx
        .stores
        .node_claims
        .state()
        .into_iter()
        .filter_map(|c| Some((c.metadata.name.clone()?, c)))
        .collect();
    let views = driver.claims();
    for view in &views {
        let Some(object) = in_store.get(&view.name) else {
            continue;
        };
        if object.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let previous = object.status.as_ref();
        let desired = claim_status(
            view,
            driver.launch_error(&view.name),
            &ctx.catalog,
            previous,
            now,
        );
        if previous.is_some_and(|p| same_ignoring_times(p, &desired))
            || driver
                .written
                .claims
                .get(&view.name)
                .is_some_and(|(w, at)| {
                    same_ignoring_times(w, &desired) && now - *at < REWRITE_AFTER
                })
        {
            continue;
        }
        driver
            .written
            .claims
            .insert(view.name.clone(), (desired.clone(), now));
        let ctx2 = ctx.clone();
        let name = view.name.clone();
        ctx.spawn(async move {
            if let Err(e) = ctx2.writer.apply_claim_status(&name, &desired).await {
                tracing::warn!(nodeclaim = %name, error = %e, "status write failed; retried on the next pass");
            }
        });
    }
    sync_pools(driver, &views, now);
}

fn sync_pools(driver: &mut Driver, views: &[ClaimView], now: DateTime<Utc>) {
    let ctx = driver.ctx().clone();
    let classes: BTreeSet<(String, String)> = ctx
        .stores
        .aws_node_classes
        .state()
        .iter()
        .map(|c| {
            (
                "AWSNodeClass".to_owned(),
                c.metadata.name.clone().unwrap_or_default(),
            )
        })
        .chain(ctx.stores.gcp_node_classes.state().iter().map(|c| {
            (
                "GCPNodeClass".to_owned(),
                c.metadata.name.clone().unwrap_or_default(),
            )
        }))
        .chain(ctx.stores.azure_node_classes.state().iter().map(|c| {
            (
                "AzureNodeClass".to_owned(),
                c.metadata.name.clone().unwrap_or_default(),
            )
        }))
        .collect();
    for pool in ctx.stores.node_pools.state() {
        let Some(name) = pool.metadata.name.clone() else {
            continue;
        };
        let mine: Vec<&ClaimView> = views.iter().filter(|v| v.node_pool == name).collect();
        let mut totals: BTreeMap<String, u64> = BTreeMap::new();
        let mut cost = 0.0;
        for v in &mine {
            cost += v.offering.price_per_hour;
            if let Some(it) = ctx.catalog.get(v.cloud, &v.offering.instance_type) {
                for (k, q) in it.capacity() {
                    *totals.entry(k).or_default() += q;
                }
            }
        }
        *totals.entry("nodes".into()).or_default() += mine.len() as u64;
        let resources: BTreeMap<String, Quantity> = totals
            .into_iter()
            .map(|(k, v)| {
                let q = if k == "cpu" {
                    format!("{v}m")
                } else {
                    v.to_string()
                };
                (k, Quantity(q))
            })
            .collect();
        let class_ref = pool.node_class_ref();
        let class_kind = if class_ref.kind == "EC2NodeClass" {
            "AWSNodeClass".to_owned()
        } else {
            class_ref.kind.clone()
        };
        let class_ok = classes.contains(&(class_kind, class_ref.name.clone()));
        let mut conditions = vec![if class_ok {
            condition(CONDITION_READY, true, "Ready", String::new(), now)
        } else {
            condition(
                CONDITION_READY,
                false,
                "NodeClassNotFound",
                format!(
                    "{} {} does not exist; create it or fix spec.template.spec.nodeClassRef",
                    class_ref.kind, class_ref.name
                ),
                now,
            )
        }];
        let limit = limit_reached(&pool, &mine, cost, &ctx.catalog);
        conditions.push(match &limit {
            Some(why) => condition("LimitReached", true, "LimitReached", why.clone(), now),
            None => condition("LimitReached", false, "WithinLimits", String::new(), now),
        });
        let previous = pool.status.clone().unwrap_or_default();
        for c in &mut conditions {
            if let Some(p) = previous.conditions.iter().find(|p| p.type_ == c.type_)
                && p.status == c.status
                && p.reason == c.reason
            {
                c.last_transition_time = p.last_transition_time.clone();
            }
        }
        let desired = NodePoolStatus {
            conditions,
            resources,
            hourly_cost: Some((cost * 1e6).round() / 1e6),
            node_class_observed_generation: previous.node_class_observed_generation,
        };
        if previous == desired
            || driver
                .written
                .pools
                .get(&name)
                .is_some_and(|(w, at)| *w == desired && now - *at < REWRITE_AFTER)
        {
            continue;
        }
        driver
            .written
            .pools
            .insert(name.clone(), (desired.clone(), now));
        let ctx2 = ctx.clone();
        ctx.spawn(async move {
            if let Err(e) = ctx2.writer.apply_pool_status(&name, &desired).await {
                tracing::warn!(nodepool = %name, error = %e, "status write failed");
            }
        });
    }
}

/// Why a pool cannot grow, if it cannot: `limits` (resources, nodes) or `maxHourlyCost`.
fn limit_reached(
    pool: &NodePool,
    claims: &[&ClaimView],
    cost: f64,
    catalog: &quartermaster_pricing::Catalog,
) -> Option<String> {
    let limits = pool.limits().ok()?;
    if let Some(max) = limits.max_hourly_cost
        && cost >= max
    {
        return Some(format!("maxHourlyCost ${max:.2}/h reached (${cost:.2}/h)"));
    }
    let mut usage = quartermaster_policies::Usage::default();
    for c in claims {
        if let Some(it) = catalog.get(c.cloud, &c.offering.instance_type) {
            for (k, v) in it.capacity() {
                let millis = if k == "cpu" {
                    i128::from(v)
                } else {
                    i128::from(v) * 1000
                };
                let e = usage
                    .resources
                    .entry(k)
                    .or_insert(quartermaster_policies::Millis::ZERO);
                *e = e.saturating_add(quartermaster_policies::Millis::from_millis(millis));
            }
        }
    }
    usage.nodes = claims.len() as u64;
    usage.hourly_cost = cost;
    if let Some(e) = limits.exceeded_by(&usage) {
        return Some(e.to_string());
    }
    if let Some(n) = limits.nodes
        && usage.nodes >= n
    {
        return Some(format!("nodes: {} of {n} in use", usage.nodes));
    }
    limits
        .remaining(&usage)
        .into_iter()
        .find(|(_, left)| *left <= quartermaster_policies::Millis::ZERO)
        .map(|(k, _)| format!("{k}: the limit is used up"))
}

// ---------------------------------------------------------------------- events

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

async fn claim_event(ctx: &Context, claim: &str, warning: bool, reason: &str, note: String) {
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

/// `Nominated` on each pod the engine expects on a new claim.
pub fn nominated_events(driver: &Driver, claim: &str) {
    let Some(engine) = driver.engine() else {
        return;
    };
    let ctx = driver.ctx();
    let nominated: Vec<PodRef> = driver
        .ctx()
        .stores
        .pods
        .state()
        .iter()
        .map(|p| {
            PodRef::new(
                p.metadata.namespace.as_deref().unwrap_or("default"),
                p.metadata.name.as_deref().unwrap_or_default(),
            )
        })
        .filter(|id| engine.placement(id) == Some(claim))
        .collect();
    for id in nominated {
        spawn_event(
            ctx,
            pod_ref(ctx, &id),
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
        .get_or_create(&vec![("condition", condition)])
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
            .get_or_create(&vec![("condition", condition)])
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
