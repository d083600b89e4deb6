//! Kubernetes objects → the solver's [`ClusterSnapshot`].
//!
//! [`snapshot`] reads Pods, Deployments, ReplicaSets, StatefulSets, Jobs, DaemonSets,
//! Nodes, NodeClaims, NodePools and NodeClasses (as JSON values, e.g. parsed from YAML), and the
//! GPU controllers' workload custom resources (Kubeflow jobs, LeaderWorkerSet, KubeRay, KServe,
//! JobSet, Volcano Job; recognised by API group and kind), and resolves them into what the
//! solver plans from: pending pods with effective requests and constraints, existing nodes with
//! their bound pods, NodePools with limits and usage, DaemonSet overhead. Other kinds are skipped
//! with a note.
//!
//! Pure: no client, no async, no clock. `quartermaster plan` feeds it from files; the controller
//! feeds it its reflectors' objects.

pub mod admission;
pub mod capacity_buffer;
mod dra;
mod error;
mod ingest;
mod input;
mod node;
mod nodepool;
mod objects;
mod overlay;
mod pod;
pub mod provisioning_request;
mod quantities;
mod selectors;
mod workloads;

#[cfg(test)]
mod testing;

use std::collections::BTreeMap;

use quartermaster_solver::{ClusterSnapshot, Pod, PodRef};

pub use error::ClusterError;
pub use ingest::{SnapshotOptions, snapshot};
pub use input::{AsInput, Input};

/// A snapshot and what the reader noticed on the way (skipped kinds, ignored fields, missing
/// NodeClasses). Notes are for people; nothing depends on their wording.
#[derive(Debug, Clone)]
pub struct Ingested {
    /// The solver's input.
    pub snapshot: ClusterSnapshot,
    /// Remarks, deduplicated, in the order they arose.
    pub notes: Vec<String>,
    /// Static NodePools (`spec.replicas`): pool name → the node count it keeps whatever the
    /// pods need. The snapshot does not act on it; `plan` buys the missing nodes.
    pub static_pools: BTreeMap<String, u64>,
    /// ProvisioningRequests with the pods planned for them, in input order.
    pub provisioning_requests: Vec<provisioning_request::RequestPods>,
    /// CapacityBuffers with their chunk and count, in input order. Their placeholder pods are
    /// not in the snapshot: [`Ingested::with_buffers`] adds them.
    pub capacity_buffers: Vec<capacity_buffer::BufferPods>,
}

impl Ingested {
    /// The snapshot with every buffer's placeholder pods pending too (`plan`'s view: one
    /// solve buys for the pods and the headroom together).
    pub fn with_buffers(&self) -> ClusterSnapshot {
        let mut snapshot = self.snapshot.clone();
        snapshot.pending.extend(buffer_pods(&self.capacity_buffers));
        snapshot
    }
}

/// Every placeholder pod of `buffers`, numbered per buffer
/// ([`capacity_buffer::chunk_name`]).
pub fn buffer_pods(buffers: &[capacity_buffer::BufferPods]) -> Vec<Pod> {
    let mut out = Vec::new();
    for b in buffers {
        let Some(chunk) = &b.chunk else { continue };
        for i in 0..b.replicas {
            let mut pod = chunk.clone();
            pod.id = PodRef::new(&b.namespace, capacity_buffer::chunk_name(&b.name, i));
            out.push(pod);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use quartermaster_pricing::Catalog;

    use crate::testing::{ingest, ingest_err, objects};

    #[test]
    fn other_kinds_are_skipped_with_a_note() {
        let ingested = ingest(
            "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}
---
apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: b}
---
apiVersion: v1\nkind: Service\nmetadata: {name: db}
---
apiVersion: batch/v1\nkind: CronJob\nmetadata: {name: nightly}\nspec: {schedule: '@daily'}
---
apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: karpenter}\nspec: {}
",
        );
        assert!(ingested.snapshot.pending.is_empty());
        assert!(ingested.snapshot.node_pools.is_empty());
        assert!(
            ingested.notes.contains(
                &"skipped kinds not used for planning: ConfigMap ×1, CronJob.batch ×1, Service ×2"
                    .to_owned()
            ),
            "{:?}",
            ingested.notes
        );
        assert!(
            ingested
                .notes
                .iter()
                .any(|n| n.starts_with("NodePool/karpenter: apiVersion \"karpenter.sh/v1\""))
        );
    }

    #[test]
    fn objects_without_kind_or_name_and_duplicates_are_errors() {
        assert_eq!(
            ingest_err("metadata: {name: x}\n").to_string(),
            "object 1: no kind"
        );
        assert_eq!(
            ingest_err("kind: Service\n---\nkind: Pod\n").to_string(),
            "object 2: Pod without metadata.name"
        );
        let pod =
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c}]}\n";
        assert_eq!(
            ingest_err(&format!("{pod}---\n{pod}")).to_string(),
            "Pod/default/p: metadata.name: given twice"
        );
    }

    #[test]
    fn malformed_fields_carry_their_path() {
        let e = ingest_err(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec: {replicas: three}\n",
        );
        assert!(
            e.to_string()
                .starts_with("Deployment/default/web: spec.replicas: invalid type"),
            "{e}"
        );
        let e = ingest_err(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, resources: {requests: [1]}}]}\n",
        );
        assert!(
            e.to_string()
                .starts_with("Pod/default/p: spec.containers[0].resources.requests: invalid type"),
            "{e}"
        );
        let e = ingest_err("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n");
        assert_eq!(e.to_string(), "Pod/default/p: spec: missing");
    }

    #[test]
    fn the_catalog_prices_existing_nodes_for_max_hourly_cost() {
        let yaml = "apiVersion: quartermaster.dev/v1
kind: NodePool
metadata: {name: gpu}
spec:
  template:
    spec:
      nodeClassRef: {group: quartermaster.dev, kind: AWSNodeClass, name: gpu}
  limits: {maxHourlyCost: '100'}
---
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels:
    quartermaster.dev/nodepool: gpu
    node.kubernetes.io/instance-type: p5.48xlarge
    quartermaster.dev/capacity-type: on-demand
status: {capacity: {cpu: '192'}}
";
        let catalog = Catalog::embedded();
        let ingested =
            crate::snapshot(&objects(yaml), crate::SnapshotOptions::priced(&catalog)).unwrap();
        let usage = &ingested.snapshot.node_pools[0].usage;
        let expected = catalog
            .get(quartermaster_pricing::Cloud::Aws, "p5.48xlarge")
            .and_then(|it| {
                it.cheapest_offering(Some(quartermaster_pricing::CapacityType::OnDemand))
            })
            .map(|o| o.price_per_hour)
            .unwrap();
        assert!(
            (usage.hourly_cost - expected).abs() < 1e-9,
            "{} vs {expected}",
            usage.hourly_cost
        );
    }
}
