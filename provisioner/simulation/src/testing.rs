//! Test helpers: tiny scenarios.

use crate::scenario::Scenario;

/// A scenario with one GCP L4 NodePool (`capacity`: `[spot]`, `[on-demand]` or both), the given
/// `cloud:` section and workloads (YAML list items indented by four spaces).
pub(crate) fn scenario(duration: &str, capacity: &str, cloud: &str, workload: &str) -> Scenario {
    let text = scenario_text(duration, capacity, cloud, workload);
    Scenario::parse("tiny.yaml", &text, None).unwrap_or_else(|e| panic!("{e}"))
}

/// The text of [`scenario`], for edits.
pub(crate) fn scenario_text(duration: &str, capacity: &str, cloud: &str, workload: &str) -> String {
    format!(
        "apiVersion: quartermaster.dev/v1alpha1
kind: Scenario
metadata: {{name: tiny}}
spec:
  duration: {duration}
  seed: 3
  nodePools:
    - apiVersion: quartermaster.dev/v1
      kind: NodePool
      metadata: {{name: gpu}}
      spec:
        template:
          spec:
            nodeClassRef: {{group: quartermaster.dev, kind: GCPNodeClass, name: default}}
            requirements:
              - {{key: quartermaster.dev/instance-family, operator: In, values: [g2, n2]}}
              - {{key: quartermaster.dev/capacity-type, operator: In, values: {capacity}}}
            startupTaints:
              - {{key: node.quartermaster.dev/initializing, effect: NoSchedule}}
        disruption: {{consolidationPolicy: WhenEmpty, consolidateAfter: 2m}}
  cloud: {cloud}
  workload:
{workload}"
    )
}

/// One Job workload of 1-GPU pods.
pub(crate) fn gpu_job(name: &str, arrivals: &str, duration: &str, checkpointed: bool) -> String {
    format!(
        "    - name: {name}
      kind: Job
      arrivals: {arrivals}
      duration: {duration}
      checkpointed: {checkpointed}
      template:
        spec:
          containers: [{{name: c, resources: {{requests: {{cpu: '2', memory: 8Gi}}, limits: {{nvidia.com/gpu: 1}}}}}}]
"
    )
}
