//! Kubernetes objects → the solver's [`ClusterSnapshot`].
//!
//! [`snapshot_from_objects`] reads Pods, Deployments, ReplicaSets, StatefulSets, Jobs, DaemonSets,
//! Nodes, NodeClaims, NodePools and NodeClasses (as JSON values, e.g. parsed from YAML), and the
//! GPU controllers' workload custom resources (Kubeflow jobs, LeaderWorkerSet, KubeRay, KServe,
//! JobSet, Volcano Job; recognised by API group and kind), and resolves them into what the
//! solver plans from: pending pods with effective requests and constraints, existing nodes with
//! their bound pods, NodePools with limits and usage, DaemonSet overhead. Other kinds are skipped
//! with a note.
//!
//! Pure: no client, no async, no clock. `quartermaster plan` feeds it from files; the controller
//! will feed it from informers.

pub mod admission;
pub mod capacity_buffer;
mod error;
mod node;
mod nodepool;
mod objects;
mod overlay;
mod pod;
pub mod provisioning_request;
mod quantities;
mod selectors;
mod workloads;

#[cfg(test)]
mod testing;

use std::collections::{BTreeMap, BTreeSet};

use quartermaster_policies::labels::{
    LABEL_CAPACITY_TYPE, LABEL_CLOUD, LABEL_INSTANCE_TYPE, LABEL_ZONE,
};
use quartermaster_pricing::{Catalog, Cloud};
use quartermaster_solver::{ClusterSnapshot, Pod, PodRef, ResourceTable};
use serde_json::Value;

pub use error::ClusterError;

use crate::node::NodeInfo;
use crate::objects::Inventory;
use crate::pod::solver_pod;

/// A snapshot and what the reader noticed on the way (skipped kinds, ignored fields, missing
/// NodeClasses). Notes are for people; nothing depends on their wording.
#[derive(Debug, Clone)]
pub struct Ingested {
    /// The solver's input.
    pub snapshot: ClusterSnapshot,
    /// Remarks, deduplicated, in the order they arose.
    pub notes: Vec<String>,
    /// Static NodePools (`spec.replicas`): pool name → the node count it keeps whatever the
    /// pods need. The snapshot does not act on it; `plan` buys the missing nodes.
    pub static_pools: BTreeMap<String, u64>,
    /// ProvisioningRequests with the pods planned for them, in input order.
    pub provisioning_requests: Vec<provisioning_request::RequestPods>,
    /// CapacityBuffers with their chunk and count, in input order. Their placeholder pods are
    /// not in the snapshot: [`Ingested::with_buffers`] adds them.
    pub capacity_buffers: Vec<capacity_buffer::BufferPods>,
}

impl Ingested {
    /// The snapshot with every buffer's placeholder pods pending too (`plan`'s view: one
    /// solve buys for the pods and the headroom together).
    pub fn with_buffers(&self) -> ClusterSnapshot {
        let mut snapshot = self.snapshot.clone();
        snapshot.pending.extend(buffer_pods(&self.capacity_buffers));
        snapshot
    }
}

/// Every placeholder pod of `buffers`, numbered per buffer
/// ([`capacity_buffer::chunk_name`]).
pub fn buffer_pods(buffers: &[capacity_buffer::BufferPods]) -> Vec<Pod> {
    let mut out = Vec::new();
    for b in buffers {
        let Some(chunk) = &b.chunk else { continue };
        for i in 0..b.replicas {
            let mut pod = chunk.clone();
            pod.id = PodRef::new(&b.namespace, capacity_buffer::chunk_name(&b.name, i));
            out.push(pod);
        }
    }
    out
}

/// Builds a snapshot from Kubernetes objects. Existing nodes are priced only from what they say
/// themselves (a NodeClaim's `status.pricePerHour`); see [`snapshot_with_catalog`].
///
/// Fails on the first malformed object, naming it (`Kind/namespace/name`) and the field.
pub fn snapshot_from_objects(objects: &[Value]) -> Result<Ingested, ClusterError> {
    ingest(objects, None)
}

/// [`snapshot_from_objects`], pricing existing nodes from `catalog` (by their instance-type, zone
/// and capacity-type labels) so that they count against their NodePool's `maxHourlyCost`.
pub fn snapshot_with_catalog(
    objects: &[Value],
    catalog: &Catalog,
) -> Result<Ingested, ClusterError> {
    ingest(objects, Some(catalog))
}

/// [`snapshot_with_catalog`], starting from a given resource table: names already in it keep
/// their slots, new names are appended. A long-running driver (the controller) keeps one table
/// so resource vectors stay comparable from one snapshot to the next.
pub fn snapshot_with_resources(
    objects: &[Value],
    catalog: &Catalog,
    resources: ResourceTable,
) -> Result<Ingested, ClusterError> {
    ingest_into(objects, Some(catalog), resources, None)
}

/// [`snapshot_with_catalog`] for a cluster in `region` (`plan --region`).
///
/// Where each NodePool buys: its NodeClass's region (`spec.region`, an AzureNodeClass's
/// `spec.location`); without one, `region` when the catalog has offerings of the pool's cloud
/// there; otherwise the catalog's default region of that cloud
/// ([`Catalog::default_region`]), with a note. `None` is "the cluster's region is not known":
/// the default region. A `region` that no cloud of the catalog has is an error on the first
/// NodePool that would use it.
pub fn snapshot_in_region(
    objects: &[Value],
    catalog: &Catalog,
    region: Option<&str>,
) -> Result<Ingested, ClusterError> {
    ingest_into(objects, Some(catalog), ResourceTable::default(), region)
}

/// [`snapshot_with_resources`] for a cluster in `region` (the controller's `--region`); see
/// [`snapshot_in_region`] for how the region is chosen per NodePool.
pub fn snapshot_with_resources_in_region(
    objects: &[Value],
    catalog: &Catalog,
    resources: ResourceTable,
    region: Option<&str>,
) -> Result<Ingested, ClusterError> {
    ingest_into(objects, Some(catalog), resources, region)
}

fn ingest(objects: &[Value], catalog: Option<&Catalog>) -> Result<Ingested, ClusterError> {
    ingest_into(objects, catalog, ResourceTable::default(), None)
}

fn ingest_into(
    objects: &[Value],
    catalog: Option<&Catalog>,
    resources: ResourceTable,
    cluster_region: Option<&str>,
) -> Result<Ingested, ClusterError> {
    let mut notes = Vec::new();
    let inventory = Inventory::sort(objects, &mut notes)?;
    let mut expansion = workloads::expand(&inventory, &mut notes)?;
    let requests = provisioning_request::expand(&inventory, &mut expansion.pending, &mut notes);
    let mut snapshot = ClusterSnapshot {
        resources,
        ..ClusterSnapshot::default()
    };

    // Pods first: they decide which resources take slots.
    let mut taken: BTreeSet<PodRef> = BTreeSet::new();
    for workload in &expansion.pending {
        let template = solver_pod(&workload.template, &mut snapshot.resources, &mut notes)?;
        for id in &workload.replicas {
            let mut pod = template.clone();
            pod.id = unique(id, workload.template.owner.as_deref(), &mut taken);
            if workload.stateful {
                pod.labels
                    .insert(workloads::STATEFULSET_POD_NAME.to_owned(), id.name.clone());
            }
            pod.gang = workload.gang.clone();
            snapshot.pending.push(pod);
        }
    }
    let mut provisioning_requests = Vec::new();
    for expanded in requests {
        let mut request = expanded.request;
        for workload in &expanded.checks {
            let template = solver_pod(&workload.template, &mut snapshot.resources, &mut notes)?;
            for id in &workload.replicas {
                let mut pod = template.clone();
                pod.id = id.clone();
                request.check.push(pod);
            }
        }
        provisioning_requests.push(request);
    }
    let capacity_buffers = capacity_buffer::expand(&inventory, &mut snapshot.resources, &mut notes);
    let mut bound: BTreeMap<&str, Vec<Pod>> = BTreeMap::new();
    for (node, source) in &expansion.bound {
        let pod = solver_pod(source, &mut snapshot.resources, &mut notes)?;
        bound.entry(node.as_str()).or_default().push(pod);
    }
    for source in &expansion.daemon_sets {
        let mut pod = solver_pod(source, &mut snapshot.resources, &mut notes)?;
        pod.tolerations.extend(workloads::daemon_set_tolerations(
            source.spec.host_network.unwrap_or(false),
        ));
        snapshot.daemonsets.push(pod);
    }

    // NodePools: their limits may register resources no pod asks for.
    let regions = nodepool::node_class_regions(objects);
    let storage = nodepool::node_class_storage(objects);
    let mut static_pools = BTreeMap::new();
    for (id, pool) in &inventory.node_pools {
        if let (Some(name), Some(replicas)) = (&pool.metadata.name, pool.spec.replicas) {
            static_pools.insert(name.clone(), u64::try_from(replicas).unwrap_or(0));
        }
        let class = pool.node_class_ref();
        let key = (class.kind.clone(), class.name.clone());
        let node_class = inventory
            .node_classes
            .contains(&key)
            .then(|| regions.get(&key).cloned().flatten());
        let mut spec = nodepool::node_pool(
            id,
            pool,
            node_class.as_ref().map(Option::as_deref),
            cluster_region,
            catalog,
            &mut snapshot.resources,
            &mut notes,
        )?;
        spec.node_shape.ephemeral_storage = storage.get(&key).copied();
        spec.node_shape.overlays = inventory.overlays.clone();
        snapshot.node_pools.push(spec);
    }
    provisioning_request::prefer_flex_start(&mut snapshot, &mut provisioning_requests, &mut notes);

    // Nodes and claims in flight.
    let mut infos: Vec<NodeInfo> = Vec::new();
    for node in &inventory.nodes {
        infos.push(node::from_node(node, &mut notes)?);
    }
    let node_names: BTreeSet<&str> = inventory.nodes.iter().map(|n| n.name.as_str()).collect();
    for (id, claim) in &inventory.node_claims {
        let registered = claim
            .status
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .filter(|n| !n.is_empty());
        match registered {
            Some(node) if node_names.contains(node) => {}
            Some(node) => {
                // Registered, but the Node was not given: the claim stands in for it.
                let mut info = node::from_claim(id, claim, &mut notes)?;
                info.node.name = node.to_owned();
                info.node.in_flight = false;
                infos.push(info);
            }
            None => infos.push(node::from_claim(id, claim, &mut notes)?),
        }
    }
    for info in &mut infos {
        node::finish(info, &snapshot.resources);
        if let Some(pods) = bound.remove(info.node.name.as_str()) {
            info.node.pods = pods.into_iter().map(std::sync::Arc::new).collect();
        }
    }
    for (node, pods) in bound {
        notes.push(format!(
            "{} pod(s) bound to node {node}, which is not given, are ignored",
            pods.len()
        ));
    }

    // What each pool already owns.
    for pool in &mut snapshot.node_pools {
        for info in infos
            .iter()
            .filter(|i| i.node.node_pool.as_deref() == Some(pool.name.as_str()))
        {
            pool.usage.nodes += 1;
            pool.usage.resources +=
                quantities::to_resources_known(&info.capacity, &snapshot.resources);
            let price = info
                .price
                .or_else(|| catalog.and_then(|c| node_price(c, &info.node.labels, pool.cloud)));
            match price {
                Some(p) => pool.usage.hourly_cost += p,
                None if pool.limits.max_hourly_cost.is_some() => notes.push(format!(
                    "node {}: price unknown; counted as $0/hour against NodePool {} maxHourlyCost",
                    info.node.name, pool.name
                )),
                None => {}
            }
        }
    }
    snapshot.nodes = infos.into_iter().map(|i| i.node).collect();

    if !inventory.skipped.is_empty() {
        let kinds: Vec<String> = inventory
            .skipped
            .iter()
            .map(|(k, n)| format!("{k} ×{n}"))
            .collect();
        notes.push(format!(
            "skipped kinds not used for planning: {}",
            kinds.join(", ")
        ));
    }
    let mut seen = BTreeSet::new();
    notes.retain(|n| seen.insert(n.clone()));
    Ok(Ingested {
        snapshot,
        notes,
        static_pools,
        provisioning_requests,
        capacity_buffers,
    })
}

/// `id`, or `id` with the owner's kind appended when another pod already has that name (a
/// Deployment and a StatefulSet of the same name in one namespace).
fn unique(id: &PodRef, owner: Option<&str>, taken: &mut BTreeSet<PodRef>) -> PodRef {
    let mut candidate = id.clone();
    if taken.contains(&candidate) {
        let kind = owner
            .and_then(|o| o.split('/').next())
            .unwrap_or("pod")
            .to_ascii_lowercase();
        candidate = PodRef::new(&id.namespace, format!("{}-{kind}", id.name));
        let mut n = 2;
        while taken.contains(&candidate) {
            candidate = PodRef::new(&id.namespace, format!("{}-{kind}{n}", id.name));
            n += 1;
        }
    }
    taken.insert(candidate.clone());
    candidate
}

/// The catalog price of a node, from its instance-type, zone and capacity-type labels.
fn node_price(
    catalog: &Catalog,
    labels: &BTreeMap<String, String>,
    pool_cloud: Cloud,
) -> Option<f64> {
    let cloud = labels
        .get(LABEL_CLOUD)
        .and_then(|c| c.parse().ok())
        .unwrap_or(pool_cloud);
    let instance_type = catalog.get(cloud, labels.get(LABEL_INSTANCE_TYPE)?)?;
    let capacity_type = labels
        .get(LABEL_CAPACITY_TYPE)
        .or_else(|| labels.get("karpenter.sh/capacity-type"))
        .and_then(|c| c.parse().ok())
        .unwrap_or(quartermaster_pricing::CapacityType::OnDemand);
    let zone = labels.get(LABEL_ZONE);
    let matching = instance_type
        .offerings
        .iter()
        .filter(|o| o.capacity_type == capacity_type);
    let in_zone = matching
        .clone()
        .find(|o| zone.is_some_and(|z| *z == o.zone));
    in_zone
        .or_else(|| matching.min_by(|a, b| a.price_per_hour.total_cmp(&b.price_per_hour)))
        .map(|o| o.price_per_hour)
}

#[cfg(test)]
mod tests {
    use quartermaster_pricing::Catalog;

    use crate::testing::{ingest, ingest_err, objects};

    #[test]
    fn other_kinds_are_skipped_with_a_note() {
        let ingested = ingest(
            "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}
---
apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: b}
---
apiVersion: v1\nkind: Service\nmetadata: {name: db}
---
apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly}\nspec: {schedule: '@daily'}
---
apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: karpenter}\nspec: {}
",
        );
        assert!(ingested.snapshot.pending.is_empty());
        assert!(ingested.snapshot.node_pools.is_empty());
        assert!(
            ingested.notes.contains(
                &"skipped kinds not used for planning: ConfigMap ×1, CronJob.batch ×1, Service ×2"
                    .to_owned()
            ),
            "{:?}",
            ingested.notes
        );
        assert!(
            ingested
                .notes
                .iter()
                .any(|n| n.starts_with("NodePool/karpenter: apiVersion \"karpenter.sh/v1\""))
        );
    }

    #[test]
    fn objects_without_kind_or_name_and_duplicates_are_errors() {
        assert_eq!(
            ingest_err("metadata: {name: x}\n").to_string(),
            "object 1: no kind"
        );
        assert_eq!(
            ingest_err("kind: Service\n---\nkind: Pod\n").to_string(),
            "object 2: Pod without metadata.name"
        );
        let pod =
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n";
        assert_eq!(
            ingest_err(&format!("{pod}---\n{pod}")).to_string(),
            "Pod/default/p: metadata.name: given twice"
        );
    }

    #[test]
    fn malformed_fields_carry_their_path() {
        let e = ingest_err(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: three}\n",
        );
        assert!(
            e.to_string()
                .starts_with("Deployment/default/web: spec.replicas: invalid type"),
            "{e}"
        );
        let e = ingest_err(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: [1]}}]}\n",
        );
        assert!(
            e.to_string()
                .starts_with("Pod/default/p: spec.containers[0].resources.requests: invalid type"),
            "{e}"
        );
        let e = ingest_err("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n");
        assert_eq!(e.to_string(), "Pod/default/p: spec: missing");
    }

    #[test]
    fn the_catalog_prices_existing_nodes_for_max_hourly_cost() {
        let yaml = "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: gpu}
  limits: {maxHourlyCost: '100'}
---
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels:
    quartermaster.dev/nodepool: gpu
    node.kubernetes.io/instance-type: p5.48xlarge
    quartermaster.dev/capacity-type: on-demand
status: {capacity: {cpu: '192'}}
";
        let catalog = Catalog::embedded();
        let ingested = crate::snapshot_with_catalog(&objects(yaml), &catalog).unwrap();
        let usage = &ingested.snapshot.node_pools[0].usage;
        let expected = catalog
            .get(quartermaster_pricing::Cloud::Aws, "p5.48xlarge")
            .and_then(|it| {
                it.cheapest_offering(Some(quartermaster_pricing::CapacityType::OnDemand))
            })
            .map(|o| o.price_per_hour)
            .unwrap();
        assert!(
            (usage.hourly_cost - expected).abs() < 1e-9,
            "{} vs {expected}",
            usage.hourly_cost
        );
    }
}
