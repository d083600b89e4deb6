//! Ruin and recreate: empty a chunk of nodes of their movable pods and put the pods back.

use super::*;

impl Improver<'_, '_> {
    /// Ruin and recreate over chunks of [`CHUNK`] new bins, zone by zone; returns how many
    /// chunks came out cheaper (and were kept).
    pub(super) fn recreate_sweep(&mut self, sweep: usize) -> usize {
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
            if self.open_new(b) {
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
    pub(super) fn recreate(&mut self, chunk: &[usize]) -> bool {
        let start = self.total;
        let before = self.usage_before();
        let mut log: Vec<Op> = Vec::new();
        let mut removed: Vec<(usize, usize, usize)> = Vec::new();
        // The ruin and the shrinking read no target: the chunk's bins are re-keyed once, after.
        self.defer_index();
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
            self.flush_index();
            return false;
        }
        for &a in chunk {
            if self.closed[a] {
                continue;
            }
            if !matches!(self.p.bins[a].kind, BinKind::New { .. }) {
                continue;
            }
            if self.p.bins[a].pods.is_empty() {
                self.close(a);
                log.push(Op::Closed { bin: a });
                continue;
            }
            self.resize_logged(a, &mut log);
        }
        self.flush_index();
        // Pods under a hostname rule first (as construction placed them before the pods their
        // rules count), then the most valuable first.
        // Pods are unique, so the order is total and an unstable sort gives the stable one.
        let classes = &self.p.classes;
        let ruled = |c: usize| {
            classes[c]
                .spreads
                .iter()
                .any(|r| r.active && r.topology == Topology::Hostname)
        };
        let mut keyed: Vec<(bool, f64, usize, usize, usize)> = removed
            .iter()
            .map(|&(pod, c, from)| (ruled(c), classes[c].value, c, pod, from))
            .collect();
        keyed.sort_unstable_by(|x, y| {
            y.0.cmp(&x.0)
                .then(y.1.total_cmp(&x.1))
                .then_with(|| classes[y.2].requests.cmp(&classes[x.2].requests))
                .then(x.3.cmp(&y.3))
        });
        removed.clear();
        removed.extend(keyed.iter().map(|&(_, _, c, pod, from)| (pod, c, from)));
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

    /// Re-sizes new bin `b` to the cheapest type that holds its pods, noting the change in `log`.
    pub(super) fn resize_logged(&mut self, b: usize, log: &mut Vec<Op>) {
        let BinKind::New { shape, offering } = self.p.bins[b].kind else {
            return;
        };
        let requests = self.p.bins[b].requests;
        if let Some((s2, o2, _)) = self.cheapest(b, &requests, None)
            && (s2, o2) != (shape, offering)
        {
            self.set_kind(b, s2, o2);
            log.push(Op::Resized {
                bin: b,
                shape,
                offering,
            });
        }
    }

    /// Undoes `log`, last change first.
    pub(super) fn undo(&mut self, log: Vec<Op>) {
        self.defer_index();
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
        self.flush_index();
    }
}
