//! Which pods exist or will exist: bare Pods, and the pods controllers (Deployment, ReplicaSet,
//! StatefulSet, Job, and the workload custom resources of [`custom`]) will create from their
//! templates; DaemonSet templates, which become per-node overhead.

pub(crate) mod custom;
mod jobset;
mod kserve;
mod kubeflow;
mod lws;
mod ray;
mod volcano;

#[cfg(test)]
mod custom_tests;

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{PodSpec, PodTemplateSpec};
use quartermaster_solver::PodRef;
use quartermaster_solver::pod::{TaintEffect, Toleration};

use crate::error::ClusterError;
use crate::objects::{Inventory, Object};
use crate::pod::PodSource;
use crate::selectors::At;

/// The label a StatefulSet controller puts on each pod with the pod's name.
pub(crate) const STATEFULSET_POD_NAME: &str = "statefulset.kubernetes.io/pod-name";

/// Pods that share one spec: a bare pod (one replica) or a controller's template.
#[derive(Debug, Clone)]
pub(crate) struct Workload<'a> {
    /// The spec, with the workload's identity as id.
    pub template: PodSource<'a>,
    /// The pods to create, in order.
    pub replicas: Vec<PodRef>,
    /// StatefulSet pods carry their own name as a label.
    pub stateful: bool,
    /// The gang its pods belong to.
    pub gang: Option<quartermaster_solver::Gang>,
}

/// Everything [`expand`] finds.
#[derive(Debug, Default)]
pub(crate) struct Expansion<'a> {
    /// Pods to place.
    pub pending: Vec<Workload<'a>>,
    /// Pods bound to a node: `(node name, pod)`.
    pub bound: Vec<(String, PodSource<'a>)>,
    /// DaemonSet templates.
    pub daemon_sets: Vec<PodSource<'a>>,
}

const TEMPLATE_SPEC: &str = "spec.template.spec";

fn template<'a, S, T>(
    object: &'a Object<S, T>,
    template: &'a PodTemplateSpec,
    kind: &str,
) -> Result<PodSource<'a>, ClusterError> {
    let at = At {
        object: &object.id,
        spec_path: TEMPLATE_SPEC,
    };
    let spec: &PodSpec = template
        .spec
        .as_ref()
        .ok_or_else(|| ClusterError::invalid(&object.id, TEMPLATE_SPEC, "missing"))?;
    Ok(PodSource {
        id: PodRef::new(&object.namespace, &object.name),
        labels: template
            .metadata
            .as_ref()
            .and_then(|m| m.labels.clone())
            .unwrap_or_default(),
        spec,
        owner: Some(format!("{kind}/{}/{}", object.namespace, object.name)),
        at,
    })
}

fn count(
    value: Option<i32>,
    default: i32,
    object: &str,
    field: &str,
) -> Result<usize, ClusterError> {
    let v = value.unwrap_or(default);
    let n = usize::try_from(v).map_err(|_| {
        ClusterError::invalid(object, field, format!("must not be negative, got {v}"))
    })?;
    if n > MAX_PODS_PER_WORKLOAD {
        return Err(ClusterError::invalid(
            object,
            field,
            format!("{n} pods is more than the {MAX_PODS_PER_WORKLOAD} one workload may expand to"),
        ));
    }
    Ok(n)
}

/// Says that a workload asks for no pods at all (Karpenter's examples ship `replicas: 0`), so
/// an empty plan is not read as "nothing fits".
fn note_no_replicas(id: &str, field: &str, n: usize, notes: &mut Vec<String>) {
    if n == 0 {
        notes.push(format!(
            "{id}: {field} is 0; no pods planned (scale it up to plan for its pods)"
        ));
    }
}

/// The most pods one workload expands to: far beyond any real cluster's workload, small enough
/// that a typo (`replicas: 2000000000`) is an error instead of exhausting memory.
pub(crate) const MAX_PODS_PER_WORKLOAD: usize = 200_000;

fn replicas(name: &str, n: usize) -> Vec<(String, usize)> {
    (0..n).map(|i| (name.to_owned(), i)).collect()
}

/// The pod annotation Volcano names a pod's PodGroup with.
pub(crate) const VOLCANO_GROUP: &str = "scheduling.k8s.io/group-name";
/// The pod label the coscheduling plugin names a pod's PodGroup with.
pub(crate) const COSCHEDULING_GROUP: &str = "scheduling.x-k8s.io/pod-group";

/// The gang a bare pod names (Volcano's annotation or the coscheduling label), its `minMember`
/// from the PodGroup given (0 until counted, when none is).
fn pod_group_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    namespace: &str,
    groups: &BTreeMap<(String, String), u32>,
) -> Option<quartermaster_solver::Gang> {
    let name = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(VOLCANO_GROUP))
        .or_else(|| meta.labels.as_ref().and_then(|l| l.get(COSCHEDULING_GROUP)))?;
    Some(quartermaster_solver::Gang {
        name: format!("{namespace}/{name}"),
        min_member: groups
            .get(&(namespace.to_owned(), name.clone()))
            .copied()
            .unwrap_or(0),
    })
}

/// Expands the inventory into pods. Controllers whose pods are themselves given as Pod objects
/// (a `kubectl get all -o yaml` dump) are not expanded again; ReplicaSets owned by a given
/// Deployment are left to it.
pub(crate) fn expand<'a>(
    inv: &'a Inventory,
    notes: &mut Vec<String>,
) -> Result<Expansion<'a>, ClusterError> {
    let mut out = Expansion::default();

    // (namespace, ReplicaSet) -> Deployment, for ReplicaSets whose Deployment is given.
    let deployments: BTreeSet<(&str, &str)> = inv
        .deployments
        .iter()
        .map(|d| (d.namespace.as_str(), d.name.as_str()))
        .collect();
    let mut rs_deployment: BTreeMap<(&str, &str), &str> = BTreeMap::new();
    for rs in &inv.replica_sets {
        if let Some(c) = rs.controller().filter(|c| c.kind == "Deployment")
            && deployments.contains(&(rs.namespace.as_str(), c.name.as_str()))
        {
            rs_deployment.insert((rs.namespace.as_str(), rs.name.as_str()), c.name.as_str());
        }
    }
    // The controller a pod reports to, as `(kind, namespace, name)`, with ReplicaSets of a given
    // Deployment reported as the Deployment.
    let controller_of =
        |pod: &'a Object<PodSpec, Option<k8s_openapi::api::core::v1::PodStatus>>| {
            pod.controller().map(|c| {
                match rs_deployment.get(&(pod.namespace.as_str(), c.name.as_str())) {
                    Some(d) if c.kind == "ReplicaSet" => (
                        "Deployment".to_owned(),
                        pod.namespace.clone(),
                        (*d).to_owned(),
                    ),
                    _ => (c.kind.clone(), pod.namespace.clone(), c.name.clone()),
                }
            })
        };

    let mut materialized: BTreeSet<(String, String, String)> = BTreeSet::new();
    let mut finished = 0usize;
    let holding = crate::provisioning_request::holding(inv);
    for pod in &inv.pods {
        let controller = controller_of(pod);
        if let Some(c) = &controller {
            materialized.insert(c.clone());
        }
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            finished += 1;
            continue;
        }
        let source = PodSource {
            id: PodRef::new(&pod.namespace, &pod.name),
            labels: pod.labels(),
            spec: &pod.spec,
            owner: controller
                .as_ref()
                .map(|(k, ns, n)| format!("{k}/{ns}/{n}")),
            at: At {
                object: &pod.id,
                spec_path: "spec",
            },
        };
        match pod.spec.node_name.as_deref().filter(|n| !n.is_empty()) {
            Some(node) => out.bound.push((node.to_owned(), source)),
            None if controller
                .as_ref()
                .is_some_and(|(k, _, _)| k == "DaemonSet") =>
            {
                notes.push(format!(
                    "{}: pending DaemonSet pod skipped: the DaemonSet pins it to an existing node",
                    pod.id
                ))
            }
            None if pod
                .spec
                .scheduling_gates
                .as_ref()
                .is_some_and(|g| !g.is_empty()) =>
            {
                notes.push(format!(
                    "{}: has scheduling gates; not planned until they are removed",
                    pod.id
                ))
            }
            None if crate::provisioning_request::consumed_request(&pod.meta)
                .is_some_and(|r| holding.contains(&(pod.namespace.clone(), r.to_owned()))) =>
            {
                notes.push(format!(
                    "{}: consumes a ProvisioningRequest whose capacity is booked; not planned again",
                    pod.id
                ))
            }
            None => out.pending.push(Workload {
                template: source,
                replicas: vec![PodRef::new(&pod.namespace, &pod.name)],
                stateful: false,
                gang: pod_group_of(&pod.meta, &pod.namespace, &inv.pod_groups),
            }),
        }
    }
    if finished > 0 {
        notes.push(format!(
            "skipped {finished} finished pod(s) (phase Succeeded or Failed)"
        ));
    }

    let given_as_pods =
        |kind: &str, object_ns: &str, name: &str, id: &str, notes: &mut Vec<String>| {
            let key = (kind.to_owned(), object_ns.to_owned(), name.to_owned());
            let given = materialized.contains(&key);
            if given {
                notes.push(format!(
                    "{id}: its pods are given as Pod objects; the template is not expanded"
                ));
            }
            given
        };
    let mut add = |source: PodSource<'a>, names: Vec<(String, usize)>, stateful: bool| {
        let ns = source.id.namespace.clone();
        out.pending.push(Workload {
            template: source,
            replicas: names
                .into_iter()
                .map(|(n, i)| PodRef::new(&ns, format!("{n}-{i}")))
                .collect(),
            stateful,
            gang: None,
        });
    };

    for d in &inv.deployments {
        if given_as_pods("Deployment", &d.namespace, &d.name, &d.id, notes) {
            continue;
        }
        let n = count(d.spec.replicas, 1, &d.id, "spec.replicas")?;
        note_no_replicas(&d.id, "spec.replicas", n, notes);
        add(
            template(d, &d.spec.template, "Deployment")?,
            replicas(&d.name, n),
            false,
        );
    }
    for rs in &inv.replica_sets {
        if rs_deployment.contains_key(&(rs.namespace.as_str(), rs.name.as_str()))
            || given_as_pods("ReplicaSet", &rs.namespace, &rs.name, &rs.id, notes)
        {
            continue;
        }
        let n = count(rs.spec.replicas, 1, &rs.id, "spec.replicas")?;
        note_no_replicas(&rs.id, "spec.replicas", n, notes);
        let t = rs
            .spec
            .template
            .as_ref()
            .ok_or_else(|| ClusterError::invalid(&rs.id, "spec.template", "missing"))?;
        add(template(rs, t, "ReplicaSet")?, replicas(&rs.name, n), false);
    }
    for s in &inv.stateful_sets {
        if given_as_pods("StatefulSet", &s.namespace, &s.name, &s.id, notes) {
            continue;
        }
        let n = count(s.spec.replicas, 1, &s.id, "spec.replicas")?;
        note_no_replicas(&s.id, "spec.replicas", n, notes);
        add(
            template(s, &s.spec.template, "StatefulSet")?,
            replicas(&s.name, n),
            true,
        );
    }
    for j in &inv.jobs {
        if given_as_pods("Job", &j.namespace, &j.name, &j.id, notes) {
            continue;
        }
        if j.spec.suspend == Some(true) {
            notes.push(format!("{}: suspended; no pods planned", j.id));
            continue;
        }
        let parallelism = count(j.spec.parallelism, 1, &j.id, "spec.parallelism")?;
        note_no_replicas(&j.id, "spec.parallelism", parallelism, notes);
        let n = match j.spec.completions {
            // A work-queue Job (no completions) runs `parallelism` pods.
            None => parallelism,
            Some(_) => {
                let completions = count(j.spec.completions, 1, &j.id, "spec.completions")?;
                let succeeded = j
                    .status
                    .as_ref()
                    .and_then(|s| s.succeeded)
                    .unwrap_or(0)
                    .max(0) as usize;
                parallelism.min(completions.saturating_sub(succeeded))
            }
        };
        add(
            template(j, &j.spec.template, "Job")?,
            replicas(&j.name, n),
            false,
        );
    }
    for c in &inv.custom {
        let (ns, name) = (&c.object.namespace, &c.object.name);
        let kind = c.kind.name();
        let plain_kind = kind.split('.').next().unwrap_or(kind);
        if given_as_pods(plain_kind, ns, name, &c.object.id, notes) {
            continue;
        }
        notes.extend(c.notes.iter().cloned());
        let mut roles: Vec<(&str, usize)> = Vec::new();
        for g in &c.groups {
            match roles.iter_mut().find(|(r, _)| *r == g.role) {
                Some((_, n)) => *n += g.names.len(),
                None => roles.push((&g.role, g.names.len())),
            }
            if g.names.is_empty() {
                continue;
            }
            out.pending.push(Workload {
                template: PodSource {
                    id: PodRef::new(ns, name),
                    labels: g.labels.clone(),
                    spec: &g.spec,
                    owner: Some(format!("{kind}/{ns}/{name}")),
                    at: At {
                        object: &c.object.id,
                        spec_path: &g.spec_path,
                    },
                },
                replicas: g.names.iter().map(|n| PodRef::new(ns, n)).collect(),
                stateful: false,
                gang: g.gang.clone(),
            });
        }
        let total: usize = roles.iter().map(|(_, n)| n).sum();
        let roles: Vec<String> = roles.iter().map(|(r, n)| format!("{r} ×{n}")).collect();
        notes.push(format!(
            "{}: expanded to {total} pod(s): {}",
            c.object.id,
            if roles.is_empty() {
                "nothing to run".to_owned()
            } else {
                roles.join(", ")
            }
        ));
    }
    for ds in &inv.daemon_sets {
        out.daemon_sets
            .push(template(ds, &ds.spec.template, "DaemonSet")?);
    }
    // A PodGroup named by pods but not given: the gang is every pending pod that names it.
    let mut members: BTreeMap<String, u32> = BTreeMap::new();
    for w in &out.pending {
        if let Some(g) = &w.gang {
            *members.entry(g.name.clone()).or_default() += w.replicas.len() as u32;
        }
    }
    for w in &mut out.pending {
        if let Some(g) = &mut w.gang
            && g.min_member == 0
        {
            g.min_member = members.get(&g.name).copied().unwrap_or(0);
        }
    }
    Ok(out)
}

/// The tolerations the DaemonSet controller adds to every DaemonSet pod, so that node conditions
/// and cordoning do not evict or block them (`network-unavailable` only with `hostNetwork`).
pub(crate) fn daemon_set_tolerations(host_network: bool) -> Vec<Toleration> {
    let mut keys = vec![
        ("node.kubernetes.io/not-ready", TaintEffect::NoExecute),
        ("node.kubernetes.io/unreachable", TaintEffect::NoExecute),
        ("node.kubernetes.io/disk-pressure", TaintEffect::NoSchedule),
        (
            "node.kubernetes.io/memory-pressure",
            TaintEffect::NoSchedule,
        ),
        ("node.kubernetes.io/pid-pressure", TaintEffect::NoSchedule),
        ("node.kubernetes.io/unschedulable", TaintEffect::NoSchedule),
    ];
    if host_network {
        keys.push((
            "node.kubernetes.io/network-unavailable",
            TaintEffect::NoSchedule,
        ));
    }
    keys.into_iter()
        .map(|(key, effect)| Toleration {
            key: key.to_owned(),
            exists: true,
            value: String::new(),
            effect: Some(effect),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use quartermaster_solver::resources::CPU;

    use crate::testing::{ingest, ingest_err};

    fn names(ingested: &crate::Ingested) -> Vec<String> {
        ingested
            .snapshot
            .pending
            .iter()
            .map(|p| p.id.to_string())
            .collect()
    }

    const TEMPLATE: &str = "    template:
      metadata: {labels: {app: web}}
      spec:
        containers: [{name: c, resources: {requests: {cpu: 250m}}}]";

    #[test]
    fn pods_naming_a_pod_group_form_a_gang_of_its_min_member() {
        let pod = |name: &str, how: &str| {
            format!(
                "apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, {how}}}\nspec:\n  containers: [{{name: c, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]\n"
            )
        };
        let volcano = "annotations: {scheduling.k8s.io/group-name: train}";
        let ingested = ingest(&format!(
            "{}---\n{}---\n{}---\napiVersion: scheduling.volcano.sh/v1beta1\nkind: PodGroup\nmetadata: {{name: train}}\nspec: {{minMember: 2}}\n",
            pod("w0", volcano),
            pod("w1", volcano),
            pod("w2", volcano)
        ));
        let gangs: Vec<_> = ingested
            .snapshot
            .pending
            .iter()
            .map(|p| p.gang.clone().expect("a gang"))
            .collect();
        assert!(
            gangs
                .iter()
                .all(|g| g.name == "default/train" && g.min_member == 2)
        );
        // Coscheduling's label, no PodGroup given: every pod that names it.
        let cosched = "labels: {scheduling.x-k8s.io/pod-group: infer}";
        let ingested = ingest(&format!("{}---\n{}", pod("a", cosched), pod("b", cosched)));
        assert!(ingested.snapshot.pending.iter().all(|p| {
            p.gang
                .as_ref()
                .is_some_and(|g| g.name == "default/infer" && g.min_member == 2)
        }));
    }

    #[test]
    fn a_workload_scaled_to_zero_plans_no_pods_and_says_so() {
        let ingested = ingest(&format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: inflate}}\nspec:\n    replicas: 0\n    selector: {{matchLabels: {{app: web}}}}\n{TEMPLATE}\n"
        ));
        assert!(ingested.snapshot.pending.is_empty());
        assert!(
            ingested.notes.iter().any(|n| n
                == "Deployment/default/inflate: spec.replicas is 0; no pods planned (scale it up to plan for its pods)"),
            "{:?}",
            ingested.notes
        );
    }

    #[test]
    fn deployment_expands_to_replicas_of_its_template() {
        let ingested = ingest(&format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web, namespace: shop}}\nspec:\n    replicas: 3\n    selector: {{matchLabels: {{app: web}}}}\n{TEMPLATE}\n"
        ));
        assert_eq!(names(&ingested), ["shop/web-0", "shop/web-1", "shop/web-2"]);
        let pod = &ingested.snapshot.pending[2];
        assert_eq!(pod.requests.get(CPU), 250);
        assert_eq!(pod.labels["app"], "web");
        assert_eq!(pod.owner.as_deref(), Some("Deployment/shop/web"));
        // replicas defaults to 1; the namespace to `default`.
        let ingested = ingest(&format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n    selector: {{matchLabels: {{app: web}}}}\n{TEMPLATE}\n"
        ));
        assert_eq!(names(&ingested), ["default/web-0"]);
    }

    #[test]
    fn absurd_replica_counts_are_an_error_not_an_allocation() {
        let err = ingest_err(&format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n    replicas: 2000000000\n    selector: {{matchLabels: {{app: web}}}}\n{TEMPLATE}\n"
        ));
        let err = err.to_string();
        assert!(err.contains("spec.replicas"), "{err}");
        assert!(err.contains("2000000000 pods is more than"), "{err}");
    }

    #[test]
    fn replica_set_and_stateful_set() {
        let ingested = ingest(&format!(
            "apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {{name: rs}}\nspec:\n    replicas: 2\n    selector: {{matchLabels: {{app: web}}}}\n{TEMPLATE}\n---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: redis}}\nspec:\n    replicas: 2\n    serviceName: redis\n    selector: {{matchLabels: {{app: web}}}}\n{TEMPLATE}\n"
        ));
        assert_eq!(
            names(&ingested),
            [
                "default/rs-0",
                "default/rs-1",
                "default/redis-0",
                "default/redis-1"
            ]
        );
        let redis1 = &ingested.snapshot.pending[3];
        assert_eq!(
            redis1.labels["statefulset.kubernetes.io/pod-name"],
            "redis-1"
        );
        assert_eq!(redis1.owner.as_deref(), Some("StatefulSet/default/redis"));
    }

    fn job(spec: &str, status: &str) -> String {
        format!(
            "apiVersion: batch/v1\nkind: Job\nmetadata: {{name: train}}\nspec:\n{spec}\n{TEMPLATE}\n{status}\n"
        )
    }

    #[test]
    fn job_runs_min_of_parallelism_and_remaining_completions() {
        assert_eq!(
            names(&ingest(&job("    parallelism: 4\n    completions: 10", ""))).len(),
            4
        );
        assert_eq!(
            names(&ingest(&job("    parallelism: 4\n    completions: 2", ""))).len(),
            2
        );
        // Neither set: one pod. Only parallelism (a work queue): parallelism pods.
        assert_eq!(
            names(&ingest(&job("    backoffLimit: 1", ""))),
            ["default/train-0"]
        );
        assert_eq!(names(&ingest(&job("    parallelism: 3", ""))).len(), 3);
        // Completions already reached count against what is left.
        assert_eq!(
            names(&ingest(&job(
                "    parallelism: 4\n    completions: 5",
                "status: {succeeded: 3}"
            )))
            .len(),
            2
        );
        let suspended = ingest(&job("    parallelism: 4\n    suspend: true", ""));
        assert!(suspended.snapshot.pending.is_empty());
        assert!(
            suspended
                .notes
                .iter()
                .any(|n| n.contains("Job/default/train: suspended"))
        );
        let e = ingest_err(&job("    parallelism: -1", ""));
        assert_eq!(
            e.to_string(),
            "Job/default/train: spec.parallelism: must not be negative, got -1"
        );
    }

    #[test]
    fn daemon_set_template_becomes_node_overhead() {
        let s = ingest(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: node-exporter, namespace: monitoring}\nspec:\n  selector: {matchLabels: {app: ne}}\n  template:\n    metadata: {labels: {app: ne}}\n    spec:\n      hostNetwork: true\n      tolerations: [{operator: Exists}]\n      containers: [{name: ne, ports: [{containerPort: 9100, hostPort: 9100}], resources: {requests: {cpu: 100m}}}]\n",
        )
        .snapshot;
        assert!(s.pending.is_empty());
        assert_eq!(s.daemonsets.len(), 1);
        let ds = &s.daemonsets[0];
        assert_eq!(ds.id.to_string(), "monitoring/node-exporter");
        assert_eq!(ds.requests.get(CPU), 100);
        assert_eq!(ds.host_ports[0].port, 9100);
        assert_eq!(
            ds.owner.as_deref(),
            Some("DaemonSet/monitoring/node-exporter")
        );
        assert!(
            ds.tolerations
                .iter()
                .any(|t| t.key == "node.kubernetes.io/unschedulable")
        );
        assert!(
            ds.tolerations
                .iter()
                .any(|t| t.key == "node.kubernetes.io/network-unavailable")
        );
    }

    #[test]
    fn controllers_whose_pods_are_given_are_not_expanded_again() {
        // What `kubectl get deploy,rs,pods -o yaml` returns: the Deployment, its ReplicaSet and
        // its pods. Only the pods count.
        let ingested = ingest(&format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n    replicas: 2\n    selector: {{matchLabels: {{app: web}}}}\n{TEMPLATE}
---
apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {{name: web-7d9f, ownerReferences: [{{apiVersion: apps/v1, kind: Deployment, name: web, uid: u1, controller: true}}]}}\nspec:\n    replicas: 2\n    selector: {{matchLabels: {{app: web}}}}\n{TEMPLATE}
---
apiVersion: v1\nkind: Pod\nmetadata: {{name: web-7d9f-abcde, labels: {{app: web}}, ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: web-7d9f, uid: u2, controller: true}}]}}\nspec:\n  containers: [{{name: c}}]
---
apiVersion: v1\nkind: Pod\nmetadata: {{name: web-7d9f-fghij, labels: {{app: web}}, ownerReferences: [{{apiVersion: apps/v1, kind: ReplicaSet, name: web-7d9f, uid: u2, controller: true}}]}}\nspec:\n  containers: [{{name: c}}]\n  nodeName: node-1
---
apiVersion: v1\nkind: Pod\nmetadata: {{name: done}}\nspec:\n  containers: [{{name: c}}]\nstatus: {{phase: Succeeded}}
---
apiVersion: v1\nkind: Pod\nmetadata: {{name: gated}}\nspec:\n  schedulingGates: [{{name: example.com/quota}}]\n  containers: [{{name: c}}]
"
        ));
        assert_eq!(names(&ingested), ["default/web-7d9f-abcde"]);
        assert_eq!(
            ingested.snapshot.pending[0].owner.as_deref(),
            Some("Deployment/default/web")
        );
        let notes = ingested.notes.join("\n");
        assert!(
            notes.contains("Deployment/default/web: its pods are given as Pod objects"),
            "{notes}"
        );
        assert!(notes.contains("skipped 1 finished pod(s)"), "{notes}");
        assert!(
            notes.contains("Pod/default/gated: has scheduling gates"),
            "{notes}"
        );
        assert!(
            notes.contains("1 pod(s) bound to node node-1, which is not given, are ignored"),
            "{notes}"
        );
    }

    #[test]
    fn same_names_from_different_kinds_stay_distinct() {
        let ingested = ingest(&format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: web}}\nspec:\n    selector: {{matchLabels: {{app: web}}}}\n{TEMPLATE}\n---\napiVersion: apps/v1\nkind: StatefulSet\nmetadata: {{name: web}}\nspec:\n    selector: {{matchLabels: {{app: web}}}}\n{TEMPLATE}\n"
        ));
        assert_eq!(
            names(&ingested),
            ["default/web-0", "default/web-0-statefulset"]
        );
    }

    #[test]
    fn missing_template_spec_is_named() {
        let e = ingest_err(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  selector: {matchLabels: {app: web}}\n  template: {metadata: {labels: {app: web}}}\n",
        );
        assert_eq!(
            e.to_string(),
            "Deployment/default/web: spec.template.spec: missing"
        );
    }
}
