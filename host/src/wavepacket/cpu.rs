//! The CPU reference: rustfft + rayon, same math as the kernels (`gpu_kernels::wavepacket`).
//!
//! Forward: spectrum on the frame lattice (USFFT, [`Gather`]) -> per box: window x norm -> inverse
//! FFT of the box. Inverse: per box FFT -> gather over boxes at every lattice point (window x norm)
//! -> adjoint USFFT -> real part. All three gathers are exact adjoints of their forward passes.

use std::sync::Arc;

use gpu_kernels::wavepacket::{self as wp, Geometry};
use num_complex::Complex32;
use rayon::prelude::*;
use rustfft::{Fft, FftPlanner};

use super::{Frame, Gather};

/// Raw pointer for disjoint parallel writes (each task owns a distinct set of indices).
#[derive(Clone, Copy)]
struct SyncPtr<T>(*mut T);
unsafe impl<T> Send for SyncPtr<T> {}
unsafe impl<T> Sync for SyncPtr<T> {}
impl<T> SyncPtr<T> {
    /// # Safety
    /// `i` in bounds and written by one task only.
    #[inline(always)]
    unsafe fn write(self, i: usize, v: T) { unsafe { *self.0.add(i) = v } }
}

/// 3D FFT plans for one shape (n0, n1, n2), n2 fastest.
pub struct Fft3 {
    pub dims: [usize; 3],
    fwd: [Arc<dyn Fft<f32>>; 3],
    inv: [Arc<dyn Fft<f32>>; 3],
}

impl Fft3 {
    pub fn new(planner: &mut FftPlanner<f32>, dims: [usize; 3]) -> Self {
        let fwd = [0, 1, 2].map(|a| planner.plan_fft_forward(dims[a]));
        let inv = [0, 1, 2].map(|a| planner.plan_fft_inverse(dims[a]));
        Self { dims, fwd, inv }
    }

    /// In-place 3D FFT (inverse unnormalised, e^{+i}), serial: for the many small box FFTs that
    /// run in parallel over boxes.
    pub fn process(&self, data: &mut [Complex32], inverse: bool) {
        let [d0, d1, d2] = self.dims;
        let plans = if inverse { &self.inv } else { &self.fwd };
        let mut scratch = vec![Complex32::default(); plans.iter().map(|p| p.get_inplace_scratch_len()).max().unwrap()];
        plans[2].process_with_scratch(data, &mut scratch);
        let mut col = vec![Complex32::default(); d0.max(d1)];
        for i0 in 0..d0 {
            let slab = &mut data[i0 * d1 * d2..(i0 + 1) * d1 * d2];
            for i2 in 0..d2 {
                for i1 in 0..d1 {
                    col[i1] = slab[i1 * d2 + i2];
                }
                plans[1].process_with_scratch(&mut col[..d1], &mut scratch);
                for i1 in 0..d1 {
                    slab[i1 * d2 + i2] = col[i1];
                }
            }
        }
        let plane = d1 * d2;
        for k in 0..plane {
            for i0 in 0..d0 {
                col[i0] = data[i0 * plane + k];
            }
            plans[0].process_with_scratch(&mut col[..d0], &mut scratch);
            for i0 in 0..d0 {
                data[i0 * plane + k] = col[i0];
            }
        }
    }

    /// In-place 3D FFT with rayon over lines (big arrays: the USFFT grid, the lattice).
    pub fn process_par(&self, data: &mut [Complex32], inverse: bool) {
        let [d0, d1, d2] = self.dims;
        let plans = if inverse { &self.inv } else { &self.fwd };
        let scratch_len = plans.iter().map(|p| p.get_inplace_scratch_len()).max().unwrap();
        data.par_chunks_mut(d2 * d1).for_each_init(
            || vec![Complex32::default(); scratch_len],
            |scratch, slab| {
                plans[2].process_with_scratch(slab, scratch);
                // Axis 1 within the slab, 16 columns at a time so the gathers stay in cache.
                let mut block = vec![Complex32::default(); 16 * d1];
                let mut i2 = 0;
                while i2 < d2 {
                    let w = 16.min(d2 - i2);
                    for c in 0..w {
                        for i1 in 0..d1 {
                            block[c * d1 + i1] = slab[i1 * d2 + i2 + c];
                        }
                    }
                    plans[1].process_with_scratch(&mut block[..w * d1], scratch);
                    for c in 0..w {
                        for i1 in 0..d1 {
                            slab[i1 * d2 + i2 + c] = block[c * d1 + i1];
                        }
                    }
                    i2 += w;
                }
            },
        );
        let plane = d1 * d2;
        let ptr = SyncPtr(data.as_mut_ptr());
        let chunks: Vec<usize> = (0..plane).step_by(16).collect();
        chunks.par_iter().for_each_init(
            || (vec![Complex32::default(); scratch_len], vec![Complex32::default(); 16 * d0]),
            |(scratch, block), &k0| {
                let w = 16.min(plane - k0);
                for c in 0..w {
                    for i0 in 0..d0 {
                        // SAFETY: reads of this task's own columns k0..k0+w.
                        block[c * d0 + i0] = unsafe { *ptr.0.add(i0 * plane + k0 + c) };
                    }
                }
                plans[0].process_with_scratch(&mut block[..w * d0], scratch);
                for c in 0..w {
                    for i0 in 0..d0 {
                        unsafe { ptr.write(i0 * plane + k0 + c, block[c * d0 + i0]) };
                    }
                }
            },
        );
    }
}

/// Per-line USFFT tables (the lattice is the same along every axis).
struct LineTables {
    /// For lattice index u (FFT order): first global-grid point i0 - q + 1 (unwrapped) and 2q weights.
    start: Vec<i32>,
    weights: Vec<f32>,
    /// Correction 1/G(c) per centred data sample c (index c + N/2).
    corr: Vec<f32>,
}

impl LineTables {
    fn new(g: &Geometry) -> Self {
        let (m, p, q) = (g.m, g.p, g.q);
        let mut start = Vec::with_capacity(m as usize);
        let mut weights = Vec::with_capacity((m * 2 * q) as usize);
        for u in 0..m {
            let j = wp::lattice_index(u, m);
            let (i0, frac) = wp::kappa(j, p, m);
            start.push(i0 - q + 1);
            for t in -q + 1..=q {
                weights.push(wp::gauss(g.lambda, frac, t));
            }
        }
        let corr = (0..g.n).map(|i| wp::correction(g.lambda, p, i - g.n / 2)).collect();
        Self { start, weights, corr }
    }
}

/// The CPU engine: FFT plans and USFFT tables for one frame.
pub struct CpuEngine {
    frame: Arc<Frame>,
    line_fwd: Arc<dyn Fft<f32>>,
    line_inv: Arc<dyn Fft<f32>>,
    tables: LineTables,
    boxes: Vec<Fft3>,
    grid: Fft3,
    lattice: Fft3,
    /// Window x norm of every box point (flat, frame layout), computed once.
    table: Vec<f32>,
    /// Which USFFT variant [`forward`](Self::forward) and [`inverse`](Self::inverse) use.
    pub gather: Gather,
}

/// Window x norm of every box point, in the coefficients' layout.
pub fn window_table(frame: &Frame) -> Vec<f32> {
    let g = &frame.geom;
    let mut t = vec![0.0f32; frame.total];
    for j in 0..frame.scales() {
        let np = g.box_points(j);
        t[frame.scale_range(j)].par_chunks_mut(np).enumerate().for_each(|(b, bx)| {
            for (l, w) in bx.iter_mut().enumerate() {
                *w = wp::box_point(g, j, b as i32, wp::box_local(g, j, l)).1;
            }
        });
    }
    t
}

impl CpuEngine {
    pub fn new(frame: Arc<Frame>) -> Self {
        let g = frame.geom;
        let mut planner = FftPlanner::new();
        let boxes = (0..frame.scales())
            .map(|j| Fft3::new(&mut planner, [0, 1, 2].map(|a| g.shape[j][a] as usize)))
            .collect();
        let (p, m) = (g.p as usize, g.m as usize);
        Self {
            line_fwd: planner.plan_fft_forward(p),
            line_inv: planner.plan_fft_inverse(p),
            tables: LineTables::new(&g),
            boxes,
            grid: Fft3::new(&mut planner, [p; 3]),
            lattice: Fft3::new(&mut planner, [m; 3]),
            table: window_table(&frame),
            gather: frame.params.gather,
            frame,
        }
    }

    pub fn frame(&self) -> &Arc<Frame> { &self.frame }

    /// Coefficients of the N^3 cube `f` (x2 fastest).
    pub fn forward(&self, f: &[f32]) -> Vec<Complex32> {
        match self.gather {
            Gather::Stencil => {
                let spec = self.spectrum(f);
                self.boxes_from(|xi| self.stencil_at(&spec, xi))
            }
            Gather::Separable => {
                let lat = self.lattice_separable(f);
                self.boxes_from_lattice(&lat)
            }
            Gather::Lattice => {
                let lat = self.lattice_direct(f);
                self.boxes_from_lattice(&lat)
            }
        }
    }

    /// The cube from coefficients: the adjoint of [`forward`](Self::forward), its inverse.
    pub fn inverse(&self, coeffs: &[Complex32]) -> Vec<f32> {
        let lat = self.combine(coeffs);
        match self.gather {
            Gather::Stencil => self.adjoint_stencil(&lat),
            Gather::Separable => self.adjoint_separable(&lat),
            Gather::Lattice => self.adjoint_direct(&lat),
        }
    }

    // ---- box side --------------------------------------------------------------------------

    fn boxes_from_lattice(&self, lat: &[Complex32]) -> Vec<Complex32> {
        let m = self.frame.m() as i32;
        self.boxes_from(|xi| {
            let u = (wp::emod(xi[0], m) * m + wp::emod(xi[1], m)) as usize * m as usize + wp::emod(xi[2], m) as usize;
            lat[u]
        })
    }

    /// Fills every box with window x norm x spectrum(xi) and inverse-FFTs it.
    fn boxes_from<S: Fn([i32; 3]) -> Complex32 + Sync>(&self, spectrum: S) -> Vec<Complex32> {
        let fr = &*self.frame;
        let g = &fr.geom;
        let mut out = vec![Complex32::default(); fr.total];
        for j in 0..fr.scales() {
            let sh = g.shape[j];
            let np = g.box_points(j);
            let table = &self.table[fr.scale_range(j)];
            out[fr.scale_range(j)].par_chunks_mut(np).zip(table.par_chunks(np)).enumerate().for_each(|(b, (bx, tb))| {
                let mut k = 0;
                for i0 in 0..sh[0] {
                    for i1 in 0..sh[1] {
                        for i2 in 0..sh[2] {
                            let w = tb[k];
                            bx[k] = if w != 0.0 {
                                spectrum(wp::box_lattice(g, j, b as i32, [i0, i1, i2]).0) * w
                            } else {
                                Complex32::default()
                            };
                            k += 1;
                        }
                    }
                }
                self.boxes[j].process(bx, true);
            });
        }
        out
    }

    /// Inverse's box side: FFT every box, then at every lattice point sum window x norm x value
    /// over the boxes covering it (a gather: one lattice point per task, no write conflicts).
    pub fn combine(&self, coeffs: &[Complex32]) -> Vec<Complex32> {
        let fr = &*self.frame;
        let g = &fr.geom;
        let mut spec = coeffs.to_vec();
        for j in 0..fr.scales() {
            spec[fr.scale_range(j)].par_chunks_mut(g.box_points(j)).for_each(|bx| self.boxes[j].process(bx, false));
        }
        let m = fr.m();
        let mut lat = vec![Complex32::default(); m * m * m];
        lat.par_chunks_mut(m * m).enumerate().for_each(|(u0, plane)| {
            let j0 = wp::lattice_index(u0 as i32, m as i32);
            for u1 in 0..m {
                let j1 = wp::lattice_index(u1 as i32, m as i32);
                for u2 in 0..m {
                    let j2 = wp::lattice_index(u2 as i32, m as i32);
                    let mut acc = Complex32::default();
                    wp::for_each_box_index_at(g, [j0, j1, j2], |s, b, idx| {
                        let k = fr.offsets[s] + b as usize * g.box_points(s) + idx;
                        let w = self.table[k];
                        if w != 0.0 {
                            acc += spec[k] * w;
                        }
                    });
                    plane[u1 * m + u2] = acc;
                }
            }
        });
        lat
    }

    // ---- separable USFFT ---------------------------------------------------------------------

    /// One line: data (N values, centred) -> pad to P -> FFT -> Gaussian gather onto the M lattice
    /// points (FFT order). `scratch` has P + FFT scratch.
    fn line_forward(&self, input: impl Fn(usize) -> Complex32, out: &mut [Complex32], buf: &mut [Complex32],
        scratch: &mut [Complex32]) {
        let g = &self.frame.geom;
        let (n, p, q2) = (g.n as usize, g.p as usize, 2 * g.q as usize);
        buf.fill(Complex32::default());
        for i in 0..n {
            buf[wp::fft_pos(i as i32 - g.n / 2, g.p) as usize] = input(i);
        }
        self.line_fwd.process_with_scratch(buf, scratch);
        let t = &self.tables;
        for (u, o) in out.iter_mut().enumerate() {
            let s = t.start[u];
            let w = &t.weights[u * q2..(u + 1) * q2];
            let mut acc = Complex32::default();
            if s >= 0 && s as usize + q2 <= p {
                for (k, &wk) in w.iter().enumerate() {
                    acc += buf[s as usize + k] * wk;
                }
            } else {
                for (k, &wk) in w.iter().enumerate() {
                    acc += buf[wp::emod(s + k as i32, g.p) as usize] * wk;
                }
            }
            *o = acc;
        }
    }

    /// Adjoint of [`line_forward`]: spread the M lattice values onto P, inverse FFT, crop to N.
    fn line_adjoint(&self, input: impl Fn(usize) -> Complex32, mut out: impl FnMut(usize, Complex32),
        buf: &mut [Complex32], scratch: &mut [Complex32]) {
        let g = &self.frame.geom;
        let (n, m, q2) = (g.n as usize, g.m as usize, 2 * g.q as usize);
        buf.fill(Complex32::default());
        let t = &self.tables;
        for u in 0..m {
            let v = input(u);
            let s = t.start[u];
            for (k, &wk) in t.weights[u * q2..(u + 1) * q2].iter().enumerate() {
                buf[wp::emod(s + k as i32, g.p) as usize] += v * wk;
            }
        }
        self.line_inv.process_with_scratch(buf, scratch);
        for i in 0..n {
            out(i, buf[wp::fft_pos(i as i32 - g.n / 2, g.p) as usize]);
        }
    }

    fn line_buffers(&self) -> (Vec<Complex32>, Vec<Complex32>) {
        let len = self.line_fwd.get_inplace_scratch_len().max(self.line_inv.get_inplace_scratch_len());
        (vec![Complex32::default(); self.frame.p()], vec![Complex32::default(); len])
    }

    /// Lattice spectrum (M^3, FFT order) by three passes of 1D USFFT.
    pub fn lattice_separable(&self, f: &[f32]) -> Vec<Complex32> {
        let (n, m) = (self.frame.n(), self.frame.m());
        let corr = &self.tables.corr;
        // Pass over x2: t1[x0][x1][u2]; the separable correction of all three axes goes in here.
        let mut t1 = vec![Complex32::default(); n * n * m];
        t1.par_chunks_mut(m).enumerate().for_each_init(
            || self.line_buffers(),
            |(buf, scratch), (line, out)| {
                let (x0, x1) = (line / n, line % n);
                let c01 = corr[x0] * corr[x1];
                let row = &f[line * n..(line + 1) * n];
                self.line_forward(|i| Complex32::new(row[i] * c01 * corr[i], 0.0), out, buf, scratch);
            },
        );
        // Pass over x1: t2[x0][u1][u2].
        let mut t2 = vec![Complex32::default(); n * m * m];
        t2.par_chunks_mut(m * m).enumerate().for_each_init(
            || (self.line_buffers(), vec![Complex32::default(); m]),
            |((buf, scratch), col), (x0, slab)| {
                let src = &t1[x0 * n * m..(x0 + 1) * n * m];
                for u2 in 0..m {
                    self.line_forward(|x1| src[x1 * m + u2], col, buf, scratch);
                    for u1 in 0..m {
                        slab[u1 * m + u2] = col[u1];
                    }
                }
            },
        );
        drop(t1);
        // Pass over x0: lattice[u0][u1][u2].
        let mut lat = vec![Complex32::default(); m * m * m];
        let ptr = SyncPtr(lat.as_mut_ptr());
        (0..m).into_par_iter().for_each_init(
            || (self.line_buffers(), vec![Complex32::default(); m]),
            |((buf, scratch), col), u1| {
                for u2 in 0..m {
                    self.line_forward(|x0| t2[(x0 * m + u1) * m + u2], col, buf, scratch);
                    for u0 in 0..m {
                        // SAFETY: this task owns every (u0, u1, u2) with its u1.
                        unsafe { ptr.write((u0 * m + u1) * m + u2, col[u0]) };
                    }
                }
            },
        );
        lat
    }

    /// Adjoint of [`lattice_separable`](Self::lattice_separable) (real part taken at the end).
    pub fn adjoint_separable(&self, lat: &[Complex32]) -> Vec<f32> {
        let (n, m) = (self.frame.n(), self.frame.m());
        let corr = &self.tables.corr;
        let mut t2 = vec![Complex32::default(); n * m * m];
        let ptr = SyncPtr(t2.as_mut_ptr());
        (0..m).into_par_iter().for_each_init(
            || self.line_buffers(),
            |(buf, scratch), u1| {
                for u2 in 0..m {
                    self.line_adjoint(
                        |u0| lat[(u0 * m + u1) * m + u2],
                        // SAFETY: this task owns every (x0, u1, u2) with its u1.
                        |x0, v| unsafe { ptr.write((x0 * m + u1) * m + u2, v) },
                        buf,
                        scratch,
                    );
                }
            },
        );
        let mut t1 = vec![Complex32::default(); n * n * m];
        t1.par_chunks_mut(n * m).enumerate().for_each_init(
            || self.line_buffers(),
            |(buf, scratch), (x0, slab)| {
                let src = &t2[x0 * m * m..(x0 + 1) * m * m];
                for u2 in 0..m {
                    self.line_adjoint(|u1| src[u1 * m + u2], |x1, v| slab[x1 * m + u2] = v, buf, scratch);
                }
            },
        );
        drop(t2);
        let mut f = vec![0.0f32; n * n * n];
        f.par_chunks_mut(n).enumerate().for_each_init(
            || self.line_buffers(),
            |(buf, scratch), (line, row)| {
                let (x0, x1) = (line / n, line % n);
                let c01 = corr[x0] * corr[x1];
                let src = &t1[line * m..(line + 1) * m];
                self.line_adjoint(|u2| src[u2], |x2, v| row[x2] = v.re * c01 * corr[x2], buf, scratch);
            },
        );
        f
    }

    // ---- direct lattice FFT (exact) ------------------------------------------------------

    /// Lattice spectrum by one FFT of size M^3 (exact up to rounding).
    pub fn lattice_direct(&self, f: &[f32]) -> Vec<Complex32> {
        let (n, m) = (self.frame.n(), self.frame.m());
        let mut a = vec![Complex32::default(); m * m * m];
        let pos = |i: usize| wp::fft_pos(i as i32 - n as i32 / 2, m as i32) as usize;
        for x0 in 0..n {
            for x1 in 0..n {
                let base = (pos(x0) * m + pos(x1)) * m;
                for x2 in 0..n {
                    a[base + pos(x2)] = Complex32::new(f[(x0 * n + x1) * n + x2], 0.0);
                }
            }
        }
        self.lattice.process_par(&mut a, false);
        a
    }

    fn adjoint_direct(&self, lat: &[Complex32]) -> Vec<f32> {
        let (n, m) = (self.frame.n(), self.frame.m());
        let mut a = lat.to_vec();
        self.lattice.process_par(&mut a, true);
        let pos = |i: usize| wp::fft_pos(i as i32 - n as i32 / 2, m as i32) as usize;
        let mut f = vec![0.0; n * n * n];
        for x0 in 0..n {
            for x1 in 0..n {
                for x2 in 0..n {
                    f[(x0 * n + x1) * n + x2] = a[(pos(x0) * m + pos(x1)) * m + pos(x2)].re;
                }
            }
        }
        f
    }

    // ---- the paper's 3D stencil USFFT ------------------------------------------------------

    /// Corrected, zero-padded cube on the P^3 global grid, 3D FFT.
    pub fn spectrum(&self, f: &[f32]) -> Vec<Complex32> {
        let (n, p) = (self.frame.n(), self.frame.p());
        let corr = &self.tables.corr;
        let mut a = vec![Complex32::default(); p * p * p];
        let pos = |i: usize| wp::fft_pos(i as i32 - n as i32 / 2, p as i32) as usize;
        for x0 in 0..n {
            for x1 in 0..n {
                let base = (pos(x0) * p + pos(x1)) * p;
                for x2 in 0..n {
                    a[base + pos(x2)] = Complex32::new(f[(x0 * n + x1) * n + x2] * corr[x0] * corr[x1] * corr[x2], 0.0);
                }
            }
        }
        self.grid.process_par(&mut a, false);
        a
    }

    /// The paper's formula (1): Gaussian-weighted sum over the (2q)^3 global-grid points around
    /// the lattice point xi (weights separable and hoisted per axis).
    pub fn stencil_at(&self, spec: &[Complex32], xi: [i32; 3]) -> Complex32 {
        let g = &self.frame.geom;
        let (p, q) = (g.p, g.q);
        let q2 = 2 * q as usize;
        let mut w = [[0.0f32; 2 * wp::MAX_Q as usize]; 3];
        let mut idx = [[0usize; 2 * wp::MAX_Q as usize]; 3];
        for a in 0..3 {
            let (i0, frac) = wp::kappa(xi[a], p, g.m);
            for (k, t) in (-q + 1..=q).enumerate() {
                w[a][k] = wp::gauss(g.lambda, frac, t);
                idx[a][k] = wp::emod(i0 + t, p) as usize;
            }
        }
        let pu = p as usize;
        let mut acc = Complex32::default();
        for k0 in 0..q2 {
            let mut acc1 = Complex32::default();
            for k1 in 0..q2 {
                let row = &spec[(idx[0][k0] * pu + idx[1][k1]) * pu..];
                let mut acc2 = Complex32::default();
                for k2 in 0..q2 {
                    acc2 += row[idx[2][k2]] * w[2][k2];
                }
                acc1 += acc2 * w[1][k1];
            }
            acc += acc1 * w[0][k0];
        }
        acc
    }

    /// The paper's inverse gather: every global-grid point sums the lattice points within the
    /// stencil radius (one task per point, no write conflicts), then inverse FFT and correction.
    fn adjoint_stencil(&self, lat: &[Complex32]) -> Vec<f32> {
        let g = &self.frame.geom;
        let (n, m, p) = (g.n as usize, g.m as usize, g.p as usize);
        let lists = adjoint_lists(g);
        let mut a = vec![Complex32::default(); p * p * p];
        a.par_chunks_mut(p * p).enumerate().for_each(|(m0, plane)| {
            for m1 in 0..p {
                for m2 in 0..p {
                    let mut acc = Complex32::default();
                    for &(u0, w0) in &lists[m0] {
                        let mut acc1 = Complex32::default();
                        for &(u1, w1) in &lists[m1] {
                            let row = &lat[(u0 * m + u1) * m..];
                            let mut acc2 = Complex32::default();
                            for &(u2, w2) in &lists[m2] {
                                acc2 += row[u2] * w2;
                            }
                            acc1 += acc2 * w1;
                        }
                        acc += acc1 * w0;
                    }
                    plane[m1 * p + m2] = acc;
                }
            }
        });
        self.grid.process_par(&mut a, true);
        let corr = &self.tables.corr;
        let pos = |i: usize| wp::fft_pos(i as i32 - n as i32 / 2, p as i32) as usize;
        let mut f = vec![0.0; n * n * n];
        for x0 in 0..n {
            for x1 in 0..n {
                for x2 in 0..n {
                    f[(x0 * n + x1) * n + x2] =
                        a[(pos(x0) * p + pos(x1)) * p + pos(x2)].re * corr[x0] * corr[x1] * corr[x2];
                }
            }
        }
        f
    }
}

/// For every global-grid index (0..P) along one axis, the lattice indices (FFT order) whose
/// stencil covers it and their weights: the transpose of the forward stencil, built once.
pub fn adjoint_lists(g: &Geometry) -> Vec<Vec<(usize, f32)>> {
    let (m, p, q) = (g.m, g.p, g.q);
    let mut lists = vec![Vec::new(); p as usize];
    for u in 0..m {
        let j = wp::lattice_index(u, m);
        let (i0, frac) = wp::kappa(j, p, m);
        for t in -q + 1..=q {
            lists[wp::emod(i0 + t, p) as usize].push((u as usize, wp::gauss(g.lambda, frac, t)));
        }
    }
    lists
}
