//! Kubelet-side events: what the cluster would see of a simulated instance. The engine learns
//! about nodes from the cluster, not from the cloud, so these are not part of
//! [`quartermaster_cloud::CloudProvider`]; a simulation feeds them to its in-memory cluster.

use std::collections::BTreeMap;

/// A Node as it registers with the API server.
#[derive(Debug, Clone, PartialEq)]
pub struct SimNode {
    /// Node name, as each cloud names its nodes: AWS `ip-10-0-0-4.ec2.internal` (other
    /// regions `ip-….<region>.compute.internal`), GCP the instance name (the NodeClaim's
    /// name), Azure `aks-<NodeClaim name>`.
    pub name: String,
    /// The offering's labels (`InstanceType::offering_labels`), then the launch request's
    /// labels, then `kubernetes.io/hostname` = [`SimNode::name`].
    pub labels: BTreeMap<String, String>,
    /// Capacity by resource name, in the units of `InstanceType::capacity`, without the
    /// accelerator resource (the device plugin has not reported yet).
    pub capacity: BTreeMap<String, u64>,
    /// Allocatable by resource name, in the units of `InstanceType::allocatable`, without the
    /// accelerator resource.
    pub allocatable: BTreeMap<String, u64>,
}

/// Something the kubelet side of a simulated instance does.
#[derive(Debug, Clone, PartialEq)]
pub enum SimNodeEvent {
    /// The instance's Node registered.
    Registered {
        /// The instance (`sim:///<zone>/<id>`), the Node's `spec.providerID`.
        provider_id: String,
        /// The NodeClaim the instance was launched for.
        claim_name: String,
        /// The Node.
        node: SimNode,
    },
    /// The device plugin reported: the Node's allocatable now includes the accelerators.
    /// Every node gets this event (types without accelerators at the moment they register)
    /// unless its device plugin never reports (`SimConfig::accelerators_never_ready`).
    AcceleratorsReady {
        /// The instance.
        provider_id: String,
        /// The Node.
        node_name: String,
        /// The full allocatable, accelerators included (`InstanceType::allocatable`).
        allocatable: BTreeMap<String, u64>,
    },
    /// A GPU failed: the node agent sets `AcceleratedHardwareReady=False` (reason `NvidiaXID79Error`,
    /// fallen off the bus) and the device plugin withdraws the accelerators from allocatable.
    GpuFailed {
        /// The instance.
        provider_id: String,
        /// The Node.
        node_name: String,
        /// The allocatable without the accelerators.
        allocatable: BTreeMap<String, u64>,
        /// The condition's reason (`NvidiaXID79Error`, or `NvidiaXID48Error` for a fault a
        /// reboot clears).
        reason: String,
    },
    /// A reboot (`CloudProvider::reboot`) finished: the node is back, with its accelerators
    /// when the reboot cleared its GPU fault (or it had none), without them otherwise.
    Rebooted {
        /// The instance.
        provider_id: String,
        /// The Node.
        node_name: String,
        /// Its allocatable now.
        allocatable: BTreeMap<String, u64>,
        /// Whether its GPUs work again (`AcceleratedHardwareReady=True`).
        healthy: bool,
    },
}
