//! `quartermaster catalog`: the JSON contract, filters and bad override files.

use std::collections::BTreeSet;

use quartermaster_tests::quartermaster;
use serde_json::Value;

fn catalog_json(args: &[&str]) -> Vec<Value> {
    let mut argv = vec!["catalog", "-o", "json"];
    argv.extend_from_slice(args);
    let out = quartermaster(&argv);
    assert_eq!(out.code, 0, "stderr: {}", out.stderr);
    out.json().as_array().expect("a JSON array").clone()
}

fn find<'a>(types: &'a [Value], cloud: &str, name: &str) -> &'a Value {
    types
        .iter()
        .find(|t| t["cloud"] == cloud && t["name"] == name)
        .unwrap_or_else(|| panic!("{cloud}/{name} missing from catalog"))
}

#[test]
fn json_contract_has_the_promised_keys() {
    let types = catalog_json(&[]);
    for t in &types {
        for key in [
            "cloud",
            "name",
            "vcpu",
            "memory_mib",
            "accelerator",
            "labels",
            "offerings",
        ] {
            assert!(t.get(key).is_some(), "{} lacks {key}", t["name"]);
        }
        assert!(t["labels"].is_object());
        if let Some(acc) = t["accelerator"].as_object() {
            for key in ["manufacturer", "name", "count", "memory_mib", "resource"] {
                assert!(
                    acc.contains_key(key),
                    "{} accelerator lacks {key}",
                    t["name"]
                );
            }
        } else {
            assert!(t["accelerator"].is_null());
        }
        let offerings = t["offerings"].as_array().expect("offerings array");
        assert!(!offerings.is_empty(), "{} has no offering", t["name"]);
        for o in offerings {
            for key in [
                "region",
                "zone",
                "capacity_type",
                "price_per_hour",
                "available",
            ] {
                assert!(o.get(key).is_some(), "{} offering lacks {key}", t["name"]);
            }
            let price = o["price_per_hour"].as_f64().expect("numeric price");
            assert!(price.is_finite() && price >= 0.0);
        }
    }
}

#[test]
fn at_least_forty_accelerator_types_across_three_clouds() {
    let types = catalog_json(&[]);
    let accelerated: Vec<&Value> = types
        .iter()
        .filter(|t| !t["accelerator"].is_null())
        .collect();
    assert!(
        accelerated.len() >= 40,
        "only {} accelerator types",
        accelerated.len()
    );
    let clouds: BTreeSet<&str> = accelerated
        .iter()
        .filter_map(|t| t["cloud"].as_str())
        .collect();
    assert_eq!(clouds, BTreeSet::from(["aws", "azure", "gcp"]));
    let cpu_only = types.iter().filter(|t| t["accelerator"].is_null()).count();
    assert!(
        cpu_only >= 9,
        "CPU types per cloud are needed for CPU pods; found {cpu_only}"
    );
}

#[test]
fn current_prices_not_marketing_figures() {
    let types = catalog_json(&[
        "--cloud",
        "aws",
        "--capacity-type",
        "on-demand",
        "--region",
        "us-east-1",
    ]);
    let on_demand = |name: &str| {
        find(&types, "aws", name)["offerings"][0]["price_per_hour"]
            .as_f64()
            .unwrap()
    };
    assert_eq!(on_demand("p5.48xlarge"), 55.04);
    assert_eq!(on_demand("p4d.24xlarge"), 21.957642);
    assert_eq!(on_demand("dl1.24xlarge"), 13.10904);
}

#[test]
fn accelerator_resources_and_labels() {
    let types = catalog_json(&[]);
    let p5 = find(&types, "aws", "p5.48xlarge");
    assert_eq!(p5["accelerator"]["resource"], "nvidia.com/gpu");
    assert_eq!(p5["accelerator"]["count"], 8);
    assert_eq!(p5["labels"]["quartermaster.dev/instance-gpu-name"], "h100");
    assert_eq!(p5["labels"]["quartermaster.dev/instance-gpu-count"], "8");
    assert_eq!(
        p5["labels"]["quartermaster.dev/instance-interconnect"],
        "efa"
    );
    assert_eq!(
        p5["labels"]["node.kubernetes.io/instance-type"],
        "p5.48xlarge"
    );
    assert_eq!(
        find(&types, "aws", "dl1.24xlarge")["accelerator"]["resource"],
        "habana.ai/gaudi"
    );
    assert_eq!(
        find(&types, "aws", "trn1.32xlarge")["accelerator"]["resource"],
        "aws.amazon.com/neuron"
    );
    let nv6 = find(&types, "azure", "Standard_NV6ads_A10_v5");
    assert_ne!(
        nv6["accelerator"]["count"], 1,
        "a 1/6 vGPU must not advertise a whole GPU"
    );
    assert!(
        nv6["accelerator"]["fraction"]
            .as_f64()
            .is_some_and(|f| f > 0.0 && f < 1.0)
    );
}

#[test]
fn filters_narrow_the_listing() {
    let h100 = catalog_json(&["--gpu", "h100"]);
    assert!(!h100.is_empty());
    assert!(h100.iter().all(|t| t["accelerator"]["name"] == "h100"));
    let clouds: BTreeSet<&str> = h100.iter().filter_map(|t| t["cloud"].as_str()).collect();
    assert_eq!(clouds.len(), 3, "H100s are sold on all three clouds");

    let eight = catalog_json(&["--min-gpus", "8", "--cloud", "gcp"]);
    assert!(!eight.is_empty());
    assert!(
        eight
            .iter()
            .all(|t| t["cloud"] == "gcp" && t["accelerator"]["count"].as_u64() >= Some(8))
    );

    let spot = catalog_json(&["--capacity-type", "spot"]);
    assert!(!spot.is_empty());
    for t in &spot {
        assert!(
            t["offerings"]
                .as_array()
                .unwrap()
                .iter()
                .all(|o| o["capacity_type"] == "spot")
        );
    }

    let region = catalog_json(&["--region", "us-central1"]);
    assert!(region.iter().all(|t| t["cloud"] == "gcp"));
}

#[test]
fn table_and_csv_render() {
    let table = quartermaster(&["catalog", "--gpu", "h100"]);
    assert_eq!(table.code, 0, "{}", table.stderr);
    assert!(table.stdout.contains("p5.48xlarge"));
    assert!(table.stdout.contains("a3-highgpu-8g"));
    let csv = quartermaster(&["catalog", "--cloud", "aws", "--gpu", "h100", "-o", "csv"]);
    assert_eq!(csv.code, 0, "{}", csv.stderr);
    let mut lines = csv.stdout.lines();
    assert!(lines.next().unwrap().starts_with("cloud,name,"));
    assert!(lines.all(|l| l.starts_with("aws,p5")));
}

#[test]
fn bad_override_file_names_file_entry_and_field() {
    let dir = std::env::temp_dir().join(format!("qm-catalog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bad.toml");
    std::fs::write(&file, "this is = not [valid toml").unwrap();
    let out = quartermaster(&["catalog", "--catalog", file.to_str().unwrap()]);
    assert_eq!(out.code, 1);
    assert!(out.stdout.is_empty());
    assert_eq!(
        out.stderr.lines().count(),
        1,
        "one clear line: {}",
        out.stderr
    );
    assert!(out.stderr.starts_with("error: "), "{}", out.stderr);
    assert!(out.stderr.contains("bad.toml"), "{}", out.stderr);

    let missing = quartermaster(&["catalog", "--catalog", "/nonexistent/catalog.toml"]);
    assert_eq!(missing.code, 1);
    assert!(
        missing.stderr.contains("/nonexistent/catalog.toml"),
        "{}",
        missing.stderr
    );
}

#[test]
fn usage_errors_exit_two_and_help_exits_zero() {
    let bad = quartermaster(&["catalog", "--cloud", "ibm"]);
    assert_eq!(bad.code, 2);
    assert!(bad.stderr.contains("ibm"));
    let help = quartermaster(&["catalog", "--help"]);
    assert_eq!(help.code, 0);
    assert!(help.stdout.contains("--min-gpus"));
    assert!(help.stdout.contains("--capacity-type"));
}

#[test]
fn several_regions_per_cloud_and_the_interruption_key() {
    let west = catalog_json(&["--cloud", "aws", "--region", "us-west-2"]);
    assert!(!west.is_empty(), "AWS types are sold in us-west-2");
    for t in &west {
        for o in t["offerings"].as_array().unwrap() {
            assert_eq!(o["region"], "us-west-2", "{}", t["name"]);
            assert!(o["zone"].as_str().unwrap().starts_with("us-west-2"));
        }
    }
    let all = catalog_json(&["--cloud", "aws"]);
    let regions: BTreeSet<&str> = all
        .iter()
        .flat_map(|t| t["offerings"].as_array().unwrap())
        .filter_map(|o| o["region"].as_str())
        .collect();
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
    // Every offering says whether its spot volatility is known (null when it is not).
    for t in &all {
        for o in t["offerings"].as_array().unwrap() {
            assert!(o.get("interruption").is_some(), "{}", t["name"]);
            if o["capacity_type"] != "spot" {
                assert!(o["interruption"].is_null(), "{}", t["name"]);
            }
        }
    }
    let gcp = catalog_json(&["--cloud", "gcp", "--region", "us-west1"]);
    assert!(gcp.iter().any(|t| t["name"] == "a2-highgpu-8g"), "{gcp:?}");
}

/// A GPU NodePool whose NodeClass names no region, and one GPU pod.
const POOL_WITHOUT_REGION: &str = "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: gpu}
      requirements:
      - {key: quartermaster.dev/instance-family, operator: In, values: [p5]}
---
apiVersion: quartermaster.dev/v1
kind: AWSNodeClass
metadata: {name: gpu}
spec:
  role: r
  subnetSelectorTerms: [{id: subnet-1}]
  securityGroupSelectorTerms: [{id: sg-1}]
  amiSelectorTerms: [{alias: al2023@latest}]
---
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: ml}
spec:
  containers:
  - name: c
    image: x
    resources:
      limits: {nvidia.com/gpu: '8'}
";

#[test]
fn plan_buys_in_the_cluster_region_or_the_default_region() {
    let dir = std::env::temp_dir().join(format!("qm-catalog-region-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("pool.yaml");
    std::fs::write(&file, POOL_WITHOUT_REGION).unwrap();
    let file = file.display().to_string();
    let plan = |extra: &[&str]| {
        let mut argv = vec!["plan", "-f", &file, "-o", "json"];
        argv.extend_from_slice(extra);
        let out = quartermaster(&argv);
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.json()
    };
    let zones = |v: &Value| -> Vec<String> {
        v["new_nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["zone"].as_str().unwrap().to_owned())
            .collect()
    };
    let default = plan(&[]);
    assert!(!zones(&default).is_empty(), "{default}");
    assert!(zones(&default).iter().all(|z| z.starts_with("us-east-1")));
    assert!(
        default["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("using the catalog's default aws region us-east-1")),
        "{default}"
    );
    let west = plan(&["--region", "us-west-2"]);
    assert!(!zones(&west).is_empty(), "{west}");
    assert!(
        zones(&west).iter().all(|z| z.starts_with("us-west-2")),
        "{west}"
    );

    let out = quartermaster(&["plan", "-f", &file, "--region", "mars-north-7"]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "the cluster region \"mars-north-7\" has no offerings of any cloud in the catalog"
        ),
        "{}",
        out.stderr
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
