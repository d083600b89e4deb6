//! `quartermaster plan`: the JSON contract, the shipped workload examples, reasons for pods that
//! cannot be placed, and one-line errors.

use std::collections::BTreeSet;

use quartermaster_tests::{Output, path, quartermaster};
use serde_json::Value;

const GPU_POOL: &str = "examples/nodepools/aws-gpu.yaml";
const GENERAL_POOL: &str = "examples/nodepools/aws-general.yaml";

/// Writes `text` to a fresh temporary file and returns its path.
fn temp_file(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("qm-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join(name);
    std::fs::write(&file, text).expect("write temp file");
    file.display().to_string()
}

/// `plan -o json` over the two AWS example pools and `files`.
fn plan_json(files: &[&str]) -> (Output, Value) {
    let gpu = path(GPU_POOL);
    let general = path(GENERAL_POOL);
    let mut argv = vec!["plan", "-o", "json", "-f", &gpu, "-f", &general];
    for f in files {
        argv.extend(["-f", f]);
    }
    let out = quartermaster(&argv);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    let json = out.json();
    (out, json)
}

/// Every pod the plan places, new nodes and existing ones alike.
fn placed(plan: &Value) -> Vec<String> {
    let mut pods = Vec::new();
    for key in ["new_nodes", "existing_nodes"] {
        for node in plan[key]
            .as_array()
            .unwrap_or_else(|| panic!("{key} is an array"))
        {
            for pod in node["pods"].as_array().expect("pods is an array") {
                pods.push(pod.as_str().expect("pods are strings").to_owned());
            }
        }
    }
    pods
}

fn unschedulable(plan: &Value) -> Vec<(String, String)> {
    plan["unschedulable"]
        .as_array()
        .expect("unschedulable is an array")
        .iter()
        .map(|u| {
            (
                u["pod"].as_str().unwrap().to_owned(),
                u["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn json_contract_has_the_promised_keys() {
    let (_, plan) = plan_json(&[&path("examples/workloads/vllm-inference.yaml")]);
    for key in [
        "new_nodes",
        "existing_nodes",
        "unschedulable",
        "cost_per_hour",
        "lower_bound_per_hour",
    ] {
        assert!(plan.get(key).is_some(), "plan lacks {key}: {plan}");
    }
    assert!(plan["cost_per_hour"].is_number());
    assert!(plan["lower_bound_per_hour"].is_number());
    assert!(plan["existing_nodes"].is_array());
    let nodes = plan["new_nodes"].as_array().expect("new_nodes array");
    assert!(!nodes.is_empty(), "six GPU pods need new nodes: {plan}");
    let mut total = 0.0;
    for node in nodes {
        for key in [
            "nodepool",
            "cloud",
            "instance_type",
            "zone",
            "capacity_type",
            "price_per_hour",
            "pods",
            "alternatives",
            "accelerator_note",
        ] {
            assert!(node.get(key).is_some(), "new node lacks {key}: {node}");
        }
        assert_eq!(node["nodepool"], "aws-gpu");
        assert_eq!(node["cloud"], "aws");
        assert!(
            ["spot", "on-demand"].contains(&node["capacity_type"].as_str().unwrap()),
            "{node}"
        );
        total += node["price_per_hour"].as_f64().expect("price is a number");
        for alternative in node["alternatives"].as_array().expect("alternatives array") {
            for key in ["instance_type", "zone", "capacity_type", "price_per_hour"] {
                assert!(
                    alternative.get(key).is_some(),
                    "alternative lacks {key}: {alternative}"
                );
            }
        }
    }
    let cost = plan["cost_per_hour"].as_f64().unwrap();
    assert!(
        (cost - total).abs() < 1e-6,
        "cost_per_hour {cost} is the sum of new node prices {total}"
    );
    assert!(plan["lower_bound_per_hour"].as_f64().unwrap() <= cost + 1e-9);
    for pod in placed(&plan) {
        assert!(
            pod.starts_with("inference/vllm-llama-8b-"),
            "pods are namespace/name: {pod}"
        );
    }
}

#[test]
fn every_example_places_all_its_pods() {
    let cases: [(&str, &[&str]); 3] = [
        (
            "vllm-inference.yaml",
            &[
                "inference/vllm-llama-8b-0",
                "inference/vllm-llama-8b-1",
                "inference/vllm-llama-8b-2",
                "inference/vllm-llama-8b-3",
                "inference/vllm-llama-8b-4",
                "inference/vllm-llama-8b-5",
            ],
        ),
        (
            "pytorch-training-job.yaml",
            &[
                "training/llm-pretrain-0",
                "training/llm-pretrain-1",
                "training/llm-pretrain-2",
                "training/llm-pretrain-3",
            ],
        ),
        (
            "mixed-namespace.yaml",
            &[
                "shop/web-0",
                "shop/web-1",
                "shop/web-2",
                "shop/web-3",
                "shop/checkout-api-0",
                "shop/checkout-api-1",
                "shop/redis-0",
                "shop/redis-1",
                "shop/redis-2",
                "shop/notebook-alice",
            ],
        ),
    ];
    for (file, expected) in cases {
        let (_, plan) = plan_json(&[&path(&format!("examples/workloads/{file}"))]);
        assert!(
            unschedulable(&plan).is_empty(),
            "{file}: {:?}",
            unschedulable(&plan)
        );
        let got: BTreeSet<String> = placed(&plan).into_iter().collect();
        let want: BTreeSet<String> = expected.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(got, want, "{file}");
    }
}

#[test]
fn training_workers_get_one_node_each_in_one_zone_with_efa() {
    let (_, plan) = plan_json(&[&path("examples/workloads/pytorch-training-job.yaml")]);
    let nodes = plan["new_nodes"].as_array().unwrap();
    assert_eq!(
        nodes.len(),
        4,
        "hostname anti-affinity: one worker per node: {plan}"
    );
    let zones: BTreeSet<&str> = nodes.iter().map(|n| n["zone"].as_str().unwrap()).collect();
    assert_eq!(
        zones.len(),
        1,
        "zone affinity keeps the workers together: {zones:?}"
    );
    let catalog = quartermaster(&["catalog", "--cloud", "aws", "-o", "json"]).json();
    for node in nodes {
        let it = catalog
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == node["instance_type"])
            .expect("in the catalog");
        assert!(
            it["efa_count"].as_u64().unwrap() >= 4,
            "{} has too few EFA interfaces",
            node["instance_type"]
        );
        assert!(it["accelerator"]["count"].as_u64().unwrap() >= 8);
    }
}

#[test]
fn the_daemonset_and_skipped_kinds_are_noted_not_errors() {
    let (_, plan) = plan_json(&[&path("examples/workloads/mixed-namespace.yaml")]);
    let notes = plan["notes"].as_array().expect("notes array");
    let text: Vec<&str> = notes.iter().filter_map(Value::as_str).collect();
    assert!(
        text.iter()
            .any(|n| n.contains("Service") && n.contains("ConfigMap")),
        "{text:?}"
    );
    assert!(
        !placed(&plan).iter().any(|p| p.contains("node-exporter")),
        "a DaemonSet is overhead, not a pod to place"
    );
}

#[test]
fn unknown_kinds_are_skipped() {
    let file = temp_file(
        "unknown-kinds.yaml",
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {size: 3}
---
apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly}\nspec: {schedule: '@daily', jobTemplate: {spec: {template: {spec: {containers: [{name: c}]}}}}}
---
apiVersion: v1\nkind: Pod\nmetadata: {name: small}\nspec: {containers: [{name: c, resources: {requests: {cpu: 100m}}}]}
",
    );
    let (_, plan) = plan_json(&[&file]);
    assert_eq!(placed(&plan), ["default/small"]);
    let notes = plan["notes"].to_string();
    assert!(
        notes.contains("Widget") && notes.contains("CronJob"),
        "{notes}"
    );
}

#[test]
fn a_pod_bigger_than_any_machine_is_unschedulable_with_the_reason() {
    let file = temp_file(
        "sixteen-gpus.yaml",
        "apiVersion: v1
kind: Pod
metadata: {name: huge, namespace: ml}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  containers:
  - name: c
    resources:
      limits: {nvidia.com/gpu: 16}
",
    );
    let (_, plan) = plan_json(&[&file]);
    let u = unschedulable(&plan);
    assert_eq!(u.len(), 1, "{plan}");
    assert_eq!(u[0].0, "ml/huge");
    assert!(u[0].1.contains("16 nvidia.com/gpu"), "{}", u[0].1);
    assert!(
        u[0].1.contains('8'),
        "the reason names the largest machine's 8 GPUs: {}",
        u[0].1
    );
    assert!(placed(&plan).is_empty());
}

#[test]
fn a_taint_no_pool_tolerates_is_named() {
    let file = temp_file(
        "untolerated.yaml",
        "apiVersion: v1
kind: Pod
metadata: {name: no-toleration}
spec:
  containers:
  - name: c
    resources:
      limits: {nvidia.com/gpu: 1}
",
    );
    let gpu = path(GPU_POOL);
    let out = quartermaster(&["plan", "-o", "json", "-f", &gpu, "-f", &file]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let plan = out.json();
    let u = unschedulable(&plan);
    assert_eq!(u.len(), 1, "{plan}");
    assert!(
        u[0].1.contains("nvidia.com/gpu=true:NoSchedule"),
        "{}",
        u[0].1
    );
}

#[test]
fn table_output_shows_nodes_cost_and_bound() {
    let gpu = path(GPU_POOL);
    let general = path(GENERAL_POOL);
    let workload = path("examples/workloads/pytorch-training-job.yaml");
    let out = quartermaster(&["plan", "-f", &gpu, "-f", &general, "-f", &workload]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.stdout.contains("NODEPOOL"), "{}", out.stdout);
    assert!(
        out.stdout.contains("training/llm-pretrain-0"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("lower bound $"), "{}", out.stdout);
}

#[test]
fn bad_yaml_is_one_error_line() {
    let file = temp_file(
        "broken.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: [unclosed\n",
    );
    let out = quartermaster(&["plan", "-f", &file]);
    assert_eq!(out.code, 1);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(out.stderr.starts_with("error: "), "{}", out.stderr);
    assert!(out.stderr.contains("broken.yaml"), "{}", out.stderr);
}

#[test]
fn a_malformed_object_is_one_error_line_naming_it_and_the_field() {
    let file = temp_file(
        "bad-quantity.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}\n",
    );
    let out = quartermaster(&["plan", "-f", &file]);
    assert_eq!(out.code, 1);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.starts_with(&format!(
            "error: {file}: Pod/default/p: spec.containers[0].resources.requests.cpu: invalid quantity"
        )),
        "{}",
        out.stderr
    );
    let missing = quartermaster(&["plan", "-f", "/nonexistent/workload.yaml"]);
    assert_eq!(missing.code, 1);
    assert_eq!(missing.stderr.lines().count(), 1, "{}", missing.stderr);
}

#[test]
fn a_pool_without_its_node_class_is_planned_with_a_note() {
    let pool = temp_file(
        "pool-only.yaml",
        "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: lonely}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: missing}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}
",
    );
    let out = quartermaster(&["plan", "-o", "json", "-f", &pool]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let plan = out.json();
    assert_eq!(placed(&plan), ["default/p"]);
    assert!(
        plan["notes"].to_string().contains("NodePool lonely: NodeClass AWSNodeClass/missing not given; planned against aws defaults"),
        "{}",
        plan["notes"]
    );
}

#[test]
fn room_on_an_existing_node_is_used_before_buying() {
    let file = temp_file(
        "existing-node.yaml",
        "apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-1-17.ec2.internal
  labels:
    quartermaster.dev/nodepool: aws-general
    node.kubernetes.io/instance-type: m6i.xlarge
    topology.kubernetes.io/zone: us-east-1a
    kubernetes.io/hostname: ip-10-0-1-17.ec2.internal
    kubernetes.io/arch: amd64
    quartermaster.dev/capacity-type: on-demand
status:
  capacity: {cpu: '4', memory: 16Gi, pods: '58'}
  allocatable: {cpu: 3920m, memory: 15Gi, pods: '58'}
---
apiVersion: v1
kind: Pod
metadata: {name: running, namespace: shop}
spec:
  nodeName: ip-10-0-1-17.ec2.internal
  containers: [{name: c, resources: {requests: {cpu: '2', memory: 4Gi}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: small, namespace: shop}
spec:
  containers: [{name: c, resources: {requests: {cpu: '1', memory: 2Gi}}}]
",
    );
    let (_, plan) = plan_json(&[&file]);
    assert!(plan["new_nodes"].as_array().unwrap().is_empty(), "{plan}");
    let existing = plan["existing_nodes"].as_array().unwrap();
    assert_eq!(existing.len(), 1, "{plan}");
    assert_eq!(existing[0]["node"], "ip-10-0-1-17.ec2.internal");
    assert_eq!(
        existing[0]["pods"],
        serde_json::json!(["shop/small"]),
        "the bound pod is not re-placed"
    );
    assert_eq!(plan["cost_per_hour"].as_f64(), Some(0.0));
}

#[test]
fn a_directory_is_read_as_kubectl_apply_reads_it() {
    let out = quartermaster(&[
        "plan",
        "-o",
        "json",
        "-f",
        &path("examples/nodepools"),
        "-f",
        &path("examples/workloads/vllm-inference.yaml"),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(!placed(&out.json()).is_empty(), "{}", out.stdout);
    let empty = std::env::temp_dir().join(format!("qm-empty-dir-{}", std::process::id()));
    std::fs::create_dir_all(&empty).unwrap();
    let out = quartermaster(&["plan", "-f", empty.to_str().unwrap()]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("holds no *.yaml, *.yml or *.json file"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_byte_order_mark_is_not_an_error() {
    let file = temp_file(
        "bom.yaml",
        "\u{feff}apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}\n",
    );
    let out = quartermaster(&[
        "plan",
        "-f",
        &file,
        "-f",
        &path("examples/nodepools/aws-general.yaml"),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
}

#[test]
fn an_unrendered_helm_template_is_named_as_such() {
    let file = temp_file(
        "chart.yaml",
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Values.name }}\n",
    );
    let out = quartermaster(&["plan", "-f", &file]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("chart.yaml: this is an unrendered Helm template"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_file_that_is_no_manifest_is_named_in_the_error() {
    let file = temp_file("notes.txt", "hello world\n");
    let out = quartermaster(&[
        "plan",
        "-f",
        &path("examples/nodepools/aws-gpu.yaml"),
        "-f",
        &file,
    ]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .contains("notes.txt: document 1: no kind (is this a Kubernetes manifest?)"),
        "{}",
        out.stderr
    );
}

#[test]
fn usage_errors_carry_no_colour_codes_off_a_terminal() {
    let out = quartermaster(&["foo"]);
    assert_eq!(out.code, 2);
    assert!(
        out.stderr.contains("unrecognized subcommand"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains('\u{1b}'),
        "ANSI escape in {:?}",
        out.stderr
    );
}

/// Karpenter's `spread-hostname-zone.yaml` (50 one-CPU pods, at most 2 per node, zones within 5
/// of each other) on its `large-instances.yaml` NodePool: in one of the six us-east-1 zones the
/// catalog offers that pool only accelerator types (p5 when the issue was filed), and the zone
/// spread forces ⌈(50 − 5·5) / 6⌉ = 5 pods there, so 3 accelerator nodes, not more — each
/// saying why, in the table and in JSON.
#[test]
fn cpu_pods_on_accelerator_nodes_are_only_as_many_as_forced_and_explained() {
    let corpus = quartermaster_tests::workspace_root().join("../shared/real-world/karpenter-aws");
    assert!(
        corpus.is_dir(),
        "the real-world corpus is missing: expected {}",
        corpus.display()
    );
    let pool = corpus.join("v1/large-instances.yaml").display().to_string();
    let pods = corpus
        .join("workloads/spread-hostname-zone.yaml")
        .display()
        .to_string();
    let out = quartermaster(&["plan", "-o", "json", "-f", &pool, "-f", &pods]);
    assert_eq!(out.code, 0, "{}\n{}", out.stdout, out.stderr);
    let plan = out.json();
    assert_eq!(placed(&plan).len(), 50);
    let nodes = plan["new_nodes"].as_array().expect("new_nodes");
    let accelerated: Vec<&Value> = nodes
        .iter()
        .filter(|n| !n["accelerator_note"].is_null())
        .collect();
    assert_eq!(accelerated.len(), 3, "{plan:#}");
    let zone = accelerated[0]["zone"].as_str().expect("zone").to_owned();
    let instance_type = accelerated[0]["instance_type"]
        .as_str()
        .expect("type")
        .to_owned();
    for n in &accelerated {
        assert_eq!(n["zone"], zone.as_str());
        let note = n["accelerator_note"].as_str().expect("accelerator_note");
        assert!(
            note.contains(&format!(
                "zone {zone}: NodePool large-instances offers these pods only accelerator types there"
            )),
            "{note}"
        );
        assert!(
            note.contains(&format!(
                "(maxSkew 5 over 6 zones) forces at least 5 of the 50 pods it counts into {zone}"
            )),
            "{note}"
        );
    }
    // Nodes elsewhere are of types without accelerators.
    assert!(
        nodes
            .iter()
            .all(|n| n["zone"] == zone.as_str() || n["accelerator_note"].is_null())
    );
    let table = quartermaster(&["plan", "-f", &pool, "-f", &pods]);
    let summary = format!(
        "NodePool large-instances: 3 × {instance_type} in {zone} for pods that request no accelerator: zone {zone}"
    );
    assert!(table.stdout.contains(&summary), "{}", table.stdout);
}

#[test]
fn a_capacity_buffer_is_bought_with_the_pods_and_priced_by_the_plan_without_it() {
    let vllm = path("examples/workloads/vllm-inference.yaml");
    let buffer = path("examples/workloads/vllm-buffer.yaml");
    let (_, without) = plan_json(&[&vllm]);
    let (_, with) = plan_json(&[&vllm, &buffer]);
    let buffers = with["capacity_buffers"]
        .as_array()
        .expect("capacity_buffers");
    assert_eq!(buffers.len(), 1, "{with}");
    let b = &buffers[0];
    assert_eq!(b["buffer"], "inference/vllm-headroom");
    assert_eq!(b["source"], "Deployment/vllm-llama-8b");
    // 33% of 6 replicas, rounded up: 2 chunks (the 4-GPU limit does not bind), both placed.
    assert_eq!(
        (b["replicas"].as_u64(), b["placed"].as_u64()),
        (Some(2), Some(2)),
        "{b}"
    );
    assert!(b["problem"].is_null(), "{b}");
    let cost = with["cost_per_hour"].as_f64().unwrap() - without["cost_per_hour"].as_f64().unwrap();
    assert!(cost > 0.0, "headroom is bought");
    assert!(
        (b["cost_per_hour"].as_f64().unwrap() - cost).abs() < 1e-6,
        "{b}"
    );
    assert!((with["headroom_cost_per_hour"].as_f64().unwrap() - cost).abs() < 1e-6);
    let placeholders: Vec<&str> = with["new_nodes"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["pods"].as_array().unwrap())
        .filter_map(|p| p.as_str())
        .filter(|p| p.starts_with("inference/capacitybuffer-vllm-headroom-"))
        .collect();
    assert_eq!(placeholders.len(), 2, "{with}");
    assert!(
        without.get("capacity_buffers").is_none(),
        "the key only with buffers"
    );
    // The table says it too.
    let out = quartermaster(&["plan", "-f", &path(GPU_POOL), "-f", &vllm, "-f", &buffer]);
    assert!(
        out.stdout.contains("Headroom (CapacityBuffers)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("inference/vllm-headroom"),
        "{}",
        out.stdout
    );
}
