//! The AWS provider under chaos: seeded runs of what the controller does with it (launch
//! claims with several offerings, retry failed launches of the same claim, get, list, delete
//! claims the way termination does, sweep leaks, forget claims, restart), with random faults
//! queued on the EC2 actions involved before every call: capacity errors (HTTP 500 and inside
//! a 200 CreateFleet), throttling, responses lost or emptied after the call took effect, and
//! calls delayed past the client's timeout (they still take effect, late). After each seed,
//! moto is read directly (not through the proxy): no instance without a live claim (after a
//! sweep with the grace period passed), no claim with a second instance, every deleted claim's
//! instance gone. The proxy honours CreateFleet client tokens as EC2 does (moto does not).
//!
//! `QUARTERMASTER_CHAOS_SEEDS` (`1-200`, `7`, `1-5,9`) runs other seeds than the default few;
//! the summary line is printed (`--nocapture` shows it).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use aws_sdk_ec2::types as t;
use quartermaster_aws::{AwsCloud, CallLimits};
use quartermaster_cloud::{CloudError, CloudProvider, InstanceState, LaunchRequest, SystemClock};
use quartermaster_pricing::{CapacityType, Catalog};
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng as _};

use crate::aws::{World, offering, request, settings, world};
use crate::fault_proxy::Fault;

/// The seeds `cargo test` runs (moto is slow: a few seconds each).
const DEFAULT_SEEDS: &str = "1-5";
/// Operations of one seed, before it settles.
const OPS_PER_SEED: usize = 16;
/// Seeds run against one moto (then it is reset and set up again, to stay fast).
const SEEDS_PER_WORLD: usize = 25;
/// Launch attempts of one claim in a row before it waits for a later turn.
const LAUNCH_ATTEMPTS: usize = 3;
/// Termination attempts of one claim in a row before it waits for a later turn.
const DELETE_ATTEMPTS: usize = 3;
/// A delay beyond the client's attempt timeout (`limits()`).
const DELAY: Duration = Duration::from_millis(2_500);
/// The claims' offerings are drawn from these.
const OFFERINGS: [(&str, &str, CapacityType); 5] = [
    ("g5.xlarge", "us-east-1a", CapacityType::Spot),
    ("g5.xlarge", "us-east-1b", CapacityType::OnDemand),
    ("g5.2xlarge", "us-east-1a", CapacityType::OnDemand),
    ("g5.xlarge", "us-east-1b", CapacityType::Spot),
    ("g5.4xlarge", "us-east-1a", CapacityType::Spot),
];
/// Actions a launch calls (CreateFleet more often: it is the one that matters).
const LAUNCH_ACTIONS: &[&str] = &[
    "DescribeInstances",
    "DescribeSubnets",
    "DescribeSecurityGroups",
    "DescribeImages",
    "DescribeLaunchTemplates",
    "CreateLaunchTemplate",
    "CreateFleet",
    "CreateFleet",
    "CreateFleet",
];
/// Actions of get and list.
const READ_ACTIONS: &[&str] = &["DescribeInstances"];
/// Actions of a delete (and of the sweep).
const DELETE_ACTIONS: &[&str] = &[
    "DescribeInstances",
    "TerminateInstances",
    "TerminateInstances",
];

/// Where a claim is, as the controller sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The NodeClaim exists; no launch has answered yet.
    Launching,
    /// Launched: its provider id is recorded.
    Launched,
    /// Being deleted: the finalizer holds it until the instance is gone.
    Deleting,
    /// Deleted after termination said the instance is gone.
    Deleted,
    /// Removed by hand (finalizer stripped): its instance, if any, is a leak for the sweep.
    Forgotten,
}

#[derive(Debug)]
struct Claim {
    name: String,
    request: LaunchRequest,
    phase: Phase,
    provider_id: Option<String>,
}

impl Claim {
    /// Whether the NodeClaim object exists (the sweep's `known`).
    fn exists(&self) -> bool {
        matches!(
            self.phase,
            Phase::Launching | Phase::Launched | Phase::Deleting
        )
    }
}

/// Totals over the seeds run.
#[derive(Debug, Default)]
struct Stats {
    seeds: usize,
    calls: usize,
    faults: usize,
    launches: usize,
    instances: usize,
    leaks: usize,
    duplicates: usize,
    ec2_requests: usize,
    /// Errors the provider returned, by kind.
    errors: BTreeMap<&'static str, usize>,
    /// Outcomes the controller could not live with (seed: what).
    anomalies: Vec<String>,
}

/// One seed's run.
struct Run<'a> {
    w: &'a World,
    seed: u64,
    rng: StdRng,
    cluster: String,
    cloud: Arc<AwsCloud>,
    claims: Vec<Claim>,
    /// Every instance id moto ever showed for each claim.
    seen: BTreeMap<String, BTreeSet<String>>,
    /// Claims seen with two live instances at once.
    doubled: BTreeSet<String>,
    /// What happened, shown with the seed's anomalies.
    log: Vec<String>,
    stats: &'a mut Stats,
}

/// Call limits of the chaos runs: short, so a delayed call times out in seconds.
fn limits() -> CallLimits {
    CallLimits {
        connect_timeout: Duration::from_secs(2),
        attempt_timeout: Duration::from_secs(2),
        operation_timeout: Duration::from_secs(8),
        max_attempts: 3,
        initial_backoff: Duration::from_millis(20),
        max_backoff: Duration::from_millis(200),
    }
}

async fn connect(w: &World, cluster: &str) -> Arc<AwsCloud> {
    let mut s = settings(w.proxy.url());
    s.cluster.name = cluster.to_owned();
    s.call_limits = limits();
    Arc::new(AwsCloud::connect(s, Catalog::embedded(), Arc::new(SystemClock)).await)
}

fn kind(e: &CloudError) -> &'static str {
    match e {
        CloudError::InsufficientCapacity { .. } => "capacity",
        CloudError::QuotaExceeded { .. } => "quota",
        CloudError::Throttled { .. } => "throttled",
        CloudError::NotFound { .. } => "not-found",
        CloudError::InvalidRequest { .. } => "invalid",
        CloudError::Transient { .. } => "transient",
    }
}

impl Run<'_> {
    fn anomaly(&mut self, what: String) {
        self.stats
            .anomalies
            .push(format!("seed {}: {what}", self.seed));
    }

    fn note(&mut self, what: String) {
        self.log.push(what);
    }

    fn error(&mut self, e: &CloudError) {
        *self.stats.errors.entry(kind(e)).or_default() += 1;
    }

    /// Queues random faults on `actions` before a call (sometimes none).
    fn chaos(&mut self, actions: &[&str]) {
        if !self.rng.random_bool(0.45) {
            return;
        }
        for _ in 0..self.rng.random_range(1..=2) {
            let action = actions[self.rng.random_range(0..actions.len())];
            let roll = self.rng.random_range(0..100);
            let fault = match roll {
                0..18 => Fault::CapacityError500,
                18..32 if action == "CreateFleet" => Fault::CapacityInFleetResponse,
                18..45 => Fault::Throttle {
                    retry_after_secs: 1,
                },
                45..88 => Fault::LoseResponse,
                // Took effect, answered 200 with an empty body.
                88..95 => Fault::Truncate(0),
                _ => Fault::Delay(DELAY),
            };
            self.note(format!("  fault {action}: {fault:?}"));
            self.w.proxy.inject(action, fault);
        }
    }

    fn pick(&mut self, phases: &[Phase]) -> Option<usize> {
        let candidates: Vec<usize> = (0..self.claims.len())
            .filter(|&i| phases.contains(&self.claims[i].phase))
            .collect();
        (!candidates.is_empty()).then(|| candidates[self.rng.random_range(0..candidates.len())])
    }

    fn new_claim(&mut self) -> usize {
        let name = format!("s{}-c{}", self.seed, self.claims.len());
        let mut pool: Vec<usize> = (0..OFFERINGS.len()).collect();
        let count = self.rng.random_range(1..=3);
        let mut offerings = Vec::new();
        for _ in 0..count {
            let (t, z, c) = OFFERINGS[pool.remove(self.rng.random_range(0..pool.len()))];
            offerings.push(offering(t, z, c));
        }
        let request = request(self.w, &name, &offerings);
        self.claims.push(Claim {
            name,
            request,
            phase: Phase::Launching,
            provider_id: None,
        });
        self.claims.len() - 1
    }

    /// The controller's launch of claim `i`: a few attempts (faults before each), then it
    /// waits for a later turn. Out of capacity, the engine either gives the claim up (deletes
    /// it) or tries it again later.
    async fn launch(&mut self, i: usize) {
        for _ in 0..LAUNCH_ATTEMPTS {
            self.chaos(LAUNCH_ACTIONS);
            self.stats.calls += 1;
            let request = self.claims[i].request.clone();
            let result = self.cloud.create(&request).await;
            self.note(format!(
                "launch {}: {:?}",
                request.claim_name,
                result.as_ref().map(|i| &i.provider_id)
            ));
            match result {
                Ok(instance) => {
                    if instance.claim_name != request.claim_name
                        || !instance.provider_id.starts_with("aws:///us-east-1")
                    {
                        self.anomaly(format!(
                            "launch of {} answered {instance:?}",
                            request.claim_name
                        ));
                    }
                    self.stats.launches += 1;
                    let claim = &mut self.claims[i];
                    claim.phase = Phase::Launched;
                    claim.provider_id = Some(instance.provider_id);
                    return;
                }
                Err(e @ (CloudError::Transient { .. } | CloudError::Throttled { .. })) => {
                    self.error(&e);
                }
                Err(
                    e
                    @ (CloudError::InsufficientCapacity { .. } | CloudError::QuotaExceeded { .. }),
                ) => {
                    self.error(&e);
                    if self.rng.random_bool(0.5) {
                        self.claims[i].phase = Phase::Deleting;
                        self.terminate(i).await;
                    }
                    return;
                }
                Err(e) => {
                    self.error(&e);
                    self.anomaly(format!("launch of {}: {e}", request.claim_name));
                    return;
                }
            }
        }
    }

    /// The controller's termination of claim `i` (its cloud part): the recorded instance, or
    /// (none recorded: the launch never answered) every instance listed with its claim name,
    /// deleted until the provider says each is gone; then the finalizer goes.
    async fn terminate(&mut self, i: usize) {
        for _ in 0..DELETE_ATTEMPTS {
            self.chaos(DELETE_ACTIONS);
            let result = self.terminate_once(i).await;
            self.note(format!("terminate {}: {result:?}", self.claims[i].name));
            match result {
                Ok(true) => {
                    self.claims[i].phase = Phase::Deleted;
                    return;
                }
                Ok(false) => {}
                Err(e) => {
                    self.error(&e);
                    if !e.is_retryable() {
                        let name = self.claims[i].name.clone();
                        self.anomaly(format!("termination of {name}: {e}"));
                    }
                }
            }
        }
    }

    async fn terminate_once(&mut self, i: usize) -> Result<bool, CloudError> {
        let name = self.claims[i].name.clone();
        let ids = match &self.claims[i].provider_id {
            Some(id) => vec![id.clone()],
            None => {
                self.stats.calls += 1;
                self.cloud
                    .list()
                    .await?
                    .into_iter()
                    .filter(|i| i.claim_name == name)
                    .map(|i| i.provider_id)
                    .collect()
            }
        };
        for id in ids {
            self.stats.calls += 2;
            match self.cloud.delete(&id).await {
                Ok(()) => {}
                Err(CloudError::NotFound { .. }) => continue,
                Err(e) => return Err(e),
            }
            match self.cloud.get(&id).await {
                Err(CloudError::NotFound { .. }) => {}
                Ok(i) if i.state == InstanceState::Terminated => {}
                Ok(_) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    async fn get(&mut self, i: usize) {
        let Some(id) = self.claims[i].provider_id.clone() else {
            return;
        };
        self.chaos(READ_ACTIONS);
        self.stats.calls += 1;
        let result = self.cloud.get(&id).await;
        self.note(format!(
            "get {id}: {:?}",
            result.as_ref().map(|i| (&i.claim_name, i.state))
        ));
        match result {
            Ok(instance) if instance.claim_name == self.claims[i].name => {}
            Ok(instance) => {
                let name = self.claims[i].name.clone();
                self.anomaly(format!("get of {name}'s {id} answered {instance:?}"));
            }
            Err(e) => {
                self.error(&e);
                if !e.is_retryable() {
                    let name = self.claims[i].name.clone();
                    self.anomaly(format!("get of {name}'s {id}: {e}"));
                }
            }
        }
    }

    async fn list(&mut self) {
        self.chaos(READ_ACTIONS);
        self.stats.calls += 1;
        let result = self.cloud.list().await;
        self.note(format!(
            "list: {:?}",
            result.as_ref().map(|l| l
                .iter()
                .map(|i| (&i.claim_name, &i.provider_id))
                .collect::<Vec<_>>())
        ));
        match result {
            Ok(listed) => {
                let ids: BTreeSet<&str> = listed.iter().map(|i| i.provider_id.as_str()).collect();
                let missing: Vec<String> = self
                    .claims
                    .iter()
                    .filter(|c| c.phase == Phase::Launched)
                    .filter_map(|c| c.provider_id.clone())
                    .filter(|id| !ids.contains(id.as_str()))
                    .collect();
                if !missing.is_empty() {
                    self.anomaly(format!("list is missing launched {missing:?}"));
                }
            }
            Err(e) => {
                self.error(&e);
                if !e.is_retryable() {
                    self.anomaly(format!("list: {e}"));
                }
            }
        }
    }

    /// The controller's garbage collection: `known` is every NodeClaim that exists; `later`
    /// says how far past the launches the sweep runs (the grace period passed, or not).
    async fn sweep(&mut self, later: chrono::TimeDelta) {
        let known: BTreeSet<String> = self
            .claims
            .iter()
            .filter(|c| c.exists())
            .map(|c| c.name.clone())
            .collect();
        self.stats.calls += 1;
        self.note(format!(
            "sweep {}s later, known {known:?}",
            later.num_seconds()
        ));
        // The instance each live claim recorded, as the NodeClaims' status holds it.
        let recorded: std::collections::BTreeMap<String, String> = self
            .claims
            .iter()
            .filter(|c| c.exists())
            .filter_map(|c| Some((c.name.clone(), c.provider_id.clone()?)))
            .collect();
        let now = chrono::Utc::now() + later;
        quartermaster_controller::sweep::delete_leaks(self.cloud.clone(), known, recorded, now)
            .await;
    }

    /// Moto's instances of this seed's cluster (directly, not through the proxy): (claim tag,
    /// id, live).
    async fn moto_instances(&mut self) -> Vec<(String, String, bool)> {
        let out = self
            .w
            .ec2
            .describe_instances()
            .filters(
                t::Filter::builder()
                    .name("tag:quartermaster.dev/cluster")
                    .values(&self.cluster)
                    .build(),
            )
            .send()
            .await
            .expect("DescribeInstances of moto");
        let found: Vec<(String, String, bool)> = out
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .map(|i| {
                let claim = i
                    .tags()
                    .iter()
                    .find(|t| t.key() == Some("quartermaster.dev/nodeclaim"))
                    .and_then(|t| t.value())
                    .unwrap_or_default()
                    .to_owned();
                let live =
                    i.state().and_then(|s| s.name()) != Some(&t::InstanceStateName::Terminated);
                (claim, i.instance_id().unwrap_or_default().to_owned(), live)
            })
            .collect();
        let mut live: BTreeMap<&str, usize> = BTreeMap::new();
        for (claim, id, is_live) in &found {
            if self
                .seen
                .entry(claim.clone())
                .or_default()
                .insert(id.clone())
            {
                self.log.push(format!("  moto: new {id} of {claim}"));
            }
            if *is_live {
                *live.entry(claim.as_str()).or_default() += 1;
            }
        }
        let doubled: Vec<String> = live
            .into_iter()
            .filter(|(_, n)| *n > 1)
            .map(|(c, _)| c.to_owned())
            .collect();
        self.doubled.extend(doubled);
        found
    }

    async fn step(&mut self) {
        let roll = self.rng.random_range(0..100);
        match roll {
            0..30 => {
                let i = self.new_claim();
                self.launch(i).await;
            }
            30..45 => match self.pick(&[Phase::Launching]) {
                Some(i) => self.launch(i).await,
                None => {
                    let i = self.new_claim();
                    self.launch(i).await;
                }
            },
            45..55 => {
                if let Some(i) = self.pick(&[Phase::Launched]) {
                    self.get(i).await;
                }
            }
            55..62 => self.list().await,
            62..80 => {
                if let Some(i) = self.pick(&[Phase::Launching, Phase::Launched, Phase::Deleting]) {
                    self.claims[i].phase = Phase::Deleting;
                    self.terminate(i).await;
                }
            }
            80..85 => {
                if let Some(i) = self.pick(&[Phase::Launching, Phase::Launched, Phase::Deleting]) {
                    self.claims[i].phase = Phase::Forgotten;
                    self.note(format!("forget {}", self.claims[i].name));
                }
            }
            85..96 => {
                self.chaos(DELETE_ACTIONS);
                let later = chrono::TimeDelta::seconds(self.rng.random_range(0..=180));
                self.sweep(later).await;
            }
            _ => {
                self.note("restart".to_owned());
                self.cloud = connect(self.w, &self.cluster).await;
            }
        }
    }

    /// No more faults: calls held on their way to moto arrive, pending launches and
    /// terminations finish, and a sweep with the grace period passed runs.
    async fn settle(&mut self) {
        self.note("settle".to_owned());
        self.w.proxy.clear_faults();
        for _ in 0..600 {
            if self.w.proxy.held() == 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(self.w.proxy.held(), 0, "delayed calls never arrived");
        for i in 0..self.claims.len() {
            if self.claims[i].phase == Phase::Launching {
                self.launch(i).await;
            }
            if self.claims[i].phase == Phase::Launching {
                let name = self.claims[i].name.clone();
                self.anomaly(format!("{name} does not launch without faults"));
            }
            if self.claims[i].phase == Phase::Deleting {
                self.terminate(i).await;
            }
            if self.claims[i].phase == Phase::Deleting {
                let name = self.claims[i].name.clone();
                self.anomaly(format!("{name} does not terminate without faults"));
            }
        }
        self.sweep(chrono::TimeDelta::minutes(10)).await;
    }

    /// The checks against moto itself; counts into the stats.
    async fn check(&mut self) {
        let found = self.moto_instances().await;
        let alive: BTreeMap<&str, &Claim> = self
            .claims
            .iter()
            .filter(|c| c.exists())
            .map(|c| (c.name.as_str(), c))
            .collect();
        let mut leaks = Vec::new();
        for (claim, id, live) in &found {
            if *live && !alive.contains_key(claim.as_str()) {
                leaks.push(format!("{id} of {claim:?}"));
            }
        }
        let mut lost = Vec::new();
        for c in alive.values() {
            let Some(id) = c.provider_id.as_deref() else {
                continue;
            };
            let running = found
                .iter()
                .any(|(claim, i, live)| *live && *claim == c.name && id.ends_with(i.as_str()));
            if !running {
                lost.push(format!("{}'s instance {id} is not running", c.name));
            }
        }
        for what in lost {
            self.anomaly(what);
        }
        let duplicates: BTreeSet<String> = self
            .seen
            .iter()
            .filter(|(_, ids)| ids.len() > 1)
            .map(|(c, _)| c.clone())
            .chain(self.doubled.iter().cloned())
            .collect();
        if !leaks.is_empty() {
            self.anomaly(format!("leaked {leaks:?}"));
        }
        if !duplicates.is_empty() {
            let detail: Vec<String> = duplicates
                .iter()
                .map(|c| format!("{c}: {:?}", self.seen.get(c)))
                .collect();
            self.anomaly(format!("duplicates {detail:?}"));
        }
        self.stats.leaks += leaks.len();
        self.stats.duplicates += duplicates.len();
        self.stats.instances += self.seen.values().map(BTreeSet::len).sum::<usize>();
    }
}

async fn run_seed(w: &World, seed: u64, stats: &mut Stats) {
    let cluster = format!("chaos-{seed}");
    let cloud = connect(w, &cluster).await;
    let faults = w.proxy.faults_used();
    let requests = w.proxy.total_calls();
    let mut run = Run {
        w,
        seed,
        rng: StdRng::seed_from_u64(seed),
        cluster,
        cloud,
        claims: Vec::new(),
        seen: BTreeMap::new(),
        doubled: BTreeSet::new(),
        log: Vec::new(),
        stats,
    };
    let anomalies = run.stats.anomalies.len();
    for _ in 0..OPS_PER_SEED {
        run.step().await;
        run.moto_instances().await;
    }
    run.settle().await;
    run.check().await;
    if run.stats.anomalies.len() > anomalies {
        let log = run.log.join("\n  ");
        run.anomaly(format!("what happened:\n  {log}"));
    }
    run.stats.seeds += 1;
    run.stats.faults += w.proxy.faults_used() - faults;
    run.stats.ec2_requests += w.proxy.total_calls() - requests;
}

/// `1-200`, `7`, `1-5,9`.
fn parse_seeds(spec: &str) -> Vec<u64> {
    let mut seeds = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let number = |s: &str| -> u64 {
            s.trim()
                .parse()
                .unwrap_or_else(|_| panic!("QUARTERMASTER_CHAOS_SEEDS: {s:?} is not a number"))
        };
        match part.split_once('-') {
            Some((from, to)) => seeds.extend(number(from)..=number(to)),
            None => seeds.push(number(part)),
        }
    }
    seeds
}

#[test]
fn seeds_are_ranges_and_numbers() {
    assert_eq!(parse_seeds("1-3, 7,9-9"), [1, 2, 3, 7, 9]);
    assert_eq!(parse_seeds(DEFAULT_SEEDS).len(), 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aws_under_chaos_leaks_nothing_and_launches_no_claim_twice() {
    let spec = std::env::var("QUARTERMASTER_CHAOS_SEEDS").unwrap_or_else(|_| DEFAULT_SEEDS.into());
    let seeds = parse_seeds(&spec);
    let mut stats = Stats::default();
    for batch in seeds.chunks(SEEDS_PER_WORLD) {
        let w = world().await;
        // EC2 answers a repeated client token with the first call's fleet; moto does not.
        w.proxy.honour_client_tokens();
        for &seed in batch {
            run_seed(&w, seed, &mut stats).await;
        }
    }
    println!(
        "aws chaos: seeds {}, calls {}, faults {}, launches {}, leaks {}, duplicates {}",
        stats.seeds, stats.calls, stats.faults, stats.launches, stats.leaks, stats.duplicates
    );
    println!(
        "aws chaos: seeds {spec}: {} EC2 requests, {} instances, errors {:?}",
        stats.ec2_requests, stats.instances, stats.errors
    );
    assert!(
        stats.anomalies.is_empty(),
        "{} anomalies:\n{}",
        stats.anomalies.len(),
        stats.anomalies.join("\n")
    );
    assert_eq!((stats.leaks, stats.duplicates), (0, 0));
}
