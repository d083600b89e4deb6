//! The rebalance move: a node full in memory with CPU to spare trades pods with a node full in
//! CPU with memory to spare, so that both shrink.
//!
//! Construction fills nodes in the order pods come, and a large node can end up holding only
//! memory-heavy pods while another holds only CPU-heavy ones: each pays for a resource it does
//! not use. Ruin-and-recreate works within chunks of neighbours and relocate needs a pod's
//! whole request free elsewhere, so neither mends it. Here the two nodes exchange pods of twin
//! classes (same groups and rules, so every count on every node and zone stays as it was and
//! each pod meets the rules the other met), the memory-heaviest of one for the CPU-heaviest of
//! the other, while both keep their types; then both are re-sized, and the trade is kept when
//! the pair costs less.

use super::*;

impl Improver<'_, '_> {
    /// One rebalance pass over at most `pairs` pairs; returns how many came out cheaper (and
    /// were kept).
    pub(super) fn rebalance_pass(&mut self, pairs: usize) -> usize {
        let mut tilted: Vec<(f64, usize)> = (0..self.p.bins.len())
            .filter(|&b| self.open_new(b))
            .map(|b| (self.tilt(&self.p.bins[b].free, b) * self.price(b), b))
            .collect();
        self.work += tilted.len() as u64;
        tilted.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
        let mut kept = 0;
        for k in 0..pairs.min(tilted.len() / 2) {
            let (cpu_bound_tilt, cpu_bound) = tilted[k];
            let (memory_bound_tilt, memory_bound) = tilted[tilted.len() - 1 - k];
            if cpu_bound_tilt >= 0.0 || memory_bound_tilt <= 0.0 || self.out_of_work() {
                break;
            }
            if self.rebalance(memory_bound, cpu_bound) {
                kept += 1;
            }
        }
        // Then the nodes where memory binds most trade with many partners each (one partner
        // rarely takes enough to let a large node drop a size), and those partners may grow:
        // a node that takes a memory-heavy pod for a CPU-heavy one may need a larger type, kept
        // when all of them cost less together. (Construction and the grow-least fallbacks
        // leave large nodes full of memory with CPU to spare, not the other way round.)
        let cpu_side: Vec<usize> = tilted
            .iter()
            .take_while(|t| t.0 < 0.0)
            .take(REBALANCE_PARTNERS)
            .map(|t| t.1)
            .collect();
        for &(memory_tilt, m) in tilted.iter().rev().take(REBALANCE_CENTERS) {
            if memory_tilt <= 0.0 || self.out_of_work() {
                break;
            }
            if self.open_new(m) && self.rebalance_many(m, &cpu_side) {
                kept += 1;
            }
        }
        kept
    }

    /// How much more room new bin `b` would have on the largest shape of its pool.
    fn room_to_grow(&self, b: usize) -> Resources {
        let BinKind::New { shape, .. } = self.p.bins[b].kind else {
            return Resources::ZERO;
        };
        let pool = self.p.shapes[shape].pool;
        let largest = self.room_so_far[pool]
            .last()
            .copied()
            .unwrap_or(Resources::ZERO);
        let mut room = Resources::ZERO;
        for slot in 0..room.0.len() {
            room.0[slot] = (largest.get(slot) - self.p.shapes[shape].allocatable.get(slot)).max(0);
        }
        room
    }

    /// How much more of its CPU than of its memory bin `b` would leave free with `free` room:
    /// positive when memory binds, negative when CPU does.
    fn tilt(&self, free: &Resources, b: usize) -> f64 {
        tilt_of(free, &(self.p.bins[b].free + self.p.bins[b].requests))
    }

    /// Trades twin pods between `a` (memory binds) and `b` (CPU binds) as [`Self::trade`] does;
    /// re-sizes both and keeps the trade when the pair costs less.
    fn rebalance(&mut self, a: usize, b: usize) -> bool {
        let usage = self.usage_before();
        let before = self.price(a) + self.price(b);
        let mut log: Vec<Op> = Vec::new();
        self.defer_index();
        self.trade(a, b, false, &mut log);
        if log.is_empty() {
            self.flush_index();
            return false;
        }
        self.resize_logged(a, &mut log);
        self.resize_logged(b, &mut log);
        self.flush_index();
        // A re-size picks the cheapest type that holds the pods, which may be larger in some
        // resource (a cheaper spot type with more CPU): the pool limits are checked as after
        // every other move.
        if self.price(a) + self.price(b) < before - EPS && !self.passes_limits(&usage) {
            return true;
        }
        self.undo(log);
        false
    }

    /// Trades twin pods between `a` (memory binds) and `b` (CPU binds), memory-heaviest of `a`
    /// for CPU-heaviest of `b`, while both keep their types and their tilts keep their signs
    /// (with `grow_b`, `b` may instead outgrow its type up to its pool's largest room, for the
    /// caller to re-size); logs the moves in `log` (the caller re-sizes, decides and re-keys).
    fn trade(&mut self, a: usize, b: usize, grow_b: bool, log: &mut Vec<Op>) {
        let capacity = self.p.bins[a].free + self.p.bins[a].requests;
        let (cpu, memory) = (
            capacity.get(CPU).max(1) as f64,
            capacity.get(MEMORY).max(1) as f64,
        );
        // (twin, memory-heaviness, pod, class): how much more of `a`'s memory than of its CPU
        // the pod takes.
        let side = |this: &Self, bin: usize| -> Vec<(u32, f64, usize, usize)> {
            this.p.bins[bin]
                .pods
                .iter()
                .filter_map(|&pod| {
                    let c = this.pod_class[pod] as usize;
                    this.movable[c].then(|| {
                        let r = &this.p.classes[c].requests;
                        let heavy = r.get(MEMORY) as f64 / memory - r.get(CPU) as f64 / cpu;
                        (this.twin[c], heavy, pod, c)
                    })
                })
                .collect()
        };
        let mut give = side(self, a);
        let mut take = side(self, b);
        self.work += (give.len() + take.len()) as u64;
        // Per twin set: `a` gives its memory-heaviest first, `b` its CPU-heaviest first.
        give.sort_by(|x, y| x.0.cmp(&y.0).then(y.1.total_cmp(&x.1)).then(x.2.cmp(&y.2)));
        take.sort_by(|x, y| x.0.cmp(&y.0).then(x.1.total_cmp(&y.1)).then(x.2.cmp(&y.2)));
        let (mut i, mut j) = (0, 0);
        while i < give.len() && j < take.len() {
            let (tp, hp, p, c) = give[i];
            let (tq, hq, q, d) = take[j];
            if tp != tq {
                if tp < tq {
                    i += 1;
                } else {
                    j += 1;
                }
                continue;
            }
            // Trading a pod for one no lighter in memory gains nothing; the rest of this twin
            // set is lighter still on `a`'s side.
            if hp <= hq {
                while i < give.len() && give[i].0 == tp {
                    i += 1;
                }
                continue;
            }
            let (rp, rq) = (self.p.classes[c].requests, self.p.classes[d].requests);
            let free_a = self.p.bins[a].free + rp - rq;
            let free_b = self.p.bins[b].free + rq - rp;
            let b_ok = if grow_b {
                Resources::ZERO.fits_in(&(free_b + self.room_to_grow(b)))
            } else {
                Resources::ZERO.fits_in(&free_b) && self.tilt(&free_b, b) <= 0.0
            };
            let fits = Resources::ZERO.fits_in(&free_a) && b_ok;
            if !fits
                || self.tilt(&free_a, a) < 0.0
                || !self.allowed_on(c, b)
                || !self.allowed_on(d, a)
            {
                // A lighter pod of `a`'s may still fit.
                i += 1;
                continue;
            }
            self.unplace(p, c, a);
            self.unplace(q, d, b);
            self.place(p, c, b);
            self.place(q, d, a);
            log.extend([
                Op::Unplaced {
                    pod: p,
                    class: c,
                    bin: a,
                },
                Op::Unplaced {
                    pod: q,
                    class: d,
                    bin: b,
                },
                Op::Placed {
                    pod: p,
                    class: c,
                    bin: b,
                },
                Op::Placed {
                    pod: q,
                    class: d,
                    bin: a,
                },
            ]);
            i += 1;
            j += 1;
        }
    }

    /// Memory-bound `center` trades twin pods with each of `partners` in turn as
    /// [`Self::trade`] does, the partners allowed to outgrow their types; then every node that
    /// traded is re-sized, and the trades are kept when those nodes fit and cost less together.
    fn rebalance_many(&mut self, center: usize, partners: &[usize]) -> bool {
        let usage = self.usage_before();
        let mut touched = vec![center];
        let mut log: Vec<Op> = Vec::new();
        self.defer_index();
        for &p in partners {
            if p == center || !self.open_new(p) {
                continue;
            }
            let len = log.len();
            self.trade(center, p, true, &mut log);
            if log.len() > len {
                touched.push(p);
            }
        }
        if touched.len() == 1 {
            self.flush_index();
            return false;
        }
        // Trades change no type, so these are the prices before them.
        let before: f64 = touched.iter().map(|&b| self.price(b)).sum();
        for &b in &touched {
            self.resize_logged(b, &mut log);
        }
        self.flush_index();
        let after: f64 = touched.iter().map(|&b| self.price(b)).sum();
        let fit = touched
            .iter()
            .all(|&b| Resources::ZERO.fits_in(&self.p.bins[b].free));
        if fit && after < before - EPS && !self.passes_limits(&usage) {
            return true;
        }
        self.undo(log);
        false
    }
}
