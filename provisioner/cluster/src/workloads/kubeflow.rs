//! Kubeflow jobs: training-operator v1 (`kubeflow.org`: PyTorchJob, PaddleJob, TFJob, MPIJob…,
//! `spec.<framework>ReplicaSpecs.<Role>.{replicas, template}`) and Trainer v2's `TrainJob`
//! (`trainer.kubeflow.org`: `spec.trainer.{numNodes, resourcesPerNode}`).

use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
use serde_json::Value;

use super::custom::{PodGroup, Raw, flag, group, lookup, number, numbered, parse, template};
use crate::error::ClusterError;

/// The label the training operator puts on every pod with the job's name.
const JOB_NAME: &str = "training.kubeflow.org/job-name";
/// The label with the pod's replica type (`master`, `worker`).
const REPLICA_TYPE: &str = "training.kubeflow.org/replica-type";

/// One group per replica type, pods named `job-role-i` as the operator names them.
pub(super) fn read(
    raw: &Raw,
    field: &str,
    notes: &mut Vec<String>,
) -> Result<Vec<PodGroup>, ClusterError> {
    if flag(raw, "spec.runPolicy.suspend")? {
        notes.push(format!("{}: suspended; no pods planned", raw.id));
        return Ok(Vec::new());
    }
    let path = format!("spec.{field}");
    let specs = match lookup(&raw.spec, &path) {
        None => return Err(ClusterError::invalid(&raw.id, path, "missing")),
        Some(Value::Object(specs)) => specs,
        Some(_) => {
            return Err(ClusterError::invalid(
                &raw.id,
                path,
                "invalid type: expected a map of replica types",
            ));
        }
    };
    let mut groups = Vec::new();
    for role in specs.keys() {
        let at = format!("{path}.{role}");
        let n = number(raw, &format!("{at}.replicas"), 1)?;
        let lower = role.to_ascii_lowercase();
        groups.push(group(
            role.as_str(),
            format!("{at}.template.spec"),
            template(raw, &format!("{at}.template"))?,
            &[(JOB_NAME, &raw.name), (REPLICA_TYPE, &lower)],
            numbered(&format!("{}-{lower}", raw.name), n),
        ));
    }
    Ok(groups)
}

/// A TrainJob names its runtime (`spec.runtimeRef`), whose pod template is not part of the
/// object: its `numNodes` pods are planned with `resourcesPerNode` as their one container's
/// resources.
pub(super) fn read_train_job(
    raw: &Raw,
    notes: &mut Vec<String>,
) -> Result<Vec<PodGroup>, ClusterError> {
    if flag(raw, "spec.suspend")? {
        notes.push(format!("{}: suspended; no pods planned", raw.id));
        return Ok(Vec::new());
    }
    let n = number(raw, "spec.trainer.numNodes", 1)?;
    let resources: Option<ResourceRequirements> =
        lookup(&raw.spec, "spec.trainer.resourcesPerNode")
            .map(|v| parse(v, &raw.id, "spec.trainer.resourcesPerNode"))
            .transpose()?;
    notes.push(format!(
        "{}: the runtime's pod template (spec.runtimeRef) is not given; its {n} node(s) are planned from spec.trainer.resourcesPerNode",
        raw.id
    ));
    let spec = PodSpec {
        containers: vec![Container {
            name: "node".to_owned(),
            resources,
            ..Container::default()
        }],
        ..PodSpec::default()
    };
    Ok(vec![group(
        "node",
        "spec.trainer.resourcesPerNode",
        (Default::default(), spec),
        &[("trainer.kubeflow.org/trainjob-name", &raw.name)],
        numbered(&format!("{}-node-0", raw.name), n),
    )])
}
