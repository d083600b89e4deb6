//! Dynamic Resource Allocation (`resource.k8s.io/v1`): what a pod's ResourceClaims ask for,
//! and whether the devices a node publishes can satisfy them. This is the part of the
//! kube-scheduler's structured allocator an autoscaler needs to scale DRA pods from zero: the
//! solver asks it about the devices a node of each instance type *would* publish.
//!
//! - [`NodeDevice`]: a device as a ResourceSlice publishes it (driver, attributes, capacity),
//!   with attribute and capacity names qualified by their domain.
//! - [`DeviceSelector`]: a CEL selector, compiled once (a selector that does not compile is
//!   an error in the API server's words), evaluated by a [`SelectorEvaluator`] with the
//!   Kubernetes CEL extensions DRA uses (`quantity`, `semver`).
//! - [`ClaimRequirements`]: a claim's requests resolved against their DeviceClasses
//!   (`exactly` with `ExactCount` or `All`, `firstAvailable` in order, `matchAttribute` and
//!   `distinctAttribute` constraints), and [`ClaimRequirements::allocate`] over one node's
//!   devices.
//!
//! Not modelled: `cel.bind`, consumable capacity (`capacity` requests), admin access, device
//! taints and tolerations, per-device node selectors.

mod allocate;
mod device;
mod functions;
mod selector;

pub use allocate::{
    Allocation, AllocationMode, ClaimRequirements, DeviceResult, Unsatisfied, allocation_mode,
};
pub use device::{AttributeValue, NodeDevice};
pub use selector::{DeviceSelector, MAX_EXPRESSION_BYTES, SelectorEvaluator};

#[cfg(test)]
mod tests;
