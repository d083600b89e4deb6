//! AWS Spot Instance Advisor interruption bands.
//!
//! The Spot Advisor publishes, per region, OS and instance type, the *frequency of
//! interruption* band of spot capacity over the trailing month (and the savings over
//! on-demand) as one JSON document:
//!
//! ```json
//! {"ranges": [{"index": 0, "label": "<5%", "dots": 0, "max": 5}, ...],
//!  "spot_advisor": {"us-east-1": {"Linux": {"p4d.24xlarge": {"s": 70, "r": 2}}}}}
//! ```
//!
//! `r` is the index of the type's band in `ranges`, `s` the savings in percent. This file
//! turns the Linux entries into per-(instance type, region) [`InterruptionBand`]s; fetching
//! the document is the caller's business.

use std::collections::BTreeMap;

use quartermaster_pricing::InterruptionBand;
use serde::Deserialize;

use crate::AwsError;

/// The operating system whose bands are read (nodes run Linux).
pub const OS: &str = "Linux";

/// Interruption bands by (instance type, region).
pub type SpotAdvisorBands = BTreeMap<(String, String), InterruptionBand>;

#[derive(Debug, Deserialize)]
struct Document {
    ranges: Vec<Range>,
    spot_advisor: BTreeMap<String, BTreeMap<String, BTreeMap<String, Entry>>>,
}

#[derive(Debug, Deserialize)]
struct Range {
    index: u32,
    label: String,
}

#[derive(Debug, Deserialize)]
struct Entry {
    /// Index into `ranges`.
    r: u32,
}

/// Reads the Spot Advisor document `json` into the Linux bands of each (instance type,
/// region). A document that is not valid JSON of that shape, a range whose label is not one
/// of the five bands, or an entry pointing at a range the document does not list is an
/// error naming what is wrong.
pub fn parse_spot_advisor(json: &str) -> Result<SpotAdvisorBands, AwsError> {
    let doc: Document =
        serde_json::from_str(json).map_err(|e| AwsError::SpotAdvisor(e.to_string()))?;
    let mut ranges: BTreeMap<u32, InterruptionBand> = BTreeMap::new();
    for range in &doc.ranges {
        let band = range.label.parse::<InterruptionBand>().map_err(|_| {
            AwsError::SpotAdvisor(format!(
                "range {}: unknown interruption band {:?}",
                range.index, range.label
            ))
        })?;
        ranges.insert(range.index, band);
    }
    let mut bands = SpotAdvisorBands::new();
    for (region, by_os) in &doc.spot_advisor {
        let Some(types) = by_os.get(OS) else {
            continue;
        };
        for (instance_type, entry) in types {
            let band = ranges.get(&entry.r).copied().ok_or_else(|| {
                AwsError::SpotAdvisor(format!(
                    "{region} {OS} {instance_type}: range {} is not among the document's ranges",
                    entry.r
                ))
            })?;
            bands.insert((instance_type.clone(), region.clone()), band);
        }
    }
    Ok(bands)
}

#[cfg(test)]
mod tests {
    use super::*;

    const RANGES: &str = r#"[
        {"index": 0, "label": "<5%", "dots": 0, "max": 5},
        {"index": 1, "label": "5-10%", "dots": 1, "max": 11},
        {"index": 2, "label": "10-15%", "dots": 2, "max": 16},
        {"index": 3, "label": "15-20%", "dots": 3, "max": 22},
        {"index": 4, "label": ">20%", "dots": 4, "max": 100}
    ]"#;

    fn doc(advisor: &str) -> String {
        format!(
            r#"{{"global_rate": "<10%", "instance_types": {{}}, "ranges": {RANGES},
                "spot_advisor": {advisor}}}"#
        )
    }

    #[test]
    fn linux_bands_by_type_and_region() {
        let json = doc(r#"{
            "us-east-1": {
                "Linux": {"p4d.24xlarge": {"s": 70, "r": 2}, "g5.xlarge": {"s": 60, "r": 4}},
                "Windows": {"m5.large": {"s": 50, "r": 0}}
            },
            "us-west-2": {"Linux": {"p4d.24xlarge": {"s": 65, "r": 0}}}
        }"#);
        let bands = parse_spot_advisor(&json).unwrap();
        let key = |t: &str, r: &str| (t.to_owned(), r.to_owned());
        assert_eq!(bands.len(), 3, "{bands:?}");
        assert_eq!(
            bands[&key("p4d.24xlarge", "us-east-1")],
            InterruptionBand::From10To15
        );
        assert_eq!(
            bands[&key("g5.xlarge", "us-east-1")],
            InterruptionBand::Over20
        );
        assert_eq!(
            bands[&key("p4d.24xlarge", "us-west-2")],
            InterruptionBand::Under5
        );
        assert!(!bands.contains_key(&key("m5.large", "us-east-1")));
    }

    #[test]
    fn bad_documents_are_errors_naming_the_problem() {
        let e = parse_spot_advisor("not json").unwrap_err();
        assert!(matches!(e, AwsError::SpotAdvisor(_)), "{e}");

        let e = parse_spot_advisor(&doc(
            r#"{"us-east-1": {"Linux": {"p5.48xlarge": {"s": 50, "r": 9}}}}"#,
        ))
        .unwrap_err();
        assert!(e.to_string().contains("p5.48xlarge"), "{e}");
        assert!(e.to_string().contains("range 9"), "{e}");

        let odd = r#"{"ranges": [{"index": 0, "label": "<7%"}], "spot_advisor": {}}"#;
        let e = parse_spot_advisor(odd).unwrap_err();
        assert!(e.to_string().contains("<7%"), "{e}");
    }
}
