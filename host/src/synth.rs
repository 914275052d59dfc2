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

/// Relative L2 difference ||a - b|| / ||b|| in f64 (||a - b|| where b is all zeros): how far a
/// result is from its reference.
pub fn rel_l2(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len(), "rel_l2 of slices of different lengths");
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let d = x as f64 - y as f64;
        num += d * d;
        den += (y as f64) * (y as f64);
    }
    if den == 0.0 { num.sqrt() } else { (num / den).sqrt() }
}

/// Size of the synthetic surveys built with fixed shapes (e.g. the NLBF gathers of
/// [`crate::nlbf::synth`]): `small` for CPU-only machines, `paper` for the papers' workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Size {
    /// Small enough for a CPU-only CI machine (seconds).
    Small,
    /// The papers' workloads.
    Paper,
}

impl std::str::FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "small" => Ok(Self::Small),
            "paper" => Ok(Self::Paper),
            o => Err(format!("unknown size `{o}` (expected small or paper)")),
        }
    }
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
        scaled_diffractor(traces, x, y, z, v, f, 1.0);
    }

    /// [`diffractor`] with amplitude `amp` at normal incidence (z^2 / (rs rr) = 1).
    #[allow(clippy::too_many_arguments)]
    pub fn scaled_diffractor(traces: &mut TraceSet, x: f64, y: f64, z: f64, v: f64, f: f32, amp: f32) {
        let (dt, t_first) = (traces.dt, traces.t0);
        for i in 0..traces.len() {
            let h = traces.headers[i];
            let rs = ((h.sx - x).powi(2) + (h.sy - y).powi(2) + z * z).sqrt();
            let rr = ((h.gx - x).powi(2) + (h.gy - y).powi(2) + z * z).sqrt();
            let t = (rs + rr) / v;
            let a = amp * (z * z / (rs * rr)) as f32;
            add_ricker(traces.trace_mut(i), dt, t as f32 - t_first, f, a);
        }
    }

    /// A point scatterer (for [`scatterers`]): position (m) and amplitude.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct Scatterer {
        pub x: f64,
        pub y: f64,
        pub z: f64,
        pub amp: f32,
    }

    /// Scattered noise: `n` point scatterers at uniformly random positions in the box
    /// `[x0, x1] x [y0, y1] x [z0, z1]` (m) with random amplitudes of either sign and magnitude in
    /// [amp/4, amp], in constant velocity `v` (m/s), Ricker of peak frequency `f` (Hz). Returns the
    /// scatterers placed (seeded: the same seed gives the same scatterers).
    #[allow(clippy::too_many_arguments)]
    pub fn scatterers(traces: &mut TraceSet, n: usize, (x0, x1): (f64, f64), (y0, y1): (f64, f64), (z0, z1): (f64, f64),
        v: f64, f: f32, amp: f32, seed: u64) -> Vec<Scatterer> {
        let mut r = rng(seed);
        let mut uni = |a: f64, b: f64| if b > a { r.random_range(a..b) } else { a };
        let placed: Vec<Scatterer> = (0..n)
            .map(|_| {
                let (x, y, z) = (uni(x0, x1), uni(y0, y1), uni(z0, z1));
                let mag = uni(0.25, 1.0) as f32 * amp;
                Scatterer { x, y, z, amp: if uni(0.0, 1.0) < 0.5 { -mag } else { mag } }
            })
            .collect();
        for s in &placed {
            scaled_diffractor(traces, s.x, s.y, s.z, v, f, s.amp);
        }
        placed
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

    /// A header quantity used as an event coordinate.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Coord {
        SourceX,
        SourceY,
        GroupX,
        GroupY,
        MidpointX,
        MidpointY,
        /// Signed offset as stored in the header (m).
        Offset,
        /// Source-receiver distance from the coordinates (m).
        Distance,
        /// Half the source-to-receiver vector (m), the usual 3D offset coordinates.
        HalfOffsetX,
        HalfOffsetY,
        /// Station and ensemble numbers, as numbers.
        SourceStation,
        ReceiverStation,
        Cdp,
        Inline,
        Crossline,
    }

    impl Coord {
        pub fn of(self, h: &TraceHeader) -> f64 {
            match self {
                Coord::SourceX => h.sx,
                Coord::SourceY => h.sy,
                Coord::GroupX => h.gx,
                Coord::GroupY => h.gy,
                Coord::MidpointX => h.midpoint().0,
                Coord::MidpointY => h.midpoint().1,
                Coord::Offset => h.offset,
                Coord::Distance => h.distance(),
                Coord::HalfOffsetX => 0.5 * (h.gx - h.sx),
                Coord::HalfOffsetY => 0.5 * (h.gy - h.sy),
                Coord::SourceStation => h.source_station as f64,
                Coord::ReceiverStation => h.receiver_station as f64,
                Coord::Cdp => h.cdp as f64,
                Coord::Inline => h.inline as f64,
                Coord::Crossline => h.crossline as f64,
            }
        }
    }

    /// An event with a local second-order traveltime surface around a reference point (x0, y0)
    /// in the coordinates `x`, `y`:
    /// t = t0 + a dx + b dy + c dx dy + d dx^2 + e dy^2, dx = x - x0, dy = y - y0
    /// (a, b: slopes in s per coordinate unit; c, d, e: curvatures in s per unit^2). This is the
    /// 2+2+1 semblance search's model (paper 1, the NLBF moveout): a plane wave with curvature.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct LocalEvent {
        pub x: Coord,
        pub y: Coord,
        pub x0: f64,
        pub y0: f64,
        /// Two-way time at the reference point (s).
        pub t0: f64,
        pub a: f64,
        pub b: f64,
        pub c: f64,
        pub d: f64,
        pub e: f64,
        /// Ricker peak frequency (Hz) and amplitude.
        pub freq: f32,
        pub amp: f32,
    }

    impl LocalEvent {
        /// A flat event at `t0` around the coordinates of trace `reference` of `traces`.
        pub fn around(traces: &TraceSet, reference: usize, x: Coord, y: Coord, t0: f64, freq: f32, amp: f32) -> Self {
            let h = &traces.headers[reference];
            LocalEvent { x, y, x0: x.of(h), y0: y.of(h), t0, a: 0.0, b: 0.0, c: 0.0, d: 0.0, e: 0.0, freq, amp }
        }
        /// Sets the slopes (s/unit) and curvatures (s/unit^2).
        pub fn with_moveout(mut self, a: f64, b: f64, c: f64, d: f64, e: f64) -> Self {
            (self.a, self.b, self.c, self.d, self.e) = (a, b, c, d, e);
            self
        }
        /// Two-way time (s) of the event on a trace with header `h`.
        pub fn traveltime(&self, h: &TraceHeader) -> f64 {
            let (dx, dy) = (self.x.of(h) - self.x0, self.y.of(h) - self.y0);
            self.t0 + self.a * dx + self.b * dy + self.c * dx * dy + self.d * dx * dx + self.e * dy * dy
        }
    }

    /// Adds a [`LocalEvent`] to every trace (a Ricker at its traveltime, where it falls in the
    /// record).
    pub fn local_event(traces: &mut TraceSet, ev: &LocalEvent) {
        let (dt, t_first) = (traces.dt, traces.t0);
        for i in 0..traces.len() {
            let t = ev.traveltime(&traces.headers[i]) as f32;
            add_ricker(traces.trace_mut(i), dt, t - t_first, ev.freq, ev.amp);
        }
    }
}

/// Post-stack 3D cubes (inline x crossline x time) with dipping planar and curved events, for
/// the wave-packet work.
pub mod cube {
    use super::*;

    /// A regular post-stack grid: `nx` inlines (x, slowest) by `ny` crosslines by `nt` samples.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub struct CubeGeometry {
        pub nx: usize,
        pub ny: usize,
        pub nt: usize,
        /// Bin sizes (m) and sample interval (s).
        pub dx: f64,
        pub dy: f64,
        pub dt: f32,
    }

    impl CubeGeometry {
        /// Zero-offset traces at the bin centres: trace `ix * ny + iy` has inline ix + 1,
        /// crossline iy + 1, source = receiver = (ix dx, iy dy).
        pub fn headers(&self) -> Vec<TraceHeader> {
            let mut h = Vec::with_capacity(self.nx * self.ny);
            for ix in 0..self.nx {
                for iy in 0..self.ny {
                    let (x, y) = (ix as f64 * self.dx, iy as f64 * self.dy);
                    h.push(TraceHeader { sx: x, sy: y, gx: x, gy: y, inline: ix as i32 + 1, crossline: iy as i32 + 1,
                        cdp: (ix * self.ny + iy) as i32 + 1, ..Default::default() });
                }
            }
            h
        }
        /// The cube's centre (m).
        pub fn centre(&self) -> (f64, f64) { (0.5 * (self.nx as f64 - 1.0) * self.dx, 0.5 * (self.ny as f64 - 1.0) * self.dy) }
    }

    /// An event in a post-stack cube; times are two-way (s), positions in metres.
    #[derive(Debug, Clone, Copy, PartialEq)]
    pub enum CubeEvent {
        /// A dipping plane: t = t0 + px (x - xc) + py (y - yc) around the cube centre (xc, yc);
        /// px, py in s/m.
        Plane { t0: f64, px: f64, py: f64, amp: f32 },
        /// A curved (quadratic) surface around the centre: the plane plus
        /// cxx (x - xc)^2 + cxy (x - xc)(y - yc) + cyy (y - yc)^2 (s/m^2): a syncline for positive
        /// curvature, an anticline (dome) for negative.
        Curved { t0: f64, px: f64, py: f64, cxx: f64, cxy: f64, cyy: f64, amp: f32 },
        /// A zero-offset diffraction from a point at (x, y) with apex time t0 in velocity v (m/s):
        /// t = sqrt(t0^2 + (2 r / v)^2).
        Diffraction { x: f64, y: f64, t0: f64, v: f64, amp: f32 },
    }

    impl CubeEvent {
        pub fn traveltime(&self, x: f64, y: f64, centre: (f64, f64)) -> f64 {
            let (dx, dy) = (x - centre.0, y - centre.1);
            match *self {
                CubeEvent::Plane { t0, px, py, .. } => t0 + px * dx + py * dy,
                CubeEvent::Curved { t0, px, py, cxx, cxy, cyy, .. } => t0 + px * dx + py * dy + cxx * dx * dx + cxy * dx * dy + cyy * dy * dy,
                CubeEvent::Diffraction { x: xd, y: yd, t0, v, .. } => {
                    let r2 = (x - xd).powi(2) + (y - yd).powi(2);
                    (t0 * t0 + 4.0 * r2 / (v * v)).sqrt()
                }
            }
        }
        pub fn amp(&self) -> f32 {
            match *self {
                CubeEvent::Plane { amp, .. } | CubeEvent::Curved { amp, .. } | CubeEvent::Diffraction { amp, .. } => amp,
            }
        }
    }

    /// Builds the cube: a Ricker of peak frequency `freq` (Hz) along every event, plus Gaussian
    /// noise of standard deviation `noise` (seeded). Trace-major, inline slowest, so `data` is the
    /// (nx, ny, nt) array in C order.
    pub fn post_stack(geom: &CubeGeometry, events: &[CubeEvent], freq: f32, noise: f32, seed: u64) -> TraceSet {
        use rayon::prelude::*;
        let mut t = TraceSet::zeros(geom.headers(), geom.nt, geom.dt);
        let centre = geom.centre();
        let headers = &t.headers;
        t.data.par_chunks_mut(geom.nt).zip(headers.par_iter()).for_each(|(trace, h)| {
            for ev in events {
                let tt = ev.traveltime(h.sx, h.sy, centre) as f32;
                add_ricker(trace, geom.dt, tt, freq, ev.amp());
            }
        });
        if noise > 0.0 {
            add_noise(&mut t.data, noise, seed);
        }
        t
    }

    /// A standard set of events for a cube: two planes dipping in different directions, a
    /// syncline, a dome and a diffraction, scaled to the cube's extent and record length so every
    /// event stays in the record and dips stay unaliased at `freq` (a dip of at most a quarter
    /// period per bin).
    pub fn standard_events(geom: &CubeGeometry, freq: f32) -> Vec<CubeEvent> {
        let t_len = geom.nt as f64 * geom.dt as f64;
        let (xc, yc) = geom.centre();
        let half = xc.max(yc).max(geom.dx);
        // Dip limit: a quarter period per bin (unaliased, visible); at most 15% of the record
        // across the cube.
        let pmax = (0.25 / freq as f64 / geom.dx.max(geom.dy)).min(0.15 * t_len / half);
        let curv = 0.1 * t_len / (half * half);
        vec![
            CubeEvent::Plane { t0: 0.2 * t_len, px: 0.6 * pmax, py: 0.0, amp: 1.0 },
            CubeEvent::Plane { t0: 0.4 * t_len, px: -0.3 * pmax, py: 0.5 * pmax, amp: -0.8 },
            CubeEvent::Curved { t0: 0.55 * t_len, px: 0.0, py: 0.0, cxx: curv, cxy: 0.0, cyy: 0.5 * curv, amp: 0.9 },
            CubeEvent::Curved { t0: 0.75 * t_len, px: 0.2 * pmax, py: 0.0, cxx: -0.6 * curv, cxy: 0.2 * curv, cyy: -0.6 * curv, amp: -0.7 },
            CubeEvent::Diffraction { x: xc + 0.3 * xc, y: yc - 0.2 * yc, t0: 0.6 * t_len, v: 2.0 * half / (0.45 * t_len), amp: 0.8 },
        ]
    }
}

/// Ready-made data sets (what `seisgpu synth` writes), each from a handful of parameters.
pub mod datasets {
    use super::*;
    use events::{Coord, LocalEvent};

    /// Which data set.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Kind {
        /// A 2D line of shot gathers with three hyperbolic reflections.
        Line2d,
        /// A 3D cross-spread with a hyperbolic reflection, a dipping curved local event and a
        /// deeper hyperbola (the 2+2+1 search's test data).
        CrossSpread,
        /// A 2D line over a point diffractor (plus optional random scatterers), for migration.
        Diffractor,
        /// A post-stack 3D cube with dipping planes, a syncline, a dome and a diffraction.
        Cube,
        /// A velocity model: RMS velocity per CMP along a line, one trace per CDP
        /// (`crate::velocity::examples`, the laterally varying example).
        Velocity,
    }

    impl std::str::FromStr for Kind {
        type Err = String;
        fn from_str(s: &str) -> Result<Self, String> {
            match s {
                "line2d" | "line" => Ok(Kind::Line2d),
                "cross-spread" | "crossspread" => Ok(Kind::CrossSpread),
                "diffractor" => Ok(Kind::Diffractor),
                "cube" => Ok(Kind::Cube),
                "velocity" => Ok(Kind::Velocity),
                o => Err(format!("unknown data set `{o}` (expected line2d, cross-spread, diffractor, cube or velocity)")),
            }
        }
    }

    /// Parameters of every data set (each uses the ones that apply to it).
    #[derive(Debug, Clone, PartialEq)]
    pub struct Params {
        /// Samples per trace and sample interval (s).
        pub ns: usize,
        pub dt: f32,
        /// Ricker peak frequency (Hz).
        pub freq: f32,
        /// Gaussian noise standard deviation, relative to the strongest event's amplitude (1).
        pub noise: f32,
        pub seed: u64,
        /// Sources and receivers (per line) and their spacings (m).
        pub sources: usize,
        pub receivers: usize,
        pub source_spacing: f64,
        pub receiver_spacing: f64,
        /// Velocity (m/s) of the first event (deeper events are faster) or of the medium.
        pub velocity: f64,
        /// Diffractor depth (m).
        pub depth: f64,
        /// Random point scatterers added (diffractor data set).
        pub scatterers: usize,
        /// Cube: inlines, crosslines and bin size (m).
        pub nx: usize,
        pub ny: usize,
        pub bin: f64,
    }

    impl Params {
        /// The defaults of each data set: a few MB, seconds to build on two cores.
        pub fn default_for(kind: Kind) -> Self {
            let base = Params { ns: 751, dt: 0.004, freq: 25.0, noise: 0.05, seed: 1, sources: 5, receivers: 96,
                source_spacing: 200.0, receiver_spacing: 25.0, velocity: 2000.0, depth: 800.0, scatterers: 0,
                nx: 64, ny: 48, bin: 12.5 };
            match kind {
                Kind::Line2d => base,
                Kind::CrossSpread => Params { ns: 501, sources: 48, receivers: 64, source_spacing: 25.0, ..base },
                Kind::Diffractor => Params { sources: 11, source_spacing: 150.0, receivers: 121, receiver_spacing: 12.5, ..base },
                Kind::Cube => Params { ns: 256, freq: 30.0, ..base },
                Kind::Velocity => Params { velocity: 1500.0, nx: 41, bin: 25.0, ..base },
            }
        }

        /// Checks the parameters, naming the one that is wrong.
        pub fn validate(&self, kind: Kind) -> Result<(), String> {
            let pos = |name: &str, v: f64| if v > 0.0 && v.is_finite() { Ok(()) } else { Err(format!("{name} must be positive, got {v}")) };
            if self.ns < 2 {
                return Err(format!("samples per trace must be at least 2, got {}", self.ns));
            }
            pos("sample interval", self.dt as f64)?;
            pos("peak frequency", self.freq as f64)?;
            if !(self.noise >= 0.0 && self.noise.is_finite()) {
                return Err(format!("noise must be zero or positive, got {}", self.noise));
            }
            if self.freq * self.dt > 0.25 {
                return Err(format!("peak frequency {} Hz is above a quarter of the sampling rate ({} Hz at dt {} ms): the wavelet would alias",
                    self.freq, 0.25 / self.dt, self.dt * 1e3));
            }
            match kind {
                Kind::Cube => {
                    if self.nx == 0 || self.ny == 0 {
                        return Err(format!("cube needs inlines and crosslines, got {} x {}", self.nx, self.ny));
                    }
                    pos("bin size", self.bin)?;
                }
                Kind::Velocity => {
                    if self.nx == 0 {
                        return Err("velocity model needs at least one CMP".into());
                    }
                    pos("CMP spacing", self.bin)?;
                    pos("velocity", self.velocity)?;
                }
                _ => {
                    if self.sources == 0 || self.receivers == 0 {
                        return Err(format!("needs sources and receivers, got {} and {}", self.sources, self.receivers));
                    }
                    pos("source spacing", self.source_spacing)?;
                    pos("receiver spacing", self.receiver_spacing)?;
                    pos("velocity", self.velocity)?;
                    if kind == Kind::Diffractor {
                        pos("diffractor depth", self.depth)?;
                    }
                }
            }
            Ok(())
        }
    }

    /// Builds a data set (deterministic for given parameters).
    pub fn build(kind: Kind, p: &Params) -> Result<TraceSet, String> {
        p.validate(kind)?;
        let t_len = p.ns as f64 * p.dt as f64;
        let v = p.velocity;
        let mut t = match kind {
            Kind::Line2d => {
                let mut t = TraceSet::zeros(geometry::line_2d(p.sources, p.source_spacing, p.receivers, p.receiver_spacing), p.ns, p.dt);
                for (frac, vf, amp) in [(0.25, 1.0, 1.0), (0.5, 1.2, -0.7), (0.75, 1.45, 0.5)] {
                    events::hyperbolic_reflection(&mut t, (frac * t_len) as f32, (v * vf) as f32, p.freq, amp);
                }
                t
            }
            Kind::CrossSpread => {
                let mut t = TraceSet::zeros(geometry::cross_spread(p.sources, p.source_spacing, p.receivers, p.receiver_spacing), p.ns, p.dt);
                events::hyperbolic_reflection(&mut t, (0.3 * t_len) as f32, v as f32, p.freq, 1.0);
                // A dipping, curved event around the spread centre in (receiver x, source y):
                // slopes and curvatures scaled so it moves by at most ~15% of the record.
                let half = 0.5 * (p.receivers as f64 * p.receiver_spacing).max(p.sources as f64 * p.source_spacing);
                let (slope, curv) = (0.05 * t_len / half, 0.05 * t_len / (half * half));
                let centre = TraceHeader::default();
                let ev = LocalEvent { x: Coord::GroupX, y: Coord::SourceY, x0: centre.gx, y0: centre.sy, t0: 0.55 * t_len,
                    a: slope, b: -0.5 * slope, c: 0.3 * curv, d: curv, e: 0.6 * curv, freq: p.freq, amp: -0.8 };
                events::local_event(&mut t, &ev);
                events::hyperbolic_reflection(&mut t, (0.8 * t_len) as f32, (1.3 * v) as f32, p.freq, 0.6);
                t
            }
            Kind::Diffractor => {
                let mut t = TraceSet::zeros(geometry::line_2d(p.sources, p.source_spacing, p.receivers, p.receiver_spacing), p.ns, p.dt);
                let xc = 0.5 * (p.receivers as f64 - 1.0) * p.receiver_spacing;
                events::diffractor(&mut t, xc, 0.0, p.depth, v, p.freq);
                if p.scatterers > 0 {
                    let x1 = (p.receivers as f64 - 1.0) * p.receiver_spacing;
                    let zmax = 0.45 * v * t_len; // two-way time of the deepest one inside the record
                    events::scatterers(&mut t, p.scatterers, (0.0, x1), (0.0, 0.0), (0.2 * zmax, zmax), v, p.freq, 0.5, p.seed ^ 0x5CA7);
                }
                t
            }
            Kind::Cube => {
                let g = cube::CubeGeometry { nx: p.nx, ny: p.ny, nt: p.ns, dx: p.bin, dy: p.bin, dt: p.dt };
                return Ok(cube::post_stack(&g, &cube::standard_events(&g, p.freq), p.freq, p.noise, p.seed));
            }
            Kind::Velocity => {
                use crate::velocity::examples::{traces, Example, ExampleParams};
                let e = ExampleParams { cmps: p.nx, cmp_spacing: p.bin, first_cdp: 1, ns: p.ns, dt: p.dt, v0: p.velocity as f32 };
                return Ok(traces(Example::Lateral, &e));
            }
        };
        if p.noise > 0.0 {
            add_noise(&mut t.data, p.noise, p.seed);
        }
        Ok(t)
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
    /// Index of the largest |sample| of a trace.
    fn peak(tr: &[f32]) -> usize {
        (0..tr.len()).max_by(|&a, &b| tr[a].abs().total_cmp(&tr[b].abs())).unwrap()
    }
    #[test]
    fn local_event_follows_its_traveltime_surface() {
        use events::{Coord, LocalEvent};
        let mut t = TraceSet::zeros(geometry::cross_spread(9, 50.0, 11, 50.0), 400, 0.004);
        let ev = LocalEvent::around(&t, 4 * 11 + 5, Coord::GroupX, Coord::SourceY, 0.6, 25.0, 1.0)
            .with_moveout(2e-4, -1e-4, 1e-7, 3e-7, 2e-7);
        events::local_event(&mut t, &ev);
        assert_eq!((ev.x0, ev.y0), (0.0, 0.0));
        for i in 0..t.len() {
            let h = t.headers[i];
            let (x, y) = (h.gx, h.sy);
            let want = 0.6 + 2e-4 * x - 1e-4 * y + 1e-7 * x * y + 3e-7 * x * x + 2e-7 * y * y;
            assert!((ev.traveltime(&h) - want).abs() < 1e-12);
            // The peak sample is the one nearest the traveltime (either one at a half-sample tie).
            assert!((peak(t.trace(i)) as f64 * 0.004 - want).abs() <= 0.002 + 1e-9, "trace {i}");
        }
    }
    #[test]
    fn scatterers_are_seeded_and_inside_the_box() {
        let g = geometry::line_2d(2, 100.0, 30, 25.0);
        let mut a = TraceSet::zeros(g.clone(), 500, 0.004);
        let mut b = TraceSet::zeros(g, 500, 0.004);
        let pa = events::scatterers(&mut a, 7, (0.0, 700.0), (0.0, 0.0), (200.0, 800.0), 2000.0, 20.0, 1.0, 5);
        let pb = events::scatterers(&mut b, 7, (0.0, 700.0), (0.0, 0.0), (200.0, 800.0), 2000.0, 20.0, 1.0, 5);
        assert_eq!((pa.clone(), &a.data), (pb, &b.data));
        assert!(pa.iter().all(|s| (0.0..700.0).contains(&s.x) && s.y == 0.0 && (200.0..800.0).contains(&s.z)));
        assert!(pa.iter().all(|s| (0.25..=1.0).contains(&s.amp.abs())));
        assert!(rms(&a.data) > 0.0);
    }
    #[test]
    fn cube_events_sit_at_their_times() {
        use cube::*;
        let g = CubeGeometry { nx: 21, ny: 17, nt: 250, dx: 12.5, dy: 12.5, dt: 0.004 };
        let ev = [CubeEvent::Plane { t0: 0.3, px: 2e-4, py: -1e-4, amp: 1.0 }];
        let t = post_stack(&g, &ev, 25.0, 0.0, 1);
        assert_eq!((t.len(), t.ns), (21 * 17, 250));
        let (xc, yc) = g.centre();
        for i in [0, 100, 21 * 17 - 1] {
            let h = t.headers[i];
            let want = 0.3 + 2e-4 * (h.sx - xc) - 1e-4 * (h.sy - yc);
            assert!((peak(t.trace(i)) as f64 * 0.004 - want).abs() <= 0.002 + 1e-9, "trace {i}");
            assert_eq!(i, ((h.inline - 1) * 17 + h.crossline - 1) as usize);
        }
        // The standard events stay inside the record and the cube is deterministic.
        let evs = standard_events(&g, 25.0);
        let a = post_stack(&g, &evs, 25.0, 0.1, 9);
        assert_eq!(a, post_stack(&g, &evs, 25.0, 0.1, 9));
        for e in &evs {
            for h in &a.headers {
                let tt = e.traveltime(h.sx, h.sy, g.centre());
                assert!(tt > 0.05 && tt < 0.95, "{e:?} at {tt}");
            }
        }
    }
    #[test]
    fn every_data_set_builds_small() {
        use datasets::*;
        for kind in [Kind::Line2d, Kind::CrossSpread, Kind::Diffractor, Kind::Cube, Kind::Velocity] {
            let mut p = Params::default_for(kind);
            (p.ns, p.sources, p.receivers, p.nx, p.ny, p.scatterers) = (200, 3, 20, 8, 6, 3);
            let t = build(kind, &p).unwrap();
            t.validate("data set").unwrap();
            assert!(rms(&t.data) > p.noise * 0.5, "{kind:?}");
            assert_eq!(t, build(kind, &p).unwrap());
        }
        let mut p = Params::default_for(Kind::Line2d);
        p.freq = 100.0;
        assert!(build(Kind::Line2d, &p).unwrap_err().contains("alias"));
        p = Params::default_for(Kind::Diffractor);
        p.depth = -1.0;
        assert!(build(Kind::Diffractor, &p).unwrap_err().contains("diffractor depth"));
    }
    #[test]
    fn noise_is_seeded() {
        let a = noise_traces(geometry::line_2d(1, 1.0, 2, 1.0), 10, 0.004, 7);
        let b = noise_traces(geometry::line_2d(1, 1.0, 2, 1.0), 10, 0.004, 7);
        assert_eq!(a, b);
        assert!(rms(&a.data) > 0.3);
    }
}
