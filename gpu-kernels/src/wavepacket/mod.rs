//! 3D wave packets with the USFFT (paper 3: Nikitin, Duchkov, Romanenko, Andersson 2013): the math
//! shared by the CPU reference and the kernels.
//!
//! The frame (docs/notes/wavepacket.md has the derivation and the measured numbers):
//! - frequencies live on a lattice of period `M` (lattice index j in [-M/2, M - M/2) per axis,
//!   spectrum value f^(j) = sum_x f(x) e^{-2 pi i j.x / M}, x centred on the cube);
//! - the windows are a coarsest low-pass box, dyadic band-pass scales with cube-shaped ("|xi|_inf")
//!   coronae, each split over the 6 cube faces and, per face, into `n x n` angular wedges
//!   (parabolic scaling: `n` doubles every second scale); the finest scale can be left isotropic,
//!   as CurveLab's default, to keep the redundancy under 4;
//! - windows are smooth bumps divided by the root of their summed squares, so sum phi^2 = 1 at every
//!   lattice point and the adjoint is the inverse;
//! - every box's local grid is a run of lattice points that follows the wedge's direction (a
//!   staircase shear), wrapped onto an `L_r x L x L` rectangle (as in the wrapping curvelets of the
//!   paper's ref. [2]); all boxes sharing one lattice is what makes the frame exactly tight;
//! - the USFFT (paper's formula (1), Dutt-Rokhlin gridding) evaluates the spectrum at the lattice
//!   points from an oversampled global FFT of size `P ~ 2N` whose grid is incommensurate with the
//!   lattice (kappa_j = j P / M is irregular on the global grid).

#[cfg(target_arch = "nvptx64")]
pub mod kernels;

use crate::math::{abs, exp, floor, round, sin_cos, sqrt};
use core::num::NonZeroU32;

/// Most scales a frame can have (low-pass included): 12 covers cubes up to 2^13 samples.
pub const MAX_SCALES: usize = 12;
/// Largest stencil half-width the kernels are instantiated for.
pub const MAX_Q: i32 = 8;

/// Everything a kernel needs to know about the frame, passed by value (`#[repr(C)]`, 4-byte fields).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Geometry {
    /// Data cube side N (samples).
    pub n: i32,
    /// Frame lattice period M (>= N; M - N is the zero guard band).
    pub m: i32,
    /// USFFT global grid P (about 2N, chosen incommensurate with M).
    pub p: i32,
    /// Gaussian stencil half-width: 2q global-grid points per axis.
    pub q: i32,
    /// Gaussian exponent: w(d) = exp(-lambda d^2), d in global-grid bins.
    pub lambda: f32,
    /// Radial transition width, as a fraction of R_j (low-pass j is flat to R_j, zero from (1+tau) R_j).
    pub tau: f32,
    /// Angular transition half-width, as a fraction of the wedge half-width.
    pub beta: f32,
    /// Scales including the low-pass: 0 = low-pass, 1..nscales-1 band-pass, nscales-1 = finest.
    pub nscales: i32,
    /// R_0 in lattice bins; R_j = r0 * 2^j.
    pub r0: f32,
    /// 1: the finest scale is one isotropic box; 0: it is split into wedges like the others.
    pub finest_isotropic: i32,
    /// Wedges per face axis for directional scales (0 for the low-pass and isotropic scales).
    pub wedges: [i32; MAX_SCALES],
    /// Directional: first radial lattice index of the boxes. Low-pass/isotropic: first lattice index.
    pub lo: [i32; MAX_SCALES],
    /// Box shape (radial, lateral, lateral) per scale (cubes for the low-pass/isotropic boxes).
    pub shape: [[i32; 3]; MAX_SCALES],
    /// Boxes per scale.
    pub boxes: [i32; MAX_SCALES],
    /// Coefficient scale per scale: (M^3 * box points)^(-1/2), which makes the frame Parseval.
    pub norm: [f32; MAX_SCALES],
}

/// What kind of box a scale holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScaleKind {
    LowPass,
    Directional,
    Isotropic,
}

impl Geometry {
    #[inline(always)]
    pub fn kind(&self, j: usize) -> ScaleKind {
        if j == 0 {
            ScaleKind::LowPass
        } else if j as i32 == self.nscales - 1 && self.finest_isotropic != 0 {
            ScaleKind::Isotropic
        } else {
            ScaleKind::Directional
        }
    }
    /// R_j: flat radius of the j-th low-pass cut-off.
    #[inline(always)]
    pub fn radius(&self, j: usize) -> f32 { self.r0 * (1u32 << j) as f32 }
    /// Points per box of scale j.
    #[inline(always)]
    pub fn box_points(&self, j: usize) -> usize {
        self.shape[j][0] as usize * self.shape[j][1] as usize * self.shape[j][2] as usize
    }
    /// First lattice index: -floor(M/2).
    #[inline(always)]
    pub fn lattice_lo(&self) -> i32 { -(self.m / 2) }
    /// Whether lattice index j is the representative in [-M/2, M - M/2).
    #[inline(always)]
    pub fn in_lattice(&self, j: i32) -> bool { j >= self.lattice_lo() && j < self.m - self.m / 2 }
}

// ---- integer helpers without panicking paths (kernels must not trap) -------------------------

#[inline(always)]
fn nz(b: i32) -> NonZeroU32 { NonZeroU32::new(b as u32).unwrap_or(NonZeroU32::MIN) }

/// Euclidean remainder a mod b for b > 0 (result in [0, b)).
#[inline(always)]
pub fn emod(a: i32, b: i32) -> i32 {
    if a >= 0 {
        (a as u32 % nz(b)) as i32
    } else {
        let r = ((a as i64).unsigned_abs() as u32 % nz(b)) as i32;
        if r == 0 { 0 } else { b - r }
    }
}

/// floor(a / b) for b > 0.
#[inline(always)]
pub fn floor_div(a: i32, b: i32) -> i32 { (a - emod(a, b)) / b.max(1) }

/// Position of centred sample coordinate `c` (in [-len/2, len - len/2)) in an FFT-ordered array of `len`.
#[inline(always)]
pub fn fft_pos(c: i32, len: i32) -> i32 { emod(c, len) }

/// Inverse of [`fft_pos`] for a lattice of period m: array index u in [0, m) -> lattice index j.
#[inline(always)]
pub fn lattice_index(u: i32, m: i32) -> i32 { if u < m - m / 2 { u } else { u - m } }

// ---- USFFT: the global-grid position of a lattice point and the Gaussian weights -------------

/// kappa_j = j P / M split into floor and fraction, in exact integer arithmetic (a float product
/// would put ~1e-5 of a bin of error into kappa for P ~ 1000, i.e. a 5e-5 phase error).
#[inline(always)]
pub fn kappa(j: i32, p: i32, m: i32) -> (i32, f32) {
    let num = j * p;
    let i0 = floor_div(num, m);
    let rem = num - i0 * m;
    (i0, rem as f32 / m as f32)
}

/// Gaussian weight of global-grid point i0 + t for a lattice point at kappa = i0 + frac.
/// The adjoint computes the same expression, so forward and adjoint use identical weights.
#[inline(always)]
pub fn gauss(lambda: f32, frac: f32, t: i32) -> f32 {
    let d = frac - t as f32;
    exp(-lambda * d * d)
}

/// Space-domain correction of the USFFT (deconvolution by the Gaussian's transform) for centred
/// sample coordinate c: 1 / G(c), G(c) = sqrt(pi/lambda) exp(-pi^2 c^2 / (lambda P^2)).
#[inline(always)]
pub fn correction(lambda: f32, p: i32, c: i32) -> f32 {
    let pi = core::f32::consts::PI;
    let x = c as f32 / p as f32;
    sqrt(lambda / pi) * exp(pi * pi * x * x / lambda)
}

/// Stencil half-width q and Gaussian exponent lambda for accuracy `eps` with oversampling about 2.
/// Measured 1D errors (relative L2, random data) with lambda = 2.28 / q: q=3 6e-4, 4 5e-5, 5 4e-6,
/// 6 5e-7, 7 7e-8, 8 6e-9; the 3D error is about sqrt(3) times the 1D one.
pub fn usfft_params(eps: f64) -> (i32, f32) {
    const ERR1D: [f64; 9] = [1.0, 1.0, 5.9e-3, 6.1e-4, 5.0e-5, 3.9e-6, 5.4e-7, 6.9e-8, 6.4e-9];
    let mut q = 2;
    while q < MAX_Q && 1.8 * ERR1D[q as usize] > eps {
        q += 1;
    }
    (q, 2.28 / q as f32)
}

// ---- windows -------------------------------------------------------------------------------

/// C-infinity step: 0 for x <= 0, 1 for x >= 1, nu(x) + nu(1 - x) = 1.
#[inline(always)]
pub fn smooth_step(x: f32) -> f32 {
    if x <= 0.0 {
        0.0
    } else if x >= 1.0 {
        1.0
    } else {
        1.0 / (1.0 + exp(1.0 / x - 1.0 / (1.0 - x)))
    }
}

/// cos(pi/2 * nu(x)): 1 for x <= 0, 0 for x >= 1, smooth between.
#[inline(always)]
pub fn fall(x: f32) -> f32 {
    if x <= 0.0 {
        1.0
    } else if x >= 1.0 {
        0.0
    } else {
        sin_cos(core::f32::consts::FRAC_PI_2 * smooth_step(x)).1
    }
}

/// Tensor-product low-pass of cut-off j: prod_i fall((|xi_i|/R_j - 1)/tau).
#[inline(always)]
pub fn lowpass(g: &Geometry, j: usize, xi: [i32; 3]) -> f32 {
    let inv_r = 1.0 / g.radius(j);
    let mut v = 1.0;
    let mut a = 0;
    while a < 3 {
        let u = abs(xi[a] as f32) * inv_r;
        v *= fall((u - 1.0) / g.tau);
        a += 1;
    }
    v
}

/// Radial window of scale j: the low-pass for j = 0, sqrt(Phi_j^2 - Phi_{j-1}^2) for band-pass
/// scales and sqrt(1 - Phi_{J-1}^2) for the finest; the squares telescope to 1.
#[inline(always)]
pub fn radial(g: &Geometry, j: usize, xi: [i32; 3]) -> f32 {
    if j == 0 {
        return lowpass(g, 0, xi);
    }
    let inner = lowpass(g, j - 1, xi);
    let outer = if j as i32 == g.nscales - 1 { 1.0 } else { lowpass(g, j, xi) };
    let d = outer * outer - inner * inner;
    if d > 0.0 { sqrt(d) } else { 0.0 }
}

/// Lateral axes (b, c) of a face whose normal is axis a.
#[inline(always)]
pub fn lateral_axes(a: usize) -> (usize, usize) {
    match a {
        0 => (1, 2),
        1 => (0, 2),
        _ => (0, 1),
    }
}

/// Centre slope of wedge l of n over [-1, 1].
#[inline(always)]
pub fn wedge_centre(l: i32, n: i32) -> f32 { -1.0 + (2 * l + 1) as f32 / n as f32 }

/// Raw angular bump of wedge l of n at slope s: flat for |s - c_l| n <= 1 - beta, zero from 1 + beta.
#[inline(always)]
pub fn bump(s: f32, l: i32, n: i32, beta: f32) -> f32 {
    let d = abs(s - wedge_centre(l, n)) * n as f32;
    fall((d - (1.0 - beta)) / (2.0 * beta))
}

/// Wedges of one face axis that can be non-zero at slope s: l in [lo, hi] (empty if lo > hi).
#[inline(always)]
pub fn wedge_range(s: f32, n: i32, beta: f32) -> (i32, i32) {
    let u = 0.5 * n as f32 * (s + 1.0) - 0.5; // wedge coordinate: c_l <-> u = l
    let h = 0.5 * (1.0 + beta);
    let lo = floor(u - h) as i32 + 1;
    let hi = -(floor(-(u + h)) as i32) - 1; // largest integer < u + h
    (if lo < 0 { 0 } else { lo }, if hi > n - 1 { n - 1 } else { hi })
}

/// The slopes of lattice point xi on face f (axis f/2, sign + for even f), if it lies in the
/// face's (extended) cone: r = sign * xi_a > 0 and |s|, |t| < 1 + beta/n.
#[inline(always)]
pub fn face_slopes(xi: [i32; 3], f: usize, n: i32, beta: f32) -> Option<(i32, f32, f32)> {
    let a = f / 2;
    let r = if f % 2 == 0 { xi[a] } else { -xi[a] };
    if r <= 0 {
        return None;
    }
    let (b, c) = lateral_axes(a);
    let inv = 1.0 / r as f32;
    let s = xi[b] as f32 * inv;
    let t = xi[c] as f32 * inv;
    let lim = 1.0 + beta / n as f32;
    if abs(s) >= lim || abs(t) >= lim {
        return None;
    }
    Some((r, s, t))
}

/// sum_l bump_l(s)^2 over the wedges of one face axis.
#[inline(always)]
pub fn bump_energy(s: f32, n: i32, beta: f32) -> f32 {
    let (lo, hi) = wedge_range(s, n, beta);
    let mut e = 0.0;
    let mut l = lo;
    while l <= hi {
        let v = bump(s, l, n, beta);
        e += v * v;
        l += 1;
    }
    e
}

/// Normaliser of a directional scale: sum over faces and wedges of the squared raw bumps.
/// Positive wherever xi != 0 (the face of the largest |xi_a| has |s|, |t| <= 1, where the
/// bumps cover every slope).
#[inline(always)]
pub fn angular_norm(xi: [i32; 3], n: i32, beta: f32) -> f32 {
    let mut d = 0.0;
    let mut f = 0;
    while f < 6 {
        if let Some((_, s, t)) = face_slopes(xi, f, n, beta) {
            d += bump_energy(s, n, beta) * bump_energy(t, n, beta);
        }
        f += 1;
    }
    d
}

/// Final directional window from its parts; one expression shared by forward and combine so both
/// compute the same float.
#[inline(always)]
pub fn directional_value(rad: f32, vl: f32, vm: f32, norm: f32) -> f32 {
    if norm > 0.0 { rad * (vl * vm) / sqrt(norm) } else { 0.0 }
}

/// Window of directional box (f, l, m) of scale j at lattice point xi.
#[inline(always)]
pub fn window_directional(g: &Geometry, j: usize, f: usize, l: i32, m: i32, xi: [i32; 3]) -> f32 {
    let n = g.wedges[j];
    let Some((_, s, t)) = face_slopes(xi, f, n, g.beta) else { return 0.0 };
    let vl = bump(s, l, n, g.beta);
    let vm = bump(t, m, n, g.beta);
    if vl == 0.0 || vm == 0.0 {
        return 0.0;
    }
    let rad = radial(g, j, xi);
    if rad == 0.0 {
        return 0.0;
    }
    directional_value(rad, vl, vm, angular_norm(xi, n, g.beta))
}

// ---- box grids ---------------------------------------------------------------------------

/// First lateral lattice index of a directional box's staircase at radius r: the box follows the
/// wedge centre line, L points wide.
#[inline(always)]
pub fn stair_start(centre: f32, r: i32, l: i32) -> i32 { round(centre * r as f32) as i32 - l / 2 }

/// Decodes box `b` of a directional scale into (face, l, m).
#[inline(always)]
pub fn directional_box(b: i32, n: i32) -> (usize, i32, i32) {
    let nn = n * n;
    let f = b / nn.max(1);
    let rest = b - f * nn;
    (f as usize, rest / n.max(1), rest - (rest / n.max(1)) * n)
}

/// Lattice point of local point i (in [0, shape)) of box `b` of scale j, and its window value
/// times the scale's norm (0 when the point falls outside the centred lattice or the window).
/// Local indices are lattice indices modulo the box shape (the wrapping), so coefficient k of a
/// box sits at spatial position k M / shape along each axis.
#[inline(always)]
pub fn box_point(g: &Geometry, j: usize, b: i32, i: [i32; 3]) -> ([i32; 3], f32) {
    let sh = g.shape[j];
    match g.kind(j) {
        ScaleKind::LowPass | ScaleKind::Isotropic => {
            let lo = g.lo[j];
            let xi = [lo + emod(i[0] - lo, sh[0]), lo + emod(i[1] - lo, sh[1]), lo + emod(i[2] - lo, sh[2])];
            if !(g.in_lattice(xi[0]) && g.in_lattice(xi[1]) && g.in_lattice(xi[2])) {
                return (xi, 0.0);
            }
            (xi, radial(g, j, xi) * g.norm[j])
        }
        ScaleKind::Directional => {
            let n = g.wedges[j];
            let (f, l, m) = directional_box(b, n);
            let a = f / 2;
            let (bb, cc) = lateral_axes(a);
            let r_lo = g.lo[j];
            let r = r_lo + emod(i[0] - r_lo, sh[0]);
            let s0 = stair_start(wedge_centre(l, n), r, sh[1]);
            let t0 = stair_start(wedge_centre(m, n), r, sh[2]);
            let mut xi = [0i32; 3];
            xi[a] = if f % 2 == 0 { r } else { -r };
            xi[bb] = s0 + emod(i[1] - s0, sh[1]);
            xi[cc] = t0 + emod(i[2] - t0, sh[2]);
            if !(g.in_lattice(xi[0]) && g.in_lattice(xi[1]) && g.in_lattice(xi[2])) {
                return (xi, 0.0);
            }
            (xi, window_directional(g, j, f, l, m, xi) * g.norm[j])
        }
    }
}

/// Calls `visit(scale, box, local_linear_index, window * norm)` for every box whose window is
/// non-zero at lattice point xi: the inverse's gather over boxes (at most 2 scales x 3 faces x
/// 2 x 2 wedges), computed from the geometry instead of stored lists.
#[inline(always)]
pub fn for_each_box_at<F: FnMut(usize, i32, usize, f32)>(g: &Geometry, xi: [i32; 3], mut visit: F) {
    let mut amax = abs(xi[0] as f32);
    if abs(xi[1] as f32) > amax {
        amax = abs(xi[1] as f32);
    }
    if abs(xi[2] as f32) > amax {
        amax = abs(xi[2] as f32);
    }
    let last = (g.nscales - 1) as usize;
    let mut j = 0usize;
    while j <= last {
        // Radial support of scale j: (R_{j-1}, (1+tau) R_j) in |xi|_inf (the finest is open above).
        // (widened by 1e-6 so float rounding never hides a window that `radial` finds non-zero)
        let inner_ok = j == 0 || amax > g.radius(j - 1) * (1.0 - 1e-6);
        let outer_ok = j == last || amax < (1.0 + g.tau) * g.radius(j) * (1.0 + 1e-6);
        if inner_ok && outer_ok {
            visit_scale(g, j, xi, &mut visit);
        }
        j += 1;
    }
}

#[inline(always)]
fn visit_scale<F: FnMut(usize, i32, usize, f32)>(g: &Geometry, j: usize, xi: [i32; 3], visit: &mut F) {
    let sh = g.shape[j];
    match g.kind(j) {
        ScaleKind::LowPass | ScaleKind::Isotropic => {
            let lo = g.lo[j];
            let mut k = 0;
            while k < 3 {
                if xi[k] < lo || xi[k] >= lo + sh[k] {
                    return;
                }
                k += 1;
            }
            let w = radial(g, j, xi);
            if w != 0.0 {
                let idx = (emod(xi[0], sh[0]) * sh[1] + emod(xi[1], sh[1])) as usize * sh[2] as usize
                    + emod(xi[2], sh[2]) as usize;
                visit(j, 0, idx, w * g.norm[j]);
            }
        }
        ScaleKind::Directional => {
            let rad = radial(g, j, xi);
            if rad == 0.0 {
                return;
            }
            let n = g.wedges[j];
            let beta = g.beta;
            let norm = angular_norm(xi, n, beta);
            let mut f = 0usize;
            while f < 6 {
                if let Some((r, s, t)) = face_slopes(xi, f, n, beta) {
                    let r_lo = g.lo[j];
                    if r >= r_lo && r < r_lo + sh[0] {
                        let a = f / 2;
                        let (bb, cc) = lateral_axes(a);
                        let (l_lo, l_hi) = wedge_range(s, n, beta);
                        let (m_lo, m_hi) = wedge_range(t, n, beta);
                        let ir = emod(r, sh[0]);
                        let ib = emod(xi[bb], sh[1]);
                        let ic = emod(xi[cc], sh[2]);
                        let idx = (ir * sh[1] + ib) as usize * sh[2] as usize + ic as usize;
                        let mut l = l_lo;
                        while l <= l_hi {
                            let vl = bump(s, l, n, beta);
                            let s0 = stair_start(wedge_centre(l, n), r, sh[1]);
                            if vl != 0.0 && xi[bb] >= s0 && xi[bb] < s0 + sh[1] {
                                let mut m = m_lo;
                                while m <= m_hi {
                                    let vm = bump(t, m, n, beta);
                                    let t0 = stair_start(wedge_centre(m, n), r, sh[2]);
                                    if vm != 0.0 && xi[cc] >= t0 && xi[cc] < t0 + sh[2] {
                                        let b = (f as i32 * n + l) * n + m;
                                        visit(j, b, idx, directional_value(rad, vl, vm, norm) * g.norm[j]);
                                    }
                                    m += 1;
                                }
                            }
                            l += 1;
                        }
                    }
                }
                f += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emod_and_floor_div() {
        for a in -50..50 {
            for b in 1..9 {
                assert_eq!(emod(a, b), a.rem_euclid(b));
                assert_eq!(floor_div(a, b), a.div_euclid(b));
            }
        }
    }

    #[test]
    fn smooth_step_is_a_partition() {
        for k in 0..=100 {
            let x = k as f32 / 100.0;
            assert!((smooth_step(x) + smooth_step(1.0 - x) - 1.0).abs() < 1e-6);
            let (a, b) = (fall(x), fall(1.0 - x));
            assert!((a * a + b * b - 1.0).abs() < 1e-6, "x {x}");
        }
    }

    #[test]
    fn wedge_range_covers_nonzero_bumps() {
        for n in [1, 2, 4, 8] {
            for k in -140..=140 {
                let s = k as f32 / 100.0;
                let (lo, hi) = wedge_range(s, n, 0.35);
                for l in 0..n {
                    if bump(s, l, n, 0.35) > 0.0 {
                        assert!(l >= lo && l <= hi, "n {n} s {s} l {l} range {lo}..{hi}");
                    }
                }
            }
        }
    }

    #[test]
    fn kappa_is_exact() {
        for j in -40..40 {
            let (i0, f) = kappa(j, 70, 32);
            let exact = j as f64 * 70.0 / 32.0;
            assert_eq!(i0, exact.floor() as i32);
            assert!((f as f64 - (exact - exact.floor())).abs() < 1e-7);
        }
    }
}
