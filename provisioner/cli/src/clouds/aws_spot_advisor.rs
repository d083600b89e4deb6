//! `catalog --live --cloud aws`: the AWS Spot Instance Advisor's interruption bands on the spot
//! offerings, so `plan --catalog` on the written file prices spot by expected cost.
//!
//! The Advisor publishes one public JSON document (no credentials) with, per region and OS, the
//! band of each instance type's interruption frequency over the trailing month. It is per
//! region, so every zone of the region gets the type's band.

use std::time::Duration;

use anyhow::Context as _;
use chrono::NaiveDate;
use quartermaster_aws::spot_advisor::{SpotAdvisorBands, parse_spot_advisor};
use quartermaster_pricing::{CapacityType, Catalog, Cloud, SpotInterruption};

/// Where AWS publishes the Spot Instance Advisor's data.
pub const SPOT_ADVISOR_URL: &str =
    "https://spot-bid-advisor.s3.amazonaws.com/spot-advisor-data.json";

/// The source key the bands carry.
pub const SOURCE: &str = "aws-spot-advisor";

/// The Advisor's address: `AWS_SPOT_ADVISOR_URL` when set (a mirror, a test server), else
/// [`SPOT_ADVISOR_URL`].
pub fn url() -> String {
    std::env::var("AWS_SPOT_ADVISOR_URL").unwrap_or_else(|_| SPOT_ADVISOR_URL.to_owned())
}

/// Reads the Advisor's document at `url`. A dead endpoint fails within seconds.
pub fn fetch(url: &str) -> anyhow::Result<SpotAdvisorBands> {
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_connect(Some(Duration::from_secs(5)))
        .timeout_global(Some(Duration::from_secs(60)))
        .http_status_as_error(false)
        .build()
        .into();
    let mut response = agent
        .get(url)
        .call()
        .with_context(|| format!("calling {url}"))?;
    let status = response.status();
    let body = response
        .body_mut()
        .with_config()
        .limit(1 << 26)
        .read_to_string()
        .with_context(|| format!("reading the answer of {url}"))?;
    if !status.is_success() {
        anyhow::bail!(
            "{url} answered {status}: {}",
            body.chars().take(300).collect::<String>()
        );
    }
    Ok(parse_spot_advisor(&body)?)
}

/// `catalog` with the band of `region` on every spot offering of its AWS types there, as of
/// `today`; also how many offerings got one.
pub fn apply(
    mut catalog: Catalog,
    bands: &SpotAdvisorBands,
    region: &str,
    today: NaiveDate,
) -> (Catalog, usize) {
    let mut targets = Vec::new();
    for it in catalog.for_cloud(Cloud::Aws) {
        let Some(band) = bands.get(&(it.name.clone(), region.to_owned())) else {
            continue;
        };
        for o in &it.offerings {
            if o.capacity_type == CapacityType::Spot && o.region == region {
                targets.push((it.name.clone(), o.zone.clone(), *band));
            }
        }
    }
    let applied = targets.len();
    for (name, zone, band) in targets {
        catalog = catalog.with_spot_interruption(
            Cloud::Aws,
            &name,
            &zone,
            SpotInterruption {
                band,
                source: SOURCE.to_owned(),
                as_of: today,
            },
        );
    }
    (catalog, applied)
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};
    use std::net::TcpListener;

    use quartermaster_pricing::InterruptionBand;

    use super::*;

    const DOC: &str = r#"{
        "ranges": [
            {"index": 0, "label": "<5%", "dots": 0, "max": 5},
            {"index": 4, "label": ">20%", "dots": 4, "max": 100}
        ],
        "spot_advisor": {
            "us-east-1": {"Linux": {"g5.xlarge": {"s": 70, "r": 0}, "m6i.large": {"s": 60, "r": 4}}},
            "us-west-2": {"Linux": {"g5.xlarge": {"s": 70, "r": 0}}}
        }
    }"#;

    /// Serves `body` once with `status` on 127.0.0.1; returns its URL.
    fn serve_once(status: &'static str, body: &'static str) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("addr");
        std::thread::spawn(move || {
            if let Ok((mut stream, _)) = listener.accept() {
                let mut buf = [0u8; 4096];
                let _ = stream.read(&mut buf);
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        format!("http://{addr}/spot-advisor-data.json")
    }

    fn today() -> NaiveDate {
        NaiveDate::from_ymd_opt(2026, 12, 1).expect("date")
    }

    #[test]
    fn the_regions_bands_land_on_every_spot_offering_of_the_type_there() {
        let bands = fetch(&serve_once("200 OK", DOC)).expect("the document");
        let (catalog, applied) = apply(
            Catalog::embedded_all_regions(),
            &bands,
            "us-east-1",
            today(),
        );
        assert!(applied > 0);
        let m6i = catalog.get(Cloud::Aws, "m6i.large").expect("m6i.large");
        let spot: Vec<_> = m6i
            .offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::Spot && o.region == "us-east-1")
            .collect();
        assert!(!spot.is_empty());
        for o in spot {
            let s = catalog.spot_interruption(m6i, o).expect("a band");
            assert_eq!(s.band, InterruptionBand::Over20);
            assert_eq!(s.source, SOURCE);
        }
        // On-demand offerings and other regions are left alone.
        for o in &m6i.offerings {
            if o.capacity_type == CapacityType::OnDemand || o.region != "us-east-1" {
                assert!(catalog.spot_interruption(m6i, o).is_none(), "{o:?}");
            }
        }
    }

    #[test]
    fn a_failing_or_dead_advisor_is_an_error_naming_it() {
        let e = fetch(&serve_once("503 Service Unavailable", "down")).expect_err("503");
        assert!(format!("{e:#}").contains("503"), "{e:#}");
        let e = fetch("http://127.0.0.1:1/spot-advisor-data.json").expect_err("dead");
        assert!(format!("{e:#}").contains("127.0.0.1:1"), "{e:#}");
        let e = fetch(&serve_once("200 OK", "{\"ranges\": 3}")).expect_err("nonsense");
        assert!(!format!("{e:#}").is_empty());
    }
}
