//! The Kirchhoff pair on GPU arrays (CuPy, or anything with `__cuda_array_interface__` or DLPack,
//! as the Python layer hands them over): device addresses and lengths, borrowed for the call,
//! computed on by `seisgpu_host::ktm::resident` with no copy through host memory. The Python layer
//! synchronises the array's stream before the call and allocates the output through CuPy.

use std::collections::HashMap;

use numpy::{PyReadonlyArray1, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use seisgpu_host::grid;
use seisgpu_host::ktm::resident::{self, Borrowed};
use seisgpu_host::Backend;

use crate::common::{compute, devices, headers as header_list};
use crate::ktm::{grid_tuple, params, GridIn, GridTuple, Options};

/// GPU `gpu`, opened as `device="gpu", gpu=N` opens it (the same open device).
fn gpu_of(gpu: usize) -> PyResult<(std::sync::Arc<seisgpu_host::runtime::Gpu>, String)> {
    let (d, note) = devices("gpu", gpu, None)?;
    match d.first() {
        Backend::Gpu(g) => Ok((g.clone(), note)),
        Backend::Cpu => Err(PyValueError::new_err(format!("GPU arrays need a GPU; the call would run on {note}"))),
    }
}

/// Migrates the traces at device address `data` ([traces, ns] float32 on GPU `gpu`) into the
/// image at device address `image` (`image_len` float32: classes x nx x ny x ntau, overwritten).
/// Returns (grid, class centre offsets, traces in no offset class, the grid line, the device's line).
#[pyfunction]
#[pyo3(signature = (data, ns, dt, t0, headers, grid, options, gpu, image, image_len))]
#[allow(clippy::too_many_arguments)]
pub fn ktm_migrate_resident<'py>(py: Python<'py>, data: u64, ns: usize, dt: f32, t0: f32,
    headers: HashMap<String, PyReadonlyArray1<'py, f64>>, grid: GridIn, options: Options<'py>, gpu: usize, image: u64, image_len: usize)
    -> PyResult<(GridTuple, Vec<f64>, usize, Option<String>, String)> {
    let n = headers.values().next().map_or(0, |a| a.len());
    let h = header_list(n, &headers)?;
    let (g, line) = grid::complete_from_headers(&grid.request(), &h, ns, dt, t0).map_err(crate::common::to_py)?;
    let p = params(&options, g)?;
    let (device, note) = gpu_of(gpu)?;
    let out = compute(py, || {
        // SAFETY: the Python layer passes a live float32 array of n x ns values (synchronised, held
        // for the call) and an output it allocated with `image_len` values.
        let traces = unsafe { Borrowed::new(&device, "data", data, n * ns)? };
        let mut img = unsafe { Borrowed::new(&device, "image", image, image_len)? };
        Ok(resident::migrate(&device, &traces.view(), &h, ns, dt, t0, &p, &mut img.view_mut())?)
    })?;
    Ok((grid_tuple(&g), out.class_offsets, out.skipped_traces, line, note))
}

/// Kirchhoff modelling of the image at device address `image` (`image_len` float32 on GPU `gpu`:
/// classes x nx x ny x ntau) into the traces at device address `traces` ([traces, ns] float32,
/// overwritten). Returns (grid, the grid line, the device's line).
#[pyfunction]
#[pyo3(signature = (image, image_len, ns, dt, t0, headers, grid, options, gpu, traces))]
#[allow(clippy::too_many_arguments)]
pub fn ktm_model_resident<'py>(py: Python<'py>, image: u64, image_len: usize, ns: usize, dt: f32, t0: f32,
    headers: HashMap<String, PyReadonlyArray1<'py, f64>>, grid: GridIn, options: Options<'py>, gpu: usize, traces: u64)
    -> PyResult<(GridTuple, Option<String>, String)> {
    let n = headers.values().next().map_or(0, |a| a.len());
    let h = header_list(n, &headers)?;
    let (g, line) = grid::complete_from_headers(&grid.request(), &h, ns, dt, t0).map_err(crate::common::to_py)?;
    let p = params(&options, g)?;
    let (device, note) = gpu_of(gpu)?;
    compute(py, || {
        // SAFETY: as in `ktm_migrate_resident`: a live image of `image_len` values, an output of n x ns.
        let img = unsafe { Borrowed::new(&device, "image", image, image_len)? };
        let mut out = unsafe { Borrowed::new(&device, "traces", traces, n * ns)? };
        Ok(resident::model(&device, &img.view(), &h, ns, dt, t0, &p, &mut out.view_mut())?)
    })?;
    Ok((grid_tuple(&g), line, note))
}
