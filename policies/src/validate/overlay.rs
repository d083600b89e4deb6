//! Karpenter's NodeOverlay (`karpenter.sh/v1alpha1`), which `plan` reads as it is: the fields
//! Quartermaster uses are checked (requirements, capacity, weight); price fields are accepted
//! and reported by `plan` as not applied.

use serde_json::Value;

use super::FieldError;
use super::fields::{self, field, push};
use crate::common::NodeSelectorRequirementWithMinValues;
use crate::quantity::parse_quantity;

/// The apiVersion of a NodeOverlay.
pub const NODE_OVERLAY_API_VERSION: &str = "karpenter.sh/v1alpha1";
/// Its kind.
pub const NODE_OVERLAY_KIND: &str = "NodeOverlay";

/// Every problem of a NodeOverlay (empty when Quartermaster can use it).
pub(crate) fn validate_node_overlay(obj: &serde_json::Map<String, Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    if obj
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .is_none_or(str::is_empty)
    {
        push(&mut errs, "metadata.name", "required field is missing");
    }
    let Some(spec) = obj.get("spec").and_then(Value::as_object) else {
        push(&mut errs, "spec", "required field is missing");
        return errs;
    };
    match spec.get("requirements") {
        None | Some(Value::Null) => {}
        Some(r) => {
            match serde_json::from_value::<Vec<NodeSelectorRequirementWithMinValues>>(r.clone()) {
                Ok(reqs) => fields::requirements(&reqs, "spec.requirements", false, &mut errs),
                Err(e) => push(&mut errs, "spec.requirements", e.to_string()),
            }
        }
    }
    if let Some(w) = spec.get("weight")
        && !w.as_i64().is_some_and(|w| (1..=10_000).contains(&w))
    {
        push(
            &mut errs,
            "spec.weight",
            format!("must be a whole number from 1 to 10000, got {w}"),
        );
    }
    if let Some(capacity) = spec.get("capacity") {
        match capacity.as_object() {
            None => push(
                &mut errs,
                "spec.capacity",
                "must be a map of resource name to quantity",
            ),
            Some(map) => {
                for (resource, q) in map {
                    let text = match q {
                        Value::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    let p = field("spec.capacity", resource);
                    if ["cpu", "memory", "pods", "ephemeral-storage"].contains(&resource.as_str()) {
                        push(
                            &mut errs,
                            p,
                            "only extended resources may be overlaid (as Karpenter)",
                        );
                        continue;
                    }
                    match parse_quantity(&text) {
                        Ok(v) if !v.is_negative() && v.millis() % 1000 == 0 => {}
                        Ok(_) => push(
                            &mut errs,
                            p,
                            format!("{text:?} must be a whole, non-negative quantity"),
                        ),
                        Err(e) => push(&mut errs, p, e.to_string()),
                    }
                }
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::validate::check_manifest;

    fn problems(spec: serde_json::Value) -> Vec<String> {
        let doc = json!({
            "apiVersion": "karpenter.sh/v1alpha1", "kind": "NodeOverlay",
            "metadata": {"name": "slices"}, "spec": spec
        });
        check_manifest(&doc)
            .errors
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn a_node_overlay_is_checked_for_what_plan_uses() {
        let ok = problems(json!({
            "weight": 10,
            "requirements": [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "In", "values": ["1"]}],
            "capacity": {"nvidia.com/gpu": 4},
            "priceAdjustment": "-10%"
        }));
        assert!(ok.is_empty(), "{ok:?}");
        let bad = problems(json!({
            "requirements": [{"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Inn", "values": ["1"]}],
            "capacity": {"cpu": 4, "nvidia.com/gpu": "1.5"}
        }));
        assert_eq!(bad.len(), 3, "{bad:?}");
        assert!(
            bad.iter()
                .any(|e| e.starts_with("spec.requirements[0].operator")),
            "{bad:?}"
        );
        assert!(
            bad.iter()
                .any(|e| e.starts_with("spec.capacity.cpu: only extended resources")),
            "{bad:?}"
        );
        assert!(
            bad.iter()
                .any(|e| e.starts_with("spec.capacity.nvidia.com/gpu: \"1.5\" must be a whole")),
            "{bad:?}"
        );
    }
}
