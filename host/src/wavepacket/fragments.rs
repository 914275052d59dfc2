//! Volumes of any N1 x N2 x N3 shape, including ones bigger than GPU memory: the paper's variant 2.
//! The volume is cut into overlapping cubes (256^3 by default, the paper's choice), each cube is
//! transformed independently (cubes are spread over all engines, one per GPU), and the overlaps are
//! tapered with weights a_t whose squares sum to 1 at every sample. The cube coefficients are those
//! of a_t f, and the inverse sums a_t T^* c_t: the fragmented transform is itself a tight frame
//! (adjoint = inverse, energy kept), so thresholding works on it as on one cube.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{ensure, Context, Result};
use num_complex::Complex32;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{nice, validate_volume, Engine, Frame, Params};
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
        Ok(Fragmented { tiling, frame, engines })
    }

    /// Engines on the given backends, one each (`--gpus N|all`; `--device cpu --gpus N` gives N CPU
    /// engines, which split the cubes as N GPUs would).
    pub fn on_backends(backends: &[Backend], tiling: Tiling, params: &Params) -> Result<Fragmented> {
        ensure!(!backends.is_empty(), "no device for the wave-packet cubes");
        let frame = Arc::new(Frame::new(tiling.cube, params)?);
        let engines = backends.iter().map(|b| Engine::new(b, frame.clone()).map(Mutex::new)).collect::<Result<Vec<_>>>()?;
        Ok(Fragmented { tiling, frame, engines })
    }

    /// From existing engines (tests, benchmarks).
    pub fn with_engines(tiling: Tiling, engines: Vec<Engine>) -> Result<Fragmented> {
        ensure!(!engines.is_empty(), "no engine");
        let frame = engines[0].frame().clone();
        ensure!(frame.n() == tiling.cube, "engine cube {} for a tiling of {}", frame.n(), tiling.cube);
        Ok(Fragmented { tiling, frame, engines: engines.into_iter().map(Mutex::new).collect() })
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
    pub fn process<F: Fn(usize, &mut [Complex32]) + Sync>(&self, vol: &[f32], edit: F) -> Result<Vec<f32>> {
        let t = std::time::Instant::now();
        validate_volume(vol, self.tiling.shape, "wave-packet processing")?;
        crate::multi::mark("validate", t);
        self.accumulate_cubes(|e, t| e.roundtrip(&self.tiling.extract(vol, t), &mut |c| edit(t, c)))
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
