//! Validation beyond the OpenAPI schema.
//!
//! [`check_manifest`] (and [`validate_manifest`], its pass/fail form) takes one
//! parsed YAML/JSON object, routes it by `apiVersion`/`kind`, checks its shape
//! against the generated CRD schema (every unknown field, wrong type,
//! unsupported enum value and missing required field, each with its path),
//! deserialises what is left, and runs the semantic checks of
//! [`validate_nodepool`], [`validate_nodeclaim`] and the NodeClass validators,
//! collecting every problem of the object in one run: a broken value is
//! reported, then left out or stood in for, and is not reported again.
//! Misspelt field names, enum values, kinds and label keys name what they
//! were probably meant to be ("did you mean").
//!
//! Paths use `.` for fields, `[i]` for list items and `[key]` for map keys:
//! `spec.template.spec.requirements[0].operator`,
//! `spec.limits[nvidia.com/gpu]`, `spec.template.metadata.labels[team]`.
//! A `nodeClassRef` naming a NodeClass that does not exist is not an error.

mod dra;
mod fields;
mod label_keys;
mod nodeclaim;
mod nodeclass;
mod nodepool;
mod overlay;
#[cfg(test)]
mod report_tests;
mod schema;
pub(crate) mod suggest;
#[cfg(test)]
mod tests;

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use label_keys::{unknown_requirement_keys, unlikely_requirement_values};
pub use nodeclaim::validate_nodeclaim;
pub use nodeclass::{validate_aws_node_class, validate_azure_node_class, validate_gcp_node_class};
pub use nodepool::validate_nodepool;
pub use suggest::suggest_label_key;

use crate::labels::{API_VERSION, GROUP};
use crate::nodeclass::{AWSNodeClass, AzureNodeClass, GCPNodeClass};
use crate::{NodeClaim, NodePool};

/// One problem in a manifest: where and why.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FieldError {
    /// The field path, e.g. `spec.template.spec.requirements[0].operator`.
    pub path: String,
    /// What is wrong.
    pub reason: String,
}

impl FieldError {
    /// A problem at `path`.
    pub fn new(path: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            reason: reason.into(),
        }
    }
}

/// `path: reason`.
impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.reason)
    }
}

impl std::error::Error for FieldError {}

/// A manifest that passed validation, typed by kind.
#[derive(Debug, Clone, PartialEq)]
#[allow(clippy::large_enum_variant)] // built once per manifest; boxing would only add noise
pub enum ValidatedObject {
    /// A NodePool.
    NodePool(NodePool),
    /// A NodeClaim.
    NodeClaim(NodeClaim),
    /// An AWSNodeClass.
    AwsNodeClass(AWSNodeClass),
    /// A GCPNodeClass.
    GcpNodeClass(GCPNodeClass),
    /// An AzureNodeClass.
    AzureNodeClass(AzureNodeClass),
}

impl ValidatedObject {
    /// The kind (`NodePool`, `AWSNodeClass`, ...).
    pub fn kind(&self) -> &str {
        match self {
            ValidatedObject::NodePool(_) => "NodePool",
            ValidatedObject::NodeClaim(_) => "NodeClaim",
            ValidatedObject::AwsNodeClass(_) => "AWSNodeClass",
            ValidatedObject::GcpNodeClass(_) => "GCPNodeClass",
            ValidatedObject::AzureNodeClass(_) => "AzureNodeClass",
        }
    }

    /// `metadata.name` (never empty after validation).
    pub fn name(&self) -> &str {
        self.metadata().name.as_deref().unwrap_or_default()
    }

    /// The object's metadata.
    pub fn metadata(&self) -> &ObjectMeta {
        match self {
            ValidatedObject::NodePool(o) => &o.metadata,
            ValidatedObject::NodeClaim(o) => &o.metadata,
            ValidatedObject::AwsNodeClass(o) => &o.metadata,
            ValidatedObject::GcpNodeClass(o) => &o.metadata,
            ValidatedObject::AzureNodeClass(o) => &o.metadata,
        }
    }
}

/// The kinds [`validate_manifest`] accepts.
pub const KINDS: [&str; 5] = [
    "NodePool",
    "NodeClaim",
    "AWSNodeClass",
    "GCPNodeClass",
    "AzureNodeClass",
];

const TOP_LEVEL_FIELDS: [&str; 5] = ["apiVersion", "kind", "metadata", "spec", "status"];

/// The fields of `metadata` (Kubernetes `ObjectMeta`).
const METADATA_FIELDS: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

/// Everything [`check_manifest`] learns about one object.
#[derive(Debug, Clone, PartialEq)]
pub struct ManifestReport {
    /// The object, typed, when it could be read at all. With errors, it is the object as far as
    /// it could be read (unknown fields and broken values left out), for checks that still
    /// make sense, such as warnings.
    pub object: Option<ValidatedObject>,
    /// Every problem: structure first (unknown fields, types, unsupported values, missing
    /// fields; the fields of an object in the order of their names), then the semantic checks
    /// of what could be read.
    pub errors: Vec<FieldError>,
    /// Paths whose value was left out or stood in for because of an error.
    repaired: Vec<String>,
}

impl ManifestReport {
    /// Whether the value at `path` (or a value around it) was left out or stood in for because
    /// of a reported error, so that anything said about it would only repeat that error.
    pub fn is_repaired(&self, path: &str) -> bool {
        self.repaired.iter().any(|r| schema::within(path, r))
    }

    /// The warnings of the object (see [`unknown_requirement_keys`] and
    /// [`unlikely_requirement_values`]), leaving out those about repaired values.
    pub fn warnings(&self, carried: &dyn Fn(&str) -> bool) -> Vec<FieldError> {
        let Some(ValidatedObject::NodePool(pool)) = &self.object else {
            return Vec::new();
        };
        let mut warnings = unknown_requirement_keys(pool, carried);
        warnings.extend(unlikely_requirement_values(pool));
        warnings.retain(|w| !self.is_repaired(&w.path));
        warnings
    }
}

/// Validates one parsed manifest and returns it typed, or every problem found.
pub fn validate_manifest(doc: &Value) -> Result<ValidatedObject, Vec<FieldError>> {
    let report = check_manifest(doc);
    match report.object {
        Some(object) if report.errors.is_empty() => Ok(object),
        _ if report.errors.is_empty() => Err(vec![FieldError::new("<root>", "cannot be read")]),
        _ => Err(report.errors),
    }
}

/// Checks one parsed manifest and reports every problem in one pass: an unknown field or a
/// broken value is reported and left out, a missing required field is reported and stood in
/// for, and the rest of the object is still checked (types, unsupported values, then the
/// semantic checks of requirements, limits, budgets, durations, label keys...).
pub fn check_manifest(doc: &Value) -> ManifestReport {
    let fail = |errors| ManifestReport {
        object: None,
        errors,
        repaired: Vec::new(),
    };
    let Some(obj) = doc.as_object() else {
        return fail(vec![FieldError::new(
            "<root>",
            format!("expected an object, got {}", schema::type_name(doc)),
        )]);
    };
    let mut shape = schema::Shape::default();
    let errs = &mut shape.errors;

    // Karpenter's NodeOverlay: `plan` reads it as it is; check what it uses.
    if obj.get("apiVersion").and_then(Value::as_str) == Some(overlay::NODE_OVERLAY_API_VERSION)
        && obj.get("kind").and_then(Value::as_str) == Some(overlay::NODE_OVERLAY_KIND)
    {
        return fail(overlay::validate_node_overlay(obj));
    }

    // A DRA object (DeviceClass, ResourceClaim, ResourceClaimTemplate): its selectors compile.
    if dra::is_dra(obj) {
        return fail(dra::validate_dra(obj));
    }

    // Another API's object (a Deployment, a Service): one line saying so.
    if let (Some(Value::String(api)), Some(Value::String(k))) =
        (obj.get("apiVersion"), obj.get("kind"))
        && api.split('/').next() != Some(GROUP)
        && !KINDS.contains(&k.as_str())
        && suggest::closest(k, KINDS).is_none()
    {
        return fail(vec![FieldError::new(
            "kind",
            format!(
                "{api} {k} is not a Quartermaster object: validate checks {} (plan reads workloads)",
                KINDS.join(", ")
            ),
        )]);
    }

    // Route by apiVersion and kind.
    let mut api_ok = false;
    match obj.get("apiVersion") {
        None => errs.push(FieldError::new("apiVersion", "required field is missing")),
        Some(Value::String(v)) if v == API_VERSION => api_ok = true,
        Some(Value::String(v)) if v.split('/').next() == Some(GROUP) => errs.push(FieldError::new(
            "apiVersion",
            format!("unsupported version {v:?}: expected {API_VERSION:?}"),
        )),
        Some(Value::String(v)) => errs.push(FieldError::new(
            "apiVersion",
            format!(
                "unsupported apiVersion {v:?}: expected {API_VERSION:?}{}",
                suggest::did_you_mean(v, [API_VERSION])
            ),
        )),
        Some(other) => errs.push(FieldError::new(
            "apiVersion",
            format!("expected string, got {}", schema::type_name(other)),
        )),
    }
    let kind = match obj.get("kind") {
        None => {
            errs.push(FieldError::new("kind", "required field is missing"));
            None
        }
        Some(Value::String(k)) => match KINDS.iter().find(|known| *known == k) {
            Some(known) => Some(*known),
            None => {
                errs.push(FieldError::new(
                    "kind",
                    format!(
                        "unsupported kind {k:?}: expected one of {}{}",
                        KINDS.join(", "),
                        suggest::did_you_mean(k, KINDS)
                    ),
                ));
                None
            }
        },
        Some(other) => {
            errs.push(FieldError::new(
                "kind",
                format!("expected string, got {}", schema::type_name(other)),
            ));
            None
        }
    };
    let Some(kind) = kind.filter(|_| api_ok) else {
        return fail(shape.errors);
    };
    shape.kind = Some(kind);

    // Shape: top-level fields, metadata, then the spec against the CRD schema. What is broken
    // is reported, then left out or stood in for, so that the rest can still be checked.
    let mut doc = doc.clone();
    let Some(map) = doc.as_object_mut() else {
        return fail(shape.errors);
    };
    let keys: Vec<String> = map.keys().cloned().collect();
    for key in keys {
        if !TOP_LEVEL_FIELDS.contains(&key.as_str()) {
            let hint = suggest::did_you_mean(&key, TOP_LEVEL_FIELDS);
            shape
                .errors
                .push(FieldError::new(key.clone(), format!("unknown field{hint}")));
            map.remove(&key);
        }
    }
    match map.get("metadata") {
        // A missing metadata is reported as a missing metadata.name by the semantic checks.
        None => {
            map.insert("metadata".into(), Value::Object(Default::default()));
        }
        Some(Value::Object(_)) => {
            if let Some(Value::Object(meta)) = map.get_mut("metadata") {
                let keys: Vec<String> = meta.keys().cloned().collect();
                for key in keys {
                    if !METADATA_FIELDS.contains(&key.as_str()) {
                        let hint = suggest::did_you_mean(&key, METADATA_FIELDS);
                        shape.errors.push(FieldError::new(
                            fields::field("metadata", &key),
                            format!("unknown field{hint}"),
                        ));
                        meta.remove(&key);
                    }
                }
            }
        }
        Some(other) => {
            shape.errors.push(FieldError::new(
                "metadata",
                format!("expected object, got {}", schema::type_name(other)),
            ));
            map.insert("metadata".into(), Value::Object(Default::default()));
            shape.tainted.push("metadata".into());
        }
    }
    let spec_schema = schema::spec_schema(kind);
    match map.get_mut("spec") {
        None => {
            shape
                .errors
                .push(FieldError::new("spec", "required field is missing"));
            map.insert("spec".into(), schema::placeholder(spec_schema));
            shape.tainted.push("spec".into());
        }
        Some(spec) => {
            if schema::check(spec, spec_schema, "spec", &mut shape) != schema::Verdict::Fine {
                *spec = schema::placeholder(spec_schema);
                shape.tainted.push("spec".into());
            }
        }
    }

    // Typed checks of what could be read.
    let object = match kind {
        "NodePool" => typed(doc, validate_nodepool, &mut shape).map(ValidatedObject::NodePool),
        "NodeClaim" => typed(doc, validate_nodeclaim, &mut shape).map(ValidatedObject::NodeClaim),
        "AWSNodeClass" => {
            typed(doc, validate_aws_node_class, &mut shape).map(ValidatedObject::AwsNodeClass)
        }
        "GCPNodeClass" => {
            typed(doc, validate_gcp_node_class, &mut shape).map(ValidatedObject::GcpNodeClass)
        }
        _ => typed(doc, validate_azure_node_class, &mut shape).map(ValidatedObject::AzureNodeClass),
    };
    ManifestReport {
        object,
        errors: shape.errors,
        repaired: shape.tainted,
    }
}

/// How many values deserialisation may leave out before giving up on the typed checks.
const MAX_DESERIALISE_RETRIES: usize = 16;

/// Deserialises with paths, then runs the semantic checks; problems already covered by the
/// structural check are left out. A value serde rejects that the schema let through is
/// reported, left out, and deserialisation tried again.
fn typed<T: DeserializeOwned>(
    mut doc: Value,
    check: fn(&T) -> Vec<FieldError>,
    shape: &mut schema::Shape,
) -> Option<T> {
    for _ in 0..MAX_DESERIALISE_RETRIES {
        let err = match serde_path_to_error::deserialize::<_, T>(&doc) {
            Ok(obj) => {
                let mut semantic = Vec::new();
                for e in check(&obj) {
                    if let Some(pending) = shape.take_pending(&e.path) {
                        // The check's own words, with the schema's hint.
                        semantic.push(FieldError::new(
                            e.path,
                            format!("{}{}", e.reason, pending.hint),
                        ));
                    } else if !shape.covers(&e.path) {
                        semantic.push(e);
                    }
                }
                shape.errors.extend(semantic);
                shape.settle();
                return Some(obj);
            }
            Err(err) => err,
        };
        let error = serde_error(&err);
        let missing = error.reason == "required field is missing";
        if let Some(pending) = shape.take_pending(&error.path) {
            shape.errors.push(pending.error);
        } else if !shape.covers(&error.path) {
            shape.errors.push(error);
        }
        if missing {
            shape.settle();
            return None;
        }
        let Some(removed) = remove_at(&mut doc, err.path()) else {
            shape.settle();
            return None;
        };
        shape.tainted.push(removed);
    }
    shape.settle();
    None
}

/// Removes the field that holds the value at `path` (the innermost object field on the way),
/// returning its path; `None` when there is none.
fn remove_at(doc: &mut Value, path: &serde_path_to_error::Path) -> Option<String> {
    use serde_path_to_error::Segment;
    let segments: Vec<&Segment> = path.iter().collect();
    let last_field = segments
        .iter()
        .rposition(|s| matches!(s, Segment::Map { .. }))?;
    let mut parent = &mut *doc;
    let mut shown = String::new();
    for seg in &segments[..last_field] {
        match seg {
            Segment::Seq { index } => {
                parent = parent.get_mut(*index)?;
                shown.push_str(&format!("[{index}]"));
            }
            Segment::Map { key } => {
                parent = parent.get_mut(key.as_str())?;
                shown = fields::field(&shown, key);
            }
            _ => return None,
        }
    }
    let Segment::Map { key } = segments[last_field] else {
        return None;
    };
    parent.as_object_mut()?.remove(key.as_str())?;
    Some(fields::field(&shown, key))
}

/// Turns a deserialisation error into a [`FieldError`] at the failing path.
fn serde_error(err: &serde_path_to_error::Error<serde_json::Error>) -> FieldError {
    use serde_path_to_error::Segment;
    let mut path = String::new();
    for seg in err.path().iter() {
        match seg {
            Segment::Seq { index } => path.push_str(&format!("[{index}]")),
            Segment::Map { key } | Segment::Enum { variant: key } => {
                path = fields::field(&path, key);
            }
            Segment::Unknown => path = fields::field(&path, "?"),
        }
    }
    let msg = err.inner().to_string();
    let quoted = |prefix: &str| {
        msg.strip_prefix(prefix)
            .and_then(|rest| rest.split('`').next())
            .map(str::to_owned)
    };
    if let Some(name) = quoted("unknown field `") {
        return FieldError::new(fields::field(&path, &name), "unknown field");
    }
    if let Some(name) = quoted("missing field `") {
        return FieldError::new(fields::field(&path, &name), "required field is missing");
    }
    if path.is_empty() {
        path.push_str("<root>");
    }
    FieldError::new(path, msg)
}
