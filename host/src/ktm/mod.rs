//! Kirchhoff prestack time migration (paper 2) and its adjoint, Kirchhoff modelling.
//!
//! `migrate(traces, params, backend)` images prestack traces (source and receiver coordinates in
//! the headers) into a time image: inline x, crossline y, two-way vertical time tau (tau fastest),
//! optionally one image per offset class (common-offset image gathers). `model` is its exact
//! adjoint (demigration), for least-squares migration; the dot-product test ties the two.
//!
//! Pipeline: validate -> [`Plan`] (geometry relative to the image origin, offset classes, the
//! velocity on the image grid, the launch constants) -> [`prep`] (rho filter, anti-alias
//! integration, the padded pair layout the kernels read) -> [`cpu`] or [`gpu`] migration.
//! The per-contribution math is `gpu_kernels::ktm`, shared by both.
//! [`resident`] runs the GPU path on traces and images that already live on the device (another
//! library's arrays, borrowed for the call), with no copy through host memory.

pub mod cpu;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod cpu_interp;
pub mod gpu;
pub mod interpolated;
mod job;
pub mod output;
pub mod prep;
pub mod prep_gpu;
pub mod resident;

pub use job::{add_image, migrate_item, work_items, DeviceImage, Migration, WORK_ITEMS};
mod velocity;

use std::ops::Range;

use anyhow::{bail, Context};

use crate::{bail_input, bail_param, ensure_input, ensure_param};
use gpu_kernels::ktm::interp::{TT_DYNAMIC, TT_EXACT, TT_STATIC8};
use gpu_kernels::ktm::{KtmConsts, APERTURE, MUTE, WEIGHTS};

use crate::backend::Backend;
use crate::pstm::{TraveltimeMode, TraveltimeModel};
use crate::traces::{TraceHeader, TraceSet};

pub use crate::grid::ImageGrid;
pub use velocity::velocity_on_grid;

impl ImageGrid {
    /// Image columns (x, y bins); column `ix * ny + iy`.
    pub fn ncols(&self) -> usize { self.nx * self.ny }
    /// Samples of one image (one offset class).
    pub fn len(&self) -> usize { self.ncols() * self.ntau }
    pub fn is_empty(&self) -> bool { self.len() == 0 }
    pub fn x(&self, ix: usize) -> f64 { self.x0 + ix as f64 * self.dx }
    pub fn y(&self, iy: usize) -> f64 { self.y0 + iy as f64 * self.dy }
    pub fn tau(&self, it: usize) -> f32 { self.tau0 + it as f32 * self.dtau }
    pub fn tau_last(&self) -> f32 { self.tau(self.ntau.saturating_sub(1)) }

    fn validate(&self) -> anyhow::Result<()> {
        ensure_param!(self.nx >= 1 && self.ny >= 1 && self.ntau >= 1, if self.ntau == 0 { "ntau" } else if self.nx == 0 { "nx" } else { "ny" },
            "image grid: {} x {} x {} bins (inline x crossline x time); every count must be at least 1", self.nx, self.ny, self.ntau);
        ensure_param!(self.dx > 0.0 && self.dx.is_finite(), "dx", "image grid: inline spacing dx = {} m must be positive", self.dx);
        ensure_param!(self.dy > 0.0 && self.dy.is_finite(), "dy", "image grid: crossline spacing dy = {} m must be positive", self.dy);
        ensure_param!(self.dtau > 0.0 && self.dtau.is_finite(), "dtau", "image grid: time step dtau = {} s must be positive", self.dtau);
        ensure_param!(self.tau0 >= 0.0 && self.tau0.is_finite(), "tau0", "image grid: first time tau0 = {} s must be >= 0", self.tau0);
        ensure_param!(self.x0.is_finite() && self.y0.is_finite(), if self.x0.is_finite() { "y0" } else { "x0" }, "image grid: origin ({}, {}) is not finite", self.x0, self.y0);
        ensure_param!(self.ntau <= u32::MAX as usize && self.ncols() <= u32::MAX as usize, if self.ntau > u32::MAX as usize { "ntau" } else { "nx" },
            "image grid: {} columns x {} samples exceeds the 2^32 limit per axis", self.ncols(), self.ntau);
        Ok(())
    }
}

/// RMS velocity model (m/s). Interpolated onto the image grid once, on the host.
#[derive(Debug, Clone, PartialEq)]
pub enum Velocity {
    Constant(f32),
    /// v_rms(tau) sampled at `t0 + i * dt` (two-way time, s).
    Function { t0: f32, dt: f32, v: Vec<f32> },
    /// v_rms(x, y, tau) on a regular grid (tau fastest, then y, then x), any size.
    Volume(VelocityVolume),
}

/// A laterally varying RMS velocity volume.
#[derive(Debug, Clone, PartialEq)]
pub struct VelocityVolume {
    pub x0: f64,
    pub dx: f64,
    pub nx: usize,
    pub y0: f64,
    pub dy: f64,
    pub ny: usize,
    pub t0: f32,
    pub dt: f32,
    pub nt: usize,
    /// `v[(ix * ny + iy) * nt + it]`.
    pub v: Vec<f32>,
}

/// Migration aperture: maximum horizontal distance from the image point to the trace midpoint,
/// maximum angle from the vertical (tan = distance / (v tau / 2)), cosine taper over the outer
/// `taper` fraction of the radius.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Aperture {
    /// m; `f64::INFINITY` for no limit.
    pub max_distance: f64,
    /// Degrees in (0, 90]; 90 for no limit.
    pub max_angle_deg: f64,
    /// Fraction of the radius, in [0, 1].
    pub taper: f64,
}

impl Aperture {
    /// Full aperture (the paper's choice): every trace contributes to every image point.
    pub const FULL: Aperture = Aperture { max_distance: f64::INFINITY, max_angle_deg: 90.0, taper: 0.1 };
    pub fn is_full(&self) -> bool { self.max_distance == f64::INFINITY && self.max_angle_deg >= 90.0 }
}

/// Anti-aliasing with a triangle filter of dip-dependent length (Lumley, Claerbout and Bevc 1994).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AntiAlias {
    /// Trace (midpoint) spacing in x and y (m) that sets the alias limit; usually the bin size.
    pub dx: f64,
    pub dy: f64,
    /// Longest triangle half-length (samples), >= 1.
    pub max_half_length: f32,
}

/// Common-offset image gathers: class k holds traces with `first + k * width <= |offset| <
/// first + (k + 1) * width` (offset from the coordinates); traces outside every class are skipped.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OffsetClasses {
    pub first: f64,
    pub width: f64,
    pub count: usize,
}

/// Which GPU kernel migrates (see docs/notes/ktm.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Variant {
    /// The paper's data-domain kernel: one block per image column, one thread per input trace,
    /// shared-memory tree reduction (warp shuffles for the last 32), one write per image sample.
    Paper { block_x: u32, block_y: u32 },
    /// One warp per image column, each lane owning several image times (register tiling), traces'
    /// coordinates staged in shared memory, samples read through L1. The default: the v2 inner loop
    /// (magic-number floor instead of F2I/I2F, two traces per iteration) without corrections,
    /// positions bit-identical to the CPU's; with corrections the v1 kernels.
    #[default]
    Columns,
    /// The first columns kernel (F2I/I2F index, one trace per iteration): what `Columns` runs where
    /// the v2 kernel cannot (a negative read offset, corrections), selectable to test and time it.
    ColumnsV1,
    /// Columns v2 with `sqrt.approx` traveltimes (one MUFU per leg instead of six instructions):
    /// positions within an ulp or two of the CPU's (rel L2 ~1e-5 on white-noise traces). Bare
    /// migration only; with corrections it runs the `Columns` kernels.
    ColumnsFast,
}

impl Variant {
    pub const PAPER: Variant = Variant::Paper { block_x: 128, block_y: 1 };
    /// Whether this is one of the columns kernels (same launch shape).
    pub fn is_columns(&self) -> bool {
        matches!(self, Variant::Columns | Variant::ColumnsV1 | Variant::ColumnsFast)
    }
    /// Largest rel L2 difference from the CPU reference the tests and the benchmark accept: 1e-5,
    /// 1e-4 for `ColumnsFast`, whose positions are an ulp or two off the CPU's (~1e-5 samples).
    pub fn tolerance(&self) -> f64 { if matches!(self, Variant::ColumnsFast) { 1e-4 } else { 1e-5 } }
    pub fn name(&self) -> String {
        match self {
            Variant::Paper { block_x, block_y } => format!("gpu-paper-{block_x}x{block_y}"),
            Variant::Columns => "gpu-columns".into(),
            Variant::ColumnsV1 => "gpu-columns-v1".into(),
            Variant::ColumnsFast => "gpu-columns-fast".into(),
        }
    }
}

impl std::str::FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "paper" => Ok(Variant::PAPER),
            "columns" => Ok(Variant::Columns),
            "columns-v1" => Ok(Variant::ColumnsV1),
            "columns-fast" => Ok(Variant::ColumnsFast),
            o => Err(format!(
                "unknown kernel `{o}` (expected columns, columns-v1, columns-fast or paper)"
            )),
        }
    }
}

/// Caps on the GPU's work units, normally planned from free device memory; tests force them small
/// to exercise the chunking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GpuLimits {
    pub max_traces_per_chunk: Option<usize>,
    pub max_columns_per_tile: Option<usize>,
}

/// Everything the migration needs besides the traces.
#[derive(Debug, Clone, PartialEq)]
pub struct Params {
    pub grid: ImageGrid,
    pub velocity: Velocity,
    pub aperture: Aperture,
    /// Half-derivative (rho) filter on the traces before migration.
    pub rho_filter: bool,
    /// Amplitude weights (`gpu_kernels::ktm::weight`).
    pub weights: bool,
    pub antialias: Option<AntiAlias>,
    /// Stretch mute: drop contributions stretched more than this fraction (0..1).
    pub mute_stretch: Option<f32>,
    pub offset_classes: Option<OffsetClasses>,
    pub traveltime: TraveltimeMode,
    pub traveltime_model: TraveltimeModel,
    /// Anellipticity eta of the VTI traveltime model (used with `TraveltimeModel::Vti`).
    pub eta: f32,
    pub variant: Variant,
    pub limits: GpuLimits,
    /// GPU migrations: rho filter and pair layout on the GPU (cuFFT, [`prep_gpu`]) instead of the
    /// host (rustfft on all cores). Off by default: the GPU path hands its pairs back to the host
    /// (the migration driver uploads host pairs), and with it on by default the end-to-end rows
    /// of the H100 run at d5fda16 were 60-70 ms slower than before (BENCHMARKS.md).
    pub prep_on_gpu: bool,
}

impl Params {
    /// The paper's migration: full aperture, no filter, weights, anti-aliasing or mute.
    pub fn bare(grid: ImageGrid, velocity: Velocity) -> Params {
        Params {
            grid,
            velocity,
            aperture: Aperture::FULL,
            rho_filter: false,
            weights: false,
            antialias: None,
            mute_stretch: None,
            offset_classes: None,
            traveltime: TraveltimeMode::Exact,
            traveltime_model: TraveltimeModel::Dsr,
            eta: 0.0,
            variant: Variant::default(),
            limits: GpuLimits::default(),
            prep_on_gpu: false,
        }
    }
    /// A production migration: rho filter, weights, anti-aliasing at the bin size, full aperture.
    pub fn full(grid: ImageGrid, velocity: Velocity) -> Params {
        Params {
            rho_filter: true,
            weights: true,
            antialias: Some(AntiAlias { dx: grid.dx, dy: grid.dy, max_half_length: 8.0 }),
            ..Params::bare(grid, velocity)
        }
    }
    /// Whether any per-contribution correction is on (selects the kernels with corrections).
    pub fn corrections(&self) -> bool { self.weights || self.mute_stretch.is_some() || !self.aperture.is_full() }

    fn validate(&self) -> anyhow::Result<()> {
        if self.traveltime_model != TraveltimeModel::Dsr {
            bail_param!("traveltime-model", "traveltime model {:?}: the Kirchhoff engine (`seisgpu ktm`) computes DSR traveltimes only; VTI \
                   traveltimes run in the PSTM engine (`seisgpu pstm`)", self.traveltime_model);
        }
        if let TraveltimeMode::Dynamic { tolerance } = self.traveltime {
            ensure_param!(tolerance >= 0.0 && tolerance.is_finite(), "traveltime",
                "dynamic interpolation tolerance {tolerance} s must be >= 0 (the largest traveltime error a step may make)");
        }
        self.grid.validate()?;
        let a = &self.aperture;
        ensure_param!(a.max_distance > 0.0, "aperture",
            "empty aperture: maximum distance {} m must be positive", a.max_distance);
        ensure_param!(a.max_angle_deg > 0.0 && a.max_angle_deg.is_finite(), "max-angle",
            "empty aperture: maximum angle {} degrees must be in (0, 90]", a.max_angle_deg);
        ensure_param!((0.0..=1.0).contains(&a.taper), "taper", "aperture taper {} must be a fraction in [0, 1]", a.taper);
        if let Some(aa) = &self.antialias {
            ensure_param!(aa.dx > 0.0 && aa.dy > 0.0 && aa.dx.is_finite() && aa.dy.is_finite(), "aa-spacing",
                "anti-aliasing: trace spacing ({}, {}) m must be positive", aa.dx, aa.dy);
            ensure_param!(aa.max_half_length >= 1.0 && aa.max_half_length <= 256.0, "aa-max",
                "anti-aliasing: maximum half-length {} samples must be in [1, 256]", aa.max_half_length);
        }
        if let Some(m) = self.mute_stretch {
            ensure_param!(m > 0.0 && m < 1.0, "mute-stretch", "stretch mute {m} must be a fraction in (0, 1)");
        }
        if let Some(oc) = &self.offset_classes {
            ensure_param!(oc.count >= 1, "offset-classes", "offset classes: count must be at least 1");
            ensure_param!(oc.width > 0.0 && oc.width.is_finite(), "offset-classes", "offset classes: width {} m must be positive", oc.width);
            ensure_param!(oc.first.is_finite(), "offset-classes", "offset classes: first offset {} m is not finite", oc.first);
        }
        Ok(())
    }

    /// Offset classes of the output (1 when no gathers are asked for).
    pub fn classes(&self) -> usize { self.offset_classes.map_or(1, |c| c.count) }
}

/// A migrated image: `classes` images of `grid`, `data[(class * ncols + col) * ntau + it]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Image {
    pub grid: ImageGrid,
    pub classes: usize,
    /// Centre offset (m) of each class (0 without classes).
    pub class_offsets: Vec<f64>,
    pub data: Vec<f32>,
    /// Input traces that fell in no offset class.
    pub skipped_traces: usize,
}

impl Image {
    /// One offset class as a (ncols * ntau) slice.
    pub fn class(&self, k: usize) -> &[f32] { &self.data[k * self.grid.len()..(k + 1) * self.grid.len()] }
    /// Sample at (class, ix, iy, it).
    pub fn at(&self, k: usize, ix: usize, iy: usize, it: usize) -> f32 {
        self.data[(k * self.grid.ncols() + ix * self.grid.ny + iy) * self.grid.ntau + it]
    }
}

/// What the CPU and GPU paths share: geometry, classes, velocity on the grid, launch constants.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Launch constants (per-launch fields `col0`, `ncols`, `ntraces` are set by the drivers).
    pub consts: KtmConsts,
    /// `[sx, sy, gx, gy]` relative to the image origin (m), in plan order (sorted by class).
    pub geom: Vec<[f32; 4]>,
    /// Input trace index of each plan position.
    pub order: Vec<usize>,
    /// Plan positions of each offset class.
    pub class_ranges: Vec<Range<usize>>,
    /// Velocity on the image grid: `ntau` values (v_rms(tau)) or `ncols * ntau` (a volume).
    pub vel: Vec<f32>,
    pub grid: ImageGrid,
    pub antialias: bool,
    pub corrections: bool,
    pub ns: usize,
    pub skipped_traces: usize,
}

impl Plan {
    /// Validates everything (naming the parameter or trace at fault) and builds the plan.
    pub fn new(headers: &[TraceHeader], ns: usize, dt: f32, t0: f32, params: &Params) -> anyhow::Result<Plan> {
        params.validate()?;
        let grid = params.grid;
        ensure_input!(!headers.is_empty(), "ktm: no input traces");
        ensure_input!(ns >= 1, "ktm: traces have zero samples");
        ensure_input!(dt > 0.0 && dt.is_finite(), "ktm: trace sample interval {dt} s must be positive");
        ensure_input!(t0.is_finite(), "ktm: trace start time {t0} s is not finite");
        ensure_input!(ns + 2 * prep::pad_for(params) + 1 < u32::MAX as usize, "ktm: {ns} samples per trace is too many");
        if headers.iter().all(|h| h.sx == 0.0 && h.sy == 0.0 && h.gx == 0.0 && h.gy == 0.0) {
            bail_input!("ktm: the {} trace headers carry no source/receiver coordinates (all zero); \
                   Kirchhoff migration needs sx, sy, gx, gy", headers.len());
        }
        let mut geom = Vec::with_capacity(headers.len());
        for (i, h) in headers.iter().enumerate() {
            let c = [h.sx - grid.x0, h.sy - grid.y0, h.gx - grid.x0, h.gy - grid.y0];
            ensure_input!(c.iter().all(|v| v.is_finite() && v.abs() < 1e9),
                "ktm: trace {i} has non-finite or absurd coordinates (source ({}, {}), receiver ({}, {}))", h.sx, h.sy, h.gx, h.gy);
            geom.push(c.map(|v| v as f32));
        }

        // Offset classes: a stable sort of the traces by class.
        let classes = params.classes();
        let class_of = |h: &TraceHeader| -> Option<usize> {
            match &params.offset_classes {
                None => Some(0),
                Some(oc) => {
                    let k = ((h.distance() - oc.first) / oc.width).floor();
                    (k >= 0.0 && k < oc.count as f64).then_some(k as usize)
                }
            }
        };
        let mut keyed: Vec<(usize, usize)> = headers.iter().enumerate().filter_map(|(i, h)| class_of(h).map(|k| (k, i))).collect();
        let skipped_traces = headers.len() - keyed.len();
        ensure_param!(!keyed.is_empty(), "offset-classes", "ktm: no trace falls in any offset class ({:?})", params.offset_classes);
        keyed.sort_by_key(|&(k, _)| k);
        let order: Vec<usize> = keyed.iter().map(|&(_, i)| i).collect();
        let class_ranges: Vec<Range<usize>> = (0..classes)
            .map(|k| keyed.partition_point(|&(c, _)| c < k)..keyed.partition_point(|&(c, _)| c <= k))
            .collect();
        let geom: Vec<[f32; 4]> = order.iter().map(|&i| geom[i]).collect();

        // An aperture that no trace midpoint reaches is an input error, not an empty image.
        let a = &params.aperture;
        if a.max_distance.is_finite() {
            let (xl, xh) = (0.0, (grid.nx - 1) as f64 * grid.dx);
            let (yl, yh) = (0.0, (grid.ny - 1) as f64 * grid.dy);
            let nearest = geom.iter().map(|g| {
                let (mx, my) = (0.5 * (g[0] + g[2]) as f64, 0.5 * (g[1] + g[3]) as f64);
                let ex = (xl - mx).max(0.0).max(mx - xh);
                let ey = (yl - my).max(0.0).max(my - yh);
                (ex * ex + ey * ey).sqrt()
            }).fold(f64::INFINITY, f64::min);
            ensure_param!(nearest < a.max_distance, "aperture",
                "empty aperture: the nearest trace midpoint is {nearest:.1} m from the image area, beyond the maximum \
                 distance {} m", a.max_distance);
        }

        let vel = velocity_on_grid(&params.velocity, &grid)?;
        // An image grid away from the data is an input error, not an image of migration swings.
        let vmax = vel.iter().fold(0.0f32, |a, &v| a.max(v)) as f64;
        let in_class = |i: usize| skipped_traces == 0 || class_of(&headers[i]).is_some();
        crate::grid::check_record_reaches(headers, in_class, (grid.x0, grid.x(grid.nx - 1)), (grid.y0, grid.y(grid.ny - 1)), vmax,
            (t0 + (ns - 1) as f32 * dt) as f64, "ktm")?;
        let vel_stride = if vel.len() == grid.ntau { 0 } else { grid.ntau as u32 };
        let antialias = params.antialias.is_some();
        let pad = prep::pad_for(params);
        let mut flags = 0;
        if params.weights {
            flags |= WEIGHTS;
        }
        if !a.is_full() {
            flags |= APERTURE;
        }
        if params.mute_stretch.is_some() {
            flags |= MUTE;
        }
        let aa = params.antialias.unwrap_or(AntiAlias { dx: grid.dx, dy: grid.dy, max_half_length: 1.0 });
        let consts = KtmConsts {
            dx: grid.dx as f32,
            dy: grid.dy as f32,
            tau0: grid.tau0,
            dtau: grid.dtau,
            ny: grid.ny as u32,
            ntau: grid.ntau as u32,
            col0: 0,
            ncols: grid.ncols() as u32,
            ntraces: 0,
            stride: prep::stride_for(params, ns) as u32,
            pad: pad as u32,
            ns: ns as u32,
            t0,
            dt,
            inv_dt: 1.0 / dt,
            s_off: pad as f32 - t0 / dt,
            vel_stride,
            flags,
            ap_dist: if a.max_distance.is_finite() { a.max_distance as f32 } else { f32::INFINITY },
            ap_tan: if a.max_angle_deg >= 90.0 { f32::INFINITY } else { a.max_angle_deg.to_radians().tan() as f32 },
            ap_taper: a.taper as f32,
            mute_cos: params.mute_stretch.map_or(0.0, |m| 1.0 - m),
            aa_dx: aa.dx as f32,
            aa_dy: aa.dy as f32,
            aa_max: aa.max_half_length,
            tt_mode: match params.traveltime {
                TraveltimeMode::Exact => TT_EXACT,
                TraveltimeMode::Static8 => TT_STATIC8,
                TraveltimeMode::Dynamic { .. } => TT_DYNAMIC,
            },
            tt_tol: match params.traveltime {
                TraveltimeMode::Dynamic { tolerance } => tolerance / dt,
                _ => 0.0,
            },
        };
        Ok(Plan {
            consts,
            geom,
            order,
            class_ranges,
            vel,
            grid,
            antialias,
            corrections: params.corrections(),
            ns,
            skipped_traces,
        })
    }

    /// Image columns whose velocity differs (1 for v_rms(tau)).
    pub fn vel_columns(&self) -> usize { if self.consts.vel_stride == 0 { 1 } else { self.grid.ncols() } }
    pub fn stride(&self) -> usize { self.consts.stride as usize }
    pub fn classes(&self) -> usize { self.class_ranges.len() }
    /// Traces that take part (all classes).
    pub fn ntraces(&self) -> usize { self.geom.len() }
    /// Trace-sample contributions of one migration (traces x image samples).
    pub fn contributions(&self) -> f64 { self.ntraces() as f64 * self.grid.len() as f64 }
    /// Image x and y (relative to the origin, m) of column `col`.
    pub fn column_xy(&self, col: usize) -> (f32, f32) {
        let (ix, iy) = (col / self.grid.ny, col % self.grid.ny);
        (ix as f32 * self.consts.dx, iy as f32 * self.consts.dy)
    }
    /// The plan of the input traces `traces` only (a multi-device or MPI work item), with plan
    /// positions' trace indices relative to `traces.start`. The traces keep their order within
    /// each offset class (the class sort is stable), every launch constant is unchanged, so
    /// summing the images of the items of a split gives the image of the whole plan.
    pub fn restrict(&self, traces: Range<usize>) -> Plan {
        let (mut geom, mut order, mut class_ranges) = (Vec::new(), Vec::new(), Vec::with_capacity(self.classes()));
        for r in &self.class_ranges {
            let start = geom.len();
            for p in r.clone() {
                if traces.contains(&self.order[p]) {
                    geom.push(self.geom[p]);
                    order.push(self.order[p] - traces.start);
                }
            }
            class_ranges.push(start..geom.len());
        }
        Plan { geom, order, class_ranges, vel: self.vel.clone(), skipped_traces: 0, ..*self }
    }
    pub fn class_offsets(&self, params: &Params) -> Vec<f64> {
        match &params.offset_classes {
            None => vec![0.0],
            Some(oc) => (0..oc.count).map(|k| oc.first + (k as f64 + 0.5) * oc.width).collect(),
        }
    }
}

/// Rho filter, integration and pair layout: on the host, or on the GPU with `prep_on_gpu`.
fn prepare_on(backend: &Backend, traces: &TraceSet, plan: &Plan, params: &Params) -> anyhow::Result<prep::Prepared> {
    match backend {
        Backend::Cpu => Ok(prep::prepare(traces, plan, params)),
        Backend::Gpu(gpu) if params.prep_on_gpu => prep_gpu::prepare(gpu, traces, plan, params).context("GPU trace preprocessing"),
        Backend::Gpu(_) => Ok(prep::prepare(traces, plan, params)),
    }
}

/// Wall-clock split of one migration (s): trace preparation (validation, plan, rho filter, pair
/// layout), uploads, kernels (the CPU reference's migration on a CPU, the whole PSTM engine for
/// VTI), image download.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Timings {
    pub prepare_s: f64,
    pub upload_s: f64,
    pub kernels_s: f64,
    pub download_s: f64,
}

/// Migrates `traces` into an image: the entry point (CPU reference or GPU, by the device). On one
/// device the whole input migrates at once; on several the [`work_items`] are split over them
/// ([`Migration`], whose image is the devices' images summed in device order).
pub fn migrate(traces: &TraceSet, params: &Params, devices: &[Backend]) -> crate::error::Result<Image> {
    Ok(migrate_in(traces, params, devices)?)
}

fn migrate_in(traces: &TraceSet, params: &Params, devices: &[Backend]) -> anyhow::Result<Image> {
    match devices {
        [] => bail!("ktm: no device to migrate on"),
        [backend] => migrate_timed_in(traces, params, backend).map(|(img, _)| img),
        // VTI runs in the PSTM engine, which splits its own work over the devices.
        _ if interpolated::needed(params) => interpolated::migrate(traces, params, devices),
        _ => job::migrate_split(traces, params, devices),
    }
}

/// [`migrate`] on one device, the whole input at once, with its time split ([`Timings`]).
pub fn migrate_timed(traces: &TraceSet, params: &Params, backend: &Backend) -> crate::error::Result<(Image, Timings)> {
    Ok(migrate_timed_in(traces, params, backend)?)
}

fn migrate_timed_in(traces: &TraceSet, params: &Params, backend: &Backend) -> anyhow::Result<(Image, Timings)> {
    let mut times = Timings::default();
    let t = std::time::Instant::now();
    traces.validate("ktm input").map_err(crate::error::Error::Input)?;
    if interpolated::needed(params) {
        let img = interpolated::migrate(traces, params, std::slice::from_ref(backend))?;
        times.kernels_s = t.elapsed().as_secs_f64();
        return Ok((img, times));
    }
    let plan = Plan::new(&traces.headers, traces.ns, traces.dt, traces.t0, params)?;
    let prepared = prepare_on(backend, traces, &plan, params)?;
    times.prepare_s = t.elapsed().as_secs_f64();
    let data = match backend {
        Backend::Cpu => {
            let t = std::time::Instant::now();
            let d = cpu::migrate(&plan, &prepared);
            times.kernels_s = t.elapsed().as_secs_f64();
            d
        }
        Backend::Gpu(gpu) => gpu::migrate_timed(gpu, &plan, &prepared, params.variant, &params.limits, Some(&mut times))
            .context("GPU migration")?,
    };
    let img = Image {
        grid: plan.grid,
        classes: plan.classes(),
        class_offsets: plan.class_offsets(params),
        data,
        skipped_traces: plan.skipped_traces,
    };
    Ok((img, times))
}

/// Kirchhoff modelling, the exact adjoint of [`migrate`]: traces with `headers`, `ns` samples at
/// `dt` (first at `t0`) from `image`. Traces in no offset class come back as zeros.
pub fn model(image: &Image, headers: &[TraceHeader], ns: usize, dt: f32, t0: f32, params: &Params, backend: &Backend)
    -> crate::error::Result<TraceSet> {
    Ok(model_in(image, headers, ns, dt, t0, params, backend)?)
}

fn model_in(image: &Image, headers: &[TraceHeader], ns: usize, dt: f32, t0: f32, params: &Params, backend: &Backend)
    -> anyhow::Result<TraceSet> {
    ensure_param!(params.traveltime == TraveltimeMode::Exact, "traveltime",
        "modelling computes exact traveltimes only (it is the adjoint of the exact migration): use --traveltime exact");
    let plan = Plan::new(headers, ns, dt, t0, params)?;
    ensure_input!(image.grid == plan.grid && image.classes == plan.classes() && image.data.len() == plan.classes() * plan.grid.len(),
        "modelling: the image ({} classes of {:?}) does not match the parameters ({} classes of {:?})",
        image.classes, image.grid, plan.classes(), plan.grid);
    if let Some(i) = image.data.iter().position(|v| !v.is_finite()) {
        bail_input!("modelling: image sample {i} is not finite");
    }
    let padded = match backend {
        Backend::Cpu => cpu::model(&plan, &image.data),
        Backend::Gpu(gpu) => gpu::model(gpu, &plan, &image.data, &params.limits).context("GPU modelling")?,
    };
    let mut out = TraceSet::zeros(headers.to_vec(), ns, dt);
    out.t0 = t0;
    prep::finish_adjoint(&padded, &plan, params, &mut out);
    Ok(out)
}
