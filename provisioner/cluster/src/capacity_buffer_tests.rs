use super::*;
use crate::testing::ingest;

const TEMPLATE: &str = "---
apiVersion: v1
kind: PodTemplate
metadata: {name: gpu-shape, namespace: ml}
template:
  metadata: {labels: {app: vllm}}
  spec:
    containers:
    - name: w
      image: vllm
      resources: {requests: {cpu: '8', memory: 32Gi, nvidia.com/gpu: '1'}, limits: {nvidia.com/gpu: '1'}}
";

const DEPLOYMENT: &str = "---
apiVersion: apps/v1
kind: Deployment
metadata: {name: vllm, namespace: ml}
spec:
  replicas: 10
  selector: {matchLabels: {app: vllm}}
  template:
    metadata: {labels: {app: vllm}}
    spec:
      containers:
      - name: w
        image: vllm
        resources: {requests: {cpu: '8', nvidia.com/gpu: '1'}, limits: {nvidia.com/gpu: '1'}}
";

fn buffer(name: &str, spec: &str) -> String {
    let spec: String = spec.lines().map(|l| format!("  {l}\n")).collect();
    format!(
        "---\napiVersion: autoscaling.x-k8s.io/v1alpha1\nkind: CapacityBuffer\nmetadata: {{name: {name}, namespace: ml, generation: 3}}\nspec:\n{spec}"
    )
}

fn only(yaml: &str) -> BufferPods {
    let ingested = ingest(yaml);
    assert_eq!(ingested.capacity_buffers.len(), 1);
    ingested.capacity_buffers[0].clone()
}

#[test]
fn a_pod_template_buffer_keeps_its_replicas_as_placeholders_outside_the_pending_pods() {
    let yaml = format!(
        "{TEMPLATE}{}",
        buffer("warm", "podTemplateRef: {name: gpu-shape}\nreplicas: 3")
    );
    let ingested = ingest(&yaml);
    let b = &ingested.capacity_buffers[0];
    assert_eq!(b.problem, None);
    assert_eq!(b.replicas, 3);
    assert_eq!(b.generation, Some(3));
    assert_eq!(b.source.as_deref(), Some("PodTemplate/gpu-shape"));
    let chunk = b.chunk.as_ref().unwrap();
    assert_eq!(
        chunk.labels.get(LABEL_BUFFER).map(String::as_str),
        Some("warm")
    );
    assert_eq!(chunk.labels.get("app").map(String::as_str), Some("vllm"));
    assert!(
        ingested.snapshot.pending.is_empty(),
        "placeholders are no pods"
    );
    let with = ingested.with_buffers();
    let names: Vec<String> = with.pending.iter().map(|p| p.id.to_string()).collect();
    assert_eq!(
        names,
        [
            "ml/capacitybuffer-warm-0",
            "ml/capacitybuffer-warm-1",
            "ml/capacitybuffer-warm-2"
        ]
    );
    let gpu = ingested.snapshot.resources.slot("nvidia.com/gpu").unwrap();
    assert_eq!(with.pending[0].requests.get(gpu), 1);
}

#[test]
fn percentage_of_a_workload_rounds_up_and_the_larger_of_replicas_and_percentage_wins() {
    let yaml = format!(
        "{DEPLOYMENT}{}",
        buffer(
            "b",
            "scalableRef: {apiGroup: apps, kind: Deployment, name: vllm}\npercentage: 25"
        )
    );
    let b = only(&yaml);
    assert_eq!(
        (b.replicas, b.problem.clone()),
        (3, None),
        "25% of 10 is 2.5: 3"
    );
    assert_eq!(b.source.as_deref(), Some("Deployment/vllm"));
    let yaml = format!(
        "{DEPLOYMENT}{}",
        buffer(
            "b",
            "scalableRef: {apiGroup: apps, kind: Deployment, name: vllm}\npercentage: 1\nreplicas: 2"
        )
    );
    assert_eq!(only(&yaml).replicas, 2);
    let yaml = format!(
        "{DEPLOYMENT}{}",
        buffer(
            "b",
            "scalableRef: {apiGroup: apps, kind: Deployment, name: vllm}\npercentage: 1"
        )
    );
    assert_eq!(only(&yaml).replicas, 1, "at least one chunk");
}

#[test]
fn limits_cap_the_chunks_and_alone_keep_as_many_as_fit() {
    let yaml = format!(
        "{TEMPLATE}{}",
        buffer(
            "b",
            "podTemplateRef: {name: gpu-shape}\nreplicas: 10\nlimits: {nvidia.com/gpu: '4'}"
        )
    );
    assert_eq!(only(&yaml).replicas, 4);
    let yaml = format!(
        "{TEMPLATE}{}",
        buffer(
            "b",
            "podTemplateRef: {name: gpu-shape}\nlimits: {cpu: '20', memory: 1Ti}"
        )
    );
    assert_eq!(only(&yaml).replicas, 2, "20 CPU / 8 CPU per chunk");
}

#[test]
fn a_workload_given_only_by_its_pods_is_read_from_them() {
    // What the controller sees: pods of a Deployment (through their ReplicaSet), no Deployment.
    let pod = |n: &str| {
        format!(
            "---
apiVersion: v1
kind: Pod
metadata:
  name: vllm-7d9f-{n}
  namespace: ml
  labels: {{app: vllm, pod-template-hash: 7d9f}}
  ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: vllm-7d9f, uid: u, controller: true}}]
spec:
  nodeName: node-1
  containers:
  - name: w
    image: vllm
    resources: {{requests: {{cpu: '8', nvidia.com/gpu: '1'}}, limits: {{nvidia.com/gpu: '1'}}}}
"
        )
    };
    let yaml = format!(
        "{}{}{}",
        pod("a"),
        pod("b"),
        buffer(
            "b",
            "scalableRef: {apiGroup: apps, kind: Deployment, name: vllm}\npercentage: 50"
        )
    );
    let b = only(&yaml);
    assert_eq!((b.replicas, b.problem.clone()), (1, None));
    assert!(b.chunk.unwrap().node_terms.is_empty());
}

#[test]
fn buffers_that_cannot_be_served_say_why_and_keep_nothing() {
    let cases = [
        (
            "podTemplateRef: {name: nope}\nreplicas: 1",
            "PodTemplate ml/nope is not found",
        ),
        (
            "podTemplateRef: {name: gpu-shape}",
            "podTemplateRef needs replicas or limits",
        ),
        (
            "podTemplateRef: {name: gpu-shape}\nreplicas: 1\nprovisioningStrategy: buffer.gke.io/standby-capacity",
            "is not served",
        ),
        (
            "podTemplateRef: {name: gpu-shape}\nscalableRef: {kind: Deployment, name: vllm}\nreplicas: 1",
            "both set",
        ),
        ("replicas: 1", "neither podTemplateRef nor scalableRef"),
        (
            "scalableRef: {kind: Deployment, name: gone}\nreplicas: 1",
            "Deployment ml/gone is not found",
        ),
        (
            "scalableRef: {kind: CronJob, name: x}\nreplicas: 1",
            "is not read",
        ),
        (
            "podTemplateRef: {name: gpu-shape}\nreplicas: -1",
            "must not be negative",
        ),
        (
            "podTemplateRef: {name: gpu-shape}\nreplicas: many",
            "replicas",
        ),
    ];
    for (spec, want) in cases {
        let b = only(&format!("{TEMPLATE}{}", buffer("b", spec)));
        let problem = b.problem.unwrap_or_default();
        assert!(problem.contains(want), "{spec}: {problem}");
        assert_eq!((b.replicas, b.chunk.is_none()), (0, true));
    }
}
