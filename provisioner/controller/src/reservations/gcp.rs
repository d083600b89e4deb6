//! Which reservations a GCPNodeClass selects: `reservationAffinity`, in Compute Engine's terms.
//!
//! * `ANY_RESERVATION`: every reservation that VMs consume automatically (not those with
//!   `specificReservationRequired`, which only VMs naming them may use);
//! * `SPECIFIC_RESERVATION`: the reservations named in `values` (key
//!   `compute.googleapis.com/reservation-name`), whether or not they require naming;
//! * `NO_RESERVATION`, or no `reservationAffinity` at all: none. Compute Engine's own default
//!   for an instance is `ANY_RESERVATION`, but a NodeClass that never mentions reservations
//!   uses none here, as an AWSNodeClass without `capacityReservationSelectorTerms` does: pools
//!   launch into reservations only when their class asks for it.
//!
//! Either way, only reservations in the class's region (and in `spec.zones` when it lists
//! some) are selected: the project's reservations span every region, and a launch from this
//! class goes to its region's network.

use quartermaster_policies::GCPNodeClass;
use quartermaster_policies::nodeclass::gcp::{
    ConsumeReservationType, RESERVATION_NAME_KEY, RESERVATION_NAME_KEY_SHORT,
};
use quartermaster_pricing::Reservation;
use quartermaster_pricing::reservation::TAG_SPECIFIC_RESERVATION_REQUIRED;

/// Whether `class` selects `r`.
pub(super) fn selects(class: &GCPNodeClass, r: &Reservation) -> bool {
    let spec = &class.spec;
    let Some(affinity) = &spec.reservation_affinity else {
        return false;
    };
    let in_region = r
        .zone
        .strip_prefix(spec.region.as_str())
        .is_some_and(|rest| rest.starts_with('-'));
    if !in_region || !(spec.zones.is_empty() || spec.zones.contains(&r.zone)) {
        return false;
    }
    match affinity.consume_reservation_type {
        ConsumeReservationType::AnyReservation => !specific_required(r),
        ConsumeReservationType::SpecificReservation => {
            let key = affinity.key_or_default();
            (key == RESERVATION_NAME_KEY || key == RESERVATION_NAME_KEY_SHORT)
                && affinity.values.contains(&r.id)
        }
        ConsumeReservationType::NoReservation => false,
    }
}

/// Whether only VMs that name `r` may consume it.
fn specific_required(r: &Reservation) -> bool {
    r.tags
        .get(TAG_SPECIFIC_RESERVATION_REQUIRED)
        .is_some_and(|v| v == "true")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use quartermaster_pricing::{Cloud, ReservationKind};

    use super::*;

    fn reservation(name: &str, zone: &str, specific: bool) -> Reservation {
        Reservation {
            id: name.into(),
            cloud: Cloud::Gcp,
            instance_type: "a3-highgpu-8g".into(),
            zone: zone.into(),
            count: 2,
            available: Some(2),
            kind: ReservationKind::Default,
            price_per_hour: 0.0,
            start: None,
            end: None,
            tags: if specific {
                BTreeMap::from([(
                    TAG_SPECIFIC_RESERVATION_REQUIRED.to_owned(),
                    "true".to_owned(),
                )])
            } else {
                BTreeMap::new()
            },
        }
    }

    fn class(zones: &[&str], affinity: Option<serde_json::Value>) -> GCPNodeClass {
        let mut spec = serde_json::json!({
            "project": "my-ml-project", "region": "us-central1", "zones": zones,
        });
        if let Some(a) = affinity {
            spec["reservationAffinity"] = a;
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "quartermaster.dev/v1", "kind": "GCPNodeClass",
            "metadata": {"name": "gpu"}, "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn any_selects_the_reservations_vms_consume_automatically() {
        let c = class(
            &[],
            Some(serde_json::json!({"consumeReservationType": "ANY_RESERVATION"})),
        );
        assert!(selects(&c, &reservation("open", "us-central1-a", false)));
        assert!(!selects(&c, &reservation("named", "us-central1-a", true)));
    }

    #[test]
    fn specific_selects_the_named_reservations_only() {
        let c = class(
            &[],
            Some(serde_json::json!({
                "consumeReservationType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name",
                "values": ["h100-block", "h100-open"],
            })),
        );
        assert!(selects(
            &c,
            &reservation("h100-block", "us-central1-a", true)
        ));
        // Named, though VMs consume it automatically: the launch then asks for any.
        assert!(selects(
            &c,
            &reservation("h100-open", "us-central1-b", false)
        ));
        assert!(!selects(&c, &reservation("other", "us-central1-a", true)));
        // The key as the API reference spells it names them too.
        let short = class(
            &[],
            Some(serde_json::json!({
                "consumeReservationType": "SPECIFIC_RESERVATION",
                "key": "googleapis.com/reservation-name", "values": ["h100-block"],
            })),
        );
        assert!(selects(
            &short,
            &reservation("h100-block", "us-central1-a", true)
        ));
    }

    #[test]
    fn no_reservation_and_an_unset_affinity_select_none() {
        let r = reservation("open", "us-central1-a", false);
        assert!(!selects(&class(&[], None), &r));
        let no = class(
            &[],
            Some(serde_json::json!({"consumeReservationType": "NO_RESERVATION"})),
        );
        assert!(!selects(&no, &r));
        assert!(!selects(&no, &reservation("named", "us-central1-a", true)));
    }

    #[test]
    fn only_reservations_in_the_class_region_and_zones_are_selected() {
        let any = Some(serde_json::json!({"consumeReservationType": "ANY_RESERVATION"}));
        let c = class(&["us-central1-a"], any.clone());
        assert!(selects(&c, &reservation("a", "us-central1-a", false)));
        assert!(!selects(&c, &reservation("b", "us-central1-b", false)));
        let region = class(&[], any);
        assert!(!selects(
            &region,
            &reservation("eu", "europe-west4-a", false)
        ));
        // `us-central10-a` is not in `us-central1`.
        assert!(!selects(
            &region,
            &reservation("x", "us-central10-a", false)
        ));
    }
}
