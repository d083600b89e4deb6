//! Cluster Autoscaler's `autoscaling.x-k8s.io/v1` ProvisioningRequest (what Kueue's
//! ProvisioningRequest admission check creates), read into pods.
//!
//! A request names PodTemplates (`spec.podSets[].podTemplateRef.name`, each with a `count`).
//! Its pods are planned under names of their own (`provreq-<request>-<podset>-<i>`, labelled
//! [`LABEL_REQUEST`]):
//! - `best-effort-atomic-scale-up.autoscaling.x-k8s.io`: pending pods of one gang (all of the
//!   request's pods or none), so the solver buys every node or none;
//! - `queued-provisioning.gke.io` (GKE's queued provisioning, served by GCP's Dynamic Workload
//!   Scheduler): as best-effort-atomic, and its pods prefer flex-start capacity (a preferred
//!   node-affinity term `quartermaster.dev/capacity-type In [flex-start]`, weight 100) when a
//!   NodePool they may use opts in to flex-start ([`prefer_flex_start`]); when none does they
//!   are planned as best-effort-atomic and the request says why ([`RequestPods::note`]);
//! - `check-capacity.autoscaling.x-k8s.io`: only checked against what exists
//!   ([`RequestPods::check`]), never pending pods, so nothing is ever bought for them (the
//!   capacity found is not held against other pods).
//!
//! Until a best-effort-atomic request is finished its pods hold their room; each pod that
//! consumes the request (annotation [`CONSUME_ANNOTATION`]) and is bound to a node takes one of
//! them over, and consumers still pending are covered by them (no second node is bought). A
//! request that is `Failed`, `BookingExpired` or `CapacityRevoked` holds nothing. Other classes
//! are listed with a problem and no pods.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta};
use quartermaster_policies::labels::LABEL_CAPACITY_TYPE;
use quartermaster_policies::{Requirement, Requirements};
use quartermaster_pricing::CapacityType;
use quartermaster_solver::pod::{PreferredNodeTerm, tolerates_all};
use quartermaster_solver::{ClusterSnapshot, Gang, Pod, PodRef};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::ClusterError;
use crate::objects::{Inventory, Object, part};
use crate::pod::PodSource;
use crate::selectors::At;
use crate::workloads::{MAX_PODS_PER_WORKLOAD, Workload};

/// The API group of ProvisioningRequests.
pub const GROUP: &str = "autoscaling.x-k8s.io";
/// The API version Quartermaster reads and writes.
pub const API_VERSION: &str = "autoscaling.x-k8s.io/v1";
/// The kind.
pub const KIND: &str = "ProvisioningRequest";
/// The class that only checks whether the capacity exists.
pub const CLASS_CHECK_CAPACITY: &str = "check-capacity.autoscaling.x-k8s.io";
/// The class that buys every node of the request or none.
pub const CLASS_BEST_EFFORT_ATOMIC: &str = "best-effort-atomic-scale-up.autoscaling.x-k8s.io";
/// GKE's queued provisioning (Dynamic Workload Scheduler): every node or none, on flex-start
/// capacity where a NodePool opts in to it.
pub const CLASS_QUEUED_PROVISIONING: &str = "queued-provisioning.gke.io";
/// The pod annotation naming the request a pod consumes (set by Kueue).
pub const CONSUME_ANNOTATION: &str = "autoscaling.x-k8s.io/consume-provisioning-request";
/// The older spelling of [`CONSUME_ANNOTATION`] (Kueue sets both).
pub const CONSUME_ANNOTATION_CA: &str =
    "cluster-autoscaler.kubernetes.io/consume-provisioning-request";
/// Set instead of [`CONSUME_ANNOTATION`] by a reader that hands over bound pods without their
/// `spec.nodeName` (the controller): the pod consumes this request and is bound to a node.
pub const CONSUMING_BOUND_ANNOTATION: &str = "quartermaster.dev/consuming-provisioning-request";

/// Marks (in its metadata) a bound pod that consumes a request so that it still counts as bound
/// once its `spec.nodeName` is dropped ([`CONSUMING_BOUND_ANNOTATION`]).
pub(crate) fn mark_bound_consumer(meta: &mut ObjectMeta) {
    let Some(annotations) = meta.annotations.as_mut() else {
        return;
    };
    let request = [CONSUME_ANNOTATION, CONSUME_ANNOTATION_CA]
        .iter()
        .find_map(|k| annotations.remove(*k))
        .filter(|v| !v.is_empty());
    if let Some(request) = request {
        annotations.insert(CONSUMING_BOUND_ANNOTATION.to_owned(), request);
    }
}

/// The label on the pods planned for a request, naming the request (same namespace).
pub const LABEL_REQUEST: &str = "quartermaster.dev/provisioning-request";

/// Condition type: the request was read and will be served.
pub const ACCEPTED: &str = "Accepted";
/// Condition type: the capacity exists (check-capacity) or was bought (best-effort-atomic).
pub const PROVISIONED: &str = "Provisioned";
/// Condition type: the request will not be served.
pub const FAILED: &str = "Failed";
/// Condition type: capacity that was provisioned is gone.
pub const CAPACITY_REVOKED: &str = "CapacityRevoked";
/// Condition type: the booking time ran out before the pods consumed the capacity.
pub const BOOKING_EXPIRED: &str = "BookingExpired";

/// `spec` of a ProvisioningRequest.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningRequestSpec {
    /// The class (`check-capacity.autoscaling.x-k8s.io`, `best-effort-atomic-scale-up…`).
    pub provisioning_class_name: String,
    /// The pods, by PodTemplate.
    pub pod_sets: Vec<PodSet>,
    /// Class parameters (read, not used).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
}

/// `count` pods of one PodTemplate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSet {
    /// The PodTemplate, in the request's namespace.
    pub pod_template_ref: PodTemplateRef,
    /// How many pods.
    pub count: i32,
}

/// A reference to a PodTemplate by name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PodTemplateRef {
    /// `metadata.name` of the PodTemplate.
    #[serde(default)]
    pub name: String,
}

/// `status` of a ProvisioningRequest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProvisioningRequestStatus {
    /// `Accepted`, `Provisioned`, `Failed`, `CapacityRevoked`, `BookingExpired`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Class-specific details for the requester.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub provisioning_class_details: BTreeMap<String, String>,
}

impl ProvisioningRequestStatus {
    /// The condition of this type, if set.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == type_)
    }

    /// Whether the condition of this type is `True`.
    pub fn is_true(&self, type_: &str) -> bool {
        self.condition(type_).is_some_and(|c| c.status == "True")
    }

    /// Whether the request is finished: failed, its booking expired, or its capacity revoked.
    pub fn is_done(&self) -> bool {
        self.is_true(FAILED) || self.is_true(BOOKING_EXPIRED) || self.is_true(CAPACITY_REVOKED)
    }
}

/// The classes Quartermaster serves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProvisioningClass {
    /// `check-capacity.autoscaling.x-k8s.io`.
    CheckCapacity,
    /// `best-effort-atomic-scale-up.autoscaling.x-k8s.io`.
    BestEffortAtomic,
    /// `queued-provisioning.gke.io`: best-effort-atomic, preferring flex-start capacity.
    QueuedProvisioning,
    /// Any other class (not served).
    Other(String),
}

impl ProvisioningClass {
    /// The class of a `provisioningClassName`.
    pub fn parse(name: &str) -> Self {
        match name {
            CLASS_CHECK_CAPACITY => Self::CheckCapacity,
            CLASS_BEST_EFFORT_ATOMIC => Self::BestEffortAtomic,
            CLASS_QUEUED_PROVISIONING => Self::QueuedProvisioning,
            other => Self::Other(other.to_owned()),
        }
    }

    /// Whether the request's pods are one gang the solver places whole or not at all
    /// (best-effort-atomic and queued provisioning).
    pub fn is_atomic(&self) -> bool {
        matches!(self, Self::BestEffortAtomic | Self::QueuedProvisioning)
    }
}

/// One ProvisioningRequest as read, with the pods planned for it.
#[derive(Debug, Clone)]
pub struct RequestPods {
    /// Namespace.
    pub namespace: String,
    /// Name.
    pub name: String,
    /// `metadata.generation` (conditions record it).
    pub generation: Option<i64>,
    /// `metadata.creationTimestamp`.
    pub created_at: Option<k8s_openapi::jiff::Timestamp>,
    /// The class.
    pub class: ProvisioningClass,
    /// The status as found.
    pub status: ProvisioningRequestStatus,
    /// Pods of the request in the snapshot's pending pods (best-effort-atomic).
    pub pending: Vec<PodRef>,
    /// Pods to check against existing capacity (check-capacity); not in the snapshot's pending
    /// pods.
    pub check: Vec<Pod>,
    /// Pods already consuming the request (bound to a node).
    pub consumed: usize,
    /// Every pod the request asks for (the sum of its pod sets' counts).
    pub total: usize,
    /// Why the request cannot be served (unknown class, missing PodTemplate, bad count).
    pub problem: Option<String>,
    /// How it is served when that is not what its class asks for (a queued-provisioning
    /// request no NodePool serves with flex-start), for its `Accepted` condition's message.
    pub note: Option<String>,
}

/// A request read from the input, before its pods are made.
#[derive(Debug, Clone)]
pub(crate) struct RequestObject {
    pub object: Object<Option<ProvisioningRequestSpec>, ProvisioningRequestStatus>,
    /// Why `spec` could not be read, if it could not.
    pub malformed: Option<String>,
}

/// A PodTemplate (core/v1), keyed by `(namespace, name)` in the inventory.
pub(crate) type PodTemplateObject = Object<Option<PodTemplateSpec>>;

/// Whether `(group, kind)` is read here.
pub(crate) fn is_read_here(api_group: &str, kind: &str) -> bool {
    (api_group == GROUP && kind == KIND) || (api_group.is_empty() && kind == "PodTemplate")
}

/// Reads a ProvisioningRequest or PodTemplate into the inventory. A request whose spec cannot
/// be read is kept (it gets `Failed`); a malformed PodTemplate is an error naming the field.
pub(crate) fn read(inv: &mut Inventory, value: &Value, kind: &str) -> Result<(), ClusterError> {
    let (id, namespace, name, meta) = crate::objects::namespaced(value, kind)?;
    if kind == KIND {
        let (spec, malformed) = match part::<ProvisioningRequestSpec>(value, "spec", &id) {
            Ok(Some(spec)) => (Some(spec), None),
            Ok(None) => (None, Some("spec: missing".to_owned())),
            Err(e) => (None, Some(e.to_string())),
        };
        let status = part::<ProvisioningRequestStatus>(value, "status", &id)
            .ok()
            .flatten()
            .unwrap_or_default();
        inv.provisioning_requests.push(RequestObject {
            object: Object {
                id,
                namespace,
                name,
                meta,
                spec,
                status,
            },
            malformed,
        });
    } else {
        let template = part::<PodTemplateSpec>(value, "template", &id)?;
        inv.pod_templates.insert(
            (namespace.clone(), name.clone()),
            Object {
                id,
                namespace,
                name,
                meta,
                spec: template,
                status: (),
            },
        );
    }
    Ok(())
}

/// The request a pod consumes (either annotation), if any.
pub(crate) fn consumed_request(meta: &ObjectMeta) -> Option<&str> {
    let annotations = meta.annotations.as_ref()?;
    annotations
        .get(CONSUME_ANNOTATION)
        .or_else(|| annotations.get(CONSUME_ANNOTATION_CA))
        .map(String::as_str)
        .filter(|n| !n.is_empty())
}

/// Requests whose pods hold capacity now, as `(namespace, name)`: best-effort-atomic ones that
/// are not done.
pub(crate) fn holding(inv: &Inventory) -> BTreeSet<(String, String)> {
    inv.provisioning_requests
        .iter()
        .filter(|r| r.malformed.is_none() && !r.object.status.is_done())
        .filter(|r| {
            let class = r
                .object
                .spec
                .as_ref()
                .map(|s| ProvisioningClass::parse(&s.provisioning_class_name));
            class.is_some_and(|c| c.is_atomic())
        })
        .map(|r| (r.object.namespace.clone(), r.object.name.clone()))
        .collect()
}

/// The name of the `index`-th pod of pod set `set` of request `request`.
pub fn pod_name(request: &str, set: usize, index: usize) -> String {
    format!("provreq-{request}-{set}-{index}")
}

/// What [`expand`] makes of one request: its entry, and the workloads of its pods.
pub(crate) struct Expanded<'a> {
    /// The request (pods filled in by the caller: `check` from `checks`).
    pub request: RequestPods,
    /// Workloads to check only (check-capacity before it is provisioned).
    pub checks: Vec<Workload<'a>>,
}

/// Turns every request into workloads: pending ones pushed onto `pending`, checked ones
/// returned with the request.
pub(crate) fn expand<'a>(
    inv: &'a Inventory,
    pending: &mut Vec<Workload<'a>>,
    notes: &mut Vec<String>,
) -> Vec<Expanded<'a>> {
    // Consumers bound to a node, per request.
    let mut consumed: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for pod in &inv.pods {
        let bound = pod.spec.node_name.as_deref().is_some_and(|n| !n.is_empty());
        let finished = matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded" | "Failed")
        );
        let marked = pod
            .meta
            .annotations
            .as_ref()
            .and_then(|a| a.get(CONSUMING_BOUND_ANNOTATION))
            .map(String::as_str);
        if let Some(request) = consumed_request(&pod.meta).filter(|_| bound).or(marked)
            && !finished
        {
            *consumed
                .entry((pod.namespace.as_str(), request))
                .or_default() += 1;
        }
    }
    let holding = holding(inv);
    let mut out = Vec::new();
    for r in &inv.provisioning_requests {
        let o = &r.object;
        let class = o
            .spec
            .as_ref()
            .map_or(ProvisioningClass::Other(String::new()), |s| {
                ProvisioningClass::parse(&s.provisioning_class_name)
            });
        let request = RequestPods {
            namespace: o.namespace.clone(),
            name: o.name.clone(),
            generation: o.meta.generation,
            created_at: o.meta.creation_timestamp.as_ref().map(|t| t.0),
            class: class.clone(),
            status: o.status.clone(),
            pending: Vec::new(),
            check: Vec::new(),
            consumed: consumed
                .get(&(o.namespace.as_str(), o.name.as_str()))
                .copied()
                .unwrap_or(0),
            total: 0,
            problem: None,
            note: None,
        };
        let mut expanded = Expanded {
            request,
            checks: Vec::new(),
        };
        let Some(spec) = o.spec.as_ref().filter(|_| r.malformed.is_none()) else {
            expanded.request.problem = r.malformed.clone();
            out.push(expanded);
            continue;
        };
        if let ProvisioningClass::Other(name) = &class {
            expanded.request.problem = Some(format!(
                "provisioningClassName {name:?} is not served by Quartermaster (it serves \
                 {CLASS_CHECK_CAPACITY}, {CLASS_BEST_EFFORT_ATOMIC} and \
                 {CLASS_QUEUED_PROVISIONING})"
            ));
            out.push(expanded);
            continue;
        }
        match pod_sets(inv, o, spec) {
            Err(problem) => expanded.request.problem = Some(problem),
            Ok(sets) => {
                let total: usize = sets.iter().map(|(_, n)| n).sum();
                expanded.request.total = total;
                if o.status.is_done() {
                    out.push(expanded);
                    continue;
                }
                let holds = holding.contains(&(o.namespace.clone(), o.name.clone()));
                // Consumers on nodes take over the request's pods, first pod set first.
                let mut taken = expanded.request.consumed;
                let gang = class.is_atomic().then(|| Gang {
                    name: format!("{}/provreq-{}", o.namespace, o.name),
                    min_member: 0,
                });
                let mut workloads = Vec::new();
                for (index, (template, count)) in sets.into_iter().enumerate() {
                    let skip = taken.min(count);
                    taken -= skip;
                    let replicas: Vec<PodRef> = (skip..count)
                        .map(|i| PodRef::new(&o.namespace, pod_name(&o.name, index, i)))
                        .collect();
                    if replicas.is_empty() {
                        continue;
                    }
                    let Some(spec) = template.spec.as_ref().and_then(|t| t.spec.as_ref()) else {
                        continue;
                    };
                    let mut labels = template
                        .spec
                        .as_ref()
                        .and_then(|t| t.metadata.as_ref())
                        .and_then(|m| m.labels.clone())
                        .unwrap_or_default();
                    labels.insert(LABEL_REQUEST.to_owned(), o.name.clone());
                    workloads.push(Workload {
                        template: PodSource {
                            id: PodRef::new(&o.namespace, pod_name(&o.name, index, 0)),
                            labels,
                            spec,
                            owner: Some(format!("{KIND}/{}/{}", o.namespace, o.name)),
                            at: At {
                                object: &template.id,
                                spec_path: "template.spec",
                            },
                        },
                        replicas,
                        stateful: false,
                        gang: None,
                    });
                }
                let remaining: usize = workloads.iter().map(|w| w.replicas.len()).sum();
                for w in &mut workloads {
                    w.gang = gang.clone().map(|mut g| {
                        g.min_member = u32::try_from(remaining).unwrap_or(u32::MAX);
                        g
                    });
                }
                if holds {
                    expanded.request.pending = workloads
                        .iter()
                        .flat_map(|w| w.replicas.iter().cloned())
                        .collect();
                    pending.extend(workloads);
                } else {
                    expanded.checks = workloads;
                }
            }
        }
        if let Some(problem) = &expanded.request.problem {
            notes.push(format!("{}: {problem}", o.id));
        }
        out.push(expanded);
    }
    out
}

/// The request's pod sets as `(PodTemplate, count)`, or why they cannot be read.
fn pod_sets<'a>(
    inv: &'a Inventory,
    o: &Object<Option<ProvisioningRequestSpec>, ProvisioningRequestStatus>,
    spec: &ProvisioningRequestSpec,
) -> Result<Vec<(&'a PodTemplateObject, usize)>, String> {
    if spec.pod_sets.is_empty() {
        return Err("spec.podSets: empty".to_owned());
    }
    let mut sets = Vec::new();
    let mut total = 0usize;
    for (i, set) in spec.pod_sets.iter().enumerate() {
        let count = usize::try_from(set.count).map_err(|_| {
            format!(
                "spec.podSets[{i}].count: must not be negative, got {}",
                set.count
            )
        })?;
        total += count;
        if total > MAX_PODS_PER_WORKLOAD {
            return Err(format!(
                "spec.podSets[{i}].count: {total} pods is more than the {MAX_PODS_PER_WORKLOAD} one request may ask for"
            ));
        }
        let name = &set.pod_template_ref.name;
        let template = inv
            .pod_templates
            .get(&(o.namespace.clone(), name.clone()))
            .ok_or_else(|| {
                format!(
                    "spec.podSets[{i}].podTemplateRef.name: PodTemplate {}/{name} not found",
                    o.namespace
                )
            })?;
        if template
            .spec
            .as_ref()
            .and_then(|t| t.spec.as_ref())
            .is_none()
        {
            return Err(format!(
                "spec.podSets[{i}].podTemplateRef.name: PodTemplate {}/{name} has no template.spec",
                o.namespace
            ));
        }
        sets.push((template, count));
    }
    Ok(sets)
}

/// The weight of the preferred node-affinity term a queued-provisioning request's pods get.
pub const FLEX_START_PREFERENCE_WEIGHT: i32 = 100;

/// Queued provisioning: the pending pods of every `queued-provisioning.gke.io` request in
/// `snapshot` prefer flex-start capacity (a preferred node-affinity term
/// `quartermaster.dev/capacity-type In [flex-start]`, weight
/// [`FLEX_START_PREFERENCE_WEIGHT`]) when a NodePool they may use (its taints tolerated, its
/// requirements compatible with theirs) opts in to flex-start. A request none of whose pods
/// has such a pool is planned as best-effort-atomic: its [`RequestPods::note`] says why, and
/// so does a line of `notes`.
pub(crate) fn prefer_flex_start(
    snapshot: &mut ClusterSnapshot,
    requests: &mut [RequestPods],
    notes: &mut Vec<String>,
) {
    let queued =
        |r: &RequestPods| r.class == ProvisioningClass::QueuedProvisioning && r.problem.is_none();
    if !requests.iter().any(|r| queued(r) && !r.pending.is_empty()) {
        return;
    }
    let preference = PreferredNodeTerm {
        weight: FLEX_START_PREFERENCE_WEIGHT,
        requirements: Requirements::from_iter([Requirement::in_values(
            LABEL_CAPACITY_TYPE,
            [CapacityType::FlexStart.as_str()],
        )]),
    };
    for r in requests.iter_mut().filter(|r| queued(r)) {
        let mine: BTreeSet<&PodRef> = r.pending.iter().collect();
        let mut served = 0;
        for pod in snapshot.pending.iter_mut().filter(|p| mine.contains(&p.id)) {
            let opted_in = snapshot.node_pools.iter().any(|pool| {
                quartermaster_solver::flex_start::opts_in(pool)
                    && tolerates_all(&pod.tolerations, &pool.taints).is_ok()
                    && (pod.node_terms.is_empty()
                        || pod
                            .node_terms
                            .iter()
                            .any(|t| pool.requirements.compatible(t).is_ok()))
            });
            if opted_in {
                served += 1;
                if !pod.preferred_node_terms.contains(&preference) {
                    pod.preferred_node_terms.push(preference.clone());
                }
            }
        }
        if served == 0 && !mine.is_empty() {
            let note = format!(
                "no NodePool its pods may use opts in to flex-start (requirement \
                 {LABEL_CAPACITY_TYPE} In [flex-start]): planned as \
                 {CLASS_BEST_EFFORT_ATOMIC}, on the capacity types its NodePools allow"
            );
            notes.push(format!(
                "{KIND}/{}/{} ({CLASS_QUEUED_PROVISIONING}): {note}",
                r.namespace, r.name
            ));
            r.note = Some(note);
        }
    }
}

#[cfg(test)]
#[path = "provisioning_request_tests.rs"]
mod tests;
