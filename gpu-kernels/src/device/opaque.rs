//! Optimiser barriers and traps. ptxas and LLVM hoist values out of loops for latency; in kernels
//! that hold large register arrays that costs more registers (and spills) than the recomputation
//! saves. These functions are `asm!` the optimiser cannot see through: their result is recomputed
//! where it is written. On the host they are the plain values.

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// `v`, opaque to the optimiser (not `pure`): per-layer offsets such as z0 + 32 l are then formed
/// inside a loop rather than hoisted into one register each.
#[inline(always)]
pub fn opaque_u32(v: u32) -> u32 {
    device_or_host! {
        device: {
            let r: u32;
            // SAFETY: a register move; no memory is touched.
            unsafe { asm!("mov.u32 {r}, {v};", r = out(reg32) r, v = in(reg32) v, options(nomem, nostack)) };
            r
        }
        host: { v }
    }
}

/// 0, through an `asm!` the optimiser cannot see through or hoist out of a loop (not `pure`):
/// added to an index, it keeps loads from being batched ahead of the loop.
#[inline(always)]
pub fn opaque_zero() -> usize {
    device_or_host! {
        device: {
            let r: u64;
            // SAFETY: a register move; no memory is touched.
            unsafe { asm!("mov.b64 {r}, 0;", r = out(reg64) r, options(nomem, nostack)) };
            r as usize
        }
        host: { 0 }
    }
}

/// A compiler-only memory fence (no instruction): memory accesses are not moved across it, e.g.
/// the next row's loads are not hoisted above this row's work.
#[inline(always)]
pub fn compiler_fence() {
    device_or_host! {
        // SAFETY: an empty `asm!`; it only tells the compiler memory may have changed.
        device: { unsafe { asm!("", options(nostack, preserves_flags)) } }
        host: { core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst) }
    }
}

/// `threadIdx.y * 32 + lane` and the block's thread count for blocks of (32, W) threads, read
/// afresh (not hoisted into registers that would stay live across a loop).
#[inline(always)]
pub fn tid_fresh() -> (u32, u32) {
    device_or_host! {
        device: {
            let (t, n): (u32, u32);
            // SAFETY: reads special registers and does register arithmetic; no memory is touched.
            unsafe {
                asm!("{{ .reg .u32 a, b; mov.u32 a, %tid.y; mov.u32 b, %laneid; mad.lo.u32 {t}, a, 32, b; }}", t = out(reg32) t,
                     options(nomem, nostack));
                asm!("{{ .reg .u32 a; mov.u32 a, %ntid.y; shl.b32 {n}, a, 5; }}", n = out(reg32) n, options(nomem, nostack));
            }
            (t, n)
        }
        host: { (0, 32) }
    }
}

/// Ends the kernel with an error (`trap`): the launch fails with an illegal-instruction error
/// that the host reports with the kernel's name.
#[inline(always)]
pub fn trap() {
    device_or_host! {
        device: {
            // SAFETY: `trap` aborts the kernel; it touches no memory.
            unsafe { asm!("trap;") }
        }
        host: { panic!("device trap") }
    }
}
