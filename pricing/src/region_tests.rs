//! Tests of regions (several per cloud, the default region) and spot interruption bands in
//! catalog files.

use crate::{CapacityType, Catalog, Cloud, InterruptionBand};

const TWO_REGIONS: &str = r#"cloud = "aws"
region = "us-east-1"
default_region = "us-east-1"

[[instance_type]]
name = "g5.xlarge"
family = "g5"
vcpu = 4
memory_mib = 16384
arch = "amd64"
max_pods = 58
zones = ["us-east-1a", "us-east-1b"]
on_demand = { price = 1.006, source = "K", as_of = 2026-07-20 }
spot = [{ zone = "us-east-1a", price = 0.40, source = "S", as_of = 2026-11-30 }]
spot_interruption = { band = "5-10%", source = "SA", as_of = 2026-11-30 }

[[instance_type.regions]]
region = "eu-west-1"
zones = ["eu-west-1a"]
zones_source = "S"
on_demand = { price = 1.123, source = "S", as_of = 2026-11-30 }
spot = [{ zone = "eu-west-1a", price = 0.50, source = "S", as_of = 2026-11-30 }]
spot_interruption = { band = ">20%", source = "SA", as_of = 2026-11-30 }

[[instance_type]]
name = "g5.2xlarge"
family = "g5"
vcpu = 8
memory_mib = 32768
arch = "amd64"
max_pods = 58

[[instance_type.regions]]
region = "us-west-2"
zones = ["us-west-2a"]
on_demand = { price = 1.212, source = "S", as_of = 2026-11-30 }
"#;

fn err(text: &str) -> String {
    let e = Catalog::parse("r.toml", text).expect_err("should be rejected");
    e.to_string()
}

#[test]
fn offerings_carry_their_region_and_the_file_names_the_default() {
    let f = Catalog::parse("r.toml", TWO_REGIONS).unwrap();
    assert_eq!(f.default_regions[&Cloud::Aws], "us-east-1");
    let c = Catalog::default().with_override(f);
    let g5 = c.get(Cloud::Aws, "g5.xlarge").unwrap();
    let at: Vec<(&str, &str, CapacityType)> = g5
        .offerings
        .iter()
        .map(|o| (o.region.as_str(), o.zone.as_str(), o.capacity_type))
        .collect();
    assert_eq!(
        at,
        [
            ("us-east-1", "us-east-1a", CapacityType::OnDemand),
            ("us-east-1", "us-east-1b", CapacityType::OnDemand),
            ("us-east-1", "us-east-1a", CapacityType::Spot),
            ("eu-west-1", "eu-west-1a", CapacityType::OnDemand),
            ("eu-west-1", "eu-west-1a", CapacityType::Spot),
        ]
    );
    // A type may live only in other regions.
    let g52 = c.get(Cloud::Aws, "g5.2xlarge").unwrap();
    assert_eq!(g52.offerings.len(), 1);
    assert_eq!(g52.offerings[0].region, "us-west-2");
    assert_eq!(
        c.regions(Cloud::Aws).into_iter().collect::<Vec<_>>(),
        ["eu-west-1", "us-east-1", "us-west-2"]
    );
    assert_eq!(c.default_region(Cloud::Aws), Some("us-east-1"));
    assert_eq!(c.default_region(Cloud::Gcp), None);

    let one = c.in_default_regions();
    assert_eq!(one.len(), 1, "g5.2xlarge has nothing in us-east-1");
    assert!(
        one.instance_types()[0]
            .offerings
            .iter()
            .all(|o| o.region == "us-east-1")
    );
    let eu = c.retain_regions(|_, r| r == "eu-west-1");
    assert_eq!(eu.get(Cloud::Aws, "g5.xlarge").unwrap().offerings.len(), 2);
}

#[test]
fn without_a_named_default_the_only_region_is_the_default() {
    let text = TWO_REGIONS.replace("default_region = \"us-east-1\"\n", "");
    let c = Catalog::default().with_override(Catalog::parse("r.toml", &text).unwrap());
    assert_eq!(
        c.default_region(Cloud::Aws),
        None,
        "three regions, none named"
    );
    let only = c.retain_regions(|_, r| r == "us-west-2");
    assert_eq!(only.default_region(Cloud::Aws), Some("us-west-2"));
    // An extending file naming a default moves it.
    let moved = c.with_override(
        Catalog::parse(
            "m.toml",
            "cloud = \"aws\"\ndefault_region = \"eu-west-1\"\n",
        )
        .unwrap(),
    );
    assert_eq!(moved.default_region(Cloud::Aws), Some("eu-west-1"));
}

#[test]
fn spot_bands_are_per_offering_and_price_the_expected_cost() {
    let c = Catalog::default().with_override(Catalog::parse("r.toml", TWO_REGIONS).unwrap());
    let g5 = c.get(Cloud::Aws, "g5.xlarge").unwrap();
    let band = |zone: &str, ct: CapacityType| {
        let o = g5
            .offerings
            .iter()
            .find(|o| o.zone == zone && o.capacity_type == ct)
            .unwrap();
        c.spot_interruption(g5, o).map(|s| s.band)
    };
    assert_eq!(
        band("us-east-1a", CapacityType::Spot),
        Some(InterruptionBand::From5To10)
    );
    assert_eq!(
        band("eu-west-1a", CapacityType::Spot),
        Some(InterruptionBand::Over20)
    );
    assert_eq!(band("us-east-1a", CapacityType::OnDemand), None);
    let eu_spot = g5
        .offerings
        .iter()
        .find(|o| o.zone == "eu-west-1a" && o.capacity_type == CapacityType::Spot)
        .unwrap();
    let s = c.spot_interruption(g5, eu_spot).unwrap();
    assert_eq!(
        (s.source.as_str(), s.as_of.to_string().as_str()),
        ("SA", "2026-11-30")
    );
    let expected = c.expected_cost_per_hour(g5, eu_spot, 730.0);
    assert!((expected - 0.75).abs() < 1e-9, "{expected}");

    // Replacing the type forgets its bands.
    let replaced = c.clone().with_override(
        Catalog::parse(
            "o.toml",
            "cloud = \"aws\"\nregion = \"eu-west-1\"\n[[instance_type]]\nname = \"g5.xlarge\"\nfamily = \"g5\"\nvcpu = 4\nmemory_mib = 16384\narch = \"amd64\"\nmax_pods = 58\nzones = [\"eu-west-1a\"]\nspot = [{ price = 0.5, source = \"x\", as_of = 2026-11-30 }]\n",
        )
        .unwrap(),
    );
    let g5 = replaced.get(Cloud::Aws, "g5.xlarge").unwrap();
    assert!(c.spot_interruption(g5, &g5.offerings[0]).is_some());
    assert!(replaced.spot_interruption(g5, &g5.offerings[0]).is_none());
}

#[test]
fn region_and_band_mistakes_name_the_field() {
    let twice = TWO_REGIONS.replace("region = \"eu-west-1\"", "region = \"us-east-1\"");
    let e = err(&twice);
    assert_eq!(
        e,
        "r.toml: instance type \"g5.xlarge\" (aws): regions[0].region: region \"us-east-1\" is priced twice (at the top of the entry or in an earlier regions table)"
    );
    let e = err(&TWO_REGIONS.replace("zones = [\"eu-west-1a\"]", "zones = [\"us-west-2a\"]"));
    assert_eq!(
        e,
        "r.toml: instance type \"g5.xlarge\" (aws): regions[0].zones[0]: zone \"us-west-2a\" is not in region \"eu-west-1\""
    );
    let e = err(&TWO_REGIONS.replace(
        "spot = [{ zone = \"eu-west-1a\", price = 0.50, source = \"S\", as_of = 2026-11-30 }]\n",
        "",
    ));
    assert_eq!(
        e,
        "r.toml: instance type \"g5.xlarge\" (aws): regions[0].spot_interruption: given without any spot price to apply to"
    );
    let e = err(&TWO_REGIONS.replace("band = \"5-10%\"", "band = \"7%\""));
    assert!(
        e.starts_with("r.toml: instance type \"g5.xlarge\" (aws): spot_interruption.band: "),
        "{e}"
    );
    assert!(e.contains("<5%"), "{e}");
    let e = err("default_region = \"us-east-1\"\n");
    assert_eq!(
        e,
        "r.toml: default_region: needs `cloud` at the top of the file (the default region is per cloud)"
    );
    let e = err(&TWO_REGIONS.replace("zones_source = \"S\"", "zones_source = \"S\"\nprice = 1"));
    assert!(e.contains("regions[0]") && e.contains("price"), "{e}");
}

#[test]
fn the_embedded_catalog_names_a_default_region_per_cloud() {
    let c = Catalog::embedded_all_regions();
    assert_eq!(c.default_region(Cloud::Aws), Some("us-east-1"));
    assert_eq!(c.default_region(Cloud::Gcp), Some("us-central1"));
    assert_eq!(c.default_region(Cloud::Azure), Some("eastus"));
    for cloud in Cloud::ALL {
        let d = c.default_region(cloud).unwrap();
        assert!(c.regions(cloud).contains(d), "{cloud}");
    }
}

#[test]
fn neuron_chips_have_32_gib_and_the_p4d_outlier_spot_price_is_gone() {
    let c = Catalog::embedded();
    for name in [
        "trn1.2xlarge",
        "trn1.32xlarge",
        "inf2.xlarge",
        "inf2.48xlarge",
    ] {
        let t = c.get(Cloud::Aws, name).unwrap();
        assert_eq!(t.accelerator.as_ref().unwrap().memory_mib, 32768, "{name}");
    }
    let p4d = c.get(Cloud::Aws, "p4d.24xlarge").unwrap();
    assert!(
        p4d.offerings
            .iter()
            .filter(|o| o.capacity_type == CapacityType::Spot)
            .all(|o| o.price_per_hour > 4.0),
        "no p4d.24xlarge spot offering below $4/hour"
    );
    assert!(
        p4d.offerings
            .iter()
            .any(|o| o.zone == "us-east-1a" && o.capacity_type == CapacityType::OnDemand)
    );
}

#[test]
fn the_embedded_aws_catalog_has_the_main_regions() {
    let c = Catalog::embedded_all_regions();
    let regions = c.regions(Cloud::Aws);
    for r in [
        "us-east-1",
        "us-east-2",
        "us-west-2",
        "eu-west-1",
        "eu-central-1",
        "ap-northeast-1",
    ] {
        assert!(regions.contains(r), "{r} missing: {regions:?}");
    }
    // The one-region view is what the catalog was: every offering in us-east-1.
    let one = Catalog::embedded();
    assert_eq!(one, c.in_default_regions());
    assert!(
        one.for_cloud(Cloud::Aws)
            .all(|t| t.offerings.iter().all(|o| o.region == "us-east-1"))
    );
    // Regional prices differ where they should: p5.48xlarge is dearer in Tokyo.
    let p5 = c.get(Cloud::Aws, "p5.48xlarge").unwrap();
    let od = |region: &str| {
        p5.offerings
            .iter()
            .find(|o| o.region == region && o.capacity_type == CapacityType::OnDemand)
            .map(|o| o.price_per_hour)
    };
    assert_eq!(od("us-east-1"), Some(55.04));
    assert_eq!(od("ap-northeast-1"), Some(68.8));
}

#[test]
fn the_added_aws_sizes_carry_their_specs_and_prices() {
    let c = Catalog::embedded();
    let t = c.get(Cloud::Aws, "g6e.2xlarge").unwrap();
    assert_eq!((t.vcpu, t.memory_mib, t.max_pods), (8, 65536, 58));
    assert_eq!(t.accelerator.as_ref().unwrap().name, "l40s");
    assert_eq!(
        t.cheapest_offering(Some(CapacityType::OnDemand))
            .unwrap()
            .price_per_hour,
        2.24208
    );
    let g5 = c.get(Cloud::Aws, "g5.24xlarge").unwrap();
    assert_eq!((g5.accelerator_count(), g5.efa_count), (4, 1));
    let m7g = c.get(Cloud::Aws, "m7g.large").unwrap();
    assert_eq!(m7g.arch, crate::Arch::Arm64);
    assert_eq!(
        m7g.cheapest_offering(Some(CapacityType::OnDemand))
            .unwrap()
            .price_per_hour,
        0.0816
    );
}
