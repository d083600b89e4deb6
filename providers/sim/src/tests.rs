//! Behaviour of the simulated cloud, driven through the `CloudProvider` trait with a
//! `ManualClock`.

use std::collections::BTreeMap;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_cloud::{
    CloudError, CloudEvent, CloudProvider, Instance, InstanceState, LaunchRequest, ManualClock,
};
use quartermaster_pricing::{CapacityType, Catalog, Cloud, labels};

use crate::{
    ApiBehaviour, CapacityLimit, CapacityOutage, InterruptionConfig, SimCloud, SimConfig, SimError,
    SimNodeEvent,
};

/// Polls a future that is always ready (every `SimCloud` method returns one).
fn block_on<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => v,
        Poll::Pending => panic!("SimCloud futures are always ready"),
    }
}

fn t0() -> DateTime<Utc> {
    DateTime::from_timestamp(1_767_225_600, 0).unwrap() // 2026-01-01T00:00:00Z
}

fn secs(s: i64) -> TimeDelta {
    TimeDelta::seconds(s)
}

struct Fixture {
    clock: Arc<ManualClock>,
    sim: SimCloud,
}

impl Fixture {
    fn new(cloud: Cloud, config: SimConfig) -> Self {
        Self::with(cloud, Catalog::embedded(), config, 1)
    }

    fn with(cloud: Cloud, catalog: Catalog, config: SimConfig, seed: u64) -> Self {
        let clock = Arc::new(ManualClock::new(t0()));
        let sim = SimCloud::new(cloud, catalog, config, clock.clone(), t0(), seed);
        Self { clock, sim }
    }

    fn at(&self, offset: TimeDelta) {
        self.clock.set(t0() + offset);
    }

    fn now(&self) -> TimeDelta {
        use quartermaster_cloud::Clock;
        self.clock.now() - t0()
    }

    fn create(
        &self,
        claim: &str,
        ty: &str,
        zone: &str,
        ct: CapacityType,
    ) -> Result<Instance, CloudError> {
        block_on(self.sim.create(&request(claim, ty, zone, ct)))
    }

    /// Jumps to the next event; false when there is none.
    fn step(&self) -> bool {
        match self.sim.next_event_at() {
            Some(next) => {
                assert!(
                    next > t0() + self.now(),
                    "next_event_at must be in the future"
                );
                self.clock.set(next);
                true
            }
            None => false,
        }
    }
}

fn request(claim: &str, ty: &str, zone: &str, ct: CapacityType) -> LaunchRequest {
    LaunchRequest {
        claim_name: claim.to_owned(),
        node_pool: "gpu".to_owned(),
        node_class: "default".to_owned(),
        instance_type: ty.to_owned(),
        zone: zone.to_owned(),
        capacity_type: ct,
        price_per_hour: 1.0,
        labels: BTreeMap::from([("karpenter.sh/nodepool".to_owned(), "gpu".to_owned())]),
        tags: BTreeMap::from([("owner".to_owned(), "quartermaster".to_owned())]),
        fallbacks: Vec::new(),
        node_class_spec: None,
    }
}

const OD: CapacityType = CapacityType::OnDemand;
const SPOT: CapacityType = CapacityType::Spot;

fn availability(sim: &SimCloud, ty: &str, zone: &str, ct: CapacityType) -> bool {
    let types = block_on(sim.instance_types()).unwrap();
    let t = types.iter().find(|t| t.name == ty).unwrap();
    t.offerings
        .iter()
        .find(|o| o.zone == zone && o.capacity_type == ct)
        .unwrap()
        .available
}

#[test]
fn create_is_idempotent_on_the_claim_name() {
    let f = Fixture::new(Cloud::Aws, SimConfig::default());
    let a = f
        .create("claim-a", "p5.48xlarge", "us-east-1a", OD)
        .unwrap();
    assert!(
        a.provider_id.starts_with("sim:///us-east-1a/i-0"),
        "{}",
        a.provider_id
    );
    assert_eq!(a.provider_id.len(), "sim:///us-east-1a/i-0".len() + 16);
    assert_eq!(a.state, InstanceState::Pending);
    assert_eq!(a.price_per_hour, 55.04, "billed at the catalog price");
    assert_eq!(a.launched_at, t0());
    assert_eq!(a.tags["owner"], "quartermaster");
    f.at(secs(10));
    // A retry, even of a different shape, returns the same instance.
    let again = f.create("claim-a", "g5.xlarge", "us-east-1b", OD).unwrap();
    assert_eq!(again, a);
    assert_eq!(block_on(f.sim.list()).unwrap().len(), 1);
    let stats = f.sim.stats();
    assert_eq!((stats.launches, stats.idempotent_creates), (1, 1));
    let b = f
        .create("claim-b", "p5.48xlarge", "us-east-1a", OD)
        .unwrap();
    assert_ne!(b.provider_id, a.provider_id);
}

#[test]
fn unknown_types_and_offerings_are_invalid_requests() {
    let f = Fixture::new(Cloud::Aws, SimConfig::default());
    for (ty, zone, ct, want) in [
        (
            "p9.96xlarge",
            "us-east-1a",
            OD,
            "unknown aws instance type \"p9.96xlarge\"",
        ),
        (
            "a3-highgpu-8g",
            "us-east-1a",
            OD,
            "unknown aws instance type",
        ),
        (
            "p5.48xlarge",
            "us-east-1a",
            SPOT,
            "p5.48xlarge is not offered as spot in us-east-1a",
        ),
        (
            "p5.48xlarge",
            "us-west-2a",
            OD,
            "not offered as on-demand in us-west-2a",
        ),
    ] {
        match f.create("c", ty, zone, ct) {
            Err(CloudError::InvalidRequest { message }) => {
                assert!(message.contains(want), "{message}")
            }
            other => panic!("{ty} {zone} {ct}: {other:?}"),
        }
    }
    assert_eq!(f.sim.stats().invalid_requests, 4);
    assert_eq!(f.sim.stats().launches, 0);
}

#[test]
fn an_outage_refuses_launches_until_the_window_closes() {
    let config = SimConfig {
        insufficient_capacity: vec![CapacityOutage {
            instance_type: Some("p5.48xlarge".into()),
            family: None,
            zone: Some("us-east-1a".into()),
            capacity_type: None,
            from: Duration::from_secs(60),
            until: Some(Duration::from_secs(600)),
        }],
        ..SimConfig::default()
    };
    let f = Fixture::new(Cloud::Aws, config);
    // Before the window opens.
    assert_eq!(f.sim.next_event_at(), Some(t0() + secs(60)));
    assert!(availability(&f.sim, "p5.48xlarge", "us-east-1a", OD));
    f.at(secs(60));
    assert!(!availability(&f.sim, "p5.48xlarge", "us-east-1a", OD));
    assert!(availability(&f.sim, "p5.48xlarge", "us-east-1b", OD));
    assert!(availability(&f.sim, "p5.48xlarge", "us-east-1b", SPOT));
    match f.create("c1", "p5.48xlarge", "us-east-1a", OD) {
        Err(CloudError::InsufficientCapacity {
            instance_type,
            zone,
            capacity_type,
            message,
        }) => {
            assert_eq!(
                (instance_type.as_str(), zone.as_str(), capacity_type),
                ("p5.48xlarge", "us-east-1a", OD)
            );
            assert!(
                message.starts_with("InsufficientInstanceCapacity: "),
                "{message}"
            );
            assert!(message.contains("insufficientCapacity[0]"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // Another zone is fine.
    f.create("c2", "p5.48xlarge", "us-east-1b", OD).unwrap();
    // c2 runs at 60 s + 3 min; once its node is ready, the window closing is the next event.
    assert_eq!(f.sim.next_event_at(), Some(t0() + secs(240)));
    f.at(secs(500));
    assert_eq!(f.sim.next_event_at(), Some(t0() + secs(600)));
    f.at(secs(599));
    assert!(
        f.create("c1", "p5.48xlarge", "us-east-1a", OD)
            .unwrap_err()
            .is_capacity()
    );
    f.at(secs(600));
    assert!(availability(&f.sim, "p5.48xlarge", "us-east-1a", OD));
    let ok = f.create("c1", "p5.48xlarge", "us-east-1a", OD).unwrap();
    assert_eq!(ok.state, InstanceState::Pending);
    let stats = f.sim.stats();
    assert_eq!((stats.launches, stats.capacity_errors), (2, 2));
    let o = stats
        .offerings
        .iter()
        .find(|o| o.instance_type == "p5.48xlarge" && o.zone == "us-east-1a")
        .unwrap();
    assert_eq!((o.launches, o.capacity_errors, o.live), (1, 2, 1));
}

#[test]
fn capacity_errors_are_worded_per_cloud() {
    let outage = |_| SimConfig {
        insufficient_capacity: vec![CapacityOutage {
            instance_type: None,
            family: None,
            zone: None,
            capacity_type: None,
            from: Duration::ZERO,
            until: None,
        }],
        ..SimConfig::default()
    };
    let gcp = Fixture::new(Cloud::Gcp, outage(()));
    let err = gcp
        .create("c", "g2-standard-4", "us-central1-a", SPOT)
        .unwrap_err();
    assert!(
        err.to_string().contains("ZONE_RESOURCE_POOL_EXHAUSTED"),
        "{err}"
    );
    let azure = Fixture::new(Cloud::Azure, outage(()));
    let err = azure
        .create("c", "Standard_NC24ads_A100_v4", "eastus-1", OD)
        .unwrap_err();
    assert!(err.to_string().contains("ZonalAllocationFailed"), "{err}");
    // An outage without an end: no future event.
    assert_eq!(azure.sim.next_event_at(), None);
}

#[test]
fn capacity_limits_count_live_instances() {
    let config = SimConfig {
        capacity: vec![
            CapacityLimit {
                instance_type: None,
                family: Some("g5".into()),
                zone: None,
                capacity_type: None,
                max: 2,
            },
            CapacityLimit {
                instance_type: Some("p5.48xlarge".into()),
                family: None,
                zone: None,
                capacity_type: Some(SPOT),
                max: 1,
            },
        ],
        ..SimConfig::default()
    };
    let f = Fixture::new(Cloud::Aws, config);
    // The family limit counts every zone together.
    let a = f.create("a", "g5.xlarge", "us-east-1a", OD).unwrap();
    f.create("b", "g5.2xlarge", "us-east-1b", OD).unwrap();
    // g5 zones come from SKY-AWS: us-east-1a, b, d, e, f (no use1-az3 row).
    assert!(!availability(&f.sim, "g5.xlarge", "us-east-1d", OD));
    match f.create("c", "g5.12xlarge", "us-east-1d", OD) {
        Err(CloudError::InsufficientCapacity { message, .. }) => {
            assert!(
                message.contains("capacity[0] of 2 instances reached"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
    f.create("d", "g6.xlarge", "us-east-1a", OD).unwrap();
    // The capacity-type limit leaves on-demand alone.
    f.create("s1", "p5.48xlarge", "us-east-1b", SPOT).unwrap();
    assert!(!availability(&f.sim, "p5.48xlarge", "us-east-1c", SPOT));
    assert!(availability(&f.sim, "p5.48xlarge", "us-east-1c", OD));
    let err = f
        .create("s2", "p5.48xlarge", "us-east-1c", SPOT)
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("capacity[1] of 1 instances reached"),
        "{err}"
    );
    f.create("o1", "p5.48xlarge", "us-east-1c", OD).unwrap();
    // Deleting frees a slot.
    block_on(f.sim.delete(&a.provider_id)).unwrap();
    assert!(availability(&f.sim, "g5.xlarge", "us-east-1d", OD));
    f.create("c", "g5.12xlarge", "us-east-1d", OD).unwrap();
    let stats = f.sim.stats();
    assert_eq!((stats.live, stats.capacity_errors), (5, 2));
}

#[test]
fn a_cpu_node_launches_registers_and_is_ready_at_once() {
    let f = Fixture::new(Cloud::Aws, SimConfig::default());
    let i = f.create("cpu-1", "m6i.large", "us-east-1a", OD).unwrap();
    let get = |f: &Fixture| block_on(f.sim.get(&i.provider_id)).unwrap().state;
    f.at(secs(39));
    assert_eq!(get(&f), InstanceState::Pending);
    assert!(f.sim.node_events().is_empty());
    f.at(secs(40));
    assert_eq!(get(&f), InstanceState::Running);
    assert!(f.sim.node_events().is_empty());
    f.at(secs(69));
    assert!(f.sim.node_events().is_empty());
    f.at(secs(70));
    let events = f.sim.node_events();
    let ty = Catalog::embedded()
        .get(Cloud::Aws, "m6i.large")
        .unwrap()
        .clone();
    let [
        SimNodeEvent::Registered {
            provider_id,
            claim_name,
            node,
        },
        SimNodeEvent::AcceleratorsReady {
            provider_id: ready_id,
            node_name,
            allocatable,
        },
    ] = events.as_slice()
    else {
        panic!("{events:?}")
    };
    assert_eq!(
        (provider_id, claim_name.as_str()),
        (&i.provider_id, "cpu-1")
    );
    assert_eq!(node.name, "ip-10-0-0-4.ec2.internal");
    assert_eq!(node.labels["kubernetes.io/hostname"], node.name);
    assert_eq!(node.labels["karpenter.sh/nodepool"], "gpu");
    assert_eq!(node.labels[labels::ZONE], "us-east-1a");
    assert_eq!(node.labels[labels::CAPACITY_TYPE], "on-demand");
    assert_eq!(node.labels[labels::INSTANCE_TYPE], "m6i.large");
    assert_eq!(node.capacity, ty.capacity());
    assert_eq!(node.allocatable, ty.allocatable());
    assert_eq!((ready_id, node_name), (&i.provider_id, &node.name));
    assert_eq!(allocatable, &ty.allocatable());
    // Each event is reported once.
    assert!(f.sim.node_events().is_empty());
    assert_eq!(f.sim.next_event_at(), None);
}

#[test]
fn a_gpu_node_gets_its_accelerators_after_the_device_plugin_delay() {
    let f = Fixture::new(Cloud::Aws, SimConfig::default());
    let i = f.create("gpu-1", "p5.48xlarge", "us-east-1a", OD).unwrap();
    let ty = Catalog::embedded()
        .get(Cloud::Aws, "p5.48xlarge")
        .unwrap()
        .clone();
    // p5 is a slow-launch family: 3 min, then 30 s to register, then 45 s for the plugin.
    let mut seen = Vec::new();
    while f.step() {
        let state = block_on(f.sim.get(&i.provider_id)).unwrap().state;
        seen.push((f.now().num_seconds(), state, f.sim.node_events()));
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    assert_eq!((seen[0].0, seen[0].1), (180, InstanceState::Running));
    assert!(seen[0].2.is_empty());
    assert_eq!(seen[1].0, 210);
    let [SimNodeEvent::Registered { node, .. }] = seen[1].2.as_slice() else {
        panic!("{:?}", seen[1])
    };
    assert!(!node.allocatable.contains_key("nvidia.com/gpu"));
    assert!(!node.capacity.contains_key("nvidia.com/gpu"));
    assert_eq!(
        node.allocatable["vpc.amazonaws.com/efa"], 32,
        "EFA is not the accelerator"
    );
    assert_eq!(node.allocatable["cpu"], ty.allocatable()["cpu"]);
    assert_eq!(seen[2].0, 255);
    let [SimNodeEvent::AcceleratorsReady { allocatable, .. }] = seen[2].2.as_slice() else {
        panic!("{:?}", seen[2])
    };
    assert_eq!(allocatable["nvidia.com/gpu"], 8);
    assert_eq!(allocatable, &ty.allocatable());
}

#[test]
fn latencies_come_from_the_config_tables() {
    let config = SimConfig {
        launch_latency: crate::LatencyTable::uniform(Duration::from_secs(10))
            .with_family("g5", Duration::from_secs(100)),
        registration_delay: crate::LatencyTable::uniform(Duration::from_secs(5)),
        device_plugin_delay: crate::LatencyTable::uniform(Duration::from_secs(7)),
        ..SimConfig::default()
    };
    let f = Fixture::new(Cloud::Aws, config);
    f.create("g", "g5.xlarge", "us-east-1a", OD).unwrap();
    f.create("p", "p5.48xlarge", "us-east-1a", OD).unwrap();
    let mut times = Vec::new();
    while f.step() {
        times.push(f.now().num_seconds());
    }
    // p5: 10, 15, 22; g5: 100, 105, 112.
    assert_eq!(times, [10, 15, 22, 100, 105, 112]);
}

#[test]
fn never_ready_accelerators_never_report() {
    let config = SimConfig {
        accelerators_never_ready: 1.0,
        ..SimConfig::default()
    };
    let f = Fixture::new(Cloud::Aws, config);
    f.create("gpu", "g5.xlarge", "us-east-1a", OD).unwrap();
    f.create("cpu", "m6i.large", "us-east-1a", OD).unwrap();
    let mut events = Vec::new();
    while f.step() {
        events.extend(f.sim.node_events());
    }
    f.at(TimeDelta::days(1));
    events.extend(f.sim.node_events());
    let ready: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            SimNodeEvent::AcceleratorsReady { node_name, .. } => Some(node_name.as_str()),
            SimNodeEvent::Registered { .. }
            | SimNodeEvent::GpuFailed { .. }
            | SimNodeEvent::Rebooted { .. } => None,
        })
        .collect();
    let registered = events
        .iter()
        .filter(|e| matches!(e, SimNodeEvent::Registered { .. }))
        .count();
    assert_eq!(registered, 2);
    // Only the CPU node (nothing to wait for) is ready.
    assert_eq!(ready, ["ip-10-0-0-5.ec2.internal"]);
}

/// A catalog with the embedded types of `cloud` plus, for Azure (whose static sources list no
/// spot prices), a spot offering of `Standard_NC24ads_A100_v4` in eastus-1.
fn catalog_with_spot(cloud: Cloud) -> Catalog {
    let mut types: Vec<_> = Catalog::embedded().for_cloud(cloud).cloned().collect();
    if cloud == Cloud::Azure {
        let t = types
            .iter_mut()
            .find(|t| t.name == "Standard_NC24ads_A100_v4")
            .unwrap();
        let mut spot = t.offerings[0].clone();
        spot.capacity_type = SPOT;
        spot.price_per_hour = 1.0;
        t.offerings.push(spot);
    }
    Catalog::new(types)
}

#[test]
fn spot_interruptions_give_each_clouds_notice_then_terminate() {
    for (cloud, ty, zone, notice) in [
        (Cloud::Aws, "p5.48xlarge", "us-east-1b", 120),
        (Cloud::Gcp, "g2-standard-4", "us-central1-a", 30),
        (Cloud::Azure, "Standard_NC24ads_A100_v4", "eastus-1", 30),
    ] {
        let config = SimConfig {
            interruptions: InterruptionConfig {
                spot_rate_per_hour: 2.0,
                notice: None,
            },
            ..SimConfig::default()
        };
        let f = Fixture::with(cloud, catalog_with_spot(cloud), config, 3);
        let spot = f.create("spot", ty, zone, SPOT).unwrap();
        let od = f.create("od", ty, zone, OD).unwrap();
        let mut cloud_events = Vec::new();
        while f.step() {
            for e in block_on(f.sim.poll_events()).unwrap() {
                cloud_events.push((f.now(), e));
            }
            f.sim.node_events();
        }
        let [
            (
                noticed,
                CloudEvent::Interruption {
                    provider_id,
                    terminates_at,
                },
            ),
            (
                gone,
                CloudEvent::Terminated {
                    provider_id: gone_id,
                },
            ),
        ] = cloud_events.as_slice()
        else {
            panic!("{cloud}: {cloud_events:?}")
        };
        assert_eq!(provider_id, &spot.provider_id);
        assert_eq!(gone_id, &spot.provider_id);
        assert_eq!(*terminates_at - (t0() + *noticed), secs(notice), "{cloud}");
        assert_eq!(t0() + *gone, *terminates_at, "{cloud}");
        // The instance is gone; the on-demand one is not interrupted.
        assert!(matches!(
            block_on(f.sim.get(&spot.provider_id)),
            Err(CloudError::NotFound { .. })
        ));
        assert!(matches!(
            block_on(f.sim.delete(&spot.provider_id)),
            Err(CloudError::NotFound { .. })
        ));
        let live = block_on(f.sim.list()).unwrap();
        assert_eq!(live.len(), 1);
        assert_eq!(live[0].provider_id, od.provider_id);
        assert!(
            block_on(f.sim.poll_events()).unwrap().is_empty(),
            "reported once"
        );
        let stats = f.sim.stats();
        assert_eq!((stats.interruptions, stats.reclaims, stats.live), (1, 1, 1));
    }
}

#[test]
fn held_interruptions_are_called_off_for_live_and_later_spot_instances() {
    // At 20 an hour every spot instance would be noticed within minutes; held at once, none is.
    let config = SimConfig {
        interruptions: InterruptionConfig {
            spot_rate_per_hour: 20.0,
            notice: None,
        },
        ..SimConfig::default()
    };
    let f = Fixture::new(Cloud::Aws, config);
    f.create("before", "p5.48xlarge", "us-east-1b", SPOT)
        .unwrap();
    f.sim.hold_interruptions();
    f.create("after", "p5.48xlarge", "us-east-1b", SPOT)
        .unwrap();
    let mut events = Vec::new();
    while f.step() {
        events.extend(block_on(f.sim.poll_events()).unwrap());
        f.sim.node_events();
    }
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(block_on(f.sim.list()).unwrap().len(), 2);
    assert_eq!(f.sim.stats().interruptions, 0);
}

#[test]
fn the_notice_period_can_be_overridden() {
    let config = SimConfig {
        interruptions: InterruptionConfig {
            spot_rate_per_hour: 5.0,
            notice: Some(Duration::from_secs(10)),
        },
        ..SimConfig::default()
    };
    let f = Fixture::new(Cloud::Aws, config);
    f.create("s", "p5.48xlarge", "us-east-1b", SPOT).unwrap();
    let mut events = Vec::new();
    while f.step() {
        events.extend(
            block_on(f.sim.poll_events())
                .unwrap()
                .into_iter()
                .map(|e| (f.now(), e)),
        );
    }
    let [
        (noticed, CloudEvent::Interruption { terminates_at, .. }),
        (gone, _),
    ] = events.as_slice()
    else {
        panic!("{events:?}")
    };
    assert_eq!(*terminates_at, t0() + *noticed + secs(10));
    assert_eq!(*gone, *noticed + secs(10));
}

#[test]
fn interruption_times_follow_the_configured_rate() {
    // 400 spot instances at 1 interruption per hour: the mean time from running to the notice
    // is about an hour (the standard error of the mean is 3 minutes).
    let config = SimConfig {
        interruptions: InterruptionConfig {
            spot_rate_per_hour: 1.0,
            notice: None,
        },
        ..SimConfig::default()
    };
    let f = Fixture::new(Cloud::Aws, config);
    for n in 0..400 {
        f.create(&format!("s{n}"), "p4d.24xlarge", "us-east-1b", SPOT)
            .unwrap();
    }
    let mut lifetimes = Vec::new();
    while f.step() {
        for e in block_on(f.sim.poll_events()).unwrap() {
            if let CloudEvent::Interruption { .. } = e {
                // All launched at t0 and running at 3 min.
                lifetimes.push((f.now() - secs(180)).num_seconds() as f64 / 3600.0);
            }
        }
    }
    assert_eq!(lifetimes.len(), 400);
    let mean = lifetimes.iter().sum::<f64>() / 400.0;
    assert!((0.85..1.15).contains(&mean), "mean {mean} h");
    assert_eq!(f.sim.stats().reclaims, 400);
}

#[test]
fn delete_terminates_and_then_reports_not_found() {
    let f = Fixture::new(Cloud::Aws, SimConfig::default());
    let a = f.create("a", "g5.xlarge", "us-east-1a", OD).unwrap();
    let b = f.create("b", "g5.xlarge", "us-east-1a", OD).unwrap();
    f.at(secs(20));
    // Deleted while pending: it never registers.
    block_on(f.sim.delete(&a.provider_id)).unwrap();
    assert!(matches!(
        block_on(f.sim.delete(&a.provider_id)),
        Err(CloudError::NotFound { provider_id }) if provider_id == a.provider_id
    ));
    assert!(matches!(
        block_on(f.sim.get(&a.provider_id)),
        Err(CloudError::NotFound { .. })
    ));
    assert!(matches!(
        block_on(f.sim.delete("sim:///us-east-1a/i-0nope")),
        Err(CloudError::NotFound { .. })
    ));
    let mut events = Vec::new();
    while f.step() {
        events.extend(f.sim.node_events());
    }
    assert_eq!(
        events.len(),
        2,
        "only b registers and becomes ready: {events:?}"
    );
    assert!(events.iter().all(|e| match e {
        SimNodeEvent::Registered { provider_id, .. }
        | SimNodeEvent::AcceleratorsReady { provider_id, .. }
        | SimNodeEvent::GpuFailed { provider_id, .. }
        | SimNodeEvent::Rebooted { provider_id, .. } => *provider_id == b.provider_id,
    }));
    // Deletion is not an event of the cloud's own.
    assert!(block_on(f.sim.poll_events()).unwrap().is_empty());
    // A new create for the deleted claim launches a new instance.
    let a2 = f.create("a", "g5.xlarge", "us-east-1a", OD).unwrap();
    assert_ne!(a2.provider_id, a.provider_id);
    let ids: Vec<_> = block_on(f.sim.list())
        .unwrap()
        .into_iter()
        .map(|i| i.provider_id)
        .collect();
    assert_eq!(ids, [b.provider_id.clone(), a2.provider_id.clone()]);
    block_on(f.sim.delete(&b.provider_id)).unwrap();
    assert_eq!(f.sim.stats().deletes, 2);
}

#[test]
fn deleting_after_the_notice_prevents_the_reclaim() {
    let config = SimConfig {
        interruptions: InterruptionConfig {
            spot_rate_per_hour: 10.0,
            notice: None,
        },
        ..SimConfig::default()
    };
    let f = Fixture::new(Cloud::Aws, config);
    let s = f.create("s", "p5.48xlarge", "us-east-1b", SPOT).unwrap();
    let mut events = Vec::new();
    while events.is_empty() && f.step() {
        events = block_on(f.sim.poll_events()).unwrap();
    }
    assert!(matches!(
        events.as_slice(),
        [CloudEvent::Interruption { .. }]
    ));
    // The engine drains and deletes the node within the notice.
    block_on(f.sim.delete(&s.provider_id)).unwrap();
    while f.step() {}
    f.at(TimeDelta::days(1));
    assert!(block_on(f.sim.poll_events()).unwrap().is_empty());
    let stats = f.sim.stats();
    assert_eq!(
        (stats.interruptions, stats.reclaims, stats.deletes),
        (1, 0, 1)
    );
}

#[test]
fn next_event_at_walks_every_event_in_time_order() {
    let config = SimConfig {
        insufficient_capacity: vec![CapacityOutage {
            instance_type: None,
            family: Some("p4d".into()),
            zone: None,
            capacity_type: None,
            from: Duration::from_secs(200),
            until: Some(Duration::from_secs(260)),
        }],
        ..SimConfig::default()
    };
    let f = Fixture::new(Cloud::Aws, config);
    f.create("p5", "p5.48xlarge", "us-east-1a", OD).unwrap();
    f.at(secs(5));
    f.create("m6i", "m6i.large", "us-east-1a", OD).unwrap();
    let mut times = Vec::new();
    while f.step() {
        times.push(f.now().num_seconds());
    }
    // m6i: running 45, registered + ready 75; p5: running 180, registered 210, ready 255;
    // outage window opens 200 and closes 260.
    assert_eq!(times, [45, 75, 180, 200, 210, 255, 260]);
    assert_eq!(f.sim.next_event_at(), None);
}

#[test]
fn throttling_refuses_calls_with_a_retry_delay() {
    let config = SimConfig {
        api: ApiBehaviour {
            throttle_probability: 1.0,
            ..ApiBehaviour::default()
        },
        ..SimConfig::default()
    };
    let f = Fixture::new(Cloud::Aws, config);
    let throttled = CloudError::Throttled {
        retry_after: Some(Duration::from_secs(1)),
    };
    assert_eq!(
        f.create("a", "g5.xlarge", "us-east-1a", OD).unwrap_err(),
        throttled
    );
    assert_eq!(block_on(f.sim.list()).unwrap_err(), throttled);
    assert_eq!(block_on(f.sim.get("x")).unwrap_err(), throttled);
    assert_eq!(block_on(f.sim.delete("x")).unwrap_err(), throttled);
    assert!(block_on(f.sim.instance_types()).is_ok());
    assert!(block_on(f.sim.poll_events()).is_ok());
    let stats = f.sim.stats();
    assert_eq!((stats.throttles, stats.launches), (4, 0));
}

#[test]
fn server_errors_do_nothing_and_lost_answers_hide_work_that_was_done() {
    let errors = SimConfig {
        api: ApiBehaviour {
            error_probability: 1.0,
            ..ApiBehaviour::default()
        },
        ..SimConfig::default()
    };
    let f = Fixture::new(Cloud::Aws, errors);
    let e = f.create("a", "g5.xlarge", "us-east-1a", OD).unwrap_err();
    assert!(e.is_retryable(), "{e:?}");
    assert_eq!(
        (f.sim.stats().server_errors, f.sim.stats().launches),
        (1, 0)
    );
    assert!(f.sim.live_instances().is_empty());

    let lost = SimConfig {
        api: ApiBehaviour {
            lost_response_probability: 1.0,
            ..ApiBehaviour::default()
        },
        ..SimConfig::default()
    };
    let f = Fixture::new(Cloud::Aws, lost);
    // The launch took effect though it answered with an error; trying again finds it.
    let e = f.create("a", "g5.xlarge", "us-east-1a", OD).unwrap_err();
    assert!(e.is_retryable(), "{e:?}");
    let live = f.sim.live_instances();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].1, "a");
    assert_eq!(
        f.create("a", "g5.xlarge", "us-east-1a", OD)
            .unwrap()
            .provider_id,
        live[0].0
    );
    let stats = f.sim.stats();
    assert_eq!((stats.launches, stats.idempotent_creates), (1, 1));
    // The delete took effect too; a second one is told the instance is gone.
    assert!(block_on(f.sim.delete(&live[0].0)).is_err());
    assert!(f.sim.live_instances().is_empty());
    assert!(matches!(
        block_on(f.sim.delete(&live[0].0)),
        Err(CloudError::NotFound { .. })
    ));
}

/// Runs a busy scenario and records everything observable.
fn transcript(seed: u64) -> Vec<String> {
    let config = SimConfig {
        accelerators_never_ready: 0.5,
        interruptions: InterruptionConfig {
            spot_rate_per_hour: 3.0,
            notice: None,
        },
        api: ApiBehaviour {
            throttle_probability: 0.3,
            ..ApiBehaviour::default()
        },
        ..SimConfig::default()
    };
    let f = Fixture::with(Cloud::Aws, Catalog::embedded(), config, seed);
    let mut out = Vec::new();
    for n in 0..20 {
        let created = if n % 2 == 0 {
            f.create(&format!("c{n}"), "p5.48xlarge", "us-east-1b", SPOT)
        } else {
            f.create(&format!("c{n}"), "g5.xlarge", "us-east-1a", OD)
        };
        out.push(format!("{created:?}"));
    }
    while f.step() {
        out.push(format!("{:?}", f.now()));
        out.push(format!("{:?}", f.sim.node_events()));
        out.push(format!("{:?}", block_on(f.sim.poll_events())));
        out.push(format!("{:?}", block_on(f.sim.list())));
    }
    out.push(format!("{:?}", f.sim.stats()));
    out
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let a = transcript(11);
    assert_eq!(a, transcript(11));
    assert_ne!(a, transcript(12));
    // The run exercised every behaviour.
    let all = a.join("\n");
    for needle in [
        "Throttled",
        "Interruption",
        "Terminated",
        "AcceleratorsReady",
        "Registered",
    ] {
        assert!(all.contains(needle), "{needle}");
    }
}

#[test]
fn gcp_and_azure_name_nodes_after_the_claim() {
    for (cloud, ty, zone, want) in [
        (Cloud::Gcp, "g2-standard-4", "us-central1-a", "gpu-7"),
        (
            Cloud::Azure,
            "Standard_NC24ads_A100_v4",
            "eastus-1",
            "aks-gpu-7",
        ),
    ] {
        let f = Fixture::new(cloud, SimConfig::default());
        let i = f.create("gpu-7", ty, zone, OD).unwrap();
        assert!(i.provider_id.starts_with(&format!("sim:///{zone}/")));
        while f.step() {
            for e in f.sim.node_events() {
                if let SimNodeEvent::Registered { node, .. } = e {
                    assert_eq!(node.name, want);
                    assert_eq!(node.labels[labels::CLOUD], cloud.as_str());
                }
            }
        }
    }
}

#[test]
fn instance_types_are_this_clouds_catalog() {
    let f = Fixture::new(Cloud::Gcp, SimConfig::default());
    let types = block_on(f.sim.instance_types()).unwrap();
    let want: Vec<_> = Catalog::embedded().for_cloud(Cloud::Gcp).cloned().collect();
    assert_eq!(types, want);
    assert_eq!(f.sim.cloud(), Cloud::Gcp);
    let i = f.create("c", "g2-standard-4", "us-central1-a", OD).unwrap();
    assert_eq!(block_on(f.sim.is_drifted(&i)).unwrap(), None);
}

#[test]
fn an_invalid_config_is_refused() {
    let clock = Arc::new(ManualClock::new(t0()));
    let config = SimConfig {
        accelerators_never_ready: 2.0,
        ..SimConfig::default()
    };
    let err = SimCloud::try_new(Cloud::Aws, Catalog::embedded(), config, clock, t0(), 0)
        .err()
        .unwrap();
    assert_eq!(
        err,
        SimError::InvalidConfig {
            field: "acceleratorsNeverReady".into(),
            reason: "must be a probability between 0 and 1, got 2".into(),
        }
    );
}

const FLEX: CapacityType = CapacityType::FlexStart;

/// A3 on GCP, flex-start offerings included.
fn flex_fixture(config: SimConfig) -> Fixture {
    Fixture::with(
        Cloud::Gcp,
        Catalog::embedded().with_flex_start_offerings(),
        config,
        1,
    )
}

#[test]
fn a_flex_start_launch_waits_in_the_queue_then_runs_until_its_maximum_run() {
    let config = SimConfig {
        flex_start: crate::FlexStartConfig {
            wait: crate::LatencyTable::uniform(Duration::from_secs(600))
                .with_family("g2", Duration::from_secs(60)),
        },
        ..SimConfig::default()
    };
    let f = flex_fixture(config);
    let i = f
        .create("flex", "a3-highgpu-8g", "us-central1-a", FLEX)
        .unwrap();
    assert_eq!(i.capacity_type, FLEX);
    assert_eq!(i.state, InstanceState::Pending, "queued");
    let od = f
        .create("od", "a3-highgpu-8g", "us-central1-a", OD)
        .unwrap();
    let mut running = Vec::new();
    let mut terminated = Vec::new();
    while f.step() {
        for e in block_on(f.sim.poll_events()).unwrap() {
            if let CloudEvent::Terminated { provider_id } = e {
                terminated.push((f.now(), provider_id));
            }
        }
        for e in f.sim.node_events() {
            if let SimNodeEvent::Registered { provider_id, .. } = e {
                running.push((f.now(), provider_id));
            }
        }
    }
    // a3: 10 min in the queue, then 3 min to boot and 30 s to register; on-demand boots at once.
    assert_eq!(
        running,
        [
            (secs(210), od.provider_id.clone()),
            (secs(600 + 210), i.provider_id.clone())
        ]
    );
    // Deleted by the cloud seven days after it ran, never interrupted before.
    assert_eq!(
        terminated,
        [(secs(600 + 180) + TimeDelta::days(7), i.provider_id.clone())]
    );
    let stats = f.sim.stats();
    assert_eq!(
        (
            stats.flex_start_launches,
            stats.flex_start_reclaims,
            stats.reclaims,
            stats.interruptions
        ),
        (1, 1, 1, 0)
    );
    let live = block_on(f.sim.list()).unwrap();
    assert_eq!(live.len(), 1, "the on-demand instance runs on");
}

#[test]
fn a_flex_start_wait_beyond_the_longest_is_insufficient_capacity() {
    let config = SimConfig {
        flex_start: crate::FlexStartConfig {
            wait: crate::LatencyTable::uniform(Duration::from_secs(2 * 3600 + 1)),
        },
        ..SimConfig::default()
    };
    let f = flex_fixture(config);
    let err = f
        .create("flex", "a3-highgpu-8g", "us-central1-a", FLEX)
        .unwrap_err();
    let CloudError::InsufficientCapacity {
        capacity_type,
        message,
        ..
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(*capacity_type, FLEX);
    assert!(
        message.contains("not fulfilled within its maximum wait"),
        "{message}"
    );
    assert_eq!(f.sim.stats().capacity_errors, 1);
    // Other capacity types are not queued.
    f.create("od", "a3-highgpu-8g", "us-central1-a", OD)
        .unwrap();
    assert_eq!(f.sim.stats().flex_start_launches, 0);
}

#[test]
fn flex_start_wait_reads_from_a_file() {
    let config: SimConfig =
        serde_norway::from_str("flexStart: { wait: { default: 5m, families: { a3: 40m } } }")
            .unwrap();
    assert_eq!(
        config.flex_start.wait.for_family("a3"),
        Duration::from_secs(2400)
    );
    assert_eq!(
        SimConfig::default().flex_start.wait.for_family("a2"),
        Duration::from_secs(300)
    );
}
