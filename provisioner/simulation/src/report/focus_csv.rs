//! `cost.csv`: the bill, allocated, in FOCUS 1.2 columns — `quartermaster-cost`'s rule and
//! writer (the same the controller's `/cost` and `quartermaster report` use), fed from the run's
//! record.
//!
//! One row per pod per node per clock hour, plus one idle row per node-hour for the share no
//! pod took (see [`quartermaster_cost::allocate`]). Rows of one node-hour sum to its cost, so
//! `BilledCost` sums to the summary's `total_cost`.

use std::io::{self, Write};

use chrono::{DateTime, Utc};
use quartermaster_cost::{Amounts, Billing, CostError, NodeUsage, PodShare, PodUsage};
use quartermaster_solver::resources::{CPU, MEMORY};

use crate::record::Record;
use crate::scenario::Scenario;

pub use quartermaster_cost::COLUMNS;

/// The run's instances as billed node intervals, in launch order (still running: `end: None`).
pub fn node_usage(rec: &Record) -> Vec<NodeUsage> {
    rec.instances
        .iter()
        .map(|inst| NodeUsage {
            node: inst.node.clone().unwrap_or_default(),
            nodeclaim: inst.claim.clone(),
            nodepool: inst.node_pool.clone(),
            cloud: inst.cloud,
            region: inst.region.clone(),
            zone: inst.zone.clone(),
            instance_type: inst.instance_type.clone(),
            capacity_type: inst.capacity_type,
            price_per_hour: inst.price_per_hour,
            list_price_per_hour: Some(inst.list_price_per_hour),
            price_source: inst.price_source.clone(),
            accelerator: inst.accelerator_model.clone(),
            accelerator_count: inst.accelerators,
            allocatable: Amounts {
                cpu_millis: inst.allocatable.get(CPU),
                memory_bytes: inst.allocatable.get(MEMORY),
                accelerators: i64::from(inst.accelerators),
            },
            start: inst.start,
            end: inst.end,
        })
        .collect()
}

/// The run's pod segments as pod intervals on named nodes, in pod creation order; then the
/// room CapacityBuffers held (workload `CapacityBuffer/<name>`: headroom).
pub fn pod_usage(scenario: &Scenario, rec: &Record) -> Vec<PodUsage> {
    let mut usage = running_pods(scenario, rec);
    usage.extend(headroom_usage(rec));
    usage
}

/// The room CapacityBuffers held, as pod intervals of their placeholders.
fn headroom_usage(rec: &Record) -> impl Iterator<Item = PodUsage> + '_ {
    rec.headroom.iter().map(|h| {
        let accelerators = rec.instances[h.instance].accelerators;
        let accelerator_slot = crate::cluster::accelerators(&h.requests);
        PodUsage {
            namespace: h.pod.namespace.clone(),
            pod: h.pod.name.clone(),
            workload: format!(
                "CapacityBuffer/{}",
                h.buffer
                    .split_once('/')
                    .map_or(h.buffer.as_str(), |(_, n)| n)
            ),
            node: rec.instances[h.instance].node.clone().unwrap_or_default(),
            share: PodShare::Requests(Amounts {
                cpu_millis: h.requests.get(CPU),
                memory_bytes: h.requests.get(MEMORY),
                accelerators: accelerator_slot.min(i64::from(accelerators)),
            }),
            start: h.start,
            end: Some(h.end),
        }
    })
}

/// What the room CapacityBuffers held cost, and the accelerator-hours it held: their
/// placeholders' allocated share of the node-hours they sat on.
pub fn headroom_cost(scenario: &Scenario, rec: &Record) -> (f64, f64) {
    if rec.headroom.is_empty() {
        return (0.0, 0.0);
    }
    let nodes = node_usage(rec);
    let pods = pod_usage(scenario, rec);
    let first_headroom = pods.len() - rec.headroom.len();
    let mut cost = 0.0;
    let mut gpu_hours = 0.0;
    for a in quartermaster_cost::allocate(&nodes, &pods, scenario.end()) {
        if a.pod.is_some_and(|p| p >= first_headroom) {
            cost += a.cost;
            gpu_hours += a.gpu_hours;
        }
    }
    (cost, gpu_hours)
}

/// The run's pod segments as pod intervals on named nodes, in pod creation order.
fn running_pods(scenario: &Scenario, rec: &Record) -> Vec<PodUsage> {
    let mut segments: Vec<_> = rec.segments.iter().collect();
    segments.sort_by_key(|s| s.pod);
    segments
        .into_iter()
        .map(|s| {
            let pod = &rec.pods[s.pod];
            let workload = &scenario.workloads[pod.workload];
            PodUsage {
                namespace: pod.id.namespace.clone(),
                pod: pod.id.name.clone(),
                workload: format!("{}/{}", workload.kind_name(), workload.name),
                node: rec.instances[s.instance].node.clone().unwrap_or_default(),
                share: PodShare::Requests(Amounts {
                    cpu_millis: pod.requests.get(CPU),
                    memory_bytes: pod.requests.get(MEMORY),
                    accelerators: pod.accelerators,
                }),
                start: s.start,
                end: Some(s.end),
            }
        })
        .collect()
}

/// Writes `cost.csv`; returns the sum of `BilledCost` as written.
pub fn write(scenario: &Scenario, rec: &Record, out: &mut dyn Write) -> io::Result<f64> {
    let end: DateTime<Utc> = scenario.end();
    let billing = Billing {
        cluster: scenario.cluster.clone(),
        account_id: "quartermaster-sim-{cloud}".to_owned(),
        account_name: format!("{} (simulated {{cloud}})", scenario.cluster),
    };
    quartermaster_cost::write_csv(
        &node_usage(rec),
        &pod_usage(scenario, rec),
        end,
        &billing,
        out,
    )
    .map_err(|e| match e {
        CostError::Io(e) => e,
        other => io::Error::other(other.to_string()),
    })
}
