//! `gpu-training` and `gpu-inference`: GPU workloads on the real embedded catalog.

use quartermaster_policies::{Operator, Requirement, Requirements};
use quartermaster_pricing::{Cloud, labels};
use quartermaster_solver::pod::ZONE;
use quartermaster_solver::{ClusterSnapshot, NodePoolSpec};

use crate::common::{
    GIB, affinity_term, capacity_types, gpu_cluster_daemonsets, gpu_requests, gpu_taint,
    gpu_toleration, is_in, label, linux_amd64, node_pool, numeric, pod, selector,
};
use crate::rng::{Rng, pick, seeded};

/// The pod label the Job controller sets, used by training jobs to keep their workers together.
pub const JOB_NAME_LABEL: &str = "batch.kubernetes.io/job-name";

/// Splits `total` into consecutive group sizes drawn from `sizes` (the last group is truncated
/// so the sum is exactly `total`).
pub fn group_sizes(rng: &mut Rng, total: usize, sizes: &[usize]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut left = total;
    while left > 0 {
        let n = pick(rng, sizes).min(left);
        out.push(n);
        left -= n;
    }
    out
}

/// A GPU NodePool: these requirements plus Linux/amd64, tainted `nvidia.com/gpu:NoSchedule`.
fn gpu_pool(name: &str, cloud: Cloud, mut requirements: Vec<Requirement>) -> NodePoolSpec {
    requirements.extend(linux_amd64());
    node_pool(
        name,
        cloud,
        requirements,
        Default::default(),
        vec![gpu_taint()],
    )
}

/// One node term made of these requirements.
fn term(requirements: impl IntoIterator<Item = Requirement>) -> Requirements {
    requirements.into_iter().collect()
}

// ------------------------------------------------------------------------------ gpu-training

/// The kinds of training job, with how often each is drawn (out of 10).
///
/// * `h100-efa`: built for AWS (NCCL over libfabric): 8 × H100 and all 32 EFA interfaces of a
///   `p5.48xlarge`;
/// * `a100-efa`: 8 × A100 and the 4 EFA interfaces of a `p4d.24xlarge` / `p4de.24xlarge`;
/// * `h100`: portable (NCCL over TCP / the cloud's own fabric): 8 × H100-class (`h100` or
///   `h200`) anywhere — `p5`, `p5en`, GCP `a3-highgpu-8g`, Azure `ND96isr_H100_v5`;
/// * `a100`: portable 8 × A100 — `p4d`, `p4de`, GCP `a2-highgpu-8g` / `a2-ultragpu-8g`, Azure
///   `ND96asr_v4` / `ND96amsr_A100_v4`.
///
/// CPU and memory requests are sized to fit the smallest machine of the class after overhead
/// and DaemonSets (A100: 96 vCPU / 680 GiB on `a2-highgpu-8g`; H100: 96 vCPU / 1900 GiB on the
/// Azure ND H100 v5).
const TRAINING_KINDS: [(&str, usize); 4] =
    [("h100-efa", 3), ("a100-efa", 2), ("h100", 3), ("a100", 2)];

/// Workers per training job.
const TRAINING_JOB_SIZES: [usize; 8] = [2, 2, 4, 4, 8, 8, 12, 16];

/// `gpu-training`: distributed training jobs of 2–16 workers, each worker one whole 8-GPU
/// machine, all workers of a job in one zone (required zonal pod affinity on the job label, as
/// NCCL jobs pin themselves to one placement group); NodePools on AWS (`p4d`, `p4de`, `p5`,
/// `p5en`), GCP (`a2`, `a3`) and Azure (ND A100 v4, ND H100 v5), on-demand only (an
/// interruption kills a synchronous job), tainted `nvidia.com/gpu`.
pub fn training(pods: usize) -> ClusterSnapshot {
    let pools = vec![
        gpu_pool(
            "aws-training",
            Cloud::Aws,
            vec![
                is_in(labels::INSTANCE_FAMILY, &["p4d", "p4de", "p5", "p5en"]),
                capacity_types(false),
            ],
        ),
        gpu_pool(
            "gcp-training",
            Cloud::Gcp,
            vec![
                is_in(labels::INSTANCE_FAMILY, &["a2", "a3"]),
                capacity_types(false),
            ],
        ),
        gpu_pool(
            "azure-training",
            Cloud::Azure,
            vec![
                is_in(
                    labels::INSTANCE_FAMILY,
                    &["NDasrA100v4", "NDamsrA100v4", "NDisrH100v5"],
                ),
                capacity_types(false),
            ],
        ),
    ];

    let mut rng = seeded();
    let kinds: Vec<&str> = TRAINING_KINDS
        .iter()
        .flat_map(|(k, w)| std::iter::repeat_n(*k, *w))
        .collect();
    let mut pending = Vec::with_capacity(pods);
    for (j, workers) in group_sizes(&mut rng, pods, &TRAINING_JOB_SIZES)
        .into_iter()
        .enumerate()
    {
        let kind = pick(&mut rng, &kinds);
        let job = format!("train-{kind}-{j}");
        let (gpu_names, efa, cpu, memory): (&[&str], i64, i64, i64) = match kind {
            "h100-efa" => (&["h100"], 32, 88_000, 1000 * GIB),
            "a100-efa" => (&["a100"], 4, 88_000, 600 * GIB),
            "h100" => (&["h100", "h200"], 0, 88_000, 1000 * GIB),
            _ => (&["a100"], 0, 88_000, 600 * GIB),
        };
        let job_labels = label(JOB_NAME_LABEL, &job);
        for w in 0..workers {
            let mut p = pod(
                "training",
                format!("{job}-worker-{w}"),
                Some(format!("Job/training/{job}")),
                gpu_requests(cpu, memory, 8, efa),
            );
            p.labels = job_labels.clone();
            p.node_terms = vec![term([is_in(labels::INSTANCE_GPU_NAME, gpu_names)])];
            p.tolerations = vec![gpu_toleration()];
            p.affinity = vec![affinity_term(ZONE, selector(&job_labels))];
            pending.push(p);
        }
    }
    ClusterSnapshot {
        pending,
        node_pools: pools,
        daemonsets: gpu_cluster_daemonsets(),
        ..ClusterSnapshot::default()
    }
}

// ----------------------------------------------------------------------------- gpu-inference

/// An inference deployment class: name, GPUs per replica, minimum GPU memory (MiB, `Gt`), CPU
/// (millicores), memory (GiB), whether it must run on on-demand capacity, and its weight.
struct InferenceClass {
    name: &'static str,
    gpus: i64,
    gpu_memory_gt_mib: i64,
    cpu: i64,
    memory_gib: i64,
    on_demand_only: bool,
    weight: usize,
}

/// The deployment classes of `gpu-inference`. The first is the shape of
/// aws/karpenter-provider-aws#5379 (2 vCPU, 13Gi, one GPU per pod), where Karpenter bought a
/// 4-GPU `g5.12xlarge` for two such pods instead of two `g5.xlarge`.
const INFERENCE_CLASSES: [InferenceClass; 7] = [
    InferenceClass {
        name: "chat-7b",
        gpus: 1,
        gpu_memory_gt_mib: 20_000,
        cpu: 2000,
        memory_gib: 13,
        on_demand_only: false,
        weight: 4,
    },
    InferenceClass {
        name: "embed",
        gpus: 1,
        gpu_memory_gt_mib: 20_000,
        cpu: 1000,
        memory_gib: 8,
        on_demand_only: false,
        weight: 2,
    },
    InferenceClass {
        name: "rerank",
        gpus: 1,
        gpu_memory_gt_mib: 20_000,
        cpu: 3000,
        memory_gib: 12,
        on_demand_only: true,
        weight: 1,
    },
    InferenceClass {
        name: "chat-13b",
        gpus: 1,
        gpu_memory_gt_mib: 40_000,
        cpu: 3000,
        memory_gib: 24,
        on_demand_only: false,
        weight: 2,
    },
    InferenceClass {
        name: "chat-13b-tp2",
        gpus: 2,
        gpu_memory_gt_mib: 20_000,
        cpu: 6000,
        memory_gib: 40,
        on_demand_only: false,
        weight: 2,
    },
    InferenceClass {
        name: "chat-34b-tp2",
        gpus: 2,
        gpu_memory_gt_mib: 40_000,
        cpu: 8000,
        memory_gib: 64,
        on_demand_only: false,
        weight: 1,
    },
    InferenceClass {
        name: "vision-tp2",
        gpus: 2,
        gpu_memory_gt_mib: 40_000,
        cpu: 8000,
        memory_gib: 48,
        on_demand_only: true,
        weight: 1,
    },
];

/// Replicas per inference deployment.
const INFERENCE_REPLICAS: [usize; 12] = [1, 2, 2, 3, 4, 4, 6, 8, 10, 12, 16, 24];

/// `gpu-inference`: model-serving Deployments of 1–24 replicas, each replica 1 or 2 GPUs with a
/// minimum GPU memory (`quartermaster.dev/instance-gpu-memory Gt 20000` or `Gt 40000` in its
/// node affinity) and modest CPU and memory; some latency-critical ones pinned to on-demand.
/// NodePools: AWS `g4dn`/`g5`/`g6`/`g6e` and GCP `g2`/`a2`, spot and on-demand, tainted
/// `nvidia.com/gpu`.
pub fn inference(pods: usize) -> ClusterSnapshot {
    let pools = vec![
        gpu_pool(
            "aws-inference",
            Cloud::Aws,
            vec![
                is_in(labels::INSTANCE_FAMILY, &["g4dn", "g5", "g6", "g6e"]),
                capacity_types(true),
            ],
        ),
        gpu_pool(
            "gcp-inference",
            Cloud::Gcp,
            vec![
                is_in(labels::INSTANCE_FAMILY, &["g2", "a2"]),
                capacity_types(true),
            ],
        ),
    ];

    let mut rng = seeded();
    let classes: Vec<&InferenceClass> = INFERENCE_CLASSES
        .iter()
        .flat_map(|c| std::iter::repeat_n(c, c.weight))
        .collect();
    let mut pending = Vec::with_capacity(pods);
    for (d, replicas) in group_sizes(&mut rng, pods, &INFERENCE_REPLICAS)
        .into_iter()
        .enumerate()
    {
        let class = pick(&mut rng, &classes);
        let name = format!("{}-{d}", class.name);
        let app = label("app", &name);
        let mut node_term = vec![numeric(
            labels::INSTANCE_GPU_MEMORY,
            Operator::Gt,
            class.gpu_memory_gt_mib,
        )];
        if class.on_demand_only {
            node_term.push(is_in(labels::CAPACITY_TYPE, &["on-demand"]));
        }
        let node_term = term(node_term);
        for r in 0..replicas {
            let mut p = pod(
                "inference",
                format!("{name}-{r}"),
                Some(format!("Deployment/inference/{name}")),
                gpu_requests(class.cpu, class.memory_gib * GIB, class.gpus, 0),
            );
            p.labels = app.clone();
            p.node_terms = vec![node_term.clone()];
            p.tolerations = vec![gpu_toleration()];
            pending.push(p);
        }
    }
    ClusterSnapshot {
        pending,
        node_pools: pools,
        daemonsets: gpu_cluster_daemonsets(),
        ..ClusterSnapshot::default()
    }
}
