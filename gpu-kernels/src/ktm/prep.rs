//! Trace preprocessing on the GPU (host side: `seisgpu_host::ktm::prep_gpu`): the rho filter's
//! spectral multiply between two batched cuFFTs, and the kernels' pair layout, plain or after the
//! anti-aliasing double integration. The same steps as the CPU's `ktm::prep`, in the same order
//! and precision (the integration in f64), so CPU and GPU pairs differ only by the FFTs' rounding.
//!
//! Complex data is interleaved (re, im) f32, one `nfft`-long row per trace (plan order).

#[cfg(target_arch = "nvptx64")]
use crate::device::*;

crate::kernel! {
/// `data[i] *= h[i % nfft]` (complex) for `i < n` (n = traces * nfft): the rho filter's response,
/// with the inverse FFT's 1/nfft folded in (as on the CPU).
pub unsafe fn ktm_rho_multiply(n: u32, nfft: u32, h: *const f32, data: *mut f32) as KTM_RHO_MULTIPLY {
    let i = global_x();
    if i < n {
        let k = (i % nonzero(nfft)) as usize;
        let i = i as usize;
        unsafe {
            let (hr, hi) = (*h.add(2 * k), *h.add(2 * k + 1));
            let (dr, di) = (*data.add(2 * i), *data.add(2 * i + 1));
            *data.add(2 * i) = dr * hr - di * hi;
            *data.add(2 * i + 1) = dr * hi + di * hr;
        }
    }
}
}

/// Sample `j` of trace row `p` (the real part), zero outside `0..ns`.
#[cfg(target_arch = "nvptx64")]
#[inline(always)]
unsafe fn sample(data: *const f32, p: u32, nfft: u32, ns: u32, j: i64) -> f32 {
    if j >= 0 && j < ns as i64 { unsafe { *data.add(2 * (p as usize * nfft as usize + j as usize)) } } else { 0.0 }
}

crate::kernel! {
/// Plain pairs `(D[k], D[k+1] - D[k])` of the zero-padded trace `D[pad + j] = d[j]`, `stride`
/// pairs per trace: one thread per (trace, pair), `n = traces * stride`.
pub unsafe fn ktm_pairs_plain(n: u32, ns: u32, nfft: u32, pad: u32, stride: u32, data: *const f32,
    out: *mut f32) as KTM_PAIRS_PLAIN {
    let i = global_x();
    if i < n {
        let stride = nonzero(stride);
        let (p, k) = (i / stride, (i % stride) as i64);
        unsafe {
            let a = sample(data, p, nfft, ns, k - pad as i64);
            let b = sample(data, p, nfft, ns, k + 1 - pad as i64);
            *out.add(2 * i as usize) = a;
            *out.add(2 * i as usize + 1) = b - a;
        }
    }
}
}

crate::kernel! {
/// The anti-aliasing layout (CPU: `ktm::prep::integrate`): causal then anticausal running sums of
/// the padded trace in f64, minus their least-squares line, as pairs. One thread per trace (the
/// sums are sequential); `work` holds `stride + 1` f64 per trace.
pub unsafe fn ktm_pairs_integrated(ntr: u32, ns: u32, nfft: u32, pad: u32, stride: u32,
    data: *const f32, work: *mut f64, out: *mut f32) as KTM_PAIRS_INTEGRATED {
    let p = global_x();
    if p >= ntr {
        return;
    }
    let len = stride as usize + 1;
    unsafe {
        let c = work.add(p as usize * len);
        let mut acc = 0.0f64;
        for k in 0..len {
            acc += sample(data, p, nfft, ns, k as i64 - pad as i64) as f64;
            *c.add(k) = acc;
        }
        let mut acc = 0.0f64;
        for k in (0..len).rev() {
            acc += *c.add(k);
            *c.add(k) = acc;
        }
        // Detrend (CPU: `ktm::prep::detrend`).
        let nf = len as f64;
        let kmean = (nf - 1.0) / 2.0;
        let mut sum = 0.0f64;
        for k in 0..len {
            sum += *c.add(k);
        }
        let mean = sum / nf;
        let (mut num, mut den) = (0.0f64, 0.0f64);
        for k in 0..len {
            let x = k as f64 - kmean;
            num += x * *c.add(k);
            den += x * x;
        }
        let slope = if den > 0.0 { num / den } else { 0.0 };
        let o = out.add(2 * p as usize * stride as usize);
        let mut prev = (*c - (mean + slope * (0.0 - kmean))) as f32;
        for k in 0..stride as usize {
            let next = (*c.add(k + 1) - (mean + slope * ((k + 1) as f64 - kmean))) as f32;
            *o.add(2 * k) = prev;
            *o.add(2 * k + 1) = next - prev;
            prev = next;
        }
    }
}
}

crate::kernel! {
/// Rows of traces that are already on the GPU (the device-resident migration): row `p` is trace
/// `order[p]` of `traces` ([traces, ns]) as complex (re = sample, im = 0), zero padded to `nfft`;
/// what the host builds and `srm_real_to_complex` widens in `prep_gpu::prepare`, so the pairs are
/// the same. One thread per (row, sample), `n = rows * nfft`.
pub unsafe fn ktm_rows_gather(n: u32, ns: u32, nfft: u32, order: *const u32, traces: *const f32, out: *mut f32) as KTM_ROWS_GATHER {
    let i = global_x();
    if i < n {
        let (p, j) = (i / nonzero(nfft), i % nonzero(nfft));
        unsafe {
            let v = if j < ns { *traces.add(*order.add(p as usize) as usize * ns as usize + j as usize) } else { 0.0 };
            *out.add(2 * i as usize) = v;
            *out.add(2 * i as usize + 1) = 0.0;
        }
    }
}
}

crate::kernel! {
/// The adjoint of the plain layout for modelling (CPU: `ktm::prep::finish_adjoint`): sample `j` of
/// row `p` is the accumulator `acc[p * (stride + 1) + pad + j]` for `j < ns`, zero up to `nfft`
/// (complex, im = 0). One thread per (row, sample), `n = rows * nfft`.
pub unsafe fn ktm_adjoint_rows_plain(n: u32, ns: u32, nfft: u32, pad: u32, stride: u32, acc: *const f32,
    out: *mut f32) as KTM_ADJOINT_ROWS_PLAIN {
    let i = global_x();
    if i < n {
        let (p, j) = (i / nonzero(nfft), i % nonzero(nfft));
        unsafe {
            let v = if j < ns { *acc.add(p as usize * (stride as usize + 1) + (pad + j) as usize) } else { 0.0 };
            *out.add(2 * i as usize) = v;
            *out.add(2 * i as usize + 1) = 0.0;
        }
    }
}
}

crate::kernel! {
/// The adjoint of the anti-aliasing layout (CPU: `ktm::prep::integrate_adjoint`): the `stride + 1`
/// accumulators in f64, detrended, summed causally then anticausally, cropped to `ns` samples from
/// `pad` into a complex row of `nfft` (zero padded). One thread per trace (the sums are
/// sequential); `work` holds `stride + 1` f64 per trace.
pub unsafe fn ktm_adjoint_rows_integrated(ntr: u32, ns: u32, nfft: u32, pad: u32, stride: u32,
    acc: *const f32, work: *mut f64, out: *mut f32) as KTM_ADJOINT_ROWS_INTEGRATED {
    let p = global_x();
    if p >= ntr {
        return;
    }
    let len = stride as usize + 1;
    unsafe {
        let a = acc.add(p as usize * len);
        let c = work.add(p as usize * len);
        // Detrend first (CPU: `ktm::prep::detrend`, same order of operations).
        let nf = len as f64;
        let kmean = (nf - 1.0) / 2.0;
        let mut sum = 0.0f64;
        for k in 0..len {
            sum += *a.add(k) as f64;
        }
        let mean = sum / nf;
        let (mut num, mut den) = (0.0f64, 0.0f64);
        for k in 0..len {
            let x = k as f64 - kmean;
            num += x * *a.add(k) as f64;
            den += x * x;
        }
        let slope = if den > 0.0 { num / den } else { 0.0 };
        let mut s = 0.0f64;
        for k in 0..len {
            s += *a.add(k) as f64 - (mean + slope * (k as f64 - kmean));
            *c.add(k) = s;
        }
        let mut s = 0.0f64;
        for k in (0..len).rev() {
            s += *c.add(k);
            *c.add(k) = s;
        }
        let row = out.add(2 * p as usize * nfft as usize);
        for j in 0..nfft as usize {
            *row.add(2 * j) = if j < ns as usize { *c.add(pad as usize + j) as f32 } else { 0.0 };
            *row.add(2 * j + 1) = 0.0;
        }
    }
}
}

crate::kernel! {
/// Modelled traces out of their rows: `traces[order[p] * ns + j] = re(rows[p * nfft + j])`, the
/// traces in input order. One thread per (row, sample), `n = rows * ns`.
pub unsafe fn ktm_rows_scatter(n: u32, ns: u32, nfft: u32, order: *const u32, rows: *const f32, traces: *mut f32) as KTM_ROWS_SCATTER {
    let i = global_x();
    if i < n {
        let (p, j) = ((i / nonzero(ns)) as usize, (i % nonzero(ns)) as usize);
        unsafe {
            *traces.add(*order.add(p) as usize * ns as usize + j) = *rows.add(2 * (p * nfft as usize + j));
        }
    }
}
}
