//! `quartermaster report --prometheus URL`: the FOCUS allocation and the `/cost` JSON computed
//! from a real Prometheus (Debian's `prometheus`, started by the harness on 127.0.0.1) that
//! scraped a test exporter of the controller's two cost gauges.
//!
//! The exporter serves three phases: two nodes and three pods; then one node and one pod (the
//! rest gone); then nothing (every series goes stale). It records when each scrape came, so the
//! expected cost of each series is its gauge × the time between the first scrape that showed it
//! and the first that did not — up to one query step (1 s for `--since 10m`) either way. Nothing
//! is asserted about how fast anything runs.

use std::collections::BTreeMap;
use std::time::Duration;

use quartermaster_tests::prometheus::{Exporter, Prometheus, Scrape, free_port, http_get};
use quartermaster_tests::quartermaster;
use serde_json::Value;

use crate::focus::{scratch_dir, validate};

const NODE: &str = "quartermaster_node_hourly_cost_dollars";
const POD: &str = "quartermaster_pod_allocated_hourly_cost_dollars";

/// A series the exporter serves: metric, labels, dollars per hour, the phases it is served in.
struct Gauge {
    metric: &'static str,
    labels: &'static str,
    key: &'static str,
    per_hour: f64,
    phases: &'static [usize],
}

const GAUGES: [Gauge; 5] = [
    Gauge {
        metric: NODE,
        labels: r#"node="gpu-a",nodeclaim="gpu-a",nodepool="gpu",cloud="aws",region="us-east-1",zone="us-east-1a",instance_type="g6.12xlarge",capacity_type="spot",accelerator="l4",accelerator_count="4",price_source="test-spot""#,
        key: "gpu-a",
        per_hour: 2.0,
        phases: &[1, 2],
    },
    Gauge {
        metric: NODE,
        labels: r#"node="cpu-b",nodeclaim="cpu-b",nodepool="cpu",cloud="gcp",region="us-central1",zone="us-central1-a",instance_type="n2-standard-4",capacity_type="on-demand",accelerator="",accelerator_count="0",price_source="K-GCP-P""#,
        key: "cpu-b",
        per_hour: 0.194236,
        phases: &[1],
    },
    Gauge {
        metric: POD,
        labels: r#"namespace="ml",pod="train-0",workload="Job/train",node="gpu-a",nodepool="gpu",capacity_type="spot""#,
        key: "ml/train-0",
        per_hour: 1.0,
        phases: &[1, 2],
    },
    Gauge {
        metric: POD,
        labels: r#"namespace="ml",pod="serve-0",workload="Deployment/serve",node="gpu-a",nodepool="gpu",capacity_type="spot""#,
        key: "ml/serve-0",
        per_hour: 0.5,
        phases: &[1],
    },
    Gauge {
        metric: POD,
        labels: r#"namespace="web",pod="web-0",workload="Deployment/web",node="cpu-b",nodepool="cpu",capacity_type="on-demand""#,
        key: "web/web-0",
        per_hour: 0.097118,
        phases: &[1],
    },
];

/// The exposition text of one phase.
fn exposition(phase: usize) -> String {
    let mut text = String::new();
    for metric in [NODE, POD] {
        text.push_str(&format!("# TYPE {metric} gauge\n"));
        for g in GAUGES
            .iter()
            .filter(|g| g.metric == metric && g.phases.contains(&phase))
        {
            text.push_str(&format!("{}{{{}}} {}\n", g.metric, g.labels, g.per_hour));
        }
    }
    text
}

/// Seconds each gauge was exposed, from the scrapes that showed it.
fn exposed_seconds(scrapes: &[Scrape]) -> BTreeMap<&'static str, f64> {
    GAUGES
        .iter()
        .map(|g| {
            let first = scrapes
                .iter()
                .find(|s| g.phases.contains(&s.phase))
                .expect("shown at least once")
                .at;
            let gone = scrapes
                .iter()
                .find(|s| s.at > first && !g.phases.contains(&s.phase))
                .expect("hidden afterwards")
                .at;
            let secs = gone
                .duration_since(first)
                .unwrap_or(Duration::ZERO)
                .as_secs_f64();
            (g.key, secs)
        })
        .collect()
}

/// What Prometheus saw: seconds each gauge was exposed, and scrapes that failed (a failed
/// scrape makes every series stale until the next one, hiding up to one scrape interval).
struct Seen {
    seconds: BTreeMap<&'static str, f64>,
    failed_scrapes: f64,
}

/// Dollars of `keys` expected, and the tolerance: one query step (1 s) either way per series,
/// plus one scrape interval (1 s) per failed scrape.
fn expected(seen: &Seen, keys: &[&str]) -> (f64, f64) {
    let mut cost = 0.0;
    let mut tolerance = 1e-6;
    for g in GAUGES.iter().filter(|g| keys.contains(&g.key)) {
        cost += g.per_hour * seen.seconds[g.key] / 3600.0;
        tolerance += g.per_hour * (1.5 + seen.failed_scrapes) / 3600.0;
    }
    (cost, tolerance)
}

/// Scrapes of the exporter Prometheus counts as failed over the last 10 minutes.
fn failed_scrapes(prometheus: &Prometheus) -> f64 {
    let (status, body) = http_get(
        prometheus.addr(),
        "/api/v1/query?query=sum(count_over_time(up%5B10m%5D)%20-%20sum_over_time(up%5B10m%5D))",
    )
    .unwrap();
    assert_eq!(status, 200, "{body}");
    let v: Value = serde_json::from_str(&body).unwrap();
    v["data"]["result"][0]["value"][1]
        .as_str()
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of failed scrapes in {body}"))
}

fn assert_close(what: &str, got: f64, (want, tolerance): (f64, f64)) {
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: got {got}, expected {want} ± {tolerance}"
    );
}

/// Splits CSV text into records (RFC 4180 quoting).
fn csv_records(text: &str) -> Vec<Vec<String>> {
    let mut records = Vec::new();
    let mut record = vec![String::new()];
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                record.last_mut().unwrap().push('"');
            }
            '"' => quoted = !quoted,
            ',' if !quoted => record.push(String::new()),
            '\n' if !quoted => records.push(std::mem::replace(&mut record, vec![String::new()])),
            '\r' if !quoted => {}
            c => record.last_mut().unwrap().push(c),
        }
    }
    if record.len() > 1 || !record[0].is_empty() {
        records.push(record);
    }
    records
}

#[test]
fn report_from_prometheus_charges_each_gauge_for_the_time_it_was_scraped() {
    let exporter = Exporter::start().unwrap();
    let prometheus = Prometheus::start(&[exporter.target()]).unwrap_or_else(|e| panic!("{e}"));
    prometheus
        .wait_until_targets_up()
        .unwrap_or_else(|e| panic!("{e}"));
    exporter.serve(1, &exposition(1));
    exporter.wait_for_scrapes(1, 4).unwrap();
    exporter.serve(2, &exposition(2));
    exporter.wait_for_scrapes(2, 3).unwrap();
    exporter.serve(3, &exposition(3));
    // Two empty scrapes: the first writes the staleness markers, the second proves it was stored.
    let scrapes = exporter.wait_for_scrapes(3, 2).unwrap();
    let seconds = Seen {
        seconds: exposed_seconds(&scrapes),
        failed_scrapes: failed_scrapes(&prometheus),
    };

    let url = prometheus.url.clone();
    let json = quartermaster(&[
        "report",
        "--prometheus",
        &url,
        "--since",
        "10m",
        "-o",
        "json",
    ]);
    assert_eq!(json.code, 0, "{}\n{}", json.stderr, prometheus.log());
    let v: Value = json.json();
    let num = |v: &Value| v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"));

    // Everything went stale: nothing runs now.
    assert_eq!(num(&v["cost_per_hour"]), 0.0, "{v:#}");
    assert_eq!(v["currency"], "USD");
    let nodes = v["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{v:#}");
    for (name, pool, instance_type, capacity, list) in [
        ("gpu-a", "gpu", "g6.12xlarge", "spot", 2.0),
        ("cpu-b", "cpu", "n2-standard-4", "on-demand", 0.194236),
    ] {
        let node = nodes.iter().find(|n| n["name"] == name).unwrap();
        assert_eq!(node["nodepool"], pool);
        assert_eq!(node["instance_type"], instance_type);
        assert_eq!(node["capacity_type"], capacity);
        assert_eq!(num(&node["price_per_hour"]), list);
        assert!(node["ended_at"].is_string(), "{node}");
        assert_close(
            &format!("node {name}"),
            num(&node["cost_since_start"]),
            expected(&seconds, &[name]),
        );
    }
    let nodes_cost = expected(&seconds, &["gpu-a", "cpu-b"]);
    assert_close("total", num(&v["cost_since_start"]), nodes_cost);
    assert_close(
        "namespace ml",
        num(&v["by_namespace"]["ml"]["cost_since_start"]),
        expected(&seconds, &["ml/train-0", "ml/serve-0"]),
    );
    assert_close(
        "namespace web",
        num(&v["by_namespace"]["web"]["cost_since_start"]),
        expected(&seconds, &["web/web-0"]),
    );
    let pods = expected(&seconds, &["ml/train-0", "ml/serve-0", "web/web-0"]);
    assert_close(
        "idle",
        num(&v["idle"]["cost_since_start"]),
        (nodes_cost.0 - pods.0, nodes_cost.1 + pods.1),
    );
    assert_close(
        "NodePool gpu",
        num(&v["by_node_pool"]["gpu"]["cost_since_start"]),
        expected(&seconds, &["gpu-a"]),
    );
    assert_close(
        "spot",
        num(&v["by_capacity_type"]["spot"]["cost_since_start"]),
        expected(&seconds, &["gpu-a"]),
    );

    // The FOCUS allocation: the same costs, row by row, and focus-validator passes it.
    let csv = quartermaster(&[
        "report",
        "--prometheus",
        &url,
        "--since",
        "10m",
        "-o",
        "csv",
    ]);
    assert_eq!(csv.code, 0, "{}", csv.stderr);
    let records = csv_records(&csv.stdout);
    let header = &records[0];
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let mut by_pod: BTreeMap<String, f64> = BTreeMap::new();
    let mut total = 0.0;
    for r in &records[1..] {
        assert_eq!(r.len(), header.len(), "{r:?}");
        let billed: f64 = r[col("BilledCost")].parse().unwrap();
        total += billed;
        let pod = format!("{}/{}", r[col("x_Namespace")], r[col("x_Pod")]);
        *by_pod.entry(pod).or_default() += billed;
        assert!(r[col("ListCost")].parse::<f64>().unwrap() + 1e-9 >= billed);
        assert_eq!(r[col("x_Cluster")], "kubernetes");
    }
    assert_close("CSV total", total, nodes_cost);
    for key in ["ml/train-0", "ml/serve-0", "web/web-0"] {
        assert_close(
            &format!("CSV {key}"),
            by_pod.get(key).copied().unwrap_or(0.0),
            expected(&seconds, &[key]),
        );
    }
    let dir = scratch_dir("report-csv");
    let path = dir.join("report.csv");
    std::fs::write(&path, &csv.stdout).unwrap();
    validate(&path).assert_passes("report -o csv");
    std::fs::remove_dir_all(&dir).unwrap();

    // The table names the nodes and the namespaces.
    let table = quartermaster(&["report", "--prometheus", &url, "--since", "10m"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    for needle in ["gpu-a", "cpu-b", "ml", "web", "(idle)", "g6.12xlarge"] {
        assert!(table.stdout.contains(needle), "{needle}:\n{}", table.stdout);
    }
}

#[test]
fn report_rejects_bad_flags_and_unreachable_servers_with_one_line() {
    let closed = format!("http://127.0.0.1:{}", free_port().unwrap());
    for (args, needle) in [
        (vec!["report", "--prometheus", "localhost:9090"], "http://"),
        (
            vec!["report", "--prometheus", &closed, "--since", "soon"],
            "soon",
        ),
        (
            vec!["report", "--prometheus", &closed, "--since", "1h"],
            "127.0.0.1",
        ),
    ] {
        let out = quartermaster(&args);
        assert_eq!(out.code, 1, "{args:?}: {}", out.stdout);
        assert!(out.stdout.is_empty(), "{args:?}: {}", out.stdout);
        assert!(
            out.stderr.starts_with("error: ") && out.stderr.contains(needle),
            "{args:?}: {}",
            out.stderr
        );
        assert_eq!(out.stderr.lines().count(), 1, "{args:?}: {}", out.stderr);
    }
    let usage = quartermaster(&["report", "-o", "yaml"]);
    assert_eq!(usage.code, 2);
}
