//! The classes a new node is valued by and filled from when it is opened, and the most value
//! they could add to a node, which lets an opening skip the shapes that cannot win.

use std::rc::Rc;

use crate::resources::{CPU, MEMORY, Resources};

use super::Packer;
use crate::pack::bins::room;
use crate::pack::classes::{Class, CompatSet};
use crate::pack::shapes::ZoneId;

/// Room for any number of pods of any class: [`room`] then counts only what rules allow.
const UNBOUNDED: Resources = Resources([i64::MAX / 4; crate::resources::MAX_RESOURCES]);

/// How many following classes a new node is filled from when it is opened.
pub(super) const FILL_WINDOW: usize = 24;

/// One class of a [`Window`], with what valuing a node by it reads.
pub(super) struct Entry {
    /// The class.
    pub class: usize,
    /// Requests of one pod.
    pub requests: Resources,
    /// Value of one pod (at least 1e-9).
    pub value: f64,
    /// Pods left.
    pub remaining: i64,
    /// Index of the class's compatible shapes in [`Window::compats`]: classes with the same
    /// node terms share them, so one look at a shape's offerings serves them all.
    pub compat: usize,
    /// The class has no rule [`crate::pack::bins::room`] checks on a node not yet opened
    /// (no active spread, affinity or anti-affinity, no host port): room is its copies.
    pub plain: bool,
}

/// The first [`FILL_WINDOW`] classes after the one being placed that still have pods left.
#[derive(Default)]
pub(super) struct Window {
    /// In placement order.
    pub entries: Vec<Entry>,
    /// The distinct compatible-shape sets of the entries.
    pub compats: Vec<Rc<CompatSet>>,
    /// The zones whose caps an opening's choice has worked out, in `caps` order.
    cap_zones: Vec<ZoneId>,
    /// Per zone of `cap_zones`, per entry: the most pods of the entry a new node in the zone
    /// may take by its rules and the pods left, or `None` when a rule keeps the entry out of
    /// the zone. Rules on a node not yet opened read only the zone and counts that do not
    /// change while an opening is chosen, so one answer serves every shape in the zone.
    pub caps: Vec<Option<i64>>,
}

impl Window {
    fn push(&mut self, class: usize, c: &Class, remaining: usize) {
        let compat = match self.compats.iter().position(|s| Rc::ptr_eq(s, &c.compat)) {
            Some(i) => i,
            None => {
                self.compats.push(c.compat.clone());
                self.compats.len() - 1
            }
        };
        let plain = c.host_ports.is_empty()
            && !c.spreads.iter().any(|r| r.active)
            && !c.affinity.iter().any(|r| r.active)
            && !c.anti_affinity.iter().any(|r| r.active);
        self.entries.push(Entry {
            class,
            requests: c.requests,
            value: c.value.max(1e-9),
            remaining: remaining as i64,
            compat,
            plain,
        });
    }

    /// Whether each compatible-shape set allows `offering` of `shape`, by index.
    pub fn allowed(&self, shape: usize, offering: usize, into: &mut Vec<bool>) {
        into.clear();
        into.extend(self.compats.iter().map(|set| {
            set.by_shape
                .get(shape)
                .is_some_and(|&i| i != u32::MAX && set.list[i as usize].allows(offering))
        }));
    }
}

/// The most value the classes of a window could add to a node with some CPU and memory
/// free: for each of the two, the fractional knapsack of the pods left (densest first), which
/// no packing of whole pods under any rule exceeds.
pub(super) struct WindowBound {
    cpu: Knapsack,
    memory: Knapsack,
}

impl WindowBound {
    /// The bound of `window`.
    pub fn of(window: &Window) -> Self {
        Self {
            cpu: Knapsack::of(window, CPU),
            memory: Knapsack::of(window, MEMORY),
        }
    }

    /// The most value the window adds to a node with `free` room.
    pub fn most(&self, free: &Resources) -> f64 {
        self.cpu
            .most(free.get(CPU))
            .min(self.memory.most(free.get(MEMORY)))
    }
}

/// A fractional knapsack over one resource.
struct Knapsack {
    /// Value of the pods that ask for none of the resource.
    weightless: f64,
    /// Per item, densest first: (amount of all its pods, their value, value per unit).
    items: Vec<(f64, f64, f64)>,
}

impl Knapsack {
    fn of(window: &Window, slot: usize) -> Self {
        let mut weightless = 0.0;
        let mut items = Vec::with_capacity(window.entries.len());
        for e in &window.entries {
            let value = e.remaining as f64 * e.value;
            let amount = e.requests.get(slot);
            if amount <= 0 {
                weightless += value;
            } else {
                let total = e.remaining as f64 * amount as f64;
                items.push((total, value, value / total));
            }
        }
        items.sort_by(|a, b| b.2.total_cmp(&a.2));
        Self { weightless, items }
    }

    fn most(&self, free: i64) -> f64 {
        let mut left = free.max(0) as f64;
        let mut value = self.weightless;
        for &(amount, item_value, density) in &self.items {
            if amount <= left {
                left -= amount;
                value += item_value;
            } else {
                value += left * density;
                break;
            }
        }
        value
    }
}

impl Packer<'_> {
    /// The window from position `from` of the order on, into `window`.
    pub(super) fn window(&mut self, from: usize, window: &mut Window) {
        window.entries.clear();
        window.compats.clear();
        window.caps.clear();
        window.cap_zones.clear();
        let end = self.order.len();
        let mut i = from;
        while i < end && window.entries.len() < FILL_WINDOW {
            i = self.next_live(i);
            if i < end {
                let c = self.order[i];
                window.push(c, &self.classes[c], self.remaining[c].len());
                i += 1;
            }
        }
    }

    /// Where `window.caps` holds the caps of `zone` (see there), working them out the first
    /// time: [`room`] on a node not yet opened with room for any number of pods.
    pub(super) fn zone_caps(&self, window: &mut Window, zone: ZoneId) -> usize {
        let n = window.entries.len();
        if let Some(k) = window.cap_zones.iter().position(|&z| z == zone) {
            return k * n;
        }
        let start = window.caps.len();
        for e in &window.entries {
            let cap = if e.plain {
                Some(e.remaining)
            } else {
                let c = e.class;
                room(
                    &self.classes[c],
                    c,
                    &self.classes,
                    &self.groups,
                    &self.eligible_zones[c],
                    None,
                    zone,
                    &UNBOUNDED,
                    e.remaining,
                )
                .ok()
            };
            window.caps.push(cap);
        }
        window.cap_zones.push(zone);
        start
    }

    /// The first position at or after `i` whose class has pods left (`order.len()` if none);
    /// passed-over positions point past themselves from then on (path halving). A class's pods
    /// only ever leave, so a position once passed over stays passed over.
    fn next_live(&mut self, mut i: usize) -> usize {
        let end = self.order.len();
        while i < end {
            let next = self.skip[i] as usize;
            if next != i {
                self.skip[i] = self.skip[next];
                i = next;
            } else if self.remaining[self.order[i]].is_empty() {
                self.skip[i] = i as u32 + 1;
                i += 1;
            } else {
                break;
            }
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::resources::PODS;

    fn entry(cpu: i64, memory: i64, value: f64, remaining: i64) -> Entry {
        let mut requests = Resources::ZERO;
        requests.set(CPU, cpu);
        requests.set(MEMORY, memory);
        requests.set(PODS, 1);
        Entry {
            class: 0,
            requests,
            value,
            remaining,
            compat: 0,
            plain: true,
        }
    }

    /// What a node with `free` room takes from the entries `allowed` lets in, in order, as
    /// many pods of each as fit: the fill an opening values.
    fn greedy(window: &Window, allowed: &[bool], mut free: Resources) -> f64 {
        let mut value = 0.0;
        for (e, &ok) in window.entries.iter().zip(allowed) {
            if !ok {
                continue;
            }
            let k = free.copies_of(&e.requests, e.remaining);
            for (slot, amount) in e.requests.0.iter().enumerate() {
                free.0[slot] -= amount * k;
            }
            value += k as f64 * e.value;
        }
        value
    }

    #[test]
    fn the_bound_is_the_densest_pods_first() {
        let window = Window {
            // 2 CPU for 3.0 (1.5 per CPU, 0.75 per GiB), 1 CPU for 1.0 (1.0 per CPU, 0.25 per GiB).
            entries: vec![entry(2000, 4 << 30, 3.0, 2), entry(1000, 4 << 30, 1.0, 4)],
            ..Window::default()
        };
        let bound = WindowBound::of(&window);
        let mut free = Resources::ZERO;
        free.set(CPU, 5000);
        free.set(MEMORY, 64 << 30);
        // CPU: both 2-CPU pods (6.0), then 1 CPU of the others (1.0); memory allows all (10.0).
        assert!((bound.most(&free) - 7.0).abs() < 1e-9);
        free.set(MEMORY, 6 << 30);
        // Memory: 6 GiB of the denser pods (0.75 per GiB).
        assert!((bound.most(&free) - 4.5).abs() < 1e-9);
        free.set(CPU, 0);
        assert_eq!(bound.most(&free), 0.0);
    }

    proptest! {
        /// The bound holds over any fill an opening can make: whatever the order, the rules
        /// that keep a class out and the room.
        #[test]
        fn no_fill_exceeds_the_bound(
            pods in prop::collection::vec((0i64..4_000, 0i64..16, 0.01f64..5.0, 1i64..8, any::<bool>()), 1..24),
            cpu in 0i64..64_000,
            memory in 0i64..256,
        ) {
            let window = Window {
                entries: pods
                    .iter()
                    .map(|&(cpu, gib, value, remaining, _)| entry(cpu, gib << 30, value, remaining))
                    .collect(),
                ..Window::default()
            };
            let allowed: Vec<bool> = pods.iter().map(|p| p.4).collect();
            let mut free = Resources::ZERO;
            free.set(CPU, cpu);
            free.set(MEMORY, memory << 30);
            free.set(PODS, 110);
            let most = WindowBound::of(&window).most(&free);
            let fill = greedy(&window, &allowed, free);
            prop_assert!(fill <= most * (1.0 + 1e-12) + 1e-12, "fill {fill} > bound {most}");
        }
    }
}
