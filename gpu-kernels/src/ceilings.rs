//! Kernels that measure the device's own ceilings once per benchmark run: the FP32 FMA rate and the
//! special-function (SFU) rate. (Memory bandwidth is a device-to-device copy on the host side.)

#[cfg(target_arch = "nvptx64")]
use crate::device::*;

/// FMAs per thread in [`FMA_RATE`]: 8 independent chains x `iters` x 2 per step.
pub const FMA_CHAINS: u32 = 8;

crate::kernel! {
/// Each thread runs 8 independent FMA chains for `iters` iterations (16 FMAs per iteration,
/// enough independent work to hide the 4-cycle FMA latency) and writes one value so nothing is
/// optimised away. Flops = threads x iters x 16 x 2.
pub unsafe fn fma_rate(iters: u32, seed: f32, out: *mut f32) as FMA_RATE {
    let i = global_x();
    let mut a = [0.0f32; 8];
    for (k, v) in a.iter_mut().enumerate() {
        *v = seed + (i + k as u32) as f32 * 1e-7;
    }
    let (m, c) = (0.999_999f32, 1e-7f32);
    let mut it = 0;
    while it < iters {
        for v in a.iter_mut() {
            *v = crate::math::mul_add(*v, m, c);
            *v = crate::math::mul_add(*v, m, c);
        }
        it += 1;
    }
    let s = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
    unsafe { *out.add(i as usize) = s };
}
}

crate::kernel! {
/// Special-function throughput: 8 independent `ex2.approx` chains x `iters`. Ops = threads x iters x 8.
pub unsafe fn sfu_rate(iters: u32, seed: f32, out: *mut f32) as SFU_RATE {
    let i = global_x();
    let mut a = [0.0f32; 8];
    for (k, v) in a.iter_mut().enumerate() {
        *v = seed * 1e-3 + (i + k as u32) as f32 * 1e-9;
    }
    let mut it = 0;
    while it < iters {
        for v in a.iter_mut() {
            // ex2 of a small negative number stays in (0, 1]: no overflow over many iterations.
            *v = ex2_approx(-*v);
        }
        it += 1;
    }
    let s = a[0] + a[1] + a[2] + a[3] + a[4] + a[5] + a[6] + a[7];
    unsafe { *out.add(i as usize) = s };
}
}
