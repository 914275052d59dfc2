//! Synthetic data with fixed seeds: wavelets, survey geometries, velocity models, events and noise.
//! Everything here is deterministic for a given seed, so tests and benchmarks are repeatable.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::traces::{TraceHeader, TraceSet};

/// The generator every synthetic builder uses.
pub fn rng(seed: u64) -> ChaCha8Rng { ChaCha8Rng::seed_from_u64(seed) }

/// Ricker wavelet of peak frequency `f` (Hz) at time `t` (s) from its centre.
pub fn ricker(f: f32, t: f32) -> f32 {
    let a = (std::f32::consts::PI * f * t).powi(2);
    (1.0 - 2.0 * a) * (-a).exp()
}

/// Adds a Ricker wavelet centred at time `tc` (s) with amplitude `amp` to `trace`.
pub fn add_ricker(trace: &mut [f32], dt: f32, tc: f32, f: f32, amp: f32) {
    let half = (1.5 / f / dt).ceil() as isize; // the wavelet is negligible past 1.5 periods
    let ic = (tc / dt).round() as isize;
    for i in (ic - half).max(0)..(ic + half + 1).min(trace.len() as isize) {
        trace[i as usize] += amp * ricker(f, i as f32 * dt - tc);
    }
}

/// Gaussian white noise of standard deviation `sigma`.
pub fn add_noise(data: &mut [f32], sigma: f32, seed: u64) {
    let mut r = rng(seed);
    for v in data.iter_mut() {
        // Box-Muller from two uniforms (avoids a rand_distr dependency in hot code).
        let u1: f32 = r.random_range(f32::EPSILON..1.0);
        let u2: f32 = r.random_range(0.0..1.0);
        *v += sigma * (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos();
    }
}

/// Root-mean-square of a slice.
pub fn rms(data: &[f32]) -> f32 {
    if data.is_empty() {
        return 0.0;
    }
    ((data.iter().map(|&v| (v as f64).powi(2)).sum::<f64>()) / data.len() as f64).sqrt() as f32
}

/// Signal-to-noise ratio in dB of `estimate` against the known `clean` signal.
pub fn snr_db(clean: &[f32], estimate: &[f32]) -> f64 {
    let sig: f64 = clean.iter().map(|&v| (v as f64).powi(2)).sum();
    let err: f64 = clean.iter().zip(estimate).map(|(&c, &e)| (c as f64 - e as f64).powi(2)).sum();
    10.0 * (sig / err.max(1e-300)).log10()
}

/// Survey geometries.
pub mod geometry {
    use super::*;

    /// A 2D line: `ns` sources and `nr` receivers on the x axis, spacings `ds`, `dr` (m), every
    /// receiver live for every shot (shot-major order).
    pub fn line_2d(nsrc: usize, ds: f64, nrec: usize, dr: f64) -> Vec<TraceHeader> {
        let mut h = Vec::with_capacity(nsrc * nrec);
        for s in 0..nsrc {
            for r in 0..nrec {
                let (sx, gx) = (s as f64 * ds, r as f64 * dr);
                h.push(TraceHeader {
                    sx, gx, offset: gx - sx, ffid: s as i32 + 1, channel: r as i32 + 1,
                    source_station: s as i32 + 1, receiver_station: r as i32 + 1,
                    cdp: ((sx + gx) / dr).round() as i32 + 1, inline: 1, crossline: ((sx + gx) / dr).round() as i32 + 1,
                    ..Default::default()
                });
            }
        }
        h
    }

    /// A 3D cross-spread: a source line along y (`nsrc` at `ds`) crossing a receiver line along x
    /// (`nrec` at `dr`), both centred on the origin.
    pub fn cross_spread(nsrc: usize, ds: f64, nrec: usize, dr: f64) -> Vec<TraceHeader> {
        let mut h = Vec::with_capacity(nsrc * nrec);
        let (ys0, xr0) = (-(nsrc as f64 - 1.0) * ds / 2.0, -(nrec as f64 - 1.0) * dr / 2.0);
        for s in 0..nsrc {
            for r in 0..nrec {
                let (sy, gx) = (ys0 + s as f64 * ds, xr0 + r as f64 * dr);
                let mut t = TraceHeader {
                    sx: 0.0, sy, gx, gy: 0.0, ffid: s as i32 + 1, channel: r as i32 + 1,
                    source_station: s as i32 + 1, receiver_station: r as i32 + 1, ..Default::default()
                };
                t.offset = t.distance();
                h.push(t);
            }
        }
        h
    }

    /// A 3D orthogonal survey: `nsl` source lines along y every `sl` m, `nrl` receiver lines along x
    /// every `rl` m; `ns_per` sources at `ds` per line, `nr_per` receivers at `dr` per line; every
    /// receiver within `patch_lines` lines of a shot is live.
    #[allow(clippy::too_many_arguments)]
    pub fn orthogonal(nsl: usize, sl: f64, ns_per: usize, ds: f64, nrl: usize, rl: f64, nr_per: usize, dr: f64,
        patch_lines: usize) -> Vec<TraceHeader> {
        let mut h = Vec::new();
        let mut ffid = 0;
        for isl in 0..nsl {
            for is in 0..ns_per {
                ffid += 1;
                let (sx, sy) = (isl as f64 * sl, is as f64 * ds);
                for irl in 0..nrl {
                    let gy = irl as f64 * rl;
                    if (gy - sy).abs() > patch_lines as f64 * rl {
                        continue;
                    }
                    for ir in 0..nr_per {
                        let gx = ir as f64 * dr;
                        let mut t = TraceHeader { sx, sy, gx, gy, ffid, channel: (irl * nr_per + ir) as i32 + 1,
                            source_station: (isl * ns_per + is) as i32 + 1, receiver_station: (irl * nr_per + ir) as i32 + 1,
                            ..Default::default() };
                        t.offset = t.distance();
                        h.push(t);
                    }
                }
            }
        }
        h
    }
}

/// Velocity models (interval velocity in m/s on a regular grid).
pub mod velocity {
    /// Layered model: `interfaces` are depths (m) below which `velocities[k+1]` holds
    /// (`velocities.len() == interfaces.len() + 1`). Returns v(z) sampled every `dz` for `nz` samples.
    pub fn layered(velocities: &[f32], interfaces: &[f32], nz: usize, dz: f32) -> Vec<f32> {
        assert_eq!(velocities.len(), interfaces.len() + 1, "one more velocity than interfaces");
        (0..nz)
            .map(|iz| {
                let z = iz as f32 * dz;
                velocities[interfaces.iter().filter(|&&d| z >= d).count()]
            })
            .collect()
    }

    /// Linear gradient v(z) = v0 + k z.
    pub fn gradient(v0: f32, k: f32, nz: usize, dz: f32) -> Vec<f32> {
        (0..nz).map(|iz| v0 + k * iz as f32 * dz).collect()
    }

    /// Laterally varying 3D model (nx, ny, nz; z fastest): v0 + kz z plus a smooth Gaussian
    /// anomaly of `anomaly` m/s centred in the model.
    #[allow(clippy::too_many_arguments)]
    pub fn lateral(nx: usize, ny: usize, nz: usize, dx: f32, dy: f32, dz: f32, v0: f32, kz: f32, anomaly: f32) -> Vec<f32> {
        let (cx, cy, cz) = (nx as f32 * dx / 2.0, ny as f32 * dy / 2.0, nz as f32 * dz / 2.0);
        let r2 = (0.25 * (nx as f32 * dx).max(ny as f32 * dy)).powi(2);
        let mut v = Vec::with_capacity(nx * ny * nz);
        for ix in 0..nx {
            for iy in 0..ny {
                for iz in 0..nz {
                    let (x, y, z) = (ix as f32 * dx, iy as f32 * dy, iz as f32 * dz);
                    let d2 = (x - cx).powi(2) + (y - cy).powi(2) + (z - cz).powi(2);
                    v.push(v0 + kz * z + anomaly * (-d2 / r2).exp());
                }
            }
        }
        v
    }

    /// RMS velocity from interval velocity sampled in two-way time (Dix's relation inverted).
    pub fn rms_from_interval(vint: &[f32]) -> Vec<f32> {
        let mut acc = 0.0f64;
        vint.iter().enumerate().map(|(i, &v)| {
            acc += (v as f64).powi(2);
            (acc / (i + 1) as f64).sqrt() as f32
        }).collect()
    }
}

/// Prestack events on any geometry.
pub mod events {
    use super::*;

    /// A point diffractor at (x, y, z) in a constant velocity `v`: each trace gets a Ricker at the
    /// two-way traveltime source -> diffractor -> receiver, amplitude 1/(rs rr) normalised to 1 at
    /// the nearest trace's distance.
    pub fn diffractor(traces: &mut TraceSet, x: f64, y: f64, z: f64, v: f64, f: f32) {
        let (dt, t_first) = (traces.dt, traces.t0);
        for i in 0..traces.len() {
            let h = traces.headers[i];
            let rs = ((h.sx - x).powi(2) + (h.sy - y).powi(2) + z * z).sqrt();
            let rr = ((h.gx - x).powi(2) + (h.gy - y).powi(2) + z * z).sqrt();
            let t = (rs + rr) / v;
            let amp = (z * z / (rs * rr)) as f32;
            add_ricker(traces.trace_mut(i), dt, t as f32 - t_first, f, amp);
        }
    }

    /// A reflection whose two-way time is t(h) = sqrt(t0^2 + (offset/v)^2) (hyperbolic moveout).
    pub fn hyperbolic_reflection(traces: &mut TraceSet, t0: f32, v: f32, f: f32, amp: f32) {
        let (dt, t_first) = (traces.dt, traces.t0);
        for i in 0..traces.len() {
            let off = traces.headers[i].distance() as f32;
            let t = (t0 * t0 + (off / v).powi(2)).sqrt();
            add_ricker(traces.trace_mut(i), dt, t - t_first, f, amp);
        }
    }
}

/// A trace set of `headers` with `ns` samples at `dt` filled with Gaussian noise (for random tests).
pub fn noise_traces(headers: Vec<TraceHeader>, ns: usize, dt: f32, seed: u64) -> TraceSet {
    let mut t = TraceSet::zeros(headers, ns, dt);
    add_noise(&mut t.data, 1.0, seed);
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn ricker_peaks_at_centre() {
        assert_eq!(ricker(25.0, 0.0), 1.0);
        let mut tr = vec![0.0; 100];
        add_ricker(&mut tr, 0.004, 0.2, 25.0, 2.0);
        assert_eq!(tr.iter().cloned().fold(0.0f32, f32::max), 2.0);
        assert_eq!(tr.iter().position(|&v| v == 2.0), Some(50));
    }
    #[test]
    fn geometries_have_expected_counts() {
        assert_eq!(geometry::line_2d(3, 25.0, 5, 25.0).len(), 15);
        let cs = geometry::cross_spread(4, 20.0, 6, 20.0);
        assert_eq!(cs.len(), 24);
        assert!((cs[0].offset - cs[0].distance()).abs() < 1e-9);
    }
    #[test]
    fn noise_is_seeded() {
        let a = noise_traces(geometry::line_2d(1, 1.0, 2, 1.0), 10, 0.004, 7);
        let b = noise_traces(geometry::line_2d(1, 1.0, 2, 1.0), 10, 0.004, 7);
        assert_eq!(a, b);
        assert!(rms(&a.data) > 0.3);
    }
}
