//! A `quartermaster.dev/v1` NodePool as the solver's [`NodePoolSpec`].

use std::collections::{BTreeMap, BTreeSet};

use quartermaster_policies::labels::{API_VERSION, LABEL_REGION};
use quartermaster_policies::nodeclass::{KIND_AWS, KIND_AZURE, KIND_GCP};
use quartermaster_policies::quantity::{Millis, parse_quantity};
use quartermaster_policies::{NodePool, Requirement, Requirements};
use quartermaster_pricing::sharing::GpuSharing;
use quartermaster_pricing::{Catalog, Cloud};
use quartermaster_solver::resources::ResourceTable;
use quartermaster_solver::{
    EphemeralStorage, NodePoolSpec, NodeShape, PoolLimits, PoolUsage, PreferenceRule,
};
use serde_json::Value;

use crate::error::ClusterError;
use crate::node::taints;

/// The cloud a NodeClass kind belongs to.
pub(crate) fn cloud_of(kind: &str) -> Option<Cloud> {
    match kind {
        KIND_AWS => Some(Cloud::Aws),
        KIND_GCP => Some(Cloud::Gcp),
        KIND_AZURE => Some(Cloud::Azure),
        _ => None,
    }
}

/// The NodeClasses given, by `(kind, name)`, with their region (`spec.region`, or an
/// AzureNodeClass's `spec.location`); `None` when unset.
pub(crate) fn node_class_regions(objects: &[Value]) -> BTreeMap<(String, String), Option<String>> {
    let mut out = BTreeMap::new();
    for o in objects {
        if o.get("apiVersion").and_then(Value::as_str) != Some(API_VERSION) {
            continue;
        }
        let kind = o.get("kind").and_then(Value::as_str).unwrap_or("");
        let field = match kind {
            KIND_AWS | KIND_GCP => "region",
            KIND_AZURE => "location",
            _ => continue,
        };
        let name = o.pointer("/metadata/name").and_then(Value::as_str);
        let region = o
            .get("spec")
            .and_then(|s| s.get(field))
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
            .map(str::to_owned);
        if let Some(name) = name {
            out.insert((kind.to_owned(), name.to_owned()), region);
        }
    }
    out
}

/// What the NodeClasses given say about their nodes' ephemeral storage, by `(kind, name)`:
/// the root volume (AWSNodeClass: the `blockDeviceMappings` entry with `rootVolume: true`, else
/// the only one; GCPNodeClass `disk.sizeGiB`; AzureNodeClass `osDiskSizeGB`) and, for AWS,
/// whether local NVMe holds it (`instanceStorePolicy: RAID0`), as Karpenter computes a node's
/// ephemeral-storage. A NodeClass that says nothing is left out (the type's default stands).
pub(crate) fn node_class_storage(
    objects: &[Value],
) -> BTreeMap<(String, String), EphemeralStorage> {
    const GIB: u64 = 1 << 30;
    let mut out = BTreeMap::new();
    for o in objects {
        if o.get("apiVersion").and_then(Value::as_str) != Some(API_VERSION) {
            continue;
        }
        let (Some(kind), Some(name)) = (
            o.get("kind").and_then(Value::as_str),
            o.pointer("/metadata/name").and_then(Value::as_str),
        ) else {
            continue;
        };
        let spec = o.get("spec");
        let storage = match kind {
            KIND_AWS => {
                let mappings = spec
                    .and_then(|s| s.get("blockDeviceMappings"))
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                let root = mappings
                    .iter()
                    .find(|m| m.get("rootVolume").and_then(Value::as_bool) == Some(true))
                    .or_else(|| (mappings.len() == 1).then(|| &mappings[0]));
                let root_volume_bytes = root
                    .and_then(|m| m.pointer("/ebs/volumeSize"))
                    .and_then(|q| match q {
                        Value::String(t) => parse_quantity(t).ok(),
                        Value::Number(n) => n
                            .as_i64()
                            .map(|g| Millis::from_whole(g.saturating_mul(GIB as i64))),
                        _ => None,
                    })
                    .and_then(|m| u64::try_from(m.to_whole_floor()).ok());
                let raid0 = spec
                    .and_then(|s| s.get("instanceStorePolicy"))
                    .and_then(Value::as_str)
                    == Some("RAID0");
                (root_volume_bytes.is_some() || raid0 || spec.is_some()).then_some(
                    EphemeralStorage {
                        root_volume_bytes,
                        local_nvme: raid0,
                    },
                )
            }
            KIND_GCP => spec
                .and_then(|s| s.pointer("/disk/sizeGiB"))
                .and_then(Value::as_u64)
                .map(|g| EphemeralStorage {
                    root_volume_bytes: Some(g * GIB),
                    local_nvme: false,
                }),
            KIND_AZURE => spec
                .and_then(|s| s.get("osDiskSizeGB"))
                .and_then(Value::as_u64)
                .map(|g| EphemeralStorage {
                    root_volume_bytes: Some(g * GIB),
                    local_nvme: false,
                }),
            _ => None,
        };
        if let Some(storage) = storage {
            out.insert((kind.to_owned(), name.to_owned()), storage);
        }
    }
    out
}

/// Where a NodePool's nodes may be bought: the NodeClass's region; else the cluster's region
/// (`cluster_region`: `plan --region`, the controller's `--region`) when the catalog has
/// offerings of the pool's cloud there; else the catalog's default region of the cloud
/// ([`Catalog::default_region`]), with a note. A NodeClass region the catalog has no offerings
/// of the cloud in is an error naming the regions it has, and so is a cluster region that no
/// cloud of the catalog has. `None`: no restriction (no catalog, or several regions and no
/// default).
#[allow(clippy::too_many_arguments)]
fn pool_region(
    pool_id: &str,
    pool: &str,
    cloud: Cloud,
    class: (&str, &str),
    class_region: Option<&str>,
    cluster_region: Option<&str>,
    catalog: Option<&Catalog>,
    notes: &mut Vec<String>,
) -> Result<Option<String>, ClusterError> {
    let (kind, class_name) = class;
    let field = if kind == KIND_AZURE {
        "spec.location"
    } else {
        "spec.region"
    };
    let Some(catalog) = catalog else {
        return Ok(class_region.map(str::to_owned));
    };
    let regions: BTreeSet<&str> = catalog.regions(cloud);
    let list = || regions.iter().copied().collect::<Vec<_>>().join(", ");
    match class_region {
        Some(r) if regions.contains(r) => Ok(Some(r.to_owned())),
        // The pool, not the NodeClass, is in error: a driver that drops the rejected object
        // (the controller) must not go on buying for the pool in another region.
        Some(r) => Err(ClusterError::invalid(
            pool_id,
            "spec.template.spec.nodeClassRef",
            format!(
                "{kind} {class_name} {field} {r:?} has no {cloud} offerings in the catalog; its {cloud} regions: {} (pass a catalog with offerings in {r:?}, or change the region)",
                if regions.is_empty() {
                    "none".to_owned()
                } else {
                    list()
                }
            ),
        )),
        None => {
            let default = catalog.default_region(cloud);
            match cluster_region {
                Some(r) if regions.contains(r) => {
                    notes.push(format!(
                        "NodePool {pool}: no region from {kind} {class_name}; using the cluster region {r}"
                    ));
                    return Ok(Some(r.to_owned()));
                }
                Some(r) if !Cloud::ALL.iter().any(|c| catalog.regions(*c).contains(r)) => {
                    return Err(ClusterError::invalid(
                        pool_id,
                        "spec.template.spec.nodeClassRef",
                        format!(
                            "no region from {kind} {class_name}, and the cluster region {r:?} has no offerings of any cloud in the catalog; its {cloud} regions: {}",
                            if regions.is_empty() {
                                "none".to_owned()
                            } else {
                                list()
                            }
                        ),
                    ));
                }
                Some(r) => {
                    // A region of another cloud: this pool buys in its own cloud's default.
                    if let Some(d) = default {
                        notes.push(format!(
                            "NodePool {pool}: no region from {kind} {class_name}, and the cluster region {r} has no {cloud} offerings; using the catalog's default {cloud} region {d}"
                        ));
                    }
                }
                None => {
                    if let Some(d) = default {
                        notes.push(format!(
                            "NodePool {pool}: no region from {kind} {class_name}; using the catalog's default {cloud} region {d}"
                        ));
                    }
                }
            }
            Ok(default.map(str::to_owned))
        }
    }
}

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

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use quartermaster_pricing::Cloud;
    use quartermaster_solver::resources::{CPU, MEMORY};

    use crate::testing::{ingest, ingest_err};

    const GPU_POOL: &str = "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: gpu}
spec:
  weight: 50
  template:
    metadata:
      labels: {workload-class: gpu}
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: GCPNodeClass, name: training}
      requirements:
      - {key: quartermaster.dev/capacity-type, operator: In, values: [spot]}
      taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
      startupTaints: [{key: example.com/init, effect: NoExecute}]
  limits:
    cpu: 1500m
    memory: 64Gi
    nvidia.com/gpu: '16'
    example.com/fpga: '2'
    nodes: '8'
    maxHourlyCost: '400'
";

    #[test]
    fn pool_cloud_weight_requirements_taints_and_limits() {
        let ingested = ingest(GPU_POOL);
        let pools = &ingested.snapshot.node_pools;
        assert_eq!(pools.len(), 1);
        let p = &pools[0];
        assert_eq!(p.name, "gpu");
        assert_eq!(p.cloud, Cloud::Gcp);
        assert_eq!(p.weight, 50);
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert!(p.requirements.matches(&labels(&[
            ("quartermaster.dev/capacity-type", "spot"),
            ("workload-class", "gpu")
        ])));
        assert!(
            !p.requirements
                .matches(&labels(&[("quartermaster.dev/capacity-type", "spot")])),
            "template labels are requirements too"
        );
        assert_eq!(p.labels["workload-class"], "gpu");
        assert_eq!(p.taints[0].to_string(), "nvidia.com/gpu=present:NoSchedule");
        assert_eq!(
            p.startup_taints[0].to_string(),
            "example.com/init:NoExecute"
        );
        let slot = |name: &str| ingested.snapshot.resources.slot(name).unwrap();
        assert_eq!(p.limits.resources.get(CPU), 1500);
        assert_eq!(p.limits.resources.get(MEMORY), 64 << 30);
        assert_eq!(p.limits.resources.get(slot("nvidia.com/gpu")), 16);
        assert_eq!(p.limits.resources.get(slot("example.com/fpga")), 2);
        assert_eq!(
            p.limits.resources.get(slot("ephemeral-storage")),
            i64::MAX,
            "unlimited"
        );
        assert_eq!(p.limits.nodes, Some(8));
        assert_eq!(p.limits.max_hourly_cost, Some(400.0));
        assert!(!p.node_class_present);
        assert!(
            ingested.notes.contains(&"NodePool gpu: NodeClass GCPNodeClass/training not given; planned against gcp defaults".to_owned()),
            "{:?}",
            ingested.notes
        );
    }

    #[test]
    fn node_class_kinds_pick_the_cloud_and_mark_presence() {
        let yaml = "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: a}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: AzureNodeClass, name: gpu}
---
apiVersion: quartermaster.dev/v1
kind: AzureNodeClass
metadata: {name: gpu}
spec:
  subscriptionId: 00000000-0000-0000-0000-000000000000
  resourceGroup: rg
  location: eastus
  subnetId: /subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg/providers/Microsoft.Network/virtualNetworks/v/subnets/s
  image: {imageFamily: Ubuntu2204}
";
        let ingested = ingest(yaml);
        let p = &ingested.snapshot.node_pools[0];
        assert_eq!(p.cloud, Cloud::Azure);
        assert_eq!(p.weight, 0);
        assert!(p.node_class_present);
        assert!(
            !ingested.notes.iter().any(|n| n.contains("not given")),
            "{:?}",
            ingested.notes
        );
    }

    const REGION_POOL: &str = "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: west}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: west}
---
apiVersion: quartermaster.dev/v1
kind: AWSNodeClass
metadata: {name: west}
spec:
  REGION
  role: r
  subnetSelectorTerms: [{id: subnet-1}]
  securityGroupSelectorTerms: [{id: sg-1}]
  amiSelectorTerms: [{alias: al2023@latest}]
";

    fn in_region(pool: &quartermaster_solver::NodePoolSpec, region: &str) -> bool {
        let labels: BTreeMap<String, String> = [(
            "topology.kubernetes.io/region".to_owned(),
            region.to_owned(),
        )]
        .into();
        pool.requirements.matches(&labels)
    }

    #[test]
    fn the_node_class_region_restricts_the_pool() {
        let ingested = ingest(&REGION_POOL.replace("REGION", "region: us-west-2"));
        let pool = &ingested.snapshot.node_pools[0];
        assert!(in_region(pool, "us-west-2"));
        assert!(!in_region(pool, "us-east-1"));
    }

    /// g5.xlarge in us-east-1 (the default) and eu-west-1; a GCP type in us-central1.
    fn regional_catalog() -> quartermaster_pricing::Catalog {
        let text = r#"cloud = "aws"
region = "us-east-1"
default_region = "us-east-1"

[[instance_type]]
name = "g5.xlarge"
family = "g5"
vcpu = 4
memory_mib = 16384
arch = "amd64"
max_pods = 58
zones = ["us-east-1a"]
on_demand = { price = 1.006, source = "t", as_of = 2026-11-30 }

[[instance_type.regions]]
region = "eu-west-1"
zones = ["eu-west-1a"]
on_demand = { price = 1.123, source = "t", as_of = 2026-11-30 }

[[instance_type]]
cloud = "gcp"
region = "us-central1"
name = "g2-standard-4"
family = "g2"
vcpu = 4
memory_mib = 16384
arch = "amd64"
max_pods = 110
zones = ["us-central1-a"]
on_demand = { price = 0.7, source = "t", as_of = 2026-11-30 }
"#;
        let file = quartermaster_pricing::Catalog::parse("t.toml", text).unwrap();
        quartermaster_pricing::Catalog::default().with_override(file)
    }

    fn regional(yaml_region: &str, cluster: Option<&str>) -> Result<crate::Ingested, String> {
        let objects = crate::testing::objects(&REGION_POOL.replace("REGION", yaml_region));
        crate::snapshot_in_region(&objects, &regional_catalog(), cluster).map_err(|e| e.to_string())
    }

    #[test]
    fn without_a_region_the_default_region_is_used_and_an_unknown_one_is_an_error() {
        let ingested = regional("", None).unwrap();
        assert!(in_region(&ingested.snapshot.node_pools[0], "us-east-1"));
        assert!(!in_region(&ingested.snapshot.node_pools[0], "eu-west-1"));
        assert!(
            ingested.notes.iter().any(|n| n
                == "NodePool west: no region from AWSNodeClass west; using the catalog's default aws region us-east-1"),
            "{:?}",
            ingested.notes
        );
        // The plain entry points use the default region too.
        let objects = crate::testing::objects(&REGION_POOL.replace("REGION", ""));
        let plain = crate::snapshot_with_catalog(&objects, &regional_catalog()).unwrap();
        assert!(!in_region(&plain.snapshot.node_pools[0], "eu-west-1"));

        let e = regional("region: eu-west-3", None).unwrap_err();
        assert_eq!(
            e,
            "NodePool/west: spec.template.spec.nodeClassRef: AWSNodeClass west spec.region \"eu-west-3\" has no aws offerings in the catalog; its aws regions: eu-west-1, us-east-1 (pass a catalog with offerings in \"eu-west-3\", or change the region)"
        );
    }

    #[test]
    fn the_cluster_region_applies_when_the_node_class_names_none() {
        let ingested = regional("", Some("eu-west-1")).unwrap();
        let pool = &ingested.snapshot.node_pools[0];
        assert!(in_region(pool, "eu-west-1") && !in_region(pool, "us-east-1"));
        assert!(
            ingested.notes.iter().any(|n| n
                == "NodePool west: no region from AWSNodeClass west; using the cluster region eu-west-1"),
            "{:?}",
            ingested.notes
        );
        // The NodeClass's own region wins.
        let ingested = regional("region: us-east-1", Some("eu-west-1")).unwrap();
        assert!(in_region(&ingested.snapshot.node_pools[0], "us-east-1"));
        // A region of another cloud: this pool keeps its cloud's default, with a note.
        let ingested = regional("", Some("us-central1")).unwrap();
        assert!(in_region(&ingested.snapshot.node_pools[0], "us-east-1"));
        assert!(
            ingested.notes.iter().any(|n| n.contains(
                "the cluster region us-central1 has no aws offerings; using the catalog's default aws region us-east-1"
            )),
            "{:?}",
            ingested.notes
        );
        // A region no cloud has.
        let e = regional("", Some("mars-north-7")).unwrap_err();
        assert_eq!(
            e,
            "NodePool/west: spec.template.spec.nodeClassRef: no region from AWSNodeClass west, and the cluster region \"mars-north-7\" has no offerings of any cloud in the catalog; its aws regions: eu-west-1, us-east-1"
        );
    }

    #[test]
    fn pool_usage_counts_its_nodes_and_claims() {
        let yaml = format!(
            "{GPU_POOL}---
apiVersion: v1
kind: Node
metadata: {{name: n1, labels: {{quartermaster.dev/nodepool: gpu}}}}
status:
  capacity: {{cpu: '4', nvidia.com/gpu: '1'}}
  allocatable: {{cpu: 3900m, nvidia.com/gpu: '1'}}
---
apiVersion: quartermaster.dev/v1
kind: NodeClaim
metadata: {{name: c1, labels: {{quartermaster.dev/nodepool: gpu}}}}
spec:
  nodeClassRef: {{group: quartermaster.dev, kind: GCPNodeClass, name: training}}
status:
  pricePerHour: 2.5
  capacity: {{cpu: '8', nvidia.com/gpu: '2'}}
  allocatable: {{cpu: 7900m, nvidia.com/gpu: '2'}}
---
apiVersion: v1
kind: Node
metadata: {{name: other}}
status:
  capacity: {{cpu: '64'}}
"
        );
        let ingested = ingest(&yaml);
        let usage = &ingested.snapshot.node_pools[0].usage;
        assert_eq!(usage.nodes, 2);
        assert_eq!(
            usage.resources.get(CPU),
            12_000,
            "capacity, not allocatable"
        );
        assert_eq!(usage.resources.get(4), 3);
        assert!((usage.hourly_cost - 2.5).abs() < 1e-9);
        assert!(
            ingested
                .notes
                .iter()
                .any(|n| n.contains("node n1: price unknown")),
            "the pool has maxHourlyCost, so an unpriced node is worth a note: {:?}",
            ingested.notes
        );
    }

    #[test]
    fn spot_interruption_cost_defaults_to_five_minutes() {
        let pool = |cost: &str| {
            format!(
                "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {{name: spot}}
spec:
  template:
    spec:
      nodeClassRef: {{group: quartermaster.dev, kind: AWSNodeClass, name: x}}
{cost}"
            )
        };
        let minutes = |yaml: &str| {
            ingest(yaml).snapshot.node_pools[0]
                .node_shape
                .spot_interruption_minutes()
        };
        assert_eq!(minutes(&pool("")), 5.0);
        assert_eq!(minutes(&pool("      spotInterruptionCost: 1h30m\n")), 90.0);
        let e = ingest_err(&pool("      spotInterruptionCost: soon\n"));
        assert!(
            e.to_string()
                .contains("spec.template.spec.spotInterruptionCost"),
            "{e}"
        );
    }

    #[test]
    fn invalid_pool_is_an_error_naming_pool_and_field() {
        let e = ingest_err(
            "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: broken}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: x}
      requirements:
      - {key: quartermaster.dev/capacity-type, operator: Near, values: [spot]}
",
        );
        assert!(
            e.to_string()
                .starts_with("NodePool/broken: spec.template.spec.requirements[0].operator: "),
            "{e}"
        );
    }
}

#[cfg(test)]
mod storage_tests {
    use super::*;
    use crate::testing::objects;

    #[test]
    fn node_classes_say_where_ephemeral_storage_lives() {
        let storage = node_class_storage(&objects(
            "apiVersion: quartermaster.dev/v1
kind: AWSNodeClass
metadata: {name: raid}
spec: {instanceStorePolicy: RAID0}
---
apiVersion: quartermaster.dev/v1
kind: AWSNodeClass
metadata: {name: big-root}
spec:
  blockDeviceMappings:
  - {deviceName: /dev/xvda, rootVolume: true, ebs: {volumeSize: 200Gi}}
  - {deviceName: /dev/xvdb, ebs: {volumeSize: 1Ti}}
---
apiVersion: quartermaster.dev/v1
kind: GCPNodeClass
metadata: {name: gke}
spec: {disk: {sizeGiB: 300}}
---
apiVersion: quartermaster.dev/v1
kind: AzureNodeClass
metadata: {name: aks}
spec: {osDiskSizeGB: 256}
---
apiVersion: quartermaster.dev/v1
kind: GCPNodeClass
metadata: {name: silent}
spec: {}
",
        ));
        let get = |k: &str, n: &str| storage.get(&(k.to_owned(), n.to_owned())).copied();
        assert_eq!(
            get(KIND_AWS, "raid"),
            Some(EphemeralStorage {
                root_volume_bytes: None,
                local_nvme: true
            })
        );
        assert_eq!(
            get(KIND_AWS, "big-root"),
            Some(EphemeralStorage {
                root_volume_bytes: Some(200 << 30),
                local_nvme: false
            })
        );
        assert_eq!(
            get(KIND_GCP, "gke").unwrap().root_volume_bytes,
            Some(300 << 30)
        );
        assert_eq!(
            get(KIND_AZURE, "aks").unwrap().root_volume_bytes,
            Some(256 << 30)
        );
        assert_eq!(get(KIND_GCP, "silent"), None);
    }
}

#[cfg(test)]
mod guard_tests {
    use crate::testing::ingest;

    const POOL: &str = "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: x}
      maxGpuOvershoot: 2
";

    #[test]
    fn max_gpu_overshoot_becomes_a_pool_limit() {
        let ingested = ingest(POOL);
        assert_eq!(
            ingested.snapshot.node_pools[0].limits.max_gpu_overshoot,
            Some(2)
        );
        let ingested = ingest(&POOL.replace("      maxGpuOvershoot: 2\n", ""));
        assert_eq!(
            ingested.snapshot.node_pools[0].limits.max_gpu_overshoot,
            None
        );
    }
}
