//! Reading and validating catalog files (the embedded data and `--catalog FILE` overrides).
//!
//! See the crate documentation for the format. Parsing happens in two steps: serde (with
//! `deny_unknown_fields`, wrapped in `serde_path_to_error` so every error knows its path) turns
//! the TOML into raw entries; [`validate`] then checks the rules serde cannot express and
//! expands the compact `zones` / `on_demand` / `spot` form into [`Offering`]s.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::fmt;

use chrono::NaiveDate;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use crate::error::one_line;
use crate::{
    Accelerator, Arch, CapacityType, Cloud, InstanceType, Interconnect, InterruptionBand, Offering,
    Overhead, PricingError, SpotInterruption,
};

/// How an override file combines with the catalog it is applied to
/// ([`crate::Catalog::with_override`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CatalogMode {
    /// Types with the same `(cloud, name)` replace the catalog's; new types are added.
    #[default]
    Extend,
    /// The file's types become the whole catalog.
    Replace,
}

/// The highest price per hour a catalog file may give: far above any instance type (the
/// dearest in the embedded data is under $150/hour), so a larger figure is a typo, and sums of
/// such prices stay finite.
pub const MAX_PRICE_PER_HOUR: f64 = 10_000.0;

/// The most memory an instance type may have, in MiB (1 EiB).
const MAX_MEMORY_MIB: u64 = 1 << 40;
/// The most local NVMe an instance type may have, in GB (1 EB).
const MAX_LOCAL_NVME_GB: u64 = 1_000_000_000;

/// Identifies one offering of a catalog: cloud, instance-type name, zone (the zone names its
/// region) and capacity type.
pub type OfferingKey = (Cloud, String, String, CapacityType);

/// A parsed and validated catalog file.
#[derive(Debug, Clone, PartialEq)]
pub struct CatalogFile {
    /// The name the file was parsed under (used in error messages).
    pub file_name: String,
    /// How the file combines with another catalog.
    pub mode: CatalogMode,
    /// The file's instance types, in file order.
    pub instance_types: Vec<InstanceType>,
    /// The default region the file names for its cloud (`default_region`), if any.
    pub default_regions: BTreeMap<Cloud, String>,
    /// The interruption band of spot offerings where the file gives one.
    pub spot_interruptions: BTreeMap<OfferingKey, SpotInterruption>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    #[serde(default)]
    schema: Option<u32>,
    #[serde(default)]
    mode: CatalogMode,
    #[serde(default)]
    cloud: Option<Cloud>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    default_region: Option<String>,
    #[serde(default)]
    instance_type: Vec<RawType>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawType {
    name: String,
    #[serde(default)]
    cloud: Option<Cloud>,
    family: String,
    vcpu: u32,
    memory_mib: u64,
    arch: Arch,
    #[serde(default)]
    accelerator: Option<Accelerator>,
    #[serde(default)]
    local_nvme_gb: u64,
    #[serde(default)]
    network_gbps: f64,
    #[serde(default)]
    interconnect: Option<Interconnect>,
    #[serde(default)]
    efa_count: u32,
    max_pods: u32,
    #[serde(default)]
    overhead: Option<Overhead>,
    #[serde(default)]
    spec_source: Option<String>,
    #[serde(default)]
    region: Option<String>,
    #[serde(default)]
    zones: Vec<String>,
    #[serde(default)]
    zones_source: Option<String>,
    #[serde(default)]
    on_demand: Option<RawPrice>,
    #[serde(default)]
    spot: Vec<RawSpot>,
    #[serde(default)]
    spot_interruption: Option<RawInterruption>,
    #[serde(default)]
    regions: Vec<RawRegion>,
    #[serde(default)]
    offerings: Vec<RawOffering>,
}

/// `[[instance_type.regions]]`: the type's zones and prices in one more region.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRegion {
    region: String,
    zones: Vec<String>,
    #[serde(default)]
    zones_source: Option<String>,
    #[serde(default)]
    on_demand: Option<RawPrice>,
    #[serde(default)]
    spot: Vec<RawSpot>,
    #[serde(default)]
    spot_interruption: Option<RawInterruption>,
}

/// `spot_interruption = { band = "<5%", source = "...", as_of = 2026-11-30 }`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawInterruption {
    band: InterruptionBand,
    source: String,
    #[serde(deserialize_with = "de_date")]
    as_of: NaiveDate,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrice {
    price: f64,
    source: String,
    #[serde(deserialize_with = "de_date")]
    as_of: NaiveDate,
    #[serde(default)]
    estimate: bool,
    #[serde(default)]
    rule: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpot {
    #[serde(default)]
    zone: Option<String>,
    price: f64,
    source: String,
    #[serde(deserialize_with = "de_date")]
    as_of: NaiveDate,
    #[serde(default)]
    estimate: bool,
    #[serde(default)]
    rule: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOffering {
    #[serde(default)]
    region: Option<String>,
    zone: String,
    capacity_type: CapacityType,
    price: f64,
    source: String,
    #[serde(deserialize_with = "de_date")]
    as_of: NaiveDate,
    #[serde(default)]
    estimate: bool,
    #[serde(default)]
    rule: Option<String>,
    #[serde(default = "yes")]
    available: bool,
    #[serde(default)]
    interruption: Option<RawInterruption>,
}

fn yes() -> bool {
    true
}

/// Accepts a TOML date (`as_of = 2026-07-20`) or a string (`as_of = "2026-07-20"`).
fn de_date<'de, D: Deserializer<'de>>(d: D) -> Result<NaiveDate, D::Error> {
    struct DateVisitor;

    impl<'de> Visitor<'de> for DateVisitor {
        type Value = NaiveDate;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a date such as 2026-07-20")
        }

        fn visit_str<E: de::Error>(self, s: &str) -> Result<NaiveDate, E> {
            NaiveDate::parse_from_str(s, "%Y-%m-%d")
                .map_err(|_| E::custom(format!("expected a date such as 2026-07-20, got \"{s}\"")))
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<NaiveDate, A::Error> {
            let dt =
                toml::value::Datetime::deserialize(de::value::MapAccessDeserializer::new(map))?;
            match (dt.date, dt.time, dt.offset) {
                (Some(d), None, None) => {
                    NaiveDate::from_ymd_opt(i32::from(d.year), u32::from(d.month), u32::from(d.day))
                        .ok_or_else(|| de::Error::custom(format!("{dt} is not a valid date")))
                }
                _ => Err(de::Error::custom(format!(
                    "expected a date such as 2026-07-20, got the date-time {dt}"
                ))),
            }
        }
    }

    d.deserialize_any(DateVisitor)
}

/// Parses and validates one catalog file.
///
/// The text is deserialized without path tracking first (the catalog is loaded at start and by
/// every `plan`, and tracking every field's path was a sixth of the load); only a file that does
/// not deserialize is read again with `serde_path_to_error`, for the path its error names.
pub(crate) fn parse(file: &str, text: &str) -> Result<CatalogFile, PricingError> {
    let deserializer = toml::Deserializer::parse(text).map_err(|e| syntax(file, text, &e))?;
    if let Ok(raw) = RawFile::deserialize(deserializer) {
        return validate(file, raw);
    }
    let deserializer = toml::Deserializer::parse(text).map_err(|e| syntax(file, text, &e))?;
    let raw: RawFile =
        serde_path_to_error::deserialize(deserializer).map_err(|e| serde_error(file, text, &e))?;
    validate(file, raw)
}

fn syntax(file: &str, text: &str, e: &toml::de::Error) -> PricingError {
    let (line, column) = e.span().map_or((1, 1), |s| line_col(text, s.start));
    PricingError::Syntax {
        file: file.to_string(),
        line,
        column,
        message: one_line(e.message()),
    }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// Turns a serde error into a message naming the entry (looked up by index in a loose parse of
/// the same text) and the field path inside it.
fn serde_error(
    file: &str,
    text: &str,
    e: &serde_path_to_error::Error<toml::de::Error>,
) -> PricingError {
    let path = e.path().to_string();
    let message = one_line(e.inner().message());
    let (entry, field) = split_entry_path(text, &path);
    PricingError::Invalid {
        file: file.to_string(),
        entry,
        field: if field.is_empty() {
            "(file)".to_string()
        } else {
            field
        },
        message,
    }
}

/// Splits `instance_type[3].offerings[2].price` into the rendered entry and `offerings[2].price`.
fn split_entry_path(text: &str, path: &str) -> (String, String) {
    const PREFIX: &str = "instance_type[";
    let Some(rest) = path.strip_prefix(PREFIX) else {
        return (String::new(), path.trim_start_matches('.').to_string());
    };
    let Some((index, field)) = rest.split_once(']') else {
        return (String::new(), path.to_string());
    };
    let field = field.trim_start_matches('.').to_string();
    let Ok(index) = index.parse::<usize>() else {
        return (String::new(), path.to_string());
    };
    let loose: Option<toml::Table> = text.parse().ok();
    let file_cloud = loose
        .as_ref()
        .and_then(|t| t.get("cloud"))
        .and_then(|v| v.as_str())
        .map(str::to_string);
    let item = loose
        .as_ref()
        .and_then(|t| t.get("instance_type"))
        .and_then(|v| v.as_array())
        .and_then(|a| a.get(index))
        .and_then(|v| v.as_table());
    let name = item.and_then(|t| t.get("name")).and_then(|v| v.as_str());
    let cloud = item
        .and_then(|t| t.get("cloud"))
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .or(file_cloud);
    let entry = match (name, cloud) {
        (Some(n), Some(c)) => format!("instance type \"{n}\" ({c}): "),
        (Some(n), None) => format!("instance type \"{n}\": "),
        _ => format!("instance_type[{index}]: "),
    };
    let field = if field.is_empty() {
        "(entry)".to_string()
    } else {
        field
    };
    (entry, field)
}

struct Ctx<'a> {
    file: &'a str,
    entry: String,
}

impl Ctx<'_> {
    fn err(&self, field: impl Into<String>, message: impl Into<String>) -> PricingError {
        PricingError::Invalid {
            file: self.file.to_string(),
            entry: self.entry.clone(),
            field: field.into(),
            message: message.into(),
        }
    }

    fn price(&self, field: &str, price: f64) -> Result<(), PricingError> {
        if !(price.is_finite() && price >= 0.0) {
            Err(self.err(
                format!("{field}.price"),
                format!(
                    "must be a finite non-negative number, got {}",
                    fmt_f64(price)
                ),
            ))
        } else if price > MAX_PRICE_PER_HOUR {
            Err(self.err(
                format!("{field}.price"),
                // Debug keeps huge figures short (`1e300`).
                format!("must be at most {MAX_PRICE_PER_HOUR} dollars per hour, got {price:?}"),
            ))
        } else {
            Ok(())
        }
    }

    fn text(&self, field: &str, value: &str) -> Result<(), PricingError> {
        if value.trim().is_empty() {
            Err(self.err(field, "must not be empty"))
        } else {
            Ok(())
        }
    }

    fn estimate(
        &self,
        field: &str,
        estimate: bool,
        rule: &Option<String>,
    ) -> Result<(), PricingError> {
        match (estimate, rule) {
            (true, None) => Err(self.err(
                format!("{field}.rule"),
                "an estimated price must state the rule it was derived by",
            )),
            (true, Some(r)) => self.text(&format!("{field}.rule"), r),
            (false, Some(_)) => Err(self.err(
                format!("{field}.rule"),
                "only allowed together with estimate = true",
            )),
            (false, None) => Ok(()),
        }
    }
}

fn fmt_f64(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_string()
    } else if v.is_infinite() {
        if v > 0.0 { "inf".into() } else { "-inf".into() }
    } else {
        format!("{v}")
    }
}

fn source_with_rule(source: &str, estimate: bool, rule: &Option<String>) -> String {
    match (estimate, rule) {
        (true, Some(r)) => format!("{source} [estimate: {r}]"),
        _ => source.to_string(),
    }
}

/// Checks that `zone` belongs to `region` in the cloud's naming scheme: AWS `us-east-1a`
/// (region + letter), GCP `us-central1-a` (region + `-` + letter), Azure `eastus-1`
/// (region + `-` + digit).
pub fn zone_matches_region(cloud: Cloud, region: &str, zone: &str) -> bool {
    let Some(suffix) = zone.strip_prefix(region) else {
        return false;
    };
    match cloud {
        Cloud::Aws => !suffix.is_empty() && suffix.chars().all(|c| c.is_ascii_lowercase()),
        Cloud::Gcp => suffix
            .strip_prefix('-')
            .is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_lowercase())),
        Cloud::Azure => suffix
            .strip_prefix('-')
            .is_some_and(|s| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit())),
    }
}

fn validate(file: &str, raw: RawFile) -> Result<CatalogFile, PricingError> {
    let file_ctx = Ctx {
        file,
        entry: String::new(),
    };
    if let Some(s) = raw.schema
        && s != 1
    {
        return Err(file_ctx.err(
            "schema",
            format!("unsupported schema version {s}; this build reads schema 1"),
        ));
    }
    if let Some(r) = &raw.region {
        file_ctx.text("region", r)?;
    }
    let mut default_regions = BTreeMap::new();
    if let Some(r) = &raw.default_region {
        file_ctx.text("default_region", r)?;
        let Some(cloud) = raw.cloud else {
            return Err(file_ctx.err(
                "default_region",
                "needs `cloud` at the top of the file (the default region is per cloud)",
            ));
        };
        default_regions.insert(cloud, r.clone());
    }
    let mut seen: HashSet<(Cloud, String)> = HashSet::new();
    let mut out = Vec::with_capacity(raw.instance_type.len());
    let mut spot_interruptions = BTreeMap::new();
    for (index, t) in raw.instance_type.into_iter().enumerate() {
        let cloud = t.cloud.or(raw.cloud);
        let entry = match cloud {
            Some(c) => format!("instance type \"{}\" ({c}): ", t.name),
            None => format!("instance type \"{}\": ", t.name),
        };
        let ctx = Ctx { file, entry };
        if t.name.trim().is_empty() {
            let ctx = Ctx {
                file,
                entry: format!("instance_type[{index}]: "),
            };
            return Err(ctx.err("name", "must not be empty"));
        }
        let Some(cloud) = cloud else {
            return Err(ctx.err(
                "cloud",
                "missing; set `cloud` on the entry or at the top of the file",
            ));
        };
        if !seen.insert((cloud, t.name.clone())) {
            return Err(PricingError::Duplicate {
                file: file.to_string(),
                cloud,
                name: t.name,
            });
        }
        let region = t.region.clone().or_else(|| raw.region.clone());
        let (it, bands) = validate_type(&ctx, cloud, region, t)?;
        for (zone, band) in bands {
            spot_interruptions.insert((cloud, it.name.clone(), zone, CapacityType::Spot), band);
        }
        out.push(it);
    }
    Ok(CatalogFile {
        file_name: file.to_string(),
        mode: raw.mode,
        instance_types: out,
        default_regions,
        spot_interruptions,
    })
}

/// The spot offerings' interruption bands of one type, by zone.
type Bands = Vec<(String, SpotInterruption)>;

fn validate_type(
    ctx: &Ctx<'_>,
    cloud: Cloud,
    region: Option<String>,
    t: RawType,
) -> Result<(InstanceType, Bands), PricingError> {
    ctx.text("family", &t.family)?;
    if t.vcpu == 0 {
        return Err(ctx.err("vcpu", "must be greater than zero"));
    }
    if t.memory_mib == 0 {
        return Err(ctx.err("memory_mib", "must be greater than zero"));
    }
    if t.max_pods == 0 {
        return Err(ctx.err("max_pods", "must be greater than zero"));
    }
    // Far above any machine; beyond them byte counts (capacity, overhead) overflow u64.
    if t.memory_mib > MAX_MEMORY_MIB {
        return Err(ctx.err(
            "memory_mib",
            format!(
                "must be at most {MAX_MEMORY_MIB} (1 EiB), got {}",
                t.memory_mib
            ),
        ));
    }
    if t.local_nvme_gb > MAX_LOCAL_NVME_GB {
        return Err(ctx.err(
            "local_nvme_gb",
            format!(
                "must be at most {MAX_LOCAL_NVME_GB} (1 EB), got {}",
                t.local_nvme_gb
            ),
        ));
    }
    if let Some(o) = &t.overhead {
        if o.cpu_millis > u64::from(t.vcpu) * 1000 {
            return Err(ctx.err(
                "overhead.cpu_millis",
                format!(
                    "must not exceed the type's {} millicores, got {}",
                    u64::from(t.vcpu) * 1000,
                    o.cpu_millis
                ),
            ));
        }
        if o.memory_mib > t.memory_mib {
            return Err(ctx.err(
                "overhead.memory_mib",
                format!(
                    "must not exceed the type's memory_mib {}, got {}",
                    t.memory_mib, o.memory_mib
                ),
            ));
        }
    }
    if !(t.network_gbps.is_finite() && t.network_gbps >= 0.0) {
        return Err(ctx.err(
            "network_gbps",
            format!(
                "must be a finite non-negative number, got {}",
                fmt_f64(t.network_gbps)
            ),
        ));
    }
    if let Some(s) = &t.spec_source {
        ctx.text("spec_source", s)?;
    }
    if let Some(s) = &t.zones_source {
        ctx.text("zones_source", s)?;
    }
    if let Some(a) = &t.accelerator {
        validate_accelerator(ctx, a)?;
    }
    match (t.interconnect, t.efa_count) {
        (Some(Interconnect::Efa), 0) => {
            return Err(ctx.err(
                "efa_count",
                "must be at least 1 when interconnect = \"efa\"",
            ));
        }
        (other, n) if n > 0 && other != Some(Interconnect::Efa) => {
            return Err(ctx.err("interconnect", "must be \"efa\" when efa_count is non-zero"));
        }
        _ => {}
    }
    if t.efa_count > 0 && cloud != Cloud::Aws {
        return Err(ctx.err("efa_count", "EFA exists only on aws"));
    }

    let (offerings, bands) = expand_offerings(ctx, cloud, region.as_deref(), &t)?;
    let overhead = t
        .overhead
        .unwrap_or_else(|| crate::overhead::compute(cloud, t.vcpu, t.memory_mib, t.max_pods));
    let it = InstanceType {
        cloud,
        name: t.name,
        family: t.family,
        vcpu: t.vcpu,
        memory_mib: t.memory_mib,
        arch: t.arch,
        accelerator: t.accelerator,
        local_nvme_gb: t.local_nvme_gb,
        network_gbps: t.network_gbps,
        interconnect: t.interconnect,
        efa_count: t.efa_count,
        max_pods: t.max_pods,
        overhead,
        offerings,
    };
    Ok((it, bands))
}

fn validate_accelerator(ctx: &Ctx<'_>, a: &Accelerator) -> Result<(), PricingError> {
    ctx.text("accelerator.manufacturer", &a.manufacturer)?;
    ctx.text("accelerator.name", &a.name)?;
    ctx.text("accelerator.resource", &a.resource)?;
    if a.name
        .chars()
        .any(|c| c.is_ascii_uppercase() || c.is_whitespace())
    {
        return Err(ctx.err(
            "accelerator.name",
            format!("must be a lower-case label value, got \"{}\"", a.name),
        ));
    }
    match a.fraction {
        None if a.count == 0 => Err(ctx.err(
            "accelerator.count",
            "must be at least 1 (set accelerator.fraction for a fractional vGPU slice)",
        )),
        None => Ok(()),
        Some(f) if !(f.is_finite() && f > 0.0 && f < 1.0) => Err(ctx.err(
            "accelerator.fraction",
            format!(
                "must be a number between 0 and 1 (exclusive), got {}",
                fmt_f64(f)
            ),
        )),
        Some(_) if a.count != 0 => Err(ctx.err(
            "accelerator.count",
            "must be 0 for a fractional slice (the slice is not a whole device)",
        )),
        Some(_) => Ok(()),
    }
}

/// One region's compact prices: `zones`, `on_demand`, `spot`, `spot_interruption` (at the top of
/// an entry for its `region`, or in one `[[instance_type.regions]]` table).
struct Compact<'a> {
    /// Field-path prefix: `""` or `regions[1].`.
    prefix: String,
    region: &'a str,
    zones: &'a [String],
    on_demand: Option<&'a RawPrice>,
    spot: &'a [RawSpot],
    spot_interruption: Option<&'a RawInterruption>,
}

fn interruption(
    ctx: &Ctx<'_>,
    field: &str,
    raw: &RawInterruption,
) -> Result<SpotInterruption, PricingError> {
    ctx.text(&format!("{field}.source"), &raw.source)?;
    Ok(SpotInterruption {
        band: raw.band,
        source: raw.source.clone(),
        as_of: raw.as_of,
    })
}

fn expand_compact(
    ctx: &Ctx<'_>,
    cloud: Cloud,
    c: &Compact<'_>,
    out: &mut Vec<Offering>,
    bands: &mut Bands,
) -> Result<(), PricingError> {
    let p = &c.prefix;
    let region = c.region;
    if c.zones.is_empty() {
        return Err(ctx.err(
            format!("{p}zones"),
            "must list at least one zone when on_demand or spot prices are given",
        ));
    }
    let mut zones = BTreeSet::new();
    for (i, z) in c.zones.iter().enumerate() {
        if !zone_matches_region(cloud, region, z) {
            return Err(ctx.err(
                format!("{p}zones[{i}]"),
                format!("zone \"{z}\" is not in region \"{region}\""),
            ));
        }
        if !zones.insert(z.as_str()) {
            return Err(ctx.err(
                format!("{p}zones[{i}]"),
                format!("zone \"{z}\" is listed twice"),
            ));
        }
    }
    if let Some(o) = c.on_demand {
        let field = format!("{p}on_demand");
        ctx.price(&field, o.price)?;
        ctx.text(&format!("{field}.source"), &o.source)?;
        ctx.estimate(&field, o.estimate, &o.rule)?;
        for z in c.zones {
            out.push(Offering {
                region: region.to_owned(),
                zone: z.clone(),
                capacity_type: CapacityType::OnDemand,
                price_per_hour: o.price,
                available: true,
                price_source: source_with_rule(&o.source, o.estimate, &o.rule),
                price_as_of: o.as_of,
                estimate: o.estimate,
            });
        }
    }
    let band = match c.spot_interruption {
        Some(_) if c.spot.is_empty() => {
            return Err(ctx.err(
                format!("{p}spot_interruption"),
                "given without any spot price to apply to",
            ));
        }
        Some(raw) => Some(interruption(ctx, &format!("{p}spot_interruption"), raw)?),
        None => None,
    };
    for (i, s) in c.spot.iter().enumerate() {
        let field = format!("{p}spot[{i}]");
        ctx.price(&field, s.price)?;
        ctx.text(&format!("{field}.source"), &s.source)?;
        ctx.estimate(&field, s.estimate, &s.rule)?;
        let targets: Vec<&String> = match &s.zone {
            Some(z) => {
                if !zone_matches_region(cloud, region, z) {
                    return Err(ctx.err(
                        format!("{field}.zone"),
                        format!("zone \"{z}\" is not in region \"{region}\""),
                    ));
                }
                if !zones.contains(z.as_str()) {
                    return Err(ctx.err(
                        format!("{field}.zone"),
                        format!("zone \"{z}\" is not listed in {p}zones"),
                    ));
                }
                vec![z]
            }
            None => c.zones.iter().collect(),
        };
        for z in targets {
            out.push(Offering {
                region: region.to_owned(),
                zone: z.clone(),
                capacity_type: CapacityType::Spot,
                price_per_hour: s.price,
                available: true,
                price_source: source_with_rule(&s.source, s.estimate, &s.rule),
                price_as_of: s.as_of,
                estimate: s.estimate,
            });
            if let Some(b) = &band {
                bands.push((z.clone(), b.clone()));
            }
        }
    }
    Ok(())
}

fn expand_offerings(
    ctx: &Ctx<'_>,
    cloud: Cloud,
    region: Option<&str>,
    t: &RawType,
) -> Result<(Vec<Offering>, Bands), PricingError> {
    let mut out = Vec::new();
    let mut bands = Vec::new();
    let compact = !t.zones.is_empty()
        || t.on_demand.is_some()
        || !t.spot.is_empty()
        || t.spot_interruption.is_some();
    let region_of = |field: &str, r: Option<&str>| -> Result<String, PricingError> {
        match r {
            Some(r) if !r.trim().is_empty() => Ok(r.to_string()),
            Some(_) => Err(ctx.err(field, "must not be empty")),
            None => Err(ctx.err(
                field,
                "missing; set `region` on the entry or at the top of the file",
            )),
        }
    };
    let mut regions_seen = BTreeSet::new();
    if compact {
        let region = region_of("region", region)?;
        expand_compact(
            ctx,
            cloud,
            &Compact {
                prefix: String::new(),
                region: &region,
                zones: &t.zones,
                on_demand: t.on_demand.as_ref(),
                spot: &t.spot,
                spot_interruption: t.spot_interruption.as_ref(),
            },
            &mut out,
            &mut bands,
        )?;
        regions_seen.insert(region);
    }
    for (i, r) in t.regions.iter().enumerate() {
        let prefix = format!("regions[{i}].");
        ctx.text(&format!("{prefix}region"), &r.region)?;
        if let Some(s) = &r.zones_source {
            ctx.text(&format!("{prefix}zones_source"), s)?;
        }
        if !regions_seen.insert(r.region.clone()) {
            return Err(ctx.err(
                format!("{prefix}region"),
                format!(
                    "region \"{}\" is priced twice (at the top of the entry or in an earlier regions table)",
                    r.region
                ),
            ));
        }
        expand_compact(
            ctx,
            cloud,
            &Compact {
                prefix,
                region: &r.region,
                zones: &r.zones,
                on_demand: r.on_demand.as_ref(),
                spot: &r.spot,
                spot_interruption: r.spot_interruption.as_ref(),
            },
            &mut out,
            &mut bands,
        )?;
    }
    for (i, o) in t.offerings.iter().enumerate() {
        let field = format!("offerings[{i}]");
        ctx.price(&field, o.price)?;
        ctx.text(&format!("{field}.source"), &o.source)?;
        ctx.estimate(&field, o.estimate, &o.rule)?;
        let r = region_of(&format!("{field}.region"), o.region.as_deref().or(region))?;
        if !zone_matches_region(cloud, &r, &o.zone) {
            return Err(ctx.err(
                format!("{field}.zone"),
                format!("zone \"{}\" is not in region \"{r}\"", o.zone),
            ));
        }
        if let Some(raw) = &o.interruption {
            if o.capacity_type != CapacityType::Spot {
                return Err(ctx.err(
                    format!("{field}.interruption"),
                    "only spot offerings are interrupted",
                ));
            }
            bands.push((
                o.zone.clone(),
                interruption(ctx, &format!("{field}.interruption"), raw)?,
            ));
        }
        out.push(Offering {
            region: r,
            zone: o.zone.clone(),
            capacity_type: o.capacity_type,
            price_per_hour: o.price,
            available: o.available,
            price_source: source_with_rule(&o.source, o.estimate, &o.rule),
            price_as_of: o.as_of,
            estimate: o.estimate,
        });
    }
    let mut keys = HashSet::new();
    for o in &out {
        if !keys.insert((o.region.as_str(), o.zone.as_str(), o.capacity_type)) {
            return Err(ctx.err(
                "offerings",
                format!(
                    "more than one {} price for zone \"{}\"",
                    o.capacity_type, o.zone
                ),
            ));
        }
    }
    Ok((out, bands))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_naming_per_cloud() {
        assert!(zone_matches_region(Cloud::Aws, "us-east-1", "us-east-1a"));
        assert!(!zone_matches_region(Cloud::Aws, "us-east-1", "us-east-2a"));
        assert!(!zone_matches_region(Cloud::Aws, "us-east-1", "us-east-1"));
        assert!(zone_matches_region(
            Cloud::Gcp,
            "us-central1",
            "us-central1-f"
        ));
        assert!(!zone_matches_region(
            Cloud::Gcp,
            "us-central1",
            "us-east1-b"
        ));
        assert!(zone_matches_region(Cloud::Azure, "eastus", "eastus-3"));
        assert!(!zone_matches_region(Cloud::Azure, "eastus", "eastus2-1"));
        assert!(!zone_matches_region(Cloud::Azure, "eastus", "westus-1"));
    }

    #[test]
    fn line_and_column_are_one_based() {
        assert_eq!(line_col("ab\ncd", 4), (2, 2));
        assert_eq!(line_col("ab", 0), (1, 1));
    }
}
