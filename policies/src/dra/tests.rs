//! DRA selectors and allocation, one test per selector form and allocation mode.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{DeviceClass, ResourceClaimSpec};

use super::*;

fn gpu(name: &str, product: &str, memory: &str, nvlink: &str) -> NodeDevice {
    let device: k8s_openapi::api::resource::v1::Device =
        serde_json::from_value(serde_json::json!({
            "name": name,
            "attributes": {
                "productName": {"string": product},
                "architecture": {"string": "Hopper"},
                "cudaComputeCapability": {"version": "9.0.0"},
                "index": {"int": name.trim_start_matches("gpu-").parse::<i64>().unwrap()},
                "gpu.nvidia.com/type": {"string": "gpu"},
                "resource.kubernetes.io/pcieRoot": {"string": nvlink},
                "nvlinkDomain": {"string": nvlink},
            },
            "capacity": {"memory": {"value": memory}},
        }))
        .expect("device");
    NodeDevice::from_slice("gpu.nvidia.com", &device).expect("valid device")
}

fn node(n: usize) -> Vec<NodeDevice> {
    (0..n)
        .map(|i| {
            gpu(
                &format!("gpu-{i}"),
                "NVIDIA H100 80GB HBM3",
                "80Gi",
                if i < 4 { "nvl-a" } else { "nvl-b" },
            )
        })
        .collect()
}

fn classes() -> BTreeMap<String, DeviceClass> {
    let class: DeviceClass = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]},
    }))
    .expect("class");
    BTreeMap::from([("gpu.nvidia.com".to_owned(), class)])
}

fn claim(spec: serde_json::Value) -> ClaimRequirements {
    let spec: ResourceClaimSpec = serde_json::from_value(spec).expect("spec");
    ClaimRequirements::from_spec(&spec, &classes()).expect("claim compiles")
}

fn one(selector: &str) -> Result<bool, String> {
    let s = DeviceSelector::compile("test", selector).expect("compiles");
    SelectorEvaluator::default().matches(&s, &node(1)[0])
}

#[test]
fn selectors_read_driver_attributes_versions_and_capacity() {
    assert_eq!(one("device.driver == 'gpu.nvidia.com'"), Ok(true));
    assert_eq!(
        one("device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')"),
        Ok(true)
    );
    assert_eq!(
        one("device.attributes['gpu.nvidia.com'].index == 0"),
        Ok(true)
    );
    assert_eq!(
        one("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"),
        Ok(true)
    );
    assert_eq!(
        one("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('80Gi'))"),
        Ok(false)
    );
    assert_eq!(
        one("device.capacity['gpu.nvidia.com'].memory == quantity('81920Mi')"),
        Ok(true),
        "quantities are equal by value"
    );
    assert_eq!(
        one(
            "device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('8.0.0'))"
        ),
        Ok(true)
    );
    assert_eq!(
        one("device.attributes['gpu.nvidia.com'].cudaComputeCapability.major() == 9"),
        Ok(true)
    );
    assert_eq!(
        one("quantity('1500m').asApproximateFloat() == 1.5 && !quantity('1500m').isInteger()"),
        Ok(true)
    );
    assert_eq!(one("isQuantity('40Gi') && !isSemver('nine')"), Ok(true));
}

#[test]
fn an_unknown_domain_is_an_empty_map_and_an_unknown_field_an_error() {
    assert_eq!(
        one("'model' in device.attributes['dra.example.com']"),
        Ok(false)
    );
    let err = one("device.attributes['gpu.nvidia.com'].noSuchAttribute == 'x'").unwrap_err();
    assert!(err.contains("gpu-0"), "{err}");
    assert!(one("device.driver").unwrap_err().contains("not a bool"));
}

#[test]
fn a_selector_that_does_not_compile_is_refused_with_its_field() {
    let err = DeviceSelector::compile(
        "spec.devices.requests[0].exactly.selectors[0].cel.expression",
        "device.driver ==",
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: \"device.driver ==\": compilation failed: ERROR: <input>:1:"),
        "{err}"
    );
    let long = format!("device.driver == '{}'", "x".repeat(MAX_EXPRESSION_BYTES));
    assert!(
        DeviceSelector::compile("f", &long)
            .unwrap_err()
            .to_string()
            .contains("no more than 10240 bytes")
    );
}

#[test]
fn exact_count_takes_that_many_matching_devices() {
    let c = claim(
        serde_json::json!({"devices": {"requests": [{"name": "gpus", "exactly": {
            "deviceClassName": "gpu.nvidia.com", "count": 2,
            "selectors": [{"cel": {"expression": "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"}}],
        }}]}}),
    );
    let eval = SelectorEvaluator::default();
    let a = c.allocate(&node(8), &eval).expect("fits");
    assert_eq!(a.devices.len(), 2);
    assert!(
        a.devices
            .iter()
            .all(|d| d.request == "gpus" && d.driver == "gpu.nvidia.com")
    );
    assert_eq!(
        c.allocate(&node(1), &eval),
        Err(Unsatisfied::TooFewDevices {
            request: "gpus".into(),
            matching: 1,
            wanted: 2
        })
    );
}

#[test]
fn all_takes_every_matching_device_and_needs_at_least_one() {
    let c = claim(
        serde_json::json!({"devices": {"requests": [{"name": "all", "exactly": {
        "deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}]}}),
    );
    let eval = SelectorEvaluator::default();
    assert_eq!(c.allocate(&node(8), &eval).expect("fits").devices.len(), 8);
    assert!(matches!(
        c.allocate(&[], &eval),
        Err(Unsatisfied::TooFewDevices { .. })
    ));
    let mut taken = vec![false; 8];
    taken[3] = true;
    assert_eq!(
        c.allocate_free(&node(8), &taken, &eval),
        Err(Unsatisfied::DevicesTaken {
            request: "all".into()
        })
    );
}

#[test]
fn first_available_takes_the_first_alternative_that_fits() {
    let c = claim(
        serde_json::json!({"devices": {"requests": [{"name": "gpu", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression":
                "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('141Gi')) >= 0"}}]},
            {"name": "two-h100", "deviceClassName": "gpu.nvidia.com", "count": 2},
        ]}]}}),
    );
    let a = c
        .allocate(&node(8), &SelectorEvaluator::default())
        .expect("fits");
    assert_eq!(a.devices.len(), 2);
    assert!(a.devices.iter().all(|d| d.request == "gpu/two-h100"));
}

#[test]
fn match_attribute_keeps_devices_in_one_nvlink_domain() {
    let c = claim(serde_json::json!({"devices": {
        "requests": [
            {"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 3}},
            {"name": "b", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}},
        ],
        "constraints": [{"matchAttribute": "gpu.nvidia.com/nvlinkDomain"}],
    }}));
    let devices = node(8);
    // 3 + 2 = 5 devices in one domain of 4 cannot be.
    assert_eq!(
        c.allocate(&devices, &SelectorEvaluator::default()),
        Err(Unsatisfied::Constraint {
            attribute: "gpu.nvidia.com/nvlinkDomain".into()
        })
    );
    let c = claim(serde_json::json!({"devices": {
        "requests": [
            {"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}},
            {"name": "b", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}},
        ],
        "constraints": [{"requests": ["a", "b"], "matchAttribute": "resource.kubernetes.io/pcieRoot"}],
    }}));
    let a = c
        .allocate(&devices, &SelectorEvaluator::default())
        .expect("fits");
    let domains: std::collections::BTreeSet<&str> = a
        .devices
        .iter()
        .map(|d| {
            if d.device.as_str() < "gpu-4" {
                "nvl-a"
            } else {
                "nvl-b"
            }
        })
        .collect();
    assert_eq!(domains.len(), 1, "{a:?}");
}

#[test]
fn distinct_attribute_takes_devices_with_different_values() {
    let c = claim(serde_json::json!({"devices": {
        "requests": [{"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}],
        "constraints": [{"distinctAttribute": "gpu.nvidia.com/nvlinkDomain"}],
    }}));
    let a = c
        .allocate(&node(8), &SelectorEvaluator::default())
        .expect("fits");
    assert_eq!(a.devices[0].device, "gpu-0");
    assert_eq!(a.devices[1].device, "gpu-4");
    assert_eq!(
        c.allocate(&node(4), &SelectorEvaluator::default()),
        Err(Unsatisfied::Constraint {
            attribute: "gpu.nvidia.com/nvlinkDomain".into()
        }),
        "four devices in one domain: no two distinct"
    );
}

#[test]
fn claims_name_their_errors_by_field() {
    let spec =
        |v: serde_json::Value| -> ResourceClaimSpec { serde_json::from_value(v).expect("spec") };
    let err = ClaimRequirements::from_spec(
        &spec(serde_json::json!({"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "nope"}}]}})),
        &classes(),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        err,
        "spec.devices.requests[0].exactly.deviceClassName: DeviceClass \"nope\" not found"
    );
    let err = ClaimRequirements::from_spec(
        &spec(serde_json::json!({"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "Some"}}]}})),
        &classes(),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("Unsupported value: \"Some\""), "{err}");
}

#[test]
fn the_strings_extension_and_matches_are_there_as_in_the_api_server() {
    // NVIDIA's own specs select with lowerAscii() and matches() (gpu-test6, e2e product-type).
    for selector in [
        "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*h100.*$')",
        "device.attributes['gpu.nvidia.com'].productName.upperAscii().contains('HBM3')",
        "device.attributes['gpu.nvidia.com'].productName.split(' ')[1] == 'H100'",
        "device.attributes['gpu.nvidia.com'].productName.indexOf('H100') == 7",
        "device.attributes['gpu.nvidia.com'].productName.replace('NVIDIA ', '').startsWith('H100')",
        "device.attributes['gpu.nvidia.com'].productName.substring(0, 6).trim() == 'NVIDIA'",
        "['a', 'b'].join('-') == 'a-b'",
    ] {
        assert_eq!(one(selector), Ok(true), "{selector}");
    }
    assert_eq!(
        one("device.attributes['gpu.nvidia.com'].productName.lowerAscii() == 'nvidia a100'"),
        Ok(false)
    );
}
