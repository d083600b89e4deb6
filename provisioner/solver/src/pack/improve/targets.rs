//! Where a pod may go: room already paid for (best fit in the tighter resource), a node that
//! grows least, or, as the last resort of recreate, its own node back.

use super::*;

impl Improver<'_, '_> {
    /// Zone slots a pod of class `c` now on bin `from` may move to.
    pub(super) fn slots(&self, c: usize, from: usize) -> std::ops::Range<usize> {
        if self.cross_zone[c] {
            0..self.index.len()
        } else {
            let slot = self.zone_slot(from);
            slot..slot + 1
        }
    }

    /// The open bin (not `from` when `exclude`) with the least free CPU that holds a pod of
    /// class `c` as it is, at no added cost; `from` also names the pod's zone.
    pub(super) fn free_target(&mut self, c: usize, from: usize, exclude: bool) -> Option<usize> {
        debug_assert!(
            !self.deferring,
            "targets read from an index with stale keys"
        );
        let requests = self.p.classes[c].requests;
        let need = requests.get(CPU);
        // Candidates that hold the pod, by the larger share of its capacity a bin would leave
        // unused in CPU or memory afterwards (best fit in the worse dimension, so that what
        // is left stays usable by the pods to come).
        // A buffer kept between calls (this runs once per pod moved).
        let mut fitting = std::mem::take(&mut self.fitting);
        fitting.clear();
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
        // Best fit first, ties on the bin: the first candidate usually takes the pod, so the
        // next best is looked for only when one does not (no sort of them all).
        let mut found = None;
        while let Some(i) = (0..fitting.len()).min_by(|&i, &j| {
            let (a, b) = (fitting[i], fitting[j]);
            a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
        }) {
            let (_, b) = fitting.swap_remove(i);
            if !self.allowed_on(c, b) {
                continue;
            }
            let room_left = self.p.bins[b].free;
            if self.rules_allow(c, b, &room_left) {
                found = Some(b);
                break;
            }
        }
        self.fitting = fitting;
        found
    }

    /// The new bin (not `from` when `exclude`) that grows least to take a pod of class `c`,
    /// when growing costs less than `max_cost`: (bin, shape, offering, added cost).
    pub(super) fn grow_target(
        &mut self,
        c: usize,
        from: usize,
        exclude: bool,
        max_cost: f64,
    ) -> Option<(usize, usize, usize, f64)> {
        debug_assert!(
            !self.deferring,
            "targets read from an index with stale keys"
        );
        let requests = self.p.classes[c].requests;
        let mut best: Option<(usize, usize, usize, f64)> = None;
        for slot in self.slots(c, from) {
            let mut candidates = [0u32; GROW_CANDIDATES];
            let mut n = 0;
            for &(_, b) in self.index[slot].iter().rev().take(GROW_CANDIDATES) {
                candidates[n] = b;
                n += 1;
            }
            for &b in &candidates[..n] {
                let b = b as usize;
                if (exclude && b == from) || !matches!(self.p.bins[b].kind, BinKind::New { .. }) {
                    continue;
                }
                let grown = self.p.bins[b].requests + requests;
                let Some((s2, o2, price)) = self.cheapest(b, &grown, Some(c)) else {
                    continue;
                };
                let added = price - self.price(b);
                // Among bins that grow by the same cost, the one left least lopsided: growing
                // the node with the most CPU free for a memory-heavy pod would otherwise pile
                // memory onto a node whose CPU then sits idle (and the next such pod too).
                let better = match best {
                    None => added < max_cost - EPS,
                    Some((bb, bs, bo, a)) => {
                        added < a.min(max_cost) - EPS
                            || ((added - a).abs() <= EPS
                                && added < max_cost - EPS
                                && self.grown_waste(b, s2, o2, &requests)
                                    < self.grown_waste(bb, bs, bo, &requests) - EPS)
                    }
                };
                if !better {
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

    /// Dollars per hour of bin `b` grown to `(shape, offering)` with `requests` more, times how
    /// unevenly it then leaves its CPU and memory free.
    fn grown_waste(&self, b: usize, shape: usize, offering: usize, requests: &Resources) -> f64 {
        let sh = &self.p.shapes[shape];
        let free = sh.allocatable - (self.p.bins[b].requests + *requests);
        tilt_of(&free, &sh.allocatable).abs() * sh.offerings[offering].price
    }

    /// The last resort of recreate: the pod's own bin, or else another bin of the chunk in the
    /// same zone and pool, reopened if it was dropped and grown to hold the pod.
    pub(super) fn back_home(
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
