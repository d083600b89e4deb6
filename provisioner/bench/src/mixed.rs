//! `mixed`: one EKS-style cluster running CPU services, GPU inference and some GPU training.

use quartermaster_policies::{Operator, Requirement, Requirements};
use quartermaster_pricing::{Cloud, labels};
use quartermaster_solver::ClusterSnapshot;
use quartermaster_solver::pod::ZONE;
use rand::RngExt;

use crate::common::{
    GIB, MIB, affinity_term, capacity_types, gpu_cluster_daemonsets, gpu_requests, gpu_taint,
    gpu_toleration, is_in, label, linux_amd64, node_pool, numeric, pod, requests, selector, spread,
};
use crate::gpu::JOB_NAME_LABEL;
use crate::rng::{pick, seeded};

/// The availability zones the cluster's subnets cover.
pub const ZONES: [&str; 4] = ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"];

/// A workload kind and its share of deployments (out of 20).
const KINDS: [(&str, usize); 7] = [
    ("web", 5),
    ("api", 5),
    ("worker", 3),
    ("cache", 1),
    ("infer-1", 3),
    ("infer-multi", 2),
    ("train", 1),
];

const WEB_CPU: [i64; 4] = [100, 250, 500, 1000];
const WEB_MEMORY_MIB: [i64; 4] = [128, 256, 512, 1024];
const API_CPU: [i64; 4] = [250, 500, 1000, 2000];
const API_MEMORY_MIB: [i64; 4] = [512, 1024, 2048, 4096];
const WORKER_CPU: [i64; 4] = [1000, 2000, 3000, 4000];
const WORKER_MEMORY_MIB: [i64; 4] = [2048, 4096, 6144, 8192];
const CACHE_MEMORY_MIB: [i64; 3] = [8192, 12288, 16384];
const REPLICAS: [usize; 10] = [2, 3, 3, 4, 6, 8, 10, 12, 20, 30];
const INFERENCE_REPLICAS: [usize; 6] = [1, 2, 2, 4, 6, 8];
const TRAINING_WORKERS: [usize; 3] = [2, 2, 4];

/// `mixed`: Deployments of web/API/worker/cache pods (CPU only; half of the web and API ones
/// spread over zones with a hard `maxSkew: 1` on their `app` label), GPU inference Deployments
/// of 1–4 GPUs with GPU-memory selectors, and a few 8-GPU training jobs (EFA, zonal
/// self-affinity). Kinds are drawn per workload (web 25%, API 25%, worker 15%, cache 5%,
/// 1-GPU inference 15%, 2–4-GPU inference 10%, training 5%), so pods split roughly the same
/// way. NodePools, all on AWS in `us-east-1a`–`d`:
///
/// * `general`: CPU-only types (`instance-gpu-count DoesNotExist`), spot and on-demand;
/// * `gpu`: `g5`, `g6`, `g6e`, spot and on-demand, tainted `nvidia.com/gpu`;
/// * `gpu-training`: `p4d`, `p5`, on-demand, tainted `nvidia.com/gpu`.
///
/// GPU pods tolerate the taint; CPU pods do not, so they stay off GPU machines.
pub fn snapshot(pods: usize) -> ClusterSnapshot {
    let zones = || is_in(labels::ZONE, &ZONES);
    let with_base = |mut r: Vec<Requirement>| {
        r.extend(linux_amd64());
        r.push(zones());
        r
    };
    let pools = vec![
        node_pool(
            "general",
            Cloud::Aws,
            with_base(vec![
                Requirement::does_not_exist(labels::INSTANCE_GPU_COUNT),
                capacity_types(true),
            ]),
            Default::default(),
            Vec::new(),
        ),
        node_pool(
            "gpu",
            Cloud::Aws,
            with_base(vec![
                is_in(labels::INSTANCE_FAMILY, &["g5", "g6", "g6e"]),
                capacity_types(true),
            ]),
            Default::default(),
            vec![gpu_taint()],
        ),
        node_pool(
            "gpu-training",
            Cloud::Aws,
            with_base(vec![
                is_in(labels::INSTANCE_FAMILY, &["p4d", "p5"]),
                capacity_types(false),
            ]),
            Default::default(),
            vec![gpu_taint()],
        ),
    ];

    let mut rng = seeded();
    let kinds: Vec<&str> = KINDS
        .iter()
        .flat_map(|(k, w)| std::iter::repeat_n(*k, *w))
        .collect();
    let mut pending = Vec::with_capacity(pods);
    let mut w = 0usize;
    while pending.len() < pods {
        let kind = pick(&mut rng, &kinds);
        let sizes: &[usize] = match kind {
            "train" => &TRAINING_WORKERS,
            "infer-1" | "infer-multi" => &INFERENCE_REPLICAS,
            _ => &REPLICAS,
        };
        let replicas = pick(&mut rng, sizes).min(pods - pending.len());
        let name = format!("{kind}-{w}");
        w += 1;
        match kind {
            "web" | "api" | "worker" | "cache" => {
                let (cpu, memory) = match kind {
                    "web" => (pick(&mut rng, &WEB_CPU), pick(&mut rng, &WEB_MEMORY_MIB)),
                    "api" => (pick(&mut rng, &API_CPU), pick(&mut rng, &API_MEMORY_MIB)),
                    "worker" => (
                        pick(&mut rng, &WORKER_CPU),
                        pick(&mut rng, &WORKER_MEMORY_MIB),
                    ),
                    _ => (1000, pick(&mut rng, &CACHE_MEMORY_MIB)),
                };
                let spread_over_zones = matches!(kind, "web" | "api") && rng.random_bool(0.5);
                let app = label("app", &name);
                for r in 0..replicas {
                    let mut p = pod(
                        "apps",
                        format!("{name}-{r}"),
                        Some(format!("Deployment/apps/{name}")),
                        requests(cpu, memory * MIB),
                    );
                    if spread_over_zones {
                        p.topology_spread = vec![spread(ZONE, 1, selector(&app))];
                    }
                    p.labels = app.clone();
                    pending.push(p);
                }
            }
            "infer-1" | "infer-multi" => {
                let gpus = if kind == "infer-1" {
                    1
                } else {
                    pick(&mut rng, &[2, 2, 4])
                };
                let gpu_memory_gt = pick(&mut rng, &[20_000, 20_000, 40_000]);
                let cpu = 2000 * gpus;
                let memory = 12 * GIB * gpus;
                let app = label("app", &name);
                let node_term: Requirements = [numeric(
                    labels::INSTANCE_GPU_MEMORY,
                    Operator::Gt,
                    gpu_memory_gt,
                )]
                .into_iter()
                .collect();
                for r in 0..replicas {
                    let mut p = pod(
                        "ml",
                        format!("{name}-{r}"),
                        Some(format!("Deployment/ml/{name}")),
                        gpu_requests(cpu, memory, gpus, 0),
                    );
                    p.labels = app.clone();
                    p.node_terms = vec![node_term.clone()];
                    p.tolerations = vec![gpu_toleration()];
                    pending.push(p);
                }
            }
            _ => {
                let job_labels = label(JOB_NAME_LABEL, &name);
                for r in 0..replicas {
                    let mut p = pod(
                        "ml",
                        format!("{name}-worker-{r}"),
                        Some(format!("Job/ml/{name}")),
                        gpu_requests(88_000, 600 * GIB, 8, 4),
                    );
                    p.labels = job_labels.clone();
                    p.tolerations = vec![gpu_toleration()];
                    p.affinity = vec![affinity_term(ZONE, selector(&job_labels))];
                    pending.push(p);
                }
            }
        }
    }
    ClusterSnapshot {
        pending,
        node_pools: pools,
        daemonsets: gpu_cluster_daemonsets(),
        ..ClusterSnapshot::default()
    }
}
