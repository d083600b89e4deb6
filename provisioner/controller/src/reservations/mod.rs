//! Capacity reservations in the cluster: what each cloud reports (`CloudProvider::reservations`,
//! polled) becomes the engine's [`ReservationOffer`]s, each with the NodePools whose NodeClass
//! selects it. Each cloud's NodeClass says which reservations it may launch into in its own
//! terms (one file per cloud): AWSNodeClass `capacityReservationSelectorTerms` ([`aws`]).
//! Pure: fed objects in tests.
//!
//! A reservation's free slots are what the cloud says is available plus the slots of our own
//! launched nodes in it (the engine subtracts those itself), so instances launched into an open
//! reservation by others are never counted as free.

mod aws;
mod azure;
mod gcp;

use std::collections::BTreeMap;
use std::sync::Arc;

use quartermaster_engine::ReservationOffer;
use quartermaster_policies::{AWSNodeClass, AzureNodeClass, GCPNodeClass, NodePool};
use quartermaster_pricing::{Cloud, Reservation};

/// The NodeClasses of every cloud, as the cluster has them.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeClasses<'a> {
    /// `AWSNodeClass`es.
    pub aws: &'a [Arc<AWSNodeClass>],
    /// `GCPNodeClass`es.
    pub gcp: &'a [Arc<GCPNodeClass>],
    /// `AzureNodeClass`es.
    pub azure: &'a [Arc<AzureNodeClass>],
}

impl NodeClasses<'_> {
    /// Whether the NodeClass `kind`/`name` selects `r`.
    fn selects(&self, kind: &str, name: &str, r: &Reservation) -> bool {
        fn named<'c, T: kube::Resource>(classes: &'c [Arc<T>], name: &str) -> Option<&'c T> {
            classes
                .iter()
                .find(|c| c.meta().name.as_deref() == Some(name))
                .map(|c| c.as_ref())
        }
        match (r.cloud, kind) {
            (Cloud::Aws, "AWSNodeClass") => {
                named(self.aws, name).is_some_and(|c| aws::selects(c, r))
            }
            (Cloud::Azure, "AzureNodeClass") => {
                named(self.azure, name).is_some_and(|c| azure::selects(c, r))
            }
            (Cloud::Gcp, "GCPNodeClass") => {
                named(self.gcp, name).is_some_and(|c| gcp::selects(c, r))
            }
            _ => false,
        }
    }
}

/// The offers for `reservations` (as the clouds reported them). `ours` counts our launched
/// nodes in each reservation (by id).
pub fn offers(
    reservations: &[Reservation],
    node_pools: &[Arc<NodePool>],
    classes: NodeClasses<'_>,
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
                    classes.selects(&class.kind, &class.name, r)
                })
                .filter_map(|p| p.metadata.name.clone())
                .collect();
            ReservationOffer { reservation, pools }
        })
        .collect()
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
        let offers = offers(
            &rs,
            &pools,
            NodeClasses {
                aws: &classes,
                ..Default::default()
            },
            &ours,
        );
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
