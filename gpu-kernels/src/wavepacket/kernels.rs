//! Wave-packet kernels. Complex data are interleaved (re, im) f32; every kernel gets the frame's
//! [`Geometry`] by value (about 380 bytes of kernel parameters, read from the constant bank: the
//! paper kept its `gridparm` in constant memory for the same reason).
//!
//! - separable USFFT: `wp_prep_lines`, `wp_resample_qN` (1D gather + rotation of the axes),
//!   `wp_adjoint_qN` (its transpose, a gather over lattice points), `wp_crop_lines`;
//! - the paper's 3D USFFT: `wp_prep_grid`, `wp_gather_stencil_qN` (one thread per box point),
//!   `wp_adjoint_stencil` (one thread per global grid point, 3D blocks), `wp_crop_grid`;
//! - exact lattice FFT: `wp_prep_lattice`, `wp_crop_lattice`;
//! - box side: `wp_box_fill` (window x norm x lattice value), `wp_combine` (gather over boxes);
//! - coefficient edits on the device: `wp_threshold` (hard threshold per box, kept count);
//! - the paper's variant 2 on the device: `wp_cut` (a cube from its raw samples, tapered) and
//!   `wp_fold` (a tapered cube into its box's partial sum), `wp_add_face` (the volume's earlier sum
//!   on a box's x0 face into it).

// On the host only the entry points' descriptors are used: the kernels' helpers compile there
// (the device layer has host bodies) but nothing calls them, and clippy sees them only there.
#![cfg_attr(not(target_arch = "nvptx64"), allow(dead_code, unused_imports, unused_variables, unused_assignments,
    clippy::too_many_arguments, clippy::manual_is_multiple_of))]

use super::*;
use crate::device::*;

#[inline(always)]
unsafe fn st2(p: *mut f32, v: (f32, f32)) {
    unsafe {
        *p = v.0;
        *p.add(1) = v.1;
    }
}

#[inline(always)]
fn global_index() -> usize { block_idx_x() as usize * block_dim_x() as usize + thread_idx_x() as usize }

/// (x0, x1, x2) of linear index `i` of an n^3 cube, x2 fastest. `n` >= 1 wherever `i < n^3`;
/// [`nonzero_usize`] says so to the compiler (no division-by-zero panic path in the kernels).
#[inline(always)]
fn cube_coords(i: usize, n: usize) -> (usize, usize, usize) {
    let (nn, n) = (nonzero_usize(n * n), nonzero_usize(n));
    (i / nn, (i / n) % n, i % n)
}

/// Scale index `j` from the host (< nscales <= MAX_SCALES), clamped so that indexing the
/// geometry's per-scale arrays with it has no bounds-check panic path; valid scales are unchanged.
#[inline(always)]
fn scale(j: u32) -> usize { (j as usize).min(MAX_SCALES - 1) }

// ---- separable USFFT -----------------------------------------------------------------------

crate::kernel! {
/// Corrected cube into the (N, N, P) line buffer (x2 centred on the P axis; the buffer is zeroed
/// first), for the `planes` x0 planes from `x0_first` on (a slab: the multi-device pipeline's cubes go up and compute by slabs). All
/// three axes' corrections are applied here: they are separable, so they commute with the per-axis
/// passes.
pub unsafe fn wp_prep_lines(g: Geometry, x0_first: u32, planes: u32, f: *const f32, corr: *const f32,
    out: *mut f32) as WP_PREP_LINES {
    let n = g.n as usize;
    let i = x0_first as usize * n * n + global_index();
    if i < (x0_first + planes) as usize * n * n && i < n * n * n {
        let (x0, x1, x2) = cube_coords(i, n);
        unsafe {
            let v = *f.add(i) * *corr.add(x0) * *corr.add(x1) * *corr.add(x2);
            let pos = fft_pos(x2 as i32 - g.n / 2, g.p) as usize;
            st2(out.add(2 * ((x0 * n + x1) * g.p as usize + pos)), (v, 0.0));
        }
    }
}
}

/// Forward resampling of lines of length P onto the M lattice points, with an axis rotation:
/// input lines (a, b) -> output lines (u, a) of out_last values, at position b (or b centred on
/// out_last when `centre` is set, for a data axis that the next pass pads to P); where the lines
/// lie, and which b run, is `lines` ([`Lines`]: (d0, d1, P) -> (M, d0, out_last) for all b, or a
/// slab of x0 planes as one block of lines). Block (32, 8): x runs over b, so a block reads
/// 32 lines at 8 nearby lattice points (L1 reuse) and writes along b (coalesced). The grid's z
/// runs over a from `a_first` (a slab of the d0 axis, or all of it).
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn resample<const Q: usize>(g: &Geometry, d0: u32, d1: u32, centre: u32, out_last: u32, a_first: u32, lines: Lines,
    inp: *const f32, out: *mut f32) {
    let b = lines.b_first + block_idx_x() * 32 + thread_idx_x();
    let u = block_idx_y() * 8 + thread_idx_y();
    let a = a_first + block_idx_z();
    if b >= lines.b_end.min(d1) || u >= g.m as u32 || a >= d0 {
        return;
    }
    let line = unsafe { inp.add(2 * lines.input(a, b) * g.p as usize) };
    let (re, im) = unsafe { resample_point::<Q>(g, u as i32, line) };
    let pos = if centre != 0 { fft_pos(b as i32 - d1 as i32 / 2, out_last as i32) as usize } else { b as usize };
    unsafe { st2(out.add(2 * (lines.output(u, a) * out_last as usize + pos)), (re, im)) };
}

/// Transpose of [`resample`]: input lines (u, a) of in_last values -> output lines (a, b) of P,
/// every global-grid point p gathering the lattice points whose stencil covers it (`lines`:
/// (M, d0, in_last) -> (d0, d1, P) for all b, or a slab of b). A 32 x 32 tile goes through shared
/// memory so the reads run along b and the writes along p (both coalesced). Block (32, 8); the
/// grid's z runs over a from `a_first`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn adjoint<const Q: usize>(g: &Geometry, d0: u32, d1: u32, centre: u32, in_last: u32, a_first: u32, lines: Lines,
    inp: *const f32, out: *mut f32) {
    let tile = dynamic_shared::<f32>(); // [32 b][33 p] complex, padded against bank conflicts
    let (tx, ty) = (thread_idx_x(), thread_idx_y());
    let b_end = lines.b_end.min(d1);
    let b = lines.b_first + block_idx_x() * 32 + tx;
    let p0 = block_idx_y() * 32;
    let a = a_first + block_idx_z();
    if a >= d0 {
        return;
    }
    let pp = g.p;
    let mut k = 0;
    while k < 4 {
        let p = p0 + ty + 8 * k;
        let (mut re, mut im) = (0.0f32, 0.0f32);
        if b < b_end && p < pp as u32 {
            (re, im) = unsafe { adjoint_point::<Q>(g, &lines, d1, centre, in_last, inp, a, b, p) };
        }
        unsafe { st2(tile.add(2 * (tx as usize * 33 + (ty + 8 * k) as usize)), (re, im)) };
        k += 1;
    }
    sync_threads();
    let p = p0 + tx;
    let mut k = 0;
    while k < 4 {
        let bb = lines.b_first + block_idx_x() * 32 + ty + 8 * k;
        if bb < b_end && p < pp as u32 {
            let v = unsafe { (*tile.add(2 * ((ty + 8 * k) as usize * 33 + tx as usize)), *tile.add(2 * ((ty + 8 * k) as usize * 33 + tx as usize) + 1)) };
            unsafe { st2(out.add(2 * (lines.output(a, bb) * pp as usize + p as usize)), v) };
        }
        k += 1;
    }
}

/// The descriptor type of the separable resamplings and their adjoints (one signature for every q).
pub type SeparableKernel = Kernel<(Geometry, u32, u32, u32, u32, u32, Lines, *const f32, *mut f32)>;

macro_rules! separable_kernels {
    ($($q:literal => $fwd:ident as $fwd_desc:ident, $adj:ident as $adj_desc:ident;)*) => {
    $(
        crate::kernel! {
        pub unsafe fn $fwd(g: Geometry, d0: u32, d1: u32, centre: u32, out_last: u32,
            a_first: u32, lines: Lines, inp: *const f32, out: *mut f32) as $fwd_desc {
            unsafe { resample::<$q>(&g, d0, d1, centre, out_last, a_first, lines, inp, out) }
        }
        }
        crate::kernel! {
        pub unsafe fn $adj(g: Geometry, d0: u32, d1: u32, centre: u32, in_last: u32,
            a_first: u32, lines: Lines, inp: *const f32, out: *mut f32) as $adj_desc {
            unsafe { adjoint::<$q>(&g, d0, d1, centre, in_last, a_first, lines, inp, out) }
        }
        }
    )*
        /// The separable resampling and its adjoint (`wp_resample_q{q}`, `wp_adjoint_q{q}`) for
        /// stencil half-width `q`; `None` for a `q` without kernels.
        pub const fn separable_kernels(q: u32) -> Option<(SeparableKernel, SeparableKernel)> {
            match q {
                $($q => Some(($fwd_desc, $adj_desc)),)*
                _ => None,
            }
        }
    };
}

separable_kernels! {
    2 => wp_resample_q2 as WP_RESAMPLE_Q2, wp_adjoint_q2 as WP_ADJOINT_Q2;
    3 => wp_resample_q3 as WP_RESAMPLE_Q3, wp_adjoint_q3 as WP_ADJOINT_Q3;
    4 => wp_resample_q4 as WP_RESAMPLE_Q4, wp_adjoint_q4 as WP_ADJOINT_Q4;
    5 => wp_resample_q5 as WP_RESAMPLE_Q5, wp_adjoint_q5 as WP_ADJOINT_Q5;
    6 => wp_resample_q6 as WP_RESAMPLE_Q6, wp_adjoint_q6 as WP_ADJOINT_Q6;
    7 => wp_resample_q7 as WP_RESAMPLE_Q7, wp_adjoint_q7 as WP_ADJOINT_Q7;
    8 => wp_resample_q8 as WP_RESAMPLE_Q8, wp_adjoint_q8 as WP_ADJOINT_Q8;
}

crate::kernel! {
/// Real part of the (N, N, P) line buffer, cropped to the data and corrected: the last step of the
/// separable adjoint, for the `planes` x0 planes from `x0_first` on.
pub unsafe fn wp_crop_lines(g: Geometry, x0_first: u32, planes: u32, inp: *const f32, corr: *const f32,
    f: *mut f32) as WP_CROP_LINES {
    let n = g.n as usize;
    let i = x0_first as usize * n * n + global_index();
    if i < (x0_first + planes) as usize * n * n && i < n * n * n {
        let (x0, x1, x2) = cube_coords(i, n);
        let pos = fft_pos(x2 as i32 - g.n / 2, g.p) as usize;
        unsafe {
            let re = *inp.add(2 * ((x0 * n + x1) * g.p as usize + pos));
            *f.add(i) = re * *corr.add(x0) * *corr.add(x1) * *corr.add(x2);
        }
    }
}
}

// ---- the paper's 3D USFFT --------------------------------------------------------------------

crate::kernel! {
/// Corrected cube into the zeroed P^3 grid (centred).
pub unsafe fn wp_prep_grid(g: Geometry, f: *const f32, corr: *const f32, out: *mut f32) as WP_PREP_GRID {
    let i = global_index();
    let n = g.n as usize;
    if i < n * n * n {
        let (x0, x1, x2) = cube_coords(i, n);
        let p = g.p;
        let pos = |x: usize| fft_pos(x as i32 - g.n / 2, p) as usize;
        unsafe {
            let v = *f.add(i) * *corr.add(x0) * *corr.add(x1) * *corr.add(x2);
            st2(out.add(2 * ((pos(x0) * p as usize + pos(x1)) * p as usize + pos(x2))), (v, 0.0));
        }
    }
}
}

crate::kernel! {
/// Real part of the P^3 grid, cropped and corrected.
pub unsafe fn wp_crop_grid(g: Geometry, inp: *const f32, corr: *const f32, f: *mut f32) as WP_CROP_GRID {
    let i = global_index();
    let n = g.n as usize;
    if i < n * n * n {
        let (x0, x1, x2) = cube_coords(i, n);
        let p = g.p;
        let pos = |x: usize| fft_pos(x as i32 - g.n / 2, p) as usize;
        unsafe {
            let re = *inp.add(2 * ((pos(x0) * p as usize + pos(x1)) * p as usize + pos(x2)));
            *f.add(i) = re * *corr.add(x0) * *corr.add(x1) * *corr.add(x2);
        }
    }
}
}

/// The paper's forward gather (formula (1), fig. 6): one thread per box point of scale `j`, the
/// (2Q)^3 Gaussian sum over the global spectrum with the per-axis weights hoisted into registers,
/// fast exp, read-only cached loads, the sum in registers; then the tabulated window x norm.
#[inline(always)]
unsafe fn gather_stencil<const Q: usize>(g: &Geometry, j: u32, table: *const f32, spec: *const f32, out: *mut f32) {
    let j = scale(j);
    let np = g.box_points(j);
    let i = global_index();
    if i >= g.boxes[j] as usize * np {
        return;
    }
    let w = unsafe { *table.add(i) };
    let (re, im) = if w != 0.0 {
        let (xi, _) = box_lattice(g, j, (i / nonzero_usize(np)) as i32, box_local(g, j, i % nonzero_usize(np)));
        let (x, y) = unsafe { stencil_point::<Q>(g, spec, xi) };
        (w * x, w * y)
    } else {
        (0.0, 0.0)
    };
    unsafe { st2(out.add(2 * i), (re, im)) };
}

/// The descriptor type of the stencil gathers (one signature for every q).
pub type StencilKernel = Kernel<(Geometry, u32, *const f32, *const f32, *mut f32)>;

macro_rules! stencil_kernels {
    ($($q:literal => $name:ident as $desc:ident;)*) => {
    $(
        crate::kernel! {
        pub unsafe fn $name(g: Geometry, j: u32, table: *const f32, spec: *const f32, out: *mut f32) as $desc {
            unsafe { gather_stencil::<$q>(&g, j, table, spec, out) }
        }
        }
    )*
        /// The stencil gather `wp_gather_stencil_q{q}` for stencil half-width `q`; `None` for a
        /// `q` without a kernel.
        pub const fn gather_stencil_kernel(q: u32) -> Option<StencilKernel> {
            match q {
                $($q => Some($desc),)*
                _ => None,
            }
        }
    };
}

stencil_kernels! {
    2 => wp_gather_stencil_q2 as WP_GATHER_STENCIL_Q2;
    3 => wp_gather_stencil_q3 as WP_GATHER_STENCIL_Q3;
    4 => wp_gather_stencil_q4 as WP_GATHER_STENCIL_Q4;
    5 => wp_gather_stencil_q5 as WP_GATHER_STENCIL_Q5;
    6 => wp_gather_stencil_q6 as WP_GATHER_STENCIL_Q6;
    7 => wp_gather_stencil_q7 as WP_GATHER_STENCIL_Q7;
    8 => wp_gather_stencil_q8 as WP_GATHER_STENCIL_Q8;
}

crate::kernel! {
/// The paper's inverse gather (fig. 4c, fig. 8b): one thread per global grid point, 3D blocks so a
/// warp's threads have similar work, summing the lattice values within the stencil radius.
/// `list_idx`/`list_w` are the per-axis candidate lists (P rows of `k` entries, weight 0 padding),
/// built on the host: the transpose of the forward stencil.
pub unsafe fn wp_adjoint_stencil(g: Geometry, k: u32, list_idx: *const u32, list_w: *const f32,
    lat: *const f32, out: *mut f32) as WP_ADJOINT_STENCIL {
    let p = g.p as u32;
    let m2 = block_idx_x() * block_dim_x() + thread_idx_x();
    let m1 = block_idx_y() * block_dim_y() + thread_idx_y();
    let m0 = block_idx_z() * block_dim_z() + thread_idx_z();
    if m0 >= p || m1 >= p || m2 >= p {
        return;
    }
    let (re, im) = unsafe { adjoint_stencil_point(g.m as usize, k as usize, list_idx, list_w, lat, [m0, m1, m2]) };
    unsafe { st2(out.add(2 * ((m0 as usize * p as usize + m1 as usize) * p as usize + m2 as usize)), (re, im)) };
}
}

// ---- exact lattice FFT ---------------------------------------------------------------------

crate::kernel! {
/// The cube into the zeroed M^3 lattice array (centred, no correction).
pub unsafe fn wp_prep_lattice(g: Geometry, f: *const f32, out: *mut f32) as WP_PREP_LATTICE {
    let i = global_index();
    let n = g.n as usize;
    if i < n * n * n {
        let (x0, x1, x2) = cube_coords(i, n);
        let m = g.m;
        let pos = |x: usize| fft_pos(x as i32 - g.n / 2, m) as usize;
        unsafe { st2(out.add(2 * ((pos(x0) * m as usize + pos(x1)) * m as usize + pos(x2))), (*f.add(i), 0.0)) };
    }
}
}

crate::kernel! {
/// Real part of the M^3 lattice array, cropped to the cube.
pub unsafe fn wp_crop_lattice(g: Geometry, inp: *const f32, f: *mut f32) as WP_CROP_LATTICE {
    let i = global_index();
    let n = g.n as usize;
    if i < n * n * n {
        let (x0, x1, x2) = cube_coords(i, n);
        let m = g.m;
        let pos = |x: usize| fft_pos(x as i32 - g.n / 2, m) as usize;
        unsafe { *f.add(i) = *inp.add(2 * ((pos(x0) * m as usize + pos(x1)) * m as usize + pos(x2))) };
    }
}
}

// ---- box side ------------------------------------------------------------------------------

crate::kernel! {
/// Window x norm of every box point of scale `j` (computed once per engine: the windows are the
/// costliest arithmetic of the transform and never change).
pub unsafe fn wp_window_table(g: Geometry, j: u32, out: *mut f32) as WP_WINDOW_TABLE {
    let j = scale(j);
    let np = g.box_points(j);
    let i = global_index();
    if i < g.boxes[j] as usize * np {
        let (_, w) = box_point(&g, j, (i / nonzero_usize(np)) as i32, box_local(&g, j, i % nonzero_usize(np)));
        unsafe { *out.add(i) = w };
    }
}
}

crate::kernel! {
/// Box points of scale `j` from the lattice spectrum (FFT order): tabulated window x value.
pub unsafe fn wp_box_fill(g: Geometry, j: u32, table: *const f32, lat: *const f32, out: *mut f32) as WP_BOX_FILL {
    let j = scale(j);
    let np = g.box_points(j);
    let i = global_index();
    if i >= g.boxes[j] as usize * np {
        return;
    }
    let w = unsafe { *table.add(i) };
    let v = if w != 0.0 {
        let (xi, _) = box_lattice(&g, j, (i / nonzero_usize(np)) as i32, box_local(&g, j, i % nonzero_usize(np)));
        let m = g.m;
        let u = (emod(xi[0], m) as usize * m as usize + emod(xi[1], m) as usize) * m as usize + emod(xi[2], m) as usize;
        let (x, y) = unsafe { load2(lat.add(2 * u)) };
        (w * x, w * y)
    } else {
        (0.0, 0.0)
    };
    unsafe { st2(out.add(2 * i), v) };
}
}

crate::kernel! {
/// Inverse's box side: every lattice point (FFT order) sums window x value over the boxes covering
/// it (the paper's gather instead of atomics; the covering boxes come from the geometry, the
/// windows from the tables).
pub unsafe fn wp_combine(g: Geometry, boxes: ScalePtrs, tables: ScalePtrs, lat: *mut f32) as WP_COMBINE {
    let m = g.m as usize;
    let i = global_index();
    if i >= m * m * m {
        return;
    }
    let (u0, u1, u2) = cube_coords(i, m);
    let xi = [lattice_index(u0 as i32, g.m), lattice_index(u1 as i32, g.m), lattice_index(u2 as i32, g.m)];
    let (mut re, mut im) = (0.0f32, 0.0f32);
    for_each_box_index_at(&g, xi, |s, b, idx| {
        let k = b as usize * g.box_points(s) + idx;
        let w = unsafe { *(tables.p[s] as *const f32).add(k) };
        if w != 0.0 {
            let (x, y) = unsafe { load2((boxes.p[s] as *const f32).add(2 * k)) };
            re += w * x;
            im += w * y;
        }
    });
    unsafe { st2(lat.add(2 * i), (re, im)) };
}
}

// ---- coefficient edits on the device --------------------------------------------------

crate::kernel! {
/// Hard threshold of one scale's `count` coefficients in place (boxes of `points` coefficients):
/// coefficient i of box b = i / points becomes 0 when [`below_threshold`]`(c, thr[b])` (the CPU's
/// test, the same decisions); `kept[0]` counts the others, one atomic per warp (ballot + popc).
/// Sizes as arguments, not the [`Geometry`] (whose per-scale arrays, indexed at run time, would
/// put it in local memory). Plain loads, not `ld.global.nc`: the kernel writes the array it reads.
/// Every lane reaches the ballot (no early return). The host keeps `count` under 2^32.
pub unsafe fn wp_threshold(count: u32, points: u32, thr: *const f32, c: *mut f32, kept: *mut u32) as WP_THRESHOLD {
    let i = global_index();
    let keep = if i < count as usize && points > 0 {
        let (re, im) = unsafe { (*c.add(2 * i), *c.add(2 * i + 1)) };
        if below_threshold(re, im, unsafe { *thr.add((i as u32 / points) as usize) }) {
            unsafe { st2(c.add(2 * i), (0.0, 0.0)) };
            false
        } else {
            true
        }
    } else {
        false
    };
    let votes = vote_ballot(keep);
    if lane_id() == 0 && votes != 0 {
        unsafe { atomic_add_u32(kept, votes.count_ones()) };
    }
}
}

// ---- variant 2: overlapping cubes, cut and folded on the device ----------------------------

crate::kernel! {
/// Cube t of a tiling from its raw samples: `raw` holds the part of the cube inside the volume,
/// (n0, n1, n2) with x2 fastest, as the host copied it; `w0`, `w1`, `w2` are the cube's tapers
/// (c each). Writes all c^3 samples of `cube`: tapered samples, zeros in the padding past the
/// volume. One thread per cube sample, x2 fastest (coalesced both ways). A raw sample that is not
/// finite sets `*bad` to 1: where the samples come straight from a page-locked volume (no host
/// pass over them), this is the input check. Only the `planes` x0 planes from `x0_first` on (a
/// slab: the cube's first slab is cut while the next ones are still going up).
pub unsafe fn wp_cut(c: u32, x0_first: u32, planes: u32, n0: u32, n1: u32, n2: u32, raw: *const f32,
    w0: *const f32, w1: *const f32, w2: *const f32, cube: *mut f32, bad: *mut u32) as WP_CUT {
    let c = c as usize;
    let i = x0_first as usize * c * c + global_index();
    if i < (x0_first + planes) as usize * c * c && i < c * c * c {
        let (x0, x1, x2) = cube_coords(i, c);
        let (x0, x1, x2) = (x0 as u32, x1 as u32, x2 as u32);
        let v = if x0 < n0 && x1 < n1 && x2 < n2 {
            unsafe {
                let r = *raw.add(((x0 * n1 + x1) * n2 + x2) as usize);
                if !r.is_finite() {
                    *bad = 1;
                }
                let w01 = *w0.add(x0 as usize) * *w1.add(x1 as usize);
                tapered(r, w01, *w2.add(x2 as usize))
            }
        } else {
            0.0
        };
        unsafe { *cube.add(i) = v };
    }
}
}

crate::kernel! {
/// The face pre-add: a box's partial sum `acc` ((n0, n1, len), x2 fastest) gets the volume's
/// earlier sum on its x0 face added, the block of m1 x m2 samples per plane at (x0, c1, c2) that
/// only boxes of earlier x0 rows cover; `pre` holds that block's planes from plane 0 (m1 x m2
/// each). A plain add, the one the host's fold would do, so the same bits. One thread per sample
/// of the face planes `x0_first..x0_end`.
pub unsafe fn wp_add_face(x0_first: u32, x0_end: u32, n1: u32, len: u32, c1: u32, c2: u32, m1: u32, m2: u32,
    pre: *const f32, acc: *mut f32) as WP_ADD_FACE {
    let plane = m1 as usize * m2 as usize;
    let i = x0_first as usize * plane + global_index();
    if i < x0_end as usize * plane {
        let (m1, m2) = (nonzero_usize(m1 as usize), nonzero_usize(m2 as usize));
        let (x2, r) = (i % m2, i / m2);
        let (x0, x1) = (r / m1, r % m1);
        unsafe {
            let a = acc.add((x0 * n1 as usize + c1 as usize + x1) * len as usize + c2 as usize + x2);
            *a += *pre.add(i);
        }
    }
}
}

crate::kernel! {
/// Adds the tapered cube (c^3, the inverse's output) into its box's partial sum: `acc` is
/// (n0, n1, len) with x2 fastest, the cube's first sample at x2 = `off`; only the cube's part
/// inside the volume, (n0, n1, n2), is added. The cubes of a box go in order on one stream, so
/// every sample's sum has a fixed order. One thread per added sample of the x0 planes
/// `x0_first..x0_end` (a slab, each handed to the download as soon as it is in).
pub unsafe fn wp_fold(c: u32, x0_first: u32, x0_end: u32, n0: u32, n1: u32, n2: u32, len: u32, off: u32,
    cube: *const f32, w0: *const f32, w1: *const f32, w2: *const f32, acc: *mut f32) as WP_FOLD {
    let plane = n1 as usize * n2 as usize;
    let i = x0_first as usize * plane + global_index();
    if i < x0_end.min(n0) as usize * plane {
        let i = i as u32;
        let (n1, n2) = (nonzero(n1), nonzero(n2));
        let (x2, r) = (i % n2, i / n2);
        let (x0, x1) = (r / n1, r % n1);
        let c = c as usize;
        unsafe {
            let w01 = *w0.add(x0 as usize) * *w1.add(x1 as usize);
            let v = tapered(*cube.add((x0 as usize * c + x1 as usize) * c + x2 as usize), w01, *w2.add(x2 as usize));
            let a = acc.add(r as usize * len as usize + off as usize + x2 as usize);
            *a += v;
        }
    }
}
}
