//! The crate's API access stays within the controller's RBAC. (Every mocked request in these
//! tests is checked against [`crate::API_ACCESS`] by the mock server itself.)

use quartermaster_controller::rbac::{CLUSTER_RULES, KWOK_CLUSTER_RULES, allows};

use super::mock::access;

#[test]
fn api_access_is_granted_by_the_controllers_cluster_rules_with_kwok() {
    for &(group, resource, verb) in crate::API_ACCESS {
        assert!(
            allows(CLUSTER_RULES, group, resource, verb)
                || allows(KWOK_CLUSTER_RULES, group, resource, verb),
            "{verb} on {group:?}/{resource} is used by the kwok cloud but granted by neither \
             CLUSTER_RULES nor KWOK_CLUSTER_RULES"
        );
    }
}

#[test]
fn requests_map_to_the_access_they_need() {
    let a = |m, p, q| {
        let (g, r, v) = access(m, p, q);
        format!("{g}|{r}|{v}")
    };
    assert_eq!(a("GET", "/api/v1/nodes", "labelSelector=x"), "|nodes|list");
    assert_eq!(
        a("GET", "/api/v1/nodes", "watch=true&resourceVersion=1"),
        "|nodes|watch"
    );
    assert_eq!(
        a("PATCH", "/api/v1/nodes/n/status", ""),
        "|nodes/status|patch"
    );
    assert_eq!(
        a("DELETE", "/api/v1/namespaces/ns/pods/p", ""),
        "|pods|delete"
    );
    assert_eq!(
        a(
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/n",
            ""
        ),
        "coordination.k8s.io|leases|update"
    );
    assert_eq!(
        a(
            "POST",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
            ""
        ),
        "coordination.k8s.io|leases|create"
    );
}
