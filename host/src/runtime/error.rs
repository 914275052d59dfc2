//! Errors of the GPU runtime.

use cudarc::driver::DriverError;

/// Errors from the GPU runtime. Launch failures name the kernel and its launch shape.
#[derive(Debug, thiserror::Error)]
pub enum GpuError {
    #[error("no CUDA driver found (libcuda.so could not be loaded): {0}")]
    NoDriver(String),
    #[error("the CUDA driver found no GPU")]
    NoDevice,
    #[error("GPU ordinal {ordinal} does not exist ({count} GPU(s) present)")]
    BadOrdinal { ordinal: usize, count: usize },
    #[error("this build has no GPU kernels (built with SEISGPU_SKIP_PTX=1)")]
    NoKernels,
    #[error("kernel `{0}` is not in the PTX module (known: {1})")]
    UnknownKernel(String, String),
    #[error("CUDA driver call failed while {what}: {source}")]
    Driver { what: String, source: DriverError },
    #[error("launch of kernel `{kernel}` failed (grid {grid:?}, block {block:?}, {shared} B dynamic shared memory): {source}")]
    Launch { kernel: String, grid: (u32, u32, u32), block: (u32, u32, u32), shared: u32, source: DriverError },
    #[error("invalid launch of kernel `{kernel}`: {why}")]
    BadLaunch { kernel: String, why: String },
    #[error("invalid copy: {0}")]
    BadCopy(String),
    #[error("the GPU has {free} bytes free but {what} needs {need} bytes")]
    OutOfMemory { what: String, need: usize, free: usize },
    #[error("cuFFT failed while {what}: {source}")]
    Fft { what: String, source: cudarc::cufft::result::CufftError },
}

impl GpuError {
    pub fn driver(what: impl Into<String>) -> impl FnOnce(DriverError) -> GpuError {
        let what = what.into();
        move |source| GpuError::Driver { what, source }
    }
}

pub type GpuResult<T> = Result<T, GpuError>;
