//! What [`crate::snapshot`] reads: manifests (JSON, e.g. parsed from YAML, of any kind) and
//! Pods typed as a client read them. A typed Pod is read as the manifest of the same object
//! would be, without going through JSON: the controller reads the pods that changed this way.

use k8s_openapi::api::core::v1::Pod as KubePod;
use serde_json::Value;

/// One object to read.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// A manifest of any kind, read field by field (a malformed field is an error naming it).
    Manifest(&'a Value),
    /// A Pod already typed (from a client's cache): read as its manifest would be.
    Pod(&'a KubePod),
    /// A Pod read as one to place whether it runs or not: its `spec.nodeName` and status are
    /// not read (so it is pending, never a node's load, never finished). `bound` says it runs
    /// on a node: a bound pod that consumes a ProvisioningRequest still counts as consuming it
    /// ([`crate::provisioning_request::CONSUMING_BOUND_ANNOTATION`]). This is how the controller
    /// hands over every pod it tracks, without copying it first.
    Unplaced {
        /// The pod.
        pod: &'a KubePod,
        /// Whether it is bound to a node.
        bound: bool,
    },
}

impl<'a> From<&'a Value> for Input<'a> {
    fn from(value: &'a Value) -> Self {
        Input::Manifest(value)
    }
}

impl<'a> From<&'a KubePod> for Input<'a> {
    fn from(pod: &'a KubePod) -> Self {
        Input::Pod(pod)
    }
}

impl<'a> Input<'a> {
    /// The manifest, when this is one.
    pub fn manifest(self) -> Option<&'a Value> {
        match self {
            Input::Manifest(value) => Some(value),
            Input::Pod(_) | Input::Unplaced { .. } => None,
        }
    }

    /// Whether this is the object [`crate::ClusterError`] names `id` (`Kind/namespace/name`,
    /// or `Kind/name` for a cluster-scoped kind or one given without a namespace).
    pub fn is(&self, id: &str) -> bool {
        let (kind, namespace, name) = match self {
            Input::Manifest(v) => (
                v["kind"].as_str().unwrap_or_default(),
                v["metadata"]["namespace"].as_str(),
                v["metadata"]["name"].as_str().unwrap_or_default(),
            ),
            Input::Pod(p) | Input::Unplaced { pod: p, .. } => (
                "Pod",
                p.metadata.namespace.as_deref(),
                p.metadata.name.as_deref().unwrap_or_default(),
            ),
        };
        match namespace {
            Some(ns) => id == format!("{kind}/{ns}/{name}") || id == format!("{kind}/{name}"),
            None => id == format!("{kind}/{name}") || id == format!("{kind}/default/{name}"),
        }
    }
}

/// Anything [`crate::snapshot`] reads as an [`Input`]: a manifest (`Value`) or an `Input`.
pub trait AsInput {
    /// This object as an input.
    fn as_input(&self) -> Input<'_>;
}

impl AsInput for Value {
    fn as_input(&self) -> Input<'_> {
        Input::Manifest(self)
    }
}

impl AsInput for Input<'_> {
    fn as_input(&self) -> Input<'_> {
        *self
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Pod as KubePod;
    use serde_json::Value;

    use crate::testing::objects;
    use crate::{ClusterError, Ingested, Input, SnapshotOptions, snapshot};

    /// Pods that exercise what a pod's reading looks at: containers, init containers and
    /// sidecars, overhead, pod-level resources, extended resources, host ports, node selectors,
    /// affinities, tolerations, spreads, priority, owners and gang annotations.
    const PODS: &str = "
apiVersion: v1
kind: Pod
metadata: {name: plain, namespace: ns}
spec: {containers: [{name: c, resources: {requests: {cpu: 250m, memory: 1Gi}}}]}
---
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  namespace: ml
  labels: {app: trainer}
  annotations: {karpenter.sh/do-not-disrupt: 'true'}
  ownerReferences: [{apiVersion: batch/v1, kind: Job, name: train, uid: u1, controller: true}]
spec:
  priorityClassName: high
  priority: 1000
  nodeSelector: {karpenter.sh/capacity-type: spot}
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  overhead: {cpu: 100m}
  initContainers:
  - {name: fetch, resources: {requests: {cpu: '4', memory: 2Gi}}}
  - {name: proxy, restartPolicy: Always, resources: {requests: {cpu: 500m}}}
  containers:
  - name: main
    resources:
      requests: {cpu: '8', memory: 32Gi, nvidia.com/gpu: '2'}
      limits: {nvidia.com/gpu: '2'}
    ports: [{containerPort: 8080, hostPort: 8080}]
  affinity:
    nodeAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
        nodeSelectorTerms:
        - matchExpressions: [{key: node.kubernetes.io/instance-type, operator: In, values: [p4d.24xlarge, p5.48xlarge]}]
      preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 50
        preference: {matchExpressions: [{key: topology.kubernetes.io/zone, operator: In, values: [us-east-1a]}]}
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {app: trainer}}
        topologyKey: kubernetes.io/hostname
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app: trainer}}}
---
apiVersion: v1
kind: Pod
metadata: {name: pod-level}
spec:
  resources: {requests: {cpu: '2', memory: 4Gi}}
  containers: [{name: a}, {name: b}]
";

    fn typed(manifests: &[Value]) -> Vec<KubePod> {
        manifests
            .iter()
            .map(|v| serde_json::from_value(v.clone()).expect("a pod"))
            .collect()
    }

    fn read_typed(pods: &[KubePod]) -> Result<Ingested, ClusterError> {
        let inputs: Vec<Input<'_>> = pods.iter().map(Input::from).collect();
        snapshot(&inputs, SnapshotOptions::default())
    }

    #[test]
    fn a_typed_pod_reads_as_its_manifest() {
        let manifests = objects(PODS);
        let from_manifests = snapshot(&manifests, SnapshotOptions::default()).unwrap();
        let from_typed = read_typed(&typed(&manifests)).unwrap();
        assert_eq!(from_manifests.snapshot.pending.len(), 3);
        assert_eq!(
            format!("{:?}", from_typed.snapshot),
            format!("{:?}", from_manifests.snapshot)
        );
        assert_eq!(from_typed.notes, from_manifests.notes);
    }

    #[test]
    fn typed_and_manifest_pods_mix_and_a_pod_given_twice_is_an_error() {
        let manifests = objects(PODS);
        let pods = typed(&manifests);
        let mut inputs: Vec<Input<'_>> = manifests[..2].iter().map(Input::from).collect();
        inputs.push(Input::Pod(&pods[2]));
        let mixed = snapshot(&inputs, SnapshotOptions::default()).unwrap();
        assert_eq!(mixed.snapshot.pending.len(), 3);
        inputs.push(Input::Pod(&pods[0]));
        assert_eq!(
            snapshot(&inputs, SnapshotOptions::default())
                .unwrap_err()
                .to_string(),
            "Pod/ns/plain: metadata.name: given twice"
        );
    }

    #[test]
    fn a_typed_pod_fails_as_its_manifest_does() {
        for yaml in [
            "apiVersion: v1\nkind: Pod\nmetadata: {namespace: ns}\nspec: {containers: [{name: c}]}\n",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: {nvidia.com/gpu: '1.5'}}}]}\n",
        ] {
            let manifests = objects(yaml);
            let expected = snapshot(&manifests, SnapshotOptions::default())
                .unwrap_err()
                .to_string();
            let got = read_typed(&typed(&manifests)).unwrap_err().to_string();
            assert_eq!(got, expected, "{yaml}");
        }
    }

    #[test]
    fn an_input_knows_the_object_an_error_names() {
        let manifests = objects(PODS);
        let pods = typed(&manifests);
        assert!(Input::Pod(&pods[0]).is("Pod/ns/plain"));
        assert!(Input::Pod(&pods[2]).is("Pod/default/pod-level"));
        assert!(Input::Manifest(&manifests[2]).is("Pod/default/pod-level"));
        assert!(!Input::Pod(&pods[1]).is("Pod/ns/trainer"));
    }

    #[test]
    fn an_unplaced_pod_is_pending_whatever_its_node_and_status_say() {
        let manifests = objects(PODS);
        let mut pod = typed(&manifests).remove(0);
        let pending = read_typed(std::slice::from_ref(&pod)).unwrap().snapshot;
        pod.spec.as_mut().unwrap().node_name = Some("n1".into());
        pod.status = Some(k8s_openapi::api::core::v1::PodStatus {
            phase: Some("Succeeded".into()),
            ..Default::default()
        });
        let as_manifest = read_typed(std::slice::from_ref(&pod)).unwrap().snapshot;
        assert!(as_manifest.pending.is_empty());
        for bound in [false, true] {
            let unplaced = snapshot(
                &[Input::Unplaced { pod: &pod, bound }],
                SnapshotOptions::default(),
            )
            .unwrap()
            .snapshot;
            assert_eq!(
                format!("{:?}", unplaced.pending),
                format!("{:?}", pending.pending)
            );
        }
    }
}
