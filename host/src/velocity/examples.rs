//! Example velocity models (what `seisgpu synth velocity` writes): RMS velocity in two-way time,
//! from an interval velocity that grows with time (compaction) and, laterally varying, a slow lens.

use super::grid::VelocityGrid;
use super::text::{CmpFunction, CmpFunctions};
use super::{Domain, VelocityFunction};
use crate::traces::{TraceHeader, TraceSet};

/// Which example.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Example {
    /// One v_rms(t): interval velocity v0 + 600 m/s per second of two-way time.
    Gradient,
    /// Along a line of CMPs: the gradient plus a lens 400 m/s slower, centred on the line's
    /// middle between 0.6 and 1.2 s, 30 % of the line wide.
    Lateral,
}

impl std::str::FromStr for Example {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "gradient" => Ok(Example::Gradient),
            "lateral" => Ok(Example::Lateral),
            o => Err(format!("unknown velocity model `{o}` (expected gradient or lateral)")),
        }
    }
}

/// Sizes of an example model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExampleParams {
    /// CMPs along the line (the gradient model has one), their spacing (m) and the first CDP number.
    pub cmps: usize,
    pub cmp_spacing: f64,
    pub first_cdp: i32,
    /// Samples and sample interval (s) of the columns.
    pub ns: usize,
    pub dt: f32,
    /// Interval velocity at t = 0 (m/s).
    pub v0: f32,
}

impl Default for ExampleParams {
    fn default() -> Self { ExampleParams { cmps: 41, cmp_spacing: 25.0, first_cdp: 1, ns: 751, dt: 0.004, v0: 1500.0 } }
}

/// Interval velocity (m/s) at two-way time `t` and fractional position `u` in [0, 1] along the line.
pub fn interval_velocity(ex: Example, p: &ExampleParams, u: f64, t: f32) -> f32 {
    let base = p.v0 + 600.0 * t;
    match ex {
        Example::Gradient => base,
        Example::Lateral => {
            let lat = (-((u - 0.5) / 0.15).powi(2)).exp() as f32;
            let vert = if (0.6..=1.2).contains(&t) { (std::f32::consts::PI * (t - 0.6) / 0.6).sin() } else { 0.0 };
            base - 400.0 * lat * vert
        }
    }
}

/// RMS velocity column at position `u` (Dix's relation inverted, sample by sample).
pub fn rms_column(ex: Example, p: &ExampleParams, u: f64) -> Vec<f32> {
    let vint: Vec<f32> = (0..p.ns).map(|i| interval_velocity(ex, p, u, i as f32 * p.dt)).collect();
    crate::synth::velocity::rms_from_interval(&vint)
}

fn cmps(ex: Example, p: &ExampleParams) -> usize { if ex == Example::Gradient { 1 } else { p.cmps.max(1) } }

fn frac(i: usize, n: usize) -> f64 { if n > 1 { i as f64 / (n - 1) as f64 } else { 0.5 } }

/// The model as per-CMP functions with a knot every `knot_step` seconds (and at the last sample).
pub fn functions(ex: Example, p: &ExampleParams, knot_step: f32) -> CmpFunctions {
    let n = cmps(ex, p);
    let every = ((knot_step / p.dt).round() as usize).max(1);
    let functions = (0..n)
        .map(|i| {
            let col = rms_column(ex, p, frac(i, n));
            let mut knots: Vec<(f32, f32)> = (0..p.ns).step_by(every).map(|k| (k as f32 * p.dt, col[k])).collect();
            if !(p.ns - 1).is_multiple_of(every) {
                knots.push(((p.ns - 1) as f32 * p.dt, col[p.ns - 1]));
            }
            CmpFunction { cdp: Some(p.first_cdp + i as i32), x: i as f64 * p.cmp_spacing, y: 0.0,
                function: VelocityFunction { domain: Domain::Time, knots } }
        })
        .collect();
    CmpFunctions { domain: Domain::Time, functions, source: format!("{ex:?} example") }
}

/// The model as a grid [x][t] (one y).
pub fn grid(ex: Example, p: &ExampleParams) -> VelocityGrid {
    let n = cmps(ex, p);
    let v = (0..n).flat_map(|i| rms_column(ex, p, frac(i, n))).collect();
    VelocityGrid { domain: Domain::Time, n: [n, 1, p.ns], origin: [0.0; 3], step: [p.cmp_spacing, 1.0, p.dt as f64], v }
}

/// The model as a SEG-Y-ready volume: one trace per CMP (CDP number, zero-offset at its position),
/// samples = RMS velocity.
pub fn traces(ex: Example, p: &ExampleParams) -> TraceSet {
    let n = cmps(ex, p);
    let headers = (0..n)
        .map(|i| {
            let x = i as f64 * p.cmp_spacing;
            TraceHeader { sx: x, gx: x, cdp: p.first_cdp + i as i32, inline: 1, crossline: p.first_cdp + i as i32, ..Default::default() }
        })
        .collect();
    let mut t = TraceSet::zeros(headers, p.ns, p.dt);
    for i in 0..n {
        t.trace_mut(i).copy_from_slice(&rms_column(ex, p, frac(i, n)));
    }
    t
}
