//! Existing nodes' devices, from their ResourceSlices.
//!
//! With a DRA driver the device plugin is off: a node's allocatable has no `nvidia.com/gpu`,
//! its GPUs are in ResourceSlices. Pods' claims are planned in the accelerator's resource
//! (see [`super::apply`]), so a node's published devices are counted in it too, or no pending
//! claim would ever fit an existing node.

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::Device;

use super::DraObjects;
use crate::node::NodeInfo;

/// The extended resource the devices of a DRA driver are planned in.
pub(crate) fn resource_of_driver(driver: &str) -> Option<&'static str> {
    match driver {
        "gpu.nvidia.com" => Some("nvidia.com/gpu"),
        "neuron.aws.com" => Some("aws.amazon.com/neuron"),
        "gaudi.intel.com" => Some("habana.ai/gaudi"),
        "gpu.amd.com" => Some("amd.com/gpu"),
        _ => None,
    }
}

/// Whether a device counts as one whole accelerator (NVIDIA's MIG devices do not: they are
/// parts of a GPU the slice also lists, or stands in for).
fn whole(driver: &str, device: &Device) -> bool {
    if driver != "gpu.nvidia.com" {
        return true;
    }
    let kind = device
        .attributes
        .as_ref()
        .and_then(|a| a.get("type").or_else(|| a.get("gpu.nvidia.com/type")))
        .and_then(|v| v.string.as_deref());
    kind.is_none_or(|k| k == "gpu")
}

/// Adds to each node of `infos` the devices its ResourceSlices publish, in the resource they
/// are planned in, where its allocatable does not already count that resource. Only each
/// pool's newest generation counts (older slices are being replaced).
pub(crate) fn add_slice_devices(objects: &DraObjects, infos: &mut [NodeInfo]) {
    let mut newest: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for s in &objects.slices {
        let key = (s.spec.driver.as_str(), s.spec.pool.name.as_str());
        let g = newest.entry(key).or_insert(s.spec.pool.generation);
        *g = (*g).max(s.spec.pool.generation);
    }
    let mut per_node: BTreeMap<(&str, &str), i64> = BTreeMap::new();
    for s in &objects.slices {
        let Some(node) = s.spec.node_name.as_deref() else {
            continue;
        };
        let key = (s.spec.driver.as_str(), s.spec.pool.name.as_str());
        if newest.get(&key) != Some(&s.spec.pool.generation) {
            continue;
        }
        let Some(resource) = resource_of_driver(&s.spec.driver) else {
            continue;
        };
        let n = s
            .spec
            .devices
            .iter()
            .flatten()
            .filter(|d| whole(&s.spec.driver, d))
            .count();
        *per_node.entry((node, resource)).or_default() += i64::try_from(n).unwrap_or(0);
    }
    for info in infos {
        for ((node, resource), n) in per_node.range((info.node.name.as_str(), "")..) {
            if *node != info.node.name {
                break;
            }
            if info.allocatable.get(*resource).copied().unwrap_or(0) == 0 {
                info.allocatable.insert((*resource).to_owned(), *n);
                info.capacity.insert((*resource).to_owned(), *n);
            }
        }
    }
}
