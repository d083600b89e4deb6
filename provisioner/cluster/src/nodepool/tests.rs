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
    crate::snapshot(
        &objects,
        crate::SnapshotOptions::priced(&regional_catalog()).in_region(cluster),
    )
    .map_err(|e| e.to_string())
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
    let plain = crate::snapshot(
        &objects,
        crate::SnapshotOptions::priced(&regional_catalog()),
    )
    .unwrap();
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
