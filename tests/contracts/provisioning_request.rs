//! ProvisioningRequests in `plan`, in the shape Kueue's ProvisioningRequest admission check
//! creates them (PodTemplates `ppt-<workload>-<check>-<attempt>-<podset>`):
//! best-effort-atomic buys every node of the request or none, check-capacity answers from the
//! given nodes and buys nothing, queued-provisioning (GKE) is best-effort-atomic on flex-start
//! capacity where a NodePool opts in.

use quartermaster_tests::quartermaster;
use serde_json::Value;

const POOL: &str = "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: gpu}
spec:
  LIMITS
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: gpu}
      requirements:
        - {key: quartermaster.dev/capacity-type, operator: In, values: [on-demand]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [g5.xlarge, m6i.xlarge]}
";

fn template(name: &str, cpu: &str, gpu: u32) -> String {
    format!(
        "---
apiVersion: v1
kind: PodTemplate
metadata:
  name: {name}
  namespace: team-a
  labels: {{kueue.x-k8s.io/managed: 'true'}}
template:
  metadata: {{labels: {{app: trainer}}}}
  spec:
    restartPolicy: Never
    containers:
    - name: main
      image: registry.example/trainer:1
      resources:
        requests: {{cpu: '{cpu}', memory: 4Gi, nvidia.com/gpu: '{gpu}'}}
        limits: {{nvidia.com/gpu: '{gpu}'}}
"
    )
}

fn request(name: &str, class: &str, template: &str, count: u32) -> String {
    format!(
        "---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata:
  name: {name}
  namespace: team-a
  labels: {{kueue.x-k8s.io/managed: 'true'}}
spec:
  provisioningClassName: {class}
  parameters: {{ValidUntilSeconds: '0'}}
  podSets:
  - podTemplateRef: {{name: {template}}}
    count: {count}
"
    )
}

/// A node already in the cluster with 8 CPUs free.
const NODE: &str = "---
apiVersion: v1
kind: Node
metadata:
  name: existing-1
  labels: {node.kubernetes.io/instance-type: m6i.2xlarge, topology.kubernetes.io/zone: us-east-1a}
status:
  allocatable: {cpu: '8', memory: 30Gi, pods: '110'}
  capacity: {cpu: '8', memory: 32Gi, pods: '110'}
";

fn plan(name: &str, limits: &str, docs: &str) -> Value {
    let dir = std::env::temp_dir().join(format!("qm-provreq-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pool = dir.join(format!("{name}-pool.yaml"));
    std::fs::write(&pool, POOL.replace("LIMITS", limits)).unwrap();
    let objects = dir.join(format!("{name}.yaml"));
    std::fs::write(&objects, docs).unwrap();
    let (pool, objects) = (pool.display().to_string(), objects.display().to_string());
    let out = quartermaster(&["plan", "-f", &pool, "-f", &objects, "-o", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.json()
}

fn answer(p: &Value) -> &Value {
    let requests = p["provisioning_requests"].as_array().expect("an array");
    assert_eq!(requests.len(), 1, "{p:#}");
    &requests[0]
}

#[test]
fn best_effort_atomic_buys_all_nodes_together() {
    let docs = template("ppt-job-trainer-prov-1-main", "2", 1)
        + &request(
            "job-trainer-prov-1",
            "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
            "ppt-job-trainer-prov-1-main",
            3,
        );
    let p = plan("atomic", "limits: {}", &docs);
    let a = answer(&p);
    assert_eq!(a["verdict"], "provisioned", "{p:#}");
    assert_eq!(a["new_nodes"], 3, "{p:#}");
    assert_eq!(p["new_nodes"].as_array().unwrap().len(), 3, "{p:#}");
}

#[test]
fn best_effort_atomic_buys_nothing_when_not_every_pod_fits() {
    let docs = template("ppt-job-trainer-prov-1-main", "2", 1)
        + &request(
            "job-trainer-prov-1",
            "best-effort-atomic-scale-up.autoscaling.x-k8s.io",
            "ppt-job-trainer-prov-1-main",
            3,
        );
    let p = plan("atomic-limited", "limits: {nodes: 2}", &docs);
    let a = answer(&p);
    assert_eq!(a["verdict"], "not-found", "{p:#}");
    assert!(
        a["reason"]
            .as_str()
            .unwrap()
            .starts_with("no node bought: "),
        "{p:#}"
    );
    assert!(p["new_nodes"].as_array().unwrap().is_empty(), "{p:#}");
}

#[test]
fn check_capacity_answers_from_existing_nodes_and_buys_nothing() {
    let fits = template("ppt-job-small-check-1-main", "2", 0)
        + &request(
            "job-small-check-1",
            "check-capacity.autoscaling.x-k8s.io",
            "ppt-job-small-check-1-main",
            3,
        )
        + NODE;
    let p = plan("check-fits", "limits: {}", &fits);
    assert_eq!(answer(&p)["verdict"], "provisioned", "{p:#}");
    assert!(p["new_nodes"].as_array().unwrap().is_empty(), "{p:#}");

    let too_big = template("ppt-job-big-check-1-main", "4", 0)
        + &request(
            "job-big-check-1",
            "check-capacity.autoscaling.x-k8s.io",
            "ppt-job-big-check-1-main",
            3,
        )
        + NODE;
    let p = plan("check-too-big", "limits: {}", &too_big);
    let a = answer(&p);
    assert_eq!(a["verdict"], "not-found", "{p:#}");
    assert!(p["new_nodes"].as_array().unwrap().is_empty(), "{p:#}");
}

#[test]
fn other_classes_are_not_served() {
    let docs = template("ppt-job-q-1-main", "2", 1)
        + &request(
            "job-q-1",
            "example.com/some-other-class",
            "ppt-job-q-1-main",
            1,
        );
    let p = plan("other", "limits: {}", &docs);
    let a = answer(&p);
    assert_eq!(a["verdict"], "failed", "{p:#}");
    assert!(
        a["reason"]
            .as_str()
            .unwrap()
            .contains("is not served by Quartermaster"),
        "{p:#}"
    );
}

/// A GCP NodePool of a2-highgpu-1g that opts in to flex-start.
const FLEX_POOL: &str = "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: flex}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: GCPNodeClass, name: training}
      requirements:
        - {key: karpenter.sh/capacity-type, operator: In, values: [flex-start, on-demand]}
        - {key: node.kubernetes.io/instance-type, operator: In, values: [a2-highgpu-1g]}
";

#[test]
fn queued_provisioning_buys_flex_start_nodes_where_a_pool_opts_in() {
    let docs = template("ppt-job-q-1-main", "2", 1)
        + &request(
            "job-q-1",
            "queued-provisioning.gke.io",
            "ppt-job-q-1-main",
            2,
        );
    let dir = std::env::temp_dir().join(format!("qm-provreq-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pool = dir.join("queued-flex-pool.yaml");
    std::fs::write(&pool, FLEX_POOL).unwrap();
    let objects = dir.join("queued-flex.yaml");
    std::fs::write(&objects, &docs).unwrap();
    let (pool, objects) = (pool.display().to_string(), objects.display().to_string());
    let out = quartermaster(&["plan", "-f", &pool, "-f", &objects, "-o", "json"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let p = out.json();
    let a = answer(&p);
    assert_eq!(a["class"], "queued-provisioning", "{p:#}");
    assert_eq!(a["verdict"], "provisioned", "{p:#}");
    assert_eq!(a["new_nodes"], 2, "{p:#}");
    for node in p["new_nodes"].as_array().unwrap() {
        assert_eq!(node["capacity_type"], "flex-start", "{p:#}");
    }

    // No pool opts in: best-effort-atomic on what the pool allows, and the answer says why.
    let p = plan("queued-on-demand", "limits: {}", &docs);
    let a = answer(&p);
    assert_eq!(a["verdict"], "provisioned", "{p:#}");
    assert_eq!(a["new_nodes"], 2, "{p:#}");
    assert!(
        a["reason"]
            .as_str()
            .unwrap()
            .contains("no NodePool its pods may use opts in to flex-start"),
        "{p:#}"
    );
    for node in p["new_nodes"].as_array().unwrap() {
        assert_eq!(node["capacity_type"], "on-demand", "{p:#}");
    }
}
