//! The pricing problem of one shape: the most a single copy's contents are worth at pod prices `u`,
//! `φ_s(u) = max { u·z : row·z ≤ 1 for every row, 0 ≤ z ≤ upper }`, solved by a small dense
//! bounded primal simplex, with a dual certificate that bounds `φ_s` from above whatever the
//! simplex's rounding did.

use super::prep::Shape;

/// What pricing one shape found.
#[derive(Debug, Clone, Default)]
pub(super) struct Priced {
    /// A point of the machine polytope: (local class, pods), the new column when it pays.
    pub point: Vec<(usize, f64)>,
    /// Dual row weights `w ≥ 0`: `φ_s(u') ≤ Σ w + Σ_c upper_c·(u'_c − (wᵀrows)_c)⁺` for any `u'`.
    pub weight_sum: f64,
    /// `(wᵀrows)_c` per local class.
    pub covered: Vec<f64>,
}

impl Priced {
    /// An upper bound on `φ_s(u)` from the stored dual certificate, for any prices `u` (indexed
    /// by local class). Infinite when the certificate cannot cover an unbounded class.
    pub fn certificate(&self, shape: &Shape, u: impl Fn(usize) -> f64) -> f64 {
        let covered = |i: usize| self.covered.get(i).copied().unwrap_or(0.0);
        let n = shape.classes.len();
        // Scale the weights up when a class without upper bound is not covered.
        let mut sigma: f64 = 1.0;
        for i in 0..n {
            let (ui, cov) = (u(i), covered(i));
            if ui > 0.0 && shape.upper[i].is_infinite() {
                if cov <= 0.0 {
                    return f64::INFINITY;
                }
                sigma = sigma.max(ui / cov);
            }
        }
        let mut total = sigma * self.weight_sum;
        for i in 0..n {
            let gap = u(i) - sigma * covered(i);
            if gap > 0.0 && shape.upper[i].is_finite() {
                total += shape.upper[i] * gap;
            }
        }
        total
    }
}

/// The simplex state of one shape, kept between calls: only the prices change from one call to
/// the next, so the last optimal basis is still feasible and usually close to optimal.
#[derive(Debug, Default, Clone)]
struct State {
    /// `m × (n + m)` tableau: `B⁻¹·[rows | I]`.
    tab: Vec<f64>,
    /// Values of the basic variables.
    beta: Vec<f64>,
    basis: Vec<usize>,
    is_basic: Vec<bool>,
    at_upper: Vec<bool>,
    /// Pivots since the tableau was last built from the rows.
    pivots: usize,
}

/// The pricing simplex of every shape.
#[derive(Debug, Default)]
pub(super) struct Pricer {
    states: Vec<Option<State>>,
    d: Vec<f64>,
}

impl Pricer {
    /// A pricer for `shapes` shapes.
    pub fn new(shapes: usize) -> Self {
        Pricer {
            states: vec![None; shapes],
            d: Vec::new(),
        }
    }

    /// Prices shape number `s` at local class prices `u` (all `≥ 0`); adds the work done to
    /// `work`.
    pub fn price(&mut self, s: usize, shape: &Shape, u: &[f64], work: &mut u64) -> Priced {
        let n = shape.classes.len();
        let m = shape.row_count;
        let width = n + m;
        let mut out = Priced {
            covered: vec![0.0; n],
            ..Priced::default()
        };
        let umax = u.iter().copied().fold(0.0, f64::max);
        if umax <= 0.0 {
            return out;
        }
        let dtol = 1e-11 * umax;
        const PIVOT_TOL: f64 = 1e-11;
        let ub = |j: usize| if j < n { shape.upper[j] } else { f64::INFINITY };
        let cost = |j: usize| if j < n { u[j] } else { 0.0 };

        let mut st = match self.states[s].take() {
            Some(st) if st.pivots <= 4 * width + 50 => st,
            _ => {
                let mut tab = vec![0.0; m * width];
                for j in 0..m {
                    let t = &mut tab[j * width..(j + 1) * width];
                    t[..n].copy_from_slice(shape.row(j));
                    t[n + j] = 1.0;
                }
                let mut is_basic = vec![false; width];
                is_basic[n..].iter_mut().for_each(|b| *b = true);
                State {
                    tab,
                    beta: vec![1.0; m],
                    basis: (n..width).collect(),
                    is_basic,
                    at_upper: vec![false; width],
                    pivots: 0,
                }
            }
        };
        // Reduced costs for these prices: d = c − c_Bᵀ·tab.
        self.d.clear();
        self.d.extend((0..width).map(cost));
        for (i, &b) in st.basis.iter().enumerate() {
            let cb = cost(b);
            if cb != 0.0 {
                for (d, t) in self.d.iter_mut().zip(&st.tab[i * width..(i + 1) * width]) {
                    *d -= cb * t;
                }
            }
        }
        for &b in &st.basis {
            self.d[b] = 0.0;
        }
        *work += (m * width) as u64;

        let max_iter = 20 * width + 100;
        let mut stalled = 0usize;
        for _ in 0..max_iter {
            *work += (m + width) as u64;
            // Entering variable: Dantzig's rule, Bland's after a run of degenerate steps.
            let bland = stalled > 2 * width;
            let mut enter = None;
            let mut best = dtol;
            for j in 0..width {
                if st.is_basic[j] {
                    continue;
                }
                let gain = if st.at_upper[j] {
                    -self.d[j]
                } else {
                    self.d[j]
                };
                if gain > best {
                    best = gain;
                    enter = Some(j);
                    if bland {
                        break;
                    }
                }
            }
            let Some(q) = enter else { break };
            let dir = if st.at_upper[q] { -1.0 } else { 1.0 };
            // Ratio test.
            let mut step = ub(q);
            let mut leave: Option<(usize, bool)> = None;
            for i in 0..m {
                let a = dir * st.tab[i * width + q];
                if a > PIVOT_TOL {
                    let lim = st.beta[i].max(0.0) / a;
                    let tie = bland
                        && lim == step
                        && leave.is_some_and(|(l, _)| st.basis[i] < st.basis[l]);
                    if lim < step || tie {
                        step = lim;
                        leave = Some((i, false));
                    }
                } else if a < -PIVOT_TOL {
                    let u_i = ub(st.basis[i]);
                    if u_i.is_finite() {
                        let lim = (u_i - st.beta[i]).max(0.0) / -a;
                        if lim < step {
                            step = lim;
                            leave = Some((i, true));
                        }
                    }
                }
            }
            if step.is_infinite() {
                // Unbounded: the certificate will say so.
                break;
            }
            stalled = if step * best > dtol { 0 } else { stalled + 1 };
            for i in 0..m {
                st.beta[i] -= dir * step * st.tab[i * width + q];
            }
            let Some((r, to_upper)) = leave else {
                st.at_upper[q] = !st.at_upper[q];
                continue;
            };
            let start = if st.at_upper[q] { ub(q) } else { 0.0 };
            let old = st.basis[r];
            st.beta[r] = start + dir * step;
            st.is_basic[old] = false;
            st.at_upper[old] = to_upper;
            st.is_basic[q] = true;
            st.at_upper[q] = false;
            st.basis[r] = q;
            let piv = st.tab[r * width + q];
            for k in 0..width {
                st.tab[r * width + k] /= piv;
            }
            let (before, rest) = st.tab.split_at_mut(r * width);
            let (prow, after) = rest.split_at_mut(width);
            for row in before
                .chunks_exact_mut(width)
                .chain(after.chunks_exact_mut(width))
            {
                let f = row[q];
                if f != 0.0 {
                    for (x, p) in row.iter_mut().zip(prow.iter()) {
                        *x -= f * p;
                    }
                    row[q] = 0.0;
                }
            }
            let f = self.d[q];
            for (x, p) in self.d.iter_mut().zip(prow.iter()) {
                *x -= f * p;
            }
            self.d[q] = 0.0;
            for b in &mut st.beta {
                *b = b.max(0.0);
            }
            st.pivots += 1;
            *work += (m * width) as u64;
        }

        // Primal point.
        let mut z: Vec<f64> = (0..n)
            .map(|k| if st.at_upper[k] { ub(k) } else { 0.0 })
            .collect();
        for (i, &b) in st.basis.iter().enumerate() {
            if b < n {
                z[b] = st.beta[i].clamp(0.0, ub(b));
            }
        }
        // Rounding may leave the point slightly outside the polytope: scale it back in.
        let mut worst: f64 = 1.0;
        for j in 0..m {
            let load: f64 = shape.row(j).iter().zip(&z).map(|(g, zk)| g * zk).sum();
            worst = worst.max(load);
        }
        for (i, &zi) in z.iter().enumerate() {
            let v = zi / worst;
            if v > 1e-12 && u[i] > 0.0 {
                out.point.push((i, v));
            }
        }
        // Dual certificate.
        for j in 0..m {
            let w = (-self.d[n + j]).max(0.0);
            if w > 0.0 {
                out.weight_sum += w;
                for (c, g) in out.covered.iter_mut().zip(shape.row(j)) {
                    *c += w * g;
                }
            }
        }
        *work += (m * n) as u64;
        self.states[s] = Some(st);
        out
    }
}
