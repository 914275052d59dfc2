//! The GPU runtime, in cudarc's three layers: cudarc's raw `sys` bindings and its `result` layer
//! underneath; our safe layer here. Everything loads the CUDA driver at run time, so builds and CPU
//! runs need no CUDA.
//!
//! - [`context`]: device discovery and properties, the loaded PTX module, a pool of streams.
//! - [`memory`]: device buffers (cudarc's `CudaSlice`) and page-locked host buffers.
//! - [`cluster`]: the sm_90 module, thread-block-cluster launches (`cuLaunchKernelEx`), cluster occupancy.
//! - [`launch`]: the typed one-line kernel launch ([`crate::launch!`]) with checked errors.
//! - [`texture`]: 1D/2D/3D texture objects (float, float2; point or linear filtering), RAII.
//! - [`timing`]: CUDA-event timers and the median-of-repeats function the benchmarks use.
//! - [`reduce`]: peer access between GPUs (the on-device image sums use it: `crate::exec::reduce`).
//! - [`pages`]: zeroed host memory with huge pages requested, for large outputs.
//! - [`phases`]: the wall-clock phase log of multi-device jobs (the scaling bench prints it).
//! - [`fft`]: cuFFT plans (3D, batched 1D/2D/3D), complex-to-complex single precision.
//! - [`error`]: [`GpuError`], which names the kernel, grid and block of a failed launch.

pub mod cluster;
pub mod context;
pub mod error;
pub mod fft;
pub mod launch;
pub mod ptx;
pub mod memory;
pub mod pages;
pub mod phases;
pub mod reduce;
pub mod texture;
pub mod timing;

pub use context::{DeviceInfo, Gpu};
pub use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, CudaView, CudaViewMut, DeviceRepr, LaunchConfig, PushKernelArg};
pub use error::GpuError;
pub use launch::{blocks_for, grid_1d, DevPtr};
pub use texture::{AddressMode, Filter, Texture, TextureFormat};
pub use timing::{median, GpuTimer, Stats};

/// The PTX of every kernel in `gpu-kernels`, built by the workspace's `build.rs`.
pub const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/kernels.ptx"));
/// The thread-block-cluster kernels (`sm90_*`), moved out of [`PTX`] by build.rs into a module of
/// their own with `.target sm_90` (PTX ISA 8.6): loaded only on compute capability 9.0+ ([`cluster`]).
pub const PTX_SM90: &str = include_str!(concat!(env!("OUT_DIR"), "/kernels_sm90.ptx"));
/// The PTX target the kernels were compiled for (`SEISGPU_PTX_ARCH`, default `sm_70`).
pub const PTX_ARCH: &str = env!("SEISGPU_PTX_ARCH");

/// Names of the kernels in the embedded PTX (its `.entry` symbols).
pub fn kernel_names() -> Vec<&'static str> {
    PTX.lines()
        .filter_map(|l| l.trim_start().strip_prefix(".visible .entry "))
        .map(|rest| rest.trim_end_matches('(').trim())
        .collect()
}
