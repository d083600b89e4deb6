//! Shared GPUs: what a node advertises to Kubernetes once the NVIDIA device plugin (time-slicing,
//! MPS) or the GPU Operator's MIG manager has configured its GPUs, so the solver can count the
//! capacity a node *will* have before it exists.
//!
//! MIG layouts are facts: the named configurations of NVIDIA's `nvidia-mig-parted` default
//! configuration (`deployments/systemd/config-default.yaml` of NVIDIA/mig-parted at commit
//! bd7160f43f16462eeb21e1eda5e67b5b6b03fd7d, 2026-08-21; the GPU Operator's
//! `default-mig-parted-config` carries the same names), for the GPU models in our catalog,
//! told apart by model and memory per device. Resource names follow the device plugin's `mixed`
//! MIG strategy (`nvidia.com/mig-1g.10gb`), which names each slice size.

use std::collections::BTreeMap;

use crate::{Accelerator, InstanceType};

/// How the GPUs of a node are shared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuSharing {
    /// CUDA time-slicing: each GPU is advertised `replicas` times.
    TimeSlicing {
        /// Advertised copies per GPU (2 or more).
        replicas: u32,
        /// Advertise as `<resource>.shared` instead of `<resource>`.
        rename_by_default: bool,
    },
    /// CUDA MPS: each GPU is split into `replicas` equal shares.
    Mps {
        /// Shares per GPU (2 or more).
        replicas: u32,
        /// Advertise as `<resource>.shared` instead of `<resource>`.
        rename_by_default: bool,
    },
    /// Multi-Instance GPU: every GPU is partitioned by the named layout.
    Mig {
        /// Layout name (`all-1g.10gb`, `all-balanced`, ...).
        config: String,
    },
    /// Multi-Instance GPU with the layout chosen per node (by the solver, from the pending mix
    /// of slice requests): a type's capacity depends on the layout, see
    /// [`InstanceType::shared_capacity`] with [`GpuSharing::Mig`] for each of [`mig_layouts`].
    MigAuto,
}

/// A named MIG layout: slices per GPU.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MigLayout {
    /// Layout name, as `nvidia.com/mig.config` takes it.
    pub name: &'static str,
    /// (profile, count) per GPU, e.g. `("1g.10gb", 7)`.
    pub slices: &'static [(&'static str, u32)],
}

/// The MIG layouts of one GPU model.
struct MigModel {
    /// Catalog model name (`a100`, `h100`, ...).
    name: &'static str,
    /// Memory per device in MiB as the catalog records it.
    memory_mib: u64,
    /// What NVIDIA calls it.
    title: &'static str,
    layouts: &'static [MigLayout],
}

const fn layout(name: &'static str, slices: &'static [(&'static str, u32)]) -> MigLayout {
    MigLayout { name, slices }
}

const A100_40GB: &[MigLayout] = &[
    layout("all-1g.5gb", &[("1g.5gb", 7)]),
    layout("all-1g.10gb", &[("1g.10gb", 4)]),
    layout("all-2g.10gb", &[("2g.10gb", 3)]),
    layout("all-3g.20gb", &[("3g.20gb", 2)]),
    layout("all-4g.20gb", &[("4g.20gb", 1)]),
    layout("all-7g.40gb", &[("7g.40gb", 1)]),
    layout(
        "all-balanced",
        &[("1g.5gb", 2), ("2g.10gb", 1), ("3g.20gb", 1)],
    ),
];

/// A100-80GB and H100-80GB share every layout.
const GPU_80GB: &[MigLayout] = &[
    layout("all-1g.10gb", &[("1g.10gb", 7)]),
    layout("all-1g.20gb", &[("1g.20gb", 4)]),
    layout("all-2g.20gb", &[("2g.20gb", 3)]),
    layout("all-3g.40gb", &[("3g.40gb", 2)]),
    layout("all-4g.40gb", &[("4g.40gb", 1)]),
    layout("all-7g.80gb", &[("7g.80gb", 1)]),
    layout(
        "all-balanced",
        &[("1g.10gb", 2), ("2g.20gb", 1), ("3g.40gb", 1)],
    ),
];

const H100_NVL: &[MigLayout] = &[
    layout("all-1g.12gb", &[("1g.12gb", 7)]),
    layout("all-1g.24gb", &[("1g.24gb", 4)]),
    layout("all-2g.24gb", &[("2g.24gb", 3)]),
    layout("all-3g.47gb", &[("3g.47gb", 2)]),
    layout("all-4g.47gb", &[("4g.47gb", 1)]),
    layout("all-7g.94gb", &[("7g.94gb", 1)]),
    layout(
        "all-balanced",
        &[("1g.12gb", 2), ("2g.24gb", 1), ("3g.47gb", 1)],
    ),
];

const H200_141GB: &[MigLayout] = &[
    layout("all-1g.18gb", &[("1g.18gb", 7)]),
    layout("all-1g.35gb", &[("1g.35gb", 4)]),
    layout("all-2g.35gb", &[("2g.35gb", 3)]),
    layout("all-3g.71gb", &[("3g.71gb", 2)]),
    layout("all-4g.71gb", &[("4g.71gb", 1)]),
    layout("all-7g.141gb", &[("7g.141gb", 1)]),
    layout(
        "all-balanced",
        &[("1g.18gb", 2), ("2g.35gb", 1), ("3g.71gb", 1)],
    ),
];

const MIG_MODELS: &[MigModel] = &[
    MigModel {
        name: "a100",
        memory_mib: 40960,
        title: "A100-40GB",
        layouts: A100_40GB,
    },
    MigModel {
        name: "a100",
        memory_mib: 81920,
        title: "A100-80GB",
        layouts: GPU_80GB,
    },
    MigModel {
        name: "h100",
        memory_mib: 81920,
        title: "H100-80GB",
        layouts: GPU_80GB,
    },
    MigModel {
        name: "h100",
        memory_mib: 96256,
        title: "H100 NVL",
        layouts: H100_NVL,
    },
    MigModel {
        name: "h200",
        memory_mib: 144384,
        title: "H200-141GB",
        layouts: H200_141GB,
    },
];

fn mig_model(accelerator: &Accelerator) -> Option<&'static MigModel> {
    MIG_MODELS
        .iter()
        .find(|m| m.name == accelerator.name && m.memory_mib == accelerator.memory_mib)
}

/// The MIG layouts a GPU supports; empty for GPUs without MIG (or not in our table).
pub fn mig_layouts(accelerator: &Accelerator) -> &'static [MigLayout] {
    mig_model(accelerator).map_or(&[], |m| m.layouts)
}

/// One MIG layout of a GPU by name.
pub fn mig_layout(accelerator: &Accelerator, config: &str) -> Option<&'static MigLayout> {
    mig_layouts(accelerator).iter().find(|l| l.name == config)
}

/// The device plugin's resource name for a MIG profile (`mixed` strategy).
pub fn mig_resource(profile: &str) -> String {
    format!("nvidia.com/mig-{profile}")
}

/// Why a sharing setting cannot apply to an instance type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SharingError {
    /// The type has no whole GPU to share.
    #[error("{instance_type} has no GPU to share")]
    NoGpu {
        /// Instance type.
        instance_type: String,
    },
    /// Time-slicing and MPS need at least two replicas.
    #[error("replicas must be 2 or more to share a GPU, got {replicas}")]
    TooFewReplicas {
        /// What was asked.
        replicas: u32,
    },
    /// MIG with the layout chosen per node: the capacity is that of the layout chosen.
    #[error("{instance_type}: the MIG layout is chosen per node")]
    LayoutPerNode {
        /// Instance type.
        instance_type: String,
    },
    /// The GPU has no MIG, or not this layout.
    #[error("{instance_type}: {gpu} {}", match .known.is_empty() {
        true => "has no MIG".to_owned(),
        false => format!("has no MIG layout {config:?}; its layouts: {}", .known.join(", ")),
    })]
    NoMigLayout {
        /// Instance type.
        instance_type: String,
        /// The GPU.
        gpu: String,
        /// The layout asked for.
        config: String,
        /// The layouts it has.
        known: Vec<&'static str>,
    },
}

impl InstanceType {
    /// [`InstanceType::capacity`] as the device plugin advertises it once the GPUs are shared:
    /// the whole-GPU resource replaced by `replicas` copies per GPU (time-slicing, MPS; renamed
    /// `<resource>.shared` with `rename_by_default`), or by one resource per MIG profile.
    pub fn shared_capacity(
        &self,
        sharing: &GpuSharing,
    ) -> Result<BTreeMap<String, u64>, SharingError> {
        let mut capacity = self.capacity();
        let Some(gpu) = self
            .accelerator
            .as_ref()
            .filter(|a| a.count > 0 && !a.is_fractional() && a.manufacturer == "nvidia")
        else {
            return Err(SharingError::NoGpu {
                instance_type: self.name.clone(),
            });
        };
        let devices = u64::from(gpu.count);
        match sharing {
            GpuSharing::TimeSlicing {
                replicas,
                rename_by_default,
            }
            | GpuSharing::Mps {
                replicas,
                rename_by_default,
            } => {
                if *replicas < 2 {
                    return Err(SharingError::TooFewReplicas {
                        replicas: *replicas,
                    });
                }
                let name = if *rename_by_default {
                    capacity.remove(&gpu.resource);
                    format!("{}.shared", gpu.resource)
                } else {
                    gpu.resource.clone()
                };
                capacity.insert(name, devices * u64::from(*replicas));
            }
            GpuSharing::MigAuto => {
                return Err(if mig_layouts(gpu).is_empty() {
                    SharingError::NoMigLayout {
                        instance_type: self.name.clone(),
                        gpu: format!("{} ({} MiB)", gpu.name, gpu.memory_mib),
                        config: String::new(),
                        known: Vec::new(),
                    }
                } else {
                    SharingError::LayoutPerNode {
                        instance_type: self.name.clone(),
                    }
                });
            }
            GpuSharing::Mig { config } => {
                let Some(layout) = mig_layout(gpu, config) else {
                    return Err(SharingError::NoMigLayout {
                        instance_type: self.name.clone(),
                        gpu: mig_model(gpu).map_or_else(
                            || format!("{} ({} MiB)", gpu.name, gpu.memory_mib),
                            |m| m.title.to_owned(),
                        ),
                        config: config.clone(),
                        known: mig_layouts(gpu).iter().map(|l| l.name).collect(),
                    });
                };
                capacity.remove(&gpu.resource);
                for (profile, per_gpu) in layout.slices {
                    *capacity.entry(mig_resource(profile)).or_default() +=
                        devices * u64::from(*per_gpu);
                }
            }
        }
        Ok(capacity)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Catalog;

    fn embedded(name: &str) -> InstanceType {
        Catalog::embedded()
            .instance_types()
            .iter()
            .find(|t| t.name == name)
            .unwrap_or_else(|| panic!("{name} in the embedded catalog"))
            .clone()
    }

    #[test]
    fn time_slicing_multiplies_the_gpus_and_renaming_moves_them() {
        let g5 = embedded("g5.xlarge");
        let plain = g5
            .shared_capacity(&GpuSharing::TimeSlicing {
                replicas: 4,
                rename_by_default: false,
            })
            .unwrap();
        assert_eq!(plain["nvidia.com/gpu"], 4);
        let renamed = g5
            .shared_capacity(&GpuSharing::Mps {
                replicas: 4,
                rename_by_default: true,
            })
            .unwrap();
        assert_eq!(renamed["nvidia.com/gpu.shared"], 4);
        assert!(!renamed.contains_key("nvidia.com/gpu"));
        assert_eq!(
            g5.shared_capacity(&GpuSharing::TimeSlicing {
                replicas: 1,
                rename_by_default: false
            }),
            Err(SharingError::TooFewReplicas { replicas: 1 })
        );
    }

    #[test]
    fn mig_layouts_follow_the_gpu_model_and_its_memory() {
        let p4d = embedded("p4d.24xlarge"); // 8 × A100-40GB
        let c = p4d
            .shared_capacity(&GpuSharing::Mig {
                config: "all-balanced".into(),
            })
            .unwrap();
        assert_eq!(c["nvidia.com/mig-1g.5gb"], 16);
        assert_eq!(c["nvidia.com/mig-2g.10gb"], 8);
        assert_eq!(c["nvidia.com/mig-3g.20gb"], 8);
        assert!(!c.contains_key("nvidia.com/gpu"));
        let p5 = embedded("p5.48xlarge"); // 8 × H100-80GB
        let c = p5
            .shared_capacity(&GpuSharing::Mig {
                config: "all-1g.10gb".into(),
            })
            .unwrap();
        assert_eq!(c["nvidia.com/mig-1g.10gb"], 56);
        let err = p4d
            .shared_capacity(&GpuSharing::Mig {
                config: "all-1g.10gbb".into(),
            })
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("p4d.24xlarge: A100-40GB has no MIG layout \"all-1g.10gbb\"; its layouts: all-1g.5gb, all-1g.10gb"),
            "{err}"
        );
        let g5 = embedded("g5.xlarge"); // A10G: no MIG
        let err = g5
            .shared_capacity(&GpuSharing::Mig {
                config: "all-1g.10gb".into(),
            })
            .unwrap_err();
        assert!(err.to_string().ends_with("has no MIG"), "{err}");
        let m6i = embedded("m6i.large");
        assert!(matches!(
            m6i.shared_capacity(&GpuSharing::Mig {
                config: "all-1g.10gb".into()
            }),
            Err(SharingError::NoGpu { .. })
        ));
    }
}
