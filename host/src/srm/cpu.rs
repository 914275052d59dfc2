//! CPU reference: rayon over frequencies, each frequency's depth loop on split (re, im) planes padded
//! with a radius-4 zero halo, so the cross-shaped stencil runs as branch-free, vectorisable row loops.

use std::sync::Mutex;

use anyhow::Context;
use num_complex::Complex32;
use rayon::prelude::*;

use gpu_kernels::srm::{cheb_next, cmadd, coef_at, image_term, table_pos, RowMap, Stencil, RADIUS};

use super::design::Operator;
use super::{FreqPlan, Image, Shot, ShotGrid, SrmParams, Taper, VelocityModel};
use crate::traces::TraceSet;

/// A complex plane of nx x ny nodes stored as two padded real planes (zero halo of RADIUS nodes).
#[derive(Debug, Clone)]
pub struct Wave {
    pub nx: usize,
    pub ny: usize,
    pub re: Vec<f32>,
    pub im: Vec<f32>,
}

impl Wave {
    pub fn zeros(nx: usize, ny: usize) -> Self {
        let len = (nx + 2 * RADIUS) * (ny + 2 * RADIUS);
        Wave { nx, ny, re: vec![0.0; len], im: vec![0.0; len] }
    }
    pub fn pitch(&self) -> usize { self.nx + 2 * RADIUS }
    /// Index of interior node (x, y) in the padded planes.
    #[inline(always)]
    pub fn at(&self, x: usize, y: usize) -> usize { (y + RADIUS) * self.pitch() + x + RADIUS }
    pub fn clear(&mut self) {
        self.re.iter_mut().for_each(|v| *v = 0.0);
        self.im.iter_mut().for_each(|v| *v = 0.0);
    }
    /// From interleaved (re, im) values, nx * ny of them, x fastest.
    pub fn from_interleaved(nx: usize, ny: usize, data: &[f32]) -> Self {
        let mut w = Wave::zeros(nx, ny);
        for y in 0..ny {
            for x in 0..nx {
                let (i, k) = (w.at(x, y), 2 * (y * nx + x));
                w.re[i] = data[k];
                w.im[i] = data[k + 1];
            }
        }
        w
    }
    pub fn to_interleaved(&self, out: &mut [f32]) {
        for y in 0..self.ny {
            for x in 0..self.nx {
                let (i, k) = (self.at(x, y), 2 * (y * self.nx + x));
                out[k] = self.re[i];
                out[k + 1] = self.im[i];
            }
        }
    }
    pub fn get(&self, x: usize, y: usize) -> (f32, f32) {
        let i = self.at(x, y);
        (self.re[i], self.im[i])
    }
}

/// Per-thread scratch of one depth step.
pub struct StepWork {
    t: Wave,
    acc_re: Vec<f32>,
    acc_im: Vec<f32>,
    lap_re: Vec<f32>,
    lap_im: Vec<f32>,
}

impl StepWork {
    pub fn new(nx: usize, ny: usize) -> Self {
        StepWork { t: Wave::zeros(nx, ny), acc_re: vec![0.0; nx * ny], acc_im: vec![0.0; nx * ny], lap_re: vec![0.0; nx],
            lap_im: vec![0.0; nx] }
    }
}

/// Table positions (row, fraction) of every node for one frequency and one depth slice.
pub fn positions(slow: &[f32], map: RowMap, rows: usize, i0: &mut [u32], f: &mut [f32]) {
    for ((s, i), ff) in slow.iter().zip(i0.iter_mut()).zip(f.iter_mut()) {
        let (a, b) = table_pos(*s, map, rows as u32);
        *i = a;
        *ff = b;
    }
}

/// L applied along one interior row `y` of padded plane `a` (pitch `p`), into `out[0..nx]`.
#[inline(always)]
fn lap_row(st: &Stencil, a: &[f32], p: usize, start: usize, nx: usize, out: &mut [f32]) {
    let s = |off: isize| &a[(start as isize + off) as usize..(start as isize + off) as usize + nx];
    let (c, xm1, xm2, xm3, xm4, xp1, xp2, xp3, xp4) = (s(0), s(-1), s(-2), s(-3), s(-4), s(1), s(2), s(3), s(4));
    let pi = p as isize;
    let (ym1, ym2, ym3, ym4) = (s(-pi), s(-2 * pi), s(-3 * pi), s(-4 * pi));
    let (yp1, yp2, yp3, yp4) = (s(pi), s(2 * pi), s(3 * pi), s(4 * pi));
    let out = &mut out[..nx];
    for x in 0..nx {
        out[x] = st.apply(c[x], [xm1[x], xm2[x], xm3[x], xm4[x]], [xp1[x], xp2[x], xp3[x], xp4[x]],
            [ym1[x], ym2[x], ym3[x], ym4[x]], [yp1[x], yp2[x], yp3[x], yp4[x]]);
    }
}

/// One depth step of `w` in place: W <- taper * sum_n a_n T_n(L) W, with the coefficients at the
/// table positions (`i0`, `f`) of each node.
pub fn step_wave(op: &Operator, i0: &[u32], f: &[f32], taper: &Taper, w: &mut Wave, work: &mut StepWork) {
    let (nx, ny, p) = (w.nx, w.ny, w.pitch());
    let st = op.stencil;
    let ncoef = op.ncoef() as u32;
    let degree = op.params.degree;
    let table = op.table.as_ptr();
    let StepWork { t, acc_re, acc_im, lap_re, lap_im } = work;
    for n in 1..=degree {
        let first = n == 1;
        // T_{n-1} is in w when n is odd (T_0 = W), in t when n is even; T_n goes over T_{n-2}.
        let (src, dst) = if n % 2 == 1 { (&*w, &mut *t) } else { (&*t, &mut *w) };
        for y in 0..ny {
            let start = (y + RADIUS) * p + RADIUS;
            lap_row(&st, &src.re, p, start, nx, lap_re);
            lap_row(&st, &src.im, p, start, nx, lap_im);
            let row = y * nx;
            let (dre, dim) = (&mut dst.re[start..start + nx], &mut dst.im[start..start + nx]);
            let (sre, sim) = (&src.re[start..start + nx], &src.im[start..start + nx]);
            let (are, aim) = (&mut acc_re[row..row + nx], &mut acc_im[row..row + nx]);
            let (pi0, pf) = (&i0[row..row + nx], &f[row..row + nx]);
            for x in 0..nx {
                let tr = cheb_next(first, lap_re[x], dre[x]);
                let ti = cheb_next(first, lap_im[x], dim[x]);
                dre[x] = tr;
                dim[x] = ti;
                // SAFETY: table_pos keeps i0 <= rows - 2 and n < ncoef.
                let a = unsafe { coef_at(table, ncoef, pi0[x], pf[x], n as u32) };
                let mut acc = if first {
                    let a0 = unsafe { coef_at(table, ncoef, pi0[x], pf[x], 0) };
                    cmadd((0.0, 0.0), a0, (sre[x], sim[x]))
                } else {
                    (are[x], aim[x])
                };
                acc = cmadd(acc, a, (tr, ti));
                are[x] = acc.0;
                aim[x] = acc.1;
            }
        }
    }
    for y in 0..ny {
        let start = (y + RADIUS) * p + RADIUS;
        let ty = taper.y[y];
        let row = y * nx;
        for x in 0..nx {
            let tw = taper.x[x] * ty;
            w.re[start + x] = acc_re[row + x] * tw;
            w.im[start + x] = acc_im[row + x] * tw;
        }
    }
}

/// One depth step of independent interleaved complex planes (`planes.len() == 2 * P * nx * ny`),
/// plane k with row map `maps[k]`, all on slowness slice `slow` (nx * ny). Parallel over planes.
pub fn step_planes(op: &Operator, maps: &[RowMap], slow: &[f32], taper: &Taper, nx: usize, ny: usize, planes: &mut [f32]) {
    let nxy = nx * ny;
    planes.par_chunks_mut(2 * nxy).zip(maps.par_iter()).for_each(|(plane, &map)| {
        let mut w = Wave::from_interleaved(nx, ny, plane);
        let mut work = StepWork::new(nx, ny);
        let (mut i0, mut f) = (vec![0u32; nxy], vec![0f32; nxy]);
        positions(slow, map, op.rows, &mut i0, &mut f);
        step_wave(op, &i0, &f, taper, &mut w, &mut work);
        w.to_interleaved(plane);
    });
}

/// Spectra of a shot's traces at the plan's bins: out[t * bins + b], including the t0 delay.
pub fn trace_spectra(traces: &TraceSet, idx: &[usize], plan: &FreqPlan) -> Vec<Complex32> {
    let nb = plan.bins.len();
    let fft = rustfft::FftPlanner::<f32>::new().plan_fft_forward(plan.nfft);
    let delays: Vec<Complex32> = plan.bins.iter().map(|&k| plan.delay(k)).collect();
    let mut out = vec![Complex32::new(0.0, 0.0); idx.len() * nb];
    out.par_chunks_mut(nb).zip(idx.par_iter()).for_each_init(
        || vec![Complex32::new(0.0, 0.0); plan.nfft],
        |buf, (o, &t)| {
            let tr = traces.trace(t);
            for (b, v) in buf.iter_mut().enumerate() {
                *v = Complex32::new(if b < tr.len() { tr[b] } else { 0.0 }, 0.0);
            }
            fft.process(buf);
            for ((ob, &k), d) in o.iter_mut().zip(&plan.bins).zip(&delays) {
                *ob = buf[k] * d;
            }
        },
    );
    out
}

/// The slowness (s/m) of a shot's window, slices 0..nz, s[(iz * gny + y) * gnx + x].
pub fn window_slowness(model: &VelocityModel, grid: &ShotGrid, nz: usize) -> Vec<f32> {
    let nxy = grid.nxy();
    // Fresh memory with huge pages requested: its first touch here is part of a shot's serial setup.
    let mut s = crate::runtime::memory::zeroed_host(nz * nxy);
    s.par_chunks_mut(nxy.max(1)).enumerate().for_each(|(iz, slab)| {
        for y in 0..grid.ny {
            let row = (iz * model.ny + grid.iy0 + y) * model.nx + grid.ix0;
            slab[y * grid.nx..(y + 1) * grid.nx].iter_mut().zip(&model.v[row..row + grid.nx]).for_each(|(d, &v)| *d = 1.0 / v);
        }
    });
    s
}

/// Migrates one shot on its window for the frequency bins `bins` and `nz` depth samples; returns
/// the window image, nz x gny x gnx.
#[allow(clippy::too_many_arguments)]
pub fn migrate_shot(op: &Operator, traces: &TraceSet, model: &VelocityModel, params: &SrmParams, plan: &FreqPlan,
    shot: &Shot, grid: &ShotGrid, bins: &[usize], nz: usize) -> Vec<f32> {
    let (gnx, gny, nxy) = (grid.nx, grid.ny, grid.nxy());
    let slow = window_slowness(model, grid, nz);
    let taper = Taper::new(gnx, gny, params.taper_width, params.taper_strength);
    let spectra = trace_spectra(traces, &shot.traces, plan);
    let nb = plan.bins.len();
    let image: Vec<Mutex<Vec<f32>>> = (0..nz).map(|_| Mutex::new(vec![0.0f32; nxy])).collect();
    let add_image = |iz: usize, s: &Wave, r: &Wave, contrib: &mut [f32]| {
        for y in 0..gny {
            for x in 0..gnx {
                let i = s.at(x, y);
                contrib[y * gnx + x] = image_term((s.re[i], s.im[i]), (r.re[i], r.im[i]));
            }
        }
        let mut slice = image[iz].lock().unwrap();
        slice.iter_mut().zip(contrib.iter()).for_each(|(a, b)| *a += b);
    };
    bins.par_iter().for_each(|&k| {
        let b = plan.bins.iter().position(|&kk| kk == k).expect("bin of the plan");
        let map = op.row_map(plan.omega(k));
        let mut s = Wave::zeros(gnx, gny);
        let mut r = Wave::zeros(gnx, gny);
        let (sx, sy) = (grid.source_node % gnx, grid.source_node / gnx);
        let i = s.at(sx, sy);
        s.re[i] = plan.source(k, params.ricker_peak);
        for (t, &node) in grid.trace_nodes.iter().enumerate() {
            let (x, y) = (node as usize % gnx, node as usize / gnx);
            let i = r.at(x, y);
            let d = spectra[t * nb + b];
            r.re[i] += d.re;
            r.im[i] += d.im;
        }
        let mut work = StepWork::new(gnx, gny);
        let (mut i0, mut f) = (vec![0u32; nxy], vec![0f32; nxy]);
        let mut contrib = vec![0.0f32; nxy];
        add_image(0, &s, &r, &mut contrib);
        for iz in 0..nz - 1 {
            positions(&slow[iz * nxy..(iz + 1) * nxy], map, op.rows, &mut i0, &mut f);
            step_wave(op, &i0, &f, &taper, &mut s, &mut work);
            step_wave(op, &i0, &f, &taper, &mut r, &mut work);
            add_image(iz + 1, &s, &r, &mut contrib);
        }
    });
    let mut out = Vec::with_capacity(nz * nxy);
    for m in image {
        out.extend(m.into_inner().unwrap());
    }
    out
}

/// Adds a shot's window image into the model image.
pub fn add_window(image: &mut Image, grid: &ShotGrid, part: &[f32]) {
    let nxy = grid.nxy();
    let (nx, nz) = (image.nx, image.nz);
    // Depth slices in parallel (each sample gets one add: the same bits as a serial loop).
    image.data.par_chunks_mut(image.ny * nx).take(nz).enumerate().for_each(|(iz, slab)| {
        for y in 0..grid.ny {
            let dst = (grid.iy0 + y) * nx + grid.ix0;
            let src = iz * nxy + y * grid.nx;
            slab[dst..dst + grid.nx].iter_mut().zip(&part[src..src + grid.nx]).for_each(|(a, b)| *a += b);
        }
    });
}

/// All shots on the CPU.
pub fn migrate_shots(op: &Operator, traces: &TraceSet, model: &VelocityModel, params: &SrmParams,
    shots: &[(Shot, ShotGrid)], progress: bool) -> anyhow::Result<Image> {
    let nz = if params.nz > 0 { params.nz } else { model.nz };
    let plan = FreqPlan::new(traces.ns, traces.dt as f64, traces.t0 as f64, params.fmin, params.fmax)
        .map_err(anyhow::Error::msg).context("frequency band")?;
    let mut image = Image { data: vec![0.0; nz * model.ny * model.nx], nx: model.nx, ny: model.ny, nz };
    let bar = progress.then(|| crate::progress::bar(shots.len() as u64, "srm shots (cpu)"));
    for (shot, grid) in shots {
        let part = migrate_shot(op, traces, model, params, &plan, shot, grid, &plan.bins, nz);
        add_window(&mut image, grid, &part);
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::srm::design::{DesignParams, Spacing};

    /// Straightforward evaluation of sum a_n T_n(L) W with explicit zero boundaries (no padding
    /// tricks), for checking the row-loop version.
    fn naive_step(op: &Operator, map: RowMap, slow: &[f32], nx: usize, ny: usize, w: &[Complex32]) -> Vec<Complex32> {
        let st = op.stencil;
        let get = |t: &[Complex32], x: isize, y: isize| -> Complex32 {
            if x < 0 || y < 0 || x >= nx as isize || y >= ny as isize { Complex32::new(0.0, 0.0) } else { t[y as usize * nx + x as usize] }
        };
        let lap = |t: &[Complex32]| -> Vec<Complex32> {
            let mut o = vec![Complex32::new(0.0, 0.0); nx * ny];
            for y in 0..ny as isize {
                for x in 0..nx as isize {
                    let mut v = get(t, x, y) * st.c;
                    for j in 1..=4isize {
                        v += (get(t, x - j, y) + get(t, x + j, y)) * st.ax[j as usize - 1];
                        v += (get(t, x, y - j) + get(t, x, y + j)) * st.ay[j as usize - 1];
                    }
                    o[y as usize * nx + x as usize] = v;
                }
            }
            o
        };
        let coef = |i: usize, n: usize| {
            let (r, f) = table_pos(slow[i], map, op.rows as u32);
            let c = unsafe { coef_at(op.table.as_ptr(), op.ncoef() as u32, r, f, n as u32) };
            Complex32::new(c.0, c.1)
        };
        let mut prev = w.to_vec();
        let mut cur = lap(w);
        let mut acc: Vec<Complex32> = (0..nx * ny).map(|i| coef(i, 0) * w[i] + coef(i, 1) * cur[i]).collect();
        for n in 2..=op.params.degree {
            let l = lap(&cur);
            let next: Vec<Complex32> = l.iter().zip(&prev).map(|(a, b)| a * 2.0 - b).collect();
            for i in 0..nx * ny {
                acc[i] += coef(i, n) * next[i];
            }
            prev = cur;
            cur = next;
        }
        acc
    }

    #[test]
    fn row_loops_match_the_naive_recursion() {
        let (nx, ny) = (23, 17);
        let sp = Spacing { dx: 10.0, dy: 12.0, dz: 8.0, two_d: false };
        let params = DesignParams { degree: 7, ..Default::default() };
        let op = Operator::new(params, sp, 0.2, 1.5, 9).unwrap();
        let mut r = crate::synth::rng(5);
        use rand::RngExt;
        let w: Vec<Complex32> = (0..nx * ny).map(|_| Complex32::new(r.random_range(-1.0..1.0), r.random_range(-1.0..1.0))).collect();
        let slow: Vec<f32> = (0..nx * ny).map(|_| 1.0 / r.random_range(1500.0f32..4000.0)).collect();
        let map = op.row_map(2.0 * std::f64::consts::PI * 30.0);
        let want = naive_step(&op, map, &slow, nx, ny, &w);
        let flat: Vec<f32> = w.iter().flat_map(|c| [c.re, c.im]).collect();
        let mut got = flat.clone();
        step_planes(&op, &[map], &slow, &Taper::none(nx, ny), nx, ny, &mut got);
        let want_flat: Vec<f32> = want.iter().flat_map(|c| [c.re, c.im]).collect();
        let e = crate::synth::rel_l2(&got, &want_flat);
        assert!(e < 1e-5, "rel L2 {e}");
    }
}
