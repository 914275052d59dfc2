//! Interpolated traveltimes in the Kirchhoff engine (paper 5): exact read positions at a few
//! *nodes* down each image column, linear in between. Shared by the CPU reference
//! (`seisgpu_host::ktm::cpu_interp`) and the kernels (`kernels_interp.rs`), so both read the same
//! trace positions bit for bit.
//!
//! Image time is cut into *segments* of [`SEG`] samples from sample 0 (z0 = 0, 32, 64, ...), each
//! into four *quarters* of [`STEP`] samples. Nodes sit at every 8th image sample, z0 + 0, 8, .., 32;
//! a node's read position is exactly the exact path's (`contribution(..).s`) at that sample. A node
//! below the last image sample uses the last sample's velocity (the image time itself runs on).
//! - static8: every quarter is one step between its two nodes (paper 5's GPU scheme);
//! - dynamic: steps of 8, 16, 24 or 32 samples inside the segment, the longest whose linear
//!   interpolation at its midpoint is within the tolerance of the exact position there, decided
//!   from the start (paper 5's production CPU scheme, `pstm::dynamic_segment` with a largest step
//!   of 32: the same decisions, unit-tested). Midpoints off the nodes are at z0 + 12 and z0 + 20.
//!
//! The position of segment sample r in the step from node a to node b is the PSTM engine's
//! `interp`, slope `step_slope(s_a, s_b, 8 (b - a))`, taken from the position at the start of r's
//! quarter: exact at the nodes; for static8 `pstm::interp(r - 8a, slope, s_a)` itself, for dynamic
//! steps longer than a quarter within an ulp of it (one more rounding at the quarter's start).
//! With anti-aliasing the triangle half-length is interpolated the same way between its exact
//! values at the nodes; weights, mute and aperture are evaluated per sample from the interpolated
//! traveltime (`s - s_off`), as the exact path does from the exact one.

use super::*;
use crate::pstm::{interp, step_slope};

/// `KtmConsts::tt_mode`: exact traveltime at every image sample.
pub const TT_EXACT: u32 = 0;
/// `KtmConsts::tt_mode`: exact every 8th image sample, linear in between.
pub const TT_STATIC8: u32 = 1;
/// `KtmConsts::tt_mode`: steps of 8..32 samples under the tolerance `KtmConsts::tt_tol` (samples).
pub const TT_DYNAMIC: u32 = 2;

/// Image samples per segment (dynamic steps never cross one).
pub const SEG: u32 = 32;
/// Image samples per quarter (the static step).
pub const STEP: u32 = 8;

/// Bytes of a warp's step table in the interpolated kernels: 32 / K traces x 4 quarters x K rows
/// of (base, slope), each quarter's K rows padded by 16 bytes (no bank conflicts between the four
/// quarters a warp reads at once): at most 2048 for K = 4 or 8.
pub const TABLE_BYTES: u32 = 2048;

/// Bytes between the quarters of one trace in a step table (K rows of 8 bytes, plus 16).
pub const fn quarter_stride(k: u32) -> u32 { 8 * k + 16 }

/// Dynamic shared memory of an interpolated migration launch (bytes): the staged trace
/// coordinates, each warp's position table and, with anti-aliasing, its length table.
pub const fn interp_shared_bytes(aa: bool) -> u32 {
    let coords = 32 * COL_WARPS * 16;
    coords + COL_WARPS * TABLE_BYTES * if aa { 2 } else { 1 }
}

/// The exact values at a node: read position (padded index, as `Contribution::s`) and, with
/// anti-aliasing, the triangle half-length (else 1).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Node {
    pub s: f32,
    pub m: f32,
}

/// Exact node values of the pair `p` at sample geometry `q` (see [`node_sample`]).
#[inline(always)]
pub fn node<const AA: bool>(c: &KtmConsts, p: &PairGeom, q: &SampleGeom) -> Node {
    let (ts, tr) = dsr_legs(p, q);
    Node { s: c.sample_index(ts + tr), m: if AA { antialias_length(c, p, q, ts, tr) } else { 1.0 } }
}

/// Sample geometry of node sample `z`, which may lie past the image: image time tau0 + z dtau,
/// `v` the column's velocity at sample min(z, ntau - 1).
#[inline(always)]
pub fn node_sample(c: &KtmConsts, z: u32, v: f32) -> SampleGeom { sample_geom(c, c.tau0 + z as f32 * c.dtau, v) }

/// Which steps a segment takes: for each quarter, its step's first and last node (0..=4).
pub type Steps = [(u32, u32); 4];

/// The static8 steps: every quarter between its own nodes.
pub const STATIC8_STEPS: Steps = [(0, 1), (1, 2), (2, 3), (3, 4)];

/// Whether the step from node `a` to node `b` interpolates the exact position `mid` at its
/// midpoint within `tol` samples (`pstm::dynamic_segment`'s test).
#[inline(always)]
fn step_ok(n: &[f32; 5], a: usize, b: usize, mid: f32, tol: f32) -> bool {
    let len = 8 * (b - a) as u32;
    let slope = step_slope(n[a], n[b], len);
    let err = mid - interp((len / 2) as f32, slope, n[a]);
    err <= tol && -err <= tol
}

/// The dynamic steps of a segment with exact positions `n` at its nodes (offsets 0, 8, 16, 24, 32)
/// and `m12`, `m20` at offsets 12 and 20; `tol` in samples. Written out as the decision tree of
/// `pstm::dynamic_segment` with a largest step of 32 (no loops or indexed arrays: registers on
/// the GPU); NaN errors fail every test, as there.
#[inline(always)]
pub fn dynamic_steps(n: &[f32; 5], m12: f32, m20: f32, tol: f32) -> Steps {
    if step_ok(n, 0, 4, n[2], tol) {
        return [(0, 4); 4];
    }
    if step_ok(n, 0, 3, m12, tol) {
        return [(0, 3), (0, 3), (0, 3), (3, 4)];
    }
    if step_ok(n, 0, 2, n[1], tol) {
        return if step_ok(n, 2, 4, n[3], tol) { [(0, 2), (0, 2), (2, 4), (2, 4)] } else { [(0, 2), (0, 2), (2, 3), (3, 4)] };
    }
    if step_ok(n, 1, 4, m20, tol) {
        [(0, 1), (1, 4), (1, 4), (1, 4)]
    } else if step_ok(n, 1, 3, n[2], tol) {
        [(0, 1), (1, 3), (1, 3), (3, 4)]
    } else if step_ok(n, 2, 4, n[3], tol) {
        [(0, 1), (1, 2), (2, 4), (2, 4)]
    } else {
        STATIC8_STEPS
    }
}

/// `n[i]` for a node index known only at run time, as a select chain (no indexed array on the GPU).
#[inline(always)]
pub fn pick(n: &[f32; 5], i: u32) -> f32 {
    let mut v = n[0];
    if i == 1 {
        v = n[1];
    }
    if i == 2 {
        v = n[2];
    }
    if i == 3 {
        v = n[3];
    }
    if i == 4 {
        v = n[4];
    }
    v
}

/// One quarter's step as its samples use it: position of quarter sample j (0..8) is
/// `interp(j, slope, base)`, `base` being the step's position at the quarter's first sample
/// (`interp(8 (quarter - a), slope, s_a)`; for static8 steps exactly `s_a`). One (base, slope) pair
/// per quarter whatever the mode, so the kernels read static8 and dynamic steps alike.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct QuarterStep {
    pub base: f32,
    pub slope: f32,
}

/// Quarter `quarter`'s step from node values `n` and the step's node range `(a, b)`.
#[inline(always)]
pub fn quarter_step(n: &[f32; 5], quarter: u32, (a, b): (u32, u32)) -> QuarterStep {
    let start = pick(n, a);
    let slope = step_slope(start, pick(n, b), 8 * (b - a));
    QuarterStep { base: interp((8 * (quarter - a)) as f32, slope, start), slope }
}

/// Quarter `quarter`'s static8 step (from its own node to the next): [`quarter_step`] with
/// `STATIC8_STEPS` for finite nodes, the base being the node itself rather than an FMA with 0
/// (one instruction a quarter fewer in the kernels' node phase).
#[inline(always)]
pub fn static8_step(n: &[f32; 5], quarter: u32) -> QuarterStep {
    let start = pick(n, quarter);
    QuarterStep { base: start, slope: step_slope(start, pick(n, quarter + 1), STEP) }
}

/// Where a static8 segment's reads fall against its trace's end, from its five nodes `s`: all
/// below it (`stride` pairs: no clamp needed), or all at or past its last pair (every read is the
/// trailing zero pair), as `(inside, past)`. A static8 position is one FMA between two nodes: its
/// exact value is a convex combination, so the rounded one lies between them too. NaN nodes are
/// neither; with `batch` traces of more than 2^22 pairs in all (outside the bare kernel's magic
/// floor) neither holds, so every read is clamped.
#[inline(always)]
pub fn static8_reads_at_trace_end(s: &[f32; 5], stride: u32, batch: u32) -> (bool, bool) {
    let small = stride <= (1 << 22) / batch;
    let (lim_in, lim_past) = if small { (stride as f32, stride as f32 - 1.0) } else { (0.0, f32::INFINITY) };
    let inside = s.iter().fold(true, |a, &v| a & (v < lim_in));
    let past = s.iter().fold(true, |a, &v| a & (v >= lim_past) & (v <= f32::MAX));
    (inside, past)
}

/// Position (or AA length) of quarter sample `j` (0..8).
#[inline(always)]
pub fn quarter_value(st: &QuarterStep, j: u32) -> f32 { interp(j as f32, st.slope, st.base) }

/// Per-sample weight (weights x aperture taper x mute) of a contribution with traveltime `t`
/// (samples), as `contribution::<_, true>` applies them: 0 means the trace is not read.
#[inline(always)]
pub fn correction_weight(c: &KtmConsts, p: &PairGeom, q: &SampleGeom, t: f32) -> f32 {
    let mut w = 1.0;
    if c.flags & MUTE != 0 && q.tau_s < c.mute_cos * t {
        w = 0.0;
    }
    if c.flags & APERTURE != 0 {
        w *= aperture_taper(p.dm, q);
    }
    if c.flags & WEIGHTS != 0 {
        w *= weight(q.tau_s, t, q.wa);
    }
    w
}

/// The contribution of an interpolated position `s` (and AA length `m`) at sample geometry `q`:
/// what `contribution` gives for an exact one.
#[inline(always)]
pub fn contribution_at<const CORR: bool>(c: &KtmConsts, p: &PairGeom, q: &SampleGeom, s: f32, m: f32) -> Contribution {
    let w = if CORR { correction_weight(c, p, q, s - c.s_off) } else { 1.0 };
    Contribution { s, w, m }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pstm::{dynamic_segment, Ctx};

    /// The decision tree takes the steps `pstm::dynamic_segment` takes (largest step 32) on
    /// segments from straight to strongly curved, tolerances from 0 to large.
    #[test]
    fn dynamic_steps_are_the_pstm_scheme() {
        let c = Ctx { ds2: 0.0, dr2: 0.0, t_first: 0.0, inv_dt: 1.0, tau0: 0.0, dtau: 1.0, smax: 1e9, mute: 1e9, nz: 1 << 20 };
        let mut x = 0.31f32;
        let mut next = || {
            x = (x * 7.13 + 0.277).fract();
            x
        };
        let mut seen = std::collections::HashSet::new();
        for i in 0..20_000 {
            // Positions along a hyperbola-like curve of random curvature, plus a little noise.
            let (a, b, k) = (100.0 * next(), 3.0 * next(), 1e-3 * next() * (i % 7) as f32);
            // Some with a bend in the first quarter only (the tree's "8, then 24" branch).
            let bend = if i % 3 == 1 { 0.01 * (i % 8) as f32 } else { 0.0 };
            let f = |o: u32| a + b * o as f32 + k * (o * o) as f32 + if i % 5 == 0 { 0.01 * next_fixed(o) } else { 0.0 }
                + bend * ((8 - o.min(8)) * (8 - o.min(8))) as f32;
            let n = [f(0), f(8), f(16), f(24), f(32)];
            let tol = [0.0, 0.001, 0.01, 0.05, 0.3, 10.0][i % 6];
            let mut want = [(9, 9); 4];
            dynamic_segment(0, n[0], n[4], tol, 32, &c, f, |o, len, base, slope, _| {
                for q in o / 8..(o + len) / 8 {
                    want[q as usize] = (o / 8, (o + len) / 8);
                    let st = quarter_step(&n, q, (o / 8, (o + len) / 8));
                    assert_eq!((st.base, st.slope), (interp((8 * q - o) as f32, slope, base), slope));
                }
            });
            let got = dynamic_steps(&n, f(12), f(20), tol);
            assert_eq!(got, want, "segment {n:?} tol {tol}");
            seen.insert(got);
        }
        assert_eq!(seen.len(), 8, "every branch of the tree taken: {seen:?}");
    }

    fn next_fixed(o: u32) -> f32 { (o.wrapping_mul(2_654_435_761) >> 16) as f32 / 65536.0 }

    #[test]
    fn quarter_values_are_exact_at_the_nodes_and_linear_between() {
        let n = [10.0f32, 12.5, 15.5, 19.0, 23.0];
        for q in 0..4 {
            let st = quarter_step(&n, q, STATIC8_STEPS[q as usize]);
            assert_eq!(quarter_value(&st, 0), n[q as usize]);
            let mid = quarter_value(&st, 4);
            assert_eq!(mid, 0.5 * (n[q as usize] + n[q as usize + 1]));
        }
        for q in 0..4 {
            assert_eq!(static8_step(&n, q), quarter_step(&n, q, STATIC8_STEPS[q as usize]));
        }
        // A 32-sample step: quarter 2 starts 16 samples in.
        let st = quarter_step(&n, 2, (0, 4));
        assert_eq!(st.slope, 13.0 / 32.0);
        assert_eq!(quarter_value(&st, 0), 10.0 + 16.0 * (13.0 / 32.0));
    }

    #[test]
    fn node_is_the_exact_contribution_position() {
        let c = KtmConsts { dt: 0.004, inv_dt: 250.0, s_off: 2.0, tau0: 0.1, dtau: 0.004, ntau: 100, ..Default::default() };
        let p = pair_geom(100.0, 50.0, [-300.0, 20.0, 900.0, -40.0]);
        for z in [0u32, 8, 96] {
            let q = sample_geom(&c, c.tau0 + z as f32 * c.dtau, 2100.0);
            assert_eq!(node::<false>(&c, &p, &node_sample(&c, z, 2100.0)).s, contribution::<false, false>(&c, &p, &q).s);
        }
    }
}
