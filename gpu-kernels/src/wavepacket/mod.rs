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

pub mod kernels;
mod windows;

pub use windows::*;

use crate::math::{abs, exp, floor, mul_add, round, sqrt};
use crate::device::nonzero_usize;
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

/// Where the separable passes' lines lie (kernel parameter, `#[repr(C)]`): a pass reads lines
/// indexed by two numbers and writes lines indexed by two others, each line at `base + first * s0 +
/// second * s1` lines into its buffer, for the b in `b_first..b_end`. The resampling
/// (`wp_resample_qN`) reads lines (a, b) at (in_base, in0, in1) and writes lines (u, a) at
/// (out_base, out0, out1); its adjoint (`wp_adjoint_qN`) reads (u, a) and writes (a, b), so an
/// adjoint pass's lines are its forward pass's, the two sides swapped ([`Lines::adjoint`]). The
/// plain rotation, (d0, d1, P) -> (M, d0, P) ([`Lines::rotation`]), lays every axis after the one
/// before; slabs of x0 planes (pipelined cubes) lay the x1 pass's buffer out
/// slab after slab instead, so a slab's lines are one block (the host sets those strides).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lines {
    pub in_base: u32,
    pub in0: u32,
    pub in1: u32,
    pub out_base: u32,
    pub out0: u32,
    pub out1: u32,
    pub b_first: u32,
    pub b_end: u32,
}

impl Lines {
    /// The resampling of (d0, d1, P) lines into (M, d0, .), every b.
    pub const fn rotation(d0: u32, d1: u32) -> Lines {
        Lines { in_base: 0, in0: d1, in1: 1, out_base: 0, out0: d0, out1: 1, b_first: 0, b_end: d1 }
    }
    /// The lines of the adjoint pass: it reads where the forward pass writes and writes where it
    /// reads, for the same b.
    pub const fn adjoint(self) -> Lines {
        Lines { in_base: self.out_base, in0: self.out0, in1: self.out1, out_base: self.in_base, out0: self.in0, out1: self.in1,
            ..self }
    }
    /// Input line (first, second).
    #[inline(always)]
    pub const fn input(&self, first: u32, second: u32) -> usize {
        self.in_base as usize + first as usize * self.in0 as usize + second as usize * self.in1 as usize
    }
    /// Output line (first, second).
    #[inline(always)]
    pub const fn output(&self, first: u32, second: u32) -> usize {
        self.out_base as usize + first as usize * self.out0 as usize + second as usize * self.out1 as usize
    }
}

/// Device pointers of the per-scale box buffers (the inverse's gather reads all scales).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct ScalePtrs {
    pub p: [u64; MAX_SCALES],
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

// ---- integer functions without panicking paths (kernels must not trap) -------------------------

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

/// Lattice point of local point i (in [0, shape)) of box `b` of scale j (local indices are lattice
/// indices modulo the box shape: the wrapping, so coefficient k of a box sits at spatial position
/// k M / shape along each axis), and whether it lies in the centred lattice.
#[inline(always)]
pub fn box_lattice(g: &Geometry, j: usize, b: i32, i: [i32; 3]) -> ([i32; 3], bool) {
    let sh = g.shape[j];
    let xi = match g.kind(j) {
        ScaleKind::LowPass | ScaleKind::Isotropic => {
            let lo = g.lo[j];
            [lo + emod(i[0] - lo, sh[0]), lo + emod(i[1] - lo, sh[1]), lo + emod(i[2] - lo, sh[2])]
        }
        ScaleKind::Directional => {
            let n = g.wedges[j];
            let (f, l, m) = directional_box(b, n);
            let a = (f / 2).min(2); // f < 6 for every box of the scale; the min only proves it (no bounds-check path)
            let (bb, cc) = lateral_axes(a);
            let r_lo = g.lo[j];
            let r = r_lo + emod(i[0] - r_lo, sh[0]);
            let s0 = stair_start(wedge_centre(l, n), r, sh[1]);
            let t0 = stair_start(wedge_centre(m, n), r, sh[2]);
            let mut xi = [0i32; 3];
            xi[a] = if f % 2 == 0 { r } else { -r };
            xi[bb] = s0 + emod(i[1] - s0, sh[1]);
            xi[cc] = t0 + emod(i[2] - t0, sh[2]);
            xi
        }
    };
    (xi, g.in_lattice(xi[0]) && g.in_lattice(xi[1]) && g.in_lattice(xi[2]))
}

/// [`box_lattice`] and the window value times the scale's norm there (0 outside the lattice or
/// the window). Engines tabulate this once per box point.
#[inline(always)]
pub fn box_point(g: &Geometry, j: usize, b: i32, i: [i32; 3]) -> ([i32; 3], f32) {
    let (xi, inside) = box_lattice(g, j, b, i);
    if !inside {
        return (xi, 0.0);
    }
    let w = match g.kind(j) {
        ScaleKind::LowPass | ScaleKind::Isotropic => radial(g, j, xi),
        ScaleKind::Directional => {
            let (f, l, m) = directional_box(b, g.wedges[j]);
            window_directional(g, j, f, l, m, xi)
        }
    };
    (xi, w * g.norm[j])
}

/// Local (i0, i1, i2) of linear index l of a box of scale j.
#[inline(always)]
pub fn box_local(g: &Geometry, j: usize, l: usize) -> [i32; 3] {
    let sh = g.shape[j];
    // Box shapes are >= 1 (the geometry's construction): `nonzero_usize` keeps the kernels free of a division panic path.
    let (s12, s1, s2) = (nonzero_usize(sh[1] as usize * sh[2] as usize), nonzero_usize(sh[1] as usize), nonzero_usize(sh[2] as usize));
    [(l / s12) as i32, ((l / s2) % s1) as i32, (l % s2) as i32]
}

/// Calls `visit(scale, box, local_linear_index)` for every box that may hold lattice point xi (a
/// superset of the boxes whose window is non-zero there; the window itself comes from a table).
/// At most 2 scales x 3 faces x 2 x 2 wedges, from the geometry alone: integer work and a few
/// divisions, no window evaluation.
#[inline(always)]
pub fn for_each_box_index_at<F: FnMut(usize, i32, usize)>(g: &Geometry, xi: [i32; 3], mut visit: F) {
    let amax = abs(xi[0] as f32).max(abs(xi[1] as f32)).max(abs(xi[2] as f32));
    let last = ((g.nscales - 1) as usize).min(MAX_SCALES - 1); // nscales <= MAX_SCALES; the min proves the indexing in bounds
    let mut j = 0usize;
    while j <= last {
        let inner_ok = j == 0 || amax > g.radius(j - 1) * (1.0 - 1e-6);
        let outer_ok = j == last || amax < (1.0 + g.tau) * g.radius(j) * (1.0 + 1e-6);
        if inner_ok && outer_ok {
            let sh = g.shape[j];
            match g.kind(j) {
                ScaleKind::LowPass | ScaleKind::Isotropic => {
                    let lo = g.lo[j];
                    if xi.iter().enumerate().all(|(k, &x)| x >= lo && x < lo + sh[k]) {
                        let idx = (emod(xi[0], sh[0]) * sh[1] + emod(xi[1], sh[1])) as usize * sh[2] as usize
                            + emod(xi[2], sh[2]) as usize;
                        visit(j, 0, idx);
                    }
                }
                ScaleKind::Directional => {
                    let n = g.wedges[j];
                    let mut f = 0usize;
                    while f < 6 {
                        if let Some((r, s, t)) = face_slopes(xi, f, n, g.beta) {
                            let r_lo = g.lo[j];
                            if r >= r_lo && r < r_lo + sh[0] {
                                let (bb, cc) = lateral_axes(f / 2);
                                let (l_lo, l_hi) = wedge_range(s, n, g.beta);
                                let (m_lo, m_hi) = wedge_range(t, n, g.beta);
                                let idx = (emod(r, sh[0]) * sh[1] + emod(xi[bb], sh[1])) as usize * sh[2] as usize
                                    + emod(xi[cc], sh[2]) as usize;
                                let mut l = l_lo;
                                while l <= l_hi {
                                    let s0 = stair_start(wedge_centre(l, n), r, sh[1]);
                                    if xi[bb] >= s0 && xi[bb] < s0 + sh[1] {
                                        let mut m = m_lo;
                                        while m <= m_hi {
                                            let t0 = stair_start(wedge_centre(m, n), r, sh[2]);
                                            if xi[cc] >= t0 && xi[cc] < t0 + sh[2] {
                                                visit(j, (f as i32 * n + l) * n + m, idx);
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
        j += 1;
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
    let last = ((g.nscales - 1) as usize).min(MAX_SCALES - 1); // nscales <= MAX_SCALES; the min proves the indexing in bounds
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

// ---- per-output-point USFFT sums (the kernels' bodies; host-compiled too, so the CPU tests
// ---- run them over emulated grids before any GPU run) --------------------------------------

/// Reads one complex value: `ld.global.nc` (the read-only/texture path the paper used a texture
/// for) on the GPU, a plain load on the host.
///
/// # Safety
/// `p` valid for two reads.
#[inline(always)]
pub unsafe fn load2(p: *const f32) -> (f32, f32) {
    // SAFETY: the caller's contract (valid for two reads, read-only during the kernel).
    unsafe { crate::device::ldg_f32x2_ordered(p) }
}

/// ceil(a / b) for b > 0.
#[inline(always)]
pub fn ceil_div(a: i32, b: i32) -> i32 { -floor_div(-a, b) }

/// Separable forward: lattice point u (FFT order) of one line of P global-grid values.
///
/// # Safety
/// `line` valid for 2P floats.
#[inline(always)]
pub unsafe fn resample_point<const Q: usize>(g: &Geometry, u: i32, line: *const f32) -> (f32, f32) {
    let j = lattice_index(u, g.m);
    let (i0, frac) = kappa(j, g.p, g.m);
    let s = i0 - Q as i32 + 1;
    let (mut re, mut im) = (0.0f32, 0.0f32);
    if s >= 0 && s + 2 * Q as i32 <= g.p {
        let base = unsafe { line.add(2 * s as usize) };
        let mut k = 0;
        while k < 2 * Q {
            let w = gauss(g.lambda, frac, k as i32 - Q as i32 + 1);
            let (x, y) = unsafe { load2(base.add(2 * k)) };
            re += w * x;
            im += w * y;
            k += 1;
        }
    } else {
        let mut k = 0;
        while k < 2 * Q {
            let w = gauss(g.lambda, frac, k as i32 - Q as i32 + 1);
            let idx = emod(s + k as i32, g.p) as usize;
            let (x, y) = unsafe { load2(line.add(2 * idx)) };
            re += w * x;
            im += w * y;
            k += 1;
        }
    }
    (re, im)
}

/// Separable adjoint: global-grid point p of line (a, b), gathering the lattice points whose
/// stencil covers it from the input's lines of in_last values, lattice point u's line of a at
/// [`Lines::input`]`(u, a)` (b centred on in_last when `centre` is set).
///
/// # Safety
/// `inp` valid for every line that `lines` reaches.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn adjoint_point<const Q: usize>(g: &Geometry, lines: &Lines, d1: u32, centre: u32, in_last: u32,
    inp: *const f32, a: u32, b: u32, p: u32) -> (f32, f32) {
    let (m, pp) = (g.m, g.p);
    let q = Q as i32;
    let pos = if centre != 0 { fft_pos(b as i32 - d1 as i32 / 2, in_last as i32) as usize } else { b as usize };
    let (mut re, mut im) = (0.0f32, 0.0f32);
    // Unwrapped global index mm = p or p - P (the forward's i0 + t runs over [-P/2-q+1, P/2+q]).
    let mut c = 0;
    while c < 2 {
        let mm = p as i32 - c * pp;
        c += 1;
        // floor(kappa_j) in [mm - q, mm + q - 1]  <=>  (mm - q) M / P <= j < (mm + q) M / P.
        let j_lo = ceil_div((mm - q) * m, pp).max(-(m / 2));
        let j_hi = (ceil_div((mm + q) * m, pp) - 1).min(m - m / 2 - 1);
        let mut j = j_lo;
        while j <= j_hi {
            let (i0, frac) = kappa(j, pp, m);
            let w = gauss(g.lambda, frac, mm - i0);
            let u = emod(j, m) as usize;
            let (x, y) = unsafe { load2(inp.add(2 * (lines.input(u as u32, a) * in_last as usize + pos))) };
            re += w * x;
            im += w * y;
            j += 1;
        }
    }
    (re, im)
}

/// The paper's formula (1) at lattice point xi: the (2Q)^3 Gaussian sum over the P^3 spectrum,
/// per-axis weights hoisted into registers (optimisation 1), sums in registers (optimisation 3).
///
/// # Safety
/// `spec` valid for the P^3 complex array.
#[inline(always)]
pub unsafe fn stencil_point<const Q: usize>(g: &Geometry, spec: *const f32, xi: [i32; 3]) -> (f32, f32) {
    let p = g.p;
    let mut wt = [[0.0f32; 16]; 3];
    let mut start = [0i32; 3];
    let mut a = 0;
    while a < 3 {
        let (i0, frac) = kappa(xi[a], p, g.m);
        start[a] = i0 - Q as i32 + 1;
        let mut k = 0;
        while k < 2 * Q {
            wt[a][k] = gauss(g.lambda, frac, k as i32 - Q as i32 + 1);
            k += 1;
        }
        a += 1;
    }
    let pu = p as usize;
    let inner_fast = start[2] >= 0 && start[2] + 2 * Q as i32 <= p;
    let (mut re, mut im) = (0.0f32, 0.0f32);
    let mut k0 = 0;
    while k0 < 2 * Q {
        let r0 = emod(start[0] + k0 as i32, p) as usize;
        let (mut re1, mut im1) = (0.0f32, 0.0f32);
        let mut k1 = 0;
        while k1 < 2 * Q {
            let r1 = emod(start[1] + k1 as i32, p) as usize;
            let row = unsafe { spec.add(2 * (r0 * pu + r1) * pu) };
            let (mut re2, mut im2) = (0.0f32, 0.0f32);
            let mut k2 = 0;
            while k2 < 2 * Q {
                let c = if inner_fast { (start[2] + k2 as i32) as usize } else { emod(start[2] + k2 as i32, p) as usize };
                let (x, y) = unsafe { load2(row.add(2 * c)) };
                re2 += wt[2][k2] * x;
                im2 += wt[2][k2] * y;
                k2 += 1;
            }
            re1 += wt[1][k1] * re2;
            im1 += wt[1][k1] * im2;
            k1 += 1;
        }
        re += wt[0][k0] * re1;
        im += wt[0][k0] * im1;
        k0 += 1;
    }
    (re, im)
}

/// The paper's inverse gather at global-grid point m = (m0, m1, m2): the lattice values (M^3,
/// FFT order) within the stencil radius, from per-axis candidate lists of `k` (index, weight)
/// entries per global index (weight 0 pads).
///
/// # Safety
/// The lists hold P * k entries; `lat` the M^3 complex array.
#[inline(always)]
pub unsafe fn adjoint_stencil_point(m: usize, k: usize, list_idx: *const u32, list_w: *const f32, lat: *const f32,
    mm: [u32; 3]) -> (f32, f32) {
    let (l0, l1, l2) = (mm[0] as usize * k, mm[1] as usize * k, mm[2] as usize * k);
    let (mut re, mut im) = (0.0f32, 0.0f32);
    let mut a = 0;
    while a < k {
        let w0 = unsafe { *list_w.add(l0 + a) };
        if w0 != 0.0 {
            let u0 = unsafe { *list_idx.add(l0 + a) } as usize;
            let (mut re1, mut im1) = (0.0f32, 0.0f32);
            let mut b = 0;
            while b < k {
                let w1 = unsafe { *list_w.add(l1 + b) };
                if w1 != 0.0 {
                    let u1 = unsafe { *list_idx.add(l1 + b) } as usize;
                    let row = unsafe { lat.add(2 * (u0 * m + u1) * m) };
                    let (mut re2, mut im2) = (0.0f32, 0.0f32);
                    let mut c = 0;
                    while c < k {
                        let w2 = unsafe { *list_w.add(l2 + c) };
                        let u2 = unsafe { *list_idx.add(l2 + c) } as usize;
                        let (x, y) = unsafe { load2(row.add(2 * u2)) };
                        re2 += w2 * x;
                        im2 += w2 * y;
                        c += 1;
                    }
                    re1 += w1 * re2;
                    im1 += w1 * im2;
                }
                b += 1;
            }
            re += w0 * re1;
            im += w0 * im1;
        }
        a += 1;
    }
    (re, im)
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
    fn deterministic_exp_and_cos_are_accurate() {
        for k in -8000..8000 {
            let x = k as f32 * 0.01;
            let (a, b) = (exp_det(x), (x as f64).exp());
            assert!(((a as f64 - b) / b).abs() < 2e-7, "exp({x}) = {a} vs {b}");
        }
        for k in 0..=1000 {
            let v = k as f32 / 1000.0;
            let want = (std::f64::consts::FRAC_PI_2 * v as f64).cos();
            assert!((cos_half_pi(v) as f64 - want).abs() < 2e-7, "cos(pi/2 {v})");
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
