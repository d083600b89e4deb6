//! Tests of the catalog generator ([`crate::generate`]) and of the generated offerings the
//! embedded catalog loads ([`crate::generated`]).

use std::collections::BTreeSet;

use chrono::NaiveDate;

use crate::generate::{Part, Snapshot, generate, zone_letter};
use crate::generated::{COLUMNS, apply};
use crate::{CapacityType, Catalog, Cloud, EMBEDDED_FILES, EMBEDDED_OFFERINGS, PricingError};

const FIXTURE_FACTS: &str = include_str!("../tests/fixtures/catalog-gen/facts.toml");
const FIXTURE_VMS: &str = include_str!("../tests/fixtures/catalog-gen/vms.csv");
const FIXTURE_EXPECTED: &str = include_str!("../tests/fixtures/catalog-gen/expected.csv");

fn snapshot(commit: &str, read_on: NaiveDate) -> Snapshot {
    Snapshot {
        repo: "skypilot-org/skypilot-catalog".into(),
        path: "catalogs/v8/aws/vms.csv".into(),
        commit: commit.into(),
        read_on,
        extract: None,
    }
}

fn fixture_snapshot() -> Snapshot {
    snapshot(
        "0123456789abcdef",
        NaiveDate::from_ymd_opt(2026, 12, 4).unwrap(),
    )
}

fn aws_facts() -> &'static str {
    EMBEDDED_FILES
        .iter()
        .find(|(n, _)| *n == "aws.toml")
        .unwrap()
        .1
}

fn aws_generated() -> &'static str {
    EMBEDDED_OFFERINGS[0].2
}

/// The `#! key = value` metadata of a generated file.
fn meta_value<'a>(text: &'a str, key: &str) -> &'a str {
    text.lines()
        .filter_map(|l| l.strip_prefix("#!"))
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim())
        .unwrap_or_else(|| panic!("no #! {key}"))
}

/// Everything from the column line on.
fn body(text: &str) -> &str {
    &text[text.find(COLUMNS).expect("column line")..]
}

#[test]
fn generator_output_on_the_fixture_is_the_checked_in_expectation() {
    let g = generate(
        Cloud::Aws,
        Part::Accelerators,
        "facts.toml",
        FIXTURE_FACTS,
        FIXTURE_VMS,
        &fixture_snapshot(),
    )
    .unwrap();
    // `QM_BLESS=1 cargo test -p quartermaster-pricing generator_output` rewrites the expectation
    // after a deliberate change of the generator (review the diff).
    if std::env::var_os("QM_BLESS").is_some() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/catalog-gen/expected.csv"
        );
        std::fs::write(path, &g.text).unwrap();
        return;
    }
    assert_eq!(g.text, FIXTURE_EXPECTED);
    let s = &g.summary;
    assert_eq!((s.rows_read, s.types, s.regions), (11, 2, 2));
    assert_eq!((s.on_demand, s.spot), (7, 4));
    assert_eq!(s.left_out, BTreeSet::from(["g5g.xlarge".to_owned()]));
    assert_eq!(s.curated, BTreeSet::from(["m6i.large".to_owned()]));
}

#[test]
fn generator_is_deterministic_whatever_the_row_order() {
    let mut lines: Vec<&str> = FIXTURE_VMS.lines().collect();
    lines[1..].reverse();
    let reversed = lines.join("\n") + "\n";
    let a = generate(
        Cloud::Aws,
        Part::Accelerators,
        "facts.toml",
        FIXTURE_FACTS,
        FIXTURE_VMS,
        &fixture_snapshot(),
    )
    .unwrap();
    let b = generate(
        Cloud::Aws,
        Part::Accelerators,
        "facts.toml",
        FIXTURE_FACTS,
        &reversed,
        &fixture_snapshot(),
    )
    .unwrap();
    assert_eq!(a.text, b.text);
}

#[test]
fn generator_applies_the_rules() {
    let g = generate(
        Cloud::Aws,
        Part::Accelerators,
        "facts.toml",
        FIXTURE_FACTS,
        FIXTURE_VMS,
        &fixture_snapshot(),
    )
    .unwrap();
    let rows: Vec<&str> = body(&g.text).lines().skip(1).collect();
    // AZ ID -> zone name; spot equal to on-demand (use1-az6) and the empty spot (use1-az4) give
    // on-demand only; the Local Zone row (usw2-lax1-az1) is left out.
    assert!(rows.contains(&"g6.xlarge,us-east-1,us-east-1d,use1-az4,0.8048,"));
    assert!(rows.contains(&"g6.xlarge,us-east-1,us-east-1f,use1-az6,0.8048,"));
    assert!(!rows.iter().any(|r| r.contains("lax1")));
    // The p4d.24xlarge use1-az1 spot outlier is dropped, its on-demand kept.
    assert!(rows.contains(&"p4d.24xlarge,us-east-1,us-east-1a,use1-az1,21.96,"));
    // Types without facts, and types with curated offerings, are not generated.
    assert!(
        !rows
            .iter()
            .any(|r| r.starts_with("c7i.") || r.starts_with("g5g."))
    );
    assert!(!rows.iter().any(|r| r.starts_with("m6i.")));
    assert_eq!(meta_value(&g.text, "left_out"), "g5g.xlarge");
}

#[test]
fn generator_rejects_a_snapshot_that_disagrees_with_the_facts() {
    let vms = FIXTURE_VMS.replace("g6.xlarge,L4,1.0,4.0,16.0", "g6.xlarge,L4,1.0,8.0,16.0");
    let e = generate(
        Cloud::Aws,
        Part::Accelerators,
        "facts.toml",
        FIXTURE_FACTS,
        &vms,
        &fixture_snapshot(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("8 vCPUs"), "{e}");
}

#[test]
fn az_ids_map_to_zone_letters_and_local_zones_have_none() {
    assert_eq!(zone_letter("use1-az1"), Some('a'));
    assert_eq!(zone_letter("usw2-az4"), Some('d'));
    assert_eq!(zone_letter("apne1-az6"), Some('f'));
    assert_eq!(zone_letter("usw2-lax1-az1"), None);
    assert_eq!(zone_letter("use1-atl2-az1"), None);
    assert_eq!(zone_letter("use1-wl1-bos-wlz1"), None);
    assert_eq!(zone_letter("use1-az0"), None);
}

/// The checked-in generated file is what the generator makes of it: rebuilding `vms.csv` rows
/// from its rows (and the facts) and generating again gives the same rows and metadata.
#[test]
fn checked_in_offerings_equal_the_generator_output_on_their_own_rows() {
    let text = aws_generated();
    let facts = Catalog::parse("aws.toml", aws_facts()).unwrap();
    let mut vms = String::from(
        "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone,Arch\n",
    );
    for row in body(text).lines().skip(1) {
        let f: Vec<&str> = row.split(',').collect();
        let t = facts
            .instance_types
            .iter()
            .find(|t| t.name == f[0])
            .unwrap();
        let acc = t.accelerator.as_ref().map_or("", |a| a.name.as_str());
        let gib = t.memory_mib as f64 / 1024.0;
        vms.push_str(&format!(
            "{},{acc},,{},{gib},,{},{},{},{},x86_64\n",
            f[0], t.vcpu, f[4], f[5], f[1], f[3]
        ));
    }
    let read_on = NaiveDate::parse_from_str(meta_value(text, "as_of"), "%Y-%m-%d").unwrap();
    let g = generate(
        Cloud::Aws,
        Part::Accelerators,
        "aws.toml",
        aws_facts(),
        &vms,
        &snapshot("any", read_on),
    )
    .unwrap();
    assert_eq!(body(&g.text), body(text));
    for key in ["cloud", "source", "as_of"] {
        assert_eq!(meta_value(&g.text, key), meta_value(text, key), "{key}");
    }
}

#[test]
fn g5_g6_g6e_have_spot_offerings_in_us_east_1() {
    for catalog in [Catalog::embedded(), Catalog::embedded_all_regions()] {
        let types: Vec<_> = catalog
            .for_cloud(Cloud::Aws)
            .filter(|t| ["g5", "g6", "g6e"].contains(&t.family.as_str()))
            .collect();
        assert_eq!(types.len(), 24);
        for t in types {
            assert!(
                t.offerings.iter().any(|o| o.region == "us-east-1"
                    && o.capacity_type == CapacityType::Spot
                    && o.price_source.starts_with("SKY-AWS:use1-az")),
                "{} has no us-east-1 spot offering",
                t.name
            );
        }
    }
}

/// Every accelerator type of the snapshot that is not listed as left out is in the catalog,
/// with every region and capacity type the generated file gives it.
#[test]
fn every_snapshot_accelerator_type_is_in_the_catalog_with_its_regions_and_capacity_types() {
    let text = aws_generated();
    let left_out: BTreeSet<&str> = meta_value(text, "left_out").split(' ').collect();
    let catalog = Catalog::embedded_all_regions();
    let accelerators: Vec<&str> = meta_value(text, "accelerator_types")
        .split(' ')
        .filter(|t| !left_out.contains(t))
        .collect();
    assert!(accelerators.len() >= 24);
    for name in &accelerators {
        let t = catalog.get(Cloud::Aws, name).expect(name);
        assert!(t.accelerator.is_some(), "{name}");
    }
    let mut expected = BTreeSet::new();
    for row in body(text).lines().skip(1) {
        let f: Vec<&str> = row.split(',').collect();
        expected.insert((f[0], f[1], f[2], CapacityType::OnDemand));
        if !f[5].is_empty() {
            expected.insert((f[0], f[1], f[2], CapacityType::Spot));
        }
    }
    for (name, region, zone, capacity) in &expected {
        let t = catalog.get(Cloud::Aws, name).expect(name);
        assert!(
            t.offerings
                .iter()
                .any(|o| o.region == *region && o.zone == *zone && o.capacity_type == *capacity),
            "{name} {zone} {capacity}"
        );
    }
    let generated_types: BTreeSet<&str> = expected.iter().map(|k| k.0).collect();
    let generated: usize = catalog
        .for_cloud(Cloud::Aws)
        .filter(|t| generated_types.contains(t.name.as_str()))
        .map(|t| t.offerings.len())
        .sum();
    assert_eq!(generated, expected.len());
}

fn apply_to_fixture(generated: &str) -> Result<crate::CatalogFile, PricingError> {
    let mut facts = Catalog::parse("facts.toml", FIXTURE_FACTS)?;
    apply("offerings.csv", generated, &mut facts)?;
    Ok(facts)
}

const HEAD: &str = "#! cloud = aws\n#! source = SKY-AWS\n#! as_of = 2026-12-04\ninstance_type,region,zone,zone_id,on_demand,spot\n";

#[test]
fn loading_the_fixture_output_gives_on_demand_then_spot_per_region() {
    let facts = apply_to_fixture(FIXTURE_EXPECTED).unwrap();
    let g6 = facts
        .instance_types
        .iter()
        .find(|t| t.name == "g6.xlarge")
        .unwrap();
    let got: Vec<(&str, CapacityType, f64, &str)> = g6
        .offerings
        .iter()
        .map(|o| {
            (
                o.zone.as_str(),
                o.capacity_type,
                o.price_per_hour,
                o.price_source.as_str(),
            )
        })
        .collect();
    use CapacityType::{OnDemand, Spot};
    assert_eq!(
        got,
        vec![
            ("ap-northeast-2a", OnDemand, 0.9896, "SKY-AWS"),
            ("ap-northeast-2a", Spot, 0.3409, "SKY-AWS:apne2-az1"),
            ("us-east-1a", OnDemand, 0.8048, "SKY-AWS"),
            ("us-east-1b", OnDemand, 0.8048, "SKY-AWS"),
            ("us-east-1d", OnDemand, 0.8048, "SKY-AWS"),
            ("us-east-1f", OnDemand, 0.8048, "SKY-AWS"),
            ("us-east-1a", Spot, 0.4011, "SKY-AWS:use1-az1"),
            ("us-east-1b", Spot, 0.3653, "SKY-AWS:use1-az2"),
        ]
    );
    assert!(
        g6.offerings
            .iter()
            .all(|o| o.price_as_of == NaiveDate::from_ymd_opt(2026, 12, 4).unwrap())
    );
}

#[test]
fn loading_rejects_bad_generated_files() {
    let cases = [
        (
            format!("{HEAD}g9.xlarge,us-east-1,us-east-1a,use1-az1,1.0,\n"),
            "no entry",
        ),
        (
            format!("{HEAD}m6i.large,us-east-1,us-east-1a,use1-az1,1.0,\n"),
            "curated offerings",
        ),
        (
            format!(
                "{HEAD}g6.xlarge,us-east-1,us-east-1b,use1-az2,1.0,\ng6.xlarge,us-east-1,us-east-1a,use1-az1,1.0,\n"
            ),
            "sorted",
        ),
        (
            format!("{HEAD}g6.xlarge,us-east-1,us-west-2a,use1-az1,1.0,\n"),
            "not in region",
        ),
        (
            format!("{HEAD}g6.xlarge,us-east-1,us-east-1a,use1-az1,20000,\n"),
            "at most",
        ),
        (
            format!("{HEAD}g6.xlarge,us-east-1,us-east-1a,use1-az1,1.0,NaN\n"),
            "spot",
        ),
        (
            format!("{HEAD}g6.xlarge,us-east-1,us-east-1a,use1-az1,1.0\n"),
            "6 columns",
        ),
        (
            format!("{HEAD}g6.xlarge,us-east-1,us-east-1a,use1-az1,1.0,\n"),
            "p4d.24xlarge\" of facts.toml has no offerings",
        ),
        (
            "instance_type,region,zone,zone_id,on_demand,spot\n".to_owned(),
            "#! cloud",
        ),
    ];
    for (text, want) in cases {
        let e = apply_to_fixture(&text).unwrap_err().to_string();
        assert!(e.contains(want), "{want:?} not in {e:?}");
        assert!(e.starts_with("offerings.csv: line "), "{e}");
    }
}
