//! `seisgpu.nmo`: NMO correction with a stretch mute (`seisgpu nmo`).

use std::collections::HashMap;

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use seisgpu_host::nlbf;
use seisgpu_host::velocity::{Domain, VelocityModel};

use crate::common::{compute, devices, to_py, trace_set};

/// NMO-corrects traces with v_rms(t) from `velocity` (the CLI's text: a constant, t:v pairs, a
/// velocity file), at each trace's CMP; returns (traces, devices' line).
#[pyfunction]
#[pyo3(signature = (data, dt, t0, headers, velocity, max_stretch, device, gpu))]
#[allow(clippy::too_many_arguments)]
pub fn nmo<'py>(py: Python<'py>, data: PyReadonlyArray2<'py, f32>, dt: f32, t0: f32, headers: HashMap<String, PyReadonlyArray1<'py, f64>>,
    velocity: String, max_stretch: f32, device: &str, gpu: usize) -> PyResult<(Bound<'py, PyAny>, String)> {
    let traces = trace_set(&data, dt, t0, &headers)?;
    let what = format!("velocity {velocity}");
    let model = VelocityModel::parse(&velocity).map_err(|e| to_py(e.context(what.clone())))?;
    model.expect_domain(Domain::Time, &format!("nmo {what}")).map_err(to_py)?;
    let (d, note) = devices(device, gpu, None)?;
    let out = compute(py, || nlbf::nmo_model(d.first(), &traces, &model, max_stretch).map_err(|e| anyhow::Error::from(e).context(what.clone())))?;
    let shape = [out.len(), out.ns];
    Ok((PyArray1::from_vec(py, out.data.into_vec()).reshape(shape)?.into_any(), note))
}
