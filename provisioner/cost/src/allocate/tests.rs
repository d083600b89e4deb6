//! The allocation rule on small hand-made fleets.

use chrono::{TimeZone, Utc};
use quartermaster_pricing::{CapacityType, Cloud};

use super::*;

fn t(h: u32, m: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2026, 1, 5, h, m, 0).unwrap()
}

fn gpu_node(name: &str, start: DateTime<Utc>, end: Option<DateTime<Utc>>) -> NodeUsage {
    NodeUsage {
        node: name.to_owned(),
        nodeclaim: format!("claim-{name}"),
        nodepool: "gpu".to_owned(),
        cloud: Cloud::Aws,
        region: "us-east-1".to_owned(),
        zone: "us-east-1a".to_owned(),
        instance_type: "g6.12xlarge".to_owned(),
        capacity_type: CapacityType::Spot,
        price_per_hour: 4.0,
        list_price_per_hour: Some(8.0),
        price_source: "test".to_owned(),
        accelerator: "l4".to_owned(),
        accelerator_count: 4,
        allocatable: Amounts {
            cpu_millis: 48_000,
            memory_bytes: 192 << 30,
            accelerators: 4,
        },
        start,
        end,
    }
}

fn pod(
    name: &str,
    node: &str,
    share: PodShare,
    start: DateTime<Utc>,
    end: Option<DateTime<Utc>>,
) -> PodUsage {
    PodUsage {
        namespace: "ml".to_owned(),
        pod: name.to_owned(),
        workload: "Job/train".to_owned(),
        node: node.to_owned(),
        share,
        start,
        end,
    }
}

fn gpus(n: i64) -> PodShare {
    PodShare::Requests(Amounts {
        cpu_millis: 1000,
        memory_bytes: 1 << 30,
        accelerators: n,
    })
}

#[test]
fn intervals_are_cut_at_clock_hours() {
    assert_eq!(
        hours(t(0, 30), t(2, 15)),
        vec![(t(0, 0), 1800.0), (t(1, 0), 3600.0), (t(2, 0), 900.0)]
    );
    assert!(hours(t(1, 0), t(1, 0)).is_empty());
    assert_eq!(hour_floor(t(3, 59)), t(3, 0));
}

#[test]
fn dominant_share_takes_accelerators_first_then_the_larger_of_cpu_and_memory() {
    let node = gpu_node("a", t(0, 0), None).allocatable;
    let two_gpus = Amounts {
        cpu_millis: 47_000,
        memory_bytes: 0,
        accelerators: 2,
    };
    assert_eq!(dominant_share(&two_gpus, &node), 0.5);
    let cpu_only = Amounts {
        cpu_millis: 12_000,
        memory_bytes: 96 << 30,
        accelerators: 0,
    };
    assert_eq!(dominant_share(&cpu_only, &node), 0.5);
    let too_big = Amounts {
        cpu_millis: 96_000,
        ..Amounts::default()
    };
    assert_eq!(dominant_share(&too_big, &node), 1.0);
    assert_eq!(dominant_share(&too_big, &Amounts::default()), 0.0);
}

#[test]
fn rows_of_a_node_hour_sum_to_its_cost_and_the_idle_share_is_last() {
    // 00:30–02:00 at $4/h: $2 in hour 0, $4 in hour 1.
    let nodes = [gpu_node("a", t(0, 30), Some(t(2, 0)))];
    let pods = [
        pod("p1", "a", gpus(2), t(0, 30), Some(t(2, 0))),
        pod("p2", "a", gpus(1), t(1, 0), Some(t(1, 30))),
    ];
    let rows = allocate(&nodes, &pods, t(6, 0));
    let hour0: Vec<_> = rows.iter().filter(|a| a.hour == t(0, 0)).collect();
    let hour1: Vec<_> = rows.iter().filter(|a| a.hour == t(1, 0)).collect();
    assert_eq!(hour0.len(), 2);
    assert_eq!(hour1.len(), 3);
    assert!(hour1.last().unwrap().pod.is_none());
    let sum = |rows: &[&Allocation]| rows.iter().map(|a| a.cost).sum::<f64>();
    assert!((sum(&hour0) - 2.0).abs() < 1e-12);
    assert!((sum(&hour1) - 4.0).abs() < 1e-12);
    // p1: half the node all hour; p2: a quarter for half the hour; idle: the rest.
    assert!((hour1[0].cost - 2.0).abs() < 1e-12);
    assert!((hour1[1].cost - 0.5).abs() < 1e-12);
    assert!((hour1[2].cost - 1.5).abs() < 1e-12);
    // GPU-hours: 4 paid in hour 1, 2 + 0.5 requested, 1.5 idle.
    assert!((hour1[2].gpu_hours - 1.5).abs() < 1e-12);
    assert!((hour1[1].quantity - 0.125).abs() < 1e-12);
}

#[test]
fn shares_above_the_whole_node_are_scaled_down_and_leave_no_idle() {
    let nodes = [gpu_node("a", t(0, 0), Some(t(1, 0)))];
    let pods = [
        pod("p1", "a", gpus(4), t(0, 0), None),
        pod("p2", "a", gpus(4), t(0, 0), None),
    ];
    let rows = allocate(&nodes, &pods, t(1, 0));
    assert_eq!(rows.len(), 3);
    assert!((rows[0].cost - 2.0).abs() < 1e-12);
    assert!((rows[1].cost - 2.0).abs() < 1e-12);
    assert_eq!(rows[2].cost, 0.0);
}

#[test]
fn intervals_of_one_pod_are_one_row_per_hour_and_pods_match_nodes_by_name_and_time() {
    // Node "a" twice (a name reused later); the pod ran on the first only.
    let nodes = [
        gpu_node("a", t(0, 0), Some(t(1, 0))),
        gpu_node("a", t(3, 0), None),
    ];
    let pods = [
        pod("p1", "a", gpus(1), t(0, 0), Some(t(0, 10))),
        pod("p1", "a", gpus(1), t(0, 20), Some(t(0, 30))),
        pod("p9", "elsewhere", gpus(4), t(0, 0), None),
    ];
    let rows = allocate(&nodes, &pods, t(4, 0));
    let p1: Vec<_> = rows.iter().filter(|a| a.pod == Some(0)).collect();
    assert_eq!(p1.len(), 1);
    assert!((p1[0].cost - 4.0 * 0.25 * (20.0 / 60.0)).abs() < 1e-12);
    assert!(rows.iter().all(|a| a.pod != Some(2)));
    // The later "a" runs open-ended up to `until` and is all idle.
    let later: Vec<_> = rows.iter().filter(|a| a.node == 1).collect();
    assert_eq!(later.len(), 1);
    assert!(later[0].pod.is_none());
    assert!((later[0].cost - 4.0).abs() < 1e-12);
}

#[test]
fn an_hourly_cost_share_is_the_cost_over_the_price() {
    let nodes = [gpu_node("a", t(0, 0), None)];
    let pods = [pod("p1", "a", PodShare::HourlyCost(1.0), t(0, 0), None)];
    let rows = allocate(&nodes, &pods, t(0, 30));
    assert!((rows[0].cost - 0.5).abs() < 1e-12);
    assert!((rows[0].gpu_hours - 0.5).abs() < 1e-12);
    assert!((rows[1].cost - 1.5).abs() < 1e-12);
}

#[test]
fn the_split_at_an_instant_is_per_hour_and_counts_only_what_runs() {
    let nodes = [
        gpu_node("a", t(0, 0), None),
        gpu_node("b", t(0, 0), Some(t(1, 0))),
    ];
    let pods = [
        pod("p1", "a", gpus(1), t(0, 0), None),
        pod("p2", "a", gpus(2), t(0, 0), Some(t(0, 30))),
        pod("p3", "b", gpus(4), t(0, 0), Some(t(1, 0))),
    ];
    let split = split_at(&nodes, &pods, t(2, 0));
    assert_eq!(split.len(), 1);
    assert_eq!(split[0].node, 0);
    assert_eq!(split[0].pods, vec![(0, 1.0)]);
    assert_eq!(split[0].idle, 3.0);
    let early = split_at(&nodes, &pods, t(0, 15));
    assert_eq!(early.len(), 2);
    assert_eq!(early[0].pods, vec![(0, 1.0), (1, 2.0)]);
    assert_eq!(early[1].pods, vec![(2, 4.0)]);
    assert_eq!(early[1].idle, 0.0);
}
