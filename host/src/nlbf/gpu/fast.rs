//! The fast search: launch shapes of the sliding and C-scan kernels, their tunings, and the
//! search on a gather kept resident across the work items of a multi-device search.

use super::*;

/// Launch shapes of the fast kernels for one setup.
#[derive(Debug, Clone)]
pub struct FastPlan {
    pub slide_kernel: k::kernels::SlideKernel,
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
    pub cscan_kernel: k::kernels::CscanKernel,
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
        let valid = |&(l, g): &(u32, u32)| k::slide_kernel_g(l, h, g).is_some() && (g == 1 || slide_span(g) < 0.99);
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
        let slide_kernel = k::slide_kernel_g(l, h, sg).unwrap();
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
            Some(g) if span_of(g) < 0.99 && k::cscan_kernel(h, g).is_some() => g,
            Some(g) => return Err(format!("C-scan group {g} does not apply (span {:.2} samples or no kernel)", span_of(g))),
            None => CSCAN_PREFERENCE.iter().copied().filter(|&g| k::cscan_kernel(h, g).is_some() && span_of(g) < 0.99)
                .next().ok_or_else(|| format!("no C-scan kernel for half window {h}"))?,
        };
        // The default's deep kernels exist for the paper's 11-sample window (H = 5) only; other
        // windows take the base kernel unless a variant was asked for (then: an error below).
        let cscan_variant = match tune.cscan {
            Some(v) => v,
            None if CSCAN_DEFAULT.deep && k::cscan_deep_kernel(h, group).is_none() => CscanVariant { deep: false, max_regs: 0 },
            None => CSCAN_DEFAULT,
        };
        let cscan_kernel = if cscan_variant.deep {
            k::cscan_deep_kernel(h, group)
                .ok_or_else(|| format!("no deep-staging C-scan kernel for half window {h} and group {group}"))?
        } else {
            k::cscan_kernel(h, group).unwrap()
        };
        let groups = (t.nc as u32).div_ceil(group);
        let threads3 = k::CSCAN_TIMES * groups;
        let cap = max_threads(gpu, cscan_kernel.name()).map_err(|e| e.to_string())?;
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
        launch!(gpu, self.cscan_kernel => &func, cfg, &ns, &np, &self.nchunks3, &setup.inv_dt, &self.smax3, &self.span3, &b.data,
            &b.tx, &b.ty, &b.px, &b.py, &off3, &b.ap_idx, &b.vals, &na, &nb, &nc, &nd, &ne, &b.picks, &mut b.code, &mut b.sem)?;
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
            0 => Ok(gpu.prepare_launch(self.cscan_kernel.name(), cfg)?),
            r => Ok(capped_kernel(gpu, self.cscan_kernel.name(), r, cfg)?),
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
/// work items of a multi-device search (`crate::nlbf::estimate_split`), with the items' buffers
/// (parameter traces, apertures, picks, results), allocated with the first item and grown only
/// when an item needs more: an item allocates, zeroes and frees nothing.
pub struct Resident {
    pub(super) bufs: FastBuffers,
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
pub(super) fn grow<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(gpu: &Gpu, buf: &mut CudaSlice<T>, len: usize)
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
    /// Staging and register cap of the C-scan kernel (every variant computes the same bits); `None` =
    /// [`CSCAN_DEFAULT`], or the base kernel for windows without a deep kernel.
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
