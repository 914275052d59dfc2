//! Built-in synthetic shots for srm (tests, demo, benchmarks, `seisgpu srm --synthetic`): a flat
//! reflector under a layered model (reflection times by ray tracing) and a point scatterer in a
//! constant velocity. Receivers sit on model nodes; every trace has a zero-phase Ricker wavelet.

use crate::synth::{add_ricker, events};
use crate::traces::{TraceHeader, TraceSet};

use super::VelocityModel;

/// Receivers on every `step`-th node of the model's (nx, ny) grid, for one source at (sx, sy).
pub fn patch_geometry(model: &VelocityModel, sx: f64, sy: f64, step: usize, ffid: i32) -> Vec<TraceHeader> {
    let mut h = Vec::new();
    let step = step.max(1);
    for iy in (0..model.ny).step_by(step) {
        for ix in (0..model.nx).step_by(step) {
            let (gx, gy) = (model.x0 + ix as f64 * model.dx, model.y0 + iy as f64 * model.dy);
            let mut t = TraceHeader { sx, sy, gx, gy, ffid, channel: h.len() as i32 + 1, ..Default::default() };
            t.offset = t.distance();
            h.push(t);
        }
    }
    h
}

/// Two-way reflection time (s) from a flat reflector at depth `zr` below horizontal layers
/// (`tops[i]` the top depth of layer i with velocity `vels[i]`, tops[0] = 0), for source-receiver
/// offset `offset` (m): ray parameter by bisection on x(p) = offset.
pub fn layered_reflection_time(tops: &[f64], vels: &[f64], zr: f64, offset: f64) -> f64 {
    // Thickness of each layer above the reflector.
    let legs: Vec<(f64, f64)> = (0..tops.len()).filter_map(|i| {
        let top = tops[i];
        let bot = if i + 1 < tops.len() { tops[i + 1].min(zr) } else { zr };
        (bot > top).then_some((bot - top, vels[i]))
    }).collect();
    let xt = |p: f64| -> (f64, f64) {
        legs.iter().fold((0.0, 0.0), |(x, t), &(dz, v)| {
            let c = (1.0 - p * p * v * v).sqrt();
            (x + 2.0 * dz * p * v / c, t + 2.0 * dz / (v * c))
        })
    };
    let vmax = legs.iter().map(|l| l.1).fold(0.0, f64::max);
    let (mut lo, mut hi) = (0.0, (1.0 - 1e-12) / vmax);
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if xt(mid).0 < offset.abs() { lo = mid } else { hi = mid }
    }
    xt(0.5 * (lo + hi)).1
}

/// One shot at the model's centre over a flat reflector at depth `zr` under the layered model
/// (`tops`, `vels`); receivers on every `step`-th node. Returns the traces and the model
/// (nx x ny x nz nodes, spacing `d` laterally, `dz` in depth, origin 0).
#[allow(clippy::too_many_arguments)]
pub fn flat_reflector(nx: usize, ny: usize, nz: usize, d: f64, dz: f64, tops: &[f64], vels: &[f64], zr: f64, ns: usize,
    dt: f32, peak: f32, step: usize) -> (TraceSet, VelocityModel) {
    let vz: Vec<f32> = (0..nz).map(|iz| {
        let z = iz as f64 * dz;
        vels[tops.iter().rposition(|&t| z >= t).unwrap_or(0)] as f32
    }).collect();
    let model = VelocityModel::from_profile(&vz, nx, ny, d, d, dz, 0.0, 0.0);
    let (sx, sy) = ((nx / 2) as f64 * d, (ny / 2) as f64 * d);
    let mut traces = TraceSet::zeros(patch_geometry(&model, sx, sy, step, 1), ns, dt);
    for i in 0..traces.len() {
        let t = layered_reflection_time(tops, vels, zr, traces.headers[i].distance());
        add_ricker(traces.trace_mut(i), dt, t as f32, peak, 1.0);
    }
    (traces, model)
}

/// One shot at (sx, sy) and a point scatterer at (x, y, z) in a constant velocity `v`.
#[allow(clippy::too_many_arguments)]
pub fn point_scatterer(nx: usize, ny: usize, nz: usize, d: f64, dz: f64, v: f64, source: (f64, f64),
    scatterer: (f64, f64, f64), ns: usize, dt: f32, peak: f32, step: usize) -> (TraceSet, VelocityModel) {
    let model = VelocityModel::from_profile(&vec![v as f32; nz], nx, ny, d, d, dz, 0.0, 0.0);
    let mut traces = TraceSet::zeros(patch_geometry(&model, source.0, source.1, step, 1), ns, dt);
    events::diffractor(&mut traces, scatterer.0, scatterer.1, scatterer.2, v, peak);
    (traces, model)
}

/// Depth index of the largest envelope (magnitude of the analytic signal along depth) in column
/// (ix, iy), ignoring the first `skip` samples. The envelope, not |image|: the image wavelet of a
/// point source is phase-rotated (90 degrees in 3D, 45 in 2D, the Green's function's factor that
/// ray-traced zero-phase synthetics lack), which splits |image| into two lobes around the reflector.
pub fn column_peak(img: &super::Image, ix: usize, iy: usize, skip: usize) -> usize {
    let col: Vec<f32> = (0..img.nz).map(|iz| img.data[(iz * img.ny + iy) * img.nx + ix]).collect();
    let env = envelope(&col);
    (skip..img.nz).max_by(|&a, &b| env[a].total_cmp(&env[b])).unwrap_or(0)
}

/// Envelope of a real signal: |x + i H(x)| by FFT (zero-padded to twice the length).
pub fn envelope(x: &[f32]) -> Vec<f32> {
    use num_complex::Complex32;
    let n = 2 * x.len().max(1);
    let mut planner = rustfft::FftPlanner::<f32>::new();
    let mut c: Vec<Complex32> = (0..n).map(|i| Complex32::new(if i < x.len() { x[i] } else { 0.0 }, 0.0)).collect();
    planner.plan_fft_forward(n).process(&mut c);
    for (k, v) in c.iter_mut().enumerate() {
        if k > 0 && k < n / 2 {
            *v *= 2.0;
        } else if k > n / 2 {
            *v = Complex32::new(0.0, 0.0);
        }
    }
    planner.plan_fft_inverse(n).process(&mut c);
    c[..x.len()].iter().map(|v| v.norm() / n as f32).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn layered_time_matches_constant_velocity_and_zero_offset() {
        let t = layered_reflection_time(&[0.0], &[2000.0], 500.0, 600.0);
        let want = (1000.0f64.powi(2) + 600.0f64.powi(2)).sqrt() / 2000.0;
        assert!((t - want).abs() < 1e-9, "{t} {want}");
        let t0 = layered_reflection_time(&[0.0, 200.0], &[1500.0, 2500.0], 500.0, 0.0);
        assert!((t0 - (400.0 / 1500.0 + 600.0 / 2500.0)).abs() < 1e-9);
    }

    #[test]
    fn envelope_of_a_cosine_burst_peaks_at_its_centre() {
        let x: Vec<f32> = (0..200).map(|i| {
            let t = (i as f32 - 120.0) / 10.0;
            (-t * t).exp() * (3.0 * t + 1.3).sin()
        }).collect();
        let e = envelope(&x);
        let peak = (0..200).max_by(|&a, &b| e[a].total_cmp(&e[b])).unwrap();
        assert!((peak as i64 - 120).abs() <= 1, "{peak}");
    }
}
