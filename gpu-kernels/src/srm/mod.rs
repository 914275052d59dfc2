//! Chebyshev-polynomial wavefield extrapolation (paper 4, SRMIP; Soubaras 1996): the math shared by
//! the CPU reference (host/src/srm/cpu.rs) and the kernels (`kernels.rs`).
//!
//! One depth step of a frequency plane W (complex, nx x ny) is
//!   W(z + dz) = taper * sum_{n=0..N} a_n(p) T_n(L) W(z),   T_n = 2 L T_{n-1} - T_{n-2},
//! with L = I + (2 / Lambda) (D2x / dx^2 + D2y / dy^2) the cross-shaped Laplacian (two 1D radius-4
//! second-derivative filters) mapped so that its spectrum is [-1, 1], and a_n(p) the Chebyshev
//! coefficients of exp(i kz dz) for p = w dz / v, looked up per grid point by linear interpolation
//! between the rows of a table (lateral velocity variation; paper section 38.3.2 and Listing 38-4).
//!
//! Arithmetic order is fixed here once, so the CPU reference and every kernel variant round alike
//! (up to FMA contraction on the GPU, a few 1e-8 relative).

pub mod kernels;
pub mod cluster;

/// Radius of each 1D second-derivative filter (the paper's cross-shaped filter, radius 4).
pub const RADIUS: usize = 4;
/// Largest polynomial degree the table and the kernels accept.
pub const MAX_DEGREE: usize = 40;

// ---- launch geometry, shared by the kernels and the host driver ----

/// Paper tile: 48 x 32 nodes loaded (radius-4 halo), 40 x 24 computed; 48 x 8 threads, each loading
/// a column of 4 nodes and computing a column of 3.
pub const PAPER_TW: u32 = 40;
pub const PAPER_TH: u32 = 24;
pub const PAPER_RW: usize = 48;
pub const PAPER_RH: usize = 32;
/// Shared bytes: 2 waves x (re, im) x 48 x 32 floats.
pub const PAPER_SHARED_BYTES: u32 = (2 * 2 * PAPER_RW * PAPER_RH * 4) as u32;

/// Cluster kernel (`sm90_srm_step_cluster`): rows per thread segment. A thread owns one column pair
/// (two complex nodes, one 16-byte shared access) and up to this many consecutive rows of its CTA's
/// strip; its accumulators (4 floats per row) stay in registers for the whole depth step.
pub const CLUSTER_SEG_ROWS: u32 = 13;
/// Register cap of `sm90_srm_step_cluster` (in `registers::CAPS`, added as `.maxnreg` by build.rs): 448
/// threads = 14 warps, and an SM's 64K registers are four 16K files, one per scheduler, so a
/// quarter holding 4 of the warps allows 128 registers per thread. Measured on the H100: at 144 the
/// driver allowed 384 threads per block (3 warps per quarter). ptxas sm_90 at 128: 192 bytes of
/// spill stores at set-up, 16 spill loads per step (181 unconstrained, none at 144).
pub const CLUSTER_MAX_REGS: u32 = 128;
/// Largest cluster the host tries (16 is non-portable: needs the function attribute).
pub const CLUSTER_MAX: u32 = 16;
/// Column pairs of a strip row (the last one half outside the grid when nx is odd).
pub const fn cluster_pairs(nx: u32) -> u32 { nx.div_ceil(2) }
/// Shared-memory row pitch of a strip in 16-byte pairs: the pairs plus two zero pairs each side
/// (the x arm's radius 4 reaches them; they are never written, so no bounds test in the stencil).
pub const fn cluster_pitch(nx: u32) -> u32 { cluster_pairs(nx) + 4 }
/// Pair columns per thread segment, padded to whole warps (segments are warp-uniform).
pub const fn cluster_warp_pairs(nx: u32) -> u32 { cluster_pairs(nx).div_ceil(32) * 32 }
/// Threads of one CTA for strips of `r` rows.
pub const fn cluster_threads(nx: u32, r: u32) -> u32 { r.div_ceil(CLUSTER_SEG_ROWS) * cluster_warp_pairs(nx) }
/// Shared bytes of one CTA: T_{n-1} and T_{n-2} of the strip (r x pitch x 16 B each) and its
/// slowness (r x pairs x 8 B).
pub const fn cluster_shared_bytes(nx: u32, r: u32) -> u32 { 2 * r * cluster_pitch(nx) * 16 + r * cluster_pairs(nx) * 8 }
/// Accumulator rows per thread that `clusterd` keeps in shared memory (the rest in registers).
pub const CLUSTERD_SHARED_ACC: u32 = 4;
/// Shared bytes of one `clusterd` CTA for strips of `r` rows: four mbarriers (32 B), T_{n-1} and
/// T_{n-2}, each node's packed table position (4 B) and `CLUSTERD_SHARED_ACC` accumulators per
/// thread (`cluster_threads`).
pub const fn clusterd_shared_bytes(nx: u32, r: u32) -> u32 {
    32 + 2 * r * cluster_pitch(nx) * 16 + r * cluster_pairs(nx) * 8 + CLUSTERD_SHARED_ACC * cluster_threads(nx, r) * 16
}
/// Most coefficient-table rows `clusterd` can index (12 bits of a packed position).
pub const CLUSTERD_MAX_ROWS: u32 = 4096;
/// The table position (row i0, fraction f) of a node packed in 32 bits (`clusterd`): the row in the
/// top 12 bits, f in the low 20 as round(f 2^20) (|error| <= 2^-21, far below the 1e-5 the GPU must
/// match the CPU to); f = 1 after rounding becomes (i0 + 1, 0), which the offset table holds
/// ([`offset_entry`] has `rows` entries per coefficient). rows <= `CLUSTERD_MAX_ROWS`.
#[inline(always)]
pub fn pack_pos(i0: u32, f: f32) -> u32 {
    let q = (f * 1048576.0 + 0.5) as u32; // f in [0, 1]: q in [0, 2^20]
    if q >= 1 << 20 { (i0 + 1) << 20 } else { (i0 << 20) | q }
}
/// The row and g = 1 + f of a packed position: g's bits are the 20-bit fraction as the top of a
/// mantissa under the exponent of 1.0, so no conversion instruction is needed.
#[inline(always)]
pub fn unpack_pos(p: u32) -> (u32, f32) { (p >> 20, f32::from_bits(0x3F80_0000 | ((p & 0xFFFFF) << 3))) }
/// Entries per coefficient in the offset table: one per row.
#[inline(always)]
pub const fn offset_rows(rows: u32) -> u32 { rows }
/// Offset-table entry (n, i0), i0 = 0..rows - 1, at float 4 (n rows + i0): (a - d, d) as (re, im,
/// re, im), a = a_n[i0], d = a_n[i0 + 1] - a_n[i0] (0 in the last row), so that the coefficient at
/// fraction f is (a - d) + g d with g = 1 + f: one fused multiply-add per component
/// ([`coef_from_offset`]; within a few 1e-8 of [`coef_at`]).
pub fn offset_entry(table: &[f32], ncoef: usize, rows: usize, i0: usize, n: usize) -> [f32; 4] {
    let k0 = 2 * (i0 * ncoef + n);
    let k1 = if i0 + 1 < rows { 2 * ((i0 + 1) * ncoef + n) } else { k0 };
    let d = [table[k1] - table[k0], table[k1 + 1] - table[k0 + 1]];
    [table[k0] - d[0], table[k0 + 1] - d[1], d[0], d[1]]
}
/// The coefficient from an offset-table entry and g = 1 + f (see [`offset_entry`]).
#[inline(always)]
pub fn coef_from_offset(e: [f32; 4], g: f32) -> (f32, f32) { (crate::math::mul_add(g, e[2], e[0]), crate::math::mul_add(g, e[3], e[1])) }

/// The cross-shaped operator L = I + (2 / Lambda) (D2x/dx^2 + D2y/dy^2) as stencil weights:
/// centre `c`, x arm `ax[j-1]` at +-j, y arm `ay[j-1]` at +-j rows. Passed to kernels by value
/// (it lands in the kernel-parameter constant bank, the paper's `coeff_X`/`coeff_Y`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stencil {
    pub c: f32,
    pub ax: [f32; 4],
    pub ay: [f32; 4],
}

impl Stencil {
    /// L applied at one point: `c0` the centre value, `xm[j-1]`/`xp[j-1]` the values j columns to the
    /// left/right, `ym`/`yp` j rows up/down (zero outside the grid).
    #[inline(always)]
    pub fn apply(&self, c0: f32, xm: [f32; 4], xp: [f32; 4], ym: [f32; 4], yp: [f32; 4]) -> f32 {
        let sx = self.ax[0] * (xm[0] + xp[0])
            + self.ax[1] * (xm[1] + xp[1])
            + self.ax[2] * (xm[2] + xp[2])
            + self.ax[3] * (xm[3] + xp[3]);
        let sy = self.ay[0] * (ym[0] + yp[0])
            + self.ay[1] * (ym[1] + yp[1])
            + self.ay[2] * (ym[2] + yp[2])
            + self.ay[3] * (ym[3] + yp[3]);
        self.c * c0 + (sx + sy)
    }

    /// The same sum with fused multiply-adds (the GPU's `fma.rn`): 9 FMAs instead of 9 multiplies
    /// and 8 adds. Used by the cluster kernels (it rounds differently from [`Stencil::apply`],
    /// a few 1e-8 relative; the CPU keeps separate operations because the host build has no FMA
    /// instruction and `mul_add` would call libm).
    #[inline(always)]
    pub fn apply_fma(&self, c0: f32, xm: [f32; 4], xp: [f32; 4], ym: [f32; 4], yp: [f32; 4]) -> f32 {
        use crate::math::mul_add as fma;
        let mut s = self.c * c0;
        s = fma(self.ax[0], xm[0] + xp[0], s);
        s = fma(self.ax[1], xm[1] + xp[1], s);
        s = fma(self.ax[2], xm[2] + xp[2], s);
        s = fma(self.ax[3], xm[3] + xp[3], s);
        s = fma(self.ay[0], ym[0] + yp[0], s);
        s = fma(self.ay[1], ym[1] + yp[1], s);
        s = fma(self.ay[2], ym[2] + yp[2], s);
        fma(self.ay[3], ym[3] + yp[3], s)
    }

    /// The same terms as [`Stencil::apply_fma`] in another order, for latency (the `clusterd`
    /// kernel): the centre and the y arm's inner three rows, which a streaming kernel already holds
    /// in registers, go first, so the chain has started before the row's loads (the x arm and the
    /// streamed outermost y row) arrive; one chain, no extra join. Rounds like `apply_fma` to a few 1e-8.
    #[inline(always)]
    pub fn apply_fma_y_first(&self, c0: f32, xm: [f32; 4], xp: [f32; 4], ym: [f32; 4], yp: [f32; 4]) -> f32 {
        use crate::math::mul_add as fma;
        let mut s = self.c * c0;
        s = fma(self.ay[0], ym[0] + yp[0], s);
        s = fma(self.ay[1], ym[1] + yp[1], s);
        s = fma(self.ay[2], ym[2] + yp[2], s);
        s = fma(self.ax[0], xm[0] + xp[0], s);
        s = fma(self.ax[1], xm[1] + xp[1], s);
        s = fma(self.ax[2], xm[2] + xp[2], s);
        s = fma(self.ax[3], xm[3] + xp[3], s);
        fma(self.ay[3], ym[3] + yp[3], s)
    }
}

/// The Chebyshev recursion at one point: T_1 = L T_0 (`first`), T_n = 2 L T_{n-1} - T_{n-2}.
#[inline(always)]
pub fn cheb_next(first: bool, lap: f32, prev2: f32) -> f32 {
    if first { lap } else { 2.0 * lap - prev2 }
}

/// Maps a slowness to a fractional row of the coefficient table for one frequency:
/// row = s * scale + offset, with scale = w dz / dp and offset = -p0 / dp.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RowMap {
    pub scale: f32,
    pub offset: f32,
}

/// Integer row `i0` (so that rows i0 and i0 + 1 exist) and the fraction toward row i0 + 1, for a
/// table of `rows` >= 2 rows. Out-of-range positions clamp to the first/last row (the host builds
/// the table over the whole velocity and frequency range, so this only guards rounding).
#[inline(always)]
pub fn table_pos(s: f32, map: RowMap, rows: u32) -> (u32, f32) {
    let rmax = (rows - 1) as f32;
    let mut r = s * map.scale + map.offset;
    if !(r >= 0.0) {
        r = 0.0; // also catches NaN
    }
    if r > rmax {
        r = rmax;
    }
    let fl = crate::math::floor(r);
    let mut i = fl as u32;
    if i > rows - 2 {
        i = rows - 2;
    }
    (i, r - i as f32)
}

/// Coefficient a_n at table position (i0, f): linear interpolation between rows i0 and i0 + 1.
/// `table` holds `rows * ncoef` complex values, row-major, interleaved (re, im).
///
/// # Safety
/// `table` must hold (i0 + 2) * ncoef complex values and n < ncoef.
#[inline(always)]
pub unsafe fn coef_at(table: *const f32, ncoef: u32, i0: u32, f: f32, n: u32) -> (f32, f32) {
    unsafe {
        let k0 = 2 * (i0 * ncoef + n) as usize;
        let k1 = k0 + 2 * ncoef as usize;
        let (r0, m0) = (*table.add(k0), *table.add(k0 + 1));
        let (r1, m1) = (*table.add(k1), *table.add(k1 + 1));
        (r0 + f * (r1 - r0), m0 + f * (m1 - m0))
    }
}

/// The coefficient table re-laid out for one 16-byte load per lookup (`paperq`, `cluster`): entry
/// (n, i0), i0 = 0..rows - 2, at float 4 (n (rows - 1) + i0), holds (a_n[i0], a_n[i0 + 1]) as
/// (re0, im0, re1, im1). Coefficient-major, so the two rows a lookup interpolates between sit in one
/// aligned 16-byte word and the rows of one coefficient are contiguous (rows x 16 bytes: cache
/// resident). With a velocity that varies from node to node, the row-major table's four scalar loads
/// per lookup touch four cache lines per node; this is one. `table` as in [`coef_at`].
pub fn pair_entry(table: &[f32], ncoef: usize, i0: usize, n: usize) -> [f32; 4] {
    let (k0, k1) = (2 * (i0 * ncoef + n), 2 * ((i0 + 1) * ncoef + n));
    [table[k0], table[k0 + 1], table[k1], table[k1 + 1]]
}

/// Entries per coefficient in the pair table: one per row pair (i0, i0 + 1).
#[inline(always)]
pub const fn pair_rows(rows: u32) -> u32 { rows - 1 }

/// Interpolates a pair-table entry with the arithmetic of [`coef_at`] (identical results).
#[inline(always)]
pub fn coef_from_pair(e: [f32; 4], f: f32) -> (f32, f32) { (e[0] + f * (e[2] - e[0]), e[1] + f * (e[3] - e[1])) }

/// acc + a t for complex a, t (one coefficient times one Chebyshev term).
#[inline(always)]
pub fn cmadd(acc: (f32, f32), a: (f32, f32), t: (f32, f32)) -> (f32, f32) {
    (acc.0 + (a.0 * t.0 - a.1 * t.1), acc.1 + (a.0 * t.1 + a.1 * t.0))
}

/// The imaging condition at one point: Re(S' R), with S' the conjugated (time-reversed) source
/// wavefield, so both waves use the same operator exp(+i kz dz) (see host/src/srm/mod.rs).
#[inline(always)]
pub fn image_term(s: (f32, f32), r: (f32, f32)) -> f32 { s.0 * r.0 - s.1 * r.1 }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_positions_round_trip() {
        for (i, f) in [(0u32, 0.0f32), (4094, 1.0), (17, 0.5), (3, 1e-9), (1000, 0.999_999_9), (5, 0.123_456_79)] {
            let (j, g) = unpack_pos(pack_pos(i, f));
            assert!((1.0..2.0).contains(&g));
            let (x, y) = (j as f64 + g as f64 - 1.0, i as f64 + f as f64);
            assert!((x - y).abs() <= 1.0 / 2097152.0 + 1e-12, "({i}, {f}) -> ({j}, {g})");
        }
        assert_eq!(unpack_pos(pack_pos(7, 1.0)), (8, 1.0));
        assert_eq!(unpack_pos(pack_pos(7, 0.0)), (7, 1.0));
    }

    #[test]
    fn offset_entries_interpolate_like_the_table() {
        // 3 rows x 2 coefficients: a_n[i] = (i + n, 10 i - n).
        let table: Vec<f32> = (0..3).flat_map(|i| (0..2).flat_map(move |n| [(i + n) as f32, (10 * i - n) as f32])).collect();
        for n in 0..2 {
            for (i, f) in [(0usize, 0.25f32), (1, 0.5), (1, 1.0), (0, 0.0)] {
                let (j, g) = unpack_pos(pack_pos(i as u32, f));
                let got = coef_from_offset(offset_entry(&table, 2, 3, j as usize, n), g);
                let want = unsafe { coef_at(table.as_ptr(), 2, i as u32, f, n as u32) };
                assert!((got.0 - want.0).abs() < 1e-5 && (got.1 - want.1).abs() < 1e-5, "{n} {i} {f}: {got:?} {want:?}");
            }
        }
    }

    #[test]
    fn table_pos_clamps_and_interpolates() {
        let map = RowMap { scale: 2.0, offset: -1.0 };
        assert_eq!(table_pos(1.25, map, 4), (1, 0.5));
        assert_eq!(table_pos(-3.0, map, 4), (0, 0.0));
        assert_eq!(table_pos(10.0, map, 4), (2, 1.0));
        assert_eq!(table_pos(f32::NAN, map, 4), (0, 0.0));
        let table = [1.0f32, 0.0, 0.0, 1.0, 3.0, 2.0, 2.0, 3.0];
        assert_eq!(unsafe { coef_at(table.as_ptr(), 2, 0, 0.5, 0) }, (2.0, 1.0));
        assert_eq!(unsafe { coef_at(table.as_ptr(), 2, 0, 0.25, 1) }, (0.5, 1.5));
    }

    #[test]
    fn stencil_of_a_constant_is_the_symbol_at_zero() {
        let st = Stencil { c: 0.5, ax: [0.1, 0.05, 0.02, 0.01], ay: [0.02, 0.01, 0.0, 0.0] };
        let sum = st.c + 2.0 * (st.ax.iter().sum::<f32>() + st.ay.iter().sum::<f32>());
        let v = st.apply(1.0, [1.0; 4], [1.0; 4], [1.0; 4], [1.0; 4]);
        assert!((v - sum).abs() < 1e-6);
        assert_eq!(cheb_next(true, 0.3, 9.0), 0.3);
        assert_eq!(cheb_next(false, 0.5, 0.25), 0.75);
        assert_eq!(cmadd((1.0, 1.0), (0.0, 1.0), (2.0, 3.0)), (-2.0, 3.0));
    }
}
