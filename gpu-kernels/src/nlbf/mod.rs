//! Nonlinear beamforming (NLBF): the math shared by the CPU reference and the GPU kernels.
//!
//! Paper: Sun, Silvestrov & Bakulin (2022), "Accelerating the 2+2+1 method for estimating local
//! traveltime operators in nonlinear beamforming using GPU graphics cards" (J. Geophys. Eng. 19).
//!
//! - [`moveout`]: the local traveltime operator, equation (1).
//! - [`split_shift`], [`shifted_sample`]: the fractional-sample moveout by linear interpolation of
//!   the record extended by zero samples on both sides (see below).
//! - [`semblance`]: equation (2) from its window sums; a zero denominator gives S = 0.
//! - [`better`]: the one tie rule of every arg-max (CPU and GPU): higher S wins, and on equal S the
//!   lower linear parameter index wins.
//!
//! Samples outside the record: the trace is extended with zero samples on both sides and the
//! shifted sample is the linear interpolation of that extended trace. A shifted time at or beyond
//! one sample interval outside the record is exactly zero; in the single sample interval next to
//! either end it ramps linearly to zero. The trace still counts in M (the paper's eq. 2 divides by
//! the number of traces in the aperture, whatever their samples). This is the natural rule for a
//! kernel that stages zero-padded traces, and both sides use it, so CPU and GPU agree.

use crate::device::nonzero;
use crate::math::{floor, mul_add};

pub mod kernels;

use kernels::{CscanKernel, SlideKernel};

/// Equation (1): dt = A dx + B dy + C dx dy + D dx^2 + E dy^2 (seconds), evaluated as
/// dx (A + D dx + C dy) + dy (B + E dy) with fused multiply-adds (correctly rounded on both sides,
/// so CPU and GPU get the same bits).
#[inline(always)]
pub fn moveout(a: f32, b: f32, c: f32, d: f32, e: f32, dx: f32, dy: f32) -> f32 {
    let along_x = mul_add(d, dx, mul_add(c, dy, a));
    let along_y = dy * mul_add(e, dy, b);
    mul_add(dx, along_x, along_y)
}

/// The moveout in samples (`inv_dt` = 1 / sample interval).
#[inline(always)]
pub fn shift_samples(a: f32, b: f32, c: f32, d: f32, e: f32, dx: f32, dy: f32, inv_dt: f32) -> f32 {
    moveout(a, b, c, d, e, dx, dy) * inv_dt
}

/// Splits a shift in samples into its integer part (floor) and fraction in [0, 1). The subtraction
/// is exact, so every caller that splits the same shift gets the same pair.
///
/// The host validates data and parameters (finite) and bounds every shift well inside
/// +-2^24 samples (`MAX_SHIFT_SAMPLES`), so the conversion needs no saturation checks.
#[inline(always)]
pub fn split_shift(sigma: f32) -> (i32, f32) {
    let k = floor(sigma);
    if !(crate::math::abs(k) <= MAX_SHIFT_SAMPLES) {
        // Unreachable for validated input; keeps the conversion defined (reads zero samples).
        return (i32::MIN / 2, 0.0);
    }
    // SAFETY: k is an integer-valued finite float with |k| <= 2^24.
    (unsafe { k.to_int_unchecked::<i32>() }, sigma - k)
}

/// Largest shift (samples) the host allows: far beyond any record, and exact in f32.
pub const MAX_SHIFT_SAMPLES: f32 = 16_777_216.0;

/// Linear interpolation between two neighbouring samples, `a + f (b - a)` as one fused
/// multiply-add (correctly rounded on both sides, and one instruction on the GPU).
#[inline(always)]
pub fn lerp(a: f32, b: f32, f: f32) -> f32 { mul_add(f, b - a, a) }

/// `acc + v^2` as one fused multiply-add (energy and squared-stack accumulation).
#[inline(always)]
pub fn add_sq(acc: f32, v: f32) -> f32 { mul_add(v, v, acc) }

/// Sample `i` of `trace`, zero outside the record.
#[inline(always)]
pub fn sample_or_zero(trace: &[f32], i: i64) -> f32 {
    if i >= 0 && (i as u64) < trace.len() as u64 { trace[i as usize] } else { 0.0 }
}

/// The shifted sample u(t + k + f) of the zero-extended trace (`t + k` an integer sample index).
#[inline(always)]
pub fn shifted_sample(trace: &[f32], t: i64, k: i32, f: f32) -> f32 {
    let i = t + k as i64;
    lerp(sample_or_zero(trace, i), sample_or_zero(trace, i + 1), f)
}

/// Equation (2) from its window sums: `num` = sum_j (sum_i u)^2, `den` = sum_j sum_i u^2, over
/// `m` traces. A zero denominator (all samples zero) gives S = 0.
#[inline(always)]
pub fn semblance(num: f32, den: f32, m: u32) -> f32 {
    if den > 0.0 { num / (m as f32 * den) } else { 0.0 }
}

/// The tie rule of every arg-max, on CPU and GPU alike: `(s, idx)` beats `(best_s, best_idx)` when
/// its semblance is higher, or equal with a lower linear parameter index.
#[inline(always)]
pub fn better(s: f32, idx: u32, best_s: f32, best_idx: u32) -> bool {
    // Non-short-circuit `|` / `&`: the same truth table, no branches in unrolled GPU code.
    (s > best_s) | ((s == best_s) & (idx < best_idx))
}

/// The packed pick of one estimation: the linear index of the (A, D) pick, the (B, E) pick and the
/// C pick in mixed radix, `(ad * n_be + be) * n_c + c`. The host checks that n_ad * n_be * n_c fits
/// a u32.
#[inline(always)]
pub fn pack_code(ad: u32, be: u32, c: u32, n_be: u32, n_c: u32) -> u32 { (ad * n_be + be) * n_c + c }

/// Inverse of [`pack_code`]: (ad, be, c). The radices are >= 1 (host validation); [`nonzero`]
/// leaves the kernels without a division-by-zero panic path.
#[inline(always)]
pub fn unpack_code(code: u32, n_be: u32, n_c: u32) -> (u32, u32, u32) {
    let (n_be, n_c) = (nonzero(n_be), nonzero(n_c));
    let c = code % n_c;
    let rest = code / n_c;
    (rest / n_be, rest % n_be, c)
}

/// The five value indices (A, B, C, D, E) of a packed code.
#[inline(always)]
pub fn decode_indices(code: u32, nb: u32, nc: u32, nd: u32, ne: u32) -> (u32, u32, u32, u32, u32) {
    let (ad, be, c) = unpack_code(code, nb * ne, nc);
    let (nd, ne) = (nonzero(nd), nonzero(ne));
    (ad / nd, be / ne, c, ad % nd, be % ne)
}

/// Cell and weight along one axis of the parameter-trace grid: `x` relative to the first node,
/// `inv_s` = 1 / spacing, `n` nodes. Positions outside the grid clamp to its edge nodes.
#[inline(always)]
pub fn grid_cell(x: f32, inv_s: f32, n: u32) -> (u32, f32) {
    let fx = x * inv_s;
    if !(fx > 0.0) || n < 2 {
        return (0, 0.0);
    }
    if fx >= (n - 1) as f32 {
        return (n - 1, 0.0);
    }
    let i = floor(fx);
    (i as u32, fx - i)
}

/// Bilinear interpolation between four corner values (weights wx along x, wy along y).
#[inline(always)]
pub fn bilinear(v00: f32, v10: f32, v01: f32, v11: f32, wx: f32, wy: f32) -> f32 {
    let a = mul_add(wx, v10 - v00, v00);
    let b = mul_add(wx, v11 - v01, v01);
    mul_add(wy, b - a, a)
}

/// NMO traveltime t = sqrt(t0^2 + (offset / v)^2) (seconds).
#[inline(always)]
pub fn nmo_time(t0: f32, offset: f32, v: f32) -> f32 {
    let r = offset / v;
    crate::math::sqrt(mul_add(t0, t0, r * r))
}

/// The input position (in samples) that NMO maps to output sample `i`, or `None` where the stretch
/// mute applies: (t - t0) / t0 > `max_stretch`, or t0 <= 0 at a non-zero offset.
#[inline(always)]
pub fn nmo_source_position(i: u32, dt: f32, t_first: f32, offset: f32, v: f32, max_stretch: f32) -> Option<f32> {
    let t0 = mul_add(i as f32, dt, t_first);
    let t = nmo_time(t0, offset, v);
    if offset != 0.0 && (!(t0 > 0.0) || t - t0 > max_stretch * t0) {
        return None;
    }
    Some((t - t_first) / dt)
}

/// Table 3 of the paper: the block size of the paper-faithful kernel, the largest phase's number
/// of combinations rounded up to a multiple of 32 and capped at 1024 (the paper prints `max`, which
/// cannot be meant: a block has at most 1024 threads).
pub fn paper_block_size(n_ad: u32, n_be: u32, n_c: u32) -> u32 {
    let mut t = n_ad.max(n_be).max(n_c);
    t = t.div_ceil(32) * 32;
    t.clamp(32, 1024)
}

/// Window half-lengths (in samples) the fast GPU kernels are compiled for: N = 2H + 1 samples.
pub const FAST_HALF_WINDOWS: [u32; 8] = [1, 2, 3, 4, 5, 6, 7, 8];
/// Per-lane run lengths (L consecutive time samples per lane) of the sliding kernel for H = 5:
/// odd L read single samples (lanes L words apart: distinct banks), even L with L / 2 odd read
/// aligned pairs.
pub const SLIDE_RUNS_H5: [u32; 6] = [7, 9, 10, 11, 13, 14];

/// The run length the sliding kernel uses for half window `h` when not tuned: the smallest odd
/// L >= max(7, h) among the compiled ones.
pub fn slide_run_for(h: u32) -> u32 {
    if h == 5 { 9 } else if h <= 7 { 7 } else { 9 }
}

/// The sliding (A, D) / (B, E) kernel for run `l`, half window `h` and `g` values of D (E) per
/// pass (1 = one combination per pass).
pub const fn slide_kernel_g(l: u32, h: u32, g: u32) -> Option<SlideKernel> {
    match g {
        1 => slide_kernel(l, h),
        _ => Some(match (l, h, g) {
            (7, 5, 4) => kernels::NLBF_SLIDE_L7_H5_G4,
            (9, 5, 4) => kernels::NLBF_SLIDE_L9_H5_G4,
            (9, 5, 2) => kernels::NLBF_SLIDE_L9_H5_G2,
            (13, 5, 2) => kernels::NLBF_SLIDE_L13_H5_G2,
            _ => return None,
        }),
    }
}

/// The (run, group) pairs of the sliding kernels for half window `h`.
pub fn slide_variants(h: u32) -> &'static [(u32, u32)] {
    match h {
        5 => &[(7, 1), (9, 1), (10, 1), (11, 1), (13, 1), (14, 1), (7, 4), (9, 4), (9, 2), (13, 2)],
        1..=5 => &[(7, 1)],
        6 | 7 => &[(7, 1)],
        8 => &[(9, 1)],
        _ => &[],
    }
}

/// The sliding (A, D) / (B, E) kernel for run `l` and half window `h`.
pub const fn slide_kernel(l: u32, h: u32) -> Option<SlideKernel> {
    Some(match (l, h) {
        (7, 1) => kernels::NLBF_SLIDE_L7_H1,
        (7, 2) => kernels::NLBF_SLIDE_L7_H2,
        (7, 3) => kernels::NLBF_SLIDE_L7_H3,
        (7, 4) => kernels::NLBF_SLIDE_L7_H4,
        (7, 5) => kernels::NLBF_SLIDE_L7_H5,
        (9, 5) => kernels::NLBF_SLIDE_L9_H5,
        (11, 5) => kernels::NLBF_SLIDE_L11_H5,
        (13, 5) => kernels::NLBF_SLIDE_L13_H5,
        (10, 5) => kernels::NLBF_SLIDE_L10_H5,
        (14, 5) => kernels::NLBF_SLIDE_L14_H5,
        (7, 6) => kernels::NLBF_SLIDE_L7_H6,
        (7, 7) => kernels::NLBF_SLIDE_L7_H7,
        (9, 8) => kernels::NLBF_SLIDE_L9_H8,
        _ => return None,
    })
}

/// C values per thread the C-scan kernels are compiled for (the host takes the first of its
/// measured preference order whose shifts of one trace span less than one sample).
pub const CSCAN_GROUPS: [u32; 4] = [4, 3, 2, 1];

/// The C-scan kernel for half window `h` and `g` C values per thread.
pub const fn cscan_kernel(h: u32, g: u32) -> Option<CscanKernel> {
    Some(match (h, g) {
        (1, 1) => kernels::NLBF_CSCAN_H1_G1,
        (1, 2) => kernels::NLBF_CSCAN_H1_G2,
        (1, 4) => kernels::NLBF_CSCAN_H1_G4,
        (2, 1) => kernels::NLBF_CSCAN_H2_G1,
        (2, 2) => kernels::NLBF_CSCAN_H2_G2,
        (2, 4) => kernels::NLBF_CSCAN_H2_G4,
        (3, 1) => kernels::NLBF_CSCAN_H3_G1,
        (3, 2) => kernels::NLBF_CSCAN_H3_G2,
        (3, 4) => kernels::NLBF_CSCAN_H3_G4,
        (4, 1) => kernels::NLBF_CSCAN_H4_G1,
        (4, 2) => kernels::NLBF_CSCAN_H4_G2,
        (4, 4) => kernels::NLBF_CSCAN_H4_G4,
        (5, 1) => kernels::NLBF_CSCAN_H5_G1,
        (5, 2) => kernels::NLBF_CSCAN_H5_G2,
        (5, 3) => kernels::NLBF_CSCAN_H5_G3,
        (5, 4) => kernels::NLBF_CSCAN_H5_G4,
        (6, 1) => kernels::NLBF_CSCAN_H6_G1,
        (6, 2) => kernels::NLBF_CSCAN_H6_G2,
        (6, 4) => kernels::NLBF_CSCAN_H6_G4,
        (7, 1) => kernels::NLBF_CSCAN_H7_G1,
        (7, 2) => kernels::NLBF_CSCAN_H7_G2,
        (7, 4) => kernels::NLBF_CSCAN_H7_G4,
        (8, 1) => kernels::NLBF_CSCAN_H8_G1,
        (8, 2) => kernels::NLBF_CSCAN_H8_G2,
        (8, 4) => kernels::NLBF_CSCAN_H8_G4,
        _ => return None,
    })
}

/// The C-scan kernel with deep staging (`stage_rows_deep`: a warp stages two rows at
/// once with 16 loads in flight per lane) for half window `h` and `g` C values per thread; same
/// results as [`cscan_kernel`]'s kernel.
pub const fn cscan_deep_kernel(h: u32, g: u32) -> Option<CscanKernel> {
    Some(match (h, g) {
        (5, 2) => kernels::NLBF_CSCAN_H5_G2_DEEP,
        (5, 3) => kernels::NLBF_CSCAN_H5_G3_DEEP,
        (5, 4) => kernels::NLBF_CSCAN_H5_G4_DEEP,
        _ => return None,
    })
}

/// Output time samples per block of the C-scan kernel (one thread per sample and C group).
pub const CSCAN_TIMES: u32 = 64;
/// Aperture traces staged per batch in the C-scan kernel.
pub const CSCAN_BATCH: u32 = 16;
/// Warps per block of the sliding kernel (combinations are dealt round-robin to warps).
pub const SLIDE_WARPS: u32 = 8;

/// Output samples per block of the sliding kernel with run `l` and half window `h`.
pub fn slide_outputs(l: u32, h: u32) -> u32 { 32 * l - 2 * h }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moveout_matches_equation_1() {
        let (a, b, c, d, e) = (1e-4f32, -2e-4, 3e-7, -1e-7, 2e-7);
        let (dx, dy) = (120.0f32, -35.0f32);
        let want = a as f64 * dx as f64 + b as f64 * dy as f64 + c as f64 * (dx * dy) as f64
            + d as f64 * (dx * dx) as f64 + e as f64 * (dy * dy) as f64;
        assert!((moveout(a, b, c, d, e, dx, dy) as f64 - want).abs() < 1e-9);
        assert_eq!(moveout(0.0, 0.0, 0.0, 0.0, 0.0, dx, dy), 0.0);
    }

    #[test]
    fn split_and_shifted_sample() {
        let (k, f) = split_shift(-1.25);
        assert_eq!((k, f), (-2, 0.75));
        let tr = [1.0f32, 3.0, 5.0];
        assert_eq!(shifted_sample(&tr, 0, 0, 0.5), 2.0);
        // Zero-extended: between the last sample and the zero beyond it the value ramps down.
        assert_eq!(shifted_sample(&tr, 2, 0, 0.5), 2.5);
        assert_eq!(shifted_sample(&tr, -1, 0, 0.5), 0.5);
        assert_eq!(shifted_sample(&tr, 5, -1, 0.0), 0.0);
        assert_eq!(shifted_sample(&tr, -7, 0, 0.3), 0.0);
        assert_eq!(split_shift(f32::NAN).1, 0.0);
    }

    #[test]
    fn semblance_and_ties() {
        assert_eq!(semblance(0.0, 0.0, 5), 0.0);
        assert_eq!(semblance(4.0, 2.0, 2), 1.0);
        assert!(better(0.5, 9, 0.4, 0));
        assert!(better(0.5, 3, 0.5, 4));
        assert!(!better(0.5, 4, 0.5, 3));
    }

    #[test]
    fn codes_round_trip() {
        let (n_be, n_c) = (1661, 11);
        for &(ad, be, c) in &[(0, 0, 0), (1660, 1660, 10), (17, 1234, 5)] {
            assert_eq!(unpack_code(pack_code(ad, be, c, n_be, n_c), n_be, n_c), (ad, be, c));
        }
    }

    #[test]
    fn table_3_block_size() {
        assert_eq!(paper_block_size(231, 231, 11), 256);
        assert_eq!(paper_block_size(1661, 1661, 11), 1024);
        assert_eq!(paper_block_size(3, 2, 1), 32);
    }
}
