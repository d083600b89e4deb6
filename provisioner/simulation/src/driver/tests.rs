//! The loop on tiny scenarios.

use chrono::TimeDelta;

use super::run;
use quartermaster_pricing::CapacityType;

use crate::record::EndReason;
use crate::scenario::Scenario;
use crate::testing::{gpu_job, scenario, scenario_text};

/// The index of the first recorded pod whose name starts with `name`.
fn pod_named(rec: &crate::record::Record, name: &str) -> usize {
    rec.pods
        .iter()
        .position(|p| p.id.name.starts_with(name))
        .expect("recorded")
}

#[test]
fn a_job_runs_to_completion_and_its_empty_node_is_removed() {
    let s = scenario(
        "3h",
        "[on-demand]",
        "{}",
        &gpu_job("train", "[{at: 10m}]", "1h", false),
    );
    let r = run(&s, 1, None).unwrap();
    let rec = &r.record;
    assert_eq!(rec.pods.len(), 1);
    let pod = &rec.pods[0];
    assert_eq!(pod.id.to_string(), "default/train-00000");
    assert!(pod.completed);
    let bound = pod.first_bound.expect("bound");
    // Batch (1 s) + launch (40 s) + registration (30 s) + device plugin (45 s).
    assert_eq!(bound - pod.created, TimeDelta::seconds(116));
    assert_eq!(pod.gone, Some(bound + TimeDelta::hours(1)));
    assert_eq!(rec.instances.len(), 1);
    let node = &rec.instances[0];
    assert_eq!(node.instance_type, "g2-standard-4");
    assert_eq!(node.end_reason, Some(EndReason::Deleted));
    // Removed once empty for consolidateAfter (2 m).
    assert_eq!(
        node.end,
        Some(bound + TimeDelta::hours(1) + TimeDelta::minutes(2))
    );
    assert_eq!(r.engine.empty_deletions, 1);
    assert_eq!(rec.segments.len(), 1);
    assert_eq!(rec.pending.current(), 0.0);
    assert_eq!(rec.gpus_paid.current(), 0.0);
    assert_eq!(rec.gpus_requested.current(), 0.0);
    assert!(r.waiting.is_empty());
}

#[test]
fn a_dear_node_that_empties_is_not_refilled_by_a_small_job() {
    // A 4-GPU job runs an hour on a g2-standard-48 ($4/h on-demand). A 1-GPU job arriving 4 s
    // after it ends, while the empty node waits out consolidateAfter (2 m), used to land on it
    // and keep it for its own hour. The empty node is retired (its pool's cheapest node is a
    // sixth of its price): the small job gets a g2-standard-4, the big node goes on time.
    let workload = format!(
        "    - name: train
      kind: Job
      arrivals: [{{at: 10m}}]
      duration: 1h
      template:
        spec:
          containers: [{{name: c, resources: {{requests: {{cpu: '8', memory: 32Gi}}, limits: {{nvidia.com/gpu: 4}}}}}}]
{}",
        gpu_job("notebook", "[{at: 72m}]", "1h", false)
    );
    let s = scenario("4h", "[on-demand]", "{}", &workload);
    let r = run(&s, 1, None).unwrap();
    let rec = &r.record;
    let pod = |name: &str| pod_named(rec, name);
    let (train, notebook) = (pod("train"), pod("notebook"));
    let big = rec
        .instances
        .iter()
        .position(|i| i.instance_type == "g2-standard-48")
        .expect("bought for the 4-GPU job");
    let ended = rec.pods[train].gone.expect("done");
    assert!(rec.pods[notebook].created > ended);
    assert_eq!(rec.instances[big].end, Some(ended + TimeDelta::minutes(2)));
    assert!(
        rec.segments.iter().all(
            |s| s.pod != notebook || rec.instances[s.instance].instance_type == "g2-standard-4"
        ),
        "{:?}",
        rec.segments
    );
    assert!(rec.pods[notebook].completed);
    assert_eq!(r.engine.retirements_empty, 1);
    assert_eq!(r.audit, super::Audit::default());
}

#[test]
fn an_on_demand_node_bought_while_spot_was_out_is_not_refilled_once_spot_is_back() {
    // Spot L4 is out for the first 30 minutes: the 1-GPU job arriving at 10m runs its hour on
    // an on-demand g2-standard-4 ($0.71/h). A second job arrives 4 s after it ends, spot back
    // ($0.28/h for the same machine). It used to land on the empty on-demand node and keep
    // it for its own hour; the node is retired while empty, so the job gets the machine on
    // spot and the on-demand node goes consolidateAfter (2 m) after it emptied.
    let workload = format!(
        "{}{}",
        gpu_job("first", "[{at: 10m}]", "1h", false),
        gpu_job("second", "[{at: 72m}]", "1h", false)
    );
    let cloud = "{insufficientCapacity: [{family: g2, capacityType: spot, from: 0s, until: 30m}]}";
    let s = scenario("4h", "[spot, on-demand]", cloud, &workload);
    let r = run(&s, 1, None).unwrap();
    let rec = &r.record;
    let pod = |name: &str| pod_named(rec, name);
    let (first, second) = (pod("first"), pod("second"));
    let ran_on = |p: usize| -> Vec<(String, CapacityType)> {
        rec.segments
            .iter()
            .filter(|s| s.pod == p)
            .map(|s| {
                let i = &rec.instances[s.instance];
                (i.instance_type.clone(), i.capacity_type)
            })
            .collect()
    };
    let l4 = "g2-standard-4".to_owned();
    assert_eq!(ran_on(first), vec![(l4.clone(), CapacityType::OnDemand)]);
    assert_eq!(ran_on(second), vec![(l4, CapacityType::Spot)]);
    let ended = rec.pods[first].gone.expect("done");
    assert!(rec.pods[second].created > ended);
    let on_demand = rec
        .instances
        .iter()
        .find(|i| i.capacity_type == CapacityType::OnDemand)
        .expect("the fallback");
    assert_eq!(on_demand.end, Some(ended + TimeDelta::minutes(2)));
    assert!(rec.pods[second].completed);
    assert_eq!(r.engine.retirements_empty, 1);
    assert_eq!(r.audit, super::Audit::default());
}

#[test]
fn an_interruption_leads_to_a_replacement_and_the_pod_finishes() {
    // A spot node is interrupted after 40 minutes on average; the job needs 30 minutes. Over
    // a few seeds, every run finishes the job, and some do so after an interruption.
    let s = scenario(
        "12h",
        "[spot]",
        "{interruptions: {spotRatePerHour: 1.5}}",
        &gpu_job("train", "[{at: 0s}]", "30m", false),
    );
    let mut interrupted = 0;
    for seed in 1..=8 {
        let r = run(&s, seed, None).unwrap();
        let rec = &r.record;
        let pod = &rec.pods[0];
        assert!(pod.completed, "seed {seed}: {pod:?}");
        if pod.evictions == 0 {
            continue;
        }
        interrupted += 1;
        let reclaimed = rec
            .instances
            .iter()
            .filter(|i| i.end_reason == Some(EndReason::Reclaimed))
            .count();
        assert!(reclaimed >= 1, "seed {seed}");
        assert!(
            rec.instances.len() > reclaimed,
            "seed {seed}: a replacement"
        );
        assert!(r.engine.interruptions >= 1);
        // Not checkpointed: the last run segment alone is the full run time.
        let last = rec.segments.iter().rfind(|s| s.pod == 0).unwrap();
        assert_eq!(last.end - last.start, TimeDelta::minutes(30), "seed {seed}");
    }
    assert!(interrupted >= 1, "no seed saw an interruption");
}

#[test]
fn a_checkpointed_job_resumes_where_it_stopped() {
    let s = scenario(
        "12h",
        "[spot]",
        "{interruptions: {spotRatePerHour: 3}}",
        &gpu_job("train", "[{at: 0s}]", "2h", true),
    );
    let r = run(&s, 5, None).unwrap();
    let rec = &r.record;
    assert!(rec.pods[0].completed);
    assert!(rec.pods[0].evictions >= 1);
    let ran: TimeDelta = rec
        .segments
        .iter()
        .map(|s| s.end - s.start)
        .fold(TimeDelta::zero(), |a, b| a + b);
    assert_eq!(ran, TimeDelta::hours(2));
}

#[test]
fn a_job_annotated_checkpointed_moves_from_its_fallback_node_to_spot_and_others_stay() {
    // Spot is out for the first hour: the 3-hour job starts on on-demand. Once spot is back,
    // consolidation moves it to spot only when its pods say they resume from a checkpoint.
    let run_with = |annotated: bool| {
        let mut job = gpu_job("train", "[{at: 10m}]", "3h", true);
        if annotated {
            job = job.replace(
                "      template:\n        spec:",
                "      template:\n        metadata: {annotations: {quartermaster.dev/checkpointed: 'true'}}\n        spec:",
            );
        }
        let text = scenario_text(
            "5h",
            "[spot, on-demand]",
            "{insufficientCapacity: [{family: g2, capacityType: spot, until: 1h}]}",
            &job,
        )
        .replace(
            "consolidationPolicy: WhenEmpty,",
            "consolidationPolicy: WhenEmptyOrUnderutilized,",
        );
        let s = Scenario::parse("tiny.yaml", &text, None).unwrap_or_else(|e| panic!("{e}"));
        run(&s, 3, None).unwrap()
    };
    let moved = run_with(true);
    let rec = &moved.record;
    assert!(rec.pods[0].completed);
    assert_eq!(rec.pods[0].evictions, 1, "moved once");
    let ran: TimeDelta = rec
        .segments
        .iter()
        .map(|s| s.end - s.start)
        .fold(TimeDelta::zero(), |a, b| a + b);
    assert_eq!(ran, TimeDelta::hours(3), "no progress lost");
    let capacity: Vec<_> = rec.instances.iter().map(|i| i.capacity_type).collect();
    assert_eq!(capacity, vec![CapacityType::OnDemand, CapacityType::Spot]);

    let on_demand_hours = |rec: &crate::record::Record| {
        let i = &rec.instances[0];
        (i.end.expect("ended") - i.start).as_seconds_f64() / 3600.0
    };
    let stayed = run_with(false);
    assert_eq!(stayed.record.pods[0].evictions, 0);
    assert_eq!(stayed.record.instances.len(), 1);
    assert!(
        on_demand_hours(rec) < 1.5 && on_demand_hours(&stayed.record) > 3.0,
        "{} {}",
        on_demand_hours(rec),
        on_demand_hours(&stayed.record)
    );
}

#[test]
fn a_spot_outage_falls_back_to_on_demand() {
    let s = scenario(
        "2h",
        "[spot, on-demand]",
        "{insufficientCapacity: [{family: g2, capacityType: spot, until: 1h}]}",
        &gpu_job("train", "[{at: 10m}, {at: 90m}]", "10m", false),
    );
    let r = run(&s, 1, None).unwrap();
    let kinds: Vec<String> = r
        .record
        .instances
        .iter()
        .map(|i| i.capacity_type.to_string())
        .collect();
    assert_eq!(kinds, ["on-demand", "spot"]);
    assert!(r.engine.spot_to_on_demand >= 1);
    assert!(r.engine.capacity_errors >= 1);
    assert!(r.record.pods.iter().all(|p| p.completed));
}

#[test]
fn deployments_scale_down_and_their_nodes_go() {
    let s = scenario(
        "3h",
        "[on-demand]",
        "{}",
        "    - name: web
      kind: Deployment
      replicas: 6
      schedule: [{at: 1h, replicas: 0}]
      template:
        spec:
          containers: [{name: c, resources: {requests: {cpu: '3', memory: 4Gi}}}]
",
    );
    let r = run(&s, 1, None).unwrap();
    let rec = &r.record;
    assert_eq!(rec.pods.len(), 6);
    assert!(
        rec.pods
            .iter()
            .all(|p| p.first_bound.is_some() && p.gone.is_some() && !p.completed)
    );
    assert!(!rec.instances.is_empty());
    assert!(
        rec.instances
            .iter()
            .all(|i| i.end_reason == Some(EndReason::Deleted))
    );
    // CPU nodes have no device plugin to wait for.
    let p = &rec.pods[0];
    assert_eq!(p.first_bound.unwrap() - p.created, TimeDelta::seconds(71));
}

#[test]
fn the_same_seed_repeats_exactly() {
    let s = scenario(
        "6h",
        "[spot, on-demand]",
        "{interruptions: {spotRatePerHour: 0.5}, api: {throttleProbability: 0.05}}",
        &gpu_job(
            "train",
            "[{ratePerHour: 4}]",
            "{median: 20m, p90: 1h}",
            false,
        ),
    );
    let a = run(&s, 9, None).unwrap();
    let b = run(&s, 9, None).unwrap();
    assert_eq!(a.record.instances, b.record.instances);
    assert_eq!(a.record.pods, b.record.pods);
    assert_eq!(a.engine, b.engine);
    assert!(a.engine.retries > 0 || a.clouds.iter().any(|(_, s)| s.throttles > 0));
}

#[test]
fn a_pod_over_the_pool_limit_waits_and_runs_when_room_frees_up() {
    let text = scenario_text(
        "4h",
        "[on-demand]",
        "{}",
        &gpu_job("train", "[{at: 0s, burst: 2}]", "30m", false),
    )
    .replace(
        "        disruption:",
        "        limits: {nvidia.com/gpu: '1'}\n        disruption:",
    );
    let s = Scenario::parse("tiny.yaml", &text, None).unwrap();
    let r = run(&s, 1, None).unwrap();
    let rec = &r.record;
    assert_eq!(rec.pods.len(), 2);
    assert!(rec.pods.iter().all(|p| p.completed), "{:?}", rec.pods);
    let first = rec.pods.iter().map(|p| p.gone.unwrap()).min().unwrap();
    let second = rec
        .pods
        .iter()
        .map(|p| p.first_bound.unwrap())
        .max()
        .unwrap();
    // The second pod only starts once the first finished and freed the GPU.
    assert!(second >= first, "{second} < {first}");
    // Never more than one GPU paid at once.
    assert_eq!(rec.gpus_paid.max(), 1.0);
}

/// A gang Job of two 1-GPU pods where only one g2 instance can exist at a time.
fn gang_of_two(gang_aware: bool) -> Scenario {
    let job = "    - name: train
      kind: Job
      parallelism: 2
      gang: true
      arrivals: [{at: 10m}]
      duration: 1h
      template:
        spec:
          containers: [{name: c, resources: {requests: {cpu: '2', memory: 8Gi}, limits: {nvidia.com/gpu: 1}}}]
";
    let text = scenario_text(
        "4h",
        "[on-demand]",
        "{capacity: [{family: g2, max: 1}]}",
        job,
    )
    .replace(
        "  seed: 3\n",
        &format!("  seed: 3\n  gangAware: {gang_aware}\n"),
    );
    Scenario::parse("gang.yaml", &text, None).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_gang_member_waits_bound_for_the_rest_and_its_gpus_count_as_idle() {
    let s = gang_of_two(false);
    assert!(s.has_gangs() && !s.gang_aware);
    let r = run(&s, 1, None).unwrap();
    let rec = &r.record;
    // One member got a node and holds it, never started: its partner never gets one.
    assert_eq!(rec.pods.len(), 2);
    assert!(
        rec.pods
            .iter()
            .all(|p| p.first_bound.is_none() && !p.completed)
    );
    assert!(rec.segments.is_empty());
    assert_eq!(rec.pending.current(), 2.0);
    assert_eq!(r.engine.gang_rollbacks, 0);
    let summary = crate::summary::summarise(&s, 1, &r, &r);
    assert_eq!(summary.gang_rollbacks, Some(0));
    assert!(summary.idle_gpu_hours > 3.5, "{summary:?}");
    assert!((summary.idle_gpu_hours - summary.gpu_hours_paid).abs() < 1e-6);
}

#[test]
fn a_gang_aware_engine_rolls_back_instead_of_holding_a_node_for_half_a_gang() {
    let aware = gang_of_two(true);
    let r = run(&aware, 1, None).unwrap();
    assert!(r.engine.gang_rollbacks >= 1, "{:?}", r.engine);
    let aware_summary = crate::summary::summarise(&aware, 1, &r, &r);
    let blind = gang_of_two(false);
    let b = run(&blind, 1, None).unwrap();
    let blind_summary = crate::summary::summarise(&blind, 1, &b, &b);
    assert!(
        aware_summary.idle_gpu_hours < blind_summary.idle_gpu_hours / 4.0,
        "{} vs {}",
        aware_summary.idle_gpu_hours,
        blind_summary.idle_gpu_hours
    );
}

#[test]
fn a_gang_starts_when_all_its_members_are_bound() {
    let s = gang_of_two(true).without_gang_awareness();
    let mut s = s;
    s.cloud.capacity.clear();
    let r = run(&s, 1, None).unwrap();
    let rec = &r.record;
    assert!(rec.pods.iter().all(|p| p.completed), "{:?}", rec.pods);
    let starts: Vec<_> = rec.pods.iter().map(|p| p.first_bound).collect();
    assert_eq!(starts[0], starts[1], "both start together");
}

/// Four 1-GPU jobs, then one 4-GPU job, in the same batch.
fn small_then_large() -> Scenario {
    let mut workload = gpu_job("small", "[{at: 1m, burst: 4}]", "2h", false);
    workload.push_str(
        "    - name: large
      kind: Job
      arrivals: [{at: 1m}]
      duration: 2h
      template:
        spec:
          containers: [{name: c, resources: {requests: {cpu: '8', memory: 32Gi}, limits: {nvidia.com/gpu: 4}}}]
",
    );
    scenario("4h", "[on-demand]", "{}", &workload)
}

#[test]
fn pods_the_scheduler_binds_elsewhere_than_planned_are_planned_again_and_all_run() {
    use crate::scheduler::Binder;
    let s = small_then_large();
    let planned = run(&s.with_binder(Binder::Planned), 1, None).unwrap();
    assert_eq!(planned.engine.nominations_released, 0);
    let r = run(&s, 1, None).unwrap();
    assert_eq!(s.binder, Binder::Scheduler, "the default binder");
    // The stand-in puts the small pods on the large node (the emptiest by CPU and memory):
    // the large pod's room is gone, it is solved again and gets a node of its own.
    assert!(r.engine.nominations_released >= 1, "{:?}", r.engine);
    assert!(r.waiting.is_empty(), "{:?}", r.waiting);
    assert!(
        r.record.pods.iter().all(|p| p.first_bound.is_some()),
        "every pod ran"
    );
    assert!(r.record.pods.iter().all(|p| p.completed));
}

#[test]
fn a_claim_deleted_before_its_launch_was_heard_of_takes_its_instance_with_it() {
    // The engine may call off a replacement in the poll that launched it, with no provider id
    // yet: the driver deletes whatever the cloud launched for the claim.
    let s = scenario(
        "1h",
        "[on-demand]",
        "{}",
        &gpu_job("train", "[{at: 0s}]", "30m", false),
    );
    let mut d = super::Driver::new(&s, 1).unwrap();
    d.feed_workload();
    let t = d.engine.next_deadline().expect("a batch window");
    d.now = t;
    d.clock.set(t);
    let launch = d
        .engine
        .poll(t)
        .into_iter()
        .find(|a| matches!(a, quartermaster_engine::Action::Launch { .. }))
        .expect("a launch");
    let quartermaster_engine::Action::Launch { claim, .. } = &launch else {
        unreachable!()
    };
    let claim = claim.clone();
    d.execute(launch).unwrap();
    assert!(d.rec.live_instance_of_claim(&claim).is_some());
    d.execute(quartermaster_engine::Action::Delete {
        claim: claim.clone(),
        provider_id: None,
        reason: quartermaster_engine::DeleteReason::Underutilized,
    })
    .unwrap();
    assert_eq!(d.rec.live_instance_of_claim(&claim), None);
    assert_eq!(d.audit().leaked_instances, 0);
}

#[test]
fn the_hindsight_sees_a_pod_that_started_after_it_was_created() {
    // The job is created exactly at a sample (0:15) and binds two minutes later; no pod is
    // created or deleted again until it ends. The samples at 0:45 and 1:15 must see it running
    // (the hindsight used to reuse the 0:15 solve, made while it was pending, and cost 0).
    let s = scenario(
        "3h",
        "[on-demand]",
        "{}",
        &gpu_job("train", "[{at: 15m}]", "1h", false),
    );
    let r = run(&s, 1, None).unwrap();
    let price = r.record.instances[0].price_per_hour;
    assert!(
        (r.hindsight.cost - price).abs() < 1e-6,
        "{:?} vs {price}",
        r.hindsight
    );
}

#[test]
fn the_hindsight_holds_no_more_than_a_capacity_limit_allows() {
    // Two one-GPU jobs at once; the cloud holds one g2-standard-4 spot instance at a time.
    // Without the limit the hindsight buys two of them; with it, it must pay for more.
    let job = gpu_job("train", "[{at: 10m, burst: 2}]", "1h", false);
    let free = run(&scenario("3h", "[spot, on-demand]", "{}", &job), 1, None).unwrap();
    let limited = run(
        &scenario(
            "3h",
            "[spot, on-demand]",
            "{capacity: [{instanceType: g2-standard-4, capacityType: spot, max: 1}]}",
            &job,
        ),
        1,
        None,
    )
    .unwrap();
    let spot = free.record.instances[0].price_per_hour;
    assert!(
        (free.hindsight.cost - 2.0 * spot).abs() < 1e-6,
        "{:?}",
        free.hindsight
    );
    assert!(
        limited.hindsight.cost > free.hindsight.cost + 1e-3,
        "{:?} vs {:?}",
        limited.hindsight,
        free.hindsight
    );
}

#[test]
fn the_hindsight_holds_a_limit_across_every_shape_and_zone_it_covers() {
    // Two one-GPU jobs at once; the cloud holds one g2 instance at a time, of any size, in any
    // zone. Two g2-standard-4 (one per job) pass the limit, and so did the bound that held the
    // limit per shape (one g2-standard-4 and one g2-standard-8); within it, both jobs share one
    // two-GPU node, which costs more.
    // The pool may also buy A100 nodes (a2), where the fleet runs the second job. The hindsight
    // comes to one g2-standard-24 holding both jobs, the cheapest fleet within the limit.
    let job = gpu_job("train", "[{at: 10m, burst: 2}]", "1h", false);
    let with = |cloud: &str| {
        let text = scenario_text("3h", "[spot, on-demand]", cloud, &job)
            .replace("values: [g2, n2]", "values: [g2, a2, n2]");
        let s = Scenario::parse("tiny.yaml", &text, None).unwrap_or_else(|e| panic!("{e}"));
        run(&s, 1, None).unwrap()
    };
    let free = with("{}");
    let limited = with("{capacity: [{family: g2, max: 1}]}");
    assert!(
        limited.hindsight.cost > 1.2 * free.hindsight.cost,
        "{:?} vs {:?}",
        limited.hindsight,
        free.hindsight
    );
    assert!(limited.hindsight.from_lower_bound > 0.0);
}

#[test]
fn the_hindsight_cannot_buy_what_an_outage_refuses() {
    // Spot is out for the whole run: the fleet runs the job on on-demand, and the hindsight,
    // which may only buy what the clouds sell, does the same (it used to price spot).
    let s = scenario(
        "3h",
        "[spot, on-demand]",
        "{insufficientCapacity: [{family: g2, capacityType: spot, until: 3h}]}",
        &gpu_job("train", "[{at: 10m}]", "1h", false),
    );
    let r = run(&s, 1, None).unwrap();
    let on_demand = &r.record.instances[0];
    assert_eq!(on_demand.capacity_type.to_string(), "on-demand");
    assert!(
        (r.hindsight.cost - on_demand.price_per_hour).abs() < 1e-6,
        "{:?} vs {}",
        r.hindsight,
        on_demand.price_per_hour
    );
}

/// Checkpointed one-GPU jobs (`arrivals`, two hours each) that consolidation may move, in a
/// three-hour run on `cloud`, measured an hour in.
fn movable_jobs_measured_at_one_hour(arrivals: &str, cloud: &str) -> super::Run {
    let job = gpu_job("train", arrivals, "2h", true).replace(
        "      template:\n        spec:",
        "      template:\n        metadata: {annotations: {quartermaster.dev/checkpointed: 'true'}}\n        spec:",
    );
    let text = scenario_text("3h", "[spot, on-demand]", cloud, &job)
        .replace("  seed: 3\n", "  seed: 3\n  measureAt: 1h\n")
        .replace(
            "consolidationPolicy: WhenEmpty,",
            "consolidationPolicy: WhenEmptyOrUnderutilized,",
        );
    let s = Scenario::parse("tiny.yaml", &text, None).unwrap_or_else(|e| panic!("{e}"));
    run(&s, 1, None).unwrap()
}

#[test]
fn the_achievable_saving_cannot_buy_what_an_outage_refuses() {
    // Spot is out for the whole run: a checkpointed job consolidation may move runs on
    // on-demand, and no move could put it on spot. Measured an hour in, the cheapest fleet
    // consolidation could reach is the one running (it used to be priced on spot).
    let r = movable_jobs_measured_at_one_hour(
        "[{at: 10m}]",
        "{insufficientCapacity: [{family: g2, capacityType: spot, until: 3h}]}",
    );
    let on_demand = &r.record.instances[0];
    assert_eq!(on_demand.capacity_type.to_string(), "on-demand");
    let d = &r.disruption;
    assert!(
        (d.fleet_cost_at_measure - on_demand.price_per_hour).abs() < 1e-6,
        "{d:?}"
    );
    assert!(
        (d.from_scratch_cost_at_measure - d.fleet_cost_at_measure).abs() < 1e-6,
        "{d:?}"
    );
}

/// Two checkpointed one-GPU jobs that start while g2 spot is out, in a cloud that then holds
/// one g2 spot instance at a time; measured an hour in.
fn two_jobs_past_a_one_instance_spot_limit() -> super::Run {
    movable_jobs_measured_at_one_hour(
        "[{at: 10m, burst: 2}]",
        "{capacity: [{family: g2, capacityType: spot, max: 1}], \
         insufficientCapacity: [{family: g2, capacityType: spot, until: 30m}]}",
    )
}

#[test]
fn the_achievable_saving_holds_no_more_than_a_capacity_limit_allows() {
    // Two checkpointed one-GPU jobs start while g2 spot is out and share a g2-standard-24
    // on-demand node; the cloud then holds one g2 spot instance at a time. The cheapest fleet
    // consolidation could reach has one g2-standard-4 spot node and one on-demand (it used to
    // be priced at two spot nodes, and past a dozen limited spot offerings the solver kept the
    // node on a full one).
    let r = two_jobs_past_a_one_instance_spot_limit();
    let catalog = quartermaster_pricing::Catalog::embedded();
    let price = |ty: &str, capacity_type: CapacityType| {
        catalog
            .instance_types()
            .iter()
            .find(|t| t.name == ty)
            .and_then(|t| {
                t.offerings
                    .iter()
                    .filter(|o| {
                        o.capacity_type == capacity_type && o.zone.starts_with("us-central1")
                    })
                    .map(|o| o.price_per_hour)
                    .min_by(f64::total_cmp)
            })
            .expect("priced")
    };
    let d = &r.disruption;
    let floor =
        price("g2-standard-4", CapacityType::Spot) + price("g2-standard-4", CapacityType::OnDemand);
    assert!(
        (d.from_scratch_cost_at_measure - floor).abs() < 1e-6,
        "{d:?} vs {floor}"
    );
}

#[test]
fn a_move_the_cloud_cannot_carry_out_is_not_asked_for_every_quarter_hour() {
    // The same two jobs on one g2-standard-24 on-demand node, the cloud holding one g2 spot
    // instance. Splitting them onto two g2-standard-4 spot nodes saves money on paper; the
    // second replacement finds every g2 spot offering it may fall back to full, so the move is
    // called off. Asked for again every 15 minutes, it was called off 8 times (each time with a
    // replacement launched and deleted at once) and the fleet never settled in the day after
    // the trace. The offerings refused to a move that wasted a launch now stay out of moves,
    // twice as long each time no capacity of their kind comes back: 4 moves called off (the
    // first while spot was out and nothing launched), settled within the hour.
    let r = two_jobs_past_a_one_instance_spot_limit();
    assert!(r.engine.consolidations_cancelled <= 4, "{:?}", r.engine);
    let d = &r.disruption;
    assert!(d.settle_seconds < 3600.0, "{d:?}");
    assert_eq!(r.audit, super::Audit::default());
}

#[test]
fn a_run_is_audited_and_measured() {
    let s = scenario(
        "3h",
        "[on-demand]",
        "{}",
        &gpu_job("train", "[{at: 10m}]", "1h", false),
    );
    let r = run(&s, 1, None).unwrap();
    assert_eq!(r.audit, super::Audit::default());
    assert_eq!(r.waiting_at_end.stuck + r.waiting_at_end.late_arrivals, 0);
    // One g2-standard-4 for the hour the job ran (sampled every half hour in the middle).
    let price = r.record.instances[0].price_per_hour;
    assert!(
        (r.hindsight.cost - price).abs() < 1e-6,
        "{:?} vs {price}",
        r.hindsight
    );
    assert_eq!(r.hindsight.from_lower_bound, 0.0);
    // Nothing left to consolidate at the end: the settle ends at once, nothing saved.
    assert_eq!(r.disruption.fleet_cost_after_settle, Some(0.0));
}

#[test]
fn chaos_injects_faults_and_breaks_no_invariant() {
    // Jobs arriving over four hours on spot and on-demand, under the faults of `--chaos`.
    let s = scenario(
        "4h",
        "[spot, on-demand]",
        "{}",
        &gpu_job(
            "train",
            "[{at: 0s}, {at: 20m}, {at: 1h}, {at: 2h}]",
            "40m",
            false,
        ),
    );
    let mut faults = 0;
    for chaos in 1..=6 {
        let sim = crate::simulate(&s.with_chaos(chaos), Some(1), None).unwrap();
        let summary = &sim.summary;
        assert_eq!(summary.chaos_seed, Some(chaos));
        assert!(
            summary.broken_invariants().is_empty(),
            "chaos {chaos}: {:?}; waiting {:?}; pods {:?}",
            summary.broken_invariants(),
            sim.run.waiting,
            sim.run
                .record
                .pods
                .iter()
                .filter(|p| p.gone.is_none())
                .collect::<Vec<_>>()
        );
        faults += summary.faults_injected;
    }
    assert!(faults > 0, "six chaos runs injected no fault");
}

#[test]
fn a_launch_whose_answer_is_lost_is_found_again_not_launched_twice() {
    // Every create and delete answer is lost: each launch is retried, the cloud answers with the
    // instance it already made for the claim, and the run ends with nothing leaked or doubled.
    let s = scenario(
        "3h",
        "[on-demand]",
        "{api: {lostResponseProbability: 1.0}}",
        &gpu_job("train", "[{at: 10m}]", "1h", false),
    );
    let r = run(&s, 1, None).unwrap();
    assert!(r.record.pods[0].completed, "{:?}", r.record.pods[0]);
    assert_eq!(r.audit.leaked_instances, 0);
    assert_eq!(r.audit.duplicate_launches, 0);
    assert!(r.audit.unbilled_instance_seconds < 0.5, "{:?}", r.audit);
    let lost: u64 = r.clouds.iter().map(|(_, s)| s.lost_responses).sum();
    assert!(lost >= 2, "{lost}");
}

/// `s` with driver crashes at `per_hour` drawn from `seed` (and no other fault).
fn with_crashes(s: &Scenario, seed: u64, per_hour: f64) -> Scenario {
    let mut s = s.clone();
    s.chaos = Some(seed);
    s.driver_crashes_per_hour = per_hour;
    s
}

/// Jobs, a Deployment that scales down (its nodes drained and deleted) and a gang, with
/// consolidation: every crash point is on the way.
fn busy_mix() -> Scenario {
    let workload = format!(
        "{}{}    - name: web
      kind: Deployment
      replicas: 6
      schedule: [{{at: 50m, replicas: 2}}, {{at: 2h, replicas: 5}}, {{at: 3h, replicas: 1}}]
      template:
        spec:
          containers: [{{name: c, resources: {{requests: {{cpu: '3', memory: 4Gi}}}}}}]
    - name: pair
      kind: Job
      parallelism: 2
      gang: true
      arrivals: [{{at: 15m}}, {{at: 2h30m}}]
      duration: 40m
      template:
        spec:
          containers: [{{name: c, resources: {{requests: {{cpu: '2', memory: 8Gi}}, limits: {{nvidia.com/gpu: 1}}}}}}]
",
        gpu_job("train", "[{at: 0s}, {at: 20m}, {at: 1h}, {at: 2h}]", "40m", false),
        gpu_job("tune", "[{at: 5m}, {at: 1h30m}]", "30m", true),
    );
    let text = scenario_text(
        "5h",
        "[spot, on-demand]",
        "{interruptions: {spotRatePerHour: 0.5}}",
        &workload,
    )
    .replace(
        "consolidationPolicy: WhenEmpty,",
        "consolidationPolicy: WhenEmptyOrUnderutilized,",
    )
    .replace("  seed: 3\n", "  seed: 3\n  gangAware: true\n");
    Scenario::parse("mix.yaml", &text, None).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_driver_crash_at_every_point_rebuilds_from_the_cluster_and_breaks_no_invariant() {
    let s = busy_mix();
    let mut points = std::collections::BTreeMap::<&str, u64>::new();
    for seed in 1..=8 {
        let sim = crate::simulate(&with_crashes(&s, seed, 12.0), Some(1), None).unwrap();
        let summary = &sim.summary;
        assert!(
            summary.broken_invariants().is_empty(),
            "crash seed {seed}: {:?} after {:?}; waiting {:?}",
            summary.broken_invariants(),
            summary.restarts_by_crash_point,
            sim.run.waiting,
        );
        assert_eq!(summary.late_arrivals, 0, "crash seed {seed}");
        for p in &sim.run.audit.restarts {
            *points.entry(p.key()).or_default() += 1;
        }
    }
    for point in [
        "before_launch",
        "launch_unrecorded",
        "mid_drain",
        "before_delete",
    ] {
        assert!(
            points.get(point).is_some_and(|n| *n > 0),
            "{point}: {points:?}"
        );
    }
}

#[test]
fn a_crash_at_nearly_every_instant_still_launches_each_claim_once() {
    // A crash due every second: nearly every instant with actions is cut. Launches whose
    // answer the crash lost are found again by their claim; nothing is doubled or leaked, and
    // every job still runs to completion.
    let s = scenario(
        "4h",
        "[on-demand]",
        "{}",
        &gpu_job("train", "[{at: 0s}, {at: 20m}, {at: 1h}]", "40m", false),
    );
    let sim = crate::simulate(&with_crashes(&s, 5, 3600.0), Some(1), None).unwrap();
    let summary = &sim.summary;
    assert!(summary.restarts >= 10, "{}", summary.restarts);
    assert!(
        summary.broken_invariants().is_empty(),
        "{:?}",
        summary.broken_invariants()
    );
    assert!(sim.run.record.pods.iter().all(|p| p.completed));
    assert_eq!(summary.duplicate_launches, 0);
    assert!(
        summary
            .restarts_by_crash_point
            .get("launch_unrecorded")
            .is_some_and(|n| *n > 0),
        "{:?}",
        summary.restarts_by_crash_point
    );
}

#[test]
fn a_launch_past_a_pool_limit_is_counted() {
    // The check itself: two instances live in a pool limited to one node.
    let s = scenario(
        "3h",
        "[on-demand]",
        "{}",
        &gpu_job("train", "[{at: 10m}, {at: 10m}]", "1h", false),
    );
    let r = run(&s, 1, None).unwrap();
    assert_eq!(r.audit.limit_violations, 0);
    let text = scenario_text(
        "3h",
        "[on-demand]",
        "{}",
        &gpu_job("train", "[{at: 10m}, {at: 10m}]", "1h", false),
    )
    .replace(
        "        disruption:",
        "        limits: {nodes: '1'}\n        disruption:",
    );
    let limited = Scenario::parse("limited.yaml", &text, None).unwrap_or_else(|e| panic!("{e}"));
    let r = run(&limited, 1, None).unwrap();
    assert_eq!(r.audit.limit_violations, 0, "the engine kept to one node");
    let mut d = super::Driver::new(&limited, 1).unwrap();
    for i in 0..2 {
        let mut record = r.record.instances[0].clone();
        record.provider_id = format!("extra-{i}");
        let i = d.rec.launched(record);
        d.live(i);
    }
    assert_eq!(d.limit_violations, 1, "the second instance is one over");
}

#[test]
fn a_gpu_that_fails_is_repaired_and_the_job_finishes_elsewhere() {
    // GPUs fail about once every two hours per node; the job needs four hours. Over a few
    // seeds the job always finishes, faulted nodes are replaced by node repair about ten
    // minutes after their fault (AcceleratedHardwareReady=False), and the GPU-hours paid on
    // broken nodes are counted.
    let s = scenario(
        "2d",
        "[on-demand]",
        "{gpuFaultsPerHour: 0.5}",
        &gpu_job("train", "[{at: 0s}]", "4h", true),
    );
    let mut repaired = 0;
    for seed in 1..=6 {
        let r = run(&s, seed, None).unwrap();
        let rec = &r.record;
        assert!(rec.pods[0].completed, "seed {seed}: {:?}", rec.pods[0]);
        for i in rec.instances.iter().filter(|i| i.gpu_fault_at.is_some()) {
            let fault = i.gpu_fault_at.unwrap();
            if let Some(end) = i.end {
                // Repaired 10 minutes after the fault (within a poll or two).
                let after = end - fault;
                assert!(
                    after >= TimeDelta::minutes(10) && after <= TimeDelta::minutes(11),
                    "seed {seed}: ended {after} after its fault"
                );
                repaired += 1;
            }
        }
        let faulted = rec
            .instances
            .iter()
            .filter(|i| i.gpu_fault_at.is_some())
            .count() as u64;
        assert!(r.engine.repairs <= faulted, "seed {seed}");
        let lost: f64 = rec
            .instances
            .iter()
            .map(|i| i.gpu_hours_lost_to_faults(s.start + s.duration))
            .sum();
        assert_eq!(lost > 0.0, faulted > 0, "seed {seed}");
    }
    assert!(repaired >= 1, "no seed saw a repair");
}

#[test]
fn a_gpu_fault_a_reboot_clears_keeps_its_node_and_one_it_does_not_is_replaced() {
    // Every fault is resettable: node repair reboots (XID 48 rule), the node comes back with
    // its GPUs three minutes later, and nothing is replaced or bought for it.
    let resettable = scenario(
        "2d",
        "[on-demand]",
        "{gpuFaultsPerHour: 0.5, gpuFaultsResettable: 1.0}",
        &gpu_job("train", "[{at: 0s}]", "4h", true),
    );
    // None is: the same faults are replaced, as before.
    let hard = scenario(
        "2d",
        "[on-demand]",
        "{gpuFaultsPerHour: 0.5}",
        &gpu_job("train", "[{at: 0s}]", "4h", true),
    );
    let mut reboots = 0;
    for seed in 1..=6 {
        let r = run(&resettable, seed, None).unwrap();
        let rec = &r.record;
        assert!(rec.pods[0].completed, "seed {seed}");
        assert_eq!(
            r.engine.repairs, 0,
            "seed {seed}: a reboot cleared every fault"
        );
        reboots += r.engine.repair_reboots;
        for i in rec.instances.iter().filter(|i| i.gpu_fault_at.is_some()) {
            let (fault, cleared) = (i.gpu_fault_at.unwrap(), i.gpu_cleared_at);
            if let Some(cleared) = cleared {
                // Rebooted 10 minutes after the fault, back 3 minutes later.
                let after = cleared - fault;
                assert!(
                    after >= TimeDelta::minutes(13) && after <= TimeDelta::minutes(14),
                    "seed {seed}: cleared {after} after its fault"
                );
            }
        }
        let lost_reboot: f64 = rec
            .instances
            .iter()
            .map(|i| i.gpu_hours_lost_to_faults(resettable.start + resettable.duration))
            .sum();
        let h = run(&hard, seed, None).unwrap();
        assert_eq!(
            h.engine.repair_reboots, 0,
            "seed {seed}: XID 79 is replaced"
        );
        assert!(
            lost_reboot <= 14.0 / 60.0 * f64::from(r.engine.repair_reboots as u32) + 1e-9,
            "seed {seed}: {lost_reboot} GPU-hours lost"
        );
    }
    assert!(reboots >= 1, "no seed saw a reboot");
}

#[test]
fn a_capacity_block_is_used_before_any_on_demand_node_and_drained_before_its_end() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/capacity-block-week.yaml");
    let s = Scenario::load(&path).unwrap();
    let r = run(&s, s.seed, None).unwrap();
    let block = s.cloud.reservations[0].reservation(quartermaster_pricing::Cloud::Aws, s.start);
    let (start, end) = (block.start.unwrap(), block.end.unwrap());
    let drain = block.drain_at().unwrap();
    let reserved: Vec<_> = r
        .record
        .instances
        .iter()
        .filter(|i| i.capacity_type == quartermaster_pricing::CapacityType::Reserved)
        .collect();
    assert!(!reserved.is_empty(), "the block is used");
    assert!(
        reserved
            .iter()
            .all(|i| i.zone == "us-east-1a" && i.start >= start)
    );
    // Every reserved node is gone by the reclaim (30 min before the end): drained first.
    assert!(
        reserved
            .iter()
            .all(|i| i.end.is_some_and(|e| e <= end - TimeDelta::minutes(30))),
        "{reserved:?}"
    );
    // No on-demand p5 was bought while the block had a free slot.
    let live_reserved_at = |t| {
        reserved
            .iter()
            .filter(|i| i.start <= t && i.end.is_none_or(|e| e > t))
            .count()
    };
    for i in r.record.instances.iter().filter(|i| {
        i.capacity_type == quartermaster_pricing::CapacityType::OnDemand
            && i.start >= start
            && i.start < drain
    }) {
        assert_eq!(
            live_reserved_at(i.start),
            4,
            "on-demand {} bought at {} with a block slot free",
            i.claim,
            i.start
        );
    }
    // Drained, and no pod lost: every job placed again and finished or still running.
    assert_eq!(r.engine.reservation_drains, 4);
    assert!(r.engine.reserved_launches >= 4);
    assert!(r.waiting.is_empty(), "{:?}", r.waiting);
    assert_eq!(
        (r.audit.leaked_instances, r.audit.duplicate_launches),
        (0, 0)
    );
}

#[test]
fn a_pod_asking_for_more_than_any_node_has_free_is_one_the_stand_in_cannot_bind() {
    // The stand-in skips such pods without offering them to every node: the bound must never
    // rule out a pod some node could take.
    use crate::scheduler::{Binder, choose, most_free};
    let s = small_then_large();
    let mut d = super::Driver::new(&s, 1).unwrap();
    d.run_until(s.start + TimeDelta::minutes(30), false, None)
        .unwrap();
    let free = most_free(&d.cluster).expect("nodes are up");
    let pods: Vec<_> = d.cluster.running_pods().cloned().collect();
    assert!(!pods.is_empty());
    let (mut ruled_out, mut bindable) = (0, 0);
    for pod in &pods {
        for scale in [0, 1, 2, 4, 8] {
            let mut p = pod.clone();
            for slot in 0..quartermaster_solver::resources::MAX_RESOURCES {
                p.requests.set(slot, pod.requests.get(slot) * scale / 4);
            }
            let somewhere = choose(&d.cluster, &p, false, Binder::Scheduler).is_some();
            if p.requests.first_excess(&free).is_some() {
                ruled_out += 1;
                assert!(
                    !somewhere,
                    "{:?} fits although the bound rules it out",
                    p.requests
                );
            } else if somewhere {
                bindable += 1;
            }
        }
    }
    assert!(ruled_out > 0 && bindable > 0, "{ruled_out} {bindable}");
}

#[test]
fn the_stand_in_prefers_nodes_without_the_soft_cordon_as_the_kube_scheduler_does() {
    // TaintToleration (weight 3) outweighs LeastAllocated and BalancedAllocation: a pod goes to
    // a node without an untolerated PreferNoSchedule taint when one fits, and the order among
    // nodes that all carry it is the order without it.
    use crate::scheduler::{Binder, choose};
    let s = small_then_large();
    let mut d = super::Driver::new(&s, 1).unwrap();
    d.run_until(s.start + TimeDelta::minutes(30), false, None)
        .unwrap();
    let mut pod = d
        .cluster
        .running_pods()
        .next()
        .expect("a running pod")
        .clone();
    pod.requests = quartermaster_solver::Resources::ZERO;
    let first = choose(&d.cluster, &pod, false, Binder::Scheduler)
        .expect("room")
        .to_owned();
    d.cluster.soft_cordon(&first, true);
    let second = choose(&d.cluster, &pod, false, Binder::Scheduler)
        .expect("room")
        .to_owned();
    assert_ne!(second, first);
    let names: Vec<String> = d.cluster.nodes().map(|(n, _)| n.clone()).collect();
    assert!(names.len() >= 2);
    for n in &names {
        d.cluster.soft_cordon(n, true);
    }
    assert_eq!(
        choose(&d.cluster, &pod, false, Binder::Scheduler),
        Some(first.as_str())
    );
    // Reopening a node (uncordon) lifts its soft cordon too.
    d.cluster.uncordon(&second);
    assert_eq!(
        choose(&d.cluster, &pod, false, Binder::Scheduler),
        Some(second.as_str())
    );
    assert_eq!(d.cluster.soft_cordoned().count(), names.len() - 1);
}

#[test]
fn the_hindsight_fills_the_reservations_open_at_the_time() {
    // A one-GPU job while a capacity block of one p5.48xlarge is open: the fleet runs it in the
    // block, whose price is paid whether used or not and so is not in the fleet's cost. The
    // hindsight may use the block too (it used to buy on-demand capacity instead, and came out
    // dearer than the fleet).
    let text = crate::testing::scenario_text(
        "3h",
        "[reserved, on-demand]",
        "{reservations: [{id: cr-1, instanceType: p5.48xlarge, zone: us-east-1a, count: 1, \
         type: capacity-block, from: 0m, until: 3h, pricePerHour: 39.33}]}",
        &gpu_job("train", "[{at: 10m}]", "1h", false),
    )
    .replace("GCPNodeClass", "AWSNodeClass")
    .replace("[g2, n2]", "[p5]")
    .replace(
        "\n  cloud: ",
        "
  nodeClasses:
    - apiVersion: quartermaster.dev/v1
      kind: AWSNodeClass
      metadata: {name: default}
      spec:
        region: us-east-1
        amiFamily: AL2023
        role: QuartermasterNodeRole
        subnetSelectorTerms: [{tags: {team: ml}}]
        securityGroupSelectorTerms: [{tags: {team: ml}}]
        capacityReservationSelectorTerms: [{id: cr-1}]
  cloud: ",
    );
    let s = Scenario::parse("tiny.yaml", &text, None).unwrap_or_else(|e| panic!("{e}"));
    let r = run(&s, 1, None).unwrap();
    let node = &r.record.instances[0];
    assert_eq!(node.capacity_type.to_string(), "reserved");
    assert!(r.hindsight.samples > 0);
    assert!(r.hindsight.cost.abs() < 1e-9, "{:?}", r.hindsight);
}

#[test]
fn without_disruption_rules_the_fleet_comes_close_to_its_hindsight() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios/business-hours-budget.yaml");
    let s = Scenario::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let lifted = s.without_disruption_rules();
    let pools = serde_json::to_string(&lifted.node_pools).unwrap();
    assert!(!pools.contains("budgets"), "{pools}");
    assert!(pools.contains("\"consolidateAfter\":\"30s\""), "{pools}");
    assert!(
        pools.contains("\"quartermaster.dev/spot-to-spot-min-types\":\"1\""),
        "{pools}"
    );
    assert!(lifted.workloads.iter().all(|w| !w.do_not_disrupt()));
    assert!(lifted.workloads.iter().all(|w| w.max_unavailable.is_none()));
    assert!(s.workloads.iter().any(|w| w.do_not_disrupt()));

    // The zero-node budget holds the morning's nodes all day: lifted, they go at 10:00.
    let kept = crate::simulate(&s, None, None).unwrap().summary;
    let free = crate::simulate(&lifted, None, None).unwrap().summary;
    assert!(free.total_cost < 0.7 * kept.total_cost, "{free:?} {kept:?}");
    let ratio = free.fleet_cost_over_hindsight.unwrap();
    assert!(ratio <= 1.05, "{ratio}");
    assert!(kept.fleet_cost_over_hindsight.unwrap() > 1.5);
    assert!(free.broken_invariants().is_empty());
}

#[test]
fn without_disruption_rules_every_job_checkpoints_and_says_so() {
    let s = scenario(
        "1h",
        "[spot]",
        "{}",
        &gpu_job("train", "[{at: 0s}]", "30m", false),
    );
    let lifted = s.without_disruption_rules();
    let w = &lifted.workloads[0];
    assert!(w.annotated_checkpointed());
    assert!(matches!(&w.kind, crate::scenario::WorkloadKind::Job(j) if j.checkpointed));
    let pools = serde_json::to_string(&lifted.node_pools).unwrap();
    assert!(
        pools.contains("\"consolidationPolicy\":\"WhenEmptyOrUnderutilized\""),
        "{pools}"
    );
}

#[test]
fn a_pod_waiting_for_a_node_still_within_its_registration_budget_is_late_not_stuck() {
    // The node launched for the job never registers; the run ends 15 minutes after the job
    // arrived, before the engine's 15-minute registration budget for it ran out.
    let mut s = scenario(
        "30m",
        "[on-demand]",
        "{}",
        &gpu_job("train", "[{at: 15m}]", "1h", false),
    );
    s.cloud.nodes_never_register = 1.0;
    let sim = crate::simulate(&s, None, None).unwrap();
    let v = sim.summary.to_json();
    assert_eq!(v["servable_pods_unplaced"], 0, "{v}");
    assert_eq!(v["late_arrivals"], 1, "{v}");
}

#[test]
fn a_claim_whose_spot_has_no_capacity_goes_to_the_cheaper_pool_not_its_own_on_demand() {
    // Two NodePools of the same weight: GCP g2-standard-4 and AWS g6. g2 spot has no capacity.
    // The first plan buys g2-standard-4 spot ($0.28); its claim falls back within its pool
    // only while that is no dearer than g6.xlarge spot ($0.35) in the other pool (the other
    // zones' spot), then goes back to the solver, which buys the g6. Before, the claim fell
    // back to g2-standard-4 on-demand ($0.71).
    let text = crate::testing::scenario_text(
        "2h",
        "[spot, on-demand]",
        "{insufficientCapacity: [{family: g2, capacityType: spot, until: 2h}]}",
        &gpu_job("train", "[{at: 10m}]", "30m", false),
    )
    .replace(
        "{key: quartermaster.dev/instance-family, operator: In, values: [g2, n2]}",
        "{key: node.kubernetes.io/instance-type, operator: In, values: [g2-standard-4]}",
    )
    .replace(
        "\n  cloud: ",
        "
    - apiVersion: quartermaster.dev/v1
      kind: NodePool
      metadata: {name: aws}
      spec:
        template:
          spec:
            nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: default}
            requirements:
              - {key: quartermaster.dev/instance-family, operator: In, values: [g6]}
              - {key: quartermaster.dev/capacity-type, operator: In, values: [spot, on-demand]}
        disruption: {consolidationPolicy: WhenEmpty, consolidateAfter: 2m}
  cloud: ",
    );
    let s = Scenario::parse("tiny.yaml", &text, None).unwrap_or_else(|e| panic!("{e}"));
    let r = run(&s, 1, None).unwrap();
    let bought: Vec<(String, String)> = r
        .record
        .instances
        .iter()
        .map(|i| (i.instance_type.clone(), i.capacity_type.to_string()))
        .collect();
    assert_eq!(bought, [("g6.xlarge".to_owned(), "spot".to_owned())]);
    assert!(r.engine.capacity_errors >= 1);
    assert_eq!(r.engine.claims_abandoned, 1);
    assert!(r.record.pods.iter().all(|p| p.completed));
}

/// Deployments of 1-, 2- and 4-GPU pods in a pool that consolidates underutilized nodes.
fn gpu_mix_deployments() -> Scenario {
    let deployment = |name: &str, replicas: u32, gpus: u32| {
        format!(
            "    - name: {name}
      kind: Deployment
      replicas: {replicas}
      template:
        spec:
          containers: [{{name: c, resources: {{requests: {{cpu: '1', memory: 2Gi}}, limits: {{nvidia.com/gpu: {gpus}}}}}}}]
"
        )
    };
    let workload = deployment("one", 8, 1) + &deployment("two", 4, 2) + &deployment("four", 2, 4);
    let text = scenario_text("2h", "[on-demand]", "{}", &workload).replace(
        "consolidationPolicy: WhenEmpty, consolidateAfter: 2m",
        "consolidationPolicy: WhenEmptyOrUnderutilized, consolidateAfter: 30s",
    );
    Scenario::parse("tiny.yaml", &text, None).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn consolidation_makes_only_moves_that_still_save_as_the_kube_scheduler_binds_their_pods() {
    use quartermaster_engine::SchedulerScoring;
    let s = gpu_mix_deployments();
    // The kube-scheduler stand-in binds (LeastAllocated), and the engine knows it.
    let aware = run(&s, 1, None).unwrap();
    // The same binder, with an engine that expects its plans to be followed (as it did).
    let mut blind = s.clone();
    blind.engine.scheduler_scoring = SchedulerScoring::FollowsPlan;
    let blind = run(&blind, 1, None).unwrap();
    let evictions = |r: &super::Run| r.record.pods.iter().map(|p| p.evictions).sum::<u32>();
    let bought = |r: &super::Run| r.record.instances.len();
    assert_eq!(blind.engine.moves_unprofitable_as_scheduled, 0);
    assert!(
        aware.engine.moves_unprofitable_as_scheduled > 0,
        "{:?}",
        aware.engine
    );
    // The blind engine's moves scatter: 1-GPU pods take the 4-GPU replacements, the pods
    // planned there get new nodes, and the next pass moves them again.
    assert!(
        evictions(&aware) * 2 < evictions(&blind),
        "evictions: aware {} blind {}",
        evictions(&aware),
        evictions(&blind)
    );
    assert!(
        bought(&aware) + 5 < bought(&blind),
        "nodes bought: aware {} blind {}",
        bought(&aware),
        bought(&blind)
    );
    let cost = |r: &super::Run| {
        r.record
            .instances
            .iter()
            .map(|i| i.cost(s.end()))
            .sum::<f64>()
    };
    assert!(
        cost(&aware) <= cost(&blind),
        "{} > {}",
        cost(&aware),
        cost(&blind)
    );
    for r in [&aware, &blind] {
        assert!(r.waiting.is_empty(), "{:?}", r.waiting);
    }
}
