//! Registration of a claim's Node (labels, taints, finalizer, `quartermaster.dev/unregistered`
//! removed) and the cordon of a disruption.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Node, Taint};
use quartermaster_engine::{ClaimView, NodeView, TAINT_RETIRING};
use quartermaster_policies::NodePool;
use serde_json::json;

use super::events::claim_event;
use crate::context::Context;
use crate::translate::{
    FINALIZER, LABEL_NODECLAIM, LABEL_NODEPOOL, TAINT_DISRUPTED, TAINT_UNREGISTERED,
};

/// Whether a node still needs its registration patch.
pub fn needs_registration(node: &Node) -> bool {
    let unregistered = node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == TAINT_UNREGISTERED));
    let labelled = node
        .metadata
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(LABEL_NODEPOOL) && l.contains_key(LABEL_NODECLAIM));
    let finalized = node
        .metadata
        .finalizers
        .iter()
        .flatten()
        .any(|f| f == FINALIZER);
    unregistered || !labelled || !finalized
}

/// A node view without the unregistered taint (registration removes it).
pub fn without_unregistered(mut view: NodeView) -> NodeView {
    view.taints.retain(|t| t.key != TAINT_UNREGISTERED);
    view
}

/// Which registration patch of a claim's node this is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registration {
    /// The first: the `Registered` event follows it, and `expected` (pending pods the engine
    /// nominated to the claim) get `status.nominatedNodeName` first.
    First {
        /// Pods to nominate to the node before it becomes schedulable.
        expected: Vec<quartermaster_solver::PodRef>,
    },
    /// Sent again (the watch still shows the node unregistered): no event.
    Again,
}

/// Registers a claim's node: labels it with the NodePool, claim, capacity type, zone and
/// instance labels, applies the template's taints and startup taints, removes the
/// unregistered taint and adds the termination finalizer. Returns the node as it will be.
pub fn register(
    ctx: &std::sync::Arc<Context>,
    claim: &ClaimView,
    node: &Node,
    pool: Option<&NodePool>,
    registration: Registration,
) -> Node {
    let will_be = registered(node, claim, pool);
    let base = node.clone();
    let name = node.metadata.name.clone().unwrap_or_default();
    let ctx2 = ctx.clone();
    let claim = claim.clone();
    let pool = pool.cloned();
    ctx.spawn(async move {
        let announce = matches!(registration, Registration::First { .. });
        if let Registration::First { expected } = registration {
            // Best effort: a pod that went, or an old API server, changes nothing.
            let writes = expected
                .iter()
                .map(|p| ctx2.writer.nominate_pod(&p.namespace, &p.name, &name));
            for result in futures::future::join_all(writes).await {
                if let Err(e) = result {
                    tracing::debug!(node = %name, error = %e, "could not write nominatedNodeName");
                }
            }
        }
        // Computed from the node as the server has it when the store's copy is behind.
        let edit = |node: &Node| {
            let node = registered(node, &claim, pool.as_ref());
            Some(json!({
                "metadata": {
                    "labels": node.metadata.labels,
                    "finalizers": node.metadata.finalizers,
                },
                "spec": {"taints": node.spec.and_then(|s| s.taints)},
            }))
        };
        match ctx2.writer.edit_node(&name, Some(&base), edit).await {
            Ok(()) if announce => {
                claim_event(&ctx2, &claim.name, false, "Registered", format!("Node {name} registered"))
                    .await;
            }
            Ok(()) => {}
            Err(e) => tracing::warn!(node = %name, error = %e, "registration patch failed; retried on the next pass"),
        }
    });
    will_be
}

/// `node` as registration leaves it (see [`register`]).
fn registered(node: &Node, claim: &ClaimView, pool: Option<&NodePool>) -> Node {
    let mut node = node.clone();
    let labels = node.metadata.labels.get_or_insert_with(BTreeMap::new);
    for (k, v) in claim.labels.iter() {
        labels.entry(k.clone()).or_insert_with(|| v.clone());
    }
    labels.insert(LABEL_NODEPOOL.to_owned(), claim.node_pool.clone());
    labels.insert(LABEL_NODECLAIM.to_owned(), claim.name.clone());
    let spec = node.spec.get_or_insert_with(Default::default);
    let taints = spec.taints.get_or_insert_with(Vec::new);
    taints.retain(|t| t.key != TAINT_UNREGISTERED);
    if let Some(pool) = pool {
        let template = &pool.spec.template.spec;
        for t in template.taints.iter().chain(&template.startup_taints) {
            if !taints
                .iter()
                .any(|x| x.key == t.key && x.effect == t.effect)
            {
                taints.push(t.clone());
            }
        }
    }
    let finalizers = node.metadata.finalizers.get_or_insert_with(Vec::new);
    if !finalizers.iter().any(|f| f == FINALIZER) {
        finalizers.push(FINALIZER.to_owned());
    }
    node
}

/// Cordons (`true`) or uncordons a node for a disruption command. A cordon carries the
/// `quartermaster.dev/disrupted:NoSchedule` taint besides `spec.unschedulable`, so that a
/// restarted controller can tell its own cordons (of commands it no longer remembers) from a
/// user's, and lift them (`Driver::rebuild`).
pub fn cordon(ctx: &std::sync::Arc<Context>, node: String, on: bool) {
    let spec = json!({"unschedulable": on});
    patch_taints(ctx, node, "cordon", spec, move |taints| {
        // Reopened, a node is wanted: its soft cordon goes too.
        taints.retain(|t| t.key != TAINT_DISRUPTED && (on || t.key != TAINT_RETIRING));
        if on {
            taints.push(taint(TAINT_DISRUPTED, "NoSchedule"));
        }
        true
    });
}

/// Puts on (`on`) or takes off `node`'s soft cordon, the taint
/// `quartermaster.dev/retiring:PreferNoSchedule` (the kube-scheduler's TaintToleration score
/// sends new pods to other nodes that fit). The node's other taints are kept.
pub fn soft_cordon(ctx: &std::sync::Arc<Context>, node: String, on: bool) {
    patch_taints(ctx, node, "soft cordon", json!({}), move |taints| {
        if taints.iter().any(|t| t.key == TAINT_RETIRING) == on {
            return false;
        }
        taints.retain(|t| t.key != TAINT_RETIRING);
        if on {
            taints.push(taint(TAINT_RETIRING, "PreferNoSchedule"));
        }
        true
    });
}

fn taint(key: &str, effect: &str) -> Taint {
    Taint {
        key: key.into(),
        effect: effect.into(),
        ..Default::default()
    }
}

/// Patches `node`'s taints, as `edit` changes the node's list (nothing when it returns false),
/// together with the other `spec` fields given; `what` names the change in the log. The list is
/// the store's, or the server's when the store's copy is behind ([`Writer::edit_node`]).
///
/// [`Writer::edit_node`]: crate::writes::Writer::edit_node
fn patch_taints(
    ctx: &std::sync::Arc<Context>,
    node: String,
    what: &'static str,
    spec: serde_json::Value,
    edit: impl Fn(&mut Vec<Taint>) -> bool + Send + Sync + 'static,
) {
    let ctx2 = ctx.clone();
    ctx.spawn(async move {
        let ctx = ctx2;
        let base = ctx.stores.node(&node);
        let patch = |n: &Node| {
            let mut taints = n
                .spec
                .as_ref()
                .and_then(|s| s.taints.clone())
                .unwrap_or_default();
            if !edit(&mut taints) {
                return None;
            }
            let mut spec = spec.clone();
            spec["taints"] = json!(taints);
            Some(json!({ "spec": spec }))
        };
        if let Err(e) = ctx.writer.edit_node(&node, base.as_deref(), patch).await {
            tracing::warn!(node, error = %e, "{what} failed");
        }
    });
}

/// Whether `node` carries the soft cordon ([`soft_cordon`]).
pub fn soft_cordoned(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == TAINT_RETIRING))
}

/// Whether `node` carries the cordon of a disruption command ([`cordon`]).
pub fn cordoned_for_disruption(node: &Node) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == TAINT_DISRUPTED))
}
