//! The packing loop: places classes, in order, on bins that exist, then on new bins chosen by
//! cost efficiency (or, for the baseline, by size).

use crate::Strategy;
use crate::pod::ZONE;
use crate::resources::Resources;
use crate::snapshot::{ClusterSnapshot, PoolUsage};

use super::bins::{Bin, BinKind, Block, NO_ZONE, room};
use std::collections::HashMap;
use std::rc::Rc;

use super::classes::{Class, CompatSet, Groups, Topology, repels};
use super::shapes::{Shape, ZoneId, Zones};

mod limits;
mod opening;
mod window;

use window::Window;

/// The packer's working state.
pub struct Packer<'a> {
    /// Input.
    pub snapshot: &'a ClusterSnapshot,
    /// Launch shapes.
    pub shapes: &'a [Shape],
    /// Each pool's shapes, cheapest first.
    pub pool_shapes: &'a [Vec<usize>],
    /// Pod classes.
    pub classes: Vec<Class>,
    /// Counting groups for topology rules.
    pub groups: Groups,
    /// Bins: existing nodes first, then new ones in opening order.
    pub bins: Vec<Bin>,
    /// Pods of each class not yet placed (placed from the back).
    pub remaining: Vec<Vec<usize>>,
    /// Zones each class may be placed in (for spread minimums).
    pub eligible_zones: Vec<Vec<ZoneId>>,
    /// What each pool uses, planned nodes included.
    pub usage: Vec<PoolUsage>,
    /// Pods that cannot be placed: (pod index, reason).
    pub unschedulable: Vec<(usize, String)>,
    /// Pods placed after relaxing rules: (pod index, what was relaxed).
    pub relaxed: Vec<(usize, String)>,
    /// The strategy.
    pub strategy: Strategy,
    /// Pool weight tiers, highest first: pool indices of equal weight.
    pub tiers: Vec<Vec<usize>>,
    /// Memo of the last shape/offering a class opened, while it stays the best.
    memo: Vec<Option<(usize, usize)>>,
    /// The order classes are placed in (set by [`Packer::run`]).
    order: Vec<usize>,
    /// Per position in `order`: a position at or before the next class with pods left. A
    /// class's pods only ever leave, so a position once passed over stays passed over; the
    /// pointers let the window skip the placed classes instead of scanning them.
    skip: Vec<u32>,
}

impl<'a> Packer<'a> {
    /// Sets up bins for existing nodes and the per-class bookkeeping.
    pub fn new(
        snapshot: &'a ClusterSnapshot,
        shapes: &'a [Shape],
        pool_shapes: &'a [Vec<usize>],
        classes: Vec<Class>,
        mut groups: Groups,
        zones: &mut Zones,
        strategy: Strategy,
    ) -> Self {
        let mut bins = Vec::with_capacity(snapshot.nodes.len() + snapshot.pending.len() / 8);
        for (i, node) in snapshot.nodes.iter().enumerate() {
            let zone = node.labels.get(ZONE).map_or(NO_ZONE, |z| zones.intern(z));
            let mut used = Resources::ZERO;
            let mut host_ports = Vec::new();
            for pod in &node.pods {
                used += pod.requests;
                host_ports.extend(pod.host_ports.iter().cloned());
            }
            bins.push(Bin {
                kind: BinKind::Existing(i),
                zone,
                free: node.allocatable.saturating_sub(&used),
                host_ports,
                classes: Vec::new(),
                pods: Vec::new(),
                requests: Resources::ZERO,
            });
        }
        for group in &mut groups.groups {
            group.zone_counts.resize(zones.len(), 0);
            group.bin_counts = vec![0; bins.len()];
            for (b, node) in snapshot.nodes.iter().enumerate() {
                let n = node.pods.iter().filter(|p| group.counts(p)).count() as i64;
                if n > 0 {
                    group.bin_counts[b] += n;
                    group.total += n;
                    if bins[b].zone != NO_ZONE {
                        group.zone_counts[bins[b].zone as usize] += n;
                    }
                }
            }
        }
        let mut zone_cache: HashMap<*const CompatSet, Vec<ZoneId>> = HashMap::new();
        let eligible_zones = classes
            .iter()
            .map(|c| {
                let from_shapes = zone_cache
                    .entry(Rc::as_ptr(&c.compat))
                    .or_insert_with(|| {
                        let mut z: Vec<ZoneId> = c
                            .compat
                            .list
                            .iter()
                            .flat_map(|sc| {
                                sc.offerings
                                    .iter()
                                    .map(|&o| shapes[sc.shape as usize].offerings[o as usize].zone)
                            })
                            .collect();
                        z.sort_unstable();
                        z.dedup();
                        z
                    })
                    .clone();
                let mut z = from_shapes;
                z.extend(
                    c.existing
                        .iter()
                        .map(|&n| bins[n].zone)
                        .filter(|&z| z != NO_ZONE),
                );
                z.sort_unstable();
                z.dedup();
                z
            })
            .collect();
        let remaining = classes
            .iter()
            .map(|c| c.pods.iter().rev().copied().collect())
            .collect();
        let usage = snapshot
            .node_pools
            .iter()
            .map(|p| p.usage.clone())
            .collect();
        let mut weights: Vec<u32> = snapshot.node_pools.iter().map(|p| p.weight).collect();
        weights.sort_unstable_by(|a, b| b.cmp(a));
        weights.dedup();
        let tiers = weights
            .iter()
            .map(|w| {
                (0..snapshot.node_pools.len())
                    .filter(|&p| snapshot.node_pools[p].weight == *w)
                    .collect()
            })
            .collect();
        let memo = vec![None; classes.len()];
        Self {
            snapshot,
            shapes,
            pool_shapes,
            classes,
            groups,
            bins,
            remaining,
            eligible_zones,
            usage,
            unschedulable: Vec::new(),
            relaxed: Vec::new(),
            strategy,
            tiers,
            memo,
            order: Vec::new(),
            skip: Vec::new(),
        }
    }

    /// Dollars per hour of the new bins.
    pub fn new_cost(&self) -> f64 {
        self.bins
            .iter()
            .filter(|b| !b.pods.is_empty())
            .map(|b| match b.kind {
                BinKind::New { shape, offering } => self.shapes[shape].offerings[offering].price,
                BinKind::Existing(_) => 0.0,
            })
            .sum()
    }

    /// The order classes are placed in.
    fn order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.classes.len()).collect();
        match self.strategy {
            Strategy::CostOptimal => order.sort_by(|&a, &b| {
                let (ca, cb) = (&self.classes[a], &self.classes[b]);
                cb.requests
                    .has_accelerator()
                    .cmp(&ca.requests.has_accelerator())
                    .then(cb.value.total_cmp(&ca.value))
                    .then(cb.requests.cmp(&ca.requests))
                    .then(a.cmp(&b))
            }),
            Strategy::KarpenterGreedy => order.sort_by(|&a, &b| {
                let (ra, rb) = (&self.classes[a].requests, &self.classes[b].requests);
                rb.get(crate::resources::CPU)
                    .cmp(&ra.get(crate::resources::CPU))
                    .then(
                        rb.get(crate::resources::MEMORY)
                            .cmp(&ra.get(crate::resources::MEMORY)),
                    )
                    .then(a.cmp(&b))
            }),
        }
        order
    }

    /// Places every class; what cannot be placed lands in `unschedulable`.
    pub fn run(&mut self, static_reason: impl Fn(&Packer<'_>, usize) -> String) {
        let order = self.order();
        self.skip = (0..=order.len() as u32).collect();
        self.order = order.clone();
        for (position, &c) in order.iter().enumerate() {
            loop {
                let relaxed_before = self.classes[c].relaxed_rules.len();
                let block = self.place_class(c, position + 1);
                if self.remaining[c].is_empty() {
                    break;
                }
                if self.classes[c].relax_one() {
                    continue;
                }
                let reason = if !self.classes[c].fits_any && self.classes[c].existing.is_empty() {
                    static_reason(self, c)
                } else {
                    block.unwrap_or_else(|| "no node can hold it".to_owned())
                };
                let _ = relaxed_before;
                for pod in std::mem::take(&mut self.remaining[c]) {
                    self.unschedulable.push((pod, reason.clone()));
                }
                break;
            }
        }
    }

    /// Places as many pods of class `c` as possible (`later` is the position in the order of
    /// the classes after it); returns why the rest could not be placed.
    fn place_class(&mut self, c: usize, later: usize) -> Option<String> {
        // 1. Room already paid for: existing nodes, in-flight claims, nodes planned so far.
        for b in 0..self.bins.len() {
            if self.remaining[c].is_empty() {
                return None;
            }
            if !self.may_use_bin(c, b) {
                continue;
            }
            if let Ok(k) = self.room_on_bin(c, b) {
                self.place(c, b, k);
            }
        }
        // 2. New nodes. A node opened here that a zonal rule stopped short (its zone had reached
        // the skew allowed then) is offered the class again before the next one is opened: each
        // placement may raise the least-loaded zone's count and with it the allowance.
        let mut waiting: Vec<usize> = Vec::new();
        let mut window = Window::default();
        while !self.remaining[c].is_empty() {
            if self.strategy == Strategy::CostOptimal && self.refill(c, &mut waiting) {
                continue;
            }
            // Placing `c` changes no later class, so one window serves the choice and the fill.
            if self.strategy == Strategy::CostOptimal {
                self.window(later, &mut window);
            }
            match self.open_bin(c, &mut window) {
                Ok(b) => {
                    let k = self.room_on_bin(c, b).unwrap_or(0);
                    if k == 0 {
                        return Some("no node can hold it".to_owned());
                    }
                    self.place(c, b, k);
                    waiting.push(b);
                    if self.strategy == Strategy::CostOptimal {
                        self.fill(b, &window);
                    }
                }
                Err(reason) => return Some(reason),
            }
        }
        None
    }

    /// Offers class `c` the bins of `waiting` again; keeps only those a zonal rule still holds
    /// back (every other block lasts: room and per-node counts only fill up). True when a pod
    /// was placed.
    fn refill(&mut self, c: usize, waiting: &mut Vec<usize>) -> bool {
        let mut placed = false;
        let mut i = 0;
        while i < waiting.len() && !self.remaining[c].is_empty() {
            let b = waiting[i];
            match self.room_on_bin(c, b) {
                Ok(k) if k > 0 => {
                    self.place(c, b, k);
                    placed = true;
                    i += 1;
                }
                Ok(_) | Err(Block::Spread(Topology::Zone, _)) => i += 1,
                Err(_) => {
                    waiting.remove(i);
                }
            }
        }
        placed
    }

    /// Static eligibility of a bin for a class.
    fn may_use_bin(&self, c: usize, b: usize) -> bool {
        let class = &self.classes[c];
        match self.bins[b].kind {
            BinKind::Existing(n) => class.existing.contains(&n),
            BinKind::New { shape, offering } => class.allows(shape, offering),
        }
    }

    fn room_on_bin(&self, c: usize, b: usize) -> Result<i64, Block> {
        let bin = &self.bins[b];
        let k = room(
            &self.classes[c],
            c,
            &self.classes,
            &self.groups,
            &self.eligible_zones[c],
            Some((b, bin)),
            bin.zone,
            &bin.free,
            self.remaining[c].len() as i64,
        )?;
        // Pods already on an existing node may repel this class.
        if let BinKind::Existing(_) = bin.kind {
            let rep = self.classes[c].rep(self.snapshot);
            let placed_repels = bin.classes.iter().any(|&(o, _)| {
                repels(
                    self.classes[o as usize].rep(self.snapshot),
                    rep,
                    crate::pod::HOSTNAME,
                )
            });
            if placed_repels {
                return Err(Block::AntiAffinity(Topology::Hostname));
            }
        }
        Ok(k.min(self.remaining[c].len() as i64))
    }

    /// Puts `k` pods of class `c` on bin `b`.
    fn place(&mut self, c: usize, b: usize, k: i64) {
        let k = (k.max(0) as usize).min(self.remaining[c].len());
        if k == 0 {
            return;
        }
        let requests = self.classes[c].requests;
        let bin = &mut self.bins[b];
        for _ in 0..k {
            let pod = self.remaining[c].pop().expect("k is bounded by remaining");
            bin.pods.push(pod);
            bin.free -= requests;
            bin.requests += requests;
        }
        bin.host_ports
            .extend(self.classes[c].host_ports.iter().cloned());
        match bin.classes.iter_mut().find(|(cl, _)| *cl as usize == c) {
            Some((_, n)) => *n += k as u32,
            None => bin.classes.push((c as u32, k as u32)),
        }
        let zone = bin.zone;
        for &g in &self.classes[c].member_of {
            let group = &mut self.groups.groups[g];
            group.bin_counts[b] += k as i64;
            group.total += k as i64;
            if zone != NO_ZONE {
                group.zone_counts[zone as usize] += k as i64;
            }
        }
        if !self.classes[c].relaxed_rules.is_empty()
            || !self.classes[c].relaxed_preferences.is_empty()
        {
            let mut what: Vec<String> = self.classes[c]
                .relaxed_preferences
                .iter()
                .map(|w| format!("preferred node affinity (weight {w})"))
                .collect();
            what.extend(self.classes[c].relaxed_rules.iter().cloned());
            let what = what.join(", ");
            let placed = &self.bins[b].pods;
            for &pod in &placed[placed.len() - k..] {
                self.relaxed.push((pod, what.clone()));
            }
        }
    }

    /// Fills a freshly opened bin from the classes of `window`.
    fn fill(&mut self, b: usize, window: &Window) {
        for c2 in window.entries.iter().map(|e| e.class) {
            if self.may_use_bin(c2, b)
                && let Ok(k) = self.room_on_bin(c2, b)
            {
                self.place(c2, b, k);
            }
        }
    }

    /// What the improvement phase changes, to put back when its plan breaks a guard.
    pub fn save(&self) -> (Vec<Bin>, Vec<PoolUsage>, Groups) {
        (self.bins.clone(), self.usage.clone(), self.groups.clone())
    }

    /// Puts back what [`Self::save`] saved.
    pub fn restore(&mut self, saved: (Vec<Bin>, Vec<PoolUsage>, Groups)) {
        (self.bins, self.usage, self.groups) = saved;
    }
}
