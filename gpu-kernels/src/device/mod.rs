//! The device layer: what `cuda_std` gives Rust-CUDA kernels, on rustc's own NVPTX target.
//!
//! Kernels write against this module and nothing below it: thread geometry and grid-stride loops
//! ([`index`]), barriers ([`sync_threads`]), shared memory ([`SharedCarver`], [`SharedArray`]), warp
//! shuffles, votes and reductions ([`warp`]), atomics ([`atomic`]), read-only and shared-window
//! loads ([`load`]), fast math ([`fast`]), textures ([`texture`]), thread-block clusters
//! ([`cluster`]), optimiser barriers ([`opaque`]), straight-line repetition ([`unroll!`](crate::unroll))
//! and entry points with a typed host descriptor ([`kernel!`](crate::kernel), [`Kernel`]).
//! Kernels use it instead of `asm!` or `core::arch::nvptx` calls of their own.
//!
//! Kernels have no panic paths (a panic is a `trap` that kills the CUDA context; build.rs fails
//! the build if any entry point calls a function, which after fat LTO means `core::panicking`):
//! divisors go through [`nonzero`] / [`nonzero_usize`], and indices are bounded where the
//! compiler can see it (`unroll!` constants, power-of-two masks, `min` against the length) or are
//! unchecked accesses with a `// SAFETY:` comment where only the kernel's logic bounds them.
//!
//! Thread geometry and barriers come from `core::arch::nvptx`; everything PTX has but `core` does
//! not expose is one `asm!` each, kept here. Operations that cannot break memory safety by
//! themselves (indices, shuffles, fast math) are safe functions; those that dereference an address
//! the caller gives are `unsafe fn` with a `# Safety` section.
//!
//! The module also compiles for the host, so that `cargo doc -p gpu-kernels` shows it and host
//! code can name [`Kernel`] descriptors. On the host there is one thread in one block: indices are
//! 0, dimensions 1, shuffles return the lane's own value, loads are plain reads, atomics plain
//! read-modify-writes and fast math is the exact math. What has no host meaning (textures,
//! clusters, dynamic shared memory) panics there; kernels are never built for the host, so no
//! such stub can reach one.

/// The body of a function for the GPU or for the host (one thread, see the module docs), chosen
/// at compile time; only the GPU one is in the PTX. Always the whole body of the function.
macro_rules! device_or_host {
    (device: $dev:block host: $host:block) => {{
        #[cfg(target_arch = "nvptx64")]
        return $dev;
        // (`gpu_only` bodies never return: no warning for that.)
        #[cfg(not(target_arch = "nvptx64"))]
        #[allow(unreachable_code)]
        return $host;
    }};
}

pub mod atomic;
pub mod cluster;
pub mod fast;
pub mod index;
#[macro_use]
pub mod kernel;
pub mod load;
pub mod opaque;
pub mod shared;
pub mod texture;
#[macro_use]
mod unroll;
pub mod warp;

pub use atomic::{atomic_add_f32, atomic_add_u32, atomic_max_u32, red_add_f32};
pub use cluster::{cluster_ctarank, cluster_nctarank, cluster_sync, fence_acquire_shared_cluster, fence_mbarrier_init_cluster,
    fence_release_shared_cta_cluster, ld_dsmem_f32x4, ld_dsmem_u32, map_shared_rank, mbarrier_arrive_remote, mbarrier_init,
    mbarrier_try_wait_parity};
pub use fast::{add_rm, cos_approx, cvt_rzi_u32, div_full, ex2_approx, exp_fast, lg2_approx, rcp_approx, rsqrt_approx, sin_approx, sqrt_approx,
    sqrt_rn, sqrt_rsqrt_newton};
pub use index::{block_dim_x, block_dim_y, block_dim_z, block_idx_x, block_idx_y, block_idx_z, block_thread_linear, global_index,
    div_ceil_nz, global_x, global_y, grid_dim_x, grid_dim_y, grid_dim_z, grid_stride, grid_threads, nonzero, nonzero_usize, thread_idx_x, thread_idx_y,
    thread_idx_z, GridStride};
pub use kernel::Kernel;
pub use load::{ldg_f32, ldg_f32x2, ldg_f32x2_ordered, ldg_f32x4, ldg_u32, lds_f32x2, lds_u32, lds_u32x4, prefetch_l2, shared_addr_u32,
    sts_f32x2, sts_u32, sts_u32x4};
pub use opaque::{compiler_fence, opaque_u32, opaque_zero, tid_fresh, trap};
pub use shared::{dynamic_shared, SharedArray, SharedCarver};
pub use texture::{tex1d, tex2d, tex2d_f2, tex2d_texel_f2, tex3d, tex3d_f2};
pub use warp::{lane_fresh, lane_id, shfl_down_f32, shfl_down_u32, shfl_idx_f32, shfl_idx_u32, shfl_up1_f32, shfl_xor_f32, shfl_xor_u32,
    sync_warp, vote_all, vote_any, vote_ballot, warp_max_f32, warp_min_f32, warp_sum_f32, warp_sum_u32, FULL_MASK};

/// `__syncthreads()`: every thread of the block waits here until all have arrived, and their
/// shared- and global-memory writes before it are visible to the block after it. Every thread of
/// the block must reach the same barrier (not inside a branch some threads skip).
#[inline(always)]
pub fn sync_threads() {
    device_or_host! {
        // SAFETY: `bar.sync 0` touches no memory the compiler tracks; a barrier some threads skip
        // hangs the block, which is a liveness bug, not a memory-safety one.
        device: { unsafe { core::arch::nvptx::_syncthreads() } }
        host: {}
    }
}


/// Panics with the name of a device-only operation called on the host (module docs).
#[cfg(not(target_arch = "nvptx64"))]
#[cold]
#[track_caller]
pub(crate) fn gpu_only(what: &str) -> ! {
    panic!("`{what}` exists only on the GPU (called on the host)")
}
