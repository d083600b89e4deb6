//! Karpenter's NodeOverlay (`karpenter.sh/v1alpha1`): capacity an instance type will have that
//! the catalog cannot know (GPU time-slicing set up in user data, a device plugin's resources).
//! Read from the manifests and handed to every NodePool's node shape, as Karpenter applies
//! overlays cluster-wide (an overlay restricts itself with requirements).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::NodeSelectorRequirement;
use quartermaster_policies::Requirements;
use quartermaster_policies::quantity::parse_quantity;
use quartermaster_solver::CapacityOverlay;
use serde_json::Value;

use crate::error::ClusterError;

/// The API group and kind read here.
pub(crate) const GROUP: &str = "karpenter.sh";
/// Kind.
pub(crate) const KIND: &str = "NodeOverlay";

/// Reads one NodeOverlay (`id` names it in errors); says in `notes` what is not applied.
pub(crate) fn read(
    id: &str,
    value: &Value,
    notes: &mut Vec<String>,
) -> Result<CapacityOverlay, ClusterError> {
    let name = value
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let spec = value.get("spec").cloned().unwrap_or(Value::Null);
    let requirements: Vec<NodeSelectorRequirement> = match spec.get("requirements") {
        None | Some(Value::Null) => Vec::new(),
        Some(r) => serde_json::from_value(r.clone())
            .map_err(|e| ClusterError::invalid(id, "spec.requirements", e.to_string()))?,
    };
    let requirements = Requirements::from_k8s(&requirements)
        .map_err(|e| ClusterError::invalid(id, "spec.requirements", e.to_string()))?;
    let mut capacity = BTreeMap::new();
    if let Some(map) = spec.get("capacity").and_then(Value::as_object) {
        for (resource, q) in map {
            let text = match q {
                Value::String(s) => s.clone(),
                Value::Number(n) => n.to_string(),
                other => other.to_string(),
            };
            let amount = parse_quantity(&text)
                .ok()
                .and_then(|m| u64::try_from(m.to_whole_floor()).ok())
                .ok_or_else(|| {
                    ClusterError::invalid(
                        id,
                        format!("spec.capacity.{resource}"),
                        format!("{text:?} is not a whole, non-negative quantity"),
                    )
                })?;
            capacity.insert(resource.clone(), amount);
        }
    }
    for field in ["price", "priceAdjustment"] {
        if spec.get(field).is_some() {
            notes.push(format!(
                "{id}: spec.{field} not applied: Quartermaster prices nodes from its catalog"
            ));
        }
    }
    Ok(CapacityOverlay {
        name,
        weight: spec.get("weight").and_then(Value::as_i64).unwrap_or(0),
        requirements,
        capacity,
    })
}

#[cfg(test)]
mod tests {
    use crate::testing::{ingest, ingest_err};

    const POOL: &str = "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: gpu}
";

    #[test]
    fn overlays_reach_every_pool_and_price_fields_are_named() {
        let ingested = ingest(&format!(
            "{POOL}---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {{name: slices}}
spec:
  weight: 10
  requirements:
  - {{key: karpenter.k8s.aws/instance-gpu-count, operator: In, values: ['1']}}
  capacity: {{nvidia.com/gpu: 4}}
  priceAdjustment: '-10%'
"
        ));
        let overlays = &ingested.snapshot.node_pools[0].node_shape.overlays;
        assert_eq!(overlays.len(), 1);
        assert_eq!(overlays[0].name, "slices");
        assert_eq!(overlays[0].weight, 10);
        assert_eq!(overlays[0].capacity["nvidia.com/gpu"], 4);
        assert!(
            ingested
                .notes
                .iter()
                .any(|n| n == "NodeOverlay/slices: spec.priceAdjustment not applied: Quartermaster prices nodes from its catalog"),
            "{:?}",
            ingested.notes
        );
        let err = ingest_err(&format!(
            "{POOL}---
apiVersion: karpenter.sh/v1alpha1
kind: NodeOverlay
metadata: {{name: bad}}
spec: {{capacity: {{nvidia.com/gpu: lots}}}}
"
        ));
        assert!(
            err.to_string().contains("spec.capacity.nvidia.com/gpu"),
            "{err}"
        );
    }
}
