//! Which reservations an AzureNodeClass selects: every capacity reservation of the capacity
//! reservation group its `capacityReservationGroupID` names (the group's ARM id, which the
//! Azure provider reports under [`TAG_RESERVATION_GROUP`]), compared case-insensitively as ARM
//! ids are.

use quartermaster_policies::AzureNodeClass;
use quartermaster_pricing::Reservation;
use quartermaster_pricing::reservation::TAG_RESERVATION_GROUP;

/// Whether `class` selects `r`.
pub(super) fn selects(class: &AzureNodeClass, r: &Reservation) -> bool {
    let Some(want) = class.spec.capacity_reservation_group_id.as_deref() else {
        return false;
    };
    r.tags.get(TAG_RESERVATION_GROUP).is_some_and(|group| {
        !group.is_empty() && group.eq_ignore_ascii_case(want.trim_end_matches('/'))
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use quartermaster_pricing::{Cloud, ReservationKind};

    use super::*;

    const GROUP: &str = "/subscriptions/12345678-90ab-cdef-1234-567890abcdef/resourceGroups/capacity/providers/Microsoft.Compute/capacityReservationGroups/h100";

    fn reservation(group: Option<&str>) -> Reservation {
        Reservation {
            id: format!("{GROUP}/capacityReservations/eastus-1"),
            cloud: Cloud::Azure,
            instance_type: "Standard_ND96isr_H100_v5".into(),
            zone: "eastus-1".into(),
            count: 2,
            available: Some(2),
            kind: ReservationKind::Default,
            price_per_hour: 0.0,
            start: None,
            end: None,
            tags: group
                .map(|g| BTreeMap::from([(TAG_RESERVATION_GROUP.to_owned(), g.to_owned())]))
                .unwrap_or_default(),
        }
    }

    fn class(group: Option<&str>) -> AzureNodeClass {
        let mut spec = serde_json::json!({
            "subscriptionId": "12345678-90ab-cdef-1234-567890abcdef",
            "resourceGroup": "ml-nodes", "location": "eastus",
            "subnetId": "/subscriptions/12345678-90ab-cdef-1234-567890abcdef/resourceGroups/ml-network/providers/Microsoft.Network/virtualNetworks/v/subnets/gpu",
        });
        if let Some(g) = group {
            spec["capacityReservationGroupID"] = g.into();
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "quartermaster.dev/v1", "kind": "AzureNodeClass",
            "metadata": {"name": "gpu"}, "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn a_class_selects_the_reservations_of_its_group_whatever_the_case() {
        assert!(selects(&class(Some(GROUP)), &reservation(Some(GROUP))));
        // ARM ids are case-insensitive: the class may spell the group otherwise.
        let shouted = GROUP
            .replace("resourceGroups", "resourcegroups")
            .replace("h100", "H100");
        assert!(selects(&class(Some(&shouted)), &reservation(Some(GROUP))));
        assert!(selects(
            &class(Some(GROUP)),
            &reservation(Some(&GROUP.to_ascii_uppercase()))
        ));
    }

    #[test]
    fn pools_of_an_azure_class_are_offered_its_groups_reservations() {
        let pool = |name: &str, class: &str| {
            std::sync::Arc::new(
                serde_json::from_value::<quartermaster_policies::NodePool>(serde_json::json!({
                    "apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
                    "metadata": {"name": name},
                    "spec": {"template": {"spec": {"nodeClassRef":
                        {"group": "quartermaster.dev", "kind": "AzureNodeClass", "name": class}}}}
                }))
                .unwrap(),
            )
        };
        let mut plain = class(None);
        plain.metadata.name = Some("plain".into());
        let classes = [
            std::sync::Arc::new(class(Some(GROUP))),
            std::sync::Arc::new(plain),
        ];
        let pools = [
            pool("h100", "gpu"),
            pool("other", "plain"),
            pool("missing", "nope"),
        ];
        let mut used = reservation(Some(GROUP));
        used.available = Some(0);
        let ours = BTreeMap::from([(used.id.clone(), 1)]);
        let offers = super::super::offers(
            &[used],
            &pools,
            super::super::NodeClasses {
                azure: &classes,
                ..Default::default()
            },
            &ours,
        );
        assert_eq!(offers[0].pools, vec!["h100".to_owned()]);
        // None free as Azure counts, but one of its VMs is ours: one slot for the engine.
        assert_eq!(offers[0].reservation.count, 1);
    }

    #[test]
    fn a_class_selects_nothing_of_another_group_or_without_a_group() {
        let other = GROUP.replace("h100", "h100-2");
        assert!(!selects(&class(Some(&other)), &reservation(Some(GROUP))));
        // A group whose name only starts like the class's is another group.
        assert!(!selects(&class(Some(GROUP)), &reservation(Some(&other))));
        assert!(!selects(&class(None), &reservation(Some(GROUP))));
        // A reservation reported without its group is never selected.
        assert!(!selects(&class(Some(GROUP)), &reservation(None)));
    }
}
