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
    // m6i.large (curated) is a CPU type, left out of this part before its region is looked at.
    assert!(s.curated.is_empty());
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

/// The checked-in generated files are what the generator makes of them: rebuilding `vms.csv`
/// rows from their rows (and the facts) and generating again gives the same rows and metadata.
#[test]
fn checked_in_offerings_equal_the_generator_output_on_their_own_rows() {
    assert_eq!(EMBEDDED_OFFERINGS.len(), 6);
    for (facts_name, file, text) in EMBEDDED_OFFERINGS {
        // GCP prices a machine as host + GPU rows, which this round trip does not rebuild; its
        // files and Azure's are checked by `every_generated_row_is_an_offering_of_the_catalog`.
        if facts_name != "aws.toml" {
            continue;
        }
        // aws.csv predates the `#! part` line: without it a file holds accelerator types.
        let part = if text.contains("\n#! part = cpu\n") {
            Part::Cpu
        } else {
            Part::Accelerators
        };
        assert_eq!(file, format!("offerings/{}", part.file_name(Cloud::Aws)));
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
            part,
            "aws.toml",
            aws_facts(),
            &vms,
            &snapshot("any", read_on),
        )
        .unwrap();
        assert_eq!(body(&g.text), body(text), "{file}");
        assert_eq!(meta_value(&g.text, "part"), part.as_str(), "{file}");
        for key in ["cloud", "source", "as_of"] {
            assert_eq!(
                meta_value(&g.text, key),
                meta_value(text, key),
                "{file} {key}"
            );
        }
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
fn every_generated_row_is_an_offering_of_the_catalog() {
    let catalog = Catalog::embedded_all_regions();
    for (facts_name, file, text) in EMBEDDED_OFFERINGS {
        let cloud: Cloud = meta_value(text, "cloud").parse().unwrap();
        assert_eq!(facts_name, format!("{cloud}.toml"));
        // Every accelerator type of the snapshot is in the catalog, but those left out.
        if !text.contains("\n#! part = cpu\n") {
            let left_out: BTreeSet<&str> = meta_value(text, "left_out").split(' ').collect();
            let accelerators: Vec<&str> = meta_value(text, "accelerator_types")
                .split(' ')
                .filter(|t| !left_out.contains(t))
                .collect();
            assert!(accelerators.len() >= 15, "{file}");
            for name in &accelerators {
                let t = catalog.get(cloud, name).expect(name);
                assert!(t.accelerator.is_some(), "{name}");
            }
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
            let t = catalog.get(cloud, name).expect(name);
            assert!(
                t.offerings.iter().any(|o| o.region == *region
                    && o.zone == *zone
                    && o.capacity_type == *capacity),
                "{name} {zone} {capacity}"
            );
        }
        // And nothing else is in the regions the file covers (a type curated in one region and
        // generated in the others keeps its curated offerings apart).
        let covered: BTreeSet<(&str, &str)> = expected.iter().map(|k| (k.0, k.1)).collect();
        let generated: usize = catalog
            .for_cloud(cloud)
            .flat_map(|t| t.offerings.iter().map(move |o| (t.name.as_str(), o)))
            .filter(|(name, o)| covered.contains(&(*name, o.region.as_str())))
            .count();
        assert_eq!(generated, expected.len(), "{file}");
    }
}

#[test]
fn cpu_families_are_in_every_gcp_and_azure_region_with_gpus() {
    let catalog = Catalog::embedded_all_regions();
    // (cloud, default region, general, compute, memory), each a type-name prefix.
    for (cloud, default, families) in [
        (
            Cloud::Gcp,
            "us-central1",
            ["n2-standard-", "n2-highcpu-", "n2-highmem-"],
        ),
        (
            Cloud::Azure,
            "eastus",
            ["Standard_D", "Standard_F", "Standard_E"],
        ),
    ] {
        let mut gpu_regions = BTreeSet::new();
        let mut cpu: BTreeSet<(&str, usize)> = BTreeSet::new();
        for t in catalog.for_cloud(cloud) {
            for o in &t.offerings {
                if t.accelerator.is_some() {
                    gpu_regions.insert(o.region.as_str());
                } else if let Some(f) = families.iter().position(|p| t.name.starts_with(p)) {
                    cpu.insert((o.region.as_str(), f));
                }
            }
        }
        assert!(gpu_regions.len() >= 8, "{cloud}: {gpu_regions:?}");
        for region in &gpu_regions {
            for (f, prefix) in families.iter().enumerate() {
                // The default region keeps its curated CPU types (general purpose only).
                if *region == default && f > 0 {
                    continue;
                }
                assert!(
                    cpu.contains(&(*region, f)),
                    "{cloud}: no {prefix}* in {region}"
                );
            }
        }
    }
}

#[test]
fn a_snapshot_price_far_from_the_curated_one_leaves_the_type_out() {
    // m6i.large is curated at 0.096 in us-east-1 (here not the default region, whose CPU types
    // are never generated); a snapshot saying half that is disputed.
    let facts = FIXTURE_FACTS.replace(
        "default_region = \"us-east-1\"",
        "default_region = \"eu-west-1\"",
    );
    let vms = "InstanceType,AcceleratorName,AcceleratorCount,vCPUs,MemoryGiB,GpuInfo,Price,SpotPrice,Region,AvailabilityZone,Arch\n\
        m6i.large,,,2,8,,0.048,0.02,us-east-1,use1-az1,x86_64\n\
        m6i.large,,,2,8,,0.05,0.02,us-west-2,usw2-az1,x86_64\n";
    let g = generate(
        Cloud::Aws,
        Part::Cpu,
        "facts.toml",
        &facts,
        vms,
        &fixture_snapshot(),
    )
    .unwrap();
    assert!(rows(&g.text).is_empty(), "{:?}", rows(&g.text));
    assert_eq!(
        g.summary.disputed,
        BTreeSet::from(["m6i.large 0.048 in us-east-1a (curated 0.096, fixture)".to_owned()])
    );
    // Within 25%, the curated region stands and the others are generated.
    let vms = vms.replace("0.048", "0.1");
    let g = generate(
        Cloud::Aws,
        Part::Cpu,
        "facts.toml",
        &facts,
        &vms,
        &fixture_snapshot(),
    )
    .unwrap();
    assert_eq!(
        rows(&g.text),
        vec!["m6i.large,us-west-2,us-west-2a,usw2-az1,0.05,0.02"]
    );
    assert!(g.summary.disputed.is_empty());
    assert_eq!(g.summary.curated, BTreeSet::from(["m6i.large".to_owned()]));
}

fn apply_to_fixture(generated: &str) -> Result<crate::CatalogFile, PricingError> {
    let mut facts = Catalog::parse("facts.toml", FIXTURE_FACTS)?;
    apply("offerings.csv", generated, &mut facts)?;
    Ok(facts)
}

const HEAD: &str = "#! cloud = aws\n#! source = SKY-AWS\n#! as_of = 2026-12-04\ninstance_type,region,zone,zone_id,on_demand,spot\n";
const CPU_HEAD: &str = "#! cloud = aws\n#! source = SKY-AWS\n#! as_of = 2026-12-04\n#! part = cpu\ninstance_type,region,zone,zone_id,on_demand,spot\n";

#[test]
fn a_type_curated_in_one_region_is_generated_in_the_others() {
    let text = format!(
        "{CPU_HEAD}m6i.large,us-west-2,us-west-2a,usw2-az1,0.107,0.04\nm6i.large,us-west-2,us-west-2b,usw2-az2,0.107,\n"
    );
    let facts = apply_to_fixture(&text).unwrap();
    let m6i = facts
        .instance_types
        .iter()
        .find(|t| t.name == "m6i.large")
        .unwrap();
    let offerings: Vec<(&str, &str, CapacityType, f64)> = m6i
        .offerings
        .iter()
        .map(|o| {
            (
                o.region.as_str(),
                o.zone.as_str(),
                o.capacity_type,
                o.price_per_hour,
            )
        })
        .collect();
    use CapacityType::{OnDemand, Spot};
    assert_eq!(
        offerings,
        vec![
            ("us-east-1", "us-east-1a", OnDemand, 0.096),
            ("us-west-2", "us-west-2a", OnDemand, 0.107),
            ("us-west-2", "us-west-2b", OnDemand, 0.107),
            ("us-west-2", "us-west-2a", Spot, 0.04),
        ]
    );
}

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
            format!("{CPU_HEAD}m6i.large,us-east-1,us-east-1a,use1-az1,1.0,\n"),
            "curated offerings in us-east-1",
        ),
        (
            format!("{HEAD}m6i.large,us-west-2,us-west-2a,usw2-az1,1.0,\n"),
            "not of this file's part",
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

const GCP_FACTS: &str = include_str!("../tests/fixtures/catalog-gen/gcp/facts.toml");
const GCP_VMS: &str = include_str!("../tests/fixtures/catalog-gen/gcp/vms.csv");
const AZURE_FACTS: &str = include_str!("../tests/fixtures/catalog-gen/azure/facts.toml");
const AZURE_VMS: &str = include_str!("../tests/fixtures/catalog-gen/azure/vms.csv");

fn generate_fixture(
    cloud: Cloud,
    part: Part,
    facts: &str,
    vms: &str,
) -> crate::generate::Generated {
    let snapshot = Snapshot {
        repo: "skypilot-org/skypilot-catalog".into(),
        path: format!("catalogs/v8/{cloud}/vms.csv"),
        commit: "0123456789abcdef".into(),
        read_on: NaiveDate::from_ymd_opt(2026, 12, 4).unwrap(),
        extract: None,
    };
    generate(cloud, part, "facts.toml", facts, vms, &snapshot).unwrap()
}

fn rows(text: &str) -> Vec<&str> {
    body(text).lines().skip(1).collect()
}

#[test]
fn gcp_accelerator_optimized_types_cost_their_host_row_plus_their_gpu_row() {
    let g = generate_fixture(Cloud::Gcp, Part::Accelerators, GCP_FACTS, GCP_VMS);
    // a2-highgpu-1g in us-central1-a: host 0.73948 + one A100 2.93391, spot 0.36975 + 1.4341;
    // a2-highgpu-2g: host + the two-A100 row. europe-west4-a's A100 rows disagree (1.6 per GPU
    // for one, 3.2 for two): both are left out, and with them the types they would price there;
    // us-west3-b has no A100 row.
    assert_eq!(
        rows(&g.text),
        vec![
            "a2-highgpu-1g,us-central1,us-central1-a,us-central1-a,3.67339,1.80385",
            "a2-highgpu-1g,us-central1,us-central1-b,us-central1-b,3.67339,1.80385",
            "a2-highgpu-2g,us-central1,us-central1-a,us-central1-a,7.34677,3.6077",
        ]
    );
    let s = &g.summary;
    let dropped = |why: &str| s.dropped.get(why).copied().unwrap_or(0);
    assert_eq!(
        dropped(
            "GPU row whose per-GPU price is off its zone's median for that GPU by more than 10% (left out)"
        ),
        2
    );
    assert_eq!(
        dropped("accelerator-optimized host row without its GPU row in the zone"),
        3
    );
    assert_eq!(dropped("TPU rows (TPUs are not modelled)"), 1);
    assert_eq!(dropped("CPU type (in the -cpu file)"), 3);
    assert_eq!(s.left_out, BTreeSet::from(["a3-highgpu-1g".to_owned()]));
    assert_eq!(s.other_accelerators, BTreeSet::from(["T4".to_owned()]));
    assert_eq!(meta_value(&g.text, "left_out"), "a3-highgpu-1g");
    assert_eq!(meta_value(&g.text, "source"), "SKY-GCP");
    assert!(g.text.contains("N1-attached, not modelled): T4"));
}

#[test]
fn cpu_types_are_generated_outside_the_default_region_only() {
    let g = generate_fixture(Cloud::Gcp, Part::Cpu, GCP_FACTS, GCP_VMS);
    // us-central1 is the facts file's default region; a spot price of 0 is no spot figure.
    assert_eq!(
        rows(&g.text),
        vec![
            "n2-standard-4,europe-west4,europe-west4-a,europe-west4-a,0.21372,0.0511",
            "n2-standard-4,europe-west4,europe-west4-b,europe-west4-b,0.21372,",
        ]
    );
    assert_eq!(meta_value(&g.text, "part"), "cpu");
    assert_eq!(
        g.summary.dropped["CPU type in the default region (the curated CPU types stand there)"],
        1
    );
}

#[test]
fn azure_rows_are_offered_in_three_zones_of_their_region() {
    let g = generate_fixture(Cloud::Azure, Part::Accelerators, AZURE_FACTS, AZURE_VMS);
    let mut want = Vec::new();
    for (name, region, od, spot) in [
        ("Standard_NC24ads_A100_v4", "eastus", "3.673", "0.444433"),
        ("Standard_NC24ads_A100_v4", "westeurope", "4.041", "0.5111"),
        // Spot equal to on-demand: no spot figure.
        ("Standard_NC40ads_H100_v5", "eastus", "6.98", ""),
    ] {
        for z in 1..=3 {
            want.push(format!("{name},{region},{region}-{z},{region},{od},{spot}"));
        }
    }
    assert_eq!(rows(&g.text), want);
    let s = &g.summary;
    assert_eq!(
        s.dropped["type listed twice for a zone or region (the lower prices kept)"],
        1
    );
    assert_eq!(
        s.left_out,
        BTreeSet::from(["Standard_ND96isr_MI300X_v5".to_owned()])
    );
    let cpu = generate_fixture(Cloud::Azure, Part::Cpu, AZURE_FACTS, AZURE_VMS);
    assert_eq!(
        rows(&cpu.text),
        (1..=3)
            .map(|z| format!("Standard_D4s_v5,westeurope,westeurope-{z},westeurope,0.21,0.042"))
            .collect::<Vec<_>>()
    );
}

#[test]
fn gcp_and_azure_output_loads_and_does_not_depend_on_the_row_order() {
    for (cloud, facts, vms) in [
        (Cloud::Gcp, GCP_FACTS, GCP_VMS),
        (Cloud::Azure, AZURE_FACTS, AZURE_VMS),
    ] {
        let mut lines: Vec<&str> = vms.lines().collect();
        lines[1..].reverse();
        let reversed = lines.join("\n") + "\n";
        let mut loaded = Catalog::parse("facts.toml", facts).unwrap();
        for part in Part::ALL {
            let a = generate_fixture(cloud, part, facts, vms);
            let b = generate_fixture(cloud, part, facts, &reversed);
            assert_eq!(a.text, b.text, "{cloud} {part:?}");
            apply("offerings.csv", &a.text, &mut loaded).unwrap();
        }
        // Every type of the fixture facts got offerings, from one part or the other.
        assert!(
            loaded
                .instance_types
                .iter()
                .all(|t| !t.offerings.is_empty())
        );
        let spot_sources: BTreeSet<&str> = loaded
            .instance_types
            .iter()
            .flat_map(|t| &t.offerings)
            .filter(|o| o.capacity_type == CapacityType::Spot)
            .map(|o| o.price_source.as_str())
            .collect();
        let want: BTreeSet<&str> = match cloud {
            Cloud::Gcp => [
                "SKY-GCP:europe-west4-a",
                "SKY-GCP:us-central1-a",
                "SKY-GCP:us-central1-b",
            ]
            .into(),
            _ => ["SKY-AZURE:eastus", "SKY-AZURE:westeurope"].into(),
        };
        assert_eq!(spot_sources, want, "{cloud}");
    }
}

#[test]
fn a_generated_file_holds_the_types_of_its_part_only() {
    let text = "#! cloud = aws\n#! part = cpu\n#! source = SKY-AWS\n#! as_of = 2026-12-04\ninstance_type,region,zone,zone_id,on_demand,spot\ng6.xlarge,us-east-1,us-east-1a,use1-az1,1.0,\n";
    let e = apply_to_fixture(text).unwrap_err().to_string();
    assert!(e.contains("is not of this file's part (cpu)"), "{e}");
}

/// A CPU pod next to GPU pods can be placed in every AWS region that sells GPUs: each has a
/// general-purpose and a compute-optimized CPU type, and a memory-optimized one except where
/// the snapshot sells none of ours (r7i.xlarge: not in ap-east-1 and me-central-1).
#[test]
fn cpu_families_are_in_every_aws_region_with_gpus() {
    let catalog = Catalog::embedded_all_regions();
    let mut gpu_regions = BTreeSet::new();
    let mut cpu: BTreeSet<(&str, char)> = BTreeSet::new();
    for t in catalog.for_cloud(Cloud::Aws) {
        for o in &t.offerings {
            if t.accelerator.is_some() {
                gpu_regions.insert(o.region.as_str());
            } else if o.capacity_type == CapacityType::OnDemand {
                cpu.insert((o.region.as_str(), t.family.chars().next().unwrap()));
            }
        }
    }
    assert_eq!(gpu_regions.len(), 19);
    for region in &gpu_regions {
        for family in ['m', 'c', 'r'] {
            if family == 'r' && ["ap-east-1", "me-central-1"].contains(region) {
                continue;
            }
            assert!(
                cpu.contains(&(*region, family)),
                "no {family} CPU type in {region}"
            );
        }
    }
    // The generated CPU types stay out of the default region, whose catalog is unchanged.
    let default = Catalog::embedded();
    for name in [
        "m7i.large",
        "m7i.xlarge",
        "c7i.large",
        "c7i.xlarge",
        "r7i.xlarge",
    ] {
        assert!(default.get(Cloud::Aws, name).is_none(), "{name}");
        let t = catalog.get(Cloud::Aws, name).expect(name);
        assert!(
            t.offerings.iter().all(|o| o.region != "us-east-1"),
            "{name}"
        );
        assert!(
            t.offerings
                .iter()
                .any(|o| o.capacity_type == CapacityType::Spot),
            "{name}"
        );
    }
}

#[test]
fn coverage_counts_gpu_and_cpu_types_apart() {
    let catalog = Catalog::embedded_all_regions();
    let rows = crate::coverage::coverage(&catalog);
    assert_eq!(rows.len(), 6);
    for cloud in Cloud::ALL {
        let types = catalog
            .for_cloud(cloud)
            .filter(|t| !t.offerings.is_empty())
            .count();
        let counted: usize = rows
            .iter()
            .filter(|r| r.cloud == cloud)
            .map(|r| r.types)
            .sum();
        assert_eq!(counted, types, "{cloud}");
    }
    let aws_cpu = rows
        .iter()
        .find(|r| r.cloud == Cloud::Aws && !r.accelerators)
        .unwrap();
    assert!(aws_cpu.regions >= 20 && aws_cpu.spot > 300, "{aws_cpu:?}");
    let table = crate::coverage::markdown(&rows);
    assert_eq!(table.lines().count(), 8);
    assert!(table.contains("| aws | CPU |"));
}

/// GCP's disputed types (the snapshot prices them at about half K-GCP-P's list price) take no
/// on-demand figure from the snapshot, and are curated wherever K-GCP-P prices them and the
/// snapshot lists their zones: every region of the snapshot with GPU rows has GPU offerings,
/// but us-west2, whose only GPU is the B200 priced 0.0.
#[test]
fn gcp_disputed_types_are_priced_by_their_second_source_in_every_region() {
    let catalog = Catalog::embedded_all_regions();
    for name in [
        "a3-highgpu-8g",
        "a3-highgpu-1g",
        "a2-ultragpu-8g",
        "a3-megagpu-8g",
    ] {
        let t = catalog.get(Cloud::Gcp, name).unwrap();
        let on_demand: Vec<_> = t
            .offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::OnDemand)
            .collect();
        assert!(
            on_demand
                .iter()
                .all(|o| o.price_source.starts_with("K-GCP-P")),
            "{name}"
        );
        let regions: BTreeSet<&str> = on_demand.iter().map(|o| o.region.as_str()).collect();
        assert!(regions.len() >= 5, "{name}: {regions:?}");
    }
    let gpu_regions: BTreeSet<&str> = catalog
        .for_cloud(Cloud::Gcp)
        .filter(|t| t.accelerator.is_some())
        .flat_map(|t| t.offerings.iter().map(|o| o.region.as_str()))
        .collect();
    for region in [
        "australia-southeast1",
        "europe-north1",
        "europe-west9",
        "europe-west4",
    ] {
        assert!(gpu_regions.contains(region), "{region}");
    }
    assert_eq!(gpu_regions.len(), 26);
}
