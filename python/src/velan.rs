//! `seisgpu.velan`: semblance velocity analysis of CMP gathers and automatic v_rms(t) picks
//! (`seisgpu velan`), the same steps as the CLI.

use std::collections::HashMap;

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;
use seisgpu_host::velan::{self, pick, Gathers, Scan, VelanParams};
use seisgpu_host::velocity::{text, VelocityFunction, VelocityModel};

use crate::common::{compute, devices, to_py, trace_set};

/// `velan`'s options (the CLI's names and units: `window` in ms).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct Options {
    pub vmin: f32,
    pub vmax: f32,
    pub nv: i64,
    pub window: f32,
    pub eta: f32,
    pub max_stretch: f32,
    pub threshold: f32,
    pub min_fold: usize,
    pub bin: f64,
    pub output: Option<std::path::PathBuf>,
    pub nmo: bool,
}

/// Semblance panels, picks and v_rms functions of every CMP; a dict of NumPy arrays (see the
/// Python wrapper), the picks written to `output` (text, one CMP per line) when given.
#[pyfunction]
#[pyo3(signature = (data, dt, t0, headers, options, device, gpu))]
#[allow(clippy::too_many_arguments)]
pub fn velan_scan<'py>(py: Python<'py>, data: PyReadonlyArray2<'py, f32>, dt: f32, t0: f32, headers: HashMap<String, PyReadonlyArray1<'py, f64>>,
    options: Options, device: &str, gpu: usize) -> PyResult<Bound<'py, PyDict>> {
    let a = &options;
    let bad = |m: String| Err(PyValueError::new_err(m));
    if !(0.0..=1.0).contains(&a.threshold) {
        return bad(format!("threshold {} must be between 0 and 1", a.threshold));
    }
    if !(a.nv >= 2 && a.nv <= 10_000) {
        return bad(format!("nv {} must be between 2 and 10000 trial velocities", a.nv));
    }
    if !(a.window > 0.0 && a.window.is_finite()) {
        return bad(format!("window {} ms must be positive", a.window));
    }
    if let Some(path) = &a.output {
        seisgpu_host::io::output::check_writable(path).map_err(to_py)?;
    }
    let traces = trace_set(&data, dt, t0, &headers)?;
    let p = VelanParams { vmin: a.vmin, vmax: a.vmax, nv: a.nv as usize, window: a.window * 1e-3, eta: a.eta, max_stretch: a.max_stretch };
    p.validate(traces.dt).map_err(to_py)?;
    let (d, note) = devices(device, gpu, None)?;
    let source = a.output.as_ref().map_or_else(|| "velan picks".to_string(), |p| p.display().to_string());
    // The gathers, the semblance, the picks, their functions and the NMO are the host library's
    // work (the GIL released, and timed for `last_call_seconds`).
    let (g, scan, panels, picks, funcs, vrms, corrected) = compute(py, || {
        let g = Gathers::new(&traces, a.bin).map_err(|e| e.context("grouping the traces"))?;
        let scan = Scan::new(&p, &g)?;
        let panels = velan::semblance(d.first(), &g, &p)?;
        let picks = pick::pick_all(&g, &panels, &scan, a.threshold, a.min_fold);
        let funcs = pick::functions(&g, &picks, &source);
        let model = funcs.clone().map(VelocityModel::PerCmp);
        let functions: Vec<Option<VelocityFunction>> = g.location.iter().map(|l| model.as_ref().map(|m| m.function_at(l))).collect();
        let vrms: Vec<Vec<f32>> = functions.iter().map(|f| f.as_ref().map_or_else(Vec::new, |f| f.sample(g.t_first, g.dt, g.ns))).collect();
        let corrected = (a.nmo && funcs.is_some()).then(|| velan::nmo_gathers(&traces, &g, &vrms, p.max_stretch));
        Ok((g, scan, panels, picks, funcs, vrms, corrected))
    })?;
    let (ncmp, ns) = (g.len(), g.ns);
    let Some(funcs) = funcs else {
        let highest = panels.values.iter().cloned().fold(0.0f32, f32::max);
        return bad(format!("no CMP has a semblance peak of at least threshold {} (highest {highest:.3}); lower it or check vmin/vmax",
            a.threshold));
    };
    let out = PyDict::new(py);
    let nv = panels.nv;
    out.set_item("semblance", PyArray1::from_vec(py, panels.values).reshape([ncmp, nv, panels.ns])?)?;
    out.set_item("velocities", PyArray1::from_vec(py, scan.velocities.clone()))?;
    out.set_item("t0", g.t_first)?;
    out.set_item("cdp", g.location.iter().map(|l| l.cdp).collect::<Vec<_>>())?;
    out.set_item("x", g.location.iter().map(|l| l.x).collect::<Vec<_>>())?;
    out.set_item("y", g.location.iter().map(|l| l.y).collect::<Vec<_>>())?;
    out.set_item("fold", (0..ncmp).map(|i| g.traces(i).len()).collect::<Vec<_>>())?;
    out.set_item("picks", picks.iter().map(|ps| ps.iter().map(|q| (q.t, q.v, q.semblance)).collect::<Vec<_>>()).collect::<Vec<_>>())?;
    out.set_item("device", note)?;
    out.set_item("vrms", PyArray1::from_vec(py, vrms.concat()).reshape([ncmp, ns])?)?;
    if let Some(path) = &a.output {
        let notes = vec![format!("seisgpu velan: {} CMPs, {} velocities {}..{} m/s, window {} ms, eta {}, stretch mute {}, threshold {}, \
            min fold {}", ncmp, p.nv, p.vmin, p.vmax, a.window, p.eta, p.max_stretch, a.threshold, a.min_fold)];
        text::write(path, &funcs, &notes).map_err(to_py)?;
    }
    if let Some(corrected) = corrected {
        out.set_item("nmo", PyArray1::from_vec(py, corrected.data.into_vec()).reshape([traces.len(), ns])?)?;
    }
    Ok(out)
}
