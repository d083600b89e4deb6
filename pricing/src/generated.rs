//! Reading a generated offerings file (`data/offerings/<cloud>.csv`, written by `catalog-gen`,
//! see [`crate::generate`]) and attaching its offerings to the instance types of the curated
//! facts file it extends.
//!
//! The format is kept trivial so that loading stays cheap (the catalog is loaded at start and
//! by every `plan`): lines starting with `#` are comments, `#! key = value` lines carry the
//! metadata (`cloud`, `source` and `as_of` are required; `part` is `accelerators`, the default,
//! or `cpu`: the file holds the types with, or without, an accelerator), then comes the column line
//! [`COLUMNS`], then one row per instance type and zone, sorted by instance type, region and
//! zone, e.g. `g5.xlarge,us-east-1,us-east-1a,use1-az1,1.006,0.4507`: the zone's on-demand
//! price and its spot price (empty: no spot figure). On-demand offerings take the source key
//! `source`, spot offerings `source:zone_id` (e.g. `SKY-AWS:use1-az1`), both dated `as_of`.

use std::collections::HashMap;

use chrono::NaiveDate;

use crate::generate::Part;
use crate::{
    CapacityType, CatalogFile, Cloud, MAX_PRICE_PER_HOUR, Offering, PricingError,
    zone_matches_region,
};

/// The column line of a generated offerings file.
pub const COLUMNS: &str = "instance_type,region,zone,zone_id,on_demand,spot";

/// The metadata of a generated offerings file (its `#! key = value` lines).
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    /// The cloud whose offerings the file holds.
    pub cloud: Cloud,
    /// Source key of its prices (explained in the file's header).
    pub source: String,
    /// The date its prices are known to hold.
    pub as_of: NaiveDate,
    /// Which types it holds (`#! part`, `accelerators` when absent).
    pub part: Part,
}

/// Reads the `#! key = value` lines before the column line.
pub fn meta(file: &str, text: &str) -> Result<Meta, PricingError> {
    let err = |line: usize, message: String| PricingError::Data {
        file: file.to_owned(),
        line,
        message,
    };
    let (mut cloud, mut source, mut as_of) = (None, None, None);
    let mut part = Part::Accelerators;
    for (i, line) in text.lines().enumerate() {
        if line == COLUMNS {
            break;
        }
        let Some(kv) = line.strip_prefix("#!") else {
            continue;
        };
        let Some((key, value)) = kv.split_once('=') else {
            return Err(err(i + 1, format!("metadata line without `=`: {line}")));
        };
        let value = value.trim();
        match key.trim() {
            "cloud" => {
                cloud = Some(
                    value
                        .parse::<Cloud>()
                        .map_err(|e| err(i + 1, e.to_string()))?,
                )
            }
            "source" => source = Some(value.to_owned()),
            "part" => {
                part = match value {
                    "accelerators" => Part::Accelerators,
                    "cpu" => Part::Cpu,
                    _ => {
                        return Err(err(
                            i + 1,
                            format!("part is accelerators or cpu, not {value}"),
                        ));
                    }
                }
            }
            "as_of" => {
                as_of = Some(
                    NaiveDate::parse_from_str(value, "%Y-%m-%d")
                        .map_err(|_| err(i + 1, format!("as_of is not a date: {value}")))?,
                )
            }
            _ => {}
        }
    }
    match (cloud, source, as_of) {
        (Some(cloud), Some(source), Some(as_of)) if !source.is_empty() => Ok(Meta {
            cloud,
            source,
            as_of,
            part,
        }),
        _ => Err(err(
            0,
            "needs `#! cloud`, `#! source` and `#! as_of` lines before the column line".into(),
        )),
    }
}

/// Attaches the offerings of generated file `file` (text `text`) to the instance types of
/// `facts`. Every row must name an instance type of the file's cloud that `facts` lists, of the
/// file's part, without curated offerings in the row's region (in a region, a type's offerings
/// are curated or generated, never both: a CPU type curated in the default region is generated
/// in the others); afterwards every type of that cloud and part in `facts` must have offerings.
pub fn apply(file: &str, text: &str, facts: &mut CatalogFile) -> Result<(), PricingError> {
    let meta = meta(file, text)?;
    let err = |line: usize, message: String| PricingError::Data {
        file: file.to_owned(),
        line,
        message,
    };
    let index: HashMap<String, usize> = facts
        .instance_types
        .iter()
        .enumerate()
        .filter(|(_, t)| t.cloud == meta.cloud)
        .map(|(i, t)| (t.name.clone(), i))
        .collect();
    let mut lines = text.lines().enumerate();
    if !lines.by_ref().any(|(_, l)| l == COLUMNS) {
        return Err(err(0, format!("no column line `{COLUMNS}`")));
    }
    let mut prev: Option<(&str, &str, &str)> = None;
    let mut current: Option<usize> = None;
    let mut last: Option<(&str, usize)> = None;
    // Spot offerings of the current (type, region), appended after its on-demand ones.
    let mut spot: Vec<Offering> = Vec::new();
    for (i, line) in lines {
        let n = i + 1;
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut f = line.split(',');
        let (Some(name), Some(region), Some(zone), Some(zone_id), Some(od), Some(sp), None) = (
            f.next(),
            f.next(),
            f.next(),
            f.next(),
            f.next(),
            f.next(),
            f.next(),
        ) else {
            return Err(err(n, format!("expected the 6 columns {COLUMNS}")));
        };
        let key = (name, region, zone);
        if prev.is_some_and(|p| p >= key) {
            return Err(err(
                n,
                "rows must be sorted by instance type, region and zone, without repeats".into(),
            ));
        }
        let new_region = prev.is_none_or(|p| (p.0, p.1) != (name, region));
        prev = Some(key);
        // Rows come grouped by type: the type is looked up and checked once per group.
        let at = match last {
            Some((last_name, at)) if last_name == name => at,
            _ => {
                let at = type_at(name, &index, meta.part, facts).map_err(|m| err(n, m))?;
                last = Some((name, at));
                at
            }
        };
        // Rows come sorted by type and region, so the type's offerings seen here are its curated
        // ones and this file's of its earlier regions.
        if new_region
            && facts.instance_types[at]
                .offerings
                .iter()
                .any(|o| o.region == region)
        {
            return Err(err(
                n,
                format!(
                    "instance type \"{name}\" has curated offerings in {region} in {}; in a region, a type's offerings are curated or generated, not both",
                    facts.file_name
                ),
            ));
        }
        if !zone_matches_region(meta.cloud, region, zone) {
            return Err(err(
                n,
                format!("zone \"{zone}\" is not in region \"{region}\""),
            ));
        }
        if zone_id.is_empty() {
            return Err(err(n, "zone_id must not be empty".into()));
        }
        if new_region {
            flush(facts, current, &mut spot);
            current = Some(at);
        }
        let on_demand = price(od).map_err(|m| err(n, format!("on_demand: {m}")))?;
        let offering = |capacity_type, price_per_hour, price_source| Offering {
            region: region.to_owned(),
            zone: zone.to_owned(),
            capacity_type,
            price_per_hour,
            available: true,
            price_source,
            price_as_of: meta.as_of,
            estimate: false,
        };
        facts.instance_types[at].offerings.push(offering(
            CapacityType::OnDemand,
            on_demand,
            meta.source.clone(),
        ));
        if !sp.is_empty() {
            let p = price(sp).map_err(|m| err(n, format!("spot: {m}")))?;
            let mut source = String::with_capacity(meta.source.len() + 1 + zone_id.len());
            source.push_str(&meta.source);
            source.push(':');
            source.push_str(zone_id);
            spot.push(offering(CapacityType::Spot, p, source));
        }
    }
    flush(facts, current, &mut spot);
    if let Some(t) = facts
        .instance_types
        .iter()
        .find(|t| t.cloud == meta.cloud && meta.part.holds(t) && t.offerings.is_empty())
    {
        return Err(err(
            0,
            format!(
                "instance type \"{}\" of {} has no offerings, neither curated nor generated",
                t.name, facts.file_name
            ),
        ));
    }
    Ok(())
}

/// The index in `facts` of generated-file row type `name`, which must be of the file's cloud
/// (`index`) and `part`.
fn type_at(
    name: &str,
    index: &HashMap<String, usize>,
    part: Part,
    facts: &CatalogFile,
) -> Result<usize, String> {
    let Some(&at) = index.get(name) else {
        return Err(format!(
            "instance type \"{name}\" has no entry in {} (the curated facts)",
            facts.file_name
        ));
    };
    if !part.holds(&facts.instance_types[at]) {
        return Err(format!(
            "instance type \"{name}\" is not of this file's part ({})",
            part.as_str()
        ));
    }
    Ok(at)
}

/// Appends the buffered spot offerings to type `at`.
fn flush(facts: &mut CatalogFile, at: Option<usize>, spot: &mut Vec<Offering>) {
    if let Some(i) = at {
        facts.instance_types[i].offerings.append(spot);
    }
}

/// A price of a generated file: a finite number above zero and at most
/// [`MAX_PRICE_PER_HOUR`].
fn price(s: &str) -> Result<f64, String> {
    let p: f64 = s.parse().map_err(|_| format!("not a number: \"{s}\""))?;
    if !(p.is_finite() && p > 0.0 && p <= MAX_PRICE_PER_HOUR) {
        return Err(format!(
            "must be above 0 and at most {MAX_PRICE_PER_HOUR} dollars per hour, got {s}"
        ));
    }
    Ok(p)
}
