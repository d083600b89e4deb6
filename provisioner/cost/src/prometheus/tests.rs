//! Canned `query_range` answers → usage intervals.

use chrono::{DateTime, TimeDelta, Utc};

use super::*;
use crate::{Billing, fleet_cost, write_csv};

fn at(secs: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(secs, 0).unwrap()
}

fn window() -> Window {
    Window {
        start: at(1000),
        end: at(1200),
        step: TimeDelta::seconds(10),
    }
}

/// Sample runs of one series: `(from, to, value)`, every 10 s.
type Runs<'a> = &'a [(i64, i64, &'a str)];

/// A matrix answer; each series is `(labels as JSON object text, [(from, to, value)])`.
fn answer(series: &[(&str, Runs)]) -> String {
    let result: Vec<String> = series
        .iter()
        .map(|(labels, runs)| {
            let values: Vec<String> = runs
                .iter()
                .flat_map(|&(from, to, v)| {
                    (from..=to)
                        .step_by(10)
                        .map(move |t| format!("[{t},\"{v}\"]"))
                })
                .collect();
            format!("{{\"metric\":{labels},\"values\":[{}]}}", values.join(","))
        })
        .collect();
    format!(
        "{{\"status\":\"success\",\"data\":{{\"resultType\":\"matrix\",\"result\":[{}]}}}}",
        result.join(",")
    )
}

const NODE_A: &str = r#"{"__name__":"quartermaster_node_hourly_cost_dollars","job":"qm","instance":"10.0.0.1:8080","node":"a","nodeclaim":"gpu-a","nodepool":"gpu","cloud":"aws","region":"us-east-1","zone":"us-east-1a","instance_type":"g6.xlarge","capacity_type":"spot","accelerator":"l4","accelerator_count":"1","price_source":"aws-spot"}"#;
const NODE_A_AFTER_RESTART: &str = r#"{"__name__":"quartermaster_node_hourly_cost_dollars","job":"qm","instance":"10.0.0.2:8080","node":"a","nodeclaim":"gpu-a","nodepool":"gpu","cloud":"aws","region":"us-east-1","zone":"us-east-1a","instance_type":"g6.xlarge","capacity_type":"spot","accelerator":"l4","accelerator_count":"1","price_source":"aws-spot"}"#;
const NODE_B: &str = r#"{"node":"b","nodeclaim":"cpu-b","nodepool":"cpu","cloud":"gcp","region":"us-central1","zone":"us-central1-a","instance_type":"n2-standard-4","capacity_type":"on-demand","price_source":"gcp-od"}"#;
const POD_P: &str = r#"{"namespace":"ml","pod":"p","workload":"Job/train","node":"a","nodepool":"gpu","capacity_type":"spot"}"#;

#[test]
fn node_series_become_intervals_deduplicated_across_scrape_targets() {
    let body = answer(&[
        (NODE_A, &[(1000, 1100, "3.6")]),
        (NODE_A_AFTER_RESTART, &[(1060, 1100, "3.6")]),
        (NODE_B, &[(1050, 1200, "7.2")]),
    ]);
    let series = parse_query_range(&body).unwrap();
    assert_eq!(series.len(), 3);
    let nodes = node_usage(&series, &window()).unwrap();
    assert_eq!(nodes.len(), 2);
    let a = &nodes[0];
    assert_eq!(
        (
            a.node.as_str(),
            a.nodeclaim.as_str(),
            a.cloud,
            a.capacity_type
        ),
        ("a", "gpu-a", Cloud::Aws, CapacityType::Spot)
    );
    assert_eq!((a.start, a.end), (at(1000), Some(at(1110))));
    assert_eq!((a.accelerator.as_str(), a.accelerator_count), ("l4", 1));
    assert_eq!(a.price_per_hour, 3.6);
    let b = &nodes[1];
    assert_eq!((b.start, b.end), (at(1050), None));
    assert_eq!((b.accelerator.as_str(), b.accelerator_count), ("", 0));
    assert_eq!(b.capacity_type, CapacityType::OnDemand);
}

#[test]
fn a_gap_or_a_new_value_starts_a_new_interval() {
    let body = answer(&[(
        POD_P,
        &[
            (1020, 1060, "1.8"),
            (1070, 1100, "0.9"),
            (1150, 1160, "0.9"),
        ],
    )]);
    let pods = pod_usage(&parse_query_range(&body).unwrap(), &window()).unwrap();
    let spans: Vec<_> = pods.iter().map(|p| (p.start, p.end, p.share)).collect();
    assert_eq!(
        spans,
        vec![
            (at(1020), Some(at(1070)), PodShare::HourlyCost(1.8)),
            (at(1070), Some(at(1110)), PodShare::HourlyCost(0.9)),
            (at(1150), Some(at(1170)), PodShare::HourlyCost(0.9)),
        ]
    );
    assert_eq!(pods[0].workload, "Job/train");
}

#[test]
fn costs_from_series_are_the_gauges_times_the_time_they_were_seen() {
    let nodes = parse_query_range(&answer(&[
        (NODE_A, &[(1000, 1100, "3.6")]),
        (NODE_B, &[(1050, 1200, "7.2")]),
    ]))
    .unwrap();
    let pods = parse_query_range(&answer(&[(POD_P, &[(1020, 1060, "1.8")])])).unwrap();
    let w = window();
    let (nodes, pods) = (
        node_usage(&nodes, &w).unwrap(),
        pod_usage(&pods, &w).unwrap(),
    );
    let fleet = fleet_cost(&nodes, &pods, w.end);
    // a: $3.6/h for 110 s; b: $7.2/h for 150 s (still running); p: $1.8/h for 50 s.
    let close = |x: f64, y: f64| (x - y).abs() < 1e-9;
    assert!(close(fleet.cost_since_start, 0.11 + 0.3), "{fleet:?}");
    assert!(close(fleet.by_namespace["ml"].cost_since_start, 0.025));
    assert!(close(fleet.idle.cost_since_start, 0.11 + 0.3 - 0.025));
    assert!(close(fleet.cost_per_hour, 7.2));
    assert!(close(
        fleet.by_capacity_type["on-demand"].cost_per_hour,
        7.2
    ));
    assert!(close(fleet.by_node_pool["gpu"].cost_since_start, 0.11));
    assert_eq!(fleet.nodes[0].ended_at, Some(at(1110)));
    assert_eq!(fleet.nodes[1].ended_at, None);
    let mut csv = Vec::new();
    let billed = write_csv(
        &nodes,
        &pods,
        w.end,
        &Billing::for_cluster("prod"),
        &mut csv,
    )
    .unwrap();
    assert!(close(billed, 0.41));
}

#[test]
fn bad_answers_and_labels_are_errors_naming_what_is_wrong() {
    let err =
        parse_query_range(r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#)
            .unwrap_err()
            .to_string();
    assert!(
        err.contains("bad_data") && err.contains("parse error"),
        "{err}"
    );
    let err =
        parse_query_range(r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#)
            .unwrap_err()
            .to_string();
    assert!(err.contains("vector"), "{err}");
    assert!(parse_query_range("<html>").is_err());
    let no_cloud = answer(&[(
        r#"{"node":"x","capacity_type":"spot"}"#,
        &[(1000, 1000, "1")],
    )]);
    let err = node_usage(&parse_query_range(&no_cloud).unwrap(), &window())
        .unwrap_err()
        .to_string();
    assert!(err.contains("cloud") && err.contains("missing"), "{err}");
    let bad_type = answer(&[(
        r#"{"node":"x","cloud":"aws","capacity_type":"cheap"}"#,
        &[(1000, 1000, "1")],
    )]);
    let err = node_usage(&parse_query_range(&bad_type).unwrap(), &window())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("capacity_type") && err.contains("cheap"),
        "{err}"
    );
    let negative = answer(&[(NODE_B, &[(1000, 1000, "-1")])]);
    assert!(node_usage(&parse_query_range(&negative).unwrap(), &window()).is_err());
    let nan = answer(&[(NODE_B, &[(1000, 1000, "NaN")])]);
    assert!(
        node_usage(&parse_query_range(&nan).unwrap(), &window())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn windows_cover_since_with_at_most_a_thousand_steps() {
    let now = at(100_000);
    let w = Window::ending_at(now, TimeDelta::hours(24));
    assert_eq!(w.step, TimeDelta::seconds(87));
    assert_eq!(w.start, now - TimeDelta::hours(24));
    assert_eq!(
        Window::ending_at(now, TimeDelta::minutes(1)).step,
        TimeDelta::seconds(1)
    );
    // Absurd durations do not panic.
    assert_eq!(
        Window::ending_at(now, TimeDelta::MAX).start,
        DateTime::<Utc>::MIN_UTC
    );
    let params = Window::ending_at(now, TimeDelta::minutes(1)).query_params("up");
    assert_eq!(params[1], ("start", "99940.000".to_owned()));
    assert_eq!(params[3], ("step", "1s".to_owned()));
}
