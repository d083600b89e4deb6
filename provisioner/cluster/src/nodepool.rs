//! A `quartermaster.dev/v1` NodePool as the solver's [`NodePoolSpec`].

use quartermaster_policies::NodePool;
use quartermaster_policies::nodeclass::{KIND_AWS, KIND_AZURE, KIND_GCP};
use quartermaster_pricing::Cloud;
use quartermaster_solver::resources::ResourceTable;
use quartermaster_solver::{NodePoolSpec, PoolLimits, PoolUsage};

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

/// Converts a NodePool. Resource limits are registered in `table` (a limit on a resource with no
/// spare slot is dropped with a note); `usage` is filled in later from the pool's nodes.
/// `node_class_present` says whether the referenced NodeClass was given.
pub(crate) fn node_pool(
    id: &str,
    pool: &NodePool,
    node_class_present: bool,
    table: &mut ResourceTable,
    notes: &mut Vec<String>,
) -> Result<NodePoolSpec, ClusterError> {
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
    let requirements = pool
        .node_requirements()
        .map_err(|e| ClusterError::invalid(id, "spec.template.spec.requirements", e.to_string()))?;
    let parsed = pool
        .limits()
        .map_err(|e| ClusterError::invalid(id, "spec.limits", e.to_string()))?;
    let mut limits = PoolLimits {
        nodes: parsed.nodes,
        max_hourly_cost: parsed.max_hourly_cost,
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
    Ok(NodePoolSpec {
        name,
        cloud,
        weight: pool.weight(),
        requirements,
        labels: pool.spec.template.metadata.labels.clone(),
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
