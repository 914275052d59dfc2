//! Thread-block clusters and distributed shared memory (sm_90, PTX ISA 7.8).
//!
//! The kernel crate is compiled once, for the main module's target (`sm_70` by default); rustc's
//! NVPTX backend pastes `asm!` text into the PTX unchecked, so these instructions compile there and
//! build.rs moves every entry point that uses them (named `sm90_*`) into a module of its own with
//! `.version 7.8` / `.target sm_90` (`runtime::PTX_SM90`), loaded only on compute capability 9.0+.
//! Kernels that use these helpers must be named `sm90_*` and must call no function (everything is
//! inlined) so that they can live alone in that module.

use core::arch::asm;

/// This CTA's rank in its cluster (`%cluster_ctarank`).
#[inline(always)]
pub fn cluster_ctarank() -> u32 {
    let r: u32;
    unsafe { asm!("mov.u32 {r}, %cluster_ctarank;", r = out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// CTAs in this cluster (`%cluster_nctarank`).
#[inline(always)]
pub fn cluster_nctarank() -> u32 {
    let r: u32;
    unsafe { asm!("mov.u32 {r}, %cluster_nctarank;", r = out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// The generic address of the variable at `p` (a pointer into this CTA's shared memory) in the
/// shared memory of CTA `rank` of the cluster (`mapa.u64`): ordinary (generic) loads through it
/// read the other CTA's shared memory. Shared memory is laid out alike in every CTA of a kernel,
/// so mapping the base of a region once and adding offsets reaches any element of it.
#[inline(always)]
pub fn map_shared_rank<T>(p: *const T, rank: u32) -> *const T {
    let r: u64;
    unsafe {
        asm!("mapa.u64 {r}, {p}, {k};", r = out(reg64) r, p = in(reg64) p as u64, k = in(reg32) rank,
             options(pure, nomem, nostack))
    };
    r as *const T
}

/// A 16-byte load from a shared::cluster address given as a generic pointer returned by
/// [`map_shared_rank`] (`ld.v4.f32` through the generic window). Not reordered across
/// [`cluster_sync`] (memory clobber there).
#[inline(always)]
pub unsafe fn ld_dsmem_f32x4(p: *const f32) -> [f32; 4] {
    let (a, b, c, d): (f32, f32, f32, f32);
    unsafe {
        asm!("ld.v4.f32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, c = out(reg32) c,
             d = out(reg32) d, p = in(reg64) p, options(readonly, nostack))
    };
    [a, b, c, d]
}

/// A 4-byte load through a pointer from [`map_shared_rank`].
#[inline(always)]
pub unsafe fn ld_dsmem_u32(p: *const u32) -> u32 {
    let r: u32;
    unsafe { asm!("ld.u32 {r}, [{p}];", r = out(reg32) r, p = in(reg64) p, options(readonly, nostack)) };
    r
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
    unsafe { asm!("barrier.cluster.arrive;", "barrier.cluster.wait;", options(nostack)) };
}
