//! A pod's resolved claims folded into its requests and node terms.

use std::collections::BTreeSet;
use std::hash::{DefaultHasher, Hash, Hasher};

use quartermaster_policies::{Requirement, Requirements};
use quartermaster_solver::pod::{HOSTNAME, PodAffinityTerm};
use quartermaster_solver::resources::ResourceTable;
use quartermaster_solver::{INSTANCE_TYPE_LABEL, NODEPOOL_LABEL, Pod};

use super::resolve::{Resolution, and_node_terms};
use crate::error::ClusterError;

/// The label prefix that marks pods sharing a ResourceClaim (`claim.quartermaster.dev/<hash>`):
/// they must run on one node, as the claim's devices are on one node.
pub(crate) const SHARED_CLAIM_LABEL_PREFIX: &str = "claim.quartermaster.dev/";

/// Folds `resolution` into `pod`: the devices its claims take (in the resource they count in),
/// the instance types that satisfy them, the nodes already allocated claims pin it to, and for
/// claims shared with other pods, one node for all of them. `claimed` holds the shared claims
/// an earlier pod already took devices for.
pub(crate) fn apply(
    pod: &mut Pod,
    resolution: &Resolution,
    claimed: &mut BTreeSet<String>,
    table: &mut ResourceTable,
) -> Result<(), ClusterError> {
    pod.devices = Some(resolution.fit.clone());
    if !resolution.pinned.is_empty() {
        pod.node_terms = and_node_terms(&pod.node_terms, &resolution.pinned);
    }
    if !resolution.needs_devices {
        return Ok(());
    }
    let types = Requirement::in_values(
        INSTANCE_TYPE_LABEL,
        resolution.fit.fits.keys().map(String::as_str),
    );
    if pod.node_terms.is_empty() {
        pod.node_terms.push(Requirements::new());
    }
    for term in &mut pod.node_terms {
        term.add(types.clone());
        if let Some(pools) = &resolution.pools {
            term.add(Requirement::in_values(
                NODEPOOL_LABEL,
                pools.iter().map(String::as_str),
            ));
        }
    }
    let first = resolution.shared.iter().any(|c| claimed.insert(c.clone()));
    let mut requests = pod.requests;
    for (resource, n) in &resolution.takes {
        let shared = resolution
            .shared_takes
            .iter()
            .find(|(r, _)| r == resource)
            .map_or(0, |(_, s)| *s);
        let n = if first || resolution.shared.is_empty() {
            *n
        } else {
            n - shared
        };
        if n == 0 {
            continue;
        }
        let slot =
            table
                .slot_or_insert(resource)
                .ok_or_else(|| ClusterError::TooManyResources {
                    object: format!("Pod/{}", pod.id),
                    field: "spec.resourceClaims".to_owned(),
                    resource: resource.clone(),
                    max: quartermaster_solver::resources::MAX_RESOURCES,
                })?;
        requests.set(slot, requests.get(slot) + i64::from(n));
    }
    pod.requests = requests;
    for claim in &resolution.shared {
        let key = shared_label(claim);
        pod.labels.insert(key.clone(), "shared".to_owned());
        pod.affinity.push(PodAffinityTerm {
            topology_key: HOSTNAME.to_owned(),
            selector: {
                let mut r = Requirements::new();
                r.add(Requirement::exists(key));
                r
            },
            namespaces: Vec::new(),
            preferred_weight: None,
        });
    }
    Ok(())
}

/// `claim.quartermaster.dev/<hash of the claim's id>`.
fn shared_label(claim: &str) -> String {
    let mut h = DefaultHasher::new();
    claim.hash(&mut h);
    format!("{SHARED_CLAIM_LABEL_PREFIX}{:016x}", h.finish())
}
