//! Labels derived from an instance type's name, family and accelerator: the facts that
//! Karpenter, the clouds and the NVIDIA GPU Operator label nodes with, in their value formats.
//!
//! Value formats and where they come from:
//! * category / generation / size: Karpenter's `karpenter.k8s.aws/instance-category` (`p` for
//!   `p4d`), `instance-generation` (`4`) and `instance-size` (`24xlarge`), read from the type
//!   name as the Karpenter AWS provider does (karpenter.sh docs, "Scheduling" → well-known
//!   labels). Category and generation are given for AWS and GCP families (`a2` → `a`, `2`).
//! * hypervisor: `nitro` or `xen` (`karpenter.k8s.aws/instance-hypervisor`); every AWS family
//!   built before the Nitro System is listed in [`XEN_FAMILIES`] (AWS EC2 docs, "Instances built
//!   on the AWS Nitro System").
//! * GPU product / family: the values NVIDIA GPU Feature Discovery (GPU Operator) puts on
//!   nodes: `nvidia.com/gpu.product` is the NVML device name with spaces replaced by `-`
//!   (`NVIDIA-A10G`, `NVIDIA-A100-SXM4-40GB`, `Tesla-T4`), `nvidia.com/gpu.family` the
//!   architecture (`turing`, `ampere`, `ada-lovelace`, `hopper`; NVIDIA/k8s-device-plugin
//!   docs/gpu-feature-discovery/README.md, "Generated labels").

use crate::model::{Cloud, InstanceType};

/// AWS families that run on the Xen hypervisor; every other AWS family is `nitro`.
pub const XEN_FAMILIES: &[&str] = &[
    "c3", "c4", "d2", "f1", "g3", "g3s", "h1", "i2", "i3", "m3", "m4", "p2", "p3", "r3", "r4",
    "t2", "x1", "x1e",
];

/// `(category, generation)` of a family such as `p4d` (`p`, `4`) or `a2` (`a`, `2`), for AWS
/// and GCP; `None` when the family does not have that shape.
pub fn category_and_generation(it: &InstanceType) -> Option<(String, String)> {
    if it.cloud == Cloud::Azure {
        return None;
    }
    let family = it.family.as_str();
    let letters = family
        .find(|c: char| !c.is_ascii_lowercase())
        .unwrap_or(family.len());
    let digits = family[letters..]
        .find(|c: char| !c.is_ascii_digit())
        .map_or(family.len(), |d| letters + d);
    (letters > 0 && digits > letters).then(|| {
        (
            family[..letters].to_owned(),
            family[letters..digits].to_owned(),
        )
    })
}

/// The size part of an AWS type name (`24xlarge` for `p4d.24xlarge`).
pub fn size(it: &InstanceType) -> Option<String> {
    (it.cloud == Cloud::Aws)
        .then(|| it.name.split_once('.').map(|(_, s)| s.to_owned()))
        .flatten()
}

/// `nitro` or `xen` for AWS types.
pub fn hypervisor(it: &InstanceType) -> Option<&'static str> {
    (it.cloud == Cloud::Aws).then(|| {
        if XEN_FAMILIES.contains(&it.family.as_str()) {
            "xen"
        } else {
            "nitro"
        }
    })
}

/// GPU Feature Discovery's `nvidia.com/gpu.product` and `nvidia.com/gpu.family` for the
/// type's NVIDIA GPU, when it has whole NVIDIA devices.
pub fn nvidia_product_and_family(it: &InstanceType) -> Option<(String, Option<&'static str>)> {
    let a = it.accelerator.as_ref()?;
    if a.manufacturer != "nvidia" || a.is_fractional() {
        return None;
    }
    let gib = a.memory_mib / 1024;
    let (product, family) = match a.name.as_str() {
        "t4" => ("Tesla-T4".to_owned(), Some("turing")),
        "v100" => (format!("Tesla-V100-SXM2-{gib}GB"), Some("volta")),
        "a10g" => ("NVIDIA-A10G".to_owned(), Some("ampere")),
        "a10" => ("NVIDIA-A10".to_owned(), Some("ampere")),
        // NC A100 v4 carries the PCIe card; every other A100 in the catalog is SXM4.
        "a100" if it.family == "NCadsA100v4" => {
            ("NVIDIA-A100-80GB-PCIe".to_owned(), Some("ampere"))
        }
        "a100" => (format!("NVIDIA-A100-SXM4-{gib}GB"), Some("ampere")),
        "l4" => ("NVIDIA-L4".to_owned(), Some("ada-lovelace")),
        "l40s" => ("NVIDIA-L40S".to_owned(), Some("ada-lovelace")),
        // NC H100 v5 carries the H100 NVL (94 GB); the SXM5 part reports "H100 80GB HBM3".
        "h100" if it.family == "NCadsH100v5" => ("NVIDIA-H100-NVL".to_owned(), Some("hopper")),
        "h100" => ("NVIDIA-H100-80GB-HBM3".to_owned(), Some("hopper")),
        "h200" => ("NVIDIA-H200".to_owned(), Some("hopper")),
        other => (format!("NVIDIA-{}", other.to_ascii_uppercase()), None),
    };
    Some((product, family))
}
