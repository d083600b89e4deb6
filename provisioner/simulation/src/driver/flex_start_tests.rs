//! Flex-start capacity in a run: queued launches, the drain before the seven-day run ends,
//! the summary's keys, and the same scenario without it.

use chrono::TimeDelta;
use quartermaster_pricing::CapacityType;

use crate::scenario::Scenario;

/// A GCP NodePool of a2-highgpu-1g allowing `capacity` and one checkpointed 1-GPU job of
/// `duration` arriving at 10 minutes; eight days.
fn scenario(capacity: &str, duration: &str) -> Scenario {
    let text = format!(
        "apiVersion: quartermaster.dev/v1alpha1
kind: Scenario
metadata: {{name: flex}}
spec:
  duration: 8d
  seed: 3
  nodePools:
    - apiVersion: quartermaster.dev/v1
      kind: NodePool
      metadata: {{name: train}}
      spec:
        template:
          spec:
            nodeClassRef: {{group: quartermaster.dev, kind: GCPNodeClass, name: default}}
            requirements:
              - {{key: node.kubernetes.io/instance-type, operator: In, values: [a2-highgpu-1g]}}
              - {{key: karpenter.sh/capacity-type, operator: In, values: {capacity}}}
        disruption: {{consolidationPolicy: WhenEmpty, consolidateAfter: 2m}}
  workload:
    - name: tune
      kind: Job
      arrivals: [{{at: 10m}}]
      duration: {duration}
      checkpointed: true
      template:
        spec:
          containers: [{{name: c, resources: {{requests: {{cpu: '4', memory: 16Gi}}, limits: {{nvidia.com/gpu: 1}}}}}}]
"
    );
    Scenario::parse("flex.yaml", &text, None).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_flex_start_node_waits_in_the_queue_and_is_drained_before_its_run_ends() {
    let s = scenario("[flex-start, on-demand]", "7d12h");
    let sim = crate::simulate(&s, None, None).unwrap();
    let rec = &sim.run.record;
    let pod = &rec.pods[0];
    // Batch (1 s) + the queue (5 min) + launch (40 s) + registration (30 s) + plugin (45 s).
    assert_eq!(
        pod.first_bound.unwrap() - pod.created,
        TimeDelta::seconds(1 + 300 + 40 + 30 + 45)
    );
    assert!(pod.completed, "the job moved and finished: {pod:?}");
    assert_eq!(pod.evictions, 1, "moved once, off the drained node");
    let flex: Vec<_> = rec
        .instances
        .iter()
        .filter(|i| i.capacity_type == CapacityType::FlexStart)
        .collect();
    assert_eq!(flex.len(), 2, "{:?}", rec.instances);
    assert_eq!(rec.instances.len(), 2, "nothing else was bought");
    // Billed from the end of its queue wait (5 minutes after the launch at 10m + 1 s), as
    // Compute Engine bills a flex-start VM from when it runs.
    assert_eq!(
        flex[0].start,
        s.start + TimeDelta::minutes(10) + TimeDelta::seconds(1) + TimeDelta::minutes(5)
    );
    // The first node went before its seven days (counted from the launch) ran out.
    let first = flex[0];
    let end = first.end.expect("the first node is gone");
    assert!(end <= first.start + TimeDelta::days(7), "{first:?}");
    assert!(end >= first.start + TimeDelta::days(7) - TimeDelta::minutes(40));
    let v = sim.summary.to_json();
    assert_eq!(v["engine"]["flex_start_drains"], 1, "{v}");
    assert_eq!(v["flex_start_launches"], 2);
    assert_eq!(v["flex_start_reclaims"], 0, "the engine drained first");
    let cost = v["flex_start_cost"].as_f64().unwrap();
    assert!(cost > 0.0);
    assert_eq!(v["flex_start_cost"], v["total_cost"]);
    assert_eq!(
        v["cost_by_capacity_type"]["flex-start"],
        v["flex_start_cost"]
    );
    assert!(sim.summary.broken_invariants().is_empty());

    // Without flex-start: the same work on on-demand, at twice the price, at once.
    let without = crate::simulate(&s.without_flex_start(), None, None).unwrap();
    let w = without.summary.to_json();
    assert_eq!(w["flex_start_launches"], 0, "{w}");
    assert_eq!(w["flex_start_cost"].to_string(), "0.0", "not -0.0");
    assert_eq!(w["engine"]["flex_start_drains"], 0);
    assert!(w["total_cost"].as_f64().unwrap() > 1.9 * cost, "{w}");
    assert!(
        w["pending_seconds_max"].as_f64().unwrap() < v["pending_seconds_max"].as_f64().unwrap()
    );
}

#[test]
fn a_pool_that_does_not_opt_in_never_launches_flex_start() {
    let s = scenario("[on-demand, spot]", "2h");
    let sim = crate::simulate(&s, None, None).unwrap();
    assert!(
        sim.run
            .record
            .instances
            .iter()
            .all(|i| i.capacity_type != CapacityType::FlexStart)
    );
    assert_eq!(sim.summary.flex_start_launches, 0);
}

#[test]
fn without_flex_start_takes_it_out_of_every_pool() {
    let s = scenario("[flex-start]", "2h");
    let without = s.without_flex_start();
    let text = serde_json::to_string(&without.node_pools).unwrap();
    assert!(!text.contains("flex-start"), "{text}");
    assert!(text.contains("\"values\":[\"on-demand\"]"), "{text}");
    let s = scenario("[flex-start, spot]", "2h");
    let text = serde_json::to_string(&s.without_flex_start().node_pools).unwrap();
    assert!(text.contains("\"values\":[\"spot\"]"), "{text}");
}

#[test]
fn the_shipped_flex_start_scenario_loads() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/flex-start-training.yaml");
    let s = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.cloud.flex_start.wait.for_family("a3").as_secs(), 1500);
    s.without_flex_start();
}
