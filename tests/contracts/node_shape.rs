//! What a NodePool and its NodeClass change about a node: shared GPUs (time-slicing, MIG) and
//! the root volume that holds ephemeral storage. Built on real workloads where there is one.

use quartermaster_tests::{quartermaster, workspace_root};
use serde_json::Value;

fn scratch(name: &str, text: &str) -> String {
    let dir = std::env::temp_dir().join(format!("qm-node-shape-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn plan(files: &[&str]) -> Value {
    let mut args = vec!["plan"];
    for f in files {
        args.extend(["-f", f]);
    }
    args.extend(["-o", "json"]);
    let out = quartermaster(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json()
}

fn gpu_pool(name: &str, sharing: &str, extra_requirement: &str) -> String {
    format!(
        "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  template:
    spec:
      nodeClassRef: {{group: quartermaster.dev, kind: AWSNodeClass, name: {name}}}
      requirements:
        - {{key: quartermaster.dev/capacity-type, operator: In, values: [on-demand]}}
        {extra_requirement}
      gpuSharing: {sharing}
---
apiVersion: quartermaster.dev/v1
kind: AWSNodeClass
metadata: {{name: {name}}}
spec:
  role: KarpenterNodeRole
  amiSelectorTerms: [{{alias: al2023@latest}}]
  subnetSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
  securityGroupSelectorTerms: [{{tags: {{karpenter.sh/discovery: demo}}}}]
"
    )
}

fn pods(name: &str, replicas: u32, resource: &str) -> String {
    format!(
        "apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}}}
spec:
  replicas: {replicas}
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      containers:
      - name: c
        resources: {{limits: {{{resource}: 1}}, requests: {{cpu: 500m, memory: 2Gi}}}}
"
    )
}

#[test]
fn four_time_sliced_pods_start_one_node_not_four() {
    // kubernetes-sigs/karpenter#729, Azure/AKS#3427.
    let pool = scratch(
        "ts-pool.yaml",
        &gpu_pool(
            "ts",
            "{strategy: time-slicing, replicas: 4}",
            "- {key: karpenter.k8s.aws/instance-gpu-name, operator: In, values: [a10g]}",
        ),
    );
    let work = scratch("ts-pods.yaml", &pods("infer", 4, "nvidia.com/gpu"));
    let p = plan(&[&pool, &work]);
    let nodes = p["new_nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{p:#}");
    assert_eq!(nodes[0]["pods"].as_array().unwrap().len(), 4);
}

#[test]
fn mig_slices_are_counted_per_layout_and_a_gpu_without_mig_is_named() {
    // p4d.24xlarge: 8 × A100-40GB, `all-1g.5gb` = 7 slices each: 20 one-slice pods on one node.
    let pool = scratch(
        "mig-pool.yaml",
        &gpu_pool(
            "mig",
            "{strategy: mig, migConfig: all-1g.5gb}",
            "- {key: node.kubernetes.io/instance-type, operator: In, values: [p4d.24xlarge]}",
        ),
    );
    let work = scratch("mig-pods.yaml", &pods("slice", 20, "nvidia.com/mig-1g.5gb"));
    let p = plan(&[&pool, &work]);
    let nodes = p["new_nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{p:#}");
    assert_eq!(nodes[0]["instance_type"], "p4d.24xlarge");
    assert_eq!(nodes[0]["pods"].as_array().unwrap().len(), 20);

    let a10g = scratch(
        "mig-a10g.yaml",
        &gpu_pool(
            "nomig",
            "{strategy: mig, migConfig: all-1g.5gb}",
            "- {key: karpenter.k8s.aws/instance-gpu-name, operator: In, values: [a10g]}",
        ),
    );
    let p = plan(&[&a10g, &work]);
    assert!(p["new_nodes"].as_array().unwrap().is_empty(), "{p:#}");
    assert!(
        p["notes"].as_array().unwrap().iter().any(|n| n
            .as_str()
            .unwrap()
            .contains("its gpuSharing applies to none of the")
            && n.as_str().unwrap().contains("has no MIG")),
        "{p:#}"
    );
}

#[test]
fn gemma_27b_plans_once_the_gke_boot_disk_holds_its_ephemeral_storage() {
    // The real GKE sample asks 120Gi of ephemeral storage; GKE keeps it on the boot disk, so a
    // GCPNodeClass with a 200 GiB disk serves it on an A100 80GB machine.
    let pool = scratch(
        "gke-pool.yaml",
        "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: gke-gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: GCPNodeClass, name: big-disk}
---
apiVersion: quartermaster.dev/v1
kind: GCPNodeClass
metadata: {name: big-disk}
spec:
  project: corpus
  region: us-central1
  image: {project: cos-cloud, family: cos-stable}
  disk: {sizeGiB: 200}
",
    );
    let gemma = workspace_root()
        .join("../shared/real-world/workloads/gke-vllm-3-27b-it.yaml")
        .display()
        .to_string();
    let p = plan(&[&pool, &gemma]);
    assert!(p["unschedulable"].as_array().unwrap().is_empty(), "{p:#}");
    let nodes = p["new_nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{p:#}");
    assert!(
        nodes[0]["instance_type"]
            .as_str()
            .unwrap()
            .starts_with("a2-ultragpu-"),
        "{p:#}"
    );
}

#[test]
fn time_sliced_pods_from_zero_start_the_right_node_count() {
    // g5.xlarge only (1 × A10G), 4 replicas per GPU: 9 pods need ⌈9 / 4⌉ = 3 nodes.
    let pool = scratch(
        "ts3-pool.yaml",
        &gpu_pool(
            "ts3",
            "{strategy: time-slicing, replicas: 4}",
            "- {key: node.kubernetes.io/instance-type, operator: In, values: [g5.xlarge]}",
        ),
    );
    let work = scratch("ts3-pods.yaml", &pods("infer", 9, "nvidia.com/gpu"));
    let p = plan(&[&pool, &work]);
    let nodes = p["new_nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "{p:#}");
    let mut per_node: Vec<usize> = nodes
        .iter()
        .map(|n| n["pods"].as_array().unwrap().len())
        .collect();
    per_node.sort();
    assert_eq!(per_node, [1, 4, 4], "{p:#}");
}

#[test]
fn mig_pods_from_zero_start_the_right_node_count() {
    // all-1g.5gb on p4d.24xlarge: 56 slices per node; 60 one-slice pods need two nodes.
    let pool = scratch(
        "mig2-pool.yaml",
        &gpu_pool(
            "mig2",
            "{strategy: mig, migConfig: all-1g.5gb}",
            "- {key: node.kubernetes.io/instance-type, operator: In, values: [p4d.24xlarge]}",
        ),
    );
    let work = scratch(
        "mig2-pods.yaml",
        &pods("slice", 60, "nvidia.com/mig-1g.5gb"),
    );
    let p = plan(&[&pool, &work]);
    let nodes = p["new_nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 2, "{p:#}");
    assert!(p["unschedulable"].as_array().unwrap().is_empty(), "{p:#}");
}

#[test]
fn a_mig_pool_without_a_layout_covers_a_mix_of_slices_with_one_node() {
    // No migConfig: the solver chooses all-balanced (16 × 1g.5gb, 8 × 2g.10gb, 8 × 3g.20gb per
    // p4d.24xlarge), so 16 one-slice and 8 three-slice pods share one node; with a named
    // single-profile layout per pool they would need two.
    let pool = scratch(
        "migauto-pool.yaml",
        &gpu_pool(
            "migauto",
            "{strategy: mig}",
            "- {key: node.kubernetes.io/instance-type, operator: In, values: [p4d.24xlarge]}",
        ),
    );
    let small = scratch(
        "migauto-1g.yaml",
        &pods("small", 16, "nvidia.com/mig-1g.5gb"),
    );
    let large = scratch(
        "migauto-3g.yaml",
        &pods("large", 8, "nvidia.com/mig-3g.20gb"),
    );
    let p = plan(&[&pool, &small, &large]);
    let nodes = p["new_nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 1, "{p:#}");
    assert_eq!(nodes[0]["instance_type"], "p4d.24xlarge");
    assert_eq!(nodes[0]["pods"].as_array().unwrap().len(), 24);
    assert_eq!(nodes[0]["mig_config"], "all-balanced", "{p:#}");
}
