//! The three apertures of every parameter trace as index lists, and the search that builds them.

use rayon::prelude::*;

use super::{invalid, Aperture, Grid, Range, Result, SearchSpace};

/// The three apertures of every parameter trace as index lists (CSR): the traces of aperture
/// `phase` around parameter trace `p` are `idx[off[phase][p]..off[phase][p + 1]]`, ascending.
#[derive(Debug, Clone, PartialEq)]
pub struct Apertures {
    /// 3 x (np + 1) offsets, phase-major (phase 0 = (A, D), 1 = (B, E), 2 = C).
    pub off: Vec<u32>,
    pub idx: Vec<u32>,
    pub np: usize,
}

impl Apertures {
    pub fn list(&self, phase: usize, p: usize) -> &[u32] {
        let o = phase * (self.np + 1) + p;
        &self.idx[self.off[o] as usize..self.off[o + 1] as usize]
    }
    /// Longest list of one phase, from the offsets alone (also before the lists are filled:
    /// [`Setup::from_headers_deferred`](super::Setup::from_headers_deferred)).
    pub fn max_len(&self, phase: usize) -> usize {
        let o = &self.off[phase * (self.np + 1)..(phase + 1) * (self.np + 1)];
        o.windows(2).map(|w| (w[1] - w[0]) as usize).max().unwrap_or(0)
    }
    /// Total entries of one phase.
    pub fn total(&self, phase: usize) -> usize {
        (self.off[phase * (self.np + 1) + self.np] - self.off[phase * (self.np + 1)]) as usize
    }
}

/// The apertures of every parameter trace, through a bucket grid of the traces (cells of the
/// parameter-trace spacing), in parallel over parameter traces. Lists are ascending trace indices.
/// The reference for [`aperture_sets`] and [`ApertureFill`] (tests).
#[cfg(test)]
pub(super) fn build_apertures(x: &[f64], y: &[f64], origin: (f64, f64), upper: (f64, f64), grid: &Grid, aps: &[Aperture; 3])
    -> Result<Apertures> {
    let np = grid.len();
    let (cx, cy) = (grid.sx, grid.sy);
    let bx = ((upper.0 - origin.0) / cx).floor() as usize + 1;
    let by = ((upper.1 - origin.1) / cy).floor() as usize + 1;
    // Buckets in CSR form (trace indices ascending within a bucket).
    let cell = |i: usize| -> usize {
        let ix = (((x[i] - origin.0) / cx).floor() as usize).min(bx - 1);
        let iy = (((y[i] - origin.1) / cy).floor() as usize).min(by - 1);
        iy * bx + ix
    };
    let mut count = vec![0u32; bx * by + 1];
    let cells: Vec<usize> = (0..x.len()).map(cell).collect();
    for &c in &cells {
        count[c + 1] += 1;
    }
    for i in 1..count.len() {
        count[i] += count[i - 1];
    }
    let mut fill = count.clone();
    let mut bucket = vec![0u32; x.len()];
    for (i, &c) in cells.iter().enumerate() {
        bucket[fill[c] as usize] = i as u32;
        fill[c] += 1;
    }
    let mut off = Vec::with_capacity(3 * (np + 1));
    let mut idx = Vec::new();
    for ap in aps {
        // Half extents with a relative slack of 1e-9 so that traces exactly on the edge are in.
        let (hx, hy) = (ap.x / 2.0 * (1.0 + 1e-9) + 1e-9, ap.y / 2.0 * (1.0 + 1e-9) + 1e-9);
        let lists: Vec<Vec<u32>> = (0..np)
            .into_par_iter()
            .map(|p| {
                let (x0, y0) = (origin.0 + (p % grid.nx) as f64 * grid.sx, origin.1 + (p / grid.nx) as f64 * grid.sy);
                let ix0 = (((x0 - hx - origin.0) / cx).floor().max(0.0)) as usize;
                let ix1 = ((((x0 + hx - origin.0) / cx).floor().max(0.0)) as usize).min(bx - 1);
                let iy0 = (((y0 - hy - origin.1) / cy).floor().max(0.0)) as usize;
                let iy1 = ((((y0 + hy - origin.1) / cy).floor().max(0.0)) as usize).min(by - 1);
                let mut l = Vec::new();
                for iy in iy0..=iy1 {
                    for ix in ix0..=ix1.max(ix0) {
                        let b = iy * bx + ix;
                        for &t in &bucket[count[b] as usize..count[b + 1] as usize] {
                            if (x[t as usize] - x0).abs() <= hx && (y[t as usize] - y0).abs() <= hy {
                                l.push(t);
                            }
                        }
                    }
                }
                l.sort_unstable();
                l
            })
            .collect();
        let base = idx.len() as u64;
        off.push(base as u32);
        let mut total = base;
        for l in &lists {
            total += l.len() as u64;
            if total > u32::MAX as u64 {
                return invalid("aperture lists exceed 2^32 entries: reduce the apertures or the number of parameter traces");
            }
            off.push(total as u32);
        }
        for l in lists {
            idx.extend_from_slice(&l);
        }
    }
    // Offsets are per phase with np + 1 entries each (the pushes above give exactly that).
    debug_assert_eq!(off.len(), 3 * (np + 1));
    Ok(Apertures { off, idx, np })
}

/// Bound (samples) on |shift| for each phase over every aperture entry and every combination the
/// phase can use, plus a margin of 2 for the floor and the interpolation neighbour; and the largest
/// dx^2 (phase 0), dy^2 (phase 1), |dx dy| (phase 2) of each phase's apertures. The reference for
/// the bounds [`aperture_sets`] derives per trace (tests).
#[cfg(test)]
pub(super) fn shift_bounds(tx: &[f32], ty: &[f32], px: &[f32], py: &[f32], ap: &Apertures, s: &SearchSpace, inv_dt: f64)
    -> Result<([i32; 3], [f64; 3])> {
    let amax = |r: &Range| r.min.abs().max(r.max.abs());
    let (a, b, c, d, e) = (amax(&s.a), amax(&s.b), amax(&s.c), amax(&s.d), amax(&s.e));
    let mut out = [0i32; 3];
    let mut sq = [0.0f64; 3];
    for (phase, o) in out.iter_mut().enumerate() {
        let (m, mxy) = (0..ap.np)
            .into_par_iter()
            .map(|p| {
                let (mut m, mut mxy) = (0.0f64, 0.0f64);
                for &t in ap.list(phase, p) {
                    let dx = (tx[t as usize] - px[p]).abs() as f64;
                    let dy = (ty[t as usize] - py[p]).abs() as f64;
                    let dt = match phase {
                        0 => a * dx + d * dx * dx,
                        1 => b * dy + e * dy * dy,
                        _ => a * dx + b * dy + c * dx * dy + d * dx * dx + e * dy * dy,
                    };
                    m = m.max(dt);
                    mxy = mxy.max(match phase {
                        0 => dx * dx,
                        1 => dy * dy,
                        _ => dx * dy,
                    });
                }
                (m, mxy)
            })
            .reduce(|| (0.0, 0.0), |x, y| (x.0.max(y.0), x.1.max(y.1)));
        sq[phase] = mxy;
        let sm = m * inv_dt * (1.0 + 1e-5);
        if sm > 1e6 {
            return invalid(format!("the search space shifts traces by up to {sm:.0} samples in the {} scan: \
                the ranges of A..E or the apertures are far too large", ["(A, D)", "(B, E)", "C"][phase]));
        }
        *o = sm.ceil() as i32 + 2;
    }
    Ok((out, sq))
}

/// Largest |moveout| (s) over every combination phase `phase` can use, and the phase's offset
/// product (dx^2, dy^2, |dx dy|), of one aperture entry at |dx|, |dy| (m); `amax` = largest |A..E|.
#[inline]
fn entry_bound(phase: usize, dx: f64, dy: f64, amax: &[f64; 5]) -> (f64, f64) {
    let [a, b, c, d, e] = *amax;
    match phase {
        0 => (a * dx + d * dx * dx, dx * dx),
        1 => (b * dy + e * dy * dy, dy * dy),
        _ => (a * dx + b * dy + c * dx * dy + d * dx * dx + e * dy * dy, dx * dy),
    }
}

/// Shift bounds (samples, margin 2) and offset products per phase from the per-phase maxima of
/// [`entry_bound`]; errors on absurd search spaces.
pub(super) fn finish_bounds(maxima: [(f64, f64); 3], inv_dt: f64) -> Result<([i32; 3], [f64; 3])> {
    let mut out = [0i32; 3];
    let mut sq = [0.0f64; 3];
    for (phase, &(m, mxy)) in maxima.iter().enumerate() {
        sq[phase] = mxy;
        let sm = m * inv_dt * (1.0 + 1e-5);
        if sm > 1e6 {
            return invalid(format!("the search space shifts traces by up to {sm:.0} samples in the {} scan: \
                the ranges of A..E or the apertures are far too large", ["(A, D)", "(B, E)", "C"][phase]));
        }
        out[phase] = sm.ceil() as i32 + 2;
    }
    Ok((out, sq))
}

/// The bit sets of one axis of one phase's aperture search: one set of traces per grid column
/// (axis x) or row (axis y), with the first and one-past-last non-zero word of each.
struct AxisSets {
    bits: Vec<u64>,
    span: Vec<(usize, usize)>,
}

/// Marks every trace (coordinate `v`) in the set of each node o + i step (i < n) with |v - node|
/// <= h (exactly the reference predicate; candidate nodes from the division with one node of slack
/// each way). Also returns, per trace, the largest |rel - nodes[i]| (f32, the offsets the kernels
/// use) over the nodes whose set it joined, -1 where none. In parallel over blocks of traces (each
/// block owns its words of every set), as this is most of the setup's first pass; a trace with the
/// coordinate of the one before it (sorted gathers: every trace of a shot on a cross-spread's y)
/// joins the same nodes without the search.
#[allow(clippy::too_many_arguments)]
fn axis_sets(v: &[f64], o: f64, step: f64, n: usize, h: f64, rel: &[f32], nodes: &[f32], words: usize) -> (AxisSets, Vec<f32>) {
    // Words (of 64 traces) per block.
    const BW: usize = 8;
    let parts: Vec<(Vec<u64>, Vec<f32>)> = (0..words.div_ceil(BW)).into_par_iter().map(|k| {
        let (w0, w1) = (k * BW, ((k + 1) * BW).min(words));
        let (t0, t1) = (w0 * 64, (w1 * 64).min(v.len()));
        let nw = w1 - w0;
        let mut bits = vec![0u64; n * nw];
        let mut far = vec![-1.0f32; t1 - t0];
        // The nodes a trace joins are an interval: c - node_i is non-increasing in i (rounded
        // or not), so the exact predicate holds from the first passing candidate to the last; and
        // |rel - nodes[i]| is largest at one of the interval's ends.
        let inside = |c: f64, i: usize| (c - (o + i as f64 * step)).abs() <= h;
        let (mut prev, mut hits) = (f64::NAN, 0..0);
        for t in t0..t1 {
            let c = v[t];
            if c != prev {
                let lo = (((c - h - o) / step).floor() - 1.0).max(0.0) as usize;
                let hi = ((((c + h - o) / step).ceil() + 1.0).max(0.0) as usize).min(n - 1);
                hits = match (lo..=hi).find(|&i| inside(c, i)) {
                    Some(a) => a..(a..=hi).rev().find(|&i| inside(c, i)).unwrap() + 1,
                    None => 0..0,
                };
                prev = c;
            }
            if !hits.is_empty() {
                let (word, bit) = (t / 64 - w0, 1u64 << (t % 64));
                for i in hits.clone() {
                    bits[i * nw + word] |= bit;
                }
                far[t - t0] = (rel[t] - nodes[hits.start]).abs().max((rel[t] - nodes[hits.end - 1]).abs());
            }
        }
        (bits, far)
    }).collect();
    let mut bits = vec![0u64; n * words];
    let mut far = Vec::with_capacity(v.len());
    for (k, (b, f)) in parts.iter().enumerate() {
        let (w0, nw) = (k * BW, b.len() / n.max(1));
        for i in 0..n {
            bits[i * words + w0..i * words + w0 + nw].copy_from_slice(&b[i * nw..(i + 1) * nw]);
        }
        far.extend_from_slice(f);
    }
    let span = bits.chunks(words).map(|b| match b.iter().position(|&w| w != 0) {
        Some(f) => (f, words - b.iter().rev().position(|&w| w != 0).unwrap()),
        None => (0, 0),
    }).collect();
    (AxisSets { bits, span }, far)
}

/// The aperture lists of a setup, to be filled (all at once or band by band of parameter traces):
/// the per-column and per-row bit sets of each phase, and the lists' offsets and last entries from
/// the first pass. A list is the AND of its column's and row's sets, read out in ascending order.
pub struct ApertureFill {
    /// The distinct column (x) and row (y) sets (phases with the same half extent share them).
    sets: Vec<AxisSets>,
    /// Per phase, which of `sets` are its column and its row sets.
    which: [(usize, usize); 3],
    words: usize,
    nx: usize,
    /// Parameter traces.
    pub np: usize,
    /// Offsets of every list, as [`Apertures::off`].
    pub off: Vec<u32>,
    /// Last (largest) trace of every list, `[phase * np + p]` (0 for an empty list).
    last: Vec<u32>,
}

impl ApertureFill {
    /// Entries of all lists.
    pub fn total(&self) -> usize { self.off[3 * (self.np + 1) - 1] as usize }
    /// Length of list (phase, p).
    pub fn len(&self, phase: usize, p: usize) -> usize {
        let o = phase * (self.np + 1) + p;
        (self.off[o + 1] - self.off[o]) as usize
    }
    /// The largest trace index of list (phase, p); `None` for an empty list.
    pub fn last(&self, phase: usize, p: usize) -> Option<u32> {
        (self.len(phase, p) > 0).then(|| self.last[phase * self.np + p])
    }
    /// Entries of band `(p0, p1)` in phase `phase` (where they start in the index list, and how many).
    pub fn band_range(&self, phase: usize, (p0, p1): (usize, usize)) -> std::ops::Range<usize> {
        let o = phase * (self.np + 1);
        self.off[o + p0] as usize..self.off[o + p1] as usize
    }
    /// Splits `idx` (the whole index list, [`ApertureFill::total`] entries) into the pieces of
    /// contiguous `bands` (ascending, tiling 0..np): `[band][phase]` = the band's lists of that phase.
    pub fn split<'a>(&self, bands: &[(usize, usize)], idx: &'a mut [u32]) -> Vec<[&'a mut [u32]; 3]> {
        assert_eq!(idx.len(), self.total(), "ApertureFill::split: index list of the wrong length");
        let mut per: Vec<Vec<&'a mut [u32]>> = (0..bands.len()).map(|_| Vec::with_capacity(3)).collect();
        let mut rest = idx;
        for phase in 0..3 {
            // Bands of one phase follow each other in the list; phases follow each other too.
            for (b, &band) in bands.iter().enumerate() {
                let r = self.band_range(phase, band);
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(r.len());
                per[b].push(head);
                rest = tail;
            }
        }
        per.into_iter().map(|v| <[&mut [u32]; 3]>::try_from(v).ok().unwrap()).collect()
    }
    /// Fills the lists of parameter traces p0..p1 of every phase: `out[phase]` receives
    /// `idx[band_range(phase, (p0, p1))]`. On all cores (`parallel`) or on the calling thread only.
    pub fn fill(&self, (p0, p1): (usize, usize), out: &mut [&mut [u32]; 3], parallel: bool) {
        let mut lists: Vec<(usize, usize, &mut [u32])> = Vec::with_capacity(3 * (p1 - p0));
        for (phase, o) in out.iter_mut().enumerate() {
            assert_eq!(o.len(), self.band_range(phase, (p0, p1)).len(), "ApertureFill::fill: piece of the wrong length");
            let mut rest: &mut [u32] = o;
            for p in p0..p1 {
                let (head, tail) = std::mem::take(&mut rest).split_at_mut(self.len(phase, p));
                lists.push((phase, p, head));
                rest = tail;
            }
        }
        let one = |(phase, p, out): (usize, usize, &mut [u32])| {
            let (cs, rs) = (&self.sets[self.which[phase].0], &self.sets[self.which[phase].1]);
            let (i, j) = (p % self.nx, p / self.nx);
            let (w0, w1) = and_range(cs, rs, i, j);
            let mut k = 0;
            for w in w0..w1 {
                let mut bits = cs.bits[i * self.words + w] & rs.bits[j * self.words + w];
                while bits != 0 {
                    out[k] = (w * 64 + bits.trailing_zeros() as usize) as u32;
                    bits &= bits - 1;
                    k += 1;
                }
            }
            debug_assert_eq!(k, out.len());
        };
        if parallel {
            lists.into_par_iter().with_min_len(16).for_each(one);
        } else {
            lists.into_iter().for_each(one);
        }
    }
}

/// Words where both the column set `i` and the row set `j` have bits.
fn and_range(cs: &AxisSets, rs: &AxisSets, i: usize, j: usize) -> (usize, usize) {
    let (a, b) = (cs.span[i], rs.span[j]);
    (a.0.max(b.0), a.1.min(b.1))
}

/// The first pass of the aperture search: per phase, per-column and per-row bit sets of the traces
/// (each trace tested, with the exact reference predicate, only against the grid columns and rows
/// next to it), every list's length (popcount of the AND of its column's and row's sets) and last
/// entry, and the maxima of [`entry_bound`] over every list entry. Those come without the lists:
/// the entries of trace t are exactly its columns x its rows (a list is an AND of the two), and
/// [`entry_bound`] is non-decreasing in |dx| and |dy| (sums and products of non-negative terms,
/// each correctly rounded), so its maximum over t's entries is its value at t's largest |dx| and
/// |dy|, bit for bit the maximum over the lists (tested against the reference). About 10x less work
/// than testing every trace of the neighbouring buckets per parameter trace and sorting; the
/// lists are filled afterwards ([`ApertureFill::fill`], band by band if wanted): the host setup is
/// on the critical path of the pipelined engine.
pub(super) fn aperture_sets(x: &[f64], y: &[f64], origin: (f64, f64), grid: &Grid, aps: &[Aperture; 3],
    rel: (&[f32], &[f32], &[f32], &[f32]), s: &SearchSpace) -> Result<(ApertureFill, [(f64, f64); 3])> {
    let (tx, ty, px, py) = rel;
    let np = grid.len();
    let words = x.len().div_ceil(64);
    let amax = |r: &Range| r.min.abs().max(r.max.abs());
    let amax = [amax(&s.a), amax(&s.b), amax(&s.c), amax(&s.d), amax(&s.e)];
    let cols = &px[..grid.nx];
    let rows: Vec<f32> = (0..grid.ny).map(|j| py[j * grid.nx]).collect();
    let half = |ap: &Aperture| (ap.x / 2.0 * (1.0 + 1e-9) + 1e-9, ap.y / 2.0 * (1.0 + 1e-9) + 1e-9);
    // The distinct (axis, half extent) pairs (the cross-spread's C aperture shares its x extent
    // with (A, D) and its y extent with (B, E)), each set built once.
    let mut keys: Vec<(usize, u64)> = Vec::with_capacity(6);
    let mut which = [(0usize, 0usize); 3];
    for (phase, ap) in aps.iter().enumerate() {
        let (hx, hy) = half(ap);
        let mut key = |k: (usize, u64)| keys.iter().position(|&q| q == k).unwrap_or_else(|| { keys.push(k); keys.len() - 1 });
        which[phase] = (key((0, hx.to_bits())), key((1, hy.to_bits())));
    }
    let built: Vec<(AxisSets, Vec<f32>)> = keys.par_iter().map(|&(axis, h)| match axis {
        0 => axis_sets(x, origin.0, grid.sx, grid.nx, f64::from_bits(h), tx, cols, words),
        _ => axis_sets(y, origin.1, grid.sy, grid.ny, f64::from_bits(h), ty, &rows, words),
    }).collect();
    // A trace is in some list only when it is in a column set and in a row set.
    let maxima: Vec<(f64, f64)> = (0..3).into_par_iter().map(|phase| {
        let (fx, fy) = (&built[which[phase].0].1, &built[which[phase].1].1);
        fx.iter().zip(fy).filter(|&(&dx, &dy)| dx >= 0.0 && dy >= 0.0)
            .map(|(&dx, &dy)| entry_bound(phase, dx as f64, dy as f64, &amax))
            .fold((0.0f64, 0.0f64), |a, b| (a.0.max(b.0), a.1.max(b.1)))
    }).collect();
    let sets: Vec<AxisSets> = built.into_iter().map(|(s, _)| s).collect();
    // Length and last entry of every (phase, parameter trace), then the offsets.
    let mut off = Vec::with_capacity(3 * (np + 1));
    let mut last = Vec::with_capacity(3 * np);
    let mut total = 0u64;
    for &(ci, ri) in &which {
        let (cs, rs) = (&sets[ci], &sets[ri]);
        let counts: Vec<(u32, u32)> = (0..np).into_par_iter().with_min_len(64).map(|p| {
            let (i, j) = (p % grid.nx, p / grid.nx);
            let (w0, w1) = and_range(cs, rs, i, j);
            let word = |w: usize| cs.bits[i * words + w] & rs.bits[j * words + w];
            let n = (w0..w1).map(|w| word(w).count_ones()).sum();
            let l = (w0..w1).rev().find(|&w| word(w) != 0).map_or(0, |w| (w * 64 + 63 - word(w).leading_zeros() as usize) as u32);
            (n, l)
        }).collect();
        off.push(total as u32);
        for (c, l) in counts {
            total += c as u64;
            if total > u32::MAX as u64 {
                return invalid("aperture lists exceed 2^32 entries: reduce the apertures or the number of parameter traces");
            }
            off.push(total as u32);
            last.push(l);
        }
    }
    let fill = ApertureFill { sets, which, words, nx: grid.nx, np, off, last };
    Ok((fill, [maxima[0], maxima[1], maxima[2]]))
}
