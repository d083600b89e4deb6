//! Consolidation until it converges: pass after pass, each pass's moves carried out as a
//! cluster and a cloud would (launches accepted and registered at once, pods bound where the
//! engine put them, drained pods pending again, deletes done), until a pass decides nothing.

use std::collections::BTreeMap;
use std::time::Instant;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_cloud::{Instance, InstanceState};
use quartermaster_engine::{Action, Engine, Event, NodeView};
use quartermaster_pricing::{Catalog, Cloud};
use quartermaster_solver::{Pod, PodRef, ResourceTable, Resources, to_resources};
use serde::Serialize;

/// Passes at most (a fleet that still improves after this many is reported as it stands).
pub const MAX_PASSES: usize = 60;

/// One consolidation pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Pass {
    /// 1, 2, …
    pub pass: usize,
    /// Seconds the engine took to decide the pass (its poll; carrying it out is not counted).
    pub seconds: f64,
    /// Disruption commands it decided.
    pub commands: usize,
    /// Nodes once its commands completed.
    pub nodes: usize,
    /// The fleet's cost once its commands completed.
    pub cost_per_hour: f64,
}

/// The cluster side of the bench: where each pod runs.
pub struct Fleet {
    /// Pods by reference.
    pub pods: BTreeMap<PodRef, Pod>,
    /// Node of each running pod.
    pub on: BTreeMap<PodRef, String>,
    /// Where replacements' allocatable comes from.
    pub catalog: Catalog,
    /// The snapshot's resource table.
    pub resources: ResourceTable,
}

/// Runs passes after `first` (the actions of the pass already timed, taken at `at`) until one
/// decides nothing or [`MAX_PASSES`]; returns every pass, the first included.
pub fn converge(
    engine: &mut Engine,
    fleet: &mut Fleet,
    at: DateTime<Utc>,
    first: (Vec<Action>, f64),
) -> Vec<Pass> {
    let mut passes = Vec::new();
    let mut now = at;
    let (mut actions, mut seconds) = first;
    for pass in 1..=MAX_PASSES {
        let commands = actions
            .iter()
            .filter(|a| matches!(a, Action::Disrupt(_)))
            .count();
        now = settle(engine, fleet, now, actions);
        passes.push(Pass {
            pass,
            seconds,
            commands,
            nodes: engine.claims().count(),
            cost_per_hour: engine.claims().map(|c| c.offering.price_per_hour).sum(),
        });
        if commands == 0 {
            break;
        }
        // Past every node's consolidateAfter and the engine's own backoffs.
        now += TimeDelta::minutes(30);
        let started = Instant::now();
        actions = engine.poll(now);
        seconds = started.elapsed().as_secs_f64();
    }
    passes
}

/// Carries out `actions` and whatever the engine asks next, a second apart, until it asks for
/// nothing more; returns the time reached.
fn settle(
    engine: &mut Engine,
    fleet: &mut Fleet,
    mut now: DateTime<Utc>,
    mut actions: Vec<Action>,
) -> DateTime<Utc> {
    for _ in 0..1000 {
        if actions.is_empty() {
            break;
        }
        for action in actions {
            carry_out(engine, fleet, now, action);
        }
        now += TimeDelta::seconds(1);
        actions = engine.poll(now);
    }
    now
}

fn carry_out(engine: &mut Engine, fleet: &mut Fleet, now: DateTime<Utc>, action: Action) {
    match action {
        Action::Launch { claim, request } => {
            let instance = Instance {
                provider_id: format!("bench:///{}/{claim}", request.zone),
                claim_name: claim.clone(),
                instance_type: request.instance_type.clone(),
                zone: request.zone.clone(),
                capacity_type: request.capacity_type,
                price_per_hour: request.price_per_hour,
                state: InstanceState::Running,
                launched_at: now,
                tags: request.tags,
            };
            engine.handle(
                now,
                Event::Launched {
                    claim: claim.clone(),
                    instance,
                },
            );
            let node = NodeView {
                name: claim.clone(),
                labels: request.labels,
                taints: Vec::new(),
                allocatable: fleet
                    .catalog
                    .get(Cloud::Aws, &request.instance_type)
                    .map_or(Resources::ZERO, |it| {
                        to_resources(&fleet.resources, &it.allocatable())
                    }),
                conditions: Vec::new(),
            };
            engine.handle(now, Event::NodeRegistered { claim, node });
        }
        Action::Bind { pod, node } => {
            if let Some(p) = fleet.pods.get(&pod) {
                fleet.on.insert(pod, node.clone());
                engine.handle(
                    now,
                    Event::PodBound {
                        pod: p.clone(),
                        node,
                    },
                );
            }
        }
        Action::Drain { node } => {
            let evicted: Vec<PodRef> = fleet
                .on
                .iter()
                .filter(|(_, n)| **n == node)
                .map(|(p, _)| p.clone())
                .collect();
            for p in evicted {
                fleet.on.remove(&p);
                if let Some(pod) = fleet.pods.get(&p) {
                    engine.handle(now, Event::PodPending(pod.clone()));
                }
            }
        }
        Action::Delete { claim, .. } => engine.handle(now, Event::Deleted { claim }),
        Action::Cordon { .. }
        | Action::Uncordon { .. }
        | Action::SoftCordon { .. }
        | Action::Disrupt(_)
        | Action::Reboot { .. } => {}
    }
}
