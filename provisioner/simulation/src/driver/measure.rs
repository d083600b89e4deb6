//! What a run is judged against, measured by the driver on the run's own state:
//!
//! - the **achievable saving** at the measure point (`spec.measureAt`, default the end): the
//!   fleet's cost against every running pod consolidation may move solved again from scratch,
//!   on the offerings the clouds sell then (as for the hindsight below);
//! - the **settle**: from that same point, the workload held still (no arrivals, completions,
//!   scaling, scenario changes or spot interruptions; pods still waiting left out), the engine
//!   runs on until consolidation has nothing more to do. What the fleet costs then is what
//!   consolidation captured of the achievable saving, on the same snapshot;
//! - the **hindsight cost**: every half hour, every running pod solved again from scratch with
//!   free moves, on the offerings the clouds sell then (an outage window refuses its offerings
//!   to the hindsight as to the fleet, and a capacity limit holds at most its `max` of the
//!   hindsight's nodes), its cost held for the half hour (solved again only when the pods bound
//!   or the outages changed);
//! - the pods still waiting at the end: no NodePool can serve them, they arrived too late to be
//!   served (or wait for a node still coming up within the engine's budgets), or they were
//!   stuck.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use chrono::{DateTime, TimeDelta, Utc};
use quartermaster_cloud::CloudProvider;
use quartermaster_engine::Event;
use quartermaster_policies::{ConsolidationPolicy, DisruptionReason, LabelLookup};
use quartermaster_pricing::CapacityType;
use quartermaster_solver::{
    ClusterSnapshot, ExistingNode, NODEPOOL_LABEL, OfferingKey, OfferingLimit, Pod, PodRef,
    SolveOptions,
};

use super::Driver;
use crate::error::SimulationError;
use crate::scenario::WorkloadKind;

/// How often the hindsight cost solves the workload again (when it changed).
pub const HINDSIGHT_STEP: TimeDelta = TimeDelta::minutes(30);
/// The settle ends once this long passed without a disruption command, launch or deletion
/// while every NodePool's budget allowed disruption.
pub const SETTLE_QUIET: TimeDelta = TimeDelta::hours(1);
/// ... and at the latest this long after it began.
pub const SETTLE_MAX: TimeDelta = TimeDelta::hours(24);
/// A pod waiting at the end for less than the longest wait of any pod the run served (and at
/// least this) arrived too late to be judged stuck.
pub const LATE_WINDOW_MIN: TimeDelta = TimeDelta::minutes(10);

/// The hindsight figures of a run.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Hindsight {
    /// Sum over the samples of the from-scratch cost times the time it stands for, $: the
    /// plan's cost where it equals the solver's lower bound (optimal), else the lower bound (so
    /// the figure never flatters the fleet).
    pub cost: f64,
    /// The part of `cost` that comes from lower bounds (the optimum was out of reach), $.
    pub from_lower_bound: f64,
    /// What the solver's own from-scratch plans cost over the same samples, $.
    pub plan_cost: f64,
    /// Samples taken.
    pub samples: u64,
}

/// Pods waiting at the end of a run, by why.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Waiting {
    /// No NodePool can serve them (the solver on an empty cluster leaves them out).
    pub unservable: u64,
    /// Servable, but waiting for less than the late window, or for a node still coming up
    /// within the engine's budgets.
    pub late_arrivals: u64,
    /// Servable and waiting longer: the engine or the cluster left them behind.
    pub stuck: u64,
    /// The late window used, seconds.
    pub late_window_seconds: f64,
}

/// What the cloud, the engine and the record disagree on at the end of a run (all 0 but
/// `collected_instances`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Audit {
    /// Instances still billed whose NodeClaim the engine no longer has.
    pub leaked_instances: u64,
    /// NodeClaims for which the cloud created more than one instance.
    pub duplicate_launches: u64,
    /// Instance-seconds the simulated cloud billed that the run's record (and so its cost
    /// report) does not hold.
    pub unbilled_instance_seconds: f64,
    /// Instances without a claim that garbage collection deleted (leaks caught in time).
    pub collected_instances: u64,
    /// Launches that took a NodePool over its limits (see the driver's `limits` module).
    pub limit_violations: u64,
    /// Gangs seen partly launched past their launch timeout (see the same module).
    pub gangs_half_launched: u64,
    /// Driver crashes, each followed by a restart, by where the crash cut the work.
    pub restarts: Vec<super::CrashPoint>,
}

/// The last hindsight solve, reused while what it solved for is unchanged.
#[derive(Debug)]
pub(super) struct HindsightSolve {
    /// The cluster's placements (pods bound, taken off), the scenario changes applied, the
    /// buffer placeholders and the reservation slots open then.
    population: (u64, usize, u64, u64),
    /// The offerings an outage refused then.
    in_outage: BTreeSet<OfferingKey>,
    /// The plan's cost, $/hour.
    plan: f64,
    /// The solver's lower bound, $/hour.
    bound: f64,
    /// Whether the plan keeps to the clouds' capacity limits.
    within_limits: bool,
}

/// A from-scratch solve's outcome.
struct FromScratch {
    /// What the plan's new nodes cost, $/hour.
    plan: f64,
    /// The solver's lower bound, $/hour (0 when not asked).
    bound: f64,
    /// Pods no NodePool can serve.
    unplaced: BTreeSet<PodRef>,
    /// Whether the plan's new nodes keep to the offering limits it was given.
    within_limits: bool,
}

impl Driver<'_> {
    /// The offerings the clouds would refuse now (an outage window, a capacity limit reached).
    fn refused_now(&self) -> BTreeSet<OfferingKey> {
        let mut out = BTreeSet::new();
        for (cloud, sim) in &self.clouds {
            let Ok(Ok(types)) = super::ready("instance_types", self.now, sim.instance_types())
            else {
                continue;
            };
            for ty in types {
                for o in ty.offerings.iter().filter(|o| !o.available) {
                    out.insert(OfferingKey {
                        cloud: *cloud,
                        instance_type: ty.name.clone(),
                        zone: o.zone.clone(),
                        capacity_type: o.capacity_type,
                    });
                }
            }
        }
        out
    }

    /// The offerings an outage window of the simulated clouds refuses now: no plan, however
    /// made, could buy them.
    fn in_outage_now(&self) -> BTreeSet<OfferingKey> {
        let mut out = BTreeSet::new();
        for (cloud, sim) in &self.clouds {
            for (instance_type, zone, capacity_type) in sim.offerings_in_outage() {
                out.insert(OfferingKey {
                    cloud: *cloud,
                    instance_type,
                    zone,
                    capacity_type,
                });
            }
        }
        out
    }

    /// The clouds' capacity limits (`cloud.capacity`), as limits on new nodes: the most a
    /// from-scratch fleet could hold of each.
    fn capacity_limits(&self) -> Vec<OfferingLimit> {
        let mut out = Vec::new();
        for (cloud, sim) in &self.clouds {
            for (offerings, max) in sim.capacity_limits() {
                let offerings = offerings
                    .into_iter()
                    .map(|(instance_type, zone, capacity_type)| OfferingKey {
                        cloud: *cloud,
                        instance_type,
                        zone,
                        capacity_type,
                    })
                    .collect();
                out.push(OfferingLimit { offerings, max });
            }
        }
        out
    }

    /// Every pod of `pods` solved on `nodes` (free to use) and new nodes.
    fn solve_on<'a>(
        &self,
        nodes: Vec<ExistingNode>,
        pods: impl Iterator<Item = &'a Pod>,
        bound: bool,
        unavailable: BTreeSet<OfferingKey>,
    ) -> FromScratch {
        self.solve_within(nodes, pods, bound, unavailable, Vec::new(), false)
    }

    /// A lower bound on the cost of `snapshot`'s pods that holds each of its offering limits
    /// across every shape and zone the limit covers, by Lagrangian relaxation: for any
    /// `μ_l ≥ 0`, the solver's bound with `μ_l` added to the price of every offering under limit
    /// `l`, less `Σ_l μ_l·max_l`, is at most what any plan within the limits costs (such a plan
    /// pays at most `max_l` times `μ_l` extra). Each `μ_l` is searched (golden section, a few
    /// solves) between 0 and the dearest offering it covers; the best bound found is returned.
    fn shared_limits_bound(
        &self,
        snapshot: &ClusterSnapshot,
        catalog: &quartermaster_pricing::Catalog,
        options: &SolveOptions,
    ) -> f64 {
        const STEPS: usize = 8;
        let limits = &snapshot.offering_limits;
        let key = |it: &quartermaster_pricing::InstanceType,
                   o: &quartermaster_pricing::Offering| {
            OfferingKey {
                cloud: it.cloud,
                instance_type: it.name.clone(),
                zone: o.zone.clone(),
                capacity_type: o.capacity_type,
            }
        };
        // Which limits each offering of the catalog counts against.
        let under: Vec<Vec<Vec<usize>>> = catalog
            .instance_types()
            .iter()
            .map(|it| {
                it.offerings
                    .iter()
                    .map(|o| {
                        let k = key(it, o);
                        (0..limits.len())
                            .filter(|l| limits[*l].offerings.contains(&k))
                            .collect()
                    })
                    .collect()
            })
            .collect();
        let under = &under;
        let bound_at = |mu: &[f64]| -> f64 {
            let mut types = catalog.instance_types().to_vec();
            for (t, it) in types.iter_mut().enumerate() {
                for (i, o) in it.offerings.iter_mut().enumerate() {
                    o.price_per_hour += under[t][i].iter().map(|l| mu[*l]).sum::<f64>();
                }
            }
            let priced = quartermaster_pricing::Catalog::new(types);
            let plan = quartermaster_solver::solve_with(snapshot, &priced, self.now, options);
            let paid: f64 = mu
                .iter()
                .zip(limits)
                .map(|(m, l)| m * f64::from(l.max))
                .sum();
            plan.lower_bound_per_hour - paid
        };
        let mut mu = vec![0.0; limits.len()];
        let mut best = f64::NEG_INFINITY;
        for l in 0..limits.len() {
            let dearest = catalog
                .instance_types()
                .iter()
                .enumerate()
                .flat_map(|(t, it)| {
                    it.offerings
                        .iter()
                        .enumerate()
                        .filter(move |(i, _)| under[t][*i].contains(&l))
                        .map(|(_, o)| o.price_per_hour)
                })
                .fold(0.0, f64::max);
            if dearest <= 0.0 {
                continue;
            }
            // The bound is concave in each μ_l: a golden-section search keeps the best point.
            let phi = (5f64.sqrt() - 1.0) / 2.0;
            let (mut lo, mut hi) = (0.0, dearest);
            let mut at = |m: f64, mu: &mut Vec<f64>| {
                mu[l] = m;
                let b = bound_at(mu);
                best = best.max(b);
                b
            };
            let mut a = hi - phi * (hi - lo);
            let mut b = lo + phi * (hi - lo);
            let mut fa = at(a, &mut mu);
            let mut fb = at(b, &mut mu);
            for _ in 0..STEPS {
                if fa < fb {
                    lo = a;
                    a = b;
                    fa = fb;
                    b = lo + phi * (hi - lo);
                    fb = at(b, &mut mu);
                } else {
                    hi = b;
                    b = a;
                    fb = fa;
                    a = hi - phi * (hi - lo);
                    fa = at(a, &mut mu);
                }
            }
            mu[l] = if fa >= fb { a } else { b };
        }
        best
    }

    /// The catalog the measurements solve with: the one in force, cut to the regions the pools
    /// may buy in (built once, again after a price or pool change).
    fn solving_catalog(&self) -> &quartermaster_pricing::Catalog {
        self.measure_catalog.get_or_init(|| {
            quartermaster_engine::catalog_for_pools(&self.catalog, &self.world.setup.pools)
        })
    }

    /// [`Driver::solve_on`] with at most so many new nodes on the offerings of each of
    /// `offering_limits`, and, when `reserved`, every slot of the reservations open now as a
    /// free node (reservations are paid whether used or not, and the fleet's cost leaves them
    /// out).
    fn solve_within<'a>(
        &self,
        mut nodes: Vec<ExistingNode>,
        pods: impl Iterator<Item = &'a Pod>,
        bound: bool,
        unavailable: BTreeSet<OfferingKey>,
        offering_limits: Vec<OfferingLimit>,
        reserved: bool,
    ) -> FromScratch {
        let setup = &self.world.setup;
        let mut node_pools: Vec<_> = setup
            .pools
            .iter()
            .map(|p| {
                let mut spec = p.spec.clone();
                spec.usage = Default::default();
                spec
            })
            .collect();
        if reserved {
            nodes.extend(self.engine.reservation_slots(self.now, &mut node_pools));
        }
        let snapshot = ClusterSnapshot {
            resources: setup.resources.clone(),
            pending: pods.cloned().collect(),
            nodes,
            node_pools,
            daemonsets: setup.daemonsets.clone(),
            unavailable,
            offering_limits,
        };
        let options = SolveOptions {
            skip_lower_bound: !bound,
            ..SolveOptions::default()
        };
        let catalog = self.solving_catalog();
        let plan = quartermaster_solver::solve_with(&snapshot, catalog, self.now, &options);
        let within_limits = snapshot.offering_limits.iter().all(|limit| {
            let taken = plan
                .new_nodes
                .iter()
                .filter(|n| {
                    limit.offerings.contains(&OfferingKey {
                        cloud: n.cloud,
                        instance_type: n.offering.instance_type.clone(),
                        zone: n.offering.zone.clone(),
                        capacity_type: n.offering.capacity_type,
                    })
                })
                .count();
            taken <= limit.max as usize
        });
        // The solver's bound holds each limit per instance shape, not across the shapes and
        // zones one limit covers (a quota on a whole family): when the plan passes a limit, or
        // keeps to them but is not proven optimal, the bound is raised by pricing the limits in
        // (see `shared_limits_bound`).
        let mut lower = plan.lower_bound_per_hour;
        let plan_cost: f64 = plan
            .new_nodes
            .iter()
            .map(|n| n.offering.price_per_hour)
            .sum();
        let proven = plan_cost <= lower + 1e-6 * plan_cost.max(1.0);
        if bound && !snapshot.offering_limits.is_empty() && (!within_limits || !proven) {
            lower = lower.max(self.shared_limits_bound(&snapshot, catalog, &options));
        }
        FromScratch {
            within_limits,
            plan: plan_cost,
            bound: lower,
            unplaced: plan.unschedulable.into_iter().map(|u| u.pod).collect(),
        }
    }

    /// The achievable saving now, with the meaning consolidation has: the fleet's cost against
    /// the cheapest fleet for the running pods when only the moves consolidation may make are
    /// made. Nodes with a Job or do-not-disrupt pod stay, with their room, and so do spot nodes
    /// of pools where the spot-to-spot rule can never pass; every other running pod is solved
    /// from scratch on the same NodePools and prices.
    pub(super) fn measure(&mut self) {
        self.measured = true;
        let fleet = self.fleet_cost();
        let scratch = self.consolidation_floor();
        let r = &mut self.tracker.record;
        r.fleet_cost_at_measure = fleet;
        r.from_scratch_cost_at_measure = scratch;
        r.measured_at = Some(self.now);
    }

    /// Whether consolidation may never replace a spot node of `pool` with new spot capacity:
    /// the pool allows fewer spot instance types than the flexibility rule asks for.
    fn spot_to_spot_refused(&self, pool: &str) -> bool {
        let Some(policy) = self.world.pool(pool).map(|i| &self.world.setup.pools[i]) else {
            return false;
        };
        let min = policy.spot_to_spot_min_types(self.scenario.engine.spot_to_spot_min_types);
        // The catalog's shared labels, looked up in layers: building each offering's label map
        // for every node measured was a fifth of a day's simulation.
        let catalog = self.solving_catalog();
        let spot_types = catalog
            .instance_types()
            .iter()
            .zip(catalog.labels())
            .filter(|(it, _)| it.cloud == policy.spec.cloud)
            .filter(|(it, labels)| {
                it.offerings
                    .iter()
                    .zip(&labels.offerings)
                    .any(|(o, offering)| {
                        o.capacity_type == CapacityType::Spot
                            && policy.spec.requirements.matches(&OfferingLayers {
                                offering,
                                instance_type: &labels.instance_type,
                            })
                    })
            })
            .count();
        spot_types < min
    }

    /// Whether consolidation may move `pod` (the engine leaves Job pods not annotated
    /// checkpointed and do-not-disrupt pods where they are).
    fn consolidation_may_move(&self, pod: &PodRef) -> bool {
        self.workload_of.get(pod).is_none_or(|w| {
            let w = &self.scenario.workloads[*w];
            (!matches!(w.kind, WorkloadKind::Job(_)) || w.annotated_checkpointed())
                && !w.do_not_disrupt()
        })
    }

    /// The cost of the cheapest fleet for the running pods reachable by consolidation's moves,
    /// $/hour (see [`Driver::measure`]), on what the clouds sell now, as for the hindsight: an
    /// offering in an outage window is refused, and a capacity limit holds at most its `max`
    /// less the nodes that stay on its offerings.
    fn consolidation_floor(&self) -> f64 {
        let mut kept_cost = 0.0;
        let mut spot_refused: BTreeMap<&str, bool> = BTreeMap::new();
        let mut nodes: Vec<ExistingNode> = Vec::new();
        let mut kept_offerings: Vec<OfferingKey> = Vec::new();
        // The room CapacityBuffers ask for is part of what the fleet must hold, as in the
        // hindsight: consolidation never gives it up, so no saving is achievable from it.
        let placeholders = self.buffer_placeholders();
        let mut pending: Vec<&Pod> = placeholders.iter().collect();
        for (name, node) in self.cluster.nodes() {
            let instance = &self.rec.instances[node.instance];
            // A pool that only removes empty nodes never moves a pod off one.
            let when_empty = self.world.pool(&instance.node_pool).is_some_and(|i| {
                matches!(
                    self.world.setup.pools[i].node_pool.consolidation_policy(),
                    ConsolidationPolicy::WhenEmpty
                )
            });
            let mut stay: Vec<Arc<Pod>> = Vec::new();
            for id in &node.pods {
                let Some(pod) = self.cluster.pod(id) else {
                    continue;
                };
                if !when_empty && self.consolidation_may_move(id) {
                    pending.push(pod);
                } else {
                    stay.push(Arc::new(pod.clone()));
                }
            }
            // A spot node in a pool where consolidation may never replace spot with spot stays
            // too (its pods may still move onto it or elsewhere).
            let spot_kept = instance.capacity_type == CapacityType::Spot
                && *spot_refused
                    .entry(instance.node_pool.as_str())
                    .or_insert_with(|| self.spot_to_spot_refused(&instance.node_pool));
            if stay.is_empty() && !spot_kept {
                continue;
            }
            kept_cost += self.instance_price(node.instance);
            kept_offerings.push(OfferingKey {
                cloud: instance.cloud,
                instance_type: instance.instance_type.clone(),
                zone: instance.zone.clone(),
                capacity_type: instance.capacity_type,
            });
            nodes.push(ExistingNode {
                name: name.clone(),
                in_flight: false,
                node_pool: node.view.labels.get(NODEPOOL_LABEL).cloned(),
                labels: Arc::new(node.view.labels.clone()),
                taints: node.view.taints.clone(),
                allocatable: node.view.allocatable.saturating_sub(&node.overhead),
                pods: stay,
            });
        }
        let mut limits = self.capacity_limits();
        for limit in &mut limits {
            let kept = kept_offerings
                .iter()
                .filter(|k| limit.offerings.contains(k))
                .count();
            limit.max = limit.max.saturating_sub(kept as u32);
        }
        kept_cost
            + self
                .solve_within(
                    nodes,
                    pending.into_iter(),
                    false,
                    self.in_outage_now(),
                    limits,
                    false,
                )
                .plan
    }

    /// Takes the hindsight samples due before `until` (the next instant, or the end): the
    /// state is the one after the current instant until then.
    pub(super) fn sample_hindsight(&mut self, until: DateTime<Utc>, end: DateTime<Utc>) {
        // A last interval cut short by the end is sampled at the end.
        let due = |t: &DateTime<Utc>| {
            let point = (*t).min(end);
            *t - HINDSIGHT_STEP / 2 < end && (point < until || (until == end && point == end))
        };
        while let Some(at) = self.hindsight_next.filter(due) {
            // The sample at the middle of its interval stands for the whole interval.
            let from = at - HINDSIGHT_STEP / 2;
            let hours = ((end - from).min(HINDSIGHT_STEP)).as_seconds_f64() / 3600.0;
            // The room CapacityBuffers ask for is part of what the fleet must hold.
            let placeholders = self.buffer_placeholders();
            // Reservation slots open now are free to the hindsight, as to the fleet (whose cost
            // leaves reservations out: they are paid whether used or not).
            let open_slots: u64 = self
                .world
                .reservations
                .iter()
                .filter(|o| o.reservation.accepts_launches(self.now))
                .map(|o| u64::from(o.reservation.count))
                .sum();
            let population = (
                self.cluster.placements(),
                self.change_cursor,
                placeholders.len() as u64,
                open_slots,
            );
            // Offerings in an outage window are refused to the hindsight too: no fleet could
            // have bought them.
            let in_outage = self.in_outage_now();
            let (plan, bound, within_limits) = match &self.hindsight_last {
                Some(last) if last.population == population && last.in_outage == in_outage => {
                    (last.plan, last.bound, last.within_limits)
                }
                _ => {
                    // So are more instances than a capacity limit holds: the plan keeps to the
                    // limits where it can, and the lower bound counts them.
                    let s = self.solve_within(
                        Vec::new(),
                        self.cluster.running_pods().chain(placeholders.iter()),
                        true,
                        in_outage.clone(),
                        self.capacity_limits(),
                        true,
                    );
                    self.hindsight_last = Some(HindsightSolve {
                        population,
                        in_outage,
                        plan: s.plan,
                        bound: s.bound,
                        within_limits: s.within_limits,
                    });
                    (s.plan, s.bound, s.within_limits)
                }
            };
            // A plan past a capacity limit is no fleet anyone could run: its bound stands.
            let optimal = within_limits && plan <= bound + 1e-6 * plan.max(1.0);
            let h = &mut self.hindsight;
            h.samples += 1;
            h.plan_cost += plan * hours;
            if optimal {
                h.cost += plan * hours;
            } else {
                h.cost += bound * hours;
                h.from_lower_bound += bound * hours;
            }
            self.hindsight_next = Some(at + HINDSIGHT_STEP);
        }
    }

    /// The cloud's instances and the engine's claims checked against each other, and the
    /// record against the cloud's bill (at the end).
    pub(super) fn audit(&self) -> Audit {
        let claims: BTreeSet<String> = self.engine.claims().map(|c| c.name.clone()).collect();
        // An instance the garbage collection has not had its chance at yet is not a leak.
        let window = super::GC_GRACE + super::GC_INTERVAL;
        let leaked = self
            .clouds
            .values()
            .flat_map(|c| c.live_instances())
            .filter(|(_, claim, at)| !claims.contains(claim) && self.now - *at >= window)
            .count();
        let mut per_claim: std::collections::BTreeMap<&str, u64> = Default::default();
        for i in &self.rec.instances {
            *per_claim.entry(i.claim.as_str()).or_default() += 1;
        }
        let billed: f64 = self
            .clouds
            .values()
            .map(|c| c.billed_seconds(self.now))
            .sum();
        let recorded: f64 = self
            .rec
            .instances
            .iter()
            .map(|i| {
                (i.end.unwrap_or(self.now) - i.start)
                    .as_seconds_f64()
                    .max(0.0)
            })
            .sum();
        Audit {
            leaked_instances: leaked as u64,
            duplicate_launches: per_claim.values().filter(|n| **n > 1).count() as u64,
            unbilled_instance_seconds: (billed - recorded).max(0.0),
            collected_instances: self.collected,
            limit_violations: self.limit_violations,
            gangs_half_launched: self.half_launched_gangs.len() as u64,
            restarts: self
                .crashes
                .as_ref()
                .map(|c| c.points.clone())
                .unwrap_or_default(),
        }
    }

    /// The pods waiting now (at the end), by why.
    pub(super) fn waiting_at_end(&self) -> Waiting {
        let served_wait = self
            .rec
            .pods
            .iter()
            .filter_map(|p| Some(p.first_bound? - p.created))
            .max()
            .unwrap_or_default();
        let window = served_wait.max(LATE_WINDOW_MIN);
        let waiting: Vec<(&Pod, usize)> = self.cluster.waiting_pods().collect();
        let mut out = Waiting {
            late_window_seconds: window.as_seconds_f64(),
            ..Waiting::default()
        };
        if waiting.is_empty() {
            return out;
        }
        // Servable: some NodePool could place it with the capacity the clouds offer now.
        let unplaced = self
            .solve_on(
                Vec::new(),
                waiting.iter().map(|(p, _)| *p),
                false,
                self.refused_now(),
            )
            .unplaced;
        for (pod, record) in waiting {
            if unplaced.contains(&pod.id) {
                out.unservable += 1;
                continue;
            }
            let since = self
                .rec
                .segments
                .iter()
                .filter(|s| s.pod == record)
                .map(|s| s.end)
                .max()
                .unwrap_or(self.rec.pods[record].created);
            if self.now - since < window || self.coming_up_for(&pod.id) {
                out.late_arrivals += 1;
            } else {
                out.stuck += 1;
            }
        }
        out
    }

    /// Whether the engine placed `pod` on a node still coming up, within the time it gives a
    /// node to register and then to show its GPUs: the pod is being served, not left behind
    /// (under chaos a node that never registers makes its pods wait that long).
    fn coming_up_for(&self, pod: &PodRef) -> bool {
        let Some(claim) = self.engine.placement(pod) else {
            return false;
        };
        let Some(c) = self.engine.claims().find(|c| c.name == claim) else {
            return false;
        };
        let config = &self.scenario.engine;
        let due = match (c.registered_at, c.launched_at) {
            (Some(registered), _) => registered + config.accelerator_ready_budget,
            (None, Some(launched)) => launched + config.registration_budget,
            (None, None) => c.created_at + config.registration_budget,
        };
        !c.initialized && self.now <= due
    }

    /// Holds the workload still from now on and runs the engine until consolidation is done
    /// (see the module docs). Returns the fleet's cost then, $/hour.
    pub(super) fn settle(&mut self) -> Result<f64, SimulationError> {
        self.frozen = true;
        self.hindsight_next = None;
        // Spot interruptions would change the snapshot under consolidation: held too.
        for cloud in self.clouds.values() {
            cloud.hold_interruptions();
        }
        let waiting: Vec<PodRef> = self
            .cluster
            .waiting_pods()
            .map(|(p, _)| p.id.clone())
            .collect();
        for id in waiting {
            self.cluster.delete_pod(self.now, &id, false, &mut self.rec);
            self.forget(&id);
            self.engine.handle(self.now, Event::PodGone(id));
        }
        let start = self.now;
        let mut quiet_since = start;
        let mut last = self.settle_marker();
        loop {
            self.instant()?;
            let marker = self.settle_marker();
            if marker != last || self.budget_closed() {
                last = marker;
                quiet_since = self.now;
            }
            match self.next_time() {
                Some(t) if t - quiet_since < SETTLE_QUIET && t - start <= SETTLE_MAX => {
                    self.now = t;
                    self.clock.set(t);
                }
                _ => break,
            }
        }
        self.tracker.record.settle_seconds = (self.now - start).as_seconds_f64();
        Ok(self.fleet_cost())
    }

    /// Whether a NodePool with nodes allows no voluntary disruption now (a budget window):
    /// the settle waits for it to open.
    fn budget_closed(&self) -> bool {
        self.world.setup.pools.iter().any(|p| {
            let total = self
                .engine
                .claims()
                .filter(|c| c.node_pool == p.spec.name)
                .count();
            total > 0
                && p.allowed_disruptions(DisruptionReason::Underutilized, total, self.now) == 0
        })
    }

    /// Changes the settle waits to stop: commands decided, instances launched and ended.
    fn settle_marker(&self) -> (u64, usize, usize) {
        let commands = self.tracker.record.commands.values().sum();
        let ended = self
            .rec
            .instances
            .iter()
            .filter(|i| i.end.is_some())
            .count();
        (commands, self.rec.instances.len(), ended)
    }
}

/// An offering's labels as [`quartermaster_pricing::InstanceType::offering_labels`] has them
/// (the offering's own over its type's), read from the catalog's shared maps without a copy.
struct OfferingLayers<'a> {
    offering: &'a BTreeMap<String, String>,
    instance_type: &'a BTreeMap<String, String>,
}

impl LabelLookup for OfferingLayers<'_> {
    fn label(&self, key: &str) -> Option<&str> {
        self.offering
            .get(key)
            .or_else(|| self.instance_type.get(key))
            .map(String::as_str)
    }
}
