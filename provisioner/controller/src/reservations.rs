//! Capacity reservations in the cluster: what each cloud reports (`CloudProvider::reservations`,
//! polled) becomes the engine's [`ReservationOffer`]s, each with the NodePools whose NodeClass
//! selects it (AWSNodeClass `capacityReservationSelectorTerms`: a term names its id, or all of a
//! term's tags are the reservation's, and `ownerID` when given). Pure: fed objects in tests.
//!
//! A reservation's free slots are what the cloud says is available plus the slots of our own
//! launched nodes in it (the engine subtracts those itself), so instances launched into an open
//! ODCR by others are never counted as free.

use std::collections::BTreeMap;

use quartermaster_engine::ReservationOffer;
use quartermaster_policies::nodeclass::aws::CapacityReservationSelectorTerm;
use quartermaster_policies::{AWSNodeClass, NodePool};
use quartermaster_pricing::{Cloud, Reservation};

/// The offers for `reservations` (as the clouds reported them). `ours` counts our launched
/// nodes in each reservation (by id).
pub fn offers(
    reservations: &[Reservation],
    node_pools: &[std::sync::Arc<NodePool>],
    aws_classes: &[std::sync::Arc<AWSNodeClass>],
    ours: &BTreeMap<String, u32>,
) -> Vec<ReservationOffer> {
    reservations
        .iter()
        .map(|r| {
            let mut reservation = r.clone();
            if let Some(available) = r.available {
                let mine = ours.get(&r.id).copied().unwrap_or(0);
                reservation.count = r.count.min(available.saturating_add(mine));
            }
            let pools = node_pools
                .iter()
                .filter(|p| {
                    let class = p.node_class_ref();
                    r.cloud == Cloud::Aws
                        && class.kind == "AWSNodeClass"
                        && aws_classes.iter().any(|c| {
                            c.metadata.name.as_deref() == Some(class.name.as_str())
                                && c.spec
                                    .capacity_reservation_selector_terms
                                    .iter()
                                    .any(|t| selects(t, r))
                        })
                })
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            ReservationOffer { reservation, pools }
        })
        .collect()
}

/// Whether one selector term selects `r`.
fn selects(t: &CapacityReservationSelectorTerm, r: &Reservation) -> bool {
    if let Some(id) = &t.id {
        return *id == r.id;
    }
    !t.tags.is_empty()
        && t.tags
            .iter()
            .all(|(k, v)| r.tags.get(k) == Some(v) || (v == "*" && r.tags.contains_key(k)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reservation(id: &str, tags: &[(&str, &str)]) -> Reservation {
        Reservation {
            id: id.into(),
            cloud: Cloud::Aws,
            instance_type: "p5.48xlarge".into(),
            zone: "us-east-1a".into(),
            count: 4,
            available: Some(1),
            kind: quartermaster_pricing::ReservationKind::CapacityBlock,
            price_per_hour: 0.0,
            start: None,
            end: None,
            tags: tags
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
        }
    }

    fn pool(name: &str, class: &str) -> std::sync::Arc<NodePool> {
        std::sync::Arc::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "quartermaster.dev/v1", "kind": "NodePool",
                "metadata": {"name": name},
                "spec": {"template": {"spec": {"nodeClassRef":
                    {"group": "quartermaster.dev", "kind": "AWSNodeClass", "name": class}}}}
            }))
            .unwrap(),
        )
    }

    fn class(name: &str, terms: serde_json::Value) -> std::sync::Arc<AWSNodeClass> {
        std::sync::Arc::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "quartermaster.dev/v1", "kind": "AWSNodeClass",
                "metadata": {"name": name},
                "spec": {"subnetSelectorTerms": [{"tags": {"a": "b"}}],
                         "securityGroupSelectorTerms": [{"tags": {"a": "b"}}],
                         "capacityReservationSelectorTerms": terms}
            }))
            .unwrap(),
        )
    }

    #[test]
    fn pools_get_the_reservations_their_class_selects_by_id_or_tags() {
        let rs = [
            reservation("cr-block", &[("team", "research")]),
            reservation("cr-other", &[("team", "web")]),
        ];
        let pools = [
            pool("h100", "by-id"),
            pool("tagged", "by-tag"),
            pool("none", "plain"),
        ];
        let classes = [
            class("by-id", serde_json::json!([{"id": "cr-block"}])),
            class(
                "by-tag",
                serde_json::json!([{"tags": {"team": "research"}}]),
            ),
            class("plain", serde_json::json!([])),
        ];
        let ours = BTreeMap::from([("cr-block".to_owned(), 2)]);
        let offers = offers(&rs, &pools, &classes, &ours);
        assert_eq!(
            offers[0].pools,
            vec!["h100".to_owned(), "tagged".to_owned()]
        );
        assert!(offers[1].pools.is_empty());
        // 1 available + our 2 = 3 of 4 usable: someone else holds the fourth.
        assert_eq!(offers[0].reservation.count, 3);
        assert_eq!(offers[1].reservation.count, 1);
    }
}
