//! What the stores hold, in the engine's terms. Pure functions over Kubernetes objects: no
//! client, no clock, so every rule here is tested by feeding objects directly.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, Pod as KubePod};
use quartermaster_cluster::{ClusterError, SnapshotOptions, snapshot};
use quartermaster_engine::{EngineSetup, FoundClaim, NodeCondition, NodeView, PoolPolicy};
use quartermaster_policies::labels::{LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE};
use quartermaster_policies::quantity::parse_quantity;
use quartermaster_policies::{NodeClaim, NodePool};
use quartermaster_pricing::{CapacityType, Catalog};
use quartermaster_solver::pod::{Taint, TaintEffect};
use quartermaster_solver::{OfferingChoice, Pod, PodRef, ResourceTable, Resources};
use serde_json::Value;

use crate::pod_readings::{PodReadings, Reading};
use crate::time::from_kube;

/// The NodeClaim label naming its NodePool (also on its Node).
pub const LABEL_NODEPOOL: &str = quartermaster_policies::labels::LABEL_NODEPOOL;
/// The Node label naming the NodeClaim it was launched for.
pub const LABEL_NODECLAIM: &str = "quartermaster.dev/nodeclaim";
/// The NodeClaim annotation holding the price the plan assumed, dollars per hour.
pub const ANNOTATION_PRICE: &str = "quartermaster.dev/price-per-hour";
/// The finalizer on NodeClaims and Nodes: the instance is deleted before they go.
pub const FINALIZER: &str = "quartermaster.dev/termination";
/// The taint a node registers with (from its user data); removed at registration.
pub const TAINT_UNREGISTERED: &str = "quartermaster.dev/unregistered";
/// The taint on a node that is going away.
pub const TAINT_DISRUPTED: &str = "quartermaster.dev/disrupted";

/// A pod the engine should know about, and where it is.
#[derive(Debug, Clone, PartialEq)]
pub struct ObservedPod {
    /// The solver's pod (shared with the pass's readings, see [`PodReadings`]).
    pub pod: std::sync::Arc<Pod>,
    /// `None` while it waits for a place; the node it is bound to otherwise.
    pub node: Option<String>,
    /// When the pod was created (pending time is measured from here).
    pub created_at: Option<DateTime<Utc>>,
}

/// One look at the stores: the engine's setup and the pods it should know.
#[derive(Debug, Clone)]
pub struct Observed {
    /// Resource table, NodePools and DaemonSets as the engine is built from them.
    pub setup: EngineSetup,
    /// Pods that wait for a place or run on a Quartermaster node, by id.
    pub pods: BTreeMap<PodRef, ObservedPod>,
    /// Objects that could not be read, with the reason (`Kind/namespace/name: field: reason`).
    pub rejected: Vec<(String, String)>,
    /// What the engine's setup depends on, to tell whether it must be rebuilt.
    pub fingerprint: String,
    /// ProvisioningRequests with their pods (those the engine places are among `pods`).
    pub provisioning_requests: Vec<quartermaster_cluster::provisioning_request::RequestPods>,
    /// CapacityBuffers with their chunk and count (the engine keeps room for them).
    pub capacity_buffers: Vec<quartermaster_cluster::capacity_buffer::BufferPods>,
}

/// Whether the kube-scheduler gave up on `pod` for want of a node: unbound, `PodScheduled=False`
/// with reason `Unschedulable`, not owned by a DaemonSet, not being deleted, not finished.
pub fn is_provisionable(pod: &KubePod) -> bool {
    if pod.metadata.deletion_timestamp.is_some() {
        return false;
    }
    let spec_bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if spec_bound || is_finished(pod) {
        return false;
    }
    if pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet" && o.controller == Some(true))
    {
        return false;
    }
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| {
            c.type_ == "PodScheduled"
                && c.status == "False"
                && c.reason.as_deref() == Some("Unschedulable")
        })
}

/// Whether the pod has finished (phase `Succeeded` or `Failed`).
pub fn is_finished(pod: &KubePod) -> bool {
    matches!(
        pod.status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Succeeded" | "Failed")
    )
}

/// The node a pod is bound to.
pub fn bound_node(pod: &KubePod) -> Option<&str> {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .filter(|n| !n.is_empty())
}

/// Whether a pod is owned by a DaemonSet (never evicted, never counted as a workload).
pub fn is_daemon_pod(pod: &KubePod) -> bool {
    pod.metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == "DaemonSet")
}

/// Reads the stores' objects into the engine's terms.
///
/// `our_nodes` names the nodes of Quartermaster's NodeClaims: pods bound to them are reported
/// (so the engine knows what each node holds); pods on other nodes are not. `resources` is the
/// table of the engine in use: its slots are kept, new names are appended. Objects that cannot
/// be read are left out and listed in [`Observed::rejected`]; they never stop the others.
/// `region` is the cluster's (`--region`): NodePools whose NodeClass names no region buy there
/// (see [`quartermaster_cluster::SnapshotOptions::region`]).
#[allow(clippy::too_many_arguments)]
pub fn observe(
    pods: &[std::sync::Arc<KubePod>],
    our_nodes: &std::collections::BTreeSet<String>,
    node_pools: &[std::sync::Arc<NodePool>],
    node_classes: Vec<Value>,
    daemon_sets: Vec<Value>,
    catalog: &Catalog,
    resources: &ResourceTable,
    region: Option<&str>,
) -> Observed {
    observe_with_requests(
        pods,
        our_nodes,
        node_pools,
        node_classes,
        daemon_sets,
        Vec::new(),
        catalog,
        resources,
        region,
    )
}

/// [`observe`] with ProvisioningRequests and PodTemplates (`requests`, as objects): their pods
/// join the pending pods and [`Observed::provisioning_requests`] lists them. Gang PodGroups
/// (Volcano's and coscheduling's, see [`crate::pod_groups`]) go in `requests` too: the pending
/// pods that name one form a gang of its `spec.minMember`.
#[allow(clippy::too_many_arguments)]
pub fn observe_with_requests(
    pods: &[std::sync::Arc<KubePod>],
    our_nodes: &std::collections::BTreeSet<String>,
    node_pools: &[std::sync::Arc<NodePool>],
    node_classes: Vec<Value>,
    daemon_sets: Vec<Value>,
    requests: Vec<Value>,
    catalog: &Catalog,
    resources: &ResourceTable,
    region: Option<&str>,
) -> Observed {
    observe_with_readings(
        pods,
        our_nodes,
        node_pools,
        node_classes,
        daemon_sets,
        requests,
        catalog,
        resources,
        region,
        &mut PodReadings::default(),
    )
}

/// [`observe_with_requests`], reading again only the pods that changed since `readings` last
/// saw them (see [`PodReadings`]); the result is the same as reading every pod.
#[allow(clippy::too_many_arguments)]
pub fn observe_with_readings(
    pods: &[std::sync::Arc<KubePod>],
    our_nodes: &std::collections::BTreeSet<String>,
    node_pools: &[std::sync::Arc<NodePool>],
    node_classes: Vec<Value>,
    daemon_sets: Vec<Value>,
    requests: Vec<Value>,
    catalog: &Catalog,
    resources: &ResourceTable,
    region: Option<&str>,
    readings: &mut PodReadings,
) -> Observed {
    readings.use_context(format!(
        "{}|{}",
        table_names(resources),
        region.unwrap_or_default()
    ));
    let mut sorted: Vec<&KubePod> = pods.iter().map(|p| p.as_ref()).collect();
    sorted.sort_by(|a, b| {
        (&a.metadata.namespace, &a.metadata.name).cmp(&(&b.metadata.namespace, &b.metadata.name))
    });
    // Read pods one by one where they can be (kept across passes); if one needs a resource the
    // table lacks, read every pod together so the table grows in one order.
    let mut read = read_pods(
        &sorted,
        our_nodes,
        catalog,
        resources,
        region,
        Some(readings),
    );
    if read.is_none() {
        read = read_pods(&sorted, our_nodes, catalog, resources, region, None);
    }
    let ReadPods {
        mut objects,
        mut where_bound,
        alone,
        mut rejected,
    } = read.unwrap_or_default();
    let mut pool_values = Vec::new();
    for pool in node_pools {
        if let Ok(v) = serde_json::to_value(pool.as_ref()) {
            pool_values.push(v);
        }
    }
    // Stores list objects in no set order: sorted, the fingerprint changes only when they do
    // (else the engine is rebuilt, and its batch window restarted, on a mere reordering).
    let by_identity = |v: &Value| {
        (
            v["kind"].to_string(),
            v["metadata"]["namespace"].to_string(),
            v["metadata"]["name"].to_string(),
        )
    };
    pool_values.sort_by_key(by_identity);
    let mut node_classes = node_classes;
    node_classes.sort_by_key(by_identity);
    let mut daemon_sets = daemon_sets;
    daemon_sets.sort_by_key(by_identity);
    let fingerprint = format!(
        "{}|{}|{}",
        serde_json::to_string(&pool_values.iter().map(|v| &v["spec"]).collect::<Vec<_>>())
            .unwrap_or_default(),
        serde_json::to_string(
            &node_classes
                .iter()
                .map(|v| (&v["kind"], &v["metadata"]["name"], &v["spec"]))
                .collect::<Vec<_>>()
        )
        .unwrap_or_default(),
        serde_json::to_string(
            &daemon_sets
                .iter()
                .map(|v| (
                    &v["metadata"]["namespace"],
                    &v["metadata"]["name"],
                    &v["spec"]
                ))
                .collect::<Vec<_>>()
        )
        .unwrap_or_default(),
    );
    objects.extend(pool_values);
    objects.extend(node_classes);
    objects.extend(daemon_sets);
    objects.extend(requests);

    let ingested = loop {
        let options = SnapshotOptions::priced(catalog)
            .with_resources(resources.clone())
            .in_region(region);
        match snapshot(&objects, options) {
            Ok(ingested) => break Some(ingested),
            Err(e) => {
                let (object, index) = match &e {
                    ClusterError::Invalid { object, .. }
                    | ClusterError::TooManyResources { object, .. } => {
                        (object.clone(), position(&objects, object))
                    }
                    ClusterError::Unidentified { index, .. } => {
                        (format!("object {index}"), index.checked_sub(1))
                    }
                };
                rejected.push((object, e.to_string()));
                match index {
                    Some(i) if i < objects.len() => {
                        objects.remove(i);
                    }
                    _ => break None,
                }
            }
        }
    };
    let Some(ingested) = ingested else {
        return Observed {
            setup: EngineSetup {
                resources: resources.clone(),
                pools: Vec::new(),
                daemonsets: Vec::new(),
                catalog: catalog.clone(),
            },
            pods: BTreeMap::new(),
            rejected,
            fingerprint,
            provisioning_requests: Vec::new(),
            capacity_buffers: Vec::new(),
        };
    };
    let snapshot = ingested.snapshot;
    let mut pools = Vec::new();
    for spec in snapshot.node_pools {
        let Some(typed) = node_pools
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(spec.name.as_str()))
        else {
            continue;
        };
        let name = spec.name.clone();
        match PoolPolicy::new(spec, typed.as_ref().clone()) {
            Ok(policy) => pools.push(policy),
            Err(e) => rejected.push((format!("NodePool/{name}"), e.to_string())),
        }
    }
    let mut observed_pods = BTreeMap::new();
    let all = snapshot
        .pending
        .into_iter()
        .map(std::sync::Arc::new)
        .chain(alone);
    for pod in all {
        let (node, created_at) = where_bound.remove(&pod.id).unwrap_or_default();
        observed_pods.insert(
            pod.id.clone(),
            ObservedPod {
                pod,
                node,
                created_at,
            },
        );
    }
    let fingerprint = format!("{fingerprint}|{}", table_names(&snapshot.resources));
    Observed {
        setup: EngineSetup {
            resources: snapshot.resources,
            pools,
            daemonsets: snapshot.daemonsets,
            catalog: catalog.clone(),
        },
        pods: observed_pods,
        rejected,
        fingerprint,
        provisioning_requests: ingested.provisioning_requests,
        capacity_buffers: ingested.capacity_buffers,
    }
}

/// The pods of one look: the objects still to read with the others, where each is bound, the
/// pods read on their own, and the objects left out.
#[derive(Default)]
struct ReadPods {
    objects: Vec<Value>,
    where_bound: BTreeMap<PodRef, (Option<String>, Option<DateTime<Utc>>)>,
    alone: Vec<std::sync::Arc<Pod>>,
    rejected: Vec<(String, String)>,
}

/// Sorts the wanted pods into those read on their own (through `readings`, when given) and the
/// objects read together; `None` when one needs a resource the table lacks.
fn read_pods(
    sorted: &[&KubePod],
    our_nodes: &std::collections::BTreeSet<String>,
    catalog: &Catalog,
    resources: &ResourceTable,
    region: Option<&str>,
    mut readings: Option<&mut PodReadings>,
) -> Option<ReadPods> {
    let mut out = ReadPods::default();
    let mut seen = std::collections::BTreeSet::new();
    for pod in sorted {
        let node = bound_node(pod);
        let wanted = match node {
            Some(n) => {
                our_nodes.contains(n)
                    && pod.metadata.deletion_timestamp.is_none()
                    && !is_finished(pod)
                    && !is_daemon_pod(pod)
            }
            None => is_provisionable(pod),
        };
        if !wanted {
            continue;
        }
        let id = PodRef::new(
            pod.metadata.namespace.as_deref().unwrap_or("default"),
            pod.metadata.name.as_deref().unwrap_or_default(),
        );
        out.where_bound.insert(
            id.clone(),
            (
                node.map(str::to_owned),
                pod.metadata.creation_timestamp.as_ref().map(from_kube),
            ),
        );
        match readings.as_deref_mut() {
            Some(readings) if PodReadings::standalone(pod) => {
                let reading = readings.read(
                    &id,
                    &crate::pod_readings::version(pod),
                    || pod_object(pod, node.is_some()),
                    catalog,
                    resources,
                    region,
                )?;
                seen.insert(id);
                match reading {
                    Reading::Pod(p) => out.alone.push(p),
                    Reading::Skipped => {}
                    Reading::Rejected { object, reason } => out.rejected.push((object, reason)),
                }
            }
            _ => {
                if let Some(value) = pod_object(pod, node.is_some()) {
                    out.objects.push(value);
                }
            }
        }
    }
    if let Some(readings) = readings {
        readings.retain(&seen);
    }
    Some(out)
}

/// A pod as the snapshot reads it: requests, constraints and identity, with where it runs kept
/// aside (the snapshot would read a bound pod as a node's load) and no status (which could make
/// it "finished").
fn pod_object(pod: &KubePod, bound: bool) -> Option<Value> {
    let mut value = serde_json::to_value(pod).ok()?;
    value["apiVersion"] = Value::from("v1");
    value["kind"] = Value::from("Pod");
    if let Some(spec) = value.get_mut("spec").and_then(Value::as_object_mut) {
        spec.remove("nodeName");
    }
    if bound {
        quartermaster_cluster::provisioning_request::mark_bound_consumer(&mut value);
    }
    if let Some(obj) = value.as_object_mut() {
        obj.remove("status");
    }
    Some(value)
}

fn position(objects: &[Value], id: &str) -> Option<usize> {
    objects.iter().position(|v| {
        let kind = v["kind"].as_str().unwrap_or_default();
        let name = v["metadata"]["name"].as_str().unwrap_or_default();
        match v["metadata"]["namespace"].as_str() {
            Some(ns) => id == format!("{kind}/{ns}/{name}") || id == format!("{kind}/{name}"),
            None => id == format!("{kind}/{name}") || id == format!("{kind}/default/{name}"),
        }
    })
}

/// The resource names of a table, in slot order.
pub fn table_names(table: &ResourceTable) -> String {
    (0..table.len())
        .map(|i| table.name(i))
        .collect::<Vec<_>>()
        .join(",")
}

/// A Node as the engine sees it (labels, taints, allocatable in the engine's units).
pub fn node_view(node: &Node, table: &ResourceTable) -> NodeView {
    let mut allocatable = Resources::ZERO;
    if let Some(alloc) = node.status.as_ref().and_then(|s| s.allocatable.as_ref()) {
        for (name, q) in alloc {
            let (Some(slot), Ok(m)) = (table.slot(name), parse_quantity(&q.0)) else {
                continue;
            };
            let v = if name == "cpu" {
                m.millis()
            } else {
                m.to_whole_floor()
            };
            allocatable.set(slot, i64::try_from(v.max(0)).unwrap_or(i64::MAX));
        }
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|t| {
            Some(Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect: TaintEffect::parse(&t.effect)?,
            })
        })
        .collect();
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|c| NodeCondition {
            kind: c.type_.clone(),
            status: c.status.clone(),
            since: c.last_transition_time.as_ref().map(from_kube),
            reason: c.reason.clone(),
        })
        .collect();
    NodeView {
        name: node.metadata.name.clone().unwrap_or_default(),
        labels: node.metadata.labels.clone().unwrap_or_default(),
        taints,
        allocatable,
        conditions,
    }
}

/// The offering a NodeClaim records: from its status once launched, from the labels and price
/// annotation it was created with before that.
pub fn claim_offering(claim: &NodeClaim) -> Option<OfferingChoice> {
    let labels = claim.metadata.labels.clone().unwrap_or_default();
    let status = claim.status.as_ref();
    let instance_type = status
        .and_then(|s| s.instance_type.clone())
        .or_else(|| labels.get(LABEL_INSTANCE_TYPE).cloned())?;
    let zone = status
        .and_then(|s| s.zone.clone())
        .or_else(|| labels.get(LABEL_ZONE).cloned())?;
    let capacity_type: CapacityType = status
        .and_then(|s| s.capacity_type.clone())
        .or_else(|| labels.get(LABEL_CAPACITY_TYPE).cloned())?
        .parse()
        .ok()?;
    let price_per_hour = status
        .and_then(|s| s.price_per_hour)
        .or_else(|| {
            claim
                .metadata
                .annotations
                .as_ref()?
                .get(ANNOTATION_PRICE)?
                .parse()
                .ok()
        })
        .unwrap_or(0.0);
    Some(OfferingChoice {
        instance_type,
        zone,
        capacity_type,
        price_per_hour,
    })
}

/// A NodeClaim in the cluster, as the engine adopts it. `node` is its registered Node, if any.
pub fn found_claim(claim: &NodeClaim, node: Option<NodeView>) -> Option<FoundClaim> {
    let name = claim.metadata.name.clone()?;
    let node_pool = claim.metadata.labels.as_ref()?.get(LABEL_NODEPOOL)?.clone();
    let offering = claim_offering(claim)?;
    let status = claim.status.as_ref();
    let condition_time = |type_: &str| {
        status?
            .conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
            .map(|c| from_kube(&c.last_transition_time))
    };
    let created_at = claim
        .metadata
        .creation_timestamp
        .as_ref()
        .map(from_kube)
        .unwrap_or_default();
    let node = node.filter(|_| status.and_then(|s| s.node_name.as_ref()).is_some());
    Some(FoundClaim {
        name,
        node_pool,
        offering,
        created_at,
        provider_id: status.and_then(|s| s.provider_id.clone()),
        launched_at: condition_time("Launched"),
        registered_at: node.as_ref().and(condition_time("Registered")),
        initialized_at: node.as_ref().and(condition_time("Initialized")),
        node,
        deleting: claim.metadata.deletion_timestamp.is_some(),
        template_hash: claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(quartermaster_engine::TEMPLATE_HASH_LABEL))
            .cloned(),
        gang: claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(quartermaster_engine::GANG_LABEL))
            .cloned(),
    })
}

/// Whether an object's annotations ask for no voluntary disruption (`quartermaster.dev/` or
/// `karpenter.sh/do-not-disrupt: "true"`).
pub fn annotated_do_not_disrupt(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(quartermaster_engine::do_not_disrupt)
}

/// A PodDisruptionBudget as the engine weighs voluntary disruption: its selector as
/// requirements and `status.disruptionsAllowed` (0 until the PDB controller computed it). A
/// selector the engine cannot read selects every pod of the namespace (the safe side).
pub fn pdb_view(
    pdb: &k8s_openapi::api::policy::v1::PodDisruptionBudget,
) -> Option<quartermaster_engine::PodDisruptionBudgetView> {
    use quartermaster_policies::{Operator, Requirement, Requirements};
    let selector = pdb.spec.as_ref()?.selector.as_ref();
    let mut requirements = selector
        .and_then(|s| s.match_labels.as_ref())
        .map(Requirements::from_labels)
        .unwrap_or_default();
    for e in selector
        .and_then(|s| s.match_expressions.as_ref())
        .into_iter()
        .flatten()
    {
        let parsed = e.operator.parse::<Operator>().ok().and_then(|op| {
            Requirement::new(e.key.as_str(), op, e.values.clone().unwrap_or_default()).ok()
        });
        match parsed {
            Some(r) => requirements.add(r),
            None => {
                requirements = Requirements::default();
                break;
            }
        }
    }
    Some(quartermaster_engine::PodDisruptionBudgetView {
        namespace: pdb.metadata.namespace.clone()?,
        name: pdb.metadata.name.clone()?,
        selector: requirements,
        disruptions_allowed: pdb
            .status
            .as_ref()
            .map_or(0, |s| s.disruptions_allowed.max(0) as u32),
    })
}

#[cfg(test)]
mod disruption_input_tests {
    use super::*;

    #[test]
    fn pdbs_and_do_not_disrupt_annotations_reach_the_engine_terms() {
        let pdb: k8s_openapi::api::policy::v1::PodDisruptionBudget =
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "web", "namespace": "shop"},
                "spec": {"maxUnavailable": 1, "selector": {
                    "matchLabels": {"app": "web"},
                    "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["canary"]}]
                }},
                "status": {"disruptionsAllowed": 1, "currentHealthy": 3, "desiredHealthy": 2, "expectedPods": 3}
            }))
            .expect("a PDB");
        let view = pdb_view(&pdb).expect("a view");
        assert_eq!(view.disruptions_allowed, 1);
        let mut pod = Pod::new(PodRef::new("shop", "web-1"), Resources::ZERO);
        pod.labels.insert("app".into(), "web".into());
        assert!(view.selects(&pod));
        pod.labels.insert("tier".into(), "canary".into());
        assert!(!view.selects(&pod));
        let elsewhere = Pod::new(PodRef::new("other", "web-1"), Resources::ZERO);
        assert!(!view.selects(&elsewhere));

        let meta = |k: &str, v: &str| k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
            annotations: Some([(k.to_owned(), v.to_owned())].into()),
            ..Default::default()
        };
        assert!(annotated_do_not_disrupt(&meta(
            "karpenter.sh/do-not-disrupt",
            "true"
        )));
        assert!(annotated_do_not_disrupt(&meta(
            "quartermaster.dev/do-not-disrupt",
            "true"
        )));
        assert!(!annotated_do_not_disrupt(&meta(
            "quartermaster.dev/do-not-disrupt",
            "false"
        )));
    }
}

#[cfg(test)]
mod node_condition_tests {
    use super::*;

    #[test]
    fn node_conditions_reach_repair_without_their_heartbeats() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "node-0"},
            "status": {"conditions": [
                {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-12-04T10:00:00Z",
                 "lastTransitionTime": "2026-12-04T09:00:00Z"},
                {"type": "AcceleratedHardwareReady", "status": "False", "reason": "NvidiaXID79Error",
                 "lastHeartbeatTime": "2026-12-04T10:00:00Z", "lastTransitionTime": "2026-12-04T09:55:00Z"}
            ]}
        }))
        .expect("a Node");
        let view = node_view(&node, &ResourceTable::default());
        assert_eq!(view.conditions.len(), 2);
        let gpu = &view.conditions[1];
        assert_eq!(gpu.kind, "AcceleratedHardwareReady");
        assert_eq!(gpu.status, "False");
        assert_eq!(gpu.reason.as_deref(), Some("NvidiaXID79Error"));
        assert_eq!(
            gpu.since.map(|t| t.to_rfc3339()),
            Some("2026-12-04T09:55:00+00:00".to_owned())
        );
        // A heartbeat alone is no change the engine hears of.
        let mut later = node.clone();
        for c in later
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .into_iter()
            .flatten()
        {
            c.last_heartbeat_time = None;
        }
        assert_eq!(node_view(&later, &ResourceTable::default()), view);
    }
}

#[cfg(test)]
mod region_tests {
    use super::*;

    fn pool(class_region: Option<&str>) -> (Vec<std::sync::Arc<NodePool>>, Vec<Value>) {
        let pool: NodePool = serde_json::from_value(serde_json::json!({
            "apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
            "metadata": {"name": "gpu"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "default"},
                "requirements": [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g5.xlarge"]}]
            }}}
        }))
        .expect("a NodePool");
        let mut class = serde_json::json!({"apiVersion": "quartermaster.dev/v1", "kind": "AWSNodeClass",
            "metadata": {"name": "default"},
            "spec": {"amiFamily": "AL2023", "role": "KarpenterNodeRole",
                "subnetSelectorTerms": [{"tags": {"k": "v"}}],
                "securityGroupSelectorTerms": [{"tags": {"k": "v"}}]}});
        if let Some(r) = class_region {
            class["spec"]["region"] = Value::from(r);
        }
        (vec![std::sync::Arc::new(pool)], vec![class])
    }

    fn buys_in(observed: &Observed, region: &str) -> bool {
        let labels: std::collections::BTreeMap<String, String> = [
            (
                "topology.kubernetes.io/region".to_owned(),
                region.to_owned(),
            ),
            (LABEL_INSTANCE_TYPE.to_owned(), "g5.xlarge".to_owned()),
        ]
        .into();
        observed.setup.pools[0].spec.requirements.matches(&labels)
    }

    #[test]
    fn a_pool_whose_node_class_names_no_region_buys_in_the_cluster_region() {
        let catalog = Catalog::embedded_all_regions();
        let (pools, classes) = pool(None);
        let observed = observe(
            &[],
            &Default::default(),
            &pools,
            classes,
            Vec::new(),
            &catalog,
            &ResourceTable::default(),
            Some("us-west-2"),
        );
        assert!(observed.rejected.is_empty(), "{:?}", observed.rejected);
        assert!(buys_in(&observed, "us-west-2"));
        assert!(!buys_in(&observed, "us-east-1"));

        // The NodeClass's own region wins over the cluster's.
        let (pools, classes) = pool(Some("eu-west-1"));
        let observed = observe(
            &[],
            &Default::default(),
            &pools,
            classes,
            Vec::new(),
            &catalog,
            &ResourceTable::default(),
            Some("us-west-2"),
        );
        assert!(buys_in(&observed, "eu-west-1"));
        assert!(!buys_in(&observed, "us-west-2"));

        // No cluster region: the catalog's default region of the cloud.
        let (pools, classes) = pool(None);
        let observed = observe(
            &[],
            &Default::default(),
            &pools,
            classes,
            Vec::new(),
            &catalog,
            &ResourceTable::default(),
            None,
        );
        let default = catalog
            .default_region(quartermaster_pricing::Cloud::Aws)
            .expect("a default region");
        assert!(buys_in(&observed, default));
    }
}
