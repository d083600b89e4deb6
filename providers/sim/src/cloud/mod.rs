//! [`SimCloud`]: the simulated cloud behind the [`CloudProvider`] trait.

mod launch;

use std::collections::BTreeMap;
use std::future::ready;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use quartermaster_cloud::{
    Clock, CloudError, CloudEvent, CloudFuture, CloudProvider, Instance, LaunchRequest,
};
use quartermaster_pricing::flex_start::{FLEX_START_MAX_RUN, FLEX_START_MAX_WAIT};
use quartermaster_pricing::{CapacityType, Catalog, Cloud, InstanceType, Offering};
use rand::Rng as _;

use crate::config::{Selector, after};

/// An offering of this cloud: `(instance type, zone, capacity type)`.
pub type OfferingId = (String, String, CapacityType);
use crate::events::{SimNode, SimNodeEvent};
use crate::instance::{SimInstance, Timeline, node_name};
use crate::rng::{self, SimRng};
use crate::schedule::{Kind, Schedule};
use crate::stats::{OfferingStats, SimStats};
use crate::{SimConfig, SimError};

/// The `kubernetes.io/hostname` label.
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";

/// How long a throttled caller is told to wait.
const THROTTLE_RETRY_AFTER: Duration = Duration::from_secs(1);
/// How far away a moment that never comes is put (a Node that never registers).
const NEVER: Duration = Duration::from_secs(100 * 365 * 86_400);
/// How long a reboot takes, call to node back (an EC2 reboot of a GPU instance: a few minutes).
const REBOOT_TIME: Duration = Duration::from_secs(180);

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
    /// In launch order; an instance's `seq` is its index.
    instances: Vec<SimInstance>,
    /// The latest instance launched for each claim.
    by_claim: BTreeMap<String, usize>,
    /// Instances by provider id.
    by_id: BTreeMap<String, usize>,
    /// Throttling draws.
    api_rng: SimRng,
    /// Moments not yet passed.
    schedule: Schedule,
    /// Node events that happened and were not yet handed out.
    node_outbox: Vec<SimNodeEvent>,
    /// Cloud events that happened and were not yet handed out.
    cloud_outbox: Vec<CloudEvent>,
    /// Live instances counted against each of `SimConfig::capacity`'s limits.
    limit_live: Vec<u32>,
    /// Counters (`offerings` is kept apart, by key).
    stats: SimStats,
    offerings: BTreeMap<(String, String, CapacityType), OfferingStats>,
    /// No interruption notice is given from now on ([`SimCloud::hold_interruptions`]).
    interruptions_held: bool,
}

impl State {
    /// Processes every moment up to `now`, in order: queues the events that happen and frees
    /// the capacity of reclaimed instances.
    fn advance(&mut self, now: DateTime<Utc>) {
        while let Some((at, seq, kind)) = self.schedule.pop_due(now) {
            let Some(inst) = self.instances.get(seq) else {
                continue; // an outage edge
            };
            if !inst.timeline.occurs(at, kind) {
                continue;
            }
            match kind {
                Kind::Running | Kind::OutageEdge => {}
                Kind::Registered => self.node_outbox.push(SimNodeEvent::Registered {
                    provider_id: inst.provider_id.clone(),
                    claim_name: inst.claim_name.clone(),
                    node: inst.node.clone(),
                }),
                Kind::Accelerators => self.node_outbox.push(SimNodeEvent::AcceleratorsReady {
                    provider_id: inst.provider_id.clone(),
                    node_name: inst.node.name.clone(),
                    allocatable: inst.full_allocatable.clone(),
                }),
                Kind::GpuFault => {
                    let reason = if inst.timeline.gpu_fault_resettable {
                        "NvidiaXID48Error"
                    } else {
                        "NvidiaXID79Error"
                    };
                    self.node_outbox.push(SimNodeEvent::GpuFailed {
                        provider_id: inst.provider_id.clone(),
                        node_name: inst.node.name.clone(),
                        allocatable: inst.node.allocatable.clone(),
                        reason: reason.to_owned(),
                    });
                    self.stats.gpu_faults += 1;
                }
                Kind::Rebooted => {
                    // A reboot clears a resettable fault (or finds none); the device plugin
                    // reports the GPUs again if they work.
                    let faulted = inst.timeline.gpu_fault_at.is_some_and(|f| f <= at);
                    let healthy = !faulted || inst.timeline.gpu_fault_resettable;
                    if faulted && healthy {
                        self.instances[seq].timeline.gpu_fault_at = None;
                    }
                    let Some(inst) = self.instances.get(seq) else {
                        continue;
                    };
                    self.node_outbox.push(SimNodeEvent::Rebooted {
                        provider_id: inst.provider_id.clone(),
                        node_name: inst.node.name.clone(),
                        allocatable: if healthy {
                            inst.full_allocatable.clone()
                        } else {
                            inst.node.allocatable.clone()
                        },
                        healthy,
                    });
                }
                Kind::Notice => {
                    let terminates_at = inst.timeline.reclaim_at.unwrap_or(at);
                    self.cloud_outbox.push(CloudEvent::Interruption {
                        provider_id: inst.provider_id.clone(),
                        terminates_at,
                    });
                    self.stats.interruptions += 1;
                    self.offering(seq).interruptions += 1;
                }
                Kind::Reclaim => {
                    self.cloud_outbox.push(CloudEvent::Terminated {
                        provider_id: inst.provider_id.clone(),
                    });
                    self.stats.reclaims += 1;
                    if inst.capacity_type == CapacityType::FlexStart {
                        self.stats.flex_start_reclaims += 1;
                    }
                    self.release(seq);
                }
            }
        }
    }

    /// An instance is gone: it no longer counts as live or against any limit.
    fn release(&mut self, seq: usize) {
        self.stats.live -= 1;
        self.offering(seq).live -= 1;
        for &l in &self.instances[seq].limits {
            self.limit_live[l] -= 1;
        }
    }

    /// The counters of instance `seq`'s offering.
    fn offering(&mut self, seq: usize) -> &mut OfferingStats {
        let i = &self.instances[seq];
        offering_entry(
            &mut self.offerings,
            &i.instance_type,
            &i.zone,
            i.capacity_type,
        )
    }
}

/// The counters of an offering, created empty on first use.
fn offering_entry<'a>(
    offerings: &'a mut BTreeMap<(String, String, CapacityType), OfferingStats>,
    instance_type: &str,
    zone: &str,
    capacity_type: CapacityType,
) -> &'a mut OfferingStats {
    offerings
        .entry((instance_type.to_owned(), zone.to_owned(), capacity_type))
        .or_insert_with(|| OfferingStats {
            instance_type: instance_type.to_owned(),
            zone: zone.to_owned(),
            capacity_type,
            launches: 0,
            capacity_errors: 0,
            interruptions: 0,
            live: 0,
        })
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
        let mut schedule = Schedule::default();
        for outage in &config.insufficient_capacity {
            let (from, until) = outage.window(start);
            for edge in [Some(from), until].into_iter().flatten() {
                schedule.push((edge, usize::MAX, Kind::OutageEdge));
            }
        }
        let state = State {
            instances: Vec::new(),
            by_claim: BTreeMap::new(),
            by_id: BTreeMap::new(),
            api_rng: rng::stream(seed, API_STREAM),
            schedule,
            node_outbox: Vec::new(),
            cloud_outbox: Vec::new(),
            limit_live: vec![0; config.capacity.len()],
            stats: SimStats::default(),
            offerings: BTreeMap::new(),
            interruptions_held: false,
        };
        Ok(Self {
            cloud,
            catalog,
            config,
            clock,
            start,
            seed,
            state: Mutex::new(state),
        })
    }

    /// Kubelet-side events that happened up to the clock's now and were not returned before,
    /// in the order they happened: Nodes registering, device plugins reporting. (Sim-only: the
    /// engine learns about nodes from the cluster, not the cloud.) An instance that is gone
    /// has no further events.
    pub fn node_events(&self) -> Vec<SimNodeEvent> {
        let mut st = self.state_now().0;
        std::mem::take(&mut st.node_outbox)
    }

    /// The earliest time after the clock's now at which something will happen: a launch
    /// completes, a Node registers, accelerators appear, an interruption notice is given, an
    /// instance is reclaimed, or an outage window opens or closes. The simulation's event loop
    /// jumps the clock there. `None` when nothing more will happen on its own.
    pub fn next_event_at(&self) -> Option<DateTime<Utc>> {
        let (mut st, _) = self.state_now();
        let State {
            schedule,
            instances,
            ..
        } = &mut *st;
        schedule.next(|&(at, seq, kind)| {
            instances
                .get(seq)
                .is_none_or(|i| i.timeline.occurs(at, kind))
        })
    }

    /// From now on no spot instance is interrupted: the notices not yet given are called off
    /// with their reclaims, and instances launched later get none. Notices already given keep
    /// their reclaim, and instances in a reservation keep its end. A simulation's settle holds
    /// the world still with this, so that what it measures is consolidation's doing.
    pub fn hold_interruptions(&self) {
        let (mut st, now) = self.state_now();
        st.interruptions_held = true;
        for inst in &mut st.instances {
            if inst.reservation.is_none() {
                inst.timeline.call_off_notice(now);
            }
        }
    }

    /// Inspection, not the API (never throttled, no error): the live instances as
    /// `(provider id, claim name, launched at)`, for a run's end audit.
    pub fn live_instances(&self) -> Vec<(String, String, DateTime<Utc>)> {
        let (st, now) = self.state_now();
        st.instances
            .iter()
            .filter(|i| i.timeline.is_live(now))
            .map(|i| {
                (
                    i.provider_id.clone(),
                    i.claim_name.clone(),
                    i.timeline.launched_at,
                )
            })
            .collect()
    }

    /// Inspection: the capacity limits (`cloud.capacity`), each as the offerings it counts
    /// and how many instances they may hold at once.
    pub fn capacity_limits(&self) -> Vec<(Vec<OfferingId>, u32)> {
        self.config
            .capacity
            .iter()
            .map(|limit| {
                let mut offerings = Vec::new();
                for ty in self.catalog.for_cloud(self.cloud) {
                    for o in &ty.offerings {
                        if limit
                            .selector()
                            .matches(&ty.name, &ty.family, &o.zone, o.capacity_type)
                        {
                            offerings.push((ty.name.clone(), o.zone.clone(), o.capacity_type));
                        }
                    }
                }
                (offerings, limit.max)
            })
            .collect()
    }

    /// Inspection: the offerings an outage window refuses now. Capacity limits are not among
    /// them: they refuse an offering only while the cloud's own instances fill them.
    pub fn offerings_in_outage(&self) -> Vec<OfferingId> {
        let mut out = Vec::new();
        if self.config.insufficient_capacity.is_empty() {
            return out;
        }
        let now = self.state_now().1;
        for ty in self.catalog.for_cloud(self.cloud) {
            for o in &ty.offerings {
                let refused = self.config.insufficient_capacity.iter().any(|w| {
                    w.is_active(self.start, now)
                        && w.selector()
                            .matches(&ty.name, &ty.family, &o.zone, o.capacity_type)
                });
                if refused {
                    out.push((ty.name.clone(), o.zone.clone(), o.capacity_type));
                }
            }
        }
        out
    }

    /// [`CloudProvider::list`] with only the instances `keep` accepts by claim name: the same
    /// call (throttled and failing as `list` does), without copying instances the caller
    /// would skip. The simulator's garbage collection asks for instances without a claim.
    pub fn list_where(&self, keep: impl Fn(&str) -> bool) -> Result<Vec<Instance>, CloudError> {
        let (mut st, now) = self.state_now();
        self.throttle(&mut st)?;
        Ok(st
            .instances
            .iter()
            .filter(|i| i.timeline.is_live(now) && keep(&i.claim_name))
            .map(|i| i.view(now))
            .collect())
    }

    /// Inspection: the instance-seconds the cloud billed up to `until` (launch accepted, or for
    /// flex-start the end of its queue wait, to deleted or reclaimed).
    pub fn billed_seconds(&self, until: DateTime<Utc>) -> f64 {
        let st = self.state_now().0;
        st.instances
            .iter()
            .map(|i| {
                let end = i.timeline.gone_at().map_or(until, |g| g.min(until));
                (end - i.timeline.billed_from).as_seconds_f64().max(0.0)
            })
            .sum()
    }

    /// Counters as of the clock's now.
    pub fn stats(&self) -> SimStats {
        let st = self.state_now().0;
        SimStats {
            offerings: st.offerings.values().cloned().collect(),
            ..st.stats.clone()
        }
    }

    /// The state, brought up to the clock's now, and that now.
    fn state_now(&self) -> (MutexGuard<'_, State>, DateTime<Utc>) {
        let now = self.clock.now();
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.advance(now);
        (st, now)
    }

    /// Draws whether this API call is throttled, or fails with a server error.
    fn throttle(&self, st: &mut State) -> Result<(), CloudError> {
        if rng::chance(&mut st.api_rng, self.config.api.throttle_probability) {
            st.stats.throttles += 1;
            return Err(CloudError::Throttled {
                retry_after: Some(THROTTLE_RETRY_AFTER),
            });
        }
        // Drawn only when asked for, so runs without it keep their random stream.
        let p = self.config.api.error_probability;
        if p > 0.0 && rng::chance(&mut st.api_rng, p) {
            st.stats.server_errors += 1;
            return Err(CloudError::Transient {
                message: "InternalError: simulated server error (api.errorProbability)".into(),
            });
        }
        Ok(())
    }

    /// Draws whether the answer of a call that did its work is lost.
    fn lose_response(&self, st: &mut State) -> Result<(), CloudError> {
        let p = self.config.api.lost_response_probability;
        if p > 0.0 && rng::chance(&mut st.api_rng, p) {
            st.stats.lost_responses += 1;
            return Err(CloudError::Transient {
                message: "RequestTimeout: the simulated call's answer was lost \
                          (api.lostResponseProbability); it may have taken effect"
                    .into(),
            });
        }
        Ok(())
    }

    /// Why an offering cannot be launched now, if it cannot: an outage window or a capacity
    /// limit reached.
    fn refusal(
        &self,
        st: &State,
        ty: &InstanceType,
        zone: &str,
        capacity_type: CapacityType,
        now: DateTime<Utc>,
    ) -> Option<String> {
        let matches = |s: Selector<'_>| s.matches(&ty.name, &ty.family, zone, capacity_type);
        let outage = self
            .config
            .insufficient_capacity
            .iter()
            .position(|o| o.is_active(self.start, now) && matches(o.selector()));
        if let Some(i) = outage {
            return Some(format!("simulated outage insufficientCapacity[{i}]"));
        }
        let full = self
            .config
            .capacity
            .iter()
            .zip(&st.limit_live)
            .position(|(l, &live)| live >= l.max && matches(l.selector()));
        full.map(|i| {
            format!(
                "simulated capacity limit capacity[{i}] of {} instances reached",
                self.config.capacity[i].max
            )
        })
    }

    /// Why a flex-start request for `ty` is never fulfilled, if it is not: its queue's wait
    /// (`flexStart.wait`) is longer than the longest a request waits.
    fn flex_start_unfulfilled(
        &self,
        ty: &InstanceType,
        capacity_type: CapacityType,
    ) -> Option<String> {
        if capacity_type != CapacityType::FlexStart {
            return None;
        }
        let wait = self.config.flex_start.wait.for_family(&ty.family);
        let max = FLEX_START_MAX_WAIT.to_std().unwrap_or(Duration::MAX);
        (wait > max).then(|| {
            format!(
                "simulated flexStart.wait of {}s: the flex-start request is not fulfilled within \
                 its maximum wait of {}s",
                wait.as_secs(),
                max.as_secs()
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

    /// Reboots a live instance: it is back [`REBOOT_TIME`] later (the `Rebooted` moment).
    fn reboot_now(&self, provider_id: &str) -> Result<(), CloudError> {
        let (mut st, now) = self.state_now();
        self.throttle(&mut st)?;
        let i = Self::live_index(&st, provider_id, now)?;
        let back = now + chrono::TimeDelta::from_std(REBOOT_TIME).unwrap_or_default();
        st.schedule.push((back, i, Kind::Rebooted));
        st.stats.reboots += 1;
        Ok(())
    }

    fn delete_now(&self, provider_id: &str) -> Result<(), CloudError> {
        let (mut st, now) = self.state_now();
        self.throttle(&mut st)?;
        let i = Self::live_index(&st, provider_id, now)?;
        st.instances[i].timeline.deleted_at = Some(now);
        st.stats.deletes += 1;
        st.release(i);
        self.lose_response(&mut st)
    }

    fn get_now(&self, provider_id: &str) -> Result<Instance, CloudError> {
        let (mut st, now) = self.state_now();
        self.throttle(&mut st)?;
        let i = Self::live_index(&st, provider_id, now)?;
        Ok(st.instances[i].view(now))
    }

    fn list_now(&self) -> Result<Vec<Instance>, CloudError> {
        self.list_where(|_| true)
    }

    fn instance_types_now(&self) -> Vec<InstanceType> {
        let (st, now) = self.state_now();
        self.catalog
            .for_cloud(self.cloud)
            .map(|ty| {
                let mut out = ty.clone();
                for o in &mut out.offerings {
                    o.available = o.available
                        && self
                            .refusal(&st, ty, &o.zone, o.capacity_type, now)
                            .is_none();
                }
                out
            })
            .collect()
    }

    fn poll_events_now(&self) -> Vec<CloudEvent> {
        let mut st = self.state_now().0;
        std::mem::take(&mut st.cloud_outbox)
    }
}

impl CloudProvider for SimCloud {
    fn cloud(&self) -> Cloud {
        self.cloud
    }

    fn create<'a>(&'a self, request: &'a LaunchRequest) -> CloudFuture<'a, Instance> {
        Box::pin(ready(self.create_now(request)))
    }

    fn reboot<'a>(&'a self, provider_id: &'a str) -> CloudFuture<'a, ()> {
        Box::pin(async move { self.reboot_now(provider_id) })
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
