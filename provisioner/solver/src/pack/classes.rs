//! Pod classes: pods with identical requests and constraints are placed in bulk.
//!
//! A class carries everything the packer asks about its pods: which shapes and offerings may
//! host them, which existing nodes may, what one pod is "worth" (its cheapest standalone cost
//! share), and its topology rules resolved to shared counting groups.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::rc::Rc;

use quartermaster_policies::Requirements;

use crate::pod::{
    HOSTNAME, HostPort, Pod, PodAffinityTerm, WhenUnsatisfiable, ZONE, tolerates_all,
};
use crate::resources::{CPU, Resources};
use crate::snapshot::ClusterSnapshot;

use super::shapes::{Shape, ZoneId};

/// The topology a rule counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Topology {
    /// One domain per node.
    Hostname,
    /// One domain per zone.
    Zone,
}

impl Topology {
    fn from_key(key: &str) -> Option<Self> {
        match key {
            HOSTNAME => Some(Self::Hostname),
            ZONE | "failure-domain.beta.kubernetes.io/zone" => Some(Self::Zone),
            _ => None,
        }
    }

    /// The label key, for messages.
    pub fn key(self) -> &'static str {
        match self {
            Self::Hostname => HOSTNAME,
            Self::Zone => ZONE,
        }
    }
}

/// A topology spread constraint of a class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpreadRule {
    /// Counting group.
    pub group: usize,
    /// Hostname or zone.
    pub topology: Topology,
    /// maxSkew.
    pub max_skew: i64,
    /// minDomains.
    pub min_domains: Option<u32>,
    /// `ScheduleAnyway`: may be relaxed.
    pub soft: bool,
    /// False once relaxed.
    pub active: bool,
}

/// A pod (anti-)affinity term of a class.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AffinityRule {
    /// Counting group.
    pub group: usize,
    /// Hostname or zone.
    pub topology: Topology,
    /// Preferred terms: may be relaxed.
    pub soft: bool,
    /// Preferred weight (0 for required).
    pub weight: i32,
    /// False once relaxed.
    pub active: bool,
}

/// Compatibility of a class with one shape: which of its offerings may host the class.
#[derive(Debug, Clone)]
pub struct ShapeCompat {
    /// Index into the shapes.
    pub shape: u32,
    /// Indices into `shape.offerings`, cheapest first.
    pub offerings: Vec<u16>,
    /// The same set as bits (offering `o` is bit `o % 64` of word `o / 64`): [`Class::allows`]
    /// is asked in the packer's inner loops, where a scan of `offerings` cost a tenth of a solve.
    allowed: Box<[u64]>,
}

impl ShapeCompat {
    /// The entry for `shape` with `offerings` (indices into its offerings).
    pub fn new(shape: u32, offerings: Vec<u16>) -> Self {
        let words = offerings
            .iter()
            .max()
            .map_or(0, |&m| usize::from(m) / 64 + 1);
        let mut allowed = vec![0u64; words].into_boxed_slice();
        for &o in &offerings {
            allowed[usize::from(o) / 64] |= 1 << (o % 64);
        }
        Self {
            shape,
            offerings,
            allowed,
        }
    }

    /// Whether offering `offering` of the shape is allowed.
    pub fn allows(&self, offering: usize) -> bool {
        self.allowed
            .get(offering / 64)
            .is_some_and(|w| w >> (offering % 64) & 1 == 1)
    }
}

/// The shapes a group of classes may use: shared by every class with the same node terms and
/// tolerations (whether the requests fit is checked when packing).
#[derive(Debug, Clone, Default)]
pub struct CompatSet {
    /// Compatible shapes with their allowed offerings.
    pub list: Vec<ShapeCompat>,
    /// For each shape, the index into `list`, or `u32::MAX`.
    pub by_shape: Vec<u32>,
    /// Preferred node-affinity weights dropped to find any shape.
    pub relaxed: Vec<i32>,
    /// Indices into `list` by the price per CPU of the shape's first allowed offering, lowest
    /// first (shapes without CPU first, at 0): a pod's cost on a shape is at least its CPU
    /// times that, which lets [`build_classes`] stop looking for the cheapest.
    pub by_cpu_price: Vec<(f64, u32)>,
}

/// Pods that the packer treats as one.
#[derive(Debug, Clone)]
pub struct Class {
    /// Indices into `snapshot.pending`.
    pub pods: Vec<usize>,
    /// Requests of one pod.
    pub requests: Resources,
    /// Shapes whose taints and labels admit the class (shared between classes).
    pub compat: Rc<CompatSet>,
    /// True when at least one compatible shape is large enough for one pod.
    pub fits_any: bool,
    /// Existing nodes that may host the class (static checks).
    pub existing: Vec<usize>,
    /// Cheapest standalone cost share of one pod, dollars per hour.
    pub value: f64,
    /// Topology spread rules.
    pub spreads: Vec<SpreadRule>,
    /// Pod affinity rules.
    pub affinity: Vec<AffinityRule>,
    /// Pod anti-affinity rules.
    pub anti_affinity: Vec<AffinityRule>,
    /// Groups whose counts this class's pods add to.
    pub member_of: Vec<usize>,
    /// Host ports.
    pub host_ports: Vec<HostPort>,
    /// True when the class's constraints depend on the node's zone.
    pub zone_sensitive: bool,
    /// Preferred node-affinity terms that had to be dropped to find any shape.
    pub relaxed_preferences: Vec<i32>,
    /// Soft rules relaxed so far, described for the plan.
    pub relaxed_rules: Vec<String>,
}

impl Class {
    /// Relaxes the next soft rule (spreads first, then preferred terms by ascending weight).
    /// Returns false when none is left.
    pub fn relax_one(&mut self) -> bool {
        if let Some(rule) = self.spreads.iter_mut().find(|r| r.soft && r.active) {
            rule.active = false;
            self.relaxed_rules.push(format!(
                "topology spread on {} (ScheduleAnyway)",
                rule.topology.key()
            ));
            return true;
        }
        let mut best: Option<(bool, usize)> = None;
        for (anti, rules) in [(false, &self.affinity), (true, &self.anti_affinity)] {
            for (i, r) in rules.iter().enumerate() {
                if r.soft && r.active {
                    let weight = r.weight;
                    let better = match best {
                        None => true,
                        Some((a, j)) => {
                            let w = if a {
                                self.anti_affinity[j].weight
                            } else {
                                self.affinity[j].weight
                            };
                            weight < w
                        }
                    };
                    if better {
                        best = Some((anti, i));
                    }
                }
            }
        }
        let Some((anti, i)) = best else { return false };
        let rule = if anti {
            &mut self.anti_affinity[i]
        } else {
            &mut self.affinity[i]
        };
        rule.active = false;
        let what = if anti { "anti-affinity" } else { "affinity" };
        self.relaxed_rules.push(format!(
            "preferred pod {what} on {} (weight {})",
            rule.topology.key(),
            rule.weight
        ));
        true
    }
}

impl Class {
    /// The representative pod.
    pub fn rep<'a>(&self, snapshot: &'a ClusterSnapshot) -> &'a Pod {
        &snapshot.pending[self.pods[0]]
    }

    /// The compatibility entry for `shape`.
    pub fn compat_for(&self, shape: usize) -> Option<&ShapeCompat> {
        match self.compat.by_shape.get(shape) {
            Some(&i) if i != u32::MAX => Some(&self.compat.list[i as usize]),
            _ => None,
        }
    }

    /// Whether offering `offering` of `shape` may host the class.
    pub fn allows(&self, shape: usize, offering: usize) -> bool {
        self.compat_for(shape).is_some_and(|c| c.allows(offering))
    }
}

/// A counting group: the pods matching one selector, counted per zone and per node.
#[derive(Debug, Clone)]
pub struct Group {
    /// Which pods count.
    pub selector: Requirements,
    /// Namespaces the selector applies to.
    pub namespaces: Vec<String>,
    /// Matching pods per zone.
    pub zone_counts: Vec<i64>,
    /// Matching pods per bin.
    pub bin_counts: Vec<i64>,
    /// Matching pods anywhere.
    pub total: i64,
}

impl Group {
    /// Whether `pod` is counted by this group.
    pub fn counts(&self, pod: &Pod) -> bool {
        self.namespaces.contains(&pod.id.namespace) && self.selector.matches(&pod.labels)
    }

    /// Matching pods on bin `bin` (0 for a bin not yet opened).
    pub fn on_bin(&self, bin: Option<usize>) -> i64 {
        bin.and_then(|b| self.bin_counts.get(b).copied())
            .unwrap_or(0)
    }

    /// Matching pods in zone `zone`.
    pub fn in_zone(&self, zone: ZoneId) -> i64 {
        self.zone_counts.get(zone as usize).copied().unwrap_or(0)
    }
}

/// A bucket key for pods that may be of one class: their namespace, requests, labels,
/// tolerations and host ports, and how many terms of each other kind they have. Pods of one
/// bucket are told apart by [`same_class`]; hashing their `Debug` form instead was a sixth of a
/// large solve.
fn class_key(pod: &Pod) -> u64 {
    let mut hasher = DefaultHasher::new();
    pod.id.namespace.hash(&mut hasher);
    pod.requests.hash(&mut hasher);
    pod.labels.hash(&mut hasher);
    pod.tolerations.hash(&mut hasher);
    pod.host_ports.hash(&mut hasher);
    [
        pod.node_terms.len(),
        pod.preferred_node_terms.len(),
        pod.topology_spread.len(),
        pod.affinity.len(),
        pod.anti_affinity.len(),
    ]
    .hash(&mut hasher);
    hasher.finish()
}

/// Whether the solver treats two pods alike (one class): the same namespace, requests, labels,
/// node terms, tolerations, spread, affinity, host ports and device fit.
pub fn same_class(a: &Pod, b: &Pod) -> bool {
    a.id.namespace == b.id.namespace
        && a.requests == b.requests
        && a.labels == b.labels
        && a.node_terms == b.node_terms
        && a.preferred_node_terms == b.preferred_node_terms
        && a.tolerations == b.tolerations
        && a.topology_spread == b.topology_spread
        && a.affinity == b.affinity
        && a.anti_affinity == b.anti_affinity
        && a.host_ports == b.host_ports
        && match (&a.devices, &b.devices) {
            (None, None) => true,
            // Pods of one workload share their fit; pods of different claims are told apart
            // (their reasons name their own claims).
            (Some(x), Some(y)) => std::sync::Arc::ptr_eq(x, y) || x == y,
            _ => false,
        }
}

/// Groups pending pods into classes (in first-appearance order).
pub fn group_pods(pending: &[Pod]) -> Vec<Vec<usize>> {
    let mut by_key: HashMap<u64, Vec<usize>> = HashMap::new();
    let mut classes: Vec<Vec<usize>> = Vec::new();
    for (i, pod) in pending.iter().enumerate() {
        let candidates = by_key.entry(class_key(pod)).or_default();
        match candidates
            .iter()
            .find(|&&c| same_class(&pending[classes[c][0]], pod))
        {
            Some(&c) => classes[c].push(i),
            None => {
                candidates.push(classes.len());
                classes.push(vec![i]);
            }
        }
    }
    classes
}

/// Interns counting groups by (selector, namespaces).
#[derive(Debug, Default, Clone)]
pub struct Groups {
    /// All groups.
    pub groups: Vec<Group>,
    index: HashMap<String, usize>,
}

impl Groups {
    /// The group for `term` of a pod in `namespace`.
    pub fn intern(
        &mut self,
        selector: &Requirements,
        namespaces: &[String],
        namespace: &str,
        zones: usize,
    ) -> usize {
        let namespaces: Vec<String> = if namespaces.is_empty() {
            vec![namespace.to_owned()]
        } else {
            namespaces.to_vec()
        };
        let key = format!("{selector:?}|{namespaces:?}");
        if let Some(&g) = self.index.get(&key) {
            return g;
        }
        self.groups.push(Group {
            selector: selector.clone(),
            namespaces,
            zone_counts: vec![0; zones],
            bin_counts: Vec::new(),
            total: 0,
        });
        self.index.insert(key, self.groups.len() - 1);
        self.groups.len() - 1
    }
}

/// Static compatibility of node terms with every shape offering.
fn shape_compat(
    pod: &Pod,
    node_terms: &[Requirements],
    shapes: &[Shape],
    snapshot: &ClusterSnapshot,
) -> Vec<ShapeCompat> {
    let mut out = Vec::new();
    for (s, shape) in shapes.iter().enumerate() {
        let pool = &snapshot.node_pools[shape.pool];
        if tolerates_all(&pod.tolerations, &pool.taints).is_err() {
            continue;
        }
        let offerings: Vec<u16> = shape
            .offerings
            .iter()
            .enumerate()
            .filter(|(_, o)| {
                node_terms.is_empty() || node_terms.iter().any(|t| t.matches(&o.labels))
            })
            .map(|(i, _)| i as u16)
            .collect();
        if !offerings.is_empty() {
            out.push(ShapeCompat::new(s as u32, offerings));
        }
    }
    out
}

/// Node terms with the first `keep` preferred terms (highest weight first) folded in.
fn terms_with_preferences(pod: &Pod, keep: usize) -> Vec<Requirements> {
    let mut preferred: Vec<_> = pod.preferred_node_terms.iter().collect();
    preferred.sort_by_key(|p| std::cmp::Reverse(p.weight));
    let mut extra = Requirements::default();
    for p in preferred.iter().take(keep) {
        extra = extra.intersect(&p.requirements);
    }
    if keep == 0 {
        return pod.node_terms.clone();
    }
    if pod.node_terms.is_empty() {
        vec![extra]
    } else {
        pod.node_terms.iter().map(|t| t.intersect(&extra)).collect()
    }
}

/// Builds classes with their static compatibility, values and topology rules.
pub fn build_classes(
    snapshot: &ClusterSnapshot,
    shapes: &[Shape],
    zones: usize,
    groups: &mut Groups,
    notes: &mut Vec<String>,
) -> Vec<Class> {
    // Node terms are shared by many classes: compute shape compatibility once per distinct
    // (terms, preferences, tolerations) key.
    let mut compat_cache: HashMap<String, Rc<CompatSet>> = HashMap::new();
    let mut classes = Vec::new();
    for pods in group_pods(&snapshot.pending) {
        let rep = &snapshot.pending[pods[0]];
        let key = format!(
            "{:?}|{:?}|{:?}",
            rep.node_terms, rep.preferred_node_terms, rep.tolerations
        );
        let compat = compat_cache
            .entry(key)
            .or_insert_with(|| {
                let n = rep.preferred_node_terms.len();
                let mut weights: Vec<i32> =
                    rep.preferred_node_terms.iter().map(|p| p.weight).collect();
                weights.sort_by_key(|w| std::cmp::Reverse(*w));
                let mut set = CompatSet::default();
                for keep in (0..=n).rev() {
                    let list =
                        shape_compat(rep, &terms_with_preferences(rep, keep), shapes, snapshot);
                    if !list.is_empty() || keep == 0 {
                        set.list = list;
                        set.relaxed = weights[keep..].to_vec();
                        break;
                    }
                }
                set.by_shape = vec![u32::MAX; shapes.len()];
                for (i, c) in set.list.iter().enumerate() {
                    set.by_shape[c.shape as usize] = i as u32;
                    let shape = &shapes[c.shape as usize];
                    let cpu = shape.allocatable.get(CPU);
                    let per_cpu = if cpu > 0 {
                        shape.offerings[c.offerings[0] as usize].price / cpu as f64
                    } else {
                        0.0
                    };
                    set.by_cpu_price.push((per_cpu, i as u32));
                }
                set.by_cpu_price
                    .sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
                Rc::new(set)
            })
            .clone();
        // Existing nodes must meet the preferred terms honoured for new ones too: the
        // preferences the policy keeps hold on room already paid for (consolidation never
        // moves a pod off a preferred node onto one it would not buy for it).
        let kept = rep.preferred_node_terms.len() - compat.relaxed.len();
        let existing_terms = if kept == 0 {
            None
        } else {
            Some(terms_with_preferences(rep, kept))
        };
        let node_terms = existing_terms.as_ref().unwrap_or(&rep.node_terms);
        let existing: Vec<usize> = snapshot
            .nodes
            .iter()
            .enumerate()
            .filter(|(_, n)| {
                tolerates_all(&rep.tolerations, &n.taints).is_ok()
                    && (node_terms.is_empty() || node_terms.iter().any(|t| t.matches(&n.labels)))
                    && rep.requests.fits_in(&n.allocatable)
                    && !n.pods.iter().any(|p| repels(p, rep, HOSTNAME))
            })
            .map(|(i, _)| i)
            .collect();
        let value = cheapest_share(&rep.requests, &compat, shapes);
        let fits_any = value.is_finite();
        let relaxed = compat.relaxed.clone();
        let mut class = Class {
            pods,
            requests: rep.requests,
            compat,
            fits_any,
            existing,
            value: if value.is_finite() { value } else { 0.0 },
            spreads: Vec::new(),
            affinity: Vec::new(),
            anti_affinity: Vec::new(),
            member_of: Vec::new(),
            host_ports: rep.host_ports.clone(),
            zone_sensitive: rep.node_terms.iter().any(|t| t.get(ZONE).is_some()),
            relaxed_preferences: relaxed,
            relaxed_rules: Vec::new(),
        };
        let ns = rep.id.namespace.clone();
        for spread in &rep.topology_spread {
            let Some(topology) = Topology::from_key(&spread.topology_key) else {
                notes.push(format!(
                    "pod {}: topology spread on {} is not modelled (only hostname and zone are)",
                    rep.id, spread.topology_key
                ));
                continue;
            };
            let group = groups.intern(&spread.selector, &[], &ns, zones);
            class.zone_sensitive |= topology == Topology::Zone;
            class.spreads.push(SpreadRule {
                group,
                topology,
                max_skew: i64::from(spread.max_skew.max(1)),
                min_domains: spread.min_domains,
                soft: spread.when_unsatisfiable == WhenUnsatisfiable::ScheduleAnyway,
                active: true,
            });
        }
        for (terms, anti) in [(&rep.affinity, false), (&rep.anti_affinity, true)] {
            for term in terms {
                let topology = Topology::from_key(&term.topology_key).unwrap_or(Topology::Zone);
                let group = groups.intern(&term.selector, &term.namespaces, &ns, zones);
                class.zone_sensitive |= topology == Topology::Zone;
                let rule = AffinityRule {
                    group,
                    topology,
                    soft: term.preferred_weight.is_some(),
                    weight: term.preferred_weight.unwrap_or(0),
                    active: true,
                };
                if anti {
                    class.anti_affinity.push(rule)
                } else {
                    class.affinity.push(rule)
                }
            }
        }
        classes.push(class);
    }
    for class in &mut classes {
        let rep = class.rep(snapshot);
        class.member_of = (0..groups.groups.len())
            .filter(|&g| groups.groups[g].counts(rep))
            .collect();
    }
    classes
}

/// Whether `existing`'s required anti-affinity terms repel `pod` within `topology_key`.
pub fn repels(existing: &Pod, pod: &Pod, topology_key: &str) -> bool {
    existing.anti_affinity.iter().any(|t: &PodAffinityTerm| {
        t.preferred_weight.is_none()
            && t.topology_key == topology_key
            && (if t.namespaces.is_empty() {
                existing.id.namespace == pod.id.namespace
            } else {
                t.namespaces.contains(&pod.id.namespace)
            })
            && t.selector.matches(&pod.labels)
    })
}

/// The least a pod with `requests` costs on a compatible shape it fits: the price of the
/// shape's first allowed offering times the pod's dominant share of it (infinite when it fits
/// none). Shapes are read by price per CPU and the scan stops where that alone costs more than
/// the best found (with a margin far above float rounding, so the result is the full scan's).
fn cheapest_share(requests: &Resources, compat: &CompatSet, shapes: &[Shape]) -> f64 {
    let cpu = requests.get(CPU) as f64;
    let mut best = f64::INFINITY;
    for &(per_cpu, i) in &compat.by_cpu_price {
        if cpu * per_cpu > best * (1.0 + 1e-9) {
            break;
        }
        let c = &compat.list[i as usize];
        let shape = &shapes[c.shape as usize];
        if requests.fits_in(&shape.allocatable) {
            let cost = shape.offerings[c.offerings[0] as usize].price
                * dominant_share(requests, &shape.allocatable);
            best = best.min(cost);
        }
    }
    debug_assert_eq!(
        best.to_bits(),
        compat
            .list
            .iter()
            .filter(|c| requests.fits_in(&shapes[c.shape as usize].allocatable))
            .map(|c| {
                let shape = &shapes[c.shape as usize];
                shape.offerings[c.offerings[0] as usize].price
                    * dominant_share(requests, &shape.allocatable)
            })
            .fold(f64::INFINITY, f64::min)
            .to_bits(),
        "the scan by price per CPU stopped before the cheapest shape"
    );
    best
}

/// The largest fraction of `capacity` that `requests` takes in any resource.
pub fn dominant_share(requests: &Resources, capacity: &Resources) -> f64 {
    let mut share: f64 = 0.0;
    for (r, c) in requests.0.iter().zip(capacity.0.iter()) {
        if *r > 0 && *c > 0 {
            share = share.max(*r as f64 / *c as f64);
        }
    }
    share
}
