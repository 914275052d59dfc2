//! The three traveltime modes over any trace path ([`super::Fetch`]): exact, static 8-point and
//! dynamic, one trace's contributions to a column chunk and the walk over a column's traces.

use super::*;

// ---- exact ---------------------------------------------------------------------------------------

/// One trace's contributions to a column chunk (exact traveltimes).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn exact_trace<M: Model, F: Fetch>(p: &KParams, col: &Column, fetch: &F, iv2: *const f32, eta: *const f32, tr: u32,
    c: &Ctx, acc: &mut [f32; 48]) {
    unsafe {
            let row = fetch.row(tr);
            let lane = lane_fresh();
            let z0 = opaque_u32(col.z0);
            // In units of 8 layers (the shared-memory kernels copy a share of the next trace per unit).
            unroll!(6, |const U| {
                if ((8 * U) as u32) < col.n_layers {
                    let stg = fetch.stage_load(U as u32);
                    unroll!(8, |const LH| {
                        let l = 8 * U + LH;
                        if (l as u32) < col.n_layers {
                            let z = z0 + 32 * l as u32 + lane;
                            let v2 = coef(iv2, col.col, p.coef_stride, z);
                            let e = if M::NEEDS_ETA { coef(eta, col.col, p.coef_stride, z) } else { 0.0 };
                            let s = checked(exact_pos::<M>(z, c, v2, e), z, c);
                            acc[l] += contrib(fetch, row, s);
                        }
                    });
                    fetch.stage_store(U as u32, stg);
                }
            });    }
}

#[inline(always)]
pub(super) unsafe fn exact<M: Model, F: Fetch>(p: &KParams, fetch: F, headers: *const f32, bin_start: *const u32,
    iv2: *const f32, eta: *const f32, image: *mut f32, first: u32) {
    let Some(col) = column(p, p.lockstep != 0) else { return };
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

/// Unit `U` of a trace when every step is FAST and all 8 layers are inside the chunk (`tb`: the
/// unit's (position, slope) table, laid out as in [`static8_trace`]): no tests, no branches, so the
/// 8 trace loads are issued together (memory-level parallelism).
#[inline(always)]
pub(super) unsafe fn unit_batched<const U: usize, F: Fetch>(fetch: &F, row: F::Row, tb: *const F4, wj: f32, g: usize, acc: &mut [f32; 48]) {
    unsafe {
        let q = [*tb.add(g), *tb.add(4 + g), *tb.add(8 + g), *tb.add(12 + g)];
        let mut v = [(0.0f32, 0.0f32, 0.0f32); 8];
        unroll!(8, |const LH| {
            let e = q[LH >> 1].0;
            let (base, slope) = if LH % 2 == 0 { (e[0], e[1]) } else { (e[2], e[3]) };
            let (f, a, d) = fetch.sample(row, interp(wj, slope, base));
            v[LH] = (f, d, a);
        });
        unroll!(8, |const LH| {
            acc[U * 8 + LH] += mul_add(v[LH].0, v[LH].1, v[LH].2);
        });
    }
}

/// Unit `U` of a trace layer by layer (the chunk's layers below `n_layers`): layers whose 4 steps
/// are all DEAD (`dm`) are skipped, all-FAST ones (`fm`) use the interpolated position untested,
/// the others test per lane ([`step_sample`]). `z0`, `lane`: the chunk's first sample and the lane.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn unit_layers<const U: usize, F: Fetch>(fetch: &F, row: F::Row, tb: *const F4, n_layers: u32, fm: u32, dm: u32, z0: u32,
    lane: u32, wj: f32, g: usize, c: &Ctx, acc: &mut [f32; 48]) {
    let mut pair = F4([0.0; 4]);
    unroll!(8, |const LH| {
        let l = U * 8 + LH;
        if (l as u32) < n_layers {
            if LH % 2 == 0 {
                pair = unsafe { *tb.add((LH >> 1) * 4 + g) };
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
    });
}

/// One trace's contributions to a column chunk (static8 traveltimes).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn static8_trace<M: Model, F: Fetch>(p: &KParams, col: &Column, fetch: &F, tbl: *mut F4, n_units: u32, last_full: bool,
    kmax: u32, xiv2: f32, xeta: f32, iv2_8: *const f32, eta_8: *const f32, tr: u32, c: &Ctx, acc: &mut [f32; 48]) {
    unsafe {
            let row = fetch.row(tr);
            let lane = lane_fresh();
            let z0 = opaque_u32(col.z0);
            let wj = (lane & 7) as f32;
            let g = (lane >> 3) as usize;
            // Exact positions of the grid points (independent: good instruction-level parallelism).
            // (Coefficients re-read per trace from L1: held across the loop they cost 6-12 registers.)
            let mut pts = [0.0f32; 6];
            unroll!(6, |const U| {
                if (U as u32) < n_units {
                    let k = z0 / STEP + 32 * U as u32 + lane;
                    let k = if k < kmax { k } else { kmax };
                    let v2 = coef(iv2_8, col.col, p.coef8_stride, k);
                    let e = if M::NEEDS_ETA { coef(eta_8, col.col, p.coef8_stride, k) } else { 0.0 };
                    pts[U] = exact_pos::<M>(z0 + UNIT * U as u32 + STEP * lane, c, v2, e);
                }
            });
            let extra = if last_full { exact_pos::<M>(z0 + UNIT * n_units, c, xiv2, xeta) } else { 0.0 };
            unroll!(6, |const U| {
                if (U as u32) < n_units {
                    let stg = fetch.stage_load(U as u32);
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
                        unit_batched::<U, F>(fetch, row, tbl, wj, g, acc);
                        continue_unit = false;
                    }
                    if continue_unit {
                        unit_layers::<U, F>(fetch, row, tbl, col.n_layers, fm, dm, z0, lane, wj, g, c, acc);
                    }
                    fetch.stage_store(U as u32, stg);
                }
            });    }
}

#[inline(always)]
pub(super) unsafe fn static8<M: Model, F: Fetch>(p: &KParams, fetch: F, headers: *const f32, bin_start: *const u32,
    iv2_8: *const f32, eta_8: *const f32, image: *mut f32, first: u32) {
    let Some(col) = column(p, p.lockstep != 0) else { return };
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
pub(super) unsafe fn dynamic_trace<M: Model, F: Fetch>(p: &KParams, col: &Column, fetch: &F, tbl: *mut F4, iv2: *const f32, eta: *const f32,
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
            let z0 = opaque_u32(col.z0);
            let jf = lane as f32;
            let g = (lane >> 3) as usize;
            let mut carry = eval(z0, c);
            let mut fm = [0u32; 2];
            let mut dm = [0u32; 2];
            sync_warp();
            unroll!(2, |const R| {
                if ((32 * R) as u32) < col.n_layers {
                    let seg = 32 * R as u32 + lane;
                    let valid = seg < col.n_layers;
                    let zs = z0 + 32 * seg;
                    let s32 = eval(zs + 32, c);
                    let up = shfl_up1_f32(s32);
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
            unroll!(6, |const U| {
                if ((8 * U) as u32) < col.n_layers {
                    let stg = fetch.stage_load(U as u32);
                    unroll!(8, |const LH| {
                        let l = 8 * U + LH;
                        if (l as u32) < col.n_layers && (dm[l / 32] >> (l % 32)) & 1 == 0 {
                            let e = *tbl.add(4 * l + g);
                            let mut s = interp(jf - e.0[2], e.0[1], e.0[0]);
                            if (fm[l / 32] >> (l % 32)) & 1 == 0 {
                                s = step_sample(e.0[3] as u32, s, z0 + 32 * l as u32 + lane, c);
                            }
                            acc[l] += contrib(fetch, row, s);
                        }
                    });
                    fetch.stage_store(U as u32, stg);
                }
            });    }
}

#[inline(always)]
pub(super) unsafe fn dynamic<M: Model, F: Fetch>(p: &KParams, fetch: F, headers: *const f32, bin_start: *const u32,
    iv2: *const f32, eta: *const f32, image: *mut f32, first: u32) {
    let Some(col) = column(p, p.lockstep != 0) else { return };
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
