//! The devices a node of a catalog type would publish, as the allocator reads them.

use std::collections::BTreeMap;

use quartermaster_policies::dra::{AttributeValue, NodeDevice};
use quartermaster_policies::parse_quantity;
use quartermaster_pricing::InstanceType;
use quartermaster_pricing::devices::{
    DeviceAttribute, PublishedDevice, published_devices, published_devices_with_mig,
};
use quartermaster_pricing::sharing::MigLayout;

use super::overrides::DeviceOverride;

/// The devices of a node of `it` (its GPUs partitioned by `layout` when there is one), with
/// the NodeOverlays' `overrides` that select it applied, or why they cannot be read (a model
/// entry or an override with a malformed quantity or version: reported rather than ignored).
pub(crate) fn node_devices(
    it: &InstanceType,
    layout: Option<&MigLayout>,
    overrides: &[DeviceOverride],
) -> Result<Vec<NodeDevice>, String> {
    let mut published = match layout {
        Some(layout) => published_devices_with_mig(it, layout),
        None => published_devices(it),
    };
    if !overrides.is_empty() {
        published = super::overrides::apply(published, &it.labels(), overrides);
    }
    published.iter().map(node_device).collect()
}

fn node_device(d: &PublishedDevice) -> Result<NodeDevice, String> {
    let qualified = |name: &str| {
        if name.contains('/') {
            name.to_owned()
        } else {
            format!("{}/{name}", d.driver)
        }
    };
    let mut attributes = BTreeMap::new();
    for (name, value) in &d.attributes {
        let value = match value {
            DeviceAttribute::Bool(b) => AttributeValue::Bool(*b),
            DeviceAttribute::Int(i) => AttributeValue::Int(*i),
            DeviceAttribute::String(s) => AttributeValue::String(s.clone()),
            DeviceAttribute::Version(v) => AttributeValue::parse_version(v)
                .map_err(|e| format!("device {} attribute {name}: {e}", d.name))?,
        };
        attributes.insert(qualified(name), value);
    }
    let mut capacity = BTreeMap::new();
    for (name, quantity) in &d.capacity {
        let value = parse_quantity(quantity)
            .map_err(|e| format!("device {} capacity {name}: {e}", d.name))?;
        capacity.insert(qualified(name), value);
    }
    Ok(NodeDevice {
        driver: d.driver.clone(),
        name: d.name.clone(),
        attributes,
        capacity,
    })
}
