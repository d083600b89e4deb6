//! SIG Autoscaling's `CapacityBuffer` (`autoscaling.x-k8s.io/v1alpha1`, the API Cluster
//! Autoscaler, Karpenter and GKE implement): room kept warm for `N` copies of a pod shape, so a
//! new pod of that shape starts on a node that is already up.
//!
//! A buffer names its chunk by `spec.podTemplateRef` (a PodTemplate in its namespace) or
//! `spec.scalableRef` (a Deployment, StatefulSet, ReplicaSet or Job: its pod template, or a pod
//! it runs when only its pods are given). How many chunks ([`BufferPods::replicas`]):
//! - `replicas`, and `percentage` of the workload's replicas (rounded up, at least 1); both
//!   set: the larger;
//! - `limits` caps the chunks so that their requests together stay within it; with neither
//!   `replicas` nor `percentage`, as many chunks as fit in the limits are kept.
//!
//! Only the default provisioning strategy (`buffer.x-k8s.io/active-capacity`: nodes are bought
//! for the chunks) is served; a buffer with another one, or one that cannot be read, carries a
//! [`BufferPods::problem`] and no chunks. The chunks are placeholders, never pods: the engine
//! keeps room for them after every real pod is placed, so real pods take the room first and
//! the buffer is bought again behind them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodSpec;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use quartermaster_solver::{Pod, PodRef, ResourceTable, Resources};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ClusterError;
use crate::objects::{Inventory, Object, part};
use crate::pod::{PodSource, solver_pod};
use crate::selectors::At;

/// The API group.
pub const GROUP: &str = "autoscaling.x-k8s.io";
/// The API version read and written.
pub const API_VERSION: &str = "autoscaling.x-k8s.io/v1alpha1";
/// The kind.
pub const KIND: &str = "CapacityBuffer";
/// The default (and only served) provisioning strategy: nodes are bought for the chunks.
pub const ACTIVE_CAPACITY: &str = "buffer.x-k8s.io/active-capacity";
/// The label on a buffer's placeholder pods, naming the buffer (same namespace).
pub const LABEL_BUFFER: &str = "quartermaster.dev/capacity-buffer";
/// The most chunks one buffer keeps (a typo such as `replicas: 100000` is capped, with a note).
pub const MAX_CHUNKS: u32 = 1_000;

/// `spec` of a CapacityBuffer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CapacityBufferSpec {
    /// How the buffer is kept (`buffer.x-k8s.io/active-capacity` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioning_strategy: Option<String>,
    /// A PodTemplate in the buffer's namespace: the shape of one chunk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template_ref: Option<LocalObjectRef>,
    /// A workload with a scale subresource: its pods' shape, and replicas for `percentage`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scalable_ref: Option<ScalableRef>,
    /// Chunks to keep.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<i32>,
    /// Chunks as a percentage of the scalable workload's replicas.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub percentage: Option<i32>,
    /// The most the chunks may request together.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<BTreeMap<String, Quantity>>,
}

/// A reference by name, in the same namespace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LocalObjectRef {
    /// The name.
    #[serde(default)]
    pub name: String,
}

/// A scalable workload in the same namespace.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScalableRef {
    /// API group (`apps`, `batch`, empty for the core group).
    #[serde(default)]
    pub api_group: String,
    /// Kind (`Deployment`, `StatefulSet`, `ReplicaSet`, `Job`).
    #[serde(default)]
    pub kind: String,
    /// Name.
    #[serde(default)]
    pub name: String,
}

/// A buffer as read, with its chunk and how many chunks to keep.
#[derive(Debug, Clone, PartialEq)]
pub struct BufferPods {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.generation` (conditions record it).
    pub generation: Option<i64>,
    /// What the chunk's shape was read from (`PodTemplate/gpu-shape`, `Deployment/vllm`).
    pub source: Option<String>,
    /// One chunk: its id is `namespace/capacitybuffer-<name>` (the engine numbers the copies),
    /// labelled [`LABEL_BUFFER`].
    pub chunk: Option<Pod>,
    /// Chunks to keep.
    pub replicas: u32,
    /// Why the buffer keeps nothing (unknown strategy, missing template or workload, no count).
    pub problem: Option<String>,
}

impl BufferPods {
    /// `namespace/name`.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// A buffer read from the input, before its chunk is made.
#[derive(Debug, Clone)]
pub(crate) struct BufferObject {
    pub object: Object<Option<CapacityBufferSpec>>,
    /// Why `spec` could not be read, if it could not.
    pub malformed: Option<String>,
}

/// Whether `(group, kind)` is read here.
pub(crate) fn is_read_here(api_group: &str, kind: &str) -> bool {
    api_group == GROUP && kind == KIND
}

/// Reads a CapacityBuffer into the inventory. One whose spec cannot be read is kept (it gets a
/// problem, and its status says so).
pub(crate) fn read(inv: &mut Inventory, value: &Value) -> Result<(), ClusterError> {
    let (id, namespace, name, meta) = crate::objects::namespaced(value, KIND)?;
    let (spec, malformed) = match part::<CapacityBufferSpec>(value, "spec", &id) {
        Ok(Some(spec)) => (Some(spec), None),
        Ok(None) => (None, Some("spec: missing".to_owned())),
        Err(e) => (None, Some(e.to_string())),
    };
    inv.capacity_buffers.push(BufferObject {
        object: Object {
            id,
            namespace,
            name,
            meta,
            spec,
            status: (),
        },
        malformed,
    });
    Ok(())
}

/// The name of a buffer's `index`-th placeholder pod.
pub fn chunk_name(buffer: &str, index: u32) -> String {
    format!("capacitybuffer-{buffer}-{index}")
}

/// Reads every buffer of the inventory: its chunk (registering new resources in `table`) and
/// its count.
pub(crate) fn expand(
    inv: &Inventory,
    table: &mut ResourceTable,
    notes: &mut Vec<String>,
) -> Vec<BufferPods> {
    inv.capacity_buffers
        .iter()
        .map(|b| {
            let o = &b.object;
            let mut out = BufferPods {
                namespace: o.namespace.clone(),
                name: o.name.clone(),
                generation: o.meta.generation,
                source: None,
                chunk: None,
                replicas: 0,
                problem: None,
            };
            if let Err(problem) = resolve(b, inv, table, notes, &mut out) {
                out.problem = Some(problem);
                out.chunk = None;
                out.replicas = 0;
            }
            out
        })
        .collect()
}

/// A workload the chunk is copied from: its pod spec and labels, and its replicas.
struct Shape<'a> {
    spec: &'a PodSpec,
    labels: BTreeMap<String, String>,
    owner: Option<String>,
    replicas: Option<u32>,
    source: String,
    spec_path: &'static str,
    object: String,
}

fn resolve(
    b: &BufferObject,
    inv: &Inventory,
    table: &mut ResourceTable,
    notes: &mut Vec<String>,
    out: &mut BufferPods,
) -> Result<(), String> {
    if let Some(m) = &b.malformed {
        return Err(m.clone());
    }
    let o = &b.object;
    let spec = o.spec.as_ref().ok_or("spec: missing")?;
    let strategy = spec
        .provisioning_strategy
        .as_deref()
        .unwrap_or(ACTIVE_CAPACITY);
    if strategy != ACTIVE_CAPACITY {
        return Err(format!(
            "spec.provisioningStrategy: {strategy:?} is not served (only {ACTIVE_CAPACITY:?})"
        ));
    }
    let shape = match (&spec.pod_template_ref, &spec.scalable_ref) {
        (Some(_), Some(_)) => {
            return Err("spec: podTemplateRef and scalableRef are both set (one of them)".into());
        }
        (None, None) => return Err("spec: neither podTemplateRef nor scalableRef is set".into()),
        (Some(t), None) => {
            if spec.replicas.is_none() && spec.limits.is_none() {
                return Err("spec: podTemplateRef needs replicas or limits".into());
            }
            if spec.percentage.is_some() {
                notes.push(format!(
                    "{}: spec.percentage applies to a scalableRef only; ignored",
                    o.id
                ));
            }
            let template = inv
                .pod_templates
                .get(&(o.namespace.clone(), t.name.clone()))
                .ok_or_else(|| {
                    format!(
                        "spec.podTemplateRef: PodTemplate {}/{} is not found",
                        o.namespace, t.name
                    )
                })?;
            let pod_template = template.spec.as_ref().ok_or_else(|| {
                format!("PodTemplate {}/{}: template: missing", o.namespace, t.name)
            })?;
            Shape {
                spec: pod_template.spec.as_ref().ok_or_else(|| {
                    format!(
                        "PodTemplate {}/{}: template.spec: missing",
                        o.namespace, t.name
                    )
                })?,
                labels: pod_template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.labels.clone())
                    .unwrap_or_default(),
                owner: None,
                replicas: None,
                source: format!("PodTemplate/{}", t.name),
                spec_path: "template.spec",
                object: template.id.clone(),
            }
        }
        (None, Some(s)) => scalable(inv, &o.namespace, s)?,
    };
    out.source = Some(shape.source.clone());

    let at = At {
        object: &shape.object,
        spec_path: shape.spec_path,
    };
    let source = PodSource {
        id: PodRef::new(&o.namespace, format!("capacitybuffer-{}", o.name)),
        labels: shape.labels.clone(),
        spec: shape.spec,
        owner: shape.owner.clone(),
        at,
    };
    let mut chunk = solver_pod(&source, table, notes).map_err(|e| e.to_string())?;
    chunk.labels.insert(LABEL_BUFFER.to_owned(), o.name.clone());
    chunk.owner = Some(format!("{KIND}/{}/{}", o.namespace, o.name));

    let mut replicas = chunk_count(spec, &chunk.requests, table, shape.replicas, &o.id)?;
    if replicas > MAX_CHUNKS {
        notes.push(format!(
            "{}: {replicas} chunks capped at {MAX_CHUNKS}",
            o.id
        ));
        replicas = MAX_CHUNKS;
    }
    out.chunk = Some(chunk);
    out.replicas = replicas;
    Ok(())
}

/// How many chunks a buffer keeps: `replicas`, `percentage` of `workload_replicas` (the
/// scalable workload's, rounded up, at least 1), the larger of both when both are set, capped
/// by `limits` (alone: as many as fit). `id` names the buffer in messages. Not capped at
/// [`MAX_CHUNKS`].
pub fn chunk_count(
    spec: &CapacityBufferSpec,
    requests: &Resources,
    table: &ResourceTable,
    workload_replicas: Option<u32>,
    id: &str,
) -> Result<u32, String> {
    let count = |v: i32, field: &str| {
        u32::try_from(v).map_err(|_| format!("spec.{field}: must not be negative, got {v}"))
    };
    let by_replicas = spec.replicas.map(|r| count(r, "replicas")).transpose()?;
    let by_percentage = match (spec.percentage, spec.scalable_ref.is_some()) {
        (Some(p), true) => {
            let p = count(p, "percentage")?;
            let workload = workload_replicas.unwrap_or(0);
            // Rounded up, at least one chunk.
            let n = (u64::from(workload) * u64::from(p)).div_ceil(100).max(1);
            Some(u32::try_from(n).unwrap_or(u32::MAX))
        }
        _ => None,
    };
    let limit = match &spec.limits {
        Some(limits) => Some(chunks_within(limits, requests, table, id)?),
        None => None,
    };
    let wanted = match (by_replicas, by_percentage) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    match (wanted, limit) {
        (Some(w), Some(l)) => Ok(w.min(l)),
        (Some(w), None) => Ok(w),
        (None, Some(l)) => Ok(l),
        (None, None) => Err("spec: neither replicas, percentage nor limits is set".into()),
    }
}

/// How many chunks of `requests` fit within `limits` (resources the chunk does not request do
/// not limit it).
fn chunks_within(
    limits: &BTreeMap<String, Quantity>,
    requests: &Resources,
    table: &ResourceTable,
    id: &str,
) -> Result<u32, String> {
    let mut fit = u64::from(MAX_CHUNKS) + 1;
    for (name, q) in limits {
        let limit = crate::quantities::amount(name, q, id, &format!("spec.limits.{name}"))
            .map_err(|e| e.to_string())?;
        let Some(slot) = table.slot(name) else {
            continue;
        };
        let each = requests.get(slot);
        if each > 0 {
            fit = fit.min(u64::try_from(limit / each).unwrap_or(0));
        }
    }
    Ok(u32::try_from(fit).unwrap_or(u32::MAX))
}

/// The shape and replicas of a scalable workload: its object when given, else a pod it runs.
fn scalable<'a>(inv: &'a Inventory, namespace: &str, s: &ScalableRef) -> Result<Shape<'a>, String> {
    let missing = || {
        format!(
            "spec.scalableRef: {} {namespace}/{} is not found (neither the object nor a pod of it)",
            s.kind, s.name
        )
    };
    let owner = Some(format!("{}/{namespace}/{}", s.kind, s.name));
    let source = format!("{}/{}", s.kind, s.name);
    let found = |ns: &str, n: &str| ns == namespace && n == s.name;
    let from_template =
        |t: &'a k8s_openapi::api::core::v1::PodTemplateSpec, replicas: Option<i32>, id: &str| {
            Ok::<_, String>(Shape {
                spec: t
                    .spec
                    .as_ref()
                    .ok_or_else(|| format!("{id}: spec.template.spec: missing"))?,
                labels: t
                    .metadata
                    .as_ref()
                    .and_then(|m| m.labels.clone())
                    .unwrap_or_default(),
                owner: owner.clone(),
                replicas: Some(replicas.map_or(1, |r| u32::try_from(r).unwrap_or(0))),
                source: source.clone(),
                spec_path: "spec.template.spec",
                object: id.to_owned(),
            })
        };
    match s.kind.as_str() {
        "Deployment" => {
            if let Some(d) = inv
                .deployments
                .iter()
                .find(|d| found(&d.namespace, &d.name))
            {
                return from_template(&d.spec.template, d.spec.replicas, &d.id);
            }
        }
        "StatefulSet" => {
            if let Some(d) = inv
                .stateful_sets
                .iter()
                .find(|d| found(&d.namespace, &d.name))
            {
                return from_template(&d.spec.template, d.spec.replicas, &d.id);
            }
        }
        "ReplicaSet" => {
            if let Some(d) = inv
                .replica_sets
                .iter()
                .find(|d| found(&d.namespace, &d.name))
                && let Some(t) = &d.spec.template
            {
                return from_template(t, d.spec.replicas, &d.id);
            }
        }
        "Job" => {
            if let Some(d) = inv.jobs.iter().find(|d| found(&d.namespace, &d.name)) {
                return from_template(&d.spec.template, d.spec.parallelism, &d.id);
            }
        }
        other => {
            return Err(format!(
                "spec.scalableRef.kind: {other:?} is not read (Deployment, StatefulSet, ReplicaSet or Job)"
            ));
        }
    }
    // Only its pods are given (the controller): the workload's live pods, and one as the shape.
    let pods: Vec<_> = inv
        .pods
        .iter()
        .filter(|p| p.namespace == namespace && p.meta.deletion_timestamp.is_none())
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .filter(|p| owned_by(p, &s.kind, &s.name))
        .collect();
    let first = pods.first().ok_or_else(missing)?;
    Ok(Shape {
        spec: &first.spec,
        labels: first.labels(),
        owner,
        replicas: Some(u32::try_from(pods.len()).unwrap_or(u32::MAX)),
        source,
        spec_path: "spec",
        object: first.id.clone(),
    })
}

/// Whether a pod is run by workload `kind`/`name`: directly, or (a Deployment) through its
/// ReplicaSet `<name>-<pod-template-hash>`.
fn owned_by<S, T>(pod: &Object<S, T>, kind: &str, name: &str) -> bool {
    let Some(c) = pod.controller() else {
        return false;
    };
    if kind == "Deployment" {
        let hash = pod
            .meta
            .labels
            .as_ref()
            .and_then(|l| l.get("pod-template-hash"));
        return c.kind == "ReplicaSet" && hash.is_some_and(|h| c.name == format!("{name}-{h}"));
    }
    c.kind == kind && c.name == name
}

#[cfg(test)]
#[path = "capacity_buffer_tests.rs"]
mod tests;
