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

/// Checks `value` against `schema`, appending every problem under `path`.
pub(crate) fn check(
    value: &Value,
    schema: &JSONSchemaProps,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if value.is_null() {
        if schema.nullable != Some(true) {
            errs.push(FieldError::new(path, "must not be null"));
        }
        return;
    }
    if schema.x_kubernetes_preserve_unknown_fields == Some(true) {
        return;
    }
    if schema.x_kubernetes_int_or_string == Some(true) {
        if !matches!(value, Value::String(_) | Value::Number(_)) {
            errs.push(FieldError::new(
                path,
                format!("expected integer or string, got {}", type_name(value)),
            ));
        }
        return;
    }
    let Some(expected) = schema.type_.as_deref() else {
        return;
    };
    let actual = type_name(value);
    let type_ok = match expected {
        "number" => matches!(value, Value::Number(_)),
        other => other == actual,
    };
    if !type_ok {
        errs.push(FieldError::new(
            path,
            format!("expected {expected}, got {actual}"),
        ));
        return;
    }
    match value {
        Value::Object(map) => {
            if let Some(props) = &schema.properties {
                for (k, v) in map {
                    match props.get(k) {
                        Some(sub) => check(v, sub, &field(path, k), errs),
                        None => errs.push(FieldError::new(field(path, k), "unknown field")),
                    }
                }
                for required in schema.required.iter().flatten() {
                    if !map.contains_key(required) {
                        errs.push(FieldError::new(
                            field(path, required),
                            "required field is missing",
                        ));
                    }
                }
            } else if let Some(JSONSchemaPropsOrBool::Schema(sub)) = &schema.additional_properties {
                for (k, v) in map {
                    check(v, sub, &key(path, k), errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(JSONSchemaPropsOrArray::Schema(sub)) = &schema.items {
                for (i, v) in items.iter().enumerate() {
                    check(v, sub, &index(path, i), errs);
                }
            }
        }
        _ => {}
    }
}
