//! Gangs in `plan`: the real Volcano MindSpore job (minAvailable 3) is placed whole, in one
//! zone, or not at all.

use std::collections::BTreeSet;

use quartermaster_tests::{quartermaster, workspace_root};
use serde_json::Value;

fn plan(pool_limits: &str) -> Value {
    let dir = std::env::temp_dir().join(format!("qm-gangs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pool = dir.join(format!("pool{}.yaml", pool_limits.len()));
    std::fs::write(
        &pool,
        format!(
            "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {{name: gpu}}
spec:
  {pool_limits}
  template:
    spec:
      nodeClassRef: {{group: quartermaster.dev, kind: AWSNodeClass, name: gpu}}
      requirements:
        - {{key: quartermaster.dev/capacity-type, operator: In, values: [on-demand]}}
        - {{key: node.kubernetes.io/instance-type, operator: In, values: [g5.xlarge, m6i.large]}}
"
        ),
    )
    .unwrap();
    let job = workspace_root().join("../shared/real-world/workloads/volcano-mindspore-gpu.yaml");
    let (pool, job) = (pool.display().to_string(), job.display().to_string());
    let out = quartermaster(&["plan", "-f", &pool, "-f", &job, "-o", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json()
}

#[test]
fn the_volcano_job_gets_all_its_nodes_in_one_zone() {
    let p = plan("limits: {}");
    assert!(p["unschedulable"].as_array().unwrap().is_empty(), "{p:#}");
    let zones: BTreeSet<&str> = p["new_nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["zone"].as_str().unwrap())
        .collect();
    assert_eq!(zones.len(), 1, "{p:#}");
}

#[test]
fn the_volcano_job_buys_nothing_when_it_cannot_run_whole() {
    // Its two one-GPU workers need a g5.xlarge each (the master fits beside one): one node is
    // not enough, and the pool buys none rather than one.
    let p = plan("limits: {nodes: 1}");
    assert!(p["new_nodes"].as_array().unwrap().is_empty(), "{p:#}");
    let unschedulable = p["unschedulable"].as_array().unwrap();
    assert_eq!(unschedulable.len(), 3, "{p:#}");
    assert!(
        unschedulable.iter().all(|u| u["reason"]
            .as_str()
            .unwrap()
            .starts_with("gang default/mindspore-gpu (minMember 3): 3 member(s) must be placed together in one zone, at most 2 fit")),
        "{p:#}"
    );
}
