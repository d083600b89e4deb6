//! The ResourceSlices (`resource.k8s.io/v1`) a kwok Node publishes: the devices the DRA drivers
//! of a real node of its instance type would publish ([`published_devices`]), so the real
//! kube-scheduler can allocate ResourceClaims on kwok Nodes.
//!
//! One slice per driver, named `<node>-<driver with dots replaced by dashes>`, in a pool named
//! after the node (generation 1, one slice; a driver with more devices than one slice may hold
//! is split over several, `…-0`, `…-1`, and the pool counts them). Each slice is owned by its
//! Node (an `ownerReference` with the Node's uid): the garbage collector deletes the slices
//! with the Node, whoever deletes it. They are written by server-side apply when the Node is
//! created or found by a retried launch, and by the first `list` of a process for the Nodes it
//! has not published yet (launched before a restart or an upgrade, or whose publish failed), so
//! publishing again changes nothing or brings an old slice up to date.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Node;
use quartermaster_pricing::InstanceType;
use quartermaster_pricing::devices::{PublishedDevice, published_devices};
use serde_json::{Map, Value, json};

use crate::keys;

/// The API version of the slices.
pub(crate) const API_VERSION: &str = "resource.k8s.io/v1";
/// The most devices one ResourceSlice may hold (`ResourceSliceMaxDevices`).
pub(crate) const MAX_DEVICES_PER_SLICE: usize = 128;
/// The field manager of the slices' server-side apply.
pub(crate) const FIELD_MANAGER: &str = "quartermaster-kwok";

/// The name of the slice of `driver`'s devices on `node` (`part` when the driver's devices
/// take several slices).
pub(crate) fn slice_name(node: &str, driver: &str, part: Option<usize>) -> String {
    let base = format!("{node}-{}", driver.replace('.', "-"));
    match part {
        Some(i) => format!("{base}-{i}"),
        None => base,
    }
}

/// The ResourceSlices `node` (a Node object as the API server returned it, with its uid)
/// publishes as a node of `ty`: empty for a type without accelerators.
pub(crate) fn resource_slices(node: &Node, ty: &InstanceType) -> Vec<Value> {
    let name = node.metadata.name.as_deref().unwrap_or_default();
    let mut by_driver: BTreeMap<&str, Vec<&PublishedDevice>> = BTreeMap::new();
    let devices = published_devices(ty);
    for d in &devices {
        by_driver.entry(d.driver.as_str()).or_default().push(d);
    }
    let owner = node.metadata.uid.as_deref().map(|uid| {
        json!([{"apiVersion": "v1", "kind": "Node", "name": name, "uid": uid,
            "controller": true}])
    });
    let mut out = Vec::new();
    for (driver, devices) in by_driver {
        let parts: Vec<&[&PublishedDevice]> = devices.chunks(MAX_DEVICES_PER_SLICE).collect();
        let count = parts.len();
        for (i, part) in parts.into_iter().enumerate() {
            let mut metadata = json!({
                "name": slice_name(name, driver, (count > 1).then_some(i)),
                "labels": {keys::LABEL_KWOK: "true", keys::LABEL_NODECLAIM: name},
            });
            if let Some(owner) = &owner {
                metadata["ownerReferences"] = owner.clone();
            }
            out.push(json!({
                "apiVersion": API_VERSION,
                "kind": "ResourceSlice",
                "metadata": metadata,
                "spec": {
                    "driver": driver,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": count},
                    "devices": part.iter().map(|d| device(d)).collect::<Vec<_>>(),
                },
            }));
        }
    }
    out
}

/// One device as a ResourceSlice lists it.
fn device(d: &PublishedDevice) -> Value {
    let attributes: Map<String, Value> = d
        .attributes
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), serde_json::to_value(v).ok()?)))
        .collect();
    let capacity: Map<String, Value> = d
        .capacity
        .iter()
        .map(|(k, q)| (k.clone(), json!({"value": q})))
        .collect();
    let mut v = json!({"name": d.name});
    if !attributes.is_empty() {
        v["attributes"] = Value::Object(attributes);
    }
    if !capacity.is_empty() {
        v["capacity"] = Value::Object(capacity);
    }
    v
}
