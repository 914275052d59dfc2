//! GPU driver: everything stays on the device across depths (paper section 38.4, Listing 38-3):
//! the shot's traces go up once (FFT by cuFFT there), the slowness window once, and only the image
//! comes back. Frequencies run `planes` at a time (one launch covers all of them and both waves).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::Context;
use cudarc::driver::{CudaFunction, CudaSlice, CudaView, DeviceRepr, LaunchConfig};

use gpu_kernels::srm::cluster::{SM90_SRM_STEP_CLUSTER, SM90_SRM_STEP_CLUSTERD};
use gpu_kernels::srm::kernels::{SRM_IMAGE, SRM_INJECT_RECEIVERS, SRM_INJECT_SOURCE, SRM_REAL_TO_COMPLEX, SRM_STEP_PAPER, SRM_STEP_PAPERQ};
use gpu_kernels::srm::{cluster_shared_bytes, cluster_threads, clusterd_shared_bytes, CLUSTERD_MAX_ROWS, offset_entry, pair_entry, RowMap, Stencil, CLUSTER_MAX, PAPER_SHARED_BYTES, PAPER_TH, PAPER_TW, RADIUS};

use super::design::Operator;
use super::{cpu, FreqPlan, GpuOptions, GpuVariant, Image, Shot, ShotGrid, SrmParams, Taper, VelocityModel};
use crate::{launch, launch_cluster};
use crate::runtime::cluster::{check_cluster_launch, max_active_clusters, max_threads, sm90_function,
    ClusterConfig};
use crate::runtime::fft::FftPlan;
use crate::runtime::ptx::listed_capped_kernel;
pub use crate::runtime::ptx::capped_ptx;
use crate::runtime::{grid_1d, Gpu, GpuError};
use crate::traces::TraceSet;

type GpuResult<T> = Result<T, GpuError>;

/// The stencil as a kernel argument (by value: it lands in the parameter constant bank).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct StencilArg(pub Stencil);
// SAFETY: #[repr(C)] plain f32 fields, the layout the kernels declare.
unsafe impl DeviceRepr for StencilArg {}
impl crate::runtime::launch::KernelArg<Stencil> for &StencilArg {}

/// A plane's row map on the device (the kernels read `*const RowMap`).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default)]
pub struct RowMapArg(pub RowMap);
// SAFETY: #[repr(C)] two f32 fields, the layout the kernels declare; all-zero bits are a valid value.
unsafe impl DeviceRepr for RowMapArg {}
unsafe impl cudarc::driver::ValidAsZeroBits for RowMapArg {}
impl crate::runtime::launch::KernelArg<*const RowMap> for &CudaSlice<RowMapArg> {}

fn drv(what: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> GpuError { GpuError::driver(what) }

/// The operator's coefficient table and stencil on the device.
pub struct DeviceOperator {
    pub table: CudaSlice<f32>,
    /// The table as (a_n[i], a_n[i + 1]) pairs, coefficient-major (`gpu_kernels::srm::pair_entry`):
    /// one 16-byte load per lookup for `paperq56` and `cluster`.
    pub pairs: CudaSlice<f32>,
    /// The table as (a_n[i] - d, d) offsets, d = a_n[i + 1] - a_n[i], coefficient-major
    /// (`gpu_kernels::srm::offset_entry`): one fused multiply-add per component for `clusterd`.
    pub offsets: CudaSlice<f32>,
    pub stencil: StencilArg,
    pub ncoef: u32,
    pub rows: u32,
    pub degree: u32,
}

impl DeviceOperator {
    pub fn new(gpu: &Gpu, op: &Operator) -> GpuResult<Self> {
        let (nc, rows) = (op.ncoef(), op.rows);
        let pairs: Vec<f32> = (0..nc).flat_map(|n| (0..rows - 1).flat_map(move |i| pair_entry(&op.table, nc, i, n))).collect();
        let offsets: Vec<f32> = (0..nc).flat_map(|n| (0..rows).flat_map(move |i| offset_entry(&op.table, nc, rows, i, n))).collect();
        Ok(DeviceOperator {
            table: gpu.upload(&op.table)?,
            pairs: gpu.upload(&pairs)?,
            offsets: gpu.upload(&offsets)?,
            stencil: StencilArg(op.stencil),
            ncoef: op.ncoef() as u32,
            rows: op.rows as u32,
            degree: op.params.degree as u32,
        })
    }
}

/// Wavefield buffers for `stride` planes of both waves on an nx x ny grid: the current wavefield
/// (`x`, also T_0), the Chebyshev terms and accumulator, the planes' row maps and the edge taper.
pub struct Planes {
    pub nx: usize,
    pub ny: usize,
    pub stride: usize,
    pub x: CudaSlice<f32>,
    pub y: CudaSlice<f32>,
    pub acc: CudaSlice<f32>,
    pub maps: CudaSlice<RowMapArg>,
    pub taper_x: CudaSlice<f32>,
    pub taper_y: CudaSlice<f32>,
    /// CTAs per cluster and table rows of the last `cluster` step (for [`Planes::bytes_per_step`]).
    cluster_ctas: u32,
    table_rows: u32,
}

impl Planes {
    pub fn new(gpu: &Gpu, nx: usize, ny: usize, stride: usize, taper: &Taper) -> GpuResult<Self> {
        let len = 2 * 2 * stride * nx * ny;
        gpu.ensure_fits("srm wavefield buffers", 3 * len * 4)?;
        Ok(Planes {
            nx, ny, stride,
            x: gpu.zeros(len)?, y: gpu.zeros(len)?, acc: gpu.zeros(len)?,
            maps: gpu.zeros(stride)?,
            taper_x: gpu.upload(&taper.x)?, taper_y: gpu.upload(&taper.y)?,
            cluster_ctas: 0, table_rows: 0,
        })
    }

    /// Floats of one wave's `stride` planes; wave w plane p starts at float 2 (w stride + p) nx ny.
    pub fn nxy(&self) -> usize { self.nx * self.ny }

    pub fn set_maps(&mut self, gpu: &Gpu, maps: &[RowMap]) -> GpuResult<()> {
        let maps: Vec<RowMapArg> = maps.iter().map(|&m| RowMapArg(m)).collect();
        gpu.stream().memcpy_htod(&maps, &mut self.maps).map_err(drv("uploading row maps"))
    }

    /// One depth step of the first `count` planes of both waves on slowness slice `slow`; the
    /// result is in `x`.
    pub fn step(&mut self, gpu: &Gpu, dop: &DeviceOperator, slow: &CudaView<f32>, count: usize, variant: GpuVariant)
        -> GpuResult<()> {
        let (nx, ny, stride, cnt) = (self.nx as u32, self.ny as u32, self.stride as u32, count as u32);
        let (st, ncoef, rows, degree) = (dop.stencil, dop.ncoef, dop.rows, dop.degree);
        match variant {
            GpuVariant::Auto | GpuVariant::Best => {
                return Err(GpuError::BadLaunch { kernel: "srm_step".into(),
                    why: format!("resolve `{variant}` first (`autotune`, `resolve_best`)") });
            }
            GpuVariant::Paper => {
                let cfg = LaunchConfig {
                    grid_dim: (nx.div_ceil(PAPER_TW), ny.div_ceil(PAPER_TH), cnt),
                    block_dim: (48, 8, 1),
                    shared_mem_bytes: PAPER_SHARED_BYTES,
                };
                for n in 1..=degree {
                    let Planes { x, y, acc, maps, taper_x, taper_y, .. } = self;
                    let (tin, tio) = if n % 2 == 1 { (&*x, y) } else { (&*y, x) };
                    launch!(gpu, SRM_STEP_PAPER, cfg, &st, &nx, &ny, &stride, &n, &degree, tin, tio, acc, slow,
                        &dop.table, &ncoef, &rows, &*maps, &*taper_x, &*taper_y)?;
                }
                if degree % 2 == 1 {
                    std::mem::swap(&mut self.x, &mut self.y);
                }
            }
            GpuVariant::PaperPairCapped => {
                let cfg = LaunchConfig {
                    grid_dim: (nx.div_ceil(PAPER_TW), ny.div_ceil(PAPER_TH), cnt),
                    block_dim: (48, 8, 1),
                    shared_mem_bytes: PAPER_SHARED_BYTES,
                };
                let func = listed_capped_kernel(gpu, SRM_STEP_PAPERQ.name(), &cfg)?;
                for n in 1..=degree {
                    let Planes { x, y, acc, maps, taper_x, taper_y, .. } = self;
                    let (tin, tio) = if n % 2 == 1 { (&*x, y) } else { (&*y, x) };
                    launch!(gpu, SRM_STEP_PAPERQ => &func, cfg, &st, &nx, &ny, &stride, &n, &degree, tin, tio, acc, slow,
                        &dop.pairs, &rows, &*maps, &*taper_x, &*taper_y)?;
                }
                if degree % 2 == 1 {
                    std::mem::swap(&mut self.x, &mut self.y);
                }
            }
            GpuVariant::Cluster | GpuVariant::ClusterD => {
                // One launch per depth step: every Chebyshev step on chip; W' over W in `x`.
                let kernel = ClusterKernel::of(variant).expect("a cluster variant");
                let max_rows = kernel.max_table_rows();
                if rows > max_rows {
                    return Err(GpuError::BadLaunch { kernel: kernel.name().into(),
                        why: format!("the coefficient table has {rows} rows, the kernel indexes at most {max_rows}") });
                }
                let (func, cfg, shape) = cluster_plan_for(gpu, kernel, nx, ny, cnt)?;
                self.cluster_ctas = shape.ctas;
                self.table_rows = rows;
                let Planes { x, maps, taper_x, taper_y, .. } = self;
                match kernel {
                    ClusterKernel::Cluster => launch_cluster!(gpu, SM90_SRM_STEP_CLUSTER => &func, &cfg, value &st, value &nx,
                        value &ny, value &stride, value &cnt, value &shape.rows, value &degree, buf_mut x, view slow,
                        buf &dop.pairs, value &rows, buf &*maps, buf &*taper_x, buf &*taper_y)?,
                    // The offset table, and how far ahead to prefetch (clusters resident at once).
                    ClusterKernel::ClusterD => launch_cluster!(gpu, SM90_SRM_STEP_CLUSTERD => &func, &cfg, value &st, value &nx,
                        value &ny, value &stride, value &cnt, value &shape.rows, value &degree, buf_mut x, view slow,
                        buf &dop.offsets, value &rows, buf &*maps, buf &*taper_x, buf &*taper_y, value &shape.resident)?,
                }
            }
        }
        Ok(())
    }

    /// Bytes each variant moves through device memory per depth step for `count` planes (the
    /// minimum its design needs: halos and the coefficient table assumed cached), for the
    /// effective-bandwidth figure.
    pub fn bytes_per_step(&self, degree: usize, count: usize, variant: GpuVariant) -> f64 {
        let pts = (self.nxy() * count) as f64;
        let (c, s) = (8.0, 4.0); // complex value, slowness
        match variant {
            GpuVariant::Auto | GpuVariant::Best => f64::NAN,
            // n = 1: read T0, write T1 + acc; 2..N-1: read T_{n-1}, T_{n-2}, acc, write T_n, acc;
            // N: read T_{N-1}, T_{N-2}, acc, write W. Both waves share the slowness read.
            GpuVariant::Paper | GpuVariant::PaperPairCapped => {
                let per_wave = 3.0 * c + (degree as f64 - 2.0) * 5.0 * c + 4.0 * c;
                pts * (2.0 * per_wave + degree as f64 * s)
            }
            GpuVariant::Cluster | GpuVariant::ClusterD => cluster_bytes(self.nxy(), count, degree, self.cluster_ctas, self.table_rows),
        }
    }
}

/// Every kernel variant `auto` chooses from (`cluster` only where [`cluster_plan`] finds a shape).
pub const CANDIDATES: [GpuVariant; 4] = [GpuVariant::Paper, GpuVariant::PaperPairCapped, GpuVariant::Cluster, GpuVariant::ClusterD];

/// The cluster kernel (sm_90 module).
pub const CLUSTER_KERNEL: &str = SM90_SRM_STEP_CLUSTER.name();

/// The whole-plane-on-chip kernels (sm_90 module): `cluster` and its second generation `clusterd`
/// (neighbour-only synchronisation, no spills, packed table positions: gpu_kernels::srm::cluster).
/// They share the launch plan and differ in shared bytes, arguments and table rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ClusterKernel {
    Cluster,
    ClusterD,
}

impl ClusterKernel {
    pub fn name(self) -> &'static str {
        match self {
            ClusterKernel::Cluster => CLUSTER_KERNEL,
            ClusterKernel::ClusterD => SM90_SRM_STEP_CLUSTERD.name(),
        }
    }

    /// Dynamic shared bytes of one CTA for strips of `r` rows of an nx-wide plane.
    pub fn shared_bytes(self, nx: u32, r: u32) -> u32 {
        match self {
            ClusterKernel::Cluster => cluster_shared_bytes(nx, r),
            ClusterKernel::ClusterD => clusterd_shared_bytes(nx, r),
        }
    }

    /// Most coefficient-table rows the kernel can index.
    pub fn max_table_rows(self) -> u32 {
        match self {
            ClusterKernel::Cluster => u32::MAX,
            ClusterKernel::ClusterD => CLUSTERD_MAX_ROWS,
        }
    }

    /// The kernel a variant launches, if it is a cluster variant.
    pub fn of(v: GpuVariant) -> Option<ClusterKernel> {
        match v {
            GpuVariant::Cluster => Some(ClusterKernel::Cluster),
            GpuVariant::ClusterD => Some(ClusterKernel::ClusterD),
            _ => None,
        }
    }
}

/// Bytes the `cluster` kernel moves through device memory per depth step for `count` planes of
/// nxy nodes: per wave, W in and W' out (8 B each) and the slowness (4 B, each wave's cluster reads
/// it); the pair table at most once per CTA and coefficient (`ctas` x (degree + 1) x (rows - 1) x
/// 16 B per plane and wave; L2 traffic in practice, counted as an upper bound).
pub fn cluster_bytes(nxy: usize, count: usize, degree: usize, ctas: u32, table_rows: u32) -> f64 {
    let jobs = 2.0 * count as f64;
    let table = ctas as f64 * (degree as f64 + 1.0) * (table_rows.max(1) - 1) as f64 * 16.0;
    jobs * (nxy as f64 * (8.0 + 8.0 + 4.0) + table)
}

/// One way to hold an nx x ny plane in a cluster: `ctas` CTAs, each a strip of `rows` rows, with
/// `threads` threads and `shared` bytes of dynamic shared memory (`gpu_kernels::srm::cluster_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClusterShape {
    pub ctas: u32,
    pub rows: u32,
    pub threads: u32,
    pub shared: u32,
    /// Clusters of this shape resident at once (the driver's answer; 0 until a plan asks): the
    /// `clusterd` kernel prefetches the W of the job this many places ahead into L2.
    pub resident: u32,
}

impl ClusterShape {
    pub fn new(nx: u32, ny: u32, ctas: u32) -> ClusterShape { ClusterShape::of(ClusterKernel::Cluster, nx, ny, ctas) }

    /// The shape of `kernel` (the kernels differ in shared bytes only).
    pub fn of(kernel: ClusterKernel, nx: u32, ny: u32, ctas: u32) -> ClusterShape {
        let rows = ny.div_ceil(ctas.max(1));
        ClusterShape { ctas, rows, threads: cluster_threads(nx, rows), shared: kernel.shared_bytes(nx, rows), resident: 0 }
    }

    /// Why this shape cannot hold an nx x ny plane with `smem` bytes of shared memory per CTA and at
    /// most `max_threads` threads per CTA; None when it can.
    pub fn unfit(&self, ny: u32, smem: u32, max_threads: u32) -> Option<String> {
        let c = self.ctas;
        if c == 0 || c > CLUSTER_MAX {
            return Some(format!("{c} CTAs (1..={CLUSTER_MAX})"));
        }
        if (c - 1) * self.rows >= ny {
            return Some(format!("{c} strips of {} rows leave the last CTA without a row of the {ny}", self.rows));
        }
        if c > 1 && (self.rows as usize) < RADIUS {
            return Some(format!("strips of {} rows are thinner than the stencil's radius {RADIUS}", self.rows));
        }
        if self.shared > smem {
            return Some(format!("a strip of {} rows needs {} B of shared memory, {smem} B allowed", self.rows, self.shared));
        }
        if self.threads > max_threads {
            return Some(format!("a strip of {} rows needs {} threads, the kernel allows {max_threads}", self.rows, self.threads));
        }
        None
    }
}

/// The cluster shapes (1..=16 CTAs) that hold an nx x ny plane, or why none does (the reason for
/// 16 CTAs, the shape with the thinnest strips).
pub fn cluster_candidates(nx: u32, ny: u32, smem: u32, max_threads: u32) -> Result<Vec<ClusterShape>, String> {
    cluster_candidates_for(ClusterKernel::Cluster, nx, ny, smem, max_threads)
}

/// [`cluster_candidates`] of `kernel`.
pub fn cluster_candidates_for(kernel: ClusterKernel, nx: u32, ny: u32, smem: u32, max_threads: u32) -> Result<Vec<ClusterShape>, String> {
    if nx == 0 || ny == 0 {
        return Err(format!("empty grid {nx} x {ny}"));
    }
    let all: Vec<ClusterShape> = (1..=CLUSTER_MAX).map(|c| ClusterShape::of(kernel, nx, ny, c)).collect();
    let fit: Vec<ClusterShape> = all.iter().copied().filter(|s| s.unfit(ny, smem, max_threads).is_none()).collect();
    if fit.is_empty() {
        let why = all.iter().rev().find_map(|s| s.unfit(ny, smem, max_threads)).unwrap_or_default();
        return Err(format!("no cluster of 1..={CLUSTER_MAX} CTAs holds a {nx} x {ny} plane on chip ({CLUSTER_MAX} CTAs: {why})"));
    }
    Ok(fit)
}

/// Of the shapes that fit, the one with the least (waves x rows per CTA) for `jobs` clusters (planes
/// x waves), a wave being as many clusters as can be resident at once (`active`, from the driver's
/// `cuOccupancyMaxActiveClusters`; 0 = cannot run). Per CTA the work is its strip's rows; fewer,
/// larger clusters use fewer SMs (a GPC holds one 16-CTA cluster: the H100's 132 SMs run about 8
/// at once, so 32 jobs of 400 x 400 take 4 waves of 25 rows at 16 CTAs, against 4 waves of 34 rows
/// at 12). Ties go to fewer CTAs.
pub fn choose_cluster<E>(shapes: &[ClusterShape], jobs: u32, mut active: impl FnMut(&ClusterShape) -> Result<u32, E>)
    -> Result<Option<(ClusterShape, u32)>, E> {
    let mut best: Option<(u64, ClusterShape, u32)> = None;
    for s in shapes {
        let a = active(s)?;
        if a == 0 {
            continue;
        }
        let cost = jobs.div_ceil(a) as u64 * s.rows as u64;
        if best.is_none_or(|(c, _, _)| cost < c) {
            best = Some((cost, *s, a));
        }
    }
    Ok(best.map(|(_, s, a)| (s, a)))
}

type PlanKey = (usize, ClusterKernel, u32, u32, u32);
static CLUSTER_PLANS: OnceLock<Mutex<HashMap<PlanKey, (CudaFunction, ClusterConfig, ClusterShape)>>> = OnceLock::new();

/// The `cluster` kernel's function, launch shape and cluster shape for `count` planes of an
/// nx x ny grid on `gpu` (chosen once per context and grid: [`cluster_candidates`], [`choose_cluster`]).
/// Errors (naming the kernel): compute capability below 9.0, or no cluster shape holds the plane.
pub fn cluster_plan(gpu: &Gpu, nx: u32, ny: u32, count: u32) -> GpuResult<(CudaFunction, ClusterConfig, ClusterShape)> {
    cluster_plan_for(gpu, ClusterKernel::Cluster, nx, ny, count)
}

/// [`cluster_plan`] of `kernel`.
pub fn cluster_plan_for(gpu: &Gpu, kernel: ClusterKernel, nx: u32, ny: u32, count: u32)
    -> GpuResult<(CudaFunction, ClusterConfig, ClusterShape)> {
    let key = (gpu.context().cu_ctx() as usize, kernel, nx, ny, count);
    if let Some(p) = CLUSTER_PLANS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return Ok(p.clone());
    }
    let bad = |why: String| GpuError::BadLaunch { kernel: kernel.name().into(), why };
    let func = sm90_function(gpu, kernel.name())?;
    let smem = gpu.info().max_shared_per_block_optin.max(0) as u32;
    let shapes = cluster_candidates_for(kernel, nx, ny, smem, max_threads(&func)?).map_err(bad)?;
    let config = |s: &ClusterShape| ClusterConfig { grid: (s.ctas, 1, 2 * count), block: (s.threads, 1, 1), cluster: (s.ctas, 1, 1),
        shared: s.shared };
    let chosen = choose_cluster(&shapes, 2 * count, |s| max_active_clusters(gpu, kernel.name(), &func, &config(s)))?;
    let (shape, resident) = chosen.ok_or_else(|| bad(format!("the driver can place none of the cluster shapes that hold a {nx} x {ny} plane \
        ({} of {} CTAs)", shapes.len(), shapes.iter().map(|s| s.ctas.to_string()).collect::<Vec<_>>().join(", "))))?;
    let shape = ClusterShape { resident, ..shape };
    let cfg = config(&shape);
    check_cluster_launch(gpu, kernel.name(), &func, &cfg)?;
    let plan = (func, cfg, shape);
    CLUSTER_PLANS.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner()).insert(key, plan.clone());
    Ok(plan)
}

/// Register cap of `paperq56` (`srm_step_paperq`), from `gpu_kernels::registers::CAPS`.
pub const PAPERQ_MAX_REGS: u32 = gpu_kernels::registers::cap("srm_step_paperq").unwrap();

/// Times one depth step of `count` planes with every candidate kernel (median of 3 after a
/// warm-up) and returns the fastest. The planes' contents are overwritten.
pub fn autotune(gpu: &Gpu, dop: &DeviceOperator, planes: &mut Planes, slow: &CudaView<f32>, count: usize)
    -> GpuResult<GpuVariant> {
    let timer = crate::runtime::GpuTimer::new(gpu.stream())?;
    let mut best = (f64::INFINITY, GpuVariant::Paper);
    for v in CANDIDATES {
        if let Some(k) = ClusterKernel::of(v)
            && (dop.rows > k.max_table_rows() || cluster_plan_for(gpu, k, planes.nx as u32, planes.ny as u32, count as u32).is_err()) {
            continue; // below compute capability 9.0, the plane does not fit a cluster, or the table is too long
        }
        let st = timer.measure(1, 3, || planes.step(gpu, dop, slow, count, v))?;
        if st.median_ms < best.0 {
            best = (st.median_ms, v);
        }
    }
    Ok(best.1)
}

/// One shot on a GPU: its slowness window, trace spectra (cuFFT there), receiver nodes, wavefield
/// planes and window image stay resident while any number of frequency groups
/// ([`ShotOnDevice::add`]) add into the image; one download at the end. A device's share of a
/// multi-device migration adds all its (consecutive) items of a shot into one of these.
pub struct ShotOnDevice {
    /// The slowness window in chunks of [`SLOW_CHUNK`] depths, each its own buffer (so a kernel
    /// waits only for the upload of the chunk it reads): uploaded on a second stream while the
    /// first frequency group's shallower depths run ([`ShotOnDevice::add`]), not all before it.
    slow: Vec<CudaSlice<f32>>,
    /// The host inputs until every chunk is up; chunks `..up` are up (queued).
    pending: Option<Arc<ShotInputs>>,
    up: usize,
    spectra: CudaSlice<f32>,
    nodes: CudaSlice<u32>,
    image: CudaSlice<f32>,
    planes: Planes,
    variant: GpuVariant,
    ntr: usize,
    nfft: usize,
    stride: usize,
    nxy: usize,
    nz: usize,
    src: u32,
}

/// Depths per slowness chunk of [`ShotOnDevice`] (400 x 400 nodes: 20 MB).
pub const SLOW_CHUNK: usize = 32;

/// A shot's host-side inputs to [`ShotOnDevice`]: its slowness window (nz x gny x gnx) and its
/// traces packed to `nfft` samples. The same for every device, so a multi-device migration makes
/// them once per shot and every device uploads from them (N devices each making ~1 GB of
/// fresh host arrays for the same shot was a cost that did not shrink with N).
pub struct ShotInputs {
    slow: Vec<f32>,
    /// The packed traces; `None` where the shot's traces are a run of consecutive traces of the
    /// trace set (`nfft` is the trace length, so they are packed already: the devices upload
    /// them from the trace set, with no copy of ~650 MB for a 400 x 400 shot).
    packed: Option<Vec<f32>>,
    nfft: usize,
}

impl ShotInputs {
    pub fn new(traces: &TraceSet, model: &VelocityModel, plan: &FreqPlan, shot: &Shot, grid: &ShotGrid, nz: usize) -> ShotInputs {
        use rayon::prelude::*;
        let nfft = plan.nfft;
        let t = std::time::Instant::now();
        let slow = cpu::window_slowness(model, grid, nz);
        let packed = if Self::run_of(traces, shot, nfft).is_some() { None } else {
            // Fresh memory with huge pages requested: its first touch here is part of the serial setup.
            let mut packed = crate::runtime::memory::zeroed_host(shot.traces.len() * nfft);
            packed.par_chunks_mut(nfft.max(1)).zip(shot.traces.par_iter()).for_each(|(dst, &t)| {
                let tr = traces.trace(t);
                let n = tr.len().min(nfft);
                dst[..n].copy_from_slice(&tr[..n]);
            });
            Some(packed)
        };
        crate::runtime::phases::mark("shot inputs (host)", t);
        ShotInputs { slow, packed, nfft }
    }

    /// The shot's samples in `traces` when they are already packed: consecutive traces of
    /// `nfft` samples.
    fn run_of<'a>(traces: &'a TraceSet, shot: &Shot, nfft: usize) -> Option<&'a [f32]> {
        let first = *shot.traces.first()?;
        let consecutive = shot.traces.iter().enumerate().all(|(k, &t)| t == first + k);
        (consecutive && traces.ns == nfft && (first + shot.traces.len()) * nfft <= traces.data.len())
            .then(|| &traces.data[first * nfft..(first + shot.traces.len()) * nfft])
    }

    /// The shot's packed traces (`traces`: the trace set these inputs were made from).
    fn packed<'a>(&'a self, traces: &'a TraceSet, shot: &Shot) -> &'a [f32] {
        match &self.packed {
            Some(p) => p,
            None => Self::run_of(traces, shot, self.nfft).unwrap_or(&[]),
        }
    }
}

impl ShotOnDevice {
    /// Uploads the shot. `GpuVariant::Auto` is resolved here by timing the kernels on the shot's
    /// grid at `tune_bins` (the first frequencies it will migrate).
    #[allow(clippy::too_many_arguments)]
    pub fn new(gpu: &Gpu, op: &Operator, dop: &DeviceOperator, traces: &TraceSet, model: &VelocityModel,
        params: &SrmParams, plan: &FreqPlan, shot: &Shot, grid: &ShotGrid, tune_bins: &[usize], nz: usize, opts: GpuOptions)
        -> anyhow::Result<ShotOnDevice> {
        let inputs = ShotInputs::new(traces, model, plan, shot, grid, nz);
        Self::with_inputs(gpu, op, dop, &Arc::new(inputs), traces, params, plan, shot, grid, tune_bins, nz, opts)
    }

    /// [`ShotOnDevice::new`] from the shot's host inputs made beforehand ([`ShotInputs::new`] with
    /// the same traces, model, plan, shot, grid and `nz`).
    #[allow(clippy::too_many_arguments)]
    pub fn with_inputs(gpu: &Gpu, op: &Operator, dop: &DeviceOperator, inputs: &Arc<ShotInputs>, traces: &TraceSet,
        params: &SrmParams, plan: &FreqPlan, shot: &Shot, grid: &ShotGrid, tune_bins: &[usize], nz: usize, opts: GpuOptions)
        -> anyhow::Result<ShotOnDevice> {
        let (gnx, gny, nxy) = (grid.nx, grid.ny, grid.nxy());
        let ntr = shot.traces.len();
        let nfft = plan.nfft;
        let stride = opts.planes.max(1);
        let packed = inputs.packed(traces, shot);
        anyhow::ensure!(inputs.nfft == nfft && inputs.slow.len() == nz * nxy && packed.len() == ntr * nfft,
            "srm: shot inputs of another shape ({} slowness samples, {} trace samples)", inputs.slow.len(), packed.len());
        gpu.ensure_fits("srm shot (traces, image, wavefields)", (ntr * nfft * 12 + 2 * nz * nxy * 4) + 20 * 2 * stride * nxy * 4)
            .context("the shot does not fit on the GPU")?;
        // Inputs up once: traces (FFT on the device), receiver nodes; the slowness window's chunks
        // are allocated here and go up with the first frequency group (the first chunk now).
        let t = std::time::Instant::now();
        let slow = (0..nz.div_ceil(SLOW_CHUNK)).map(|c| gpu.zeros::<f32>((SLOW_CHUNK.min(nz - c * SLOW_CHUNK)) * nxy))
            .collect::<GpuResult<Vec<_>>>()?;
        crate::runtime::phases::mark("shot slowness buffers made", t);
        let t = std::time::Instant::now();
        let real = gpu.upload(packed)?;
        let mut spectra = gpu.zeros::<f32>(2 * ntr * nfft)?;
        let n = (ntr * nfft) as u32;
        launch!(gpu, SRM_REAL_TO_COMPLEX, grid_1d(ntr * nfft, 256), &n, &real, &mut spectra)?;
        drop(real);
        crate::runtime::phases::mark("shot traces up", t);
        let t = std::time::Instant::now();
        let fft = FftPlan::c2c_batched(gpu.stream(), &[nfft], ntr)?;
        crate::runtime::phases::mark("shot fft plan made", t);
        fft.exec_inplace(&mut spectra, false)?;
        let t = std::time::Instant::now();
        let nodes = gpu.upload(&grid.trace_nodes)?;
        let image = gpu.zeros::<f32>(nz * nxy)?;
        let taper = Taper::new(gnx, gny, params.taper_width, params.taper_strength);
        let planes = Planes::new(gpu, gnx, gny, stride, &taper)?;
        crate::runtime::phases::mark("shot image and planes made", t);
        let mut s = ShotOnDevice { slow, pending: Some(inputs.clone()), up: 0, spectra, nodes, image, planes, variant: opts.variant,
            ntr, nfft, stride, nxy, nz, src: grid.source_node as u32 };
        let t = std::time::Instant::now();
        Self::slow_chunks_up(&mut s.slow, &mut s.pending, &mut s.up, gpu, 0, nxy)?;
        crate::runtime::phases::mark("shot slowness first chunk up", t);
        if opts.variant == GpuVariant::Best {
            s.variant = resolve_best(gpu, gnx, gny, stride, dop.rows);
        }
        if opts.variant == GpuVariant::Auto {
            anyhow::ensure!(!tune_bins.is_empty(), "srm: no frequency to tune the kernels on");
            s.planes.set_maps(gpu, &vec![op.row_map(plan.omega(tune_bins[0])); stride])?;
            s.variant = autotune(gpu, dop, &mut s.planes, &s.slow[0].slice(0..nxy), tune_bins.len().min(stride))?;
        }
        Ok(s)
    }

    /// Queues the uploads of the slowness chunks up to and including `last` that are not up yet,
    /// on the pool's second stream (each chunk its own buffer: the kernels reading it wait for its
    /// copy alone); the host inputs are let go once all are up.
    fn slow_chunks_up(slow: &mut [CudaSlice<f32>], pending: &mut Option<Arc<ShotInputs>>, up: &mut usize, gpu: &Gpu, last: usize,
        nxy: usize) -> GpuResult<()> {
        let Some(inputs) = pending.as_ref() else { return Ok(()) };
        let stream = gpu.streams().get(1).unwrap_or(gpu.stream());
        while *up <= last && *up < slow.len() {
            let c = *up;
            let lo = c * SLOW_CHUNK * nxy;
            let host = &inputs.slow[lo..lo + slow[c].len()];
            stream.memcpy_htod(host, &mut slow[c]).map_err(drv("uploading a slowness chunk"))?;
            *up += 1;
        }
        if *up == slow.len() {
            *pending = None;
        }
        Ok(())
    }
    /// The kernel variant the shot runs with (`Auto` resolved).
    pub fn variant(&self) -> GpuVariant { self.variant }

    /// Migrates the frequency bins `bins` (any number: `planes` per launch) into the image.
    pub fn add(&mut self, gpu: &Gpu, op: &Operator, dop: &DeviceOperator, params: &SrmParams, plan: &FreqPlan, bins: &[usize])
        -> anyhow::Result<()> {
        let (ntr, nfft, stride, nxy, nz) = (self.ntr, self.nfft, self.stride, self.nxy, self.nz);
        let (ntr32, nfft32, stride32, nxy32, src) = (ntr as u32, nfft as u32, stride as u32, nxy as u32, self.src);
        let planes = &mut self.planes;
        for batch in bins.chunks(stride) {
            let count = batch.len();
            let cnt = count as u32;
            let maps: Vec<RowMap> = batch.iter().map(|&k| op.row_map(plan.omega(k))).collect();
            planes.set_maps(gpu, &maps)?;
            let dbins = gpu.upload(&batch.iter().map(|&k| k as u32).collect::<Vec<u32>>())?;
            let delays = gpu.upload(&batch.iter().flat_map(|&k| { let d = plan.delay(k); [d.re, d.im] }).collect::<Vec<f32>>())?;
            let sources = gpu.upload(&batch.iter().map(|&k| plan.source(k, params.ricker_peak)).collect::<Vec<f32>>())?;
            gpu.stream().memset_zeros(&mut planes.x).map_err(drv("clearing the wavefields"))?;
            launch!(gpu, SRM_INJECT_SOURCE, grid_1d(count, 32), &cnt, &nxy32, &src, &sources, &mut planes.x)?;
            launch!(gpu, SRM_INJECT_RECEIVERS, grid_1d(ntr * count, 256), &ntr32, &nfft32, &cnt, &stride32, &nxy32, &dbins,
                &delays, &self.spectra, &self.nodes, &mut planes.x)?;
            for iz in 0..nz {
                if iz > 0 {
                    let (c, k) = ((iz - 1) / SLOW_CHUNK, (iz - 1) % SLOW_CHUNK);
                    if k == 0 && self.pending.is_some() {
                        // This chunk and the next one up (the next one's copy overlaps this one's depths).
                        Self::slow_chunks_up(&mut self.slow, &mut self.pending, &mut self.up, gpu, c + 1, nxy)?;
                    }
                    let s = self.slow[c].slice(k * nxy..(k + 1) * nxy);
                    planes.step(gpu, dop, &s, count, self.variant)?;
                }
                let mut slice = self.image.slice_mut(iz * nxy..(iz + 1) * nxy);
                launch!(gpu, SRM_IMAGE, grid_1d(nxy, 256), &nxy32, &cnt, &stride32, &planes.x, &mut slice)?;
            }
        }
        Ok(())
    }

    /// The resident window image (nz x gny x gnx), for a device-side sum; the queued work is not
    /// waited for (the sum's copies wait for it).
    pub fn into_image(self) -> CudaSlice<f32> { self.image }

    /// The window image, nz x gny x gnx.
    pub fn download(self, gpu: &Gpu) -> anyhow::Result<Vec<f32>> {
        let t = std::time::Instant::now();
        let w = gpu.download_prefaulted(&self.image)?;
        gpu.synchronize()?;
        crate::runtime::phases::mark("window download (with the kernels' drain)", t);
        Ok(w)
    }
}

/// What [`GpuVariant::Best`] means on `gpu` for an `nx` x `ny` window with `planes` planes per
/// launch and a coefficient table of `table_rows` rows: the fastest whole-plane kernel whose launch
/// plan exists (`clusterd`, then `cluster`), else `paperq56` (all measured on the H100).
pub fn resolve_best(gpu: &Gpu, nx: usize, ny: usize, planes: usize, table_rows: u32) -> GpuVariant {
    let (nx, ny, planes) = (nx as u32, ny as u32, planes as u32);
    if table_rows <= ClusterKernel::ClusterD.max_table_rows() && cluster_plan_for(gpu, ClusterKernel::ClusterD, nx, ny, planes).is_ok() {
        GpuVariant::ClusterD
    } else if cluster_plan(gpu, nx, ny, planes).is_ok() {
        GpuVariant::Cluster
    } else {
        GpuVariant::PaperPairCapped
    }
}

/// The kernel variant `GpuVariant::Auto` picks for `grid` at the frequencies `bins` (the same
/// timing as [`ShotOnDevice::new`], on the first depth only): a multi-device migration resolves
/// it once, so that every device runs the same kernel.
#[allow(clippy::too_many_arguments)]
pub fn tune(gpu: &Gpu, op: &Operator, dop: &DeviceOperator, model: &VelocityModel, params: &SrmParams, plan: &FreqPlan,
    grid: &ShotGrid, bins: &[usize], opts: GpuOptions) -> anyhow::Result<GpuVariant> {
    if opts.variant == GpuVariant::Best {
        return Ok(resolve_best(gpu, grid.nx, grid.ny, opts.planes.max(1), dop.rows));
    }
    if opts.variant != GpuVariant::Auto {
        return Ok(opts.variant);
    }
    anyhow::ensure!(!bins.is_empty(), "srm: no frequency to tune the kernels on");
    let stride = opts.planes.max(1);
    let slow = gpu.upload(&cpu::window_slowness(model, grid, 1))?;
    let taper = Taper::new(grid.nx, grid.ny, params.taper_width, params.taper_strength);
    let mut planes = Planes::new(gpu, grid.nx, grid.ny, stride, &taper)?;
    planes.set_maps(gpu, &vec![op.row_map(plan.omega(bins[0])); stride])?;
    Ok(autotune(gpu, dop, &mut planes, &slow.slice(..), bins.len().min(stride))?)
}

/// Migrates one shot on its window for the frequency bins `bins`; returns the window image.
#[allow(clippy::too_many_arguments)]
pub fn migrate_shot(gpu: &Gpu, op: &Operator, dop: &DeviceOperator, traces: &TraceSet, model: &VelocityModel,
    params: &SrmParams, plan: &FreqPlan, shot: &Shot, grid: &ShotGrid, bins: &[usize], nz: usize, opts: GpuOptions)
    -> anyhow::Result<Vec<f32>> {
    let mut s = ShotOnDevice::new(gpu, op, dop, traces, model, params, plan, shot, grid, bins, nz, opts)?;
    s.add(gpu, op, dop, params, plan, bins)?;
    s.download(gpu)
}

/// All shots on the GPU.
#[allow(clippy::too_many_arguments)]
pub fn migrate_shots(gpu: &Arc<Gpu>, op: &Operator, traces: &TraceSet, model: &VelocityModel, params: &SrmParams,
    shots: &[(Shot, ShotGrid)], opts: GpuOptions, progress: bool) -> anyhow::Result<Image> {
    let nz = if params.nz > 0 { params.nz } else { model.nz };
    let plan = FreqPlan::new(traces.ns, traces.dt as f64, traces.t0 as f64, params.fmin, params.fmax)
        .map_err(anyhow::Error::msg).context("frequency band")?;
    let dop = DeviceOperator::new(gpu, op)?;
    let mut image = Image { data: vec![0.0; nz * model.ny * model.nx], nx: model.nx, ny: model.ny, nz };
    let bar = progress.then(|| crate::progress::bar(shots.len() as u64, "srm shots (gpu)"));
    for (shot, grid) in shots {
        let part = migrate_shot(gpu, op, &dop, traces, model, params, &plan, shot, grid, &plan.bins, nz, opts)
            .with_context(|| format!("migrating shot ffid {} on the GPU", shot.ffid))?;
        cpu::add_window(&mut image, grid, &part);
        if let Some(b) = &bar {
            b.inc(1);
        }
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    Ok(image)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMEM: u32 = 227 * 1024; // H100 / H200 opt-in limit
    const THREADS: u32 = 448; // the kernel at 128 registers

    /// One resident CTA per SM (strips take > 114 KB) on 8 GPCs of 16 SMs.
    fn h100(s: &ClusterShape) -> Result<u32, ()> { Ok(8 * (16 / s.ctas)) }

    #[test]
    fn the_paper_grid_takes_sixteen_ctas_of_25_rows() {
        let shapes = cluster_candidates(400, 400, SMEM, THREADS).unwrap();
        // 12 CTAs (34 rows: 448 x 3 threads) and 14, 15 (3 segments) do not fit the threads; 16 does.
        assert!(shapes.iter().all(|s| s.ctas >= 12), "{shapes:?}");
        let (s, active) = choose_cluster(&shapes, 32, h100).unwrap().unwrap();
        assert_eq!((s.ctas, s.rows, s.threads, active), (16, 25, 448, 8));
        assert_eq!(s.shared, 2 * 25 * 204 * 16 + 25 * 200 * 8);
        assert!(s.shared <= SMEM);
    }

    #[test]
    fn small_grids_prefer_fewer_waves_and_odd_grids_fit() {
        // 131 x 97 (66 pairs -> 96 threads per segment): 1 CTA would need 8 segments (768 threads).
        let shapes = cluster_candidates(131, 97, SMEM, THREADS).unwrap();
        assert!(!shapes.iter().any(|s| s.ctas == 1));
        // 6 jobs: one wave at any size, so the thinnest strips win: 7 rows, first reached at 14 CTAs
        // (16 CTAs of 7 rows would leave the last one empty; ties go to fewer CTAs).
        let (s, _) = choose_cluster(&shapes, 6, h100).unwrap().unwrap();
        assert_eq!((s.ctas, s.rows), (14, 7));
        assert!(ClusterShape::new(131, 97, 16).unfit(97, SMEM, THREADS).unwrap().contains("without a row"));
        assert!(s.unfit(97, SMEM, THREADS).is_none() && (s.ctas - 1) * s.rows < 97);
        // Many jobs: fewer rows per wave with mid-size clusters.
        let (m, _) = choose_cluster(&shapes, 512, h100).unwrap().unwrap();
        assert!(m.ctas < 16, "{m:?}");
        // A shape the driver cannot place is skipped; none placeable -> None.
        assert_eq!(choose_cluster(&shapes, 6, |_| Ok::<u32, ()>(0)).unwrap(), None);
        let only8 = choose_cluster(&shapes, 6, |s| Ok::<u32, ()>(if s.ctas <= 8 { 1 } else { 0 })).unwrap().unwrap();
        assert!(only8.0.ctas <= 8);
    }

    #[test]
    fn shapes_that_cannot_hold_a_plane_say_why() {
        // Strips thinner than the radius, empty CTAs, too much shared memory, too many threads.
        assert!(ClusterShape::new(64, 12, 4).unfit(12, SMEM, THREADS).unwrap().contains("radius"));
        assert!(ClusterShape::new(64, 97, 16).unfit(97, SMEM, THREADS).unwrap().contains("without a row"));
        assert!(ClusterShape::new(2000, 400, 16).unfit(400, SMEM, 4096).unwrap().contains("shared memory"));
        assert!(ClusterShape::new(1000, 112, 16).unfit(112, SMEM, THREADS).unwrap().contains("threads"));
        let e = cluster_candidates(2000, 2000, SMEM, THREADS).unwrap_err();
        assert!(e.contains("2000 x 2000") && e.contains("16 CTAs"), "{e}");
        assert!(cluster_candidates(0, 5, SMEM, THREADS).unwrap_err().contains("empty"));
        // A 2D line (ny = 1) fits one CTA.
        assert_eq!(cluster_candidates(400, 1, SMEM, THREADS).unwrap()[0].ctas, 1);
    }

    #[test]
    fn cluster_bytes_count_w_in_out_slowness_and_table() {
        // 400 x 400, 16 planes x 2 waves, degree 15, 16 CTAs, 128 table rows.
        let b = cluster_bytes(160_000, 16, 15, 16, 128);
        let want = 32.0 * (160_000.0 * 20.0 + 16.0 * 16.0 * 127.0 * 16.0);
        assert_eq!(b, want);
        // Far below the paper-style kernel's 15 passes over the planes.
        assert!(b < 0.06 * 32.0 * 160_000.0 * 8.0 * 5.0 * 15.0);
        assert_eq!(cluster_bytes(100, 1, 15, 0, 0), 2.0 * 100.0 * 20.0);
    }
}
