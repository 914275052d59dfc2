//! srm kernels: the paper's one-step-per-launch Chebyshev kernel and its pair-table form (`paperq`),
//! and the small kernels of the shot pipeline (trace packing, injection, imaging).
//!
//! Wavefield buffers hold 2 waves x `stride` planes of nx * ny complex values, interleaved (re, im);
//! wave 0 is the conjugated source wavefield S', wave 1 the receiver wavefield R; wave w, plane p
//! starts at complex index (w * stride + p) * nx * ny. Outside the grid every T_n is zero (the CPU
//! reference's zero halo).

// On the host only the entry points' descriptors are used: the kernels' helpers compile there
// (the device layer has host bodies) but nothing calls them, and clippy sees them only there.
#![cfg_attr(not(target_arch = "nvptx64"), allow(dead_code, unused_imports, unused_variables, unused_assignments,
    clippy::too_many_arguments, clippy::manual_is_multiple_of))]

use super::*;
use crate::device::*;

#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct F2 {
    re: f32,
    im: f32,
}

/// Two neighbouring complex nodes (x, x + 1): one 16-byte shared-memory access.
#[repr(C, align(16))]
#[derive(Clone, Copy)]
pub(super) struct F4 {
    pub(super) r0: f32,
    pub(super) i0: f32,
    pub(super) r1: f32,
    pub(super) i1: f32,
}

/// L of the column pair `c` (nodes x, x + 1; re and im of each): the x arm from the neighbour
/// pairs `pm2`, `pm1` (left) and `pp1`, `pp2` (right), the y arm from the 9-row window `win` (the
/// pair's own row at `win[4]`). `FMA` picks [`Stencil::apply_fma`] over [`Stencil::apply`] (the
/// CPU's rounding). Used by the cluster kernels (`cluster.rs`).
#[inline(always)]
pub(super) fn pair_laplacian<const FMA: bool>(st: &Stencil, c: F4, pm2: F4, pm1: F4, pp1: F4, pp2: F4, win: &[F4; 9]) -> F4 {
    if FMA {
        pair_terms(c, pm2, pm1, pp1, pp2, win, |c0, xm, xp, ym, yp| st.apply_fma(c0, xm, xp, ym, yp))
    } else {
        pair_terms(c, pm2, pm1, pp1, pp2, win, |c0, xm, xp, ym, yp| st.apply(c0, xm, xp, ym, yp))
    }
}

/// The column pair's stencil terms, node by node and re/im by re/im, handed to `ap` (one of the
/// [`Stencil`] sums): `xm`/`xp` the 4 values left/right, `ym`/`yp` the 4 rows up/down.
#[inline(always)]
pub(super) fn pair_terms(c: F4, pm2: F4, pm1: F4, pp1: F4, pp2: F4, win: &[F4; 9],
    ap: impl Fn(f32, [f32; 4], [f32; 4], [f32; 4], [f32; 4]) -> f32) -> F4 {
    F4 {
        r0: ap(c.r0, [pm1.r1, pm1.r0, pm2.r1, pm2.r0], [c.r1, pp1.r0, pp1.r1, pp2.r0],
            [win[3].r0, win[2].r0, win[1].r0, win[0].r0], [win[5].r0, win[6].r0, win[7].r0, win[8].r0]),
        i0: ap(c.i0, [pm1.i1, pm1.i0, pm2.i1, pm2.i0], [c.i1, pp1.i0, pp1.i1, pp2.i0],
            [win[3].i0, win[2].i0, win[1].i0, win[0].i0], [win[5].i0, win[6].i0, win[7].i0, win[8].i0]),
        r1: ap(c.r1, [c.r0, pm1.r1, pm1.r0, pm2.r1], [pp1.r0, pp1.r1, pp2.r0, pp2.r1],
            [win[3].r1, win[2].r1, win[1].r1, win[0].r1], [win[5].r1, win[6].r1, win[7].r1, win[8].r1]),
        i1: ap(c.i1, [c.i0, pm1.i1, pm1.i0, pm2.i1], [pp1.i0, pp1.i1, pp2.i0, pp2.i1],
            [win[3].i1, win[2].i1, win[1].i1, win[0].i1], [win[5].i1, win[6].i1, win[7].i1, win[8].i1]),
    }
}

const ZERO2: F2 = F2 { re: 0.0, im: 0.0 };

#[inline(always)]
unsafe fn ld2(p: *const f32, i: usize) -> F2 { unsafe { *(p.add(2 * i) as *const F2) } }
#[inline(always)]
unsafe fn st2(p: *mut f32, i: usize, v: F2) { unsafe { *(p.add(2 * i) as *mut F2) = v } }

// ------------------------------------------------------------------------------------------------
// The paper's kernel (Listing 38-4): one Chebyshev step of both waves per launch.
// ------------------------------------------------------------------------------------------------

crate::kernel! {
/// One Chebyshev step n (1..=degree) for `count` planes of both waves (grid z = count):
/// T_n = 2 L T_{n-1} - T_{n-2} (T_1 = L T_0) read from `tin` (T_{n-1}) and `tio` (T_{n-2}),
/// written over `tio`; acc += a_n T_n (acc = a_0 T_0 + a_1 T_1 at n = 1). At n = degree the step
/// writes W = taper * acc into `tio` instead of T_n.
pub unsafe fn srm_step_paper(st: Stencil, nx: u32, ny: u32, stride: u32, n: u32, degree: u32,
    tin: *const f32, tio: *mut f32, acc: *mut f32, slow: *const f32, table: *const f32, ncoef: u32, rows: u32,
    maps: *const RowMap, taper_x: *const f32, taper_y: *const f32) as SRM_STEP_PAPER {
    let sm = dynamic_shared::<f32>();
    let (tx, ty) = (thread_idx_x(), thread_idx_y());
    let plane = block_idx_z();
    let nxy = (nx * ny) as usize;
    let base = [(plane as usize) * nxy, ((stride + plane) as usize) * nxy];
    let plane_sm = PAPER_RW * PAPER_RH;
    // Load phase: each thread reads 4 nodes of a column, for both waves.
    let gx = (block_idx_x() * PAPER_TW + tx) as i32 - 4;
    let gy0 = (block_idx_y() * PAPER_TH + ty * 4) as i32 - 4;
    for i in 0..4u32 {
        let gy = gy0 + i as i32;
        let inside = gx >= 0 && gy >= 0 && (gx as u32) < nx && (gy as u32) < ny;
        let k = ((ty * 4 + i) as usize) * PAPER_RW + tx as usize;
        for w in 0..2 {
            let v = if inside { unsafe { ld2(tin, base[w] + gy as usize * nx as usize + gx as usize) } } else { ZERO2 };
            unsafe {
                *sm.add((2 * w) * plane_sm + k) = v.re;
                *sm.add((2 * w + 1) * plane_sm + k) = v.im;
            }
        }
    }
    sync_threads();
    if tx >= PAPER_TW {
        return;
    }
    let gthx = block_idx_x() * PAPER_TW + tx;
    if gthx >= nx {
        return;
    }
    let map = unsafe { *maps.add(plane as usize) };
    let first = n == 1;
    let last = n == degree;
    for i in 0..3u32 {
        let gthy = block_idx_y() * PAPER_TH + ty * 3 + i;
        if gthy >= ny {
            break;
        }
        let g = (gthy * nx + gthx) as usize;
        let s = unsafe { ldg_f32(slow.add(g)) };
        let (i0, f) = table_pos(s, map, rows);
        let a = unsafe { coef_at(table, ncoef, i0, f, n) };
        let a0 = if first { unsafe { coef_at(table, ncoef, i0, f, 0) } } else { (0.0, 0.0) };
        let tw = if last { unsafe { *taper_x.add(gthx as usize) * *taper_y.add(gthy as usize) } } else { 1.0 };
        let c = (ty * 3 + i + 4) as usize * PAPER_RW + (tx + 4) as usize;
        for w in 0..2 {
            let lap = |comp: usize| -> f32 {
                let p = unsafe { sm.add((2 * w + comp) * plane_sm) };
                let at = |off: isize| unsafe { *p.offset(c as isize + off) };
                let r = PAPER_RW as isize;
                st.apply(at(0), [at(-1), at(-2), at(-3), at(-4)], [at(1), at(2), at(3), at(4)],
                    [at(-r), at(-2 * r), at(-3 * r), at(-4 * r)], [at(r), at(2 * r), at(3 * r), at(4 * r)])
            };
            let (lr, li) = (lap(0), lap(1));
            let gi = base[w] + g;
            let prev2 = if first { ZERO2 } else { unsafe { ld2(tio, gi) } };
            let t = (cheb_next(first, lr, prev2.re), cheb_next(first, li, prev2.im));
            let mut ac = if first {
                let t0 = unsafe { (*sm.add(2 * w * plane_sm + c), *sm.add((2 * w + 1) * plane_sm + c)) };
                cmadd((0.0, 0.0), a0, t0)
            } else {
                let v = unsafe { ld2(acc, gi) };
                (v.re, v.im)
            };
            ac = cmadd(ac, a, t);
            unsafe {
                if last {
                    st2(tio, gi, F2 { re: ac.0 * tw, im: ac.1 * tw });
                } else {
                    st2(tio, gi, F2 { re: t.0, im: t.1 });
                    st2(acc, gi, F2 { re: ac.0, im: ac.1 });
                }
            }
        }
    }
}
}

/// `v` clamped to [0, n - 1] (n >= 1, validated on the host), without `i32::clamp`'s panic path.
#[inline(always)]
fn clampi(v: i32, n: u32) -> i32 {
    let hi = n as i32 - 1;
    if v < 0 { 0 } else if v > hi { hi } else { v }
}

// ------------------------------------------------------------------------------------------------
// `paperq`: the paper's kernel with each thread's global loads issued before any store and one
// 16-byte pair-table load per lookup.
// ------------------------------------------------------------------------------------------------

crate::kernel! {
/// `srm_step_paper` (same step, same buffers) with each thread's global loads issued before any
/// store and the coefficients read from the pair table (`ptab`, see `gpu_kernels::srm::pair_entry`):
/// one 16-byte load per lookup instead of four scalar loads on four cache lines (the bench's
/// velocity changes at every node, so the rows a warp reads are scattered). The host JIT-compiles it
/// with a register cap (`paperq56`).
pub unsafe fn srm_step_paperq(st: Stencil, nx: u32, ny: u32, stride: u32, n: u32, degree: u32,
    tin: *const f32, tio: *mut f32, acc: *mut f32, slow: *const f32, ptab: *const f32, rows: u32,
    maps: *const RowMap, taper_x: *const f32, taper_y: *const f32) as SRM_STEP_PAPERQ {
    let sm = dynamic_shared::<f32>();
    let (tx, ty) = (thread_idx_x(), thread_idx_y());
    let plane = block_idx_z();
    let nxy = (nx * ny) as usize;
    let base = [(plane as usize) * nxy, ((stride + plane) as usize) * nxy];
    let plane_sm = PAPER_RW * PAPER_RH;
    let prow = pair_rows(rows);
    // Load phase: each thread reads 4 nodes of a column, both waves, all loads before the stores.
    let gx = (block_idx_x() * PAPER_TW + tx) as i32 - 4;
    let gy0 = (block_idx_y() * PAPER_TH + ty * 4) as i32 - 4;
    let mut v = [[0.0f32; 2]; 8];
    for i in 0..4u32 {
        let gy = gy0 + i as i32;
        let inside = gx >= 0 && gy >= 0 && (gx as u32) < nx && (gy as u32) < ny;
        // A clamped (valid) address for outside nodes, then a select: no divergent branch.
        let (cx, cy) = (clampi(gx, nx) as usize, clampi(gy, ny) as usize);
        for w in 0..2 {
            let x = unsafe { ldg_f32x2(tin.add(2 * (base[w] + cy * nx as usize + cx))) };
            v[2 * i as usize + w] = if inside { x } else { [0.0; 2] };
        }
    }
    for i in 0..4usize {
        let k = (ty as usize * 4 + i) * PAPER_RW + tx as usize;
        for w in 0..2 {
            unsafe {
                *sm.add((2 * w) * plane_sm + k) = v[2 * i + w][0];
                *sm.add((2 * w + 1) * plane_sm + k) = v[2 * i + w][1];
            }
        }
    }
    sync_threads();
    if tx >= PAPER_TW {
        return;
    }
    let gthx = block_idx_x() * PAPER_TW + tx;
    if gthx >= nx {
        return;
    }
    let map = unsafe { *maps.add(plane as usize) };
    let first = n == 1;
    let last = n == degree;
    struct Out {
        ok: bool,
        g: usize,
        s: f32,
        prev: [F2; 2],
        acc: [F2; 2],
    }
    let load = |i: u32| -> Out {
        let gthy = block_idx_y() * PAPER_TH + ty * 3 + i;
        let mut o = Out { ok: false, g: 0, s: 0.0, prev: [ZERO2; 2], acc: [ZERO2; 2] };
        if gthy < ny {
            let g = (gthy * nx + gthx) as usize;
            o.ok = true;
            o.g = g;
            o.s = unsafe { ldg_f32(slow.add(g)) };
            if !first {
                unsafe {
                    o.prev = [ld2(tio, base[0] + g), ld2(tio, base[1] + g)];
                    o.acc = [ld2(acc, base[0] + g), ld2(acc, base[1] + g)];
                }
            }
        }
        o
    };
    let (o0, o1, o2) = (load(0), load(1), load(2));
    let coefs = |o: &Out| -> ((f32, f32), (f32, f32)) {
        let (i0, f) = table_pos(o.s, map, rows);
        let a = coef_from_pair(unsafe { ldg_f32x4(ptab.add(4 * (n * prow + i0) as usize)) }, f);
        let a0 = if first { coef_from_pair(unsafe { ldg_f32x4(ptab.add(4 * i0 as usize)) }, f) } else { (0.0, 0.0) };
        (a, a0)
    };
    let (c0, c1, c2) = (coefs(&o0), coefs(&o1), coefs(&o2));
    let out = |i: u32, o: &Out, (a, a0): ((f32, f32), (f32, f32))| {
        if !o.ok {
            return;
        }
        let gthy = block_idx_y() * PAPER_TH + ty * 3 + i;
        let tw = if last { unsafe { *taper_x.add(gthx as usize) * *taper_y.add(gthy as usize) } } else { 1.0 };
        let c = (ty * 3 + i + 4) as usize * PAPER_RW + (tx + 4) as usize;
        let wave = |w: usize| {
            let lap = |comp: usize| -> f32 {
                let p = unsafe { sm.add((2 * w + comp) * plane_sm) };
                let at = |off: isize| unsafe { *p.offset(c as isize + off) };
                let r = PAPER_RW as isize;
                st.apply(at(0), [at(-1), at(-2), at(-3), at(-4)], [at(1), at(2), at(3), at(4)],
                    [at(-r), at(-2 * r), at(-3 * r), at(-4 * r)], [at(r), at(2 * r), at(3 * r), at(4 * r)])
            };
            let (lr, li) = (lap(0), lap(1));
            let g = base[w] + o.g;
            let prev2 = o.prev[w];
            let t = (cheb_next(first, lr, prev2.re), cheb_next(first, li, prev2.im));
            let mut ac = if first {
                let t0 = unsafe { (*sm.add(2 * w * plane_sm + c), *sm.add((2 * w + 1) * plane_sm + c)) };
                cmadd((0.0, 0.0), a0, t0)
            } else {
                (o.acc[w].re, o.acc[w].im)
            };
            ac = cmadd(ac, a, t);
            unsafe {
                if last {
                    st2(tio, g, F2 { re: ac.0 * tw, im: ac.1 * tw });
                } else {
                    st2(tio, g, F2 { re: t.0, im: t.1 });
                    st2(acc, g, F2 { re: ac.0, im: ac.1 });
                }
            }
        };
        wave(0);
        wave(1);
    };
    out(0, &o0, c0);
    out(1, &o1, c1);
    out(2, &o2, c2);
}
}

// ------------------------------------------------------------------------------------------------
// Shot pipeline: traces to complex, injection of the receiver spectra and the source, imaging.
// ------------------------------------------------------------------------------------------------

crate::kernel! {
/// `out[i] = (x[i], 0)` for n values: real traces into cuFFT's interleaved complex input.
pub unsafe fn srm_real_to_complex(n: u32, x: *const f32, out: *mut f32) as SRM_REAL_TO_COMPLEX {
    let i = global_x();
    if i < n {
        unsafe { st2(out, i as usize, F2 { re: *x.add(i as usize), im: 0.0 }) };
    }
}
}

crate::kernel! {
/// Adds each trace's spectrum at bin `bins[p]`, times `delays[p]` (e^{-i w t0}), to its receiver
/// node of plane p of the receiver wave (wave 1). One thread per (trace, plane).
pub unsafe fn srm_inject_receivers(ntr: u32, nfft: u32, count: u32, stride: u32, nxy: u32,
    bins: *const u32, delays: *const f32, spectra: *const f32, nodes: *const u32, waves: *mut f32) as SRM_INJECT_RECEIVERS {
    let i = global_x();
    if i < ntr * count {
        let (t, p) = (i % nonzero(ntr), i / nonzero(ntr));
        unsafe {
            let k = *bins.add(p as usize);
            let d = ld2(spectra, (t * nfft + k) as usize);
            let e = ld2(delays, p as usize);
            let v = (d.re * e.re - d.im * e.im, d.re * e.im + d.im * e.re);
            let o = 2 * (((stride + p) * nxy + *nodes.add(t as usize)) as usize);
            atomic_add_f32(waves.add(o), v.0);
            atomic_add_f32(waves.add(o + 1), v.1);
        }
    }
}
}

crate::kernel! {
/// Sets the source node of each plane of the source wave (wave 0) to `(values[p], 0)`.
pub unsafe fn srm_inject_source(count: u32, nxy: u32, node: u32, values: *const f32, waves: *mut f32) as SRM_INJECT_SOURCE {
    let p = global_x();
    if p < count {
        unsafe { st2(waves, (p * nxy + node) as usize, F2 { re: *values.add(p as usize), im: 0.0 }) };
    }
}
}

crate::kernel! {
/// `image[i] += sum over the count planes of Re(S'_p R_p)[i]` (imaging condition, both waves in
/// `waves` with plane stride `stride`).
pub unsafe fn srm_image(nxy: u32, count: u32, stride: u32, waves: *const f32, image: *mut f32) as SRM_IMAGE {
    let i = global_x();
    if i < nxy {
        let mut s = 0.0f32;
        for p in 0..count {
            let (a, b) = unsafe { (ld2(waves, (p * nxy + i) as usize), ld2(waves, ((stride + p) * nxy + i) as usize)) };
            s += image_term((a.re, a.im), (b.re, b.im));
        }
        unsafe { *image.add(i as usize) += s };
    }
}
}
