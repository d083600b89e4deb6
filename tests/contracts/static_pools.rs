//! Static NodePools (`spec.replicas`, Karpenter's static capacity) in `plan`: the pool's nodes
//! are bought whatever the pods need, pods may use them, and the pool never grows for pods.
//! Built on the real `static-nodepool` Karpenter blueprint.

use quartermaster_tests::{quartermaster, workspace_root};
use serde_json::Value;

const BLUEPRINT: &str = "karpenter-blueprints/static-nodepool__static-nodepool.yaml";

/// The blueprint with its one instance type swapped for `instance_type`, written to a scratch
/// file.
fn blueprint_with(instance_type: &str, replicas: u32) -> String {
    let text = std::fs::read_to_string(
        workspace_root()
            .join("../shared/real-world")
            .join(BLUEPRINT),
    )
    .expect("the real-world corpus beside the checkout");
    assert!(text.contains("g6e.8xlarge") && text.contains("replicas: 1"));
    let text = text
        .replace("g6e.8xlarge", instance_type)
        .replace("replicas: 1", &format!("replicas: {replicas}"));
    let dir = std::env::temp_dir().join(format!("qm-static-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("static-{instance_type}-{replicas}.yaml"));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn gpu_deployment(replicas: u32) -> String {
    let text = format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: infer}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: infer}}}}
  template:
    metadata: {{labels: {{app: infer}}}}
    spec:
      tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]
      containers:
      - name: c
        resources: {{limits: {{nvidia.com/gpu: 1}}, requests: {{cpu: '1', memory: 4Gi}}}}
"
    );
    let dir = std::env::temp_dir().join(format!("qm-static-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("infer-{replicas}.yaml"));
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn plan(files: &[&str]) -> Value {
    let mut args = vec!["plan"];
    for f in files {
        args.extend(["-f", f]);
    }
    args.extend(["-o", "json"]);
    let out = quartermaster(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json()
}

#[test]
fn a_static_pool_buys_its_replicas_without_pods() {
    let p = plan(&[&blueprint_with("g6e.xlarge", 2)]);
    let nodes = p["new_nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{p:#}");
    assert!(nodes.iter().all(|n| n["nodepool"] == "gpu-static"
        && n["instance_type"] == "g6e.xlarge"
        && n["pods"].as_array().unwrap().is_empty()));
    assert!(
        p["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .starts_with("NodePool gpu-static is static (replicas: 2)")),
        "{p:#}"
    );
}

#[test]
fn pods_use_the_static_nodes_and_never_make_the_pool_grow() {
    let p = plan(&[&blueprint_with("g6e.xlarge", 1), &gpu_deployment(2)]);
    let nodes = p["new_nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{p:#}");
    assert_eq!(nodes[0]["pods"].as_array().unwrap().len(), 1, "{p:#}");
    let unschedulable = p["unschedulable"].as_array().unwrap();
    assert_eq!(unschedulable.len(), 1, "{p:#}");
    assert_eq!(
        unschedulable[0]["reason"], "NodePool gpu-static: limit nodes=1 reached",
        "{p:#}"
    );
}
