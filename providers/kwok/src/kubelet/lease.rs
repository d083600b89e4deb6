//! A kwok Node's heartbeat Lease in `kube-node-lease`, as a kubelet keeps it: named after the
//! node, held by it, owned by the Node (so it goes when the Node goes), renewed every 10 s.

use chrono::{DateTime, Utc};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::Api;
use kube::api::PostParams;

use crate::api_error::{is_conflict, is_not_found};
use crate::keys;
use crate::time::to_micro_time;

/// How long a Lease holds without renewal, as the kubelet's default.
pub(crate) const LEASE_DURATION_SECONDS: i32 = 40;

/// A new Lease for `node`, renewed at `now`.
pub(crate) fn new_lease(node: &Node, now: DateTime<Utc>) -> Lease {
    let name = node.metadata.name.clone().unwrap_or_default();
    let owner = node.metadata.uid.clone().map(|uid| OwnerReference {
        api_version: "v1".to_owned(),
        kind: "Node".to_owned(),
        name: name.clone(),
        uid,
        ..OwnerReference::default()
    });
    Lease {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(keys::NODE_LEASE_NAMESPACE.to_owned()),
            owner_references: owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(name),
            lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
            renew_time: Some(to_micro_time(now)),
            ..LeaseSpec::default()
        }),
    }
}

/// `lease` renewed at `now`.
fn renewed(mut lease: Lease, now: DateTime<Utc>) -> Lease {
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.renew_time = Some(to_micro_time(now));
    if spec.lease_duration_seconds.is_none() {
        spec.lease_duration_seconds = Some(LEASE_DURATION_SECONDS);
    }
    lease
}

/// Renews `node`'s Lease at `now`, starting from the last copy the caller kept (`None`: read
/// it). Returns the Lease as stored, to keep for the next renewal, or the error.
pub(crate) async fn renew(
    leases: &Api<Lease>,
    node: &Node,
    kept: Option<Lease>,
    now: DateTime<Utc>,
) -> Result<Lease, kube::Error> {
    let name = node.metadata.name.clone().unwrap_or_default();
    let current = match kept {
        Some(lease) => Some(lease),
        None => match leases.get(&name).await {
            Ok(lease) => Some(lease),
            Err(e) if is_not_found(&e) => None,
            Err(e) => return Err(e),
        },
    };
    let pp = PostParams::default();
    match current {
        None => leases.create(&pp, &new_lease(node, now)).await,
        Some(lease) => match leases.replace(&name, &pp, &renewed(lease, now)).await {
            // Deleted meanwhile: make a new one.
            Err(e) if is_not_found(&e) => leases.create(&pp, &new_lease(node, now)).await,
            // Changed meanwhile (the copy was stale): read it and renew that.
            Err(e) if is_conflict(&e) => {
                let fresh = leases.get(&name).await?;
                leases.replace(&name, &pp, &renewed(fresh, now)).await
            }
            other => other,
        },
    }
}
