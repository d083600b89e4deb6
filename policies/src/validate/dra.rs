//! DRA objects (`resource.k8s.io/v1` DeviceClass, ResourceClaim, ResourceClaimTemplate): the CEL
//! selectors compile and the requests' allocation modes are ones the allocator knows, each
//! problem at its field path.

use serde_json::{Map, Value};

use super::FieldError;
use crate::dra::{AllocationMode, DeviceSelector};
use crate::error::PolicyError;

/// The API version of the DRA objects checked here.
pub(crate) const DRA_API_VERSION: &str = "resource.k8s.io/v1";

/// The DRA kinds checked here.
pub(crate) const DRA_KINDS: [&str; 3] = ["DeviceClass", "ResourceClaim", "ResourceClaimTemplate"];

/// Whether `obj` is a DRA object this module checks.
pub(crate) fn is_dra(obj: &Map<String, Value>) -> bool {
    obj.get("apiVersion").and_then(Value::as_str) == Some(DRA_API_VERSION)
        && obj
            .get("kind")
            .and_then(Value::as_str)
            .is_some_and(|k| DRA_KINDS.contains(&k))
}

/// Every problem of a DRA object.
pub(crate) fn validate_dra(obj: &Map<String, Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    match obj.get("kind").and_then(Value::as_str) {
        Some("DeviceClass") => selectors(obj.get("spec"), "spec", &mut errors),
        Some("ResourceClaim") => claim(obj.get("spec"), "spec", &mut errors),
        Some("ResourceClaimTemplate") => claim(
            obj.get("spec").and_then(|s| s.get("spec")),
            "spec.spec",
            &mut errors,
        ),
        _ => {}
    }
    errors
}

/// `{at}.selectors[j].cel.expression` compiled.
fn selectors(parent: Option<&Value>, at: &str, errors: &mut Vec<FieldError>) {
    let Some(list) = parent.and_then(|p| p.get("selectors")) else {
        return;
    };
    let Some(list) = list.as_array() else {
        errors.push(FieldError::new(format!("{at}.selectors"), "must be a list"));
        return;
    };
    for (j, s) in list.iter().enumerate() {
        let field = format!("{at}.selectors[{j}].cel.expression");
        match s.get("cel").and_then(|c| c.get("expression")) {
            Some(Value::String(expression)) => {
                if let Err(PolicyError::InvalidSelector {
                    expression,
                    message,
                    ..
                }) = DeviceSelector::compile(&field, expression)
                {
                    errors.push(FieldError::new(
                        field,
                        format!("Invalid value: {expression:?}: {message}"),
                    ));
                }
            }
            _ => errors.push(FieldError::new(field, "required field is missing")),
        }
    }
}

/// A claim's requests: selectors compile, one of exactly / firstAvailable, known modes.
fn claim(spec: Option<&Value>, at: &str, errors: &mut Vec<FieldError>) {
    let Some(requests) = spec
        .and_then(|s| s.get("devices"))
        .and_then(|d| d.get("requests"))
        .and_then(Value::as_array)
    else {
        return;
    };
    for (i, r) in requests.iter().enumerate() {
        let field = format!("{at}.devices.requests[{i}]");
        match (r.get("exactly"), r.get("firstAvailable")) {
            (Some(e), None) => {
                request(e, &format!("{field}.exactly"), errors);
            }
            (None, Some(Value::Array(subs))) if !subs.is_empty() => {
                for (k, s) in subs.iter().enumerate() {
                    request(s, &format!("{field}.firstAvailable[{k}]"), errors);
                }
            }
            _ => errors.push(FieldError::new(
                field,
                "exactly one of exactly or firstAvailable must be set",
            )),
        }
    }
}

fn request(r: &Value, at: &str, errors: &mut Vec<FieldError>) {
    if r.get("deviceClassName").and_then(Value::as_str).is_none() {
        errors.push(FieldError::new(
            format!("{at}.deviceClassName"),
            "required field is missing",
        ));
    }
    let mode = r.get("allocationMode").and_then(Value::as_str);
    let count = r.get("count").and_then(Value::as_i64);
    if let Err(PolicyError::InvalidClaim { field, reason }) =
        crate::dra::allocation_mode(at, mode, count).map(|_: AllocationMode| ())
    {
        errors.push(FieldError::new(field, reason));
    }
    selectors(Some(r), at, errors);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(yaml: &str) -> Vec<String> {
        let v: Value = serde_norway::from_str(yaml).expect("yaml");
        validate_dra(v.as_object().expect("object"))
            .into_iter()
            .map(|e| format!("{}: {}", e.path, e.reason))
            .collect()
    }

    #[test]
    fn a_claim_template_with_a_broken_selector_and_an_unknown_mode_gets_both_errors() {
        let errors = check(
            r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: gpu}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu.nvidia.com
          allocationMode: Some
          selectors:
          - cel: {expression: "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >="}
"#,
        );
        assert_eq!(errors.len(), 2, "{errors:?}");
        assert!(
            errors[0].starts_with(
                "spec.spec.devices.requests[0].exactly.allocationMode: Unsupported value: \"Some\""
            ),
            "{errors:?}"
        );
        assert!(errors[1].starts_with("spec.spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: \"device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >=\": compilation failed: ERROR: <input>:1:"), "{errors:?}");
    }

    #[test]
    fn a_good_device_class_and_claim_have_no_errors() {
        assert!(
            check(
                r#"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
"#
            )
            .is_empty()
        );
        assert!(
            check(
                r#"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: two-gpus}
spec:
  devices:
    requests:
    - name: gpus
      firstAvailable:
      - {name: h100, deviceClassName: gpu.nvidia.com, count: 2}
      - {name: any, deviceClassName: gpu.nvidia.com, allocationMode: All}
"#
            )
            .is_empty()
        );
    }
}
