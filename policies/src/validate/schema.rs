//! Structural check of a document against the generated CRD schema:
//! unknown fields, wrong types and missing required fields, all of them.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use serde_json::Value;

use super::FieldError;
use super::fields::{field, index, key};
use super::suggest::did_you_mean;

/// The JSON type of a value, as named in schemas.
pub(crate) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The `spec` schema of a kind's CRD.
pub(crate) fn spec_schema(kind: &str) -> &'static JSONSchemaProps {
    static SCHEMAS: OnceLock<BTreeMap<String, JSONSchemaProps>> = OnceLock::new();
    let schemas = SCHEMAS.get_or_init(|| {
        crate::crds()
            .into_iter()
            .filter_map(|crd| {
                let kind = crd.spec.names.kind.clone();
                let spec = crd
                    .spec
                    .versions
                    .into_iter()
                    .next()?
                    .schema?
                    .open_api_v3_schema?
                    .properties?
                    .remove("spec")?;
                Some((kind, spec))
            })
            .collect()
    });
    &schemas[kind]
}

/// What the structural check found: the problems, and the paths whose values were removed or
/// replaced by a placeholder so that the rest of the object can still be checked.
#[derive(Debug, Default)]
pub(crate) struct Shape {
    /// Every structural problem (fields in the order of their names).
    pub(crate) errors: Vec<FieldError>,
    /// Paths whose value was removed (unknown fields, wrong types, unsupported values) or
    /// filled with a placeholder (missing required fields). Later checks say nothing at or
    /// under them: the problem there is already reported.
    pub(crate) tainted: Vec<String>,
    /// The kind checked, for "did you mean" across levels (a field written at the wrong place).
    pub(crate) kind: Option<&'static str>,
    /// Values the schema does not list in its enum, kept in place and not yet reported: a
    /// semantic check of the same field says it in its own words (with the hint added), a
    /// deserialisation failure there is reported in these words, and what neither reports is
    /// reported as is at the end ([`Shape::settle`]).
    pub(crate) pending: Vec<Pending>,
}

/// An unsupported enum value not yet reported.
#[derive(Debug)]
pub(crate) struct Pending {
    /// The problem in the schema's words, hint included.
    pub(crate) error: FieldError,
    /// `; did you mean "x"?`, or empty.
    pub(crate) hint: String,
}

impl Shape {
    fn error(&mut self, path: &str, reason: impl Into<String>) {
        self.errors.push(FieldError::new(path, reason));
    }

    /// The pending problem at `path`, taken out of [`Shape::pending`].
    pub(crate) fn take_pending(&mut self, path: &str) -> Option<Pending> {
        let i = self.pending.iter().position(|p| p.error.path == path)?;
        Some(self.pending.remove(i))
    }

    /// Reports the pending problems nothing else reported.
    pub(crate) fn settle(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        self.errors.extend(pending.into_iter().map(|p| p.error));
    }

    /// Whether a problem at `path` is already covered: reported at the same path, or at or
    /// under a tainted path.
    pub(crate) fn covers(&self, path: &str) -> bool {
        self.errors.iter().any(|e| e.path == path) || self.tainted.iter().any(|t| within(path, t))
    }
}

/// Whether `path` is `parent` or lies under it (`parent.x`, `parent[0]`).
pub(crate) fn within(path: &str, parent: &str) -> bool {
    path.strip_prefix(parent)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('.') || rest.starts_with('['))
}

/// A value of `schema`'s type that deserialises: required fields filled in, the first enum
/// value, zero, empty. It stands in for a missing or broken required value, so that the other
/// fields of the object can still be checked; its path is tainted.
pub(crate) fn placeholder(schema: &JSONSchemaProps) -> Value {
    if let Some(first) = schema.enum_.as_ref().and_then(|e| e.first()) {
        return first.0.clone();
    }
    if schema.x_kubernetes_int_or_string == Some(true) {
        return Value::from(0);
    }
    match schema.type_.as_deref() {
        Some("object") | None if schema.x_kubernetes_preserve_unknown_fields == Some(true) => {
            Value::Object(Default::default())
        }
        Some("object") => {
            let mut map = serde_json::Map::new();
            if let Some(props) = &schema.properties {
                for required in schema.required.iter().flatten() {
                    if let Some(sub) = props.get(required) {
                        map.insert(required.clone(), placeholder(sub));
                    }
                }
            }
            Value::Object(map)
        }
        Some("array") => Value::Array(Vec::new()),
        Some("string") => Value::String(String::new()),
        Some("integer") | Some("number") => Value::from(0),
        Some("boolean") => Value::Bool(false),
        _ => Value::Null,
    }
}

/// Every field name of a kind's spec and the paths where it may appear
/// (`expireAfter` → `spec.template.spec.expireAfter`; list items as `[]`).
fn field_paths(kind: &str) -> &'static BTreeMap<String, Vec<String>> {
    static PATHS: OnceLock<BTreeMap<String, BTreeMap<String, Vec<String>>>> = OnceLock::new();
    fn walk(schema: &JSONSchemaProps, path: &str, out: &mut BTreeMap<String, Vec<String>>) {
        if let Some(props) = &schema.properties {
            for (name, sub) in props {
                let p = field(path, name);
                out.entry(name.clone()).or_default().push(p.clone());
                walk(sub, &p, out);
            }
        }
        if let Some(JSONSchemaPropsOrArray::Schema(sub)) = &schema.items {
            walk(sub, &format!("{path}[]"), out);
        }
        if let Some(JSONSchemaPropsOrBool::Schema(sub)) = &schema.additional_properties {
            walk(sub, &format!("{path}[]"), out);
        }
    }
    let all = PATHS.get_or_init(|| {
        super::KINDS
            .iter()
            .map(|kind| {
                let mut out = BTreeMap::new();
                walk(spec_schema(kind), "spec", &mut out);
                (kind.to_string(), out)
            })
            .collect()
    });
    &all[kind]
}

/// Checks `value` against `schema`, recording every problem under `path` in `shape`.
///
/// Problems inside the value are repaired in place so the object can still be deserialised and
/// checked further: unknown fields are removed, broken optional fields removed, broken
/// required fields and list items replaced by a [`placeholder`], missing required fields
/// filled in; unsupported enum values are kept and left pending ([`Shape::pending`]). The [`Verdict`] says whether the value itself is broken; the caller removes or
/// replaces it.
pub(crate) fn check(
    value: &mut Value,
    schema: &JSONSchemaProps,
    path: &str,
    shape: &mut Shape,
) -> Verdict {
    if value.is_null() {
        if schema.nullable != Some(true) {
            shape.error(path, "must not be null");
            return Verdict::Broken;
        }
        return Verdict::Fine;
    }
    if schema.x_kubernetes_preserve_unknown_fields == Some(true) {
        return Verdict::Fine;
    }
    if schema.x_kubernetes_int_or_string == Some(true) {
        if !matches!(value, Value::String(_) | Value::Number(_)) {
            shape.error(
                path,
                format!("expected integer or string, got {}", type_name(value)),
            );
            return Verdict::Broken;
        }
        return Verdict::Fine;
    }
    let Some(expected) = schema.type_.as_deref() else {
        return Verdict::Fine;
    };
    let actual = type_name(value);
    let type_ok = match expected {
        "number" => matches!(value, Value::Number(_)),
        other => other == actual,
    };
    if !type_ok {
        shape.error(path, format!("expected {expected}, got {actual}"));
        return Verdict::Broken;
    }
    if let Some(allowed) = &schema.enum_
        && !allowed.iter().any(|a| a.0 == *value)
    {
        let names: Vec<String> = allowed
            .iter()
            .map(|a| match &a.0 {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            })
            .collect();
        let shown = match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let list = names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let hint = did_you_mean(&shown, names.iter().map(String::as_str));
        shape.pending.push(Pending {
            error: FieldError::new(
                path,
                format!("unknown variant `{shown}`, expected one of {list}{hint}"),
            ),
            hint,
        });
        return Verdict::Unsupported;
    }
    match value {
        Value::Object(map) => {
            if let Some(props) = &schema.properties {
                let keys: Vec<String> = map.keys().cloned().collect();
                for k in keys {
                    let p = field(path, &k);
                    let Some(sub) = props.get(&k) else {
                        let mut hint = did_you_mean(&k, props.keys().map(String::as_str));
                        if hint.is_empty()
                            && let Some(kind) = shape.kind
                            && let [only] = field_paths(kind)
                                .get(&k)
                                .map(Vec::as_slice)
                                .unwrap_or_default()
                        {
                            hint = format!("; did you mean {only}?");
                        }
                        shape.error(&p, format!("unknown field{hint}"));
                        map.remove(&k);
                        continue;
                    };
                    let Some(v) = map.get_mut(&k) else { continue };
                    let required = schema.required.iter().flatten().any(|r| *r == k);
                    match check(v, sub, &p, shape) {
                        // An unsupported value is kept (see [`Shape::pending`]).
                        Verdict::Fine | Verdict::Unsupported => continue,
                        Verdict::Broken if required => *v = placeholder(sub),
                        Verdict::Broken => {
                            map.remove(&k);
                        }
                    }
                    shape.tainted.push(p);
                }
                for required in schema.required.iter().flatten() {
                    if !map.contains_key(required) {
                        let p = field(path, required);
                        shape.error(&p, "required field is missing");
                        if let Some(sub) = props.get(required) {
                            map.insert(required.clone(), placeholder(sub));
                        }
                        shape.tainted.push(p);
                    }
                }
            } else if let Some(JSONSchemaPropsOrBool::Schema(sub)) = &schema.additional_properties {
                let keys: Vec<String> = map.keys().cloned().collect();
                for k in keys {
                    let p = key(path, &k);
                    if let Some(v) = map.get_mut(&k)
                        && check(v, sub, &p, shape) == Verdict::Broken
                    {
                        map.remove(&k);
                        shape.tainted.push(p);
                    }
                }
            }
        }
        Value::Array(items) => {
            if let Some(JSONSchemaPropsOrArray::Schema(sub)) = &schema.items {
                for (i, v) in items.iter_mut().enumerate() {
                    let p = index(path, i);
                    match check(v, sub, &p, shape) {
                        Verdict::Fine | Verdict::Unsupported => {}
                        Verdict::Broken => {
                            // Replaced, not removed: later items keep their index in messages.
                            *v = placeholder(sub);
                            shape.tainted.push(p);
                        }
                    }
                }
            }
        }
        _ => {}
    }
    Verdict::Fine
}

/// Whether a value fits its schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It fits (problems inside it, if any, were recorded and repaired).
    Fine,
    /// Wrong type or null: it cannot be read at all.
    Broken,
    /// The right type, but not one of the schema's enum values.
    Unsupported,
}
