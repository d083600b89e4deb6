//! `plan` ranks spot offerings by expected cost: a `--catalog` override gives two spot types
//! interruption bands; with a costly restart the calmer, dearer one is chosen, and the plan
//! shows its price and its expected cost.

use quartermaster_tests::quartermaster;
use serde_json::Value;

/// Two like types in us-east-1: `x1.large`, spot $0.1000 in band `>20%`; `x2.large`, spot
/// $0.1002 in band `<5%`.
const CATALOG: &str = r#"
mode = "replace"
cloud = "aws"
region = "us-east-1"

[[instance_type]]
name = "x1.large"
family = "x1"
vcpu = 4
memory_mib = 16384
arch = "amd64"
max_pods = 110
zones = ["us-east-1a"]
on_demand = { price = 0.2, source = "test", as_of = 2026-11-30 }
spot = [{ zone = "us-east-1a", price = 0.1, source = "test", as_of = 2026-11-30 }]
spot_interruption = { band = ">20%", source = "test", as_of = 2026-11-30 }

[[instance_type]]
name = "x2.large"
family = "x2"
vcpu = 4
memory_mib = 16384
arch = "amd64"
max_pods = 110
zones = ["us-east-1a"]
on_demand = { price = 0.2, source = "test", as_of = 2026-11-30 }
spot = [{ zone = "us-east-1a", price = 0.1002, source = "test", as_of = 2026-11-30 }]
spot_interruption = { band = "<5%", source = "test", as_of = 2026-11-30 }
"#;

const POD: &str = "apiVersion: v1
kind: Pod
metadata: {name: batch}
spec:
  containers:
  - name: c
    resources:
      requests: {cpu: '1', memory: 1Gi}
";

fn pool(restart: Option<&str>) -> String {
    let cost = restart
        .map(|r| format!("      spotInterruptionCost: {r}\n"))
        .unwrap_or_default();
    format!(
        "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {{name: spot}}
spec:
  template:
    spec:
      nodeClassRef: {{group: quartermaster.dev, kind: AWSNodeClass, name: default}}
      requirements:
      - {{key: quartermaster.dev/capacity-type, operator: In, values: [spot]}}
{cost}"
    )
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("qm-spot-cost-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Runs `plan` with the override catalog and a pool whose restart cost is `restart`.
fn plan(restart: Option<&str>, json: bool, tag: &str) -> String {
    let dir = temp_dir(tag);
    let catalog = dir.join("catalog.toml");
    std::fs::write(&catalog, CATALOG).unwrap();
    let manifests = dir.join("manifests.yaml");
    std::fs::write(&manifests, format!("{}---\n{POD}", pool(restart))).unwrap();
    let mut argv = vec![
        "plan",
        "--catalog",
        catalog.to_str().unwrap(),
        "-f",
        manifests.to_str().unwrap(),
    ];
    if json {
        argv.extend(["-o", "json"]);
    }
    let out = quartermaster(&argv);
    assert_eq!(
        out.code, 0,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    out.stdout
}

fn only_node(plan: &Value) -> &Value {
    let nodes = plan["new_nodes"].as_array().expect("new_nodes");
    assert_eq!(nodes.len(), 1, "{plan}");
    &nodes[0]
}

#[test]
fn a_costly_restart_buys_the_calmer_spot_type_and_shows_both_figures() {
    let plan: Value = serde_json::from_str(&plan(Some("24h"), true, "costly")).unwrap();
    let node = only_node(&plan);
    assert_eq!(node["instance_type"], "x2.large", "{plan}");
    let price = node["price_per_hour"].as_f64().unwrap();
    let expected = node["expected_cost_per_hour"].as_f64().unwrap();
    assert!((price - 0.1002).abs() < 1e-12, "{plan}");
    // <5%: 0.05 / 730 interruptions an hour × 24 h of $0.1002.
    assert!(
        (expected - (0.1002 + 0.05 / 730.0 * 24.0 * 0.1002)).abs() < 1e-12,
        "{plan}"
    );
    assert!((plan["cost_per_hour"].as_f64().unwrap() - 0.1002).abs() < 1e-12);

    let table = plan_table(Some("24h"));
    assert!(table.contains("0.1002 (expected 0.1004)"), "{table}");
}

fn plan_table(restart: Option<&str>) -> String {
    plan(
        restart,
        false,
        &format!("table-{}", restart.unwrap_or("default")),
    )
}

#[test]
fn the_default_restart_cost_keeps_the_cheaper_volatile_type() {
    let plan: Value = serde_json::from_str(&plan(None, true, "default")).unwrap();
    let node = only_node(&plan);
    assert_eq!(node["instance_type"], "x1.large", "{plan}");
    let expected = node["expected_cost_per_hour"].as_f64().unwrap();
    // >20%: 0.25 / 730 an hour × 5 minutes of $0.1.
    assert!(
        (expected - (0.1 + 0.25 / 730.0 * 0.1 * 5.0 / 60.0)).abs() < 1e-12,
        "{plan}"
    );
    let table = plan_table(None);
    assert!(table.contains("0.1000"), "{table}");
    assert!(!table.contains("expected"), "{table}");
}
