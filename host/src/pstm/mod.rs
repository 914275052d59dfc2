//! PSTM traveltimes (paper 5): a Kirchhoff prestack time migration in the paper's image space
//! (x, y, offset class, image time; time contiguous and padded to a multiple of 32) whose
//! traveltimes are exact, static 8-point interpolated or dynamically interpolated, with the DSR or
//! the VTI (eta) traveltime, on the CPU (rayon) or the GPU.
//!
//! The migration: for every image sample (column (x, y), offset class k, image time tau) the sum,
//! over the traces of class k whose midpoint lies within `aperture` of the column, of the linearly
//! interpolated trace sample at the two-way traveltime t(tau) (unit weights), where t passes the
//! record and stretch-mute tests (see `gpu_kernels::pstm` for the exact rules, shared by CPU and
//! GPU).
//!
//! Shape: this file (parameters, validation, the trace plan, the driver [`migrate`]), [`cpu`] (the
//! rayon reference), [`gpu`] (uploads, launches). The benchmark surveys and models are `seisgpu_lab::pstm`'s.

pub mod cpu;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod gpu;
mod job;

pub use job::{add_image, add_stats, work_items, zero_image, DeviceImage, Migration, WORK_ITEMS};

use anyhow::{bail, Context};

use crate::{bail_input, bail_param, ensure_input, ensure_param};

use crate::backend::Backend;
use crate::traces::{first_failing, TraceSet};
pub use gpu_kernels::pstm::{Bins, KParams, CHUNK_LAYERS, LAYER, PAD};

/// How traveltimes are computed along image time (`--traveltime`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum TraveltimeMode {
    /// Exact at every image sample (the reference).
    #[default]
    Exact,
    /// Exact at every 8th image sample, linear between (paper 5's GPU scheme).
    Static8,
    /// Steps of 8, 16, 24 or 32 samples where the interpolation error stays under `tolerance` (s).
    Dynamic { tolerance: f32 },
}

/// Which traveltime formula (`--traveltime-model`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum TraveltimeModel {
    /// Straight-ray double square root with RMS velocity.
    #[default]
    Dsr,
    /// Anisotropic (VTI, eta) non-hyperbolic traveltime.
    Vti,
}

/// Default tolerance of the dynamic mode (s): a tenth of a 4 ms sample.
pub const DEFAULT_DYNAMIC_TOLERANCE: f32 = 4e-4;

impl TraveltimeMode {
    /// Parses `exact`, `static8` or `dynamic` (with the given tolerance for `dynamic`).
    pub fn parse(s: &str, tolerance: f32) -> anyhow::Result<Self> {
        Ok(match s {
            "exact" => Self::Exact,
            "static8" => Self::Static8,
            "dynamic" => Self::Dynamic { tolerance },
            o => crate::bail_param!("traveltime", "unknown traveltime mode `{o}` (expected exact, static8 or dynamic)"),
        })
    }
    pub fn name(&self) -> &'static str {
        match self {
            Self::Exact => "exact",
            Self::Static8 => "static8",
            Self::Dynamic { .. } => "dynamic",
        }
    }
}

impl std::str::FromStr for TraveltimeModel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "dsr" => Ok(Self::Dsr),
            "vti" => Ok(Self::Vti),
            o => Err(format!("unknown traveltime model `{o}` (expected dsr or vti)")),
        }
    }
}

impl TraveltimeModel {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Dsr => "dsr",
            Self::Vti => "vti",
        }
    }
}

/// GPU launch choices (they change speed, never results).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuTuning {
    /// Columns (warps) per block; the paper used 10.
    pub warps: u32,
    /// Register cap per thread given to the JIT (`.maxnreg`): 96 keeps two blocks of 10 warps per
    /// SM with no spills inside the trace loop (ptxas, sm_90).
    pub max_regs: u32,
    /// Read static8 traces through a texture (the paper's choice) instead of the read-only cache.
    pub texture: bool,
    /// Traces per batch (one launch each); at most 65536 (texture height).
    pub batch_traces: usize,
    /// static8: branch-free 8-layer path for all-FAST units (loads in flight together). Same
    /// results; off by default until measured on a GPU (see docs/notes/pstm.md).
    pub batched_units: bool,
    /// All kernels: the warps of a block walk one trace list together (block barriers), so a trace
    /// is fetched from L2 once per block. Same results; off by default until measured.
    pub lockstep: bool,
    /// All kernels (`*_smem` entry points): the block walks one trace list (as `lockstep`), and
    /// each trace some warp needs is copied once into a shared-memory double buffer (the next one
    /// during the current one's work); warps then read samples from shared memory. Same results.
    /// Ignores `lockstep`, `batched_units` still applies; not with `texture`.
    pub smem: bool,
    /// Columns per block along x (block = tile_x x warps/tile_x columns); must divide `warps`.
    /// 1 = the paper's row of columns along y.
    pub tile_x: u32,
    /// static8 with `smem` (`*_smem_lean2` kernels): lean per-unit work (FAST masks from one ballot
    /// per grid point, staging and table addresses once per trace), and units that are not all
    /// FAST (the unit where the stretch mute ends and the one at the record end: a third of the
    /// units of `pstm-table2`) tested with selects instead of per-lane branches, their DEAD steps
    /// found without branches. Same samples and arithmetic, so the same image bit for bit; ignored
    /// by the other modes and trace paths (docs/notes/pstm.md, "Lean per-unit work", "Lean2").
    pub lean: bool,
}

impl Default for GpuTuning {
    /// [`GpuTuning::fastest`]: what `seisgpu pstm migrate` runs without tuning options.
    fn default() -> Self { Self::fastest() }
}

impl GpuTuning {
    /// The plain launch shape: block (32, 10), 96 registers, traces through the read-only cache,
    /// one column per thread, one batch per launch. The base the other shapes change.
    pub fn read_only_cache() -> Self {
        Self { warps: 10, max_regs: 96, texture: false, batch_traces: 65536, batched_units: false, lockstep: false, smem: false,
            tile_x: 1, lean: false }
    }

    /// The paper's launch shape: block (32, 10), traces through a texture.
    pub fn paper() -> Self { Self { warps: 10, max_regs: 96, texture: true, ..Self::read_only_cache() } }

    /// The fastest shape measured on the H100 (`seisgpu bench all --size paper` at d31b19d,
    /// static8 DSR, 450,000 traces: 1.62 s with the lean per-unit work against 1.98 s without it
    /// and 3.01 s for `w8-r80-lockstep-batched`; later 1.50 s with lean2, VTI 2.17 s against
    /// 2.34 s; BENCHMARKS.md): 8 columns per block as a 2 x 4 tile, traces staged in shared
    /// memory, 80 registers, batched all-FAST units, lean2 static8 (the same image bit for bit). What the CLI and the Kirchhoff dispatch use; traces too long
    /// to stage fall back to the read-only-cache kernels (see `gpu::launch_shape`).
    pub fn fastest() -> Self {
        Self { warps: gpu_kernels::pstm::LEAN_WARPS, max_regs: 80, batched_units: true, smem: true, tile_x: 2, lean: true,
            ..Self::read_only_cache() }
    }
}

/// Migration parameters. Coordinates are those of the trace headers (m); image times are two-way.
#[derive(Debug, Clone)]
pub struct PstmParams {
    /// Image columns: x = x0 + ix dx, y = y0 + iy dy (m), ix < nx, iy < ny.
    pub nx: usize,
    pub ny: usize,
    pub x0: f64,
    pub y0: f64,
    pub dx: f64,
    pub dy: f64,
    /// Image time: tau = tau0 + z dtau (s), z < nz.
    pub nz: usize,
    pub tau0: f32,
    pub dtau: f32,
    /// Offset classes: a trace of source-receiver distance h (m, from the coordinates) goes to
    /// class floor((h - offset0) / doffset) when that is in 0..noff, and is skipped otherwise.
    pub noff: usize,
    pub offset0: f32,
    pub doffset: f32,
    /// RMS (NMO) velocity (m/s) per image sample: `nz` values for every column, or `nx*ny*nz`
    /// (column (ix, iy) at `(ix*ny + iy)*nz`, time fastest).
    pub vrms: Vec<f32>,
    /// Effective eta per image sample (VTI only), same layouts; empty for DSR.
    pub eta: Vec<f32>,
    /// Largest midpoint-to-column horizontal distance of a contributing trace (m).
    pub aperture: f32,
    /// Stretch mute: a sample contributes only where t <= (1 + stretch) tau.
    pub stretch: f32,
    /// Largest step of the dynamic mode (8, 16, 24 or 32 samples).
    pub dynamic_max_step: u32,
    pub gpu: GpuTuning,
}

impl PstmParams {
    /// Image padded length along time (multiple of 32, paper section 3.3 (1)).
    pub fn nz_pad(&self) -> usize { self.nz.div_ceil(LAYER as usize) * LAYER as usize }
    pub fn columns(&self) -> usize { self.nx * self.ny }

    /// Checks everything a run relies on; errors name the parameter and the offending value.
    pub fn validate(&self, mode: TraveltimeMode, model: TraveltimeModel) -> anyhow::Result<()> {
        ensure_param!(self.nx >= 1 && self.ny >= 1, if self.nx == 0 { "nx" } else { "ny" }, "image has {} x {} columns: nx and ny must be at least 1", self.nx, self.ny);
        ensure_param!(self.nz >= 1, "nz", "image has nz = 0 time samples");
        ensure_param!(self.noff >= 1, "noff", "noff = 0: at least one offset class is needed");
        ensure_param!(self.dx > 0.0 && self.dx.is_finite(), "dx", "image column spacing dx = {} m must be positive", self.dx);
        ensure_param!(self.dy > 0.0 && self.dy.is_finite(), "dy", "image column spacing dy = {} m must be positive", self.dy);
        ensure_param!(self.x0.is_finite() && self.y0.is_finite(), if self.x0.is_finite() { "y0" } else { "x0" }, "image origin ({}, {}) is not finite", self.x0, self.y0);
        ensure_param!(self.dtau > 0.0 && self.dtau.is_finite(), "dtau", "image time step dtau = {} s must be positive", self.dtau);
        ensure_param!(self.tau0 >= 0.0 && self.tau0.is_finite(), "tau0", "image start time tau0 = {} s must be >= 0", self.tau0);
        ensure_param!(self.doffset > 0.0 && self.doffset.is_finite(), "doffset", "offset class width doffset = {} m must be positive", self.doffset);
        ensure_param!(self.offset0.is_finite(), "offset0", "offset0 = {} m is not finite", self.offset0);
        ensure_param!(self.aperture > 0.0 && self.aperture.is_finite(), "aperture", "aperture = {} m must be positive", self.aperture);
        // Beyond 1000 km the trace binning's counts would overflow; no survey needs more.
        ensure_param!(self.aperture <= 1e6, "aperture", "aperture = {} m is larger than 1000 km", self.aperture);
        ensure_param!(self.stretch > 0.0 && self.stretch.is_finite(), "stretch", "stretch mute = {} must be positive (e.g. 0.5 for 50%)", self.stretch);
        ensure_param!(matches!(self.dynamic_max_step, 8 | 16 | 24 | 32), "max-step",
            "dynamic interpolation step {} samples is invalid: the largest step must be 8, 16, 24 or 32", self.dynamic_max_step);
        let per_col = self.nz;
        let lateral = self.columns() * self.nz;
        ensure_param!(self.vrms.len() == per_col || self.vrms.len() == lateral, "velocity",
            "vrms has {} values: expected nz = {per_col} (one function for all columns) or nx*ny*nz = {lateral}", self.vrms.len());
        // (Lateral fields are nx*ny*nz values: 82M at paper size, 0.4 s scanned serially on 2 cores.)
        if let Some(i) = first_failing(&self.vrms, |v| (v > 0.0) & (v < f32::INFINITY)) {
            bail_param!("velocity", "vrms at {} is {} m/s: velocities must be positive and finite", self.where_is(i, self.vrms.len()), self.vrms[i]);
        }
        if model == TraveltimeModel::Vti {
            ensure_param!(!self.eta.is_empty(), "eta", "the VTI traveltime needs eta (none given)");
        }
        if !self.eta.is_empty() {
            ensure_param!(self.eta.len() == per_col || self.eta.len() == lateral, "eta",
                "eta has {} values: expected nz = {per_col} or nx*ny*nz = {lateral}", self.eta.len());
            if let Some(i) = first_failing(&self.eta, |e| (e >= 0.0) & (e < f32::INFINITY)) {
                bail_param!("eta", "eta at {} is {}: eta must be >= 0 and finite (VTI anellipticity)", self.where_is(i, self.eta.len()), self.eta[i]);
            }
        }
        if let TraveltimeMode::Dynamic { tolerance } = mode {
            ensure_param!(tolerance >= 0.0 && tolerance.is_finite(), "tolerance", "dynamic interpolation tolerance {tolerance} s must be >= 0");
        }
        let g = &self.gpu;
        ensure_param!((1..=32).contains(&g.warps), "warps", "GPU block of {} warps: 1 to 32 allowed", g.warps);
        ensure_param!((32..=255).contains(&g.max_regs), "max-regs", "GPU register cap {} outside 32..=255", g.max_regs);
        ensure_param!((1..=65536).contains(&g.batch_traces), "batch-traces", "trace batch of {} traces: 1 to 65536 allowed", g.batch_traces);
        ensure_param!(g.tile_x >= 1 && g.warps.is_multiple_of(g.tile_x), "tile-x",
            "GPU tile of {} columns along x does not divide the {} warps per block", g.tile_x, g.warps);
        ensure_param!(!(g.smem && g.texture), "texture", "the shared-memory trace path and textures exclude each other");
        ensure_param!(!(g.lean && g.smem && mode == TraveltimeMode::Static8) || g.warps == gpu_kernels::pstm::LEAN_WARPS, "warps",
            "GPU tuning `lean` (static8, shared-memory kernels) needs {} warps per block, not {}", gpu_kernels::pstm::LEAN_WARPS, g.warps);
        Ok(())
    }

    /// Names index `i` of a field of `len` values.
    fn where_is(&self, i: usize, len: usize) -> String {
        let (col, z) = (i / self.nz, i % self.nz);
        if len == self.nz {
            format!("time sample {z}")
        } else {
            format!("column (ix {}, iy {}) time sample {z}", col / self.ny, col % self.ny)
        }
    }
}

/// The migrated image, (x, y, offset class, time) with time contiguous and padded.
#[derive(Debug, Clone)]
pub struct PstmImage {
    pub nx: usize,
    pub ny: usize,
    pub noff: usize,
    pub nz: usize,
    pub nz_pad: usize,
    /// `data[((ix*ny + iy)*noff + k)*nz_pad + z]`; samples z >= nz are zero.
    pub data: Vec<f32>,
    pub stats: MigrationStats,
}

impl PstmImage {
    /// The `nz` samples of column (ix, iy), offset class k.
    pub fn trace(&self, ix: usize, iy: usize, k: usize) -> &[f32] {
        let o = ((ix * self.ny + iy) * self.noff + k) * self.nz_pad;
        &self.data[o..o + self.nz]
    }
    /// The image without time padding, (nx, ny, noff, nz) row-major.
    pub fn unpadded(&self) -> Vec<f32> {
        self.data.chunks(self.nz_pad).flat_map(|c| c[..self.nz].iter().copied()).collect()
    }
    /// Stack over offset classes: (nx, ny, nz).
    pub fn stack(&self) -> Vec<f32> {
        let mut out = vec![0.0; self.nx * self.ny * self.nz];
        for (c, col) in out.chunks_mut(self.nz).enumerate() {
            for k in 0..self.noff {
                let o = (c * self.noff + k) * self.nz_pad;
                for (v, x) in col.iter_mut().zip(&self.data[o..o + self.nz]) {
                    *v += x;
                }
            }
        }
        out
    }
}

/// What a run did.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct MigrationStats {
    /// Traces used (inside an offset class and near enough to the image).
    pub traces_used: usize,
    /// (trace, image column) pairs within the aperture.
    pub pairs: u64,
    /// Contributions: pairs times nz (image samples the operator covers, muted or not).
    pub contributions: u64,
    /// Exact traveltime evaluations (CPU runs only; 0 from the GPU).
    pub exact_evals: u64,
}

/// One launch's worth of traces, sorted by (offset class, midpoint bin row, bin column, input order).
#[derive(Debug, Clone)]
pub struct Batch {
    /// Input trace index of each batch trace.
    pub index: Vec<u32>,
    /// (sx, sy, gx, gy) relative to the image origin, f32 (m).
    pub headers: Vec<[f32; 4]>,
    /// CSR offsets: traces of bin (k, by, bx) are `bin_start[b]..bin_start[b+1]`,
    /// b = (k*bins.ny + by)*bins.nx + bx.
    pub bin_start: Vec<u32>,
}

/// The traces sorted into batches and midpoint bins, and the kernel parameters.
#[derive(Debug, Clone)]
pub struct Plan {
    pub kp: KParams,
    pub batches: Vec<Batch>,
    pub traces_used: usize,
    pub ns: usize,
}

impl Plan {
    /// Number of packed entries per trace.
    pub fn packed_len(&self) -> usize { self.ns + 2 * PAD }
}

/// Sorts the traces into batches and bins and fills the kernel parameters (mode-independent,
/// except the dynamic tolerance).
pub fn plan(traces: &TraceSet, p: &PstmParams, mode: TraveltimeMode) -> anyhow::Result<Plan> {
    traces.validate("input traces").map_err(crate::error::Error::Input)?;
    ensure_input!(traces.ns >= 2, "traces have {} samples: at least 2 are needed", traces.ns);
    ensure_input!(traces.t0.is_finite(), "trace start time {} s is not finite", traces.t0);
    ensure_input!(traces.len() < u32::MAX as usize, "{} traces: too many for one run", traces.len());
    let a = p.aperture;
    let (wx, wy) = (((p.nx - 1) as f64 * p.dx) as f32, ((p.ny - 1) as f64 * p.dy) as f32);
    // Bins of an eighth of the aperture (at least a column): a column's traces are then about
    // 19 contiguous runs, of which ~55% lie inside the aperture disc.
    let bw = (a / 8.0).max(p.dx as f32);
    let bh = (a / 8.0).max(p.dy as f32);
    let nbx = (((wx + 2.0 * a) / bw).floor() as u32 + 1).max(1);
    let nby = (((wy + 2.0 * a) / bh).floor() as u32 + 1).max(1);
    ensure_param!((nbx as u64) * (nby as u64) * (p.noff as u64) < 1 << 26, "aperture",
        "aperture {a} m over {bw} m bins gives {nbx} x {nby} bins per class: use a larger aperture or fewer classes");
    let bins = Bins { x0: -a, y0: -a, w: bw, h: bh, nx: nbx, ny: nby };

    // Keep traces of a valid class whose midpoint can reach the image (in parallel, in input
    // order: a serial pass over 450,000 headers and the batches' sorts were ~80 ms of a 2.3 s
    // paper-size GPU migration).
    use rayon::prelude::*;
    let coords = |h: &crate::traces::TraceHeader| [h.sx, h.sy, h.gx, h.gy];
    if let Some(i) = traces.headers.par_iter().position_first(|h| !coords(h).iter().all(|c| c.is_finite())) {
        let j = coords(&traces.headers[i]).iter().position(|c| !c.is_finite()).unwrap_or(0);
        bail_input!("trace {i}: {} coordinate is not finite", ["source x", "source y", "receiver x", "receiver y"][j]);
    }
    let kept: Vec<(u32, u32, [f32; 4])> = traces.headers.par_iter().enumerate().filter_map(|(i, h)| {
        let kf = ((h.distance() as f32 - p.offset0) / p.doffset).floor();
        if !(kf >= 0.0 && kf < p.noff as f32) {
            return None;
        }
        let hd = [(h.sx - p.x0) as f32, (h.sy - p.y0) as f32, (h.gx - p.x0) as f32, (h.gy - p.y0) as f32];
        let (mx, my) = (0.5 * (hd[0] + hd[2]), 0.5 * (hd[1] + hd[3]));
        if mx < -a || mx > wx + a || my < -a || my > wy + a {
            return None;
        }
        let (bx, by) = bins.of(mx, my);
        Some((i as u32, ((kf as u32) * nby + by) * nbx + bx, hd)) // (input index, bin key, header)
    }).collect();
    let traces_used = kept.len();
    let nbins = (p.noff as u32 * nby * nbx) as usize;
    let mut batches: Vec<Batch> = kept.par_chunks(p.gpu.batch_traces).map(|chunk| {
        let mut v = chunk.to_vec();
        v.sort_unstable_by_key(|t| (t.1, t.0)); // (input indices are unique: the stable order)
        let mut bin_start = vec![0u32; nbins + 1];
        for t in &v {
            bin_start[t.1 as usize + 1] += 1;
        }
        for b in 0..nbins {
            bin_start[b + 1] += bin_start[b];
        }
        Batch { index: v.iter().map(|t| t.0).collect(), headers: v.iter().map(|t| t.2).collect(), bin_start }
    }).collect();
    if batches.is_empty() {
        batches.push(Batch { index: vec![], headers: vec![], bin_start: vec![0; nbins + 1] });
    }
    let nz_pad = p.nz_pad() as u32;
    let lateral = p.vrms.len() != p.nz || (!p.eta.is_empty() && p.eta.len() != p.nz);
    let inv_dt = 1.0 / traces.dt;
    let (tol, max_step) = match mode {
        TraveltimeMode::Dynamic { tolerance } => (tolerance * inv_dt, p.dynamic_max_step),
        _ => (0.0, 8),
    };
    let kp = KParams {
        nx: p.nx as u32,
        ny: p.ny as u32,
        noff: p.noff as u32,
        nz: p.nz as u32,
        nz_pad,
        coef_stride: if lateral { nz_pad + 1 } else { 0 },
        coef8_stride: if lateral { nz_pad / 8 + 1 } else { 0 },
        packed_len: (traces.ns + 2 * PAD) as u32,
        dx: p.dx as f32,
        dy: p.dy as f32,
        tau0: p.tau0,
        dtau: p.dtau,
        t_first: traces.t0,
        inv_dt,
        smax: (traces.ns - 1) as f32,
        mute: 1.0 + p.stretch,
        aperture: a,
        aperture2: a * a,
        tol,
        max_step,
        batched_units: p.gpu.batched_units as u32,
        lockstep: p.gpu.lockstep as u32,
        tile_x: p.gpu.tile_x,
        bins,
    };
    Ok(Plan { kp, batches, traces_used, ns: traces.ns })
}

/// Per-column coefficients 1/v^2 and eta at image samples 0, step, 2 step, ..., nz_pad (clamped
/// beyond nz), `step` = 1 (exact, dynamic, CPU) or 8 (the static8 grid). One column when nothing
/// varies laterally, else every column (built in parallel).
#[derive(Debug, Clone)]
pub struct Coefs {
    pub iv2: Vec<f32>,
    pub eta: Vec<f32>,
    /// Values per column: nz_pad / step + 1.
    pub stride: usize,
    pub lateral: bool,
}

impl Coefs {
    pub fn new(p: &PstmParams, kp: &KParams, step: usize) -> Coefs {
        use rayon::prelude::*;
        let (len, stride) = (Self::len(p, kp, step), kp.nz_pad as usize / step + 1);
        let mut c = Coefs { iv2: vec![0.0; len], eta: vec![0.0; len], stride, lateral: kp.coef_stride != 0 };
        c.iv2.par_chunks_mut(stride).zip(c.eta.par_chunks_mut(stride)).enumerate().for_each(|(col, (v, e))| {
            Self::fill(p, col, step, v, e);
        });
        c
    }

    /// Values in each of [`Coefs::new`]'s two arrays: `nz_pad / step + 1` per column, one column
    /// unless the fields vary laterally.
    pub fn len(p: &PstmParams, kp: &KParams, step: usize) -> usize {
        (if kp.coef_stride != 0 { p.columns() } else { 1 }) * (kp.nz_pad as usize / step + 1)
    }

    /// Column `col`'s values (`stride` of each).
    pub fn column(&self, col: usize) -> (&[f32], &[f32]) {
        let o = if self.lateral { col * self.stride } else { 0 };
        (&self.iv2[o..o + self.stride], &self.eta[o..o + self.stride])
    }

    /// Fills column `col`'s values at samples 0, step, ... into `iv2` and `eta` (their length).
    pub fn fill(p: &PstmParams, col: usize, step: usize, iv2: &mut [f32], eta: &mut [f32]) {
        let field = |f: &[f32], z: usize| -> f32 {
            let z = z.min(p.nz - 1);
            if f.len() == p.nz { f[z] } else { f[col * p.nz + z] }
        };
        for (k, (v, e)) in iv2.iter_mut().zip(eta.iter_mut()).enumerate() {
            let vz = field(&p.vrms, step * k);
            *v = 1.0 / (vz * vz);
            *e = if p.eta.is_empty() { 0.0 } else { field(&p.eta, step * k) };
        }
    }
}

/// Full-resolution coefficients of one column for the CPU: the shared set when nothing varies
/// laterally, else filled into `scratch` (a few microseconds; no array for every column).
/// Public, with [`shared_coefs`] and [`cpu::for_each_trace`], for the benchmarks' evaluation counts.
pub fn column_coefs<'a>(p: &PstmParams, shared: &'a Option<Coefs>, col: usize,
    scratch: &'a mut (Vec<f32>, Vec<f32>), nz_pad: usize) -> (&'a [f32], &'a [f32]) {
    match shared {
        Some(c) => c.column(0),
        None => {
            scratch.0.resize(nz_pad + 1, 0.0);
            scratch.1.resize(nz_pad + 1, 0.0);
            Coefs::fill(p, col, 1, &mut scratch.0, &mut scratch.1);
            (&scratch.0, &scratch.1)
        }
    }
}

/// The shared coefficient set when the fields do not vary laterally (for [`column_coefs`]).
pub fn shared_coefs(p: &PstmParams, kp: &KParams) -> Option<Coefs> {
    (kp.coef_stride == 0).then(|| Coefs::new(p, kp, 1))
}

/// Errors, before any work, when no trace would add to the image: traces without coordinates,
/// no trace in an offset class, no midpoint within the aperture of the image area, or every
/// traveltime to the image past the record's end. The message says which, with the image's and
/// the data's extents.
pub fn check_reach(traces: &TraceSet, p: &PstmParams) -> anyhow::Result<()> {
    use crate::grid::{check_record_reaches, distance_to_rect, require_coordinates};
    use rayon::prelude::*;
    require_coordinates(&traces.headers, "pstm")?;
    let h = &traces.headers;
    let in_class = |i: usize| {
        let kf = ((h[i].distance() as f32 - p.offset0) / p.doffset).floor();
        kf >= 0.0 && kf < p.noff as f32
    };
    let (x, y) = ((p.x0, p.x0 + (p.nx - 1) as f64 * p.dx), (p.y0, p.y0 + (p.ny - 1) as f64 * p.dy));
    // The nearest midpoint of a trace in a class, in parallel (450,000 traces at paper size).
    let nearest = (0..h.len()).into_par_iter().filter(|&i| in_class(i)).map(|i| distance_to_rect(h[i].midpoint(), x, y))
        .reduce(|| f64::INFINITY, f64::min);
    if nearest == f64::INFINITY {
        let (lo, hi) = h.iter().map(|t| t.distance()).fold((f64::INFINITY, 0.0f64), |(a, b), d| (a.min(d), b.max(d)));
        bail_param!("offset0", "pstm: no trace falls in an offset class: {} classes of {} m from {} m, the traces' offsets are {lo:.1}..{hi:.1} m \
               (set --offset0, --doffset, --noff)", p.noff, p.doffset, p.offset0);
    }
    if nearest > p.aperture as f64 {
        let mid = (0..h.len()).filter(|&i| in_class(i)).map(|i| h[i].midpoint());
        let (mx0, mx1, my0, my1) = mid.fold((f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY),
            |(a, b, c, d), m| (a.min(m.0), b.max(m.0), c.min(m.1), d.max(m.1)));
        bail_param!("aperture", "pstm: no trace reaches the image: the nearest midpoint is {nearest:.1} m from the image area, beyond the aperture \
               of {} m. The image spans x {:.1}..{:.1} m, y {:.1}..{:.1} m; the data's midpoints x {mx0:.1}..{mx1:.1} m, y \
               {my0:.1}..{my1:.1} m: leave out --x0/--y0 (and --nx/--ny) to image over the data, or widen --aperture",
            p.aperture, x.0, x.1, y.0, y.1);
    }
    let vmax = p.vrms.iter().fold(0.0f32, |a, &v| a.max(v)) as f64;
    check_record_reaches(h, in_class, x, y, vmax, (traces.t0 + (traces.ns.max(1) - 1) as f32 * traces.dt) as f64, "pstm")
}

/// Migrates `traces` into the (x, y, offset class, time) image with the given traveltimes, on the
/// CPU or the GPU. The paper-5 engine behind `seisgpu pstm` (and `ktm --traveltime static8|dynamic`).
/// On one device the whole input migrates at once; on several the [`work_items`] are split over
/// them ([`Migration`]: the devices' images summed in device order, the counts added).
pub fn migrate(traces: &TraceSet, params: &PstmParams, mode: TraveltimeMode, model: TraveltimeModel,
    devices: &[Backend]) -> crate::error::Result<PstmImage> {
    Ok(migrate_in(traces, params, mode, model, devices)?)
}

fn migrate_in(traces: &TraceSet, params: &PstmParams, mode: TraveltimeMode, model: TraveltimeModel,
    devices: &[Backend]) -> anyhow::Result<PstmImage> {
    match devices {
        [] => bail!("pstm: no device to migrate on"),
        [backend] => migrate_on(traces, params, mode, model, backend),
        _ => job::migrate_split(traces, params, mode, model, devices),
    }
}

/// [`migrate`] on one device, the whole input at once.
fn migrate_on(traces: &TraceSet, params: &PstmParams, mode: TraveltimeMode, model: TraveltimeModel,
    backend: &Backend) -> anyhow::Result<PstmImage> {
    let t = std::time::Instant::now();
    params.validate(mode, model)?;
    check_reach(traces, params)?;
    crate::runtime::phases::mark("parameters checked", t);
    let t = std::time::Instant::now();
    let plan = plan(traces, params, mode)?;
    crate::runtime::phases::mark("plan", t);
    match backend {
        Backend::Cpu => Ok(cpu::migrate(traces, params, &plan, mode, model)),
        Backend::Gpu(g) => gpu::migrate(g, traces, params, &plan, mode, model).context("GPU PSTM"),
    }
}

/// The number of (trace, column) pairs within the aperture, and of contributions (pairs * nz).
pub fn count_pairs(p: &PstmParams, plan: &Plan) -> (u64, u64) {
    use rayon::prelude::*;
    let kp = &plan.kp;
    let pairs: u64 = (0..p.columns())
        .into_par_iter()
        .map(|col| {
            let (x, y) = ((col / p.ny) as f32 * kp.dx, (col % p.ny) as f32 * kp.dy);
            let mut n = 0u64;
            for b in &plan.batches {
                for k in 0..p.noff as u32 {
                    cpu::for_each_trace(kp, b, k, x, y, |_, _, _| n += 1);
                }
            }
            n
        })
        .sum();
    (pairs, pairs * p.nz as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth;

    pub(crate) fn small_params(nz: usize) -> PstmParams {
        PstmParams {
            nx: 3,
            ny: 4,
            x0: 100.0,
            y0: 200.0,
            dx: 25.0,
            dy: 25.0,
            nz,
            tau0: 0.0,
            dtau: 0.004,
            noff: 2,
            offset0: 0.0,
            doffset: 500.0,
            vrms: (0..nz).map(|z| 1800.0 + z as f32).collect(),
            eta: vec![0.08; nz],
            aperture: 400.0,
            stretch: 0.6,
            dynamic_max_step: 32,
            gpu: GpuTuning::read_only_cache(),
        }
    }

    #[test]
    fn bad_input_names_the_parameter() {
        let mut p = small_params(50);
        p.eta[7] = -0.1;
        let e = p.validate(TraveltimeMode::Static8, TraveltimeModel::Vti).unwrap_err().to_string();
        assert!(e.contains("eta") && e.contains("-0.1") && e.contains("sample 7"), "{e}");
        let mut p = small_params(50);
        p.dynamic_max_step = 0;
        let e = p.validate(TraveltimeMode::Dynamic { tolerance: 1e-4 }, TraveltimeModel::Dsr).unwrap_err().to_string();
        assert!(e.contains("step 0"), "{e}");
        let mut p = small_params(50);
        p.dtau = 0.0;
        let e = p.validate(TraveltimeMode::Exact, TraveltimeModel::Dsr).unwrap_err().to_string();
        assert!(e.contains("dtau"), "{e}");
        let p = small_params(50);
        let e = p.validate(TraveltimeMode::Dynamic { tolerance: -1.0 }, TraveltimeModel::Dsr).unwrap_err().to_string();
        assert!(e.contains("tolerance"), "{e}");
        let mut p = small_params(50);
        p.eta.clear();
        assert!(p.validate(TraveltimeMode::Exact, TraveltimeModel::Vti).is_err());
        assert!(p.validate(TraveltimeMode::Exact, TraveltimeModel::Dsr).is_ok());
        // The lean static8 kernels are built for 8 warps per block (ignored by the other modes).
        let mut p = small_params(50);
        p.gpu = GpuTuning { lean: true, smem: true, warps: 10, ..GpuTuning::read_only_cache() };
        let e = p.validate(TraveltimeMode::Static8, TraveltimeModel::Dsr).unwrap_err().to_string();
        assert!(e.contains("`lean`") && e.contains("needs 8 warps") && e.contains("not 10"), "{e}");
        assert!(p.validate(TraveltimeMode::Exact, TraveltimeModel::Dsr).is_ok());
        p.gpu.warps = 8;
        assert!(p.validate(TraveltimeMode::Static8, TraveltimeModel::Dsr).is_ok());
    }

    #[test]
    fn lean_selects_its_kernels() {
        let kernel_name = |mode, model, texture, smem, lean| super::gpu::kernel_for(mode, model, texture, smem, lean).name();
        let (s8, ex, d) = (TraveltimeMode::Static8, TraveltimeMode::Exact, TraveltimeModel::Dsr);
        assert_eq!(kernel_name(s8, d, false, true, true), "pstm_static8_dsr_smem_lean2");
        assert_eq!(kernel_name(s8, TraveltimeModel::Vti, false, true, true), "pstm_static8_vti_smem_lean2");
        assert_eq!(kernel_name(s8, d, false, true, false), "pstm_static8_dsr_smem");
        assert_eq!(kernel_name(s8, d, false, false, true), "pstm_static8_dsr"); // (lean needs the staged path)
        assert_eq!(kernel_name(ex, d, false, true, true), "pstm_exact_dsr_smem"); // (static8 only)
        if !crate::runtime::PTX.trim().is_empty() {
            for k in ["pstm_static8_dsr_smem_lean2", "pstm_static8_vti_smem_lean2"] {
                assert!(super::gpu::pstm_ptx(crate::runtime::PTX, Some(k), 80).is_ok(), "{k}");
            }
        }
    }

    #[test]
    fn plan_sorts_and_bins_every_usable_trace() {
        let p = small_params(50);
        let h = synth::geometry::cross_spread(7, 60.0, 9, 60.0)
            .into_iter()
            .map(|mut t| {
                t.sx += 130.0;
                t.gx += 130.0;
                t.sy += 240.0;
                t.gy += 240.0;
                t
            })
            .collect();
        let tr = synth::noise_traces(h, 100, 0.004, 1);
        let pl = plan(&tr, &p, TraveltimeMode::Static8).unwrap();
        let b = &pl.batches[0];
        assert_eq!(b.index.len(), pl.traces_used);
        assert!(pl.traces_used > 0 && pl.traces_used <= tr.len());
        assert_eq!(*b.bin_start.last().unwrap() as usize, b.index.len());
        // every trace sits in the bin of its midpoint and class
        for (bin, w) in b.bin_start.windows(2).enumerate() {
            for t in w[0]..w[1] {
                let h = b.headers[t as usize];
                let (bx, by) = pl.kp.bins.of(0.5 * (h[0] + h[2]), 0.5 * (h[1] + h[3]));
                assert_eq!(bin as u32 % (pl.kp.bins.nx * pl.kp.bins.ny), by * pl.kp.bins.nx + bx);
            }
        }
    }
}
