//! `plan --extended-resource-toleration`: manifests read as an API server running the
//! ExtendedResourceToleration admission plugin would admit them. Built on the real Kubeflow
//! PyTorchJob, whose GPU pods carry no toleration, and the repository's tainted GPU pool.

use quartermaster_tests::{quartermaster, workspace_root};
use serde_json::Value;

fn plan(extra: &[&str]) -> Value {
    let pool = workspace_root().join("examples/nodepools/aws-gpu.yaml");
    let job = workspace_root()
        .join("../shared/real-world/workloads/kubeflow-pytorch_job_mnist_nccl.yaml");
    let (pool, job) = (pool.display().to_string(), job.display().to_string());
    let mut args = vec![
        "plan",
        "-f",
        pool.as_str(),
        "-f",
        job.as_str(),
        "-o",
        "json",
    ];
    args.extend(extra);
    let out = quartermaster(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json()
}

#[test]
fn gpu_pods_without_a_toleration_reach_tainted_gpu_nodes_only_under_the_plugin() {
    let without = plan(&[]);
    assert_eq!(
        without["unschedulable"].as_array().unwrap().len(),
        2,
        "{without:#}"
    );
    let with = plan(&["--extended-resource-toleration"]);
    assert!(
        with["unschedulable"].as_array().unwrap().is_empty(),
        "{with:#}"
    );
    let nodes = with["new_nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "one GPU node per worker: {with:#}");
    assert!(nodes.iter().all(|n| n["nodepool"] == "aws-gpu"));
    assert!(
        with["notes"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n == "ExtendedResourceToleration applied: 2 pod(s) tolerate the NoSchedule taints of the extended resources they request"),
        "{with:#}"
    );
}
