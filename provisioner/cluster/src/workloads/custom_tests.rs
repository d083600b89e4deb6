//! Workload custom resources expand into the pods their controllers create (shapes of the real
//! manifests in the compatibility corpus).

use crate::Ingested;
use crate::testing::{ingest, ingest_err};

fn names(ingested: &Ingested) -> Vec<String> {
    ingested
        .snapshot
        .pending
        .iter()
        .map(|p| p.id.to_string())
        .collect()
}

/// The `nvidia.com/gpu` request of every pending pod.
fn gpus(ingested: &Ingested) -> Vec<i64> {
    let slot = ingested.snapshot.resources.slot("nvidia.com/gpu");
    ingested
        .snapshot
        .pending
        .iter()
        .map(|p| slot.map_or(0, |s| p.requests.get(s)))
        .collect()
}

fn note<'a>(ingested: &'a Ingested, prefix: &str) -> &'a str {
    ingested
        .notes
        .iter()
        .find(|n| n.starts_with(prefix))
        .unwrap_or_else(|| panic!("no note starting {prefix:?}: {:?}", ingested.notes))
}

const GPU_POD: &str = "spec:
          containers:
          - name: c
            resources: {limits: {nvidia.com/gpu: 1}}";

#[test]
fn pytorch_job_expands_master_and_workers() {
    let ingested = ingest(&format!(
        "apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata: {{name: mnist}}
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      template:
        metadata: {{labels: {{team: ml}}}}
        {GPU_POD}
    Worker:
      replicas: 3
      template:
        {GPU_POD}
"
    ));
    assert_eq!(
        names(&ingested),
        [
            "default/mnist-master-0",
            "default/mnist-worker-0",
            "default/mnist-worker-1",
            "default/mnist-worker-2"
        ]
    );
    assert_eq!(gpus(&ingested), [1, 1, 1, 1]);
    let master = &ingested.snapshot.pending[0];
    assert_eq!(master.labels["team"], "ml");
    assert_eq!(
        master.labels["training.kubeflow.org/replica-type"],
        "master"
    );
    assert_eq!(master.labels["training.kubeflow.org/job-name"], "mnist");
    assert_eq!(master.owner.as_deref(), Some("PyTorchJob/default/mnist"));
    assert_eq!(
        note(&ingested, "PyTorchJob/default/mnist"),
        "PyTorchJob/default/mnist: expanded to 4 pod(s): Master ×1, Worker ×3"
    );
    // Suspended: nothing to plan, and a note.
    let suspended = ingest(&format!(
        "apiVersion: kubeflow.org/v1\nkind: PaddleJob\nmetadata: {{name: p, namespace: kubeflow}}\nspec:\n  runPolicy: {{suspend: true}}\n  paddleReplicaSpecs:\n    Worker:\n      template:\n        {GPU_POD}\n"
    ));
    assert!(suspended.snapshot.pending.is_empty());
    note(&suspended, "PaddleJob/kubeflow/p: suspended");
}

#[test]
fn leader_worker_set_expands_groups_of_leader_and_workers() {
    let ingested = ingest(&format!(
        "apiVersion: leaderworkerset.x-k8s.io/v1
kind: LeaderWorkerSet
metadata: {{name: vllm}}
spec:
  replicas: 2
  leaderWorkerTemplate:
    size: 3
    leaderTemplate:
      metadata: {{labels: {{role: leader}}}}
      spec:
        containers: [{{name: l, resources: {{limits: {{nvidia.com/gpu: '8'}}}}}}]
    workerTemplate:
      {GPU_POD}
"
    ));
    assert_eq!(
        names(&ingested),
        [
            "default/vllm-0",
            "default/vllm-0-1",
            "default/vllm-0-2",
            "default/vllm-1",
            "default/vllm-1-1",
            "default/vllm-1-2"
        ]
    );
    assert_eq!(gpus(&ingested), [8, 1, 1, 8, 1, 1]);
    let leader = &ingested.snapshot.pending[3];
    assert_eq!(leader.labels["role"], "leader");
    assert_eq!(leader.labels["leaderworkerset.sigs.k8s.io/name"], "vllm");
    assert_eq!(
        leader.labels["leaderworkerset.sigs.k8s.io/group-index"],
        "1"
    );
    assert_eq!(
        note(&ingested, "LeaderWorkerSet/default/vllm"),
        "LeaderWorkerSet/default/vllm: expanded to 6 pod(s): leader ×2, worker ×4"
    );
    // Without a leaderTemplate the leader runs the worker template.
    let ingested = ingest(&format!(
        "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\nmetadata: {{name: s}}\nspec:\n  leaderWorkerTemplate:\n    size: 2\n    workerTemplate:\n      {GPU_POD}\n"
    ));
    assert_eq!(names(&ingested), ["default/s-0", "default/s-0-1"]);
    assert_eq!(gpus(&ingested), [1, 1]);
}

#[test]
fn ray_service_expands_head_and_worker_groups() {
    let ray = |autoscaling: bool| {
        ingest(&format!(
            "apiVersion: ray.io/v1
kind: RayService
metadata: {{name: llm}}
spec:
  rayClusterConfig:
    enableInTreeAutoscaling: {autoscaling}
    headGroupSpec:
      template:
        spec:
          containers: [{{name: head, resources: {{requests: {{cpu: '2'}}}}}}]
    workerGroupSpecs:
    - groupName: gpu-group
      replicas: 2
      minReplicas: 1
      numOfHosts: 2
      template:
        {GPU_POD}
"
        ))
    };
    let fixed = ray(false);
    assert_eq!(
        names(&fixed),
        [
            "default/llm-head",
            "default/llm-gpu-group-worker-0",
            "default/llm-gpu-group-worker-1",
            "default/llm-gpu-group-worker-2",
            "default/llm-gpu-group-worker-3"
        ]
    );
    assert_eq!(gpus(&fixed), [0, 1, 1, 1, 1]);
    let worker = &fixed.snapshot.pending[1];
    assert_eq!(worker.labels["ray.io/group"], "gpu-group");
    assert_eq!(worker.labels["ray.io/node-type"], "worker");
    let autoscaled = ray(true);
    assert_eq!(
        names(&autoscaled).len(),
        3,
        "head + minReplicas 1 × 2 hosts"
    );
    note(&autoscaled, "RayService/default/llm: autoscaling");
}

#[test]
fn inference_services_expand_predictor_and_template() {
    let ingested = ingest(
        "apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: llama, namespace: serve}
spec:
  predictor:
    minReplicas: 2
    tolerations: [{key: nvidia.com/gpu, operator: Exists}]
    model:
      modelFormat: {name: huggingface}
      resources:
        limits: {cpu: '6', memory: 24Gi, nvidia.com/gpu: '1'}
        requests: {cpu: '6', memory: 24Gi, nvidia.com/gpu: '1'}
---
apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata: {name: qwen}
spec:
  replicas: 3
  template:
    containers:
    - name: main
      resources: {limits: {nvidia.com/gpu: '1'}, requests: {nvidia.com/gpu: '1'}}
",
    );
    assert_eq!(
        names(&ingested),
        [
            "serve/llama-predictor-0",
            "serve/llama-predictor-1",
            "default/qwen-kserve-0",
            "default/qwen-kserve-1",
            "default/qwen-kserve-2"
        ]
    );
    assert_eq!(gpus(&ingested), [1, 1, 1, 1, 1]);
    let predictor = &ingested.snapshot.pending[0];
    assert_eq!(
        predictor.requests.get(quartermaster_solver::resources::CPU),
        6000
    );
    assert_eq!(predictor.tolerations.len(), 1);
    assert_eq!(
        note(&ingested, "InferenceService/serve/llama"),
        "InferenceService/serve/llama: expanded to 2 pod(s): predictor ×2"
    );
}

#[test]
fn job_set_runs_replicas_times_parallelism() {
    let ingested = ingest(
        "apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: train}
spec:
  replicatedJobs:
  - name: workers
    replicas: 2
    template:
      spec:
        parallelism: 2
        completions: 2
        template:
          spec:
            containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]
",
    );
    assert_eq!(
        names(&ingested),
        [
            "default/train-workers-0-0",
            "default/train-workers-0-1",
            "default/train-workers-1-0",
            "default/train-workers-1-1"
        ]
    );
    assert_eq!(
        ingested.snapshot.pending[0].labels["jobset.sigs.k8s.io/replicatedjob-name"],
        "workers"
    );
}

#[test]
fn a_volcano_job_is_not_a_batch_job() {
    // Same kind and name, different API groups: both are read, each as what it is.
    let ingested = ingest(&format!(
        "apiVersion: batch.volcano.sh/v1alpha1
kind: Job
metadata: {{name: mindspore}}
spec:
  minAvailable: 3
  schedulerName: volcano
  tasks:
  - replicas: 1
    name: mpimaster
    template:
      spec:
        containers: [{{name: m}}]
  - replicas: 2
    name: mpiworker
    template:
      {GPU_POD}
---
apiVersion: batch/v1
kind: Job
metadata: {{name: mindspore}}
spec:
  template:
    {GPU_POD}
"
    ));
    assert_eq!(
        names(&ingested),
        [
            "default/mindspore-0",
            "default/mindspore-mpimaster-0",
            "default/mindspore-mpiworker-0",
            "default/mindspore-mpiworker-1"
        ]
    );
    assert_eq!(gpus(&ingested), [1, 0, 1, 1]);
    assert_eq!(
        ingested.snapshot.pending[1].owner.as_deref(),
        Some("Job.batch.volcano.sh/default/mindspore")
    );
    note(
        &ingested,
        "Job.batch.volcano.sh/default/mindspore: a gang of 3 of its 3 pod(s) (minAvailable)",
    );
    let gang = quartermaster_solver::Gang {
        name: "default/mindspore".into(),
        min_member: 3,
    };
    assert!(
        ingested.snapshot.pending[1..]
            .iter()
            .all(|p| p.gang.as_ref() == Some(&gang))
    );
    note(
        &ingested,
        "Job.batch.volcano.sh/default/mindspore: expanded to 3 pod(s): mpimaster ×1, mpiworker ×2",
    );
}

#[test]
fn unknown_kinds_and_groups_are_skipped_by_group_and_kind() {
    let ingested = ingest(
        "apiVersion: example.com/v1\nkind: PyTorchJob\nmetadata: {name: x}\nspec: {}
---
apiVersion: example.com/v1\nkind: Deployment\nmetadata: {name: y}\nspec: {}
",
    );
    assert!(ingested.snapshot.pending.is_empty());
    assert_eq!(
        note(&ingested, "skipped kinds"),
        "skipped kinds not used for planning: Deployment.example.com ×1, PyTorchJob.example.com ×1"
    );
}

#[test]
fn malformed_custom_workloads_name_the_field() {
    let e = ingest_err(
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: x}\nspec:\n  pytorchReplicaSpecs:\n    Worker: {replicas: two}\n",
    );
    assert!(
        e.to_string().starts_with(
            "PyTorchJob/default/x: spec.pytorchReplicaSpecs.Worker.replicas: invalid type"
        ),
        "{e}"
    );
    let e = ingest_err(
        "apiVersion: leaderworkerset.x-k8s.io/v1\nkind: LeaderWorkerSet\nmetadata: {name: x}\nspec:\n  leaderWorkerTemplate: {size: 2}\n",
    );
    assert_eq!(
        e.to_string(),
        "LeaderWorkerSet/default/x: spec.leaderWorkerTemplate.workerTemplate: missing"
    );
    let e = ingest_err(&format!(
        "apiVersion: ray.io/v1\nkind: RayCluster\nmetadata: {{name: r}}\nspec:\n  headGroupSpec: {{template: {{spec: {{containers: [{{name: h}}]}}}}}}\n  workerGroupSpecs:\n  - groupName: g\n    replicas: 100000\n    numOfHosts: 4\n    template:\n      {GPU_POD}\n"
    ));
    assert!(e.to_string().contains("400001 pods is more than"), "{e}");
    // The API server's checks apply inside custom workloads too, at the template's path.
    let e = ingest_err(
        "apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: x}\nspec:\n  pytorchReplicaSpecs:\n    Worker:\n      template:\n        spec:\n          containers: [{name: c, resources: {limits: {nvidia.com/gpu: 0.5}}}]\n",
    );
    assert_eq!(
        e.to_string(),
        "PyTorchJob/default/x: spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].resources.limits.nvidia.com/gpu: Invalid value: \"500m\": must be an integer"
    );
}

#[test]
fn train_jobs_ray_jobs_and_scaled_to_zero_services_say_what_they_plan() {
    let ingested = ingest(
        "apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: llama}
spec:
  runtimeRef: {name: torch-distributed}
  trainer:
    numNodes: 2
    resourcesPerNode:
      limits: {nvidia.com/gpu: 4}
---
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: on-existing}
spec:
  entrypoint: python job.py
  clusterSelector: {ray.io/cluster: shared}
---
apiVersion: serving.kserve.io/v1beta1
kind: InferenceService
metadata: {name: idle}
spec:
  predictor:
    minReplicas: 0
    model: {modelFormat: {name: sklearn}}
---
apiVersion: serving.kserve.io/v1alpha2
kind: LLMInferenceService
metadata: {name: from-config}
spec:
  baseRefs: [{name: shared-config}]
",
    );
    assert_eq!(
        names(&ingested),
        ["default/llama-node-0-0", "default/llama-node-0-1"]
    );
    assert_eq!(gpus(&ingested), [4, 4]);
    note(
        &ingested,
        "TrainJob/default/llama: the runtime's pod template",
    );
    note(
        &ingested,
        "RayJob/default/on-existing: no spec.rayClusterSpec",
    );
    note(
        &ingested,
        "InferenceService/default/idle: predictor scales to zero",
    );
    note(
        &ingested,
        "LLMInferenceService/default/from-config: no spec.template",
    );
    assert_eq!(
        note(&ingested, "RayJob/default/on-existing: expanded"),
        "RayJob/default/on-existing: expanded to 0 pod(s): nothing to run"
    );
}
