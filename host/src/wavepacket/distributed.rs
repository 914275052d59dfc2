//! The wave-packet commands across MPI ranks (`seisgpu wavepacket forward`, `inverse`, `denoise`,
//! `compress`, `interpolate` under mpirun): each rank holds the slab of the volume's rows its block
//! of cubes reads ([`rows`]), transforms its cubes, and the ranks exchange the cube planes that
//! fall in each other's slabs ([`add_cubes_into_slabs`]), so every sample is summed over the cubes
//! in cube order, as in one process. Each rank writes its rows ([`write_volume`]) or its cubes'
//! coefficients ([`forward`]) into one file.

use std::ops::Range;
use std::path::Path;

use anyhow::ensure;

use crate::exec::mpi::{run_rank_queue, write_shares, Cluster};
use crate::exec::split::block_share;

/// `wavepacket forward` across ranks (the paper's variant 2): each rank transforms its block of
/// cubes on its engines and writes their coefficients at their place in the coefficient file
/// ([`crate::exec::mpi::write_shares`]; cube after cube, as one process writes them, so the file is the same byte
/// for byte). `slab`: the volume's rows from `first_row` on, at least those of this rank's cubes
/// ([`rows`]; the whole volume with `first_row` 0 does too). Returns the number of
/// coefficients in the file.
pub fn forward(cluster: &Cluster, tr: &super::fragments::Fragmented, slab: &[f32], first_row: usize,
    path: &Path) -> anyhow::Result<usize> {
    use super::coeffs_io;
    // The slab's samples, a bad one named by its place in the whole volume (a rank without cubes
    // holds no rows).
    let checked = super::validate_rows(slab, first_row, tr.tiling.shape, "wave-packet forward");
    cluster.agree("checking the volume", checked)?;
    let n = tr.tiling.count();
    let mine = cluster.share(n);
    let job = super::fragments::ForwardCubes { tr, slab, first_row };
    let local = run_rank_queue(cluster, &job, tr.engine_devices(), "transforming the cubes", Vec::with_capacity(mine.len() * tr.frame.total))?;
    let header = coeffs_io::Header { version: 1, tiling: tr.tiling.clone(), params: tr.frame.params.clone(), per_cube: tr.frame.total };
    let head = cluster.agree("describing the coefficients", coeffs_io::head_bytes(&header))?;
    let per = 8 * tr.frame.total as u64;
    write_shares(cluster, path, &head, per * n as u64, per * mine.start as u64, &coeffs_io::coeff_bytes(&local))?;
    Ok(tr.total())
}

/// The rows of the volume (along its first axis) that this rank's block of cubes reads: the slab
/// a rank holds in the wave-packet commands ([`forward`] reads it; the applications and
/// [`inverse`] return it).
pub fn rows(cluster: &Cluster, tiling: &super::fragments::Tiling) -> Range<usize> {
    held_rows(tiling, cluster.size())[cluster.rank()].clone()
}

/// Every rank's [`rows`], in rank order.
fn held_rows(tiling: &super::fragments::Tiling, ranks: usize) -> Vec<Range<usize>> {
    (0..ranks).map(|r| tiling.rows_of(block_share(tiling.count(), ranks, r))).collect()
}

/// The rows of the volume this rank answers for (writes, and counts in whole-volume sums): from
/// the first row of its slab to the first row of the next rank's that holds cubes (the last such
/// rank: to the end). The ranks' owned rows partition the volume, in rank order, each inside its
/// rank's slab (the next rank's first cube starts at or before this rank's last cube ends).
pub fn owned_rows(cluster: &Cluster, tiling: &super::fragments::Tiling) -> Range<usize> {
    owned_rows_in(tiling, cluster.size(), cluster.rank())
}

fn owned_rows_in(tiling: &super::fragments::Tiling, ranks: usize, rank: usize) -> Range<usize> {
    let held = held_rows(tiling, ranks);
    let busy = |q: usize| !block_share(tiling.count(), ranks, q).is_empty();
    if !busy(rank) {
        return held[rank].clone();
    }
    let end = (rank + 1..ranks).find(|&q| busy(q)).map_or(tiling.shape[0], |q| held[q].start);
    held[rank].start..end
}

/// `wavepacket inverse` across ranks: each rank inverts its block of cubes from `mine`, their
/// coefficients ([`super::coeffs_io::read_coeffs_of_cubes`] reads a rank's share of
/// the file), and the ranks exchange the planes of their cubes that fall in each other's slabs
/// ([`add_cubes_into_slabs`]). Returns this rank's slab ([`rows`]): every sample as one
/// process sums it, bit for bit.
pub fn inverse(cluster: &Cluster, tr: &super::fragments::Fragmented, mine: &[num_complex::Complex32])
    -> anyhow::Result<Vec<f32>> {
    let (n, per) = (tr.tiling.count(), tr.frame.total);
    let share = cluster.share(n);
    cluster.agree("checking the coefficients", if mine.len() == share.len() * per { Ok(()) } else {
        Err(anyhow::anyhow!("{} coefficients for cubes {share:?} of {per} each", mine.len()))
    })?;
    let job = super::fragments::InverseCubes::new(tr, mine, share.start);
    let local: Vec<Vec<f32>> = run_rank_queue(cluster, &job, tr.engine_devices(), "inverting the cubes", Vec::with_capacity(share.len()))?;
    let slab = add_cubes_into_slabs(cluster, &tr.tiling, local);
    cluster.agree("adding the cubes", slab)
}

/// Every rank's slab of the volume its cubes add up to ([`rows`]). `local`: this
/// rank's inverted cubes, in cube order. The planes (first axis) of each cube that fall in
/// another rank's slab go to that rank, and every rank adds the cubes that reach its slab in cube
/// order ([`super::fragments::Tiling::accumulate_rows`]): each sample gets the same
/// additions in the same order as in one process's volume. Steps r = 0, 1, ... as in
/// `Cluster::sum_ranks_scattered`: in step r every other rank sends rank r its planes for it
/// (all its cubes' in one message, maybe empty), which rank r adds in rank order, so in cube
/// order. Call after an [`agree`](Cluster::agree) that every rank passed.
fn add_cubes_into_slabs(cluster: &Cluster, tiling: &super::fragments::Tiling, local: Vec<Vec<f32>>)
    -> anyhow::Result<Vec<f32>> {
    let (n, ranks, me) = (tiling.count(), cluster.size(), cluster.rank());
    let [_, s1, s2] = tiling.shape;
    let plane = tiling.cube * tiling.cube;
    let held = held_rows(tiling, ranks);
    let mine = cluster.share(n);
    // The rows of cube t inside `rows` (maybe none).
    let overlap = |t: usize, rows: &Range<usize>| {
        let r = tiling.rows_of(t..t + 1);
        let lo = r.start.max(rows.start);
        lo..r.end.min(rows.end).max(lo)
    };
    // Cube t's planes of `rows`, from its samples (planes from the cube's first row).
    let planes = |t: usize, cube: &[f32], rows: &Range<usize>| -> anyhow::Result<std::ops::Range<usize>> {
        let first = tiling.start(t)[0];
        let span = (rows.start - first) * plane..(rows.end - first) * plane;
        ensure!(span.end <= cube.len(), "cube {t}: {} samples, rows {rows:?} need {}", cube.len(), span.end);
        Ok(span)
    };
    let pieces_for = |r: usize| -> anyhow::Result<Vec<f32>> {
        let mut out = Vec::new();
        for (t, cube) in mine.clone().zip(&local) {
            let o = overlap(t, &held[r]);
            if !o.is_empty() {
                out.extend_from_slice(&cube[planes(t, cube, &o)?]);
            }
        }
        Ok(out)
    };
    let mut slab = vec![0.0f32; held[me].len() * s1 * s2];
    let mut added = if local.len() == mine.len() { Ok(()) } else {
        Err(anyhow::anyhow!("rank {me}: {} cubes for cubes {mine:?}", local.len()))
    };
    for r in 0..ranks {
        if r != me {
            // Send even after a local failure (empty): rank r must not block.
            let piece = pieces_for(r);
            cluster.send_vec(r, piece.as_deref().unwrap_or(&[]));
            if let Err(e) = piece {
                added = added.and(Err(e));
            }
            continue;
        }
        for q in 0..ranks {
            let theirs = if q == me { None } else { Some(cluster.receive_vec::<f32>(q)) };
            if added.is_err() {
                continue;
            }
            let mut at = 0;
            for (k, t) in block_share(n, ranks, q).enumerate() {
                let o = overlap(t, &held[me]);
                if o.is_empty() {
                    continue;
                }
                let part = match &theirs {
                    None => planes(t, &local[k], &o).map(|span| &local[k][span]),
                    Some(buf) => {
                        let len = o.len() * plane;
                        at += len;
                        if at <= buf.len() { Ok(&buf[at - len..at]) } else {
                            Err(anyhow::anyhow!("rank {q} sent {} samples of its cubes' planes, fewer than cube {t} needs", buf.len()))
                        }
                    }
                };
                match part {
                    Ok(p) => tiling.accumulate_rows(&mut slab, held[me].start, t, o, p),
                    Err(e) => {
                        added = Err(e);
                        break;
                    }
                }
            }
        }
    }
    added.map(|_| slab)
}

/// Writes a wave-packet volume from the ranks' slabs: each rank writes its owned rows
/// ([`owned_rows`]) of `slab` (its [`rows`]) into one float32 .npy file of
/// the volume's shape ([`crate::exec::mpi::write_shares`]; the bytes of one process's file). Collective.
pub fn write_volume(cluster: &Cluster, path: &Path, tiling: &super::fragments::Tiling, slab: &[f32])
    -> anyhow::Result<()> {
    let [n1, n2, n3] = tiling.shape;
    let (rows, owned) = (rows(cluster, tiling), owned_rows(cluster, tiling));
    let row = n2 * n3;
    let sized = if slab.len() == rows.len() * row { Ok(()) } else {
        Err(anyhow::anyhow!("{} samples for rows {rows:?} of a {n1} x {n2} x {n3} volume", slab.len()))
    };
    cluster.agree("checking the volume", sized)?;
    let part = &slab[(owned.start - rows.start) * row..(owned.end - rows.start) * row];
    let bytes: Vec<u8> = part.iter().flat_map(|v| v.to_le_bytes()).collect();
    write_shares(cluster, path, &crate::io::npy::header_f32(&tiling.shape), (n1 * row * 4) as u64, (owned.start * row * 4) as u64,
        &bytes)
}

/// The wave-packet applications (`wavepacket denoise`, `compress`, `interpolate`) across ranks:
/// each rank holds its slab of the volume ([`rows`]), transforms and thresholds its
/// block of the cubes from it; the statistics the applications take over the whole volume are
/// combined over the ranks (the noise sample gathered, the magnitude histogram summed, the
/// largest coefficient's maximum: each the single-process value); the thresholded cubes are added
/// into every rank's slab through [`add_cubes_into_slabs`] (each sample as in one process's
/// volume), ready for the next pass (POCS) and for [`write_volume`].
pub struct RankCubes<'a> {
    pub cluster: &'a Cluster,
    pub tr: &'a super::fragments::Fragmented,
}

impl RankCubes<'_> {
    fn check_slab(&self, slab: &[f32]) -> anyhow::Result<()> {
        let rows = super::apps::CubeJob::rows(self);
        self.cluster.agree("checking the volume",
            super::validate_rows(slab, rows.start, self.tr.tiling.shape, "wave-packet processing"))
    }
}

impl super::apps::CubeJob for RankCubes<'_> {
    fn fragmented(&self) -> &super::fragments::Fragmented { self.tr }

    fn rows(&self) -> Range<usize> { rows(self.cluster, &self.tr.tiling) }

    fn owned(&self) -> Range<usize> { owned_rows(self.cluster, &self.tr.tiling) }

    fn forward_each(&self, slab: &[f32], look: &(dyn Fn(usize, &[num_complex::Complex32]) + Sync)) -> anyhow::Result<()> {
        self.check_slab(slab)?;
        let first = self.rows().start;
        let job = super::fragments::LookAtCubes { tr: self.tr, slab, first_row: first, look };
        run_rank_queue(self.cluster, &job, self.tr.engine_devices(), "transforming the cubes", ())
    }

    fn all_samples(&self, local: Vec<f32>) -> anyhow::Result<Vec<f32>> {
        Ok(self.cluster.all_gather_varcount(&local).concat())
    }

    fn sum_counts(&self, local: Vec<u64>) -> anyhow::Result<Vec<u64>> {
        let mut total = vec![0u64; local.len()];
        self.cluster.sum_counts(&local, &mut total);
        Ok(total)
    }

    fn sum_reals(&self, local: Vec<f64>) -> anyhow::Result<Vec<f64>> {
        let mut total = vec![0f64; local.len()];
        self.cluster.sum_reals(&local, &mut total);
        Ok(total)
    }

    fn max(&self, local: f32) -> anyhow::Result<f32> {
        Ok(self.cluster.max(local))
    }

    fn threshold(&self, slab: &[f32], thr: &[f32]) -> anyhow::Result<(Vec<f32>, u64)> {
        let tr = self.tr;
        self.check_slab(slab)?;
        let first = self.rows().start;
        let job = super::fragments::ThresholdCubes { tr, slab, first_row: first, thr };
        let (cubes, kept) = run_rank_queue(self.cluster, &job, tr.engine_devices(), "thresholding the cubes", (Vec::new(), 0))?;
        let mut total = [0u64];
        self.cluster.sum_counts(&[kept], &mut total);
        let slab = add_cubes_into_slabs(self.cluster, &tr.tiling, cubes);
        let slab = self.cluster.agree("adding the cubes", slab)?;
        Ok((slab, total[0]))
    }
}
