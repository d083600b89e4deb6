//! Reports agree with the summary.

use std::collections::BTreeMap;

use crate::{Scenario, simulate};

use super::{focus_csv, html};

fn default_run() -> crate::Simulation {
    simulate(&Scenario::embedded_default().unwrap(), None, None).unwrap()
}

/// Splits one CSV record (RFC 4180 quoting).
fn fields(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                chars.next();
                out.last_mut().unwrap().push('"');
            }
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(String::new()),
            c => out.last_mut().unwrap().push(c),
        }
    }
    out
}

#[test]
fn the_focus_csv_sums_to_the_total_cost() {
    let sim = default_run();
    let mut buf = Vec::new();
    let written = focus_csv::write(&sim.scenario, &sim.run.record, &mut buf).unwrap();
    let text = String::from_utf8(buf).unwrap();
    let mut lines = text.lines();
    let header = fields(lines.next().unwrap());
    assert_eq!(header, focus_csv::COLUMNS);
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let mut billed = 0.0;
    let mut gpu_hours = 0.0;
    let mut idle_rows: BTreeMap<(String, String), usize> = BTreeMap::new();
    let mut rows = 0;
    for line in lines {
        let f = fields(line);
        assert_eq!(f.len(), header.len(), "{line}");
        rows += 1;
        billed += f[col("BilledCost")].parse::<f64>().unwrap();
        gpu_hours += f[col("x_GpuHours")].parse::<f64>().unwrap();
        assert_eq!(f[col("BillingCurrency")], "USD");
        assert_eq!(f[col("ChargeCategory")], "Usage");
        assert_eq!(f[col("ChargeClass")], "");
        assert_eq!(f[col("PricingUnit")], "Hours");
        assert_eq!(f[col("ServiceCategory")], "Compute");
        assert_eq!(f[col("ProviderName")], "Google Cloud");
        assert!(["Standard", "Dynamic"].contains(&f[col("PricingCategory")].as_str()));
        assert_eq!(
            f[col("PricingCategory")] == "Dynamic",
            f[col("x_CapacityType")] == "spot"
        );
        let list: f64 = f[col("ListCost")].parse().unwrap();
        assert!(list + 1e-9 >= f[col("BilledCost")].parse::<f64>().unwrap());
        if f[col("x_Idle")] == "true" {
            assert_eq!(f[col("x_Pod")], "");
            *idle_rows
                .entry((
                    f[col("x_NodeClaim")].clone(),
                    f[col("ChargePeriodStart")].clone(),
                ))
                .or_default() += 1;
        } else {
            assert!(!f[col("x_Pod")].is_empty());
        }
    }
    assert!(rows > 10);
    // One idle row per node-hour.
    assert!(idle_rows.values().all(|n| *n == 1));
    let s = &sim.summary;
    assert!(
        (billed - s.total_cost).abs() < 1e-5,
        "{billed} vs {}",
        s.total_cost
    );
    assert!((written - billed).abs() < 1e-9);
    assert!(
        (gpu_hours - s.gpu_hours_paid).abs() < 1e-5,
        "{gpu_hours} vs {}",
        s.gpu_hours_paid
    );
}

#[test]
fn the_html_report_shows_the_summary_numbers_and_nothing_from_the_network() {
    let sim = default_run();
    let page = html::render(&sim.scenario, &sim.summary, &sim.run.record);
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(!page.contains("<script"));
    assert!(
        !page.contains("http://")
            || page.matches("http://").count()
                == page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count()
    );
    assert!(!page.contains("https://"));
    assert_eq!(page.matches("<svg").count(), 5);
    let json = sim.summary.to_json();
    let mut checked = 0;
    for (key, value) in json.as_object().unwrap() {
        if !value.is_number() {
            continue;
        }
        let needle = format!("data-key=\"{key}\" data-value=\"");
        let at = page
            .find(&needle)
            .unwrap_or_else(|| panic!("{key} is not in the report"));
        let rest = &page[at + needle.len()..];
        let shown: f64 = rest[..rest.find('"').unwrap()].parse().unwrap();
        assert_eq!(shown, value.as_f64().unwrap(), "{key}");
        checked += 1;
    }
    assert!(checked >= 20);
    for key in [
        "total_cost",
        "on_demand_only_cost",
        "gpu_hours_paid",
        "pods_total",
    ] {
        assert!(page.contains(&format!("data-key=\"{key}\"")));
    }
}

#[test]
fn the_report_dir_gets_three_files() {
    let sim = default_run();
    let dir = std::env::temp_dir().join(format!("qm-sim-report-{}", std::process::id()));
    super::write_dir(&dir, &sim).unwrap();
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary, sim.summary.to_json());
    assert!(
        std::fs::read_to_string(dir.join("cost.csv"))
            .unwrap()
            .starts_with("BilledCost,")
    );
    assert!(
        std::fs::read_to_string(dir.join("report.html"))
            .unwrap()
            .contains("</html>")
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
