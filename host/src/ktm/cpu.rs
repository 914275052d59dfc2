//! CPU reference: rayon over groups of image columns; per group the traces are the outer loop
//! (each trace is read from memory once per group, not once per column) and image time the
//! innermost, contiguous loop, as in the paper's CPU code. The time loop runs in two passes: the
//! traveltimes and weights of a whole column (branch-free, vectorised: square roots in SIMD), then
//! the interpolated reads (gathers). The per-contribution math is `gpu_kernels::ktm`, shared with
//! the kernels, so positions agree with the GPU bit for bit.

use gpu_kernels::ktm::interp::{contribution_at, TT_EXACT};
use gpu_kernels::ktm::{
    antialias_read, antialias_valid, contribution, lerp_pair, pair_geom, rcp_amp, sample_geom, scatter_weights, KtmConsts,
    PairGeom, SampleGeom, APERTURE,
};
use rayon::prelude::*;

use super::prep::Prepared;
use super::Plan;

/// Image columns per rayon task.
const GROUP: usize = 8;

/// Sample geometry of every image sample of column `col` (or of the v_rms(tau) function).
fn column_samples(plan: &Plan, col: usize) -> Vec<SampleGeom> {
    let c = &plan.consts;
    let vcol = if c.vel_stride == 0 { 0 } else { col };
    let v = &plan.vel[vcol * plan.grid.ntau..(vcol + 1) * plan.grid.ntau];
    (0..plan.grid.ntau).map(|it| sample_geom(c, plan.grid.tau(it), v[it])).collect()
}

/// Migration of every class: `classes * ncols * ntau` samples.
pub fn migrate(plan: &Plan, prep: &Prepared) -> Vec<f32> {
    match (plan.antialias, plan.corrections) {
        (true, _) => migrate_impl::<true, true>(plan, prep),
        (false, true) => migrate_impl::<false, true>(plan, prep),
        (false, false) => migrate_impl::<false, false>(plan, prep),
    }
}

fn migrate_impl<const AA: bool, const CORR: bool>(plan: &Plan, prep: &Prepared) -> Vec<f32> {
    let ntau = plan.grid.ntau;
    let ncols = plan.grid.ncols();
    let mut image = vec![0.0f32; plan.classes() * ncols * ntau];
    let shared = (plan.consts.vel_stride == 0).then(|| column_samples(plan, 0));
    let bar = crate::progress::work((plan.classes() * ncols.div_ceil(GROUP)) as u64, "ktm columns");
    for (k, range) in plan.class_ranges.iter().enumerate() {
        let class_image = &mut image[k * ncols * ntau..(k + 1) * ncols * ntau];
        class_image.par_chunks_mut(GROUP * ntau).enumerate().for_each(|(g, out)| {
            migrate_group::<AA, CORR>(plan, prep, range.clone(), g * GROUP, out, shared.as_deref());
            bar.inc(1);
        });
    }
    image
}

/// One group of columns starting at `col0` (`out` holds them), all traces of `traces`.
fn migrate_group<const AA: bool, const CORR: bool>(plan: &Plan, prep: &Prepared, traces: std::ops::Range<usize>,
    col0: usize, out: &mut [f32], shared: Option<&[SampleGeom]>) {
    let c: &KtmConsts = &plan.consts;
    let ntau = plan.grid.ntau;
    let ncols = out.len() / ntau;
    let stride = plan.stride();
    let len = c.stride;
    let own: Vec<Vec<SampleGeom>> = if shared.is_none() { (0..ncols).map(|j| column_samples(plan, col0 + j)).collect() } else { vec![] };
    let cols: Vec<&[SampleGeom]> = (0..ncols).map(|j| shared.unwrap_or_else(|| &own[j])).collect();
    // SoA copies of the two fields the bare traveltime pass needs, so it vectorises.
    let h2s: Vec<Vec<f32>> = cols.iter().map(|q| q.iter().map(|s| s.h2s).collect()).collect();
    let ivs: Vec<Vec<f32>> = cols.iter().map(|q| q.iter().map(|s| s.ivs).collect()).collect();
    let xy: Vec<(f32, f32)> = (0..ncols).map(|j| plan.column_xy(col0 + j)).collect();
    // Interpolated traveltimes: each column's node geometry (`cpu_interp`).
    let interp = c.tt_mode != TT_EXACT;
    let nodes: Vec<super::cpu_interp::ColumnNodes> = if !interp {
        vec![]
    } else if shared.is_some() {
        vec![super::cpu_interp::column_nodes(plan, 0)]
    } else {
        (0..ncols).map(|j| super::cpu_interp::column_nodes(plan, col0 + j)).collect()
    };
    let (mut s, mut w, mut m) = (vec![0.0f32; ntau], vec![0.0f32; ntau], vec![0.0f32; ntau]);
    for p in traces {
        let geom = plan.geom[p];
        let pairs = prep.pairs[p * stride..(p + 1) * stride].as_ptr();
        for j in 0..ncols {
            let pg = pair_geom(xy[j].0, xy[j].1, geom);
            if CORR && c.flags & APERTURE != 0 && pg.dm >= c.ap_dist {
                continue; // outside the distance aperture at every time
            }
            let column = &mut out[j * ntau..(j + 1) * ntau];
            if interp {
                super::cpu_interp::positions::<AA>(c, &pg, &nodes[if shared.is_some() { 0 } else { j }], &mut s, &mut m);
                if CORR {
                    let q = cols[j];
                    for it in 0..ntau {
                        w[it] = contribution_at::<CORR>(c, &pg, &q[it], s[it], m[it]).w;
                    }
                }
            }
            if !CORR {
                // Pass 1: positions (vectorised), pass 2: reads.
                if !interp {
                    positions(c, &pg, &h2s[j], &ivs[j], &mut s);
                }
                for it in 0..ntau {
                    // SAFETY: lerp_pair clamps its index into the trace's `len` pairs.
                    column[it] += unsafe { lerp_pair(pairs, len, s[it]) };
                }
            } else {
                let q = cols[j];
                for it in (0..ntau).filter(|_| !interp) {
                    let k = contribution::<AA, CORR>(c, &pg, &q[it]);
                    (s[it], w[it], m[it]) = (k.s, k.w, k.m);
                }
                for it in 0..ntau {
                    if w[it] == 0.0 {
                        continue;
                    }
                    let v = if AA {
                        if !antialias_valid(c, s[it]) {
                            continue;
                        }
                        // SAFETY: valid positions +- m stay inside the padding (prep::pad_for).
                        unsafe { antialias_read(pairs, len, s[it], m[it]) }
                    } else {
                        unsafe { lerp_pair(pairs, len, s[it]) }
                    };
                    column[it] += w[it] * v;
                }
            }
        }
    }
}

/// Read positions of the bare migration down one column: `contribution::<false, false>(..).s` for
/// every image time. On x86-64 CPUs with AVX2 and FMA a copy of the same formula compiled for them
/// (8 lanes, `vfmadd` and `vsqrtps`); the portable build has no FMA and emulates the fused
/// square-root argument in f64 (see `gpu_kernels::ktm::fma_tt`), about a third slower.
fn positions(c: &KtmConsts, pg: &PairGeom, h2s: &[f32], ivs: &[f32], s: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has the features the function is compiled for.
            unsafe { positions_avx2_fma(pg.ds2, pg.dr2, c.s_off, h2s, ivs, s) };
            return;
        }
    }
    for it in 0..s.len() {
        let q = SampleGeom { h2s: h2s[it], ivs: ivs[it], ..SampleGeom::default() };
        s[it] = contribution::<false, false>(c, pg, &q).s;
    }
}

/// [`positions`] with hardware FMA: sqrt(fma(ds2, ivs, h2s)) + sqrt(fma(dr2, ivs, h2s)) + s_off,
/// the shared traveltime (`gpu_kernels::ktm::traveltime`) operation for operation.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn positions_avx2_fma(ds2: f32, dr2: f32, s_off: f32, h2s: &[f32], ivs: &[f32], s: &mut [f32]) {
    for ((o, &h2), &iv) in s.iter_mut().zip(h2s).zip(ivs) {
        let ts = ds2.mul_add(iv, h2).sqrt();
        let tr = dr2.mul_add(iv, h2).sqrt();
        *o = (ts + tr) + s_off;
    }
}

/// Kirchhoff modelling, the adjoint of [`migrate`]: for every plan position, `stride + 1`
/// accumulated values in the padded-trace domain (`prep::finish_adjoint` turns them into traces).
pub fn model(plan: &Plan, image: &[f32]) -> Vec<f32> {
    match (plan.antialias, plan.corrections) {
        (true, _) => model_impl::<true, true>(plan, image),
        (false, true) => model_impl::<false, true>(plan, image),
        (false, false) => model_impl::<false, false>(plan, image),
    }
}

fn model_impl<const AA: bool, const CORR: bool>(plan: &Plan, image: &[f32]) -> Vec<f32> {
    let c = &plan.consts;
    let ntau = plan.grid.ntau;
    let ncols = plan.grid.ncols();
    let len = c.stride;
    let acc_len = plan.stride() + 1;
    let shared = (c.vel_stride == 0).then(|| column_samples(plan, 0));
    let class_of: Vec<usize> = plan.class_ranges.iter().enumerate().flat_map(|(k, r)| std::iter::repeat_n(k, r.len())).collect();
    let mut out = vec![0.0f32; plan.ntraces() * acc_len];
    out.par_chunks_mut(acc_len).enumerate().for_each(|(p, acc)| {
        let geom = plan.geom[p];
        let class_image = &image[class_of[p] * ncols * ntau..(class_of[p] + 1) * ncols * ntau];
        for col in 0..ncols {
            let (x, y) = plan.column_xy(col);
            let pg = pair_geom(x, y, geom);
            if CORR && c.flags & APERTURE != 0 && pg.dm >= c.ap_dist {
                continue;
            }
            let own;
            let q: &[SampleGeom] = match &shared {
                Some(q) => q,
                None => {
                    own = column_samples(plan, col);
                    &own
                }
            };
            let column = &class_image[col * ntau..(col + 1) * ntau];
            for it in 0..ntau {
                let k = contribution::<AA, CORR>(c, &pg, &q[it]);
                if k.w == 0.0 {
                    continue;
                }
                let v = k.w * column[it];
                if AA {
                    if !antialias_valid(c, k.s) {
                        continue;
                    }
                    let v = v * rcp_amp(k.m * k.m);
                    for (pos, coef) in [(k.s, v + v), (k.s - k.m, -v), (k.s + k.m, -v)] {
                        let (i, a, b) = scatter_weights(pos, len, coef);
                        acc[i as usize] += a;
                        acc[i as usize + 1] += b;
                    }
                } else {
                    let (i, a, b) = scatter_weights(k.s, len, v);
                    acc[i as usize] += a;
                    acc[i as usize + 1] += b;
                }
            }
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The FMA copy of the positions agrees with the shared contribution math (which emulates the
    /// fused argument in f64 on this build): identical except for rare double rounding.
    #[test]
    fn positions_match_the_shared_traveltime() {
        let c = KtmConsts { dt: 0.004, inv_dt: 250.0, s_off: 2.0, ..Default::default() };
        let n = 1000;
        let mut x = 0.37f32;
        let mut next = || {
            x = (x * 9.13 + 0.271).fract();
            x
        };
        let qs: Vec<SampleGeom> = (0..n).map(|it| sample_geom(&c, it as f32 * 0.004, 1500.0 + 2000.0 * next())).collect();
        let (h2s, ivs): (Vec<f32>, Vec<f32>) = qs.iter().map(|q| (q.h2s, q.ivs)).unzip();
        let mut differ = 0;
        for _ in 0..50 {
            let pg = pair_geom(100.0 * next(), 50.0, [3000.0 * next(), -200.0, 500.0 * next(), 1000.0 * next()]);
            let mut s = vec![0.0f32; n];
            positions(&c, &pg, &h2s, &ivs, &mut s);
            for it in 0..n {
                let want = contribution::<false, false>(&c, &pg, &qs[it]).s;
                assert!((s[it] - want).abs() <= 1e-6 * want.abs(), "{} vs {want}", s[it]);
                differ += (s[it] != want) as usize;
            }
        }
        assert!(differ <= 5, "{differ} of 50000 positions differ in the last bit");
    }
}
