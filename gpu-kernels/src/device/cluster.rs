//! Thread-block clusters and distributed shared memory (sm_90, PTX ISA 7.8; the mbarrier functions 8.6).
//!
//! The kernel crate is compiled once, for the main module's target (`sm_70` by default); rustc's
//! NVPTX backend pastes `asm!` text into the PTX unchecked, so these instructions compile there and
//! build.rs moves every entry point that uses them (named `sm90_*`) into a module of its own with
//! `.version 8.6` / `.target sm_90` (`runtime::PTX_SM90`), loaded only on compute capability 9.0+.
//! Kernels that use these functions must be named `sm90_*` and must call no function (everything is
//! inlined) so that they can live alone in that module. On the host there are no clusters: these
//! functions panic there.

#[cfg(not(target_arch = "nvptx64"))]
use super::gpu_only;
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// This CTA's rank in its cluster (`%cluster_ctarank`).
#[inline(always)]
pub fn cluster_ctarank() -> u32 {
    device_or_host! {
        device: {
            let r: u32;
            // SAFETY: reads a special register; no memory is touched.
            unsafe { asm!("mov.u32 {r}, %cluster_ctarank;", r = out(reg32) r, options(pure, nomem, nostack)) };
            r
        }
        host: { gpu_only("cluster_ctarank") }
    }
}

/// CTAs in this cluster (`%cluster_nctarank`).
#[inline(always)]
pub fn cluster_nctarank() -> u32 {
    device_or_host! {
        device: {
            let r: u32;
            // SAFETY: reads a special register; no memory is touched.
            unsafe { asm!("mov.u32 {r}, %cluster_nctarank;", r = out(reg32) r, options(pure, nomem, nostack)) };
            r
        }
        host: { gpu_only("cluster_nctarank") }
    }
}

/// The generic address of the variable at `p` (a pointer into this CTA's shared memory) in the
/// shared memory of CTA `rank` of the cluster (`mapa.u64`): ordinary (generic) loads through it
/// read the other CTA's shared memory. Shared memory is laid out alike in every CTA of a kernel,
/// so mapping the base of a region once and adding offsets reaches any element of it.
#[inline(always)]
pub fn map_shared_rank<T>(p: *const T, rank: u32) -> *const T {
    device_or_host! {
        device: {
            let r: u64;
            // SAFETY: address arithmetic on registers; no memory is touched.
            unsafe {
                asm!("mapa.u64 {r}, {p}, {k};", r = out(reg64) r, p = in(reg64) p as u64, k = in(reg32) rank,
                     options(pure, nomem, nostack))
            };
            r as *const T
        }
        host: { let _ = (p, rank); gpu_only("map_shared_rank") }
    }
}

/// A 16-byte load from a shared::cluster address given as a generic pointer returned by
/// [`map_shared_rank`] (`ld.v4.f32` through the generic window). Not reordered across
/// [`cluster_sync`] (memory clobber there).
///
/// # Safety
/// `p` comes from [`map_shared_rank`], is 16-byte aligned and inside the shared memory the
/// kernel uses, and the CTA it maps to has not exited (a [`cluster_sync`] after the last remote read).
#[inline(always)]
pub unsafe fn ld_dsmem_f32x4(p: *const f32) -> [f32; 4] {
    device_or_host! {
        device: {
            let (a, b, c, d): (f32, f32, f32, f32);
            // SAFETY: the caller's contract (a mapped, aligned address whose CTA is still running).
            unsafe {
                asm!("ld.v4.f32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, c = out(reg32) c,
                     d = out(reg32) d, p = in(reg64) p, options(readonly, nostack))
            };
            [a, b, c, d]
        }
        host: { let _ = p; gpu_only("ld_dsmem_f32x4") }
    }
}

/// A 4-byte load through a pointer from [`map_shared_rank`].
///
/// # Safety
/// As [`ld_dsmem_f32x4`], 4-byte aligned.
#[inline(always)]
pub unsafe fn ld_dsmem_u32(p: *const u32) -> u32 {
    device_or_host! {
        device: {
            let r: u32;
            // SAFETY: the caller's contract (a mapped, aligned address whose CTA is still running).
            unsafe { asm!("ld.u32 {r}, [{p}];", r = out(reg32) r, p = in(reg64) p, options(readonly, nostack)) };
            r
        }
        host: { let _ = p; gpu_only("ld_dsmem_u32") }
    }
}

/// Cluster-wide barrier (`barrier.cluster.arrive` (release) + `barrier.cluster.wait` (acquire);
/// every non-exited thread of every CTA of the cluster must reach it). Not the `.aligned` form: that
/// one requires the whole warp to execute the same instruction, and LLVM does not know an `asm!` is
/// convergent (it could duplicate it into divergent paths). After it,
/// the shared-memory writes of every CTA before it are visible to all of them, and no CTA still
/// reads what another overwrites after it. Also the rule for DSMEM lifetimes: one before the first
/// remote access (every CTA of the cluster has started) and one after the last (none exits while
/// another still reads its shared memory).
#[inline(always)]
pub fn cluster_sync() {
    device_or_host! {
        device: {
            // SAFETY: a barrier; it orders memory but reads or writes none itself.
            unsafe { asm!("barrier.cluster.arrive;", "barrier.cluster.wait;", options(nostack)) };
        }
        host: { gpu_only("cluster_sync") }
    }
}

// ---- mbarriers for point-to-point synchronisation between neighbouring CTAs (PTX ISA 8.6) ----
//
// `cluster_sync` orders all memory at cluster scope: it compiles to MEMBAR.ALL.GPU before the
// arrive and CCTL.IVALL (the whole L1 invalidated) after the wait, and waits for every CTA of the
// cluster. A stencil only needs its neighbours' shared memory: an mbarrier per neighbour, a relaxed
// remote arrive behind `fence_release_shared_cta_cluster` (MEMBAR.ALL.CTA), and a relaxed wait
// followed by `fence_acquire_shared_cluster` (no instruction) order exactly that, and leave L1 alone.

/// The 32-bit shared-window address of a pointer into this CTA's shared memory (the mbarrier
/// operands; [`super::shared_addr_u32`] truncates in PTX instead, a different instruction sequence
/// that the kernels using it were tuned with).
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
fn shared_addr<T>(p: *const T) -> u32 {
    let r: u64;
    // SAFETY: address arithmetic on registers; no memory is touched.
    unsafe { asm!("cvta.to.shared.u64 {r}, {p};", r = out(reg64) r, p = in(reg64) p as u64, options(pure, nomem, nostack)) };
    r as u32
}

/// Initialises the mbarrier at `bar` (8-byte aligned, this CTA's shared memory) to expect `count`
/// arrivals per phase. Make it visible with [`fence_mbarrier_init_cluster`] and a [`cluster_sync`]
/// before any other CTA arrives on it.
///
/// # Safety
/// `bar` points into this CTA's shared memory, 8-byte aligned, and no other thread uses that
/// mbarrier until the initialisation is made visible.
#[inline(always)]
pub unsafe fn mbarrier_init(bar: *mut u64, count: u32) {
    device_or_host! {
        device: {
            // SAFETY: the caller's contract (an aligned mbarrier slot in this CTA's shared memory).
            unsafe { asm!("mbarrier.init.shared::cta.b64 [{a}], {c};", a = in(reg32) shared_addr(bar), c = in(reg32) count, options(nostack)) };
        }
        host: { let _ = (bar, count); gpu_only("mbarrier_init") }
    }
}

/// Releases mbarrier initialisations to the cluster (`fence.mbarrier_init.release.cluster`).
#[inline(always)]
pub fn fence_mbarrier_init_cluster() {
    device_or_host! {
        device: {
            // SAFETY: a fence; it orders memory but reads or writes none itself.
            unsafe { asm!("fence.mbarrier_init.release.cluster;", options(nostack)) };
        }
        host: { gpu_only("fence_mbarrier_init_cluster") }
    }
}

/// Orders this CTA's earlier shared-memory (shared::cta) writes, its own and, after a
/// `sync_threads`, its other threads', before later relaxed cluster-scope operations
/// (`fence.release.sync_restrict::shared::cta.cluster`).
#[inline(always)]
pub fn fence_release_shared_cta_cluster() {
    device_or_host! {
        device: {
            // SAFETY: a fence; it orders memory but reads or writes none itself.
            unsafe { asm!("fence.release.sync_restrict::shared::cta.cluster;", options(nostack)) };
        }
        host: { gpu_only("fence_release_shared_cta_cluster") }
    }
}

/// Orders later shared::cluster (DSMEM) reads after an earlier relaxed wait
/// (`fence.acquire.sync_restrict::shared::cluster.cluster`).
#[inline(always)]
pub fn fence_acquire_shared_cluster() {
    device_or_host! {
        device: {
            // SAFETY: a fence; it orders memory but reads or writes none itself.
            unsafe { asm!("fence.acquire.sync_restrict::shared::cluster.cluster;", options(nostack)) };
        }
        host: { gpu_only("fence_acquire_shared_cluster") }
    }
}

/// Arrives once (relaxed, cluster scope) on the mbarrier at `bar` (an address in this CTA's layout)
/// in CTA `rank` of the cluster.
///
/// # Safety
/// `bar` is an mbarrier initialised with [`mbarrier_init`] in every CTA of the cluster (the same
/// layout), and CTA `rank` exists and has not exited.
#[inline(always)]
pub unsafe fn mbarrier_arrive_remote(bar: *const u64, rank: u32) {
    device_or_host! {
        device: {
            // SAFETY: the caller's contract (an initialised mbarrier at the same offset in every CTA).
            unsafe {
                asm!("{{ .reg .b32 ra; mapa.shared::cluster.u32 ra, {a}, {k}; mbarrier.arrive.relaxed.cluster.shared::cluster.b64 _, [ra]; }}",
                     a = in(reg32) shared_addr(bar), k = in(reg32) rank, options(nostack))
            };
        }
        host: { let _ = (bar, rank); gpu_only("mbarrier_arrive_remote") }
    }
}

/// Whether the phase of parity `parity` (0 or 1) of this CTA's mbarrier at `bar` has completed
/// (relaxed, cluster scope; may suspend the thread a while before answering no).
///
/// # Safety
/// `bar` is an mbarrier of this CTA initialised with [`mbarrier_init`].
#[inline(always)]
pub unsafe fn mbarrier_try_wait_parity(bar: *const u64, parity: u32) -> bool {
    device_or_host! {
        device: {
            let r: u32;
            // SAFETY: the caller's contract (an initialised mbarrier in this CTA's shared memory).
            unsafe {
                asm!("{{ .reg .pred p; mbarrier.try_wait.parity.relaxed.cluster.shared::cta.b64 p, [{a}], {q}; selp.u32 {r}, 1, 0, p; }}",
                     r = out(reg32) r, a = in(reg32) shared_addr(bar), q = in(reg32) parity, options(nostack))
            };
            r != 0
        }
        host: { let _ = (bar, parity); gpu_only("mbarrier_try_wait_parity") }
    }
}
