//! Nonlinear beamforming (NLBF): the 2+2+1 search for local traveltime operators, the enhancement
//! they drive, and NMO with a stretch mute.
//!
//! Paper: Sun, Silvestrov & Bakulin (2022), J. Geophys. Eng. 19, 389-402 (digest section 1).
//!
//! - [`EstimateParams`] and [`Setup`]: the user's parameters, validated, and everything derived from
//!   them and the trace headers: coordinates, the regular grid of NLBF parameter traces, the three
//!   apertures of every parameter trace as index lists, the search tables, the shift bounds.
//! - [`estimate`]: the 2+2+1 search (Table 1) on the CPU reference ([`cpu`]) or the GPU ([`gpu`]:
//!   the paper-faithful kernel or the fast one). Result: [`Estimate`], the picks {A, B, C, D, E}
//!   (as indices into the search tables) and S for every parameter trace and time sample.
//! - [`enhance`]: every trace stacked with its neighbours along the operator interpolated between
//!   the parameter traces.
//! - [`nmo`]: NMO correction with a stretch mute, as the paper applies before the search.
//!
//! Conventions (the same on CPU and GPU, see `gpu_kernels::nlbf`): semblance exactly as eq. (2);
//! fractional shifts by linear interpolation of the zero-extended trace; a shifted sample outside
//! the record is zero but its trace still counts in M; a zero denominator gives S = 0; on equal S
//! the lowest linear parameter index wins ((A, D) index = iA * nD + iD, (B, E) = iB * nE + iE).

pub mod bench;
pub mod cpu;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod gpu;
pub mod nmo_cmp;
pub mod output;
pub mod slopes;
pub mod synth;

use std::fmt;
use std::str::FromStr;

use rayon::prelude::*;

use crate::backend::Backend;
use crate::traces::{TraceHeader, TraceSet};
use gpu_kernels::nlbf as k;
pub use nmo_cmp::nmo_model;

/// Errors with a message that names the parameter, trace or parameter trace at fault.
#[derive(Debug, thiserror::Error)]
pub enum NlbfError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Gpu(#[from] crate::runtime::GpuError),
}

pub type Result<T> = std::result::Result<T, NlbfError>;

fn invalid<T>(msg: impl Into<String>) -> Result<T> { Err(NlbfError::Invalid(msg.into())) }

/// A search range in the paper's `[min : step : max]` form: values min + k * step, k = 0, 1, ...
/// while the value does not pass max (a step that does not divide the range stops before max, as
/// with the paper's 1.33e-5 s/m step: 151 values from -1e-3).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Range {
    pub min: f64,
    pub step: f64,
    pub max: f64,
}

/// Most values one parameter may take (keeps tables and codes small).
pub const MAX_RANGE_VALUES: usize = 100_000;

impl Range {
    pub const fn new(min: f64, step: f64, max: f64) -> Self { Range { min, step, max } }
    /// A single value (step irrelevant).
    pub const fn fixed(v: f64) -> Self { Range { min: v, step: 1.0, max: v } }

    /// Number of values. Assumes [`Range::validate`] passed.
    pub fn count(&self) -> usize {
        // A tolerance of 1e-6 steps keeps [-1e-4 : 1e-5 : 1e-4] at 21 values despite rounding.
        ((self.max - self.min) / self.step + 1e-6).floor() as usize + 1
    }

    /// The values as f32 (computed in f64 from min + k * step, then rounded once).
    pub fn values(&self) -> Vec<f32> { (0..self.count()).map(|k| (self.min + k as f64 * self.step) as f32).collect() }

    /// Checks finiteness, step > 0, max >= min and the value count; `name` names the parameter.
    pub fn validate(&self, name: &str) -> Result<()> {
        if !(self.min.is_finite() && self.step.is_finite() && self.max.is_finite()) {
            return invalid(format!("search range of {name} [{} : {} : {}] is not finite", self.min, self.step, self.max));
        }
        if self.max < self.min {
            return invalid(format!("search range of {name}: max {} is below min {}", self.max, self.min));
        }
        if self.step <= 0.0 {
            return invalid(format!("search range of {name}: step {} must be positive", self.step));
        }
        let n = (self.max - self.min) / self.step;
        if n + 1.0 > MAX_RANGE_VALUES as f64 {
            return invalid(format!("search range of {name} has {:.0} values (at most {MAX_RANGE_VALUES})", n + 1.0));
        }
        Ok(())
    }
}

impl FromStr for Range {
    type Err = String;
    /// `min:step:max` (brackets and spaces optional), or one number for a fixed value.
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let t = s.trim().trim_start_matches('[').trim_end_matches(']');
        let parts: Vec<&str> = t.split(':').map(str::trim).collect();
        let num = |p: &str| p.parse::<f64>().map_err(|e| format!("`{p}` in range `{s}`: {e}"));
        match parts.as_slice() {
            [v] => Ok(Range::fixed(num(v)?)),
            [a, b, c] => Ok(Range::new(num(a)?, num(b)?, num(c)?)),
            _ => Err(format!("range `{s}` is not min:step:max")),
        }
    }
}

impl fmt::Display for Range {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { write!(f, "[{:e} : {:e} : {:e}]", self.min, self.step, self.max) }
}

/// The search space of the five operator parameters (A, B in s/m; C, D, E in s/m^2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchSpace {
    pub a: Range,
    pub b: Range,
    pub c: Range,
    pub d: Range,
    pub e: Range,
}

/// A trace-header field used as a coordinate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordKey {
    ReceiverX,
    ReceiverY,
    SourceX,
    SourceY,
    /// Receiver station number (times the station spacing given with it).
    ReceiverStation,
    /// Source station number (times the station spacing given with it).
    SourceStation,
    MidpointX,
    MidpointY,
    Offset,
    Inline,
    Crossline,
    Cdp,
    Channel,
    Ffid,
}

impl CoordKey {
    pub const ALL: [(&'static str, CoordKey); 14] = [
        ("receiver-x", CoordKey::ReceiverX),
        ("receiver-y", CoordKey::ReceiverY),
        ("source-x", CoordKey::SourceX),
        ("source-y", CoordKey::SourceY),
        ("receiver-station", CoordKey::ReceiverStation),
        ("source-station", CoordKey::SourceStation),
        ("midpoint-x", CoordKey::MidpointX),
        ("midpoint-y", CoordKey::MidpointY),
        ("offset", CoordKey::Offset),
        ("inline", CoordKey::Inline),
        ("crossline", CoordKey::Crossline),
        ("cdp", CoordKey::Cdp),
        ("channel", CoordKey::Channel),
        ("ffid", CoordKey::Ffid),
    ];

    pub fn name(&self) -> &'static str { Self::ALL.iter().find(|(_, k)| k == self).map(|(n, _)| *n).unwrap_or("?") }

    /// The header value (metres for positions, a number for stations and indices).
    pub fn value(&self, h: &TraceHeader) -> f64 {
        match self {
            CoordKey::ReceiverX => h.gx,
            CoordKey::ReceiverY => h.gy,
            CoordKey::SourceX => h.sx,
            CoordKey::SourceY => h.sy,
            CoordKey::ReceiverStation => h.receiver_station as f64,
            CoordKey::SourceStation => h.source_station as f64,
            CoordKey::MidpointX => h.midpoint().0,
            CoordKey::MidpointY => h.midpoint().1,
            CoordKey::Offset => h.offset,
            CoordKey::Inline => h.inline as f64,
            CoordKey::Crossline => h.crossline as f64,
            CoordKey::Cdp => h.cdp as f64,
            CoordKey::Channel => h.channel as f64,
            CoordKey::Ffid => h.ffid as f64,
        }
    }
}

impl FromStr for CoordKey {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Self::ALL.iter().find(|(n, _)| *n == s).map(|(_, k)| *k).ok_or_else(|| {
            format!("unknown coordinate `{s}` (one of: {})", Self::ALL.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", "))
        })
    }
}

/// Which header fields give the operator's x and y, and the scale to metres (1 for positions,
/// the station spacing for station numbers: the paper's field example uses station numbers).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Coordinates {
    pub x: CoordKey,
    pub y: CoordKey,
    pub x_scale: f64,
    pub y_scale: f64,
}

impl Coordinates {
    /// x = receiver position, y = source position along the line (the paper's 2D example).
    pub const LINE_2D: Coordinates = Coordinates { x: CoordKey::ReceiverX, y: CoordKey::SourceX, x_scale: 1.0, y_scale: 1.0 };
    /// x = receiver x, y = source y (a cross-spread: receiver line along x, source line along y).
    pub const CROSS_SPREAD: Coordinates =
        Coordinates { x: CoordKey::ReceiverX, y: CoordKey::SourceY, x_scale: 1.0, y_scale: 1.0 };
    /// Station numbers times the station spacing (m), as in the paper's field example.
    pub fn stations(spacing_x: f64, spacing_y: f64) -> Coordinates {
        Coordinates { x: CoordKey::ReceiverStation, y: CoordKey::SourceStation, x_scale: spacing_x, y_scale: spacing_y }
    }
}

/// A rectangular aperture: full extents in x and y (m). A trace is inside when
/// |x - x0| <= x / 2 and |y - y0| <= y / 2.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Aperture {
    pub x: f64,
    pub y: f64,
}

/// Everything the 2+2+1 search needs besides the data.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EstimateParams {
    pub coords: Coordinates,
    /// Parameter-trace spacing in x and y (m).
    pub spacing_x: f64,
    pub spacing_y: f64,
    /// Apertures of the (A, D) scan, the (B, E) scan and the C scan (Figure 1).
    pub aperture_ad: Aperture,
    pub aperture_be: Aperture,
    pub aperture_c: Aperture,
    /// Time window N in samples (odd, centred on t0: t0 - N/2 .. t0 + N/2).
    pub window: usize,
    pub search: SearchSpace,
}

/// Longest window the CPU reference and the paper kernel accept (samples).
pub const MAX_WINDOW: usize = 127;

/// The search tables: the values of A, B, C, D, E back to back (the layout the kernels read).
#[derive(Debug, Clone, PartialEq)]
pub struct Tables {
    pub vals: Vec<f32>,
    pub na: usize,
    pub nb: usize,
    pub nc: usize,
    pub nd: usize,
    pub ne: usize,
}

impl Tables {
    pub fn new(s: &SearchSpace) -> Tables {
        let (a, b, c, d, e) = (s.a.values(), s.b.values(), s.c.values(), s.d.values(), s.e.values());
        let (na, nb, nc, nd, ne) = (a.len(), b.len(), c.len(), d.len(), e.len());
        let vals = [a, b, c, d, e].concat();
        Tables { vals, na, nb, nc, nd, ne }
    }
    pub fn a(&self) -> &[f32] { &self.vals[..self.na] }
    pub fn b(&self) -> &[f32] { &self.vals[self.na..self.na + self.nb] }
    pub fn c(&self) -> &[f32] { &self.vals[self.na + self.nb..self.na + self.nb + self.nc] }
    pub fn d(&self) -> &[f32] { let o = self.na + self.nb + self.nc; &self.vals[o..o + self.nd] }
    pub fn e(&self) -> &[f32] { let o = self.na + self.nb + self.nc + self.nd; &self.vals[o..o + self.ne] }
    /// Combinations of the (A, D) and (B, E) scans.
    pub fn n_ad(&self) -> usize { self.na * self.nd }
    pub fn n_be(&self) -> usize { self.nb * self.ne }
    /// {A, B, C, D, E} of a packed code.
    pub fn decode(&self, code: u32) -> [f32; 5] {
        let (ia, ib, ic, id, ie) = k::decode_indices(code, self.nb as u32, self.nc as u32, self.nd as u32, self.ne as u32);
        [self.a()[ia as usize], self.b()[ib as usize], self.c()[ic as usize], self.d()[id as usize], self.e()[ie as usize]]
    }
    pub fn code(&self, ad: u32, be: u32, c: u32) -> u32 { k::pack_code(ad, be, c, self.n_be() as u32, self.nc as u32) }
    /// (ad, be, c) of a packed code.
    pub fn split(&self, code: u32) -> (u32, u32, u32) { k::unpack_code(code, self.n_be() as u32, self.nc as u32) }
}

/// The three apertures of every parameter trace as index lists (CSR): the traces of aperture
/// `phase` around parameter trace `p` are `idx[off[phase][p]..off[phase][p + 1]]`, ascending.
#[derive(Debug, Clone, PartialEq)]
pub struct Apertures {
    /// 3 x (np + 1) offsets, phase-major (phase 0 = (A, D), 1 = (B, E), 2 = C).
    pub off: Vec<u32>,
    pub idx: Vec<u32>,
    pub np: usize,
}

impl Apertures {
    pub fn list(&self, phase: usize, p: usize) -> &[u32] {
        let o = phase * (self.np + 1) + p;
        &self.idx[self.off[o] as usize..self.off[o + 1] as usize]
    }
    /// Longest list of one phase, from the offsets alone (also before the lists are filled:
    /// [`Setup::from_headers_deferred`]).
    pub fn max_len(&self, phase: usize) -> usize {
        let o = &self.off[phase * (self.np + 1)..(phase + 1) * (self.np + 1)];
        o.windows(2).map(|w| (w[1] - w[0]) as usize).max().unwrap_or(0)
    }
    /// Total entries of one phase.
    pub fn total(&self, phase: usize) -> usize {
        (self.off[phase * (self.np + 1) + self.np] - self.off[phase * (self.np + 1)]) as usize
    }
}

/// The regular grid of NLBF parameter traces: nodes origin + (i sx, j sy), i < nx, j < ny,
/// covering the traces' bounding box from its lower corner; parameter trace p = j * nx + i.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Grid {
    pub nx: usize,
    pub ny: usize,
    pub sx: f64,
    pub sy: f64,
}

impl Grid {
    pub fn len(&self) -> usize { self.nx * self.ny }
    pub fn is_empty(&self) -> bool { self.len() == 0 }
}

/// Everything derived from the parameters and the headers, shared by every backend.
#[derive(Debug, Clone)]
pub struct Setup {
    pub ns: usize,
    pub dt: f32,
    pub inv_dt: f32,
    /// Half window H (window N = 2H + 1).
    pub half: usize,
    /// Trace coordinates relative to `origin` (m), in f32 as the kernels use them.
    pub tx: Vec<f32>,
    pub ty: Vec<f32>,
    /// Lower corner of the traces' bounding box in the chosen coordinates (m).
    pub origin: (f64, f64),
    pub grid: Grid,
    /// Parameter-trace positions relative to `origin` (m).
    pub px: Vec<f32>,
    pub py: Vec<f32>,
    pub apertures: Apertures,
    pub tables: Tables,
    /// Bound on |shift| (samples) of any combination in each phase's aperture: stage halos.
    pub shift_bound: [i32; 3],
    /// Largest |dx dy| (m^2) in any C-scan aperture (how far one C step moves a trace).
    pub max_abs_dxdy: f64,
    /// Largest dx^2 in any (A, D) aperture and dy^2 in any (B, E) aperture (m^2).
    pub max_dx2_ad: f64,
    pub max_dy2_be: f64,
}

impl Setup {
    pub fn np(&self) -> usize { self.grid.len() }
    pub fn ntr(&self) -> usize { self.tx.len() }
    /// Number of estimations (parameter traces x time samples).
    pub fn estimations(&self) -> usize { self.np() * self.ns }
    /// (dx, dy) of trace `tr` from parameter trace `p` (f32, as every backend computes them).
    #[inline]
    pub fn offset(&self, p: usize, tr: u32) -> (f32, f32) {
        (self.tx[tr as usize] - self.px[p], self.ty[tr as usize] - self.py[p])
    }

    /// Validates the parameters against the data and derives the setup. Errors name the parameter,
    /// trace or parameter trace at fault.
    pub fn new(traces: &TraceSet, params: &EstimateParams) -> Result<Setup> {
        validate_traces(traces)?;
        Self::from_headers(traces, params)
    }

    /// [`Setup::new`] without the scan of the samples for non-finite values (the caller does it,
    /// e.g. while staging the upload); everything else is validated.
    pub fn from_headers(traces: &TraceSet, params: &EstimateParams) -> Result<Setup> {
        Ok(Self::from_headers_deferred(traces, params)?.filled())
    }

    /// [`Setup::from_headers`] from a layout: every trace header and the sampling, `data` not
    /// looked at (an MPI rank plans the whole search before it reads the traces it needs).
    pub fn from_layout(layout: &TraceSet, params: &EstimateParams) -> Result<Setup> {
        validate_layout(layout)?;
        Ok(Self::layout_deferred(layout, params)?.filled())
    }
}

impl DeferredSetup {
    /// The setup with every aperture list filled.
    pub fn filled(self) -> Setup {
        let DeferredSetup { mut setup, fill } = self;
        let mut idx = vec![0u32; fill.total()];
        let [mut piece] = <[_; 1]>::try_from(fill.split(&[(0, fill.np)], &mut idx)).ok().expect("one band");
        fill.fill((0, fill.np), &mut piece, true);
        setup.apertures.idx = idx;
        setup
    }
}

impl Setup {

    /// [`Setup::from_headers`] in two steps: this cheap first pass (coordinates, grid, the aperture
    /// bit sets, every list's length and last entry, the shift bounds and offset maxima: everything
    /// the kernels' plan and the validation need), and the lists themselves, filled afterwards band
    /// by band of parameter traces through [`ApertureFill::fill`]. The returned setup's
    /// `apertures.idx` is empty; its offsets are final. The pipelined engine fills the first band
    /// and launches it while the other bands' lists are filled on a host thread.
    pub fn from_headers_deferred(traces: &TraceSet, params: &EstimateParams) -> Result<DeferredSetup> {
        validate_shape(traces)?;
        Self::layout_deferred(traces, params)
    }

    /// [`Setup::from_headers_deferred`] after the shape checks.
    fn layout_deferred(traces: &TraceSet, params: &EstimateParams) -> Result<DeferredSetup> {
        let ns = traces.ns;
        validate_params(params, ns)?;
        let (tx64, ty64) = coordinates(&traces.headers, &params.coords)?;
        let (xmin, xmax) = min_max(&tx64);
        let (ymin, ymax) = min_max(&ty64);
        let nodes = |extent: f64, s: f64| (extent / s + 1e-9).floor() as usize + 1;
        let grid = Grid { nx: nodes(xmax - xmin, params.spacing_x), ny: nodes(ymax - ymin, params.spacing_y),
            sx: params.spacing_x, sy: params.spacing_y };
        if grid.len() > 1 << 24 {
            return invalid(format!("{} x {} = {} parameter traces (spacing {} x {} m over {:.0} x {:.0} m) is too many",
                grid.nx, grid.ny, grid.len(), params.spacing_x, params.spacing_y, xmax - xmin, ymax - ymin));
        }
        let tx: Vec<f32> = tx64.iter().map(|&x| (x - xmin) as f32).collect();
        let ty: Vec<f32> = ty64.iter().map(|&y| (y - ymin) as f32).collect();
        let mut px = Vec::with_capacity(grid.len());
        let mut py = Vec::with_capacity(grid.len());
        for j in 0..grid.ny {
            for i in 0..grid.nx {
                px.push((i as f64 * grid.sx) as f32);
                py.push((j as f64 * grid.sy) as f32);
            }
        }
        let aps = [params.aperture_ad, params.aperture_be, params.aperture_c];
        let inv_dt = 1.0 / traces.dt;
        let (fill, maxima) = aperture_sets(&tx64, &ty64, (xmin, ymin), &grid, &aps, (&tx, &ty, &px, &py), &params.search)?;
        // Parameter traces with an empty aperture (an offset gap, the spread's edge) are left
        // unestimated ([`Estimate::unestimated`]); only a search with nothing to estimate is an error.
        let names = ["(A, D)", "(B, E)", "C"];
        if let Some((phase, ap)) = aps.iter().enumerate().find(|(phase, _)| (0..grid.len()).all(|p| fill.len(*phase, p) == 0)) {
            return invalid(format!(
                "the {} aperture ({} x {} m) contains no trace at any of the {} parameter traces (spacing {} x {} m): \
                 enlarge the aperture or the parameter-trace spacing", names[phase], ap.x, ap.y, grid.len(), grid.sx, grid.sy));
        }
        let tables = Tables::new(&params.search);
        let dt = traces.dt;
        let (shift_bound, sq) = finish_bounds(maxima, inv_dt as f64)?;
        let apertures = Apertures { off: fill.off.clone(), idx: Vec::new(), np: grid.len() };
        let setup = Setup { ns, dt, inv_dt, half: params.window / 2, tx, ty, origin: (xmin, ymin), grid, px, py, apertures,
            tables, shift_bound, max_abs_dxdy: sq[2], max_dx2_ad: sq[0], max_dy2_be: sq[1] };
        Ok(DeferredSetup { setup, fill })
    }
}

/// The result of [`Setup::from_headers_deferred`]: a setup whose aperture lists are not filled yet
/// (`apertures.idx` empty, everything else final) and what fills them.
pub struct DeferredSetup {
    pub setup: Setup,
    pub fill: ApertureFill,
}

impl Setup {
    /// The setup of parameter traces `ptraces` only (a work item of a multi-device or MPI split):
    /// their positions and aperture lists, with every bound of the whole setup (shift bounds,
    /// largest offsets), so each parameter trace is searched exactly as in the whole run. The
    /// grid becomes one row of `ptraces.len()` parameter traces (only its length is used by the
    /// search; the result goes back into the whole setup's [`Estimate`]).
    pub fn subset(&self, ptraces: std::ops::Range<usize>) -> Setup {
        let ap = &self.apertures;
        let (mut off, mut idx) = (Vec::with_capacity(3 * (ptraces.len() + 1)), Vec::new());
        for phase in 0..3 {
            let o = &ap.off[phase * (ap.np + 1)..(phase + 1) * (ap.np + 1)];
            let (a, b) = (o[ptraces.start] as usize, o[ptraces.end] as usize);
            let base = idx.len() as u32;
            off.extend(o[ptraces.start..=ptraces.end].iter().map(|&v| v - o[ptraces.start] + base));
            idx.extend_from_slice(&ap.idx[a..b]);
        }
        Setup {
            grid: Grid { nx: ptraces.len(), ny: 1, ..self.grid },
            px: self.px[ptraces.clone()].to_vec(),
            py: self.py[ptraces.clone()].to_vec(),
            apertures: Apertures { off, idx, np: ptraces.len() },
            tx: self.tx.clone(),
            ty: self.ty.clone(),
            tables: self.tables.clone(),
            ..*self
        }
    }
}

impl Setup {
    /// [`Setup::subset`] of parameter traces `ptraces` that knows only the traces their apertures
    /// hold: those input traces (ascending input numbers, returned) become traces 0, 1, ... of
    /// the subset, its aperture lists renumbered (still ascending, so every sum runs in the same
    /// order and every pick and semblance is the whole search's, bit for bit). An MPI rank reads
    /// only these traces.
    pub fn subset_reading(&self, ptraces: std::ops::Range<usize>) -> (Setup, Vec<usize>) {
        let mut sub = self.subset(ptraces);
        let mut wanted: Vec<u32> = sub.apertures.idx.clone();
        wanted.par_sort_unstable();
        wanted.dedup();
        // Input trace number -> its place among the wanted ones.
        let mut place = vec![u32::MAX; self.ntr()];
        for (k, &t) in wanted.iter().enumerate() {
            place[t as usize] = k as u32;
        }
        sub.apertures.idx.iter_mut().for_each(|t| *t = place[*t as usize]);
        sub.tx = wanted.iter().map(|&t| self.tx[t as usize]).collect();
        sub.ty = wanted.iter().map(|&t| self.ty[t as usize]).collect();
        (sub, wanted.into_iter().map(|t| t as usize).collect())
    }
}

/// Work items of a multi-device (`--gpus`) or MPI search: contiguous ranges of parameter traces
/// (each parameter trace's search is independent, so the split changes no result), fixed by
/// their count alone.
pub fn work_items(np: usize) -> Vec<std::ops::Range<usize>> { crate::exec::split::even_ranges(np, WORK_ITEMS) }

/// Items of [`work_items`].
pub const WORK_ITEMS: usize = 16;

/// The variant the whole search runs with on `backend`: the CPU reference, or on a GPU the fast
/// kernels where they apply to the whole setup (then to every subset: its apertures are no
/// larger), else the paper-faithful kernel. Decided once, so every item runs the same code.
pub fn variant_for(backend: &Backend, setup: &Setup) -> Variant {
    match backend {
        Backend::Cpu => Variant::Cpu,
        Backend::Gpu(g) => match gpu::FastPlan::new(g, setup, None) {
            Ok(_) => Variant::GpuFast,
            Err(why) => {
                eprintln!("nlbf: the fast GPU kernels do not apply ({why}); using the paper-faithful kernel");
                Variant::GpuPaper
            }
        },
    }
}

/// One device of a multi-device search. On a GPU running the fast kernels, the gather, the
/// trace coordinates and the search tables go up once (with the first item the device takes)
/// and stay for all its items; only each item's parameter traces and apertures are uploaded.
pub struct NlbfDevice {
    pub backend: Backend,
    resident: std::sync::Mutex<Option<gpu::Resident>>,
}

impl NlbfDevice {
    pub fn new(backend: &Backend) -> NlbfDevice { NlbfDevice { backend: backend.clone(), resident: std::sync::Mutex::new(None) } }
}

/// One work item on `dev`: (codes, semblance) of parameter traces `ptraces`, `[i * ns + t]`.
/// `variant` is that of the whole search ([`variant_for`]); a CPU device runs the reference.
pub fn estimate_item(variant: Variant, dev: &NlbfDevice, setup: &Setup, data: &[f32], ptraces: std::ops::Range<usize>)
    -> Result<(Vec<u32>, Vec<f32>)> {
    let n = ptraces.len() * setup.ns;
    let (mut code, mut sem) = (vec![0u32; n], vec![0f32; n]);
    estimate_item_into(variant, dev, setup, data, ptraces, &mut code, &mut sem)?;
    Ok((code, sem))
}

/// [`estimate_item`] writing into `code` and `sem` (`ptraces.len() * ns` each): on a GPU running
/// the fast kernels the results are downloaded straight there (no intermediate vectors).
pub fn estimate_item_into(variant: Variant, dev: &NlbfDevice, setup: &Setup, data: &[f32], ptraces: std::ops::Range<usize>,
    code: &mut [u32], sem: &mut [f32]) -> Result<()> {
    let list = || ptraces.clone().collect::<Vec<usize>>();
    let put = |(c, s): (Vec<u32>, Vec<f32>), code: &mut [u32], sem: &mut [f32]| -> Result<()> {
        if c.len() != code.len() || s.len() != sem.len() {
            return invalid(format!("work item {ptraces:?}: {} picks for {} outputs", c.len(), code.len()));
        }
        code.copy_from_slice(&c);
        sem.copy_from_slice(&s);
        Ok(())
    };
    match (&dev.backend, variant) {
        (Backend::Cpu, _) | (_, Variant::Cpu) => put(cpu::estimate_subset(setup, data, &list()), code, sem),
        (Backend::Gpu(g), Variant::GpuPaper) => put(gpu::estimate_paper_subset(g, setup, data, &list())?, code, sem),
        (Backend::Gpu(g), Variant::GpuFast) => {
            let mut r = dev.resident.lock().map_err(|_| NlbfError::Invalid("a device thread panicked".into()))?;
            if r.is_none() {
                *r = Some(gpu::Resident::upload(g, setup, data)?);
            }
            gpu::estimate_fast_resident_into(g, &setup.subset(ptraces), r.as_mut().unwrap(), code, sem)
        }
    }
}

/// The search over several devices: (codes, semblance) of every parameter trace of `setup`,
/// the [`work_items`] going to the devices as they free up.
pub fn estimate_setup_multi(devices: &[NlbfDevice], setup: &Setup, data: &[f32], variant: Variant)
    -> Result<(Vec<u32>, Vec<f32>)> {
    let n = setup.estimations();
    // Written (page faults taken) on all cores, not inside the downloads.
    let mut code = Vec::new();
    rayon::iter::repeat_n(0u32, n).collect_into_vec(&mut code);
    let mut sem = Vec::new();
    rayon::iter::repeat_n(0f32, n).collect_into_vec(&mut sem);
    estimate_setup_multi_into(devices, setup, data, variant, &mut code, &mut sem)?;
    Ok((code, sem))
}

/// [`estimate_setup_multi`] into `code` and `sem` (`setup.estimations()` each). Each work item is a
/// contiguous range of parameter traces, so its results are a contiguous part of the outputs: the
/// device threads write (on a GPU: download) them in place, in parallel, and nothing is left to
/// fold on the calling thread (the result is the concatenation, bit for bit, for any number of
/// devices and any timing).
pub fn estimate_setup_multi_into(devices: &[NlbfDevice], setup: &Setup, data: &[f32], variant: Variant, code: &mut [u32],
    sem: &mut [f32]) -> Result<()> {
    if devices.is_empty() {
        return invalid("nlbf: no device to search on");
    }
    let (ns, n) = (setup.ns, setup.estimations());
    if code.len() != n || sem.len() != n {
        return invalid(format!("nlbf: {} / {} outputs for {n} estimations", code.len(), sem.len()));
    }
    let items = work_items(setup.np());
    type Slot<'a> = std::sync::Mutex<Option<(&'a mut [u32], &'a mut [f32])>>;
    let mut slots: Vec<Slot> = Vec::with_capacity(items.len());
    let (mut rc, mut rs) = (code, sem);
    for r in &items {
        let (c, tc) = rc.split_at_mut(r.len() * ns);
        let (s, ts) = rs.split_at_mut(r.len() * ns);
        slots.push(std::sync::Mutex::new(Some((c, s))));
        (rc, rs) = (tc, ts);
    }
    let bar = crate::progress::work(items.len() as u64, "nlbf work items");
    crate::exec::split::fold_on_devices(devices, &items, (),
        |dev, i, r| {
            bar.inc(1);
            let (c, s) = slots[i].lock().map_err(|_| anyhow::anyhow!("output slot poisoned"))?.take()
                .ok_or_else(|| anyhow::anyhow!("work item {i} ran twice"))?;
            estimate_item_into(variant, dev, setup, data, r.clone(), c, s).map_err(|e| anyhow::anyhow!("parameter traces {r:?}: {e}"))
        },
        |_, _, ()| Ok(()))
        .map_err(|e| NlbfError::Invalid(format!("{e:#}")))
}

/// [`estimate`] over several devices (`--gpus`): the parameter traces are cut into
/// [`work_items`] that go to the devices as they free up (one host thread per device); every
/// parameter trace's picks and semblance are those of the single-device search, bit for bit.
/// `variant` forces a GPU variant on the GPUs (`None`: [`variant_for`]); CPU devices run the
/// reference.
pub fn estimate_multi(backends: &[Backend], traces: &TraceSet, params: &EstimateParams, variant: Option<Variant>)
    -> Result<Estimate> {
    if backends.is_empty() {
        return invalid("nlbf: no device to search on");
    }
    let setup = Setup::new(traces, params)?;
    let variant = match variant {
        Some(v) => v,
        None => backends.iter().find(|b| b.gpu().is_some()).map_or(Variant::Cpu, |b| variant_for(b, &setup)),
    };
    let devices: Vec<NlbfDevice> = backends.iter().map(NlbfDevice::new).collect();
    let (code, sem) = estimate_setup_multi(&devices, &setup, &traces.data, variant)?;
    Ok(Estimate::from_setup(&setup, code, sem))
}

/// `TraceSet::validate`'s checks, with the scan for non-finite samples in parallel (it reads the
/// whole gather, so it is part of every end-to-end run).
pub fn validate_traces(t: &TraceSet) -> Result<()> {
    validate_shape(t)?;
    let bad = t.data.par_chunks(t.ns).enumerate().find_first(|(_, tr)| tr.iter().any(|v| !v.is_finite()));
    if let Some((i, tr)) = bad {
        let j = tr.iter().position(|v| !v.is_finite()).unwrap_or(0);
        return invalid(format!("input traces: trace {i} sample {j} is not finite"));
    }
    Ok(())
}

/// Everything [`validate_traces`] checks but the samples themselves.
pub fn validate_shape(t: &TraceSet) -> Result<()> {
    validate_layout(t)?;
    if t.data.len() != t.headers.len() * t.ns {
        return invalid(format!("input traces: {} samples for {} traces of {} samples", t.data.len(), t.headers.len(), t.ns));
    }
    Ok(())
}

/// The checks of [`validate_shape`] on the headers and the sampling alone.
fn validate_layout(t: &TraceSet) -> Result<()> {
    if t.headers.is_empty() {
        return invalid("input traces: the gather has no traces");
    }
    if t.ns == 0 {
        return invalid("input traces: traces have zero samples");
    }
    if !(t.dt > 0.0) || !t.dt.is_finite() {
        return invalid(format!("input traces: sample interval {} s is not positive", t.dt));
    }
    Ok(())
}

fn validate_params(p: &EstimateParams, ns: usize) -> Result<()> {
    for (name, v) in [("parameter-trace spacing in x", p.spacing_x), ("parameter-trace spacing in y", p.spacing_y)] {
        if !(v.is_finite() && v > 0.0) {
            return invalid(format!("{name} is {v} m: it must be positive"));
        }
    }
    for (name, ap) in [("(A, D)", p.aperture_ad), ("(B, E)", p.aperture_be), ("C", p.aperture_c)] {
        if !(ap.x.is_finite() && ap.y.is_finite() && ap.x >= 0.0 && ap.y >= 0.0) {
            return invalid(format!("the {name} aperture {} x {} m must be finite and non-negative", ap.x, ap.y));
        }
    }
    for (name, s) in [("x", p.coords.x_scale), ("y", p.coords.y_scale)] {
        if !(s.is_finite() && s != 0.0) {
            return invalid(format!("the {name} coordinate scale {s} must be finite and non-zero"));
        }
    }
    if p.window == 0 || p.window % 2 == 0 {
        return invalid(format!("time window of {} samples: it must be odd (centred on t0)", p.window));
    }
    if p.window > ns {
        return invalid(format!("time window of {} samples is longer than the traces ({ns} samples)", p.window));
    }
    if p.window > MAX_WINDOW {
        return invalid(format!("time window of {} samples: at most {MAX_WINDOW}", p.window));
    }
    let s = &p.search;
    for (name, r) in [("A", s.a), ("B", s.b), ("C", s.c), ("D", s.d), ("E", s.e)] {
        r.validate(name)?;
    }
    let n_ad = s.a.count() as u64 * s.d.count() as u64;
    let n_be = s.b.count() as u64 * s.e.count() as u64;
    if n_ad * n_be * s.c.count() as u64 > u32::MAX as u64 {
        return invalid(format!("search space of {n_ad} (A, D) x {n_be} (B, E) x {} C combinations does not fit the \
            32-bit pick code", s.c.count()));
    }
    Ok(())
}

fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

/// Coordinates (m) of every trace from the chosen header fields; errors when the x field is missing
/// (zero on every trace) or a value is not finite. A y that is zero on every trace is a 2-D line
/// (one shot, or a line along x): its axis is degenerate and the search fixes its slopes at 0.
pub fn coordinates(headers: &[TraceHeader], c: &Coordinates) -> Result<(Vec<f64>, Vec<f64>)> {
    let get = |key: CoordKey, scale: f64, axis: &str| -> Result<Vec<f64>> {
        let v: Vec<f64> = headers.iter().map(|h| key.value(h) * scale).collect();
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return invalid(format!("trace {i}: {axis} coordinate ({}) is not finite", key.name()));
        }
        if axis == "x" && headers.len() > 1 && v.iter().all(|&x| x == 0.0) {
            return invalid(format!(
                "the {axis} coordinate ({}) is zero on every trace: the header field is missing; choose another \
                 field (e.g. --{axis} receiver-station --{axis}-scale <station spacing>, or --{axis} offset)", key.name()));
        }
        Ok(v)
    };
    Ok((get(c.x, c.x_scale, "x")?, get(c.y, c.y_scale, "y")?))
}

/// The apertures of every parameter trace, through a bucket grid of the traces (cells of the
/// parameter-trace spacing), in parallel over parameter traces. Lists are ascending trace indices.
/// The reference for [`aperture_sets`] and [`ApertureFill`] (tests).
#[cfg(test)]
fn build_apertures(x: &[f64], y: &[f64], origin: (f64, f64), upper: (f64, f64), grid: &Grid, aps: &[Aperture; 3])
    -> Result<Apertures> {
    let np = grid.len();
    let (cx, cy) = (grid.sx, grid.sy);
    let bx = ((upper.0 - origin.0) / cx).floor() as usize + 1;
    let by = ((upper.1 - origin.1) / cy).floor() as usize + 1;
    // Buckets in CSR form (trace indices ascending within a bucket).
    let cell = |i: usize| -> usize {
        let ix = (((x[i] - origin.0) / cx).floor() as usize).min(bx - 1);
        let iy = (((y[i] - origin.1) / cy).floor() as usize).min(by - 1);
        iy * bx + ix
    };
    let mut count = vec![0u32; bx * by + 1];
    let cells: Vec<usize> = (0..x.len()).map(cell).collect();
    for &c in &cells {
        count[c + 1] += 1;
    }
    for i in 1..count.len() {
        count[i] += count[i - 1];
    }
    let mut fill = count.clone();
    let mut bucket = vec![0u32; x.len()];
    for (i, &c) in cells.iter().enumerate() {
        bucket[fill[c] as usize] = i as u32;
        fill[c] += 1;
    }
    let mut off = Vec::with_capacity(3 * (np + 1));
    let mut idx = Vec::new();
    for ap in aps {
        // Half extents with a relative slack of 1e-9 so that traces exactly on the edge are in.
        let (hx, hy) = (ap.x / 2.0 * (1.0 + 1e-9) + 1e-9, ap.y / 2.0 * (1.0 + 1e-9) + 1e-9);
        let lists: Vec<Vec<u32>> = (0..np)
            .into_par_iter()
            .map(|p| {
                let (x0, y0) = (origin.0 + (p % grid.nx) as f64 * grid.sx, origin.1 + (p / grid.nx) as f64 * grid.sy);
                let ix0 = (((x0 - hx - origin.0) / cx).floor().max(0.0)) as usize;
                let ix1 = ((((x0 + hx - origin.0) / cx).floor().max(0.0)) as usize).min(bx - 1);
                let iy0 = (((y0 - hy - origin.1) / cy).floor().max(0.0)) as usize;
                let iy1 = ((((y0 + hy - origin.1) / cy).floor().max(0.0)) as usize).min(by - 1);
                let mut l = Vec::new();
                for iy in iy0..=iy1 {
                    for ix in ix0..=ix1.max(ix0) {
                        let b = iy * bx + ix;
                        for &t in &bucket[count[b] as usize..count[b + 1] as usize] {
                            if (x[t as usize] - x0).abs() <= hx && (y[t as usize] - y0).abs() <= hy {
                                l.push(t);
                            }
                        }
                    }
                }
                l.sort_unstable();
                l
            })
            .collect();
        let base = idx.len() as u64;
        off.push(base as u32);
        let mut total = base;
        for l in &lists {
            total += l.len() as u64;
            if total > u32::MAX as u64 {
                return invalid("aperture lists exceed 2^32 entries: reduce the apertures or the number of parameter traces");
            }
            off.push(total as u32);
        }
        for l in lists {
            idx.extend_from_slice(&l);
        }
    }
    // Offsets are per phase with np + 1 entries each (the pushes above give exactly that).
    debug_assert_eq!(off.len(), 3 * (np + 1));
    Ok(Apertures { off, idx, np })
}

/// Bound (samples) on |shift| for each phase over every aperture entry and every combination the
/// phase can use, plus a margin of 2 for the floor and the interpolation neighbour; and the largest
/// dx^2 (phase 0), dy^2 (phase 1), |dx dy| (phase 2) of each phase's apertures. The reference for
/// the bounds [`aperture_sets`] derives per trace (tests).
#[cfg(test)]
fn shift_bounds(tx: &[f32], ty: &[f32], px: &[f32], py: &[f32], ap: &Apertures, s: &SearchSpace, inv_dt: f64)
    -> Result<([i32; 3], [f64; 3])> {
    let amax = |r: &Range| r.min.abs().max(r.max.abs());
    let (a, b, c, d, e) = (amax(&s.a), amax(&s.b), amax(&s.c), amax(&s.d), amax(&s.e));
    let mut out = [0i32; 3];
    let mut sq = [0.0f64; 3];
    for (phase, o) in out.iter_mut().enumerate() {
        let (m, mxy) = (0..ap.np)
            .into_par_iter()
            .map(|p| {
                let (mut m, mut mxy) = (0.0f64, 0.0f64);
                for &t in ap.list(phase, p) {
                    let dx = (tx[t as usize] - px[p]).abs() as f64;
                    let dy = (ty[t as usize] - py[p]).abs() as f64;
                    let dt = match phase {
                        0 => a * dx + d * dx * dx,
                        1 => b * dy + e * dy * dy,
                        _ => a * dx + b * dy + c * dx * dy + d * dx * dx + e * dy * dy,
                    };
                    m = m.max(dt);
                    mxy = mxy.max(match phase {
                        0 => dx * dx,
                        1 => dy * dy,
                        _ => dx * dy,
                    });
                }
                (m, mxy)
            })
            .reduce(|| (0.0, 0.0), |x, y| (x.0.max(y.0), x.1.max(y.1)));
        sq[phase] = mxy;
        let sm = m * inv_dt * (1.0 + 1e-5);
        if sm > 1e6 {
            return invalid(format!("the search space shifts traces by up to {sm:.0} samples in the {} scan: \
                the ranges of A..E or the apertures are far too large", ["(A, D)", "(B, E)", "C"][phase]));
        }
        *o = sm.ceil() as i32 + 2;
    }
    Ok((out, sq))
}

/// Largest |moveout| (s) over every combination phase `phase` can use, and the phase's offset
/// product (dx^2, dy^2, |dx dy|), of one aperture entry at |dx|, |dy| (m); `amax` = largest |A..E|.
#[inline]
fn entry_bound(phase: usize, dx: f64, dy: f64, amax: &[f64; 5]) -> (f64, f64) {
    let [a, b, c, d, e] = *amax;
    match phase {
        0 => (a * dx + d * dx * dx, dx * dx),
        1 => (b * dy + e * dy * dy, dy * dy),
        _ => (a * dx + b * dy + c * dx * dy + d * dx * dx + e * dy * dy, dx * dy),
    }
}

/// Shift bounds (samples, margin 2) and offset products per phase from the per-phase maxima of
/// [`entry_bound`]; errors on absurd search spaces.
fn finish_bounds(maxima: [(f64, f64); 3], inv_dt: f64) -> Result<([i32; 3], [f64; 3])> {
    let mut out = [0i32; 3];
    let mut sq = [0.0f64; 3];
    for (phase, &(m, mxy)) in maxima.iter().enumerate() {
        sq[phase] = mxy;
        let sm = m * inv_dt * (1.0 + 1e-5);
        if sm > 1e6 {
            return invalid(format!("the search space shifts traces by up to {sm:.0} samples in the {} scan: \
                the ranges of A..E or the apertures are far too large", ["(A, D)", "(B, E)", "C"][phase]));
        }
        out[phase] = sm.ceil() as i32 + 2;
    }
    Ok((out, sq))
}

/// The bit sets of one axis of one phase's aperture search: one set of traces per grid column
/// (axis x) or row (axis y), with the first and one-past-last non-zero word of each.
struct AxisSets {
    bits: Vec<u64>,
    span: Vec<(usize, usize)>,
}

/// Marks every trace (coordinate `v`) in the set of each node o + i step (i < n) with |v - node|
/// <= h (exactly the reference predicate; candidate nodes from the division with one node of slack
/// each way). Also returns, per trace, the largest |rel - nodes[i]| (f32, the offsets the kernels
/// use) over the nodes whose set it joined, -1 where none. In parallel over blocks of traces (each
/// block owns its words of every set), as this is most of the setup's first pass; a trace with the
/// coordinate of the one before it (sorted gathers: every trace of a shot on a cross-spread's y)
/// joins the same nodes without the search.
#[allow(clippy::too_many_arguments)]
fn axis_sets(v: &[f64], o: f64, step: f64, n: usize, h: f64, rel: &[f32], nodes: &[f32], words: usize) -> (AxisSets, Vec<f32>) {
    // Words (of 64 traces) per block.
    const BW: usize = 8;
    let parts: Vec<(Vec<u64>, Vec<f32>)> = (0..words.div_ceil(BW)).into_par_iter().map(|k| {
        let (w0, w1) = (k * BW, ((k + 1) * BW).min(words));
        let (t0, t1) = (w0 * 64, (w1 * 64).min(v.len()));
        let nw = w1 - w0;
        let mut bits = vec![0u64; n * nw];
        let mut far = vec![-1.0f32; t1 - t0];
        // The nodes a trace joins are an interval: c - node_i is non-increasing in i (rounded
        // or not), so the exact predicate holds from the first passing candidate to the last; and
        // |rel - nodes[i]| is largest at one of the interval's ends.
        let inside = |c: f64, i: usize| (c - (o + i as f64 * step)).abs() <= h;
        let (mut prev, mut hits) = (f64::NAN, 1..0);
        for t in t0..t1 {
            let c = v[t];
            if c != prev {
                let lo = (((c - h - o) / step).floor() - 1.0).max(0.0) as usize;
                let hi = ((((c + h - o) / step).ceil() + 1.0).max(0.0) as usize).min(n - 1);
                hits = match (lo..=hi).find(|&i| inside(c, i)) {
                    Some(a) => a..(a..=hi).rev().find(|&i| inside(c, i)).unwrap() + 1,
                    None => 1..0,
                };
                prev = c;
            }
            if !hits.is_empty() {
                let (word, bit) = (t / 64 - w0, 1u64 << (t % 64));
                for i in hits.clone() {
                    bits[i * nw + word] |= bit;
                }
                far[t - t0] = (rel[t] - nodes[hits.start]).abs().max((rel[t] - nodes[hits.end - 1]).abs());
            }
        }
        (bits, far)
    }).collect();
    let mut bits = vec![0u64; n * words];
    let mut far = Vec::with_capacity(v.len());
    for (k, (b, f)) in parts.iter().enumerate() {
        let (w0, nw) = (k * BW, b.len() / n.max(1));
        for i in 0..n {
            bits[i * words + w0..i * words + w0 + nw].copy_from_slice(&b[i * nw..(i + 1) * nw]);
        }
        far.extend_from_slice(f);
    }
    let span = bits.chunks(words).map(|b| match b.iter().position(|&w| w != 0) {
        Some(f) => (f, words - b.iter().rev().position(|&w| w != 0).unwrap()),
        None => (0, 0),
    }).collect();
    (AxisSets { bits, span }, far)
}

/// The aperture lists of a setup, to be filled (all at once or band by band of parameter traces):
/// the per-column and per-row bit sets of each phase, and the lists' offsets and last entries from
/// the first pass. A list is the AND of its column's and row's sets, read out in ascending order.
pub struct ApertureFill {
    /// The distinct column (x) and row (y) sets (phases with the same half extent share them).
    sets: Vec<AxisSets>,
    /// Per phase, which of `sets` are its column and its row sets.
    which: [(usize, usize); 3],
    words: usize,
    nx: usize,
    /// Parameter traces.
    pub np: usize,
    /// Offsets of every list, as [`Apertures::off`].
    pub off: Vec<u32>,
    /// Last (largest) trace of every list, `[phase * np + p]` (0 for an empty list).
    last: Vec<u32>,
}

impl ApertureFill {
    /// Entries of all lists.
    pub fn total(&self) -> usize { self.off[3 * (self.np + 1) - 1] as usize }
    /// Length of list (phase, p).
    pub fn len(&self, phase: usize, p: usize) -> usize {
        let o = phase * (self.np + 1) + p;
        (self.off[o + 1] - self.off[o]) as usize
    }
    /// The largest trace index of list (phase, p); `None` for an empty list.
    pub fn last(&self, phase: usize, p: usize) -> Option<u32> {
        (self.len(phase, p) > 0).then(|| self.last[phase * self.np + p])
    }
    /// Entries of band `(p0, p1)` in phase `phase` (where they start in the index list, and how many).
    pub fn band_range(&self, phase: usize, (p0, p1): (usize, usize)) -> std::ops::Range<usize> {
        let o = phase * (self.np + 1);
        self.off[o + p0] as usize..self.off[o + p1] as usize
    }
    /// Splits `idx` (the whole index list, [`ApertureFill::total`] entries) into the pieces of
    /// contiguous `bands` (ascending, tiling 0..np): `[band][phase]` = the band's lists of that phase.
    pub fn split<'a>(&self, bands: &[(usize, usize)], idx: &'a mut [u32]) -> Vec<[&'a mut [u32]; 3]> {
        assert_eq!(idx.len(), self.total(), "ApertureFill::split: index list of the wrong length");
        let mut per: Vec<Vec<&'a mut [u32]>> = (0..bands.len()).map(|_| Vec::with_capacity(3)).collect();
        let mut rest = idx;
        for phase in 0..3 {
            // Bands of one phase follow each other in the list; phases follow each other too.
            for (b, &band) in bands.iter().enumerate() {
                let r = self.band_range(phase, band);
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(r.len());
                per[b].push(head);
                rest = tail;
            }
        }
        per.into_iter().map(|v| <[&mut [u32]; 3]>::try_from(v).ok().unwrap()).collect()
    }
    /// Fills the lists of parameter traces p0..p1 of every phase: `out[phase]` receives
    /// `idx[band_range(phase, (p0, p1))]`. On all cores (`parallel`) or on the calling thread only.
    pub fn fill(&self, (p0, p1): (usize, usize), out: &mut [&mut [u32]; 3], parallel: bool) {
        let mut lists: Vec<(usize, usize, &mut [u32])> = Vec::with_capacity(3 * (p1 - p0));
        for (phase, o) in out.iter_mut().enumerate() {
            assert_eq!(o.len(), self.band_range(phase, (p0, p1)).len(), "ApertureFill::fill: piece of the wrong length");
            let mut rest: &mut [u32] = o;
            for p in p0..p1 {
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(self.len(phase, p));
                lists.push((phase, p, head));
                rest = tail;
            }
        }
        let one = |(phase, p, out): (usize, usize, &mut [u32])| {
            let (cs, rs) = (&self.sets[self.which[phase].0], &self.sets[self.which[phase].1]);
            let (i, j) = (p % self.nx, p / self.nx);
            let (w0, w1) = and_range(cs, rs, i, j);
            let mut k = 0;
            for w in w0..w1 {
                let mut bits = cs.bits[i * self.words + w] & rs.bits[j * self.words + w];
                while bits != 0 {
                    out[k] = (w * 64 + bits.trailing_zeros() as usize) as u32;
                    bits &= bits - 1;
                    k += 1;
                }
            }
            debug_assert_eq!(k, out.len());
        };
        if parallel {
            lists.into_par_iter().with_min_len(16).for_each(one);
        } else {
            lists.into_iter().for_each(one);
        }
    }
}

/// Words where both the column set `i` and the row set `j` have bits.
fn and_range(cs: &AxisSets, rs: &AxisSets, i: usize, j: usize) -> (usize, usize) {
    let (a, b) = (cs.span[i], rs.span[j]);
    (a.0.max(b.0), a.1.min(b.1))
}

/// The first pass of the aperture search: per phase, per-column and per-row bit sets of the traces
/// (each trace tested, with the exact reference predicate, only against the grid columns and rows
/// next to it), every list's length (popcount of the AND of its column's and row's sets) and last
/// entry, and the maxima of [`entry_bound`] over every list entry. Those come without the lists:
/// the entries of trace t are exactly its columns x its rows (a list is an AND of the two), and
/// [`entry_bound`] is non-decreasing in |dx| and |dy| (sums and products of non-negative terms,
/// each correctly rounded), so its maximum over t's entries is its value at t's largest |dx| and
/// |dy|, bit for bit the maximum over the lists (tested against the reference). About 10x less work
/// than testing every trace of the neighbouring buckets per parameter trace and sorting; the
/// lists are filled afterwards ([`ApertureFill::fill`], band by band if wanted): the host setup is
/// on the critical path of the pipelined engine.
fn aperture_sets(x: &[f64], y: &[f64], origin: (f64, f64), grid: &Grid, aps: &[Aperture; 3],
    rel: (&[f32], &[f32], &[f32], &[f32]), s: &SearchSpace) -> Result<(ApertureFill, [(f64, f64); 3])> {
    let (tx, ty, px, py) = rel;
    let np = grid.len();
    let words = x.len().div_ceil(64);
    let amax = |r: &Range| r.min.abs().max(r.max.abs());
    let amax = [amax(&s.a), amax(&s.b), amax(&s.c), amax(&s.d), amax(&s.e)];
    let cols = &px[..grid.nx];
    let rows: Vec<f32> = (0..grid.ny).map(|j| py[j * grid.nx]).collect();
    let half = |ap: &Aperture| (ap.x / 2.0 * (1.0 + 1e-9) + 1e-9, ap.y / 2.0 * (1.0 + 1e-9) + 1e-9);
    // The distinct (axis, half extent) pairs (the cross-spread's C aperture shares its x extent
    // with (A, D) and its y extent with (B, E)), each set built once.
    let mut keys: Vec<(usize, u64)> = Vec::with_capacity(6);
    let mut which = [(0usize, 0usize); 3];
    for (phase, ap) in aps.iter().enumerate() {
        let (hx, hy) = half(ap);
        let mut key = |k: (usize, u64)| keys.iter().position(|&q| q == k).unwrap_or_else(|| { keys.push(k); keys.len() - 1 });
        which[phase] = (key((0, hx.to_bits())), key((1, hy.to_bits())));
    }
    let built: Vec<(AxisSets, Vec<f32>)> = keys.par_iter().map(|&(axis, h)| match axis {
        0 => axis_sets(x, origin.0, grid.sx, grid.nx, f64::from_bits(h), tx, cols, words),
        _ => axis_sets(y, origin.1, grid.sy, grid.ny, f64::from_bits(h), ty, &rows, words),
    }).collect();
    // A trace is in some list only when it is in a column set and in a row set.
    let maxima: Vec<(f64, f64)> = (0..3).into_par_iter().map(|phase| {
        let (fx, fy) = (&built[which[phase].0].1, &built[which[phase].1].1);
        fx.iter().zip(fy).filter(|&(&dx, &dy)| dx >= 0.0 && dy >= 0.0)
            .map(|(&dx, &dy)| entry_bound(phase, dx as f64, dy as f64, &amax))
            .fold((0.0f64, 0.0f64), |a, b| (a.0.max(b.0), a.1.max(b.1)))
    }).collect();
    let sets: Vec<AxisSets> = built.into_iter().map(|(s, _)| s).collect();
    // Length and last entry of every (phase, parameter trace), then the offsets.
    let mut off = Vec::with_capacity(3 * (np + 1));
    let mut last = Vec::with_capacity(3 * np);
    let mut total = 0u64;
    for &(ci, ri) in &which {
        let (cs, rs) = (&sets[ci], &sets[ri]);
        let counts: Vec<(u32, u32)> = (0..np).into_par_iter().with_min_len(64).map(|p| {
            let (i, j) = (p % grid.nx, p / grid.nx);
            let (w0, w1) = and_range(cs, rs, i, j);
            let word = |w: usize| cs.bits[i * words + w] & rs.bits[j * words + w];
            let n = (w0..w1).map(|w| word(w).count_ones()).sum();
            let l = (w0..w1).rev().find(|&w| word(w) != 0).map_or(0, |w| (w * 64 + 63 - word(w).leading_zeros() as usize) as u32);
            (n, l)
        }).collect();
        off.push(total as u32);
        for (c, l) in counts {
            total += c as u64;
            if total > u32::MAX as u64 {
                return invalid("aperture lists exceed 2^32 entries: reduce the apertures or the number of parameter traces");
            }
            off.push(total as u32);
            last.push(l);
        }
    }
    let fill = ApertureFill { sets, which, words, nx: grid.nx, np, off, last };
    Ok((fill, [maxima[0], maxima[1], maxima[2]]))
}

/// The result of the 2+2+1 search: for every parameter trace p (grid order, x fastest) and time
/// sample t, the packed pick (indices of A..E in the search tables) and the semblance S.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    pub grid: Grid,
    pub ns: usize,
    pub dt: f32,
    /// Lower corner of the grid in the chosen coordinates (m).
    pub origin: (f64, f64),
    pub tables: Tables,
    /// `code[p * ns + t]`, see `gpu_kernels::nlbf::pack_code`.
    pub code: Vec<u32>,
    /// `semblance[p * ns + t]`.
    pub semblance: Vec<f32>,
    /// `[p]`: parameter trace p has an empty aperture and was not estimated (S = 0, its A..E
    /// volumes NaN; traces whose operator would come from it are not enhanced).
    pub unestimated: Vec<bool>,
}

/// One of the six output volumes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Param {
    A,
    B,
    C,
    D,
    E,
    S,
}

impl Param {
    pub const ALL: [Param; 6] = [Param::A, Param::B, Param::C, Param::D, Param::E, Param::S];
    pub fn name(&self) -> &'static str { ["A", "B", "C", "D", "E", "S"][*self as usize] }
    /// Units of the volume.
    pub fn unit(&self) -> &'static str { ["s/m", "s/m", "s/m^2", "s/m^2", "s/m^2", "1"][*self as usize] }
}

impl Estimate {
    pub fn from_setup(setup: &Setup, code: Vec<u32>, mut semblance: Vec<f32>) -> Estimate {
        let unestimated = slopes::unestimated(&setup.apertures.off, setup.np());
        if semblance.len() == setup.estimations() {
            for (p, _) in unestimated.iter().enumerate().filter(|(_, u)| **u) {
                semblance[p * setup.ns..(p + 1) * setup.ns].fill(0.0);
            }
        }
        Estimate { grid: setup.grid, ns: setup.ns, dt: setup.dt, origin: setup.origin, tables: setup.tables.clone(), code,
            semblance, unestimated }
    }
    /// Parameter traces left unestimated (empty aperture).
    pub fn unestimated_count(&self) -> usize { self.unestimated.iter().filter(|u| **u).count() }
    /// {A, B, C, D, E} at parameter trace p, sample t.
    pub fn operator(&self, p: usize, t: usize) -> [f32; 5] { self.tables.decode(self.code[p * self.ns + t]) }
    /// One output volume, `[p * ns + t]`.
    pub fn volume(&self, which: Param) -> Vec<f32> {
        if which == Param::S {
            return self.semblance.clone();
        }
        let q = which as usize;
        let ns = self.ns.max(1);
        self.code.par_iter().enumerate()
            .map(|(i, &c)| if self.unestimated.get(i / ns).copied().unwrap_or(false) { f32::NAN } else { self.tables.decode(c)[q] })
            .collect()
    }
    /// Positions (x, y) of the parameter traces in the chosen coordinates (m).
    pub fn positions(&self) -> Vec<(f64, f64)> {
        (0..self.grid.len())
            .map(|p| (self.origin.0 + (p % self.grid.nx) as f64 * self.grid.sx, self.origin.1 + (p / self.grid.nx) as f64 * self.grid.sy))
            .collect()
    }
}

/// Which implementation runs the search.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// The CPU reference (Table 1, rayon over parameter traces and time samples).
    Cpu,
    /// The paper's GPU design (Tables 2-4).
    GpuPaper,
    /// The fast GPU version (resident gather, sliding windows, C-scan kernel).
    GpuFast,
}

/// The 2+2+1 search on `backend`: the fast GPU version on a GPU (the paper-faithful kernel where
/// the fast one does not apply, with a note on stderr), the CPU reference otherwise.
pub fn estimate(backend: &Backend, traces: &TraceSet, params: &EstimateParams) -> Result<Estimate> {
    let setup = Setup::new(traces, params)?;
    let (code, s) = match backend {
        Backend::Cpu => cpu::estimate(&setup, &traces.data),
        Backend::Gpu(g) => match gpu::FastPlan::new(g, &setup, None) {
            Ok(plan) => plan.run(g, &setup, &traces.data)?,
            Err(why) => {
                eprintln!("nlbf: the fast GPU kernels do not apply ({why}); using the paper-faithful kernel");
                gpu::estimate_paper(g, &setup, &traces.data)?
            }
        },
    };
    Ok(Estimate::from_setup(&setup, code, s))
}

/// Runs one named variant (tests and benchmarks).
pub fn estimate_with(variant: Variant, backend: &Backend, setup: &Setup, data: &[f32]) -> Result<(Vec<u32>, Vec<f32>)> {
    match (variant, backend) {
        (Variant::Cpu, _) => Ok(cpu::estimate(setup, data)),
        (Variant::GpuPaper, Backend::Gpu(g)) => gpu::estimate_paper(g, setup, data),
        (Variant::GpuFast, Backend::Gpu(g)) => {
            let plan = gpu::FastPlan::new(g, setup, None).map_err(NlbfError::Invalid)?;
            plan.run(g, setup, data)
        }
        (v, Backend::Cpu) => invalid(format!("{v:?} needs a GPU")),
    }
}

/// Parameters of the enhancement.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EnhanceParams {
    /// Neighbours stacked with each trace: |x - x_n| <= x/2 and |y - y_n| <= y/2 (m).
    pub aperture: Aperture,
}

/// Neighbour lists of every trace (CSR, ascending), through the same bucket search.
pub fn neighbours(tx: &[f32], ty: &[f32], ap: Aperture) -> Result<(Vec<u32>, Vec<u32>)> {
    if !(ap.x.is_finite() && ap.y.is_finite() && ap.x >= 0.0 && ap.y >= 0.0) {
        return invalid(format!("the enhancement aperture {} x {} m must be finite and non-negative", ap.x, ap.y));
    }
    let n = tx.len();
    let (hx, hy) = ((ap.x / 2.0) as f32 * (1.0 + 1e-6) + 1e-6, (ap.y / 2.0) as f32 * (1.0 + 1e-6) + 1e-6);
    let cs = (ap.x.max(ap.y) / 2.0).max(1.0) as f32;
    let (xmax, ymax) = (tx.iter().cloned().fold(0.0, f32::max), ty.iter().cloned().fold(0.0, f32::max));
    let (bx, by) = ((xmax / cs) as usize + 1, (ymax / cs) as usize + 1);
    if bx.saturating_mul(by) > 1 << 26 {
        return invalid(format!("enhancement aperture {} x {} m is too small for the survey extent", ap.x, ap.y));
    }
    let cell = |i: usize| ((ty[i] / cs) as usize).min(by - 1) * bx + ((tx[i] / cs) as usize).min(bx - 1);
    let mut count = vec![0u32; bx * by + 1];
    for i in 0..n {
        count[cell(i) + 1] += 1;
    }
    for i in 1..count.len() {
        count[i] += count[i - 1];
    }
    let mut fill = count.clone();
    let mut bucket = vec![0u32; n];
    for i in 0..n {
        let c = cell(i);
        bucket[fill[c] as usize] = i as u32;
        fill[c] += 1;
    }
    let lists: Vec<Vec<u32>> = (0..n)
        .into_par_iter()
        .map(|i| {
            let (x0, y0) = (tx[i], ty[i]);
            let ix0 = ((x0 - hx).max(0.0) / cs) as usize;
            let ix1 = (((x0 + hx) / cs) as usize).min(bx - 1);
            let iy0 = ((y0 - hy).max(0.0) / cs) as usize;
            let iy1 = (((y0 + hy) / cs) as usize).min(by - 1);
            let mut l = Vec::new();
            for iy in iy0..=iy1 {
                for ix in ix0..=ix1 {
                    let b = iy * bx + ix;
                    for &t in &bucket[count[b] as usize..count[b + 1] as usize] {
                        if (tx[t as usize] - x0).abs() <= hx && (ty[t as usize] - y0).abs() <= hy {
                            l.push(t);
                        }
                    }
                }
            }
            l.sort_unstable();
            l
        })
        .collect();
    let mut off = Vec::with_capacity(n + 1);
    off.push(0u32);
    let mut idx = Vec::new();
    for l in lists {
        idx.extend_from_slice(&l);
        if idx.len() > u32::MAX as usize {
            return invalid("enhancement neighbour lists exceed 2^32 entries: reduce the aperture");
        }
        off.push(idx.len() as u32);
    }
    Ok((off, idx))
}

/// Everything the enhancement needs besides the data and the estimate.
#[derive(Debug, Clone)]
pub struct EnhanceSetup {
    pub ns: usize,
    pub inv_dt: f32,
    pub tx: Vec<f32>,
    pub ty: Vec<f32>,
    pub nb_off: Vec<u32>,
    pub nb_idx: Vec<u32>,
    /// Trace coordinates relative to the estimate's grid origin: node (i, j) at (i sx, j sy).
    pub grid: Grid,
}

impl EnhanceSetup {
    pub fn new(traces: &TraceSet, coords: &Coordinates, est: &Estimate, params: &EnhanceParams) -> Result<EnhanceSetup> {
        validate_traces(traces)?;
        Self::from_layout(traces, coords, est, params)
    }

    /// [`EnhanceSetup::new`] from a layout: every trace header and the sampling, `data` not looked
    /// at (an MPI rank plans before it reads the traces it needs).
    pub fn from_layout(traces: &TraceSet, coords: &Coordinates, est: &Estimate, params: &EnhanceParams) -> Result<EnhanceSetup> {
        validate_layout(traces)?;
        if traces.ns != est.ns {
            return invalid(format!("the estimate has {} samples per trace, the data {}", est.ns, traces.ns));
        }
        if est.code.len() != est.grid.len() * est.ns {
            return invalid("the estimate's volumes do not match its grid");
        }
        let (x, y) = coordinates(&traces.headers, coords)?;
        let tx: Vec<f32> = x.iter().map(|&v| (v - est.origin.0) as f32).collect();
        let ty: Vec<f32> = y.iter().map(|&v| (v - est.origin.1) as f32).collect();
        let (nb_off, nb_idx) = neighbours(&tx, &ty, params.aperture)?;
        Ok(EnhanceSetup { ns: traces.ns, inv_dt: 1.0 / traces.dt, tx, ty, nb_off, nb_idx, grid: est.grid })
    }

    /// Traces this setup enhances: its first `outputs()` traces (every trace of a whole setup).
    pub fn outputs(&self) -> usize { self.nb_off.len().saturating_sub(1) }

    /// The setup enhancing traces `out` alone, knowing only the traces their neighbour lists hold:
    /// those input traces, the outputs first (output k becomes trace k) and the others ascending,
    /// with every list renumbered in place (its order kept, so every sum runs as in the whole
    /// setup: the same bits). Returns the input trace numbers of the subset's traces, in its
    /// order. An MPI rank reads and enhances only these.
    pub fn subset_reading(&self, out: std::ops::Range<usize>) -> (EnhanceSetup, Vec<usize>) {
        let (a, b) = (self.nb_off[out.start] as usize, self.nb_off[out.end] as usize);
        let mut others: Vec<u32> = self.nb_idx[a..b].iter().copied().filter(|&t| !out.contains(&(t as usize))).collect();
        others.par_sort_unstable();
        others.dedup();
        let order: Vec<usize> = out.clone().chain(others.iter().map(|&t| t as usize)).collect();
        // Input trace number -> its place in the subset (as `Setup::subset_reading` does).
        let mut place = vec![u32::MAX; self.tx.len()];
        for (k, &t) in order.iter().enumerate() {
            place[t] = k as u32;
        }
        let nb_idx = self.nb_idx[a..b].iter().map(|&t| place[t as usize]).collect();
        let nb_off = self.nb_off[out.start..=out.end].iter().map(|&o| o - a as u32).collect();
        let sub = EnhanceSetup { ns: self.ns, inv_dt: self.inv_dt, tx: order.iter().map(|&t| self.tx[t]).collect(),
            ty: order.iter().map(|&t| self.ty[t]).collect(), nb_off, nb_idx, grid: self.grid };
        (sub, order)
    }
}

/// Enhancement: every trace replaced by the mean of its neighbours shifted along the local
/// operator, the operator interpolated bilinearly between the parameter traces.
pub fn enhance(backend: &Backend, traces: &TraceSet, coords: &Coordinates, est: &Estimate, params: &EnhanceParams)
    -> Result<TraceSet> {
    let setup = EnhanceSetup::new(traces, coords, est, params)?;
    let mut data = match backend {
        Backend::Cpu => cpu::enhance(&setup, est, &traces.data),
        Backend::Gpu(g) => gpu::enhance(g, &setup, est, &traces.data)?,
    };
    slopes::copy_unestimated(&setup, est, &traces.data, &mut data);
    Ok(TraceSet { headers: traces.headers.clone(), data, ns: traces.ns, dt: traces.dt, t0: traces.t0 })
}

/// [`enhance`] over several devices (`--gpus`): the traces cut into contiguous blocks that go to
/// the devices as they free up, each block enhanced from only the traces its neighbour lists hold
/// ([`EnhanceSetup::subset_reading`]); every sample is the single-device enhancement's, bit for bit.
pub fn enhance_multi(backends: &[Backend], traces: &TraceSet, coords: &Coordinates, est: &Estimate, params: &EnhanceParams)
    -> Result<TraceSet> {
    if backends.is_empty() {
        return invalid("nlbf: no device to enhance on");
    }
    let setup = EnhanceSetup::new(traces, coords, est, params)?;
    let ns = traces.ns;
    let blocks = crate::exec::split::even_ranges(traces.len(), 4 * backends.len());
    let parts = crate::exec::split::map_on_devices(backends, &blocks, |b, _, r| {
        let (sub, order) = setup.subset_reading(r.clone());
        let data: Vec<f32> = order.iter().flat_map(|&k| traces.data[k * ns..(k + 1) * ns].iter().copied()).collect();
        let mut out = match b {
            Backend::Cpu => cpu::enhance(&sub, est, &data),
            Backend::Gpu(g) => gpu::enhance(g, &sub, est, &data)?,
        };
        slopes::copy_unestimated(&sub, est, &data, &mut out);
        Ok(out)
    })
    .map_err(|e| NlbfError::Invalid(format!("enhancing traces {:?}: {e:#}", blocks[e.item])))?;
    Ok(TraceSet { headers: traces.headers.clone(), data: parts.concat(), ns, dt: traces.dt, t0: traces.t0 })
}

/// NMO parameters: an RMS velocity function and the stretch mute.
#[derive(Debug, Clone, PartialEq)]
pub struct NmoParams {
    /// (two-way time s, RMS velocity m/s) pairs, times increasing; linear in between, constant
    /// beyond the ends.
    pub velocity: Vec<(f32, f32)>,
    /// Largest stretch (t - t0) / t0 kept; beyond it samples are muted (e.g. 0.5 = 50 %).
    pub max_stretch: f32,
}

/// The velocity function sampled at every output time.
pub fn vrms_table(p: &NmoParams, ns: usize, dt: f32, t_first: f32) -> Result<Vec<f32>> {
    if p.velocity.is_empty() {
        return invalid("NMO: no velocity given");
    }
    for (i, &(t, v)) in p.velocity.iter().enumerate() {
        if !(t.is_finite() && v.is_finite() && v > 0.0) {
            return invalid(format!("NMO velocity pair {i} ({t} s, {v} m/s): time must be finite, velocity positive"));
        }
        if i > 0 && t <= p.velocity[i - 1].0 {
            return invalid(format!("NMO velocity times must increase (pair {i} at {t} s)"));
        }
    }
    if !(p.max_stretch.is_finite() && p.max_stretch > 0.0) {
        return invalid(format!("NMO stretch mute {} must be positive", p.max_stretch));
    }
    let v = &p.velocity;
    Ok((0..ns)
        .map(|i| {
            let t = t_first + i as f32 * dt;
            match v.iter().position(|&(tv, _)| tv >= t) {
                None => v[v.len() - 1].1,
                Some(0) => v[0].1,
                Some(j) => {
                    let ((t0, v0), (t1, v1)) = (v[j - 1], v[j]);
                    v0 + (v1 - v0) * (t - t0) / (t1 - t0)
                }
            }
        })
        .collect())
}

/// NMO correction with a stretch mute; the offset is the source-receiver distance from the
/// coordinates, or the header's offset where the coordinates are absent.
pub fn nmo(backend: &Backend, traces: &TraceSet, params: &NmoParams) -> Result<TraceSet> {
    validate_traces(traces)?;
    let vrms = vrms_table(params, traces.ns, traces.dt, traces.t0)?;
    let offsets = nmo_offsets(&traces.headers);
    let data = match backend {
        Backend::Cpu => cpu::nmo(&traces.data, traces.ns, traces.dt, traces.t0, &offsets, &vrms, params.max_stretch),
        Backend::Gpu(g) => gpu::nmo(g, &traces.data, traces.ns, traces.dt, traces.t0, &offsets, &vrms, params.max_stretch)?,
    };
    Ok(TraceSet { headers: traces.headers.clone(), data, ns: traces.ns, dt: traces.dt, t0: traces.t0 })
}

/// |offset| per trace: the coordinates' distance, else the header's offset.
pub fn nmo_offsets(h: &[TraceHeader]) -> Vec<f32> {
    h.iter().map(|t| { let d = t.distance(); if d > 0.0 { d as f32 } else { t.offset.abs() as f32 } }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::geometry;

    /// The paper's 2D search (one definition: `synth::params_synthetic_2d`).
    pub(crate) fn params_2d() -> EstimateParams { super::synth::params_synthetic_2d() }

    #[test]
    fn range_counts_match_the_paper() {
        assert_eq!(Range::new(-1e-4, 1e-5, 1e-4).count(), 21);
        assert_eq!(Range::new(-1.25e-7, 0.25e-7, 1.25e-7).count(), 11);
        assert_eq!(Range::new(-1e-3, 1.33e-5, 1e-3).count(), 151);
        assert_eq!("[-1e-3:1.33e-5:1e-3]".parse::<Range>().unwrap().count(), 151);
        assert_eq!("0".parse::<Range>().unwrap().count(), 1);
        assert!("1:2".parse::<Range>().is_err());
    }

    #[test]
    fn apertures_on_the_paper_2d_line() {
        let tr = crate::synth::noise_traces(geometry::line_2d(41, 25.0, 41, 25.0), 50, 0.004, 1);
        let s = Setup::new(&tr, &params_2d()).unwrap();
        assert_eq!((s.grid.nx, s.grid.ny), (8, 8)); // 1000 m / 140 m -> 0..7
        // (A, D) aperture at the corner node: 9 receivers (0..200 m) x 1 source.
        assert_eq!(s.apertures.list(0, 0).len(), 9);
        // At node (1, 1) = (140, 140): receivers 0..340 (14) x sources 125, 150 (2).
        assert_eq!(s.apertures.list(0, 8 + 1).len(), 14 * 2);
        assert_eq!(s.apertures.list(2, 8 + 1).len(), 14 * 14);
        for p in 0..s.np() {
            for ph in 0..3 {
                let l = s.apertures.list(ph, p);
                assert!(l.windows(2).all(|w| w[0] < w[1]));
            }
        }
        assert_eq!(s.shift_bound[0], (1e-4f64 * 200.0 / 0.004 + 1.25e-7 * 40000.0 / 0.004).ceil() as i32 + 2);
    }

    #[test]
    fn a_subset_reading_its_apertures_traces_searches_as_the_whole() {
        // An MPI rank's part: its parameter traces, only the input traces their apertures hold.
        let tr = crate::synth::noise_traces(geometry::line_2d(41, 25.0, 41, 25.0), 60, 0.004, 3);
        let s = Setup::new(&tr, &params_2d()).unwrap();
        let (code, sem) = cpu::estimate(&s, &tr.data);
        for part in [0..5, 17..40, 60..s.np()] {
            let (sub, wanted) = s.subset_reading(part.clone());
            assert!(wanted.len() < s.ntr() && wanted.windows(2).all(|w| w[0] < w[1]), "{part:?}");
            let data: Vec<f32> = wanted.iter().flat_map(|&t| tr.data[t * tr.ns..(t + 1) * tr.ns].iter().copied()).collect();
            let all: Vec<usize> = (0..sub.np()).collect();
            let (c, m) = cpu::estimate_subset(&sub, &data, &all);
            let at = part.start * s.ns..part.end * s.ns;
            assert_eq!(c, code[at.clone()], "{part:?}");
            assert!(m.iter().zip(&sem[at]).all(|(a, b)| a.to_bits() == b.to_bits()), "{part:?}");
        }
        // Planned from the headers alone, as the ranks do.
        let layout = TraceSet { data: Vec::new(), ..tr.clone() };
        let l = Setup::from_layout(&layout, &params_2d()).unwrap();
        assert_eq!((l.apertures, l.tx, l.grid), (s.apertures.clone(), s.tx.clone(), s.grid));
    }

    #[test]
    fn bad_input_gives_clear_errors() {
        let tr = crate::synth::noise_traces(geometry::line_2d(9, 25.0, 9, 25.0), 40, 0.004, 2);
        let err = |p: EstimateParams| Setup::new(&tr, &p).unwrap_err().to_string();
        let mut p = params_2d();
        p.search.a.step = 0.0;
        assert!(err(p).contains("step 0 must be positive"), "{}", err(p));
        let mut p = params_2d();
        p.search.d = Range::new(1.0, 0.1, -1.0);
        assert!(err(p).contains("max -1 is below min 1"));
        let mut p = params_2d();
        p.window = 41;
        assert!(err(p).contains("longer than the traces"));
        let mut p = params_2d();
        p.window = 10;
        assert!(err(p).contains("must be odd"));
        let mut p = params_2d();
        p.aperture_ad = Aperture { x: 10.0, y: 10.0 };
        p.spacing_x = 30.0;
        // Parameter traces whose aperture holds no trace are left unestimated, not an error.
        let s = Setup::new(&tr, &p).unwrap();
        let est = Estimate::from_setup(&s, vec![0; s.estimations()], vec![1.0; s.estimations()]);
        assert!(est.unestimated_count() > 0 && est.unestimated_count() < s.np(), "{:?}", est.unestimated);
        for (sem, u) in est.semblance.chunks(s.ns).zip(&est.unestimated) {
            assert!(!u || sem.iter().all(|v| *v == 0.0));
        }
        assert!(est.volume(Param::A).chunks(s.ns).zip(&est.unestimated).all(|(a, u)| a[0].is_nan() == *u));
        let mut p = params_2d();
        p.spacing_y = -5.0;
        assert!(err(p).contains("spacing in y is -5"));
        let mut p = params_2d();
        p.coords.x = CoordKey::ReceiverY;
        assert!(err(p).contains("zero on every trace"), "{}", err(p));
    }
    /// The bit-set aperture search and its bounds equal the bucket search and the separate bound
    /// pass (the references), on lines, cross-spreads, shuffled trace orders and odd apertures.
    #[test]
    fn apertures_and_bounds_equal_the_reference() {
        use rand::RngExt;
        let mut cases: Vec<(TraceSet, EstimateParams)> = vec![
            super::synth::crossspread_3d(crate::bench::BenchSize::Small),
            super::synth::synthetic_2d(crate::bench::BenchSize::Small),
        ];
        let (mut t, p) = super::synth::crossspread_3d(crate::bench::BenchSize::Small);
        let mut r = crate::synth::rng(7);
        for i in (1..t.headers.len()).rev() {
            let j = r.random_range(0..=i);
            t.headers.swap(i, j);
        }
        cases.push((t.clone(), p));
        let mut p2 = p;
        p2.aperture_ad = Aperture { x: 61.0, y: 20.0 };
        p2.aperture_c = Aperture { x: 40.0, y: 39.999 };
        p2.spacing_x = 20.0;
        p2.spacing_y = 13.0;
        cases.push((t, p2));
        for (k, (t, p)) in cases.iter().enumerate() {
            let s = Setup::from_headers(t, p).unwrap();
            let (x, y) = coordinates(&t.headers, &p.coords).unwrap();
            let aps = [p.aperture_ad, p.aperture_be, p.aperture_c];
            let (lo, hi) = ((min_max(&x).0, min_max(&y).0), (min_max(&x).1, min_max(&y).1));
            let old = build_apertures(&x, &y, lo, hi, &s.grid, &aps).unwrap();
            assert_eq!(old, s.apertures, "case {k}");
            let bounds = shift_bounds(&s.tx, &s.ty, &s.px, &s.py, &old, &p.search, s.inv_dt as f64).unwrap();
            assert_eq!(bounds, (s.shift_bound, [s.max_dx2_ad, s.max_dy2_be, s.max_abs_dxdy]), "case {k}");
        }
    }

    /// The split setup (the pipelined engine's path): the deferred first pass plus the lists filled
    /// band by band (on all cores or on one thread, into one index list split by band) equals
    /// `Setup::from_headers` in every field, and each list's recorded last entry and each band's
    /// need equal those read from the full lists.
    #[test]
    fn band_by_band_setup_equals_the_full_setup() {
        let mut cases = vec![super::synth::crossspread_3d(crate::bench::BenchSize::Small),
            super::synth::synthetic_2d(crate::bench::BenchSize::Small)];
        let (t, mut p) = super::synth::crossspread_3d(crate::bench::BenchSize::Small);
        p.aperture_ad = Aperture { x: 61.0, y: 20.0 };
        p.spacing_x = 20.0;
        p.spacing_y = 13.0;
        cases.push((t, p));
        for (k, (t, p)) in cases.iter().enumerate() {
            let full = Setup::from_headers(t, p).unwrap();
            let ends: [&[f64]; 4] = [&gpu::BAND_ENDS, &[1.0], &[0.01, 0.02, 0.03, 0.5, 0.99], &[0.3, 0.31, 0.9]];
            for (e, parallel) in ends.iter().zip([false, true, false, true]) {
                let DeferredSetup { setup: mut s, fill } = Setup::from_headers_deferred(t, p).unwrap();
                assert!(s.apertures.idx.is_empty());
                assert_eq!(s.apertures.off, full.apertures.off, "case {k}");
                // What the launch plan reads before the lists exist (FastPlan: the longest list).
                for ph in 0..3 {
                    assert_eq!(s.apertures.max_len(ph), full.apertures.max_len(ph), "case {k}, phase {ph}");
                }
                assert_eq!((s.shift_bound, s.max_abs_dxdy, s.max_dx2_ad, s.max_dy2_be),
                    (full.shift_bound, full.max_abs_dxdy, full.max_dx2_ad, full.max_dy2_be), "case {k}");
                assert_eq!((&s.tx, &s.ty, &s.px, &s.py, s.grid, s.origin, &s.tables, s.ns, s.half),
                    (&full.tx, &full.ty, &full.px, &full.py, full.grid, full.origin, &full.tables, full.ns, full.half));
                let b = gpu::bands(s.np(), e);
                let mut idx = vec![u32::MAX; fill.total()];
                // Later bands first: the order of the fills does not matter.
                for (band, mut piece) in b.iter().zip(fill.split(&b, &mut idx)).rev() {
                    fill.fill(*band, &mut piece, parallel);
                }
                s.apertures.idx = idx;
                assert_eq!(s.apertures, full.apertures, "case {k}, bands {e:?}");
                let need = gpu::band_needs_by(&b, |ph, q| fill.last(ph, q));
                assert_eq!(need, gpu::band_needs(&full.apertures, &b), "case {k}, bands {e:?}");
            }
            let fill = Setup::from_headers_deferred(t, p).unwrap().fill;
            for ph in 0..3 {
                for q in 0..full.np() {
                    assert_eq!(fill.last(ph, q), full.apertures.list(ph, q).last().copied());
                }
            }
        }
    }

    /// Host setup time at paper size (`cargo test --release -p seisgpu-host --lib setup_timing -- --ignored
    /// --nocapture`): `Setup::from_headers` on the cross-spread, its parts, and what the pipelined
    /// engine waits for before its first launch (the deferred first pass + band 0's lists on all
    /// cores), on this machine's cores.
    #[test]
    #[ignore]
    fn setup_timing_crossspread() {
        let (t, p) = super::synth::crossspread_3d(crate::bench::BenchSize::Paper);
        let ms = |t0: std::time::Instant| t0.elapsed().as_secs_f64() * 1e3;
        let med = |mut v: Vec<f64>| { v.sort_by(f64::total_cmp); (v[v.len() / 2], v[0]) };
        for _ in 0..2 {
            Setup::from_headers(&t, &p).unwrap();
        }
        let mut v = Vec::new();
        for _ in 0..9 {
            let t0 = std::time::Instant::now();
            let s = Setup::from_headers(&t, &p).unwrap();
            v.push(ms(t0));
            std::hint::black_box(s);
        }
        let full = med(v);
        // The pipelined engine's path: first pass, band 0 on all cores, the rest on one thread.
        let (mut head, mut ready, mut rest, mut rest_par) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let mut stage = Vec::new();
        for _ in 0..9 {
            let t0 = std::time::Instant::now();
            let d = Setup::from_headers_deferred(&t, &p).unwrap();
            head.push(ms(t0));
            let b = gpu::bands(d.setup.np(), &gpu::BAND_ENDS);
            stage.resize(d.fill.total(), 0u32);
            let mut pieces = d.fill.split(&b, &mut stage).into_iter();
            d.fill.fill(b[0], &mut pieces.next().unwrap(), true);
            ready.push(ms(t0));
            let t1 = std::time::Instant::now();
            for (band, mut piece) in b[1..].iter().zip(pieces) {
                d.fill.fill(*band, &mut piece, false);
            }
            rest.push(ms(t1));
            let t1 = std::time::Instant::now();
            for (band, mut piece) in b[1..].iter().zip(d.fill.split(&b, &mut stage).into_iter().skip(1)) {
                d.fill.fill(*band, &mut piece, true);
            }
            rest_par.push(ms(t1));
        }
        let (head, ready, rest, rest_par) = (med(head), med(ready), med(rest), med(rest_par));
        let t0 = std::time::Instant::now();
        let (x, y) = coordinates(&t.headers, &p.coords).unwrap();
        let c_ms = ms(t0);
        let s = Setup::from_headers(&t, &p).unwrap();
        let aps = [p.aperture_ad, p.aperture_be, p.aperture_c];
        let (lo, hi) = ((min_max(&x).0, min_max(&y).0), (min_max(&x).1, min_max(&y).1));
        let t0 = std::time::Instant::now();
        let old = build_apertures(&x, &y, lo, hi, &s.grid, &aps).unwrap();
        let a_ms = ms(t0);
        let t0 = std::time::Instant::now();
        let bounds = shift_bounds(&s.tx, &s.ty, &s.px, &s.py, &old, &p.search, s.inv_dt as f64).unwrap();
        let b_ms = ms(t0);
        assert_eq!(old, s.apertures);
        assert_eq!(bounds, (s.shift_bound, [s.max_dx2_ad, s.max_dy2_be, s.max_abs_dxdy]));
        eprintln!("SETUP {} threads: from_headers median {:.2} ms (min {:.2}); band 0 ready (first pass + band 0 lists) \
            median {:.2} ms (min {:.2}), first pass alone {:.2} ms (min {:.2}); other bands' lists {:.2} ms on one thread \
            (min {:.2}), {:.2} ms on all cores; coordinates {c_ms:.2} ms; reference bucket search {a_ms:.2} ms + shift \
            bounds {b_ms:.2} ms; {} parameter traces, {} aperture entries", rayon::current_num_threads(), full.0, full.1,
            ready.0, ready.1, head.0, head.1, rest.0, rest.1, rest_par.0, s.np(), s.apertures.idx.len());
    }
}
