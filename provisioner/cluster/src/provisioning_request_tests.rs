use super::*;
use crate::testing::ingest;

/// A PodTemplate as Kueue creates it (`ppt-<workload>-<podset>`), one GPU per pod.
fn template(name: &str) -> String {
    format!(
        "---
apiVersion: v1
kind: PodTemplate
metadata: {{name: {name}, namespace: team}}
template:
  metadata: {{labels: {{app: train}}}}
  spec:
    containers:
    - name: w
      image: trainer
      resources: {{requests: {{cpu: '4', nvidia.com/gpu: '1'}}, limits: {{nvidia.com/gpu: '1'}}}}
"
    )
}

fn request(name: &str, class: &str, sets: &[(&str, u32)], status: &str) -> String {
    let sets: String = sets
        .iter()
        .map(|(t, n)| format!("  - podTemplateRef: {{name: {t}}}\n    count: {n}\n"))
        .collect();
    format!(
        "---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {{name: {name}, namespace: team, generation: 2}}
spec:
  provisioningClassName: {class}
  parameters: {{ValidUntilSeconds: '600'}}
  podSets:
{sets}{status}"
    )
}

#[test]
fn best_effort_atomic_pods_are_one_gang_of_every_pod() {
    let yaml = format!(
        "{}{}{}",
        template("ppt-job-main-1"),
        template("ppt-job-workers-2"),
        request(
            "job-prov",
            CLASS_BEST_EFFORT_ATOMIC,
            &[("ppt-job-main-1", 1), ("ppt-job-workers-2", 3)],
            ""
        )
    );
    let ingested = ingest(&yaml);
    let pending = &ingested.snapshot.pending;
    assert_eq!(pending.len(), 4);
    for pod in pending {
        let gang = pod.gang.as_ref().expect("a gang");
        assert_eq!(gang.name, "team/provreq-job-prov");
        assert_eq!(gang.min_member, 4);
        assert_eq!(
            pod.labels.get(LABEL_REQUEST).map(String::as_str),
            Some("job-prov")
        );
        assert_eq!(pod.labels.get("app").map(String::as_str), Some("train"));
    }
    assert_eq!(pending[0].id, PodRef::new("team", "provreq-job-prov-0-0"));
    let r = &ingested.provisioning_requests[0];
    assert_eq!(r.class, ProvisioningClass::BestEffortAtomic);
    assert_eq!((r.total, r.pending.len(), r.consumed), (4, 4, 0));
    assert_eq!(r.generation, Some(2));
    assert!(r.check.is_empty() && r.problem.is_none());
}

#[test]
fn check_capacity_pods_are_checked_never_planned() {
    let yaml = format!(
        "{}{}",
        template("ppt-a"),
        request("check", CLASS_CHECK_CAPACITY, &[("ppt-a", 2)], "")
    );
    let ingested = ingest(&yaml);
    assert!(ingested.snapshot.pending.is_empty());
    let r = &ingested.provisioning_requests[0];
    assert_eq!(r.check.len(), 2);
    assert!(r.check.iter().all(|p| p.gang.is_none()));

    let provisioned = "status:
  conditions:
  - {type: Provisioned, status: 'True', reason: CapacityIsFound, message: found, lastTransitionTime: '2026-12-01T00:00:00Z'}
";
    let yaml = format!(
        "{}{}",
        template("ppt-a"),
        request("check", CLASS_CHECK_CAPACITY, &[("ppt-a", 2)], provisioned)
    );
    let ingested = ingest(&yaml);
    assert!(
        ingested.snapshot.pending.is_empty(),
        "nothing is ever bought for check-capacity"
    );
    assert_eq!(ingested.provisioning_requests[0].check.len(), 2);
}

#[test]
fn consumers_take_over_the_booked_pods_and_are_not_planned_again() {
    let consumer = |name: &str, node: &str| {
        format!(
            "---
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  namespace: team
  annotations: {{autoscaling.x-k8s.io/consume-provisioning-request: job-prov}}
spec:
  {node}
  containers: [{{name: w, resources: {{requests: {{cpu: '4'}}}}}}]
"
        )
    };
    let yaml = format!(
        "{}{}{}{}",
        template("ppt-w"),
        request("job-prov", CLASS_BEST_EFFORT_ATOMIC, &[("ppt-w", 3)], ""),
        consumer("bound", "nodeName: gpu-1"),
        consumer("waiting", "schedulerName: default-scheduler"),
    );
    let ingested = ingest(&yaml);
    let names: Vec<&str> = ingested
        .snapshot
        .pending
        .iter()
        .map(|p| p.id.name.as_str())
        .collect();
    assert_eq!(names, ["provreq-job-prov-0-1", "provreq-job-prov-0-2"]);
    assert_eq!(ingested.provisioning_requests[0].consumed, 1);
    assert!(
        ingested
            .notes
            .iter()
            .any(|n| n.starts_with("Pod/team/waiting: consumes a ProvisioningRequest")),
        "{:?}",
        ingested.notes
    );
}

#[test]
fn finished_requests_hold_nothing_and_their_consumers_are_plain_pods() {
    let expired = "status:
  conditions:
  - {type: BookingExpired, status: 'True', reason: CapacityReservationTimeExpired, message: x, lastTransitionTime: '2026-12-01T00:00:00Z'}
";
    let yaml = format!(
        "{}{}---
apiVersion: v1
kind: Pod
metadata:
  name: late
  namespace: team
  annotations: {{cluster-autoscaler.kubernetes.io/consume-provisioning-request: job-prov}}
spec:
  containers: [{{name: w}}]
",
        template("ppt-w"),
        request(
            "job-prov",
            CLASS_BEST_EFFORT_ATOMIC,
            &[("ppt-w", 3)],
            expired
        ),
    );
    let ingested = ingest(&yaml);
    let names: Vec<&str> = ingested
        .snapshot
        .pending
        .iter()
        .map(|p| p.id.name.as_str())
        .collect();
    assert_eq!(names, ["late"]);
    assert_eq!(ingested.provisioning_requests[0].total, 3);
}

#[test]
fn unknown_classes_and_missing_templates_are_problems_not_errors() {
    let yaml = format!(
        "{}{}{}",
        template("ppt-w"),
        request("queued", "example.com/queued", &[("ppt-w", 1)], ""),
        request("lost", CLASS_BEST_EFFORT_ATOMIC, &[("ppt-gone", 1)], ""),
    );
    let ingested = ingest(&yaml);
    assert!(ingested.snapshot.pending.is_empty());
    let problems: Vec<&str> = ingested
        .provisioning_requests
        .iter()
        .map(|r| r.problem.as_deref().unwrap_or_default())
        .collect();
    assert!(
        problems[0].starts_with("provisioningClassName \"example.com/queued\" is not served"),
        "{}",
        problems[0]
    );
    assert_eq!(
        problems[1],
        "spec.podSets[0].podTemplateRef.name: PodTemplate team/ppt-gone not found"
    );
    let bad = "---
apiVersion: autoscaling.x-k8s.io/v1
kind: ProvisioningRequest
metadata: {name: bad, namespace: team}
spec: {provisioningClassName: x, podSets: [{podTemplateRef: {name: a}, count: many}]}
";
    let ingested = ingest(bad);
    let problem = ingested.provisioning_requests[0].problem.clone().unwrap();
    assert!(
        problem.starts_with("ProvisioningRequest/team/bad: spec.podSets[0].count: invalid type"),
        "{problem}"
    );
}

#[test]
fn a_bound_consumer_handed_over_without_its_node_still_counts() {
    let pod: k8s_openapi::api::core::v1::Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "w0", "namespace": "team",
            "annotations": {CONSUME_ANNOTATION: "job-prov"}},
        "spec": {"nodeName": "n1", "containers": [{"name": "w"}]}
    }))
    .unwrap();
    let objects = crate::testing::objects(&format!(
        "{}{}",
        template("ppt-w"),
        request("job-prov", CLASS_BEST_EFFORT_ATOMIC, &[("ppt-w", 2)], "")
    ));
    let mut inputs: Vec<crate::Input<'_>> = objects.iter().map(crate::Input::from).collect();
    inputs.push(crate::Input::Unplaced {
        pod: &pod,
        bound: true,
    });
    let ingested = crate::snapshot(&inputs, crate::SnapshotOptions::default()).unwrap();
    assert_eq!(ingested.provisioning_requests[0].consumed, 1);
    let names: Vec<&str> = ingested
        .snapshot
        .pending
        .iter()
        .map(|p| p.id.name.as_str())
        .collect();
    assert_eq!(names, ["w0", "provreq-job-prov-0-1"]);
}

/// A GCP NodePool `name` of weight `weight` allowing `capacity_types`.
fn gcp_pool(name: &str, weight: u32, capacity_types: &str) -> String {
    format!(
        "---
apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {{name: {name}}}
spec:
  weight: {weight}
  template:
    spec:
      nodeClassRef: {{group: quartermaster.dev, kind: GCPNodeClass, name: training}}
      requirements:
      - {{key: karpenter.sh/capacity-type, operator: In, values: [{capacity_types}]}}
      - {{key: node.kubernetes.io/instance-type, operator: In, values: [a2-highgpu-1g]}}
"
    )
}

fn queued_request(pools: &str) -> crate::Ingested {
    let yaml = format!(
        "{pools}{}{}",
        template("ppt-tune"),
        request("tune", CLASS_QUEUED_PROVISIONING, &[("ppt-tune", 2)], "")
    );
    ingest(&yaml)
}

#[test]
fn queued_provisioning_is_atomic_and_prefers_flex_start_where_a_pool_opts_in() {
    assert_eq!(
        ProvisioningClass::parse("queued-provisioning.gke.io"),
        ProvisioningClass::QueuedProvisioning
    );
    assert!(ProvisioningClass::QueuedProvisioning.is_atomic());
    let ingested = queued_request(&format!(
        "{}{}",
        gcp_pool("on-demand", 50, "on-demand"),
        gcp_pool("flex", 1, "flex-start, on-demand")
    ));
    let r = &ingested.provisioning_requests[0];
    assert_eq!(r.class, ProvisioningClass::QueuedProvisioning);
    assert!(r.problem.is_none() && r.note.is_none(), "{r:?}");
    assert_eq!(r.pending.len(), 2);
    let pending = &ingested.snapshot.pending;
    assert_eq!(pending.len(), 2);
    for pod in pending {
        assert_eq!(pod.gang.as_ref().map(|g| g.min_member), Some(2));
        assert_eq!(pod.preferred_node_terms.len(), 1, "{pod:?}");
        let term = &pod.preferred_node_terms[0];
        assert_eq!(term.weight, FLEX_START_PREFERENCE_WEIGHT);
        assert_eq!(
            term.requirements.to_string(),
            "quartermaster.dev/capacity-type In [flex-start]"
        );
    }
    // Planned on flex-start in the pool that opts in, though the other one weighs more.
    let catalog = quartermaster_solver::flex_start::catalog_for(
        quartermaster_pricing::Catalog::embedded(),
        &ingested.snapshot.node_pools,
    );
    let plan = quartermaster_solver::solve(&ingested.snapshot, &catalog, Default::default());
    assert!(plan.unschedulable.is_empty(), "{plan:?}");
    assert!(!plan.new_nodes.is_empty());
    for node in &plan.new_nodes {
        assert_eq!(node.node_pool, "flex", "{node:?}");
        assert_eq!(
            node.offering.capacity_type,
            quartermaster_pricing::CapacityType::FlexStart
        );
    }
}

#[test]
fn queued_provisioning_without_a_flex_start_pool_is_best_effort_atomic_and_says_why() {
    let ingested = queued_request(&gcp_pool("on-demand", 1, "on-demand, spot"));
    let r = &ingested.provisioning_requests[0];
    assert!(r.problem.is_none(), "served, not failed: {r:?}");
    let note = r.note.as_deref().expect("a note");
    assert!(
        note.starts_with("no NodePool its pods may use opts in to flex-start"),
        "{note}"
    );
    assert!(
        ingested.notes.iter().any(|n| n.starts_with(
            "ProvisioningRequest/team/tune (queued-provisioning.gke.io): no NodePool"
        )),
        "{:?}",
        ingested.notes
    );
    for pod in &ingested.snapshot.pending {
        assert!(pod.preferred_node_terms.is_empty(), "{pod:?}");
        assert_eq!(pod.gang.as_ref().map(|g| g.min_member), Some(2));
    }
}
