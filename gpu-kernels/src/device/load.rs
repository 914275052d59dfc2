//! Loads and stores that name their memory path: read-only global loads through the non-coherent
//! (L1/texture) path (`ld.global.nc`, `__ldg`), an L2 prefetch, and shared-memory accesses by
//! 32-bit shared-window address (one register per address instead of a 64-bit generic pointer).
//! On the host the global loads are plain reads; the shared-window ones panic.

#[cfg(not(target_arch = "nvptx64"))]
use super::gpu_only;
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// Read-only cached load (`ld.global.nc`, i.e. `__ldg`).
///
/// # Safety
/// `p` is valid for reads and aligned, in global memory, and nothing writes it during the kernel
/// (the non-coherent path may serve a stale copy otherwise).
#[inline(always)]
pub unsafe fn ldg_f32(p: *const f32) -> f32 {
    device_or_host! {
        device: {
            let r: f32;
            // SAFETY: the caller's contract (valid, aligned, read-only global memory).
            unsafe { asm!("ld.global.nc.f32 {r}, [{p}];", r = out(reg32) r, p = in(reg64) p, options(readonly, nostack)) };
            r
        }
        // SAFETY: the caller's contract.
        host: { unsafe { *p } }
    }
}

/// Read-only 4-byte integer load (`ld.global.nc.u32`); may be merged with or moved past others (`pure`).
///
/// # Safety
/// As [`ldg_f32`].
#[inline(always)]
pub unsafe fn ldg_u32(p: *const u32) -> u32 {
    device_or_host! {
        device: {
            let r: u32;
            // SAFETY: the caller's contract (valid, aligned, read-only global memory).
            unsafe { asm!("ld.global.nc.u32 {r}, [{p}];", r = out(reg32) r, p = in(reg64) p, options(readonly, nostack, pure)) };
            r
        }
        // SAFETY: the caller's contract.
        host: { unsafe { *p } }
    }
}

/// Read-only 8-byte load (`ld.global.nc.v2.f32`; `pure`, so the optimiser may move it).
///
/// # Safety
/// As [`ldg_f32`], for two values, and `p` 8-byte aligned.
#[inline(always)]
pub unsafe fn ldg_f32x2(p: *const f32) -> [f32; 2] {
    device_or_host! {
        device: {
            let (a, b): (f32, f32);
            // SAFETY: the caller's contract (valid, 8-byte aligned, read-only global memory).
            unsafe {
                asm!("ld.global.nc.v2.f32 {{{a}, {b}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, p = in(reg64) p,
                     options(readonly, nostack, pure))
            };
            [a, b]
        }
        // SAFETY: the caller's contract.
        host: { unsafe { [*p, *p.add(1)] } }
    }
}

/// [`ldg_f32x2`] that stays where it is written (not `pure`): a load issued early to hide its
/// latency (staging the next trace into shared memory) is not sunk next to its use.
///
/// # Safety
/// As [`ldg_f32x2`].
#[inline(always)]
pub unsafe fn ldg_f32x2_ordered(p: *const f32) -> (f32, f32) {
    device_or_host! {
        device: {
            let (a, b): (f32, f32);
            // SAFETY: the caller's contract (valid, 8-byte aligned, read-only global memory).
            unsafe {
                asm!("ld.global.nc.v2.f32 {{{a}, {b}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, p = in(reg64) p,
                     options(readonly, nostack))
            };
            (a, b)
        }
        // SAFETY: the caller's contract.
        host: { unsafe { (*p, *p.add(1)) } }
    }
}

/// Read-only 16-byte load (`ld.global.nc.v4.f32`, `pure`).
///
/// # Safety
/// As [`ldg_f32`], for four values, and `p` 16-byte aligned.
#[inline(always)]
pub unsafe fn ldg_f32x4(p: *const f32) -> [f32; 4] {
    device_or_host! {
        device: {
            let (a, b, c, d): (f32, f32, f32, f32);
            // SAFETY: the caller's contract (valid, 16-byte aligned, read-only global memory).
            unsafe {
                asm!("ld.global.nc.v4.f32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b,
                     c = out(reg32) c, d = out(reg32) d, p = in(reg64) p, options(readonly, nostack, pure))
            };
            [a, b, c, d]
        }
        // SAFETY: the caller's contract.
        host: { unsafe { [*p, *p.add(1), *p.add(2), *p.add(3)] } }
    }
}

/// A hint to bring the 128-byte line at `p` (global memory) into L2 (`prefetch.global.L2`): no
/// register waits for it, and a wrong guess costs only bandwidth (a bad address does not fault).
#[inline(always)]
pub fn prefetch_l2(p: *const f32) {
    device_or_host! {
        // SAFETY: a prefetch reads nothing into a register and does not fault on any address.
        device: { unsafe { asm!("prefetch.global.L2 [{p}];", p = in(reg64) p, options(nostack, readonly, preserves_flags)) } }
        host: { let _ = p; }
    }
}

// ---- shared memory by 32-bit shared-window address --------------------------------------------

/// The shared-window address (32-bit offset) of a generic pointer into this block's shared memory,
/// for the `lds_*`/`sts_*` functions.
#[inline(always)]
pub fn shared_addr_u32<T>(p: *const T) -> u32 {
    device_or_host! {
        device: {
            let r: u32;
            // SAFETY: address arithmetic on registers; no memory is touched.
            unsafe {
                asm!("{{ .reg .u64 t; cvta.to.shared.u64 t, {p}; cvt.u32.u64 {r}, t; }}", r = out(reg32) r, p = in(reg64) p,
                     options(pure, nomem, nostack))
            };
            r
        }
        host: { let _ = p; gpu_only("shared_addr_u32") }
    }
}

/// Two `f32` loaded from a shared-window address (`ld.shared.v2.f32`, `pure`).
///
/// # Safety
/// `addr` is a shared-window address ([`shared_addr_u32`]) of this block's shared memory, 8-byte
/// aligned, inside the launch's dynamic region, and no other thread writes it between the
/// barriers around this load.
#[inline(always)]
pub unsafe fn lds_f32x2(addr: u32) -> (f32, f32) {
    device_or_host! {
        device: {
            let (a, d): (f32, f32);
            // SAFETY: the caller's contract.
            unsafe {
                asm!("ld.shared.v2.f32 {{{a}, {d}}}, [{p}];", a = out(reg32) a, d = out(reg32) d, p = in(reg32) addr,
                     options(readonly, nostack, pure))
            };
            (a, d)
        }
        host: { let _ = addr; gpu_only("lds_f32x2") }
    }
}

/// One `u32` loaded from a shared-window address (`ld.shared.u32`).
///
/// # Safety
/// As [`lds_f32x2`], 4-byte aligned.
#[inline(always)]
pub unsafe fn lds_u32(addr: u32) -> u32 {
    device_or_host! {
        device: {
            let r: u32;
            // SAFETY: the caller's contract.
            unsafe { asm!("ld.shared.u32 {r}, [{p}];", r = out(reg32) r, p = in(reg32) addr, options(readonly, nostack)) };
            r
        }
        host: { let _ = addr; gpu_only("lds_u32") }
    }
}

/// Four `u32` loaded from a shared-window address (`ld.shared.v4.u32`).
///
/// # Safety
/// As [`lds_f32x2`], 16-byte aligned.
#[inline(always)]
pub unsafe fn lds_u32x4(addr: u32) -> [u32; 4] {
    device_or_host! {
        device: {
            let (a, b, c, d): (u32, u32, u32, u32);
            // SAFETY: the caller's contract.
            unsafe {
                asm!("ld.shared.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b, c = out(reg32) c,
                     d = out(reg32) d, p = in(reg32) addr, options(readonly, nostack))
            };
            [a, b, c, d]
        }
        host: { let _ = addr; gpu_only("lds_u32x4") }
    }
}

/// Two `f32` stored at a shared-window address (`st.shared.v2.f32`).
///
/// # Safety
/// `addr` is a shared-window address of this block's shared memory, 8-byte aligned, inside the
/// launch's dynamic region, and no other thread reads or writes it between the barriers around
/// this store.
#[inline(always)]
pub unsafe fn sts_f32x2(addr: u32, v: (f32, f32)) {
    device_or_host! {
        // SAFETY: the caller's contract.
        device: { unsafe { asm!("st.shared.v2.f32 [{p}], {{{a}, {d}}};", p = in(reg32) addr, a = in(reg32) v.0, d = in(reg32) v.1, options(nostack)) } }
        host: { let _ = (addr, v); gpu_only("sts_f32x2") }
    }
}

/// One `u32` stored at a shared-window address (`st.shared.u32`).
///
/// # Safety
/// As [`sts_f32x2`], 4-byte aligned.
#[inline(always)]
pub unsafe fn sts_u32(addr: u32, v: u32) {
    device_or_host! {
        // SAFETY: the caller's contract.
        device: { unsafe { asm!("st.shared.u32 [{p}], {v};", p = in(reg32) addr, v = in(reg32) v, options(nostack)) } }
        host: { let _ = (addr, v); gpu_only("sts_u32") }
    }
}

/// Four `u32` stored at a shared-window address (`st.shared.v4.u32`).
///
/// # Safety
/// As [`sts_f32x2`], 16-byte aligned.
#[inline(always)]
pub unsafe fn sts_u32x4(addr: u32, v: [u32; 4]) {
    device_or_host! {
        // SAFETY: the caller's contract.
        device: {
            unsafe {
                asm!("st.shared.v4.u32 [{p}], {{{a}, {b}, {c}, {d}}};", p = in(reg32) addr, a = in(reg32) v[0], b = in(reg32) v[1],
                     c = in(reg32) v[2], d = in(reg32) v[3], options(nostack))
            }
        }
        host: { let _ = (addr, v); gpu_only("sts_u32x4") }
    }
}
