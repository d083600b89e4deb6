use std::collections::BTreeSet;

use super::*;
use crate::sharing::{mig_layout, mig_layouts};
use crate::{Catalog, Cloud};

fn embedded(cloud: Cloud, name: &str) -> InstanceType {
    Catalog::embedded_all_regions()
        .get(cloud, name)
        .unwrap_or_else(|| panic!("{name} in the embedded catalog"))
        .clone()
}

fn string(d: &PublishedDevice, name: &str) -> String {
    match d.attributes.get(name) {
        Some(DeviceAttribute::String(s)) => s.clone(),
        other => panic!("{}: attribute {name} is {other:?}", d.name),
    }
}

fn version(d: &PublishedDevice, name: &str) -> String {
    match d.attributes.get(name) {
        Some(DeviceAttribute::Version(s)) => s.clone(),
        other => panic!("{}: attribute {name} is {other:?}", d.name),
    }
}

#[test]
fn the_data_file_parses() {
    model::parse(model::DEVICES_TOML).unwrap();
    assert!(model::parse("schema = 2\n[nvidia]\ndriver = \"x\"\ndriver_version = \"1.0.0\"\ncuda_driver_version = \"1.0.0\"\nsource = \"s\"\nas_of = 2026-01-01\n").is_err());
}

#[test]
fn entries_are_unique() {
    let twice = model::DEVICES_TOML.replacen("[[gpu]]\nname = \"t4\"", "[[gpu]]\nname = \"t4\"\nmemory_mib = 16384\nproduct_name = \"x\"\nbrand = \"x\"\narchitecture = \"x\"\ncompute_capability = \"1.0.0\"\ndevices_per_pcie_root = 1\nsource = \"x\"\nas_of = 2026-01-01\n\n[[gpu]]\nname = \"t4\"", 1);
    assert_eq!(
        model::parse(&twice).unwrap_err(),
        "gpu t4 (16384 MiB) is listed twice"
    );
}

#[test]
fn version_attributes_are_semantic_versions() {
    for t in Catalog::embedded_all_regions().instance_types() {
        let mut devices = published_devices(t);
        if let Some(acc) = &t.accelerator {
            for layout in mig_layouts(acc) {
                devices.extend(published_devices_with_mig(t, layout));
            }
        }
        for d in &devices {
            for (k, v) in &d.attributes {
                if let DeviceAttribute::Version(v) = v {
                    let parts: Vec<_> = v.split('.').collect();
                    assert!(
                        parts.len() == 3
                            && parts.iter().all(|p| {
                                !p.is_empty()
                                    && p.chars().all(|c| c.is_ascii_digit())
                                    && (p.len() == 1 || !p.starts_with('0'))
                            }),
                        "{} {}: {k} = {v:?} is not MAJOR.MINOR.PATCH",
                        t.name,
                        d.name
                    );
                }
            }
        }
    }
}

#[test]
fn every_catalog_accelerator_has_a_device_model() {
    let catalog = Catalog::embedded_all_regions();
    let mut missing = BTreeSet::new();
    for t in catalog.instance_types() {
        if let Some(acc) = &t.accelerator
            && model_source(acc, &t.family).is_none()
        {
            missing.insert(format!(
                "{}/{}/{} MiB (first seen on {} {})",
                acc.manufacturer, acc.name, acc.memory_mib, t.cloud, t.name
            ));
        }
    }
    assert!(
        missing.is_empty(),
        "accelerators without a device model in data/devices.toml:\n  {}",
        missing.into_iter().collect::<Vec<_>>().join("\n  ")
    );
}

#[test]
fn every_accelerator_type_publishes_one_device_per_accelerator_with_unique_names() {
    for t in Catalog::embedded_all_regions().instance_types() {
        let devices = published_devices(t);
        let Some(acc) = &t.accelerator else {
            assert!(devices.is_empty(), "{}", t.name);
            continue;
        };
        let expected = if acc.is_fractional() {
            1
        } else {
            acc.count as usize
        };
        assert_eq!(devices.len(), expected, "{}", t.name);
        let names: BTreeSet<_> = devices.iter().map(|d| (&d.driver, &d.name)).collect();
        assert_eq!(
            names.len(),
            devices.len(),
            "{}: device names repeat",
            t.name
        );
        for d in &devices {
            assert!(
                d.name.len() <= 63
                    && d.name
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'),
                "{}: {:?} is not a DNS label",
                t.name,
                d.name
            );
            for (k, v) in &d.attributes {
                if let DeviceAttribute::String(s) = v {
                    assert!(s.len() <= 64, "{}: {k} longer than 64", t.name);
                }
            }
        }
    }
}

#[test]
fn p4d_publishes_eight_a100s_in_pairs_per_pcie_root() {
    let p4d = embedded(Cloud::Aws, "p4d.24xlarge");
    let devices = published_devices(&p4d);
    let names: Vec<_> = devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "gpu-0", "gpu-1", "gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"
        ]
    );
    for d in &devices {
        assert_eq!(d.driver, "gpu.nvidia.com");
        assert_eq!(string(d, "type"), "gpu");
        assert_eq!(string(d, "productName"), "NVIDIA A100-SXM4-40GB");
        assert_eq!(string(d, "brand"), "Nvidia");
        assert_eq!(string(d, "architecture"), "Ampere");
        assert_eq!(version(d, "cudaComputeCapability"), "8.0.0");
        assert_eq!(version(d, "driverVersion"), "580.95.5");
        assert_eq!(version(d, "cudaDriverVersion"), "13.0.0");
        assert_eq!(d.capacity["memory"], "40Gi");
    }
    let roots: Vec<_> = devices
        .iter()
        .map(|d| string(d, PCIE_ROOT_ATTRIBUTE))
        .collect();
    assert_eq!(roots[0], roots[1]);
    assert_ne!(roots[1], roots[2]);
    assert_eq!(roots.iter().collect::<BTreeSet<_>>().len(), 4);
    assert_eq!(string(&devices[0], PCIE_ROOT_ATTRIBUTE), "pci0000:10");
    assert_eq!(string(&devices[0], PCI_BUS_ID_ATTRIBUTE), "0000:11:00.0");
    assert_eq!(string(&devices[1], PCI_BUS_ID_ATTRIBUTE), "0000:12:00.0");
    let uuids: BTreeSet<_> = devices.iter().map(|d| string(d, "uuid")).collect();
    assert_eq!(uuids.len(), 8);
}

#[test]
fn product_names_follow_the_board_not_only_the_chip() {
    let pcie = published_devices(&embedded(Cloud::Azure, "Standard_NC24ads_A100_v4"));
    assert_eq!(string(&pcie[0], "productName"), "NVIDIA A100 80GB PCIe");
    let sxm = published_devices(&embedded(Cloud::Aws, "p4de.24xlarge"));
    assert_eq!(string(&sxm[0], "productName"), "NVIDIA A100-SXM4-80GB");
    assert_eq!(sxm[0].capacity["memory"], "80Gi");
    let h100 = published_devices(&embedded(Cloud::Aws, "p5.48xlarge"));
    assert_eq!(string(&h100[7], "productName"), "NVIDIA H100 80GB HBM3");
    assert_eq!(version(&h100[7], "cudaComputeCapability"), "9.0.0");
    let t4 = published_devices(&embedded(Cloud::Aws, "g4dn.xlarge"));
    assert_eq!(string(&t4[0], "productName"), "Tesla T4");
    assert_eq!(string(&t4[0], "brand"), "Nvidia");
    assert_eq!(t4[0].capacity["memory"], "15Gi");
    assert_eq!(string(&t4[0], "architecture"), "Turing");
    let l4 = published_devices(&embedded(Cloud::Aws, "g6.xlarge"));
    assert_eq!(l4[0].capacity["memory"], "23034Mi");
    // NVML's figure, not the marketing size: 80GB HBM3 is 81559 MiB.
    assert_eq!(h100[0].capacity["memory"], "81559Mi");
    assert_eq!(string(&l4[0], "architecture"), "Ada Lovelace");
    // PCIe cards: one GPU per root.
    let g6 = published_devices(&embedded(Cloud::Aws, "g6.12xlarge"));
    let roots: BTreeSet<_> = g6.iter().map(|d| string(d, PCIE_ROOT_ATTRIBUTE)).collect();
    assert_eq!(roots.len(), 4);
}

#[test]
fn cpu_types_publish_nothing() {
    let m6i = embedded(Cloud::Aws, "m6i.large");
    assert!(published_devices(&m6i).is_empty());
    let layout = mig_layout(
        embedded(Cloud::Aws, "p4d.24xlarge")
            .accelerator
            .as_ref()
            .unwrap(),
        "all-1g.5gb",
    )
    .unwrap();
    assert!(published_devices_with_mig(&m6i, layout).is_empty());
    assert_eq!(device_model_source(&m6i), None);
}

#[test]
fn mig_layouts_expand_each_gpu_into_its_mig_devices() {
    let p4d = embedded(Cloud::Aws, "p4d.24xlarge");
    let a100 = p4d.accelerator.clone().unwrap();
    let devices = published_devices_with_mig(&p4d, mig_layout(&a100, "all-1g.5gb").unwrap());
    assert_eq!(devices.len(), 56);
    let first = &devices[0];
    assert_eq!(first.name, "gpu-0-mig-1g5gb-19-0");
    assert_eq!(string(first, "type"), "mig");
    assert_eq!(string(first, "profile"), "1g.5gb");
    assert_eq!(string(first, "parentUUID"), "GPU-a100-0");
    assert_eq!(string(first, "productName"), "NVIDIA A100-SXM4-40GB");
    assert_eq!(first.capacity["memory"], "4864Mi");
    assert_eq!(first.capacity["multiprocessors"], "14");
    assert_eq!(first.capacity["memorySlice0"], "1");
    assert_eq!(devices[6].name, "gpu-0-mig-1g5gb-19-6");
    assert_eq!(devices[7].name, "gpu-1-mig-1g5gb-19-0");
    assert!(devices.iter().all(|d| string(d, "type") == "mig"));

    // all-balanced: 2 × 1g.5gb, 1 × 2g.10gb, 1 × 3g.20gb per GPU, placed so all fit.
    let balanced = published_devices_with_mig(&p4d, mig_layout(&a100, "all-balanced").unwrap());
    assert_eq!(balanced.len(), 32);
    let gpu0: Vec<_> = balanced
        .iter()
        .filter(|d| string(d, "parentUUID") == "GPU-a100-0")
        .map(|d| (d.name.as_str(), d.capacity["memory"].as_str()))
        .collect();
    assert_eq!(
        gpu0,
        [
            ("gpu-0-mig-1g5gb-19-2", "4864Mi"),
            ("gpu-0-mig-1g5gb-19-3", "4864Mi"),
            ("gpu-0-mig-2g10gb-14-0", "9984Mi"),
            ("gpu-0-mig-3g20gb-9-4", "20096Mi"),
        ]
    );
    // Every layout of every MIG-capable type places its instances without overlap.
    for t in Catalog::embedded_all_regions().instance_types() {
        let Some(acc) = &t.accelerator else { continue };
        for layout in mig_layouts(acc) {
            let devices = published_devices_with_mig(t, layout);
            let per_gpu: u32 = layout.slices.iter().map(|(_, n)| n).sum();
            assert_eq!(
                devices.len(),
                (per_gpu * acc.count) as usize,
                "{} {}",
                t.name,
                layout.name
            );
            let names: BTreeSet<_> = devices.iter().map(|d| &d.name).collect();
            assert_eq!(names.len(), devices.len(), "{} {}", t.name, layout.name);
            for i in 0..acc.count {
                let parent = format!("GPU-{}-{i}", acc.name);
                let mut slices = BTreeSet::new();
                for d in devices.iter().filter(|d| string(d, "parentUUID") == parent) {
                    for k in d.capacity.keys().filter(|k| k.starts_with("memorySlice")) {
                        assert!(
                            slices.insert(k.clone()),
                            "{} {}: {k} twice",
                            t.name,
                            layout.name
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn mig_on_h100_uses_its_own_table_and_gpus_without_mig_stay_whole() {
    let p5 = embedded(Cloud::Aws, "p5.48xlarge");
    let h100 = p5.accelerator.clone().unwrap();
    let devices = published_devices_with_mig(&p5, mig_layout(&h100, "all-3g.40gb").unwrap());
    assert_eq!(devices.len(), 16);
    assert_eq!(devices[0].name, "gpu-0-mig-3g40gb-9-0");
    assert_eq!(devices[1].name, "gpu-0-mig-3g40gb-9-4");
    assert_eq!(devices[0].capacity["memory"], "40448Mi");
    assert_eq!(devices[0].capacity["multiprocessors"], "60");
    let p4d = embedded(Cloud::Aws, "p4d.24xlarge");
    let layout = mig_layout(p4d.accelerator.as_ref().unwrap(), "all-1g.5gb").unwrap();
    let g5 = embedded(Cloud::Aws, "g5.12xlarge");
    assert_eq!(
        published_devices_with_mig(&g5, layout),
        published_devices(&g5)
    );
}

#[test]
fn published_devices_are_deterministic() {
    for name in [
        "p5.48xlarge",
        "trn1.32xlarge",
        "dl1.24xlarge",
        "inf2.48xlarge",
    ] {
        let t = embedded(Cloud::Aws, name);
        assert_eq!(published_devices(&t), published_devices(&t), "{name}");
    }
    let t = embedded(Cloud::Azure, "Standard_ND96isr_MI300X_v5");
    assert_eq!(published_devices(&t), published_devices(&t));
}

#[test]
fn neuron_gaudi_and_amd_devices_follow_their_drivers() {
    let trn = published_devices(&embedded(Cloud::Aws, "trn1.32xlarge"));
    assert_eq!(trn.len(), 16);
    assert_eq!(trn[5].driver, "neuron.aws.com");
    assert_eq!(trn[5].name, "neuron-device-5");
    assert_eq!(string(&trn[5], "instanceType"), "trn1.32xlarge");
    assert_eq!(trn[5].attributes["deviceId"], DeviceAttribute::Int(5));
    assert_eq!(trn[5].attributes["topology_x"], DeviceAttribute::Int(1));
    assert_eq!(trn[5].attributes["topology_y"], DeviceAttribute::Int(1));
    let group4 = |d: &PublishedDevice| string(d, "resource.aws.com/devicegroup4_id");
    assert_eq!(group4(&trn[4]), group4(&trn[7]));
    assert_ne!(group4(&trn[3]), group4(&trn[4]));
    assert!(trn[0].capacity.is_empty());
    let inf2 = published_devices(&embedded(Cloud::Aws, "inf2.xlarge"));
    assert!(
        !inf2[0]
            .attributes
            .contains_key("resource.aws.com/devicegroup4_id")
    );

    let gaudi = published_devices(&embedded(Cloud::Aws, "dl1.24xlarge"));
    assert_eq!(gaudi.len(), 8);
    assert_eq!(gaudi[0].driver, "gaudi.intel.com");
    assert_eq!(gaudi[0].name, "0000-11-00-0-0x1000");
    assert_eq!(string(&gaudi[0], "model"), "Gaudi");
    assert_eq!(gaudi[0].attributes["healthy"], DeviceAttribute::Bool(true));
    assert_eq!(string(&gaudi[0], PCIE_ROOT_ATTRIBUTE), "pci0000:10");
    assert_eq!(string(&gaudi[0], "pciRoot"), "10");

    let mi300x = published_devices(&embedded(Cloud::Azure, "Standard_ND96isr_MI300X_v5"));
    assert_eq!(mi300x.len(), 8);
    assert_eq!(mi300x[0].driver, "gpu.amd.com");
    assert_eq!(mi300x[0].name, "gpu-0-128");
    assert_eq!(string(&mi300x[0], "type"), "amdgpu");
    assert_eq!(string(&mi300x[0], "productName"), "AMD_Instinct_MI300X_OAM");
    assert_eq!(version(&mi300x[0], "driverVersion"), "6.12.12");
    assert_eq!(mi300x[0].capacity["memory"], "196592Mi");
    assert_eq!(mi300x[0].capacity["computeUnits"], "304");
    assert_eq!(mi300x[3].attributes["numaNode"], DeviceAttribute::Int(0));
    assert_eq!(mi300x[4].attributes["numaNode"], DeviceAttribute::Int(1));
}

#[test]
fn fractional_slices_are_one_shared_device_with_the_slice_memory() {
    let nv6 = embedded(Cloud::Azure, "Standard_NV6ads_A10_v5");
    let devices = published_devices(&nv6);
    assert_eq!(devices.len(), 1);
    assert_eq!(devices[0].name, "gpu-0");
    assert_eq!(devices[0].capacity["memory"], "4Gi");
    assert_eq!(
        devices[0].attributes[SHARED_ATTRIBUTE],
        DeviceAttribute::Bool(true)
    );
    assert_eq!(string(&devices[0], FRACTION_ATTRIBUTE), "0.1667");
    assert_eq!(string(&devices[0], "productName"), "NVIDIA A10-4Q");
}

#[test]
fn accelerators_without_an_entry_get_the_generic_form() {
    let mut t = embedded(Cloud::Azure, "Standard_ND96isr_MI300X_v5");
    let acc = t.accelerator.as_mut().unwrap();
    acc.name = "mi355x".into();
    acc.memory_mib = 294912;
    let devices = published_devices(&t);
    assert_eq!(devices.len(), 8);
    assert_eq!(devices[0].driver, "amd.com");
    assert_eq!(devices[0].name, "mi355x-0");
    assert_eq!(string(&devices[0], "model"), "mi355x");
    assert_eq!(string(&devices[0], "vendor"), "amd");
    assert_eq!(devices[0].capacity["memory"], "288Gi");
    assert_eq!(device_model_source(&t), None);
}

#[test]
fn sources_are_dated() {
    let s = device_model_source(&embedded(Cloud::Aws, "p4d.24xlarge")).unwrap();
    assert_eq!(s.driver, "gpu.nvidia.com");
    assert!(s.source.contains("NV-DRA"), "{}", s.source);
    assert_eq!(s.as_of, NaiveDate::from_ymd_opt(2026, 5, 15).unwrap());
    assert_eq!(s.driver_source, "NV-DRA");
    let mig = mig_model_source(&embedded(Cloud::Aws, "p4d.24xlarge")).unwrap();
    assert!(!mig.estimate);
    let mig = mig_model_source(&embedded(Cloud::Aws, "p5en.48xlarge")).unwrap();
    assert!(mig.estimate);
    assert_eq!(mig_model_source(&embedded(Cloud::Aws, "g5.xlarge")), None);
}

#[test]
fn attributes_serialize_as_kubernetes_writes_them() {
    let json = serde_json::to_string(&DeviceAttribute::Version("9.0.0".into())).unwrap();
    assert_eq!(json, r#"{"version":"9.0.0"}"#);
    let json = serde_json::to_string(&DeviceAttribute::Int(3)).unwrap();
    assert_eq!(json, r#"{"int":3}"#);
    assert_eq!(quantity_mib(40960), "40Gi");
    assert_eq!(quantity_mib(22888), "22888Mi");
}
