//! Scalar math with one name on both sides. `sqrt`, `floor`, `mul_add`, `abs` are the correctly
//! rounded core versions on both (`sqrt.rn`/`cvt.rmi`/`fma.rn` on the GPU), so CPU and GPU agree
//! bit for bit. `exp`, `sin`, `cos` are std's on the CPU and the SFU approximations on the GPU
//! (a few ulp apart; tests compare with tolerances).

#[inline(always)]
pub fn sqrt(x: f32) -> f32 { core::f32::math::sqrt(x) }
#[inline(always)]
pub fn floor(x: f32) -> f32 { core::f32::math::floor(x) }
#[inline(always)]
pub fn round(x: f32) -> f32 { core::f32::math::round(x) }
#[inline(always)]
pub fn mul_add(a: f32, b: f32, c: f32) -> f32 { core::f32::math::mul_add(a, b, c) }
#[inline(always)]
pub fn abs(x: f32) -> f32 { if x < 0.0 { -x } else { x } }

/// e^x.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    #[cfg(target_arch = "nvptx64")]
    { crate::device::exp_fast(x) }
    #[cfg(not(target_arch = "nvptx64"))]
    { f32::exp(x) }
}

/// (sin x, cos x). On the GPU the argument is first reduced to [-pi, pi] so the SFU stays accurate
/// (absolute error about 1e-6 after reduction).
#[inline(always)]
pub fn sin_cos(x: f32) -> (f32, f32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let two_pi = core::f32::consts::TAU;
        let r = x - two_pi * round(x * (1.0 / two_pi));
        (crate::device::sin_approx(r), crate::device::cos_approx(r))
    }
    #[cfg(not(target_arch = "nvptx64"))]
    { f32::sin_cos(x) }
}
