//! Texture fetches through texture objects (`cuTexObjectCreate` on the host, passed as a `u64`).
//! Coordinates are in texels, unnormalised: with linear filtering the texel centre of element i is
//! at i + 0.5, as in CUDA. On the host there are no textures: these functions panic there.
//!
//! # Safety (every function)
//! `tex` is a live texture object of the current context whose format matches the fetch (float
//! channels; two of them for the `_f2` forms). A fetch outside the texture reads its border or
//! clamped value, never other memory.

#[cfg(not(target_arch = "nvptx64"))]
use super::gpu_only;
#[cfg(target_arch = "nvptx64")]
use core::arch::asm;

/// `tex1D<float>(tex, x)`.
///
/// # Safety
/// See the module docs.
#[inline(always)]
pub unsafe fn tex1d(tex: u64, x: f32) -> f32 {
    device_or_host! {
        device: {
            let (a, _b, _c, _d): (f32, f32, f32, f32);
            // SAFETY: the module contract (a live texture object of a matching format).
            unsafe {
                asm!("tex.1d.v4.f32.f32 {{{a}, {b}, {c}, {d}}}, [{t}, {{{x}}}];",
                     a = out(reg32) a, b = out(reg32) _b, c = out(reg32) _c, d = out(reg32) _d,
                     t = in(reg64) tex, x = in(reg32) x, options(readonly, nostack))
            };
            a
        }
        host: { let _ = (tex, x); gpu_only("tex1d") }
    }
}

/// `tex2D<float>(tex, x, y)`.
///
/// # Safety
/// See the module docs.
#[inline(always)]
pub unsafe fn tex2d(tex: u64, x: f32, y: f32) -> f32 {
    device_or_host! {
        device: {
            let (a, _b, _c, _d): (f32, f32, f32, f32);
            // SAFETY: the module contract (a live texture object of a matching format).
            unsafe {
                asm!("tex.2d.v4.f32.f32 {{{a}, {b}, {c}, {d}}}, [{t}, {{{x}, {y}}}];",
                     a = out(reg32) a, b = out(reg32) _b, c = out(reg32) _c, d = out(reg32) _d,
                     t = in(reg64) tex, x = in(reg32) x, y = in(reg32) y, options(readonly, nostack))
            };
            a
        }
        host: { let _ = (tex, x, y); gpu_only("tex2d") }
    }
}

/// `tex2D<float2>(tex, x, y)`.
///
/// # Safety
/// See the module docs.
#[inline(always)]
pub unsafe fn tex2d_f2(tex: u64, x: f32, y: f32) -> (f32, f32) {
    device_or_host! {
        device: {
            let (a, b, _c, _d): (f32, f32, f32, f32);
            // SAFETY: the module contract (a live texture object of a matching format).
            unsafe {
                asm!("tex.2d.v4.f32.f32 {{{a}, {b}, {c}, {d}}}, [{t}, {{{x}, {y}}}];",
                     a = out(reg32) a, b = out(reg32) b, c = out(reg32) _c, d = out(reg32) _d,
                     t = in(reg64) tex, x = in(reg32) x, y = in(reg32) y, options(readonly, nostack))
            };
            (a, b)
        }
        host: { let _ = (tex, x, y); gpu_only("tex2d_f2") }
    }
}

/// `tex3D<float>(tex, x, y, z)`.
///
/// # Safety
/// See the module docs.
#[inline(always)]
pub unsafe fn tex3d(tex: u64, x: f32, y: f32, z: f32) -> f32 {
    device_or_host! {
        device: {
            let (a, _b, _c, _d): (f32, f32, f32, f32);
            // SAFETY: the module contract (a live texture object of a matching format).
            unsafe {
                asm!("tex.3d.v4.f32.f32 {{{a}, {b}, {c}, {d}}}, [{t}, {{{x}, {y}, {z}, {z}}}];",
                     a = out(reg32) a, b = out(reg32) _b, c = out(reg32) _c, d = out(reg32) _d,
                     t = in(reg64) tex, x = in(reg32) x, y = in(reg32) y, z = in(reg32) z, options(readonly, nostack))
            };
            a
        }
        host: { let _ = (tex, x, y, z); gpu_only("tex3d") }
    }
}

/// `tex3D<float2>(tex, x, y, z)`.
///
/// # Safety
/// See the module docs.
#[inline(always)]
pub unsafe fn tex3d_f2(tex: u64, x: f32, y: f32, z: f32) -> (f32, f32) {
    device_or_host! {
        device: {
            let (a, b, _c, _d): (f32, f32, f32, f32);
            // SAFETY: the module contract (a live texture object of a matching format).
            unsafe {
                asm!("tex.3d.v4.f32.f32 {{{a}, {b}, {c}, {d}}}, [{t}, {{{x}, {y}, {z}, {z}}}];",
                     a = out(reg32) a, b = out(reg32) b, c = out(reg32) _c, d = out(reg32) _d,
                     t = in(reg64) tex, x = in(reg32) x, y = in(reg32) y, z = in(reg32) z, options(readonly, nostack))
            };
            (a, b)
        }
        host: { let _ = (tex, x, y, z); gpu_only("tex3d_f2") }
    }
}

/// The first two channels of a 2D float texture at integer texel (x, y), no filtering
/// (`tex.2d.v4.f32.s32`, `pure`): a table read through the texture cache.
///
/// # Safety
/// See the module docs.
#[inline(always)]
pub unsafe fn tex2d_texel_f2(tex: u64, x: i32, y: u32) -> (f32, f32) {
    device_or_host! {
        device: {
            let (a, d, _c, _w): (f32, f32, f32, f32);
            // SAFETY: the module contract (a live texture object of a matching format).
            unsafe {
                asm!("tex.2d.v4.f32.s32 {{{a}, {d}, {c}, {w}}}, [{t}, {{{x}, {y}}}];", a = out(reg32) a, d = out(reg32) d,
                     c = out(reg32) _c, w = out(reg32) _w, t = in(reg64) tex, x = in(reg32) x, y = in(reg32) y,
                     options(readonly, nostack, pure));
            }
            (a, d)
        }
        host: { let _ = (tex, x, y); gpu_only("tex2d_texel_f2") }
    }
}
