//! Nodes and NodeClaims as the solver's [`ExistingNode`]s, with what they count against their
//! NodePool's limits.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus, Taint as K8sTaint};
use quartermaster_policies::NodeClaim;
use quartermaster_policies::labels::{
    LABEL_CAPACITY_TYPE, LABEL_INSTANCE_TYPE, LABEL_NODEPOOL, LABEL_ZONE,
};
use quartermaster_solver::ExistingNode;
use quartermaster_solver::pod::{Taint, TaintEffect};
use quartermaster_solver::resources::ResourceTable;

use crate::error::ClusterError;
use crate::objects::Object;
use crate::quantities::{self, Amounts};

/// The taint Kubernetes puts on a cordoned node (`spec.unschedulable: true`).
pub(crate) const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";

/// A node (or in-flight claim) before its pods are attached.
#[derive(Debug, Clone)]
pub(crate) struct NodeInfo {
    /// The solver's node, without pods.
    pub node: ExistingNode,
    /// Capacity, counted against the pool's resource limits.
    pub capacity: Amounts,
    /// Allocatable, by name (slots are assigned once every pod is read).
    pub allocatable: Amounts,
    /// Price in dollars per hour when the object says it (NodeClaim status).
    pub price: Option<f64>,
}

/// Converts Kubernetes taints, naming `field[i].effect` on an unknown effect.
pub(crate) fn taints(
    list: &[K8sTaint],
    object: &str,
    field: &str,
) -> Result<Vec<Taint>, ClusterError> {
    list.iter()
        .enumerate()
        .map(|(i, t)| {
            let effect = TaintEffect::parse(&t.effect).ok_or_else(|| {
                ClusterError::invalid(
                    object,
                    format!("{field}[{i}].effect"),
                    format!(
                        "unknown effect {:?}: expected NoSchedule, PreferNoSchedule or NoExecute",
                        t.effect
                    ),
                )
            })?;
            if t.key.is_empty() {
                return Err(ClusterError::invalid(
                    object,
                    format!("{field}[{i}].key"),
                    "must not be empty",
                ));
            }
            Ok(Taint {
                key: t.key.clone(),
                value: t.value.clone().unwrap_or_default(),
                effect,
            })
        })
        .collect()
}

/// A Node. Cordoned nodes get the `node.kubernetes.io/unschedulable:NoSchedule` taint the node
/// controller would add; allocatable falls back to capacity when the status has none.
pub(crate) fn from_node(
    node: &Object<NodeSpec, Option<NodeStatus>>,
    notes: &mut Vec<String>,
) -> Result<NodeInfo, ClusterError> {
    let labels = node.labels();
    let mut taints = taints(
        node.spec.taints.as_deref().unwrap_or_default(),
        &node.id,
        "spec.taints",
    )?;
    if node.spec.unschedulable == Some(true) && !taints.iter().any(|t| t.key == UNSCHEDULABLE_TAINT)
    {
        taints.push(Taint {
            key: UNSCHEDULABLE_TAINT.to_owned(),
            value: String::new(),
            effect: TaintEffect::NoSchedule,
        });
    }
    let status = node.status.as_ref();
    let allocatable = quantities::amounts(
        status.and_then(|s| s.allocatable.as_ref()),
        &node.id,
        "status.allocatable",
    )?;
    let capacity = quantities::amounts(
        status.and_then(|s| s.capacity.as_ref()),
        &node.id,
        "status.capacity",
    )?;
    let (allocatable, capacity) = match (allocatable.is_empty(), capacity.is_empty()) {
        (false, false) => (allocatable, capacity),
        (false, true) => (allocatable.clone(), allocatable),
        (true, false) => (capacity.clone(), capacity),
        (true, true) => {
            notes.push(format!(
                "{}: no status.allocatable or status.capacity; no pods can be placed on it",
                node.id
            ));
            (Amounts::new(), Amounts::new())
        }
    };
    Ok(NodeInfo {
        node: ExistingNode {
            name: node.name.clone(),
            in_flight: false,
            node_pool: labels.get(LABEL_NODEPOOL).cloned(),
            labels: labels.into(),
            taints,
            allocatable: Default::default(),
            pods: Vec::new(),
        },
        capacity,
        allocatable,
        price: None,
    })
}

/// A NodeClaim that has not registered a Node yet (`status.nodeName` empty): capacity in flight.
/// Its labels are its own plus those its requirements pin to one value and what its status says
/// was launched; startup taints are left out (they go away before pods need the node).
pub(crate) fn from_claim(
    id: &str,
    claim: &NodeClaim,
    notes: &mut Vec<String>,
) -> Result<NodeInfo, ClusterError> {
    let name = claim.metadata.name.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = claim
        .requirements()
        .map_err(|e| ClusterError::invalid(id, "spec.requirements", e.to_string()))?
        .single_valued_labels();
    labels.extend(claim.metadata.labels.clone().unwrap_or_default());
    let status = claim.status.clone().unwrap_or_default();
    for (key, value) in [
        (LABEL_INSTANCE_TYPE, &status.instance_type),
        (LABEL_ZONE, &status.zone),
        (LABEL_CAPACITY_TYPE, &status.capacity_type),
    ] {
        if let Some(v) = value.as_ref().filter(|v| !v.is_empty()) {
            labels.insert(key.to_owned(), v.clone());
        }
    }
    let taints = taints(&claim.spec.taints, id, "spec.taints")?;
    let allocatable = quantities::amounts(Some(&status.allocatable), id, "status.allocatable")?;
    let mut capacity = quantities::amounts(Some(&status.capacity), id, "status.capacity")?;
    if capacity.is_empty() {
        capacity = allocatable.clone();
    }
    if capacity.is_empty()
        && let Some(r) = &claim.spec.resources
    {
        capacity = quantities::amounts(Some(&r.requests), id, "spec.resources.requests")?;
    }
    if allocatable.is_empty() {
        notes.push(format!(
            "{id}: not launched yet (no status.allocatable); no pods are planned onto it"
        ));
    }
    Ok(NodeInfo {
        node: ExistingNode {
            name,
            in_flight: true,
            node_pool: labels.get(LABEL_NODEPOOL).cloned(),
            labels: labels.into(),
            taints,
            allocatable: Default::default(),
            pods: Vec::new(),
        },
        capacity,
        allocatable,
        price: status.price_per_hour,
    })
}

/// Assigns slots to a node's allocatable once every pod has registered its resources.
pub(crate) fn finish(info: &mut NodeInfo, table: &ResourceTable) {
    info.node.allocatable = quantities::to_resources_known(&info.allocatable, table);
}

#[cfg(test)]
mod tests {
    use quartermaster_solver::pod::TaintEffect;
    use quartermaster_solver::resources::{CPU, MEMORY, PODS};

    use crate::testing::{ingest, ingest_err, pod};

    const NODE: &str = "apiVersion: v1
kind: Node
metadata:
  name: ip-10-0-0-1
  labels:
    quartermaster.dev/nodepool: aws-gpu
    node.kubernetes.io/instance-type: g5.xlarge
    topology.kubernetes.io/zone: us-east-1a
    kubernetes.io/hostname: ip-10-0-0-1
spec:
  taints: [{key: nvidia.com/gpu, value: 'true', effect: NoSchedule}]
status:
  capacity: {cpu: '4', memory: 16Gi, nvidia.com/gpu: '1', pods: '58', hugepages-1Gi: '0'}
  allocatable: {cpu: 3920m, memory: 15Gi, nvidia.com/gpu: '1', pods: '58'}
";

    #[test]
    fn node_with_labels_taints_allocatable_and_bound_pods() {
        let yaml = format!(
            "{NODE}{}{}",
            pod(
                "bound",
                "nodeName: ip-10-0-0-1\ncontainers: [{name: a, resources: {requests: {cpu: '1'}}}]"
            ),
            pod("pending", "containers: [{name: a}]")
        );
        let s = ingest(&yaml).snapshot;
        assert_eq!(s.nodes.len(), 1);
        let n = &s.nodes[0];
        assert_eq!(n.name, "ip-10-0-0-1");
        assert!(!n.in_flight);
        assert_eq!(n.node_pool.as_deref(), Some("aws-gpu"));
        assert_eq!(n.labels["topology.kubernetes.io/zone"], "us-east-1a");
        assert_eq!(n.taints.len(), 1);
        assert_eq!(n.taints[0].effect, TaintEffect::NoSchedule);
        assert_eq!(n.allocatable.get(CPU), 3920);
        assert_eq!(n.allocatable.get(MEMORY), 15 << 30);
        assert_eq!(n.allocatable.get(4), 1);
        assert_eq!(n.allocatable.get(PODS), 58);
        assert_eq!(
            s.resources.slot("hugepages-1Gi"),
            None,
            "capacity no pod asks for takes no slot"
        );
        assert_eq!(n.pods.len(), 1);
        assert_eq!(n.pods[0].id.to_string(), "ns/bound");
        assert_eq!(s.pending.len(), 1);
    }

    #[test]
    fn cordoned_node_gets_the_unschedulable_taint() {
        let s = ingest("apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec: {unschedulable: true}\nstatus: {allocatable: {cpu: '2'}}\n").snapshot;
        assert_eq!(
            s.nodes[0].taints[0].to_string(),
            "node.kubernetes.io/unschedulable:NoSchedule"
        );
        let e = ingest_err(
            "apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec: {taints: [{key: a, effect: Sometimes}]}\n",
        );
        assert!(
            e.to_string()
                .starts_with("Node/n: spec.taints[0].effect: unknown effect"),
            "{e}"
        );
    }

    #[test]
    fn launching_node_claim_is_in_flight_capacity() {
        let s = ingest(
            "apiVersion: quartermaster.dev/v1
kind: NodeClaim
metadata:
  name: aws-gpu-x7k2p
  labels: {quartermaster.dev/nodepool: aws-gpu}
spec:
  nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: gpu}
  requirements:
  - {key: node.kubernetes.io/instance-type, operator: In, values: [g5.2xlarge]}
  taints: [{key: nvidia.com/gpu, value: 'true', effect: NoSchedule}]
  startupTaints: [{key: node.quartermaster.dev/gpu-initializing, effect: NoSchedule}]
status:
  zone: us-east-1b
  capacityType: spot
  pricePerHour: 0.5
  allocatable: {cpu: 7910m, memory: 29Gi, nvidia.com/gpu: '1', pods: '58'}
",
        )
        .snapshot;
        let n = &s.nodes[0];
        assert!(n.in_flight);
        assert_eq!(n.name, "aws-gpu-x7k2p");
        assert_eq!(n.node_pool.as_deref(), Some("aws-gpu"));
        assert_eq!(n.labels["node.kubernetes.io/instance-type"], "g5.2xlarge");
        assert_eq!(n.labels["topology.kubernetes.io/zone"], "us-east-1b");
        assert_eq!(n.labels["quartermaster.dev/capacity-type"], "spot");
        assert_eq!(n.taints.len(), 1, "startup taints are left out");
        assert_eq!(n.allocatable.get(CPU), 7910);
    }

    #[test]
    fn registered_node_claim_defers_to_its_node() {
        let claim = "apiVersion: quartermaster.dev/v1
kind: NodeClaim
metadata: {name: c1}
spec:
  nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: gpu}
status:
  nodeName: ip-10-0-0-1
  allocatable: {cpu: '4'}
";
        let s = ingest(&format!("{NODE}---\n{claim}")).snapshot;
        assert_eq!(s.nodes.len(), 1);
        assert_eq!(s.nodes[0].name, "ip-10-0-0-1");
        assert_eq!(
            s.nodes[0].allocatable.get(CPU),
            3920,
            "the Node, not the claim"
        );
        // Without its Node the claim stands in for it, registered.
        let s = ingest(claim).snapshot;
        assert_eq!(s.nodes[0].name, "ip-10-0-0-1");
        assert!(!s.nodes[0].in_flight);
    }
}
