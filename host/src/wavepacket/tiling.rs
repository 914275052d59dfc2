//! Where the cubes go in the volume ([`Tiling`]), the tapers, and the boxes of cubes the engines
//! process ([`CubeBox`], [`CubeInBox`]).

use anyhow::{ensure, Result};

use crate::{ensure_input, ensure_param};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::wavepacket::nice;
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
    pub(super) box_cubes: usize,
}

fn default_box_cubes() -> usize { BOX_CUBES }

impl Tiling {
    /// Cubes of side `cube` (a volume that fits in one cube gets one cube of the smallest fast FFT
    /// size holding it), overlapping by at least `overlap` samples.
    pub fn new(shape: [usize; 3], cube: usize, overlap: usize) -> Result<Tiling> {
        ensure_input!(shape.iter().all(|&d| d > 0), "empty volume (shape {:?})", shape);
        ensure_param!(cube >= 16, "cube", "cube side {cube} is too small (at least 16)");
        let big = shape.iter().copied().max().unwrap();
        if big <= cube {
            let c = nice(big.max(16));
            let c = if c % 2 == 0 { c } else { nice(c + 1) };
            return Ok(Tiling { shape, cube: c, starts: [vec![0], vec![0], vec![0]], box_cubes: BOX_CUBES });
        }
        ensure_param!(2 * overlap <= cube, "overlap", "overlap {overlap} is more than half the cube side {cube}");
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
                crate::ensure_param!(w[2] >= w[0] + cube, "overlap", "axis {a}: cubes of {cube} with overlap {overlap} stack three deep");
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

    pub(super) fn index(&self, t: usize) -> [usize; 3] {
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
pub(super) fn cut<'a>(c: usize, inside: [usize; 3], w: [&[f32]; 3], row: impl Fn(usize, usize) -> &'a [f32] + Sync, cube: &mut [f32]) {
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
pub(super) fn rise(x: f32, width: f32) -> f32 {
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
    pub(super) fn folded_box(&self, tiling: &Tiling) -> CubeBox {
        let bx = tiling.cube_box(self.b);
        if self.face_folded { bx.face_folded() } else { bx }
    }

    /// Whether folding these rows of box `bx` writes any sample: its fresh samples are set here,
    /// or its rows hold samples an earlier box wrote ([`CubeBox::covered`]: the planes below
    /// `covered[0]`, and on every plane the rows below `covered[1]` and the samples below
    /// `covered[2]`).
    pub(super) fn writes(&self, bx: &CubeBox) -> bool {
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
