//! The GPU driver: uploads (kernel parameters, per-column coefficients, per batch the sorted trace
//! headers, bin offsets and packed traces), one launch per batch (the first writes the image, the
//! others add), download.
//!
//! A migration streams its batches ([`Prepared::streamed`]): the host packs a batch's traces into
//! page-locked staging buffers a few MB at a time ([`TraceStaging`]), a second stream copies each
//! buffer up as soon as it is full, and the batch's kernels are queued right after its last copy,
//! so packing, copies and the previous batch's kernels overlap. (Packing every batch into fresh
//! pageable memory and uploading it before the first launch made the paper-size run 3.6x its
//! kernel time: 5.47 s against 1.50 s on the H100.)
//!
//! Register cap: ptxas gives these fully unrolled kernels 160-250 registers when unconstrained (it
//! hoists for latency), which leaves one block per SM; with a cap of 80 they need no spills at all
//! (`scripts/ptx-report.sh` with `--maxrregcount`). Rust cannot emit `.maxnreg`, so the pstm entry
//! points are copied out of the embedded PTX (they call no functions and share only the dynamic
//! shared-memory symbol) into a module of their own with the cap, JIT-compiled once per context.

use std::sync::Arc;

use anyhow::{ensure, Context};
use cudarc::driver::{sys, CudaEvent, CudaFunction, CudaSlice, CudaStream, LaunchConfig};
// (KParams crosses to the kernels by value; see `KpArg`.)
use gpu_kernels::pstm::kernels as k;
use gpu_kernels::pstm::{chunks, KParams, CHUNK_LAYERS};

use super::{count_pairs, Batch, Coefs, MigrationStats, Plan, PstmImage, PstmParams, TraveltimeMode, TraveltimeModel};
use crate::runtime::memory::PinnedBuf;
use crate::launch;
use crate::runtime::{AddressMode, Filter, Gpu, GpuError, Texture, TextureFormat};
use crate::traces::TraceSet;

/// The pstm entry points of `ptx` (all, or only `only`) as a module of their own, each capped at
/// `max_regs` registers.
pub fn pstm_ptx(ptx: &str, only: Option<&str>, max_regs: u32) -> anyhow::Result<String> {
    let what = only.map(|o| format!("`{o}`")).unwrap_or_else(|| "pstm_*".into());
    crate::runtime::ptx::entries_ptx(ptx, &what, |n| (n.starts_with("pstm_") && only.is_none_or(|o| o == n)).then_some(Some(max_regs)))
        .map_err(anyhow::Error::msg)
}

/// The kernels' first parameter, passed by value (it lands in the constant bank: no registers).
#[derive(Clone, Copy)]
#[repr(transparent)]
struct KpArg(KParams);
// SAFETY: KParams is repr(C) plain old data (u32/f32 only), the layout the kernels declare.
unsafe impl cudarc::driver::DeviceRepr for KpArg {}
impl crate::runtime::launch::KernelArg<KParams> for &KpArg {}

/// A PSTM kernel: traces from global memory (read directly or staged in shared memory) or
/// through a texture (static8 only).
#[derive(Clone, Copy, Debug)]
pub enum Kernel {
    Global(k::PstmKernel),
    Tex(k::PstmTexKernel),
}

impl Kernel {
    pub fn name(self) -> &'static str {
        match self {
            Kernel::Global(d) => d.name(),
            Kernel::Tex(d) => d.name(),
        }
    }
}

/// The kernel for a mode, model and trace path (`smem`: traces staged in shared memory; `lean`:
/// static8's lean variant of the staged kernel, `*_smem_lean2`, see `GpuTuning::lean`).
pub fn kernel_for(mode: TraveltimeMode, model: TraveltimeModel, texture: bool, smem: bool, lean: bool) -> Kernel {
    use {Kernel::*, TraveltimeMode as M, TraveltimeModel as V};
    fn pick<T>(model: TraveltimeModel, dsr: T, vti: T) -> T { if model == V::Vti { vti } else { dsr } }
    match mode {
        M::Static8 if smem && lean => Global(pick(model, k::PSTM_STATIC8_DSR_SMEM_LEAN2, k::PSTM_STATIC8_VTI_SMEM_LEAN2)),
        M::Static8 if smem => Global(pick(model, k::PSTM_STATIC8_DSR_SMEM, k::PSTM_STATIC8_VTI_SMEM)),
        M::Static8 if texture => Tex(pick(model, k::PSTM_STATIC8_DSR_TEX, k::PSTM_STATIC8_VTI_TEX)),
        M::Static8 => Global(pick(model, k::PSTM_STATIC8_DSR, k::PSTM_STATIC8_VTI)),
        M::Exact if smem => Global(pick(model, k::PSTM_EXACT_DSR_SMEM, k::PSTM_EXACT_VTI_SMEM)),
        M::Exact => Global(pick(model, k::PSTM_EXACT_DSR, k::PSTM_EXACT_VTI)),
        M::Dynamic { .. } if smem => Global(pick(model, k::PSTM_DYNAMIC_DSR_SMEM, k::PSTM_DYNAMIC_VTI_SMEM)),
        M::Dynamic { .. } => Global(pick(model, k::PSTM_DYNAMIC_DSR, k::PSTM_DYNAMIC_VTI)),
    }
}

enum DevTraces {
    Global(CudaSlice<f32>),
    Tex(Texture),
}

struct DevBatch {
    headers: CudaSlice<f32>,
    bin_start: CudaSlice<u32>,
    traces: DevTraces,
}

/// Everything a migration needs on the device; [`Prepared::run`] launches it (kernel-only timing).
pub struct Prepared {
    gpu: Arc<Gpu>,
    func: CudaFunction,
    kernel: Kernel,
    cfg: LaunchConfig,
    params: KpArg,
    iv2: CudaSlice<f32>,
    eta: CudaSlice<f32>,
    batches: Vec<DevBatch>,
    image: CudaSlice<f32>,
    /// Every batch adds into the image (a device's image over several work items); otherwise the
    /// first batch overwrites it.
    accumulate: bool,
    /// Whether the traces are in textures.
    pub texture: bool,
    pub nx: usize,
    pub ny: usize,
    pub noff: usize,
    pub nz: usize,
    pub nz_pad: usize,
}

/// Bytes of shared memory the `_smem` kernels add after the per-warp tables: the union-mask slots
/// (2 x 32 u32), per warp its walk state (64 B) and candidate distances (256 B), and two
/// 16-byte-aligned packed traces (the kernels' `Layout`).
pub fn smem_stage_bytes(packed_len: u32, warps: u32) -> u32 { 256 + 320 * warps + 2 * (packed_len * 8).div_ceil(16) * 16 }

/// Bytes of shared memory per warp (the lean static8 kernels double-buffer the table).
fn table_bytes(mode: TraveltimeMode, lean: bool) -> u32 {
    match mode {
        TraveltimeMode::Exact => 0,
        TraveltimeMode::Static8 => if lean { 2 * 16 * 16 } else { 16 * 16 },
        TraveltimeMode::Dynamic { .. } => CHUNK_LAYERS * 4 * 16,
    }
}

/// Page-locked buffers that a batch's packed traces pass through on their way to the device: the
/// host packs rows into one buffer while the copies of the others run on the upload stream. One
/// per device, reused by every batch and work item (page-locking memory costs more than using it).
pub struct TraceStaging {
    gpu: Arc<Gpu>,
    /// Each buffer with the event recorded after its last copy (the host waits for it before
    /// packing into the buffer again).
    slots: Vec<(PinnedBuf<f32>, CudaEvent)>,
    /// Packed traces per buffer.
    rows: usize,
    packed_len: usize,
    next: usize,
}

/// Staging buffers per device and their size: three of ~16 MB keep the copy engine busy while
/// the host packs (a packed paper trace is 12 KB).
const STAGING_SLOTS: usize = 3;
const STAGING_BYTES: usize = 16 << 20;

impl TraceStaging {
    /// Staging for traces of `packed_len` packed entries ([`Plan::packed_len`]).
    pub fn new(gpu: &Arc<Gpu>, packed_len: usize) -> anyhow::Result<TraceStaging> {
        Self::with_rows(gpu, packed_len, STAGING_BYTES / (packed_len * 8).max(1))
    }

    /// [`TraceStaging::new`] with `rows` packed traces per buffer (tests: a batch in many pieces).
    pub fn with_rows(gpu: &Arc<Gpu>, packed_len: usize, rows: usize) -> anyhow::Result<TraceStaging> {
        let rows = rows.max(1);
        let slots = (0..STAGING_SLOTS).map(|_| -> anyhow::Result<_> {
            let buf = PinnedBuf::new(gpu, rows * packed_len * 2).context("page-locked staging for the PSTM traces")?;
            let done = gpu.context().new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))
                .map_err(GpuError::driver("creating a staging event"))?;
            Ok((buf, done))
        }).collect::<anyhow::Result<Vec<_>>>()?;
        Ok(TraceStaging { gpu: gpu.clone(), slots, rows, packed_len, next: 0 })
    }

    /// The stream the copies run on: the pool's second (the kernels run on the first).
    fn stream(&self) -> &Arc<CudaStream> {
        let s = self.gpu.streams();
        &s[1.min(s.len() - 1)]
    }

    /// Packs the traces `index` of `traces` and copies them into `dst` (`index.len()` packed
    /// traces), asynchronously on the upload stream; `dst` records the copies, so a kernel that
    /// reads it waits for them.
    fn upload(&mut self, traces: &TraceSet, index: &[u32], dst: &mut CudaSlice<f32>) -> anyhow::Result<()> {
        let (plen, stream) = (self.packed_len, self.stream().clone());
        ensure!(dst.len() >= index.len() * plen * 2, "a device buffer of {} floats for {} packed traces", dst.len(), index.len());
        for (c, rows) in index.chunks(self.rows).enumerate() {
            let slot = self.next;
            self.next = (slot + 1) % self.slots.len();
            let (buf, done) = &mut self.slots[slot];
            // Its previous copy has read it.
            done.synchronize().map_err(GpuError::driver("waiting for a staging copy"))?;
            let n = rows.len() * plen * 2;
            let host = &mut buf.as_mut_slice()?[..n];
            super::cpu::pack_rows(traces, rows, plen, host.as_chunks_mut::<2>().0);
            let off = c * self.rows * plen * 2;
            // Asynchronous (page-locked source): `done` keeps the buffer from being packed into
            // again before the copy has read it.
            stream.memcpy_htod(&*host, &mut dst.slice_mut(off..off + n)).map_err(GpuError::driver("copying packed traces up"))?;
            done.record(&stream).map_err(GpuError::driver("recording a staging event"))?;
        }
        Ok(())
    }

    /// Packed entries per trace this staging is for.
    pub fn packed_len(&self) -> usize { self.packed_len }

    /// Waits until every copy queued so far has finished.
    pub fn wait(&self) -> anyhow::Result<()> {
        for (_, done) in &self.slots {
            done.synchronize().map_err(GpuError::driver("waiting for a staging copy"))?;
        }
        Ok(())
    }
}

impl Drop for TraceStaging {
    fn drop(&mut self) {
        // No copy may still read a buffer that is freed (an error here has surfaced already).
        let _ = self.wait();
    }
}

/// What a device keeps from one work item to the next ([`Prepared::into_resident`]): its image
/// and the per-column coefficients, which depend on the parameters alone (uploaded once).
pub struct Resident {
    pub image: CudaSlice<f32>,
    coefs: Option<(CudaSlice<f32>, CudaSlice<f32>)>,
}

impl Resident {
    /// A device image (zeroed) with no coefficients yet.
    pub fn new(image: CudaSlice<f32>) -> Resident { Resident { image, coefs: None } }
}

impl Prepared {
    /// Packs and uploads everything (no launch: [`Prepared::run`] then times the kernels alone).
    /// `poison` fills the image with NaN first (tests: every sample must then be written by the
    /// kernels).
    pub fn new(gpu: &Arc<Gpu>, traces: &TraceSet, p: &PstmParams, plan: &Plan, mode: TraveltimeMode,
        model: TraveltimeModel, poison: bool) -> anyhow::Result<Prepared> {
        Self::with_image(gpu, traces, p, plan, mode, model, if poison { Image::Poisoned } else { Image::Zeroed })
    }

    /// [`Prepared::new`] with the image given: a fresh one (zeroed or poisoned), or a device's
    /// resident image that every batch adds into ([`Image::AddInto`], from
    /// [`Prepared::into_resident`] of the previous work item on this device).
    pub fn with_image(gpu: &Arc<Gpu>, traces: &TraceSet, p: &PstmParams, plan: &Plan, mode: TraveltimeMode,
        model: TraveltimeModel, image: Image) -> anyhow::Result<Prepared> {
        let mut prep = Self::prepare(gpu, p, plan, mode, model, image)?;
        let mut staging = TraceStaging::new(gpu, plan.packed_len())?;
        for b in &plan.batches {
            prep.push_batch(traces, b, plan.packed_len(), &mut staging)?;
        }
        staging.wait()?;
        Ok(prep)
    }

    /// The migration, streamed: each batch's traces are packed and copied up through `staging`
    /// and its kernels queued right after, so the host packs batch k + 1 while the GPU migrates
    /// batch k. Returns with the kernels queued (a download or [`Prepared::into_resident`]
    /// follows).
    #[allow(clippy::too_many_arguments)]
    pub fn streamed(gpu: &Arc<Gpu>, traces: &TraceSet, p: &PstmParams, plan: &Plan, mode: TraveltimeMode,
        model: TraveltimeModel, image: Image, staging: &mut TraceStaging) -> anyhow::Result<Prepared> {
        ensure!(staging.packed_len == plan.packed_len(), "staging for traces of {} packed entries, not {}", staging.packed_len,
            plan.packed_len());
        let mut prep = Self::prepare(gpu, p, plan, mode, model, image)?;
        for (i, b) in plan.batches.iter().enumerate() {
            let t = std::time::Instant::now();
            prep.push_batch(traces, b, plan.packed_len(), staging)?;
            prep.launch(i)?;
            crate::runtime::phases::mark("batch packed and queued (each)", t);
        }
        Ok(prep)
    }

    /// Everything but the batches: launch shape, coefficients (uploaded, or the resident ones),
    /// the image; checks that the whole migration fits on the device.
    fn prepare(gpu: &Arc<Gpu>, p: &PstmParams, plan: &Plan, mode: TraveltimeMode, model: TraveltimeModel, image: Image)
        -> anyhow::Result<Prepared> {
        let kp = &plan.kp;
        let texture = p.gpu.texture && mode == TraveltimeMode::Static8;
        let (kernel, func, cfg) = launch_shape(gpu, p, kp.nz_pad, kp.packed_len, mode, model)?;
        let step = if mode == TraveltimeMode::Static8 { 8 } else { 1 };
        let iv2_len = Coefs::len(p, kp, step);
        let eta_len = if model == TraveltimeModel::Vti { iv2_len } else { 1 };
        let image_len = p.columns() * p.noff * kp.nz_pad as usize;
        let plen = plan.packed_len();
        let trace_bytes: usize = plan.batches.iter().map(|b| b.index.len() * plen * 8 + b.headers.len() * 16).sum();
        let (fresh_image, fresh_coefs) = match &image {
            Image::AddInto(r) => (0, r.coefs.as_ref().is_none_or(|(v, e)| v.len() != iv2_len || e.len() != eta_len)),
            _ => (image_len * 4, true),
        };
        let coef_bytes = if fresh_coefs { (iv2_len + eta_len) * 4 } else { 0 };
        gpu.ensure_fits("the PSTM image, coefficients and traces", fresh_image + coef_bytes + trace_bytes)?;
        let (image, accumulate, resident_coefs) = match image {
            Image::Poisoned => (gpu.poisoned(image_len)?, false, None),
            Image::Zeroed => (gpu.zeros(image_len)?, false, None),
            Image::AddInto(r) => {
                ensure!(r.image.len() == image_len, "a device image of {} samples for a PSTM image of {image_len}", r.image.len());
                (r.image, true, r.coefs.filter(|_| !fresh_coefs))
            }
        };
        let (iv2, eta) = match resident_coefs {
            Some(c) => c,
            None => {
                let coefs = Coefs::new(p, kp, step);
                (gpu.upload(&coefs.iv2)?, gpu.upload(&coefs.eta[..eta_len])?)
            }
        };
        Ok(Prepared {
            gpu: gpu.clone(),
            func,
            kernel,
            cfg,
            params: KpArg(KParams { batched_units: p.gpu.batched_units as u32, lockstep: p.gpu.lockstep as u32,
                tile_x: p.gpu.tile_x, ..*kp }),
            iv2,
            eta,
            batches: Vec::with_capacity(plan.batches.len()),
            image,
            accumulate,
            texture,
            nx: p.nx,
            ny: p.ny,
            noff: p.noff,
            nz: p.nz,
            nz_pad: kp.nz_pad as usize,
        })
    }

    /// Uploads batch `b` (its headers and bin offsets on the upload stream, its packed traces
    /// through `staging`; a texture's synchronously) as the next of [`Prepared::batches`].
    fn push_batch(&mut self, traces: &TraceSet, b: &Batch, plen: usize, staging: &mut TraceStaging) -> anyhow::Result<()> {
        let gpu = &self.gpu;
        let dev_traces = if self.texture {
            let packed = super::cpu::pack_batch(traces, b, plen);
            let rows = b.index.len().max(1);
            let data = if packed.is_empty() { vec![[0.0f32; 2]; plen] } else { packed };
            DevTraces::Tex(Texture::new(gpu, data.as_flattened(), (plen, rows, 1), TextureFormat::Float2, Filter::Point,
                AddressMode::Clamp)?)
        } else if b.index.is_empty() {
            DevTraces::Global(gpu.zeros(2)?)
        } else {
            // Every element is written by the copies (the rows cover it).
            let n = b.index.len() * plen * 2;
            let mut dst = unsafe { staging.stream().alloc::<f32>(n) }.map_err(GpuError::driver(format!("allocating {n} floats of packed traces")))?;
            staging.upload(traces, &b.index, &mut dst)?;
            DevTraces::Global(dst)
        };
        let up = staging.stream();
        let upload = |v: &[f32]| up.clone_htod(v).map_err(GpuError::driver("uploading batch headers"));
        let upload_u32 = |v: &[u32]| up.clone_htod(v).map_err(GpuError::driver("uploading batch bins"));
        let headers = if b.headers.is_empty() { upload(&[0.0; 4])? } else { upload(b.headers.as_flattened())? };
        self.batches.push(DevBatch { headers, bin_start: upload_u32(&b.bin_start)?, traces: dev_traces });
        Ok(())
    }

    /// Switches to another launch shape / register cap (same device data; not to or from textures).
    pub fn retune(&mut self, p: &PstmParams, mode: TraveltimeMode, model: TraveltimeModel) -> anyhow::Result<()> {
        ensure!(!self.texture && !(p.gpu.texture && mode == TraveltimeMode::Static8), "retune cannot change the trace path");
        let (kernel, func, cfg) = launch_shape(&self.gpu, p, self.nz_pad as u32, self.params.0.packed_len, mode, model)?;
        (self.kernel, self.func, self.cfg) = (kernel, func, cfg);
        self.params.0.batched_units = p.gpu.batched_units as u32;
        self.params.0.lockstep = p.gpu.lockstep as u32;
        self.params.0.tile_x = p.gpu.tile_x;
        Ok(())
    }

    /// Launches every batch (asynchronously on the default stream).
    pub fn run(&mut self) -> Result<(), GpuError> {
        for i in 0..self.batches.len() {
            self.launch(i)?;
        }
        Ok(())
    }

    /// Launches batch `i` (it waits for the batch's copies: cudarc orders a read after the last
    /// write of each buffer).
    fn launch(&mut self, i: usize) -> Result<(), GpuError> {
        let first = (i == 0 && !self.accumulate) as u32;
        let b = &self.batches[i];
        let (gpu, func, params, cfg) = (&self.gpu, &self.func, &self.params, self.cfg);
        match (&b.traces, self.kernel) {
            (DevTraces::Global(s), Kernel::Global(d)) => launch!(gpu, d => func, cfg, params, s, &b.headers, &b.bin_start,
                &self.iv2, &self.eta, &mut self.image, &first),
            (DevTraces::Tex(t), Kernel::Tex(d)) => {
                let handle = t.handle();
                launch!(gpu, d => func, cfg, params, &handle, &b.headers, &b.bin_start, &self.iv2, &self.eta, &mut self.image,
                    &first)
            }
            _ => Err(GpuError::BadLaunch { kernel: self.kernel.name().into(),
                why: "the traces are not stored the way the kernel reads them (texture or global memory)".into() }),
        }
    }

    /// The kernel's name and launch shape.
    pub fn describe(&self) -> String {
        format!("{} grid {:?} block {:?} {} B shared, {} batch(es)", self.kernel.name(), self.cfg.grid_dim, self.cfg.block_dim,
            self.cfg.shared_mem_bytes, self.batches.len())
    }

    /// Downloads the image (synchronises).
    pub fn download(&self) -> Result<Vec<f32>, GpuError> { self.gpu.download_prefaulted(&self.image) }

    /// The device image and coefficients, for the next work item to add into (the traces are
    /// freed once their kernels are done).
    pub fn into_resident(self) -> Resident { Resident { image: self.image, coefs: Some((self.iv2, self.eta)) } }
}

/// The image a [`Prepared`] migrates into.
pub enum Image {
    Zeroed,
    /// NaN first (tests: every sample must then be written by the kernels).
    Poisoned,
    /// A device's image (zeroed at its start) that every batch adds into, with the coefficients
    /// of its earlier work items.
    AddInto(Resident),
}

/// Kernel, function (from the capped module) and launch configuration.
fn launch_shape(gpu: &Arc<Gpu>, p: &PstmParams, nz_pad: u32, packed_len: u32, mode: TraveltimeMode,
    model: TraveltimeModel) -> anyhow::Result<(Kernel, CudaFunction, LaunchConfig)> {
    let max_shared = gpu.info().max_shared_per_block_optin as u32;
    let mut t = p.gpu;
    if t.smem && t.warps * table_bytes(mode, t.smem && t.lean) + smem_stage_bytes(packed_len, t.warps) > max_shared {
        // Traces too long to stage two per block: the read-only-cache kernels, same walk order
        // and arithmetic (so the image is the same).
        t.smem = false;
    }
    let t = &t;
    // (`PstmParams::validate` says so first; the staging offsets of the lean kernels assume it.)
    crate::ensure_param!(!(t.smem && t.lean && mode == TraveltimeMode::Static8) || t.warps == gpu_kernels::pstm::LEAN_WARPS, "warps",
        "GPU tuning `lean` needs {} warps per block (got {})", gpu_kernels::pstm::LEAN_WARPS, t.warps);
    let kernel = kernel_for(mode, model, t.texture, t.smem, t.lean);
    let name = kernel.name();
    // The kernel under the tuning's cap, in a module of its own for `gpu`'s context, JIT-compiled
    // once per process (and cached by the driver across runs).
    let func = crate::runtime::ptx::capped_function(gpu, name, t.max_regs)?;
    let tile_x = t.tile_x.max(1);
    crate::ensure_param!(t.warps.is_multiple_of(tile_x), "warps", "GPU tile of {tile_x} columns along x does not divide the {} warps per block", t.warps);
    let grid_x = p.nx.div_ceil(tile_x as usize);
    let grid_y = p.ny.div_ceil((t.warps / tile_x).max(1) as usize);
    let grid_z = chunks(nz_pad) as usize * p.noff;
    crate::ensure_param!(grid_y <= 65535, "ny", "ny = {} needs {grid_y} blocks along y (at most 65535): use more warps per block", p.ny);
    crate::ensure_param!(grid_z <= 65535, "noff", "{} offset classes x {} time chunks exceed the 65535 grid limit", p.noff, chunks(nz_pad));
    crate::ensure_param!(grid_x <= 65535 * 32768, "nx", "nx = {} too large", p.nx);
    let cfg = LaunchConfig {
        grid_dim: (grid_x as u32, grid_y as u32, grid_z as u32),
        block_dim: (32, t.warps, 1),
        shared_mem_bytes: t.warps * table_bytes(mode, t.smem && t.lean) + if t.smem { smem_stage_bytes(packed_len, t.warps) } else { 0 },
    };
    crate::ensure_param!(cfg.shared_mem_bytes <= max_shared, "warps",
        "{} warps per block{} need {} B of shared memory ({max_shared} B allowed){}", t.warps,
        if t.smem { " and two staged traces" } else { "" }, cfg.shared_mem_bytes,
        if t.smem { ": traces too long for the shared-memory path, turn it off" } else { "" });
    if cfg.shared_mem_bytes > 48 * 1024 {
        func.set_attribute(cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            cfg.shared_mem_bytes as i32)
            .map_err(GpuError::driver(format!("raising the shared-memory limit of `{name}`")))?;
    }
    Ok((kernel, func, cfg))
}

/// The GPU migration: prepare, run, download.
pub fn migrate(gpu: &Arc<Gpu>, traces: &TraceSet, p: &PstmParams, plan: &Plan, mode: TraveltimeMode,
    model: TraveltimeModel) -> anyhow::Result<PstmImage> {
    use crate::runtime::phases::mark;
    let t = std::time::Instant::now();
    let mut staging = TraceStaging::new(gpu, plan.packed_len())?;
    mark("staging made at", t);
    let prep = Prepared::streamed(gpu, traces, p, plan, mode, model, Image::Zeroed, &mut staging)?;
    mark("batches queued at", t);
    // The counts on the host while the kernels run.
    let (pairs, contributions) = count_pairs(p, plan);
    mark("pair count done at", t);
    gpu.synchronize()?;
    mark("kernels done at", t);
    let data = prep.download()?;
    mark("image down at", t);
    let nz_pad = prep.nz_pad;
    drop((prep, staging));
    mark("device memory freed at", t);
    Ok(PstmImage {
        nx: p.nx,
        ny: p.ny,
        noff: p.noff,
        nz: p.nz,
        nz_pad,
        data,
        stats: MigrationStats { traces_used: plan.traces_used, pairs, contributions, exact_evals: 0 },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pstm_kernels_move_to_their_own_module() {
        if crate::runtime::PTX.trim().is_empty() {
            return;
        }
        let m = pstm_ptx(crate::runtime::PTX, None, 80).unwrap();
        if let Ok(path) = std::env::var("SEISGPU_PSTM_DUMP_PTX") {
            std::fs::write(path, &m).unwrap(); // for `ptxas -v` by hand (a diagnostic, docs/DEVELOPING.md)
        }
        for k in ["pstm_exact_dsr", "pstm_static8_vti", "pstm_static8_dsr_tex", "pstm_dynamic_vti"] {
            assert!(m.contains(&format!(".visible .entry {k}(")), "{k}");
        }
        assert_eq!(m.matches(".maxnreg 80").count(), m.matches(".visible .entry").count());
        assert!(!m.contains("saxpy") && m.contains(".target") && m.contains("gpu_launch_sized_workgroup_mem"));
        assert!(!m.contains("call"));
        let one = pstm_ptx(crate::runtime::PTX, Some("pstm_static8_vti"), 96).unwrap();
        assert_eq!(one.matches(".visible .entry").count(), 1);
        assert!(one.contains(".visible .entry pstm_static8_vti(\n") && one.contains(".maxnreg 96"));
        assert!(pstm_ptx(crate::runtime::PTX, Some("pstm_nope"), 96).is_err());
    }
}
