//! One look at the stores: pods, pools, classes, DaemonSets and the objects pods refer to, read
//! into the engine's setup and the pods it should know (only the pods that changed are read again).

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod as KubePod;
use quartermaster_cluster::{ClusterError, Input, SnapshotOptions, snapshot};
use quartermaster_engine::{EngineSetup, PoolPolicy};
use quartermaster_policies::NodePool;
use quartermaster_pricing::Catalog;
use quartermaster_solver::{Pod, PodRef, ResourceTable};
use serde_json::Value;

use crate::pod_readings::{ConfigKey, ConfigReading, PodReadings, Reading};
use crate::time::from_kube;

use super::{
    Observed, ObservedPod, bound_node, is_daemon_pod, is_finished, is_provisionable, table_names,
};

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
    our_nodes: &std::collections::BTreeSet<&str>,
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
    our_nodes: &std::collections::BTreeSet<&str>,
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
    our_nodes: &std::collections::BTreeSet<&str>,
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
        together,
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
    // With no pod to read together, the snapshot reads only the configuration: kept from the
    // last pass while it is the same (reading it prices every offering of every pool).
    let cacheable = together.is_empty();
    let mut config_objects = pool_values;
    config_objects.extend(node_classes);
    config_objects.extend(daemon_sets);
    config_objects.extend(requests);
    let key = cacheable.then(|| {
        ConfigKey::new(
            &config_objects,
            &format!("{}|{}", table_names(resources), region.unwrap_or_default()),
            catalog,
        )
    });
    let kept = key.as_ref().and_then(|k| readings.config(k)).cloned();
    let config = match kept {
        Some(config) => Ok(config),
        None => {
            let objects = together
                .iter()
                .map(|&(pod, bound)| Input::Unplaced { pod, bound })
                .chain(config_objects.iter().map(Input::Manifest))
                .collect();
            let config = read_config(objects, catalog, resources, region);
            if let (Some(key), Ok(config)) = (key, &config) {
                readings.keep_config(key, config.clone());
            }
            config
        }
    };
    let ConfigReading {
        snapshot,
        provisioning_requests,
        capacity_buffers,
        rejected: config_rejected,
    } = match config {
        Ok(config) => config,
        Err(config_rejected) => {
            rejected.extend(config_rejected);
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
        }
    };
    rejected.extend(config_rejected);
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
        provisioning_requests,
        capacity_buffers,
    }
}

/// Reads `objects` (pods and the configuration) into a snapshot, leaving out each object that
/// cannot be read (listed in [`ConfigReading::rejected`]); only the objects left out, when one
/// that cannot be read cannot be told apart from the others.
fn read_config(
    mut objects: Vec<Input<'_>>,
    catalog: &Catalog,
    resources: &ResourceTable,
    region: Option<&str>,
) -> Result<ConfigReading, Vec<(String, String)>> {
    let mut rejected = Vec::new();
    loop {
        let options = SnapshotOptions::priced(catalog)
            .with_resources(resources.clone())
            .in_region(region);
        match snapshot(&objects, options) {
            Ok(ingested) => {
                return Ok(ConfigReading {
                    snapshot: ingested.snapshot,
                    provisioning_requests: ingested.provisioning_requests,
                    capacity_buffers: ingested.capacity_buffers,
                    rejected,
                });
            }
            Err(e) => {
                let (object, index) = match &e {
                    ClusterError::Invalid { object, .. }
                    | ClusterError::TooManyResources { object, .. } => {
                        (object.clone(), objects.iter().position(|o| o.is(object)))
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
                    _ => return Err(rejected),
                }
            }
        }
    }
}

/// The pods of one look: the pods still to read with the others, where each is bound, the
/// pods read on their own, and the objects left out.
#[derive(Default)]
struct ReadPods<'a> {
    together: Vec<(&'a KubePod, bool)>,
    where_bound: BTreeMap<PodRef, (Option<String>, Option<DateTime<Utc>>)>,
    alone: Vec<std::sync::Arc<Pod>>,
    rejected: Vec<(String, String)>,
}

/// Sorts the wanted pods into those read on their own (through `readings`, when given) and the
/// objects read together; `None` when one needs a resource the table lacks.
fn read_pods<'a>(
    sorted: &[&'a KubePod],
    our_nodes: &std::collections::BTreeSet<&str>,
    catalog: &Catalog,
    resources: &ResourceTable,
    region: Option<&str>,
    mut readings: Option<&mut PodReadings>,
) -> Option<ReadPods<'a>> {
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
                    Input::Unplaced {
                        pod,
                        bound: node.is_some(),
                    },
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
                out.together.push((pod, node.is_some()));
            }
        }
    }
    if let Some(readings) = readings {
        readings.retain(&seen);
    }
    Some(out)
}
