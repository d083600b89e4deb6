//! The device-model data file `data/devices.toml`: its schema, parsed once per process, and the
//! look-up of one accelerator's entry.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use chrono::NaiveDate;
use serde::Deserialize;

use super::DeviceAttribute;
use crate::Accelerator;

/// The embedded device-model file.
pub(super) const DEVICES_TOML: &str = include_str!("../../data/devices.toml");

/// The parsed file, once per process.
pub(super) static MODEL: LazyLock<DevicesFile> = LazyLock::new(|| {
    parse(DEVICES_TOML)
        .unwrap_or_else(|e| panic!("data/devices.toml is invalid (caught by unit tests): {e}"))
});

/// Parses a device-model file.
pub(super) fn parse(text: &str) -> Result<DevicesFile, String> {
    let file: DevicesFile = toml::from_str(text).map_err(|e| e.to_string())?;
    if file.schema != 1 {
        return Err(format!("schema {} is not understood (only 1)", file.schema));
    }
    for gpu in &file.gpu {
        if let Some(key) = &gpu.mig
            && !file.mig.contains_key(key)
        {
            return Err(format!(
                "gpu {} ({} MiB): mig table {key:?} is not defined",
                gpu.name, gpu.memory_mib
            ));
        }
        if gpu.devices_per_pcie_root == 0 {
            return Err(format!(
                "gpu {}: devices_per_pcie_root must be > 0",
                gpu.name
            ));
        }
    }
    for (key, table) in &file.mig {
        for p in &table.profiles {
            if p.slices == 0 || p.slices > 8 || p.starts.iter().any(|s| s + p.slices > 8) {
                return Err(format!(
                    "mig {key}: profile {}: slices and starts must fit 8 memory slices",
                    p.profile
                ));
            }
        }
    }
    for (n, g) in file.gpu.iter().enumerate() {
        if file.gpu[..n]
            .iter()
            .any(|o| o.name == g.name && o.memory_mib == g.memory_mib && o.families == g.families)
        {
            return Err(format!(
                "gpu {} ({} MiB) is listed twice",
                g.name, g.memory_mib
            ));
        }
    }
    for (n, a) in file.accelerator.iter().enumerate() {
        if file.accelerator[..n].iter().any(|o| {
            o.manufacturer == a.manufacturer && o.name == a.name && o.memory_mib == a.memory_mib
        }) {
            return Err(format!(
                "accelerator {}/{} ({} MiB) is listed twice",
                a.manufacturer, a.name, a.memory_mib
            ));
        }
    }
    for a in &file.accelerator {
        if a.devices_per_pcie_root == 0 {
            return Err(format!(
                "accelerator {}: devices_per_pcie_root must be > 0",
                a.name
            ));
        }
    }
    Ok(file)
}

/// `data/devices.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct DevicesFile {
    schema: u32,
    pub nvidia: NvidiaDriver,
    #[serde(default)]
    pub gpu: Vec<NvidiaGpu>,
    #[serde(default)]
    pub mig: BTreeMap<String, MigTable>,
    #[serde(default)]
    pub accelerator: Vec<OtherAccelerator>,
}

/// The NVIDIA driver and the kernel driver version assumed on GPU nodes.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NvidiaDriver {
    pub driver: String,
    pub driver_version: String,
    pub cuda_driver_version: String,
    pub source: String,
    pub as_of: toml::value::Datetime,
}

/// One NVIDIA GPU model.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct NvidiaGpu {
    pub name: String,
    pub memory_mib: u64,
    #[serde(default)]
    pub families: Vec<String>,
    pub product_name: String,
    pub brand: String,
    pub architecture: String,
    pub compute_capability: String,
    pub devices_per_pcie_root: u32,
    #[serde(default)]
    pub addressing_mode: Option<String>,
    #[serde(default)]
    pub mig: Option<String>,
    #[serde(default)]
    pub nvml_memory_mib: Option<u64>,
    pub source: String,
    pub as_of: toml::value::Datetime,
}

/// The MIG profiles of one GPU model.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MigTable {
    pub source: String,
    pub as_of: toml::value::Datetime,
    #[serde(default)]
    pub estimate: bool,
    pub profiles: Vec<MigProfile>,
}

/// One MIG profile (GPU instance profile) of a GPU model.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct MigProfile {
    pub profile: String,
    pub id: u32,
    pub slices: u32,
    pub starts: Vec<u32>,
    pub memory_mib: u64,
    #[serde(default)]
    pub multiprocessors: Option<u32>,
    #[serde(default)]
    pub copy_engines: Option<u32>,
    #[serde(default)]
    pub decoders: Option<u32>,
    #[serde(default)]
    pub encoders: Option<u32>,
    #[serde(default)]
    pub jpeg_engines: Option<u32>,
    #[serde(default)]
    pub ofa_engines: Option<u32>,
}

/// Which per-device attributes a non-NVIDIA driver adds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum DriverKind {
    /// AWS Neuron DRA driver (`neuron.aws.com`).
    Neuron,
    /// Intel Gaudi DRA driver (`gaudi.intel.com`).
    Gaudi,
    /// AMD GPU DRA driver (`gpu.amd.com`).
    AmdGpu,
    /// Our generic form: `model`, `vendor`, capacity `memory`.
    Generic,
}

/// One non-NVIDIA accelerator model.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct OtherAccelerator {
    pub manufacturer: String,
    pub name: String,
    pub memory_mib: u64,
    pub kind: DriverKind,
    pub driver: String,
    #[serde(default)]
    pub pci_device_id: Option<String>,
    pub devices_per_pcie_root: u32,
    #[serde(default)]
    pub attributes: BTreeMap<String, AttributeValue>,
    #[serde(default)]
    pub capacity: BTreeMap<String, String>,
    pub source: String,
    pub as_of: toml::value::Datetime,
}

/// An attribute value as the data file writes it.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub(super) enum AttributeValue {
    Bool(bool),
    Int(i64),
    String(String),
    Version { version: String },
}

impl AttributeValue {
    pub fn to_attribute(&self) -> DeviceAttribute {
        match self {
            AttributeValue::Bool(b) => DeviceAttribute::Bool(*b),
            AttributeValue::Int(i) => DeviceAttribute::Int(*i),
            AttributeValue::String(s) => DeviceAttribute::String(s.clone()),
            AttributeValue::Version { version } => DeviceAttribute::Version(version.clone()),
        }
    }
}

/// The model entry of an accelerator.
#[derive(Debug, Clone, Copy)]
pub(super) enum Entry<'a> {
    /// An NVIDIA GPU.
    Nvidia(&'a NvidiaGpu),
    /// Another driver's accelerator.
    Other(&'a OtherAccelerator),
}

impl DevicesFile {
    /// The entry of `accelerator` on an instance of `family`: an entry naming the family wins
    /// over one without families.
    pub fn entry(&self, accelerator: &Accelerator, family: &str) -> Option<Entry<'_>> {
        if accelerator.manufacturer == "nvidia" {
            let mut candidates = self
                .gpu
                .iter()
                .filter(|g| g.name == accelerator.name && g.memory_mib == accelerator.memory_mib);
            let first = candidates
                .clone()
                .find(|g| g.families.iter().any(|f| f == family));
            return first
                .or_else(|| candidates.find(|g| g.families.is_empty()))
                .map(Entry::Nvidia);
        }
        self.accelerator
            .iter()
            .find(|a| {
                a.manufacturer == accelerator.manufacturer
                    && a.name == accelerator.name
                    && a.memory_mib == accelerator.memory_mib
            })
            .map(Entry::Other)
    }
}

/// A TOML date as a calendar date.
pub(super) fn date(d: &toml::value::Datetime) -> NaiveDate {
    d.date
        .and_then(|d| {
            NaiveDate::from_ymd_opt(i32::from(d.year), u32::from(d.month), u32::from(d.day))
        })
        .unwrap_or_default()
}
