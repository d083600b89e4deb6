//! `--reservations FILE`: capacity reservations written by hand (YAML or JSON), for `plan` and
//! `explain` to use as the controller uses what the clouds report.
//!
//! The file is a list, one entry per reservation, in camelCase:
//!
//! ```yaml
//! - id: cr-0h100block          # required
//!   cloud: aws                 # aws (default), gcp or azure
//!   instanceType: p5.48xlarge  # required, a type of the catalog
//!   zone: us-east-1a           # required, a zone the catalog offers the type in
//!   count: 4                   # required, instances it holds (at least 1)
//!   available: 4               # optional: free now as the cloud counts them (0..=count)
//!   type: capacity-block       # default (an ODCR, the default) or capacity-block
//!   start: 2027-01-11T00:00:00Z  # optional (RFC 3339): usable from
//!   end: 2027-01-14T00:00:00Z    # optional (RFC 3339); a capacity-block needs one
//!   pricePerHour: 31.464       # required: per instance-hour, paid whether used or not
//!   tags: {team: research}     # optional: what NodeClass selector terms match
//! ```
//!
//! Every problem is an error naming the file, the entry (`reservations[1] (cr-…)`) and the
//! field.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::bail;
use chrono::{DateTime, Utc};
use quartermaster_pricing::{Catalog, Cloud, Reservation, ReservationKind};
use serde_json::{Map, Value};

use crate::manifests::parse_documents_raw;

/// The fields an entry may have, as written.
const FIELDS: [&str; 11] = [
    "id",
    "cloud",
    "instanceType",
    "zone",
    "count",
    "available",
    "type",
    "start",
    "end",
    "pricePerHour",
    "tags",
];

/// Reads the reservations of `path` (`-`: standard input), each checked against `catalog`.
pub fn read(path: &Path, catalog: &Catalog) -> anyhow::Result<Vec<Reservation>> {
    let documents = parse_documents_raw(path)?;
    let file = path.display();
    let entries: Vec<Value> = match documents.as_slice() {
        [] => Vec::new(),
        [one] => match &one.value {
            Value::Array(items) => items.clone(),
            Value::Null => Vec::new(),
            _ => bail!(
                "{file}: expected a list of reservations (`- id: cr-…`), found {}",
                kind_of(&one.value)
            ),
        },
        _ => bail!(
            "{file}: expected one YAML document, a list of reservations; found {}",
            documents.len()
        ),
    };
    let mut seen = BTreeSet::new();
    let mut out = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let r = entry_of(entry, index, catalog).map_err(|e| anyhow::anyhow!("{file}: {e}"))?;
        if !seen.insert(r.id.clone()) {
            bail!("{file}: reservations[{index}] ({}): id: given twice", r.id);
        }
        out.push(r);
    }
    Ok(out)
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// One entry; the error names it and the field.
fn entry_of(entry: &Value, index: usize, catalog: &Catalog) -> anyhow::Result<Reservation> {
    let Value::Object(map) = entry else {
        bail!(
            "reservations[{index}]: expected a mapping (id, instanceType, zone, count, …), found {}",
            kind_of(entry)
        );
    };
    let id = match map.get("id") {
        Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
        Some(Value::String(_)) => bail!("reservations[{index}]: id: must not be empty"),
        Some(other) => bail!(
            "reservations[{index}]: id: expected a string, found {}",
            kind_of(other)
        ),
        None => bail!("reservations[{index}]: id: required"),
    };
    let at = format!("reservations[{index}] ({id})");
    Entry {
        map,
        at: &at,
        catalog,
    }
    .reservation(id)
}

/// An entry being read, with how errors name it.
struct Entry<'a> {
    map: &'a Map<String, Value>,
    at: &'a str,
    catalog: &'a Catalog,
}

impl Entry<'_> {
    fn reservation(&self, id: String) -> anyhow::Result<Reservation> {
        let at = self.at;
        if let Some(unknown) = self.map.keys().find(|k| !FIELDS.contains(&k.as_str())) {
            let hint = suggest(unknown)
                .map(|s| format!(" (did you mean {s:?}?)"))
                .unwrap_or_default();
            bail!(
                "{at}: {unknown}: unknown field{hint}; fields: {}",
                FIELDS.join(", ")
            );
        }
        let cloud = match self.string("cloud")? {
            None => Cloud::Aws,
            Some(c) => c
                .parse()
                .map_err(|_| anyhow::anyhow!("{at}: cloud: {c:?} is not one of aws, gcp, azure"))?,
        };
        let instance_type = self.required_string("instanceType")?;
        let zone = self.required_string("zone")?;
        let Some(it) = self.catalog.get(cloud, &instance_type) else {
            bail!(
                "{at}: instanceType: {instance_type:?} is not an instance type of the {cloud} catalog"
            );
        };
        if !it.offerings.iter().any(|o| o.zone == zone) {
            let mut zones: Vec<&str> = it.offerings.iter().map(|o| o.zone.as_str()).collect();
            zones.sort_unstable();
            zones.dedup();
            bail!(
                "{at}: zone: the catalog does not offer {instance_type} in {zone:?} (its zones: {})",
                zones.join(", ")
            );
        }
        let count = self
            .integer("count")?
            .ok_or_else(|| anyhow::anyhow!("{at}: count: required"))?;
        if count == 0 {
            bail!("{at}: count: must be at least 1");
        }
        let available = self.integer("available")?;
        if let Some(a) = available
            && a > count
        {
            bail!("{at}: available: {a} is more than count ({count})");
        }
        let kind = match self.string("type")? {
            None => ReservationKind::Default,
            Some(t) => t
                .parse()
                .map_err(|e: String| anyhow::anyhow!("{at}: type: {e}"))?,
        };
        let start = self.time("start")?;
        let end = self.time("end")?;
        if let (Some(s), Some(e)) = (start, end)
            && e <= s
        {
            bail!("{at}: end: {e} is not after start ({s})");
        }
        if kind == ReservationKind::CapacityBlock && end.is_none() {
            bail!("{at}: end: required for a capacity-block (when EC2 reclaims its instances)");
        }
        let price_per_hour = match self.map.get("pricePerHour") {
            None => {
                bail!("{at}: pricePerHour: required (per instance-hour, paid whether used or not)")
            }
            Some(v) => v
                .as_f64()
                .filter(|p| p.is_finite() && *p >= 0.0)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "{at}: pricePerHour: expected a number of dollars, 0 or more; found {v}"
                    )
                })?,
        };
        let tags = match self.map.get("tags") {
            None | Some(Value::Null) => BTreeMap::new(),
            Some(Value::Object(tags)) => {
                let mut out = BTreeMap::new();
                for (k, v) in tags {
                    let v = match v {
                        Value::String(s) => s.clone(),
                        Value::Number(n) => n.to_string(),
                        Value::Bool(b) => b.to_string(),
                        other => bail!(
                            "{at}: tags.{k}: expected a string, found {}",
                            kind_of(other)
                        ),
                    };
                    out.insert(k.clone(), v);
                }
                out
            }
            Some(other) => bail!(
                "{at}: tags: expected a mapping of tag to value, found {}",
                kind_of(other)
            ),
        };
        Ok(Reservation {
            id,
            cloud,
            instance_type,
            zone,
            count,
            available,
            kind,
            price_per_hour,
            start,
            end,
            tags,
        })
    }

    fn string(&self, field: &str) -> anyhow::Result<Option<String>> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => bail!(
                "{}: {field}: expected a string, found {}",
                self.at,
                kind_of(other)
            ),
        }
    }

    fn required_string(&self, field: &str) -> anyhow::Result<String> {
        match self.string(field)? {
            Some(s) if !s.trim().is_empty() => Ok(s),
            Some(_) => bail!("{}: {field}: must not be empty", self.at),
            None => bail!("{}: {field}: required", self.at),
        }
    }

    fn integer(&self, field: &str) -> anyhow::Result<Option<u32>> {
        match self.map.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(Some)
                .ok_or_else(|| {
                    anyhow::anyhow!(
                        "{}: {field}: expected a whole number of instances, found {v}",
                        self.at
                    )
                }),
        }
    }

    fn time(&self, field: &str) -> anyhow::Result<Option<DateTime<Utc>>> {
        let Some(text) = self.string(field)? else {
            return Ok(None);
        };
        DateTime::parse_from_rfc3339(&text)
            .map(|t| Some(t.with_timezone(&Utc)))
            .map_err(|e| {
                anyhow::anyhow!(
                    "{}: {field}: {text:?} is not an RFC 3339 time such as 2027-01-11T00:00:00Z ({e})",
                    self.at
                )
            })
    }
}

/// The field a misspelt one most likely meant (same letters ignoring case, or one edit away).
fn suggest(unknown: &str) -> Option<&'static str> {
    let lower = unknown.to_ascii_lowercase().replace(['_', '-'], "");
    FIELDS
        .iter()
        .copied()
        .find(|f| f.to_ascii_lowercase() == lower)
        .or_else(|| FIELDS.iter().copied().find(|f| edits(f, unknown) <= 2))
}

/// Levenshtein distance (short strings only).
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (previous + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(here + 1);
            previous = here;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> anyhow::Result<Vec<Reservation>> {
        let dir = std::env::temp_dir().join(format!(
            "qm-reservations-file-{}-{}",
            std::process::id(),
            text.len()
        ));
        std::fs::create_dir_all(&dir)?;
        let path = dir.join("r.yaml");
        std::fs::write(&path, text)?;
        let out = read(&path, &Catalog::embedded_all_regions());
        let _ = std::fs::remove_dir_all(&dir);
        out
    }

    const BLOCK: &str = "- id: cr-block\n  instanceType: p5.48xlarge\n  zone: us-east-1a\n  count: 4\n  type: capacity-block\n  start: 2027-01-11T00:00:00Z\n  end: 2027-01-14T00:00:00Z\n  pricePerHour: 31.464\n  tags: {team: research}\n";

    #[test]
    fn a_block_is_read_with_its_window_and_tags() {
        let rs = read_text(BLOCK).unwrap();
        assert_eq!(rs.len(), 1);
        let r = &rs[0];
        assert_eq!(r.cloud, Cloud::Aws);
        assert_eq!(r.kind, ReservationKind::CapacityBlock);
        assert_eq!(r.count, 4);
        assert_eq!(r.available, None);
        assert_eq!(r.end.unwrap().to_rfc3339(), "2027-01-14T00:00:00+00:00");
        assert_eq!(r.tags["team"], "research");
    }

    #[test]
    fn every_problem_names_the_entry_and_the_field() {
        let cases = [
            (
                BLOCK.replace("count: 4", "count: four"),
                "reservations[0] (cr-block): count: expected a whole number",
            ),
            (
                BLOCK.replace("instanceType", "instanceTyp"),
                "reservations[0] (cr-block): instanceTyp: unknown field (did you mean \"instanceType\"?)",
            ),
            (
                BLOCK.replace("p5.48xlarge", "p5.49xlarge"),
                "reservations[0] (cr-block): instanceType: \"p5.49xlarge\" is not an instance type",
            ),
            (
                BLOCK.replace("us-east-1a", "us-east-1z"),
                "reservations[0] (cr-block): zone: the catalog does not offer p5.48xlarge in \"us-east-1z\"",
            ),
            (
                BLOCK.replace("2027-01-14T00:00:00Z", "next tuesday"),
                "reservations[0] (cr-block): end: \"next tuesday\" is not an RFC 3339 time",
            ),
            (
                BLOCK.replace("capacity-block", "block"),
                "reservations[0] (cr-block): type: unknown reservation type \"block\"",
            ),
            (
                BLOCK.replace("  end: 2027-01-14T00:00:00Z\n", ""),
                "reservations[0] (cr-block): end: required for a capacity-block",
            ),
            (
                BLOCK.replace("  pricePerHour: 31.464\n", ""),
                "reservations[0] (cr-block): pricePerHour: required",
            ),
            (
                format!("{BLOCK}{BLOCK}"),
                "reservations[1] (cr-block): id: given twice",
            ),
            (
                format!("{BLOCK}- {{zone: us-east-1a}}\n"),
                "reservations[1]: id: required",
            ),
            (
                BLOCK.replace("count: 4", "count: 4\n  available: 5"),
                "reservations[0] (cr-block): available: 5 is more than count (4)",
            ),
            ("id: cr-x\n".to_owned(), "expected a list of reservations"),
        ];
        for (text, want) in cases {
            let e = format!("{:#}", read_text(&text).unwrap_err());
            assert!(e.contains(want), "{e}\n  wanted: {want}");
            assert!(e.contains("r.yaml: "), "names the file: {e}");
        }
    }
}
