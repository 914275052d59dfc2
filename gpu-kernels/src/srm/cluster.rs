//! The whole-plane-on-chip SRM step: one thread-block cluster per (plane, wave) holds the
//! plane in distributed shared memory and runs all `degree` Chebyshev steps of a depth step in one
//! launch. Entry points are named `sm90_*`: build.rs moves them into the sm_90 module
//! (`device::cluster` says why).
//!
//! Layout. A cluster of C CTAs (grid x = C, cluster (C, 1, 1)), grid z = 2 * count (wave-major as
//! the other kernels). CTA `rank` holds rows [rank r, rank r + r) of the plane (a strip of r rows,
//! the last strip possibly shorter or cut by ny) as T_{n-1} and T_{n-2} in shared memory, rows of
//! `cluster_pitch(nx)` 16-byte pairs (two zero pairs each side), and the strip's slowness. The
//! y arm of the radius-4 cross stencil reads the 4 rows above (below) the strip from CTA rank - 1
//! (rank + 1) through DSMEM; rows outside the grid are 0 (the CPU's zero halo).
//!
//! Threads: thread t owns column pair p = t % wp (nodes 2p, 2p + 1; wp = pairs padded to warps) and
//! rows [g M, g M + M) of the strip, g = t / wp, M = `CLUSTER_SEG_ROWS`. It keeps a rolling window
//! of 9 rows of its pair column in registers (y arm), reads the 4 x neighbour pairs of each row from
//! shared memory, and keeps its nodes' accumulators sum a_n T_n in registers for the whole step.
//!
//! Per Chebyshev step n: T_n = 2 L T_{n-1} - T_{n-2} (T_1 = L T_0) overwrites T_{n-2} in place,
//! acc += a_n T_n (pair-table lookup from the slowness in shared memory); then one cluster barrier:
//! T_n is visible to the neighbours, and nobody still reads the buffer the next step overwrites.
//! At the end W' = taper * acc goes to global memory over W (each CTA reads only its own rows of W,
//! before the first barrier, so the update is in place).

// On the host only the entry points' descriptors are used: the kernels' helpers compile there
// (the device layer has host bodies) but nothing calls them, and clippy sees them only there.
#![cfg_attr(not(target_arch = "nvptx64"), allow(dead_code, unused_imports, unused_variables, unused_assignments,
    clippy::too_many_arguments, clippy::manual_is_multiple_of))]

use super::*;
use crate::device::*;

use super::kernels::{pair_laplacian, pair_terms, F4};

const Z4: F4 = F4 { r0: 0.0, i0: 0.0, r1: 0.0, i1: 0.0 };

/// One complex node in global memory (8-byte aligned: one `ld/st.global.v2`).
#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct F2([f32; 2]);

const M: usize = CLUSTER_SEG_ROWS as usize;
const _: () = assert!(M <= 64, "unroll! writes out at most 64 rows");

/// acc + a t, complex, with fused multiply-adds (rel ~1e-7 from the CPU).
#[inline(always)]
fn cmadd_fma(acc: (f32, f32), a: (f32, f32), t: (f32, f32)) -> (f32, f32) {
    use crate::math::mul_add as fma;
    (fma(-a.1, t.1, fma(a.0, t.0, acc.0)), fma(a.1, t.0, fma(a.0, t.1, acc.1)))
}

/// Row `lr` (any, halo included) of pair column `p` of a T buffer: this CTA's strip `t` (rows
/// 0..ri, pitch `pitch` pairs) or, for the 4 rows beyond either end, the CTA above (`up`) or below
/// (`dn`) through distributed shared memory, `off` being the buffer's offset from the shared base
/// (laid out alike in every CTA); 0 outside the grid (local row lr is global row y0 + lr of ny).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn strip_row(t: *mut F4, up: *mut u8, dn: *mut u8, off: usize, lr: i32, y0: i32, ny: u32, ri: i32, pitch: u32, p: u32) -> F4 {
    let gy = y0 + lr;
    if gy < 0 || gy >= ny as i32 {
        Z4
    } else if lr < 0 {
        let k = ((lr + ri) * pitch as i32 + p as i32 + 2) as usize;
        let v = unsafe { ld_dsmem_f32x4(up.add(off + 16 * k) as *const f32) };
        F4 { r0: v[0], i0: v[1], r1: v[2], i1: v[3] }
    } else if lr >= ri {
        let k = ((lr - ri) * pitch as i32 + p as i32 + 2) as usize;
        let v = unsafe { ld_dsmem_f32x4(dn.add(off + 16 * k) as *const f32) };
        F4 { r0: v[0], i0: v[1], r1: v[2], i1: v[3] }
    } else {
        unsafe { *t.add((lr * pitch as i32 + p as i32 + 2) as usize) }
    }
}

crate::kernel! {
/// One depth step of `count` planes of both waves, all `degree` Chebyshev steps on chip.
///
/// `w`: the wavefields (2 waves x `stride` planes of nx x ny complex), read as W and overwritten with
/// W' = taper * sum_n a_n T_n W. `r`: rows per CTA strip (host: `ClusterShape`); the cluster size is
/// the launch's. `ptab`/`rows`: the pair table (`pair_entry`) and the table's rows; `maps`: one row
/// map per plane; `taper_x`/`taper_y`: the edge taper.
pub unsafe fn sm90_srm_step_cluster(st: Stencil, nx: u32, ny: u32, stride: u32, count: u32, r: u32,
    degree: u32, w: *mut f32, slow: *const f32, ptab: *const f32, rows: u32, maps: *const RowMap, taper_x: *const f32,
    taper_y: *const f32) as SM90_SRM_STEP_CLUSTER {
    let rank = cluster_ctarank();
    let csize = cluster_nctarank();
    let z = block_idx_z();
    let wave = (z >= count) as u32;
    let plane = z - wave * count;
    let nxy = (nx * ny) as usize;
    let base = ((wave * stride + plane) as usize) * nxy;
    // `max(32)`: wp >= 32 anyway, and the compiler then drops the division-by-zero panic path.
    let (npairs, pitch, wp) = (cluster_pairs(nx), cluster_pitch(nx), cluster_warp_pairs(nx).max(32));
    let tid = thread_idx_x();
    let g = tid / wp;
    let p = tid - g * wp;
    let ownp = p < npairs;
    let x0 = 2 * p;
    let in1 = x0 + 1 < nx;
    let row0 = (g as usize * M) as i32;
    let y0 = (rank * r) as i32; // global row of local row 0
    let ri = r as i32;

    let mut carver = SharedCarver::new();
    let sa = carver.take::<F4>((r * pitch) as usize);
    let sb = carver.take::<F4>((r * pitch) as usize);
    let ss = carver.take::<[f32; 2]>((r * npairs) as usize);
    // Local row lr of this thread's pair column, in buffer `t`.
    let at = move |t: *mut F4, lr: i32, dp: i32| unsafe { t.add((lr * pitch as i32 + p as i32 + 2 + dp) as usize) };
    // Row lr of the segment is owned: inside the strip and the grid.
    let owned = |lr: i32| ownp && lr < ri && y0 + lr < ny as i32;

    let map = unsafe { *maps.add(plane as usize) };
    let prow = pair_rows(rows);
    // Both nodes' table positions from the pair's slowness (the pad node of an odd nx takes node x0's:
    // its T is 0 anyway).
    let positions = move |s2: [f32; 2]| (table_pos(s2[0], map, rows), table_pos(if in1 { s2[1] } else { s2[0] }, map, rows));
    let mut acc = [Z4; M];

    // ---- load W (= T_0) and the slowness of the strip, acc = a_0 T_0; T_{-1} = 0 (so that the
    // first step's 1 L T_0 - 0 needs no branch); zero the pad pairs ----
    unroll!(M, |m| {
        let lr = row0 + m as i32;
        if ownp && lr < ri {
            let gy = y0 + lr;
            let mut v = Z4;
            let mut s2 = [0.0f32; 2];
            if gy < ny as i32 {
                let row = gy as usize * nx as usize;
                // Plain loads: `w` is written by this kernel (W'), so not the read-only (.nc) path.
                let a = unsafe { (*(w.add(2 * (base + row + x0 as usize)) as *const F2)).0 };
                s2[0] = unsafe { ldg_f32(slow.add(row + x0 as usize)) };
                v.r0 = a[0];
                v.i0 = a[1];
                if in1 {
                    let b = unsafe { (*(w.add(2 * (base + row + x0 as usize + 1)) as *const F2)).0 };
                    s2[1] = unsafe { ldg_f32(slow.add(row + x0 as usize + 1)) };
                    v.r1 = b[0];
                    v.i1 = b[1];
                }
            }
            let ((ia, fa), (ib, fb)) = positions(s2);
            let za = coef_from_pair(unsafe { ldg_f32x4(ptab.add(4 * ia as usize)) }, fa);
            let zb = coef_from_pair(unsafe { ldg_f32x4(ptab.add(4 * ib as usize)) }, fb);
            let a0 = cmadd_fma((0.0, 0.0), za, (v.r0, v.i0));
            let a1 = cmadd_fma((0.0, 0.0), zb, (v.r1, v.i1));
            acc[m] = F4 { r0: a0.0, i0: a0.1, r1: a1.0, i1: a1.1 };
            unsafe {
                *at(sa, lr, 0) = v;
                *at(sb, lr, 0) = Z4;
                *ss.add((lr as u32 * npairs + p) as usize) = s2;
            }
        }
        if p < 2 && lr < ri {
            // Pads: pairs 0, 1 and npairs + 2, npairs + 3 of the row, in both buffers (threads 0, 1 of
            // each segment; they exist even where npairs < 2).
            let row = lr as usize * pitch as usize;
            unsafe {
                *sa.add(row + p as usize) = Z4;
                *sa.add(row + (npairs + 2 + p) as usize) = Z4;
                *sb.add(row + p as usize) = Z4;
                *sb.add(row + (npairs + 2 + p) as usize) = Z4;
            }
        }
    });
    cluster_sync();

    // The neighbours' shared memory (generic addresses); a missing neighbour maps to this CTA (never read).
    let up = map_shared_rank(dynamic_shared::<u8>() as *const u8, if rank > 0 { rank - 1 } else { rank }) as *mut u8;
    let dn = map_shared_rank(dynamic_shared::<u8>() as *const u8, if rank + 1 < csize { rank + 1 } else { rank }) as *mut u8;
    let off_b = (sb as usize - sa as usize) as usize;
    let mut n = 1u32;
    while n <= degree {
        // T_{n-1} in `ta`, T_{n-2} in `tb` (T_n goes over it).
        let (ta, tb, off_a) = if n % 2 == 1 { (sa, sb, 0) } else { (sb, sa, off_b) };
        // Opaque copies of the base pointers: otherwise LICM hoists the ~70 loop-invariant row
        // addresses of the unrolled rows out of the step loop and the kernel needs 255 registers.
        // (An opaque offset, not an opaque pointer: the shared bases stay visibly shared, so loads
        // stay `ld.shared`.)
        let z = opaque_zero();
        let (ta, tb, ss, up, dn) = unsafe { (ta.add(z), tb.add(z), ss.add(z), up.add(z), dn.add(z)) };
        // Likewise the row index every row offset derives from.
        let row0 = row0 + z as i32;
        // Row lr (any, halo included) of this thread's pair column of T_{n-1} in buffer `t` (offset `off`
        // from the shared base, for the neighbours): 0 outside the grid.
        let row_of = |t: *mut F4, off: usize, lr: i32| strip_row(t, up, dn, off, lr, y0, ny, ri, pitch, p);
        let kf = if n == 1 { 1.0f32 } else { 2.0 };
        let pn = unsafe { ptab.add(4 * (n * prow) as usize) };
        if ownp && owned(row0) {
            let mut win = [Z4; 9];
            unroll!(8, |k| {
                win[k] = row_of(ta, off_a, row0 - 4 + k as i32);
            });
            // Owned rows are a prefix of the segment: `break` at the first row that is not, so that no
            // row after it merges a shifted and an unshifted window (twice the window's registers).
            'rows: {
            unroll!(M, |m| {
                let lr = row0 + m as i32;
                if !owned(lr) {
                    break 'rows;
                }
                {
                    win[8] = row_of(ta, off_a, lr + 4);
                    let (pm2, pm1, pp1, pp2) = unsafe { (*at(ta, lr, -2), *at(ta, lr, -1), *at(ta, lr, 1), *at(ta, lr, 2)) };
                    let c = win[4];
                    let F4 { r0: l0r, i0: l0i, r1: l1r, i1: l1i } = pair_laplacian::<true>(&st, c, pm2, pm1, pp1, pp2, &win);
                    // T_n = k L T_{n-1} - T_{n-2}, k = 1 at n = 1 (T_{-1} = 0: exactly L T_0), else 2
                    // (2 lap exact, one rounding: the CPU's `2 lap - prev`).
                    let bp = at(tb, lr, 0);
                    let prev = unsafe { *bp };
                    let t = F4 {
                        r0: kf * l0r - prev.r0,
                        i0: kf * l0i - prev.i0,
                        r1: if in1 { kf * l1r - prev.r1 } else { 0.0 },
                        i1: if in1 { kf * l1i - prev.i1 } else { 0.0 },
                    };
                    unsafe { *bp = t };
                    let s2 = unsafe { *ss.add((lr as u32 * npairs + p) as usize) };
                    let ((ia, fa), (ib, fb)) = positions(s2);
                    let aa = coef_from_pair(unsafe { ldg_f32x4(pn.add(4 * ia as usize)) }, fa);
                    let ab = coef_from_pair(unsafe { ldg_f32x4(pn.add(4 * ib as usize)) }, fb);
                    let a0 = cmadd_fma((acc[m].r0, acc[m].i0), aa, (t.r0, t.i0));
                    let a1 = cmadd_fma((acc[m].r1, acc[m].i1), ab, (t.r1, t.i1));
                    acc[m] = F4 { r0: a0.0, i0: a0.1, r1: a1.0, i1: a1.1 };
                    unroll!(8, |k| {
                        win[k] = win[k + 1];
                    });
                    // The next row's loads stay below this row's work (hoisted, all 21 window rows' loads
                    // took 255 registers and spilled).
                    compiler_fence();
                }
            });
            }
        }
        // T_n complete in every CTA; the buffer the next step overwrites (T_{n-1}) is no longer read.
        cluster_sync();
        n += 1;
    }

    // ---- W' = taper * acc ----
    let txa = if ownp { unsafe { *taper_x.add(x0 as usize) } } else { 0.0 };
    let txb = if ownp && in1 { unsafe { *taper_x.add(x0 as usize + 1) } } else { 0.0 };
    unroll!(M, |m| {
        let lr = row0 + m as i32;
        if owned(lr) {
            let gy = (y0 + lr) as usize;
            let ty = unsafe { *taper_y.add(gy) };
            let o = base + gy * nx as usize + x0 as usize;
            let (twa, twb) = (txa * ty, txb * ty);
            unsafe {
                *(w.add(2 * o) as *mut F2) = F2([acc[m].r0 * twa, acc[m].i0 * twa]);
                if in1 {
                    *(w.add(2 * o + 2) as *mut F2) = F2([acc[m].r1 * twb, acc[m].i1 * twb]);
                }
            }
        }
    });
}
}

/// Accumulator rows per thread kept in registers by `clusterd`; the last `CLUSTERD_SHARED_ACC` of
/// the 13 live in shared memory.
const REG_ACC: usize = M - CLUSTERD_SHARED_ACC as usize;

crate::kernel! {
/// `cluster`, second generation: the same layout, threads and launch plan, tuned for the latency
/// that bounds `cluster` (Nsight Compute on the H100: 14 warps per SM, 37% issue, stalls on
/// dependent loads, spilled registers, 16% of the samples at the cluster barrier). Measured steps
/// (H100, 400 x 400, 16 planes: 45.0 -> 31.5 us per depth step per plane) in docs/notes/srm.md.
/// - Synchronisation with the two neighbour CTAs only: an mbarrier per neighbour and step parity,
///   relaxed remote arrives behind a shared-memory release fence (`device::cluster`), instead of
///   the whole cluster's barrier, whose acquire invalidates L1 at every step.
/// - No spills at 128 registers: the last `CLUSTERD_SHARED_ACC` rows' accumulators live in shared
///   memory, paid for by packing each node's table position into 32 bits (`pack_pos`: the row and
///   a 20-bit fraction, |error| <= 2^-21), computed once per depth step instead of per Chebyshev step.
/// - A coefficient is one fused multiply-add per component: the offset table (`offset_entry`,
///   `otab`) and g = 1 + f read straight from the packed position's bits.
/// - The last row segment of a strip (when there are two) runs bottom-up, so its 4 halo rows from
///   the CTA below arrive with the window's preload, in parallel (the y arm is symmetric); visits
///   whose streamed row is local (all of them in the usual case) are compiled without halo tests.
/// - The stencil sums the terms held in registers first (`Stencil::apply_fma_y_first`); T_n =
///   k L - T_{n-2} is one fused multiply-add (k L is exact for k = 1, 2).
/// - The load phase issues every row's loads before any store; while a job runs, its CTAs prefetch
///   the W of the job `ahead` places on into L2 (`ahead` = clusters resident at once; 0 = none).
/// Shared memory: `clusterd_shared_bytes`. Table rows <= `CLUSTERD_MAX_ROWS`.
pub unsafe fn sm90_srm_step_clusterd(st: Stencil, nx: u32, ny: u32, stride: u32, count: u32, r: u32,
    degree: u32, w: *mut f32, slow: *const f32, otab: *const f32, rows: u32, maps: *const RowMap, taper_x: *const f32,
    taper_y: *const f32, ahead: u32) as SM90_SRM_STEP_CLUSTERD {
    use crate::math::mul_add as fma;
    let rank = cluster_ctarank();
    let csize = cluster_nctarank();
    let z = block_idx_z();
    let wave = (z >= count) as u32;
    let plane = z - wave * count;
    let nxy = (nx * ny) as usize;
    let base = ((wave * stride + plane) as usize) * nxy;
    let (npairs, pitch, wp) = (cluster_pairs(nx), cluster_pitch(nx), cluster_warp_pairs(nx).max(32));
    let tid = thread_idx_x();
    let nthr = block_dim_x();
    let g = tid / wp;
    let p = tid - g * wp;
    let ownp = p < npairs;
    let x0 = 2 * p;
    let in1 = x0 + 1 < nx;
    let y0 = (rank * r) as i32; // global row of local row 0
    let ri = r as i32;
    // This segment's rows that hold grid rows: [s0, s1), `cnt` of them, visited from `first` in
    // direction `dir`: bottom-up for the last of several segments.
    let nseg = r.div_ceil(M as u32);
    let s0 = (g as usize * M) as i32;
    let s1 = (s0 + M as i32).min(ri).min(ny as i32 - y0);
    let cnt = if ownp { (s1 - s0).max(0) } else { 0 };
    let (first, dir) = if g + 1 == nseg && g > 0 { (s1 - 1, -1i32) } else { (s0, 1i32) };

    let mut carver = SharedCarver::new();
    // mbarriers [from above, step parity 0 / 1; from below, 0 / 1], one arrival each per phase.
    let bars = carver.take::<u64>(4);
    let sa = carver.take::<F4>((r * pitch) as usize);
    let sb = carver.take::<F4>((r * pitch) as usize);
    let sp = carver.take::<[u32; 2]>((r * npairs) as usize);
    let sacc = carver.take::<F4>(CLUSTERD_SHARED_ACC as usize * nthr as usize);
    // Accumulator m >= REG_ACC of this thread, in shared memory.
    let sacc_at = move |m: usize| unsafe { sacc.add((m - REG_ACC) * nthr as usize + tid as usize) };
    let at = move |t: *mut F4, lr: i32, dp: i32| unsafe { t.add((lr * pitch as i32 + p as i32 + 2 + dp) as usize) };
    let map = unsafe { *maps.add(plane as usize) };
    let mut acc = [Z4; REG_ACC];

    // ---- load W (= T_0) and the slowness, every row's loads first (their latencies overlap) ----
    let mut wv = [Z4; M];
    let mut sv = [[0.0f32; 2]; M];
    unroll!(M, |m| {
        if (m as i32) < cnt {
            let row = (y0 + first + dir * m as i32) as usize * nx as usize + x0 as usize;
            // Plain loads: `w` is written by this kernel (W'), so not the read-only (.nc) path.
            let a = unsafe { (*(w.add(2 * (base + row)) as *const F2)).0 };
            sv[m][0] = unsafe { ldg_f32(slow.add(row)) };
            wv[m] = F4 { r0: a[0], i0: a[1], r1: 0.0, i1: 0.0 };
            // The pad node of an odd nx takes node x0's position: its T is 0 anyway.
            sv[m][1] = sv[m][0];
            if in1 {
                let b = unsafe { (*(w.add(2 * (base + row + 1)) as *const F2)).0 };
                sv[m][1] = unsafe { ldg_f32(slow.add(row + 1)) };
                wv[m].r1 = b[0];
                wv[m].i1 = b[1];
            }
        }
    });
    // ---- T_{n-1} = T_0, T_{n-2} = T_{-1} = 0 (so the first step's 1 L T_0 - 0 needs no branch), the
    // packed positions, acc = a_0 T_0 (a_0 from the offset table's first slice); zero the pads ----
    unroll!(M, |m| {
        if (m as i32) < cnt {
            let lr = first + dir * m as i32;
            let ((ia, fa), (ib, fb)) = (table_pos(sv[m][0], map, rows), table_pos(sv[m][1], map, rows));
            let pp = [pack_pos(ia, fa), pack_pos(ib, fb)];
            let ((ja, ga), (jb, gb)) = (unpack_pos(pp[0]), unpack_pos(pp[1]));
            let za = coef_from_offset(unsafe { ldg_f32x4(otab.add(4 * ja as usize)) }, ga);
            let zb = coef_from_offset(unsafe { ldg_f32x4(otab.add(4 * jb as usize)) }, gb);
            let v = wv[m];
            let (a0, a1) = (cmadd_fma((0.0, 0.0), za, (v.r0, v.i0)), cmadd_fma((0.0, 0.0), zb, (v.r1, v.i1)));
            let a = F4 { r0: a0.0, i0: a0.1, r1: a1.0, i1: a1.1 };
            if m >= REG_ACC {
                unsafe { *sacc_at(m) = a };
            } else {
                acc[m.min(REG_ACC - 1)] = a;
            }
            unsafe {
                *at(sa, lr, 0) = v;
                *at(sb, lr, 0) = Z4;
                *sp.add((lr as u32 * npairs + p) as usize) = pp;
            }
        }
        let lr = s0 + m as i32;
        if p < 2 && lr < ri {
            // Pads: pairs 0, 1 and npairs + 2, npairs + 3 of the row, in both buffers (threads 0, 1 of
            // each segment; they exist even where npairs < 2). Rows outside the grid are never read.
            let row = lr as usize * pitch as usize;
            unsafe {
                *sa.add(row + p as usize) = Z4;
                *sa.add(row + (npairs + 2 + p) as usize) = Z4;
                *sb.add(row + p as usize) = Z4;
                *sb.add(row + (npairs + 2 + p) as usize) = Z4;
            }
        }
    });
    if tid < 4 {
        unsafe { mbarrier_init(bars.add(tid as usize), 1) };
        fence_mbarrier_init_cluster();
    }
    // Every CTA of the cluster has started (DSMEM rule) and sees the others' mbarriers and T_0.
    cluster_sync();

    // The neighbours' shared memory (generic addresses); a missing neighbour maps to this CTA (never read).
    let up = map_shared_rank(dynamic_shared::<u8>() as *const u8, if rank > 0 { rank - 1 } else { rank }) as *mut u8;
    let dn = map_shared_rank(dynamic_shared::<u8>() as *const u8, if rank + 1 < csize { rank + 1 } else { rank }) as *mut u8;
    // Offsets of the two buffers from the shared base (the neighbours' are laid out alike).
    let (off_sa, off_sb) = (sa as usize - dynamic_shared::<u8>() as usize, sb as usize - dynamic_shared::<u8>() as usize);
    let mut n = 1u32;
    while n <= degree {
        // T_{n-1} in `ta`, T_{n-2} in `tb` (T_n goes over it).
        let (ta, tb, off_a) = if n % 2 == 1 { (sa, sb, off_sa) } else { (sb, sa, off_sb) };
        // Opaque offsets (see `sm90_srm_step_cluster`: LICM would hoist every row's addresses).
        let zo = opaque_zero();
        let (ta, tb, sp, up, dn) = unsafe { (ta.add(zo), tb.add(zo), sp.add(zo), up.add(zo), dn.add(zo)) };
        let first = first + zo as i32;
        // Row lr (any, halo included) of this thread's pair column of T_{n-1} in buffer `t` (offset `off`
        // from the shared base, for the neighbours): 0 outside the grid.
        let row_of = |t: *mut F4, off: usize, lr: i32| strip_row(t, up, dn, off, lr, y0, ny, ri, pitch, p);
        // While this job runs, bring the W of the job `ahead` places on (the one likely to take these
        // SMs next) into L2, a row per step, so that its load phase does not wait on DRAM together
        // with every other cluster of its round.
        let zn = z + ahead;
        if ahead > 0 && zn < 2 * count && (n as i32) <= cnt {
            let wn = (zn >= count) as u32;
            let bn = ((wn * stride + zn - wn * count) as usize) * nxy;
            let row = (y0 + first + dir * (n as i32 - 1)) as usize * nx as usize + x0 as usize;
            prefetch_l2(unsafe { w.add(2 * (bn + row)) } as *const f32);
        }
        let kf = if n == 1 { 1.0f32 } else { 2.0 };
        let on = unsafe { otab.add(4 * (n * offset_rows(rows)) as usize) };
        // Visits whose streamed row (lr + 4 dir) is a row of this strip inside the grid.
        let m_loc = if dir > 0 { ri.min(ny as i32 - y0) - first - 4 } else { first - 3 };
        if cnt > 0 {
            // win[k]: row first + dir (k - 4) + dir m at visit m (the y arm's sums are symmetric).
            let mut win = [Z4; 9];
            unroll!(8, |k| {
                win[k] = row_of(ta, off_a, first + dir * (k as i32 - 4));
            });
            // The visits, compiled twice: `$fast` when every streamed row is local (the usual case:
            // no halo tests in the rows at all).
            macro_rules! visit_rows {
                ($fast:expr) => {
                    'rows: {
                    unroll!(M, |m| {
                        if m as i32 >= cnt {
                            break 'rows;
                        }
                        let lr = first + dir * m as i32;
                        win[8] = if $fast || (m as i32) < m_loc { unsafe { *at(ta, lr + 4 * dir, 0) } } else { row_of(ta, off_a, lr + 4 * dir) };
                        let (pm2, pm1, pp1, pp2) = unsafe { (*at(ta, lr, -2), *at(ta, lr, -1), *at(ta, lr, 1), *at(ta, lr, 2)) };
                        let pp = unsafe { *sp.add((lr as u32 * npairs + p) as usize) };
                        let ((ia, ga), (ib, gb)) = (unpack_pos(pp[0]), unpack_pos(pp[1]));
                        let aa = coef_from_offset(unsafe { ldg_f32x4(on.add(4 * ia as usize)) }, ga);
                        let ab = coef_from_offset(unsafe { ldg_f32x4(on.add(4 * ib as usize)) }, gb);
                        let F4 { r0: l0r, i0: l0i, r1: l1r, i1: l1i } =
                            pair_terms(win[4], pm2, pm1, pp1, pp2, &win, |c0, xm, xp, ym, yp| st.apply_fma_y_first(c0, xm, xp, ym, yp));
                        // T_n = k L T_{n-1} - T_{n-2}: k = 1 at n = 1 (T_{-1} = 0: exactly L T_0), else 2.
                        let bp = at(tb, lr, 0);
                        let prev = unsafe { *bp };
                        let t = F4 {
                            r0: fma(kf, l0r, -prev.r0),
                            i0: fma(kf, l0i, -prev.i0),
                            r1: if in1 { fma(kf, l1r, -prev.r1) } else { 0.0 },
                            i1: if in1 { fma(kf, l1i, -prev.i1) } else { 0.0 },
                        };
                        unsafe { *bp = t };
                        let old = if m >= REG_ACC { unsafe { *sacc_at(m) } } else { acc[m.min(REG_ACC - 1)] };
                        let a0 = cmadd_fma((old.r0, old.i0), aa, (t.r0, t.i0));
                        let a1 = cmadd_fma((old.r1, old.i1), ab, (t.r1, t.i1));
                        let a = F4 { r0: a0.0, i0: a0.1, r1: a1.0, i1: a1.1 };
                        if m >= REG_ACC {
                            unsafe { *sacc_at(m) = a };
                        } else {
                            acc[m.min(REG_ACC - 1)] = a;
                        }
                        unroll!(8, |k| {
                            win[k] = win[k + 1];
                        });
                        // Keep the optimiser from hoisting later rows' loads (all of them: spills);
                        // in the fast visits two rows may overlap (measured faster).
                        if !$fast || m % 2 == 1 {
                            compiler_fence();
                        }
                    });
                    }
                };
            }
            if m_loc >= cnt {
                visit_rows!(true);
            } else {
                visit_rows!(false);
            }
        }
        // This CTA's T_n is complete and its reads of T_{n-1} are done: tell the neighbours (on their
        // barrier for this step's parity), then wait until both have done the same.
        sync_threads();
        let b = (n & 1) as usize;
        if tid == 0 {
            fence_release_shared_cta_cluster();
            if rank > 0 {
                unsafe { mbarrier_arrive_remote(bars.add(2 + b), rank - 1) }; // its "from below"
            }
            if rank + 1 < csize {
                unsafe { mbarrier_arrive_remote(bars.add(b), rank + 1) }; // its "from above"
            }
        }
        // Barrier b completes once per two steps: phase (n - 1) / 2 for step n. After the last step
        // this is also the DSMEM rule: no neighbour still reads this CTA's shared memory.
        let parity = ((n - 1) >> 1) & 1;
        if rank > 0 {
            while !unsafe { mbarrier_try_wait_parity(bars.add(b), parity) } {}
        }
        if rank + 1 < csize {
            while !unsafe { mbarrier_try_wait_parity(bars.add(2 + b), parity) } {}
        }
        fence_acquire_shared_cluster();
        n += 1;
    }

    // ---- W' = taper * acc ----
    let txa = if ownp { unsafe { *taper_x.add(x0 as usize) } } else { 0.0 };
    let txb = if ownp && in1 { unsafe { *taper_x.add(x0 as usize + 1) } } else { 0.0 };
    unroll!(M, |m| {
        if (m as i32) < cnt {
            let gy = (y0 + first + dir * m as i32) as usize;
            let ty = unsafe { *taper_y.add(gy) };
            let o = base + gy * nx as usize + x0 as usize;
            let (twa, twb) = (txa * ty, txb * ty);
            let a = if m >= REG_ACC { unsafe { *sacc_at(m) } } else { acc[m.min(REG_ACC - 1)] };
            unsafe {
                *(w.add(2 * o) as *mut F2) = F2([a.r0 * twa, a.i0 * twa]);
                if in1 {
                    *(w.add(2 * o + 2) as *mut F2) = F2([a.r1 * twb, a.i1 * twb]);
                }
            }
        }
    });
}
}
