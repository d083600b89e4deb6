//! Prometheus series of the controller's cost gauges → cost inputs (pure: the HTTP call is the
//! caller's).
//!
//! The controller exports, for every node it billed, the gauge [`NODE_COST_METRIC`] (labels
//! [`NODE_LABELS`], value: dollars per hour) and, for every pod running on such a node, the
//! gauge [`POD_COST_METRIC`] (labels [`POD_LABELS`], value: the node's hourly cost allocated to
//! the pod by [`crate::split_at`]; the rest of the node is idle). History lives in Prometheus:
//! `quartermaster report --prometheus URL --since 24h` asks `/api/v1/query_range` for both
//! gauges over a [`Window`] and turns the answers into [`NodeUsage`] and [`PodUsage`] intervals
//! with [`node_usage`] and [`pod_usage`].
//!
//! A sample at evaluation time `t` stands for `[t, t + step)`; consecutive samples with the same
//! labels and value form one interval, and an interval still present at the window's last
//! evaluation is open (`end: None`, billed up to the window's end). Labels other than the
//! contract's (`job`, `instance`, …) are ignored, so a controller restart does not split or
//! double a node.

use std::collections::BTreeMap;
use std::str::FromStr;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_pricing::{CapacityType, Cloud};
use serde::Deserialize;

use crate::error::CostError;
use crate::usage::{Amounts, NodeUsage, PodShare, PodUsage};

/// Gauge: a node's price, dollars per hour, while it is billed.
pub const NODE_COST_METRIC: &str = "quartermaster_node_hourly_cost_dollars";
/// Labels of [`NODE_COST_METRIC`].
pub const NODE_LABELS: [&str; 11] = [
    "node",
    "nodeclaim",
    "nodepool",
    "cloud",
    "region",
    "zone",
    "instance_type",
    "capacity_type",
    "accelerator",
    "accelerator_count",
    "price_source",
];
/// Gauge: the part of its node's hourly cost allocated to a running pod, dollars per hour.
pub const POD_COST_METRIC: &str = "quartermaster_pod_allocated_hourly_cost_dollars";
/// Labels of [`POD_COST_METRIC`].
pub const POD_LABELS: [&str; 6] = [
    "namespace",
    "pod",
    "workload",
    "node",
    "nodepool",
    "capacity_type",
];

/// One series of a `query_range` answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Series {
    /// Its labels (`__name__` included when Prometheus sends it).
    pub metric: BTreeMap<String, String>,
    /// `(unix seconds, value as text)` at each evaluation time.
    pub values: Vec<(f64, String)>,
}

#[derive(Deserialize)]
struct Answer {
    status: String,
    #[serde(default)]
    data: Option<Data>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<Series>,
}

/// The series of an `/api/v1/query_range` answer (its JSON body).
pub fn parse_query_range(body: &str) -> Result<Vec<Series>, CostError> {
    let answer: Answer =
        serde_json::from_str(body).map_err(|e| CostError::PrometheusResponse(e.to_string()))?;
    if answer.status != "success" {
        return Err(CostError::PrometheusError {
            kind: answer.error_type.unwrap_or_else(|| answer.status.clone()),
            message: answer.error.unwrap_or_default(),
        });
    }
    let data = answer
        .data
        .ok_or_else(|| CostError::PrometheusResponse("no data".to_owned()))?;
    if data.result_type != "matrix" {
        return Err(CostError::PrometheusResponse(format!(
            "resultType is {:?}, not \"matrix\"",
            data.result_type
        )));
    }
    Ok(data.result)
}

/// The period a report covers and the resolution it is read at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// First evaluation time.
    pub start: DateTime<Utc>,
    /// Last evaluation time (now).
    pub end: DateTime<Utc>,
    /// Between evaluations.
    pub step: TimeDelta,
}

impl Window {
    /// `[now - since, now]` read at `max(1 s, since / 1000)` (whole seconds), so a query never
    /// asks for more than ~1000 points per series (Prometheus refuses more than 11,000).
    pub fn ending_at(now: DateTime<Utc>, since: TimeDelta) -> Self {
        let millis = since.num_milliseconds().max(0);
        let step_secs = (millis.saturating_add(999_999) / 1_000_000).max(1);
        Self {
            start: now
                .checked_sub_signed(since)
                .unwrap_or(DateTime::<Utc>::MIN_UTC),
            end: now,
            step: TimeDelta::seconds(step_secs),
        }
    }

    /// Query parameters of `/api/v1/query_range` for `query` over this window.
    pub fn query_params(&self, query: &str) -> [(&'static str, String); 4] {
        let unix = |t: DateTime<Utc>| {
            let ms = t.timestamp_millis();
            format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
        };
        [
            ("query", query.to_owned()),
            ("start", unix(self.start)),
            ("end", unix(self.end)),
            ("step", format!("{}s", self.step.num_seconds().max(1))),
        ]
    }
}

/// One run of equal samples: `[start, end)`, `end: None` when present at the last evaluation.
struct Run {
    start: DateTime<Utc>,
    end: Option<DateTime<Utc>>,
    value: f64,
}

fn describe(labels: &BTreeMap<String, String>) -> String {
    labels
        .iter()
        .filter(|(k, _)| k.as_str() != "__name__")
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Samples of one label set: a series carrying its labels, and values by milliseconds.
type Grouped<'a> = BTreeMap<Vec<String>, (&'a Series, BTreeMap<i64, f64>)>;

/// Series grouped by the values of `labels` (other labels ignored); samples keyed by
/// milliseconds, later series winning a tie.
fn group<'a>(
    series: &'a [Series],
    metric: &str,
    labels: &[&str],
) -> Result<Grouped<'a>, CostError> {
    let mut out = Grouped::new();
    for s in series {
        let key: Vec<String> = labels
            .iter()
            .map(|l| s.metric.get(*l).cloned().unwrap_or_default())
            .collect();
        let entry = out.entry(key).or_insert_with(|| (s, BTreeMap::new()));
        for (t, v) in &s.values {
            let Ok(value) = v.parse::<f64>() else {
                return Err(CostError::PrometheusResponse(format!(
                    "{metric}{{{}}}: sample {v:?} is not a number",
                    describe(&s.metric)
                )));
            };
            if !value.is_finite() || !t.is_finite() {
                continue;
            }
            if value < 0.0 {
                return Err(CostError::Value {
                    metric: metric.to_owned(),
                    labels: describe(&s.metric),
                    value,
                });
            }
            entry.1.insert((t * 1000.0).round() as i64, value);
        }
    }
    Ok(out)
}

fn runs(samples: &BTreeMap<i64, f64>, window: &Window) -> Vec<Run> {
    let step = window.step.num_milliseconds().max(1);
    let end = window.end.timestamp_millis();
    let at = |ms: i64| DateTime::from_timestamp_millis(ms).unwrap_or(window.end);
    let mut out = Vec::new();
    let mut current: Option<(i64, i64, f64)> = None;
    let close = |(first, last, value): (i64, i64, f64), out: &mut Vec<Run>| {
        let stop = last + step;
        out.push(Run {
            start: at(first),
            end: (stop <= end).then(|| at(stop)),
            value,
        });
    };
    for (&t, &v) in samples {
        if let Some((first, last, value)) = current {
            if t - last <= step + step / 2 && v == value {
                current = Some((first, t, value));
                continue;
            }
            close((first, last, value), &mut out);
        }
        current = Some((t, t, v));
    }
    if let Some(c) = current {
        close(c, &mut out);
    }
    out
}

fn label<'a>(labels: &'a BTreeMap<String, String>, name: &str) -> &'a str {
    labels.get(name).map_or("", String::as_str)
}

fn parsed<T: FromStr>(
    labels: &BTreeMap<String, String>,
    metric: &str,
    name: &str,
) -> Result<T, CostError>
where
    T::Err: std::fmt::Display,
{
    let value = label(labels, name);
    value.parse::<T>().map_err(|e| CostError::Label {
        metric: metric.to_owned(),
        labels: describe(labels),
        label: name.to_owned(),
        value: value.to_owned(),
        reason: if value.is_empty() {
            "missing".to_owned()
        } else {
            e.to_string()
        },
    })
}

/// Nodes from the series of [`NODE_COST_METRIC`] over `window`, ordered by start then name.
pub fn node_usage(series: &[Series], window: &Window) -> Result<Vec<NodeUsage>, CostError> {
    let mut out = Vec::new();
    for (_, (s, samples)) in group(series, NODE_COST_METRIC, &NODE_LABELS)? {
        let l = &s.metric;
        let cloud: Cloud = parsed(l, NODE_COST_METRIC, "cloud")?;
        let capacity_type: CapacityType = parsed(l, NODE_COST_METRIC, "capacity_type")?;
        let accelerator_count: u32 = if label(l, "accelerator_count").is_empty() {
            0
        } else {
            parsed(l, NODE_COST_METRIC, "accelerator_count")?
        };
        for run in runs(&samples, window) {
            out.push(NodeUsage {
                node: label(l, "node").to_owned(),
                nodeclaim: label(l, "nodeclaim").to_owned(),
                nodepool: label(l, "nodepool").to_owned(),
                cloud,
                region: label(l, "region").to_owned(),
                zone: label(l, "zone").to_owned(),
                instance_type: label(l, "instance_type").to_owned(),
                capacity_type,
                price_per_hour: run.value,
                list_price_per_hour: None,
                price_source: label(l, "price_source").to_owned(),
                accelerator: label(l, "accelerator").to_owned(),
                accelerator_count,
                allocatable: Amounts {
                    accelerators: i64::from(accelerator_count),
                    ..Amounts::default()
                },
                start: run.start,
                end: run.end,
            });
        }
    }
    out.sort_by(|a, b| (a.start, &a.node).cmp(&(b.start, &b.node)));
    Ok(out)
}

/// Pods from the series of [`POD_COST_METRIC`] over `window` (shares given as hourly cost),
/// ordered by start then `namespace/pod`.
pub fn pod_usage(series: &[Series], window: &Window) -> Result<Vec<PodUsage>, CostError> {
    let mut out = Vec::new();
    for (_, (s, samples)) in group(series, POD_COST_METRIC, &POD_LABELS)? {
        let l = &s.metric;
        for run in runs(&samples, window) {
            out.push(PodUsage {
                namespace: label(l, "namespace").to_owned(),
                pod: label(l, "pod").to_owned(),
                workload: label(l, "workload").to_owned(),
                node: label(l, "node").to_owned(),
                share: PodShare::HourlyCost(run.value),
                start: run.start,
                end: run.end,
            });
        }
    }
    out.sort_by(|a, b| {
        (a.start, &a.namespace, &a.pod, &a.node).cmp(&(b.start, &b.namespace, &b.pod, &b.node))
    });
    Ok(out)
}

#[cfg(test)]
mod tests;
