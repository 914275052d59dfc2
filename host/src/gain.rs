//! RMS automatic gain control of traces on the CPU and on the GPU: each sample divided by the RMS
//! amplitude of its trace in a centred window of `2 half + 1` samples. The GPU kernel is
//! `gpu_kernels::gain::AGC_RMS`; both sides run `gpu_kernels::gain::agc_sample`, so they agree bit
//! for bit. (The worked example of docs/DEVELOPING.md, "Writing a kernel in 15 minutes".)

use gpu_kernels::gain::{agc_sample, AGC_RMS};
use rayon::prelude::*;

use crate::launch;
use crate::runtime::{grid_1d, Gpu};

/// Checks a trace-major buffer of `data_len` samples against `ns` samples per trace; the number of traces.
fn traces_in(data_len: usize, ns: usize) -> anyhow::Result<usize> {
    crate::ensure_param!(ns > 0, "ns", "AGC: samples per trace (ns) is 0");
    crate::ensure_param!(data_len % ns == 0, "ns", "AGC: {data_len} samples are not whole traces of ns = {ns} samples");
    Ok(data_len / ns)
}

/// The CPU reference: AGC of the trace-major `data` (`ns` samples per trace), one trace per task.
pub fn agc_rms_cpu(data: &[f32], ns: usize, half: usize) -> anyhow::Result<Vec<f32>> {
    traces_in(data.len(), ns)?;
    let mut out = vec![0.0f32; data.len()];
    out.par_chunks_mut(ns).zip(data.par_chunks(ns)).for_each(|(o, trace)| {
        for (k, v) in o.iter_mut().enumerate() {
            *v = agc_sample(trace, k, half);
        }
    });
    Ok(out)
}

/// The same on `gpu`: upload, one launch (256 threads per block), download.
pub fn agc_rms_gpu(gpu: &Gpu, data: &[f32], ns: usize, half: usize) -> anyhow::Result<Vec<f32>> {
    let n_traces = traces_in(data.len(), ns)?;
    crate::ensure_input!(data.len() <= u32::MAX as usize, "AGC: {} samples exceed the kernel's 32-bit count", data.len());
    if data.is_empty() {
        return Ok(Vec::new());
    }
    let input = gpu.upload(data)?;
    // NaN-filled: a sample the kernel missed cannot pass for a result.
    let mut output = gpu.poisoned(data.len())?;
    let (n_traces, ns, half) = (n_traces as u32, ns as u32, half.min(u32::MAX as usize) as u32);
    launch!(gpu, AGC_RMS, grid_1d(data.len(), 256), &n_traces, &ns, &half, &input, &mut output)?;
    Ok(gpu.download(&output)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_agc_levels_each_trace() {
        // Two traces of 5: a constant one (gain 1 everywhere) and a zero one (stays zero).
        let data = [2.0, 2.0, 2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.0];
        assert_eq!(agc_rms_cpu(&data, 5, 1).unwrap(), [1.0, 1.0, 1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]);
        let ramp: Vec<f32> = (1..=7).map(|v| v as f32).collect();
        let g = agc_rms_cpu(&ramp, 7, 2).unwrap();
        assert!(g.iter().all(|v| (0.3..1.5).contains(v)), "{g:?}");
    }

    #[test]
    fn bad_shapes_are_refused_with_the_parameter() {
        let e = agc_rms_cpu(&[1.0; 10], 3, 1).unwrap_err().to_string();
        assert!(e.contains("ns = 3") && e.contains("10 samples"), "{e}");
        let e = agc_rms_cpu(&[1.0; 10], 0, 1).unwrap_err().to_string();
        assert!(e.contains("ns"), "{e}");
        assert!(agc_rms_cpu(&[], 4, 1).unwrap().is_empty());
    }
}
