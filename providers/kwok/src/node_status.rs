//! The status a kwok Node reports, as a kubelet would: capacity and allocatable (accelerators
//! once the device plugin has reported), `Ready`, no pressure, node info, a hostname address.

use chrono::{DateTime, Utc};
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition, NodeStatus, NodeSystemInfo};
use quartermaster_pricing::labels;

use crate::keys;
use crate::node::{Machine, holds_all, label};
use crate::time::{from_time, to_time};

/// The conditions a healthy kubelet reports: type, status, reason, message.
const CONDITIONS: [(&str, &str, &str, &str); 4] = [
    (
        "Ready",
        "True",
        "KubeletReady",
        "kwok: Quartermaster plays kubelet for this node",
    ),
    (
        "MemoryPressure",
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    (
        "DiskPressure",
        "False",
        "KubeletHasNoDiskPressure",
        "kubelet has no disk pressure",
    ),
    (
        "PIDPressure",
        "False",
        "KubeletHasSufficientPID",
        "kubelet has sufficient PID available",
    ),
];

/// The status `node` reports at `now`. Capacity and allocatable come from its [`Machine`]
/// (left out when it has none, so a patch leaves them as they are); a condition keeps its
/// `lastTransitionTime` while its status does not change.
pub(crate) fn reported_status(
    node: &Node,
    machine: Option<&Machine>,
    now: DateTime<Utc>,
) -> NodeStatus {
    let name = node.metadata.name.clone().unwrap_or_default();
    let previous = node.status.as_ref().and_then(|s| s.conditions.as_ref());
    let conditions = CONDITIONS
        .iter()
        .map(|&(kind, status, reason, message)| {
            let since = previous
                .and_then(|cs| cs.iter().find(|c| c.type_ == kind && c.status == status))
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or_else(|| to_time(now));
            NodeCondition {
                type_: kind.to_owned(),
                status: status.to_owned(),
                reason: Some(reason.to_owned()),
                message: Some(message.to_owned()),
                last_heartbeat_time: Some(to_time(now)),
                last_transition_time: Some(since),
            }
        })
        .collect();
    let (capacity, allocatable) = match machine.map(|m| m.reported(now)) {
        Some((c, a)) => (Some(c), Some(a)),
        None => (None, None),
    };
    NodeStatus {
        capacity,
        allocatable,
        conditions: Some(conditions),
        addresses: Some(vec![NodeAddress {
            type_: "Hostname".to_owned(),
            address: name,
        }]),
        node_info: Some(NodeSystemInfo {
            architecture: label(node, labels::ARCH).unwrap_or("amd64").to_owned(),
            operating_system: label(node, labels::OS)
                .unwrap_or(labels::OS_LINUX)
                .to_owned(),
            kubelet_version: keys::KUBELET_VERSION.to_owned(),
            container_runtime_version: "kwok://quartermaster".to_owned(),
            os_image: "kwok".to_owned(),
            ..NodeSystemInfo::default()
        }),
        ..NodeStatus::default()
    }
}

/// When the node's `Ready` condition was last reported, if it is `True`.
pub(crate) fn ready_heartbeat(node: &Node) -> Option<DateTime<Utc>> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?
        .last_heartbeat_time
        .as_ref()
        .map(from_time)
}

/// Whether the node's status already says what it should at `now` (apart from heartbeat
/// times): `Ready`, and every resource of its machine that is reported by then.
pub(crate) fn is_current(node: &Node, machine: Option<&Machine>, now: DateTime<Utc>) -> bool {
    let status = node.status.as_ref();
    let resources_ok = machine.is_none_or(|m| {
        let (capacity, allocatable) = m.reported(now);
        holds_all(status.and_then(|s| s.capacity.as_ref()), &capacity)
            && holds_all(status.and_then(|s| s.allocatable.as_ref()), &allocatable)
    });
    resources_ok && ready_heartbeat(node).is_some()
}
