//! A `quartermaster.dev/v1` NodePool as the solver's [`NodePoolSpec`].

use std::collections::{BTreeMap, BTreeSet};

use quartermaster_policies::labels::LABEL_REGION;
use quartermaster_policies::nodeclass::{KIND_AWS, KIND_AZURE, KIND_GCP};
use quartermaster_policies::{NodePool, Requirement, Requirements};
use quartermaster_pricing::sharing::GpuSharing;
use quartermaster_pricing::{Catalog, Cloud};
use quartermaster_solver::resources::ResourceTable;
use quartermaster_solver::{NodePoolSpec, NodeShape, PoolLimits, PoolUsage, PreferenceRule};

use crate::error::ClusterError;
use crate::node::taints;

mod node_class;
mod region;

#[cfg(test)]
mod guard_tests;
#[cfg(test)]
mod storage_tests;
#[cfg(test)]
mod tests;

pub(crate) use node_class::{cloud_of, node_class_regions, node_class_storage};
use region::pool_region;

/// Converts a NodePool. Resource limits are registered in `table` (a limit on a resource with no
/// spare slot is dropped with a note); `usage` is filled in later from the pool's nodes.
/// `node_class` is the referenced NodeClass's region when the NodeClass was given (`Some(None)`:
/// given, no region); the pool's nodes are restricted to that region, else to the cluster's
/// region or the catalog's default (see [`pool_region`]).
pub(crate) fn node_pool(
    id: &str,
    pool: &NodePool,
    node_class: Option<Option<&str>>,
    cluster_region: Option<&str>,
    catalog: Option<&Catalog>,
    table: &mut ResourceTable,
    notes: &mut Vec<String>,
) -> Result<NodePoolSpec, ClusterError> {
    let node_class_present = node_class.is_some();
    let name = pool.metadata.name.clone().unwrap_or_default();
    let class = pool.node_class_ref();
    let cloud = cloud_of(&class.kind).ok_or_else(|| {
        ClusterError::invalid(
            id,
            "spec.template.spec.nodeClassRef.kind",
            format!(
                "unknown NodeClass kind {:?}: expected one of {KIND_AWS}, {KIND_GCP}, {KIND_AZURE}",
                class.kind
            ),
        )
    })?;
    if !node_class_present {
        notes.push(format!(
            "NodePool {name}: NodeClass {}/{} not given; planned against {cloud} defaults",
            class.kind, class.name
        ));
    }
    let mut requirements = pool
        .node_requirements()
        .map_err(|e| ClusterError::invalid(id, "spec.template.spec.requirements", e.to_string()))?;
    let region = pool_region(
        id,
        &name,
        cloud,
        (&class.kind, &class.name),
        node_class.flatten(),
        cluster_region,
        catalog,
        notes,
    )?;
    if let Some(r) = region {
        let mut only = Requirements::new();
        only.add(Requirement::in_values(LABEL_REGION, [r.as_str()]));
        requirements = requirements.intersect(&only);
    }
    let parsed = pool
        .limits()
        .map_err(|e| ClusterError::invalid(id, "spec.limits", e.to_string()))?;
    let mut limits = PoolLimits {
        nodes: parsed.nodes,
        max_hourly_cost: parsed.max_hourly_cost,
        max_gpu_overshoot: match pool.spec.template.spec.max_gpu_overshoot {
            None => None,
            Some(m) => Some(u32::try_from(m).map_err(|_| {
                ClusterError::invalid(
                    id,
                    "spec.template.spec.maxGpuOvershoot",
                    format!("must be a whole number of accelerators, 0 or more, got {m}"),
                )
            })?),
        },
        ..PoolLimits::default()
    };
    for (resource, ceiling) in &parsed.resources {
        // A ceiling is never rounded up: 1.5 GPUs allow one.
        let value = if resource == "cpu" {
            ceiling.millis()
        } else {
            ceiling.to_whole_floor()
        };
        let value = i64::try_from(value).unwrap_or(i64::MAX);
        match table.slot_or_insert(resource) {
            Some(slot) => limits.resources.set(slot, value),
            None => notes.push(format!(
                "NodePool {name}: limit on {resource} ignored: no spare resource slot"
            )),
        }
    }
    let mut labels = node_labels(pool);
    if let Some(catalog) = catalog {
        let custom =
            custom_requirement_labels(&name, cloud, &requirements, &labels, catalog, notes);
        labels.extend(custom);
    }
    Ok(NodePoolSpec {
        name,
        cloud,
        weight: pool.weight(),
        requirements,
        labels,
        taints: taints(
            &pool.spec.template.spec.taints,
            id,
            "spec.template.spec.taints",
        )?,
        startup_taints: taints(
            &pool.spec.template.spec.startup_taints,
            id,
            "spec.template.spec.startupTaints",
        )?,
        limits,
        usage: PoolUsage::default(),
        node_class_present,
        node_shape: NodeShape {
            gpu_sharing: pool
                .spec
                .template
                .spec
                .gpu_sharing
                .as_ref()
                .and_then(gpu_sharing),
            ephemeral_storage: None,
            overlays: Vec::new(),
            spot_interruption_cost: Some(pool.spot_interruption_cost().map_err(|e| {
                ClusterError::invalid(id, "spec.template.spec.spotInterruptionCost", e.to_string())
            })?),
        },
        preferences: PreferenceRule {
            policy: pool.preference_policy(),
            budget: quartermaster_policies::parse_preference_budget(
                pool.spec
                    .preference_budget
                    .as_deref()
                    .unwrap_or(quartermaster_policies::DEFAULT_PREFERENCE_BUDGET),
            )
            .map_err(|e| ClusterError::invalid(id, "spec.preferenceBudget", e))?,
        },
    })
}

/// The labels a pool's nodes carry: the template's, plus `nvidia.com/mig.config` naming the
/// MIG layout the GPU Operator's MIG manager applies when the pool shares GPUs by MIG.
fn node_labels(pool: &NodePool) -> BTreeMap<String, String> {
    let mut labels = pool.spec.template.metadata.labels.clone();
    if let Some(sharing) = &pool.spec.template.spec.gpu_sharing
        && sharing.strategy == quartermaster_policies::GpuSharingStrategy::Mig
        && let Some(config) = &sharing.mig_config
    {
        labels
            .entry(LABEL_MIG_CONFIG.to_owned())
            .or_insert_with(|| config.clone());
    }
    labels
}

/// Labels for requirements on keys no instance type carries (`capacity-spread In [2, 3]`): as
/// Karpenter does, the node is given the label, with the requirement's first value, so the
/// requirement holds; said in a note. Requirements on well-known keys (`kubernetes.io/*`,
/// `*.kubernetes.io/*`, and any key some instance type of the cloud carries) stay constraints.
fn custom_requirement_labels(
    pool: &str,
    cloud: Cloud,
    requirements: &Requirements,
    template_labels: &BTreeMap<String, String>,
    catalog: &Catalog,
    notes: &mut Vec<String>,
) -> BTreeMap<String, String> {
    let known: BTreeSet<String> = catalog
        .for_cloud(cloud)
        .flat_map(|it| {
            it.offerings
                .iter()
                .flat_map(move |o| it.offering_labels(o).into_keys())
        })
        .collect();
    let well_known = |key: &str| {
        known.contains(key)
            || key.starts_with("kubernetes.io/")
            || key
                .split_once('/')
                .is_some_and(|(domain, _)| domain.ends_with("kubernetes.io"))
    };
    let mut out = BTreeMap::new();
    for r in requirements.iter() {
        if well_known(r.key())
            || template_labels.contains_key(r.key())
            || r.operator() != quartermaster_policies::Operator::In
        {
            continue;
        }
        let Some(value) = r.values().and_then(|v| v.iter().next()) else {
            continue;
        };
        notes.push(format!(
            "NodePool {pool}: requirement {} {r} is on a label no instance type carries: its nodes are labelled {}={value}",
            r.key(),
            r.key()
        ));
        out.insert(r.key().to_owned(), value.clone());
    }
    out
}

/// The label the NVIDIA GPU Operator's MIG manager reads for a node's MIG layout.
pub const LABEL_MIG_CONFIG: &str = "nvidia.com/mig.config";

/// The pricing model of a NodePool's `gpuSharing` (`None` when it is invalid: validation
/// reports it).
fn gpu_sharing(spec: &quartermaster_policies::GpuSharingSpec) -> Option<GpuSharing> {
    use quartermaster_policies::GpuSharingStrategy as S;
    let replicas = || spec.replicas.and_then(|r| u32::try_from(r).ok());
    let rename_by_default = spec.rename_by_default.unwrap_or(false);
    Some(match spec.strategy {
        S::TimeSlicing => GpuSharing::TimeSlicing {
            replicas: replicas()?,
            rename_by_default,
        },
        S::Mps => GpuSharing::Mps {
            replicas: replicas()?,
            rename_by_default,
        },
        S::Mig => match &spec.mig_config {
            Some(config) => GpuSharing::Mig {
                config: config.clone(),
            },
            None => GpuSharing::MigAuto,
        },
    })
}
