//! Every figure `explain` states is true of the plan it explains, and every preference's price
//! is what changing the policy would show: checked on the real-world corpus and the examples.

use quartermaster_tests::{path, quartermaster};
use serde_json::Value;

/// Dollars per hour two figures may differ by and still be the same figure.
const CENT: f64 = 1e-6;

fn run(verb: &[&str], files: &[String], extra: &[&str]) -> Value {
    let mut args: Vec<&str> = verb.to_vec();
    for f in files {
        args.extend(["-f", f.as_str()]);
    }
    args.extend(extra);
    args.extend(["-o", "json"]);
    let out = quartermaster(&args);
    assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    out.json()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn examples() -> Vec<Vec<String>> {
    let pools = [
        path("examples/nodepools/aws-gpu.yaml"),
        path("examples/nodepools/aws-general.yaml"),
    ];
    [
        "vllm-inference.yaml",
        "pytorch-training-job.yaml",
        "mixed-namespace.yaml",
    ]
    .iter()
    .map(|w| {
        let mut files = pools.to_vec();
        files.push(path(&format!("examples/workloads/{w}")));
        files
    })
    .collect()
}

/// The pods to explain: the first of every new node and of the unschedulable ones.
fn subjects(plan: &Value) -> Vec<String> {
    let mut out: Vec<String> = plan["new_nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["pods"][0].as_str().map(str::to_owned))
        .collect();
    out.extend(
        plan["unschedulable"]
            .as_array()
            .unwrap()
            .first()
            .and_then(|u| u["pod"].as_str().map(str::to_owned)),
    );
    out.dedup();
    out
}

/// The first dollar figure of a sentence (`… by $25.6919/hour`).
fn stated_dollars(text: &str) -> Option<f64> {
    let rest = &text[text.find('$')? + 1..];
    rest[..rest.find('/')?].parse().ok()
}

/// Checks one explanation against the plan; returns what is false.
fn check(plan: &Value, e: &Value, pod: &str) -> Vec<String> {
    let mut wrong = Vec::new();
    let node = plan["new_nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["pods"].as_array().unwrap().iter().any(|p| p == pod));
    let outcome = &e["outcome"];
    let chosen_price = match (outcome["kind"].as_str().unwrap(), node) {
        ("new-node", Some(n)) => {
            for key in ["instance_type", "zone", "capacity_type", "price_per_hour"] {
                if outcome[key] != n[key] {
                    wrong.push(format!(
                        "{pod}: outcome {key} {} but the plan has {}",
                        outcome[key], n[key]
                    ));
                }
            }
            let pods = n["pods"].as_array().unwrap().len() as u64;
            if outcome["pods"].as_u64() != Some(pods) {
                wrong.push(format!(
                    "{pod}: says the node holds {} pods, the plan {pods}",
                    outcome["pods"]
                ));
            }
            f(&n["price_per_hour"])
        }
        ("new-node", None) => {
            wrong.push(format!(
                "{pod}: explained on a new node the plan does not buy for it"
            ));
            return wrong;
        }
        (_, Some(_)) => {
            wrong.push(format!(
                "{pod}: the plan buys a node for it, explain says {outcome}"
            ));
            return wrong;
        }
        (_, None) => 0.0,
    };
    let on_new_node = node.is_some();
    let pods_on_choice = node.map_or(0, |n| n["pods"].as_array().unwrap().len());
    for c in e["candidates"].as_array().unwrap() {
        let price = f(&c["price_per_hour"]);
        let what = format!(
            "{pod}: {} {} {}: {}",
            c["instance_type"], c["zone"], c["capacity_type"], c["reason"]
        );
        match c["verdict"].as_str().unwrap() {
            "chosen" => {
                if !on_new_node || (price - chosen_price).abs() > CENT {
                    wrong.push(format!("{what}: not the plan's choice"));
                }
            }
            "more-expensive" => {
                let by = f(&c["by_per_hour"]);
                if by < -CENT || (by - (price - chosen_price)).abs() > CENT {
                    wrong.push(format!(
                        "{what}: the difference is {}",
                        price - chosen_price
                    ));
                }
                let stated = stated_dollars(c["reason"].as_str().unwrap());
                if stated.is_none_or(|s| (s - by).abs() > 6e-5) {
                    wrong.push(format!("{what}: the text does not state ${by:.4}"));
                }
            }
            "cheaper-alone" | "cheaper" => {
                let shared = c["shared_with"].as_u64().unwrap() as usize;
                let alone = f(&c["alone_per_hour"]);
                let chosen = f(&c["chosen_per_hour"]);
                if !on_new_node
                    || price >= chosen_price
                    || shared + 1 != pods_on_choice
                    || (alone - price * pods_on_choice as f64).abs() > CENT
                    || (chosen - chosen_price).abs() > CENT
                {
                    wrong.push(format!(
                        "{what}: the plan has {pods_on_choice} pods on a ${chosen_price} node"
                    ));
                }
                let holds = alone + CENT >= chosen;
                if holds != (c["verdict"] == "cheaper-alone") {
                    wrong.push(format!(
                        "{what}: one each costs {alone}, the choice {chosen}"
                    ));
                }
            }
            "dispreferred" => {
                let honoured = e["preferences"].as_array().unwrap().iter().find(|p| {
                    p["detail"] == c["preference"]
                        && p["honoured"] == true
                        && p["kind"] == "nodeAffinity"
                });
                match honoured {
                    None => wrong.push(format!("{what}: no such honoured preference")),
                    Some(p) if p["cost_per_hour"] != c["preference_cost_per_hour"] => {
                        wrong.push(format!(
                            "{what}: the preference costs {}",
                            p["cost_per_hour"]
                        ));
                    }
                    Some(_) => {}
                }
                if !on_new_node || price >= chosen_price {
                    wrong.push(format!("{what}: not cheaper than the choice"));
                }
            }
            "rejected" => {}
            other => wrong.push(format!("{what}: unknown verdict {other}")),
        }
    }
    // The pod's preferences are the plan's, decision for decision.
    for p in e["preferences"].as_array().unwrap() {
        if !plan["preferences"].as_array().unwrap().contains(p) {
            wrong.push(format!("{pod}: preference {p} is not the plan's"));
        }
    }
    wrong
}

#[test]
fn every_claim_explain_makes_holds_against_the_plan_it_explains() {
    let inputs: Vec<Vec<String>> = examples()
        .into_iter()
        .chain(crate::corpus_workloads::inputs())
        .chain(crate::corpus_karpenter_workloads::inputs())
        .collect();
    let mut wrong = Vec::new();
    let mut explained = 0;
    for files in &inputs {
        let plan = run(&["plan"], files, &[]);
        for pod in subjects(&plan) {
            let e = run(&["explain", "pod", &pod], files, &[]);
            wrong.extend(check(&plan, &e, &pod));
            explained += 1;
        }
    }
    assert!(explained >= 30, "only {explained} pods explained");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The plan's cost under each policy.
fn cost(files: &[String], policy: &str) -> (f64, Value) {
    let plan = run(&["plan"], files, &["--preference-policy", policy]);
    (f(&plan["cost_per_hour"]), plan)
}

#[test]
fn the_readme_vllm_example_pays_at_most_ten_percent_for_its_preferences_and_says_what_they_cost() {
    let files = &examples()[0];
    let (bounded, plan) = cost(files, "CostBounded");
    let (ignore, _) = cost(files, "Ignore");
    let (respect, _) = cost(files, "Respect");
    assert!(
        bounded <= ignore * 1.10 + CENT,
        "{bounded} against {ignore}"
    );
    assert!(respect >= bounded - CENT);
    let preferences = plan["preferences"].as_array().unwrap();
    let kinds: Vec<&str> = preferences
        .iter()
        .map(|p| p["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["topologySpread", "nodeAffinity"],
        "heaviest first: {plan:#}"
    );
    for p in preferences {
        for key in ["pod_group", "kind", "detail", "honoured", "cost_per_hour"] {
            assert!(p.get(key).is_some(), "{key}: {p}");
        }
        assert_eq!(p["pod_group"], "Deployment/inference/vllm-llama-8b");
        assert!(p["cost_per_hour"].is_number(), "{p}");
    }
    // What a preference is said to cost is what honouring it alone changes: with every
    // preference honoured (Respect) the plan costs the sum of the honoured ones' and the
    // dropped ones' figures more than with none (Ignore), here where they do not interact.
    let total: f64 = preferences.iter().map(|p| f(&p["cost_per_hour"])).sum();
    assert!(
        (respect - ignore - total).abs() < 1e-3,
        "{respect} - {ignore} against {total}"
    );
    // The table says it too, a line per preference.
    let mut args = vec!["plan"];
    for f in files {
        args.extend(["-f", f.as_str()]);
    }
    let out = quartermaster(&args);
    assert!(out.stdout.contains("\nPreferences:\n"), "{}", out.stdout);
    assert!(out.stdout.contains("CostBounded"), "{}", out.stdout);
}
