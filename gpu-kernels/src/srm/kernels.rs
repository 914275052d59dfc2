//! srm kernels: the paper's one-step-per-launch Chebyshev kernel, the fused multi-step kernel, and
//! the small kernels of the shot pipeline (trace packing, injection, imaging).
//!
//! Wavefield buffers hold 2 waves x `stride` planes of nx * ny complex values, interleaved (re, im);
//! wave 0 is the conjugated source wavefield S', wave 1 the receiver wavefield R; wave w, plane p
//! starts at complex index (w * stride + p) * nx * ny. Outside the grid every T_n is zero (the CPU
//! reference's zero halo).

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
/// CPU's rounding). Shared by the paper-style fused, `fusedb`/`fusedc` and cluster kernels.
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

/// One Chebyshev step n (1..=degree) for `count` planes of both waves (grid z = count):
/// T_n = 2 L T_{n-1} - T_{n-2} (T_1 = L T_0) read from `tin` (T_{n-1}) and `tio` (T_{n-2}),
/// written over `tio`; acc += a_n T_n (acc = a_0 T_0 + a_1 T_1 at n = 1). At n = degree the step
/// writes W = taper * acc into `tio` instead of T_n.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn srm_step_paper(st: Stencil, nx: u32, ny: u32, stride: u32, n: u32, degree: u32,
    tin: *const f32, tio: *mut f32, acc: *mut f32, slow: *const f32, table: *const f32, ncoef: u32, rows: u32,
    maps: *const RowMap, taper_x: *const f32, taper_y: *const f32) {
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

/// `srm_step_paper` with the global loads of a thread's three outputs issued before any store (same
/// arguments, same results).
///
/// One Chebyshev step n (1..=degree) for `count` planes of both waves (grid z = count):
/// T_n = 2 L T_{n-1} - T_{n-2} (T_1 = L T_0) read from `tin` (T_{n-1}) and `tio` (T_{n-2}),
/// written over `tio`; acc += a_n T_n (acc = a_0 T_0 + a_1 T_1 at n = 1). At n = degree the step
/// writes W = taper * acc into `tio` instead of T_n.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn srm_step_paperh(st: Stencil, nx: u32, ny: u32, stride: u32, n: u32, degree: u32,
    tin: *const f32, tio: *mut f32, acc: *mut f32, slow: *const f32, table: *const f32, ncoef: u32, rows: u32,
    maps: *const RowMap, taper_x: *const f32, taper_y: *const f32) {
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
    // All global loads of the thread's three outputs first, then the arithmetic, then the stores:
    // the compiler cannot move loads above stores through possibly aliasing pointers, so this
    // order keeps the loads in flight together instead of one dependent chain per output. The
    // closures are called with constant arguments, so every array index is static (registers).
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
        let a = unsafe { coef_at(table, ncoef, i0, f, n) };
        let a0 = if first { unsafe { coef_at(table, ncoef, i0, f, 0) } } else { (0.0, 0.0) };
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

// ------------------------------------------------------------------------------------------------
// Fused kernel: K Chebyshev steps per pass over a 64 x 64 tile held in shared memory.
// ------------------------------------------------------------------------------------------------

/// `v` clamped to [0, n - 1] (n >= 1, validated on the host), without `i32::clamp`'s panic path.
#[inline(always)]
fn clampi(v: i32, n: u32) -> i32 {
    let hi = n as i32 - 1;
    if v < 0 { 0 } else if v > hi { hi } else { v }
}

#[inline(always)]
unsafe fn lds4(p: *const F4, row: i32, pair: i32) -> F4 {
    unsafe { *p.add((row * (FUSED_TILE as i32 / 2) + pair) as usize) }
}

/// The body of the fused kernel for K steps (halo 4K). See `srm_step_fused4`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn fused_body<const K: u32>(st: Stencil, nx: u32, ny: u32, stride: u32, count: u32, n0: u32, steps: u32,
    degree: u32, tin_a: *const f32, tin_b: *const f32, tout_a: *mut f32, tout_b: *mut f32, acc: *mut f32,
    slow: *const f32, table: *const f32, ncoef: u32, rows: u32, maps: *const RowMap, taper_x: *const f32,
    taper_y: *const f32) {
    const T: i32 = FUSED_TILE as i32;
    let h = 4 * K as i32; // halo
    let bi = fused_interior(K) as i32; // interior edge
    let mut carver = SharedCarver::new();
    let mut sa = carver.take::<F4>((FUSED_TILE * FUSED_TILE / 2) as usize);
    let mut sb = carver.take::<F4>((FUSED_TILE * FUSED_TILE / 2) as usize);
    let sacc = carver.take::<F2>((bi * bi) as usize);
    let (tx, ty) = (thread_idx_x() as i32, thread_idx_y() as i32);
    let tid = (ty * 32 + tx) as u32;
    let z = block_idx_z();
    let (wave, plane) = (z / count, z % count);
    let nxy = (nx * ny) as usize;
    let base = ((wave * stride + plane) as usize) * nxy;
    let ox = block_idx_x() as i32 * bi - h;
    let oy = block_idx_y() as i32 * bi - h;
    let map = unsafe { *maps.add(plane as usize) };
    let inside = |x: i32, y: i32| x >= 0 && y >= 0 && (x as u32) < nx && (y as u32) < ny;
    let last_pass = n0 + steps - 1 == degree;

    // Load T_{n0-1} (and T_{n0-2}) with the halo; zero outside the grid.
    let (sa2, sb2) = (sa as *mut F2, sb as *mut F2);
    let mut i = tid;
    while i < FUSED_TILE * FUSED_TILE {
        let (ly, lx) = ((i / FUSED_TILE) as i32, (i % FUSED_TILE) as i32);
        let (gx, gy) = (ox + lx, oy + ly);
        let ins = inside(gx, gy);
        let g = base + (gy * nx as i32 + gx) as usize;
        unsafe {
            *sa2.add(i as usize) = if ins { ld2(tin_a, g) } else { ZERO2 };
            if n0 > 1 {
                *sb2.add(i as usize) = if ins { ld2(tin_b, g) } else { ZERO2 };
            }
        }
        i += 256;
    }
    // The interior accumulator.
    if n0 > 1 {
        let mut i = tid;
        while i < (bi * bi) as u32 {
            let (ly, lx) = ((i / bi as u32) as i32, (i % bi as u32) as i32);
            let (gx, gy) = (ox + h + lx, oy + h + ly);
            unsafe { *sacc.add(i as usize) = if inside(gx, gy) { ld2(acc, base + (gy * nx as i32 + gx) as usize) } else { ZERO2 } };
            i += 256;
        }
    }
    sync_threads();

    let x0 = 2 * tx; // first node of this thread's pair
    for j in 1..=steps as i32 {
        let n = n0 + j as u32 - 1;
        let first = n == 1;
        let lo = 4 * j;
        let hi = T - 4 * j;
        if x0 >= lo && x0 + 1 < hi {
            let pair = tx;
            let mut win = [F4 { r0: 0.0, i0: 0.0, r1: 0.0, i1: 0.0 }; 9];
            let row0 = 8 * ty - 4;
            let clamp = |r: i32| if r < 0 { 0 } else if r > T - 1 { T - 1 } else { r };
            for k in 0..8 {
                win[k] = unsafe { lds4(sa, clamp(row0 + k as i32), pair) };
            }
            for r in 0..8i32 {
                win[8] = unsafe { lds4(sa, clamp(row0 + r + 8), pair) };
                let y = 8 * ty + r;
                if y >= lo && y < hi {
                    let pm2 = unsafe { lds4(sa, y, pair - 2) };
                    let pm1 = unsafe { lds4(sa, y, pair - 1) };
                    let pp1 = unsafe { lds4(sa, y, pair + 1) };
                    let pp2 = unsafe { lds4(sa, y, pair + 2) };
                    let c = win[4];
                    // Node x0: left x0-1..x0-4, right x0+1..x0+4; node x0+1 likewise.
                    let F4 { r0: l0r, i0: l0i, r1: l1r, i1: l1i } = pair_laplacian::<false>(&st, c, pm2, pm1, pp1, pp2, &win);
                    let bp = unsafe { sb.add((y * (T / 2) + pair) as usize) };
                    let prev = unsafe { *bp };
                    let (gx, gy) = (ox + x0, oy + y);
                    let (in0, in1) = (inside(gx, gy), inside(gx + 1, gy));
                    let mut t = F4 {
                        r0: cheb_next(first, l0r, prev.r0),
                        i0: cheb_next(first, l0i, prev.i0),
                        r1: cheb_next(first, l1r, prev.r1),
                        i1: cheb_next(first, l1i, prev.i1),
                    };
                    if !in0 {
                        t.r0 = 0.0;
                        t.i0 = 0.0;
                    }
                    if !in1 {
                        t.r1 = 0.0;
                        t.i1 = 0.0;
                    }
                    unsafe { *bp = t };
                    // Interior nodes accumulate a_n T_n.
                    if y >= h && y < T - h && x0 >= h && x0 < T - h {
                        let ai = ((y - h) * bi + (x0 - h)) as usize;
                        for e in 0..2 {
                            let ins = if e == 0 { in0 } else { in1 };
                            if ins {
                                let g = (gy * nx as i32 + gx + e) as usize;
                                let s = unsafe { ldg_f32(slow.add(g)) };
                                let (r0, f) = table_pos(s, map, rows);
                                let a = unsafe { coef_at(table, ncoef, r0, f, n) };
                                let tn = if e == 0 { (t.r0, t.i0) } else { (t.r1, t.i1) };
                                let mut ac = if first {
                                    let a0 = unsafe { coef_at(table, ncoef, r0, f, 0) };
                                    let t0 = if e == 0 { (c.r0, c.i0) } else { (c.r1, c.i1) };
                                    cmadd((0.0, 0.0), a0, t0)
                                } else {
                                    let v = unsafe { *sacc.add(ai + e as usize) };
                                    (v.re, v.im)
                                };
                                ac = cmadd(ac, a, tn);
                                unsafe { *sacc.add(ai + e as usize) = F2 { re: ac.0, im: ac.1 } };
                            }
                        }
                    }
                }
                for k in 0..8 {
                    win[k] = win[k + 1];
                }
            }
        }
        sync_threads();
        core::mem::swap(&mut sa, &mut sb);
    }

    // Write the interior: T_last and T_{last-1} (and acc), or W = taper * acc after the last step.
    let (sa2, sb2) = (sa as *const F2, sb as *const F2);
    let mut i = tid;
    while i < (bi * bi) as u32 {
        let (ly, lx) = ((i / bi as u32) as i32, (i % bi as u32) as i32);
        let (gx, gy) = (ox + h + lx, oy + h + ly);
        if inside(gx, gy) {
            let g = base + (gy * nx as i32 + gx) as usize;
            let ac = unsafe { *sacc.add(i as usize) };
            if last_pass {
                let tw = unsafe { *taper_x.add(gx as usize) * *taper_y.add(gy as usize) };
                unsafe { st2(tout_a, g, F2 { re: ac.re * tw, im: ac.im * tw }) };
            } else {
                let k = ((ly + h) * T + lx + h) as usize;
                unsafe {
                    st2(tout_a, g, *sa2.add(k));
                    st2(tout_b, g, *sb2.add(k));
                    st2(acc, g, ac);
                }
            }
        }
        i += 256;
    }
}

macro_rules! fused_kernel {
    ($name:ident, $k:expr) => {
        /// `steps` (<= K) Chebyshev steps n0 .. n0 + steps - 1 of `count` planes of both waves
        /// (grid z = 2 count) per pass over 64 x 64 tiles: reads T_{n0-1} (`tin_a`) and T_{n0-2}
        /// (`tin_b`, unused when n0 = 1) with a 4K halo, writes the interior's last two terms to
        /// `tout_a`/`tout_b` and the accumulator in place; the pass holding step `degree` writes
        /// W = taper * acc to `tout_a` instead. Inputs and outputs must be distinct buffers.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(st: Stencil, nx: u32, ny: u32, stride: u32, count: u32, n0: u32,
            steps: u32, degree: u32, tin_a: *const f32, tin_b: *const f32, tout_a: *mut f32, tout_b: *mut f32,
            acc: *mut f32, slow: *const f32, table: *const f32, ncoef: u32, rows: u32, maps: *const RowMap,
            taper_x: *const f32, taper_y: *const f32) {
            unsafe {
                fused_body::<$k>(st, nx, ny, stride, count, n0, steps, degree, tin_a, tin_b, tout_a, tout_b, acc, slow,
                    table, ncoef, rows, maps, taper_x, taper_y)
            }
        }
    };
}

fused_kernel!(srm_step_fused2, 2);
fused_kernel!(srm_step_fused3, 3);
fused_kernel!(srm_step_fused4, 4);

// ------------------------------------------------------------------------------------------------
// Balanced fused kernel: the stencil phase as in `fused_body` (rows unrolled, FMA stencil), and the
// coefficient work spread over all 256 threads with table positions and accumulators in registers.
// ------------------------------------------------------------------------------------------------

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn fusedb_body<const K: u32, const M: usize>(st: Stencil, nx: u32, ny: u32, stride: u32, count: u32, n0: u32,
    steps: u32, degree: u32, tin_a: *const f32, tin_b: *const f32, tout_a: *mut f32, tout_b: *mut f32, acc: *mut f32,
    slow: *const f32, table: *const f32, ncoef: u32, rows: u32, maps: *const RowMap, taper_x: *const f32,
    taper_y: *const f32) {
    const T: i32 = FUSED_TILE as i32;
    let h = 4 * K as i32;
    let bi = fused_interior(K) as i32;
    let mut carver = SharedCarver::new();
    let mut sa = carver.take::<F4>((FUSED_TILE * FUSED_TILE / 2) as usize);
    let mut sb = carver.take::<F4>((FUSED_TILE * FUSED_TILE / 2) as usize);
    let (tx, ty) = (thread_idx_x() as i32, thread_idx_y() as i32);
    let tid = ty * 32 + tx;
    let z = block_idx_z();
    let (wave, plane) = (z / count, z % count);
    let nxy = (nx * ny) as usize;
    let base = ((wave * stride + plane) as usize) * nxy;
    let ox = block_idx_x() as i32 * bi - h;
    let oy = block_idx_y() as i32 * bi - h;
    let map = unsafe { *maps.add(plane as usize) };
    let inside = |x: i32, y: i32| x >= 0 && y >= 0 && (x as u32) < nx && (y as u32) < ny;
    let last_pass = n0 + steps - 1 == degree;

    let mut i = tid as u32;
    while i < FUSED_TILE * FUSED_TILE {
        let (ly, lx) = ((i / FUSED_TILE) as i32, (i % FUSED_TILE) as i32);
        let (gx, gy) = (ox + lx, oy + ly);
        let ins = inside(gx, gy);
        let g = base + (gy * nx as i32 + gx) as usize;
        unsafe {
            *(sa as *mut F2).add(i as usize) = if ins { ld2(tin_a, g) } else { ZERO2 };
            if n0 > 1 {
                *(sb as *mut F2).add(i as usize) = if ins { ld2(tin_b, g) } else { ZERO2 };
            }
        }
        i += 256;
    }
    // Interior nodes q = tid + 256 m: table position and accumulator in registers for the pass.
    let mut own = [false; M];
    let mut pi = [0u32; M];
    let mut pf = [0.0f32; M];
    let mut ac = [(0.0f32, 0.0f32); M];
    for m in 0..M {
        let q = tid + 256 * m as i32;
        let (lx, ly) = (q % bi, q / bi);
        let (gx, gy) = (ox + h + lx, oy + h + ly);
        if q < bi * bi && inside(gx, gy) {
            own[m] = true;
            let g = (gy * nx as i32 + gx) as usize;
            let (a, b) = table_pos(unsafe { ldg_f32(slow.add(g)) }, map, rows);
            pi[m] = a;
            pf[m] = b;
            if n0 > 1 {
                let v = unsafe { ld2(acc, base + g) };
                ac[m] = (v.re, v.im);
            }
        }
    }
    sync_threads();
    let node = |q: i32| ((q / bi + h) * T + q % bi + h) as usize; // interior node q in the tile (F2 index)
    if n0 == 1 {
        for m in 0..M {
            if own[m] {
                let t0 = unsafe { *(sa as *const F2).add(node(tid + 256 * m as i32)) };
                let a0 = unsafe { coef_at(table, ncoef, pi[m], pf[m], 0) };
                ac[m] = cmadd((0.0, 0.0), a0, (t0.re, t0.im));
            }
        }
    }

    let x0 = 2 * tx;
    for j in 1..=steps as i32 {
        let n = n0 + j as u32 - 1;
        let first = n == 1;
        let lo = 4 * j;
        let hi = T - 4 * j;
        if x0 >= lo && x0 + 1 < hi {
            let pair = tx;
            let row0 = 8 * ty - 4;
            let clamp = |r: i32| if r < 0 { 0 } else if r > T - 1 { T - 1 } else { r };
            let mut win = [F4 { r0: 0.0, i0: 0.0, r1: 0.0, i1: 0.0 }; 9];
            for k in 0..8 {
                win[k] = unsafe { lds4(sa, clamp(row0 + k as i32), pair) };
            }
            let (sa, sb) = (sa as *const F4, sb);
            // `move`: the closure holds copies of the tile pointers, so they stay in the shared
            // address space (a captured reference would turn the loads generic).
            let row = move |r: i32, win: &mut [F4; 9]| {
                win[8] = unsafe { lds4(sa, clamp(row0 + r + 8), pair) };
                let y = 8 * ty + r;
                if y >= lo && y < hi {
                    let pm2 = unsafe { lds4(sa, y, pair - 2) };
                    let pm1 = unsafe { lds4(sa, y, pair - 1) };
                    let pp1 = unsafe { lds4(sa, y, pair + 1) };
                    let pp2 = unsafe { lds4(sa, y, pair + 2) };
                    let c = win[4];
                    let F4 { r0: l0r, i0: l0i, r1: l1r, i1: l1i } = pair_laplacian::<true>(&st, c, pm2, pm1, pp1, pp2, &win);
                    let bp = unsafe { sb.add((y * (T / 2) + pair) as usize) };
                    let prev = unsafe { *bp };
                    let (gx, gy) = (ox + x0, oy + y);
                    let (in0, in1) = (inside(gx, gy), inside(gx + 1, gy));
                    let t = F4 {
                        r0: if in0 { cheb_next(first, l0r, prev.r0) } else { 0.0 },
                        i0: if in0 { cheb_next(first, l0i, prev.i0) } else { 0.0 },
                        r1: if in1 { cheb_next(first, l1r, prev.r1) } else { 0.0 },
                        i1: if in1 { cheb_next(first, l1i, prev.i1) } else { 0.0 },
                    };
                    unsafe { *bp = t };
                }
                for k in 0..8 {
                    win[k] = win[k + 1];
                }
            };
            for r in 0..8 {
                row(r, &mut win);
            }
        }
        sync_threads();
        core::mem::swap(&mut sa, &mut sb);
        // acc += a_n T_n at the interior (T_n is now in `sa`; the next stencil phase only writes `sb`).
        for m in 0..M {
            if own[m] {
                let t = unsafe { *(sa as *const F2).add(node(tid + 256 * m as i32)) };
                let a = unsafe { coef_at(table, ncoef, pi[m], pf[m], n) };
                ac[m] = cmadd(ac[m], a, (t.re, t.im));
            }
        }
    }

    for m in 0..M {
        if own[m] {
            let q = tid + 256 * m as i32;
            let (gx, gy) = (ox + h + q % bi, oy + h + q / bi);
            let g = base + (gy * nx as i32 + gx) as usize;
            if last_pass {
                let tw = unsafe { *taper_x.add(gx as usize) * *taper_y.add(gy as usize) };
                unsafe { st2(tout_a, g, F2 { re: ac[m].0 * tw, im: ac[m].1 * tw }) };
            } else {
                let k = node(q);
                unsafe {
                    st2(tout_a, g, *(sa as *const F2).add(k));
                    st2(tout_b, g, *(sb as *const F2).add(k));
                    st2(acc, g, F2 { re: ac[m].0, im: ac[m].1 });
                }
            }
        }
    }
}

macro_rules! fusedb_kernel {
    ($name:ident, $k:expr) => {
        /// As the `srm_step_fused*` kernels (same arguments and buffers), with the coefficient work
        /// balanced over all threads and an FMA stencil.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(st: Stencil, nx: u32, ny: u32, stride: u32, count: u32, n0: u32,
            steps: u32, degree: u32, tin_a: *const f32, tin_b: *const f32, tout_a: *mut f32, tout_b: *mut f32,
            acc: *mut f32, slow: *const f32, table: *const f32, ncoef: u32, rows: u32, maps: *const RowMap,
            taper_x: *const f32, taper_y: *const f32) {
            unsafe {
                fusedb_body::<$k, { fusedb_per_thread($k) as usize }>(st, nx, ny, stride, count, n0, steps, degree, tin_a,
                    tin_b, tout_a, tout_b, acc, slow, table, ncoef, rows, maps, taper_x, taper_y)
            }
        }
    };
}

fusedb_kernel!(srm_step_fusedb2, 2);
fusedb_kernel!(srm_step_fusedb3, 3);
fusedb_kernel!(srm_step_fusedb4, 4);

// ------------------------------------------------------------------------------------------------
// `paperq`: the paper-style kernel of `paperh` with one 16-byte pair-table load per lookup.
// ------------------------------------------------------------------------------------------------

/// `srm_step_paperh` with the coefficients read from the pair table (`ptab`, see
/// `gpu_kernels::srm::pair_entry`): one 16-byte load per lookup instead of four scalar loads on four
/// cache lines (the bench's velocity changes at every node, so the rows a warp reads are scattered).
/// Results identical to `paperh`.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn srm_step_paperq(st: Stencil, nx: u32, ny: u32, stride: u32, n: u32, degree: u32,
    tin: *const f32, tio: *mut f32, acc: *mut f32, slow: *const f32, ptab: *const f32, rows: u32,
    maps: *const RowMap, taper_x: *const f32, taper_y: *const f32) {
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

// ------------------------------------------------------------------------------------------------
// `fusedc`: the balanced fused kernel with what limited `fusedb` removed (docs/notes/srm.md):
// - tile loads: each thread's 16 (32 with T_{n-2}) global loads are all issued before its shared
//   stores, from clamped addresses (no branch); `fusedb` waited a full memory latency per node;
// - one 16-byte pair-table load per lookup (`fusedb`: four scalar loads on four cache lines);
// - the per-node state (table position, accumulator, tile offset) unrolled into registers
//   (`fusedb3`'s 7-iteration loops stayed rolled: its arrays were on the stack, 120 B per thread);
// - wave and plane from a compare instead of a division by `count` (no trap path).
// ------------------------------------------------------------------------------------------------

/// Expands `$body` for `$m` = 0..9 while `$m < $n` (a compile-time count): every per-node array index
/// is a constant, so the arrays live in registers.
macro_rules! unroll9 {
    ($m:ident < $n:expr => $body:block) => {
        unroll9!(@go $m, $n, $body, 0 1 2 3 4 5 6 7 8)
    };
    (@go $m:ident, $n:expr, $body:block, $($i:literal)*) => {
        $( { let $m: usize = $i; if $m < $n $body } )*
    };
}

/// One Chebyshev step of the stencil phase of the fused kernels (FMA stencil, as `fusedb`): reads
/// T_{n-1} from `sa`, T_{n-2} from `sb`, writes T_n over `sb` on the rows/columns [lo, hi) of the
/// tile; nodes outside the grid get 0.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn fused_stencil_step(st: Stencil, sa: *const F4, sb: *mut F4, tx: i32, ty: i32, lo: i32, hi: i32, first: bool,
    ox: i32, oy: i32, nx: u32, ny: u32) {
    const T: i32 = FUSED_TILE as i32;
    let inside = |x: i32, y: i32| x >= 0 && y >= 0 && (x as u32) < nx && (y as u32) < ny;
    let x0 = 2 * tx;
    if !(x0 >= lo && x0 + 1 < hi) {
        return;
    }
    let pair = tx;
    let row0 = 8 * ty - 4;
    let clamp = |r: i32| if r < 0 { 0 } else if r > T - 1 { T - 1 } else { r };
    let mut win = [F4 { r0: 0.0, i0: 0.0, r1: 0.0, i1: 0.0 }; 9];
    for k in 0..8 {
        win[k] = unsafe { lds4(sa, clamp(row0 + k as i32), pair) };
    }
    let row = move |r: i32, win: &mut [F4; 9]| {
        win[8] = unsafe { lds4(sa, clamp(row0 + r + 8), pair) };
        let y = 8 * ty + r;
        if y >= lo && y < hi {
            let pm2 = unsafe { lds4(sa, y, pair - 2) };
            let pm1 = unsafe { lds4(sa, y, pair - 1) };
            let pp1 = unsafe { lds4(sa, y, pair + 1) };
            let pp2 = unsafe { lds4(sa, y, pair + 2) };
            let c = win[4];
            let F4 { r0: l0r, i0: l0i, r1: l1r, i1: l1i } = pair_laplacian::<true>(&st, c, pm2, pm1, pp1, pp2, &win);
            let bp = unsafe { sb.add((y * (T / 2) + pair) as usize) };
            let prev = unsafe { *bp };
            let (gx, gy) = (ox + x0, oy + y);
            let (in0, in1) = (inside(gx, gy), inside(gx + 1, gy));
            let t = F4 {
                r0: if in0 { cheb_next(first, l0r, prev.r0) } else { 0.0 },
                i0: if in0 { cheb_next(first, l0i, prev.i0) } else { 0.0 },
                r1: if in1 { cheb_next(first, l1r, prev.r1) } else { 0.0 },
                i1: if in1 { cheb_next(first, l1i, prev.i1) } else { 0.0 },
            };
            unsafe { *bp = t };
        }
        for k in 0..8 {
            win[k] = win[k + 1];
        }
    };
    for r in 0..8 {
        row(r, &mut win);
    }
}

/// The body of the `fusedc` kernels for K steps (see the section comment above).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn fusedc_body<const K: u32, const M: usize>(st: Stencil, nx: u32, ny: u32, stride: u32, count: u32, n0: u32,
    steps: u32, degree: u32, tin_a: *const f32, tin_b: *const f32, tout_a: *mut f32, tout_b: *mut f32, acc: *mut f32,
    slow: *const f32, ptab: *const f32, rows: u32, maps: *const RowMap, taper_x: *const f32, taper_y: *const f32) {
    const T: i32 = FUSED_TILE as i32;
    const { assert!(M <= 9) };
    let h = 4 * K as i32;
    let bi = fused_interior(K) as i32;
    let mut carver = SharedCarver::new();
    let mut sa = carver.take::<F4>((FUSED_TILE * FUSED_TILE / 2) as usize);
    let mut sb = carver.take::<F4>((FUSED_TILE * FUSED_TILE / 2) as usize);
    let (tx, ty) = (thread_idx_x() as i32, thread_idx_y() as i32);
    let tid = ty * 32 + tx;
    let z = block_idx_z();
    let wave = (z >= count) as u32;
    let plane = z - wave * count;
    let nxy = (nx * ny) as usize;
    let base = ((wave * stride + plane) as usize) * nxy;
    let ox = block_idx_x() as i32 * bi - h;
    let oy = block_idx_y() as i32 * bi - h;
    let map = unsafe { *maps.add(plane as usize) };
    let inside = |x: i32, y: i32| x >= 0 && y >= 0 && (x as u32) < nx && (y as u32) < ny;
    let last_pass = n0 + steps - 1 == degree;
    let prow = pair_rows(rows);

    // Tile load: the thread's own pair column (nodes 2tx, 2tx + 1 of rows 8ty .. 8ty + 7), every
    // global load issued before the first shared store; outside nodes read a clamped address and
    // are replaced by 0.
    let gx0 = ox + 2 * tx;
    let (cx0, cx1) = (clampi(gx0, nx) as usize, clampi(gx0 + 1, nx) as usize);
    let load_col = |src: *const f32| -> [F4; 8] {
        let mut v = [F4 { r0: 0.0, i0: 0.0, r1: 0.0, i1: 0.0 }; 8];
        unroll9!(r < 8 => {
            let gy = oy + 8 * ty + r as i32;
            let cy = clampi(gy, ny) as usize * nx as usize;
            let a = unsafe { ldg_f32x2(src.add(2 * (base + cy + cx0))) };
            let b = unsafe { ldg_f32x2(src.add(2 * (base + cy + cx1))) };
            let (i0, i1) = (inside(gx0, gy), inside(gx0 + 1, gy));
            v[r] = F4 {
                r0: if i0 { a[0] } else { 0.0 },
                i0: if i0 { a[1] } else { 0.0 },
                r1: if i1 { b[0] } else { 0.0 },
                i1: if i1 { b[1] } else { 0.0 },
            };
        });
        v
    };
    // T_{n0-1}, then T_{n0-2}, then the accumulator: each batch's loads all in flight before its
    // stores (holding both tiles' 32 loads at once pushed the kernel past 80 registers).
    let va = load_col(tin_a);
    unroll9!(r < 8 => {
        unsafe { *sa.add(((8 * ty + r as i32) * (T / 2) + tx) as usize) = va[r] };
    });
    // The interior accumulator lives in shared memory (bi x bi complex after the two tiles) and the
    // table position is recomputed from the slowness at every step (an L1-resident coalesced load
    // and a few flops): per-node state in registers (7 nodes x 4 registers at K = 3) pushed the
    // kernel past 80 registers, i.e. below three blocks per SM.
    let sacc = carver.take::<F2>((bi * bi) as usize);
    let nint = (bi * bi) as u32;
    if n0 > 1 {
        let vb = load_col(tin_b);
        unroll9!(r < 8 => {
            unsafe { *sb.add(((8 * ty + r as i32) * (T / 2) + tx) as usize) = vb[r] };
        });
        let mut acc_in = [ZERO2; M];
        unroll9!(m < M => {
            let q = tid as u32 + 256 * m as u32;
            let (lx, ly) = ((q % bi as u32) as i32, (q / bi as u32) as i32);
            let (gx, gy) = (ox + h + lx, oy + h + ly);
            if q < nint && inside(gx, gy) {
                acc_in[m] = unsafe { ld2(acc, base + (gy * nx as i32 + gx) as usize) };
            }
        });
        unroll9!(m < M => {
            let q = tid as u32 + 256 * m as u32;
            if q < nint {
                unsafe { *sacc.add(q as usize) = acc_in[m] };
            }
        });
    }
    sync_threads();
    // acc (+)= a_n T_n over the interior, T_n in `t`; n = 0 starts the sum.
    // acc (+)= a_n T_n over the interior, T_n in `t`; n = 0 starts the sum.
    let accumulate = |t: *const F2, n: u32| {
        let pn = unsafe { ptab.add(4 * (n * prow) as usize) };
        let mut q = tid as u32;
        while q < nint {
            let (lx, ly) = ((q % bi as u32) as i32, (q / bi as u32) as i32);
            let (gx, gy) = (ox + h + lx, oy + h + ly);
            if inside(gx, gy) {
                let (i0, f) = table_pos(unsafe { ldg_f32(slow.add((gy * nx as i32 + gx) as usize)) }, map, rows);
                let a = coef_from_pair(unsafe { ldg_f32x4(pn.add(4 * i0 as usize)) }, f);
                let tn = unsafe { *t.add(((ly + h) * T + lx + h) as usize) };
                let prev = if n == 0 { ZERO2 } else { unsafe { *sacc.add(q as usize) } };
                let v = cmadd((prev.re, prev.im), a, (tn.re, tn.im));
                unsafe { *sacc.add(q as usize) = F2 { re: v.0, im: v.1 } };
            }
            q += 256;
        }
    };
    if n0 == 1 {
        accumulate(sa as *const F2, 0);
    }

    for j in 1..=steps as i32 {
        let n = n0 + j as u32 - 1;
        unsafe { fused_stencil_step(st, sa, sb, tx, ty, 4 * j, T - 4 * j, n == 1, ox, oy, nx, ny) };
        sync_threads();
        core::mem::swap(&mut sa, &mut sb);
        // T_n is now in `sa`; the next stencil phase only writes `sb`, and each accumulator entry is
        // touched by one thread only, so no barrier is needed before the next step.
        accumulate(sa as *const F2, n);
    }

    let mut q = tid as u32;
    while q < nint {
        let (lx, ly) = ((q % bi as u32) as i32, (q / bi as u32) as i32);
        let (gx, gy) = (ox + h + lx, oy + h + ly);
        if inside(gx, gy) {
            let g = base + (gy * nx as i32 + gx) as usize;
            let ac = unsafe { *sacc.add(q as usize) };
            if last_pass {
                let tw = unsafe { *taper_x.add(gx as usize) * *taper_y.add(gy as usize) };
                unsafe { st2(tout_a, g, F2 { re: ac.re * tw, im: ac.im * tw }) };
            } else {
                let k = ((ly + h) * T + lx + h) as usize;
                unsafe {
                    st2(tout_a, g, *(sa as *const F2).add(k));
                    st2(tout_b, g, *(sb as *const F2).add(k));
                    st2(acc, g, ac);
                }
            }
        }
        q += 256;
    }
}

macro_rules! fusedc_kernel {
    ($name:ident, $k:expr) => {
        /// As the `srm_step_fusedb*` kernels (same buffers; `ptab` the pair table and `rows` the
        /// table's rows instead of `table`, `ncoef`, `rows`), with the changes listed above.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(st: Stencil, nx: u32, ny: u32, stride: u32, count: u32, n0: u32,
            steps: u32, degree: u32, tin_a: *const f32, tin_b: *const f32, tout_a: *mut f32, tout_b: *mut f32,
            acc: *mut f32, slow: *const f32, ptab: *const f32, rows: u32, maps: *const RowMap,
            taper_x: *const f32, taper_y: *const f32) {
            unsafe {
                fusedc_body::<$k, { fusedb_per_thread($k) as usize }>(st, nx, ny, stride, count, n0, steps, degree, tin_a,
                    tin_b, tout_a, tout_b, acc, slow, ptab, rows, maps, taper_x, taper_y)
            }
        }
    };
}

fusedc_kernel!(srm_step_fusedc2, 2);
fusedc_kernel!(srm_step_fusedc3, 3);
fusedc_kernel!(srm_step_fusedc4, 4);

// ------------------------------------------------------------------------------------------------
// Shot pipeline: traces to complex, injection of the receiver spectra and the source, imaging.
// ------------------------------------------------------------------------------------------------

/// out[i] = (x[i], 0) for n values: real traces into cuFFT's interleaved complex input.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn srm_real_to_complex(n: u32, x: *const f32, out: *mut f32) {
    let i = global_x();
    if i < n {
        unsafe { st2(out, i as usize, F2 { re: *x.add(i as usize), im: 0.0 }) };
    }
}

/// Adds each trace's spectrum at bin `bins[p]`, times `delays[p]` (e^{-i w t0}), to its receiver
/// node of plane p of the receiver wave (wave 1). One thread per (trace, plane).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn srm_inject_receivers(ntr: u32, nfft: u32, count: u32, stride: u32, nxy: u32,
    bins: *const u32, delays: *const f32, spectra: *const f32, nodes: *const u32, waves: *mut f32) {
    let i = global_x();
    if i < ntr * count {
        let (t, p) = (i % ntr, i / ntr);
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

/// Sets the source node of each plane of the source wave (wave 0) to (values[p], 0).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn srm_inject_source(count: u32, nxy: u32, node: u32, values: *const f32, waves: *mut f32) {
    let p = global_x();
    if p < count {
        unsafe { st2(waves, (p * nxy + node) as usize, F2 { re: *values.add(p as usize), im: 0.0 }) };
    }
}

/// image[i] += sum over the `count` planes of Re(S'_p R_p)[i] (imaging condition, both waves in
/// `waves` with plane stride `stride`).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn srm_image(nxy: u32, count: u32, stride: u32, waves: *const f32, image: *mut f32) {
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
