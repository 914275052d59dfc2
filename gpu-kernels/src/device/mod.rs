//! The device layer: what `cuda_std` gives Rust-CUDA kernels, on rustc's own NVPTX target.
//!
//! Thread geometry and barriers come from `core::arch::nvptx`; everything PTX has but `core` does
//! not expose (shuffles, votes, float atomics, fast math, texture fetches) is one `asm!` each.
//! Only compiled for `nvptx64`: kernels are the only users.

use core::arch::asm;
use core::arch::nvptx;

pub mod cluster;
pub mod shared;
pub mod texture;

pub use cluster::{cluster_ctarank, cluster_nctarank, cluster_sync, fence_acquire_shared_cluster, fence_mbarrier_init_cluster,
    fence_release_shared_cta_cluster, ld_dsmem_f32x4, ld_dsmem_u32, map_shared_rank, mbarrier_arrive_remote, mbarrier_init,
    mbarrier_try_wait_parity};
pub use shared::{dynamic_shared, SharedCarver};
pub use texture::{tex1d, tex2d, tex2d_f2, tex3d, tex3d_f2};

// ---- thread geometry ---------------------------------------------------------------------------

#[inline(always)]
pub fn thread_idx_x() -> u32 { unsafe { nvptx::_thread_idx_x() as u32 } }
#[inline(always)]
pub fn thread_idx_y() -> u32 { unsafe { nvptx::_thread_idx_y() as u32 } }
#[inline(always)]
pub fn thread_idx_z() -> u32 { unsafe { nvptx::_thread_idx_z() as u32 } }
#[inline(always)]
pub fn block_idx_x() -> u32 { unsafe { nvptx::_block_idx_x() as u32 } }
#[inline(always)]
pub fn block_idx_y() -> u32 { unsafe { nvptx::_block_idx_y() as u32 } }
#[inline(always)]
pub fn block_idx_z() -> u32 { unsafe { nvptx::_block_idx_z() as u32 } }
#[inline(always)]
pub fn block_dim_x() -> u32 { unsafe { nvptx::_block_dim_x() as u32 } }
#[inline(always)]
pub fn block_dim_y() -> u32 { unsafe { nvptx::_block_dim_y() as u32 } }
#[inline(always)]
pub fn block_dim_z() -> u32 { unsafe { nvptx::_block_dim_z() as u32 } }
#[inline(always)]
pub fn grid_dim_x() -> u32 { unsafe { nvptx::_grid_dim_x() as u32 } }
#[inline(always)]
pub fn grid_dim_y() -> u32 { unsafe { nvptx::_grid_dim_y() as u32 } }
#[inline(always)]
pub fn grid_dim_z() -> u32 { unsafe { nvptx::_grid_dim_z() as u32 } }

/// Global x index of this thread in a 1D launch.
#[inline(always)]
pub fn global_x() -> u32 { block_idx_x() * block_dim_x() + thread_idx_x() }
/// Global y index of this thread.
#[inline(always)]
pub fn global_y() -> u32 { block_idx_y() * block_dim_y() + thread_idx_y() }
/// Linear thread index inside the block (x fastest).
#[inline(always)]
pub fn block_thread_linear() -> u32 {
    (thread_idx_z() * block_dim_y() + thread_idx_y()) * block_dim_x() + thread_idx_x()
}
/// Lane inside the warp.
#[inline(always)]
pub fn lane_id() -> u32 {
    let r: u32;
    unsafe { asm!("mov.u32 {r}, %laneid;", r = out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// `__syncthreads()`.
#[inline(always)]
pub fn sync_threads() { unsafe { nvptx::_syncthreads() } }

/// `__syncwarp()` over the full warp.
#[inline(always)]
pub fn sync_warp() { unsafe { asm!("bar.warp.sync -1;", options(nostack)) } }

// ---- warp shuffles and votes -------------------------------------------------------------------

pub const FULL_MASK: u32 = 0xffff_ffff;

#[inline(always)]
pub fn shfl_down_f32(v: f32, delta: u32) -> f32 {
    let r: f32;
    unsafe {
        asm!("shfl.sync.down.b32 {r}, {v}, {d}, 31, -1;", r = out(reg32) r, v = in(reg32) v,
             d = in(reg32) delta, options(nostack))
    };
    r
}
#[inline(always)]
pub fn shfl_down_u32(v: u32, delta: u32) -> u32 {
    let r: u32;
    unsafe {
        asm!("shfl.sync.down.b32 {r}, {v}, {d}, 31, -1;", r = out(reg32) r, v = in(reg32) v,
             d = in(reg32) delta, options(nostack))
    };
    r
}
#[inline(always)]
pub fn shfl_xor_f32(v: f32, mask: u32) -> f32 {
    let r: f32;
    unsafe {
        asm!("shfl.sync.bfly.b32 {r}, {v}, {m}, 31, -1;", r = out(reg32) r, v = in(reg32) v,
             m = in(reg32) mask, options(nostack))
    };
    r
}
#[inline(always)]
pub fn shfl_xor_u32(v: u32, mask: u32) -> u32 {
    let r: u32;
    unsafe {
        asm!("shfl.sync.bfly.b32 {r}, {v}, {m}, 31, -1;", r = out(reg32) r, v = in(reg32) v,
             m = in(reg32) mask, options(nostack))
    };
    r
}
/// Broadcast `v` from `src_lane` to the whole warp.
#[inline(always)]
pub fn shfl_idx_f32(v: f32, src_lane: u32) -> f32 {
    let r: f32;
    unsafe {
        asm!("shfl.sync.idx.b32 {r}, {v}, {s}, 31, -1;", r = out(reg32) r, v = in(reg32) v,
             s = in(reg32) src_lane, options(nostack))
    };
    r
}
#[inline(always)]
pub fn shfl_idx_u32(v: u32, src_lane: u32) -> u32 {
    let r: u32;
    unsafe {
        asm!("shfl.sync.idx.b32 {r}, {v}, {s}, 31, -1;", r = out(reg32) r, v = in(reg32) v,
             s = in(reg32) src_lane, options(nostack))
    };
    r
}
/// `__ballot_sync(0xffffffff, pred)`.
#[inline(always)]
pub fn vote_ballot(pred: bool) -> u32 {
    let r: u32;
    unsafe {
        asm!("{{ .reg .pred p; setp.ne.u32 p, {x}, 0; vote.sync.ballot.b32 {r}, p, -1; }}",
             r = out(reg32) r, x = in(reg32) pred as u32, options(nostack))
    };
    r
}
#[inline(always)]
pub fn vote_any(pred: bool) -> bool { vote_ballot(pred) != 0 }
#[inline(always)]
pub fn vote_all(pred: bool) -> bool { vote_ballot(pred) == FULL_MASK }

/// Warp-wide sum (every lane gets the total).
#[inline(always)]
pub fn warp_sum_f32(mut v: f32) -> f32 {
    let mut m = 16;
    while m > 0 {
        v += shfl_xor_f32(v, m);
        m >>= 1;
    }
    v
}

// ---- atomics -----------------------------------------------------------------------------------

/// `atomicAdd(float*, float)` on global or shared memory (generic address).
#[inline(always)]
pub unsafe fn atomic_add_f32(addr: *mut f32, v: f32) -> f32 {
    let old: f32;
    unsafe {
        asm!("atom.add.f32 {o}, [{a}], {v};", o = out(reg32) old, a = in(reg64) addr, v = in(reg32) v,
             options(nostack))
    };
    old
}
/// `atomicAdd(unsigned*, unsigned)`.
#[inline(always)]
pub unsafe fn atomic_add_u32(addr: *mut u32, v: u32) -> u32 {
    let old: u32;
    unsafe {
        asm!("atom.add.u32 {o}, [{a}], {v};", o = out(reg32) old, a = in(reg64) addr, v = in(reg32) v,
             options(nostack))
    };
    old
}
/// `atomicMax(unsigned*, unsigned)`.
#[inline(always)]
pub unsafe fn atomic_max_u32(addr: *mut u32, v: u32) -> u32 {
    let old: u32;
    unsafe {
        asm!("atom.max.u32 {o}, [{a}], {v};", o = out(reg32) old, a = in(reg64) addr, v = in(reg32) v,
             options(nostack))
    };
    old
}

// ---- fast math (the SFU path: `__expf`, `rsqrtf`, ...) -----------------------------------------

/// 2^x with `ex2.approx.ftz` (about 2 ulp).
#[inline(always)]
pub fn ex2_approx(x: f32) -> f32 {
    let r: f32;
    unsafe { asm!("ex2.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}
/// e^x through `ex2.approx` (`__expf`).
#[inline(always)]
pub fn exp_fast(x: f32) -> f32 { ex2_approx(x * core::f32::consts::LOG2_E) }
/// log2(x) with `lg2.approx`.
#[inline(always)]
pub fn lg2_approx(x: f32) -> f32 {
    let r: f32;
    unsafe { asm!("lg2.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}
/// 1/sqrt(x) with `rsqrt.approx`.
#[inline(always)]
pub fn rsqrt_approx(x: f32) -> f32 {
    let r: f32;
    unsafe { asm!("rsqrt.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}
/// sqrt(x) with `sqrt.approx` (MUFU.RSQ + multiply).
#[inline(always)]
pub fn sqrt_approx(x: f32) -> f32 {
    let r: f32;
    unsafe { asm!("sqrt.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}
/// Correctly rounded sqrt (`sqrt.rn`), the same value the CPU's `f32::sqrt` gives.
#[inline(always)]
pub fn sqrt_rn(x: f32) -> f32 {
    let r: f32;
    unsafe { asm!("sqrt.rn.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}
/// 1/x with `rcp.approx`.
#[inline(always)]
pub fn rcp_approx(x: f32) -> f32 {
    let r: f32;
    unsafe { asm!("rcp.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}
/// sin(x) with `sin.approx` (good for |x| up to a few pi).
#[inline(always)]
pub fn sin_approx(x: f32) -> f32 {
    let r: f32;
    unsafe { asm!("sin.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}
/// cos(x) with `cos.approx`.
#[inline(always)]
pub fn cos_approx(x: f32) -> f32 {
    let r: f32;
    unsafe { asm!("cos.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}

// ---- loads -------------------------------------------------------------------------------------

/// Read-only 8-byte load through the non-coherent (L1/texture) path. `p` must be 8-byte aligned.
#[inline(always)]
pub unsafe fn ldg_f32x2(p: *const f32) -> [f32; 2] {
    let (a, b): (f32, f32);
    unsafe {
        asm!("ld.global.nc.v2.f32 {{{a}, {b}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, p = in(reg64) p,
             options(readonly, nostack, pure))
    };
    [a, b]
}

/// Read-only 16-byte load. `p` must be 16-byte aligned.
#[inline(always)]
pub unsafe fn ldg_f32x4(p: *const f32) -> [f32; 4] {
    let (a, b, c, d): (f32, f32, f32, f32);
    unsafe {
        asm!("ld.global.nc.v4.f32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b,
             c = out(reg32) c, d = out(reg32) d, p = in(reg64) p, options(readonly, nostack, pure))
    };
    [a, b, c, d]
}

/// Read-only 4-byte integer load.
#[inline(always)]
pub unsafe fn ldg_u32(p: *const u32) -> u32 {
    let r: u32;
    unsafe { asm!("ld.global.nc.u32 {r}, [{p}];", r = out(reg32) r, p = in(reg64) p, options(readonly, nostack, pure)) };
    r
}

/// Read-only cached load (`ld.global.nc`, i.e. `__ldg`).
#[inline(always)]
pub unsafe fn ldg_f32(p: *const f32) -> f32 {
    let r: f32;
    unsafe { asm!("ld.global.nc.f32 {r}, [{p}];", r = out(reg32) r, p = in(reg64) p, options(readonly, nostack)) };
    r
}

/// A hint to bring the 128-byte line at `p` (global memory) into L2 (`prefetch.global.L2`): no
/// register waits for it, and a wrong guess costs only bandwidth.
#[inline(always)]
pub fn prefetch_l2(p: *const f32) {
    unsafe { core::arch::asm!("prefetch.global.L2 [{p}];", p = in(reg64) p, options(nostack, readonly, preserves_flags)) };
}
