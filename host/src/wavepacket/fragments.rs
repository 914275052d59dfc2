//! Volumes of any N1 x N2 x N3 shape, including ones bigger than GPU memory: the paper's variant 2.
//! The volume is cut into overlapping cubes (256^3 by default, the paper's choice), each cube is
//! transformed independently (cubes are spread over all engines, one per GPU), and the overlaps are
//! tapered with weights a_t whose squares sum to 1 at every sample. The cube coefficients are those
//! of a_t f, and the inverse sums a_t T^* c_t: the fragmented transform is itself a tight frame
//! (adjoint = inverse, energy kept), so thresholding works on it as on one cube.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};

use anyhow::{ensure, Context, Result};
use num_complex::Complex32;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{nice, validate_volume, CoeffEdit, CubeOp, Engine, Frame, HostCube, Params};
use crate::backend::Backend;
use crate::runtime::Gpu;

/// Where the cubes go in the volume.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tiling {
    /// Volume shape (n1, n2, n3), n3 fastest (time samples of a trace).
    pub shape: [usize; 3],
    /// Cube side.
    pub cube: usize,
    /// Cube start per axis.
    pub starts: [Vec<usize>; 3],
}

impl Tiling {
    /// Cubes of side `cube` (a volume that fits in one cube gets one cube of the smallest fast FFT
    /// size holding it), overlapping by at least `overlap` samples.
    pub fn new(shape: [usize; 3], cube: usize, overlap: usize) -> Result<Tiling> {
        ensure!(shape.iter().all(|&d| d > 0), "empty volume (shape {:?})", shape);
        ensure!(cube >= 16, "cube side {cube} is too small (at least 16)");
        let big = shape.iter().copied().max().unwrap();
        if big <= cube {
            let c = nice(big.max(16));
            let c = if c % 2 == 0 { c } else { nice(c + 1) };
            return Ok(Tiling { shape, cube: c, starts: [vec![0], vec![0], vec![0]] });
        }
        ensure!(2 * overlap <= cube, "overlap {overlap} is more than half the cube side {cube}");
        let starts = shape.map(|d| {
            if d <= cube {
                vec![0]
            } else {
                let k = (d - overlap).div_ceil(cube - overlap);
                let k = k.max(2);
                (0..k).map(|i| ((i * (d - cube)) as f64 / (k - 1) as f64).round() as usize).collect()
            }
        });
        // Three cubes must never overlap one sample (the taper is pairwise).
        for (a, s) in starts.iter().enumerate() {
            for w in s.windows(3) {
                ensure!(w[2] >= w[0] + cube, "axis {a}: cubes of {cube} with overlap {overlap} stack three deep");
            }
        }
        Ok(Tiling { shape, cube, starts })
    }

    pub fn count(&self) -> usize { self.starts.iter().map(|s| s.len()).product() }

    /// Start of cube t (x fastest over the last axis).
    pub fn start(&self, t: usize) -> [usize; 3] {
        let (n1, n2) = (self.starts[1].len(), self.starts[2].len());
        [self.starts[0][t / (n1 * n2)], self.starts[1][(t / n2) % n1], self.starts[2][t % n2]]
    }

    fn index(&self, t: usize) -> [usize; 3] {
        let (n1, n2) = (self.starts[1].len(), self.starts[2].len());
        [t / (n1 * n2), (t / n2) % n1, t % n2]
    }

    /// 1D taper of cube k along axis a at local sample x: squares of neighbours sum to 1 in every
    /// overlap; 0 in the zero padding past the volume.
    pub fn taper(&self, a: usize, k: usize, x: usize) -> f32 {
        let s = &self.starts[a];
        let g = s[k] + x;
        if g >= self.shape[a] {
            return 0.0;
        }
        let mut w = 1.0f32;
        if k > 0 {
            let (lo, hi) = (s[k], s[k - 1] + self.cube);
            if g < hi {
                w *= rise((g - lo) as f32 + 0.5, (hi - lo) as f32);
            }
        }
        if k + 1 < s.len() {
            let (lo, hi) = (s[k + 1], s[k] + self.cube);
            if g >= lo {
                w *= rise((hi - g) as f32 - 0.5, (hi - lo) as f32);
            }
        }
        w
    }

    /// Taper product of cube t at local position x (sample coordinates; 0 outside the volume).
    pub fn weight_at(&self, t: usize, x: [f32; 3]) -> f32 {
        let ix = self.index(t);
        let mut w = 1.0;
        for a in 0..3 {
            let xa = x[a].round();
            if xa < 0.0 || xa >= self.cube as f32 {
                return 0.0;
            }
            w *= self.taper(a, ix[a], xa as usize);
        }
        w
    }

    /// The tapered, zero-padded cube t.
    pub fn extract(&self, vol: &[f32], t: usize) -> Vec<f32> {
        let c = self.cube;
        let (st, ix) = (self.start(t), self.index(t));
        let w: [Vec<f32>; 3] = [0, 1, 2].map(|a| (0..c).map(|x| self.taper(a, ix[a], x)).collect());
        let [_, s1, s2] = self.shape;
        let mut out = vec![0.0f32; c * c * c];
        let rows = c.min(self.shape[0] - st[0]);
        out[..rows * c * c].par_chunks_mut(c * c).enumerate().for_each(|(x0, slab)| {
            for x1 in 0..c.min(s1 - st[1]) {
                let src = ((st[0] + x0) * s1 + st[1] + x1) * s2 + st[2];
                let w01 = w[0][x0] * w[1][x1];
                for x2 in 0..c.min(s2 - st[2]) {
                    slab[x1 * c + x2] = vol[src + x2] * w01 * w[2][x2];
                }
            }
        });
        out
    }

    /// [`Tiling::extract`] into `out` (c^3 samples, every one written: padding as zeros), `SLAB`
    /// planes at a time, calling `staged(slab, its first sample)` after each slab (the GPU uploads it while the
    /// host writes the next). Also checks the volume's samples it reads: false when one of them is
    /// not finite (every sample of the volume lies in some cube, so the cubes together check the
    /// whole volume, with no pass of its own). The same values as `extract`, bit for bit.
    pub fn extract_staged(&self, vol: &[f32], t: usize, out: &mut [f32],
        mut staged: impl FnMut(&[f32], usize) -> Result<()>) -> Result<bool> {
        const SLAB: usize = 16;
        let c = self.cube;
        ensure!(out.len() == c * c * c, "cube buffer of {} samples for cubes of {c}^3", out.len());
        let (st, ix) = (self.start(t), self.index(t));
        let w: [Vec<f32>; 3] = [0, 1, 2].map(|a| (0..c).map(|x| self.taper(a, ix[a], x)).collect());
        let [s0, s1, s2] = self.shape;
        let (n0, n1, n2) = (c.min(s0 - st[0]), c.min(s1 - st[1]), c.min(s2 - st[2]));
        let mut finite = true;
        for (k, slab) in out.chunks_mut(SLAB * c * c).enumerate() {
            let ok = slab.par_chunks_mut(c).enumerate().with_min_len(8).map(|(r, row)| {
                let (x0, x1) = (k * SLAB + r / c, r % c);
                if x0 >= n0 || x1 >= n1 {
                    row.fill(0.0);
                    return true;
                }
                let src = &vol[((st[0] + x0) * s1 + st[1] + x1) * s2 + st[2]..][..n2];
                let w01 = w[0][x0] * w[1][x1];
                let mut ok = true;
                for ((d, &v), &w2) in row[..n2].iter_mut().zip(src).zip(&w[2][..n2]) {
                    ok &= v.is_finite();
                    *d = v * w01 * w2;
                }
                row[n2..].fill(0.0);
                ok
            }).reduce(|| true, |a, b| a & b);
            finite &= ok;
            staged(slab, k * SLAB * c * c)?;
        }
        Ok(finite)
    }

    /// Adds the tapered cube t into the volume. In parallel over the cube's slabs (x0): each
    /// volume sample gets one add per cube, so the result is that of a serial loop, bit for bit.
    /// It runs on the thread that folds the cubes in order while the devices compute the next
    /// ones; serial, 8 cubes of 256^3 took longer than their transforms on 4 GPUs.
    pub fn accumulate(&self, vol: &mut [f32], t: usize, cube: &[f32]) {
        let c = self.cube;
        let (st, ix) = (self.start(t), self.index(t));
        let w: [Vec<f32>; 3] = [0, 1, 2].map(|a| (0..c).map(|x| self.taper(a, ix[a], x)).collect());
        let [_, s1, s2] = self.shape;
        let rows = c.min(self.shape[0] - st[0]);
        vol[st[0] * s1 * s2..(st[0] + rows) * s1 * s2].par_chunks_mut(s1 * s2).enumerate().for_each(|(x0, plane)| {
            for x1 in 0..c.min(s1 - st[1]) {
                let dst = (st[1] + x1) * s2 + st[2];
                let src = (x0 * c + x1) * c;
                let w01 = w[0][x0] * w[1][x1];
                for x2 in 0..c.min(s2 - st[2]) {
                    plane[dst + x2] += cube[src + x2] * w01 * w[2][x2];
                }
            }
        });
    }
}

/// sin(pi/2 nu(x / width)): rises from 0 to 1 across an overlap; with its mirror the squares sum to 1.
fn rise(x: f32, width: f32) -> f32 {
    let v = gpu_kernels::wavepacket::fall(1.0 - x / width);
    v.clamp(0.0, 1.0)
}

/// A wave-packet transform of a whole volume through cubes, on one or more engines.
pub struct Fragmented {
    pub tiling: Tiling,
    pub frame: Arc<Frame>,
    engines: Vec<Mutex<Engine>>,
    /// Host cube buffers of each engine, kept between jobs ([`Fragmented::process`]).
    pools: Vec<CubePool>,
}

/// The result of [`Fragmented::process_with`].
pub struct Processed {
    pub volume: Vec<f32>,
    /// Coefficients kept by a [`CoeffEdit::Threshold`] over all cubes (`None` for other edits).
    pub kept: Option<u64>,
}

/// From an engine's thread to the folding thread: its first cube is written, or a cube's result.
enum Msg {
    Written,
    Cube(usize, usize, Result<(HostCube, Option<u64>)>),
}

/// Writes the output's (calloc'ed, untouched) pages in plane order ahead of the folds, one
/// sample per 4 KiB page, in parallel: the page faults (the OS zeroes each page) leave the folds'
/// and the extraction's way. Cubes come in plane order (axis 0 slowest), so cube t needs planes
/// below `start0(t) + cube` only.
struct Ahead {
    plane: usize,
    planes: usize,
    /// Planes written so far, and how many per step (about 4 MB).
    at: usize,
    chunk: usize,
    /// Planes needed by each cube (a non-decreasing end).
    need: Vec<usize>,
}

impl Ahead {
    fn new(t: &Tiling) -> Ahead {
        let [s0, s1, s2] = t.shape;
        let plane = s1 * s2;
        Ahead { plane, planes: s0, at: 0, chunk: ((1 << 20) / plane.max(1)).max(1),
            need: (0..t.count()).map(|c| (t.start(c)[0] + t.cube).min(s0)).collect() }
    }
    fn done(&self) -> bool { self.at >= self.planes }
    fn to(&mut self, out: &mut [f32], end: usize) {
        let end = end.min(self.planes);
        if end > self.at {
            const PAGE: usize = 1024; // f32 per 4 KiB
            out[self.at * self.plane..end * self.plane].par_chunks_mut(PAGE).for_each(|p| {
                // SAFETY: a valid, aligned f32 of `out`. Volatile: the store of 0.0 into zeroed
                // memory must not be optimised away (it is the page's first touch).
                unsafe { std::ptr::write_volatile(p.as_mut_ptr(), 0.0) }
            });
            self.at = end;
        }
    }
    fn step(&mut self, out: &mut [f32]) { self.to(out, self.at + self.chunk) }
    /// Everything cube t's fold touches.
    fn through(&mut self, out: &mut [f32], t: usize) { self.to(out, self.need[t]) }
}

/// A volume sample that is not finite, found while writing the cubes ([`Fragmented::process`]
/// then names the first one with [`validate_volume`]).
#[derive(Debug, thiserror::Error)]
#[error("the volume has a sample that is not finite")]
struct NotFinite;

/// Host cube buffers per engine in [`Fragmented::process`]: one being written, one the device
/// works from and into, one waiting for (or in) the ordered fold.
const HOST_CUBES: usize = 3;

/// An engine's host cube buffers: the free ones, and how many exist (made on first use, page-locked
/// on a GPU, so a processing job of many volumes pays their allocation once).
#[derive(Default)]
struct CubePool {
    state: Mutex<(Vec<HostCube>, usize)>,
    ready: Condvar,
}

impl CubePool {
    /// A free buffer (made with `make` while fewer than [`HOST_CUBES`] exist, else waiting for the
    /// fold to give one back); `None` once `stop` is set.
    fn take(&self, stop: &std::sync::atomic::AtomicBool, make: impl FnOnce() -> Result<HostCube>) -> Result<Option<HostCube>> {
        let mut g = self.state.lock().map_err(|_| anyhow::anyhow!("cube buffer pool poisoned"))?;
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            if let Some(b) = g.0.pop() {
                return Ok(Some(b));
            }
            if g.1 < HOST_CUBES {
                g.1 += 1;
                drop(g);
                return make().map(Some);
            }
            g = self.ready.wait_timeout(g, std::time::Duration::from_millis(50))
                .map_err(|_| anyhow::anyhow!("cube buffer pool poisoned"))?.0;
        }
    }
    fn give(&self, b: HostCube) {
        if let Ok(mut g) = self.state.lock() {
            g.0.push(b);
        }
        self.ready.notify_all();
    }
    fn wake(&self) { self.ready.notify_all(); }
    /// After a failed job: the buffers that did not come back are forgotten.
    fn recount(&self) {
        if let Ok(mut g) = self.state.lock() {
            g.1 = g.0.len();
        }
    }
}

impl Fragmented {
    /// Engines for `backend`: the CPU, or every visible GPU (cubes go to all of them concurrently)
    /// when `all_gpus` is set, otherwise the backend's GPU.
    pub fn new(backend: &Backend, shape: [usize; 3], cube: usize, overlap: usize, params: &Params,
        all_gpus: bool) -> Result<Fragmented> {
        Self::from_tiling(backend, Tiling::new(shape, cube, overlap)?, params, all_gpus)
    }

    /// For a given cube layout (e.g. read from a coefficient file).
    pub fn from_tiling(backend: &Backend, tiling: Tiling, params: &Params, all_gpus: bool) -> Result<Fragmented> {
        let frame = Arc::new(Frame::new(tiling.cube, params)?);
        let mut engines = vec![Mutex::new(Engine::new(backend, frame.clone())?)];
        if let (Backend::Gpu(first), true) = (backend, all_gpus) {
            for ordinal in 0..Gpu::device_count() {
                if ordinal != first.info().ordinal {
                    let gpu = Gpu::open(ordinal)?;
                    engines.push(Mutex::new(Engine::new(&Backend::Gpu(gpu), frame.clone())?));
                }
            }
        }
        Ok(Fragmented { tiling, frame, pools: engines.iter().map(|_| CubePool::default()).collect(), engines })
    }

    /// Engines on the given backends, one each (`--gpus N|all`; `--device cpu --gpus N` gives N CPU
    /// engines, which split the cubes as N GPUs would).
    pub fn on_backends(backends: &[Backend], tiling: Tiling, params: &Params) -> Result<Fragmented> {
        ensure!(!backends.is_empty(), "no device for the wave-packet cubes");
        let frame = Arc::new(Frame::new(tiling.cube, params)?);
        let engines = backends.iter().map(|b| Engine::new(b, frame.clone()).map(Mutex::new)).collect::<Result<Vec<_>>>()?;
        Ok(Fragmented { tiling, frame, pools: engines.iter().map(|_| CubePool::default()).collect(), engines })
    }

    /// From existing engines (tests, benchmarks).
    pub fn with_engines(tiling: Tiling, engines: Vec<Engine>) -> Result<Fragmented> {
        ensure!(!engines.is_empty(), "no engine");
        let frame = engines[0].frame().clone();
        ensure!(frame.n() == tiling.cube, "engine cube {} for a tiling of {}", frame.n(), tiling.cube);
        Ok(Fragmented { tiling, frame, pools: engines.iter().map(|_| CubePool::default()).collect(), engines: engines.into_iter().map(Mutex::new).collect() })
    }

    pub fn engines(&self) -> usize { self.engines.len() }
    /// Coefficients of the whole volume: cubes one after the other.
    pub fn total(&self) -> usize { self.tiling.count() * self.frame.total }

    /// Runs `work(engine, cube index)` for every cube, the engines pulling cubes from a shared
    /// counter (one thread per engine).
    fn for_each_cube<F: Fn(&mut Engine, usize) -> Result<()> + Sync>(&self, work: F) -> Result<()> {
        let next = AtomicUsize::new(0);
        let count = self.tiling.count();
        std::thread::scope(|s| {
            let handles: Vec<_> = self
                .engines
                .iter()
                .map(|eng| {
                    let (next, work) = (&next, &work);
                    s.spawn(move || -> Result<()> {
                        let mut e = eng.lock().unwrap();
                        loop {
                            let t = next.fetch_add(1, Ordering::Relaxed);
                            if t >= count {
                                return Ok(());
                            }
                            work(&mut e, t)?;
                        }
                    })
                })
                .collect();
            handles.into_iter().try_for_each(|h| h.join().map_err(|_| anyhow::anyhow!("a fragment worker panicked"))?)
        })
    }

    /// Forward transform of the volume.
    pub fn forward(&self, vol: &[f32]) -> Result<Vec<Complex32>> {
        validate_volume(vol, self.tiling.shape, "wave-packet forward")?;
        let per = self.frame.total;
        let out = Mutex::new(vec![Complex32::default(); self.total()]);
        self.for_each_cube(|e, t| {
            let c = e.forward(&self.tiling.extract(vol, t))?;
            out.lock().unwrap()[t * per..(t + 1) * per].copy_from_slice(&c);
            Ok(())
        })?;
        Ok(out.into_inner().unwrap())
    }

    /// Inverse (= adjoint) transform.
    pub fn inverse(&self, coeffs: &[Complex32]) -> Result<Vec<f32>> {
        ensure!(coeffs.len() == self.total(), "{} coefficients for a fragmented frame of {}", coeffs.len(), self.total());
        let per = self.frame.total;
        self.accumulate_cubes(|e, t| e.inverse(&coeffs[t * per..(t + 1) * per]))
    }

    /// Forward of every cube, handing its coefficients to `look` (statistics passes).
    pub fn for_each_forward<F: Fn(usize, &[Complex32]) + Sync>(&self, vol: &[f32], look: F) -> Result<()> {
        validate_volume(vol, self.tiling.shape, "wave-packet forward")?;
        self.for_each_cube(|e, t| {
            let c = e.forward(&self.tiling.extract(vol, t))?;
            look(t, &c);
            Ok(())
        })
    }

    /// Forward, `edit` the cube's coefficients on the host, inverse, merge: one pass, cube by cube,
    /// never holding the whole volume's coefficients. [`Fragmented::process_with`] with
    /// [`CoeffEdit::Host`]; edits that a device can do ([`CoeffEdit::Identity`],
    /// [`CoeffEdit::Threshold`]) are faster through `process_with` on GPUs.
    pub fn process<F: Fn(usize, &mut [Complex32]) + Sync>(&self, vol: &[f32], edit: F) -> Result<Vec<f32>> {
        Ok(self.process_with(vol, CoeffEdit::Host(&edit))?.volume)
    }

    /// Forward, the coefficient edit, inverse, merge (see [`Fragmented::process`]).
    ///
    /// Issue 9 (the paper's variant 2 on several GPUs): every host step either scales with the
    /// engines or overlaps their work. One host thread per engine takes the next cube, writes it
    /// tapered into one of its page-locked cube buffers slab by slab, each slab's upload queued as
    /// it is written (the input's finiteness is checked on the way: no separate pass over the
    /// volume), then runs forward, the edit, inverse, and writes the next cube while the device
    /// finishes this one. Identity and threshold edits run on the device (no coefficient
    /// transfers); a host edit brings each cube's coefficients down and up. The calling thread adds
    /// the cubes into the volume in cube order straight from those buffers (the same bits for any
    /// number of engines and any timing), then hands each buffer back to its engine.
    ///
    /// The output is allocated zeroed by the OS (calloc: no pass over it), and its pages are first
    /// written (in parallel) by the folding thread just before the fold that needs them (with
    /// `SEISGPU_WP_AHEAD=1` also ahead of the folds while it waits for results): neither beside
    /// the first cubes' extraction (the critical path) nor as one whole-volume pass (1.6 GB at
    /// 928 x 928 x 480) competing with the next cubes'. Touching a page writes 0.0 into a zero
    /// page, so the folds add onto exact zeros as before: the same bits. Each engine uploads the
    /// next cube on a copy stream of its own while the current one computes.
    pub fn process_with(&self, vol: &[f32], edit: CoeffEdit) -> Result<Processed> {
        let t0 = std::time::Instant::now();
        let [s0, s1, s2] = self.tiling.shape;
        ensure!(s0 * s1 * s2 > 0, "wave-packet processing: empty volume (shape {s0} x {s1} x {s2})");
        ensure!(vol.len() == s0 * s1 * s2, "wave-packet processing: {} samples for a {s0} x {s1} x {s2} volume ({} expected)",
            vol.len(), s0 * s1 * s2);
        if let CoeffEdit::Threshold(thr) = edit {
            super::check_thresholds(&self.frame, thr)?;
        }
        let out = self.pipeline(vol, edit, t0);
        crate::multi::mark("returned at", t0);
        match out {
            Ok(v) => Ok(v),
            // A sample that is not finite: the whole-volume check names the first one.
            Err(e) if e.downcast_ref::<NotFinite>().is_some() => {
                validate_volume(vol, self.tiling.shape, "wave-packet processing")?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    fn pipeline(&self, vol: &[f32], edit: CoeffEdit, t0: std::time::Instant) -> Result<Processed> {
        use std::sync::atomic::AtomicBool;
        let count = self.tiling.count();
        let len = vol.len();
        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let stop_all = || {
            stop.store(true, Ordering::Relaxed);
            self.pools.iter().for_each(CubePool::wake);
        };
        let result = std::thread::scope(|s| -> Result<Processed> {
            let (tx, rx) = std::sync::mpsc::channel::<Msg>();
            let first_round = self.engines.len().min(count);
            for (k, (eng, pool)) in self.engines.iter().zip(&self.pools).enumerate() {
                let (tx, next, stop, stop_all) = (tx.clone(), &next, &stop, &stop_all);
                s.spawn(move || {
                    let mut t = usize::MAX;
                    let r = (|| -> Result<()> {
                        let mut e = eng.lock().map_err(|_| anyhow::anyhow!("a cube engine panicked"))?;
                        // The cube on the device: its number, buffer, the event of its result and
                        // the CPU's kept count.
                        let mut prev: Option<(usize, HostCube, Option<cudarc::driver::CudaEvent>, Option<u64>)> = None;
                        let finish = |e: &Engine, (pt, pb, ev, kept): (usize, HostCube, Option<cudarc::driver::CudaEvent>, Option<u64>)|
                            -> Result<()> {
                            let mut kept = kept;
                            if let Some(ev) = ev {
                                ev.synchronize().context("waiting for a cube's result")?;
                                if matches!(edit, CoeffEdit::Threshold(_)) {
                                    kept = Some(e.device_kept()?);
                                }
                            }
                            let _ = tx.send(Msg::Cube(pt, k, Ok((pb, kept))));
                            Ok(())
                        };
                        let mut first = true;
                        loop {
                            // The buffer before the cube: an engine with a cube always has what it needs
                            // to finish it, so the ordered fold never waits on a starved engine.
                            let Some(mut buf) = pool.take(stop, || e.host_cube())? else { break };
                            t = next.fetch_add(1, Ordering::Relaxed);
                            if t >= count {
                                pool.give(buf);
                                break;
                            }
                            let te = std::time::Instant::now();
                            let b = buf.as_mut_slice()?;
                            // SAFETY: each slab is written once and not touched again until the
                            // roundtrip below has synchronised the stream past its upload.
                            let finite = self.tiling.extract_staged(vol, t, b, |slab, at| unsafe { e.stage(slab, at) })?;
                            if !finite {
                                return Err(NotFinite.into());
                            }
                            crate::multi::mark("cube written and queued up (each)", te);
                            if std::mem::take(&mut first) {
                                // The fold thread may write the output's pages from now on.
                                crate::multi::mark("first cube written at", t0);
                                let _ = tx.send(Msg::Written);
                            }
                            if let Some(p) = prev.take() {
                                finish(&*e, p)?;
                            }
                            let b = buf.as_mut_slice()?;
                            let mut host = |c: &mut [Complex32]| {
                                if let CoeffEdit::Host(f) = edit {
                                    f(t, c)
                                }
                            };
                            let op = match edit {
                                CoeffEdit::Identity => CubeOp::Identity,
                                CoeffEdit::Threshold(thr) => CubeOp::Threshold(thr),
                                CoeffEdit::Host(_) => CubeOp::Host(&mut host),
                            };
                            // SAFETY: `buf` is the staged page-locked buffer; it is not touched again
                            // until the event completes (the synchronisation in `finish`).
                            let (ev, kept) = unsafe { e.roundtrip_queued(b, op) }?;
                            prev = Some((t, buf, ev, kept));
                            if stop.load(Ordering::Relaxed) {
                                break;
                            }
                        }
                        if let Some(p) = prev.take() {
                            finish(&*e, p)?;
                        }
                        Ok(())
                    })();
                    if let Err(err) = r {
                        stop_all();
                        let err = if err.downcast_ref::<NotFinite>().is_some() || t >= count {
                            err
                        } else {
                            err.context(format!("device {k} failed on cube {t} at {:?}", self.tiling.start(t)))
                        };
                        let _ = tx.send(Msg::Cube(t, k, Err(err)));
                    }
                });
            }
            drop(tx);
            // The ordered fold: cube t is added once every earlier cube is in. The output comes
            // zeroed from the OS, untouched; `ahead` writes its pages in plane order.
            let mut out = vec![0.0f32; len];
            let mut ahead = Ahead::new(&self.tiling);
            // Off by default: measured on 4 x H200 (session 4), writing the pages ahead did not pay
            // (928 x 928 x 480 on 4 GPUs: 209 ms with, 195 ms without; 480^3 even); the folds fault
            // their own pages. `SEISGPU_WP_AHEAD=1` turns it on, to compare on a machine.
            let ahead_on = std::env::var("SEISGPU_WP_AHEAD").is_ok_and(|v| v == "1");
            let mut early: BTreeMap<usize, (usize, HostCube)> = BTreeMap::new();
            let (mut due, mut got, mut written, mut busy) = (0usize, 0usize, 0usize, 0.0f64);
            let mut kept: Option<u64> = Some(0);
            let mut failure: Option<(usize, anyhow::Error)> = None;
            loop {
                // Pages ahead while no result waits, once every engine has its first cube.
                let msg = if ahead_on && written >= first_round && failure.is_none() && !ahead.done() {
                    match rx.try_recv() {
                        Ok(m) => m,
                        Err(std::sync::mpsc::TryRecvError::Empty) => {
                            ahead.step(&mut out);
                            if ahead.done() {
                                crate::multi::mark("output pages all written at", t0);
                            }
                            continue;
                        }
                        Err(std::sync::mpsc::TryRecvError::Disconnected) => break,
                    }
                } else {
                    match rx.recv() {
                        Ok(m) => m,
                        Err(_) => break,
                    }
                };
                let (t, k, r) = match msg {
                    Msg::Written => {
                        written += 1;
                        continue;
                    }
                    Msg::Cube(t, k, r) => (t, k, r),
                };
                let (b, n) = match r {
                    Err(e) => {
                        stop_all();
                        // The lowest cube's failure (deterministic when several fail).
                        if failure.as_ref().is_none_or(|(ft, _)| t < *ft) {
                            failure = Some((t, e));
                        }
                        continue;
                    }
                    Ok(b) => b,
                };
                kept = kept.zip(n).map(|(a, b)| a + b);
                got += 1;
                if got == 1 {
                    crate::multi::mark("first result at", t0);
                }
                if got == count {
                    crate::multi::mark("last result at", t0);
                }
                if failure.is_some() {
                    self.pools[k].give(b);
                    continue;
                }
                early.insert(t, (k, b));
                while let Some((k, b)) = early.remove(&due) {
                    let tf = std::time::Instant::now();
                    ahead.through(&mut out, due);
                    let r = b.as_slice().map(|c| self.tiling.accumulate(&mut out, due, c));
                    busy += tf.elapsed().as_secs_f64();
                    self.pools[k].give(b);
                    if let Err(e) = r {
                        stop_all();
                        failure = Some((due, e.context(format!("adding cube {due} into the volume"))));
                        break;
                    }
                    due += 1;
                }
            }
            for (_, (k, b)) in early {
                self.pools[k].give(b);
            }
            crate::multi::mark("folded at", t0);
            if let Some(since) = std::time::Instant::now().checked_sub(std::time::Duration::from_secs_f64(busy)) {
                crate::multi::mark("host fold busy", since);
            }
            if let Some((_, e)) = failure {
                return Err(e);
            }
            ensure!(due == count, "{due} of {count} cubes came back");
            Ok(Processed { volume: out, kept: if matches!(edit, CoeffEdit::Threshold(_)) { kept } else { None } })
        });
        if result.is_err() {
            // Buffers of a failed job that did not come back are made again next time.
            self.pools.iter().for_each(CubePool::recount);
        }
        result
    }

    /// Runs `cube(engine, t)` for every cube on all engines and adds the tapered results into the
    /// volume in cube order (overlaps sum in a fixed order, so the volume is the same bit for bit
    /// for any number of engines; only the out-of-order cubes wait in memory).
    fn accumulate_cubes<F: Fn(&mut Engine, usize) -> Result<Vec<f32>> + Sync>(&self, cube: F) -> Result<Vec<f32>> {
        let ts: Vec<usize> = (0..self.tiling.count()).collect();
        let len: usize = self.tiling.shape.iter().product();
        std::thread::scope(|s| {
            // The zero volume is made on another thread, its pages written in parallel, while the
            // engines transform the first cubes: left to the folds, the first touch of its pages
            // (442 MB at 480^3) fell on the last cubes' folds, a serial tail after the devices finish.
            let zeros = s.spawn(move || {
                let t = std::time::Instant::now();
                let mut v = Vec::new();
                rayon::iter::repeat_n(0.0f32, len).collect_into_vec(&mut v);
                crate::multi::mark("output zeroed (beside the devices)", t);
                v
            });
            let mut zeros = Some(zeros);
            let out = crate::multi::fold_on_devices(&self.engines, &ts, None::<Vec<f32>>, |eng, _, &t| {
                let mut e = eng.lock().map_err(|_| anyhow::anyhow!("a cube engine panicked"))?;
                cube(&mut e, t).map_err(|err| err.context(format!("cube {t} at {:?}", self.tiling.start(t))))
            }, |out, t, c| {
                if out.is_none() {
                    let v = zeros.take().context("the output volume")?.join().map_err(|_| anyhow::anyhow!("zeroing the volume panicked"))?;
                    *out = Some(v);
                }
                let Some(out) = out.as_mut() else { anyhow::bail!("no output volume") };
                self.tiling.accumulate(out, t, &c);
                Ok(())
            })
            .map_err(anyhow::Error::from)?;
            match (out, zeros) {
                (Some(v), _) => Ok(v),
                // No cube (an empty tiling): the zero volume itself.
                (None, Some(z)) => z.join().map_err(|_| anyhow::anyhow!("zeroing the volume panicked")),
                (None, None) => anyhow::bail!("no output volume"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_staged_extraction_equals_extract_and_checks_the_input() {
        // Cubes with padding on every axis (the volume is no multiple of anything) and slabs.
        let t = Tiling::new([45, 23, 70], 32, 8).unwrap();
        assert!(t.count() > 2);
        let vol: Vec<f32> = (0..45 * 23 * 70).map(|i| ((i * 7919) % 1000) as f32 * 1e-3 - 0.5).collect();
        let mut buf = vec![f32::NAN; 32 * 32 * 32];
        for c in 0..t.count() {
            let mut seen = vec![0u8; buf.len()];
            let ok = t.extract_staged(&vol, c, &mut buf, |slab, at| {
                seen[at..at + slab.len()].iter_mut().for_each(|s| *s += 1);
                Ok(())
            }).unwrap();
            assert!(ok && seen.iter().all(|&s| s == 1), "cube {c}: every sample staged once");
            let want = t.extract(&vol, c);
            assert!(buf.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "cube {c}");
        }
        let mut bad = vol.clone();
        bad[(30 * 23 + 4) * 70 + 66] = f32::INFINITY;
        let hits: Vec<bool> = (0..t.count()).map(|c| !t.extract_staged(&bad, c, &mut buf, |_, _| Ok(())).unwrap()).collect();
        assert!(hits.iter().any(|&h| h), "some cube sees the bad sample");
    }

    /// A 45 x 23 x 70 volume (not a multiple of its 32^3 cubes) and its tiling on one and on three
    /// CPU engines.
    fn one_and_three_engines() -> (Vec<f32>, Fragmented, Fragmented) {
        let shape = [45, 23, 70];
        let params = Params { eps: 1e-6, ..Params::default() };
        let tiling = Tiling::new(shape, 32, 8).unwrap();
        let vol: Vec<f32> = (0..shape.iter().product::<usize>()).map(|i| ((i * 104729) % 997) as f32 * 1e-3 - 0.5).collect();
        let one = Fragmented::on_backends(&[Backend::Cpu], tiling.clone(), &params).unwrap();
        let three = Fragmented::on_backends(&[Backend::Cpu, Backend::Cpu, Backend::Cpu], tiling, &params).unwrap();
        (vol, one, three)
    }

    #[test]
    fn scale_process_is_bit_exact_over_engines_repeatable_and_names_bad_samples() {
        let (vol, one, three) = one_and_three_engines();
        let edit = |t: usize, c: &mut [Complex32]| c.iter_mut().for_each(|x| *x *= 0.5 + 0.01 * t as f32);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let p1 = one.process(&vol, edit).unwrap();
        let p3 = three.process(&vol, edit).unwrap();
        assert_eq!(bits(&p1), bits(&p3), "3 engines differ from 1");
        // Again, on the kept buffers; and the serial reference: extract, roundtrip, add in cube order.
        assert_eq!(bits(&three.process(&vol, edit).unwrap()), bits(&p3), "not repeatable");
        let mut e = Engine::new(&Backend::Cpu, one.frame.clone()).unwrap();
        let mut want = vec![0.0f32; vol.len()];
        for t in 0..one.tiling.count() {
            let c = e.roundtrip(&one.tiling.extract(&vol, t), &mut |c| edit(t, c)).unwrap();
            one.tiling.accumulate(&mut want, t, &c);
        }
        assert_eq!(bits(&want), bits(&p1), "differs from the serial cube loop");
        let mut bad = vol.clone();
        bad[(30 * 23 + 4) * 70 + 66] = f32::NAN;
        let err = three.process(&bad, edit).unwrap_err().to_string();
        assert!(err.contains("sample 66 of trace (30, 4) is not finite"), "{err}");
        // The failed job's buffers are made again: the next job still runs.
        assert_eq!(bits(&three.process(&vol, edit).unwrap()), bits(&p3));
        let err = three.process(&vol[1..], edit).unwrap_err().to_string();
        assert!(err.contains("samples for a 45 x 23 x 70 volume"), "{err}");
    }

    /// Issue 9's device-side edits on CPU engines: the identity is the host no-op closure, the
    /// threshold the host closure running the same test, bit for bit, with the same kept count,
    /// on 1 and 3 engines; bad thresholds are refused with their parameter named.
    #[test]
    fn scale_device_edits_equal_the_host_closures() {
        use crate::wavepacket::{below_threshold, CoeffEdit};
        use std::sync::atomic::AtomicU64;
        let (vol, one, three) = one_and_three_engines();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let noop = one.process(&vol, |_, _| {}).unwrap();
        for f in [&one, &three] {
            let p = f.process_with(&vol, CoeffEdit::Identity).unwrap();
            assert_eq!(bits(&p.volume), bits(&noop), "identity differs from the host no-op ({} engines)", f.engines());
            assert!(p.kept.is_none());
        }
        // Per-box thresholds around the coefficients' sizes, box 0 kept whole, one box dropped.
        let frame = one.frame.clone();
        let mut thr: Vec<f32> = (0..frame.box_count()).map(|b| 0.002 * (1 + b % 7) as f32).collect();
        thr[0] = 0.0;
        thr[frame.box_count() / 2] = 1e30;
        let counted = AtomicU64::new(0);
        let host = one.process(&vol, |_, c| {
            let mut n = 0;
            let mut b = 0;
            for j in 0..frame.scales() {
                for bj in 0..frame.geom.boxes[j] as usize {
                    for v in &mut c[frame.box_range(j, bj)] {
                        if below_threshold(v.re, v.im, thr[b]) {
                            *v = Complex32::default();
                        } else {
                            n += 1;
                        }
                    }
                    b += 1;
                }
            }
            counted.fetch_add(n, Ordering::Relaxed);
        }).unwrap();
        let counted = counted.into_inner();
        assert!(counted > 0 && counted < one.total() as u64, "the thresholds keep some: {counted} of {}", one.total());
        for f in [&one, &three] {
            let p = f.process_with(&vol, CoeffEdit::Threshold(&thr)).unwrap();
            assert_eq!(bits(&p.volume), bits(&host), "threshold differs from the host closure ({} engines)", f.engines());
            assert_eq!(p.kept, Some(counted));
        }
        let short = one.process_with(&vol, CoeffEdit::Threshold(&thr[1..])).err().unwrap().to_string();
        assert!(short.contains("thresholds") && short.contains("boxes"), "{short}");
        let mut neg = thr.clone();
        neg[3] = -1.0;
        let e = one.process_with(&vol, CoeffEdit::Threshold(&neg)).err().unwrap().to_string();
        assert!(e.contains("box 3's threshold -1"), "{e}");
        neg[3] = f32::NAN;
        assert!(one.process_with(&vol, CoeffEdit::Threshold(&neg)).is_err());
    }

    /// The threshold's test and [`crate::wavepacket::threshold_host`] on chosen coefficients:
    /// |c| = t is kept (the test is strict), a hair under is dropped, zeros and -0.0 drop under
    /// any t > 0 and stay under t = 0, NaN is kept; boxes use their own threshold.
    #[test]
    fn threshold_test_and_host_threshold() {
        use crate::wavepacket::{below_threshold, threshold_host};
        assert!(!below_threshold(3.0, 4.0, 5.0));
        assert!(below_threshold(3.0, 4.0, 5.000001));
        assert!(!below_threshold(-5.0, 0.0, 5.0) && !below_threshold(0.0, -5.0, 5.0));
        assert!(below_threshold(0.0, -0.0, 1e-30) && !below_threshold(0.0, -0.0, 0.0));
        assert!(!below_threshold(f32::NAN, 0.0, 1.0) && !below_threshold(0.0, f32::NAN, f32::MAX));
        // Tiny and huge magnitudes: no underflow or overflow in the squares (f64).
        assert!(below_threshold(1e-30, 1e-30, 2e-30) && !below_threshold(3e38, 3e38, 3e38));
        let frame = Frame::new(16, &Params::default()).unwrap();
        let thr: Vec<f32> = (0..frame.box_count()).map(|b| (b % 5) as f32 * 0.25).collect();
        let mut c: Vec<Complex32> = (0..frame.total).map(|i| Complex32::new(((i * 37) % 101) as f32 / 100.0 - 0.5,
            ((i * 53) % 89) as f32 / 88.0 - 0.5)).collect();
        let orig = c.clone();
        let kept = threshold_host(&frame, &thr, &mut c);
        let mut want = 0u64;
        let mut b = 0;
        for j in 0..frame.scales() {
            for bj in 0..frame.geom.boxes[j] as usize {
                for i in frame.box_range(j, bj) {
                    let (re, im, t) = (orig[i].re as f64, orig[i].im as f64, thr[b] as f64);
                    let below = re.powi(2) + im.powi(2) < t.powi(2);
                    assert_eq!(c[i], if below { Complex32::default() } else { orig[i] }, "coefficient {i}, box {b}");
                    want += !below as u64;
                }
                b += 1;
            }
        }
        assert_eq!(kept, want);
    }

    /// Host phases of `process` at the scaling workload's size (480^3, cubes of 256), without any
    /// device: `cargo test --release -p seisgpu-host --lib host_phase_times -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn host_phase_times() {
        let shape = [480, 480, 480];
        let t = Tiling::new(shape, 256, 32).unwrap();
        let vol = crate::wavepacket::apps::synthetic_cube(shape, 0.004, 25.0);
        let ms = |f: &mut dyn FnMut()| {
            let mut best = f64::MAX;
            for _ in 0..3 {
                let s = std::time::Instant::now();
                f();
                best = best.min(s.elapsed().as_secs_f64() * 1e3);
            }
            best
        };
        let per_sample = ms(&mut || assert!(vol.par_iter().position_first(|v| !v.is_finite()).is_none()));
        let chunked = ms(&mut || validate_volume(&vol, shape, "v").unwrap());
        let mut sink = 0.0f32;
        let fresh = ms(&mut || {
            let c = t.extract(&vol, 7);
            sink += c[12345];
        });
        let mut buf = vec![0.0f32; 256 * 256 * 256];
        let kept = ms(&mut || assert!(t.extract_staged(&vol, 7, &mut buf, |_, _| Ok(())).unwrap()));
        let mut out = vec![0.0f32; vol.len()];
        let fold = ms(&mut || t.accumulate(&mut out, 7, &buf));
        let zero = ms(&mut || {
            let mut v = Vec::new();
            rayon::iter::repeat_n(0.0f32, vol.len()).collect_into_vec(&mut v);
            sink += v[777];
        });
        println!("{} threads: validate per sample {per_sample:.1} ms, chunked {chunked:.1} ms; cube extraction into a fresh \
            Vec {fresh:.1} ms, into a kept buffer (checked, slabs) {kept:.1} ms; fold of one cube {fold:.1} ms; \
            zeroed output {zero:.1} ms ({sink})", rayon::current_num_threads());
    }

    #[test]
    fn tapers_square_sum_to_one() {
        let t = Tiling::new([300, 40, 90], 64, 16).unwrap();
        assert!(t.count() > 1);
        for a in 0..3 {
            for g in 0..t.shape[a] {
                let mut s = 0.0f32;
                for (k, &st) in t.starts[a].iter().enumerate() {
                    if g >= st && g < st + t.cube {
                        s += t.taper(a, k, g - st).powi(2);
                    }
                }
                assert!((s - 1.0).abs() < 1e-5, "axis {a} sample {g}: {s}");
            }
        }
    }

    #[test]
    fn fragmented_transform_is_tight() {
        use rand::{RngExt, SeedableRng};
        let shape = [40, 23, 70];
        let params = Params { eps: 1e-6, ..Params::default() };
        let f = Fragmented::new(&Backend::Cpu, shape, 32, 8, &params, false).unwrap();
        assert!(f.tiling.count() > 1);
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        let vol: Vec<f32> = (0..shape.iter().product()).map(|_| r.random_range(-1.0..1.0)).collect();
        let c = f.forward(&vol).unwrap();
        let back = f.inverse(&c).unwrap();
        let err = crate::bench::rel_l2(&back, &vol);
        assert!(err < 1e-5, "fragmented inverse(forward) error {err:.2e}");
        let ev: f64 = vol.iter().map(|&v| (v as f64).powi(2)).sum();
        let ec: f64 = c.iter().map(|v| v.norm_sqr() as f64).sum();
        assert!((ec / ev - 1.0).abs() < 1e-4, "energy ratio {}", ec / ev);
    }
}
