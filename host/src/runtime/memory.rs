//! Device and page-locked host memory.
//!
//! Device buffers are cudarc's `CudaSlice<T>` (RAII, stream-ordered). Page-locked host buffers make
//! `memcpy_htod`/`memcpy_dtoh` truly asynchronous, so uploads overlap compute on another stream.

use cudarc::driver::{DeviceRepr, PinnedHostSlice, ValidAsZeroBits};

use super::context::Gpu;
use super::error::{GpuError, GpuResult};

/// A page-locked host buffer.
pub struct PinnedBuf<T> {
    inner: PinnedHostSlice<T>,
}

impl<T: DeviceRepr + ValidAsZeroBits + Copy> PinnedBuf<T> {
    /// Allocates `len` zeroed elements of page-locked host memory.
    pub fn new(gpu: &Gpu, len: usize) -> GpuResult<Self> {
        let mut inner = unsafe { gpu.context().alloc_pinned::<T>(len) }
            .map_err(GpuError::driver(format!("allocating {len} elements of pinned host memory")))?;
        // SAFETY of the read below: zero bits are a valid T.
        let s = inner.as_mut_slice().map_err(GpuError::driver("mapping pinned memory"))?;
        unsafe { std::ptr::write_bytes(s.as_mut_ptr(), 0, s.len()) };
        Ok(Self { inner })
    }
    pub fn as_slice(&self) -> GpuResult<&[T]> { self.inner.as_slice().map_err(GpuError::driver("reading pinned memory")) }
    pub fn as_mut_slice(&mut self) -> GpuResult<&mut [T]> {
        self.inner.as_mut_slice().map_err(GpuError::driver("writing pinned memory"))
    }
    /// The cudarc buffer, for `stream.memcpy_htod(&buf.raw(), ...)`.
    pub fn raw(&self) -> &PinnedHostSlice<T> { &self.inner }
    pub fn raw_mut(&mut self) -> &mut PinnedHostSlice<T> { &mut self.inner }
    pub fn len(&self) -> usize { self.inner.len() }
    pub fn is_empty(&self) -> bool { self.inner.len() == 0 }
}
