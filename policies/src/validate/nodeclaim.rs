//! Semantic checks of a NodeClaim.

use super::FieldError;
use super::fields;
use crate::nodeclaim::NodeClaim;

/// Every semantic problem of a NodeClaim (empty when valid).
pub fn validate_nodeclaim(nc: &NodeClaim) -> Vec<FieldError> {
    let mut errs = Vec::new();
    fields::metadata_name(&nc.metadata, false, &mut errs);
    let spec = &nc.spec;
    fields::requirements(&spec.requirements, "spec.requirements", false, &mut errs);
    if let Some(r) = &spec.resources {
        fields::quantities(&r.requests, "spec.resources.requests", &mut errs);
    }
    fields::taints(&spec.taints, "spec.taints", &mut errs);
    fields::taints(&spec.startup_taints, "spec.startupTaints", &mut errs);
    fields::node_class_ref(&spec.node_class_ref, "spec.nodeClassRef", &mut errs);
    fields::duration(
        spec.expire_after.as_deref(),
        "spec.expireAfter",
        true,
        &mut errs,
    );
    fields::duration(
        spec.termination_grace_period.as_deref(),
        "spec.terminationGracePeriod",
        false,
        &mut errs,
    );
    errs
}
