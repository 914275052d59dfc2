//! The CPU reference: rayon over image columns, each column walking its traces (midpoint bins, then
//! the aperture test) in the same order as the GPU, computing the trace sample position of every
//! image sample with the mode's scheme (shared functions of `gpu_kernels::pstm`), then gathering
//! and accumulating. Same decisions and same floating-point operations as the kernels.

use std::sync::atomic::{AtomicU64, Ordering};

use gpu_kernels::pstm::traveltime::{Dsr, Model, Vti};
use gpu_kernels::pstm::{
    checked, classify, distances, dynamic_segment, exact_pos, interp, pack_trace, split, step_slope, Ctx, KParams, DEAD,
    DEAD_STEP, FAST, PAD, STEP,
};
use gpu_kernels::math::mul_add;
use rayon::prelude::*;

use super::{column_coefs, shared_coefs, Batch, MigrationStats, Plan, PstmImage, PstmParams, TraveltimeMode, TraveltimeModel};
use crate::traces::TraceSet;

/// Calls `g(batch trace, ds2, dr2)` for every trace of class `k` of `batch` whose midpoint is
/// within the aperture of the column at (x, y) (image-relative m), in batch (sorted) order.
#[inline(always)]
pub fn for_each_trace<G: FnMut(usize, f32, f32)>(kp: &KParams, batch: &Batch, k: u32, x: f32, y: f32, mut g: G) {
    let ((bx0, bx1), (by0, by1)) = kp.bins.around(x, y, kp.aperture);
    for by in by0..=by1 {
        let row = ((k * kp.bins.ny + by) * kp.bins.nx) as usize;
        let (r0, r1) = (batch.bin_start[row + bx0 as usize] as usize, batch.bin_start[row + bx1 as usize + 1] as usize);
        for t in r0..r1 {
            let h = batch.headers[t];
            let (ds2, dr2, md2) = distances(h[0], h[1], h[2], h[3], x, y);
            if md2 <= kp.aperture2 {
                g(t, ds2, dr2);
            }
        }
    }
}

/// Packs the traces of a batch: row t is `packed_len` (a, d) entries. Public, with [`pack_rows`],
/// for the benchmarks' timings of the GPU path's host steps.
pub fn pack_batch(traces: &TraceSet, batch: &Batch, packed_len: usize) -> Vec<[f32; 2]> {
    let mut out = vec![[0.0f32; 2]; batch.index.len() * packed_len];
    pack_rows(traces, &batch.index, packed_len, &mut out);
    out
}

/// Packs the traces `index` of `traces` into the rows of `out` (`packed_len` (a, d) entries each),
/// in parallel.
pub fn pack_rows(traces: &TraceSet, index: &[u32], packed_len: usize, out: &mut [[f32; 2]]) {
    out.par_chunks_mut(packed_len.max(1)).zip(index.par_iter()).for_each(|(row, &i)| {
        pack_trace(traces.trace(i as usize), row);
    });
}

/// Fills `pos[0..nz_pad]` with the trace sample position read for every image sample of one
/// (trace, column) pair (dead samples get `DEAD`); returns the exact evaluations made.
/// `iv2`, `eta`: the column's coefficients at samples 0..=nz_pad; `pts`: scratch.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
pub fn positions<M: Model>(mode: TraveltimeMode, kp: &KParams, c: &Ctx, iv2: &[f32], eta: &[f32], pos: &mut [f32],
    pts: &mut Vec<f32>) -> u64 {
    let nz_pad = kp.nz_pad as usize;
    match mode {
        TraveltimeMode::Exact => {
            for (z, ((p, &v), &e)) in pos[..nz_pad].iter_mut().zip(iv2).zip(eta).enumerate() {
                let z = z as u32;
                *p = checked(exact_pos::<M>(z, c, v, e), z, c);
            }
            nz_pad as u64
        }
        TraveltimeMode::Static8 => {
            let n = nz_pad / STEP as usize;
            pts.resize(n + 1, 0.0);
            for (k, p) in pts.iter_mut().enumerate() {
                *p = exact_pos::<M>(STEP * k as u32, c, iv2[8 * k], eta[8 * k]);
            }
            for q in 0..n {
                let (sa, sb) = (pts[q], pts[q + 1]);
                let za = STEP * q as u32;
                let cls = classify(sa, za, sb, za + STEP, c);
                fill_step(&mut pos[8 * q..8 * q + 8], cls, za, sa, step_slope(sa, sb, STEP), c);
            }
            (n + 1) as u64
        }
        TraveltimeMode::Dynamic { .. } => {
            let exact = |z: u32| exact_pos::<M>(z, c, iv2[z as usize], eta[z as usize]);
            let mut s0 = exact(0);
            let mut evals = 1u64;
            for seg in 0..nz_pad / 32 {
                let zs = 32 * seg as u32;
                let s32 = exact(zs + 32);
                evals += 1;
                evals += dynamic_segment(zs, s0, s32, kp.tol, kp.max_step, c, |o| exact(zs + o), |o, len, base, slope, cls| {
                    let z0 = (zs + o) as usize;
                    fill_step(&mut pos[z0..z0 + len as usize], cls, z0 as u32, base, slope, c);
                }) as u64;
                s0 = s32;
            }
            evals
        }
    }
}

struct ColumnArgs<'a> {
    p: &'a PstmParams,
    kp: &'a KParams,
    batch: &'a Batch,
    packed: &'a [[f32; 2]],
    plen: usize,
    mode: TraveltimeMode,
    iv2: &'a [f32],
    eta: &'a [f32],
    first: bool,
}

/// Whether this CPU has FMA (and AVX2): `mul_add` is then one instruction, inlined and vectorised,
/// instead of a call into libm; the results are the same (both round once).
fn has_fma() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("fma") && std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn column_fma<M: Model>(a: &ColumnArgs, col: usize, out: &mut [f32]) -> (u64, u64) { column::<M>(a, col, out) }

#[cfg(not(target_arch = "x86_64"))]
unsafe fn column_fma<M: Model>(a: &ColumnArgs, col: usize, out: &mut [f32]) -> (u64, u64) { column::<M>(a, col, out) }

/// One image column (all offset classes) for one batch: returns (exact evaluations, pairs).
#[inline(always)]
fn column<M: Model>(a: &ColumnArgs, col: usize, out: &mut [f32]) -> (u64, u64) {
    let (p, kp) = (a.p, a.kp);
    let nz_pad = kp.nz_pad as usize;
    let (x, y) = ((col / p.ny) as f32 * kp.dx, (col % p.ny) as f32 * kp.dy);
    let (mut acc, mut pos, mut pts) = (vec![0.0f32; nz_pad], vec![0.0f32; nz_pad], Vec::new());
    let (mut evals, mut pairs) = (0u64, 0u64);
    let mut list = Vec::new();
    for k in 0..p.noff {
        acc.fill(0.0);
        // The pairs first, then the work in a plain loop (a closure would not inherit the
        // caller's target features, and `mul_add` would become a libm call again).
        list.clear();
        for_each_trace(kp, a.batch, k as u32, x, y, |t, ds2, dr2| list.push((t, ds2, dr2)));
        for &(t, ds2, dr2) in &list {
            let c = kp.ctx(ds2, dr2);
            evals += positions::<M>(a.mode, kp, &c, a.iv2, a.eta, &mut pos, &mut pts);
            pairs += 1;
            gather(&mut acc, &pos, &a.packed[t * a.plen..(t + 1) * a.plen]);
        }
        let o = &mut out[k * nz_pad..(k + 1) * nz_pad];
        if a.first {
            o.copy_from_slice(&acc);
        } else {
            for (o, v) in o.iter_mut().zip(&acc) {
                *o += v;
            }
        }
    }
    (evals, pairs)
}

/// acc[z] += the packed trace's lerp at pos[z]: `lerp_packed` with the entry index clamped into the
/// trace (it always is: positions are DEAD or within the record up to rounding) so the loop has no
/// bounds checks and vectorises (AVX2 gathers).
#[inline(always)]
fn gather(acc: &mut [f32], pos: &[f32], tr: &[[f32; 2]]) {
    let last = tr.len() as i32 - 1;
    for (a, &s) in acc.iter_mut().zip(pos) {
        let (i, f) = split(s);
        let e = (i + PAD as i32).clamp(0, last);
        debug_assert_eq!(e, i + PAD as i32, "position {s} outside the packed trace");
        // SAFETY: 0 <= e <= last < tr.len().
        let [v, d] = unsafe { *tr.get_unchecked(e as usize) };
        *a += mul_add(f, d, v);
    }
}

/// Positions of one step's samples (`out[r]` for image sample z0 + r) by its class; the class test
/// is outside the loops so the FAST loop vectorises. Same values as `step_sample(cls, interp(..))`.
#[inline(always)]
fn fill_step(out: &mut [f32], cls: u32, z0: u32, base: f32, slope: f32, c: &Ctx) {
    match cls {
        FAST => {
            for (r, p) in out.iter_mut().enumerate() {
                *p = interp(r as f32, slope, base);
            }
        }
        DEAD_STEP => out.fill(DEAD),
        _ => {
            for (r, p) in out.iter_mut().enumerate() {
                *p = checked(interp(r as f32, slope, base), z0 + r as u32, c);
            }
        }
    }
}

/// The CPU migration (see the module docs). `plan` comes from [`super::plan`].
pub fn migrate(traces: &TraceSet, p: &PstmParams, plan: &Plan, mode: TraveltimeMode, model: TraveltimeModel) -> PstmImage {
    match model {
        TraveltimeModel::Dsr => run::<Dsr>(traces, p, plan, mode),
        TraveltimeModel::Vti => run::<Vti>(traces, p, plan, mode),
    }
}

fn run<M: Model>(traces: &TraceSet, p: &PstmParams, plan: &Plan, mode: TraveltimeMode) -> PstmImage {
    let kp = &plan.kp;
    let coefs = shared_coefs(p, kp);
    let (nz_pad, noff, plen) = (kp.nz_pad as usize, p.noff, plan.packed_len());
    let mut data = vec![0.0f32; p.columns() * noff * nz_pad];
    let (evals, pairs) = (AtomicU64::new(0), AtomicU64::new(0));
    let bar = crate::progress::work((plan.batches.len() * p.columns()) as u64, "pstm columns");
    for (bi, batch) in plan.batches.iter().enumerate() {
        let packed = pack_batch(traces, batch, plen);
        let fma = has_fma();
        data.par_chunks_mut(noff * nz_pad).enumerate().for_each(|(col, out)| {
            bar.inc(1);
            let mut scratch = (Vec::new(), Vec::new());
            let (iv2, eta) = column_coefs(p, &coefs, col, &mut scratch, nz_pad);
            let args = ColumnArgs { p, kp, batch, packed: &packed, plen, mode, iv2, eta, first: bi == 0 };
            // SAFETY: column_fma only runs where the CPU has AVX2 and FMA.
            let (e, n) = if fma { unsafe { column_fma::<M>(&args, col, out) } } else { column::<M>(&args, col, out) };
            evals.fetch_add(e, Ordering::Relaxed);
            pairs.fetch_add(n, Ordering::Relaxed);
        });
    }
    let pairs = pairs.into_inner();
    PstmImage {
        nx: p.nx,
        ny: p.ny,
        noff,
        nz: p.nz,
        nz_pad,
        data,
        stats: MigrationStats {
            traces_used: plan.traces_used,
            pairs,
            contributions: pairs * p.nz as u64,
            exact_evals: evals.into_inner(),
        },
    }
}

/// Sample positions of every (trace, column) pair of a run, for error statistics: calls
/// `g(positions)` per pair with one vector of nz_pad positions per entry of `modes` (dead samples
/// hold `DEAD`). `plan` must come from the last mode (its dynamic tolerance is used).
pub fn for_each_pair_positions<M: Model, G: FnMut(&[Vec<f32>]) + Send + Clone>(p: &PstmParams, plan: &Plan,
    modes: &[TraveltimeMode], g: G) {
    let kp = &plan.kp;
    let coefs = shared_coefs(p, kp);
    let nz_pad = kp.nz_pad as usize;
    (0..p.columns()).into_par_iter().for_each_with(g, |g, col| {
        let (x, y) = ((col / p.ny) as f32 * kp.dx, (col % p.ny) as f32 * kp.dy);
        let mut scratch = (Vec::new(), Vec::new());
        let (iv2, eta) = column_coefs(p, &coefs, col, &mut scratch, nz_pad);
        let mut pos = vec![vec![0.0f32; nz_pad]; modes.len()];
        let mut pts = Vec::new();
        for batch in &plan.batches {
            for k in 0..p.noff as u32 {
                for_each_trace(kp, batch, k, x, y, |_, ds2, dr2| {
                    let c = kp.ctx(ds2, dr2);
                    for (m, v) in modes.iter().zip(pos.iter_mut()) {
                        positions::<M>(*m, kp, &c, iv2, eta, v, &mut pts);
                    }
                    g(&pos);
                });
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::super::tests::small_params;
    use super::super::*;
    use super::*;
    use crate::synth;

    fn data(nz: usize) -> (TraceSet, PstmParams) {
        let p = small_params(nz);
        let mut h = synth::geometry::cross_spread(9, 50.0, 11, 50.0);
        for t in &mut h {
            t.sx += 130.0;
            t.gx += 130.0;
            t.sy += 240.0;
            t.gy += 240.0;
        }
        (synth::noise_traces(h, 2 * nz, 0.004, 3), p)
    }

    #[test]
    fn static8_equals_exact_on_the_8_sample_grid() {
        let (tr, p) = data(77);
        let ex = migrate_cpu(&tr, &p, TraveltimeMode::Exact, TraveltimeModel::Vti);
        let s8 = migrate_cpu(&tr, &p, TraveltimeMode::Static8, TraveltimeModel::Vti);
        assert!(ex.stats.pairs > 0);
        let mut nonzero = 0;
        for (i, (a, b)) in ex.data.iter().zip(&s8.data).enumerate() {
            if (i % ex.nz_pad).is_multiple_of(8) {
                assert_eq!(a, b, "sample {i}");
                nonzero += (*a != 0.0) as usize;
            }
        }
        assert!(nonzero > 20);
        let d = crate::synth::rel_l2(&s8.data, &ex.data);
        assert!(d > 0.0 && d < 0.5, "{d}");
        assert!(ex.data.chunks(ex.nz_pad).all(|c| c[77..].iter().all(|&v| v == 0.0)));
    }

    #[test]
    fn dynamic_with_step_8_is_static8_and_saves_evaluations_with_32() {
        let (tr, mut p) = data(200);
        let s8 = migrate_cpu(&tr, &p, TraveltimeMode::Static8, TraveltimeModel::Dsr);
        p.dynamic_max_step = 8;
        let d8 = migrate_cpu(&tr, &p, TraveltimeMode::Dynamic { tolerance: 1.0 }, TraveltimeModel::Dsr);
        assert_eq!(s8.data, d8.data);
        p.dynamic_max_step = 32;
        let d32 = migrate_cpu(&tr, &p, TraveltimeMode::Dynamic { tolerance: 1e-3 }, TraveltimeModel::Dsr);
        assert!(d32.stats.exact_evals < s8.stats.exact_evals, "{} vs {}", d32.stats.exact_evals, s8.stats.exact_evals);
    }

    fn migrate_cpu(tr: &TraceSet, p: &PstmParams, m: TraveltimeMode, model: TraveltimeModel) -> PstmImage {
        super::super::migrate(tr, p, m, model, &[crate::Backend::Cpu]).unwrap()
    }
}
