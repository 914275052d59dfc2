//! Wave-packet windows: the radial (lowpass and scale) and angular (wedge) partition of unity of
//! the frequency domain, their smooth steps and the threshold test; shared by the CPU reference and
//! the kernels.

use super::*;

// The windows are built from mul_add polynomials, IEEE division and sqrt only, so the CPU and the
// GPU compute the same bits (the SFU's cos/exp approximations have absolute errors near 1e-6,
// which sqrt(Phi_j^2 - Phi_{j-1}^2) amplifies where a window is small: measured 9e-6 CPU/GPU
// coefficient differences on smooth data before this).

/// e^x from a Cody-Waite reduction and a degree-7 polynomial (relative error below 1e-7), the
/// same bits on the CPU and the GPU.
#[inline(always)]
pub fn exp_det(x: f32) -> f32 {
    if x < -87.0 {
        return 0.0;
    }
    if x > 88.0 {
        return f32::INFINITY;
    }
    let k = round(x * core::f32::consts::LOG2_E);
    let r = mul_add(-k, 0.693_145_75, x);
    let r = mul_add(-k, 1.428_606_8e-6, r);
    let mut p = 1.0 / 5040.0;
    p = mul_add(p, r, 1.0 / 720.0);
    p = mul_add(p, r, 1.0 / 120.0);
    p = mul_add(p, r, 1.0 / 24.0);
    p = mul_add(p, r, 1.0 / 6.0);
    p = mul_add(p, r, 0.5);
    p = mul_add(p, r, 1.0);
    p = mul_add(p, r, 1.0);
    p * f32::from_bits(((k as i32 + 127) as u32) << 23)
}

/// cos(pi/2 v) for v in [0, 1] by Taylor polynomials on [0, pi/4] (error below 1e-9).
#[inline(always)]
pub fn cos_half_pi(v: f32) -> f32 {
    let h = core::f32::consts::FRAC_PI_2;
    if v <= 0.5 {
        let t = h * v;
        let u = t * t;
        let mut p = 1.0 / 479_001_600.0;
        p = mul_add(p, -u, 1.0 / 3_628_800.0);
        p = mul_add(p, -u, 1.0 / 40_320.0);
        p = mul_add(p, -u, 1.0 / 720.0);
        p = mul_add(p, -u, 1.0 / 24.0);
        p = mul_add(p, -u, 0.5);
        mul_add(p, -u, 1.0)
    } else {
        let t = h * (1.0 - v);
        let u = t * t;
        let mut p = 1.0 / 6_227_020_800.0;
        p = mul_add(p, -u, 1.0 / 39_916_800.0);
        p = mul_add(p, -u, 1.0 / 362_880.0);
        p = mul_add(p, -u, 1.0 / 5040.0);
        p = mul_add(p, -u, 1.0 / 120.0);
        p = mul_add(p, -u, 1.0 / 6.0);
        t * mul_add(p, -u, 1.0)
    }
}

/// C-infinity step: 0 for x <= 0, 1 for x >= 1, nu(x) + nu(1 - x) = 1.
#[inline(always)]
pub fn smooth_step(x: f32) -> f32 {
    if x <= 0.0 {
        0.0
    } else if x >= 1.0 {
        1.0
    } else {
        1.0 / (1.0 + exp_det(1.0 / x - 1.0 / (1.0 - x)))
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
        cos_half_pi(smooth_step(x))
    }
}

/// A sample of an overlapping cube (the paper's variant 2): the volume's sample `v` times the
/// cube's taper, the product of its three 1D tapers taken as (w0 w1) then w2. Shared by the host
/// and the device cut (`wp_cut`) and fold (`wp_fold`), so both give the same bits.
#[inline(always)]
pub fn tapered(v: f32, w01: f32, w2: f32) -> f32 { v * w01 * w2 }

/// The hard threshold's test, shared by the CPU and the GPU (the applications' edit runs
/// as a kernel on the device coefficients, and must decide every coefficient as the host does):
/// true when |c| < t, decided as re^2 + im^2 < t^2 in f64. Products of f32 values are exact in f64,
/// so the sum is the only rounding, fused or not (the same bits on both sides, whatever the
/// compiler contracts); `hypot` would differ between libm and the GPU. NaN is never below.
#[inline(always)]
pub fn below_threshold(re: f32, im: f32, t: f32) -> bool {
    let (x, y, t) = (re as f64, im as f64, t as f64);
    x * x + y * y < t * t
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
    let a = (f / 2).min(2); // f < 6; the min only proves the indexing in bounds (no panic path in the kernels)
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
