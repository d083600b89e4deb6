//! Semantic checks of a NodePool.

use super::FieldError;
use super::fields::{self, field, index, key, push};
use crate::budget::{BudgetNodes, parse_schedule};
use crate::labels::validate_label_key;
use crate::limits::{LIMIT_MAX_HOURLY_COST, LIMIT_NODES, parse_hourly_cost};
use crate::nodepool::{GpuSharingSpec, GpuSharingStrategy, NodePool};
use crate::quantity::parse_quantity;
use crate::requirements::Requirements;

/// Every semantic problem of a NodePool (empty when valid).
pub fn validate_nodepool(np: &NodePool) -> Vec<FieldError> {
    let mut errs = Vec::new();
    fields::metadata_name(&np.metadata, true, &mut errs);
    let spec = &np.spec;

    if let Some(w) = spec.weight
        && !(1..=100).contains(&w)
    {
        push(
            &mut errs,
            "spec.weight",
            format!("must be between 1 and 100, got {w}"),
        );
    }

    if let Some(r) = spec.replicas
        && r < 0
    {
        push(
            &mut errs,
            "spec.replicas",
            format!("must not be negative, got {r}"),
        );
    }

    for (name, q) in &spec.limits {
        let p = key("spec.limits", name);
        if name == LIMIT_MAX_HOURLY_COST {
            if let Err(e) = parse_hourly_cost(&q.0) {
                push(&mut errs, p, e);
            }
            continue;
        }
        if let Err(e) = validate_label_key(name) {
            push(&mut errs, p, e.replace("label key", "resource name"));
            continue;
        }
        match parse_quantity(&q.0) {
            Err(e) => push(&mut errs, p, e.to_string()),
            Ok(v) if v.is_negative() => {
                push(&mut errs, p, format!("{:?} must not be negative", q.0))
            }
            Ok(v) if name == LIMIT_NODES && v.millis() % 1000 != 0 => {
                push(
                    &mut errs,
                    p,
                    format!("{:?} must be a whole number of nodes", q.0),
                );
            }
            Ok(_) => {}
        }
    }

    if let Some(repair) = &spec.repair {
        fields::duration(
            repair.default_toleration_duration.as_deref(),
            "spec.repair.defaultTolerationDuration",
            false,
            &mut errs,
        );
        if let Some(n) = repair.max_unhealthy_nodes
            && n < 0
        {
            push(
                &mut errs,
                "spec.repair.maxUnhealthyNodes",
                format!("must be 0 or more, got {n}"),
            );
        }
        if let Some(p) = repair.max_unhealthy_percentage
            && !(0..=100).contains(&p)
        {
            push(
                &mut errs,
                "spec.repair.maxUnhealthyPercentage",
                format!("must be between 0 and 100, got {p}"),
            );
        }
        for (i, policy) in repair.policies.iter().enumerate() {
            let path = index("spec.repair.policies", i);
            if policy.condition_type.is_empty() {
                push(
                    &mut errs,
                    field(&path, "conditionType"),
                    "must name a node condition type".to_owned(),
                );
            }
            if let Some(status) = policy.condition_status.as_deref()
                && !["True", "False", "Unknown"].contains(&status)
            {
                push(
                    &mut errs,
                    field(&path, "conditionStatus"),
                    format!("must be True, False or Unknown, got {status:?}"),
                );
            }
            fields::duration(
                Some(policy.toleration.as_str()),
                &field(&path, "toleration"),
                false,
                &mut errs,
            );
        }
    }

    if let Some(budget) = spec.preference_budget.as_deref()
        && let Err(e) = crate::preference::parse_preference_budget(budget)
    {
        push(&mut errs, "spec.preferenceBudget", e);
    }

    let template = &spec.template;
    let labels_path = "spec.template.metadata.labels";
    fields::labels(&template.metadata.labels, labels_path, true, &mut errs);
    fields::annotations(
        &template.metadata.annotations,
        "spec.template.metadata.annotations",
        &mut errs,
    );
    let ts = &template.spec;
    let req_path = "spec.template.spec.requirements";
    let before = errs.len();
    fields::requirements(&ts.requirements, req_path, true, &mut errs);
    if errs.len() == before
        && let Ok(reqs) = Requirements::from_node_selector_requirements(&ts.requirements)
    {
        // Template labels must satisfy the requirements on the same key (an alias label is
        // read as the label it stands for, as the requirements are).
        for (k, v) in &template.metadata.labels {
            let (canonical_key, canonical_value) = match crate::labels::label_alias(k) {
                Some(alias) => (alias.canonical, alias.canonical_value(v)),
                None => (k.as_str(), v.as_str()),
            };
            if let Some(r) = reqs.get(canonical_key)
                && !r.has(canonical_value)
            {
                push(
                    &mut errs,
                    key(labels_path, k),
                    format!("value {v:?} does not satisfy requirement {r} in {req_path}"),
                );
            }
        }
    }
    fields::taints(&ts.taints, "spec.template.spec.taints", &mut errs);
    fields::taints(
        &ts.startup_taints,
        "spec.template.spec.startupTaints",
        &mut errs,
    );
    fields::node_class_ref(
        &ts.node_class_ref,
        "spec.template.spec.nodeClassRef",
        &mut errs,
    );
    fields::duration(
        ts.expire_after.as_deref(),
        "spec.template.spec.expireAfter",
        true,
        &mut errs,
    );
    fields::duration(
        ts.termination_grace_period.as_deref(),
        "spec.template.spec.terminationGracePeriod",
        false,
        &mut errs,
    );
    fields::duration(
        ts.spot_interruption_cost.as_deref(),
        "spec.template.spec.spotInterruptionCost",
        false,
        &mut errs,
    );
    if let Some(sharing) = &ts.gpu_sharing {
        gpu_sharing(sharing, "spec.template.spec.gpuSharing", &mut errs);
    }
    if let Some(m) = ts.max_gpu_overshoot
        && !(0..=i64::from(u32::MAX)).contains(&m)
    {
        push(
            &mut errs,
            "spec.template.spec.maxGpuOvershoot",
            format!("must be a whole number of accelerators, 0 or more, got {m}"),
        );
    }

    if let Some(d) = &spec.disruption {
        fields::duration(
            d.consolidate_after.as_deref(),
            "spec.disruption.consolidateAfter",
            true,
            &mut errs,
        );
        for (i, b) in d.budgets.iter().flatten().enumerate() {
            let p = index("spec.disruption.budgets", i);
            if let Err(e) = BudgetNodes::parse(&b.nodes) {
                let reason = match e {
                    crate::PolicyError::InvalidBudget { reason } => reason,
                    other => other.to_string(),
                };
                push(&mut errs, field(&p, "nodes"), reason);
            }
            if let Some(s) = &b.schedule
                && let Err(e) = parse_schedule(s)
            {
                push(&mut errs, field(&p, "schedule"), e.to_string());
            }
            fields::duration(
                b.duration.as_deref(),
                &field(&p, "duration"),
                false,
                &mut errs,
            );
            match (&b.schedule, &b.duration) {
                (Some(_), None) => push(
                    &mut errs,
                    field(&p, "duration"),
                    "required when schedule is set",
                ),
                (None, Some(_)) => push(
                    &mut errs,
                    field(&p, "schedule"),
                    "required when duration is set",
                ),
                _ => {}
            }
        }
    }
    errs
}

/// A sharing strategy's own fields, and only those.
fn gpu_sharing(sharing: &GpuSharingSpec, path: &str, errs: &mut Vec<FieldError>) {
    match sharing.strategy {
        GpuSharingStrategy::TimeSlicing | GpuSharingStrategy::Mps => {
            match sharing.replicas {
                None => push(
                    errs,
                    field(path, "replicas"),
                    "required for time-slicing and mps",
                ),
                Some(r) if r < 2 => push(
                    errs,
                    field(path, "replicas"),
                    format!("must be 2 or more to share a GPU, got {r}"),
                ),
                Some(_) => {}
            }
            if sharing.mig_config.is_some() {
                push(errs, field(path, "migConfig"), "only with strategy mig");
            }
        }
        GpuSharingStrategy::Mig => {
            // Without migConfig the solver chooses each node's layout.
            if sharing.mig_config.as_deref() == Some("") {
                push(
                    errs,
                    field(path, "migConfig"),
                    "must name a layout (such as all-1g.10gb or all-balanced), or be left out for Quartermaster to choose one per node",
                );
            }
            if sharing.replicas.is_some() {
                push(
                    errs,
                    field(path, "replicas"),
                    "only with time-slicing or mps",
                );
            }
            if sharing.rename_by_default.is_some() {
                push(
                    errs,
                    field(path, "renameByDefault"),
                    "only with time-slicing or mps",
                );
            }
        }
    }
}
