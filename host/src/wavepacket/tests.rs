//! CPU unit tests of the frame and the reference transform (small cubes: seconds on 2 cores).

use std::sync::Arc;

use gpu_kernels::wavepacket as wp;
use num_complex::Complex32;
use rand::{RngExt, SeedableRng};

use super::cpu::CpuEngine;
use super::*;

fn random_cube(n: usize, seed: u64) -> Vec<f32> {
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    (0..n * n * n).map(|_| r.random_range(-1.0f32..1.0)).collect()
}

fn frame(n: usize, eps: f64, gather: Gather) -> Arc<Frame> {
    Arc::new(Frame::new(n, &Params { eps, gather, ..Params::default() }).unwrap())
}

fn rel(a: &[f32], b: &[f32]) -> f64 { crate::synth::rel_l2(a, b) }

#[test]
fn windows_square_sum_to_one_everywhere() {
    for finest in [Finest::Isotropic, Finest::Directional] {
        let params = Params { frame: FrameParams { finest, ..FrameParams::default() }, ..Params::default() };
        let fr = Frame::new(32, &params).unwrap();
        let g = &fr.geom;
        let m = g.m;
        let mut worst = 0.0f64;
        for u0 in 0..m {
            for u1 in 0..m {
                for u2 in 0..m {
                    let xi = [u0, u1, u2].map(|u| wp::lattice_index(u, m));
                    let mut s = 0.0f64;
                    wp::for_each_box_at(g, xi, |j, _, _, w| s += (w as f64 / g.norm[j] as f64).powi(2));
                    worst = worst.max((s - 1.0).abs());
                }
            }
        }
        assert!(worst < 2e-6, "{finest:?}: sum of squared windows is off by {worst}");
    }
}

#[test]
fn every_box_point_is_found_by_the_inverse_gather() {
    let fr = Frame::new(24, &Params::default()).unwrap();
    let g = &fr.geom;
    let mut seen = 0usize;
    for j in 0..fr.scales() {
        let sh = g.shape[j];
        for b in 0..g.boxes[j] {
            let mut k = 0usize;
            for i0 in 0..sh[0] {
                for i1 in 0..sh[1] {
                    for i2 in 0..sh[2] {
                        let (xi, w) = wp::box_point(g, j, b, [i0, i1, i2]);
                        if w != 0.0 {
                            let mut found = None;
                            wp::for_each_box_at(g, xi, |s, bb, idx, ww| {
                                if s == j && bb == b {
                                    found = Some((idx, ww));
                                }
                            });
                            assert_eq!(found, Some((k, w)), "scale {j} box {b} point {:?} lattice {xi:?}", [i0, i1, i2]);
                            // The table-driven enumeration finds the same point (and no other
                            // point of this box).
                            let mut hits = Vec::new();
                            wp::for_each_box_index_at(g, xi, |s, bb, idx| {
                                if s == j && bb == b {
                                    hits.push(idx);
                                }
                            });
                            assert_eq!(hits, vec![k], "index enumeration, scale {j} box {b} lattice {xi:?}");
                            seen += 1;
                        }
                        k += 1;
                    }
                }
            }
        }
    }
    assert!(seen > 0);
}

#[test]
fn redundancy_table() {
    for finest in [Finest::Isotropic, Finest::Directional] {
        for n in [32, 48, 128, 256, 512] {
            let params = Params { frame: FrameParams { finest, ..FrameParams::default() }, ..Params::default() };
            let fr = Frame::new(n, &params).unwrap();
            println!("finest {finest:?}: {}", fr.describe());
            if n >= 128 && finest == Finest::Isotropic {
                assert!(fr.redundancy() <= 4.0, "N = {n}: redundancy {}", fr.redundancy());
            }
        }
    }
}

#[test]
fn gather_matches_direct_nudft() {
    let n = 16;
    let f = random_cube(n, 11);
    for eps in [1e-3, 1e-5, 1e-6] {
        for gather in [Gather::Stencil, Gather::Separable, Gather::Lattice] {
            let fr = frame(n, eps, gather);
            let e = CpuEngine::new(fr.clone());
            let g = &fr.geom;
            let m = g.m as usize;
            let lat = match gather {
                Gather::Separable => e.lattice_separable(&f),
                Gather::Lattice => e.lattice_direct(&f),
                Gather::Stencil => {
                    let spec = e.spectrum(&f);
                    let mut l = vec![Complex32::default(); m * m * m];
                    for u in 0..m * m * m {
                        let xi = [u / (m * m), (u / m) % m, u % m].map(|v| wp::lattice_index(v as i32, m as i32));
                        l[u] = e.stencil_at(&spec, xi);
                    }
                    l
                }
            };
            // Direct non-uniform DFT in f64 at every lattice point (box points are lattice points).
            let (mut num, mut den) = (0.0f64, 0.0f64);
            let tw = |j: i32| -> Vec<(f64, f64)> {
                (0..n).map(|x| {
                    let ph = -2.0 * std::f64::consts::PI * j as f64 * (x as f64 - (n / 2) as f64) / m as f64;
                    (ph.cos(), ph.sin())
                }).collect()
            };
            for u in (0..m * m * m).step_by(7) {
                let xi = [u / (m * m), (u / m) % m, u % m].map(|v| wp::lattice_index(v as i32, m as i32));
                let (t0, t1, t2) = (tw(xi[0]), tw(xi[1]), tw(xi[2]));
                let (mut re, mut im) = (0.0, 0.0);
                for x0 in 0..n {
                    for x1 in 0..n {
                        let (a, b) = (t0[x0].0 * t1[x1].0 - t0[x0].1 * t1[x1].1, t0[x0].0 * t1[x1].1 + t0[x0].1 * t1[x1].0);
                        for x2 in 0..n {
                            let v = f[(x0 * n + x1) * n + x2] as f64;
                            re += v * (a * t2[x2].0 - b * t2[x2].1);
                            im += v * (a * t2[x2].1 + b * t2[x2].0);
                        }
                    }
                }
                let d = lat[u];
                num += (d.re as f64 - re).powi(2) + (d.im as f64 - im).powi(2);
                den += re * re + im * im;
            }
            let err = (num / den).sqrt();
            println!("gather {gather:?} eps {eps:e}: relative error {err:.2e} (q = {})", g.q);
            let floor = 1e-6; // single-precision floor of the FFTs and sums
            assert!(err < eps.max(floor) * 1.5, "gather {gather:?} eps {eps:e}: relative error {err:.2e}");
        }
    }
}

#[test]
fn inverse_of_forward_is_identity_and_energy_is_kept() {
    let n = 32;
    let f = random_cube(n, 5);
    for gather in [Gather::Separable, Gather::Lattice, Gather::Stencil] {
        let fr = frame(n, 1e-6, gather);
        let e = CpuEngine::new(fr.clone());
        let c = e.forward(&f);
        let back = e.inverse(&c);
        let err = rel(&back, &f);
        let ef: f64 = f.iter().map(|&v| (v as f64).powi(2)).sum();
        let ec: f64 = c.iter().map(|v| v.norm_sqr() as f64).sum();
        println!("{gather:?}: inverse(forward) rel err {err:.2e}, energy ratio {:.8}", ec / ef);
        assert!(err < 1e-5, "{gather:?}: inverse(forward(f)) relative error {err:.2e}");
        assert!((ec / ef - 1.0).abs() < 2e-5, "{gather:?}: coefficient energy / signal energy = {}", ec / ef);
    }
}

#[test]
fn adjoint_dot_product() {
    let n = 24;
    let f = random_cube(n, 9);
    for gather in [Gather::Separable, Gather::Lattice, Gather::Stencil] {
        let fr = frame(n, 1e-4, gather);
        let e = CpuEngine::new(fr.clone());
        let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let c: Vec<Complex32> = (0..fr.total).map(|_| Complex32::new(r.random_range(-1.0..1.0), r.random_range(-1.0..1.0))).collect();
        let tf = e.forward(&f);
        let tc = e.inverse(&c);
        // <T f, c> (real part: f is real, T* takes the real part) = <f, T* c>.
        let lhs: f64 = tf.iter().zip(&c).map(|(a, b)| a.re as f64 * b.re as f64 + a.im as f64 * b.im as f64).sum();
        let rhs: f64 = f.iter().zip(&tc).map(|(&a, &b)| a as f64 * b as f64).sum();
        let err = (lhs - rhs).abs() / lhs.abs().max(rhs.abs());
        println!("{gather:?}: <Tf,c> = {lhs:.6e}, <f,T*c> = {rhs:.6e}, rel diff {err:.2e}");
        assert!(err < 1e-5, "{gather:?}: adjoint test off by {err:.2e}");
    }
}

#[test]
fn bad_parameters_are_named() {
    let e = Frame::new(32, &Params { eps: 1.5, ..Params::default() }).unwrap_err();
    assert!(e.to_string().contains("epsilon"), "{e}");
    let e = Frame::new(32, &Params { eps: 0.0, ..Params::default() }).unwrap_err();
    assert!(e.to_string().contains("epsilon"), "{e}");
    let e = Frame::new(4, &Params::default()).unwrap_err();
    assert!(e.to_string().contains("too small"), "{e}");
    let mut f = random_cube(8, 1);
    f[77] = f32::NAN;
    let e = validate_volume(&f, [8, 8, 8], "test").unwrap_err();
    assert!(e.to_string().contains("not finite"), "{e}");
    let e = validate_volume(&[], [0, 8, 8], "test").unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
}

/// The GPU's separable passes, run on the CPU with the kernels' own per-point functions over
/// emulated grids (same buffers, same index maps as `gpu.rs`), against the CPU reference.
#[test]
fn kernel_bodies_match_the_reference_on_emulated_grids() {
    use rustfft::FftPlanner;
    let n = 20usize;
    let fr = frame(n, 1e-6, Gather::Separable);
    let g = fr.geom;
    assert_eq!(g.q, 6);
    let (m, p) = (fr.m(), fr.p());
    let e = CpuEngine::new(fr.clone());
    let f = random_cube(n, 21);
    let mut planner = FftPlanner::<f32>::new();
    let (fwd, inv) = (planner.plan_fft_forward(p), planner.plan_fft_inverse(p));
    let lines = |buf: &mut [Complex32], count: usize, inverse: bool| {
        for l in buf[..count * p].chunks_mut(p) {
            if inverse { inv.process(l) } else { fwd.process(l) }
        }
    };
    let corr: Vec<f32> = (0..g.n).map(|i| wp::correction(g.lambda, g.p, i - g.n / 2)).collect();
    let pos = |b: usize, len: usize| wp::fft_pos(b as i32 - n as i32 / 2, len as i32) as usize;
    let f32p = |v: &[Complex32]| v.as_ptr() as *const f32;
    // As the kernels index them: a over `a`, b over the lines' b range, lines where `l` puts them.
    let resample = |inp: &[Complex32], out: &mut [Complex32], a_range: std::ops::Range<usize>, centre: bool, out_last: usize,
        l: wp::Lines| {
        for a in a_range {
            for b in l.b_first as usize..l.b_end as usize {
                let line = unsafe { f32p(inp).add(2 * l.input(a as u32, b as u32) * p) };
                for u in 0..m {
                    let (re, im) = unsafe { wp::resample_point::<6>(&g, u as i32, line) };
                    let ps = if centre { pos(b, out_last) } else { b };
                    out[l.output(u as u32, a as u32) * out_last + ps] = Complex32::new(re, im);
                }
            }
        }
    };
    // Forward, as GpuEngine::spectrum_forward does it: the x2 pass in slabs of 7 planes (the last
    // one shorter), the x1 pass in slabs of one, two or all of them, each reading only its own lines.
    let (nu, mu) = (n as u32, m as u32);
    let planes = 7;
    for x1_planes in [7, 14, n] {
        let mut a = vec![Complex32::default(); n * n * p];
        let mut b = vec![Complex32::default(); n * m * p];
        let mut c = vec![Complex32::default(); m * m * p];
        for big in super::gpu::slabs(n, x1_planes) {
            for r in super::gpu::slabs_in(big.clone(), planes) {
                for x0 in r.clone() {
                    for x1 in 0..n {
                        for x2 in 0..n {
                            let v = f[(x0 * n + x1) * n + x2] * corr[x0] * corr[x1] * corr[x2];
                            a[(x0 * n + x1) * p + pos(x2, p)] = Complex32::new(v, 0.0);
                        }
                    }
                }
                lines(&mut a[r.start * n * p..], r.len() * n, false);
                resample(&a, &mut b, r.clone(), true, p, super::gpu::lines_x2(nu, mu, &big));
            }
            lines(&mut b[big.start * m * p..], big.len() * m, false);
            resample(&b, &mut c, 0..m, true, p, super::gpu::lines_x1(mu, &big));
        }
        lines(&mut c, m * m, false);
        let mut lat = vec![Complex32::default(); m * m * m];
        resample(&c, &mut lat, 0..m, false, m, wp::Lines::rotation(mu, mu));
        let reference = e.lattice_separable(&f);
        let as_f = |v: &[Complex32]| v.iter().flat_map(|c| [c.re, c.im]).collect::<Vec<f32>>();
        let err = rel(&as_f(&lat), &as_f(&reference));
        assert!(err < 1e-6, "emulated separable forward (x1 slabs of {x1_planes}) vs reference: {err:.2e}");
    }

    // Adjoint, as GpuEngine::spectrum_adjoint does it, on a random lattice: the x1 and x2 passes
    // slab by slab, the buffers poisoned first (a slab reading lines it has not written fails).
    let mut r = rand_chacha::ChaCha8Rng::seed_from_u64(8);
    let lat: Vec<Complex32> = (0..m * m * m).map(|_| Complex32::new(r.random_range(-1.0..1.0), r.random_range(-1.0..1.0))).collect();
    let adjoint = |inp: &[Complex32], out: &mut [Complex32], a_range: std::ops::Range<usize>, d1: usize, centre: bool,
        in_last: usize, l: wp::Lines| {
        for aa in a_range {
            for bb in l.b_first as usize..l.b_end as usize {
                for pp in 0..p {
                    let (re, im) = unsafe {
                        wp::adjoint_point::<6>(&g, &l, d1 as u32, centre as u32, in_last as u32, f32p(inp), aa as u32,
                            bb as u32, pp as u32)
                    };
                    out[l.output(aa as u32, bb as u32) * p + pp] = Complex32::new(re, im);
                }
            }
        }
    };
    for x1_planes in [7, 14, n] {
        let mut a = vec![Complex32::new(f32::NAN, f32::NAN); n * n * p];
        let mut b = vec![Complex32::new(f32::NAN, f32::NAN); n * m * p];
        let mut c = vec![Complex32::new(f32::NAN, f32::NAN); m * m * p];
        adjoint(&lat, &mut c, 0..m, m, false, m, wp::Lines::rotation(mu, mu).adjoint());
        lines(&mut c, m * m, true);
        for big in super::gpu::slabs(n, x1_planes) {
            adjoint(&c, &mut b, 0..m, n, true, p, super::gpu::lines_x1(mu, &big).adjoint());
            lines(&mut b[big.start * m * p..], big.len() * m, true);
            for r in super::gpu::slabs_in(big.clone(), planes) {
                adjoint(&b, &mut a, r.clone(), n, true, p, super::gpu::lines_x2(nu, mu, &big).adjoint());
                lines(&mut a[r.start * n * p..], r.len() * n, true);
            }
        }
        let mut out = vec![0.0f32; n * n * n];
        for x0 in 0..n {
            for x1 in 0..n {
                for x2 in 0..n {
                    out[(x0 * n + x1) * n + x2] = a[(x0 * n + x1) * p + pos(x2, p)].re * corr[x0] * corr[x1] * corr[x2];
                }
            }
        }
        let reference = e.adjoint_separable(&lat);
        let err = rel(&out, &reference);
        assert!(err < 1e-6, "emulated separable adjoint (x1 slabs of {x1_planes}) vs reference: {err:.2e}");
    }

    // The paper's stencil gather at a few lattice points, and its inverse gather from the lists.
    let spec = e.spectrum(&f);
    for xi in [[0, 0, 0], [-10, 3, 9], [9, -10, -1], [5, 5, -7]] {
        let (re, im) = unsafe { wp::stencil_point::<6>(&g, f32p(&spec), xi) };
        let want = e.stencil_at(&spec, xi);
        assert!((Complex32::new(re, im) - want).norm() <= 1e-5 * want.norm().max(1.0), "stencil at {xi:?}");
    }
    let lists = super::cpu::adjoint_lists(&g);
    let k = lists.iter().map(|l| l.len()).max().unwrap();
    let (mut idx, mut w) = (vec![0u32; p * k], vec![0.0f32; p * k]);
    for (row, l) in lists.iter().enumerate() {
        for (c, &(u, wt)) in l.iter().enumerate() {
            idx[row * k + c] = u as u32;
            w[row * k + c] = wt;
        }
    }
    for mm in [[0u32, 0, 0], [1, 20, 40], [(p - 1) as u32, 3, 21]] {
        let (re, im) = unsafe { wp::adjoint_stencil_point(m, k, idx.as_ptr(), w.as_ptr(), f32p(&lat), mm) };
        let mut want = Complex32::default();
        for &(u0, w0) in &lists[mm[0] as usize] {
            for &(u1, w1) in &lists[mm[1] as usize] {
                for &(u2, w2) in &lists[mm[2] as usize] {
                    want += lat[(u0 * m + u1) * m + u2] * (w0 * w1 * w2);
                }
            }
        }
        assert!((Complex32::new(re, im) - want).norm() <= 1e-5 * want.norm().max(1.0), "adjoint stencil at {mm:?}");
    }
}

#[test]
fn the_cube_side_follows_the_volume() {
    // The thin volume that took 2.2 GB at 256^3: cubes of 128.
    let (side, line) = super::auto_cube([4, 120, 600], 32).unwrap();
    assert_eq!(side, 128, "{line}");
    assert!(line.contains("cubes of 128^3") && line.contains("256^3 cubes"), "{line}");
    // Large volumes keep the paper's 256; one that fits a cube gets one cube.
    assert_eq!(super::auto_cube([600, 600, 600], 32).unwrap().0, 256);
    let (side, _) = super::auto_cube([100, 100, 100], 32).unwrap();
    assert_eq!(super::fragments::Tiling::new([100, 100, 100], side, 32).unwrap().count(), 1);
    assert!(super::auto_cube([100, 100, 100], 200).is_err());
}
