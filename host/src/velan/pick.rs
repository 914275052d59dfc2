//! Automatic picks: a smooth v_rms(t) per CMP from its semblance panel.
//!
//! The rule, per CMP:
//! 1. Peak trace: at every output time, the trial velocity of highest semblance (the slower one on
//!    ties) and that semblance S*(t0).
//! 2. Candidates: times where S* is at least `threshold` and is the largest within +-`gap`
//!    samples (the semblance window, at least 40 ms): one candidate per event. The candidate's
//!    time is the middle of the run of times around it (at most `gap` away) where S* stays within
//!    `PLATEAU` of the peak: semblance is high across the whole wavelet, and its middle is the
//!    event's time (the peak alone may sit on a side lobe, whose best velocity is biased).
//! 3. The velocity at that time is refined by the parabola through the semblance at the best
//!    velocity and its two neighbours (at most half a velocity step; none at the scan's edges).
//! 4. Candidates are accepted strongest first, each only if, with the picks already accepted, the
//!    Dix interval velocity of every interval between consecutive picks stays between
//!    `MIN_INTERVAL_RATIO` x the RMS velocity at the interval's top and `MAX_INTERVAL_RATIO` x the
//!    scan's highest velocity: v_rms may slow a little with depth (mild inversions) but not
//!    collapse onto multiples, and no interval is unphysically fast.
//! 5. Gathers of fewer than `min_fold` traces get no picks (one or two traces are coherent with
//!    anything).
//! 6. The function is the accepted picks, linear in between and constant beyond the first and last
//!    (the velocity-model rule). A CMP without any accepted pick gets no function; its neighbours'
//!    functions stand in for it (interpolated by CDP number).

use super::{Gathers, Panels, Scan};
use crate::velocity::{CmpFunction, CmpFunctions, Domain, VelocityFunction};

/// Lowest Dix interval velocity of an interval, relative to the RMS velocity at its top.
pub const MIN_INTERVAL_RATIO: f32 = 0.8;
/// Highest Dix interval velocity, relative to the scan's highest velocity.
pub const MAX_INTERVAL_RATIO: f32 = 1.5;
/// Shortest distance between two candidates (s), whatever the window.
pub const MIN_GAP: f32 = 0.04;
/// Fraction of a candidate's peak semblance that bounds its plateau (rule 2).
pub const PLATEAU: f32 = 0.9;

/// One pick: two-way time (s), RMS velocity (m/s), its semblance.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Pick {
    pub t: f32,
    pub v: f32,
    pub semblance: f32,
}

/// Dix interval velocity squared between picks a (earlier) and b.
pub fn dix2(a: &Pick, b: &Pick) -> f32 { (b.v * b.v * b.t - a.v * a.v * a.t) / (b.t - a.t) }

/// Whether sorted picks satisfy rule 4.
pub fn plausible(picks: &[Pick], vmax: f32) -> bool {
    picks.windows(2).all(|w| {
        let d = dix2(&w[0], &w[1]);
        d > 0.0 && d.sqrt() >= MIN_INTERVAL_RATIO * w[0].v && d.sqrt() <= MAX_INTERVAL_RATIO * vmax
    })
}

/// The picks of one panel (`[v * ns + t0]`), by time.
pub fn pick_panel(panel: &[f32], ns: usize, scan: &Scan, dt: f32, t_first: f32, threshold: f32) -> Vec<Pick> {
    let nv = scan.nv();
    let vel = &scan.velocities;
    // 1. Peak trace.
    let mut best = vec![(0usize, f32::NEG_INFINITY); ns];
    for j in 0..nv {
        for (i, b) in best.iter_mut().enumerate() {
            let s = panel[j * ns + i];
            if s > b.1 {
                *b = (j, s);
            }
        }
    }
    // 2. Candidates.
    let gap = ((2 * scan.half + 1) as usize).max((MIN_GAP / dt).round() as usize).max(1);
    let mut cands = Vec::new();
    for i in 0..ns {
        let s = best[i].1;
        if !(s >= threshold) {
            continue;
        }
        let (a, b) = (i.saturating_sub(gap), (i + gap).min(ns - 1));
        // Largest in the neighbourhood; the earliest of equal maxima.
        if (a..=b).all(|k| best[k].1 < s || (best[k].1 == s && k >= i)) {
            let (mut l, mut r) = (i, i);
            while l > a && best[l - 1].1 >= PLATEAU * s {
                l -= 1;
            }
            while r < b && best[r + 1].1 >= PLATEAU * s {
                r += 1;
            }
            let i = (l + r) / 2;
            // 3. Parabolic refinement in velocity.
            let j = best[i].0;
            let mut v = vel[j];
            if j > 0 && j + 1 < nv {
                let (sm, s0, sp) = (panel[(j - 1) * ns + i], panel[j * ns + i], panel[(j + 1) * ns + i]);
                let den = sm - 2.0 * s0 + sp;
                if den < 0.0 {
                    let off = (0.5 * (sm - sp) / den).clamp(-0.5, 0.5);
                    let dv = vel[j + 1] - vel[j];
                    v += off * dv;
                }
            }
            if cands.last().is_none_or(|p: &Pick| p.t < t_first + i as f32 * dt) {
                cands.push(Pick { t: t_first + i as f32 * dt, v, semblance: s });
            }
        }
    }
    // 4. Strongest first, under the interval-velocity constraint.
    cands.sort_by(|a, b| b.semblance.total_cmp(&a.semblance).then(a.t.total_cmp(&b.t)));
    let vmax = vel[nv - 1];
    let mut accepted: Vec<Pick> = Vec::new();
    for c in cands {
        let at = accepted.partition_point(|p| p.t < c.t);
        let mut trial = accepted.clone();
        trial.insert(at, c);
        if plausible(&trial, vmax) {
            accepted = trial;
        }
    }
    accepted
}

/// The picks of every gather (gathers in parallel); none for gathers of fewer than `min_fold` traces.
pub fn pick_all(g: &Gathers, panels: &Panels, scan: &Scan, threshold: f32, min_fold: usize) -> Vec<Vec<Pick>> {
    use rayon::prelude::*;
    (0..g.len())
        .into_par_iter()
        .map(|i| {
            if g.traces(i).len() < min_fold {
                return Vec::new();
            }
            pick_panel(panels.panel(i), g.ns, scan, g.dt, g.t_first, threshold)
        })
        .collect()
}

/// The picked functions of the gathers that have picks (rule 6), in gather order; `None` when no
/// gather has any.
pub fn functions(g: &Gathers, picks: &[Vec<Pick>], source: &str) -> Option<CmpFunctions> {
    let functions: Vec<CmpFunction> = picks
        .iter()
        .enumerate()
        .filter(|(_, p)| !p.is_empty())
        .map(|(i, p)| {
            let loc = g.location[i];
            CmpFunction { cdp: loc.cdp, x: loc.x, y: loc.y,
                function: VelocityFunction { domain: Domain::Time, knots: p.iter().map(|k| (k.t, k.v)).collect() } }
        })
        .collect();
    if functions.is_empty() {
        return None;
    }
    Some(CmpFunctions { domain: Domain::Time, functions, source: source.to_string() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(nv: usize) -> Scan {
        let velocities: Vec<f32> = (0..nv).map(|j| 1500.0 + 50.0 * j as f32).collect();
        let (s2, v2) = velocities.iter().map(|&v| gpu_kernels::velan::slowness2(v)).unzip();
        Scan { velocities, s2, v2, half: 5, inv_dt: 250.0, eta: 0.0, max_stretch: 0.5 }
    }

    /// A panel of Gaussian blobs (time sample, velocity index, height).
    fn panel(ns: usize, nv: usize, blobs: &[(f32, f32, f32)]) -> Vec<f32> {
        let mut p = vec![0.0f32; nv * ns];
        for j in 0..nv {
            for i in 0..ns {
                p[j * ns + i] = blobs.iter().map(|&(t, v, h)| h * (-((i as f32 - t) / 4.0).powi(2) - ((j as f32 - v) / 2.0).powi(2)).exp()).sum();
            }
        }
        p
    }

    #[test]
    fn dix_rule_rejects_collapsing_velocities() {
        let p = |t, v| Pick { t, v, semblance: 1.0 };
        assert!(plausible(&[p(0.5, 1800.0), p(1.0, 2150.0), p(1.6, 2600.0)], 4000.0));
        assert!(!plausible(&[p(0.5, 2000.0), p(1.0, 1500.0)], 4000.0)); // interval 707 m/s
        assert!(!plausible(&[p(1.0, 2000.0), p(1.01, 4000.0)], 4000.0)); // interval far above --vmax
        assert!((dix2(&p(0.5, 1800.0), &p(1.0, 2150.0)).sqrt() - 2450.5).abs() < 1.0);
    }

    #[test]
    fn picks_follow_the_rule() {
        let (ns, nv) = (400, 40);
        let s = scan(nv);
        // Strong events at samples 100 and 300; a weaker, much slower one between them (a multiple)
        // is rejected by the Dix rule; one below the threshold is ignored.
        let p = panel(ns, nv, &[(100.0, 10.3, 0.9), (300.0, 30.0, 0.8), (200.0, 2.0, 0.6), (350.0, 35.0, 0.1)]);
        let picks = pick_panel(&p, ns, &s, 0.004, 0.0, 0.3);
        assert_eq!(picks.len(), 2, "{picks:?}");
        assert!((picks[0].t - 0.4).abs() < 1e-6 && (picks[1].t - 1.2).abs() < 1e-6, "{picks:?}");
        // Parabolic refinement: between velocity nodes.
        assert!((picks[0].v - (1500.0 + 50.0 * 10.3)).abs() < 10.0, "{picks:?}");
        assert!((picks[1].v - 3000.0).abs() < 1.0, "{picks:?}");
        assert!(pick_panel(&p, ns, &s, 0.004, 0.0, 0.95).is_empty());
    }
}
