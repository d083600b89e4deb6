//! `quartermaster explain pod`: the Karpenter GPU blueprint's pod, as read from the real files,
//! with its choice and the reasons every other offering was not it.

use quartermaster_tests::{Output, quartermaster, workspace_root};
use serde_json::Value;

const BLUEPRINT: [&str; 3] = [
    "nvidia-gpu-workload__gpu-nodepool.yaml",
    "nvidia-gpu-workload__gpu-nodeclass.yaml",
    "nvidia-gpu-workload__workload.yaml",
];

fn explain(pod: &str, format: &str) -> Output {
    let dir = workspace_root().join("../shared/real-world/karpenter-blueprints");
    let files: Vec<String> = BLUEPRINT
        .iter()
        .map(|f| dir.join(f).display().to_string())
        .collect();
    let mut args = vec!["explain", "pod", pod];
    for f in &files {
        args.extend(["-f", f.as_str()]);
    }
    args.extend(["-o", format]);
    quartermaster(&args)
}

#[test]
fn the_blueprint_pod_is_explained_offering_by_offering() {
    let out = explain("default/nvidia-smi", "json");
    assert_eq!(out.code, 0, "{}", out.stderr);
    let e: Value = out.json();
    assert_eq!(e["pod"], "default/nvidia-smi");
    assert_eq!(e["outcome"]["kind"], "new-node", "{e:#}");
    let chosen = e["outcome"]["instance_type"].as_str().unwrap();
    assert!(chosen.starts_with("g4dn."), "a T4 type: {chosen}");
    let candidates = e["candidates"].as_array().unwrap();
    assert_eq!(candidates[0]["verdict"], "chosen");
    assert_eq!(candidates[0]["instance_type"], chosen);
    let reasons: Vec<&str> = candidates
        .iter()
        .map(|c| c["reason"].as_str().unwrap())
        .collect();
    // The pod selects karpenter.k8s.aws/instance-gpu-name=t4: other GPUs are ruled out by it,
    // naming the key; CPU types are ruled out by the NodePool's own requirements.
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("node selector / affinity: ") && r.contains("instance-gpu-name")),
        "{reasons:#?}"
    );
    assert!(
        reasons
            .iter()
            .any(|r| r.starts_with("NodePool requirement: ")),
        "{reasons:#?}"
    );
    for key in [
        "nodepool",
        "instance_type",
        "zone",
        "capacity_type",
        "price_per_hour",
        "verdict",
        "reason",
    ] {
        assert!(candidates[0].get(key).is_some(), "{key}");
    }
}

#[test]
fn the_table_says_where_the_pod_goes_and_an_unknown_pod_lists_the_pending_ones() {
    let out = explain("default/nvidia-smi", "table");
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .starts_with("Pod default/nvidia-smi goes to a new g4dn."),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("VERDICT"), "{}", out.stdout);
    let out = explain("default/nope", "table");
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains(
            "no pending pod default/nope in the input; its pending pods: default/nvidia-smi"
        ),
        "{}",
        out.stderr
    );
}
