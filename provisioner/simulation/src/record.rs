//! The timeline recorder: every instance with its billing interval, every pod with its run
//! segments on nodes, and step functions of what changes over time (pending pods, GPUs paid and
//! requested, spend rate). Reports are computed from this record after the run.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use quartermaster_pricing::{CapacityType, Cloud};
use quartermaster_solver::{PodRef, Resources};

/// A value that changes at instants and holds in between.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Step {
    /// `(from, value)`: the value from that instant on.
    points: Vec<(DateTime<Utc>, f64)>,
    current: f64,
}

impl Step {
    /// Adds `delta` to the value from `at` on. `at` is usually the latest instant so far; an
    /// earlier one (a change dated before one already recorded for later, as a billing start
    /// after a flex-start queue) is put in its place.
    pub fn add(&mut self, at: DateTime<Utc>, delta: f64) {
        if delta == 0.0 {
            return;
        }
        self.current += delta;
        match self.points.last_mut() {
            Some((t, v)) if *t == at => *v = self.current,
            Some((t, _)) if *t > at => {
                let from = self.points.partition_point(|(t, _)| *t < at);
                if self.points.get(from).is_none_or(|(t, _)| *t != at) {
                    let before = from.checked_sub(1).map_or(0.0, |i| self.points[i].1);
                    self.points.insert(from, (at, before));
                }
                for (_, v) in &mut self.points[from..] {
                    *v += delta;
                }
            }
            _ => self.points.push((at, self.current)),
        }
    }

    /// The value now.
    pub fn current(&self) -> f64 {
        self.current
    }

    /// The largest value it ever took.
    pub fn max(&self) -> f64 {
        self.points.iter().map(|(_, v)| *v).fold(0.0, f64::max)
    }

    /// The largest value in each of `n` equal buckets of `[start, end)`.
    pub fn bucket_max(&self, start: DateTime<Utc>, end: DateTime<Utc>, n: usize) -> Vec<f64> {
        let total = (end - start).as_seconds_f64();
        if n == 0 || total <= 0.0 {
            return Vec::new();
        }
        let width = total / n as f64;
        let mut out = vec![0.0f64; n];
        for (i, (t, v)) in self.points.iter().enumerate() {
            let a = (*t - start).as_seconds_f64().max(0.0);
            let b = self
                .points
                .get(i + 1)
                .map_or(total, |(u, _)| (*u - start).as_seconds_f64())
                .min(total);
            if b <= a {
                continue;
            }
            let first = ((a / width) as usize).min(n - 1);
            // A value that ends exactly on a bucket edge does not reach into the next bucket.
            let last = (((b / width).ceil() as usize).max(1) - 1).min(n - 1);
            for slot in &mut out[first..=last.max(first)] {
                *slot = slot.max(*v);
            }
        }
        out
    }

    /// The time-weighted average over each of `n` equal buckets of `[start, end)`.
    pub fn buckets(&self, start: DateTime<Utc>, end: DateTime<Utc>, n: usize) -> Vec<f64> {
        let total = (end - start).as_seconds_f64();
        if n == 0 || total <= 0.0 {
            return Vec::new();
        }
        let width = total / n as f64;
        let mut out = vec![0.0; n];
        // Segments [t_i, t_{i+1}) with value v_i; before the first point the value is 0.
        let mut segments: Vec<(f64, f64, f64)> = Vec::with_capacity(self.points.len());
        for (i, (t, v)) in self.points.iter().enumerate() {
            let a = (*t - start).as_seconds_f64().max(0.0);
            let b = self
                .points
                .get(i + 1)
                .map_or(total, |(u, _)| (*u - start).as_seconds_f64())
                .min(total);
            if b > a {
                segments.push((a, b, *v));
            }
        }
        for (a, b, v) in segments {
            let first = ((a / width) as usize).min(n - 1);
            let last = ((b / width) as usize).min(n - 1);
            for (k, slot) in out.iter_mut().enumerate().take(last + 1).skip(first) {
                let lo = a.max(k as f64 * width);
                let hi = b.min((k + 1) as f64 * width);
                if hi > lo {
                    *slot += v * (hi - lo) / width;
                }
            }
        }
        out
    }
}

/// Why an instance stopped being billed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EndReason {
    /// Quartermaster deleted it.
    Deleted,
    /// The cloud reclaimed it (spot interruption).
    Reclaimed,
    /// Still running when the simulation ended (billed up to the end).
    RunEnded,
}

/// An instance, billed from launch acceptance until deleted or reclaimed.
#[derive(Debug, Clone, PartialEq)]
pub struct InstanceRecord {
    /// Provider id.
    pub provider_id: String,
    /// Cloud.
    pub cloud: Cloud,
    /// NodeClaim name.
    pub claim: String,
    /// NodePool name.
    pub node_pool: String,
    /// Node name once registered.
    pub node: Option<String>,
    /// Instance type.
    pub instance_type: String,
    /// Zone.
    pub zone: String,
    /// Region.
    pub region: String,
    /// Capacity type.
    pub capacity_type: CapacityType,
    /// Billed price, dollars per hour.
    pub price_per_hour: f64,
    /// On-demand price of the same type in the same zone (the list price), dollars per hour.
    pub list_price_per_hour: f64,
    /// Where the price comes from (catalog source key).
    pub price_source: String,
    /// Accelerator model label value (`h100`, `l4`), empty for CPU types.
    pub accelerator_model: String,
    /// Whole accelerators.
    pub accelerators: u32,
    /// Allocatable CPU millicores, memory bytes and accelerators, for cost shares.
    pub allocatable: Resources,
    /// Billing starts (for flex-start, when its queue wait ends).
    pub start: DateTime<Utc>,
    /// Billing ends (`None` while running).
    pub end: Option<DateTime<Utc>>,
    /// Why it ended.
    pub end_reason: Option<EndReason>,
    /// Whether it received a spot interruption notice.
    pub interrupted: bool,
    /// When one of its GPUs failed (`gpuFaultsPerHour`), if one did.
    pub gpu_fault_at: Option<DateTime<Utc>>,
    /// When a reboot cleared that fault, if one did.
    pub gpu_cleared_at: Option<DateTime<Utc>>,
}

impl InstanceRecord {
    /// Billed hours (up to `end` if still running).
    pub fn hours(&self, end: DateTime<Utc>) -> f64 {
        (self.end.unwrap_or(end) - self.start)
            .as_seconds_f64()
            .max(0.0)
            / 3600.0
    }

    /// Dollars billed.
    pub fn cost(&self, end: DateTime<Utc>) -> f64 {
        self.hours(end) * self.price_per_hour
    }

    /// Accelerator-hours paid after a GPU fault, until the node went, a reboot cleared the
    /// fault, or `end`.
    pub fn gpu_hours_lost_to_faults(&self, end: DateTime<Utc>) -> f64 {
        self.gpu_fault_at.map_or(0.0, |at| {
            let until = self.gpu_cleared_at.or(self.end).unwrap_or(end);
            let hours = (until - at).as_seconds_f64().max(0.0) / 3600.0;
            hours * f64::from(self.accelerators)
        })
    }
}

/// A pod of the trace.
#[derive(Debug, Clone, PartialEq)]
pub struct PodRecord {
    /// `namespace/name`.
    pub id: PodRef,
    /// Index of its workload in the scenario.
    pub workload: usize,
    /// Requests.
    pub requests: Resources,
    /// Accelerators requested.
    pub accelerators: i64,
    /// Created.
    pub created: DateTime<Utc>,
    /// Bound for the first time.
    pub first_bound: Option<DateTime<Utc>>,
    /// Deleted, or finished.
    pub gone: Option<DateTime<Utc>>,
    /// Whether it ran to completion (Job pods).
    pub completed: bool,
    /// Times it was stopped on a node before finishing (drain, interruption, move).
    pub evictions: u32,
}

/// A pod running on an instance over `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Segment {
    /// Index into [`Record::pods`].
    pub pod: usize,
    /// Index into [`Record::instances`].
    pub instance: usize,
    /// Started running.
    pub start: DateTime<Utc>,
    /// Stopped.
    pub end: DateTime<Utc>,
}

/// Room a CapacityBuffer placeholder held on an instance over `[start, end)`: headroom.
#[derive(Debug, Clone, PartialEq)]
pub struct HeadroomSegment {
    /// The buffer (`namespace/name`).
    pub buffer: String,
    /// The placeholder (`namespace/capacitybuffer-<buffer>-<i>`).
    pub pod: PodRef,
    /// What it holds.
    pub requests: Resources,
    /// Index into [`Record::instances`].
    pub instance: usize,
    /// Since.
    pub start: DateTime<Utc>,
    /// Until.
    pub end: DateTime<Utc>,
}

/// Everything a run leaves behind.
#[derive(Debug, Clone, Default)]
pub struct Record {
    /// Instances in launch order.
    pub instances: Vec<InstanceRecord>,
    /// Pods in creation order.
    pub pods: Vec<PodRecord>,
    /// Run segments in the order they ended.
    pub segments: Vec<Segment>,
    /// Room CapacityBuffers held, in the order it was given up.
    pub headroom: Vec<HeadroomSegment>,
    /// Pods created and not running (pending, or evicted and waiting).
    pub pending: Step,
    /// Accelerators requested by running pods.
    pub gpus_requested: Step,
    /// Accelerators on billed instances.
    pub gpus_paid: Step,
    /// Dollars per hour of billed instances.
    pub spend_rate: Step,
    /// Billed instances.
    pub nodes: Step,
    by_provider_id: BTreeMap<String, usize>,
}

impl Record {
    /// The instance with this provider id.
    pub fn instance(&self, provider_id: &str) -> Option<usize> {
        self.by_provider_id.get(provider_id).copied()
    }

    /// The live (still billed) instance launched for `claim`, if any.
    pub fn live_instance_of_claim(&self, claim: &str) -> Option<usize> {
        self.instances
            .iter()
            .rposition(|i| i.claim == claim && i.end.is_none())
    }

    /// Starts billing an instance; returns its index. An instance already recorded (an
    /// idempotent create) is not billed twice.
    pub fn launched(&mut self, r: InstanceRecord) -> usize {
        if let Some(&i) = self.by_provider_id.get(&r.provider_id) {
            return i;
        }
        let at = r.start;
        self.gpus_paid.add(at, f64::from(r.accelerators));
        self.spend_rate.add(at, r.price_per_hour);
        self.nodes.add(at, 1.0);
        self.by_provider_id
            .insert(r.provider_id.clone(), self.instances.len());
        self.instances.push(r);
        self.instances.len() - 1
    }

    /// Stops billing an instance (idempotent). One that ends before its billing started (a
    /// flex-start request deleted in the queue) is billed nothing.
    pub fn ended(&mut self, index: usize, at: DateTime<Utc>, reason: EndReason) {
        let r = &mut self.instances[index];
        if r.end.is_some() {
            return;
        }
        let at = at.max(r.start);
        r.end = Some(at);
        r.end_reason = Some(reason);
        let (gpus, price) = (f64::from(r.accelerators), r.price_per_hour);
        self.gpus_paid.add(at, -gpus);
        self.spend_rate.add(at, -price);
        self.nodes.add(at, -1.0);
    }
}

#[cfg(test)]
mod tests {
    use chrono::TimeDelta;

    use super::*;

    #[test]
    fn a_step_dated_before_the_latest_goes_in_its_place() {
        let t0 = DateTime::from_timestamp(0, 0).unwrap();
        let h = |x: i64| t0 + TimeDelta::minutes(x * 30);
        let mut s = Step::default();
        s.add(h(3), 2.0); // a billing start after a queue: 2 from 1:30
        s.add(h(1), 1.0); // 1 more from 0:30, recorded after it
        s.add(h(3), -2.0); // ended when it started: nothing billed
        s.add(h(4), 5.0);
        assert_eq!(s.current(), 6.0);
        assert_eq!(s.buckets(t0, h(5), 5), vec![0.0, 1.0, 1.0, 1.0, 6.0]);
        assert_eq!(s.max(), 6.0);
    }

    #[test]
    fn step_buckets_are_time_weighted_averages() {
        let t0 = DateTime::from_timestamp(0, 0).unwrap();
        let h = |x: i64| t0 + TimeDelta::minutes(x * 30);
        let mut s = Step::default();
        s.add(h(1), 4.0); // 4 from 0:30
        s.add(h(2), -4.0); // 0 from 1:00
        s.add(h(2), 2.0); // same instant: 2 from 1:00
        assert_eq!(s.current(), 2.0);
        assert_eq!(s.max(), 4.0);
        assert_eq!(s.buckets(t0, h(4), 2), vec![2.0, 2.0]);
        assert_eq!(s.buckets(t0, h(4), 4), vec![0.0, 4.0, 2.0, 2.0]);
        assert_eq!(s.bucket_max(t0, h(4), 2), vec![4.0, 2.0]);
        assert_eq!(s.bucket_max(t0, h(4), 4), vec![0.0, 4.0, 2.0, 2.0]);
    }
}
