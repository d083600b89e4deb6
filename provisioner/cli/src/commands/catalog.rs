//! `quartermaster catalog`: the price catalog, filtered, as a table, JSON, CSV or a TOML catalog
//! file; with `--live`, merged with what the cloud's price APIs say now.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use chrono::{NaiveDate, Utc};
use quartermaster_pricing::live::LiveMerge;
use quartermaster_pricing::{CapacityType, Catalog, Cloud, InstanceType, Offering};
use serde::Serialize;
use serde_json::{Value, json};

use crate::cli::{CapacityTypeArg, CatalogArgs, CatalogFormat, CloudArg};
use crate::clouds;
use crate::output::{Table, money};

/// Rejected quotes listed one per line on standard error; the rest are counted.
const REJECTED_SHOWN: usize = 10;

/// The embedded catalog (every region), replaced or extended by `--catalog FILE` when given.
pub fn load_catalog(path: Option<&Path>) -> anyhow::Result<Catalog> {
    let catalog = Catalog::embedded_all_regions();
    match path {
        None => Ok(catalog),
        Some(path) => {
            let file = Catalog::from_path(path)?;
            Ok(catalog.with_override(file))
        }
    }
}

/// One instance type with the offerings that passed the filters.
struct Row<'a> {
    instance_type: &'a InstanceType,
    offerings: Vec<&'a Offering>,
}

pub fn run(args: &CatalogArgs, out: &mut dyn Write, err: &mut dyn Write) -> anyhow::Result<u8> {
    let mut catalog = load_catalog(args.catalog.as_deref())?;
    let today = args.live.then(|| Utc::now().date_naive());
    let mut reservations = None;
    if args.live {
        catalog = with_live_prices(catalog, args, err)?;
        reservations = Some(live_reservations(&catalog, args, err)?);
    }
    let rows = select(&catalog, args);
    match args.output {
        CatalogFormat::Json => {
            let mut array: Vec<Value> = rows.iter().map(|r| to_json(&catalog, r, today)).collect();
            // `--live`: each type lists the reservations the cloud reports for it.
            if let Some(reservations) = &reservations {
                let now = Utc::now();
                for (value, row) in array.iter_mut().zip(&rows) {
                    let it = row.instance_type;
                    value["reservations"] = reservations
                        .iter()
                        .filter(|r| r.cloud == it.cloud && r.instance_type == it.name)
                        .map(|r| crate::reservations::summary::live_json(r, now))
                        .collect();
                }
            }
            serde_json::to_writer_pretty(&mut *out, &array).context("writing JSON")?;
            writeln!(out)?;
        }
        CatalogFormat::Csv => write_csv(&catalog, &rows, out)?,
        CatalogFormat::Table => {
            write_table(&rows, today, out)?;
            if let Some(reservations) = &reservations {
                crate::reservations::summary::write_live_table(reservations, Utc::now(), out)?;
            }
        }
        CatalogFormat::Toml => {
            let types: Vec<(&InstanceType, Vec<&Offering>)> = rows
                .iter()
                .map(|r| (r.instance_type, r.offerings.clone()))
                .collect();
            out.write_all(super::catalog_toml::to_toml(&catalog, &types)?.as_bytes())?;
        }
    }
    Ok(crate::EXIT_OK)
}

/// `--live`: the catalog merged with the cloud's quotes for the region. When the price APIs
/// fail the catalog's prices stay, with the reason on standard error.
/// `--live`: the cloud, and the region (`--region`, else the catalog's default).
fn live_region(catalog: &Catalog, args: &CatalogArgs) -> anyhow::Result<(Cloud, String)> {
    let cloud = clouds::cloud_of(args.cloud.context("--live needs --cloud")?);
    let region = match &args.region {
        Some(r) => r.clone(),
        None => catalog
            .default_region(cloud)
            .map(str::to_owned)
            .with_context(|| {
                format!("--live: pass --region (the catalog has no default region for {cloud})")
            })?,
    };
    Ok((cloud, region))
}

/// `--live`: the capacity reservations the cloud reports in the region
/// (`CloudProvider::reservations`). When the cloud does not answer there are none, with the
/// reason on standard error.
fn live_reservations(
    catalog: &Catalog,
    args: &CatalogArgs,
    err: &mut dyn Write,
) -> anyhow::Result<Vec<quartermaster_pricing::Reservation>> {
    let (cloud, region) = live_region(catalog, args)?;
    match clouds::block_on(clouds::live_reservations(
        cloud,
        &args.access,
        &region,
        args.aws_endpoint.as_deref(),
        catalog,
    )) {
        Ok(reservations) => {
            writeln!(
                err,
                "reservations for {cloud} {region}: {} reported",
                reservations.len()
            )?;
            Ok(reservations)
        }
        Err(e) => {
            writeln!(
                err,
                "warning: reservations for {cloud} {region} unavailable, none are listed: {e:#}"
            )?;
            Ok(Vec::new())
        }
    }
}

fn with_live_prices(
    catalog: Catalog,
    args: &CatalogArgs,
    err: &mut dyn Write,
) -> anyhow::Result<Catalog> {
    let (cloud, region) = live_region(&catalog, args)?;
    let quotes = match clouds::block_on(clouds::live_quotes_and_failures(
        cloud,
        &args.access,
        &region,
        args.aws_endpoint.as_deref(),
        &catalog,
    )) {
        Ok((quotes, failures)) => {
            for failure in failures {
                writeln!(
                    err,
                    "warning: {failure}; the prices it gives stay as the catalog has them"
                )?;
            }
            quotes
        }
        Err(e) => {
            writeln!(
                err,
                "warning: live prices for {cloud} {region} unavailable, the catalog's prices are shown: {e:#}"
            )?;
            return Ok(catalog);
        }
    };
    let merge = catalog.with_live_prices(&quotes, Utc::now());
    write_live_summary(cloud, &region, &merge, err)?;
    #[cfg(feature = "aws")]
    if cloud == Cloud::Aws {
        return with_spot_advisor(merge.catalog, &region, err);
    }
    Ok(merge.catalog)
}

/// AWS: the Spot Instance Advisor's interruption bands on the region's spot offerings
/// (`AWS_SPOT_ADVISOR_URL` points elsewhere; empty skips it). When it does not answer, the
/// catalog's bands stay, with the reason on standard error.
#[cfg(feature = "aws")]
fn with_spot_advisor(
    catalog: Catalog,
    region: &str,
    err: &mut dyn Write,
) -> anyhow::Result<Catalog> {
    use crate::clouds::aws_spot_advisor;
    let url = aws_spot_advisor::url();
    if url.is_empty() {
        return Ok(catalog);
    }
    match aws_spot_advisor::fetch(&url) {
        Ok(bands) => {
            let (catalog, applied) =
                aws_spot_advisor::apply(catalog, &bands, region, Utc::now().date_naive());
            writeln!(
                err,
                "spot interruption bands for aws {region}: {applied} spot offerings from the Spot Instance Advisor"
            )?;
            Ok(catalog)
        }
        Err(e) => {
            writeln!(
                err,
                "warning: the Spot Instance Advisor did not answer, spot offerings keep the catalog's bands: {e:#}"
            )?;
            Ok(catalog)
        }
    }
}

fn write_live_summary(
    cloud: Cloud,
    region: &str,
    merge: &LiveMerge,
    err: &mut dyn Write,
) -> anyhow::Result<()> {
    writeln!(
        err,
        "live prices for {cloud} {region}: {} accepted ({} prices changed), {} rejected, {} for types or zones not in the catalog",
        merge.accepted,
        merge.changed,
        merge.rejected.len(),
        merge.unknown
    )?;
    for r in merge.rejected.iter().take(REJECTED_SHOWN) {
        let q = &r.quote;
        writeln!(
            err,
            "  rejected {} {} {} {} from {}: {} (the catalog's price stays)",
            q.instance_type,
            q.zone.as_deref().unwrap_or(&q.region),
            q.capacity_type,
            q.price_per_hour,
            q.source,
            r.reason
        )?;
    }
    if merge.rejected.len() > REJECTED_SHOWN {
        writeln!(
            err,
            "  … and {} more rejected",
            merge.rejected.len() - REJECTED_SHOWN
        )?;
    }
    Ok(())
}

/// Days between a price's date and today.
fn age_days(as_of: NaiveDate, today: NaiveDate) -> i64 {
    (today - as_of).num_days()
}

fn select<'a>(catalog: &'a Catalog, args: &CatalogArgs) -> Vec<Row<'a>> {
    let cloud = args.cloud.map(|c| match c {
        CloudArg::Aws => Cloud::Aws,
        CloudArg::Gcp => Cloud::Gcp,
        CloudArg::Azure => Cloud::Azure,
    });
    let capacity_type = args.capacity_type.map(|c| match c {
        CapacityTypeArg::Spot => CapacityType::Spot,
        CapacityTypeArg::OnDemand => CapacityType::OnDemand,
    });
    let gpu = args.gpu.as_deref().map(str::to_ascii_lowercase);
    let mut rows: Vec<Row<'a>> = catalog
        .instance_types()
        .iter()
        .filter(|it| cloud.is_none_or(|c| it.cloud == c))
        .filter(|it| match (&gpu, &it.accelerator) {
            (None, _) => true,
            (Some(want), Some(acc)) => acc.name.eq_ignore_ascii_case(want),
            (Some(_), None) => false,
        })
        .filter(|it| {
            args.min_gpus
                .is_none_or(|n| it.accelerator.as_ref().is_some_and(|a| a.count >= n))
        })
        .filter_map(|it| {
            let offerings: Vec<&Offering> = it
                .offerings
                .iter()
                .filter(|o| args.region.as_deref().is_none_or(|r| o.region == r))
                .filter(|o| capacity_type.is_none_or(|c| o.capacity_type == c))
                .collect();
            (!offerings.is_empty()).then_some(Row {
                instance_type: it,
                offerings,
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        (
            a.instance_type.cloud.to_string(),
            cheapest(a),
            &a.instance_type.name,
        )
            .partial_cmp(&(
                b.instance_type.cloud.to_string(),
                cheapest(b),
                &b.instance_type.name,
            ))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    rows
}

fn cheapest(row: &Row<'_>) -> f64 {
    row.offerings
        .iter()
        .map(|o| o.price_per_hour)
        .fold(f64::INFINITY, f64::min)
}

fn cheapest_of(row: &Row<'_>, capacity_type: CapacityType) -> Option<f64> {
    row.offerings
        .iter()
        .filter(|o| o.capacity_type == capacity_type)
        .map(|o| o.price_per_hour)
        .reduce(f64::min)
}

/// The Spot Advisor band of an offering, when the catalog knows it.
fn interruption(catalog: &Catalog, it: &InstanceType, o: &Offering) -> Option<String> {
    catalog.spot_interruption(it, o).map(|s| s.band.to_string())
}

fn to_json(catalog: &Catalog, row: &Row<'_>, today: Option<NaiveDate>) -> Value {
    let it = row.instance_type;
    let accelerator = it.accelerator.as_ref().map(|a| {
        let mut v = json!({
            "manufacturer": a.manufacturer,
            "name": a.name,
            "count": a.count,
            "memory_mib": a.memory_mib,
            "resource": a.resource,
        });
        if let Some(fraction) = a.fraction {
            v["fraction"] = json!(fraction);
        }
        v
    });
    let offerings: Vec<Value> = row
        .offerings
        .iter()
        .map(|o| {
            let mut v = json!({
                "region": o.region,
                "zone": o.zone,
                "capacity_type": o.capacity_type.to_string(),
                "price_per_hour": o.price_per_hour,
                "available": o.available,
                "price_source": o.price_source,
                "price_as_of": o.price_as_of.to_string(),
                "estimate": o.estimate,
                "interruption": interruption(catalog, it, o),
            });
            if let Some(today) = today {
                v["price_age_days"] = json!(age_days(o.price_as_of, today));
            }
            v
        })
        .collect();
    json!({
        "cloud": it.cloud.to_string(),
        "name": it.name,
        "family": it.family,
        "vcpu": it.vcpu,
        "memory_mib": it.memory_mib,
        "arch": it.arch.to_string(),
        "accelerator": accelerator,
        "local_nvme_gb": it.local_nvme_gb,
        "network_gbps": it.network_gbps,
        "interconnect": it.interconnect.as_ref().map(|i| i.to_string()),
        "efa_count": it.efa_count,
        "max_pods": it.max_pods,
        "labels": it.labels(),
        "offerings": offerings,
    })
}

fn accelerator_summary(it: &InstanceType) -> String {
    match &it.accelerator {
        None => "-".to_owned(),
        Some(a) if a.fraction.is_some() => {
            format!(
                "{:.2} {} (vGPU) {}GiB",
                a.fraction.unwrap_or_default(),
                a.name,
                a.memory_mib / 1024
            )
        }
        Some(a) => format!("{}x {} {}GiB", a.count, a.name, a.memory_mib / 1024),
    }
}

/// `source (Nd)` for each price source of the row (per-zone keys such as `SKY-AWS:use1-az2`
/// shown once as `SKY-AWS`; `-o json` has each offering's own), with the age of its oldest
/// price.
fn sources(row: &Row<'_>, today: NaiveDate) -> String {
    let mut oldest: std::collections::BTreeMap<&str, i64> = std::collections::BTreeMap::new();
    for o in &row.offerings {
        let age = age_days(o.price_as_of, today);
        let key = o.price_source.split(':').next().unwrap_or(&o.price_source);
        let e = oldest.entry(key).or_insert(age);
        *e = (*e).max(age);
    }
    oldest
        .iter()
        .map(|(s, age)| format!("{s} ({age}d)"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn write_table(
    rows: &[Row<'_>],
    today: Option<NaiveDate>,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    const HEADERS: [&str; 9] = [
        "CLOUD",
        "INSTANCE TYPE",
        "ACCELERATOR",
        "VCPU",
        "MEMORY",
        "ON-DEMAND $/H",
        "SPOT $/H",
        "REGIONS",
        "ZONES",
    ];
    let mut table = match today {
        None => Table::new(HEADERS),
        Some(_) => {
            let [a, b, c, d, e, f, g, h, i] = HEADERS;
            Table::new([a, b, c, d, e, f, g, h, i, "PRICES FROM (AGE)"])
        }
    };
    for row in rows {
        let it = row.instance_type;
        let mut zones: Vec<&str> = row.offerings.iter().map(|o| o.zone.as_str()).collect();
        zones.sort_unstable();
        zones.dedup();
        let mut regions: Vec<&str> = row.offerings.iter().map(|o| o.region.as_str()).collect();
        regions.sort_unstable();
        regions.dedup();
        let cells = [
            it.cloud.to_string(),
            it.name.clone(),
            accelerator_summary(it),
            it.vcpu.to_string(),
            format!("{}GiB", it.memory_mib / 1024),
            cheapest_of(row, CapacityType::OnDemand).map_or("-".into(), money),
            cheapest_of(row, CapacityType::Spot).map_or("-".into(), money),
            regions.len().to_string(),
            zones.len().to_string(),
        ];
        match today {
            None => table.push(cells),
            Some(today) => {
                let [a, b, c, d, e, f, g, h, i] = cells;
                table.push([a, b, c, d, e, f, g, h, i, sources(row, today)]);
            }
        }
    }
    table.write(out)?;
    writeln!(out, "{} instance types", rows.len())?;
    Ok(())
}

/// One line of `catalog -o csv`: an instance type with one of its offerings. The field names
/// are the header, in this order; numbers are written as `Display` writes them.
#[derive(Serialize)]
struct CsvRecord<'a> {
    cloud: String,
    name: &'a str,
    family: &'a str,
    vcpu: u32,
    memory_mib: u64,
    accelerator: &'a str,
    accelerator_count: u32,
    accelerator_memory_mib: u64,
    region: &'a str,
    zone: &'a str,
    capacity_type: String,
    price_per_hour: String,
    available: bool,
    estimate: bool,
    price_source: &'a str,
    price_as_of: String,
    interruption: String,
}

/// The offerings as CSV (RFC 4180 quoting by the `csv` crate), one line per offering.
fn write_csv(catalog: &Catalog, rows: &[Row<'_>], out: &mut dyn Write) -> anyhow::Result<()> {
    let mut csv = csv::Writer::from_writer(out);
    for row in rows {
        let it = row.instance_type;
        let (accelerator, accelerator_count, accelerator_memory_mib) = match &it.accelerator {
            Some(a) => (a.name.as_str(), a.count, a.memory_mib),
            None => ("", 0, 0),
        };
        for o in &row.offerings {
            csv.serialize(CsvRecord {
                cloud: it.cloud.to_string(),
                name: &it.name,
                family: &it.family,
                vcpu: it.vcpu,
                memory_mib: it.memory_mib,
                accelerator,
                accelerator_count,
                accelerator_memory_mib,
                region: &o.region,
                zone: &o.zone,
                capacity_type: o.capacity_type.to_string(),
                // Display, not the csv crate's float format, so prices read as before (0.096).
                price_per_hour: o.price_per_hour.to_string(),
                available: o.available,
                estimate: o.estimate,
                price_source: &o.price_source,
                price_as_of: o.price_as_of.to_string(),
                interruption: interruption(catalog, it, o).unwrap_or_default(),
            })
            .context("writing CSV")?;
        }
    }
    csv.flush().context("writing CSV")?;
    Ok(())
}
