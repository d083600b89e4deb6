//! A claim's device requests, resolved against their DeviceClasses, and their allocation over
//! one node's devices: the structured allocator's rules (Kubernetes `resource.k8s.io/v1`) for
//! the fields the solver needs.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use k8s_openapi::api::resource::v1::{
    DeviceClass, DeviceSelector as ApiSelector, ResourceClaimSpec,
};

use crate::dra::device::NodeDevice;
use crate::dra::selector::{DeviceSelector, SelectorEvaluator};
use crate::error::PolicyError;

/// How many devices a request takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocationMode {
    /// Exactly this many (`ExactCount`, the default, count 1 by default).
    ExactCount(u32),
    /// Every matching device of the node, at least one (`All`).
    All,
}

/// One way of satisfying a request: the request itself (`exactly`) or one of its
/// `firstAvailable` subrequests.
#[derive(Debug, Clone)]
struct Alternative {
    /// `request` or `request/subrequest`.
    name: String,
    /// The DeviceClass's selectors, then the request's own.
    selectors: Vec<Arc<DeviceSelector>>,
    mode: AllocationMode,
}

#[derive(Debug, Clone)]
struct Request {
    name: String,
    /// In order: the first that can be satisfied is taken.
    alternatives: Vec<Alternative>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum ConstraintKind {
    /// Every device of the requests has the attribute, with the same value.
    Match(String),
    /// Every device of the requests has the attribute, with a value no other has.
    Distinct(String),
}

#[derive(Debug, Clone)]
struct Constraint {
    /// The requests it applies to (`request` or `request/subrequest`); all when `None`.
    requests: Option<Vec<String>>,
    kind: ConstraintKind,
}

impl Constraint {
    fn applies_to(&self, request: &str, alternative: &str) -> bool {
        self.requests
            .as_ref()
            .is_none_or(|r| r.iter().any(|n| n == request || n == alternative))
    }
}

/// A ResourceClaim's (or template's) device requests with their DeviceClasses resolved and
/// every selector compiled.
#[derive(Debug, Clone)]
pub struct ClaimRequirements {
    requests: Vec<Request>,
    constraints: Vec<Constraint>,
}

/// A device given to a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceResult {
    /// `request` or `request/subrequest` (the `firstAvailable` choice).
    pub request: String,
    /// The device's driver.
    pub driver: String,
    /// The device's name.
    pub device: String,
}

/// Devices for every request of a claim on one node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    /// One entry per device, in request order.
    pub devices: Vec<DeviceResult>,
}

/// Why a claim cannot be allocated on a node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unsatisfied {
    /// Fewer free devices match the request than it wants.
    TooFewDevices {
        /// `request` or `request/subrequest`.
        request: String,
        /// Free devices that match.
        matching: usize,
        /// Devices it wants (1 for `All`).
        wanted: usize,
    },
    /// `All` wants every matching device, and some are taken.
    DevicesTaken {
        /// The request.
        request: String,
    },
    /// Enough devices match, but not with a `matchAttribute` / `distinctAttribute` the claim sets.
    Constraint {
        /// The attribute.
        attribute: String,
    },
    /// A selector failed or gave no bool: Kubernetes aborts the allocation.
    SelectorFailed {
        /// What failed.
        message: String,
    },
}

impl std::fmt::Display for Unsatisfied {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooFewDevices {
                request,
                matching,
                wanted,
            } => write!(
                f,
                "request {request}: {matching} free device(s) match, {wanted} wanted"
            ),
            Self::DevicesTaken { request } => write!(
                f,
                "request {request}: allocation mode All, and a matching device is taken"
            ),
            Self::Constraint { attribute } => {
                write!(
                    f,
                    "no devices that match share {attribute} as the claim requires"
                )
            }
            Self::SelectorFailed { message } => write!(f, "selector failed: {message}"),
        }
    }
}

fn compile_all(
    field: &str,
    selectors: Option<&Vec<ApiSelector>>,
) -> Result<Vec<Arc<DeviceSelector>>, PolicyError> {
    let mut out = Vec::new();
    for (j, s) in selectors.into_iter().flatten().enumerate() {
        let Some(cel) = &s.cel else {
            return Err(PolicyError::InvalidClaim {
                field: format!("{field}[{j}]"),
                reason: "a selector must set cel".into(),
            });
        };
        out.push(Arc::new(DeviceSelector::compile(
            &format!("{field}[{j}].cel.expression"),
            &cel.expression,
        )?));
    }
    Ok(out)
}

/// The allocation mode of a request at `field` (`allocationMode`, `count`): `ExactCount` (count
/// 1 by default) or `All`.
pub fn allocation_mode(
    field: &str,
    mode: Option<&str>,
    count: Option<i64>,
) -> Result<AllocationMode, PolicyError> {
    let invalid = |at: &str, reason: String| PolicyError::InvalidClaim {
        field: format!("{field}.{at}"),
        reason,
    };
    match mode.unwrap_or("ExactCount") {
        "ExactCount" => {
            let n = count.unwrap_or(1);
            u32::try_from(n)
                .ok()
                .filter(|n| *n >= 1)
                .map(AllocationMode::ExactCount)
                .ok_or_else(|| invalid("count", format!("must be greater than zero (is {n})")))
        }
        "All" if count.is_some() => Err(invalid("count", "must not be set with All".into())),
        "All" => Ok(AllocationMode::All),
        other => Err(invalid(
            "allocationMode",
            format!("Unsupported value: {other:?}: supported values: \"All\", \"ExactCount\""),
        )),
    }
}

impl ClaimRequirements {
    /// Resolves `spec` (a ResourceClaim's or a ResourceClaimTemplate's `spec.spec`) against
    /// `classes` by name, compiling every selector. Field paths in errors start at `spec`.
    pub fn from_spec(
        spec: &ResourceClaimSpec,
        classes: &BTreeMap<String, DeviceClass>,
    ) -> Result<Self, PolicyError> {
        let mut class_selectors: BTreeMap<&str, Vec<Arc<DeviceSelector>>> = BTreeMap::new();
        let mut selectors_of =
            |class: &str, field: &str| -> Result<Vec<Arc<DeviceSelector>>, PolicyError> {
                if let Some(s) = class_selectors.get(class) {
                    return Ok(s.clone());
                }
                let Some((name, c)) = classes.get_key_value(class) else {
                    return Err(PolicyError::InvalidClaim {
                        field: field.to_owned(),
                        reason: format!("DeviceClass {class:?} not found"),
                    });
                };
                let compiled = compile_all(
                    &format!("DeviceClass {name}: spec.selectors"),
                    c.spec.selectors.as_ref(),
                )?;
                class_selectors.insert(name.as_str(), compiled.clone());
                Ok(compiled)
            };
        let devices = spec.devices.as_ref();
        let mut requests = Vec::new();
        for (i, r) in devices
            .and_then(|d| d.requests.as_ref())
            .into_iter()
            .flatten()
            .enumerate()
        {
            let field = format!("spec.devices.requests[{i}]");
            let mut alternatives = Vec::new();
            match (&r.exactly, &r.first_available) {
                (Some(e), None) => {
                    let mut selectors = selectors_of(
                        &e.device_class_name,
                        &format!("{field}.exactly.deviceClassName"),
                    )?;
                    selectors.extend(compile_all(
                        &format!("{field}.exactly.selectors"),
                        e.selectors.as_ref(),
                    )?);
                    alternatives.push(Alternative {
                        name: r.name.clone(),
                        selectors,
                        mode: allocation_mode(
                            &format!("{field}.exactly"),
                            e.allocation_mode.as_deref(),
                            e.count,
                        )?,
                    });
                }
                (None, Some(subs)) if !subs.is_empty() => {
                    for (k, s) in subs.iter().enumerate() {
                        let sub = format!("{field}.firstAvailable[{k}]");
                        let mut selectors =
                            selectors_of(&s.device_class_name, &format!("{sub}.deviceClassName"))?;
                        selectors.extend(compile_all(
                            &format!("{sub}.selectors"),
                            s.selectors.as_ref(),
                        )?);
                        alternatives.push(Alternative {
                            name: format!("{}/{}", r.name, s.name),
                            selectors,
                            mode: allocation_mode(&sub, s.allocation_mode.as_deref(), s.count)?,
                        });
                    }
                }
                _ => {
                    return Err(PolicyError::InvalidClaim {
                        field,
                        reason: "exactly one of exactly or firstAvailable must be set".into(),
                    });
                }
            }
            requests.push(Request {
                name: r.name.clone(),
                alternatives,
            });
        }
        let mut constraints = Vec::new();
        for (i, c) in devices
            .and_then(|d| d.constraints.as_ref())
            .into_iter()
            .flatten()
            .enumerate()
        {
            let kind = match (&c.match_attribute, &c.distinct_attribute) {
                (Some(a), None) => ConstraintKind::Match(a.clone()),
                (None, Some(a)) => ConstraintKind::Distinct(a.clone()),
                _ => {
                    return Err(PolicyError::InvalidClaim {
                        field: format!("spec.devices.constraints[{i}]"),
                        reason: "exactly one of matchAttribute or distinctAttribute must be set"
                            .into(),
                    });
                }
            };
            constraints.push(Constraint {
                requests: c.requests.clone(),
                kind,
            });
        }
        Ok(Self {
            requests,
            constraints,
        })
    }

    /// Whether the claim asks for any device.
    pub fn is_empty(&self) -> bool {
        self.requests.is_empty()
    }

    /// Devices for every request among `devices` (a node's, none of them allocated yet), or
    /// why there are none. `firstAvailable` alternatives are tried in order.
    pub fn allocate(
        &self,
        devices: &[NodeDevice],
        evaluator: &SelectorEvaluator,
    ) -> Result<Allocation, Unsatisfied> {
        let taken = vec![false; devices.len()];
        self.allocate_free(devices, &taken, evaluator)
    }

    /// For a request (or `request/subrequest`) too few devices match: the first of its
    /// selectors (the DeviceClass's, then its own) that the fewest of `devices` pass, as
    /// `` `expression` matches m of n device(s)``; `None` when every selector passes every
    /// device (too few devices, not a selector) or the request is not the claim's.
    pub fn blocking_selector(
        &self,
        request: &str,
        devices: &[NodeDevice],
        evaluator: &SelectorEvaluator,
    ) -> Option<String> {
        let alternative = self
            .requests
            .iter()
            .flat_map(|r| &r.alternatives)
            .find(|a| a.name == request)?;
        let mut worst: Option<(usize, &DeviceSelector)> = None;
        for s in &alternative.selectors {
            let passing = devices
                .iter()
                .filter(|d| evaluator.matches(s, d).unwrap_or(false))
                .count();
            if passing < devices.len() && worst.is_none_or(|(w, _)| passing < w) {
                worst = Some((passing, s));
            }
        }
        worst.map(|(passing, s)| {
            format!(
                "`{}` matches {passing} of {} device(s)",
                s.expression(),
                devices.len()
            )
        })
    }

    /// The names of the claim's requests and their `firstAvailable` alternatives
    /// (`request/subrequest`), in order.
    pub fn alternatives(&self) -> impl Iterator<Item = &str> + '_ {
        self.requests
            .iter()
            .flat_map(|r| &r.alternatives)
            .map(|a| a.name.as_str())
    }

    /// As [`ClaimRequirements::allocate`], with `taken[i]` set for devices already allocated
    /// to other claims.
    pub fn allocate_free(
        &self,
        devices: &[NodeDevice],
        taken: &[bool],
        evaluator: &SelectorEvaluator,
    ) -> Result<Allocation, Unsatisfied> {
        // Which devices each alternative's selectors accept.
        let mut matching: Vec<Vec<Vec<usize>>> = Vec::new();
        for r in &self.requests {
            let mut per_alt = Vec::new();
            for a in &r.alternatives {
                let mut ok = Vec::new();
                for (i, d) in devices.iter().enumerate() {
                    let mut all = true;
                    for s in &a.selectors {
                        if !evaluator
                            .matches(s, d)
                            .map_err(|message| Unsatisfied::SelectorFailed { message })?
                        {
                            all = false;
                            break;
                        }
                    }
                    if all {
                        ok.push(i);
                    }
                }
                per_alt.push(ok);
            }
            matching.push(per_alt);
        }
        let mut search = Search {
            claim: self,
            devices,
            matching: &matching,
            used: taken.to_vec(),
            bound: vec![None; self.constraints.len()],
            seen: vec![BTreeSet::new(); self.constraints.len()],
            chosen: Vec::new(),
            first_failure: None,
        };
        if search.request(0) {
            Ok(Allocation {
                devices: search.chosen,
            })
        } else {
            // Every way the search fails records why; this stands in should one not.
            Err(search.first_failure.unwrap_or(Unsatisfied::TooFewDevices {
                request: String::new(),
                matching: 0,
                wanted: 1,
            }))
        }
    }
}

/// A depth-first search over requests and their alternatives.
struct Search<'a> {
    claim: &'a ClaimRequirements,
    devices: &'a [NodeDevice],
    matching: &'a [Vec<Vec<usize>>],
    used: Vec<bool>,
    /// Per constraint: the value a `matchAttribute` constraint is bound to.
    bound: Vec<Option<crate::dra::AttributeValue>>,
    /// Per constraint: the values a `distinctAttribute` constraint has seen.
    seen: Vec<BTreeSet<crate::dra::AttributeValue>>,
    chosen: Vec<DeviceResult>,
    first_failure: Option<Unsatisfied>,
}

impl Search<'_> {
    fn fail(&mut self, why: Unsatisfied) -> bool {
        self.first_failure.get_or_insert(why);
        false
    }

    fn request(&mut self, r: usize) -> bool {
        let Some(request) = self.claim.requests.get(r) else {
            return true;
        };
        for (k, alt) in request.alternatives.iter().enumerate() {
            let applying: Vec<usize> = (0..self.claim.constraints.len())
                .filter(|c| self.claim.constraints[*c].applies_to(&request.name, &alt.name))
                .collect();
            let free: Vec<usize> = self.matching[r][k]
                .iter()
                .copied()
                .filter(|i| !self.used[*i])
                .collect();
            let picks = match alt.mode {
                AllocationMode::All => {
                    if self.matching[r][k].is_empty() {
                        self.fail(Unsatisfied::TooFewDevices {
                            request: alt.name.clone(),
                            matching: 0,
                            wanted: 1,
                        });
                        continue;
                    }
                    if free.len() < self.matching[r][k].len() {
                        self.fail(Unsatisfied::DevicesTaken {
                            request: alt.name.clone(),
                        });
                        continue;
                    }
                    vec![free]
                }
                AllocationMode::ExactCount(n) => {
                    let n = n as usize;
                    if free.len() < n {
                        self.fail(Unsatisfied::TooFewDevices {
                            request: alt.name.clone(),
                            matching: free.len(),
                            wanted: n,
                        });
                        continue;
                    }
                    let groups = self.groups(&free, &applying, n);
                    if groups.is_empty() {
                        // Enough devices match, but no n of them meet the constraints together.
                        let attribute = applying
                            .first()
                            .map(|c| match &self.claim.constraints[*c].kind {
                                ConstraintKind::Match(a) | ConstraintKind::Distinct(a) => a.clone(),
                            })
                            .unwrap_or_default();
                        self.fail(Unsatisfied::Constraint { attribute });
                    }
                    groups
                }
            };
            for pick in picks {
                if let Some(undo) = self.take(&pick, &applying, &alt.name) {
                    if self.request(r + 1) {
                        return true;
                    }
                    self.undo(undo);
                }
            }
        }
        false
    }

    /// Candidate sets of `n` devices among `free`: one per value of the unbound
    /// `matchAttribute` constraints (largest groups first), each picked greedily so that
    /// `distinctAttribute` values stay distinct.
    fn groups(&mut self, free: &[usize], applying: &[usize], n: usize) -> Vec<Vec<usize>> {
        let mut by_key: BTreeMap<Vec<Option<crate::dra::AttributeValue>>, Vec<usize>> =
            BTreeMap::new();
        for &i in free {
            let key: Vec<_> = applying
                .iter()
                .filter_map(|c| match &self.claim.constraints[*c].kind {
                    ConstraintKind::Match(a) => Some(self.devices[i].attribute(a).cloned()),
                    ConstraintKind::Distinct(_) => None,
                })
                .collect();
            by_key.entry(key).or_default().push(i);
        }
        let mut groups: Vec<Vec<usize>> = by_key.into_values().collect();
        groups.sort_by_key(|g| std::cmp::Reverse(g.len()));
        let mut out = Vec::new();
        for g in groups {
            let mut seen: Vec<BTreeSet<crate::dra::AttributeValue>> = self.seen.clone();
            let mut pick = Vec::new();
            for i in g {
                let fresh = applying
                    .iter()
                    .all(|c| match &self.claim.constraints[*c].kind {
                        ConstraintKind::Distinct(a) => self.devices[i]
                            .attribute(a)
                            .is_some_and(|v| !seen[*c].contains(v)),
                        ConstraintKind::Match(_) => true,
                    });
                if fresh {
                    for c in applying {
                        if let ConstraintKind::Distinct(a) = &self.claim.constraints[*c].kind
                            && let Some(v) = self.devices[i].attribute(a)
                        {
                            seen[*c].insert(v.clone());
                        }
                    }
                    pick.push(i);
                    if pick.len() == n {
                        break;
                    }
                }
            }
            if pick.len() == n {
                out.push(pick);
            }
        }
        out
    }

    /// Gives `pick` to the alternative if the constraints allow; what to undo.
    fn take(&mut self, pick: &[usize], applying: &[usize], name: &str) -> Option<Undo> {
        let before = Undo {
            bound: self.bound.clone(),
            seen: self.seen.clone(),
            picked: pick.to_vec(),
            chosen: self.chosen.len(),
        };
        for &i in pick {
            for &c in applying {
                let ok = match &self.claim.constraints[c].kind {
                    ConstraintKind::Match(a) => {
                        match (self.devices[i].attribute(a), &self.bound[c]) {
                            (None, _) => false,
                            (Some(v), Some(b)) => v == b,
                            (Some(v), None) => {
                                self.bound[c] = Some(v.clone());
                                true
                            }
                        }
                    }
                    ConstraintKind::Distinct(a) => self.devices[i]
                        .attribute(a)
                        .is_some_and(|v| self.seen[c].insert(v.clone())),
                };
                if !ok {
                    let attribute = match &self.claim.constraints[c].kind {
                        ConstraintKind::Match(a) | ConstraintKind::Distinct(a) => a.clone(),
                    };
                    self.bound = before.bound;
                    self.seen = before.seen;
                    self.fail(Unsatisfied::Constraint { attribute });
                    return None;
                }
            }
        }
        for &i in pick {
            self.used[i] = true;
            self.chosen.push(DeviceResult {
                request: name.to_owned(),
                driver: self.devices[i].driver.clone(),
                device: self.devices[i].name.clone(),
            });
        }
        Some(before)
    }

    fn undo(&mut self, undo: Undo) {
        for i in undo.picked {
            self.used[i] = false;
        }
        self.chosen.truncate(undo.chosen);
        self.bound = undo.bound;
        self.seen = undo.seen;
    }
}

struct Undo {
    bound: Vec<Option<crate::dra::AttributeValue>>,
    seen: Vec<BTreeSet<crate::dra::AttributeValue>>,
    picked: Vec<usize>,
    chosen: usize,
}
