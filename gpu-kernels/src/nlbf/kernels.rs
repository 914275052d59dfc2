//! NLBF kernels.
//!
//! - `nlbf_paper`: the paper's design (Tables 2-4): one launch per parameter trace on a pool
//!   stream, grid = Nt (one block per time sample), one thread per parameter combination with a
//!   stride loop, thread 0 scanning the block for the arg-max, the three phases in one kernel, the
//!   aperture traces collected on the host.
//! - `nlbf_slide_l{L}_h{H}`: the (A, D) and (B, E) scans of every parameter trace in one launch
//!   (grid.y = phase), with the whole gather resident on the device and the apertures as index
//!   lists. The moveout of a trace does not depend on t0, so the shifted sample u_i(t + dt_i) of a
//!   combination is computed once per time t and shared by the 2H + 1 windows that contain t:
//!   per combination the kernel forms the stack s(t) and energy e(t) along t and slides the window
//!   sums over them (about N = 2H + 1 times less work than eq. 2 evaluated per t0). A warp owns one
//!   combination at a time; each lane owns L consecutive times (L odd, so the lanes' shared-memory
//!   reads fall in distinct banks), keeps its best (S, index) per time in registers, and the
//!   warps of a block merge their bests at the end.
//! - `nlbf_cscan_h{H}`: the C scan (phase 3) of every parameter trace, one thread per output time
//!   and group of CSCAN_GROUP C values; the group shares one staged window per trace.
//! - `nlbf_enhance`: the beamforming stack of every trace along its interpolated operator.
//! - `nlbf_nmo`: NMO correction with a stretch mute.
//!
//! All of them use the math of `super` (moveout, split, interpolation, semblance, tie rule).

// On the host only the entry points' descriptors are used: the kernels' helpers compile there
// (the device layer has host bodies) but nothing calls them, and clippy sees them only there.
#![cfg_attr(not(target_arch = "nvptx64"), allow(dead_code, unused_imports, unused_variables, unused_assignments,
    clippy::too_many_arguments, clippy::manual_is_multiple_of))]

mod cscan;
// The entry points' descriptors (`NLBF_PAPER`, `NLBF_SLIDE_L9_H5`, `NLBF_CSCAN_H5_G4`, ...).
pub use cscan::*;
pub use device_code::*;

use crate::device::Kernel;

/// The descriptor type of the sliding (A, D) / (B, E) kernels (one signature for every run, half
/// window and group; [`super::slide_kernel_g`] picks one).
pub type SlideKernel = Kernel<(u32, u32, u32, f32, i32, u32, u32, *const f32, *const f32, *const f32, *const f32, *const f32,
    *const u32, *const u32, *const f32, u32, u32, u32, u32, u32, *mut u32, *mut f32)>;
/// The descriptor type of the C-scan kernels (one signature for every half window, group and
/// staging; [`super::cscan_kernel`] picks one).
pub type CscanKernel = Kernel<(u32, u32, u32, f32, i32, u32, *const f32, *const f32, *const f32, *const f32, *const f32,
    *const u32, *const u32, *const f32, u32, u32, u32, u32, u32, *const u32, *mut u32, *mut f32)>;

mod device_code {
    use crate::device::*;
    use crate::nlbf::*;

    // ---------------------------------------------------------------------------------------------
    // Paper-faithful kernel (Tables 3 and 4).
    // ---------------------------------------------------------------------------------------------

    /// Equation (2) for one operator at t0 on `m` collected traces (rows of `ns` samples, with
    /// their (dx, dy) in `geom`), evaluated directly as the paper does: per window sample, per trace.
    #[inline(always)]
    pub(super) unsafe fn eval_direct(op: (f32, f32, f32, f32, f32), t0: i32, h: i32, rows: *const f32, geom: *const f32, m: u32,
        ns: u32, inv_dt: f32) -> f32 {
        let (a, b, c, d, e) = op;
        let mut num = 0.0f32;
        let mut den = 0.0f32;
        let mut j = -h;
        while j <= h {
            let t = (t0 + j) as i64;
            let mut s = 0.0f32;
            let mut en = 0.0f32;
            let mut i = 0u32;
            while i < m {
                unsafe {
                    let dx = *geom.add(2 * i as usize);
                    let dy = *geom.add(2 * i as usize + 1);
                    let (k, f) = split_shift(shift_samples(a, b, c, d, e, dx, dy, inv_dt));
                    let row = rows.add(i as usize * ns as usize);
                    let idx = t + k as i64;
                    let u0 = if idx >= 0 && idx < ns as i64 { *row.add(idx as usize) } else { 0.0 };
                    let u1 = if idx + 1 >= 0 && idx + 1 < ns as i64 { *row.add(idx as usize + 1) } else { 0.0 };
                    let v = lerp(u0, u1, f);
                    s += v;
                    en = add_sq(en, v);
                }
                i += 1;
            }
            num = add_sq(num, s);
            den += en;
            j += 1;
        }
        semblance(num, den, m)
    }

    /// Block-level arg-max the paper's way: every thread leaves its best in shared memory and
    /// thread 0 scans them (Table 4 lines 19-21); the winner is broadcast through `slot`.
    #[inline(always)]
    pub(super) unsafe fn paper_argmax(sem: *mut f32, idx: *mut u32, slot: *mut u32, best_s: f32, best_i: u32) -> (f32, u32) {
        let tid = thread_idx_x();
        unsafe {
            *sem.add(tid as usize) = best_s;
            *idx.add(tid as usize) = best_i;
        }
        sync_threads();
        if tid == 0 {
            let (mut bs, mut bi) = (-1.0f32, u32::MAX);
            for t in 0..block_dim_x() {
                let (s, i) = unsafe { (*sem.add(t as usize), *idx.add(t as usize)) };
                if better(s, i, bs, bi) {
                    bs = s;
                    bi = i;
                }
            }
            unsafe {
                *slot = bi;
                *(slot.add(1) as *mut f32) = bs;
            }
        }
        sync_threads();
        let r = unsafe { (*(slot.add(1) as *const f32), *slot) };
        sync_threads();
        r
    }

    crate::kernel! {
    /// One parameter trace, all time samples: block = t0, threads = combinations (stride loop).
    /// `rows`/`geom`: the traces of apertures 1, 2 and 3 (m1, m2, m3 rows) collected by the host.
    /// `vals`: the A, B, C, D, E value tables back to back (na, nb, nc, nd, ne entries).
    /// Writes the packed pick and S of (p, t0) at `p * ns + t0`.
    pub unsafe fn nlbf_paper(ns: u32, h: u32, inv_dt: f32, rows: *const f32, geom: *const f32,
        m1: u32, m2: u32, m3: u32, vals: *const f32, na: u32, nb: u32, nc: u32, nd: u32, ne: u32, p: u32,
        out_code: *mut u32, out_s: *mut f32) as NLBF_PAPER {
        let t0 = block_idx_x();
        if t0 >= ns {
            return;
        }
        let tid = thread_idx_x();
        let bd = block_dim_x();
        let mut carver = SharedCarver::new();
        let sem = carver.take::<f32>(bd as usize);
        let idx = carver.take::<u32>(bd as usize);
        let slot = carver.take::<u32>(2);
        let (va, vb, vc) = (vals, unsafe { vals.add(na as usize) }, unsafe { vals.add((na + nb) as usize) });
        let vd = unsafe { vals.add((na + nb + nc) as usize) };
        let ve = unsafe { vals.add((na + nb + nc + nd) as usize) };
        let (h, t0i) = (h as i32, t0 as i32);

        // Phase 1: B = C = E = 0, scan (A, D) on aperture 1.
        let (mut bs, mut bi) = (-1.0f32, u32::MAX);
        let mut c = tid;
        while c < na * nd {
            let (a, d) = unsafe { (*va.add((c / nd) as usize), *vd.add((c % nd) as usize)) };
            let s = unsafe { eval_direct((a, 0.0, 0.0, d, 0.0), t0i, h, rows, geom, m1, ns, inv_dt) };
            if better(s, c, bs, bi) {
                bs = s;
                bi = c;
            }
            c += bd;
        }
        let (_, ad) = unsafe { paper_argmax(sem, idx, slot, bs, bi) };
        let (a, d) = unsafe { (*va.add((ad / nd) as usize), *vd.add((ad % nd) as usize)) };

        // Phase 2: A = C = D = 0, scan (B, E) on aperture 2.
        let rows2 = unsafe { rows.add((m1 * ns) as usize) };
        let geom2 = unsafe { geom.add(2 * m1 as usize) };
        let (mut bs, mut bi) = (-1.0f32, u32::MAX);
        let mut c = tid;
        while c < nb * ne {
            let (b, e) = unsafe { (*vb.add((c / ne) as usize), *ve.add((c % ne) as usize)) };
            let s = unsafe { eval_direct((0.0, b, 0.0, 0.0, e), t0i, h, rows2, geom2, m2, ns, inv_dt) };
            if better(s, c, bs, bi) {
                bs = s;
                bi = c;
            }
            c += bd;
        }
        let (_, be) = unsafe { paper_argmax(sem, idx, slot, bs, bi) };
        let (b, e) = unsafe { (*vb.add((be / ne) as usize), *ve.add((be % ne) as usize)) };

        // Phase 3: A, B, D, E fixed, scan C on aperture 3; its best S is the output S.
        let rows3 = unsafe { rows.add(((m1 + m2) * ns) as usize) };
        let geom3 = unsafe { geom.add(2 * (m1 + m2) as usize) };
        let (mut bs, mut bi) = (-1.0f32, u32::MAX);
        let mut c = tid;
        while c < nc {
            let cv = unsafe { *vc.add(c as usize) };
            let s = unsafe { eval_direct((a, b, cv, d, e), t0i, h, rows3, geom3, m3, ns, inv_dt) };
            if better(s, c, bs, bi) {
                bs = s;
                bi = c;
            }
            c += bd;
        }
        let (s, cbest) = unsafe { paper_argmax(sem, idx, slot, bs, bi) };
        if tid == 0 {
            let o = (p * ns + t0) as usize;
            unsafe {
                *out_code.add(o) = pack_code(ad, be, cbest, nb * ne, nc);
                *out_s.add(o) = s;
            }
        }
    }
    }

    // ---------------------------------------------------------------------------------------------
    // Sliding (A, D) / (B, E) kernel.
    // ---------------------------------------------------------------------------------------------

    /// Stages the aperture rows of one parameter trace (times `first_time ..`, zero outside the
    /// record) and their (dx, dy): warps take rows, lanes take consecutive times (coalesced).
    #[inline(always)]
    pub(super) unsafe fn stage_rows(rows: *mut f32, geom: *mut f32, span: u32, first_time: i32, r0: u32, nrows: u32,
        list: *const u32, data: *const f32, ns: u32, tx: *const f32, ty: *const f32, x0: f32, y0: f32) {
        let tid = thread_idx_x();
        let (warp, lane, nwarps) = (tid / 32, tid % 32, block_dim_x() / 32);
        let mut r = warp;
        while r < nrows {
            let tr = unsafe { *list.add((r0 + r) as usize) };
            let src = unsafe { data.add(tr as usize * ns as usize) };
            let dst = unsafe { rows.add((r * span) as usize) };
            let mut col = lane;
            while col < span {
                let t = first_time + col as i32;
                let v = if t >= 0 && (t as u32) < ns { unsafe { ldg_f32(src.add(t as usize)) } } else { 0.0 };
                unsafe { *dst.add(col as usize) = v };
                col += 32;
            }
            r += nwarps;
        }
        let mut r = tid;
        while r < nrows {
            unsafe {
                let tr = *list.add((r0 + r) as usize);
                *geom.add(2 * r as usize) = *tx.add(tr as usize) - x0;
                *geom.add(2 * r as usize + 1) = *ty.add(tr as usize) - y0;
            }
            r += block_dim_x();
        }
    }

    /// Two consecutive samples as one 8-byte access (`ptr` 8-byte aligned).
    #[inline(always)]
    pub(super) unsafe fn load_pair(ptr: *const f32) -> (f32, f32) {
        let v = unsafe { *(ptr as *const u64) };
        (f32::from_bits(v as u32), f32::from_bits((v >> 32) as u32))
    }

    /// Adds one trace's interpolated samples at this lane's L times to the stack `s` and energy
    /// `en`: samples `lane_base[off ..= off + L]`, fraction `f`. `off` is warp-uniform up to the
    /// lane's multiple of L; with L even every lane has the same parity, so the L + 1 samples are
    /// read as L / 2 aligned pairs plus one single (half the load instructions; lanes L words apart
    /// with L / 2 odd hit distinct bank pairs).
    #[inline(always)]
    #[allow(unused_assignments)]
    pub(super) unsafe fn accumulate_row<const L: usize>(lane_base: *const f32, off: i32, f: f32, s: &mut [f32; L], en: &mut [f32; L]) {
        let ptr = unsafe { lane_base.offset(off as isize) };
        let mut x = [0.0f32; 66];
        if L % 2 == 0 {
            if off & 1 == 0 {
                unroll!(L / 2, |q| {
                    (x[2 * q], x[2 * q + 1]) = unsafe { load_pair(ptr.add(2 * q)) };
                });
                x[L] = unsafe { *ptr.add(L) };
            } else {
                x[0] = unsafe { *ptr };
                unroll!(L / 2, |q| {
                    (x[1 + 2 * q], x[2 + 2 * q]) = unsafe { load_pair(ptr.add(1 + 2 * q)) };
                });
            }
        } else {
            unroll!(L + 1, |q| {
                x[q] = unsafe { *ptr.add(q) };
            });
        }
        unroll!(L, |mm| {
            let v = lerp(x[mm], x[mm + 1], f);
            s[mm] += v;
            en[mm] = add_sq(en[mm], v);
        });
    }

    /// Window sums y[m] = sum_{j=0}^{2H} x[m + j] for m in 0..L over `x` (L + 2H values), by
    /// block suffix/prefix sums (van Herk / Gil-Werman for sums): only additions of non-negative
    /// values, no running subtraction (which would lose quiet windows after loud ones).
    #[inline(always)]
    pub(super) fn window_sums<const L: usize, const H: usize>(x: &[f32; 33]) -> [f32; 33] {
        let w = 2 * H + 1;
        let n = L + 2 * H;
        let mut suf = [0.0f32; 33];
        let mut pre = [0.0f32; 33];
        // Suffix sums inside each block of w (from the block's end back), prefix sums forward.
        unroll!(n, |k| {
            let q = n - 1 - k;
            suf[q] = if (q + 1) % w == 0 || q + 1 == n { x[q] } else { x[q] + suf[(q + 1) & 31] };
        });
        unroll!(n, |q| {
            pre[q] = if q % w == 0 { x[q] } else { pre[q.wrapping_sub(1) & 31] + x[q] };
        });
        let mut y = [0.0f32; 33];
        unroll!(L, |m| {
            y[m] = if m % w == 0 { suf[m] } else { suf[m] + pre[(m + w - 1) & 31] };
        });
        y
    }

    #[inline(always)]
    #[allow(clippy::too_many_arguments, unused_assignments)]
    pub(super) unsafe fn slide_body<const L: usize, const H: usize>(ns: u32, np: u32, nchunks: u32, inv_dt: f32, smax: i32,
        span: u32, mmax: u32, data: *const f32, tx: *const f32, ty: *const f32, px: *const f32, py: *const f32,
        ap_off: *const u32, ap_idx: *const u32, vals: *const f32, na: u32, nb: u32, nc: u32, nd: u32, ne: u32,
        out_pick: *mut u32, out_s: *mut f32) {
        let phase = block_idx_y();
        let p = block_idx_x() / nchunks;
        let chunk = block_idx_x() % nchunks;
        let t_out = (32 * L - 2 * H) as u32;
        let t_start = chunk * t_out;
        let first_time = t_start as i32 - H as i32 - smax;
        let (lo, hi) = unsafe {
            let o = ap_off.add((phase * (np + 1) + p) as usize);
            (*o, *o.add(1))
        };
        let m = hi - lo;
        let mut carver = SharedCarver::new();
        let rows = carver.take::<f32>((mmax * span) as usize);
        let geom = carver.take::<f32>(2 * mmax as usize);
        let (x0, y0) = unsafe { (*px.add(p as usize), *py.add(p as usize)) };
        unsafe { stage_rows(rows, geom, span, first_time, lo, m, ap_idx, data, ns, tx, ty, x0, y0) };
        sync_threads();

        let tid = thread_idx_x();
        let (warp, lane, nwarps) = (tid / 32, tid % 32, block_dim_x() / 32);
        let (pv, npv, qv, nqv) = unsafe {
            if phase == 0 {
                (vals, na, vals.add((na + nb + nc) as usize), nd)
            } else {
                (vals.add(na as usize), nb, vals.add((na + nb + nc + nd) as usize), ne)
            }
        };
        let ncomb = npv * nqv;
        let mut best_s = [-1.0f32; L];
        let mut best_i = [u32::MAX; L];
        let lane_base = unsafe { rows.add(lane as usize * L) } as *const f32;

        let mut combo = warp;
        while combo < ncomb {
            let ip = combo / nqv;
            let iq = combo - ip * nqv;
            let (pa, qa) = unsafe { (*pv.add(ip as usize), *qv.add(iq as usize)) };
            let (a, b, d, e) = if phase == 0 { (pa, 0.0, qa, 0.0) } else { (0.0, pa, 0.0, qa) };
            let mut s = [0.0f32; L];
            let mut en = [0.0f32; L];
            let mut rbase = 0u32;
            while rbase < m {
                // Each lane splits the shift of one row; the warp then walks the rows together.
                let r = rbase + lane;
                let (mut kl, mut fl) = (0i32, 0.0f32);
                if r < m {
                    let (dx, dy) = unsafe { (*geom.add(2 * r as usize), *geom.add(2 * r as usize + 1)) };
                    (kl, fl) = split_shift(shift_samples(a, b, 0.0, d, e, dx, dy, inv_dt));
                }
                let cnt = if m - rbase < 32 { m - rbase } else { 32 };
                let mut rr = 0u32;
                // Two rows per iteration (halves the loop and broadcast overhead per row).
                while rr + 1 < cnt {
                    let (k0, f0) = (shfl_idx_u32(kl as u32, rr) as i32, shfl_idx_f32(fl, rr));
                    let (k1, f1) = (shfl_idx_u32(kl as u32, rr + 1) as i32, shfl_idx_f32(fl, rr + 1));
                    let row = ((rbase + rr) * span) as i32 + smax;
                    unsafe {
                        accumulate_row::<L>(lane_base, row + k0, f0, &mut s, &mut en);
                        accumulate_row::<L>(lane_base, row + span as i32 + k1, f1, &mut s, &mut en);
                    }
                    rr += 2;
                }
                if rr < cnt {
                    let (k0, f0) = (shfl_idx_u32(kl as u32, rr) as i32, shfl_idx_f32(fl, rr));
                    let row = ((rbase + rr) * span) as i32 + smax;
                    unsafe { accumulate_row::<L>(lane_base, row + k0, f0, &mut s, &mut en) };
                }
                rbase += 32;
            }
            // Window sums over 2H + 1 consecutive times: own L values plus H from each neighbour lane.
            let mut xq = [0.0f32; 33];
            let mut xe = [0.0f32; 33];
            let left = lane.wrapping_sub(1) & 31;
            unroll!(H, |j| {
                xq[j] = shfl_idx_f32(s[L - H + j] * s[L - H + j], left);
                xe[j] = shfl_idx_f32(en[L - H + j], left);
                xq[(H + L + j) & 31] = shfl_down_f32(s[j] * s[j], 1);
                xe[(H + L + j) & 31] = shfl_down_f32(en[j], 1);
            });
            unroll!(L, |mm| {
                xq[H + mm] = s[mm] * s[mm];
                xe[H + mm] = en[mm];
            });
            let num = window_sums::<L, H>(&xq);
            let den = window_sums::<L, H>(&xe);
            unroll!(L, |mm| {
                // M is the same for every combination of this phase, so num/den ranks like S.
                let q = div_full(num[mm], den[mm]);
                let sv = if den[mm] > 0.0 { q } else { 0.0 };
                let take = better(sv, combo, best_s[mm], best_i[mm]);
                best_s[mm] = if take { sv } else { best_s[mm] };
                best_i[mm] = if take { combo } else { best_i[mm] };
            });
            combo += nwarps;
        }

        // Merge the warps' bests per output time (the staged rows are no longer needed).
        sync_threads();
        let red_s = rows;
        let red_i = unsafe { rows.add(nwarps as usize * 32 * L) } as *mut u32;
        unroll!(L, |mm| {
            let c = warp as usize * 32 * L + lane as usize * L + mm;
            unsafe {
                *red_s.add(c) = best_s[mm];
                *red_i.add(c) = best_i[mm];
            }
        });
        sync_threads();
        let mut o = tid;
        while o < t_out {
            let t0 = t_start + o;
            if t0 < ns {
                let c = (o + H as u32) as usize;
                let (mut bs, mut bi) = (-1.0f32, u32::MAX);
                for w in 0..nwarps as usize {
                    let (sv, iv) = unsafe { (*red_s.add(w * 32 * L + c), *red_i.add(w * 32 * L + c)) };
                    if better(sv, iv, bs, bi) {
                        bs = sv;
                        bi = iv;
                    }
                }
                let out = ((phase * np + p) * ns + t0) as usize;
                unsafe {
                    *out_pick.add(out) = bi;
                    *out_s.add(out) = bs / m as f32;
                }
            }
            o += block_dim_x();
        }
    }

    /// The sliding scan with G adjacent values of the second parameter (D or E) per pass: a lane
    /// loads one window of L + 2 samples per trace from floor(min shift) and evaluates the G
    /// combinations at fractional offsets g in [0, 2) (the host picks G so that their shifts of one
    /// trace span less than a sample), v = x_j + (g - h) d_j + h d_{j+1}, h = max(g - 1, 0): G times
    /// fewer shared-memory loads than `slide_body` and one FMA fewer per evaluation.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn slide_group_body<const L: usize, const H: usize, const G: usize>(ns: u32, np: u32, nchunks: u32,
        inv_dt: f32, smax: i32, span: u32, mmax: u32, data: *const f32, tx: *const f32, ty: *const f32, px: *const f32,
        py: *const f32, ap_off: *const u32, ap_idx: *const u32, vals: *const f32, na: u32, nb: u32, nc: u32, nd: u32,
        ne: u32, out_pick: *mut u32, out_s: *mut f32) {
        let phase = block_idx_y();
        let p = block_idx_x() / nchunks;
        let chunk = block_idx_x() % nchunks;
        let t_out = (32 * L - 2 * H) as u32;
        let t_start = chunk * t_out;
        let first_time = t_start as i32 - H as i32 - smax;
        let (lo, hi) = unsafe {
            let o = ap_off.add((phase * (np + 1) + p) as usize);
            (*o, *o.add(1))
        };
        let m = hi - lo;
        let mut carver = SharedCarver::new();
        let rows = carver.take::<f32>((mmax * span) as usize);
        let geom = carver.take::<f32>(2 * mmax as usize);
        let (x0, y0) = unsafe { (*px.add(p as usize), *py.add(p as usize)) };
        unsafe { stage_rows(rows, geom, span, first_time, lo, m, ap_idx, data, ns, tx, ty, x0, y0) };
        sync_threads();

        let tid = thread_idx_x();
        let (warp, lane, nwarps) = (tid / 32, tid % 32, block_dim_x() / 32);
        let (pv, npv, qv, nqv) = unsafe {
            if phase == 0 {
                (vals, na, vals.add((na + nb + nc) as usize), nd)
            } else {
                (vals.add(na as usize), nb, vals.add((na + nb + nc + nd) as usize), ne)
            }
        };
        let nqg = nqv.div_ceil(G as u32);
        let ngroups = npv * nqg;
        let mut best_s = [-1.0f32; L];
        let mut best_i = [u32::MAX; L];
        let lane_base = unsafe { rows.add(lane as usize * L + smax as usize) } as *const f32;

        let mut gc = warp;
        while gc < ngroups {
            let ip = gc / nqg;
            let q0 = (gc - ip * nqg) * G as u32;
            let pa = unsafe { *pv.add(ip as usize) };
            let mut qa = [0.0f32; G];
            unroll!(G, |c| {
                let qi = if q0 + (c as u32) < nqv { q0 + c as u32 } else { nqv - 1 };
                qa[c] = unsafe { *qv.add(qi as usize) };
            });
            let mut s = [[0.0f32; L]; G];
            let mut en = [[0.0f32; L]; G];
            let mut rbase = 0u32;
            while rbase < m {
                // Lane r splits the G shifts of row rbase + r: the window start and G offsets.
                let r = rbase + lane;
                let mut kl = 0i32;
                let mut gl = [0.0f32; G];
                if r < m {
                    let (dx, dy) = unsafe { (*geom.add(2 * r as usize), *geom.add(2 * r as usize + 1)) };
                    let mut sig = [0.0f32; G];
                    let mut low = f32::INFINITY;
                    unroll!(G, |c| {
                        let (a, b, d, e) = if phase == 0 { (pa, 0.0, qa[c], 0.0) } else { (0.0, pa, 0.0, qa[c]) };
                        sig[c] = shift_samples(a, b, 0.0, d, e, dx, dy, inv_dt);
                        low = if sig[c] < low { sig[c] } else { low };
                    });
                    kl = split_shift(low).0;
                    unroll!(G, |c| {
                        gl[c] = sig[c] - kl as f32;
                    });
                }
                let cnt = if m - rbase < 32 { m - rbase } else { 32 };
                let mut rr = 0u32;
                while rr < cnt {
                    let k = shfl_idx_u32(kl as u32, rr) as i32;
                    let ptr = unsafe { lane_base.offset(((rbase + rr) * span) as isize + k as isize) };
                    let mut x = [0.0f32; 34];
                    unroll!(L + 2, |q| {
                        x[q] = unsafe { *ptr.add(q) };
                    });
                    let mut dw = [0.0f32; 34];
                    unroll!(L + 1, |q| {
                        dw[q] = x[q + 1] - x[q];
                    });
                    unroll!(G, |c| {
                        let gv = shfl_idx_f32(gl[c], rr);
                        let h = if gv > 1.0 { gv - 1.0 } else { 0.0 };
                        let gh = gv - h;
                        unroll!(L, |mm| {
                            let v = crate::math::mul_add(h, dw[mm + 1], crate::math::mul_add(gh, dw[mm], x[mm]));
                            s[c][mm] += v;
                            en[c][mm] = add_sq(en[c][mm], v);
                        });
                    });
                    rr += 1;
                }
                rbase += 32;
            }
            let left = lane.wrapping_sub(1) & 31;
            unroll!(G, |c| {
                let combo = ip * nqv + q0 + c as u32;
                let mut xq = [0.0f32; 33];
                let mut xe = [0.0f32; 33];
                unroll!(H, |j| {
                    xq[j] = shfl_idx_f32(s[c][L - H + j] * s[c][L - H + j], left);
                    xe[j] = shfl_idx_f32(en[c][L - H + j], left);
                    xq[(H + L + j) & 31] = shfl_down_f32(s[c][j] * s[c][j], 1);
                    xe[(H + L + j) & 31] = shfl_down_f32(en[c][j], 1);
                });
                unroll!(L, |mm| {
                    xq[H + mm] = s[c][mm] * s[c][mm];
                    xe[H + mm] = en[c][mm];
                });
                let num = window_sums::<L, H>(&xq);
                let den = window_sums::<L, H>(&xe);
                let valid = q0 + (c as u32) < nqv;
                unroll!(L, |mm| {
                    let q = div_full(num[mm], den[mm]);
                    let sv = if den[mm] > 0.0 { q } else { 0.0 };
                    let take = valid & better(sv, combo, best_s[mm], best_i[mm]);
                    best_s[mm] = if take { sv } else { best_s[mm] };
                    best_i[mm] = if take { combo } else { best_i[mm] };
                });
            });
            gc += nwarps;
        }

        sync_threads();
        let red_s = rows;
        let red_i = unsafe { rows.add(nwarps as usize * 32 * L) } as *mut u32;
        unroll!(L, |mm| {
            let c = warp as usize * 32 * L + lane as usize * L + mm;
            unsafe {
                *red_s.add(c) = best_s[mm];
                *red_i.add(c) = best_i[mm];
            }
        });
        sync_threads();
        let mut o = tid;
        while o < t_out {
            let t0 = t_start + o;
            if t0 < ns {
                let c = (o + H as u32) as usize;
                let (mut bs, mut bi) = (-1.0f32, u32::MAX);
                for w in 0..nwarps as usize {
                    let (sv, iv) = unsafe { (*red_s.add(w * 32 * L + c), *red_i.add(w * 32 * L + c)) };
                    if better(sv, iv, bs, bi) {
                        bs = sv;
                        bi = iv;
                    }
                }
                let out = ((phase * np + p) * ns + t0) as usize;
                unsafe {
                    *out_pick.add(out) = bi;
                    *out_s.add(out) = bs / m as f32;
                }
            }
            o += block_dim_x();
        }
    }

    macro_rules! slide_group_entry {
        ($name:ident as $desc:ident, $l:expr, $h:expr, $g:expr) => { crate::kernel! {
            /// Grouped sliding (A, D) / (B, E) scan; see `slide_group_body`.
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name(ns: u32, np: u32, nchunks: u32, inv_dt: f32, smax: i32, span: u32,
                mmax: u32, data: *const f32, tx: *const f32, ty: *const f32, px: *const f32, py: *const f32,
                ap_off: *const u32, ap_idx: *const u32, vals: *const f32, na: u32, nb: u32, nc: u32, nd: u32, ne: u32,
                out_pick: *mut u32, out_s: *mut f32) as $desc {
                unsafe {
                    slide_group_body::<$l, $h, $g>(ns, np, nchunks, inv_dt, smax, span, mmax, data, tx, ty, px, py, ap_off,
                        ap_idx, vals, na, nb, nc, nd, ne, out_pick, out_s)
                }
            }
        } };
    }
    slide_group_entry!(nlbf_slide_l7_h5_g4 as NLBF_SLIDE_L7_H5_G4, 7, 5, 4);
    slide_group_entry!(nlbf_slide_l9_h5_g4 as NLBF_SLIDE_L9_H5_G4, 9, 5, 4);
    slide_group_entry!(nlbf_slide_l9_h5_g2 as NLBF_SLIDE_L9_H5_G2, 9, 5, 2);
    slide_group_entry!(nlbf_slide_l13_h5_g2 as NLBF_SLIDE_L13_H5_G2, 13, 5, 2);

    macro_rules! slide_entry {
        ($name:ident as $desc:ident, $l:expr, $h:expr) => { crate::kernel! {
            /// Sliding (A, D) / (B, E) scan; see `slide_body`.
            #[allow(clippy::too_many_arguments)]
            pub unsafe fn $name(ns: u32, np: u32, nchunks: u32, inv_dt: f32, smax: i32, span: u32,
                mmax: u32, data: *const f32, tx: *const f32, ty: *const f32, px: *const f32, py: *const f32,
                ap_off: *const u32, ap_idx: *const u32, vals: *const f32, na: u32, nb: u32, nc: u32, nd: u32, ne: u32,
                out_pick: *mut u32, out_s: *mut f32) as $desc {
                unsafe {
                    slide_body::<$l, $h>(ns, np, nchunks, inv_dt, smax, span, mmax, data, tx, ty, px, py, ap_off, ap_idx,
                        vals, na, nb, nc, nd, ne, out_pick, out_s)
                }
            }
        } };
    }
    slide_entry!(nlbf_slide_l7_h1 as NLBF_SLIDE_L7_H1, 7, 1);
    slide_entry!(nlbf_slide_l7_h2 as NLBF_SLIDE_L7_H2, 7, 2);
    slide_entry!(nlbf_slide_l7_h3 as NLBF_SLIDE_L7_H3, 7, 3);
    slide_entry!(nlbf_slide_l7_h4 as NLBF_SLIDE_L7_H4, 7, 4);
    slide_entry!(nlbf_slide_l7_h5 as NLBF_SLIDE_L7_H5, 7, 5);
    slide_entry!(nlbf_slide_l9_h5 as NLBF_SLIDE_L9_H5, 9, 5);
    slide_entry!(nlbf_slide_l11_h5 as NLBF_SLIDE_L11_H5, 11, 5);
    slide_entry!(nlbf_slide_l13_h5 as NLBF_SLIDE_L13_H5, 13, 5);
    slide_entry!(nlbf_slide_l10_h5 as NLBF_SLIDE_L10_H5, 10, 5);
    slide_entry!(nlbf_slide_l14_h5 as NLBF_SLIDE_L14_H5, 14, 5);
    slide_entry!(nlbf_slide_l7_h6 as NLBF_SLIDE_L7_H6, 7, 6);
    slide_entry!(nlbf_slide_l7_h7 as NLBF_SLIDE_L7_H7, 7, 7);
    slide_entry!(nlbf_slide_l9_h8 as NLBF_SLIDE_L9_H8, 9, 8);

    // ---------------------------------------------------------------------------------------------
    // Enhancement and NMO.
    // ---------------------------------------------------------------------------------------------

    crate::kernel! {
    /// Beamforming: out(n, t0) = mean over the neighbours m of trace n of u_m(t0 + dt_m), with the
    /// operator at (x_n, y_n, t0) interpolated bilinearly between the parameter traces.
    /// One thread per (trace, t0); block b covers trace b / tchunks, times (b % tchunks) * blockDim.
    #[allow(clippy::too_many_arguments)]
    pub unsafe fn nlbf_enhance(ns: u32, tchunks: u32, inv_dt: f32, data: *const f32,
        tx: *const f32, ty: *const f32, nb_off: *const u32, nb_idx: *const u32, grid_nx: u32, grid_ny: u32,
        inv_sx: f32, inv_sy: f32, code: *const u32, vals: *const f32, na: u32, nb: u32, nc: u32, nd: u32, ne: u32,
        out: *mut f32) as NLBF_ENHANCE {
        let n = block_idx_x() / nonzero(tchunks);
        let t0 = (block_idx_x() % nonzero(tchunks)) * block_dim_x() + thread_idx_x();
        if t0 >= ns {
            return;
        }
        let (x, y) = unsafe { (*tx.add(n as usize), *ty.add(n as usize)) };
        let op = unsafe { operator_at(x, y, t0, ns, grid_nx, grid_ny, inv_sx, inv_sy, code, vals, na, nb, nc, nd, ne) };
        let (lo, hi) = unsafe { (*nb_off.add(n as usize), *nb_off.add(n as usize + 1)) };
        let mut sum = 0.0f32;
        let mut i = lo;
        while i < hi {
            unsafe {
                let mt = *nb_idx.add(i as usize);
                let (dx, dy) = (*tx.add(mt as usize) - x, *ty.add(mt as usize) - y);
                let (k, f) = split_shift(shift_samples(op[0], op[1], op[2], op[3], op[4], dx, dy, inv_dt));
                let row = data.add(mt as usize * ns as usize);
                let idx = t0 as i64 + k as i64;
                let u0 = if idx >= 0 && idx < ns as i64 { ldg_f32(row.add(idx as usize)) } else { 0.0 };
                let u1 = if idx + 1 >= 0 && idx + 1 < ns as i64 { ldg_f32(row.add(idx as usize + 1)) } else { 0.0 };
                sum += lerp(u0, u1, f);
            }
            i += 1;
        }
        let cnt = hi - lo;
        unsafe { *out.add(n as usize * ns as usize + t0 as usize) = if cnt > 0 { sum / cnt as f32 } else { 0.0 } };
    }
    }

    /// The operator {A, B, C, D, E} at (x, y, t0), bilinear between the four surrounding parameter
    /// traces (codes decoded through the value tables).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(super) unsafe fn operator_at(x: f32, y: f32, t0: u32, ns: u32, nx: u32, ny: u32, inv_sx: f32, inv_sy: f32,
        code: *const u32, vals: *const f32, na: u32, nb: u32, nc: u32, nd: u32, ne: u32) -> [f32; 5] {
        let (ix, wx) = grid_cell(x, inv_sx, nx);
        let (iy, wy) = grid_cell(y, inv_sy, ny);
        let ix1 = if ix + 1 < nx { ix + 1 } else { ix };
        let iy1 = if iy + 1 < ny { iy + 1 } else { iy };
        let corner = |gx: u32, gy: u32| -> [f32; 5] {
            let c = unsafe { *code.add(((gy * nx + gx) * ns + t0) as usize) };
            let (ia, ib, ic, id, ie) = decode_indices(c, nb, nc, nd, ne);
            let at = |o: u32| unsafe { *vals.add(o as usize) };
            [at(ia), at(na + ib), at(na + nb + ic), at(na + nb + nc + id), at(na + nb + nc + nd + ie)]
        };
        let (o00, o10, o01, o11) = (corner(ix, iy), corner(ix1, iy), corner(ix, iy1), corner(ix1, iy1));
        let mut op = [0.0f32; 5];
        for q in 0..5 {
            op[q] = bilinear(o00[q], o10[q], o01[q], o11[q], wx, wy);
        }
        op
    }

    crate::kernel! {
    /// NMO: out(n, i) = u_n(t(i)) with t = sqrt(t0^2 + (offset/v)^2), muted (zero) where the
    /// stretch (t - t0) / t0 exceeds `max_stretch`. One thread per (trace, output sample).
    pub unsafe fn nlbf_nmo(ns: u32, tchunks: u32, dt: f32, t_first: f32, max_stretch: f32,
        data: *const f32, offsets: *const f32, vrms: *const f32, out: *mut f32) as NLBF_NMO {
        let n = block_idx_x() / nonzero(tchunks);
        let i = (block_idx_x() % nonzero(tchunks)) * block_dim_x() + thread_idx_x();
        if i >= ns {
            return;
        }
        let row = unsafe { data.add(n as usize * ns as usize) };
        let (off, v) = unsafe { (*offsets.add(n as usize), *vrms.add(i as usize)) };
        let v = match nmo_source_position(i, dt, t_first, off, v, max_stretch) {
            Some(pos) => {
                let (k, f) = split_shift(pos);
                let idx = k as i64;
                let u0 = if idx >= 0 && idx < ns as i64 { unsafe { ldg_f32(row.add(idx as usize)) } } else { 0.0 };
                let u1 = if idx + 1 >= 0 && idx + 1 < ns as i64 { unsafe { ldg_f32(row.add(idx as usize + 1)) } } else { 0.0 };
                lerp(u0, u1, f)
            }
            None => 0.0,
        };
        unsafe { *out.add(n as usize * ns as usize + i as usize) = v };
    }
    }
}
