//! How long a pass takes once every pod runs: the figure for a controller at rest, when nothing
//! changed but the pass still looks at everything. A measure, not a test (no clock is asserted):
//!
//! ```text
//! QUARTERMASTER_PASS_PODS=110,5000 cargo test --release -p quartermaster-controller \
//!     pass_latency -- --ignored --nocapture
//! ```
//!
//! The cluster is W2's GPU mix (60% × 1 GPU, 20% × 2, 15% × 4, 5% × 8) scaled to each count,
//! bound by the scheduler stand-in of [`super::scheduler_disobeys`].

use std::time::{Duration, Instant};

use quartermaster_pricing::Catalog;

use super::scheduler_disobeys::{bind_cycle, gpu_mix_cluster};
use super::*;

/// Passes timed at rest, per pod count (`QUARTERMASTER_PASS_TIMED` sets another count, e.g. for
/// a profiler to attach once `at rest` is printed).
const TIMED_PASSES: usize = 30;

#[tokio::test(start_paused = true)]
#[ignore = "a measure: run with --release --ignored --nocapture"]
async fn pass_latency() {
    let counts: Vec<usize> = std::env::var("QUARTERMASTER_PASS_PODS")
        .unwrap_or_else(|_| "110".into())
        .split(',')
        .filter_map(|n| n.trim().parse().ok())
        .collect();
    for pods in counts {
        let (at_rest, reads, skipped, [one_by_one, together]) = at_rest(pods).await;
        let ms = |d: &Duration| d.as_secs_f64() * 1e3;
        println!(
            "pass_latency pods={pods} passes={} p50_ms={:.2} p90_ms={:.2} max_ms={:.2} pods_read_at_rest={reads} observes_and_syncs_skipped={skipped} read_each_pod_ms={:.2} read_all_together_ms={:.2}",
            at_rest.len(),
            ms(&at_rest[at_rest.len() / 2]),
            ms(&at_rest[at_rest.len() * 9 / 10]),
            ms(at_rest.last().expect("passes")),
            ms(&one_by_one),
            ms(&together),
        );
    }
}

/// W2's mix scaled to `total` pods: (GPUs, pods), the remainder to one-GPU pods.
fn mix(total: usize) -> Vec<(u32, usize)> {
    let mut out = vec![
        (1, total * 60 / 100),
        (2, total * 20 / 100),
        (4, total * 15 / 100),
        (8, total * 5 / 100),
    ];
    let sum: usize = out.iter().map(|m| m.1).sum();
    out[0].1 += total - sum;
    out
}

/// Runs `pods` pods until every one is bound and the statuses settled, then times passes with
/// nothing changed; returns their durations, sorted, how many pods those passes read, how
/// many observes and status syncs they skipped, and how long reading every pod afresh takes
/// (see [`read_every_pod`]).
async fn at_rest(pods: usize) -> (Vec<Duration>, u64, u64, [Duration; 2]) {
    let api = gpu_mix_cluster(&mix(pods));
    let catalog = Catalog::embedded();
    let mut env = Env::new(api);
    let mut second: i64 = 0;
    loop {
        env.pass_at(second).await;
        let pending = bind_cycle(&mut env, &catalog);
        second += 1;
        assert!(second < 600, "{pending} of {pods} pods still pending");
        if pending == 0 {
            break;
        }
    }
    // Statuses and events follow the binding within a few passes.
    env.passes(second, second + 10).await;
    second += 11;
    let reads = env.driver.pod_reads();
    let skipped = env.driver.skipped_at_rest();
    let timed = std::env::var("QUARTERMASTER_PASS_TIMED")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(TIMED_PASSES);
    println!("pass_latency pods={pods} at rest: timing {timed} passes");
    let mut took = Vec::with_capacity(timed);
    for s in second..second + timed as i64 {
        let now = t0() + TimeDelta::seconds(s);
        env.clock.set(now);
        let started = Instant::now();
        env.driver.pass(now);
        took.push(started.elapsed());
        // Nothing changes at rest: the stores are refilled now and then only, so that a
        // profiler attached here sees passes rather than the fake server's refills.
        if s % 10 == 0 {
            env.settle().await;
            env.sync();
        }
    }
    took.sort();
    (
        took,
        env.driver.pod_reads() - reads,
        env.driver.skipped_at_rest() - skipped,
        [
            read_every_pod(&env, &catalog, env.driver.table()),
            read_every_pod(&env, &catalog, &Default::default()),
        ],
    )
}

/// How long reading every pod of the stores into solver pods takes with nothing kept from
/// before, against `table`: the median of three reads. With the engine's table each pod is
/// read on its own (a burst of new pods); with an empty one, all together (a controller that
/// just started).
fn read_every_pod(
    env: &Env,
    catalog: &Catalog,
    table: &quartermaster_solver::ResourceTable,
) -> Duration {
    let stores = &env.ctx.stores;
    let pods = stores.pods.state();
    let nodes = stores.nodes.state();
    let our_nodes: std::collections::BTreeSet<&str> = nodes
        .iter()
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    let mut took: Vec<Duration> = (0..3)
        .map(|_| {
            let started = Instant::now();
            let observed = crate::translate::observe_with_readings(
                &pods,
                &our_nodes,
                &[],
                Vec::new(),
                Vec::new(),
                Vec::new(),
                catalog,
                table,
                None,
                &mut crate::pod_readings::PodReadings::default(),
            );
            let took = started.elapsed();
            assert_eq!(observed.pods.len(), pods.len(), "{:?}", observed.rejected);
            took
        })
        .collect();
    took.sort();
    took[1]
}
