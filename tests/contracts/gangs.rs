//! Gangs in `plan`: the real Volcano MindSpore job (minAvailable 3) is placed whole, in one
//! zone, or not at all. Gangs in `simulate`: scenarios/gang-training.yaml run gang-aware and
//! with `--no-gang` — rolling a half-launched gang back leaves fewer GPUs idle.

use std::collections::BTreeSet;

use quartermaster_tests::{path, quartermaster, workspace_root};
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

/// `simulate -o json` of scenarios/gang-training.yaml (gang-aware, as the scenario says), or
/// with `--no-gang` (every pod provisioned on its own).
fn simulate_gang_training(no_gang: bool) -> Value {
    let text = std::fs::read_to_string(path("scenarios/gang-training.yaml")).unwrap();
    assert!(
        text.contains("gangAware: true"),
        "the scenario states its switch"
    );
    let file = path("scenarios/gang-training.yaml");
    let mut args = vec!["simulate", "-o", "json", &file];
    if no_gang {
        args.push("--no-gang");
    }
    let out = quartermaster(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json()
}

#[test]
fn the_gang_training_scenario_idles_fewer_gpu_hours_gang_aware() {
    let aware = simulate_gang_training(false);
    let blind = simulate_gang_training(true);
    let idle = |v: &Value| v["idle_gpu_hours"].as_f64().expect("idle_gpu_hours");
    assert!(
        idle(&aware) < idle(&blind),
        "gang-aware {} vs not {}",
        idle(&aware),
        idle(&blind)
    );
    // Gang-aware: the half-launched gang was rolled back and the whole gang ran elsewhere.
    assert!(aware["gang_rollbacks"].as_u64() >= Some(1), "{aware:#}");
    assert_eq!(aware["pods_pending_at_end"], 0, "{aware:#}");
    // Without gang awareness nothing rolls back: three nodes hold workers that never start.
    assert_eq!(blind["gang_rollbacks"], 0, "{blind:#}");
    assert!(
        blind["pods_pending_at_end"].as_u64() >= Some(4),
        "{blind:#}"
    );
}
