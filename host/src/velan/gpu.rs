//! GPU driver of the semblance scan: the gathers resident on the device, one launch of
//! `velan_semblance` per batch of gathers (at most 65535, and an output buffer of bounded size),
//! each batch's panels downloaded while the host keeps them in gather order.

use anyhow::Result;

use super::{Gathers, Scan};
use crate::launch;
use crate::runtime::error::GpuResult;
use crate::runtime::{CudaSlice, CudaViewMut, Gpu, LaunchConfig};
use gpu_kernels::velan as k;

/// Dynamic shared memory of one block: the staging buffer and the per-trace span tables, laid
/// out as the kernel carves them (16-byte aligned pieces).
pub const SHARED_BYTES: u32 = k::STAGE_FLOATS * 4 + 4 * k::STAGE_TRACES * 4 + 16;

/// Largest output of one launch (floats): 256 MiB.
const BATCH_FLOATS: usize = 1 << 26;

/// The gathers and the scan tables on the device.
pub struct Resident {
    pub data: CudaSlice<f32>,
    pub trace0: CudaSlice<u32>,
    pub x2: CudaSlice<f32>,
    pub s2: CudaSlice<f32>,
    pub v2: CudaSlice<f32>,
}

impl Resident {
    pub fn upload(gpu: &Gpu, g: &Gathers, s: &Scan) -> Result<Resident> {
        if g.ns >= (1 << 24) || g.ns == 0 {
            crate::bail_input!("velan on the GPU: {} samples per trace (1 to 2^24 allowed)", g.ns);
        }
        gpu.ensure_fits("the velan gathers", g.data.len() * 4 + g.x2.len() * 4 + g.trace0.len() * 4)?;
        Ok(Resident { data: gpu.upload(&g.data)?, trace0: gpu.upload(&g.trace0)?, x2: gpu.upload(&g.x2)?, s2: gpu.upload(&s.s2)?,
            v2: gpu.upload(&s.v2)? })
    }
}

/// Gathers per launch for `nv` velocities of `ns` samples.
pub fn batch_gathers(nv: usize, ns: usize) -> usize { (BATCH_FLOATS / (nv * ns).max(1)).clamp(1, 65_535) }

/// The launch shape for `nb` gathers.
pub fn config(s: &Scan, ns: usize, nb: usize) -> (LaunchConfig, u32) {
    let n_ttiles = (ns as u32).div_ceil(k::outputs_per_tile(s.half));
    let n_vtiles = (s.nv() as u32).div_ceil(k::VEL_PER_THREAD);
    let cfg = LaunchConfig { grid_dim: (n_ttiles * n_vtiles, nb as u32, 1), block_dim: (k::TILE_T, 1, 1), shared_mem_bytes: SHARED_BYTES };
    (cfg, n_ttiles)
}

/// Launches the panels of gathers `gathers` into `out` (`[(g - start) * nv + v] * ns + t0`).
pub fn launch_batch(gpu: &Gpu, r: &Resident, g: &Gathers, s: &Scan, gathers: std::ops::Range<usize>, out: &mut CudaViewMut<'_, f32>)
    -> GpuResult<()> {
    let nb = gathers.len();
    if nb == 0 {
        return Ok(());
    }
    let (cfg, n_ttiles) = config(s, g.ns, nb);
    let (ns, nv, h, dt, t_first) = (g.ns as u32, s.nv() as u32, s.half, g.dt, g.t_first);
    let (inv_dt, eta, max_stretch, gather0) = (s.inv_dt, s.eta, s.max_stretch, gathers.start as u32);
    launch!(gpu, k::kernels::VELAN_SEMBLANCE, cfg, &ns, &nv, &h, &n_ttiles, &dt, &t_first, &inv_dt, &eta, &max_stretch, &r.data, &r.trace0,
        &r.x2, &r.s2, &r.v2, &gather0, out)
}

/// Every gather's panel into one device buffer of `gathers * nv * ns` floats.
pub fn launch_all(gpu: &Gpu, r: &Resident, g: &Gathers, s: &Scan, out: &mut CudaSlice<f32>) -> GpuResult<()> {
    let per = s.nv() * g.ns;
    let step = batch_gathers(s.nv(), g.ns);
    let mut a = 0;
    while a < g.len() {
        let b = (a + step).min(g.len());
        launch_batch(gpu, r, g, s, a..b, &mut out.slice_mut(a * per..b * per))?;
        a = b;
    }
    Ok(())
}

/// The panels of every gather, `[(g * nv + v) * ns + t0]`, through a batch buffer.
pub fn semblance(gpu: &Gpu, g: &Gathers, s: &Scan) -> Result<Vec<f32>> {
    let r = Resident::upload(gpu, g, s)?;
    let per = s.nv() * g.ns;
    let step = batch_gathers(s.nv(), g.ns);
    let mut buf = gpu.zeros::<f32>(step.min(g.len()) * per)?;
    let mut out = vec![0f32; g.len() * per];
    let mut a = 0;
    while a < g.len() {
        let b = (a + step).min(g.len());
        let n = (b - a) * per;
        launch_batch(gpu, &r, g, s, a..b, &mut buf.slice_mut(0..n))?;
        gpu.stream()
            .memcpy_dtoh(&buf.slice(0..n), &mut out[a * per..b * per])
            .map_err(crate::runtime::GpuError::driver("downloading semblance panels"))?;
        a = b;
    }
    Ok(out)
}
