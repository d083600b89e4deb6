//! Workload custom resources: the GPU controllers' own kinds (Kubeflow jobs, LeaderWorkerSet,
//! KubeRay, KServe, JobSet, Volcano), recognised by API group and kind and read into groups of
//! identical pods: the pod templates × replicas their controllers will create.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{MAX_PODS_PER_WORKLOAD, count, jobset, kserve, kubeflow, lws, ray, volcano};
use crate::error::ClusterError;
use crate::objects::Object;

/// A workload custom resource kind this crate expands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CustomKind {
    /// Kubeflow training-operator v1 jobs (`kubeflow.org`): the field holding the replica specs.
    Kubeflow(&'static str, &'static str),
    /// Kubeflow Trainer v2 `TrainJob` (`trainer.kubeflow.org`).
    TrainJob,
    /// `leaderworkerset.x-k8s.io` `LeaderWorkerSet`.
    LeaderWorkerSet,
    /// `ray.io` `RayCluster`.
    RayCluster,
    /// `ray.io` `RayService`.
    RayService,
    /// `ray.io` `RayJob`.
    RayJob,
    /// `serving.kserve.io` `InferenceService`.
    InferenceService,
    /// `serving.kserve.io` `LLMInferenceService`.
    LlmInferenceService,
    /// `jobset.x-k8s.io` `JobSet`.
    JobSet,
    /// `batch.volcano.sh` `Job`.
    VolcanoJob,
}

impl CustomKind {
    /// How objects of this kind are named in ids and notes (`Kind`, or `Kind.group` when the
    /// kind alone would read as a built-in one).
    pub fn name(self) -> &'static str {
        match self {
            Self::Kubeflow(kind, _) => kind,
            Self::TrainJob => "TrainJob",
            Self::LeaderWorkerSet => "LeaderWorkerSet",
            Self::RayCluster => "RayCluster",
            Self::RayService => "RayService",
            Self::RayJob => "RayJob",
            Self::InferenceService => "InferenceService",
            Self::LlmInferenceService => "LLMInferenceService",
            Self::JobSet => "JobSet",
            Self::VolcanoJob => "Job.batch.volcano.sh",
        }
    }
}

/// The custom kind of `(API group, kind)`, if it is one this crate expands.
pub(crate) fn kind_of(group: &str, kind: &str) -> Option<CustomKind> {
    Some(match (group, kind) {
        ("kubeflow.org", "PyTorchJob") => CustomKind::Kubeflow("PyTorchJob", "pytorchReplicaSpecs"),
        ("kubeflow.org", "PaddleJob") => CustomKind::Kubeflow("PaddleJob", "paddleReplicaSpecs"),
        ("kubeflow.org", "TFJob") => CustomKind::Kubeflow("TFJob", "tfReplicaSpecs"),
        ("kubeflow.org", "XGBoostJob") => CustomKind::Kubeflow("XGBoostJob", "xgbReplicaSpecs"),
        ("kubeflow.org", "JAXJob") => CustomKind::Kubeflow("JAXJob", "jaxReplicaSpecs"),
        ("kubeflow.org", "MPIJob") => CustomKind::Kubeflow("MPIJob", "mpiReplicaSpecs"),
        ("trainer.kubeflow.org", "TrainJob") => CustomKind::TrainJob,
        ("leaderworkerset.x-k8s.io", "LeaderWorkerSet") => CustomKind::LeaderWorkerSet,
        ("ray.io", "RayCluster") => CustomKind::RayCluster,
        ("ray.io", "RayService") => CustomKind::RayService,
        ("ray.io", "RayJob") => CustomKind::RayJob,
        ("serving.kserve.io", "InferenceService") => CustomKind::InferenceService,
        ("serving.kserve.io", "LLMInferenceService") => CustomKind::LlmInferenceService,
        ("jobset.x-k8s.io", "JobSet") => CustomKind::JobSet,
        ("batch.volcano.sh", "Job") => CustomKind::VolcanoJob,
        _ => return None,
    })
}

/// Pods of one role that share a spec (a PyTorchJob's workers, one LeaderWorkerSet group's
/// leader).
#[derive(Debug, Clone)]
pub(crate) struct PodGroup {
    /// The role, as the note names it (`Worker`, `leader`, `worker group gpu-group`).
    pub role: String,
    /// Path of the pod spec inside the object, for messages.
    pub spec_path: String,
    /// The pods' labels: the template's own and those the controller adds.
    pub labels: BTreeMap<String, String>,
    /// The pod spec.
    pub spec: PodSpec,
    /// The pods' names, in order.
    pub names: Vec<String>,
    /// The gang the pods belong to (a Volcano Job's `minAvailable`).
    pub gang: Option<quartermaster_solver::Gang>,
}

/// One workload custom resource read into pod groups.
#[derive(Debug, Clone)]
pub(crate) struct CustomWorkload {
    /// Identity (`spec` was consumed into `groups`).
    pub object: Object<()>,
    /// Its kind.
    pub kind: CustomKind,
    /// The pods it stands for.
    pub groups: Vec<PodGroup>,
    /// What the reader noticed (suspension, gangs, parts not planned).
    pub notes: Vec<String>,
}

/// The raw object handed to each reader: identity plus `spec` as JSON.
pub(crate) type Raw = Object<Value>;

/// Reads one custom workload into pod groups.
pub(crate) fn read(kind: CustomKind, raw: Object<Value>) -> Result<CustomWorkload, ClusterError> {
    let mut notes = Vec::new();
    let groups = match kind {
        CustomKind::Kubeflow(_, field) => kubeflow::read(&raw, field, &mut notes)?,
        CustomKind::TrainJob => kubeflow::read_train_job(&raw, &mut notes)?,
        CustomKind::LeaderWorkerSet => lws::read(&raw)?,
        CustomKind::RayCluster => ray::read(&raw, "spec", &mut notes)?,
        CustomKind::RayService => ray::read(&raw, "spec.rayClusterConfig", &mut notes)?,
        CustomKind::RayJob => ray::read(&raw, "spec.rayClusterSpec", &mut notes)?,
        CustomKind::InferenceService => kserve::read_inference_service(&raw, &mut notes)?,
        CustomKind::LlmInferenceService => kserve::read_llm_inference_service(&raw, &mut notes)?,
        CustomKind::JobSet => jobset::read(&raw, &mut notes)?,
        CustomKind::VolcanoJob => volcano::read(&raw, &mut notes)?,
    };
    let total: usize = groups.iter().map(|g| g.names.len()).sum();
    if total > MAX_PODS_PER_WORKLOAD {
        return Err(ClusterError::invalid(
            &raw.id,
            "spec",
            format!(
                "{total} pods is more than the {MAX_PODS_PER_WORKLOAD} one workload may expand to"
            ),
        ));
    }
    let object = Object {
        id: raw.id,
        namespace: raw.namespace,
        name: raw.name,
        meta: raw.meta,
        spec: (),
        status: (),
    };
    Ok(CustomWorkload {
        object,
        kind,
        groups,
        notes,
    })
}

/// The value at `path` (dot-separated keys, starting below `spec`: `spec.a.b` looks up `a.b`).
pub(super) fn lookup<'v>(spec: &'v Value, path: &str) -> Option<&'v Value> {
    let rest = path.strip_prefix("spec").unwrap_or(path);
    rest.split('.')
        .filter(|k| !k.is_empty())
        .try_fold(spec, |v, key| v.get(key))
        .filter(|v| !v.is_null())
}

/// Deserialises `value` (found at `path`) as `T`; errors carry the field path.
pub(super) fn parse<T: DeserializeOwned>(
    value: &Value,
    id: &str,
    path: &str,
) -> Result<T, ClusterError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let inner = e.path().to_string();
        let field = if inner == "." {
            path.to_owned()
        } else {
            format!("{path}.{inner}")
        };
        ClusterError::invalid(id, field, e.into_inner().to_string())
    })
}

/// A count at `path` below `spec` (`default` when unset), bounded like every workload's.
pub(super) fn number(raw: &Raw, path: &str, default: i32) -> Result<usize, ClusterError> {
    let value = lookup(&raw.spec, path)
        .map(|v| parse::<i32>(v, &raw.id, path))
        .transpose()?;
    count(value, default, &raw.id, path)
}

/// A boolean at `path` below `spec`, false when unset.
pub(super) fn flag(raw: &Raw, path: &str) -> Result<bool, ClusterError> {
    lookup(&raw.spec, path)
        .map(|v| parse::<bool>(v, &raw.id, path))
        .transpose()
        .map(|b| b.unwrap_or(false))
}

/// A pod template at `path` below `spec` (required), as its labels and spec.
pub(super) fn template(
    raw: &Raw,
    path: &str,
) -> Result<(BTreeMap<String, String>, PodSpec), ClusterError> {
    template_at(lookup(&raw.spec, path), &raw.id, path)
}

/// A pod template `value` found at `path` (required), as its labels and spec.
pub(super) fn template_at(
    value: Option<&Value>,
    id: &str,
    path: &str,
) -> Result<(BTreeMap<String, String>, PodSpec), ClusterError> {
    let value = value
        .filter(|v| !v.is_null())
        .ok_or_else(|| ClusterError::invalid(id, path, "missing"))?;
    let template: PodTemplateSpec = parse(value, id, path)?;
    let spec = template
        .spec
        .ok_or_else(|| ClusterError::invalid(id, format!("{path}.spec"), "missing"))?;
    let labels = template.metadata.and_then(|m| m.labels).unwrap_or_default();
    Ok((labels, spec))
}

/// A group of `names` from a template's labels and spec plus the controller's `labels`.
pub(super) fn group(
    role: impl Into<String>,
    spec_path: impl Into<String>,
    (mut own, spec): (BTreeMap<String, String>, PodSpec),
    labels: &[(&str, &str)],
    names: Vec<String>,
) -> PodGroup {
    for (k, v) in labels {
        own.insert((*k).to_owned(), (*v).to_owned());
    }
    PodGroup {
        role: role.into(),
        spec_path: spec_path.into(),
        labels: own,
        spec,
        names,
        gang: None,
    }
}

/// `prefix-0` … `prefix-(n-1)`.
pub(super) fn numbered(prefix: &str, n: usize) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}-{i}")).collect()
}
