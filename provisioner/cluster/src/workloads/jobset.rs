//! JobSet (`jobset.x-k8s.io`): each of `spec.replicatedJobs[]` is `replicas` Jobs, each running
//! `template.spec.parallelism` pods (at most `completions`). Pods are named
//! `jobset-replicatedjob-jobindex-podindex`.

use serde_json::Value;

use super::custom::{PodGroup, Raw, flag, group, lookup, parse, template_at};
use crate::error::ClusterError;

/// The label with the JobSet's name.
const JOBSET: &str = "jobset.sigs.k8s.io/jobset-name";
/// The label with the replicated job's name.
const REPLICATED_JOB: &str = "jobset.sigs.k8s.io/replicatedjob-name";

/// One group per replicated job.
pub(super) fn read(raw: &Raw, notes: &mut Vec<String>) -> Result<Vec<PodGroup>, ClusterError> {
    if flag(raw, "spec.suspend")? {
        notes.push(format!("{}: suspended; no pods planned", raw.id));
        return Ok(Vec::new());
    }
    let jobs: Vec<Value> = lookup(&raw.spec, "spec.replicatedJobs")
        .map(|v| parse(v, &raw.id, "spec.replicatedJobs"))
        .transpose()?
        .unwrap_or_default();
    let mut groups = Vec::new();
    for (i, job) in jobs.iter().enumerate() {
        let at = format!("spec.replicatedJobs[{i}]");
        let int = |key: &str| -> Result<Option<i32>, ClusterError> {
            lookup(job, &format!("spec.{key}"))
                .map(|v| parse(v, &raw.id, &format!("{at}.{key}")))
                .transpose()
        };
        let name: String = job
            .get("name")
            .map(|v| parse(v, &raw.id, &format!("{at}.name")))
            .transpose()?
            .unwrap_or_else(|| format!("job{i}"));
        let replicas = super::count(int("replicas")?, 1, &raw.id, &format!("{at}.replicas"))?;
        let parallelism = super::count(
            int("template.spec.parallelism")?,
            1,
            &raw.id,
            &format!("{at}.template.spec.parallelism"),
        )?;
        let pods = match int("template.spec.completions")? {
            None => parallelism,
            c => parallelism.min(super::count(
                c,
                1,
                &raw.id,
                &format!("{at}.template.spec.completions"),
            )?),
        };
        let names = (0..replicas)
            .flat_map(|j| (0..pods).map(move |p| (j, p)))
            .map(|(j, p)| format!("{}-{name}-{j}-{p}", raw.name))
            .collect();
        let template_path = format!("{at}.template.spec.template");
        let pod_template = template_at(
            lookup(job, "spec.template.spec.template"),
            &raw.id,
            &template_path,
        )?;
        groups.push(group(
            name.clone(),
            format!("{at}.template.spec.template.spec"),
            pod_template,
            &[(JOBSET, &raw.name), (REPLICATED_JOB, &name)],
            names,
        ));
    }
    Ok(groups)
}
