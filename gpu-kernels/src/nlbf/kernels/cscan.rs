//! The C scan (phase 3 of the 2+2+1 search): for every (A, D) / (B, E) pick, the best C, with the
//! batch's traces staged in shared memory (`stage_rows`, or `stage_rows_deep` with more loads in flight).

use super::device_code::*;
use crate::device::*;
use crate::nlbf::*;

/// Column steps (of 32 samples) per round of [`stage_rows_deep`]: loads in flight per row and
/// lane (4: the G3 kernel fits 80 registers without spills; 8 took 100).
const DEEP_UNROLL: usize = 4;

/// The C scan's staging of one batch with more global loads in flight: the geometry loads go
/// out first, then a warp takes two rows at once (r and r + warps) and issues DEEP_UNROLL
/// column steps of both (8 loads per lane) before their stores. `stage_rows` waits on each
/// row's trace number and then on every four column steps of one row (LLVM's unroll), one row
/// after the other: about a dozen dependent global latencies per batch at the cross-spread's
/// 392 staged samples per row (G3: 8 warps, 2 rows each), this five (trace numbers, four
/// rounds). Same values in the same places as `stage_rows`: results bit-identical.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn stage_rows_deep(rows: *mut f32, geom: *mut f32, span: u32, first_time: i32, r0: u32, nrows: u32,
    list: *const u32, data: *const f32, ns: u32, tx: *const f32, ty: *const f32, x0: f32, y0: f32) {
    let tid = thread_idx_x();
    let (warp, lane, nwarps) = (tid / 32, tid % 32, block_dim_x() / 32);
    let (mut gx, mut gy) = (0.0f32, 0.0f32);
    if tid < nrows {
        let tr = unsafe { *list.add((r0 + tid) as usize) };
        (gx, gy) = unsafe { (*tx.add(tr as usize), *ty.add(tr as usize)) };
    }
    let t_lane = first_time + lane as i32;
    let mut ra = warp;
    while ra < nrows {
        let rb = ra + nwarps;
        let has_b = rb < nrows;
        let tra = unsafe { *list.add((r0 + ra) as usize) };
        let trb = if has_b { unsafe { *list.add((r0 + rb) as usize) } } else { tra };
        // Lane's sample of column step 0 (only dereferenced where the time is inside the record).
        let pa = data.wrapping_add(tra as usize * ns as usize).wrapping_offset(t_lane as isize);
        let pb = data.wrapping_add(trb as usize * ns as usize).wrapping_offset(t_lane as isize);
        let da = unsafe { rows.add((ra * span + lane) as usize) };
        let db = rows.wrapping_add((rb * span + lane) as usize);
        let mut c0 = 0u32;
        while c0 < span {
            let mut va = [0.0f32; DEEP_UNROLL];
            let mut vb = [0.0f32; DEEP_UNROLL];
            unroll!(DEEP_UNROLL, |j| {
                let off = c0 + 32 * j as u32;
                let t = t_lane + off as i32;
                // (t as u32) < ns also rejects t < 0.
                let ok = (lane + off < span) & ((t as u32) < ns);
                if ok {
                    va[j] = unsafe { ldg_f32(pa.wrapping_add(off as usize)) };
                }
                if ok & has_b {
                    vb[j] = unsafe { ldg_f32(pb.wrapping_add(off as usize)) };
                }
            });
            unroll!(DEEP_UNROLL, |j| {
                let off = c0 + 32 * j as u32;
                if lane + off < span {
                    unsafe { *da.add(off as usize) = va[j] };
                    if has_b {
                        unsafe { *db.add(off as usize) = vb[j] };
                    }
                }
            });
            c0 += 32 * DEEP_UNROLL as u32;
        }
        ra += 2 * nwarps;
    }
    if tid < nrows {
        unsafe {
            *geom.add(2 * tid as usize) = gx - x0;
            *geom.add(2 * tid as usize + 1) = gy - y0;
        }
    }
}

/// C scan: thread (tt, g) evaluates the C values c0 .. c0 + G of group g at t0 = t_start + tt over
/// every trace of aperture 3 (staged in batches). The host picks G so that the group's shifts of
/// one trace span less than one sample; the group then shares one staged window w of N + 2
/// samples from floor(min shift), and each C reads it at fractional position j + g, g in [0, 2):
/// v_j = w_j + g d_j for g <= 1 (exactly `lerp`), and w_{j+1} + (g - 1) d_{j+1} beyond, written
/// branch-free as v_j = w_j + (g - h) d_j + h d_{j+1} with h = max(g - 1, 0) (d = first
/// differences, shared by the group).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn cscan_body<const H: usize, const G: usize, const DEEP: bool>(ns: u32, np: u32, nchunks: u32, inv_dt: f32, smax: i32,
    span: u32, data: *const f32, tx: *const f32, ty: *const f32, px: *const f32, py: *const f32, ap_off: *const u32,
    ap_idx: *const u32, vals: *const f32, na: u32, nb: u32, nc: u32, nd: u32, ne: u32, picks: *const u32,
    out_code: *mut u32, out_s: *mut f32) {
    const T3: u32 = CSCAN_TIMES;
    const BATCH: u32 = CSCAN_BATCH;
    let n = 2 * H + 1;
    // Divisors are >= 1 by construction (host); `max(1)` proves it to LLVM, so the kernel has no
    // division-by-zero panic path (no calls: it can be JIT-compiled alone with a register cap).
    let p = block_idx_x() / nchunks.max(1);
    let chunk = block_idx_x() % nchunks.max(1);
    let t_start = chunk * T3;
    let first_time = t_start as i32 - H as i32 - smax;
    let tid = thread_idx_x();
    let (g, tt) = (tid / T3, tid % T3);
    let t0 = t_start + tt;
    let active = t0 < ns;
    let ngroups = block_dim_x() / T3;
    let (lo, hi) = unsafe { (*ap_off.add(p as usize), *ap_off.add(p as usize + 1)) };
    let m = hi - lo;

    let (ad, be) = if active {
        unsafe { (*picks.add((p * ns + t0) as usize), *picks.add(((np + p) * ns + t0) as usize)) }
    } else {
        (0, 0)
    };
    let (nd1, ne1) = (nd.max(1), ne.max(1));
    let (a, b, d, e) = unsafe {
        (*vals.add((ad / nd1) as usize), *vals.add((na + be / ne1) as usize),
            *vals.add((na + nb + nc + ad % nd1) as usize), *vals.add((na + nb + nc + nd + be % ne1) as usize))
    };
    let c0 = g * G as u32;
    let mut cv = [0.0f32; G];
    unroll!(G, |c| {
        let ci = if c0 + (c as u32) < nc { c0 + c as u32 } else { nc - 1 };
        cv[c] = unsafe { *vals.add((na + nb + ci) as usize) };
    });

    let mut carver = SharedCarver::new();
    let rows = carver.take::<f32>((BATCH * span) as usize);
    let geom = carver.take::<f32>(2 * BATCH as usize);
    let (x0, y0) = unsafe { (*px.add(p as usize), *py.add(p as usize)) };
    let mut s = [[0.0f32; 33]; G];
    let mut en = [0.0f32; G];

    let mut r0 = 0u32;
    while r0 < m {
        let nrows = if m - r0 < BATCH { m - r0 } else { BATCH };
        sync_threads();
        if DEEP {
            unsafe { stage_rows_deep(rows, geom, span, first_time, lo + r0, nrows, ap_idx, data, ns, tx, ty, x0, y0) };
        } else {
            unsafe { stage_rows(rows, geom, span, first_time, lo + r0, nrows, ap_idx, data, ns, tx, ty, x0, y0) };
        }
        sync_threads();
        let mut r = 0u32;
        while r < nrows {
            let (dx, dy) = unsafe { (*geom.add(2 * r as usize), *geom.add(2 * r as usize + 1)) };
            // moveout(a, b, c, d, e, dx, dy) with the C-independent part hoisted (same bits).
            let along_y = dy * crate::math::mul_add(e, dy, b);
            let mut sig = [0.0f32; G];
            let mut lo_sig = f32::INFINITY;
            unroll!(G, |c| {
                let along_x = crate::math::mul_add(d, dx, crate::math::mul_add(cv[c], dy, a));
                sig[c] = crate::math::mul_add(dx, along_x, along_y) * inv_dt;
                lo_sig = if sig[c] < lo_sig { sig[c] } else { lo_sig };
            });
            let (kmin, _) = split_shift(lo_sig);
            let kf = kmin as f32;
            // Window samples q = tt + jj + k + smax for jj in 0..=2H, plus two for g < 2.
            let base = unsafe { rows.add((r * span) as usize + tt as usize).offset((kmin + smax) as isize) };
            let mut w = [0.0f32; 34];
            unroll!(n + 2, |q| {
                w[q] = unsafe { *base.add(q) };
            });
            let mut dw = [0.0f32; 34];
            unroll!(n + 1, |q| {
                dw[q] = w[q + 1] - w[q];
            });
            unroll!(G, |c| {
                let gf = sig[c] - kf;
                let h = if gf > 1.0 { gf - 1.0 } else { 0.0 };
                let gh = gf - h;
                unroll!(n, |jj| {
                    let v = crate::math::mul_add(h, dw[jj + 1], crate::math::mul_add(gh, dw[jj], w[jj]));
                    s[c][jj] += v;
                    en[c] = add_sq(en[c], v);
                });
            });
            r += 1;
        }
        r0 += BATCH;
    }

    let (mut bs, mut bi) = (-1.0f32, u32::MAX);
    unroll!(G, |c| {
        let ci = c0 + c as u32;
        let mut num = 0.0f32;
        unroll!(n, |jj| {
            num = add_sq(num, s[c][jj]);
        });
        let sv = semblance(num, en[c], m);
        let take = (ci < nc) & better(sv, ci, bs, bi);
        bs = if take { sv } else { bs };
        bi = if take { ci } else { bi };
    });
    sync_threads();
    let red_s = rows;
    let red_i = unsafe { rows.add((ngroups * T3) as usize) } as *mut u32;
    unsafe {
        *red_s.add((g * T3 + tt) as usize) = bs;
        *red_i.add((g * T3 + tt) as usize) = bi;
    }
    sync_threads();
    if g == 0 && active {
        for gg in 1..ngroups {
            let (sv, iv) = unsafe { (*red_s.add((gg * T3 + tt) as usize), *red_i.add((gg * T3 + tt) as usize)) };
            if better(sv, iv, bs, bi) {
                bs = sv;
                bi = iv;
            }
        }
        let o = (p * ns + t0) as usize;
        unsafe {
            *out_code.add(o) = pack_code(ad, be, bi, nb * ne, nc);
            *out_s.add(o) = bs;
        }
    }
}

macro_rules! cscan_entry {
    ($name:ident as $desc:ident, $h:expr, $g:expr) => { cscan_entry!($name as $desc, $h, $g, false); };
    ($name:ident as $desc:ident, $h:expr, $g:expr, $deep:expr) => { crate::kernel! {
        /// C scan (phase 3); see `cscan_body`.
        #[allow(clippy::too_many_arguments)]
        pub unsafe fn $name(ns: u32, np: u32, nchunks: u32, inv_dt: f32, smax: i32, span: u32,
            data: *const f32, tx: *const f32, ty: *const f32, px: *const f32, py: *const f32, ap_off: *const u32,
            ap_idx: *const u32, vals: *const f32, na: u32, nb: u32, nc: u32, nd: u32, ne: u32, picks: *const u32,
            out_code: *mut u32, out_s: *mut f32) as $desc {
            unsafe {
                cscan_body::<$h, $g, $deep>(ns, np, nchunks, inv_dt, smax, span, data, tx, ty, px, py, ap_off, ap_idx, vals,
                    na, nb, nc, nd, ne, picks, out_code, out_s)
            }
        }
    } };
}
cscan_entry!(nlbf_cscan_h1_g1 as NLBF_CSCAN_H1_G1, 1, 1);
cscan_entry!(nlbf_cscan_h1_g2 as NLBF_CSCAN_H1_G2, 1, 2);
cscan_entry!(nlbf_cscan_h1_g4 as NLBF_CSCAN_H1_G4, 1, 4);
cscan_entry!(nlbf_cscan_h2_g1 as NLBF_CSCAN_H2_G1, 2, 1);
cscan_entry!(nlbf_cscan_h2_g2 as NLBF_CSCAN_H2_G2, 2, 2);
cscan_entry!(nlbf_cscan_h2_g4 as NLBF_CSCAN_H2_G4, 2, 4);
cscan_entry!(nlbf_cscan_h3_g1 as NLBF_CSCAN_H3_G1, 3, 1);
cscan_entry!(nlbf_cscan_h3_g2 as NLBF_CSCAN_H3_G2, 3, 2);
cscan_entry!(nlbf_cscan_h3_g4 as NLBF_CSCAN_H3_G4, 3, 4);
cscan_entry!(nlbf_cscan_h4_g1 as NLBF_CSCAN_H4_G1, 4, 1);
cscan_entry!(nlbf_cscan_h4_g2 as NLBF_CSCAN_H4_G2, 4, 2);
cscan_entry!(nlbf_cscan_h4_g4 as NLBF_CSCAN_H4_G4, 4, 4);
cscan_entry!(nlbf_cscan_h5_g1 as NLBF_CSCAN_H5_G1, 5, 1);
cscan_entry!(nlbf_cscan_h5_g2 as NLBF_CSCAN_H5_G2, 5, 2);
cscan_entry!(nlbf_cscan_h5_g3 as NLBF_CSCAN_H5_G3, 5, 3);
cscan_entry!(nlbf_cscan_h5_g4 as NLBF_CSCAN_H5_G4, 5, 4);
// Deep staging (`stage_rows_deep`), H = 5: tuning variants timed against the above.
cscan_entry!(nlbf_cscan_h5_g2_deep as NLBF_CSCAN_H5_G2_DEEP, 5, 2, true);
cscan_entry!(nlbf_cscan_h5_g3_deep as NLBF_CSCAN_H5_G3_DEEP, 5, 3, true);
cscan_entry!(nlbf_cscan_h5_g4_deep as NLBF_CSCAN_H5_G4_DEEP, 5, 4, true);
cscan_entry!(nlbf_cscan_h6_g1 as NLBF_CSCAN_H6_G1, 6, 1);
cscan_entry!(nlbf_cscan_h6_g2 as NLBF_CSCAN_H6_G2, 6, 2);
cscan_entry!(nlbf_cscan_h6_g4 as NLBF_CSCAN_H6_G4, 6, 4);
cscan_entry!(nlbf_cscan_h7_g1 as NLBF_CSCAN_H7_G1, 7, 1);
cscan_entry!(nlbf_cscan_h7_g2 as NLBF_CSCAN_H7_G2, 7, 2);
cscan_entry!(nlbf_cscan_h7_g4 as NLBF_CSCAN_H7_G4, 7, 4);
cscan_entry!(nlbf_cscan_h8_g1 as NLBF_CSCAN_H8_G1, 8, 1);
cscan_entry!(nlbf_cscan_h8_g2 as NLBF_CSCAN_H8_G2, 8, 2);
cscan_entry!(nlbf_cscan_h8_g4 as NLBF_CSCAN_H8_G4, 8, 4);
