//! Trace preprocessing for migration, and its adjoint for modelling.
//!
//! - rho filter: the anticausal half-derivative, (-i omega)^(1/2) with rustfft's e^{-i omega t}
//!   forward transform ((i omega)^(1/2) in the e^{+i omega t} convention). Anticausal because
//!   migration sums the data along curves that lie at later times than the image time: in 2-D
//!   that summation is an anticausal half-integration (stationary phase), which the filter undoes
//!   (the dipping-reflector test checks the image is zero-phase; the causal filter leaves a 90
//!   degree rotation). Over an areal 3-D aperture the summation is a full integration, so a 3-D
//!   image keeps a 45 degree rotation (the full derivative would remove it). Applied by FFT with
//!   zero padding to twice the trace length: rustfft on the CPU, or batched cuFFT on the GPU
//!   ([`super::prep_gpu`] with `Params::prep_on_gpu`, which also builds the pair layout there;
//!   the response `h` is shared).
//! - anti-aliasing: the trace is integrated causally then anticausally (Lumley, Claerbout and
//!   Bevc 1994), so that a triangle filter of any length is three reads
//!   (`gpu_kernels::ktm::antialias_read`); a least-squares line is removed from the double integral
//!   to keep its magnitude (and f32 rounding) small: the three-point second difference does not
//!   see linear functions.
//! - layout: each trace becomes `stride` pairs `(D[k], D[k+1] - D[k])` of the padded trace D.

use std::sync::Arc;

use num_complex::Complex32;
use rayon::prelude::*;
use rustfft::{Fft, FftPlanner};

use super::{Params, Plan};
use crate::traces::TraceSet;
use gpu_kernels::ktm::{PAD_BACK, PAD_FRONT};

/// Padded index of sample 0 for these parameters.
pub fn pad_for(params: &Params) -> usize {
    match &params.antialias {
        // Reads reach s +- m with m <= max_half_length, plus one for the interpolation.
        Some(aa) => aa.max_half_length.ceil() as usize + 3,
        None => PAD_FRONT as usize,
    }
}

/// Pairs per padded trace.
pub fn stride_for(params: &Params, ns: usize) -> usize {
    let pad = pad_for(params);
    match &params.antialias {
        Some(_) => ns + 2 * pad,
        None => pad + ns + PAD_BACK as usize,
    }
}

/// The traces in the kernels' layout: `stride` pairs per trace, in plan order.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub pairs: Vec<[f32; 2]>,
}

impl Prepared {
    /// Pairs of plan positions `range`, flattened to f32 (for uploads).
    pub fn flat(&self, stride: usize, range: std::ops::Range<usize>) -> &[f32] {
        let p = &self.pairs[range.start * stride..range.end * stride];
        // SAFETY: [f32; 2] is two contiguous f32s.
        unsafe { std::slice::from_raw_parts(p.as_ptr() as *const f32, p.len() * 2) }
    }
}

/// Rho filter, integration and pair layout of every trace that takes part (plan order).
pub fn prepare(traces: &TraceSet, plan: &Plan, params: &Params) -> Prepared {
    let stride = plan.stride();
    let pad = plan.consts.pad as usize;
    let ns = traces.ns;
    let rho = params.rho_filter.then(|| RhoFilter::new(ns, traces.dt));
    let mut pairs = vec![[0.0f32; 2]; plan.ntraces() * stride];
    pairs.par_chunks_mut(stride).enumerate().for_each_init(
        || (vec![0.0f32; ns], rho.as_ref().map(|r| r.buffers())),
        |(work, bufs), (p, out)| {
            work.copy_from_slice(traces.trace(plan.order[p]));
            if let (Some(r), Some(b)) = (&rho, bufs.as_mut()) {
                r.apply(work, false, b);
            }
            if plan.antialias {
                integrate(work, pad, out);
            } else {
                plain_pairs(work, pad, out);
            }
        },
    );
    Prepared { pairs }
}

/// The adjoint of [`prepare`]: `padded` holds `stride + 1` accumulated values per plan position
/// (the modelling kernels' output); writes the traces into `out` (input order).
pub fn finish_adjoint(padded: &[f32], plan: &Plan, params: &Params, out: &mut TraceSet) {
    let stride = plan.stride();
    let pad = plan.consts.pad as usize;
    let ns = out.ns;
    let rho = params.rho_filter.then(|| RhoFilter::new(ns, out.dt));
    let mut traces = vec![0.0f32; plan.ntraces() * ns];
    traces.par_chunks_mut(ns).enumerate().for_each_init(
        || rho.as_ref().map(|r| r.buffers()),
        |bufs, (p, tr)| {
            let acc = &padded[p * (stride + 1)..(p + 1) * (stride + 1)];
            if plan.antialias {
                integrate_adjoint(acc, pad, tr);
            } else {
                tr.copy_from_slice(&acc[pad..pad + ns]);
            }
            if let (Some(r), Some(b)) = (&rho, bufs.as_mut()) {
                r.apply(tr, true, b);
            }
        },
    );
    for (p, &i) in plan.order.iter().enumerate() {
        out.trace_mut(i).copy_from_slice(&traces[p * ns..(p + 1) * ns]);
    }
}

/// Pairs of the zero-padded trace: D[pad + j] = d[j], zeros elsewhere, D[stride] = 0.
fn plain_pairs(d: &[f32], pad: usize, out: &mut [[f32; 2]]) {
    let at = |k: usize| if k >= pad && k < pad + d.len() { d[k - pad] } else { 0.0 };
    for (k, o) in out.iter_mut().enumerate() {
        let (a, b) = (at(k), at(k + 1));
        *o = [a, b - a];
    }
}

/// C2 = anticausal sum of the causal sum of the padded trace, detrended, as pairs.
fn integrate(d: &[f32], pad: usize, out: &mut [[f32; 2]]) {
    let len = out.len(); // C2 lives on 0..=len
    let mut c = vec![0.0f64; len + 1];
    let mut acc = 0.0f64;
    for (k, ck) in c.iter_mut().enumerate() {
        if k >= pad && k < pad + d.len() {
            acc += d[k - pad] as f64;
        }
        *ck = acc;
    }
    let mut acc = 0.0f64;
    for ck in c.iter_mut().rev() {
        acc += *ck;
        *ck = acc;
    }
    detrend(&mut c);
    for (k, o) in out.iter_mut().enumerate() {
        let (a, b) = (c[k] as f32, c[k + 1] as f32);
        *o = [a, b - a];
    }
}

/// Adjoint of [`integrate`] (detrend is an orthogonal projection, so self-adjoint; the adjoint
/// of an anticausal sum is a causal one and vice versa), then the crop to the trace.
fn integrate_adjoint(acc: &[f32], pad: usize, out: &mut [f32]) {
    let mut c: Vec<f64> = acc.iter().map(|&v| v as f64).collect();
    detrend(&mut c);
    let mut s = 0.0f64;
    for ck in c.iter_mut() {
        s += *ck;
        *ck = s;
    }
    let mut s = 0.0f64;
    for ck in c.iter_mut().rev() {
        s += *ck;
        *ck = s;
    }
    for (j, o) in out.iter_mut().enumerate() {
        *o = c[pad + j] as f32;
    }
}

/// Removes the least-squares line a + b k (orthogonal projection).
fn detrend(c: &mut [f64]) {
    let n = c.len() as f64;
    let kmean = (n - 1.0) / 2.0;
    let mean = c.iter().sum::<f64>() / n;
    let (mut num, mut den) = (0.0, 0.0);
    for (k, &v) in c.iter().enumerate() {
        let x = k as f64 - kmean;
        num += x * v;
        den += x * x;
    }
    let slope = if den > 0.0 { num / den } else { 0.0 };
    for (k, v) in c.iter_mut().enumerate() {
        *v -= mean + slope * (k as f64 - kmean);
    }
}

/// The half-derivative filter, by FFT (zero padding to at least twice the trace).
pub struct RhoFilter {
    ns: usize,
    nfft: usize,
    fwd: Arc<dyn Fft<f32>>,
    inv: Arc<dyn Fft<f32>>,
    /// Filter response / nfft.
    h: Vec<Complex32>,
}

/// Per-thread FFT buffers.
pub struct RhoBuffers {
    data: Vec<Complex32>,
    scratch: Vec<Complex32>,
}

impl RhoFilter {
    pub fn new(ns: usize, dt: f32) -> Self {
        let nfft = (2 * ns).next_power_of_two().max(2);
        let mut planner = FftPlanner::<f32>::new();
        let fwd = planner.plan_fft_forward(nfft);
        let inv = planner.plan_fft_inverse(nfft);
        let h = (0..nfft)
            .map(|k| {
                let kk = if k <= nfft / 2 { k as f64 } else { k as f64 - nfft as f64 };
                let w = 2.0 * std::f64::consts::PI * kk / (nfft as f64 * dt as f64);
                // (-i w)^(1/2) = sqrt|w| e^{-i pi/4 sgn w}.
                let a = w.abs().sqrt() / nfft as f64;
                let phase = -std::f64::consts::FRAC_PI_4 * w.signum();
                Complex32::new((a * phase.cos()) as f32, (a * phase.sin()) as f32)
            })
            .collect();
        RhoFilter { ns, nfft, fwd, inv, h }
    }

    /// FFT length and response (divided by the FFT length), for the GPU path (`prep_gpu`).
    pub fn response(&self) -> (usize, &[Complex32]) { (self.nfft, &self.h) }

    pub fn buffers(&self) -> RhoBuffers {
        let scratch_len = self.fwd.get_inplace_scratch_len().max(self.inv.get_inplace_scratch_len());
        RhoBuffers { data: vec![Complex32::default(); self.nfft], scratch: vec![Complex32::default(); scratch_len] }
    }

    /// Filters `trace` in place; `adjoint` applies the conjugate response (the exact adjoint of
    /// pad -> filter -> real part -> crop).
    pub fn apply(&self, trace: &mut [f32], adjoint: bool, b: &mut RhoBuffers) {
        debug_assert_eq!(trace.len(), self.ns);
        for (k, c) in b.data.iter_mut().enumerate() {
            *c = Complex32::new(if k < self.ns { trace[k] } else { 0.0 }, 0.0);
        }
        self.fwd.process_with_scratch(&mut b.data, &mut b.scratch);
        for (c, h) in b.data.iter_mut().zip(&self.h) {
            *c *= if adjoint { h.conj() } else { *h };
        }
        self.inv.process_with_scratch(&mut b.data, &mut b.scratch);
        for (t, c) in trace.iter_mut().zip(&b.data) {
            *t = c.re;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dot(a: &[f32], b: &[f32]) -> f64 { a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum() }

    fn noise(n: usize, seed: u64) -> Vec<f32> {
        let mut t = crate::synth::noise_traces(crate::synth::geometry::line_2d(1, 1.0, 1, 1.0), n, 0.004, seed);
        std::mem::take(&mut t.data).into_vec()
    }

    #[test]
    fn rho_filter_adjoint_passes_the_dot_product_test() {
        let n = 301;
        let r = RhoFilter::new(n, 0.004);
        let mut b = r.buffers();
        let (x, y) = (noise(n, 1), noise(n, 2));
        let (mut fx, mut fty) = (x.clone(), y.clone());
        r.apply(&mut fx, false, &mut b);
        r.apply(&mut fty, true, &mut b);
        let (l, rr) = (dot(&fx, &y), dot(&x, &fty));
        assert!((l - rr).abs() < 1e-5 * l.abs().max(rr.abs()), "{l} vs {rr}");
    }

    #[test]
    fn rho_filter_is_a_half_derivative() {
        // Twice the anticausal half-derivative of a smooth pulse is minus its derivative.
        let (n, dt) = (512, 0.002f32);
        let r = RhoFilter::new(n, dt);
        let mut b = r.buffers();
        let g: Vec<f32> = (0..n).map(|i| (-((i as f32 - 256.0) * dt / 0.02).powi(2)).exp()).collect();
        let mut h = g.clone();
        r.apply(&mut h, false, &mut b);
        r.apply(&mut h, false, &mut b);
        let deriv: Vec<f32> = (0..n).map(|i| if i == 0 || i == n - 1 { 0.0 } else { (g[i - 1] - g[i + 1]) / (2.0 * dt) }).collect();
        let err: f64 = h[100..400].iter().zip(&deriv[100..400]).map(|(a, b)| ((a - b) as f64).powi(2)).sum::<f64>().sqrt();
        let norm: f64 = deriv[100..400].iter().map(|&b| (b as f64).powi(2)).sum::<f64>().sqrt();
        assert!(err < 0.02 * norm, "relative error {}", err / norm);
    }

    #[test]
    fn integration_adjoint_passes_the_dot_product_test() {
        let (n, pad) = (97, 7);
        let len = n + 2 * pad;
        let d = noise(n, 3);
        let mut pairs = vec![[0.0f32; 2]; len];
        integrate(&d, pad, &mut pairs);
        // Forward as the C2 samples 0..=len (the pairs carry C2[k] and C2[k+1] - C2[k]).
        let mut c2: Vec<f32> = pairs.iter().map(|p| p[0]).collect();
        c2.push(pairs[len - 1][0] + pairs[len - 1][1]);
        let y = noise(len + 1, 4);
        let mut aty = vec![0.0f32; n];
        integrate_adjoint(&y, pad, &mut aty);
        let (l, r) = (dot(&c2, &y), dot(&d, &aty));
        assert!((l - r).abs() < 1e-4 * l.abs().max(r.abs()), "{l} vs {r}");
    }
}
