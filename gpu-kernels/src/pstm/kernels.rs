//! PSTM kernels: exact, static 8-point (paper 5, section 3) and dynamic traveltimes, DSR and VTI.
//!
//! Shape (paper section 3.2): one warp per image column (x, y, offset class), several columns per
//! block: grid (NX, ceil(NY / W), z-chunks * NOFF), block (32, W); the paper used W = 10. Lane j
//! of a warp owns image samples z = 32 l + j (layer l), so trace reads of a warp fall on nearby
//! samples and image writes are coalesced (paper section 3.3 (1)). The column's accumulators stay
//! in registers for a whole z-chunk of 48 layers (1536 samples) while the warp walks every trace
//! that can reach it (midpoint bins, then the aperture test), and are written once at the end.
//!
//! static8 (paper section 3.1): per trace, the 32 lanes compute the exact positions of the
//! 8-sample grid of every 8-layer unit (lane i: z = 256 u + 8 i; the 33rd point of a unit is lane 0
//! of the next unit, so only a full last unit costs one extra evaluation), classify each 8-sample
//! step, and write (position, slope) into a per-warp table in shared memory; each layer then reads
//! its 4 steps (one 16-byte broadcast load serves two layers) and interpolates.
//!
//! dynamic: lane k owns the 32-sample segment k of the chunk (two rounds for 48 segments), runs the
//! shared step selection ([`super::dynamic_segment`]) and writes (base, slope, offset, class) for
//! each 8-sample quarter; layers read them as in static8. Lanes take different branches here,
//! which is the cost the paper attributes to this scheme on GPUs.
//!
//! Coefficients: 1/v^2 (and eta) per column, per sample for exact and dynamic, every 8th sample for
//! static8 (held in registers for the whole trace loop).

use core::arch::asm;

use super::traveltime::{Dsr, Model, Vti};
use super::*;
use crate::device::*;

/// Repeats a block with a `const` bound to each listed value (register arrays need constant
/// indices; LLVM's unroller will not unroll bodies this large on its own).
macro_rules! unroll {
    ($c:ident in [$($n:literal),*] $body:block) => {
        $( { #[allow(non_upper_case_globals)] const $c: usize = $n; $body } )*
    };
}

#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct F4([f32; 4]);

#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct F2([f32; 2]);

use crate::device::{ldg_f32x4, ldg_u32};

/// How a kernel reads packed (a, d) trace entries.
trait Fetch: Copy {
    type Row: Copy;
    /// Handle of batch trace `tr`.
    fn row(&self, tr: u32) -> Self::Row;
    /// Entry `e` (0 = first padding entry) of a trace.
    fn load(&self, row: Self::Row, e: i32) -> (f32, f32);
}

/// Traces in global memory, row-major, read through the non-coherent (read-only) cache.
#[derive(Clone, Copy)]
struct Global {
    base: *const f32,
    row_len: u32,
}

impl Fetch for Global {
    type Row = *const f32;
    #[inline(always)]
    fn row(&self, tr: u32) -> *const f32 { unsafe { self.base.add(2 * tr as usize * self.row_len as usize) } }
    #[inline(always)]
    fn load(&self, row: *const f32, e: i32) -> (f32, f32) {
        let [a, d] = unsafe { crate::device::ldg_f32x2(row.offset(2 * e as isize)) };
        (a, d)
    }
}

/// Traces in a 2D float2 texture (x = entry, y = batch trace), point-sampled at integer texels
/// (paper section 3.3 (2)); the lerp stays in code so results match the CPU.
#[derive(Clone, Copy)]
struct Tex {
    handle: u64,
}

impl Fetch for Tex {
    type Row = u32;
    #[inline(always)]
    fn row(&self, tr: u32) -> u32 { tr }
    #[inline(always)]
    fn load(&self, row: u32, e: i32) -> (f32, f32) {
        let (a, d, _c, _w): (f32, f32, f32, f32);
        unsafe {
            asm!("tex.2d.v4.f32.s32 {{{a}, {d}, {c}, {w}}}, [{t}, {{{x}, {y}}}];", a = out(reg32) a, d = out(reg32) d,
                 c = out(reg32) _c, w = out(reg32) _w, t = in(reg64) self.handle, x = in(reg32) e, y = in(reg32) row,
                 options(readonly, nostack, pure));
        }
        (a, d)
    }
}

/// The lane index, read afresh each time (not `pure`): values derived from it inside the trace
/// loop are then recomputed per trace instead of being hoisted into ~100 extra registers.
#[inline(always)]
fn lane_fresh() -> u32 {
    let r: u32;
    unsafe { asm!("mov.u32 {r}, %laneid;", r = out(reg32) r, options(nomem, nostack)) };
    r
}

/// `v`, opaque to the optimiser (not `pure`): per-layer offsets such as z0 + 32 l are then
/// formed inside the trace loop rather than hoisted into one register each.
#[inline(always)]
fn fresh(v: u32) -> u32 {
    let r: u32;
    unsafe { asm!("mov.u32 {r}, {v};", r = out(reg32) r, v = in(reg32) v, options(nomem, nostack)) };
    r
}

#[inline(always)]
fn contrib<F: Fetch>(f: &F, row: F::Row, s: f32) -> f32 {
    let (i, fr) = split(s);
    let (a, d) = f.load(row, i + PAD as i32);
    mul_add(fr, d, a)
}

/// The image column (and z-chunk) a warp owns.
#[derive(Clone, Copy)]
struct Column {
    x: f32,
    y: f32,
    k: u32,
    /// Index of the column's first sample in the image (chunk start included).
    out: usize,
    /// Column index into the coefficient arrays.
    col: u32,
    /// First image sample of the chunk, and its number of layers.
    z0: u32,
    n_layers: u32,
    /// False for the padding warps of the last block along y (lockstep mode keeps them in the
    /// trace walk for the block barriers; they contribute nothing and store nothing).
    active: bool,
    /// y of the block's first and last real columns (lockstep bins).
    y_lo: f32,
    y_hi: f32,
}

#[inline(always)]
fn column(p: &KParams) -> Option<Column> {
    let ix = block_idx_x();
    let iy0 = block_idx_y() * block_dim_y();
    let iy_last = if iy0 + block_dim_y() < p.ny { iy0 + block_dim_y() - 1 } else { p.ny - 1 };
    let iy = iy0 + thread_idx_y();
    let active = iy < p.ny;
    if !active && p.lockstep == 0 {
        return None;
    }
    let iy = if active { iy } else { iy_last };
    let noff = if p.noff == 0 { 1 } else { p.noff }; // (the host checks; this keeps `%` panic-free)
    let k = block_idx_z() % noff;
    let chunk = block_idx_z() / noff;
    let z0 = chunk * LAYER * CHUNK_LAYERS;
    let total_layers = p.nz_pad / LAYER;
    let left = total_layers - chunk * CHUNK_LAYERS;
    let n_layers = if left < CHUNK_LAYERS { left } else { CHUNK_LAYERS };
    let col = ix * p.ny + iy;
    Some(Column {
        x: ix as f32 * p.dx,
        y: iy as f32 * p.dy,
        k,
        out: ((col as usize) * p.noff as usize + k as usize) * p.nz_pad as usize + z0 as usize,
        col,
        z0,
        n_layers,
        active,
        y_lo: iy0 as f32 * p.dy,
        y_hi: iy_last as f32 * p.dy,
    })
}

/// The batch traces of the column's offset class within the aperture, in the sorted order the
/// CPU reference also uses. An explicit iterator rather than a closure: the per-trace body then
/// stays in the kernel function (a large closure is not always inlined, and a call is not allowed
/// in the capped-register module).
struct Traces {
    /// Next bin row to open, last row, bin column range.
    next_by: u32,
    by1: u32,
    bx0: u32,
    bx1: u32,
    /// Current trace and end of the current run.
    tr: u32,
    r1: u32,
    lockstep: bool,
}

impl Traces {
    #[inline(always)]
    fn new(p: &KParams, col: &Column) -> Traces {
        if p.lockstep != 0 {
            // The union of the block's columns' bins: one candidate sequence for every warp.
            let ((bx0, bx1), (by0, _)) = p.bins.around(col.x, col.y_lo, p.aperture);
            let (_, (_, by1)) = p.bins.around(col.x, col.y_hi, p.aperture);
            return Traces { next_by: by0, by1, bx0, bx1, tr: 0, r1: 0, lockstep: true };
        }
        let ((bx0, bx1), (by0, by1)) = p.bins.around(col.x, col.y, p.aperture);
        Traces { next_by: by0, by1, bx0, bx1, tr: 0, r1: 0, lockstep: false }
    }

    #[inline(always)]
    unsafe fn next(&mut self, p: &KParams, col: &Column, bin_start: *const u32, headers: *const f32) -> Option<(u32, Ctx)> {
        loop {
            while self.tr < self.r1 {
                let tr = self.tr;
                self.tr += 1;
                if self.lockstep && tr % 2 == 0 {
                    // Every warp visits every candidate in the same order, so all reach this.
                    sync_threads();
                }
                let h = unsafe { ldg_f32x4(headers.add(4 * tr as usize)) };
                let (ds2, dr2, md2) = distances(h[0], h[1], h[2], h[3], col.x, col.y);
                if md2 <= p.aperture2 && col.active {
                    return Some((tr, p.ctx(ds2, dr2)));
                }
            }
            if self.next_by > self.by1 {
                return None;
            }
            let row = (col.k * p.bins.ny + self.next_by) * p.bins.nx;
            self.tr = unsafe { ldg_u32(bin_start.add((row + self.bx0) as usize)) };
            self.r1 = unsafe { ldg_u32(bin_start.add((row + self.bx1 + 1) as usize)) };
            self.next_by += 1;
        }
    }
}

/// Writes (first batch) or adds the accumulators of a chunk.
#[inline(always)]
unsafe fn store(image: *mut f32, col: &Column, acc: &[f32; 48], first: u32) {
    if !col.active {
        return;
    }
    let lane = thread_idx_x() as usize;
    unroll!(L in [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47] {
        if (L as u32) < col.n_layers {
            let q = unsafe { image.add(col.out + 32 * L + lane) };
            unsafe { *q = if first != 0 { acc[L] } else { *q + acc[L] } };
        }
    });
}

#[inline(always)]
unsafe fn coef(arr: *const f32, col: u32, stride: u32, i: u32) -> f32 {
    unsafe { crate::device::ldg_f32(arr.add(col as usize * stride as usize + i as usize)) }
}

// ---- exact ---------------------------------------------------------------------------------------

/// One trace's contributions to a column chunk (exact traveltimes).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn exact_trace<M: Model, F: Fetch>(p: &KParams, col: &Column, fetch: &F, iv2: *const f32, eta: *const f32, tr: u32,
    c: &Ctx, acc: &mut [f32; 48]) {
    unsafe {
            let row = fetch.row(tr);
            let lane = lane_fresh();
            let z0 = fresh(col.z0);
            unroll!(L in [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47] {
                if (L as u32) < col.n_layers {
                    let z = z0 + 32 * L as u32 + lane;
                    let v2 = coef(iv2, col.col, p.coef_stride, z);
                    let e = if M::NEEDS_ETA { coef(eta, col.col, p.coef_stride, z) } else { 0.0 };
                    let s = checked(exact_pos::<M>(z, c, v2, e), z, c);
                    acc[L] += contrib(fetch, row, s);
                }
            });    }
}

#[inline(always)]
unsafe fn exact<M: Model, F: Fetch>(p: &KParams, fetch: F, headers: *const f32, bin_start: *const u32,
    iv2: *const f32, eta: *const f32, image: *mut f32, first: u32) {
    let Some(col) = column(p) else { return };
    let mut acc = [0.0f32; 48];
    unsafe {
        let mut it = Traces::new(p, &col);
        while let Some((tr, c)) = it.next(p, &col, bin_start, headers) {
            exact_trace::<M, F>(p, &col, &fetch, iv2, eta, tr, &c, &mut acc);
        }
        store(image, &col, &acc, first);
    }
}

// ---- static 8-point ----------------------------------------------------------------------------

/// One trace's contributions to a column chunk (static8 traveltimes).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn static8_trace<M: Model, F: Fetch>(p: &KParams, col: &Column, fetch: &F, tbl: *mut F4, n_units: u32, last_full: bool,
    kmax: u32, xiv2: f32, xeta: f32, iv2_8: *const f32, eta_8: *const f32, tr: u32, c: &Ctx, acc: &mut [f32; 48]) {
    unsafe {
            let row = fetch.row(tr);
            let lane = lane_fresh();
            let z0 = fresh(col.z0);
            let wj = (lane & 7) as f32;
            let g = (lane >> 3) as usize;
            // Exact positions of the grid points (independent: good instruction-level parallelism).
            // (Coefficients re-read per trace from L1: held across the loop they cost 6-12 registers.)
            let mut pts = [0.0f32; 6];
            unroll!(U in [0,1,2,3,4,5] {
                if (U as u32) < n_units {
                    let k = z0 / STEP + 32 * U as u32 + lane;
                    let k = if k < kmax { k } else { kmax };
                    let v2 = coef(iv2_8, col.col, p.coef8_stride, k);
                    let e = if M::NEEDS_ETA { coef(eta_8, col.col, p.coef8_stride, k) } else { 0.0 };
                    pts[U] = exact_pos::<M>(z0 + UNIT * U as u32 + STEP * lane, c, v2, e);
                }
            });
            let extra = if last_full { exact_pos::<M>(z0 + UNIT * n_units, c, xiv2, xeta) } else { 0.0 };
            unroll!(U in [0,1,2,3,4,5] {
                if (U as u32) < n_units {
                    // This unit's 32 steps: classify, then (position, slope) into the table.
                    let pa = pts[U];
                    let nb = shfl_down_f32(pa, 1);
                    let n31 = if U + 1 < 6 && ((U + 1) as u32) < n_units {
                        shfl_idx_f32(pts[if U + 1 < 6 { U + 1 } else { 5 }], 0)
                    } else {
                        extra
                    };
                    let pb = if lane == 31 { n31 } else { nb };
                    let za = z0 + UNIT * U as u32 + STEP * lane;
                    let cls = classify(pa, za, pb, za + STEP, c);
                    let fm = vote_ballot(cls == FAST);
                    let dm = vote_ballot(cls == DEAD_STEP);
                    let lh = (lane >> 2) as usize;
                    let mut continue_unit = true;
                    sync_warp(); // the previous unit's table reads are done
                    let slot = tbl.add((lh >> 1) * 4 + (lane & 3) as usize) as *mut F2;
                    *slot.add(lh & 1) = F2([pa, step_slope(pa, pb, STEP)]);
                    sync_warp();
                    let full = (U as u32 + 1) * 8 <= col.n_layers;
                    if p.batched_units != 0 && full && fm == u32::MAX {
                        // Every step FAST, all 8 layers inside the chunk: no tests, no branches, so
                        // the 8 trace loads are issued together (memory-level parallelism).
                        let q = [*tbl.add(g), *tbl.add(4 + g), *tbl.add(8 + g), *tbl.add(12 + g)];
                        let mut v = [(0.0f32, 0.0f32, 0.0f32); 8];
                        unroll!(LH in [0,1,2,3,4,5,6,7] {
                            let e = q[LH >> 1].0;
                            let (base, slope) = if LH % 2 == 0 { (e[0], e[1]) } else { (e[2], e[3]) };
                            let (i, f) = split(interp(wj, slope, base));
                            let (a, d) = fetch.load(row, i + PAD as i32);
                            v[LH] = (f, d, a);
                        });
                        unroll!(LH in [0,1,2,3,4,5,6,7] {
                            acc[U * 8 + LH] += mul_add(v[LH].0, v[LH].1, v[LH].2);
                        });
                        continue_unit = false;
                    }
                    let mut pair = F4([0.0; 4]);
                    if continue_unit { unroll!(LH in [0,1,2,3,4,5,6,7] {
                        let l = U * 8 + LH;
                        if (l as u32) < col.n_layers {
                            if LH % 2 == 0 {
                                pair = *tbl.add((LH >> 1) * 4 + g);
                            }
                            let f4 = (fm >> (4 * LH)) & 0xF;
                            let d4 = (dm >> (4 * LH)) & 0xF;
                            if d4 != 0xF {
                                let (base, slope) = if LH % 2 == 0 { (pair.0[0], pair.0[1]) } else { (pair.0[2], pair.0[3]) };
                                let mut s = interp(wj, slope, base);
                                if f4 != 0xF {
                                    let z = z0 + 32 * l as u32 + lane;
                                    let cls = if (f4 >> g) & 1 != 0 { FAST } else if (d4 >> g) & 1 != 0 { DEAD_STEP } else { MIXED };
                                    s = step_sample(cls, s, z, c);
                                }
                                acc[l] += contrib(fetch, row, s);
                            }
                        }
                    }); }
                }
            });    }
}

#[inline(always)]
unsafe fn static8<M: Model, F: Fetch>(p: &KParams, fetch: F, headers: *const f32, bin_start: *const u32,
    iv2_8: *const f32, eta_8: *const f32, image: *mut f32, first: u32) {
    let Some(col) = column(p) else { return };
    let lane = thread_idx_x();
    // One unit's 32 steps of (position, slope), 16 float4 laid out so that the float4 at
    // (lh/2)*4 + g holds step g of layer lh (even) and of layer lh + 1.
    let tbl = unsafe { dynamic_shared::<F4>().add(thread_idx_y() as usize * 16) };
    let n_units = col.n_layers.div_ceil(8);
    let last_full = col.n_layers % 8 == 0;
    let kmax = p.nz_pad / STEP;
    let kx = col.z0 / STEP + 32 * n_units;
    let kx = if kx < kmax { kx } else { kmax };
    let xiv2 = unsafe { coef(iv2_8, col.col, p.coef8_stride, kx) };
    let xeta = if M::NEEDS_ETA { unsafe { coef(eta_8, col.col, p.coef8_stride, kx) } } else { 0.0 };
    let mut acc = [0.0f32; 48];
    unsafe {
        let mut it = Traces::new(p, &col);
        while let Some((tr, c)) = it.next(p, &col, bin_start, headers) {
            static8_trace::<M, F>(p, &col, &fetch, tbl, n_units, last_full, kmax, xiv2, xeta, iv2_8, eta_8, tr, &c, &mut acc);
        }
        store(image, &col, &acc, first);
    }
}

// ---- dynamic -------------------------------------------------------------------------------------

/// One trace's contributions to a column chunk (dynamic traveltimes).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn dynamic_trace<M: Model, F: Fetch>(p: &KParams, col: &Column, fetch: &F, tbl: *mut F4, iv2: *const f32, eta: *const f32,
    tr: u32, c: &Ctx, acc: &mut [f32; 48]) {
    let zmax = p.nz_pad;
    let eval = |z: u32, c: &Ctx| {
        let zc = if z < zmax { z } else { zmax };
        let v2 = unsafe { coef(iv2, col.col, p.coef_stride, zc) };
        let e = if M::NEEDS_ETA { unsafe { coef(eta, col.col, p.coef_stride, zc) } } else { 0.0 };
        exact_pos::<M>(z, c, v2, e)
    };
    unsafe {
            let row = fetch.row(tr);
            let lane = lane_fresh();
            let z0 = fresh(col.z0);
            let jf = lane as f32;
            let g = (lane >> 3) as usize;
            let mut carry = eval(z0, c);
            let mut fm = [0u32; 2];
            let mut dm = [0u32; 2];
            sync_warp();
            unroll!(R in [0,1] {
                if ((32 * R) as u32) < col.n_layers {
                    let seg = 32 * R as u32 + lane;
                    let valid = seg < col.n_layers;
                    let zs = z0 + 32 * seg;
                    let s32 = eval(zs + 32, c);
                    let up = shfl_up(s32);
                    let s0 = if lane == 0 { carry } else { up };
                    carry = shfl_idx_f32(s32, 31);
                    let mut fast_all = valid;
                    let mut dead_all = true;
                    if valid {
                        let t = tbl.add(4 * seg as usize);
                        dynamic_segment(zs, s0, s32, p.tol, p.max_step, c, |o| eval(zs + o, c), |o, len, base, slope, cls| {
                            let mut q = o / 8;
                            while q < (o + len) / 8 {
                                *t.add(q as usize) = F4([base, slope, o as f32, cls as f32]);
                                q += 1;
                            }
                            fast_all &= cls == FAST;
                            dead_all &= cls == DEAD_STEP;
                        });
                    }
                    fm[R] = vote_ballot(fast_all);
                    dm[R] = vote_ballot(dead_all);
                }
            });
            sync_warp();
            unroll!(L in [0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47] {
                if (L as u32) < col.n_layers && (dm[L / 32] >> (L % 32)) & 1 == 0 {
                    let e = *tbl.add(4 * L + g);
                    let mut s = interp(jf - e.0[2], e.0[1], e.0[0]);
                    if (fm[L / 32] >> (L % 32)) & 1 == 0 {
                        s = step_sample(e.0[3] as u32, s, z0 + 32 * L as u32 + lane, c);
                    }
                    acc[L] += contrib(fetch, row, s);
                }
            });    }
}

#[inline(always)]
unsafe fn dynamic<M: Model, F: Fetch>(p: &KParams, fetch: F, headers: *const f32, bin_start: *const u32,
    iv2: *const f32, eta: *const f32, image: *mut f32, first: u32) {
    let Some(col) = column(p) else { return };
    // 48 segments x 4 quarters of (base, slope, step offset, class).
    let tbl = unsafe { dynamic_shared::<F4>().add(thread_idx_y() as usize * (CHUNK_LAYERS as usize * 4)) };
    let mut acc = [0.0f32; 48];
    unsafe {
        let mut it = Traces::new(p, &col);
        while let Some((tr, c)) = it.next(p, &col, bin_start, headers) {
            dynamic_trace::<M, F>(p, &col, &fetch, tbl, iv2, eta, tr, &c, &mut acc);
        }
        store(image, &col, &acc, first);
    }
}

/// `__shfl_up_sync(full, v, 1)` (lane 0 keeps its own value).
#[inline(always)]
fn shfl_up(v: f32) -> f32 {
    let r: f32;
    unsafe {
        asm!("shfl.sync.up.b32 {r}, {v}, 1, 0, -1;", r = out(reg32) r, v = in(reg32) v, options(nostack))
    };
    r
}

// ---- entry points --------------------------------------------------------------------------------

macro_rules! entry {
    ($name:ident, $body:ident, $model:ty, global) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: KParams, traces: *const f32, headers: *const f32,
            bin_start: *const u32, iv2: *const f32, eta: *const f32, image: *mut f32, first: u32) {
            let row_len = p.packed_len;
            unsafe { $body::<$model, Global>(&p, Global { base: traces, row_len }, headers, bin_start, iv2, eta, image, first) }
        }
    };
    ($name:ident, $body:ident, $model:ty, tex) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: KParams, traces: u64, headers: *const f32,
            bin_start: *const u32, iv2: *const f32, eta: *const f32, image: *mut f32, first: u32) {
            unsafe { $body::<$model, Tex>(&p, Tex { handle: traces }, headers, bin_start, iv2, eta, image, first) }
        }
    };
}

entry!(pstm_exact_dsr, exact, Dsr, global);
entry!(pstm_exact_vti, exact, Vti, global);
entry!(pstm_static8_dsr, static8, Dsr, global);
entry!(pstm_static8_vti, static8, Vti, global);
entry!(pstm_static8_dsr_tex, static8, Dsr, tex);
entry!(pstm_static8_vti_tex, static8, Vti, tex);
entry!(pstm_dynamic_dsr, dynamic, Dsr, global);
entry!(pstm_dynamic_vti, dynamic, Vti, global);
