//! Dynamic Resource Allocation (`resource.k8s.io/v1`) at ingestion: pods whose
//! `spec.resourceClaims` ask for devices are planned by the devices each instance type would
//! publish.
//!
//! [`DraObjects`] holds the DeviceClasses (the common drivers' built in, see [`classes`]),
//! ResourceClaims, ResourceClaimTemplates and ResourceSlices given. [`Resolver`] turns one pod's
//! claims into a [`quartermaster_solver::DeviceFit`] by allocating them, with the
//! kube-scheduler's rules ([`quartermaster_policies::dra`]), over the devices a node of each
//! catalog type would publish ([`quartermaster_pricing::devices`]); [`apply`] folds the result
//! into what the packer already understands: the accelerators the claims take, in the pod's
//! requests, and a `node.kubernetes.io/instance-type In [...]` term for the types that satisfy
//! them. Nothing downstream (packer, lower bound, consolidation) sees a claim.

mod apply;
pub(crate) mod classes;
mod devices;
pub(crate) mod overrides;
mod resolve;
mod slices;

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice,
};
use serde_json::Value;

use crate::error::ClusterError;
use crate::objects::namespaced;

pub(crate) use apply::apply;
pub(crate) use resolve::Resolver;
pub(crate) use slices::{add_slice_devices, resource_of_driver};

/// The API group of the DRA kinds.
pub(crate) const GROUP: &str = "resource.k8s.io";

/// `(namespace, name)`.
type Key = (String, String);

/// The DRA objects given, by name.
#[derive(Debug, Default)]
pub(crate) struct DraObjects {
    /// DeviceClasses by name (cluster-scoped).
    pub classes: BTreeMap<String, DeviceClass>,
    /// ResourceClaims by namespace and name.
    pub claims: BTreeMap<Key, ResourceClaim>,
    /// ResourceClaimTemplates by namespace and name.
    pub templates: BTreeMap<Key, ResourceClaimTemplate>,
    /// ResourceSlices, in input order.
    pub slices: Vec<ResourceSlice>,
    /// NodeOverlays' overrides of the device model (`quartermaster.dev/devices`).
    pub overrides: Vec<overrides::DeviceOverride>,
}

/// Whether `kind` of `group` is read here.
pub(crate) fn is_read_here(group: &str, kind: &str) -> bool {
    group == GROUP
        && matches!(
            kind,
            "DeviceClass" | "ResourceClaim" | "ResourceClaimTemplate" | "ResourceSlice"
        )
}

/// Reads one DRA object into `objects`.
pub(crate) fn read(
    objects: &mut DraObjects,
    value: &Value,
    kind: &str,
) -> Result<(), ClusterError> {
    fn typed<T: serde::de::DeserializeOwned>(value: &Value, id: &str) -> Result<T, ClusterError> {
        serde_path_to_error::deserialize(value.clone()).map_err(|e| {
            ClusterError::invalid(id, e.path().to_string(), e.into_inner().to_string())
        })
    }
    let cluster_scoped = |value: &Value| -> Result<String, ClusterError> {
        let name = value
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if name.is_empty() {
            return Err(ClusterError::invalid(
                &format!("{kind}/"),
                "metadata.name",
                "missing",
            ));
        }
        Ok(name.to_owned())
    };
    match kind {
        "DeviceClass" => {
            let name = cluster_scoped(value)?;
            let id = format!("DeviceClass/{name}");
            let class: DeviceClass = typed(value, &id)?;
            if objects.classes.insert(name, class).is_some() {
                return Err(ClusterError::invalid(&id, "metadata.name", "given twice"));
            }
        }
        "ResourceSlice" => {
            let name = cluster_scoped(value)?;
            objects
                .slices
                .push(typed(value, &format!("ResourceSlice/{name}"))?);
        }
        "ResourceClaim" => {
            let (id, namespace, name, _) = namespaced(value, kind)?;
            let claim: ResourceClaim = typed(value, &id)?;
            if objects.claims.insert((namespace, name), claim).is_some() {
                return Err(ClusterError::invalid(&id, "metadata.name", "given twice"));
            }
        }
        _ => {
            let (id, namespace, name, _) = namespaced(value, kind)?;
            let template: ResourceClaimTemplate = typed(value, &id)?;
            if objects
                .templates
                .insert((namespace, name), template)
                .is_some()
            {
                return Err(ClusterError::invalid(&id, "metadata.name", "given twice"));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
