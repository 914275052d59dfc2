//! Traveltime functions shared by CPU and GPU migration code.
//!
//! All of them are built from `mul_add`, `sqrt` and IEEE division only, which are correctly
//! rounded on both sides (`fma.rn`, `sqrt.rn`, `div.rn` on the GPU), so the CPU references and the
//! kernels compute bit-identical traveltimes.

use crate::math::{mul_add, sqrt};

/// Double-square-root two-way traveltime (s) to an image point at two-way vertical time `tau` (s):
/// t = sqrt((tau/2)^2 + ds2 / v^2) + sqrt((tau/2)^2 + dr2 / v^2), with `ds2`, `dr2` the squared
/// horizontal source and receiver distances to the image point (m^2) and `inv_v2` = 1 / v_rms^2.
/// (Paper 2, equation 3, written there with one-way tau; production PSTM uses two-way time.)
#[inline(always)]
pub fn dsr_two_way(tau: f32, ds2: f32, dr2: f32, inv_v2: f32) -> f32 {
    let h2 = 0.25 * tau * tau;
    sqrt(h2 + ds2 * inv_v2) + sqrt(h2 + dr2 * inv_v2)
}

/// `(tau/2)^2` for two-way vertical time `tau`: the squared one-way vertical time of each leg.
/// (`0.5 * tau` is exact, so this is one rounding.)
#[inline(always)]
pub fn half_tau_sq(tau: f32) -> f32 {
    let h = 0.5 * tau;
    h * h
}

/// DSR two-way time from `h2 = (tau/2)^2` with fused multiply-adds (the PSTM engine's form of
/// [`dsr_two_way`]; the same value up to one rounding per leg).
#[inline(always)]
pub fn dsr_legs(h2: f32, ds2: f32, dr2: f32, inv_v2: f32) -> f32 {
    sqrt(mul_add(ds2, inv_v2, h2)) + sqrt(mul_add(dr2, inv_v2, h2))
}

/// One leg of the anisotropic (VTI) non-hyperbolic traveltime, Alkhalifah & Tsvankin (1995,
/// Geophysics 60, eq. 8) applied to a single leg with one-way vertical time t0 = tau/2:
///
/// T^2 = t0^2 + x^2/v^2 - 2 eta x^4 / (v^2 (t0^2 v^2 + (1 + 2 eta) x^2))
///
/// With a = x^2 / v^2 (`a`, s^2) and h2 = t0^2 this is
/// T^2 = h2 + a - 2 eta a^2 / (h2 + (1 + 2 eta) a), which is what is computed (one division).
/// For eta >= 0 the radicand is at least h2 + a / (1 + 2 eta) > 0; at h2 = a = 0 the correction
/// is 0/0 and is taken as its limit, 0. `v` is the NMO (RMS) velocity, `eta` the effective
/// anellipticity; eta = 0 gives the DSR leg exactly.
#[inline(always)]
pub fn vti_leg(h2: f32, a: f32, eta: f32) -> f32 {
    let two_eta = eta + eta;
    let den = mul_add(1.0 + two_eta, a, h2);
    let corr = if den > 0.0 { two_eta * a * a / den } else { 0.0 };
    sqrt(h2 + a - corr)
}

/// VTI two-way traveltime: [`vti_leg`] for the source leg plus the receiver leg.
#[inline(always)]
pub fn vti_legs(h2: f32, ds2: f32, dr2: f32, inv_v2: f32, eta: f32) -> f32 {
    vti_leg(h2, ds2 * inv_v2, eta) + vti_leg(h2, dr2 * inv_v2, eta)
}

/// The traveltime formula a migration kernel is instantiated with (monomorphised, no branches).
pub trait Model: Copy {
    /// Whether the formula reads an eta value per image sample.
    const NEEDS_ETA: bool;
    /// Two-way traveltime (s) from h2 = (tau/2)^2, squared source and receiver distances (m^2),
    /// 1/v^2 and eta at the image point.
    fn two_way(h2: f32, ds2: f32, dr2: f32, inv_v2: f32, eta: f32) -> f32;
}

/// Straight-ray double square root.
#[derive(Clone, Copy)]
pub struct Dsr;
/// Anisotropic (VTI) non-hyperbolic, per leg.
#[derive(Clone, Copy)]
pub struct Vti;

impl Model for Dsr {
    const NEEDS_ETA: bool = false;
    #[inline(always)]
    fn two_way(h2: f32, ds2: f32, dr2: f32, inv_v2: f32, _eta: f32) -> f32 { dsr_legs(h2, ds2, dr2, inv_v2) }
}
impl Model for Vti {
    const NEEDS_ETA: bool = true;
    #[inline(always)]
    fn two_way(h2: f32, ds2: f32, dr2: f32, inv_v2: f32, eta: f32) -> f32 { vti_legs(h2, ds2, dr2, inv_v2, eta) }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn zero_offset_is_vertical_time() {
        assert_eq!(dsr_two_way(1.2, 0.0, 0.0, 1.0 / 4e6), 1.2);
        // 1000 m away on both sides at 2000 m/s, tau = 0: 0.5 s each way.
        assert!((dsr_two_way(0.0, 1e6, 1e6, 1.0 / 4e6) - 1.0).abs() < 1e-6);
        assert_eq!(vti_legs(half_tau_sq(1.2), 0.0, 0.0, 1.0 / 4e6, 0.1), 1.2);
        assert_eq!(vti_legs(0.0, 0.0, 0.0, 1.0 / 4e6, 0.1), 0.0);
    }

    #[test]
    fn vti_with_zero_eta_is_dsr() {
        for &(tau, ds2, dr2) in &[(0.0f32, 1e6f32, 4e6f32), (1.0, 2.5e5, 0.0), (3.7, 9e6, 1e4)] {
            let iv2 = 1.0 / (2500.0f32 * 2500.0);
            let h2 = half_tau_sq(tau);
            assert_eq!(vti_legs(h2, ds2, dr2, iv2, 0.0), dsr_legs(h2, ds2, dr2, iv2));
            assert!((dsr_legs(h2, ds2, dr2, iv2) - dsr_two_way(tau, ds2, dr2, iv2)).abs() <= 2e-7 * (1.0 + tau));
        }
    }

    #[test]
    fn vti_matches_alkhalifah_tsvankin_in_f64() {
        // One leg, written exactly as in the paper (with x and v), in f64.
        let (t0, x, v, eta) = (0.8f64, 1800.0f64, 2400.0f64, 0.12f64);
        let t2 = t0 * t0 + x * x / (v * v) - 2.0 * eta * x.powi(4) / (v * v * (t0 * t0 * v * v + (1.0 + 2.0 * eta) * x * x));
        let got = vti_leg((t0 * t0) as f32, (x * x / (v * v)) as f32, eta as f32) as f64;
        assert!((got - t2.sqrt()).abs() < 1e-6, "{got} vs {}", t2.sqrt());
        // Positive eta makes far-offset times shorter than hyperbolic (faster horizontally).
        assert!(got < (t0 * t0 + x * x / (v * v)).sqrt());
    }
}
