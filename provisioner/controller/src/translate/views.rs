//! Nodes, NodeClaims and PDBs in the engine's terms: node views, the offering a claim records,
//! claims found in the cluster, do-not-disrupt annotations, disruption budgets.

use k8s_openapi::api::core::v1::Node;
use quartermaster_engine::{FoundClaim, NodeCondition, NodeView};
use quartermaster_policies::NodeClaim;
use quartermaster_policies::labels::{LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_ZONE};
use quartermaster_policies::quantity::parse_quantity;
use quartermaster_pricing::CapacityType;
use quartermaster_solver::pod::{Taint, TaintEffect};
use quartermaster_solver::{OfferingChoice, ResourceTable, Resources};

use crate::time::from_kube;

use super::{ANNOTATION_PRICE, LABEL_NODEPOOL};

/// A Node as the engine sees it (labels, taints, allocatable in the engine's units).
pub fn node_view(node: &Node, table: &ResourceTable) -> NodeView {
    let mut allocatable = Resources::ZERO;
    if let Some(alloc) = node.status.as_ref().and_then(|s| s.allocatable.as_ref()) {
        for (name, q) in alloc {
            let (Some(slot), Ok(m)) = (table.slot(name), parse_quantity(&q.0)) else {
                continue;
            };
            let v = if name == "cpu" {
                m.millis()
            } else {
                m.to_whole_floor()
            };
            allocatable.set(slot, i64::try_from(v.max(0)).unwrap_or(i64::MAX));
        }
    }
    let taints = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|t| {
            Some(Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect: TaintEffect::parse(&t.effect)?,
            })
        })
        .collect();
    let conditions = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .map(|c| NodeCondition {
            kind: c.type_.clone(),
            status: c.status.clone(),
            since: c.last_transition_time.as_ref().map(from_kube),
            reason: c.reason.clone(),
        })
        .collect();
    NodeView {
        name: node.metadata.name.clone().unwrap_or_default(),
        labels: node.metadata.labels.clone().unwrap_or_default(),
        taints,
        allocatable,
        conditions,
    }
}

/// The offering a NodeClaim records: from its status once launched, from the labels and price
/// annotation it was created with before that.
pub fn claim_offering(claim: &NodeClaim) -> Option<OfferingChoice> {
    let labels = claim.metadata.labels.clone().unwrap_or_default();
    let status = claim.status.as_ref();
    let instance_type = status
        .and_then(|s| s.instance_type.clone())
        .or_else(|| labels.get(LABEL_INSTANCE_TYPE).cloned())?;
    let zone = status
        .and_then(|s| s.zone.clone())
        .or_else(|| labels.get(LABEL_ZONE).cloned())?;
    let capacity_type: CapacityType = status
        .and_then(|s| s.capacity_type.clone())
        .or_else(|| labels.get(LABEL_CAPACITY_TYPE).cloned())?
        .parse()
        .ok()?;
    let price_per_hour = status
        .and_then(|s| s.price_per_hour)
        .or_else(|| {
            claim
                .metadata
                .annotations
                .as_ref()?
                .get(ANNOTATION_PRICE)?
                .parse()
                .ok()
        })
        .unwrap_or(0.0);
    Some(OfferingChoice {
        instance_type,
        zone,
        capacity_type,
        price_per_hour,
    })
}

/// A NodeClaim in the cluster, as the engine adopts it. `node` is its registered Node, if any.
pub fn found_claim(claim: &NodeClaim, node: Option<NodeView>) -> Option<FoundClaim> {
    let name = claim.metadata.name.clone()?;
    let node_pool = claim.metadata.labels.as_ref()?.get(LABEL_NODEPOOL)?.clone();
    let offering = claim_offering(claim)?;
    let status = claim.status.as_ref();
    let condition_time = |type_: &str| {
        status?
            .conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == "True")
            .map(|c| from_kube(&c.last_transition_time))
    };
    let created_at = claim
        .metadata
        .creation_timestamp
        .as_ref()
        .map(from_kube)
        .unwrap_or_default();
    let node = node.filter(|_| status.and_then(|s| s.node_name.as_ref()).is_some());
    Some(FoundClaim {
        name,
        node_pool,
        offering,
        created_at,
        provider_id: status.and_then(|s| s.provider_id.clone()),
        launched_at: condition_time("Launched"),
        registered_at: node.as_ref().and(condition_time("Registered")),
        initialized_at: node.as_ref().and(condition_time("Initialized")),
        node,
        deleting: claim.metadata.deletion_timestamp.is_some(),
        template_hash: claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(quartermaster_engine::TEMPLATE_HASH_LABEL))
            .cloned(),
        gang: claim
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(quartermaster_engine::GANG_LABEL))
            .cloned(),
    })
}

/// Whether an object's annotations ask for no voluntary disruption (`quartermaster.dev/` or
/// `karpenter.sh/do-not-disrupt: "true"`).
pub fn annotated_do_not_disrupt(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(quartermaster_engine::do_not_disrupt)
}

/// Whether an object's annotations say it resumes from a checkpoint
/// (`quartermaster.dev/checkpointed: "true"`).
pub fn annotated_checkpointed(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(quartermaster_engine::checkpointed)
}

/// A PodDisruptionBudget as the engine weighs voluntary disruption: its selector as
/// requirements and `status.disruptionsAllowed` (0 until the PDB controller computed it). A
/// selector the engine cannot read selects every pod of the namespace (the safe side).
pub fn pdb_view(
    pdb: &k8s_openapi::api::policy::v1::PodDisruptionBudget,
) -> Option<quartermaster_engine::PodDisruptionBudgetView> {
    use quartermaster_policies::{Operator, Requirement, Requirements};
    let selector = pdb.spec.as_ref()?.selector.as_ref();
    let mut requirements = selector
        .and_then(|s| s.match_labels.as_ref())
        .map(Requirements::from_labels)
        .unwrap_or_default();
    for e in selector
        .and_then(|s| s.match_expressions.as_ref())
        .into_iter()
        .flatten()
    {
        let parsed = e.operator.parse::<Operator>().ok().and_then(|op| {
            Requirement::new(e.key.as_str(), op, e.values.clone().unwrap_or_default()).ok()
        });
        match parsed {
            Some(r) => requirements.add(r),
            None => {
                requirements = Requirements::default();
                break;
            }
        }
    }
    Some(quartermaster_engine::PodDisruptionBudgetView {
        namespace: pdb.metadata.namespace.clone()?,
        name: pdb.metadata.name.clone()?,
        selector: requirements,
        disruptions_allowed: pdb
            .status
            .as_ref()
            .map_or(0, |s| s.disruptions_allowed.max(0) as u32),
    })
}
