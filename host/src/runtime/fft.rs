//! cuFFT plans: single-precision complex-to-complex, 3D and batched.
//!
//! Complex data on the device is interleaved (re, im) f32 in a `CudaSlice<f32>` of twice the length
//! (the layout of cuFFT's `float2` and of `num_complex::Complex32`). Forward is e^{-i...}, inverse is e^{+i...} and
//! unnormalised, as in rustfft, so CPU and GPU paths share their scaling code.

use std::sync::Arc;

use cudarc::cufft::sys::{cufftType, float2};
use cudarc::cufft::{CudaFft, FftDirection};
use cudarc::driver::{CudaSlice, CudaStream, DevicePtrMut};

use super::error::{GpuError, GpuResult};

/// A cuFFT plan bound to one stream.
pub struct FftPlan {
    plan: CudaFft,
    stream: Arc<CudaStream>,
    /// Complex elements the plan touches: product of the dims times the batch (or batch * dist).
    pub len: usize,
}

fn fft_err(what: &str) -> impl FnOnce(cudarc::cufft::result::CufftError) -> GpuError + '_ {
    move |source| GpuError::Fft { what: what.to_string(), source }
}

impl FftPlan {
    /// A 3D C2C plan over an (n0, n1, n2) array, n2 fastest (row-major, as ndarray's default).
    pub fn c2c_3d(stream: &Arc<CudaStream>, dims: (usize, usize, usize)) -> GpuResult<Self> {
        let plan = CudaFft::plan_3d(dims.0 as i32, dims.1 as i32, dims.2 as i32, cufftType::CUFFT_C2C, stream.clone())
            .map_err(fft_err("planning a 3D FFT"))?;
        Ok(Self { plan, stream: stream.clone(), len: dims.0 * dims.1 * dims.2 })
    }

    /// `batch` contiguous C2C transforms of shape `dims` (rank 1 to 3, last fastest), each
    /// `dims.product()` elements after the previous one.
    pub fn c2c_batched(stream: &Arc<CudaStream>, dims: &[usize], batch: usize) -> GpuResult<Self> {
        let n: Vec<i32> = dims.iter().map(|&d| d as i32).collect();
        let dist: usize = dims.iter().product();
        let plan = CudaFft::plan_many(&n, None, 1, dist as i32, None, 1, dist as i32, cufftType::CUFFT_C2C, batch as i32,
            stream.clone())
        .map_err(fft_err("planning a batched FFT"))?;
        Ok(Self { plan, stream: stream.clone(), len: dist * batch })
    }

    /// Strided batched 1D transforms: `batch` signals of length `n`, element stride `stride`,
    /// signal distance `dist` (e.g. FFT along time of trace-major data: stride 1, dist = samples).
    pub fn c2c_1d_strided(stream: &Arc<CudaStream>, n: usize, stride: usize, dist: usize, batch: usize) -> GpuResult<Self> {
        let nn = [n as i32];
        let emb = [n as i32];
        let plan = CudaFft::plan_many(&nn, Some(&emb), stride as i32, dist as i32, Some(&emb), stride as i32, dist as i32,
            cufftType::CUFFT_C2C, batch as i32, stream.clone())
        .map_err(fft_err("planning a strided 1D FFT"))?;
        Ok(Self { plan, stream: stream.clone(), len: (batch - 1) * dist + (n - 1) * stride + 1 })
    }

    /// In-place transform of interleaved (re, im) f32 data (`2 * len` floats). `inverse` is
    /// unnormalised, like rustfft.
    pub fn exec_inplace(&self, data: &mut CudaSlice<f32>, inverse: bool) -> GpuResult<()> { self.exec_inplace_at(data, 0, inverse) }

    /// [`FftPlan::exec_inplace`] on the plan's `len` complex values from complex value `at` of
    /// `data` on (e.g. one slab of a line buffer).
    pub fn exec_inplace_at(&self, data: &mut CudaSlice<f32>, at: usize, inverse: bool) -> GpuResult<()> {
        if data.len() < 2 * (at + self.len) {
            return Err(GpuError::BadLaunch {
                kernel: "cufft".into(),
                why: format!("buffer of {} floats < the plan's {} complex values from {at} on", data.len(), self.len),
            });
        }
        let dir = if inverse { FftDirection::Inverse } else { FftDirection::Forward };
        let (ptr, _record) = data.device_ptr_mut(&self.stream);
        let ptr = (ptr + (at * std::mem::size_of::<float2>()) as u64) as *mut float2;
        unsafe { cudarc::cufft::result::exec_c2c(self.plan.handle(), ptr, ptr, dir as i32) }.map_err(fft_err("executing an FFT"))
    }

    pub fn stream(&self) -> &Arc<CudaStream> { &self.stream }
}

/// Whether cuFFT can be loaded (`libcufft.so`).
pub fn cufft_present() -> bool { unsafe { cudarc::cufft::sys::is_culib_present() } }
