//! Operator design: the radius-4 second-derivative filter, the mapping of the cross-shaped Laplacian
//! onto [-1, 1], and the Chebyshev coefficients a_n(p), p = w dz / v, tabulated over the run's range.
//!
//! Target (paper section 38.3.2, after Soubaras 1996): G(x) = sum a_n T_n(x) ~ exp(i kz dz), where
//! x = 1 - 2 K^2 / Lambda is the spectrum of L and K^2 the (filter's) horizontal wavenumber squared:
//!   K^2 dz^2 = q (1 - x) / 2,  q = Lambda dz^2,  kz dz = sqrt(p^2 - K^2 dz^2).
//! Design per table row (f64):
//! - passband: propagation angles up to `max_angle` (x >= x_t, x_t = 1 - 2 p^2 sin^2(max_angle) / q),
//!   target exp(i kz dz), weight rising from 1 at `max_angle` to `VERTICAL_WEIGHT` at vertical
//!   incidence (vertical errors accumulate over every depth step);
//! - transition: from `max_angle` through 90 degrees to `EVANESCENT_MARGIN` into the evanescent
//!   region (and at least `TRANSITION_WIDTH` wide in x), unweighted ("don't care");
//! - stop band: the rest of the evanescent region, target 0 (damped), weight `STOP_WEIGHT`;
//! - stability: |G(x)| <= 1 on the sample points by ADMM (the least-squares step alternates with
//!   the projection of G onto the unit disc), then a final scaling by the maximum of |G| on a fine
//!   grid so that |G| <= 1 - 1e-5 holds everywhere.
//!
//! The paper's design is an L-infinity (equiripple) one; ours is a constrained, angle-weighted
//! least-squares fit (Lawson reweighting toward equiripple broke the rows' interpolation, see
//! `LAWSON`); `seisgpu srm design` prints the resulting accuracy by angle.

use num_complex::Complex64;
use rayon::prelude::*;

use gpu_kernels::srm::{RowMap, Stencil, MAX_DEGREE};

/// Which radius-4 second-derivative filter builds the Laplacian.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FilterKind {
    /// The standard 8th-order central difference (Taylor): exact to O(k^10) at low wavenumbers,
    /// 0.67 % low in k^2 at half Nyquist, 5.8 % at 0.7 Nyquist.
    Taylor8,
    /// Least-squares (Lawson minimax) fit of k^2 in relative error over 0 < k dx <= 0.7 pi:
    /// error below 0.5 % over that band (see `optimised_filter`).
    #[default]
    Optimised,
}

impl std::str::FromStr for FilterKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "taylor8" | "taylor" => Ok(Self::Taylor8),
            "optimised" | "optimized" => Ok(Self::Optimised),
            o => Err(format!("unknown filter `{o}` (expected taylor8 or optimised)")),
        }
    }
}

impl std::fmt::Display for FilterKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self { Self::Taylor8 => "taylor8", Self::Optimised => "optimised" })
    }
}

/// Upper end of the optimised filter's fitting band, in radians per sample.
pub const OPTIMISED_BAND: f64 = 0.7 * std::f64::consts::PI;

impl FilterKind {
    /// Filter taps [c0, c1, c2, c3, c4] of d^2/dx^2 (per unit grid spacing, symmetric: c_j at +-j).
    pub fn taps(self) -> [f64; 5] {
        match self {
            Self::Taylor8 => [-205.0 / 72.0, 8.0 / 5.0, -1.0 / 5.0, 8.0 / 315.0, -1.0 / 560.0],
            Self::Optimised => optimised_filter(OPTIMISED_BAND),
        }
    }
}

/// -(filter response) at k radians per sample: the filter's estimate of k^2 (>= 0).
pub fn symbol(c: &[f64; 5], k: f64) -> f64 {
    -(c[0] + 2.0 * (1..5).map(|j| c[j] * (j as f64 * k).cos()).sum::<f64>())
}

/// Radius-4 filter whose symbol fits k^2 with the smallest maximum relative error on (0, band]:
/// c0 = -2 sum c_j (exact at k = 0), c1..c4 by Lawson's iteratively reweighted least squares.
pub fn optimised_filter(band: f64) -> [f64; 5] {
    let m = 400;
    let ks: Vec<f64> = (1..=m).map(|i| band * i as f64 / m as f64).collect();
    // s(k) = sum_j c_j 2 (1 - cos jk); relative residual (s(k) - k^2) / k^2.
    let rows: Vec<[f64; 4]> = ks.iter().map(|&k| {
        let mut r = [0.0; 4];
        for j in 0..4 {
            r[j] = 2.0 * (1.0 - ((j + 1) as f64 * k).cos()) / (k * k);
        }
        r
    }).collect();
    let mut w = vec![1.0; m];
    let mut c = [0.0; 4];
    for _ in 0..60 {
        let mut ata = vec![0.0; 16];
        let mut atb = vec![0.0; 4];
        for (r, &wi) in rows.iter().zip(&w) {
            for a in 0..4 {
                atb[a] += wi * r[a];
                for b in 0..4 {
                    ata[a * 4 + b] += wi * r[a] * r[b];
                }
            }
        }
        let b: Vec<Complex64> = atb.iter().map(|&v| Complex64::new(v, 0.0)).collect();
        let sol = Cholesky::new(&ata, 4).solve_complex(&b);
        for j in 0..4 {
            c[j] = sol[j].re;
        }
        let err: Vec<f64> = rows.iter().map(|r| (r.iter().zip(&c).map(|(a, b)| a * b).sum::<f64>() - 1.0).abs()).collect();
        let emax = err.iter().cloned().fold(0.0, f64::max);
        for (wi, e) in w.iter_mut().zip(&err) {
            *wi *= (e / emax).max(1e-3);
        }
        let wmax = w.iter().cloned().fold(0.0, f64::max);
        w.iter_mut().for_each(|v| *v /= wmax);
    }
    [-2.0 * c.iter().sum::<f64>(), c[0], c[1], c[2], c[3]]
}

/// sum a_n T_n(x) by Clenshaw's recurrence.
pub fn cheb_eval(a: &[Complex64], x: f64) -> Complex64 {
    let (mut b1, mut b2) = (Complex64::new(0.0, 0.0), Complex64::new(0.0, 0.0));
    for k in (1..a.len()).rev() {
        let b0 = a[k] + b1 * (2.0 * x) - b2;
        b2 = b1;
        b1 = b0;
    }
    a[0] + b1 * x - b2
}

/// The exact one-way operator at x for a given p and q: exp(i kz dz) when propagating, the
/// evanescent decay exp(-|kz| dz) otherwise.
pub fn exact_response(x: f64, p: f64, q: f64) -> Complex64 {
    let kz2 = p * p - q * (1.0 - x) / 2.0;
    if kz2 >= 0.0 { Complex64::from_polar(1.0, kz2.sqrt()) } else { Complex64::new((-(-kz2).sqrt()).exp(), 0.0) }
}

/// Parameters of the polynomial design.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DesignParams {
    /// Polynomial degree N (the paper's NMAX, about 15).
    pub degree: usize,
    /// Design angle (degrees): the operator is fitted up to this propagation angle.
    pub max_angle_deg: f64,
    pub filter: FilterKind,
}

impl Default for DesignParams {
    fn default() -> Self { Self { degree: 15, max_angle_deg: 60.0, filter: FilterKind::Optimised } }
}

impl DesignParams {
    /// Errors name the parameter (its CLI name).
    pub fn validate(&self) -> Result<(), crate::Error> {
        if self.degree < 2 || self.degree > MAX_DEGREE {
            return Err(crate::Error::parameter("degree", format!("polynomial degree {} is outside 2..={MAX_DEGREE} (degree 0 or 1 cannot represent the \
                operator)", self.degree)));
        }
        if !(self.max_angle_deg > 0.0 && self.max_angle_deg < 90.0) {
            return Err(crate::Error::parameter("max-angle", format!("design angle {} degrees is outside (0, 90)", self.max_angle_deg)));
        }
        Ok(())
    }
}

/// Stop-band weight (evanescent region, target 0) relative to the passband's 1.
const STOP_WEIGHT: f64 = 0.1;
/// Least width in x of the unweighted transition band below the design angle.
const TRANSITION_WIDTH: f64 = 0.25;
/// How far (in x) the transition band reaches into the evanescent region before the stop band.
const EVANESCENT_MARGIN: f64 = 0.3;
/// Widths (in x) of the raised-cosine weight ramps at the passband and stop-band edges: weights
/// that are smooth in x make the coefficients smooth in p, so rows interpolate linearly.
const PASS_RAMP: f64 = 0.05;
/// Passband weight at vertical incidence relative to the design angle's (quadratic in between).
const VERTICAL_WEIGHT: f64 = 30.0;
const STOP_RAMP: f64 = 0.1;
/// Sample points (Chebyshev nodes of the first kind) of the fit.
const FIT_POINTS: usize = 512;
/// Fine grid (cosine-spaced) on which |G| <= 1 is checked and the error is measured.
const CHECK_POINTS: usize = 8193;
/// Largest |G| allowed after the final scaling.
pub const MAX_GAIN: f64 = 1.0 - 1e-5;
/// ADMM penalty; (Lawson rounds, ADMM iterations per round) for a cold start and for a row that
/// starts from its neighbour's solution (continuation in p).
const RHO: f64 = 0.01;
const COLD: (usize, usize) = (1, 1500);
const WARM: (usize, usize) = (1, 200);
/// Lawson reweighting of the passband (toward equiripple) between ADMM rounds. Off: its weights
/// concentrate on extremal points that jump with p, which breaks the rows' interpolation.
const LAWSON: bool = false;

/// One row's result.
#[derive(Debug, Clone)]
pub struct RowDesign {
    pub p: f64,
    pub coef: Vec<Complex64>,
    /// Largest |G - exact| over the passband (fit only: the filter's error is not included).
    pub fit_error: f64,
    /// Largest |G| on [-1, 1] after scaling.
    pub max_gain: f64,
}

/// The fit's fixed sample points and Chebyshev matrix.
struct FitGrid {
    xs: Vec<f64>,
    /// t[j * n1 + n] = T_n(x_j)
    t: Vec<f64>,
    n1: usize,
    fine: Vec<f64>,
}

impl FitGrid {
    fn new(degree: usize) -> Self {
        let n1 = degree + 1;
        let m = FIT_POINTS;
        let xs: Vec<f64> = (0..m).map(|j| (std::f64::consts::PI * (j as f64 + 0.5) / m as f64).cos()).collect();
        let mut t = vec![0.0; m * n1];
        for (j, &x) in xs.iter().enumerate() {
            let r = &mut t[j * n1..(j + 1) * n1];
            r[0] = 1.0;
            r[1] = x;
            for n in 2..n1 {
                r[n] = 2.0 * x * r[n - 1] - r[n - 2];
            }
        }
        let fine = (0..CHECK_POINTS).map(|i| (std::f64::consts::PI * i as f64 / (CHECK_POINTS - 1) as f64).cos())
            .chain(xs.iter().cloned()).collect();
        Self { xs, t, n1, fine }
    }
    fn row(&self, j: usize) -> &[f64] { &self.t[j * self.n1..(j + 1) * self.n1] }
}

/// The iteration state carried from one row to the next.
#[derive(Clone)]
struct FitState {
    z: Vec<Complex64>,
    u: Vec<Complex64>,
    /// Lawson multipliers of the passband weights.
    lw: Vec<f64>,
}

fn raised_cosine(t: f64) -> f64 {
    let t = t.clamp(0.0, 1.0);
    0.5 - 0.5 * (std::f64::consts::PI * t).cos()
}

/// Designs the rows at increasing `ps` by continuation: the first row cold, each next one from its
/// neighbour's state (a few iterations suffice, and the coefficients vary smoothly with p).
fn design_chain(ps: &[f64], q: f64, params: &DesignParams, grid: &FitGrid) -> Vec<RowDesign> {
    let m = grid.xs.len();
    let zero = Complex64::new(0.0, 0.0);
    let mut st = FitState { z: vec![zero; m], u: vec![zero; m], lw: vec![1.0; m] };
    ps.iter().enumerate().map(|(k, &p)| design_one(p, q, params, grid, &mut st, if k == 0 { COLD } else { WARM })).collect()
}

fn design_one(p: f64, q: f64, params: &DesignParams, grid: &FitGrid, st: &mut FitState, (outer, inner): (usize, usize))
    -> RowDesign {
    let (m, n1) = (grid.xs.len(), grid.n1);
    let zero = Complex64::new(0.0, 0.0);
    let sin_t = params.max_angle_deg.to_radians().sin();
    let x_pass = 1.0 - 2.0 * p * p * sin_t * sin_t / q;
    let x_cut = 1.0 - 2.0 * p * p / q; // 90 degrees
    let x_stop = (x_cut - EVANESCENT_MARGIN).min(x_pass - TRANSITION_WIDTH);
    let exact: Vec<Complex64> = grid.xs.iter().map(|&x| exact_response(x, p, q)).collect();
    // Passband weight (ramped below x_pass) and stop-band weight (ramped below x_stop).
    // Ramps no wider than a fraction of the band they border (narrow passbands at small p).
    let pr = PASS_RAMP.min(0.25 * (1.0 - x_pass)).max(1e-9);
    let sr = STOP_RAMP.min(0.5 * (x_stop + 1.0).max(0.0)).max(1e-9);
    let wp: Vec<f64> = grid.xs.iter().map(|&x| {
        // Heavier toward vertical propagation (x = 1), where errors accumulate over every depth step.
        let u = ((x - x_pass) / (1.0 - x_pass)).clamp(0.0, 1.0);
        raised_cosine((x - (x_pass - pr)) / pr) * (1.0 + (VERTICAL_WEIGHT - 1.0) * u * u)
    }).collect();
    let ws: Vec<f64> = grid.xs.iter().map(|&x| STOP_WEIGHT * raised_cosine((x_stop - x) / sr)).collect();
    let pass: Vec<bool> = grid.xs.iter().map(|&x| x >= x_pass).collect();
    let mut a = vec![zero; n1];
    let mut g = vec![zero; m];
    for o in 0..outer {
        // (T' (W + rho) T) a = T' W target + rho T' (z - u), W = wp lw + ws, target = exact on the
        // passband side and 0 on the stop-band side.
        let w: Vec<f64> = (0..m).map(|j| wp[j] * st.lw[j] + ws[j]).collect();
        let mut ata = vec![0.0; n1 * n1];
        let mut b0 = vec![zero; n1];
        for j in 0..m {
            let row = grid.row(j);
            let ww = w[j] + RHO;
            for i in 0..n1 {
                let ri = ww * row[i];
                for k in 0..=i {
                    ata[i * n1 + k] += ri * row[k];
                }
                b0[i] += exact[j] * (wp[j] * st.lw[j] * row[i]);
            }
        }
        for i in 0..n1 {
            for k in i + 1..n1 {
                ata[i * n1 + k] = ata[k * n1 + i];
            }
        }
        let chol = Cholesky::new(&ata, n1);
        for _ in 0..inner {
            let mut b = b0.clone();
            for j in 0..m {
                let d = (st.z[j] - st.u[j]) * RHO;
                let row = grid.row(j);
                for i in 0..n1 {
                    b[i] += d * row[i];
                }
            }
            a = chol.solve_complex(&b);
            for j in 0..m {
                let gj: Complex64 = grid.row(j).iter().zip(&a).map(|(&tv, &av)| av * tv).sum();
                g[j] = gj;
                let v = gj + st.u[j];
                let mag = v.norm();
                st.z[j] = if mag > 1.0 { v / mag } else { v };
                st.u[j] = v - st.z[j];
            }
        }
        if LAWSON && o + 1 < outer {
            // Lawson: reweight the passband by its error, toward equal ripple.
            let emax = (0..m).filter(|&j| pass[j]).map(|j| (g[j] - exact[j]).norm()).fold(0.0, f64::max);
            if emax > 0.0 {
                for j in 0..m {
                    st.lw[j] = if pass[j] { st.lw[j] * ((g[j] - exact[j]).norm() / emax).max(0.02) } else { 1.0 };
                }
                let lmax = (0..m).filter(|&j| pass[j]).map(|j| st.lw[j]).fold(0.0, f64::max);
                if lmax > 0.0 {
                    for j in 0..m {
                        if pass[j] {
                            st.lw[j] /= lmax;
                        }
                    }
                }
            }
        }
    }
    // Final scaling: |G| <= MAX_GAIN on a fine grid (and the fit's own nodes).
    let gmax = grid.fine.iter().map(|&x| cheb_eval(&a, x).norm()).fold(0.0, f64::max);
    if gmax > MAX_GAIN {
        let s = MAX_GAIN / gmax;
        a.iter_mut().for_each(|v| *v *= s);
    }
    let fit_error = grid.fine.iter().filter(|&&x| x >= x_pass).map(|&x| (cheb_eval(&a, x) - exact_response(x, p, q)).norm())
        .fold(0.0, f64::max);
    let max_gain = grid.fine.iter().map(|&x| cheb_eval(&a, x).norm()).fold(0.0, f64::max);
    RowDesign { p, coef: a, fit_error, max_gain }
}

/// Rows per warm-started chain of [`design_rows`].
const ROWS_PER_CHAIN: usize = 32;

/// Designs rows for increasing `ps` in parallel chains (one cold start per chain). The chains
/// depend on the rows alone, not on the thread count, so the table (and every image) is the
/// same on any machine and on every MPI rank.
pub fn design_rows(ps: &[f64], q: f64, params: &DesignParams) -> Vec<RowDesign> {
    let grid = FitGrid::new(params.degree);
    let chains = ps.len().div_ceil(ROWS_PER_CHAIN).max(1);
    let per = ps.len().div_ceil(chains).max(1);
    ps.par_chunks(per).flat_map_iter(|c| design_chain(c, q, params, &grid)).collect()
}

/// One row, cold (tests and the accuracy report).
pub fn design_row(p: f64, q: f64, params: &DesignParams) -> RowDesign {
    design_rows(&[p], q, params).pop().unwrap()
}

struct Cholesky {
    l: Vec<f64>,
    n: usize,
}

impl Cholesky {
    fn new(a: &[f64], n: usize) -> Self {
        let mut l = vec![0.0; n * n];
        for i in 0..n {
            for j in 0..=i {
                let mut s = a[i * n + j];
                for k in 0..j {
                    s -= l[i * n + k] * l[j * n + k];
                }
                if i == j {
                    l[i * n + i] = s.max(1e-300).sqrt();
                } else {
                    l[i * n + j] = s / l[j * n + j];
                }
            }
        }
        Self { l, n }
    }
    fn solve_complex(&self, b: &[Complex64]) -> Vec<Complex64> {
        let (l, n) = (&self.l, self.n);
        let mut y = vec![Complex64::new(0.0, 0.0); n];
        for i in 0..n {
            let mut s = b[i];
            for k in 0..i {
                s -= y[k] * l[i * n + k];
            }
            y[i] = s / l[i * n + i];
        }
        let mut x = vec![Complex64::new(0.0, 0.0); n];
        for i in (0..n).rev() {
            let mut s = y[i];
            for k in i + 1..n {
                s -= x[k] * l[k * n + i];
            }
            x[i] = s / l[i * n + i];
        }
        x
    }
}

/// Grid spacings of the extrapolation (m).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spacing {
    pub dx: f64,
    pub dy: f64,
    pub dz: f64,
    /// One row in y: a 2D line, the y arm of the Laplacian is off.
    pub two_d: bool,
}

/// The whole operator: filter, stencil, table over [p0, p0 + (rows - 1) dp].
#[derive(Debug, Clone)]
pub struct Operator {
    pub params: DesignParams,
    pub spacing: Spacing,
    pub taps: [f64; 5],
    /// Largest filter symbol (at Nyquist) per axis, in 1/sample^2.
    pub sym_max: f64,
    /// Lambda: largest -Laplacian eigenvalue (1/m^2); L = I + (2/Lambda) Laplacian.
    pub lambda: f64,
    /// q = Lambda dz^2.
    pub q: f64,
    pub stencil: Stencil,
    pub p0: f64,
    pub dp: f64,
    pub rows: usize,
    /// rows x (degree + 1) complex coefficients, interleaved (re, im), f32: what the kernels read.
    pub table: Vec<f32>,
    /// Per-row fit error and gain.
    pub fit_error: Vec<f64>,
    pub max_gain: Vec<f64>,
}

impl Operator {
    /// Designs the operator for p = w dz / v in [p_min, p_max] with `rows` table rows (>= 2).
    pub fn new(params: DesignParams, spacing: Spacing, p_min: f64, p_max: f64, rows: usize) -> Result<Self, String> {
        params.validate().map_err(|e| e.to_string())?;
        if !(spacing.dx > 0.0 && spacing.dy > 0.0 && spacing.dz > 0.0)
            || !(spacing.dx.is_finite() && spacing.dy.is_finite() && spacing.dz.is_finite()) {
            return Err(format!("grid spacings must be positive: dx {} m, dy {} m, dz {} m", spacing.dx, spacing.dy,
                spacing.dz));
        }
        if !(p_min > 0.0 && p_max >= p_min && p_max.is_finite()) {
            return Err(format!("operator range w dz / v = [{p_min}, {p_max}] is empty or not positive"));
        }
        if rows < 2 {
            return Err(format!("the coefficient table needs at least 2 rows, got {rows}"));
        }
        let taps = params.filter.taps();
        let sym_max = (0..=1000).map(|i| symbol(&taps, std::f64::consts::PI * i as f64 / 1000.0)).fold(0.0, f64::max);
        let (ax, ay) = (1.0 / (spacing.dx * spacing.dx), if spacing.two_d { 0.0 } else { 1.0 / (spacing.dy * spacing.dy) });
        let lambda = sym_max * (ax + ay);
        let q = lambda * spacing.dz * spacing.dz;
        let g = 2.0 / lambda;
        let stencil = Stencil {
            c: (1.0 + g * (taps[0] * ax + taps[0] * ay)) as f32,
            ax: [1, 2, 3, 4].map(|j| (g * taps[j] * ax) as f32),
            ay: [1, 2, 3, 4].map(|j| (g * taps[j] * ay) as f32),
        };
        let dp = if rows > 1 { (p_max - p_min) / (rows - 1) as f64 } else { 0.0 };
        let dp = if dp > 0.0 { dp } else { p_min * 1e-3 };
        let ps: Vec<f64> = (0..rows).map(|k| p_min + k as f64 * dp).collect();
        let designs = design_rows(&ps, q, &params);
        let ncoef = params.degree + 1;
        let mut table = Vec::with_capacity(rows * ncoef * 2);
        for d in &designs {
            for c in &d.coef {
                table.push(c.re as f32);
                table.push(c.im as f32);
            }
        }
        Ok(Operator {
            params, spacing, taps, sym_max, lambda, q, stencil, p0: p_min, dp, rows, table,
            fit_error: designs.iter().map(|d| d.fit_error).collect(),
            max_gain: designs.iter().map(|d| d.max_gain).collect(),
        })
    }

    pub fn ncoef(&self) -> usize { self.params.degree + 1 }

    /// Table position map for angular frequency w (rad/s): row = (w dz s - p0) / dp.
    pub fn row_map(&self, omega: f64) -> RowMap {
        RowMap { scale: (omega * self.spacing.dz / self.dp) as f32, offset: (-self.p0 / self.dp) as f32 }
    }

    /// The operator's response (in f64, from the f32 table with the same interpolation as the
    /// kernels) at horizontal wavenumbers (kx, ky) (rad/m) for p = w dz / v.
    pub fn response(&self, p: f64, kx: f64, ky: f64) -> Complex64 {
        let x = self.x_of(kx, ky);
        let coef = self.coef_interp(p);
        cheb_eval(&coef, x)
    }

    /// x = 1 - 2 K^2 / Lambda for the filter's K^2 at (kx, ky) (rad/m).
    pub fn x_of(&self, kx: f64, ky: f64) -> f64 {
        let s = &self.spacing;
        let k2 = symbol(&self.taps, kx * s.dx) / (s.dx * s.dx)
            + if s.two_d { 0.0 } else { symbol(&self.taps, ky * s.dy) / (s.dy * s.dy) };
        1.0 - 2.0 * k2 / self.lambda
    }

    /// Coefficients at p by the table's linear interpolation (f32 table values, f64 arithmetic).
    pub fn coef_interp(&self, p: f64) -> Vec<Complex64> {
        let r = ((p - self.p0) / self.dp).clamp(0.0, (self.rows - 1) as f64);
        let i0 = (r.floor() as usize).min(self.rows - 2);
        let f = r - i0 as f64;
        let n1 = self.ncoef();
        (0..n1).map(|n| {
            let c = |i: usize| Complex64::new(self.table[2 * (i * n1 + n)] as f64, self.table[2 * (i * n1 + n) + 1] as f64);
            c(i0) + (c(i0 + 1) - c(i0)) * f
        }).collect()
    }

    /// Worst error against the exact operator exp(i p cos(theta)) over azimuths 0..=45 degrees and
    /// propagation angles 0..=`angle_deg`, for p = w dz / v: (amplitude error | |G| - 1 |, phase
    /// error |arg(G / exact)| in radians, |G - exact|). Includes the filter's error.
    pub fn accuracy(&self, p: f64, angle_deg: f64) -> (f64, f64, f64) {
        let k = p / self.spacing.dz; // w / v
        let (mut amp, mut ph, mut tot) = (0.0f64, 0.0f64, 0.0f64);
        let az_steps = if self.spacing.two_d { 0 } else { 9 };
        for ia in 0..=az_steps {
            let az = (45.0f64 * ia as f64 / 9.0).to_radians();
            for it in 0..=60 {
                let th = (angle_deg * it as f64 / 60.0).to_radians();
                let kh = k * th.sin();
                let g = self.response(p, kh * az.cos(), kh * az.sin());
                let e = Complex64::from_polar(1.0, p * th.cos());
                amp = amp.max((g.norm() - 1.0).abs());
                ph = ph.max((g * e.conj()).arg().abs());
                tot = tot.max((g - e).norm());
            }
        }
        (amp, ph, tot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_are_monotone_and_accurate() {
        for kind in [FilterKind::Taylor8, FilterKind::Optimised] {
            let c = kind.taps();
            assert!(symbol(&c, 0.0).abs() < 1e-12, "{kind}: symbol(0) = {}", symbol(&c, 0.0));
            let mut prev = -1.0;
            for i in 0..=1000 {
                let s = symbol(&c, std::f64::consts::PI * i as f64 / 1000.0);
                assert!(s > prev, "{kind}: symbol not increasing at {i}");
                prev = s;
            }
        }
        let c = FilterKind::Optimised.taps();
        let worst = (1..=100).map(|i| {
            let k = OPTIMISED_BAND * i as f64 / 100.0;
            ((symbol(&c, k) - k * k) / (k * k)).abs()
        }).fold(0.0, f64::max);
        assert!(worst < 5e-3, "optimised filter error {worst}");
        let t = FilterKind::Taylor8.taps();
        let k = 0.25 * std::f64::consts::PI;
        assert!(((symbol(&t, k) - k * k) / (k * k)).abs() < 1e-4);
    }

    #[test]
    fn rows_are_stable_and_fit_the_passband() {
        let params = DesignParams::default();
        let q = 2.0 * symbol(&params.filter.taps(), std::f64::consts::PI);
        for p in [0.1, 0.3, 0.6, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0] {
            let d = design_row(p, q, &params);
            assert!(d.max_gain <= MAX_GAIN + 1e-12, "p {p}: gain {}", d.max_gain);
            println!("p {p}: fit error {:.2e}", d.fit_error);
            assert!(d.fit_error < 2e-2, "p {p}: fit error {}", d.fit_error);
        }
    }

    #[test]
    fn interpolated_rows_stay_accurate_and_stable() {
        // Linear interpolation between rows dp apart keeps the passband error near the rows' own.
        let params = DesignParams::default();
        let q = 2.0 * symbol(&params.filter.taps(), std::f64::consts::PI);
        let sin_t = params.max_angle_deg.to_radians().sin();
        for (p, dp) in [(0.5, 0.01), (1.7, 0.01), (3.1, 0.02)] {
            let r = design_rows(&[p - dp, p, p + dp], q, &params);
            let (a, b) = (&r[1], &r[2]);
            let pm = p + dp / 2.0;
            let x_pass = 1.0 - 2.0 * pm * pm * sin_t * sin_t / q;
            let (mut err, mut gain) = (0.0f64, 0.0f64);
            for i in 0..=2000 {
                let x = -1.0 + 2.0 * i as f64 / 2000.0;
                let g = (cheb_eval(&a.coef, x) + cheb_eval(&b.coef, x)) * 0.5;
                gain = gain.max(g.norm());
                if x >= x_pass {
                    err = err.max((g - exact_response(x, pm, q)).norm());
                }
            }
            let rows_err = a.fit_error.max(b.fit_error);
            println!("p {pm}: interpolated error {err:.2e} (rows {rows_err:.2e}), gain {gain}");
            assert!(err < rows_err + 2e-3, "p {pm}: interpolated error {err}");
            assert!(gain <= MAX_GAIN + 1e-12);
        }
    }

    #[test]
    fn operator_stencil_maps_the_spectrum_onto_minus_one_one() {
        let sp = Spacing { dx: 12.5, dy: 20.0, dz: 10.0, two_d: false };
        let op = Operator::new(DesignParams::default(), sp, 0.2, 0.4, 3).unwrap();
        let st = op.stencil;
        let at = |kx: f64, ky: f64| {
            st.c as f64 + 2.0 * (0..4).map(|j| st.ax[j] as f64 * ((j + 1) as f64 * kx).cos()
                + st.ay[j] as f64 * ((j + 1) as f64 * ky).cos()).sum::<f64>()
        };
        assert!((at(0.0, 0.0) - 1.0).abs() < 1e-6);
        assert!((at(std::f64::consts::PI, std::f64::consts::PI) + 1.0).abs() < 1e-5);
        assert!((op.x_of(0.01, 0.02) - at(0.01 * 12.5, 0.02 * 20.0)).abs() < 1e-5);
    }
}
