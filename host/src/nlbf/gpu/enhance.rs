//! The enhancement and NMO on the GPU.

use super::*;

pub(super) const ENHANCE_BLOCK: u32 = 128;

/// Enhancement on the GPU (see `nlbf_enhance`); the same arithmetic as [`crate::nlbf::cpu::enhance`].
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
    launch!(gpu, k::kernels::NLBF_ENHANCE, cfg, &ns, &tchunks, &setup.inv_dt, &b.data, &b.tx, &b.ty, &b.nb_off, &b.nb_idx, &gnx,
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
    launch!(gpu, k::kernels::NLBF_NMO, cfg, &ns32, &tchunks, &dt, &t_first, &max_stretch, &d, &off, &v, &mut out)?;
    Ok(gpu.download(&out)?)
}
