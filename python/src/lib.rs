//! `seisgpu._native`: the host library's drivers on NumPy arrays, one file per algorithm, and the
//! Kirchhoff pair on GPU arrays (`resident.rs`). The Python package (`seisgpu/`) wraps these with
//! the documented signatures, axis vectors and dtype conversions.

mod common;
mod ktm;
mod nlbf;
mod nmo;
mod pstm;
mod resident;
mod srm;
mod velan;
mod wavepacket;

use pyo3::prelude::*;

/// Whether GPU kernels are compiled into this build (a build with `SEISGPU_SKIP_PTX=1` has none).
#[pyfunction]
fn has_kernels() -> bool { !seisgpu_host::runtime::PTX.is_empty() }

/// The devices of `device`, `gpu`, `gpus`, in words ("GPU 0: ...", "CPU (16 threads), because ...").
#[pyfunction]
#[pyo3(signature = (device="auto", gpu=0, gpus=None))]
fn describe_devices(device: &str, gpu: usize, gpus: Option<String>) -> PyResult<String> {
    Ok(common::devices(device, gpu, gpus.as_deref())?.1)
}

/// Threads of the CPU paths (0 = all cores); takes effect only before the first computation.
#[pyfunction]
fn set_threads(threads: usize) { seisgpu_host::backend::init_threads(threads) }

/// Threads of the CPU paths.
#[pyfunction]
fn threads() -> usize { seisgpu_host::rayon_threads() }

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("GpuError", m.py().get_type::<common::exceptions::GpuError>())?;
    m.add_function(wrap_pyfunction!(has_kernels, m)?)?;
    m.add_function(wrap_pyfunction!(describe_devices, m)?)?;
    m.add_function(wrap_pyfunction!(set_threads, m)?)?;
    m.add_function(wrap_pyfunction!(threads, m)?)?;
    m.add_function(wrap_pyfunction!(ktm::ktm_migrate, m)?)?;
    m.add_function(wrap_pyfunction!(ktm::ktm_model, m)?)?;
    m.add_function(wrap_pyfunction!(ktm::ktm_grid, m)?)?;
    m.add_function(wrap_pyfunction!(resident::ktm_migrate_resident, m)?)?;
    m.add_function(wrap_pyfunction!(resident::ktm_model_resident, m)?)?;
    m.add_function(wrap_pyfunction!(common::last_call_seconds, m)?)?;
    m.add_function(wrap_pyfunction!(pstm::pstm_migrate, m)?)?;
    m.add_function(wrap_pyfunction!(nmo::nmo, m)?)?;
    m.add_function(wrap_pyfunction!(velan::velan_scan, m)?)?;
    m.add_function(wrap_pyfunction!(nlbf::nlbf_estimate, m)?)?;
    m.add_function(wrap_pyfunction!(nlbf::nlbf_enhance, m)?)?;
    m.add_function(wrap_pyfunction!(srm::srm_migrate, m)?)?;
    m.add_function(wrap_pyfunction!(wavepacket::wp_forward, m)?)?;
    m.add_function(wrap_pyfunction!(wavepacket::wp_inverse, m)?)?;
    m.add_function(wrap_pyfunction!(wavepacket::wp_denoise, m)?)?;
    m.add_function(wrap_pyfunction!(wavepacket::wp_compress, m)?)?;
    m.add_function(wrap_pyfunction!(wavepacket::wp_interpolate, m)?)?;
    Ok(())
}
