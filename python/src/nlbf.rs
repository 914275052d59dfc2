//! `seisgpu.nlbf`: the 2+2+1 search for local traveltime operators and the enhancement by
//! nonlinear beamforming (`seisgpu nlbf estimate|enhance`); the search parameters built as the
//! CLI builds them (a preset, else ranges from the data, then the options given).

use std::collections::HashMap;

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use seisgpu_host::nlbf::{self, Aperture, CoordKey, EnhanceParams, Estimate, EstimateParams, Param, Range, Variant};
use seisgpu_host::TraceSet;

use crate::common::{compute, devices, nlbf_error, trace_set, Devices};

/// The search options (the CLI's names; `None`: from the preset or the data).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct Search {
    pub preset: Option<String>,
    pub x: Option<String>,
    pub y: Option<String>,
    pub x_scale: Option<f64>,
    pub y_scale: Option<f64>,
    pub spacing_x: Option<f64>,
    pub spacing_y: Option<f64>,
    pub aperture_ad: Option<(f64, f64)>,
    pub aperture_be: Option<(f64, f64)>,
    pub aperture_c: Option<(f64, f64)>,
    pub window: Option<usize>,
    pub a: Option<String>,
    pub b: Option<String>,
    pub c: Option<String>,
    pub d: Option<String>,
    pub e: Option<String>,
    pub min_velocity: f64,
    pub variant: String,
}

fn bad(m: String) -> PyErr { PyValueError::new_err(m) }

/// The search parameters that come from the arguments alone (as the CLI's `params_from` for a file
/// input), checked before the call; [`SearchSetup::on`] completes them from the data.
struct SearchSetup {
    p: EstimateParams,
    /// The minimum velocity the ranges are derived from (no preset), else `None`.
    from_data: Option<f64>,
    /// The ranges given for A..E (they override the derived ones).
    ranges: [Option<Range>; 5],
}

fn setup(s: &Search) -> PyResult<SearchSetup> {
    let mut p = match s.preset.as_deref() {
        Some("synthetic-2d") | None => nlbf::synth::params_synthetic_2d(),
        Some("crossspread-3d") => nlbf::synth::params_crossspread_3d(),
        Some(o) => return Err(bad(format!("unknown preset `{o}` (synthetic-2d or crossspread-3d)"))),
    };
    let key = |k: &Option<String>, name: &str| -> PyResult<Option<CoordKey>> {
        k.as_deref().map(|v| v.parse::<CoordKey>().map_err(|e| bad(format!("{name}: {e}")))).transpose()
    };
    let c = &mut p.coords;
    if let Some(v) = key(&s.x, "x")? { c.x = v; }
    if let Some(v) = key(&s.y, "y")? { c.y = v; }
    if let Some(v) = s.x_scale { c.x_scale = v; }
    if let Some(v) = s.y_scale { c.y_scale = v; }
    if let Some(v) = s.spacing_x { p.spacing_x = v; }
    if let Some(v) = s.spacing_y { p.spacing_y = v; }
    let ap = |a: (f64, f64)| Aperture { x: a.0, y: a.1 };
    if let Some(v) = s.aperture_ad { p.aperture_ad = ap(v); }
    if let Some(v) = s.aperture_be { p.aperture_be = ap(v); }
    if let Some(v) = s.aperture_c { p.aperture_c = ap(v); }
    if let Some(v) = s.window { p.window = v; }
    let range = |r: &Option<String>, name: &str| -> PyResult<Option<Range>> {
        r.as_deref().map(|v| v.parse::<Range>().map_err(|e| bad(format!("{name}: {e}")))).transpose()
    };
    let ranges = [range(&s.a, "a")?, range(&s.b, "b")?, range(&s.c, "c")?, range(&s.d, "d")?, range(&s.e, "e")?];
    Ok(SearchSetup { p, from_data: s.preset.is_none().then_some(s.min_velocity), ranges })
}

impl SearchSetup {
    /// The parameters for traces `t` (the ranges derived from the data where no preset is given, a
    /// scan of the traces: part of the call, with the GIL released), and the line saying how.
    fn on(&self, t: &TraceSet) -> anyhow::Result<(EstimateParams, Option<String>)> {
        let mut p = self.p;
        let mut line = None;
        if let Some(min_velocity) = self.from_data {
            let (space, l) = nlbf::slopes::from_data(t, &p, min_velocity).map_err(nlbf_error)?;
            p.search = space;
            line = Some(l);
        }
        let [a, b, c, d, e] = self.ranges;
        let s = &mut p.search;
        for (slot, v) in [(&mut s.a, a), (&mut s.b, b), (&mut s.c, c), (&mut s.d, d), (&mut s.e, e)] {
            if let Some(v) = v {
                *slot = v;
            }
        }
        Ok((p, line))
    }
}

/// The variant of `variant` on `devices` (`None`: chosen for the setup).
fn variant(devices: &Devices, variant: &str) -> PyResult<Option<Variant>> {
    let gpus = match devices {
        Devices::One(b) => b.gpu().is_some(),
        Devices::Many(bs) => bs.iter().any(|b| b.gpu().is_some()),
    };
    Ok(match variant {
        "auto" => None,
        "cpu" => Some(Variant::Cpu),
        "gpu-fast" if gpus => Some(Variant::GpuFast),
        "gpu-paper" if gpus => Some(Variant::GpuPaper),
        "gpu-fast" | "gpu-paper" => return Err(bad(format!("variant {variant} needs a GPU (device='gpu' or 'auto' with one)"))),
        o => return Err(bad(format!("unknown variant `{o}` (auto, cpu, gpu-paper, gpu-fast)"))),
    })
}

/// The search on one device or several (the one call site of the two entry points).
fn estimate_on(d: &Devices, t: &TraceSet, p: &EstimateParams, v: Option<Variant>) -> anyhow::Result<Estimate> {
    match v {
        None => nlbf::estimate(t, p, d.all()).map_err(anyhow::Error::from),
        Some(_) => nlbf::estimate_split(d.all(), t, p, v).map_err(nlbf_error),
    }
}

fn enhance_on(d: &Devices, t: &TraceSet, p: &EstimateParams, est: &Estimate, ep: &EnhanceParams) -> anyhow::Result<TraceSet> {
    nlbf::enhance(t, &p.coords, est, ep, d.all()).map_err(anyhow::Error::from)
}

/// The estimate as a dict: the six volumes [ny, nx, ns], positions, the grid, the search line.
fn estimate_dict<'py>(py: Python<'py>, est: &Estimate, line: Option<String>, note: &str) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let shape = [est.grid.ny, est.grid.nx, est.ns];
    for which in Param::ALL {
        out.set_item(which.name(), PyArray1::from_vec(py, est.volume(which)).reshape(shape)?)?;
    }
    let pos: Vec<f64> = est.positions().into_iter().flat_map(|(x, y)| [x, y]).collect();
    out.set_item("positions", PyArray1::from_vec(py, pos).reshape([est.grid.ny, est.grid.nx, 2])?)?;
    out.set_item("unestimated", PyArray1::from_vec(py, est.unestimated.clone()).reshape([est.grid.ny, est.grid.nx])?)?;
    out.set_item("search", line)?;
    out.set_item("device", note)?;
    Ok(out)
}

/// The 2+2+1 search: a dict of the volumes A..E, S and the parameter traces' positions.
#[pyfunction]
#[pyo3(signature = (data, dt, t0, headers, search, device, gpu, gpus))]
#[allow(clippy::too_many_arguments)]
pub fn nlbf_estimate<'py>(py: Python<'py>, data: PyReadonlyArray2<'py, f32>, dt: f32, t0: f32,
    headers: HashMap<String, PyReadonlyArray1<'py, f64>>, search: Search, device: &str, gpu: usize, gpus: Option<String>)
    -> PyResult<Bound<'py, PyDict>> {
    let t = trace_set(&data, dt, t0, &headers)?;
    let setup = setup(&search)?;
    let (d, note) = devices(device, gpu, gpus.as_deref())?;
    let v = variant(&d, &search.variant)?;
    let (est, line) = compute(py, || {
        let (p, line) = setup.on(&t)?;
        Ok((estimate_on(&d, &t, &p, v)?, line))
    })?;
    estimate_dict(py, &est, line, &note)
}

/// The search, then every trace stacked with its neighbours along the operators: the dict of
/// [`nlbf_estimate`] with `enhanced` (traces) and `copied` (traces next to unestimated ones).
#[pyfunction]
#[pyo3(signature = (data, dt, t0, headers, search, aperture, device, gpu, gpus))]
#[allow(clippy::too_many_arguments)]
pub fn nlbf_enhance<'py>(py: Python<'py>, data: PyReadonlyArray2<'py, f32>, dt: f32, t0: f32,
    headers: HashMap<String, PyReadonlyArray1<'py, f64>>, search: Search, aperture: Option<(f64, f64)>, device: &str, gpu: usize,
    gpus: Option<String>) -> PyResult<Bound<'py, PyDict>> {
    let t = trace_set(&data, dt, t0, &headers)?;
    let setup = setup(&search)?;
    let (d, note) = devices(device, gpu, gpus.as_deref())?;
    let v = variant(&d, &search.variant)?;
    let (est, out, copied, line) = compute(py, || {
        let (p, line) = setup.on(&t)?;
        let ep = EnhanceParams { aperture: aperture.map_or(p.aperture_c, |(x, y)| Aperture { x, y }) };
        let est = estimate_on(&d, &t, &p, v)?;
        let out = enhance_on(&d, &t, &p, &est, &ep)?;
        let copied = nlbf::slopes::copied_traces(&t, &p.coords, &est).map_err(nlbf_error)?;
        Ok((est, out, copied, line))
    })?;
    let dict = estimate_dict(py, &est, line, &note)?;
    dict.set_item("enhanced", PyArray1::from_vec(py, out.data.into_vec()).reshape([t.len(), t.ns])?)?;
    dict.set_item("copied", copied)?;
    Ok(dict)
}
