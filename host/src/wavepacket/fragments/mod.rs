//! Volumes of any N1 x N2 x N3 shape, including ones bigger than GPU memory: the paper's variant 2.
//! The volume is cut into overlapping cubes (256^3 by default, the paper's choice), each cube is
//! transformed independently (cubes are spread over all engines, one per GPU), and the overlaps are
//! tapered with weights a_t whose squares sum to 1 at every sample. The cube coefficients are those
//! of a_t f, and the inverse sums a_t T^* c_t: the fragmented transform is itself a tight frame
//! (adjoint = inverse, energy kept), so thresholding works on it as on one cube.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

use crate::ensure_internal;
use num_complex::Complex32;
use rayon::prelude::*;

mod fold;
mod jobs;

pub use super::tiling::{CubeBox, CubeInBox, Face, FoldRows, Tiling, BOX_CUBES};
use fold::{Arrival, BoxResult, CubePool, NotFinite, OrderedFold};
pub use jobs::{CubeSink, ForwardCubes, InverseCubes, LookAtCubes, ThresholdCubes};
use jobs::VolumeSum;

use super::{validate_volume, CoeffEdit, CubeOp, Engine, Frame, HostSamples, Params};
use crate::backend::Backend;
use crate::runtime::Gpu;

/// A wave-packet transform of a whole volume through cubes, on one or more engines.
pub struct Fragmented {
    pub tiling: Tiling,
    pub frame: Arc<Frame>,
    engines: Vec<Mutex<Engine>>,
    /// Host buffers of each engine (box partial sums, raw cube samples), kept between jobs.
    pools: Vec<CubePool>,
}

/// The result of [`Fragmented::process_with`].
pub struct Processed {
    pub volume: Vec<f32>,
    /// Coefficients kept by a [`CoeffEdit::Threshold`] over all cubes (`None` for other edits).
    pub kept: Option<u64>,
}


impl Fragmented {
    /// Engines for `backend`: the CPU, or every visible GPU (cubes go to all of them concurrently)
    /// when `all_gpus` is set, otherwise the backend's GPU.
    pub fn new(backend: &Backend, shape: [usize; 3], cube: usize, overlap: usize, params: &Params,
        all_gpus: bool) -> crate::error::Result<Fragmented> {
        Self::from_tiling(backend, Tiling::new(shape, cube, overlap)?, params, all_gpus)
    }

    /// For a given cube layout (e.g. read from a coefficient file).
    pub fn from_tiling(backend: &Backend, tiling: Tiling, params: &Params, all_gpus: bool) -> crate::error::Result<Fragmented> {
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
        Ok(Self::assemble(tiling, frame, engines)?)
    }

    /// Engines on the given backends, one each (`--gpus N|all`; `--device cpu --gpus N` gives N CPU
    /// engines, which split the cubes as N GPUs would).
    pub fn on_backends(backends: &[Backend], tiling: Tiling, params: &Params) -> crate::error::Result<Fragmented> {
        ensure_internal!(!backends.is_empty(), "no device for the wave-packet cubes");
        let frame = Arc::new(Frame::new(tiling.cube, params)?);
        let engines = backends.iter().map(|b| Engine::new(b, frame.clone()).map(Mutex::new)).collect::<Result<Vec<_>>>()?;
        Ok(Self::assemble(tiling, frame, engines)?)
    }

    /// The job over `engines`, the GPU engines' x1 pass sliced for the cubes each will take
    /// ([`crate::wavepacket::gpu::x1_slabs_for`]: the results are the same bit for bit).
    fn assemble(tiling: Tiling, frame: Arc<Frame>, mut engines: Vec<Mutex<Engine>>) -> Result<Fragmented> {
        let slabs = crate::wavepacket::gpu::x1_slabs_for(tiling.count(), engines.len());
        for e in &mut engines {
            if let Engine::Gpu(g) = e.get_mut().map_err(|_| anyhow::anyhow!("a cube engine panicked"))? {
                if g.x1_slabs() != slabs {
                    g.set_x1_slabs(slabs)?;
                }
            }
        }
        Ok(Fragmented { tiling, frame, pools: engines.iter().map(|_| CubePool::default()).collect(), engines })
    }

    /// From existing engines (tests, benchmarks).
    pub fn with_engines(tiling: Tiling, engines: Vec<Engine>) -> crate::error::Result<Fragmented> {
        ensure_internal!(!engines.is_empty(), "no engine");
        let frame = engines[0].frame().clone();
        ensure_internal!(frame.n() == tiling.cube, "engine cube {} for a tiling of {}", frame.n(), tiling.cube);
        Ok(Fragmented { tiling, frame, pools: engines.iter().map(|_| CubePool::default()).collect(), engines: engines.into_iter().map(Mutex::new).collect() })
    }

    pub fn engines(&self) -> usize { self.engines.len() }

    /// A buffer for volumes of the tiling's shape that this job reads and writes fastest:
    /// page-locked for every GPU where an engine is a GPU, ordinary memory otherwise. From a
    /// page-locked input each engine copies its cubes by DMA, with no host pass; into a
    /// page-locked output each box's fresh samples go by DMA, and the host adds only the samples
    /// that boxes share ([`Fragmented::process_into`]). A job of many volumes reuses its buffers:
    /// page-locking costs about what the DMA saves per volume (139-163 ms for 1.65 GB on the
    /// 4 x H200 host).
    pub fn volume_buffer(&self) -> crate::error::Result<HostSamples> {
        let len = self.tiling.shape.iter().product::<usize>();
        for eng in &self.engines {
            let e = eng.lock().map_err(|_| anyhow::anyhow!("a cube engine panicked"))?;
            if let Engine::Gpu(g) = &*e {
                return Ok(HostSamples::PageLocked(crate::runtime::memory::PinnedBuf::portable(g.gpu(), len)?));
            }
        }
        Ok(HostSamples::Pageable(vec![0.0; len]))
    }
    /// Coefficients of the whole volume: cubes one after the other.
    pub fn total(&self) -> usize { self.tiling.count() * self.frame.total }

    /// The engines, one device each of the cube jobs ([`ForwardCubes`], ...).
    pub fn engine_devices(&self) -> &[Mutex<Engine>] { &self.engines }

    /// Runs `job` on every engine through the queue ([`crate::exec::run_queue`]), a bar ticking per cube.
    fn run_cubes<J: crate::exec::QueueJob<Device = Mutex<Engine>>>(&self, job: &J, out: J::Output) -> crate::error::Result<J::Output> {
        let bar = crate::progress::work(job.items() as u64, "wave-packet cubes");
        Ok(crate::exec::run_queue(&crate::progress::Ticked(job, &bar), &self.engines, out)?)
    }

    /// Forward transform of the volume ([`ForwardCubes`]).
    pub fn forward(&self, vol: &[f32]) -> crate::error::Result<Vec<Complex32>> {
        validate_volume(vol, self.tiling.shape, "wave-packet forward")?;
        self.run_cubes(&ForwardCubes { tr: self, slab: vol, first_row: 0 }, Vec::with_capacity(self.total()))
    }

    /// Coefficients of cube t on engine k: one item of [`Fragmented::forward`] (MPI ranks split the
    /// cubes, `super::distributed::forward`; in cube order they are its result).
    pub fn forward_cube(&self, k: usize, vol: &[f32], t: usize) -> crate::error::Result<Vec<Complex32>> { self.forward_cube_from_rows(k, vol, 0, t) }

    /// [`Fragmented::forward_cube`] from a slab of the volume's rows from `first_row` on
    /// ([`Tiling::extract_from_rows`]).
    pub fn forward_cube_from_rows(&self, k: usize, slab: &[f32], first_row: usize, t: usize) -> crate::error::Result<Vec<Complex32>> {
        ensure_internal!(k < self.engines.len(), "engine {k} of {}", self.engines.len());
        Ok(self.forward_on(&self.engines[k], slab, first_row, t)?)
    }

    /// [`Fragmented::forward_cube_from_rows`] on engine `eng` (one of [`Fragmented::engine_devices`]).
    fn forward_on(&self, eng: &Mutex<Engine>, slab: &[f32], first_row: usize, t: usize) -> Result<Vec<Complex32>> {
        ensure_internal!(t < self.tiling.count(), "cube {t} of {}", self.tiling.count());
        let rows = self.tiling.rows_of(t..t + 1);
        let [_, s1, s2] = self.tiling.shape;
        ensure_internal!(first_row <= rows.start && slab.len() >= (rows.end - first_row) * s1 * s2,
            "cube {t} reads rows {rows:?}; the slab holds {} rows from {first_row}", slab.len() / (s1 * s2).max(1));
        let cube = self.tiling.extract_from_rows(slab, first_row, t);
        let mut e = eng.lock().map_err(|_| anyhow::anyhow!("a cube engine panicked"))?;
        e.forward(&cube).with_context(|| format!("cube {t} at {:?}", self.tiling.start(t)))
    }

    /// Cube t from its coefficients on engine k, as [`Tiling::accumulate`] adds it into the
    /// volume: one item of [`Fragmented::inverse`].
    pub fn inverse_cube(&self, k: usize, coeffs: &[Complex32], t: usize) -> crate::error::Result<Vec<f32>> {
        ensure_internal!(k < self.engines.len(), "engine {k} of {}", self.engines.len());
        Ok(self.inverse_on(&self.engines[k], coeffs, t)?)
    }

    /// [`Fragmented::inverse_cube`] on engine `eng` (one of [`Fragmented::engine_devices`]).
    fn inverse_on(&self, eng: &Mutex<Engine>, coeffs: &[Complex32], t: usize) -> Result<Vec<f32>> {
        ensure_internal!(t < self.tiling.count(), "cube {t} of {}", self.tiling.count());
        let mut e = eng.lock().map_err(|_| anyhow::anyhow!("a cube engine panicked"))?;
        e.inverse(coeffs).with_context(|| format!("cube {t} at {:?}", self.tiling.start(t)))
    }

    /// Inverse (= adjoint) transform: the cubes ([`InverseCubes`]) added into the volume in cube
    /// order (overlaps sum in a fixed order, so the volume is the same bit for bit for any number
    /// of engines; only the out-of-order cubes wait in memory).
    pub fn inverse(&self, coeffs: &[Complex32]) -> crate::error::Result<Vec<f32>> {
        ensure_internal!(coeffs.len() == self.total(), "{} coefficients for a fragmented frame of {}", coeffs.len(), self.total());
        let len: usize = self.tiling.shape.iter().product();
        std::thread::scope(|s| {
            // The zero volume, its pages written in parallel beside the engines ([`VolumeSum`]).
            let zeros = s.spawn(move || {
                let t = std::time::Instant::now();
                let mut v = Vec::new();
                rayon::iter::repeat_n(0.0f32, len).collect_into_vec(&mut v);
                crate::runtime::phases::mark("output zeroed (beside the devices)", t);
                v
            });
            let sum = VolumeSum { out: None, zeros: Some(zeros) };
            Ok(self.run_cubes(&InverseCubes::new(self, coeffs, 0), sum)?.finish()?)
        })
    }

    /// Forward of every cube, handing its coefficients to `look` (statistics passes, [`LookAtCubes`]).
    pub fn for_each_forward<F: Fn(usize, &[Complex32]) + Sync>(&self, vol: &[f32], look: F) -> crate::error::Result<()> {
        validate_volume(vol, self.tiling.shape, "wave-packet forward")?;
        self.run_cubes(&LookAtCubes { tr: self, slab: vol, first_row: 0, look: &look }, ())
    }

    /// Forward, `edit` the cube's coefficients on the host, inverse, merge: one pass, cube by cube,
    /// never holding the whole volume's coefficients. [`Fragmented::process_with`] with
    /// [`CoeffEdit::Host`]; edits that a device can do ([`CoeffEdit::Identity`],
    /// [`CoeffEdit::Threshold`]) are faster through `process_with` on GPUs.
    pub fn process<F: Fn(usize, &mut [Complex32]) + Sync>(&self, vol: &[f32], edit: F) -> crate::error::Result<Vec<f32>> {
        Ok(self.process_with(vol, CoeffEdit::Host(&edit))?.volume)
    }

    /// Forward, the coefficient edit, inverse, merge (see [`Fragmented::process`]).
    ///
    /// The paper's variant 2 on several GPUs: the host only copies and adds; the
    /// per-sample work of the cut and the fold runs on the engines. The cubes go in boxes
    /// ([`Tiling::cube_box`]: runs of cubes along the trace axis), the engines taking the next box
    /// from a shared counter, one host thread per engine (a box is one cube by default:
    /// [`BOX_CUBES`]). For each cube of its box the thread has the cube's raw samples go up: from a
    /// page-locked input ([`Fragmented::volume_buffer`]) by one 3D DMA, checked on the device by
    /// `wp_cut`; otherwise copied by the host into its page-locked buffer slab by slab, each slab's
    /// upload queued as it is copied, checked on the way (no separate pass over the volume either
    /// way). Then it queues the cube: cut (taper, padding), forward, the edit, inverse, and the
    /// fold of the tapered result into the box's partial sum, all on the device, while the next
    /// cube goes up. Identity and threshold edits run on the device (no coefficient transfers); a
    /// host edit brings each cube's coefficients down and up. The box's sum goes down once, behind
    /// its last cube (into a page-locked output, its fresh block straight into place and only the
    /// shared samples into the buffer), and the calling thread adds the boxes into the volume in
    /// box order from those buffers (the same bits for any number of engines, any timing and
    /// either kind of memory), then hands each buffer back to its engine.
    ///
    /// Against cutting and folding every cube on the host (an earlier design), the host moves raw samples
    /// (a copy, no arithmetic) and adds each box once instead of each cube; the output is allocated
    /// zeroed by the OS with transparent huge pages requested, so its first touch in the fold
    /// costs a fault per 2 MB instead of per 4 KB.
    pub fn process_with(&self, vol: &[f32], edit: CoeffEdit) -> crate::error::Result<Processed> {
        // Zeroed by the OS, untouched until the fold writes it (every sample is set: no zeros needed).
        let mut volume = crate::runtime::memory::zeroed_host(vol.len());
        let kept = self.process_into(vol, edit, &mut volume)?;
        Ok(Processed { volume, kept })
    }

    /// [`Fragmented::process_with`] into a given output (`out`: the volume's shape; its contents
    /// do not matter, every sample is written). Returns the kept count of a threshold. A job of
    /// many volumes reuses its output buffer: fresh pages cost a fault each on first touch
    /// (4 x H200 VM: 44-66 ms for the 126 MB one box's fold touches, against 2 ms into
    /// touched memory).
    pub fn process_into(&self, vol: &[f32], edit: CoeffEdit, out: &mut [f32]) -> crate::error::Result<Option<u64>> {
        let t0 = std::time::Instant::now();
        let [s0, s1, s2] = self.tiling.shape;
        ensure_internal!(s0 * s1 * s2 > 0, "wave-packet processing: empty volume (shape {s0} x {s1} x {s2})");
        ensure_internal!(vol.len() == s0 * s1 * s2, "wave-packet processing: {} samples for a {s0} x {s1} x {s2} volume ({} expected)",
            vol.len(), s0 * s1 * s2);
        ensure_internal!(out.len() == vol.len(), "wave-packet processing: an output of {} samples for a {s0} x {s1} x {s2} volume",
            out.len());
        if let CoeffEdit::Threshold(thr) = edit {
            super::check_thresholds(&self.frame, thr)?;
        }
        let out = self.pipeline(vol, edit, t0, out);
        crate::runtime::phases::mark("returned at", t0);
        match out {
            Ok(v) => Ok(v),
            // A sample that is not finite: the whole-volume check names the first one.
            Err(e) if e.downcast_ref::<NotFinite>().is_some() => {
                validate_volume(vol, self.tiling.shape, "wave-packet processing")?;
                Err(e.into())
            }
            Err(e) => Err(e.into()),
        }
    }

    fn pipeline(&self, vol: &[f32], edit: CoeffEdit, t0: std::time::Instant, out: &mut [f32]) -> Result<Option<u64>> {
        use std::sync::atomic::AtomicBool;
        let boxes = self.tiling.box_count();
        let (tapers, taper_at) = self.tiling.taper_table();
        let box_max = self.tiling.box_samples_max();
        let threshold = matches!(edit, CoeffEdit::Threshold(_));
        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        // A GPU engine writes each box's fresh block straight into a page-locked output.
        let out_place = crate::runtime::memory::Place::host(out, self.tiling.shape, [0; 3]);
        let direct_out: Vec<bool> = self.engines.iter().map(|e| e.lock().is_ok_and(|e| e.page_locked(out))).collect();
        // ... and adds its boxes' faces itself ([`CubeBox::face`]), each once the fold has reached
        // the face's box: the folding thread writes how far it is into each engine's counter.
        let face_flags: Vec<Option<usize>> = self.engines.iter().zip(&direct_out).map(|(e, &direct)| -> Result<Option<usize>> {
            if !direct {
                return Ok(None);
            }
            let mut e = e.lock().map_err(|_| anyhow::anyhow!("a cube engine panicked"))?;
            Ok(e.face_flag()?.map(|p| p as usize))
        }).collect::<Result<_>>()?;
        // The counter only goes up (an engine's `stop_all` and the folding thread both write it).
        // Every face waits for at most `boxes`: the device compares cyclically (`(int32)(*flag -
        // after) >= 0`), so a larger "let everything through" such as u32::MAX would read as
        // below every wait (a job that failed on a bad sample hung that way).
        let release = |folded: usize| {
            for &p in face_flags.iter().flatten() {
                // SAFETY: an engine's mapped counter, alive as long as the engine.
                unsafe { std::sync::atomic::AtomicU32::from_ptr(p as *mut u32) }.fetch_max(folded.min(boxes) as u32, Ordering::SeqCst);
            }
        };
        // A job that stops lets every face copy through (no stream may wait forever).
        let stop_all = || {
            stop.store(true, Ordering::Relaxed);
            release(boxes);
            self.pools.iter().for_each(CubePool::wake);
        };
        // `SEISGPU_WP_TRACE` (a diagnostic, docs/DEVELOPING.md): the fold's log, and what each
        // engine thread and the folding thread are doing (a job that stalls prints it); nothing is
        // recorded without it.
        let tracing = std::env::var_os("SEISGPU_WP_TRACE").is_some();
        let phases: Vec<Mutex<(&'static str, usize, usize)>> = self.engines.iter().map(|_| Mutex::new(("start", 0, 0))).collect();
        let fold_at = Mutex::new(("start", 0usize, 0usize));
        let fold_phase = |what: &'static str, a: usize, b: usize| {
            if tracing && let Ok(mut f) = fold_at.lock() {
                *f = (what, a, b);
            }
        };
        let bar = crate::progress::work(self.tiling.count() as u64, "wave-packet cubes");
        let bar = &bar;
        let result = std::thread::scope(|s| -> Result<Option<u64>> {
            let (tx, rx) = std::sync::mpsc::channel::<BoxResult>();
            for (k, (eng, pool)) in self.engines.iter().zip(&self.pools).enumerate() {
                let (tx, next, stop, stop_all, tapers) = (tx.clone(), &next, &stop, &stop_all, &tapers);
                let out = direct_out[k].then_some(out_place);
                let face_flag = face_flags[k];
                let phase = &phases[k];
                let at = move |what: &'static str, b: usize, t: usize| {
                    if tracing && let Ok(mut p) = phase.lock() {
                        *p = (what, b, t);
                    }
                };
                s.spawn(move || {
                    // The box and cube in hand (for the failure's message).
                    let (mut b, mut t) = (usize::MAX, usize::MAX);
                    let mut raw = pool.raw.lock().ok().and_then(|mut r| r.take());
                    // The box on the device: its number, buffer, its way down (a GPU's) and the
                    // CPU's kept count.
                    type OnDevice = (usize, HostSamples, Option<super::gpu::BoxDown>, Option<u64>);
                    let mut prev: Option<OnDevice> = None;
                    // The buffer of the box being queued. Held out here, as `prev` is, so a failure
                    // gives both back to the pool after the engine is quiet: freeing page-locked
                    // memory (`cuMemFreeHost`) waits for the devices, and one waiting for a face the
                    // fold can no longer reach hung the job.
                    let mut current: Option<HostSamples> = None;
                    let r = (|| -> Result<()> {
                        let mut e = eng.lock().map_err(|_| anyhow::anyhow!("a cube engine panicked"))?;
                        // A GPU copies its cubes straight from a page-locked volume; otherwise the
                        // host copies them into a page-locked buffer first.
                        let direct = e.page_locked(vol);
                        if raw.is_none() && !direct {
                            raw = Some(e.host_raw()?);
                        }
                        // A box goes to the fold once its first slab is down (its status with
                        // it); the folding thread waits for the others.
                        let finish = |e: &Engine, (pb, buf, down, kept): OnDevice| -> Result<()> {
                            let mut kept = kept;
                            let arrival = match down {
                                Some(d) => {
                                    at("waits for the first slab of box", pb, 0);
                                    let status = (|| -> Result<(Option<u64>, bool)> {
                                        if let Some((_, ev)) = d.slabs.first() {
                                            ev.synchronize().context("waiting for a box's partial sum")?;
                                        }
                                        e.box_status(&d, threshold)
                                    })();
                                    let k = match status {
                                        Ok((k, true)) => k,
                                        bad => {
                                            // Every face through first (this box's own may wait
                                            // for the fold), then, once nothing more comes down
                                            // into it, its buffer back to the pool (not freed:
                                            // `cuMemFreeHost` waits for the devices).
                                            stop_all();
                                            for (_, ev) in &d.slabs {
                                                let _ = ev.synchronize();
                                            }
                                            pool.give(buf);
                                            return Err(bad.err().unwrap_or_else(|| NotFinite.into()));
                                        }
                                    };
                                    // Folded slab by slab as they come down (whole boxes: 0.6 ms
                                    // slower on 2 GPUs, docs/notes/scale.md).
                                    let slabs = d.slabs.into_iter().map(|(r, ev)| (r, Some(ev))).collect();
                                    kept = kept.or(k);
                                    Arrival { buf, fresh: d.fresh_written, face: d.face_added, slabs }
                                }
                                None => Arrival { buf, fresh: false, face: false, slabs: [(0..self.tiling.cube_box(pb).extent[0], None)].into() },
                            };
                            let _ = tx.send((pb, k, Ok((arrival, kept))));
                            Ok(())
                        };
                        loop {
                            // The buffer before the box: an engine with a box always has what it needs
                            // to finish it, so the ordered fold never waits on a starved engine.
                            at("takes a box buffer after box", b, t);
                            let Some(part) = pool.take(stop, || e.host_partial(box_max))? else { break };
                            b = next.fetch_add(1, Ordering::Relaxed);
                            if b >= boxes {
                                pool.give(part);
                                break;
                            }
                            let part = current.insert(part);
                            let bx = self.tiling.cube_box(b);
                            let (mut ev, mut kept) = (None, None);
                            for c in bx.cubes.clone() {
                                t = c;
                                bar.inc(1);
                                let te = std::time::Instant::now();
                                at("stages box, cube", b, t);
                                if let Some(raw) = raw.as_mut() {
                                    // The raw buffer's previous upload is through before it is
                                    // written again (a page-locked volume is only read: no wait).
                                    e.wait_staged()?;
                                    // SAFETY: each slab is written once and not touched again until
                                    // `wait_staged` has seen its upload through.
                                    let finite = self.tiling.copy_raw_staged(vol, t, raw.as_mut_slice()?,
                                        |slab, at| unsafe { e.stage(slab, at) })?;
                                    if !finite {
                                        return Err(NotFinite.into());
                                    }
                                } else {
                                    // SAFETY: `vol` outlives the job, which waits for every engine.
                                    unsafe { e.stage_block(vol, self.tiling.shape, self.tiling.start(t), self.tiling.inside(t)) }?;
                                }
                                crate::runtime::phases::mark("cube copied and queued up (each)", te);
                                let mut host = |co: &mut [Complex32]| {
                                    if let CoeffEdit::Host(f) = edit {
                                        f(t, co)
                                    }
                                };
                                let op = match edit {
                                    CoeffEdit::Identity => CubeOp::Identity,
                                    CoeffEdit::Threshold(thr) => CubeOp::Threshold(thr),
                                    CoeffEdit::Host(_) => CubeOp::Host(&mut host),
                                };
                                let job = match face_flag {
                                    Some(_) => self.tiling.cube_in_box_face(b, t, taper_at),
                                    None => None,
                                }.unwrap_or_else(|| self.tiling.cube_in_box(&bx, t, taper_at));
                                // SAFETY: `part` is this engine's page-locked buffer (on a GPU), left
                                // untouched until the box's event completes (the synchronisation in
                                // `finish`); the raw samples were staged above.
                                let raw_in = match raw.as_ref() {
                                    Some(r) => r.as_slice()?,
                                    None => &[],
                                };
                                // SAFETY (`out`): the box's fresh block is written by no host fold
                                // before the box is folded in order, after its event completed.
                                at("queues box, cube", b, t);
                                let (down, kc) = unsafe { e.cube_into_box(&job, tapers, raw_in, op, part.as_mut_slice()?, out) }?;
                                ev = down;
                                if let Some(n) = kc {
                                    kept = Some(kept.unwrap_or(0) + n);
                                }
                                // The previous box is waited for with this box's first cube already
                                // queued: the device computes while its sum goes down (waiting before
                                // queueing left the device idle for the download, ~2-4 ms a box).
                                if let Some(p) = prev.take() {
                                    finish(&*e, p)?;
                                }
                            }
                            prev = current.take().map(|part| (b, part, ev, kept));
                            if stop.load(Ordering::Relaxed) {
                                break;
                            }
                        }
                        if let Some(p) = prev.take() {
                            finish(&*e, p)?;
                        }
                        at("done", b, t);
                        if let Some(t) = e.take_device_times()? {
                            crate::runtime::phases::mark_ms("device waits for its first slab (each)", t.first_slab);
                            crate::runtime::phases::mark_ms("device in cubes (each)", t.busy);
                            crate::runtime::phases::mark_ms("device idle between cubes (each)", t.idle);
                            crate::runtime::phases::mark_ms("last box down after its fold (each)", t.last_download);
                        }
                        Ok(())
                    })();
                    if let Err(err) = &r && tracing {
                        eprintln!("trace: engine {k} failed at box {b}, cube {t}: {err:#}");
                    }
                    if r.is_err() {
                        // Nothing may still be going into host memory (the box buffers, the
                        // output) once the job has returned; no face copy may wait for a fold
                        // that stopped.
                        stop_all();
                        if let Ok(mut e) = eng.lock() {
                            let _ = e.quiesce();
                        }
                    }
                    for buf in current.take().into_iter().chain(prev.take().map(|(_, buf, _, _)| buf)) {
                        pool.give(buf);
                    }
                    if let (Some(r), Ok(mut slot)) = (raw, pool.raw.lock()) {
                        *slot = Some(r);
                    }
                    if let Err(err) = r {
                        stop_all();
                        let err = if err.downcast_ref::<NotFinite>().is_some() || b >= boxes {
                            err
                        } else {
                            err.context(format!("device {k} failed on cube {t} at {:?} (box {b})", self.tiling.start(t)))
                        };
                        let _ = tx.send((b, k, Err(err)));
                    }
                });
            }
            drop(tx);
            // The ordered fold ([`OrderedFold`]): each plane takes its boxes in order, a box's
            // slabs as they come down.
            let mut fold = OrderedFold::new(&self.tiling);
            let mut folding = None;
            if tracing {
                fold.log = Some((t0, Vec::new()));
                // A job that stalls says where each thread is, every 10 s.
                let (phases, fold_at) = (&phases, &fold_at);
                let (done, watch) = std::sync::mpsc::channel::<()>();
                folding = Some(done);
                s.spawn(move || {
                    let mut waited = 0;
                    // Until the fold is through (its sender dropped): the job returns at once.
                    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = watch.recv_timeout(std::time::Duration::from_secs(10)) {
                        waited += 10;
                        let f = fold_at.lock().map(|f| *f).unwrap_or(("?", 0, 0));
                        eprintln!("trace: watchdog {waited} s: fold thread {} ({} {})", f.0, f.1, f.2);
                        for (k, p) in phases.iter().enumerate() {
                            if let Ok(p) = p.lock() {
                                eprintln!("trace: watchdog: engine {k} {} {} {}", p.0, p.1, p.2);
                            }
                        }
                    }
                });
            }
            let mut got = 0usize;
            let mut kept: Option<u64> = Some(0);
            let mut failure: Option<(usize, anyhow::Error)> = None;
            let fail = |failure: &mut Option<(usize, anyhow::Error)>, b: usize, e: anyhow::Error| {
                stop_all();
                // The lowest box's failure (deterministic when several fail).
                if failure.as_ref().is_none_or(|(fb, _)| b < *fb) {
                    *failure = Some((b, e));
                }
            };
            // A box that came in: to the fold (after a failure: back to its pool once nothing
            // more comes down into it).
            let accept = |fold: &mut OrderedFold, failure: &mut Option<(usize, anyhow::Error)>, got: &mut usize,
                kept: &mut Option<u64>, (b, k, r): BoxResult| match r {
                Err(e) => fail(failure, b, e),
                Ok((a, n)) => {
                    *kept = kept.zip(n).map(|(a, b)| a + b);
                    *got += 1;
                    if let Some((t0, log)) = fold.log.as_mut() {
                        log.push(format!("{:7.2} ms: box {b} in", t0.elapsed().as_secs_f64() * 1e3));
                    }
                    if *got == 1 {
                        crate::runtime::phases::mark("first box at", t0);
                    }
                    if *got == boxes {
                        crate::runtime::phases::mark("last box at", t0);
                    }
                    if failure.is_some() {
                        a.settle();
                        self.pools[k].give(a.buf);
                    } else {
                        fold.add(b, k, a);
                    }
                }
            };
            let mut released = 0;
            loop {
                fold_phase("loop top, boxes in / folded", got, fold.boxes_done);
                if fold.prefix != released {
                    released = fold.prefix;
                    release(released);
                }
                // Every box already in first, so the boxes arriving together fold in the same
                // passes (taking one message per pass, on 4 GPUs at 480^3 the last four boxes'
                // first slabs folded one pass after another, ~1 ms each).
                while let Ok(m) = rx.try_recv() {
                    accept(&mut fold, &mut failure, &mut got, &mut kept, m);
                }
                if failure.is_none() {
                    fold_phase("step, boxes in / folded", got, fold.boxes_done);
                    match fold.step(out, &self.pools) {
                        Ok(true) => continue,
                        Ok(false) => {}
                        Err((b, e)) => fail(&mut failure, b, e),
                    }
                }
                // Nothing down to fold: a due slab still coming down (poll for it, taking boxes
                // meanwhile: a device may be waiting for the fold, [`OrderedFold::step`]), else
                // the next box.
                if failure.is_none() && fold.waiting() {
                    match rx.recv_timeout(std::time::Duration::from_micros(20)) {
                        Ok(m) => accept(&mut fold, &mut failure, &mut got, &mut kept, m),
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(std::time::Duration::from_micros(20)),
                    }
                    continue;
                }
                fold_phase("waits for a box, boxes in / folded", got, fold.boxes_done);
                match rx.recv_timeout(std::time::Duration::from_secs(1)) {
                    Ok(m) => accept(&mut fold, &mut failure, &mut got, &mut kept, m),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    // Every engine is done (the channel is closed) and nothing due is left.
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
            release(boxes);
            drop(folding);
            let (finished, due, busy) = (fold.finished(), fold.boxes_done, fold.busy);
            if let Some((_, log)) = fold.log.take() {
                for l in &log[log.len().saturating_sub(40)..] {
                    eprintln!("trace: fold {l}");
                }
                eprintln!("trace: host fold {} passes, {:.2} ms busy, done at {:.2} ms", fold.passes, busy * 1e3,
                    t0.elapsed().as_secs_f64() * 1e3);
            }
            fold.drain(&self.pools);
            crate::runtime::phases::mark("folded at", t0);
            if let Some(since) = std::time::Instant::now().checked_sub(std::time::Duration::from_secs_f64(busy)) {
                crate::runtime::phases::mark("host fold busy", since);
            }
            if let Some((_, e)) = failure {
                return Err(e);
            }
            ensure_internal!(finished, "{due} of {boxes} boxes came back");
            Ok(if threshold { kept } else { None })
        });
        if result.is_err() {
            // Buffers of a failed job that did not come back are made again next time.
            self.pools.iter().for_each(CubePool::recount);
        }
        result
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod fold_speed;
