//! How the simulated cloud behaves: latencies, capacity, outages, interruptions, throttling.
//!
//! Every field is optional in a scenario file and has a realistic default, documented on the
//! field. Durations are Go-style strings (`"90s"`, `"5m"`, `"2h"`); unknown fields are
//! rejected. A scenario file's `cloud:` section could read:
//!
//! ```yaml
//! launchLatency: { default: 40s, families: { p5: 3m } }
//! registrationDelay: 30s              # a bare duration is a table with no per-family entries
//! acceleratorsNeverReady: 0.02
//! capacity:
//!   - { family: p5, capacityType: spot, max: 2 }
//! insufficientCapacity:
//!   - { instanceType: p5.48xlarge, zone: us-east-1a, from: 0s, until: 30m }
//! interruptions: { spotRatePerHour: 0.05 }
//! flexStart: { wait: { default: 5m, families: { a3: 40m } } }   # GCP DWS flex-start queue
//! gpuFaultsPerHour: 0.01              # XID errors: AcceleratedHardwareReady=False, GPUs gone
//! api: { throttleProbability: 0.01 }
//! ```
//!
//! Deserialising checks shapes only; [`SimConfig::validate`] checks ranges (and
//! [`crate::SimCloud::try_new`] calls it).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_pricing::{CapacityType, Cloud};
use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, Visitor};

use crate::SimError;
use crate::duration;

/// The simulated cloud's behaviour. `SimConfig::default()` is a healthy cloud with realistic
/// latencies, unlimited capacity, no outages, no interruptions and no throttling.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct SimConfig {
    /// From the accepted launch call to a running instance. Default: 40 s, and 3 min for the
    /// 8-GPU training families (AWS `p4d`, `p4de`, `p5`, `p5en`; GCP `a3`; Azure
    /// `NDasrA100v4`, `NDamsrA100v4`, `NDisrH100v5`), whose hosts with EFA / InfiniBand
    /// take minutes to place and boot. See [`SimConfig::DEFAULT_SLOW_LAUNCH_FAMILIES`].
    pub launch_latency: LatencyTable,
    /// From running to the Node registering with the API server (boot, bootstrap, kubelet
    /// join). Default: 30 s.
    pub registration_delay: LatencyTable,
    /// From registration to the device plugin advertising the accelerators in the Node's
    /// allocatable (driver load, GPU operator / device-plugin DaemonSet start). Default: 45 s.
    /// Types without a device-plugin resource (CPU types, fractional vGPU slices) have nothing
    /// to wait for: their delay is always 0, whatever the table says.
    pub device_plugin_delay: LatencyTable,
    /// Probability that an accelerator node's device plugin never reports (a broken driver),
    /// sampled per instance. Default: 0.
    pub accelerators_never_ready: f64,
    /// Probability that an instance runs but its Node never registers (a broken bootstrap),
    /// sampled per instance. Default: 0.
    pub nodes_never_register: f64,
    /// GPU faults (an XID error, a GPU fallen off the bus): expected faults per accelerator
    /// node per hour after its GPUs came up, a Poisson process per instance. A faulted node
    /// reports `AcceleratedHardwareReady=False` and loses its accelerators from allocatable;
    /// it stays until node repair replaces it. Default: 0.
    pub gpu_faults_per_hour: f64,
    /// The share of GPU faults a reboot clears (an XID a GPU reset or driver reload clears:
    /// `NvidiaXID48Error`, a double-bit ECC error); the others (`NvidiaXID79Error`, fallen off
    /// the bus) survive a reboot. Default: 0.
    pub gpu_faults_resettable: f64,
    /// Concurrent-instance limits: a launch that would exceed one fails with
    /// insufficient capacity. Default: none (unlimited).
    pub capacity: Vec<CapacityLimit>,
    /// Windows in which launches of matching offerings fail with insufficient capacity.
    /// Default: none.
    pub insufficient_capacity: Vec<CapacityOutage>,
    /// Spot interruptions. Default: none (rate 0), per-cloud notice.
    pub interruptions: InterruptionConfig,
    /// API behaviour. Default: no throttling.
    pub api: ApiBehaviour,
    /// Reserved capacity the account holds: On-Demand Capacity Reservations and Capacity
    /// Blocks. Launches with capacity type `reserved` go into one (named by the request's
    /// `quartermaster.dev/capacity-reservation-id` label), while it has a free slot and is
    /// active; a block's instances are reclaimed 30 minutes before its end. Default: none.
    pub reservations: Vec<ReservationConfig>,
    /// Flex-start capacity (GCP's Dynamic Workload Scheduler, capacity type `flex-start`).
    pub flex_start: FlexStartConfig,
}

/// Flex-start launches (GCP's Dynamic Workload Scheduler): a request waits in a queue before
/// its VM exists, then the VM runs at most
/// [`FLEX_START_MAX_RUN`](quartermaster_pricing::flex_start::FLEX_START_MAX_RUN) and the
/// cloud deletes it at the end, as Compute Engine does. A flex-start VM is never interrupted.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct FlexStartConfig {
    /// How long a flex-start request waits for capacity before its VM is created (then it
    /// boots with the launch latency). A wait longer than
    /// [`FLEX_START_MAX_WAIT`](quartermaster_pricing::flex_start::FLEX_START_MAX_WAIT) (2 h)
    /// is never fulfilled: the launch fails with insufficient capacity (answered at once;
    /// Compute Engine answers when the wait runs out). Default: 5 min for every family (an
    /// assumption: Google publishes no typical wait).
    pub wait: LatencyTable,
}

impl Default for FlexStartConfig {
    fn default() -> Self {
        Self {
            wait: LatencyTable::uniform(Duration::from_secs(300)),
        }
    }
}

/// One reservation of the simulated account.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ReservationConfig {
    /// Its id (`cr-…`).
    pub id: String,
    /// Instance type.
    pub instance_type: String,
    /// Zone.
    pub zone: String,
    /// Instances it holds.
    pub count: u32,
    /// `default` (an ODCR) or `capacity-block`.
    #[serde(rename = "type", default = "default_reservation_type")]
    pub kind: String,
    /// Start, from the simulation's start. Default: 0.
    #[serde(default, deserialize_with = "duration::required")]
    pub from: Duration,
    /// End, from the simulation's start; a capacity block needs one. Default: never.
    #[serde(default, deserialize_with = "duration::optional")]
    pub until: Option<Duration>,
    /// Dollars per instance-hour, paid whether used or not (a block's upfront price over its
    /// window).
    pub price_per_hour: f64,
    /// Tags (what NodeClass selector terms may match).
    #[serde(default)]
    pub tags: BTreeMap<String, String>,
}

fn default_reservation_type() -> String {
    "default".to_owned()
}

impl ReservationConfig {
    /// The reservation, with times from `start`.
    pub fn reservation(
        &self,
        cloud: Cloud,
        start: DateTime<Utc>,
    ) -> quartermaster_pricing::Reservation {
        let at = |d: Duration| start + TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX);
        quartermaster_pricing::Reservation {
            id: self.id.clone(),
            cloud,
            instance_type: self.instance_type.clone(),
            zone: self.zone.clone(),
            count: self.count,
            available: None,
            kind: self
                .kind
                .parse()
                .unwrap_or(quartermaster_pricing::ReservationKind::Default),
            price_per_hour: self.price_per_hour,
            start: Some(at(self.from)),
            end: self.until.map(at),
            tags: self.tags.clone(),
        }
    }
}

impl SimConfig {
    /// The instance families that launch slowly by default (3 min instead of 40 s).
    pub const DEFAULT_SLOW_LAUNCH_FAMILIES: [&str; 8] = [
        "p4d",
        "p4de",
        "p5",
        "p5en",
        "a3",
        "NDasrA100v4",
        "NDamsrA100v4",
        "NDisrH100v5",
    ];

    /// Checks ranges and consistency; the error names the field as written in a file.
    pub fn validate(&self) -> Result<(), SimError> {
        probability("acceleratorsNeverReady", self.accelerators_never_ready)?;
        probability("nodesNeverRegister", self.nodes_never_register)?;
        probability("api.throttleProbability", self.api.throttle_probability)?;
        probability("api.errorProbability", self.api.error_probability)?;
        probability(
            "api.lostResponseProbability",
            self.api.lost_response_probability,
        )?;
        probability("gpuFaultsResettable", self.gpu_faults_resettable)?;
        let faults = self.gpu_faults_per_hour;
        if !(faults.is_finite() && faults >= 0.0) {
            return Err(SimError::config(
                "gpuFaultsPerHour",
                format!("must be a finite number >= 0, got {faults}"),
            ));
        }
        let rate = self.interruptions.spot_rate_per_hour;
        if !(rate.is_finite() && rate >= 0.0) {
            return Err(SimError::config(
                "interruptions.spotRatePerHour",
                format!("must be a finite number >= 0, got {rate}"),
            ));
        }
        for (i, l) in self.capacity.iter().enumerate() {
            selector(&format!("capacity[{i}]"), &l.instance_type, &l.family)?;
        }
        for (i, r) in self.reservations.iter().enumerate() {
            let at = format!("reservations[{i}]");
            let kind: Result<quartermaster_pricing::ReservationKind, String> = r.kind.parse();
            if let Err(e) = kind {
                return Err(SimError::config(format!("{at}.type"), e));
            }
            if r.count == 0 {
                return Err(SimError::config(
                    format!("{at}.count"),
                    "must be at least 1",
                ));
            }
            if !(r.price_per_hour.is_finite() && r.price_per_hour >= 0.0) {
                return Err(SimError::config(
                    format!("{at}.pricePerHour"),
                    format!("must be a finite number >= 0, got {}", r.price_per_hour),
                ));
            }
            match r.until {
                Some(until) if until <= r.from => {
                    return Err(SimError::config(
                        format!("{at}.until"),
                        format!("must be after from ({until:?} <= {:?})", r.from),
                    ));
                }
                None if r.kind == "capacity-block" => {
                    return Err(SimError::config(
                        format!("{at}.until"),
                        "a capacity block has an end",
                    ));
                }
                _ => {}
            }
            if self.reservations[..i].iter().any(|o| o.id == r.id) {
                return Err(SimError::config(
                    format!("{at}.id"),
                    format!("duplicate id {:?}", r.id),
                ));
            }
        }
        for (i, o) in self.insufficient_capacity.iter().enumerate() {
            let at = format!("insufficientCapacity[{i}]");
            selector(&at, &o.instance_type, &o.family)?;
            if let Some(until) = o.until
                && until <= o.from
            {
                return Err(SimError::config(
                    format!("{at}.until"),
                    format!("must be after from ({until:?} <= {:?})", o.from),
                ));
            }
        }
        Ok(())
    }
}

fn probability(field: &str, p: f64) -> Result<(), SimError> {
    if (0.0..=1.0).contains(&p) {
        Ok(())
    } else {
        Err(SimError::config(
            field,
            format!("must be a probability between 0 and 1, got {p}"),
        ))
    }
}

fn selector(
    at: &str,
    instance_type: &Option<String>,
    family: &Option<String>,
) -> Result<(), SimError> {
    if instance_type.is_some() && family.is_some() {
        return Err(SimError::config(at, "set instanceType or family, not both"));
    }
    Ok(())
}

impl Default for SimConfig {
    fn default() -> Self {
        let mut launch_latency = LatencyTable::uniform(Duration::from_secs(40));
        for f in Self::DEFAULT_SLOW_LAUNCH_FAMILIES {
            launch_latency = launch_latency.with_family(f, Duration::from_secs(180));
        }
        Self {
            launch_latency,
            registration_delay: LatencyTable::uniform(Duration::from_secs(30)),
            device_plugin_delay: LatencyTable::uniform(Duration::from_secs(45)),
            accelerators_never_ready: 0.0,
            nodes_never_register: 0.0,
            gpu_faults_per_hour: 0.0,
            gpu_faults_resettable: 0.0,
            capacity: Vec::new(),
            insufficient_capacity: Vec::new(),
            interruptions: InterruptionConfig::default(),
            api: ApiBehaviour::default(),
            reservations: Vec::new(),
            flex_start: FlexStartConfig::default(),
        }
    }
}

/// A delay per instance family, with a default for the others.
///
/// In a file: either a bare duration (`30s`: that delay for every family) or
/// `{ default: 40s, families: { p5: 3m } }`. A table given in a file replaces the default
/// table entirely (including its per-family entries).
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyTable {
    /// The delay of families not listed.
    pub default: Duration,
    /// Delays by instance family (`InstanceType::family`, e.g. `p5`, `a3`, `NDisrH100v5`).
    pub families: BTreeMap<String, Duration>,
}

impl LatencyTable {
    /// The same delay for every family.
    pub fn uniform(default: Duration) -> Self {
        Self {
            default,
            families: BTreeMap::new(),
        }
    }

    /// This table with `family` set to `delay`.
    pub fn with_family(mut self, family: impl Into<String>, delay: Duration) -> Self {
        self.families.insert(family.into(), delay);
        self
    }

    /// The delay for an instance family.
    pub fn for_family(&self, family: &str) -> Duration {
        self.families.get(family).copied().unwrap_or(self.default)
    }
}

/// The map form of a [`LatencyTable`] in a file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct LatencyTableFile {
    #[serde(deserialize_with = "duration::required")]
    default: Duration,
    #[serde(default, deserialize_with = "duration::map")]
    families: BTreeMap<String, Duration>,
}

impl<'de> Deserialize<'de> for LatencyTable {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct TableVisitor;

        impl<'de> Visitor<'de> for TableVisitor {
            type Value = LatencyTable;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as \"40s\", or { default, families }")
            }

            fn visit_str<E: de::Error>(self, s: &str) -> Result<LatencyTable, E> {
                duration::GoDuration::deserialize(de::value::StrDeserializer::<E>::new(s))
                    .map(|g| LatencyTable::uniform(g.0))
            }

            fn visit_u64<E: de::Error>(self, n: u64) -> Result<LatencyTable, E> {
                duration::GoDuration::deserialize(de::value::U64Deserializer::<E>::new(n))
                    .map(|g| LatencyTable::uniform(g.0))
            }

            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<LatencyTable, A::Error> {
                let f = LatencyTableFile::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(LatencyTable {
                    default: f.default,
                    families: f.families,
                })
            }
        }

        d.deserialize_any(TableVisitor)
    }
}

/// At most `max` instances matching the selector may be alive (pending or running) at once.
///
/// The selector is `instanceType` or `family` (or neither: every type), optionally narrowed
/// to a `zone` and a `capacityType`; the limit counts every matching instance together, e.g.
/// `{ family: p5, max: 4 }` allows four p5 instances across all zones and capacity types.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CapacityLimit {
    /// Instance type name, e.g. `p5.48xlarge`.
    #[serde(default)]
    pub instance_type: Option<String>,
    /// Instance family, e.g. `p5`.
    #[serde(default)]
    pub family: Option<String>,
    /// Zone; all zones when absent.
    #[serde(default)]
    pub zone: Option<String>,
    /// Capacity type; all when absent.
    #[serde(default)]
    pub capacity_type: Option<CapacityType>,
    /// Maximum concurrent instances (0: none can launch).
    pub max: u32,
}

/// Launches of matching offerings fail with insufficient capacity from `from` until `until`
/// (offsets from the simulation's start; `until` absent: for the rest of the run). The
/// selector is as in [`CapacityLimit`]. Running instances are not affected.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct CapacityOutage {
    /// Instance type name.
    #[serde(default)]
    pub instance_type: Option<String>,
    /// Instance family.
    #[serde(default)]
    pub family: Option<String>,
    /// Zone; all zones when absent.
    #[serde(default)]
    pub zone: Option<String>,
    /// Capacity type; all when absent.
    #[serde(default)]
    pub capacity_type: Option<CapacityType>,
    /// Start of the window, from the simulation's start (inclusive). Default: 0.
    #[serde(default, deserialize_with = "duration::required")]
    pub from: Duration,
    /// End of the window, from the simulation's start (exclusive). Default: never ends.
    #[serde(default, deserialize_with = "duration::optional")]
    pub until: Option<Duration>,
}

/// Spot interruptions.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct InterruptionConfig {
    /// Expected interruptions per spot instance per running hour (a Poisson process: the time
    /// to the notice is exponential with this rate, counted from when the instance runs).
    /// Default: 0 (spot is never interrupted). AWS's Spot Instance Advisor buckets of
    /// "<5%" … ">20%" per month are rates of roughly 0.00007 … 0.0003 per hour; scenarios that
    /// exercise interruption handling use far higher rates.
    pub spot_rate_per_hour: f64,
    /// Time from the interruption notice to the reclaim. Default: the cloud's own notice —
    /// AWS 2 min, GCP 30 s, Azure 30 s (see [`InterruptionConfig::notice_for`]).
    #[serde(deserialize_with = "duration::optional")]
    pub notice: Option<Duration>,
}

impl InterruptionConfig {
    /// The notice period on `cloud`: the configured one, or the cloud's default (AWS spot:
    /// 2 minutes; GCP spot: 30 s; Azure Scheduled Events `Preempt`: at least 30 s).
    pub fn notice_for(&self, cloud: Cloud) -> Duration {
        self.notice.unwrap_or(match cloud {
            Cloud::Aws => Duration::from_secs(120),
            Cloud::Gcp | Cloud::Azure => Duration::from_secs(30),
        })
    }
}

/// API behaviour.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct ApiBehaviour {
    /// Probability that a `create`, `delete`, `get` or `list` call is throttled
    /// ([`quartermaster_cloud::CloudError::Throttled`] with `retry_after` 1 s). Default: 0.
    pub throttle_probability: f64,
    /// Probability that a call fails with a server error before doing anything
    /// ([`quartermaster_cloud::CloudError::Transient`]). Default: 0.
    pub error_probability: f64,
    /// Probability that a `create` or `delete` call does its work but its answer is lost (a
    /// timeout: the caller sees [`quartermaster_cloud::CloudError::Transient`]). A launch that
    /// succeeded but reported failure must be found again, not launched twice. Default: 0.
    pub lost_response_probability: f64,
}

/// What a [`CapacityLimit`] or [`CapacityOutage`] selects.
pub(crate) struct Selector<'a> {
    instance_type: Option<&'a str>,
    family: Option<&'a str>,
    zone: Option<&'a str>,
    capacity_type: Option<CapacityType>,
}

impl Selector<'_> {
    /// Whether an offering of `instance_type` (of `family`) in `zone` as `capacity_type` is
    /// selected.
    pub(crate) fn matches(
        &self,
        instance_type: &str,
        family: &str,
        zone: &str,
        capacity_type: CapacityType,
    ) -> bool {
        self.instance_type.is_none_or(|t| t == instance_type)
            && self.family.is_none_or(|f| f == family)
            && self.zone.is_none_or(|z| z == zone)
            && self.capacity_type.is_none_or(|c| c == capacity_type)
    }
}

impl CapacityLimit {
    pub(crate) fn selector(&self) -> Selector<'_> {
        Selector {
            instance_type: self.instance_type.as_deref(),
            family: self.family.as_deref(),
            zone: self.zone.as_deref(),
            capacity_type: self.capacity_type,
        }
    }
}

impl CapacityOutage {
    pub(crate) fn selector(&self) -> Selector<'_> {
        Selector {
            instance_type: self.instance_type.as_deref(),
            family: self.family.as_deref(),
            zone: self.zone.as_deref(),
            capacity_type: self.capacity_type,
        }
    }

    /// The window in absolute time for a simulation that started at `start`: its start and,
    /// if it ends, its end.
    pub(crate) fn window(&self, start: DateTime<Utc>) -> (DateTime<Utc>, Option<DateTime<Utc>>) {
        (after(start, self.from), self.until.map(|u| after(start, u)))
    }

    /// Whether the outage is on at `now`.
    pub(crate) fn is_active(&self, start: DateTime<Utc>, now: DateTime<Utc>) -> bool {
        let (from, until) = self.window(start);
        from <= now && until.is_none_or(|u| now < u)
    }
}

/// `t + d`, saturating at the end of time (durations parsed from files are far smaller).
pub(crate) fn after(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

#[cfg(test)]
mod tests;
