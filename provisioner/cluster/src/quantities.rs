//! Kubernetes resource lists (`requests`, `limits`, `allocatable`) as the solver's integer units:
//! `cpu` in millicores, `memory`, `ephemeral-storage` and `hugepages-*` in bytes, every other
//! resource in whole units rounded up.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use quartermaster_policies::quantity::{Millis, parse_quantity};
use quartermaster_solver::resources::{MAX_RESOURCES, ResourceTable};
use quartermaster_solver::{Resources, resources};

use crate::error::ClusterError;

/// A resource list by name, in solver units, before slots are assigned.
pub(crate) type Amounts = BTreeMap<String, i64>;

/// Parses one quantity of resource `name` into solver units. `object` and `field` name it in errors.
pub(crate) fn amount(
    name: &str,
    quantity: &Quantity,
    object: &str,
    field: &str,
) -> Result<i64, ClusterError> {
    let millis = parse_quantity(&quantity.0)
        .map_err(|e| ClusterError::invalid(object, field, e.to_string()))?;
    if millis.is_negative() {
        return Err(ClusterError::invalid(
            object,
            field,
            format!("{:?} is negative", quantity.0),
        ));
    }
    // Bytes and whole units round alike: a fraction of a byte or of a device rounds up.
    let value = if name == "cpu" {
        millis.millis()
    } else {
        millis.to_whole_ceil()
    };
    i64::try_from(value)
        .map_err(|_| ClusterError::invalid(object, field, format!("{:?} is too large", quantity.0)))
}

/// Parses a whole resource list (`field` is its path, e.g. `spec.containers[0].resources.requests`).
pub(crate) fn amounts(
    list: Option<&BTreeMap<String, Quantity>>,
    object: &str,
    field: &str,
) -> Result<Amounts, ClusterError> {
    let mut out = Amounts::new();
    for (name, quantity) in list.into_iter().flatten() {
        out.insert(
            name.clone(),
            amount(name, quantity, object, &format!("{field}.{name}"))?,
        );
    }
    Ok(out)
}

/// Kubernetes' `IsNativeResource`: no domain, or a `kubernetes.io/` one.
fn is_native(name: &str) -> bool {
    !name.contains('/') || name.contains("kubernetes.io/")
}

/// Kubernetes' `IsExtendedResourceName` (`nvidia.com/gpu`, `example.com/fpga`): counted in
/// whole units.
fn is_extended(name: &str) -> bool {
    !is_native(name) && !name.starts_with("requests.")
}

/// Kubernetes' `IsOvercommitAllowed`: requests may be below limits (native resources except
/// hugepages).
fn overcommit_allowed(name: &str) -> bool {
    is_native(name) && !name.starts_with("hugepages-")
}

/// The text `resource.Quantity.String()` gives a value (decimal SI): `"1500m"`, `"2"`, `"4k"`.
fn canonical(millis: Millis) -> String {
    let m = millis.millis();
    if m % 1000 != 0 {
        return format!("{m}m");
    }
    let mut whole = m / 1000;
    for suffix in ["", "k", "M", "G", "T", "P"] {
        if whole == 0 || whole % 1000 != 0 {
            return format!("{whole}{suffix}");
        }
        whole /= 1000;
    }
    format!("{whole}E")
}

/// Checks one container's `requests` and `limits` as the API server does
/// (`validateResourceRequirements` and `ValidateResourceQuantityValue` in Kubernetes'
/// `pkg/apis/core/validation/validation.go`), with its words: an extended resource must be a
/// whole number ("must be an integer"), and a resource that cannot be overcommitted (extended
/// resources, hugepages) must have its request equal to its limit ("must be equal to NAME limit
/// of LIMIT") and a limit whenever it has a request ("Limit must be set for non overcommitable
/// resources"). `path` is the `resources` field's path.
pub(crate) fn check_requirements(
    requests: Option<&BTreeMap<String, Quantity>>,
    limits: Option<&BTreeMap<String, Quantity>>,
    object: &str,
    path: &str,
) -> Result<(), ClusterError> {
    let parsed = |list: &str, name: &str, q: &Quantity| {
        parse_quantity(&q.0).map_err(|e| {
            ClusterError::invalid(object, format!("{path}.{list}.{name}"), e.to_string())
        })
    };
    let integer = |list: &str, name: &str, value: Millis| {
        if is_extended(name) && value.millis() % 1000 != 0 {
            return Err(ClusterError::invalid(
                object,
                format!("{path}.{list}.{name}"),
                format!("Invalid value: {:?}: must be an integer", canonical(value)),
            ));
        }
        Ok(())
    };
    for (name, q) in limits.into_iter().flatten() {
        integer("limits", name, parsed("limits", name, q)?)?;
    }
    for (name, q) in requests.into_iter().flatten() {
        let request = parsed("requests", name, q)?;
        integer("requests", name, request)?;
        if overcommit_allowed(name) {
            continue;
        }
        match limits.and_then(|l| l.get(name)) {
            Some(limit) => {
                let limit = parsed("limits", name, limit)?;
                if request != limit {
                    return Err(ClusterError::invalid(
                        object,
                        format!("{path}.requests"),
                        format!(
                            "Invalid value: {:?}: must be equal to {name} limit of {}",
                            canonical(request),
                            canonical(limit)
                        ),
                    ));
                }
            }
            None => {
                return Err(ClusterError::invalid(
                    object,
                    format!("{path}.limits"),
                    "Required value: Limit must be set for non overcommitable resources",
                ));
            }
        }
    }
    Ok(())
}

/// Adds `b` into `a`, per resource.
pub(crate) fn add(a: &mut Amounts, b: &Amounts) {
    for (name, v) in b {
        *a.entry(name.clone()).or_insert(0) += v;
    }
}

/// Raises `a` to at least `b`, per resource.
pub(crate) fn max(a: &mut Amounts, b: &Amounts) {
    for (name, v) in b {
        let e = a.entry(name.clone()).or_insert(0);
        *e = (*e).max(*v);
    }
}

/// Converts amounts to a resource vector, registering new names in spare slots of `table`.
/// Zero amounts take no slot. Fails when the table is full.
pub(crate) fn to_resources_registering(
    amounts: &Amounts,
    table: &mut ResourceTable,
    object: &str,
    field: &str,
) -> Result<Resources, ClusterError> {
    let mut out = Resources::ZERO;
    for (name, v) in amounts.iter().filter(|(_, v)| **v != 0) {
        let slot = table
            .slot_or_insert(name)
            .ok_or_else(|| ClusterError::TooManyResources {
                object: object.to_owned(),
                field: format!("{field}.{name}"),
                resource: name.clone(),
                max: MAX_RESOURCES,
            })?;
        out.set(slot, *v);
    }
    Ok(out)
}

/// Converts amounts to a resource vector using only resources already in `table`: capacity of a
/// resource that no pod requests cannot matter to the solver, so it takes no slot.
pub(crate) fn to_resources_known(amounts: &Amounts, table: &ResourceTable) -> Resources {
    let mut out = Resources::ZERO;
    for (name, v) in amounts {
        if let Some(slot) = table.slot(name) {
            out.set(slot, *v);
        }
    }
    out
}

/// The `pods` slot set to one: every pod takes one of a node's pod slots.
pub(crate) fn one_pod_slot() -> Resources {
    Resources::single(resources::PODS, 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Quantity {
        Quantity(s.to_owned())
    }

    #[test]
    fn units_follow_the_solver() {
        assert_eq!(amount("cpu", &q("250m"), "Pod/x", "f").unwrap(), 250);
        assert_eq!(amount("cpu", &q("8"), "Pod/x", "f").unwrap(), 8000);
        assert_eq!(
            amount("memory", &q("32Gi"), "Pod/x", "f").unwrap(),
            32 << 30
        );
        assert_eq!(amount("memory", &q("1.5k"), "Pod/x", "f").unwrap(), 1500);
        assert_eq!(
            amount("ephemeral-storage", &q("10G"), "Pod/x", "f").unwrap(),
            10_000_000_000
        );
        assert_eq!(amount("nvidia.com/gpu", &q("1"), "Pod/x", "f").unwrap(), 1);
        // Extended resources are whole units: a fraction rounds up.
        assert_eq!(
            amount("example.com/fpga", &q("500m"), "Pod/x", "f").unwrap(),
            1
        );
    }

    #[test]
    fn bad_quantities_name_object_and_field() {
        let e = amount(
            "cpu",
            &q("1K"),
            "Pod/default/x",
            "spec.containers[0].resources.requests.cpu",
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"Pod/default/x: spec.containers[0].resources.requests.cpu: invalid quantity "1K": unknown suffix "K""#
        );
        let e = amount("memory", &q("-1Gi"), "Pod/default/x", "f").unwrap_err();
        assert!(e.to_string().contains("negative"), "{e}");
    }

    #[test]
    fn registering_fills_spare_slots_then_fails() {
        let mut table = ResourceTable::default();
        let mut a = Amounts::new();
        a.insert("example.com/fpga".into(), 2);
        a.insert("cpu".into(), 100);
        a.insert("example.com/zero".into(), 0);
        let r = to_resources_registering(&a, &mut table, "Pod/x", "spec").unwrap();
        let slot = table.slot("example.com/fpga").unwrap();
        assert_eq!(r.get(slot), 2);
        assert_eq!(r.get(resources::CPU), 100);
        assert_eq!(table.slot("example.com/zero"), None);
        let mut many = Amounts::new();
        for i in 0..MAX_RESOURCES {
            many.insert(format!("example.com/r{i:02}"), 1);
        }
        let e = to_resources_registering(
            &many,
            &mut table,
            "Pod/default/x",
            "spec.containers[0].resources.requests",
        )
        .unwrap_err();
        assert!(matches!(e, ClusterError::TooManyResources { .. }), "{e}");
        assert!(
            e.to_string()
                .starts_with("Pod/default/x: spec.containers[0].resources.requests.example.com/r"),
            "{e}"
        );
    }

    #[test]
    fn known_only_skips_unregistered_names() {
        let table = ResourceTable::default();
        let mut a = Amounts::new();
        a.insert("hugepages-1Gi".into(), 1 << 30);
        a.insert("memory".into(), 5);
        let r = to_resources_known(&a, &table);
        assert_eq!(r.get(resources::MEMORY), 5);
        assert_eq!(table.slot("hugepages-1Gi"), None);
    }
}
