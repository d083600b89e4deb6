//! The catalog generator behind the `catalog-gen` binary: turns one cloud's `vms.csv` of a
//! SkyPilot catalog snapshot (`skypilot-org/skypilot-catalog`, `catalogs/v8/<cloud>/vms.csv`)
//! and the curated facts file of that cloud (`data/<cloud>.toml`) into the generated offerings
//! file `data/offerings/<cloud>.csv` (format: [`crate::generated`]).
//!
//! The curated facts decide which instance types exist and what they are (specs, GPU,
//! interconnect, EFA, NVMe, max pods, overhead, with their sources); the snapshot gives where
//! and at what price they are sold. The rules below are applied here and written into the
//! generated file's header. Output rows are sorted, so the same inputs give the same bytes.
//!
//! Only AWS is generated so far; GCP and Azure offerings stay curated in their facts files.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use chrono::NaiveDate;

use crate::generated::COLUMNS;
use crate::{Cloud, MAX_PRICE_PER_HOUR, PricingError};

/// Spot rows dropped as outliers: `(instance type, AZ ID, why)`. Their on-demand offering stays;
/// no substitute spot figure is invented.
pub const SPOT_OUTLIERS: &[(&str, &str, &str)] = &[(
    "p4d.24xlarge",
    "use1-az1",
    "$2.4655, 11% of on-demand, while the other us-east-1 AZs are $7.88-8.19 and the lowest p4d.24xlarge spot price of any other region is $4.5461: a stale or wrong row that would make an 8 x A100 beat every 1-GPU machine",
)];

/// Where the snapshot came from, for the generated file's header.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The repository, e.g. `skypilot-org/skypilot-catalog`.
    pub repo: String,
    /// The file inside it, e.g. `catalogs/v8/aws/vms.csv`.
    pub path: String,
    /// The commit the file was read at.
    pub commit: String,
    /// The day it was read (the snapshot carries no date of its own): the `as_of` of every
    /// generated price.
    pub read_on: NaiveDate,
}

/// What a generation produced besides the file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Summary {
    /// Snapshot rows read.
    pub rows_read: usize,
    /// Rows left out, by reason.
    pub dropped: BTreeMap<&'static str, usize>,
    /// Accelerator (GPU, Neuron, Gaudi) instance types in the snapshot.
    pub accelerator_types: BTreeSet<String>,
    /// Accelerator types of the snapshot left out because the facts file has no entry for them.
    pub left_out: BTreeSet<String>,
    /// Types of the snapshot whose offerings stay curated in the facts file.
    pub curated: BTreeSet<String>,
    /// Instance types written.
    pub types: usize,
    /// Regions written.
    pub regions: usize,
    /// On-demand offerings written (one per zone row).
    pub on_demand: usize,
    /// Spot offerings written.
    pub spot: usize,
}

/// One generated offerings file.
#[derive(Debug, Clone, PartialEq)]
pub struct Generated {
    /// The file's text.
    pub text: String,
    /// What went into it and what was left out.
    pub summary: Summary,
}

/// One zone row of the output: `(AZ ID, on-demand, spot)`.
type Row = (String, f64, Option<f64>);

/// Generates the offerings file of `cloud` from the facts file (`facts_name`, `facts_text`) and
/// the snapshot's `vms.csv` text. Only [`Cloud::Aws`] is supported.
pub fn generate(
    cloud: Cloud,
    facts_name: &str,
    facts_text: &str,
    vms_text: &str,
    snapshot: &Snapshot,
) -> Result<Generated, PricingError> {
    let vms = snapshot.path.as_str();
    let err = |line: usize, message: String| PricingError::Data {
        file: vms.to_owned(),
        line,
        message,
    };
    if cloud != Cloud::Aws {
        return Err(err(
            0,
            format!("generating {cloud} offerings is not supported yet (only aws)"),
        ));
    }
    let facts = crate::Catalog::parse(facts_name, facts_text)?;
    let types: BTreeMap<&str, &crate::InstanceType> = facts
        .instance_types
        .iter()
        .filter(|t| t.cloud == cloud)
        .map(|t| (t.name.as_str(), t))
        .collect();

    let mut reader = csv::ReaderBuilder::new().from_reader(vms_text.as_bytes());
    let headers = reader.headers().map_err(|e| err(1, e.to_string()))?.clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| err(1, format!("no column {name}")))
    };
    let (c_type, c_acc, c_vcpu, c_mem) = (
        col("InstanceType")?,
        col("AcceleratorName")?,
        col("vCPUs")?,
        col("MemoryGiB")?,
    );
    let (c_price, c_spot, c_region, c_az) = (
        col("Price")?,
        col("SpotPrice")?,
        col("Region")?,
        col("AvailabilityZone")?,
    );

    let mut summary = Summary::default();
    let mut rows: BTreeMap<(String, String, String), Row> = BTreeMap::new();
    for (i, record) in reader.records().enumerate() {
        let n = i + 2;
        let r = record.map_err(|e| err(n, e.to_string()))?;
        summary.rows_read += 1;
        let field = |c: usize| r.get(c).unwrap_or("").trim();
        let name = field(c_type);
        let accelerator = !field(c_acc).is_empty();
        if accelerator {
            summary.accelerator_types.insert(name.to_owned());
        }
        let Some(t) = types.get(name) else {
            if accelerator {
                summary.left_out.insert(name.to_owned());
            }
            *summary
                .dropped
                .entry("type not in the facts file")
                .or_default() += 1;
            continue;
        };
        if !t.offerings.is_empty() {
            summary.curated.insert(name.to_owned());
            *summary
                .dropped
                .entry("type with curated offerings")
                .or_default() += 1;
            continue;
        }
        check_spec(t, field(c_vcpu), field(c_mem)).map_err(|m| err(n, m))?;
        let (region, az) = (field(c_region), field(c_az));
        let Some(letter) = zone_letter(az) else {
            *summary
                .dropped
                .entry("Local Zone or Wavelength Zone")
                .or_default() += 1;
            continue;
        };
        let on_demand = match parse_price(field(c_price)).map_err(|m| err(n, m))? {
            Some(p) => p,
            None => {
                *summary.dropped.entry("no on-demand price").or_default() += 1;
                continue;
            }
        };
        let mut spot = parse_price(field(c_spot)).map_err(|m| err(n, m))?;
        if spot.is_some_and(|s| cents4(s) >= cents4(on_demand)) {
            *summary
                .dropped
                .entry("spot figure not below on-demand (kept on-demand only)")
                .or_default() += 1;
            spot = None;
        }
        if spot.is_some() && SPOT_OUTLIERS.iter().any(|&(t, z, _)| t == name && z == az) {
            *summary
                .dropped
                .entry("spot outlier (kept on-demand only)")
                .or_default() += 1;
            spot = None;
        }
        let zone = format!("{region}{letter}");
        let key = (name.to_owned(), region.to_owned(), zone);
        if rows.insert(key, (az.to_owned(), on_demand, spot)).is_some() {
            return Err(err(n, format!("{name} is listed twice for {az}")));
        }
    }

    let mut body = String::new();
    let mut written_types = BTreeSet::new();
    let mut regions = BTreeSet::new();
    for ((name, region, zone), (az, od, spot)) in &rows {
        written_types.insert(name.as_str());
        regions.insert(region.as_str());
        summary.on_demand += 1;
        let spot = spot.map_or(String::new(), |s| {
            summary.spot += 1;
            s.to_string()
        });
        let _ = writeln!(body, "{name},{region},{zone},{az},{od},{spot}");
    }
    summary.types = written_types.len();
    summary.regions = regions.len();
    let text = format!(
        "{}{COLUMNS}\n{body}",
        header(cloud, facts_name, snapshot, &summary)
    );
    Ok(Generated { text, summary })
}

/// The letter of a regular AZ ID's zone name (`use1-az1` -> `a`); `None` for a Local Zone or
/// Wavelength Zone ID, which has a location part (`usw2-lax1-az1`, `use1-wl1-bos-wlz1`).
pub fn zone_letter(az: &str) -> Option<char> {
    let (_, n) = az.split_once('-')?;
    let n: u8 = n.strip_prefix("az")?.parse().ok()?;
    (1..=26).contains(&n).then(|| char::from(b'a' + n - 1))
}

/// A price at the snapshot's spot precision (4 decimals), as an integer.
fn cents4(p: f64) -> i64 {
    (p * 10_000.0).round() as i64
}

/// An optional snapshot price: empty is `None`.
fn parse_price(s: &str) -> Result<Option<f64>, String> {
    if s.is_empty() {
        return Ok(None);
    }
    let p: f64 = s
        .parse()
        .map_err(|_| format!("price \"{s}\" is not a number"))?;
    if !(p.is_finite() && p > 0.0 && p <= MAX_PRICE_PER_HOUR) {
        return Err(format!(
            "price {s} is not above 0 and at most {MAX_PRICE_PER_HOUR} dollars per hour"
        ));
    }
    Ok(Some(p))
}

/// The snapshot's vCPUs and memory must agree with the curated facts.
fn check_spec(t: &crate::InstanceType, vcpu: &str, memory_gib: &str) -> Result<(), String> {
    let vcpu: f64 = vcpu.parse().map_err(|_| format!("vCPUs \"{vcpu}\""))?;
    let gib: f64 = memory_gib
        .parse()
        .map_err(|_| format!("MemoryGiB \"{memory_gib}\""))?;
    if vcpu != f64::from(t.vcpu) || (gib * 1024.0).round() as u64 != t.memory_mib {
        return Err(format!(
            "{} has {vcpu} vCPUs and {gib} GiB in the snapshot but {} vCPUs and {} MiB in the facts file",
            t.name, t.vcpu, t.memory_mib
        ));
    }
    Ok(())
}

/// The generated file's header: provenance, rules, what was left out, and the metadata lines.
fn header(cloud: Cloud, facts_name: &str, s: &Snapshot, summary: &Summary) -> String {
    let mut h = String::new();
    let _ = writeln!(
        h,
        "# GENERATED by catalog-gen (pricing/src/generate.rs); do not edit. Refresh:"
    );
    let _ = writeln!(
        h,
        "#   cargo run -p quartermaster-pricing --bin catalog-gen -- --skypilot DIR --commit SHA --read-on YYYY-MM-DD"
    );
    let _ = writeln!(h, "#");
    let _ = writeln!(
        h,
        "# SOURCE  {} {} at commit {}, read on {}.",
        s.repo, s.path, s.commit, s.read_on
    );
    let _ = writeln!(
        h,
        "#   The snapshot carries no date of its own: as_of is the day it was read, an upper bound"
    );
    let _ = writeln!(
        h,
        "#   on when a price held, not the day it was observed. Specs, GPU, interconnect, EFA, NVMe,"
    );
    let _ = writeln!(
        h,
        "#   max pods, overhead and their sources are the curated facts in data/{facts_name}."
    );
    let _ = writeln!(h, "#");
    let _ = writeln!(h, "# RULES");
    for rule in [
        "types: only instance types with an entry in the facts file and no curated offerings there.",
        "zones: the snapshot gives AZ IDs (use1-az1); labels carry zone names. azN is mapped to the",
        "  region + the N-th letter (use1-az1 -> us-east-1a, usw2-az4 -> us-west-2d). ASSUMPTION: AWS",
        "  maps names to IDs per account; re-map with `aws ec2 describe-availability-zones`.",
        "Local Zones and Wavelength Zones (AZ IDs with a location part, usw2-lax1-az1) are left out.",
        "on-demand: the row's Price (the region's list price) in every AZ the snapshot lists.",
        "spot: the row's SpotPrice for its AZ; empty is no spot figure, and so is a spot price not",
        "  below the on-demand price at the snapshot's 4-decimal precision (spot equal to on-demand).",
    ] {
        let _ = writeln!(h, "#   {rule}");
    }
    for (t, z, why) in SPOT_OUTLIERS {
        let _ = writeln!(h, "#   outlier: no spot offering for {t} in {z}: {why}.");
    }
    let _ = writeln!(h, "#");
    let _ = writeln!(
        h,
        "# RUN  {} rows read; {} types, {} regions, {} on-demand and {} spot offerings written.",
        summary.rows_read, summary.types, summary.regions, summary.on_demand, summary.spot
    );
    for (why, n) in &summary.dropped {
        let _ = writeln!(h, "#   {n} rows: {why}");
    }
    let list = |set: &BTreeSet<String>| {
        if set.is_empty() {
            "(none)".to_owned()
        } else {
            set.iter().cloned().collect::<Vec<_>>().join(" ")
        }
    };
    let _ = writeln!(
        h,
        "#   accelerator types in the snapshot left out (no entry in the facts file): {}",
        list(&summary.left_out)
    );
    let _ = writeln!(
        h,
        "#   types in the snapshot whose offerings stay curated in the facts file: {}",
        list(&summary.curated)
    );
    let _ = writeln!(h, "#! cloud = {cloud}");
    let _ = writeln!(h, "#! source = SKY-{}", cloud.as_str().to_uppercase());
    let _ = writeln!(h, "#! as_of = {}", s.read_on);
    let _ = writeln!(
        h,
        "#! accelerator_types = {}",
        list(&summary.accelerator_types)
    );
    let _ = writeln!(h, "#! left_out = {}", list(&summary.left_out));
    h
}
