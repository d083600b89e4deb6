//! Driver crashes and restarts (`simulate --chaos`): the engine is thrown away at a random
//! point and a new one is built only from what the cluster's objects and the clouds say, as
//! the controller does when it starts or takes over the lease.
//!
//! What survives a crash is what the controller would have written by then:
//! - a NodeClaim exists once its launch began (the controller's launch task creates the object
//!   before it calls the cloud); a claim the engine planned but whose launch was never
//!   dispatched is gone, and its pods are planned again;
//! - its provider id once the launch's answer was recorded (a crash between the cloud's answer
//!   and the record leaves a claim that is launched again: the cloud is idempotent on the claim
//!   name, so the instance is found, not duplicated);
//! - its deletion once the delete was asked for (the termination controller finishes it: the
//!   delete retries go on across the crash);
//! - Nodes, their cordons and the pods bound to them, which belong to the cluster.
//!
//! What is lost: nominations, consolidation timers, disruption commands in flight (their
//! replacement claims are ordinary claims to the new engine), and every action of the batch
//! that was not carried out. A node cordoned for a command the crash cut short is uncordoned
//! at the restart, as the controller does for nodes it cordoned whose NodeClaim is not being
//! deleted; otherwise nothing would ever use it again.
//!
//! Crash points ([`CrashPoint`]): before a launch reaches the cloud, after the cloud answered
//! a launch but before the answer was recorded, after a drain (mid-drain: pods evicted, the
//! node not deleted yet), before a delete, and before a disruption command; a gang launch is
//! cut in the middle when the crash comes between its launches. A crash comes due at
//! exponentially spaced times (`driver_crashes_per_hour`) and happens at the next of those
//! points, or at the start of an instant when none came for [`IDLE_CRASH_AFTER`].

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_engine::{Engine, Event, FoundClaim};

use super::Driver;
use crate::rng::{self, exponential, uniform};

/// The crash draws' stream of the chaos seed (apart from the other chaos draws).
const CRASH_STREAM: u64 = 901;
/// A crash due this long without an action to cut happens between two instants.
pub const IDLE_CRASH_AFTER: TimeDelta = TimeDelta::minutes(15);

/// Where a crash cut the driver's work.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashPoint {
    /// A NodeClaim was created; the cloud was not called.
    BeforeLaunch,
    /// The cloud answered the launch; the answer was not recorded.
    LaunchUnrecorded,
    /// The node was drained; its NodeClaim was not deleted.
    MidDrain,
    /// A delete was about to be asked for.
    BeforeDelete,
    /// A disruption command was about to start.
    BeforeDisruption,
    /// Between two instants, with nothing in flight.
    Idle,
}

impl CrashPoint {
    /// The point's key in `restarts_by_crash_point`.
    pub fn key(self) -> &'static str {
        match self {
            Self::BeforeLaunch => "before_launch",
            Self::LaunchUnrecorded => "launch_unrecorded",
            Self::MidDrain => "mid_drain",
            Self::BeforeDelete => "before_delete",
            Self::BeforeDisruption => "before_disruption",
            Self::Idle => "idle",
        }
    }
}

/// When crashes happen.
#[derive(Debug)]
pub(super) struct Crashes {
    rng: rng::Rng,
    per_hour: f64,
    /// When the next crash comes due.
    pub next_at: DateTime<Utc>,
    /// Restarts so far, by where the crash was.
    pub points: Vec<CrashPoint>,
}

impl Crashes {
    /// Crashes `per_hour` on average, drawn from `seed`'s crash stream; `None` when there are
    /// none.
    pub fn new(seed: Option<u64>, per_hour: f64, start: DateTime<Utc>) -> Option<Crashes> {
        let seed = seed.filter(|_| per_hour > 0.0 && per_hour.is_finite())?;
        let mut c = Crashes {
            rng: rng::stream(seed, CRASH_STREAM),
            per_hour,
            next_at: start,
            points: Vec::new(),
        };
        c.schedule(start);
        Some(c)
    }

    fn schedule(&mut self, from: DateTime<Utc>) {
        let hours = exponential(&mut self.rng, self.per_hour);
        let ms = (hours * 3_600_000.0).clamp(1_000.0, 1e12) as i64;
        self.next_at = from + TimeDelta::milliseconds(ms);
    }

    /// A fair coin from the crash stream.
    pub fn coin(&mut self) -> bool {
        uniform(&mut self.rng) < 0.5
    }
}

impl Driver<'_> {
    /// Whether a crash is due now.
    pub(super) fn crash_due(&self) -> bool {
        self.crashes.as_ref().is_some_and(|c| self.now >= c.next_at)
    }

    /// A crash due for [`IDLE_CRASH_AFTER`] with no action to cut happens now.
    pub(super) fn idle_crash(&mut self) {
        if self
            .crashes
            .as_ref()
            .is_some_and(|c| self.now >= c.next_at + IDLE_CRASH_AFTER)
        {
            self.restart(CrashPoint::Idle);
        }
    }

    /// The driver crashed at `point`: a new engine is built from the cluster and the clouds.
    pub(super) fn restart(&mut self, point: CrashPoint) {
        let now = self.now;
        let Some(crashes) = &mut self.crashes else {
            return;
        };
        crashes.points.push(point);
        crashes.schedule(now);
        let restarts = crashes.points.len();
        self.stats_before.add(self.engine.stats());

        // The NodeClaims in the cluster, as the new engine finds them.
        self.created_claims
            .retain(|name| self.engine.has_claim(name));
        self.deletes_asked
            .retain(|name| self.engine.has_claim(name));
        // Soft cordons are lifted, as the controller does: the new engine decides them again.
        let soft: Vec<String> = self.cluster.soft_cordoned().map(str::to_owned).collect();
        for node in &soft {
            self.cluster.soft_cordon(node, false);
        }
        let found: Vec<FoundClaim> = self
            .engine
            .claims()
            .filter(|c| self.created_claims.contains(&c.name))
            .map(|c| {
                let node = c
                    .node_name
                    .as_deref()
                    .and_then(|n| self.cluster.node(n))
                    .map(|n| n.view.clone());
                FoundClaim {
                    deleting: self.deletes_asked.contains(&c.name),
                    registered_at: c.registered_at.filter(|_| node.is_some()),
                    initialized_at: c.initialized_at.filter(|_| node.is_some()),
                    name: c.name,
                    node_pool: c.node_pool,
                    offering: c.offering,
                    created_at: c.created_at,
                    provider_id: c.provider_id,
                    launched_at: c.launched_at,
                    node,
                    template_hash: Some(c.template_hash),
                    gang: c.gang,
                }
            })
            .collect();

        // Nodes cordoned for a command the crash cut short are schedulable again.
        let cordoned: Vec<String> = self
            .cluster
            .nodes()
            .filter(|(_, n)| n.cordoned)
            .filter(|(_, n)| {
                let claim = &self.rec.instances[n.instance].claim;
                !self.deletes_asked.contains(claim)
            })
            .map(|(name, _)| name.clone())
            .collect();
        for node in &cordoned {
            self.tracker.uncordoned(node);
            self.cluster.uncordon(node);
        }

        let mut config = self.scenario.engine.clone();
        config.claim_name_tag = format!("{}r{restarts}-", config.claim_name_tag);
        let mut setup = self.world.setup.clone();
        setup.catalog = self.catalog.clone();
        let mut engine = Engine::new(setup, config);
        // The reservations first: a claim launched into one is adopted with its offering.
        if !self.world.reservations.is_empty() {
            engine.handle(
                now,
                Event::ReservationsChanged(self.world.reservations.clone()),
            );
        }
        for f in found {
            let node = f.node.as_ref().map(|n| n.name.clone());
            engine.handle(now, Event::ClaimFound(f));
            // A node found with the claim is seen as it is now (accelerators ready or not).
            if let Some(view) = node
                .and_then(|n| self.cluster.node(&n))
                .map(|n| n.view.clone())
            {
                engine.handle(now, Event::NodeUpdated { node: view });
            }
        }
        self.engine = engine;

        // The pods, as the new engine's first look at the cluster shows them.
        let mut pods: Vec<_> = self
            .cluster
            .all_pods()
            .map(|(pod, node)| (pod.clone(), node.map(str::to_owned)))
            .collect();
        pods.sort_by(|a, b| a.0.id.cmp(&b.0.id));
        for (mut pod, node) in pods {
            if !self.scenario.gang_aware {
                pod.gang = None;
            }
            let id = pod.id.clone();
            match node {
                Some(node) => self.engine.handle(now, Event::PodBound { pod, node }),
                None => self.engine.handle(now, Event::PodPending(pod)),
            }
            self.tell_annotations(now, id);
        }
        // The PodDisruptionBudgets are told again; the scheduler stand-in looks again.
        self.tracker.told.clear();
        self.buffers.told = None;
        self.scheduled_at_change = None;
    }
}
