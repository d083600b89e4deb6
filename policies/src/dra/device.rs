//! Devices as ResourceSlices publish them.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use cel::Value;
use k8s_openapi::api::resource::v1::Device;

use crate::error::PolicyError;
use crate::quantity::{Millis, parse_quantity};

/// The value of a device attribute (exactly one of a ResourceSlice's four kinds).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum AttributeValue {
    /// `bool`.
    Bool(bool),
    /// `int`.
    Int(i64),
    /// `string`.
    String(String),
    /// `version`: a semantic version.
    Version(semver::Version),
}

impl AttributeValue {
    /// A `version` attribute from its text (`"9.0.0"`), or why it is not a semantic version.
    pub fn parse_version(text: &str) -> Result<Self, String> {
        semver::Version::parse(text)
            .map(Self::Version)
            .map_err(|e| format!("version {text:?}: {e}"))
    }
}

/// A device a node publishes: its driver, name, attributes and capacity. Attribute and
/// capacity names are qualified (`gpu.nvidia.com/productName`): a name a slice gives without
/// a domain belongs to the driver's domain.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeDevice {
    /// The driver (`gpu.nvidia.com`).
    pub driver: String,
    /// The device's name, unique within its driver on the node (`gpu-0`).
    pub name: String,
    /// Attributes by qualified name.
    pub attributes: BTreeMap<String, AttributeValue>,
    /// Capacity by qualified name.
    pub capacity: BTreeMap<String, Millis>,
}

impl NodeDevice {
    /// A device of `driver`'s ResourceSlice.
    pub fn from_slice(driver: &str, device: &Device) -> Result<Self, PolicyError> {
        let invalid = |field: String, reason: String| PolicyError::InvalidDevice {
            device: device.name.clone(),
            field,
            reason,
        };
        let mut attributes = BTreeMap::new();
        for (name, a) in device.attributes.iter().flatten() {
            let field = format!("attributes[{name}]");
            let value = match (&a.bool, a.int, &a.string, &a.version) {
                (Some(b), None, None, None) => AttributeValue::Bool(*b),
                (None, Some(i), None, None) => AttributeValue::Int(i),
                (None, None, Some(s), None) => AttributeValue::String(s.clone()),
                (None, None, None, Some(v)) => AttributeValue::Version(
                    semver::Version::parse(v)
                        .map_err(|e| invalid(field.clone(), format!("version {v:?}: {e}")))?,
                ),
                _ => return Err(invalid(field, "exactly one value must be set".into())),
            };
            attributes.insert(qualified(driver, name), value);
        }
        let mut capacity = BTreeMap::new();
        for (name, c) in device.capacity.iter().flatten() {
            let value = parse_quantity(&c.value.0)
                .map_err(|e| invalid(format!("capacity[{name}]"), e.to_string()))?;
            capacity.insert(qualified(driver, name), value);
        }
        Ok(Self {
            driver: driver.to_owned(),
            name: device.name.clone(),
            attributes,
            capacity,
        })
    }

    /// The attribute named `qualified` (`domain/name`), if the device has it.
    pub fn attribute(&self, qualified: &str) -> Option<&AttributeValue> {
        self.attributes.get(qualified)
    }

    /// The `device` object a CEL selector sees: `driver`, `attributes` and `capacity` grouped
    /// by domain. Domains in `known_domains` the device lacks are empty maps (a lookup of an
    /// unknown domain is an empty map in Kubernetes, not an error).
    pub(crate) fn to_cel(&self, known_domains: &[String]) -> Value {
        let mut attributes: HashMap<String, HashMap<String, Value>> = HashMap::new();
        let mut capacity: HashMap<String, HashMap<String, Value>> = HashMap::new();
        for d in known_domains {
            attributes.entry(d.clone()).or_default();
            capacity.entry(d.clone()).or_default();
        }
        for (name, value) in &self.attributes {
            let (domain, id) = split(name);
            attributes
                .entry(domain.to_owned())
                .or_default()
                .insert(id.to_owned(), attribute_value(value));
        }
        for (name, value) in &self.capacity {
            let (domain, id) = split(name);
            capacity
                .entry(domain.to_owned())
                .or_default()
                .insert(id.to_owned(), crate::dra::functions::quantity_value(*value));
        }
        let grouped = |m: HashMap<String, HashMap<String, Value>>| -> Value {
            m.into_iter()
                .map(|(k, v)| (k, Value::from(v)))
                .collect::<HashMap<String, Value>>()
                .into()
        };
        let mut device: HashMap<String, Value> = HashMap::new();
        device.insert(
            "driver".into(),
            Value::String(Arc::new(self.driver.clone())),
        );
        device.insert("attributes".into(), grouped(attributes));
        device.insert("capacity".into(), grouped(capacity));
        device.insert("allowMultipleAllocations".into(), Value::Bool(false));
        device.into()
    }
}

/// `name` qualified by `driver`'s domain unless it has one.
pub(crate) fn qualified(driver: &str, name: &str) -> String {
    if name.contains('/') {
        name.to_owned()
    } else {
        format!("{driver}/{name}")
    }
}

fn split(qualified: &str) -> (&str, &str) {
    qualified.split_once('/').unwrap_or(("", qualified))
}

fn attribute_value(value: &AttributeValue) -> Value {
    match value {
        AttributeValue::Bool(b) => Value::Bool(*b),
        AttributeValue::Int(i) => Value::Int(*i),
        AttributeValue::String(s) => Value::String(Arc::new(s.clone())),
        AttributeValue::Version(v) => crate::dra::functions::semver_value(v.clone()),
    }
}
