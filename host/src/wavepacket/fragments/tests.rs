//! Tests of the cubes cut from the volume and the boxes folded back into its rows.

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
            let cubes = crate::exec::split::block_share(n, ranks, r);
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
            let rows = tiling.rows_of(crate::exec::split::block_share(n, ranks, r));
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
    let err = crate::synth::rel_l2(&got, &want);
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
    let err = crate::synth::rel_l2(&back, &vol);
    assert!(err < 1e-5, "fragmented inverse(forward) error {err:.2e}");
    let ev: f64 = vol.iter().map(|&v| (v as f64).powi(2)).sum();
    let ec: f64 = c.iter().map(|v| v.norm_sqr() as f64).sum();
    assert!((ec / ev - 1.0).abs() < 1e-4, "energy ratio {}", ec / ev);
}

/// The cube jobs through the queue: forward and inverse on 1 and 3 engines are the same bit for
/// bit; a block of the cubes (an MPI rank's) gives that block's part of the whole, cube for cube;
/// the host threshold's cubes added in cube order and their kept count are `process_with`'s.
#[test]
fn scale_cube_jobs_equal_over_engines_and_blocks() {
    use crate::exec::run_queue_items;
    use crate::wavepacket::CoeffEdit;
    let (vol, one, three) = one_and_three_engines();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    let cbits = |v: &[Complex32]| v.iter().flat_map(|x| [x.re.to_bits(), x.im.to_bits()]).collect::<Vec<_>>();
    let (n, per) = (one.tiling.count(), one.frame.total);
    assert!(n >= 4, "{n} cubes");
    let c1 = one.forward(&vol).unwrap();
    assert_eq!(cbits(&c1), cbits(&three.forward(&vol).unwrap()), "forward: 3 engines differ from 1");
    let v1 = one.inverse(&c1).unwrap();
    assert_eq!(bits(&v1), bits(&three.inverse(&c1).unwrap()), "inverse: 3 engines differ from 1");
    let block = 1..n - 1;
    let engines = three.engine_devices();
    let f = run_queue_items(&ForwardCubes { tr: &three, slab: &vol, first_row: 0 }, engines, block.clone(), Vec::new()).unwrap();
    assert_eq!(cbits(&f), cbits(&c1[block.start * per..block.end * per]));
    let cubes: Vec<Vec<f32>> = run_queue_items(&InverseCubes::new(&three, &f, block.start), engines, block.clone(), Vec::new()).unwrap();
    for (t, cube) in block.clone().zip(&cubes) {
        assert_eq!(bits(cube), bits(&one.inverse_cube(0, &c1[t * per..(t + 1) * per], t).unwrap()), "cube {t}");
    }
    let e = run_queue_items(&InverseCubes::<Vec<Vec<f32>>>::new(&three, &f, block.start), engines, 0..1, Vec::new()).unwrap_err();
    assert!(e.item == 0 && e.to_string().contains("cube 0: its coefficients are not held here"), "{e}");
    // The threshold of the applications under MPI, all cubes on one "rank".
    let thr: Vec<f32> = (0..one.frame.box_count()).map(|b| 0.002 * (1 + b % 7) as f32).collect();
    let (cubes, kept) = crate::exec::run_queue(&ThresholdCubes { tr: &three, slab: &vol, first_row: 0, thr: &thr }, engines,
        (Vec::new(), 0)).unwrap();
    let mut sum = vec![0.0f32; vol.len()];
    for (t, cube) in cubes.iter().enumerate() {
        one.tiling.accumulate(&mut sum, t, cube);
    }
    let p = one.process_with(&vol, CoeffEdit::Threshold(&thr)).unwrap();
    assert_eq!(Some(kept), p.kept);
    assert_eq!(bits(&sum), bits(&p.volume), "the threshold's cubes differ from process_with's volume");
}
