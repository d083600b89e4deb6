//! Path helpers and checks shared by several kinds.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::Taint;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::FieldError;
use crate::common::{NodeClassReference, NodeSelectorRequirementWithMinValues};
use crate::duration::{NEVER, parse_duration};
use crate::labels::{
    GROUP, LABEL_NODEPOOL, restricted_label_reason, validate_dns_subdomain, validate_label_key,
    validate_label_value,
};
use crate::nodeclass::NODE_CLASS_KINDS;
use crate::quantity::parse_quantity;
use crate::requirements::{Operator, Requirement, Requirements};

/// `parent.name` (or `name` at the root).
pub(crate) fn field(parent: &str, name: &str) -> String {
    if parent.is_empty() {
        name.to_owned()
    } else {
        format!("{parent}.{name}")
    }
}

/// `parent[i]`.
pub(crate) fn index(parent: &str, i: usize) -> String {
    format!("{parent}[{i}]")
}

/// `parent[key]`.
pub(crate) fn key(parent: &str, k: &str) -> String {
    format!("{parent}[{k}]")
}

/// Appends a [`FieldError`].
pub(crate) fn push(errs: &mut Vec<FieldError>, path: impl Into<String>, reason: impl Into<String>) {
    errs.push(FieldError::new(path, reason));
}

/// `metadata.name` is required and a DNS subdomain; with `label_value`, it
/// must also fit in a label value (NodePool names are stamped on nodes).
pub(crate) fn metadata_name(meta: &ObjectMeta, label_value: bool, errs: &mut Vec<FieldError>) {
    match meta.name.as_deref() {
        None | Some("") => push(errs, "metadata.name", "required field is missing"),
        Some(name) => {
            if let Err(e) = validate_dns_subdomain(name) {
                push(errs, "metadata.name", e);
            } else if label_value && let Err(e) = validate_label_value(name) {
                push(errs, "metadata.name", e);
            }
        }
    }
}

/// Whether `s` is `([0-9]+(s|m|h))+`, the duration syntax the CRD schema accepts.
fn schema_duration_syntax(s: &str) -> bool {
    let b = s.as_bytes();
    if b.is_empty() {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start || i == b.len() || !matches!(b[i], b's' | b'm' | b'h') {
            return false;
        }
        i += 1;
    }
    true
}

/// A duration field: whole numbers with `s`, `m`, `h` units (`"30s"`,
/// `"1h30m"`), or `"Never"` when `allow_never`.
pub(crate) fn duration(
    value: Option<&str>,
    path: &str,
    allow_never: bool,
    errs: &mut Vec<FieldError>,
) {
    let Some(text) = value else { return };
    if allow_never && text == NEVER {
        return;
    }
    let expected = if allow_never {
        "expected a duration such as \"30s\", \"15m\", \"720h\" or \"1h30m\", or \"Never\""
    } else {
        "expected a duration such as \"30s\", \"15m\", \"720h\" or \"1h30m\""
    };
    if !schema_duration_syntax(text) {
        push(errs, path, format!("invalid duration {text:?}: {expected}"));
    } else if let Err(e) = parse_duration(text) {
        push(errs, path, e.to_string());
    }
}

/// A `nodeClassRef`: group, kind and name non-empty; a `quartermaster.dev`
/// kind must be one of the NodeClass kinds. The NodeClass need not exist.
pub(crate) fn node_class_ref(r: &NodeClassReference, path: &str, errs: &mut Vec<FieldError>) {
    if r.group.is_empty() {
        push(errs, field(path, "group"), "must not be empty");
    }
    if r.kind.is_empty() {
        push(errs, field(path, "kind"), "must not be empty");
    } else if r.group == GROUP && !NODE_CLASS_KINDS.contains(&r.kind.as_str()) {
        push(
            errs,
            field(path, "kind"),
            format!(
                "unsupported kind {:?} for group {GROUP}: expected one of {}{}",
                r.kind,
                NODE_CLASS_KINDS.join(", "),
                match r.kind.as_str() {
                    // Karpenter's name for it (written with our group by hand).
                    "EC2NodeClass" => "; did you mean \"AWSNodeClass\"?".to_owned(),
                    kind => super::suggest::did_you_mean(kind, NODE_CLASS_KINDS.iter().copied()),
                }
            ),
        );
    }
    if r.name.is_empty() {
        push(errs, field(path, "name"), "must not be empty");
    } else if let Err(e) = validate_dns_subdomain(&r.name) {
        push(errs, field(path, "name"), e);
    }
}

/// Node labels: valid keys and values; with `restricted`, no restricted domains.
pub(crate) fn labels(
    labels: &BTreeMap<String, String>,
    path: &str,
    restricted: bool,
    errs: &mut Vec<FieldError>,
) {
    for (k, v) in labels {
        let p = key(path, k);
        if let Err(e) = validate_label_key(k) {
            push(errs, &p, e);
            continue;
        }
        if let Err(e) = validate_label_value(v) {
            push(errs, &p, format!("invalid value {v:?}: {e}"));
        }
        if restricted && let Some(reason) = restricted_label_reason(k) {
            let hint = super::suggest::did_you_mean(k, super::suggest::known_label_keys());
            push(errs, &p, format!("{reason}{hint}"));
        }
    }
}

/// Annotation keys must be qualified names.
pub(crate) fn annotations(
    annotations: &BTreeMap<String, String>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    for k in annotations.keys() {
        if let Err(e) = validate_label_key(k) {
            push(errs, key(path, k), e.replace("label key", "annotation key"));
        }
    }
}

const TAINT_EFFECTS: [&str; 3] = ["NoSchedule", "PreferNoSchedule", "NoExecute"];

/// Taints: valid key and value, a known effect, no duplicate key/effect.
pub(crate) fn taints(taints: &[Taint], path: &str, errs: &mut Vec<FieldError>) {
    let mut seen = BTreeSet::new();
    for (i, t) in taints.iter().enumerate() {
        let p = index(path, i);
        if let Err(e) = validate_label_key(&t.key) {
            push(errs, field(&p, "key"), e.replace("label key", "taint key"));
        }
        if let Some(v) = &t.value
            && let Err(e) = validate_label_value(v)
        {
            push(
                errs,
                field(&p, "value"),
                e.replace("label value", "taint value"),
            );
        }
        if !TAINT_EFFECTS.contains(&t.effect.as_str()) {
            push(
                errs,
                field(&p, "effect"),
                format!(
                    "unsupported effect {:?}: expected one of {}{}",
                    t.effect,
                    TAINT_EFFECTS.join(", "),
                    super::suggest::did_you_mean(&t.effect, TAINT_EFFECTS)
                ),
            );
        } else if !seen.insert((t.key.as_str(), t.effect.as_str())) {
            push(
                errs,
                &p,
                format!(
                    "duplicate taint with key {:?} and effect {}",
                    t.key, t.effect
                ),
            );
        }
    }
}

/// Resource quantities: valid resource names, parseable, not negative.
pub(crate) fn quantities(
    list: &BTreeMap<String, Quantity>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    for (name, q) in list {
        let p = key(path, name);
        if let Err(e) = validate_label_key(name) {
            push(errs, &p, e.replace("label key", "resource name"));
            continue;
        }
        match parse_quantity(&q.0) {
            Err(e) => push(errs, &p, e.to_string()),
            Ok(v) if v.is_negative() => push(errs, &p, format!("{:?} must not be negative", q.0)),
            Ok(_) => {}
        }
    }
}

/// Requirements: known operator, values that fit it, valid keys and values,
/// `minValues` in range, and no key whose requirements contradict each other.
/// With `in_nodepool`, the NodePool label may not be required.
pub(crate) fn requirements(
    reqs: &[NodeSelectorRequirementWithMinValues],
    path: &str,
    in_nodepool: bool,
    errs: &mut Vec<FieldError>,
) {
    let mut combined = Requirements::new();
    for (i, r) in reqs.iter().enumerate() {
        let p = index(path, i);
        let before = errs.len();
        if let Err(e) = validate_label_key(&r.key) {
            push(errs, field(&p, "key"), e);
        } else if in_nodepool && r.key == LABEL_NODEPOOL {
            push(
                errs,
                field(&p, "key"),
                format!("label {LABEL_NODEPOOL:?} is set by Quartermaster and may not be required"),
            );
        }
        let op = match r.operator.parse::<Operator>() {
            Ok(op) => Some(op),
            Err(e) => {
                push(errs, field(&p, "operator"), e.to_string());
                None
            }
        };
        if let Some(op) = op {
            operator_values(op, &r.values, &p, errs);
            if let Some(n) = r.min_values {
                let distinct = r.values.iter().collect::<BTreeSet<_>>().len();
                if n < 1 {
                    push(
                        errs,
                        field(&p, "minValues"),
                        format!("must be at least 1, got {n}"),
                    );
                } else if n > 50 {
                    push(
                        errs,
                        field(&p, "minValues"),
                        format!("must be at most 50, got {n}"),
                    );
                } else if op == Operator::In && n as usize > distinct {
                    push(
                        errs,
                        field(&p, "minValues"),
                        format!("minValues ({n}) exceeds the number of values ({distinct})"),
                    );
                }
            }
        }
        if errs.len() != before {
            continue;
        }
        // Contradictions with earlier requirements on the same key.
        let Some(op) = op else { continue };
        let Ok(req) = Requirement::new(r.key.as_str(), op, r.values.iter().cloned()) else {
            continue;
        };
        if let Some(existing) = combined.get(req.key())
            && !existing.is_unsatisfiable()
            && existing.intersect(&req).is_unsatisfiable()
        {
            push(
                errs,
                &p,
                format!(
                    "contradicts earlier requirements on key {:?}: {} vs {}",
                    req.key(),
                    existing,
                    req
                ),
            );
        }
        combined.add(req);
    }
}

/// The values an operator takes.
fn operator_values(op: Operator, values: &[String], path: &str, errs: &mut Vec<FieldError>) {
    let vp = field(path, "values");
    match op {
        Operator::In | Operator::NotIn => {
            if values.is_empty() {
                push(
                    errs,
                    &vp,
                    format!("operator {op} requires at least one value"),
                );
            }
            for (j, v) in values.iter().enumerate() {
                if let Err(e) = validate_label_value(v) {
                    push(errs, index(&vp, j), e);
                }
            }
        }
        Operator::Exists | Operator::DoesNotExist => {
            if !values.is_empty() {
                push(errs, &vp, format!("operator {op} takes no values"));
            }
        }
        Operator::Gt | Operator::Lt | Operator::Gte | Operator::Lte => {
            if values.len() != 1 {
                push(
                    errs,
                    &vp,
                    format!(
                        "operator {op} requires exactly one value, got {}",
                        values.len()
                    ),
                );
            } else if values[0].parse::<i64>().is_err() {
                push(
                    errs,
                    index(&vp, 0),
                    format!(
                        "operator {op} requires an integer value, got {:?}",
                        values[0]
                    ),
                );
            }
        }
    }
}

/// Cloud tags: non-empty keys, none under `quartermaster.dev/` (which
/// Quartermaster sets) or `kubernetes.io/cluster/`.
pub(crate) fn cloud_tags(tags: &BTreeMap<String, String>, path: &str, errs: &mut Vec<FieldError>) {
    for k in tags.keys() {
        let p = key(path, k);
        if k.is_empty() {
            push(errs, p, "tag keys must not be empty");
        } else if k.starts_with("quartermaster.dev/") || k.starts_with("kubernetes.io/cluster/") {
            push(
                errs,
                p,
                format!("tag {k:?} is restricted: Quartermaster sets it"),
            );
        }
    }
}
