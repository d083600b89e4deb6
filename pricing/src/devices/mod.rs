//! The device model: the devices a node of an instance type would publish in its DRA
//! `ResourceSlice`s (`resource.k8s.io/v1`), in the terms of the well-known drivers, so that
//! claims (CEL selectors over attributes and capacity) can be evaluated before the node exists.
//!
//! The facts are in `data/devices.toml` (compiled in, parsed once per process), one entry per
//! accelerator model — `(manufacturer, name, memory_mib)`, NVIDIA entries optionally narrowed to
//! instance families — each with its `source` and `as_of` like the prices:
//!
//! * **NVIDIA** (`gpu.nvidia.com`, as the DRA driver `kubernetes-sigs/dra-driver-nvidia-gpu`
//!   v0.4.0 publishes): one device `gpu-<i>` per GPU with `type` `"gpu"`, `uuid`,
//!   `productName`, `brand`, `architecture`, `cudaComputeCapability`, `driverVersion`,
//!   `cudaDriverVersion` (versions), `resource.kubernetes.io/pciBusID`,
//!   `resource.kubernetes.io/pcieRoot` (and `addressingMode` where the platform has one);
//!   capacity `memory` — what NVML reports where the data has it (`nvidia-smi` shows an H100
//!   80GB HBM3 with 81559 MiB: a claim for `memory >= 80Gi` does not fit it), else the catalog's
//!   memory per GPU. With a MIG layout ([`published_devices_with_mig`]) each GPU publishes
//!   its MIG devices instead (`type` `"mig"`, `profile`, `parentUUID`, the parent's attributes;
//!   capacity `memory`, `multiprocessors`, engine counts and `memorySlice<N>`), named
//!   `gpu-<i>-mig-<profile without dots>-<GI profile id>-<placement start>` as the driver does.
//!   Releases before v25.12 also published `index`, `minor` and `pcieBusID`; the current one
//!   does not, and neither do we.
//! * **AWS Neuron** (`neuron.aws.com`, the Neuron DRA driver): `neuron-device-<i>` with
//!   `instanceType`, `deviceId`, `resourceType`, `topology_x`/`topology_y` and the
//!   `resource.aws.com/devicegroup{1,4,8,16}_id` groups; no capacity.
//! * **Intel Gaudi** (`gaudi.intel.com`): devices named by PCI address and device ID, with
//!   `model`, `serial`, `healthy`, `resource.kubernetes.io/pcieRoot` and the deprecated
//!   `pciRoot`; no capacity.
//! * **AMD** (`gpu.amd.com`, `ROCm/k8s-gpu-dra-driver`): `gpu-<card>-<renderD>` with `type`
//!   `"amdgpu"`, `deviceID`, `productName`, `driverVersion`, `partitionProfile`, `numaNode`,
//!   PCI attributes; capacity `memory`, `computeUnits`, `simdUnits`.
//! * **Anything else** (no entry, e.g. an override catalog's new accelerator): the generic form
//!   — driver = the extended resource's domain (`amd.com/gpu` → `amd.com`), attributes `model`
//!   and `vendor`, capacity `memory`.
//!
//! What no node can tell us before it exists is modelled, deterministically: UUIDs
//! (`GPU-<model>-<i>`, `MIG-<model>-<i>-<n>`), serial numbers, PCI bus IDs (domain 0000, one
//! root bus per PCIe root) and the grouping of devices per PCIe root (pairs on 8-GPU HGX
//! boards, one per PCIe card; per entry in the data). The NVIDIA kernel driver version is an
//! assumption (R580, `580.95.5`, CUDA `13.0.0`), stated in the data file.
//!
//! ```
//! use quartermaster_pricing::devices::{DeviceAttribute, published_devices};
//! use quartermaster_pricing::{Catalog, Cloud};
//!
//! let catalog = Catalog::embedded();
//! let p4d = catalog.get(Cloud::Aws, "p4d.24xlarge").unwrap();
//! let gpus = published_devices(p4d);
//! assert_eq!(gpus.len(), 8);
//! assert_eq!(gpus[0].driver, "gpu.nvidia.com");
//! assert_eq!(gpus[0].name, "gpu-0");
//! assert_eq!(
//!     gpus[0].attributes["productName"],
//!     DeviceAttribute::String("NVIDIA A100-SXM4-40GB".into())
//! );
//! assert_eq!(gpus[0].capacity["memory"], "40Gi");
//! ```
//!
//! A fractional vGPU slice (`accelerator.fraction`, e.g. Azure `Standard_NV6ads_A10_v5`) is one
//! device `gpu-0` with the slice's memory and two attributes of ours:
//! [`SHARED_ATTRIBUTE`] `= true` and [`FRACTION_ATTRIBUTE`] (the share, as a string).

mod model;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use chrono::NaiveDate;
use serde::{Deserialize, Serialize};

use crate::sharing::MigLayout;
use crate::{Accelerator, InstanceType};
use model::{DriverKind, Entry, MODEL, MigProfile, NvidiaGpu, OtherAccelerator};

/// A device attribute value, as a ResourceSlice publishes it (exactly one kind). Serializes as
/// Kubernetes writes it: `{"string": "Hopper"}`, `{"int": 0}`, `{"bool": true}`,
/// `{"version": "9.0.0"}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DeviceAttribute {
    /// A boolean.
    Bool(bool),
    /// A 64-bit integer.
    Int(i64),
    /// A string (at most 64 characters in Kubernetes).
    String(String),
    /// A semantic version, e.g. `"9.0.0"`.
    Version(String /* semver, e.g. "9.0.0" */),
}

/// One device a node would publish.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishedDevice {
    /// The DRA driver, e.g. `"gpu.nvidia.com"`.
    pub driver: String,
    /// Unique per driver on the node: `"gpu-0"`, `"gpu-0-mig-1g10gb-19-0"`, `"neuron-device-0"`.
    pub name: String,
    /// Attributes by name: unqualified names are in the driver's domain (`"productName"`),
    /// qualified ones are not (`"resource.kubernetes.io/pcieRoot"`).
    pub attributes: BTreeMap<String, DeviceAttribute>,
    /// Capacity by name, as Kubernetes quantities: `"memory"` → `"80Gi"`.
    pub capacity: BTreeMap<String, String>,
}

/// Where a device model comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceModelSource {
    /// The DRA driver the devices are published by.
    pub driver: &'static str,
    /// The source keys or addresses (see the header of `data/devices.toml`).
    pub source: &'static str,
    /// The date the facts are known to hold.
    pub as_of: NaiveDate,
    /// Where the driver's attribute names and the assumed driver versions come from (NVIDIA:
    /// the DRA driver release; other drivers: the entry's own source).
    pub driver_source: &'static str,
    /// The date of `driver_source`.
    pub driver_as_of: NaiveDate,
}

/// Where the MIG profile figures of a GPU model come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigModelSource {
    /// The source keys or addresses (see the header of `data/devices.toml`).
    pub source: &'static str,
    /// The date the figures are known to hold.
    pub as_of: NaiveDate,
    /// True when the figures are not measured (nominal memory sizes, a mock's counts).
    pub estimate: bool,
}

/// Our attribute on a fractional vGPU slice: `true`.
pub const SHARED_ATTRIBUTE: &str = "quartermaster.dev/shared";
/// Our attribute on a fractional vGPU slice: its share of one GPU, e.g. `"0.1667"`.
pub const FRACTION_ATTRIBUTE: &str = "quartermaster.dev/fraction";
/// The standard PCIe root attribute (`k8s.io/dynamic-resource-allocation/deviceattribute`).
pub const PCIE_ROOT_ATTRIBUTE: &str = "resource.kubernetes.io/pcieRoot";
/// The standard PCI bus ID attribute.
pub const PCI_BUS_ID_ATTRIBUTE: &str = "resource.kubernetes.io/pciBusID";

/// The devices a node of `it` publishes (empty for types without accelerators).
pub fn published_devices(it: &InstanceType) -> Vec<PublishedDevice> {
    let Some(acc) = &it.accelerator else {
        return Vec::new();
    };
    match MODEL.entry(acc, &it.family) {
        Some(Entry::Nvidia(gpu)) => nvidia_gpus(acc, gpu),
        Some(Entry::Other(other)) => other_devices(it, acc, other),
        None => generic_devices(acc),
    }
}

/// Same, with the GPUs partitioned by a MIG layout (see [`crate::sharing::MigLayout`] /
/// [`crate::sharing::mig_layout`]): each GPU publishes its MIG devices (type `"mig"`) instead.
/// Types whose GPUs have no MIG (or no NVIDIA GPU) publish what [`published_devices`] does.
pub fn published_devices_with_mig(it: &InstanceType, layout: &MigLayout) -> Vec<PublishedDevice> {
    let Some(acc) = &it.accelerator else {
        return Vec::new();
    };
    let Some(Entry::Nvidia(gpu)) = MODEL.entry(acc, &it.family) else {
        return published_devices(it);
    };
    let Some(table) = gpu.mig.as_ref().and_then(|k| MODEL.mig.get(k)) else {
        return published_devices(it);
    };
    if acc.is_fractional() || acc.count == 0 {
        return published_devices(it);
    }
    let instances = place_mig(layout, &table.profiles);
    let mut out = Vec::with_capacity(acc.count as usize * instances.len());
    for i in 0..acc.count {
        let parent = nvidia_gpu(acc, gpu, i);
        let parent_uuid = uuid(&parent);
        for (n, (profile, start)) in instances.iter().enumerate() {
            let mut attributes = parent.attributes.clone();
            attributes.insert("type".into(), DeviceAttribute::String("mig".into()));
            attributes.insert(
                "uuid".into(),
                DeviceAttribute::String(format!("MIG-{}-{i}-{n}", acc.name)),
            );
            attributes.insert(
                "parentUUID".into(),
                DeviceAttribute::String(parent_uuid.clone()),
            );
            attributes.insert(
                "profile".into(),
                DeviceAttribute::String(profile.profile.clone()),
            );
            let mut capacity =
                BTreeMap::from([("memory".to_owned(), quantity_mib(profile.memory_mib))]);
            for (name, value) in [
                ("multiprocessors", profile.multiprocessors),
                ("copyEngines", profile.copy_engines),
                ("decoders", profile.decoders),
                ("encoders", profile.encoders),
                ("jpegEngines", profile.jpeg_engines),
                ("ofaEngines", profile.ofa_engines),
            ] {
                if let Some(v) = value {
                    capacity.insert(name.to_owned(), v.to_string());
                }
            }
            for slice in *start..start + profile.slices {
                capacity.insert(format!("memorySlice{slice}"), "1".to_owned());
            }
            out.push(PublishedDevice {
                driver: MODEL.nvidia.driver.clone(),
                name: format!(
                    "gpu-{i}-mig-{}-{}-{start}",
                    rfc1123(&profile.profile),
                    profile.id
                ),
                attributes,
                capacity,
            });
        }
    }
    out
}

/// Where the device model of `it` comes from; `None` for types without accelerators and for
/// accelerators published in the generic form (no entry in `data/devices.toml`).
pub fn device_model_source(it: &InstanceType) -> Option<DeviceModelSource> {
    let acc = it.accelerator.as_ref()?;
    model_source(acc, &it.family)
}

/// [`device_model_source`] for an accelerator on an instance of `family`.
pub fn model_source(acc: &Accelerator, family: &str) -> Option<DeviceModelSource> {
    match MODEL.entry(acc, family)? {
        Entry::Nvidia(gpu) => Some(DeviceModelSource {
            driver: &MODEL.nvidia.driver,
            source: &gpu.source,
            as_of: model::date(&gpu.as_of),
            driver_source: &MODEL.nvidia.source,
            driver_as_of: model::date(&MODEL.nvidia.as_of),
        }),
        Entry::Other(other) => Some(DeviceModelSource {
            driver: &other.driver,
            source: &other.source,
            as_of: model::date(&other.as_of),
            driver_source: &other.source,
            driver_as_of: model::date(&other.as_of),
        }),
    }
}

/// Where the MIG profile figures of the GPUs of `it` come from; `None` when they have no MIG
/// table (no MIG, not NVIDIA, or no accelerator).
pub fn mig_model_source(it: &InstanceType) -> Option<MigModelSource> {
    let acc = it.accelerator.as_ref()?;
    let Entry::Nvidia(gpu) = MODEL.entry(acc, &it.family)? else {
        return None;
    };
    let table = MODEL.mig.get(gpu.mig.as_ref()?)?;
    Some(MigModelSource {
        source: &table.source,
        as_of: model::date(&table.as_of),
        estimate: table.estimate,
    })
}

/// A memory size in MiB as a Kubernetes quantity in canonical form: `"40Gi"` when a whole
/// number of GiB, else `"22888Mi"`.
pub fn quantity_mib(mib: u64) -> String {
    if mib.is_multiple_of(1024) {
        format!("{}Gi", mib / 1024)
    } else {
        format!("{mib}Mi")
    }
}

/// The NVIDIA devices of a whole-GPU (or fractional) type.
fn nvidia_gpus(acc: &Accelerator, gpu: &NvidiaGpu) -> Vec<PublishedDevice> {
    if let Some(fraction) = acc.fraction {
        let mut d = nvidia_gpu(acc, gpu, 0);
        d.attributes
            .insert(SHARED_ATTRIBUTE.into(), DeviceAttribute::Bool(true));
        d.attributes.insert(
            FRACTION_ATTRIBUTE.into(),
            DeviceAttribute::String(format!("{fraction}")),
        );
        return vec![d];
    }
    (0..acc.count).map(|i| nvidia_gpu(acc, gpu, i)).collect()
}

/// GPU `i` of a node.
fn nvidia_gpu(acc: &Accelerator, gpu: &NvidiaGpu, i: u32) -> PublishedDevice {
    let nv = &MODEL.nvidia;
    let (bus_id, root) = pci(i, gpu.devices_per_pcie_root);
    let s = |v: &str| DeviceAttribute::String(v.to_owned());
    let mut attributes = BTreeMap::from([
        ("type".to_owned(), s("gpu")),
        (
            "uuid".to_owned(),
            DeviceAttribute::String(format!("GPU-{}-{i}", acc.name)),
        ),
        ("productName".to_owned(), s(&gpu.product_name)),
        ("brand".to_owned(), s(&gpu.brand)),
        ("architecture".to_owned(), s(&gpu.architecture)),
        (
            "cudaComputeCapability".to_owned(),
            DeviceAttribute::Version(gpu.compute_capability.clone()),
        ),
        (
            "driverVersion".to_owned(),
            DeviceAttribute::Version(nv.driver_version.clone()),
        ),
        (
            "cudaDriverVersion".to_owned(),
            DeviceAttribute::Version(nv.cuda_driver_version.clone()),
        ),
        (
            PCI_BUS_ID_ATTRIBUTE.to_owned(),
            DeviceAttribute::String(bus_id),
        ),
        (
            PCIE_ROOT_ATTRIBUTE.to_owned(),
            DeviceAttribute::String(root),
        ),
    ]);
    if let Some(mode) = &gpu.addressing_mode {
        attributes.insert("addressingMode".to_owned(), s(mode));
    }
    PublishedDevice {
        driver: nv.driver.clone(),
        name: format!("gpu-{i}"),
        attributes,
        capacity: BTreeMap::from([(
            "memory".to_owned(),
            quantity_mib(gpu.nvml_memory_mib.unwrap_or(acc.memory_mib)),
        )]),
    }
}

fn uuid(d: &PublishedDevice) -> String {
    match d.attributes.get("uuid") {
        Some(DeviceAttribute::String(s)) => s.clone(),
        _ => String::new(),
    }
}

/// Devices of the Neuron, Gaudi and AMD drivers.
fn other_devices(
    it: &InstanceType,
    acc: &Accelerator,
    other: &OtherAccelerator,
) -> Vec<PublishedDevice> {
    let count = acc.count.max(u32::from(acc.is_fractional()));
    let statics: BTreeMap<String, DeviceAttribute> = other
        .attributes
        .iter()
        .map(|(k, v)| (k.clone(), v.to_attribute()))
        .collect();
    (0..count)
        .map(|i| {
            let (bus_id, root) = pci(i, other.devices_per_pcie_root);
            let mut attributes = statics.clone();
            let mut capacity = other.capacity.clone();
            let name = match other.kind {
                DriverKind::Neuron => {
                    attributes.insert(
                        "instanceType".into(),
                        DeviceAttribute::String(it.name.clone()),
                    );
                    attributes.insert("deviceId".into(), DeviceAttribute::Int(i64::from(i)));
                    attributes.insert("topology_x".into(), DeviceAttribute::Int(i64::from(i / 4)));
                    attributes.insert("topology_y".into(), DeviceAttribute::Int(i64::from(i % 4)));
                    attributes.insert(
                        "resource.aws.com/devicegroup1_id".into(),
                        DeviceAttribute::String(bus_id),
                    );
                    for n in [4, 8, 16] {
                        if n <= count {
                            attributes.insert(
                                format!("resource.aws.com/devicegroup{n}_id"),
                                DeviceAttribute::String(format!("group{n}-{}", i / n)),
                            );
                        }
                    }
                    format!("neuron-device-{i}")
                }
                DriverKind::Gaudi => {
                    let bus = root.split(':').nth(1).unwrap_or_default().to_owned();
                    attributes.insert("pciRoot".into(), DeviceAttribute::String(bus));
                    attributes.insert(PCIE_ROOT_ATTRIBUTE.into(), DeviceAttribute::String(root));
                    attributes.insert(
                        "serial".into(),
                        DeviceAttribute::String(format!("predicted-{}-{i}", acc.name)),
                    );
                    format!(
                        "{}-{}",
                        bus_id.replace([':', '.'], "-"),
                        other.pci_device_id.as_deref().unwrap_or("0x0000")
                    )
                }
                DriverKind::AmdGpu => {
                    if let Some(id) = &other.pci_device_id {
                        attributes.insert("deviceID".into(), DeviceAttribute::String(id.clone()));
                    }
                    // Two NUMA nodes (two sockets), GPUs split evenly: assumed.
                    let numa = i64::from(i * 2 / count.max(1)).min(1);
                    attributes.insert("numaNode".into(), DeviceAttribute::Int(numa));
                    attributes.insert(PCI_BUS_ID_ATTRIBUTE.into(), DeviceAttribute::String(bus_id));
                    attributes.insert(PCIE_ROOT_ATTRIBUTE.into(), DeviceAttribute::String(root));
                    format!("gpu-{i}-{}", 128 + i)
                }
                DriverKind::Generic => {
                    attributes.insert("model".into(), DeviceAttribute::String(acc.name.clone()));
                    attributes.insert(
                        "vendor".into(),
                        DeviceAttribute::String(acc.manufacturer.clone()),
                    );
                    capacity
                        .entry("memory".into())
                        .or_insert_with(|| quantity_mib(acc.memory_mib));
                    format!("{}-{i}", acc.name)
                }
            };
            PublishedDevice {
                driver: other.driver.clone(),
                name,
                attributes,
                capacity,
            }
        })
        .collect()
}

/// The generic form for accelerators without an entry.
fn generic_devices(acc: &Accelerator) -> Vec<PublishedDevice> {
    let driver = acc
        .resource
        .split_once('/')
        .map_or(acc.resource.as_str(), |(domain, _)| domain)
        .to_owned();
    let count = acc.count.max(u32::from(acc.is_fractional()));
    (0..count)
        .map(|i| {
            let mut attributes = BTreeMap::from([
                (
                    "model".to_owned(),
                    DeviceAttribute::String(acc.name.clone()),
                ),
                (
                    "vendor".to_owned(),
                    DeviceAttribute::String(acc.manufacturer.clone()),
                ),
            ]);
            if let Some(fraction) = acc.fraction {
                attributes.insert(SHARED_ATTRIBUTE.into(), DeviceAttribute::Bool(true));
                attributes.insert(
                    FRACTION_ATTRIBUTE.into(),
                    DeviceAttribute::String(format!("{fraction}")),
                );
            }
            let mut capacity = BTreeMap::new();
            if acc.memory_mib > 0 {
                capacity.insert("memory".to_owned(), quantity_mib(acc.memory_mib));
            }
            PublishedDevice {
                driver: driver.clone(),
                name: format!("{}-{i}", acc.name),
                attributes,
                capacity,
            }
        })
        .collect()
}

/// The synthetic PCI bus ID and PCIe root of device `i` when `per_root` devices share a root:
/// root `r` has root bus `0x10 + 12 r`, its devices the buses just below it.
fn pci(i: u32, per_root: u32) -> (String, String) {
    let per_root = per_root.max(1);
    let (r, k) = (i / per_root, i % per_root);
    let root_bus = 0x10 + 12 * r;
    (
        format!("0000:{:02x}:00.0", root_bus + 1 + k),
        format!("pci0000:{root_bus:02x}"),
    )
}

/// A MIG profile name as the NVIDIA driver puts it in device names: dots dropped, lower case,
/// anything else not allowed in a DNS label replaced by `-`.
fn rfc1123(profile: &str) -> String {
    profile
        .chars()
        .filter(|c| *c != '.')
        .map(|c| {
            let c = c.to_ascii_lowercase();
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The MIG instances of one GPU under `layout`, each with its placement start: profiles from the
/// table (or derived from the name when missing), placed largest first at the lowest free valid
/// start, backtracking when a later instance would not fit (the A100's `all-balanced` needs the
/// 3g instance at 4). Deterministic; if no placement exists, starts are consecutive.
fn place_mig(layout: &MigLayout, table: &[MigProfile]) -> Vec<(MigProfile, u32)> {
    let mut instances: Vec<MigProfile> = Vec::new();
    for (name, per_gpu) in layout.slices {
        let profile = table
            .iter()
            .find(|p| p.profile == *name)
            .cloned()
            .unwrap_or_else(|| nominal_profile(name));
        instances.extend(std::iter::repeat_n(profile, *per_gpu as usize));
    }
    // Largest first, stable: the layout's order among equals.
    let mut order: Vec<usize> = (0..instances.len()).collect();
    order.sort_by_key(|&n| std::cmp::Reverse(instances[n].slices));
    let mut starts = vec![0u32; instances.len()];
    if !assign(&instances, &order, 0, 0, &mut starts) {
        let mut next = 0;
        for &n in &order {
            starts[n] = next;
            next += instances[n].slices;
        }
    }
    instances.into_iter().zip(starts).collect()
}

/// Backtracking placement over 8 memory slices (`used` is a bit set).
fn assign(
    instances: &[MigProfile],
    order: &[usize],
    at: usize,
    used: u32,
    starts: &mut [u32],
) -> bool {
    let Some(&n) = order.get(at) else {
        return true;
    };
    let p = &instances[n];
    for &s in &p.starts {
        // Slices and starts are validated to fit the 8 memory slices when the data is parsed.
        let mask = ((1u32 << p.slices) - 1) << s;
        if used & mask == 0 {
            starts[n] = s;
            if assign(instances, order, at + 1, used | mask, starts) {
                return true;
            }
        }
    }
    false
}

/// A profile not in the table, from its name (`"1g.12gb"`): NVIDIA's usual GI profile ids and
/// placements of 7-slice GPUs, memory the nominal size in GB (10^9 bytes), no engine counts.
fn nominal_profile(name: &str) -> MigProfile {
    let g: u32 = name
        .split_once('g')
        .and_then(|(g, _)| g.parse().ok())
        .unwrap_or(1);
    let gb: u64 = name
        .split_once('.')
        .and_then(|(_, m)| {
            m.trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse()
                .ok()
        })
        .unwrap_or(0);
    let (id, slices, starts) = match g {
        1 => (19, 1, vec![0, 1, 2, 3, 4, 5, 6]),
        2 => (14, 2, vec![0, 2, 4]),
        3 => (9, 4, vec![0, 4]),
        4 => (5, 4, vec![0]),
        _ => (0, 8, vec![0]),
    };
    MigProfile {
        profile: name.to_owned(),
        id,
        slices,
        starts,
        memory_mib: gb * 1_000_000_000 / (1024 * 1024),
        multiprocessors: None,
        copy_engines: None,
        decoders: None,
        encoders: None,
        jpeg_engines: None,
        ofa_engines: None,
    }
}
