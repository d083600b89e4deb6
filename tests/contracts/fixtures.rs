//! Data-driven solver fixtures: every `tests/fixtures/plan/NAME.yaml` is planned and compared
//! with `NAME.expect.json` (see the README beside them).

use quartermaster_tests::{quartermaster, workspace_root};
use serde_json::Value;

fn check(name: &str, plan: &Value, expect: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    let nodes = plan["new_nodes"].as_array().cloned().unwrap_or_default();
    let mut types: Vec<String> = nodes
        .iter()
        .filter_map(|n| n["instance_type"].as_str().map(str::to_owned))
        .collect();
    types.sort();
    if let Some(want) = expect.get("new_node_types") {
        let want: Vec<String> =
            serde_json::from_value(want.clone()).expect("new_node_types is a list of strings");
        if types != want {
            problems.push(format!(
                "{name}: new node types {types:?}, expected {want:?}"
            ));
        }
    }
    let placed = nodes
        .iter()
        .map(|n| n["pods"].as_array().map_or(0, Vec::len))
        .sum::<usize>()
        + plan["existing_nodes"].as_array().map_or(0, |e| {
            e.iter()
                .map(|n| n["pods"].as_array().map_or(0, Vec::len))
                .sum()
        });
    if let Some(want) = expect.get("pods_placed").and_then(Value::as_u64)
        && placed as u64 != want
    {
        problems.push(format!("{name}: {placed} pods placed, expected {want}"));
    }
    if let Some(want) = expect.get("unschedulable") {
        let got: Vec<(String, String)> = plan["unschedulable"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|u| {
                (
                    u["pod"].as_str().unwrap_or("").to_owned(),
                    u["reason"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        let want: Vec<(String, String)> = want
            .as_array()
            .expect("unschedulable is a list")
            .iter()
            .map(|u| {
                (
                    u["pod"].as_str().unwrap_or("").to_owned(),
                    u["reason"].as_str().unwrap_or("").to_owned(),
                )
            })
            .collect();
        if got != want {
            problems.push(format!("{name}: unschedulable {got:?}, expected {want:?}"));
        }
    }
    if let Some(want) = expect.get("cost_per_hour").and_then(Value::as_f64) {
        let got = plan["cost_per_hour"].as_f64().unwrap_or(f64::NAN);
        if (got - want).abs() > 1e-6 {
            problems.push(format!("{name}: cost {got}, expected {want}"));
        }
    }
    if let Some(want) = expect.get("pods_on").and_then(Value::as_object) {
        for (pod, instance_type) in want {
            let on = nodes.iter().find(|n| {
                n["pods"]
                    .as_array()
                    .is_some_and(|p| p.iter().any(|x| x == pod))
            });
            let got = on.and_then(|n| n["instance_type"].as_str());
            if got != instance_type.as_str() {
                problems.push(format!(
                    "{name}: {pod} on {got:?}, expected {instance_type}"
                ));
            }
        }
    }
    let cost = plan["cost_per_hour"].as_f64().unwrap_or(0.0);
    let bound = plan["lower_bound_per_hour"].as_f64().unwrap_or(f64::NAN);
    if bound.is_nan() || bound > cost + 1e-9 {
        problems.push(format!("{name}: lower bound {bound} above cost {cost}"));
    }
    problems
}

#[test]
fn every_plan_fixture_matches_its_expectation() {
    let dir = workspace_root().join("tests/fixtures/plan");
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .expect("tests/fixtures/plan exists")
        .filter_map(|e| {
            let path = e.expect("dir entry").path();
            (path.extension()? == "yaml").then(|| path.file_stem()?.to_str().map(str::to_owned))?
        })
        .collect();
    names.sort();
    assert!(names.len() >= 4, "fixtures missing: {names:?}");
    let mut problems = Vec::new();
    for name in &names {
        let yaml = dir.join(format!("{name}.yaml"));
        let expect_path = dir.join(format!("{name}.expect.json"));
        let expect: Value = serde_json::from_str(
            &std::fs::read_to_string(&expect_path)
                .unwrap_or_else(|_| panic!("{name}.expect.json is missing")),
        )
        .unwrap_or_else(|e| panic!("{name}.expect.json: {e}"));
        let out = quartermaster(&[
            "plan",
            "-f",
            yaml.to_str().expect("UTF-8 path"),
            "-o",
            "json",
        ]);
        assert_eq!(out.code, 0, "{name}: {}", out.stderr);
        problems.extend(check(name, &out.json(), &expect));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
