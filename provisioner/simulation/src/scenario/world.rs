//! The Kubernetes side of a scenario, resolved for the engine: NodePools, DaemonSets and one
//! solver pod per workload template, all sharing one resource table (built by
//! `quartermaster-cluster` from the manifests, exactly as `quartermaster plan` reads them).

use std::collections::BTreeSet;

use quartermaster_cluster::ClusterError;
use quartermaster_engine::{EngineSetup, PoolPolicy};
use quartermaster_policies::{NodePool, ValidatedObject, validate_manifest};
use quartermaster_solver::{ClusterSnapshot, NODEPOOL_LABEL, NodePoolSpec, Pod, PodRef};
use serde_json::{Value, json};

use super::Scenario;
use crate::error::SimulationError;

/// What the engine and the driver are built from.
#[derive(Debug, Clone)]
pub struct World {
    /// The engine's setup (resource table, pools, DaemonSets, catalog).
    pub setup: EngineSetup,
    /// One solver pod per workload (same order as `Scenario::workloads`), named after the
    /// workload; the driver clones it for every pod it creates.
    pub templates: Vec<Pod>,
    /// One chunk per CapacityBuffer (same order as `Scenario::buffers`): its workload's pod,
    /// named `capacitybuffer-<buffer>`, labelled with the buffer.
    pub buffer_chunks: Vec<Pod>,
    /// The account's reservations (`spec.cloud.reservations`), each with the NodePools whose
    /// NodeClass selects it (`capacityReservationSelectorTerms`: by id, or by tags).
    pub reservations: Vec<quartermaster_engine::ReservationOffer>,
}

impl World {
    /// Index of a NodePool by name.
    pub fn pool(&self, name: &str) -> Option<usize> {
        self.setup.pools.iter().position(|p| p.spec.name == name)
    }
}

/// Where each object handed to `quartermaster-cluster` came from in the scenario file.
struct Origins {
    /// `(object id, field path prefix)`, in input order.
    entries: Vec<(String, String)>,
}

impl Origins {
    fn prefix_of(&self, object: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(id, _)| id == object)
            .map(|(_, p)| p.as_str())
    }

    fn error(&self, file: &str, e: ClusterError) -> SimulationError {
        let (object, field, reason) = match e {
            ClusterError::Unidentified { index, reason } => {
                let prefix = self
                    .entries
                    .get(index.saturating_sub(1))
                    .map_or_else(|| "spec".to_owned(), |(_, p)| p.clone());
                return SimulationError::scenario(file, prefix, reason);
            }
            ClusterError::Invalid {
                object,
                field,
                reason,
            } => (object, field, reason),
            ClusterError::TooManyResources {
                object,
                field,
                resource,
                max,
            } => (
                object,
                field,
                format!(
                    "resource {resource:?} does not fit: a simulation holds at most {max} distinct resources"
                ),
            ),
        };
        let path = match self.prefix_of(&object) {
            Some(prefix) if field.is_empty() => prefix.to_owned(),
            Some(prefix) => format!("{prefix}.{field}"),
            None if field.is_empty() => object,
            None => format!("{object}: {field}"),
        };
        SimulationError::scenario(file, path, reason)
    }
}

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// Checks a Quartermaster manifest with the policies validator; returns the typed object.
fn validated(file: &str, prefix: &str, v: &Value) -> Result<ValidatedObject, SimulationError> {
    validate_manifest(v).map_err(|problems| {
        let first = problems.first();
        let path = match first.map(|p| p.path.as_str()) {
            None | Some("<root>" | "") => prefix.to_owned(),
            Some(p) => format!("{prefix}.{p}"),
        };
        let more = match problems.len() {
            0 | 1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        SimulationError::scenario(
            file,
            path,
            format!("{}{more}", first.map_or("invalid", |p| p.reason.as_str())),
        )
    })
}

/// Builds the engine's setup and the workload templates.
pub fn build(s: &Scenario) -> Result<World, SimulationError> {
    let file = s.file.as_str();
    let mut objects: Vec<Value> = Vec::new();
    let mut origins = Origins {
        entries: Vec::new(),
    };
    let mut typed_pools: Vec<(String, NodePool, String)> = Vec::new();
    for (i, v) in s.node_pools.iter().enumerate() {
        let prefix = format!("spec.nodePools[{i}]");
        if str_at(v, "/kind") != "NodePool" {
            return Err(SimulationError::scenario(
                file,
                format!("{prefix}.kind"),
                format!("expected NodePool, got {:?}", str_at(v, "/kind")),
            ));
        }
        let ValidatedObject::NodePool(pool) = validated(file, &prefix, v)? else {
            unreachable!("a NodePool validates as a NodePool");
        };
        let name = str_at(v, "/metadata/name").to_owned();
        origins
            .entries
            .push((format!("NodePool/{name}"), prefix.clone()));
        typed_pools.push((name, pool, prefix));
        objects.push(v.clone());
    }
    for (i, v) in s.node_classes.iter().enumerate() {
        let prefix = format!("spec.nodeClasses[{i}]");
        let kind = str_at(v, "/kind");
        if !kind.ends_with("NodeClass") {
            return Err(SimulationError::scenario(
                file,
                format!("{prefix}.kind"),
                format!("expected AWSNodeClass, GCPNodeClass or AzureNodeClass, got {kind:?}"),
            ));
        }
        validated(file, &prefix, v)?;
        origins
            .entries
            .push((format!("{kind}/{}", str_at(v, "/metadata/name")), prefix));
        objects.push(v.clone());
    }
    for (i, v) in s.daemon_sets.iter().enumerate() {
        let prefix = format!("spec.daemonSets[{i}]");
        if str_at(v, "/kind") != "DaemonSet" {
            return Err(SimulationError::scenario(
                file,
                format!("{prefix}.kind"),
                format!("expected DaemonSet, got {:?}", str_at(v, "/kind")),
            ));
        }
        let ns = match str_at(v, "/metadata/namespace") {
            "" => "default",
            ns => ns,
        };
        origins.entries.push((
            format!("DaemonSet/{ns}/{}", str_at(v, "/metadata/name")),
            prefix,
        ));
        objects.push(v.clone());
    }
    for (i, v) in s.dynamic_resources.iter().enumerate() {
        let prefix = format!("spec.dynamicResources[{i}]");
        let kind = str_at(v, "/kind");
        if str_at(v, "/apiVersion") != "resource.k8s.io/v1"
            || !matches!(
                kind,
                "DeviceClass" | "ResourceClaimTemplate" | "ResourceClaim"
            )
        {
            return Err(SimulationError::scenario(
                file,
                format!("{prefix}.kind"),
                format!(
                    "expected a resource.k8s.io/v1 DeviceClass, ResourceClaimTemplate or \
                     ResourceClaim, got {:?} {kind:?}",
                    str_at(v, "/apiVersion")
                ),
            ));
        }
        let id = match (kind, str_at(v, "/metadata/namespace")) {
            ("DeviceClass", _) => format!("DeviceClass/{}", str_at(v, "/metadata/name")),
            (_, "") => format!("{kind}/default/{}", str_at(v, "/metadata/name")),
            (_, ns) => format!("{kind}/{ns}/{}", str_at(v, "/metadata/name")),
        };
        let problems = quartermaster_policies::validate::check_manifest(v).errors;
        if let Some(first) = problems.first() {
            return Err(SimulationError::scenario(
                file,
                format!("{prefix}.{}", first.path),
                first.reason.clone(),
            ));
        }
        origins.entries.push((id, prefix));
        objects.push(v.clone());
    }
    for (i, w) in s.workloads.iter().enumerate() {
        origins.entries.push((
            format!("Pod/{}/{}", w.namespace, w.name),
            format!("spec.workload[{i}].template"),
        ));
        objects.push(json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": w.name,
                "namespace": w.namespace,
                "labels": w.metadata.labels,
                "annotations": w.metadata.annotations,
            },
            "spec": w.spec,
        }));
    }
    // NodePools buy in their NodeClass's region, else in the catalog's default region of their
    // cloud (a scenario describes one cluster; it has no region of its own).
    let ingested = quartermaster_cluster::snapshot(
        &objects,
        quartermaster_cluster::SnapshotOptions::priced(&s.catalog),
    )
    .map_err(|e| origins.error(file, e))?;
    let snapshot = ingested.snapshot;
    let mut templates = Vec::new();
    for w in &s.workloads {
        let id = PodRef::new(&w.namespace, &w.name);
        let Some(pod) = snapshot.pending.iter().find(|p| p.id == id) else {
            return Err(SimulationError::scenario(
                file,
                format!("workload {}", w.name),
                "the pod template was not read as a pending pod",
            ));
        };
        let mut pod = pod.clone();
        pod.owner = Some(format!("{}/{}/{}", w.kind_name(), w.namespace, w.name));
        templates.push(pod);
    }
    let mut pools = Vec::new();
    let mut seen = BTreeSet::new();
    for spec in &snapshot.node_pools {
        let Some((_, pool, prefix)) = typed_pools.iter().find(|(n, _, _)| *n == spec.name) else {
            continue;
        };
        if !seen.insert(spec.name.clone()) {
            continue;
        }
        pools.push(PoolPolicy::new(spec.clone(), pool.clone()).map_err(|e| {
            SimulationError::scenario(file, format!("{prefix}.spec.disruption"), e.to_string())
        })?);
    }
    let buffer_chunks = s
        .buffers
        .iter()
        .map(|b| {
            let mut chunk = templates[b.workload].clone();
            chunk.id = PodRef::new(&b.namespace, format!("capacitybuffer-{}", b.name));
            chunk.labels.insert(
                quartermaster_cluster::capacity_buffer::LABEL_BUFFER.to_owned(),
                b.name.clone(),
            );
            chunk.owner = Some(format!("CapacityBuffer/{}/{}", b.namespace, b.name));
            chunk.gang = None;
            chunk
        })
        .collect();
    let reservations = reservation_offers(s);
    // Flex-start offerings (GCP's Dynamic Workload Scheduler) only when a pool opts in: the
    // engine, the driver and the simulated clouds then share them.
    let catalog = quartermaster_solver::flex_start::catalog_for(
        s.catalog.clone(),
        pools.iter().map(|p: &PoolPolicy| &p.spec),
    );
    Ok(World {
        reservations,
        buffer_chunks,
        setup: EngineSetup {
            resources: snapshot.resources,
            pools,
            daemonsets: snapshot.daemonsets,
            catalog,
        },
        templates,
    })
}

/// Every reservation of the scenario's account with the NodePools whose NodeClass selects it.
/// A reservation's cloud is the one whose catalog has its instance type.
fn reservation_offers(s: &Scenario) -> Vec<quartermaster_engine::ReservationOffer> {
    s.cloud
        .reservations
        .iter()
        .filter_map(|config| {
            let cloud = s
                .catalog
                .instance_types()
                .iter()
                .find(|t| t.name == config.instance_type)?
                .cloud;
            let reservation = config.reservation(cloud, s.start);
            let pools = s
                .node_pools
                .iter()
                .filter(|pool| {
                    let (kind, name) = (
                        str_at(pool, "/spec/template/spec/nodeClassRef/kind"),
                        str_at(pool, "/spec/template/spec/nodeClassRef/name"),
                    );
                    s.node_classes
                        .iter()
                        .filter(|c| {
                            str_at(c, "/kind") == kind && str_at(c, "/metadata/name") == name
                        })
                        .any(|c| selects(c, &reservation))
                })
                .map(|pool| str_at(pool, "/metadata/name").to_owned())
                .collect();
            Some(quartermaster_engine::ReservationOffer { reservation, pools })
        })
        .collect()
}

/// Whether NodeClass `class` selects `r` (a term names its id, or all of a term's tags are
/// the reservation's).
fn selects(class: &Value, r: &quartermaster_pricing::Reservation) -> bool {
    let terms = class
        .pointer("/spec/capacityReservationSelectorTerms")
        .and_then(Value::as_array);
    terms.into_iter().flatten().any(|t| {
        if let Some(id) = t.get("id").and_then(Value::as_str) {
            return id == r.id;
        }
        let tags = t.get("tags").and_then(Value::as_object);
        tags.is_some_and(|tags| {
            !tags.is_empty()
                && tags
                    .iter()
                    .all(|(k, v)| r.tags.get(k).map(String::as_str) == v.as_str())
        })
    })
}

/// The NodePools of `s` once `change` replaced those of the same name (by name, in `s`'s order).
pub fn pools_after(
    s: &Scenario,
    change: &super::Change,
) -> Result<Vec<quartermaster_engine::PoolPolicy>, SimulationError> {
    let mut changed = s.clone();
    for new in &change.node_pools {
        let name = str_at(new, "/metadata/name");
        match changed
            .node_pools
            .iter_mut()
            .find(|p| str_at(p, "/metadata/name") == name)
        {
            Some(old) => *old = new.clone(),
            None => changed.node_pools.push(new.clone()),
        }
    }
    Ok(build(&changed)?.setup.pools)
}

/// Whether `catalog` has any offering `pool` allows.
fn has_offering(catalog: &quartermaster_pricing::Catalog, pool: &NodePoolSpec) -> bool {
    catalog.for_cloud(pool.cloud).any(|it| {
        it.offerings.iter().filter(|o| o.available).any(|o| {
            let mut labels = it.offering_labels(o);
            labels.extend(pool.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
            labels.insert(NODEPOOL_LABEL.to_owned(), pool.name.clone());
            pool.requirements.matches(&labels)
        })
    })
}

/// Validation that needs the resolved objects: every NodePool has at least one offering in the
/// catalog, and every workload's pod could run on some NodePool (probed by solving for one such
/// pod on an empty cluster; a pod that is unschedulable there can never run).
pub(super) fn check(s: &Scenario) -> Result<(), SimulationError> {
    let world = build(s)?;
    for (i, change) in s.changes.iter().enumerate() {
        pools_after(s, change).map_err(|e| match e {
            SimulationError::Scenario { file, path, reason } => SimulationError::Scenario {
                file,
                path: path.replacen("spec.nodePools", &format!("spec.changes[{i}].nodePools"), 1),
                reason,
            },
            other => other,
        })?;
    }
    for (i, v) in s.node_pools.iter().enumerate() {
        let name = str_at(v, "/metadata/name");
        let Some(policy) = world.setup.pools.iter().find(|p| p.spec.name == name) else {
            continue;
        };
        if !has_offering(&world.setup.catalog, &policy.spec) {
            return Err(SimulationError::scenario(
                &s.file,
                format!("spec.nodePools[{i}]"),
                format!(
                    "the catalog has no {} offering that NodePool {name} allows (check its requirements)",
                    policy.spec.cloud
                ),
            ));
        }
    }
    for (i, template) in world.templates.iter().enumerate() {
        let snapshot = ClusterSnapshot {
            resources: world.setup.resources.clone(),
            pending: vec![template.clone()],
            nodes: Vec::new(),
            node_pools: world.setup.pools.iter().map(|p| p.spec.clone()).collect(),
            daemonsets: world.setup.daemonsets.clone(),
            unavailable: Default::default(),
            offering_limits: Vec::new(),
        };
        let plan = quartermaster_solver::solve(&snapshot, &world.setup.catalog, s.start);
        if let Some(u) = plan.unschedulable.first() {
            return Err(SimulationError::scenario(
                &s.file,
                format!("spec.workload[{i}].template"),
                format!("no NodePool can ever run this pod: {}", u.reason),
            ));
        }
    }
    Ok(())
}
