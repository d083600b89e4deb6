//! Where a NodePool buys: its NodeClass's region, else the cluster's, else the catalog's default
//! region of the pool's cloud.

use std::collections::BTreeSet;

use quartermaster_policies::nodeclass::KIND_AZURE;
use quartermaster_pricing::{Catalog, Cloud};

use crate::error::ClusterError;

/// Where a NodePool's nodes may be bought: the NodeClass's region; else the cluster's region
/// (`cluster_region`: `plan --region`, the controller's `--region`) when the catalog has
/// offerings of the pool's cloud there; else the catalog's default region of the cloud
/// ([`Catalog::default_region`]), with a note. A NodeClass region the catalog has no offerings
/// of the cloud in is an error naming the regions it has, and so is a cluster region that no
/// cloud of the catalog has. `None`: no restriction (no catalog, or several regions and no
/// default).
#[allow(clippy::too_many_arguments)]
pub(super) fn pool_region(
    pool_id: &str,
    pool: &str,
    cloud: Cloud,
    class: (&str, &str),
    class_region: Option<&str>,
    cluster_region: Option<&str>,
    catalog: Option<&Catalog>,
    notes: &mut Vec<String>,
) -> Result<Option<String>, ClusterError> {
    let (kind, class_name) = class;
    let field = if kind == KIND_AZURE {
        "spec.location"
    } else {
        "spec.region"
    };
    let Some(catalog) = catalog else {
        return Ok(class_region.map(str::to_owned));
    };
    let regions: BTreeSet<&str> = catalog.regions(cloud);
    let list = || regions.iter().copied().collect::<Vec<_>>().join(", ");
    match class_region {
        Some(r) if regions.contains(r) => Ok(Some(r.to_owned())),
        // The pool, not the NodeClass, is in error: a driver that drops the rejected object
        // (the controller) must not go on buying for the pool in another region.
        Some(r) => Err(ClusterError::invalid(
            pool_id,
            "spec.template.spec.nodeClassRef",
            format!(
                "{kind} {class_name} {field} {r:?} has no {cloud} offerings in the catalog; its {cloud} regions: {} (pass a catalog with offerings in {r:?}, or change the region)",
                if regions.is_empty() {
                    "none".to_owned()
                } else {
                    list()
                }
            ),
        )),
        None => {
            let default = catalog.default_region(cloud);
            match cluster_region {
                Some(r) if regions.contains(r) => {
                    notes.push(format!(
                        "NodePool {pool}: no region from {kind} {class_name}; using the cluster region {r}"
                    ));
                    return Ok(Some(r.to_owned()));
                }
                Some(r) if !Cloud::ALL.iter().any(|c| catalog.regions(*c).contains(r)) => {
                    return Err(ClusterError::invalid(
                        pool_id,
                        "spec.template.spec.nodeClassRef",
                        format!(
                            "no region from {kind} {class_name}, and the cluster region {r:?} has no offerings of any cloud in the catalog; its {cloud} regions: {}",
                            if regions.is_empty() {
                                "none".to_owned()
                            } else {
                                list()
                            }
                        ),
                    ));
                }
                Some(r) => {
                    // A region of another cloud: this pool buys in its own cloud's default.
                    if let Some(d) = default {
                        notes.push(format!(
                            "NodePool {pool}: no region from {kind} {class_name}, and the cluster region {r} has no {cloud} offerings; using the catalog's default {cloud} region {d}"
                        ));
                    }
                }
                None => {
                    if let Some(d) = default {
                        notes.push(format!(
                            "NodePool {pool}: no region from {kind} {class_name}; using the catalog's default {cloud} region {d}"
                        ));
                    }
                }
            }
            Ok(default.map(str::to_owned))
        }
    }
}
