//! A Kubernetes pod spec as the solver's [`Pod`]: effective requests and constraints.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, ResourceRequirements};
use quartermaster_solver::pod::HostPort;
use quartermaster_solver::resources::ResourceTable;
use quartermaster_solver::{Pod, PodRef};

use crate::error::ClusterError;
use crate::quantities::{self, Amounts};
use crate::selectors::{self, At};

/// A pod spec with the identity it is planned under.
#[derive(Debug, Clone)]
pub(crate) struct PodSource<'a> {
    /// `namespace/name`.
    pub id: PodRef,
    /// Pod labels.
    pub labels: BTreeMap<String, String>,
    /// The spec.
    pub spec: &'a PodSpec,
    /// `Kind/namespace/name` of the controlling workload.
    pub owner: Option<String>,
    /// Where the spec sits, for messages.
    pub at: At<'a>,
}

/// One container's requests, each resource defaulting to its limit when only the limit is set
/// (what the API server does on admission), after the API server's checks
/// ([`quantities::check_requirements`]).
fn container_requests(
    resources: Option<&ResourceRequirements>,
    at: At<'_>,
    path: &str,
) -> Result<Amounts, ClusterError> {
    let Some(resources) = resources else {
        return Ok(Amounts::new());
    };
    quantities::check_requirements(
        resources.requests.as_ref(),
        resources.limits.as_ref(),
        at.object,
        &at.field(path),
    )?;
    let mut requests = quantities::amounts(
        resources.requests.as_ref(),
        at.object,
        &at.field(format!("{path}.requests")),
    )?;
    let limits = quantities::amounts(
        resources.limits.as_ref(),
        at.object,
        &at.field(format!("{path}.limits")),
    )?;
    for (name, limit) in limits {
        requests.entry(name).or_insert(limit);
    }
    Ok(requests)
}

fn is_sidecar(container: &Container) -> bool {
    container.restart_policy.as_deref() == Some("Always")
}

/// What the scheduler reserves for a pod, per resource (Kubernetes' `PodRequests`):
///
/// * regular containers run together: their requests add up, and so do those of the restartable
///   (sidecar, `restartPolicy: Always`) init containers, which keep running beside them;
/// * a regular init container runs alone, next to the sidecars started before it: it needs its
///   own request plus theirs;
/// * the pod needs the maximum of those phases, then `spec.overhead` on top.
///
/// Pod-level `spec.resources` (where set, per resource) replace the containers' aggregate.
pub(crate) fn effective_requests(spec: &PodSpec, at: At<'_>) -> Result<Amounts, ClusterError> {
    let mut running = Amounts::new();
    for (i, c) in spec.containers.iter().enumerate() {
        quantities::add(
            &mut running,
            &container_requests(
                c.resources.as_ref(),
                at,
                &format!("containers[{i}].resources"),
            )?,
        );
    }
    let mut sidecars = Amounts::new();
    let mut init_peak = Amounts::new();
    for (i, c) in spec.init_containers.iter().flatten().enumerate() {
        let own = container_requests(
            c.resources.as_ref(),
            at,
            &format!("initContainers[{i}].resources"),
        )?;
        if is_sidecar(c) {
            quantities::add(&mut running, &own);
            quantities::add(&mut sidecars, &own);
            quantities::max(&mut init_peak, &sidecars);
        } else {
            let mut phase = own;
            quantities::add(&mut phase, &sidecars);
            quantities::max(&mut init_peak, &phase);
        }
    }
    quantities::max(&mut running, &init_peak);
    if let Some(pod_level) = &spec.resources {
        for (name, amount) in container_requests(Some(pod_level), at, "resources")? {
            running.insert(name, amount);
        }
    }
    let overhead = quantities::amounts(spec.overhead.as_ref(), at.object, &at.field("overhead"))?;
    quantities::add(&mut running, &overhead);
    running.remove("pods");
    Ok(running)
}

/// Host ports bound by the containers and sidecars. With `hostNetwork` every container port is a
/// host port (the API server defaults `hostPort` to `containerPort`).
pub(crate) fn host_ports(spec: &PodSpec, at: At<'_>) -> Result<Vec<HostPort>, ClusterError> {
    let host_network = spec.host_network.unwrap_or(false);
    let containers = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("containers[{i}]"), c))
        .chain(
            spec.init_containers
                .iter()
                .flatten()
                .enumerate()
                .filter(|(_, c)| is_sidecar(c))
                .map(|(i, c)| (format!("initContainers[{i}]"), c)),
        );
    let mut out: Vec<HostPort> = Vec::new();
    for (path, c) in containers {
        for (j, p) in c.ports.iter().flatten().enumerate() {
            let port = match p.host_port {
                Some(port) if port != 0 => port,
                _ if host_network => p.container_port,
                _ => continue,
            };
            let port = u16::try_from(port)
                .ok()
                .filter(|p| *p != 0)
                .ok_or_else(|| {
                    at.err(
                        format!("{path}.ports[{j}].hostPort"),
                        format!("{port} is not a port number"),
                    )
                })?;
            let host_port = HostPort {
                port,
                protocol: p
                    .protocol
                    .clone()
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "TCP".to_owned()),
                host_ip: p
                    .host_ip
                    .clone()
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| "0.0.0.0".to_owned()),
            };
            if !out.contains(&host_port) {
                out.push(host_port);
            }
        }
    }
    Ok(out)
}

/// Converts a pod spec, registering any new extended resource in `table`.
pub(crate) fn solver_pod(
    source: &PodSource<'_>,
    table: &mut ResourceTable,
    notes: &mut Vec<String>,
) -> Result<Pod, ClusterError> {
    let spec = source.spec;
    let at = source.at;
    let amounts = effective_requests(spec, at)?;
    let requests = quantities::to_resources_registering(
        &amounts,
        table,
        at.object,
        &at.field("containers[*].resources.requests"),
    )? + quantities::one_pod_slot();
    let (affinity, anti_affinity) =
        selectors::pod_affinity(spec.affinity.as_ref(), &source.labels, at, notes)?;
    Ok(Pod {
        id: source.id.clone(),
        labels: source.labels.clone(),
        requests,
        node_terms: selectors::node_terms(spec, at, notes)?,
        preferred_node_terms: selectors::preferred_node_terms(spec, at, notes)?,
        tolerations: selectors::tolerations(
            spec.tolerations.as_deref().unwrap_or_default(),
            at,
            "tolerations",
        )?,
        topology_spread: selectors::topology_spread(
            spec.topology_spread_constraints
                .as_deref()
                .unwrap_or_default(),
            &source.labels,
            at,
            notes,
        )?,
        affinity,
        anti_affinity,
        host_ports: host_ports(spec, at)?,
        owner: source.owner.clone(),
        gang: None,
        devices: None,
    })
}

#[cfg(test)]
mod tests {
    use quartermaster_solver::resources::{CPU, EPHEMERAL_STORAGE, MEMORY, PODS};

    use crate::testing::{ingest, ingest_err, pod};

    const GI: i64 = 1 << 30;

    fn requests(spec: &str) -> quartermaster_solver::Resources {
        let snapshot = ingest(&pod("p", spec)).snapshot;
        assert_eq!(snapshot.pending.len(), 1);
        snapshot.pending[0].requests
    }

    #[test]
    fn containers_add_up_and_take_one_pod_slot() {
        let r = requests(
            "containers:\n- {name: a, resources: {requests: {cpu: 500m, memory: 1Gi}}}\n- {name: b, resources: {requests: {cpu: '2', memory: 512Mi, ephemeral-storage: 1G}}}",
        );
        assert_eq!(r.get(CPU), 2500);
        assert_eq!(r.get(MEMORY), GI + GI / 2);
        assert_eq!(r.get(EPHEMERAL_STORAGE), 1_000_000_000);
        assert_eq!(r.get(PODS), 1);
    }

    #[test]
    fn init_containers_count_by_their_maximum_not_their_sum() {
        // Init containers run one at a time before the app: the pod needs the biggest of them
        // (4 cpu) or the app (1 cpu), per resource, not 4 + 3 + 1.
        let r = requests(
            "initContainers:\n- {name: i1, resources: {requests: {cpu: '4', memory: 1Gi}}}\n- {name: i2, resources: {requests: {cpu: '3', memory: 6Gi}}}\ncontainers:\n- {name: app, resources: {requests: {cpu: '1', memory: 2Gi}}}",
        );
        assert_eq!(r.get(CPU), 4000);
        assert_eq!(r.get(MEMORY), 6 * GI);
    }

    #[test]
    fn sidecars_run_beside_the_app_and_later_init_containers() {
        // A sidecar (restartPolicy: Always) keeps running: it adds to the app's requests and to
        // every init container started after it.
        let r = requests(
            "initContainers:\n- {name: proxy, restartPolicy: Always, resources: {requests: {cpu: 500m, memory: 256Mi}}}\n- {name: migrate, resources: {requests: {cpu: '3', memory: 128Mi}}}\ncontainers:\n- {name: app, resources: {requests: {cpu: '1', memory: 1Gi}}}",
        );
        // max(app 1 + proxy 0.5, migrate 3 + proxy 0.5) = 3.5 cpu; memory max(1Gi + 256Mi, 128Mi + 256Mi).
        assert_eq!(r.get(CPU), 3500);
        assert_eq!(r.get(MEMORY), GI + 256 * (1 << 20));
        // An init container that ran before the sidecar started does not see it.
        let r = requests(
            "initContainers:\n- {name: first, resources: {requests: {cpu: '2'}}}\n- {name: proxy, restartPolicy: Always, resources: {requests: {cpu: '1'}}}\ncontainers:\n- {name: app, resources: {requests: {cpu: '1'}}}",
        );
        assert_eq!(r.get(CPU), 2000);
    }

    #[test]
    fn overhead_is_added_on_top() {
        let r = requests(
            "overhead: {cpu: 250m, memory: 120Mi}\ninitContainers:\n- {name: i, resources: {requests: {cpu: '2'}}}\ncontainers:\n- {name: app, resources: {requests: {cpu: '1', memory: 1Gi}}}",
        );
        assert_eq!(r.get(CPU), 2250);
        assert_eq!(r.get(MEMORY), GI + 120 * (1 << 20));
    }

    #[test]
    fn limits_stand_in_for_missing_requests() {
        let r = requests(
            "containers:\n- name: app\n  resources:\n    requests: {cpu: '1'}\n    limits: {cpu: '4', memory: 8Gi, nvidia.com/gpu: 2}",
        );
        assert_eq!(r.get(CPU), 1000, "an explicit request wins over the limit");
        assert_eq!(r.get(MEMORY), 8 * GI);
        assert_eq!(r.get(4), 2, "nvidia.com/gpu");
    }

    #[test]
    fn pod_level_resources_replace_the_container_sum() {
        let r = requests(
            "resources: {requests: {cpu: '3'}}\ncontainers:\n- {name: a, resources: {requests: {cpu: '1', memory: 1Gi}}}\n- {name: b, resources: {requests: {cpu: '1'}}}",
        );
        assert_eq!(r.get(CPU), 3000);
        assert_eq!(r.get(MEMORY), GI);
    }

    #[test]
    fn extended_resources_take_spare_slots() {
        let snapshot = ingest(&pod(
            "p",
            "containers:\n- {name: a, resources: {limits: {example.com/fpga: 2, vpc.amazonaws.com/efa: 4, habana.ai/gaudi: 8}}}",
        ))
        .snapshot;
        let slot = snapshot
            .resources
            .slot("example.com/fpga")
            .expect("registered");
        let r = snapshot.pending[0].requests;
        assert_eq!(r.get(slot), 2);
        assert_eq!(
            r.get(snapshot.resources.slot("vpc.amazonaws.com/efa").unwrap()),
            4
        );
        assert_eq!(
            r.get(snapshot.resources.slot("habana.ai/gaudi").unwrap()),
            8
        );
    }

    #[test]
    fn too_many_extended_resources_is_an_error() {
        let limits: Vec<String> = (0..10).map(|i| format!("example.com/r{i}: 1")).collect();
        let e = ingest_err(&pod(
            "p",
            &format!(
                "containers:\n- {{name: a, resources: {{limits: {{{}}}}}}}",
                limits.join(", ")
            ),
        ));
        let text = e.to_string();
        assert!(
            text.starts_with("Pod/ns/p: spec.containers[*].resources.requests.example.com/r"),
            "{text}"
        );
        assert!(text.contains("at most 16 distinct resources"), "{text}");
    }

    #[test]
    fn extended_resources_must_be_whole_numbers_as_the_api_server_says() {
        // Kubernetes rejects these on admission; so do we, with its words.
        for (given, shown) in [("0.5", "500m"), ("500m", "500m"), ("1.5", "1500m")] {
            let e = ingest_err(&pod(
                "p",
                &format!(
                    "containers:\n- {{name: a, resources: {{limits: {{nvidia.com/gpu: '{given}'}}}}}}"
                ),
            ));
            assert_eq!(
                e.to_string(),
                format!(
                    "Pod/ns/p: spec.containers[0].resources.limits.nvidia.com/gpu: Invalid value: \"{shown}\": must be an integer"
                )
            );
        }
        // Native resources may be fractions; `1000m` of a GPU is one.
        let r = requests(
            "containers:\n- {name: a, resources: {requests: {cpu: 500m}, limits: {nvidia.com/gpu: 1000m}}}",
        );
        assert_eq!(r.get(4), 1);
    }

    #[test]
    fn extended_requests_must_equal_limits_as_the_api_server_says() {
        let e = ingest_err(&pod(
            "p",
            "containers:\n- {name: a, resources: {requests: {nvidia.com/gpu: 2}, limits: {nvidia.com/gpu: 1}}}",
        ));
        assert_eq!(
            e.to_string(),
            "Pod/ns/p: spec.containers[0].resources.requests: Invalid value: \"2\": must be equal to nvidia.com/gpu limit of 1"
        );
        let e = ingest_err(&pod(
            "p",
            "initContainers:\n- {name: i, resources: {requests: {example.com/fpga: 1}}}\ncontainers:\n- {name: a}",
        ));
        assert_eq!(
            e.to_string(),
            "Pod/ns/p: spec.initContainers[0].resources.limits: Required value: Limit must be set for non overcommitable resources"
        );
        // cpu and memory may be overcommitted; requests equal to limits pass.
        let r = requests(
            "containers:\n- {name: a, resources: {requests: {cpu: '1', nvidia.com/gpu: 2}, limits: {cpu: '4', nvidia.com/gpu: 2}}}",
        );
        assert_eq!(r.get(4), 2);
    }

    #[test]
    fn bad_quantity_names_the_container_field() {
        let e = ingest_err(&pod(
            "p",
            "containers:\n- {name: a, resources: {requests: {memory: 1GiB}}}",
        ));
        assert!(
            e.to_string().starts_with(
                "Pod/ns/p: spec.containers[0].resources.requests.memory: invalid quantity"
            ),
            "{e}"
        );
    }

    #[test]
    fn host_ports_from_containers_sidecars_and_host_network() {
        let snapshot = ingest(&pod(
            "p",
            "initContainers:\n- {name: side, restartPolicy: Always, ports: [{containerPort: 15000, hostPort: 15000}]}\n- {name: init, ports: [{containerPort: 1, hostPort: 1}]}\ncontainers:\n- name: a\n  ports:\n  - {containerPort: 9100, hostPort: 9100}\n  - {containerPort: 53, hostPort: 53, protocol: UDP, hostIP: 10.0.0.1}\n  - {containerPort: 8080}",
        ))
        .snapshot;
        let ports: Vec<(u16, &str, &str)> = snapshot.pending[0]
            .host_ports
            .iter()
            .map(|p| (p.port, p.protocol.as_str(), p.host_ip.as_str()))
            .collect();
        assert_eq!(
            ports,
            [
                (9100, "TCP", "0.0.0.0"),
                (53, "UDP", "10.0.0.1"),
                (15000, "TCP", "0.0.0.0")
            ]
        );
        let snapshot = ingest(&pod(
            "p",
            "hostNetwork: true\ncontainers:\n- {name: a, ports: [{containerPort: 8080}]}",
        ))
        .snapshot;
        assert_eq!(snapshot.pending[0].host_ports[0].port, 8080);
    }
}
