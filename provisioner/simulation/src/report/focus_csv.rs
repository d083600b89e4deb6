//! `cost.csv`: the bill, allocated, in FOCUS v1.2 columns.
//!
//! One row per pod per node per clock hour, plus one idle row per node-hour for the share no
//! pod took. A node-hour's cost (price × billed part of the hour) is split between the pods
//! that ran on it in that hour by their requests' dominant share of the node's allocatable —
//! accelerators first: on an accelerator node a pod requesting accelerators pays for its share
//! of them; other pods pay for the larger of their CPU and memory shares — weighted by how much
//! of the hour they ran. Rows of one node-hour sum to its cost, so `BilledCost` sums to the
//! summary's `total_cost`.

use std::collections::BTreeMap;
use std::io::{self, Write};

use chrono::{DateTime, Datelike, SecondsFormat, TimeDelta, TimeZone, Timelike, Utc};
use quartermaster_pricing::{CapacityType, Cloud};
use quartermaster_solver::resources::{CPU, MEMORY};

use crate::record::{InstanceRecord, PodRecord, Record};
use crate::scenario::Scenario;

/// The columns, in order: FOCUS mandatory columns, `PricingCategory`, then our `x_` columns.
pub const COLUMNS: [&str; 36] = [
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "ContractedCost",
    "BillingAccountId",
    "BillingAccountName",
    "BillingCurrency",
    "BillingPeriodStart",
    "BillingPeriodEnd",
    "ChargeCategory",
    "ChargeClass",
    "ChargeDescription",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "InvoiceIssuerName",
    "ProviderName",
    "PublisherName",
    "PricingQuantity",
    "PricingUnit",
    "ServiceCategory",
    "ServiceName",
    "PricingCategory",
    "x_Cluster",
    "x_NodePool",
    "x_NodeClaim",
    "x_Node",
    "x_Namespace",
    "x_Workload",
    "x_Pod",
    "x_CapacityType",
    "x_InstanceType",
    "x_AcceleratorModel",
    "x_AcceleratorCount",
    "x_GpuHours",
    "x_Idle",
    "x_PriceSource",
];

/// One allocated charge: a pod's (or the idle) share of one node-hour.
#[derive(Debug, Clone, PartialEq)]
pub struct Allocation {
    /// Index of the instance.
    pub instance: usize,
    /// Index of the pod; `None` for the idle share.
    pub pod: Option<usize>,
    /// The clock hour.
    pub hour: DateTime<Utc>,
    /// Share of the node-hour's cost (0..=1).
    pub share: f64,
    /// Dollars.
    pub cost: f64,
    /// Instance-hours (share × billed hours).
    pub quantity: f64,
    /// Accelerator-hours requested (idle: accelerator-hours paid and not requested).
    pub gpu_hours: f64,
}

fn hour_floor(t: DateTime<Utc>) -> DateTime<Utc> {
    t.with_minute(0)
        .and_then(|t| t.with_second(0))
        .and_then(|t| t.with_nanosecond(0))
        .unwrap_or(t)
}

/// `[a, b)` cut at clock hours: `(hour, seconds in it)`.
fn hours(a: DateTime<Utc>, b: DateTime<Utc>) -> Vec<(DateTime<Utc>, f64)> {
    let mut out = Vec::new();
    let mut h = hour_floor(a);
    while h < b {
        let next = h + TimeDelta::hours(1);
        let secs = (b.min(next) - a.max(h)).as_seconds_f64();
        if secs > 0.0 {
            out.push((h, secs));
        }
        h = next;
    }
    out
}

/// The pod's dominant share of the instance (accelerators first).
fn dominant_share(pod: &PodRecord, inst: &InstanceRecord) -> f64 {
    if inst.accelerators > 0 && pod.accelerators > 0 {
        return (pod.accelerators as f64 / f64::from(inst.accelerators)).min(1.0);
    }
    let share = |slot: usize| {
        let a = inst.allocatable.get(slot);
        if a > 0 {
            pod.requests.get(slot) as f64 / a as f64
        } else {
            0.0
        }
    };
    share(CPU).max(share(MEMORY)).min(1.0)
}

/// Every allocation of the run, by instance (launch order), hour, then pod (idle last).
pub fn allocations(rec: &Record, end: DateTime<Utc>) -> Vec<Allocation> {
    let mut by_instance: Vec<Vec<usize>> = vec![Vec::new(); rec.instances.len()];
    for (k, s) in rec.segments.iter().enumerate() {
        by_instance[s.instance].push(k);
    }
    let mut out = Vec::new();
    for (i, inst) in rec.instances.iter().enumerate() {
        // Run seconds per hour per pod on this instance.
        let mut run: BTreeMap<DateTime<Utc>, BTreeMap<usize, f64>> = BTreeMap::new();
        for &k in &by_instance[i] {
            let s = &rec.segments[k];
            for (h, secs) in hours(s.start, s.end) {
                *run.entry(h).or_default().entry(s.pod).or_default() += secs;
            }
        }
        for (h, billed) in hours(inst.start, inst.end.unwrap_or(end)) {
            let cost = inst.price_per_hour * billed / 3600.0;
            let billed_hours = billed / 3600.0;
            let pods = run.remove(&h).unwrap_or_default();
            let mut weights: Vec<(usize, f64, f64)> = pods
                .iter()
                .map(|(&p, &secs)| {
                    let secs = secs.min(billed);
                    (p, dominant_share(&rec.pods[p], inst) * secs / billed, secs)
                })
                .collect();
            let sum: f64 = weights.iter().map(|w| w.1).sum();
            if sum > 1.0 {
                for w in &mut weights {
                    w.1 /= sum;
                }
            }
            let mut allocated = 0.0;
            let mut gpu_requested = 0.0;
            for (p, w, secs) in weights {
                let gpu_hours = rec.pods[p].accelerators as f64 * secs / 3600.0;
                allocated += w;
                gpu_requested += gpu_hours;
                out.push(Allocation {
                    instance: i,
                    pod: Some(p),
                    hour: h,
                    share: w,
                    cost: cost * w,
                    quantity: billed_hours * w,
                    gpu_hours,
                });
            }
            let idle = (1.0 - allocated).max(0.0);
            out.push(Allocation {
                instance: i,
                pod: None,
                hour: h,
                share: idle,
                cost: cost * idle,
                quantity: billed_hours * idle,
                gpu_hours: (f64::from(inst.accelerators) * billed_hours - gpu_requested).max(0.0),
            });
        }
    }
    out
}

fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Secs, true)
}

fn month(t: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
    let start = Utc
        .with_ymd_and_hms(t.year(), t.month(), 1, 0, 0, 0)
        .single()
        .unwrap_or(t);
    let (y, m) = if t.month() == 12 {
        (t.year() + 1, 1)
    } else {
        (t.year(), t.month() + 1)
    };
    let end = Utc.with_ymd_and_hms(y, m, 1, 0, 0, 0).single().unwrap_or(t);
    (start, end)
}

/// `(provider / invoice issuer / publisher, service name)` of a cloud's compute.
fn provider(cloud: Cloud) -> (&'static str, &'static str) {
    match cloud {
        Cloud::Aws => ("Amazon Web Services", "Amazon Elastic Compute Cloud"),
        Cloud::Gcp => ("Google Cloud", "Compute Engine"),
        Cloud::Azure => ("Microsoft", "Virtual Machines"),
    }
}

fn number(x: f64) -> String {
    let s = format!("{x:.10}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_owned()
    } else {
        s.to_owned()
    }
}

fn cell(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Writes `cost.csv`; returns the sum of `BilledCost` as written.
pub fn write(scenario: &Scenario, rec: &Record, out: &mut dyn Write) -> io::Result<f64> {
    writeln!(out, "{}", COLUMNS.join(","))?;
    let end = scenario.end();
    let mut total = 0.0;
    for a in allocations(rec, end) {
        let inst = &rec.instances[a.instance];
        let pod = a.pod.map(|p| &rec.pods[p]);
        let workload = pod.map(|p| &scenario.workloads[p.workload]);
        let (issuer, service) = provider(inst.cloud);
        let (period_start, period_end) = month(a.hour);
        let billed = number(a.cost);
        total += billed.parse::<f64>().unwrap_or(0.0);
        let list = number(inst.list_price_per_hour * a.quantity);
        let subject = match pod {
            Some(p) => p.id.to_string(),
            None => "idle (no pod requested this share)".to_owned(),
        };
        let description = format!(
            "{} {} in {}, NodePool {}: {subject}",
            inst.instance_type, inst.capacity_type, inst.zone, inst.node_pool
        );
        let row: Vec<String> = vec![
            billed.clone(),
            billed.clone(),
            list,
            billed,
            format!("quartermaster-sim-{}", inst.cloud),
            format!("{} (simulated {})", scenario.cluster, inst.cloud),
            "USD".into(),
            time(period_start),
            time(period_end),
            "Usage".into(),
            String::new(),
            description,
            time(a.hour),
            time(a.hour + TimeDelta::hours(1)),
            issuer.into(),
            issuer.into(),
            issuer.into(),
            number(a.quantity),
            "Hours".into(),
            "Compute".into(),
            service.into(),
            match inst.capacity_type {
                CapacityType::Spot => "Dynamic",
                CapacityType::OnDemand => "Standard",
                CapacityType::Reserved => "Committed",
            }
            .into(),
            scenario.cluster.clone(),
            inst.node_pool.clone(),
            inst.claim.clone(),
            inst.node.clone().unwrap_or_default(),
            pod.map(|p| p.id.namespace.clone()).unwrap_or_default(),
            workload
                .map(|w| format!("{}/{}", w.kind_name(), w.name))
                .unwrap_or_default(),
            pod.map(|p| p.id.name.clone()).unwrap_or_default(),
            inst.capacity_type.to_string(),
            inst.instance_type.clone(),
            inst.accelerator_model.clone(),
            inst.accelerators.to_string(),
            number(a.gpu_hours),
            (a.pod.is_none()).to_string(),
            inst.price_source.clone(),
        ];
        let line: Vec<String> = row.iter().map(|c| cell(c)).collect();
        writeln!(out, "{}", line.join(","))?;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_are_cut_at_clock_hours() {
        let t = |h: u32, m: u32| Utc.with_ymd_and_hms(2026, 1, 5, h, m, 0).unwrap();
        let cut = hours(t(0, 30), t(2, 15));
        assert_eq!(
            cut,
            vec![(t(0, 0), 1800.0), (t(1, 0), 3600.0), (t(2, 0), 900.0)]
        );
        assert!(hours(t(1, 0), t(1, 0)).is_empty());
        assert_eq!(
            month(t(5, 0)).0,
            Utc.with_ymd_and_hms(2026, 1, 1, 0, 0, 0).unwrap()
        );
        assert_eq!(
            month(t(5, 0)).1,
            Utc.with_ymd_and_hms(2026, 2, 1, 0, 0, 0).unwrap()
        );
        assert_eq!(number(1.5), "1.5");
        assert_eq!(number(2.0), "2");
        assert_eq!(cell("a,b"), "\"a,b\"");
    }
}
