//! What an API server's admission plugins would add to a pod before the scheduler (and the
//! controller) ever see it, for manifests read offline by `plan`.

use quartermaster_solver::ClusterSnapshot;
use quartermaster_solver::pod::{TaintEffect, Toleration};

/// The `ExtendedResourceToleration` admission plugin: a pod that requests an extended resource
/// (`nvidia.com/gpu`, `aws.amazon.com/neuron`, …) tolerates the `NoSchedule` taint of the same
/// key (`operator: Exists`). Clusters that run the plugin (and GKE, which adds the same
/// toleration to GPU pods) let GPU pods without that toleration onto tainted GPU nodes; `plan`
/// applies it on request (`--extended-resource-toleration`). Returns how many pods gained a
/// toleration.
pub fn extended_resource_toleration(snapshot: &mut ClusterSnapshot) -> usize {
    let table = &snapshot.resources;
    let extended: Vec<(usize, String)> = (0..table.len())
        .map(|slot| (slot, table.name(slot).to_owned()))
        .filter(|(_, name)| is_extended(name))
        .collect();
    let mut changed = 0;
    for pod in &mut snapshot.pending {
        let before = pod.tolerations.len();
        for (slot, name) in &extended {
            let tolerated = pod.tolerations.iter().any(|t| {
                t.key == *name && t.exists && t.effect.is_none_or(|e| e == TaintEffect::NoSchedule)
            });
            if pod.requests.get(*slot) > 0 && !tolerated {
                pod.tolerations.push(Toleration {
                    key: name.clone(),
                    exists: true,
                    value: String::new(),
                    effect: Some(TaintEffect::NoSchedule),
                });
            }
        }
        changed += usize::from(pod.tolerations.len() > before);
    }
    changed
}

/// Whether a resource name is an extended resource: domain-prefixed, outside `kubernetes.io`
/// (as the API server's `IsExtendedResourceName`).
fn is_extended(name: &str) -> bool {
    let Some((domain, _)) = name.split_once('/') else {
        return false;
    };
    !(domain == "kubernetes.io"
        || domain.ends_with(".kubernetes.io")
        || name.starts_with("requests."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::ingest;

    #[test]
    fn gpu_pods_tolerate_the_gpu_taint_and_cpu_pods_do_not() {
        let mut ingested = ingest(
            "apiVersion: v1
kind: Pod
metadata: {name: gpu}
spec:
  containers:
  - name: c
    resources: {limits: {nvidia.com/gpu: 1}}
---
apiVersion: v1
kind: Pod
metadata: {name: cpu}
spec:
  containers:
  - name: c
    resources: {requests: {cpu: '1'}}
",
        );
        assert_eq!(extended_resource_toleration(&mut ingested.snapshot), 1);
        let by_name = |n: &str| {
            ingested
                .snapshot
                .pending
                .iter()
                .find(|p| p.id.name == n)
                .unwrap()
                .tolerations
                .clone()
        };
        let gpu = by_name("gpu");
        assert_eq!(gpu.len(), 1);
        assert_eq!(gpu[0].key, "nvidia.com/gpu");
        assert!(gpu[0].exists);
        assert_eq!(gpu[0].effect, Some(TaintEffect::NoSchedule));
        assert!(by_name("cpu").is_empty());
        // Applying it twice adds nothing.
        assert_eq!(extended_resource_toleration(&mut ingested.snapshot), 0);
        assert!(is_extended("habana.ai/gaudi"));
        assert!(!is_extended("hugepages-2Mi"));
        assert!(!is_extended("cpu"));
    }
}
