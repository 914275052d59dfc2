//! GPU driver: cuFFT for the global and the batched box FFTs, the kernels of
//! `gpu_kernels::wavepacket::kernels` for the USFFT gathers and the windows.
//!
//! Buffers live on the device for the engine's lifetime (one allocation per frame), so repeated
//! transforms (iterative interpolation, fragments) pay only the transfers.

use std::sync::Arc;

use anyhow::{ensure, Context, Result};
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig};
use gpu_kernels::wavepacket::kernels::*;
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
impl crate::runtime::launch::KernelArg<Geometry> for &GeomArg {}

#[repr(transparent)]
#[derive(Clone, Copy)]
struct PtrsArg(ScalePtrs);
unsafe impl DeviceRepr for PtrsArg {}
impl crate::runtime::launch::KernelArg<ScalePtrs> for &PtrsArg {}

#[repr(transparent)]
#[derive(Clone, Copy)]
struct LinesArg(Lines);
// SAFETY: #[repr(C)] plain-old-data of u32 fields, the layout the kernels read.
unsafe impl DeviceRepr for LinesArg {}
impl crate::runtime::launch::KernelArg<Lines> for &LinesArg {}

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
    /// covered shell: [`super::tiling::Tiling::add_covered`]).
    pub fresh_written: bool,
    /// The box's face came down with the fresh block, the volume's earlier sum added on the
    /// device ([`super::tiling::CubeBox::face`]).
    pub face_added: bool,
}

/// A box face's way onto the device ([`GpuEngine::face_flag`]): a stream of its own that waits
/// until the host's fold has reached the face's box ([`super::tiling::Face::after`]: a
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
            launch!(gpu, WP_WINDOW_TABLE, grid_1d(count, 256), &ga, &jj, &mut t)?;
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

    /// The separable x1 pass's slabs per cube ([`GpuEngine::set_x1_slabs`]).
    pub fn x1_slabs(&self) -> usize { self.x1_slabs }

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
}

/// Complex32 is #[repr(C)] (re, im): the interleaved layout of the device buffers.
pub fn as_f32(c: &[Complex32]) -> &[f32] { unsafe { std::slice::from_raw_parts(c.as_ptr() as *const f32, 2 * c.len()) } }
pub fn as_f32_mut(c: &mut [Complex32]) -> &mut [f32] {
    unsafe { std::slice::from_raw_parts_mut(c.as_mut_ptr() as *mut f32, 2 * c.len()) }
}

mod separable;
mod transfers;
mod boxes;
mod stages;
pub use separable::*;

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
        // Two cubes per device or fewer: by slabs; more: whole (480^3 is 8 cubes of 256).
        assert_eq!((x1_slabs_for(8, 4), x1_slabs_for(8, 2), x1_slabs_for(8, 1), x1_slabs_for(32, 4)), (X1_SLABS_FEW, X1_SLABS, X1_SLABS, X1_SLABS));
        assert_eq!((x1_slabs_for(1, 1), x1_slabs_for(0, 0)), (X1_SLABS_FEW, X1_SLABS_FEW));
        assert!(x1_planes(45, 6, X1_SLABS) >= 45 && x1_planes(45, 6, X1_SLABS) % 6 == 0);
        assert_eq!(slabs(45, x1_planes(45, 6, X1_SLABS)).count(), 1);
        assert_eq!(x1_planes(45, 6, 3), 18);
        assert_eq!(slabs(45, x1_planes(45, 6, 3)).collect::<Vec<_>>(), [0..18, 18..36, 36..45]);
        assert_eq!(x1_planes(45, 6, 45), 6);
        assert_eq!(x1_planes(256, 32, 8), 32);
    }
}
