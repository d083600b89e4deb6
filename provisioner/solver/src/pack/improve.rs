//! The improvement phase after construction: local search that moves pods between planned
//! nodes while it lowers the plan's cost.
//!
//! Three moves, each kept only when the plan gets strictly cheaper:
//!
//! * **ruin and recreate** (the main one): take every movable pod off a chunk of nodes of one
//!   zone (pods with hostname anti-affinity stay: they hold their node), shrink or drop those
//!   nodes, then put the pods back, most valuable first, each on the node in its zone where it
//!   fits in room already paid for with the least left over in its tighter resource, or else on
//!   the node that grows least; sweeps alternate between chunks of neighbours (shifted each
//!   time) and chunks of the worst-filled nodes;
//! * **relocate**: take one pod off a node when that lets the node shrink to a cheaper type,
//!   and put it where there is room to spare, or where growing costs less than the shrink saves;
//! * **empty**: move every pod of a lightly filled node elsewhere and drop the node, when what
//!   the receiving nodes grow by costs less than the node.
//!
//! Every move honours what construction honours: the receiving node's type and offering must be
//! allowed for the pod (taints, node affinity, pool requirements), [`room`] must hold there
//! (resources, host ports, hostname topology spread, pod affinity and anti-affinity, both
//! directions), a resident's hostname spread must not be exceeded by the newcomer, and NodePool
//! limits must not be passed by a node that grows. A pod changes zone only when neither it nor
//! any group it counts in has a zonal rule; otherwise it stays in its zone, where every zone
//! count stays as construction left it (so zonal rules hold as they did). Pods with host ports,
//! with hostname pod affinity, or followed by another pod's hostname affinity do not move.
//! Nodes keep their zone and pool; each is re-sized to the cheapest type of its pool that
//! holds its pods in its zone.
//!
//! Deterministic: bins are visited in a fixed order, candidates come from ordered sets with ties
//! broken on indices, and a work budget (counted in candidate checks, never in time) bounds the
//! search.

use std::collections::BTreeSet;

use crate::resources::{CPU, MEMORY, Resources};
use crate::snapshot::PoolUsage;

use super::bins::{BinKind, NO_ZONE, room};
use super::classes::Topology;
use super::packer::Packer;

/// Passes of the relocate move over every node (stops earlier when a pass finds nothing).
const MAX_PASSES: usize = 4;
/// Free targets examined per pod (best fit on CPU first).
const SCAN: usize = 32;
/// Targets that would have to grow, examined per pod (those with the most free CPU).
const GROW_CANDIDATES: usize = 6;
/// Nodes with at most this many pods are tried by the empty move.
const EMPTY_MAX_PODS: usize = 8;
/// Sweeps of ruin-and-recreate over every zone.
const RECREATE_SWEEPS: usize = 6;
/// Nodes ruined together.
const CHUNK: usize = 64;
/// Smallest saving that counts, dollars per hour.
const EPS: f64 = 1e-9;
/// Work budget: candidate checks per pending pod, plus a constant.
const WORK_PER_POD: u64 = 80;
const WORK_BASE: u64 = 20_000;

/// Improves the packed state in place; see the module docs.
pub fn improve(packer: &mut Packer<'_>, pool_shapes: &[Vec<usize>]) {
    let budget = WORK_BASE + WORK_PER_POD * packer.snapshot.pending.len() as u64;
    let mut improver = Improver::new(packer, pool_shapes, budget);
    for sweep in 0..RECREATE_SWEEPS {
        if improver.recreate_sweep(sweep) == 0 || improver.out_of_work() {
            break;
        }
    }
    for _ in 0..MAX_PASSES {
        if improver.relocate_pass() == 0 || improver.out_of_work() {
            break;
        }
    }
    improver.empty_pass();
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
    /// Whether a class keeps its node to itself (hostname anti-affinity): such pods stay put
    /// when a node is ruined, so the node stays.
    anchor: Vec<bool>,
    /// Per group, the smallest maxSkew of the hostname spread rules counting it (`i64::MAX` for
    /// none): a node holding a pod with such a rule takes no more members than that.
    host_skew: Vec<i64>,
    /// Open bins per zone slot, by free CPU.
    index: Vec<BTreeSet<(i64, u32)>>,
    /// Each bin's key in `index`.
    key: Vec<Option<(usize, i64)>>,
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
        let mut improver = Improver {
            p,
            pool_shapes,
            pod_class,
            movable,
            cross_zone,
            neutral,
            anchor,
            host_skew,
            index: vec![BTreeSet::new(); zones + 1],
            key: vec![None; bins],
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
        if let Some((slot, free)) = self.key[b].take() {
            self.index[slot].remove(&(free, b as u32));
        }
        let bin = &self.p.bins[b];
        let open =
            !self.closed[b] && (matches!(bin.kind, BinKind::Existing(_)) || !bin.pods.is_empty());
        if open {
            let slot = self.zone_slot(b);
            let free = bin.free.get(CPU);
            self.index[slot].insert((free, b as u32));
            self.key[b] = Some((slot, free));
        }
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
        let mut best: Option<(usize, usize, f64)> = None;
        for &s2 in &self.pool_shapes[pool] {
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
        let delta = new.offerings[offering].price - old.offerings[old_offering].price;
        usage.hourly_cost += delta;
        self.total += delta;
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
        usage.hourly_cost -= s.offerings[offering].price;
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

    /// Zone slots a pod of class `c` now on bin `from` may move to.
    fn slots(&self, c: usize, from: usize) -> Vec<usize> {
        if self.cross_zone[c] {
            (0..self.index.len()).collect()
        } else {
            vec![self.zone_slot(from)]
        }
    }

    /// The open bin (not `from` when `exclude`) with the least free CPU that holds a pod of
    /// class `c` as it is, at no added cost; `from` also names the pod's zone.
    fn free_target(&mut self, c: usize, from: usize, exclude: bool) -> Option<usize> {
        let requests = self.p.classes[c].requests;
        let need = requests.get(CPU);
        // Candidates that hold the pod, by the larger share of its capacity a bin would leave
        // unused in CPU or memory afterwards (best fit in the worse dimension, so that what
        // is left stays usable by the pods to come).
        let mut fitting: Vec<(f64, usize)> = Vec::new();
        for slot in self.slots(c, from) {
            for &(_, b) in self.index[slot].range((need, 0)..).take(SCAN) {
                let b = b as usize;
                let bin = &self.p.bins[b];
                if (exclude && b == from) || !requests.fits_in(&bin.free) {
                    continue;
                }
                let capacity = bin.free + bin.requests;
                let share = |slot: usize| {
                    let cap = capacity.get(slot);
                    if cap > 0 {
                        (bin.free.get(slot) - requests.get(slot)) as f64 / cap as f64
                    } else {
                        0.0
                    }
                };
                fitting.push((share(CPU).max(share(MEMORY)), b));
            }
        }
        self.work += fitting.len() as u64;
        fitting.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        for (_, b) in fitting {
            if !self.allowed_on(c, b) {
                continue;
            }
            let room_left = self.p.bins[b].free;
            if self.rules_allow(c, b, &room_left) {
                return Some(b);
            }
        }
        None
    }

    /// The new bin (not `from` when `exclude`) that grows least to take a pod of class `c`,
    /// when growing costs less than `max_cost`: (bin, shape, offering, added cost).
    fn grow_target(
        &mut self,
        c: usize,
        from: usize,
        exclude: bool,
        max_cost: f64,
    ) -> Option<(usize, usize, usize, f64)> {
        let requests = self.p.classes[c].requests;
        let mut best: Option<(usize, usize, usize, f64)> = None;
        for slot in self.slots(c, from) {
            let candidates: Vec<u32> = self.index[slot]
                .iter()
                .rev()
                .take(GROW_CANDIDATES)
                .map(|&(_, b)| b)
                .collect();
            for b in candidates {
                let b = b as usize;
                if (exclude && b == from) || !matches!(self.p.bins[b].kind, BinKind::New { .. }) {
                    continue;
                }
                let grown = self.p.bins[b].requests + requests;
                let Some((s2, o2, price)) = self.cheapest(b, &grown, Some(c)) else {
                    continue;
                };
                let added = price - self.price(b);
                let limit = best.map_or(max_cost, |(_, _, _, a)| a.min(max_cost));
                if added >= limit - EPS {
                    continue;
                }
                let room_left = self.p.shapes[s2].allocatable - self.p.bins[b].requests;
                if self.rules_allow(c, b, &room_left) {
                    best = Some((b, s2, o2, added));
                }
            }
        }
        best
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

    /// New bins, worst value for money first.
    fn order(&self) -> Vec<usize> {
        let mut order: Vec<(f64, usize)> = (0..self.p.bins.len())
            .filter(|&b| {
                !self.closed[b]
                    && !self.p.bins[b].pods.is_empty()
                    && matches!(self.p.bins[b].kind, BinKind::New { .. })
            })
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

    /// One relocate pass over every new bin; returns how many pods moved.
    fn relocate_pass(&mut self) -> usize {
        let mut moved = 0;
        for a in self.order() {
            let pods = self.p.bins[a].pods.clone();
            for pod in pods {
                if self.out_of_work() {
                    return moved;
                }
                if self.closed[a] {
                    break;
                }
                let c = self.pod_class[pod] as usize;
                if self.movable[c] && self.relocate(pod, c, a) {
                    moved += 1;
                }
            }
        }
        moved
    }

    /// Moves `pod` (class `c`) off bin `a` when that makes the plan cheaper.
    fn relocate(&mut self, pod: usize, c: usize, a: usize) -> bool {
        let before_price = self.price(a);
        let before = self.usage_before();
        let kind_a = self.p.bins[a].kind;
        self.unplace(pod, c, a);
        let shrunk = if self.p.bins[a].pods.is_empty() {
            None
        } else {
            let requests = self.p.bins[a].requests;
            match self.cheapest(a, &requests, None) {
                Some(fit) => Some(fit),
                None => {
                    self.place(pod, c, a);
                    return false;
                }
            }
        };
        let gain = before_price - shrunk.map_or(0.0, |(_, _, price)| price);
        if gain <= EPS {
            self.place(pod, c, a);
            return false;
        }
        let target = match self.free_target(c, a, true) {
            Some(b) => Some((b, None)),
            None => self
                .grow_target(c, a, true, gain)
                .map(|(b, s2, o2, _)| (b, Some((s2, o2)))),
        };
        let Some((b, grow)) = target else {
            self.place(pod, c, a);
            return false;
        };
        let kind_b = self.p.bins[b].kind;
        if let Some((s2, o2)) = grow {
            self.set_kind(b, s2, o2);
        }
        self.place(pod, c, b);
        match shrunk {
            Some((s, o, _)) => self.set_kind(a, s, o),
            None => self.close(a),
        }
        if self.passes_limits(&before) {
            // Undo: the limits come first.
            self.unplace(pod, c, b);
            if let BinKind::New { shape, offering } = kind_b {
                self.set_kind(b, shape, offering);
            }
            if self.closed[a] {
                self.reopen(a);
            }
            if let BinKind::New { shape, offering } = kind_a {
                self.set_kind(a, shape, offering);
            }
            self.place(pod, c, a);
            return false;
        }
        true
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
        usage.hourly_cost += s.offerings[offering].price;
        self.total += s.offerings[offering].price;
        self.closed[b] = false;
        self.reindex(b);
    }

    /// Tries to drop each lightly filled new bin by moving all its pods elsewhere.
    fn empty_pass(&mut self) {
        let order = self.order();
        for a in order {
            if self.out_of_work() {
                return;
            }
            let pods = self.p.bins[a].pods.clone();
            if pods.len() > EMPTY_MAX_PODS
                || self.closed[a]
                || pods
                    .iter()
                    .any(|&q| !self.movable[self.pod_class[q] as usize])
            {
                continue;
            }
            self.empty(a, &pods);
        }
    }

    fn empty(&mut self, a: usize, pods: &[usize]) -> bool {
        let price = self.price(a);
        let before = self.usage_before();
        let mut spent = 0.0;
        // (pod, class, bin, its kind before)
        let mut moved: Vec<(usize, usize, usize, BinKind)> = Vec::new();
        let mut ok = true;
        for &pod in pods {
            let c = self.pod_class[pod] as usize;
            self.unplace(pod, c, a);
            let target = match self.free_target(c, a, true) {
                Some(b) => Some((b, None)),
                None => self
                    .grow_target(c, a, true, price - spent)
                    .map(|(b, s2, o2, added)| (b, Some((s2, o2, added)))),
            };
            let Some((b, grow)) = target else {
                self.place(pod, c, a);
                ok = false;
                break;
            };
            let kind_b = self.p.bins[b].kind;
            if let Some((s2, o2, added)) = grow {
                self.set_kind(b, s2, o2);
                spent += added;
            }
            self.place(pod, c, b);
            moved.push((pod, c, b, kind_b));
        }
        if ok && price - spent > EPS {
            self.close(a);
            if !self.passes_limits(&before) {
                return true;
            }
            self.reopen(a);
        }
        for (pod, c, b, kind_b) in moved.into_iter().rev() {
            self.unplace(pod, c, b);
            if let BinKind::New { shape, offering } = kind_b {
                self.set_kind(b, shape, offering);
            }
            self.place(pod, c, a);
        }
        false
    }

    /// Ruin and recreate over chunks of [`CHUNK`] new bins, zone by zone; returns how many
    /// chunks came out cheaper (and were kept).
    fn recreate_sweep(&mut self, sweep: usize) -> usize {
        let mut by_slot: Vec<Vec<usize>> = vec![Vec::new(); self.index.len()];
        // Even sweeps ruin neighbours in opening order (shifted by half a chunk each time),
        // odd ones the worst value for money together.
        let order = if sweep % 2 == 1 {
            self.order()
        } else {
            let mut all: Vec<usize> = (0..self.p.bins.len()).collect();
            let shift = (sweep / 2 * CHUNK / 2) % all.len().max(1);
            all.rotate_left(shift);
            all
        };
        for b in order {
            if !self.closed[b]
                && !self.p.bins[b].pods.is_empty()
                && matches!(self.p.bins[b].kind, BinKind::New { .. })
            {
                by_slot[self.zone_slot(b)].push(b);
            }
        }
        let mut kept = 0;
        for bins in by_slot {
            for chunk in bins.chunks(CHUNK) {
                if self.out_of_work() {
                    return kept;
                }
                if self.recreate(chunk) {
                    kept += 1;
                }
            }
        }
        kept
    }

    /// Takes every movable pod but the anchors off `chunk`, shrinks or drops its bins, and puts
    /// the pods back largest first, each where it fits in room already paid for (best fit) or
    /// else on the bin that grows least; keeps the result when it is cheaper.
    fn recreate(&mut self, chunk: &[usize]) -> bool {
        let start = self.total;
        let before = self.usage_before();
        let mut log: Vec<Op> = Vec::new();
        let mut removed: Vec<(usize, usize, usize)> = Vec::new();
        for &a in chunk {
            if self.closed[a] {
                continue;
            }
            let pods = self.p.bins[a].pods.clone();
            for pod in pods {
                let c = self.pod_class[pod] as usize;
                if self.movable[c] && !self.anchor[c] {
                    self.unplace(pod, c, a);
                    log.push(Op::Unplaced {
                        pod,
                        class: c,
                        bin: a,
                    });
                    removed.push((pod, c, a));
                }
            }
        }
        if removed.is_empty() {
            return false;
        }
        for &a in chunk {
            if self.closed[a] {
                continue;
            }
            let BinKind::New { shape, offering } = self.p.bins[a].kind else {
                continue;
            };
            if self.p.bins[a].pods.is_empty() {
                self.close(a);
                log.push(Op::Closed { bin: a });
                continue;
            }
            let requests = self.p.bins[a].requests;
            if let Some((s2, o2, _)) = self.cheapest(a, &requests, None)
                && (s2, o2) != (shape, offering)
            {
                self.set_kind(a, s2, o2);
                log.push(Op::Resized {
                    bin: a,
                    shape,
                    offering,
                });
            }
        }
        // Pods under a hostname rule first (as construction placed them before the pods their
        // rules count), then the most valuable first.
        let classes = &self.p.classes;
        let ruled = |c: usize| {
            classes[c]
                .spreads
                .iter()
                .any(|r| r.active && r.topology == Topology::Hostname)
        };
        removed.sort_by(|x, y| {
            ruled(y.1)
                .cmp(&ruled(x.1))
                .then(classes[y.1].value.total_cmp(&classes[x.1].value))
                .then(classes[y.1].requests.cmp(&classes[x.1].requests))
                .then(x.0.cmp(&y.0))
        });
        let mut ok = true;
        for &(pod, c, from) in &removed {
            let mut target = match self.free_target(c, from, false) {
                Some(b) => Some((b, None)),
                None => self
                    .grow_target(c, from, false, f64::INFINITY)
                    .map(|(b, s2, o2, _)| (b, Some((s2, o2)))),
            };
            if target.is_none() {
                target = self.back_home(c, from, chunk, &mut log);
            }
            let Some((b, grow)) = target else {
                ok = false;
                break;
            };
            if let Some((s2, o2)) = grow
                && let BinKind::New { shape, offering } = self.p.bins[b].kind
            {
                self.set_kind(b, s2, o2);
                log.push(Op::Resized {
                    bin: b,
                    shape,
                    offering,
                });
            }
            self.place(pod, c, b);
            log.push(Op::Placed {
                pod,
                class: c,
                bin: b,
            });
        }
        if ok && self.total < start - EPS && !self.passes_limits(&before) {
            return true;
        }
        self.undo(log);
        false
    }

    /// Undoes `log`, last change first.
    fn undo(&mut self, log: Vec<Op>) {
        for op in log.into_iter().rev() {
            match op {
                Op::Unplaced { pod, class, bin } => self.place(pod, class, bin),
                Op::Placed { pod, class, bin } => self.unplace(pod, class, bin),
                Op::Resized {
                    bin,
                    shape,
                    offering,
                } => self.set_kind(bin, shape, offering),
                Op::Closed { bin } => self.reopen(bin),
                Op::Reopened { bin } => self.close(bin),
            }
        }
    }

    /// The last resort of recreate: the pod's own bin, or else another bin of the chunk in the
    /// same zone and pool, reopened if it was dropped and grown to hold the pod.
    fn back_home(
        &mut self,
        c: usize,
        from: usize,
        chunk: &[usize],
        log: &mut Vec<Op>,
    ) -> Option<(usize, Option<(usize, usize)>)> {
        let pool_of = |p: &Packer<'_>, b: usize| match p.bins[b].kind {
            BinKind::New { shape, .. } => Some(p.shapes[shape].pool),
            BinKind::Existing(_) => None,
        };
        let home_pool = pool_of(self.p, from);
        let zone = self.p.bins[from].zone;
        let candidates = std::iter::once(from).chain(chunk.iter().copied().filter(|&b| {
            b != from && self.p.bins[b].zone == zone && pool_of(self.p, b) == home_pool
        }));
        for b in candidates.collect::<Vec<_>>() {
            let reopened = self.closed[b];
            if reopened {
                self.reopen(b);
            }
            let grown = self.p.bins[b].requests + self.p.classes[c].requests;
            if let Some((s2, o2, _)) = self.cheapest(b, &grown, Some(c)) {
                let room_left = self.p.shapes[s2].allocatable - self.p.bins[b].requests;
                if self.rules_allow(c, b, &room_left) {
                    if reopened {
                        log.push(Op::Reopened { bin: b });
                    }
                    return Some((b, Some((s2, o2))));
                }
            }
            if reopened {
                self.close(b);
            }
        }
        None
    }
}
