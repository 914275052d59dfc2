//! Device and page-locked host memory.
//!
//! Device buffers are cudarc's `CudaSlice<T>` (RAII, stream-ordered). Page-locked host buffers make
//! `memcpy_htod`/`memcpy_dtoh` truly asynchronous, so uploads overlap compute on another stream.

use cudarc::driver::sys;
use cudarc::driver::{CudaStream, DevicePtr, DeviceRepr, PinnedHostSlice, ValidAsZeroBits};

use super::context::Gpu;
pub use super::pages::{advise_huge_pages, zeroed_host};
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
    /// (a volume that each device copies its cubes from, [`copy_3d`]).
    pub fn portable(gpu: &Gpu, len: usize) -> GpuResult<Self> {
        Self::with_flags(gpu, len, sys::CU_MEMHOSTALLOC_PORTABLE)
    }
    /// Page-locked and mapped into the device's address space (cached): for a word the host writes
    /// and a stream waits on (`cuStreamWaitValue32`).
    pub fn mapped(gpu: &Gpu, len: usize) -> GpuResult<Self> {
        Self::with_flags(gpu, len, sys::CU_MEMHOSTALLOC_DEVICEMAP)
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

/// f32 samples on the host: ordinary memory, or page-locked where a GPU moves them (full-speed,
/// asynchronous DMA).
pub enum HostSamples {
    Pageable(Vec<f32>),
    PageLocked(PinnedBuf<f32>),
}

impl HostSamples {
    pub fn as_slice(&self) -> GpuResult<&[f32]> {
        match self {
            HostSamples::Pageable(v) => Ok(v),
            HostSamples::PageLocked(p) => p.as_slice(),
        }
    }
    pub fn as_mut_slice(&mut self) -> GpuResult<&mut [f32]> {
        match self {
            HostSamples::Pageable(v) => Ok(v),
            HostSamples::PageLocked(p) => p.as_mut_slice(),
        }
    }
}

/// Where a 3D copy reads or writes ([`copy_3d`]): memory holding a buffer of `shape` samples
/// (x2 fastest, `len` available), and the block's first sample in it.
#[derive(Clone, Copy, Debug)]
pub struct Place {
    pub mem: Mem,
    pub len: usize,
    pub shape: [usize; 3],
    pub start: [usize; 3],
}

/// Host memory (an address: page-locked for asynchronous DMA) or a device address.
#[derive(Clone, Copy, Debug)]
pub enum Mem {
    Host(usize),
    Device(u64),
}

impl Place {
    /// A block of host samples `s` of `shape` at `start`.
    pub fn host(s: &[f32], shape: [usize; 3], start: [usize; 3]) -> Place {
        Place { mem: Mem::Host(s.as_ptr() as usize), len: s.len(), shape, start }
    }
    /// A block of a device buffer of `shape` at `start`, with the buffer's address and length as
    /// the stream that uses it sees them.
    pub fn device<T: DevicePtr<f32>>(s: &T, stream: &CudaStream, shape: [usize; 3], start: [usize; 3]) -> Place {
        let (ptr, _record) = s.device_ptr(stream);
        Place { mem: Mem::Device(ptr), len: s.len(), shape, start }
    }
}

/// Queues on `stream` the copy of a block of `extent` samples from `src` to `dst` (each a buffer
/// of its own shape): one `cuMemcpy3DAsync`, rows of extent[2] samples, by DMA where the host side
/// is page-locked ([`page_locked`]; the driver stages pageable memory itself, synchronously).
/// Checks that the block lies inside both buffers.
///
/// # Safety
/// The addresses must be live buffers of at least `len` samples, and stay so, the source unchanged
/// and the destination untouched, until `stream` has passed the copy.
pub unsafe fn copy_3d(stream: &CudaStream, src: Place, dst: Place, extent: [usize; 3]) -> GpuResult<()> {
    let inside = |p: &Place| p.len >= p.shape.iter().product::<usize>() && (0..3).all(|a| p.start[a] + extent[a] <= p.shape[a]);
    if extent.contains(&0) || !inside(&src) || !inside(&dst) {
        return Err(GpuError::BadCopy(format!("block {extent:?} from {src:?} to {dst:?}")));
    }
    let copy = copy_3d_params(&src, &dst, extent);
    stream.context().bind_to_thread().map_err(GpuError::driver("binding the context"))?;
    // SAFETY: the block lies inside both buffers (checked above); the caller keeps them.
    unsafe { sys::cuMemcpy3DAsync_v2(&copy, stream.cu_stream()) }.result()
        .map_err(GpuError::driver(format!("copying a {extent:?} block")))
}

/// The driver's description of the copy of [`copy_3d`] (every field set: the memory-type enum has
/// no zero value, so the struct cannot start zeroed).
fn copy_3d_params(src: &Place, dst: &Place, extent: [usize; 3]) -> sys::CUDA_MEMCPY3D {
    let f = std::mem::size_of::<f32>();
    let (src_type, src_host, src_device) = match src.mem {
        Mem::Host(a) => (sys::CUmemorytype::CU_MEMORYTYPE_HOST, a as *const std::ffi::c_void, 0),
        Mem::Device(a) => (sys::CUmemorytype::CU_MEMORYTYPE_DEVICE, std::ptr::null(), a),
    };
    let (dst_type, dst_host, dst_device) = match dst.mem {
        Mem::Host(a) => (sys::CUmemorytype::CU_MEMORYTYPE_HOST, a as *mut std::ffi::c_void, 0),
        Mem::Device(a) => (sys::CUmemorytype::CU_MEMORYTYPE_DEVICE, std::ptr::null_mut(), a),
    };
    sys::CUDA_MEMCPY3D {
        srcXInBytes: src.start[2] * f,
        srcY: src.start[1],
        srcZ: src.start[0],
        srcLOD: 0,
        srcMemoryType: src_type,
        srcHost: src_host,
        srcDevice: src_device,
        srcArray: std::ptr::null_mut(),
        reserved0: std::ptr::null_mut(),
        srcPitch: src.shape[2] * f,
        srcHeight: src.shape[1],
        dstXInBytes: dst.start[2] * f,
        dstY: dst.start[1],
        dstZ: dst.start[0],
        dstLOD: 0,
        dstMemoryType: dst_type,
        dstHost: dst_host,
        dstDevice: dst_device,
        dstArray: std::ptr::null_mut(),
        reserved1: std::ptr::null_mut(),
        dstPitch: dst.shape[2] * f,
        dstHeight: dst.shape[1],
        WidthInBytes: extent[2] * f,
        Height: extent[1],
        Depth: extent[0],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 3D copy's description (built without a GPU): offsets, pitches and extent in the
    /// driver's terms (bytes along x2, rows, planes), both directions.
    #[test]
    fn copy_3d_params_name_the_blocks() {
        let vol = vec![0.0f32; 5 * 7 * 9];
        let up = copy_3d_params(&Place::host(&vol, [5, 7, 9], [1, 2, 3]), &Place { mem: Mem::Device(4096), len: 60, shape: [3, 4, 5],
            start: [0; 3] }, [3, 4, 5]);
        assert_eq!((up.srcXInBytes, up.srcY, up.srcZ, up.srcPitch, up.srcHeight), (12, 2, 1, 36, 7));
        assert_eq!((up.dstXInBytes, up.dstY, up.dstZ, up.dstPitch, up.dstHeight, up.dstDevice), (0, 0, 0, 20, 4, 4096));
        assert_eq!((up.WidthInBytes, up.Height, up.Depth), (20, 4, 3));
        assert!(up.srcMemoryType == sys::CUmemorytype::CU_MEMORYTYPE_HOST && up.srcHost == vol.as_ptr().cast());
        assert!(up.dstMemoryType == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE && up.dstHost.is_null());
        let down = copy_3d_params(&Place { mem: Mem::Device(8192), len: 60, shape: [3, 4, 5], start: [1, 0, 2] },
            &Place::host(&vol, [5, 7, 9], [2, 3, 4]), [2, 4, 3]);
        assert!(down.srcMemoryType == sys::CUmemorytype::CU_MEMORYTYPE_DEVICE && down.srcDevice == 8192);
        assert!(down.dstMemoryType == sys::CUmemorytype::CU_MEMORYTYPE_HOST && down.dstHost == vol.as_ptr() as *mut _);
        assert_eq!((down.srcXInBytes, down.srcZ, down.dstXInBytes, down.dstY, down.dstZ), (8, 1, 16, 3, 2));
    }
}
