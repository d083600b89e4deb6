//! Volcano's Job (`batch.volcano.sh`, not `batch/v1`): `spec.tasks[].{name, replicas,
//! template}`, pods named `job-task-i`. The job is a gang of `spec.minAvailable` pods (Volcano's
//! default: every replica of every task), placed together in one zone or not at all.

use serde_json::Value;

use super::custom::{PodGroup, Raw, group, lookup, numbered, parse, template_at};
use crate::error::ClusterError;

/// The label with the job's name.
const JOB_NAME: &str = "volcano.sh/job-name";
/// The label with the task's name.
const TASK: &str = "volcano.sh/task-spec";

/// One group per task.
pub(super) fn read(raw: &Raw, notes: &mut Vec<String>) -> Result<Vec<PodGroup>, ClusterError> {
    let tasks: Vec<Value> = lookup(&raw.spec, "spec.tasks")
        .map(|v| parse(v, &raw.id, "spec.tasks"))
        .transpose()?
        .unwrap_or_default();
    let mut groups = Vec::new();
    for (i, task) in tasks.iter().enumerate() {
        let at = format!("spec.tasks[{i}]");
        let name: String = task
            .get("name")
            .map(|v| parse(v, &raw.id, &format!("{at}.name")))
            .transpose()?
            .unwrap_or_else(|| format!("default{i}"));
        let replicas: Option<i32> = task
            .get("replicas")
            .map(|v| parse(v, &raw.id, &format!("{at}.replicas")))
            .transpose()?;
        let n = super::count(replicas, 1, &raw.id, &format!("{at}.replicas"))?;
        let template = template_at(task.get("template"), &raw.id, &format!("{at}.template"))?;
        groups.push(group(
            name.clone(),
            format!("{at}.template.spec"),
            template,
            &[(JOB_NAME, &raw.name), (TASK, &name)],
            numbered(&format!("{}-{name}", raw.name), n),
        ));
    }
    let total: usize = groups.iter().map(|g| g.names.len()).sum();
    let min = match lookup(&raw.spec, "spec.minAvailable") {
        Some(v) => {
            let min: i32 = parse(v, &raw.id, "spec.minAvailable")?;
            super::count(Some(min), 0, &raw.id, "spec.minAvailable")?
        }
        None => total,
    };
    if min > 0 {
        let gang = quartermaster_solver::Gang {
            name: format!("{}/{}", raw.namespace, raw.name),
            min_member: u32::try_from(min).unwrap_or(u32::MAX),
        };
        notes.push(format!(
            "{}: a gang of {min} of its {total} pod(s) (minAvailable): placed together in one zone, or not at all",
            raw.id
        ));
        for g in &mut groups {
            g.gang = Some(gang.clone());
        }
    }
    Ok(groups)
}
