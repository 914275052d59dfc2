//! Shared-memory trace staging (the next trace copied into shared memory while the current one is
//! worked on), and the lean static8 variant of it.

use super::modes::*;
use super::*;

// ---- shared-memory trace staging ------------------------------------------------------------------

/// Per-warp table bytes at the front of the dynamic shared memory (the host adds the same).
pub(super) const STATIC8_TABLE: u32 = 16 * 16;
pub(super) const DYNAMIC_TABLE: u32 = CHUNK_LAYERS * 4 * 16;

#[inline(always)]
pub(super) unsafe fn exact_smem<M: Model>(p: &KParams, traces: *const f32, headers: *const f32, bin_start: *const u32,
    iv2: *const f32, eta: *const f32, image: *mut f32, first: u32) {
    let Some(col) = column(p, true) else { return };
    let mut acc = [0.0f32; 48];
    let n_units = col.n_layers.div_ceil(8);
    unsafe {
        let mut it = SmemWalk::new(p, &col, 0, traces, bin_start, headers);
        while let Some((mine, c, f)) = it.next(p, &col, traces, bin_start, headers) {
            if mine {
                exact_trace::<M, Smem>(p, &col, &f, iv2, eta, 0, &c, &mut acc);
                f.stage_rest(n_units);
            } else {
                f.stage_rest(0);
            }
        }
        store(image, &col, &acc, first);
    }
}

#[inline(always)]
pub(super) unsafe fn static8_smem<M: Model>(p: &KParams, traces: *const f32, headers: *const f32, bin_start: *const u32,
    iv2_8: *const f32, eta_8: *const f32, image: *mut f32, first: u32) {
    let Some(col) = column(p, true) else { return };
    let tbl = unsafe { dynamic_shared::<F4>().add(thread_idx_y() as usize * 16) };
    let n_units = col.n_layers.div_ceil(8);
    let last_full = col.n_layers % 8 == 0;
    let kmax = p.nz_pad / STEP;
    let kx = col.z0 / STEP + 32 * n_units;
    let kx = if kx < kmax { kx } else { kmax };
    let xiv2 = unsafe { coef(iv2_8, col.col, p.coef8_stride, kx) };
    let xeta = if M::NEEDS_ETA { unsafe { coef(eta_8, col.col, p.coef8_stride, kx) } } else { 0.0 };
    let mut acc = [0.0f32; 48];
    unsafe {
        let mut it = SmemWalk::new(p, &col, block_dim_y() * STATIC8_TABLE, traces, bin_start, headers);
        while let Some((mine, c, f)) = it.next(p, &col, traces, bin_start, headers) {
            if mine {
                static8_trace::<M, Smem>(p, &col, &f, tbl, n_units, last_full, kmax, xiv2, xeta, iv2_8, eta_8, 0, &c, &mut acc);
                f.stage_rest(n_units);
            } else {
                f.stage_rest(0);
            }
        }
        store(image, &col, &acc, first);
    }
}

#[inline(always)]
pub(super) unsafe fn dynamic_smem<M: Model>(p: &KParams, traces: *const f32, headers: *const f32, bin_start: *const u32,
    iv2: *const f32, eta: *const f32, image: *mut f32, first: u32) {
    let Some(col) = column(p, true) else { return };
    let tbl = unsafe { dynamic_shared::<F4>().add(thread_idx_y() as usize * (CHUNK_LAYERS as usize * 4)) };
    let n_units = col.n_layers.div_ceil(8);
    let mut acc = [0.0f32; 48];
    unsafe {
        let mut it = SmemWalk::new(p, &col, block_dim_y() * DYNAMIC_TABLE, traces, bin_start, headers);
        while let Some((mine, c, f)) = it.next(p, &col, traces, bin_start, headers) {
            if mine {
                dynamic_trace::<M, Smem>(p, &col, &f, tbl, iv2, eta, 0, &c, &mut acc);
                f.stage_rest(n_units);
            } else {
                f.stage_rest(0);
            }
        }
        store(image, &col, &acc, first);
    }
}

// ---- lean per-unit work (static8 / exact, shared-memory staging) ----------------------------------

pub(super) const LEAN_NTHR: u32 = 32 * LEAN_WARPS;

/// This thread's share of the next trace's copy with the address arithmetic done once per trace
/// (the `Smem` hooks recompute tid, bounds and the 64-bit source address per unit, ~21 SASS per
/// unit): entry tid + u LEAN_NTHR is copied during unit u when u LEAN_NTHR < `left`. Replaces the
/// fetch's `next` and `dst` (dead once the plan is made: the rest of the copy after the trace goes
/// through [`Stage::rest`] too).
#[derive(Clone, Copy)]
pub(super) struct Stage {
    /// This thread's first entry of the next trace (global), and its place in the other buffer.
    src: *const f32,
    dst: u32,
    /// Entries of the next trace from this thread's first one on (0: nothing to copy).
    left: u32,
}

impl Smem {
    #[inline(always)]
    fn stage_plan(&self) -> Stage {
        let (tid, _) = tid_fresh();
        let left = if self.next != NO_TRACE && tid < self.len { self.len - tid } else { 0 };
        let src = if left != 0 { self.src(tid) } else { self.traces };
        Stage { src, dst: self.dst + 8 * tid, left }
    }
}

impl Stage {
    #[inline(always)]
    fn load(&self, u: u32) -> (f32, f32) {
        let off = u * LEAN_NTHR;
        if off < self.left { unsafe { ldg_f32x2_ordered(self.src.wrapping_add(2 * off as usize)) } } else { (0.0, 0.0) }
    }
    #[inline(always)]
    fn store(&self, u: u32, v: (f32, f32)) {
        let off = u * LEAN_NTHR;
        if off < self.left {
            unsafe { sts_f32x2(self.dst + 8 * off, v) };
        }
    }
    /// Copies the entries from unit `u` on (as [`Smem::stage_rest`]), two loads in flight.
    #[inline(always)]
    fn rest(&self, u: u32) {
        let mut off = u * LEAN_NTHR;
        while off < self.left {
            let o2 = off + LEAN_NTHR;
            let a = unsafe { ldg_f32x2_ordered(self.src.wrapping_add(2 * off as usize)) };
            let b = if o2 < self.left { unsafe { ldg_f32x2_ordered(self.src.wrapping_add(2 * o2 as usize)) } } else { (0.0, 0.0) };
            unsafe { sts_f32x2(self.dst + 8 * off, a) };
            if o2 < self.left {
                unsafe { sts_f32x2(self.dst + 8 * o2, b) };
            }
            off = o2 + LEAN_NTHR;
        }
    }
}

/// Exact position from an image time `tau` already formed ([`exact_pos`] is this with
/// tau = [`tau_at`]): the same operations, so the same value; the stretch-mute limit then reuses tau.
#[inline(always)]
pub(super) fn exact_pos_tau<M: Model>(tau: f32, c: &Ctx, inv_v2: f32, eta: f32) -> f32 {
    sample_pos(M::two_way(traveltime::half_tau_sq(tau), c.ds2, c.dr2, inv_v2, eta), c.t_first, c.inv_dt)
}

/// Whether grid point (position `s`, image sample `z`, image time `tau`) may start or end a FAST
/// step: [`live_point`] and z <= nz. A step is FAST exactly when both its ends pass (see
/// [`classify`]: FAST = zb <= nz and both ends live, and then none of the DEAD conditions holds),
/// so one test per grid point and a ballot give a unit's FAST mask without classifying its steps.
#[inline(always)]
pub(super) fn fast_end(s: f32, z: u32, tau: f32, c: &Ctx) -> bool {
    let ml = (c.mute * tau - c.t_first) * c.inv_dt; // = mute_limit(z, c)
    (s >= 0.0) & (s <= c.smax) & (s <= ml) & (z <= c.nz) // (no short circuit: no branches)
}

/// One trace's contributions to a column chunk (static8, lean per-unit work; same samples and
/// arithmetic as [`static8_trace`], so the same image bit for bit):
/// - the FAST mask of a unit is `B & (B >> 1 | next << 31)` from one ballot of [`fast_end`] per
///   grid point (each point's mute limit computed once, from the tau of its exact evaluation);
///   units with a non-FAST step inside the chunk take their DEAD mask from [`dead_step`] (no
///   branches) and their layers from [`unit_layers_tested`];
/// - the grid points of unit U + 1 are evaluated during unit U (two units' points live instead of
///   six: registers for the accumulators); lane 0 of "unit n_units" is the 33rd point of a full
///   last unit (the value `extra` is in `static8_trace`), evaluated only when the last unit is full;
/// - one shuffle per unit gives each lane its step's end (lane 0 offers the next unit's point to
///   lane 31); the table is double-buffered by unit parity, so one warp barrier per unit (after
///   the store) suffices; all-FAST full units always take the batched path (the lean kernels imply
///   `batched_units`);
/// - staging and table addresses computed once per trace.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn static8_lean_trace<M: Model>(p: &KParams, col: &Column, fetch: &Smem, tbl: *mut F4, n_units: u32, last_full: bool,
    kmax: u32, iv2_8: *const f32, eta_8: *const f32, stage: &Stage, c: &Ctx, acc: &mut [f32; 48]) {
    // Grid point of lane `lane_fresh()` in unit `u` (z = z0 + 256 u + 8 lane): position, and whether
    // it may end a FAST step.
    let point = |u: u32| -> (f32, bool) {
        let lane = lane_fresh();
        let z = opaque_u32(col.z0) + UNIT * u + STEP * lane;
        let k = col.z0 / STEP + 32 * u + lane;
        let k = if k < kmax { k } else { kmax };
        let v2 = unsafe { coef(iv2_8, col.col, p.coef8_stride, k) };
        let e = if M::NEEDS_ETA { unsafe { coef(eta_8, col.col, p.coef8_stride, k) } } else { 0.0 };
        let tau = tau_at(z, c.tau0, c.dtau);
        let s = exact_pos_tau::<M>(tau, c, v2, e);
        (s, fast_end(s, z, tau, c))
    };
    unsafe {
            let row = fetch.row(0);
            let lane = lane_fresh();
            let z0 = opaque_u32(col.z0);
            let wj = (lane & 7) as f32;
            let g = (lane >> 3) as usize;
            // Table slot of this lane's step (layer lane / 4, group lane % 4; see `static8_trace`).
            let lh = lane >> 2;
            let slot = shared_addr_u32(tbl) + 16 * ((lh >> 1) * 4 + (lane & 3)) + 8 * (lh & 1);
            let (mut pa, e0) = point(0);
            let mut b_cur = vote_ballot(e0);
            unroll!(6, |const U| {
                if (U as u32) < n_units {
                    let stg = stage.load(U as u32);
                    // (Unit n_units's points are only used for lane 0, the 33rd point of a full
                    // last unit; evaluated unconditionally below unit 5, where it costs at most one
                    // unused evaluation in a short chunk.)
                    let (nxt, e_next) = if U + 1 < 6 || last_full { point(U as u32 + 1) } else { (0.0, false) };
                    // Lane 0 offers the next unit's first point (lane 31's step end), the others their
                    // own (`shfl.idx` takes the source lane mod 32).
                    let offer = if lane == 0 { nxt } else { pa };
                    let pb = shfl_idx_f32(offer, lane + 1);
                    let b_next = vote_ballot(e_next);
                    let fm = b_cur & ((b_cur >> 1) | (b_next << 31));
                    #[allow(unused_assignments)]
                    {
                        b_cur = b_next;
                    }
                    let this = pa;
                    #[allow(unused_assignments)]
                    {
                        pa = nxt;
                    }
                    let pa = this;
                    // Table of this unit's parity: the last reads of it were unit U - 2's, before
                    // unit U - 1's barrier.
                    let tb = tbl.add(16 * (U & 1));
                    sts_f32x2(slot + 256 * (U & 1) as u32, (pa, step_slope(pa, pb, STEP)));
                    sync_warp();
                    let full = (U as u32 + 1) * 8 <= col.n_layers;
                    if full && fm == u32::MAX {
                        unit_batched::<U, Smem>(fetch, row, tb, wj, g, acc);
                    } else {
                        // DEAD mask only where a step inside the chunk is not FAST.
                        let valid = if full { u32::MAX } else { !(u32::MAX << (4 * (col.n_layers - 8 * U as u32))) };
                        let dm = if fm | !valid != u32::MAX {
                            let za = opaque_u32(z0) + STEP * lane_fresh() + UNIT * U as u32;
                            vote_ballot(dead_step(pa, za, pb, za + STEP, c))
                        } else {
                            0
                        };
                        unit_layers_tested::<U>(fetch, row, tb, valid, fm, dm, z0, lane, wj, g, c, acc);
                    }
                    stage.store(U as u32, stg);
                }
            });    }
}

/// [`unit_layers`] for the lean2 kernels (`pstm_static8_*_smem_lean2`): the same positions with
/// fewer instructions and branches in units that are not all FAST (a third of the units of
/// `pstm-table2`: the unit where the stretch mute ends and the last one, whose steps cross the
/// record end). `valid`: the steps inside the chunk (whole layers). Per layer one uniform test
/// (some step live inside the chunk), one more where some step is not FAST (DEAD included), and then the per-lane
/// class as selects, not branches: FAST lanes keep the interpolated position, DEAD lanes read
/// [`DEAD`], MIXED lanes the [`checked`] position (the same conditions, without short circuits),
/// i.e. [`step_sample`]. The table pair is loaded for every pair of layers (one LDS, no branch).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn unit_layers_tested<const U: usize>(fetch: &Smem, row: u32, tb: *const F4, valid: u32, fm: u32, dm: u32, z0: u32,
    lane: u32, wj: f32, g: usize, c: &Ctx, acc: &mut [f32; 48]) {
    let live = !dm & valid; // (layers beyond the chunk have no valid step: skipped)
    // Layers with a step that is not FAST, DEAD ones included: the layer where the image ends
    // (nz a multiple of 8, not of 32) has FAST steps before nz and DEAD ones from it, whose lanes
    // must read DEAD, not their interpolated positions (past the trace, or into padding samples).
    let tested = !fm & valid;
    // This lane's class bits in bit 4 LH (its step of layer LH is step g of the layer).
    let dead_g = (dm & !fm) >> g;
    let mixed_g = (!fm & !dm) >> g;
    let mut pair = F4([0.0; 4]);
    unroll!(8, |const LH| {
        let l = U * 8 + LH;
        if LH % 2 == 0 {
            pair = unsafe { *tb.add((LH >> 1) * 4 + g) };
        }
        if (live >> (4 * LH)) & 0xF != 0 {
            let (base, slope) = if LH % 2 == 0 { (pair.0[0], pair.0[1]) } else { (pair.0[2], pair.0[3]) };
            let mut s = interp(wj, slope, base);
            if (tested >> (4 * LH)) & 0xF != 0 {
                let z = z0 + 32 * l as u32 + lane;
                let ok = (z < c.nz) & (s >= 0.0) & (s <= c.smax) & (s <= mute_limit(z, c)); // = live(s, z, c)
                let dead = (dead_g >> (4 * LH)) & 1 != 0;
                let mixed = (mixed_g >> (4 * LH)) & 1 != 0;
                s = if dead | (mixed & !ok) { DEAD } else { s };
            }
            acc[l] += contrib(fetch, row, s);
        }
    });
}

#[inline(always)]
pub(super) unsafe fn static8_smem_lean<M: Model>(p: &KParams, traces: *const f32, headers: *const f32, bin_start: *const u32,
    iv2_8: *const f32, eta_8: *const f32, image: *mut f32, first: u32) {
    let Some(col) = column(p, true) else { return };
    // Two tables per warp (unit parity).
    let tbl = unsafe { dynamic_shared::<F4>().add(thread_idx_y() as usize * 32) };
    let n_units = col.n_layers.div_ceil(8);
    let last_full = col.n_layers % 8 == 0;
    let kmax = p.nz_pad / STEP;
    let mut acc = [0.0f32; 48];
    unsafe {
        let mut it = SmemWalk::new(p, &col, block_dim_y() * 2 * STATIC8_TABLE, traces, bin_start, headers);
        while let Some((mine, c, f)) = it.next(p, &col, traces, bin_start, headers) {
            if mine {
                let stage = f.stage_plan();
                static8_lean_trace::<M>(p, &col, &f, tbl, n_units, last_full, kmax, iv2_8, eta_8, &stage, &c, &mut acc);
                stage.rest(n_units);
            } else {
                f.stage_rest(0);
            }
        }
        store(image, &col, &acc, first);
    }
}
