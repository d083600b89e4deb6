//! Exactly the Kubernetes API access the controller uses. The Helm chart's ClusterRole and Role
//! are compared with these tables by a test (`tests/contracts/chart.rs`), and the mocked-API
//! tests check that every request the controller makes is covered by them: a verb the code
//! stops using, or starts using, fails a test until the chart says the same.

/// Access to one resource of one API group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiAccess {
    /// API group (`""` for the core group).
    pub group: &'static str,
    /// Resource (plural), with its subresource after a slash (`pods/eviction`).
    pub resource: &'static str,
    /// Verbs, sorted.
    pub verbs: &'static [&'static str],
}

const READ: &[&str] = &["get", "list", "watch"];

/// Cluster-wide access of the controller with any cloud provider (the chart's ClusterRole).
pub const CLUSTER_RULES: &[ApiAccess] = &[
    // delete: pods still on a node when its terminationGracePeriod ends.
    ApiAccess {
        group: "",
        resource: "pods",
        verbs: &["delete", "get", "list", "watch"],
    },
    ApiAccess {
        group: "",
        resource: "pods/eviction",
        verbs: &["create"],
    },
    // patch: status.nominatedNodeName, where a pending pod is expected (KEP-5278).
    ApiAccess {
        group: "",
        resource: "pods/status",
        verbs: &["patch"],
    },
    ApiAccess {
        group: "",
        resource: "nodes",
        verbs: &["delete", "get", "list", "patch", "watch"],
    },
    ApiAccess {
        group: "events.k8s.io",
        resource: "events",
        verbs: &["create", "patch"],
    },
    ApiAccess {
        group: "apps",
        resource: "daemonsets",
        verbs: READ,
    },
    ApiAccess {
        group: "policy",
        resource: "poddisruptionbudgets",
        verbs: READ,
    },
    ApiAccess {
        group: "quartermaster.dev",
        resource: "nodepools",
        verbs: READ,
    },
    ApiAccess {
        group: "quartermaster.dev",
        resource: "nodepools/status",
        verbs: &["patch"],
    },
    ApiAccess {
        group: "quartermaster.dev",
        resource: "nodeclaims",
        verbs: &["create", "delete", "get", "list", "patch", "watch"],
    },
    ApiAccess {
        group: "quartermaster.dev",
        resource: "nodeclaims/status",
        verbs: &["patch"],
    },
    ApiAccess {
        group: "quartermaster.dev",
        resource: "awsnodeclasses",
        verbs: READ,
    },
    ApiAccess {
        group: "quartermaster.dev",
        resource: "gcpnodeclasses",
        verbs: READ,
    },
    ApiAccess {
        group: "quartermaster.dev",
        resource: "azurenodeclasses",
        verbs: READ,
    },
    ApiAccess {
        group: "",
        resource: "podtemplates",
        verbs: READ,
    },
    ApiAccess {
        group: "autoscaling.x-k8s.io",
        resource: "provisioningrequests",
        verbs: READ,
    },
    ApiAccess {
        group: "autoscaling.x-k8s.io",
        resource: "provisioningrequests/status",
        verbs: &["patch"],
    },
    ApiAccess {
        group: "autoscaling.x-k8s.io",
        resource: "capacitybuffers",
        verbs: READ,
    },
    ApiAccess {
        group: "autoscaling.x-k8s.io",
        resource: "capacitybuffers/status",
        verbs: &["patch"],
    },
    ApiAccess {
        group: "scheduling.volcano.sh",
        resource: "podgroups",
        verbs: READ,
    },
    ApiAccess {
        group: "scheduling.x-k8s.io",
        resource: "podgroups",
        verbs: READ,
    },
    // Dynamic Resource Allocation (Kubernetes 1.34+): pods' claims, their classes and the
    // devices existing nodes publish.
    ApiAccess {
        group: "resource.k8s.io",
        resource: "deviceclasses",
        verbs: READ,
    },
    ApiAccess {
        group: "resource.k8s.io",
        resource: "resourceclaims",
        verbs: READ,
    },
    ApiAccess {
        group: "resource.k8s.io",
        resource: "resourceclaimtemplates",
        verbs: READ,
    },
    ApiAccess {
        group: "resource.k8s.io",
        resource: "resourceslices",
        verbs: READ,
    },
];

/// Extra cluster-wide access with `--cloud-provider kwok`: the kwok cloud creates Node objects
/// and the ResourceSlices their devices would be published in, keeps their status and Leases
/// fresh, and plays kubelet for the pods bound to them.
pub const KWOK_CLUSTER_RULES: &[ApiAccess] = &[
    ApiAccess {
        group: "",
        resource: "nodes",
        verbs: &["create"],
    },
    ApiAccess {
        group: "",
        resource: "nodes/status",
        verbs: &["patch"],
    },
    ApiAccess {
        group: "",
        resource: "pods",
        verbs: &["delete"],
    },
    ApiAccess {
        group: "coordination.k8s.io",
        resource: "leases",
        verbs: &["create", "get", "update"],
    },
    // The ResourceSlices a launched Node's DRA drivers would publish, by server-side apply
    // (`patch`; `create` when the apply creates the slice). Owned by their Node: the garbage
    // collector deletes them with it.
    ApiAccess {
        group: "resource.k8s.io",
        resource: "resourceslices",
        verbs: &["create", "patch"],
    },
];

/// Access in the controller's own namespace (the chart's Role): the leader-election Lease.
pub const NAMESPACE_RULES: &[ApiAccess] = &[ApiAccess {
    group: "coordination.k8s.io",
    resource: "leases",
    verbs: &["create", "get", "update"],
}];

/// Whether `verb` on `group`/`resource` is allowed by `rules`.
pub fn allows(rules: &[ApiAccess], group: &str, resource: &str, verb: &str) -> bool {
    rules
        .iter()
        .any(|r| r.group == group && r.resource == resource && r.verbs.contains(&verb))
}
