//! Why a class has nowhere to go at all: the first filter (taints, node affinity, size) that
//! leaves no instance type, said in a sentence a user can act on.

use quartermaster_policies::LabelLookup;

use crate::INSTANCE_TYPE_LABEL;
use crate::pod::{Pod, tolerates_all};
use crate::snapshot::ClusterSnapshot;

use super::classes::Class;
use super::shapes::Shape;

/// The reason no shape and no existing node can ever host `class`.
pub fn static_reason(snapshot: &ClusterSnapshot, shapes: &[Shape], class: &Class) -> String {
    let pod = class.rep(snapshot);
    if snapshot.node_pools.is_empty() {
        return "no NodePool is defined and no existing node can hold it".to_owned();
    }
    // Taints.
    let tolerated: Vec<usize> = (0..snapshot.node_pools.len())
        .filter(|&p| tolerates_all(&pod.tolerations, &snapshot.node_pools[p].taints).is_ok())
        .collect();
    if tolerated.is_empty() {
        let taint = snapshot
            .node_pools
            .iter()
            .find_map(|p| tolerates_all(&pod.tolerations, &p.taints).err())
            .map(|t| t.to_string())
            .unwrap_or_default();
        return format!("no NodePool tolerates taint {taint}");
    }
    // Node selector / affinity against the tolerated pools' instance types.
    let pool_shapes: Vec<&Shape> = shapes
        .iter()
        .filter(|s| tolerated.contains(&s.pool))
        .collect();
    if pool_shapes.is_empty() {
        let names: Vec<&str> = tolerated
            .iter()
            .map(|&p| snapshot.node_pools[p].name.as_str())
            .collect();
        return format!(
            "NodePool {} offers no instance type (check its requirements and the catalog)",
            names.join(", ")
        );
    }
    if let Some(reason) = device_reason(pod, &pool_shapes) {
        return reason;
    }
    let matching: Vec<&Shape> = pool_shapes
        .iter()
        .copied()
        .filter(|s| {
            pod.node_terms.is_empty()
                || s.offerings
                    .iter()
                    .any(|o| pod.node_terms.iter().any(|t| t.matches(&o.labels)))
        })
        .collect();
    if matching.is_empty() {
        let terms: Vec<String> = pod.node_terms.iter().map(|t| format!("{t}")).collect();
        // A key no offering carries may be a misspelt well-known one.
        let hints: Vec<String> = pod
            .node_terms
            .iter()
            .flat_map(|t| t.keys())
            .filter(|k| {
                !pool_shapes
                    .iter()
                    .any(|s| s.offerings.iter().any(|o| o.labels.contains_key(k)))
            })
            .filter_map(|k| {
                quartermaster_policies::validate::suggest_label_key(k)
                    .filter(|s| s != &k)
                    .map(|s| format!("{k}: did you mean {s:?}?"))
            })
            .collect();
        return format!(
            "no instance type of a NodePool it tolerates matches its node selector / affinity ({}){}",
            terms.join(" or "),
            if hints.is_empty() {
                String::new()
            } else {
                format!("; {}", hints.join("; "))
            }
        );
    }
    // Size: name the resource that no compatible type has enough of.
    let table = &snapshot.resources;
    for slot in 0..table.len() {
        let need = class.requests.get(slot);
        if need == 0 {
            continue;
        }
        let most = matching
            .iter()
            .map(|s| s.allocatable.get(slot))
            .max()
            .unwrap_or(0);
        if need > most {
            let name = table.name(slot);
            return if most <= 0 {
                format!(
                    "requests {} {name}; no compatible instance type has any",
                    table.format(slot, need)
                )
            } else if name == quartermaster_pricing::resources::EPHEMERAL_STORAGE {
                format!(
                    "requests {} {name}; the largest compatible instance type has {} (its root \
                     volume: give the NodeClass a larger one: AWSNodeClass blockDeviceMappings \
                     rootVolume, GCPNodeClass disk.sizeGiB, AzureNodeClass osDiskSizeGB; or, on \
                     AWS types with local NVMe, AWSNodeClass instanceStorePolicy: RAID0)",
                    table.format(slot, need),
                    table.format(slot, most)
                )
            } else {
                format!(
                    "requests {} {name}; the largest compatible instance type has {}",
                    table.format(slot, need),
                    table.format(slot, most)
                )
            };
        }
    }
    "no compatible instance type has room for all of its requests at once".to_owned()
}

/// When the pod's DRA claims leave none of `shapes`' instance types: the claims, and why one of
/// the types fails them (one the claims rule out by a selector or constraint, when there is).
fn device_reason(pod: &Pod, shapes: &[&Shape]) -> Option<String> {
    let fit = pod.devices.as_ref()?;
    let types: Vec<&str> = shapes
        .iter()
        .filter_map(|s| s.offerings.first())
        .filter_map(|o| o.labels.label(INSTANCE_TYPE_LABEL))
        .collect();
    if fit.claims.is_empty() || types.iter().any(|t| fit.fits.contains_key(*t)) {
        return None;
    }
    Some(
        match types
            .iter()
            .find_map(|t| fit.ruled_out.get(*t).map(|r| (t, r)))
        {
            Some((t, why)) => format!(
                "no instance type of a NodePool it tolerates satisfies its resource claims ({}): \
                 {why} (on {t}, for one; `explain` lists every type)",
                fit.claims.join(", ")
            ),
            None => format!(
                "no instance type of a NodePool it tolerates publishes devices for its resource \
                 claims ({})",
                fit.claims.join(", ")
            ),
        },
    )
}
