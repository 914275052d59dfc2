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

fn rel(a: &[f32], b: &[f32]) -> f64 { crate::bench::rel_l2(a, b) }

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
    for n in [32, 48, 128, 256, 512] {
        let fr = Frame::new(n, &Params::default()).unwrap();
        println!("{}", fr.describe());
        if n >= 128 {
            assert!(fr.redundancy() <= 4.0, "N = {n}: redundancy {}", fr.redundancy());
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
