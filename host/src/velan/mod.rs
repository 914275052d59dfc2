//! Velocity analysis (`seisgpu velan`): semblance scans over CMP gathers, automatic picks of a
//! smooth v_rms(t) per CMP, NMO with the picks.
//!
//! - [`Gathers`]: the traces grouped into CMP gathers (by CDP number, or by midpoint bins when
//!   the headers carry no CDP numbers), laid out gather after gather with their squared offsets.
//! - [`semblance`]: the panels S(t0, v) of every gather on the CPU reference ([`cpu`]) or the GPU
//!   ([`gpu`]); the math is `gpu_kernels::velan`'s, bit-identical on both sides.
//! - [`pick`]: the picking rule (documented there) and the picks as per-CMP velocity functions.
//! - [`nmo_gathers`]: NMO of every gather with its own picked function, with a stretch mute.

pub mod cpu;
pub mod gpu;
pub mod pick;

use std::collections::BTreeMap;

use anyhow::Result;

use crate::bail_param;

use crate::backend::Backend;
use crate::traces::{TraceHeader, TraceSet};
use crate::velocity::Location;
use gpu_kernels::velan as k;

/// Scan parameters.
#[derive(Debug, Clone, PartialEq)]
pub struct VelanParams {
    /// Trial velocities: `nv` values from `vmin` to `vmax` (m/s), evenly spaced.
    pub vmin: f32,
    pub vmax: f32,
    pub nv: usize,
    /// Semblance window length (s): 2h + 1 samples with h = round(window / 2 / dt).
    pub window: f32,
    /// Anellipticity eta of the Alkhalifah-Tsvankin moveout (0 = hyperbolic).
    pub eta: f32,
    /// Largest NMO stretch (t - t0) / t0 of a sample that counts (e.g. 0.5 = 50 %).
    pub max_stretch: f32,
}

impl Default for VelanParams {
    fn default() -> Self { VelanParams { vmin: 1400.0, vmax: 4500.0, nv: 100, window: 0.04, eta: 0.0, max_stretch: 0.5 } }
}

impl VelanParams {
    /// Checks every parameter against the sampling `dt` (s), naming the one at fault.
    pub fn validate(&self, dt: f32) -> Result<()> {
        let pos = |name: &str, v: f32, unit: &str| {
            if v > 0.0 && v.is_finite() { Ok(()) } else { Err(crate::error::Error::parameter(name.trim_start_matches("--"), format!("{name} {v} {unit} must be positive"))) }
        };
        pos("--vmin", self.vmin, "m/s")?;
        pos("--vmax", self.vmax, "m/s")?;
        if self.nv < 2 || self.nv > 10_000 {
            bail_param!("nv", "--nv {} must be between 2 and 10000 trial velocities", self.nv);
        }
        if !(self.vmax > self.vmin) {
            bail_param!("vmax", "--vmax {} m/s must exceed --vmin {} m/s", self.vmax, self.vmin);
        }
        pos("--window", self.window, "s")?;
        if self.half_window(dt) > k::MAX_HALF_WINDOW {
            bail_param!("window", "--window {} ms is {} samples at {} ms; at most {} samples", self.window * 1e3, 2 * self.half_window(dt) + 1,
                dt * 1e3, 2 * k::MAX_HALF_WINDOW + 1);
        }
        if !(self.eta.is_finite() && (0.0..=0.5).contains(&self.eta)) {
            bail_param!("eta", "--eta {} must be between 0 and 0.5", self.eta);
        }
        pos("--max-stretch", self.max_stretch, "")?;
        Ok(())
    }
    /// Half window in samples.
    pub fn half_window(&self, dt: f32) -> u32 { ((self.window / 2.0 / dt).round().max(0.0) as u32).min(10 * k::MAX_HALF_WINDOW) }
    /// The trial velocities (m/s), increasing.
    pub fn velocities(&self) -> Vec<f32> {
        let step = (self.vmax as f64 - self.vmin as f64) / (self.nv - 1) as f64;
        (0..self.nv).map(|j| (self.vmin as f64 + j as f64 * step) as f32).collect()
    }
}

/// How traces become gathers.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Grouping {
    /// By CDP number (headers with CDP numbers).
    Cdp,
    /// By midpoint bins of this size (m) in x and y.
    Midpoint(f64),
}

/// Traces grouped into CMP gathers, gather after gather.
#[derive(Debug, Clone)]
pub struct Gathers {
    /// Samples, trace-major, gathers contiguous.
    pub data: Vec<f32>,
    pub ns: usize,
    pub dt: f32,
    pub t_first: f32,
    /// `trace0[g]..trace0[g + 1]`: gather g's traces.
    pub trace0: Vec<u32>,
    /// Squared offset (m^2) of every trace (the order of `data`).
    pub x2: Vec<f32>,
    /// The input index of every trace (the order of `data`).
    pub input: Vec<usize>,
    /// Where each gather is: its CDP (when grouped by CDP) and mean midpoint.
    pub location: Vec<Location>,
}

impl Gathers {
    /// Groups `traces` (CDP numbers when any trace has one, else midpoint bins of `bin` m).
    pub fn new(traces: &TraceSet, bin: f64) -> Result<Gathers> {
        traces.validate("velan input").map_err(crate::error::Error::Input)?;
        if traces.is_empty() {
            crate::bail_input!("velan input: no traces");
        }
        let grouping = if traces.headers.iter().any(|h| h.cdp != 0) { Grouping::Cdp } else { Grouping::Midpoint(bin) };
        Self::grouped(traces, grouping)
    }

    /// Groups `traces` as told.
    pub fn grouped(traces: &TraceSet, grouping: Grouping) -> Result<Gathers> {
        if let Grouping::Midpoint(b) = grouping
            && !(b > 0.0 && b.is_finite())
        {
            crate::bail_param!("bin", "--bin {b} m must be positive");
        }
        let key = |h: &TraceHeader| -> (i64, i64) {
            match grouping {
                Grouping::Cdp => (h.cdp as i64, 0),
                Grouping::Midpoint(b) => {
                    let (x, y) = h.midpoint();
                    ((x / b).round() as i64, (y / b).round() as i64)
                }
            }
        };
        let mut groups: BTreeMap<(i64, i64), Vec<usize>> = BTreeMap::new();
        for (i, h) in traces.headers.iter().enumerate() {
            groups.entry(key(h)).or_default().push(i);
        }
        let ns = traces.ns;
        let n = traces.len();
        if n > u32::MAX as usize / 2 {
            crate::bail_input!("velan input: {n} traces is too many for one run");
        }
        let mut g = Gathers { data: Vec::with_capacity(n * ns), ns, dt: traces.dt, t_first: traces.t0, trace0: vec![0],
            x2: Vec::with_capacity(n), input: Vec::with_capacity(n), location: Vec::with_capacity(groups.len()) };
        for (key, members) in groups {
            let (mut mx, mut my) = (0.0, 0.0);
            for &i in &members {
                let h = &traces.headers[i];
                g.data.extend_from_slice(traces.trace(i));
                let off = crate::nlbf::nmo_offsets(std::slice::from_ref(h))[0];
                g.x2.push(off * off);
                g.input.push(i);
                let (x, y) = h.cdp_position();
                mx += x;
                my += y;
            }
            let m = members.len() as f64;
            let cdp = if grouping == Grouping::Cdp && key.0 != 0 { Some(key.0 as i32) } else { None };
            g.location.push(Location { cdp, x: mx / m, y: my / m });
            g.trace0.push(g.input.len() as u32);
        }
        Ok(g)
    }

    pub fn len(&self) -> usize { self.location.len() }
    pub fn is_empty(&self) -> bool { self.location.is_empty() }
    /// Traces of gather `g`.
    pub fn traces(&self, g: usize) -> std::ops::Range<usize> { self.trace0[g] as usize..self.trace0[g + 1] as usize }
    /// Most traces in one gather.
    pub fn max_fold(&self) -> usize { (0..self.len()).map(|g| self.traces(g).len()).max().unwrap_or(0) }
    /// Gathers `range` alone (trace indices renumbered), for a subset timing or a batch.
    pub fn subset(&self, range: std::ops::Range<usize>) -> Gathers {
        let (a, b) = (self.trace0[range.start] as usize, self.trace0[range.end] as usize);
        Gathers {
            data: self.data[a * self.ns..b * self.ns].to_vec(),
            ns: self.ns,
            dt: self.dt,
            t_first: self.t_first,
            trace0: self.trace0[range.start..=range.end].iter().map(|&t| t - a as u32).collect(),
            x2: self.x2[a..b].to_vec(),
            input: self.input[a..b].to_vec(),
            location: self.location[range].to_vec(),
        }
    }
}

/// The scan's derived constants, the same on both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct Scan {
    pub velocities: Vec<f32>,
    /// 1 / v^2 and v^2 per trial velocity.
    pub s2: Vec<f32>,
    pub v2: Vec<f32>,
    pub half: u32,
    pub inv_dt: f32,
    pub eta: f32,
    pub max_stretch: f32,
}

impl Scan {
    pub fn new(p: &VelanParams, g: &Gathers) -> Result<Scan> {
        p.validate(g.dt)?;
        // Moveout positions must stay far inside f32's exact-integer range.
        let xmax = g.x2.iter().cloned().fold(0.0f32, f32::max).sqrt();
        let tmax = g.t_first.abs() + g.ns as f32 * g.dt + xmax / p.vmin;
        if !(tmax / g.dt < 8e6) {
            crate::bail_param!("vmin", "velan: offsets up to {xmax} m at --vmin {} m/s reach {tmax} s, too far past the record", p.vmin);
        }
        let velocities = p.velocities();
        let (s2, v2) = velocities.iter().map(|&v| k::slowness2(v)).unzip();
        Ok(Scan { velocities, s2, v2, half: p.half_window(g.dt), inv_dt: 1.0 / g.dt, eta: p.eta,
            max_stretch: if p.max_stretch.is_finite() { p.max_stretch } else { 1e30 } })
    }
    pub fn nv(&self) -> usize { self.velocities.len() }
}

/// Semblance panels, `[(g * nv + v) * ns + t0]`, in [0, 1] (up to rounding).
#[derive(Debug, Clone, PartialEq)]
pub struct Panels {
    pub values: Vec<f32>,
    pub nv: usize,
    pub ns: usize,
}

impl Panels {
    pub fn gathers(&self) -> usize { self.values.len() / (self.nv * self.ns).max(1) }
    /// Gather g's panel, `[v * ns + t0]`.
    pub fn panel(&self, g: usize) -> &[f32] { &self.values[g * self.nv * self.ns..(g + 1) * self.nv * self.ns] }
}

/// The semblance panels of every gather on `backend`.
pub fn semblance(backend: &Backend, g: &Gathers, p: &VelanParams) -> crate::error::Result<Panels> {
    Ok(semblance_in(backend, g, p)?)
}

fn semblance_in(backend: &Backend, g: &Gathers, p: &VelanParams) -> Result<Panels> {
    let scan = Scan::new(p, g)?;
    let values = match backend {
        Backend::Cpu => cpu::semblance(g, &scan),
        Backend::Gpu(gpu) => gpu::semblance(gpu, g, &scan)?,
    };
    Ok(Panels { values, nv: scan.nv(), ns: g.ns })
}

/// NMO of every gather with its own v_rms function (sampled at the output times) and a stretch
/// mute; traces back in input order.
pub fn nmo_gathers(traces: &TraceSet, g: &Gathers, vrms: &[Vec<f32>], max_stretch: f32) -> TraceSet {
    use rayon::prelude::*;
    let ns = g.ns;
    let parts: Vec<Vec<f32>> = (0..g.len())
        .into_par_iter()
        .map(|i| {
            let r = g.traces(i);
            let offsets: Vec<f32> = g.x2[r.clone()].iter().map(|x| x.sqrt()).collect();
            crate::nlbf::cpu::nmo(&g.data[r.start * ns..r.end * ns], ns, g.dt, g.t_first, &offsets, &vrms[i], max_stretch)
        })
        .collect();
    let mut out = TraceSet { headers: traces.headers.clone(), data: vec![0.0; traces.data.len()].into(), ns, dt: traces.dt, t0: traces.t0 };
    let mut row = 0;
    for part in parts {
        for tr in part.chunks(ns) {
            out.trace_mut(g.input[row]).copy_from_slice(tr);
            row += 1;
        }
    }
    out
}
