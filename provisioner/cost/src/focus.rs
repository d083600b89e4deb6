//! The allocation as FOCUS 1.2 rows (`cost.csv`): one row per pod per node per clock hour, plus
//! one idle row per node-hour for the share no pod took.
//!
//! Columns: the FOCUS 1.2 columns we can fill (mandatory ones, `ChargeFrequency`, `InvoiceId`,
//! `ServiceSubcategory`, `PricingCategory`, location and resource columns), then our `x_`
//! columns. `InvoiceId` is always null: these are allocated estimates, not invoice lines.

use std::io::Write;

use chrono::{DateTime, Datelike, SecondsFormat, TimeDelta, TimeZone, Utc};
use quartermaster_pricing::{CapacityType, Cloud};
use serde::{Serialize, Serializer};

use crate::allocate::{Allocation, allocate};
use crate::error::CostError;
use crate::usage::{NodeUsage, PodUsage};

/// The columns, in order (the header of `cost.csv`).
pub const COLUMNS: [&str; 49] = [
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
    "ChargeFrequency",
    "InvoiceId",
    "ServiceSubcategory",
    "RegionId",
    "RegionName",
    "AvailabilityZone",
    "ResourceId",
    "ResourceName",
    "ResourceType",
    "ListUnitPrice",
    "ContractedUnitPrice",
    "ConsumedQuantity",
    "ConsumedUnit",
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

/// Who the rows are billed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Billing {
    /// The cluster's name (`x_Cluster`).
    pub cluster: String,
    /// `BillingAccountId`; `{cloud}` is replaced by the node's cloud (`aws`, `gcp`, `azure`).
    pub account_id: String,
    /// `BillingAccountName`; `{cloud}` is replaced by the node's cloud.
    pub account_name: String,
}

impl Billing {
    /// Accounts named after the cluster: `quartermaster-{cluster}-{cloud}`, `{cluster} ({cloud})`.
    pub fn for_cluster(cluster: &str) -> Self {
        Self {
            cluster: cluster.to_owned(),
            account_id: format!("quartermaster-{cluster}-{{cloud}}"),
            account_name: format!("{cluster} ({{cloud}})"),
        }
    }
}

/// One FOCUS row: a pod's (or the idle) share of one node-hour. Fields serialise to
/// [`COLUMNS`], in order; `None` is an empty (null) cell.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "PascalCase")]
#[allow(missing_docs)] // Each field is the FOCUS column of the same name.
pub struct FocusRow {
    #[serde(serialize_with = "decimal")]
    pub billed_cost: f64,
    #[serde(serialize_with = "decimal")]
    pub effective_cost: f64,
    #[serde(serialize_with = "decimal")]
    pub list_cost: f64,
    #[serde(serialize_with = "decimal")]
    pub contracted_cost: f64,
    pub billing_account_id: String,
    pub billing_account_name: String,
    pub billing_currency: &'static str,
    #[serde(serialize_with = "timestamp")]
    pub billing_period_start: DateTime<Utc>,
    #[serde(serialize_with = "timestamp")]
    pub billing_period_end: DateTime<Utc>,
    pub charge_category: &'static str,
    pub charge_class: Option<&'static str>,
    pub charge_description: String,
    #[serde(serialize_with = "timestamp")]
    pub charge_period_start: DateTime<Utc>,
    #[serde(serialize_with = "timestamp")]
    pub charge_period_end: DateTime<Utc>,
    pub invoice_issuer_name: &'static str,
    pub provider_name: &'static str,
    pub publisher_name: &'static str,
    #[serde(serialize_with = "decimal")]
    pub pricing_quantity: f64,
    pub pricing_unit: &'static str,
    pub service_category: &'static str,
    pub service_name: &'static str,
    pub pricing_category: &'static str,
    pub charge_frequency: &'static str,
    pub invoice_id: Option<String>,
    pub service_subcategory: &'static str,
    pub region_id: String,
    pub region_name: String,
    pub availability_zone: String,
    pub resource_id: String,
    pub resource_name: String,
    pub resource_type: &'static str,
    #[serde(serialize_with = "decimal")]
    pub list_unit_price: f64,
    #[serde(serialize_with = "decimal")]
    pub contracted_unit_price: f64,
    #[serde(serialize_with = "decimal")]
    pub consumed_quantity: f64,
    pub consumed_unit: &'static str,
    #[serde(rename = "x_Cluster")]
    pub x_cluster: String,
    #[serde(rename = "x_NodePool")]
    pub x_node_pool: String,
    #[serde(rename = "x_NodeClaim")]
    pub x_node_claim: String,
    #[serde(rename = "x_Node")]
    pub x_node: String,
    #[serde(rename = "x_Namespace")]
    pub x_namespace: String,
    #[serde(rename = "x_Workload")]
    pub x_workload: String,
    #[serde(rename = "x_Pod")]
    pub x_pod: String,
    #[serde(rename = "x_CapacityType")]
    pub x_capacity_type: &'static str,
    #[serde(rename = "x_InstanceType")]
    pub x_instance_type: String,
    #[serde(rename = "x_AcceleratorModel")]
    pub x_accelerator_model: String,
    #[serde(rename = "x_AcceleratorCount")]
    pub x_accelerator_count: u32,
    #[serde(rename = "x_GpuHours", serialize_with = "decimal")]
    pub x_gpu_hours: f64,
    #[serde(rename = "x_Idle")]
    pub x_idle: bool,
    #[serde(rename = "x_PriceSource")]
    pub x_price_source: String,
}

/// Dollars and quantities: up to ten decimals, no exponent, no trailing zeros.
pub fn format_decimal(x: f64) -> String {
    let s = format!("{x:.10}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_owned()
    } else {
        s.to_owned()
    }
}

fn decimal<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_decimal(*x))
}

fn timestamp<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&t.to_rfc3339_opts(SecondsFormat::Secs, true))
}

/// The calendar month holding `t` (the billing period).
pub fn month(t: DateTime<Utc>) -> (DateTime<Utc>, DateTime<Utc>) {
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
pub fn provider(cloud: Cloud) -> (&'static str, &'static str) {
    match cloud {
        Cloud::Aws => ("Amazon Web Services", "Amazon Elastic Compute Cloud"),
        Cloud::Gcp => ("Google Cloud", "Compute Engine"),
        Cloud::Azure => ("Microsoft", "Virtual Machines"),
    }
}

/// FOCUS `PricingCategory` of a capacity type.
pub fn pricing_category(capacity_type: CapacityType) -> &'static str {
    match capacity_type {
        CapacityType::Spot => "Dynamic",
        CapacityType::OnDemand => "Standard",
        CapacityType::Reserved => "Committed",
        // A discounted SKU for queued, time-bounded capacity: neither list price nor commitment.
        CapacityType::FlexStart => "Other",
    }
}

/// The FOCUS row of one allocation.
pub fn row(nodes: &[NodeUsage], pods: &[PodUsage], a: &Allocation, billing: &Billing) -> FocusRow {
    let node = &nodes[a.node];
    let pod = a.pod.map(|p| &pods[p]);
    let (issuer, service) = provider(node.cloud);
    let (period_start, period_end) = month(a.hour);
    let list_price = node.list_price_per_hour.unwrap_or(node.price_per_hour);
    let subject = match pod {
        Some(p) => format!("{}/{}", p.namespace, p.pod),
        None => "idle (no pod requested this share)".to_owned(),
    };
    let cloud = node.cloud.as_str();
    FocusRow {
        billed_cost: a.cost,
        effective_cost: a.cost,
        list_cost: list_price * a.quantity,
        contracted_cost: a.cost,
        billing_account_id: billing.account_id.replace("{cloud}", cloud),
        billing_account_name: billing.account_name.replace("{cloud}", cloud),
        billing_currency: "USD",
        billing_period_start: period_start,
        billing_period_end: period_end,
        charge_category: "Usage",
        charge_class: None,
        charge_description: format!(
            "{} {} in {}, NodePool {}: {subject}",
            node.instance_type, node.capacity_type, node.zone, node.nodepool
        ),
        charge_period_start: a.hour,
        charge_period_end: a.hour + TimeDelta::hours(1),
        invoice_issuer_name: issuer,
        provider_name: issuer,
        publisher_name: issuer,
        pricing_quantity: a.quantity,
        pricing_unit: "Hours",
        service_category: "Compute",
        service_name: service,
        pricing_category: pricing_category(node.capacity_type),
        charge_frequency: "Usage-Based",
        invoice_id: None,
        service_subcategory: "Virtual Machines",
        region_id: node.region.clone(),
        region_name: node.region.clone(),
        availability_zone: node.zone.clone(),
        resource_id: if node.nodeclaim.is_empty() {
            node.node.clone()
        } else {
            node.nodeclaim.clone()
        },
        resource_name: node.node.clone(),
        resource_type: "Virtual Machine",
        list_unit_price: list_price,
        contracted_unit_price: node.price_per_hour,
        consumed_quantity: a.quantity,
        consumed_unit: "Hours",
        x_cluster: billing.cluster.clone(),
        x_node_pool: node.nodepool.clone(),
        x_node_claim: node.nodeclaim.clone(),
        x_node: node.node.clone(),
        x_namespace: pod.map(|p| p.namespace.clone()).unwrap_or_default(),
        x_workload: pod.map(|p| p.workload.clone()).unwrap_or_default(),
        x_pod: pod.map(|p| p.pod.clone()).unwrap_or_default(),
        x_capacity_type: node.capacity_type.as_str(),
        x_instance_type: node.instance_type.clone(),
        x_accelerator_model: node.accelerator.clone(),
        x_accelerator_count: node.accelerator_count,
        x_gpu_hours: a.gpu_hours,
        x_idle: a.pod.is_none(),
        x_price_source: node.price_source.clone(),
    }
}

/// Writes rows as CSV with the [`COLUMNS`] header; returns the sum of `BilledCost` as written
/// (after rounding to ten decimals).
pub fn write_rows<I>(rows: I, out: &mut dyn Write) -> Result<f64, CostError>
where
    I: IntoIterator<Item = FocusRow>,
{
    let mut w = csv::WriterBuilder::new()
        .has_headers(false)
        .from_writer(out);
    w.write_record(COLUMNS)?;
    let mut total = 0.0;
    for r in rows {
        total += format_decimal(r.billed_cost).parse::<f64>().unwrap_or(0.0);
        w.serialize(r)?;
    }
    w.flush()?;
    Ok(total)
}

/// Allocates and writes the FOCUS CSV in one go (open intervals billed up to `until`); returns
/// the sum of `BilledCost` as written.
pub fn write_csv(
    nodes: &[NodeUsage],
    pods: &[PodUsage],
    until: DateTime<Utc>,
    billing: &Billing,
    out: &mut dyn Write,
) -> Result<f64, CostError> {
    let allocations = allocate(nodes, pods, until);
    write_rows(
        allocations.iter().map(|a| row(nodes, pods, a, billing)),
        out,
    )
}

#[cfg(test)]
mod tests;
