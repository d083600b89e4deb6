//! Reduces a [`BoundInput`] to the smaller problem the bound is computed on.
//!
//! Every step either keeps the optimum of the integral packing problem or can only lower it, so
//! a valid bound of the reduced problem is a valid bound of the input (see the module docs of
//! [`super`] for the argument of each step).

use std::collections::HashMap;

use crate::resources::{MAX_RESOURCES, Resources};

use super::{BoundInput, Options};

/// Largest number of (class, shape) pairs for which pods per copy are capped at class counts.
const COUNT_CAP_PAIRS: usize = 4000;

/// A class of identical pods in the reduced problem.
#[derive(Debug, Clone)]
pub(super) struct Class {
    /// How many pods.
    pub count: u64,
    /// What one pod requests (negative amounts read as zero).
    pub requests: Resources,
    /// For a class whose every shape is capacity-limited: the cost per pod of the relaxation's
    /// escape column (see [`super`]).
    pub escape: Option<f64>,
    /// Shapes that may host it: (shape index, position of this class in that shape's list).
    pub shapes: Vec<(usize, usize)>,
}

/// A shape in the reduced problem, with the rows of its machine polytope.
#[derive(Debug, Clone)]
pub(super) struct Shape {
    /// Dollars per hour of one copy.
    pub price: f64,
    /// How many copies may be used (`None`: any number).
    pub copies: Option<f64>,
    /// What one copy holds.
    pub capacity: Resources,
    /// Classes it may host, ascending.
    pub classes: Vec<usize>,
    /// Per class of `classes`: upper bound on how many pods of it one copy holds in the LP.
    pub upper: Vec<f64>,
    /// Per class of `classes`: how many pods of it one copy holds in an integral packing, capped
    /// at the class's count (0 when unknown, in the plain LP).
    pub fit: Vec<u64>,
    /// Rows of the machine polytope, row-major, `rows × classes.len()`: one copy holds the
    /// (fractional) contents `z` only if `Σ_c row[c]·z[c] ≤ 1` for every row.
    pub rows: Vec<f64>,
    /// Number of rows.
    pub row_count: usize,
}

impl Shape {
    /// Coefficients of row `j`.
    pub fn row(&self, j: usize) -> &[f64] {
        let n = self.classes.len();
        &self.rows[j * n..(j + 1) * n]
    }

    /// Pods of local class `i` that one copy holds in the LP when it holds nothing else.
    pub fn alone(&self, i: usize) -> f64 {
        let mut load = if self.upper[i].is_finite() {
            1.0 / self.upper[i]
        } else {
            0.0
        };
        for j in 0..self.row_count {
            load = load.max(self.row(j)[i]);
        }
        if load > 0.0 {
            1.0 / load
        } else {
            f64::INFINITY
        }
    }
}

/// The reduced problem.
#[derive(Debug, Clone, Default)]
pub(super) struct Problem {
    /// Classes that still cost something.
    pub classes: Vec<Class>,
    /// Shapes that may host at least one of them.
    pub shapes: Vec<Shape>,
}

/// A shape of the input after sanitising its numbers.
struct RawShape {
    price: f64,
    copies: Option<f64>,
    capacity: Resources,
}

/// Sanitises a shape; `None` when no copy of it can ever be used.
fn raw_shape(price: f64, capacity: Resources, max_copies: Option<f64>) -> Option<RawShape> {
    let price = if price.is_nan() || price <= 0.0 {
        0.0
    } else if price.is_infinite() {
        // A plan using it costs infinitely much: leaving it out changes no finite optimum.
        return None;
    } else {
        price
    };
    let copies = match max_copies {
        None => None,
        Some(m) if m.is_nan() || m.is_infinite() => None,
        Some(m) => {
            let m = m.floor();
            if m < 1.0 {
                return None;
            }
            Some(m)
        }
    };
    Some(RawShape {
        price,
        copies,
        capacity,
    })
}

/// How many pods with `requests` one machine of `capacity` holds (at most `cap`); in the plain
/// LP, `cap` when every requested resource has positive capacity and 0 otherwise.
fn fit(capacity: &Resources, requests: &Resources, cap: u64, strengthen: bool) -> u64 {
    let cap = i64::try_from(cap).unwrap_or(i64::MAX);
    if strengthen {
        return u64::try_from(capacity.copies_of(requests, cap)).unwrap_or(0);
    }
    let ok = (0..MAX_RESOURCES).all(|r| requests.get(r) == 0 || capacity.get(r) > 0);
    if ok {
        u64::try_from(cap).unwrap_or(0)
    } else {
        0
    }
}

/// Reduces `input`: see the module docs.
pub(super) fn reduce(input: &BoundInput, options: &Options) -> Problem {
    let strengthen = options.strengthen;
    let raw: Vec<Option<RawShape>> = input
        .shapes
        .iter()
        .map(|s| raw_shape(s.price, s.capacity, s.max_copies))
        .collect();

    // Classes: compatible shapes that really fit, merged by (requests, shapes).
    let mut merged: Vec<(u64, Resources, Vec<usize>)> = Vec::new();
    let mut index: HashMap<(Resources, Vec<usize>), usize> = HashMap::new();
    for class in &input.classes {
        if class.count == 0 || class.shapes.is_empty() {
            continue;
        }
        let mut requests = class.requests;
        for a in &mut requests.0 {
            *a = (*a).max(0);
        }
        if !strengthen && requests.is_zero() {
            // The plain LP prices a pod by its requests only: these cost nothing.
            continue;
        }
        let mut shapes: Vec<usize> = class
            .shapes
            .iter()
            .copied()
            .filter(|&s| {
                raw.get(s)
                    .and_then(Option::as_ref)
                    .is_some_and(|shape| fit(&shape.capacity, &requests, 1, strengthen) >= 1)
            })
            .collect();
        shapes.sort_unstable();
        shapes.dedup();
        if shapes.is_empty() {
            continue; // unschedulable: ignored
        }
        let free = |s: &usize| raw[*s].as_ref().is_some_and(|r| r.price == 0.0);
        if shapes.iter().all(free) {
            // Only free room (unlimited or not) can host it: it adds nothing to any plan's cost.
            continue;
        }
        if shapes
            .iter()
            .any(|s| free(s) && raw[*s].as_ref().is_some_and(|r| r.copies.is_none()))
        {
            continue; // unlimited free room hosts every pod of it at no cost
        }
        match index.get(&(requests, shapes.clone())) {
            Some(&i) => merged[i].0 = merged[i].0.saturating_add(class.count),
            None => {
                index.insert((requests, shapes.clone()), merged.len());
                merged.push((class.count, requests, shapes));
            }
        }
    }
    if merged.is_empty() {
        return Problem::default();
    }

    // Shapes: which classes each may host.
    let mut hosts: Vec<Vec<usize>> = vec![Vec::new(); input.shapes.len()];
    for (c, (_, _, shapes)) in merged.iter().enumerate() {
        for &s in shapes {
            hosts[s].push(c);
        }
    }
    let alive: Vec<usize> = (0..input.shapes.len())
        .filter(|&s| !hosts[s].is_empty())
        .collect();
    let dropped = dominated(&alive, &raw, &hosts, &merged, merged.len());

    // Build the reduced shapes. Capping a class's pods per copy at its count makes the pricing
    // points dense (many classes at their cap) and the LP slow to converge; large inputs, where
    // it rarely matters, go without.
    let pairs: usize = alive
        .iter()
        .zip(&dropped)
        .filter(|(_, g)| !**g)
        .map(|(&s, _)| hosts[s].len())
        .sum();
    let count_caps = options.count_caps && pairs <= COUNT_CAP_PAIRS;
    let mut shapes = Vec::new();
    for (&s, &gone) in alive.iter().zip(&dropped) {
        if gone {
            continue;
        }
        let Some(rs) = raw[s].as_ref() else { continue };
        let classes = hosts[s].clone();
        let fits: Vec<u64> = classes
            .iter()
            .map(|&c| {
                let (count, requests, _) = &merged[c];
                if strengthen {
                    fit(&rs.capacity, requests, *count, true)
                } else {
                    0
                }
            })
            .collect();
        let upper = classes
            .iter()
            .zip(&fits)
            .map(|(&c, &k)| {
                let (_, requests, _) = &merged[c];
                if !strengthen {
                    f64::INFINITY
                } else if count_caps || requests.is_zero() {
                    // (Pods requesting nothing are limited by their count alone.)
                    k as f64
                } else {
                    fit(&rs.capacity, requests, u64::MAX, true) as f64
                }
            })
            .collect();
        let requests: Vec<&Resources> = classes.iter().map(|&c| &merged[c].1).collect();
        let (rows, row_count) = machine_rows(&rs.capacity, &requests, options);
        shapes.push(Shape {
            price: rs.price,
            copies: rs.copies,
            capacity: rs.capacity,
            classes,
            upper,
            fit: fits,
            rows,
            row_count,
        });
    }

    let mut classes: Vec<Class> = merged
        .into_iter()
        .map(|(count, requests, _)| Class {
            count,
            requests,
            escape: None,
            shapes: Vec::new(),
        })
        .collect();
    for (s, shape) in shapes.iter().enumerate() {
        for (i, &c) in shape.classes.iter().enumerate() {
            classes[c].shapes.push((s, i));
        }
    }
    for class in &mut classes {
        if class
            .shapes
            .iter()
            .all(|&(s, _)| shapes[s].copies.is_some())
        {
            // Capacity-limited only: the relaxation may leave its pods unplaced at the dearest
            // per-pod cost any of its shapes could charge them in the LP.
            let escape = class
                .shapes
                .iter()
                .map(|&(s, i)| shapes[s].price / shapes[s].alone(i))
                .fold(0.0, f64::max);
            class.escape = Some(escape);
        }
    }
    Problem { classes, shapes }
}

/// Marks the shapes of `alive` that another one dominates: unlimited, no dearer, at least as
/// large in every resource its classes request, and able to host all of its classes. Among
/// identical shapes the first is kept.
fn dominated(
    alive: &[usize],
    raw: &[Option<RawShape>],
    hosts: &[Vec<usize>],
    classes: &[(u64, Resources, Vec<usize>)],
    class_count: usize,
) -> Vec<bool> {
    let words = class_count.div_ceil(64);
    let bits: Vec<Vec<u64>> = alive
        .iter()
        .map(|&s| {
            let mut b = vec![0u64; words];
            for &c in &hosts[s] {
                b[c / 64] |= 1 << (c % 64);
            }
            b
        })
        .collect();
    let relevant: Vec<[bool; MAX_RESOURCES]> = alive
        .iter()
        .map(|&s| {
            let mut r = [false; MAX_RESOURCES];
            for &c in &hosts[s] {
                for (slot, flag) in r.iter_mut().enumerate() {
                    *flag |= classes[c].1.get(slot) > 0;
                }
            }
            r
        })
        .collect();
    let mut out = vec![false; alive.len()];
    for (i, &s) in alive.iter().enumerate() {
        let Some(a) = raw[s].as_ref() else {
            out[i] = true;
            continue;
        };
        for (j, &t) in alive.iter().enumerate() {
            if i == j || out[j] {
                continue;
            }
            let Some(b) = raw[t].as_ref() else { continue };
            if b.copies.is_some() || b.price > a.price {
                continue;
            }
            if !bits[i].iter().zip(&bits[j]).all(|(x, y)| x & !y == 0) {
                continue;
            }
            if !(0..MAX_RESOURCES)
                .all(|r| !relevant[i][r] || b.capacity.get(r) >= a.capacity.get(r))
            {
                continue;
            }
            // `t` dominates `s`. If `s` also dominates `t` they are interchangeable: keep the first.
            let mutual = a.copies.is_none()
                && a.price == b.price
                && bits[i] == bits[j]
                && (0..MAX_RESOURCES)
                    .all(|r| !relevant[j][r] || a.capacity.get(r) >= b.capacity.get(r));
            if !mutual || j < i {
                out[i] = true;
                break;
            }
        }
    }
    out
}

/// Fekete and Schepers' dual-feasible function `u^(k)` on the size `req/cap`, computed exactly:
/// `x` when `(k+1)·x` is an integer, `⌊(k+1)·x⌋ / k` otherwise.
pub(super) fn dff_u(k: u32, req: i64, cap: i64) -> f64 {
    let q = (i128::from(k) + 1) * i128::from(req);
    let c = i128::from(cap);
    if q % c == 0 {
        req as f64 / cap as f64
    } else {
        (q / c) as f64 / f64::from(k)
    }
}

/// The dual-feasible function that counts items larger than `cap - t` as a whole machine, items
/// smaller than `t` as nothing and the others by size (`2·t ≤ cap`).
pub(super) fn dff_large(t: i64, req: i64, cap: i64) -> f64 {
    if req > cap - t {
        1.0
    } else if req < t {
        0.0
    } else {
        req as f64 / cap as f64
    }
}

/// The rows of one shape's machine polytope for the given classes: for every requested
/// resource, its size row (`req/cap`) and the dual-feasible rows of [`Options`]; rows another
/// row dominates are dropped.
fn machine_rows(
    capacity: &Resources,
    requests: &[&Resources],
    options: &Options,
) -> (Vec<f64>, usize) {
    let n = requests.len();
    let mut rows: Vec<Vec<f64>> = Vec::new();
    for r in 0..MAX_RESOURCES {
        if requests.iter().all(|q| q.get(r) <= 0) {
            continue;
        }
        let cap = capacity.get(r);
        if cap <= 0 {
            // Only in the plain LP could a class requesting `r` be here; it never is.
            continue;
        }
        rows.push(
            requests
                .iter()
                .map(|q| q.get(r) as f64 / cap as f64)
                .collect(),
        );
        if !options.strengthen {
            continue;
        }
        for k in 1..=options.dff_levels {
            rows.push(
                requests
                    .iter()
                    .map(|q| dff_u(k, q.get(r).min(cap), cap))
                    .collect(),
            );
        }
        let mut large: Vec<i64> = requests
            .iter()
            .map(|q| q.get(r))
            .filter(|&a| 2 * a > cap && a <= cap)
            .collect();
        large.sort_unstable_by(|a, b| b.cmp(a));
        large.dedup();
        for &l in large.iter().take(options.large_rows) {
            let t = cap - l + 1;
            if 2 * t <= cap {
                rows.push(
                    requests
                        .iter()
                        .map(|q| dff_large(t, q.get(r).min(cap), cap))
                        .collect(),
                );
            }
        }
    }
    // Drop zero rows and rows another row dominates (the first of equal rows stays).
    let keep: Vec<bool> = (0..rows.len())
        .map(|i| {
            rows[i].iter().any(|&g| g > 0.0)
                && !(0..rows.len()).any(|j| {
                    j != i
                        && rows[i].iter().zip(&rows[j]).all(|(a, b)| a <= b)
                        && (rows[i] != rows[j] || j < i)
                })
        })
        .collect();
    let mut flat = Vec::new();
    let mut count = 0;
    for (row, k) in rows.iter().zip(keep) {
        if k {
            flat.extend_from_slice(row);
            count += 1;
        }
    }
    debug_assert_eq!(flat.len(), count * n);
    (flat, count)
}
