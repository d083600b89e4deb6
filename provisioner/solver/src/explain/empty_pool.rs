//! Why a NodePool offers no instance type at all: the requirement (or the sharing) that leaves it empty.

use std::collections::BTreeMap;

use quartermaster_pricing::{Catalog, InstanceType};

use crate::NODEPOOL_LABEL;
use crate::snapshot::NodePoolSpec;

use super::reject::catalog_gap;

/// Why a NodePool has no instance type at all, for the plan's note: the requirements that each
/// rule out every offering the others allow (`karpenter.sh/capacity-type In [spot]` when the
/// catalog has no spot offering of the types the other requirements pick), or, when no single
/// one does, the requirements in order up to the one that leaves nothing.
pub fn empty_pool_reason(pool: &NodePoolSpec, catalog: &Catalog) -> String {
    let offerings: Vec<BTreeMap<String, String>> = catalog
        .for_cloud(pool.cloud)
        .flat_map(|it| {
            it.offerings.iter().filter(|o| o.available).map(move |o| {
                let mut labels = it.offering_labels(o);
                labels.extend(pool.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
                labels.insert(NODEPOOL_LABEL.to_owned(), pool.name.clone());
                labels
            })
        })
        .collect();
    if offerings.is_empty() {
        return format!("the catalog has no {} offering", pool.cloud);
    }
    if let Some(sharing) = &pool.node_shape.gpu_sharing {
        let allowed: Vec<&InstanceType> = catalog
            .for_cloud(pool.cloud)
            .filter(|it| {
                it.offerings.iter().filter(|o| o.available).any(|o| {
                    let mut labels = it.offering_labels(o);
                    labels.extend(pool.labels.iter().map(|(k, v)| (k.clone(), v.clone())));
                    labels.insert(NODEPOOL_LABEL.to_owned(), pool.name.clone());
                    pool.requirements.matches(&labels)
                })
            })
            .collect();
        if !allowed.is_empty() {
            let why: Vec<String> = allowed
                .iter()
                .filter_map(|it| it.shared_capacity(sharing).err())
                .take(3)
                .map(|e| e.to_string())
                .collect();
            return format!(
                "its gpuSharing applies to none of the {} instance type(s) its requirements allow ({}{})",
                allowed.len(),
                why.join("; "),
                if allowed.len() > 3 { "; ..." } else { "" }
            );
        }
    }
    let reqs: Vec<_> = pool.requirements.iter().collect();
    let holds = |r: &quartermaster_policies::Requirement, l: &BTreeMap<String, String>| {
        r.matches(l.get(r.key()).map(String::as_str))
    };
    let mut blocking = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        let others = offerings
            .iter()
            .filter(|l| reqs.iter().enumerate().all(|(j, o)| j == i || holds(o, l)))
            .count();
        if others > 0 {
            blocking.push(format!(
                "{} {r} rules out all {others} offering(s) the other requirements allow{}",
                r.key(),
                catalog_gap(r)
            ));
        }
    }
    if !blocking.is_empty() {
        return blocking.join("; ");
    }
    let mut left = offerings.len();
    let mut steps = Vec::new();
    let mut remaining: Vec<&BTreeMap<String, String>> = offerings.iter().collect();
    for r in &reqs {
        remaining.retain(|l| holds(r, l));
        steps.push(format!(
            "{} {r} ({} of {left} left)",
            r.key(),
            remaining.len()
        ));
        left = remaining.len();
        if left == 0 {
            break;
        }
    }
    format!("together: {}", steps.join(", "))
}
