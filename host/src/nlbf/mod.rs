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

mod apertures;
pub mod cpu;
#[cfg(feature = "mpi")]
pub mod distributed;
mod enhance;
pub mod gpu;
mod multi;
mod nmo;
pub mod nmo_cmp;
pub mod output;
mod setup;
pub mod slopes;
pub mod synth;

use std::fmt;
use std::str::FromStr;

use rayon::prelude::*;

use crate::backend::Backend;
use crate::traces::{TraceHeader, TraceSet};
use gpu_kernels::nlbf as k;
pub use apertures::{ApertureFill, Apertures};
pub use enhance::{blocks as enhance_blocks, enhance, neighbours, EnhanceParams, EnhanceSetup, Enhancement};
pub use multi::{estimate_item, estimate_item_into, estimate_split, variant_for, work_items, NlbfDevice, Search, WORK_ITEMS};
pub use multi::estimate_setup_split_into;
pub use nmo::{nmo, nmo_offsets, vrms_table, NmoParams};
pub use nmo_cmp::nmo_model;
pub use setup::{coordinates, validate_shape, validate_traces, DeferredSetup, Grid, Setup};

/// Errors with a message that names the parameter, trace or parameter trace at fault.
#[derive(Debug, thiserror::Error)]
pub enum NlbfError {
    #[error("{0}")]
    Invalid(String),
    /// A parameter out of range (`name`: its CLI name); `reason` is the whole message.
    #[error("{reason}")]
    Parameter { name: String, reason: String },
    /// Bad trace data (the message names the trace and sample).
    #[error("{0}")]
    Input(String),
    #[error(transparent)]
    Gpu(#[from] crate::runtime::GpuError),
}

pub type Result<T> = std::result::Result<T, NlbfError>;

fn invalid<T>(msg: impl Into<String>) -> Result<T> { Err(NlbfError::Invalid(msg.into())) }
fn bad_parameter<T>(name: &str, msg: impl Into<String>) -> Result<T> { Err(NlbfError::Parameter { name: name.into(), reason: msg.into() }) }
fn bad_input<T>(msg: impl Into<String>) -> Result<T> { Err(NlbfError::Input(msg.into())) }

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
            return bad_parameter(&name.to_lowercase(), format!("search range of {name} [{} : {} : {}] is not finite", self.min, self.step, self.max));
        }
        if self.max < self.min {
            return bad_parameter(&name.to_lowercase(), format!("search range of {name}: max {} is below min {}", self.max, self.min));
        }
        if self.step <= 0.0 {
            return bad_parameter(&name.to_lowercase(), format!("search range of {name}: step {} must be positive", self.step));
        }
        let n = (self.max - self.min) / self.step;
        if n + 1.0 > MAX_RANGE_VALUES as f64 {
            return bad_parameter(&name.to_lowercase(), format!("search range of {name} has {:.0} values (at most {MAX_RANGE_VALUES})", n + 1.0));
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

/// The 2+2+1 search on `devices`: the fast GPU version on a GPU (the paper-faithful kernel where
/// the fast one does not apply, with a note on stderr), the CPU reference otherwise. On several
/// devices the parameter traces are split over them ([`estimate_split`]), every pick and
/// semblance that of the single-device search, bit for bit.
pub fn estimate(traces: &TraceSet, params: &EstimateParams, devices: &[Backend]) -> crate::error::Result<Estimate> {
    let out = match devices {
        [] => invalid("nlbf: no device to search on"),
        [backend] => estimate_on(backend, traces, params),
        _ => estimate_split(devices, traces, params, None),
    };
    Ok(out?)
}

/// [`estimate`] on one device.
fn estimate_on(backend: &Backend, traces: &TraceSet, params: &EstimateParams) -> Result<Estimate> {
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

#[cfg(test)]
mod tests;
