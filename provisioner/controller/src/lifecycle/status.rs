//! NodeClaim and NodePool status, by server-side apply, written only when it changes.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use quartermaster_cloud::CloudError;
use quartermaster_engine::ClaimView;
use quartermaster_policies::conditions::{
    CONDITION_INITIALIZED, CONDITION_LAUNCHED, CONDITION_READY, CONDITION_REGISTERED,
};
use quartermaster_policies::{NodeClaimStatus, NodePool, NodePoolStatus};

use crate::driver::Driver;
use crate::launch::error_kind;
use crate::time::to_kube;

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

/// Whether two statuses say the same, but for when their conditions last changed. Compared in
/// place (a pass compares every claim's status): the destructuring makes a field added to
/// `NodeClaimStatus` or `Condition` fail to compile here until it is compared too.
fn same_ignoring_times(a: &NodeClaimStatus, b: &NodeClaimStatus) -> bool {
    let NodeClaimStatus {
        provider_id,
        node_name,
        instance_type,
        zone,
        capacity_type,
        price_per_hour,
        capacity,
        allocatable,
        image_id,
        conditions,
    } = a;
    let same_condition = |x: &Condition, y: &Condition| {
        let Condition {
            last_transition_time: _,
            message,
            observed_generation,
            reason,
            status,
            type_,
        } = x;
        *type_ == y.type_
            && *status == y.status
            && *reason == y.reason
            && *message == y.message
            && *observed_generation == y.observed_generation
    };
    *provider_id == b.provider_id
        && *node_name == b.node_name
        && *instance_type == b.instance_type
        && *zone == b.zone
        && *capacity_type == b.capacity_type
        && *price_per_hour == b.price_per_hour
        && *capacity == b.capacity
        && *allocatable == b.allocatable
        && *image_id == b.image_id
        && conditions.len() == b.conditions.len()
        && conditions
            .iter()
            .zip(&b.conditions)
            .all(|(x, y)| same_condition(x, y))
}

/// A status written this long ago that the store still does not show is written again (the
/// write failed, or lost a race).
const REWRITE_AFTER: chrono::TimeDelta = chrono::TimeDelta::seconds(15);

/// Writes NodeClaim and NodePool statuses that changed; true when one was written now or
/// earlier and the store does not show it yet.
pub fn sync_status(driver: &mut Driver, now: DateTime<Utc>) -> bool {
    let mut unsettled = false;
    let ctx = driver.ctx().clone();
    let views = driver.claims();
    for view in &views {
        let Some(object) = ctx.stores.node_claim(&view.name) else {
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
        if previous.is_some_and(|p| same_ignoring_times(p, &desired)) {
            continue;
        }
        // Written now, or written and not shown by the store yet.
        unsettled = true;
        if driver
            .written
            .claims
            .get(&view.name)
            .is_some_and(|(w, at)| same_ignoring_times(w, &desired) && now - *at < REWRITE_AFTER)
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
    sync_pools(driver, &views, now) || unsettled
}

/// Writes the NodePool statuses that changed; true as [`sync_status`].
fn sync_pools(driver: &mut Driver, views: &[ClaimView], now: DateTime<Utc>) -> bool {
    let mut unsettled = false;
    let ctx = driver.ctx().clone();
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
        let class_ok = match class_kind.as_str() {
            "AWSNodeClass" => ctx.stores.aws_node_class(&class_ref.name).is_some(),
            "GCPNodeClass" => ctx.stores.gcp_node_class(&class_ref.name).is_some(),
            "AzureNodeClass" => ctx.stores.azure_node_class(&class_ref.name).is_some(),
            _ => false,
        };
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
        if previous == desired {
            continue;
        }
        unsettled = true;
        if driver
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
    unsettled
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

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

    use super::*;

    fn condition(type_: &str, status: &str, reason: &str, at_second: i64) -> Condition {
        Condition {
            last_transition_time: to_kube(
                DateTime::<Utc>::from_timestamp(at_second, 0).expect("a time"),
            ),
            message: format!("{type_} is {status}"),
            observed_generation: Some(1),
            reason: reason.to_owned(),
            status: status.to_owned(),
            type_: type_.to_owned(),
        }
    }

    fn status(conditions: Vec<Condition>) -> NodeClaimStatus {
        NodeClaimStatus {
            provider_id: Some("kwok://n1".into()),
            node_name: Some("n1".into()),
            instance_type: Some("g6.xlarge".into()),
            zone: Some("us-east-1a".into()),
            capacity_type: Some("on-demand".into()),
            price_per_hour: Some(0.805),
            capacity: BTreeMap::from([("cpu".into(), Quantity("4".into()))]),
            allocatable: BTreeMap::from([("cpu".into(), Quantity("3920m".into()))]),
            image_id: None,
            conditions,
        }
    }

    #[test]
    fn statuses_are_the_same_whatever_their_conditions_transition_times_but_nothing_else() {
        let base = status(vec![
            condition("Launched", "True", "Launched", 10),
            condition("Registered", "True", "Registered", 20),
        ]);
        let later = status(vec![
            condition("Launched", "True", "Launched", 99),
            condition("Registered", "True", "Registered", 98),
        ]);
        assert!(same_ignoring_times(&base, &later));
        let mut other_reason = later.clone();
        other_reason.conditions[1].reason = "NotRegistered".into();
        assert!(!same_ignoring_times(&base, &other_reason));
        let mut other_message = later.clone();
        other_message.conditions[0].message = "other".into();
        assert!(!same_ignoring_times(&base, &other_message));
        let mut fewer = later.clone();
        fewer.conditions.pop();
        assert!(!same_ignoring_times(&base, &fewer));
        let mut other_allocatable = later.clone();
        other_allocatable
            .allocatable
            .insert("nvidia.com/gpu".into(), Quantity("1".into()));
        assert!(!same_ignoring_times(&base, &other_allocatable));
        let mut other_node = later;
        other_node.node_name = Some("n2".into());
        assert!(!same_ignoring_times(&base, &other_node));
    }
}
