//! Dynamic Resource Allocation (`resource.k8s.io/v1`) as the controller watches it:
//! DeviceClasses, ResourceClaims, ResourceClaimTemplates and ResourceSlices, each an optional
//! watch (a cluster that does not serve `resource.k8s.io/v1` reads them as empty, see
//! [`crate::stores`]).
//!
//! [`objects`] hands them to the snapshot with the other objects each pass, as JSON with
//! `apiVersion` and `kind` set, exactly as `plan -f` reads them from manifests:
//! `quartermaster-cluster` resolves each pending pod's `spec.resourceClaims` against them.
//! ResourceSlices are passed only when they belong to one node (`spec.nodeName`): they say
//! which devices existing nodes have. Pods that name a claim are read with these objects, never
//! on their own ([`crate::pod_readings::PodReadings::standalone`]).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod as KubePod;
use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use serde::Serialize;
use serde_json::Value;

/// The API version of the DRA kinds read.
pub const API_VERSION: &str = "resource.k8s.io/v1";

/// The DRA objects of one look at the stores, as objects for the snapshot (with `apiVersion`
/// and `kind`), sorted by kind, namespace and name so that a pass reads them in one order
/// whatever order the stores list them in. Slices without `spec.nodeName` (pools published for
/// a node selector or all nodes) are left out.
pub fn objects(
    classes: &[Arc<DeviceClass>],
    claims: &[Arc<ResourceClaim>],
    templates: &[Arc<ResourceClaimTemplate>],
    slices: &[Arc<ResourceSlice>],
) -> Vec<Value> {
    let mut out = Vec::with_capacity(classes.len() + claims.len() + templates.len());
    out.extend(
        classes
            .iter()
            .filter_map(|c| with_type(c.as_ref(), "DeviceClass")),
    );
    out.extend(
        claims
            .iter()
            .filter_map(|c| with_type(c.as_ref(), "ResourceClaim")),
    );
    out.extend(
        templates
            .iter()
            .filter_map(|t| with_type(t.as_ref(), "ResourceClaimTemplate")),
    );
    out.extend(
        slices
            .iter()
            .filter(|s| s.spec.node_name.as_deref().is_some_and(|n| !n.is_empty()))
            .filter_map(|s| with_type(s.as_ref(), "ResourceSlice")),
    );
    out.sort_by(|a, b| identity(a).cmp(&identity(b)));
    out
}

/// [`objects`] of `stores`, when one of `pods` names a claim; none otherwise (nothing would
/// read them: a cluster whose DRA drivers publish a slice per node does not pay for turning
/// them into JSON and reading them every pass while no pod asks for a device).
pub fn objects_if_claimed(stores: &crate::stores::Stores, pods: &[Arc<KubePod>]) -> Vec<Value> {
    if !pods.iter().any(|p| names_claims(p)) {
        return Vec::new();
    }
    objects(
        &stores.device_classes.state(),
        &stores.resource_claims.state(),
        &stores.resource_claim_templates.state(),
        &stores.resource_slices.state(),
    )
}

/// Whether `pod` names a ResourceClaim or ResourceClaimTemplate (`spec.resourceClaims`).
pub fn names_claims(pod: &KubePod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.resource_claims.as_ref())
        .is_some_and(|c| !c.is_empty())
}

fn identity(v: &Value) -> (&str, &str, &str) {
    (
        v["kind"].as_str().unwrap_or_default(),
        v["metadata"]["namespace"].as_str().unwrap_or_default(),
        v["metadata"]["name"].as_str().unwrap_or_default(),
    )
}

fn with_type<T: Serialize>(object: &T, kind: &str) -> Option<Value> {
    let mut v = serde_json::to_value(object).ok()?;
    v["apiVersion"] = Value::from(API_VERSION);
    v["kind"] = Value::from(kind);
    Some(v)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn typed<T: serde::de::DeserializeOwned>(v: Value) -> Arc<T> {
        Arc::new(serde_json::from_value(v).expect("a valid object"))
    }

    #[test]
    fn objects_carry_their_type_are_sorted_and_keep_only_node_local_slices() {
        let class = typed::<DeviceClass>(json!({"metadata": {"name": "gpu.nvidia.com"},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}}));
        let claim =
            typed::<ResourceClaim>(json!({"metadata": {"name": "one-gpu", "namespace": "ml"},
            "spec": {"devices": {"requests": [{"name": "gpu",
                "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
            "status": {"allocation": {"devices": {"results": [{"request": "gpu",
                "driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-0"}]}}}}));
        let templates = [
            typed::<ResourceClaimTemplate>(json!({"metadata": {"name": "b", "namespace": "ml"},
                "spec": {"spec": {"devices": {"requests": [{"name": "gpu",
                    "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}})),
            typed::<ResourceClaimTemplate>(json!({"metadata": {"name": "a", "namespace": "ml"},
                "spec": {"spec": {}}})),
        ];
        let slice = |name: &str, spec: Value| {
            typed::<ResourceSlice>(json!({"metadata": {"name": name}, "spec": spec}))
        };
        let slices = [
            slice(
                "node-a-gpu-nvidia-com",
                json!({"driver": "gpu.nvidia.com", "nodeName": "node-a",
                    "pool": {"name": "node-a", "generation": 1, "resourceSliceCount": 1},
                    "devices": [{"name": "gpu-0"}]}),
            ),
            slice(
                "network-attached",
                json!({"driver": "gpu.nvidia.com", "allNodes": true,
                    "pool": {"name": "shared", "generation": 1, "resourceSliceCount": 1}}),
            ),
        ];
        let out = objects(&[class], &[claim], &templates, &slices);
        let ids: Vec<String> = out
            .iter()
            .map(|v| {
                format!(
                    "{} {} {}/{}",
                    v["apiVersion"].as_str().unwrap(),
                    v["kind"].as_str().unwrap(),
                    v["metadata"]["namespace"].as_str().unwrap_or("-"),
                    v["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            ids,
            [
                "resource.k8s.io/v1 DeviceClass -/gpu.nvidia.com",
                "resource.k8s.io/v1 ResourceClaim ml/one-gpu",
                "resource.k8s.io/v1 ResourceClaimTemplate ml/a",
                "resource.k8s.io/v1 ResourceClaimTemplate ml/b",
                "resource.k8s.io/v1 ResourceSlice -/node-a-gpu-nvidia-com",
            ]
        );
        // A claim's allocation is what pins its pod: kept.
        assert_eq!(
            out[1]["status"]["allocation"]["devices"]["results"][0]["device"],
            "gpu-0"
        );
        assert_eq!(out[4]["spec"]["devices"][0]["name"], "gpu-0");
    }

    #[test]
    fn a_pod_names_claims_only_with_resource_claims() {
        let pod = |spec: Value| -> KubePod {
            serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ml"},
                "spec": spec}))
            .expect("a pod")
        };
        let containers = json!([{"name": "main", "image": "vllm"}]);
        assert!(!names_claims(&pod(json!({"containers": containers}))));
        assert!(!names_claims(&pod(
            json!({"containers": containers, "resourceClaims": []})
        )));
        assert!(names_claims(&pod(json!({"containers": containers,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}))));
    }
}
