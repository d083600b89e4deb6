//! How the kwok cloud behaves: launch latency, device-plugin delay, capacity limits and
//! insufficient-capacity windows, with the simulated cloud's field names and types (a
//! `--kwok-config` file reads like the `cloud:` section of a simulation scenario).
//!
//! ```yaml
//! launchLatency: { default: 10s, families: { p5: 1m } }   # or a bare duration: 10s
//! devicePluginDelay: 5s
//! capacity:
//!   - { family: p5, capacityType: spot, max: 2 }
//! insufficientCapacity:
//!   - { instanceType: p5.48xlarge, zone: us-east-1a, from: 0s, until: 30m }
//! ```
//!
//! Every field is optional; durations are Go-style (`90s`, `5m`, `1h30m`); unknown fields are
//! rejected. Outage windows are offsets from when the provider was built (the controller's
//! start).

use std::path::Path;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_pricing::{CapacityType, InstanceType};
use quartermaster_sim::{CapacityLimit, CapacityOutage, LatencyTable};
use serde::Deserialize;

use crate::KwokError;

/// The kwok cloud's behaviour. `KwokConfig::default()` launches at once, reports accelerators
/// 5 s after the Node appears, never runs out of capacity.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct KwokConfig {
    /// How long `create` takes before the Node appears (the instance booting and joining).
    /// Default: 0, as Karpenter's kwok provider.
    pub launch_latency: LatencyTable,
    /// From the Node appearing to its device plugin advertising the accelerators (e.g.
    /// `nvidia.com/gpu`) in capacity and allocatable. Default: 5 s.
    pub device_plugin_delay: LatencyTable,
    /// Concurrent-node limits: a launch that would exceed one fails with insufficient capacity.
    /// Counted over this cloud's kwok Nodes and its launches in flight. Default: none.
    pub capacity: Vec<CapacityLimit>,
    /// Windows in which launches of matching offerings fail with insufficient capacity, and the
    /// offerings are reported unavailable by `instance_types`. Default: none.
    pub insufficient_capacity: Vec<CapacityOutage>,
}

impl Default for KwokConfig {
    fn default() -> Self {
        Self {
            launch_latency: LatencyTable::uniform(Duration::ZERO),
            device_plugin_delay: LatencyTable::uniform(Self::DEFAULT_DEVICE_PLUGIN_DELAY),
            capacity: Vec::new(),
            insufficient_capacity: Vec::new(),
        }
    }
}

impl KwokConfig {
    /// The default device-plugin delay.
    pub const DEFAULT_DEVICE_PLUGIN_DELAY: Duration = Duration::from_secs(5);

    /// Parses a config from YAML or JSON text and validates it; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Self, KwokError> {
        // An empty file is the default config, as `{}` is.
        let config: KwokConfig = if text.trim().is_empty() {
            KwokConfig::default()
        } else {
            serde_norway::from_str(text).map_err(|e| KwokError::Parse {
                file: file.to_owned(),
                message: e.to_string(),
            })?
        };
        config.validate()?;
        Ok(config)
    }

    /// Reads, parses and validates a config file.
    pub fn from_path(path: &Path) -> Result<Self, KwokError> {
        let file = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| KwokError::Read {
            file: file.clone(),
            message: e.to_string(),
        })?;
        Self::parse(&file, &text)
    }

    /// Checks consistency; the error names the field as written in a file.
    pub fn validate(&self) -> Result<(), KwokError> {
        for (i, l) in self.capacity.iter().enumerate() {
            one_selector(&format!("capacity[{i}]"), &l.instance_type, &l.family)?;
        }
        for (i, o) in self.insufficient_capacity.iter().enumerate() {
            let at = format!("insufficientCapacity[{i}]");
            one_selector(&at, &o.instance_type, &o.family)?;
            if let Some(until) = o.until
                && until <= o.from
            {
                return Err(KwokError::config(
                    format!("{at}.until"),
                    format!("must be after from ({until:?} <= {:?})", o.from),
                ));
            }
        }
        Ok(())
    }

    /// The index of the outage window that refuses this offering at `now`, if one does.
    /// `start` is when the provider was built.
    pub(crate) fn active_outage(
        &self,
        offering: &OfferingRef<'_>,
        start: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> Option<usize> {
        self.insufficient_capacity.iter().position(|o| {
            let from = after(start, o.from);
            let until = o.until.map(|u| after(start, u));
            from <= now
                && until.is_none_or(|u| now < u)
                && offering.matches(&o.instance_type, &o.family, &o.zone, o.capacity_type)
        })
    }

    /// The indices of the capacity limits this offering counts against.
    pub(crate) fn limits_for(&self, offering: &OfferingRef<'_>) -> Vec<usize> {
        (0..self.capacity.len())
            .filter(|&i| self.counts_against(i, offering))
            .collect()
    }

    /// Whether this offering counts against capacity limit `i`.
    pub(crate) fn counts_against(&self, i: usize, offering: &OfferingRef<'_>) -> bool {
        self.capacity.get(i).is_some_and(|l| {
            offering.matches(&l.instance_type, &l.family, &l.zone, l.capacity_type)
        })
    }
}

fn one_selector(
    at: &str,
    instance_type: &Option<String>,
    family: &Option<String>,
) -> Result<(), KwokError> {
    if instance_type.is_some() && family.is_some() {
        return Err(KwokError::config(
            at,
            "set instanceType or family, not both",
        ));
    }
    Ok(())
}

/// One offering as the limits and outages see it: what a launch asks for, or what a Node is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct OfferingRef<'a> {
    pub(crate) instance_type: &'a str,
    pub(crate) family: &'a str,
    pub(crate) zone: &'a str,
    pub(crate) capacity_type: CapacityType,
}

impl<'a> OfferingRef<'a> {
    pub(crate) fn new(ty: &'a InstanceType, zone: &'a str, capacity_type: CapacityType) -> Self {
        Self {
            instance_type: &ty.name,
            family: &ty.family,
            zone,
            capacity_type,
        }
    }

    /// Whether a selector (each part absent: any) matches this offering.
    fn matches(
        &self,
        instance_type: &Option<String>,
        family: &Option<String>,
        zone: &Option<String>,
        capacity_type: Option<CapacityType>,
    ) -> bool {
        instance_type
            .as_deref()
            .is_none_or(|t| t == self.instance_type)
            && family.as_deref().is_none_or(|f| f == self.family)
            && zone.as_deref().is_none_or(|z| z == self.zone)
            && capacity_type.is_none_or(|c| c == self.capacity_type)
    }
}

/// `t + d`, saturating at the end of time.
pub(crate) fn after(t: DateTime<Utc>, d: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}
