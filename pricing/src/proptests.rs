//! Property-based tests of catalog parsing: arbitrary text and mutated copies of a valid file
//! never panic, whatever parses is usable (capacity, allocatable, labels, a catalog), and every
//! price that is not a finite number in `0..=MAX_PRICE_PER_HOUR` is rejected.
//!
//! 64 cases per property by default (CI); `PROPTEST_CASES=5000 cargo test -p
//! quartermaster-pricing proptests` runs more.

use std::collections::HashSet;

use proptest::prelude::*;
use proptest::sample::Index;

use crate::file::MAX_PRICE_PER_HOUR;
use crate::{Catalog, CatalogFile, PricingError, zone_matches_region};

/// 64 cases unless `PROPTEST_CASES` says otherwise (an explicit `cases` hides the variable from
/// proptest itself, so it is read here).
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

/// A small valid file using every part of the format: compact prices, zone and regional spot,
/// an interruption band, a second region, explicit offerings, an accelerator, EFA, an overhead
/// override and an estimate.
const VALID: &str = r#"schema = 1
mode = "extend"
cloud = "aws"
region = "us-east-1"
default_region = "us-east-1"

[[instance_type]]
name = "p5.48xlarge"
family = "p5"
vcpu = 192
memory_mib = 2097152
arch = "amd64"
accelerator = { manufacturer = "nvidia", name = "h100", count = 8, memory_mib = 81920, resource = "nvidia.com/gpu" }
local_nvme_gb = 30400
network_gbps = 3200.0
interconnect = "efa"
efa_count = 32
max_pods = 100
spec_source = "K-AWS-IT"
zones = ["us-east-1a", "us-east-1b"]
zones_source = "SKY-AWS"
on_demand = { price = 55.04, source = "K-AWS-P", as_of = 2026-07-20 }
spot = [
  { zone = "us-east-1b", price = 19.2531, source = "SKY-AWS:use1-az2", as_of = 2026-11-30 },
]
spot_interruption = { band = "<5%", source = "AWS-SA", as_of = 2026-11-30 }

[[instance_type.regions]]
region = "us-west-2"
zones = ["us-west-2a", "us-west-2b"]
on_demand = { price = 55.04, source = "SKY-AWS", as_of = "2026-11-30" }
spot = [{ price = 20.1, source = "SKY-AWS", as_of = 2026-11-30, estimate = true, rule = "regional" }]

[[instance_type]]
name = "m7i.large"
family = "m7i"
vcpu = 2
memory_mib = 8192
arch = "amd64"
max_pods = 29
overhead = { cpu_millis = 80, memory_mib = 600 }
offerings = [
  { zone = "us-east-1a", capacity_type = "on-demand", price = 0.1008, source = "mine", as_of = 2026-10-01 },
  { zone = "us-east-1c", capacity_type = "reserved", price = 0.07, source = "odcr", as_of = 2026-10-01, available = false },
  { region = "eu-west-1", zone = "eu-west-1a", capacity_type = "spot", price = 0.04, source = "x", as_of = 2026-10-01, interruption = { band = "5-10%", source = "AWS-SA", as_of = 2026-11-30 } },
]

[[instance_type]]
name = "a2-highgpu-1g"
cloud = "gcp"
region = "us-central1"
family = "a2"
vcpu = 12
memory_mib = 87040
arch = "amd64"
accelerator = { manufacturer = "nvidia", name = "a100", count = 1, memory_mib = 40960, resource = "nvidia.com/gpu" }
max_pods = 110
zones = ["us-central1-a"]
on_demand = { price = 3.67, source = "G", as_of = 2026-08-03 }
spot = [{ price = 1.1, source = "G", as_of = 2026-08-03 }]

[[instance_type]]
name = "Standard_NV6ads_A10_v5"
cloud = "azure"
region = "eastus"
family = "NVadsA10v5"
vcpu = 6
memory_mib = 56320
arch = "amd64"
accelerator = { manufacturer = "nvidia", name = "a10", count = 0, fraction = 0.1667, memory_mib = 4096, resource = "nvidia.com/gpu" }
max_pods = 30
zones = ["eastus-1", "eastus-2"]
on_demand = { price = 0.454, source = "AZ", as_of = 2026-06-18 }
"#;

/// Whatever parsed must be usable by the rest of the program, and meet the documented rules.
fn check_parsed(file: &CatalogFile) -> Result<(), TestCaseError> {
    let mut names = HashSet::new();
    for it in &file.instance_types {
        prop_assert!(
            names.insert((it.cloud, it.name.clone())),
            "duplicate {}",
            it.name
        );
        prop_assert!(it.vcpu > 0 && it.memory_mib > 0 && it.max_pods > 0);
        prop_assert!(it.network_gbps.is_finite() && it.network_gbps >= 0.0);
        let capacity = it.capacity();
        let allocatable = it.allocatable();
        for (resource, amount) in &allocatable {
            prop_assert!(
                *amount <= capacity[resource],
                "{resource}: {amount} > capacity"
            );
        }
        let _ = it.labels();
        let _ = it.network_mbps();
        let _ = it.accelerator_count();
        let _ = it.cheapest_offering(None);
        let mut keys = HashSet::new();
        for o in &it.offerings {
            prop_assert!(
                o.price_per_hour.is_finite()
                    && (0.0..=MAX_PRICE_PER_HOUR).contains(&o.price_per_hour),
                "{}: price {}",
                it.name,
                o.price_per_hour
            );
            prop_assert!(
                zone_matches_region(it.cloud, &o.region, &o.zone),
                "{}",
                o.zone
            );
            prop_assert!(keys.insert((&o.region, &o.zone, o.capacity_type)));
            let _ = it.offering_labels(o);
        }
    }
    let catalog = Catalog::default().with_override(file.clone());
    prop_assert_eq!(catalog.len(), file.instance_types.len());
    for it in catalog.instance_types() {
        for o in &it.offerings {
            let _ = catalog.spot_interruption(it, o);
        }
    }
    let _ = catalog.labels();
    Ok(())
}

/// Tokens that stress the parser and the validation: TOML punctuation, special floats,
/// integers at the edges of u32 / i64, dates that do not exist, and table headers.
const TOKENS: &[&str] = &[
    "=",
    "[",
    "]",
    "{",
    "}",
    ",",
    "\"",
    "'",
    "\n",
    "#",
    ".",
    "nan",
    "inf",
    "-inf",
    "+nan",
    "-1",
    "0",
    "-0.0",
    "1e308",
    "1e-320",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "18446744073709551615",
    "2026-02-30",
    "2026-13-01",
    "2026-07-20T10:00:00Z",
    "\"us-east-1z\"",
    "\"\"",
    "\" \"",
    "true",
    "[[instance_type]]",
    "[[instance_type.regions]]",
    "\ncloud = \"gcp\"\n",
    "\nestimate = true\n",
    "\nefa_count = 0\n",
    "\nzones = []\n",
    "é",
    "\u{0}",
    "\u{feff}",
];

/// One edit of the valid file.
#[derive(Debug, Clone)]
enum Mutation {
    Delete(Index, usize),
    Insert(Index, &'static str),
    /// Replace the n-th number in the file with a token.
    ReplaceNumber(Index, &'static str),
    DuplicateLine(Index),
    DeleteLine(Index),
    SwapLines(Index, Index),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let token = || proptest::sample::select(TOKENS);
    prop_oneof![
        1 => (any::<Index>(), 1usize..12).prop_map(|(i, n)| Mutation::Delete(i, n)),
        1 => (any::<Index>(), token()).prop_map(|(i, t)| Mutation::Insert(i, t)),
        3 => (any::<Index>(), token()).prop_map(|(i, t)| Mutation::ReplaceNumber(i, t)),
        1 => any::<Index>().prop_map(Mutation::DuplicateLine),
        1 => any::<Index>().prop_map(Mutation::DeleteLine),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
    ]
}

/// Byte ranges of the numbers (and dates) in `text`.
fn numbers(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i].is_ascii_digit() && (i == 0 || !bytes[i - 1].is_ascii_alphanumeric());
        if starts {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_digit() || b".-eE+".contains(&bytes[i])) {
                i += 1;
            }
            out.push((start, i));
        } else {
            i += 1;
        }
    }
    out
}

fn apply(text: &str, m: &Mutation) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let lines = |t: &str| t.split('\n').map(str::to_owned).collect::<Vec<_>>();
    match m {
        Mutation::Delete(at, n) => {
            if !bytes.is_empty() {
                let start = at.index(bytes.len());
                let end = (start + n).min(bytes.len());
                bytes.drain(start..end);
            }
        }
        Mutation::Insert(at, token) => {
            let pos = at.index(bytes.len() + 1);
            bytes.splice(pos..pos, token.bytes());
        }
        Mutation::ReplaceNumber(which, token) => {
            let spans = numbers(text);
            if !spans.is_empty() {
                let (s, e) = spans[which.index(spans.len())];
                bytes.splice(s..e, token.bytes());
            }
        }
        Mutation::DuplicateLine(at) => {
            let mut l = lines(text);
            let i = at.index(l.len());
            l.insert(i, l[i].clone());
            return l.join("\n");
        }
        Mutation::DeleteLine(at) => {
            let mut l = lines(text);
            l.remove(at.index(l.len()));
            return l.join("\n");
        }
        Mutation::SwapLines(a, b) => {
            let mut l = lines(text);
            let (a, b) = (a.index(l.len()), b.index(l.len()));
            l.swap(a, b);
            return l.join("\n");
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Special and ordinary prices.
fn price() -> impl Strategy<Value = f64> {
    prop_oneof![
        proptest::sample::select(vec![
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            -0.0,
            0.0,
            -1.0,
            -1e-300,
            f64::MIN_POSITIVE,
            5e-324,
            55.04,
            MAX_PRICE_PER_HOUR,
            MAX_PRICE_PER_HOUR * 1.000001,
            1e300,
            f64::MAX,
        ]),
        0.0..200.0f64,
        -1e6..1e6f64,
        any::<f64>(),
    ]
}

/// A price as TOML writes it.
fn toml_float(v: f64) -> String {
    if v.is_nan() {
        if v.is_sign_negative() { "-nan" } else { "nan" }.to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.to_owned()
    } else {
        // Debug keeps a decimal point or an exponent, so the value stays a TOML float.
        format!("{v:?}")
    }
}

/// Where a price can be written in the valid file, as (text to replace, field path it has).
const PRICE_SITES: &[(&str, &str)] = &[
    ("price = 55.04, source = \"K-AWS-P\"", "on_demand.price"),
    ("price = 19.2531", "spot[0].price"),
    (
        "price = 55.04, source = \"SKY-AWS\"",
        "regions[0].on_demand.price",
    ),
    ("price = 20.1", "regions[0].spot[0].price"),
    ("price = 0.1008", "offerings[0].price"),
    ("price = 0.07", "offerings[1].price"),
    ("price = 1.1", "spot[0].price"),
    ("price = 0.454", "on_demand.price"),
];

/// Spec numbers as (text to replace, field name); the values are written as TOML integers.
const SPEC_SITES: &[&str] = &[
    "vcpu = 192",
    "memory_mib = 2097152",
    "local_nvme_gb = 30400",
    "max_pods = 100",
    "efa_count = 32",
    "count = 8",
    "memory_mib = 81920",
    "cpu_millis = 80",
    "memory_mib = 600 }",
    "vcpu = 12",
    "memory_mib = 87040\n",
    "memory_mib = 56320",
    "max_pods = 30",
];

fn spec_value() -> impl Strategy<Value = i64> {
    prop_oneof![
        proptest::sample::select(vec![
            0,
            1,
            -1,
            i64::from(u32::MAX),
            i64::from(u32::MAX) + 1,
            1 << 40,
            1 << 44,
            1 << 54,
            i64::MAX / 1000,
            i64::MAX,
            i64::MIN,
        ]),
        0..1_000_000i64,
        any::<i64>(),
    ]
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_text_never_panics(text in any::<String>()) {
        if let Ok(file) = Catalog::parse("fuzz.toml", &text) {
            check_parsed(&file)?;
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let text = String::from_utf8_lossy(&bytes);
        if let Ok(file) = Catalog::parse("fuzz.toml", &text) {
            check_parsed(&file)?;
        }
    }

    #[test]
    fn mutated_valid_files_never_panic(mutations in proptest::collection::vec(mutation(), 1..5)) {
        let text = mutations.iter().fold(VALID.to_owned(), |t, m| apply(&t, m));
        match Catalog::parse("mutated.toml", &text) {
            Ok(file) => check_parsed(&file)?,
            Err(e) => {
                let message = e.to_string();
                prop_assert!(!message.contains('\n'), "multi-line error: {}", message);
                prop_assert!(message.starts_with("mutated.toml: "), "{}", message);
            }
        }
    }

    #[test]
    fn prices_outside_the_range_are_rejected(site in 0..PRICE_SITES.len(), p in price()) {
        let (find, field) = PRICE_SITES[site];
        let value = find.split_once(',').map_or(find, |(v, _)| v);
        let rest = &find[value.len()..];
        let text = VALID.replacen(find, &format!("price = {}{rest}", toml_float(p)), 1);
        let result = Catalog::parse("prices.toml", &text);
        let valid = p.is_finite() && (0.0..=MAX_PRICE_PER_HOUR).contains(&p);
        match result {
            Ok(file) => {
                prop_assert!(valid, "price {} accepted at {}", p, field);
                check_parsed(&file)?;
            }
            Err(PricingError::Invalid { field: f, message, .. }) => {
                prop_assert!(!valid, "price {} rejected at {}: {}", p, f, message);
                prop_assert_eq!(f, field);
            }
            Err(e) => prop_assert!(false, "unexpected error for price {p}: {e}"),
        }
    }

    #[test]
    fn absurd_spec_numbers_are_rejected_or_usable(site in 0..SPEC_SITES.len(), n in spec_value()) {
        let find = SPEC_SITES[site];
        let (name, _) = find.split_once(" = ").unwrap();
        let tail = if find.ends_with(" }") { " }" } else if find.ends_with('\n') { "\n" } else { "" };
        let text = VALID.replacen(find, &format!("{name} = {n}{tail}"), 1);
        if let Ok(file) = Catalog::parse("spec.toml", &text) {
            check_parsed(&file)?;
        }
    }

    #[test]
    fn network_bandwidth_and_fraction_floats(v in price(), fraction in any::<bool>()) {
        let text = if fraction {
            VALID.replacen("fraction = 0.1667", &format!("fraction = {}", toml_float(v)), 1)
        } else {
            VALID.replacen("network_gbps = 3200.0", &format!("network_gbps = {}", toml_float(v)), 1)
        };
        let result = Catalog::parse("floats.toml", &text);
        let valid = if fraction {
            v.is_finite() && v > 0.0 && v < 1.0
        } else {
            v.is_finite() && v >= 0.0
        };
        prop_assert_eq!(result.is_ok(), valid, "{} = {:?}: {:?}", if fraction { "fraction" } else { "network_gbps" }, v, result.as_ref().err());
        if let Ok(file) = result {
            check_parsed(&file)?;
        }
    }
}

#[test]
fn the_valid_file_is_valid_and_every_site_is_in_it() {
    let file = Catalog::parse("valid.toml", VALID).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(file.instance_types.len(), 4);
    for (site, _) in PRICE_SITES {
        assert!(VALID.contains(site), "{site}");
    }
    for site in SPEC_SITES {
        assert!(VALID.contains(site), "{site}");
    }
}
