//! `seisgpu.ktm`: Kirchhoff prestack time migration and its exact adjoint, Kirchhoff modelling
//! (`seisgpu ktm migrate|model`). The options are the CLI's, built into [`ktm::Params`] the same way.

use std::collections::HashMap;

use numpy::{PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3, PyReadonlyArrayDyn, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use seisgpu_host::grid::{self, GridRequest};
use seisgpu_host::ktm::{self, AntiAlias, Aperture, GpuLimits, Image, ImageGrid, OffsetClasses, Params, Variant, Velocity, VelocityVolume};
use seisgpu_host::pstm::{TraveltimeMode, TraveltimeModel};
use seisgpu_host::velocity::VelocityModel;
use seisgpu_host::TraceSet;

use crate::common::{compute, devices, to_py, trace_set, Devices};

/// RMS velocity as given: the CLI's text (a constant, t:v pairs, a file), v_rms(tau) on the image
/// times, or v_rms(x, y, tau) on the image grid.
#[derive(FromPyObject)]
pub enum VelocityIn<'py> {
    Spec(String),
    Times(PyReadonlyArray1<'py, f32>),
    Grid(PyReadonlyArray3<'py, f32>),
}

impl VelocityIn<'_> {
    /// On the image grid `g` (what the CLI's `--velocity` does with its text).
    pub fn on(&self, g: &ImageGrid) -> PyResult<Velocity> {
        match self {
            VelocityIn::Spec(s) => {
                let what = format!("velocity {s}");
                let model = VelocityModel::parse(s).map_err(|e| to_py(e.context(what.clone())))?;
                seisgpu_host::velocity::commands::ktm_velocity(&model, g, &what).map_err(to_py)
            }
            VelocityIn::Times(v) => {
                let v = v.as_slice().map_err(|_| PyValueError::new_err("velocity: the array must be C-contiguous"))?;
                if v.len() != g.ntau {
                    return Err(PyValueError::new_err(format!("velocity: {} values for the {} image times", v.len(), g.ntau)));
                }
                Ok(Velocity::Function { t0: g.tau0, dt: g.dtau, v: v.to_vec() })
            }
            VelocityIn::Grid(v) => {
                if v.shape() != [g.nx, g.ny, g.ntau] {
                    return Err(PyValueError::new_err(format!("velocity: shape {:?}, the image grid is [{}, {}, {}] (nx, ny, ntau)",
                        v.shape(), g.nx, g.ny, g.ntau)));
                }
                let v = v.as_slice().map_err(|_| PyValueError::new_err("velocity: the array must be C-contiguous"))?;
                Ok(Velocity::Volume(VelocityVolume { x0: g.x0, dx: g.dx, nx: g.nx, y0: g.y0, dy: g.dy, ny: g.ny, t0: g.tau0, dt: g.dtau,
                    nt: g.ntau, v: v.to_vec() }))
            }
        }
    }
}

/// The image grid as asked for: every `None` comes from the data, as the CLI does for a SEG-Y input.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct GridIn {
    pub x0: Option<f64>,
    pub dx: Option<f64>,
    pub nx: Option<usize>,
    pub y0: Option<f64>,
    pub dy: Option<f64>,
    pub ny: Option<usize>,
    pub tau0: Option<f32>,
    pub dtau: Option<f32>,
    pub ntau: Option<usize>,
}

impl GridIn {
    pub fn request(&self) -> GridRequest {
        GridRequest { x0: self.x0, dx: self.dx, nx: self.nx, y0: self.y0, dy: self.dy, ny: self.ny, tau0: self.tau0, dtau: self.dtau,
            ntau: self.ntau }
    }
}

/// `ktm migrate|model`'s migration options (the CLI's names, `no_*` flags as booleans that are on).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct Options<'py> {
    pub velocity: VelocityIn<'py>,
    pub aperture: Option<f64>,
    pub max_angle: f64,
    pub taper: f64,
    pub rho: bool,
    pub prep_on_gpu: bool,
    pub weights: bool,
    pub antialias: bool,
    pub aa_max: f32,
    pub aa_spacing: Option<(f64, f64)>,
    pub mute_stretch: Option<f32>,
    pub offset_classes: Option<(f64, f64, usize)>,
    pub traveltime: String,
    pub traveltime_model: String,
    pub eta: f32,
    pub kernel: String,
    pub paper_block: (u32, u32),
    pub max_traces_per_chunk: Option<usize>,
    pub max_columns_per_tile: Option<usize>,
}

/// The parameters on `grid` (as the CLI's `params_on`; errors name the argument).
pub fn params(o: &Options, grid: ImageGrid) -> PyResult<Params> {
    let bad = |m: String| PyValueError::new_err(m);
    let mut p = Params::full(grid, o.velocity.on(&grid)?);
    p.rho_filter = o.rho;
    p.prep_on_gpu = o.prep_on_gpu;
    p.weights = o.weights;
    p.antialias = o.antialias.then(|| {
        let (dx, dy) = o.aa_spacing.unwrap_or((grid.dx, grid.dy));
        AntiAlias { dx, dy, max_half_length: o.aa_max }
    });
    p.aperture = Aperture { max_distance: o.aperture.unwrap_or(f64::INFINITY), max_angle_deg: o.max_angle, taper: o.taper };
    p.mute_stretch = o.mute_stretch;
    p.offset_classes = o.offset_classes.map(|(first, width, count)| OffsetClasses { first, width, count });
    p.traveltime = match o.traveltime.as_str() {
        "exact" => TraveltimeMode::Exact,
        "static8" => TraveltimeMode::Static8,
        "dynamic" => TraveltimeMode::Dynamic { tolerance: 1e-4 },
        other => return Err(bad(format!("traveltime `{other}`: expected exact, static8 or dynamic"))),
    };
    p.traveltime_model = match o.traveltime_model.as_str() {
        "dsr" => TraveltimeModel::Dsr,
        "vti" => TraveltimeModel::Vti,
        other => return Err(bad(format!("traveltime_model `{other}`: expected dsr or vti"))),
    };
    p.eta = o.eta;
    p.variant = match o.kernel.as_str() {
        "paper" => Variant::Paper { block_x: o.paper_block.0, block_y: o.paper_block.1 },
        other => other.parse::<Variant>().map_err(|e| bad(format!("kernel: {e}")))?,
    };
    p.limits = GpuLimits { max_traces_per_chunk: o.max_traces_per_chunk, max_columns_per_tile: o.max_columns_per_tile };
    Ok(p)
}

/// The grid as a tuple (x0, dx, nx, y0, dy, ny, tau0, dtau, ntau).
pub type GridTuple = (f64, f64, usize, f64, f64, usize, f32, f32, usize);

pub fn grid_tuple(g: &ImageGrid) -> GridTuple { (g.x0, g.dx, g.nx, g.y0, g.dy, g.ny, g.tau0, g.dtau, g.ntau) }

/// The single- or multi-device migration (the one call site of the two entry points).
fn migrate_on(traces: &TraceSet, p: &Params, d: &Devices) -> anyhow::Result<Image> {
    Ok(ktm::migrate(traces, p, d.all())?)
}

/// (image [classes, nx, ny, ntau], grid, class centre offsets, traces in no offset class, the grid
/// line when any of it came from the data, the devices' line).
type Migrated<'py> = (Bound<'py, PyAny>, GridTuple, Vec<f64>, usize, Option<String>, String);

/// Migrates traces: returns [`Migrated`].
#[pyfunction]
#[pyo3(signature = (data, dt, t0, headers, grid, options, device, gpu, gpus))]
#[allow(clippy::too_many_arguments)]
pub fn ktm_migrate<'py>(py: Python<'py>, data: PyReadonlyArray2<'py, f32>, dt: f32, t0: f32,
    headers: HashMap<String, PyReadonlyArray1<'py, f64>>, grid: GridIn, options: Options<'py>, device: &str, gpu: usize,
    gpus: Option<String>) -> PyResult<Migrated<'py>> {
    let traces = trace_set(&data, dt, t0, &headers)?;
    let (g, line) = grid::complete(&grid.request(), &traces).map_err(to_py)?;
    let p = params(&options, g)?;
    let (d, note) = devices(device, gpu, gpus.as_deref())?;
    let img = compute(py, || migrate_on(&traces, &p, &d))?;
    let shape = [img.classes, g.nx, g.ny, g.ntau];
    let array = PyArray1::from_vec(py, img.data).reshape(shape)?.into_any();
    Ok((array, grid_tuple(&g), img.class_offsets, img.skipped_traces, line, note))
}

/// Kirchhoff modelling: traces [traces, ns] in the geometry `headers` from an image
/// ([nx, ny, ntau] or [classes, nx, ny, ntau]); returns (traces, grid, grid line, devices' line).
#[pyfunction]
#[pyo3(signature = (image, ns, dt, t0, headers, grid, options, device, gpu))]
#[allow(clippy::too_many_arguments)]
pub fn ktm_model<'py>(py: Python<'py>, image: PyReadonlyArrayDyn<'py, f32>, ns: usize, dt: f32, t0: f32,
    headers: HashMap<String, PyReadonlyArray1<'py, f64>>, grid: GridIn, options: Options<'py>, device: &str, gpu: usize)
    -> PyResult<(Bound<'py, PyAny>, GridTuple, Option<String>, String)> {
    let n = headers.values().next().map_or(0, |a| a.len());
    let h = crate::common::headers(n, &headers)?;
    let (g, line) = grid::complete_from_headers(&grid.request(), &h, ns, dt, t0).map_err(to_py)?;
    let p = params(&options, g)?;
    let shape = image.shape().to_vec();
    let classes = match shape.as_slice() {
        [nx, ny, nt] if (*nx, *ny, *nt) == (g.nx, g.ny, g.ntau) => 1,
        [c, nx, ny, nt] if (*nx, *ny, *nt) == (g.nx, g.ny, g.ntau) => *c,
        _ => return Err(PyValueError::new_err(format!("image: shape {shape:?} does not match the grid {} x {} x {}", g.nx, g.ny, g.ntau))),
    };
    let samples = image.as_slice().map_err(|_| PyValueError::new_err("image: the array must be C-contiguous"))?.to_vec();
    let img = Image { grid: g, classes, class_offsets: vec![], data: samples, skipped_traces: 0 };
    let (d, note) = devices(device, gpu, None)?;
    let out = compute(py, || Ok(ktm::model(&img, &h, ns, dt, t0, &p, d.first())?))?;
    let array = PyArray1::from_vec(py, out.data.into_vec()).reshape([out.headers.len(), ns])?.into_any();
    Ok((array, grid_tuple(&g), line, note))
}

/// The image grid of traces in the geometry `headers` (`ns` samples of `dt` from `t0`): the grid
/// options given, the rest from the data as [`ktm_migrate`] takes them; returns (grid, grid line).
#[pyfunction]
#[pyo3(signature = (ns, dt, t0, headers, grid))]
pub fn ktm_grid(ns: usize, dt: f32, t0: f32, headers: HashMap<String, PyReadonlyArray1<'_, f64>>, grid: GridIn)
    -> PyResult<(GridTuple, Option<String>)> {
    let n = headers.values().next().map_or(0, |a| a.len());
    let h = crate::common::headers(n, &headers)?;
    let (g, line) = grid::complete_from_headers(&grid.request(), &h, ns, dt, t0).map_err(to_py)?;
    Ok((grid_tuple(&g), line))
}
