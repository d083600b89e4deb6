//! NodePool guardrails from YAML: `maxGpuOvershoot` (aws/karpenter-provider-aws#7038: an
//! 8 × A100 node for a 1-GPU pod) and `requirements[].minValues`, through `plan` and `explain`.

use quartermaster_tests::quartermaster;
use serde_json::Value;

fn scratch(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("qm-guardrails-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn run(args: &[&str], files: &[&str]) -> Value {
    let mut all: Vec<&str> = args.to_vec();
    for f in files {
        all.extend(["-f", f]);
    }
    all.extend(["-o", "json"]);
    let out = quartermaster(&all);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json()
}

/// A NodePool allowing the g5 sizes and p4d.24xlarge (8 × A100), on-demand.
fn pool(guard: &str, extra: &str) -> String {
    format!(
        "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {{name: gpu}}
spec:
  template:
    spec:
      nodeClassRef: {{group: quartermaster.dev, kind: AWSNodeClass, name: gpu}}
      {guard}
      requirements:
        - {{key: quartermaster.dev/capacity-type, operator: In, values: [on-demand]}}
        - {{key: node.kubernetes.io/instance-type, operator: In,
            values: [g5.xlarge, g5.2xlarge, g5.12xlarge, g5.48xlarge, p4d.24xlarge]}}
        {extra}
---
apiVersion: quartermaster.dev/v1
kind: AWSNodeClass
metadata: {{name: gpu}}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
"
    )
}

/// One pod asking one GPU; `selector`: its nodeSelector (YAML flow map) or empty.
fn pod(selector: &str) -> String {
    format!(
        "apiVersion: v1
kind: Pod
metadata: {{name: infer, namespace: default}}
spec:
  {selector}
  containers:
  - name: c
    resources: {{limits: {{nvidia.com/gpu: 1}}, requests: {{cpu: '2', memory: 8Gi}}}}
"
    )
}

fn types_of(nodes: &Value) -> Vec<String> {
    nodes
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["instance_type"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn a_one_gpu_pod_that_needs_an_a100_gets_p4d_only_without_the_guard() {
    let work = scratch(
        "a100-pod.yaml",
        &pod("nodeSelector: {karpenter.k8s.aws/instance-gpu-name: a100}"),
    );
    let free = scratch("free-pool.yaml", &pool("", ""));
    let p = run(&["plan"], &[&free, &work]);
    assert_eq!(types_of(&p["new_nodes"]), ["p4d.24xlarge"], "{p:#}");

    let guarded = scratch("guarded-pool.yaml", &pool("maxGpuOvershoot: 2", ""));
    let p = run(&["plan"], &[&guarded, &work]);
    assert!(p["new_nodes"].as_array().unwrap().is_empty(), "{p:#}");
    let reason = p["unschedulable"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("overshoot: 8 GPUs for 1 requested, maxGpuOvershoot 2"),
        "{reason}"
    );
}

#[test]
fn the_guard_keeps_oversized_types_out_of_the_fallbacks_and_explain_says_why() {
    let work = scratch("plain-pod.yaml", &pod(""));
    // One zone: across the five us-east-1 zones the catalog sells g5 in, the 12 alternatives are
    // all g5.xlarge / 2xlarge / 12xlarge before any 8-GPU type.
    let free = scratch(
        "free-pool-2.yaml",
        &pool(
            "",
            "- {key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}",
        ),
    );
    let p = run(&["plan"], &[&free, &work]);
    assert_eq!(types_of(&p["new_nodes"]), ["g5.xlarge"], "{p:#}");
    assert!(
        types_of(&p["new_nodes"][0]["alternatives"])
            .iter()
            .any(|t| t == "p4d.24xlarge" || t == "g5.48xlarge"),
        "{p:#}"
    );

    let guarded = scratch("guarded-pool-2.yaml", &pool("maxGpuOvershoot: 2", ""));
    let p = run(&["plan"], &[&guarded, &work]);
    assert_eq!(types_of(&p["new_nodes"]), ["g5.xlarge"], "{p:#}");
    let fallbacks = types_of(&p["new_nodes"][0]["alternatives"]);
    assert!(
        fallbacks
            .iter()
            .all(|t| t == "g5.xlarge" || t == "g5.2xlarge"),
        "{fallbacks:?}"
    );

    let e = run(&["explain", "pod", "default/infer"], &[&guarded, &work]);
    let p4d: Vec<&Value> = e["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            c["instance_type"] == "p4d.24xlarge"
                && c["capacity_type"] == "on-demand"
                && c["zone"].as_str().unwrap().starts_with("us-east-1")
        })
        .collect();
    assert!(!p4d.is_empty(), "{e:#}");
    for c in p4d {
        assert_eq!(c["verdict"], "rejected", "{c:#}");
        assert_eq!(
            c["reason"], "overshoot: 8 GPUs for 1 requested, maxGpuOvershoot 2",
            "{c:#}"
        );
    }
}

#[test]
fn min_values_on_instance_types_is_kept_or_the_pool_says_it_cannot() {
    let work = scratch("mv-pod.yaml", &pod(""));
    let three = scratch(
        "mv3-pool.yaml",
        &pool(
            "",
            "- {key: karpenter.k8s.aws/instance-family, operator: Exists, minValues: 2}",
        ),
    );
    let p = run(&["plan"], &[&three, &work]);
    assert_eq!(types_of(&p["new_nodes"]), ["g5.xlarge"], "{p:#}");
    let mut fallbacks = types_of(&p["new_nodes"][0]["alternatives"]);
    fallbacks.sort();
    fallbacks.dedup();
    assert!(fallbacks.iter().any(|t| t == "p4d.24xlarge"), "{p:#}");

    let six = scratch(
        "mv6-pool.yaml",
        &pool(
            "",
            "- {key: karpenter.k8s.aws/instance-family, operator: Exists, minValues: 3}",
        ),
    );
    let p = run(&["plan"], &[&six, &work]);
    assert!(p["new_nodes"].as_array().unwrap().is_empty(), "{p:#}");
    let reason = p["unschedulable"][0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("minValues: NodePool gpu requires 3 distinct"),
        "{reason}"
    );
}
