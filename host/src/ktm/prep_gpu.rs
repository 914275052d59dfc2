//! [`super::prep::prepare`] on the GPU: traces up in plan order, the rho filter by batched cuFFT
//! (forward, multiply by the shared response, inverse), then the pair layout (plain, or the
//! anti-aliasing double integration in f64), and the pairs back into a [`Prepared`]. Kernels in
//! `gpu_kernels::ktm::prep`. Traces go through in chunks so the FFT buffers stay bounded.

use std::sync::Arc;

use anyhow::Context;

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
    let pad = plan.consts.pad as usize;
    let ns = traces.ns;
    let rho = params.rho_filter.then(|| RhoFilter::new(ns, traces.dt));
    // Without the filter no FFT runs: rows only need the trace itself.
    let nfft = rho.as_ref().map_or(ns, |r| r.response().0);
    let h = match &rho {
        Some(r) => Some(gpu.upload(&r.response().1.iter().flat_map(|c| [c.re, c.im]).collect::<Vec<f32>>())?),
        None => None,
    };
    let mut pairs = vec![[0.0f32; 2]; plan.ntraces() * stride];
    let (ns32, nfft32, pad32, stride32) = (ns as u32, nfft as u32, pad as u32, stride as u32);
    for (c, out) in pairs.chunks_mut(CHUNK_TRACES * stride).enumerate() {
        let first = c * CHUNK_TRACES;
        let ntr = out.len() / stride;
        // Rows of nfft samples, zero padded, in plan order.
        let mut rows = vec![0.0f32; ntr * nfft];
        for (r, row) in rows.chunks_mut(nfft).enumerate() {
            row[..ns].copy_from_slice(traces.trace(plan.order[first + r]));
        }
        let real = gpu.upload(&rows)?;
        drop(rows);
        let mut data = gpu.zeros::<f32>(2 * ntr * nfft)?;
        let n = (ntr * nfft) as u32;
        launch!(gpu, "srm_real_to_complex", grid_1d(ntr * nfft, 256), &n, &real, &mut data)?;
        drop(real);
        if let Some(h) = &h {
            let fft = FftPlan::c2c_batched(gpu.stream(), &[nfft], ntr).context("rho filter FFT plan")?;
            fft.exec_inplace(&mut data, false)?;
            launch!(gpu, "ktm_rho_multiply", grid_1d(ntr * nfft, 256), &n, &nfft32, h, &mut data)?;
            fft.exec_inplace(&mut data, true)?;
        }
        let mut d_pairs = gpu.zeros::<f32>(2 * ntr * stride)?;
        if plan.antialias {
            let mut work = gpu.zeros::<f64>(ntr * (stride + 1))?;
            let ntr32 = ntr as u32;
            launch!(gpu, "ktm_pairs_integrated", grid_1d(ntr, 64), &ntr32, &ns32, &nfft32, &pad32, &stride32, &data, &mut work,
                &mut d_pairs)?;
        } else {
            let np = (ntr * stride) as u32;
            launch!(gpu, "ktm_pairs_plain", grid_1d(ntr * stride, 256), &np, &ns32, &nfft32, &pad32, &stride32, &data,
                &mut d_pairs)?;
        }
        let host = gpu.download(&d_pairs)?;
        for (o, v) in out.iter_mut().zip(host.chunks_exact(2)) {
            *o = [v[0], v[1]];
        }
    }
    Ok(Prepared { pairs })
}
