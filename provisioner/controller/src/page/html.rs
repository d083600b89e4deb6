//! The page as HTML: one string, inline CSS, an inline SVG chart, every text escaped.

use std::fmt::Write;

use chrono::{DateTime, Utc};

use super::{CostSample, REFRESH_SECONDS, RecordedDecision, Status};

/// `text` with the characters that mean something in HTML (`&`, `<`, `>`, `"`, `'`) replaced
/// by character references: safe in element content and in quoted attribute values.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Dollars as the page shows them: two decimals from $1 up, three below.
pub(crate) fn dollars(value: f64) -> String {
    if value.abs() >= 1.0 {
        format!("${value:.2}")
    } else {
        format!("${value:.3}")
    }
}

fn time(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

const STYLE: &str = "
:root { --fg: #1d2430; --muted: #5b6576; --line: #d8dde6; --bg: #f6f7f9; --card: #fff;
  --accent: #2f6fd6; --good: #1d7a46; --warn: #a65a00; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif;
  color: var(--fg); background: var(--bg); }
main { max-width: 1120px; margin: 0 auto; padding: 20px 24px 40px; }
header { display: flex; align-items: baseline; gap: 16px; flex-wrap: wrap; }
h1 { font-size: 22px; margin: 0; }
h2 { font-size: 16px; margin: 28px 0 8px; }
.meta, .note, caption, .empty { color: var(--muted); }
a { color: var(--accent); }
.note { background: #fff7e6; border: 1px solid #f0d9a8; padding: 8px 12px; border-radius: 6px; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); gap: 12px;
  margin-top: 16px; }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 8px;
  padding: 12px 14px; }
.card .label { color: var(--muted); font-size: 12px; text-transform: uppercase;
  letter-spacing: .04em; }
.card .value { font-size: 24px; font-weight: 600; margin-top: 2px; }
.card .sub { color: var(--muted); font-size: 12px; }
table { width: 100%; border-collapse: collapse; background: var(--card);
  border: 1px solid var(--line); border-radius: 8px; overflow: hidden; }
caption { text-align: left; padding: 0 0 6px; font-size: 12px; }
th, td { padding: 6px 10px; border-bottom: 1px solid var(--line); text-align: left;
  vertical-align: top; }
th { background: #eef1f5; font-weight: 600; font-size: 12px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tfoot td { font-weight: 600; background: #f9fafb; }
td.pod { white-space: nowrap; font-family: ui-monospace, SFMono-Regular, Menlo, monospace;
  font-size: 13px; }
td.reason { color: #3b4252; }
.kind { display: inline-block; padding: 0 8px; border-radius: 10px; font-size: 12px;
  font-weight: 600; }
.kind-launch { background: #e3efff; color: #1d4f9e; }
.kind-delete { background: #fde8e8; color: #9b1c1c; }
.kind-disrupt { background: #e6f6ec; color: var(--good); }
.saving { color: var(--good); }
.loss { color: var(--warn); }
.chart { width: 100%; height: auto; background: var(--card); border: 1px solid var(--line);
  border-radius: 8px; }
.chart .grid { stroke: var(--line); stroke-width: 1; }
.chart .axis { fill: var(--muted); font-size: 11px; }
.chart .line { fill: none; stroke: var(--accent); stroke-width: 2; }
.chart .area { fill: var(--accent); fill-opacity: .10; stroke: none; }
.chart .dot { fill: var(--accent); }
";

/// The page for `status`.
pub fn render(status: &Status) -> String {
    let mut h = String::with_capacity(32 * 1024);
    let cluster = escape(&status.cluster);
    let f = &status.fleet;
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"refresh\" content=\"{REFRESH_SECONDS}\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>Quartermaster · {cluster}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n\
         <header><h1>Quartermaster</h1><span class=\"meta\">cluster <b>{cluster}</b> · {} · \
         refreshes every {REFRESH_SECONDS} s · <a href=\"/status.json\">status.json</a> · \
         <a href=\"/cost\">cost</a> · <a href=\"/metrics\">metrics</a></span></header>\n",
        escape(&time(status.at)),
    );
    if !status.leader {
        h.push_str(
            "<p class=\"note\">This replica does not lead: pending pods, decisions and the \
             cost history below are from when it last led (the leader's page has them now).</p>\n",
        );
    }

    // The figures.
    h.push_str("<section class=\"cards\">\n");
    card(
        &mut h,
        "Cost per hour",
        "cost-per-hour",
        f.cost_per_hour,
        &dollars(f.cost_per_hour),
        &format!("{} idle", dollars(f.idle_cost_per_hour)),
    );
    card(
        &mut h,
        "Nodes",
        "nodes",
        f.nodes as f64,
        &f.nodes.to_string(),
        &format!("{} launching · {} deleting", f.launching, f.deleting),
    );
    card(
        &mut h,
        "Pending pods",
        "pending-pods",
        status.pending.pods as f64,
        &status.pending.pods.to_string(),
        &format!("{} waiting for a place", status.pending.waiting),
    );
    card(
        &mut h,
        "Billed since start",
        "cost-since-start",
        f.cost_since_start,
        &dollars(f.cost_since_start),
        "every running node, since it started",
    );
    h.push_str("</section>\n");

    // Cost history.
    h.push_str("<section>\n<h2>Cost per hour, last 24 hours</h2>\n");
    h.push_str(&chart(&status.cost_history, status.at));
    h.push_str("</section>\n");

    fleet(&mut h, status);
    pending(&mut h, status);
    decisions(&mut h, &status.decisions);

    let _ = write!(
        h,
        "<p class=\"meta\">Last pass of the provisioning loop: {}.</p>\n</main>\n</body>\n</html>\n",
        status
            .last_pass
            .map(|t| escape(&time(t)))
            .unwrap_or_else(|| "none yet".into())
    );
    h
}

fn card(h: &mut String, label: &str, id: &str, value: f64, shown: &str, sub: &str) {
    let _ = writeln!(
        h,
        "<div class=\"card\" id=\"{id}\"><div class=\"label\">{}</div>\
         <div class=\"value\" data-value=\"{value}\">{}</div><div class=\"sub\">{}</div></div>",
        escape(label),
        escape(shown),
        escape(sub)
    );
}

fn fleet(h: &mut String, status: &Status) {
    let f = &status.fleet;
    h.push_str("<section>\n<h2>Fleet</h2>\n");
    if f.groups.is_empty() {
        h.push_str("<p class=\"empty\">No node is running.</p>\n</section>\n");
        return;
    }
    h.push_str(
        "<table id=\"fleet\">\n<thead><tr><th>NodePool</th><th>Instance type</th>\
         <th>Capacity type</th><th>Accelerators</th><th class=\"num\">Nodes</th>\
         <th class=\"num\">$/hour</th></tr></thead>\n<tbody>\n",
    );
    for g in &f.groups {
        let accelerators = if g.accelerator_count > 0 {
            format!("{} × {}", g.accelerator_count, g.accelerator)
        } else {
            "—".to_owned()
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\" data-value=\"{}\">{}</td></tr>",
            escape(&g.nodepool),
            escape(&g.instance_type),
            escape(&g.capacity_type),
            escape(&accelerators),
            g.nodes,
            g.cost_per_hour,
            escape(&dollars(g.cost_per_hour)),
        );
    }
    let _ = write!(
        h,
        "</tbody>\n<tfoot><tr><td colspan=\"4\">Total</td><td class=\"num\">{}</td>\
         <td class=\"num\" data-value=\"{}\">{}</td></tr></tfoot>\n</table>\n</section>\n",
        f.nodes,
        f.cost_per_hour,
        escape(&dollars(f.cost_per_hour)),
    );
}

fn pending(h: &mut String, status: &Status) {
    let p = &status.pending;
    h.push_str("<section>\n<h2>Pending pods</h2>\n");
    if p.shown.is_empty() {
        let text = if p.waiting == 0 {
            "No pod waits for a place.".to_owned()
        } else {
            format!("{} pod(s) wait for a place.", p.waiting)
        };
        let _ = writeln!(h, "<p class=\"empty\">{}</p>\n</section>", escape(&text));
        return;
    }
    let caption = if p.shown.len() < p.waiting {
        format!(
            "The first {} of {} pods the engine waits to place, with the reason its last solve gave.",
            p.shown.len(),
            p.waiting
        )
    } else {
        format!(
            "{} pod(s) the engine waits to place, with the reason its last solve gave.",
            p.shown.len()
        )
    };
    let _ = write!(
        h,
        "<table id=\"pending\">\n<caption>{}</caption>\n<thead><tr><th>Pod</th><th>Reason</th>\
         </tr></thead>\n<tbody>\n",
        escape(&caption)
    );
    for pod in &p.shown {
        let reason = pod
            .reason
            .as_deref()
            .unwrap_or("not solved yet (in the batch window)");
        let _ = writeln!(
            h,
            "<tr><td class=\"pod\">{}</td><td class=\"reason\">{}</td></tr>",
            escape(&pod.pod),
            escape(reason)
        );
    }
    h.push_str("</tbody>\n</table>\n</section>\n");
}

fn decisions(h: &mut String, decisions: &[RecordedDecision]) {
    h.push_str("<section>\n<h2>Recent decisions</h2>\n");
    if decisions.is_empty() {
        h.push_str("<p class=\"empty\">No decision yet.</p>\n</section>\n");
        return;
    }
    h.push_str(
        "<table id=\"decisions\">\n<thead><tr><th>Time</th><th>Decision</th><th>NodeClaims</th>\
         <th>NodePool</th><th>What and why</th><th class=\"num\">$/hour</th>\
         <th class=\"num\">Saving/hour</th></tr></thead>\n<tbody>\n",
    );
    for d in decisions {
        let x = &d.decision;
        let claims = match x.nodeclaims.len() {
            0..=4 => x.nodeclaims.join(", "),
            n => format!("{}, and {} more", x.nodeclaims[..3].join(", "), n - 3),
        };
        let what = match &x.reason {
            Some(reason) if x.summary.is_empty() => reason.clone(),
            Some(reason) => format!("{} — {reason}", x.summary),
            None => x.summary.clone(),
        };
        let price = x.price_per_hour.map(dollars).unwrap_or_default();
        let saving = match x.saving_per_hour {
            Some(s) => format!(
                "<span class=\"{}\">{}</span>",
                if s >= 0.0 { "saving" } else { "loss" },
                escape(&dollars(s))
            ),
            None => String::new(),
        };
        let _ = writeln!(
            h,
            "<tr><td class=\"num\">{}</td><td><span class=\"kind kind-{kind}\">{kind}</span></td>\
             <td class=\"pod\">{}</td><td>{}</td><td>{}</td><td class=\"num\">{}</td>\
             <td class=\"num\">{saving}</td></tr>",
            escape(&d.at.format("%H:%M:%S").to_string()),
            escape(&claims),
            escape(&x.nodepool),
            escape(&what),
            escape(&price),
            kind = x.kind.as_str(),
        );
    }
    h.push_str("</tbody>\n</table>\n</section>\n");
}

/// A label of the chart's dollar axis, whose top is `top`: as many decimals as its steps need.
fn axis_dollars(value: f64, top: f64) -> String {
    if top >= 10.0 {
        format!("${value:.0}")
    } else if top >= 1.0 {
        format!("${value:.2}")
    } else {
        format!("${value:.3}")
    }
}

/// A round number at least `value`: 1, 2 or 5 times a power of ten.
fn nice_ceiling(value: f64) -> f64 {
    if !(value.is_finite() && value > 0.0) {
        return 1.0;
    }
    let power = 10f64.powf(value.log10().floor());
    for step in [1.0, 2.0, 5.0, 10.0] {
        if step * power >= value {
            return step * power;
        }
    }
    10.0 * power
}

/// The cost history as an SVG step chart from the first sample to `now`.
pub(crate) fn chart(samples: &[CostSample], now: DateTime<Utc>) -> String {
    const W: f64 = 1000.0;
    const H: f64 = 240.0;
    const LEFT: f64 = 72.0;
    const RIGHT: f64 = 16.0;
    const TOP: f64 = 14.0;
    const BOTTOM: f64 = 30.0;
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return "<p class=\"empty\">No sample yet: the leader samples the fleet's cost once a \
                minute.</p>\n"
            .to_owned();
    };
    let start = first.at;
    let end = now.max(last.at);
    let span = (end - start).num_milliseconds().max(1) as f64;
    let max = samples
        .iter()
        .map(|s| s.cost_per_hour)
        .fold(0.0f64, f64::max);
    let top = nice_ceiling(max * 1.05);
    let plot_w = W - LEFT - RIGHT;
    let plot_h = H - TOP - BOTTOM;
    let x = |t: DateTime<Utc>| LEFT + (t - start).num_milliseconds() as f64 / span * plot_w;
    let y = |v: f64| TOP + plot_h - (v.max(0.0) / top) * plot_h;

    let mut svg = String::with_capacity(4096 + samples.len() * 24);
    let _ = writeln!(
        svg,
        "<svg class=\"chart\" id=\"cost-chart\" viewBox=\"0 0 {W} {H}\" \
         xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" aria-labelledby=\"cost-chart-title\">\
         <title id=\"cost-chart-title\">{}</title>",
        escape(&format!(
            "Fleet cost per hour from {} to {}: now {}, highest {}",
            time(start),
            time(end),
            dollars(last.cost_per_hour),
            dollars(max)
        ))
    );
    for i in 0..=4 {
        let v = top * f64::from(i) / 4.0;
        let _ = writeln!(
            svg,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\"/>\
             <text class=\"axis\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>",
            W - RIGHT,
            LEFT - 8.0,
            y(v) + 4.0,
            escape(&axis_dollars(v, top)),
            y = y(v),
        );
    }
    // Time labels: the start, the end, and three in between.
    for i in 0..=4 {
        let t = start + chrono::TimeDelta::milliseconds((span * f64::from(i) / 4.0) as i64);
        let anchor = match i {
            0 => "start",
            4 => "end",
            _ => "middle",
        };
        let label = if i == 4 {
            t.format("%H:%M UTC").to_string()
        } else {
            t.format("%H:%M").to_string()
        };
        let _ = writeln!(
            svg,
            "<text class=\"axis\" x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"{anchor}\">{}</text>",
            x(t),
            H - 8.0,
            escape(&label)
        );
    }
    // The step line: each sample holds until the next one (and the last until now).
    let mut line = format!("M{:.1},{:.1}", x(first.at), y(first.cost_per_hour));
    for s in &samples[1..] {
        let _ = write!(line, " H{:.1} V{:.1}", x(s.at), y(s.cost_per_hour));
    }
    let _ = write!(line, " H{:.1}", x(end));
    let _ = writeln!(
        svg,
        "<path class=\"area\" d=\"{line} V{:.1} H{:.1} Z\"/>\n<path class=\"line\" d=\"{line}\"/>",
        y(0.0),
        x(first.at),
    );
    let _ = writeln!(
        svg,
        "<circle class=\"dot\" cx=\"{:.1}\" cy=\"{:.1}\" r=\"3.5\"/>",
        x(end),
        y(last.cost_per_hour)
    );
    svg.push_str("</svg>\n");
    svg
}
