//! KubeRay (`ray.io`): a RayCluster's head and worker groups, also inside a RayService
//! (`spec.rayClusterConfig`) or a RayJob (`spec.rayClusterSpec`). Each worker group runs
//! `replicas` (or `minReplicas` under the in-tree autoscaler) × `numOfHosts` pods.

use serde_json::Value;

use super::custom::{PodGroup, Raw, flag, group, lookup, numbered, parse, template, template_at};
use crate::error::ClusterError;

/// The label with the cluster's name.
const CLUSTER: &str = "ray.io/cluster";
/// The label with the pod's node type (`head`, `worker`).
const NODE_TYPE: &str = "ray.io/node-type";
/// The label with the worker group's name.
const GROUP: &str = "ray.io/group";

/// The head and every worker group of the cluster spec at `cluster` (`spec` for a RayCluster).
pub(super) fn read(
    raw: &Raw,
    cluster: &str,
    notes: &mut Vec<String>,
) -> Result<Vec<PodGroup>, ClusterError> {
    if lookup(&raw.spec, cluster).is_none() {
        notes.push(format!(
            "{}: no {cluster} (it runs on an existing RayCluster); no pods planned",
            raw.id
        ));
        return Ok(Vec::new());
    }
    if flag(raw, "spec.suspend")? {
        notes.push(format!("{}: suspended; no pods planned", raw.id));
        return Ok(Vec::new());
    }
    let autoscaling = flag(raw, &format!("{cluster}.enableInTreeAutoscaling"))?;
    let head = format!("{cluster}.headGroupSpec.template");
    let mut groups = vec![group(
        "head",
        format!("{head}.spec"),
        template(raw, &head)?,
        &[(CLUSTER, &raw.name), (NODE_TYPE, "head")],
        vec![format!("{}-head", raw.name)],
    )];
    let workers_path = format!("{cluster}.workerGroupSpecs");
    let workers: Vec<Value> = lookup(&raw.spec, &workers_path)
        .map(|v| parse(v, &raw.id, &workers_path))
        .transpose()?
        .unwrap_or_default();
    for (i, worker) in workers.iter().enumerate() {
        let at = format!("{workers_path}[{i}]");
        let name: String = match worker.get("groupName") {
            Some(v) => parse(v, &raw.id, &format!("{at}.groupName"))?,
            None => format!("group{i}"),
        };
        let field = |key: &str| -> Result<Option<i32>, ClusterError> {
            worker
                .get(key)
                .filter(|v| !v.is_null())
                .map(|v| parse(v, &raw.id, &format!("{at}.{key}")))
                .transpose()
        };
        let min = field("minReplicas")?;
        let replicas = if autoscaling {
            min
        } else {
            field("replicas")?.or(min)
        };
        let replicas = super::count(replicas, 0, &raw.id, &format!("{at}.replicas"))?;
        let hosts = super::count(
            field("numOfHosts")?,
            1,
            &raw.id,
            &format!("{at}.numOfHosts"),
        )?;
        let suspended = worker.get("suspend").and_then(Value::as_bool) == Some(true);
        let n = if suspended { 0 } else { replicas * hosts };
        let template = template_at(worker.get("template"), &raw.id, &format!("{at}.template"))?;
        groups.push(group(
            format!("worker group {name}"),
            format!("{at}.template.spec"),
            template,
            &[(CLUSTER, &raw.name), (NODE_TYPE, "worker"), (GROUP, &name)],
            numbered(&format!("{}-{name}-worker", raw.name), n),
        ));
    }
    if autoscaling {
        notes.push(format!(
            "{}: autoscaling; worker groups planned at minReplicas",
            raw.id
        ));
    }
    Ok(groups)
}
