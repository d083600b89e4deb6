//! The FOCUS rows: header, formatting, quoting, totals.

use chrono::{TimeZone, Utc};
use quartermaster_pricing::{CapacityType, Cloud};

use super::*;
use crate::usage::{Amounts, PodShare};

fn node() -> NodeUsage {
    NodeUsage {
        node: "n1".to_owned(),
        nodeclaim: "c1".to_owned(),
        nodepool: "pool, with comma".to_owned(),
        cloud: Cloud::Azure,
        region: "eastus".to_owned(),
        zone: "eastus-1".to_owned(),
        instance_type: "Standard_NC24ads_A100_v4".to_owned(),
        capacity_type: CapacityType::Spot,
        price_per_hour: 1.0,
        list_price_per_hour: Some(3.0),
        price_source: "azure-retail".to_owned(),
        accelerator: "a100".to_owned(),
        accelerator_count: 1,
        allocatable: Amounts {
            cpu_millis: 24_000,
            memory_bytes: 220 << 30,
            accelerators: 1,
        },
        start: Utc.with_ymd_and_hms(2026, 12, 31, 23, 30, 0).unwrap(),
        end: Some(Utc.with_ymd_and_hms(2027, 1, 1, 0, 30, 0).unwrap()),
    }
}

fn pod() -> PodUsage {
    PodUsage {
        namespace: "ml".to_owned(),
        pod: "say \"hi\"".to_owned(),
        workload: "Job/x".to_owned(),
        node: "n1".to_owned(),
        share: PodShare::Requests(Amounts {
            cpu_millis: 1000,
            memory_bytes: 0,
            accelerators: 1,
        }),
        start: node().start,
        end: node().end,
    }
}

#[test]
fn the_header_is_the_row_struct_in_column_order() {
    let mut w = csv::Writer::from_writer(Vec::new());
    let until = Utc.with_ymd_and_hms(2027, 1, 2, 0, 0, 0).unwrap();
    let a = crate::allocate(&[node()], &[pod()], until);
    w.serialize(row(&[node()], &[pod()], &a[0], &Billing::for_cluster("c")))
        .unwrap();
    let text = String::from_utf8(w.into_inner().unwrap()).unwrap();
    assert_eq!(text.lines().next().unwrap(), COLUMNS.join(","));
}

#[test]
fn rows_are_quoted_by_the_csv_writer_and_cross_a_month_end() {
    let until = Utc.with_ymd_and_hms(2027, 1, 2, 0, 0, 0).unwrap();
    let mut out = Vec::new();
    let billing = Billing::for_cluster("prod");
    let total = write_csv(&[node()], &[pod()], until, &billing, &mut out).unwrap();
    assert!((total - 1.0).abs() < 1e-9);
    let mut reader = csv::Reader::from_reader(out.as_slice());
    let header = reader.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    // Two hours, each a pod row (the pod takes the whole GPU) and an idle row.
    assert_eq!(rows.len(), 4);
    let first = &rows[0];
    assert_eq!(&first[col("x_Pod")], "say \"hi\"");
    assert_eq!(&first[col("x_NodePool")], "pool, with comma");
    assert_eq!(&first[col("BillingAccountId")], "quartermaster-prod-azure");
    assert_eq!(&first[col("BillingAccountName")], "prod (azure)");
    assert_eq!(&first[col("ProviderName")], "Microsoft");
    assert_eq!(&first[col("PricingCategory")], "Dynamic");
    assert_eq!(&first[col("BillingPeriodStart")], "2026-12-01T00:00:00Z");
    assert_eq!(&first[col("BillingPeriodEnd")], "2027-01-01T00:00:00Z");
    assert_eq!(&first[col("ChargePeriodStart")], "2026-12-31T23:00:00Z");
    assert_eq!(&first[col("BilledCost")], "0.5");
    assert_eq!(&first[col("ListCost")], "1.5");
    assert_eq!(&first[col("InvoiceId")], "");
    assert_eq!(&first[col("ChargeClass")], "");
    assert_eq!(&first[col("x_Idle")], "false");
    assert_eq!(&rows[1][col("x_Idle")], "true");
    assert_eq!(&rows[1][col("BilledCost")], "0");
    assert_eq!(&rows[2][col("BillingPeriodStart")], "2027-01-01T00:00:00Z");
}

#[test]
fn decimals_have_no_exponent_and_no_negative_zero() {
    assert_eq!(format_decimal(1.5), "1.5");
    assert_eq!(format_decimal(2.0), "2");
    assert_eq!(format_decimal(1e-12), "0");
    assert_eq!(format_decimal(-1e-12), "0");
    assert_eq!(format_decimal(1.0e-7), "0.0000001");
    assert_eq!(format_decimal(12345.678), "12345.678");
}

#[test]
fn a_closed_pipe_is_an_io_error_the_cli_can_recognise() {
    struct Closed;
    impl std::io::Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let until = Utc.with_ymd_and_hms(2027, 1, 2, 0, 0, 0).unwrap();
    let err = write_csv(
        &[node()],
        &[pod()],
        until,
        &Billing::for_cluster("c"),
        &mut Closed,
    )
    .unwrap_err();
    assert!(
        matches!(&err, CostError::Io(e) if e.kind() == std::io::ErrorKind::BrokenPipe),
        "{err:?}"
    );
}
