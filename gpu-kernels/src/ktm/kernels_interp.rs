//! Kirchhoff migration kernels with interpolated traveltimes (static8, dynamic; the math is
//! `super::interp`, shared with the CPU reference, so both read the same positions bit for bit).
//!
//! The columns layout (`kernels::mig_columns`): one warp per image column, lane l owning image
//! times l, l + 32, .., l + 32 (K - 1) of the block row, the block's warps walking the staged
//! traces in step. Row k of a warp is exactly one interpolation segment (32 samples from a
//! multiple of 32), so the traces go through in batches of 32 / K:
//! - *nodes*: lane l = K b + g takes trace b of the batch, segment g: its five node positions (and
//!   two midpoints for dynamic), the segment's steps, and one [`QuarterStep`] (base, slope) per
//!   quarter written to the warp's table in shared memory, laid out [trace][quarter][row] so that
//!   one 16-byte load gives a lane the steps of two rows. Every lane is busy: 5 (dynamic 7) exact traveltimes per
//!   lane per batch of 32 / K traces, 5 K / 32 per trace, against K for the exact kernel;
//! - *reads*: for each trace of the batch and each pair of rows, lane l loads its quarter's two
//!   steps (one broadcast 16-byte shared-memory load), interpolates each position (one FMA) and
//!   reads the trace. Static8 and dynamic steps are read alike; only the node phase differs.
//!
//! Flavours as the exact kernels: `_bare` (K = 8, the magic-number floor of `mig_columns2`),
//! `_corr` and `_aa` (K = 4; the AA length is interpolated like the position). `ktm_mig_static8_bare2`
//! (read offset >= 0) also sorts each trace's block row by where its reads fall against the trace
//! end, from two ballots of the node phase: all below it (read without the clamp), all past it
//! (not read: they would add the trailing zero pair) or straddling it (clamped).

// On the host only the entry points' descriptors are used (see `kernels.rs`).
#![cfg_attr(not(target_arch = "nvptx64"), allow(dead_code, unused_imports, unused_variables, unused_assignments))]

use super::interp::*;
use super::kernels::{column_xy, ldg_pair, ldg_quad, min_u32, read_global, sample_at, store_column};
use crate::unroll;
use super::*;
use crate::device::*;


/// Two f32 on an 8-byte boundary (one 64-bit shared-memory access).
#[derive(Clone, Copy)]
#[repr(C, align(8))]
struct F2([f32; 2]);
/// Four f32 on a 16-byte boundary (one 128-bit shared-memory access).
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct F4([f32; 4]);

/// Ballots of the node phase for the bare static8 reads at a non-negative read offset
/// ([`static8_reads_at_trace_end`] of each lane's (trace, segment)): bit l of `inside` where lane
/// l's reads need no clamp, of `past` where every one is the trailing zero pair (see `read_bare`).
#[inline(always)]
fn trace_end_ballots(s: &[f32; 5], stride: u32, batch: u32) -> (u32, u32) {
    let (inside, past) = static8_reads_at_trace_end(s, stride, batch);
    (vote_ballot(inside), vote_ballot(past))
}

/// The bare static8 read of one trace into a lane's K image times: `tab` the trace's quarter of
/// the step table; `pairs` the batch's first trace pre-offset by `-FLOOR_MAGIC_BITS` pairs, the
/// trace `off` pairs after it, `magic` = FLOOR_MAGIC + off and `end` = off + stride (`0 <= end <=
/// 2^22`: the magic floor's index is then the pair's index from `pairs`, clamped at `end - 1`, and
/// its fraction that of the position alone, as `split_index_magic` documents). `END`: clamp the
/// index at the trace end (else every position lies below it, see [`trace_end_ballots`]).
#[inline(always)]
unsafe fn read_bare<const K: usize, const END: bool>(tab: *const u8, pairs: *const [f32; 2], jf: f32, magic: f32, end: u32,
    acc: &mut [f32; K], acc_b: &mut [f32; K]) {
    let mut sample = |k: usize, sb: f32, sl: f32| {
        // No clamp at 0: the host runs this kernel at a read offset >= 0, where every node is
        // non-negative and so is every position between two of them.
        let pos = crate::pstm::interp(jf, sl, sb);
        let (b, f) = if END { split_index_magic(pos, end, magic) } else { split_index_magic_inside(pos, magic) };
        let [a, d] = unsafe { ldg_pair(pairs.wrapping_add(b as usize)) };
        acc[k] += a;
        acc_b[k] = crate::math::mul_add(f, d, acc_b[k]);
    };
    // Two rows per 16-byte table read.
    unroll!(K / 2, |kp| {
        let F4([b0, s0, b1, s1]) = unsafe { *(tab.add(16 * kp) as *const F4) };
        sample(2 * kp, b0, s0);
        sample(2 * kp + 1, b1, s1);
    });
}

#[inline(always)]
unsafe fn mig_interp<const K: usize, const DYN: bool, const AA: bool, const CORR: bool, const CLAMP: bool>(c: &KtmConsts, geom: *const [f32; 4],
    data: *const [f32; 2], vel: *const f32, image: *mut f32) {
    // Bare static8 at a read offset >= 0: each trace's reads split at the trace end (see
    // `trace_end_ballots`); the other flavours clamp every read.
    let split: bool = !DYN && !AA && !CORR && !CLAMP;
    let lane = thread_idx_x();
    let warp = thread_idx_y();
    let tid = warp * 32 + lane;
    let nthreads = 32 * COL_WARPS;
    let col_req = block_idx_x() * COL_WARPS + warp;
    let active = col_req < c.ncols;
    let col_l = if active { col_req } else { c.ncols - 1 };
    let (x, y) = column_xy(c, col_l);
    let zb = block_idx_y() * 32 * K as u32;
    let it0 = zb + lane;
    let kk = K as u32;
    let batch = 32 / kk;
    // Node phase: this lane's trace of each batch and its segment.
    let (tb, seg) = (lane / kk, lane % kk);
    let z0 = zb + 32 * seg;
    // Segments below the image (a partial last block row) are never stored: they need not be read.
    let below_image = if split { vote_ballot(z0 >= c.ntau) } else { 0 };
    let vcol = unsafe { vel.add(col_l as usize * c.vel_stride as usize) };
    let v_at = |z: u32| unsafe { *vcol.add(min_u32(z, c.ntau - 1) as usize) };
    let nq = [0u32, 8, 16, 24, 32].map(|o| node_sample(c, z0 + o, v_at(z0 + o)));
    let mq = [12u32, 20].map(|o| node_sample(c, z0 + o, v_at(z0 + o)));
    // Read phase: per-sample geometry for the corrections, position within the quarter.
    let mut q = [SampleGeom::default(); K];
    if CORR {
        unroll!(K, |k| {
            q[k] = unsafe { sample_at(c, vel, col_l, it0 + 32 * k as u32) };
        });
    }
    let (jf, quarter) = ((lane % STEP) as f32, lane / STEP);
    let mut acc = [0.0f32; K];
    let mut acc_b = [0.0f32; K];
    // Step tables, [trace of the batch][quarter][row] of (base, slope), quarters `qs` bytes apart.
    let coords = dynamic_shared::<[f32; 4]>();
    let qs = quarter_stride(kk);
    let tables = unsafe { (coords.add(nthreads as usize) as *mut u8).add((warp * TABLE_BYTES) as usize) };
    let mtables = unsafe { (coords.add(nthreads as usize) as *mut u8).add(((COL_WARPS + warp) * TABLE_BYTES) as usize) };
    let w_off = (tb * 4 * qs + seg * 8) as usize;
    let seg_n = div_ceil_nz(c.ntraces, nonzero(grid_dim_z()));
    let mut base = block_idx_z() * seg_n;
    let end = min_u32(base + seg_n, c.ntraces);
    let stride = c.stride as usize;
    while base < end {
        let n = min_u32(nthreads, end - base);
        if tid < n {
            unsafe { *coords.add(tid as usize) = ldg_quad(geom.add((base + tid) as usize)) };
        }
        sync_threads();
        let mut j = 0;
        while j < n {
            let nb = min_u32(batch, n - j);
            // Nodes of trace tb (the batch's last for lanes past its end: computed, never read).
            let pg = pair_geom(x, y, unsafe { *coords.add((j + min_u32(tb, nb - 1)) as usize) });
            let nd = nq.map(|g| node::<AA>(c, &pg, &g));
            let s = nd.map(|v| v.s);
            let steps = if DYN {
                let m = mq.map(|g| node::<false>(c, &pg, &g).s);
                dynamic_steps(&s, m[0], m[1], c.tt_tol)
            } else {
                STATIC8_STEPS
            };
            let ms = nd.map(|v| v.m);
            // Where the batch's (trace, segment)s read, as ballots (bit K b + g: trace b, segment g).
            let (inside, past) = if split { trace_end_ballots(&s, c.stride, batch) } else { (0, 0) };
            let past = past | below_image;
            unroll!(4, |qi| {
                let st = if DYN { quarter_step(&s, qi as u32, steps[qi]) } else { static8_step(&s, qi as u32) };
                let off = w_off + (qi as u32 * qs) as usize;
                unsafe { *(tables.add(off) as *mut F2) = F2([st.base, st.slope]) };
                if AA {
                    let mt = if DYN { quarter_step(&ms, qi as u32, steps[qi]) } else { static8_step(&ms, qi as u32) };
                    unsafe { *(mtables.add(off) as *mut F2) = F2([mt.base, mt.slope]) };
                }
            });
            sync_warp();
            // The batch's traces one stride apart: a 64-bit add per trace instead of a multiply
            // and the pointer's reload. The bare kernel's pointer is pre-offset so that the
            // magic-number bits index it directly (wrapping: only the sum is used).
            let magic_off = if CORR { 0 } else { FLOOR_MAGIC_BITS as usize };
            if split {
                // `lane / 32` is 0 (blocks are 32 lanes wide) but not known uniform to ptxas: it keeps
                // the pointer in vector registers, where each read's wide multiply-add takes its 8 as
                // an immediate (from a uniform register the 8 is moved into a register per read).
                let first = data.wrapping_add((base + j + lane / 32) as usize * stride).wrapping_sub(magic_off);
                // Lanes of traces past the batch's end (nb < 32 / K at a staging pass's end) count as
                // past the trace end: those traces are not read.
                let valid = u32::MAX.wrapping_shr(32 - nb * kk); // 1 <= nb <= 32 / K
                let (inside, past) = (inside & valid, past | !valid);
                // Every trace of the batch in order (the sums' order), unrolled: table offsets and
                // ballot masks are constants. The tests are warp-uniform (the warp's K rows are the
                // trace's K segments).
                unroll!(32 / K, |bb| {
                    let t = bb as u32;
                    let all = (((1u64 << kk) - 1) as u32) << (kk * t);
                    // Trace t's pairs start t strides after the batch's first: the offset rides in
                    // the magic constant (FLOOR_MAGIC + t stride, exact below 2^22), so all reads
                    // share one pointer.
                    let (off, magic) = (t * c.stride, f32::from_bits(FLOOR_MAGIC_BITS + t * c.stride));
                    let tab = unsafe { tables.add(((t * 4 + quarter) * qs) as usize) };
                    if inside & all == all {
                        unsafe { read_bare::<K, false>(tab, first, jf, magic, off + c.stride, &mut acc, &mut acc_b) };
                    } else if past & all != all {
                        unsafe { read_bare::<K, true>(tab, first, jf, magic, off + c.stride, &mut acc, &mut acc_b) };
                    } // else every read is the trailing zero pair: nothing to add
                });
                sync_warp();
                j += nb;
                continue;
            }
            let mut next = data.wrapping_add((base + j) as usize * stride).wrapping_sub(magic_off);
            for bb in 0..nb {
                // The trace's pairs (bare: pre-offset for the magic-number index).
                let pairs = next;
                next = next.wrapping_add(stride);
                let pgr = if CORR { pair_geom(x, y, unsafe { *coords.add((j + bb) as usize) }) } else { pg };
                if CORR && c.flags & APERTURE != 0 && pgr.dm >= c.ap_dist {
                    continue; // outside the distance aperture at every time (uniform in the warp)
                }
                let r_off = (bb * 4 * qs + quarter * qs) as usize;
                // One sample: row k's step (base, slope) and AA length step (mb, msl).
                let mut sample = |k: usize, sb: f32, sl: f32, mb: f32, msl: f32| {
                    let pos = crate::pstm::interp(jf, sl, sb);
                    if !CORR {
                        // The magic floor needs s >= 0: positions before the padded trace read its
                        // leading zeros. Without CLAMP the host guarantees s >= 0 (read offset >= 0:
                        // every node is, and a static8 position is an FMA between two nodes).
                        let s = if !CLAMP || pos > 0.0 { pos } else { 0.0 };
                        let (b, f) = split_index_magic(s, c.stride, FLOOR_MAGIC);
                        let [a, d] = unsafe { ldg_pair(pairs.wrapping_add(b as usize)) };
                        acc[k] += a;
                        acc_b[k] = crate::math::mul_add(f, d, acc_b[k]);
                    } else {
                        let m = if AA { crate::pstm::interp(jf, msl, mb) } else { 1.0 };
                        let ct = contribution_at::<CORR>(c, &pgr, &q[k], pos, m);
                        acc[k] += unsafe { read_global::<AA, CORR>(c, pairs, &ct) };
                    }
                };
                // Two rows per 16-byte table read.
                unroll!(K / 2, |kp| {
                    let F4([b0, s0, b1, s1]) = unsafe { *(tables.add(r_off + 16 * kp) as *const F4) };
                    let F4([mb0, ms0, mb1, ms1]) = if AA { unsafe { *(mtables.add(r_off + 16 * kp) as *const F4) } } else { F4([0.0; 4]) };
                    sample(2 * kp, b0, s0, mb0, ms0);
                    sample(2 * kp + 1, b1, s1, mb1, ms1);
                });
            }
            sync_warp();
            j += nb;
        }
        sync_threads();
        base += nthreads;
    }
    if active {
        unsafe { store_column::<K>(c, image, col_l, it0, &acc, &acc_b) };
    }
}

macro_rules! interp_entry {
    ($name:ident as $desc:ident, $k:expr, $dyn:expr, $aa:expr, $corr:expr) => { interp_entry!($name as $desc, $k, $dyn, $aa, $corr, true); };
    ($name:ident as $desc:ident, $k:expr, $dyn:expr, $aa:expr, $corr:expr, $clamp:expr) => { crate::kernel! {
        pub unsafe fn $name(c: KtmConsts, geom: *const [f32; 4], data: *const [f32; 2], vel: *const f32,
            image: *mut f32) as $desc {
            unsafe { mig_interp::<$k, $dyn, $aa, $corr, $clamp>(&c, geom, data, vel, image) }
        }
    } };
}

interp_entry!(ktm_mig_static8_bare as KTM_MIG_STATIC8_BARE, COL_K_BARE, false, false, false);
// Read offset >= 0 (no clamp at position 0: one instruction of ~16 per contribution).
interp_entry!(ktm_mig_static8_bare2 as KTM_MIG_STATIC8_BARE2, COL_K_BARE, false, false, false, false);
interp_entry!(ktm_mig_static8_corr as KTM_MIG_STATIC8_CORR, COL_K_CORR, false, false, true);
interp_entry!(ktm_mig_static8_aa as KTM_MIG_STATIC8_AA, COL_K_CORR, false, true, true);
interp_entry!(ktm_mig_dynamic_bare as KTM_MIG_DYNAMIC_BARE, COL_K_BARE, true, false, false);
interp_entry!(ktm_mig_dynamic_corr as KTM_MIG_DYNAMIC_CORR, COL_K_CORR, true, false, true);
interp_entry!(ktm_mig_dynamic_aa as KTM_MIG_DYNAMIC_AA, COL_K_CORR, true, true, true);
