//! [`SimCloud`]: the simulated cloud behind the [`CloudProvider`] trait.

use std::collections::BTreeMap;
use std::future::ready;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use quartermaster_cloud::{
    Clock, CloudError, CloudEvent, CloudFuture, CloudProvider, Instance, LaunchRequest,
};
use quartermaster_pricing::{CapacityType, Catalog, Cloud, InstanceType};

use crate::config::after;
use crate::events::{SimNode, SimNodeEvent};
use crate::instance::{Reported, SimInstance, Timeline, node_name};
use crate::rng::SplitMix64;
use crate::stats::{OfferingStats, SimStats};
use crate::{SimConfig, SimError};

/// The `kubernetes.io/hostname` label.
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// How long a throttled caller is told to wait.
const THROTTLE_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The random stream of API behaviour (throttling); instance `seq` uses stream `seq + 1`.
const API_STREAM: u64 = 0;

/// A simulated cloud: a [`CloudProvider`] that launches instances of one cloud's catalog,
/// driven by the clock it is given.
///
/// It behaves like a cloud: launches take time, nodes register and their device plugins
/// report later, capacity runs out, spot instances are interrupted with the cloud's notice,
/// the API throttles. Everything is decided by the [`SimConfig`], the seed and the sequence
/// of calls, so a run repeats exactly. It never reads the system clock and never blocks: every
/// trait method returns a ready future.
pub struct SimCloud {
    cloud: Cloud,
    catalog: Catalog,
    config: SimConfig,
    clock: Arc<dyn Clock>,
    start: DateTime<Utc>,
    seed: u64,
    state: Mutex<State>,
}

/// Everything that changes.
struct State {
    /// In launch order; `seq` is the index.
    instances: Vec<SimInstance>,
    /// The latest instance launched for each claim.
    by_claim: BTreeMap<String, usize>,
    /// Instances by provider id.
    by_id: BTreeMap<String, usize>,
    /// Throttling draws.
    api_rng: SplitMix64,
    counters: Counters,
}

#[derive(Default)]
struct Counters {
    launches: u64,
    idempotent_creates: u64,
    capacity_errors: u64,
    invalid_requests: u64,
    throttles: u64,
    deletes: u64,
    /// (instance type, zone, capacity type) → (launches, capacity errors).
    offerings: BTreeMap<(String, String, CapacityType), (u64, u64)>,
}

impl SimCloud {
    /// A simulated `cloud` selling `catalog`'s types of that cloud, behaving as `config` says,
    /// reading time from `clock`; outage windows are offsets from `start`; randomness comes
    /// from `seed`.
    ///
    /// # Panics
    ///
    /// If `config` is invalid ([`SimConfig::validate`]); use [`SimCloud::try_new`] for configs
    /// read from files.
    pub fn new(
        cloud: Cloud,
        catalog: Catalog,
        config: SimConfig,
        clock: Arc<dyn Clock>,
        start: DateTime<Utc>,
        seed: u64,
    ) -> Self {
        Self::try_new(cloud, catalog, config, clock, start, seed).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`SimCloud::new`], failing on an invalid config instead of panicking.
    pub fn try_new(
        cloud: Cloud,
        catalog: Catalog,
        config: SimConfig,
        clock: Arc<dyn Clock>,
        start: DateTime<Utc>,
        seed: u64,
    ) -> Result<Self, SimError> {
        config.validate()?;
        Ok(Self {
            cloud,
            catalog,
            config,
            clock,
            start,
            seed,
            state: Mutex::new(State {
                instances: Vec::new(),
                by_claim: BTreeMap::new(),
                by_id: BTreeMap::new(),
                api_rng: SplitMix64::stream(seed, API_STREAM),
                counters: Counters::default(),
            }),
        })
    }

    /// Kubelet-side events due at the clock's now that have not been returned before, in the
    /// order they happened: Nodes registering, device plugins reporting. (Sim-only: the engine
    /// learns about nodes from the cluster, not the cloud.) Events of an instance that was
    /// gone before they were due never happen.
    pub fn node_events(&self) -> Vec<SimNodeEvent> {
        let now = self.clock.now();
        let mut st = self.lock();
        let mut due = Vec::new();
        for (seq, inst) in st.instances.iter_mut().enumerate() {
            let t = &inst.timeline;
            if !inst.reported.registered && t.registered_at <= now && t.happens(t.registered_at) {
                inst.reported.registered = true;
                due.push((
                    t.registered_at,
                    seq,
                    0,
                    SimNodeEvent::Registered {
                        provider_id: inst.provider_id.clone(),
                        claim_name: inst.claim_name.clone(),
                        node: inst.node.clone(),
                    },
                ));
            }
            let t = &inst.timeline;
            if let Some(at) = t.accelerators_at
                && !inst.reported.accelerators
                && at <= now
                && t.happens(at)
            {
                inst.reported.accelerators = true;
                due.push((
                    at,
                    seq,
                    1,
                    SimNodeEvent::AcceleratorsReady {
                        provider_id: inst.provider_id.clone(),
                        node_name: inst.node.name.clone(),
                        allocatable: inst.full_allocatable.clone(),
                    },
                ));
            }
        }
        in_order(due)
    }

    /// The earliest time after the clock's now at which something will happen: a launch
    /// completes, a Node registers, accelerators appear, an interruption notice is given, an
    /// instance is reclaimed, or an outage window opens or closes. The simulation's event loop
    /// jumps the clock there. `None` when nothing more will ever happen on its own.
    pub fn next_event_at(&self) -> Option<DateTime<Utc>> {
        let now = self.clock.now();
        let st = self.lock();
        let instants = st
            .instances
            .iter()
            .flat_map(|i| i.timeline.upcoming(now))
            .min();
        let outages = self
            .config
            .insufficient_capacity
            .iter()
            .flat_map(|o| {
                let (from, until) = o.window(self.start);
                [Some(from), until]
            })
            .flatten()
            .filter(|t| *t > now)
            .min();
        instants.into_iter().chain(outages).min()
    }

    /// Counters as of the clock's now.
    pub fn stats(&self) -> SimStats {
        let now = self.clock.now();
        let st = self.lock();
        let c = &st.counters;
        let mut offerings: BTreeMap<(String, String, CapacityType), OfferingStats> = c
            .offerings
            .iter()
            .map(|((ty, zone, ct), &(launches, capacity_errors))| {
                let stats = OfferingStats {
                    instance_type: ty.clone(),
                    zone: zone.clone(),
                    capacity_type: *ct,
                    launches,
                    capacity_errors,
                    interruptions: 0,
                    live: 0,
                };
                ((ty.clone(), zone.clone(), *ct), stats)
            })
            .collect();
        let mut stats = SimStats {
            launches: c.launches,
            idempotent_creates: c.idempotent_creates,
            capacity_errors: c.capacity_errors,
            invalid_requests: c.invalid_requests,
            throttles: c.throttles,
            deletes: c.deletes,
            ..SimStats::default()
        };
        for inst in &st.instances {
            let t = &inst.timeline;
            let interrupted = t.noticed_at().is_some_and(|n| n <= now);
            let live = t.is_live(now);
            stats.interruptions += u64::from(interrupted);
            stats.reclaims += u64::from(t.reclaimed_at().is_some_and(|r| r <= now));
            stats.live += u64::from(live);
            let key = (
                inst.instance_type.clone(),
                inst.zone.clone(),
                inst.capacity_type,
            );
            if let Some(o) = offerings.get_mut(&key) {
                o.interruptions += u64::from(interrupted);
                o.live += u64::from(live);
            }
        }
        stats.offerings = offerings.into_values().collect();
        stats
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Draws whether this API call is throttled.
    fn throttle(&self, st: &mut State) -> Result<(), CloudError> {
        if st.api_rng.chance(self.config.api.throttle_probability) {
            st.counters.throttles += 1;
            return Err(CloudError::Throttled {
                retry_after: Some(THROTTLE_RETRY_AFTER),
            });
        }
        Ok(())
    }

    /// Live instances counted against each of `config.capacity`'s limits, in order.
    fn limit_counts(&self, st: &State, now: DateTime<Utc>) -> Vec<u32> {
        self.config
            .capacity
            .iter()
            .map(|l| {
                let s = l.selector();
                let n = st
                    .instances
                    .iter()
                    .filter(|i| {
                        i.timeline.is_live(now)
                            && s.matches(&i.instance_type, &i.family, &i.zone, i.capacity_type)
                    })
                    .count();
                u32::try_from(n).unwrap_or(u32::MAX)
            })
            .collect()
    }

    /// Why an offering cannot be launched now, if it cannot: an outage window or a capacity
    /// limit reached. `counts` is [`SimCloud::limit_counts`].
    fn refusal(
        &self,
        ty: &InstanceType,
        zone: &str,
        capacity_type: CapacityType,
        now: DateTime<Utc>,
        counts: &[u32],
    ) -> Option<String> {
        let outage = self.config.insufficient_capacity.iter().position(|o| {
            o.is_active(self.start, now)
                && o.selector()
                    .matches(&ty.name, &ty.family, zone, capacity_type)
        });
        if let Some(i) = outage {
            return Some(format!("simulated outage insufficientCapacity[{i}]"));
        }
        self.config
            .capacity
            .iter()
            .zip(counts)
            .position(|(l, &n)| {
                n >= l.max
                    && l.selector()
                        .matches(&ty.name, &ty.family, zone, capacity_type)
            })
            .map(|i| {
                format!(
                    "simulated capacity limit capacity[{i}] of {} instances reached",
                    self.config.capacity[i].max
                )
            })
    }

    /// The cloud's own words for running out of capacity.
    fn capacity_message(&self, instance_type: &str, zone: &str, why: &str) -> String {
        match self.cloud {
            Cloud::Aws => format!(
                "InsufficientInstanceCapacity: We currently do not have sufficient \
                 {instance_type} capacity in the Availability Zone you requested ({zone}). ({why})"
            ),
            Cloud::Gcp => format!(
                "ZONE_RESOURCE_POOL_EXHAUSTED: The zone '{zone}' does not have enough resources \
                 available to fulfill the request. ({why})"
            ),
            Cloud::Azure => format!(
                "ZonalAllocationFailed: Allocation failed. We do not have sufficient capacity for \
                 the requested VM size {instance_type} in this zone. ({why})"
            ),
        }
    }

    fn create_now(&self, request: &LaunchRequest) -> Result<Instance, CloudError> {
        let now = self.clock.now();
        let mut st = self.lock();
        self.throttle(&mut st)?;
        if let Some(&i) = st.by_claim.get(&request.claim_name)
            && st.instances[i].timeline.is_live(now)
        {
            st.counters.idempotent_creates += 1;
            return Ok(st.instances[i].view(now));
        }
        let invalid = |message: String| CloudError::InvalidRequest { message };
        let Some(ty) = self.catalog.get(self.cloud, &request.instance_type) else {
            st.counters.invalid_requests += 1;
            return Err(invalid(format!(
                "unknown {} instance type {:?}",
                self.cloud, request.instance_type
            )));
        };
        let Some(offering) = ty
            .offerings
            .iter()
            .find(|o| o.zone == request.zone && o.capacity_type == request.capacity_type)
        else {
            st.counters.invalid_requests += 1;
            return Err(invalid(format!(
                "{} is not offered as {} in {}",
                ty.name, request.capacity_type, request.zone
            )));
        };
        let key = (
            ty.name.clone(),
            offering.zone.clone(),
            offering.capacity_type,
        );
        let counts = self.limit_counts(&st, now);
        let refusal = if offering.available {
            self.refusal(ty, &offering.zone, offering.capacity_type, now, &counts)
        } else {
            Some("offering marked unavailable in the catalog".to_owned())
        };
        if let Some(why) = refusal {
            st.counters.capacity_errors += 1;
            st.counters.offerings.entry(key).or_default().1 += 1;
            return Err(CloudError::InsufficientCapacity {
                instance_type: ty.name.clone(),
                zone: offering.zone.clone(),
                capacity_type: offering.capacity_type,
                message: self.capacity_message(&ty.name, &offering.zone, &why),
            });
        }

        // Launch: decide the instance's whole life now, from its own random stream.
        let seq = st.instances.len();
        let mut rng = SplitMix64::stream(self.seed, seq as u64 + 1);
        let provider_id = format!("sim:///{}/i-0{:016x}", offering.zone, rng.next_u64());
        let never_ready = rng.chance(self.config.accelerators_never_ready);
        let interruption_hours = rng.exponential(self.config.interruptions.spot_rate_per_hour);

        let accelerator = ty
            .accelerator
            .as_ref()
            .filter(|a| a.count > 0 && !a.is_fractional())
            .map(|a| a.resource.as_str());
        let running_at = after(now, self.config.launch_latency.for_family(&ty.family));
        let registered_at = after(
            running_at,
            self.config.registration_delay.for_family(&ty.family),
        );
        let accelerators_at = match accelerator {
            None => Some(registered_at),
            Some(_) if never_ready => None,
            Some(_) => Some(after(
                registered_at,
                self.config.device_plugin_delay.for_family(&ty.family),
            )),
        };
        let notice_at = interruption_hours
            .filter(|_| offering.capacity_type == CapacityType::Spot)
            .map(|h| {
                let lifetime = Duration::try_from_secs_f64(h * 3600.0).unwrap_or(Duration::MAX);
                after(running_at, lifetime)
            });
        let reclaim_at =
            notice_at.map(|n| after(n, self.config.interruptions.notice_for(self.cloud)));

        let name = node_name(
            self.cloud,
            &offering.region,
            &request.claim_name,
            seq as u64,
        );
        let mut labels = ty.offering_labels(offering);
        labels.extend(request.labels.clone());
        labels.insert(HOSTNAME_LABEL.to_owned(), name.clone());
        let full_allocatable = ty.allocatable();
        let mut capacity = ty.capacity();
        let mut allocatable = full_allocatable.clone();
        if let Some(resource) = accelerator {
            capacity.remove(resource);
            allocatable.remove(resource);
        }

        let instance = SimInstance {
            provider_id: provider_id.clone(),
            claim_name: request.claim_name.clone(),
            instance_type: ty.name.clone(),
            family: ty.family.clone(),
            zone: offering.zone.clone(),
            capacity_type: offering.capacity_type,
            price_per_hour: offering.price_per_hour,
            tags: request.tags.clone(),
            node: SimNode {
                name,
                labels,
                capacity,
                allocatable,
            },
            full_allocatable,
            timeline: Timeline {
                launched_at: now,
                running_at,
                registered_at,
                accelerators_at,
                notice_at,
                reclaim_at,
                deleted_at: None,
            },
            reported: Reported::default(),
        };
        let view = instance.view(now);
        st.instances.push(instance);
        st.by_claim.insert(request.claim_name.clone(), seq);
        st.by_id.insert(provider_id, seq);
        st.counters.launches += 1;
        st.counters.offerings.entry(key).or_default().0 += 1;
        Ok(view)
    }

    /// The live instance with this provider id, or NotFound.
    fn live_index(st: &State, provider_id: &str, now: DateTime<Utc>) -> Result<usize, CloudError> {
        st.by_id
            .get(provider_id)
            .copied()
            .filter(|&i| st.instances[i].timeline.is_live(now))
            .ok_or_else(|| CloudError::NotFound {
                provider_id: provider_id.to_owned(),
            })
    }

    fn delete_now(&self, provider_id: &str) -> Result<(), CloudError> {
        let now = self.clock.now();
        let mut st = self.lock();
        self.throttle(&mut st)?;
        let i = Self::live_index(&st, provider_id, now)?;
        st.instances[i].timeline.deleted_at = Some(now);
        st.counters.deletes += 1;
        Ok(())
    }

    fn get_now(&self, provider_id: &str) -> Result<Instance, CloudError> {
        let now = self.clock.now();
        let mut st = self.lock();
        self.throttle(&mut st)?;
        let i = Self::live_index(&st, provider_id, now)?;
        Ok(st.instances[i].view(now))
    }

    fn list_now(&self) -> Result<Vec<Instance>, CloudError> {
        let now = self.clock.now();
        let mut st = self.lock();
        self.throttle(&mut st)?;
        Ok(st
            .instances
            .iter()
            .filter(|i| i.timeline.is_live(now))
            .map(|i| i.view(now))
            .collect())
    }

    fn instance_types_now(&self) -> Vec<InstanceType> {
        let now = self.clock.now();
        let st = self.lock();
        let counts = self.limit_counts(&st, now);
        self.catalog
            .for_cloud(self.cloud)
            .map(|ty| {
                let mut out = ty.clone();
                for o in &mut out.offerings {
                    o.available = o.available
                        && self
                            .refusal(ty, &o.zone, o.capacity_type, now, &counts)
                            .is_none();
                }
                out
            })
            .collect()
    }

    fn poll_events_now(&self) -> Vec<CloudEvent> {
        let now = self.clock.now();
        let mut st = self.lock();
        let mut due = Vec::new();
        for (seq, inst) in st.instances.iter_mut().enumerate() {
            let t = &inst.timeline;
            if let (Some(notice), Some(reclaim)) = (t.noticed_at(), t.reclaim_at)
                && !inst.reported.notice
                && notice <= now
            {
                inst.reported.notice = true;
                due.push((
                    notice,
                    seq,
                    0,
                    CloudEvent::Interruption {
                        provider_id: inst.provider_id.clone(),
                        terminates_at: reclaim,
                    },
                ));
            }
            if let Some(reclaimed) = inst.timeline.reclaimed_at()
                && !inst.reported.reclaim
                && reclaimed <= now
            {
                inst.reported.reclaim = true;
                due.push((
                    reclaimed,
                    seq,
                    1,
                    CloudEvent::Terminated {
                        provider_id: inst.provider_id.clone(),
                    },
                ));
            }
        }
        in_order(due)
    }
}

/// Events sorted by when they happened, then launch order, then kind.
fn in_order<E>(mut due: Vec<(DateTime<Utc>, usize, u8, E)>) -> Vec<E> {
    due.sort_by_key(|&(at, seq, kind, _)| (at, seq, kind));
    due.into_iter().map(|(.., e)| e).collect()
}

impl CloudProvider for SimCloud {
    fn cloud(&self) -> Cloud {
        self.cloud
    }

    fn create<'a>(&'a self, request: &'a LaunchRequest) -> CloudFuture<'a, Instance> {
        Box::pin(ready(self.create_now(request)))
    }

    fn delete<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, ()> {
        Box::pin(ready(self.delete_now(provider_id)))
    }

    fn get<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, Instance> {
        Box::pin(ready(self.get_now(provider_id)))
    }

    fn list(&self) -> CloudFuture<'_, Vec<Instance>> {
        Box::pin(ready(self.list_now()))
    }

    fn instance_types(&self) -> CloudFuture<'_, Vec<InstanceType>> {
        Box::pin(ready(Ok(self.instance_types_now())))
    }

    fn is_drifted<'a>(&'a self, _instance: &'a Instance) -> CloudFuture<'a, Option<String>> {
        Box::pin(ready(Ok(None)))
    }

    fn poll_events(&self) -> CloudFuture<'_, Vec<CloudEvent>> {
        Box::pin(ready(Ok(self.poll_events_now())))
    }
}
