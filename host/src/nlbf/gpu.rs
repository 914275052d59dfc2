//! GPU drivers: the paper-faithful 2+2+1 design, the fast version, enhancement and NMO.
//!
//! Paper-faithful (Tables 2-4): for every parameter trace a stream is taken from the pool, the
//! traces of its three apertures are collected on the host into that stream's page-locked buffer,
//! copied asynchronously, and one `nlbf_paper` launch (grid = Nt, block = Table 3) computes all its
//! time samples. Kernels get raw device pointers so that cudarc's per-buffer event tracking does
//! not serialise the pool (every stream writes its own rows of the shared output).
//!
//! Fast: the whole gather, the trace coordinates and the three apertures (index lists) are
//! resident on the device; `nlbf_slide_*` runs the (A, D) and (B, E) scans of every parameter
//! trace in one launch, `nlbf_cscan_*` the C scan; picks come back packed (one u32 + S per
//! estimation). [`FastEngine`] keeps page-locked staging and device buffers between gathers, so
//! the next gather's upload is a chunked, overlapped copy.

use std::sync::Arc;
use std::time::Instant;

use cudarc::driver::{sys, CudaEvent, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PinnedHostSlice};
use rayon::prelude::*;

use super::{ApertureFill, Apertures, DeferredSetup, EnhanceSetup, Estimate, EstimateParams, NlbfError, Result, Setup};
use crate::traces::TraceSet;
use crate::launch;
use crate::runtime::ptx::capped_kernel;
use crate::runtime::{DevPtr, Gpu, GpuError};
use gpu_kernels::nlbf as k;

fn drv(what: impl Into<String>) -> impl FnOnce(cudarc::driver::DriverError) -> NlbfError {
    let what = what.into();
    move |e| NlbfError::Gpu(GpuError::driver(what)(e))
}

/// Raw device address of a buffer (the caller orders the streams that use it). Public for the
/// benchmarks, which launch the paper's kernel by hand.
pub fn dptr<T>(s: &CudaSlice<T>, stream: &Arc<CudaStream>) -> DevPtr<T> {
    let (p, _sync) = s.device_ptr(stream);
    DevPtr::new(p)
}

fn dptr_mut<T>(s: &mut CudaSlice<T>, stream: &Arc<CudaStream>) -> DevPtr<T> {
    let (p, _sync) = s.device_ptr_mut(stream);
    DevPtr::new(p)
}

/// Page-locked host memory; `write_combined` for buffers the host only writes (uploads).
fn pinned<T: cudarc::driver::DeviceRepr>(gpu: &Gpu, len: usize, write_combined: bool) -> Result<PinnedHostSlice<T>> {
    let flags = if write_combined { sys::CU_MEMHOSTALLOC_WRITECOMBINED } else { 0 };
    unsafe { gpu.context().alloc_pinned_with_flags::<T>(len.max(1), flags) }
        .map_err(drv(format!("allocating {len} elements of page-locked memory")))
}

/// Host slice of a page-locked buffer (waits for the buffer's last recorded use).
fn pinned_mut<T: cudarc::driver::ValidAsZeroBits>(p: &mut PinnedHostSlice<T>) -> Result<&mut [T]> {
    p.as_mut_slice().map_err(drv("mapping page-locked memory"))
}

/// Asynchronous host-to-device copy of `src` to device address `dst` on `stream`.
///
/// # Safety
/// `dst` must be valid for `src.len()` elements; `src` must stay alive and unchanged until the
/// copy completes (page-locked for a truly asynchronous copy).
unsafe fn htod<T>(stream: &CudaStream, dst: DevPtr<T>, src: &[T]) -> Result<()> {
    unsafe { cudarc::driver::result::memcpy_htod_async(dst.addr(), src, stream.cu_stream()) }
        .map_err(drv(format!("copying {} elements to the GPU", src.len())))
}

/// Asynchronous device-to-host copy; same safety rules as [`htod`].
unsafe fn dtoh<T>(stream: &CudaStream, dst: &mut [T], src: DevPtr<T>) -> Result<()> {
    unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src.addr(), stream.cu_stream()) }
        .map_err(drv(format!("copying {} elements from the GPU", dst.len())))
}

mod paper;
mod fast;
mod engine;
mod pipeline;
mod enhance;
pub use paper::*;
pub use fast::*;
pub use engine::*;
pub use pipeline::*;
pub use enhance::*;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::Size;
    use crate::nlbf::synth;

    /// The last band's C-scan split: both parts non-empty, the second about 1/8; small bands whole.
    #[test]
    fn last_band_split_parts() {
        assert_eq!(last_band_split(0), 0);
        assert_eq!(last_band_split(1), 0);
        assert_eq!(last_band_split(2), 1);
        assert_eq!(last_band_split(16), 14);
        assert_eq!(last_band_split(1710), 1497);
        for n in 2..3000 {
            let k = last_band_split(n);
            assert!(k > 0 && k < n && n - k <= (n / 8).max(1), "{n}: {k}");
        }
    }

    /// C-scan variants: the knob's spellings round-trip, bad ones are errors naming the value.
    #[test]
    fn cscan_variants_parse() {
        for v in CSCAN_VARIANTS {
            assert_eq!(v.to_string().parse::<CscanVariant>().unwrap(), v);
        }
        assert_eq!("deep-r80".parse::<CscanVariant>().unwrap(), CscanVariant { deep: true, max_regs: 80 });
        assert_eq!("base".parse::<CscanVariant>().unwrap(), CscanVariant { deep: false, max_regs: 0 });
        assert_eq!("deep-r80".parse::<CscanVariant>().unwrap(), CSCAN_DEFAULT);
        for bad in ["deeper", "r", "r12", "r300", "deep-rx", ""] {
            let e = bad.parse::<CscanVariant>().unwrap_err();
            assert!(e.contains("C-scan variant"), "{bad}: {e}");
        }
    }

    /// Every C-scan kernel (H = 5, base and deep staging) calls no function (no panic paths), so
    /// it can be JIT-compiled alone with a register cap.
    #[test]
    fn cscan_kernels_can_be_capped() {
        if crate::runtime::PTX.is_empty() {
            return; // built with SEISGPU_SKIP_PTX=1
        }
        for g in k::CSCAN_GROUPS {
            for name in [k::cscan_kernel(5, g), k::cscan_deep_kernel(5, g)].into_iter().flatten().map(|d| d.name()) {
                let m = crate::runtime::ptx::capped_ptx(crate::runtime::PTX, name, 64).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert!(m.contains(".maxnreg 64") && m.contains(&format!(".visible .entry {name}(")));
            }
        }
    }

    /// Upload chunks: ascending, end at the gather's end, at most `n`, band 0's need is a chunk end.
    #[test]
    fn chunk_ends_cover_the_gather_and_end_at_band_0() {
        for (ntr, f, n) in [(21056, 2288, 16), (10, 3, 16), (1, 1, 16), (5, 5, 16), (100, 0, 4), (100, 200, 16), (17, 16, 3)] {
            let v = chunk_ends(ntr, f, n);
            assert!(v.len() <= n.max(3) && !v.is_empty(), "{ntr} {f} {n}: {v:?}");
            assert!(v.windows(2).all(|w| w[0] < w[1]) && v[0] > 0 && *v.last().unwrap() == ntr, "{v:?}");
            assert!(v.contains(&f.clamp(1, ntr)), "{v:?}");
        }
    }

    /// The band functions of the pipelined engine: bands tile the parameter traces, each band's
    /// offsets reproduce its aperture lists exactly (the kernels read the shared index list through
    /// them), and each band's need covers every trace its apertures read.
    #[test]
    fn bands_tile_and_offsets_reproduce_the_apertures() {
        let (t, p) = synth::crossspread_3d(Size::Small);
        let s = Setup::new(&t, &p).unwrap();
        let ap = &s.apertures;
        let np = s.np();
        for ends in [&BAND_ENDS[..], &[1.0], &[0.5], &[0.01, 0.02, 0.9], &[1.0 / 3.0, 2.0 / 3.0, 1.0, 1.0]] {
            let b = bands(np, ends);
            assert!(!b.is_empty() && b.len() <= ends.len() + 1);
            assert_eq!(b[0].0, 0);
            assert_eq!(b.last().unwrap().1, np);
            assert!(b.windows(2).all(|w| w[0].1 == w[1].0) && b.iter().all(|&(a, z)| z > a), "{ends:?}: {b:?}");
            let need = band_needs(ap, &b);
            assert!(need.windows(2).all(|w| w[0] <= w[1]));
            let (off, start) = band_offsets(ap, &b);
            for (bi, &(p0, p1)) in b.iter().enumerate() {
                let n = p1 - p0;
                let o = &off[start[bi]..start[bi] + 3 * (n + 1)];
                for phase in 0..3 {
                    for p in p0..p1 {
                        let k = phase * (n + 1) + (p - p0);
                        let list = &ap.idx[o[k] as usize..o[k + 1] as usize];
                        assert_eq!(list, ap.list(phase, p));
                        assert!(list.iter().all(|&tr| (tr as usize) < need[bi]));
                    }
                }
            }
        }
        // The cross-spread is source-major and y = source: the first band reads a prefix of the gather.
        let b = bands(np, &BAND_ENDS);
        let need = band_needs(ap, &b);
        assert!(need[0] < s.ntr(), "first band needs {} of {} traces", need[0], s.ntr());
    }
}
