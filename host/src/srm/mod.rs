//! Shot-record depth migration with Chebyshev-polynomial wavefield extrapolation (paper 4, SRMIP).
//!
//! For each shot: FFT of the traces along time; for each frequency in the band, the source wavefield
//! (a wavelet at the source node) and the receiver wavefield (the recorded spectra at the receiver
//! nodes) are extrapolated depth by depth with the Chebyshev operator (`design`), and the image is
//! the zero-lag correlation of the two, summed over frequencies and shots.
//!
//! Sign conventions. Forward time FFT is e^{-i w t}. The receiver wavefield (up-going data) is
//! continued downward with exp(+i kz dz). The causal source wavefield would need exp(-i kz dz); we
//! carry its complex conjugate S' = conj(S) (the time-reversed source wavefield) instead, which
//! obeys the same exp(+i kz dz) continuation, so both waves share one table and one coefficient
//! lookup per point. The imaging condition Re(conj(S) R) is then Re(S' R).
//!
//! Grids: the velocity model is v[iz][iy][ix] (x fastest), origin (x0, y0) at depth 0, spacings
//! dx, dy, dz (m). ny = 1 is a 2D line (crossline coordinates ignored, the Laplacian's y arm off).
//! The extrapolation from depth iz to iz + 1 uses the slowness of slice iz; image slice iz is the
//! correlation of the wavefields at depth iz dz. Each shot is migrated on a window of the model: the
//! bounding box of its source and receivers widened by the aperture on each side.

pub mod cpu;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod design;
pub mod gpu;
pub mod impulse;
pub mod synthetic;

use std::sync::Arc;

use anyhow::Context;
use num_complex::Complex32;

use crate::backend::Backend;
use rayon::prelude::*;
use crate::traces::TraceSet;
use design::{DesignParams, Operator, Spacing};

/// An interval-velocity model on a regular grid.
#[derive(Debug, Clone)]
pub struct VelocityModel {
    /// Velocities (m/s), v[(iz * ny + iy) * nx + ix].
    pub v: Vec<f32>,
    pub nx: usize,
    pub ny: usize,
    pub nz: usize,
    /// Grid spacings (m).
    pub dx: f64,
    pub dy: f64,
    pub dz: f64,
    /// Position of node (0, 0) (m), in the traces' coordinate frame.
    pub x0: f64,
    pub y0: f64,
}

impl VelocityModel {
    /// A v(z) model repeated laterally.
    #[allow(clippy::too_many_arguments)]
    pub fn from_profile(vz: &[f32], nx: usize, ny: usize, dx: f64, dy: f64, dz: f64, x0: f64, y0: f64) -> Self {
        let mut v = Vec::with_capacity(vz.len() * nx * ny);
        for &vv in vz {
            v.extend(std::iter::repeat_n(vv, nx * ny));
        }
        VelocityModel { v, nx, ny, nz: vz.len(), dx, dy, dz, x0, y0 }
    }

    pub fn two_d(&self) -> bool { self.ny == 1 }

    /// Checks sizes, spacings and values, naming what is wrong.
    pub fn validate(&self) -> Result<(), String> {
        if self.nx == 0 || self.ny == 0 || self.nz < 2 {
            return Err(format!("velocity model: {} x {} x {} (nx x ny x nz) nodes; need nx, ny >= 1 and nz >= 2",
                self.nx, self.ny, self.nz));
        }
        if self.v.len() != self.nx * self.ny * self.nz {
            return Err(format!("velocity model: {} values for {} x {} x {} nodes", self.v.len(), self.nx, self.ny, self.nz));
        }
        for (name, d) in [("dx", self.dx), ("dy", self.dy), ("dz", self.dz)] {
            if !(d > 0.0 && d.is_finite()) {
                return Err(format!("velocity model: grid spacing {name} = {d} m is not positive"));
            }
        }
        if let Some(i) = self.v.iter().position(|&v| !(v > 0.0 && v.is_finite())) {
            let (iz, r) = (i / (self.nx * self.ny), i % (self.nx * self.ny));
            return Err(format!("velocity model: v = {} m/s at (ix {}, iy {}, iz {}) is not positive", self.v[i],
                r % self.nx, r / self.nx, iz));
        }
        Ok(())
    }

    pub fn v_range(&self) -> (f32, f32) {
        self.v.iter().fold((f32::INFINITY, 0.0f32), |(lo, hi), &v| (lo.min(v), hi.max(v)))
    }

    pub fn spacing(&self) -> Spacing { Spacing { dx: self.dx, dy: self.dy, dz: self.dz, two_d: self.two_d() } }
}

/// Migration parameters.
#[derive(Debug, Clone)]
pub struct SrmParams {
    pub design: DesignParams,
    /// Frequency band migrated (Hz): fmin > 0, fmax <= Nyquist.
    pub fmin: f64,
    pub fmax: f64,
    /// Peak frequency (Hz) of the zero-phase Ricker source wavelet.
    pub ricker_peak: f64,
    /// Absorbing taper at the window's edges: width (nodes) and strength (the edge node is scaled by
    /// exp(-strength^2) per depth step; Cerjan-style).
    pub taper_width: usize,
    pub taper_strength: f64,
    /// Extra width (m) around each shot's source and receivers that its migration window covers.
    pub aperture: f64,
    /// Coefficient-table rows; 0 picks about one row per 0.01 of w dz / v.
    pub table_rows: usize,
    /// Depth samples imaged (0 = all of the model).
    pub nz: usize,
}

impl Default for SrmParams {
    fn default() -> Self {
        Self { design: DesignParams::default(), fmin: 5.0, fmax: 40.0, ricker_peak: 20.0, taper_width: 20,
            taper_strength: 0.3, aperture: 1000.0, table_rows: 0, nz: 0 }
    }
}

impl SrmParams {
    /// Errors name the parameter (its CLI name).
    pub fn validate(&self, dt: f64) -> Result<(), crate::Error> {
        self.design.validate()?;
        let nyq = 0.5 / dt;
        if !(self.fmin > 0.0 && self.fmin < self.fmax) {
            return Err(crate::Error::parameter("fmin", format!("frequency band [{} Hz, {} Hz]: need 0 < fmin < fmax", self.fmin, self.fmax)));
        }
        if self.fmax > nyq {
            return Err(crate::Error::parameter("fmax", format!("frequency band [{} Hz, {} Hz] reaches beyond the Nyquist frequency {nyq} Hz \
                (sample interval {} ms)", self.fmin, self.fmax, dt * 1e3)));
        }
        if !(self.ricker_peak > 0.0 && self.ricker_peak.is_finite()) {
            return Err(crate::Error::parameter("ricker", format!("Ricker peak frequency {} Hz is not positive", self.ricker_peak)));
        }
        if !(self.aperture >= 0.0) {
            return Err(crate::Error::parameter("aperture", format!("aperture {} m is negative", self.aperture)));
        }
        if !(self.taper_strength >= 0.0 && self.taper_strength.is_finite()) {
            return Err(crate::Error::parameter("taper-strength", format!("taper strength {} is negative", self.taper_strength)));
        }
        Ok(())
    }
}

/// The edge taper: one factor per node along x and along y (applied after each depth step).
#[derive(Debug, Clone)]
pub struct Taper {
    pub x: Vec<f32>,
    pub y: Vec<f32>,
}

impl Taper {
    pub fn new(nx: usize, ny: usize, width: usize, strength: f64) -> Self {
        let one = |n: usize| -> Vec<f32> {
            let w = width.min(n / 2);
            (0..n).map(|i| {
                let d = i.min(n - 1 - i);
                if n == 1 || d >= w { 1.0 } else { (-(strength * (w - d) as f64 / w as f64).powi(2)).exp() as f32 }
            }).collect()
        };
        Taper { x: one(nx), y: one(ny) }
    }
    pub fn none(nx: usize, ny: usize) -> Self { Taper { x: vec![1.0; nx], y: vec![1.0; ny] } }
}

/// One shot: its traces (indices into the trace set) and source position.
#[derive(Debug, Clone)]
pub struct Shot {
    pub ffid: i32,
    pub sx: f64,
    pub sy: f64,
    pub traces: Vec<usize>,
}

/// Refuses SEG-Y shot gathers with a trace whose source and receiver coordinates are all zero
/// (bytes 73-88 unset: no geometry to migrate with), naming `file` and the trace.
pub fn check_segy_coordinates(headers: &[crate::traces::TraceHeader], file: &std::path::Path) -> anyhow::Result<()> {
    if let Some(i) = headers.iter().position(|h| h.sx == 0.0 && h.sy == 0.0 && h.gx == 0.0 && h.gy == 0.0) {
        crate::bail_input!("{}: trace {i} has no source or receiver coordinates (bytes 73-88 are zero)", file.display());
    }
    Ok(())
}

/// Groups traces into shots by source position (first-appearance order).
pub fn group_shots(traces: &TraceSet) -> Vec<Shot> {
    let mut shots: Vec<Shot> = Vec::new();
    let mut index = std::collections::HashMap::new();
    for (i, h) in traces.headers.iter().enumerate() {
        let key = ((h.sx * 1000.0).round() as i64, (h.sy * 1000.0).round() as i64);
        let k = *index.entry(key).or_insert_with(|| {
            shots.push(Shot { ffid: h.ffid, sx: h.sx, sy: h.sy, traces: Vec::new() });
            shots.len() - 1
        });
        shots[k].traces.push(i);
    }
    shots
}

/// A shot's migration window in the model and where its source and receivers fall in it.
#[derive(Debug, Clone)]
pub struct ShotGrid {
    pub ix0: usize,
    pub iy0: usize,
    pub nx: usize,
    pub ny: usize,
    /// Linear node index (iy * nx + ix, window coordinates) of the source and of each trace.
    pub source_node: usize,
    pub trace_nodes: Vec<u32>,
}

impl ShotGrid {
    pub fn nxy(&self) -> usize { self.nx * self.ny }
}

/// Nearest model node of a position, or an error naming what is outside.
fn node_of(model: &VelocityModel, x: f64, y: f64, what: &str) -> Result<(usize, usize), String> {
    let fx = (x - model.x0) / model.dx;
    let fy = if model.two_d() { 0.0 } else { (y - model.y0) / model.dy };
    let (ix, iy) = (fx.round(), fy.round());
    if !(ix >= 0.0 && ix < model.nx as f64 && iy >= 0.0 && iy < model.ny as f64) {
        let xe = model.x0 + (model.nx - 1) as f64 * model.dx;
        let ye = model.y0 + (model.ny - 1) as f64 * model.dy;
        return Err(format!("{what} at ({x} m, {y} m) is outside the velocity model, which covers x {} .. {xe} m, \
            y {} .. {ye} m: the velocity model does not cover the shots", model.x0, model.y0));
    }
    Ok((ix as usize, iy as usize))
}

/// The window of `model` that migrates `shot`: source and receivers plus `aperture` on each side.
pub fn shot_grid(model: &VelocityModel, traces: &TraceSet, shot: &Shot, aperture: f64) -> Result<ShotGrid, String> {
    let (sx, sy) = node_of(model, shot.sx, shot.sy, &format!("the source of shot ffid {}", shot.ffid))?;
    let mut nodes = Vec::with_capacity(shot.traces.len());
    let (mut x_lo, mut x_hi, mut y_lo, mut y_hi) = (sx, sx, sy, sy);
    for &t in &shot.traces {
        let h = &traces.headers[t];
        let (ix, iy) = node_of(model, h.gx, h.gy, &format!("trace {t} (ffid {}, channel {}): the receiver", h.ffid, h.channel))?;
        x_lo = x_lo.min(ix);
        x_hi = x_hi.max(ix);
        y_lo = y_lo.min(iy);
        y_hi = y_hi.max(iy);
        nodes.push((ix, iy));
    }
    let ax = (aperture / model.dx).ceil() as usize;
    let ay = if model.two_d() { 0 } else { (aperture / model.dy).ceil() as usize };
    let ix0 = x_lo.saturating_sub(ax);
    let iy0 = y_lo.saturating_sub(ay);
    let nx = (x_hi + ax + 1).min(model.nx) - ix0;
    let ny = (y_hi + ay + 1).min(model.ny) - iy0;
    let lin = |(ix, iy): (usize, usize)| ((iy - iy0) * nx + (ix - ix0)) as u32;
    Ok(ShotGrid { ix0, iy0, nx, ny, source_node: lin((sx, sy)) as usize, trace_nodes: nodes.into_iter().map(lin).collect() })
}

/// The frequencies migrated: FFT bins of the traces inside the band.
#[derive(Debug, Clone)]
pub struct FreqPlan {
    pub nfft: usize,
    pub dt: f64,
    /// Time of the first sample (s).
    pub t0: f64,
    pub bins: Vec<usize>,
}

impl FreqPlan {
    pub fn new(ns: usize, dt: f64, t0: f64, fmin: f64, fmax: f64) -> Result<Self, String> {
        let nfft = ns;
        let df = 1.0 / (nfft as f64 * dt);
        let bins: Vec<usize> = (1..=nfft / 2).filter(|&k| {
            let f = k as f64 * df;
            f >= fmin && f <= fmax
        }).collect();
        if bins.is_empty() {
            return Err(format!("no frequency of the {nfft}-point FFT (spacing {df:.3} Hz) lies in [{fmin} Hz, {fmax} Hz]"));
        }
        Ok(FreqPlan { nfft, dt, t0, bins })
    }
    pub fn freq(&self, k: usize) -> f64 { k as f64 / (self.nfft as f64 * self.dt) }
    pub fn omega(&self, k: usize) -> f64 { 2.0 * std::f64::consts::PI * self.freq(k) }
    /// The source spectrum at bin k: the zero-phase Ricker's amplitude spectrum (f/fp)^2 e^{-(f/fp)^2}
    /// (real, so S' = conj(S) is the same number).
    pub fn source(&self, k: usize, peak: f64) -> f32 {
        let r = self.freq(k) / peak;
        (r * r * (-r * r).exp()) as f32
    }
    /// e^{-i w t0}: the spectrum of a trace whose first sample is at t0.
    pub fn delay(&self, k: usize) -> Complex32 {
        let ph = -self.omega(k) * self.t0;
        Complex32::new(ph.cos() as f32, ph.sin() as f32)
    }
}

/// Designs the operator for a model and band (table over the whole w dz / v range).
pub fn design_for(model: &VelocityModel, params: &SrmParams) -> Result<Operator, String> {
    let (vmin, vmax) = model.v_range();
    let tau = 2.0 * std::f64::consts::PI;
    let p_min = tau * params.fmin * model.dz / vmax as f64;
    let p_max = tau * params.fmax * model.dz / vmin as f64;
    let rows = if params.table_rows > 0 { params.table_rows } else { (((p_max - p_min) / 0.01).ceil() as usize + 1).clamp(8, 4096) };
    Operator::new(params.design, model.spacing(), p_min, p_max, rows)
}

/// A depth image on the model grid, img[(iz * ny + iy) * nx + ix].
#[derive(Debug, Clone)]
pub struct Image {
    pub data: Vec<f32>,
    pub nx: usize,
    pub ny: usize,
    pub nz: usize,
}

/// Validates the inputs of a migration (model, parameters, traces against the model).
pub fn validate_inputs(traces: &TraceSet, model: &VelocityModel, params: &SrmParams) -> anyhow::Result<Vec<(Shot, ShotGrid)>> {
    traces.validate("shot gathers").map_err(crate::error::Error::Input)?;
    plan_shots(traces, model, params)
}

/// The shots and their windows from the traces' headers and sampling alone (`traces.data` is not
/// read): [`validate_inputs`] less the samples' check, for a plan made before the samples are read
/// (an MPI rank reads only its shots' traces).
pub fn plan_shots(traces: &TraceSet, model: &VelocityModel, params: &SrmParams) -> anyhow::Result<Vec<(Shot, ShotGrid)>> {
    model.validate().map_err(|r| crate::Error::parameter("velocity", r))?;
    params.validate(traces.dt as f64)?;
    if traces.is_empty() {
        crate::bail_input!("shot gathers: no traces");
    }
    if params.nz > model.nz {
        crate::bail_param!("nz", "{} depth samples requested, the velocity model has {}", params.nz, model.nz);
    }
    let shots = group_shots(traces);
    shots.into_iter().map(|s| {
        let g = shot_grid(model, traces, &s, params.aperture).map_err(anyhow::Error::msg)?;
        Ok((s, g))
    }).collect()
}

/// Which GPU kernel extrapolates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuVariant {
    /// The default: `clusterd` where it runs (compute capability 9.0+, a plane that fits a
    /// cluster's shared memory, a table of at most 4096 rows), else `cluster`, else `paperq56` (the
    /// fastest of the others measured on the H100).
    Best,
    /// Times one depth step of every kernel below on the shot's own grid and keeps the fastest.
    Auto,
    /// The paper's kernel: one Chebyshev step per launch, radius-4 halo tile, both waves.
    Paper,
    /// The paper's kernel with each thread's global loads issued before its stores and one 16-byte
    /// pair-table load per coefficient lookup, JIT-compiled with a cap of 56 registers: three
    /// 384-thread blocks per SM instead of two (ptxas sm_90: no spills at 56) (`paperq56`).
    PaperPairCapped,
    /// All `degree` Chebyshev steps of a depth step in one launch, the whole plane on chip: one
    /// thread-block cluster per (plane, wave) holds the plane as strips in its CTAs' shared memory,
    /// the stencil's y arm reads the neighbour strips through distributed shared memory (compute
    /// capability 9.0+; grids whose plane does not fit 16 CTAs fall back) (`cluster`).
    Cluster,
    /// `Cluster`, second generation (the default where it runs): each CTA waits for its two
    /// neighbours only (mbarriers), no register spills (the last accumulator rows in shared memory,
    /// table positions packed in 32 bits once per depth step), one fused multiply-add per coefficient
    /// component, halo rows with the window's preload (`clusterd`).
    ClusterD,
}

impl std::str::FromStr for GpuVariant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "best" => Ok(Self::Best),
            "auto" => Ok(Self::Auto),
            "paper" => Ok(Self::Paper),
            "paperq56" => Ok(Self::PaperPairCapped),
            "cluster" => Ok(Self::Cluster),
            "clusterd" => Ok(Self::ClusterD),
            o => Err(format!("unknown kernel `{o}` (expected best, auto, paper, paperq56, cluster or clusterd)")),
        }
    }
}

impl std::fmt::Display for GpuVariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GpuVariant::Best => write!(f, "best"),
            GpuVariant::Auto => write!(f, "auto"),
            GpuVariant::Paper => write!(f, "paper"),
            GpuVariant::PaperPairCapped => write!(f, "paperq56"),
            GpuVariant::Cluster => write!(f, "cluster"),
            GpuVariant::ClusterD => write!(f, "clusterd"),
        }
    }
}

/// GPU options: kernel variant and frequency planes per launch.
#[derive(Debug, Clone, Copy)]
pub struct GpuOptions {
    pub variant: GpuVariant,
    pub planes: usize,
}

impl Default for GpuOptions {
    /// `best`: `clusterd` (31.2 us per depth step and plane on the H100) where it runs, then
    /// `cluster` (45.2 us), else `paperq56` (75.5 us, 88 % of the copy bandwidth; `srm bench
    /// --step-only`, BENCHMARKS.md).
    fn default() -> Self { Self { variant: GpuVariant::Best, planes: 16 } }
}

/// Migrates all shots in `traces` through `model` on `devices`; the image covers the whole model
/// (`params.nz` depth samples, or all). Runs on the GPU where the device is one. On one device the
/// shots migrate one after the other; on several the (shot, frequency group) [`work_items`] are
/// split over them ([`Migration`]; with one device the split gives the same image).
pub fn migrate(traces: &TraceSet, model: &VelocityModel, params: &SrmParams, opts: GpuOptions, devices: &[Backend])
    -> crate::error::Result<Image> {
    Ok(migrate_in(traces, model, params, opts, devices)?)
}

fn migrate_in(traces: &TraceSet, model: &VelocityModel, params: &SrmParams, opts: GpuOptions, devices: &[Backend])
    -> anyhow::Result<Image> {
    match devices {
        [] => anyhow::bail!("srm: no device to migrate on"),
        [backend] => migrate_with(backend, traces, model, params, opts, crate::progress::enabled()),
        _ => {
            let plan = MultiPlan::new(traces, model, params, opts)?;
            let devices = devices.iter().map(|b| SrmDevice::new(b, &plan.op)).collect::<anyhow::Result<Vec<_>>>()?;
            let opts = plan.resolve_variant(&devices, model, params, opts)?;
            crate::exec::run(&Migration { plan: &plan, traces, model, params, opts }, &devices)
        }
    }
}

/// [`migrate`] on one device, with a progress bar or not.
pub fn migrate_with(backend: &Backend, traces: &TraceSet, model: &VelocityModel, params: &SrmParams, opts: GpuOptions,
    progress: bool) -> anyhow::Result<Image> {
    let shots = validate_inputs(traces, model, params)?;
    let op = Arc::new(design_for(model, params).map_err(anyhow::Error::msg).context("designing the operator")?);
    match backend {
        Backend::Cpu => cpu::migrate_shots(&op, traces, model, params, &shots, progress),
        Backend::Gpu(g) => gpu::migrate_shots(g, &op, traces, model, params, &shots, opts, progress),
    }
}

/// A work item of a multi-device (`--gpus`) or MPI migration: one shot and a group of its
/// frequency bins (consecutive in the band). Each item gives the shot's window image for those
/// frequencies; the image is their sum, taken in item order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkItem {
    /// Index into the shots (first-appearance order, [`group_shots`]).
    pub shot: usize,
    /// The item's frequency bins (FFT bin numbers).
    pub bins: Vec<usize>,
}

/// Frequency bins per work item: the GPU's frequency planes per launch (16 by default), so an
/// item is whole launches; fixed by the band alone, so any number of devices or ranks sums the
/// same items in the same order.
pub fn work_items(nshots: usize, plan: &FreqPlan, bins_per_item: usize) -> Vec<WorkItem> {
    let per = bins_per_item.max(1);
    (0..nshots).flat_map(|shot| plan.bins.chunks(per).map(move |b| WorkItem { shot, bins: b.to_vec() })).collect()
}

/// One device of a multi-device migration: the backend and, on a GPU, the operator's table
/// uploaded once for all the items the device takes.
pub struct SrmDevice {
    pub backend: Backend,
    dop: Option<gpu::DeviceOperator>,
}

impl SrmDevice {
    pub fn new(backend: &Backend, op: &design::Operator) -> anyhow::Result<SrmDevice> {
        let dop = match backend {
            Backend::Gpu(g) => Some(gpu::DeviceOperator::new(g, op).context("uploading the operator table")?),
            Backend::Cpu => None,
        };
        Ok(SrmDevice { backend: backend.clone(), dop })
    }
}

/// Everything the work items share: validated shots and windows, the operator, the band.
pub struct MultiPlan {
    pub shots: Vec<(Shot, ShotGrid)>,
    pub op: Arc<design::Operator>,
    pub freq: FreqPlan,
    pub nz: usize,
    pub items: Vec<WorkItem>,
    /// Per shot, its host inputs while some device is uploading them ([`gpu::ShotInputs`]: made
    /// once, shared by the devices starting the shot together, freed when the last lets go).
    inputs: Vec<std::sync::Mutex<std::sync::Weak<gpu::ShotInputs>>>,
}

impl MultiPlan {
    pub fn new(traces: &TraceSet, model: &VelocityModel, params: &SrmParams, opts: GpuOptions) -> anyhow::Result<MultiPlan> {
        traces.validate("shot gathers").map_err(crate::error::Error::Input)?;
        Self::from_headers(traces, model, params, opts)
    }

    /// [`MultiPlan::new`] from the traces' headers and sampling alone (`traces.data` may be
    /// empty; see [`plan_shots`]).
    pub fn from_headers(traces: &TraceSet, model: &VelocityModel, params: &SrmParams, opts: GpuOptions) -> anyhow::Result<MultiPlan> {
        let shots = plan_shots(traces, model, params)?;
        let op = Arc::new(design_for(model, params).map_err(anyhow::Error::msg).context("designing the operator")?);
        let freq = FreqPlan::new(traces.ns, traces.dt as f64, traces.t0 as f64, params.fmin, params.fmax)
            .map_err(anyhow::Error::msg).context("frequency band")?;
        let nz = if params.nz > 0 { params.nz } else { model.nz };
        let items = work_items(shots.len(), &freq, opts.planes);
        let inputs = shots.iter().map(|_| Default::default()).collect();
        Ok(MultiPlan { shots, op, freq, nz, items, inputs })
    }

    /// The window image of item `i` on `dev`.
    pub fn run_item(&self, dev: &SrmDevice, i: usize, traces: &TraceSet, model: &VelocityModel, params: &SrmParams,
        opts: GpuOptions) -> anyhow::Result<Vec<f32>> {
        let it = &self.items[i];
        let (shot, grid) = &self.shots[it.shot];
        let what = || format!("shot ffid {} (shot {}), {} frequencies from {:.2} Hz", shot.ffid, it.shot, it.bins.len(),
            self.freq.freq(it.bins[0]));
        match (&dev.backend, &dev.dop) {
            (Backend::Gpu(g), Some(dop)) => gpu::migrate_shot(g, &self.op, dop, traces, model, params, &self.freq, shot, grid,
                &it.bins, self.nz, opts).with_context(what),
            _ => Ok(cpu::migrate_shot(&self.op, traces, model, params, &self.freq, shot, grid, &it.bins, self.nz)),
        }
    }

    /// An all-zero image of the model (the start of the sum).
    pub fn zero_image(&self, model: &VelocityModel) -> Image {
        Image { data: vec![0.0; self.nz * model.ny * model.nx], nx: model.nx, ny: model.ny, nz: self.nz }
    }

    /// Adds item `i`'s window image into `image`.
    pub fn add(&self, image: &mut Image, i: usize, part: &[f32]) -> anyhow::Result<()> {
        let grid = &self.shots[self.items[i].shot].1;
        anyhow::ensure!(part.len() == self.nz * grid.nxy(), "work item {i}: window image of {} samples, expected {}",
            part.len(), self.nz * grid.nxy());
        cpu::add_window(image, grid, part);
        Ok(())
    }
}

/// One device's share of a multi-device migration: the window image of the shot it is working on
/// (resident on a GPU: [`gpu::ShotOnDevice`]) and those of the shots it has finished. Its items
/// are consecutive, so each shot's items on a device add into one window image, downloaded once.
#[derive(Default)]
pub struct DeviceShots {
    current: Option<(usize, ShotAcc)>,
    /// Finished shots' windows: the device's first shot and its last (the two a neighbouring
    /// device may share) stay resident on a GPU for a device-side sum; the others come down.
    done: Vec<(usize, crate::exec::reduce::Part)>,
}

enum ShotAcc {
    Gpu(Box<gpu::ShotOnDevice>),
    Host(Vec<f32>),
}

impl MultiPlan {
    /// `opts` with `GpuVariant::Auto` resolved once, on the first device when it is a GPU (on the
    /// first item's shot grid and frequencies), so every device runs the same kernel.
    pub fn resolve_variant(&self, devices: &[SrmDevice], model: &VelocityModel, params: &SrmParams, opts: GpuOptions)
        -> anyhow::Result<GpuOptions> {
        let (Some(dev), Some(it)) = (devices.first(), self.items.first()) else { return Ok(opts) };
        match (&dev.backend, &dev.dop) {
            (Backend::Gpu(g), Some(dop)) if opts.variant == GpuVariant::Auto => {
                let grid = &self.shots[it.shot].1;
                let variant = gpu::tune(g, &self.op, dop, model, params, &self.freq, grid, &it.bins, opts)
                    .context("choosing the GPU kernel")?;
                Ok(GpuOptions { variant, ..opts })
            }
            _ => Ok(opts),
        }
    }

    /// Shot `s`'s host inputs: those another device holds, else made now (the others starting the
    /// shot meanwhile wait for them rather than make their own).
    fn shot_inputs(&self, s: usize, traces: &TraceSet, model: &VelocityModel) -> anyhow::Result<Arc<gpu::ShotInputs>> {
        let slot = self.inputs.get(s).context("srm: no such shot")?;
        let mut w = slot.lock().map_err(|_| anyhow::anyhow!("srm shot inputs poisoned"))?;
        if let Some(a) = w.upgrade() {
            return Ok(a);
        }
        let (shot, grid) = &self.shots[s];
        let a = Arc::new(gpu::ShotInputs::new(traces, model, &self.freq, shot, grid, self.nz));
        *w = Arc::downgrade(&a);
        Ok(a)
    }

    /// Adds item `i` into the device's current window image (starting a new one at a new shot).
    #[allow(clippy::too_many_arguments)]
    pub fn device_step(&self, dev: &SrmDevice, st: &mut DeviceShots, i: usize, traces: &TraceSet, model: &VelocityModel,
        params: &SrmParams, opts: GpuOptions) -> anyhow::Result<()> {
        let it = &self.items[i];
        let (shot, grid) = &self.shots[it.shot];
        let what = || format!("shot ffid {} (shot {}), {} frequencies from {:.2} Hz", shot.ffid, it.shot, it.bins.len(),
            self.freq.freq(it.bins[0]));
        if st.current.as_ref().is_some_and(|(s, _)| *s != it.shot) {
            self.device_flush(dev, st, false)?;
        }
        match (&dev.backend, &dev.dop) {
            (Backend::Gpu(g), Some(dop)) => {
                if st.current.is_none() {
                    let inputs = self.shot_inputs(it.shot, traces, model)?;
                    let s = gpu::ShotOnDevice::with_inputs(g, &self.op, dop, &inputs, traces, params, &self.freq, shot, grid, &it.bins,
                        self.nz, opts).with_context(what)?;
                    drop(inputs);
                    st.current = Some((it.shot, ShotAcc::Gpu(Box::new(s))));
                }
                let Some((_, ShotAcc::Gpu(s))) = &mut st.current else { anyhow::bail!("srm: a CPU window on a GPU device") };
                s.add(g, &self.op, dop, params, &self.freq, &it.bins).with_context(what)
            }
            _ => {
                let part = cpu::migrate_shot(&self.op, traces, model, params, &self.freq, shot, grid, &it.bins, self.nz);
                match &mut st.current {
                    Some((_, ShotAcc::Host(w))) => {
                        anyhow::ensure!(w.len() == part.len(), "work item {i}: window image of {} samples", part.len());
                        w.par_iter_mut().zip(part.par_iter()).for_each(|(a, b)| *a += b);
                    }
                    _ => st.current = Some((it.shot, ShotAcc::Host(part))),
                }
                Ok(())
            }
        }
    }

    /// Finishes the device's current shot: its window stays resident when it is the device's
    /// first shot or `last` (see [`DeviceShots`]), else it is downloaded.
    fn device_flush(&self, dev: &SrmDevice, st: &mut DeviceShots, last: bool) -> anyhow::Result<()> {
        use crate::exec::reduce::Part;
        if let Some((shot, acc)) = st.current.take() {
            let keep = last || st.done.is_empty();
            let w = match (acc, dev.backend.gpu()) {
                (ShotAcc::Gpu(s), Some(g)) if keep => {
                    if last {
                        let t = std::time::Instant::now();
                        g.synchronize()?;
                        crate::runtime::phases::mark("kernels drained", t);
                    }
                    Part::Gpu(g.clone(), s.into_image())
                }
                (ShotAcc::Gpu(s), Some(g)) => Part::Host(s.download(g).with_context(|| format!("downloading the window image of shot {shot}"))?),
                (ShotAcc::Host(w), _) => Part::Host(w),
                (ShotAcc::Gpu(_), None) => anyhow::bail!("srm: a GPU window on a CPU device"),
            };
            st.done.push((shot, w));
        }
        Ok(())
    }

    /// The device's window images, (shot, image) in item order.
    pub fn device_finish(&self, dev: &SrmDevice, st: DeviceShots) -> anyhow::Result<Vec<(usize, Vec<f32>)>> {
        self.device_finish_parts(dev, st)?.into_iter().map(|(s, p)| Ok((s, p.into_host()?))).collect()
    }

    /// [`MultiPlan::device_finish`] with the first and last shots' windows left resident on a GPU.
    pub fn device_finish_parts(&self, dev: &SrmDevice, mut st: DeviceShots) -> anyhow::Result<Vec<(usize, crate::exec::reduce::Part)>> {
        self.device_flush(dev, &mut st, true)?;
        Ok(st.done)
    }

    /// Adds shot `shot`'s window image into `image`.
    /// The model image made of shot `shot`'s window when that window covers the whole model (same
    /// layout), else the window back: taking it avoids zeroing a fresh model-sized image and adding
    /// into it (page faults of hundreds of MB). The bits are those of `0 + w`: `0 + w` differs
    /// from `w` only where `w` is -0.0, and no window holds -0.0 (every window, on a device or
    /// the CPU, is accumulated into zeros, `+0 + x` is never -0.0 in round-to-nearest, and a sum
    /// of such windows has none either), so no pass over the window is needed (it took 4-25 ms at
    /// 400 x 400 x 500).
    pub fn window_as_image(&self, model: &VelocityModel, shot: usize, part: Vec<f32>) -> Result<Image, Vec<f32>> {
        let grid = &self.shots[shot].1;
        if grid.ix0 != 0 || grid.iy0 != 0 || grid.nx != model.nx || grid.ny != model.ny || part.len() != self.nz * grid.nxy() {
            return Err(part);
        }
        Ok(Image { data: part, nx: model.nx, ny: model.ny, nz: self.nz })
    }

    pub fn add_shot(&self, image: &mut Image, shot: usize, part: &[f32]) -> anyhow::Result<()> {
        let grid = &self.shots[shot].1;
        anyhow::ensure!(part.len() == self.nz * grid.nxy(), "shot {shot}: window image of {} samples, expected {}",
            part.len(), self.nz * grid.nxy());
        cpu::add_window(image, grid, part);
        Ok(())
    }
}

/// The multi-device migration as an [`crate::exec::Job`]: device `d` of N takes the contiguous
/// block `d` of the (shot, frequency group) [`work_items`] (static, `crate::exec::split::device_blocks`)
/// and adds them into one resident window image per shot ([`DeviceShots`]); the window images are
/// downloaded once per (device, shot) and added into the model image in device order
/// ([`sum_windows`]). The plan (operator design) and the devices (operator tables, [`SrmDevice`])
/// are made beforehand, as a job migrating many shot sets would make them once (the scaling bench
/// times the job alone). `opts.variant` should be resolved ([`MultiPlan::resolve_variant`]);
/// `Auto` is tuned per (device, shot) otherwise.
pub struct Migration<'a> {
    pub plan: &'a MultiPlan,
    pub traces: &'a TraceSet,
    pub model: &'a VelocityModel,
    pub params: &'a SrmParams,
    pub opts: GpuOptions,
}

impl crate::exec::Job for Migration<'_> {
    type Device = SrmDevice;
    type State = DeviceShots;
    type Part = Vec<(usize, crate::exec::reduce::Part)>;
    type Output = Image;

    fn items(&self) -> usize { self.plan.items.len() }

    fn start(&self, _: &SrmDevice) -> anyhow::Result<DeviceShots> { Ok(DeviceShots::default()) }

    fn run(&self, dev: &SrmDevice, st: &mut DeviceShots, item: usize) -> anyhow::Result<()> {
        self.plan.device_step(dev, st, item, self.traces, self.model, self.params, self.opts)
    }

    fn finish(&self, dev: &SrmDevice, st: DeviceShots) -> anyhow::Result<Self::Part> { self.plan.device_finish_parts(dev, st) }

    fn reduce(&self, parts: Vec<Self::Part>) -> anyhow::Result<Image> { sum_windows(self.plan, self.model, parts.into_iter().flatten().collect()) }
}

/// The model image from the devices' (shot, window image) parts in device order (so in shot
/// order): per shot, its windows from several devices are summed first, in device order (on the
/// GPUs where they are resident: [`crate::exec::reduce::sum_parts`]), then added into the image. A shot
/// on one device is added as it is, so one device gives the same image as [`migrate_with`]'s sum.
pub fn sum_windows(plan: &MultiPlan, model: &VelocityModel, parts: Vec<(usize, crate::exec::reduce::Part)>) -> anyhow::Result<Image> {
    let mut image: Option<Image> = None;
    let mut parts = parts.into_iter().peekable();
    while let Some((shot, first)) = parts.next() {
        let mut same = vec![first];
        while let Some((_, p)) = parts.next_if(|(s, _)| *s == shot) {
            same.push(p);
        }
        let window = crate::exec::reduce::sum_parts(same)?;
        let t = std::time::Instant::now();
        match image.as_mut() {
            Some(img) => plan.add_shot(img, shot, &window)?,
            // The first window: it is the image when it covers the model ([`MultiPlan::window_as_image`]).
            None => match plan.window_as_image(model, shot, window) {
                Ok(img) => image = Some(img),
                Err(window) => {
                    let mut img = plan.zero_image(model);
                    plan.add_shot(&mut img, shot, &window)?;
                    image = Some(img);
                }
            },
        }
        crate::runtime::phases::mark("window into image (host)", t);
    }
    Ok(image.unwrap_or_else(|| plan.zero_image(model)))
}
