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

use cudarc::driver::{sys, CudaEvent, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, LaunchConfig, PinnedHostSlice, PushKernelArg};
use rayon::prelude::*;

use super::{ApertureFill, Apertures, DeferredSetup, EnhanceSetup, Estimate, EstimateParams, NlbfError, Result, Setup};
use crate::traces::TraceSet;
use crate::launch;
use crate::runtime::ptx::capped_kernel;
use crate::runtime::{Gpu, GpuError};
use gpu_kernels::nlbf as k;

fn drv(what: impl Into<String>) -> impl FnOnce(cudarc::driver::DriverError) -> NlbfError {
    let what = what.into();
    move |e| NlbfError::Gpu(GpuError::driver(what)(e))
}

/// Raw device address of a buffer (the caller orders the streams that use it). Public for the
/// benchmarks, which launch the paper's kernel by hand.
pub fn dptr<T>(s: &CudaSlice<T>, stream: &Arc<CudaStream>) -> u64 {
    let (p, _sync) = s.device_ptr(stream);
    p
}

fn dptr_mut<T>(s: &mut CudaSlice<T>, stream: &Arc<CudaStream>) -> u64 {
    let (p, _sync) = s.device_ptr_mut(stream);
    p
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
unsafe fn htod<T>(stream: &CudaStream, dst: u64, src: &[T]) -> Result<()> {
    unsafe { cudarc::driver::result::memcpy_htod_async(dst, src, stream.cu_stream()) }
        .map_err(drv(format!("copying {} elements to the GPU", src.len())))
}

/// Asynchronous device-to-host copy; same safety rules as [`htod`].
unsafe fn dtoh<T>(stream: &CudaStream, dst: &mut [T], src: u64) -> Result<()> {
    unsafe { cudarc::driver::result::memcpy_dtoh_async(dst, src, stream.cu_stream()) }
        .map_err(drv(format!("copying {} elements from the GPU", dst.len())))
}

// -------------------------------------------------------------------------------------------------
// Paper-faithful variant.
// -------------------------------------------------------------------------------------------------

/// An attribute of a kernel of the embedded module (e.g. the most threads per block its register
/// use allows once the driver has compiled it for this GPU).
pub fn kernel_attribute(gpu: &Gpu, kernel: &str, attr: sys::CUfunction_attribute) -> Result<i32> {
    let f = gpu.function(kernel)?;
    let mut v = 0i32;
    unsafe { sys::cuFuncGetAttribute(&mut v, attr, f.cu_function()) }
        .result()
        .map_err(drv(format!("reading an attribute of `{kernel}`")))?;
    Ok(v)
}

/// (registers per thread, local memory bytes per thread, most threads per block) of `kernel` as
/// the driver compiled it for this GPU.
pub fn kernel_resources(gpu: &Gpu, kernel: &str) -> Result<(i32, i32, i32)> {
    use sys::CUfunction_attribute as A;
    Ok((kernel_attribute(gpu, kernel, A::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
        kernel_attribute(gpu, kernel, A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
        kernel_attribute(gpu, kernel, A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?))
}

/// The most threads per block `kernel` can run with on this GPU.
pub fn max_threads(gpu: &Gpu, kernel: &str) -> Result<u32> {
    Ok(kernel_attribute(gpu, kernel, sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)? as u32)
}

/// Table 3's block size, lowered to what the compiled kernel allows (a register-heavy build of
/// `nlbf_paper` cannot run 1024 threads; the stride loop covers the rest).
pub fn paper_block(gpu: &Gpu, setup: &Setup) -> Result<u32> {
    let t = &setup.tables;
    let bd = k::paper_block_size(t.n_ad() as u32, t.n_be() as u32, t.nc as u32);
    Ok(bd.min(max_threads(gpu, "nlbf_paper")? / 32 * 32).max(32))
}

/// Bytes of dynamic shared memory of `nlbf_paper` with block size `bd` (carver alignment included).
pub fn paper_shared(bd: u32) -> u32 { (bd * 4).next_multiple_of(16) * 2 + 16 }

/// The 2+2+1 search as the paper runs it (Tables 2-4). Returns (codes, semblance), `[p * ns + t]`.
pub fn estimate_paper(gpu: &Gpu, setup: &Setup, data: &[f32]) -> Result<(Vec<u32>, Vec<f32>)> {
    estimate_paper_subset(gpu, setup, data, &(0..setup.np()).collect::<Vec<_>>())
}

/// The paper-faithful search for the listed parameter traces (results `[i * ns + t]`).
pub fn estimate_paper_subset(gpu: &Gpu, setup: &Setup, data: &[f32], ptraces: &[usize]) -> Result<(Vec<u32>, Vec<f32>)> {
    let ns = setup.ns;
    let ap = &setup.apertures;
    let t = &setup.tables;
    let cap_rows = ap.max_len(0) + ap.max_len(1) + ap.max_len(2);
    let streams = gpu.streams();
    let main = gpu.stream();
    gpu.ensure_fits("the paper kernel's staging buffers", streams.len() * cap_rows * (ns + 2) * 4 + ptraces.len() * ns * 8)?;
    // Per stream: page-locked rows + geometry on the host, and their device twins.
    let mut h_rows = Vec::new();
    let mut h_geom = Vec::new();
    let mut d_rows = Vec::new();
    let mut d_geom = Vec::new();
    for _ in streams {
        h_rows.push(pinned::<f32>(gpu, cap_rows * ns, true)?);
        h_geom.push(pinned::<f32>(gpu, 2 * cap_rows, true)?);
        d_rows.push(gpu.zeros::<f32>(cap_rows * ns)?);
        d_geom.push(gpu.zeros::<f32>(2 * cap_rows)?);
    }
    let vals = gpu.upload(&t.vals)?;
    let mut out_code = gpu.zeros::<u32>(ptraces.len() * ns)?;
    let mut out_s = gpu.zeros::<f32>(ptraces.len() * ns)?;
    gpu.synchronize()?;
    let vals_p = dptr(&vals, main);
    let code_p = dptr_mut(&mut out_code, main);
    let s_p = dptr_mut(&mut out_s, main);
    let d_rows_p: Vec<u64> = d_rows.iter_mut().map(|b| dptr_mut(b, main)).collect();
    let d_geom_p: Vec<u64> = d_geom.iter_mut().map(|b| dptr_mut(b, main)).collect();

    // Table 3: grid = Nt, block = largest phase rounded up to a warp, capped at 1024.
    let bd = paper_block(gpu, setup)?;
    let cfg = LaunchConfig { grid_dim: (ns as u32, 1, 1), block_dim: (bd, 1, 1), shared_mem_bytes: paper_shared(bd) };
    let (ns32, h32, inv_dt) = (ns as u32, setup.half as u32, setup.inv_dt);
    let (na, nb, nc, nd, ne) = (t.na as u32, t.nb as u32, t.nc as u32, t.nd as u32, t.ne as u32);
    for (i, &p) in ptraces.iter().enumerate() {
        let slot = i % streams.len();
        let st = &streams[slot];
        // Fetch an available stream (Table 2, line 10): its previous copy and kernel are done.
        st.synchronize().map_err(drv("waiting for a pool stream"))?;
        let (rows, geom) = (pinned_mut(&mut h_rows[slot])?, pinned_mut(&mut h_geom[slot])?);
        let mut m = [0u32; 3];
        let mut r = 0usize;
        for (phase, mp) in m.iter_mut().enumerate() {
            // Lines 11-16: collect the traces of each aperture.
            for &tr in ap.list(phase, p) {
                rows[r * ns..(r + 1) * ns].copy_from_slice(&data[tr as usize * ns..(tr as usize + 1) * ns]);
                let (dx, dy) = setup.offset(p, tr);
                geom[2 * r] = dx;
                geom[2 * r + 1] = dy;
                r += 1;
            }
            *mp = ap.list(phase, p).len() as u32;
        }
        unsafe {
            htod(st, d_rows_p[slot], &rows[..r * ns])?;
            htod(st, d_geom_p[slot], &geom[..2 * r])?;
        }
        let (rows_p, geom_p) = (d_rows_p[slot], d_geom_p[slot]);
        let pi = i as u32;
        launch!(on st, gpu, "nlbf_paper", cfg, &ns32, &h32, &inv_dt, &rows_p, &geom_p, &m[0], &m[1], &m[2], &vals_p, &na,
            &nb, &nc, &nd, &ne, &pi, &code_p, &s_p)?;
    }
    gpu.synchronize()?;
    let code = main.clone_dtoh(&out_code).map_err(drv("downloading picks"))?;
    let s = main.clone_dtoh(&out_s).map_err(drv("downloading semblance"))?;
    drop((d_rows, d_geom, vals));
    Ok((code, s))
}

// -------------------------------------------------------------------------------------------------
// Fast variant.
// -------------------------------------------------------------------------------------------------

/// Launch shapes of the fast kernels for one setup.
#[derive(Debug, Clone)]
pub struct FastPlan {
    pub slide_kernel: &'static str,
    /// Time samples per lane (L) and half window (H) of the sliding kernel, and values of D (E)
    /// evaluated per pass (G).
    pub run: u32,
    pub slide_group: u32,
    pub half: u32,
    pub nchunks: u32,
    pub span: u32,
    pub mmax: u32,
    pub smax: i32,
    pub slide_cfg: LaunchConfig,
    pub cscan_kernel: &'static str,
    /// C values per thread of the C-scan kernel.
    pub cscan_group: u32,
    /// Staging and register cap of the C-scan kernel ([`CscanVariant`]).
    pub cscan_variant: CscanVariant,
    pub nchunks3: u32,
    pub span3: u32,
    pub smax3: i32,
    pub cscan_cfg: LaunchConfig,
}

impl FastPlan {
    /// Plans the launches; `Err(reason)` where the fast kernels do not apply (window half-length
    /// without a compiled kernel, more than 64 C values, an aperture too large for shared memory).
    /// `run` forces the sliding kernel's run length L (one combination per pass); otherwise the
    /// variant with the lowest expected time is taken (see [`FastPlan::tuned`]).
    pub fn new(gpu: &Gpu, setup: &Setup, run: Option<u32>) -> std::result::Result<FastPlan, String> {
        Self::tuned(gpu, setup, Tuning { slide: run.map(|l| (l, 1)), ..Tuning::default() })
    }

    /// Plans with the sliding variant (L, G) and the C-scan group forced where given. A group whose
    /// shifts of one trace could span a sample or more is refused. Unforced, the sliding variant
    /// minimises computed evaluations x measured cost per evaluation ([`SLIDE_COST`]) and the C
    /// scan takes the first valid group of [`CSCAN_PREFERENCE`].
    pub fn tuned(gpu: &Gpu, setup: &Setup, tune: Tuning) -> std::result::Result<FastPlan, String> {
        let h = setup.half as u32;
        let ns = setup.ns as u32;
        let t = &setup.tables;
        let step = |v: &[f32]| if v.len() > 1 { (v[1] - v[0]).abs() as f64 * 1.0001 } else { 0.0 };
        // Span (samples) of the shifts of G adjacent D (E) values on one trace of aperture 1 (2).
        let slide_span = |g: u32| {
            let g = (g - 1) as f64;
            (g * step(t.d()) * setup.max_dx2_ad).max(g * step(t.e()) * setup.max_dy2_be) * setup.inv_dt as f64
        };
        let valid = |&(l, g): &(u32, u32)| k::slide_kernel_name_g(l, h, g).is_some() && (g == 1 || slide_span(g) < 0.99);
        let computed = |l: u32| ns.div_ceil(k::slide_outputs(l, h)) as f64 * 32.0 * l as f64;
        let cost = |&(l, g): &(u32, u32)| {
            computed(l) * SLIDE_COST.iter().find(|c| (c.0, c.1) == (l, g)).map(|c| c.2).unwrap_or(1.0)
        };
        let (l, sg) = match tune.slide {
            Some(v) if valid(&v) => v,
            Some(v) => return Err(format!("sliding variant {v:?} does not apply (span {:.2} samples or no kernel)",
                slide_span(v.1))),
            None => k::slide_variants(h).iter().copied().filter(valid)
                .min_by(|a, b| cost(a).total_cmp(&cost(b)))
                .ok_or_else(|| format!("no sliding kernel for a window of {} samples", 2 * h + 1))?,
        };
        let slide_kernel = k::slide_kernel_name_g(l, h, sg).unwrap();
        let group = tune.cscan_group;
        let t_out = k::slide_outputs(l, h);
        let nchunks = ns.div_ceil(t_out);
        let smax = setup.shift_bound[0].max(setup.shift_bound[1]);
        let span = 32 * l + 2 * smax as u32 + 2;
        let mmax = setup.apertures.max_len(0).max(setup.apertures.max_len(1)) as u32;
        let w = k::SLIDE_WARPS;
        let rows_bytes = ((mmax * span * 4) as usize).max((w * 32 * l * 8) as usize).next_multiple_of(16);
        let smem = rows_bytes + (2 * mmax as usize * 4).next_multiple_of(16);
        let limit = gpu.info().max_shared_per_block_optin as usize;
        if smem > limit {
            return Err(format!("the (A, D)/(B, E) apertures ({mmax} traces x {span} staged samples) need {} KiB of \
                shared memory, {} KiB available", smem / 1024, limit / 1024));
        }
        let np = setup.np() as u64;
        if np * nchunks as u64 >= i32::MAX as u64 {
            return Err("too many parameter traces for one launch".into());
        }
        let slide_cfg = LaunchConfig { grid_dim: ((np * nchunks as u64) as u32, 2, 1), block_dim: (32 * w, 1, 1),
            shared_mem_bytes: smem as u32 };

        // C values per thread: the largest compiled group whose shifts of one trace span less than
        // one sample (the kernel's shared window then covers them all).
        let c_step = if t.nc > 1 { (t.c()[1] - t.c()[0]).abs() as f64 * 1.0001 } else { 0.0 };
        let span_of = |g: u32| (g.min(t.nc as u32).max(1) - 1) as f64 * c_step * setup.max_abs_dxdy * setup.inv_dt as f64;
        let group = match group {
            Some(g) if span_of(g) < 0.99 && k::cscan_kernel_name(h, g).is_some() => g,
            Some(g) => return Err(format!("C-scan group {g} does not apply (span {:.2} samples or no kernel)", span_of(g))),
            None => CSCAN_PREFERENCE.iter().copied().filter(|&g| k::cscan_kernel_name(h, g).is_some() && span_of(g) < 0.99)
                .next().ok_or_else(|| format!("no C-scan kernel for half window {h}"))?,
        };
        let asked = match tune.cscan {
            Some(v) => Some(v),
            None => cscan_variant_from_env().map_err(|e| e.to_string())?,
        };
        // The default's deep kernels exist for the paper's 11-sample window (H = 5) only; other
        // windows take the base kernel unless a variant was asked for (then: an error below).
        let cscan_variant = match asked {
            Some(v) => v,
            None if CSCAN_DEFAULT.deep && k::cscan_deep_kernel_name(h, group).is_none() => CscanVariant { deep: false, max_regs: 0 },
            None => CSCAN_DEFAULT,
        };
        let cscan_kernel = if cscan_variant.deep {
            k::cscan_deep_kernel_name(h, group)
                .ok_or_else(|| format!("no deep-staging C-scan kernel for half window {h} and group {group}"))?
        } else {
            k::cscan_kernel_name(h, group).unwrap()
        };
        let groups = (t.nc as u32).div_ceil(group);
        let threads3 = k::CSCAN_TIMES * groups;
        let cap = max_threads(gpu, cscan_kernel).map_err(|e| e.to_string())?;
        if threads3 > cap {
            return Err(format!("{} C values: the C-scan kernel takes at most {}", t.nc, cap / k::CSCAN_TIMES * group));
        }
        let smax3 = setup.shift_bound[2];
        let span3 = k::CSCAN_TIMES + 2 * h + 2 * smax3 as u32 + 4;
        let rows3 = ((k::CSCAN_BATCH * span3 * 4) as usize).max(threads3 as usize * 8).next_multiple_of(16);
        let smem3 = rows3 + (2 * k::CSCAN_BATCH as usize * 4).next_multiple_of(16);
        if cscan_variant.max_regs != 0 && !(32..=255).contains(&cscan_variant.max_regs) {
            return Err(format!("C-scan register cap {} outside 32..=255", cscan_variant.max_regs));
        }
        if smem3 > limit {
            return Err(format!("the C scan's shift range ({smax3} samples) needs {} KiB of shared memory", smem3 / 1024));
        }
        let nchunks3 = ns.div_ceil(k::CSCAN_TIMES);
        let cscan_cfg = LaunchConfig { grid_dim: ((np * nchunks3 as u64) as u32, 1, 1), block_dim: (threads3, 1, 1),
            shared_mem_bytes: smem3 as u32 };
        Ok(FastPlan { slide_kernel, run: l, slide_group: sg, half: h, nchunks, span, mmax, smax, slide_cfg, cscan_kernel, cscan_group: group,
            cscan_variant, nchunks3, span3, smax3, cscan_cfg })
    }

    /// Uploads everything (pageable copies) and allocates the outputs.
    pub fn upload(&self, gpu: &Gpu, setup: &Setup, data: &[f32]) -> Result<FastBuffers> {
        let np = setup.np();
        let ns = setup.ns;
        gpu.ensure_fits("the gather and the fast kernels' buffers", data.len() * 4 + np * ns * 24 + setup.apertures.idx.len() * 4)?;
        Ok(FastBuffers {
            data: gpu.upload(data)?,
            tx: gpu.upload(&setup.tx)?,
            ty: gpu.upload(&setup.ty)?,
            px: gpu.upload(&setup.px)?,
            py: gpu.upload(&setup.py)?,
            ap_off: gpu.upload(&setup.apertures.off)?,
            ap_idx: gpu.upload(&setup.apertures.idx)?,
            vals: gpu.upload(&setup.tables.vals)?,
            picks: gpu.zeros::<u32>(2 * np * ns)?,
            pick_s: gpu.zeros::<f32>(2 * np * ns)?,
            code: gpu.zeros::<u32>(np * ns)?,
            sem: gpu.zeros::<f32>(np * ns)?,
        })
    }

    /// The (A, D) + (B, E) launch (phase-1/2 picks and their S / M in `picks`, `pick_s`).
    pub fn launch_slide(&self, gpu: &Gpu, setup: &Setup, b: &mut FastBuffers) -> Result<()> {
        let t = &setup.tables;
        let (ns, np) = (setup.ns as u32, setup.np() as u32);
        let (na, nb, nc, nd, ne) = (t.na as u32, t.nb as u32, t.nc as u32, t.nd as u32, t.ne as u32);
        launch!(gpu, self.slide_kernel, self.slide_cfg, &ns, &np, &self.nchunks, &setup.inv_dt, &self.smax, &self.span,
            &self.mmax, &b.data, &b.tx, &b.ty, &b.px, &b.py, &b.ap_off, &b.ap_idx, &b.vals, &na, &nb, &nc, &nd, &ne,
            &mut b.picks, &mut b.pick_s)?;
        Ok(())
    }

    /// The C-scan launch (final codes and S).
    pub fn launch_cscan(&self, gpu: &Gpu, setup: &Setup, b: &mut FastBuffers) -> Result<()> {
        let t = &setup.tables;
        let (ns, np) = (setup.ns as u32, setup.np() as u32);
        let (na, nb, nc, nd, ne) = (t.na as u32, t.nb as u32, t.nc as u32, t.nd as u32, t.ne as u32);
        let off3 = b.ap_off.slice(2 * (setup.np() + 1)..);
        let cfg = self.cscan_cfg;
        let func = self.cscan_function(gpu, &cfg)?;
        let mut l = gpu.stream().launch_builder(&func);
        l.arg(&ns).arg(&np).arg(&self.nchunks3).arg(&setup.inv_dt).arg(&self.smax3).arg(&self.span3).arg(&b.data).arg(&b.tx)
            .arg(&b.ty).arg(&b.px).arg(&b.py).arg(&off3).arg(&b.ap_idx).arg(&b.vals).arg(&na).arg(&nb).arg(&nc).arg(&nd)
            .arg(&ne).arg(&b.picks).arg(&mut b.code).arg(&mut b.sem);
        let r = unsafe { l.launch(cfg) };
        gpu.finish_launch(self.cscan_kernel, &cfg, r.map(|_| ()))?;
        Ok(())
    }

    /// (registers, local memory bytes) per thread of the C-scan kernel as the driver compiled it.
    pub fn cscan_resources(&self, gpu: &Gpu) -> Result<(i32, i32)> {
        let f = self.cscan_function(gpu, &self.cscan_cfg)?;
        let get = |a: sys::CUfunction_attribute| -> Result<i32> {
            let mut v = 0i32;
            unsafe { sys::cuFuncGetAttribute(&mut v, a, f.cu_function()) }.result()
                .map_err(drv(format!("reading an attribute of `{}`", self.cscan_kernel)))?;
            Ok(v)
        };
        Ok((get(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_NUM_REGS)?, get(sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?))
    }

    /// The C-scan kernel: the main module's, or a JIT copy with `.maxnreg` (`cscan_variant.max_regs`).
    pub fn cscan_function(&self, gpu: &Gpu, cfg: &LaunchConfig) -> Result<cudarc::driver::CudaFunction> {
        match self.cscan_variant.max_regs {
            0 => Ok(gpu.prepare_launch(self.cscan_kernel, cfg)?),
            r => Ok(capped_kernel(gpu, self.cscan_kernel, r, cfg)?),
        }
    }

    /// Both launches (kernel-only timing).
    pub fn launch(&self, gpu: &Gpu, setup: &Setup, b: &mut FastBuffers) -> Result<()> {
        self.launch_slide(gpu, setup, b)?;
        self.launch_cscan(gpu, setup, b)
    }

    /// Upload, kernels, download (pageable copies; see [`FastEngine`] for the reusable version).
    pub fn run(&self, gpu: &Gpu, setup: &Setup, data: &[f32]) -> Result<(Vec<u32>, Vec<f32>)> {
        let mut b = self.upload(gpu, setup, data)?;
        self.launch(gpu, setup, &mut b)?;
        Ok((gpu.download(&b.code)?, gpu.download(&b.sem)?))
    }
}

/// What the fast kernels read of a whole gather, uploaded once and kept on a device across the
/// work items of a multi-device search (`super::estimate_setup_multi`), with the items' buffers
/// (parameter traces, apertures, picks, results), allocated with the first item and grown only
/// when an item needs more: an item allocates, zeroes and frees nothing.
pub struct Resident {
    bufs: FastBuffers,
}

impl Resident {
    pub fn upload(gpu: &Gpu, setup: &Setup, data: &[f32]) -> Result<Resident> {
        gpu.ensure_fits("the gather", data.len() * 4 + setup.ntr() * 8)?;
        let one_u = || gpu.zeros::<u32>(1);
        let one_f = || gpu.zeros::<f32>(1);
        Ok(Resident { bufs: FastBuffers { data: gpu.upload(data)?, tx: gpu.upload(&setup.tx)?, ty: gpu.upload(&setup.ty)?,
            vals: gpu.upload(&setup.tables.vals)?, px: one_f()?, py: one_f()?, ap_off: one_u()?, ap_idx: one_u()?,
            picks: one_u()?, pick_s: one_f()?, code: one_u()?, sem: one_f()? } })
    }
}

/// Grows `buf` to at least `len` elements (contents not kept).
fn grow<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(gpu: &Gpu, buf: &mut CudaSlice<T>, len: usize)
    -> Result<()> {
    if buf.len() < len {
        *buf = gpu.zeros::<T>(len)?;
    }
    Ok(())
}

/// The fast search of `sub` (a [`Setup::subset`] of the setup `res` was uploaded for) on the
/// resident gather: only the parameter traces and their apertures go up.
pub fn estimate_fast_resident(gpu: &Gpu, sub: &Setup, res: &mut Resident) -> Result<(Vec<u32>, Vec<f32>)> {
    let n = sub.estimations();
    let (mut code, mut sem) = (vec![0u32; n], vec![0f32; n]);
    estimate_fast_resident_into(gpu, sub, res, &mut code, &mut sem)?;
    Ok((code, sem))
}

/// [`estimate_fast_resident`] with the codes and semblance downloaded straight into `code` and
/// `sem` (`sub.estimations()` each; e.g. the item's part of the whole result).
pub fn estimate_fast_resident_into(gpu: &Gpu, sub: &Setup, res: &mut Resident, code: &mut [u32], sem: &mut [f32])
    -> Result<()> {
    let b = &mut res.bufs;
    if sub.tx.len() != b.tx.len() || sub.tables.vals.len() != b.vals.len() {
        return Err(NlbfError::Invalid("the resident gather belongs to another setup".into()));
    }
    let (np, n) = (sub.np(), sub.estimations());
    if code.len() != n || sem.len() != n {
        return Err(NlbfError::Invalid(format!("estimate_fast_resident_into: {} / {} outputs for {n} estimations",
            code.len(), sem.len())));
    }
    let plan = FastPlan::new(gpu, sub, None).map_err(NlbfError::Invalid)?;
    let (off, idx) = (&sub.apertures.off, &sub.apertures.idx);
    let need = [np, np, off.len(), idx.len(), 2 * n, 2 * n, n, n];
    let have = [b.px.len(), b.py.len(), b.ap_off.len(), b.ap_idx.len(), b.picks.len(), b.pick_s.len(), b.code.len(), b.sem.len()];
    if need.iter().zip(&have).any(|(a, h)| a > h) {
        gpu.ensure_fits("the fast kernels' buffers", n * 24 + idx.len() * 4)?;
        grow(gpu, &mut b.px, np)?;
        grow(gpu, &mut b.py, np)?;
        grow(gpu, &mut b.ap_off, off.len())?;
        grow(gpu, &mut b.ap_idx, idx.len())?;
        grow(gpu, &mut b.picks, 2 * n)?;
        grow(gpu, &mut b.pick_s, 2 * n)?;
        grow(gpu, &mut b.code, n)?;
        grow(gpu, &mut b.sem, n)?;
    }
    let st = gpu.stream();
    // The kernels read only the first np / 3 (np + 1) entries (np is a launch argument), so larger
    // buffers from an earlier, larger item are fine.
    st.memcpy_htod(sub.px.as_slice(), &mut b.px.slice_mut(0..np)).map_err(drv("uploading parameter traces"))?;
    st.memcpy_htod(sub.py.as_slice(), &mut b.py.slice_mut(0..np)).map_err(drv("uploading parameter traces"))?;
    st.memcpy_htod(off.as_slice(), &mut b.ap_off.slice_mut(0..off.len())).map_err(drv("uploading apertures"))?;
    st.memcpy_htod(idx.as_slice(), &mut b.ap_idx.slice_mut(0..idx.len())).map_err(drv("uploading apertures"))?;
    plan.launch(gpu, sub, b)?;
    st.memcpy_dtoh(&b.code.slice(0..n), code).map_err(drv("downloading picks"))?;
    st.memcpy_dtoh(&b.sem.slice(0..n), sem).map_err(drv("downloading semblance"))?;
    st.synchronize().map_err(drv("waiting for the fast kernels (an earlier launch may have faulted)"))?;
    Ok(())
}

/// Forced kernel variants (tuning); `None` = chosen by [`FastPlan::tuned`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Tuning {
    /// (run length L, D/E values per pass G) of the sliding kernel.
    pub slide: Option<(u32, u32)>,
    /// C values per thread of the C-scan kernel.
    pub cscan_group: Option<u32>,
    /// Staging and register cap of the C-scan kernel; `None` = [`CSCAN_ENV`] if set, else [`CSCAN_DEFAULT`].
    pub cscan: Option<CscanVariant>,
}

/// A C-scan kernel variant (a tuning; every variant computes the same bits): the staging of
/// each batch of aperture traces and a register cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CscanVariant {
    /// `stage_rows_deep` (a warp stages two rows at once, 8 loads in flight per lane, geometry
    /// loads first: `nlbf_cscan_h5_g{2,3,4}_deep`) instead of `stage_rows` (one row at a time).
    pub deep: bool,
    /// `.maxnreg` of a JIT copy of the kernel alone (0 = the main module's build). 64 lets four
    /// blocks of 256 threads (G3) share an SM instead of three (72 registers); ptxas sm_90 spills
    /// 24-28 bytes outside the trace loop at 64.
    pub max_regs: u32,
}

impl std::fmt::Display for CscanVariant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.deep, self.max_regs) {
            (false, 0) => write!(f, "base"),
            (true, 0) => write!(f, "deep"),
            (false, r) => write!(f, "r{r}"),
            (true, r) => write!(f, "deep-r{r}"),
        }
    }
}

impl std::str::FromStr for CscanVariant {
    type Err = String;
    /// `base`, `deep`, `r64`, `deep-r64` (the [`Display`](std::fmt::Display) form).
    fn from_str(v: &str) -> std::result::Result<Self, String> {
        let mut out = CscanVariant::default();
        for part in v.trim().split('-') {
            match part {
                "base" => {}
                "deep" => out.deep = true,
                r if r.starts_with('r') && r.len() > 1 => {
                    out.max_regs = r[1..].parse().map_err(|_| format!("C-scan variant `{v}`: bad register cap `{r}`"))?;
                    if !(32..=255).contains(&out.max_regs) {
                        return Err(format!("C-scan variant `{v}`: register cap {} outside 32..=255", out.max_regs));
                    }
                }
                _ => return Err(format!("C-scan variant `{v}`: expected base, deep, rNN or deep-rNN")),
            }
        }
        Ok(out)
    }
}

/// The C-scan variant the planner takes when not tuned: the fastest measured on the H100
/// (`nlbf-crossspread-3d`, G3: deep-r80 38.0 ms, base 41.0, r64 44.4, deep-r64 44.5).
pub const CSCAN_DEFAULT: CscanVariant = CscanVariant { deep: true, max_regs: 80 };
/// The C-scan variants `bench nlbf` times for G3 (other groups: the default). ptxas sm_90, G3 (256
/// threads): base 72 registers (3 blocks per SM); `r64` 4 blocks, 24-28 B spilled outside the trace
/// loop (208 SASS per trace, as base); `deep-r80` 3 blocks, no spills (deep alone takes 87: 2
/// blocks); `deep-r64` 4 blocks, 16 spill instructions in the trace loop (224 SASS per trace).
pub const CSCAN_VARIANTS: [CscanVariant; 4] = [CscanVariant { deep: false, max_regs: 0 }, CscanVariant { deep: false, max_regs: 64 },
    CscanVariant { deep: true, max_regs: 80 }, CscanVariant { deep: true, max_regs: 64 }];
/// Tuning knob: `SEISGPU_NLBF_CSCAN` (`base`, `r64`, `deep`, `deep-r72`, ...) replaces
/// [`CSCAN_DEFAULT`] where no variant is forced; results do not depend on it.
pub const CSCAN_ENV: &str = "SEISGPU_NLBF_CSCAN";

fn cscan_variant_from_env() -> Result<Option<CscanVariant>> {
    let Ok(v) = std::env::var(CSCAN_ENV) else { return Ok(None) };
    v.parse().map(Some).map_err(|e| NlbfError::Invalid(format!("{CSCAN_ENV}={v}: {e}")))
}


/// Relative cost per computed evaluation of the sliding variants (L, G, cost); the planner
/// multiplies it by the padded number of evaluations. H100 measurements at paper size
/// (BENCHMARKS.md, commit da259d9): time per evaluation relative to L = 7 G = 1 on
/// `nlbf-crossspread-3d`; `nlbf-synthetic-2d` gives the same ratios to 1 % (L10 0.878, L11 0.898,
/// L13 0.915), so the planner picks L10 on the cross-spread (104.4 ms, fastest measured) and L11
/// on the 2D line (6.56 ms, fastest measured). `seisgpu bench nlbf` times every variant and reports
/// the best.
pub const SLIDE_COST: [(u32, u32, f64); 10] = [(7, 1, 1.0), (9, 1, 0.927), (10, 1, 0.880), (11, 1, 0.896), (13, 1, 0.913),
    (14, 1, 0.918), (7, 4, 0.980), (9, 4, 0.994), (9, 2, 0.994), (13, 2, 1.115)];

/// C values per thread of the C-scan kernel in order of preference: H100 at paper size, G3 41.4 ms,
/// G4 46.0 ms, G2 46.2 ms, G1 73.4 ms on the cross-spread (18.3 / 20.4 / 20.0 / 29.3 ms in 2D); the
/// first whose shifts of one trace span less than a sample is taken.
pub const CSCAN_PREFERENCE: [u32; 4] = [3, 4, 2, 1];

/// Device buffers of the fast variant.
pub struct FastBuffers {
    pub data: CudaSlice<f32>,
    pub tx: CudaSlice<f32>,
    pub ty: CudaSlice<f32>,
    pub px: CudaSlice<f32>,
    pub py: CudaSlice<f32>,
    pub ap_off: CudaSlice<u32>,
    pub ap_idx: CudaSlice<u32>,
    pub vals: CudaSlice<f32>,
    /// Phase-1 and phase-2 picks, `[(phase * np + p) * ns + t]`, and their S (from the slide kernel).
    pub picks: CudaSlice<u32>,
    pub pick_s: CudaSlice<f32>,
    pub code: CudaSlice<u32>,
    pub sem: CudaSlice<f32>,
}

/// The fast variant as a reusable engine for a stream of gathers of one shape: page-locked
/// staging for the gather (filled in chunks by all cores while earlier chunks are on their way),
/// page-locked result buffers, device buffers allocated once.
pub struct FastEngine {
    pub plan: FastPlan,
    pub bufs: FastBuffers,
    stage: PinnedHostSlice<f32>,
    /// Page-locked aperture index list of the pipelined [`FastEngine::estimate`], filled band by
    /// band on a host thread while the earlier bands compute.
    stage_idx: PinnedHostSlice<u32>,
    out_code: PinnedHostSlice<u32>,
    out_s: PinnedHostSlice<f32>,
    /// Events at start, after the uploads, after the kernels, after the downloads.
    events: [cudarc::driver::CudaEvent; 4],
    tuning: Tuning,
    /// Streams, events and band offsets of the pipelined [`FastEngine::estimate`].
    pipe: Pipe,
}

/// Chunks the gather upload is split into (host copy of chunk i+1 overlaps the DMA of chunk i).
const UPLOAD_CHUNKS: usize = 8;

impl FastEngine {
    pub fn new(gpu: &Gpu, setup: &Setup, data: &[f32], run: Option<u32>) -> Result<FastEngine> {
        Self::with_tuning(gpu, setup, data, Tuning { slide: run.map(|l| (l, 1)), ..Tuning::default() })
    }

    /// An engine with forced kernel variants (see [`FastPlan::tuned`]).
    pub fn with_tuning(gpu: &Gpu, setup: &Setup, data: &[f32], tuning: Tuning) -> Result<FastEngine> {
        let plan = FastPlan::tuned(gpu, setup, tuning).map_err(NlbfError::Invalid)?;
        let bufs = plan.upload(gpu, setup, data)?;
        let n = setup.estimations();
        let ev = || gpu.context().new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(drv("creating an event"));
        let pipe = Pipe::new(gpu, setup.np())?;
        Ok(FastEngine { plan, bufs, stage: pinned(gpu, data.len(), true)?,
            stage_idx: pinned(gpu, setup.apertures.idx.len().max(1), true)?, out_code: pinned(gpu, n, false)?,
            out_s: pinned(gpu, n, false)?, events: [ev()?, ev()?, ev()?, ev()?], tuning, pipe })
    }

    /// GPU-side times of the last [`FastEngine::process`] (ms): uploads (including the host's
    /// staging copies they overlap), kernels, downloads.
    pub fn last_breakdown_ms(&self) -> Result<(f64, f64, f64)> {
        let e = &self.events;
        let ms = |a: &cudarc::driver::CudaEvent, b| a.elapsed_ms(b).map(|v| v as f64).map_err(drv("reading event times"));
        Ok((ms(&e[0], &e[1])?, ms(&e[1], &e[2])?, ms(&e[2], &e[3])?))
    }

    /// One gather end to end: host data -> device -> both kernels -> results in host memory.
    /// The setup (geometry, apertures) must have the shape the engine was built for.
    pub fn process(&mut self, gpu: &Gpu, setup: &Setup, data: &[f32]) -> Result<(Vec<u32>, Vec<f32>)> {
        if data.len() != self.bufs.data.len() {
            return Err(NlbfError::Invalid("FastEngine::process: the gather's size differs from the engine's".into()));
        }
        self.stage_upload(gpu, data, false)?;
        self.finish(gpu, setup)
    }

    /// The whole search for one gather, end to end, in one pass over the samples, serially: the
    /// samples are checked for finiteness while being staged for the upload, the geometry is
    /// derived on the host after that, then both kernels run over all parameter traces and the
    /// results come back. The benchmark's reference for the pipelined [`FastEngine::estimate`].
    pub fn estimate_serial(&mut self, gpu: &Gpu, traces: &TraceSet, params: &EstimateParams) -> Result<Estimate> {
        super::validate_shape(traces)?;
        if traces.data.len() != self.bufs.data.len() {
            return Err(NlbfError::Invalid(format!("FastEngine: the gather has {} samples, the engine was built for {}",
                traces.data.len(), self.bufs.data.len())));
        }
        let all_finite = self.stage_upload(gpu, &traces.data, true)?;
        let setup = Setup::from_headers(traces, params)?;
        if !all_finite {
            super::validate_traces(traces)?;
        }
        self.plan = FastPlan::tuned(gpu, &setup, self.tuning).map_err(NlbfError::Invalid)?;
        let (code, s) = self.finish(gpu, &setup)?;
        Ok(Estimate::from_setup(&setup, code, s))
    }

    /// The whole search for one gather, end to end, pipelined (the stream pool that uploads
    /// the next chunk while the current one computes): the setup's cheap first pass (headers only:
    /// offsets, bounds, the plan) and band 0's aperture lists come first, then the samples are
    /// staged (and checked for finiteness) chunk by chunk on all cores and uploaded on a copy
    /// stream while a host thread fills the other bands' lists; the parameter traces are split into bands
    /// ([`BAND_ENDS`], grid order) and each band's sliding scan starts as soon as the traces its
    /// apertures read are on the device, its C scan (a second, higher-priority stream) as soon as
    /// its picks exist, and its packed results come back and are copied out while later bands
    /// compute. Every parameter trace runs through the same kernels with the same bounds as in
    /// [`FastEngine::estimate_serial`], so the results are identical.
    pub fn estimate(&mut self, gpu: &Gpu, traces: &TraceSet, params: &EstimateParams) -> Result<Estimate> {
        match band_ends_from_env()? {
            Some(ends) => self.estimate_bands(gpu, traces, params, &ends),
            None => self.estimate_bands(gpu, traces, params, &BAND_ENDS),
        }
    }

    /// [`FastEngine::estimate`] with the bands ending at the cumulative fractions `ends` of the
    /// parameter traces (tests, tuning); at most [`MAX_BANDS`] bands.
    pub fn estimate_bands(&mut self, gpu: &Gpu, traces: &TraceSet, params: &EstimateParams, ends: &[f64])
        -> Result<Estimate> {
        let wall = Instant::now();
        super::validate_shape(traces)?;
        if traces.data.len() != self.bufs.data.len() {
            return Err(NlbfError::Invalid(format!("FastEngine: the gather has {} samples, the engine was built for {}",
                traces.data.len(), self.bufs.data.len())));
        }
        if ends.is_empty() || ends.len() >= MAX_BANDS {
            return Err(NlbfError::Invalid(format!("FastEngine: {} band ends (1 to {} allowed)", ends.len(), MAX_BANDS - 1)));
        }
        let r = self.pipelined(gpu, traces, params, ends);
        // Whatever happened, no copy may still read the staging or write the result buffers.
        let synced = [&self.pipe.up, &self.pipe.slide, &self.pipe.cscan]
            .iter()
            .try_for_each(|s| s.synchronize())
            .map_err(drv("waiting for the pipelined search (an earlier launch may have faulted)"));
        let est = r?;
        synced?;
        self.pipe.host.wall_ms = wall.elapsed().as_secs_f64() * 1e3;
        Ok(est)
    }

    /// Times of the last pipelined [`FastEngine::estimate`] (GPU events and host clocks).
    pub fn last_pipeline_times(&self) -> Result<PipelineTimes> {
        let t = &self.pipe.t;
        let ms = |a: &CudaEvent, b: &CudaEvent| a.elapsed_ms(b).map(|v| v as f64).map_err(drv("reading event times"));
        Ok(PipelineTimes { upload_ms: ms(&t[0], &t[1])?, lead_ms: ms(&t[0], &t[2])?, kernels_ms: ms(&t[2], &t[3])?,
            download_ms: ms(&t[3], &t[4])?, ..self.pipe.host })
    }

    fn pipelined(&mut self, gpu: &Gpu, traces: &TraceSet, params: &EstimateParams, ends: &[f64]) -> Result<Estimate> {
        let ev = |e: &CudaEvent, s: &CudaStream| e.record(s).map_err(drv("recording an event"));
        let wait = |s: &CudaStream, e: &CudaEvent| s.wait(e).map_err(drv("ordering streams"));
        let FastEngine { plan, bufs, stage, stage_idx, out_code, out_s, tuning, pipe, .. } = self;
        let (ns, ntr) = (traces.ns, traces.headers.len());
        // Work queued earlier on the main stream (allocations, other entries) comes first.
        ev(&pipe.ready, gpu.stream())?;
        for s in [&pipe.up, &pipe.slide, &pipe.cscan] {
            wait(s, &pipe.ready)?;
        }
        ev(&pipe.t[0], &pipe.up)?;
        let host0 = Instant::now();
        // What the first launch needs, first, on all cores: the setup's cheap first pass (offsets,
        // bounds: the plan) and band 0's aperture lists; their upload is queued ahead of the gather.
        // The other bands' lists are filled on a host thread while the gather is staged and the
        // first bands compute, each uploaded (page-locked, asynchronous) as soon as it is filled.
        let DeferredSetup { setup, fill } = Setup::from_headers_deferred(traces, params)?;
        let band_list = bands(setup.np(), ends);
        if stage_idx.len() < fill.total() {
            *stage_idx = pinned(gpu, fill.total(), true)?;
        }
        let sidx = pinned_mut(stage_idx)?;
        let mut pieces = fill.split(&band_list, &mut sidx[..fill.total()]).into_iter();
        let mut first = pieces.next().ok_or_else(|| NlbfError::Invalid("FastEngine: no parameter traces".into()))?;
        fill.fill(band_list[0], &mut first, true);
        let mut r = Banded::prepare(gpu, setup, &fill, band_list.clone(), *tuning, plan, bufs, pipe)?;
        r.queue_lists(pipe, 0, &first)?;
        let setup_ms = host0.elapsed().as_secs_f64() * 1e3;
        let d_data = dptr_mut(&mut bufs.data, &pipe.up);
        let stage = pinned_mut(stage)?;
        let (oc, os) = (pinned_mut(out_code)?, pinned_mut(out_s)?);
        let cend = chunk_ends(ntr, r.need[0], PIPE_CHUNKS);
        let data = &traces.data;
        let mut finite = true;
        let mut fill_ms = 0.0;
        std::thread::scope(|sc| -> Result<()> {
            let (send, recv) = std::sync::mpsc::channel::<(usize, [&mut [u32]; 3])>();
            let (fill, band_list) = (&fill, &band_list);
            // One thread, no rayon: the staging below keeps the pool (and the copy bandwidth) to
            // itself, and the lists of band b + 1 are ready long before band b's scans end.
            let filler = sc.spawn(move || {
                let t = Instant::now();
                for (b, mut piece) in pieces.enumerate().map(|(i, p)| (i + 1, p)) {
                    fill.fill(band_list[b], &mut piece, false);
                    if send.send((b, piece)).is_err() {
                        break;
                    }
                }
                t.elapsed().as_secs_f64() * 1e3
            });
            for ci in 0..cend.len() {
                let (a, b) = (if ci == 0 { 0 } else { cend[ci - 1] * ns }, cend[ci] * ns);
                let dst = &mut stage[a..b];
                finite &= dst.par_chunks_mut(1 << 16).zip(data[a..b].par_chunks(1 << 16)).map(|(d, s)| {
                    d.copy_from_slice(s);
                    s.iter().fold(true, |acc, v| acc & v.is_finite())
                }).reduce(|| true, |x, y| x & y);
                unsafe { htod(&pipe.up, d_data + (a * 4) as u64, &stage[a..b])? };
                ev(&pipe.chunk[ci], &pipe.up)?;
                while let Ok((b, piece)) = recv.try_recv() {
                    r.queue_lists(pipe, b, &piece)?;
                }
                r.launch_ready(gpu, plan, pipe, ci + 1, &cend, oc, os)?;
            }
            ev(&pipe.t[1], &pipe.up)?;
            r.launch_ready(gpu, plan, pipe, cend.len(), &cend, oc, os)?;
            for (b, piece) in recv.iter() {
                r.queue_lists(pipe, b, &piece)?;
                r.launch_ready(gpu, plan, pipe, cend.len(), &cend, oc, os)?;
            }
            fill_ms = filler.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            if r.next != r.bands.len() {
                return Err(NlbfError::Invalid(format!("FastEngine: {} of {} bands launched", r.next, r.bands.len())));
            }
            Ok(())
        })?;
        let stage_ms = host0.elapsed().as_secs_f64() * 1e3;
        if !finite {
            super::validate_traces(traces)?;
        }
        // Result vectors touched while the GPU works; each band copied out as soon as it is back.
        let n = r.setup.estimations();
        let mut code = vec![0u32; n];
        let mut sem = vec![0f32; n];
        code.par_chunks_mut(1 << 16).for_each(|c| c.fill(1));
        sem.par_chunks_mut(1 << 16).for_each(|c| c.fill(1.0));
        let mut tail = Instant::now();
        for (b, &(p0, p1)) in r.bands.iter().enumerate() {
            // The last band's first part (if split) is copied out while its second part computes.
            let split = if b + 1 == r.bands.len() { last_band_split(p1 - p0) } else { 0 };
            let mut from = p0;
            if split > 0 {
                pipe.part_back.synchronize().map_err(drv("waiting for a band (an earlier launch may have faulted)"))?;
                let (lo, hi) = (p0 * ns, (p0 + split) * ns);
                code[lo..hi].par_chunks_mut(1 << 16).zip(oc[lo..hi].par_chunks(1 << 16)).for_each(|(d, x)| d.copy_from_slice(x));
                sem[lo..hi].par_chunks_mut(1 << 16).zip(os[lo..hi].par_chunks(1 << 16)).for_each(|(d, x)| d.copy_from_slice(x));
                from = p0 + split;
            }
            pipe.done[b].synchronize().map_err(drv("waiting for a band (an earlier launch may have faulted)"))?;
            tail = Instant::now();
            let (lo, hi) = (from * ns, p1 * ns);
            code[lo..hi].par_chunks_mut(1 << 16).zip(oc[lo..hi].par_chunks(1 << 16)).for_each(|(d, x)| d.copy_from_slice(x));
            sem[lo..hi].par_chunks_mut(1 << 16).zip(os[lo..hi].par_chunks(1 << 16)).for_each(|(d, x)| d.copy_from_slice(x));
        }
        pipe.host = PipelineTimes { setup_ms, fill_ms, stage_ms, tail_ms: tail.elapsed().as_secs_f64() * 1e3,
            bands: r.bands.len(), ..Default::default() };
        Ok(Estimate::from_setup(&r.setup, code, sem))
    }

    /// Copies the gather into page-locked staging in chunks (all cores) and queues each chunk's
    /// upload as soon as it is staged; optionally checks that every sample is finite on the way.
    fn stage_upload(&mut self, gpu: &Gpu, data: &[f32], check: bool) -> Result<bool> {
        let st = gpu.stream();
        self.events[0].record(st).map_err(drv("recording an event"))?;
        let d_data = dptr_mut(&mut self.bufs.data, st);
        let stage = pinned_mut(&mut self.stage)?;
        let chunk = data.len().div_ceil(UPLOAD_CHUNKS).max(1);
        let mut finite = true;
        for (i, (dst, src)) in stage.chunks_mut(chunk).zip(data.chunks(chunk)).enumerate() {
            let ok = dst.par_chunks_mut(1 << 16).zip(src.par_chunks(1 << 16)).map(|(d, s)| {
                d.copy_from_slice(s);
                !check || s.iter().fold(true, |a, v| a & v.is_finite())
            }).reduce(|| true, |a, b| a & b);
            finite &= ok;
            unsafe { htod(st, d_data + (i * chunk * 4) as u64, dst)? };
        }
        Ok(finite)
    }

    /// Geometry upload, both kernels, download of the packed picks.
    fn finish(&mut self, gpu: &Gpu, setup: &Setup) -> Result<(Vec<u32>, Vec<f32>)> {
        let st = gpu.stream();
        if setup.estimations() != self.bufs.code.len() || setup.ntr() != self.bufs.tx.len() || setup.np() != self.bufs.px.len()
            || setup.tables.vals.len() != self.bufs.vals.len() || setup.apertures.off.len() != self.bufs.ap_off.len() {
            return Err(NlbfError::Invalid("FastEngine: the gather's geometry differs from the engine's".into()));
        }
        if setup.apertures.idx.len() > self.bufs.ap_idx.len() {
            self.bufs.ap_idx = gpu.zeros::<u32>(setup.apertures.idx.len())?;
        }
        // Geometry and apertures (small; they change from gather to gather in general).
        for (buf, host) in [(&mut self.bufs.tx, &setup.tx), (&mut self.bufs.ty, &setup.ty), (&mut self.bufs.px, &setup.px),
            (&mut self.bufs.py, &setup.py), (&mut self.bufs.vals, &setup.tables.vals)] {
            st.memcpy_htod(host.as_slice(), buf).map_err(drv("uploading geometry"))?;
        }
        st.memcpy_htod(setup.apertures.off.as_slice(), &mut self.bufs.ap_off).map_err(drv("uploading apertures"))?;
        st.memcpy_htod(setup.apertures.idx.as_slice(), &mut self.bufs.ap_idx).map_err(drv("uploading apertures"))?;
        self.events[1].record(st).map_err(drv("recording an event"))?;
        self.plan.launch(gpu, setup, &mut self.bufs)?;
        self.events[2].record(st).map_err(drv("recording an event"))?;
        let (code_p, s_p) = (dptr(&self.bufs.code, st), dptr(&self.bufs.sem, st));
        let (oc, os) = (pinned_mut(&mut self.out_code)?, pinned_mut(&mut self.out_s)?);
        unsafe {
            dtoh(st, oc, code_p)?;
            dtoh(st, os, s_p)?;
        }
        self.events[3].record(st).map_err(drv("recording an event"))?;
        st.synchronize().map_err(drv("waiting for the fast kernels (an earlier launch may have faulted)"))?;
        let n = oc.len();
        let mut code = vec![0u32; n];
        let mut s = vec![0f32; n];
        code.par_chunks_mut(1 << 16).zip(oc.par_chunks(1 << 16)).for_each(|(d, x)| d.copy_from_slice(x));
        s.par_chunks_mut(1 << 16).zip(os.par_chunks(1 << 16)).for_each(|(d, x)| d.copy_from_slice(x));
        Ok((code, s))
    }
}

// -------------------------------------------------------------------------------------------------
// Pipelined end to end (bands of parameter traces over three streams).
// -------------------------------------------------------------------------------------------------

/// Cumulative fractions of the parameter traces (grid order) that end the bands of the pipelined
/// [`FastEngine::estimate`]: a small first band, so that the kernels start as soon as the first
/// traces are on the device, and a small last band, so that little is left to copy back after the
/// last kernel. Traces in gather order follow the parameter-trace rows on sorted surveys (the
/// cross-spread: source-major, y = source); on other orders the first band simply waits longer.
/// Measured on the H100 (crossspread-3d, one run, `SEISGPU_NLBF_BANDS` sweep of seven layouts): these four bands
/// 151.8 ms end to end against 154.5 ms for the seven bands used before (1/32, 1/8, 1/4, 1/2, 3/4, 15/16, 1):
/// fewer band boundaries, fewer partly filled waves of the sliding scan.
pub const BAND_ENDS: [f64; 4] = [1.0 / 32.0, 1.0 / 8.0, 1.0 / 2.0, 1.0];
/// Tuning knob: `SEISGPU_NLBF_BANDS` (comma-separated cumulative fractions, e.g. `0.0625,0.5,1`)
/// replaces [`BAND_ENDS`] in [`FastEngine::estimate`]; results do not depend on it.
pub const BANDS_ENV: &str = "SEISGPU_NLBF_BANDS";

fn band_ends_from_env() -> Result<Option<Vec<f64>>> {
    let Ok(v) = std::env::var(BANDS_ENV) else { return Ok(None) };
    let ends = v.split(',').map(|f| f.trim().parse::<f64>()).collect::<std::result::Result<Vec<f64>, _>>()
        .map_err(|e| NlbfError::Invalid(format!("{BANDS_ENV}={v}: {e}")))?;
    let ok = !ends.is_empty() && ends.windows(2).all(|w| w[0] < w[1]) && ends[0] > 0.0 && ends[ends.len() - 1] == 1.0;
    if !ok {
        return Err(NlbfError::Invalid(format!("{BANDS_ENV}={v}: expected increasing fractions in (0, 1] ending at 1")));
    }
    Ok(Some(ends))
}
/// Most bands the engine has events for.
pub const MAX_BANDS: usize = 16;
/// Chunks (of whole traces) the pipelined upload is split into.
pub const PIPE_CHUNKS: usize = 16;

/// Ends (in traces, ascending, the last = `ntr`) of the (at most `n`) chunks of the pipelined
/// upload: band 0's traces (`first_need`) end a chunk, so that the first launch waits for exactly
/// them, in at least two chunks (the second's copy overlaps the first's DMA) and in their share of
/// the `n` otherwise (a band 0 that reads most of the gather keeps the copy/DMA overlap of even
/// chunks); the rest of the gather evenly in the other chunks.
pub fn chunk_ends(ntr: usize, first_need: usize, n: usize) -> Vec<usize> {
    let n = n.max(3);
    let f = first_need.clamp(1, ntr);
    let k0 = if f == ntr { n } else { ((n * f) as f64 / ntr as f64).round().clamp(2.0, (n - 1) as f64) as usize };
    let mut v: Vec<usize> = (1..=k0).map(|k| (f * k).div_ceil(k0)).collect();
    let k1 = n - k0;
    v.extend((1..=k1).map(|k| f + ((ntr - f) * k).div_ceil(k1)));
    v.dedup();
    v
}

/// Contiguous bands `(p0, p1)` of `np` parameter traces ending at the cumulative fractions `ends`
/// (empty bands dropped; the last band always ends at `np`).
pub fn bands(np: usize, ends: &[f64]) -> Vec<(usize, usize)> {
    let mut v = Vec::new();
    let mut p0 = 0;
    for &f in ends {
        let p1 = ((np as f64 * f).round() as usize).clamp(p0, np);
        if p1 > p0 {
            v.push((p0, p1));
            p0 = p1;
        }
    }
    if p0 < np {
        v.push((p0, np));
    }
    v
}

/// For each band, the prefix of the gather (in traces) that it and every earlier band read: one
/// past the largest trace index in any of their apertures.
pub fn band_needs(ap: &Apertures, bands: &[(usize, usize)]) -> Vec<usize> {
    // Lists are ascending: the last entry is the largest.
    band_needs_by(bands, |phase, p| ap.list(phase, p).last().copied())
}

/// [`band_needs`] from the largest entry `last(phase, p)` of each list (`None`: empty), e.g.
/// [`super::ApertureFill::last`] before the lists are filled.
pub fn band_needs_by(bands: &[(usize, usize)], last: impl Fn(usize, usize) -> Option<u32>) -> Vec<usize> {
    let mut need = 0usize;
    bands
        .iter()
        .map(|&(p0, p1)| {
            for phase in 0..3 {
                for p in p0..p1 {
                    if let Some(t) = last(phase, p) {
                        need = need.max(t as usize + 1);
                    }
                }
            }
            need
        })
        .collect()
}

/// Aperture offsets of each band as the kernels read them (3 x (band length + 1), phase-major, the
/// values positions in the whole index list, so the index list itself is shared), concatenated;
/// and where each band's offsets start.
pub fn band_offsets(ap: &Apertures, bands: &[(usize, usize)]) -> (Vec<u32>, Vec<usize>) {
    let mut off = Vec::with_capacity(3 * (ap.np + bands.len()));
    let mut start = Vec::with_capacity(bands.len());
    for &(p0, p1) in bands {
        start.push(off.len());
        for phase in 0..3 {
            let o = phase * (ap.np + 1);
            off.extend_from_slice(&ap.off[o + p0..=o + p1]);
        }
    }
    (off, start)
}

/// Where the time of the last pipelined [`FastEngine::estimate`] went (ms).
#[derive(Debug, Clone, Copy, Default)]
pub struct PipelineTimes {
    /// Host: the setup's first pass and band 0's aperture lists (all cores, before the staging: the
    /// first launch waits for them), the plan and the geometry uploads queued.
    pub setup_ms: f64,
    /// Host: the other bands' aperture lists (one thread, overlapping the staging and the kernels).
    pub fill_ms: f64,
    /// Host: staging every chunk (copy and finiteness check) and queueing uploads and launches.
    pub stage_ms: f64,
    /// Host: after the last band's results were in page-locked memory, until they were copied out.
    pub tail_ms: f64,
    /// Host: the whole call.
    pub wall_ms: f64,
    /// GPU events: start -> last chunk on the device.
    pub upload_ms: f64,
    /// GPU events: start -> first sliding scan starts (what the pipeline did not hide).
    pub lead_ms: f64,
    /// GPU events: first sliding scan starts -> last C scan done.
    pub kernels_ms: f64,
    /// GPU events: last C scan done -> last band's results in page-locked memory.
    pub download_ms: f64,
    pub bands: usize,
}

impl std::fmt::Display for PipelineTimes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} bands; GPU: first kernel starts at {:.1} ms, upload done at {:.1} ms, kernels {:.1} ms, last \
            download {:.2} ms; host: setup to band 0 ready {:.2} ms, other bands' lists {:.1} ms (overlapped), \
            staging+queueing {:.1} ms, copy-out tail {:.2} ms, wall {:.1} ms", self.bands, self.lead_ms, self.upload_ms,
            self.kernels_ms, self.download_ms, self.setup_ms, self.fill_ms, self.stage_ms, self.tail_ms, self.wall_ms)
    }
}

/// Streams, events and the band-offset buffer of the pipelined engine. The C-scan stream has the
/// highest priority: each band's C scan takes SMs as soon as its picks exist, so only the last
/// band's is left once the sliding scans end.
struct Pipe {
    up: Arc<CudaStream>,
    slide: Arc<CudaStream>,
    cscan: Arc<CudaStream>,
    /// Download of the first part of the last band's results ([`last_band_split`]).
    down: Arc<CudaStream>,
    /// That part's C scan done (C-scan stream) and its results in page-locked memory (download stream).
    part_done: CudaEvent,
    part_back: CudaEvent,
    /// Main-stream work before the call.
    ready: CudaEvent,
    chunk: Vec<CudaEvent>,
    /// A band's aperture lists on the device (upload stream).
    listed: Vec<CudaEvent>,
    slid: Vec<CudaEvent>,
    done: Vec<CudaEvent>,
    band_off: CudaSlice<u32>,
    /// Timing: start, last chunk uploaded, first sliding scan starts, last C scan done, downloads done.
    t: [CudaEvent; 5],
    host: PipelineTimes,
}

impl Pipe {
    fn new(gpu: &Gpu, np: usize) -> Result<Pipe> {
        let ctx = gpu.context();
        let sync = || ctx.new_event(None).map_err(drv("creating an event"));
        let timed = || ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT)).map_err(drv("creating an event"));
        let stream = || ctx.new_stream().map_err(drv("creating a stream"));
        let (_, highest) = cudarc::driver::result::stream::get_priority_range().unwrap_or((0, 0));
        let cscan = ctx.new_stream_with_priority(highest).map_err(drv("creating a stream"))?;
        Ok(Pipe {
            up: stream()?,
            slide: stream()?,
            cscan,
            down: stream()?,
            part_done: sync()?,
            part_back: sync()?,
            ready: sync()?,
            chunk: (0..PIPE_CHUNKS).map(|_| sync()).collect::<Result<_>>()?,
            listed: (0..MAX_BANDS).map(|_| sync()).collect::<Result<_>>()?,
            slid: (0..MAX_BANDS).map(|_| sync()).collect::<Result<_>>()?,
            done: (0..MAX_BANDS).map(|_| sync()).collect::<Result<_>>()?,
            band_off: gpu.zeros::<u32>(3 * (np + MAX_BANDS))?,
            t: [timed()?, timed()?, timed()?, timed()?, timed()?],
            host: PipelineTimes::default(),
        })
    }
}

/// Parameter traces of the first part of the last band's C scan (0: not split). Only the last
/// band's C scan runs after the sliding scans; in two launches (7/8, 1/8 of it) the first part's
/// download (~0.3 ms on the cross-spread) and copy-out (~0.5 ms) overlap the second part's compute,
/// so only 1/8 of them remains after the last kernel. Results do not depend on it.
pub fn last_band_split(npb: usize) -> usize {
    // From two parameter traces on (at least one in each part), so the small test workloads split too.
    if npb >= 2 { npb - (npb / 8).max(1) } else { 0 }
}

/// Raw device addresses the band launches use (ordered by the pipe's events, not by cudarc's
/// per-buffer tracking).
struct Ptrs {
    data: u64,
    tx: u64,
    ty: u64,
    px: u64,
    py: u64,
    idx: u64,
    vals: u64,
    picks: u64,
    pick_s: u64,
    code: u64,
    sem: u64,
    off: u64,
}

/// One gather's setup split into bands, with the launches queued so far.
struct Banded {
    /// The setup without its index list (`apertures.idx` empty: the lists go up band by band
    /// from the engine's page-locked `stage_idx`).
    setup: Setup,
    bands: Vec<(usize, usize)>,
    need: Vec<usize>,
    /// Kept alive until the end of the call: the source of an asynchronous copy.
    _off: Vec<u32>,
    off_start: Vec<usize>,
    ptrs: Ptrs,
    /// Bands whose aperture lists are queued for upload.
    listed: usize,
    next: usize,
}

impl Banded {
    /// Plans the kernels for `setup` (its offsets and bounds are final, its lists not yet filled),
    /// takes the bands' needs from the lists' last entries (`fill`), and queues the geometry
    /// uploads on the sliding-scan stream (ahead of its first launch).
    #[allow(clippy::too_many_arguments)]
    fn prepare(gpu: &Gpu, setup: Setup, fill: &ApertureFill, bands: Vec<(usize, usize)>, tuning: Tuning, plan: &mut FastPlan,
        bufs: &mut FastBuffers, pipe: &mut Pipe) -> Result<Banded> {
        *plan = FastPlan::tuned(gpu, &setup, tuning).map_err(NlbfError::Invalid)?;
        if setup.estimations() != bufs.code.len() || setup.ntr() != bufs.tx.len() || setup.np() != bufs.px.len()
            || setup.tables.vals.len() != bufs.vals.len() || setup.apertures.off.len() != bufs.ap_off.len() {
            return Err(NlbfError::Invalid("FastEngine: the gather's geometry differs from the engine's".into()));
        }
        let st = pipe.slide.clone();
        if fill.total() > bufs.ap_idx.len() {
            bufs.ap_idx = gpu.zeros::<u32>(fill.total())?;
            pipe.ready.record(gpu.stream()).map_err(drv("recording an event"))?;
            for s in [&pipe.up, &st] {
                s.wait(&pipe.ready).map_err(drv("ordering streams"))?;
            }
        }
        let need = band_needs_by(&bands, |phase, p| fill.last(phase, p));
        let (off, off_start) = band_offsets(&setup.apertures, &bands);
        let ptrs = Ptrs {
            data: dptr(&bufs.data, &st),
            tx: dptr_mut(&mut bufs.tx, &st),
            ty: dptr_mut(&mut bufs.ty, &st),
            px: dptr_mut(&mut bufs.px, &st),
            py: dptr_mut(&mut bufs.py, &st),
            idx: dptr_mut(&mut bufs.ap_idx, &st),
            vals: dptr_mut(&mut bufs.vals, &st),
            picks: dptr_mut(&mut bufs.picks, &st),
            pick_s: dptr_mut(&mut bufs.pick_s, &st),
            code: dptr_mut(&mut bufs.code, &st),
            sem: dptr_mut(&mut bufs.sem, &st),
            off: dptr_mut(&mut pipe.band_off, &st),
        };
        // Pageable sources: each call returns once the driver has staged them; they stay alive in
        // `setup` / `off` until the call ends anyway.
        unsafe {
            htod(&st, ptrs.tx, &setup.tx)?;
            htod(&st, ptrs.ty, &setup.ty)?;
            htod(&st, ptrs.px, &setup.px)?;
            htod(&st, ptrs.py, &setup.py)?;
            htod(&st, ptrs.vals, &setup.tables.vals)?;
            htod(&st, ptrs.off, &off)?;
        }
        Ok(Banded { setup, bands, need, _off: off, off_start, ptrs, listed: 0, next: 0 })
    }

    /// Queues the upload of band `b`'s aperture lists (`pieces[phase]`, page-locked, filled) to
    /// their place in the device's index list on the upload stream, with the band's event; bands
    /// come in order. The pieces must stay untouched until the call's streams are synchronized.
    fn queue_lists(&mut self, pipe: &Pipe, b: usize, pieces: &[&mut [u32]; 3]) -> Result<()> {
        if b != self.listed {
            return Err(NlbfError::Invalid(format!("FastEngine: aperture lists of band {b} came before band {}", self.listed)));
        }
        let (np, (p0, _)) = (self.setup.np(), self.bands[b]);
        for (phase, piece) in pieces.iter().enumerate() {
            if piece.is_empty() {
                continue;
            }
            let start = self.setup.apertures.off[phase * (np + 1) + p0] as u64;
            unsafe { htod(&pipe.up, self.ptrs.idx + 4 * start, &piece[..])? };
        }
        pipe.listed[b].record(&pipe.up).map_err(drv("recording an event"))?;
        self.listed += 1;
        Ok(())
    }

    /// Queues every band not yet launched whose aperture lists are queued and whose traces are among
    /// the first `uploaded` chunks (ending at traces `cend`, each with its event on the upload stream): its
    /// sliding scan after its lists and the chunk holding its last trace, its C scan and download
    /// after its sliding scan.
    #[allow(clippy::too_many_arguments)]
    fn launch_ready(&mut self, gpu: &Gpu, plan: &FastPlan, pipe: &Pipe, uploaded: usize, cend: &[usize], oc: &mut [u32],
        os: &mut [f32]) -> Result<()> {
        let ev = |e: &CudaEvent, s: &CudaStream| e.record(s).map_err(drv("recording an event"));
        let s = &self.setup;
        let t = &s.tables;
        let (ns, ns32) = (s.ns, s.ns as u32);
        let (na, nb, nc, nd, ne) = (t.na as u32, t.nb as u32, t.nc as u32, t.nd as u32, t.ne as u32);
        let q = &self.ptrs;
        // The first chunk that ends at or after the band's need.
        let chunk_of = |need: usize| cend.partition_point(|&e| e < need.max(1));
        while self.next < self.listed && chunk_of(self.need[self.next]) < uploaded {
            let b = self.next;
            let (p0, p1) = self.bands[b];
            let npb = (p1 - p0) as u32;
            let chunk = chunk_of(self.need[b]);
            pipe.slide.wait(&pipe.chunk[chunk]).map_err(drv("ordering streams"))?;
            pipe.slide.wait(&pipe.listed[b]).map_err(drv("ordering streams"))?;
            if b == 0 {
                ev(&pipe.t[2], &pipe.slide)?;
            }
            let (px, py) = (q.px + 4 * p0 as u64, q.py + 4 * p0 as u64);
            let (picks, pick_s) = (q.picks + 8 * (p0 * ns) as u64, q.pick_s + 8 * (p0 * ns) as u64);
            let off = q.off + 4 * self.off_start[b] as u64;
            let cfg = LaunchConfig { grid_dim: (npb * plan.nchunks, 2, 1), ..plan.slide_cfg };
            launch!(on pipe.slide, gpu, plan.slide_kernel, cfg, &ns32, &npb, &plan.nchunks, &s.inv_dt, &plan.smax,
                &plan.span, &plan.mmax, &q.data, &q.tx, &q.ty, &px, &py, &off, &q.idx, &q.vals, &na, &nb, &nc, &nd, &ne,
                &picks, &pick_s)?;
            ev(&pipe.slid[b], &pipe.slide)?;
            pipe.cscan.wait(&pipe.slid[b]).map_err(drv("ordering streams"))?;
            let off3 = off + 4 * 2 * (npb as u64 + 1);
            let last = b + 1 == self.bands.len();
            // The C scan in parts of the band's parameter traces [a, z) (band-local): one, or for the
            // last band two (see `last_band_split`), the first part's results downloaded on the
            // download stream while the second computes. A part's launch keeps the band's count as
            // `np` (the phase-2 picks lie np * ns after the phase-1 ones) and shifts its pointers.
            let split = if last { last_band_split(npb as usize) } else { 0 };
            let parts: &[(usize, usize)] = if split > 0 { &[(0, split), (split, npb as usize)] } else { &[(0, npb as usize)] };
            for (i, &(a, z)) in parts.iter().enumerate() {
                let pa = p0 + a;
                let (px, py, off3) = (q.px + 4 * pa as u64, q.py + 4 * pa as u64, off3 + 4 * a as u64);
                let picks = picks + 4 * (a * ns) as u64;
                let (code, sem) = (q.code + 4 * (pa * ns) as u64, q.sem + 4 * (pa * ns) as u64);
                let cfg = LaunchConfig { grid_dim: ((z - a) as u32 * plan.nchunks3, 1, 1), ..plan.cscan_cfg };
                let func = plan.cscan_function(gpu, &cfg)?;
                let mut l = pipe.cscan.launch_builder(&func);
                l.arg(&ns32).arg(&npb).arg(&plan.nchunks3).arg(&s.inv_dt).arg(&plan.smax3).arg(&plan.span3).arg(&q.data)
                    .arg(&q.tx).arg(&q.ty).arg(&px).arg(&py).arg(&off3).arg(&q.idx).arg(&q.vals).arg(&na).arg(&nb).arg(&nc)
                    .arg(&nd).arg(&ne).arg(&picks).arg(&code).arg(&sem);
                let r = unsafe { l.launch(cfg) };
                gpu.finish_launch(plan.cscan_kernel, &cfg, r.map(|_| ()))?;
                let (lo, hi) = (pa * ns, (p0 + z) * ns);
                if i + 1 < parts.len() {
                    // First part of a split band: its download on the download stream.
                    ev(&pipe.part_done, &pipe.cscan)?;
                    pipe.down.wait(&pipe.part_done).map_err(drv("ordering streams"))?;
                    unsafe {
                        dtoh(&pipe.down, &mut oc[lo..hi], code)?;
                        dtoh(&pipe.down, &mut os[lo..hi], sem)?;
                    }
                    ev(&pipe.part_back, &pipe.down)?;
                    continue;
                }
                if last {
                    ev(&pipe.t[3], &pipe.cscan)?;
                }
                unsafe {
                    dtoh(&pipe.cscan, &mut oc[lo..hi], code)?;
                    dtoh(&pipe.cscan, &mut os[lo..hi], sem)?;
                }
            }
            if split > 0 {
                // `done` (and the timing event) cover the whole band.
                pipe.cscan.wait(&pipe.part_back).map_err(drv("ordering streams"))?;
            }
            ev(&pipe.done[b], &pipe.cscan)?;
            if last {
                ev(&pipe.t[4], &pipe.cscan)?;
            }
            self.next += 1;
        }
        Ok(())
    }
}

// -------------------------------------------------------------------------------------------------
// Enhancement and NMO.
// -------------------------------------------------------------------------------------------------

const ENHANCE_BLOCK: u32 = 128;

/// Enhancement on the GPU (see `nlbf_enhance`); the same arithmetic as [`super::cpu::enhance`].
pub fn enhance(gpu: &Gpu, setup: &EnhanceSetup, est: &Estimate, data: &[f32]) -> Result<Vec<f32>> {
    let b = EnhanceBuffers::upload(gpu, setup, est, data)?;
    let mut out = gpu.zeros::<f32>(setup.outputs() * setup.ns)?;
    enhance_launch(gpu, setup, est, &b, &mut out)?;
    Ok(gpu.download(&out)?)
}

/// Device copies of what the enhancement reads.
pub struct EnhanceBuffers {
    pub data: CudaSlice<f32>,
    pub tx: CudaSlice<f32>,
    pub ty: CudaSlice<f32>,
    pub nb_off: CudaSlice<u32>,
    pub nb_idx: CudaSlice<u32>,
    pub code: CudaSlice<u32>,
    pub vals: CudaSlice<f32>,
}

impl EnhanceBuffers {
    pub fn upload(gpu: &Gpu, setup: &EnhanceSetup, est: &Estimate, data: &[f32]) -> Result<EnhanceBuffers> {
        gpu.ensure_fits("the enhancement's buffers", data.len() * 8 + setup.nb_idx.len() * 4 + est.code.len() * 4)?;
        Ok(EnhanceBuffers {
            data: gpu.upload(data)?,
            tx: gpu.upload(&setup.tx)?,
            ty: gpu.upload(&setup.ty)?,
            nb_off: gpu.upload(&setup.nb_off)?,
            nb_idx: gpu.upload(&setup.nb_idx)?,
            code: gpu.upload(&est.code)?,
            vals: gpu.upload(&est.tables.vals)?,
        })
    }
}

/// The enhancement launch alone.
pub fn enhance_launch(gpu: &Gpu, setup: &EnhanceSetup, est: &Estimate, b: &EnhanceBuffers, out: &mut CudaSlice<f32>)
    -> Result<()> {
    let ns = setup.ns as u32;
    let ntr = setup.outputs() as u64;
    let tchunks = ns.div_ceil(ENHANCE_BLOCK);
    if ntr * tchunks as u64 >= i32::MAX as u64 {
        return Err(NlbfError::Invalid("too many traces for one enhancement launch".into()));
    }
    let cfg = LaunchConfig { grid_dim: ((ntr * tchunks as u64) as u32, 1, 1), block_dim: (ENHANCE_BLOCK, 1, 1),
        shared_mem_bytes: 0 };
    let t = &est.tables;
    let (na, nb, nc, nd, ne) = (t.na as u32, t.nb as u32, t.nc as u32, t.nd as u32, t.ne as u32);
    let (gnx, gny) = (est.grid.nx as u32, est.grid.ny as u32);
    let (isx, isy) = ((1.0 / est.grid.sx) as f32, (1.0 / est.grid.sy) as f32);
    launch!(gpu, "nlbf_enhance", cfg, &ns, &tchunks, &setup.inv_dt, &b.data, &b.tx, &b.ty, &b.nb_off, &b.nb_idx, &gnx,
        &gny, &isx, &isy, &b.code, &b.vals, &na, &nb, &nc, &nd, &ne, out)?;
    Ok(())
}

/// NMO with a stretch mute on the GPU (see `nlbf_nmo`); the same arithmetic as the CPU's.
#[allow(clippy::too_many_arguments)]
pub fn nmo(gpu: &Gpu, data: &[f32], ns: usize, dt: f32, t_first: f32, offsets: &[f32], vrms: &[f32], max_stretch: f32)
    -> Result<Vec<f32>> {
    gpu.ensure_fits("NMO buffers", data.len() * 8)?;
    let d = gpu.upload(data)?;
    let off = gpu.upload(offsets)?;
    let v = gpu.upload(vrms)?;
    let mut out = gpu.zeros::<f32>(data.len())?;
    let ns32 = ns as u32;
    let tchunks = ns32.div_ceil(128);
    let ntr = (data.len() / ns.max(1)) as u64;
    if ntr * tchunks as u64 >= i32::MAX as u64 {
        return Err(NlbfError::Invalid("too many traces for one NMO launch".into()));
    }
    let cfg = LaunchConfig { grid_dim: ((ntr * tchunks as u64).max(1) as u32, 1, 1), block_dim: (128, 1, 1), shared_mem_bytes: 0 };
    launch!(gpu, "nlbf_nmo", cfg, &ns32, &tchunks, &dt, &t_first, &max_stretch, &d, &off, &v, &mut out)?;
    Ok(gpu.download(&out)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::BenchSize;
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
            for name in [k::cscan_kernel_name(5, g), k::cscan_deep_kernel_name(5, g)].into_iter().flatten() {
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
        let (t, p) = synth::crossspread_3d(BenchSize::Small);
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
