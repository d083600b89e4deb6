//! The DeviceClasses of the common DRA drivers, built in so that `plan -f` works on a pod and
//! its ResourceClaimTemplate alone. A DeviceClass given by name replaces the built-in one.
//!
//! Sources (2026-12-04): NVIDIA's k8s-dra-driver-gpu Helm chart (`deviceclass-gpu.yaml`,
//! `deviceclass-mig.yaml`: `gpu.nvidia.com` and `mig.nvidia.com`, selecting on
//! `device.attributes['gpu.nvidia.com'].type`); Intel's intel-resource-drivers-for-kubernetes
//! (`gaudi.intel.com`); AWS's Neuron DRA driver (`neuron.aws.com`); AMD's GPU DRA driver
//! (`gpu.amd.com`).

use std::collections::BTreeMap;

use k8s_openapi::api::resource::v1::{
    CELDeviceSelector, DeviceClass, DeviceClassSpec, DeviceSelector,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// `(class name, CEL selector)` of each built-in DeviceClass.
pub(crate) const BUILT_IN: [(&str, &str); 5] = [
    (
        "gpu.nvidia.com",
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'",
    ),
    (
        "mig.nvidia.com",
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'",
    ),
    ("gaudi.intel.com", "device.driver == 'gaudi.intel.com'"),
    ("neuron.aws.com", "device.driver == 'neuron.aws.com'"),
    ("gpu.amd.com", "device.driver == 'gpu.amd.com'"),
];

/// The built-in DeviceClasses overlaid with `given` (a given class replaces a built-in one of
/// the same name).
pub(crate) fn with_built_in(
    given: &BTreeMap<String, DeviceClass>,
) -> BTreeMap<String, DeviceClass> {
    let mut out: BTreeMap<String, DeviceClass> = BUILT_IN
        .iter()
        .map(|(name, cel)| ((*name).to_owned(), class(name, cel)))
        .collect();
    out.extend(given.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

fn class(name: &str, cel: &str) -> DeviceClass {
    DeviceClass {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: DeviceClassSpec {
            selectors: Some(vec![DeviceSelector {
                cel: Some(CELDeviceSelector {
                    expression: cel.to_owned(),
                }),
            }]),
            ..DeviceClassSpec::default()
        },
    }
}
