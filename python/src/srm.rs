//! `seisgpu.srm`: shot-record depth migration with Chebyshev wavefield extrapolation (`seisgpu srm`);
//! the velocity laid over the traces as the CLI lays it.

use std::collections::HashMap;

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use seisgpu_host::srm::design::DesignParams;
use seisgpu_host::srm::{self, GpuOptions, SrmParams, VelocityModel};
use seisgpu_host::velocity::commands;
use seisgpu_host::TraceSet;

use crate::common::{compute, devices, to_py, trace_set, Devices};

/// Interval velocity: the CLI's text (a constant with `nz`, depth:velocity pairs, a velocity
/// file), or a model grid [nz, ny, nx] / [nz, nx] as it is.
#[derive(FromPyObject)]
pub enum VelocityIn<'py> {
    Spec(String),
    Grid(PyReadonlyArrayDyn<'py, f32>),
}

/// `srm`'s options (the CLI's names and units).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct Options<'py> {
    pub velocity: VelocityIn<'py>,
    pub dx: f64,
    pub dy: f64,
    pub dz: f64,
    pub x0: f64,
    pub y0: f64,
    pub fmin: f64,
    pub fmax: f64,
    pub ricker: f64,
    pub degree: usize,
    pub max_angle: f64,
    pub filter: String,
    pub taper_width: usize,
    pub taper_strength: f64,
    pub aperture: f64,
    pub table_rows: usize,
    pub nz: usize,
    pub kernel: String,
    pub planes: usize,
}

/// A velocity function laid over the traces' extent plus the aperture, at dx, dy, dz (as the CLI).
fn sample_model(a: &Options, spec: &str, t: &TraceSet) -> PyResult<VelocityModel> {
    let bad = |m: String| PyValueError::new_err(m);
    if !(a.dx > 0.0 && a.dy > 0.0 && a.dz > 0.0) {
        return Err(bad(format!("dx {}, dy {}, dz {} m must be positive", a.dx, a.dy, a.dz)));
    }
    let what = format!("velocity {spec}");
    let model = seisgpu_host::velocity::VelocityModel::parse(spec).map_err(|e| to_py(e.context(what.clone())))?;
    let nz = if a.nz > 0 { a.nz } else { (commands::deepest(&model) / a.dz).ceil() as usize + 1 };
    if nz < 2 {
        return Err(bad(format!("{what} reaches no depth: give nz (depth samples at dz {} m)", a.dz)));
    }
    let (mut lo, mut hi) = ([f64::INFINITY; 2], [f64::NEG_INFINITY; 2]);
    for h in &t.headers {
        for (x, y) in [(h.sx, h.sy), (h.gx, h.gy)] {
            lo = [lo[0].min(x), lo[1].min(y)];
            hi = [hi[0].max(x), hi[1].max(y)];
        }
    }
    if !(lo[0].is_finite() && hi[0].is_finite() && lo[1].is_finite() && hi[1].is_finite()) {
        return Err(bad(format!("{what}: the traces have no coordinates to lay the velocity on")));
    }
    let axis = |lo: f64, hi: f64, d: f64| -> (f64, usize) {
        let o = ((lo - a.aperture) / d).floor() * d;
        (o, (((hi + a.aperture - o) / d - 1e-9).ceil() as usize).saturating_add(1))
    };
    let (x0, nx) = axis(lo[0], hi[0], a.dx);
    let (y0, ny) = if hi[1] - lo[1] < 0.5 * a.dy { (lo[1], 1) } else { axis(lo[1], hi[1], a.dy) };
    commands::srm_model(&model, nx, ny, nz, a.dx, a.dy, a.dz, x0, y0, &what).map_err(to_py)
}

fn model(a: &Options, t: &TraceSet) -> PyResult<VelocityModel> {
    match &a.velocity {
        VelocityIn::Spec(s) => sample_model(a, s, t),
        VelocityIn::Grid(g) => {
            let (nz, ny, nx) = match g.shape() {
                [nz, ny, nx] => (*nz, *ny, *nx),
                [nz, nx] => (*nz, 1, *nx),
                s => return Err(PyValueError::new_err(format!("velocity: shape {s:?}, expected (nz, ny, nx) or (nz, nx)"))),
            };
            let v = g.as_slice().map_err(|_| PyValueError::new_err("velocity: the array must be C-contiguous"))?.to_vec();
            let m = VelocityModel { v, nx, ny, nz, dx: a.dx, dy: a.dy, dz: a.dz, x0: a.x0, y0: a.y0 };
            m.validate().map_err(|e| PyValueError::new_err(format!("velocity: {e}")))?;
            Ok(m)
        }
    }
}

/// The single- or multi-device migration (the one call site of the two entry points).
fn migrate_on(d: &Devices, t: &TraceSet, m: &VelocityModel, p: &SrmParams, o: GpuOptions) -> anyhow::Result<srm::Image> {
    Ok(srm::migrate(t, m, p, o, d.all())?)
}

/// The model grid's (x0, dx, y0, dy, dz) in metres.
type ModelGrid = (f64, f64, f64, f64, f64);

/// Migrates shot gathers: (image [nz, ny, nx], its grid, devices' line).
#[pyfunction]
#[pyo3(signature = (data, dt, t0, headers, options, device, gpu, gpus))]
#[allow(clippy::too_many_arguments)]
pub fn srm_migrate<'py>(py: Python<'py>, data: PyReadonlyArray2<'py, f32>, dt: f32, t0: f32, headers: HashMap<String, PyReadonlyArray1<'py, f64>>,
    options: Options<'py>, device: &str, gpu: usize, gpus: Option<String>) -> PyResult<(Bound<'py, PyAny>, ModelGrid, String)> {
    let a = &options;
    let traces = trace_set(&data, dt, t0, &headers)?;
    let m = model(a, &traces)?;
    let filter = a.filter.parse().map_err(|e: String| PyValueError::new_err(format!("filter: {e}")))?;
    let params = SrmParams {
        design: DesignParams { degree: a.degree, max_angle_deg: a.max_angle, filter }, fmin: a.fmin, fmax: a.fmax, ricker_peak: a.ricker,
        taper_width: a.taper_width, taper_strength: a.taper_strength, aperture: a.aperture, table_rows: a.table_rows, nz: a.nz,
    };
    let variant = a.kernel.parse().map_err(|e: String| PyValueError::new_err(format!("kernel: {e}")))?;
    let opts = GpuOptions { variant, planes: a.planes };
    let (d, note) = devices(device, gpu, gpus.as_deref())?;
    let img = compute(py, || migrate_on(&d, &traces, &m, &params, opts))?;
    let shape = [img.nz, img.ny, img.nx];
    Ok((PyArray1::from_vec(py, img.data).reshape(shape)?.into_any(), (m.x0, m.dx, m.y0, m.dy, m.dz), note))
}
