//! The device model overridden for drivers we do not model (or model differently): a
//! NodeOverlay's `quartermaster.dev/devices` annotation lists the devices a node of the types
//! its requirements select publishes, per driver; they replace that driver's modelled devices.
//!
//! ```yaml
//! apiVersion: karpenter.sh/v1alpha1
//! kind: NodeOverlay
//! metadata:
//!   name: fpga
//!   annotations:
//!     quartermaster.dev/devices: |
//!       [{"driver": "fpga.example.com", "count": 2, "namePrefix": "fpga",
//!         "attributes": {"model": {"string": "u250"}}, "capacity": {"memory": "64Gi"}}]
//! spec:
//!   requirements: [{key: node.kubernetes.io/instance-type, operator: In, values: [f2.12xlarge]}]
//! ```
//!
//! `count: 0` removes a driver's devices. A driver we do not map to an extended resource
//! (see [`super::slices::resource_of_driver`]) is counted in a resource named after it, which the
//! overlay adds to the matching types' capacity (unless its `spec.capacity` sets it).

use std::collections::BTreeMap;

use quartermaster_policies::Requirements;
use quartermaster_pricing::devices::{DeviceAttribute, PublishedDevice};
use serde::Deserialize;
use serde_json::Value;

use crate::error::ClusterError;

/// The NodeOverlay annotation that overrides the device model.
pub(crate) const DEVICES_ANNOTATION: &str = "quartermaster.dev/devices";

/// One driver's devices on the types a NodeOverlay selects.
#[derive(Debug, Clone)]
pub(crate) struct DeviceOverride {
    /// `spec.weight`: of several overrides of one driver on a type, the heaviest wins.
    pub weight: i64,
    /// `spec.requirements`, matched against the instance type's labels.
    pub requirements: Requirements,
    /// The driver whose devices are replaced.
    pub driver: String,
    /// The devices (none: the driver publishes nothing there).
    pub devices: Vec<PublishedDevice>,
}

/// One entry of the annotation.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Group {
    driver: String,
    count: u32,
    #[serde(default)]
    name_prefix: Option<String>,
    #[serde(default)]
    attributes: BTreeMap<String, DeviceAttribute>,
    #[serde(default)]
    capacity: BTreeMap<String, String>,
}

/// The overrides a NodeOverlay's annotation lists (none without it), with `weight` and
/// `requirements` of the overlay. `id` names the overlay in errors.
pub(crate) fn read(
    id: &str,
    value: &Value,
    weight: i64,
    requirements: &Requirements,
) -> Result<Vec<DeviceOverride>, ClusterError> {
    let Some(text) = value
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(DEVICES_ANNOTATION))
        .and_then(Value::as_str)
    else {
        return Ok(Vec::new());
    };
    let field = format!("metadata.annotations[{DEVICES_ANNOTATION}]");
    let groups: Vec<Group> = serde_json::from_str(text).map_err(|e| {
        ClusterError::invalid(
            id,
            &field,
            format!("not a JSON list of {{driver, count, namePrefix, attributes, capacity}}: {e}"),
        )
    })?;
    let mut out = Vec::new();
    for (i, g) in groups.into_iter().enumerate() {
        if g.driver.is_empty() {
            return Err(ClusterError::invalid(
                id,
                format!("{field}[{i}].driver"),
                "must not be empty",
            ));
        }
        for (name, q) in &g.capacity {
            quartermaster_policies::parse_quantity(q).map_err(|e| {
                ClusterError::invalid(id, format!("{field}[{i}].capacity.{name}"), e.to_string())
            })?;
        }
        let prefix = g.name_prefix.clone().unwrap_or_else(|| "device".to_owned());
        let devices = (0..g.count)
            .map(|k| PublishedDevice {
                driver: g.driver.clone(),
                name: format!("{prefix}-{k}"),
                attributes: g.attributes.clone(),
                capacity: g.capacity.clone(),
            })
            .collect();
        out.push(DeviceOverride {
            weight,
            requirements: requirements.clone(),
            driver: g.driver,
            devices,
        });
    }
    Ok(out)
}

/// `devices` with every override that selects a type of `labels` applied, lightest first (the
/// heaviest override of a driver wins).
pub(crate) fn apply(
    mut devices: Vec<PublishedDevice>,
    labels: &BTreeMap<String, String>,
    overrides: &[DeviceOverride],
) -> Vec<PublishedDevice> {
    let mut matching: Vec<&DeviceOverride> = overrides
        .iter()
        .filter(|o| o.requirements.matches(labels))
        .collect();
    matching.sort_by_key(|o| o.weight);
    for o in matching {
        devices.retain(|d| d.driver != o.driver);
        devices.extend(o.devices.iter().cloned());
    }
    devices
}
