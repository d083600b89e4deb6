//! Tests of the embedded data and of catalog-file parsing, validation and overrides.

use std::collections::HashSet;

use crate::{
    CapacityType, Catalog, CatalogMode, Cloud, EMBEDDED_FILES, Interconnect, PricingError, labels,
    resources,
};

fn embedded() -> Catalog {
    Catalog::embedded()
}

/// The cheapest price of a type in its cloud's default region.
fn price(cloud: Cloud, name: &str, ct: CapacityType) -> f64 {
    embedded()
        .in_default_regions()
        .get(cloud, name)
        .unwrap_or_else(|| panic!("{name} missing"))
        .cheapest_offering(Some(ct))
        .unwrap_or_else(|| panic!("{name} has no {ct} offering"))
        .price_per_hour
}

// ------------------------------------------------------------------ embedded data

#[test]
fn embedded_files_parse_and_hold_only_their_cloud() {
    for (file, text) in EMBEDDED_FILES {
        let parsed = Catalog::parse(file, text).unwrap_or_else(|e| panic!("{e}"));
        let cloud: Cloud = file.trim_end_matches(".toml").parse().unwrap();
        assert!(!parsed.instance_types.is_empty(), "{file} is empty");
        for t in &parsed.instance_types {
            assert_eq!(t.cloud, cloud, "{file}: {} has the wrong cloud", t.name);
        }
        assert_eq!(parsed.mode, CatalogMode::Extend);
    }
}

#[test]
fn embedded_has_at_least_40_accelerator_types_over_three_clouds() {
    let c = embedded();
    let accel: Vec<_> = c
        .instance_types()
        .iter()
        .filter(|t| t.accelerator.is_some())
        .collect();
    assert!(accel.len() >= 40, "only {} accelerator types", accel.len());
    for cloud in Cloud::ALL {
        assert!(
            accel.iter().any(|t| t.cloud == cloud),
            "no accelerators on {cloud}"
        );
        let cpu_only = c
            .for_cloud(cloud)
            .filter(|t| t.accelerator.is_none())
            .count();
        // A few per cloud for CPU pods (AWS: x86 m6i/c6i/r6i and Graviton m7g/c7g/r7g).
        assert!(
            (3..=30).contains(&cpu_only),
            "{cloud}: {cpu_only} CPU types"
        );
    }
}

#[test]
fn current_aws_prices_not_marketing_figures() {
    assert_eq!(
        price(Cloud::Aws, "p5.48xlarge", CapacityType::OnDemand),
        55.04
    );
    assert_eq!(
        price(Cloud::Aws, "p4d.24xlarge", CapacityType::OnDemand),
        21.957642
    );
    assert_eq!(
        price(Cloud::Aws, "dl1.24xlarge", CapacityType::OnDemand),
        13.10904
    );
    assert_eq!(
        price(Cloud::Aws, "trn1.2xlarge", CapacityType::OnDemand),
        1.34375
    );
    assert_eq!(
        price(
            Cloud::Azure,
            "Standard_ND96amsr_A100_v4",
            CapacityType::OnDemand
        ),
        32.77
    );
    for t in embedded().instance_types() {
        for o in &t.offerings {
            assert!(
                ![98.32_f64, 32.77].contains(&o.price_per_hour) || t.cloud == Cloud::Azure,
                "{} carries an outdated AWS marketing price",
                t.name
            );
        }
    }
}

#[test]
fn reference_doc_prices_are_exact() {
    let cases: &[(Cloud, &str, f64, Option<f64>)] = &[
        (Cloud::Aws, "p4de.24xlarge", 27.44705, Some(8.6505)),
        (Cloud::Aws, "p5.4xlarge", 6.88, None),
        (Cloud::Aws, "p5en.48xlarge", 63.296, Some(16.5551)),
        // g5/g6/g6e offerings are generated from SKY-AWS (data/offerings/aws.csv): spot in
        // us-east-1 since 2026-12-04 (g5.xlarge use1-az2, g6e.48xlarge use1-az1).
        (Cloud::Aws, "g5.xlarge", 1.006, Some(0.4246)),
        (Cloud::Aws, "g6e.48xlarge", 30.13118, Some(8.0189)),
        (Cloud::Aws, "inf2.48xlarge", 12.98127, Some(4.1929)),
        // GCP: generated from SKY-GCP since 2026-12-06 (data/offerings/gcp.csv, host + GPU
        // rows): a2-highgpu-1g's on-demand equals the reference doc's K-GCP-P 3.673385 to the
        // cent; spot is SKY-GCP's, not the reference's K-GCP-P 1.92802. a3-highgpu-8g stays
        // curated (the snapshot's H100 figure is disputed, see gcp.toml) with SKY-GCP spot
        // rather than K-GCP-P's 50.6095.
        (Cloud::Gcp, "a2-highgpu-1g", 3.67339, Some(1.80385)),
        (Cloud::Gcp, "a3-highgpu-8g", 88.49, Some(26.83013)),
        (Cloud::Gcp, "g2-standard-96", 8.00333, Some(3.19446)),
        (Cloud::Azure, "Standard_ND96isr_H100_v5", 98.32, None),
        (Cloud::Azure, "Standard_NV6ads_A10_v5", 0.454, None),
    ];
    for &(cloud, name, od, spot) in cases {
        assert_eq!(price(cloud, name, CapacityType::OnDemand), od, "{name}");
        let t = embedded()
            .in_default_regions()
            .get(cloud, name)
            .cloned()
            .unwrap();
        match spot {
            Some(s) => assert_eq!(
                t.cheapest_offering(Some(CapacityType::Spot))
                    .unwrap()
                    .price_per_hour,
                s,
                "{name}"
            ),
            None => assert!(
                t.cheapest_offering(Some(CapacityType::Spot)).is_none(),
                "{name}"
            ),
        }
    }
    // p4d spot in us-east-1 spans 7.88–8.19 by zone (the $2.47 us-east-1a row is dropped, see
    // the data file).
    let p4d = embedded().get(Cloud::Aws, "p4d.24xlarge").cloned().unwrap();
    let spots: Vec<f64> = p4d
        .offerings
        .iter()
        .filter(|o| o.capacity_type == CapacityType::Spot && o.region == "us-east-1")
        .map(|o| o.price_per_hour)
        .collect();
    assert_eq!(spots.len(), 3);
    assert!(spots.iter().all(|p| (7.87..=8.2).contains(p)));
}

#[test]
fn every_offering_has_source_and_date_and_no_invented_estimates() {
    let c = embedded();
    let mut zones_per_cloud: std::collections::BTreeMap<Cloud, HashSet<String>> =
        Default::default();
    for t in c.instance_types() {
        assert!(!t.offerings.is_empty(), "{} has no offerings", t.name);
        for o in &t.offerings {
            assert!(
                !o.price_source.trim().is_empty(),
                "{}: empty source",
                t.name
            );
            assert!(
                o.price_as_of >= chrono::NaiveDate::from_ymd_opt(2023, 1, 1).unwrap(),
                "{}",
                t.name
            );
            assert!(o.price_per_hour.is_finite() && o.price_per_hour >= 0.0);
            assert!(!o.estimate, "{}: embedded data must not estimate", t.name);
            assert!(o.available);
            assert!(crate::zone_matches_region(t.cloud, &o.region, &o.zone));
            zones_per_cloud
                .entry(t.cloud)
                .or_default()
                .insert(o.zone.clone());
        }
    }
    let want: &[(Cloud, &[&str])] = &[
        (
            Cloud::Aws,
            &[
                "us-east-1a",
                "us-east-1b",
                "us-east-1c",
                "us-east-1d",
                "us-east-1e",
                "us-east-1f",
            ],
        ),
        (
            Cloud::Gcp,
            &[
                "us-central1-a",
                "us-central1-b",
                "us-central1-c",
                "us-central1-f",
            ],
        ),
        (Cloud::Azure, &["eastus-1", "eastus-2", "eastus-3"]),
    ];
    for (cloud, zones) in want {
        for z in *zones {
            assert!(
                zones_per_cloud[cloud].contains(*z),
                "{cloud}: no offering in {z}"
            );
        }
    }
    // Not every type is in every zone.
    let p4de = c.get(Cloud::Aws, "p4de.24xlarge").unwrap();
    assert!(p4de.offerings_in_zone("us-east-1a").next().is_none());
}

#[test]
fn fractional_a10_does_not_advertise_a_whole_gpu() {
    let c = embedded();
    let nv6 = c.get(Cloud::Azure, "Standard_NV6ads_A10_v5").unwrap();
    let acc = nv6.accelerator.as_ref().unwrap();
    assert_eq!(acc.count, 0);
    assert!(acc.is_fractional());
    assert!((acc.fraction.unwrap() - 1.0 / 6.0).abs() < 0.001);
    assert!(!nv6.capacity().contains_key(resources::NVIDIA_GPU));
    assert!(!nv6.allocatable().contains_key(resources::NVIDIA_GPU));
    assert_eq!(nv6.accelerator_count(), 0);
    let l = nv6.labels();
    assert_eq!(l[labels::INSTANCE_GPU_COUNT], "0");
    assert_eq!(l[labels::INSTANCE_GPU_FRACTION], "0.1667");
    // The whole-device sibling does advertise it.
    let nv36 = c.get(Cloud::Azure, "Standard_NV36ads_A10_v5").unwrap();
    assert_eq!(nv36.capacity()[resources::NVIDIA_GPU], 1);
}

#[test]
fn accelerator_resources_and_efa() {
    let c = embedded();
    let dl1 = c.get(Cloud::Aws, "dl1.24xlarge").unwrap();
    assert_eq!(dl1.capacity()[resources::HABANA_GAUDI], 8);
    let trn = c.get(Cloud::Aws, "trn1.32xlarge").unwrap();
    assert_eq!(trn.capacity()[resources::AWS_NEURON], 16);
    assert_eq!(trn.capacity()[resources::AWS_EFA], 8);
    let p5 = c.get(Cloud::Aws, "p5.48xlarge").unwrap();
    assert_eq!(p5.capacity()[resources::AWS_EFA], 32);
    assert_eq!(p5.interconnect, Some(Interconnect::Efa));
    let m6i = c.get(Cloud::Aws, "m6i.large").unwrap();
    assert!(!m6i.capacity().contains_key(resources::AWS_EFA));
    let nd = c.get(Cloud::Azure, "Standard_ND96isr_H100_v5").unwrap();
    assert_eq!(nd.interconnect, Some(Interconnect::Infiniband));
    assert!(!nd.capacity().contains_key(resources::AWS_EFA));
}

#[test]
fn capacity_and_allocatable_follow_the_cloud_formula() {
    let c = embedded();
    // m6i.large: 2 vCPU, 8 GiB, 29 pods; EKS: 70m CPU, 11*29+255+100 = 674 MiB.
    let m6i = c.get(Cloud::Aws, "m6i.large").unwrap();
    let cap = m6i.capacity();
    let alloc = m6i.allocatable();
    assert_eq!(cap[resources::CPU], 2000);
    assert_eq!(alloc[resources::CPU], 1930);
    assert_eq!(cap[resources::MEMORY], 8192 * resources::MIB);
    assert_eq!(alloc[resources::MEMORY], (8192 - 674) * resources::MIB);
    assert_eq!(cap[resources::PODS], 29);
    assert_eq!(cap[resources::EPHEMERAL_STORAGE], 20 * resources::GIB);
    let eph = 20 * resources::GIB;
    assert_eq!(
        alloc[resources::EPHEMERAL_STORAGE],
        eph - (eph * 10).div_ceil(100)
    );
    // p5.48xlarge ephemeral storage is the local NVMe.
    let p5 = c.get(Cloud::Aws, "p5.48xlarge").unwrap();
    assert_eq!(
        p5.capacity()[resources::EPHEMERAL_STORAGE],
        30400 * resources::GB
    );
    assert_eq!(p5.overhead.cpu_millis, 550);
    assert_eq!(p5.overhead.memory_mib, 11 * 100 + 255 + 100);
    // GKE n2-standard-4 (16 GiB): 80m CPU; memory 25% of 4 GiB + 20% of 4 GiB + 10% of
    // 8 GiB = 2662 MiB, plus the 100 MiB eviction threshold.
    let n2 = c.get(Cloud::Gcp, "n2-standard-4").unwrap();
    assert_eq!(n2.overhead.cpu_millis, 80);
    assert_eq!(n2.overhead.memory_mib, 2662 + 100);
    // AKS D4s_v5: 140m CPU; memory min(20*250+50, 25% of 16 GiB) + 100.
    let d4 = c.get(Cloud::Azure, "Standard_D4s_v5").unwrap();
    assert_eq!(d4.overhead.cpu_millis, 140);
    assert_eq!(d4.overhead.memory_mib, 4096 + 100);
    assert_eq!(
        d4.capacity()[resources::EPHEMERAL_STORAGE],
        128 * resources::GIB
    );
}

#[test]
fn labels_for_a_sample_of_types() {
    let c = embedded().in_default_regions();
    let p5 = c.get(Cloud::Aws, "p5.48xlarge").unwrap();
    let l = p5.labels();
    let expect = [
        (labels::INSTANCE_TYPE, "p5.48xlarge"),
        (labels::ARCH, "amd64"),
        (labels::OS, "linux"),
        (labels::CLOUD, "aws"),
        (labels::INSTANCE_FAMILY, "p5"),
        (labels::INSTANCE_CPU, "192"),
        (labels::INSTANCE_MEMORY, "2097152"),
        (labels::INSTANCE_GPU_MANUFACTURER, "nvidia"),
        (labels::INSTANCE_GPU_NAME, "h100"),
        (labels::INSTANCE_GPU_COUNT, "8"),
        (labels::INSTANCE_GPU_MEMORY, "81920"),
        (labels::INSTANCE_NETWORK_BANDWIDTH, "3200000"),
        (labels::INSTANCE_INTERCONNECT, "efa"),
        (labels::INSTANCE_LOCAL_NVME, "30400"),
    ];
    for (k, v) in expect {
        assert_eq!(l.get(k).map(String::as_str), Some(v), "{k}");
    }
    assert!(!l.contains_key(labels::ZONE) && !l.contains_key(labels::REGION));
    assert!(!l.contains_key(labels::CAPACITY_TYPE));

    // CPU type: no GPU labels, no interconnect.
    let m6i = c.get(Cloud::Aws, "m6i.4xlarge").unwrap().labels();
    assert!(m6i.keys().all(|k| !k.contains("instance-gpu")));
    assert!(!m6i.contains_key(labels::INSTANCE_INTERCONNECT));
    assert_eq!(m6i[labels::INSTANCE_NETWORK_BANDWIDTH], "6250");

    // GCP with unknown bandwidth: label omitted.
    let a3 = c.get(Cloud::Gcp, "a3-highgpu-8g").unwrap().labels();
    assert_eq!(a3[labels::CLOUD], "gcp");
    assert_eq!(a3[labels::INSTANCE_GPU_NAME], "h100");
    assert!(!a3.contains_key(labels::INSTANCE_NETWORK_BANDWIDTH));

    // Azure InfiniBand; Neuron accelerator memory (32 GiB HBM per Inferentia2 chip).
    let nd = c
        .get(Cloud::Azure, "Standard_ND96amsr_A100_v4")
        .unwrap()
        .labels();
    assert_eq!(nd[labels::INSTANCE_INTERCONNECT], "infiniband");
    assert_eq!(nd[labels::INSTANCE_GPU_MEMORY], "81920");
    let inf2 = c.get(Cloud::Aws, "inf2.xlarge").unwrap().labels();
    assert_eq!(inf2[labels::INSTANCE_GPU_MANUFACTURER], "aws");
    assert_eq!(inf2[labels::INSTANCE_GPU_NAME], "inferentia2");
    assert_eq!(inf2[labels::INSTANCE_GPU_MEMORY], "32768");

    // Per-offering labels.
    let p5 = c.get(Cloud::Aws, "p5.48xlarge").unwrap();
    let spot = p5.cheapest_offering(Some(CapacityType::Spot)).unwrap();
    let ol = p5.offering_labels(spot);
    assert_eq!(ol[labels::REGION], "us-east-1");
    assert_eq!(ol[labels::ZONE], "us-east-1f");
    assert_eq!(ol[labels::CAPACITY_TYPE], "spot");
    assert_eq!(ol.len(), p5.labels().len() + 3);
    for k in ol.keys() {
        assert!(labels::ALL.contains(&k.as_str()), "{k} not in labels::ALL");
    }
}

#[test]
fn label_values_are_valid_kubernetes_label_values() {
    fn valid(v: &str) -> bool {
        v.len() <= 63
            && (v.is_empty()
                || (v.starts_with(|c: char| c.is_ascii_alphanumeric())
                    && v.ends_with(|c: char| c.is_ascii_alphanumeric())
                    && v.chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))))
    }
    for t in embedded().instance_types() {
        for o in &t.offerings {
            for (k, v) in t.offering_labels(o) {
                assert!(
                    valid(&v),
                    "{}: {k}={v:?} is not a valid label value",
                    t.name
                );
            }
        }
    }
}

#[test]
fn catalog_serializes_as_a_list_of_types() {
    let v = serde_json::to_value(embedded()).unwrap();
    assert_eq!(v.as_array().unwrap().len(), embedded().len());
}

#[test]
fn cheapest_offering_respects_capacity_type_and_availability() {
    let c = embedded().in_default_regions();
    let p5 = c.get(Cloud::Aws, "p5.48xlarge").unwrap();
    assert_eq!(p5.cheapest_offering(None).unwrap().price_per_hour, 17.6289);
    assert_eq!(
        p5.cheapest_offering(Some(CapacityType::OnDemand))
            .unwrap()
            .price_per_hour,
        55.04
    );
    assert!(p5.cheapest_offering(Some(CapacityType::Reserved)).is_none());

    let f = Catalog::parse(
        "t.toml",
        r#"
cloud = "aws"
region = "us-east-1"
[[instance_type]]
name = "x.large"
family = "x"
vcpu = 2
memory_mib = 4096
arch = "arm64"
max_pods = 29
offerings = [
  { zone = "us-east-1a", capacity_type = "spot", price = 0.01, source = "t", as_of = 2026-01-01, available = false },
  { zone = "us-east-1b", capacity_type = "spot", price = 0.02, source = "t", as_of = "2026-01-01" },
  { zone = "us-east-1c", capacity_type = "reserved", price = 0.03, source = "t", as_of = 2026-01-01 },
]
"#,
    )
    .unwrap();
    let t = &f.instance_types[0];
    assert_eq!(t.cheapest_offering(None).unwrap().zone, "us-east-1b");
    assert_eq!(
        t.cheapest_offering(Some(CapacityType::Reserved))
            .unwrap()
            .price_per_hour,
        0.03
    );
    assert_eq!(t.labels()[labels::ARCH], "arm64");
}

#[test]
fn offering_serializes_with_snake_case_fields() {
    let c = embedded();
    let o = &c.get(Cloud::Aws, "p4d.24xlarge").unwrap().offerings[0];
    let v = serde_json::to_value(o).unwrap();
    assert_eq!(v["region"], "us-east-1");
    assert_eq!(v["zone"], "us-east-1a");
    assert_eq!(v["capacity_type"], "on-demand");
    assert_eq!(v["price_per_hour"], 21.957642);
    assert_eq!(v["available"], true);
    // p4d.24xlarge's offerings are generated from SKY-AWS (data/offerings/aws.csv).
    assert_eq!(v["price_source"], "SKY-AWS");
    assert_eq!(v["price_as_of"], "2026-12-04");
    let t = serde_json::to_value(c.get(Cloud::Aws, "p4d.24xlarge").unwrap()).unwrap();
    assert_eq!(t["cloud"], "aws");
    assert_eq!(t["memory_mib"], 1179648);
    assert_eq!(t["accelerator"]["resource"], "nvidia.com/gpu");
}

// ------------------------------------------------------------------ overrides

const SMALL: &str = r#"
cloud = "aws"
region = "us-east-1"

[[instance_type]]
name = "p5.48xlarge"
family = "p5"
vcpu = 192
memory_mib = 2097152
arch = "amd64"
accelerator = { manufacturer = "nvidia", name = "h100", count = 8, memory_mib = 81920, resource = "nvidia.com/gpu" }
network_gbps = 3200.0
interconnect = "efa"
efa_count = 32
max_pods = 100
zones = ["us-east-1a"]
on_demand = { price = 40.0, source = "my-discount", as_of = 2026-10-01 }

[[instance_type]]
name = "m7i.large"
family = "m7i"
vcpu = 2
memory_mib = 8192
arch = "amd64"
max_pods = 29
zones = ["us-east-1a", "us-east-1b"]
on_demand = { price = 0.1008, source = "mine", as_of = 2026-10-01 }
spot = [{ price = 0.05, source = "mine", as_of = 2026-10-01, estimate = true, rule = "half of on-demand" }]
"#;

#[test]
fn override_extend_replaces_same_name_and_adds_new() {
    let base = embedded();
    let n = base.len();
    let file = Catalog::parse("small.toml", SMALL).unwrap();
    assert_eq!(file.mode, CatalogMode::Extend);
    let merged = base.clone().with_override(file);
    assert_eq!(merged.len(), n + 1);
    let p5 = merged.get(Cloud::Aws, "p5.48xlarge").unwrap();
    assert_eq!(p5.offerings.len(), 1);
    assert_eq!(p5.offerings[0].price_per_hour, 40.0);
    // Same position as before.
    let pos = |c: &Catalog| {
        c.instance_types()
            .iter()
            .position(|t| t.name == "p5.48xlarge")
    };
    assert_eq!(pos(&merged), pos(&base));
    // Untouched types stay.
    assert!(merged.get(Cloud::Gcp, "a3-highgpu-8g").is_some());
    let m7i = merged.get(Cloud::Aws, "m7i.large").unwrap();
    let spot = m7i.cheapest_offering(Some(CapacityType::Spot)).unwrap();
    assert!(spot.estimate);
    assert!(spot.price_source.contains("half of on-demand"));
    assert_eq!(m7i.offerings.len(), 4);
}

#[test]
fn override_replace_keeps_only_the_file() {
    let text = format!("mode = \"replace\"\n{SMALL}");
    let file = Catalog::parse("small.toml", &text).unwrap();
    assert_eq!(file.mode, CatalogMode::Replace);
    let c = embedded().with_override(file);
    assert_eq!(c.len(), 2);
    assert!(c.get(Cloud::Gcp, "a3-highgpu-8g").is_none());
    assert!(!c.is_empty());
}

#[test]
fn from_path_reads_files_and_reports_missing_ones() {
    let dir = std::env::temp_dir().join(format!("qm-pricing-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("my.toml");
    std::fs::write(&path, SMALL).unwrap();
    let f = Catalog::from_path(&path).unwrap();
    assert_eq!(f.instance_types.len(), 2);
    assert_eq!(f.file_name, path.display().to_string());
    let missing = Catalog::from_path(&dir.join("nope.toml")).unwrap_err();
    assert!(matches!(missing, PricingError::Io { .. }));
    assert!(missing.to_string().contains("nope.toml"));
    std::fs::remove_dir_all(&dir).unwrap();
}

// ------------------------------------------------------------------ validation errors

/// A valid one-entry file with `{EXTRA}` spliced into the entry and `{OFFERINGS}` as its
/// explicit offerings list.
fn entry(extra: &str, offerings: &str) -> String {
    format!(
        r#"cloud = "aws"
region = "us-east-1"

[[instance_type]]
name = "p5.48xlarge"
family = "p5"
vcpu = 192
memory_mib = 2097152
arch = "amd64"
max_pods = 100
{extra}
offerings = [{offerings}]
"#
    )
}

const GOOD_OFFERINGS: &str = r#"
  { zone = "us-east-1a", capacity_type = "on-demand", price = 55.04, source = "K-AWS-P", as_of = 2026-07-20 },
  { zone = "us-east-1b", capacity_type = "on-demand", price = 55.04, source = "K-AWS-P", as_of = 2026-07-20 },"#;

fn err(text: &str) -> String {
    let e = Catalog::parse("my.toml", text).expect_err("should be rejected");
    let s = e.to_string();
    assert!(!s.contains('\n'), "multi-line message: {s}");
    assert!(s.starts_with("my.toml: "), "no file name: {s}");
    s
}

#[test]
fn valid_entry_parses() {
    let f = Catalog::parse("my.toml", &entry("", GOOD_OFFERINGS)).unwrap();
    assert_eq!(f.instance_types[0].offerings.len(), 2);
}

#[test]
fn rejects_nan_price_with_the_documented_message() {
    let offerings = format!(
        "{GOOD_OFFERINGS}\n  {{ zone = \"us-east-1c\", capacity_type = \"spot\", price = nan, source = \"x\", as_of = 2026-07-20 }},"
    );
    assert_eq!(
        err(&entry("", &offerings)),
        "my.toml: instance type \"p5.48xlarge\" (aws): offerings[2].price: must be a finite non-negative number, got NaN"
    );
}

#[test]
fn rejects_negative_and_infinite_prices() {
    let neg = r#"{ zone = "us-east-1a", capacity_type = "spot", price = -1.0, source = "x", as_of = 2026-07-20 }"#;
    assert!(
        err(&entry("", neg))
            .ends_with("offerings[0].price: must be a finite non-negative number, got -1")
    );
    let inf = r#"{ zone = "us-east-1a", capacity_type = "spot", price = inf, source = "x", as_of = 2026-07-20 }"#;
    assert!(err(&entry("", inf)).ends_with("got inf"));
    let od = r#"zones = ["us-east-1a"]
on_demand = { price = -0.5, source = "x", as_of = 2026-07-20 }"#;
    assert!(err(&entry(od, "")).contains("on_demand.price: must be a finite non-negative number"));
}

#[test]
fn rejects_unknown_fields() {
    let e = err(&entry("gpu_count = 8", GOOD_OFFERINGS));
    assert!(
        e.starts_with("my.toml: instance type \"p5.48xlarge\" (aws): "),
        "{e}"
    );
    assert!(e.contains("unknown field `gpu_count`"), "{e}");
    let e = err(&format!("colour = \"blue\"\n{}", entry("", GOOD_OFFERINGS)));
    assert!(e.contains("unknown field `colour`"), "{e}");
    let bad_offering = r#"{ zone = "us-east-1a", capacity_type = "spot", price = 1.0, source = "x", as_of = 2026-07-20, discount = 3 }"#;
    let e = err(&entry("", bad_offering));
    assert!(
        e.contains("offerings[0]") && e.contains("unknown field `discount`"),
        "{e}"
    );
}

#[test]
fn rejects_duplicate_types() {
    let one = entry("", GOOD_OFFERINGS);
    let second = &one[one.find("[[instance_type]]").unwrap()..];
    let text = format!("{one}\n{second}");
    let e = Catalog::parse("my.toml", &text).unwrap_err();
    assert!(matches!(e, PricingError::Duplicate { .. }), "{e}");
    assert_eq!(
        e.to_string(),
        "my.toml: instance type \"p5.48xlarge\" (aws): duplicate instance type; an entry with the same cloud and name appears earlier in the file"
    );
    // Same name on another cloud is fine.
    let other = entry("", GOOD_OFFERINGS).replace("cloud = \"aws\"\nregion = \"us-east-1\"\n", "");
    let text = format!(
        "region = \"us-east-1\"\n{}\n{}",
        other.replace(
            "name = \"p5.48xlarge\"",
            "name = \"p5.48xlarge\"\ncloud = \"aws\""
        ),
        r#"[[instance_type]]
name = "p5.48xlarge"
cloud = "gcp"
family = "p5"
vcpu = 1
memory_mib = 1024
arch = "amd64"
max_pods = 1
"#
    );
    Catalog::parse("my.toml", &text).unwrap();
}

#[test]
fn rejects_accelerator_with_zero_count_unless_fractional() {
    let zero = r#"accelerator = { manufacturer = "nvidia", name = "h100", count = 0, memory_mib = 81920, resource = "nvidia.com/gpu" }"#;
    let e = err(&entry(zero, GOOD_OFFERINGS));
    assert!(e.contains("accelerator.count: must be at least 1"), "{e}");
    let frac = r#"accelerator = { manufacturer = "nvidia", name = "a10", count = 0, fraction = 0.5, memory_mib = 12288, resource = "nvidia.com/gpu" }"#;
    Catalog::parse("my.toml", &entry(frac, GOOD_OFFERINGS)).unwrap();
    let bad_frac = r#"accelerator = { manufacturer = "nvidia", name = "a10", count = 0, fraction = 1.5, memory_mib = 12288, resource = "nvidia.com/gpu" }"#;
    assert!(err(&entry(bad_frac, GOOD_OFFERINGS)).contains("accelerator.fraction"));
    let both = r#"accelerator = { manufacturer = "nvidia", name = "a10", count = 1, fraction = 0.5, memory_mib = 12288, resource = "nvidia.com/gpu" }"#;
    assert!(err(&entry(both, GOOD_OFFERINGS)).contains("accelerator.count: must be 0"));
    let upper = r#"accelerator = { manufacturer = "nvidia", name = "H100", count = 1, memory_mib = 1, resource = "nvidia.com/gpu" }"#;
    assert!(err(&entry(upper, GOOD_OFFERINGS)).contains("lower-case"));
}

#[test]
fn rejects_unknown_capacity_type() {
    let o = r#"{ zone = "us-east-1a", capacity_type = "preemptible", price = 1.0, source = "x", as_of = 2026-07-20 }"#;
    let e = err(&entry("", o));
    assert!(
        e.starts_with("my.toml: instance type \"p5.48xlarge\" (aws): offerings[0].capacity_type: "),
        "{e}"
    );
    assert!(e.contains("unknown variant `preemptible`"), "{e}");
}

#[test]
fn rejects_unknown_cloud() {
    let text = entry("", GOOD_OFFERINGS).replace("cloud = \"aws\"", "cloud = \"oracle\"");
    let e = err(&text);
    assert!(
        e.contains("cloud") && e.contains("unknown variant `oracle`"),
        "{e}"
    );
    let per_entry = entry("cloud = \"ibm\"", GOOD_OFFERINGS);
    let e = err(&per_entry);
    assert!(
        e.contains("instance type \"p5.48xlarge\" (ibm): cloud: unknown variant `ibm`"),
        "{e}"
    );
    let none = entry("", GOOD_OFFERINGS).replace("cloud = \"aws\"\n", "");
    assert!(err(&none).contains("instance type \"p5.48xlarge\": cloud: missing"));
}

#[test]
fn rejects_zero_vcpu_memory_and_pods() {
    let t = entry("", GOOD_OFFERINGS);
    let e = err(&t.replace("vcpu = 192", "vcpu = 0"));
    assert_eq!(
        e,
        "my.toml: instance type \"p5.48xlarge\" (aws): vcpu: must be greater than zero"
    );
    let e = err(&t.replace("memory_mib = 2097152", "memory_mib = 0"));
    assert!(e.ends_with("memory_mib: must be greater than zero"), "{e}");
    let e = err(&t.replace("max_pods = 100", "max_pods = 0"));
    assert!(e.ends_with("max_pods: must be greater than zero"), "{e}");
    let e = err(&t.replace("vcpu = 192", "vcpu = -4"));
    assert!(e.contains("vcpu"), "{e}");
}

#[test]
fn rejects_sizes_whose_byte_counts_overflow() {
    // Found by the property tests: these parsed, then capacity() / allocatable() overflowed u64
    // (a panic in debug builds, a wrapped figure in release).
    let t = entry("", GOOD_OFFERINGS);
    let e = err(&t.replace("memory_mib = 2097152", "memory_mib = 17592186044416"));
    assert!(
        e.ends_with("memory_mib: must be at most 1099511627776 (1 EiB), got 17592186044416"),
        "{e}"
    );
    let e = err(&entry("local_nvme_gb = 18446744073", GOOD_OFFERINGS));
    assert!(
        e.contains("local_nvme_gb: must be at most 1000000000 (1 EB)"),
        "{e}"
    );
    let e = err(&entry(
        "overhead = { cpu_millis = 100, memory_mib = 17592186044416 }",
        GOOD_OFFERINGS,
    ));
    assert!(
        e.ends_with(
            "overhead.memory_mib: must not exceed the type's memory_mib 2097152, got 17592186044416"
        ),
        "{e}"
    );
    let e = err(&entry(
        "overhead = { cpu_millis = 192001, memory_mib = 1 }",
        GOOD_OFFERINGS,
    ));
    assert!(
        e.contains("overhead.cpu_millis: must not exceed the type's 192000 millicores"),
        "{e}"
    );
    // The largest allowed sizes are usable.
    let big = t
        .replace("memory_mib = 2097152", "memory_mib = 1099511627776")
        .replace(
            "max_pods = 100",
            "max_pods = 100\nlocal_nvme_gb = 1000000000",
        );
    let f = Catalog::parse("my.toml", &big).unwrap_or_else(|e| panic!("{e}"));
    let it = &f.instance_types[0];
    assert_eq!(it.capacity()[resources::MEMORY], 1 << 60);
    assert!(it.allocatable()[resources::EPHEMERAL_STORAGE] > 0);
}

#[test]
fn rejects_absurd_prices() {
    let o = r#"{ zone = "us-east-1a", capacity_type = "on-demand", price = 1e300, source = "x", as_of = 2026-07-20 }"#;
    assert_eq!(
        err(&entry("", o)),
        "my.toml: instance type \"p5.48xlarge\" (aws): offerings[0].price: must be at most 10000 dollars per hour, got 1e300"
    );
    let ok = o.replace("1e300", "10000.0");
    Catalog::parse("my.toml", &entry("", &ok)).unwrap();
}

#[test]
fn rejects_zone_outside_region() {
    let o = r#"{ zone = "us-west-2a", capacity_type = "on-demand", price = 1.0, source = "x", as_of = 2026-07-20 }"#;
    assert_eq!(
        err(&entry("", o)),
        "my.toml: instance type \"p5.48xlarge\" (aws): offerings[0].zone: zone \"us-west-2a\" is not in region \"us-east-1\""
    );
    let compact = r#"zones = ["us-east-1a", "eastus-1"]
on_demand = { price = 1.0, source = "x", as_of = 2026-07-20 }"#;
    assert!(
        err(&entry(compact, ""))
            .contains("zones[1]: zone \"eastus-1\" is not in region \"us-east-1\"")
    );
    let spot = r#"zones = ["us-east-1a"]
spot = [{ zone = "us-east-1b", price = 1.0, source = "x", as_of = 2026-07-20 }]"#;
    assert!(
        err(&entry(spot, "")).contains("spot[0].zone: zone \"us-east-1b\" is not listed in zones")
    );
}

#[test]
fn rejects_other_inconsistencies() {
    // Same zone priced twice for one capacity type.
    let twice = r#"zones = ["us-east-1a"]
on_demand = { price = 1.0, source = "x", as_of = 2026-07-20 }"#;
    let o = r#"{ zone = "us-east-1a", capacity_type = "on-demand", price = 2.0, source = "x", as_of = 2026-07-20 }"#;
    assert!(
        err(&entry(twice, o)).contains("more than one on-demand price for zone \"us-east-1a\"")
    );
    // Estimates need a rule; rules need an estimate.
    let est = r#"{ zone = "us-east-1a", capacity_type = "spot", price = 2.0, source = "x", as_of = 2026-07-20, estimate = true }"#;
    assert!(err(&entry("", est)).contains("offerings[0].rule"));
    // EFA consistency.
    assert!(err(&entry("interconnect = \"efa\"", GOOD_OFFERINGS)).contains("efa_count"));
    assert!(err(&entry("efa_count = 2", GOOD_OFFERINGS)).contains("interconnect"));
    // Bad date.
    let date = r#"{ zone = "us-east-1a", capacity_type = "spot", price = 2.0, source = "x", as_of = "yesterday" }"#;
    assert!(err(&entry("", date)).contains("offerings[0].as_of"));
    // Empty source.
    let src = r#"{ zone = "us-east-1a", capacity_type = "spot", price = 2.0, source = " ", as_of = 2026-07-20 }"#;
    assert!(err(&entry("", src)).contains("offerings[0].source: must not be empty"));
    // Unknown arch and missing required field.
    assert!(err(&entry("", GOOD_OFFERINGS).replace("\"amd64\"", "\"riscv\"")).contains("arch"));
    assert!(
        err(&entry("", GOOD_OFFERINGS).replace("family = \"p5\"\n", ""))
            .contains("missing field `family`")
    );
    // A date-time is not a date.
    let dt = r#"{ zone = "us-east-1a", capacity_type = "spot", price = 2.0, source = "x", as_of = 2026-07-20T10:00:00Z }"#;
    assert!(
        err(&entry("", dt))
            .contains("offerings[0].as_of: expected a date such as 2026-07-20, got the date-time")
    );
    // Unsupported schema.
    assert!(err(&format!("schema = 2\n{}", entry("", GOOD_OFFERINGS))).contains("schema"));
}

#[test]
fn syntax_errors_name_file_line_and_column() {
    let e = Catalog::parse("my.toml", "cloud = \"aws\"\n[[instance_type]\nname = 1\n").unwrap_err();
    match &e {
        PricingError::Syntax { file, line, .. } => {
            assert_eq!(file, "my.toml");
            assert_eq!(*line, 2);
        }
        other => panic!("expected a syntax error, got {other:?}"),
    }
    assert!(!e.to_string().contains('\n'));
}

#[test]
fn derived_labels_in_karpenter_and_gpu_feature_discovery_formats() {
    let c = embedded();
    let l = |cloud, name| c.get(cloud, name).unwrap().labels();
    let p4d = l(Cloud::Aws, "p4d.24xlarge");
    assert_eq!(p4d[labels::INSTANCE_CATEGORY], "p");
    assert_eq!(p4d[labels::INSTANCE_GENERATION], "4");
    assert_eq!(p4d[labels::INSTANCE_SIZE], "24xlarge");
    assert_eq!(p4d[labels::INSTANCE_HYPERVISOR], "nitro");
    assert_eq!(p4d[labels::INSTANCE_GPU_PRODUCT], "NVIDIA-A100-SXM4-40GB");
    assert_eq!(p4d[labels::INSTANCE_GPU_FAMILY], "ampere");
    let inf2 = l(Cloud::Aws, "inf2.xlarge");
    assert_eq!(inf2[labels::INSTANCE_CATEGORY], "inf");
    assert_eq!(inf2[labels::INSTANCE_GENERATION], "2");
    assert!(!inf2.contains_key(labels::INSTANCE_GPU_PRODUCT));
    assert_eq!(
        l(Cloud::Aws, "g5.xlarge")[labels::INSTANCE_GPU_PRODUCT],
        "NVIDIA-A10G"
    );
    assert_eq!(
        l(Cloud::Aws, "g4dn.xlarge")[labels::INSTANCE_GPU_PRODUCT],
        "Tesla-T4"
    );
    let g2 = l(Cloud::Gcp, "g2-standard-4");
    assert_eq!(g2[labels::INSTANCE_CATEGORY], "g");
    assert_eq!(g2[labels::INSTANCE_GPU_PRODUCT], "NVIDIA-L4");
    assert_eq!(g2[labels::INSTANCE_GPU_FAMILY], "ada-lovelace");
    assert!(!g2.contains_key(labels::INSTANCE_SIZE));
    assert_eq!(
        l(Cloud::Gcp, "a2-ultragpu-8g")[labels::INSTANCE_GPU_PRODUCT],
        "NVIDIA-A100-SXM4-80GB"
    );
    let nc = l(Cloud::Azure, "Standard_NC24ads_A100_v4");
    assert_eq!(nc[labels::INSTANCE_GPU_PRODUCT], "NVIDIA-A100-80GB-PCIe");
    assert!(!nc.contains_key(labels::INSTANCE_CATEGORY));
    // A fractional vGPU slice has no GPU Feature Discovery product.
    assert!(!l(Cloud::Azure, "Standard_NV6ads_A10_v5").contains_key(labels::INSTANCE_GPU_PRODUCT));
}

#[test]
fn the_gpu_types_added_in_december_carry_their_sourced_facts() {
    // Every region: H200, MI300X (eastus2) and A3 Mega (us-east4/5) are outside the defaults.
    let c = Catalog::embedded_all_regions();
    // Azure spot (SKY-AZ): A100 and A10 sizes are discounted; H100 sizes show none, so no spot.
    assert_eq!(
        price(Cloud::Azure, "Standard_NC24ads_A100_v4", CapacityType::Spot),
        0.444433
    );
    assert_eq!(
        price(Cloud::Azure, "Standard_NV36ads_A10_v5", CapacityType::Spot),
        0.8
    );
    assert_eq!(
        price(Cloud::Azure, "Standard_NC4as_T4_v3", CapacityType::Spot),
        0.062699
    );
    for name in ["Standard_ND96isr_H100_v5", "Standard_NC40ads_H100_v5"] {
        let t = c.get(Cloud::Azure, name).unwrap();
        assert!(
            t.cheapest_offering(Some(CapacityType::Spot)).is_none(),
            "{name}"
        );
    }
    // H200 and MI300X are priced in eastus2 only; MI300X advertises the AMD resource.
    let mi = c.get(Cloud::Azure, "Standard_ND96isr_MI300X_v5").unwrap();
    assert!(mi.offerings.iter().all(|o| o.region == "eastus2"));
    assert_eq!(mi.capacity()["amd.com/gpu"], 8);
    assert!(!mi.capacity().contains_key(resources::NVIDIA_GPU));
    assert_eq!(mi.labels()[labels::INSTANCE_GPU_MANUFACTURER], "amd");
    let h200 = c.get(Cloud::Azure, "Standard_ND96isr_H200_v5").unwrap();
    assert_eq!(h200.accelerator.as_ref().unwrap().memory_mib, 144384);
    assert!(
        embedded()
            .get(Cloud::Azure, "Standard_ND96isr_H200_v5")
            .is_none()
    );
    let gb200 = c
        .get(Cloud::Azure, "Standard_ND128isr_NDR_GB200_v6")
        .unwrap();
    assert_eq!(gb200.arch, crate::Arch::Arm64);
    // Fractional A10 slices never advertise a whole GPU.
    for name in ["Standard_NV12ads_A10_v5", "Standard_NV18ads_A10_v5"] {
        let t = c.get(Cloud::Azure, name).unwrap();
        assert!(!t.capacity().contains_key(resources::NVIDIA_GPU), "{name}");
    }
    // GCP: partial A3 sizes with SKY-GCP host + per-H100 spot; A3 Mega outside us-central1.
    assert_eq!(
        price(Cloud::Gcp, "a3-highgpu-1g", CapacityType::OnDemand),
        11.06125
    );
    assert_eq!(
        price(Cloud::Gcp, "a3-highgpu-1g", CapacityType::Spot),
        3.35377
    );
    let mega = c.get(Cloud::Gcp, "a3-megagpu-8g").unwrap();
    assert!(mega.offerings.iter().all(|o| o.region != "us-central1"));
    assert!(
        mega.offerings
            .iter()
            .any(|o| o.region == "us-east4" && o.price_per_hour == 92.937588)
    );
    assert_eq!(
        price(Cloud::Gcp, "a2-ultragpu-1g", CapacityType::OnDemand),
        5.068798
    );
    // AWS: Blackwell, Trainium 1n, Inferentia2 sizes and g7e.
    assert_eq!(
        price(Cloud::Aws, "p6-b200.48xlarge", CapacityType::OnDemand),
        113.9328
    );
    let b300 = c.get(Cloud::Aws, "p6-b300.48xlarge").unwrap();
    assert_eq!(b300.capacity()[resources::AWS_EFA], 16);
    for name in ["trn1n.32xlarge", "inf2.8xlarge", "inf2.24xlarge"] {
        let t = c.get(Cloud::Aws, name).unwrap();
        assert_eq!(t.accelerator.as_ref().unwrap().memory_mib, 32768, "{name}");
    }
    let g7e = c.get(Cloud::Aws, "g7e.2xlarge").unwrap();
    assert_eq!(g7e.accelerator.as_ref().unwrap().memory_mib, 98304);
    assert_eq!(
        price(Cloud::Aws, "g7e.48xlarge", CapacityType::OnDemand),
        33.14432
    );
}

#[test]
fn the_catalogs_shared_labels_are_the_offering_labels_of_every_offering() {
    let catalog = Catalog::embedded_all_regions();
    let shared = catalog.labels();
    assert_eq!(shared.len(), catalog.instance_types().len());
    for (it, labels) in catalog.instance_types().iter().zip(shared) {
        assert_eq!(*labels.instance_type, it.labels());
        assert_eq!(labels.offerings.len(), it.offerings.len());
        for (o, layer) in it.offerings.iter().zip(&labels.offerings) {
            let mut merged = (*labels.instance_type).clone();
            merged.extend(layer.iter().map(|(k, v)| (k.clone(), v.clone())));
            assert_eq!(merged, it.offering_labels(o), "{} {}", it.name, o.zone);
        }
    }
}

#[test]
fn a_catalog_whose_types_change_rebuilds_its_shared_labels() {
    let catalog = Catalog::embedded();
    let before = catalog.labels().len();
    let fewer = catalog.retain_regions(|_, region| region == "us-east-1");
    assert!(fewer.labels().len() < before);
    assert_eq!(fewer.labels().len(), fewer.instance_types().len());
    let mut renamed = catalog.instance_types()[0].clone();
    renamed.name = "x9.test".to_owned();
    renamed.family = "x9".to_owned();
    let grown = Catalog::new(catalog.instance_types().to_vec()).with_override(crate::CatalogFile {
        file_name: "test.toml".to_owned(),
        mode: crate::CatalogMode::Extend,
        instance_types: vec![renamed],
        default_regions: Default::default(),
        spot_interruptions: Default::default(),
    });
    assert_eq!(grown.labels().len(), before + 1);
    assert_eq!(
        grown.labels()[before].instance_type["node.kubernetes.io/instance-type"],
        "x9.test"
    );
}
