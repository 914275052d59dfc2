//! Search ranges taken from the data, and the parameter traces the search leaves unestimated.
//!
//! The operator dt = A dx + B dy + C dx dy + D dx^2 + E dy^2 (s, offsets in m) of an event of
//! apparent velocity v has |A| = 1/v along x: the A and B ranges reach +-1/v_min, so every event
//! at least as fast as the slowest one asked for (the direct wave and refractions at the default
//! 1400 m/s) is kept. Steps are those of the paper's searches, in terms of the data: one A step
//! moves the aperture's edge trace by half a sample (dt / aperture, the paper's 1e-5 s/m for its
//! 400 m aperture at 4 ms), one D step by a quarter sample (the paper's 0.25e-7 s/m^2), five steps
//! each way for the curvatures C, D, E.

use rayon::prelude::*;

use super::{coordinates, Coordinates, EnhanceSetup, Estimate, EstimateParams, Range, Result, SearchSpace};
use crate::traces::TraceSet;
use gpu_kernels::nlbf as k;

/// Default smallest apparent velocity of the search (m/s): below water velocity, so the direct
/// wave of a marine shot and every refraction stay in range.
pub const DEFAULT_MIN_VELOCITY: f64 = 1400.0;

/// Most values of A or B a derived range has (a coarser step beyond it).
pub const MAX_SLOPE_VALUES: usize = 401;

/// The search space for `traces` with the apertures of `p`, apparent velocities down to
/// `min_velocity` (m/s), and a line describing it (trace spacing, sample interval, ranges).
/// An axis along which every trace has the same coordinate (a single shot's source axis) gets
/// B = C = E = 0.
pub fn from_data(traces: &TraceSet, p: &EstimateParams, min_velocity: f64) -> Result<(SearchSpace, String)> {
    if !(min_velocity.is_finite() && min_velocity > 0.0) {
        return super::invalid(format!("minimum apparent velocity {min_velocity} m/s must be positive"));
    }
    if !(traces.dt > 0.0 && traces.dt.is_finite()) {
        return super::invalid(format!("input traces: sample interval {} s is not positive", traces.dt));
    }
    let (x, y) = coordinates(&traces.headers, &p.coords)?;
    let (sx, sy) = (spacing(&x), spacing(&y));
    let dt = traces.dt as f64;
    let pmax = 1.0 / min_velocity;
    let slope = |aperture: f64, spacing: f64| {
        let mut step = dt / aperture.max(2.0 * spacing).max(1e-9);
        if 2.0 * pmax / step + 1.0 > MAX_SLOPE_VALUES as f64 {
            step = 2.0 * pmax / (MAX_SLOPE_VALUES - 1) as f64;
        }
        let n = (pmax / step).ceil();
        Range::new(-n * step, step, n * step)
    };
    let curvature = |h2: f64| {
        let step = dt / (4.0 * h2.max(1e-9));
        Range::new(-5.0 * step, step, 5.0 * step)
    };
    let (hx, hy) = (p.aperture_ad.x / 2.0, p.aperture_be.y / 2.0);
    let (a, d) = match sx {
        Some(s) => (slope(p.aperture_ad.x, s), curvature(hx * hx)),
        None => (Range::fixed(0.0), Range::fixed(0.0)),
    };
    let (b, e) = match sy {
        Some(s) => (slope(p.aperture_be.y, s), curvature(hy * hy)),
        None => (Range::fixed(0.0), Range::fixed(0.0)),
    };
    let c = if sx.is_some() && sy.is_some() { curvature(p.aperture_c.x / 2.0 * p.aperture_c.y / 2.0) } else { Range::fixed(0.0) };
    let space = SearchSpace { a, b, c, d, e };
    let fmt = |s: Option<f64>| s.map_or("one position".to_string(), |v| format!("{v:.1} m"));
    let line = format!("search ranges from the data (trace spacing x {}, y {}; sample interval {} ms; apparent velocities down \
        to {min_velocity} m/s; set --a .. --e or --min-velocity to choose them): A {} s/m ({} values), B {} s/m ({}), C {} s/m^2 \
        ({}), D {} s/m^2 ({}), E {} s/m^2 ({})", fmt(sx), fmt(sy), dt * 1e3, a, a.count(), b, b.count(), c, c.count(), d,
        d.count(), e, e.count());
    Ok((space, line))
}

/// The trace spacing along one coordinate (m): the median gap between its distinct values
/// (closer than 1 mm counting as one); `None` when every trace has the same value.
pub fn spacing(v: &[f64]) -> Option<f64> {
    let mut u: Vec<f64> = v.to_vec();
    u.par_sort_unstable_by(f64::total_cmp);
    let mut gaps: Vec<f64> = u.windows(2).map(|w| w[1] - w[0]).filter(|g| *g > 1e-3).collect();
    if gaps.is_empty() {
        return None;
    }
    gaps.sort_unstable_by(f64::total_cmp);
    Some(gaps[gaps.len() / 2])
}

/// Parameter traces with an empty aperture in any phase (nothing to search there: an offset gap,
/// the edge of the spread), from the aperture offsets: `[p]` true when p is unestimated.
pub fn unestimated(off: &[u32], np: usize) -> Vec<bool> {
    (0..np).map(|p| (0..3).any(|phase| off[phase * (np + 1) + p + 1] == off[phase * (np + 1) + p])).collect()
}

/// Whether enhancing the trace at (x, y) (relative to the estimate's origin) would read the
/// operator of an unestimated parameter trace: any of the four grid nodes the interpolation uses.
pub fn touches_unestimated(est: &Estimate, x: f32, y: f32) -> bool {
    if !est.unestimated.iter().any(|&u| u) {
        return false;
    }
    let g = &est.grid;
    let (ix, _) = k::grid_cell(x, (1.0 / g.sx) as f32, g.nx as u32);
    let (iy, _) = k::grid_cell(y, (1.0 / g.sy) as f32, g.ny as u32);
    let (ix, iy) = (ix as usize, iy as usize);
    let (ix1, iy1) = ((ix + 1).min(g.nx - 1), (iy + 1).min(g.ny - 1));
    [(ix, iy), (ix1, iy), (ix, iy1), (ix1, iy1)].iter().any(|&(i, j)| est.unestimated[j * g.nx + i])
}

/// Copies the input into the enhanced output for the traces whose operator would come from an
/// unestimated parameter trace (they are left as recorded, not stacked along a made-up operator);
/// `data` holds the setup's traces (its outputs first), `out` its outputs. Returns how many.
pub fn copy_unestimated(setup: &EnhanceSetup, est: &Estimate, data: &[f32], out: &mut [f32]) -> usize {
    let ns = setup.ns;
    out.par_chunks_mut(ns).enumerate().filter(|(n, _)| touches_unestimated(est, setup.tx[*n], setup.ty[*n]))
        .map(|(n, row)| row.copy_from_slice(&data[n * ns..(n + 1) * ns])).count()
}

/// How many traces of `traces` [`copy_unestimated`] leaves as recorded (for the summary).
pub fn copied_traces(traces: &TraceSet, coords: &Coordinates, est: &Estimate) -> Result<usize> {
    let (x, y) = coordinates(&traces.headers, coords)?;
    Ok(x.iter().zip(&y).filter(|(x, y)| touches_unestimated(est, (**x - est.origin.0) as f32, (**y - est.origin.1) as f32)).count())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::geometry;

    #[test]
    fn the_paper_steps_come_back_from_its_geometry() {
        // The paper's 2D line: 25 m spacing, 4 ms, apertures 400 x 35, 35 x 400, 400 x 400 m.
        let tr = crate::synth::noise_traces(geometry::line_2d(41, 25.0, 41, 25.0), 50, 0.004, 1);
        let p = super::super::synth::params_synthetic_2d();
        let (s, line) = from_data(&tr, &p, 1400.0).unwrap();
        let near = |a: f64, b: f64| (a / b - 1.0).abs() < 1e-6;
        assert!(near(s.a.step, 1e-5) && near(s.d.step, 0.25e-7) && near(s.c.step, 0.25e-7), "{s:?}");
        assert!(s.a.max >= 1.0 / 1400.0 && s.a.max < 1.0 / 1400.0 + 1e-5 && s.a.min == -s.a.max, "{s:?}");
        assert_eq!((s.d.count(), s.e.count(), s.c.count()), (11, 11, 11));
        assert!(line.contains("1400 m/s") && line.contains("25.0 m"), "{line}");
        // A single shot: the source axis is one position, so B = C = E = 0.
        let last = tr.headers[tr.len() - 1].sx;
        let shot: Vec<_> = tr.headers.iter().filter(|h| h.sx == last).copied().collect();
        let one = crate::synth::noise_traces(shot, 50, 0.004, 1);
        let (s, _) = from_data(&one, &p, 1400.0).unwrap();
        assert_eq!((s.b.count(), s.c.count(), s.e.count()), (1, 1, 1));
        assert!(s.a.count() > 100);
        assert!(from_data(&one, &p, -1400.0).is_err());
    }
}
