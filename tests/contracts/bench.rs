//! `quartermaster bench`: the JSON keys are a contract; the values must be sane. Wall-clock
//! times are never asserted.

use quartermaster_tests::quartermaster;
use serde_json::Value;

/// Keys every `bench -o json` object carries (README: stable contract).
const KEYS: [&str; 10] = [
    "scenario",
    "pods",
    "instance_types",
    "solve_seconds",
    "pods_per_second",
    "nodes",
    "cost_per_hour",
    "lower_bound_per_hour",
    "baseline_cost_per_hour",
    "peak_rss_mib",
];

fn bench_json(args: &[&str]) -> Vec<Value> {
    let out = quartermaster(args);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    let Value::Array(runs) = out.json() else {
        panic!("a JSON array: {}", out.stdout)
    };
    assert!(
        out.stderr.contains("bench:"),
        "a progress line on stderr: {}",
        out.stderr
    );
    runs
}

/// `bench --scenario karpenter-shape --pods 200`, with `extra` flags, as JSON.
fn karpenter_shape_200_json(extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["bench", "--scenario", "karpenter-shape", "--pods", "200"];
    args.extend_from_slice(extra);
    args.extend(["-o", "json"]);
    bench_json(&args)
}

fn number(run: &Value, key: &str) -> f64 {
    run[key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} is a number in {run}"))
}

fn assert_sane(run: &Value, scenario: &str, pods: u64) {
    for key in KEYS {
        assert!(run.get(key).is_some(), "key {key} missing from {run}");
    }
    assert_eq!(run["scenario"], scenario);
    assert_eq!(run["pods"].as_u64(), Some(pods));
    assert!(run["instance_types"].as_u64().unwrap() > 0, "{run}");
    assert!(run["nodes"].as_u64().unwrap() > 0, "{run}");
    let cost = number(run, "cost_per_hour");
    let bound = number(run, "lower_bound_per_hour");
    let baseline = number(run, "baseline_cost_per_hour");
    assert!(cost > 0.0 && bound >= 0.0 && baseline > 0.0, "{run}");
    assert!(cost >= bound - 1e-6, "cost below the lower bound: {run}");
    assert!(
        baseline >= bound - 1e-6,
        "baseline below the lower bound: {run}"
    );
    assert!(
        number(run, "solve_seconds") >= 0.0 && number(run, "pods_per_second") > 0.0,
        "{run}"
    );
    if cfg!(target_os = "linux") {
        assert!(number(run, "peak_rss_mib") > 0.0, "{run}");
    }
}

#[test]
fn bench_gpu_training_json_has_the_contract_keys_and_sane_values() {
    let runs = bench_json(&[
        "bench",
        "--scenario",
        "gpu-training",
        "--pods",
        "16",
        "-o",
        "json",
    ]);
    assert_eq!(runs.len(), 1);
    assert_sane(&runs[0], "gpu-training", 16);
    // Every worker needs a whole 8-GPU machine.
    assert_eq!(runs[0]["nodes"].as_u64(), Some(16), "{}", runs[0]);
}

#[test]
fn bench_karpenter_shape_json_and_table() {
    let runs = karpenter_shape_200_json(&[]);
    assert_eq!(runs.len(), 1);
    assert_sane(&runs[0], "karpenter-shape", 200);
    assert_eq!(runs[0]["instance_types"].as_u64(), Some(400));
    // 40 pods repel each other by hostname: at least 40 nodes.
    assert!(runs[0]["nodes"].as_u64().unwrap() >= 40, "{}", runs[0]);
    // The improvement phase (a work budget, not a clock, bounds it): well under the greedy
    // baseline and near the bound, which counts one node per anti-affine pod.
    assert!(number(&runs[0], "saving_vs_baseline") >= 0.1, "{}", runs[0]);
    assert!(number(&runs[0], "gap") <= 0.15, "{}", runs[0]);

    let table = quartermaster(&["bench", "--scenario", "karpenter-shape", "--pods", "200"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    let header = table.stdout.lines().next().unwrap_or_default();
    for column in [
        "SCENARIO",
        "PODS",
        "COST/H",
        "LOWER BOUND/H",
        "BASELINE/H",
        "SAVING %",
        "PEAK RSS MIB",
    ] {
        assert!(header.contains(column), "{header}");
    }
    assert!(table.stdout.contains("karpenter-shape"), "{}", table.stdout);
}

#[test]
fn bench_search_effort_is_reported_and_zero_keeps_the_first_plan() {
    let at = |effort: &str| {
        let runs = karpenter_shape_200_json(&["--search-effort", effort]);
        assert_sane(&runs[0], "karpenter-shape", 200);
        assert_eq!(runs[0]["search_effort"].as_str(), None);
        assert_eq!(
            runs[0]["search_effort"].as_u64(),
            Some(effort.parse().unwrap())
        );
        number(&runs[0], "cost_per_hour")
    };
    let (first, default) = (at("0"), at("100"));
    assert!(default < first, "improved {default} vs first plan {first}");
    let out = quartermaster(&["bench", "--search-effort", "-1"]);
    assert_eq!(out.code, 2, "{}", out.stderr);
}

#[test]
fn bench_rejects_an_unknown_scenario_listing_the_valid_ones() {
    let out = quartermaster(&["bench", "--scenario", "nope", "--pods", "10"]);
    assert_eq!(out.code, 1);
    assert!(out.stdout.is_empty());
    for name in ["karpenter-shape", "gpu-training", "gpu-inference", "mixed"] {
        assert!(out.stderr.contains(name), "{}", out.stderr);
    }
}
