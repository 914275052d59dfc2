//! `seisgpu.wavepacket`: the 3D wave-packet transform (paper 3) and its applications
//! (`seisgpu wavepacket forward|inverse|denoise|compress|interpolate`) on volumes [n1, n2, samples].

use numpy::{Complex32, PyArray1, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2, PyReadonlyArray3, PyUntypedArrayMethods};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use seisgpu_host::wavepacket::apps::{self, InterpMethod};
use seisgpu_host::wavepacket::fragments::{Fragmented, Tiling};
use seisgpu_host::wavepacket::{Finest, FrameParams, Gather, Params};

use crate::common::{compute, devices, Devices};

/// The transform options (the CLI's names and defaults are the Python wrapper's).
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub struct FrameIn {
    pub eps: f64,
    pub gather: String,
    pub finest: Option<String>,
    pub wedges: usize,
    pub scales: usize,
    pub tau: f32,
    pub beta: f32,
    pub guard: usize,
    pub cube: Option<usize>,
    pub overlap: usize,
    pub all_gpus: bool,
}

impl FrameIn {
    fn params(&self, default_finest: Finest) -> PyResult<Params> {
        let finest = match self.finest.as_deref() {
            None => default_finest,
            Some("isotropic") => Finest::Isotropic,
            Some("directional") => Finest::Directional,
            Some(o) => return Err(PyValueError::new_err(format!("finest {o}: expected isotropic or directional"))),
        };
        let gather: Gather = self.gather.parse().map_err(|e: String| PyValueError::new_err(format!("gather: {e}")))?;
        Ok(Params { eps: self.eps, gather, frame: FrameParams { scales: self.scales, wedges: self.wedges, tau: self.tau, beta: self.beta,
            finest, guard: self.guard } })
    }
}

/// A volume's samples, read in place, and shape (C-contiguous float32 [n1, n2, samples]).
fn volume<'a>(v: &'a PyReadonlyArray3<'_, f32>) -> PyResult<(&'a [f32], [usize; 3])> {
    let s = v.shape();
    Ok((crate::common::slice(v, "volume")?, [s[0], s[1], s[2]]))
}

/// What builds the cube engines of a call: the devices (one per device of `gpus`, else the
/// device's, and every other visible GPU with `all_gpus`), the tiling of the volume `shape`, the
/// frame; and the devices' line. The engines ([`Engines::build`]) are built inside the computation.
struct Engines {
    devices: Devices,
    tiling: Tiling,
    params: Params,
    all_gpus: bool,
}

impl Engines {
    fn build(&self) -> anyhow::Result<Fragmented> {
        match &self.devices {
            Devices::One(b) => Ok(Fragmented::from_tiling(b, self.tiling.clone(), &self.params, self.all_gpus)?),
            Devices::Many(bs) => Ok(Fragmented::on_backends(bs, self.tiling.clone(), &self.params)?),
        }
    }
}

/// The [`Engines`] of a call and the devices' line (the arguments checked here, before the computation).
fn transform(shape: [usize; 3], f: &FrameIn, finest: Finest, cube: Option<usize>, device: &str, gpu: usize, gpus: Option<&str>)
    -> PyResult<(Engines, String)> {
    let err = crate::common::to_py;
    let params = f.params(finest)?;
    let side = match cube.or(f.cube) {
        Some(c) => c,
        None => seisgpu_host::wavepacket::auto_cube(shape, f.overlap).map_err(err)?.0,
    };
    let tiling = Tiling::new(shape, side, f.overlap).map_err(err)?;
    let (d, note) = devices(device, gpu, gpus)?;
    if matches!(d, Devices::Many(_)) && f.all_gpus {
        return Err(PyValueError::new_err("all_gpus and gpus both choose the devices: give one (gpus='all' takes every GPU)"));
    }
    Ok((Engines { devices: d, tiling, params, all_gpus: f.all_gpus }, note))
}

fn volume_out<'py>(py: Python<'py>, v: Vec<f32>, shape: [usize; 3]) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyArray1::from_vec(py, v).reshape(shape)?.into_any())
}

/// Volume -> coefficients: (complex64 coefficients, cube side, coefficients per cube, frame
/// description, devices' line).
#[pyfunction]
#[pyo3(signature = (vol, frame, device, gpu, gpus))]
pub fn wp_forward<'py>(py: Python<'py>, vol: PyReadonlyArray3<'py, f32>, frame: FrameIn, device: &str, gpu: usize, gpus: Option<String>)
    -> PyResult<(Bound<'py, PyAny>, usize, usize, String, String)> {
    let (v, shape) = volume(&vol)?;
    let (tr, note) = transform(shape, &frame, Finest::Isotropic, None, device, gpu, gpus.as_deref())?;
    let (c, tr) = compute(py, || {
        let tr = tr.build()?;
        Ok((tr.forward(v)?, tr))
    })?;
    Ok((PyArray1::from_vec(py, c).into_any(), tr.tiling.cube, tr.frame.total, tr.frame.describe(), note))
}

/// Coefficients -> volume of `shape`, on the frame of `frame` and `cube`.
#[pyfunction]
#[pyo3(signature = (coeffs, shape, cube, frame, device, gpu, gpus))]
#[allow(clippy::too_many_arguments)]
pub fn wp_inverse<'py>(py: Python<'py>, coeffs: PyReadonlyArray1<'py, Complex32>, shape: [usize; 3], cube: usize, frame: FrameIn,
    device: &str, gpu: usize, gpus: Option<String>) -> PyResult<Bound<'py, PyAny>> {
    let c = coeffs.as_slice().map_err(|_| PyValueError::new_err("coefficients: the array must be C-contiguous"))?;
    let (tr, _) = transform(shape, &frame, Finest::Isotropic, Some(cube), device, gpu, gpus.as_deref())?;
    let v = compute(py, || Ok(tr.build()?.inverse(c)?))?;
    volume_out(py, v, shape)
}

/// Noise suppression: (volume, sigma, whether sigma was estimated, fraction kept, devices' line).
#[pyfunction]
#[pyo3(signature = (vol, frame, sigma, k, device, gpu, gpus))]
#[allow(clippy::too_many_arguments)]
pub fn wp_denoise<'py>(py: Python<'py>, vol: PyReadonlyArray3<'py, f32>, frame: FrameIn, sigma: Option<f32>, k: f32, device: &str,
    gpu: usize, gpus: Option<String>) -> PyResult<(Bound<'py, PyAny>, f32, bool, f64, String)> {
    let (v, shape) = volume(&vol)?;
    let (tr, note) = transform(shape, &frame, Finest::Directional, None, device, gpu, gpus.as_deref())?;
    let d = compute(py, || Ok(apps::denoise(&tr.build()?, v, sigma, k)?))?;
    Ok((volume_out(py, d.volume, shape)?, d.sigma, d.estimated, d.kept_fraction as f64, note))
}

/// Compression: (reconstruction, kept coefficients, ratio, relative error, SNR dB, devices' line).
#[pyfunction]
#[pyo3(signature = (vol, frame, cr, device, gpu, gpus))]
pub fn wp_compress<'py>(py: Python<'py>, vol: PyReadonlyArray3<'py, f32>, frame: FrameIn, cr: f64, device: &str, gpu: usize,
    gpus: Option<String>) -> PyResult<(Bound<'py, PyAny>, usize, f64, f64, f64, String)> {
    let (v, shape) = volume(&vol)?;
    let (tr, note) = transform(shape, &frame, Finest::Isotropic, None, device, gpu, gpus.as_deref())?;
    let c = compute(py, || Ok(apps::compress(&tr.build()?, v, cr)?))?;
    Ok((volume_out(py, c.volume, shape)?, c.kept, c.ratio, c.rel_error, c.snr_db, note))
}

/// Interpolation of dead traces: (volume, missing traces, iterations, devices' line).
#[pyfunction]
#[pyo3(signature = (vol, frame, mask, method, iterations, final_fraction, cr, device, gpu, gpus))]
#[allow(clippy::too_many_arguments)]
pub fn wp_interpolate<'py>(py: Python<'py>, vol: PyReadonlyArray3<'py, f32>, frame: FrameIn, mask: Option<PyReadonlyArray2<'py, bool>>,
    method: &str, iterations: usize, final_fraction: f32, cr: f64, device: &str, gpu: usize, gpus: Option<String>)
    -> PyResult<(Bound<'py, PyAny>, usize, usize, String)> {
    let method = match method {
        "pocs" => InterpMethod::Pocs { iterations, final_fraction },
        "single" => InterpMethod::SinglePass { ratio: cr },
        o => return Err(PyValueError::new_err(format!("method {o}: expected pocs or single"))),
    };
    let (v, shape) = volume(&vol)?;
    let live = match &mask {
        Some(m) => {
            if m.shape() != [shape[0], shape[1]] {
                return Err(PyValueError::new_err(format!("mask: shape {:?} for {} x {} traces", m.shape(), shape[0], shape[1])));
            }
            Some(m.as_slice().map_err(|_| PyValueError::new_err("mask: the array must be C-contiguous"))?.to_vec())
        }
        None => None,
    };
    let (tr, note) = transform(shape, &frame, Finest::Directional, None, device, gpu, gpus.as_deref())?;
    let r = compute(py, || {
        let tr = tr.build()?;
        let live = match live {
            Some(l) => l,
            None => apps::live_traces(&tr, v)?,
        };
        Ok(apps::interpolate(&tr, v, &live, method)?)
    })?;
    Ok((volume_out(py, r.volume, shape)?, r.missing, r.iterations, note))
}
