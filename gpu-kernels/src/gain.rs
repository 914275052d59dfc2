//! Trace gain: RMS automatic gain control, each sample divided by the RMS amplitude of its trace in
//! a centred window. Small on purpose: the worked example of docs/DEVELOPING.md ("Writing a kernel
//! in 15 minutes"): the math shared with the CPU twin (`seisgpu_host::gain`), one entry point
//! declared with [`kernel!`](crate::kernel), whose descriptor [`AGC_RMS`] the host launches.

#[cfg(target_arch = "nvptx64")]
use crate::device::*;
use crate::math::{mul_add, sqrt};

/// Sample `k` of `trace` divided by the RMS of `trace[k - half ..= k + half]` (clipped at the
/// trace's ends); 0 where that window is all zeros (or its mean square is not a positive number).
/// The sum of squares is taken in order with fused multiply-adds and the root is correctly rounded,
/// so the CPU and the GPU give the same bits.
#[inline(always)]
pub fn agc_sample(trace: &[f32], k: usize, half: usize) -> f32 {
    // `get`, not indexing: no panic path in the kernel (k past the trace gives an empty window, 0).
    let window = trace.get(k.saturating_sub(half)..k.saturating_add(half).saturating_add(1).min(trace.len())).unwrap_or(&[]);
    let mut sum_sq = 0.0f32;
    for &v in window {
        sum_sq = mul_add(v, v, sum_sq);
    }
    let mean_sq = sum_sq / window.len() as f32;
    match trace.get(k) {
        Some(&v) if mean_sq > 0.0 => v / sqrt(mean_sq),
        _ => 0.0,
    }
}

crate::kernel! {
    /// RMS AGC of `n_traces` traces of `ns` samples each (trace-major), window of `2 half + 1`
    /// samples: `output[i] = agc_sample(trace, k, half)` for sample k of trace i / ns. One thread
    /// per output sample, grid-stride (any 1D grid covers all).
    pub unsafe fn agc_rms(n_traces: u32, ns: u32, half: u32, input: *const f32, output: *mut f32) as AGC_RMS {
        // `max(1)`: no division-by-zero path (no samples means no iteration anyway).
        let ns = ns.max(1) as usize;
        for i in grid_stride(n_traces as usize * ns) {
            let (tr, k) = (i / ns, i % ns);
            // SAFETY: the host passes `n_traces * ns` samples in `input` and `output`, and i < that.
            unsafe {
                let trace = core::slice::from_raw_parts(input.add(tr * ns), ns);
                *output.add(i) = agc_sample(trace, k, half as usize);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_clip_at_the_trace_ends() {
        let t = [3.0f32, -4.0, 0.0, 0.0];
        // k = 0, half = 1: window [3, -4], RMS = sqrt(12.5).
        assert_eq!(agc_sample(&t, 0, 1), 3.0 / 12.5f32.sqrt());
        assert_eq!(agc_sample(&t, 3, 1), 0.0); // all-zero window
        assert_eq!(agc_sample(&t, 1, usize::MAX), -4.0 / (25.0f32 / 4.0).sqrt()); // whole trace
        assert_eq!(agc_sample(&[2.0], 0, 0), 1.0);
        assert_eq!(agc_sample(&t, 9, 1), 0.0); // past the end
    }
}
