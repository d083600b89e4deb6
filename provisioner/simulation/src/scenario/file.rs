//! The scenario file as written: YAML, `deny_unknown_fields` at every level we own. Kubernetes
//! objects (NodePools, NodeClasses, DaemonSets, pod template specs) are kept as JSON values and
//! checked by `quartermaster-policies` and `quartermaster-cluster`, which name the field.

use std::collections::BTreeMap;
use std::fmt;

use chrono::{DateTime, Utc};
use quartermaster_sim::SimConfig;
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};
use serde_json::Value;

use crate::duration::Dur;

/// `apiVersion: quartermaster.dev/v1alpha1`, `kind: Scenario`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScenarioFile {
    /// Must be `quartermaster.dev/v1alpha1`.
    pub api_version: String,
    /// Must be `Scenario`.
    pub kind: String,
    /// Name and description.
    pub metadata: Metadata,
    /// Everything else.
    pub spec: Spec,
}

/// `metadata`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Metadata {
    /// Scenario name (reports, FOCUS `x_Cluster` unless `spec.cluster` says otherwise).
    pub name: String,
    /// One line for people.
    #[serde(default)]
    pub description: Option<String>,
}

/// `spec`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Spec {
    /// How long to simulate.
    pub duration: Dur,
    /// Seed of every random draw (workload and clouds); `--seed` overrides it.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Simulated start time (RFC 3339).
    #[serde(default)]
    pub start: Option<DateTime<Utc>>,
    /// Catalog override file (same format as `--catalog`), relative to the scenario file.
    #[serde(default)]
    pub catalog: Option<String>,
    /// Cluster name in reports.
    #[serde(default)]
    pub cluster: Option<String>,
    /// NodePool manifests (`quartermaster.dev/v1`).
    pub node_pools: Vec<Value>,
    /// NodeClass manifests.
    #[serde(default)]
    pub node_classes: Vec<Value>,
    /// DaemonSet manifests (overhead on every node they run on).
    #[serde(default)]
    pub daemon_sets: Vec<Value>,
    /// Dynamic Resource Allocation objects (`resource.k8s.io/v1` DeviceClasses,
    /// ResourceClaimTemplates, ResourceClaims) the workloads' `resourceClaims` name.
    #[serde(default)]
    pub dynamic_resources: Vec<Value>,
    /// How the simulated clouds behave (one simulated cloud per cloud the NodePools use).
    #[serde(default)]
    pub cloud: SimConfig,
    /// Engine timings.
    #[serde(default)]
    pub engine: EngineFile,
    /// What runs.
    pub workload: Vec<WorkloadFile>,
    /// CapacityBuffer manifests (`autoscaling.x-k8s.io/v1alpha1`): headroom kept warm for a
    /// workload of `workload`, named by `spec.scalableRef`.
    #[serde(default)]
    pub capacity_buffers: Vec<Value>,
    /// Changes during the run: NodePools edited (drift), prices changed.
    #[serde(default)]
    pub changes: Vec<ChangeFile>,
    /// When to measure the achievable saving (re-solving every running pod from scratch):
    /// offset from the start; default the end of the run.
    #[serde(default)]
    pub measure_at: Option<Dur>,
    /// Whether the provisioner knows which pods form a gang (default true). `false` runs the
    /// same workload with every pod provisioned for on its own (as an autoscaler without gang
    /// support does), while the cluster still starts a gang's pods only together.
    #[serde(default)]
    pub gang_aware: Option<bool>,
}

/// One entry of `spec.changes`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ChangeFile {
    /// Offset from the start.
    pub at: Dur,
    /// NodePool manifests that replace those of the same name from then on.
    #[serde(default)]
    pub node_pools: Vec<Value>,
    /// Price changes from then on (the engine is told a new catalog; new launches pay them).
    #[serde(default)]
    pub prices: Vec<PriceChangeFile>,
}

/// A price change: every offering of `instanceType` (of `capacityType` when given) priced
/// `factor` times what it was.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct PriceChangeFile {
    /// Instance type name, or a family prefix ending in `*` (`m7i.*`).
    pub instance_type: String,
    /// `spot` or `on-demand`; both when absent.
    #[serde(default)]
    pub capacity_type: Option<String>,
    /// Multiplier (> 0).
    pub factor: f64,
}

/// `spec.engine`: every field optional, defaults as in `EngineConfig::default()`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EngineFile {
    /// Batch idle window.
    #[serde(default)]
    pub batch_idle: Option<Dur>,
    /// Batch maximum window.
    #[serde(default)]
    pub batch_max: Option<Dur>,
    /// Accelerator readiness budget.
    #[serde(default)]
    pub accelerator_ready_budget: Option<Dur>,
    /// Registration budget.
    #[serde(default)]
    pub registration_budget: Option<Dur>,
    /// How long an offering stays unavailable after a capacity error.
    #[serde(default)]
    pub unavailable_ttl: Option<Dur>,
    /// Retry period of unschedulable pods.
    #[serde(default)]
    pub unschedulable_retry: Option<Dur>,
    /// Longest backoff of a retried cloud call.
    #[serde(default)]
    pub max_backoff: Option<Dur>,
    /// How often consolidation looks.
    #[serde(default)]
    pub consolidation_interval: Option<Dur>,
    /// Least fraction a consolidation move must save.
    #[serde(default)]
    pub consolidation_min_saving: Option<f64>,
    /// Most nodes one consolidation move removes.
    #[serde(default)]
    pub max_move_nodes: Option<usize>,
    /// How long a gang's NodeClaims may take to be launched before they are rolled back.
    #[serde(default)]
    pub gang_launch_timeout: Option<Dur>,
}

/// One workload: a stream of Jobs or a Deployment.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WorkloadFile {
    /// Unique in the scenario; pods are named `<name>-<n>` (Deployment) or `<name>-<job>-<i>` (Job).
    pub name: String,
    /// Namespace (default `default`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// `Job` or `Deployment`.
    pub kind: String,
    /// A Kubernetes PodTemplateSpec.
    pub template: PodTemplateFile,
    /// Job: when jobs arrive.
    #[serde(default)]
    pub arrivals: Option<Vec<ArrivalFile>>,
    /// Job: pods per job (default 1).
    #[serde(default)]
    pub parallelism: Option<u32>,
    /// Job: how long each pod runs once bound.
    #[serde(default)]
    pub duration: Option<DurationDist>,
    /// Job: an evicted pod resumes where it stopped (default: it restarts from scratch).
    #[serde(default)]
    pub checkpointed: Option<bool>,
    /// Job: each job's pods are a gang (a PodGroup of `parallelism` members): placed together,
    /// in one zone, or not at all, and started only once all of them are bound.
    #[serde(default)]
    pub gang: Option<bool>,
    /// Deployment: replicas from the start.
    #[serde(default)]
    pub replicas: Option<u32>,
    /// Deployment: replica changes at given offsets.
    #[serde(default)]
    pub schedule: Option<Vec<ScheduleStep>>,
    /// Deployment: replicas following a day curve.
    #[serde(default)]
    pub diurnal: Option<Diurnal>,
    /// A PodDisruptionBudget over the workload's pods: at most this many unavailable at once.
    #[serde(default)]
    pub max_unavailable: Option<u32>,
}

/// `template`: a PodTemplateSpec.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PodTemplateFile {
    /// Labels and annotations.
    #[serde(default)]
    pub metadata: TemplateMetadata,
    /// A PodSpec (checked by `quartermaster-cluster`).
    pub spec: Value,
}

/// `template.metadata`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateMetadata {
    /// Pod labels.
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    /// Pod annotations.
    #[serde(default)]
    pub annotations: BTreeMap<String, String>,
}

/// One entry of `arrivals`: exactly one of `at`, `every` or `ratePerHour`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ArrivalFile {
    /// One arrival at this offset.
    #[serde(default)]
    pub at: Option<Dur>,
    /// Periodic arrivals with this period, from `from`.
    #[serde(default)]
    pub every: Option<Dur>,
    /// With `every`: how many (default: until `until` or the end).
    #[serde(default)]
    pub count: Option<u32>,
    /// Poisson arrivals at this mean rate per hour, between `from` and `until`.
    #[serde(default)]
    pub rate_per_hour: Option<f64>,
    /// Window start for `every` / `ratePerHour` (default 0).
    #[serde(default)]
    pub from: Option<Dur>,
    /// Window end for `every` / `ratePerHour` (default: the end of the run).
    #[serde(default)]
    pub until: Option<Dur>,
    /// Jobs submitted together at each arrival (default 1).
    #[serde(default)]
    pub burst: Option<u32>,
}

/// `schedule` entry of a Deployment.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleStep {
    /// Offset from the start.
    pub at: Dur,
    /// Replicas from then on.
    pub replicas: u32,
}

/// `diurnal`: replicas = min + (max - min) · (1 + cos(2π (t - peakAt) / period)) / 2, rounded,
/// re-evaluated every `step`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Diurnal {
    /// Replicas at the trough.
    pub min: u32,
    /// Replicas at the peak.
    pub max: u32,
    /// Offset of the first peak from the start (time of day when the start is midnight).
    pub peak_at: Dur,
    /// Period of the curve (default 24h).
    #[serde(default)]
    pub period: Option<Dur>,
    /// How often the replica count is changed (default 15m).
    #[serde(default)]
    pub step: Option<Dur>,
}

/// A job pod's run time: a fixed duration (`2h`), uniform (`{min, max}`) or log-normal
/// (`{median, p90}`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DurationDist {
    /// Always this long.
    Fixed(Dur),
    /// Uniform between the two.
    Uniform {
        /// Shortest.
        min: Dur,
        /// Longest.
        max: Dur,
    },
    /// Log-normal with this median and 90th percentile.
    LogNormal {
        /// Median.
        median: Dur,
        /// 90th percentile.
        p90: Dur,
    },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct DistFile {
    #[serde(default)]
    min: Option<Dur>,
    #[serde(default)]
    max: Option<Dur>,
    #[serde(default)]
    median: Option<Dur>,
    #[serde(default)]
    p90: Option<Dur>,
}

impl<'de> Deserialize<'de> for DurationDist {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct DistVisitor;

        impl<'de> Visitor<'de> for DistVisitor {
            type Value = DurationDist;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration (\"2h\"), {min, max} or {median, p90}")
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<DurationDist, E> {
                crate::duration::parse(s)
                    .map(DurationDist::Fixed)
                    .map_err(E::custom)
            }

            fn visit_u64<E: de::Error>(self, n: u64) -> Result<DurationDist, E> {
                Dur::deserialize(de::value::U64Deserializer::<E>::new(n)).map(DurationDist::Fixed)
            }

            fn visit_i64<E: de::Error>(self, n: i64) -> Result<DurationDist, E> {
                Dur::deserialize(de::value::I64Deserializer::<E>::new(n)).map(DurationDist::Fixed)
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<DurationDist, A::Error> {
                let f = DistFile::deserialize(de::value::MapAccessDeserializer::new(map))?;
                match (f.min, f.max, f.median, f.p90) {
                    (Some(min), Some(max), None, None) => Ok(DurationDist::Uniform { min, max }),
                    (None, None, Some(median), Some(p90)) => {
                        Ok(DurationDist::LogNormal { median, p90 })
                    }
                    _ => Err(de::Error::custom(
                        "give either {min, max} (uniform) or {median, p90} (log-normal)",
                    )),
                }
            }
        }

        d.deserialize_any(DistVisitor)
    }
}
