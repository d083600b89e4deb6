//! CapacityBuffers (`autoscaling.x-k8s.io/v1alpha1`, SIG Autoscaling's headroom API) served in
//! the cluster: read with the other objects each pass, told to the engine as buffers
//! ([`quartermaster_engine::Buffer`]) when they change, and their status written with
//! server-side apply by the leader.
//!
//! A buffer that names its chunk by `scalableRef` is read from the workload's live pods (the
//! controller watches pods, not every workload kind): one of them is the chunk's shape (as a
//! PodTemplate `quartermaster-buffer-<buffer>` handed to the reader, never written to the
//! cluster) and their count the workload's replicas for `percentage`.
//!
//! Status, as Cluster Autoscaler's buffer controller writes it: `replicas` (chunks kept) and
//! the conditions `ReadyForProvisioning` (read; reason `AttributesSetSuccessfully`, or `Error`
//! with the problem) and `Provisioning` (`True` when every chunk holds room; `False`, reason
//! `CapacityPending`, with how many do).

use std::borrow::Cow;
use std::collections::BTreeMap;

use chrono::{DateTime, TimeDelta, Utc};
use k8s_openapi::NamespaceResourceScope;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use quartermaster_cluster::capacity_buffer::{
    API_VERSION, BufferPods, CapacityBufferSpec, GROUP, KIND, chunk_count,
};
use quartermaster_engine::{Buffer, Engine};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::time::to_kube;

/// Condition type: the buffer was read and will be served.
pub const READY_FOR_PROVISIONING: &str = "ReadyForProvisioning";
/// Condition type: every chunk of the buffer holds room.
pub const PROVISIONING: &str = "Provisioning";
/// The name of the PodTemplate a `scalableRef` buffer's chunk is read from (never written).
pub fn template_name(buffer: &str) -> String {
    format!("quartermaster-buffer-{buffer}")
}

/// A CapacityBuffer as watched: spec and status kept as JSON (a malformed spec makes the
/// buffer's condition say so, never the watch fail).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct CapacityBuffer {
    /// Metadata.
    pub metadata: ObjectMeta,
    /// `spec`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Value>,
    /// `status`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
}

impl kube::Resource for CapacityBuffer {
    type DynamicType = ();
    type Scope = NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(KIND)
    }

    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(GROUP)
    }

    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1alpha1")
    }

    fn api_version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed(API_VERSION)
    }

    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("capacitybuffers")
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// The buffers as objects for the snapshot. A `scalableRef` buffer whose workload runs pods
/// becomes a `podTemplateRef` buffer over a PodTemplate made from one of them, with
/// `replicas` from `replicas` and `percentage` of the pods counted (`limits` kept); one whose
/// workload has no pod is passed as it is (the reader says the workload is not found).
pub fn objects(
    buffers: &[std::sync::Arc<CapacityBuffer>],
    pods: &[std::sync::Arc<Pod>],
) -> Vec<Value> {
    let mut out = Vec::new();
    for b in buffers {
        let Ok(mut v) = serde_json::to_value(b.as_ref()) else {
            continue;
        };
        v["apiVersion"] = Value::from(API_VERSION);
        v["kind"] = Value::from(KIND);
        if let Some(template) = scalable_as_template(b, pods, &mut v) {
            out.push(template);
        }
        out.push(v);
    }
    out
}

/// Rewrites `value` (a `scalableRef` buffer) onto a PodTemplate made from its workload's first
/// live pod; returns the template.
fn scalable_as_template(
    b: &CapacityBuffer,
    pods: &[std::sync::Arc<Pod>],
    value: &mut Value,
) -> Option<Value> {
    let spec: CapacityBufferSpec = serde_json::from_value(b.spec.clone()?).ok()?;
    let target = spec.scalable_ref.as_ref()?;
    if spec.pod_template_ref.is_some() {
        return None;
    }
    let namespace = b.metadata.namespace.as_deref().unwrap_or("default");
    let name = b.metadata.name.as_deref()?;
    let mut live: Vec<&Pod> = pods
        .iter()
        .map(|p| p.as_ref())
        .filter(|p| p.metadata.namespace.as_deref() == Some(namespace))
        .filter(|p| p.metadata.deletion_timestamp.is_none() && !crate::translate::is_finished(p))
        .filter(|p| owned_by(p, &target.kind, &target.name))
        .collect();
    live.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let first = live.first()?;
    let mut pod_spec = serde_json::to_value(first.spec.as_ref()?).ok()?;
    if let Some(o) = pod_spec.as_object_mut() {
        o.remove("nodeName");
    }
    // The count the reader would have made from the workload, limits left to it.
    let mut counting = spec.clone();
    counting.limits = None;
    let replicas = if counting.replicas.is_some() || counting.percentage.is_some() {
        let n = u32::try_from(live.len()).unwrap_or(u32::MAX);
        chunk_count(
            &counting,
            &Default::default(),
            &Default::default(),
            Some(n),
            name,
        )
        .ok()
    } else {
        None
    };
    let template = template_name(name);
    let s = &mut value["spec"];
    if let Some(o) = s.as_object_mut() {
        o.remove("scalableRef");
        o.remove("percentage");
        o.insert("podTemplateRef".into(), json!({ "name": template }));
        if let Some(r) = replicas {
            o.insert("replicas".into(), json!(r));
        }
    }
    Some(json!({
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": template, "namespace": namespace},
        "template": {
            "metadata": {"labels": first.metadata.labels.clone().unwrap_or_default()},
            "spec": pod_spec,
        },
    }))
}

/// Whether `pod` is run by workload `kind`/`name`: directly, or (a Deployment) through its
/// ReplicaSet `<name>-<pod-template-hash>`.
fn owned_by(pod: &Pod, kind: &str, name: &str) -> bool {
    let Some(c) = pod
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
    else {
        return false;
    };
    if kind == "Deployment" {
        let hash = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("pod-template-hash"));
        return c.kind == "ReplicaSet" && hash.is_some_and(|h| c.name == format!("{name}-{h}"));
    }
    c.kind == kind && c.name == name
}

/// The engine's buffers from what the reader made of them (problems keep nothing).
pub fn engine_buffers(buffers: &[BufferPods]) -> Vec<Buffer> {
    buffers
        .iter()
        .filter_map(|b| {
            Some(Buffer {
                key: b.key(),
                chunk: b.chunk.clone()?,
                replicas: b.replicas,
            })
        })
        .collect()
}

/// The status `buffer` should have given where the engine holds its chunks: `None` when the
/// store already shows it.
pub fn desired_status(
    buffer: &BufferPods,
    found: Option<&Value>,
    engine: &Engine,
    now: DateTime<Utc>,
) -> Option<Value> {
    let key = buffer.key();
    let held = engine
        .headroom()
        .filter(|h| h.buffer == key && h.claim.is_some())
        .count();
    let old: Vec<Condition> = found
        .and_then(|s| s.get("conditions"))
        .and_then(|c| serde_json::from_value(c.clone()).ok())
        .unwrap_or_default();
    let mut conditions = Vec::new();
    let mut set = |type_: &str, on: bool, reason: &str, message: String| {
        let value = if on { "True" } else { "False" };
        let since = old
            .iter()
            .find(|c| c.type_ == type_ && c.status == value)
            .map_or_else(|| to_kube(now), |c| c.last_transition_time.clone());
        conditions.push(Condition {
            type_: type_.to_owned(),
            status: value.to_owned(),
            reason: reason.to_owned(),
            message,
            observed_generation: buffer.generation,
            last_transition_time: since,
        });
    };
    match &buffer.problem {
        Some(problem) => set(READY_FOR_PROVISIONING, false, "Error", problem.clone()),
        None => {
            set(
                READY_FOR_PROVISIONING,
                true,
                "AttributesSetSuccessfully",
                format!(
                    "{} chunk(s) of {}",
                    buffer.replicas,
                    buffer.source.as_deref().unwrap_or("the template")
                ),
            );
            let all = held >= buffer.replicas as usize;
            set(
                PROVISIONING,
                all,
                if all {
                    "CapacityProvisioned"
                } else {
                    "CapacityPending"
                },
                format!("{held} of {} chunk(s) hold room", buffer.replicas),
            );
        }
    }
    let status = json!({
        "replicas": buffer.replicas,
        "conditions": conditions,
    });
    let same = found.is_some_and(|f| {
        f.get("replicas") == status.get("replicas") && same_ignoring_times(&old, &conditions)
    });
    (!same).then_some(status)
}

fn same_ignoring_times(a: &[Condition], b: &[Condition]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| {
            (&x.type_, &x.status, &x.reason, &x.message)
                == (&y.type_, &y.status, &y.reason, &y.message)
        })
}

/// What the driver keeps between passes.
#[derive(Debug, Default)]
pub struct Buffers {
    /// The buffers as the last look read them.
    pub observed: Vec<BufferPods>,
    /// Their statuses as the store had them, by `namespace/name`.
    pub found: BTreeMap<String, Value>,
    /// The buffers last told to the engine.
    pub told: Option<Vec<Buffer>>,
    written: BTreeMap<String, (Value, DateTime<Utc>)>,
}

/// How long a written status is trusted before it is written again when the store still
/// shows the old one.
const REWRITE_AFTER: TimeDelta = TimeDelta::seconds(60);

/// Tells the engine the buffers when they changed.
pub(crate) fn tell(engine: &mut Engine, buffers: &mut Buffers, now: DateTime<Utc>) {
    let next = engine_buffers(&buffers.observed);
    if buffers.told.as_ref() != Some(&next) {
        buffers.told = Some(next.clone());
        engine.handle(now, quartermaster_engine::Event::BuffersChanged(next));
    }
}

/// Writes the statuses that changed (leader only: the writer refuses otherwise).
pub(crate) fn sync(
    ctx: &std::sync::Arc<crate::context::Context>,
    engine: &Engine,
    buffers: &mut Buffers,
    now: DateTime<Utc>,
) {
    let mut live = Vec::new();
    for b in &buffers.observed {
        let key = b.key();
        live.push(key.clone());
        let Some(status) = desired_status(b, buffers.found.get(&key), engine, now) else {
            continue;
        };
        if buffers
            .written
            .get(&key)
            .is_some_and(|(w, at)| *w == status && now - *at < REWRITE_AFTER)
        {
            continue;
        }
        buffers.written.insert(key.clone(), (status.clone(), now));
        let ctx2 = ctx.clone();
        let (namespace, name) = (b.namespace.clone(), b.name.clone());
        ctx.spawn(async move {
            if let Err(e) = ctx2
                .writer
                .apply_capacity_buffer_status(&namespace, &name, &status)
                .await
            {
                tracing::warn!(capacitybuffer = %format!("{namespace}/{name}"), error = %e, "status write failed; retried on the next pass");
            }
        });
    }
    buffers.written.retain(|k, _| live.contains(k));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str, owner_kind: &str, owner: &str, hash: Option<&str>) -> std::sync::Arc<Pod> {
        let mut labels = serde_json::Map::new();
        labels.insert("app".into(), json!("vllm"));
        if let Some(h) = hash {
            labels.insert("pod-template-hash".into(), json!(h));
        }
        std::sync::Arc::new(
            serde_json::from_value(json!({
                "metadata": {
                    "name": name, "namespace": "ml", "labels": labels,
                    "ownerReferences": [{"apiVersion": "apps/v1", "kind": owner_kind, "name": owner, "uid": "u", "controller": true}]
                },
                "spec": {"nodeName": "n1", "containers": [{"name": "w", "image": "vllm",
                    "resources": {"requests": {"cpu": "8", "nvidia.com/gpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}}]}
            }))
            .unwrap(),
        )
    }

    fn buffer(spec: Value) -> std::sync::Arc<CapacityBuffer> {
        std::sync::Arc::new(CapacityBuffer {
            metadata: ObjectMeta {
                name: Some("warm".into()),
                namespace: Some("ml".into()),
                generation: Some(2),
                ..Default::default()
            },
            spec: Some(spec),
            status: None,
        })
    }

    #[test]
    fn a_scalable_buffer_is_read_from_its_workloads_pods() {
        let pods = vec![
            pod("vllm-7d9f-a", "ReplicaSet", "vllm-7d9f", Some("7d9f")),
            pod("vllm-7d9f-b", "ReplicaSet", "vllm-7d9f", Some("7d9f")),
            pod("vllm-7d9f-c", "ReplicaSet", "vllm-7d9f", Some("7d9f")),
            pod("other-1", "StatefulSet", "other", None),
        ];
        let objects = objects(
            &[buffer(
                json!({"scalableRef": {"apiGroup": "apps", "kind": "Deployment", "name": "vllm"}, "percentage": 50, "limits": {"nvidia.com/gpu": "1"}}),
            )],
            &pods,
        );
        assert_eq!(objects.len(), 2);
        assert_eq!(objects[0]["kind"], "PodTemplate");
        assert_eq!(objects[0]["metadata"]["name"], "quartermaster-buffer-warm");
        assert!(objects[0]["template"]["spec"].get("nodeName").is_none());
        assert_eq!(objects[1]["spec"]["replicas"], 2, "50% of 3, rounded up");
        assert!(objects[1]["spec"].get("scalableRef").is_none());
        // Read as the snapshot reads it: limits still cap the chunks.
        let ingested = quartermaster_cluster::snapshot(&objects, Default::default()).unwrap();
        let b = &ingested.capacity_buffers[0];
        assert_eq!((b.replicas, b.problem.clone()), (1, None));
        assert_eq!(engine_buffers(&ingested.capacity_buffers).len(), 1);
    }

    #[test]
    fn a_buffer_whose_workload_has_no_pod_says_so_in_its_status() {
        let objects = objects(
            &[buffer(
                json!({"scalableRef": {"kind": "Deployment", "name": "gone"}, "replicas": 1}),
            )],
            &[],
        );
        let ingested = quartermaster_cluster::snapshot(&objects, Default::default()).unwrap();
        let b = &ingested.capacity_buffers[0];
        let engine = Engine::new(
            quartermaster_engine::EngineSetup {
                resources: Default::default(),
                pools: Vec::new(),
                daemonsets: Vec::new(),
                catalog: quartermaster_pricing::Catalog::new(Vec::new()),
            },
            Default::default(),
        );
        let now = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let status = desired_status(b, None, &engine, now).expect("a status to write");
        assert_eq!(status["replicas"], 0);
        assert_eq!(status["conditions"][0]["type"], READY_FOR_PROVISIONING);
        assert_eq!(status["conditions"][0]["status"], "False");
        assert!(
            status["conditions"][0]["message"]
                .as_str()
                .unwrap()
                .contains("not found")
        );
        // Written once: the same status found in the store is not written again.
        assert!(desired_status(b, Some(&status), &engine, now).is_none());
    }
}
