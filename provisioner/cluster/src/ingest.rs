//! The one way in: Kubernetes objects and [`SnapshotOptions`] -> [`Ingested`].

use std::collections::{BTreeMap, BTreeSet};

use quartermaster_policies::labels::{
    LABEL_CAPACITY_TYPE, LABEL_CLOUD, LABEL_INSTANCE_TYPE, LABEL_ZONE,
};
use quartermaster_pricing::{Catalog, Cloud};
use quartermaster_solver::{ClusterSnapshot, Pod, PodRef, ResourceTable};

use crate::input::AsInput;
use crate::node::{self, NodeInfo};
use crate::objects::Inventory;
use crate::pod::solver_pod;
use crate::{
    ClusterError, Ingested, capacity_buffer, dra, nodepool, provisioning_request, quantities,
    workloads,
};

/// How [`snapshot`] reads the objects. `SnapshotOptions::default()`: no catalog, a fresh
/// resource table, the cluster's region unknown.
#[derive(Debug, Clone, Default)]
pub struct SnapshotOptions<'a> {
    /// Prices existing nodes (by their instance-type, zone and capacity-type labels) so that
    /// they count against their NodePool's `maxHourlyCost`, and tells where each NodePool buys
    /// (see `region`). `None`: a node is priced only from what it says itself (a NodeClaim's
    /// `status.pricePerHour`).
    pub catalog: Option<&'a Catalog>,
    /// The resource table to start from: names already in it keep their slots, new names are
    /// appended. A long-running driver (the controller) keeps one table so resource vectors stay
    /// comparable from one snapshot to the next.
    pub resources: ResourceTable,
    /// The cluster's region (`plan --region`, the controller's `--region`). Where each NodePool
    /// buys: its NodeClass's region (`spec.region`, an AzureNodeClass's `spec.location`);
    /// without one, this region when the catalog has offerings of the pool's cloud there;
    /// otherwise the catalog's default region of that cloud ([`Catalog::default_region`]), with
    /// a note. `None` is "the cluster's region is not known": the default region. A region that
    /// no cloud of the catalog has is an error on the first NodePool that would use it.
    pub region: Option<&'a str>,
}

impl<'a> SnapshotOptions<'a> {
    /// Existing nodes priced from `catalog`; the other options at their defaults.
    pub fn priced(catalog: &'a Catalog) -> Self {
        Self {
            catalog: Some(catalog),
            ..Self::default()
        }
    }

    /// These options for a cluster in `region` (see [`SnapshotOptions::region`]).
    pub fn in_region(self, region: Option<&'a str>) -> Self {
        Self { region, ..self }
    }

    /// These options starting from `resources` (see [`SnapshotOptions::resources`]).
    pub fn with_resources(self, resources: ResourceTable) -> Self {
        Self { resources, ..self }
    }
}

/// Builds a snapshot from Kubernetes objects (manifests, or [`Input`]s that mix manifests and
/// typed Pods), read as `options` say.
///
/// Fails on the first malformed object, naming it (`Kind/namespace/name`) and the field.
pub fn snapshot<O: AsInput>(
    objects: &[O],
    options: SnapshotOptions<'_>,
) -> Result<Ingested, ClusterError> {
    let SnapshotOptions {
        catalog,
        resources,
        region: cluster_region,
    } = options;
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
    // Pods with DRA claims: resolved once the NodePools say which types can be bought.
    let mut with_claims: Vec<ClaimingPods<'_>> = Vec::new();
    for workload in &expansion.pending {
        let template = solver_pod(&workload.template, &mut snapshot.resources, &mut notes)?;
        let first = snapshot.pending.len();
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
        let spec = workload.template.spec;
        if spec.resource_claims.as_ref().is_some_and(|c| !c.is_empty()) {
            with_claims.push((
                first..snapshot.pending.len(),
                workload.template.id.namespace.as_str(),
                spec,
            ));
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
    let mut bound_with_claims: Vec<BoundClaiming<'_>> = Vec::new();
    for (node, source) in &expansion.bound {
        let pod = solver_pod(source, &mut snapshot.resources, &mut notes)?;
        let on_node = bound.entry(node.as_str()).or_default();
        if source
            .spec
            .resource_claims
            .as_ref()
            .is_some_and(|c| !c.is_empty())
        {
            bound_with_claims.push((
                node.as_str(),
                on_node.len(),
                source.id.namespace.as_str(),
                source.spec,
            ));
        }
        on_node.push(pod);
    }
    for source in &expansion.daemon_sets {
        let mut pod = solver_pod(source, &mut snapshot.resources, &mut notes)?;
        pod.tolerations.extend(workloads::daemon_set_tolerations(
            source.spec.host_network.unwrap_or(false),
        ));
        snapshot.daemonsets.push(pod);
    }

    // NodePools: their limits may register resources no pod asks for.
    let manifests = || objects.iter().filter_map(|o| o.as_input().manifest());
    let regions = nodepool::node_class_regions(manifests());
    let storage = nodepool::node_class_storage(manifests());
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
    resolve_claims(
        &mut snapshot,
        &with_claims,
        (&mut bound, &bound_with_claims),
        &inventory.dra,
        catalog,
        &mut notes,
    )?;

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
    dra::add_slice_devices(&inventory.dra, &mut infos);
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

/// The pending pods of one workload with DRA claims: their indices, namespace and spec.
type ClaimingPods<'a> = (
    std::ops::Range<usize>,
    &'a str,
    &'a k8s_openapi::api::core::v1::PodSpec,
);

/// A bound pod with DRA claims: its node, its index among the node's pods, its namespace and
/// spec.
type BoundClaiming<'a> = (
    &'a str,
    usize,
    &'a str,
    &'a k8s_openapi::api::core::v1::PodSpec,
);

/// Folds the DRA claims of the pods that have them, pending and bound, into their requests
/// and node terms (a bound pod's claims count against its node's devices, and consolidation
/// moves it only where its claims are satisfied); see [`dra`].
fn resolve_claims<'a>(
    snapshot: &mut ClusterSnapshot,
    with_claims: &[ClaimingPods<'_>],
    (bound, bound_with_claims): (&mut BTreeMap<&'a str, Vec<Pod>>, &[BoundClaiming<'a>]),
    objects: &dra::DraObjects,
    catalog: Option<&Catalog>,
    notes: &mut Vec<String>,
) -> Result<(), ClusterError> {
    if with_claims.is_empty() && bound_with_claims.is_empty() {
        return Ok(());
    }
    let Some(catalog) = catalog else {
        notes.push(
            "pods with resourceClaims are planned by the devices each instance type publishes: \
             without a catalog their claims are ignored"
                .to_owned(),
        );
        return Ok(());
    };
    let pools = std::mem::take(&mut snapshot.node_pools);
    let mut resolver = dra::Resolver::new(objects, Some(catalog), &pools);
    let mut claimed: BTreeSet<String> = BTreeSet::new();
    let mut result = Ok(());
    for (pods, namespace, spec) in with_claims {
        let requests = snapshot.pending[pods.start].requests;
        let Some(resolution) = resolver.resolve(namespace, spec, &requests) else {
            continue;
        };
        if let Some(choice) = &resolution.fit.choice {
            notes.push(format!(
                "{}: {} planned with {choice}, the cheapest type that satisfies them (other \
                 types would give other devices: see explain)",
                resolution.fit.claims.join(", "),
                if pods.len() == 1 {
                    "its pod is"
                } else {
                    "their pods are"
                },
            ));
        }
        for pod in &mut snapshot.pending[pods.clone()] {
            if let Err(e) = dra::apply(pod, &resolution, &mut claimed, &mut snapshot.resources) {
                result = Err(e);
            }
        }
    }
    for &(node, index, namespace, spec) in bound_with_claims {
        let Some(pod) = bound.get_mut(node).and_then(|pods| pods.get_mut(index)) else {
            continue;
        };
        let Some(resolution) = resolver.resolve(namespace, spec, &pod.requests) else {
            continue;
        };
        if let Err(e) = dra::apply(pod, &resolution, &mut claimed, &mut snapshot.resources) {
            result = Err(e);
        }
    }
    drop(resolver);
    snapshot.node_pools = pools;
    result
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
