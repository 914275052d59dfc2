//! GPU driver: uploads, launches and downloads for migration and modelling.
//!
//! Memory plan: the image stays resident in tiles of whole inline rows (one tile when it fits,
//! which is every realistic case on an 80 GB GPU), and the traces of each offset class stream
//! through in chunks, each launch adding into the resident tile. Chunk and tile sizes come from
//! the free device memory (`Gpu::memory`), or from `GpuLimits` (tests force tiny ones). Uploads are
//! not overlapped with compute: a trace costs ~4 KB over PCIe (~0.2 us) against ~60 us of
//! migration into a 255 x 255 x 1024 image, so overlap would gain well under 1 %.

use std::sync::Arc;

use anyhow::{bail, ensure};
use cudarc::driver::{CudaSlice, CudaView, CudaViewMut, DeviceRepr, LaunchConfig};
use gpu_kernels::ktm::interp::{interp_shared_bytes, TT_DYNAMIC, TT_EXACT};
use gpu_kernels::ktm::kernels::{self as k, MigrationKernel, ModelKernel};
use gpu_kernels::ktm::kernels_interp as ki;
use gpu_kernels::ktm::{KtmConsts, COL_K_BARE, COL_K_CORR, COL_WARPS};

use super::prep::Prepared;
use super::{GpuLimits, Plan, Variant};
use crate::launch;
use crate::runtime::{Gpu, GpuError};

/// The launch constants as a kernel argument (passed by value, 100 bytes).
#[repr(transparent)]
#[derive(Clone, Copy)]
struct DevConsts(KtmConsts);
// SAFETY: KtmConsts is repr(C), Copy, plain f32/u32 fields: the kernel reads it as the same struct.
unsafe impl DeviceRepr for DevConsts {}
impl crate::runtime::launch::KernelArg<KtmConsts> for &DevConsts {}

/// `bare`, `corr` or `aa`: the descriptor of a kernel family's flavour.
fn flavour<T>(aa: bool, corr: bool, [bare, with_corr, with_aa]: [T; 3]) -> T {
    if aa {
        with_aa
    } else if corr {
        with_corr
    } else {
        bare
    }
}

/// The kernel of a migration variant with or without corrections / anti-aliasing, for a launch
/// with read-position offset `s_off` (samples). The v2 columns kernels need `s_off >= 0` (their
/// magic-number floor takes non-negative positions), the fast one an integer `s_off` (folded into
/// the magic constant); otherwise they fall back to v2, then v1 (same results within tolerance).
pub fn migration_kernel(variant: Variant, aa: bool, corr: bool, s_off: f32) -> MigrationKernel {
    let bare = !corr && !aa;
    let v2_ok = bare && (0.0..4_194_304.0).contains(&s_off);
    let fast_ok = v2_ok && s_off.fract() == 0.0;
    use Variant::*;
    match variant {
        Paper { .. } => flavour(aa, corr, [k::KTM_MIG_PAPER_BARE, k::KTM_MIG_PAPER_CORR, k::KTM_MIG_PAPER_AA]),
        // (v2 and fast are bare only.)
        ColumnsFast if fast_ok => k::KTM_MIG_COLUMNS_FAST_BARE,
        Columns | ColumnsFast if v2_ok => k::KTM_MIG_COLUMNS2_BARE,
        Columns | ColumnsV1 | ColumnsFast => flavour(aa, corr, [k::KTM_MIG_COLUMNS_BARE, k::KTM_MIG_COLUMNS_CORR, k::KTM_MIG_COLUMNS_AA]),
    }
}

/// The kernel of an interpolated-traveltime migration (`tt_mode` static8 or dynamic): the columns
/// layout whatever the variant (`kernels_interp.rs`). Bare static8 with read offset `s_off >= 0`
/// runs `_bare2`, which skips the clamp of its positions at 0 (they cannot be negative there) and
/// indexes a batch's traces from one pointer through the magic-number floor, which needs the
/// batch's `stride`s (pairs per padded trace) within 2^22.
pub fn interp_kernel(tt_mode: u32, aa: bool, corr: bool, s_off: f32, stride: u32) -> MigrationKernel {
    let batch = 32 / COL_K_BARE as u32;
    let v2_ok = (0.0..4_194_304.0).contains(&s_off) && stride <= (1 << 22) / batch;
    if tt_mode == TT_DYNAMIC {
        flavour(aa, corr, [ki::KTM_MIG_DYNAMIC_BARE, ki::KTM_MIG_DYNAMIC_CORR, ki::KTM_MIG_DYNAMIC_AA])
    } else if !aa && !corr && v2_ok {
        ki::KTM_MIG_STATIC8_BARE2
    } else {
        flavour(aa, corr, [ki::KTM_MIG_STATIC8_BARE, ki::KTM_MIG_STATIC8_CORR, ki::KTM_MIG_STATIC8_AA])
    }
}

/// The modelling (adjoint) kernel with or without corrections / anti-aliasing.
pub fn model_kernel(aa: bool, corr: bool) -> ModelKernel {
    flavour(aa, corr, [k::KTM_MODEL_BARE, k::KTM_MODEL_CORR, k::KTM_MODEL_AA])
}

/// Image times per lane of a columns kernel (by flavour).
fn columns_k(aa: bool, corr: bool) -> usize {
    if corr || aa {
        COL_K_CORR
    } else {
        COL_K_BARE
    }
}

/// Launches one migration of `consts.ntraces` traces into `consts.ncols` columns.
#[allow(clippy::too_many_arguments)]
pub(super) fn launch_migration(gpu: &Gpu, variant: Variant, aa: bool, corr: bool, consts: KtmConsts, geom: &CudaView<f32>,
    pairs: &CudaView<f32>, vel: &CudaView<f32>, image: &mut CudaViewMut<f32>) -> anyhow::Result<()> {
    let ncols = consts.ncols;
    let ntau = consts.ntau;
    let interp = consts.tt_mode != TT_EXACT;
    crate::ensure_param!(!interp || variant.is_columns(), "kernel",
        "the paper's kernel computes exact traveltimes only; interpolated ones run in the columns kernels (--kernel columns)");
    let kernel = if interp { interp_kernel(consts.tt_mode, aa, corr, consts.s_off, consts.stride) } else { migration_kernel(variant, aa, corr, consts.s_off) };
    let cfg = match variant {
        Variant::Columns | Variant::ColumnsV1 | Variant::ColumnsFast => {
            let k = columns_k(aa, corr) as u32;
            let (gx, gy) = (ncols.div_ceil(COL_WARPS), ntau.div_ceil(32 * k));
            // Small images: split the traces over blockIdx.z until about 8 blocks per SM exist.
            let target = 8 * gpu.info().multiprocessors.max(1) as u32;
            let splits = target.div_ceil(gx * gy).clamp(1, consts.ntraces.div_ceil(32 * COL_WARPS).max(1)).min(65535);
            LaunchConfig {
                grid_dim: (gx, gy, splits),
                block_dim: (32, COL_WARPS, 1),
                shared_mem_bytes: if interp { interp_shared_bytes(aa) } else { 32 * COL_WARPS * 16 },
            }
        }
        Variant::Paper { block_x, block_y } => {
            crate::ensure_param!(block_x.is_power_of_two() && block_x >= 32 && block_x * block_y <= 1024 && block_y >= 1, "paper-block",
                "paper kernel: block {block_x} x {block_y} must have a power-of-two x >= 32 and at most 1024 threads");
            LaunchConfig { grid_dim: (ncols, 1, 1), block_dim: (block_x, block_y, 1), shared_mem_bytes: block_x * block_y * 4 }
        }
    };
    crate::ensure_param!(cfg.grid_dim.1 <= 65535, "ntau", "{} image times exceed the kernel's grid limit", ntau);
    let c = DevConsts(consts);
    launch!(gpu, kernel, cfg, &c, geom, pairs, vel, image)?;
    Ok(())
}

/// Work-unit sizes for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub traces_per_chunk: usize,
    /// A multiple of `ny` (tiles are whole inline rows).
    pub cols_per_tile: usize,
}

/// Plans chunk and tile sizes from free device memory; `per_trace` is the device bytes a trace
/// needs, `per_col` those of an image column (image + velocity + anything else).
fn layout(gpu: &Gpu, plan: &Plan, limits: &GpuLimits, per_trace: usize, per_col: usize) -> anyhow::Result<Layout> {
    let (free, _) = gpu.memory()?;
    let budget = (free as f64 * 0.8) as usize;
    let ny = plan.grid.ny;
    let ncols = plan.grid.ncols();
    let mut cols = ncols.min(budget / 2 / per_col.max(1)) / ny * ny;
    ensure!(cols >= ny, "ktm: one inline row of the image ({} columns x {} samples) does not fit in {} MB of free GPU memory",
        ny, plan.grid.ntau, free >> 20);
    if let Some(m) = limits.max_columns_per_tile {
        cols = cols.min((m / ny).max(1) * ny);
    }
    let biggest_class = plan.class_ranges.iter().map(|r| r.len()).max().unwrap_or(1).max(1);
    let mut traces = biggest_class.min(budget.saturating_sub(cols * per_col) / per_trace.max(1));
    ensure!(traces >= 1, "ktm: no room on the GPU for even one trace of {} samples next to the image tile", plan.ns);
    if let Some(t) = limits.max_traces_per_chunk {
        traces = traces.min(t.max(1));
    }
    gpu.ensure_fits("ktm image tile and trace chunk", cols * per_col + traces * per_trace)?;
    Ok(Layout { traces_per_chunk: traces, cols_per_tile: cols })
}

fn htod(gpu: &Gpu, src: &[f32], dst: &mut CudaSlice<f32>) -> Result<(), GpuError> {
    gpu.stream()
        .memcpy_htod(src, &mut dst.slice_mut(0..src.len()))
        .map_err(GpuError::driver(format!("uploading {} floats", src.len())))
}

pub(super) fn flat4(g: &[[f32; 4]]) -> &[f32] {
    // SAFETY: [f32; 4] is four contiguous f32s.
    unsafe { std::slice::from_raw_parts(g.as_ptr() as *const f32, g.len() * 4) }
}

/// The whole image (every class) resident on one GPU, the traces of any number of calls to
/// [`Accumulator::add`] streaming through in chunks and every launch adding into it: the
/// single-device migration (one `add` of all traces) and a device's share of a multi-device one
/// (one `add` per work item; the host prepares the next item while the GPU migrates this one,
/// since launches are asynchronous). One download at the end.
pub struct Accumulator {
    gpu: Arc<Gpu>,
    variant: Variant,
    lay: Layout,
    d_geom: CudaSlice<f32>,
    d_pairs: CudaSlice<f32>,
    d_vel: CudaSlice<f32>,
    d_image: CudaSlice<f32>,
}

impl Accumulator {
    /// Allocates the zeroed image of `plan` (all classes) and trace buffers for chunks of at most
    /// `max_traces`. `None` when the whole image does not fit beside a chunk (or `limits` asks for
    /// smaller tiles): then only the tiled [`migrate`] can run it.
    pub fn new(gpu: &Arc<Gpu>, plan: &Plan, variant: Variant, limits: &GpuLimits, max_traces: usize) -> anyhow::Result<Option<Accumulator>> {
        let ntau = plan.grid.ntau;
        let ncols = plan.grid.ncols();
        let vol = plan.consts.vel_stride != 0;
        let per_col = ntau * 4 * (plan.classes() + usize::from(vol));
        let stride = plan.stride();
        let Ok(mut lay) = layout(gpu, plan, limits, 16 + stride * 8, per_col) else { return Ok(None) };
        if lay.cols_per_tile < ncols {
            return Ok(None);
        }
        lay.traces_per_chunk = lay.traces_per_chunk.min(max_traces.max(1));
        let mut d_vel = gpu.zeros::<f32>(plan.vel.len())?;
        htod(gpu, &plan.vel, &mut d_vel)?;
        Ok(Some(Accumulator {
            gpu: gpu.clone(),
            variant,
            lay,
            d_geom: gpu.zeros::<f32>(4 * lay.traces_per_chunk)?,
            d_pairs: gpu.zeros::<f32>(2 * stride * lay.traces_per_chunk)?,
            d_vel,
            d_image: gpu.zeros::<f32>(plan.classes() * ncols * ntau)?,
        }))
    }

    /// Migrates the traces of `plan` (the accumulator's plan or one restricted to a work item:
    /// same grid, classes and launch constants) into the image. Asynchronous: returns once the
    /// launches are queued (the uploads of the next call wait for them on the stream).
    pub fn add(&mut self, plan: &Plan, prep: &Prepared) -> anyhow::Result<()> { self.add_timed(plan, prep, None) }

    /// [`Accumulator::add`], synchronising after each upload and launch to add their times into
    /// `times` when given.
    fn add_timed(&mut self, plan: &Plan, prep: &Prepared, mut times: Option<&mut super::Timings>) -> anyhow::Result<()> {
        let gpu = &*self.gpu;
        let mut mark = |upload: bool, t: std::time::Instant| -> anyhow::Result<()> {
            if let Some(tm) = times.as_deref_mut() {
                gpu.synchronize()?;
                *if upload { &mut tm.upload_s } else { &mut tm.kernels_s } += t.elapsed().as_secs_f64();
            }
            Ok(())
        };
        let (ntau, ncols, stride) = (plan.grid.ntau, plan.grid.ncols(), plan.stride());
        ensure!(self.d_image.len() == plan.classes() * ncols * ntau, "ktm: a plan of another image shape for this accumulator");
        for (k, range) in plan.class_ranges.iter().enumerate() {
            let mut t0 = range.start;
            while t0 < range.end {
                let n = self.lay.traces_per_chunk.min(range.end - t0);
                let t = std::time::Instant::now();
                htod(gpu, flat4(&plan.geom[t0..t0 + n]), &mut self.d_geom)?;
                htod(gpu, prep.flat(stride, t0..t0 + n), &mut self.d_pairs)?;
                mark(true, t)?;
                let t = std::time::Instant::now();
                let consts = KtmConsts { col0: 0, ncols: ncols as u32, ntraces: n as u32, ..plan.consts };
                launch_migration(gpu, self.variant, plan.antialias, plan.corrections, consts, &self.d_geom.slice(..),
                    &self.d_pairs.slice(..), &self.d_vel.slice(..), &mut self.d_image.slice_mut(k * ncols * ntau..(k + 1) * ncols * ntau))?;
                mark(false, t)?;
                t0 += n;
            }
        }
        Ok(())
    }

    /// The resident image after the queued migrations (waited for), for a device-side sum
    /// ([`crate::exec::reduce::sum_parts`]).
    pub fn into_image(self) -> anyhow::Result<(Arc<Gpu>, CudaSlice<f32>)> {
        let t = std::time::Instant::now();
        self.gpu.synchronize()?;
        crate::runtime::phases::mark("kernels drained", t);
        Ok((self.gpu, self.d_image))
    }

    /// Downloads the image (`classes * ncols * ntau`, as `Image::data`).
    pub fn download(self) -> anyhow::Result<Vec<f32>> {
        // Synchronised first, so the scaling marks tell the kernels' drain from the copy.
        let t = std::time::Instant::now();
        self.gpu.synchronize()?;
        crate::runtime::phases::mark("kernels drained", t);
        let t = std::time::Instant::now();
        let image = self.gpu.download_prefaulted(&self.d_image)?;
        self.gpu.synchronize()?;
        crate::runtime::phases::mark("image download", t);
        Ok(image)
    }
}

/// Migration of every class (`classes * ncols * ntau` samples): the whole image resident when it
/// fits ([`Accumulator`]), else chunked and tiled as memory allows.
pub fn migrate(gpu: &Arc<Gpu>, plan: &Plan, prep: &Prepared, variant: Variant, limits: &GpuLimits) -> anyhow::Result<Vec<f32>> {
    migrate_timed(gpu, plan, prep, variant, limits, None)
}

/// [`migrate`], adding the time of the uploads, kernels and download into `times` when given
/// (the device is then synchronised between the steps: one upload and one launch per offset
/// class when the image is resident, so the pauses cost microseconds).
pub fn migrate_timed(gpu: &Arc<Gpu>, plan: &Plan, prep: &Prepared, variant: Variant, limits: &GpuLimits,
    mut times: Option<&mut super::Timings>) -> anyhow::Result<Vec<f32>> {
    let biggest_class = plan.class_ranges.iter().map(|r| r.len()).max().unwrap_or(1);
    if let Some(mut acc) = Accumulator::new(gpu, plan, variant, limits, biggest_class)? {
        acc.add_timed(plan, prep, times.as_deref_mut())?;
        let t = std::time::Instant::now();
        let image = acc.download()?;
        if let Some(tm) = times {
            tm.download_s += t.elapsed().as_secs_f64();
        }
        return Ok(image);
    }
    let t_tiled = std::time::Instant::now();
    let ntau = plan.grid.ntau;
    let ncols = plan.grid.ncols();
    let stride = plan.stride();
    let vol = plan.consts.vel_stride != 0;
    let per_col = ntau * 4 * if vol { 2 } else { 1 };
    let lay = layout(gpu, plan, limits, 16 + stride * 8, per_col)?;
    let mut d_geom = gpu.zeros::<f32>(4 * lay.traces_per_chunk)?;
    let mut d_pairs = gpu.zeros::<f32>(2 * stride * lay.traces_per_chunk)?;
    let mut d_vel = gpu.zeros::<f32>(if vol { lay.cols_per_tile * ntau } else { ntau })?;
    let mut d_image = gpu.zeros::<f32>(lay.cols_per_tile * ntau)?;
    if !vol {
        htod(gpu, &plan.vel, &mut d_vel)?;
    }
    // NaN until a tile is downloaded over it: a gap in the tiling shows.
    let mut image = vec![f32::NAN; plan.classes() * ncols * ntau];
    for (k, range) in plan.class_ranges.iter().enumerate() {
        let mut col0 = 0;
        while col0 < ncols {
            let cols = lay.cols_per_tile.min(ncols - col0);
            if vol {
                htod(gpu, &plan.vel[col0 * ntau..(col0 + cols) * ntau], &mut d_vel)?;
            }
            gpu.stream().memset_zeros(&mut d_image).map_err(GpuError::driver("clearing the image tile"))?;
            let mut t0 = range.start;
            while t0 < range.end {
                let n = lay.traces_per_chunk.min(range.end - t0);
                htod(gpu, flat4(&plan.geom[t0..t0 + n]), &mut d_geom)?;
                htod(gpu, prep.flat(stride, t0..t0 + n), &mut d_pairs)?;
                let consts = KtmConsts { col0: col0 as u32, ncols: cols as u32, ntraces: n as u32, ..plan.consts };
                launch_migration(gpu, variant, plan.antialias, plan.corrections, consts, &d_geom.slice(..), &d_pairs.slice(..),
                    &d_vel.slice(..), &mut d_image.slice_mut(0..cols * ntau))?;
                t0 += n;
            }
            let dst = &mut image[(k * ncols + col0) * ntau..(k * ncols + col0 + cols) * ntau];
            gpu.stream()
                .memcpy_dtoh(&d_image.slice(0..cols * ntau), dst)
                .map_err(GpuError::driver("downloading the image tile"))?;
            col0 += cols;
        }
    }
    gpu.synchronize()?;
    if let Some(tm) = times {
        // Tiles interleave uploads, launches and downloads: all counted as kernel time.
        tm.kernels_s += t_tiled.elapsed().as_secs_f64();
    }
    Ok(image)
}

/// One class's traces and the whole image resident on the GPU, for kernel-only timing.
pub struct Resident {
    consts: KtmConsts,
    antialias: bool,
    corrections: bool,
    geom: CudaSlice<f32>,
    pairs: CudaSlice<f32>,
    vel: CudaSlice<f32>,
    pub image: CudaSlice<f32>,
}

impl Resident {
    /// Uploads class 0 (all traces when there are no classes) and a zeroed image.
    pub fn new(gpu: &Gpu, plan: &Plan, prep: &Prepared) -> anyhow::Result<Resident> {
        let range = plan.class_ranges[0].clone();
        ensure!(!range.is_empty(), "ktm: class 0 has no traces");
        let stride = plan.stride();
        let need = plan.grid.len() * 4 + plan.vel.len() * 4 + range.len() * (16 + 8 * stride);
        gpu.ensure_fits("ktm resident benchmark data", need)?;
        Ok(Resident {
            consts: KtmConsts { ntraces: range.len() as u32, ..plan.consts },
            antialias: plan.antialias,
            corrections: plan.corrections,
            geom: gpu.upload(flat4(&plan.geom[range.clone()]))?,
            pairs: gpu.upload(prep.flat(stride, range))?,
            vel: gpu.upload(&plan.vel)?,
            image: gpu.zeros(plan.grid.len())?,
        })
    }
    /// Zeroes the image.
    pub fn clear(&mut self, gpu: &Gpu) -> anyhow::Result<()> {
        gpu.stream().memset_zeros(&mut self.image).map_err(GpuError::driver("clearing the image"))?;
        Ok(())
    }
    /// One migration launch (adds into the image).
    pub fn run(&mut self, gpu: &Gpu, variant: Variant) -> anyhow::Result<()> {
        launch_migration(gpu, variant, self.antialias, self.corrections, self.consts, &self.geom.slice(..),
            &self.pairs.slice(..), &self.vel.slice(..), &mut self.image.slice_mut(..))
    }
    pub fn download(&self, gpu: &Gpu) -> anyhow::Result<Vec<f32>> { Ok(gpu.download(&self.image)?) }
}

/// Kirchhoff modelling (adjoint): `stride + 1` padded-domain values per plan position.
pub fn model(gpu: &Arc<Gpu>, plan: &Plan, image: &[f32], limits: &GpuLimits) -> anyhow::Result<Vec<f32>> {
    let ntau = plan.grid.ntau;
    let ncols = plan.grid.ncols();
    let acc_len = plan.stride() + 1;
    let vol = plan.consts.vel_stride != 0;
    let tb = model_block_traces(gpu, plan)?;
    let per_col = ntau * 4 * if vol { 2 } else { 1 };
    let lay = layout(gpu, plan, limits, 16 + acc_len * 4, per_col)?;
    let mut d_geom = gpu.zeros::<f32>(4 * lay.traces_per_chunk)?;
    let mut d_out = gpu.zeros::<f32>(acc_len * lay.traces_per_chunk)?;
    let mut d_vel = gpu.zeros::<f32>(if vol { lay.cols_per_tile * ntau } else { ntau })?;
    let mut d_image = gpu.zeros::<f32>(lay.cols_per_tile * ntau)?;
    if !vol {
        htod(gpu, &plan.vel, &mut d_vel)?;
    }
    let mut out = vec![f32::NAN; plan.ntraces() * acc_len];
    for (k, range) in plan.class_ranges.iter().enumerate() {
        let mut t0 = range.start;
        while t0 < range.end {
            let n = lay.traces_per_chunk.min(range.end - t0);
            htod(gpu, flat4(&plan.geom[t0..t0 + n]), &mut d_geom)?;
            gpu.stream().memset_zeros(&mut d_out).map_err(GpuError::driver("clearing the modelled traces"))?;
            let mut col0 = 0;
            while col0 < ncols {
                let cols = lay.cols_per_tile.min(ncols - col0);
                if vol {
                    htod(gpu, &plan.vel[col0 * ntau..(col0 + cols) * ntau], &mut d_vel)?;
                }
                htod(gpu, &image[(k * ncols + col0) * ntau..(k * ncols + col0 + cols) * ntau], &mut d_image)?;
                let consts = KtmConsts { col0: col0 as u32, ncols: cols as u32, ntraces: n as u32, ..plan.consts };
                launch_model(gpu, plan, consts, tb, &d_geom.slice(..), &d_image.slice(..), &d_vel.slice(..), &mut d_out.slice_mut(..))?;
                col0 += cols;
            }
            gpu.stream()
                .memcpy_dtoh(&d_out.slice(0..n * acc_len), &mut out[t0 * acc_len..(t0 + n) * acc_len])
                .map_err(GpuError::driver("downloading modelled traces"))?;
            t0 += n;
        }
    }
    gpu.synchronize()?;
    Ok(out)
}

/// Traces per block of the modelling kernel (their accumulators live in shared memory).
pub(super) fn model_block_traces(gpu: &Gpu, plan: &Plan) -> anyhow::Result<usize> {
    let acc_len = plan.stride() + 1;
    let smem_max = gpu.info().max_shared_per_block_optin as usize - 1024;
    let tb = (smem_max / (acc_len * 4 + 16)).min(8);
    if tb == 0 {
        bail!("ktm modelling: traces of {} samples do not fit in shared memory ({} KB per block) on this GPU", plan.ns,
            smem_max >> 10);
    }
    Ok(tb)
}

/// Launches one modelling of `consts.ntraces` traces (`tb` per block, [`model_block_traces`]) from
/// `consts.ncols` image columns, adding into their `stride + 1` accumulators each.
#[allow(clippy::too_many_arguments)]
pub(super) fn launch_model(gpu: &Gpu, plan: &Plan, consts: KtmConsts, tb: usize, geom: &CudaView<f32>, image: &CudaView<f32>,
    vel: &CudaView<f32>, out: &mut CudaViewMut<f32>) -> anyhow::Result<()> {
    let kernel = model_kernel(plan.antialias, plan.corrections);
    let acc_len = plan.stride() + 1;
    let (n, cols) = (consts.ntraces, consts.ncols);
    let cols_per_block = 64u32.max(cols.div_ceil(65535));
    let cfg = LaunchConfig {
        grid_dim: (n.div_ceil(tb as u32), cols.div_ceil(cols_per_block), 1),
        block_dim: (32, 8, 1),
        shared_mem_bytes: (tb * 16 + 16 + tb * acc_len * 4) as u32,
    };
    let (c, tb32) = (DevConsts(consts), tb as u32);
    launch!(gpu, kernel, cfg, &c, geom, image, vel, out, &tb32, &cols_per_block)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_tables_pick_each_variant_and_flavour() {
        let mig = |v, aa, corr, s_off| migration_kernel(v, aa, corr, s_off).name();
        assert_eq!(mig(Variant::Columns, false, false, 0.0), "ktm_mig_columns2_bare");
        assert_eq!(mig(Variant::Columns, false, false, -1.0), "ktm_mig_columns_bare");
        assert_eq!(mig(Variant::ColumnsFast, false, false, 3.0), "ktm_mig_columns_fast_bare");
        assert_eq!(mig(Variant::ColumnsFast, false, false, 0.5), "ktm_mig_columns2_bare");
        assert_eq!(mig(Variant::ColumnsFast, false, true, 0.0), "ktm_mig_columns_corr");
        assert_eq!(mig(Variant::ColumnsV1, false, false, 0.0), "ktm_mig_columns_bare");
        assert_eq!(mig(Variant::Columns, true, true, 0.0), "ktm_mig_columns_aa");
        assert_eq!(mig(Variant::PAPER, false, false, 0.0), "ktm_mig_paper_bare");
        assert_eq!(mig(Variant::PAPER, false, true, 0.0), "ktm_mig_paper_corr");
        assert_eq!(mig(Variant::PAPER, true, true, 0.0), "ktm_mig_paper_aa");
        let tt = |mode, aa, corr, s_off, stride| interp_kernel(mode, aa, corr, s_off, stride).name();
        let s8 = gpu_kernels::ktm::interp::TT_STATIC8;
        assert_eq!(tt(s8, false, false, 0.0, 1000), "ktm_mig_static8_bare2");
        assert_eq!(tt(s8, false, false, -2.0, 1000), "ktm_mig_static8_bare");
        assert_eq!(tt(s8, false, false, 0.0, 1 << 22), "ktm_mig_static8_bare");
        assert_eq!(tt(s8, false, true, 0.0, 1000), "ktm_mig_static8_corr");
        assert_eq!(tt(s8, true, true, 0.0, 1000), "ktm_mig_static8_aa");
        assert_eq!(tt(TT_DYNAMIC, false, false, 0.0, 1000), "ktm_mig_dynamic_bare");
        assert_eq!(tt(TT_DYNAMIC, false, true, 0.0, 1000), "ktm_mig_dynamic_corr");
        assert_eq!(tt(TT_DYNAMIC, true, true, 0.0, 1000), "ktm_mig_dynamic_aa");
        assert_eq!(model_kernel(false, false).name(), "ktm_model_bare");
        assert_eq!(model_kernel(false, true).name(), "ktm_model_corr");
        assert_eq!(model_kernel(true, true).name(), "ktm_model_aa");
    }

    #[test]
    fn every_picked_kernel_is_in_the_ptx() {
        let ptx = crate::runtime::kernel_names();
        if ptx.is_empty() {
            println!("SKIPPED every_picked_kernel_is_in_the_ptx: built without PTX");
            return;
        }
        let mut names = Vec::new();
        for (aa, corr) in [(false, false), (false, true), (true, true)] {
            for v in [Variant::PAPER, Variant::Columns, Variant::ColumnsV1, Variant::ColumnsFast] {
                for s_off in [-1.0, 0.0, 0.5] {
                    names.push(migration_kernel(v, aa, corr, s_off).name());
                }
            }
            for mode in [gpu_kernels::ktm::interp::TT_STATIC8, TT_DYNAMIC] {
                for s_off in [-1.0, 0.0] {
                    names.push(interp_kernel(mode, aa, corr, s_off, 1000).name());
                }
            }
            names.push(model_kernel(aa, corr).name());
        }
        for name in names {
            assert!(ptx.contains(&name), "{name} is not in the PTX");
        }
    }
}
