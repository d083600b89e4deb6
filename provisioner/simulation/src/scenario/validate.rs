//! Checks beyond the schema: positive durations, known kinds, fields that belong to the kind,
//! unique workload names, consistent arrival windows. Every error names the field path.

use std::collections::BTreeMap;
use std::path::Path;

use chrono::{DateTime, Utc};
use quartermaster_engine::EngineConfig;
use quartermaster_pricing::Catalog;
use serde_json::Value;

use super::file::{ArrivalFile, ChangeFile, DurationDist, EngineFile, ScenarioFile, WorkloadFile};
use super::{
    API_VERSION, Arrival, Change, DEFAULT_SEED, DEFAULT_START, DeploymentSpec, DiurnalSpec,
    JobSpec, Scenario, Workload, WorkloadKind,
};
use crate::duration::Dur;
use crate::error::SimulationError;

/// Validates a parsed file into a [`Scenario`] (the Kubernetes objects are checked later, by
/// [`super::world::check`]).
pub(super) fn scenario(
    file: &str,
    f: ScenarioFile,
    base: Option<&Path>,
) -> Result<Scenario, SimulationError> {
    let err = |path: &str, reason: String| SimulationError::scenario(file, path, reason);
    if f.api_version != API_VERSION {
        return Err(err(
            "apiVersion",
            format!("expected {API_VERSION}, got {:?}", f.api_version),
        ));
    }
    if f.kind != "Scenario" {
        return Err(err("kind", format!("expected Scenario, got {:?}", f.kind)));
    }
    if f.metadata.name.trim().is_empty() {
        return Err(err("metadata.name", "must not be empty".into()));
    }
    let spec = f.spec;
    positive(file, "spec.duration", spec.duration)?;
    let start: DateTime<Utc> = match spec.start {
        Some(s) => s,
        None => DEFAULT_START
            .parse()
            .expect("the default start is RFC 3339"),
    };
    let catalog = match &spec.catalog {
        None => Catalog::embedded_all_regions(),
        Some(rel) => {
            let Some(base) = base else {
                return Err(err(
                    "spec.catalog",
                    "a catalog file needs a scenario file to be relative to".into(),
                ));
            };
            let override_file = Catalog::from_path(&base.join(rel))
                .map_err(|e| err("spec.catalog", e.to_string()))?;
            Catalog::embedded_all_regions().with_override(override_file)
        }
    };
    if spec.node_pools.is_empty() {
        return Err(err(
            "spec.nodePools",
            "at least one NodePool is needed".into(),
        ));
    }
    spec.cloud.validate().map_err(|e| match e {
        quartermaster_sim::SimError::InvalidConfig { field, reason } => {
            err(&format!("spec.cloud.{field}"), reason)
        }
    })?;
    let engine = engine_config(file, &spec.engine)?;
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    let mut workloads = Vec::new();
    for (i, w) in spec.workload.into_iter().enumerate() {
        let at = format!("spec.workload[{i}]");
        if w.name.trim().is_empty() {
            return Err(err(&format!("{at}.name"), "must not be empty".into()));
        }
        if let Some(first) = names.insert(w.name.clone(), i) {
            return Err(err(
                &format!("{at}.name"),
                format!(
                    "duplicate workload name {:?} (also spec.workload[{first}])",
                    w.name
                ),
            ));
        }
        workloads.push(workload(file, &at, w)?);
    }
    if workloads.is_empty() {
        return Err(err(
            "spec.workload",
            "at least one workload is needed".into(),
        ));
    }
    // A typo (`every: 1s, burst: 1000`) must be an error, not hours of work or an exhausted
    // machine: bound the pods a scenario may create before generating anything.
    let mut total = 0.0;
    for (i, w) in workloads.iter().enumerate() {
        let pods = expected_pods(w, spec.duration.secs_f64());
        total += pods;
        if pods > MAX_SIMULATED_PODS as f64 || total > MAX_SIMULATED_PODS as f64 {
            return Err(err(
                &format!("spec.workload[{i}]"),
                format!(
                    "would create about {} pods in all (at most {MAX_SIMULATED_PODS} in one simulation)",
                    total.round()
                ),
            ));
        }
    }
    let changes = changes(file, start, spec.duration, spec.changes)?;
    let buffers = buffers(file, &workloads, spec.capacity_buffers)?;
    let measure_at = match spec.measure_at {
        Some(d) if d > spec.duration => {
            return Err(err(
                "spec.measureAt",
                format!("after the end of the run ({})", spec.duration),
            ));
        }
        d => d.map(|d| start + d.delta()),
    };
    Ok(Scenario {
        file: file.to_owned(),
        cluster: spec.cluster.unwrap_or_else(|| f.metadata.name.clone()),
        name: f.metadata.name,
        description: f.metadata.description,
        duration: spec.duration.delta(),
        seed: spec.seed.unwrap_or(DEFAULT_SEED),
        start,
        catalog,
        node_pools: spec.node_pools,
        node_classes: spec.node_classes,
        daemon_sets: spec.daemon_sets,
        dynamic_resources: spec.dynamic_resources,
        cloud: spec.cloud,
        engine,
        workloads,
        changes,
        buffers,
        measure_at,
        gang_aware: spec.gang_aware.unwrap_or(true),
        binder: Default::default(),
        chaos: None,
        driver_crashes_per_hour: 0.0,
    })
}

/// `spec.capacityBuffers`: CapacityBuffer manifests whose `scalableRef` names a workload of
/// the scenario (in its namespace); the default provisioning strategy; a count to keep.
fn buffers(
    file: &str,
    workloads: &[super::Workload],
    values: Vec<Value>,
) -> Result<Vec<super::ScenarioBuffer>, SimulationError> {
    use quartermaster_cluster::capacity_buffer::{
        ACTIVE_CAPACITY, API_VERSION, CapacityBufferSpec, KIND,
    };
    let mut out: Vec<super::ScenarioBuffer> = Vec::new();
    for (i, v) in values.into_iter().enumerate() {
        let at = format!("spec.capacityBuffers[{i}]");
        let err = |field: &str, reason: String| {
            SimulationError::scenario(file, format!("{at}{field}"), reason)
        };
        let str_at = |p: &str| v.pointer(p).and_then(Value::as_str).unwrap_or_default();
        if str_at("/apiVersion") != API_VERSION || str_at("/kind") != KIND {
            return Err(err(
                "",
                format!(
                    "expected apiVersion {API_VERSION}, kind {KIND}; got {:?}, {:?}",
                    str_at("/apiVersion"),
                    str_at("/kind")
                ),
            ));
        }
        let name = str_at("/metadata/name").to_owned();
        if name.is_empty() {
            return Err(err(".metadata.name", "must not be empty".into()));
        }
        let spec_value = v.get("spec").cloned().unwrap_or(Value::Null);
        let spec: CapacityBufferSpec = serde_path_to_error::deserialize(spec_value)
            .map_err(|e| err(&format!(".spec.{}", e.path()), e.inner().to_string()))?;
        if let Some(s) = spec.provisioning_strategy.as_deref()
            && s != ACTIVE_CAPACITY
        {
            return Err(err(
                ".spec.provisioningStrategy",
                format!("{s:?} is not served (only {ACTIVE_CAPACITY:?})"),
            ));
        }
        let Some(target) = &spec.scalable_ref else {
            return Err(err(
                ".spec.scalableRef",
                "a scenario's buffer names one of spec.workload by scalableRef".into(),
            ));
        };
        let Some(w) = workloads.iter().position(|w| w.name == target.name) else {
            let known: Vec<&str> = workloads.iter().map(|w| w.name.as_str()).collect();
            return Err(err(
                ".spec.scalableRef.name",
                format!(
                    "no workload {:?} (workloads: {})",
                    target.name,
                    known.join(", ")
                ),
            ));
        };
        let namespace = workloads[w].namespace.clone();
        let given_ns = str_at("/metadata/namespace");
        if !given_ns.is_empty() && given_ns != namespace {
            return Err(err(
                ".metadata.namespace",
                format!(
                    "{given_ns:?}: the buffer must be in its workload's namespace {namespace:?}"
                ),
            ));
        }
        if spec.replicas.is_none() && spec.percentage.is_none() && spec.limits.is_none() {
            return Err(err(
                ".spec",
                "neither replicas, percentage nor limits is set".into(),
            ));
        }
        for (field, v) in [("replicas", spec.replicas), ("percentage", spec.percentage)] {
            if let Some(v) = v.filter(|v| *v < 0) {
                return Err(err(
                    &format!(".spec.{field}"),
                    format!("must not be negative, got {v}"),
                ));
            }
        }
        if out
            .iter()
            .any(|b| b.name == name && b.namespace == namespace)
        {
            return Err(err(".metadata.name", format!("duplicate buffer {name:?}")));
        }
        out.push(super::ScenarioBuffer {
            name,
            namespace,
            workload: w,
            spec,
        });
    }
    Ok(out)
}

/// `spec.changes`: in time order, within the run; factors positive, capacity types known.
fn changes(
    file: &str,
    start: DateTime<Utc>,
    duration: Dur,
    list: Vec<ChangeFile>,
) -> Result<Vec<Change>, SimulationError> {
    let err = |path: String, reason: String| SimulationError::scenario(file, path, reason);
    let mut out: Vec<Change> = Vec::new();
    for (i, c) in list.into_iter().enumerate() {
        let at = format!("spec.changes[{i}]");
        if c.at > duration {
            return Err(err(
                format!("{at}.at"),
                format!("after the end of the run ({duration})"),
            ));
        }
        if let Some(prev) = out.last()
            && start + c.at.delta() < prev.at
        {
            return Err(err(
                format!("{at}.at"),
                "changes must be in time order".into(),
            ));
        }
        let mut prices = Vec::new();
        for (k, p) in c.prices.into_iter().enumerate() {
            let pat = format!("{at}.prices[{k}]");
            if !(p.factor.is_finite() && p.factor > 0.0) {
                return Err(err(
                    format!("{pat}.factor"),
                    format!("must be a positive number, got {}", p.factor),
                ));
            }
            let capacity = match p.capacity_type.as_deref() {
                None => None,
                Some("spot") => Some(quartermaster_pricing::CapacityType::Spot),
                Some("on-demand") => Some(quartermaster_pricing::CapacityType::OnDemand),
                Some(other) => {
                    return Err(err(
                        format!("{pat}.capacityType"),
                        format!("expected spot or on-demand, got {other:?}"),
                    ));
                }
            };
            prices.push((p.instance_type, capacity, p.factor));
        }
        if c.node_pools.is_empty() && prices.is_empty() {
            return Err(err(at, "a change needs nodePools or prices".into()));
        }
        out.push(Change {
            at: start + c.at.delta(),
            node_pools: c.node_pools,
            prices,
        });
    }
    Ok(out)
}

fn positive(file: &str, path: &str, d: Dur) -> Result<Dur, SimulationError> {
    if d.is_zero() {
        Err(SimulationError::scenario(
            file,
            path,
            "must be a positive duration, got 0",
        ))
    } else {
        Ok(d)
    }
}

fn engine_config(file: &str, e: &EngineFile) -> Result<EngineConfig, SimulationError> {
    let mut c = EngineConfig::default();
    let fields = [
        ("batchIdle", e.batch_idle, &mut c.batch_idle),
        ("batchMax", e.batch_max, &mut c.batch_max),
        (
            "acceleratorReadyBudget",
            e.accelerator_ready_budget,
            &mut c.accelerator_ready_budget,
        ),
        (
            "registrationBudget",
            e.registration_budget,
            &mut c.registration_budget,
        ),
        ("unavailableTtl", e.unavailable_ttl, &mut c.unavailable_ttl),
        (
            "unschedulableRetry",
            e.unschedulable_retry,
            &mut c.unschedulable_retry,
        ),
        ("maxBackoff", e.max_backoff, &mut c.max_backoff),
        (
            "gangLaunchTimeout",
            e.gang_launch_timeout,
            &mut c.gang_launch_timeout,
        ),
    ];
    for (name, value, target) in fields {
        if let Some(d) = value {
            *target = positive(file, &format!("spec.engine.{name}"), d)?.delta();
        }
    }
    if let Some(d) = e.consolidation_interval {
        c.consolidation_interval = positive(file, "spec.engine.consolidationInterval", d)?.delta();
    }
    if let Some(f) = e.consolidation_min_saving {
        if !(0.0..1.0).contains(&f) {
            return Err(SimulationError::scenario(
                file,
                "spec.engine.consolidationMinSaving",
                format!("must be at least 0 and below 1, got {f}"),
            ));
        }
        c.consolidation_min_saving = f;
    }
    if let Some(n) = e.max_move_nodes {
        if n == 0 {
            return Err(SimulationError::scenario(
                file,
                "spec.engine.maxMoveNodes",
                "must be at least 1, got 0",
            ));
        }
        c.max_move_nodes = n;
    }
    Ok(c)
}

/// Fails on the first field of `present` that is set: it does not belong to `kind`.
fn absent(
    file: &str,
    at: &str,
    kind: &str,
    present: &[(&str, bool)],
) -> Result<(), SimulationError> {
    match present.iter().find(|(_, set)| *set) {
        Some((field, _)) => Err(SimulationError::scenario(
            file,
            format!("{at}.{field}"),
            format!("not a field of kind {kind}"),
        )),
        None => Ok(()),
    }
}

/// The most pods one simulation may create (the 7-day, 10,000-job scenario creates about 10,000).
pub const MAX_SIMULATED_PODS: usize = 1_000_000;

/// About how many pods a workload creates over `seconds` (the mean for Poisson arrivals; at most
/// its peak replica count for a Deployment, counted once per change).
fn expected_pods(w: &Workload, seconds: f64) -> f64 {
    match &w.kind {
        WorkloadKind::Job(job) => {
            let mut jobs = 0.0;
            for a in &job.arrivals {
                jobs += match *a {
                    Arrival::At { at, burst } => {
                        if at.secs_f64() < seconds {
                            f64::from(burst)
                        } else {
                            0.0
                        }
                    }
                    Arrival::Every {
                        every,
                        count,
                        from,
                        until,
                        burst,
                    } => {
                        let stop = until.map_or(seconds, |u| u.secs_f64().min(seconds));
                        let window = (stop - from.secs_f64()).max(0.0);
                        let n = (window / every.secs_f64().max(1e-3)).ceil();
                        count.map_or(n, |c| n.min(f64::from(c))) * f64::from(burst)
                    }
                    Arrival::Poisson {
                        rate_per_hour,
                        from,
                        until,
                        burst,
                    } => {
                        let stop = until.map_or(seconds, |u| u.secs_f64().min(seconds));
                        let window = (stop - from.secs_f64()).max(0.0);
                        rate_per_hour * window / 3600.0 * f64::from(burst)
                    }
                };
            }
            jobs * f64::from(job.parallelism)
        }
        WorkloadKind::Deployment(d) => {
            let peak = d.diurnal.map_or(0, |c| c.max).max(d.replicas);
            let changes = d.schedule.iter().map(|(_, r)| f64::from(*r)).sum::<f64>();
            f64::from(peak) + changes
        }
    }
}

fn workload(file: &str, at: &str, w: WorkloadFile) -> Result<Workload, SimulationError> {
    let err = |path: String, reason: String| SimulationError::scenario(file, path, reason);
    let kind = match w.kind.as_str() {
        "Job" => {
            absent(
                file,
                at,
                "Job",
                &[
                    ("replicas", w.replicas.is_some()),
                    ("schedule", w.schedule.is_some()),
                    ("diurnal", w.diurnal.is_some()),
                ],
            )?;
            let arrivals_in = w
                .arrivals
                .ok_or_else(|| err(format!("{at}.arrivals"), "a Job needs arrivals".into()))?;
            if arrivals_in.is_empty() {
                return Err(err(
                    format!("{at}.arrivals"),
                    "a Job needs at least one arrival".into(),
                ));
            }
            let mut arrivals = Vec::new();
            for (k, a) in arrivals_in.iter().enumerate() {
                arrivals.push(arrival(file, &format!("{at}.arrivals[{k}]"), a)?);
            }
            let parallelism = w.parallelism.unwrap_or(1);
            if parallelism == 0 {
                return Err(err(
                    format!("{at}.parallelism"),
                    "must be at least 1".into(),
                ));
            }
            let duration = w
                .duration
                .ok_or_else(|| err(format!("{at}.duration"), "a Job needs a duration".into()))?;
            distribution(file, &format!("{at}.duration"), duration)?;
            WorkloadKind::Job(JobSpec {
                arrivals,
                parallelism,
                duration,
                checkpointed: w.checkpointed.unwrap_or(false),
                gang: w.gang.unwrap_or(false),
            })
        }
        "Deployment" => {
            absent(
                file,
                at,
                "Deployment",
                &[
                    ("arrivals", w.arrivals.is_some()),
                    ("parallelism", w.parallelism.is_some()),
                    ("duration", w.duration.is_some()),
                    ("checkpointed", w.checkpointed.is_some()),
                    ("gang", w.gang.is_some()),
                ],
            )?;
            let mut schedule = Vec::new();
            for (k, s) in w.schedule.iter().flatten().enumerate() {
                if let Some((prev, _)) = schedule.last()
                    && s.at <= *prev
                {
                    return Err(err(
                        format!("{at}.schedule[{k}].at"),
                        format!("must be after the previous entry ({prev})"),
                    ));
                }
                schedule.push((s.at, s.replicas));
            }
            let diurnal = match &w.diurnal {
                None => None,
                Some(d) => {
                    let p = format!("{at}.diurnal");
                    if w.replicas.is_some() || !schedule.is_empty() {
                        return Err(err(
                            p,
                            "a diurnal curve replaces replicas and schedule; give only one".into(),
                        ));
                    }
                    if d.min > d.max {
                        return Err(err(
                            format!("{p}.min"),
                            format!("must not exceed max ({} > {})", d.min, d.max),
                        ));
                    }
                    let period = positive(
                        file,
                        &format!("{p}.period"),
                        d.period
                            .unwrap_or(Dur(std::time::Duration::from_secs(86_400))),
                    )?;
                    let step = positive(
                        file,
                        &format!("{p}.step"),
                        d.step.unwrap_or(Dur(std::time::Duration::from_secs(900))),
                    )?;
                    Some(DiurnalSpec {
                        min: d.min,
                        max: d.max,
                        peak_at: d.peak_at,
                        period,
                        step,
                    })
                }
            };
            if w.replicas.is_none() && schedule.is_empty() && diurnal.is_none() {
                return Err(err(
                    format!("{at}.replicas"),
                    "a Deployment needs replicas, a schedule or a diurnal curve".into(),
                ));
            }
            WorkloadKind::Deployment(DeploymentSpec {
                replicas: w.replicas.unwrap_or(0),
                schedule,
                diurnal,
            })
        }
        other => {
            return Err(err(
                format!("{at}.kind"),
                format!("unknown workload kind {other:?}: expected Job or Deployment"),
            ));
        }
    };
    if !w.template.spec.is_object() {
        return Err(err(
            format!("{at}.template.spec"),
            "expected a PodSpec object".into(),
        ));
    }
    if w.max_unavailable.is_some() && w.template.metadata.labels.is_empty() {
        return Err(err(
            format!("{at}.maxUnavailable"),
            "the PodDisruptionBudget selects the workload's pods by their labels: give template.metadata.labels".into(),
        ));
    }
    Ok(Workload {
        name: w.name,
        namespace: w
            .namespace
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".to_owned()),
        kind,
        metadata: w.template.metadata,
        spec: w.template.spec,
        max_unavailable: w.max_unavailable,
    })
}

fn distribution(file: &str, at: &str, d: DurationDist) -> Result<(), SimulationError> {
    match d {
        DurationDist::Fixed(v) => positive(file, at, v).map(|_| ()),
        DurationDist::Uniform { min, max } => {
            positive(file, &format!("{at}.min"), min)?;
            if max < min {
                return Err(SimulationError::scenario(
                    file,
                    format!("{at}.max"),
                    format!("must not be below min ({max} < {min})"),
                ));
            }
            Ok(())
        }
        DurationDist::LogNormal { median, p90 } => {
            positive(file, &format!("{at}.median"), median)?;
            if p90 <= median {
                return Err(SimulationError::scenario(
                    file,
                    format!("{at}.p90"),
                    format!("must be above the median ({p90} <= {median})"),
                ));
            }
            Ok(())
        }
    }
}

fn arrival(file: &str, at: &str, a: &ArrivalFile) -> Result<Arrival, SimulationError> {
    let err = |field: &str, reason: String| {
        let path = if field.is_empty() {
            at.to_owned()
        } else {
            format!("{at}.{field}")
        };
        SimulationError::scenario(file, path, reason)
    };
    let burst = a.burst.unwrap_or(1);
    if burst == 0 {
        return Err(err("burst", "must be at least 1".into()));
    }
    let forms = [a.at.is_some(), a.every.is_some(), a.rate_per_hour.is_some()];
    if forms.iter().filter(|f| **f).count() != 1 {
        return Err(err(
            "",
            "give exactly one of at, every (with count or until) or ratePerHour".into(),
        ));
    }
    let from = a.from.unwrap_or_default();
    if let Some(until) = a.until
        && until <= from
    {
        return Err(err(
            "until",
            format!("must be after from ({until} <= {from})"),
        ));
    }
    if let Some(t) = a.at {
        for (field, set) in [
            ("count", a.count.is_some()),
            ("from", a.from.is_some()),
            ("until", a.until.is_some()),
        ] {
            if set {
                return Err(err(field, "not used with at".into()));
            }
        }
        return Ok(Arrival::At { at: t, burst });
    }
    if let Some(every) = a.every {
        positive(file, &format!("{at}.every"), every)?;
        if a.count == Some(0) {
            return Err(err("count", "must be at least 1".into()));
        }
        return Ok(Arrival::Every {
            every,
            count: a.count,
            from,
            until: a.until,
            burst,
        });
    }
    let rate = a.rate_per_hour.unwrap_or_default();
    if !(rate.is_finite() && rate > 0.0) {
        return Err(err(
            "ratePerHour",
            format!("must be a positive number, got {rate}"),
        ));
    }
    if a.count.is_some() {
        return Err(err("count", "only with every".into()));
    }
    Ok(Arrival::Poisson {
        rate_per_hour: rate,
        from,
        until: a.until,
        burst,
    })
}
