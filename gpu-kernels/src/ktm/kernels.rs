//! Kirchhoff time migration kernels: the paper's data-domain kernel, the columns kernels and the
//! modelling (adjoint) kernel.
//! Each comes in up to three flavours: `_bare` (the paper's: traveltime and read only), `_corr`
//! (weights, aperture, mute as `KtmConsts::flags` asks) and `_aa` (corrections plus the
//! anti-aliasing triangle filter). All call the shared math in `super`, so the positions they
//! read agree with the CPU reference bit for bit.
//!
//! Launch contract (checked by the host): `image` and `vel` point at the launch's first column
//! (image tiles are whole inline rows, so `col0` is a multiple of `ny`); `geom` and `data` at the
//! launch's first trace; `ncols`, `ntraces >= 1`.

// On the host only the entry points' descriptors are used: the kernels' helpers compile there
// (the device layer has host bodies) but nothing calls them.
#![cfg_attr(not(target_arch = "nvptx64"), allow(dead_code, unused_imports, unused_variables, unused_assignments))]

use super::*;
use crate::device::*;
use crate::unroll;

#[inline(always)]
pub(super) fn min_u32(a: u32, b: u32) -> u32 { if a < b { a } else { b } }

/// Read-only 8-byte load (`device::ldg_f32x2`).
#[inline(always)]
pub(super) unsafe fn ldg_pair(p: *const [f32; 2]) -> [f32; 2] { unsafe { crate::device::ldg_f32x2(p as *const f32) } }

/// Read-only 16-byte load (`device::ldg_f32x4`).
#[inline(always)]
pub(super) unsafe fn ldg_quad(p: *const [f32; 4]) -> [f32; 4] { unsafe { crate::device::ldg_f32x4(p as *const f32) } }

/// [`lerp_pair`] through `ld.global.nc` (same arithmetic).
#[inline(always)]
unsafe fn lerp_nc(p: *const [f32; 2], len: u32, s: f32) -> f32 {
    let (i, f) = split_index(s, len);
    let [a, d] = unsafe { ldg_pair(p.add(i as usize)) };
    a + f * d
}

/// [`antialias_read`] through `ld.global.nc` (same arithmetic).
#[inline(always)]
unsafe fn aa_nc(p: *const [f32; 2], len: u32, s: f32, m: f32) -> f32 {
    unsafe {
        let c0 = lerp_nc(p, len, s);
        let cm = lerp_nc(p, len, s - m);
        let cp = lerp_nc(p, len, s + m);
        (c0 + c0 - cm - cp) * rcp_amp(m * m)
    }
}

/// Image x, y (relative to the origin) of launch column `col_l`.
#[inline(always)]
pub(super) fn column_xy(c: &KtmConsts, col_l: u32) -> (f32, f32) {
    let col = c.col0 + col_l;
    let ny = nonzero(c.ny);
    ((col / ny) as f32 * c.dx, (col % ny) as f32 * c.dy)
}

/// Sample geometry of launch column `col_l`, image time `it` (clamped into the column).
#[inline(always)]
pub(super) unsafe fn sample_at(c: &KtmConsts, vel: *const f32, col_l: u32, it: u32) -> SampleGeom {
    let it = min_u32(it, c.ntau - 1);
    let v = unsafe { *vel.add(col_l as usize * c.vel_stride as usize + it as usize) };
    sample_geom(c, c.tau0 + it as f32 * c.dtau, v)
}

/// One contribution read from global memory, weighted, 0 when it does not count.
#[inline(always)]
pub(super) unsafe fn read_global<const AA: bool, const CORR: bool>(c: &KtmConsts, pairs: *const [f32; 2], k: &Contribution) -> f32 {
    unsafe {
        if AA {
            if k.w != 0.0 && antialias_valid(c, k.s) { k.w * aa_nc(pairs, c.stride, k.s, k.m) } else { 0.0 }
        } else if CORR {
            if k.w != 0.0 { k.w * lerp_nc(pairs, c.stride, k.s) } else { 0.0 }
        } else {
            lerp_nc(pairs, c.stride, k.s)
        }
    }
}

// ---- (a) the paper's data-domain kernel ----------------------------------------------------------

/// One block per image column; thread x = input trace (looping over trace records with stride
/// blockDim.x), thread y = image time (looping with stride blockDim.y). Per image time, the
/// partial sums go through a shared-memory tree reduction down to 32 and warp shuffles for the
/// last 32, and one thread adds the sample to the image (paper 2, Algorithm 1). blockDim.x is a
/// power of two >= 32; shared memory: blockDim.x * blockDim.y floats.
#[inline(always)]
unsafe fn mig_paper<const AA: bool, const CORR: bool>(c: &KtmConsts, geom: *const [f32; 4], data: *const [f32; 2],
    vel: *const f32, image: *mut f32) {
    let (tx, ty, bx, by) = (thread_idx_x(), thread_idx_y(), block_dim_x(), block_dim_y());
    let col_l = block_idx_x();
    let (x, y) = column_xy(c, col_l);
    let row = unsafe { dynamic_shared::<f32>().add((ty * bx) as usize) };
    let mut it0 = 0;
    while it0 < c.ntau {
        let it = it0 + ty;
        let q = unsafe { sample_at(c, vel, col_l, it) };
        let mut sum = 0.0f32;
        let mut j = tx;
        while j < c.ntraces {
            let g = unsafe { ldg_quad(geom.add(j as usize)) };
            let pg = pair_geom(x, y, g);
            let k = contribution::<AA, CORR>(c, &pg, &q);
            sum += unsafe { read_global::<AA, CORR>(c, data.add(j as usize * c.stride as usize), &k) };
            j += bx;
        }
        unsafe { *row.add(tx as usize) = sum };
        sync_threads();
        let mut s = bx / 2;
        while s >= 32 {
            if tx < s {
                unsafe { *row.add(tx as usize) += *row.add((tx + s) as usize) };
            }
            sync_threads();
            s /= 2;
        }
        if tx < 32 {
            let v = warp_sum_f32(unsafe { *row.add(tx as usize) });
            if tx == 0 && it < c.ntau {
                unsafe { *image.add(col_l as usize * c.ntau as usize + it as usize) += v };
            }
        }
        sync_threads();
        it0 += by;
    }
}

// ---- (b) columns: one warp per column, K image times per lane (register tiling) -----------------

/// Adds a lane's K image times (`acc + acc_b`, times `it0 + 32 k` of column `col_l`) into the image:
/// a plain add when the launch has one trace segment (z = 1), else an atomic add. Shared by the
/// exact and the interpolated columns kernels.
#[inline(always)]
pub(super) unsafe fn store_column<const K: usize>(c: &KtmConsts, image: *mut f32, col_l: u32, it0: u32, acc: &[f32; K],
    acc_b: &[f32; K]) {
    unroll!(K, |k| {
        let it = it0 + 32 * k as u32;
        if it < c.ntau {
            let dst = unsafe { image.add(col_l as usize * c.ntau as usize + it as usize) };
            if grid_dim_z() == 1 {
                unsafe { *dst += acc[k] + acc_b[k] };
            } else {
                unsafe { atomic_add_f32(dst, acc[k] + acc_b[k]) };
            }
        }
    });
}

/// blockIdx.x = group of COL_WARPS columns (one per warp), blockIdx.y = 32 K image times,
/// blockIdx.z = segment of the traces (more than one only for small images, which would not fill
/// the GPU otherwise; the segments then add into the image atomically); lane l
/// owns times l, l + 32, ..., l + 32 (K - 1) of the segment, so the 32 lanes of a warp read 32
/// neighbouring times of the same trace: one or two cache lines per load. The block's warps are
/// neighbouring columns and walk the traces in step (coordinates staged in shared memory, one
/// barrier per 256 traces), so a trace's samples are fetched into L1 once for all of them.
#[inline(always)]
unsafe fn mig_columns<const K: usize, const AA: bool, const CORR: bool>(c: &KtmConsts, geom: *const [f32; 4],
    data: *const [f32; 2], vel: *const f32, image: *mut f32) {
    let lane = thread_idx_x();
    let warp = thread_idx_y();
    let tid = warp * 32 + lane;
    let nthreads = 32 * COL_WARPS;
    let col_req = block_idx_x() * COL_WARPS + warp;
    let active = col_req < c.ncols;
    let col_l = if active { col_req } else { c.ncols - 1 };
    let (x, y) = column_xy(c, col_l);
    let it0 = block_idx_y() * 32 * K as u32 + lane;
    let mut q = [SampleGeom::default(); K];
    let mut acc = [0.0f32; K];
    // The bare kernel sums the two halves of the interpolation a + f d separately (an add and an
    // FMA instead of a multiply and two adds).
    let mut acc_b = [0.0f32; K];
    unroll!(K, |k| {
        q[k] = unsafe { sample_at(c, vel, col_l, it0 + 32 * k as u32) };
    });
    let coords = dynamic_shared::<[f32; 4]>();
    let seg = div_ceil_nz(c.ntraces, nonzero(grid_dim_z()));
    let mut base = block_idx_z() * seg;
    let end = min_u32(base + seg, c.ntraces);
    while base < end {
        let n = min_u32(nthreads, end - base);
        if tid < n {
            unsafe { *coords.add(tid as usize) = ldg_quad(geom.add((base + tid) as usize)) };
        }
        sync_threads();
        for j in 0..n {
            let pg = pair_geom(x, y, unsafe { *coords.add(j as usize) });
            if CORR && c.flags & APERTURE != 0 && pg.dm >= c.ap_dist {
                continue; // outside the distance aperture at every time (uniform in the warp)
            }
            let pairs = unsafe { data.add((base + j) as usize * c.stride as usize) };
            unroll!(K, |k| {
                let kk = contribution::<AA, CORR>(c, &pg, &q[k]);
                if !CORR {
                    let (i, f) = split_index(kk.s, c.stride);
                    let [a, d] = unsafe { ldg_pair(pairs.add(i as usize)) };
                    acc[k] += a;
                    acc_b[k] = crate::math::mul_add(f, d, acc_b[k]);
                } else {
                    acc[k] += unsafe { read_global::<AA, CORR>(c, pairs, &kk) };
                }
            });
        }
        sync_threads();
        base += nthreads;
    }
    if active {
        unsafe { store_column::<K>(c, image, col_l, it0, &acc, &acc_b) };
    }
}


/// Columns kernel v2, bare: the v1 layout (one warp per column, K image times per lane, the
/// block's warps walking the traces in step), with an inner loop cut for instruction issue (the v1
/// kernel is issue-bound, ~74 % of issue slots busy, and its F2I shares the quarter-rate pipe with
/// the two MUFU.RSQ):
/// - integer and fractional parts of the read position by [`split_index_magic`] (FADD.RM, IMNMX,
///   two FADD; the index lands in the address through a trace pointer pre-offset by
///   `-FLOOR_MAGIC_BITS` pairs): no F2I/I2F, bit-identical to [`split_index`];
/// - the trace pointer advances by `stride` per trace, the chunk's trace count is computed once;
/// - two traces per iteration of the trace loop (half the loop control).
///
/// `FAST`: the square roots are `sqrt.approx` (MUFU.SQRT, 1 instruction instead of 6; relative
/// error ~2^-22, i.e. about 1e-5 samples on a 1000-sample traveltime) and the position offset
/// `s_off` (an integer, checked by the host) is folded into the magic constant. Positions then
/// differ from the CPU's by an ulp or two: rel L2 ~1e-5 on white-noise traces, far below a sample.
/// Without `FAST` the positions are the CPU's bit for bit (`s_off >= 0` checked by the host).
#[inline(always)]
unsafe fn mig_columns2<const K: usize, const FAST: bool>(c: &KtmConsts, geom: *const [f32; 4], data: *const [f32; 2],
    vel: *const f32, image: *mut f32) {
    let lane = thread_idx_x();
    let warp = thread_idx_y();
    let tid = warp * 32 + lane;
    let nthreads = 32 * COL_WARPS;
    let col_req = block_idx_x() * COL_WARPS + warp;
    let active = col_req < c.ncols;
    let col_l = if active { col_req } else { c.ncols - 1 };
    let (x, y) = column_xy(c, col_l);
    let it0 = block_idx_y() * 32 * K as u32 + lane;
    let mut h2 = [0.0f32; K];
    let mut iv = [0.0f32; K];
    let mut acc = [0.0f32; K];
    let mut acc_b = [0.0f32; K];
    unroll!(K, |k| {
        let q = unsafe { sample_at(c, vel, col_l, it0 + 32 * k as u32) };
        h2[k] = q.h2s;
        iv[k] = q.ivs;
    });
    // FAST reads at t + s_off with s_off in the magic; otherwise at s = t + s_off as the CPU rounds it.
    let magic_off = if FAST { FLOOR_MAGIC + c.s_off } else { FLOOR_MAGIC };
    let coords = dynamic_shared::<[f32; 4]>();
    let seg = div_ceil_nz(c.ntraces, nonzero(grid_dim_z()));
    let mut base = block_idx_z() * seg;
    let end = min_u32(base + seg, c.ntraces);
    let stride = c.stride as usize;
    // One trace's contributions to this lane's K samples.
    let trace = |g: [f32; 4], pairs: *const [f32; 2], acc: &mut [f32; K], acc_b: &mut [f32; K]| {
        let (exs, eys, exr, eyr) = (x - g[0], y - g[1], x - g[2], y - g[3]);
        let ds2 = exs * exs + eys * eys;
        let dr2 = exr * exr + eyr * eyr;
        unroll!(K, |k| {
            let t = if FAST {
                sqrt_amp(crate::math::mul_add(ds2, iv[k], h2[k])) + sqrt_amp(crate::math::mul_add(dr2, iv[k], h2[k]))
            } else {
                let (ts, tr) = (sqrt_tt(fma_tt(ds2, iv[k], h2[k])), sqrt_tt(fma_tt(dr2, iv[k], h2[k])));
                c.sample_index(ts + tr)
            };
            let (b, f) = split_index_magic(t, c.stride, magic_off);
            let [a, d] = unsafe { ldg_pair(pairs.wrapping_add(b as usize)) };
            acc[k] += a;
            acc_b[k] = crate::math::mul_add(f, d, acc_b[k]);
        });
    };
    while base < end {
        let n = min_u32(nthreads, end - base);
        if tid < n {
            unsafe { *coords.add(tid as usize) = ldg_quad(geom.add((base + tid) as usize)) };
        }
        sync_threads();
        // Pre-offset so that the magic-number bits index it directly (wrapping: only the sum is used).
        let mut pairs = data.wrapping_add(base as usize * stride).wrapping_sub(FLOOR_MAGIC_BITS as usize);
        let mut j = 0;
        while j + 2 <= n {
            let (g0, g1) = unsafe { (*coords.add(j as usize), *coords.add(j as usize + 1)) };
            trace(g0, pairs, &mut acc, &mut acc_b);
            trace(g1, pairs.wrapping_add(stride), &mut acc, &mut acc_b);
            pairs = pairs.wrapping_add(2 * stride);
            j += 2;
        }
        if j < n {
            trace(unsafe { *coords.add(j as usize) }, pairs, &mut acc, &mut acc_b);
        }
        sync_threads();
        base += nthreads;
    }
    if active {
        unsafe { store_column::<K>(c, image, col_l, it0, &acc, &acc_b) };
    }
}

// ---- modelling (the adjoint) ---------------------------------------------------------------------

/// blockIdx.x = group of `tb` traces, blockIdx.y = tile of `cols_per_block` columns. Warps take
/// columns, lanes image times; every contribution is scattered (the adjoint of the interpolated
/// read) into the group's traces held in shared memory (`tb * (stride + 1)` floats, shared-memory
/// atomics), which are then added to `out` with one global atomic per nonzero sample.
#[inline(always)]
unsafe fn model<const AA: bool, const CORR: bool>(c: &KtmConsts, geom: *const [f32; 4], image: *const f32, vel: *const f32,
    out: *mut f32, tb: u32, cols_per_block: u32) {
    let lane = thread_idx_x();
    let warp = thread_idx_y();
    let tid = warp * 32 + lane;
    let acc_len = c.stride + 1;
    let tr0 = block_idx_x() * tb;
    let nb = min_u32(tb, c.ntraces - tr0);
    let mut sm = SharedCarver::new();
    let coords = sm.take::<[f32; 4]>(tb as usize);
    let acc = sm.take::<f32>((tb * acc_len) as usize);
    let mut i = tid;
    while i < tb * acc_len {
        unsafe { *acc.add(i as usize) = 0.0 };
        i += 256;
    }
    if tid < nb {
        unsafe { *coords.add(tid as usize) = ldg_quad(geom.add((tr0 + tid) as usize)) };
    }
    sync_threads();
    let col_start = block_idx_y() * cols_per_block;
    let col_end = min_u32(col_start + cols_per_block, c.ncols);
    let mut col_l = col_start + warp;
    while col_l < col_end {
        let (x, y) = column_xy(c, col_l);
        let mut itb = 0;
        while itb < c.ntau {
            let it = itb + lane;
            let q = unsafe { sample_at(c, vel, col_l, it) };
            let v_img = if it < c.ntau { unsafe { *image.add(col_l as usize * c.ntau as usize + it as usize) } } else { 0.0 };
            if v_img != 0.0 {
                for b in 0..nb {
                    let pg = pair_geom(x, y, unsafe { *coords.add(b as usize) });
                    let k = contribution::<AA, CORR>(c, &pg, &q);
                    if k.w == 0.0 {
                        continue;
                    }
                    let v = k.w * v_img;
                    let trace = unsafe { acc.add((b * acc_len) as usize) };
                    let scatter = |s: f32, v: f32| {
                        let (i, a, bb) = scatter_weights(s, c.stride, v);
                        unsafe {
                            atomic_add_f32(trace.add(i as usize), a);
                            atomic_add_f32(trace.add(i as usize + 1), bb);
                        }
                    };
                    if AA {
                        if antialias_valid(c, k.s) {
                            let v = v * rcp_amp(k.m * k.m);
                            scatter(k.s, v + v);
                            scatter(k.s - k.m, -v);
                            scatter(k.s + k.m, -v);
                        }
                    } else {
                        scatter(k.s, v);
                    }
                }
            }
            itb += 32;
        }
        col_l += 8;
    }
    sync_threads();
    let mut i = tid;
    while i < nb * acc_len {
        let v = unsafe { *acc.add(i as usize) };
        if v != 0.0 {
            unsafe { atomic_add_f32(out.add((tr0 * acc_len + i) as usize), v) };
        }
        i += 256;
    }
}

// ---- entry points --------------------------------------------------------------------------------

/// The descriptor type of the migration kernels (exact and interpolated traveltimes): constants,
/// geometry quads, sample pairs, velocities, image.
pub type MigrationKernel = Kernel<(KtmConsts, *const [f32; 4], *const [f32; 2], *const f32, *mut f32)>;
/// The descriptor type of the modelling kernels: constants, geometry quads, image, velocities,
/// accumulators, traces per block, columns per block.
pub type ModelKernel = Kernel<(KtmConsts, *const [f32; 4], *const f32, *const f32, *mut f32, u32, u32)>;

macro_rules! migration_entry {
    ($name:ident as $desc:ident, $body:ident :: < $($g:tt),* >) => { crate::kernel! {
        pub unsafe fn $name(c: KtmConsts, geom: *const [f32; 4], data: *const [f32; 2], vel: *const f32,
            image: *mut f32) as $desc {
            unsafe { $body::<$($g),*>(&c, geom, data, vel, image) }
        }
    } };
}

migration_entry!(ktm_mig_paper_bare as KTM_MIG_PAPER_BARE, mig_paper::<false, false>);
migration_entry!(ktm_mig_paper_corr as KTM_MIG_PAPER_CORR, mig_paper::<false, true>);
migration_entry!(ktm_mig_paper_aa as KTM_MIG_PAPER_AA, mig_paper::<true, true>);
migration_entry!(ktm_mig_columns_bare as KTM_MIG_COLUMNS_BARE, mig_columns::<COL_K_BARE, false, false>);
migration_entry!(ktm_mig_columns_corr as KTM_MIG_COLUMNS_CORR, mig_columns::<COL_K_CORR, false, true>);
migration_entry!(ktm_mig_columns_aa as KTM_MIG_COLUMNS_AA, mig_columns::<COL_K_CORR, true, true>);
migration_entry!(ktm_mig_columns2_bare as KTM_MIG_COLUMNS2_BARE, mig_columns2::<COL_K_BARE, false>);
migration_entry!(ktm_mig_columns_fast_bare as KTM_MIG_COLUMNS_FAST_BARE, mig_columns2::<COL_K_BARE, true>);

macro_rules! model_entry {
    ($name:ident as $desc:ident, $aa:expr, $corr:expr) => { crate::kernel! {
        pub unsafe fn $name(c: KtmConsts, geom: *const [f32; 4], image: *const f32, vel: *const f32,
            out: *mut f32, tb: u32, cols_per_block: u32) as $desc {
            unsafe { model::<$aa, $corr>(&c, geom, image, vel, out, tb, cols_per_block) }
        }
    } };
}

model_entry!(ktm_model_bare as KTM_MODEL_BARE, false, false);
model_entry!(ktm_model_corr as KTM_MODEL_CORR, false, true);
model_entry!(ktm_model_aa as KTM_MODEL_AA, true, true);
