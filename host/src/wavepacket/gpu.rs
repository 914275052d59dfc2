//! GPU driver: cuFFT for the global and the batched box FFTs, the kernels of
//! `gpu_kernels::wavepacket::kernels` for the USFFT gathers and the windows.
//!
//! Buffers live on the device for the engine's lifetime (one allocation per frame), so repeated
//! transforms (iterative interpolation, fragments) pay only the transfers.

use std::sync::Arc;

use anyhow::{ensure, Context, Result};
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig};
use gpu_kernels::wavepacket::{Geometry, Lines, ScalePtrs};
use num_complex::Complex32;

use super::{CubeOp, Frame, Gather};
use crate::launch;
use crate::runtime::fft::FftPlan;
use crate::runtime::memory::PinnedBuf;
use crate::runtime::{grid_1d, Gpu};

#[repr(transparent)]
#[derive(Clone, Copy)]
struct GeomArg(Geometry);
// SAFETY: #[repr(C)] plain-old-data of 4-byte fields, the layout the kernels read.
unsafe impl DeviceRepr for GeomArg {}

#[repr(transparent)]
#[derive(Clone, Copy)]
struct PtrsArg(ScalePtrs);
unsafe impl DeviceRepr for PtrsArg {}

#[repr(transparent)]
#[derive(Clone, Copy)]
struct LinesArg(Lines);
// SAFETY: #[repr(C)] plain-old-data of u32 fields, the layout the kernels read.
unsafe impl DeviceRepr for LinesArg {}

/// Buffers and plans of the separable USFFT, one line buffer per pass: A (N, N, P) for the x2
/// pass (x0, x1, x2 lines), B (N x M lines of P) for the x1 pass (k2, x0, x1 lines, a slab of x0
/// planes one block: [`lines_x1`]) and C (M, M, P) for the x0 pass (k1, k2, x0 lines). The x2
/// and x1 passes go slab by slab ([`slabs`]; each has its plans for the full slab and the last
/// one's where it is shorter), the x0 pass needs every plane. C is a buffer of its own only where
/// the x1 pass goes by slabs ([`x1_planes`]): A is then still in use by later x2 slabs. With the x1
/// pass whole, A is free when C is needed, and is C (`c` is `None`).
struct Separable {
    a: CudaSlice<f32>,
    b: CudaSlice<f32>,
    c: Option<CudaSlice<f32>>,
    plan_x2: Vec<(usize, FftPlan)>,
    plan_x1: Vec<(usize, FftPlan)>,
    plan_x0: FftPlan,
}

impl Separable {
    /// A slab pass's plan (`plans`: [`Separable::plan_x2`] or [`Separable::plan_x1`]) for a slab of
    /// `planes` x0 planes.
    fn slab_plan(plans: &[(usize, FftPlan)], planes: usize) -> Result<&FftPlan> {
        plans.iter().find(|(k, _)| *k == planes).map(|(_, p)| p).with_context(|| format!("no FFT plan for a slab of {planes} planes"))
    }

    /// Batched FFTs of P-point lines for the slabs of `n` x0 planes, `planes` each, `per_plane`
    /// lines a plane.
    fn slab_plans(stream: &Arc<CudaStream>, n: usize, planes: usize, per_plane: usize, p: usize) -> Result<Vec<(usize, FftPlan)>> {
        let mut plans = vec![(planes, FftPlan::c2c_batched(stream, &[p], planes * per_plane)?)];
        if n % planes != 0 {
            plans.push((n % planes, FftPlan::c2c_batched(stream, &[p], (n % planes) * per_plane)?));
        }
        Ok(plans)
    }
}

/// The lines of the separable passes ([`Lines`]). The x2 pass reads A's (x0, x1) lines
/// and writes B's (k2, x0) lines, the x1 pass reads B's (k2, x0) lines and writes C's (k1, k2)
/// lines; the adjoints the other way round ([`Lines::adjoint`]). B holds the slabs of x0 planes one
/// after another, each slab's lines k2 by k2 and within a k2 its planes in order: a slab's x1 lines
/// are one block for its batched FFTs, and a warp's 32 planes of one k2 are neighbouring lines, as
/// they were with B laid out (k2, x0) whole (the slab-major (x0, k2) order, lines M apart, cost 2x
/// in `resample-x1`). B's line (k2, x0) for the slab `x0s`: `x0s.start * M` lines of earlier slabs,
/// then `k2 * x0s.len() + (x0 - x0s.start)`.
fn slab_base(m: u32, x0s: &std::ops::Range<usize>) -> u32 { x0s.start as u32 * (m - 1) }
pub(super) fn lines_x2(n: u32, m: u32, x0s: &std::ops::Range<usize>) -> Lines {
    Lines { in_base: 0, in0: n, in1: 1, out_base: slab_base(m, x0s), out0: x0s.len() as u32, out1: 1, b_first: 0, b_end: n }
}
pub(super) fn lines_x1(m: u32, x0s: &std::ops::Range<usize>) -> Lines {
    Lines { in_base: slab_base(m, x0s), in0: x0s.len() as u32, in1: 1, out_base: 0, out0: m, out1: 1, b_first: x0s.start as u32,
        b_end: x0s.end as u32 }
}

/// Slabs of x0 planes per cube in the separable transform's x2 pass. A cube's forward
/// starts on its first slab once that slab's samples are up, and the inverse's last pass hands
/// each slab to the fold and the download as soon as it is done, so a cube's own DMA in and out
/// overlaps its compute (at 480^3 on 4 GPUs, 2 cubes each, the first cube's upload and the last
/// box's download were serial, ~1/10 of the time). Every transform runs the pass by slabs, whatever
/// its path, so the coefficients never depend on it (measured against the whole cube at once:
/// docs/notes/scale.md, wave packets step 4).
pub const SLABS: usize = 8;

/// Slabs of the separable x1 pass per cube by default: one, the whole cube
/// ([`GpuEngine::set_x1_slabs`]). The x1 pass by slabs lets the first cube's upload and the last
/// box's download overlap two passes instead of one, but costs ~0.3 ms a 256^3 cube on one GPU
/// (smaller batched FFTs, a fifth more time in `adjoint-x1`, measured on 2 x H200). On 4 x H200:
/// 480^3 3.78x, 3.85x and 3.87x with 8 slabs against 3.61x and 3.70x with 1; 928 x 928 x 480
/// 3.84-3.94x either way. The default awaits a 4-GPU re-measurement (docs/notes/wavepacket.md).
pub const X1_SLABS: usize = 1;

/// x0 planes per slab for a cube of side `n` in `slabs` slabs: `n / slabs` rounded up.
fn slab_planes(n: usize, slabs: usize) -> usize { n.div_ceil(slabs.clamp(1, n.max(1))).max(1) }

/// x0 planes per slab of the separable x1 pass in `slabs` slabs, a multiple of the x2 pass's
/// `planes` (each x1 slab runs after its x2 slabs in the forward, before them in the inverse).
fn x1_planes(n: usize, planes: usize, slabs: usize) -> usize {
    n.div_ceil(slabs.clamp(1, n.max(1))).div_ceil(planes.max(1)).max(1) * planes.max(1)
}

/// The x0 slabs of `n` planes, `planes` each (the last one shorter where `planes` does not divide `n`).
pub fn slabs(n: usize, planes: usize) -> impl Iterator<Item = std::ops::Range<usize>> { slabs_in(0..n, planes) }

/// The slabs of the x0 planes `x0s`, `planes` each from its start (the last one shorter): the x2
/// slabs of an x1 slab ([`x1_planes`]).
pub fn slabs_in(x0s: std::ops::Range<usize>, planes: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    let end = x0s.end;
    x0s.step_by(planes.max(1)).map(move |a| a..(a + planes).min(end))
}

/// The part of a block (`at`, `extent`, in a buffer's coordinates) in the x0 planes `rows`.
fn rows_of_block(at: [usize; 3], extent: [usize; 3], rows: &std::ops::Range<usize>) -> Option<([usize; 3], [usize; 3])> {
    let (lo, hi) = (at[0].max(rows.start), (at[0] + extent[0]).min(rows.end));
    (lo < hi).then_some(([lo, at[1], at[2]], [hi - lo, extent[1], extent[2]]))
}

/// The paper's path: the P^3 spectrum, its plan, and the adjoint's per-axis candidate lists.
struct Stencil {
    grid: CudaSlice<f32>,
    plan: FftPlan,
    list_idx: CudaSlice<u32>,
    list_w: CudaSlice<f32>,
    k: u32,
}

/// CUDA events recorded between the steps of a transform (per-stage profiles); a no-op when off.
pub struct Marks {
    stream: Option<Arc<CudaStream>>,
    list: Vec<(&'static str, CudaEvent)>,
}

impl Marks {
    pub fn off() -> Self { Self { stream: None, list: Vec::new() } }
    pub fn on(stream: &Arc<CudaStream>) -> Self { Self { stream: Some(stream.clone()), list: Vec::new() } }
    /// Records an event ending the step `label` ("category:step").
    pub fn mark(&mut self, label: &'static str) -> Result<()> {
        if let Some(s) = &self.stream {
            let e = s.context().new_event(Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT)).context("creating a profiling event")?;
            e.record(s).context("recording a profiling event")?;
            self.list.push((label, e));
        }
        Ok(())
    }
    /// Milliseconds of every step (after the first mark, which only starts the clock).
    pub fn finish(self) -> Result<Vec<(&'static str, f64)>> {
        let mut out = Vec::new();
        if let Some(last) = self.list.last() {
            last.1.synchronize().context("waiting for the profiled work")?;
        }
        for w in self.list.windows(2) {
            out.push((w[1].0, w[0].1.elapsed_ms(&w[1].1).context("reading event time")? as f64));
        }
        Ok(out)
    }
}

pub struct GpuEngine {
    gpu: Arc<Gpu>,
    frame: Arc<Frame>,
    gather: Gather,
    g: GeomArg,
    corr: CudaSlice<f32>,
    vol: CudaSlice<f32>,
    boxes: Vec<CudaSlice<f32>>,
    /// Window x norm per box point, per scale (computed once).
    tables: Vec<CudaSlice<f32>>,
    box_plans: Vec<FftPlan>,
    lat: CudaSlice<f32>,
    pinned: Option<(PinnedBuf<f32>, PinnedBuf<f32>)>,
    sep: Option<Separable>,
    stencil: Option<Stencil>,
    lattice_plan: Option<FftPlan>,
    /// The device-side hard threshold ([`CubeOp::Threshold`]): the per-box thresholds last
    /// uploaded (host copy, to skip the upload when a job reuses them), kept counts per scale on
    /// the device and their page-locked copy (read after the cube's event).
    thresholds: Option<(Vec<f32>, CudaSlice<f32>)>,
    kept: Option<(CudaSlice<u32>, PinnedBuf<u32>)>,
    /// The next cube's raw samples go up into a spare buffer on a copy stream of the
    /// engine's own while the current cube computes ([`GpuEngine::stage_slab`]).
    staging: Option<Staging>,
    /// Boxes of cubes ([`GpuEngine::cube_into_box`]): made on first use.
    boxed: Option<Boxed>,
    /// The face pre-add ([`GpuEngine::face_flag`]): made on first use.
    face: Option<FaceState>,
    /// x0 planes per slab of the separable x2 pass and of a cube's upload ([`SLABS`]), the x1
    /// pass's slab count ([`X1_SLABS`]) and its x0 planes per slab ([`x1_planes`]).
    slab_planes: usize,
    x1_slabs: usize,
    x1_planes: usize,
}

/// Device state of the box jobs: the current cube's raw samples (the staged ones swap in), the
/// tiling's taper table (and its host copy, to skip the upload when the next job reuses it), two
/// partial sums (one folds while the other goes down) with the event after each one's download,
/// the download stream, the flag `wp_cut` sets for a raw sample that is not finite, and per sum
/// the box's status as it went down with it (kept counts per scale, then the flag).
struct Boxed {
    raw: CudaSlice<f32>,
    tapers: Option<(Vec<f32>, CudaSlice<f32>)>,
    acc: [CudaSlice<f32>; 2],
    downloaded: [Option<CudaEvent>; 2],
    which: usize,
    down: Arc<CudaStream>,
    bad: CudaSlice<u32>,
    status: [PinnedBuf<u32>; 2],
    /// Events before each cube's cut (once its samples are up) and after its fold, for
    /// [`GpuEngine::take_device_times`].
    timeline: Vec<(CudaEvent, CudaEvent)>,
    /// The job's first queued step on the compute stream (the wait for the first slab is from
    /// there to the first cube's start).
    lead: Option<CudaEvent>,
    /// `SEISGPU_WP_TRACE` (a diagnostic for scaling runs, docs/DEVELOPING.md; `=fold` logs only
    /// the host fold): each cube's number and its forward's and inverse's stage events, printed by
    /// [`GpuEngine::take_device_times`].
    trace: Option<Vec<(usize, Marks, Marks)>>,
}

/// A job's device times ([`GpuEngine::take_device_times`]), ms: in its cubes (from each first cut
/// to the last fold), idle between them, waiting for the first slab's samples before the first
/// cut, and the last box's download after its last fold.
pub struct DeviceTimes {
    pub busy: f64,
    pub idle: f64,
    pub first_slab: f64,
    pub last_download: f64,
}

/// A box on its way down ([`GpuEngine::cube_into_box`]): its slabs of x0 rows (box-relative), in
/// order, each with the event that completes when its part of the sum (and of the fresh block)
/// is in host memory (the box's status is there with the first), and which of the engine's two
/// sums it was.
pub struct BoxDown {
    pub slabs: Vec<(std::ops::Range<usize>, CudaEvent)>,
    slot: usize,
    /// The box's fresh block went straight into the output volume (the host adds only the
    /// covered shell: [`super::fragments::Tiling::add_covered`]).
    pub fresh_written: bool,
    /// The box's face came down with the fresh block, the volume's earlier sum added on the
    /// device ([`super::fragments::CubeBox::face`]).
    pub face_added: bool,
}

/// A box face's way onto the device ([`GpuEngine::face_flag`]): a stream of its own that waits
/// until the host's fold has reached the face's box ([`super::fragments::Face::after`]: a
/// page-locked counter the folding thread writes, which the stream waits on with
/// `cuStreamWaitValue32`) and then copies the volume's samples there into `buf`; `free` once the
/// last add has read them.
struct FaceState {
    stream: Arc<CudaStream>,
    flag: PinnedBuf<u32>,
    flag_device: u64,
    buf: CudaSlice<f32>,
    free: Option<CudaEvent>,
}

/// The spare raw-sample buffer, the copy stream, whether slabs were queued since the last swap,
/// the event after the last cut that read the spare buffer, and for a cube that went up as a 3D
/// block ([`GpuEngine::stage_block`]) the event after each slab of its planes (the end plane, the
/// event), so its cut can start on the first slab.
struct Staging {
    spare: CudaSlice<f32>,
    copy: Arc<CudaStream>,
    queued: bool,
    free: Option<CudaEvent>,
    slabs: Vec<(usize, CudaEvent)>,
}

fn c2(n: usize) -> usize { 2 * n }

/// A step queued on an engine for a slab of a cube's x0 planes (the cut before the forward reads
/// them, the fold and download after the inverse wrote them).
type SlabStep<'a> = dyn FnMut(&mut GpuEngine, std::ops::Range<usize>) -> Result<()> + 'a;

impl GpuEngine {
    /// Allocates the engine for `frame` with the frame's gather; errors early when it will not fit.
    pub fn new(gpu: Arc<Gpu>, frame: Arc<Frame>) -> Result<Self> {
        let g = frame.geom;
        let (n, m) = (frame.n(), frame.m());
        let need = 12 * frame.total + 8 * m * m * m + 4 * n * n * n;
        gpu.ensure_fits("the wave-packet coefficients and lattice", need)?;
        let stream = gpu.stream().clone();
        let corr: Vec<f32> = (0..g.n).map(|i| gpu_kernels::wavepacket::correction(g.lambda, g.p, i - g.n / 2)).collect();
        let mut boxes = Vec::new();
        let mut tables = Vec::new();
        let mut box_plans = Vec::new();
        let ga = GeomArg(g);
        for j in 0..frame.scales() {
            let np = g.box_points(j);
            let count = np * g.boxes[j] as usize;
            boxes.push(gpu.zeros::<f32>(c2(count))?);
            let mut t = gpu.zeros::<f32>(count)?;
            let jj = j as u32;
            launch!(gpu, "wp_window_table", grid_1d(count, 256), &ga, &jj, &mut t)?;
            tables.push(t);
            let dims = [0, 1, 2].map(|a| g.shape[j][a] as usize);
            box_plans.push(FftPlan::c2c_batched(&stream, &dims, g.boxes[j] as usize)?);
        }
        let mut e = Self {
            corr: gpu.upload(&corr)?,
            vol: gpu.zeros::<f32>(n * n * n)?,
            lat: gpu.zeros::<f32>(c2(m * m * m))?,
            boxes,
            tables,
            box_plans,
            pinned: None,
            sep: None,
            stencil: None,
            lattice_plan: None,
            thresholds: None,
            kept: None,
            staging: None,
            boxed: None,
            face: None,
            slab_planes: slab_planes(n, SLABS),
            x1_slabs: X1_SLABS,
            x1_planes: x1_planes(n, slab_planes(n, SLABS), X1_SLABS),
            g: GeomArg(g),
            gather: frame.params.gather,
            frame,
            gpu,
        };
        e.set_gather(e.gather)?;
        Ok(e)
    }

    pub fn frame(&self) -> &Arc<Frame> { &self.frame }
    pub fn gpu(&self) -> &Arc<Gpu> { &self.gpu }
    pub fn gather(&self) -> Gather { self.gather }

    /// Runs the separable x2 pass in `slabs` slabs from now on ([`SLABS`]; tests compare counts).
    pub fn set_slabs(&mut self, slabs: usize) -> Result<()> {
        ensure!(slabs >= 1, "wave-packet x2 pass: {slabs} slabs per cube (at least 1)");
        self.slab_planes = slab_planes(self.frame.n(), slabs);
        self.x1_planes = x1_planes(self.frame.n(), self.slab_planes, self.x1_slabs);
        self.rebuild_separable()
    }

    /// Runs the separable x1 pass in `slabs` slabs per cube from now on ([`X1_SLABS`]: 1, the
    /// whole cube). The coefficients and volumes are the same bit for bit; only the overlap of a
    /// job's first upload and last download with the transform changes, at some device time.
    pub fn set_x1_slabs(&mut self, slabs: usize) -> Result<()> {
        ensure!(slabs >= 1, "wave-packet x1 pass: {slabs} slabs per cube (at least 1)");
        self.x1_slabs = slabs;
        self.x1_planes = x1_planes(self.frame.n(), self.slab_planes, slabs);
        self.rebuild_separable()
    }

    /// Remakes the separable transform's buffers and plans for the current slab sizes, where made.
    fn rebuild_separable(&mut self) -> Result<()> {
        if self.sep.take().is_some() {
            let gather = self.gather;
            self.set_gather(Gather::Separable)?;
            self.set_gather(gather)?;
        }
        Ok(())
    }

    /// Switches the USFFT variant, allocating its buffers and plans on first use.
    pub fn set_gather(&mut self, gather: Gather) -> Result<()> {
        let (n, m, p) = (self.frame.n(), self.frame.m(), self.frame.p());
        let stream = self.gpu.stream().clone();
        match gather {
            Gather::Separable if self.sep.is_none() => {
                let own_c = self.x1_planes < n;
                let la = if own_c { n * n * p } else { (n * n * p).max(m * m * p) };
                self.gpu.ensure_fits("the separable USFFT's line buffers", 8 * (la + n * m * p + if own_c { m * m * p } else { 0 }))?;
                let planes = self.slab_planes;
                self.sep = Some(Separable {
                    a: self.gpu.zeros::<f32>(c2(la))?,
                    b: self.gpu.zeros::<f32>(c2(n * m * p))?,
                    c: if own_c { Some(self.gpu.zeros::<f32>(c2(m * m * p))?) } else { None },
                    plan_x2: Separable::slab_plans(&stream, n, planes, n, p)?,
                    plan_x1: Separable::slab_plans(&stream, n, self.x1_planes, m, p)?,
                    plan_x0: FftPlan::c2c_batched(&stream, &[p], m * m)?,
                });
            }
            Gather::Stencil if self.stencil.is_none() => {
                self.gpu.ensure_fits("the paper's P^3 USFFT grid", 8 * p * p * p)?;
                let lists = super::cpu::adjoint_lists(&self.frame.geom);
                let k = lists.iter().map(|l| l.len()).max().unwrap_or(1).max(1);
                let mut idx = vec![0u32; p * k];
                let mut w = vec![0.0f32; p * k];
                for (r, l) in lists.iter().enumerate() {
                    for (c, &(u, wt)) in l.iter().enumerate() {
                        idx[r * k + c] = u as u32;
                        w[r * k + c] = wt;
                    }
                }
                self.stencil = Some(Stencil {
                    grid: self.gpu.zeros::<f32>(c2(p * p * p))?,
                    plan: FftPlan::c2c_3d(&stream, (p, p, p))?,
                    list_idx: self.gpu.upload(&idx)?,
                    list_w: self.gpu.upload(&w)?,
                    k: k as u32,
                });
            }
            Gather::Lattice if self.lattice_plan.is_none() => {
                self.lattice_plan = Some(FftPlan::c2c_3d(&stream, (m, m, m))?);
            }
            _ => {}
        }
        self.gather = gather;
        Ok(())
    }

    // ---- host-level transforms ---------------------------------------------------------------

    /// Coefficients of an N^3 cube.
    pub fn forward(&mut self, f: &[f32]) -> Result<Vec<Complex32>> {
        self.upload_volume(f)?;
        self.forward_device()?;
        let mut out = vec![Complex32::default(); self.frame.total];
        self.download_coeffs(&mut out)?;
        Ok(out)
    }

    /// The cube from coefficients (adjoint = inverse).
    pub fn inverse(&mut self, c: &[Complex32]) -> Result<Vec<f32>> {
        self.upload_coeffs(c)?;
        self.inverse_device()?;
        self.download_volume()
    }

    /// Device-resident forward: volume buffer -> box coefficients.
    pub fn forward_device(&mut self) -> Result<()> { self.forward_marked(&mut Marks::off()) }

    /// Device-resident inverse: box coefficients -> volume buffer.
    pub fn inverse_device(&mut self) -> Result<()> { self.inverse_marked(&mut Marks::off()) }

    pub fn forward_marked(&mut self, marks: &mut Marks) -> Result<()> { self.forward_slabbed(marks, &mut |_, _| Ok(())) }

    pub fn inverse_marked(&mut self, marks: &mut Marks) -> Result<()> { self.inverse_slabbed(marks, &mut |_, _| Ok(())) }

    /// The forward, `before(engine, planes)` queued before the transform reads the x0 `planes` of
    /// the volume buffer ([`GpuEngine::spectrum_forward_slabbed`]).
    fn forward_slabbed(&mut self, marks: &mut Marks, before: &mut SlabStep) -> Result<()> {
        self.spectrum_forward_slabbed(marks, before)?;
        self.box_gather()?;
        marks.mark(if self.gather == Gather::Stencil { "gather:stencil" } else { "gather:box-fill" })?;
        self.box_ffts(true)?;
        marks.mark("box-fft:boxes")
    }

    /// The inverse, `after(engine, planes)` queued once the x0 `planes` of the volume buffer are
    /// written ([`GpuEngine::spectrum_adjoint_slabbed`]).
    fn inverse_slabbed(&mut self, marks: &mut Marks, after: &mut SlabStep) -> Result<()> {
        self.box_ffts(false)?;
        marks.mark("box-fft:boxes")?;
        self.combine()?;
        marks.mark("combine:boxes")?;
        self.spectrum_adjoint_slabbed(marks, after)
    }

    /// Per-step times (ms) of one device-resident forward or inverse.
    pub fn profile(&mut self, forward: bool) -> Result<Vec<(&'static str, f64)>> {
        let mut marks = Marks::on(self.gpu.stream());
        marks.mark("start")?;
        if forward { self.forward_marked(&mut marks)? } else { self.inverse_marked(&mut marks)? }
        marks.finish()
    }

    // ---- transfers -----------------------------------------------------------------------------

    /// Page-locked host buffers for the volume and the coefficients (allocated on first use): the
    /// transfers from and to them run at full PCIe speed.
    pub fn pinned_buffers(&mut self) -> Result<(&mut [f32], &mut [Complex32])> {
        if self.pinned.is_none() {
            let n = self.frame.n();
            self.pinned = Some((PinnedBuf::new(&self.gpu, n * n * n)?, PinnedBuf::new(&self.gpu, c2(self.frame.total))?));
        }
        let (v, c) = self.pinned.as_mut().unwrap();
        let c = c.as_mut_slice()?;
        // SAFETY: (re, im) f32 pairs are the layout of Complex32.
        let c = unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr() as *mut Complex32, c.len() / 2) };
        Ok((v.as_mut_slice()?, c))
    }

    /// Forward from the pinned volume buffer to the pinned coefficient buffer (synchronised).
    pub fn forward_pinned(&mut self) -> Result<()> {
        self.pinned_buffers()?;
        let stream = self.gpu.stream().clone();
        let (v, _) = self.pinned.as_ref().unwrap();
        stream.memcpy_htod(v.as_slice()?, &mut self.vol)?;
        self.forward_device()?;
        let (_, c) = self.pinned.as_mut().unwrap();
        let c = c.as_mut_slice()?;
        for j in 0..self.frame.scales() {
            let r = self.frame.scale_range(j);
            stream.memcpy_dtoh(&self.boxes[j], &mut c[2 * r.start..2 * r.end])?;
        }
        stream.synchronize()?;
        Ok(())
    }

    /// Inverse from the pinned coefficient buffer to the pinned volume buffer (synchronised).
    pub fn inverse_pinned(&mut self) -> Result<()> {
        self.pinned_buffers()?;
        let stream = self.gpu.stream().clone();
        {
            let (_, c) = self.pinned.as_ref().unwrap();
            let c = c.as_slice()?;
            for j in 0..self.frame.scales() {
                let r = self.frame.scale_range(j);
                stream.memcpy_htod(&c[2 * r.start..2 * r.end], &mut self.boxes[j])?;
            }
        }
        self.inverse_device()?;
        let (v, _) = self.pinned.as_mut().unwrap();
        stream.memcpy_dtoh(&self.vol, v.as_mut_slice()?)?;
        stream.synchronize()?;
        Ok(())
    }

    /// Queues the copy of `slab` of a cube's raw samples into the spare device buffer from sample
    /// `at` on, on the engine's copy stream (the cube goes up slab by slab as the host
    /// copies it, so the first upload starts within a slab's copy, and the next cube goes up while
    /// the current one computes; on the compute stream it waited behind the previous cube, ~5 ms
    /// a cube on 4 GPUs). [`GpuEngine::cube_into_box`] swaps it in. Asynchronous where `slab` is
    /// page-locked memory.
    ///
    /// # Safety
    /// `slab` must stay alive and unchanged until the copy stream has passed the copy
    /// ([`GpuEngine::wait_staged`]).
    pub(crate) unsafe fn stage_slab(&mut self, slab: &[f32], at: usize) -> Result<()> {
        ensure!(at + slab.len() <= self.vol.len(), "slab of {} samples at {at} for a {}^3 engine", slab.len(), self.frame.n());
        let st = self.staging_free()?;
        let mut dst = st.spare.slice_mut(at..at + slab.len());
        st.copy.memcpy_htod(slab, &mut dst).context("uploading a slab of the cube")?;
        st.queued = true;
        Ok(())
    }

    /// Cube t's raw samples ((n0, n1, n2) = `inside` at `start`) straight from a page-locked
    /// volume of `shape` ([`super::Engine::page_locked`]): one 3D copy on the copy stream, no host
    /// pass (the host copies of four engines' first cubes at once took 4-16 ms each on
    /// 4 x H200, against ~1.3 ms of DMA per 67 MB cube). [`GpuEngine::cube_into_box`] swaps them in
    /// as it does staged slabs; `wp_cut` checks them.
    ///
    /// # Safety
    /// `vol` must stay alive and unchanged until the copy stream has passed the copy
    /// ([`GpuEngine::wait_staged`]).
    pub(crate) unsafe fn stage_block(&mut self, vol: &[f32], shape: [usize; 3], start: [usize; 3], inside: [usize; 3])
        -> Result<()> {
        let n = self.frame.n();
        ensure!(inside.iter().all(|&d| d <= n), "block {inside:?} for a {n}^3 engine");
        use crate::runtime::memory::{copy_3d, Place};
        let planes = self.slab_planes;
        let st = self.staging_free()?;
        // By slabs of x0 planes, an event after each: the cut starts on a slab once it is up.
        for r in slabs(inside[0], planes) {
            let spare = Place::device(&st.spare, &st.copy, inside, [r.start, 0, 0]);
            let from = Place::host(vol, shape, [start[0] + r.start, start[1], start[2]]);
            unsafe { copy_3d(&st.copy, from, spare, [r.len(), inside[1], inside[2]]) }?;
            st.queued = true;
            st.slabs.push((r.end, st.copy.record_event(None).context("recording a slab's upload")?));
        }
        Ok(())
    }

    /// The page-locked counter that lets this engine add box faces itself
    /// ([`super::fragments::CubeBox::face`]), reset to 0: the folding thread writes into it how many
    /// boxes are folded (every one before that number), and a face's copy waits until it reaches
    /// the face's [`super::fragments::Face::after`].
    pub(crate) fn face_flag(&mut self) -> Result<Option<*mut u32>> {
        if self.face.is_none() {
            use cudarc::driver::sys;
            // (Stream memory operations, `cuStreamWaitValue32_v2`, are always there since CUDA 12.)
            let ctx = self.gpu.context().clone();
            let mut flag = PinnedBuf::<u32>::mapped(&self.gpu, 1)?;
            ctx.bind_to_thread().context("binding the context")?;
            let mut flag_device = 0u64;
            let host = flag.as_mut_slice()?.as_mut_ptr() as *mut std::ffi::c_void;
            // SAFETY: `flag` is page-locked, mapped memory of this context, alive with the state.
            unsafe { sys::cuMemHostGetDevicePointer_v2(&mut flag_device, host, 0) }.result()
                .context("mapping the face counter")?;
            let stream = ctx.new_stream().context("creating the face stream")?;
            self.face = Some(FaceState { stream, flag, flag_device, buf: self.gpu.zeros::<f32>(1)?, free: None });
        }
        let f = self.face.as_mut().unwrap();
        let p = f.flag.as_mut_slice()?.as_mut_ptr();
        // SAFETY: no stream waits on the counter between jobs (each job's waits all pass).
        unsafe { std::sync::atomic::AtomicU32::from_ptr(p).store(0, std::sync::atomic::Ordering::SeqCst) };
        Ok(Some(p))
    }

    /// Waits until the engine's streams are through (nothing in flight into host buffers), after a
    /// failed job; its cube marks are dropped (the next job's [`GpuEngine::take_device_times`]
    /// counts its own cubes only).
    pub(crate) fn quiesce(&mut self) -> Result<()> {
        if let Some(bx) = self.boxed.as_mut() {
            bx.timeline.clear();
            bx.lead = None;
            if let Some(tr) = bx.trace.as_mut() {
                tr.clear();
            }
        }
        self.gpu.stream().synchronize().context("waiting for the engine's work")?;
        if let Some(st) = &self.staging {
            st.copy.synchronize().context("waiting for the engine's uploads")?;
        }
        if let Some(bx) = &self.boxed {
            bx.down.synchronize().context("waiting for the engine's downloads")?;
        }
        if let Some(f) = &self.face {
            f.stream.synchronize().context("waiting for the engine's face copies")?;
        }
        Ok(())
    }

    /// The staging state, made on first use, its spare buffer free to write (the copy stream waits
    /// for the cut that last read it).
    fn staging_free(&mut self) -> Result<&mut Staging> {
        if self.staging.is_none() {
            let spare = self.gpu.zeros::<f32>(self.vol.len())?;
            let copy = self.gpu.context().new_stream().context("creating the cube upload stream")?;
            self.staging = Some(Staging { spare, copy, queued: false, free: None, slabs: Vec::new() });
        }
        let st = self.staging.as_mut().unwrap();
        if !st.queued {
            // A new cube: the slab events of one that never swapped in (a failed job) are stale.
            st.slabs.clear();
        }
        // The spare buffer held the raw samples of the cube before the current one: its cut must
        // be through before they are overwritten.
        if let Some(ev) = st.free.take() {
            st.copy.wait(&ev).context("ordering a cube upload after the previous cut")?;
        }
        Ok(st)
    }

    /// Waits until the staged slabs have gone up (their host memory may be written again).
    pub(crate) fn wait_staged(&self) -> Result<()> {
        if let Some(st) = &self.staging {
            st.copy.synchronize().context("waiting for the cube upload")?;
        }
        Ok(())
    }

    /// One cube of a box, its raw samples staged ([`GpuEngine::stage_slab`]), queued on
    /// the compute stream: `wp_cut` (taper and padding) into the volume buffer, forward, the edit
    /// `op`, inverse, `wp_fold` into the box's partial sum (zeroed at the box's first cube). Behind
    /// the box's last cube the sum goes down into `partial` on a stream of its own (the next box
    /// folds into the other sum meanwhile), slab by slab: each returned slab's event completes
    /// when its rows are there ([`BoxDown`]).
    /// [`CubeOp::Identity`] and [`CubeOp::Threshold`] never move the coefficients; the kept
    /// counts of a threshold add up over the box and go down behind its last cube
    /// ([`GpuEngine::kept`]).
    ///
    /// The cut and the fold go by slabs of x0 planes ([`SLABS`]): a slab is cut once its
    /// samples are up (a block staged by [`GpuEngine::stage_block`] goes up slab by slab) and
    /// enters the forward's first pass at once; after the inverse's last pass each slab is folded
    /// and, behind the box's last cube, goes down while the next slabs compute. So a cube's own
    /// upload and download overlap its compute, which matters for the first and last cube of a
    /// device (480^3 on 4 GPUs: two cubes each).
    ///
    /// With `out` (a page-locked output volume, [`crate::runtime::memory::page_locked`]) the box's
    /// fresh block goes straight into it and only the covered shell into `partial` (the host's
    /// fold then reads and adds a third of the samples, not all: the ordered fold had
    /// become the 4-GPU critical path at 2-5 ms per 256^3 box).
    ///
    /// # Safety
    /// `partial` must be page-locked memory that stays alive and untouched until the event
    /// completes; so must `out`'s fresh block of the box.
    pub(crate) unsafe fn cube_into_box(&mut self, job: &super::fragments::CubeInBox, tapers: &[f32], op: CubeOp,
        partial: &mut [f32], out: Option<crate::runtime::memory::Place>) -> Result<Option<BoxDown>> {
        let n = self.frame.n();
        ensure!(job.cube == n, "cube {}: side {} on an engine of {n}", job.t, job.cube);
        job.check(tapers.len(), partial.len())?;
        let stream = self.gpu.stream().clone();
        if self.boxed.is_none() {
            let status = self.frame.scales() + 1;
            self.boxed = Some(Boxed { raw: self.gpu.zeros::<f32>(n * n * n)?, tapers: None,
                acc: [self.gpu.zeros::<f32>(1)?, self.gpu.zeros::<f32>(1)?], downloaded: [None, None], which: 0,
                down: self.gpu.context().new_stream().context("creating the box download stream")?,
                bad: self.gpu.zeros::<u32>(1)?,
                status: [PinnedBuf::new(&self.gpu, status)?, PinnedBuf::new(&self.gpu, status)?], timeline: Vec::new(),
                lead: None, trace: std::env::var("SEISGPU_WP_TRACE").ok().filter(|v| v != "fold").map(|_| Vec::new()) });
        }
        let bx = self.boxed.as_mut().unwrap();
        let timed = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        if bx.timeline.is_empty() && bx.lead.is_none() {
            bx.lead = Some(stream.record_event(timed).context("recording a job's start")?);
        }
        // The staged raw samples become the cube's: a slab's cut waits for that slab's upload (a
        // 3D block's slab events), or for everything staged (host-copied slabs).
        let st = self.staging.as_mut().filter(|st| st.queued).with_context(|| format!("cube {}: no raw samples staged", job.t))?;
        let up_all = st.copy.record_event(None).context("recording the cube upload")?;
        let up_slabs = std::mem::take(&mut st.slabs);
        std::mem::swap(&mut bx.raw, &mut st.spare);
        st.queued = false;
        if bx.tapers.as_ref().is_none_or(|(h, _)| h.as_slice() != tapers) {
            bx.tapers = Some((tapers.to_vec(), self.gpu.upload(tapers)?));
        }
        let need = job.box_samples();
        let w = bx.which;
        if job.first {
            // This sum's last download is through before it is zeroed again.
            if let Some(ev) = bx.downloaded[w].take() {
                stream.wait(&ev).context("ordering a box download before the next box")?;
            }
            if bx.acc[w].len() < need {
                bx.acc[w] = self.gpu.zeros::<f32>(need)?;
            }
            stream.memset_zeros(&mut bx.acc[w].slice_mut(..need)).context("zeroing a box's partial sum")?;
            stream.memset_zeros(&mut bx.bad).context("clearing a box's input check")?;
        }
        let gpu = self.gpu.clone();
        let (c, [n0, n1, n2]) = (n as u32, job.inside.map(|v| v as u32));
        let (len, off) = (job.len as u32, job.off as u32);
        let mut started = None;
        // Before the forward reads a slab: its raw samples up, its cut (taper and padding).
        let mut cut = |e: &mut GpuEngine, r: std::ops::Range<usize>| -> Result<()> {
            let stream = e.gpu.stream().clone();
            let rows = r.start.min(job.inside[0])..r.end.min(job.inside[0]);
            if !rows.is_empty() {
                let up = up_slabs.iter().find(|(end, _)| *end >= rows.end).map_or(&up_all, |(_, ev)| ev);
                stream.wait(up).context("ordering a slab's upload before its cut")?;
            }
            if started.is_none() {
                started = Some(stream.record_event(timed).context("recording a cube's start")?);
            }
            let bx = e.boxed.as_mut().unwrap();
            let (_, tap) = bx.tapers.as_ref().unwrap();
            let [w0, w1, w2] = job.taper.map(|o| tap.slice(o..o + n));
            let (a0, planes) = (r.start as u32, r.len() as u32);
            launch!(gpu, "wp_cut", grid_1d(r.len() * n * n, 256), &c, &a0, &planes, &n0, &n1, &n2, &bx.raw, &w0, &w1, &w2,
                &mut e.vol, &mut bx.bad)?;
            // The raw buffer is free for the next-but-one cube once its last cut is through.
            if r.end == n && let Some(st) = e.staging.as_mut() {
                st.free = Some(stream.record_event(None).context("recording a cube's cut")?);
            }
            Ok(())
        };
        let traced = self.boxed.as_ref().is_some_and(|b| b.trace.is_some());
        let marks = || if traced { Marks::on(&stream) } else { Marks::off() };
        let (mut fwd_marks, mut inv_marks) = (marks(), marks());
        self.forward_slabbed(&mut fwd_marks, &mut cut)?;
        let started = started.context("a cube's forward cut no slab")?;
        let threshold = matches!(op, CubeOp::Threshold(_));
        match op {
            CubeOp::Identity => {}
            CubeOp::Threshold(thr) => self.threshold_queue(thr, job.first)?,
            CubeOp::Host(edit) => self.host_edit(edit)?,
        }
        // The box's status goes down with it, into its sum's slot (the other slot may still be
        // read for the previous box): its kept counts are final after the last cube's edit, its
        // input check after the last cut.
        let scales = self.frame.scales();
        if job.last {
            let bx = self.boxed.as_mut().unwrap();
            let status = bx.status[w].as_mut_slice()?;
            if threshold {
                let (kept, _) = self.kept.as_ref().context("no kept counts")?;
                stream.memcpy_dtoh(kept, &mut status[..scales]).context("downloading the kept counts")?;
            }
            stream.memcpy_dtoh(&bx.bad, &mut status[scales..]).context("downloading a box's input check")?;
        }
        let fresh_written = job.last && out.is_some() && job.fresh.is_some();
        // The face: once the host's fold has reached this box's x0 row, the volume's
        // samples there come up on the face stream; each slab with face planes adds them into
        // the sum after its fold, and they go down with the fresh block.
        let face_up = match (job.face, job.last) {
            (Some(f), true) => {
                let vol = out.with_context(|| format!("cube {}: a face to add but no page-locked output", job.t))?;
                let fs = self.face.as_mut().with_context(|| format!("cube {}: a face to add but no face counter", job.t))?;
                let need: usize = f.extent.iter().product();
                if fs.buf.len() < need {
                    fs.buf = self.gpu.zeros::<f32>(need)?;
                }
                // The copy rewrites `buf` while the previous face's add may still read it. cudarc
                // orders a read after the last write, not a write after reads (`Place::device`
                // takes the buffer as read, for either end of a copy), so this wait is ours.
                if let Some(ev) = fs.free.take() {
                    fs.stream.wait(&ev).context("ordering a face copy after the previous face's add")?;
                }
                use cudarc::driver::sys;
                self.gpu.context().bind_to_thread().context("binding the context")?;
                // SAFETY: the counter is mapped page-locked memory that outlives the engine's
                // streams (`quiesce`); a job that stops sets it past every box.
                unsafe { sys::cuStreamWaitValue32_v2(fs.stream.cu_stream(), fs.flag_device, f.after as u32,
                    sys::CUstreamWaitValue_flags::CU_STREAM_WAIT_VALUE_GEQ as u32) }.result()
                    .context("queueing a face's wait for the fold")?;
                use crate::runtime::memory::{copy_3d, Place};
                let src = Place { start: [0, 1, 2].map(|a| job.origin[a] + f.at[a]), ..vol };
                unsafe { copy_3d(&fs.stream, src, Place::device(&fs.buf, &fs.stream, f.extent, [0; 3]), f.extent) }
                    .context("copying a box's face up")?;
                Some((f, fs.stream.record_event(None).context("recording a face's copy")?))
            }
            (Some(_), false) | (None, _) => None,
        };
        let mut face_waited = false;
        let mut slabs_down = Vec::new();
        // After the inverse wrote a slab: its fold into the box's sum and, behind the box's last
        // cube, its rows' download (on the download stream, while the next slabs compute).
        let mut fold = |e: &mut GpuEngine, r: std::ops::Range<usize>| -> Result<()> {
            let rows = r.start.min(job.inside[0])..r.end.min(job.inside[0]);
            if rows.is_empty() {
                return Ok(());
            }
            let stream = e.gpu.stream().clone();
            let bx = e.boxed.as_mut().unwrap();
            {
                let (_, tap) = bx.tapers.as_ref().unwrap();
                let [w0, w1, w2] = job.taper.map(|o| tap.slice(o..o + n));
                let (a0, a1) = (rows.start as u32, rows.end as u32);
                launch!(gpu, "wp_fold", grid_1d(rows.len() * job.inside[1] * job.inside[2], 256), &c, &a0, &a1, &n0, &n1, &n2,
                    &len, &off, &e.vol, &w0, &w1, &w2, &mut bx.acc[w])?;
            }
            if let Some((f, up)) = &face_up {
                // The face's planes of this slab (the face starts at plane 0 of the box).
                let (a0, a1) = (rows.start, rows.end.min(f.extent[0]));
                if a0 < a1 {
                    if !face_waited {
                        stream.wait(up).context("ordering a face's add after its copy")?;
                        face_waited = true;
                    }
                    let fs = e.face.as_ref().unwrap();
                    let [_, c1, c2] = f.at.map(|v| v as u32);
                    let [_, m1, m2] = f.extent.map(|v| v as u32);
                    let (a0, a1) = (a0 as u32, a1 as u32);
                    launch!(gpu, "wp_add_face", grid_1d((a1 - a0) as usize * f.extent[1] * f.extent[2], 256), &a0, &a1, &n1, &len,
                        &c1, &c2, &m1, &m2, &fs.buf, &mut bx.acc[w])?;
                }
            }
            if !job.last {
                return Ok(());
            }
            let folded = stream.record_event(None).context("recording a slab's fold")?;
            bx.down.wait(&folded).context("ordering a slab's download after its fold")?;
            // The sum is addressed as the compute stream sees it: the download stream is ordered
            // after the fold by `folded`, and the compute stream must not wait for the download.
            // (Addressed on the download stream, cudarc's read event there made each slab's fold
            // wait for the previous slab's download: on 4 x H200, whose downloads share the host's
            // bandwidth, the inverse's last pass became download-bound, +0.3-0.7 ms a cube.) The
            // sum is written again only by later slabs' folds (other rows) and by the box two
            // later, after `downloaded`.
            use crate::runtime::memory::{copy_3d, Place};
            let shape = [job.inside[0], job.inside[1], job.len];
            let acc = |at| Place::device(&bx.acc[w], &stream, shape, at);
            match (out, job.fresh) {
                (Some(vol), Some((at, extent))) => {
                    if let Some((at, extent)) = rows_of_block(at, extent, &rows) {
                        let dst = Place { start: [0, 1, 2].map(|a| job.origin[a] + at[a]), ..vol };
                        unsafe { copy_3d(&bx.down, acc(at), dst, extent) }
                            .context("downloading a box's fresh block into the volume")?;
                    }
                    for &(at, extent) in job.covered.iter().flatten() {
                        if let Some((at, extent)) = rows_of_block(at, extent, &rows) {
                            unsafe { copy_3d(&bx.down, acc(at), Place::host(partial, shape, at), extent) }
                                .context("downloading a box's covered samples")?;
                        }
                    }
                }
                _ => {
                    let at = [rows.start, 0, 0];
                    unsafe { copy_3d(&bx.down, acc(at), Place::host(partial, shape, at), [rows.len(), shape[1], shape[2]]) }
                        .context("downloading a box's partial sum")?;
                }
            }
            let down = bx.down.record_event(None).context("recording a slab's download")?;
            slabs_down.push((rows, down));
            Ok(())
        };
        inv_marks.mark("start")?;
        self.inverse_slabbed(&mut inv_marks, &mut fold)?;
        if face_up.is_some() && let Some(fs) = self.face.as_mut() {
            fs.free = Some(stream.record_event(None).context("recording a face's add")?);
        }
        let bx = self.boxed.as_mut().unwrap();
        if let Some(tr) = bx.trace.as_mut() {
            tr.push((job.t, fwd_marks, inv_marks));
        }
        bx.timeline.push((started, stream.record_event(timed).context("recording a cube's end")?));
        if !job.last {
            return Ok(None);
        }
        bx.downloaded[w] = Some(bx.down.record_event(timed).context("recording a box's download")?);
        bx.which ^= 1;
        Ok(Some(BoxDown { slabs: slabs_down, slot: w, fresh_written, face_added: face_up.is_some() }))
    }

    /// The device's time in the cubes since the last call (from each cut, once the samples were
    /// up, to the fold) and its idle time between them (waiting for samples, or for the host to
    /// queue the next cube), in ms; `None` before any cube. Waits for the last cube.
    pub(crate) fn take_device_times(&mut self) -> Result<Option<DeviceTimes>> {
        let Some(bx) = self.boxed.as_mut() else { return Ok(None) };
        let tl = std::mem::take(&mut bx.timeline);
        let lead = bx.lead.take();
        let (Some(first), Some(last)) = (tl.first(), tl.last()) else { return Ok(None) };
        last.1.synchronize().context("waiting for the last cube")?;
        let mut busy = 0.0;
        for (a, b) in &tl {
            busy += a.elapsed_ms(b).context("reading a cube's events")? as f64;
        }
        let span = first.0.elapsed_ms(&last.1).context("reading the cubes' events")? as f64;
        let first_slab = match &lead {
            Some(l) => l.elapsed_ms(&first.0).context("reading a job's first events")? as f64,
            None => 0.0,
        };
        // The last box's sum went down from the slot before the current one.
        let last_download = match &bx.downloaded[bx.which ^ 1] {
            Some(d) => {
                d.synchronize().context("waiting for the last box's download")?;
                last.1.elapsed_ms(d).context("reading the last download's event")? as f64
            }
            None => 0.0,
        };
        if let Some(tr) = bx.trace.as_mut() {
            let dev = self.gpu.context().ordinal();
            for ((t, f, i), (a, b)) in std::mem::take(tr).into_iter().zip(&tl) {
                let mut line = format!("trace: device {dev} cube {t}: {:.2} ms;", a.elapsed_ms(b)?);
                for (dir, m) in [("fwd", f), ("inv", i)] {
                    let mut sums: Vec<(&str, f64)> = Vec::new();
                    for (label, ms) in m.finish()? {
                        match sums.iter_mut().find(|(l, _)| *l == label) {
                            Some(x) => x.1 += ms,
                            None => sums.push((label, ms)),
                        }
                    }
                    line += &format!(" {dir}");
                    for (l, ms) in sums {
                        line += &format!(" {l} {ms:.2}");
                    }
                }
                eprintln!("{line}");
            }
        }
        Ok(Some(DeviceTimes { busy, idle: span - busy, first_slab, last_download }))
    }

    /// A box's status once its event has completed: the coefficients its threshold kept (`None`
    /// without one) and whether every raw sample was finite.
    pub(crate) fn box_status(&self, done: &BoxDown, threshold: bool) -> Result<(Option<u64>, bool)> {
        let bx = self.boxed.as_ref().context("no box has run on this engine")?;
        let status = bx.status[done.slot].as_slice()?;
        let (kept, bad) = status.split_at(self.frame.scales());
        Ok((threshold.then(|| kept.iter().map(|&k| k as u64).sum()), bad[0] == 0))
    }

    /// A host edit of the device coefficients: down into the page-locked buffer, the edit, up.
    fn host_edit(&mut self, edit: &mut dyn FnMut(&mut [Complex32])) -> Result<()> {
        let stream = self.gpu.stream().clone();
        self.pinned_buffers()?;
        {
            let (_, c) = self.pinned.as_mut().unwrap();
            let c = c.as_mut_slice()?;
            for j in 0..self.frame.scales() {
                let r = self.frame.scale_range(j);
                stream.memcpy_dtoh(&self.boxes[j], &mut c[2 * r.start..2 * r.end]).context("downloading coefficients")?;
            }
        }
        stream.synchronize().context("waiting for the forward transform")?;
        edit(self.pinned_buffers()?.1);
        let (_, c) = self.pinned.as_ref().unwrap();
        let c = c.as_slice()?;
        for j in 0..self.frame.scales() {
            let r = self.frame.scale_range(j);
            stream.memcpy_htod(&c[2 * r.start..2 * r.end], &mut self.boxes[j]).context("uploading coefficients")?;
        }
        Ok(())
    }

    /// Queues the hard threshold of the device coefficients (`wp_threshold`, one launch per
    /// scale): coefficient c of box b (numbered over all scales) becomes 0 where
    /// `below_threshold(c, thr[b])`, as [`super::threshold_host`] does on the host; the kept counts
    /// go down into a page-locked buffer behind it ([`GpuEngine::kept`] once the stream has passed).
    pub fn threshold_device(&mut self, thr: &[f32]) -> Result<()> {
        self.threshold_queue(thr, true)?;
        let (kept, kept_host) = self.kept.as_mut().unwrap();
        self.gpu.stream().memcpy_dtoh(kept, kept_host.as_mut_slice()?).context("downloading the kept counts")?;
        Ok(())
    }

    /// The threshold's launches; the kept counts start from zero when `reset` is set, else add up
    /// (over a box's cubes).
    fn threshold_queue(&mut self, thr: &[f32], reset: bool) -> Result<()> {
        ensure!(thr.len() == self.frame.box_count(), "{} thresholds for a frame of {} boxes", thr.len(), self.frame.box_count());
        let scales = self.frame.scales();
        for j in 0..scales {
            let count = self.frame.geom.boxes[j] as usize * self.frame.geom.box_points(j);
            // The kernel divides in 32 bits and counts into a u32 per scale.
            ensure!(count < u32::MAX as usize, "scale {j} has {count} coefficients: too many for the device threshold (use a host edit)");
        }
        if self.thresholds.as_ref().is_none_or(|(h, _)| h.as_slice() != thr) {
            self.thresholds = Some((thr.to_vec(), self.gpu.upload(thr)?));
        }
        if self.kept.is_none() {
            self.kept = Some((self.gpu.zeros::<u32>(scales)?, PinnedBuf::new(&self.gpu, scales)?));
        }
        let stream = self.gpu.stream().clone();
        let gpu = self.gpu.clone();
        let (_, thr_dev) = self.thresholds.as_ref().unwrap();
        let (kept, _) = self.kept.as_mut().unwrap();
        if reset {
            stream.memset_zeros(kept).context("zeroing the kept counts")?;
        }
        let mut first_box = 0usize;
        for j in 0..scales {
            let np = self.frame.geom.box_points(j);
            let count = self.frame.geom.boxes[j] as usize * np;
            let (count32, np32) = (count as u32, np as u32);
            let t = thr_dev.slice(first_box..);
            let mut k = kept.slice_mut(j..j + 1);
            launch!(gpu, "wp_threshold", grid_1d(count, 256), &count32, &np32, &t, &mut self.boxes[j], &mut k)?;
            first_box += self.frame.geom.boxes[j] as usize;
        }
        Ok(())
    }

    /// Coefficients kept by the last [`GpuEngine::threshold_device`] (valid once the stream has
    /// passed it, e.g. after the cube's event).
    pub fn kept(&self) -> Result<u64> {
        let (_, h) = self.kept.as_ref().context("no device threshold has run on this engine")?;
        Ok(h.as_slice()?.iter().map(|&k| k as u64).sum())
    }

    pub fn upload_volume(&mut self, f: &[f32]) -> Result<()> {
        ensure!(f.len() == self.vol.len(), "volume of {} samples for a {}^3 engine", f.len(), self.frame.n());
        self.gpu.stream().memcpy_htod(f, &mut self.vol).context("uploading the cube")?;
        Ok(())
    }

    pub fn download_volume(&self) -> Result<Vec<f32>> { Ok(self.gpu.download(&self.vol)?) }

    pub fn upload_coeffs(&mut self, c: &[Complex32]) -> Result<()> {
        ensure!(c.len() == self.frame.total, "{} coefficients for a frame of {}", c.len(), self.frame.total);
        let stream = self.gpu.stream().clone();
        for j in 0..self.frame.scales() {
            let src = as_f32(&c[self.frame.scale_range(j)]);
            stream.memcpy_htod(src, &mut self.boxes[j]).context("uploading coefficients")?;
        }
        Ok(())
    }

    pub fn download_coeffs(&self, out: &mut [Complex32]) -> Result<()> {
        ensure!(out.len() == self.frame.total, "coefficient buffer of {} for a frame of {}", out.len(), self.frame.total);
        let stream = self.gpu.stream();
        for j in 0..self.frame.scales() {
            let dst = as_f32_mut(&mut out[self.frame.scale_range(j)]);
            stream.memcpy_dtoh(&self.boxes[j], dst).context("downloading coefficients")?;
        }
        stream.synchronize().context("waiting for the coefficients")?;
        Ok(())
    }

    /// The per-scale device buffers of the box coefficients (interleaved complex).
    pub fn box_buffers(&self) -> &[CudaSlice<f32>] { &self.boxes }
    pub fn box_buffers_mut(&mut self) -> &mut [CudaSlice<f32>] { &mut self.boxes }
    pub fn volume_buffer(&self) -> &CudaSlice<f32> { &self.vol }
    pub fn volume_buffer_mut(&mut self) -> &mut CudaSlice<f32> { &mut self.vol }

    // ---- stages (public for the per-stage benchmark) ----------------------------------------

    fn q_kernel(&self, base: &str) -> String { format!("{base}_q{}", self.frame.geom.q) }

    /// Forward USFFT up to the global spectrum (stencil: P^3 grid) or the lattice (separable,
    /// lattice). Separable: three rounds of batched 1D FFT + gather.
    pub fn spectrum_forward(&mut self, marks: &mut Marks) -> Result<()> { self.spectrum_forward_slabbed(marks, &mut |_, _| Ok(())) }

    /// [`GpuEngine::spectrum_forward`], `before(engine, planes)` queued before the x0 `planes` of
    /// the volume buffer are read: separable, the x2 pass goes slab by slab ([`slabs`]); the other
    /// gathers read the whole cube at once.
    fn spectrum_forward_slabbed(&mut self, marks: &mut Marks, before: &mut SlabStep) -> Result<()> {
        let (n, m, p) = (self.frame.n() as u32, self.frame.m() as u32, self.frame.p() as u32);
        let g = self.g;
        let gpu = self.gpu.clone();
        let stream = gpu.stream().clone();
        let n3 = (n * n * n) as usize;
        match self.gather {
            Gather::Separable => {
                let resample = self.q_kernel("wp_resample");
                {
                    // The resamplings write n of each line's P points: the rest stays zero.
                    let s = self.sep.as_mut().expect("separable buffers");
                    stream.memset_zeros(&mut s.a)?;
                    stream.memset_zeros(&mut s.b)?;
                    if let Some(c) = s.c.as_mut() {
                        stream.memset_zeros(c)?;
                    }
                }
                let (one, zero) = (1u32, 0u32);
                // The x2 pass slab by slab, and the x1 pass once the slabs of its own slab are
                // through (a slab's x1 lines need only its own planes; [`x1_planes`]).
                let x2_planes = self.slab_planes;
                for big in slabs(n as usize, self.x1_planes) {
                    for r in slabs_in(big.clone(), x2_planes) {
                        before(self, r.clone())?;
                        let s = self.sep.as_mut().expect("separable buffers");
                        let (a0, planes) = (r.start as u32, r.len() as u32);
                        launch!(gpu, "wp_prep_lines", grid_1d(r.len() * (n * n) as usize, 256), &g, &a0, &planes, &self.vol,
                            &self.corr, &mut s.a)?;
                        marks.mark("corr:prep")?;
                        Separable::slab_plan(&s.plan_x2, r.len())?.exec_inplace_at(&mut s.a, r.start * (n * p) as usize, false)?;
                        marks.mark("fft:lines-x2")?;
                        let lines = LinesArg(lines_x2(n, m, &big));
                        launch!(gpu, &resample, resample_cfg(planes, n, m), &g, &n, &n, &one, &p, &a0, &lines, &s.a, &mut s.b)?;
                        marks.mark("gather:resample-x2")?;
                    }
                    let s = self.sep.as_mut().expect("separable buffers");
                    Separable::slab_plan(&s.plan_x1, big.len())?.exec_inplace_at(&mut s.b, big.start * (m * p) as usize, false)?;
                    marks.mark("fft:lines-x1")?;
                    let c = match s.c.as_mut() {
                        Some(c) => c,
                        None => {
                            // C is A, through with the x2 pass: zeros where the x1 pass writes none.
                            stream.memset_zeros(&mut s.a)?;
                            &mut s.a
                        }
                    };
                    let lines = LinesArg(lines_x1(m, &big));
                    launch!(gpu, &resample, resample_cfg(m, big.len() as u32, m), &g, &m, &n, &one, &p, &zero, &lines, &s.b, c)?;
                    marks.mark("gather:resample-x1")?;
                }
                let s = self.sep.as_mut().expect("separable buffers");
                let c = s.c.as_mut().unwrap_or(&mut s.a);
                s.plan_x0.exec_inplace(c, false)?;
                marks.mark("fft:lines-x0")?;
                let lines = LinesArg(Lines::rotation(m, m));
                launch!(gpu, &resample, resample_cfg(m, m, m), &g, &m, &m, &zero, &m, &zero, &lines, &*c, &mut self.lat)?;
                marks.mark("gather:resample-x0")?;
            }
            Gather::Stencil => {
                before(self, 0..n as usize)?;
                let s = self.stencil.as_mut().expect("stencil buffers");
                stream.memset_zeros(&mut s.grid)?;
                launch!(gpu, "wp_prep_grid", grid_1d(n3, 256), &g, &self.vol, &self.corr, &mut s.grid)?;
                marks.mark("corr:prep")?;
                s.plan.exec_inplace(&mut s.grid, false)?;
                marks.mark("fft:grid-3d")?;
            }
            Gather::Lattice => {
                before(self, 0..n as usize)?;
                stream.memset_zeros(&mut self.lat)?;
                launch!(gpu, "wp_prep_lattice", grid_1d(n3, 256), &g, &self.vol, &mut self.lat)?;
                marks.mark("corr:prep")?;
                self.lattice_plan.as_ref().expect("lattice plan").exec_inplace(&mut self.lat, false)?;
                marks.mark("fft:lattice-3d")?;
            }
        }
        Ok(())
    }

    /// Box points of every scale: window x norm x spectrum (the paper's per-box-point stencil for
    /// [`Gather::Stencil`], a lattice lookup otherwise).
    pub fn box_gather(&mut self) -> Result<()> {
        let g = self.g;
        let gpu = self.gpu.clone();
        let stencil_kernel = self.q_kernel("wp_gather_stencil");
        for j in 0..self.frame.scales() {
            let count = self.frame.geom.boxes[j] as usize * self.frame.geom.box_points(j);
            let jj = j as u32;
            match self.gather {
                Gather::Stencil => {
                    let s = self.stencil.as_ref().expect("stencil buffers");
                    launch!(gpu, &stencil_kernel, grid_1d(count, 128), &g, &jj, &self.tables[j], &s.grid, &mut self.boxes[j])?;
                }
                _ => launch!(gpu, "wp_box_fill", grid_1d(count, 256), &g, &jj, &self.tables[j], &self.lat, &mut self.boxes[j])?,
            }
        }
        Ok(())
    }

    /// Batched box FFTs, one cuFFT plan per scale (`inverse`: e^{+i}, the forward transform's step).
    pub fn box_ffts(&mut self, inverse: bool) -> Result<()> {
        for (plan, buf) in self.box_plans.iter().zip(self.boxes.iter_mut()) {
            plan.exec_inplace(buf, inverse)?;
        }
        Ok(())
    }

    /// Inverse's box side: the lattice gathers window x norm x value over the covering boxes.
    pub fn combine(&mut self) -> Result<()> {
        let stream = self.gpu.stream().clone();
        let (mut ptrs, mut tptrs) = (ScalePtrs::default(), ScalePtrs::default());
        let mut records = Vec::new();
        for (j, (b, t)) in self.boxes.iter().zip(&self.tables).enumerate() {
            let (ptr, rec) = b.device_ptr(&stream);
            ptrs.p[j] = ptr;
            records.push(rec);
            let (ptr, rec) = t.device_ptr(&stream);
            tptrs.p[j] = ptr;
            records.push(rec);
        }
        let m = self.frame.m();
        let (g, pa, ta) = (self.g, PtrsArg(ptrs), PtrsArg(tptrs));
        launch!(self.gpu, "wp_combine", grid_1d(m * m * m, 128), &g, &pa, &ta, &mut self.lat)?;
        drop(records);
        Ok(())
    }

    /// Adjoint USFFT from the lattice to the volume buffer (real part).
    pub fn spectrum_adjoint(&mut self, marks: &mut Marks) -> Result<()> { self.spectrum_adjoint_slabbed(marks, &mut |_, _| Ok(())) }

    /// [`GpuEngine::spectrum_adjoint`], `after(engine, planes)` queued once the x0 `planes` of the
    /// volume buffer are written: separable, the last (x2) pass goes slab by slab ([`slabs`]);
    /// the other gathers write the whole cube at once.
    fn spectrum_adjoint_slabbed(&mut self, marks: &mut Marks, after: &mut SlabStep) -> Result<()> {
        let (n, m, p) = (self.frame.n() as u32, self.frame.m() as u32, self.frame.p() as u32);
        let g = self.g;
        let gpu = self.gpu.clone();
        let n3 = (n * n * n) as usize;
        match self.gather {
            Gather::Separable => {
                let adjoint = self.q_kernel("wp_adjoint");
                let s = self.sep.as_mut().expect("separable buffers");
                let (one, zero) = (1u32, 0u32);
                let lines = LinesArg(Lines::rotation(m, m).adjoint());
                // C is A where the x1 pass is whole: read through before the x2 pass writes A.
                let c = s.c.as_mut().unwrap_or(&mut s.a);
                launch!(gpu, &adjoint, adjoint_cfg(m, m, p), &g, &m, &m, &zero, &m, &zero, &lines, &self.lat, &mut *c)?;
                marks.mark("gather:adjoint-x0")?;
                s.plan_x0.exec_inplace(c, true)?;
                marks.mark("fft:lines-x0")?;
                // The x1 pass by its slabs ([`x1_planes`]), each followed by the x2 pass slab by
                // slab: a slab's output is done, and goes down, while the next slabs compute.
                let x2_planes = self.slab_planes;
                for big in slabs(n as usize, self.x1_planes) {
                    let s = self.sep.as_mut().expect("separable buffers");
                    let lines = LinesArg(lines_x1(m, &big).adjoint());
                    let c = s.c.as_ref().unwrap_or(&s.a);
                    launch!(gpu, &adjoint, adjoint_cfg(m, big.len() as u32, p), &g, &m, &n, &one, &p, &zero, &lines, c, &mut s.b)?;
                    marks.mark("gather:adjoint-x1")?;
                    Separable::slab_plan(&s.plan_x1, big.len())?.exec_inplace_at(&mut s.b, big.start * (m * p) as usize, true)?;
                    marks.mark("fft:lines-x1")?;
                    for r in slabs_in(big.clone(), x2_planes) {
                        let s = self.sep.as_mut().expect("separable buffers");
                        let (a0, planes) = (r.start as u32, r.len() as u32);
                        let lines = LinesArg(lines_x2(n, m, &big).adjoint());
                        launch!(gpu, &adjoint, adjoint_cfg(planes, n, p), &g, &n, &n, &one, &p, &a0, &lines, &s.b, &mut s.a)?;
                        marks.mark("gather:adjoint-x2")?;
                        Separable::slab_plan(&s.plan_x2, r.len())?.exec_inplace_at(&mut s.a, r.start * (n * p) as usize, true)?;
                        marks.mark("fft:lines-x2")?;
                        launch!(gpu, "wp_crop_lines", grid_1d(r.len() * (n * n) as usize, 256), &g, &a0, &planes, &s.a, &self.corr,
                            &mut self.vol)?;
                        marks.mark("corr:crop")?;
                        after(self, r)?;
                    }
                }
            }
            Gather::Stencil => {
                let s = self.stencil.as_mut().expect("stencil buffers");
                let cfg = LaunchConfig {
                    grid_dim: (p.div_ceil(8), p.div_ceil(8), p.div_ceil(4)),
                    block_dim: (8, 8, 4),
                    shared_mem_bytes: 0,
                };
                launch!(gpu, "wp_adjoint_stencil", cfg, &g, &s.k, &s.list_idx, &s.list_w, &self.lat, &mut s.grid)?;
                marks.mark("gather:adjoint-stencil")?;
                s.plan.exec_inplace(&mut s.grid, true)?;
                marks.mark("fft:grid-3d")?;
                launch!(gpu, "wp_crop_grid", grid_1d(n3, 256), &g, &s.grid, &self.corr, &mut self.vol)?;
                marks.mark("corr:crop")?;
                after(self, 0..n as usize)?;
            }
            Gather::Lattice => {
                self.lattice_plan.as_ref().expect("lattice plan").exec_inplace(&mut self.lat, true)?;
                marks.mark("fft:lattice-3d")?;
                launch!(gpu, "wp_crop_lattice", grid_1d(n3, 256), &g, &self.lat, &mut self.vol)?;
                marks.mark("corr:crop")?;
                after(self, 0..n as usize)?;
            }
        }
        Ok(())
    }
}

/// Resampling launch: `a` lines of a from `a_first` by `b` lines of b from [`Lines::b_first`], M
/// lattice points; block (32 over b, 8 over M).
fn resample_cfg(a: u32, b: u32, m: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (b.div_ceil(32), m.div_ceil(8), a), block_dim: (32, 8, 1), shared_mem_bytes: 0 }
}

/// Adjoint resampling launch: output lines (a, b) as [`resample_cfg`], P points each; 32 x 32
/// tiles through shared memory.
fn adjoint_cfg(a: u32, b: u32, p: u32) -> LaunchConfig {
    LaunchConfig { grid_dim: (b.div_ceil(32), p.div_ceil(32), a), block_dim: (32, 8, 1), shared_mem_bytes: 32 * 33 * 8 }
}

/// Complex32 is #[repr(C)] (re, im): the interleaved layout of the device buffers.
pub fn as_f32(c: &[Complex32]) -> &[f32] { unsafe { std::slice::from_raw_parts(c.as_ptr() as *const f32, 2 * c.len()) } }
pub fn as_f32_mut(c: &mut [Complex32]) -> &mut [f32] {
    unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr() as *mut f32, 2 * c.len()) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slab_sizes_cover_the_cube() {
        // x2 pass: 45 planes in 8 slabs of 6 (the last 3); 1 slab the whole cube; more slabs than planes: 1 each.
        assert_eq!(slab_planes(45, SLABS), 6);
        assert_eq!(slab_planes(45, 1), 45);
        assert_eq!(slab_planes(45, 100), 1);
        // x1 pass: by default the whole cube (whole x2 slabs: 48 planes cover 45); else multiples of
        // the x2 slab, as many slabs as asked where the x2 slabs allow.
        assert_eq!(X1_SLABS, 1);
        assert!(x1_planes(45, 6, X1_SLABS) >= 45 && x1_planes(45, 6, X1_SLABS) % 6 == 0);
        assert_eq!(slabs(45, x1_planes(45, 6, X1_SLABS)).count(), 1);
        assert_eq!(x1_planes(45, 6, 3), 18);
        assert_eq!(slabs(45, x1_planes(45, 6, 3)).collect::<Vec<_>>(), [0..18, 18..36, 36..45]);
        assert_eq!(x1_planes(45, 6, 45), 6);
        assert_eq!(x1_planes(256, 32, 8), 32);
    }
}
