//! `seisgpu.pstm`: paper 5's PSTM engine with exact, static 8-point or dynamic traveltimes, DSR or
//! VTI (`seisgpu pstm migrate`); the parameters built as the CLI builds them.

use std::collections::HashMap;

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use seisgpu_host::grid::{self, GridRequest, ImageGrid};
use seisgpu_host::pstm::{self, GpuTuning, PstmImage, PstmParams, TraveltimeMode, TraveltimeModel};
use seisgpu_host::velocity::{commands, Domain, VelocityModel};
use seisgpu_host::TraceSet;

use crate::common::{compute, devices, to_py, trace_set, Devices};
use crate::ktm::{grid_tuple, GridTuple, VelocityIn};

/// `pstm migrate`'s options (the CLI's names; `None`: the CLI's default).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct Options<'py> {
    pub traveltime: String,
    pub traveltime_model: String,
    pub tolerance: Option<f32>,
    pub max_step: u32,
    pub x0: Option<f64>,
    pub dx: Option<f64>,
    pub nx: Option<usize>,
    pub y0: Option<f64>,
    pub dy: Option<f64>,
    pub ny: Option<usize>,
    pub nz: Option<usize>,
    pub dtau: Option<f32>,
    pub noff: usize,
    pub offset0: f32,
    pub doffset: f32,
    pub velocity: VelocityIn<'py>,
    pub velocity_gradient: f32,
    pub eta: f32,
    pub aperture: f32,
    pub stretch: f32,
    pub warps: Option<u32>,
    pub max_regs: Option<u32>,
    pub texture: bool,
}

/// v_rms per image sample: a constant (with its gradient), the CLI's text, or arrays on the grid.
fn vrms(o: &Options, g: &ImageGrid) -> PyResult<Vec<f32>> {
    let gradient_only_constant = || PyValueError::new_err(format!(
        "velocity_gradient {} applies to a constant velocity only", o.velocity_gradient));
    match &o.velocity {
        VelocityIn::Spec(s) => {
            let what = format!("velocity {s}");
            let model = VelocityModel::parse(s).map_err(|e| to_py(e.context(what.clone())))?;
            match &model {
                VelocityModel::Function(f) if f.knots.len() == 1 && f.domain == Domain::Time => {
                    let v0 = f.knots[0].1;
                    Ok((0..g.ntau).map(|z| v0 + o.velocity_gradient * (g.tau0 + z as f32 * g.dtau)).collect())
                }
                _ if o.velocity_gradient != 0.0 => Err(gradient_only_constant()),
                _ => commands::pstm_vrms(&model, g, &what).map_err(to_py),
            }
        }
        _ if o.velocity_gradient != 0.0 => Err(gradient_only_constant()),
        v => match v.on(g)? {
            seisgpu_host::ktm::Velocity::Function { v, .. } => Ok(v),
            seisgpu_host::ktm::Velocity::Volume(vol) => Ok(vol.v),
            seisgpu_host::ktm::Velocity::Constant(c) => Ok(vec![c; g.ntau]),
        },
    }
}

/// The parameters on the image grid `g` (as the CLI's `pstm_params`).
fn params(o: &Options, g: &ImageGrid, model: TraveltimeModel) -> PyResult<PstmParams> {
    let fastest = GpuTuning::fastest();
    let (warps, max_regs) = (o.warps.unwrap_or(fastest.warps), o.max_regs.unwrap_or(fastest.max_regs));
    Ok(PstmParams {
        nx: g.nx, ny: g.ny, x0: g.x0, y0: g.y0, dx: g.dx, dy: g.dy, nz: g.ntau, tau0: g.tau0, dtau: g.dtau,
        noff: o.noff, offset0: o.offset0, doffset: o.doffset,
        vrms: vrms(o, g)?,
        eta: if model == TraveltimeModel::Vti { vec![o.eta; g.ntau] } else { vec![] },
        aperture: o.aperture,
        stretch: o.stretch,
        dynamic_max_step: o.max_step,
        gpu: if o.texture {
            GpuTuning { warps, max_regs, texture: true, ..GpuTuning::default() }
        } else {
            // The lean static8 kernels are written for the default block of 8 warps.
            GpuTuning { warps, max_regs, tile_x: if warps % 2 == 0 { 2 } else { 1 }, lean: warps == fastest.warps, ..fastest }
        },
    })
}

/// The single- or multi-device migration (the one call site of the two entry points).
fn migrate_on(t: &TraceSet, p: &PstmParams, mode: TraveltimeMode, model: TraveltimeModel, d: &Devices) -> anyhow::Result<PstmImage> {
    Ok(pstm::migrate(t, p, mode, model, d.all())?)
}

/// (image [nx, ny, noff, nz], grid, traces used, contributions, grid line, devices' line).
type Migrated<'py> = (Bound<'py, PyAny>, GridTuple, usize, u64, Option<String>, String);

/// Migrates traces: returns [`Migrated`].
#[pyfunction]
#[pyo3(signature = (data, dt, t0, headers, options, device, gpu, gpus))]
#[allow(clippy::too_many_arguments)]
pub fn pstm_migrate<'py>(py: Python<'py>, data: PyReadonlyArray2<'py, f32>, dt: f32, t0: f32,
    headers: HashMap<String, PyReadonlyArray1<'py, f64>>, options: Options<'py>, device: &str, gpu: usize, gpus: Option<String>)
    -> PyResult<Migrated<'py>> {
    let o = &options;
    let traces = trace_set(&data, dt, t0, &headers)?;
    let mode = TraveltimeMode::parse(&o.traveltime, o.tolerance.unwrap_or(pstm::DEFAULT_DYNAMIC_TOLERANCE))
        .map_err(|e| PyValueError::new_err(format!("traveltime: {e}")))?;
    let model: TraveltimeModel = o.traveltime_model.parse().map_err(|e: String| PyValueError::new_err(format!("traveltime_model: {e}")))?;
    let request = GridRequest { x0: o.x0, dx: o.dx, nx: o.nx, y0: o.y0, dy: o.dy, ny: o.ny, tau0: None, dtau: o.dtau, ntau: o.nz };
    let (g, line) = grid::complete(&request, &traces).map_err(to_py)?;
    let p = params(o, &g, model)?;
    p.validate(mode, model).map_err(to_py)?;
    let (d, note) = devices(device, gpu, gpus.as_deref())?;
    let (img, samples) = compute(py, || migrate_on(&traces, &p, mode, model, &d).map(|img| {
        let samples = img.unpadded();
        (img, samples)
    }))?;
    let shape = [img.nx, img.ny, img.noff, img.nz];
    let array = PyArray1::from_vec(py, samples).reshape(shape)?.into_any();
    Ok((array, grid_tuple(&g), img.stats.traces_used, img.stats.contributions as u64, line, note))
}
