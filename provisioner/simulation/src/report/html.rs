//! `report.html`: one self-contained page (inline CSS and SVG, no scripts) with the summary
//! numbers and charts of spend, GPUs paid and requested, pending pods, and spend by NodePool
//! and capacity type. Every number of the summary appears with `data-key` / `data-value`
//! attributes holding exactly the value in `summary.json`.

use std::fmt::Write as _;

use chrono::TimeDelta;
use serde_json::Value;

use super::svg::{Series, bar_chart, escape, line_chart};
use crate::record::Record;
use crate::scenario::Scenario;
use crate::summary::Summary;

const STYLE: &str = "body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px auto;max-width:820px;color:#1d2330}
h1{font-size:22px;margin-bottom:4px}h2{font-size:17px;margin-top:28px}p.sub{color:#5b6475;margin-top:0}
.cards{display:flex;flex-wrap:wrap;gap:10px}.card{border:1px solid #d9dee8;border-radius:8px;padding:10px 14px;min-width:150px}
.card .v{font-size:20px;font-weight:600}.card .k{font-size:12px;color:#5b6475}
table{border-collapse:collapse;font-size:13px}td{padding:3px 10px;border-bottom:1px solid #eef0f4}td.n{text-align:right;font-variant-numeric:tabular-nums}
svg{display:block;margin:10px 0}svg .title{font-size:14px;font-weight:600;fill:#1d2330}svg .axis{font-size:11px;fill:#5b6475}
svg .legend{font-size:12px;fill:#1d2330}svg .grid{stroke:#eef0f4;stroke-width:1}svg .bar{fill:#4f7fd8}";

/// The bucket width of the time charts: about 100–300 buckets over the run.
fn bucket(duration: TimeDelta) -> TimeDelta {
    let secs = duration.num_seconds().max(1);
    [60, 300, 900, 1800, 3600, 3 * 3600, 6 * 3600, 86_400]
        .into_iter()
        .find(|w| secs / w <= 300)
        .map_or(TimeDelta::days(1), TimeDelta::seconds)
}

fn money(v: f64) -> String {
    if v >= 1000.0 {
        let whole = format!("{v:.0}");
        let mut out = String::new();
        for (i, c) in whole.chars().enumerate() {
            if i > 0 && (whole.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        format!("${out}")
    } else {
        format!("${v:.2}")
    }
}

fn human(key: &str, v: f64) -> String {
    if key.contains("cost") || key == "savings" {
        money(v)
    } else if key.ends_with("fraction") || key.ends_with("utilisation") {
        format!("{:.1}%", v * 100.0)
    } else if key.starts_with("pending_seconds") {
        if v >= 3600.0 {
            format!("{:.1} h", v / 3600.0)
        } else if v >= 60.0 {
            format!("{:.1} min", v / 60.0)
        } else {
            format!("{v:.1} s")
        }
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// A number of the summary, tagged with its key and exact JSON value.
fn tagged(key: &str, value: &Value) -> String {
    let v = value.as_f64().unwrap_or(0.0);
    format!(
        r#"<span data-key="{}" data-value="{}">{}</span>"#,
        escape(key),
        escape(&value.to_string()),
        escape(&human(key, v))
    )
}

/// Renders the report.
pub fn render(scenario: &Scenario, summary: &Summary, rec: &Record) -> String {
    let json = summary.to_json();
    let obj = json.as_object().cloned().unwrap_or_default();
    let get = |k: &str| obj.get(k).cloned().unwrap_or(Value::Null);
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Quartermaster simulation: {name}</title><style>{STYLE}</style></head><body>\n<h1>Quartermaster simulation: {name}</h1>\n<p class=\"sub\">{desc}{start} → {end} (simulated), seed {seed}</p>\n",
        name = escape(&scenario.name),
        desc = scenario
            .description
            .as_deref()
            .map(|d| format!("{}<br>", escape(d)))
            .unwrap_or_default(),
        start = escape(&summary.start),
        end = escape(&summary.end),
        seed = summary.seed,
    );
    h.push_str("<div class=\"cards\">\n");
    for (key, title) in [
        ("total_cost", "Total cost"),
        ("on_demand_only_cost", "On-demand only"),
        ("savings", "Saved"),
        ("gpu_utilisation", "GPU utilisation"),
        ("pods_total", "Pods"),
        ("pending_seconds_p95", "Pending p95"),
        ("nodes_launched", "Nodes launched"),
        ("interruptions", "Interruptions"),
    ] {
        let _ = writeln!(
            h,
            "<div class=\"card\"><div class=\"v\">{}</div><div class=\"k\">{title}</div></div>",
            tagged(key, &get(key))
        );
    }
    h.push_str("</div>\n");

    let start = scenario.start;
    let end = scenario.end();
    let width = bucket(scenario.duration);
    let n = (scenario.duration.num_seconds() / width.num_seconds().max(1)).max(1) as usize;
    let spend = rec.spend_rate.buckets(start, end, n);
    let paid = rec.gpus_paid.buckets(start, end, n);
    let requested = rec.gpus_requested.buckets(start, end, n);
    let pending = rec.pending.bucket_max(start, end, n);
    h.push_str("<h2>Over time</h2>\n");
    h.push_str(&line_chart(
        "Cost per hour",
        "$ / hour",
        start,
        end,
        &[Series {
            name: "spend rate",
            color: "#d8574f",
            values: &spend,
            fill: true,
        }],
    ));
    h.push_str(&line_chart(
        "GPUs paid vs requested",
        "GPUs",
        start,
        end,
        &[
            Series {
                name: "paid (on billed nodes)",
                color: "#4f7fd8",
                values: &paid,
                fill: true,
            },
            Series {
                name: "requested (running pods)",
                color: "#2a9d5b",
                values: &requested,
                fill: false,
            },
        ],
    ));
    h.push_str(&line_chart(
        "Pending pods",
        "pods",
        start,
        end,
        &[Series {
            name: "most pending at once",
            color: "#b07a1f",
            values: &pending,
            fill: true,
        }],
    ));
    let _ = writeln!(
        h,
        "<p class=\"sub\">Cost and GPUs: averages over {}-minute buckets; pending pods: the most at once in each.</p>",
        width.num_minutes()
    );

    h.push_str("<h2>Spend</h2>\n");
    let mut pools: Vec<(String, f64)> = summary
        .cost_by_node_pool
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    pools.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    h.push_str(&bar_chart("Spend by NodePool", &pools, &money));
    let capacity: Vec<(String, f64)> = summary
        .cost_by_capacity_type
        .iter()
        .map(|(k, v)| (k.clone(), *v))
        .collect();
    h.push_str(&bar_chart("Spend by capacity type", &capacity, &money));

    h.push_str("<h2>Summary</h2>\n<table>\n");
    for (key, value) in &obj {
        if value.is_number() {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"n\">{}</td></tr>",
                escape(key),
                tagged(key, value)
            );
        }
    }
    if let Some(Value::Object(commands)) = obj.get("consolidation_commands") {
        for (kind, count) in commands {
            let _ = writeln!(
                h,
                "<tr><td>consolidation_commands.{}</td><td class=\"n\">{}</td></tr>",
                escape(kind),
                escape(&count.to_string())
            );
        }
    }
    if let Some(Value::Object(engine)) = obj.get("engine") {
        for (key, value) in engine {
            let _ = writeln!(
                h,
                "<tr><td>engine.{}</td><td class=\"n\">{}</td></tr>",
                escape(key),
                escape(&value.to_string())
            );
        }
    }
    h.push_str("</table>\n<p class=\"sub\">Generated by <code>quartermaster simulate</code>. Costs are catalog prices of simulated instances, billed from launch to deletion or reclaim.</p>\n</body></html>\n");
    h
}
