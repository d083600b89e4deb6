//! Reserved capacity through the controller: the cloud's reservations (polled) reach the
//! engine with the pools whose AWSNodeClass selects them, and pending pods are launched into
//! the free slots before anything is bought.

use quartermaster_cloud::{CloudFuture, Instance, LaunchRequest};
use quartermaster_pricing::InstanceType;
use quartermaster_pricing::reservation::LABEL_RESERVATION_ID;
use quartermaster_pricing::{Reservation, ReservationKind};
use serde_json::json;

use super::*;

/// The kwok cloud, with one account reservation: an ODCR of 2 g5.xlarge in us-east-1a.
struct WithReservation(KwokCloud);

impl CloudProvider for WithReservation {
    fn cloud(&self) -> Cloud {
        self.0.cloud()
    }
    fn create<'a>(&'a self, request: &'a LaunchRequest) -> CloudFuture<'a, Instance> {
        self.0.create(request)
    }
    fn delete<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, ()> {
        self.0.delete(provider_id)
    }
    fn get<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, Instance> {
        self.0.get(provider_id)
    }
    fn list(&self) -> CloudFuture<'_, Vec<Instance>> {
        self.0.list()
    }
    fn instance_types(&self) -> CloudFuture<'_, Vec<InstanceType>> {
        self.0.instance_types()
    }
    fn is_drifted<'a>(&'a self, instance: &'a Instance) -> CloudFuture<'a, Option<String>> {
        self.0.is_drifted(instance)
    }
    fn poll_events(&self) -> CloudFuture<'_, Vec<quartermaster_cloud::CloudEvent>> {
        self.0.poll_events()
    }
    fn reservations(&self) -> CloudFuture<'_, Vec<Reservation>> {
        Box::pin(async {
            Ok(vec![Reservation {
                id: "cr-0odcr".into(),
                cloud: Cloud::Aws,
                instance_type: "g5.xlarge".into(),
                zone: "us-east-1a".into(),
                count: 2,
                available: Some(2),
                kind: ReservationKind::Default,
                price_per_hour: 0.0,
                start: None,
                end: None,
                tags: Default::default(),
            }])
        })
    }
}

#[tokio::test(start_paused = true)]
async fn pending_pods_go_into_the_reservation_their_pool_selects_before_anything_is_bought() {
    let api = cluster_with_gpu_pool(&[("a", 1), ("b", 1), ("c", 1)]);
    // The pool allows reserved capacity; its class selects the reservation by id.
    let mut pool = api.get(QM, "nodepools", "gpu").expect("the pool");
    pool["spec"]["template"]["spec"]["requirements"][1]["values"] =
        json!(["reserved", "on-demand"]);
    api.insert(QM, "nodepools", pool);
    let mut class = api.get(QM, "awsnodeclasses", "default").expect("the class");
    class["spec"]["capacityReservationSelectorTerms"] = json!([{"id": "cr-0odcr"}]);
    api.insert(QM, "awsnodeclasses", class);
    let mut env = Env::with_provider(api, Leadership::always(), |client, catalog, clock| {
        let kwok = KwokCloud::new(
            client,
            Cloud::Aws,
            catalog,
            KwokConfig::default(),
            clock as Arc<dyn Clock>,
        )
        .expect("default kwok config");
        Arc::new(WithReservation(kwok)) as Arc<dyn CloudProvider>
    });
    env.passes(0, 4).await;
    let claims = env.api.list(QM, "nodeclaims");
    assert_eq!(claims.len(), 3, "{claims:?}");
    let reserved: Vec<&Value> = claims
        .iter()
        .filter(|c| c["metadata"]["labels"][LABEL_RESERVATION_ID] == "cr-0odcr")
        .collect();
    assert_eq!(reserved.len(), 2, "both slots used: {claims:?}");
    for c in &reserved {
        assert_eq!(
            c["metadata"]["labels"]["quartermaster.dev/capacity-type"],
            "reserved"
        );
        assert_eq!(
            c["metadata"]["labels"]["karpenter.k8s.aws/capacity-reservation-id"],
            "cr-0odcr"
        );
    }
    // A restart adopts the reserved claims with their slots: nothing more is launched.
    let mut env = env.restart();
    env.passes(5, 8).await;
    assert_eq!(env.api.list(QM, "nodeclaims").len(), 3);
    let engine = env.driver.engine().expect("an engine");
    let adopted: Vec<_> = engine
        .claims()
        .filter(|c| c.offering.capacity_type == quartermaster_pricing::CapacityType::Reserved)
        .collect();
    assert_eq!(
        adopted.len(),
        2,
        "the reserved claims are adopted, not lost"
    );
}
