//! Kirchhoff prestack time migration (paper 2): the per-contribution math shared by the CPU
//! reference (`seisgpu_host::ktm::cpu`) and the kernels (`kernels.rs`).
//!
//! One *contribution* is one (image sample, input trace) pair: the double-square-root traveltime
//! from the trace's source to the image point and back up to its receiver, the trace read there by
//! linear interpolation, times a weight. Everything that decides *where* a trace is read
//! (traveltime, sample index) is computed with correctly rounded operations only (`sqrt.rn`,
//! `mul.rn`, `add.rn`, `div.rn` on the GPU), so the CPU and the GPU read the same samples bit for
//! bit; only the amplitude factors (weights, aperture taper, anti-alias length) use the GPU's
//! special-function approximations, which are a few ulp from the CPU's values.
//!
//! Traces reach the kernels as *pairs* `(D[k], D[k+1] - D[k])` of the zero-extended trace D (two
//! zeros in front, one behind), so an interpolated read is one 8-byte load and one multiply-add,
//! and an index past either end reads zeros without a branch (see [`lerp_pair`]). With
//! anti-aliasing on, the pairs hold the doubly integrated trace instead (see [`antialias_read`]).

pub mod interp;
pub mod kernels;
pub mod kernels_interp;
pub mod prep;

use crate::math::sqrt;

/// `KtmConsts::flags`: apply the amplitude weight ([`weight`]).
pub const WEIGHTS: u32 = 1;
/// `KtmConsts::flags`: limit the aperture (distance and angle) with a cosine taper.
pub const APERTURE: u32 = 2;
/// `KtmConsts::flags`: stretch mute (drop contributions with tau < mute_cos * t).
pub const MUTE: u32 = 4;

/// Zeros in front of sample 0 in a plain (not anti-aliased) padded trace; index `PAD_FRONT + j`
/// holds sample j. Two, so that a read at any negative position finds the pair (0, 0).
pub const PAD_FRONT: u32 = 2;
/// Zeros behind the last sample.
pub const PAD_BACK: u32 = 1;

// ---- kernel launch shapes (shared with the host's launch code) ----

/// Columns per block (one warp each).
pub const COL_WARPS: u32 = 8;

/// Image times per lane of the columns kernel: 8 for the bare kernel, 4 with corrections (their
/// per-sample state would spill at 8).
pub const COL_K_BARE: usize = 8;
pub const COL_K_CORR: usize = 4;

/// Everything a migration or modelling launch needs besides the arrays. Coordinates are relative
/// to the image origin (m), times in seconds, image time tau is two-way vertical time.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct KtmConsts {
    /// Image bin spacing in x (inline direction) and y (crossline), m.
    pub dx: f32,
    pub dy: f32,
    /// First image time and image time step (s, two-way vertical time).
    pub tau0: f32,
    pub dtau: f32,
    /// Image bins in y (columns are numbered `ix * ny + iy`).
    pub ny: u32,
    /// Image time samples per column.
    pub ntau: u32,
    /// First image column of this launch (image tiles) and columns in the launch.
    pub col0: u32,
    pub ncols: u32,
    /// Traces in this launch (one chunk of one offset class).
    pub ntraces: u32,
    /// Pairs per padded trace, and the padded index of sample 0 (PAD_FRONT, or more with AA).
    pub stride: u32,
    pub pad: u32,
    /// Samples per input trace.
    pub ns: u32,
    /// Time of sample 0 (s), sample interval (s) and its inverse (1/s).
    pub t0: f32,
    pub dt: f32,
    pub inv_dt: f32,
    /// Padded index of time 0: `pad - t0 / dt`; the read position is `t / dt + s_off`.
    pub s_off: f32,
    /// Velocity column stride: 0 for v_rms(tau), `ntau` for a v_rms(x, y, tau) volume.
    pub vel_stride: u32,
    /// WEIGHTS | APERTURE | MUTE.
    pub flags: u32,
    /// Aperture: maximum midpoint distance (m, f32::INFINITY for none), tangent of the maximum
    /// angle from the vertical (f32::INFINITY for none), taper width as a fraction of the radius.
    pub ap_dist: f32,
    pub ap_tan: f32,
    pub ap_taper: f32,
    /// Stretch mute: keep contributions with tau >= mute_cos * t (1 - the largest stretch).
    pub mute_cos: f32,
    /// Anti-aliasing: trace spacing in x and y (m) and the longest triangle half-length (samples).
    pub aa_dx: f32,
    pub aa_dy: f32,
    pub aa_max: f32,
    /// Traveltime mode: `interp::TT_EXACT`, `TT_STATIC8` or `TT_DYNAMIC`, and the dynamic mode's
    /// tolerance (samples).
    pub tt_mode: u32,
    pub tt_tol: f32,
}

impl KtmConsts {
    /// Fractional padded index of a traveltime `t_smp` in samples (t / dt).
    #[inline(always)]
    pub fn sample_index(&self, t_smp: f32) -> f32 { t_smp + self.s_off }
}

/// What one (image column, trace) pair needs, computed once and reused down the column.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PairGeom {
    /// Squared horizontal source and receiver distances to the image point (m^2).
    pub ds2: f32,
    pub dr2: f32,
    /// Horizontal distance from the trace midpoint to the image point (m): the aperture's measure.
    pub dm: f32,
    /// Image point minus source, image point minus receiver (m): the operator dip for anti-aliasing.
    pub exs: f32,
    pub eys: f32,
    pub exr: f32,
    pub eyr: f32,
}

/// Pair geometry of the image point (x, y) and a trace `[sx, sy, gx, gy]` (all relative to the
/// image origin).
#[inline(always)]
pub fn pair_geom(x: f32, y: f32, tr: [f32; 4]) -> PairGeom {
    let (exs, eys) = (x - tr[0], y - tr[1]);
    let (exr, eyr) = (x - tr[2], y - tr[3]);
    let (emx, emy) = (0.5 * (exs + exr), 0.5 * (eys + eyr));
    PairGeom {
        ds2: exs * exs + eys * eys,
        dr2: exr * exr + eyr * eyr,
        dm: sqrt(emx * emx + emy * emy),
        exs,
        eys,
        exr,
        eyr,
    }
}

/// What one image sample needs, computed once per sample and reused over all traces. Times are
/// in trace samples (units of dt): the traveltime then comes out as a sample position directly.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SampleGeom {
    /// Two-way vertical time in samples (tau / dt).
    pub tau_s: f32,
    /// (tau / 2 / dt)^2, at least 1e-30 (keeps the square root's argument normal, see [`sqrt_tt`]).
    pub h2s: f32,
    /// 1 / (v_rms dt)^2 (samples^2/m^2).
    pub ivs: f32,
    /// v_rms dt / 2 (m), for the spreading weight.
    pub wa: f32,
    /// Aperture radius (m): full weight up to `ap_in`, cosine taper to zero at `ap_r`.
    pub ap_in: f32,
    pub ap_r: f32,
    /// 1 / (ap_r - ap_in), 0 when the taper zone is empty.
    pub ap_inv_w: f32,
}

/// Sample geometry at image time `tau` (s) with RMS velocity `v` (m/s).
#[inline(always)]
pub fn sample_geom(c: &KtmConsts, tau: f32, v: f32) -> SampleGeom {
    let vs = v * c.dt;
    let h = 0.5 * tau * c.inv_dt;
    let h2s = h * h;
    let mut q = SampleGeom {
        tau_s: tau * c.inv_dt,
        h2s: if h2s > 1e-30 { h2s } else { 1e-30 },
        ivs: 1.0 / (vs * vs),
        wa: 0.5 * vs,
        ..SampleGeom::default()
    };
    if c.flags & APERTURE != 0 {
        // Angle from the vertical at the image point to the midpoint: tan = dm / (v tau / 2).
        let r_angle = if c.ap_tan < f32::INFINITY { 0.5 * v * tau * c.ap_tan } else { f32::INFINITY };
        let r = if r_angle < c.ap_dist { r_angle } else { c.ap_dist };
        let r_in = r * (1.0 - c.ap_taper);
        q.ap_r = r;
        q.ap_in = r_in;
        q.ap_inv_w = if r - r_in > 0.0 && r < f32::INFINITY { 1.0 / (r - r_in) } else { 0.0 };
    } else {
        q.ap_r = f32::INFINITY;
        q.ap_in = f32::INFINITY;
    }
    q
}

/// Correctly rounded square root for traveltimes, `x >= 2^-101` (callers keep it there). On the
/// CPU `f32::sqrt`; on the GPU the fast path of `sqrt.rn` written out (MUFU.RSQ and two Newton
/// steps: the exact sequence ptxas emits for `sqrt.rn` on such arguments), which drops the
/// special-case test and slow-path call ptxas wraps around it: 6 of about 40 instructions per
/// contribution. Same bits as the CPU's, so both read the same trace positions.
#[inline(always)]
pub fn sqrt_tt(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::device::sqrt_rsqrt_newton(x)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        sqrt(x)
    }
}

/// a * b + c with one rounding, for the traveltime's square-root arguments: `fma.rn` on the GPU
/// (one instruction instead of a multiply and an add), `f32::mul_add` on a CPU built with FMA,
/// otherwise the exact f64 product plus c rounded to f32 (the same bits except when the f64 sum
/// falls exactly on an f32 rounding midpoint, about 2^-28 of the cases, where it may be 1 ulp off).
#[inline(always)]
pub fn fma_tt(a: f32, b: f32, c: f32) -> f32 {
    #[cfg(any(target_arch = "nvptx64", target_feature = "fma"))]
    {
        crate::math::mul_add(a, b, c)
    }
    #[cfg(not(any(target_arch = "nvptx64", target_feature = "fma")))]
    {
        (a as f64 * b as f64 + c as f64) as f32
    }
}

/// The source and receiver legs of the DSR traveltime, in samples: t_s / dt = sqrt((tau/2/dt)^2 +
/// ds2 / (v dt)^2), likewise t_r. The same formula as `pstm::traveltime::dsr_two_way` (paper 2,
/// equation 3, in two-way vertical time), scaled to samples so that the read position is one add
/// away (unit-tested against it).
#[inline(always)]
pub fn dsr_legs(p: &PairGeom, q: &SampleGeom) -> (f32, f32) {
    (sqrt_tt(fma_tt(p.ds2, q.ivs, q.h2s)), sqrt_tt(fma_tt(p.dr2, q.ivs, q.h2s)))
}

/// The engine's traveltime, in samples: exact two-way DSR traveltime with RMS velocity. The one
/// place a different traveltime scheme plugs in.
#[inline(always)]
pub fn traveltime(p: &PairGeom, q: &SampleGeom) -> f32 {
    let (ts, tr) = dsr_legs(p, q);
    ts + tr
}

/// 1/sqrt(x): exact on the CPU, `rsqrt.approx` on the GPU (amplitudes only, never positions).
#[inline(always)]
pub fn rsqrt_amp(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::device::rsqrt_approx(x)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        1.0 / sqrt(x)
    }
}
/// 1/x: exact on the CPU, `rcp.approx` on the GPU (amplitudes only).
#[inline(always)]
pub fn rcp_amp(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::device::rcp_approx(x)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        1.0 / x
    }
}
/// sqrt(x): exact on the CPU, `sqrt.approx` on the GPU (amplitudes only).
#[inline(always)]
pub fn sqrt_amp(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::device::sqrt_approx(x)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        sqrt(x)
    }
}

/// Amplitude weight of one contribution: W = cos(theta) / sqrt(v r) (1/sqrt(m)), the far-field
/// weight of the 2-D Kirchhoff summation that goes with the half-derivative (rho) filter
/// (Schneider 1978; Yilmaz 2001, sec. 4.1), written for prestack traces with cos(theta) = tau / t
/// (the harmonic mean of the source- and receiver-side cosines (tau/2)/t_s and (tau/2)/t_r;
/// exactly cos(theta) at zero offset) and r = v t / 2 (the mean straight-ray leg). One reciprocal
/// square root: W = tau / sqrt(v/2 t^3), here with times in samples: tau_s / sqrt(wa t_s^3),
/// wa = v dt / 2. Zero at tau = 0, and wherever wa t_s^3 is not a normal number: at tau = 0 under a
/// zero-offset trace t_s is ~1e-15 samples, the product subnormal, and the GPU's
/// `rsqrt.approx.ftz` flushes it to zero and returns infinity (0 x inf = NaN in the image, found
/// by an MPI run on GPU ranks; the CPU gave 0 there).
#[inline(always)]
pub fn weight(tau_s: f32, t_s: f32, wa: f32) -> f32 {
    let d = wa * t_s * t_s * t_s;
    if d >= f32::MIN_POSITIVE { tau_s * rsqrt_amp(d) } else { 0.0 }
}

/// Cosine aperture taper at midpoint distance `dm`: 1 inside `ap_in`, 0 beyond `ap_r`,
/// (1 + cos(pi x)) / 2 across the taper zone (x from 0 at `ap_in` to 1 at `ap_r`).
#[inline(always)]
pub fn aperture_taper(dm: f32, q: &SampleGeom) -> f32 {
    if dm <= q.ap_in {
        1.0
    } else if dm >= q.ap_r {
        0.0
    } else {
        let x = (dm - q.ap_in) * q.ap_inv_w;
        let (_, cos) = crate::math::sin_cos(core::f32::consts::PI * x);
        0.5 + 0.5 * cos
    }
}

/// One contribution: where to read the trace and with what weight.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Contribution {
    /// Fractional padded index into the trace's pairs.
    pub s: f32,
    /// Weight (weights x aperture taper x mute); 0 means the trace is not read.
    pub w: f32,
    /// Anti-aliasing triangle half-length in samples (>= 1; 1 = no smoothing). AA only.
    pub m: f32,
}

/// The contribution of a trace to an image sample. `CORR`: apply the weights, aperture and mute
/// that `c.flags` asks for (the paper's kernel applies none); `AA`: also the anti-alias length.
#[inline(always)]
pub fn contribution<const AA: bool, const CORR: bool>(c: &KtmConsts, p: &PairGeom, q: &SampleGeom) -> Contribution {
    let (t, m) = if AA {
        let (ts, tr) = dsr_legs(p, q);
        let t = ts + tr;
        (t, antialias_length(c, p, q, ts, tr))
    } else {
        (traveltime(p, q), 1.0)
    };
    let w = if CORR { interp::correction_weight(c, p, q, t) } else { 1.0 };
    Contribution { s: c.sample_index(t), w, m }
}

/// Half-length (samples, >= 1) of the anti-aliasing triangle (Lumley, Claerbout and Bevc 1994):
/// the time the operator moves between neighbouring traces, |(grad_x t dx, grad_y t dy)| with
/// grad t = (x - x_s) / (v^2 t_s) + (x - x_r) / (v^2 t_r), in samples, plus one (1 = a plain read).
/// `ts`, `tr` are the legs in samples, so grad t / dt = ((x - x_s) / ts + (x - x_r) / tr) ivs.
#[inline(always)]
pub fn antialias_length(c: &KtmConsts, p: &PairGeom, q: &SampleGeom, ts: f32, tr: f32) -> f32 {
    let tiny = 1e-6;
    let ts = if ts > tiny { ts } else { tiny };
    let tr = if tr > tiny { tr } else { tiny };
    // One reciprocal for both legs: 1/ts = tr / (ts tr).
    let inv = q.ivs * rcp_amp(ts * tr);
    let (ps, pr) = (inv * tr, inv * ts);
    let gx = (ps * p.exs + pr * p.exr) * c.aa_dx;
    let gy = (ps * p.eys + pr * p.eyr) * c.aa_dy;
    let m = 1.0 + sqrt_amp(gx * gx + gy * gy);
    if m < c.aa_max { m } else { c.aa_max }
}

/// Linear interpolation of a padded trace stored as pairs `(D[k], D[k+1] - D[k])`, `len` pairs, at
/// fractional index `s`. The index is clamped into the array, whose first and last pairs are
/// (0, 0) for plain traces, so any finite position outside the record reads zero without a branch
/// (positions are finite: the host rejects non-finite inputs).
///
/// # Safety
/// `p` must be valid for `len >= 1` pair reads.
#[inline(always)]
pub unsafe fn lerp_pair(p: *const [f32; 2], len: u32, s: f32) -> f32 {
    let (i, f) = split_index(s, len);
    let [a, d] = unsafe { *p.add(i as usize) };
    a + f * d
}

/// Integer and fractional parts of a read position, the integer clamped to `[0, len - 1]`
/// (`as u32` saturates: negative and NaN give 0). The fraction is taken against the clamped index,
/// so it is only meaningful for in-range positions; out of range the pair read is (0, 0).
#[inline(always)]
pub fn split_index(s: f32, len: u32) -> (u32, f32) {
    // PTX's float-to-integer conversion saturates (NaN to 0) like Rust's `as`, in one instruction
    // instead of LLVM's conversion-compare-select expansion.
    #[cfg(target_arch = "nvptx64")]
    let i: u32 = crate::device::cvt_rzi_u32(s);
    #[cfg(not(target_arch = "nvptx64"))]
    let i = s as u32;
    let i = if i < len - 1 { i } else { len - 1 };
    (i, s - i as f32)
}

/// 1.5 * 2^23: for 0 <= s < 2^22, `s + FLOOR_MAGIC` rounded down has floor(s) in its low mantissa
/// bits (and the sum minus FLOOR_MAGIC is floor(s), exactly). The columns-v2 kernels take integer
/// and fractional parts of a read position this way, with FP32 adds instead of F2I/I2F, which run
/// at a quarter of the issue rate on the same pipe as the square roots' MUFU.
pub const FLOOR_MAGIC: f32 = 12_582_912.0;
/// Bit pattern of [`FLOOR_MAGIC`]: `(s + FLOOR_MAGIC).to_bits() - FLOOR_MAGIC_BITS = floor(s)`.
pub const FLOOR_MAGIC_BITS: u32 = 0x4B40_0000;

/// a + b rounded towards minus infinity (`add.rm.f32` on the GPU; on the CPU the exact f64 sum,
/// rounded to nearest f32 and stepped down when that rounded up).
#[inline(always)]
pub fn add_rd(a: f32, b: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    {
        crate::device::add_rm(a, b)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let exact = a as f64 + b as f64;
        let r = exact as f32;
        if (r as f64) <= exact {
            r
        } else if r > 0.0 {
            f32::from_bits(r.to_bits() - 1)
        } else if r < 0.0 {
            f32::from_bits(r.to_bits() + 1)
        } else {
            -f32::from_bits(1) // a negative sum too small for a subnormal
        }
    }
}

/// [`split_index`] by the magic-number floor, for `t + off >= 0` where `magic_off = FLOOR_MAGIC +
/// off` and `off` is an integer (0 <= off < 2^22): the position is t + off, the result is
/// (`FLOOR_MAGIC_BITS` + the index clamped to `len - 1`, t + off - index). With `off = 0` and
/// `t = s >= 0` it equals `split_index(s, len)` (index plus `FLOOR_MAGIC_BITS`) bit for bit
/// (unit-tested); the kernels add the index to a trace pointer pre-offset by `-FLOOR_MAGIC_BITS`
/// pairs, so one wide multiply-add forms the address. Positions at or past 2^22 and clamped ones
/// read the last pair (zero).
#[inline(always)]
pub fn split_index_magic(t: f32, len: u32, magic_off: f32) -> (u32, f32) {
    let m = add_rd(t, magic_off);
    let (b, bmax) = (m.to_bits(), FLOOR_MAGIC_BITS + len - 1);
    let b = if b < bmax { b } else { bmax };
    (b, t - (f32::from_bits(b) - magic_off))
}

/// [`split_index_magic`] without the clamp at the trace end, for positions known to lie below it
/// (`0 <= t + off < len`, len <= 2^22): the same bits there, one integer minimum fewer. The static8
/// kernel reads a (trace, segment) this way when all its nodes lie below the end (its positions
/// lie between the nodes).
#[inline(always)]
pub fn split_index_magic_inside(t: f32, magic_off: f32) -> (u32, f32) {
    let m = add_rd(t, magic_off);
    (m.to_bits(), t - (m - magic_off))
}

/// Whether an anti-aliased read at padded index `s` lies on the record: the same support as a
/// plain read of the zero-extended trace (sample positions strictly between -1 and ns).
#[inline(always)]
pub fn antialias_valid(c: &KtmConsts, s: f32) -> bool {
    let pad = c.pad as f32;
    s > pad - 1.0 && s < pad + c.ns as f32
}

/// The triangle-filtered trace at `s` with half-length `m`, read from the doubly integrated trace
/// C (anticausal sum of the causal sum): tri_m(s) = (2 C(s) - C(s - m) - C(s + m)) / m^2, whose
/// weights (m - |j|) / m^2 sum to one; m = 1 gives the plain linear interpolation.
///
/// # Safety
/// `p` must be valid for `len` pair reads; `s +- m` within the padding (guaranteed when
/// [`antialias_valid`] holds and `m <= aa_max`, see the host's padding).
#[inline(always)]
pub unsafe fn antialias_read(p: *const [f32; 2], len: u32, s: f32, m: f32) -> f32 {
    unsafe {
        let c0 = lerp_pair(p, len, s);
        let cm = lerp_pair(p, len, s - m);
        let cp = lerp_pair(p, len, s + m);
        (c0 + c0 - cm - cp) * rcp_amp(m * m)
    }
}

/// The adjoint of [`lerp_pair`] in the padded-trace domain: where a value `v` read at `s` goes
/// back to (index, weight) pairs `(i, (1 - f) v)` and `(i + 1, f v)`; `i + 1 <= len`, so the
/// accumulator has `len + 1` entries.
#[inline(always)]
pub fn scatter_weights(s: f32, len: u32, v: f32) -> (u32, f32, f32) {
    let (i, f) = split_index(s, len);
    (i, v - f * v, f * v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pstm::traveltime::dsr_two_way;

    fn consts() -> KtmConsts {
        KtmConsts {
            dx: 25.0, dy: 25.0, tau0: 0.0, dtau: 0.004, ny: 1, ntau: 100, ncols: 1, ntraces: 1, stride: 103,
            pad: PAD_FRONT, ns: 100, t0: 0.0, dt: 0.004, inv_dt: 250.0, s_off: PAD_FRONT as f32,
            flags: WEIGHTS | APERTURE | MUTE,
            ap_dist: 1000.0, ap_tan: 1.0, ap_taper: 0.2, mute_cos: 0.5, aa_dx: 25.0, aa_dy: 25.0, aa_max: 8.0,
            ..Default::default()
        }
    }

    #[test]
    fn traveltime_in_samples_is_the_pstm_dsr_traveltime() {
        let c = consts();
        let mut x = 0.123f32;
        for _ in 0..10_000 {
            x = (x * 7.77 + 0.311).fract();
            let (tau, v) = (x * 3.0, 1500.0 + 3000.0 * x);
            let g = [x * 3000.0, -x * 1000.0, (1.0 - x) * 2000.0, 500.0];
            let (p, q) = (pair_geom(10.0, 20.0, g), sample_geom(&c, tau, v));
            let want = dsr_two_way(tau, p.ds2, p.dr2, 1.0 / (v * v)) as f64;
            let got = traveltime(&p, &q) as f64 * c.dt as f64;
            assert!((got - want).abs() <= 1e-6 * want.max(1e-3), "tau {tau} v {v}: {got} vs {want}");
        }
        // tau = 0 straight below the trace: zero, not NaN (the argument floor keeps it normal).
        let q = sample_geom(&c, 0.0, 2000.0);
        assert!(traveltime(&pair_geom(0.0, 0.0, [0.0; 4]), &q) < 1e-12);
    }

    #[test]
    fn magic_floor_split_is_split_index() {
        assert_eq!(FLOOR_MAGIC.to_bits(), FLOOR_MAGIC_BITS);
        let len = 1027;
        let mut x = 0.377f32;
        let check = |s: f32| {
            let (i, f) = split_index(s, len);
            let (b, g) = split_index_magic(s, len, FLOOR_MAGIC);
            assert_eq!(b - FLOOR_MAGIC_BITS, i, "s {s}");
            if i < len - 1 {
                assert_eq!(g.to_bits(), f.to_bits(), "s {s}");
            }
            if s < len as f32 {
                let (bi, gi) = split_index_magic_inside(s, FLOOR_MAGIC);
                assert_eq!((bi, gi.to_bits()), (b, g.to_bits()), "s {s}");
            }
            // An integer offset folded into the magic: same index, fraction of t.
            let t = s.min(4000.0);
            let (b2, g2) = split_index_magic(t, len, FLOOR_MAGIC + 2.0);
            let (i2, f2) = split_index(t + 2.0, len);
            assert_eq!(b2 - FLOOR_MAGIC_BITS, i2, "t {t}");
            if i2 < len - 1 {
                assert_eq!(g2, t - crate::math::floor(t), "t {t}");
                assert!((g2 - f2).abs() <= 1e-3, "t {t}");
            }
        };
        for _ in 0..100_000 {
            x = (x * 7.77 + 0.311).fract();
            check(x * 1500.0);
            check(x * 3.0);
            check((x * 1500.0).floor());
        }
        for s in [0.0, 1.0, 1025.0, 1025.5, 1026.0, 1e6, 4194303.5, 4194304.0, 1e9, 3e38] {
            check(s);
        }
    }

    #[test]
    fn lerp_pair_reads_zero_outside_and_interpolates_inside() {
        // Trace [1, 3] padded: D = [0, 0, 1, 3, 0], pairs (D[k], D[k+1] - D[k]) for k < 4.
        let d = [0.0f32, 0.0, 1.0, 3.0, 0.0, 0.0];
        let pairs: Vec<[f32; 2]> = (0..5).map(|k| [d[k], d[k + 1] - d[k]]).collect();
        let len = pairs.len() as u32;
        let r = |s: f32| unsafe { lerp_pair(pairs.as_ptr(), len, s) };
        assert_eq!(r(2.0), 1.0);
        assert_eq!(r(2.5), 2.0);
        assert_eq!(r(3.0), 3.0);
        assert_eq!(r(-5.0), 0.0);
        assert_eq!(r(1e9), 0.0);
        assert_eq!(r(0.7), 0.0);
    }

    #[test]
    fn zero_offset_weight_and_taper() {
        let c = consts();
        // Zero offset at the apex: t = tau, W = tau / sqrt(v/2 tau^3) = 1 / sqrt(v tau / 2) (the
        // weight in sample units: tau_s / sqrt(v dt / 2 tau_s^3) = the same number).
        let q = sample_geom(&c, 1.0, 2000.0);
        let p = pair_geom(0.0, 0.0, [0.0, 0.0, 0.0, 0.0]);
        let k = contribution::<false, true>(&c, &p, &q);
        assert!((k.w - 1.0 / 1000f32.sqrt()).abs() < 1e-6, "{k:?}");
        assert!((k.s - (250.0 + PAD_FRONT as f32)).abs() < 1e-3);
        // Angle aperture at tau = 1 s, v = 2000, tan = 1: radius 1000 m, taper from 800 m.
        assert_eq!(q.ap_r, 1000.0);
        assert_eq!(aperture_taper(700.0, &q), 1.0);
        assert!((aperture_taper(900.0, &q) - 0.5).abs() < 1e-6);
        assert_eq!(aperture_taper(1000.0, &q), 0.0);
        // No aperture limit: everything has full weight.
        let mut c2 = c;
        c2.ap_dist = f32::INFINITY;
        c2.ap_tan = f32::INFINITY;
        let q2 = sample_geom(&c2, 0.0, 2000.0);
        assert_eq!(aperture_taper(1e9, &q2), 1.0);
    }

    #[test]
    fn mute_drops_stretched_contributions() {
        let c = consts();
        let q = sample_geom(&c, 0.2, 2000.0);
        // 400 m from both source and receiver: t = 2 sqrt(0.01 + 0.04) = 0.447 > tau / 0.5.
        let p = pair_geom(0.0, 0.0, [400.0, 0.0, -400.0, 0.0]);
        assert_eq!(contribution::<false, true>(&c, &p, &q).w, 0.0);
    }

    #[test]
    fn antialias_length_grows_with_dip_and_is_one_at_the_apex() {
        let c = consts();
        let q = sample_geom(&c, 1.0, 2000.0);
        let p0 = pair_geom(0.0, 0.0, [0.0; 4]);
        let (ts, tr) = dsr_legs(&p0, &q);
        assert_eq!(antialias_length(&c, &p0, &q, ts, tr), 1.0);
        let p = pair_geom(0.0, 0.0, [-800.0, 0.0, -800.0, 0.0]);
        let (ts, tr) = dsr_legs(&p, &q);
        // dt/dx = 2 * 800 / (4e6 * ts); ts = sqrt(0.25 + 0.16) = 0.640; times 25 m / 4 ms.
        let want = 1.0 + 2.0 * 800.0 / (4e6 * 0.64031) * 25.0 * 250.0;
        let m = antialias_length(&c, &p, &q, ts, tr);
        assert!((m - want).abs() < 1e-3, "{m} vs {want}");
    }

    #[test]
    fn triangle_read_of_a_double_integral_is_the_triangle_filter() {
        // d = impulse at sample 10 of 30; C1 causal sum, C2 anticausal sum of C1 (exact in f32).
        let n = 30usize;
        let mut d = vec![0.0f32; n];
        d[10] = 1.0;
        let pad = 6usize;
        let len = n + 2 * pad;
        let mut dd = vec![0.0f32; len + 1];
        dd[pad..pad + n].copy_from_slice(&d);
        let mut c1 = vec![0.0f32; len + 1];
        let mut acc = 0.0;
        for k in 0..=len {
            acc += dd[k];
            c1[k] = acc;
        }
        let mut c2 = vec![0.0f32; len + 1];
        let mut acc = 0.0;
        for k in (0..=len).rev() {
            acc += c1[k];
            c2[k] = acc;
        }
        let pairs: Vec<[f32; 2]> = (0..len).map(|k| [c2[k], c2[k + 1] - c2[k]]).collect();
        let r = |s: f32, m: f32| unsafe { antialias_read(pairs.as_ptr(), len as u32, s, m) };
        // m = 1: the plain trace; m = 3: triangle weights (3 - |j|) / 9 around sample 10.
        assert_eq!(r((pad + 10) as f32, 1.0), 1.0);
        assert_eq!(r((pad + 11) as f32, 1.0), 0.0);
        assert!((r((pad + 10) as f32, 3.0) - 3.0 / 9.0).abs() < 1e-6);
        assert!((r((pad + 12) as f32, 3.0) - 1.0 / 9.0).abs() < 1e-6);
        assert!(r((pad + 13) as f32, 3.0).abs() < 1e-6);
    }
}
