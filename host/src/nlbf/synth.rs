//! Synthetic NLBF workloads with fixed seeds: the two benchmark gathers (full size
//! and a small version for CPU-only machines) and gathers with events of known local operators.

use rand::RngExt;
use rayon::prelude::*;

use super::{Aperture, Coordinates, EstimateParams, Range, SearchSpace};
use crate::synth::Size;
use crate::synth::{self, geometry};
use crate::traces::TraceSet;

/// Gaussian noise of standard deviation `sigma`, one seeded generator per trace (parallel, and
/// the same for any thread count).
pub fn add_noise_par(t: &mut TraceSet, sigma: f32, seed: u64) {
    let ns = t.ns;
    t.data.par_chunks_mut(ns).enumerate().for_each(|(i, row)| {
        let mut r = synth::rng(seed ^ (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
        for v in row.iter_mut() {
            let u1: f32 = r.random_range(f32::EPSILON..1.0);
            let u2: f32 = r.random_range(0.0..1.0);
            *v += sigma * (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos();
        }
    });
}

/// One event whose traveltime over the gather is t(x, y) = t0 + operator(x - xc, y - yc) (eq. 1):
/// at the parameter trace (xc, yc) its local operator is exactly (a, b, c, d, e).
#[derive(Debug, Clone, Copy)]
pub struct Event {
    pub t0: f32,
    pub centre: (f32, f32),
    pub op: [f32; 5],
    pub amp: f32,
}

/// Adds Ricker events (peak frequency `f` Hz) at the traveltimes of `events`, with trace
/// coordinates `x`, `y` (m, the same frame as the events' centres).
pub fn add_events(t: &mut TraceSet, x: &[f32], y: &[f32], events: &[Event], f: f32) {
    let (ns, dt) = (t.ns, t.dt);
    t.data.par_chunks_mut(ns).enumerate().for_each(|(i, row)| {
        for ev in events {
            let (dx, dy) = (x[i] - ev.centre.0, y[i] - ev.centre.1);
            let o = ev.op;
            let tt = ev.t0 + gpu_kernels::nlbf::moveout(o[0], o[1], o[2], o[3], o[4], dx, dy);
            synth::add_ricker(row, dt, tt, f, ev.amp);
        }
    });
}

/// The paper's 2D search: A, B in [-1e-4 : 1e-5 : 1e-4] s/m, C, D, E in
/// [-1.25e-7 : 0.25e-7 : 1.25e-7] s/m^2, parameter traces every 140 m, apertures 400 x 35,
/// 35 x 400, 400 x 400 m, window 11 samples; x = receiver, y = source.
pub fn params_synthetic_2d() -> EstimateParams {
    let cde = Range::new(-1.25e-7, 0.25e-7, 1.25e-7);
    EstimateParams {
        coords: Coordinates::LINE_2D,
        spacing_x: 140.0,
        spacing_y: 140.0,
        aperture_ad: Aperture { x: 400.0, y: 35.0 },
        aperture_be: Aperture { x: 35.0, y: 400.0 },
        aperture_c: Aperture { x: 400.0, y: 400.0 },
        window: 11,
        search: SearchSpace { a: Range::new(-1e-4, 1e-5, 1e-4), b: Range::new(-1e-4, 1e-5, 1e-4), c: cde, d: cde, e: cde },
    }
}

/// The paper's field-data search: A, B in [-1e-3 : 1.33e-5 : 1e-3] s/m (151 values), C, D, E as
/// in 2D, parameter traces every 50 m, apertures 300 x 35, 35 x 300, 300 x 300 m, window 11.
pub fn params_crossspread_3d() -> EstimateParams {
    let cde = Range::new(-1.25e-7, 0.25e-7, 1.25e-7);
    EstimateParams {
        coords: Coordinates::CROSS_SPREAD,
        spacing_x: 50.0,
        spacing_y: 50.0,
        aperture_ad: Aperture { x: 300.0, y: 35.0 },
        aperture_be: Aperture { x: 35.0, y: 300.0 },
        aperture_c: Aperture { x: 300.0, y: 300.0 },
        window: 11,
        search: SearchSpace { a: Range::new(-1e-3, 1.33e-5, 1e-3), b: Range::new(-1e-3, 1.33e-5, 1e-3), c: cde, d: cde, e: cde },
    }
}

/// `nlbf-synthetic-2d`: sources and receivers every 25 m on an 8 km line (321 x 321 traces), 4 ms,
/// 2.5 s (625 samples); flattish (post-NMO) reflections with gentle dips and curvatures plus
/// random noise. Small: 33 x 33 traces, 0.48 s.
pub fn synthetic_2d(size: Size) -> (TraceSet, EstimateParams) {
    let (n, ns) = match size {
        Size::Paper => (321, 625),
        Size::Small => (33, 120),
    };
    let h = geometry::line_2d(n, 25.0, n, 25.0);
    let mut t = TraceSet::zeros(h, ns, 0.004);
    let x: Vec<f32> = t.headers.iter().map(|h| h.gx as f32).collect();
    let y: Vec<f32> = t.headers.iter().map(|h| h.sx as f32).collect();
    let c = (n as f32 - 1.0) * 25.0 / 2.0;
    let dur = ns as f32 * 0.004;
    let events: Vec<Event> = [(0.18, 3e-5, -2e-5, 1e-8, -2e-8, 3e-8), (0.37, -4e-5, 1e-5, 0.0, 2e-8, -1e-8),
        (0.55, 2e-5, 3e-5, -1e-8, 0.0, 2e-8), (0.78, -1e-5, -3e-5, 2e-8, -1e-8, 0.0)]
        .iter()
        .map(|&(tf, a, b, cc, d, e)| Event { t0: tf * dur, centre: (c, c), op: [a, b, cc, d, e], amp: 1.0 })
        .collect();
    add_events(&mut t, &x, &y, &events, 20.0);
    add_noise_par(&mut t, 0.5, 2022);
    (t, params_synthetic_2d())
}

/// `nlbf-crossspread-3d`: 94 sources (along y) x 224 receivers (along x), 20 m, 2 ms, 3 s (1500
/// samples); a few curved (hyperbolic, un-NMO'd) reflections plus strong random noise, as the
/// field cross-spread. Small: 10 sources x 20 receivers, 0.128 s.
pub fn crossspread_3d(size: Size) -> (TraceSet, EstimateParams) {
    let (nsrc, nrec, ns) = match size {
        Size::Paper => (94, 224, 1500),
        Size::Small => (10, 20, 64),
    };
    let h = geometry::cross_spread(nsrc, 20.0, nrec, 20.0);
    let mut t = TraceSet::zeros(h, ns, 0.002);
    let dur = ns as f32 * 0.002;
    for (tf, v) in [(0.2f32, 1800.0f32), (0.4, 2200.0), (0.6, 2600.0), (0.8, 3000.0)] {
        synth::events::hyperbolic_reflection(&mut t, tf * dur, v, 25.0, 1.0);
    }
    add_noise_par(&mut t, 1.0, 2021);
    (t, params_crossspread_3d())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::nlbf::Setup;

    #[test]
    fn workloads_have_the_issues_shapes() {
        let p = params_crossspread_3d();
        assert_eq!(p.search.a.count(), 151);
        assert_eq!(p.search.c.count(), 11);
        let (t, p) = crossspread_3d(Size::Small);
        assert_eq!(t.len(), 10 * 20);
        let s = Setup::new(&t, &p).unwrap();
        assert_eq!(s.tables.n_ad(), 1661);
        let (t, p) = synthetic_2d(Size::Small);
        let s = Setup::new(&t, &p).unwrap();
        assert_eq!(s.tables.n_ad(), 231);
        assert_eq!((s.grid.nx, s.grid.ny), (6, 6));
    }
}
