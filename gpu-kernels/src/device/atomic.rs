//! Atomics on global or shared memory through generic addresses (`atomicAdd`, `atomicMax`, and the
//! reduction form that returns nothing). On the host: plain read-modify-writes (one thread).

#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

macro_rules! atomic_rmw {
    ($(#[$doc:meta])* $name:ident, $t:ty, $ptx:literal, |$old:ident, $v:ident| $host:expr) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// `addr` points to a live, aligned value in global or shared memory that every other
        /// access reaches only atomically while this runs.
        #[inline(always)]
        pub unsafe fn $name(addr: *mut $t, v: $t) -> $t {
            device_or_host! {
                device: {
                    let old: $t;
                    // SAFETY: the caller guarantees `addr` is valid and aligned (function contract).
                    unsafe {
                        asm!(concat!($ptx, " {o}, [{a}], {v};"), o = out(reg32) old, a = in(reg64) addr, v = in(reg32) v,
                             options(nostack))
                    };
                    old
                }
                host: {
                    // SAFETY: the caller guarantees `addr` is valid; the host runs one thread.
                    let $old = unsafe { *addr };
                    let $v = v;
                    // SAFETY: as above.
                    unsafe { *addr = $host };
                    $old
                }
            }
        }
    };
}

atomic_rmw!(
    /// `atomicAdd(float*, float)`: adds `v` at `addr`, returns the value before.
    atomic_add_f32, f32, "atom.add.f32", |old, v| old + v);
atomic_rmw!(
    /// `atomicAdd(unsigned*, unsigned)` (wrapping).
    atomic_add_u32, u32, "atom.add.u32", |old, v| old.wrapping_add(v));
atomic_rmw!(
    /// `atomicMax(unsigned*, unsigned)`.
    atomic_max_u32, u32, "atom.max.u32", |old, v| old.max(v));

/// Adds `v` at `addr` atomically without returning the old value (`red.add.f32`): the memory
/// system does the add, so the thread does not wait for it (scatter-adds into an image).
///
/// # Safety
/// As [`atomic_add_f32`].
#[inline(always)]
pub unsafe fn red_add_f32(addr: *mut f32, v: f32) {
    device_or_host! {
        // SAFETY: the caller guarantees `addr` is valid and aligned (function contract).
        device: { unsafe { asm!("red.add.f32 [{a}], {v};", a = in(reg64) addr, v = in(reg32) v, options(nostack)) } }
        // SAFETY: as above; the host runs one thread.
        host: { unsafe { *addr += v } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_atomics_return_the_old_value() {
        let (mut f, mut u) = (1.5f32, 7u32);
        // SAFETY: pointers to live locals.
        unsafe {
            assert_eq!(atomic_add_f32(&mut f, 2.0), 1.5);
            red_add_f32(&mut f, 1.0);
            assert_eq!(atomic_add_u32(&mut u, 3), 7);
            assert_eq!(atomic_max_u32(&mut u, 4), 10);
        }
        assert_eq!((f, u), (4.5, 10));
    }
}
