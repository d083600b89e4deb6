//! The workload trace: every job arrival (with its sampled run time) and every replica change,
//! generated up front from the scenario and the seed. The trace does not depend on what the
//! provisioner does, so the on-demand baseline replays exactly the same work.

use chrono::{DateTime, TimeDelta, Utc};

use crate::duration::Dur;
use crate::rng::{self, Rng};
use crate::scenario::{Arrival, DeploymentSpec, DurationDist, JobSpec, Scenario, WorkloadKind};

/// Something the workload does at a moment.
#[derive(Debug, Clone, PartialEq)]
pub enum TraceEvent {
    /// Job number `job` of a Job workload is submitted; each of its pods runs for `run_time`
    /// once bound.
    JobSubmitted {
        /// Index of the workload in the scenario.
        workload: usize,
        /// Job number within the workload (from 0).
        job: u64,
        /// How long each of its pods must run.
        run_time: TimeDelta,
    },
    /// A Deployment is scaled to `replicas`.
    Scaled {
        /// Index of the workload in the scenario.
        workload: usize,
        /// The new replica count.
        replicas: u32,
    },
}

/// The whole trace, in time order (ties: workload order, then generation order).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Trace {
    /// `(when, what)`.
    pub events: Vec<(DateTime<Utc>, TraceEvent)>,
}

impl Trace {
    /// Jobs submitted in the trace.
    pub fn jobs(&self) -> usize {
        self.events
            .iter()
            .filter(|(_, e)| matches!(e, TraceEvent::JobSubmitted { .. }))
            .count()
    }
}

/// Generates the trace of `scenario` for `seed`. Each workload draws from its own random
/// stream, so adding a workload leaves the others' traces unchanged.
pub fn generate(scenario: &Scenario, seed: u64) -> Trace {
    let end = scenario.duration;
    let mut events: Vec<(TimeDelta, usize, u64, TraceEvent)> = Vec::new();
    for (index, w) in scenario.workloads.iter().enumerate() {
        let mut rng = rng::workload_stream(seed, index);
        let mut order = 0u64;
        let mut push = |at: TimeDelta, e: TraceEvent, events: &mut Vec<_>| {
            events.push((at, index, order, e));
            order += 1;
        };
        match &w.kind {
            WorkloadKind::Job(job) => {
                let times = arrival_times(job, end, &mut rng);
                let mut number = 0u64;
                for (at, burst) in times {
                    for _ in 0..burst {
                        let run_time = sample(job.duration, &mut rng);
                        push(
                            at,
                            TraceEvent::JobSubmitted {
                                workload: index,
                                job: number,
                                run_time,
                            },
                            &mut events,
                        );
                        number += 1;
                    }
                }
            }
            WorkloadKind::Deployment(d) => {
                for (at, replicas) in replica_changes(d, end) {
                    push(
                        at,
                        TraceEvent::Scaled {
                            workload: index,
                            replicas,
                        },
                        &mut events,
                    );
                }
            }
        }
    }
    events.sort_by_key(|(at, index, order, _)| (*at, *index, *order));
    Trace {
        events: events
            .into_iter()
            .map(|(at, _, _, e)| (scenario.start + at, e))
            .collect(),
    }
}

/// Arrival offsets with their burst sizes, sorted, all before `end`.
fn arrival_times(job: &JobSpec, end: TimeDelta, rng: &mut Rng) -> Vec<(TimeDelta, u32)> {
    let mut out = Vec::new();
    for a in &job.arrivals {
        match *a {
            Arrival::At { at, burst } => {
                if at.delta() < end {
                    out.push((at.delta(), burst));
                }
            }
            Arrival::Every {
                every,
                count,
                from,
                until,
                burst,
            } => {
                let stop = until.map_or(end, Dur::delta).min(end);
                let mut t = from.delta();
                let mut n = 0u32;
                while t < stop && count.is_none_or(|c| n < c) {
                    out.push((t, burst));
                    t += every.delta();
                    n += 1;
                }
            }
            Arrival::Poisson {
                rate_per_hour,
                from,
                until,
                burst,
            } => {
                let stop = until.map_or(end, Dur::delta).min(end);
                let mut t = from.delta();
                loop {
                    let gap = rng::exponential(rng, rate_per_hour) * 3600.0;
                    t += seconds(gap);
                    if t >= stop {
                        break;
                    }
                    out.push((t, burst));
                }
            }
        }
    }
    out.sort_by_key(|(t, _)| *t);
    out
}

/// A delta from fractional seconds, to the millisecond.
fn seconds(s: f64) -> TimeDelta {
    let ms = (s * 1000.0).round();
    if ms.is_finite() && ms < 1e15 {
        TimeDelta::milliseconds(ms as i64)
    } else {
        TimeDelta::MAX
    }
}

/// A run time drawn from `d` (never below one second).
fn sample(d: DurationDist, rng: &mut Rng) -> TimeDelta {
    let secs = match d {
        DurationDist::Fixed(v) => v.secs_f64(),
        DurationDist::Uniform { min, max } => {
            min.secs_f64() + (max.secs_f64() - min.secs_f64()) * rng::uniform(rng)
        }
        DurationDist::LogNormal { median, p90 } => {
            // p90 = median · exp(1.2816 σ).
            const Z90: f64 = 1.281_551_565_544_600_4;
            let mu = median.secs_f64().ln();
            let sigma = (p90.secs_f64().ln() - mu) / Z90;
            (mu + sigma * rng::normal(rng)).exp()
        }
    };
    seconds(secs.max(1.0))
}

/// `(offset, replicas)` whenever the replica count changes, from the start on.
fn replica_changes(d: &DeploymentSpec, end: TimeDelta) -> Vec<(TimeDelta, u32)> {
    let mut out: Vec<(TimeDelta, u32)> = Vec::new();
    let set = |at: TimeDelta, replicas: u32, out: &mut Vec<(TimeDelta, u32)>| {
        if at < end && out.last().is_none_or(|(_, r)| *r != replicas) {
            out.push((at, replicas));
        }
    };
    if let Some(c) = d.diurnal {
        let step = c.step.delta();
        let period = c.period.secs_f64();
        let mut t = TimeDelta::zero();
        while t < end {
            let phase = (t.as_seconds_f64() - c.peak_at.secs_f64()) / period;
            let level = (1.0 + (std::f64::consts::TAU * phase).cos()) / 2.0;
            let replicas = f64::from(c.min) + f64::from(c.max - c.min) * level;
            set(t, replicas.round() as u32, &mut out);
            t += step;
        }
        return out;
    }
    set(TimeDelta::zero(), d.replicas, &mut out);
    for (at, replicas) in &d.schedule {
        set(at.delta(), *replicas, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Scenario;

    fn scenario(workload: &str) -> Scenario {
        let text = format!(
            "apiVersion: quartermaster.dev/v1alpha1
kind: Scenario
metadata: {{name: t}}
spec:
  duration: 24h
  nodePools:
    - apiVersion: quartermaster.dev/v1
      kind: NodePool
      metadata: {{name: gpu}}
      spec:
        template:
          spec:
            nodeClassRef: {{group: quartermaster.dev, kind: AWSNodeClass, name: default}}
            requirements:
              - {{key: quartermaster.dev/instance-family, operator: In, values: [g5, m6i]}}
  workload:
{workload}"
        );
        Scenario::parse("t.yaml", &text, None).unwrap_or_else(|e| panic!("{e}"))
    }

    const JOBS: &str = "    - name: train
      kind: Job
      arrivals:
        - {ratePerHour: 4}
        - {every: 6h, count: 3, from: 1h, burst: 2}
        - {at: 30m}
      duration: {median: 1h, p90: 4h}
      template:
        spec:
          containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]
";

    #[test]
    fn the_same_seed_gives_the_same_trace_and_another_seed_another() {
        let s = scenario(JOBS);
        let a = generate(&s, 7);
        assert_eq!(a, generate(&s, 7));
        assert_ne!(a, generate(&s, 8));
        // 1 + 3 × 2 fixed jobs plus about 4/h × 24 h Poisson ones.
        let jobs = a.jobs();
        assert!((60..=140).contains(&jobs), "{jobs}");
        assert!(a.events.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(a.events.iter().all(|(t, _)| *t >= s.start && *t < s.end()));
        let at = |h: i64, m: i64| s.start + TimeDelta::hours(h) + TimeDelta::minutes(m);
        for t in [at(0, 30), at(1, 0), at(7, 0), at(13, 0)] {
            assert!(a.events.iter().any(|(x, _)| *x == t), "no arrival at {t}");
        }
        // Job numbers are consecutive and run times are positive.
        let mut numbers = Vec::new();
        for (_, e) in &a.events {
            let TraceEvent::JobSubmitted { job, run_time, .. } = e else {
                panic!("a Job workload only submits jobs")
            };
            assert!(*run_time >= TimeDelta::seconds(1));
            numbers.push(*job);
        }
        numbers.sort_unstable();
        assert!(numbers.iter().enumerate().all(|(i, n)| *n == i as u64));
    }

    #[test]
    fn log_normal_run_times_have_the_given_median() {
        let mut rng = rng::stream(3, 3);
        let d = DurationDist::LogNormal {
            median: crate::duration::parse("1h").unwrap(),
            p90: crate::duration::parse("4h").unwrap(),
        };
        let mut xs: Vec<i64> = (0..20_001)
            .map(|_| sample(d, &mut rng).num_seconds())
            .collect();
        xs.sort_unstable();
        let median = xs[10_000] as f64;
        let p90 = xs[18_000] as f64;
        assert!((median / 3600.0 - 1.0).abs() < 0.05, "{median}");
        assert!((p90 / 14_400.0 - 1.0).abs() < 0.08, "{p90}");
    }

    #[test]
    fn deployments_follow_their_schedule_and_day_curve() {
        let s = scenario(
            "    - name: web
      kind: Deployment
      replicas: 2
      schedule: [{at: 1h, replicas: 5}, {at: 2h, replicas: 5}, {at: 3h, replicas: 1}]
      template: {spec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}}
    - name: infer
      kind: Deployment
      diurnal: {min: 1, max: 9, peakAt: 14h, step: 1h}
      template: {spec: {containers: [{name: c, resources: {requests: {cpu: '1'}}}]}}
",
        );
        let t = generate(&s, 1);
        let scaled = |w: usize| -> Vec<(i64, u32)> {
            t.events
                .iter()
                .filter_map(|(at, e)| match e {
                    TraceEvent::Scaled { workload, replicas } if *workload == w => {
                        Some(((*at - s.start).num_hours(), *replicas))
                    }
                    _ => None,
                })
                .collect()
        };
        assert_eq!(scaled(0), vec![(0, 2), (1, 5), (3, 1)]);
        let curve = scaled(1);
        // Peak at 14h, trough twelve hours before.
        let at = |h: i64| curve.iter().rev().find(|c| c.0 <= h).map(|c| c.1);
        assert_eq!(curve.first().map(|c| c.0), Some(0), "{curve:?}");
        assert_eq!(at(2), Some(1), "{curve:?}");
        assert_eq!(at(14), Some(9), "{curve:?}");
        assert_eq!(curve.iter().map(|(_, r)| *r).max(), Some(9));
        assert_eq!(curve.iter().map(|(_, r)| *r).min(), Some(1));
    }
}
