//! The search's setup: the parameters validated against the trace headers, the grid of parameter
//! traces, the trace coordinates, and the subsets a multi-device or MPI search works on.

use rayon::prelude::*;

use super::apertures::{aperture_sets, finish_bounds};
use super::{invalid, ApertureFill, Apertures, CoordKey, Coordinates, EstimateParams, Result, Tables, MAX_WINDOW};
use crate::traces::{TraceHeader, TraceSet};

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
    /// search; the result goes back into the whole setup's [`Estimate`](super::Estimate)).
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

/// `TraceSet::validate`'s checks, with the scan for non-finite samples in parallel (it reads the
/// whole gather, so it is part of every end-to-end run).
pub fn validate_traces(t: &TraceSet) -> Result<()> {
    validate_shape(t)?;
    let bad = t.data.par_chunks(t.ns).enumerate().find_first(|(_, tr)| tr.iter().any(|v| !v.is_finite()));
    if let Some((i, tr)) = bad {
        let j = tr.iter().position(|v| !v.is_finite()).unwrap_or(0);
        return super::bad_input(format!("input traces: trace {i} sample {j} is not finite"));
    }
    Ok(())
}

/// Everything [`validate_traces`] checks but the samples themselves.
pub fn validate_shape(t: &TraceSet) -> Result<()> {
    validate_layout(t)?;
    if t.data.len() != t.headers.len() * t.ns {
        return super::bad_input(format!("input traces: {} samples for {} traces of {} samples", t.data.len(), t.headers.len(), t.ns));
    }
    Ok(())
}

/// The checks of [`validate_shape`] on the headers and the sampling alone.
pub(super) fn validate_layout(t: &TraceSet) -> Result<()> {
    if t.headers.is_empty() {
        return super::bad_input("input traces: the gather has no traces");
    }
    if t.ns == 0 {
        return super::bad_input("input traces: traces have zero samples");
    }
    if !(t.dt > 0.0) || !t.dt.is_finite() {
        return super::bad_input(format!("input traces: sample interval {} s is not positive", t.dt));
    }
    Ok(())
}

fn validate_params(p: &EstimateParams, ns: usize) -> Result<()> {
    for (name, arg, v) in [("parameter-trace spacing in x", "spacing-x", p.spacing_x), ("parameter-trace spacing in y", "spacing-y", p.spacing_y)] {
        if !(v.is_finite() && v > 0.0) {
            return super::bad_parameter(arg, format!("{name} is {v} m: it must be positive"));
        }
    }
    for (name, arg, ap) in [("(A, D)", "aperture-ad", p.aperture_ad), ("(B, E)", "aperture-be", p.aperture_be), ("C", "aperture-c", p.aperture_c)] {
        if !(ap.x.is_finite() && ap.y.is_finite() && ap.x >= 0.0 && ap.y >= 0.0) {
            return super::bad_parameter(arg, format!("the {name} aperture {} x {} m must be finite and non-negative", ap.x, ap.y));
        }
    }
    for (name, s) in [("x", p.coords.x_scale), ("y", p.coords.y_scale)] {
        if !(s.is_finite() && s != 0.0) {
            return super::bad_parameter(&format!("{name}-scale"), format!("the {name} coordinate scale {s} must be finite and non-zero"));
        }
    }
    if p.window == 0 || p.window % 2 == 0 {
        return super::bad_parameter("window", format!("time window of {} samples: it must be odd (centred on t0)", p.window));
    }
    if p.window > ns {
        return super::bad_parameter("window", format!("time window of {} samples is longer than the traces ({ns} samples)", p.window));
    }
    if p.window > MAX_WINDOW {
        return super::bad_parameter("window", format!("time window of {} samples: at most {MAX_WINDOW}", p.window));
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

pub(super) fn min_max(v: &[f64]) -> (f64, f64) {
    v.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| (lo.min(x), hi.max(x)))
}

/// Coordinates (m) of every trace from the chosen header fields; errors when the x field is missing
/// (zero on every trace) or a value is not finite. A y that is zero on every trace is a 2-D line
/// (one shot, or a line along x): its axis is degenerate and the search fixes its slopes at 0.
pub fn coordinates(headers: &[TraceHeader], c: &Coordinates) -> Result<(Vec<f64>, Vec<f64>)> {
    let get = |key: CoordKey, scale: f64, axis: &str| -> Result<Vec<f64>> {
        let v: Vec<f64> = headers.iter().map(|h| key.value(h) * scale).collect();
        if let Some(i) = v.iter().position(|x| !x.is_finite()) {
            return super::bad_input(format!("trace {i}: {axis} coordinate ({}) is not finite", key.name()));
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
