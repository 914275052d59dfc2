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

use super::{nice, validate_volume, Engine, Frame, HostCube, Params};
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

    /// Forward, `edit` the cube's coefficients, inverse, merge: one pass, cube by cube, never
    /// holding the whole volume's coefficients.
    ///
    /// Issue 9 (the paper's variant 2 on several GPUs): every host step either scales with the
    /// engines or overlaps their work. One host thread per engine takes the next cube, writes it
    /// tapered into one of its page-locked cube buffers slab by slab, each slab's upload queued as
    /// it is written (the input's finiteness is checked on the way: no separate pass over the
    /// volume), then runs forward, `edit`, inverse, and writes the next cube while the device
    /// finishes this one. The calling thread adds the cubes into the volume in cube order straight
    /// from those buffers (the same bits for any number of engines and any timing), then hands
    /// each buffer back to its engine. The output volume's pages are written (zeroed) beside the
    /// devices once every engine has written its first cube.
    pub fn process<F: Fn(usize, &mut [Complex32]) + Sync>(&self, vol: &[f32], edit: F) -> Result<Vec<f32>> {
        let t0 = std::time::Instant::now();
        let [s0, s1, s2] = self.tiling.shape;
        ensure!(s0 * s1 * s2 > 0, "wave-packet processing: empty volume (shape {s0} x {s1} x {s2})");
        ensure!(vol.len() == s0 * s1 * s2, "wave-packet processing: {} samples for a {s0} x {s1} x {s2} volume ({} expected)",
            vol.len(), s0 * s1 * s2);
        let out = self.pipeline(vol, &edit, t0);
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

    fn pipeline<F: Fn(usize, &mut [Complex32]) + Sync>(&self, vol: &[f32], edit: &F, t0: std::time::Instant) -> Result<Vec<f32>> {
        use std::sync::atomic::AtomicBool;
        let count = self.tiling.count();
        let len = vol.len();
        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let stop_all = || {
            stop.store(true, Ordering::Relaxed);
            self.pools.iter().for_each(CubePool::wake);
        };
        let result = std::thread::scope(|s| -> Result<Vec<f32>> {
            let (tx, rx) = std::sync::mpsc::channel::<(usize, usize, Result<HostCube>)>();
            let (up_tx, up_rx) = std::sync::mpsc::channel::<()>();
            let first_round = self.engines.len().min(count);
            let zeros = s.spawn(move || {
                // After the first cubes' extraction (which is on the critical path), not beside it.
                for _ in 0..first_round {
                    if up_rx.recv().is_err() {
                        break;
                    }
                }
                let mut v = Vec::new();
                rayon::iter::repeat_n(0.0f32, len).collect_into_vec(&mut v);
                crate::multi::mark("output zeroed at", t0);
                v
            });
            for (k, (eng, pool)) in self.engines.iter().zip(&self.pools).enumerate() {
                let (tx, up_tx, next, stop, stop_all) = (tx.clone(), up_tx.clone(), &next, &stop, &stop_all);
                s.spawn(move || {
                    let mut t = usize::MAX;
                    let r = (|| -> Result<()> {
                        let mut e = eng.lock().map_err(|_| anyhow::anyhow!("a cube engine panicked"))?;
                        // The cube on the device: its number, buffer, and the event of its result.
                        let mut prev: Option<(usize, HostCube, Option<cudarc::driver::CudaEvent>)> = None;
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
                                // The output's zeroing starts now, beside this cube's transform.
                                crate::multi::mark("first cube written at", t0);
                                let _ = up_tx.send(());
                            }
                            if let Some((pt, pb, ev)) = prev.take() {
                                if let Some(ev) = ev {
                                    ev.synchronize().context("waiting for a cube's result")?;
                                }
                                let _ = tx.send((pt, k, Ok(pb)));
                            }
                            let b = buf.as_mut_slice()?;
                            // SAFETY: `buf` is the staged page-locked buffer; it is not touched again
                            // until the event completes (the synchronisation above, or below).
                            let ev = unsafe { e.roundtrip_queued(b, &mut |c| edit(t, c)) }?;
                            prev = Some((t, buf, ev));
                            if stop.load(Ordering::Relaxed) {
                                break;
                            }
                        }
                        if let Some((pt, pb, ev)) = prev.take() {
                            if let Some(ev) = ev {
                                ev.synchronize().context("waiting for a cube's result")?;
                            }
                            let _ = tx.send((pt, k, Ok(pb)));
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
                        let _ = tx.send((t, k, Err(err)));
                    }
                });
            }
            drop((tx, up_tx));
            // The ordered fold: cube t is added once every earlier cube is in.
            let mut early: BTreeMap<usize, (usize, HostCube)> = BTreeMap::new();
            let (mut due, mut got, mut busy) = (0usize, 0usize, 0.0f64);
            let mut out: Option<Vec<f32>> = None;
            let mut zeros = Some(zeros);
            let mut failure: Option<(usize, anyhow::Error)> = None;
            for (t, k, r) in rx {
                let b = match r {
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
                    if out.is_none() {
                        let z = zeros.take().context("the output volume")?;
                        out = Some(z.join().map_err(|_| anyhow::anyhow!("zeroing the volume panicked"))?);
                    }
                    let tf = std::time::Instant::now();
                    let r = b.as_slice().map(|c| self.tiling.accumulate(out.as_mut().unwrap(), due, c));
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
            match (out, zeros) {
                (Some(v), _) => Ok(v),
                (None, Some(z)) => z.join().map_err(|_| anyhow::anyhow!("zeroing the volume panicked")),
                (None, None) => anyhow::bail!("no output volume"),
            }
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

    #[test]
    fn scale_process_is_bit_exact_over_engines_repeatable_and_names_bad_samples() {
        let shape = [45, 23, 70];
        let params = Params { eps: 1e-6, ..Params::default() };
        let tiling = Tiling::new(shape, 32, 8).unwrap();
        let vol: Vec<f32> = (0..shape.iter().product::<usize>()).map(|i| ((i * 104729) % 997) as f32 * 1e-3 - 0.5).collect();
        let one = Fragmented::on_backends(&[Backend::Cpu], tiling.clone(), &params).unwrap();
        let three = Fragmented::on_backends(&[Backend::Cpu, Backend::Cpu, Backend::Cpu], tiling, &params).unwrap();
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
