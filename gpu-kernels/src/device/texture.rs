//! Texture fetches through texture objects (`cuTexObjectCreate` on the host, passed as a `u64`).
//! Coordinates are in texels, unnormalised: with linear filtering the texel centre of element i is
//! at i + 0.5, as in CUDA.

use core::arch::asm;

/// `tex1D<float>(tex, x)`.
#[inline(always)]
pub unsafe fn tex1d(tex: u64, x: f32) -> f32 {
    let (a, _b, _c, _d): (f32, f32, f32, f32);
    unsafe {
        asm!("tex.1d.v4.f32.f32 {{{a}, {b}, {c}, {d}}}, [{t}, {{{x}}}];",
             a = out(reg32) a, b = out(reg32) _b, c = out(reg32) _c, d = out(reg32) _d,
             t = in(reg64) tex, x = in(reg32) x, options(readonly, nostack))
    };
    a
}
/// `tex2D<float>(tex, x, y)`.
#[inline(always)]
pub unsafe fn tex2d(tex: u64, x: f32, y: f32) -> f32 {
    let (a, _b, _c, _d): (f32, f32, f32, f32);
    unsafe {
        asm!("tex.2d.v4.f32.f32 {{{a}, {b}, {c}, {d}}}, [{t}, {{{x}, {y}}}];",
             a = out(reg32) a, b = out(reg32) _b, c = out(reg32) _c, d = out(reg32) _d,
             t = in(reg64) tex, x = in(reg32) x, y = in(reg32) y, options(readonly, nostack))
    };
    a
}
/// `tex2D<float2>(tex, x, y)`.
#[inline(always)]
pub unsafe fn tex2d_f2(tex: u64, x: f32, y: f32) -> (f32, f32) {
    let (a, b, _c, _d): (f32, f32, f32, f32);
    unsafe {
        asm!("tex.2d.v4.f32.f32 {{{a}, {b}, {c}, {d}}}, [{t}, {{{x}, {y}}}];",
             a = out(reg32) a, b = out(reg32) b, c = out(reg32) _c, d = out(reg32) _d,
             t = in(reg64) tex, x = in(reg32) x, y = in(reg32) y, options(readonly, nostack))
    };
    (a, b)
}
/// `tex3D<float>(tex, x, y, z)`.
#[inline(always)]
pub unsafe fn tex3d(tex: u64, x: f32, y: f32, z: f32) -> f32 {
    let (a, _b, _c, _d): (f32, f32, f32, f32);
    unsafe {
        asm!("tex.3d.v4.f32.f32 {{{a}, {b}, {c}, {d}}}, [{t}, {{{x}, {y}, {z}, {z}}}];",
             a = out(reg32) a, b = out(reg32) _b, c = out(reg32) _c, d = out(reg32) _d,
             t = in(reg64) tex, x = in(reg32) x, y = in(reg32) y, z = in(reg32) z, options(readonly, nostack))
    };
    a
}
/// `tex3D<float2>(tex, x, y, z)`.
#[inline(always)]
pub unsafe fn tex3d_f2(tex: u64, x: f32, y: f32, z: f32) -> (f32, f32) {
    let (a, b, _c, _d): (f32, f32, f32, f32);
    unsafe {
        asm!("tex.3d.v4.f32.f32 {{{a}, {b}, {c}, {d}}}, [{t}, {{{x}, {y}, {z}, {z}}}];",
             a = out(reg32) a, b = out(reg32) b, c = out(reg32) _c, d = out(reg32) _d,
             t = in(reg64) tex, x = in(reg32) x, y = in(reg32) y, z = in(reg32) z, options(readonly, nostack))
    };
    (a, b)
}
