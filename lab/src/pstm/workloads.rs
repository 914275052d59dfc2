//! The PSTM benchmark workloads: surveys, velocity models and data for the speed table (the
//! paper's Table 2) and the accuracy table, shared by the benchmarks and the
//! strong-scaling rows ([`crate::scale`]).

use rand::{RngExt, SeedableRng};
use rayon::prelude::*;

use seisgpu_host::pstm::{GpuTuning, PstmParams};
use crate::bench::BenchSize;
use seisgpu_host::synth;
use seisgpu_host::{TraceHeader, TraceSet};

/// A 3D survey over the image of `p`: `n` traces whose midpoints are uniform over the image area
/// grown by `margin` (m), with offsets uniform in [0, `max_offset`] and azimuths uniform
/// (a wide-azimuth land geometry, reduced to what migration sees).
pub fn survey(n: usize, p: &PstmParams, margin: f64, max_offset: f64, seed: u64) -> Vec<TraceHeader> {
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let (w, h) = ((p.nx - 1) as f64 * p.dx, (p.ny - 1) as f64 * p.dy);
    (0..n)
        .map(|i| {
            let mx = p.x0 - margin + r.random_range(0.0..1.0) * (w + 2.0 * margin);
            let my = p.y0 - margin + r.random_range(0.0..1.0) * (h + 2.0 * margin);
            let off = r.random_range(0.0..1.0) * max_offset;
            let az = r.random_range(0.0..std::f64::consts::TAU);
            let (hx, hy) = (0.5 * off * az.cos(), 0.5 * off * az.sin());
            TraceHeader {
                sx: mx - hx,
                sy: my - hy,
                gx: mx + hx,
                gy: my + hy,
                offset: off,
                ffid: i as i32 + 1,
                channel: 1,
                ..Default::default()
            }
        })
        .collect()
}

/// A smooth velocity (RMS, m/s) and eta model: v = 1800 + 400 tau (s) with a +-4% lateral swell,
/// eta from 0.05 to 0.12 with depth; per column when `lateral`.
pub fn smooth_model(p: &mut PstmParams, lateral: bool) {
    let ncol = if lateral { p.columns() } else { 1 };
    let (mut v, mut e) = (Vec::with_capacity(ncol * p.nz), Vec::with_capacity(ncol * p.nz));
    for col in 0..ncol {
        let (ix, iy) = ((col / p.ny) as f32, (col % p.ny) as f32);
        let lat = if lateral { 1.0 + 0.04 * (0.11 * ix).sin() * (0.07 * iy).cos() } else { 1.0 };
        for z in 0..p.nz {
            let tau = p.tau0 + z as f32 * p.dtau;
            v.push((1800.0 + 400.0 * tau) * lat);
            e.push(0.05 + 0.07 * (tau / (p.nz as f32 * p.dtau)).min(1.0));
        }
    }
    p.vrms = v;
    p.eta = e;
}

/// Band-limited data (Ricker wavelet of `f` Hz): point diffractors under the image and two flat
/// reflections, in a constant 2000 m/s (the migration velocity differs, which does not matter for
/// comparing traveltime schemes).
pub fn band_limited(headers: Vec<TraceHeader>, ns: usize, dt: f32, f: f32, p: &PstmParams) -> TraceSet {
    let mut t = TraceSet::zeros(headers, ns, dt);
    let (w, h) = ((p.nx - 1) as f64 * p.dx, (p.ny - 1) as f64 * p.dy);
    let tmax = (ns as f64 * dt as f64) * 0.8;
    for (k, &(fx, fy, ft)) in [(0.3, 0.4, 0.35), (0.7, 0.6, 0.55), (0.5, 0.5, 0.75), (0.2, 0.8, 0.9)].iter().enumerate() {
        let z = 0.5 * 2000.0 * tmax * ft;
        synth::events::diffractor(&mut t, p.x0 + fx * w, p.y0 + fy * h, z, 2000.0, f);
        let _ = k;
    }
    synth::events::hyperbolic_reflection(&mut t, 0.45 * tmax as f32, 2000.0, f, 0.5);
    synth::events::hyperbolic_reflection(&mut t, 0.85 * tmax as f32, 2300.0, f, -0.4);
    t
}

/// White noise traces, generated in parallel (for the speed table, where content does not matter).
pub fn fast_noise(headers: Vec<TraceHeader>, ns: usize, dt: f32, seed: u64) -> TraceSet {
    let mut t = TraceSet::zeros(headers, ns, dt);
    t.data.par_chunks_mut(ns).enumerate().for_each(|(i, tr)| {
        let mut x = (seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
        for v in tr {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            *v = ((x >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0;
        }
    });
    t
}

/// The speed workload of the paper's Table 2: image NX = 50, NY = 1097, NOFF = 1, NZ = 1504 at
/// 4 ms; 450,000 traces of 6000 ms. Our choices (the paper gives neither): 25 m columns, a
/// 1000 m midpoint aperture, offsets to 3000 m, a 50% stretch mute, lateral v and eta.
/// `Small`: 10 x 23 columns, 400 samples, 1500 traces of 2 s, 400 m aperture.
pub fn table2(size: BenchSize) -> (PstmParams, usize, usize) {
    let (nx, ny, nz, traces, ns, aperture) = match size {
        BenchSize::Paper => (50, 1097, 1504, 450_000, 1500, 1000.0),
        BenchSize::Small => (10, 23, 400, 1500, 500, 400.0),
    };
    let mut p = PstmParams {
        nx,
        ny,
        x0: 0.0,
        y0: 0.0,
        dx: 25.0,
        dy: 25.0,
        nz,
        tau0: 0.0,
        dtau: 0.004,
        noff: 1,
        offset0: 0.0,
        doffset: 1e6,
        vrms: vec![],
        eta: vec![],
        aperture,
        stretch: 0.5,
        dynamic_max_step: 32,
        gpu: GpuTuning::read_only_cache(),
    };
    smooth_model(&mut p, true);
    (p, traces, ns)
}
