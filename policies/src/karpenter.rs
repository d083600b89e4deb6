//! Karpenter v1 manifests as Quartermaster ones.
//!
//! A `karpenter.sh/v1` NodePool becomes a `quartermaster.dev/v1` NodePool and a
//! `karpenter.k8s.aws/v1` EC2NodeClass an `AWSNodeClass`. The shapes are the same (the
//! Quartermaster CRDs accept every Karpenter v1 field), so the conversion renames the API group
//! and kind, points `nodeClassRef` at the AWSNodeClass, maps the label keys that have a
//! Quartermaster equivalent, writes numeric limits as quantity strings and drops `status`.
//! Every change and every field whose effect differs from Karpenter's is described in
//! [`Converted::fields`]; fields with no equivalent are removed and named in
//! [`Converted::warnings`], never dropped silently.

use serde_json::Value;

use crate::labels::{
    API_VERSION, GROUP, LABEL_CAPACITY_TYPE, LABEL_INSTANCE_CPU, LABEL_INSTANCE_FAMILY,
    LABEL_INSTANCE_GPU_COUNT, LABEL_INSTANCE_GPU_MANUFACTURER, LABEL_INSTANCE_GPU_MEMORY,
    LABEL_INSTANCE_GPU_NAME, LABEL_INSTANCE_MEMORY,
};
use crate::nodeclass::KIND_AWS;

/// Karpenter's core API version (NodePool, NodeClaim).
pub const KARPENTER_API_VERSION: &str = "karpenter.sh/v1";
/// Karpenter's AWS API group (EC2NodeClass).
pub const KARPENTER_AWS_GROUP: &str = "karpenter.k8s.aws";
/// Karpenter's AWS API version.
pub const KARPENTER_AWS_API_VERSION: &str = "karpenter.k8s.aws/v1";
/// Karpenter's AWS NodeClass kind.
pub const KIND_EC2_NODE_CLASS: &str = "EC2NodeClass";

/// Karpenter label keys and the Quartermaster keys that mean the same (same values, same units).
pub const LABEL_MAP: [(&str, &str); 8] = [
    ("karpenter.sh/capacity-type", LABEL_CAPACITY_TYPE),
    ("karpenter.k8s.aws/instance-family", LABEL_INSTANCE_FAMILY),
    ("karpenter.k8s.aws/instance-cpu", LABEL_INSTANCE_CPU),
    ("karpenter.k8s.aws/instance-memory", LABEL_INSTANCE_MEMORY),
    (
        "karpenter.k8s.aws/instance-gpu-name",
        LABEL_INSTANCE_GPU_NAME,
    ),
    (
        "karpenter.k8s.aws/instance-gpu-manufacturer",
        LABEL_INSTANCE_GPU_MANUFACTURER,
    ),
    (
        "karpenter.k8s.aws/instance-gpu-count",
        LABEL_INSTANCE_GPU_COUNT,
    ),
    (
        "karpenter.k8s.aws/instance-gpu-memory",
        LABEL_INSTANCE_GPU_MEMORY,
    ),
];

/// The EC2NodeClass `spec` fields the AWSNodeClass has, with what Quartermaster does with them.
const EC2_NODE_CLASS_FIELDS: [(&str, &str); 21] = [
    ("subnetSelectorTerms", ""),
    ("securityGroupSelectorTerms", ""),
    ("amiSelectorTerms", ""),
    ("amiFamily", ""),
    ("role", ""),
    ("instanceProfile", ""),
    ("tags", ""),
    ("userData", ""),
    ("blockDeviceMappings", ""),
    ("metadataOptions", ""),
    (
        "kubelet",
        "carried as is into the launch configuration; plan and simulate do not model it (maxPods, reserved resources and eviction thresholds do not change the planned capacity)",
    ),
    (
        "instanceStorePolicy",
        "carried as is into the launch configuration; plan does not add instance-store capacity to ephemeral-storage",
    ),
    (
        "capacityReservationSelectorTerms",
        "carried as is; plan prices on-demand and spot only, never reserved capacity",
    ),
    (
        "associatePublicIPAddress",
        "carried as is into the launch configuration",
    ),
    (
        "detailedMonitoring",
        "carried as is into the launch configuration",
    ),
    (
        "placementGroupSelector",
        "carried as is into the launch configuration; plan does not model placement groups",
    ),
    (
        "networkInterfaces",
        "carried as is into the launch configuration",
    ),
    (
        "connectionTracking",
        "carried as is into the launch configuration",
    ),
    ("context", "carried as is into the launch configuration"),
    ("region", ""),
    ("efa", ""),
];

/// A converted object.
#[derive(Debug, Clone, PartialEq)]
pub struct Converted {
    /// The Quartermaster object.
    pub value: Value,
    /// One line per field changed or carried with a different effect (`field: what happens`).
    pub fields: Vec<String>,
    /// Fields with no Quartermaster equivalent, removed.
    pub warnings: Vec<String>,
}

/// Whether `value` is a Karpenter NodePool or EC2NodeClass [`convert`] handles.
pub fn is_karpenter(value: &Value) -> bool {
    matches!(
        (api_version(value), kind(value)),
        (KARPENTER_API_VERSION, "NodePool") | (KARPENTER_AWS_API_VERSION, KIND_EC2_NODE_CLASS)
    )
}

fn api_version(value: &Value) -> &str {
    value
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("")
}

fn kind(value: &Value) -> &str {
    value.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// Converts a Karpenter NodePool or EC2NodeClass; `None` for anything else. `region` is set on
/// an EC2NodeClass (which has none: Karpenter uses the cluster's region).
pub fn convert(value: &Value, region: Option<&str>) -> Option<Converted> {
    let mut out = Converted {
        value: value.clone(),
        fields: Vec::new(),
        warnings: Vec::new(),
    };
    match (api_version(value), kind(value)) {
        (KARPENTER_API_VERSION, "NodePool") => node_pool(&mut out),
        (KARPENTER_AWS_API_VERSION, KIND_EC2_NODE_CLASS) => ec2_node_class(&mut out, region),
        _ => return None,
    }
    if let Some(map) = out.value.as_object_mut() {
        map.insert("apiVersion".into(), Value::from(API_VERSION));
        if map.remove("status").is_some() {
            out.fields
                .push("status: dropped (observed state; Quartermaster fills in its own)".into());
        }
    }
    Some(out)
}

fn node_pool(out: &mut Converted) {
    let Some(spec) = out.value.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if spec.contains_key("replicas") {
        out.fields.push(
            "spec.replicas: kept; a static NodePool: Quartermaster keeps this many nodes whatever the pods need (of the limits only limits.nodes applies; its nodes are never consolidated)"
                .into(),
        );
    }
    if let Some(limits) = spec.get_mut("limits").and_then(Value::as_object_mut) {
        for (name, v) in limits.iter_mut() {
            if let Some(n) = v.as_number() {
                out.fields.push(format!(
                    "spec.limits.{name}: the number {n} written as the quantity \"{n}\""
                ));
                *v = Value::from(n.to_string());
            }
        }
    }
    let Some(template) = spec
        .get_mut("template")
        .and_then(|t| t.get_mut("spec"))
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if let Some(r) = template
        .get_mut("nodeClassRef")
        .and_then(Value::as_object_mut)
    {
        let group = r.get("group").and_then(Value::as_str).unwrap_or("");
        let kind = r.get("kind").and_then(Value::as_str).unwrap_or("");
        if group == KARPENTER_AWS_API_VERSION && kind == KIND_EC2_NODE_CLASS {
            out.warnings.push(format!(
                "spec.template.spec.nodeClassRef.group: {group:?} is an API version, not a group; read as {KARPENTER_AWS_GROUP:?}"
            ));
        }
        if (group == KARPENTER_AWS_GROUP || group == KARPENTER_AWS_API_VERSION)
            && kind == KIND_EC2_NODE_CLASS
        {
            r.insert("group".into(), Value::from(GROUP));
            r.insert("kind".into(), Value::from(KIND_AWS));
            out.fields.push(format!(
                "spec.template.spec.nodeClassRef: {KARPENTER_AWS_GROUP} {KIND_EC2_NODE_CLASS} -> {GROUP} {KIND_AWS}"
            ));
        } else {
            out.warnings.push(format!(
                "spec.template.spec.nodeClassRef: {group} {kind} has no Quartermaster equivalent; kept as is"
            ));
        }
    }
    if let Some(reqs) = template
        .get_mut("requirements")
        .and_then(Value::as_array_mut)
    {
        for (i, req) in reqs.iter_mut().enumerate() {
            let Some(key) = req.get_mut("key") else {
                continue;
            };
            let Some(to) = key
                .as_str()
                .and_then(|k| LABEL_MAP.iter().find(|(from, _)| *from == k))
                .map(|(from, to)| (*from, *to))
            else {
                continue;
            };
            out.fields.push(format!(
                "spec.template.spec.requirements[{i}].key: {} -> {}",
                to.0, to.1
            ));
            *key = Value::from(to.1);
        }
    }
}

fn ec2_node_class(out: &mut Converted, region: Option<&str>) {
    if let Some(map) = out.value.as_object_mut() {
        map.insert("kind".into(), Value::from(KIND_AWS));
    }
    out.fields
        .push(format!("kind: {KIND_EC2_NODE_CLASS} -> {KIND_AWS}"));
    let spec = match out.value.get_mut("spec") {
        Some(Value::Object(spec)) => spec,
        _ => return,
    };
    let mut removed = Vec::new();
    let known: Vec<&str> = EC2_NODE_CLASS_FIELDS.iter().map(|(f, _)| *f).collect();
    let keys: Vec<String> = spec.keys().cloned().collect();
    for key in keys {
        if known.contains(&key.as_str()) {
            continue;
        }
        // A misspelt field stays, so validate reports it with its suggestion; a field Karpenter
        // may add later goes, with a warning.
        let hint = crate::validate::suggest::did_you_mean(&key, known.iter().copied());
        if hint.is_empty() {
            spec.remove(&key);
            removed.push(key);
        } else {
            out.warnings
                .push(format!("spec.{key}: not an EC2NodeClass v1 field{hint}"));
        }
    }
    for key in removed {
        out.warnings
            .push(format!("spec.{key}: no Quartermaster equivalent; removed"));
    }
    for (field, effect) in EC2_NODE_CLASS_FIELDS {
        if !effect.is_empty() && spec.contains_key(field) {
            out.fields.push(format!("spec.{field}: {effect}"));
        }
    }
    match region {
        Some(r) => {
            spec.insert("region".into(), Value::from(r));
            out.fields.push(format!(
                "spec.region: set to {r} (an EC2NodeClass has no region: Karpenter uses the cluster's)"
            ));
        }
        None if !spec.contains_key("region") => out.fields.push(
            "spec.region: unset, so the cluster's region is used (plan: the catalog's region)"
                .into(),
        ),
        None => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn node_pool_points_at_the_aws_node_class_and_maps_labels() {
        let pool = json!({
            "apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "gpu"},
            "spec": {
                "replicas": 2,
                "limits": {"cpu": 100, "memory": "100Gi"},
                "template": {"spec": {
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"},
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                        {"key": "karpenter.k8s.aws/instance-category", "operator": "In", "values": ["g"]}
                    ]
                }}
            },
            "status": {}
        });
        let c = convert(&pool, None).unwrap();
        assert_eq!(c.value["apiVersion"], "quartermaster.dev/v1");
        assert_eq!(
            c.value["spec"]["template"]["spec"]["nodeClassRef"],
            json!({"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": "gpu"})
        );
        let reqs = &c.value["spec"]["template"]["spec"]["requirements"];
        assert_eq!(reqs[0]["key"], "quartermaster.dev/capacity-type");
        assert_eq!(reqs[1]["key"], "karpenter.k8s.aws/instance-category");
        assert_eq!(c.value["spec"]["limits"]["cpu"], "100");
        assert!(c.value.get("status").is_none());
        assert!(
            c.fields
                .iter()
                .any(|f| f.starts_with("spec.replicas: kept"))
        );
        assert!(c.warnings.is_empty());
    }

    #[test]
    fn node_class_gets_the_kind_the_region_and_warnings_for_unknown_fields() {
        let class = json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "a"},
            "spec": {"role": "r", "kubelet": {"maxPods": 20}, "futureField": true}
        });
        let c = convert(&class, Some("us-west-2")).unwrap();
        assert_eq!(c.value["kind"], "AWSNodeClass");
        assert_eq!(c.value["spec"]["region"], "us-west-2");
        assert!(c.value["spec"].get("futureField").is_none());
        assert_eq!(
            c.warnings,
            ["spec.futureField: no Quartermaster equivalent; removed"]
        );
        assert!(
            c.fields
                .iter()
                .any(|f| f.starts_with("spec.kubelet: carried"))
        );
        assert!(convert(&json!({"apiVersion": "v1", "kind": "Pod"}), None).is_none());
        // A misspelt field is kept, so validate names it with its suggestion.
        let misspelt = json!({
            "apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "metadata": {"name": "a"},
            "spec": {"rol": "r"}
        });
        let c = convert(&misspelt, None).unwrap();
        assert_eq!(c.value["spec"]["rol"], "r");
        assert_eq!(
            c.warnings,
            ["spec.rol: not an EC2NodeClass v1 field; did you mean \"role\"?"]
        );
    }
}
