//! `/metrics`: what the controller does and what the fleet costs, in Prometheus text format.
//!
//! Metric names are a contract (dashboards and `quartermaster report --prometheus` read them):
//! extend, never rename. Per-node and per-pod cost gauges are rewritten whole on every pass, so
//! series of nodes and pods that are gone disappear.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// `nodepool`: NodeClaims created.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PoolLabels {
    /// The NodePool.
    pub nodepool: String,
}

/// `nodepool`, `reason`: NodeClaims terminated.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TerminationLabels {
    /// The NodePool.
    pub nodepool: String,
    /// Why the engine deleted the claim (`DeleteReason`).
    pub reason: String,
}

/// `error`: launches that failed.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LaunchFailureLabels {
    /// The error's kind (`launch::error_kind`).
    pub error: String,
}

/// `nodepool`, `instance_type`, `capacity_type`: nodes.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeCountLabels {
    /// The NodePool.
    pub nodepool: String,
    /// The instance type.
    pub instance_type: String,
    /// The capacity type.
    pub capacity_type: String,
}

/// `nodepool`, `capacity_type`: fleet cost.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FleetCostLabels {
    /// The NodePool.
    pub nodepool: String,
    /// The capacity type.
    pub capacity_type: String,
}

/// One node's cost series.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NodeCostLabels {
    /// The Node.
    pub node: String,
    /// Its NodeClaim.
    pub nodeclaim: String,
    /// Its NodePool.
    pub nodepool: String,
    /// Its cloud.
    pub cloud: String,
    /// Its region.
    pub region: String,
    /// Its zone.
    pub zone: String,
    /// Its instance type.
    pub instance_type: String,
    /// Its capacity type.
    pub capacity_type: String,
    /// Its accelerator (empty for none).
    pub accelerator: String,
    /// How many accelerators it has.
    pub accelerator_count: String,
    /// Where its price comes from.
    pub price_source: String,
}

/// One pod's allocated-cost series.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PodCostLabels {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod.
    pub pod: String,
    /// Its workload.
    pub workload: String,
    /// Its node.
    pub node: String,
    /// The node's NodePool.
    pub nodepool: String,
    /// The node's capacity type.
    pub capacity_type: String,
}

/// `kind`, `reason`: voluntary disruption commands and their expected savings.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DisruptionLabels {
    /// The command's kind.
    pub kind: String,
    /// Its reason.
    pub reason: String,
}

/// `condition`: node repairs and reboots.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RepairLabels {
    /// The condition that broke the node.
    pub condition: String,
}

type FloatGauge = Gauge<f64, AtomicU64>;

/// Upper bounds of `quartermaster_nodeclaim_create_seconds`' buckets (one at 1 s, the goal).
const NODECLAIM_CREATE_BUCKETS: [f64; 13] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 40.0,
];

/// Every metric the controller exports.
pub struct Metrics {
    registry: Registry,
    /// Pods waiting for a node Quartermaster provisions.
    pub pods_pending: Gauge,
    /// Seconds from a pod's creation until it was bound to a Quartermaster node.
    pub pod_pending_seconds: Histogram,
    /// Seconds one solver run (a poll of the engine that solved) took.
    pub solve_seconds: Histogram,
    /// Seconds one pass of the provisioning loop took (observe, decide, dispatch).
    pub reconcile_seconds: Histogram,
    /// NodeClaims created, by NodePool.
    pub nodeclaims_created: Family<PoolLabels, Counter>,
    /// NodeClaims terminated, by NodePool and reason.
    pub nodeclaims_terminated: Family<TerminationLabels, Counter>,
    /// Launches that failed, by error kind.
    pub launch_failures: Family<LaunchFailureLabels, Counter>,
    /// Nodes by NodePool, instance type and capacity type.
    pub nodes: Family<NodeCountLabels, Gauge>,
    /// Fleet cost per hour by NodePool and capacity type, dollars.
    pub fleet_hourly_cost: Family<FleetCostLabels, FloatGauge>,
    /// Accelerator-seconds paid for while not allocatable (launching, registering, plugin late).
    pub gpu_seconds_not_allocatable: Counter<f64, AtomicU64>,
    /// Hourly cost removed by consolidation (deleted or replaced nodes), dollars per hour.
    pub consolidation_savings: Counter<f64, AtomicU64>,
    /// Consolidation moves not made because, once the kube-scheduler has bound the pods they
    /// displace by its own scores (`--scheduler-scoring`), they would not save enough.
    pub consolidation_moves_unprofitable_as_scheduled: Counter,
    /// Voluntary disruption commands decided, by kind and reason.
    pub disruption_commands: Family<DisruptionLabels, Counter>,
    /// Expected saving of those commands, dollars per hour, by kind and reason.
    pub disruption_expected_savings: Family<DisruptionLabels, Counter<f64, AtomicU64>>,
    /// Per-node hourly cost (labels: node, nodeclaim, nodepool, cloud, region, zone,
    /// instance_type, capacity_type, accelerator, accelerator_count, price_source).
    pub node_hourly_cost: Family<NodeCostLabels, FloatGauge>,
    /// Per-pod allocated hourly cost (labels: namespace, pod, workload, node, nodepool,
    /// capacity_type): the node's cost split over its pods.
    pub pod_allocated_hourly_cost: Family<PodCostLabels, FloatGauge>,
    /// 1 on the replica that holds the leader lease, 0 elsewhere.
    pub leader: Gauge,
    /// Seconds from the first pod of a batch to the solve that closed it (the batch window:
    /// `--batch-idle-duration` after the last pod, at most `--batch-max-duration`).
    pub batch_window_seconds: Histogram,
    /// Seconds from the pass that decided a launch to its NodeClaim being created on the API
    /// server: what the controller adds to the batch window before a claim exists.
    pub nodeclaim_create_seconds: Histogram,
    /// Nodes replaced by node repair, by the condition that broke them
    /// (`AcceleratedHardwareReady=False`).
    pub repairs: Family<RepairLabels, Counter>,
    /// Nodes node repair rebooted in place, by the condition that broke them.
    pub repair_reboots: Family<RepairLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every metric registered.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("quartermaster");
        let pods_pending = Gauge::default();
        let pod_pending_seconds = Histogram::new(exponential_buckets(0.5, 2.0, 14));
        let solve_seconds = Histogram::new(exponential_buckets(0.0001, 4.0, 12));
        let reconcile_seconds = Histogram::new(exponential_buckets(0.0001, 4.0, 12));
        let nodeclaims_created = Family::<PoolLabels, Counter>::default();
        let nodeclaims_terminated = Family::<TerminationLabels, Counter>::default();
        let launch_failures = Family::<LaunchFailureLabels, Counter>::default();
        let nodes = Family::<NodeCountLabels, Gauge>::default();
        let fleet_hourly_cost = Family::<FleetCostLabels, FloatGauge>::default();
        let gpu_seconds_not_allocatable = Counter::<f64, AtomicU64>::default();
        let consolidation_savings = Counter::<f64, AtomicU64>::default();
        let consolidation_moves_unprofitable_as_scheduled = Counter::default();
        let node_hourly_cost = Family::<NodeCostLabels, FloatGauge>::default();
        let disruption_commands = Family::<DisruptionLabels, Counter>::default();
        let disruption_expected_savings =
            Family::<DisruptionLabels, Counter<f64, AtomicU64>>::default();
        registry.register(
            "disruption_commands",
            "Voluntary disruption commands decided, by kind and reason",
            disruption_commands.clone(),
        );
        registry.register(
            "disruption_expected_savings_dollars_per_hour",
            "Expected saving of the disruption commands decided, dollars per hour, by kind and reason",
            disruption_expected_savings.clone(),
        );
        let pod_allocated_hourly_cost = Family::<PodCostLabels, FloatGauge>::default();
        let leader = Gauge::default();
        let batch_window_seconds = Histogram::new(exponential_buckets(0.125, 2.0, 10));
        let nodeclaim_create_seconds = Histogram::new(NODECLAIM_CREATE_BUCKETS.iter().copied());
        registry.register(
            "batch_window_seconds",
            "Seconds from the first pod of a batch to the solve that closed it",
            batch_window_seconds.clone(),
        );
        registry.register(
            "nodeclaim_create_seconds",
            "Seconds from the pass that decided a launch to its NodeClaim being created",
            nodeclaim_create_seconds.clone(),
        );
        let repairs = Family::<RepairLabels, Counter>::default();
        registry.register(
            "repairs",
            "Nodes replaced by node repair, by the condition that broke them",
            repairs.clone(),
        );
        let repair_reboots = Family::<RepairLabels, Counter>::default();
        registry.register(
            "repair_reboots",
            "Nodes rebooted in place by node repair, by the condition that broke them",
            repair_reboots.clone(),
        );
        let traffic = crate::client::client_traffic();
        registry.register(
            "kube_client_requests",
            "Requests the controller's Kubernetes client sent",
            traffic.requests.clone(),
        );
        registry.register(
            "kube_client_throttled_seconds",
            "Seconds the client's requests waited for a rate-limit token (--kube-client-qps)",
            traffic.throttled_seconds.clone(),
        );
        registry.register(
            "kube_client_qps_limit",
            "The client's sustained request rate limit (--kube-client-qps)",
            traffic.qps_limit.clone(),
        );
        registry.register(
            "pods_pending",
            "Pods waiting for a node Quartermaster provisions",
            pods_pending.clone(),
        );
        registry.register(
            "pod_pending_seconds",
            "Seconds from a pod's creation until it was bound to a Quartermaster node",
            pod_pending_seconds.clone(),
        );
        registry.register(
            "solve_duration_seconds",
            "Seconds one engine poll that ran the solver took",
            solve_seconds.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Seconds one pass of the provisioning loop took",
            reconcile_seconds.clone(),
        );
        registry.register(
            "nodeclaims_created",
            "NodeClaims created, by NodePool",
            nodeclaims_created.clone(),
        );
        registry.register(
            "nodeclaims_terminated",
            "NodeClaims terminated, by NodePool and reason",
            nodeclaims_terminated.clone(),
        );
        registry.register(
            "launch_failures",
            "Launches that failed, by error kind",
            launch_failures.clone(),
        );
        registry.register(
            "nodes",
            "Nodes by NodePool, instance type and capacity type",
            nodes.clone(),
        );
        registry.register(
            "fleet_hourly_cost_dollars",
            "Fleet cost per hour by NodePool and capacity type",
            fleet_hourly_cost.clone(),
        );
        registry.register(
            "gpu_seconds_paid_not_allocatable",
            "Accelerator-seconds paid for while not allocatable",
            gpu_seconds_not_allocatable.clone(),
        );
        registry.register(
            "consolidation_savings_dollars_per_hour",
            "Hourly cost removed by consolidation",
            consolidation_savings.clone(),
        );
        registry.register(
            "consolidation_moves_unprofitable_as_scheduled",
            "Consolidation moves not made: bound by the kube-scheduler's scores, they would not save",
            consolidation_moves_unprofitable_as_scheduled.clone(),
        );
        registry.register(
            "node_hourly_cost_dollars",
            "Hourly cost of each node",
            node_hourly_cost.clone(),
        );
        registry.register(
            "pod_allocated_hourly_cost_dollars",
            "Hourly cost allocated to each pod on a Quartermaster node",
            pod_allocated_hourly_cost.clone(),
        );
        registry.register(
            "leader",
            "1 on the replica that holds the leader lease",
            leader.clone(),
        );
        Self {
            registry,
            pods_pending,
            pod_pending_seconds,
            solve_seconds,
            reconcile_seconds,
            nodeclaims_created,
            nodeclaims_terminated,
            launch_failures,
            nodes,
            fleet_hourly_cost,
            gpu_seconds_not_allocatable,
            consolidation_savings,
            consolidation_moves_unprofitable_as_scheduled,
            disruption_commands,
            disruption_expected_savings,
            node_hourly_cost,
            pod_allocated_hourly_cost,
            leader,
            batch_window_seconds,
            nodeclaim_create_seconds,
            repairs,
            repair_reboots,
        }
    }

    /// The Prometheus text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Encoding into a String cannot fail.
        let _ = encode(&mut out, &self.registry);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_the_contract() {
        let m = Metrics::new();
        let s = |v: &str| v.to_owned();
        m.node_hourly_cost
            .get_or_create(&NodeCostLabels {
                node: s("n1"),
                nodeclaim: s("c1"),
                nodepool: s("gpu"),
                cloud: s("aws"),
                region: s("us-east-1"),
                zone: s("us-east-1a"),
                instance_type: s("g5.xlarge"),
                capacity_type: s("spot"),
                accelerator: s("a10g"),
                accelerator_count: s("1"),
                price_source: s("catalog"),
            })
            .set(1.5);
        m.nodeclaims_created
            .get_or_create(&PoolLabels { nodepool: s("gpu") })
            .inc();
        m.solve_seconds.observe(0.01);
        m.repairs
            .get_or_create(&RepairLabels {
                condition: s("Ready=False"),
            })
            .inc();
        m.repair_reboots
            .get_or_create(&RepairLabels {
                condition: s("AcceleratedHardwareReady=False (NvidiaXID48Error)"),
            })
            .inc();
        let disruption = DisruptionLabels {
            kind: s("multi_delete"),
            reason: s("underutilized"),
        };
        m.disruption_commands.get_or_create(&disruption).inc();
        m.consolidation_moves_unprofitable_as_scheduled.inc_by(2);
        m.disruption_expected_savings
            .get_or_create(&disruption)
            .inc_by(0.6);
        let text = m.encode();
        for name in [
            "quartermaster_pods_pending ",
            "quartermaster_pod_pending_seconds_bucket",
            "quartermaster_solve_duration_seconds_count 1",
            "quartermaster_reconcile_duration_seconds_count 0",
            "quartermaster_nodeclaims_created_total{nodepool=\"gpu\"} 1",
            // Every label key of a node's cost series, in this order (dashboards read them).
            "quartermaster_node_hourly_cost_dollars{node=\"n1\",nodeclaim=\"c1\",nodepool=\"gpu\",cloud=\"aws\",region=\"us-east-1\",zone=\"us-east-1a\",instance_type=\"g5.xlarge\",capacity_type=\"spot\",accelerator=\"a10g\",accelerator_count=\"1\",price_source=\"catalog\"} 1.5",
            "quartermaster_gpu_seconds_paid_not_allocatable_total",
            "quartermaster_consolidation_savings_dollars_per_hour_total",
            "quartermaster_consolidation_moves_unprofitable_as_scheduled_total 2",
            "quartermaster_disruption_commands_total{kind=\"multi_delete\",reason=\"underutilized\"} 1",
            "quartermaster_disruption_expected_savings_dollars_per_hour_total{kind=\"multi_delete\",reason=\"underutilized\"} 0.6",
            "quartermaster_batch_window_seconds_bucket",
            "quartermaster_nodeclaim_create_seconds_bucket",
            "quartermaster_kube_client_requests_total",
            "quartermaster_kube_client_throttled_seconds_total",
            "quartermaster_kube_client_qps_limit",
            "quartermaster_repairs_total{condition=\"Ready=False\"} 1",
            "quartermaster_repair_reboots_total{condition=\"AcceleratedHardwareReady=False (NvidiaXID48Error)\"} 1",
            "# EOF",
        ] {
            assert!(text.contains(name), "{name} missing from:\n{text}");
        }
    }
}
