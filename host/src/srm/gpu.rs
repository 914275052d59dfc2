//! GPU driver: everything stays on the device across depths (paper section 38.4, Listing 38-3):
//! the shot's traces go up once (FFT by cuFFT there), the slowness window once, and only the image
//! comes back. Frequencies run `planes` at a time (one launch covers all of them and both waves).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use anyhow::Context;
use cudarc::driver::{sys, CudaFunction, CudaModule, CudaSlice, CudaView, DeviceRepr, LaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;

use gpu_kernels::srm::{fused_interior, fused_shared_bytes, fusedb_shared_bytes, fusedc_shared_bytes, pair_entry, RowMap, Stencil,
    PAPER_SHARED_BYTES, PAPER_TH, PAPER_TW};

use super::design::Operator;
use super::{cpu, FreqPlan, GpuOptions, GpuVariant, Image, Shot, ShotGrid, SrmParams, Taper, VelocityModel};
use crate::launch;
use crate::runtime::fft::FftPlan;
use crate::runtime::{grid_1d, Gpu, GpuError};
use crate::traces::TraceSet;

type GpuResult<T> = Result<T, GpuError>;

/// The stencil as a kernel argument (by value: it lands in the parameter constant bank).
#[repr(transparent)]
#[derive(Clone, Copy, Debug)]
pub struct StencilArg(pub Stencil);
// SAFETY: #[repr(C)] plain f32 fields, the layout the kernels declare.
unsafe impl DeviceRepr for StencilArg {}

fn drv(what: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> GpuError { GpuError::driver(what) }

/// The operator's coefficient table and stencil on the device.
pub struct DeviceOperator {
    pub table: CudaSlice<f32>,
    /// The table as (a_n[i], a_n[i + 1]) pairs, coefficient-major (`gpu_kernels::srm::pair_entry`):
    /// one 16-byte load per lookup for `paperq` and `fusedc`.
    pub pairs: CudaSlice<f32>,
    pub stencil: StencilArg,
    pub ncoef: u32,
    pub rows: u32,
    pub degree: u32,
}

impl DeviceOperator {
    pub fn new(gpu: &Gpu, op: &Operator) -> GpuResult<Self> {
        let (nc, rows) = (op.ncoef(), op.rows);
        let pairs: Vec<f32> = (0..nc).flat_map(|n| (0..rows - 1).flat_map(move |i| pair_entry(&op.table, nc, i, n))).collect();
        Ok(DeviceOperator {
            table: gpu.upload(&op.table)?,
            pairs: gpu.upload(&pairs)?,
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
    pub x2: CudaSlice<f32>,
    pub y2: CudaSlice<f32>,
    pub acc: CudaSlice<f32>,
    pub maps: CudaSlice<f32>,
    pub taper_x: CudaSlice<f32>,
    pub taper_y: CudaSlice<f32>,
}

impl Planes {
    pub fn new(gpu: &Gpu, nx: usize, ny: usize, stride: usize, taper: &Taper) -> GpuResult<Self> {
        let len = 2 * 2 * stride * nx * ny;
        gpu.ensure_fits("srm wavefield buffers", 5 * len * 4)?;
        Ok(Planes {
            nx, ny, stride,
            x: gpu.zeros(len)?, y: gpu.zeros(len)?, x2: gpu.zeros(len)?, y2: gpu.zeros(len)?, acc: gpu.zeros(len)?,
            maps: gpu.zeros(2 * stride)?,
            taper_x: gpu.upload(&taper.x)?, taper_y: gpu.upload(&taper.y)?,
        })
    }

    /// Floats of one wave's `stride` planes; wave w plane p starts at float 2 (w stride + p) nx ny.
    pub fn nxy(&self) -> usize { self.nx * self.ny }

    pub fn set_maps(&mut self, gpu: &Gpu, maps: &[RowMap]) -> GpuResult<()> {
        let flat: Vec<f32> = maps.iter().flat_map(|m| [m.scale, m.offset]).collect();
        gpu.stream().memcpy_htod(&flat, &mut self.maps).map_err(drv("uploading row maps"))
    }

    /// One depth step of the first `count` planes of both waves on slowness slice `slow`; the
    /// result is in `x`.
    pub fn step(&mut self, gpu: &Gpu, dop: &DeviceOperator, slow: &CudaView<f32>, count: usize, variant: GpuVariant)
        -> GpuResult<()> {
        let (nx, ny, stride, cnt) = (self.nx as u32, self.ny as u32, self.stride as u32, count as u32);
        let (st, ncoef, rows, degree) = (dop.stencil, dop.ncoef, dop.rows, dop.degree);
        match variant {
            GpuVariant::Auto => {
                return Err(GpuError::BadLaunch { kernel: "srm_step".into(), why: "resolve `auto` with `autotune` first".into() });
            }
            GpuVariant::Paper | GpuVariant::PaperHoisted => {
                let name = if variant == GpuVariant::Paper { "srm_step_paper" } else { "srm_step_paperh" };
                let cfg = LaunchConfig {
                    grid_dim: (nx.div_ceil(PAPER_TW), ny.div_ceil(PAPER_TH), cnt),
                    block_dim: (48, 8, 1),
                    shared_mem_bytes: PAPER_SHARED_BYTES,
                };
                for n in 1..=degree {
                    let Planes { x, y, acc, maps, taper_x, taper_y, .. } = self;
                    let (tin, tio) = if n % 2 == 1 { (&*x, y) } else { (&*y, x) };
                    launch!(gpu, name, cfg, &st, &nx, &ny, &stride, &n, &degree, tin, tio, acc, slow,
                        &dop.table, &ncoef, &rows, &*maps, &*taper_x, &*taper_y)?;
                }
                if degree % 2 == 1 {
                    std::mem::swap(&mut self.x, &mut self.y);
                }
            }
            GpuVariant::PaperPair | GpuVariant::PaperPairCapped => {
                let name = "srm_step_paperq";
                let cfg = LaunchConfig {
                    grid_dim: (nx.div_ceil(PAPER_TW), ny.div_ceil(PAPER_TH), cnt),
                    block_dim: (48, 8, 1),
                    shared_mem_bytes: PAPER_SHARED_BYTES,
                };
                let func = if variant == GpuVariant::PaperPairCapped {
                    capped_kernel(gpu, name, PAPERQ_MAX_REGS, &cfg)?
                } else {
                    gpu.prepare_launch(name, &cfg)?
                };
                for n in 1..=degree {
                    let Planes { x, y, acc, maps, taper_x, taper_y, .. } = self;
                    let (tin, tio) = if n % 2 == 1 { (&*x, y) } else { (&*y, x) };
                    let mut l = gpu.stream().launch_builder(&func);
                    l.arg(&st).arg(&nx).arg(&ny).arg(&stride).arg(&n).arg(&degree).arg(tin).arg(tio).arg(acc).arg(slow);
                    l.arg(&dop.pairs).arg(&rows).arg(&*maps).arg(&*taper_x).arg(&*taper_y);
                    let r = unsafe { l.launch(cfg) };
                    gpu.finish_launch(name, &cfg, r.map(|_| ()))?;
                }
                if degree % 2 == 1 {
                    std::mem::swap(&mut self.x, &mut self.y);
                }
            }
            GpuVariant::FusedC(k) => {
                let name = match k {
                    2 => "srm_step_fusedc2",
                    3 => "srm_step_fusedc3",
                    4 => "srm_step_fusedc4",
                    _ => return Err(GpuError::BadLaunch { kernel: "srm_step_fusedc".into(), why: format!("{k} fused steps (2..=4)") }),
                };
                let bi = fused_interior(k);
                let cfg = LaunchConfig {
                    grid_dim: (nx.div_ceil(bi), ny.div_ceil(bi), 2 * cnt),
                    block_dim: (32, 8, 1),
                    shared_mem_bytes: fusedc_shared_bytes(k),
                };
                let func = capped_kernel(gpu, name, FUSEDC_MAX_REGS, &cfg)?;
                let mut n0 = 1u32;
                while n0 <= degree {
                    let steps = k.min(degree - n0 + 1);
                    let Planes { x, y, x2, y2, acc, maps, taper_x, taper_y, .. } = self;
                    let mut l = gpu.stream().launch_builder(&func);
                    l.arg(&st).arg(&nx).arg(&ny).arg(&stride).arg(&cnt).arg(&n0).arg(&steps).arg(&degree).arg(&*x).arg(&*y);
                    l.arg(x2).arg(y2).arg(acc).arg(slow).arg(&dop.pairs).arg(&rows).arg(&*maps).arg(&*taper_x).arg(&*taper_y);
                    let r = unsafe { l.launch(cfg) };
                    gpu.finish_launch(name, &cfg, r.map(|_| ()))?;
                    std::mem::swap(&mut self.x, &mut self.x2);
                    std::mem::swap(&mut self.y, &mut self.y2);
                    n0 += steps;
                }
            }
            GpuVariant::Fused(k) | GpuVariant::FusedB(k) => {
                let balanced = matches!(variant, GpuVariant::FusedB(_));
                let name = match (k, balanced) {
                    (2, false) => "srm_step_fused2",
                    (3, false) => "srm_step_fused3",
                    (4, false) => "srm_step_fused4",
                    (2, true) => "srm_step_fusedb2",
                    (3, true) => "srm_step_fusedb3",
                    (4, true) => "srm_step_fusedb4",
                    _ => return Err(GpuError::BadLaunch { kernel: "srm_step_fused".into(), why: format!("{k} fused steps (2..=4)") }),
                };
                let bi = fused_interior(k);
                let cfg = LaunchConfig {
                    grid_dim: (nx.div_ceil(bi), ny.div_ceil(bi), 2 * cnt),
                    block_dim: (32, 8, 1),
                    shared_mem_bytes: if balanced { fusedb_shared_bytes() } else { fused_shared_bytes(k) },
                };
                let mut n0 = 1u32;
                while n0 <= degree {
                    let steps = k.min(degree - n0 + 1);
                    let Planes { x, y, x2, y2, acc, maps, taper_x, taper_y, .. } = self;
                    launch!(gpu, name, cfg, &st, &nx, &ny, &stride, &cnt, &n0, &steps, &degree, &*x, &*y, x2, y2, acc,
                        slow, &dop.table, &ncoef, &rows, &*maps, &*taper_x, &*taper_y)?;
                    std::mem::swap(&mut self.x, &mut self.x2);
                    std::mem::swap(&mut self.y, &mut self.y2);
                    n0 += steps;
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
            GpuVariant::Auto => f64::NAN,
            // n = 1: read T0, write T1 + acc; 2..N-1: read T_{n-1}, T_{n-2}, acc, write T_n, acc;
            // N: read T_{N-1}, T_{N-2}, acc, write W. Both waves share the slowness read.
            GpuVariant::Paper | GpuVariant::PaperHoisted | GpuVariant::PaperPair | GpuVariant::PaperPairCapped => {
                let per_wave = 3.0 * c + (degree as f64 - 2.0) * 5.0 * c + 4.0 * c;
                pts * (2.0 * per_wave + degree as f64 * s)
            }
            GpuVariant::Fused(k) | GpuVariant::FusedB(k) | GpuVariant::FusedC(k) => {
                let passes = degree.div_ceil(k as usize);
                // First pass: read T0, write 2 terms + acc; middle: read 2 + acc, write 2 + acc;
                // last: read 2 + acc, write W. Each wave-block reads the slowness itself.
                let per_wave = 4.0 * c + (passes as f64 - 2.0).max(0.0) * 6.0 * c + 4.0 * c + passes as f64 * s;
                pts * 2.0 * per_wave
            }
        }
    }
}

/// Every kernel variant `auto` chooses from.
pub const CANDIDATES: [GpuVariant; 13] = [GpuVariant::Paper, GpuVariant::PaperHoisted, GpuVariant::Fused(2),
    GpuVariant::Fused(3), GpuVariant::Fused(4), GpuVariant::FusedB(2), GpuVariant::FusedB(3), GpuVariant::FusedB(4),
    GpuVariant::PaperPair, GpuVariant::PaperPairCapped, GpuVariant::FusedC(2), GpuVariant::FusedC(3), GpuVariant::FusedC(4)];

/// Register cap of the `fusedc` kernels: 80 x 256 threads lets three blocks (3 x 72..77 KB of shared
/// memory) share an SM. Unconstrained, ptxas gives them 94..100 registers (two blocks per SM); at 80
/// fusedc2/3 need no spills and fusedc4 12 bytes (ptxas sm_90).
pub const FUSEDC_MAX_REGS: u32 = 80;

/// Register cap of `paperq56`: 56 x 384 threads lets three blocks share an SM (66 registers
/// unconstrained: two); ptxas sm_90 needs no spills at 56 (48: 68 bytes).
pub const PAPERQ_MAX_REGS: u32 = 56;

/// Entry point `name` of `ptx` alone in a module, with `.maxnreg max_regs` ([`crate::runtime::ptx`]).
pub fn capped_ptx(ptx: &str, name: &str, max_regs: u32) -> Result<String, String> {
    let mut out = crate::runtime::ptx::module_header(ptx);
    let lines: Vec<&str> = ptx.lines().collect();
    let head = format!(".visible .entry {name}(");
    let start = lines.iter().position(|l| *l == head).ok_or_else(|| format!("the embedded PTX has no kernel `{name}`"))?;
    let span = crate::runtime::ptx::entry_span(&lines, start, name)?;
    crate::runtime::ptx::push_capped(&lines, start, span, name, max_regs, &mut out)?;
    Ok(out)
}

type ModuleKey = (usize, String, u32);
static MODULES: OnceLock<Mutex<HashMap<ModuleKey, Arc<CudaModule>>>> = OnceLock::new();

/// Kernel `name` capped at `max_regs` registers (module JIT-compiled once per context), with its
/// shared-memory limit raised for `cfg`.
fn capped_kernel(gpu: &Gpu, name: &str, max_regs: u32, cfg: &LaunchConfig) -> GpuResult<CudaFunction> {
    // Validates the launch shape against the device (and the kernel's presence in the main module).
    gpu.prepare_launch(name, cfg)?;
    let key = (gpu.context().cu_ctx() as usize, name.to_string(), max_regs);
    let module = {
        let mut cache = MODULES.get_or_init(Default::default).lock().unwrap_or_else(|e| e.into_inner());
        match cache.get(&key) {
            Some(m) => m.clone(),
            None => {
                let src = capped_ptx(crate::runtime::PTX, name, max_regs)
                    .map_err(|why| GpuError::BadLaunch { kernel: name.into(), why })?;
                let m = gpu.context().load_module(Ptx::from_src(src)).map_err(drv("JIT-compiling a register-capped srm kernel"))?;
                cache.insert(key, m.clone());
                m
            }
        }
    };
    let func = module.load_function(name).map_err(drv("loading a register-capped srm kernel"))?;
    if cfg.shared_mem_bytes > 48 * 1024 {
        func.set_attribute(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, cfg.shared_mem_bytes as i32)
            .map_err(drv("raising the shared-memory limit of a register-capped srm kernel"))?;
    }
    Ok(func)
}

/// Times one depth step of `count` planes with every candidate kernel (median of 3 after a
/// warm-up) and returns the fastest. The planes' contents are overwritten.
pub fn autotune(gpu: &Gpu, dop: &DeviceOperator, planes: &mut Planes, slow: &CudaView<f32>, count: usize)
    -> GpuResult<GpuVariant> {
    let timer = crate::runtime::GpuTimer::new(gpu.stream())?;
    let mut best = (f64::INFINITY, GpuVariant::Paper);
    for v in CANDIDATES {
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
/// them once per shot and every device uploads from them (issue 9: N devices each making ~1 GB of
/// fresh host arrays for the same shot was a cost that did not shrink with N).
pub struct ShotInputs {
    slow: Vec<f32>,
    packed: Vec<f32>,
    nfft: usize,
}

impl ShotInputs {
    pub fn new(traces: &TraceSet, model: &VelocityModel, plan: &FreqPlan, shot: &Shot, grid: &ShotGrid, nz: usize) -> ShotInputs {
        use rayon::prelude::*;
        let nfft = plan.nfft;
        let t = std::time::Instant::now();
        let slow = cpu::window_slowness(model, grid, nz);
        let mut packed = vec![0.0f32; shot.traces.len() * nfft];
        packed.par_chunks_mut(nfft.max(1)).zip(shot.traces.par_iter()).for_each(|(dst, &t)| {
            let tr = traces.trace(t);
            let n = tr.len().min(nfft);
            dst[..n].copy_from_slice(&tr[..n]);
        });
        crate::multi::mark("shot inputs (host)", t);
        ShotInputs { slow, packed, nfft }
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
        Self::with_inputs(gpu, op, dop, &Arc::new(inputs), params, plan, shot, grid, tune_bins, nz, opts)
    }

    /// [`ShotOnDevice::new`] from the shot's host inputs made beforehand ([`ShotInputs::new`] with
    /// the same traces, model, plan, shot, grid and `nz`).
    #[allow(clippy::too_many_arguments)]
    pub fn with_inputs(gpu: &Gpu, op: &Operator, dop: &DeviceOperator, inputs: &Arc<ShotInputs>,
        params: &SrmParams, plan: &FreqPlan, shot: &Shot, grid: &ShotGrid, tune_bins: &[usize], nz: usize, opts: GpuOptions)
        -> anyhow::Result<ShotOnDevice> {
        let (gnx, gny, nxy) = (grid.nx, grid.ny, grid.nxy());
        let ntr = shot.traces.len();
        let nfft = plan.nfft;
        let stride = opts.planes.max(1);
        anyhow::ensure!(inputs.nfft == nfft && inputs.slow.len() == nz * nxy && inputs.packed.len() == ntr * nfft,
            "srm: shot inputs of another shape ({} slowness samples, {} trace samples)", inputs.slow.len(), inputs.packed.len());
        gpu.ensure_fits("srm shot (traces, image, wavefields)", (ntr * nfft * 12 + 2 * nz * nxy * 4) + 20 * 2 * stride * nxy * 4)
            .context("the shot does not fit on the GPU")?;
        // Inputs up once: traces (FFT on the device), receiver nodes; the slowness window's chunks
        // are allocated here and go up with the first frequency group (the first chunk now).
        let slow = (0..nz.div_ceil(SLOW_CHUNK)).map(|c| gpu.zeros::<f32>((SLOW_CHUNK.min(nz - c * SLOW_CHUNK)) * nxy))
            .collect::<GpuResult<Vec<_>>>()?;
        let t = std::time::Instant::now();
        let real = gpu.upload(&inputs.packed)?;
        let mut spectra = gpu.zeros::<f32>(2 * ntr * nfft)?;
        let n = (ntr * nfft) as u32;
        launch!(gpu, "srm_real_to_complex", grid_1d(ntr * nfft, 256), &n, &real, &mut spectra)?;
        drop(real);
        let fft = FftPlan::c2c_batched(gpu.stream(), &[nfft], ntr)?;
        fft.exec_inplace(&mut spectra, false)?;
        crate::multi::mark("shot traces up+fft queued", t);
        let nodes = gpu.upload(&grid.trace_nodes)?;
        let image = gpu.zeros::<f32>(nz * nxy)?;
        let taper = Taper::new(gnx, gny, params.taper_width, params.taper_strength);
        let planes = Planes::new(gpu, gnx, gny, stride, &taper)?;
        let mut s = ShotOnDevice { slow, pending: Some(inputs.clone()), up: 0, spectra, nodes, image, planes, variant: opts.variant,
            ntr, nfft, stride, nxy, nz, src: grid.source_node as u32 };
        let t = std::time::Instant::now();
        Self::slow_chunks_up(&mut s.slow, &mut s.pending, &mut s.up, gpu, 0, nxy)?;
        crate::multi::mark("shot slowness first chunk up", t);
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
            launch!(gpu, "srm_inject_source", grid_1d(count, 32), &cnt, &nxy32, &src, &sources, &mut planes.x)?;
            launch!(gpu, "srm_inject_receivers", grid_1d(ntr * count, 256), &ntr32, &nfft32, &cnt, &stride32, &nxy32, &dbins,
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
                launch!(gpu, "srm_image", grid_1d(nxy, 256), &nxy32, &cnt, &stride32, &planes.x, &mut slice)?;
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
        crate::multi::mark("window download (with the kernels' drain)", t);
        Ok(w)
    }
}

/// The kernel variant `GpuVariant::Auto` picks for `grid` at the frequencies `bins` (the same
/// timing as [`ShotOnDevice::new`], on the first depth only): a multi-device migration resolves
/// it once, so that every device runs the same kernel.
#[allow(clippy::too_many_arguments)]
pub fn tune(gpu: &Gpu, op: &Operator, dop: &DeviceOperator, model: &VelocityModel, params: &SrmParams, plan: &FreqPlan,
    grid: &ShotGrid, bins: &[usize], opts: GpuOptions) -> anyhow::Result<GpuVariant> {
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
