//! Dynamic Resource Allocation in `plan` and `explain` (issue 22): a Deployment that asks for
//! its GPU only through a ResourceClaimTemplate (one NVIDIA GPU with 40Gi or more) gets the
//! cheapest type whose predicted devices satisfy the claim, and `explain` names the selector
//! that rules the smaller GPUs out.

use quartermaster_tests::{path, quartermaster};
use serde_json::Value;

fn files() -> Vec<String> {
    [
        "examples/nodepools/aws-gpu.yaml",
        "examples/dra/gpu-40gi.yaml",
        "examples/dra/llm-serve.yaml",
    ]
    .iter()
    .map(|f| path(f))
    .collect()
}

fn run(verb: &[&str]) -> Value {
    let files = files();
    let mut args: Vec<&str> = verb.to_vec();
    for f in &files {
        args.extend(["-f", f.as_str()]);
    }
    args.extend(["-o", "json"]);
    let out = quartermaster(&args);
    assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    out.json()
}

#[test]
fn a_dra_gpu_pod_scales_from_zero_to_the_cheapest_type_whose_devices_satisfy_its_claim() {
    let plan = run(&["plan"]);
    let nodes = plan["new_nodes"].as_array().expect("new_nodes");
    assert_eq!(nodes.len(), 2, "{plan:#}");
    for n in nodes {
        // g6e: one L40S (46068 MiB as NVML reports it, >= 40Gi) is the cheapest such GPU in
        // the pool's families; g6 (L4, 23034 MiB) and g5 (A10G) would be cheaper but do not
        // satisfy the claim.
        assert_eq!(n["instance_type"], "g6e.2xlarge", "{plan:#}");
    }
    assert_eq!(
        plan["unschedulable"].as_array().map(Vec::len),
        Some(0),
        "{plan:#}"
    );
    let cost = plan["cost_per_hour"].as_f64().expect("cost");
    let bound = plan["lower_bound_per_hour"].as_f64().expect("bound");
    assert!(
        bound <= cost + 1e-9,
        "the bound holds for DRA pods: {bound} > {cost}"
    );
}

#[test]
fn explain_names_the_selector_that_rules_a_type_out() {
    let e = run(&["explain", "pod", "default/llm-serve-0"]);
    assert_eq!(e["outcome"]["instance_type"], "g6e.2xlarge", "{e:#}");
    let candidates = e["candidates"].as_array().expect("candidates");
    let reason = |t: &str| -> String {
        candidates
            .iter()
            .filter(|c| c["instance_type"] == t)
            .filter_map(|c| c["reason"].as_str())
            .find(|r| r.starts_with("resource claims:"))
            .unwrap_or_else(|| panic!("{t}: no resource-claims reason in {e:#}"))
            .to_owned()
    };
    for t in ["g6.xlarge", "g5.xlarge"] {
        let r = reason(t);
        assert!(
            r.contains("ResourceClaimTemplate/default/one-gpu-40gi")
                && r.contains("compareTo(quantity('40Gi')) >= 0")
                && r.contains("matches 0 of 1 device(s)"),
            "{t}: {r}"
        );
    }
    // A type whose devices satisfy the claim is never rejected for it.
    assert!(
        !candidates
            .iter()
            .filter(|c| c["instance_type"] == "p4d.24xlarge")
            .any(|c| c["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("resource claims:"))),
        "{e:#}"
    );
}
