//! srm: Chebyshev extrapolation and shot-record migration. Physics tests on the CPU reference,
//! GPU kernels against it, and bad input.

use seisgpu_host::backend::{gpu_or_skip, Backend};
use seisgpu_host::kernels::srm::RowMap;
use seisgpu_host::srm::design::{DesignParams, FilterKind, Operator, Spacing};
use seisgpu_host::runtime::Gpu;
use seisgpu_host::srm::gpu::{DeviceOperator, Planes};
use seisgpu_host::srm::impulse::{compare_with_phase_shift, impulse_response};
use seisgpu_host::srm::synthetic::{column_peak, flat_reflector, point_scatterer};
use seisgpu_host::srm::{cpu, migrate, GpuOptions, GpuVariant, SrmParams, Taper, VelocityModel};

use crate::common::{random_vec, rel_l2};

/// Parameters of the small test migrations: a short table keeps the design quick on 2 cores.
fn test_params(fmin: f64, fmax: f64, peak: f64) -> SrmParams {
    SrmParams { fmin, fmax, ricker_peak: peak, taper_width: 8, aperture: 1e9, table_rows: 48, ..Default::default() }
}

#[test]
fn impulse_response_matches_phase_shift_within_the_design_bounds() {
    // Constant velocity, one depth step: the impulse response's 2D FFT is the operator's response
    // G(x(kx, ky)); it must match exp(i kz dz) up to the design angle within the bounds that the
    // design itself states (fit + filter + table interpolation, `Operator::accuracy`).
    let (nx, ny, d, dz, v) = (128usize, 128usize, 10.0, 10.0, 2000.0);
    for (filter, freq, angle) in [(FilterKind::Optimised, 20.0, 60.0), (FilterKind::Optimised, 45.0, 45.0),
        (FilterKind::Taylor8, 30.0, 50.0)] {
        let params = DesignParams { degree: 15, max_angle_deg: angle, filter };
        let p = 2.0 * std::f64::consts::PI * freq * dz / v;
        let op = Operator::new(params, Spacing { dx: d, dy: d, dz, two_d: false }, 0.9 * p, 1.13 * p, 6).unwrap();
        let (amp_bound, phase_bound, _) = op.accuracy(p, angle);
        let plane = impulse_response(&op, nx, ny, v, freq, 1);
        let e = compare_with_phase_shift(&plane, nx, ny, d, d, dz, v, freq, 1, angle);
        println!("{filter} f {freq} Hz angle {angle}: amplitude {:.2e} (bound {amp_bound:.2e}), phase {:.2e} rad \
            (bound {phase_bound:.2e}) over {} wavenumbers", e.amplitude, e.phase, e.count);
        assert!(e.count > 50, "too few wavenumbers compared: {}", e.count);
        assert!(e.amplitude <= 1.1 * amp_bound + 1e-4, "amplitude error {} > bound {amp_bound}", e.amplitude);
        assert!(e.phase <= 1.1 * phase_bound + 1e-4, "phase error {} > bound {phase_bound}", e.phase);
        // And the bounds themselves are small: this is an accurate operator.
        assert!(amp_bound < 1e-2 && phase_bound < 2e-2, "design bounds {amp_bound} {phase_bound}");
    }
}

#[test]
fn two_thousand_depth_steps_in_a_heterogeneous_model_stay_bounded() {
    let (nx, ny, nslices) = (48usize, 48usize, 40usize);
    let sp = Spacing { dx: 12.5, dy: 12.5, dz: 10.0, two_d: false };
    // Strong lateral and vertical heterogeneity: random velocities 1500..4500 m/s at every node.
    let v: Vec<f32> = random_vec(nx * ny * nslices, "velocity").iter().map(|r| 3000.0 + 1500.0 * r).collect();
    let slow: Vec<f32> = v.iter().map(|v| 1.0 / v).collect();
    let freqs = [3.0, 15.0, 40.0];
    let tau = 2.0 * std::f64::consts::PI;
    let (pmin, pmax) = (tau * 3.0 * sp.dz / 4500.0, tau * 40.0 * sp.dz / 1500.0);
    let op = Operator::new(DesignParams::default(), sp, pmin, pmax, 48).unwrap();
    let maps: Vec<RowMap> = freqs.iter().map(|&f| op.row_map(tau * f)).collect();
    let mut planes = random_vec(2 * nx * ny * freqs.len(), "wavefield");
    let taper = Taper::new(nx, ny, 8, 0.3);
    let peak = |pl: &[f32]| -> Vec<f32> {
        pl.chunks(2 * nx * ny).map(|p| p.chunks(2).map(|c| (c[0] * c[0] + c[1] * c[1]).sqrt()).fold(0.0f32, f32::max)).collect()
    };
    // The start is white noise on the grid. The variable-coefficient operator is not a pointwise
    // contraction: early steps can lift the maximum a little while energy focuses (12% in the first
    // step at 40 Hz for one random model, 1.7% from step 1 to 2 at 15 Hz for another) before the
    // run decays by orders of magnitude. Stability, as checked: every step stays within 25% of the
    // start's maximum (no blow-up), and the largest maximum of each 100-step window is no larger
    // than that of the window before (no growth over the 2000 steps).
    let start = peak(&planes);
    let mut worst = vec![0.0f32; freqs.len()];
    let mut windows: Vec<Vec<f32>> = Vec::new();
    let mut trace = Vec::new();
    for step in 0..2000 {
        let s = &slow[(step % nslices) * nx * ny..(step % nslices + 1) * nx * ny];
        cpu::step_planes(&op, &maps, s, &taper, nx, ny, &mut planes);
        let now = peak(&planes);
        if step % 100 == 0 || step < 10 {
            trace.push((step, now.clone()));
        }
        if step % 100 == 0 {
            windows.push(vec![0.0f32; freqs.len()]);
        }
        let win = windows.last_mut().unwrap();
        for k in 0..freqs.len() {
            assert!(now[k].is_finite(), "non-finite wavefield at step {step}");
            worst[k] = worst[k].max(now[k]);
            win[k] = win[k].max(now[k]);
        }
    }
    println!("start max {start:?}, largest max over the 2000 steps {worst:?}");
    println!("max by step: {trace:?}");
    println!("max by 100-step window: {windows:?}");
    for k in 0..freqs.len() {
        assert!(worst[k] <= 1.25 * start[k], "{} Hz: the max rose from {} to {}", freqs[k], start[k], worst[k]);
        for (j, w) in windows.windows(2).enumerate() {
            assert!(w[1][k] <= w[0][k], "{} Hz: steps {}..{} reached {}, more than the {} of the 100 steps before",
                freqs[k], (j + 1) * 100, (j + 2) * 100, w[1][k], w[0][k]);
        }
    }
}

#[test]
fn flat_reflector_under_layers_is_imaged_at_its_depth() {
    // 3D shot at the centre of a 41 x 41 patch, layers 1800 / 2400 m/s (interface at 300 m),
    // reflector at 500 m (= sample 25). Reflection times by ray tracing through the layers.
    let (n, d, dz, nz, zr) = (41usize, 20.0, 20.0, 36usize, 500.0);
    let (traces, model) = flat_reflector(n, n, nz, d, dz, &[0.0, 300.0], &[1800.0, 2400.0], zr, 256, 0.004, 20.0, 1);
    let params = test_params(5.0, 35.0, 20.0);
    let img = migrate(&traces, &model, &params, GpuOptions::default(), &[Backend::Cpu]).unwrap();
    let want = (zr / dz).round() as usize;
    for (ix, iy) in [(20, 20), (15, 20), (20, 26), (25, 14)] {
        let iz = column_peak(&img, ix, iy, 5);
        println!("column ({ix}, {iy}): peak at sample {iz} (want {want})");
        assert!((iz as i64 - want as i64).abs() <= 1, "reflector imaged at sample {iz} at ({ix}, {iy}), want {want}");
    }
}

#[test]
fn point_scatterer_focuses() {
    let (n, d, dz, nz, v) = (41usize, 20.0, 20.0, 30usize, 2000.0);
    let scat = (440.0, 380.0, 360.0);
    let (traces, model) = point_scatterer(n, n, nz, d, dz, v, (300.0, 400.0), scat, 256, 0.004, 20.0, 1);
    let params = test_params(5.0, 40.0, 20.0);
    let img = migrate(&traces, &model, &params, GpuOptions::default(), &[Backend::Cpu]).unwrap();
    let at = |ix: usize, iy: usize, iz: usize| img.data[(iz * img.ny + iy) * img.nx + ix].abs();
    let (mut best, mut arg) = (0.0f32, (0, 0, 0));
    for iz in 4..nz {
        for iy in 0..n {
            for ix in 0..n {
                if at(ix, iy, iz) > best {
                    best = at(ix, iy, iz);
                    arg = (ix, iy, iz);
                }
            }
        }
    }
    let want = ((scat.0 / d) as i64, (scat.1 / d) as i64, (scat.2 / dz) as i64);
    println!("image peak {best} at {arg:?}, scatterer at node {want:?}");
    assert!((arg.0 as i64 - want.0).abs() <= 1 && (arg.1 as i64 - want.1).abs() <= 1 && (arg.2 as i64 - want.2).abs() <= 1,
        "peak at {arg:?}, scatterer at {want:?}");
    // Focused: 4 nodes (80 m, about one wavelength) away laterally the image is much weaker.
    let (ix, iy, iz) = arg;
    for (jx, jy) in [(ix + 4, iy), (ix - 4, iy), (ix, iy + 4), (ix, iy - 4)] {
        let r = at(jx, jy, iz) / best;
        assert!(r < 0.35, "not focused: {r} of the peak at ({jx}, {jy}, {iz})");
    }
}

/// The kernel names round-trip, and a retired one is refused with the list of kept ones.
#[test]
fn kernel_names_parse() {
    for v in [GpuVariant::Best, GpuVariant::Auto, GpuVariant::Paper, GpuVariant::PaperPairCapped, GpuVariant::Cluster,
        GpuVariant::ClusterD] {
        assert_eq!(v.to_string().parse::<GpuVariant>(), Ok(v));
    }
    let e = "fusedc3".parse::<GpuVariant>().unwrap_err();
    assert!(e.contains("`fusedc3`") && e.contains("paperq56") && e.contains("clusterd"), "{e}");
}

#[test]
fn bad_inputs_give_clear_errors() {
    let (traces, model) = point_scatterer(21, 21, 10, 20.0, 20.0, 2000.0, (200.0, 200.0), (200.0, 200.0, 100.0), 128,
        0.004, 20.0, 2);
    let params = test_params(5.0, 40.0, 20.0);
    let err = |t: &seisgpu_host::TraceSet, m: &VelocityModel, p: &SrmParams| {
        migrate(t, m, p, GpuOptions::default(), &[Backend::Cpu]).map(|_| ()).unwrap_err().to_string()
    };
    // Receivers beyond the model.
    let mut far = traces.clone();
    far.headers[7].gx = 5000.0;
    let e = err(&far, &model, &params);
    assert!(e.contains("does not cover") && e.contains("trace 7"), "{e}");
    // Zero depth step.
    let mut flat = model.clone();
    flat.dz = 0.0;
    let e = err(&traces, &flat, &params);
    assert!(e.contains("dz"), "{e}");
    // Band beyond Nyquist (dt 4 ms: 125 Hz).
    let e = err(&traces, &model, &SrmParams { fmax: 200.0, ..params.clone() });
    assert!(e.contains("Nyquist"), "{e}");
    let e = err(&traces, &model, &SrmParams { fmin: 0.0, ..params.clone() });
    assert!(e.contains("fmin"), "{e}");
    // Degree 0.
    let mut p0 = params.clone();
    p0.design.degree = 0;
    let e = err(&traces, &model, &p0);
    assert!(e.contains("degree"), "{e}");
    // Negative velocity.
    let mut neg = model.clone();
    neg.v[3] = -1.0;
    let e = err(&traces, &neg, &params);
    assert!(e.contains("not positive"), "{e}");
}

// ---- GPU against the CPU reference -------------------------------------------------------------

#[test]
fn gpu_depth_step_matches_cpu_for_every_variant() {
    let Some(gpu) = gpu_or_skip("gpu_depth_step_matches_cpu_for_every_variant") else { return };
    // Not multiples of any tile (40 x 24, 32, 40, 48); three planes in buffers with room for five.
    let (nx, ny, count, stride) = (131usize, 97usize, 3usize, 5usize);
    let nxy = nx * ny;
    let sp = Spacing { dx: 12.5, dy: 15.0, dz: 10.0, two_d: false };
    let tau = 2.0 * std::f64::consts::PI;
    let op = Operator::new(DesignParams::default(), sp, tau * 4.0 * 10.0 / 4000.0, tau * 50.0 * 10.0 / 1500.0, 40).unwrap();
    let dop = DeviceOperator::new(&gpu, &op).unwrap();
    let slow: Vec<f32> = random_vec(nxy, "velocity").iter().map(|r| 1.0 / (2750.0 + 1250.0 * r)).collect();
    let maps: Vec<RowMap> = [7.0, 23.0, 49.0].iter().map(|&f| op.row_map(tau * f)).collect();
    let taper = Taper::new(nx, ny, 10, 0.3);
    // Both waves: S' planes then R planes; the CPU steps each plane alone.
    let waves = random_vec(2 * 2 * count * nxy, "wavefields");
    let mut want = waves.clone();
    let mut maps2 = maps.clone();
    maps2.extend_from_slice(&maps);
    cpu::step_planes(&op, &maps2, &slow, &taper, nx, ny, &mut want);
    let dslow = gpu.upload(&slow).unwrap();
    // Every `auto` candidate (paper, paperq56, cluster, clusterd).
    for variant in seisgpu_host::srm::gpu::CANDIDATES {
        if seisgpu_host::srm::gpu::ClusterKernel::of(variant).is_some() && !seisgpu_host::runtime::cluster::clusters_supported(&gpu) {
            println!("{variant}: not run (compute capability below 9.0; see srm_cluster.rs)");
            continue;
        }
        let mut pl = poisoned_planes(&gpu, nx, ny, stride, count, &taper, &waves, &maps);
        pl.step(&gpu, &dop, &dslow.slice(..), count, variant).unwrap();
        let out = gpu.download(&pl.x).unwrap();
        let got = first_planes(&out, nxy, stride, count);
        let e = rel_l2(&got, &want);
        println!("{variant}: rel L2 {e:.2e}");
        assert!(got.iter().all(|v| v.is_finite()), "{variant}: unwritten (NaN) outputs");
        assert!(e < 1e-5, "{variant}: rel L2 {e}");
    }
}

/// GPU planes for `count` of `stride` planes per wave with every buffer NaN-poisoned, then the
/// input `waves` (both waves' `count` planes, packed) placed at their strided positions.
#[allow(clippy::too_many_arguments)]
pub(crate) fn poisoned_planes(gpu: &Gpu, nx: usize, ny: usize, stride: usize, count: usize, taper: &Taper, waves: &[f32],
    maps: &[RowMap]) -> Planes {
    let nxy = nx * ny;
    let mut pl = Planes::new(gpu, nx, ny, stride, taper).unwrap();
    let poison = vec![f32::NAN; pl.x.len()];
    let mut x = poison.clone();
    for w in 0..2 {
        let (src, dst) = (2 * w * count * nxy, 2 * w * stride * nxy);
        x[dst..dst + 2 * count * nxy].copy_from_slice(&waves[src..src + 2 * count * nxy]);
    }
    pl.x = gpu.upload(&x).unwrap();
    for b in [&mut pl.y, &mut pl.acc] {
        *b = gpu.upload(&poison).unwrap();
    }
    pl.set_maps(gpu, maps).unwrap();
    pl
}

/// The first `count` planes of both waves out of planes laid out `stride` per wave, packed.
pub(crate) fn first_planes(out: &[f32], nxy: usize, stride: usize, count: usize) -> Vec<f32> {
    let mut got = Vec::with_capacity(2 * 2 * count * nxy);
    for w in 0..2 {
        let src = 2 * w * stride * nxy;
        got.extend_from_slice(&out[src..src + 2 * count * nxy]);
    }
    got
}

#[test]
fn gpu_image_matches_cpu() {
    let Some(gpu) = gpu_or_skip("gpu_image_matches_cpu") else { return };
    let (n, d, dz, nz, v) = (37usize, 20.0, 20.0, 24usize, 2000.0);
    let (traces, model) = point_scatterer(n, 29, nz, d, dz, v, (300.0, 250.0), (400.0, 300.0, 300.0), 200, 0.004, 20.0, 1);
    let mut params = test_params(5.0, 40.0, 20.0);
    params.nz = nz;
    let want = migrate(&traces, &model, &params, GpuOptions::default(), &[Backend::Cpu]).unwrap();
    let shots = seisgpu_host::srm::validate_inputs(&traces, &model, &params).unwrap();
    let op = seisgpu_host::srm::design_for(&model, &params).unwrap();
    for variant in [GpuVariant::Paper, GpuVariant::PaperPairCapped, GpuVariant::Auto] {
        // 7 planes per launch: the band's bins do not divide evenly into batches.
        let opts = GpuOptions { variant, planes: 7 };
        let got = seisgpu_host::srm::gpu::migrate_shots(&gpu, &op, &traces, &model, &params, &shots, opts, false).unwrap();
        let e = rel_l2(&got.data, &want.data);
        println!("{variant}: image rel L2 {e:.2e}");
        assert!(e < 1e-5, "{variant}: image rel L2 {e}");
    }
}

#[test]
fn capped_kernels_move_to_register_capped_modules() {
    // CPU-only: the `paperq` entry point calls no function, so it can be JIT-compiled alone with
    // `.maxnreg` (what `Planes::step` does on the GPU).
    for k in ["srm_step_paperq"] {
        let m = seisgpu_host::srm::gpu::capped_ptx(seisgpu_host::runtime::PTX, k, 80).unwrap();
        assert_eq!(m.matches(".visible .entry").count(), 1, "{k}");
        assert!(m.contains(&format!(".visible .entry {k}(")) && m.contains(".maxnreg 80"), "{k}");
    }
    assert!(seisgpu_host::srm::gpu::capped_ptx(seisgpu_host::runtime::PTX, "srm_step_none", 80).is_err());
}

#[test]
fn pair_table_entries_interpolate_like_the_table() {
    use seisgpu_host::kernels::srm::{coef_at, coef_from_pair, pair_entry};
    let (ncoef, rows) = (5usize, 4usize);
    let table = random_vec(2 * ncoef * rows, "table");
    for i0 in 0..rows - 1 {
        for n in 0..ncoef {
            for f in [0.0f32, 0.3, 1.0] {
                let want = unsafe { coef_at(table.as_ptr(), ncoef as u32, i0 as u32, f, n as u32) };
                assert_eq!(coef_from_pair(pair_entry(&table, ncoef, i0, n), f), want);
            }
        }
    }
}

#[test]
fn demo_runs_on_the_cpu_and_images_its_reflector() {
    let dir = std::env::temp_dir().join(format!("seisgpu-srm-demo-{}", std::process::id()));
    let row = seisgpu_lab::srm::demo(&Backend::Cpu, &dir, seisgpu_lab::bench::DemoSize::Small).unwrap();
    println!("{} on {}: {} ({:.1} s)", row.algorithm, row.backend, row.quality, row.seconds);
    assert!(row.quality.contains("within 0 ") || row.quality.contains("within 1 "), "{}", row.quality);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The CLI reads shots and the velocity model from SEG-Y (coordinates from the trace headers,
/// velocity nodes by inline and crossline) and images what the .npy inputs image; a
/// velocity file with a missing node is an error naming the file.
#[test]
fn cli_reads_segy_shots_and_velocity() {
    use seisgpu_host::io::segy::{write_segy, SampleFormat, WriteOptions};
    use seisgpu_host::traces::{TraceHeader, TraceSet};
    let dir = std::env::temp_dir().join(format!("seisgpu-srm-segy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (nx, ny, nz, d, dz) = (25usize, 17usize, 30usize, 20.0, 10.0);
    let (traces, model) = flat_reflector(nx, ny, nz, d, dz, &[0.0, 150.0], &[1800.0, 2400.0], 250.0, 200, 0.004, 20.0, 2);
    let opts = WriteOptions { format: SampleFormat::IeeeFloat, ..Default::default() };
    let p = |n: &str| dir.join(n);
    // Shots: SEG-Y and .npy (traces + geometry).
    write_segy(p("shots.sgy"), &traces, &opts).unwrap();
    seisgpu_host::io::npy::write_npy(p("shots.npy"), &traces.data, &[traces.len() as u64, traces.ns as u64]).unwrap();
    let geom: Vec<f32> = traces.headers.iter().flat_map(|h| [h.sx as f32, h.sy as f32, h.gx as f32, h.gy as f32]).collect();
    seisgpu_host::io::npy::write_npy(p("geom.npy"), &geom, &[traces.len() as u64, 4]).unwrap();
    // Velocity: .npy (nz, ny, nx) and SEG-Y, one trace per node (inline = y, crossline = x).
    seisgpu_host::io::npy::write_npy(p("v.npy"), &model.v, &[nz as u64, ny as u64, nx as u64]).unwrap();
    let nodes: Vec<TraceHeader> = (0..ny)
        .flat_map(|iy| (0..nx).map(move |ix| TraceHeader { inline: iy as i32 + 10, crossline: ix as i32 + 1, ..Default::default() }))
        .collect();
    let mut vset = TraceSet::zeros(nodes, nz, 0.004);
    for iy in 0..ny {
        for ix in 0..nx {
            for iz in 0..nz {
                vset.data[(iy * nx + ix) * nz + iz] = model.v[(iz * ny + iy) * nx + ix];
            }
        }
    }
    write_segy(p("v.sgy"), &vset, &opts).unwrap();
    let run = |t: &str, v: &str, extra: &[&str], out: &str| {
        let bin = crate::common::seisgpu_bin();
        let (dxs, dzs) = (d.to_string(), dz.to_string());
        let mut args = vec!["--device", "cpu", "srm", "--traces", t, "--velocity", v, "--dx", &dxs, "--dy", &dxs, "--dz", &dzs,
            "--fmin", "5", "--fmax", "30", "-o", out];
        args.extend_from_slice(extra);
        std::process::Command::new(bin).args(&args).output().unwrap()
    };
    let s = |n: &str| p(n).to_str().unwrap().to_string();
    let a = run(&s("shots.npy"), &s("v.npy"), &["--geometry", &s("geom.npy"), "--dt", "4"], &s("a.npy"));
    assert!(a.status.success(), "{}", String::from_utf8_lossy(&a.stderr));
    let b = run(&s("shots.sgy"), &s("v.sgy"), &[], &s("b.npy"));
    assert!(b.status.success(), "{}", String::from_utf8_lossy(&b.stderr));
    let (ia, ib) = (seisgpu_host::io::npy::read_f32(&p("a.npy")).unwrap().1, seisgpu_host::io::npy::read_f32(&p("b.npy")).unwrap().1);
    assert!(ia.iter().any(|&x| x != 0.0));
    let err = rel_l2(&ib, &ia);
    let (ta, tb) = (seisgpu_host::io::segy::read_segy(p("shots.sgy")).unwrap().1, &traces);
    let hdiff = ta.headers.iter().zip(&tb.headers).position(|(a, b)| (a.sx, a.sy, a.gx, a.gy) != (b.sx, b.sy, b.gx, b.gy));
    // Not bit for bit: the CPU reference sums frequencies in rayon's (run-dependent) order.
    assert!(err < 1e-6, "SEG-Y inputs image differently from the same .npy inputs: rel L2 {err:.2e}; dt {} vs {}; first header \
        difference at {hdiff:?}; data equal {}", ta.dt, tb.dt, ta.data == tb.data);
    // A velocity node missing: a clear error naming the file.
    let mut holes = vset.clone();
    holes.headers.pop();
    holes.data.to_mut().truncate(holes.headers.len() * nz);
    write_segy(p("vhole.sgy"), &holes, &opts).unwrap();
    let c = run(&s("shots.sgy"), &s("vhole.sgy"), &[], &s("c.npy"));
    let err = String::from_utf8_lossy(&c.stderr);
    assert!(!c.status.success() && err.contains("vhole.sgy") && err.contains("no velocity trace"), "{err}");
    assert!(!p("c.npy").exists(), "no output after a failure");
    std::fs::remove_dir_all(&dir).ok();
}
