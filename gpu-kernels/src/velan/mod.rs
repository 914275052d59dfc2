//! Velocity analysis: the semblance of CMP gathers along moveout curves, shared by the CPU
//! reference and the GPU kernel (paper 1's semblance put to its commonest use).
//!
//! For a CMP gather of N traces at offsets x_k, an output time t0 and a trial velocity v, every
//! trace is read at its moveout time t_k = [`moveout_time`](t0, x_k, v) by linear interpolation
//! between samples; a trace whose moveout time falls outside the record or is stretched beyond the
//! mute ([`is_live`]) contributes zero. Per t0 the scan forms the stack s = sum_k a_k and the
//! energy e = sum_k a_k^2; the semblance over a window of 2h + 1 output samples is
//!
//! ```text
//! S(t0, v) = sum_w s^2 / (N sum_w e)          (0 where the denominator is 0)
//! ```
//!
//! with N the gather's traces, muted ones included (few live traces mean little evidence, so a
//! shallow time seen by one near trace does not score 1). Sums run in one
//! order on both sides (traces ascending, then window samples ascending) and every step is a
//! correctly rounded operation (`sqrt`, `floor`, `mul_add`, `/`), so CPU and GPU agree bit for bit.

use crate::math::{floor, mul_add, sqrt};

pub mod kernels;

/// Output times (t0 samples) a block computes: its outputs plus h on each side for the window.
pub const TILE_T: u32 = 256;
/// Trial velocities one thread accumulates at once (registers: two sums each).
pub const VEL_PER_THREAD: u32 = 8;
/// Largest half window (samples): a block's outputs are TILE_T - 2h.
pub const MAX_HALF_WINDOW: u32 = 64;
/// Shared-memory floats of the staged trace windows (also holds the window sums at the end).
pub const STAGE_FLOATS: u32 = 6144;
/// Traces whose windows a block considers staging at once.
pub const STAGE_TRACES: u32 = 32;

/// Two-way time (s) of output time `t0` (s) at squared offset `x2` (m^2) for slowness squared `s2`
/// = 1 / v^2 and `v2` = v^2: hyperbolic, sqrt(t0^2 + x^2 / v^2), when `eta` is 0; otherwise the
/// Alkhalifah-Tsvankin non-hyperbolic moveout
/// t^2 = t0^2 + x^2/v^2 - 2 eta x^4 / (v^2 (t0^2 v^2 + (1 + 2 eta) x^2)), clamped at 0.
#[inline(always)]
pub fn moveout_time(t0: f32, x2: f32, s2: f32, v2: f32, eta: f32) -> f32 {
    let q = x2 * s2;
    if eta == 0.0 {
        return sqrt(mul_add(t0, t0, q));
    }
    let den = mul_add(t0 * t0, v2, mul_add(2.0 * eta, x2, x2));
    let corr = if den > 0.0 { 2.0 * eta * q * x2 / den } else { 0.0 };
    let t2 = mul_add(t0, t0, q) - corr;
    if t2 > 0.0 { sqrt(t2) } else { 0.0 }
}

/// Output time of sample `i` (s).
#[inline(always)]
pub fn t0_of(i: i32, dt: f32, t_first: f32) -> f32 { mul_add(i as f32, dt, t_first) }

/// Fractional sample position of time `t` (s).
#[inline(always)]
pub fn position(t: f32, t_first: f32, inv_dt: f32) -> f32 { (t - t_first) * inv_dt }

/// Whether a trace contributes at moveout time `t` (position `pos`, record of `last + 1` samples)
/// for output time `t0`: inside the record and stretched by at most `max_stretch`
/// ((t - t0) / t0 <= max_stretch; t0 = 0 keeps only zero-offset samples).
#[inline(always)]
pub fn is_live(t: f32, t0: f32, pos: f32, last: f32, max_stretch: f32) -> bool {
    (pos >= 0.0) & (pos <= last) & (t - t0 <= max_stretch * t0)
}

/// Splits a live position into its sample index and fraction. Callers pass only positions that
/// [`is_live`] accepted: in [0, last] with last < 2^24, so the conversion is exact and in range.
#[inline(always)]
pub fn split(pos: f32) -> (u32, f32) {
    let k = floor(pos);
    if !(0.0..16_777_216.0).contains(&k) {
        return (0, 0.0); // unreachable for live positions; keeps the conversion defined
    }
    // SAFETY: k is an integer-valued float in [0, 2^24).
    (unsafe { k.to_int_unchecked::<u32>() }, pos - k)
}

/// Linear interpolation `a + f (b - a)` as one fused multiply-add.
#[inline(always)]
pub fn lerp(a: f32, b: f32, f: f32) -> f32 { mul_add(f, b - a, a) }

/// The semblance of window sums `num` = sum s^2 and `den` = N sum e; 0 for an empty window.
#[inline(always)]
pub fn semblance(num: f32, den: f32) -> f32 { if den > 0.0 { num / den } else { 0.0 } }

/// Slowness squared and velocity squared of trial velocity `v` (the tables both sides use).
#[inline(always)]
pub fn slowness2(v: f32) -> (f32, f32) { (1.0 / (v * v), v * v) }

/// Outputs of one block for half window `h`.
#[inline(always)]
pub fn outputs_per_tile(h: u32) -> u32 { TILE_T - 2 * h }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moveout_is_hyperbolic_without_eta() {
        let (s2, v2) = slowness2(2000.0);
        let t = moveout_time(1.0, 2000.0 * 2000.0, s2, v2, 0.0);
        assert!((t - 2f32.sqrt()).abs() < 1e-6);
        assert_eq!(moveout_time(0.7, 0.0, s2, v2, 0.0), 0.7);
    }

    #[test]
    fn eta_reduces_moveout_at_long_offsets() {
        let (s2, v2) = slowness2(2500.0);
        let x2 = 3000.0f32 * 3000.0;
        let hyp = moveout_time(1.0, x2, s2, v2, 0.0);
        let an = moveout_time(1.0, x2, s2, v2, 0.1);
        // The exact formula in f64.
        let (t0, x2d, v) = (1.0f64, x2 as f64, 2500.0f64);
        let want = (t0 * t0 + x2d / (v * v) - 2.0 * 0.1 * x2d * x2d / (v * v * (t0 * t0 * v * v + 1.2 * x2d))).sqrt();
        assert!(an < hyp && (an as f64 - want).abs() < 1e-5, "{an} {want}");
        // Near offsets: the correction vanishes.
        assert!((moveout_time(1.0, 1.0, s2, v2, 0.1) - moveout_time(1.0, 1.0, s2, v2, 0.0)).abs() < 1e-7);
    }

    #[test]
    fn liveness_and_split() {
        assert!(is_live(1.0, 1.0, 250.0, 999.0, 0.5));
        assert!(!is_live(1.6, 1.0, 400.0, 999.0, 0.5));
        assert!(!is_live(0.1, 0.0, 25.0, 999.0, 0.5));
        assert!(!is_live(5.0, 4.0, 1000.5, 999.0, 10.0));
        assert_eq!(split(3.25), (3, 0.25));
        assert_eq!(lerp(1.0, 3.0, 0.5), 2.0);
        assert_eq!(semblance(1.0, 0.0), 0.0);
        assert_eq!(semblance(1.0, 4.0), 0.25);
    }
}
