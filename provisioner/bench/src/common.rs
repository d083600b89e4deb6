//! Builders shared by the scenarios: requests, pods, NodePools, DaemonSets.

use std::collections::BTreeMap;

use quartermaster_policies::{Operator, Requirement, Requirements};
use quartermaster_pricing::{Cloud, labels};
use quartermaster_solver::pod::{
    PodAffinityTerm, Taint, TaintEffect, Toleration, TopologySpread, WhenUnsatisfiable,
};
use quartermaster_solver::resources::{CPU, MEMORY, PODS};
use quartermaster_solver::{NodePoolSpec, Pod, PodRef, PoolLimits, PoolUsage, Resources};

/// Bytes in one MiB.
pub const MIB: i64 = 1 << 20;
/// Bytes in one GiB.
pub const GIB: i64 = 1 << 30;

/// Slot of `nvidia.com/gpu` in the default resource table.
pub const NVIDIA_GPU: usize = 4;
/// Slot of `vpc.amazonaws.com/efa` in the default resource table.
pub const EFA: usize = 7;

/// The GPU taint every GPU NodePool carries (the EKS / GKE convention).
pub const GPU_TAINT_KEY: &str = "nvidia.com/gpu";

/// Requests of one pod: CPU in millicores, memory in bytes, plus the pod slot.
pub fn requests(cpu_millis: i64, memory_bytes: i64) -> Resources {
    let mut r = Resources::ZERO;
    r.set(CPU, cpu_millis);
    r.set(MEMORY, memory_bytes);
    r.set(PODS, 1);
    r
}

/// [`requests`] plus `gpus` NVIDIA GPUs and `efa` EFA interfaces.
pub fn gpu_requests(cpu_millis: i64, memory_bytes: i64, gpus: i64, efa: i64) -> Resources {
    let mut r = requests(cpu_millis, memory_bytes);
    r.set(NVIDIA_GPU, gpus);
    r.set(EFA, efa);
    r
}

/// A one-entry label map.
pub fn label(key: &str, value: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(key.to_owned(), value.to_owned())])
}

/// A `matchLabels` selector.
pub fn selector(labels: &BTreeMap<String, String>) -> Requirements {
    Requirements::from_labels(labels)
}

/// `key In values`.
pub fn is_in(key: &str, values: &[&str]) -> Requirement {
    Requirement::in_values(key, values.iter().copied())
}

/// A numeric requirement (`Gt`, `Lt`, `Gte`, `Lte`) on an integer label.
pub fn numeric(key: &str, op: Operator, value: i64) -> Requirement {
    Requirement::new(key, op, [value.to_string()])
        .expect("a numeric requirement with one integer value is valid")
}

/// A pod in `namespace` owned by `owner` (`Deployment/ns/name`-style), with these requests.
pub fn pod(namespace: &str, name: String, owner: Option<String>, requests: Resources) -> Pod {
    let mut p = Pod::new(PodRef::new(namespace, name), requests);
    p.owner = owner;
    p
}

/// A hard (`DoNotSchedule`) topology spread constraint.
pub fn spread(topology_key: &str, max_skew: u32, selector: Requirements) -> TopologySpread {
    TopologySpread {
        topology_key: topology_key.to_owned(),
        max_skew,
        when_unsatisfiable: WhenUnsatisfiable::DoNotSchedule,
        min_domains: None,
        selector,
    }
}

/// A required pod (anti-)affinity term in the pod's own namespace.
pub fn affinity_term(topology_key: &str, selector: Requirements) -> PodAffinityTerm {
    PodAffinityTerm {
        topology_key: topology_key.to_owned(),
        selector,
        namespaces: Vec::new(),
        preferred_weight: None,
    }
}

/// The `nvidia.com/gpu:NoSchedule` taint.
pub fn gpu_taint() -> Taint {
    Taint {
        key: GPU_TAINT_KEY.to_owned(),
        value: String::new(),
        effect: TaintEffect::NoSchedule,
    }
}

/// `nvidia.com/gpu Exists NoSchedule`: what GPU workloads (and the device plugin) tolerate.
pub fn gpu_toleration() -> Toleration {
    Toleration {
        key: GPU_TAINT_KEY.to_owned(),
        exists: true,
        value: String::new(),
        effect: Some(TaintEffect::NoSchedule),
    }
}

/// `operator: Exists` with no key: tolerates every taint (what node agents such as
/// node-exporter ship with).
pub fn tolerate_everything() -> Toleration {
    Toleration {
        key: String::new(),
        exists: true,
        value: String::new(),
        effect: None,
    }
}

/// A NodePool of `cloud` with these requirements; template labels are added to the
/// requirements as `In` terms, as the solver's model expects.
pub fn node_pool(
    name: &str,
    cloud: Cloud,
    requirements: Vec<Requirement>,
    template_labels: BTreeMap<String, String>,
    taints: Vec<Taint>,
) -> NodePoolSpec {
    let mut reqs: Requirements = requirements.into_iter().collect();
    for (k, v) in &template_labels {
        reqs.add(Requirement::in_values(k.as_str(), [v.as_str()]));
    }
    NodePoolSpec {
        name: name.to_owned(),
        cloud,
        weight: 0,
        requirements: reqs,
        labels: template_labels,
        taints,
        startup_taints: Vec::new(),
        limits: PoolLimits::default(),
        usage: PoolUsage::default(),
        node_class_present: true,
        node_shape: Default::default(),
        preferences: Default::default(),
    }
}

/// `quartermaster.dev/capacity-type In [on-demand, spot]` (or just on-demand).
pub fn capacity_types(spot: bool) -> Requirement {
    if spot {
        is_in(labels::CAPACITY_TYPE, &["on-demand", "spot"])
    } else {
        is_in(labels::CAPACITY_TYPE, &["on-demand"])
    }
}

/// `kubernetes.io/arch In [amd64]` and `kubernetes.io/os In [linux]`, which every real NodePool
/// in the examples carries.
pub fn linux_amd64() -> [Requirement; 2] {
    [
        is_in(labels::ARCH, &["amd64"]),
        is_in(labels::OS, &["linux"]),
    ]
}

/// The DaemonSets of a GPU cluster:
///
/// * Prometheus node-exporter on every node: 100m / 128Mi, tolerates every taint;
/// * the NVIDIA device plugin on NVIDIA nodes: 50m / 128Mi (its chart sets no requests by
///   default; we charge what it typically uses), tolerating the GPU taint;
/// * the AWS EFA device plugin on EFA nodes: 10m / 20Mi, the defaults of the eks-charts
///   `aws-efa-k8s-device-plugin` chart, tolerating the GPU taint as its install guides do.
pub fn gpu_cluster_daemonsets() -> Vec<Pod> {
    let exporter = {
        let mut p = pod(
            "monitoring",
            "node-exporter".into(),
            Some("DaemonSet/monitoring/node-exporter".into()),
            requests(100, 128 * MIB),
        );
        p.tolerations = vec![tolerate_everything()];
        p
    };
    let device_plugin = {
        let mut p = pod(
            "kube-system",
            "nvidia-device-plugin".into(),
            Some("DaemonSet/kube-system/nvidia-device-plugin".into()),
            requests(50, 128 * MIB),
        );
        p.tolerations = vec![gpu_toleration()];
        p.node_terms = vec![
            [is_in(labels::INSTANCE_GPU_MANUFACTURER, &["nvidia"])]
                .into_iter()
                .collect(),
        ];
        p
    };
    let efa_plugin = {
        let mut p = pod(
            "kube-system",
            "aws-efa-k8s-device-plugin".into(),
            Some("DaemonSet/kube-system/aws-efa-k8s-device-plugin".into()),
            requests(10, 20 * MIB),
        );
        p.tolerations = vec![gpu_toleration()];
        p.node_terms = vec![
            [is_in(labels::INSTANCE_INTERCONNECT, &["efa"])]
                .into_iter()
                .collect(),
        ];
        p
    };
    vec![exporter, device_plugin, efa_plugin]
}
