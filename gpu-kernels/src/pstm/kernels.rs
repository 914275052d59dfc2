//! PSTM kernels: exact, static 8-point (paper 5, section 3) and dynamic traveltimes, DSR and VTI.
//!
//! Shape (paper section 3.2): one warp per image column (x, y, offset class), several columns per
//! block: grid (NX, ceil(NY / W), z-chunks * NOFF), block (32, W); the paper used W = 10. Lane j
//! of a warp owns image samples z = 32 l + j (layer l), so trace reads of a warp fall on nearby
//! samples and image writes are coalesced (paper section 3.3 (1)). The column's accumulators stay
//! in registers for a whole z-chunk of 48 layers (1536 samples) while the warp walks every trace
//! that can reach it (midpoint bins, then the aperture test), and are written once at the end.
//!
//! static8 (paper section 3.1): per trace, the 32 lanes compute the exact positions of the
//! 8-sample grid of every 8-layer unit (lane i: z = 256 u + 8 i; the 33rd point of a unit is lane 0
//! of the next unit, so only a full last unit costs one extra evaluation), classify each 8-sample
//! step, and write (position, slope) into a per-warp table in shared memory; each layer then reads
//! its 4 steps (one 16-byte broadcast load serves two layers) and interpolates.
//!
//! dynamic: lane k owns the 32-sample segment k of the chunk (two rounds for 48 segments), runs the
//! shared step selection ([`super::dynamic_segment`]) and writes (base, slope, offset, class) for
//! each 8-sample quarter; layers read them as in static8. Lanes take different branches here,
//! which is the cost the paper attributes to this scheme on GPUs.
//!
//! Coefficients: 1/v^2 (and eta) per column, per sample for exact and dynamic, every 8th sample for
//! static8 (held in registers for the whole trace loop).

use super::traveltime::{Dsr, Model, Vti};
use super::*;
use crate::device::*;

#[repr(C, align(16))]
#[derive(Clone, Copy)]
struct F4([f32; 4]);

#[repr(C, align(8))]
#[derive(Clone, Copy)]
struct F2([f32; 2]);

/// How a kernel reads packed (a, d) trace entries.
trait Fetch: Copy {
    type Row: Copy;
    /// Handle of batch trace `tr`.
    fn row(&self, tr: u32) -> Self::Row;
    /// Entry `e` (0 = first padding entry) of a trace.
    fn load(&self, row: Self::Row, e: i32) -> (f32, f32);
    /// Shared-memory kernels: the global load of this thread's share of 8-layer unit `u` of the
    /// next trace's copy (issued before the unit's work, stored after it: the latency is hidden
    /// behind the unit). No-ops for the other trace paths.
    /// (fraction, a, d) of the packed entry under position `s` ([`split`], then the entry).
    #[inline(always)]
    fn sample(&self, row: Self::Row, s: f32) -> (f32, f32, f32) {
        let (i, fr) = split(s);
        let (a, d) = self.load(row, i + PAD as i32);
        (fr, a, d)
    }
    #[inline(always)]
    fn stage_load(&self, _u: u32) -> (f32, f32) { (0.0, 0.0) }
    #[inline(always)]
    fn stage_store(&self, _u: u32, _v: (f32, f32)) {}
}

/// Traces in global memory, row-major, read through the non-coherent (read-only) cache.
#[derive(Clone, Copy)]
struct Global {
    base: *const f32,
    row_len: u32,
}

impl Fetch for Global {
    type Row = *const f32;
    #[inline(always)]
    fn row(&self, tr: u32) -> *const f32 { unsafe { self.base.add(2 * tr as usize * self.row_len as usize) } }
    #[inline(always)]
    fn load(&self, row: *const f32, e: i32) -> (f32, f32) {
        let [a, d] = unsafe { crate::device::ldg_f32x2(row.offset(2 * e as isize)) };
        (a, d)
    }
}

/// Traces in a 2D float2 texture (x = entry, y = batch trace), point-sampled at integer texels
/// (paper section 3.3 (2)); the lerp stays in code so results match the CPU.
#[derive(Clone, Copy)]
struct Tex {
    handle: u64,
}

impl Fetch for Tex {
    type Row = u32;
    #[inline(always)]
    fn row(&self, tr: u32) -> u32 { tr }
    #[inline(always)]
    fn load(&self, row: u32, e: i32) -> (f32, f32) {
        // SAFETY: the handle is the batch's trace texture (float2, one row per trace), made by the host.
        unsafe { tex2d_texel_f2(self.handle, e, row) }
    }
}

/// The current trace in a block's shared-memory buffer; the next one is copied into the other
/// buffer meanwhile (each thread of the block copies entries tid, tid + nthr, ...; entry
/// `u * nthr + tid` during 8-layer unit `u`, the rest after the trace's work).
#[derive(Clone, Copy)]
struct Smem {
    /// Shared addresses of the current trace's buffer and of the next one's.
    cur: u32,
    dst: u32,
    /// Next trace (batch index; NO_TRACE: none), the batch's packed traces and the row length.
    next: u32,
    traces: *const f32,
    len: u32,
}

impl Smem {
    #[inline(always)]
    fn src(&self, e: u32) -> *const f32 { unsafe { self.traces.add(2 * (self.next as usize * self.len as usize + e as usize)) } }

    /// Copies the entries from unit `u` on (those no unit hook copied), two loads in flight.
    #[inline(always)]
    fn stage_rest(&self, u: u32) {
        if self.next == NO_TRACE {
            return;
        }
        let (tid, nthr) = tid_fresh();
        let mut e = u * nthr + tid;
        while e < self.len {
            let e2 = e + nthr;
            let a = unsafe { ldg_f32x2_ordered(self.src(e)) };
            let b = if e2 < self.len { unsafe { ldg_f32x2_ordered(self.src(e2)) } } else { (0.0, 0.0) };
            unsafe { sts_f32x2(self.dst + 8 * e, a) };
            if e2 < self.len {
                unsafe { sts_f32x2(self.dst + 8 * e2, b) };
            }
            e = e2 + nthr;
        }
    }
}

/// `add.rm` bits of position 0 in [`split`], and the entry bytes they stand for.
const SPLIT_BIAS: u32 = 0x4B40_0000;

impl Fetch for Smem {
    /// The buffer address biased so that the `add.rm` bits of a position, times 8, give its
    /// entry's address in one IMAD ((bits - SPLIT_BIAS + PAD) * 8 + buffer, mod 2^32), opaque so
    /// the bias is not re-split into every layer's address.
    type Row = u32;
    #[inline(always)]
    fn row(&self, _tr: u32) -> u32 { opaque_u32(self.cur.wrapping_add((PAD as u32).wrapping_sub(SPLIT_BIAS).wrapping_mul(8))) }
    #[inline(always)]
    fn load(&self, row: u32, e: i32) -> (f32, f32) {
        let bits = (e as u32).wrapping_add(SPLIT_BIAS).wrapping_sub(PAD as u32);
        unsafe { lds_f32x2(row.wrapping_add(bits.wrapping_mul(8))) }
    }
    /// Same values as [`split`] (the same `add.rm` and subtractions), one address instruction.
    #[inline(always)]
    fn sample(&self, row: u32, s: f32) -> (f32, f32, f32) {
        let m = add_rm(s, 12_582_912.0);
        let fl = m - 12_582_912.0;
        let (a, d) = unsafe { lds_f32x2(row.wrapping_add(m.to_bits().wrapping_mul(8))) };
        (s - fl, a, d)
    }
    #[inline(always)]
    fn stage_load(&self, u: u32) -> (f32, f32) {
        let (tid, nthr) = tid_fresh();
        let e = u * nthr + tid;
        if self.next != NO_TRACE && e < self.len { unsafe { ldg_f32x2_ordered(self.src(e)) } } else { (0.0, 0.0) }
    }
    #[inline(always)]
    fn stage_store(&self, u: u32, v: (f32, f32)) {
        let (tid, nthr) = tid_fresh();
        let e = u * nthr + tid;
        if self.next != NO_TRACE && e < self.len {
            unsafe { sts_f32x2(self.dst + 8 * e, v) };
        }
    }
}

#[inline(always)]
fn contrib<F: Fetch>(f: &F, row: F::Row, s: f32) -> f32 {
    let (fr, a, d) = f.sample(row, s);
    mul_add(fr, d, a)
}

/// The image column (and z-chunk) a warp owns.
#[derive(Clone, Copy)]
struct Column {
    x: f32,
    y: f32,
    k: u32,
    /// Index of the column's first sample in the image (chunk start included).
    out: usize,
    /// Column index into the coefficient arrays.
    col: u32,
    /// First image sample of the chunk, and its number of layers.
    z0: u32,
    n_layers: u32,
    /// False for the padding warps of the last block along y (lockstep mode keeps them in the
    /// trace walk for the block barriers; they contribute nothing and store nothing).
    active: bool,
    /// x and y of the block's first and last real columns (lockstep bins).
    x_lo: f32,
    x_hi: f32,
    y_lo: f32,
    y_hi: f32,
}

/// The warp's column: warp w of a block is column (w / ty, w % ty) of its tile of tile_x x ty
/// columns (ty = warps / tile_x). Padding warps (beyond nx or ny) return None unless `keep` (the
/// lockstep walks need every warp at their barriers).
#[inline(always)]
fn column(p: &KParams, keep: bool) -> Option<Column> {
    let bdy = block_dim_y();
    // (checked_*: no panicking division in the kernel; the host checks tile_x divides warps)
    let tx = if p.tile_x == 0 || p.tile_x > bdy { 1 } else { p.tile_x };
    let tyn = bdy.checked_div(tx).unwrap_or(1).max(1);
    let ty = thread_idx_y();
    let (wx, wy) = (ty.checked_div(tyn).unwrap_or(0), ty.checked_rem(tyn).unwrap_or(0));
    let ix0 = block_idx_x() * tx;
    let ix_last = if ix0 + tx < p.nx { ix0 + tx - 1 } else { p.nx - 1 };
    let iy0 = block_idx_y() * tyn;
    let iy_last = if iy0 + tyn < p.ny { iy0 + tyn - 1 } else { p.ny - 1 };
    let (ix, iy) = (ix0 + wx, iy0 + wy);
    let active = ix < p.nx && iy < p.ny;
    if !active && !keep {
        return None;
    }
    let ix = if ix < p.nx { ix } else { ix_last };
    let iy = if iy < p.ny { iy } else { iy_last };
    let noff = if p.noff == 0 { 1 } else { p.noff }; // (the host checks; this keeps `%` panic-free)
    let k = block_idx_z() % noff;
    let chunk = block_idx_z() / noff;
    let z0 = chunk * LAYER * CHUNK_LAYERS;
    let total_layers = p.nz_pad / LAYER;
    let left = total_layers - chunk * CHUNK_LAYERS;
    let n_layers = if left < CHUNK_LAYERS { left } else { CHUNK_LAYERS };
    let col = ix * p.ny + iy;
    Some(Column {
        x: ix as f32 * p.dx,
        y: iy as f32 * p.dy,
        k,
        out: ((col as usize) * p.noff as usize + k as usize) * p.nz_pad as usize + z0 as usize,
        col,
        z0,
        n_layers,
        active,
        x_lo: ix0 as f32 * p.dx,
        x_hi: ix_last as f32 * p.dx,
        y_lo: iy0 as f32 * p.dy,
        y_hi: iy_last as f32 * p.dy,
    })
}

/// The batch traces of the column's offset class within the aperture, in the sorted order the
/// CPU reference also uses. An explicit iterator rather than a closure: the per-trace body then
/// stays in the kernel function (a large closure is not always inlined, and a call is not allowed
/// in the capped-register module).
struct Traces {
    /// Next bin row to open, last row, bin column range.
    next_by: u32,
    by1: u32,
    bx0: u32,
    bx1: u32,
    /// Current trace and end of the current run.
    tr: u32,
    r1: u32,
    lockstep: bool,
}

impl Traces {
    #[inline(always)]
    fn new(p: &KParams, col: &Column) -> Traces {
        if p.lockstep != 0 {
            // The union of the block's columns' bins: one candidate sequence for every warp.
            let ((bx0, _), (by0, _)) = p.bins.around(col.x_lo, col.y_lo, p.aperture);
            let ((_, bx1), (_, by1)) = p.bins.around(col.x_hi, col.y_hi, p.aperture);
            return Traces { next_by: by0, by1, bx0, bx1, tr: 0, r1: 0, lockstep: true };
        }
        let ((bx0, bx1), (by0, by1)) = p.bins.around(col.x, col.y, p.aperture);
        Traces { next_by: by0, by1, bx0, bx1, tr: 0, r1: 0, lockstep: false }
    }

    #[inline(always)]
    unsafe fn next(&mut self, p: &KParams, col: &Column, bin_start: *const u32, headers: *const f32) -> Option<(u32, Ctx)> {
        loop {
            while self.tr < self.r1 {
                let tr = self.tr;
                self.tr += 1;
                if self.lockstep && tr % 2 == 0 {
                    // Every warp visits every candidate in the same order, so all reach this.
                    sync_threads();
                }
                let h = unsafe { ldg_f32x4(headers.add(4 * tr as usize)) };
                let (ds2, dr2, md2) = distances(h[0], h[1], h[2], h[3], col.x, col.y);
                if md2 <= p.aperture2 && col.active {
                    return Some((tr, p.ctx(ds2, dr2)));
                }
            }
            if self.next_by > self.by1 {
                return None;
            }
            let row = (col.k * p.bins.ny + self.next_by) * p.bins.nx;
            self.tr = unsafe { ldg_u32(bin_start.add((row + self.bx0) as usize)) };
            self.r1 = unsafe { ldg_u32(bin_start.add((row + self.bx1 + 1) as usize)) };
            self.next_by += 1;
        }
    }
}

/// Bytes of the union-mask slots of the shared-memory kernels (2 parities x 32 warps), and of each
/// warp's walk state (16 words) and candidate distances (32 x (ds2, dr2)).
const SLOT_BYTES: u32 = 256;
const WALK_BYTES: u32 = 64 + 256;
const NO_TRACE: u32 = u32::MAX;

/// Shared-memory layout after the per-warp tables (`tables` bytes): mask slots, per-warp walk
/// areas, then the two trace buffers (the host's `smem_stage_bytes` adds the same).
#[derive(Clone, Copy)]
struct Layout {
    slots: u32,
    walk: u32,
    buf0: u32,
    buf_bytes: u32,
}

impl Layout {
    #[inline(always)]
    fn new(p: &KParams, tables: u32) -> Layout {
        let slots = shared_addr_u32(dynamic_shared::<u8>()) + tables;
        let walk = slots + SLOT_BYTES;
        let buf0 = walk + block_dim_y() * WALK_BYTES;
        Layout { slots, walk, buf0, buf_bytes: (p.packed_len * 8).div_ceil(16) * 16 }
    }
}

/// The shared-memory walk: the warps of a block walk the union of their bins together (as in
/// lockstep), in groups of up to 32 candidates whose aperture tests the lanes make at once; each
/// trace some warp of the block needs is copied once per block into a double buffer in shared
/// memory (trace n + 1 while trace n is used), with one block barrier per trace. Each warp gets the
/// traces it needs in the sorted order the CPU uses, so results are unchanged.
///
/// The state lives in the warp's shared-memory area between traces (loaded and stored once per
/// trace): in registers it would stay live across the unrolled trace body and push accumulators
/// into local memory.
#[derive(Clone, Copy)]
struct Walk {
    /// Candidate stream (as in [`Traces`]): next bin row to open, current candidate, run end.
    next_by: u32,
    tr: u32,
    r1: u32,
    /// Current group: first candidate, candidates some warp still needs (bits), those this warp
    /// needs, slot parity.
    gbase: u32,
    rem: u32,
    mine: u32,
    parity: u32,
    /// Sequence number of the staged trace (buffer j & 1), its batch index (NO_TRACE: none), and
    /// this warp's need and distances for it.
    j: u32,
    cur: u32,
    cur_mine: u32,
    cur_ds2: f32,
    cur_dr2: f32,
}

impl Walk {
    #[inline(always)]
    unsafe fn load(at: u32) -> Walk {
        let [a, b, c, d] = unsafe { lds_u32x4(at) };
        let [e, f, g, h] = unsafe { lds_u32x4(at + 16) };
        let [i, j, k, l] = unsafe { lds_u32x4(at + 32) };
        Walk { next_by: a, tr: b, r1: c, gbase: d, rem: e, mine: f, parity: g, j: h, cur: i, cur_mine: j,
            cur_ds2: f32::from_bits(k), cur_dr2: f32::from_bits(l) }
    }
    #[inline(always)]
    unsafe fn save(&self, at: u32) {
        unsafe {
            sts_u32x4(at, [self.next_by, self.tr, self.r1, self.gbase]);
            sts_u32x4(at + 16, [self.rem, self.mine, self.parity, self.j]);
            sts_u32x4(at + 32, [self.cur, self.cur_mine, self.cur_ds2.to_bits(), self.cur_dr2.to_bits()]);
        }
    }

    /// The next trace some warp of the block needs (block-uniform), with whether this warp needs it
    /// and its squared distances to this warp's column. `dist` = the warp's candidate distances.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn advance(&mut self, p: &KParams, col: &Column, lay: &Layout, dist: u32, bin_start: *const u32,
        headers: *const f32) -> Option<(u32, bool, f32, f32)> {
        loop {
            if self.rem != 0 {
                let b = self.rem.trailing_zeros();
                self.rem &= self.rem - 1;
                let (ds2, dr2) = unsafe { lds_f32x2(dist + 8 * b) };
                return Some((self.gbase + b, (self.mine >> b) & 1 != 0, ds2, dr2));
            }
            if self.tr >= self.r1 {
                let ((bx0, _), (_, _)) = p.bins.around(col.x_lo, col.y_lo, p.aperture);
                let ((_, bx1), (_, by1)) = p.bins.around(col.x_hi, col.y_hi, p.aperture);
                if self.next_by > by1 {
                    return None;
                }
                let row = (col.k * p.bins.ny + self.next_by) * p.bins.nx;
                self.tr = unsafe { ldg_u32(bin_start.add((row + bx0) as usize)) };
                self.r1 = unsafe { ldg_u32(bin_start.add((row + bx1 + 1) as usize)) };
                self.next_by += 1;
                continue;
            }
            let n = if self.r1 - self.tr < 32 { self.r1 - self.tr } else { 32 };
            self.gbase = self.tr;
            self.tr += n;
            let lane = lane_fresh();
            let mut ok = false;
            if lane < n {
                let h = unsafe { ldg_f32x4(headers.add(4 * (self.gbase + lane) as usize)) };
                let (ds2, dr2, md2) = distances(h[0], h[1], h[2], h[3], col.x, col.y);
                ok = md2 <= p.aperture2 && col.active;
                unsafe { sts_f32x2(dist + 8 * lane, (ds2, dr2)) };
            }
            let m = vote_ballot(ok);
            self.mine = m;
            // Union over the block's warps: slots alternate by group, so a group's slots are not
            // rewritten before every warp has passed the next group's barrier (which also orders
            // the distance stores above before their reads by other lanes).
            let slots = lay.slots + self.parity * 128;
            if lane == 0 {
                unsafe { sts_u32(slots + 4 * thread_idx_y(), m) };
            }
            sync_threads();
            let mut u = 0;
            let mut w = 0;
            while w < block_dim_y() {
                u |= unsafe { lds_u32(slots + 4 * w) };
                w += 1;
            }
            self.parity ^= 1;
            self.rem = u;
        }
    }
}

/// Staging fetch of the shared-memory kernels.
struct SmemWalk {
    lay: Layout,
}

impl SmemWalk {
    /// Sets up the walk and copies the first needed trace (synchronously). `tables` = bytes of
    /// per-warp tables at the front of the dynamic shared memory.
    #[inline(always)]
    unsafe fn new(p: &KParams, col: &Column, tables: u32, traces: *const f32, bin_start: *const u32, headers: *const f32)
        -> SmemWalk {
        let lay = Layout::new(p, tables);
        let at = lay.walk + thread_idx_y() * WALK_BYTES;
        let (_, (by0, _)) = p.bins.around(col.x_lo, col.y_lo, p.aperture);
        let mut w = Walk { next_by: by0, tr: 0, r1: 0, gbase: 0, rem: 0, mine: 0, parity: 0, j: 0, cur: NO_TRACE,
            cur_mine: 0, cur_ds2: 0.0, cur_dr2: 0.0 };
        if let Some((tr, m, a, b)) = unsafe { w.advance(p, col, &lay, at + 64, bin_start, headers) } {
            (w.cur, w.cur_mine, w.cur_ds2, w.cur_dr2) = (tr, m as u32, a, b);
            Smem { cur: 0, dst: lay.buf0, next: tr, traces, len: p.packed_len }.stage_rest(0);
        }
        unsafe { w.save(at) };
        SmemWalk { lay }
    }

    /// The next trace of the block: whether this warp needs it, its context, and the fetch that
    /// reads it from shared memory and copies the following one. One block barrier per trace:
    /// after it the trace's copy is complete and every warp is done with the other buffer.
    #[inline(always)]
    unsafe fn next(&mut self, p: &KParams, col: &Column, traces: *const f32, bin_start: *const u32, headers: *const f32)
        -> Option<(bool, Ctx, Smem)> {
        let at = self.lay.walk + thread_idx_y() * WALK_BYTES;
        let mut w = unsafe { Walk::load(at) };
        if w.cur == NO_TRACE {
            return None;
        }
        sync_threads();
        let nxt = unsafe { w.advance(p, col, &self.lay, at + 64, bin_start, headers) };
        let (mine, c) = (w.cur_mine != 0, p.ctx(w.cur_ds2, w.cur_dr2));
        let j = w.j;
        w.j += 1;
        match nxt {
            Some((tr, m, a, b)) => (w.cur, w.cur_mine, w.cur_ds2, w.cur_dr2) = (tr, m as u32, a, b),
            None => w.cur = NO_TRACE,
        }
        unsafe { w.save(at) };
        let lay = &self.lay;
        Some((mine, c, Smem { cur: lay.buf0 + (j & 1) * lay.buf_bytes, dst: lay.buf0 + ((j + 1) & 1) * lay.buf_bytes,
            next: w.cur, traces, len: p.packed_len }))
    }
}

/// Writes (first batch) or adds the accumulators of a chunk.
#[inline(always)]
unsafe fn store(image: *mut f32, col: &Column, acc: &[f32; 48], first: u32) {
    if !col.active {
        return;
    }
    let lane = thread_idx_x() as usize;
    unroll!(48, |const L| {
        if (L as u32) < col.n_layers {
            let q = unsafe { image.add(col.out + 32 * L + lane) };
            unsafe { *q = if first != 0 { acc[L] } else { *q + acc[L] } };
        }
    });
}

#[inline(always)]
unsafe fn coef(arr: *const f32, col: u32, stride: u32, i: u32) -> f32 {
    unsafe { crate::device::ldg_f32(arr.add(col as usize * stride as usize + i as usize)) }
}

// ---- exact ---------------------------------------------------------------------------------------

/// One trace's contributions to a column chunk (exact traveltimes).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn exact_trace<M: Model, F: Fetch>(p: &KParams, col: &Column, fetch: &F, iv2: *const f32, eta: *const f32, tr: u32,
    c: &Ctx, acc: &mut [f32; 48]) {
    unsafe {
            let row = fetch.row(tr);
            let lane = lane_fresh();
            let z0 = opaque_u32(col.z0);
            // In units of 8 layers (the shared-memory kernels copy a share of the next trace per unit).
            unroll!(6, |const U| {
                if ((8 * U) as u32) < col.n_layers {
                    let stg = fetch.stage_load(U as u32);
                    unroll!(8, |const LH| {
                        let l = 8 * U + LH;
                        if (l as u32) < col.n_layers {
                            let z = z0 + 32 * l as u32 + lane;
                            let v2 = coef(iv2, col.col, p.coef_stride, z);
                            let e = if M::NEEDS_ETA { coef(eta, col.col, p.coef_stride, z) } else { 0.0 };
                            let s = checked(exact_pos::<M>(z, c, v2, e), z, c);
                            acc[l] += contrib(fetch, row, s);
                        }
                    });
                    fetch.stage_store(U as u32, stg);
                }
            });    }
}

#[inline(always)]
unsafe fn exact<M: Model, F: Fetch>(p: &KParams, fetch: F, headers: *const f32, bin_start: *const u32,
    iv2: *const f32, eta: *const f32, image: *mut f32, first: u32) {
    let Some(col) = column(p, p.lockstep != 0) else { return };
    let mut acc = [0.0f32; 48];
    unsafe {
        let mut it = Traces::new(p, &col);
        while let Some((tr, c)) = it.next(p, &col, bin_start, headers) {
            exact_trace::<M, F>(p, &col, &fetch, iv2, eta, tr, &c, &mut acc);
        }
        store(image, &col, &acc, first);
    }
}

// ---- static 8-point ----------------------------------------------------------------------------

/// Unit `U` of a trace when every step is FAST and all 8 layers are inside the chunk (`tb`: the
/// unit's (position, slope) table, laid out as in [`static8_trace`]): no tests, no branches, so the
/// 8 trace loads are issued together (memory-level parallelism).
#[inline(always)]
unsafe fn unit_batched<const U: usize, F: Fetch>(fetch: &F, row: F::Row, tb: *const F4, wj: f32, g: usize, acc: &mut [f32; 48]) {
    unsafe {
        let q = [*tb.add(g), *tb.add(4 + g), *tb.add(8 + g), *tb.add(12 + g)];
        let mut v = [(0.0f32, 0.0f32, 0.0f32); 8];
        unroll!(8, |const LH| {
            let e = q[LH >> 1].0;
            let (base, slope) = if LH % 2 == 0 { (e[0], e[1]) } else { (e[2], e[3]) };
            let (f, a, d) = fetch.sample(row, interp(wj, slope, base));
            v[LH] = (f, d, a);
        });
        unroll!(8, |const LH| {
            acc[U * 8 + LH] += mul_add(v[LH].0, v[LH].1, v[LH].2);
        });
    }
}

/// Unit `U` of a trace layer by layer (the chunk's layers below `n_layers`): layers whose 4 steps
/// are all DEAD (`dm`) are skipped, all-FAST ones (`fm`) use the interpolated position untested,
/// the others test per lane ([`step_sample`]). `z0`, `lane`: the chunk's first sample and the lane.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn unit_layers<const U: usize, F: Fetch>(fetch: &F, row: F::Row, tb: *const F4, n_layers: u32, fm: u32, dm: u32, z0: u32,
    lane: u32, wj: f32, g: usize, c: &Ctx, acc: &mut [f32; 48]) {
    let mut pair = F4([0.0; 4]);
    unroll!(8, |const LH| {
        let l = U * 8 + LH;
        if (l as u32) < n_layers {
            if LH % 2 == 0 {
                pair = unsafe { *tb.add((LH >> 1) * 4 + g) };
            }
            let f4 = (fm >> (4 * LH)) & 0xF;
            let d4 = (dm >> (4 * LH)) & 0xF;
            if d4 != 0xF {
                let (base, slope) = if LH % 2 == 0 { (pair.0[0], pair.0[1]) } else { (pair.0[2], pair.0[3]) };
                let mut s = interp(wj, slope, base);
                if f4 != 0xF {
                    let z = z0 + 32 * l as u32 + lane;
                    let cls = if (f4 >> g) & 1 != 0 { FAST } else if (d4 >> g) & 1 != 0 { DEAD_STEP } else { MIXED };
                    s = step_sample(cls, s, z, c);
                }
                acc[l] += contrib(fetch, row, s);
            }
        }
    });
}

/// One trace's contributions to a column chunk (static8 traveltimes).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn static8_trace<M: Model, F: Fetch>(p: &KParams, col: &Column, fetch: &F, tbl: *mut F4, n_units: u32, last_full: bool,
    kmax: u32, xiv2: f32, xeta: f32, iv2_8: *const f32, eta_8: *const f32, tr: u32, c: &Ctx, acc: &mut [f32; 48]) {
    unsafe {
            let row = fetch.row(tr);
            let lane = lane_fresh();
            let z0 = opaque_u32(col.z0);
            let wj = (lane & 7) as f32;
            let g = (lane >> 3) as usize;
            // Exact positions of the grid points (independent: good instruction-level parallelism).
            // (Coefficients re-read per trace from L1: held across the loop they cost 6-12 registers.)
            let mut pts = [0.0f32; 6];
            unroll!(6, |const U| {
                if (U as u32) < n_units {
                    let k = z0 / STEP + 32 * U as u32 + lane;
                    let k = if k < kmax { k } else { kmax };
                    let v2 = coef(iv2_8, col.col, p.coef8_stride, k);
                    let e = if M::NEEDS_ETA { coef(eta_8, col.col, p.coef8_stride, k) } else { 0.0 };
                    pts[U] = exact_pos::<M>(z0 + UNIT * U as u32 + STEP * lane, c, v2, e);
                }
            });
            let extra = if last_full { exact_pos::<M>(z0 + UNIT * n_units, c, xiv2, xeta) } else { 0.0 };
            unroll!(6, |const U| {
                if (U as u32) < n_units {
                    let stg = fetch.stage_load(U as u32);
                    // This unit's 32 steps: classify, then (position, slope) into the table.
                    let pa = pts[U];
                    let nb = shfl_down_f32(pa, 1);
                    let n31 = if U + 1 < 6 && ((U + 1) as u32) < n_units {
                        shfl_idx_f32(pts[if U + 1 < 6 { U + 1 } else { 5 }], 0)
                    } else {
                        extra
                    };
                    let pb = if lane == 31 { n31 } else { nb };
                    let za = z0 + UNIT * U as u32 + STEP * lane;
                    let cls = classify(pa, za, pb, za + STEP, c);
                    let fm = vote_ballot(cls == FAST);
                    let dm = vote_ballot(cls == DEAD_STEP);
                    let lh = (lane >> 2) as usize;
                    let mut continue_unit = true;
                    sync_warp(); // the previous unit's table reads are done
                    let slot = tbl.add((lh >> 1) * 4 + (lane & 3) as usize) as *mut F2;
                    *slot.add(lh & 1) = F2([pa, step_slope(pa, pb, STEP)]);
                    sync_warp();
                    let full = (U as u32 + 1) * 8 <= col.n_layers;
                    if p.batched_units != 0 && full && fm == u32::MAX {
                        unit_batched::<U, F>(fetch, row, tbl, wj, g, acc);
                        continue_unit = false;
                    }
                    if continue_unit {
                        unit_layers::<U, F>(fetch, row, tbl, col.n_layers, fm, dm, z0, lane, wj, g, c, acc);
                    }
                    fetch.stage_store(U as u32, stg);
                }
            });    }
}

#[inline(always)]
unsafe fn static8<M: Model, F: Fetch>(p: &KParams, fetch: F, headers: *const f32, bin_start: *const u32,
    iv2_8: *const f32, eta_8: *const f32, image: *mut f32, first: u32) {
    let Some(col) = column(p, p.lockstep != 0) else { return };
    let lane = thread_idx_x();
    // One unit's 32 steps of (position, slope), 16 float4 laid out so that the float4 at
    // (lh/2)*4 + g holds step g of layer lh (even) and of layer lh + 1.
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
        let mut it = Traces::new(p, &col);
        while let Some((tr, c)) = it.next(p, &col, bin_start, headers) {
            static8_trace::<M, F>(p, &col, &fetch, tbl, n_units, last_full, kmax, xiv2, xeta, iv2_8, eta_8, tr, &c, &mut acc);
        }
        store(image, &col, &acc, first);
    }
}

// ---- dynamic -------------------------------------------------------------------------------------

/// One trace's contributions to a column chunk (dynamic traveltimes).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn dynamic_trace<M: Model, F: Fetch>(p: &KParams, col: &Column, fetch: &F, tbl: *mut F4, iv2: *const f32, eta: *const f32,
    tr: u32, c: &Ctx, acc: &mut [f32; 48]) {
    let zmax = p.nz_pad;
    let eval = |z: u32, c: &Ctx| {
        let zc = if z < zmax { z } else { zmax };
        let v2 = unsafe { coef(iv2, col.col, p.coef_stride, zc) };
        let e = if M::NEEDS_ETA { unsafe { coef(eta, col.col, p.coef_stride, zc) } } else { 0.0 };
        exact_pos::<M>(z, c, v2, e)
    };
    unsafe {
            let row = fetch.row(tr);
            let lane = lane_fresh();
            let z0 = opaque_u32(col.z0);
            let jf = lane as f32;
            let g = (lane >> 3) as usize;
            let mut carry = eval(z0, c);
            let mut fm = [0u32; 2];
            let mut dm = [0u32; 2];
            sync_warp();
            unroll!(2, |const R| {
                if ((32 * R) as u32) < col.n_layers {
                    let seg = 32 * R as u32 + lane;
                    let valid = seg < col.n_layers;
                    let zs = z0 + 32 * seg;
                    let s32 = eval(zs + 32, c);
                    let up = shfl_up1_f32(s32);
                    let s0 = if lane == 0 { carry } else { up };
                    carry = shfl_idx_f32(s32, 31);
                    let mut fast_all = valid;
                    let mut dead_all = true;
                    if valid {
                        let t = tbl.add(4 * seg as usize);
                        dynamic_segment(zs, s0, s32, p.tol, p.max_step, c, |o| eval(zs + o, c), |o, len, base, slope, cls| {
                            let mut q = o / 8;
                            while q < (o + len) / 8 {
                                *t.add(q as usize) = F4([base, slope, o as f32, cls as f32]);
                                q += 1;
                            }
                            fast_all &= cls == FAST;
                            dead_all &= cls == DEAD_STEP;
                        });
                    }
                    fm[R] = vote_ballot(fast_all);
                    dm[R] = vote_ballot(dead_all);
                }
            });
            sync_warp();
            unroll!(6, |const U| {
                if ((8 * U) as u32) < col.n_layers {
                    let stg = fetch.stage_load(U as u32);
                    unroll!(8, |const LH| {
                        let l = 8 * U + LH;
                        if (l as u32) < col.n_layers && (dm[l / 32] >> (l % 32)) & 1 == 0 {
                            let e = *tbl.add(4 * l + g);
                            let mut s = interp(jf - e.0[2], e.0[1], e.0[0]);
                            if (fm[l / 32] >> (l % 32)) & 1 == 0 {
                                s = step_sample(e.0[3] as u32, s, z0 + 32 * l as u32 + lane, c);
                            }
                            acc[l] += contrib(fetch, row, s);
                        }
                    });
                    fetch.stage_store(U as u32, stg);
                }
            });    }
}

#[inline(always)]
unsafe fn dynamic<M: Model, F: Fetch>(p: &KParams, fetch: F, headers: *const f32, bin_start: *const u32,
    iv2: *const f32, eta: *const f32, image: *mut f32, first: u32) {
    let Some(col) = column(p, p.lockstep != 0) else { return };
    // 48 segments x 4 quarters of (base, slope, step offset, class).
    let tbl = unsafe { dynamic_shared::<F4>().add(thread_idx_y() as usize * (CHUNK_LAYERS as usize * 4)) };
    let mut acc = [0.0f32; 48];
    unsafe {
        let mut it = Traces::new(p, &col);
        while let Some((tr, c)) = it.next(p, &col, bin_start, headers) {
            dynamic_trace::<M, F>(p, &col, &fetch, tbl, iv2, eta, tr, &c, &mut acc);
        }
        store(image, &col, &acc, first);
    }
}

// ---- shared-memory trace staging ------------------------------------------------------------------

/// Per-warp table bytes at the front of the dynamic shared memory (the host adds the same).
const STATIC8_TABLE: u32 = 16 * 16;
const DYNAMIC_TABLE: u32 = CHUNK_LAYERS * 4 * 16;

#[inline(always)]
unsafe fn exact_smem<M: Model>(p: &KParams, traces: *const f32, headers: *const f32, bin_start: *const u32,
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
unsafe fn static8_smem<M: Model>(p: &KParams, traces: *const f32, headers: *const f32, bin_start: *const u32,
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
unsafe fn dynamic_smem<M: Model>(p: &KParams, traces: *const f32, headers: *const f32, bin_start: *const u32,
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

const LEAN_NTHR: u32 = 32 * LEAN_WARPS;

/// This thread's share of the next trace's copy with the address arithmetic done once per trace
/// (the `Smem` hooks recompute tid, bounds and the 64-bit source address per unit, ~21 SASS per
/// unit): entry tid + u LEAN_NTHR is copied during unit u when u LEAN_NTHR < `left`. Replaces the
/// fetch's `next` and `dst` (dead once the plan is made: the rest of the copy after the trace goes
/// through [`Stage::rest`] too).
#[derive(Clone, Copy)]
struct Stage {
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
fn exact_pos_tau<M: Model>(tau: f32, c: &Ctx, inv_v2: f32, eta: f32) -> f32 {
    sample_pos(M::two_way(traveltime::half_tau_sq(tau), c.ds2, c.dr2, inv_v2, eta), c.t_first, c.inv_dt)
}

/// Whether grid point (position `s`, image sample `z`, image time `tau`) may start or end a FAST
/// step: [`live_point`] and z <= nz. A step is FAST exactly when both its ends pass (see
/// [`classify`]: FAST = zb <= nz and both ends live, and then none of the DEAD conditions holds),
/// so one test per grid point and a ballot give a unit's FAST mask without classifying its steps.
#[inline(always)]
fn fast_end(s: f32, z: u32, tau: f32, c: &Ctx) -> bool {
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
unsafe fn static8_lean_trace<M: Model>(p: &KParams, col: &Column, fetch: &Smem, tbl: *mut F4, n_units: u32, last_full: bool,
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
/// (some step live inside the chunk), one more where some step is not FAST, and then the per-lane
/// class as selects, not branches: FAST lanes keep the interpolated position, DEAD lanes read
/// [`DEAD`], MIXED lanes the [`checked`] position (the same conditions, without short circuits),
/// i.e. [`step_sample`]. The table pair is loaded for every pair of layers (one LDS, no branch).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn unit_layers_tested<const U: usize>(fetch: &Smem, row: u32, tb: *const F4, valid: u32, fm: u32, dm: u32, z0: u32,
    lane: u32, wj: f32, g: usize, c: &Ctx, acc: &mut [f32; 48]) {
    let live = !dm & valid; // (layers beyond the chunk have no valid step: skipped)
    let tested = !fm & live;
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
unsafe fn static8_smem_lean<M: Model>(p: &KParams, traces: *const f32, headers: *const f32, bin_start: *const u32,
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

// ---- entry points --------------------------------------------------------------------------------

macro_rules! entry {
    ($name:ident, $body:ident, $model:ty, global) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: KParams, traces: *const f32, headers: *const f32,
            bin_start: *const u32, iv2: *const f32, eta: *const f32, image: *mut f32, first: u32) {
            let row_len = p.packed_len;
            unsafe { $body::<$model, Global>(&p, Global { base: traces, row_len }, headers, bin_start, iv2, eta, image, first) }
        }
    };
    ($name:ident, $body:ident, $model:ty, tex) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: KParams, traces: u64, headers: *const f32,
            bin_start: *const u32, iv2: *const f32, eta: *const f32, image: *mut f32, first: u32) {
            unsafe { $body::<$model, Tex>(&p, Tex { handle: traces }, headers, bin_start, iv2, eta, image, first) }
        }
    };
    ($name:ident, $body:ident, $model:ty, smem) => {
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: KParams, traces: *const f32, headers: *const f32,
            bin_start: *const u32, iv2: *const f32, eta: *const f32, image: *mut f32, first: u32) {
            unsafe { $body::<$model>(&p, traces, headers, bin_start, iv2, eta, image, first) }
        }
    };
}

entry!(pstm_exact_dsr, exact, Dsr, global);
entry!(pstm_exact_vti, exact, Vti, global);
entry!(pstm_static8_dsr, static8, Dsr, global);
entry!(pstm_static8_vti, static8, Vti, global);
entry!(pstm_static8_dsr_tex, static8, Dsr, tex);
entry!(pstm_static8_vti_tex, static8, Vti, tex);
entry!(pstm_dynamic_dsr, dynamic, Dsr, global);
entry!(pstm_dynamic_vti, dynamic, Vti, global);
entry!(pstm_exact_dsr_smem, exact_smem, Dsr, smem);
entry!(pstm_exact_vti_smem, exact_smem, Vti, smem);
entry!(pstm_static8_dsr_smem, static8_smem, Dsr, smem);
entry!(pstm_static8_vti_smem, static8_smem, Vti, smem);
entry!(pstm_dynamic_dsr_smem, dynamic_smem, Dsr, smem);
entry!(pstm_dynamic_vti_smem, dynamic_smem, Vti, smem);
entry!(pstm_static8_dsr_smem_lean2, static8_smem_lean, Dsr, smem);
entry!(pstm_static8_vti_smem_lean2, static8_smem_lean, Vti, smem);
