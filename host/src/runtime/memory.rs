//! Device and page-locked host memory.
//!
//! Device buffers are cudarc's `CudaSlice<T>` (RAII, stream-ordered). Page-locked host buffers make
//! `memcpy_htod`/`memcpy_dtoh` truly asynchronous, so uploads overlap compute on another stream.

use cudarc::driver::sys;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut, DeviceRepr, PinnedHostSlice, ValidAsZeroBits};

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
    /// Page-locked for every CUDA context, cached: for a buffer that engines on several GPUs read
    /// (a volume that each device copies its cubes from, [`copy_block_htod`]).
    pub fn portable(gpu: &Gpu, len: usize) -> GpuResult<Self> {
        Self::with_flags(gpu, len, sys::CU_MEMHOSTALLOC_PORTABLE)
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

/// Whether the driver knows `s` as page-locked host memory (allocated or registered with it; its
/// first and last elements are asked), so `gpu` can copy from it by DMA without a host pass.
pub fn page_locked<T>(gpu: &Gpu, s: &[T]) -> bool {
    if s.is_empty() || gpu.context().bind_to_thread().is_err() {
        return false;
    }
    let known = |p: *const T| {
        let mut flags = 0u32;
        // SAFETY: a query; the pointer is only looked up in the driver's tables.
        let r = unsafe { sys::cuMemHostGetFlags(&mut flags, p as *mut std::ffi::c_void) };
        r == sys::CUresult::CUDA_SUCCESS
    };
    known(s.as_ptr()) && known(s.as_ptr().wrapping_add(s.len() - 1))
}

/// Queues on `stream` the copy of the block of `extent` samples at `start` of a host volume of
/// `shape` (x2 fastest) into `dst`, tight (extent[2] fastest): one 3D copy of rows of extent[2]
/// samples, by DMA where `vol` is page-locked ([`page_locked`]; the driver stages pageable memory
/// itself, synchronously).
///
/// # Safety
/// `vol` must stay alive and unchanged until `stream` has passed the copy.
pub unsafe fn copy_block_htod(stream: &CudaStream, vol: &[f32], shape: [usize; 3], start: [usize; 3], extent: [usize; 3],
    dst: &mut CudaSlice<f32>) -> GpuResult<()> {
    let n: usize = extent.iter().product();
    if vol.len() != shape.iter().product::<usize>() || (0..3).any(|a| start[a] + extent[a] > shape[a]) || n == 0 || dst.len() < n {
        return Err(GpuError::BadCopy(format!("block {extent:?} at {start:?} of a {shape:?} volume of {} samples into {} samples",
            vol.len(), dst.len())));
    }
    let f = std::mem::size_of::<f32>();
    let (ptr, _record) = dst.device_ptr_mut(stream);
    let copy = sys::CUDA_MEMCPY3D {
        srcXInBytes: start[2] * f,
        srcY: start[1],
        srcZ: start[0],
        srcLOD: 0,
        srcMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_HOST,
        srcHost: vol.as_ptr() as *const std::ffi::c_void,
        srcDevice: 0,
        srcArray: std::ptr::null_mut(),
        reserved0: std::ptr::null_mut(),
        srcPitch: shape[2] * f,
        srcHeight: shape[1],
        dstXInBytes: 0,
        dstY: 0,
        dstZ: 0,
        dstLOD: 0,
        dstMemoryType: sys::CUmemorytype::CU_MEMORYTYPE_DEVICE,
        dstHost: std::ptr::null_mut(),
        dstDevice: ptr,
        dstArray: std::ptr::null_mut(),
        reserved1: std::ptr::null_mut(),
        dstPitch: extent[2] * f,
        dstHeight: extent[1],
        WidthInBytes: extent[2] * f,
        Height: extent[1],
        Depth: extent[0],
    };
    stream.context().bind_to_thread().map_err(GpuError::driver("binding the context"))?;
    // SAFETY: the block lies inside `vol` and `dst` (checked above); the caller keeps `vol`.
    unsafe { sys::cuMemcpy3DAsync_v2(&copy, stream.cu_stream()) }.result()
        .map_err(GpuError::driver(format!("copying a {extent:?} block of the volume to the GPU")))
}

/// `len` zeros of ordinary (pageable) host memory for a large output that is then written once
/// in parallel: allocated zeroed by the OS (no pass over it), with transparent huge pages
/// requested where the kernel offers them on request (`madvise` mode), so its first touch costs a
/// fault per 2 MB rather than per 4 KB page. Measured on the 4 x H200 host (issue 9): touching
/// 1.65 GB of 4 KB pages took 66-69 ms on 64 threads, a copy of the same size 18.5 ms.
pub fn zeroed_host(len: usize) -> Vec<f32> {
    let v = vec![0.0f32; len];
    #[cfg(target_os = "linux")]
    {
        const HUGE: usize = 2 << 20;
        let (start, end) = (v.as_ptr() as usize, v.as_ptr() as usize + len * 4);
        let (a, b) = (start.div_ceil(HUGE) * HUGE, end / HUGE * HUGE);
        if b > a {
            // SAFETY: [a, b) lies inside `v`'s allocation; MADV_HUGEPAGE only changes how its
            // (untouched, zero) pages are backed. A refusal (no THP) changes nothing: ignored.
            unsafe { libc::madvise(a as *mut libc::c_void, b - a, libc::MADV_HUGEPAGE) };
        }
    }
    v
}
