//! Dynamic Resource Allocation as the solver sees it: what a pod's ResourceClaims make of each
//! instance type.
//!
//! Ingestion resolves a pod's claims against the devices each instance type would publish (see
//! `quartermaster-cluster`'s `dra` module) and turns the result into what the packer already
//! understands: the accelerator count the claims take (in the pod's requests) and an
//! `node.kubernetes.io/instance-type In [...]` term for the types that satisfy them. The packer
//! and the lower bound never see a claim; [`DeviceFit`] keeps the reasons for
//! [`crate::explain`].

use std::collections::BTreeMap;

/// What a pod's device claims make of each instance type.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DeviceFit {
    /// The claims, as `ResourceClaimTemplate/<namespace>/<name>` or
    /// `ResourceClaim/<namespace>/<name>`.
    pub claims: Vec<String>,
    /// Instance types whose predicted devices satisfy the claims, with the devices they take.
    pub fits: BTreeMap<String, u32>,
    /// Instance types that cannot serve the claims, with why (the request and the selector or
    /// constraint that fails, or that another choice is cheaper).
    pub ruled_out: BTreeMap<String, String>,
    /// Where `firstAvailable` or `All` lets types differ in what they take: the choice made
    /// (the cheapest type's), e.g. `request gpu/h100: 1 device(s) on p5.4xlarge`.
    pub choice: Option<String>,
}

impl DeviceFit {
    /// Why a node of `instance_type` cannot serve the claims, or `None` when it can.
    pub fn rejection(&self, instance_type: &str) -> Option<String> {
        if self.fits.contains_key(instance_type) {
            return None;
        }
        Some(
            self.ruled_out
                .get(instance_type)
                .cloned()
                .unwrap_or_else(|| "a node of this type publishes no devices".to_owned()),
        )
    }
}
