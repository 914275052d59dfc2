//! CPU reference: the 2+2+1 search of Table 1, enhancement and NMO, multi-threaded with rayon.
//!
//! The search is parallel over parameter traces and, inside each, over chunks of time samples
//! (the paper's OpenMP loop is the time loop). Per parameter trace the shifts of the (A, D) and
//! (B, E) scans are split once (they do not depend on t0); per (t0, combination) equation (2) is
//! evaluated directly, per trace a contiguous window of N + 1 samples interpolated into N stack
//! and energy accumulators (a vectorisable loop). The hot loops are compiled twice, once for
//! AVX2 + FMA (chosen at run time when the CPU has them) and once for the baseline, so that
//! `mul_add` is one instruction where it can be.

use rayon::prelude::*;

use super::{EnhanceSetup, Estimate, Setup, MAX_WINDOW};
use gpu_kernels::nlbf as k;

/// Time samples per parallel task of the search.
const T_CHUNK: usize = 32;

/// Shift of every (combination, row) of one scan, split into (floor, fraction).
type Shifts = Vec<(i32, f32)>;

/// The 2+2+1 search for every parameter trace: (codes, semblance), `[p * ns + t]`.
pub fn estimate(setup: &Setup, data: &[f32]) -> (Vec<u32>, Vec<f32>) {
    let all: Vec<usize> = (0..setup.np()).collect();
    estimate_subset(setup, data, &all)
}

/// The search for the listed parameter traces only: results `[i * ns + t]` for `ptraces[i]`
/// (benchmarks time a subset and scale; tests compare subsets).
pub fn estimate_subset(setup: &Setup, data: &[f32], ptraces: &[usize]) -> (Vec<u32>, Vec<f32>) {
    let ns = setup.ns;
    let mut code = vec![0u32; ptraces.len() * ns];
    let mut sem = vec![0f32; ptraces.len() * ns];
    let bar = crate::progress::work(ptraces.len() as u64, "nlbf parameter traces");
    code.par_chunks_mut(ns).zip(sem.par_chunks_mut(ns)).zip(ptraces.par_iter()).for_each(|((code_p, sem_p), &p)| {
        bar.inc(1);
        // An empty aperture: nothing to search (the parameter trace is left unestimated, S = 0).
        if (0..3).any(|phase| setup.apertures.list(phase, p).is_empty()) {
            return;
        }
        let kf1 = scan_shifts(setup, p, 0);
        let kf2 = scan_shifts(setup, p, 1);
        code_p.par_chunks_mut(T_CHUNK).zip(sem_p.par_chunks_mut(T_CHUNK)).enumerate().for_each(|(ch, (c, s))| {
            let t_first = ch * T_CHUNK;
            run_chunk(setup, data, p, t_first, &kf1, &kf2, c, s);
        });
    });
    (code, sem)
}

/// The split shifts of every combination of scan `phase` (0 = (A, D), 1 = (B, E)) on the rows of
/// parameter trace `p`: entry `combo * m + r`.
fn scan_shifts(setup: &Setup, p: usize, phase: usize) -> Shifts {
    let t = &setup.tables;
    let rows = setup.apertures.list(phase, p);
    let (pv, qv) = if phase == 0 { (t.a(), t.d()) } else { (t.b(), t.e()) };
    let mut out = Vec::with_capacity(pv.len() * qv.len() * rows.len());
    for &pa in pv {
        for &qa in qv {
            let (a, b, d, e) = if phase == 0 { (pa, 0.0, qa, 0.0) } else { (0.0, pa, 0.0, qa) };
            for &tr in rows {
                let (dx, dy) = setup.offset(p, tr);
                out.push(k::split_shift(k::shift_samples(a, b, 0.0, d, e, dx, dy, setup.inv_dt)));
            }
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn run_chunk(setup: &Setup, data: &[f32], p: usize, t_first: usize, kf1: &Shifts, kf2: &Shifts, code: &mut [u32],
    sem: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if fma_available() {
            // SAFETY: the CPU has AVX2 and FMA (checked at run time).
            unsafe { run_chunk_fma(setup, data, p, t_first, kf1, kf2, code, sem) };
            return;
        }
    }
    run_chunk_impl(setup, data, p, t_first, kf1, kf2, code, sem);
}

#[cfg(target_arch = "x86_64")]
fn fma_available() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
#[allow(clippy::too_many_arguments)]
unsafe fn run_chunk_fma(setup: &Setup, data: &[f32], p: usize, t_first: usize, kf1: &Shifts, kf2: &Shifts,
    code: &mut [u32], sem: &mut [f32]) {
    run_chunk_impl(setup, data, p, t_first, kf1, kf2, code, sem)
}

/// Table 1, lines 10-14, for the time samples `t_first .. t_first + code.len()` of parameter trace p.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn run_chunk_impl(setup: &Setup, data: &[f32], p: usize, t_first: usize, kf1: &Shifts, kf2: &Shifts,
    code: &mut [u32], sem: &mut [f32]) {
    let t = &setup.tables;
    let rows1 = setup.apertures.list(0, p);
    let rows2 = setup.apertures.list(1, p);
    let rows3 = setup.apertures.list(2, p);
    let (m1, m2, m3) = (rows1.len(), rows2.len(), rows3.len());
    let ev = Eval { data, ns: setup.ns, h: setup.half, n: 2 * setup.half + 1 };
    let mut kf3: Shifts = vec![(0, 0.0); m3];
    for (i, (c_out, s_out)) in code.iter_mut().zip(sem.iter_mut()).enumerate() {
        let t0 = t_first + i;
        // Line 11: B = C = E = 0, scan (A, D) on aperture 1.
        let (mut bs, mut ad) = (-1.0f32, u32::MAX);
        for c in 0..t.n_ad() {
            let (num, den) = ev.sums(t0, rows1, &kf1[c * m1..(c + 1) * m1]);
            let s = k::semblance(num, den, m1 as u32);
            if k::better(s, c as u32, bs, ad) {
                bs = s;
                ad = c as u32;
            }
        }
        // Line 12: A = C = D = 0, scan (B, E) on aperture 2.
        let (mut bs, mut be) = (-1.0f32, u32::MAX);
        for c in 0..t.n_be() {
            let (num, den) = ev.sums(t0, rows2, &kf2[c * m2..(c + 1) * m2]);
            let s = k::semblance(num, den, m2 as u32);
            if k::better(s, c as u32, bs, be) {
                bs = s;
                be = c as u32;
            }
        }
        // Line 13: A, B, D, E fixed, scan C on aperture 3; its best S is the output S.
        let (a, d) = (t.a()[ad as usize / t.nd], t.d()[ad as usize % t.nd]);
        let (b, e) = (t.b()[be as usize / t.ne], t.e()[be as usize % t.ne]);
        let (mut bs, mut bc) = (-1.0f32, u32::MAX);
        for (ic, &c) in t.c().iter().enumerate() {
            for (slot, &tr) in kf3.iter_mut().zip(rows3) {
                let (dx, dy) = setup.offset(p, tr);
                *slot = k::split_shift(k::shift_samples(a, b, c, d, e, dx, dy, setup.inv_dt));
            }
            let (num, den) = ev.sums(t0, rows3, &kf3);
            let s = k::semblance(num, den, m3 as u32);
            if k::better(s, ic as u32, bs, bc) {
                bs = s;
                bc = ic as u32;
            }
        }
        *c_out = t.code(ad, be, bc);
        *s_out = bs;
    }
}

/// Equation (2)'s sums for one operator at t0.
struct Eval<'a> {
    data: &'a [f32],
    ns: usize,
    h: usize,
    n: usize,
}

impl Eval<'_> {
    /// (sum_j (sum_i u)^2, sum_j sum_i u^2) over the window around t0, traces `rows` shifted by
    /// `kf` (same order). Summation order: per window sample over traces in list order, then over
    /// window samples in order (the paper-faithful kernel uses the same order).
    #[inline(always)]
    fn sums(&self, t0: usize, rows: &[u32], kf: &[(i32, f32)]) -> (f32, f32) {
        if self.n <= LANES { self.sums_lanes(t0, rows, kf) } else { self.sums_any(t0, rows, kf) }
    }

    /// Windows of up to LANES samples: every trace fills a fixed LANES-wide accumulator (two AVX
    /// vectors, fully unrolled); lanes past the window are computed and ignored, which is cheaper
    /// than a remainder loop of N = 11 scalar iterations.
    #[inline(always)]
    fn sums_lanes(&self, t0: usize, rows: &[u32], kf: &[(i32, f32)]) -> (f32, f32) {
        let n = self.n;
        let mut s = [0f32; LANES];
        let mut e = [0f32; LANES];
        let ns = self.ns as i64;
        let top = t0 as i64 - self.h as i64;
        for (&tr, &(kk, f)) in rows.iter().zip(kf) {
            let trace = &self.data[tr as usize * self.ns..(tr as usize + 1) * self.ns];
            let start = top + kk as i64;
            if start >= 0 && start + (LANES as i64) < ns {
                let w: &[f32; LANES + 1] = trace[start as usize..start as usize + LANES + 1].try_into().unwrap();
                for j in 0..LANES {
                    let v = k::lerp(w[j], w[j + 1], f);
                    s[j] += v;
                    e[j] = k::add_sq(e[j], v);
                }
            } else {
                for j in 0..n {
                    let v = k::shifted_sample(trace, top + j as i64, kk, f);
                    s[j] += v;
                    e[j] = k::add_sq(e[j], v);
                }
            }
        }
        let (mut num, mut den) = (0f32, 0f32);
        for j in 0..n {
            num = k::add_sq(num, s[j]);
            den += e[j];
        }
        (num, den)
    }

    /// Any window length (up to MAX_WINDOW).
    fn sums_any(&self, t0: usize, rows: &[u32], kf: &[(i32, f32)]) -> (f32, f32) {
        let n = self.n;
        let mut s = [0f32; MAX_WINDOW];
        let mut e = [0f32; MAX_WINDOW];
        let (s, e) = (&mut s[..n], &mut e[..n]);
        let ns = self.ns as i64;
        let top = t0 as i64 - self.h as i64;
        for (&tr, &(kk, f)) in rows.iter().zip(kf) {
            let trace = &self.data[tr as usize * self.ns..(tr as usize + 1) * self.ns];
            let start = top + kk as i64;
            if start >= 0 && start + (n as i64) < ns {
                let w = &trace[start as usize..start as usize + n + 1];
                for j in 0..n {
                    let v = k::lerp(w[j], w[j + 1], f);
                    s[j] += v;
                    e[j] = k::add_sq(e[j], v);
                }
            } else {
                for j in 0..n {
                    let v = k::shifted_sample(trace, top + j as i64, kk, f);
                    s[j] += v;
                    e[j] = k::add_sq(e[j], v);
                }
            }
        }
        let (mut num, mut den) = (0f32, 0f32);
        for j in 0..n {
            num = k::add_sq(num, s[j]);
            den += e[j];
        }
        (num, den)
    }
}

/// Accumulator width of the common-window path (windows up to 16 samples).
const LANES: usize = 16;

/// Semblance of one combination of one phase at (p, t0), as the reference evaluates it: `phase`
/// 0 = (A, D) with `combo` = iA * nD + iD; 1 = (B, E); 2 = C with `combo` = iC and the fixed
/// (ad, be) picks in `fixed`. Tests use it to judge near-ties between two backends' picks.
pub fn phase_semblance(setup: &Setup, data: &[f32], p: usize, t0: usize, phase: usize, combo: u32, fixed: (u32, u32)) -> f32 {
    let t = &setup.tables;
    let rows = setup.apertures.list(phase, p);
    let op = match phase {
        0 => [t.a()[combo as usize / t.nd], 0.0, 0.0, t.d()[combo as usize % t.nd], 0.0],
        1 => [0.0, t.b()[combo as usize / t.ne], 0.0, 0.0, t.e()[combo as usize % t.ne]],
        _ => {
            let (ad, be) = (fixed.0 as usize, fixed.1 as usize);
            [t.a()[ad / t.nd], t.b()[be / t.ne], t.c()[combo as usize], t.d()[ad % t.nd], t.e()[be % t.ne]]
        }
    };
    let kf: Shifts = rows
        .iter()
        .map(|&tr| {
            let (dx, dy) = setup.offset(p, tr);
            k::split_shift(k::shift_samples(op[0], op[1], op[2], op[3], op[4], dx, dy, setup.inv_dt))
        })
        .collect();
    let ev = Eval { data, ns: setup.ns, h: setup.half, n: 2 * setup.half + 1 };
    let (num, den) = ev.sums(t0, rows, &kf);
    k::semblance(num, den, rows.len() as u32)
}

/// The operator {A..E} at (x, y, t0) interpolated between the parameter traces (x, y relative to
/// the estimate's origin), exactly as the enhancement kernel computes it.
pub fn operator_at(est: &Estimate, x: f32, y: f32, t0: usize) -> [f32; 5] {
    let g = &est.grid;
    let (ix, wx) = k::grid_cell(x, (1.0 / g.sx) as f32, g.nx as u32);
    let (iy, wy) = k::grid_cell(y, (1.0 / g.sy) as f32, g.ny as u32);
    let (ix, iy) = (ix as usize, iy as usize);
    let ix1 = if ix + 1 < g.nx { ix + 1 } else { ix };
    let iy1 = if iy + 1 < g.ny { iy + 1 } else { iy };
    let at = |gx: usize, gy: usize| est.tables.decode(est.code[(gy * g.nx + gx) * est.ns + t0]);
    let (o00, o10, o01, o11) = (at(ix, iy), at(ix1, iy), at(ix, iy1), at(ix1, iy1));
    let mut op = [0f32; 5];
    for q in 0..5 {
        op[q] = k::bilinear(o00[q], o10[q], o01[q], o11[q], wx, wy);
    }
    op
}

/// Enhancement on the CPU: parallel over traces.
pub fn enhance(setup: &EnhanceSetup, est: &Estimate, data: &[f32]) -> Vec<f32> {
    let ns = setup.ns;
    // The setup's outputs (every trace of a whole setup; a subset's first traces).
    let mut out = vec![0f32; setup.outputs() * ns];
    let bar = crate::progress::work(setup.outputs() as u64, "nlbf enhance");
    out.par_chunks_mut(ns).enumerate().for_each(|(n, row)| {
        bar.inc(1);
        let (x, y) = (setup.tx[n], setup.ty[n]);
        let nb = &setup.nb_idx[setup.nb_off[n] as usize..setup.nb_off[n + 1] as usize];
        for (t0, o) in row.iter_mut().enumerate() {
            let op = operator_at(est, x, y, t0);
            let mut sum = 0f32;
            for &m in nb {
                let (dx, dy) = (setup.tx[m as usize] - x, setup.ty[m as usize] - y);
                let (kk, f) = k::split_shift(k::shift_samples(op[0], op[1], op[2], op[3], op[4], dx, dy, setup.inv_dt));
                sum += k::shifted_sample(&data[m as usize * ns..(m as usize + 1) * ns], t0 as i64, kk, f);
            }
            *o = if nb.is_empty() { 0.0 } else { sum / nb.len() as f32 };
        }
    });
    out
}

/// NMO with a stretch mute on the CPU: parallel over traces.
pub fn nmo(data: &[f32], ns: usize, dt: f32, t_first: f32, offsets: &[f32], vrms: &[f32], max_stretch: f32) -> Vec<f32> {
    let mut out = vec![0f32; data.len()];
    let bar = crate::progress::work((data.len() / ns.max(1)) as u64, "nmo traces");
    out.par_chunks_mut(ns).enumerate().for_each(|(n, row)| {
        bar.inc(1);
        let trace = &data[n * ns..(n + 1) * ns];
        for (i, o) in row.iter_mut().enumerate() {
            *o = match k::nmo_source_position(i as u32, dt, t_first, offsets[n], vrms[i], max_stretch) {
                Some(pos) => {
                    let (kk, f) = k::split_shift(pos);
                    k::shifted_sample(trace, 0, kk, f)
                }
                None => 0.0,
            };
        }
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nlbf::tests::params_2d;
    use crate::nlbf::Setup;
    use crate::synth::{self, geometry};

    /// A plane event with known A (x dip) and B (y dip) on a small 2D line: the centre parameter
    /// trace picks them at the event time.
    #[test]
    fn plane_event_gives_its_dips() {
        let h = geometry::line_2d(25, 25.0, 25, 25.0);
        let mut tr = crate::traces::TraceSet::zeros(h, 120, 0.004);
        let (a, b) = (4e-5f32, -3e-5f32);
        let (xc, yc) = (300.0f32, 300.0f32);
        for i in 0..tr.len() {
            let hd = tr.headers[i];
            let t = 0.24 + a * (hd.gx as f32 - xc) + b * (hd.sx as f32 - yc);
            synth::add_ricker(tr.trace_mut(i), 0.004, t, 20.0, 1.0);
        }
        synth::add_noise(&mut tr.data, 0.05, 11);
        let mut p = params_2d();
        p.spacing_x = 150.0;
        p.spacing_y = 150.0;
        let s = Setup::new(&tr, &p).unwrap();
        let (code, sem) = estimate(&s, &tr.data);
        let pc = 2 * s.grid.nx + 2; // (300, 300)
        let t0 = (0.24f32 / 0.004).round() as usize;
        let op = s.tables.decode(code[pc * s.ns + t0]);
        assert!((op[0] - a).abs() < 1e-9 && (op[1] - b).abs() < 1e-9, "picked {op:?}");
        assert!(sem[pc * s.ns + t0] > 0.8, "S = {}", sem[pc * s.ns + t0]);
    }

    #[test]
    fn nmo_flattens_a_hyperbola() {
        let h = geometry::line_2d(1, 25.0, 30, 50.0);
        let mut tr = crate::traces::TraceSet::zeros(h, 300, 0.004);
        synth::events::hyperbolic_reflection(&mut tr, 0.6, 2000.0, 20.0, 1.0);
        let offsets = crate::nlbf::nmo_offsets(&tr.headers);
        let out = nmo(&tr.data, 300, 0.004, 0.0, &offsets, &vec![2000.0; 300], 0.3);
        for n in 0..tr.len() {
            let row = &out[n * 300..(n + 1) * 300];
            let stretch = ((0.36 + (offsets[n] / 2000.0).powi(2)).sqrt() - 0.6) / 0.6;
            if stretch < 0.28 {
                let peak = row.iter().enumerate().fold((0, 0f32), |b, (i, &v)| if v > b.1 { (i, v) } else { b }).0;
                assert!((peak as i32 - 150).abs() <= 1, "trace {n}: peak at sample {peak}");
            } else if stretch > 0.32 {
                assert_eq!(row[150], 0.0, "trace {n} (stretch {stretch}) is not muted at the event");
            }
        }
    }
}
