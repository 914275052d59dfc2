//! [`super::prep::prepare`] on the GPU: traces up in plan order, the rho filter by batched cuFFT
//! (forward, multiply by the shared response, inverse), then the pair layout (plain, or the
//! anti-aliasing double integration in f64), and the pairs back into a [`Prepared`]. Kernels in
//! `gpu_kernels::ktm::prep`. Traces go through in chunks so the FFT buffers stay bounded.
//! [`prepare_resident`] and [`finish_adjoint_resident`] do the same, and modelling's adjoint, for
//! traces that are already on the GPU (the device-resident Kirchhoff entries, `ktm::resident`).

use std::sync::Arc;

use anyhow::Context;
use cudarc::driver::{CudaSlice, CudaView, CudaViewMut};
use gpu_kernels::ktm::prep as k;

use super::prep::{Prepared, RhoFilter};
use super::{Params, Plan};
use crate::launch;
use crate::runtime::launch::grid_1d;
use crate::runtime::fft::FftPlan;
use crate::runtime::Gpu;
use crate::traces::TraceSet;

/// Traces per chunk: 16384 traces of a 2048-point FFT are 256 MiB of complex data.
const CHUNK_TRACES: usize = 16384;

/// The pairs of every trace that takes part (plan order), as [`super::prep::prepare`] makes them.
pub fn prepare(gpu: &Arc<Gpu>, traces: &TraceSet, plan: &Plan, params: &Params) -> anyhow::Result<Prepared> {
    let stride = plan.stride();
    let ns = traces.ns;
    let mut pairs = vec![[0.0f32; 2]; plan.ntraces() * stride];
    let rows_of = |first: usize, ntr: usize, nfft: usize| -> anyhow::Result<CudaSlice<f32>> {
        // Rows of nfft samples, zero padded, in plan order.
        let mut rows = vec![0.0f32; ntr * nfft];
        for (r, row) in rows.chunks_mut(nfft).enumerate() {
            row[..ns].copy_from_slice(traces.trace(plan.order[first + r]));
        }
        let real = gpu.upload(&rows)?;
        drop(rows);
        let mut data = gpu.zeros::<f32>(2 * ntr * nfft)?;
        let n = (ntr * nfft) as u32;
        launch!(gpu, gpu_kernels::srm::kernels::SRM_REAL_TO_COMPLEX, grid_1d(ntr * nfft, 256), &n, &real, &mut data)?;
        Ok(data)
    };
    prepare_chunks(gpu, plan, params, ns, traces.dt, rows_of, |first, d_pairs| {
        let host = gpu.download(d_pairs)?;
        let out = &mut pairs[first * stride..first * stride + d_pairs.len() / 2];
        for (o, v) in out.iter_mut().zip(host.chunks_exact(2)) {
            *o = [v[0], v[1]];
        }
        Ok(())
    })?;
    Ok(Prepared { pairs })
}

/// [`prepare`] of traces already on the GPU (`traces`: [traces, ns], input order): the pairs stay
/// there, `2 * stride` floats per plan position. The same kernels and chunks as [`prepare`], so
/// the same pairs.
pub fn prepare_resident(gpu: &Arc<Gpu>, traces: &CudaView<f32>, ns: usize, dt: f32, plan: &Plan, params: &Params)
    -> anyhow::Result<CudaSlice<f32>> {
    let stride = plan.stride();
    let order: Vec<u32> = plan.order.iter().map(|&i| i as u32).collect();
    let d_order = gpu.upload(&order)?;
    let mut pairs = gpu.zeros::<f32>(2 * plan.ntraces() * stride)?;
    let rows_of = |first: usize, ntr: usize, nfft: usize| -> anyhow::Result<CudaSlice<f32>> {
        let mut data = gpu.zeros::<f32>(2 * ntr * nfft)?;
        let (n, ns32, nfft32) = ((ntr * nfft) as u32, ns as u32, nfft as u32);
        let order = d_order.slice(first..first + ntr);
        launch!(gpu, k::KTM_ROWS_GATHER, grid_1d(ntr * nfft, 256), &n, &ns32, &nfft32, &order, traces, &mut data)?;
        Ok(data)
    };
    prepare_chunks(gpu, plan, params, ns, dt, rows_of, |first, d_pairs| {
        let at = 2 * first * stride;
        gpu.stream()
            .memcpy_dtod(d_pairs, &mut pairs.slice_mut(at..at + d_pairs.len()))
            .map_err(crate::runtime::GpuError::driver("gathering the prepared traces"))?;
        Ok(())
    })?;
    Ok(pairs)
}

/// The preparation in chunks of [`CHUNK_TRACES`] plan positions: `rows_of(first, traces, nfft)`
/// gives the chunk's complex rows (nfft long, zero padded), the rho filter runs on them, and
/// `sink(first, pairs)` takes the chunk's pairs.
fn prepare_chunks(gpu: &Arc<Gpu>, plan: &Plan, params: &Params, ns: usize, dt: f32,
    mut rows_of: impl FnMut(usize, usize, usize) -> anyhow::Result<CudaSlice<f32>>,
    mut sink: impl FnMut(usize, &CudaSlice<f32>) -> anyhow::Result<()>) -> anyhow::Result<()> {
    let stride = plan.stride();
    let pad = plan.consts.pad as usize;
    let rho = params.rho_filter.then(|| RhoFilter::new(ns, dt));
    // Without the filter no FFT runs: rows only need the trace itself.
    let nfft = rho.as_ref().map_or(ns, |r| r.response().0);
    let h = match &rho {
        Some(r) => Some(gpu.upload(&r.response().1.iter().flat_map(|c| [c.re, c.im]).collect::<Vec<f32>>())?),
        None => None,
    };
    let (ns32, nfft32, pad32, stride32) = (ns as u32, nfft as u32, pad as u32, stride as u32);
    let mut first = 0;
    while first < plan.ntraces() {
        let ntr = CHUNK_TRACES.min(plan.ntraces() - first);
        let mut data = rows_of(first, ntr, nfft)?;
        let n = (ntr * nfft) as u32;
        if let Some(h) = &h {
            let fft = FftPlan::c2c_batched(gpu.stream(), &[nfft], ntr).context("rho filter FFT plan")?;
            fft.exec_inplace(&mut data, false)?;
            launch!(gpu, k::KTM_RHO_MULTIPLY, grid_1d(ntr * nfft, 256), &n, &nfft32, h, &mut data)?;
            fft.exec_inplace(&mut data, true)?;
        }
        let mut d_pairs = gpu.zeros::<f32>(2 * ntr * stride)?;
        if plan.antialias {
            let mut work = gpu.zeros::<f64>(ntr * (stride + 1))?;
            let ntr32 = ntr as u32;
            launch!(gpu, k::KTM_PAIRS_INTEGRATED, grid_1d(ntr, 64), &ntr32, &ns32, &nfft32, &pad32, &stride32, &data, &mut work,
                &mut d_pairs)?;
        } else {
            let np = (ntr * stride) as u32;
            launch!(gpu, k::KTM_PAIRS_PLAIN, grid_1d(ntr * stride, 256), &np, &ns32, &nfft32, &pad32, &stride32, &data,
                &mut d_pairs)?;
        }
        sink(first, &d_pairs)?;
        first += ntr;
    }
    Ok(())
}

/// The adjoint of [`prepare_resident`] for modelling on the GPU (CPU: [`super::prep::finish_adjoint`]):
/// `padded` holds `stride + 1` accumulated values per plan position; the traces are written into
/// `out` ([traces, ns], input order; traces in no offset class are left as they are).
pub fn finish_adjoint_resident(gpu: &Arc<Gpu>, padded: &CudaView<f32>, plan: &Plan, params: &Params, ns: usize, dt: f32,
    out: &mut CudaViewMut<f32>) -> anyhow::Result<()> {
    let stride = plan.stride();
    let pad = plan.consts.pad as usize;
    let rho = params.rho_filter.then(|| RhoFilter::new(ns, dt));
    let nfft = rho.as_ref().map_or(ns, |r| r.response().0);
    // The adjoint filter: the conjugate response.
    let h = match &rho {
        Some(r) => Some(gpu.upload(&r.response().1.iter().flat_map(|c| [c.re, -c.im]).collect::<Vec<f32>>())?),
        None => None,
    };
    let order: Vec<u32> = plan.order.iter().map(|&i| i as u32).collect();
    let d_order = gpu.upload(&order)?;
    let (ns32, nfft32, pad32, stride32) = (ns as u32, nfft as u32, pad as u32, stride as u32);
    let mut first = 0;
    while first < plan.ntraces() {
        let ntr = CHUNK_TRACES.min(plan.ntraces() - first);
        let acc = padded.slice(first * (stride + 1)..(first + ntr) * (stride + 1));
        let mut data = gpu.zeros::<f32>(2 * ntr * nfft)?;
        let n = (ntr * nfft) as u32;
        if plan.antialias {
            let mut work = gpu.zeros::<f64>(ntr * (stride + 1))?;
            let ntr32 = ntr as u32;
            launch!(gpu, k::KTM_ADJOINT_ROWS_INTEGRATED, grid_1d(ntr, 64), &ntr32, &ns32, &nfft32, &pad32, &stride32, &acc, &mut work,
                &mut data)?;
        } else {
            launch!(gpu, k::KTM_ADJOINT_ROWS_PLAIN, grid_1d(ntr * nfft, 256), &n, &ns32, &nfft32, &pad32, &stride32, &acc, &mut data)?;
        }
        if let Some(h) = &h {
            let fft = FftPlan::c2c_batched(gpu.stream(), &[nfft], ntr).context("rho filter FFT plan")?;
            fft.exec_inplace(&mut data, false)?;
            launch!(gpu, k::KTM_RHO_MULTIPLY, grid_1d(ntr * nfft, 256), &n, &nfft32, h, &mut data)?;
            fft.exec_inplace(&mut data, true)?;
        }
        let nt = (ntr * ns) as u32;
        let order = d_order.slice(first..first + ntr);
        launch!(gpu, k::KTM_ROWS_SCATTER, grid_1d(ntr * ns, 256), &nt, &ns32, &nfft32, &order, &data, &mut *out)?;
        first += ntr;
    }
    Ok(())
}
