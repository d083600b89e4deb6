//! Validation beyond the OpenAPI schema.
//!
//! [`validate_manifest`] takes one parsed YAML/JSON object, routes it by
//! `apiVersion`/`kind`, checks its shape against the generated CRD schema
//! (every unknown field, wrong type and missing required field, each with
//! its path), deserialises it, and runs the semantic checks of
//! [`validate_nodepool`], [`validate_nodeclaim`] and the NodeClass
//! validators, collecting every problem rather than stopping at the first.
//!
//! Paths use `.` for fields, `[i]` for list items and `[key]` for map keys:
//! `spec.template.spec.requirements[0].operator`,
//! `spec.limits[nvidia.com/gpu]`, `spec.template.metadata.labels[team]`.
//! A `nodeClassRef` naming a NodeClass that does not exist is not an error.

mod fields;
mod label_keys;
mod nodeclaim;
mod nodeclass;
mod nodepool;
mod schema;
#[cfg(test)]
mod tests;

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::de::DeserializeOwned;
use serde_json::Value;

pub use label_keys::unknown_requirement_keys;
pub use nodeclaim::validate_nodeclaim;
pub use nodeclass::{validate_aws_node_class, validate_azure_node_class, validate_gcp_node_class};
pub use nodepool::validate_nodepool;

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

/// Validates one parsed manifest and returns it typed, or every problem found.
pub fn validate_manifest(doc: &Value) -> Result<ValidatedObject, Vec<FieldError>> {
    let Some(obj) = doc.as_object() else {
        return Err(vec![FieldError::new(
            "<root>",
            format!("expected an object, got {}", schema::type_name(doc)),
        )]);
    };
    let mut errs = Vec::new();

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
            format!("unsupported apiVersion {v:?}: expected {API_VERSION:?}"),
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
                        "unsupported kind {k:?}: expected one of {}",
                        KINDS.join(", ")
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
        return Err(errs);
    };

    // Shape: top-level fields, metadata, then the spec against the CRD schema.
    for key in obj.keys() {
        if !TOP_LEVEL_FIELDS.contains(&key.as_str()) {
            errs.push(FieldError::new(key.clone(), "unknown field"));
        }
    }
    let mut doc = doc.clone();
    match obj.get("metadata") {
        None => {
            // Reported as a missing metadata.name by the semantic checks.
            doc["metadata"] = Value::Object(Default::default());
        }
        Some(Value::Object(_)) => {}
        Some(other) => errs.push(FieldError::new(
            "metadata",
            format!("expected object, got {}", schema::type_name(other)),
        )),
    }
    match obj.get("spec") {
        None => errs.push(FieldError::new("spec", "required field is missing")),
        Some(spec) => schema::check(spec, schema::spec_schema(kind), "spec", &mut errs),
    }
    if !errs.is_empty() {
        return Err(errs);
    }

    // Typed checks.
    match kind {
        "NodePool" => typed(doc, validate_nodepool).map(ValidatedObject::NodePool),
        "NodeClaim" => typed(doc, validate_nodeclaim).map(ValidatedObject::NodeClaim),
        "AWSNodeClass" => typed(doc, validate_aws_node_class).map(ValidatedObject::AwsNodeClass),
        "GCPNodeClass" => typed(doc, validate_gcp_node_class).map(ValidatedObject::GcpNodeClass),
        _ => typed(doc, validate_azure_node_class).map(ValidatedObject::AzureNodeClass),
    }
}

/// Deserialises with paths, then runs the semantic checks.
fn typed<T: DeserializeOwned>(
    doc: Value,
    check: fn(&T) -> Vec<FieldError>,
) -> Result<T, Vec<FieldError>> {
    let obj: T = serde_path_to_error::deserialize(doc).map_err(|e| vec![serde_error(&e)])?;
    let errs = check(&obj);
    if errs.is_empty() { Ok(obj) } else { Err(errs) }
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
