//! The one table of label aliases: Karpenter's well-known labels, the clouds' own node labels
//! and the NVIDIA GPU Operator's labels, each mapped to the Quartermaster label that carries the
//! same fact.
//!
//! Aliases are normalised where they come in: a requirement on an alias key (NodePool
//! requirements, pod nodeSelectors, node affinity; [`crate::Requirement::new`]) becomes a
//! requirement on the canonical key with the values mapped, and topology keys are mapped with
//! [`super::normalize_label_key`]. Nodes Quartermaster launches carry the alias labels too
//! ([`alias_labels`]) unless their NodePool opts out with [`ANNOTATION_ALIAS_LABELS`]`: "false"`,
//! so workloads written for Karpenter, GKE, AKS or the GPU Operator keep scheduling.
//!
//! Value formats (where they differ from ours, the table maps them):
//! * `karpenter.sh/*`, `karpenter.k8s.aws/*`: Karpenter docs, "Scheduling" → "Well-Known
//!   Labels" (capacity type `spot` / `on-demand` / `reserved`; memory and GPU memory in MiB;
//!   network bandwidth in Mbps; category / generation / size / hypervisor as the type name's
//!   parts). `instance-local-nvme` is GiB in Karpenter, GB in our catalog.
//! * `karpenter.azure.com/sku-*`: the Azure provider's docs (`sku-name` is the VM size,
//!   `sku-cpu`, `sku-memory` in MiB, `sku-gpu-*`).
//! * `cloud.google.com/gke-spot`: `"true"` on Spot VMs and absent otherwise;
//!   `cloud.google.com/gke-accelerator`: GKE's accelerator names (`nvidia-l4`,
//!   `nvidia-a100-80gb`); `cloud.google.com/gke-gpu-driver-version`: `default` / `latest`,
//!   present on GPU nodes whose driver GKE installs; `cloud.google.com/machine-family`: `a2`,
//!   `g2` (GKE docs, "About GPUs", "Spot VMs", node labels).
//! * `kubernetes.azure.com/scalesetpriority`: `spot` or `regular` (AKS docs, "Spot node pools").
//! * `nvidia.com/gpu.*`: NVIDIA GPU Feature Discovery (NVIDIA/k8s-device-plugin,
//!   docs/gpu-feature-discovery/README.md): `gpu.product` is the NVML name with `-` for spaces
//!   (`NVIDIA-A10G`), `gpu.family` the architecture, `gpu.count`, `gpu.memory` in MiB (the
//!   catalog's per-GPU memory; the driver reports slightly less), `gpu.present: "true"`.

use std::collections::BTreeMap;

use super::{
    LABEL_CAPACITY_TYPE, LABEL_CLOUD, LABEL_INSTANCE_CATEGORY, LABEL_INSTANCE_CPU,
    LABEL_INSTANCE_FAMILY, LABEL_INSTANCE_GENERATION, LABEL_INSTANCE_GPU_COUNT,
    LABEL_INSTANCE_GPU_FAMILY, LABEL_INSTANCE_GPU_MANUFACTURER, LABEL_INSTANCE_GPU_MEMORY,
    LABEL_INSTANCE_GPU_NAME, LABEL_INSTANCE_GPU_PRODUCT, LABEL_INSTANCE_HYPERVISOR,
    LABEL_INSTANCE_LOCAL_NVME, LABEL_INSTANCE_MEMORY, LABEL_INSTANCE_NETWORK_BANDWIDTH,
    LABEL_INSTANCE_SIZE, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL,
};

/// NodePool annotation: `"false"` keeps the alias labels off the pool's nodes.
pub const ANNOTATION_ALIAS_LABELS: &str = "quartermaster.dev/alias-labels";

/// How an alias's values relate to the canonical label's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AliasValues {
    /// The same values.
    Same,
    /// `(alias value, canonical value)` pairs; other values pass through unchanged. On a
    /// launched node the alias gets the first alias value of the node's canonical value.
    Map(&'static [(&'static str, &'static str)]),
    /// The alias is `"true"` exactly when the canonical label has this value, and absent
    /// otherwise (`cloud.google.com/gke-spot`). `Exists` means the value, `DoesNotExist` not.
    Flag(&'static str),
    /// The alias is present (with any value) exactly when the canonical label has this value;
    /// launched nodes get the given alias value. `(canonical value, alias value on nodes)`.
    Presence(&'static str, &'static str),
}

/// One alias: a label key some other tool uses for a fact Quartermaster labels as `canonical`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LabelAlias {
    /// The alias key (`karpenter.sh/capacity-type`).
    pub key: &'static str,
    /// The Quartermaster key (`quartermaster.dev/capacity-type`).
    pub canonical: &'static str,
    /// How the values map.
    pub values: AliasValues,
    /// Launched nodes carry the alias only when they have this label with this value (the
    /// cloud for cloud-specific labels, the manufacturer for the GPU Operator's).
    pub only_on: Option<(&'static str, &'static str)>,
}

const AWS: Option<(&str, &str)> = Some((LABEL_CLOUD, "aws"));
const GCP: Option<(&str, &str)> = Some((LABEL_CLOUD, "gcp"));
const AZURE: Option<(&str, &str)> = Some((LABEL_CLOUD, "azure"));
const NVIDIA: Option<(&str, &str)> = Some((LABEL_INSTANCE_GPU_MANUFACTURER, "nvidia"));

const fn alias(
    key: &'static str,
    canonical: &'static str,
    values: AliasValues,
    only_on: Option<(&'static str, &'static str)>,
) -> LabelAlias {
    LabelAlias {
        key,
        canonical,
        values,
        only_on,
    }
}

/// GKE accelerator names and the GPU Feature Discovery products they are.
const GKE_ACCELERATORS: &[(&str, &str)] = &[
    ("nvidia-tesla-t4", "Tesla-T4"),
    ("nvidia-tesla-v100", "Tesla-V100-SXM2-16GB"),
    ("nvidia-l4", "NVIDIA-L4"),
    ("nvidia-tesla-a100", "NVIDIA-A100-SXM4-40GB"),
    ("nvidia-a100-80gb", "NVIDIA-A100-SXM4-80GB"),
    ("nvidia-h100-80gb", "NVIDIA-H100-80GB-HBM3"),
    ("nvidia-h100-mega-80gb", "NVIDIA-H100-80GB-HBM3"),
    ("nvidia-h200-141gb", "NVIDIA-H200"),
];

/// AKS scale-set priorities and the capacity types they are.
const AKS_PRIORITIES: &[(&str, &str)] = &[("spot", "spot"), ("regular", "on-demand")];

/// Every alias, in the order the README documents them.
pub const LABEL_ALIASES: &[LabelAlias] = &[
    // Karpenter (any cloud)
    alias(
        "karpenter.sh/capacity-type",
        LABEL_CAPACITY_TYPE,
        AliasValues::Same,
        None,
    ),
    alias(
        "karpenter.sh/nodepool",
        LABEL_NODEPOOL,
        AliasValues::Same,
        None,
    ),
    // Karpenter AWS provider
    alias(
        "karpenter.k8s.aws/instance-family",
        LABEL_INSTANCE_FAMILY,
        AliasValues::Same,
        AWS,
    ),
    alias(
        "karpenter.k8s.aws/instance-category",
        LABEL_INSTANCE_CATEGORY,
        AliasValues::Same,
        AWS,
    ),
    alias(
        "karpenter.k8s.aws/instance-generation",
        LABEL_INSTANCE_GENERATION,
        AliasValues::Same,
        AWS,
    ),
    alias(
        "karpenter.k8s.aws/instance-size",
        LABEL_INSTANCE_SIZE,
        AliasValues::Same,
        AWS,
    ),
    alias(
        "karpenter.k8s.aws/instance-cpu",
        LABEL_INSTANCE_CPU,
        AliasValues::Same,
        AWS,
    ),
    alias(
        "karpenter.k8s.aws/instance-memory",
        LABEL_INSTANCE_MEMORY,
        AliasValues::Same,
        AWS,
    ),
    alias(
        "karpenter.k8s.aws/instance-gpu-name",
        LABEL_INSTANCE_GPU_NAME,
        AliasValues::Same,
        AWS,
    ),
    alias(
        "karpenter.k8s.aws/instance-gpu-count",
        LABEL_INSTANCE_GPU_COUNT,
        AliasValues::Same,
        AWS,
    ),
    alias(
        "karpenter.k8s.aws/instance-gpu-manufacturer",
        LABEL_INSTANCE_GPU_MANUFACTURER,
        AliasValues::Same,
        AWS,
    ),
    alias(
        "karpenter.k8s.aws/instance-gpu-memory",
        LABEL_INSTANCE_GPU_MEMORY,
        AliasValues::Same,
        AWS,
    ),
    alias(
        "karpenter.k8s.aws/instance-hypervisor",
        LABEL_INSTANCE_HYPERVISOR,
        AliasValues::Same,
        AWS,
    ),
    alias(
        "karpenter.k8s.aws/instance-network-bandwidth",
        LABEL_INSTANCE_NETWORK_BANDWIDTH,
        AliasValues::Same,
        AWS,
    ),
    alias(
        "karpenter.k8s.aws/instance-local-nvme",
        LABEL_INSTANCE_LOCAL_NVME,
        AliasValues::Same,
        AWS,
    ),
    // Karpenter Azure provider
    alias(
        "karpenter.azure.com/sku-name",
        LABEL_INSTANCE_TYPE,
        AliasValues::Same,
        AZURE,
    ),
    alias(
        "karpenter.azure.com/sku-cpu",
        LABEL_INSTANCE_CPU,
        AliasValues::Same,
        AZURE,
    ),
    alias(
        "karpenter.azure.com/sku-memory",
        LABEL_INSTANCE_MEMORY,
        AliasValues::Same,
        AZURE,
    ),
    alias(
        "karpenter.azure.com/sku-gpu-name",
        LABEL_INSTANCE_GPU_NAME,
        AliasValues::Same,
        AZURE,
    ),
    alias(
        "karpenter.azure.com/sku-gpu-count",
        LABEL_INSTANCE_GPU_COUNT,
        AliasValues::Same,
        AZURE,
    ),
    alias(
        "karpenter.azure.com/sku-gpu-manufacturer",
        LABEL_INSTANCE_GPU_MANUFACTURER,
        AliasValues::Same,
        AZURE,
    ),
    // The clouds' own node labels
    alias(
        "cloud.google.com/gke-spot",
        LABEL_CAPACITY_TYPE,
        AliasValues::Flag("spot"),
        GCP,
    ),
    alias(
        "cloud.google.com/gke-accelerator",
        LABEL_INSTANCE_GPU_PRODUCT,
        AliasValues::Map(GKE_ACCELERATORS),
        GCP,
    ),
    alias(
        "cloud.google.com/gke-gpu-driver-version",
        LABEL_INSTANCE_GPU_MANUFACTURER,
        AliasValues::Presence("nvidia", "latest"),
        GCP,
    ),
    alias(
        "cloud.google.com/machine-family",
        LABEL_INSTANCE_FAMILY,
        AliasValues::Same,
        GCP,
    ),
    alias(
        "kubernetes.azure.com/scalesetpriority",
        LABEL_CAPACITY_TYPE,
        AliasValues::Map(AKS_PRIORITIES),
        AZURE,
    ),
    // NVIDIA GPU Operator (GPU Feature Discovery)
    alias(
        "nvidia.com/gpu.product",
        LABEL_INSTANCE_GPU_PRODUCT,
        AliasValues::Same,
        NVIDIA,
    ),
    alias(
        "nvidia.com/gpu.family",
        LABEL_INSTANCE_GPU_FAMILY,
        AliasValues::Same,
        NVIDIA,
    ),
    alias(
        "nvidia.com/gpu.count",
        LABEL_INSTANCE_GPU_COUNT,
        AliasValues::Same,
        NVIDIA,
    ),
    alias(
        "nvidia.com/gpu.memory",
        LABEL_INSTANCE_GPU_MEMORY,
        AliasValues::Same,
        NVIDIA,
    ),
    alias(
        "nvidia.com/gpu.present",
        LABEL_INSTANCE_GPU_MANUFACTURER,
        AliasValues::Flag("nvidia"),
        NVIDIA,
    ),
];

/// The alias entry for `key`, if `key` is an alias.
pub fn label_alias(key: &str) -> Option<&'static LabelAlias> {
    LABEL_ALIASES.iter().find(|a| a.key == key)
}

impl LabelAlias {
    /// The canonical value for a value of the alias (unknown values pass through unchanged,
    /// so they match nothing the catalog carries).
    pub fn canonical_value<'v>(&self, value: &'v str) -> &'v str {
        match self.values {
            AliasValues::Same => value,
            AliasValues::Map(pairs) => pairs
                .iter()
                .find(|(a, _)| *a == value)
                .map_or(value, |(_, c)| c),
            AliasValues::Flag(canonical) if value == "true" => canonical,
            AliasValues::Flag(_) => value,
            AliasValues::Presence(canonical, _) => canonical,
        }
    }

    /// The alias value a node with canonical value `canonical` carries, or `None` when it
    /// carries no alias label.
    pub fn alias_value<'v>(&self, canonical: &'v str) -> Option<&'v str> {
        match self.values {
            AliasValues::Same => Some(canonical),
            AliasValues::Map(pairs) => pairs.iter().find(|(_, c)| *c == canonical).map(|(a, _)| *a),
            AliasValues::Flag(c) => (c == canonical).then_some("true"),
            AliasValues::Presence(c, on_nodes) => (c == canonical).then_some(on_nodes),
        }
    }

    /// Whether the alias only says "present" / "absent" ([`AliasValues::Flag`] and
    /// [`AliasValues::Presence`]): `Exists` on it means the canonical value, `DoesNotExist`
    /// its absence.
    pub fn presence_value(&self) -> Option<&'static str> {
        match self.values {
            AliasValues::Flag(c) | AliasValues::Presence(c, _) => Some(c),
            AliasValues::Same | AliasValues::Map(_) => None,
        }
    }
}

/// Whether a NodePool with these annotations puts the alias labels on its nodes (the default).
pub fn alias_labels_enabled(annotations: &BTreeMap<String, String>) -> bool {
    annotations
        .get(ANNOTATION_ALIAS_LABELS)
        .is_none_or(|v| !v.eq_ignore_ascii_case("false"))
}

/// The alias labels a node with these (canonical) labels carries, excluding any key it
/// already has.
pub fn alias_labels(labels: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for a in LABEL_ALIASES {
        if labels.contains_key(a.key) {
            continue;
        }
        if let Some((k, v)) = a.only_on
            && labels.get(k).map(String::as_str) != Some(v)
        {
            continue;
        }
        let Some(canonical) = labels.get(a.canonical) else {
            continue;
        };
        if let Some(value) = a.alias_value(canonical) {
            out.insert(a.key.to_owned(), value.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Operator, Requirement, Requirements};

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn req(key: &str, op: Operator, values: &[&str]) -> Requirement {
        Requirement::new(key, op, values.iter().copied()).unwrap()
    }

    #[test]
    fn every_alias_is_unique_and_maps_to_a_well_known_label() {
        for (i, a) in LABEL_ALIASES.iter().enumerate() {
            assert!(
                LABEL_ALIASES[..i].iter().all(|b| b.key != a.key),
                "{}",
                a.key
            );
            assert!(super::super::is_well_known_label(a.canonical), "{}", a.key);
            assert_eq!(super::super::validate_label_key(a.key), Ok(()));
        }
    }

    #[test]
    fn requirements_on_aliases_become_canonical_requirements() {
        let r = req("karpenter.sh/capacity-type", Operator::NotIn, &["spot"]);
        assert_eq!(r, req(LABEL_CAPACITY_TYPE, Operator::NotIn, &["spot"]));
        let r = req("cloud.google.com/gke-spot", Operator::In, &["true"]);
        assert_eq!(r, req(LABEL_CAPACITY_TYPE, Operator::In, &["spot"]));
        let r = req("cloud.google.com/gke-spot", Operator::DoesNotExist, &[]);
        assert_eq!(r, req(LABEL_CAPACITY_TYPE, Operator::NotIn, &["spot"]));
        let r = req(
            "kubernetes.azure.com/scalesetpriority",
            Operator::In,
            &["regular"],
        );
        assert_eq!(r, req(LABEL_CAPACITY_TYPE, Operator::In, &["on-demand"]));
        let r = req(
            "cloud.google.com/gke-accelerator",
            Operator::In,
            &["nvidia-l4"],
        );
        assert_eq!(
            r,
            req(LABEL_INSTANCE_GPU_PRODUCT, Operator::In, &["NVIDIA-L4"])
        );
        let r = req(
            "cloud.google.com/gke-gpu-driver-version",
            Operator::In,
            &["latest"],
        );
        assert_eq!(
            r,
            req(LABEL_INSTANCE_GPU_MANUFACTURER, Operator::In, &["nvidia"])
        );
        let r = req("nvidia.com/gpu.present", Operator::In, &["true"]);
        assert_eq!(
            r,
            req(LABEL_INSTANCE_GPU_MANUFACTURER, Operator::In, &["nvidia"])
        );
        let r = req(
            "karpenter.k8s.aws/instance-generation",
            Operator::Gt,
            &["4"],
        );
        assert_eq!(r, req(LABEL_INSTANCE_GENERATION, Operator::Gt, &["4"]));
        // A nodeSelector (`In` one value, unchecked) maps the same way.
        let sel = Requirements::from_labels(&labels(&[("cloud.google.com/gke-spot", "true")]));
        assert!(sel.matches(&labels(&[(LABEL_CAPACITY_TYPE, "spot")])));
        assert!(!sel.matches(&labels(&[(LABEL_CAPACITY_TYPE, "on-demand")])));
    }

    #[test]
    fn nodes_with_only_alias_labels_match_canonical_requirements() {
        let mut r = Requirements::new();
        r.add(req(LABEL_CAPACITY_TYPE, Operator::NotIn, &["spot"]));
        assert!(!r.matches(&labels(&[("karpenter.sh/capacity-type", "spot")])));
        assert!(r.matches(&labels(&[("karpenter.sh/capacity-type", "on-demand")])));
        let mut r = Requirements::new();
        r.add(req(LABEL_CAPACITY_TYPE, Operator::In, &["spot"]));
        assert!(r.matches(&labels(&[("cloud.google.com/gke-spot", "true")])));
    }

    #[test]
    fn launched_nodes_carry_the_aliases_of_their_cloud_and_gpu() {
        let aws = labels(&[
            (LABEL_CLOUD, "aws"),
            (LABEL_CAPACITY_TYPE, "spot"),
            (LABEL_NODEPOOL, "gpu"),
            (LABEL_INSTANCE_GPU_MANUFACTURER, "nvidia"),
            (LABEL_INSTANCE_GPU_NAME, "a10g"),
            (LABEL_INSTANCE_GPU_PRODUCT, "NVIDIA-A10G"),
            (LABEL_INSTANCE_GPU_COUNT, "1"),
        ]);
        let a = alias_labels(&aws);
        assert_eq!(a["karpenter.sh/capacity-type"], "spot");
        assert_eq!(a["karpenter.sh/nodepool"], "gpu");
        assert_eq!(a["karpenter.k8s.aws/instance-gpu-name"], "a10g");
        assert_eq!(a["nvidia.com/gpu.product"], "NVIDIA-A10G");
        assert_eq!(a["nvidia.com/gpu.count"], "1");
        assert_eq!(a["nvidia.com/gpu.present"], "true");
        assert!(!a.contains_key("cloud.google.com/gke-spot"));
        assert!(!a.contains_key("kubernetes.azure.com/scalesetpriority"));

        let gcp = labels(&[
            (LABEL_CLOUD, "gcp"),
            (LABEL_CAPACITY_TYPE, "on-demand"),
            (LABEL_INSTANCE_FAMILY, "g2"),
            (LABEL_INSTANCE_GPU_MANUFACTURER, "nvidia"),
            (LABEL_INSTANCE_GPU_PRODUCT, "NVIDIA-L4"),
        ]);
        let a = alias_labels(&gcp);
        assert_eq!(a["cloud.google.com/gke-accelerator"], "nvidia-l4");
        assert_eq!(a["cloud.google.com/gke-gpu-driver-version"], "latest");
        assert_eq!(a["cloud.google.com/machine-family"], "g2");
        assert!(
            !a.contains_key("cloud.google.com/gke-spot"),
            "on-demand: absent"
        );
        assert!(!a.contains_key("karpenter.k8s.aws/instance-family"));

        let azure = labels(&[(LABEL_CLOUD, "azure"), (LABEL_CAPACITY_TYPE, "on-demand")]);
        assert_eq!(
            alias_labels(&azure)["kubernetes.azure.com/scalesetpriority"],
            "regular"
        );
    }

    #[test]
    fn the_nodepool_annotation_turns_alias_labels_off() {
        assert!(alias_labels_enabled(&BTreeMap::new()));
        let off = labels(&[(ANNOTATION_ALIAS_LABELS, "false")]);
        assert!(!alias_labels_enabled(&off));
    }
}
