//! Inline SVG charts written by hand: a line chart over time and a horizontal bar chart. No
//! scripts, no fonts or styles fetched from anywhere: the report opens offline.

use std::fmt::Write as _;

use chrono::{DateTime, TimeDelta, Utc};

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 260.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 30.0;
const BOTTOM: f64 = 34.0;

/// Escapes text for XML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// A series of a line chart: name, colour, one value per bucket.
pub struct Series<'a> {
    /// Legend text.
    pub name: &'a str,
    /// CSS colour.
    pub color: &'a str,
    /// Values, one per equal time bucket.
    pub values: &'a [f64],
    /// Shade the area under the line.
    pub fill: bool,
}

/// A "nice" step for about `target` ticks up to `max`.
fn nice_step(max: f64, target: f64) -> f64 {
    if max <= 0.0 {
        return 1.0;
    }
    let raw = max / target;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

fn label(v: f64) -> String {
    if v.abs() >= 1000.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v.abs() >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// A line chart of `series` over `[start, end)` (each series has the same number of buckets,
/// drawn as steps).
pub fn line_chart(
    title: &str,
    unit: &str,
    start: DateTime<Utc>,
    end: DateTime<Utc>,
    series: &[Series<'_>],
) -> String {
    let mut s = String::new();
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let max = series
        .iter()
        .flat_map(|x| x.values.iter().copied())
        .fold(0.0, f64::max);
    let step = nice_step(max, 4.0);
    let top = (max / step).ceil().max(1.0) * step;
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{t}"><title>{t}</title>"#,
        t = escape(title)
    );
    let _ = write!(
        s,
        r#"<text x="{LEFT}" y="18" class="title">{}</text>"#,
        escape(title)
    );
    // Horizontal grid and y labels.
    let mut y = 0.0;
    while y <= top + step / 2.0 {
        let py = TOP + plot_h - y / top * plot_h;
        let _ = write!(
            s,
            r#"<line x1="{LEFT}" y1="{py:.1}" x2="{:.1}" y2="{py:.1}" class="grid"/><text x="{:.1}" y="{:.1}" class="axis" text-anchor="end">{}</text>"#,
            LEFT + plot_w,
            LEFT - 6.0,
            py + 4.0,
            escape(&label(y))
        );
        y += step;
    }
    let _ = write!(
        s,
        r#"<text x="12" y="{:.1}" class="axis" transform="rotate(-90 12 {:.1})" text-anchor="middle">{}</text>"#,
        TOP + plot_h / 2.0,
        TOP + plot_h / 2.0,
        escape(unit)
    );
    // X ticks: about 8, at whole hours or days.
    let span = (end - start).as_seconds_f64().max(1.0);
    let tick = [
        600,
        1800,
        3600,
        7200,
        3 * 3600,
        6 * 3600,
        12 * 3600,
        86_400,
        2 * 86_400,
    ]
    .into_iter()
    .find(|t| span / f64::from(*t) <= 9.0)
    .unwrap_or(7 * 86_400);
    let mut t = 0i64;
    while (t as f64) <= span {
        let px = LEFT + t as f64 / span * plot_w;
        let at = start + TimeDelta::seconds(t);
        let text = if tick >= 86_400 {
            at.format("%b %d").to_string()
        } else if span > 86_400.0 {
            at.format("%a %H:%M").to_string()
        } else {
            at.format("%H:%M").to_string()
        };
        let anchor = if t == 0 {
            "start"
        } else if (t as f64) + f64::from(tick) > span {
            "end"
        } else {
            "middle"
        };
        let _ = write!(
            s,
            r#"<line x1="{px:.1}" y1="{TOP}" x2="{px:.1}" y2="{:.1}" class="grid"/><text x="{px:.1}" y="{:.1}" class="axis" text-anchor="{anchor}">{}</text>"#,
            TOP + plot_h,
            HEIGHT - 14.0,
            escape(&text)
        );
        t += i64::from(tick);
    }
    // Series as step lines (optionally shaded), legend along the top right, right-aligned.
    let mut legend_right = LEFT + plot_w;
    for x in series {
        let n = x.values.len().max(1) as f64;
        let mut d = String::new();
        for (i, v) in x.values.iter().enumerate() {
            let x0 = LEFT + i as f64 / n * plot_w;
            let x1 = LEFT + (i + 1) as f64 / n * plot_w;
            let py = TOP + plot_h - v / top * plot_h;
            let cmd = if i == 0 { 'M' } else { 'L' };
            let _ = write!(d, "{cmd}{x0:.1},{py:.1}L{x1:.1},{py:.1}");
        }
        let color = escape(x.color);
        if x.fill && !x.values.is_empty() {
            let _ = write!(
                s,
                r#"<path d="{d}L{:.1},{:.1}L{LEFT:.1},{:.1}Z" fill="{color}" fill-opacity="0.15" stroke="none"/>"#,
                LEFT + plot_w,
                TOP + plot_h,
                TOP + plot_h
            );
        }
        let _ = write!(
            s,
            r#"<path d="{d}" fill="none" stroke="{color}" stroke-width="1.8"/>"#
        );
        // About 6.5 px per character at 12 px.
        let width = 22.0 + 6.5 * x.name.chars().count() as f64;
        let lx = legend_right - width;
        legend_right = lx - 8.0;
        let _ = write!(
            s,
            r#"<rect x="{lx:.1}" y="9" width="12" height="4" fill="{color}"/><text x="{:.1}" y="16" class="legend">{}</text>"#,
            lx + 16.0,
            escape(x.name)
        );
    }
    s.push_str("</svg>");
    s
}

/// A horizontal bar chart of `(label, value)` with values formatted by `fmt`.
pub fn bar_chart(title: &str, items: &[(String, f64)], fmt: &dyn Fn(f64) -> String) -> String {
    let row = 26.0;
    let label_w = 190.0;
    let value_w = 110.0;
    let height = TOP + row * items.len().max(1) as f64 + 10.0;
    let plot_w = WIDTH - label_w - value_w - RIGHT;
    let max = items.iter().map(|(_, v)| *v).fold(0.0, f64::max);
    let mut s = String::new();
    let _ = write!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" width="{WIDTH}" height="{height}" role="img" aria-label="{t}"><title>{t}</title><text x="8" y="18" class="title">{t}</text>"#,
        t = escape(title)
    );
    for (i, (name, v)) in items.iter().enumerate() {
        let y = TOP + row * i as f64;
        let w = if max > 0.0 { v / max * plot_w } else { 0.0 };
        let _ = write!(
            s,
            r#"<text x="{:.1}" y="{:.1}" class="axis" text-anchor="end">{}</text><rect x="{label_w:.1}" y="{:.1}" width="{w:.1}" height="{:.1}" class="bar"/><text x="{:.1}" y="{:.1}" class="legend">{}</text>"#,
            label_w - 8.0,
            y + row * 0.6,
            escape(name),
            y + 4.0,
            row - 8.0,
            label_w + w + 6.0,
            y + row * 0.6,
            escape(&fmt(*v))
        );
    }
    s.push_str("</svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charts_are_self_contained_svg() {
        let t0 = DateTime::from_timestamp(0, 0).unwrap();
        let values = [1.0, 3.0, 2.0];
        let chart = line_chart(
            "GPUs <paid>",
            "GPUs",
            t0,
            t0 + TimeDelta::hours(3),
            &[Series {
                name: "paid",
                color: "#1f77b4",
                values: &values,
                fill: true,
            }],
        );
        assert!(chart.starts_with("<svg") && chart.ends_with("</svg>"));
        assert!(chart.contains("GPUs &lt;paid&gt;"));
        assert!(!chart.contains("<script"));
        let bars = bar_chart(
            "by pool",
            &[("gpu".into(), 2.0), ("cpu".into(), 1.0)],
            &|v| format!("${v:.2}"),
        );
        assert!(bars.contains("$2.00") && bars.contains("class=\"bar\""));
        assert_eq!(nice_step(9.0, 4.0), 5.0);
        assert_eq!(nice_step(0.3, 4.0), 0.1);
    }
}
