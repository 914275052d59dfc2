//! Migration and modelling of data that already lives on the GPU (arrays of another library such as
//! CuPy or PyTorch, on the device's primary context, which cudarc shares): the traces or the image
//! are read where they are and the result is written into the caller's device buffer, with no copy
//! through host memory. Only the geometry (headers) and the velocity come from the host; they are
//! small.
//!
//! The steps are the GPU path's ([`super::gpu`]) with the trace preparation on the GPU
//! ([`super::prep_gpu`], as `Params::prep_on_gpu`, whatever that flag says: host preparation would
//! need the traces on the host): the same kernels in the same chunks, so the image equals the host
//! entry's with `prep_on_gpu` to the order of the kernels' atomic adds, and the host-prepared one
//! to cuFFT's rounding against rustfft's. The image stays whole on the device (it is the caller's
//! buffer): `GpuLimits::max_columns_per_tile` applies to modelling only.

use std::sync::Arc;

use anyhow::Context;
use cudarc::driver::sys::{cuPointerGetAttribute, CUpointer_attribute, CUresult};
use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};
use gpu_kernels::ktm::KtmConsts;

use super::gpu::{flat4, launch_migration, launch_model, model_block_traces};
use super::{interpolated, prep_gpu, Params, Plan};
use crate::pstm::TraveltimeMode;
use crate::runtime::{Gpu, GpuError};
use crate::traces::TraceHeader;

/// A float32 buffer of another library on one GPU, borrowed for the length of a call: read and
/// written in place, never freed here (dropping it hands the pointer back untouched).
pub struct Borrowed {
    slice: Option<CudaSlice<f32>>,
}

impl Borrowed {
    /// Borrows `len` floats at device address `ptr`, after checking that the address is device
    /// memory of `gpu` (an error naming `what` otherwise).
    ///
    /// # Safety
    /// `ptr` must address `len` float32 values that stay allocated, and that no other work
    /// touches, until the `Borrowed` is dropped; the caller's pending writes to them must be
    /// finished (its stream synchronised) before the call.
    pub unsafe fn new(gpu: &Gpu, what: &str, ptr: u64, len: usize) -> anyhow::Result<Borrowed> {
        crate::ensure_input!(ptr != 0 || len == 0, "{what}: a null device pointer");
        gpu.context().bind_to_thread().map_err(GpuError::driver("binding the CUDA context"))?;
        let mut ordinal: i32 = -1;
        // SAFETY: the attribute is one int; an address the driver does not know is an error code, not a fault.
        let r = unsafe {
            cuPointerGetAttribute(&mut ordinal as *mut i32 as *mut std::ffi::c_void, CUpointer_attribute::CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                ptr)
        };
        if r != CUresult::CUDA_SUCCESS {
            crate::bail_input!("{what}: address {ptr:#x} is not device memory the CUDA driver knows ({r:?})");
        }
        let ours = gpu.info().ordinal;
        if ordinal as usize != ours {
            crate::bail_param!("gpu", "{what}: the array is on GPU {ordinal}, the call runs on GPU {ours} (pass gpu={ordinal}, or move the array)");
        }
        // SAFETY: the caller guarantees the extent and lifetime; `Drop` leaks it back.
        let slice = unsafe { gpu.stream().upgrade_device_ptr::<f32>(ptr, len) };
        Ok(Borrowed { slice: Some(slice) })
    }
    pub fn len(&self) -> usize { self.slice.as_ref().map_or(0, |s| s.len()) }
    pub fn is_empty(&self) -> bool { self.len() == 0 }
    pub fn view(&self) -> CudaView<'_, f32> { self.slice.as_ref().expect("borrowed until dropped").slice(..) }
    pub fn view_mut(&mut self) -> CudaViewMut<'_, f32> { self.slice.as_mut().expect("borrowed until dropped").slice_mut(..) }
}

impl Drop for Borrowed {
    fn drop(&mut self) {
        if let Some(s) = self.slice.take() {
            // The memory belongs to the lender: give the address back instead of freeing it.
            s.leak();
        }
    }
}

/// What a device-resident migration tells besides the image.
#[derive(Debug, Clone, PartialEq)]
pub struct Migrated {
    pub classes: usize,
    /// Centre offset (m) of each class (0 without classes).
    pub class_offsets: Vec<f64>,
    /// Input traces that fell in no offset class.
    pub skipped_traces: usize,
}

/// Migrates `traces` ([headers.len(), ns] on `gpu`, input order) into `image` (classes x nx x ny
/// x ntau on `gpu`, overwritten): [`super::migrate`] on data and image that stay on the device.
/// Returns once the image is complete.
#[allow(clippy::too_many_arguments)]
pub fn migrate(gpu: &Arc<Gpu>, traces: &CudaView<f32>, headers: &[TraceHeader], ns: usize, dt: f32, t0: f32, params: &Params,
    image: &mut CudaViewMut<f32>) -> crate::error::Result<Migrated> {
    Ok(migrate_in(gpu, traces, headers, ns, dt, t0, params, image)?)
}

#[allow(clippy::too_many_arguments)]
fn migrate_in(gpu: &Arc<Gpu>, traces: &CudaView<f32>, headers: &[TraceHeader], ns: usize, dt: f32, t0: f32, params: &Params,
    image: &mut CudaViewMut<f32>) -> anyhow::Result<Migrated> {
    crate::ensure_input!(!interpolated::needed(params),
        "ktm: the VTI traveltime model runs in the PSTM engine, which reads its traces from host memory: pass them as a host array");
    crate::ensure_input!(dt > 0.0 && dt.is_finite(), "ktm input: sample interval {dt} s is not positive");
    crate::ensure_input!(traces.len() == headers.len() * ns, "ktm input: {} samples for {} traces of {ns} samples", traces.len(), headers.len());
    let plan = Plan::new(headers, ns, dt, t0, params)?;
    let (ncols, ntau, stride) = (plan.grid.ncols(), plan.grid.ntau, plan.stride());
    let len = plan.grid.len();
    crate::ensure_input!(image.len() == plan.classes() * len, "ktm: the output holds {} samples, the image is {} classes x {} x {} x {} = {}",
        image.len(), plan.classes(), plan.grid.nx, plan.grid.ny, ntau, plan.classes() * len);
    let pairs = prep_gpu::prepare_resident(gpu, traces, ns, dt, &plan, params).context("GPU trace preprocessing")?;
    let d_geom = gpu.upload(flat4(&plan.geom))?;
    let d_vel = gpu.upload(&plan.vel)?;
    gpu.stream().memset_zeros(image).map_err(GpuError::driver("clearing the image"))?;
    for (k, range) in plan.class_ranges.iter().enumerate() {
        let chunk = params.limits.max_traces_per_chunk.unwrap_or(range.len()).max(1);
        let mut first = range.start;
        while first < range.end {
            let n = chunk.min(range.end - first);
            let consts = KtmConsts { col0: 0, ncols: ncols as u32, ntraces: n as u32, ..plan.consts };
            launch_migration(gpu, params.variant, plan.antialias, plan.corrections, consts, &d_geom.slice(4 * first..4 * (first + n)),
                &pairs.slice(2 * stride * first..2 * stride * (first + n)), &d_vel.slice(..), &mut image.slice_mut(k * len..(k + 1) * len))
                .context("GPU migration")?;
            first += n;
        }
    }
    gpu.synchronize()?;
    Ok(Migrated { classes: plan.classes(), class_offsets: plan.class_offsets(params), skipped_traces: plan.skipped_traces })
}

/// Kirchhoff modelling of `image` (classes x nx x ny x ntau on `gpu`) into `traces`
/// ([headers.len(), ns] on `gpu`, overwritten; traces in no offset class are zeros):
/// [`super::model`] on an image and traces that stay on the device. The caller checks the image
/// is finite (the host entry does). Returns once the traces are complete.
#[allow(clippy::too_many_arguments)]
pub fn model(gpu: &Arc<Gpu>, image: &CudaView<f32>, headers: &[TraceHeader], ns: usize, dt: f32, t0: f32, params: &Params,
    traces: &mut CudaViewMut<f32>) -> crate::error::Result<()> {
    Ok(model_in(gpu, image, headers, ns, dt, t0, params, traces)?)
}

#[allow(clippy::too_many_arguments)]
fn model_in(gpu: &Arc<Gpu>, image: &CudaView<f32>, headers: &[TraceHeader], ns: usize, dt: f32, t0: f32, params: &Params,
    traces: &mut CudaViewMut<f32>) -> anyhow::Result<()> {
    crate::ensure_param!(params.traveltime == TraveltimeMode::Exact, "traveltime",
        "modelling computes exact traveltimes only (it is the adjoint of the exact migration): use --traveltime exact");
    let plan = Plan::new(headers, ns, dt, t0, params)?;
    let (ncols, ntau, ny) = (plan.grid.ncols(), plan.grid.ntau, plan.grid.ny);
    crate::ensure_input!(image.len() == plan.classes() * plan.grid.len(),
        "modelling: the image holds {} samples, the parameters' image is {} classes x {} x {} x {}", image.len(), plan.classes(),
        plan.grid.nx, ny, ntau);
    crate::ensure_input!(traces.len() == headers.len() * ns, "modelling: the output holds {} samples for {} traces of {ns}", traces.len(),
        headers.len());
    let tb = model_block_traces(gpu, &plan)?;
    let acc_len = plan.stride() + 1;
    let vol = plan.consts.vel_stride != 0;
    let d_geom = gpu.upload(flat4(&plan.geom))?;
    let d_vel = gpu.upload(&plan.vel)?;
    let mut d_acc = gpu.zeros::<f32>(plan.ntraces() * acc_len)?;
    let cols_per_tile = params.limits.max_columns_per_tile.map_or(ncols, |m| (m / ny).max(1) * ny).min(ncols);
    for (k, range) in plan.class_ranges.iter().enumerate() {
        let chunk = params.limits.max_traces_per_chunk.unwrap_or(range.len()).max(1);
        let mut first = range.start;
        while first < range.end {
            let n = chunk.min(range.end - first);
            let mut col0 = 0;
            while col0 < ncols {
                let cols = cols_per_tile.min(ncols - col0);
                let consts = KtmConsts { col0: col0 as u32, ncols: cols as u32, ntraces: n as u32, ..plan.consts };
                let tile = image.slice((k * ncols + col0) * ntau..(k * ncols + col0 + cols) * ntau);
                let vel = if vol { d_vel.slice(col0 * ntau..(col0 + cols) * ntau) } else { d_vel.slice(..) };
                launch_model(gpu, &plan, consts, tb, &d_geom.slice(4 * first..4 * (first + n)), &tile, &vel,
                    &mut d_acc.slice_mut(first * acc_len..(first + n) * acc_len)).context("GPU modelling")?;
                col0 += cols;
            }
            first += n;
        }
    }
    gpu.stream().memset_zeros(traces).map_err(GpuError::driver("clearing the modelled traces"))?;
    prep_gpu::finish_adjoint_resident(gpu, &d_acc.slice(..), &plan, params, ns, dt, traces).context("GPU modelling")?;
    gpu.synchronize()?;
    Ok(())
}
