//! The improvement phase after construction: local search that moves pods between planned
//! nodes while it lowers the plan's cost.
//!
//! Four moves, each kept only when the plan gets strictly cheaper:
//!
//! * **ruin and recreate** (the main one): take every movable pod off a chunk of nodes of one
//!   zone (pods with hostname anti-affinity stay: they hold their node), shrink or drop those
//!   nodes, then put the pods back, most valuable first, each on the node in its zone where it
//!   fits in room already paid for with the least left over in its tighter resource, or else on
//!   the node that grows least (of those growing alike, the one left least lopsided between
//!   CPU and memory); sweeps alternate between chunks of neighbours (shifted each
//!   time) and chunks of the worst-filled nodes;
//! * **relocate**: take one pod off a node when that lets the node shrink to a cheaper type,
//!   and put it where there is room to spare, or where growing costs less than the shrink saves;
//! * **empty**: move every pod of a lightly filled node elsewhere and drop the node, when what
//!   the receiving nodes grow by costs less than the node;
//! * **rebalance** (last, on a budget of its own): a node whose memory binds trades its
//!   memory-heaviest pods for the CPU-heaviest of a node whose CPU binds, pods of twin classes
//!   only (same groups and rules), then both shrink; the nodes wasting most dollars either way
//!   are paired first. Then the few nodes where memory binds most each trade with many of the
//!   CPU-bound ones in turn, those partners allowed to outgrow their types, and every node that
//!   traded is re-sized: kept when they cost less together.
//!
//! Every move honours what construction honours: the receiving node's type and offering must be
//! allowed for the pod (taints, node affinity, pool requirements), [`room`] must hold there
//! (resources, host ports, hostname topology spread, pod affinity and anti-affinity, both
//! directions), a resident's hostname spread must not be exceeded by the newcomer, and NodePool
//! limits must not be passed by a node that grows. A pod changes zone only when neither it nor
//! any group it counts in has a zonal rule, or when it trades places with a twin (rebalance);
//! otherwise it stays in its zone, where every zone count stays as construction left it (so
//! zonal rules hold as they did). Pods with host ports,
//! with hostname pod affinity, or followed by another pod's hostname affinity do not move.
//! Nodes keep their zone and pool; each is re-sized to the cheapest type of its pool that
//! holds its pods in its zone.
//!
//! Deterministic: bins are visited in a fixed order, candidates come from ordered sets with ties
//! broken on indices, and a work budget (counted in candidate checks, never in time) bounds the
//! search. The budget grows with the pending pods up to [`WORK_CAP_PODS`] and then stays: an
//! anytime search, so a larger solve keeps construction's linear speed and spends a bounded
//! improvement; such a capped solve rebalances first too (the move that saves most per check,
//! with more pairs per pass), then spends the rest as usual.

use std::collections::BTreeSet;

use crate::resources::{CPU, MEMORY, Resources};
use crate::snapshot::PoolUsage;

use super::bins::{BinKind, NO_ZONE, room};
use super::classes::Topology;
use super::packer::Packer;

mod moves;
mod rebalance;
mod recreate;
mod targets;

/// Passes of the relocate move over every node (stops earlier when a pass finds nothing).
const MAX_PASSES: usize = 4;
/// Free targets examined per pod (best fit on CPU first).
const SCAN: usize = 32;
/// Targets that would have to grow, examined per pod (those with the most free CPU).
const GROW_CANDIDATES: usize = 6;
/// Nodes with at most this many pods are tried by the empty move.
const EMPTY_MAX_PODS: usize = 8;
/// Sweeps of ruin-and-recreate over every zone (at the default effort).
const RECREATE_SWEEPS: usize = 6;
/// Nodes ruined together.
const CHUNK: usize = 64;
/// Smallest saving that counts, dollars per hour.
const EPS: f64 = 1e-9;
/// The rebalance move's own budget, one part in this many of the others' (it spends far less).
const REBALANCE_SHARE: u64 = 8;
/// Pairs of nodes rebalanced per pass (the most tilted each way, paired in order).
const REBALANCE_PAIRS: usize = 32;
/// Nodes furthest from balance each way that trade with many partners per rebalance pass.
const REBALANCE_CENTERS: usize = 4;
/// The partners each of them trades with: the nodes furthest the other way.
const REBALANCE_PARTNERS: usize = 32;
/// With a capped budget, the first rebalance pairs one node in this many per pass.
const CAPPED_PAIRS_PER: usize = 16;
/// Rebalance passes at most (each pairs the nodes anew; stops when one keeps nothing).
const REBALANCE_PASSES: usize = 32;
/// Work budget: candidate checks per pending pod, plus a constant (at the default effort).
const WORK_PER_POD: u64 = 80;
const WORK_BASE: u64 = 20_000;
/// Pending pods past which the budget stops growing: an anytime search, so a larger solve
/// keeps the first plan's speed (construction is linear in pods) and spends the same bounded
/// improvement on its most wasteful nodes (about 1.6 M checks, 0.1 s on a 2-core machine).
/// `effort` still scales it, so a caller who wants more asks for it.
const WORK_CAP_PODS: u64 = 20_000;

/// Improves the packed state in place with `effort` percent of the default work (which also
/// scales the number of sweeps); see the module docs.
pub fn improve(packer: &mut Packer<'_>, pool_shapes: &[Vec<usize>], effort: u32) {
    if effort == 0 {
        return;
    }
    let new_bins = packer
        .bins
        .iter()
        .filter(|b| matches!(b.kind, BinKind::New { .. }) && !b.pods.is_empty())
        .count();
    if new_bins < 2 {
        // One new node is already the cheapest type for its pods: nothing to move between.
        return;
    }
    let effort = u64::from(effort);
    let pending = packer.snapshot.pending.len() as u64;
    let capped = pending > WORK_CAP_PODS;
    let budget = work_budget(pending, effort);
    let sweeps = (RECREATE_SWEEPS as u64 * effort).div_ceil(100) as usize;
    // Rebalancing runs last, on a budget of its own: it mends what the other moves cannot
    // (nodes full in one resource beside nodes full in the other).
    let reserve = budget / REBALANCE_SHARE;
    let mut improver = Improver::new(packer, pool_shapes, budget);
    if capped {
        // The budget is short of the solve's size: the move that saves most per check
        // (rebalancing the most tilted pairs) goes first too, with more pairs per pass. It may
        // spend up to the rebalance share, counted in the main budget.
        improver.budget = reserve;
        let pairs = REBALANCE_PAIRS.max(new_bins / CAPPED_PAIRS_PER);
        for _ in 0..REBALANCE_PASSES {
            if improver.rebalance_pass(pairs) == 0 || improver.out_of_work() {
                break;
            }
        }
        improver.budget = budget;
    }
    for sweep in 0..sweeps {
        if improver.recreate_sweep(sweep) == 0 || improver.out_of_work() {
            break;
        }
    }
    for _ in 0..MAX_PASSES {
        if improver.relocate_pass() == 0 || improver.out_of_work() {
            break;
        }
    }
    improver.budget = improver.work + reserve;
    for _ in 0..REBALANCE_PASSES {
        if improver.rebalance_pass(REBALANCE_PAIRS) == 0 || improver.out_of_work() {
            break;
        }
    }
    improver.empty_pass();
}

/// How much more of its CPU than of its memory a node with `capacity` leaves free with `free`
/// room, as shares of each: positive when memory binds, negative when CPU does.
fn tilt_of(free: &Resources, capacity: &Resources) -> f64 {
    let share = |slot: usize| {
        let cap = capacity.get(slot);
        if cap > 0 {
            free.get(slot) as f64 / cap as f64
        } else {
            0.0
        }
    };
    share(CPU) - share(MEMORY)
}

/// The improvement's work budget, in candidate checks, for `pending` pods at `effort` percent.
fn work_budget(pending: u64, effort: u64) -> u64 {
    (WORK_BASE + WORK_PER_POD * pending.min(WORK_CAP_PODS)).saturating_mul(effort) / 100
}

struct Improver<'p, 'a> {
    p: &'p mut Packer<'a>,
    pool_shapes: &'p [Vec<usize>],
    /// Class of each pending pod.
    pod_class: Vec<u32>,
    /// Whether pods of a class may move at all.
    movable: Vec<bool>,
    /// Whether pods of a class may change zone.
    cross_zone: Vec<bool>,
    /// The classes with their zonal rules switched off: a pod only changes zone when neither it
    /// nor any group it counts in has a zonal rule, so within its zone every zone count stays as
    /// construction left it and only the hostname rules need checking.
    neutral: Vec<super::classes::Class>,
    /// Per class, the first class with the same groups, rules and eligible zones: two pods of
    /// twin classes may trade places across zones, since every zone count stays as it was and
    /// each sees what the other saw.
    twin: Vec<u32>,
    /// Whether a class keeps its node to itself (hostname anti-affinity): such pods stay put
    /// when a node is ruined, so the node stays.
    anchor: Vec<bool>,
    /// Per group, the smallest maxSkew of the hostname spread rules counting it (`i64::MAX` for
    /// none): a node holding a pod with such a rule takes no more members than that.
    host_skew: Vec<i64>,
    /// Per pool, in `pool_shapes` order: the element-wise largest room of the shapes up to and
    /// including each one. A request that exceeds it at `i` fits no shape before `i + 1`, so
    /// [`Improver::cheapest`] starts its scan past them (a binary search per resource asked).
    room_so_far: Vec<Vec<Resources>>,
    /// Open bins per zone slot, by free CPU.
    index: Vec<BTreeSet<(i64, u32)>>,
    /// Each bin's key in `index`.
    key: Vec<Option<(usize, i64)>>,
    /// While set, [`Improver::reindex`] only notes the bin in `stale`: a run of changes that
    /// reads no target (a ruin, an undo) re-keys each bin it touched once, at its end.
    deferring: bool,
    /// Bins whose key in `index` waits for [`Improver::flush_index`].
    stale: Vec<usize>,
    /// [`Improver::free_target`]'s candidates, kept between calls.
    fitting: Vec<(f64, usize)>,
    /// Bins dropped by the empty move.
    closed: Vec<bool>,
    work: u64,
    budget: u64,
    /// Dollars per hour of the open new bins.
    total: f64,
}

/// One change of the state, as recorded by ruin-and-recreate so it can be undone.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// A pod left a bin.
    Unplaced {
        pod: usize,
        class: usize,
        bin: usize,
    },
    /// A pod joined a bin.
    Placed {
        pod: usize,
        class: usize,
        bin: usize,
    },
    /// A bin changed from this kind.
    Resized {
        bin: usize,
        shape: usize,
        offering: usize,
    },
    /// A bin was dropped.
    Closed { bin: usize },
    /// A dropped bin came back.
    Reopened { bin: usize },
}

impl<'p, 'a> Improver<'p, 'a> {
    fn new(p: &'p mut Packer<'a>, pool_shapes: &'p [Vec<usize>], budget: u64) -> Self {
        let mut pod_class = vec![u32::MAX; p.snapshot.pending.len()];
        for (c, class) in p.classes.iter().enumerate() {
            for &pod in &class.pods {
                pod_class[pod] = c as u32;
            }
        }
        let groups = p.groups.groups.len();
        let mut zone_counted = vec![false; groups];
        let mut host_affine = vec![false; groups];
        let mut host_skew = vec![i64::MAX; groups];
        for class in &p.classes {
            for r in class.spreads.iter().filter(|r| r.active) {
                match r.topology {
                    Topology::Zone => zone_counted[r.group] = true,
                    Topology::Hostname => {
                        host_skew[r.group] = host_skew[r.group].min(r.max_skew);
                    }
                }
            }
            for r in class.affinity.iter().filter(|r| r.active) {
                match r.topology {
                    Topology::Zone => zone_counted[r.group] = true,
                    Topology::Hostname => host_affine[r.group] = true,
                }
            }
            for r in class.anti_affinity.iter().filter(|r| r.active) {
                if r.topology == Topology::Zone {
                    zone_counted[r.group] = true;
                }
            }
        }
        let movable = p
            .classes
            .iter()
            .map(|c| {
                c.host_ports.is_empty()
                    && !c
                        .affinity
                        .iter()
                        .any(|r| r.active && r.topology == Topology::Hostname)
                    && !c.member_of.iter().any(|&g| host_affine[g])
            })
            .collect();
        let cross_zone = p
            .classes
            .iter()
            .map(|c| !c.zone_sensitive && !c.member_of.iter().any(|&g| zone_counted[g]))
            .collect();
        let neutral = p
            .classes
            .iter()
            .map(|c| {
                let mut c = c.clone();
                for r in c
                    .spreads
                    .iter_mut()
                    .filter(|r| r.topology == Topology::Zone)
                {
                    r.active = false;
                }
                for r in c
                    .affinity
                    .iter_mut()
                    .chain(c.anti_affinity.iter_mut())
                    .filter(|r| r.topology == Topology::Zone)
                {
                    r.active = false;
                }
                c
            })
            .collect();
        // Distinct rule sets are few (classes differ mostly in their requests): each class is
        // compared with one class of each set seen so far.
        let mut sets: Vec<usize> = Vec::new();
        let twin = (0..p.classes.len())
            .map(|c| {
                let same = |d: usize| {
                    let (x, y) = (&p.classes[c], &p.classes[d]);
                    x.member_of == y.member_of
                        && x.spreads == y.spreads
                        && x.affinity == y.affinity
                        && x.anti_affinity == y.anti_affinity
                        && x.zone_sensitive == y.zone_sensitive
                        && p.eligible_zones[c] == p.eligible_zones[d]
                };
                let first = sets.iter().copied().find(|&d| same(d)).unwrap_or_else(|| {
                    sets.push(c);
                    c
                });
                first as u32
            })
            .collect();
        let anchor = p
            .classes
            .iter()
            .map(|c| {
                c.anti_affinity
                    .iter()
                    .any(|r| r.active && r.topology == Topology::Hostname)
            })
            .collect();
        let zones = p
            .bins
            .iter()
            .filter(|b| b.zone != NO_ZONE)
            .map(|b| b.zone as usize + 1)
            .max()
            .unwrap_or(0);
        let bins = p.bins.len();
        let room_so_far = pool_shapes
            .iter()
            .map(|order| {
                let mut most = Resources::ZERO;
                order
                    .iter()
                    .map(|&s| {
                        most = Resources::max(&most, &p.shapes[s].allocatable);
                        most
                    })
                    .collect()
            })
            .collect();
        let mut improver = Improver {
            p,
            pool_shapes,
            room_so_far,
            pod_class,
            movable,
            cross_zone,
            neutral,
            twin,
            anchor,
            host_skew,
            index: vec![BTreeSet::new(); zones + 1],
            key: vec![None; bins],
            deferring: false,
            stale: Vec::new(),
            fitting: Vec::new(),
            closed: vec![false; bins],
            work: 0,
            budget,
            total: 0.0,
        };
        improver.total = improver.p.new_cost();
        for b in 0..bins {
            improver.reindex(b);
        }
        improver
    }

    fn out_of_work(&self) -> bool {
        self.work >= self.budget
    }

    fn zone_slot(&self, b: usize) -> usize {
        let z = self.p.bins[b].zone;
        if z == NO_ZONE {
            self.index.len() - 1
        } else {
            z as usize
        }
    }

    /// Puts bin `b` in the index under its current free CPU (or takes it out when closed or
    /// empty and new).
    fn reindex(&mut self, b: usize) {
        if self.deferring {
            self.stale.push(b);
            return;
        }
        if let Some((slot, free)) = self.key[b].take() {
            self.index[slot].remove(&(free, b as u32));
        }
        // Only the nodes this plan buys take part: construction fills the room of existing nodes
        // first, and leaving them out keeps the phase cheap where the engine solves often
        // against a large fleet (consolidation).
        if self.open_new(b) {
            let bin = &self.p.bins[b];
            let slot = self.zone_slot(b);
            let free = bin.free.get(CPU);
            self.index[slot].insert((free, b as u32));
            self.key[b] = Some((slot, free));
        }
    }

    /// From now until [`Improver::flush_index`], changes re-key their bins once, at the flush.
    /// The index then holds what it would after re-keying at every change: a bin's key is a
    /// function of its state alone.
    fn defer_index(&mut self) {
        self.deferring = true;
    }

    /// Re-keys every bin changed since [`Improver::defer_index`].
    fn flush_index(&mut self) {
        self.deferring = false;
        let mut stale = std::mem::take(&mut self.stale);
        stale.sort_unstable();
        stale.dedup();
        for &b in &stale {
            self.reindex(b);
        }
        stale.clear();
        self.stale = stale;
    }

    fn price(&self, b: usize) -> f64 {
        match self.p.bins[b].kind {
            BinKind::New { shape, offering } => self.p.shapes[shape].offerings[offering].price,
            BinKind::Existing(_) => 0.0,
        }
    }

    /// The cheapest (shape, offering, price) of new bin `b`'s pool in its zone that holds
    /// `requests` and that every class on the bin (and `extra`) allows.
    fn cheapest(
        &mut self,
        b: usize,
        requests: &Resources,
        extra: Option<usize>,
    ) -> Option<(usize, usize, f64)> {
        self.work += 1;
        let BinKind::New { shape, .. } = self.p.bins[b].kind else {
            return None;
        };
        let pool = self.p.shapes[shape].pool;
        let zone = self.p.bins[b].zone;
        let bin = &self.p.bins[b];
        let room_so_far = &self.room_so_far[pool];
        let mut start = 0;
        for (slot, &need) in requests.0.iter().enumerate() {
            if need > 0 {
                start = start.max(room_so_far.partition_point(|r| r.get(slot) < need));
            }
        }
        let mut best: Option<(usize, usize, f64)> = None;
        for &s2 in &self.pool_shapes[pool][start..] {
            let sh = &self.p.shapes[s2];
            if best.is_some_and(|(_, _, price)| sh.min_price() >= price) {
                break;
            }
            if !requests.fits_in(&sh.allocatable) {
                continue;
            }
            for (o2, off) in sh.offerings.iter().enumerate() {
                if off.zone != zone {
                    continue;
                }
                if best.is_some_and(|(_, _, price)| off.price >= price) {
                    break;
                }
                let allowed = bin
                    .classes
                    .iter()
                    .all(|&(c, _)| self.p.classes[c as usize].allows(s2, o2))
                    && extra.is_none_or(|c| self.p.classes[c].allows(s2, o2));
                if allowed {
                    best = Some((s2, o2, off.price));
                    break;
                }
            }
        }
        best
    }

    /// Changes new bin `b` to `(shape, offering)`, keeping its pool's usage current.
    fn set_kind(&mut self, b: usize, shape: usize, offering: usize) {
        let BinKind::New {
            shape: old_shape,
            offering: old_offering,
        } = self.p.bins[b].kind
        else {
            return;
        };
        let (old, new) = (&self.p.shapes[old_shape], &self.p.shapes[shape]);
        let usage = &mut self.p.usage[old.pool];
        usage.resources -= old.capacity;
        usage.resources += new.capacity;
        usage.hourly_cost +=
            new.offerings[offering].list_price - old.offerings[old_offering].list_price;
        self.total += new.offerings[offering].price - old.offerings[old_offering].price;
        let bin = &mut self.p.bins[b];
        bin.kind = BinKind::New { shape, offering };
        bin.free = new.allocatable - bin.requests;
        self.reindex(b);
    }

    /// Drops empty new bin `b` from the plan.
    fn close(&mut self, b: usize) {
        let BinKind::New { shape, offering } = self.p.bins[b].kind else {
            return;
        };
        let s = &self.p.shapes[shape];
        let usage = &mut self.p.usage[s.pool];
        usage.resources -= s.capacity;
        usage.nodes = usage.nodes.saturating_sub(1);
        usage.hourly_cost -= s.offerings[offering].list_price;
        self.total -= s.offerings[offering].price;
        self.closed[b] = true;
        self.reindex(b);
    }

    /// Takes pod `pod` of class `c` off bin `b`.
    fn unplace(&mut self, pod: usize, c: usize, b: usize) {
        let requests = self.p.classes[c].requests;
        let bin = &mut self.p.bins[b];
        if let Some(i) = bin.pods.iter().position(|&q| q == pod) {
            bin.pods.remove(i);
        }
        bin.free += requests;
        bin.requests -= requests;
        if let Some(i) = bin.classes.iter().position(|&(cl, _)| cl as usize == c) {
            bin.classes[i].1 -= 1;
            if bin.classes[i].1 == 0 {
                bin.classes.remove(i);
            }
        }
        let zone = bin.zone;
        for &g in &self.p.classes[c].member_of {
            let group = &mut self.p.groups.groups[g];
            group.bin_counts[b] -= 1;
            group.total -= 1;
            if zone != NO_ZONE {
                group.zone_counts[zone as usize] -= 1;
            }
        }
        self.reindex(b);
    }

    /// Puts pod `pod` of class `c` on bin `b`.
    fn place(&mut self, pod: usize, c: usize, b: usize) {
        let requests = self.p.classes[c].requests;
        let bin = &mut self.p.bins[b];
        bin.pods.push(pod);
        bin.free -= requests;
        bin.requests += requests;
        match bin.classes.iter_mut().find(|(cl, _)| *cl as usize == c) {
            Some((_, n)) => *n += 1,
            None => bin.classes.push((c as u32, 1)),
        }
        let zone = bin.zone;
        for &g in &self.p.classes[c].member_of {
            let group = &mut self.p.groups.groups[g];
            group.bin_counts[b] += 1;
            group.total += 1;
            if zone != NO_ZONE {
                group.zone_counts[zone as usize] += 1;
            }
        }
        self.reindex(b);
    }

    /// Whether class `c` may use bin `b` as it is (type, offering, existing node).
    fn allowed_on(&self, c: usize, b: usize) -> bool {
        let class = &self.p.classes[c];
        match self.p.bins[b].kind {
            BinKind::Existing(n) => class.existing.contains(&n),
            BinKind::New { shape, offering } => class.allows(shape, offering),
        }
    }

    /// Whether one pod of class `c` may join bin `b` if the bin had `free` room: the packer's
    /// [`room`] rule, plus the residents' hostname spread.
    fn rules_allow(&mut self, c: usize, b: usize, free: &Resources) -> bool {
        self.work += 1;
        let p = &*self.p;
        let bin = &p.bins[b];
        let class = &self.neutral[c];
        if room(
            class,
            c,
            &p.classes,
            &p.groups,
            &p.eligible_zones[c],
            Some((b, bin)),
            bin.zone,
            free,
            1,
        )
        .is_err()
        {
            return false;
        }
        // A resident placed under a hostname spread rule must not see more members than its
        // maxSkew allows; nor may a resident repel the newcomer (room checks the classes'
        // rules; this also covers the pods already on an existing node).
        for &g in &class.member_of {
            if self.host_skew[g] != i64::MAX
                && bin.classes.iter().any(|&(o, _)| {
                    p.classes[o as usize]
                        .spreads
                        .iter()
                        .any(|r| r.active && r.group == g && r.topology == Topology::Hostname)
                })
                && p.groups.groups[g].on_bin(Some(b)) + 1 > self.host_skew[g]
            {
                return false;
            }
        }
        if let BinKind::Existing(_) = bin.kind {
            let rep = class.rep(p.snapshot);
            if bin.classes.iter().any(|&(o, _)| {
                super::classes::repels(
                    p.classes[o as usize].rep(p.snapshot),
                    rep,
                    crate::pod::HOSTNAME,
                )
            }) {
                return false;
            }
        }
        true
    }

    /// Usage of the pools before a move, to check the limits after it.
    fn usage_before(&self) -> Vec<PoolUsage> {
        self.p.usage.clone()
    }

    /// True when a pool's usage rose past one of its limits since `before`.
    fn passes_limits(&self, before: &[PoolUsage]) -> bool {
        self.p
            .usage
            .iter()
            .zip(before)
            .enumerate()
            .any(|(pool, (now, then))| {
                let limits = &self.p.snapshot.node_pools[pool].limits;
                let table = self.p.snapshot.resources.len();
                (0..table).any(|slot| {
                    let limit = limits.resources.get(slot);
                    limit != i64::MAX
                        && now.resources.get(slot) > then.resources.get(slot)
                        && now.resources.get(slot) > limit
                }) || limits.max_hourly_cost.is_some_and(|max| {
                    now.hourly_cost > then.hourly_cost + EPS && now.hourly_cost > max + 1e-9
                })
            })
    }

    /// Whether `b` is a node this plan buys, still in the plan and holding pods: the only
    /// bins the moves work on.
    fn open_new(&self, b: usize) -> bool {
        let bin = &self.p.bins[b];
        !self.closed[b] && matches!(bin.kind, BinKind::New { .. }) && !bin.pods.is_empty()
    }

    /// New bins, worst value for money first.
    fn order(&self) -> Vec<usize> {
        let mut order: Vec<(f64, usize)> = (0..self.p.bins.len())
            .filter(|&b| self.open_new(b))
            .map(|b| {
                let value: f64 = self.p.bins[b]
                    .classes
                    .iter()
                    .map(|&(c, n)| self.p.classes[c as usize].value * f64::from(n))
                    .sum();
                (value / self.price(b).max(EPS), b)
            })
            .collect();
        order.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        order.into_iter().map(|(_, b)| b).collect()
    }

    /// Undoes [`Self::close`].
    fn reopen(&mut self, b: usize) {
        let BinKind::New { shape, offering } = self.p.bins[b].kind else {
            return;
        };
        let s = &self.p.shapes[shape];
        let usage = &mut self.p.usage[s.pool];
        usage.resources += s.capacity;
        usage.nodes += 1;
        usage.hourly_cost += s.offerings[offering].list_price;
        self.total += s.offerings[offering].price;
        self.closed[b] = false;
        self.reindex(b);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_grows_with_pods_up_to_the_cap_and_scales_with_effort() {
        assert_eq!(work_budget(1_000, 100), WORK_BASE + WORK_PER_POD * 1_000);
        let capped = work_budget(WORK_CAP_PODS, 100);
        assert!(work_budget(WORK_CAP_PODS - 1, 100) < capped);
        // An anytime search: a larger solve spends the same improvement after its construction.
        assert_eq!(work_budget(100_000, 100), capped);
        assert_eq!(work_budget(100_000, 400), 4 * capped);
        assert_eq!(work_budget(100_000, 0), 0);
    }
}
