//! 3D wave-packet transform with the USFFT (paper 3, Nikitin, Duchkov, Romanenko, Andersson 2013):
//! forward, inverse (= adjoint: the frame is tight), denoise, compress, interpolate.
//!
//! - [`Frame`]: the boxes (scales, faces, wedges), their grids, the USFFT constants; built from the
//!   cube side N and [`Params`]. The math it feeds lives in `gpu_kernels::wavepacket` (shared with
//!   the kernels).
//! - [`cpu::CpuEngine`]: the rayon + rustfft reference; [`gpu::GpuEngine`]: cuFFT + kernels.
//! - [`Engine`]: either, behind one interface; [`fragments`]: volumes of any N1 x N2 x N3 shape cut
//!   into overlapping cubes (the paper's variant 2); [`apps`]: denoising, compression, trace
//!   interpolation; [`coeffs_io`]: coefficient files.

pub mod apps;
pub mod coeffs_io;
pub mod cpu;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod fragments;
pub mod gpu;
mod tiling;

use std::sync::Arc;

use anyhow::{bail, ensure, Result};

use crate::{bail_input, bail_param, ensure_input, ensure_param};
pub use gpu_kernels::wavepacket::{below_threshold, Geometry, ScaleKind, MAX_SCALES};
pub use num_complex::Complex32;
use serde::{Deserialize, Serialize};

use crate::backend::Backend;

/// What the finest scale is made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Finest {
    /// One isotropic box (CurveLab's default "wavelets at the finest level"): redundancy under 4.
    Isotropic,
    /// Wedges like the other scales: directional down to the finest scale, redundancy 6 to 8.
    Directional,
}

/// How the spectrum reaches the box points.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Gather {
    /// The paper's USFFT: one 3D FFT on the oversampled grid, then a (2q)^3-point Gaussian gather
    /// per box point (forward) and per global grid point (inverse).
    Stencil,
    /// The same USFFT factored per axis (the lattice is a tensor grid): three passes of 1D FFT +
    /// 2q-point gather, on arrays pruned to the data (N) and lattice (M) sizes.
    Separable,
    /// No USFFT: an FFT of size M^3 gives the lattice values exactly (possible because every box
    /// grid lies on the frame lattice; see docs/notes/wavepacket.md).
    Lattice,
}

impl std::str::FromStr for Gather {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "stencil" | "paper" => Ok(Self::Stencil),
            "separable" => Ok(Self::Separable),
            "lattice" => Ok(Self::Lattice),
            o => Err(format!("unknown gather `{o}` (expected stencil, separable or lattice)")),
        }
    }
}

/// Frame design knobs (0 = automatic for the counts).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FrameParams {
    /// Scales including the low-pass (0: as many as keep the low-pass box at least 5 bins wide).
    pub scales: usize,
    /// Wedges per face axis at the finest directional scale (0: largest power of 2 <= sqrt(M/4)).
    pub wedges: usize,
    /// Radial transition width as a fraction of R_j, in (0, 1].
    pub tau: f32,
    /// Angular transition half-width as a fraction of the wedge half-width, in (0, 1).
    pub beta: f32,
    pub finest: Finest,
    /// Zero guard band (lattice bins) added on each side: frame period M = N + 2 guard.
    pub guard: usize,
}

impl Default for FrameParams {
    fn default() -> Self { Self { scales: 0, wedges: 0, tau: 0.5, beta: 0.35, finest: Finest::Isotropic, guard: 0 } }
}

/// Transform parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Params {
    /// USFFT accuracy epsilon, in (0, 1).
    pub eps: f64,
    pub frame: FrameParams,
    pub gather: Gather,
}

impl Default for Params {
    fn default() -> Self { Self { eps: 1e-4, frame: FrameParams::default(), gather: Gather::Separable } }
}

/// Cube sides the automatic choice ([`auto_cube`]) picks from: the paper's 256 and the smaller
/// powers of two.
pub const CUBE_SIDES: [usize; 3] = [64, 128, 256];

/// The cube side for a volume of `shape` whose cubes overlap by `overlap` samples: the one of
/// [`CUBE_SIDES`] whose cubes hold the fewest samples in all (the transform's work and memory go
/// with them; ties to the larger side, fewer seams). A thin volume such as 4 x 120 x 600 gets
/// cubes of 128 (6 cubes, 12.6M samples) instead of three of 256 padded from 4 x 120 (50M samples,
/// 2.2 GB); a large one the paper's 256. Returns the side and a line saying why.
pub fn auto_cube(shape: [usize; 3], overlap: usize) -> Result<(usize, String)> {
    let mut best: Option<(usize, usize, usize, usize)> = None; // (samples, side, cube, count)
    let mut at_256 = 0;
    for side in CUBE_SIDES {
        if 2 * overlap > side {
            continue;
        }
        // (A side whose cubes would stack three deep with this overlap is no candidate.)
        let Ok(t) = fragments::Tiling::new(shape, side, overlap) else { continue };
        let total = t.count() * t.cube.pow(3);
        if side == 256 {
            at_256 = total;
        }
        if best.is_none_or(|b| total <= b.0) {
            best = Some((total, side, t.cube, t.count()));
        }
    }
    let Some((total, side, cube, count)) = best else {
        bail_param!("overlap", "overlap of {overlap} samples is more than half of every cube side {CUBE_SIDES:?}: give --cube")
    };
    Ok((side, format!("cubes of {cube}^3 for the {} x {} x {} volume: {count} cube(s), {:.1}M cube samples{}; --cube to choose",
        shape[0], shape[1], shape[2], total as f64 / 1e6,
        if side != 256 && at_256 > 0 { format!(" (256^3 cubes: {:.1}M)", at_256 as f64 / 1e6) } else { String::new() })))
}

/// Smallest n' >= n whose only prime factors are 2, 3, 5, 7 (fast FFT sizes).
pub fn nice(n: usize) -> usize {
    let mut k = n.max(1);
    loop {
        let mut m = k;
        for p in [2, 3, 5, 7] {
            while m % p == 0 {
                m /= p;
            }
        }
        if m == 1 {
            return k;
        }
        k += 1;
    }
}

fn nice_even(n: usize) -> usize {
    let mut k = nice(n);
    while k % 2 != 0 {
        k = nice(k + 1);
    }
    k
}

fn gcd(a: usize, b: usize) -> usize { if b == 0 { a } else { gcd(b, a % b) } }

/// The frame for cubes of side N: geometry shared with the kernels, plus the coefficient layout.
#[derive(Clone, Debug)]
pub struct Frame {
    pub geom: Geometry,
    pub params: Params,
    /// Offset of each scale's coefficients in the flat coefficient vector (complex values).
    pub offsets: Vec<usize>,
    /// Total complex coefficients.
    pub total: usize,
}

impl Frame {
    /// Builds the frame for an N^3 cube. Errors name the bad parameter.
    pub fn new(n: usize, params: &Params) -> Result<Frame> {
        let fp = &params.frame;
        ensure_param!(n >= 8, "cube", "cube side {n} is too small: the wave-packet frame needs at least 8 samples per axis");
        ensure_param!(n <= 4096, "cube", "cube side {n} is too large for one transform: use the fragment path (cubes of 256)");
        ensure_param!(params.eps > 0.0 && params.eps < 1.0 && params.eps.is_finite(), "eps",
            "epsilon {} is outside (0, 1): it is the USFFT's relative accuracy", params.eps);
        ensure_param!(fp.tau > 0.0 && fp.tau <= 1.0, "tau", "tau {} is outside (0, 1] (radial transition width / R_j)", fp.tau);
        ensure_param!(fp.beta > 0.0 && fp.beta < 1.0, "beta", "beta {} is outside (0, 1) (angular overlap / wedge half-width)", fp.beta);
        let m = n + 2 * fp.guard;
        // Global grid: oversampled about 2x (the USFFT's aliasing margin needs P >= 2N), with a
        // fast FFT size, chosen so kappa_j = j P / M is irregular on it (P not a multiple of M).
        let mut p = nice(2 * n + 1);
        while p % m == 0 || gcd(p, m) == m {
            p = nice(p + 1);
        }
        let (q, lambda) = gpu_kernels::wavepacket::usfft_params(params.eps);
        let tau = fp.tau;
        // R_{J-1} = M/4: the finest scale is the top octave [M/4, M/2] (+ corners).
        let r_top = m as f64 / 4.0;
        let last = if fp.scales > 0 {
            ensure_param!(fp.scales >= 2 && fp.scales <= MAX_SCALES, "scales", "scales {} must be in 2..={MAX_SCALES}", fp.scales);
            fp.scales - 1
        } else {
            // Largest J with (1 + tau) R_0 >= 2.5 bins (the low-pass box at least 5 bins wide).
            let mut jj = 1;
            while jj + 1 < MAX_SCALES && r_top / f64::powi(2.0, jj as i32) * (1.0 + tau as f64) >= 2.5 {
                jj += 1;
            }
            jj
        };
        let r0 = (r_top / f64::powi(2.0, last as i32 - 1)) as f32;
        ensure_param!(r0 >= 1.0, "scales", "{} scales are too many for a cube of {n}: the low-pass would be under one bin", last + 1);
        let isotropic = fp.finest == Finest::Isotropic;
        let top_dir = if isotropic { last - 1 } else { last };
        let n_top = if fp.wedges > 0 {
            ensure_param!(fp.wedges <= 64, "wedges", "wedges {} per face axis is too many (at most 64)", fp.wedges);
            fp.wedges
        } else {
            let mut w = 1;
            while ((2 * w) * (2 * w)) as f64 <= m as f64 / 4.0 {
                w *= 2;
            }
            w
        };
        let mut g = Geometry {
            n: n as i32,
            m: m as i32,
            p: p as i32,
            q,
            lambda,
            tau,
            beta: fp.beta,
            nscales: last as i32 + 1,
            r0,
            finest_isotropic: isotropic as i32,
            wedges: [0; MAX_SCALES],
            lo: [0; MAX_SCALES],
            shape: [[0; 3]; MAX_SCALES],
            boxes: [0; MAX_SCALES],
            norm: [0.0; MAX_SCALES],
        };
        let radius = |j: usize| r0 as f64 * f64::powi(2.0, j as i32);
        let half_hi = m.div_ceil(2) as i64; // largest |xi_a| on the lattice (the -M/2 side)
        for j in 0..=last {
            match g.kind(j) {
                ScaleKind::LowPass => {
                    let c0 = ((1.0 + tau as f64) * radius(0)).ceil() as i64;
                    let l0 = nice(2 * c0 as usize + 1).min(nice(m));
                    g.lo[j] = -(c0 as i32);
                    g.shape[j] = [l0 as i32; 3];
                    g.boxes[j] = 1;
                }
                ScaleKind::Isotropic => {
                    g.lo[j] = -(m as i32 / 2);
                    g.shape[j] = [nice(m) as i32; 3];
                    g.boxes[j] = 1;
                }
                ScaleKind::Directional => {
                    let w = (n_top >> ((top_dir - j) / 2)).max(1);
                    let h = (1.0 + fp.beta as f64) / w as f64;
                    let r_hi = if j == last { half_hi } else { (((1.0 + tau as f64) * radius(j)).ceil() as i64).min(half_hi) };
                    let r_lo = ((radius(j - 1) / (1.0 + fp.beta as f64 / w as f64)).floor() as i64).max(1);
                    crate::ensure_param!(r_hi > r_lo, "scales", "scale {j} has an empty radial range: too many scales for N = {n}");
                    let lr = nice((r_hi - r_lo + 1) as usize);
                    let lt = nice_even((2.0 * h * r_hi as f64).ceil() as usize + 3).min(nice_even(m));
                    g.wedges[j] = w as i32;
                    g.lo[j] = r_lo as i32;
                    g.shape[j] = [lr as i32, lt as i32, lt as i32];
                    g.boxes[j] = (6 * w * w) as i32;
                }
            }
            g.norm[j] = (1.0 / ((m as f64).powi(3) * g.box_points(j) as f64).sqrt()) as f32;
        }
        let mut offsets = Vec::with_capacity(last + 2);
        let mut total = 0usize;
        for j in 0..=last {
            offsets.push(total);
            total += g.boxes[j] as usize * g.box_points(j);
        }
        offsets.push(total);
        Ok(Frame { geom: g, params: params.clone(), offsets, total })
    }

    /// Cube side N.
    pub fn n(&self) -> usize { self.geom.n as usize }
    /// Lattice period M.
    pub fn m(&self) -> usize { self.geom.m as usize }
    /// USFFT global grid P.
    pub fn p(&self) -> usize { self.geom.p as usize }
    pub fn scales(&self) -> usize { self.geom.nscales as usize }
    /// Coefficients (complex) per input sample.
    pub fn redundancy(&self) -> f64 { self.total as f64 / (self.n() as f64).powi(3) }
    /// Total boxes.
    pub fn box_count(&self) -> usize { (0..self.scales()).map(|j| self.geom.boxes[j] as usize).sum() }
    /// Coefficients of scale j in a flat vector.
    pub fn scale_range(&self, j: usize) -> std::ops::Range<usize> { self.offsets[j]..self.offsets[j + 1] }
    /// Coefficient index range of box b of scale j.
    pub fn box_range(&self, j: usize, b: usize) -> std::ops::Range<usize> {
        let np = self.geom.box_points(j);
        let s = self.offsets[j] + b * np;
        s..s + np
    }

    /// One line per scale: kind, wedges, box shape, boxes, coefficients.
    pub fn describe(&self) -> String {
        let g = &self.geom;
        let mut s = format!(
            "wave-packet frame: N = {}, lattice M = {}, USFFT grid P = {}, q = {} ({} points/axis), lambda = {:.4}, {} scales, {} boxes, {} coefficients, redundancy {:.2}\n",
            g.n, g.m, g.p, g.q, 2 * g.q, g.lambda, g.nscales, self.box_count(), self.total, self.redundancy());
        for j in 0..self.scales() {
            let kind = match g.kind(j) {
                ScaleKind::LowPass => "low-pass".to_string(),
                ScaleKind::Isotropic => "isotropic".to_string(),
                ScaleKind::Directional => format!("{} x {} wedges/face", g.wedges[j], g.wedges[j]),
            };
            s += &format!("  scale {j}: {kind:<20} box {:>4} x {:>4} x {:>4}, {:>5} boxes, {:>11} coefficients\n",
                g.shape[j][0], g.shape[j][1], g.shape[j][2], g.boxes[j], self.offsets[j + 1] - self.offsets[j]);
        }
        s
    }
}

/// Checks a volume before a transform: shape, emptiness, finite samples (naming the first bad one).
pub fn validate_volume(data: &[f32], shape: [usize; 3], what: &str) -> Result<()> {
    let len = shape[0] * shape[1] * shape[2];
    if len > 0 {
        ensure_input!(data.len() == len, "{what}: {} samples for a {} x {} x {} volume ({len} expected)", data.len(), shape[0],
            shape[1], shape[2]);
    }
    validate_rows(data, 0, shape, what)
}

/// [`validate_volume`] of a slab: the volume's rows (first axis) from `first_row` on, whole rows
/// only (an MPI rank's part); a bad sample is named by its trace in the whole volume.
pub fn validate_rows(data: &[f32], first_row: usize, shape: [usize; 3], what: &str) -> Result<()> {
    if shape.iter().any(|&d| d == 0) {
        bail_input!("{what}: empty volume (shape {} x {} x {})", shape[0], shape[1], shape[2]);
    }
    let row = shape[1] * shape[2];
    ensure_input!(data.len() % row == 0 && first_row + data.len() / row <= shape[0],
        "{what}: {} samples from row {first_row} are not whole rows of a {} x {} x {} volume", data.len(), shape[0], shape[1],
        shape[2]);
    // In parallel: it reads the whole volume on every run (a fixed cost of any split).
    use rayon::prelude::*;
    // Chunks with a branch-free test (vectorised), then the first bad sample of the first bad chunk:
    // `position_first` per sample ran at ~13 GB/s on 64 threads (33 ms for 480^3).
    const CHUNK: usize = 1 << 15;
    let bad = data.par_chunks(CHUNK).position_first(|c| !c.iter().fold(true, |ok, v| ok & v.is_finite()))
        .and_then(|k| data[k * CHUNK..].iter().position(|v| !v.is_finite()).map(|i| k * CHUNK + i));
    if let Some(i) = bad {
        let (i0, r) = (first_row + i / row, i % row);
        bail_input!("{what}: sample {} of trace ({i0}, {}) is not finite ({})", r % shape[2], r / shape[2], data[i]);
    }
    Ok(())
}

/// What [`fragments::Fragmented::process_with`] does to each cube's coefficients between the
/// forward and the inverse transform.
#[derive(Clone, Copy)]
pub enum CoeffEdit<'a> {
    /// Nothing (a transform round trip): on a GPU the coefficients never leave the device.
    Identity,
    /// Hard threshold: coefficient c of box b (boxes numbered over all scales, as
    /// [`apps::element_norms`]) becomes 0 where |c| < t[b] ([`gpu_kernels::wavepacket::below_threshold`]).
    /// On a GPU a kernel on the device coefficients (no transfers), on the CPU the same test
    /// ([`threshold_host`]); the kept coefficients are counted. t[b] = 0 keeps box b whole.
    Threshold(&'a [f32]),
    /// Any edit `f(cube index, coefficients)`, on the host: on a GPU each cube's coefficients go
    /// down into page-locked memory and up again.
    Host(&'a (dyn Fn(usize, &mut [Complex32]) + Sync)),
}

/// One cube's edit as an engine runs it (the cube index already bound).
pub(crate) enum CubeOp<'a> {
    Identity,
    Threshold(&'a [f32]),
    Host(&'a mut dyn FnMut(&mut [Complex32])),
}

/// Checks per-box thresholds for [`CoeffEdit::Threshold`] (one per box, finite, not negative).
pub fn check_thresholds(frame: &Frame, thr: &[f32]) -> Result<()> {
    ensure!(thr.len() == frame.box_count(), "thresholds: {} given for a frame of {} boxes (one per box)", thr.len(),
        frame.box_count());
    if let Some(b) = thr.iter().position(|t| !(t.is_finite() && *t >= 0.0)) {
        bail!("thresholds: box {b}'s threshold {} must be finite and not negative", thr[b]);
    }
    Ok(())
}

/// The hard threshold of [`CoeffEdit::Threshold`] on host coefficients (a cube's, frame layout):
/// the same decisions as the GPU kernel `wp_threshold`. Returns the kept count.
pub fn threshold_host(frame: &Frame, thr: &[f32], c: &mut [Complex32]) -> u64 {
    use rayon::prelude::*;
    let mut boxes = Vec::with_capacity(frame.box_count());
    let mut rest = c;
    for j in 0..frame.scales() {
        let np = frame.geom.box_points(j);
        for _ in 0..frame.geom.boxes[j] {
            let (b, r) = std::mem::take(&mut rest).split_at_mut(np);
            boxes.push(b);
            rest = r;
        }
    }
    boxes.into_par_iter().zip(thr.par_iter()).map(|(b, &t)| {
        let mut n = 0u64;
        for v in b.iter_mut() {
            if gpu_kernels::wavepacket::below_threshold(v.re, v.im, t) {
                *v = Complex32::default();
            } else {
                n += 1;
            }
        }
        n
    }).sum()
}

/// Samples on the host (a cube's raw samples, a box's partial sum, volumes): page-locked for a
/// GPU engine (full-speed, asynchronous transfers), ordinary memory for the CPU reference.
pub use crate::runtime::memory::HostSamples;

/// A transform engine for one frame: the CPU reference or the GPU.
pub enum Engine {
    Cpu(cpu::CpuEngine),
    Gpu(Box<gpu::GpuEngine>),
}

impl Engine {
    /// The engine of `backend` for cubes of `frame`.
    pub fn new(backend: &Backend, frame: Arc<Frame>) -> Result<Engine> {
        Ok(match backend {
            Backend::Cpu => Engine::Cpu(cpu::CpuEngine::new(frame)),
            Backend::Gpu(g) => Engine::Gpu(Box::new(gpu::GpuEngine::new(g.clone(), frame)?)),
        })
    }
    pub fn frame(&self) -> &Arc<Frame> {
        match self {
            Engine::Cpu(e) => e.frame(),
            Engine::Gpu(e) => e.frame(),
        }
    }
    /// Coefficients of an N^3 cube (x2 fastest).
    pub fn forward(&mut self, cube: &[f32]) -> Result<Vec<Complex32>> {
        let n = self.frame().n();
        validate_volume(cube, [n, n, n], "wave-packet forward")?;
        match self {
            Engine::Cpu(e) => Ok(e.forward(cube)),
            Engine::Gpu(e) => e.forward(cube),
        }
    }
    /// Forward, `edit` the coefficients in place, inverse: one cube's processing. On the GPU the
    /// coefficients stay in page-locked memory (no large host allocation, full-speed transfers).
    pub fn roundtrip(&mut self, cube: &[f32], edit: &mut dyn FnMut(&mut [Complex32])) -> Result<Vec<f32>> {
        let n = self.frame().n();
        validate_volume(cube, [n, n, n], "wave-packet processing")?;
        match self {
            Engine::Cpu(e) => {
                let mut c = e.forward(cube);
                edit(&mut c);
                Ok(e.inverse(&c))
            }
            Engine::Gpu(e) => {
                // The copies into and out of the pinned buffer in parallel (the same values): 64 MB
                // each for a 256^3 cube, the way out into fresh pages, which one thread takes tens of
                // ms for, on every cube's critical path (it does not shrink with more GPUs).
                use rayon::prelude::*;
                const CHUNK: usize = 1 << 16;
                e.pinned_buffers()?.0.par_chunks_mut(CHUNK).zip(cube.par_chunks(CHUNK)).for_each(|(d, s)| d.copy_from_slice(s));
                e.forward_pinned()?;
                edit(e.pinned_buffers()?.1);
                e.inverse_pinned()?;
                let v = &*e.pinned_buffers()?.0;
                let mut out = Vec::new();
                v.par_iter().copied().collect_into_vec(&mut out);
                Ok(out)
            }
        }
    }

    /// A host buffer for one cube's raw samples ([`fragments::Tiling::copy_raw_staged`]), the
    /// kind this engine reads fastest: page-locked and write-combined on a GPU (the host only
    /// writes it; the device reads it).
    pub(crate) fn host_raw(&self) -> Result<HostSamples> {
        let n = self.frame().n();
        Ok(match self {
            Engine::Cpu(_) => HostSamples::Pageable(vec![0.0; n * n * n]),
            Engine::Gpu(e) => HostSamples::PageLocked(crate::runtime::memory::PinnedBuf::write_combined(e.gpu(), n * n * n)?),
        })
    }

    /// A host buffer for a box's partial sum of `len` samples. [`fragments::Fragmented::process`]
    /// keeps a few per engine.
    pub(crate) fn host_partial(&self, len: usize) -> Result<HostSamples> {
        Ok(match self {
            Engine::Cpu(_) => HostSamples::Pageable(vec![0.0; len]),
            // Write-combined page-locked memory, although the fold reads every box back: measured
            // on 4 x H200 (per cube), the folds took 22-32 ms for 8 cubes of 256^3 from
            // write-combined buffers against 34-78 ms from cached ones (the GPU writes the results;
            // cached lines must be snooped).
            Engine::Gpu(e) => HostSamples::PageLocked(crate::runtime::memory::PinnedBuf::write_combined(e.gpu(), len)?),
        })
    }

    /// Queues the upload of the cube's raw samples `slab`, from sample `at` on (a no-op on the
    /// CPU, which reads the host buffer in [`Engine::cube_into_box`]).
    ///
    /// # Safety
    /// As [`gpu::GpuEngine::stage_slab`]: `slab` stays unchanged until [`Engine::wait_staged`].
    pub(crate) unsafe fn stage(&mut self, slab: &[f32], at: usize) -> Result<()> {
        match self {
            Engine::Cpu(_) => Ok(()),
            Engine::Gpu(e) => unsafe { e.stage_slab(slab, at) },
        }
    }

    /// Waits until a GPU engine's streams are through (no transfer in flight into host memory).
    pub(crate) fn quiesce(&mut self) -> Result<()> {
        match self {
            Engine::Cpu(_) => Ok(()),
            Engine::Gpu(e) => e.quiesce(),
        }
    }

    /// The counter that lets a GPU engine add its boxes' faces ([`gpu::GpuEngine::face_flag`]);
    /// `None` on the CPU.
    pub(crate) fn face_flag(&mut self) -> Result<Option<*mut u32>> {
        match self {
            Engine::Cpu(_) => Ok(None),
            Engine::Gpu(e) => e.face_flag(),
        }
    }

    /// Whether this engine's GPU moves `buf` by DMA, with no host pass: it is page-locked memory
    /// ([`crate::runtime::memory::page_locked`]); false on the CPU. A page-locked input volume's
    /// cubes go up straight from it ([`Engine::stage_block`]), a page-locked output volume gets
    /// each box's fresh block straight from the device.
    pub(crate) fn page_locked(&self, buf: &[f32]) -> bool {
        match self {
            Engine::Cpu(_) => false,
            Engine::Gpu(e) => crate::runtime::memory::page_locked(e.gpu(), buf),
        }
    }

    /// Queues the upload of cube samples straight from a page-locked volume (the block of
    /// `inside` at `start`); only where [`Engine::page_locked`].
    ///
    /// # Safety
    /// As [`gpu::GpuEngine::stage_block`]: `vol` stays unchanged until [`Engine::wait_staged`].
    pub(crate) unsafe fn stage_block(&mut self, vol: &[f32], shape: [usize; 3], start: [usize; 3], inside: [usize; 3])
        -> Result<()> {
        match self {
            Engine::Cpu(_) => bail!("the CPU engine reads cubes from host buffers"),
            Engine::Gpu(e) => unsafe { e.stage_block(vol, shape, start, inside) },
        }
    }

    /// Waits until every staged slab has gone up (its host buffer may be written again).
    pub(crate) fn wait_staged(&self) -> Result<()> {
        match self {
            Engine::Cpu(_) => Ok(()),
            Engine::Gpu(e) => e.wait_staged(),
        }
    }

    /// One cube of a box ([`fragments::CubeInBox`]): cut from its raw samples (`raw` on the CPU,
    /// the staged ones on a GPU) with the tapers of `tapers` ([`fragments::Tiling::taper_table`]),
    /// forward, the edit `op`, inverse, and the fold of the tapered result into the box's partial
    /// sum. Behind the box's last cube the sum goes into `partial`. The CPU finishes before
    /// returning (no event; the kept count of a threshold); the GPU returns, for the last cube, an
    /// event that completes when `partial` holds the sum (its kept count and input check:
    /// [`Engine::box_status`]).
    ///
    /// # Safety
    /// On a GPU, `partial` is page-locked memory left untouched until the box's event completes.
    pub(crate) unsafe fn cube_into_box(&mut self, job: &tiling::CubeInBox, tapers: &[f32], raw: &[f32], op: CubeOp,
        partial: &mut [f32], out: Option<crate::runtime::memory::Place>) -> Result<(Option<gpu::BoxDown>, Option<u64>)> {
        job.check(tapers.len(), partial.len())?;
        match self {
            Engine::Cpu(e) => {
                let n = e.frame().n();
                ensure!(raw.len() >= job.inside.iter().product::<usize>(), "cube {}: {} raw samples", job.t, raw.len());
                let mut cube = vec![0.0f32; n * n * n];
                job.cut_host(tapers, raw, &mut cube);
                let mut c = e.forward(&cube);
                let kept = match op {
                    CubeOp::Identity => None,
                    CubeOp::Threshold(thr) => Some(threshold_host(e.frame(), thr, &mut c)),
                    CubeOp::Host(edit) => {
                        edit(&mut c);
                        None
                    }
                };
                job.fold_host(tapers, &e.inverse(&c), partial);
                Ok((None, kept))
            }
            Engine::Gpu(e) => Ok((unsafe { e.cube_into_box(job, tapers, op, partial, out) }?, None)),
        }
    }

    /// A GPU engine's times in the last job (in its cubes, idle between them, the first slab's
    /// wait, the last download: [`gpu::GpuEngine::take_device_times`]); `None` on the CPU.
    pub(crate) fn take_device_times(&mut self) -> Result<Option<gpu::DeviceTimes>> {
        match self {
            Engine::Gpu(e) => e.take_device_times(),
            Engine::Cpu(_) => Ok(None),
        }
    }

    /// A GPU box's status once its event has completed: the kept count of its threshold (`None`
    /// without one) and whether its raw samples were all finite.
    pub(crate) fn box_status(&self, done: &gpu::BoxDown, threshold: bool) -> Result<(Option<u64>, bool)> {
        match self {
            Engine::Gpu(e) => e.box_status(done, threshold),
            Engine::Cpu(_) => bail!("the CPU engine counts its thresholds and checks its input as it runs"),
        }
    }

    /// The cube from coefficients (the adjoint, which is the inverse).
    pub fn inverse(&mut self, coeffs: &[Complex32]) -> Result<Vec<f32>> {
        let total = self.frame().total;
        crate::ensure_input!(coeffs.len() == total, "wave-packet inverse: {} coefficients given, the frame has {total}", coeffs.len());
        if let Some(i) = coeffs.iter().position(|c| !c.re.is_finite() || !c.im.is_finite()) {
            bail_input!("wave-packet inverse: coefficient {i} is not finite");
        }
        match self {
            Engine::Cpu(e) => Ok(e.inverse(coeffs)),
            Engine::Gpu(e) => e.inverse(coeffs),
        }
    }
}

#[cfg(test)]
mod tests;
