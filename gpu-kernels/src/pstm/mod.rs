//! PSTM traveltimes (paper 5): the traveltime math every migration kernel uses, and the static
//! 8-point / dynamic interpolation kernels. Shared by the PSTM engine's kernels; the Kirchhoff
//! engine (`ktm`) calls [`traveltime::dsr_two_way`] for exact traveltimes.
//!
//! Everything here is shared by the CPU reference (`seisgpu_host::pstm::cpu`) and the kernels
//! ([`kernels`]), so both make the same decisions on the same floating-point values:
//!
//! - image time: sample z of a column is at tau(z) = tau0 + z * dtau (two-way, s);
//! - a traveltime t is used as a fractional trace sample position s = (t - t_first) / dt;
//! - a contribution is the linearly interpolated trace sample at s, read from a *packed* trace
//!   (pairs (a_i, a_{i+1} - a_i), [`PAD`] zero samples on each side) so one load serves the lerp;
//! - a sample is *live* when 0 <= s <= ns - 1 (inside the record), z < nz (not image padding), and
//!   t <= (1 + stretch) tau (the stretch mute: moveout at most `stretch` of the vertical time,
//!   the NMO-stretch convention); dead samples read position [`DEAD`], which holds zeros;
//! - interpolated modes work on *steps* between exact points: a step whose two end points are live
//!   (and inside the image) is FAST (its samples are used without a per-sample test, the
//!   conditions being linear in z); one whose ends both fail the same condition is DEAD; otherwise
//!   it is MIXED and every sample is tested. The CPU applies the same rule, so CPU and GPU agree.

pub mod traveltime;

pub mod kernels;

use crate::math::{floor, mul_add};
use traveltime::{half_tau_sq, Model};

/// Zero samples on each side of a packed trace.
pub const PAD: usize = 4;
/// Sample position of a dead contribution: inside the front padding, where (a, d) = (0, 0).
pub const DEAD: f32 = -3.0;
/// Image samples per layer (one warp-wide row of the column, paper section 3.1).
pub const LAYER: u32 = 32;
/// Static interpolation step (paper section 2.2).
pub const STEP: u32 = 8;
/// Samples per unit: 8 layers, whose 33 exact points a warp computes at once (paper fig. 1).
pub const UNIT: u32 = 256;
/// Layers of a column a GPU warp keeps in registers (a z-chunk of 1536 samples).
pub const CHUNK_LAYERS: u32 = 48;
/// Units per z-chunk.
pub const CHUNK_UNITS: u32 = CHUNK_LAYERS / 8;
/// Warps per block of the lean static8 kernels (`pstm_static8_*_smem_lean2`): fixed, so their
/// per-unit staging offsets are immediates (the host requires this block shape for them).
pub const LEAN_WARPS: u32 = 8;
/// Step classes.
pub const MIXED: u32 = 0;
pub const FAST: u32 = 1;
pub const DEAD_STEP: u32 = 2;

/// What every traveltime / liveness decision of one (trace, image column) pair needs.
#[derive(Clone, Copy, Debug)]
pub struct Ctx {
    /// Squared horizontal source and receiver distances to the column (m^2).
    pub ds2: f32,
    pub dr2: f32,
    /// Time of the first trace sample (s) and 1 / sample interval (1/s).
    pub t_first: f32,
    pub inv_dt: f32,
    /// Image time of sample 0 and image sample interval (s).
    pub tau0: f32,
    pub dtau: f32,
    /// Last valid sample position, ns - 1.
    pub smax: f32,
    /// 1 + stretch: a sample is muted where t > mute * tau.
    pub mute: f32,
    /// Image samples per column (before padding).
    pub nz: u32,
}

/// Two-way image time of sample `z`.
#[inline(always)]
pub fn tau_at(z: u32, tau0: f32, dtau: f32) -> f32 { mul_add(z as f32, dtau, tau0) }

/// Trace sample position of two-way time `t`.
#[inline(always)]
pub fn sample_pos(t: f32, t_first: f32, inv_dt: f32) -> f32 { (t - t_first) * inv_dt }

/// Exact trace sample position for image sample `z`, model `M`, coefficients `inv_v2`, `eta` of
/// the column at z.
#[inline(always)]
pub fn exact_pos<M: Model>(z: u32, c: &Ctx, inv_v2: f32, eta: f32) -> f32 {
    let h2 = half_tau_sq(tau_at(z, c.tau0, c.dtau));
    sample_pos(M::two_way(h2, c.ds2, c.dr2, inv_v2, eta), c.t_first, c.inv_dt)
}

/// Stretch-mute limit at sample `z`, as a trace sample position: live samples have s <= this.
#[inline(always)]
pub fn mute_limit(z: u32, c: &Ctx) -> f32 {
    (c.mute * tau_at(z, c.tau0, c.dtau) - c.t_first) * c.inv_dt
}

/// Whether position `s` at image sample `z` passes the record and mute tests (not the z < nz test).
#[inline(always)]
pub fn live_point(s: f32, z: u32, c: &Ctx) -> bool {
    s >= 0.0 && s <= c.smax && s <= mute_limit(z, c)
}

/// Whether image sample `z` at position `s` contributes.
#[inline(always)]
pub fn live(s: f32, z: u32, c: &Ctx) -> bool { z < c.nz && live_point(s, z, c) }

/// The position actually read for sample `z`: `s` when live, [`DEAD`] otherwise.
#[inline(always)]
pub fn checked(s: f32, z: u32, c: &Ctx) -> f32 { if live(s, z, c) { s } else { DEAD } }

/// Class of the step from image sample `za` (position `sa`) to `zb` (position `sb`): FAST when
/// both ends are live and the step is inside the image, DEAD when both ends fail the same linear
/// condition (or the step starts below the image), MIXED otherwise.
#[inline(always)]
pub fn classify(sa: f32, za: u32, sb: f32, zb: u32, c: &Ctx) -> u32 {
    if za >= c.nz
        || (sa < 0.0 && sb < 0.0)
        || (sa > c.smax && sb > c.smax)
        || (sa > mute_limit(za, c) && sb > mute_limit(zb, c))
    {
        DEAD_STEP
    } else if zb <= c.nz && live_point(sa, za, c) && live_point(sb, zb, c) {
        FAST
    } else {
        MIXED
    }
}

/// Whether [`classify`] gives DEAD_STEP: the same conditions, evaluated without short circuits
/// (the GPU's lean2 kernels: no branches, see `kernels::unit_layers_tested`), so the same answer.
#[inline(always)]
pub fn dead_step(sa: f32, za: u32, sb: f32, zb: u32, c: &Ctx) -> bool {
    (za >= c.nz) | ((sa < 0.0) & (sb < 0.0)) | ((sa > c.smax) & (sb > c.smax))
        | ((sa > mute_limit(za, c)) & (sb > mute_limit(zb, c)))
}

/// Position of a sample `r` samples after the start of a step (`base` at its start, `slope` per
/// sample). r = 0 gives `base` exactly, so interpolated modes equal the exact one at step ends.
#[inline(always)]
pub fn interp(r: f32, slope: f32, base: f32) -> f32 { mul_add(r, slope, base) }

/// Slope per sample of a step of `len` samples: the difference times 1/len (exact for 8, 16, 32).
#[inline(always)]
pub fn step_slope(sa: f32, sb: f32, len: u32) -> f32 {
    let inv = match len {
        8 => 0.125,
        16 => 0.0625,
        24 => 1.0 / 24.0,
        _ => 0.03125,
    };
    (sb - sa) * inv
}

/// The position read for an interpolated sample of a step of class `class`.
#[inline(always)]
pub fn step_sample(class: u32, s: f32, z: u32, c: &Ctx) -> f32 {
    if class == FAST {
        s
    } else if class == DEAD_STEP {
        DEAD
    } else {
        checked(s, z, c)
    }
}

/// Splits a position into (floor, fraction). The GPU rounds `s + 1.5 * 2^23` down (`add.rm`),
/// whose low mantissa bits are then floor(s), instead of two conversions on the slow pipe; both
/// give floor(s) exactly for |s| < 2^22, and the fraction s - floor(s) is the same IEEE subtraction.
#[inline(always)]
pub fn split(s: f32) -> (i32, f32) {
    #[cfg(target_arch = "nvptx64")]
    {
        let m = crate::device::add_rm(s, 12_582_912.0);
        let fl = m - 12_582_912.0;
        (m.to_bits() as i32 - 0x4B40_0000, s - fl)
    }
    #[cfg(not(target_arch = "nvptx64"))]
    {
        let fl = floor(s);
        (fl as i32, s - fl)
    }
}

/// The contribution of a packed trace (pairs (a, d), `PAD` padding entries first) at position `s`:
/// a + f d, i.e. the linear interpolation of the zero-extended trace.
#[inline(always)]
pub fn lerp_packed(packed: &[[f32; 2]], s: f32) -> f32 {
    let (i, f) = split(s);
    let e = packed[(i + PAD as i32) as usize];
    mul_add(f, e[1], e[0])
}

/// Packs a trace for [`lerp_packed`]: `out[j] = (a_i, a_{i+1} - a_i)` for i = j - PAD, with a zero
/// outside `0..ns`. `out.len()` must be `trace.len() + 2 * PAD`. Written as slices without a test
/// per sample (the host packs every input trace of a migration: 5.4 GB at paper size), with the
/// same bits as the definition (`0.0 - a` at the end, not `-a`).
pub fn pack_trace(trace: &[f32], out: &mut [[f32; 2]]) {
    let ns = trace.len();
    let (head, rest) = out.split_at_mut(PAD.min(out.len()));
    head.fill([0.0, 0.0]);
    if let (Some(e), Some(&a0)) = (head.last_mut(), trace.first()) {
        e[1] = a0 - 0.0; // i = -1
    }
    let (body, tail) = rest.split_at_mut(ns.min(rest.len()));
    for (e, (&a, &b)) in body.iter_mut().zip(trace.iter().zip(trace.iter().skip(1))) {
        *e = [a, b - a];
    }
    if let (Some(e), Some(&a)) = (body.get_mut(ns.wrapping_sub(1)), trace.last()) {
        *e = [a, 0.0 - a]; // i = ns - 1: the zero beyond the record
    }
    tail.fill([0.0, 0.0]);
}

/// Squared source, receiver and midpoint distances from a trace (source `sx, sy`, receiver
/// `gx, gy`, m) to the image column at `(x, y)`.
#[inline(always)]
pub fn distances(sx: f32, sy: f32, gx: f32, gy: f32, x: f32, y: f32) -> (f32, f32, f32) {
    let (ax, ay) = (sx - x, sy - y);
    let (bx, by) = (gx - x, gy - y);
    let (mx, my) = (0.5 * (sx + gx) - x, 0.5 * (sy + gy) - y);
    (mul_add(ax, ax, ay * ay), mul_add(bx, bx, by * by), mul_add(mx, mx, my * my))
}

/// Midpoint bin grid: the traces of each offset class are sorted by (bin row, bin column) of their
/// midpoint, so the traces that can reach a column are a few contiguous runs.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct Bins {
    /// Corner of bin (0, 0) and bin size (m), in the image's coordinates.
    pub x0: f32,
    pub y0: f32,
    pub w: f32,
    pub h: f32,
    pub nx: u32,
    pub ny: u32,
}

impl Bins {
    /// Bin of a midpoint, clamped to the grid.
    #[inline(always)]
    pub fn of(&self, mx: f32, my: f32) -> (u32, u32) {
        (clamp_bin(floor((mx - self.x0) / self.w), self.nx), clamp_bin(floor((my - self.y0) / self.h), self.ny))
    }
    /// Inclusive bin ranges ((bx_lo, bx_hi), (by_lo, by_hi)) holding every midpoint within
    /// `aperture` of (x, y); one bin wider on each side than needed, against rounding.
    #[inline(always)]
    pub fn around(&self, x: f32, y: f32, aperture: f32) -> ((u32, u32), (u32, u32)) {
        let bx = |v: f32| floor((v - self.x0) / self.w);
        let by = |v: f32| floor((v - self.y0) / self.h);
        (
            (clamp_bin(bx(x - aperture) - 1.0, self.nx), clamp_bin(bx(x + aperture) + 1.0, self.nx)),
            (clamp_bin(by(y - aperture) - 1.0, self.ny), clamp_bin(by(y + aperture) + 1.0, self.ny)),
        )
    }
}

#[inline(always)]
#[allow(clippy::neg_cmp_op_on_partial_ord)] // NaN goes to bin 0
fn clamp_bin(b: f32, n: u32) -> u32 {
    if !(b >= 0.0) {
        0
    } else if b >= (n - 1) as f32 {
        n - 1
    } else {
        b as u32
    }
}

/// Exact positions a dynamic segment has computed: offsets 0, 8, 16, 24, 32 (scalars, not an
/// array, so the GPU keeps them in registers).
#[derive(Clone, Copy)]
struct Memo {
    v: [f32; 5],
    known: u32,
}

impl Memo {
    #[inline(always)]
    fn get<F: FnMut(u32) -> f32>(&mut self, k: u32, evals: &mut u32, eval: &mut F) -> f32 {
        let slot = match k {
            0 => 0,
            1 => 1,
            2 => 2,
            3 => 3,
            _ => 4,
        };
        if self.known & (1 << slot) == 0 {
            let v = eval(8 * slot);
            *evals += 1;
            self.set(slot, v);
        }
        match slot {
            0 => self.v[0],
            1 => self.v[1],
            2 => self.v[2],
            3 => self.v[3],
            _ => self.v[4],
        }
    }
    #[inline(always)]
    fn set(&mut self, slot: u32, v: f32) {
        match slot {
            0 => self.v[0] = v,
            1 => self.v[1] = v,
            2 => self.v[2] = v,
            3 => self.v[3] = v,
            _ => self.v[4] = v,
        }
        self.known |= 1 << slot;
    }
}

/// One dynamic-interpolation segment: the 32 image samples from `z0` (a multiple of 32), with the
/// exact positions `s0` at z0 and `s32` at z0 + 32 given.
///
/// The scheme (the production CPU one, paper section 2.3; the paper gives no details, this is
/// ours): from the current offset o, try the steps L = min(max_step, 32 - o), ..., 16 (multiples
/// of 8, largest first) and take the first whose linear interpolation at its midpoint is within
/// `tol` samples of the exact position there; a step of 8 needs no test. Steps never cross the
/// 32-sample segment, so segments are independent (one per GPU lane). With `max_step` = 8 this is
/// exactly the static 8-point scheme.
///
/// `eval(off)` returns the exact position at z0 + off; `emit(o, len, base, slope, class)` receives
/// every step. Returns the number of exact evaluations made (not counting `s0`, `s32`).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub fn dynamic_segment<F: FnMut(u32) -> f32, E: FnMut(u32, u32, f32, f32, u32)>(
    z0: u32, s0: f32, s32: f32, tol: f32, max_step: u32, c: &Ctx, mut eval: F, mut emit: E,
) -> u32 {
    let mut memo = Memo { v: [s0, 0.0, 0.0, 0.0, s32], known: 0b10001 };
    let mut evals = 0u32;
    let mut o = 0u32;
    while o < 32 {
        let start = memo.get(o / 8, &mut evals, &mut eval);
        let lmax = if 32 - o < max_step { 32 - o } else { max_step };
        let mut len = 8;
        let mut cand = lmax;
        while cand >= 16 {
            let end = memo.get((o + cand) / 8, &mut evals, &mut eval);
            let half = cand / 2;
            let mid = if half % 8 == 0 {
                memo.get((o + half) / 8, &mut evals, &mut eval)
            } else {
                evals += 1;
                eval(o + half)
            };
            let slope = step_slope(start, end, cand);
            let err = mid - interp(half as f32, slope, start);
            if err <= tol && -err <= tol {
                len = cand;
                break;
            }
            cand -= 8;
        }
        let end = memo.get((o + len) / 8, &mut evals, &mut eval);
        let slope = step_slope(start, end, len);
        emit(o, len, start, slope, classify(start, z0 + o, end, z0 + o + len, c));
        o += len;
    }
    evals
}

/// Number of z-chunks of a column of `nz_pad` samples (a multiple of 32).
pub fn chunks(nz_pad: u32) -> u32 { nz_pad.div_ceil(LAYER * CHUNK_LAYERS) }

/// Kernel parameters, uploaded once per migration (read through a pointer by every kernel).
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct KParams {
    pub nx: u32,
    pub ny: u32,
    pub noff: u32,
    pub nz: u32,
    pub nz_pad: u32,
    /// Column stride of the per-sample coefficient arrays (nz_pad + 1 when they vary laterally,
    /// else 0) and of the every-8th-sample arrays (nz_pad / 8 + 1, else 0).
    pub coef_stride: u32,
    pub coef8_stride: u32,
    /// Packed trace row length (ns + 2 PAD entries).
    pub packed_len: u32,
    pub dx: f32,
    pub dy: f32,
    pub tau0: f32,
    pub dtau: f32,
    pub t_first: f32,
    pub inv_dt: f32,
    pub smax: f32,
    pub mute: f32,
    pub aperture: f32,
    pub aperture2: f32,
    /// Dynamic mode: tolerance (samples) and largest step.
    pub tol: f32,
    pub max_step: u32,
    /// static8 on the GPU: take the branch-free 8-layer path for units whose 32 steps are all FAST
    /// (same values; the 8 trace loads are then in flight together). 0 = off.
    pub batched_units: u32,
    /// GPU: the warps of a block walk the union of their trace lists together, with a block barrier
    /// every 2 candidate traces, so each packed trace is read from L2 once per block and then hit
    /// in L1 by the other warps (same per-column order, same results). 0 = off.
    pub lockstep: u32,
    /// GPU: image columns per block along x (a tile of `tile_x` x (warps / tile_x) columns; 0 or 1
    /// = one row of columns along y, the paper's shape). Larger tiles make the aperture sets of a
    /// block's columns overlap more (lockstep / shared-memory kernels).
    pub tile_x: u32,
    pub bins: Bins,
}

impl KParams {
    /// The per-pair context of a trace at squared distances `ds2`, `dr2`.
    #[inline(always)]
    pub fn ctx(&self, ds2: f32, dr2: f32) -> Ctx {
        Ctx {
            ds2,
            dr2,
            t_first: self.t_first,
            inv_dt: self.inv_dt,
            tau0: self.tau0,
            dtau: self.dtau,
            smax: self.smax,
            mute: self.mute,
            nz: self.nz,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::traveltime::Dsr;
    use super::*;

    fn ctx() -> Ctx {
        Ctx { ds2: 600.0 * 600.0, dr2: 900.0 * 900.0, t_first: 0.0, inv_dt: 250.0, tau0: 0.0, dtau: 0.004, smax: 1499.0,
            mute: 2.0, nz: 1000 }
    }

    #[test]
    fn split_and_lerp() {
        assert_eq!(split(3.25), (3, 0.25));
        assert_eq!(split(-0.5), (-1, 0.5));
        assert_eq!(split(DEAD), (-3, 0.0));
        let tr = [1.0, 3.0, 5.0];
        let mut p = vec![[0.0; 2]; tr.len() + 2 * PAD];
        pack_trace(&tr, &mut p);
        assert_eq!(lerp_packed(&p, 0.5), 2.0);
        assert_eq!(lerp_packed(&p, 2.0), 5.0);
        assert_eq!(lerp_packed(&p, 2.5), 2.5); // half-way to the zero beyond the record
        assert_eq!(lerp_packed(&p, DEAD), 0.0);
        assert_eq!(lerp_packed(&p, -0.25), 0.75);
    }

    #[test]
    fn pack_trace_is_its_definition_bit_for_bit() {
        let def = |tr: &[f32], j: usize| {
            let a = |i: isize| if i >= 0 && (i as usize) < tr.len() { tr[i as usize] } else { 0.0 };
            let i = j as isize - PAD as isize;
            [a(i).to_bits(), (a(i + 1) - a(i)).to_bits()]
        };
        let mut x = 0x2545_f491u32;
        for ns in [0usize, 1, 2, 3, 7, 33, 1500] {
            let tr: Vec<f32> = (0..ns).map(|k| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                if k == 1 { -0.0 } else { (x as f32 / u32::MAX as f32) * 2.0 - 1.0 }
            }).collect();
            let mut p = vec![[f32::NAN; 2]; ns + 2 * PAD];
            pack_trace(&tr, &mut p);
            for (j, e) in p.iter().enumerate() {
                assert_eq!([e[0].to_bits(), e[1].to_bits()], def(&tr, j), "ns {ns} entry {j}");
            }
        }
    }

    #[test]
    fn dynamic_with_step_8_is_static_8() {
        let c = ctx();
        let iv2 = 1.0 / (2200.0f32 * 2200.0);
        let s = |z: u32| exact_pos::<Dsr>(z, &c, iv2, 0.0);
        for z0 in [0u32, 32, 320, 960] {
            let mut steps = vec![];
            let n = dynamic_segment(z0, s(z0), s(z0 + 32), 1e9, 8, &c, |o| s(z0 + o), |o, l, b, sl, cl| steps.push((o, l, b, sl, cl)));
            assert_eq!(n, 3);
            assert_eq!(steps.len(), 4);
            for (k, &(o, l, b, sl, cl)) in steps.iter().enumerate() {
                assert_eq!((o, l), (8 * k as u32, 8));
                assert_eq!(b, s(z0 + o));
                assert_eq!(sl, (s(z0 + o + 8) - b) * 0.125);
                assert_eq!(cl, classify(b, z0 + o, s(z0 + o + 8), z0 + o + 8, &c));
            }
        }
    }

    #[test]
    fn dynamic_respects_tolerance_and_takes_long_steps_when_linear() {
        let c = ctx();
        let iv2 = 1.0 / (2200.0f32 * 2200.0);
        let s = |z: u32| exact_pos::<Dsr>(z, &c, iv2, 0.0);
        // Deep: nearly linear, one step of 32 with two evaluations (end given, midpoint).
        let mut steps = vec![];
        let n = dynamic_segment(960, s(960), s(992), 0.05, 32, &c, |o| s(960 + o), |o, l, _, _, _| steps.push((o, l)));
        assert_eq!(steps, vec![(0, 32)]);
        assert_eq!(n, 1);
        // Every accepted step's midpoint error is within the tolerance.
        for z0 in (0..992).step_by(32) {
            let tol = 0.01;
            dynamic_segment(z0, s(z0), s(z0 + 32), tol, 32, &c, |o| s(z0 + o), |o, l, b, sl, _| {
                if l > 8 {
                    let m = l / 2;
                    assert!((interp(m as f32, sl, b) - s(z0 + o + m)).abs() <= tol, "z0 {z0} step {o}+{l}");
                }
            });
        }
    }

    #[test]
    fn classes() {
        let c = ctx();
        assert_eq!(classify(10.0, 0, 20.0, 8, &c), DEAD_STEP); // both beyond the mute (limits 0 and 16)
        assert_eq!(classify(400.0, 300, 405.0, 308, &c), FAST);
        assert_eq!(classify(1490.0, 900, 1500.0, 908, &c), MIXED);
        assert_eq!(classify(1500.0, 900, 1510.0, 908, &c), DEAD_STEP);
        assert_eq!(classify(400.0, 996, 405.0, 1004, &c), MIXED); // crosses nz
        assert_eq!(classify(400.0, 1000, 405.0, 1008, &c), DEAD_STEP);
    }

    /// The lean2 kernels' branch-free DEAD test agrees with `classify` everywhere: a grid of
    /// positions around every boundary (0, smax, the mute limits, nz), NaN and infinities included.
    #[test]
    fn dead_step_is_classify_dead() {
        let c = ctx();
        let mut vals = vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -3.0, 0.0, -0.0, c.smax, 1e9];
        for z in [0u32, 8, 296, 300, 308, 600, 900, 992, 996, 1000, 1008] {
            let m = mute_limit(z, &c);
            vals.extend([m, f32::from_bits(m.to_bits() + 1), f32::from_bits(m.to_bits().saturating_sub(1))]);
        }
        for v in [0.0f32, c.smax] {
            vals.extend([f32::from_bits(v.to_bits() + 1), v - 1e-3, v + 1e-3]);
        }
        vals.extend((0..40).map(|i| -20.0 + 41.0 * i as f32));
        let mut n = [0usize; 3];
        for za in [0u32, 8, 296, 300, 600, 896, 992, 996, 1000, 1008] {
            for &sa in &vals {
                for &sb in &vals {
                    let cls = classify(sa, za, sb, za + 8, &c);
                    assert_eq!(dead_step(sa, za, sb, za + 8, &c), cls == DEAD_STEP, "sa {sa} za {za} sb {sb}");
                    n[cls as usize] += 1;
                }
            }
        }
        assert!(n.iter().all(|&k| k > 1000), "{n:?}");
    }

    #[test]
    fn bins_cover_the_aperture() {
        let b = Bins { x0: -1000.0, y0: -1000.0, w: 200.0, h: 200.0, nx: 20, ny: 30 };
        let ((x0, x1), (y0, y1)) = b.around(500.0, 700.0, 1000.0);
        for (mx, my) in [(-500.0f32, 700.0f32), (1500.0, 700.0), (500.0, -300.0), (500.0, 1700.0)] {
            let (bx, by) = b.of(mx, my);
            assert!(bx >= x0 && bx <= x1 && by >= y0 && by <= y1);
        }
        assert_eq!(b.of(-5000.0, 1e9), (0, 29));
    }
}
