//! LeaderWorkerSet (`leaderworkerset.x-k8s.io`): `spec.replicas` groups of
//! `spec.leaderWorkerTemplate.size` pods, one leader (`leaderTemplate`, or `workerTemplate` when
//! unset) and `size - 1` workers. Pods are named as the controller names them: the leader
//! `name-g`, its workers `name-g-1` … `name-g-(size-1)`.

use super::custom::{PodGroup, Raw, group, lookup, number, template};
use crate::error::ClusterError;

/// The label with the LeaderWorkerSet's name.
const NAME: &str = "leaderworkerset.sigs.k8s.io/name";
/// The label with the group's index.
const GROUP_INDEX: &str = "leaderworkerset.sigs.k8s.io/group-index";

const LEADER: &str = "spec.leaderWorkerTemplate.leaderTemplate";
const WORKER: &str = "spec.leaderWorkerTemplate.workerTemplate";

/// A leader group and a worker group per replica.
pub(super) fn read(raw: &Raw) -> Result<Vec<PodGroup>, ClusterError> {
    let replicas = number(raw, "spec.replicas", 1)?;
    let size = number(raw, "spec.leaderWorkerTemplate.size", 1)?;
    if size == 0 {
        return Err(ClusterError::invalid(
            &raw.id,
            "spec.leaderWorkerTemplate.size",
            "must be at least 1",
        ));
    }
    let worker = template(raw, WORKER)?;
    let leader_path = if lookup(&raw.spec, LEADER).is_some() {
        LEADER
    } else {
        WORKER
    };
    let leader = template(raw, leader_path)?;
    let mut groups = Vec::new();
    for g in 0..replicas {
        let index = g.to_string();
        let labels = [(NAME, raw.name.as_str()), (GROUP_INDEX, index.as_str())];
        let leader_name = format!("{}-{g}", raw.name);
        groups.push(group(
            "leader",
            format!("{leader_path}.spec"),
            leader.clone(),
            &labels,
            vec![leader_name.clone()],
        ));
        if size > 1 {
            groups.push(group(
                "worker",
                format!("{WORKER}.spec"),
                worker.clone(),
                &labels,
                (1..size).map(|w| format!("{leader_name}-{w}")).collect(),
            ));
        }
    }
    Ok(groups)
}
