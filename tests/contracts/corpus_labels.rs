//! Label aliases against the real-world corpus (`../shared/real-world`, see its SOURCES.txt):
//! Karpenter's well-known labels in NodePool requirements and pod nodeSelectors, GKE's
//! `cloud.google.com/gke-accelerator`, the GPU Operator's `nvidia.com/gpu.product`, and the
//! `validate` warning for requirement keys nothing carries.
//!
//! Karpenter-format NodePools are turned into `quartermaster.dev` ones here by renaming the
//! API group and kinds in the text (the import command is tested in `corpus_karpenter.rs`).

use std::path::PathBuf;

use quartermaster_tests::{Output, quartermaster, workspace_root};
use serde_json::Value;

/// The corpus directory; fails with a clear message when it is missing.
fn corpus() -> PathBuf {
    let dir = workspace_root().join("../shared/real-world");
    assert!(
        dir.join("SOURCES.txt").is_file(),
        "the real-world corpus is missing: expected {} (in CI it sits beside the clone as ../shared)",
        dir.display()
    );
    dir
}

fn read(relative: &str) -> String {
    let file = corpus().join(relative);
    std::fs::read_to_string(&file)
        .unwrap_or_else(|e| panic!("cannot read corpus file {}: {e}", file.display()))
}

/// The NodePool documents of a Karpenter file, renamed into `quartermaster.dev`.
fn karpenter_node_pools(text: &str) -> String {
    text.split("\n---")
        .filter(|doc| doc.contains("kind: NodePool"))
        .map(|doc| {
            doc.replace(
                "apiVersion: karpenter.sh/v1",
                "apiVersion: quartermaster.dev/v1",
            )
            .replace("group: karpenter.k8s.aws", "group: quartermaster.dev")
            .replace("kind: EC2NodeClass", "kind: AWSNodeClass")
        })
        .collect::<Vec<_>>()
        .join("\n---\n")
}

/// Writes `text` to a fresh temporary file and returns its path.
fn temp_file(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("qm-corpus-labels-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join(name);
    std::fs::write(&file, text).expect("write temp file");
    file.display().to_string()
}

fn show(o: &Output) -> String {
    format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}",
        o.code, o.stdout, o.stderr
    )
}

/// `plan -o json -f FILE...`, which must succeed.
fn plan(files: &[&str]) -> Value {
    let mut argv = vec!["plan", "-o", "json"];
    for f in files {
        argv.extend(["-f", f]);
    }
    let out = quartermaster(&argv);
    assert_eq!(out.code, 0, "{}", show(&out));
    out.json()
}

/// `(instance_type, capacity_type)` of every new node.
fn new_nodes(plan: &Value) -> Vec<(String, String)> {
    plan["new_nodes"]
        .as_array()
        .expect("new_nodes is an array")
        .iter()
        .map(|n| {
            (
                n["instance_type"]
                    .as_str()
                    .expect("instance_type")
                    .to_owned(),
                n["capacity_type"]
                    .as_str()
                    .expect("capacity_type")
                    .to_owned(),
            )
        })
        .collect()
}

fn assert_all_placed(plan: &Value) {
    assert_eq!(
        plan["unschedulable"],
        Value::Array(Vec::new()),
        "every pod is placed: {plan:#}"
    );
}

const GPU_POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: gpu-pod}
spec:
  nodeSelector: SELECTOR
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  containers:
  - name: main
    image: busybox
    resources:
      limits: {nvidia.com/gpu: GPUS}
";

fn gpu_pod(selector: &str, gpus: u32) -> String {
    GPU_POD
        .replace("SELECTOR", selector)
        .replace("GPUS", &gpus.to_string())
}

/// The Karpenter blueprint's GPU NodePool (`capacity-type In [on-demand]`,
/// `instance-category In [g]`, `instance-gpu-manufacturer In [nvidia]`).
fn blueprint_gpu_pool() -> String {
    karpenter_node_pools(&read(
        "karpenter-blueprints/nvidia-gpu-workload__gpu-nodepool.yaml",
    ))
}

#[test]
fn the_gpu_blueprint_pod_selecting_karpenter_gpu_name_gets_an_on_demand_t4() {
    let pool = temp_file("blueprint-gpu-pool.yaml", &blueprint_gpu_pool());
    let workload = corpus()
        .join("karpenter-blueprints/nvidia-gpu-workload__workload.yaml")
        .display()
        .to_string();
    let p = plan(&[&pool, &workload]);
    assert_all_placed(&p);
    assert_eq!(
        new_nodes(&p),
        [("g4dn.xlarge".to_owned(), "on-demand".to_owned())],
        "{p:#}"
    );
}

#[test]
fn capacity_type_not_in_spot_buys_no_spot_and_instance_family_in_is_honoured() {
    let pool = blueprint_gpu_pool()
        .replace(
            "operator: In\n          values: [\"on-demand\"]",
            "operator: NotIn\n          values: [\"spot\"]",
        )
        .replace(
            "karpenter.k8s.aws/instance-category\n          operator: In\n          values: [\"g\"]",
            "karpenter.k8s.aws/instance-family\n          operator: In\n          values: [\"p4d\", \"p5\"]",
        )
        .replace("    cpu: 100\n    memory: 100Gi\n    nvidia.com/gpu: 5\n", "    nvidia.com/gpu: 16\n");
    assert!(
        pool.contains("NotIn") && pool.contains("p4d") && !pool.contains("100Gi"),
        "{pool}"
    );
    let pool = temp_file("not-in-spot-pool.yaml", &pool);
    let pod = temp_file("eight-gpus.yaml", &gpu_pod("{}", 8));
    let p = plan(&[&pool, &pod]);
    assert_all_placed(&p);
    let nodes = new_nodes(&p);
    assert_eq!(nodes.len(), 1, "{p:#}");
    assert_ne!(nodes[0].1, "spot", "NotIn [spot] must not buy spot: {p:#}");
    assert!(
        ["p4d.24xlarge", "p5.48xlarge"].contains(&nodes[0].0.as_str()),
        "{p:#}"
    );
}

#[test]
fn karpenter_spot_pool_and_a_pod_selecting_karpenter_capacity_type() {
    // spot.yaml: capacity-type In [spot], instance-category In [c, m, r], generation Gt 2;
    // the catalog sells no CPU type as spot, so the categories become GPU ones and the
    // generation bound 4 (g5, g6, g6e, p5, p5en; not g4dn or p4d).
    let pools = karpenter_node_pools(&read("karpenter-aws/v1/spot.yaml"))
        .replace("values: [\"c\", \"m\", \"r\"]", "values: [\"g\", \"p\"]")
        .replace(
            "operator: Gt\n          values: [\"2\"]",
            "operator: Gt\n          values: [\"4\"]",
        );
    assert!(
        pools.contains("[\"g\", \"p\"]") && pools.contains("[\"4\"]"),
        "{pools}"
    );
    let pool = temp_file("karpenter-spot.yaml", &pools);
    let pod = temp_file(
        "spot-pod.yaml",
        &gpu_pod(
            "{karpenter.sh/capacity-type: spot, karpenter.sh/nodepool: spot}",
            1,
        ),
    );
    let p = plan(&[&pool, &pod]);
    assert_all_placed(&p);
    let nodes = new_nodes(&p);
    assert_eq!(nodes.len(), 1, "{p:#}");
    assert_eq!(nodes[0].1, "spot", "{p:#}");
    assert!(
        ["g5", "g6", "p5"].iter().any(|c| nodes[0].0.starts_with(c)),
        "category g or p, generation above 4: {p:#}"
    );
}

#[test]
fn a_pod_selecting_the_gpu_operator_product_schedules() {
    let pool = temp_file("blueprint-gpu-pool-2.yaml", &blueprint_gpu_pool());
    let pod = temp_file(
        "a10g-pod.yaml",
        &gpu_pod("{intent: gpu, nvidia.com/gpu.product: NVIDIA-A10G}", 1),
    );
    let p = plan(&[&pool, &pod]);
    assert_all_placed(&p);
    let nodes = new_nodes(&p);
    assert_eq!(nodes.len(), 1, "{p:#}");
    assert!(nodes[0].0.starts_with("g5."), "an A10G is a g5: {p:#}");
}

const GCP_POOL: &str = "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: gke-gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: GCPNodeClass, name: gpu}
      requirements:
      - {key: cloud.google.com/gke-spot, operator: DoesNotExist}
---
apiVersion: quartermaster.dev/v1
kind: GCPNodeClass
metadata: {name: gpu}
spec:
  project: acme-ml
  region: us-central1
  image: {project: cos-cloud, family: cos-stable}
  disk: {sizeGiB: 200}
";

#[test]
fn the_gke_samples_selecting_gke_accelerator_plan_the_right_gpu_node() {
    let pool = temp_file("gcp-pool.yaml", GCP_POOL);
    for (sample, expected) in [
        ("workloads/gke-vllm-3-4b-it.yaml", "g2-"),
        ("workloads/gke-vllm-3-27b-it.yaml", "a2-ultragpu-"),
    ] {
        // The 27b sample also asks for 120Gi of ephemeral storage, more than the 100 GB boot
        // disk the catalog assumes for GCP types without local SSD; that request is not what
        // this test is about, so it is taken out.
        let text = read(sample).replace("            ephemeral-storage: \"120Gi\"\n", "");
        let workload = temp_file(&sample.replace('/', "-"), &text);
        let p = plan(&[&pool, &workload]);
        assert_all_placed(&p);
        let nodes = new_nodes(&p);
        assert_eq!(nodes.len(), 1, "{sample}: {p:#}");
        assert!(nodes[0].0.starts_with(expected), "{sample}: {p:#}");
        assert_eq!(nodes[0].1, "on-demand", "gke-spot DoesNotExist: {p:#}");
    }
}

#[test]
fn validate_warns_about_a_requirement_key_no_instance_type_carries() {
    let pool = blueprint_gpu_pool().replace(
        "      requirements:\n",
        "      requirements:\n        - key: karpenter.k8s.aws/instance-cpu-manufacturer\n          operator: In\n          values: [\"intel\"]\n",
    );
    let file = temp_file("unknown-key.yaml", &pool);
    let out = quartermaster(&["validate", &file]);
    assert_eq!(out.code, 0, "a warning, not an error: {}", show(&out));
    assert!(
        out.stderr
            .contains("warning: spec.template.spec.requirements[0].key")
            && out
                .stderr
                .contains("\"karpenter.k8s.aws/instance-cpu-manufacturer\""),
        "{}",
        show(&out)
    );
    // The blueprint's own keys (aliases) draw no warning.
    let file = temp_file("blueprint.yaml", &blueprint_gpu_pool());
    let out = quartermaster(&["validate", &file]);
    assert_eq!(out.code, 0, "{}", show(&out));
    assert!(!out.stderr.contains("warning"), "{}", show(&out));
}

#[test]
fn every_karpenter_label_key_in_the_corpus_node_pools_is_understood() {
    let mut checked = 0;
    for dir in ["karpenter-aws/v1", "karpenter-blueprints"] {
        let mut files: Vec<_> = std::fs::read_dir(corpus().join(dir))
            .expect("corpus directory")
            .map(|e| e.expect("dir entry").path())
            .collect();
        files.sort();
        for path in files {
            let text = std::fs::read_to_string(&path).expect("corpus file");
            let pools = karpenter_node_pools(&text);
            if pools.trim().is_empty() || !pools.contains("apiVersion: quartermaster.dev/v1") {
                continue;
            }
            let name = path.file_name().expect("file name").to_string_lossy();
            let file = temp_file(&format!("pools-{name}"), &pools);
            let out = quartermaster(&["validate", &file]);
            if out.code == 0 {
                checked += 1;
            }
            for line in out.stderr.lines().filter(|l| l.contains("warning")) {
                assert!(
                    !line.contains("\"karpenter.sh/") && !line.contains("\"karpenter.k8s.aws/"),
                    "{name}: a Karpenter key is not understood: {line}"
                );
            }
        }
    }
    assert!(
        checked >= 10,
        "only {checked} corpus NodePool files validated"
    );
}
