//! The live fleet's cost: NodeClaims, their Nodes and the pods on them, as the usage intervals
//! `quartermaster-cost` allocates (the same code `simulate` writes `cost.csv` with). Read from
//! objects only, so any replica can answer `/cost` and `report` can read a cluster it lists.

use std::collections::BTreeMap;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::Pod;
use quartermaster_cost::{Amounts, NodeUsage, PodShare, PodUsage, split_at};
use quartermaster_policies::NodeClaim;
use quartermaster_policies::quantity::parse_quantity;
use quartermaster_pricing::{Catalog, Cloud};

use crate::driver::Driver;
use crate::metrics::{FleetCostLabels, NodeCostLabels, NodeCountLabels, PodCostLabels};
use crate::time::from_kube;
use crate::translate::{LABEL_NODEPOOL, bound_node, is_finished};

/// The cloud a NodeClass kind launches on.
pub fn cloud_of_kind(kind: &str) -> Option<Cloud> {
    match kind {
        "AWSNodeClass" | "EC2NodeClass" => Some(Cloud::Aws),
        "GCPNodeClass" => Some(Cloud::Gcp),
        "AzureNodeClass" => Some(Cloud::Azure),
        _ => None,
    }
}

/// Usage intervals of every launched NodeClaim and of the pods on their nodes.
pub fn usage(
    claims: &[Arc<NodeClaim>],
    pods: &[Arc<Pod>],
    catalog: &Catalog,
) -> (Vec<NodeUsage>, Vec<PodUsage>) {
    let mut node_usage = Vec::new();
    let mut accelerator_of: BTreeMap<String, String> = BTreeMap::new();
    for claim in claims {
        let Some(status) = &claim.status else {
            continue;
        };
        if status.provider_id.is_none() {
            continue;
        }
        let name = claim.metadata.name.clone().unwrap_or_default();
        let cloud = cloud_of_kind(&claim.spec.node_class_ref.kind).unwrap_or(Cloud::Aws);
        let instance_type = status.instance_type.clone().unwrap_or_default();
        let zone = status.zone.clone().unwrap_or_default();
        let capacity_type = status
            .capacity_type
            .as_deref()
            .and_then(|c| c.parse().ok())
            .unwrap_or(quartermaster_pricing::CapacityType::OnDemand);
        let it = catalog.get(cloud, &instance_type);
        let offering = it.and_then(|it| {
            it.offerings
                .iter()
                .find(|o| o.zone == zone && o.capacity_type == capacity_type)
        });
        let on_demand = it.and_then(|it| {
            it.offerings
                .iter()
                .filter(|o| o.capacity_type == quartermaster_pricing::CapacityType::OnDemand)
                .map(|o| o.price_per_hour)
                .min_by(f64::total_cmp)
        });
        let accel = it.and_then(|it| it.accelerator.as_ref());
        let alloc = it.map(|it| it.allocatable()).unwrap_or_default();
        let node_name = status.node_name.clone().unwrap_or_else(|| name.clone());
        if let Some(a) = accel {
            accelerator_of.insert(node_name.clone(), a.resource.clone());
        }
        let launched = status
            .conditions
            .iter()
            .find(|c| c.type_ == "Launched" && c.status == "True")
            .map(|c| from_kube(&c.last_transition_time));
        let start = launched
            .or_else(|| claim.metadata.creation_timestamp.as_ref().map(from_kube))
            .unwrap_or_default();
        node_usage.push(NodeUsage {
            node: node_name,
            nodeclaim: name,
            nodepool: claim
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(LABEL_NODEPOOL))
                .cloned()
                .unwrap_or_default(),
            cloud,
            region: offering.map(|o| o.region.clone()).unwrap_or_default(),
            zone,
            instance_type,
            capacity_type,
            price_per_hour: status.price_per_hour.unwrap_or_default(),
            list_price_per_hour: on_demand,
            price_source: offering
                .map(|o| o.price_source.clone())
                .unwrap_or_else(|| "nodeclaim status".into()),
            accelerator: accel.map(|a| a.name.clone()).unwrap_or_default(),
            accelerator_count: accel.map(|a| a.count).unwrap_or_default(),
            allocatable: Amounts {
                cpu_millis: amount(&alloc, "cpu"),
                memory_bytes: amount(&alloc, "memory"),
                accelerators: accel
                    .map(|a| amount(&alloc, &a.resource))
                    .unwrap_or_default(),
            },
            start,
            end: None,
        });
    }
    let mut pod_usage = Vec::new();
    for pod in pods {
        let Some(node) = bound_node(pod) else {
            continue;
        };
        let Some(resource) = accelerator_of
            .get(node)
            .cloned()
            .or_else(|| node_usage.iter().any(|n| n.node == node).then(String::new))
        else {
            continue;
        };
        if is_finished(pod) {
            continue;
        }
        let requests = requests(pod, &resource);
        let start = pod
            .status
            .as_ref()
            .and_then(|s| s.start_time.as_ref())
            .or(pod.metadata.creation_timestamp.as_ref())
            .map(from_kube)
            .unwrap_or_default();
        let workload = pod
            .metadata
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
            .map(|o| format!("{}/{}", o.kind, o.name))
            .unwrap_or_default();
        pod_usage.push(PodUsage {
            namespace: pod.metadata.namespace.clone().unwrap_or_default(),
            pod: pod.metadata.name.clone().unwrap_or_default(),
            workload,
            node: node.to_owned(),
            share: PodShare::Requests(requests),
            start,
            end: None,
        });
    }
    (node_usage, pod_usage)
}

fn amount(map: &BTreeMap<String, u64>, key: &str) -> i64 {
    map.get(key)
        .map(|v| i64::try_from(*v).unwrap_or(i64::MAX))
        .unwrap_or_default()
}

/// A pod's requests (summed over its containers, at least each init container's).
fn requests(pod: &Pod, accelerator: &str) -> Amounts {
    let Some(spec) = &pod.spec else {
        return Amounts::default();
    };
    let read = |c: &k8s_openapi::api::core::v1::Container| -> Amounts {
        let r = c.resources.as_ref();
        let get = |name: &str| {
            r.and_then(|r| r.requests.as_ref().and_then(|q| q.get(name)))
                .or_else(|| r.and_then(|r| r.limits.as_ref().and_then(|q| q.get(name))))
                .and_then(|q| parse_quantity(&q.0).ok())
        };
        Amounts {
            cpu_millis: get("cpu").map(|m| m.millis() as i64).unwrap_or_default(),
            memory_bytes: get("memory")
                .map(|m| m.to_whole_ceil() as i64)
                .unwrap_or_default(),
            accelerators: if accelerator.is_empty() {
                0
            } else {
                get(accelerator)
                    .map(|m| m.to_whole_ceil() as i64)
                    .unwrap_or_default()
            },
        }
    };
    let mut total = Amounts::default();
    for c in &spec.containers {
        let a = read(c);
        total.cpu_millis += a.cpu_millis;
        total.memory_bytes += a.memory_bytes;
        total.accelerators += a.accelerators;
    }
    for c in spec.init_containers.iter().flatten() {
        let a = read(c);
        total.cpu_millis = total.cpu_millis.max(a.cpu_millis);
        total.memory_bytes = total.memory_bytes.max(a.memory_bytes);
        total.accelerators = total.accelerators.max(a.accelerators);
    }
    total
}

/// The room CapacityBuffers hold, as the leader's last pass saw it: placeholder "pods" of
/// workload `CapacityBuffer/<name>` on the nodes whose room they hold, so `/cost`, the
/// per-pod cost metric and FOCUS reports count that room as headroom rather than idle.
#[derive(Debug, Default)]
pub struct Headroom(std::sync::Mutex<Vec<PodUsage>>);

impl Headroom {
    /// Replaces what is held with `now_held`; a placeholder still on the same node keeps the
    /// time it started holding room there. Returns the intervals as kept.
    pub fn update(&self, now_held: Vec<PodUsage>) -> Vec<PodUsage> {
        let mut held = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let next: Vec<PodUsage> = now_held
            .into_iter()
            .map(|mut p| {
                if let Some(old) = held
                    .iter()
                    .find(|o| o.namespace == p.namespace && o.pod == p.pod && o.node == p.node)
                {
                    p.start = old.start;
                }
                p
            })
            .collect();
        *held = next.clone();
        next
    }

    /// What is held now.
    pub fn get(&self) -> Vec<PodUsage> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// Where `engine` holds CapacityBuffer room on a launched node of `nodes`, as pod intervals
/// starting at `now`.
pub fn headroom_usage(
    engine: &quartermaster_engine::Engine,
    nodes: &[NodeUsage],
    now: DateTime<Utc>,
) -> Vec<PodUsage> {
    use quartermaster_solver::resources::{ACCELERATORS, CPU, MEMORY};
    engine
        .headroom()
        .filter_map(|h| {
            let claim = h.claim?;
            let node = nodes.iter().find(|n| n.nodeclaim == claim)?;
            let r = &h.pod.requests;
            let workload = h.buffer.split_once('/').map_or(h.buffer, |(_, n)| n);
            Some(PodUsage {
                namespace: h.pod.id.namespace.clone(),
                pod: h.pod.id.name.clone(),
                workload: format!("CapacityBuffer/{workload}"),
                node: node.node.clone(),
                share: PodShare::Requests(Amounts {
                    cpu_millis: r.get(CPU),
                    memory_bytes: r.get(MEMORY),
                    accelerators: ACCELERATORS.map(|s| r.get(s)).sum(),
                }),
                start: now,
                end: None,
            })
        })
        .collect()
}

/// Updates the fleet gauges: nodes, fleet cost, per-node and per-pod cost; accrues
/// accelerator-seconds paid while not allocatable.
pub fn export(driver: &mut Driver, now: DateTime<Utc>) {
    let ctx = driver.ctx().clone();
    let m = &ctx.metrics;
    let (nodes, mut pods) = usage(
        &ctx.stores.node_claims.state(),
        &ctx.stores.pods.state(),
        &ctx.catalog,
    );
    if let Some(engine) = driver.engine_ref() {
        pods.extend(ctx.headroom.update(headroom_usage(engine, &nodes, now)));
    }
    m.nodes.clear();
    m.fleet_hourly_cost.clear();
    m.node_hourly_cost.clear();
    m.pod_allocated_hourly_cost.clear();
    for n in &nodes {
        m.nodes
            .get_or_create(&NodeCountLabels {
                nodepool: n.nodepool.clone(),
                instance_type: n.instance_type.clone(),
                capacity_type: n.capacity_type.to_string(),
            })
            .inc();
        m.fleet_hourly_cost
            .get_or_create(&FleetCostLabels {
                nodepool: n.nodepool.clone(),
                capacity_type: n.capacity_type.to_string(),
            })
            .inc_by(n.price_per_hour);
        m.node_hourly_cost
            .get_or_create(&NodeCostLabels {
                node: n.node.clone(),
                nodeclaim: n.nodeclaim.clone(),
                nodepool: n.nodepool.clone(),
                cloud: n.cloud.to_string(),
                region: n.region.clone(),
                zone: n.zone.clone(),
                instance_type: n.instance_type.clone(),
                capacity_type: n.capacity_type.to_string(),
                accelerator: n.accelerator.clone(),
                accelerator_count: n.accelerator_count.to_string(),
                price_source: n.price_source.clone(),
            })
            .set(n.price_per_hour);
    }
    for split in split_at(&nodes, &pods, now) {
        let n = &nodes[split.node];
        for (j, dollars) in split.pods {
            let p = &pods[j];
            m.pod_allocated_hourly_cost
                .get_or_create(&PodCostLabels {
                    namespace: p.namespace.clone(),
                    pod: p.pod.clone(),
                    workload: p.workload.clone(),
                    node: p.node.clone(),
                    nodepool: n.nodepool.clone(),
                    capacity_type: n.capacity_type.to_string(),
                })
                .set(dollars);
        }
    }
    // Accelerators paid for but not allocatable: launched claims whose node does not (yet)
    // show them, since the last pass.
    if let Some(last) = driver.last_export() {
        let seconds = (now - last).num_milliseconds().max(0) as f64 / 1000.0;
        let mut missing = 0u64;
        for n in &nodes {
            if n.accelerator_count == 0 {
                continue;
            }
            let resource = ctx
                .catalog
                .get(n.cloud, &n.instance_type)
                .and_then(|it| it.accelerator.as_ref().map(|a| a.resource.clone()))
                .unwrap_or_default();
            let shown = ctx
                .stores
                .node(&n.node)
                .and_then(|o| {
                    o.status
                        .as_ref()?
                        .allocatable
                        .as_ref()?
                        .get(&resource)
                        .cloned()
                })
                .and_then(|q| parse_quantity(&q.0).ok())
                .map(|m| m.to_whole_floor() as u64)
                .unwrap_or(0);
            missing += u64::from(n.accelerator_count).saturating_sub(shown);
        }
        if missing > 0 {
            m.gpu_seconds_not_allocatable
                .inc_by(missing as f64 * seconds);
        }
    }
}
