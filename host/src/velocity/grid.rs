//! Velocity grids (.npy with their axes) and SEG-Y velocity volumes.
//!
//! A .npy grid of 2 or 3 axes, each `x`, `y` (m), `t` (two-way s) or `z` (m), in any order: the
//! `ktm` cubes are [x, y, t], the `srm` models [z, y, x]. The axes come from the .npy's JSON
//! sidecar (`crate::io::sidecar`: `<file>.npy.json`, the one every .npy output of seisgpu has;
//! `<stem>.json` also works) in the array's axis order, times in the unit the axis gives (s or ms):
//!
//! ```json
//! {"axes": [{"name": "x", "unit": "m", "origin": 0, "step": 25}, {"name": "y", "unit": "m", "origin": 0, "step": 25},
//!           {"name": "time", "unit": "s", "origin": 0, "step": 0.004}]}
//! ```
//!
//! or from the command when it knows them. Every grid goes through [`VelocityGrid::from_array`]
//! into one layout, [x][y][vertical].

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::text::{CmpFunction, CmpFunctions};
use crate::io::sidecar::{ArrayMeta, AxisMeta};
use super::{check_velocity, Domain, VelocityFunction};

/// One axis of a grid: `name` (x, y, t or z), first node and spacing (m, or s for t).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GridAxis {
    pub name: String,
    pub origin: f64,
    pub step: f64,
}

/// A regular grid, stored [x][y][vertical] (vertical fastest).
#[derive(Debug, Clone, PartialEq)]
pub struct VelocityGrid {
    pub domain: Domain,
    /// Nodes, first node and spacing of x, y (m) and the vertical axis (s or m).
    pub n: [usize; 3],
    pub origin: [f64; 3],
    pub step: [f64; 3],
    pub v: Vec<f32>,
}

impl VelocityGrid {
    /// A grid from an array of `shape` (C order) with `axes` in the array's axis order; checks
    /// names, spacings and every value (errors name `source` and the node).
    pub fn from_array(shape: &[usize], data: &[f32], axes: &[GridAxis], source: &str) -> Result<Self> {
        if shape.len() != axes.len() {
            crate::bail_input!("{source}: the array has {} axes ({shape:?}) but {} axes are described", shape.len(), axes.len());
        }
        if !(2..=3).contains(&shape.len()) {
            crate::bail_input!("{source}: a velocity grid has 2 or 3 axes, this one has {} ({shape:?})", shape.len());
        }
        let mut slot = [None::<usize>; 3]; // x, y, vertical -> array axis
        let mut domain = None;
        for (i, a) in axes.iter().enumerate() {
            let k = match a.name.as_str() {
                "x" => 0,
                "y" => 1,
                "t" | "z" => {
                    let d = if a.name == "t" { Domain::Time } else { Domain::Depth };
                    if domain.is_some_and(|e| e != d) {
                        crate::bail_input!("{source}: both t and z axes given");
                    }
                    domain = Some(d);
                    2
                }
                o => crate::bail_input!("{source}: axis {} is named `{o}` (expected x, y, t or z)", i + 1),
            };
            if slot[k].is_some() {
                crate::bail_input!("{source}: axis `{}` appears twice", a.name);
            }
            if !(a.step > 0.0 && a.step.is_finite() && a.origin.is_finite()) {
                crate::bail_input!("{source}: axis `{}` needs a finite origin and a positive spacing (got {}, {})", a.name, a.origin, a.step);
            }
            if shape[i] == 0 {
                crate::bail_input!("{source}: axis `{}` has no nodes", a.name);
            }
            slot[k] = Some(i);
        }
        let Some(domain) = domain else { crate::bail_input!("{source}: no vertical axis (t or z) among the axes") };
        if slot[0].is_none() && slot[1].is_none() {
            crate::bail_input!("{source}: no lateral axis (x or y)");
        }
        let n = [0, 1, 2].map(|k| slot[k].map_or(1, |i| shape[i]));
        let origin = [0, 1, 2].map(|k| slot[k].map_or(0.0, |i| axes[i].origin));
        let step = [0, 1, 2].map(|k| slot[k].map_or(1.0, |i| axes[i].step));
        // Strides of the array's axes (C order), then the values in [x][y][vertical] order.
        let mut stride = vec![1usize; shape.len()];
        for i in (0..shape.len().saturating_sub(1)).rev() {
            stride[i] = stride[i + 1] * shape[i + 1];
        }
        if data.len() != shape.iter().product::<usize>() {
            crate::bail_input!("{source}: {} values for shape {shape:?}", data.len());
        }
        let st = [0, 1, 2].map(|k| slot[k].map_or(0, |i| stride[i]));
        let mut v = Vec::with_capacity(n[0] * n[1] * n[2]);
        for ix in 0..n[0] {
            for iy in 0..n[1] {
                for iz in 0..n[2] {
                    let flat = ix * st[0] + iy * st[1] + iz * st[2];
                    let val = data[flat];
                    if !(val > 0.0 && val.is_finite()) {
                        check_velocity(val, &format!("{source}: node (x {ix}, y {iy}, {} {iz}), flat index {flat}", domain.name()))?;
                    }
                    v.push(val);
                }
            }
        }
        Ok(VelocityGrid { domain, n, origin, step, v })
    }

    /// The vertical function at (x, y): bilinear between the four nearest columns, the edge
    /// columns beyond the grid.
    pub fn function_at(&self, x: f64, y: f64) -> VelocityFunction {
        let cell = |q: f64, k: usize| -> (usize, usize, f32) {
            let f = (q - self.origin[k]) / self.step[k];
            let n = self.n[k];
            if !(f > 0.0) || n < 2 {
                return (0, 0, 0.0);
            }
            if f >= (n - 1) as f64 {
                return (n - 1, n - 1, 0.0);
            }
            let i = f.floor() as usize;
            (i, i + 1, (f - i as f64) as f32)
        };
        let (x0, x1, wx) = cell(x, 0);
        let (y0, y1, wy) = cell(y, 1);
        let nz = self.n[2];
        let col = |ix: usize, iy: usize| &self.v[(ix * self.n[1] + iy) * nz..(ix * self.n[1] + iy + 1) * nz];
        let (c00, c10, c01, c11) = (col(x0, y0), col(x1, y0), col(x0, y1), col(x1, y1));
        let knots = (0..nz)
            .map(|k| {
                let a = c00[k] + wx * (c10[k] - c00[k]);
                let b = c01[k] + wx * (c11[k] - c01[k]);
                ((self.origin[2] + k as f64 * self.step[2]) as f32, a + wy * (b - a))
            })
            .collect();
        VelocityFunction { domain: self.domain, knots }
    }
}

/// The sidecar of `path`: `<file>.npy.json` (what seisgpu writes), or `<stem>.json` beside it.
pub fn sidecar_path(path: &Path) -> Option<PathBuf> {
    [crate::io::sidecar::sidecar_path(path), path.with_extension("json")].into_iter().find(|p| p.exists())
}

/// A sidecar axis as a grid axis: `time`/`tau`/`t` in s (converted from ms where the unit says
/// so) becomes `t`, `depth`/`z` becomes `z`; other names pass through for the grid to judge.
fn grid_axis(a: &AxisMeta) -> GridAxis {
    let name = a.name.trim().to_ascii_lowercase();
    let ms = a.unit.as_deref().is_some_and(|u| u.trim().eq_ignore_ascii_case("ms"));
    let (name, scale) = match name.as_str() {
        "t" | "time" | "tau" | "twt" => ("t".to_string(), if ms { 1e-3 } else { 1.0 }),
        "z" | "depth" => ("z".to_string(), 1.0),
        _ => (name, 1.0),
    };
    GridAxis { name, origin: a.origin * scale, step: a.step * scale }
}

/// Reads a .npy grid: axes from its sidecar, else `axes` from the command, else an error that
/// says what is needed. `domain`, when given (the argument's prefix), must match the t/z axis.
pub fn read_npy_grid(path: &Path, axes: Option<&[GridAxis]>, domain: Option<Domain>) -> Result<VelocityGrid> {
    let source = path.display().to_string();
    let arr = crate::io::npy::read_npy_f32(path)?;
    let shape: Vec<usize> = arr.shape.iter().map(|&d| d as usize).collect();
    let axes: Vec<GridAxis> = match (sidecar_path(path), axes) {
        (Some(sc), _) => {
            let text = std::fs::read_to_string(&sc).with_context(|| format!("cannot read {}", sc.display()))?;
            let s: ArrayMeta = serde_json::from_str(&text).map_err(|e| crate::Error::input(format!("{}: not a grid description: {e}", sc.display())))?;
            s.axes.iter().map(grid_axis).collect()
        }
        (None, Some(a)) => a.to_vec(),
        (None, None) => crate::bail_input!(
            "{source}: a velocity grid of shape {shape:?} needs its axes: write {} with {{\"axes\": [{{\"name\": \"x\", \"origin\": 0, \"step\": 25}}, ...]}} \
             (one entry per array axis, in order; names x, y (m), t (s) or z (m))",
            crate::io::sidecar::sidecar_path(path).display()
        ),
    };
    let g = VelocityGrid::from_array(&shape, &arr.data, &axes, &source)?;
    if let Some(d) = domain
        && d != g.domain
    {
        crate::bail_param!("velocity", "{source}: the argument says {} but the grid's vertical axis is {}", d.name(), g.domain.name());
    }
    Ok(g)
}

/// Writes a grid as .npy ([x][y][vertical], or [x][vertical] for a single y) with its sidecar
/// (`<file>.npy.json`: read back here, and by `seisgpu plot` for its axes).
pub fn write_npy_grid(path: &Path, g: &VelocityGrid) -> Result<()> {
    let vertical = if g.domain == Domain::Time { AxisMeta::new("time", "s", g.origin[2], g.step[2]) }
        else { AxisMeta::new("depth", "m", g.origin[2], g.step[2]) };
    let mut axes = vec![AxisMeta::new("x", "m", g.origin[0], g.step[0])];
    let mut shape = vec![g.n[0] as u64];
    if g.n[1] > 1 {
        axes.push(AxisMeta::new("y", "m", g.origin[1], g.step[1]));
        shape.push(g.n[1] as u64);
    }
    axes.push(vertical);
    shape.push(g.n[2] as u64);
    crate::io::npy::write_npy(path, &g.v, &shape)?;
    ArrayMeta { description: Some("velocity (m/s)".into()), axes }.write(path)
}

/// A SEG-Y velocity volume as per-CMP functions: one trace per CDP (or bin), samples =
/// velocity (m/s), at the trace's CDP number and CDP position. In depth the sample interval field
/// holds the depth step in metres (SEG-Y rev 2).
pub fn read_segy_functions(path: &Path, domain: Domain) -> Result<CmpFunctions> {
    let source = path.display().to_string();
    let (_, set) = crate::io::segy::read_segy(path)?;
    if set.is_empty() {
        crate::bail_input!("{source}: no traces");
    }
    let (first, step) = match domain {
        Domain::Time => (set.t0, set.dt),
        Domain::Depth => (set.t0 * 1e6, set.dt * 1e6),
    };
    let mut functions = Vec::with_capacity(set.len());
    for i in 0..set.len() {
        let tr = set.trace(i);
        if let Some(k) = tr.iter().position(|v| !(*v > 0.0 && v.is_finite())) {
            check_velocity(tr[k], &format!("{source}: trace {} sample {k}", i + 1))?;
        }
        let h = &set.headers[i];
        let (x, y) = h.cdp_position();
        let knots = tr.iter().enumerate().map(|(k, &v)| (first + k as f32 * step, v)).collect();
        functions.push(CmpFunction { cdp: (h.cdp != 0).then_some(h.cdp), x, y, function: VelocityFunction { domain, knots } });
    }
    CmpFunctions::new(domain, functions, source)
}
