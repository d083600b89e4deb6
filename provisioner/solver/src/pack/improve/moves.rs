//! The small moves: relocate one pod so its node shrinks, empty a lightly filled node.

use super::*;

impl Improver<'_, '_> {
    /// One relocate pass over every new bin; returns how many pods moved.
    pub(super) fn relocate_pass(&mut self) -> usize {
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
    pub(super) fn relocate(&mut self, pod: usize, c: usize, a: usize) -> bool {
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

    /// Tries to drop each lightly filled new bin by moving all its pods elsewhere.
    pub(super) fn empty_pass(&mut self) {
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

    pub(super) fn empty(&mut self, a: usize, pods: &[usize]) -> bool {
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
}
