//! Scenario parsing and validation: every error names the file and the field path.

use super::*;

/// A valid scenario: one g5 NodePool, one Job workload.
pub(crate) const BASE: &str = "apiVersion: quartermaster.dev/v1alpha1
kind: Scenario
metadata: {name: t}
spec:
  duration: 2h
  nodePools:
    - apiVersion: quartermaster.dev/v1
      kind: NodePool
      metadata: {name: gpu}
      spec:
        template:
          spec:
            nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: default}
            requirements:
              - {key: quartermaster.dev/instance-family, operator: In, values: [g5]}
  workload:
    - name: train
      kind: Job
      arrivals: [{at: 5m}]
      duration: 30m
      template:
        spec:
          containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]
";

fn error(text: &str) -> String {
    match Scenario::parse("x.yaml", text, None) {
        Ok(_) => panic!("expected an error for:\n{text}"),
        Err(e) => e.to_string(),
    }
}

fn edited(from: &str, to: &str) -> String {
    assert!(BASE.contains(from), "{from}");
    BASE.replacen(from, to, 1)
}

#[test]
fn the_base_and_the_embedded_default_are_valid() {
    let s = Scenario::parse("x.yaml", BASE, None).unwrap();
    assert_eq!(s.name, "t");
    assert_eq!(s.seed, DEFAULT_SEED);
    assert_eq!(s.start.to_rfc3339(), "2026-01-05T00:00:00+00:00");
    assert_eq!(s.duration, TimeDelta::hours(2));
    let d = Scenario::embedded_default().unwrap();
    assert_eq!(d.name, "default");
    assert!(d.workloads.len() >= 2);
}

#[test]
fn unknown_fields_name_their_path() {
    assert_eq!(
        error(&edited(
            "      kind: Job\n",
            "      kind: Job\n      parallelizm: 2\n"
        )),
        "x.yaml: spec.workload[0].parallelizm: unknown field `parallelizm`, expected one of \
         `name`, `namespace`, `kind`, `template`, `arrivals`, `parallelism`, `duration`, \
         `checkpointed`, `gang`, `replicas`, `schedule`, `diurnal`, `maxUnavailable` at line 19 column 7"
    );
    let e = error(&edited(
        "  duration: 2h\n",
        "  duration: 2h\n  cloud: {interruptions: {spotRate: 1}}\n",
    ));
    assert!(
        e.starts_with("x.yaml: spec.cloud.interruptions.spotRate: unknown field `spotRate`"),
        "{e}"
    );
    let e = error(&edited(
        "arrivals: [{at: 5m}]",
        "arrivals: [{at: 5m, jitter: 1s}]",
    ));
    assert!(
        e.starts_with("x.yaml: spec.workload[0].arrivals[0].jitter: unknown field `jitter`"),
        "{e}"
    );
}

#[test]
fn bad_durations_name_their_path() {
    let e = error(&edited("duration: 30m", "duration: -5m"));
    assert!(
        e.starts_with(
            "x.yaml: spec.workload[0].duration: invalid duration \"-5m\": negative durations are not allowed"
        ),
        "{e}"
    );
    assert_eq!(
        error(&edited("duration: 30m", "duration: 0s")),
        "x.yaml: spec.workload[0].duration: must be a positive duration, got 0"
    );
    assert_eq!(
        error(&edited("duration: 30m", "duration: {min: 0s, max: 1h}")),
        "x.yaml: spec.workload[0].duration.min: must be a positive duration, got 0"
    );
    assert_eq!(
        error(&edited("duration: 30m", "duration: {median: 1h, p90: 30m}")),
        "x.yaml: spec.workload[0].duration.p90: must be above the median (30m <= 1h)"
    );
    assert!(
        error(&edited("duration: 30m", "duration: {min: 1h}"))
            .starts_with("x.yaml: spec.workload[0].duration: give either {min, max}")
    );
    assert_eq!(
        error(&edited("  duration: 2h\n", "  duration: 0\n")),
        "x.yaml: spec.duration: must be a positive duration, got 0"
    );
    assert!(
        error(&edited("[{at: 5m}]", "[{at: soon}]"))
            .starts_with("x.yaml: spec.workload[0].arrivals[0].at: invalid duration \"soon\"")
    );
}

#[test]
fn workload_rules_name_their_path() {
    assert_eq!(
        error(&edited("      kind: Job\n", "      kind: CronJob\n")),
        "x.yaml: spec.workload[0].kind: unknown workload kind \"CronJob\": expected Job or Deployment"
    );
    assert_eq!(
        error(&edited(
            "      kind: Job\n",
            "      kind: Job\n      replicas: 2\n"
        )),
        "x.yaml: spec.workload[0].replicas: not a field of kind Job"
    );
    assert_eq!(
        error(&edited("[{at: 5m}]", "[{at: 5m, every: 1h}]")),
        "x.yaml: spec.workload[0].arrivals[0]: give exactly one of at, every (with count or until) or ratePerHour"
    );
    assert_eq!(
        error(&edited("[{at: 5m}]", "[{ratePerHour: -2}]")),
        "x.yaml: spec.workload[0].arrivals[0].ratePerHour: must be a positive number, got -2"
    );
    let twice = BASE.to_owned()
        + "    - name: train
      kind: Deployment
      replicas: 1
      template: {spec: {containers: [{name: c}]}}
";
    assert_eq!(
        error(&twice),
        "x.yaml: spec.workload[1].name: duplicate workload name \"train\" (also spec.workload[0])"
    );
    assert_eq!(
        error(&edited(
            "apiVersion: quartermaster.dev/v1alpha1",
            "apiVersion: v1"
        )),
        "x.yaml: apiVersion: expected quartermaster.dev/v1alpha1, got \"v1\""
    );
}

#[test]
fn kubernetes_objects_are_checked_with_their_path() {
    assert_eq!(
        error(&edited("operator: In", "operator: Inn")),
        "x.yaml: spec.nodePools[0].spec.template.spec.requirements[0].operator: unknown operator \"Inn\": expected one of In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte"
    );
    assert_eq!(
        error(&edited(
            "limits: {nvidia.com/gpu: 1}",
            "requests: {cpu: lots}"
        )),
        "x.yaml: spec.workload[0].template.spec.containers[0].resources.requests.cpu: invalid quantity \"lots\": expected a number"
    );
    assert_eq!(
        error(&edited(
            "  duration: 2h\n",
            "  duration: 2h\n  cloud: {interruptions: {spotRatePerHour: -1}}\n"
        )),
        "x.yaml: spec.cloud.interruptions.spotRatePerHour: must be a finite number >= 0, got -1"
    );
}

#[test]
fn a_pod_no_node_pool_can_serve_is_rejected_with_the_solver_reason() {
    assert_eq!(
        error(&edited("nvidia.com/gpu: 1", "nvidia.com/gpu: 16")),
        "x.yaml: spec.workload[0].template: no NodePool can ever run this pod: requests 16 nvidia.com/gpu; the largest compatible instance type has 8"
    );
    let e = error(&edited(
        "containers: [{name: c,",
        "nodeSelector: {topology.kubernetes.io/zone: mars-1a}\n          containers: [{name: c,",
    ));
    assert!(
        e.starts_with(
            "x.yaml: spec.workload[0].template: no NodePool can ever run this pod: no instance type"
        ),
        "{e}"
    );
}

#[test]
fn a_node_pool_without_any_offering_is_rejected() {
    assert_eq!(
        error(&edited("values: [g5]", "values: [zz9]")),
        "x.yaml: spec.nodePools[0]: the catalog has no aws offering that NodePool gpu allows (check its requirements)"
    );
}

#[test]
fn the_on_demand_baseline_pins_every_pool_to_on_demand() {
    let s = Scenario::parse(
        "x.yaml",
        &edited(
            "values: [g5]}",
            "values: [g5, p4d]}\n              - {key: quartermaster.dev/capacity-type, operator: In, values: [spot]}",
        ),
        None,
    )
    .unwrap();
    let od = s.on_demand_only();
    let reqs = od.node_pools[0]
        .pointer("/spec/template/spec/requirements")
        .unwrap()
        .as_array()
        .unwrap();
    let capacity: Vec<&Value> = reqs
        .iter()
        .filter(|r| r["key"].as_str().unwrap().ends_with("capacity-type"))
        .collect();
    assert_eq!(capacity.len(), 1);
    assert_eq!(capacity[0]["key"], "quartermaster.dev/capacity-type");
    assert_eq!(capacity[0]["values"], serde_json::json!(["on-demand"]));
    assert_eq!(reqs.len(), 2);
}

#[test]
fn a_runaway_arrival_rate_is_an_error_before_anything_is_generated() {
    let e = error(&edited(
        "arrivals: [{at: 5m}]",
        "arrivals: [{every: 1s, burst: 1000}]",
    ));
    assert_eq!(
        e,
        "x.yaml: spec.workload[0]: would create about 7200000 pods in all (at most 1000000 in one simulation)"
    );
}

#[test]
fn changes_pdbs_and_measure_at_are_checked_with_their_path() {
    let with = |extra: &str| edited("  workload:\n", &format!("{extra}  workload:\n"));
    let e = error(&with(
        "  changes:\n    - {at: 3h, prices: [{instanceType: g5.xlarge, factor: 0.5}]}\n",
    ));
    assert!(
        e.contains("spec.changes[0].at: after the end of the run"),
        "{e}"
    );
    let e = error(&with(
        "  changes:\n    - {at: 1h, prices: [{instanceType: g5.xlarge, factor: 0}]}\n",
    ));
    assert!(
        e.contains("spec.changes[0].prices[0].factor: must be a positive number"),
        "{e}"
    );
    let e = error(&with(
        "  changes:\n    - {at: 1h, prices: [{instanceType: g5.xlarge, capacityType: reserved, factor: 2}]}\n",
    ));
    assert!(e.contains("spec.changes[0].prices[0].capacityType"), "{e}");
    let e = error(&with("  changes:\n    - {at: 1h}\n"));
    assert!(
        e.contains("spec.changes[0]: a change needs nodePools or prices"),
        "{e}"
    );
    let e = error(&with("  measureAt: 5h\n"));
    assert!(
        e.contains("spec.measureAt: after the end of the run"),
        "{e}"
    );
    // A changed NodePool is checked as the original ones are, with its own path.
    let e = error(&with(
        "  changes:\n    - at: 1h\n      nodePools:\n        - {apiVersion: quartermaster.dev/v1, kind: NodePool, metadata: {name: gpu}, spec: {template: {spec: {nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: default}}}, disruption: {consolidateAfter: soon}}}\n",
    ));
    assert!(e.contains("spec.changes[0].nodePools"), "{e}");
    // A PDB selects by labels: a template without labels is an error.
    let e = error(&edited(
        "      duration: 30m\n",
        "      duration: 30m\n      maxUnavailable: 1\n",
    ));
    assert!(e.contains("spec.workload[0].maxUnavailable"), "{e}");
    // Valid: a price change and a measure point.
    let s = Scenario::parse(
        "x.yaml",
        &with("  measureAt: 1h\n  changes:\n    - {at: 1h, prices: [{instanceType: \"g5.*\", capacityType: on-demand, factor: 0.5}]}\n"),
        None,
    )
    .unwrap();
    let cheaper = s.changes[0].apply_prices(&s.catalog);
    let on_demand = |c: &Catalog| {
        c.get(quartermaster_pricing::Cloud::Aws, "g5.xlarge")
            .unwrap()
            .offerings
            .iter()
            .find(|o| o.capacity_type == quartermaster_pricing::CapacityType::OnDemand)
            .unwrap()
            .price_per_hour
    };
    assert!((on_demand(&cheaper) - on_demand(&s.catalog) * 0.5).abs() < 1e-9);
}
