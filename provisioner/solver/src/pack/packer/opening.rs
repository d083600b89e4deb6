//! Opening a new bin for a class: every shape of the pools in weight order, its cheapest offering
//! with room, scored by cost efficiency with the pods it would be filled with (the baseline by
//! size); the best that passes the pool's limits and the guards is opened.

use crate::Strategy;
use crate::pack::bins::{Bin, BinKind, Block, room};
use crate::pack::classes::Topology;
use crate::resources::Resources;

use super::Packer;
use super::window::{Window, WindowBound};

/// One way to open a bin for a class.
#[derive(Debug, Clone, Copy)]
struct Candidate {
    shape: usize,
    offering: usize,
    score: f64,
    price: f64,
    saturated: bool,
    /// What the node would hold: the anchor's pods and the fill.
    requests: Resources,
}

/// How far below the best score an option's most must be to be left unevaluated: far above
/// both float rounding and the 1e-12 within which [`Packer::choose`] counts scores as equal.
const PRUNE_MARGIN: f64 = 1e-9;

/// Whether [`Packer::choose`] found a candidate to open.
enum Choice {
    /// This one passes the guards.
    Open(Candidate),
    /// There is none (left).
    None,
    /// The best was ruled out by a guard and the choice was asked to stop there.
    Guarded,
}

/// `k` times `r`.
fn scaled(r: &Resources, k: i64) -> Resources {
    let mut out = Resources::ZERO;
    for (slot, amount) in r.0.iter().enumerate() {
        out.0[slot] = amount.saturating_mul(k);
    }
    out
}

impl Packer<'_> {
    /// Picks the offering of `shape` for class `c`: the cheapest zone whose topology allows the
    /// class, preferring the least loaded zone for zonal spreads.
    fn pick_offering(&self, c: usize, shape: usize) -> Result<(usize, i64), Block> {
        let class = &self.classes[c];
        let Some(compat) = class.compat_for(shape) else {
            return Err(Block::Resources);
        };
        let alloc = self.shapes[shape].allocatable;
        let spread_group = class
            .spreads
            .iter()
            .find(|r| r.active && r.topology == Topology::Zone)
            .map(|r| r.group);
        let mut best: Option<(usize, i64, i64)> = None;
        let mut last_block = Block::Resources;
        for &o in &compat.offerings {
            let zone = self.shapes[shape].offerings[o as usize].zone;
            match room(
                class,
                c,
                &self.classes,
                &self.groups,
                &self.eligible_zones[c],
                None,
                zone,
                &alloc,
                self.remaining[c].len() as i64,
            ) {
                Ok(k) if k > 0 => {
                    let load = spread_group.map_or(0, |g| self.groups.groups[g].in_zone(zone));
                    if best.is_none_or(|(_, _, l)| load < l) {
                        best = Some((o as usize, k, load));
                    }
                    if spread_group.is_none() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(block) => last_block = block,
            }
        }
        best.map(|(o, k, _)| (o, k)).ok_or(last_block)
    }

    /// Value per dollar of opening `shape`/`offering` for class `c`, filling it from `window`
    /// (empty for the greedy baseline). `allowed` is a buffer.
    fn evaluate(
        &self,
        c: usize,
        (shape, offering, anchor_room): (usize, usize, i64),
        window: &mut Window,
        allowed: &mut Vec<bool>,
    ) -> Candidate {
        let s = &self.shapes[shape];
        let price = s.offerings[offering].price;
        let zone = s.offerings[offering].zone;
        let anchor = &self.classes[c];
        let rem = self.remaining[c].len() as i64;
        let k = anchor_room.min(rem);
        let mut saturated = k < rem;
        let mut requests = scaled(&anchor.requests, k);
        if self.strategy == Strategy::KarpenterGreedy {
            let cpu = s.allocatable.get(crate::resources::CPU) as f64;
            return Candidate {
                shape,
                offering,
                score: k as f64 * 1e6 + cpu / 1e6 - price / 1e12,
                price,
                saturated,
                requests,
            };
        }
        let mut free = s.allocatable;
        for (slot, amount) in anchor.requests.0.iter().enumerate() {
            free.0[slot] -= amount * k;
        }
        let mut value = k as f64 * anchor.value.max(1e-9);
        window.allowed(shape, offering, allowed);
        let caps = self.zone_caps(window, zone);
        for (i, e) in window.entries.iter().enumerate() {
            if !allowed[e.compat] {
                continue;
            }
            // What the rules allow in the zone (see `Window::caps`), then what fits.
            let Some(cap) = window.caps[caps + i] else {
                continue;
            };
            let k2 = free.copies_of(&e.requests, cap);
            if k2 == 0 {
                continue;
            }
            saturated &= k2 < e.remaining;
            for (slot, amount) in e.requests.0.iter().enumerate() {
                free.0[slot] -= amount * k2;
                requests.0[slot] += amount * k2;
            }
            value += k2 as f64 * e.value;
        }
        Candidate {
            shape,
            offering,
            score: value / price,
            price,
            saturated,
            requests,
        }
    }

    /// Opens the best new bin for class `c`, or says why none can be opened.
    pub(super) fn open_bin(&mut self, c: usize, window: &mut Window) -> Result<usize, String> {
        let mut last_reason: Option<String> = None;
        // A remembered choice stays best while the last evaluation was not limited by how many
        // pods were left (the same fill would come out again), unless a zonal spread rule
        // applies: each placement moves what each zone allows, so the choice is made afresh (a
        // zone only an expensive type serves is taken when it must be, not every time after).
        let zonal = self.classes[c]
            .spreads
            .iter()
            .any(|r| r.active && r.topology == Topology::Zone);
        if !zonal
            && let Some((shape, _)) = self.memo[c]
            && let Ok((offering, k)) = self.pick_offering(c, shape)
            && self
                .within_limits(
                    self.shapes[shape].pool,
                    &self.shapes[shape],
                    self.shapes[shape].offerings[offering].list_price,
                )
                .is_ok()
            && (k as usize) < self.remaining[c].len()
            && self
                .guards(
                    c,
                    shape,
                    offering,
                    &scaled(
                        &self.classes[c].requests,
                        k.min(self.remaining[c].len() as i64),
                    ),
                )
                .is_ok()
        {
            return Ok(self.open(c, shape, offering));
        }
        self.memo[c] = None;
        let mut guard_reason: Option<String> = None;
        let bound = (self.strategy == Strategy::CostOptimal).then(|| WindowBound::of(window));
        let mut allowed = Vec::new();
        for tier in 0..self.tiers.len() {
            let mut options: Vec<(usize, usize, i64)> = Vec::new();
            let compat_len = self.classes[c].compat.list.len();
            for i in 0..compat_len {
                let shape = self.classes[c].compat.list[i].shape as usize;
                let pool = self.shapes[shape].pool;
                if !self.tiers[tier].contains(&pool) {
                    continue;
                }
                let (offering, k) = match self.pick_offering(c, shape) {
                    Ok(x) => x,
                    Err(block) => {
                        last_reason.get_or_insert_with(|| block.describe());
                        continue;
                    }
                };
                let price = self.shapes[shape].offerings[offering].list_price;
                if let Err(reason) = self.within_limits(pool, &self.shapes[shape], price) {
                    if last_reason
                        .as_ref()
                        .is_none_or(|r| !r.starts_with("NodePool"))
                    {
                        last_reason = Some(reason);
                    }
                    continue;
                }
                options.push((shape, offering, k));
            }
            // First with the options that cannot beat the best left unevaluated; when a guard
            // rules out the best, again with every option, so the next best is the true one.
            let pruned = bound
                .as_ref()
                .map(|b| self.evaluate_pruned(c, &options, window, b, &mut allowed));
            if let Some(candidates) = pruned {
                match self.choose(c, candidates, &mut guard_reason, true) {
                    Choice::Open(best) => return Ok(self.open_candidate(c, &best)),
                    Choice::None => continue,
                    Choice::Guarded => {}
                }
            }
            let candidates = options
                .iter()
                .map(|&option| self.evaluate(c, option, window, &mut allowed))
                .collect();
            if let Choice::Open(best) = self.choose(c, candidates, &mut guard_reason, false) {
                return Ok(self.open_candidate(c, &best));
            }
        }
        // A guard ruled out an offering that could otherwise hold the pods: the best one's
        // reason says most.
        Err(guard_reason
            .or(last_reason)
            .unwrap_or_else(|| "no NodePool can launch a node for it".to_owned()))
    }

    /// Opens `best` for class `c`, remembering it while the fill was not cut short by the
    /// pods left.
    fn open_candidate(&mut self, c: usize, best: &Candidate) -> usize {
        if best.saturated {
            self.memo[c] = Some((best.shape, best.offering));
        }
        self.open(c, best.shape, best.offering)
    }

    /// The best candidate that passes the pool's guards (maxGpuOvershoot, minValues), checked
    /// lazily: they look at the pool's other offerings. Best is the highest score, the cheaper
    /// among equal scores, the earlier among equal prices. With `first_only`, a best that a
    /// guard rules out ends the choice ([`Choice::Guarded`]).
    fn choose(
        &self,
        c: usize,
        mut candidates: Vec<Candidate>,
        guard_reason: &mut Option<String>,
        first_only: bool,
    ) -> Choice {
        loop {
            let mut best: Option<usize> = None;
            for (i, candidate) in candidates.iter().enumerate() {
                let better = match best {
                    None => true,
                    Some(b) => {
                        let b = &candidates[b];
                        candidate.score > b.score * (1.0 + 1e-12)
                            || (candidate.score >= b.score * (1.0 - 1e-12)
                                && candidate.price < b.price)
                    }
                };
                if better {
                    best = Some(i);
                }
            }
            let Some(i) = best else {
                return Choice::None;
            };
            let best = candidates.swap_remove(i);
            match self.guards(c, best.shape, best.offering, &best.requests) {
                Ok(()) => return Choice::Open(best),
                Err(reason) => {
                    guard_reason.get_or_insert(reason);
                    if first_only {
                        return Choice::Guarded;
                    }
                }
            }
        }
    }

    /// [`Self::evaluate`] for the options (shape, offering, room for the anchor) in the order
    /// of the most each could score, stopping at the first whose most is below the best score
    /// found: every option left out scores less than the one [`Self::choose`] picks, so the
    /// pick is the one over every option. The candidates come back in the options' order.
    fn evaluate_pruned(
        &self,
        c: usize,
        options: &[(usize, usize, i64)],
        window: &mut Window,
        bound: &WindowBound,
        allowed: &mut Vec<bool>,
    ) -> Vec<Candidate> {
        let anchor = &self.classes[c];
        let rem = self.remaining[c].len() as i64;
        let mut most: Vec<(f64, usize)> = options
            .iter()
            .enumerate()
            .map(|(i, &(shape, offering, room))| {
                let s = &self.shapes[shape];
                let k = room.min(rem);
                let free = s.allocatable.saturating_sub(&scaled(&anchor.requests, k));
                let value = k as f64 * anchor.value.max(1e-9) + bound.most(&free);
                (value / s.offerings[offering].price, i)
            })
            .collect();
        most.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut best = f64::NEG_INFINITY;
        let mut kept: Vec<(usize, Candidate)> = Vec::new();
        for &(most, i) in &most {
            if most < best * (1.0 - PRUNE_MARGIN) {
                break;
            }
            let candidate = self.evaluate(c, options[i], window, allowed);
            best = best.max(candidate.score);
            kept.push((i, candidate));
        }
        kept.sort_unstable_by_key(|&(i, _)| i);
        kept.into_iter().map(|(_, candidate)| candidate).collect()
    }

    fn open(&mut self, _c: usize, shape: usize, offering: usize) -> usize {
        let s = &self.shapes[shape];
        let price = s.offerings[offering].list_price;
        let usage = &mut self.usage[s.pool];
        usage.resources += s.capacity;
        usage.nodes += 1;
        usage.hourly_cost += price;
        self.bins.push(Bin {
            kind: BinKind::New { shape, offering },
            zone: s.offerings[offering].zone,
            free: s.allocatable,
            host_ports: Vec::new(),
            classes: Vec::new(),
            pods: Vec::new(),
            requests: Resources::ZERO,
        });
        for group in &mut self.groups.groups {
            group.bin_counts.push(0);
        }
        self.bins.len() - 1
    }
}
