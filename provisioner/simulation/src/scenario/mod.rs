//! Scenarios: the file format ([`file`]), its validation into a [`Scenario`] ([`validate`]),
//! and the Kubernetes side of it resolved for the engine ([`world`]).
//!
//! The format is documented in `scenarios/README.md`.

mod chaos;
pub mod file;
mod validate;
pub mod world;

use std::path::Path;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_engine::EngineConfig;
use quartermaster_pricing::Catalog;
use quartermaster_sim::SimConfig;
use serde_json::Value;

pub use file::{DurationDist, TemplateMetadata};

use crate::duration::Dur;
use crate::error::SimulationError;

/// The scenario that runs when none is given: small, a few simulated hours, with spot, a
/// capacity fallback and an interruption.
pub const DEFAULT_SCENARIO: &str = include_str!("../../../../scenarios/default.yaml");
/// How the embedded default is named in messages.
pub const DEFAULT_SCENARIO_NAME: &str = "<embedded default scenario>";
/// The only `apiVersion` of scenario files so far.
pub const API_VERSION: &str = "quartermaster.dev/v1alpha1";
/// Default seed when the file gives none.
pub const DEFAULT_SEED: u64 = 1;
/// Default simulated start when the file gives none (a Monday, midnight UTC).
pub const DEFAULT_START: &str = "2026-01-05T00:00:00Z";

/// A validated scenario, ready to run.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// The file as given (for messages).
    pub file: String,
    /// `metadata.name`.
    pub name: String,
    /// `metadata.description`.
    pub description: Option<String>,
    /// Cluster name in reports.
    pub cluster: String,
    /// How long to simulate.
    pub duration: TimeDelta,
    /// Seed of every random draw.
    pub seed: u64,
    /// Simulated start.
    pub start: DateTime<Utc>,
    /// The price catalog.
    pub catalog: Catalog,
    /// NodePool manifests.
    pub node_pools: Vec<Value>,
    /// NodeClass manifests.
    pub node_classes: Vec<Value>,
    /// DaemonSet manifests.
    pub daemon_sets: Vec<Value>,
    /// DRA objects (DeviceClasses, ResourceClaimTemplates, ResourceClaims).
    pub dynamic_resources: Vec<Value>,
    /// Simulated cloud behaviour.
    pub cloud: SimConfig,
    /// Engine timings.
    pub engine: EngineConfig,
    /// What runs.
    pub workloads: Vec<Workload>,
    /// Changes during the run, in time order.
    pub changes: Vec<Change>,
    /// CapacityBuffers over the workloads (`spec.capacityBuffers`).
    pub buffers: Vec<ScenarioBuffer>,
    /// When the achievable saving is measured (default: the end).
    pub measure_at: Option<DateTime<Utc>>,
    /// Whether the engine is told which pods form a gang (`spec.gangAware`, default true).
    pub gang_aware: bool,
    /// Who binds pods: a kube-scheduler stand-in (default) or the engine's plan
    /// (`simulate --binder`).
    pub binder: crate::scheduler::Binder,
    /// The chaos seed whose faults are laid over the clouds (`simulate --chaos`), if any.
    pub chaos: Option<u64>,
    /// Driver crashes per simulated hour (`--chaos`: the engine is thrown away and rebuilt from
    /// the cluster and the clouds; see the driver's `restart` module). 0 without chaos.
    pub driver_crashes_per_hour: f64,
}

/// A CapacityBuffer of the scenario: headroom for copies of one workload's pod.
#[derive(Debug, Clone)]
pub struct ScenarioBuffer {
    /// `metadata.name`.
    pub name: String,
    /// The workload's namespace (a buffer names a workload of its own namespace).
    pub namespace: String,
    /// Index into [`Scenario::workloads`].
    pub workload: usize,
    /// `spec`, as the API has it.
    pub spec: quartermaster_cluster::capacity_buffer::CapacityBufferSpec,
}

/// A change during the run.
#[derive(Debug, Clone)]
pub struct Change {
    /// When.
    pub at: DateTime<Utc>,
    /// NodePool manifests replacing those of the same name.
    pub node_pools: Vec<Value>,
    /// Price changes: (instance type or `family.*`, capacity type or both, factor).
    pub prices: Vec<(String, Option<quartermaster_pricing::CapacityType>, f64)>,
}

impl Change {
    /// `catalog` with this change's prices applied.
    pub fn apply_prices(&self, catalog: &Catalog) -> Catalog {
        let mut types = catalog.instance_types().to_vec();
        for (name, capacity, factor) in &self.prices {
            for it in &mut types {
                let hit = match name.strip_suffix('*') {
                    Some(prefix) => it.name.starts_with(prefix),
                    None => it.name == *name,
                };
                if !hit {
                    continue;
                }
                for o in &mut it.offerings {
                    if capacity.is_none_or(|c| c == o.capacity_type) {
                        o.price_per_hour *= factor;
                    }
                }
            }
        }
        Catalog::new(types)
    }
}

/// A workload of the scenario.
#[derive(Debug, Clone)]
pub struct Workload {
    /// Name (unique in the scenario).
    pub name: String,
    /// Namespace.
    pub namespace: String,
    /// Job stream or Deployment.
    pub kind: WorkloadKind,
    /// Pod template labels and annotations.
    pub metadata: TemplateMetadata,
    /// Pod spec.
    pub spec: Value,
    /// A PodDisruptionBudget over its pods: at most this many unavailable at once.
    pub max_unavailable: Option<u32>,
}

impl Workload {
    /// Whether its pods are annotated do-not-disrupt.
    pub fn do_not_disrupt(&self) -> bool {
        quartermaster_engine::do_not_disrupt(&self.metadata.annotations)
    }

    /// Whether its pods are annotated `quartermaster.dev/checkpointed` (what the engine is told;
    /// whether a Job's progress survives an eviction is its spec's `checkpointed`).
    pub fn annotated_checkpointed(&self) -> bool {
        quartermaster_engine::checkpointed(&self.metadata.annotations)
    }
}

impl Workload {
    /// `Job` or `Deployment`.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            WorkloadKind::Job(_) => "Job",
            WorkloadKind::Deployment(_) => "Deployment",
        }
    }
}

/// What kind of workload, with its parameters.
#[derive(Debug, Clone)]
pub enum WorkloadKind {
    /// Jobs arriving over time.
    Job(JobSpec),
    /// A Deployment whose replica count changes over time.
    Deployment(DeploymentSpec),
}

/// A stream of Jobs.
#[derive(Debug, Clone)]
pub struct JobSpec {
    /// When jobs arrive.
    pub arrivals: Vec<Arrival>,
    /// Pods per job.
    pub parallelism: u32,
    /// Run time of each job (its pods share it).
    pub duration: DurationDist,
    /// Whether evicted pods resume instead of restarting.
    pub checkpointed: bool,
    /// Whether each job's pods are a gang of `parallelism` members.
    pub gang: bool,
}

/// When jobs arrive.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrival {
    /// `burst` jobs at one offset.
    At {
        /// Offset from the start.
        at: Dur,
        /// Jobs at once.
        burst: u32,
    },
    /// `burst` jobs every `every` from `from`, `count` times (or until `until`).
    Every {
        /// Period.
        every: Dur,
        /// How many arrivals at most.
        count: Option<u32>,
        /// First arrival.
        from: Dur,
        /// No arrival at or after this offset.
        until: Option<Dur>,
        /// Jobs per arrival.
        burst: u32,
    },
    /// Poisson arrivals of `burst` jobs.
    Poisson {
        /// Mean arrivals per hour.
        rate_per_hour: f64,
        /// Window start.
        from: Dur,
        /// Window end (the end of the run when absent).
        until: Option<Dur>,
        /// Jobs per arrival.
        burst: u32,
    },
}

/// A Deployment's replicas over time.
#[derive(Debug, Clone)]
pub struct DeploymentSpec {
    /// Replicas at the start.
    pub replicas: u32,
    /// Changes at offsets, in order.
    pub schedule: Vec<(Dur, u32)>,
    /// A day curve (replaces `replicas` and `schedule`).
    pub diurnal: Option<DiurnalSpec>,
}

/// A day curve of replicas.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DiurnalSpec {
    /// Trough.
    pub min: u32,
    /// Peak.
    pub max: u32,
    /// First peak.
    pub peak_at: Dur,
    /// Period.
    pub period: Dur,
    /// Re-evaluation step.
    pub step: Dur,
}

impl Scenario {
    /// Reads and validates a scenario file. A catalog path in the file is relative to the file.
    pub fn load(path: &Path) -> Result<Scenario, SimulationError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| SimulationError::Read {
            file: file.clone(),
            message: e.to_string(),
        })?;
        Scenario::parse(&file, &text, path.parent())
    }

    /// The embedded default scenario.
    pub fn embedded_default() -> Result<Scenario, SimulationError> {
        Scenario::parse(DEFAULT_SCENARIO_NAME, DEFAULT_SCENARIO, None)
    }

    /// Parses and validates scenario text. `file` names it in messages; `base` is the directory
    /// a `catalog:` path is relative to (`None`: a catalog path is an error).
    pub fn parse(file: &str, text: &str, base: Option<&Path>) -> Result<Scenario, SimulationError> {
        let de = serde_norway::Deserializer::from_str(text);
        let parsed: file::ScenarioFile = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." {
                "<root>".to_owned()
            } else {
                path
            };
            let message = e.into_inner().to_string();
            // The YAML error may repeat (part of) the path: `spec.workload[0]: unknown field`.
            let message = match message.split_once(": ") {
                Some((head, rest)) if path.starts_with(head) && !head.contains(' ') => {
                    rest.to_owned()
                }
                _ => message,
            };
            SimulationError::scenario(file, path, message)
        })?;
        let scenario = validate::scenario(file, parsed, base)?;
        world::check(&scenario)?;
        Ok(scenario)
    }

    /// The simulated end.
    pub fn end(&self) -> DateTime<Utc> {
        self.start + self.duration
    }

    /// Whether any workload is a gang.
    pub fn has_gangs(&self) -> bool {
        self.workloads
            .iter()
            .any(|w| matches!(&w.kind, WorkloadKind::Job(j) if j.gang))
    }

    /// The same scenario with the engine not told about gangs (`spec.gangAware: false`).
    pub fn without_gang_awareness(&self) -> Scenario {
        let mut s = self.clone();
        s.gang_aware = false;
        s
    }

    /// The same scenario without its CapacityBuffers (`simulate --without-buffers`: what the
    /// headroom buys, by difference).
    pub fn without_buffers(&self) -> Scenario {
        let mut s = self.clone();
        s.buffers.clear();
        s
    }

    /// The same scenario with pods bound by `binder` (the engine told how it scores nodes).
    pub fn with_binder(&self, binder: crate::scheduler::Binder) -> Scenario {
        let mut s = self.clone();
        s.binder = binder;
        s.engine.scheduler_scoring = binder.scoring();
        s
    }

    /// Every NodePool manifest, those of later NodePool changes included.
    fn node_pools_mut(&mut self) -> impl Iterator<Item = &mut Value> {
        self.node_pools.iter_mut().chain(
            self.changes
                .iter_mut()
                .flat_map(|c| c.node_pools.iter_mut()),
        )
    }

    /// The same scenario with every NodePool's `spec.preferencePolicy` set to `policy`
    /// (`simulate --preference-policy`), later NodePool changes included.
    pub fn with_preference_policy(
        &self,
        policy: quartermaster_policies::PreferencePolicy,
    ) -> Scenario {
        let mut s = self.clone();
        let pools = s.node_pools_mut();
        for pool in pools {
            if let Some(spec) = pool.get_mut("spec").and_then(Value::as_object_mut) {
                spec.insert("preferencePolicy".into(), Value::from(policy.as_str()));
            }
        }
        s
    }

    /// The same scenario with no NodePool opted in to flex-start (`simulate
    /// --without-flex-start`: what flex-start saves and what its queue costs in pending time,
    /// by difference): `flex-start` is taken out of every `In` capacity-type requirement (one
    /// left without a value allows `on-demand`), later NodePool changes included.
    pub fn without_flex_start(&self) -> Scenario {
        let mut s = self.clone();
        let pools = s.node_pools_mut();
        for pool in pools {
            drop_flex_start(pool);
        }
        s
    }

    /// The same scenario with its disruption rules lifted (`simulate --without-disruption-rules`:
    /// what the rules cost, by difference, and how close the engine comes to the hindsight when
    /// it may make the moves the hindsight makes). Every NodePool, later changes included,
    /// consolidates underutilized nodes after [`RULES_LIFTED_CONSOLIDATE_AFTER`] with no budget
    /// and replaces spot with any cheaper spot type; every Job checkpoints and says so
    /// (`quartermaster.dev/checkpointed`); no pod is do-not-disrupt or under a
    /// PodDisruptionBudget.
    pub fn without_disruption_rules(&self) -> Scenario {
        let mut s = self.clone();
        let pools = s.node_pools_mut();
        for pool in pools {
            lift_disruption_rules(pool);
        }
        for w in &mut s.workloads {
            if let WorkloadKind::Job(job) = &mut w.kind {
                job.checkpointed = true;
                w.metadata.annotations.insert(
                    quartermaster_engine::CHECKPOINTED.to_owned(),
                    "true".to_owned(),
                );
            }
            w.metadata
                .annotations
                .remove(quartermaster_engine::DO_NOT_DISRUPT);
            w.metadata
                .annotations
                .remove(quartermaster_engine::KARPENTER_DO_NOT_DISRUPT);
            w.max_unavailable = None;
        }
        s
    }

    /// The same scenario with every NodePool restricted to on-demand capacity (the baseline
    /// that `on_demand_only_cost` is measured with).
    pub fn on_demand_only(&self) -> Scenario {
        let mut s = self.clone();
        for pool in &mut s.node_pools {
            force_on_demand(pool);
        }
        s
    }
}

/// A duration as scenario files spell it (`7d`, `1h30m`).
pub fn format_duration(d: TimeDelta) -> String {
    Dur(d.to_std().unwrap_or_default()).to_string()
}

/// Takes `flex-start` out of the `In` capacity-type requirements of a NodePool manifest (and
/// a template label pinning it), so the pool no longer opts in.
fn drop_flex_start(pool: &mut Value) {
    const KEYS: [&str; 2] = [
        quartermaster_policies::labels::LABEL_CAPACITY_TYPE,
        "karpenter.sh/capacity-type",
    ];
    const FLEX: &str = "flex-start";
    if let Some(list) = pool
        .pointer_mut("/spec/template/spec/requirements")
        .and_then(Value::as_array_mut)
    {
        for r in list {
            let ours = r
                .get("key")
                .and_then(Value::as_str)
                .is_some_and(|k| KEYS.contains(&k))
                && r.get("operator").and_then(Value::as_str) == Some("In");
            let Some(values) = r
                .get_mut("values")
                .and_then(Value::as_array_mut)
                .filter(|_| ours)
            else {
                continue;
            };
            values.retain(|v| v.as_str() != Some(FLEX));
            if values.is_empty() {
                values.push(Value::from("on-demand"));
            }
        }
    }
    if let Some(labels) = pool
        .pointer_mut("/spec/template/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        labels.retain(|k, v| !(KEYS.contains(&k.as_str()) && v.as_str() == Some(FLEX)));
    }
}

/// How long a NodePool waits before consolidating a node when its rules are lifted
/// ([`Scenario::without_disruption_rules`]).
pub const RULES_LIFTED_CONSOLIDATE_AFTER: &str = "30s";

/// A NodePool manifest's disruption rules lifted: `WhenEmptyOrUnderutilized` after
/// [`RULES_LIFTED_CONSOLIDATE_AFTER`], no budgets, spot replaced by any cheaper spot type.
fn lift_disruption_rules(pool: &mut Value) {
    if let Some(spec) = pool.get_mut("spec").and_then(Value::as_object_mut) {
        let disruption = spec
            .entry("disruption")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(d) = disruption.as_object_mut() {
            d.insert(
                "consolidationPolicy".into(),
                Value::from("WhenEmptyOrUnderutilized"),
            );
            d.insert(
                "consolidateAfter".into(),
                Value::from(RULES_LIFTED_CONSOLIDATE_AFTER),
            );
            d.remove("budgets");
        }
    }
    if let Some(meta) = pool.get_mut("metadata").and_then(Value::as_object_mut) {
        let annotations = meta
            .entry("annotations")
            .or_insert_with(|| Value::Object(Default::default()));
        if let Some(a) = annotations.as_object_mut() {
            a.insert(
                quartermaster_engine::SPOT_TO_SPOT_MIN_TYPES.into(),
                Value::from("1"),
            );
        }
    }
}

/// Replaces every capacity-type requirement of a NodePool manifest with `In [on-demand]`.
fn force_on_demand(pool: &mut Value) {
    const KEYS: [&str; 2] = [
        quartermaster_policies::labels::LABEL_CAPACITY_TYPE,
        "karpenter.sh/capacity-type",
    ];
    let Some(spec) = pool
        .pointer_mut("/spec/template/spec")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    let requirements = spec
        .entry("requirements")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Some(list) = requirements.as_array_mut() {
        list.retain(|r| {
            r.get("key")
                .and_then(Value::as_str)
                .is_none_or(|k| !KEYS.contains(&k))
        });
        list.push(serde_json::json!({
            "key": KEYS[0],
            "operator": "In",
            "values": ["on-demand"],
        }));
    }
    // Template labels become requirements too; a pinned capacity type there would contradict.
    if let Some(labels) = pool
        .pointer_mut("/spec/template/metadata/labels")
        .and_then(Value::as_object_mut)
    {
        for k in KEYS {
            labels.remove(k);
        }
    }
}

#[cfg(test)]
mod tests;
