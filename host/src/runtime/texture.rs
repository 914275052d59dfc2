//! Texture objects: a safe RAII wrapper over `cudarc::driver::sys` (CUDA arrays + `cuTexObjectCreate`).
//!
//! Kernels receive [`Texture::handle`] as a `u64` and fetch with `gpu_kernels::device::tex1d/2d/3d`
//! at unnormalised texel coordinates (texel i's centre is at i + 0.5 under linear filtering).
//! Hardware linear filtering uses 9-bit fixed-point weights (8 fractional bits): a CPU reference
//! that interpolates in full precision differs by up to ~2e-3 of the local sample difference, so
//! algorithms that must match the CPU to 1e-5 use point sampling and interpolate in code.

use std::sync::Arc;

use cudarc::driver::sys::{self, CUaddress_mode, CUarray_format, CUfilter_mode, CUmemorytype, CUresourcetype};
use cudarc::driver::CudaContext;

use super::context::Gpu;
use super::error::{GpuError, GpuResult};

/// Element type of a texture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextureFormat {
    /// One f32 per texel.
    Float,
    /// Two f32 per texel (complex values as re, im).
    Float2,
}

impl TextureFormat {
    fn channels(self) -> u32 { match self { Self::Float => 1, Self::Float2 => 2 } }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Filter { Point, Linear }

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressMode {
    /// Out-of-range coordinates read the edge texel.
    Clamp,
    /// Out-of-range coordinates read zero.
    Border,
}

/// A 1D, 2D or 3D texture holding a copy of host data. Dropping it frees the object and array.
pub struct Texture {
    ctx: Arc<CudaContext>,
    array: sys::CUarray,
    object: sys::CUtexObject,
    dims: (usize, usize, usize),
}

// The handles are plain driver identifiers, usable from any thread bound to the context.
unsafe impl Send for Texture {}
unsafe impl Sync for Texture {}

impl Texture {
    /// Creates a texture of `dims` = (width, height, depth) texels; use height = depth = 1 for 1D and
    /// depth = 1 for 2D. `data` holds `width*height*depth*channels` f32, x fastest.
    pub fn new(gpu: &Gpu, data: &[f32], dims: (usize, usize, usize), format: TextureFormat, filter: Filter,
        address: AddressMode) -> GpuResult<Texture> {
        let (w, h, d) = dims;
        let ch = format.channels() as usize;
        if w == 0 || h == 0 || d == 0 {
            return Err(GpuError::BadLaunch { kernel: "texture".into(), why: format!("empty texture dims {dims:?}") });
        }
        if data.len() != w * h * d * ch {
            return Err(GpuError::BadLaunch {
                kernel: "texture".into(),
                why: format!("texture of {dims:?} x {ch} channels needs {} floats, got {}", w * h * d * ch, data.len()),
            });
        }
        let ctx = gpu.context().clone();
        ctx.bind_to_thread().map_err(GpuError::driver("binding the context"))?;
        let desc = sys::CUDA_ARRAY3D_DESCRIPTOR {
            Width: w,
            Height: if h == 1 && d == 1 { 0 } else { h },
            Depth: if d == 1 { 0 } else { d },
            Format: CUarray_format::CU_AD_FORMAT_FLOAT,
            NumChannels: format.channels(),
            Flags: 0,
        };
        let mut array: sys::CUarray = std::ptr::null_mut();
        unsafe { sys::cuArray3DCreate_v2(&mut array, &desc) }.result().map_err(GpuError::driver(format!("creating a {dims:?} CUDA array")))?;
        let mut tex = Texture { ctx, array, object: 0, dims };

        let row_bytes = w * ch * 4;
        let copy = sys::CUDA_MEMCPY3D {
            srcXInBytes: 0, srcY: 0, srcZ: 0, srcLOD: 0,
            srcMemoryType: CUmemorytype::CU_MEMORYTYPE_HOST,
            srcHost: data.as_ptr() as *const _,
            srcDevice: 0, srcArray: std::ptr::null_mut(), reserved0: std::ptr::null_mut(),
            srcPitch: row_bytes, srcHeight: h,
            dstXInBytes: 0, dstY: 0, dstZ: 0, dstLOD: 0,
            dstMemoryType: CUmemorytype::CU_MEMORYTYPE_ARRAY,
            dstHost: std::ptr::null_mut(), dstDevice: 0, dstArray: array, reserved1: std::ptr::null_mut(),
            dstPitch: 0, dstHeight: 0,
            WidthInBytes: row_bytes, Height: h, Depth: d,
        };
        unsafe { sys::cuMemcpy3D_v2(&copy) }.result().map_err(GpuError::driver("copying texture data"))?;

        let mut res: sys::CUDA_RESOURCE_DESC = unsafe { std::mem::zeroed() };
        res.resType = CUresourcetype::CU_RESOURCE_TYPE_ARRAY;
        res.res.array = sys::CUDA_RESOURCE_DESC_st__bindgen_ty_1__bindgen_ty_1 { hArray: array };
        let mut td: sys::CUDA_TEXTURE_DESC = unsafe { std::mem::zeroed() };
        let am = match address {
            AddressMode::Clamp => CUaddress_mode::CU_TR_ADDRESS_MODE_CLAMP,
            AddressMode::Border => CUaddress_mode::CU_TR_ADDRESS_MODE_BORDER,
        };
        td.addressMode = [am; 3];
        td.filterMode = match filter {
            Filter::Point => CUfilter_mode::CU_TR_FILTER_MODE_POINT,
            Filter::Linear => CUfilter_mode::CU_TR_FILTER_MODE_LINEAR,
        };
        td.flags = 0; // unnormalised coordinates, float reads
        unsafe { sys::cuTexObjectCreate(&mut tex.object, &res, &td, std::ptr::null()) }
            .result()
            .map_err(GpuError::driver("creating a texture object"))?;
        Ok(tex)
    }

    /// The handle kernels take as a `u64` argument.
    pub fn handle(&self) -> u64 { self.object }
    pub fn dims(&self) -> (usize, usize, usize) { self.dims }
}

impl Drop for Texture {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        unsafe {
            if self.object != 0 {
                let _ = sys::cuTexObjectDestroy(self.object);
            }
            if !self.array.is_null() {
                let _ = sys::cuArrayDestroy(self.array);
            }
        }
    }
}
