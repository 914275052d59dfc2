//! The one velocity argument of every command that needs a velocity (`velan`, `nmo`, `ktm`,
//! `pstm`, `srm`): parsed from a command-line string, asked for v(t) or v(z) at a CMP.
//!
//! ```ignore
//! let model = VelocityModel::parse(&args.velocity)?;             // or open(spec, Some(&axes))
//! let vrms = model.sample_at(&Location::of_header(h), t_first, dt, ns);
//! ```
//!
//! Forms of the string (an optional `time:` or `depth:` prefix says what the abscissa is; time,
//! two-way seconds, when absent):
//! - a number: a constant velocity (m/s);
//! - `t:v` pairs, e.g. `0:1500,0.8:2100,2.0:3000` (s:m/s; `depth:0:1500,1000:2500` in m:m/s) at
//!   any spacing, times increasing: linear in between, constant beyond the ends;
//! - a text file of per-CMP functions ([`text`]), the format `velan` writes its picks in;
//! - a `.npy` grid with its axes in a JSON sidecar `<file>.json` ([`grid`]);
//! - a `.sgy`/`.segy` volume: one trace per CDP, samples = velocity (m/s), read as per-CMP
//!   functions at the trace's CDP number and CDP position.
//!
//! Between per-CMP functions ([`CmpFunctions::function_at`]): linear in CDP number when the
//! functions and the asked location all have CDP numbers, otherwise linear in position along the
//! line through the first and the last function; the nearest function beyond the ends. Between
//! grid nodes: bilinear in (x, y), nearest beyond the grid. Velocities are used as given (RMS or
//! interval is the command's business).

pub mod commands;
pub mod examples;
pub mod grid;
pub mod text;

use std::path::Path;

use anyhow::Result;

use crate::traces::TraceHeader;
pub use grid::{GridAxis, VelocityGrid};
pub use text::{CmpFunction, CmpFunctions};

/// What a velocity function's abscissa is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Domain {
    /// Two-way time (s).
    #[default]
    Time,
    /// Depth (m).
    Depth,
}

impl Domain {
    /// Unit of the abscissa.
    pub fn unit(self) -> &'static str {
        match self {
            Domain::Time => "s",
            Domain::Depth => "m",
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Domain::Time => "time",
            Domain::Depth => "depth",
        }
    }
}

/// A velocity function: (time or depth, velocity m/s) knots, abscissae increasing; linear in
/// between, constant beyond the ends.
#[derive(Debug, Clone, PartialEq)]
pub struct VelocityFunction {
    pub domain: Domain,
    pub knots: Vec<(f32, f32)>,
}

/// Checks one velocity value, naming `what` (file and line, or argument).
pub fn check_velocity(v: f32, what: &str) -> Result<()> {
    if v.is_nan() {
        crate::bail_input!("{what}: velocity is NaN");
    }
    if !(v > 0.0) || !v.is_finite() {
        crate::bail_input!("{what}: velocity {v} m/s must be positive and finite");
    }
    Ok(())
}

impl VelocityFunction {
    /// A validated function: at least one knot, abscissae finite and increasing, velocities
    /// positive and finite; errors name `what` and the knot.
    pub fn new(domain: Domain, knots: Vec<(f32, f32)>, what: &str) -> Result<Self> {
        if knots.is_empty() {
            crate::bail_input!("{what}: no velocity given");
        }
        for (i, &(t, v)) in knots.iter().enumerate() {
            if !t.is_finite() {
                crate::bail_input!("{what}: {} {t} of pair {} is not a finite number", domain.name(), i + 1);
            }
            check_velocity(v, &format!("{what}, pair {} ({} {t} {})", i + 1, domain.name(), domain.unit()))?;
            if i > 0 && t <= knots[i - 1].0 {
                crate::bail_input!("{what}: {}s must increase, but pair {} ({t} {}) follows {} {}", domain.name(), i + 1, domain.unit(),
                    knots[i - 1].0, domain.unit());
            }
        }
        Ok(VelocityFunction { domain, knots })
    }

    /// A constant velocity.
    pub fn constant(domain: Domain, v: f32, what: &str) -> Result<Self> { Self::new(domain, vec![(0.0, v)], what) }

    /// The velocity at abscissa `t`.
    pub fn at(&self, t: f32) -> f32 {
        let k = &self.knots;
        let j = k.partition_point(|&(tk, _)| tk < t);
        if j == 0 {
            return k[0].1;
        }
        if j == k.len() {
            return k[k.len() - 1].1;
        }
        let ((t0, v0), (t1, v1)) = (k[j - 1], k[j]);
        v0 + (v1 - v0) * ((t - t0) / (t1 - t0))
    }

    /// `n` velocities at `first + i * step`.
    pub fn sample(&self, first: f32, step: f32, n: usize) -> Vec<f32> { (0..n).map(|i| self.at(first + i as f32 * step)).collect() }

    /// `(1 - w) a + w b`, exact for piecewise-linear functions: knots at the union of both.
    pub fn blend(a: &VelocityFunction, b: &VelocityFunction, w: f32) -> VelocityFunction {
        if w <= 0.0 {
            return a.clone();
        }
        if w >= 1.0 {
            return b.clone();
        }
        let mut ts: Vec<f32> = a.knots.iter().chain(&b.knots).map(|k| k.0).collect();
        ts.sort_by(f32::total_cmp);
        ts.dedup();
        let knots = ts.into_iter().map(|t| (t, (1.0 - w) * a.at(t) + w * b.at(t))).collect();
        VelocityFunction { domain: a.domain, knots }
    }

    /// `t:v` pairs, comma-separated (`what` names the argument in errors).
    pub fn parse_pairs(domain: Domain, s: &str, what: &str) -> Result<Self> {
        let mut knots = Vec::new();
        for (i, pair) in s.split(',').map(str::trim).enumerate() {
            if pair.is_empty() {
                crate::bail_input!("{what}: pair {} is empty (stray comma?)", i + 1);
            }
            let (t, v) = pair.split_once(':').ok_or_else(|| {
                crate::Error::input(format!("{what}: `{pair}` is not a {}:velocity pair ({}:m/s)", domain.name(), domain.unit()))
            })?;
            let t: f32 = t.trim().parse().map_err(|_| crate::Error::input(format!("{what}: {} `{}` in `{pair}` is not a number", domain.name(), t.trim())))?;
            let v: f32 = v.trim().parse().map_err(|_| crate::Error::input(format!("{what}: velocity `{}` in `{pair}` is not a number", v.trim())))?;
            knots.push((t, v));
        }
        Self::new(domain, knots, what)
    }
}

/// Where a command asks for a velocity: a CMP's CDP number (when known) and position (m).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Location {
    pub cdp: Option<i32>,
    pub x: f64,
    pub y: f64,
}

impl Location {
    /// A trace's CMP: its CDP number (0 = none) and the CDP's position.
    pub fn of_header(h: &TraceHeader) -> Location {
        let (x, y) = h.cdp_position();
        Location { cdp: (h.cdp != 0).then_some(h.cdp), x, y }
    }
    pub fn at(x: f64, y: f64) -> Location { Location { cdp: None, x, y } }
}

/// A velocity model in any of the forms the command line accepts.
#[derive(Debug, Clone, PartialEq)]
pub enum VelocityModel {
    /// The same function everywhere (a constant or pairs).
    Function(VelocityFunction),
    /// Per-CMP functions (a text file or a SEG-Y volume).
    PerCmp(CmpFunctions),
    /// A regular grid (.npy with its axes).
    Grid(VelocityGrid),
}

impl VelocityModel {
    /// Parses a command-line velocity argument (see the module documentation); a .npy grid needs
    /// its JSON sidecar.
    pub fn parse(spec: &str) -> Result<Self> { Self::open(spec, None) }

    /// As [`parse`](Self::parse), with the axes of a .npy grid that has no sidecar given by the
    /// command (in the array's axis order).
    pub fn open(spec: &str, axes: Option<&[GridAxis]>) -> Result<Self> {
        let spec = spec.trim();
        let (domain, body, explicit) = if let Some(b) = spec.strip_prefix("depth:") {
            (Domain::Depth, b, true)
        } else if let Some(b) = spec.strip_prefix("time:") {
            (Domain::Time, b, true)
        } else {
            (Domain::Time, spec, false)
        };
        let body = body.trim();
        if body.is_empty() {
            crate::bail_param!("velocity", "velocity: nothing given (a number, t:v pairs or a file)");
        }
        if let Ok(v) = body.parse::<f32>() {
            return Ok(VelocityModel::Function(argument(VelocityFunction::constant(domain, v, &format!("velocity `{body}`")))?));
        }
        let looks_numeric = body.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '-' | '+' | '.'));
        if body.contains(':') && looks_numeric && !Path::new(body).exists() {
            return Ok(VelocityModel::Function(argument(VelocityFunction::parse_pairs(domain, body, "velocity"))?));
        }
        let path = Path::new(body);
        if !path.exists() {
            crate::bail_param!("velocity", "velocity `{body}`: no such file, and not a number or {}:velocity pairs", domain.name());
        }
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("").to_ascii_lowercase();
        match ext.as_str() {
            "npy" => Ok(VelocityModel::Grid(grid::read_npy_grid(path, axes, explicit.then_some(domain))?)),
            "sgy" | "segy" => Ok(VelocityModel::PerCmp(grid::read_segy_functions(path, domain)?)),
            _ => Ok(VelocityModel::PerCmp(text::read(path, explicit.then_some(domain))?)),
        }
    }

    /// Time or depth.
    pub fn domain(&self) -> Domain {
        match self {
            VelocityModel::Function(f) => f.domain,
            VelocityModel::PerCmp(c) => c.domain,
            VelocityModel::Grid(g) => g.domain,
        }
    }

    /// The velocity function at a CMP.
    pub fn function_at(&self, at: &Location) -> VelocityFunction {
        match self {
            VelocityModel::Function(f) => f.clone(),
            VelocityModel::PerCmp(c) => c.function_at(at),
            VelocityModel::Grid(g) => g.function_at(at.x, at.y),
        }
    }

    /// `n` velocities at abscissae `first + i * step` at a CMP: what a command calls.
    pub fn sample_at(&self, at: &Location, first: f32, step: f32, n: usize) -> Vec<f32> { self.function_at(at).sample(first, step, n) }

    /// Errors unless the model is in `want` (a time command given a depth model, or the reverse).
    pub fn expect_domain(&self, want: Domain, what: &str) -> Result<()> {
        if self.domain() != want {
            crate::bail_param!("velocity", "{what}: a velocity in {} is needed, this one is in {} (prefix the argument with `{}:`, or give the other kind of model)",
                want.name(), self.domain().name(), want.name());
        }
        Ok(())
    }
}

/// A velocity given on the command line: its data errors (a bad pair, a negative value) are the
/// `velocity` parameter's.
fn argument<T>(r: Result<T>) -> Result<T> {
    r.map_err(|e| match e.downcast::<crate::Error>() {
        Ok(crate::Error::Input(reason)) => crate::Error::parameter("velocity", reason).into(),
        Ok(other) => other.into(),
        Err(e) => e,
    })
}

#[cfg(test)]
mod tests;
