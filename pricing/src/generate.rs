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
//! AWS, GCP and Azure are generated the same way; each cloud's `vms.csv` has its own shape
//! (AWS: AZ IDs; GCP: zone names, and GPUs of accelerator-optimized machine types priced in
//! rows of their own, see [`GCP_GPU_FAMILIES`]; Azure: regions without zones, see
//! [`AZURE_ZONES`]), and the rules of each are written into the header.

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
    /// When the input is an extract of the file rather than the whole file: which rows it holds
    /// (written into the header).
    pub extract: Option<String>,
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
    /// Types of the snapshot whose offerings stay curated in the facts file in some region.
    pub curated: BTreeSet<String>,
    /// GCP: GPU models with rows in the snapshot that no accelerator-optimized family is priced
    /// with (GPUs attached to N1 machine types), left out.
    pub other_accelerators: BTreeSet<String>,
    /// Types whose memory in the snapshot differs from the facts file's (within
    /// [`MEMORY_TOLERANCE`]; the facts file's figure stands): `"<type> <snapshot> GiB (facts: <facts> GiB)"`.
    pub memory_disagreements: BTreeSet<String>,
    /// Types left out because the snapshot's on-demand price is off their curated price (see
    /// [`CURATED_PRICE_TOLERANCE`]): `"<type> <price> in <zone> (curated <price>, <source>)"`.
    pub disputed: BTreeSet<String>,
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

/// GCP's accelerator-optimized machine families, whose GPUs are part of the machine type:
/// `(machine type prefix, SkyPilot GPU name)`. SkyPilot's GCP `vms.csv` lists such a machine's
/// host row (its vCPUs and memory, `AcceleratorName` empty, priced for vCPUs and memory only)
/// and, apart, GPU rows (`InstanceType` empty; `AcceleratorName`, `AcceleratorCount`, zone,
/// price), as GCP bills them; the machine costs host + the GPU row of its GPU model and count in
/// the same zone.
pub const GCP_GPU_FAMILIES: &[(&str, &str)] = &[
    ("a2-highgpu-", "A100"),
    ("a2-megagpu-", "A100"),
    ("a2-ultragpu-", "A100-80GB"),
    ("a3-highgpu-", "H100"),
    ("a3-edgegpu-", "H100"),
    ("a3-megagpu-", "H100-MEGA"),
    ("a3-ultragpu-", "H200"),
    ("a4-highgpu-", "B200"),
    ("g2-standard-", "L4"),
];

/// A GCP GPU row whose per-GPU on-demand price is off the median per-GPU price of the same GPU
/// model's rows (all counts) in its zone by more than this fraction is taken as wrong.
pub const GCP_GPU_PRICE_TOLERANCE: f64 = 0.10;

/// Azure zones offered per region: SkyPilot's Azure `vms.csv` has no zones (Azure prices per
/// region), so each region's row is offered in `<region>-1` .. `<region>-AZURE_ZONES`, the
/// assumption `data/azure.toml` makes for its curated types.
pub const AZURE_ZONES: u8 = 3;

/// The SkyPilot GPU name whose rows complete the price of GCP machine type `name`, if it is of
/// an accelerator-optimized family ([`GCP_GPU_FAMILIES`]).
pub fn gcp_gpu_of(name: &str) -> Option<&'static str> {
    GCP_GPU_FAMILIES
        .iter()
        .find(|(prefix, _)| name.starts_with(prefix))
        .map(|&(_, gpu)| gpu)
}

/// Output rows by `(instance type, region, zone)`.
type Rows = BTreeMap<(String, String, String), Row>;

/// An error of the snapshot file at a line.
type ErrAt<'a> = &'a dyn Fn(usize, String) -> PricingError;

/// Counts a left-out row under `why`.
fn drop_row(summary: &mut Summary, why: &'static str) {
    *summary.dropped.entry(why).or_default() += 1;
}

/// Which part of a cloud's offerings a generation writes: the accelerator types (`<cloud>.csv`)
/// or the CPU types (`<cloud>-cpu.csv`). One snapshot gives both files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// Types with an accelerator (GPU, Neuron, Gaudi).
    Accelerators,
    /// Types without one: the general-purpose, compute and memory families users put next to
    /// GPUs. They are not generated in the facts file's default region, whose CPU types stay
    /// curated (the default-region catalog benchmarks and tests are pinned against keeps its
    /// CPU types and prices).
    Cpu,
}

impl Part {
    /// Both parts, in file order.
    pub const ALL: [Part; 2] = [Part::Accelerators, Part::Cpu];

    /// The generated file's name under `data/offerings/`.
    pub fn file_name(self, cloud: Cloud) -> String {
        match self {
            Part::Accelerators => format!("{cloud}.csv"),
            Part::Cpu => format!("{cloud}-cpu.csv"),
        }
    }

    /// The `#! part` metadata value.
    pub const fn as_str(self) -> &'static str {
        match self {
            Part::Accelerators => "accelerators",
            Part::Cpu => "cpu",
        }
    }

    /// Whether type `t` belongs to this part.
    pub fn holds(self, t: &crate::InstanceType) -> bool {
        t.accelerator.is_some() == (self == Part::Accelerators)
    }
}

/// What a generation takes from the facts file.
struct Want<'t> {
    types: BTreeMap<&'t str, &'t crate::InstanceType>,
    part: Part,
    default_region: Option<&'t str>,
}

/// The facts entry of a snapshot row's type when its offerings are to be generated; otherwise
/// `None`, the row counted as left out (an accelerator type without facts is listed).
fn wanted<'t>(
    want: &Want<'t>,
    name: &str,
    region: &str,
    accelerator: bool,
    summary: &mut Summary,
) -> Option<&'t crate::InstanceType> {
    let Some(&t) = want.types.get(name) else {
        if accelerator && want.part == Part::Accelerators {
            summary.left_out.insert(name.to_owned());
        }
        drop_row(summary, "type not in the facts file");
        return None;
    };
    if !want.part.holds(t) {
        drop_row(
            summary,
            match want.part {
                Part::Accelerators => "CPU type (in the -cpu file)",
                Part::Cpu => "accelerator type (in the accelerators file)",
            },
        );
        return None;
    }
    if want.part == Part::Cpu && want.default_region == Some(region) {
        drop_row(
            summary,
            "CPU type in the default region (the curated CPU types stand there)",
        );
        return None;
    }
    Some(t)
}

/// A spot figure not below the on-demand price (at the snapshot's 4-decimal precision) is no
/// spot figure.
fn spot_below(on_demand: f64, spot: Option<f64>, summary: &mut Summary) -> Option<f64> {
    if spot.is_some_and(|s| cents4(s) >= cents4(on_demand)) {
        drop_row(
            summary,
            "spot figure not below on-demand (kept on-demand only)",
        );
        return None;
    }
    spot
}

/// Inserts a row; a repeat of the same key keeps the lower prices (so the output does not
/// depend on the row order) and is counted.
fn insert_lenient(rows: &mut Rows, key: (String, String, String), row: Row, summary: &mut Summary) {
    match rows.get_mut(&key) {
        None => {
            rows.insert(key, row);
        }
        Some(old) => {
            drop_row(
                summary,
                "type listed twice for a zone or region (the lower prices kept)",
            );
            if (row.1, row.2.unwrap_or(f64::MAX)) < (old.1, old.2.unwrap_or(f64::MAX)) {
                *old = row;
            }
        }
    }
}

/// Generates the offerings file of `cloud` from the facts file (`facts_name`, `facts_text`) and
/// the snapshot's `vms.csv` text of that cloud.
pub fn generate(
    cloud: Cloud,
    part: Part,
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
    let facts = crate::Catalog::parse(facts_name, facts_text)?;
    let want = Want {
        types: facts
            .instance_types
            .iter()
            .filter(|t| t.cloud == cloud)
            .map(|t| (t.name.as_str(), t))
            .collect(),
        part,
        default_region: facts.default_regions.get(&cloud).map(String::as_str),
    };

    let mut reader = csv::ReaderBuilder::new().from_reader(vms_text.as_bytes());
    let headers = reader.headers().map_err(|e| err(1, e.to_string()))?.clone();
    let col = |name: &str| {
        headers
            .iter()
            .position(|h| h == name)
            .ok_or_else(|| err(1, format!("no column {name}")))
    };
    let cols = Cols {
        name: col("InstanceType")?,
        acc: col("AcceleratorName")?,
        vcpu: col("vCPUs")?,
        mem: col("MemoryGiB")?,
        price: col("Price")?,
        spot: col("SpotPrice")?,
        region: col("Region")?,
    };
    let mut records = Vec::new();
    for (i, record) in reader.records().enumerate() {
        records.push((i + 2, record.map_err(|e| err(i + 2, e.to_string()))?));
    }
    let mut summary = Summary {
        rows_read: records.len(),
        ..Summary::default()
    };
    let rows = match cloud {
        Cloud::Aws => aws_rows(
            &records,
            &cols,
            col("AvailabilityZone")?,
            &want,
            &mut summary,
            &err,
        )?,
        Cloud::Gcp => gcp_rows(
            &records,
            &cols,
            col("AvailabilityZone")?,
            col("AcceleratorCount")?,
            &want,
            &mut summary,
            &err,
        )?,
        Cloud::Azure => azure_rows(&records, &cols, &want, &mut summary, &err)?,
    };

    let rows = settle_curated(rows, &want, &mut summary);

    let mut body = String::new();
    let mut written_types = BTreeSet::new();
    let mut regions = BTreeSet::new();
    for ((name, region, zone), (zone_id, od, spot)) in &rows {
        written_types.insert(name.as_str());
        regions.insert(region.as_str());
        summary.on_demand += 1;
        let spot = spot.map_or(String::new(), |s| {
            summary.spot += 1;
            s.to_string()
        });
        let _ = writeln!(body, "{name},{region},{zone},{zone_id},{od},{spot}");
    }
    summary.types = written_types.len();
    summary.regions = regions.len();
    let text = format!(
        "{}{COLUMNS}\n{body}",
        header(cloud, part, facts_name, snapshot, &summary)
    );
    Ok(Generated { text, summary })
}

/// How far the snapshot's on-demand price of a type may be from the facts file's curated price
/// in a region both price before the snapshot's figures for that type are taken as wrong.
pub const CURATED_PRICE_TOLERANCE: f64 = 0.25;

/// Curated offerings stand in their regions: the snapshot's rows there are left out. Where the
/// snapshot's on-demand price in such a region is off the curated on-demand price by more than
/// [`CURATED_PRICE_TOLERANCE`], two sources disagree on what the type costs and the snapshot's
/// figures for it are not taken anywhere: every row of the type is left out and the type listed
/// as disputed (its curated offerings remain).
fn settle_curated(mut rows: Rows, want: &Want<'_>, summary: &mut Summary) -> Rows {
    let mut disputed: BTreeMap<&str, String> = BTreeMap::new();
    for ((name, region, zone), (_, od, _)) in &rows {
        let t = want.types[name.as_str()];
        let curated = t
            .offerings
            .iter()
            .filter(|o| o.region == *region && o.capacity_type == crate::CapacityType::OnDemand)
            .map(|o| o.price_per_hour)
            .reduce(f64::min);
        if let Some(c) = curated
            && (od - c).abs() > CURATED_PRICE_TOLERANCE * c
        {
            disputed.entry(t.name.as_str()).or_insert_with(|| {
                let source = t
                    .offerings
                    .iter()
                    .find(|o| o.region == *region)
                    .map_or("", |o| o.price_source.as_str());
                format!("{name} {od} in {zone} (curated {c}, {source})")
            });
        }
    }
    rows.retain(|(name, region, _), _| {
        if disputed.contains_key(name.as_str()) {
            drop_row(
                summary,
                "type whose snapshot price is disputed by its curated price (all its rows left out)",
            );
            return false;
        }
        if want.types[name.as_str()].offerings.iter().any(|o| o.region == *region) {
            summary.curated.insert(name.clone());
            drop_row(summary, "type with curated offerings in the row's region");
            return false;
        }
        true
    });
    summary.disputed = disputed.into_values().collect();
    rows
}

/// Column positions common to every cloud's `vms.csv`.
struct Cols {
    name: usize,
    acc: usize,
    vcpu: usize,
    mem: usize,
    price: usize,
    spot: usize,
    region: usize,
}

/// A field of a record, trimmed.
fn field(r: &csv::StringRecord, c: usize) -> &str {
    r.get(c).unwrap_or("").trim()
}

/// AWS: one row per instance type and AZ ID.
fn aws_rows(
    records: &[(usize, csv::StringRecord)],
    c: &Cols,
    c_az: usize,
    want: &Want<'_>,
    summary: &mut Summary,
    err: ErrAt<'_>,
) -> Result<Rows, PricingError> {
    let mut rows = Rows::new();
    for (n, r) in records {
        let n = *n;
        let name = field(r, c.name);
        let accelerator = !field(r, c.acc).is_empty();
        if accelerator && want.part == Part::Accelerators {
            summary.accelerator_types.insert(name.to_owned());
        }
        let Some(t) = wanted(want, name, field(r, c.region), accelerator, summary) else {
            continue;
        };
        check_spec(t, field(r, c.vcpu), field(r, c.mem), summary).map_err(|m| err(n, m))?;
        let (region, az) = (field(r, c.region), field(r, c_az));
        let Some(letter) = zone_letter(az) else {
            drop_row(summary, "Local Zone or Wavelength Zone");
            continue;
        };
        let Some(on_demand) = parse_price(field(r, c.price)).map_err(|m| err(n, m))? else {
            drop_row(summary, "no on-demand price");
            continue;
        };
        let spot = parse_price(field(r, c.spot)).map_err(|m| err(n, m))?;
        let mut spot = spot_below(on_demand, spot, summary);
        if spot.is_some() && SPOT_OUTLIERS.iter().any(|&(t, z, _)| t == name && z == az) {
            drop_row(summary, "spot outlier (kept on-demand only)");
            spot = None;
        }
        let zone = format!("{region}{letter}");
        let key = (name.to_owned(), region.to_owned(), zone);
        if rows.insert(key, (az.to_owned(), on_demand, spot)).is_some() {
            return Err(err(n, format!("{name} is listed twice for {az}")));
        }
    }
    Ok(rows)
}

/// One GCP GPU row: `(on-demand, spot)`.
type GpuPrice = (Option<f64>, Option<f64>);

/// GCP: host rows per machine type and zone; accelerator-optimized types priced host + GPU row.
fn gcp_rows(
    records: &[(usize, csv::StringRecord)],
    c: &Cols,
    c_zone: usize,
    c_count: usize,
    want: &Want<'_>,
    summary: &mut Summary,
    err: ErrAt<'_>,
) -> Result<Rows, PricingError> {
    // GPU rows by (GPU name, count, zone); a key seen twice with different prices is dropped.
    let mut gpus: BTreeMap<(String, u32, String), GpuPrice> = BTreeMap::new();
    let mut conflicting = BTreeSet::new();
    let mut hosts = Vec::new();
    for (n, r) in records {
        let n = *n;
        if !field(r, c.name).is_empty() {
            hosts.push((n, r));
            continue;
        }
        let gpu = field(r, c.acc);
        if gpu.starts_with("tpu-") {
            drop_row(summary, "TPU rows (TPUs are not modelled)");
            continue;
        }
        if !GCP_GPU_FAMILIES.iter().any(|&(_, g)| g == gpu) {
            summary.other_accelerators.insert(gpu.to_owned());
            drop_row(
                summary,
                "GPU rows of GPUs no accelerator-optimized family uses (attached to N1; not modelled)",
            );
            continue;
        }
        let count_text = field(r, c_count);
        let count: f64 = count_text
            .parse()
            .map_err(|_| err(n, format!("AcceleratorCount \"{count_text}\"")))?;
        if !(count >= 1.0 && count.fract() == 0.0 && count <= 64.0) {
            return Err(err(
                n,
                format!("AcceleratorCount {count_text} is not a GPU count"),
            ));
        }
        let price = (
            parse_price_or_zero(field(r, c.price)).map_err(|m| err(n, m))?,
            parse_price_or_zero(field(r, c.spot)).map_err(|m| err(n, m))?,
        );
        let key = (gpu.to_owned(), count as u32, field(r, c_zone).to_owned());
        match gpus.get(&key) {
            None => {
                gpus.insert(key, price);
            }
            Some(old) if *old == price => drop_row(summary, "GPU row listed twice"),
            Some(_) => {
                conflicting.insert(key);
            }
        }
    }
    for key in conflicting {
        gpus.remove(&key);
        drop_row(
            summary,
            "GPU row listed twice with different prices (both left out)",
        );
    }
    // Per GPU model and zone, every count's per-GPU on-demand price against their median.
    let mut per_gpu: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
    for ((gpu, count, zone), (od, _)) in &gpus {
        if let Some(p) = od {
            per_gpu
                .entry((gpu.as_str(), zone.as_str()))
                .or_default()
                .push(p / f64::from(*count));
        }
    }
    let medians: BTreeMap<(String, String), f64> = per_gpu
        .into_iter()
        .map(|((g, z), mut v)| {
            v.sort_by(f64::total_cmp);
            let m = if v.len() % 2 == 1 {
                v[v.len() / 2]
            } else {
                (v[v.len() / 2 - 1] + v[v.len() / 2]) / 2.0
            };
            ((g.to_owned(), z.to_owned()), m)
        })
        .collect();
    gpus.retain(|(gpu, count, zone), (od, _)| {
        let Some(p) = od else { return true };
        let median = medians[&(gpu.clone(), zone.clone())];
        let off = ((*p / f64::from(*count)) - median).abs() > GCP_GPU_PRICE_TOLERANCE * median;
        if off {
            drop_row(
                summary,
                "GPU row whose per-GPU price is off its zone's median for that GPU by more than 10% (left out)",
            );
        }
        !off
    });

    let mut rows = Rows::new();
    for (n, r) in hosts {
        let name = field(r, c.name);
        let family_gpu = gcp_gpu_of(name);
        let accelerator = family_gpu.is_some() || !field(r, c.acc).is_empty();
        if accelerator && want.part == Part::Accelerators {
            summary.accelerator_types.insert(name.to_owned());
        }
        let Some(t) = wanted(want, name, field(r, c.region), accelerator, summary) else {
            continue;
        };
        check_spec(t, field(r, c.vcpu), field(r, c.mem), summary).map_err(|m| err(n, m))?;
        let (region, zone) = (field(r, c.region), field(r, c_zone));
        if !crate::zone_matches_region(Cloud::Gcp, region, zone) {
            drop_row(summary, "zone not of the form <region>-<letter>");
            continue;
        }
        let Some(host) = parse_price_or_zero(field(r, c.price)).map_err(|m| err(n, m))? else {
            drop_row(summary, "no on-demand price");
            continue;
        };
        let host_spot = parse_price_or_zero(field(r, c.spot)).map_err(|m| err(n, m))?;
        let (on_demand, spot) = match (&t.accelerator, family_gpu) {
            (None, _) => (host, host_spot),
            (Some(a), Some(gpu)) => {
                let Some(&(gpu_od, gpu_spot)) =
                    gpus.get(&(gpu.to_owned(), a.count, zone.to_owned()))
                else {
                    drop_row(
                        summary,
                        "accelerator-optimized host row without its GPU row in the zone",
                    );
                    continue;
                };
                let Some(gpu_od) = gpu_od else {
                    drop_row(summary, "GPU row without an on-demand price");
                    continue;
                };
                let sum = |a: f64, b: f64| ((a + b) * 1e6).round() / 1e6;
                (
                    sum(host, gpu_od),
                    host_spot.zip(gpu_spot).map(|(h, g)| sum(h, g)),
                )
            }
            (Some(_), None) => {
                drop_row(
                    summary,
                    "GPU type of no accelerator-optimized family (its GPU price is not in its row)",
                );
                continue;
            }
        };
        if on_demand > MAX_PRICE_PER_HOUR {
            return Err(err(n, format!("{name} costs {on_demand} in {zone}")));
        }
        let spot = spot_below(on_demand, spot, summary);
        let key = (name.to_owned(), region.to_owned(), zone.to_owned());
        insert_lenient(&mut rows, key, (zone.to_owned(), on_demand, spot), summary);
    }
    Ok(rows)
}

/// Azure: one row per instance type and region, offered in [`AZURE_ZONES`] zones.
fn azure_rows(
    records: &[(usize, csv::StringRecord)],
    c: &Cols,
    want: &Want<'_>,
    summary: &mut Summary,
    err: ErrAt<'_>,
) -> Result<Rows, PricingError> {
    let mut per_region = Rows::new();
    for (n, r) in records {
        let n = *n;
        let name = field(r, c.name);
        let accelerator = !field(r, c.acc).is_empty();
        if accelerator && want.part == Part::Accelerators {
            summary.accelerator_types.insert(name.to_owned());
        }
        let Some(t) = wanted(want, name, field(r, c.region), accelerator, summary) else {
            continue;
        };
        check_spec(t, field(r, c.vcpu), field(r, c.mem), summary).map_err(|m| err(n, m))?;
        let region = field(r, c.region);
        if region.is_empty() || !region.chars().all(|ch| ch.is_ascii_alphanumeric()) {
            drop_row(summary, "region not an Azure region name");
            continue;
        }
        let Some(on_demand) = parse_price_or_zero(field(r, c.price)).map_err(|m| err(n, m))? else {
            drop_row(summary, "no on-demand price");
            continue;
        };
        let spot = parse_price_or_zero(field(r, c.spot)).map_err(|m| err(n, m))?;
        let spot = spot_below(on_demand, spot, summary);
        let key = (name.to_owned(), region.to_owned(), String::new());
        insert_lenient(
            &mut per_region,
            key,
            (region.to_owned(), on_demand, spot),
            summary,
        );
    }
    let mut rows = Rows::new();
    for ((name, region, _), row) in per_region {
        for z in 1..=AZURE_ZONES {
            rows.insert(
                (name.clone(), region.clone(), format!("{region}-{z}")),
                row.clone(),
            );
        }
    }
    Ok(rows)
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

/// An optional GCP or Azure snapshot price: empty or 0 (SkyPilot's "no price") is `None`.
fn parse_price_or_zero(s: &str) -> Result<Option<f64>, String> {
    if s.parse::<f64>().is_ok_and(|p| p == 0.0) {
        return Ok(None);
    }
    parse_price(s)
}

/// How far the snapshot's memory figure may be from the facts file's before the row is taken
/// as naming a different machine: closer, the facts file's figure stands and the disagreement is
/// listed in the header.
pub const MEMORY_TOLERANCE: f64 = 0.10;

/// The snapshot's vCPUs must agree with the curated facts, and its memory within
/// [`MEMORY_TOLERANCE`]; a smaller memory disagreement keeps the facts file's figure (the one with
/// a cited source) and is listed in `summary`.
fn check_spec(
    t: &crate::InstanceType,
    vcpu: &str,
    memory_gib: &str,
    summary: &mut Summary,
) -> Result<(), String> {
    let vcpu: f64 = vcpu.parse().map_err(|_| format!("vCPUs \"{vcpu}\""))?;
    let gib: f64 = memory_gib
        .parse()
        .map_err(|_| format!("MemoryGiB \"{memory_gib}\""))?;
    let mib = (gib * 1024.0).round();
    let facts_mib = t.memory_mib as f64;
    if vcpu != f64::from(t.vcpu) || (mib - facts_mib).abs() > MEMORY_TOLERANCE * facts_mib {
        return Err(format!(
            "{} has {vcpu} vCPUs and {gib} GiB in the snapshot but {} vCPUs and {} MiB in the facts file",
            t.name, t.vcpu, t.memory_mib
        ));
    }
    if mib != facts_mib {
        summary.memory_disagreements.insert(format!(
            "{} {gib} GiB (facts: {} GiB)",
            t.name,
            facts_mib / 1024.0
        ));
    }
    Ok(())
}

/// The generated file's header: provenance, rules, what was left out, and the metadata lines.
fn header(cloud: Cloud, part: Part, facts_name: &str, s: &Snapshot, summary: &Summary) -> String {
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
    if let Some(e) = &s.extract {
        let _ = writeln!(h, "#   INPUT: an extract of that file: {e}.");
    }
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
    for rule in rules(cloud, part) {
        let _ = writeln!(h, "#   {rule}");
    }
    if cloud == Cloud::Aws && part == Part::Accelerators {
        for (t, z, why) in SPOT_OUTLIERS {
            let _ = writeln!(h, "#   outlier: no spot offering for {t} in {z}: {why}.");
        }
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
    let joined =
        |set: &BTreeSet<String>, sep: &str| set.iter().cloned().collect::<Vec<_>>().join(sep);
    let list = |set: &BTreeSet<String>| {
        if set.is_empty() {
            "(none)".to_owned()
        } else {
            joined(set, " ")
        }
    };
    let _ = writeln!(
        h,
        "#   accelerator types in the snapshot left out (no entry in the facts file): {}",
        list(&summary.left_out)
    );
    let _ = writeln!(
        h,
        "#   types in the snapshot whose offerings stay curated in the facts file (in some region): {}",
        list(&summary.curated)
    );
    if !summary.disputed.is_empty() {
        let _ = writeln!(
            h,
            "#   types left out, the snapshot's price off their curated price by more than {}% (the curated offerings stand): {}",
            CURATED_PRICE_TOLERANCE * 100.0,
            joined(&summary.disputed, "; ")
        );
    }
    if !summary.memory_disagreements.is_empty() {
        let _ = writeln!(
            h,
            "#   memory differing from the facts file, whose figure (with its spec_source) stands: {}",
            joined(&summary.memory_disagreements, "; ")
        );
    }
    if cloud == Cloud::Gcp {
        let _ = writeln!(
            h,
            "#   GPU models of the snapshot no accelerator-optimized family uses (N1-attached, not modelled): {}",
            list(&summary.other_accelerators)
        );
    }
    let _ = writeln!(h, "#! cloud = {cloud}");
    let _ = writeln!(h, "#! part = {}", part.as_str());
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

/// The generation rules of `cloud`, one header line each (continuations indented).
fn rules(cloud: Cloud, part: Part) -> Vec<String> {
    let mut r: Vec<String> = vec![
        "types: only instance types with an entry in the facts file, in the regions where it has no"
            .to_owned(),
        "  curated offerings; a type whose snapshot on-demand price is off its curated one by more"
            .to_owned(),
        format!(
            "  than {}% in a region both price is left out everywhere (two sources disagree).",
            CURATED_PRICE_TOLERANCE * 100.0
        ),
    ];
    r.extend(
        match part {
            Part::Accelerators => {
                &["part: the accelerator types; the CPU types are in the -cpu file."][..]
            }
            Part::Cpu => &[
                "part: the CPU types (no accelerator), outside the facts file's default region, where the",
                "  curated CPU types stand; the accelerator types are in the file without -cpu.",
            ][..],
        }
        .iter()
        .map(|l| (*l).to_owned()),
    );
    match cloud {
        Cloud::Aws => r.extend(
            [
                "zones: the snapshot gives AZ IDs (use1-az1); labels carry zone names. azN is mapped to the",
                "  region + the N-th letter (use1-az1 -> us-east-1a, usw2-az4 -> us-west-2d). ASSUMPTION: AWS",
                "  maps names to IDs per account; re-map with `aws ec2 describe-availability-zones`.",
                "Local Zones and Wavelength Zones (AZ IDs with a location part, usw2-lax1-az1) are left out.",
                "on-demand: the row's Price (the region's list price) in every AZ the snapshot lists.",
                "spot: the row's SpotPrice for its AZ; empty is no spot figure, and so is a spot price not",
                "  below the on-demand price at the snapshot's 4-decimal precision (spot equal to on-demand).",
            ]
            .map(str::to_owned),
        ),
        Cloud::Gcp => {
            r.extend(
                [
                    "zones: the snapshot's zone names (us-central1-a), which are the same for every project; the",
                    "  zone_id column repeats the zone. Rows whose zone is not <region>-<letter> are left out.",
                    "on-demand / spot: the row's Price / SpotPrice; empty or 0 is no figure, and a spot price not",
                    "  below the on-demand price at 4-decimal precision is no spot figure.",
                    "accelerator-optimized machine types: the snapshot lists the machine's host row (its vCPUs",
                    "  and memory, AcceleratorName empty, priced for vCPUs and memory only) and, apart, GPU rows",
                    "  (InstanceType empty; AcceleratorName, AcceleratorCount, zone, Price, SpotPrice), as GCP",
                    "  bills them. A machine costs its host row + the GPU row of its family's GPU model with the",
                    "  facts file's GPU count in the same zone, on-demand and spot alike (spot only when both",
                    "  rows have a spot figure). A host row without that GPU row in its zone is left out.",
                ]
                .map(str::to_owned),
            );
            let families: Vec<String> = GCP_GPU_FAMILIES
                .iter()
                .map(|(p, g)| format!("{p}* {g}"))
                .collect();
            r.push(format!("  GPU model per family: {}.", families.join(", ")));
            r.extend(
                [
                    "GPU rows checked: per GPU model and zone, a row whose per-GPU on-demand price is off the",
                    "  median per-GPU price of that model's rows (all counts) by more than 10% is taken as wrong",
                    "  and left out, and a GPU row listed twice with different prices too.",
                    "GPUs attached to N1 machine types (T4, V100, P100, P4 rows) and TPUs are not modelled.",
                    "a type listed twice for a zone keeps the lower prices.",
                ]
                .map(str::to_owned),
            );
        }
        Cloud::Azure => r.extend(
            [
                "regions: the row's Region. The snapshot has no zones (Azure prices per region): each row is",
                "  offered in <region>-1, <region>-2 and <region>-3. ASSUMPTION (as in data/azure.toml): not",
                "  every region has availability zones nor every size every zone (the Resource SKUs API",
                "  tells). The zone_id column is the region, so spot prices are keyed SKY-AZURE:<region>.",
                "on-demand / spot: the row's Price / SpotPrice (Linux pay-as-you-go and Spot meters); empty",
                "  or 0 is no figure, and a spot price not below on-demand at 4-decimal precision is none.",
                "a type listed twice for a region keeps the lower prices.",
            ]
            .map(str::to_owned),
        ),
    }
    r
}
