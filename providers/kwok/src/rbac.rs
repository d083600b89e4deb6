//! Exactly the Kubernetes API access this crate uses, as `(group, resource, verb)`: the
//! provider's `create`/`get`/`list`/`delete`/`poll_events` and the kubelet loop together. The
//! crate's mocked-API tests fail on any request outside this table, and a test checks the
//! table against the controller's RBAC (`CLUSTER_RULES` ∪ `KWOK_CLUSTER_RULES`), so the chart
//! grants what the kwok cloud needs.

/// `(API group, resource[/subresource], verb)`, the core group being `""`.
pub const API_ACCESS: &[(&str, &str, &str)] = &[
    // The provider: instances are Nodes.
    ("", "nodes", "get"),
    ("", "nodes", "list"),
    ("", "nodes", "create"),
    ("", "nodes", "delete"),
    ("", "nodes/status", "patch"),
    // The Nodes' devices, published by server-side apply (which creates a missing slice).
    ("resource.k8s.io", "resourceslices", "patch"),
    ("resource.k8s.io", "resourceslices", "create"),
    // The kubelet loop: watches kwok Nodes and bound pods, keeps Leases and statuses fresh.
    ("", "nodes", "watch"),
    ("", "pods", "list"),
    ("", "pods", "watch"),
    ("", "pods", "delete"),
    ("", "pods/status", "patch"),
    ("coordination.k8s.io", "leases", "get"),
    ("coordination.k8s.io", "leases", "create"),
    ("coordination.k8s.io", "leases", "update"),
];
