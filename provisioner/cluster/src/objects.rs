//! Routing raw objects by API group and kind into typed buckets ([`Inventory`]); every other
//! kind is skipped with a note. A kind alone never decides: Volcano's `batch.volcano.sh` `Job` is
//! not a `batch/v1` Job.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{DaemonSetSpec, DeploymentSpec, ReplicaSetSpec, StatefulSetSpec};
use k8s_openapi::api::batch::v1::{JobSpec, JobStatus};
use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus, Pod as KubePod, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use quartermaster_policies::labels::GROUP;
use quartermaster_policies::validate::KINDS;
use quartermaster_policies::{NodeClaim, NodePool, ValidatedObject, validate_manifest};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::error::ClusterError;
use crate::input::{AsInput, Input};
use crate::workloads::custom::{self, CustomWorkload};

/// One Kubernetes object: identity, metadata, spec and status.
#[derive(Debug, Clone)]
pub(crate) struct Object<S, T = ()> {
    /// `Kind/namespace/name` (namespaced kinds) or `Kind/name`.
    pub id: String,
    /// Namespace (`default` when unset; empty for cluster-scoped kinds).
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// Metadata.
    pub meta: ObjectMeta,
    /// `spec`.
    pub spec: S,
    /// `status`.
    pub status: T,
}

impl Object<(), ()> {
    /// The same identity with a spec and a status.
    fn with<S, T>(self, spec: S, status: T) -> Object<S, T> {
        Object {
            id: self.id,
            namespace: self.namespace,
            name: self.name,
            meta: self.meta,
            spec,
            status,
        }
    }
}

impl<S, T> Object<S, T> {
    /// `metadata.labels`.
    pub fn labels(&self) -> BTreeMap<String, String> {
        self.meta.labels.clone().unwrap_or_default()
    }

    /// The owner reference marked `controller: true`.
    pub fn controller(&self) -> Option<&OwnerReference> {
        self.meta
            .owner_references
            .iter()
            .flatten()
            .find(|o| o.controller == Some(true))
    }
}

/// Every object that matters for planning, by kind, in input order.
#[derive(Debug, Default)]
pub(crate) struct Inventory {
    pub pods: Vec<Object<PodSpec, Option<PodStatus>>>,
    pub deployments: Vec<Object<DeploymentSpec>>,
    pub replica_sets: Vec<Object<ReplicaSetSpec>>,
    pub stateful_sets: Vec<Object<StatefulSetSpec>>,
    pub jobs: Vec<Object<JobSpec, Option<JobStatus>>>,
    pub daemon_sets: Vec<Object<DaemonSetSpec>>,
    pub nodes: Vec<Object<NodeSpec, Option<NodeStatus>>>,
    pub node_pools: Vec<(String, NodePool)>,
    pub node_claims: Vec<(String, NodeClaim)>,
    /// `(kind, name)` of every NodeClass given.
    pub node_classes: BTreeSet<(String, String)>,
    /// Workload custom resources (PyTorchJob, LeaderWorkerSet, RayService…), read into pod groups.
    pub custom: Vec<CustomWorkload>,
    /// Karpenter NodeOverlays: capacity the catalog cannot know.
    pub overlays: Vec<quartermaster_solver::CapacityOverlay>,
    /// Gang PodGroups (Volcano `scheduling.volcano.sh`, coscheduling `scheduling.x-k8s.io`):
    /// `(namespace, name)` → `spec.minMember`.
    pub pod_groups: BTreeMap<(String, String), u32>,
    /// ProvisioningRequests (`autoscaling.x-k8s.io`), in input order.
    pub provisioning_requests: Vec<crate::provisioning_request::RequestObject>,
    /// PodTemplates by `(namespace, name)` (what ProvisioningRequests name).
    pub pod_templates: BTreeMap<(String, String), crate::provisioning_request::PodTemplateObject>,
    /// CapacityBuffers (`autoscaling.x-k8s.io/v1alpha1`), in input order.
    pub capacity_buffers: Vec<crate::capacity_buffer::BufferObject>,
    pub dra: crate::dra::DraObjects,
    /// Kinds skipped (`Kind`, or `Kind.group` outside the core group), with how many objects of
    /// each.
    pub skipped: BTreeMap<String, usize>,
}

/// The built-in kinds read for planning, by `(API group, kind)`.
const BUILT_IN: [(&str, &str); 7] = [
    ("", "Pod"),
    ("", "Node"),
    ("apps", "Deployment"),
    ("apps", "ReplicaSet"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("batch", "Job"),
];

/// How a skipped kind is named in the note: `Kind` in the core group, `Kind.group` elsewhere.
fn skipped_name(group: &str, kind: &str) -> String {
    if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    }
}

/// A namespaced object's identity: `Kind/namespace/name` (namespace `default` when unset), its
/// namespace, name and metadata; a missing name is an error.
pub(crate) fn namespaced(
    value: &Value,
    kind: &str,
) -> Result<(String, String, String, ObjectMeta), ClusterError> {
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let namespace = value
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .unwrap_or("default")
        .to_owned();
    let id = format!("{kind}/{namespace}/{name}");
    if name.is_empty() {
        return Err(ClusterError::invalid(&id, "metadata.name", "missing"));
    }
    let meta: ObjectMeta = part(value, "metadata", &id)?.unwrap_or_default();
    Ok((id, namespace, name, meta))
}

/// Deserialises `value[key]` as `T`; errors carry the field path under `key`.
pub(crate) fn part<T: DeserializeOwned>(
    value: &Value,
    key: &str,
    id: &str,
) -> Result<Option<T>, ClusterError> {
    match value.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => serde_path_to_error::deserialize(v).map(Some).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." {
                key.to_owned()
            } else {
                format!("{key}.{path}")
            };
            ClusterError::invalid(id, field, e.into_inner().to_string())
        }),
    }
}

/// [`part`], required.
fn required<T: DeserializeOwned>(value: &Value, key: &str, id: &str) -> Result<T, ClusterError> {
    part(value, key, id)?.ok_or_else(|| ClusterError::invalid(id, key, "missing"))
}

/// The API group of an `apiVersion` (`""` for the core group).
pub(crate) fn group(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(g, _)| g)
}

/// Validates a Quartermaster object with the policies crate; the error names the first problem
/// and counts the others.
fn validated(value: &Value, id: &str) -> Result<ValidatedObject, ClusterError> {
    validate_manifest(value).map_err(|problems| {
        let more = match problems.len() {
            0 | 1 => String::new(),
            n => format!(" (and {} more; see `quartermaster validate`)", n - 1),
        };
        match problems.first() {
            Some(first) => {
                ClusterError::invalid(id, &first.path, format!("{}{more}", first.reason))
            }
            None => ClusterError::invalid(id, "", "invalid"),
        }
    })
}

impl Inventory {
    /// Sorts `objects` by API group and kind. Fails on an object without a kind or name, or with a malformed
    /// field in a kind that is used.
    pub fn sort<O: AsInput>(
        objects: &[O],
        notes: &mut Vec<String>,
    ) -> Result<Inventory, ClusterError> {
        let mut inv = Inventory::default();
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for (index, object) in objects.iter().enumerate() {
            match object.as_input() {
                Input::Manifest(value) => inv.sort_manifest(index, value, &mut seen, notes)?,
                Input::Pod(pod) => inv.add_pod(index, pod, None, &mut seen)?,
                Input::Unplaced { pod, bound } => {
                    inv.add_pod(index, pod, Some(bound), &mut seen)?
                }
            }
        }
        Ok(inv)
    }

    /// Adds a typed Pod, as [`Inventory::sort_manifest`] adds the manifest of the same pod;
    /// `unplaced`: as [`Input::Unplaced`] with that `bound`.
    fn add_pod(
        &mut self,
        index: usize,
        pod: &KubePod,
        unplaced: Option<bool>,
        seen: &mut BTreeSet<String>,
    ) -> Result<(), ClusterError> {
        let meta = &pod.metadata;
        let name = meta.name.as_deref().unwrap_or_default();
        if name.is_empty() {
            return Err(ClusterError::Unidentified {
                index: index + 1,
                reason: "Pod without metadata.name".to_owned(),
            });
        }
        let namespace = meta
            .namespace
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or("default");
        let id = format!("Pod/{namespace}/{name}");
        if !seen.insert(id.clone()) {
            return Err(ClusterError::invalid(&id, "metadata.name", "given twice"));
        }
        let Some(spec) = &pod.spec else {
            return Err(ClusterError::invalid(&id, "spec", "missing"));
        };
        let mut object = Object {
            id,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            meta: meta.clone(),
            spec: spec.clone(),
            // An unplaced pod's status is not read: not copied either.
            status: if unplaced.is_some() {
                None
            } else {
                pod.status.clone()
            },
        };
        if let Some(bound) = unplaced {
            object.spec.node_name = None;
            if bound {
                crate::provisioning_request::mark_bound_consumer(&mut object.meta);
            }
        }
        self.pods.push(object);
        Ok(())
    }

    /// Sorts one manifest (the `index`th object) by API group and kind.
    fn sort_manifest(
        &mut self,
        index: usize,
        value: &Value,
        seen: &mut BTreeSet<String>,
        notes: &mut Vec<String>,
    ) -> Result<(), ClusterError> {
        let unidentified = |reason: &str| ClusterError::Unidentified {
            index: index + 1,
            reason: reason.to_owned(),
        };
        let kind = value
            .get("kind")
            .and_then(Value::as_str)
            .filter(|k| !k.is_empty());
        let Some(kind) = kind else {
            return Err(unidentified("no kind"));
        };
        let api_version = value
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let api_group = group(api_version);
        let is_quartermaster = api_group == GROUP;
        // Without an apiVersion (hand-written snippets), a built-in kind is read as itself.
        let built_in = BUILT_IN
            .iter()
            .any(|(g, k)| *k == kind && (*g == api_group || api_version.is_empty()));
        let custom_kind = custom::kind_of(api_group, kind);
        if kind == "PodGroup"
            && matches!(api_group, "scheduling.volcano.sh" | "scheduling.x-k8s.io")
        {
            let ns = value
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .filter(|n| !n.is_empty())
                .unwrap_or("default");
            let name = value
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let min = value
                .pointer("/spec/minMember")
                .and_then(Value::as_u64)
                .and_then(|m| u32::try_from(m).ok())
                .unwrap_or(0);
            self.pod_groups
                .insert((ns.to_owned(), name.to_owned()), min);
            return Ok(());
        }
        if crate::capacity_buffer::is_read_here(api_group, kind) {
            crate::capacity_buffer::read(self, value)?;
            return Ok(());
        }
        if crate::dra::is_read_here(api_group, kind) {
            crate::dra::read(&mut self.dra, value, kind)?;
            return Ok(());
        }
        if crate::provisioning_request::is_read_here(api_group, kind) {
            crate::provisioning_request::read(self, value, kind)?;
            return Ok(());
        }
        if api_group == crate::overlay::GROUP && kind == crate::overlay::KIND {
            let id = format!(
                "{kind}/{}",
                value
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            );
            let mut overlay = crate::overlay::read(&id, value, notes)?;
            let devices =
                crate::dra::overrides::read(&id, value, overlay.weight, &overlay.requirements)?;
            for o in &devices {
                // A driver counted in a resource named after it: the overlay's types have
                // that many of it (unless the overlay's capacity says otherwise).
                if crate::dra::resource_of_driver(&o.driver).is_none() {
                    let n = u64::try_from(o.devices.len()).unwrap_or(u64::MAX);
                    overlay.capacity.entry(o.driver.clone()).or_insert(n);
                }
            }
            self.dra.overrides.extend(devices);
            self.overlays.push(overlay);
            return Ok(());
        }
        let used = built_in || custom_kind.is_some() || (is_quartermaster && KINDS.contains(&kind));
        let name = value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !used && !matches!(kind, "NodePool" | "NodeClaim") {
            *self
                .skipped
                .entry(skipped_name(api_group, kind))
                .or_default() += 1;
            return Ok(());
        }
        if name.is_empty() {
            return Err(unidentified(&format!("{kind} without metadata.name")));
        }
        let namespace = value
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .unwrap_or("default");
        // A custom kind whose name is also a built-in one is named with its group.
        let shown = custom_kind.map_or(kind, |c| c.name());
        let namespaced = format!("{shown}/{namespace}/{name}");
        let cluster_scoped = format!("{kind}/{name}");
        let ns = namespace.to_owned();
        let object = |id: &str, namespace: String| -> Result<Object<(), ()>, ClusterError> {
            Ok(Object {
                id: id.to_owned(),
                namespace,
                name: name.to_owned(),
                meta: required(value, "metadata", id)?,
                spec: (),
                status: (),
            })
        };
        let identity = match kind {
            _ if custom_kind.is_some() => Some(&namespaced),
            "Node" if built_in => Some(&cluster_scoped),
            _ if built_in => Some(&namespaced),
            k if is_quartermaster && KINDS.contains(&k) => Some(&cluster_scoped),
            _ => None,
        };
        if let Some(identity) = identity
            && !seen.insert(identity.clone())
        {
            return Err(ClusterError::invalid(
                identity,
                "metadata.name",
                "given twice",
            ));
        }
        let id = namespaced.as_str();
        if let Some(custom_kind) = custom_kind {
            let spec: Value = required(value, "spec", id)?;
            self.custom
                .push(custom::read(custom_kind, object(id, ns)?.with(spec, ()))?);
            return Ok(());
        }
        match kind {
            "Pod" => self.pods.push(
                object(id, ns)?.with(required(value, "spec", id)?, part(value, "status", id)?),
            ),
            "Deployment" => self
                .deployments
                .push(object(id, ns)?.with(required(value, "spec", id)?, ())),
            "ReplicaSet" => self
                .replica_sets
                .push(object(id, ns)?.with(required(value, "spec", id)?, ())),
            "StatefulSet" => self
                .stateful_sets
                .push(object(id, ns)?.with(required(value, "spec", id)?, ())),
            "Job" => self.jobs.push(
                object(id, ns)?.with(required(value, "spec", id)?, part(value, "status", id)?),
            ),
            "DaemonSet" => self
                .daemon_sets
                .push(object(id, ns)?.with(required(value, "spec", id)?, ())),
            "Node" if built_in => {
                let id = cluster_scoped.as_str();
                let spec = part::<NodeSpec>(value, "spec", id)?.unwrap_or_default();
                self.nodes
                    .push(object(id, String::new())?.with(spec, part(value, "status", id)?));
            }
            k if is_quartermaster && KINDS.contains(&k) => {
                let id = cluster_scoped.as_str();
                match validated(value, id)? {
                    ValidatedObject::NodePool(pool) => self.node_pools.push((id.to_owned(), pool)),
                    ValidatedObject::NodeClaim(claim) => {
                        self.node_claims.push((id.to_owned(), claim))
                    }
                    class => {
                        self.node_classes
                            .insert((class.kind().to_owned(), name.to_owned()));
                    }
                }
            }
            "NodePool" | "NodeClaim" => {
                notes.push(format!(
                    "{cluster_scoped}: apiVersion {api_version:?} is not {GROUP}; skipped"
                ));
            }
            other => {
                *self
                    .skipped
                    .entry(skipped_name(api_group, other))
                    .or_default() += 1
            }
        }
        Ok(())
    }
}
