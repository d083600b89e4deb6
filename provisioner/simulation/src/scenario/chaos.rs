//! `simulate --chaos SEED`: faults laid over a scenario's clouds, drawn from their own seed so
//! that the same scenario, seed and chaos seed repeat exactly.
//!
//! What is injected (on top of what the scenario's `cloud:` section already asks for):
//! - API faults on every call: throttling (5%, with Retry-After), server errors (3%), and
//!   answers lost after the call took effect (3%: a launch that succeeded but reported failure,
//!   a delete that did but said it did not);
//! - Nodes that never register (2%) and accelerators that never appear (2%);
//! - GPUs that fail on running nodes (0.02 per GPU node-hour: `AcceleratedHardwareReady=False`,
//!   the GPUs withdrawn), which node repair must replace;
//! - spot interruptions at 0.1 more per hour per instance;
//! - three insufficient-capacity storms, each across a whole instance family the NodePools
//!   name (all zones, spot or every capacity type), 30 minutes to 3 hours long;
//! - two price jumps (a family's prices times 0.5 to 1.6).
//!
//! - driver crashes, 0.25 per hour (one every 4 simulated hours on average; at least four per
//!   run expected in a short scenario), each followed by a restart that rebuilds the engine
//!   from the cluster and the clouds only.

use std::time::Duration;

use chrono::TimeDelta;
use quartermaster_pricing::CapacityType;
use quartermaster_sim::CapacityOutage;
use serde_json::Value;

use super::{Change, Scenario};
use crate::rng::{self, uniform};

/// The chaos draws' stream (apart from the workload's and the clouds').
const CHAOS_STREAM: u64 = 900;
/// GPU faults per GPU node-hour under chaos (node repair replaces the broken nodes).
pub const GPU_FAULTS_PER_HOUR: f64 = 0.02;
/// Driver crashes per simulated hour under chaos.
pub const DRIVER_CRASHES_PER_HOUR: f64 = 0.25;

impl Scenario {
    /// The same scenario with the faults of `--chaos seed` laid over it (see the module docs).
    pub fn with_chaos(&self, seed: u64) -> Scenario {
        let mut s = self.clone();
        s.chaos = Some(seed);
        let mut r = rng::stream(seed, CHAOS_STREAM);
        let c = &mut s.cloud;
        c.api.throttle_probability = c.api.throttle_probability.max(0.05);
        c.api.error_probability = c.api.error_probability.max(0.03);
        c.api.lost_response_probability = c.api.lost_response_probability.max(0.03);
        c.nodes_never_register = c.nodes_never_register.max(0.02);
        c.accelerators_never_ready = c.accelerators_never_ready.max(0.02);
        c.gpu_faults_per_hour = c.gpu_faults_per_hour.max(GPU_FAULTS_PER_HOUR);
        c.interruptions.spot_rate_per_hour += 0.1;
        // At least four crashes expected in a short scenario.
        let hours = s.duration.as_seconds_f64() / 3600.0;
        let rate = DRIVER_CRASHES_PER_HOUR.max(4.0 / hours.max(1.0));
        s.driver_crashes_per_hour = s.driver_crashes_per_hour.max(rate);
        let families = pool_families(&s);
        let run = s.duration.as_seconds_f64().max(1.0);
        if !families.is_empty() {
            for _ in 0..3 {
                let family = pick(&mut r, &families).to_owned();
                let from = uniform(&mut r) * run;
                let length = 1800.0 + uniform(&mut r) * 9000.0;
                let capacity_type = (uniform(&mut r) < 0.5).then_some(CapacityType::Spot);
                s.cloud.insufficient_capacity.push(CapacityOutage {
                    instance_type: None,
                    family: Some(family),
                    zone: None,
                    capacity_type,
                    from: Duration::from_secs_f64(from),
                    until: Some(Duration::from_secs_f64(from + length)),
                });
            }
            for _ in 0..2 {
                let family = pick(&mut r, &families).to_owned();
                let at = s.start + TimeDelta::seconds((uniform(&mut r) * run) as i64);
                let factor = 0.5 + uniform(&mut r) * 1.1;
                s.changes.push(Change {
                    at,
                    node_pools: Vec::new(),
                    prices: vec![(format!("{family}.*"), None, factor)],
                });
            }
            s.changes.sort_by_key(|c| c.at);
        }
        s
    }
}

fn pick<'a>(r: &mut rng::Rng, from: &'a [String]) -> &'a str {
    let i = ((uniform(r) * from.len() as f64) as usize).min(from.len() - 1);
    &from[i]
}

/// The instance families the NodePools' requirements name (`In` on an `instance-family` key),
/// sorted and deduplicated.
fn pool_families(s: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    for pool in &s.node_pools {
        collect_families(pool, &mut out);
    }
    out.sort();
    out.dedup();
    out
}

fn collect_families(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            let is_family = m
                .get("key")
                .and_then(Value::as_str)
                .is_some_and(|k| k.ends_with("instance-family"));
            let is_in = m.get("operator").and_then(Value::as_str) == Some("In");
            if is_family && is_in {
                for f in m
                    .get("values")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    out.extend(f.as_str().map(str::to_owned));
                }
            }
            for x in m.values() {
                collect_families(x, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|x| collect_families(x, out)),
        _ => {}
    }
}
