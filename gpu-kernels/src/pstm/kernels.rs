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

// On the host only the entry points' descriptors are used: the kernels' helpers compile there
// (the device layer has host bodies) but nothing calls them, and clippy sees them only there.
#![cfg_attr(not(target_arch = "nvptx64"), allow(dead_code, unused_imports, unused_variables, unused_assignments,
    clippy::too_many_arguments, clippy::manual_is_multiple_of))]

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

mod modes;
mod staged;

use modes::{dynamic, exact, static8};
use staged::{dynamic_smem, exact_smem, static8_smem, static8_smem_lean};

// ---- entry points --------------------------------------------------------------------------------

/// The descriptor type of the kernels reading the traces from global memory (directly or staged in
/// shared memory): parameters, traces, headers, bin starts, 1/v^2, eta, image, first batch.
pub type PstmKernel = Kernel<(KParams, *const f32, *const f32, *const u32, *const f32, *const f32, *mut f32, u32)>;
/// The descriptor type of the kernels reading the traces through a texture (its object as `u64`).
pub type PstmTexKernel = Kernel<(KParams, u64, *const f32, *const u32, *const f32, *const f32, *mut f32, u32)>;

macro_rules! entry {
    ($name:ident as $desc:ident, $body:ident, $model:ty, global) => { crate::kernel! {
        pub unsafe fn $name(p: KParams, traces: *const f32, headers: *const f32,
            bin_start: *const u32, iv2: *const f32, eta: *const f32, image: *mut f32, first: u32) as $desc {
            let row_len = p.packed_len;
            unsafe { $body::<$model, Global>(&p, Global { base: traces, row_len }, headers, bin_start, iv2, eta, image, first) }
        }
    } };
    ($name:ident as $desc:ident, $body:ident, $model:ty, tex) => { crate::kernel! {
        pub unsafe fn $name(p: KParams, traces: u64, headers: *const f32,
            bin_start: *const u32, iv2: *const f32, eta: *const f32, image: *mut f32, first: u32) as $desc {
            unsafe { $body::<$model, Tex>(&p, Tex { handle: traces }, headers, bin_start, iv2, eta, image, first) }
        }
    } };
    ($name:ident as $desc:ident, $body:ident, $model:ty, smem) => { crate::kernel! {
        pub unsafe fn $name(p: KParams, traces: *const f32, headers: *const f32,
            bin_start: *const u32, iv2: *const f32, eta: *const f32, image: *mut f32, first: u32) as $desc {
            unsafe { $body::<$model>(&p, traces, headers, bin_start, iv2, eta, image, first) }
        }
    } };
}

entry!(pstm_exact_dsr as PSTM_EXACT_DSR, exact, Dsr, global);
entry!(pstm_exact_vti as PSTM_EXACT_VTI, exact, Vti, global);
entry!(pstm_static8_dsr as PSTM_STATIC8_DSR, static8, Dsr, global);
entry!(pstm_static8_vti as PSTM_STATIC8_VTI, static8, Vti, global);
entry!(pstm_static8_dsr_tex as PSTM_STATIC8_DSR_TEX, static8, Dsr, tex);
entry!(pstm_static8_vti_tex as PSTM_STATIC8_VTI_TEX, static8, Vti, tex);
entry!(pstm_dynamic_dsr as PSTM_DYNAMIC_DSR, dynamic, Dsr, global);
entry!(pstm_dynamic_vti as PSTM_DYNAMIC_VTI, dynamic, Vti, global);
entry!(pstm_exact_dsr_smem as PSTM_EXACT_DSR_SMEM, exact_smem, Dsr, smem);
entry!(pstm_exact_vti_smem as PSTM_EXACT_VTI_SMEM, exact_smem, Vti, smem);
entry!(pstm_static8_dsr_smem as PSTM_STATIC8_DSR_SMEM, static8_smem, Dsr, smem);
entry!(pstm_static8_vti_smem as PSTM_STATIC8_VTI_SMEM, static8_smem, Vti, smem);
entry!(pstm_dynamic_dsr_smem as PSTM_DYNAMIC_DSR_SMEM, dynamic_smem, Dsr, smem);
entry!(pstm_dynamic_vti_smem as PSTM_DYNAMIC_VTI_SMEM, dynamic_smem, Vti, smem);
entry!(pstm_static8_dsr_smem_lean2 as PSTM_STATIC8_DSR_SMEM_LEAN2, static8_smem_lean, Dsr, smem);
entry!(pstm_static8_vti_smem_lean2 as PSTM_STATIC8_VTI_SMEM_LEAN2, static8_smem_lean, Vti, smem);
