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
    /// Allocates `len` zeroed elements of page-locked host memory, cached: for buffers the host
    /// reads too (downloads, buffers it writes and later reads back). cudarc's `alloc_pinned` is
    /// write-combined, which host reads go through uncached, at a fraction of memory speed.
    pub fn new(gpu: &Gpu, len: usize) -> GpuResult<Self> {
        Self::with_flags(gpu, len, 0)
    }
    /// Write-combined page-locked memory: only for buffers the host writes and never reads.
    pub fn write_combined(gpu: &Gpu, len: usize) -> GpuResult<Self> {
        Self::with_flags(gpu, len, cudarc::driver::sys::CU_MEMHOSTALLOC_WRITECOMBINED)
    }
    fn with_flags(gpu: &Gpu, len: usize, flags: u32) -> GpuResult<Self> {
        let mut inner = unsafe { gpu.context().alloc_pinned_with_flags::<T>(len, flags) }
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
