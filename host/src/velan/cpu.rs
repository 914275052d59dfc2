//! CPU reference of the semblance scan: gathers in parallel (rayon), one gather's panel at a
//! time in contiguous per-velocity rows. For each trial velocity the traces are swept in order,
//! each over all output times (the trace and the sums stay in L1), then the window sums. The same
//! shared math and summation order as the GPU kernel, so the panels are bit-identical.

use rayon::prelude::*;

use super::{Gathers, Scan};
use gpu_kernels::math::mul_add;
use gpu_kernels::velan as k;

/// The panels of every gather, `[(g * nv + v) * ns + t0]`.
pub fn semblance(g: &Gathers, s: &Scan) -> Vec<f32> {
    let (ns, nv) = (g.ns, s.nv());
    let mut out = vec![0f32; g.len() * nv * ns];
    out.par_chunks_mut(nv * ns).enumerate().for_each(|(gi, panel)| gather_panel(g, s, gi, panel));
    out
}

/// One gather's panel `[v * ns + t0]`.
pub fn gather_panel(g: &Gathers, s: &Scan, gi: usize, panel: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    {
        if fma_available() {
            // SAFETY: the CPU has AVX2 and FMA (checked at run time).
            unsafe { gather_panel_fma(g, s, gi, panel) };
            return;
        }
    }
    gather_panel_impl(g, s, gi, panel)
}

#[cfg(target_arch = "x86_64")]
fn fma_available() -> bool {
    static HAS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *HAS.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gather_panel_fma(g: &Gathers, s: &Scan, gi: usize, panel: &mut [f32]) { gather_panel_impl(g, s, gi, panel) }

#[inline(always)]
fn gather_panel_impl(g: &Gathers, s: &Scan, gi: usize, panel: &mut [f32]) {
    let ns = g.ns;
    let h = s.half as usize;
    let last = (ns - 1) as f32;
    let t0s: Vec<f32> = (0..ns).map(|i| k::t0_of(i as i32, g.dt, g.t_first)).collect();
    let (mut sum, mut energy) = (vec![0f32; ns], vec![0f32; ns]);
    let fold = g.traces(gi).len() as f32;
    let (mut q1, mut q2) = (vec![0f32; ns], vec![0f32; ns]);
    for (v, row) in panel.chunks_mut(ns).enumerate() {
        let (s2, v2) = (s.s2[v], s.v2[v]);
        sum.fill(0.0);
        energy.fill(0.0);
        for tr in g.traces(gi) {
            let u = &g.data[tr * ns..(tr + 1) * ns];
            let xx = g.x2[tr];
            for i in 0..ns {
                let t0 = t0s[i];
                let t = k::moveout_time(t0, xx, s2, v2, s.eta);
                let pos = k::position(t, g.t_first, s.inv_dt);
                if k::is_live(t, t0, pos, last, s.max_stretch) {
                    let (ii, f) = k::split(pos);
                    let ii = ii as usize;
                    let a1 = if ii + 1 < ns { u[ii + 1] } else { 0.0 };
                    let a = k::lerp(u[ii], a1, f);
                    sum[i] += a;
                    energy[i] = mul_add(a, a, energy[i]);
                }
            }
        }
        for i in 0..ns {
            q1[i] = sum[i] * sum[i];
            q2[i] = fold * energy[i];
        }
        for (i, o) in row.iter_mut().enumerate() {
            let (a, b) = (i.saturating_sub(h), (i + h).min(ns - 1));
            let (mut num, mut den) = (0.0f32, 0.0f32);
            for w in a..=b {
                num += q1[w];
                den += q2[w];
            }
            *o = k::semblance(num, den);
        }
    }
}
