//! The restricted master LP of the column generation: a revised primal simplex with a dense
//! explicit basis inverse, for `min cost·λ` subject to covering rows (`≥`) and copy rows (`≤`),
//! `λ ≥ 0`, to which columns are added between solves.

/// One column: its cost and its non-zero coefficients (row, value), all `≥ 0`.
#[derive(Debug, Clone)]
pub(super) struct Column {
    /// Cost.
    pub cost: f64,
    /// Non-zero coefficients.
    pub entries: Vec<(usize, f64)>,
}

/// A basic variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Var {
    /// The slack (or surplus) of a row.
    Slack(usize),
    /// A column of the pool.
    Col(usize),
}

/// How a solve ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Status {
    /// No column has a negative reduced cost.
    Optimal,
    /// The pivot limit was reached first.
    Limit,
}

/// Not in the basis.
const OUT: usize = usize::MAX;

/// Pivots between two fresh inversions of the basis (at least the number of rows).
const REFACTOR_EVERY: usize = 100;

/// The master LP.
#[derive(Debug)]
pub(super) struct Master {
    m: usize,
    rhs: Vec<f64>,
    /// Coefficient of each row's slack: −1 for a `≥` row, +1 for a `≤` row.
    sign: Vec<f64>,
    cols: Vec<Column>,
    /// The first `protected` columns are never purged (they make up the starting basis).
    protected: usize,
    basis: Vec<Var>,
    col_pos: Vec<usize>,
    slack_pos: Vec<usize>,
    initial: Vec<Var>,
    /// Row-major: row `k` belongs to basis position `k`.
    binv: Vec<f64>,
    xb: Vec<f64>,
    pi: Vec<f64>,
    alpha: Vec<f64>,
    since_refactor: usize,
    dtol: f64,
}

impl Master {
    /// A master with rows `rhs` (`ge[i]`: covering row), the starting columns `cols` and the
    /// starting basis: `start[i]` is the column basic in row `i`, or its slack when `None`. The
    /// starting basis must be diagonal and feasible.
    pub fn new(rhs: Vec<f64>, ge: &[bool], cols: Vec<Column>, start: &[Option<usize>]) -> Self {
        let m = rhs.len();
        let sign = ge.iter().map(|&g| if g { -1.0 } else { 1.0 }).collect();
        let initial: Vec<Var> = start
            .iter()
            .enumerate()
            .map(|(i, s)| s.map_or(Var::Slack(i), Var::Col))
            .collect();
        let scale = cols.iter().map(|c| c.cost).fold(0.0, f64::max).max(1e-9);
        let mut master = Master {
            m,
            rhs,
            sign,
            protected: cols.len(),
            col_pos: vec![OUT; cols.len()],
            cols,
            basis: initial.clone(),
            slack_pos: vec![OUT; m],
            initial,
            binv: vec![0.0; m * m],
            xb: vec![0.0; m],
            pi: vec![0.0; m],
            alpha: vec![0.0; m],
            since_refactor: 0,
            dtol: 1e-9 * scale,
        };
        master.refactor();
        master
    }

    /// Adds a column.
    pub fn add(&mut self, col: Column) {
        self.dtol = self.dtol.max(1e-9 * col.cost);
        self.cols.push(col);
        self.col_pos.push(OUT);
    }

    /// Row prices of the last solve (`≥ 0` on covering rows, `≤ 0` on copy rows at optimality).
    pub fn duals(&self) -> &[f64] {
        &self.pi
    }

    /// Objective value of the current basic solution.
    pub fn objective(&self) -> f64 {
        self.basis
            .iter()
            .zip(&self.xb)
            .map(|(v, x)| self.cost(*v) * x)
            .sum()
    }

    /// Tolerance on reduced costs.
    pub fn tolerance(&self) -> f64 {
        self.dtol
    }

    /// Number of columns in the pool.
    pub fn len(&self) -> usize {
        self.cols.len()
    }

    fn cost(&self, v: Var) -> f64 {
        match v {
            Var::Slack(_) => 0.0,
            Var::Col(j) => self.cols[j].cost,
        }
    }

    fn order(&self, v: Var) -> usize {
        match v {
            Var::Slack(i) => i,
            Var::Col(j) => self.m + j,
        }
    }

    fn set_positions(&mut self) {
        self.col_pos.iter_mut().for_each(|p| *p = OUT);
        self.slack_pos.iter_mut().for_each(|p| *p = OUT);
        for (k, v) in self.basis.iter().enumerate() {
            match *v {
                Var::Slack(i) => self.slack_pos[i] = k,
                Var::Col(j) => self.col_pos[j] = k,
            }
        }
    }

    /// Recomputes the basis inverse and the basic solution from scratch; falls back to the
    /// starting basis when the current one is numerically singular.
    fn refactor(&mut self) {
        if !self.invert() {
            self.basis = self.initial.clone();
            let ok = self.invert();
            debug_assert!(ok, "the starting basis is diagonal");
        }
        self.set_positions();
        self.since_refactor = 0;
    }

    /// Gauss–Jordan inversion of the basis matrix; false when it is singular.
    fn invert(&mut self) -> bool {
        let m = self.m;
        // a: column k = basic variable k, row-major m × m; inv starts as identity.
        let mut a = vec![0.0; m * m];
        for (k, v) in self.basis.iter().enumerate() {
            match *v {
                Var::Slack(i) => a[i * m + k] = self.sign[i],
                Var::Col(j) => {
                    for &(i, x) in &self.cols[j].entries {
                        a[i * m + k] = x;
                    }
                }
            }
        }
        // Solve B X = I by row reduction of [B | I]: the result X = B⁻¹ has row k for basis
        // position k.
        let mut inv = vec![0.0; m * m];
        for i in 0..m {
            inv[i * m + i] = 1.0;
        }
        for col in 0..m {
            let mut p = col;
            let mut best = a[col * m + col].abs();
            for r in col + 1..m {
                let v = a[r * m + col].abs();
                if v > best {
                    best = v;
                    p = r;
                }
            }
            if best < 1e-12 {
                return false;
            }
            if p != col {
                for k in 0..m {
                    a.swap(p * m + k, col * m + k);
                    inv.swap(p * m + k, col * m + k);
                }
            }
            let piv = a[col * m + col];
            for k in 0..m {
                a[col * m + k] /= piv;
                inv[col * m + k] /= piv;
            }
            for r in 0..m {
                if r == col {
                    continue;
                }
                let f = a[r * m + col];
                if f != 0.0 {
                    for k in 0..m {
                        a[r * m + k] -= f * a[col * m + k];
                        inv[r * m + k] -= f * inv[col * m + k];
                    }
                }
            }
        }
        // After reduction, row `col` of `inv` corresponds to basic variable `col`.
        self.binv = inv;
        for k in 0..m {
            let row = &self.binv[k * m..(k + 1) * m];
            self.xb[k] = row
                .iter()
                .zip(&self.rhs)
                .map(|(b, r)| b * r)
                .sum::<f64>()
                .max(0.0);
        }
        true
    }

    fn compute_duals(&mut self) {
        let m = self.m;
        self.pi.iter_mut().for_each(|p| *p = 0.0);
        for k in 0..m {
            let c = self.cost(self.basis[k]);
            if c != 0.0 {
                for (p, b) in self.pi.iter_mut().zip(&self.binv[k * m..(k + 1) * m]) {
                    *p += c * b;
                }
            }
        }
    }

    fn reduced_cost(&self, j: usize) -> f64 {
        let col = &self.cols[j];
        col.cost
            - col
                .entries
                .iter()
                .map(|&(i, x)| self.pi[i] * x)
                .sum::<f64>()
    }

    /// Runs the primal simplex from the current basis for at most `max_pivots` pivots.
    pub fn solve(&mut self, work: &mut u64, max_pivots: usize) -> Status {
        let m = self.m;
        let mut stalled = 0usize;
        let mut pivots = 0usize;
        self.compute_duals();
        *work += (m * m) as u64;
        loop {
            let bland = stalled > 50;
            // Entering variable.
            let mut enter: Option<Var> = None;
            let mut best = -self.dtol;
            for i in 0..m {
                if self.slack_pos[i] == OUT {
                    let d = -self.sign[i] * self.pi[i];
                    if d < best {
                        best = d;
                        enter = Some(Var::Slack(i));
                        if bland {
                            break;
                        }
                    }
                }
            }
            if !(bland && enter.is_some()) {
                for j in 0..self.cols.len() {
                    if self.col_pos[j] != OUT {
                        continue;
                    }
                    let d = self.reduced_cost(j);
                    if d < best {
                        best = d;
                        enter = Some(Var::Col(j));
                        if bland {
                            break;
                        }
                    }
                }
            }
            *work += self
                .cols
                .iter()
                .map(|c| c.entries.len() as u64 + 1)
                .sum::<u64>();
            let Some(q) = enter else {
                return Status::Optimal;
            };
            if pivots >= max_pivots {
                return Status::Limit;
            }
            // Entering column in terms of the basis.
            self.alpha.iter_mut().for_each(|a| *a = 0.0);
            match q {
                Var::Slack(i) => {
                    for k in 0..m {
                        self.alpha[k] = self.binv[k * m + i] * self.sign[i];
                    }
                }
                Var::Col(j) => {
                    for &(i, x) in &self.cols[j].entries {
                        for k in 0..m {
                            self.alpha[k] += self.binv[k * m + i] * x;
                        }
                    }
                }
            }
            // Ratio test.
            let mut leave: Option<usize> = None;
            let mut step = f64::INFINITY;
            for k in 0..m {
                let a = self.alpha[k];
                if a > 1e-9 {
                    let ratio = self.xb[k] / a;
                    let better = match leave {
                        None => true,
                        Some(l) => {
                            if ratio < step - 1e-12 * (1.0 + step) {
                                true
                            } else if ratio <= step + 1e-12 * (1.0 + step) {
                                if bland {
                                    self.order(self.basis[k]) < self.order(self.basis[l])
                                } else {
                                    a > self.alpha[l]
                                }
                            } else {
                                false
                            }
                        }
                    };
                    if better {
                        leave = Some(k);
                        step = ratio;
                    }
                }
            }
            let Some(r) = leave else {
                // Unbounded direction: impossible with non-negative costs; stop here.
                return Status::Optimal;
            };
            stalled = if step * -best > self.dtol * 1e-3 {
                0
            } else {
                stalled + 1
            };
            for k in 0..m {
                self.xb[k] = (self.xb[k] - step * self.alpha[k]).max(0.0);
            }
            self.xb[r] = step;
            let piv = self.alpha[r];
            for x in &mut self.binv[r * m..(r + 1) * m] {
                *x /= piv;
            }
            let (before, rest) = self.binv.split_at_mut(r * m);
            let (prow, after) = rest.split_at_mut(m);
            for (k, row) in before.chunks_exact_mut(m).enumerate().chain(
                after
                    .chunks_exact_mut(m)
                    .enumerate()
                    .map(|(k, row)| (k + r + 1, row)),
            ) {
                let f = self.alpha[k];
                if f != 0.0 {
                    for (x, p) in row.iter_mut().zip(prow.iter()) {
                        *x -= f * p;
                    }
                }
            }
            // Duals of the new basis: π' = π + d_q·(row r of the new inverse).
            for (p, b) in self.pi.iter_mut().zip(&self.binv[r * m..(r + 1) * m]) {
                *p += best * b;
            }
            *work += (3 * m * m) as u64;
            match self.basis[r] {
                Var::Slack(i) => self.slack_pos[i] = OUT,
                Var::Col(j) => self.col_pos[j] = OUT,
            }
            self.basis[r] = q;
            match q {
                Var::Slack(i) => self.slack_pos[i] = r,
                Var::Col(j) => self.col_pos[j] = r,
            }
            pivots += 1;
            self.since_refactor += 1;
            if self.since_refactor >= REFACTOR_EVERY.max(m) {
                self.refactor();
                self.compute_duals();
                *work += (2 * m * m * m) as u64;
            }
        }
    }

    /// Drops non-basic, unprotected columns whose reduced cost is positive, the dearest first,
    /// until at most `limit` columns are left (or no more qualify).
    pub fn purge(&mut self, limit: usize) {
        if self.cols.len() <= limit {
            return;
        }
        let mut candidates: Vec<(f64, usize)> = (self.protected..self.cols.len())
            .filter(|&j| self.col_pos[j] == OUT)
            .map(|j| (self.reduced_cost(j), j))
            .filter(|&(d, _)| d > self.dtol)
            .collect();
        candidates.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        let excess = self.cols.len() - limit;
        let mut drop = vec![false; self.cols.len()];
        for &(_, j) in candidates.iter().take(excess) {
            drop[j] = true;
        }
        let mut remap = vec![OUT; self.cols.len()];
        let mut kept = Vec::with_capacity(self.cols.len());
        for (j, col) in std::mem::take(&mut self.cols).into_iter().enumerate() {
            if !drop[j] {
                remap[j] = kept.len();
                kept.push(col);
            }
        }
        self.cols = kept;
        for v in &mut self.basis {
            if let Var::Col(j) = v {
                *j = remap[*j];
            }
        }
        self.col_pos = vec![OUT; self.cols.len()];
        self.set_positions();
    }
}
