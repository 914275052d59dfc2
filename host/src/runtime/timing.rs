//! Timing with CUDA events, and the statistics the benchmarks report.

use std::sync::Arc;

use cudarc::driver::{CudaEvent, CudaStream};

use super::error::{GpuError, GpuResult};

/// Times work on one stream with a pair of CUDA events.
pub struct GpuTimer {
    stream: Arc<CudaStream>,
    start: CudaEvent,
    stop: CudaEvent,
}

impl GpuTimer {
    pub fn new(stream: &Arc<CudaStream>) -> GpuResult<Self> {
        let flags = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        let ctx = stream.context();
        let start = ctx.new_event(flags).map_err(GpuError::driver("creating a timing event"))?;
        let stop = ctx.new_event(flags).map_err(GpuError::driver("creating a timing event"))?;
        Ok(Self { stream: stream.clone(), start, stop })
    }
    pub fn start(&self) -> GpuResult<()> {
        self.start.record(&self.stream).map_err(GpuError::driver("recording the start event"))
    }
    /// Records the stop event, waits for it and returns the elapsed milliseconds.
    pub fn stop_ms(&self) -> GpuResult<f64> {
        self.stop.record(&self.stream).map_err(GpuError::driver("recording the stop event"))?;
        self.stop.synchronize().map_err(GpuError::driver("waiting for the timed work"))?;
        self.start.elapsed_ms(&self.stop).map(|ms| ms as f64).map_err(GpuError::driver("reading event time"))
    }
    /// Runs `f` `warmup` times untimed, then `repeats` times timed; returns the statistics in ms.
    pub fn measure<F: FnMut() -> GpuResult<()>>(&self, warmup: usize, repeats: usize, mut f: F) -> GpuResult<Stats> {
        for _ in 0..warmup {
            f()?;
        }
        let mut times = Vec::with_capacity(repeats);
        for _ in 0..repeats.max(1) {
            self.start()?;
            f()?;
            times.push(self.stop_ms()?);
        }
        Ok(Stats::from_samples(&times))
    }
}

/// Median and spread of repeated timings (milliseconds).
#[derive(Debug, Clone, Copy, serde::Serialize, serde::Deserialize)]
pub struct Stats {
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub repeats: usize,
}

impl Stats {
    pub fn from_samples(samples: &[f64]) -> Stats {
        let min = samples.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = samples.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        Stats { median_ms: median(samples), min_ms: min, max_ms: max, repeats: samples.len() }
    }
}

/// Median of a sample (mean of the middle two for even counts).
pub fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 { v[n / 2] } else { 0.5 * (v[n / 2 - 1] + v[n / 2]) }
}

/// Times a CPU closure: `warmup` untimed runs, then the median of `repeats` wall-clock runs.
pub fn measure_cpu<F: FnMut()>(warmup: usize, repeats: usize, mut f: F) -> Stats {
    for _ in 0..warmup {
        f();
    }
    let mut times = Vec::with_capacity(repeats);
    for _ in 0..repeats.max(1) {
        let t = std::time::Instant::now();
        f();
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    Stats::from_samples(&times)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn median_odd_even() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
