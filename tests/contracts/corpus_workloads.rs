//! Real GPU workloads from public repositories (`../shared/real-world/workloads/`, sources in
//! `SOURCES.txt`) planned with a quartermaster.dev GPU NodePool: each file expands to the pods its
//! controller would create, with their GPU requests, and new GPU nodes are bought for them, or the
//! plan says precisely why not. Invalid GPU quantities are rejected with the API server's words.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::OnceLock;

use quartermaster_tests::{Output, path, quartermaster, workspace_root};
use serde_json::Value;

/// An untainted NVIDIA GPU pool on AWS (the example `aws-gpu` pool taints its nodes, which these
/// manifests, written for clusters that add GPU tolerations themselves, do not tolerate).
const AWS_GPU_POOL: &str = "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: corpus-gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: corpus-gpu}
      requirements:
        - {key: quartermaster.dev/instance-gpu-count, operator: Gte, values: ['1']}
        - {key: quartermaster.dev/instance-gpu-manufacturer, operator: In, values: [nvidia]}
---
apiVersion: quartermaster.dev/v1
kind: AWSNodeClass
metadata: {name: corpus-gpu}
spec:
  region: us-east-1
  amiFamily: AL2023
  # The LWS vLLM sample asks 800Gi of ephemeral storage: only the GPU types' local NVMe holds
  # that, as with Karpenter, under RAID0 (without it the root volume does).
  instanceStorePolicy: RAID0
  role: QuartermasterNodeRole
  subnetSelectorTerms: [{tags: {quartermaster.dev/discovery: corpus}}]
  securityGroupSelectorTerms: [{tags: {quartermaster.dev/discovery: corpus}}]
";

/// The same on GCP, for the GKE samples (they select `cloud.google.com/gke-accelerator`).
const GCP_GPU_POOL: &str = "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: corpus-gcp-gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: GCPNodeClass, name: corpus-gpu}
      requirements:
        - {key: quartermaster.dev/instance-gpu-count, operator: Gte, values: ['1']}
---
apiVersion: quartermaster.dev/v1
kind: GCPNodeClass
metadata: {name: corpus-gpu}
spec:
  project: corpus
  region: us-central1
  image: {project: cos-cloud, family: cos-stable}
";

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pool {
    /// [`AWS_GPU_POOL`] with `examples/nodepools/aws-general.yaml` for CPU-only pods.
    Aws,
    /// [`GCP_GPU_POOL`].
    Gcp,
}

/// What one corpus file must plan to.
struct Case {
    file: &'static str,
    pool: Pool,
    /// Every pod expanded (`namespace/name`) with its `nvidia.com/gpu` request.
    pods: &'static [(&'static str, u32)],
    /// The note saying what was expanded, for workload custom resources.
    note: Option<&'static str>,
}

const CASES: &[Case] = &[
    Case {
        file: "kubeflow-pytorch_job_mnist_nccl.yaml",
        pool: Pool::Aws,
        pods: &[
            ("default/pytorch-dist-mnist-nccl-master-0", 1),
            ("default/pytorch-dist-mnist-nccl-worker-0", 1),
        ],
        note: Some(
            "PyTorchJob/default/pytorch-dist-mnist-nccl: expanded to 2 pod(s): Master ×1, Worker ×1",
        ),
    },
    Case {
        file: "kubeflow-pytorch_deepspeed_demo.yaml",
        pool: Pool::Aws,
        pods: &[
            ("default/pytorch-deepspeed-demo-master-0", 1),
            ("default/pytorch-deepspeed-demo-worker-0", 1),
        ],
        note: Some(
            "PyTorchJob/default/pytorch-deepspeed-demo: expanded to 2 pod(s): Master ×1, Worker ×1",
        ),
    },
    Case {
        file: "kubeflow-paddle-simple-gpu.yaml",
        pool: Pool::Aws,
        pods: &[
            ("kubeflow/paddle-simple-gpu-worker-0", 2),
            ("kubeflow/paddle-simple-gpu-worker-1", 2),
        ],
        note: Some("PaddleJob/kubeflow/paddle-simple-gpu: expanded to 2 pod(s): Worker ×2"),
    },
    Case {
        file: "lws-vllm-gpu-lws.yaml",
        pool: Pool::Aws,
        pods: &[
            ("default/vllm-0", 8),
            ("default/vllm-0-1", 8),
            ("default/vllm-1", 8),
            ("default/vllm-1-1", 8),
        ],
        note: Some("LeaderWorkerSet/default/vllm: expanded to 4 pod(s): leader ×2, worker ×2"),
    },
    Case {
        file: "lws-sample-lws.yaml",
        pool: Pool::Aws,
        pods: &[
            ("default/leaderworkerset-sample-0", 0),
            ("default/leaderworkerset-sample-0-1", 0),
            ("default/leaderworkerset-sample-0-2", 0),
            ("default/leaderworkerset-sample-0-3", 0),
            ("default/leaderworkerset-sample-1", 0),
            ("default/leaderworkerset-sample-1-1", 0),
            ("default/leaderworkerset-sample-1-2", 0),
            ("default/leaderworkerset-sample-1-3", 0),
            ("default/leaderworkerset-sample-2", 0),
            ("default/leaderworkerset-sample-2-1", 0),
            ("default/leaderworkerset-sample-2-2", 0),
            ("default/leaderworkerset-sample-2-3", 0),
        ],
        note: Some(
            "LeaderWorkerSet/default/leaderworkerset-sample: expanded to 12 pod(s): leader ×3, worker ×9",
        ),
    },
    Case {
        file: "kuberay-ray-service.llm-serve.yaml",
        pool: Pool::Aws,
        pods: &[
            ("default/ray-serve-llm-head", 0),
            ("default/ray-serve-llm-gpu-group-worker-0", 4),
        ],
        note: Some(
            "RayService/default/ray-serve-llm: expanded to 2 pod(s): head ×1, worker group gpu-group ×1",
        ),
    },
    Case {
        file: "kserve-hf_isvc.yaml",
        pool: Pool::Aws,
        pods: &[("default/huggingface-llama2-predictor-0", 1)],
        note: Some(
            "InferenceService/default/huggingface-llama2: expanded to 1 pod(s): predictor ×1",
        ),
    },
    Case {
        file: "kserve-llmisvc-qwen2-7b-gpu-no-scheduler.yaml",
        pool: Pool::Aws,
        pods: &[
            ("default/qwen2-7b-instruct-single-no-scheduler-kserve-0", 1),
            ("default/qwen2-7b-instruct-single-no-scheduler-kserve-1", 1),
            ("default/qwen2-7b-instruct-single-no-scheduler-kserve-2", 1),
        ],
        note: Some(
            "LLMInferenceService/default/qwen2-7b-instruct-single-no-scheduler: expanded to 3 pod(s): decode ×3",
        ),
    },
    Case {
        file: "volcano-mindspore-gpu.yaml",
        pool: Pool::Aws,
        pods: &[
            ("default/mindspore-gpu-mpimaster-0", 0),
            ("default/mindspore-gpu-mpiworker-0", 1),
            ("default/mindspore-gpu-mpiworker-1", 1),
        ],
        note: Some(
            "Job.batch.volcano.sh/default/mindspore-gpu: expanded to 3 pod(s): mpimaster ×1, mpiworker ×2",
        ),
    },
    Case {
        file: "nvidia-device-plugin-README-gpu-pod.yaml",
        pool: Pool::Aws,
        pods: &[("default/gpu-pod", 1)],
        note: None,
    },
    Case {
        file: "nvidia-device-plugin-testdata-job-1.yaml",
        pool: Pool::Aws,
        pods: &[("default/j-e2e-1-0", 1)],
        note: None,
    },
    Case {
        file: "vllm-docs-k8s-mistral-7b-deployment.yaml",
        pool: Pool::Aws,
        pods: &[("default/mistral-7b-0", 1)],
        note: None,
    },
    Case {
        file: "gke-vllm-3-4b-it.yaml",
        pool: Pool::Gcp,
        pods: &[("default/vllm-gemma-deployment-0", 1)],
        note: None,
    },
];

/// Files pinned by a test of their own below.
const SPECIAL: &[&str] = &[
    "nvidia-device-plugin-daemonset.yml",
    "gke-vllm-3-27b-it.yaml",
];

/// The corpus directory; fails clearly when it is not there.
fn corpus() -> PathBuf {
    let dir = workspace_root().join("../shared/real-world/workloads");
    assert!(
        dir.is_dir(),
        "the real-world corpus is missing: expected {} (it sits beside the clone as ../shared/real-world)",
        dir.display()
    );
    dir
}

fn corpus_file(name: &str) -> String {
    let file = corpus().join(name);
    assert!(file.is_file(), "corpus file missing: {}", file.display());
    file.display().to_string()
}

/// Writes `text` to a temporary file named `name` and returns its path.
fn temp_file(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("qm-corpus-workloads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join(name);
    std::fs::write(&file, text).expect("write temp file");
    file.display().to_string()
}

fn pool_files(pool: Pool) -> Vec<String> {
    match pool {
        Pool::Aws => vec![
            temp_file("aws-gpu-pool.yaml", AWS_GPU_POOL),
            path("examples/nodepools/aws-general.yaml"),
        ],
        Pool::Gcp => vec![temp_file("gcp-gpu-pool.yaml", GCP_GPU_POOL)],
    }
}

/// `plan -f POOLS... -f FILE -o FORMAT`.
fn plan(pools: &[String], file: &str, format: &str) -> Output {
    let mut argv = vec!["plan", "-o", format];
    for p in pools {
        argv.extend(["-f", p.as_str()]);
    }
    argv.extend(["-f", file]);
    quartermaster(&argv)
}

fn ok_json(out: &Output, what: &str) -> Value {
    assert_eq!(
        out.code, 0,
        "{what}\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    out.json()
}

/// GPUs per instance type, by `(cloud, name)`, from `catalog -o json`.
fn gpus_per_instance_type() -> &'static BTreeMap<(String, String), u64> {
    static TABLE: OnceLock<BTreeMap<(String, String), u64>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let catalog = ok_json(&quartermaster(&["catalog", "-o", "json"]), "catalog");
        catalog
            .as_array()
            .expect("catalog is an array")
            .iter()
            .map(|t| {
                let key = (
                    t["cloud"].as_str().unwrap().to_owned(),
                    t["name"].as_str().unwrap().to_owned(),
                );
                (key, t["accelerator"]["count"].as_u64().unwrap_or(0))
            })
            .collect()
    })
}

fn notes(plan: &Value) -> Vec<&str> {
    plan["notes"]
        .as_array()
        .expect("notes is an array")
        .iter()
        .map(|n| n.as_str().expect("notes are strings"))
        .collect()
}

#[test]
fn every_corpus_file_is_pinned() {
    let pinned: BTreeSet<&str> = CASES
        .iter()
        .map(|c| c.file)
        .chain(SPECIAL.iter().copied())
        .collect();
    for entry in std::fs::read_dir(corpus()).expect("read the corpus directory") {
        let name = entry.expect("directory entry").file_name();
        let name = name.to_string_lossy();
        assert!(
            pinned.contains(name.as_ref()),
            "{name} is in the corpus but no test says what it must plan to"
        );
    }
}

#[test]
fn real_gpu_workloads_expand_and_buy_gpu_nodes() {
    let gpus_of = gpus_per_instance_type();
    for case in CASES {
        let what = format!("plan of {}", case.file);
        let plan = ok_json(
            &plan(&pool_files(case.pool), &corpus_file(case.file), "json"),
            &what,
        );
        assert_eq!(
            plan["unschedulable"],
            Value::Array(Vec::new()),
            "{what}: {plan:#}"
        );
        let expected: BTreeMap<&str, u32> = case.pods.iter().copied().collect();
        let mut placed: BTreeSet<String> = BTreeSet::new();
        let mut gpu_nodes = 0;
        for node in plan["new_nodes"].as_array().expect("new_nodes is an array") {
            let pods: Vec<&str> = node["pods"]
                .as_array()
                .expect("pods is an array")
                .iter()
                .map(|p| p.as_str().unwrap())
                .collect();
            let wanted: u32 = pods
                .iter()
                .map(|p| {
                    *expected
                        .get(p)
                        .unwrap_or_else(|| panic!("{what}: unexpected pod {p}: {plan:#}"))
                })
                .sum();
            let key = (
                node["cloud"].as_str().unwrap().to_owned(),
                node["instance_type"].as_str().unwrap().to_owned(),
            );
            let has = gpus_of
                .get(&key)
                .copied()
                .unwrap_or_else(|| panic!("{what}: {key:?} not in the catalog"));
            assert!(
                u64::from(wanted) <= has,
                "{what}: {key:?} has {has} GPU(s) for pods wanting {wanted}: {pods:?}"
            );
            if wanted > 0 {
                gpu_nodes += 1;
            }
            placed.extend(pods.iter().map(|p| (*p).to_owned()));
        }
        let all: BTreeSet<String> = expected.keys().map(|p| (*p).to_owned()).collect();
        assert_eq!(placed, all, "{what}: every expanded pod is placed once");
        let wants_gpus = expected.values().any(|g| *g > 0);
        assert_eq!(
            gpu_nodes > 0,
            wants_gpus,
            "{what}: new GPU nodes are bought exactly when pods ask for GPUs: {plan:#}"
        );
        if let Some(note) = case.note {
            assert!(
                notes(&plan).contains(&note),
                "{what}: no note {note:?}: {:?}",
                notes(&plan)
            );
        }
    }
}

#[test]
fn a_volcano_job_is_planned_not_mistaken_for_a_batch_job() {
    let out = plan(
        &pool_files(Pool::Aws),
        &corpus_file("volcano-mindspore-gpu.yaml"),
        "json",
    );
    let plan = ok_json(&out, "volcano");
    assert!(
        notes(&plan).contains(
            &"Job.batch.volcano.sh/default/mindspore-gpu: a gang of 3 of its 3 pod(s) (minAvailable): placed together in one zone, or not at all"
        ),
        "{:?}",
        notes(&plan)
    );
}

#[test]
fn the_tainted_example_pool_says_which_taint_is_not_tolerated() {
    // examples/nodepools/aws-gpu.yaml taints its nodes nvidia.com/gpu; the PyTorchJob's pods do
    // not tolerate it (the one NVIDIA sample that does gets a node).
    let pool = path("examples/nodepools/aws-gpu.yaml");
    let plan_of = |file: &str| {
        ok_json(
            &plan(std::slice::from_ref(&pool), &corpus_file(file), "json"),
            file,
        )
    };
    let plan = plan_of("kubeflow-pytorch_job_mnist_nccl.yaml");
    let reasons: Vec<(&str, &str)> = plan["unschedulable"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| (u["pod"].as_str().unwrap(), u["reason"].as_str().unwrap()))
        .collect();
    let reason = "no NodePool tolerates taint nvidia.com/gpu=true:NoSchedule";
    assert_eq!(
        reasons,
        [
            ("default/pytorch-dist-mnist-nccl-master-0", reason),
            ("default/pytorch-dist-mnist-nccl-worker-0", reason)
        ]
    );
    let plan = plan_of("nvidia-device-plugin-README-gpu-pod.yaml");
    assert_eq!(plan["new_nodes"][0]["nodepool"], "aws-gpu", "{plan:#}");
}

#[test]
fn a_daemon_set_alone_is_no_workload_and_the_plan_says_so() {
    let file = corpus_file("nvidia-device-plugin-daemonset.yml");
    let pools = pool_files(Pool::Aws);
    let out = plan(&pools, &file, "table");
    assert_eq!(out.code, 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .starts_with("No new nodes: no workload found in the input.\n"),
        "{}",
        out.stdout
    );
    let plan = ok_json(&plan(&pools, &file, "json"), "daemonset");
    assert!(
        notes(&plan)
            .iter()
            .any(|n| n.starts_with("no workload found: the input holds no pending pod")),
        "{:?}",
        notes(&plan)
    );
}

#[test]
fn gemma_27b_on_gke_asks_more_ephemeral_storage_than_a_gpu_machine_has() {
    // The sample asks 120Gi of ephemeral storage next to an A100 80GB; the catalog's machines
    // offer less, and the plan names the request.
    let out = plan(
        &pool_files(Pool::Gcp),
        &corpus_file("gke-vllm-3-27b-it.yaml"),
        "json",
    );
    let plan = ok_json(&out, "gemma 27b");
    assert_eq!(plan["new_nodes"], Value::Array(Vec::new()), "{plan:#}");
    let unschedulable = plan["unschedulable"].as_array().unwrap();
    assert_eq!(unschedulable.len(), 1, "{plan:#}");
    assert_eq!(unschedulable[0]["pod"], "default/vllm-gemma-deployment-0");
    let reason = unschedulable[0]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(
            "requests 120Gi ephemeral-storage; the largest compatible instance type has "
        ),
        "{reason}"
    );
}

/// A Deployment whose one container has these `resources`.
fn deployment(resources: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: gpu}}
spec:
  selector: {{matchLabels: {{app: gpu}}}}
  template:
    metadata: {{labels: {{app: gpu}}}}
    spec:
      containers:
      - name: c
        resources: {resources}
"
    )
}

#[test]
fn invalid_gpu_quantities_are_rejected_with_the_api_servers_words() {
    let pools = pool_files(Pool::Aws);
    let field = "Deployment/default/gpu: spec.template.spec.containers[0].resources";
    let cases = [
        (
            "{limits: {nvidia.com/gpu: 0.5}}",
            format!("{field}.limits.nvidia.com/gpu: Invalid value: \"500m\": must be an integer"),
        ),
        (
            "{limits: {nvidia.com/gpu: 500m}}",
            format!("{field}.limits.nvidia.com/gpu: Invalid value: \"500m\": must be an integer"),
        ),
        (
            "{requests: {nvidia.com/gpu: '1.5'}, limits: {nvidia.com/gpu: '1.5'}}",
            format!("{field}.limits.nvidia.com/gpu: Invalid value: \"1500m\": must be an integer"),
        ),
        (
            "{requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}",
            format!(
                "{field}.requests: Invalid value: \"1\": must be equal to nvidia.com/gpu limit of 2"
            ),
        ),
        (
            "{requests: {nvidia.com/gpu: 1}}",
            format!(
                "{field}.limits: Required value: Limit must be set for non overcommitable resources"
            ),
        ),
    ];
    for (i, (resources, message)) in cases.iter().enumerate() {
        let file = temp_file(&format!("invalid-{i}.yaml"), &deployment(resources));
        let out = plan(&pools, &file, "json");
        assert_eq!(out.code, 1, "{resources}: {}{}", out.stdout, out.stderr);
        assert_eq!(
            out.stderr,
            format!("error: {file}: {message}\n"),
            "{resources}"
        );
    }
}

/// Every pinned corpus file with its pools: the files to pass to `plan` and `explain`.
pub(crate) fn inputs() -> Vec<Vec<String>> {
    CASES
        .iter()
        .map(|case| {
            let mut files = pool_files(case.pool);
            files.push(corpus_file(case.file));
            files
        })
        .collect()
}
