//! Volumes of any N1 x N2 x N3 shape, including ones bigger than GPU memory: the paper's variant 2.
//! The volume is cut into overlapping cubes (256^3 by default, the paper's choice), each cube is
//! transformed independently (cubes are spread over all engines, one per GPU), and the overlaps are
//! tapered with weights a_t whose squares sum to 1 at every sample. The cube coefficients are those
//! of a_t f, and the inverse sums a_t T^* c_t: the fragmented transform is itself a tight frame
//! (adjoint = inverse, energy kept), so thresholding works on it as on one cube.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::collections::BTreeMap;
use std::sync::{Arc, Condvar, Mutex};

use anyhow::{ensure, Context, Result};
use num_complex::Complex32;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::{nice, validate_volume, CoeffEdit, CubeOp, Engine, Frame, HostSamples, Params};
use crate::backend::Backend;
use crate::runtime::Gpu;
use gpu_kernels::wavepacket::{fall, tapered};

/// Where the cubes go in the volume.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tiling {
    /// Volume shape (n1, n2, n3), n3 fastest (time samples of a trace).
    pub shape: [usize; 3],
    /// Cube side.
    pub cube: usize,
    /// Cube start per axis.
    pub starts: [Vec<usize>; 3],
    /// Cubes per box along x2 in [`Fragmented::process`] ([`Tiling::with_box_cubes`]). Not part of
    /// the layout (coefficient files do not store it): it only groups the cubes for processing.
    #[serde(skip, default = "default_box_cubes")]
    box_cubes: usize,
}

fn default_box_cubes() -> usize { BOX_CUBES }

impl Tiling {
    /// Cubes of side `cube` (a volume that fits in one cube gets one cube of the smallest fast FFT
    /// size holding it), overlapping by at least `overlap` samples.
    pub fn new(shape: [usize; 3], cube: usize, overlap: usize) -> Result<Tiling> {
        ensure!(shape.iter().all(|&d| d > 0), "empty volume (shape {:?})", shape);
        ensure!(cube >= 16, "cube side {cube} is too small (at least 16)");
        let big = shape.iter().copied().max().unwrap();
        if big <= cube {
            let c = nice(big.max(16));
            let c = if c % 2 == 0 { c } else { nice(c + 1) };
            return Ok(Tiling { shape, cube: c, starts: [vec![0], vec![0], vec![0]], box_cubes: BOX_CUBES });
        }
        ensure!(2 * overlap <= cube, "overlap {overlap} is more than half the cube side {cube}");
        let starts = shape.map(|d| {
            if d <= cube {
                vec![0]
            } else {
                let k = (d - overlap).div_ceil(cube - overlap);
                let k = k.max(2);
                (0..k).map(|i| ((i * (d - cube)) as f64 / (k - 1) as f64).round() as usize).collect()
            }
        });
        // Three cubes must never overlap one sample (the taper is pairwise).
        for (a, s) in starts.iter().enumerate() {
            for w in s.windows(3) {
                ensure!(w[2] >= w[0] + cube, "axis {a}: cubes of {cube} with overlap {overlap} stack three deep");
            }
        }
        Ok(Tiling { shape, cube, starts, box_cubes: BOX_CUBES })
    }

    /// The same cubes, processed in boxes of up to `cubes` along x2 ([`Tiling::cube_box`]).
    pub fn with_box_cubes(mut self, cubes: usize) -> Result<Tiling> {
        ensure!(cubes >= 1, "boxes of {cubes} cubes: at least 1");
        self.box_cubes = cubes;
        Ok(self)
    }

    /// Cubes per box along x2 at most.
    pub fn box_cubes(&self) -> usize { self.box_cubes }

    pub fn count(&self) -> usize { self.starts.iter().map(|s| s.len()).product() }

    /// Start of cube t (x fastest over the last axis).
    pub fn start(&self, t: usize) -> [usize; 3] {
        let (n1, n2) = (self.starts[1].len(), self.starts[2].len());
        [self.starts[0][t / (n1 * n2)], self.starts[1][(t / n2) % n1], self.starts[2][t % n2]]
    }

    fn index(&self, t: usize) -> [usize; 3] {
        let (n1, n2) = (self.starts[1].len(), self.starts[2].len());
        [t / (n1 * n2), (t / n2) % n1, t % n2]
    }

    /// 1D taper of cube k along axis a at local sample x: squares of neighbours sum to 1 in every
    /// overlap; 0 in the zero padding past the volume.
    pub fn taper(&self, a: usize, k: usize, x: usize) -> f32 {
        let s = &self.starts[a];
        let g = s[k] + x;
        if g >= self.shape[a] {
            return 0.0;
        }
        let mut w = 1.0f32;
        if k > 0 {
            let (lo, hi) = (s[k], s[k - 1] + self.cube);
            if g < hi {
                w *= rise((g - lo) as f32 + 0.5, (hi - lo) as f32);
            }
        }
        if k + 1 < s.len() {
            let (lo, hi) = (s[k + 1], s[k] + self.cube);
            if g >= lo {
                w *= rise((hi - g) as f32 - 0.5, (hi - lo) as f32);
            }
        }
        w
    }

    /// Taper product of cube t at local position x (sample coordinates; 0 outside the volume).
    pub fn weight_at(&self, t: usize, x: [f32; 3]) -> f32 {
        let ix = self.index(t);
        let mut w = 1.0;
        for a in 0..3 {
            let xa = x[a].round();
            if xa < 0.0 || xa >= self.cube as f32 {
                return 0.0;
            }
            w *= self.taper(a, ix[a], xa as usize);
        }
        w
    }

    /// The tapered, zero-padded cube t.
    pub fn extract(&self, vol: &[f32], t: usize) -> Vec<f32> { self.extract_from_rows(vol, 0, t) }

    /// [`Tiling::extract`] from a slab of the volume: its rows (along the first axis) from
    /// `first_row` on, which must hold the cube's ([`Tiling::rows_of`]).
    pub fn extract_from_rows(&self, slab: &[f32], first_row: usize, t: usize) -> Vec<f32> {
        let c = self.cube;
        let (st, ix) = (self.start(t), self.index(t));
        let w: [Vec<f32>; 3] = [0, 1, 2].map(|a| (0..c).map(|x| self.taper(a, ix[a], x)).collect());
        let [_, s1, s2] = self.shape;
        let inside = self.inside(t);
        let mut out = vec![0.0f32; c * c * c];
        let row0 = st[0] - first_row;
        cut(c, inside, [&w[0], &w[1], &w[2]], |x0, x1| &slab[((row0 + x0) * s1 + st[1] + x1) * s2 + st[2]..][..inside[2]], &mut out);
        out
    }

    /// The rows of the volume (along the first axis) that cubes `cubes` read: a contiguous range,
    /// as cubes are numbered with the first axis slowest (an MPI rank reads only these).
    pub fn rows_of(&self, cubes: std::ops::Range<usize>) -> std::ops::Range<usize> {
        if cubes.is_empty() {
            return 0..0;
        }
        let last = cubes.end - 1;
        self.start(cubes.start)[0]..self.start(last)[0] + self.inside(last)[0]
    }

    /// Extent of cube t inside the volume (the rest of the cube is zero padding).
    pub fn inside(&self, t: usize) -> [usize; 3] {
        let st = self.start(t);
        [0, 1, 2].map(|a| self.cube.min(self.shape[a] - st[a]))
    }

    /// Boxes: each (i0, i1) column of cubes along the trace axis x2, in runs of at most
    /// [`Tiling::box_cubes`], numbered in cube order ([`Tiling::cube_box`]).
    pub fn box_count(&self) -> usize {
        self.starts[0].len() * self.starts[1].len() * self.starts[2].len().div_ceil(self.box_cubes)
    }

    /// Box b: its cubes (consecutive numbers), where it starts and its extent inside the volume.
    pub fn cube_box(&self, b: usize) -> CubeBox {
        let n2 = self.starts[2].len();
        let k = self.box_cubes;
        let runs = n2.div_ceil(k);
        let (column, run) = (b / runs, b % runs);
        let first = column * n2 + run * k;
        let end = (first + k).min((column + 1) * n2);
        let origin = self.start(first);
        let [e0, e1, _] = self.inside(first);
        let last = (self.start(end - 1)[2] + self.cube).min(self.shape[2]);
        let extent = [e0, e1, last - origin[2]];
        // The box before it along each axis (cube rows i0 - 1, i1 - 1, the previous run) ends
        // this far into it; three boxes never overlap one sample along an axis (`new`).
        let ix = self.index(first);
        let c = self.cube;
        let before = |a: usize, prev_start: Option<usize>| prev_start.map_or(0, |p| (p + c).saturating_sub(origin[a]).min(extent[a]));
        let covered = [
            before(0, ix[0].checked_sub(1).map(|k| self.starts[0][k])),
            before(1, ix[1].checked_sub(1).map(|k| self.starts[1][k])),
            before(2, (run > 0).then(|| self.start(first - 1)[2])),
        ];
        CubeBox { cubes: first..end, origin, extent, covered }
    }

    /// Samples of the largest box's partial sum.
    pub fn box_samples_max(&self) -> usize {
        (0..self.box_count()).map(|b| self.cube_box(b).extent.iter().product::<usize>()).max().unwrap_or(0)
    }

    /// Every axis's tapers in one table, `cube` values per cube position along the axis, and
    /// where each axis's part starts: cube position k along axis a has its taper at
    /// `table[at[a] + k * cube..]` (uploaded once per job: the device cut and fold read it).
    pub fn taper_table(&self) -> (Vec<f32>, [usize; 3]) {
        let c = self.cube;
        let mut table = Vec::new();
        let mut at = [0; 3];
        for a in 0..3 {
            at[a] = table.len();
            for k in 0..self.starts[a].len() {
                table.extend((0..c).map(|x| self.taper(a, k, x)));
            }
        }
        (table, at)
    }

    /// Cube t's place in box `bx` ([`CubeInBox`]), with tapers from [`Tiling::taper_table`]'s
    /// offsets `at`.
    pub fn cube_in_box(&self, bx: &CubeBox, t: usize, at: [usize; 3]) -> CubeInBox {
        let ix = self.index(t);
        let shell = bx.covered_blocks();
        CubeInBox { t, cube: self.cube, inside: self.inside(t), taper: [0, 1, 2].map(|a| at[a] + ix[a] * self.cube),
            len: bx.extent[2], off: self.start(t)[2] - bx.origin[2], first: t == bx.cubes.start, last: t + 1 == bx.cubes.end,
            origin: bx.origin, fresh: bx.fresh(), covered: [0, 1, 2].map(|i| shell.get(i).copied()), face: None }
    }

    /// As [`Tiling::cube_in_box`] for box b whose face ([`CubeBox::face`]) the device adds itself:
    /// the face goes down with the fresh block, and the device waits until every box before b's
    /// x0 row is folded ([`Tiling::row_start`]). `None` where the box has no face.
    pub fn cube_in_box_face(&self, b: usize, t: usize, at: [usize; 3]) -> Option<CubeInBox> {
        let bx = self.cube_box(b);
        let (face_at, face_extent) = bx.face()?;
        let mut job = self.cube_in_box(&bx.face_folded(), t, at);
        job.face = Some(Face { after: self.row_start(b), at: face_at, extent: face_extent });
        Some(job)
    }

    /// The first box of box b's x0 row (boxes are numbered x0 row by x0 row): the boxes before it
    /// are all that cover b's face.
    pub fn row_start(&self, b: usize) -> usize {
        let per_row = self.box_count() / self.starts[0].len();
        b - b % per_row
    }

    /// Copies cube t's samples inside the volume into `out` ((n0, n1, n2) of [`Tiling::inside`],
    /// x2 fastest: no taper, no padding; the engine cuts the cube from them), `SLAB` planes at a
    /// time, calling `staged(slab, its first sample)` after each slab (the GPU uploads it while
    /// the host copies the next). Also checks the samples it reads: false when one of them is not
    /// finite (every sample of the volume lies in some cube, so the cubes together check the whole
    /// volume, with no pass of its own).
    pub fn copy_raw_staged(&self, vol: &[f32], t: usize, out: &mut [f32],
        mut staged: impl FnMut(&[f32], usize) -> Result<()>) -> Result<bool> {
        const SLAB: usize = 16;
        let [n0, n1, n2] = self.inside(t);
        ensure!(out.len() >= n0 * n1 * n2, "raw cube buffer of {} samples for {n0} x {n1} x {n2}", out.len());
        ensure!(vol.len() == self.shape.iter().product::<usize>(), "{} samples for a {:?} volume", vol.len(), self.shape);
        let st = self.start(t);
        let [_, s1, s2] = self.shape;
        let mut finite = true;
        for (k, slab) in out[..n0 * n1 * n2].chunks_mut(SLAB * n1 * n2).enumerate() {
            // Tasks of 64 rows (64 KB at 256 samples): tasks of a few rows spent more time in the
            // scheduler than copying when four engines and the fold shared the pool.
            let ok = slab.par_chunks_mut(n2).enumerate().with_min_len(64).map(|(r, row)| {
                let (x0, x1) = (k * SLAB + r / n1, r % n1);
                let src = &vol[((st[0] + x0) * s1 + st[1] + x1) * s2 + st[2]..][..n2];
                row.copy_from_slice(src);
                src.iter().fold(true, |ok, v| ok & v.is_finite())
            }).reduce(|| true, |a, b| a & b);
            finite &= ok;
            staged(slab, k * SLAB * n1 * n2)?;
        }
        Ok(finite)
    }

    /// Box b's partial sum ((e0, e1, e2) of its extent, x2 fastest) into the volume, boxes in
    /// order: samples an earlier box wrote ([`CubeBox::covered`]) get the sum added, the others
    /// are set to it, so the volume's earlier contents do not matter (no zeroing pass, and a
    /// reused output buffer works as a fresh one). In parallel ([`Tiling::fold_rows`]); every
    /// sample gets one write per box, so the result is that of a serial loop, bit for bit.
    pub fn fold_box(&self, vol: &mut [f32], b: usize, partial: &[f32]) -> Result<()> {
        self.fold_rows(vol, &[FoldRows { b, partial, set_fresh: true, rows: 0..self.cube_box(b).extent[0], face_folded: false }]).map(|_| ())
    }

    /// As [`Tiling::fold_box`] where the box's fresh block ([`CubeBox::fresh`]) is already in the
    /// volume (a GPU copied it there from the device): only the samples an earlier box wrote get
    /// the sum added; `partial` needs to hold only those.
    pub fn add_covered(&self, vol: &mut [f32], b: usize, partial: &[f32]) -> Result<()> {
        self.fold_rows(vol, &[FoldRows { b, partial, set_fresh: false, rows: 0..self.cube_box(b).extent[0], face_folded: false }]).map(|_| ())
    }

    /// Folds several boxes' x0 rows ([`FoldRows`]) in one parallel pass over the volume rows they
    /// touch, every sample taking the items in their order (which must be box order wherever two
    /// touch the same plane): a box folds slab by slab as its sum comes down, and the slabs of the
    /// boxes ready together go in one pass (480^3 on 2 x H200: a pass per 32-plane slab
    /// took 8.0-8.8 ms of host time per job, one pass for what is ready 7.0-7.3 ms, whole boxes
    /// 4.1-4.9 ms, but the slabs fold while the later ones come down). In tasks of 32 volume rows,
    /// so a slab of a few planes spreads over every thread; each sample gets one write per item,
    /// the result of a serial loop bit for bit. Returns whether it made a pass: none where no item
    /// writes a sample ([`FoldRows::writes`]; a pass costs ~0.1 ms of thread wake-ups on a 64-core
    /// host even with nothing to do).
    pub fn fold_rows(&self, vol: &mut [f32], items: &[FoldRows]) -> Result<bool> {
        const ROWS: usize = 32;
        let [_, s1, s2] = self.shape;
        ensure!(vol.len() == self.shape.iter().product::<usize>(), "{} samples for a {:?} volume", vol.len(), self.shape);
        let mut work: Vec<(&FoldRows, CubeBox)> = Vec::new();
        for it in items {
            let bx = it.folded_box(self);
            let [e0, e1, e2] = bx.extent;
            ensure!(it.partial.len() >= e0 * e1 * e2, "box {}: partial sum of {} samples for {e0} x {e1} x {e2}", it.b,
                it.partial.len());
            ensure!(it.rows.start <= it.rows.end && it.rows.end <= e0, "box {}: rows {:?} of {e0}", it.b, it.rows);
            if it.writes(&bx) {
                work.push((it, bx));
            }
        }
        let planes = |(it, bx): &(&FoldRows, CubeBox)| bx.origin[0] + it.rows.start..bx.origin[0] + it.rows.end;
        let lo = work.iter().map(|x| planes(x).start).min().unwrap_or(0);
        let hi = work.iter().map(|x| planes(x).end).max().unwrap_or(0);
        if lo >= hi {
            return Ok(false);
        }
        vol[lo * s1 * s2..hi * s1 * s2].par_chunks_mut(ROWS * s2).enumerate().for_each(|(task, rows)| {
            for (r, row) in rows.chunks_mut(s2).enumerate() {
                let g = task * ROWS + r;
                let (p, y) = (lo + g / s1, g % s1);
                for x @ (it, bx) in &work {
                    let ([_, e1, e2], [c0, c1, c2], o) = (bx.extent, bx.covered, bx.origin);
                    if !planes(x).contains(&p) || y < o[1] || y >= o[1] + e1 {
                        continue;
                    }
                    let (x0, x1) = (p - o[0], y - o[1]);
                    let dst = &mut row[o[2]..][..e2];
                    let src = &it.partial[(x0 * e1 + x1) * e2..][..e2];
                    // Samples below `split` along x2 were written before (all of them on a
                    // plane or row an earlier box covers).
                    let split = if x0 < c0 || x1 < c1 { e2 } else { c2 };
                    for (d, s) in dst[..split].iter_mut().zip(&src[..split]) {
                        *d += *s;
                    }
                    if it.set_fresh {
                        dst[split..].copy_from_slice(&src[split..]);
                    }
                }
            }
        });
        Ok(true)
    }

    /// Adds the tapered cube t into the volume. In parallel over the cube's slabs (x0): each
    /// volume sample gets one add per cube, so the result is that of a serial loop, bit for bit.
    /// It runs on the thread that folds the cubes in order while the devices compute the next
    /// ones; serial, 8 cubes of 256^3 took longer than their transforms on 4 GPUs.
    pub fn accumulate(&self, vol: &mut [f32], t: usize, cube: &[f32]) {
        let rows = self.rows_of(t..t + 1);
        let planes = rows.len() * self.cube * self.cube;
        self.accumulate_rows(vol, 0, t, rows, &cube[..planes]);
    }

    /// [`Tiling::accumulate`] of the volume rows `rows` of cube t alone (inside the cube's rows,
    /// [`Tiling::rows_of`]) into a slab holding the volume's rows from `first_row` on (an MPI
    /// rank's rows). `part`: the cube's planes (first axis) of those rows, `rows.len()` c x c
    /// planes. The same additions, sample by sample, as adding the whole cube into the whole volume.
    pub fn accumulate_rows(&self, slab: &mut [f32], first_row: usize, t: usize, rows: std::ops::Range<usize>, part: &[f32]) {
        let c = self.cube;
        let (st, ix) = (self.start(t), self.index(t));
        let w: [Vec<f32>; 3] = [0, 1, 2].map(|a| (0..c).map(|x| self.taper(a, ix[a], x)).collect());
        let [_, s1, s2] = self.shape;
        assert!(rows.start >= st[0] && rows.end <= st[0] + c.min(self.shape[0] - st[0]) && rows.start >= first_row,
            "rows {rows:?} of cube {t} (from row {}) into a slab from row {first_row}", st[0]);
        assert_eq!(part.len(), rows.len() * c * c, "cube {t}: {} samples for rows {rows:?}", part.len());
        let skip = rows.start - st[0];
        slab[(rows.start - first_row) * s1 * s2..(rows.end - first_row) * s1 * s2].par_chunks_mut(s1 * s2).enumerate()
            .for_each(|(r, plane)| {
            let x0 = skip + r;
            let cube = &part[r * c * c..(r + 1) * c * c];
            for x1 in 0..c.min(s1 - st[1]) {
                let dst = (st[1] + x1) * s2 + st[2];
                let src = x1 * c;
                let w01 = w[0][x0] * w[1][x1];
                for x2 in 0..c.min(s2 - st[2]) {
                    plane[dst + x2] += tapered(cube[src + x2], w01, w[2][x2]);
                }
            }
        });
    }
}

/// The c^3 cube from its rows inside the volume (`row(x0, x1)`: the n2 samples of row (x0, x1) of
/// the `inside` = (n0, n1, n2) part), tapered by `w` (one table per axis), zeros in the padding:
/// every sample of `cube` written ([`Tiling::extract`] from the volume, [`CubeInBox::cut_host`]
/// from raw samples, and the device's `wp_cut`, all with [`tapered`]). In parallel over planes.
fn cut<'a>(c: usize, inside: [usize; 3], w: [&[f32]; 3], row: impl Fn(usize, usize) -> &'a [f32] + Sync, cube: &mut [f32]) {
    let [n0, n1, n2] = inside;
    cube[..c * c * c].par_chunks_mut(c * c).enumerate().for_each(|(x0, plane)| {
        for (x1, dst) in plane.chunks_mut(c).enumerate() {
            if x0 >= n0 || x1 >= n1 {
                dst.fill(0.0);
                continue;
            }
            let w01 = w[0][x0] * w[1][x1];
            for ((d, &v), &w2) in dst[..n2].iter_mut().zip(row(x0, x1)).zip(&w[2][..n2]) {
                *d = tapered(v, w01, w2);
            }
            dst[n2..].fill(0.0);
        }
    });
}

/// sin(pi/2 nu(x / width)): rises from 0 to 1 across an overlap; with its mirror the squares sum to 1.
fn rise(x: f32, width: f32) -> f32 {
    let v = fall(1.0 - x / width);
    v.clamp(0.0, 1.0)
}

/// Cubes per box by default ([`Tiling::with_box_cubes`]): one. What follows the devices is then
/// one cube's download and fold per device (67 MB at 256^3), not a box's: boxes of several cubes
/// sum their x2 overlaps on the device and move 6-9% fewer bytes, but every engine's last unit of
/// work, and the in-order folds waiting behind it, grow with them (2-cube boxes left
/// 8 ms of folds after the last box on 4 x H200 at 928 x 928 x 480).
pub const BOX_CUBES: usize = 1;

/// Rows of a box's partial sum to fold into the volume ([`Tiling::fold_rows`]): box b's x0
/// `rows` (box-relative) from `partial` (the whole box's sum), its fresh samples set from it or
/// (`set_fresh` off: already in the volume) left.
pub struct FoldRows<'a> {
    pub b: usize,
    pub partial: &'a [f32],
    pub set_fresh: bool,
    pub rows: std::ops::Range<usize>,
    /// The box's face is in the volume already ([`CubeBox::face_folded`]).
    pub face_folded: bool,
}

impl FoldRows<'_> {
    /// Box `b` as the host folds it (its face in the volume already where a GPU added it).
    fn folded_box(&self, tiling: &Tiling) -> CubeBox {
        let bx = tiling.cube_box(self.b);
        if self.face_folded { bx.face_folded() } else { bx }
    }

    /// Whether folding these rows of box `bx` writes any sample: its fresh samples are set here,
    /// or its rows hold samples an earlier box wrote ([`CubeBox::covered`]: the planes below
    /// `covered[0]`, and on every plane the rows below `covered[1]` and the samples below
    /// `covered[2]`).
    fn writes(&self, bx: &CubeBox) -> bool {
        let [c0, c1, c2] = [0, 1, 2].map(|a| bx.covered[a].min(bx.extent[a]));
        !self.rows.is_empty() && (self.set_fresh || c1 > 0 || c2 > 0 || self.rows.start < c0)
    }
}

/// A box of cubes: a run of cubes (i0, i1, i2..) along the trace axis that one engine
/// processes in order, cutting each cube from its raw samples and summing the tapered results
/// into the box's partial sum (on a GPU: on the device). The host then adds whole boxes into the
/// volume in box order, so every sample's sum has one fixed order for any number of engines.
#[derive(Clone, Debug, PartialEq)]
pub struct CubeBox {
    /// Its cubes (consecutive cube numbers).
    pub cubes: std::ops::Range<usize>,
    /// Its first sample in the volume (that of its first cube).
    pub origin: [usize; 3],
    /// Its extent inside the volume (the partial sum's shape, x2 fastest).
    pub extent: [usize; 3],
    /// Per axis, how far into it the previous box along that axis reaches: a sample whose local
    /// coordinate is below this on some axis was written by an earlier box, every other sample
    /// is first written by this one ([`Tiling::fold_box`]).
    pub covered: [usize; 3],
}

impl CubeBox {
    /// The samples no earlier box wrote, as a block of the box: its first sample (box-local: the
    /// covered extent on every axis) and extent; `None` where every sample is covered. The rest
    /// of the box (the covered shell) is at most three blocks ([`CubeBox::covered_blocks`]).
    pub fn fresh(&self) -> Option<([usize; 3], [usize; 3])> {
        let ext = [0, 1, 2].map(|a| self.extent[a] - self.covered[a].min(self.extent[a]));
        (!ext.contains(&0)).then_some((self.covered, ext))
    }

    /// The samples of the box's x0 face (the planes below `covered[0]`) that only boxes of
    /// earlier x0 rows cover, as a block of the box (first sample, extent): a box of the same row
    /// covers only rows below `covered[1]` or samples below `covered[2]` (three boxes never overlap
    /// along an axis). Their earlier sum is final once those rows are folded, so a GPU adds it into
    /// the box's sum itself and sends the sum down with the fresh block ([`CubeBox::face_folded`]):
    /// on 4 GPUs at 480^3 about half the samples the last boxes share, which the host otherwise
    /// folds after they arrive. `None` where the box has no such samples.
    pub fn face(&self) -> Option<([usize; 3], [usize; 3])> {
        let [c0, c1, c2] = [0, 1, 2].map(|a| self.covered[a].min(self.extent[a]));
        let [_, e1, e2] = self.extent;
        let extent = [c0, e1 - c1, e2 - c2];
        (!extent.contains(&0)).then_some(([0, c1, c2], extent))
    }

    /// The box as the host folds it once a GPU added its face ([`CubeBox::face`]): the face is
    /// written with the fresh block, the covered shell is the rows below `covered[1]` and the
    /// samples below `covered[2]` of every plane.
    pub fn face_folded(&self) -> CubeBox {
        CubeBox { covered: [0, self.covered[1], self.covered[2]], ..self.clone() }
    }

    /// The covered shell as blocks of the box (first sample, extent): the planes x0 < c0, then
    /// the rows x1 < c1 of the other planes, then the samples x2 < c2 of the other rows; empty
    /// blocks left out.
    pub fn covered_blocks(&self) -> Vec<([usize; 3], [usize; 3])> {
        let [e0, e1, e2] = self.extent;
        let [c0, c1, c2] = [0, 1, 2].map(|a| self.covered[a].min(self.extent[a]));
        [([0, 0, 0], [c0, e1, e2]), ([c0, 0, 0], [e0 - c0, c1, e2]), ([c0, c1, 0], [e0 - c0, e1 - c1, c2])]
            .into_iter().filter(|(_, e)| !e.contains(&0)).collect()
    }
}

/// One cube of a box as an engine processes it ([`Tiling::cube_in_box`]).
#[derive(Clone, Copy, Debug)]
pub struct CubeInBox {
    /// Cube number and side.
    pub t: usize,
    pub cube: usize,
    /// Its extent inside the volume (the raw samples' shape).
    pub inside: [usize; 3],
    /// Where its tapers start in the taper table, per axis.
    pub taper: [usize; 3],
    /// The box's extent along x2, and the cube's first sample along it.
    pub len: usize,
    pub off: usize,
    /// The box's first cube (the partial sum starts from zeros) and last (it is complete).
    pub first: bool,
    pub last: bool,
    /// The box's first sample in the volume, its fresh block and covered shell ([`CubeBox::fresh`],
    /// [`CubeBox::covered_blocks`]): where a GPU writes the box straight into a page-locked output.
    pub origin: [usize; 3],
    pub fresh: Option<([usize; 3], [usize; 3])>,
    pub covered: [Option<([usize; 3], [usize; 3])>; 3],
    /// The face the device adds itself ([`Tiling::cube_in_box_face`]).
    pub face: Option<Face>,
}

/// A box's face as its engine adds it ([`CubeBox::face`]): the block (box-local first sample and
/// extent), and how many boxes (all before the box's x0 row) must be folded before the volume's
/// samples there are read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Face {
    pub after: usize,
    pub at: [usize; 3],
    pub extent: [usize; 3],
}

impl CubeInBox {
    /// Samples of the box's partial sum.
    pub fn box_samples(&self) -> usize { self.inside[0] * self.inside[1] * self.len }

    /// Checks the cube against the taper table and the buffers (the device kernels trust them).
    pub fn check(&self, tapers: usize, partial: usize) -> Result<()> {
        let [n0, n1, n2] = self.inside;
        ensure!(n0.max(n1).max(n2) <= self.cube && self.off + n2 <= self.len, "cube {}: {n0} x {n1} x {n2} at {} in a box of {}",
            self.t, self.off, self.len);
        ensure!(self.taper.iter().all(|&o| o + self.cube <= tapers), "cube {}: tapers past the table of {tapers}", self.t);
        ensure!(partial >= self.box_samples(), "cube {}: partial sum of {partial} samples for a box of {}", self.t, self.box_samples());
        Ok(())
    }

    /// The tapered cube from its raw samples (as the device's `wp_cut`): every sample written,
    /// zeros in the padding.
    pub fn cut_host(&self, tapers: &[f32], raw: &[f32], cube: &mut [f32]) {
        let c = self.cube;
        let [_, n1, n2] = self.inside;
        cut(c, self.inside, self.taper.map(|o| &tapers[o..o + c]), |x0, x1| &raw[(x0 * n1 + x1) * n2..][..n2], cube);
    }

    /// Adds the tapered cube (the inverse's output) into the box's partial sum (as the device's
    /// `wp_fold`; the first cube of a box starts from zeros).
    pub fn fold_host(&self, tapers: &[f32], cube: &[f32], partial: &mut [f32]) {
        let c = self.cube;
        let [_, n1, n2] = self.inside;
        let w = self.taper.map(|o| &tapers[o..o + c]);
        let part = &mut partial[..self.box_samples()];
        if self.first {
            part.fill(0.0);
        }
        part.par_chunks_mut(n1 * self.len).enumerate().for_each(|(x0, plane)| {
            for x1 in 0..n1 {
                let w01 = w[0][x0] * w[1][x1];
                let dst = &mut plane[x1 * self.len + self.off..][..n2];
                for ((d, &v), &w2) in dst.iter_mut().zip(&cube[(x0 * c + x1) * c..][..n2]).zip(&w[2][..n2]) {
                    *d += tapered(v, w01, w2);
                }
            }
        });
    }
}

/// A wave-packet transform of a whole volume through cubes, on one or more engines.
pub struct Fragmented {
    pub tiling: Tiling,
    pub frame: Arc<Frame>,
    engines: Vec<Mutex<Engine>>,
    /// Host buffers of each engine (box partial sums, raw cube samples), kept between jobs.
    pools: Vec<CubePool>,
}

/// The result of [`Fragmented::process_with`].
pub struct Processed {
    pub volume: Vec<f32>,
    /// Coefficients kept by a [`CoeffEdit::Threshold`] over all cubes (`None` for other edits).
    pub kept: Option<u64>,
}

/// From an engine's thread to the folding thread: a box's partial sum on its way (in a host
/// buffer of the engine's pool) and its kept count, or the failure of a cube of the box.
type BoxResult = (usize, usize, Result<(Arrival, Option<u64>)>);

/// A box's partial sum coming into host memory: the engine's buffer, whether the box's fresh
/// block went straight into the output volume, and the box's slabs of x0 rows (box-relative) not
/// folded yet, each with the event after which its rows are in the buffer (none: there already).
struct Arrival {
    buf: HostSamples,
    fresh: bool,
    /// The box's face came down with the fresh block, its earlier sum added ([`CubeBox::face`]).
    face: bool,
    slabs: std::collections::VecDeque<(std::ops::Range<usize>, Option<cudarc::driver::CudaEvent>)>,
}

impl Arrival {
    /// Waits until nothing more comes down into the buffer (or the volume), for a job that stops.
    fn settle(&self) {
        for ev in self.slabs.iter().filter_map(|(_, e)| e.as_ref()) {
            let _ = ev.synchronize();
        }
    }
}

/// The boxes' partial sums into the volume, each volume plane (x0) taking its boxes in
/// box order, so every sample gets its sum in one fixed order whatever the engines and their
/// timing; a box folds slab by slab as its rows come down. The last boxes of several devices
/// arrive together: they fold plane by plane behind one another (box 5's first slab once box 4's
/// first slab is in) while the later slabs still come down, not one whole box after another once
/// all are down (on 4 GPUs at 480^3, ~1.5 ms of host folds after the devices had finished).
struct OrderedFold<'t> {
    tiling: &'t Tiling,
    /// Each box's first volume plane.
    origin: Vec<usize>,
    /// Per volume plane: the boxes covering it, in order, and how many of them are folded there.
    covering: Vec<Vec<usize>>,
    folded: Vec<usize>,
    pending: BTreeMap<usize, (usize, Arrival)>,
    boxes_done: usize,
    /// Seconds spent folding, and in how many passes.
    busy: f64,
    passes: usize,
    /// Boxes folded whole, and how many from box 0 on are (every face of the boxes of later x0
    /// rows may be read once it reaches them: [`Tiling::row_start`]).
    done: Vec<bool>,
    prefix: usize,
    /// `SEISGPU_WP_TRACE`: the job's start and what the fold did when (waits, passes).
    log: Option<(std::time::Instant, Vec<String>)>,
}

/// Threads of the host fold's own pool ([`fold_pool`]).
const FOLD_THREADS: usize = 32;

/// The threads the host fold runs on: a pool of its own, [`FOLD_THREADS`] (at most one per core).
/// Measured on 4 x H200 (64 cores; the ignored probe `fold_speed_480` and the scaling bench): a
/// pass over 32 planes cost ~0.55 ms on the 64 threads of rayon's global pool once they had gone
/// idle (waking them), ~0.15 ms on 16 or 32, and whole boxes folded
/// fastest on 32 (~7 G samples/s); 480^3 on 4 GPUs, medians: 39.4-42.9 ms on the global pool,
/// 36.7-37.4 on 16, 36.1 on 32. `None` (the global pool) only if the pool cannot be made.
fn fold_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let n = FOLD_THREADS.min(cores);
        rayon::ThreadPoolBuilder::new().num_threads(n).thread_name(|i| format!("wp-fold-{i}")).build().ok()
    }).as_ref()
}

impl<'t> OrderedFold<'t> {
    fn new(tiling: &'t Tiling) -> Self {
        let mut covering = vec![Vec::new(); tiling.shape[0]];
        let mut origin = Vec::new();
        for b in 0..tiling.box_count() {
            let bx = tiling.cube_box(b);
            origin.push(bx.origin[0]);
            covering[bx.origin[0]..bx.origin[0] + bx.extent[0]].iter_mut().for_each(|c: &mut Vec<usize>| c.push(b));
        }
        let folded = vec![0; covering.len()];
        Self { tiling, origin, covering, folded, pending: BTreeMap::new(), boxes_done: 0, busy: 0.0, passes: 0,
            done: vec![false; tiling.box_count()], prefix: 0, log: None }
    }

    fn add(&mut self, b: usize, engine: usize, a: Arrival) { self.pending.insert(b, (engine, a)); }

    fn finished(&self) -> bool { self.boxes_done == self.tiling.box_count() }

    /// Whether box b may fold its `rows`: on each of their planes every earlier box is in.
    fn due(&self, b: usize, rows: &std::ops::Range<usize>) -> bool {
        let o = self.origin[b];
        (o + rows.start..o + rows.end).all(|p| self.covering[p].get(self.folded[p]) == Some(&b))
    }

    /// Whether a slab is due but still coming down (the folding thread then polls for it).
    fn waiting(&self) -> bool {
        self.pending.iter().any(|(&b, (_, a))| a.slabs.front().is_some_and(|(r, _)| self.due(b, r)))
    }

    /// Folds every due slab that is down, in one pass ([`Tiling::fold_rows`]); whole boxes go back
    /// to their engines' pools. Returns whether anything was folded, or the box that failed. It
    /// never waits for a slab: a GPU may be waiting for this thread (a box's face copy waits until
    /// the fold has reached the box's x0 row, [`CubeBox::face`]), so the thread polls
    /// ([`OrderedFold::waiting`]) and keeps taking boxes while it waits.
    fn step(&mut self, out: &mut [f32], pools: &[CubePool]) -> std::result::Result<bool, (usize, anyhow::Error)> {
        // The batch, in box order: a slab's planes count as folded once it is taken, so a later
        // box's slab on the same planes follows it in the same pass.
        let mut batch: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
        let boxes: Vec<usize> = self.pending.keys().copied().collect();
        for &b in &boxes {
            for (rows, ev) in &self.pending[&b].1.slabs {
                if !self.due(b, rows) {
                    break;
                }
                if let Some(ev) = ev && !ev.try_is_complete().map_err(|e| (b, anyhow::Error::from(e).context("a box's partial sum coming down")))? {
                    break;
                }
                for p in self.origin[b] + rows.start..self.origin[b] + rows.end {
                    self.folded[p] += 1;
                }
                batch.push((b, rows.clone()));
            }
        }
        let Some(&(first, _)) = batch.first() else { return Ok(false) };
        let tf = std::time::Instant::now();
        let items = batch.iter().map(|(b, rows)| {
            let (_, a) = &self.pending[b];
            Ok(FoldRows { b: *b, partial: a.buf.as_slice()?, set_fresh: !a.fresh, rows: rows.clone(), face_folded: a.face })
        }).collect::<Result<Vec<_>>>().map_err(|e| (first, e))?;
        // Slabs with nothing to write (a box's fresh rows already in the volume) make no pass.
        let mut fold = || self.tiling.fold_rows(out, &items);
        let passed = match fold_pool() {
            Some(pool) => pool.install(fold),
            None => fold(),
        }.map_err(|e| (first, e.context(format!("adding boxes {first}.. into the volume"))))?;
        if passed {
            self.busy += tf.elapsed().as_secs_f64();
            self.passes += 1;
            if let Some((t0, log)) = self.log.as_mut() {
                log.push(format!("{:7.2} ms: pass {:.2} ms over {:?}", (tf - *t0).as_secs_f64() * 1e3, tf.elapsed().as_secs_f64() * 1e3,
                    batch.iter().map(|(b, r)| format!("{b}:{}..{}", r.start, r.end)).collect::<Vec<_>>()));
            }
        }
        for (b, _) in &batch {
            self.pending.get_mut(b).unwrap().1.slabs.pop_front();
        }
        for b in boxes {
            if self.pending[&b].1.slabs.is_empty() {
                let (k, a) = self.pending.remove(&b).unwrap();
                pools[k].give(a.buf);
                self.boxes_done += 1;
                self.done[b] = true;
            }
        }
        while self.done.get(self.prefix) == Some(&true) {
            self.prefix += 1;
        }
        Ok(true)
    }

    /// Waits for every slab still coming down and gives the buffers back (a job that stops: no
    /// device may go on writing host memory once it has returned).
    fn drain(self, pools: &[CubePool]) {
        for (_, (k, a)) in self.pending {
            a.settle();
            pools[k].give(a.buf);
        }
    }
}

/// A volume sample that is not finite, found while writing the cubes ([`Fragmented::process`]
/// then names the first one with [`validate_volume`]).
#[derive(Debug, thiserror::Error)]
#[error("the volume has a sample that is not finite")]
struct NotFinite;

/// Host buffers for box partial sums per engine in [`Fragmented::process`]: one the device
/// downloads into, one waiting for (or in) the ordered fold, one spare for an out-of-order box.
/// (Five instead of three made no difference on 4 x H200: 2.77-3.76x against 3.46-3.72x, same
/// machine.)
const HOST_BOXES: usize = 3;

/// An engine's host buffers: its box partial sums (the free ones, and how many exist) and the
/// buffer it copies each cube's raw samples into. Made on first use, page-locked on a GPU, so a
/// processing job of many volumes pays their allocation once.
#[derive(Default)]
struct CubePool {
    state: Mutex<(Vec<HostSamples>, usize)>,
    ready: Condvar,
    raw: Mutex<Option<HostSamples>>,
}

impl CubePool {
    /// A free buffer (made with `make` while fewer than [`HOST_BOXES`] exist, else waiting for the
    /// fold to give one back); `None` once `stop` is set.
    fn take(&self, stop: &std::sync::atomic::AtomicBool, make: impl FnOnce() -> Result<HostSamples>) -> Result<Option<HostSamples>> {
        let mut g = self.state.lock().map_err(|_| anyhow::anyhow!("cube buffer pool poisoned"))?;
        loop {
            if stop.load(Ordering::Relaxed) {
                return Ok(None);
            }
            if let Some(b) = g.0.pop() {
                return Ok(Some(b));
            }
            if g.1 < HOST_BOXES {
                g.1 += 1;
                drop(g);
                return make().map(Some);
            }
            g = self.ready.wait_timeout(g, std::time::Duration::from_millis(50))
                .map_err(|_| anyhow::anyhow!("cube buffer pool poisoned"))?.0;
        }
    }
    fn give(&self, b: HostSamples) {
        if let Ok(mut g) = self.state.lock() {
            g.0.push(b);
        }
        self.ready.notify_all();
    }
    fn wake(&self) { self.ready.notify_all(); }
    /// After a failed job: the buffers that did not come back are forgotten.
    fn recount(&self) {
        if let Ok(mut g) = self.state.lock() {
            g.1 = g.0.len();
        }
    }
}

impl Fragmented {
    /// Engines for `backend`: the CPU, or every visible GPU (cubes go to all of them concurrently)
    /// when `all_gpus` is set, otherwise the backend's GPU.
    pub fn new(backend: &Backend, shape: [usize; 3], cube: usize, overlap: usize, params: &Params,
        all_gpus: bool) -> Result<Fragmented> {
        Self::from_tiling(backend, Tiling::new(shape, cube, overlap)?, params, all_gpus)
    }

    /// For a given cube layout (e.g. read from a coefficient file).
    pub fn from_tiling(backend: &Backend, tiling: Tiling, params: &Params, all_gpus: bool) -> Result<Fragmented> {
        let frame = Arc::new(Frame::new(tiling.cube, params)?);
        let mut engines = vec![Mutex::new(Engine::new(backend, frame.clone())?)];
        if let (Backend::Gpu(first), true) = (backend, all_gpus) {
            for ordinal in 0..Gpu::device_count() {
                if ordinal != first.info().ordinal {
                    let gpu = Gpu::open(ordinal)?;
                    engines.push(Mutex::new(Engine::new(&Backend::Gpu(gpu), frame.clone())?));
                }
            }
        }
        Ok(Fragmented { tiling, frame, pools: engines.iter().map(|_| CubePool::default()).collect(), engines })
    }

    /// Engines on the given backends, one each (`--gpus N|all`; `--device cpu --gpus N` gives N CPU
    /// engines, which split the cubes as N GPUs would).
    pub fn on_backends(backends: &[Backend], tiling: Tiling, params: &Params) -> Result<Fragmented> {
        ensure!(!backends.is_empty(), "no device for the wave-packet cubes");
        let frame = Arc::new(Frame::new(tiling.cube, params)?);
        let engines = backends.iter().map(|b| Engine::new(b, frame.clone()).map(Mutex::new)).collect::<Result<Vec<_>>>()?;
        Ok(Fragmented { tiling, frame, pools: engines.iter().map(|_| CubePool::default()).collect(), engines })
    }

    /// From existing engines (tests, benchmarks).
    pub fn with_engines(tiling: Tiling, engines: Vec<Engine>) -> Result<Fragmented> {
        ensure!(!engines.is_empty(), "no engine");
        let frame = engines[0].frame().clone();
        ensure!(frame.n() == tiling.cube, "engine cube {} for a tiling of {}", frame.n(), tiling.cube);
        Ok(Fragmented { tiling, frame, pools: engines.iter().map(|_| CubePool::default()).collect(), engines: engines.into_iter().map(Mutex::new).collect() })
    }

    pub fn engines(&self) -> usize { self.engines.len() }

    /// A buffer for volumes of the tiling's shape that this job reads and writes fastest:
    /// page-locked for every GPU where an engine is a GPU, ordinary memory otherwise. From a
    /// page-locked input each engine copies its cubes by DMA, with no host pass; into a
    /// page-locked output each box's fresh samples go by DMA, and the host adds only the samples
    /// that boxes share ([`Fragmented::process_into`]). A job of many volumes reuses its buffers:
    /// page-locking costs about what the DMA saves per volume (139-163 ms for 1.65 GB on the
    /// 4 x H200 host).
    pub fn volume_buffer(&self) -> Result<HostSamples> {
        let len = self.tiling.shape.iter().product::<usize>();
        for eng in &self.engines {
            let e = eng.lock().map_err(|_| anyhow::anyhow!("a cube engine panicked"))?;
            if let Engine::Gpu(g) = &*e {
                return Ok(HostSamples::PageLocked(crate::runtime::memory::PinnedBuf::portable(g.gpu(), len)?));
            }
        }
        Ok(HostSamples::Pageable(vec![0.0; len]))
    }
    /// Coefficients of the whole volume: cubes one after the other.
    pub fn total(&self) -> usize { self.tiling.count() * self.frame.total }

    /// Runs `work(engine, cube index)` for every cube, the engines pulling cubes from a shared
    /// counter (one thread per engine).
    fn for_each_cube<F: Fn(&mut Engine, usize) -> Result<()> + Sync>(&self, work: F) -> Result<()> {
        let next = AtomicUsize::new(0);
        let count = self.tiling.count();
        std::thread::scope(|s| {
            let handles: Vec<_> = self
                .engines
                .iter()
                .map(|eng| {
                    let (next, work) = (&next, &work);
                    s.spawn(move || -> Result<()> {
                        let mut e = eng.lock().unwrap();
                        loop {
                            let t = next.fetch_add(1, Ordering::Relaxed);
                            if t >= count {
                                return Ok(());
                            }
                            work(&mut e, t)?;
                        }
                    })
                })
                .collect();
            handles.into_iter().try_for_each(|h| h.join().map_err(|_| anyhow::anyhow!("a fragment worker panicked"))?)
        })
    }

    /// Forward transform of the volume.
    pub fn forward(&self, vol: &[f32]) -> Result<Vec<Complex32>> {
        validate_volume(vol, self.tiling.shape, "wave-packet forward")?;
        let per = self.frame.total;
        let out = Mutex::new(vec![Complex32::default(); self.total()]);
        self.for_each_cube(|e, t| {
            let c = e.forward(&self.tiling.extract(vol, t))?;
            out.lock().unwrap()[t * per..(t + 1) * per].copy_from_slice(&c);
            Ok(())
        })?;
        Ok(out.into_inner().unwrap())
    }

    /// Coefficients of cube t on engine k: one item of [`Fragmented::forward`] (MPI ranks split the
    /// cubes, `crate::distributed::wavepacket_forward`; in cube order they are its result).
    pub fn forward_cube(&self, k: usize, vol: &[f32], t: usize) -> Result<Vec<Complex32>> { self.forward_cube_from_rows(k, vol, 0, t) }

    /// [`Fragmented::forward_cube`] from a slab of the volume's rows from `first_row` on
    /// ([`Tiling::extract_from_rows`]).
    pub fn forward_cube_from_rows(&self, k: usize, slab: &[f32], first_row: usize, t: usize) -> Result<Vec<Complex32>> {
        ensure!(k < self.engines.len() && t < self.tiling.count(), "engine {k}, cube {t} of {}", self.tiling.count());
        let rows = self.tiling.rows_of(t..t + 1);
        let [_, s1, s2] = self.tiling.shape;
        ensure!(first_row <= rows.start && slab.len() >= (rows.end - first_row) * s1 * s2,
            "cube {t} reads rows {rows:?}; the slab holds {} rows from {first_row}", slab.len() / (s1 * s2).max(1));
        let cube = self.tiling.extract_from_rows(slab, first_row, t);
        let mut e = self.engines[k].lock().map_err(|_| anyhow::anyhow!("a cube engine panicked"))?;
        e.forward(&cube).with_context(|| format!("cube {t} at {:?}", self.tiling.start(t)))
    }

    /// Cube t from its coefficients on engine k, as [`Tiling::accumulate`] adds it into the
    /// volume: one item of [`Fragmented::inverse`].
    pub fn inverse_cube(&self, k: usize, coeffs: &[Complex32], t: usize) -> Result<Vec<f32>> {
        ensure!(k < self.engines.len() && t < self.tiling.count(), "engine {k}, cube {t} of {}", self.tiling.count());
        let mut e = self.engines[k].lock().map_err(|_| anyhow::anyhow!("a cube engine panicked"))?;
        e.inverse(coeffs).with_context(|| format!("cube {t} at {:?}", self.tiling.start(t)))
    }

    /// Inverse (= adjoint) transform.
    pub fn inverse(&self, coeffs: &[Complex32]) -> Result<Vec<f32>> {
        ensure!(coeffs.len() == self.total(), "{} coefficients for a fragmented frame of {}", coeffs.len(), self.total());
        let per = self.frame.total;
        self.accumulate_cubes(|e, t| e.inverse(&coeffs[t * per..(t + 1) * per]))
    }

    /// Forward of every cube, handing its coefficients to `look` (statistics passes).
    pub fn for_each_forward<F: Fn(usize, &[Complex32]) + Sync>(&self, vol: &[f32], look: F) -> Result<()> {
        validate_volume(vol, self.tiling.shape, "wave-packet forward")?;
        self.for_each_cube(|e, t| {
            let c = e.forward(&self.tiling.extract(vol, t))?;
            look(t, &c);
            Ok(())
        })
    }

    /// Forward, `edit` the cube's coefficients on the host, inverse, merge: one pass, cube by cube,
    /// never holding the whole volume's coefficients. [`Fragmented::process_with`] with
    /// [`CoeffEdit::Host`]; edits that a device can do ([`CoeffEdit::Identity`],
    /// [`CoeffEdit::Threshold`]) are faster through `process_with` on GPUs.
    pub fn process<F: Fn(usize, &mut [Complex32]) + Sync>(&self, vol: &[f32], edit: F) -> Result<Vec<f32>> {
        Ok(self.process_with(vol, CoeffEdit::Host(&edit))?.volume)
    }

    /// Forward, the coefficient edit, inverse, merge (see [`Fragmented::process`]).
    ///
    /// The paper's variant 2 on several GPUs: the host only copies and adds; the
    /// per-sample work of the cut and the fold runs on the engines. The cubes go in boxes
    /// ([`Tiling::cube_box`]: runs of cubes along the trace axis), the engines taking the next box
    /// from a shared counter, one host thread per engine (a box is one cube by default:
    /// [`BOX_CUBES`]). For each cube of its box the thread has the cube's raw samples go up: from a
    /// page-locked input ([`Fragmented::volume_buffer`]) by one 3D DMA, checked on the device by
    /// `wp_cut`; otherwise copied by the host into its page-locked buffer slab by slab, each slab's
    /// upload queued as it is copied, checked on the way (no separate pass over the volume either
    /// way). Then it queues the cube: cut (taper, padding), forward, the edit, inverse, and the
    /// fold of the tapered result into the box's partial sum, all on the device, while the next
    /// cube goes up. Identity and threshold edits run on the device (no coefficient transfers); a
    /// host edit brings each cube's coefficients down and up. The box's sum goes down once, behind
    /// its last cube (into a page-locked output, its fresh block straight into place and only the
    /// shared samples into the buffer), and the calling thread adds the boxes into the volume in
    /// box order from those buffers (the same bits for any number of engines, any timing and
    /// either kind of memory), then hands each buffer back to its engine.
    ///
    /// Against cutting and folding every cube on the host (an earlier design), the host moves raw samples
    /// (a copy, no arithmetic) and adds each box once instead of each cube; the output is allocated
    /// zeroed by the OS with transparent huge pages requested, so its first touch in the fold
    /// costs a fault per 2 MB instead of per 4 KB.
    pub fn process_with(&self, vol: &[f32], edit: CoeffEdit) -> Result<Processed> {
        // Zeroed by the OS, untouched until the fold writes it (every sample is set: no zeros needed).
        let mut volume = crate::runtime::memory::zeroed_host(vol.len());
        let kept = self.process_into(vol, edit, &mut volume)?;
        Ok(Processed { volume, kept })
    }

    /// [`Fragmented::process_with`] into a given output (`out`: the volume's shape; its contents
    /// do not matter, every sample is written). Returns the kept count of a threshold. A job of
    /// many volumes reuses its output buffer: fresh pages cost a fault each on first touch
    /// (4 x H200 VM: 44-66 ms for the 126 MB one box's fold touches, against 2 ms into
    /// touched memory).
    pub fn process_into(&self, vol: &[f32], edit: CoeffEdit, out: &mut [f32]) -> Result<Option<u64>> {
        let t0 = std::time::Instant::now();
        let [s0, s1, s2] = self.tiling.shape;
        ensure!(s0 * s1 * s2 > 0, "wave-packet processing: empty volume (shape {s0} x {s1} x {s2})");
        ensure!(vol.len() == s0 * s1 * s2, "wave-packet processing: {} samples for a {s0} x {s1} x {s2} volume ({} expected)",
            vol.len(), s0 * s1 * s2);
        ensure!(out.len() == vol.len(), "wave-packet processing: an output of {} samples for a {s0} x {s1} x {s2} volume",
            out.len());
        if let CoeffEdit::Threshold(thr) = edit {
            super::check_thresholds(&self.frame, thr)?;
        }
        let out = self.pipeline(vol, edit, t0, out);
        crate::multi::mark("returned at", t0);
        match out {
            Ok(v) => Ok(v),
            // A sample that is not finite: the whole-volume check names the first one.
            Err(e) if e.downcast_ref::<NotFinite>().is_some() => {
                validate_volume(vol, self.tiling.shape, "wave-packet processing")?;
                Err(e)
            }
            Err(e) => Err(e),
        }
    }

    fn pipeline(&self, vol: &[f32], edit: CoeffEdit, t0: std::time::Instant, out: &mut [f32]) -> Result<Option<u64>> {
        use std::sync::atomic::AtomicBool;
        let boxes = self.tiling.box_count();
        let (tapers, taper_at) = self.tiling.taper_table();
        let box_max = self.tiling.box_samples_max();
        let threshold = matches!(edit, CoeffEdit::Threshold(_));
        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        // A GPU engine writes each box's fresh block straight into a page-locked output.
        let out_place = crate::runtime::memory::Place::host(out, self.tiling.shape, [0; 3]);
        let direct_out: Vec<bool> = self.engines.iter().map(|e| e.lock().is_ok_and(|e| e.page_locked(out))).collect();
        // ... and adds its boxes' faces itself ([`CubeBox::face`]), each once the fold has reached
        // the face's box: the folding thread writes how far it is into each engine's counter.
        let face_flags: Vec<Option<usize>> = self.engines.iter().zip(&direct_out).map(|(e, &direct)| -> Result<Option<usize>> {
            if !direct {
                return Ok(None);
            }
            let mut e = e.lock().map_err(|_| anyhow::anyhow!("a cube engine panicked"))?;
            Ok(e.face_flag()?.map(|p| p as usize))
        }).collect::<Result<_>>()?;
        // The counter only goes up (an engine's `stop_all` and the folding thread both write it).
        // Every face waits for at most `boxes`: the device compares cyclically (`(int32)(*flag -
        // after) >= 0`), so a larger "let everything through" such as u32::MAX would read as
        // below every wait (a job that failed on a bad sample hung that way).
        let release = |folded: usize| {
            for &p in face_flags.iter().flatten() {
                // SAFETY: an engine's mapped counter, alive as long as the engine.
                unsafe { std::sync::atomic::AtomicU32::from_ptr(p as *mut u32) }.fetch_max(folded.min(boxes) as u32, Ordering::SeqCst);
            }
        };
        // A job that stops lets every face copy through (no stream may wait forever).
        let stop_all = || {
            stop.store(true, Ordering::Relaxed);
            release(boxes);
            self.pools.iter().for_each(CubePool::wake);
        };
        // `SEISGPU_WP_TRACE` (a diagnostic, docs/DEVELOPING.md): the fold's log, and what each
        // engine thread and the folding thread are doing (a job that stalls prints it); nothing is
        // recorded without it.
        let tracing = std::env::var_os("SEISGPU_WP_TRACE").is_some();
        let phases: Vec<Mutex<(&'static str, usize, usize)>> = self.engines.iter().map(|_| Mutex::new(("start", 0, 0))).collect();
        let fold_at = Mutex::new(("start", 0usize, 0usize));
        let fold_phase = |what: &'static str, a: usize, b: usize| {
            if tracing && let Ok(mut f) = fold_at.lock() {
                *f = (what, a, b);
            }
        };
        let result = std::thread::scope(|s| -> Result<Option<u64>> {
            let (tx, rx) = std::sync::mpsc::channel::<BoxResult>();
            for (k, (eng, pool)) in self.engines.iter().zip(&self.pools).enumerate() {
                let (tx, next, stop, stop_all, tapers) = (tx.clone(), &next, &stop, &stop_all, &tapers);
                let out = direct_out[k].then_some(out_place);
                let face_flag = face_flags[k];
                let phase = &phases[k];
                let at = move |what: &'static str, b: usize, t: usize| {
                    if tracing && let Ok(mut p) = phase.lock() {
                        *p = (what, b, t);
                    }
                };
                s.spawn(move || {
                    // The box and cube in hand (for the failure's message).
                    let (mut b, mut t) = (usize::MAX, usize::MAX);
                    let mut raw = pool.raw.lock().ok().and_then(|mut r| r.take());
                    // The box on the device: its number, buffer, its way down (a GPU's) and the
                    // CPU's kept count.
                    type OnDevice = (usize, HostSamples, Option<super::gpu::BoxDown>, Option<u64>);
                    let mut prev: Option<OnDevice> = None;
                    // The buffer of the box being queued. Held out here, as `prev` is, so a failure
                    // gives both back to the pool after the engine is quiet: freeing page-locked
                    // memory (`cuMemFreeHost`) waits for the devices, and one waiting for a face the
                    // fold can no longer reach hung the job.
                    let mut current: Option<HostSamples> = None;
                    let r = (|| -> Result<()> {
                        let mut e = eng.lock().map_err(|_| anyhow::anyhow!("a cube engine panicked"))?;
                        // A GPU copies its cubes straight from a page-locked volume; otherwise the
                        // host copies them into a page-locked buffer first.
                        let direct = e.page_locked(vol);
                        if raw.is_none() && !direct {
                            raw = Some(e.host_raw()?);
                        }
                        // A box goes to the fold once its first slab is down (its status with
                        // it); the folding thread waits for the others.
                        let finish = |e: &Engine, (pb, buf, down, kept): OnDevice| -> Result<()> {
                            let mut kept = kept;
                            let arrival = match down {
                                Some(d) => {
                                    at("waits for the first slab of box", pb, 0);
                                    let status = (|| -> Result<(Option<u64>, bool)> {
                                        if let Some((_, ev)) = d.slabs.first() {
                                            ev.synchronize().context("waiting for a box's partial sum")?;
                                        }
                                        e.box_status(&d, threshold)
                                    })();
                                    let k = match status {
                                        Ok((k, true)) => k,
                                        bad => {
                                            // Every face through first (this box's own may wait
                                            // for the fold), then, once nothing more comes down
                                            // into it, its buffer back to the pool (not freed:
                                            // `cuMemFreeHost` waits for the devices).
                                            stop_all();
                                            for (_, ev) in &d.slabs {
                                                let _ = ev.synchronize();
                                            }
                                            pool.give(buf);
                                            return Err(bad.err().unwrap_or_else(|| NotFinite.into()));
                                        }
                                    };
                                    // Folded slab by slab as they come down (whole boxes: 0.6 ms
                                    // slower on 2 GPUs, docs/notes/scale.md).
                                    let slabs = d.slabs.into_iter().map(|(r, ev)| (r, Some(ev))).collect();
                                    kept = kept.or(k);
                                    Arrival { buf, fresh: d.fresh_written, face: d.face_added, slabs }
                                }
                                None => Arrival { buf, fresh: false, face: false, slabs: [(0..self.tiling.cube_box(pb).extent[0], None)].into() },
                            };
                            let _ = tx.send((pb, k, Ok((arrival, kept))));
                            Ok(())
                        };
                        loop {
                            // The buffer before the box: an engine with a box always has what it needs
                            // to finish it, so the ordered fold never waits on a starved engine.
                            at("takes a box buffer after box", b, t);
                            let Some(part) = pool.take(stop, || e.host_partial(box_max))? else { break };
                            b = next.fetch_add(1, Ordering::Relaxed);
                            if b >= boxes {
                                pool.give(part);
                                break;
                            }
                            let part = current.insert(part);
                            let bx = self.tiling.cube_box(b);
                            let (mut ev, mut kept) = (None, None);
                            for c in bx.cubes.clone() {
                                t = c;
                                let te = std::time::Instant::now();
                                at("stages box, cube", b, t);
                                if let Some(raw) = raw.as_mut() {
                                    // The raw buffer's previous upload is through before it is
                                    // written again (a page-locked volume is only read: no wait).
                                    e.wait_staged()?;
                                    // SAFETY: each slab is written once and not touched again until
                                    // `wait_staged` has seen its upload through.
                                    let finite = self.tiling.copy_raw_staged(vol, t, raw.as_mut_slice()?,
                                        |slab, at| unsafe { e.stage(slab, at) })?;
                                    if !finite {
                                        return Err(NotFinite.into());
                                    }
                                } else {
                                    // SAFETY: `vol` outlives the job, which waits for every engine.
                                    unsafe { e.stage_block(vol, self.tiling.shape, self.tiling.start(t), self.tiling.inside(t)) }?;
                                }
                                crate::multi::mark("cube copied and queued up (each)", te);
                                let mut host = |co: &mut [Complex32]| {
                                    if let CoeffEdit::Host(f) = edit {
                                        f(t, co)
                                    }
                                };
                                let op = match edit {
                                    CoeffEdit::Identity => CubeOp::Identity,
                                    CoeffEdit::Threshold(thr) => CubeOp::Threshold(thr),
                                    CoeffEdit::Host(_) => CubeOp::Host(&mut host),
                                };
                                let job = match face_flag {
                                    Some(_) => self.tiling.cube_in_box_face(b, t, taper_at),
                                    None => None,
                                }.unwrap_or_else(|| self.tiling.cube_in_box(&bx, t, taper_at));
                                // SAFETY: `part` is this engine's page-locked buffer (on a GPU), left
                                // untouched until the box's event completes (the synchronisation in
                                // `finish`); the raw samples were staged above.
                                let raw_in = match raw.as_ref() {
                                    Some(r) => r.as_slice()?,
                                    None => &[],
                                };
                                // SAFETY (`out`): the box's fresh block is written by no host fold
                                // before the box is folded in order, after its event completed.
                                at("queues box, cube", b, t);
                                let (down, kc) = unsafe { e.cube_into_box(&job, tapers, raw_in, op, part.as_mut_slice()?, out) }?;
                                ev = down;
                                if let Some(n) = kc {
                                    kept = Some(kept.unwrap_or(0) + n);
                                }
                                // The previous box is waited for with this box's first cube already
                                // queued: the device computes while its sum goes down (waiting before
                                // queueing left the device idle for the download, ~2-4 ms a box).
                                if let Some(p) = prev.take() {
                                    finish(&*e, p)?;
                                }
                            }
                            prev = current.take().map(|part| (b, part, ev, kept));
                            if stop.load(Ordering::Relaxed) {
                                break;
                            }
                        }
                        if let Some(p) = prev.take() {
                            finish(&*e, p)?;
                        }
                        at("done", b, t);
                        if let Some(t) = e.take_device_times()? {
                            crate::multi::mark_ms("device waits for its first slab (each)", t.first_slab);
                            crate::multi::mark_ms("device in cubes (each)", t.busy);
                            crate::multi::mark_ms("device idle between cubes (each)", t.idle);
                            crate::multi::mark_ms("last box down after its fold (each)", t.last_download);
                        }
                        Ok(())
                    })();
                    if let Err(err) = &r && tracing {
                        eprintln!("trace: engine {k} failed at box {b}, cube {t}: {err:#}");
                    }
                    if r.is_err() {
                        // Nothing may still be going into host memory (the box buffers, the
                        // output) once the job has returned; no face copy may wait for a fold
                        // that stopped.
                        stop_all();
                        if let Ok(mut e) = eng.lock() {
                            let _ = e.quiesce();
                        }
                    }
                    for buf in current.take().into_iter().chain(prev.take().map(|(_, buf, _, _)| buf)) {
                        pool.give(buf);
                    }
                    if let (Some(r), Ok(mut slot)) = (raw, pool.raw.lock()) {
                        *slot = Some(r);
                    }
                    if let Err(err) = r {
                        stop_all();
                        let err = if err.downcast_ref::<NotFinite>().is_some() || b >= boxes {
                            err
                        } else {
                            err.context(format!("device {k} failed on cube {t} at {:?} (box {b})", self.tiling.start(t)))
                        };
                        let _ = tx.send((b, k, Err(err)));
                    }
                });
            }
            drop(tx);
            // The ordered fold ([`OrderedFold`]): each plane takes its boxes in order, a box's
            // slabs as they come down.
            let mut fold = OrderedFold::new(&self.tiling);
            let mut folding = None;
            if tracing {
                fold.log = Some((t0, Vec::new()));
                // A job that stalls says where each thread is, every 10 s.
                let (phases, fold_at) = (&phases, &fold_at);
                let (done, watch) = std::sync::mpsc::channel::<()>();
                folding = Some(done);
                s.spawn(move || {
                    let mut waited = 0;
                    // Until the fold is through (its sender dropped): the job returns at once.
                    while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = watch.recv_timeout(std::time::Duration::from_secs(10)) {
                        waited += 10;
                        let f = fold_at.lock().map(|f| *f).unwrap_or(("?", 0, 0));
                        eprintln!("trace: watchdog {waited} s: fold thread {} ({} {})", f.0, f.1, f.2);
                        for (k, p) in phases.iter().enumerate() {
                            if let Ok(p) = p.lock() {
                                eprintln!("trace: watchdog: engine {k} {} {} {}", p.0, p.1, p.2);
                            }
                        }
                    }
                });
            }
            let mut got = 0usize;
            let mut kept: Option<u64> = Some(0);
            let mut failure: Option<(usize, anyhow::Error)> = None;
            let fail = |failure: &mut Option<(usize, anyhow::Error)>, b: usize, e: anyhow::Error| {
                stop_all();
                // The lowest box's failure (deterministic when several fail).
                if failure.as_ref().is_none_or(|(fb, _)| b < *fb) {
                    *failure = Some((b, e));
                }
            };
            // A box that came in: to the fold (after a failure: back to its pool once nothing
            // more comes down into it).
            let accept = |fold: &mut OrderedFold, failure: &mut Option<(usize, anyhow::Error)>, got: &mut usize,
                kept: &mut Option<u64>, (b, k, r): BoxResult| match r {
                Err(e) => fail(failure, b, e),
                Ok((a, n)) => {
                    *kept = kept.zip(n).map(|(a, b)| a + b);
                    *got += 1;
                    if let Some((t0, log)) = fold.log.as_mut() {
                        log.push(format!("{:7.2} ms: box {b} in", t0.elapsed().as_secs_f64() * 1e3));
                    }
                    if *got == 1 {
                        crate::multi::mark("first box at", t0);
                    }
                    if *got == boxes {
                        crate::multi::mark("last box at", t0);
                    }
                    if failure.is_some() {
                        a.settle();
                        self.pools[k].give(a.buf);
                    } else {
                        fold.add(b, k, a);
                    }
                }
            };
            let mut released = 0;
            loop {
                fold_phase("loop top, boxes in / folded", got, fold.boxes_done);
                if fold.prefix != released {
                    released = fold.prefix;
                    release(released);
                }
                // Every box already in first, so the boxes arriving together fold in the same
                // passes (taking one message per pass, on 4 GPUs at 480^3 the last four boxes'
                // first slabs folded one pass after another, ~1 ms each).
                while let Ok(m) = rx.try_recv() {
                    accept(&mut fold, &mut failure, &mut got, &mut kept, m);
                }
                if failure.is_none() {
                    fold_phase("step, boxes in / folded", got, fold.boxes_done);
                    match fold.step(out, &self.pools) {
                        Ok(true) => continue,
                        Ok(false) => {}
                        Err((b, e)) => fail(&mut failure, b, e),
                    }
                }
                // Nothing down to fold: a due slab still coming down (poll for it, taking boxes
                // meanwhile: a device may be waiting for the fold, [`OrderedFold::step`]), else
                // the next box.
                if failure.is_none() && fold.waiting() {
                    match rx.recv_timeout(std::time::Duration::from_micros(20)) {
                        Ok(m) => accept(&mut fold, &mut failure, &mut got, &mut kept, m),
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => std::thread::sleep(std::time::Duration::from_micros(20)),
                    }
                    continue;
                }
                fold_phase("waits for a box, boxes in / folded", got, fold.boxes_done);
                match rx.recv_timeout(std::time::Duration::from_secs(1)) {
                    Ok(m) => accept(&mut fold, &mut failure, &mut got, &mut kept, m),
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    // Every engine is done (the channel is closed) and nothing due is left.
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
            release(boxes);
            drop(folding);
            let (finished, due, busy) = (fold.finished(), fold.boxes_done, fold.busy);
            if let Some((_, log)) = fold.log.take() {
                for l in &log[log.len().saturating_sub(40)..] {
                    eprintln!("trace: fold {l}");
                }
                eprintln!("trace: host fold {} passes, {:.2} ms busy, done at {:.2} ms", fold.passes, busy * 1e3,
                    t0.elapsed().as_secs_f64() * 1e3);
            }
            fold.drain(&self.pools);
            crate::multi::mark("folded at", t0);
            if let Some(since) = std::time::Instant::now().checked_sub(std::time::Duration::from_secs_f64(busy)) {
                crate::multi::mark("host fold busy", since);
            }
            if let Some((_, e)) = failure {
                return Err(e);
            }
            ensure!(finished, "{due} of {boxes} boxes came back");
            Ok(if threshold { kept } else { None })
        });
        if result.is_err() {
            // Buffers of a failed job that did not come back are made again next time.
            self.pools.iter().for_each(CubePool::recount);
        }
        result
    }

    /// Runs `cube(engine, t)` for every cube on all engines and adds the tapered results into the
    /// volume in cube order (overlaps sum in a fixed order, so the volume is the same bit for bit
    /// for any number of engines; only the out-of-order cubes wait in memory).
    fn accumulate_cubes<F: Fn(&mut Engine, usize) -> Result<Vec<f32>> + Sync>(&self, cube: F) -> Result<Vec<f32>> {
        let ts: Vec<usize> = (0..self.tiling.count()).collect();
        let len: usize = self.tiling.shape.iter().product();
        std::thread::scope(|s| {
            // The zero volume is made on another thread, its pages written in parallel, while the
            // engines transform the first cubes: left to the folds, the first touch of its pages
            // (442 MB at 480^3) fell on the last cubes' folds, a serial tail after the devices finish.
            let zeros = s.spawn(move || {
                let t = std::time::Instant::now();
                let mut v = Vec::new();
                rayon::iter::repeat_n(0.0f32, len).collect_into_vec(&mut v);
                crate::multi::mark("output zeroed (beside the devices)", t);
                v
            });
            let mut zeros = Some(zeros);
            let out = crate::multi::fold_on_devices(&self.engines, &ts, None::<Vec<f32>>, |eng, _, &t| {
                let mut e = eng.lock().map_err(|_| anyhow::anyhow!("a cube engine panicked"))?;
                cube(&mut e, t).map_err(|err| err.context(format!("cube {t} at {:?}", self.tiling.start(t))))
            }, |out, t, c| {
                if out.is_none() {
                    let v = zeros.take().context("the output volume")?.join().map_err(|_| anyhow::anyhow!("zeroing the volume panicked"))?;
                    *out = Some(v);
                }
                let Some(out) = out.as_mut() else { anyhow::bail!("no output volume") };
                self.tiling.accumulate(out, t, &c);
                Ok(())
            })
            .map_err(anyhow::Error::from)?;
            match (out, zeros) {
                (Some(v), _) => Ok(v),
                // No cube (an empty tiling): the zero volume itself.
                (None, Some(z)) => z.join().map_err(|_| anyhow::anyhow!("zeroing the volume panicked")),
                (None, None) => anyhow::bail!("no output volume"),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cubes_cut_from_their_rows_equal_cubes_cut_from_the_volume() {
        let shape = [70, 45, 90];
        let tiling = Tiling::new(shape, 32, 8).unwrap();
        let vol: Vec<f32> = (0..shape.iter().product::<usize>()).map(|i| ((i * 7919) % 1000) as f32 * 1e-3 - 0.5).collect();
        let row = shape[1] * shape[2];
        let n = tiling.count();
        // Blocks of cubes as MPI ranks take them: each block's rows hold each of its cubes.
        for ranks in [1, 2, 3, 5] {
            for r in 0..ranks {
                let cubes = crate::multi::block_share(n, ranks, r);
                let rows = tiling.rows_of(cubes.clone());
                let slab = &vol[rows.start * row..rows.end * row];
                for t in cubes {
                    assert_eq!(tiling.extract_from_rows(slab, rows.start, t), tiling.extract(&vol, t), "cube {t}, {ranks} ranks");
                }
            }
        }
        assert_eq!(tiling.rows_of(0..n), 0..shape[0]);
        assert_eq!(tiling.rows_of(3..3), 0..0);
    }

    #[test]
    fn cubes_added_into_slabs_equal_the_volume_rows() {
        // What an MPI rank does with the cubes (its own and the planes others send): every cube
        // that reaches its rows, in cube order, into a zeroed slab. The same bits as the volume.
        let shape = [70, 45, 90];
        let tiling = Tiling::new(shape, 32, 8).unwrap();
        let c = tiling.cube;
        let n = tiling.count();
        let cubes: Vec<Vec<f32>> = (0..n).map(|t| (0..c * c * c).map(|i| (((i + 31 * t) * 7919) % 1000) as f32 * 1e-3 - 0.5).collect())
            .collect();
        let mut vol = vec![0.0f32; shape.iter().product()];
        for (t, cube) in cubes.iter().enumerate() {
            tiling.accumulate(&mut vol, t, cube);
        }
        let row = shape[1] * shape[2];
        for ranks in [1, 2, 3, 5] {
            for r in 0..ranks {
                let rows = tiling.rows_of(crate::multi::block_share(n, ranks, r));
                let mut slab = vec![0.0f32; rows.len() * row];
                for (t, cube) in cubes.iter().enumerate() {
                    let own = tiling.rows_of(t..t + 1);
                    let (lo, hi) = (own.start.max(rows.start), own.end.min(rows.end));
                    if lo < hi {
                        let first = tiling.start(t)[0];
                        tiling.accumulate_rows(&mut slab, rows.start, t, lo..hi, &cube[(lo - first) * c * c..(hi - first) * c * c]);
                    }
                }
                let want = &vol[rows.start * row..rows.end * row];
                assert!(slab.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()), "{ranks} ranks, rank {r}");
            }
        }
    }

    #[test]
    fn scale_raw_copy_and_cut_equal_extract_and_check_the_input() {
        // Cubes with padding on every axis (the volume is no multiple of anything) and slabs.
        let t = Tiling::new([45, 23, 70], 32, 8).unwrap();
        assert!(t.count() > 2);
        let vol: Vec<f32> = (0..45 * 23 * 70).map(|i| ((i * 7919) % 1000) as f32 * 1e-3 - 0.5).collect();
        let (tapers, at) = t.taper_table();
        let mut raw = vec![f32::NAN; 32 * 32 * 32];
        let mut cube = vec![f32::NAN; 32 * 32 * 32];
        for b in 0..t.box_count() {
            let bx = t.cube_box(b);
            for c in bx.cubes.clone() {
                let n = t.inside(c).iter().product::<usize>();
                let mut seen = vec![0u8; n];
                let ok = t.copy_raw_staged(&vol, c, &mut raw, |slab, at| {
                    seen[at..at + slab.len()].iter_mut().for_each(|s| *s += 1);
                    Ok(())
                }).unwrap();
                assert!(ok && seen.iter().all(|&s| s == 1), "cube {c}: every sample staged once");
                let job = t.cube_in_box(&bx, c, at);
                job.check(tapers.len(), t.box_samples_max()).unwrap();
                cube.fill(f32::NAN);
                job.cut_host(&tapers, &raw, &mut cube);
                let want = t.extract(&vol, c);
                assert!(cube.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "cube {c}");
            }
        }
        let mut bad = vol.clone();
        bad[(30 * 23 + 4) * 70 + 66] = f32::INFINITY;
        let hits: Vec<bool> = (0..t.count()).map(|c| !t.copy_raw_staged(&bad, c, &mut raw, |_, _| Ok(())).unwrap()).collect();
        assert!(hits.iter().any(|&h| h), "some cube sees the bad sample");
        assert!(t.copy_raw_staged(&vol, 0, &mut raw[..10], |_, _| Ok(())).is_err(), "a short buffer is refused");
    }

    /// A tiling of boxes in several x0 rows, random partial sums for its boxes (seeded), the
    /// generator for what the test draws next, and the volume of their in-order whole box folds.
    fn random_box_sums(seed: u64) -> (Tiling, rand_chacha::ChaCha8Rng, Vec<Vec<f32>>, Vec<f32>) {
        use rand::{RngExt, SeedableRng};
        let t = Tiling::new([45, 23, 70], 16, 4).unwrap();
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let partials: Vec<Vec<f32>> = (0..t.box_count()).map(|b| {
            let [e0, e1, e2] = t.cube_box(b).extent;
            (0..e0 * e1 * e2).map(|_| r.random_range(-1.0..1.0)).collect()
        }).collect();
        let mut want = vec![f32::NAN; t.shape.iter().product()];
        for (b, p) in partials.iter().enumerate() {
            t.fold_box(&mut want, b, p).unwrap();
        }
        (t, r, partials, want)
    }

    /// The ordered fold by slabs: boxes arriving in a shuffled order, each in slabs of rows
    /// (some with their fresh block already in the volume), give the volume of the in-order whole
    /// box folds bit for bit; a box waits while an earlier box covering its planes is missing.
    #[test]
    fn scale_slab_folds_in_any_arrival_order_equal_the_box_order() {
        use rand::{seq::SliceRandom, RngExt};
        let (t, mut r, partials, want) = random_box_sums(9);
        let boxes = t.box_count();
        for fresh_written in [false, true] {
            let mut got = vec![f32::NAN; want.len()];
            if fresh_written {
                // As a GPU does: each box's fresh block straight into the volume.
                for (b, p) in partials.iter().enumerate() {
                    let bx = t.cube_box(b);
                    let ([_, e1, e2], o) = (bx.extent, bx.origin);
                    let Some((at, ext)) = bx.fresh() else { continue };
                    for x0 in at[0]..at[0] + ext[0] {
                        for x1 in at[1]..at[1] + ext[1] {
                            for x2 in at[2]..at[2] + ext[2] {
                                got[((o[0] + x0) * t.shape[1] + o[1] + x1) * t.shape[2] + o[2] + x2] = p[(x0 * e1 + x1) * e2 + x2];
                            }
                        }
                    }
                }
            }
            let pools: Vec<CubePool> = (0..2).map(|_| CubePool::default()).collect();
            let mut fold = OrderedFold::new(&t);
            let mut order: Vec<usize> = (0..boxes).collect();
            order.shuffle(&mut r);
            let mut held_back = 0;
            for (i, &b) in order.iter().enumerate() {
                let e0 = t.cube_box(b).extent[0];
                let cut = r.random_range(1..=e0);
                let slabs = [0..cut, cut..e0].into_iter().filter(|s| !s.is_empty()).map(|s| (s, None)).collect();
                fold.add(b, i % 2, Arrival { buf: HostSamples::Pageable(partials[b].clone()), fresh: fresh_written, face: false, slabs });
                let before = fold.boxes_done;
                while fold.step(&mut got, &pools).unwrap() {}
                if fold.boxes_done == before {
                    held_back += 1;
                }
            }
            assert!(fold.finished(), "{} of {boxes} boxes folded", fold.boxes_done);
            assert!(held_back > 0, "the shuffle held no box back");
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "fresh blocks written first: {fresh_written}");
            assert_eq!(pools.iter().map(|p| p.state.lock().unwrap().0.len()).sum::<usize>(), boxes, "every buffer given back");
        }
    }

    /// The device's face wait (`cuStreamWaitValue32`, GEQ) is cyclic: it passes once
    /// `(int32)(counter - after) >= 0`. The counter's values (the boxes folded from box 0 on, and
    /// the box count once a job stops) let each face through exactly when its earlier rows are
    /// folded, and the stop value lets every face through; u32::MAX would let none (a job
    /// that failed hung that way).
    #[test]
    fn scale_face_counter_opens_each_face_once_its_rows_are_folded() {
        let passes = |counter: u32, after: usize| (counter.wrapping_sub(after as u32) as i32) >= 0;
        let t = Tiling::new([45, 23, 70], 16, 4).unwrap();
        let boxes = t.box_count();
        for b in (0..boxes).filter(|&b| t.cube_box(b).face().is_some()) {
            let after = t.row_start(b);
            for folded in 0..=boxes {
                assert_eq!(passes(folded as u32, after), folded >= after, "box {b}, {folded} folded");
            }
            assert!(!passes(u32::MAX, after), "box {b}: u32::MAX would open it");
        }
    }

    /// The faces: boxes arriving in any order, each with its fresh block written as a GPU
    /// writes it and, where it has a face ([`CubeBox::face`]), the face written as the box's sum
    /// plus the volume's samples there once the fold has reached the box's x0 row, give the
    /// in-order whole box folds bit for bit.
    #[test]
    fn scale_faces_added_by_the_device_give_the_box_order() {
        use rand::{seq::SliceRandom, RngExt};
        let (t, mut r, partials, want) = random_box_sums(11);
        let boxes = t.box_count();
        let faces = (0..boxes).filter(|&b| t.cube_box(b).face().is_some()).count();
        assert!(faces > boxes / 2, "{faces} of {boxes} boxes have a face");
        let [_, s1, s2] = t.shape;
        let mut got = vec![f32::NAN; want.len()];
        let pools: Vec<CubePool> = (0..2).map(|_| CubePool::default()).collect();
        let mut fold = OrderedFold::new(&t);
        let mut order: Vec<usize> = (0..boxes).collect();
        order.shuffle(&mut r);
        let mut i = 0;
        while !order.is_empty() {
            // The next box in the shuffle that may go: a face waits for the fold.
            let k = order.iter().position(|&b| t.cube_box(b).face().is_none() || fold.prefix >= t.row_start(b))
                .expect("no box may go: the faces wait for each other");
            let b = order.remove(k);
            let bx = t.cube_box(b);
            let ([_, e1, e2], o) = (bx.extent, bx.origin);
            let at = |x: [usize; 3]| ((o[0] + x[0]) * s1 + o[1] + x[1]) * s2 + o[2] + x[2];
            let p = &partials[b];
            if let Some((f0, fe)) = bx.face() {
                for x0 in f0[0]..f0[0] + fe[0] {
                    for x1 in f0[1]..f0[1] + fe[1] {
                        for x2 in f0[2]..f0[2] + fe[2] {
                            let g = at([x0, x1, x2]);
                            assert!(got[g].is_finite(), "box {b}: its face read before the fold reached it");
                            got[g] = p[(x0 * e1 + x1) * e2 + x2] + got[g];
                        }
                    }
                }
            }
            let view = if bx.face().is_some() { bx.face_folded() } else { bx.clone() };
            if let Some((f0, fe)) = bx.fresh() {
                for x0 in f0[0]..f0[0] + fe[0] {
                    for x1 in f0[1]..f0[1] + fe[1] {
                        for x2 in f0[2]..f0[2] + fe[2] {
                            got[at([x0, x1, x2])] = p[(x0 * e1 + x1) * e2 + x2];
                        }
                    }
                }
            }
            assert_eq!(view.fresh().map(|(a, e)| a[0] + e[0]), bx.fresh().map(|(a, e)| a[0] + e[0]));
            let e0 = bx.extent[0];
            let cut = r.random_range(1..=e0);
            let slabs = [0..cut, cut..e0].into_iter().filter(|s| !s.is_empty()).map(|s| (s, None)).collect();
            fold.add(b, i % 2, Arrival { buf: HostSamples::Pageable(p.clone()), fresh: true, face: bx.face().is_some(), slabs });
            i += 1;
            while fold.step(&mut got, &pools).unwrap() {}
        }
        assert!(fold.finished(), "{} of {boxes} boxes folded", fold.boxes_done);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got), bits(&want));
    }

    /// Boxes take every cube once, in order, at most [`Tiling::box_cubes`] along x2 (long traces
    /// split), and the box folds (device order: cubes into the box's sum, boxes into the volume)
    /// give the cube-by-cube fold's volume up to rounding; for one cube per box (the default), 3
    /// and 4.
    #[test]
    fn scale_boxes_cover_the_cubes_and_fold_like_cubes() {
        for k in [BOX_CUBES, 3, 4] {
            boxes_cover_the_cubes_and_fold_like_cubes(k);
        }
        assert!(Tiling::new([45, 23, 300], 32, 8).unwrap().with_box_cubes(0).is_err());
    }

    fn boxes_cover_the_cubes_and_fold_like_cubes(k: usize) {
        let t = Tiling::new([45, 23, 300], 32, 8).unwrap().with_box_cubes(k).unwrap();
        assert!(t.starts[2].len() > t.box_cubes(), "long traces: {:?}", t.starts[2]);
        let mut next = 0;
        for b in 0..t.box_count() {
            let bx = t.cube_box(b);
            assert_eq!(bx.cubes.start, next, "box {b}");
            assert!(!bx.cubes.is_empty() && bx.cubes.len() <= k);
            next = bx.cubes.end;
            let o = bx.origin;
            for c in bx.cubes.clone() {
                let (st, ins) = (t.start(c), t.inside(c));
                assert!(st[0] == o[0] && st[1] == o[1] && st[2] >= o[2] && st[2] + ins[2] <= o[2] + bx.extent[2], "box {b} cube {c}");
                assert_eq!([ins[0], ins[1]], [bx.extent[0], bx.extent[1]]);
            }
        }
        assert_eq!(next, t.count());
        // Random cubes (the inverse's outputs) folded both ways.
        use rand::{RngExt, SeedableRng};
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(9);
        let cubes: Vec<Vec<f32>> = (0..t.count()).map(|_| (0..32 * 32 * 32).map(|_| r.random_range(-1.0..1.0)).collect()).collect();
        let len = t.shape.iter().product();
        let mut want = vec![0.0f32; len];
        (0..t.count()).for_each(|c| t.accumulate(&mut want, c, &cubes[c]));
        let (tapers, at) = t.taper_table();
        // Poisoned: every sample must be set by its first box and added by the later ones.
        let mut got = vec![f32::NAN; len];
        let mut partial = vec![f32::NAN; t.box_samples_max()];
        for b in 0..t.box_count() {
            let bx = t.cube_box(b);
            for c in bx.cubes.clone() {
                t.cube_in_box(&bx, c, at).fold_host(&tapers, &cubes[c], &mut partial);
            }
            t.fold_box(&mut got, b, &partial).unwrap();
        }
        let err = crate::bench::rel_l2(&got, &want);
        assert!(err < 1e-6, "{k} cubes per box: box folds vs cube folds: rel L2 {err:.2e}");
        // A GPU's direct output: each box's fresh block copied into the volume, then only the
        // covered shell added from a partial sum whose fresh block is poisoned. Fresh block and
        // shell cover every sample of the box once; the volume is the same bit for bit.
        let mut direct = vec![f32::NAN; len];
        let [_, s1, s2] = t.shape;
        for b in 0..t.box_count() {
            let bx = t.cube_box(b);
            partial.fill(f32::NAN);
            for c in bx.cubes.clone() {
                t.cube_in_box(&bx, c, at).fold_host(&tapers, &cubes[c], &mut partial);
            }
            let [e0, e1, e2] = bx.extent;
            let mut seen = vec![0u8; e0 * e1 * e2];
            let blocks = bx.fresh().into_iter().chain(bx.covered_blocks());
            for (i, (st, ex)) in blocks.enumerate() {
                for x0 in st[0]..st[0] + ex[0] {
                    for x1 in st[1]..st[1] + ex[1] {
                        for x2 in st[2]..st[2] + ex[2] {
                            let p = (x0 * e1 + x1) * e2 + x2;
                            seen[p] += 1;
                            if i == 0 && bx.fresh().is_some() {
                                let o = bx.origin;
                                direct[((o[0] + x0) * s1 + o[1] + x1) * s2 + o[2] + x2] = partial[p];
                                partial[p] = f32::NAN;
                            }
                        }
                    }
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "box {b}: fresh block and covered shell partition the box");
            if bx.fresh().is_some() {
                t.add_covered(&mut direct, b, &partial).unwrap();
            } else {
                t.fold_box(&mut direct, b, &partial).unwrap();
            }
        }
        assert!(direct.iter().zip(&got).all(|(a, b)| a.to_bits() == b.to_bits()), "{k} cubes per box: direct output differs");
    }

    /// A 45 x 23 x 70 volume (not a multiple of its 32^3 cubes) and its tiling on one and on three
    /// CPU engines.
    fn one_and_three_engines() -> (Vec<f32>, Fragmented, Fragmented) { in_boxes_of(BOX_CUBES) }

    /// As [`one_and_three_engines`], the cubes processed in boxes of up to `k` along x2 (3 per
    /// trace here).
    fn in_boxes_of(k: usize) -> (Vec<f32>, Fragmented, Fragmented) {
        let shape = [45, 23, 70];
        let params = Params { eps: 1e-6, ..Params::default() };
        let tiling = Tiling::new(shape, 32, 8).unwrap().with_box_cubes(k).unwrap();
        let vol: Vec<f32> = (0..shape.iter().product::<usize>()).map(|i| ((i * 104729) % 997) as f32 * 1e-3 - 0.5).collect();
        let one = Fragmented::on_backends(&[Backend::Cpu], tiling.clone(), &params).unwrap();
        let three = Fragmented::on_backends(&[Backend::Cpu, Backend::Cpu, Backend::Cpu], tiling, &params).unwrap();
        (vol, one, three)
    }

    #[test]
    fn scale_process_is_bit_exact_over_engines_repeatable_and_names_bad_samples() {
        for k in [BOX_CUBES, 2] {
            process_is_bit_exact_over_engines_repeatable_and_names_bad_samples(k);
        }
    }

    fn process_is_bit_exact_over_engines_repeatable_and_names_bad_samples(k: usize) {
        let (vol, one, three) = in_boxes_of(k);
        assert_eq!(one.tiling.box_count() < one.tiling.count(), k > 1, "{k} cubes per box");
        let edit = |t: usize, c: &mut [Complex32]| c.iter_mut().for_each(|x| *x *= 0.5 + 0.01 * t as f32);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let p1 = one.process(&vol, edit).unwrap();
        let p3 = three.process(&vol, edit).unwrap();
        assert_eq!(bits(&p1), bits(&p3), "3 engines differ from 1");
        // Again, on the kept buffers; and the serial reference: extract, roundtrip, add in cube order.
        assert_eq!(bits(&three.process(&vol, edit).unwrap()), bits(&p3), "not repeatable");
        let mut e = Engine::new(&Backend::Cpu, one.frame.clone()).unwrap();
        let mut want = vec![0.0f32; vol.len()];
        let (tapers, at) = one.tiling.taper_table();
        let mut partial = vec![0.0f32; one.tiling.box_samples_max()];
        for b in 0..one.tiling.box_count() {
            let bx = one.tiling.cube_box(b);
            for t in bx.cubes.clone() {
                let c = e.roundtrip(&one.tiling.extract(&vol, t), &mut |c| edit(t, c)).unwrap();
                one.tiling.cube_in_box(&bx, t, at).fold_host(&tapers, &c, &mut partial);
            }
            one.tiling.fold_box(&mut want, b, &partial).unwrap();
        }
        assert_eq!(bits(&want), bits(&p1), "differs from the serial box loop");
        let mut bad = vol.clone();
        bad[(30 * 23 + 4) * 70 + 66] = f32::NAN;
        let err = three.process(&bad, edit).unwrap_err().to_string();
        assert!(err.contains("sample 66 of trace (30, 4) is not finite"), "{err}");
        // The failed job's buffers are made again: the next job still runs.
        assert_eq!(bits(&three.process(&vol, edit).unwrap()), bits(&p3));
        let err = three.process(&vol[1..], edit).unwrap_err().to_string();
        assert!(err.contains("samples for a 45 x 23 x 70 volume"), "{err}");
    }

    /// The device-side edits on CPU engines: the identity is the host no-op closure, the
    /// threshold the host closure running the same test, bit for bit, with the same kept count,
    /// on 1 and 3 engines; bad thresholds are refused with their parameter named.
    #[test]
    fn scale_device_edits_equal_the_host_closures() {
        use crate::wavepacket::{below_threshold, CoeffEdit};
        use std::sync::atomic::AtomicU64;
        let (vol, one, three) = one_and_three_engines();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        let noop = one.process(&vol, |_, _| {}).unwrap();
        for f in [&one, &three] {
            let p = f.process_with(&vol, CoeffEdit::Identity).unwrap();
            assert_eq!(bits(&p.volume), bits(&noop), "identity differs from the host no-op ({} engines)", f.engines());
            assert!(p.kept.is_none());
        }
        // Per-box thresholds around the coefficients' sizes, box 0 kept whole, one box dropped.
        let frame = one.frame.clone();
        let mut thr: Vec<f32> = (0..frame.box_count()).map(|b| 0.002 * (1 + b % 7) as f32).collect();
        thr[0] = 0.0;
        thr[frame.box_count() / 2] = 1e30;
        let counted = AtomicU64::new(0);
        let host = one.process(&vol, |_, c| {
            let mut n = 0;
            let mut b = 0;
            for j in 0..frame.scales() {
                for bj in 0..frame.geom.boxes[j] as usize {
                    for v in &mut c[frame.box_range(j, bj)] {
                        if below_threshold(v.re, v.im, thr[b]) {
                            *v = Complex32::default();
                        } else {
                            n += 1;
                        }
                    }
                    b += 1;
                }
            }
            counted.fetch_add(n, Ordering::Relaxed);
        }).unwrap();
        let counted = counted.into_inner();
        assert!(counted > 0 && counted < one.total() as u64, "the thresholds keep some: {counted} of {}", one.total());
        for f in [&one, &three] {
            let p = f.process_with(&vol, CoeffEdit::Threshold(&thr)).unwrap();
            assert_eq!(bits(&p.volume), bits(&host), "threshold differs from the host closure ({} engines)", f.engines());
            assert_eq!(p.kept, Some(counted));
        }
        let short = one.process_with(&vol, CoeffEdit::Threshold(&thr[1..])).err().unwrap().to_string();
        assert!(short.contains("thresholds") && short.contains("boxes"), "{short}");
        let mut neg = thr.clone();
        neg[3] = -1.0;
        let e = one.process_with(&vol, CoeffEdit::Threshold(&neg)).err().unwrap().to_string();
        assert!(e.contains("box 3's threshold -1"), "{e}");
        neg[3] = f32::NAN;
        assert!(one.process_with(&vol, CoeffEdit::Threshold(&neg)).is_err());
    }

    /// The threshold's test and [`crate::wavepacket::threshold_host`] on chosen coefficients:
    /// |c| = t is kept (the test is strict), a hair under is dropped, zeros and -0.0 drop under
    /// any t > 0 and stay under t = 0, NaN is kept; boxes use their own threshold.
    #[test]
    fn threshold_test_and_host_threshold() {
        use crate::wavepacket::{below_threshold, threshold_host};
        assert!(!below_threshold(3.0, 4.0, 5.0));
        assert!(below_threshold(3.0, 4.0, 5.000001));
        assert!(!below_threshold(-5.0, 0.0, 5.0) && !below_threshold(0.0, -5.0, 5.0));
        assert!(below_threshold(0.0, -0.0, 1e-30) && !below_threshold(0.0, -0.0, 0.0));
        assert!(!below_threshold(f32::NAN, 0.0, 1.0) && !below_threshold(0.0, f32::NAN, f32::MAX));
        // Tiny and huge magnitudes: no underflow or overflow in the squares (f64).
        assert!(below_threshold(1e-30, 1e-30, 2e-30) && !below_threshold(3e38, 3e38, 3e38));
        let frame = Frame::new(16, &Params::default()).unwrap();
        let thr: Vec<f32> = (0..frame.box_count()).map(|b| (b % 5) as f32 * 0.25).collect();
        let mut c: Vec<Complex32> = (0..frame.total).map(|i| Complex32::new(((i * 37) % 101) as f32 / 100.0 - 0.5,
            ((i * 53) % 89) as f32 / 88.0 - 0.5)).collect();
        let orig = c.clone();
        let kept = threshold_host(&frame, &thr, &mut c);
        let mut want = 0u64;
        let mut b = 0;
        for j in 0..frame.scales() {
            for bj in 0..frame.geom.boxes[j] as usize {
                for i in frame.box_range(j, bj) {
                    let (re, im, t) = (orig[i].re as f64, orig[i].im as f64, thr[b] as f64);
                    let below = re.powi(2) + im.powi(2) < t.powi(2);
                    assert_eq!(c[i], if below { Complex32::default() } else { orig[i] }, "coefficient {i}, box {b}");
                    want += !below as u64;
                }
                b += 1;
            }
        }
        assert_eq!(kept, want);
    }

    /// Host phases of `process` at the scaling workload's size (480^3, cubes of 256), without any
    /// device: `cargo test --release -p seisgpu-host --lib host_phase_times -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn host_phase_times() {
        let shape = [480, 480, 480];
        let t = Tiling::new(shape, 256, 32).unwrap();
        let vol = crate::wavepacket::apps::synthetic_cube(shape, 0.004, 25.0);
        let ms = |f: &mut dyn FnMut()| {
            let mut best = f64::MAX;
            for _ in 0..3 {
                let s = std::time::Instant::now();
                f();
                best = best.min(s.elapsed().as_secs_f64() * 1e3);
            }
            best
        };
        let per_sample = ms(&mut || assert!(vol.par_iter().position_first(|v| !v.is_finite()).is_none()));
        let chunked = ms(&mut || validate_volume(&vol, shape, "v").unwrap());
        let mut sink = 0.0f32;
        let fresh = ms(&mut || {
            let c = t.extract(&vol, 7);
            sink += c[12345];
        });
        let mut buf = vec![0.0f32; 256 * 256 * 256];
        let kept = ms(&mut || assert!(t.copy_raw_staged(&vol, 7, &mut buf, |_, _| Ok(())).unwrap()));
        let mut out = vec![0.0f32; vol.len()];
        let fold = ms(&mut || t.accumulate(&mut out, 7, &buf));
        let partial = vec![0.5f32; t.box_samples_max()];
        let fold_box = ms(&mut || t.fold_box(&mut out, 3, &partial).unwrap());
        let add_covered = ms(&mut || t.add_covered(&mut out, 3, &partial).unwrap());
        let zero = ms(&mut || {
            let mut v = Vec::new();
            rayon::iter::repeat_n(0.0f32, vol.len()).collect_into_vec(&mut v);
            sink += v[777];
        });
        println!("{} threads: validate per sample {per_sample:.1} ms, chunked {chunked:.1} ms; cube extraction into a fresh \
            Vec {fresh:.1} ms, raw copy into a kept buffer (checked, slabs) {kept:.1} ms; fold of one cube {fold:.1} ms, \
            of one box {fold_box:.1} ms (its covered samples only {add_covered:.1} ms); zeroed output {zero:.1} ms ({sink})", rayon::current_num_threads());
    }

    #[test]
    fn tapers_square_sum_to_one() {
        let t = Tiling::new([300, 40, 90], 64, 16).unwrap();
        assert!(t.count() > 1);
        for a in 0..3 {
            for g in 0..t.shape[a] {
                let mut s = 0.0f32;
                for (k, &st) in t.starts[a].iter().enumerate() {
                    if g >= st && g < st + t.cube {
                        s += t.taper(a, k, g - st).powi(2);
                    }
                }
                assert!((s - 1.0).abs() < 1e-5, "axis {a} sample {g}: {s}");
            }
        }
    }

    #[test]
    fn fragmented_transform_is_tight() {
        use rand::{RngExt, SeedableRng};
        let shape = [40, 23, 70];
        let params = Params { eps: 1e-6, ..Params::default() };
        let f = Fragmented::new(&Backend::Cpu, shape, 32, 8, &params, false).unwrap();
        assert!(f.tiling.count() > 1);
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(4);
        let vol: Vec<f32> = (0..shape.iter().product()).map(|_| r.random_range(-1.0..1.0)).collect();
        let c = f.forward(&vol).unwrap();
        let back = f.inverse(&c).unwrap();
        let err = crate::bench::rel_l2(&back, &vol);
        assert!(err < 1e-5, "fragmented inverse(forward) error {err:.2e}");
        let ev: f64 = vol.iter().map(|&v| (v as f64).powi(2)).sum();
        let ec: f64 = c.iter().map(|v| v.norm_sqr() as f64).sum();
        assert!((ec / ev - 1.0).abs() < 1e-4, "energy ratio {}", ec / ev);
    }
}

#[cfg(test)]
mod fold_speed {
    //! The host fold on the machine at hand (`--ignored --nocapture`): whole boxes against
    //! 32-plane slabs, the global pool against smaller ones, passes back to back and with the
    //! pool gone idle between them, and (with a GPU) from write-combined and cached page-locked
    //! buffers.
    use super::*;

    fn passes(t: &Tiling, vol: &mut [f32], parts: &[&[f32]], slab: usize, gap: bool) -> (f64, usize) {
        let mut busy = 0.0;
        let mut n = 0;
        for (b, p) in parts.iter().enumerate() {
            let e0 = t.cube_box(b).extent[0];
            for r in super::super::gpu::slabs(e0, slab) {
                if gap {
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
                let t0 = std::time::Instant::now();
                t.fold_rows(vol, &[FoldRows { b, partial: p, set_fresh: false, rows: r, face_folded: false }]).unwrap();
                busy += t0.elapsed().as_secs_f64();
                n += 1;
            }
        }
        (busy, n)
    }

    /// The tail of 480^3 on 4 GPUs with the faces on the devices: the last x0 row's four boxes
    /// arrive together and the host adds only the x1 rows and x2 samples they share, 32-plane
    /// slab by slab, the four boxes' slabs in one pass (as the ordered fold takes them).
    #[test]
    #[ignore]
    fn fold_speed_480_tail() {
        let t = Tiling::new([480, 480, 480], 256, 32).unwrap();
        let mut vol = vec![1.0f32; 480 * 480 * 480];
        let last: Vec<usize> = (t.box_count() / 2..t.box_count()).collect();
        let owned: Vec<Vec<f32>> = last.iter().map(|&b| vec![0.5f32; t.cube_box(b).extent.iter().product()]).collect();
        let shared: usize = last.iter().map(|&b| t.cube_box(b).face_folded().covered_blocks().iter()
            .map(|(_, e)| e.iter().product::<usize>()).sum::<usize>()).sum();
        let cores = rayon::current_num_threads();
        println!("{shared} shared samples in the last row's {} boxes (faces on the devices)", last.len());
        for threads in [1usize, 2, 4, 8, 16, 32].into_iter().filter(|&n| n <= cores) {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            let mut best = f64::MAX;
            for _ in 0..5 {
                let t0 = std::time::Instant::now();
                for r in super::super::gpu::slabs(256, 32) {
                    let items: Vec<FoldRows> = last.iter().zip(&owned).map(|(&b, p)| FoldRows { b, partial: p, set_fresh: false,
                        rows: r.clone(), face_folded: true }).collect();
                    pool.install(|| t.fold_rows(&mut vol, &items)).unwrap();
                }
                best = best.min(t0.elapsed().as_secs_f64());
            }
            println!("pool {threads:>2}: {:6.2} ms, {:5.2} G samples/s, {:5.2} ns a sample a thread", best * 1e3,
                shared as f64 / best / 1e9, best * 1e9 * threads as f64 / shared as f64);
        }
    }

    #[test]
    #[ignore]
    fn fold_speed_480() {
        let t = Tiling::new([480, 480, 480], 256, 32).unwrap();
        let mut vol = vec![1.0f32; 480 * 480 * 480];
        let owned: Vec<Vec<f32>> = (0..t.box_count()).map(|b| vec![0.5f32; t.cube_box(b).extent.iter().product()]).collect();
        let covered: usize = (0..t.box_count()).map(|b| t.cube_box(b).covered_blocks().iter().map(|(_, e)| e.iter().product::<usize>()).sum::<usize>()).sum();
        let gpu = crate::runtime::context::Gpu::open(0).ok();
        let mut kinds: Vec<(&str, Vec<HostSamples>)> = vec![("pageable", owned.iter().map(|v| HostSamples::Pageable(v.clone())).collect())];
        if let Some(g) = &gpu {
            for (name, wc) in [("write-combined", true), ("cached page-locked", false)] {
                let bufs = owned.iter().map(|v| {
                    let mut b = if wc { crate::runtime::memory::PinnedBuf::write_combined(g, v.len()) } else { crate::runtime::memory::PinnedBuf::new(g, v.len()) }.unwrap();
                    b.as_mut_slice().unwrap().copy_from_slice(v);
                    HostSamples::PageLocked(b)
                }).collect();
                kinds.push((name, bufs));
            }
        }
        println!("{covered} covered samples (480^3, 8 boxes of 256^3), {} threads", rayon::current_num_threads());
        for (name, bufs) in &kinds {
            let parts: Vec<&[f32]> = bufs.iter().map(|b| b.as_slice().unwrap()).collect();
            for threads in [0usize, 32, 16, 8] {
                let pool = (threads > 0).then(|| rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap());
                for (slab, gap) in [(256, false), (32, false), (32, true)] {
                    let mut best = f64::MAX;
                    let mut count = 0;
                    for _ in 0..3 {
                        let (s, n) = match &pool {
                            Some(p) => p.install(|| passes(&t, &mut vol, &parts, slab, gap)),
                            None => passes(&t, &mut vol, &parts, slab, gap),
                        };
                        best = best.min(s);
                        count = n;
                    }
                    println!("{name:>20}, pool {:>2}, {count:>2} passes{}: {:6.2} ms, {:5.2} G samples/s, {:4.0} us a pass",
                        if threads == 0 { rayon::current_num_threads() } else { threads }, if gap { " 1 ms apart" } else { "" },
                        best * 1e3, covered as f64 / best / 1e9, best * 1e6 / count as f64);
                }
            }
        }
    }
}
