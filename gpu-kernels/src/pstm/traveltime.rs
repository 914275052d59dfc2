//! Traveltime functions shared by CPU and GPU migration code.

use crate::math::sqrt;

/// Double-square-root two-way traveltime (s) to an image point at two-way vertical time `tau` (s):
/// t = sqrt((tau/2)^2 + ds2 / v^2) + sqrt((tau/2)^2 + dr2 / v^2), with `ds2`, `dr2` the squared
/// horizontal source and receiver distances to the image point (m^2) and `inv_v2` = 1 / v_rms^2.
/// (Paper 2, equation 3, written there with one-way tau; production PSTM uses two-way time.)
#[inline(always)]
pub fn dsr_two_way(tau: f32, ds2: f32, dr2: f32, inv_v2: f32) -> f32 {
    let h2 = 0.25 * tau * tau;
    sqrt(h2 + ds2 * inv_v2) + sqrt(h2 + dr2 * inv_v2)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn zero_offset_is_vertical_time() {
        assert_eq!(dsr_two_way(1.2, 0.0, 0.0, 1.0 / 4e6), 1.2);
        // 1000 m away on both sides at 2000 m/s, tau = 0: 0.5 s each way.
        assert!((dsr_two_way(0.0, 1e6, 1e6, 1.0 / 4e6) - 1.0).abs() < 1e-6);
    }
}
