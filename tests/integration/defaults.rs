//! Defaults taken from the data and errors before work: the migrations' image grid over a survey
//! at UTM coordinates, runs that reach no image point, traces without coordinates, NLBF's search
//! ranges from the data on a shot with steep events and an offset gap, truncated .npy inputs and
//! negative option values.

use std::path::{Path, PathBuf};

use seisgpu_host::backend::gpu_or_skip;
use seisgpu_host::grid::{self, GridRequest};
use seisgpu_host::io::segy::{write_segy, WriteOptions};
use seisgpu_host::nlbf::{self, EnhanceParams};
use seisgpu_host::{ktm, pstm, Backend, TraceHeader, TraceSet};

const X0: f64 = 451_000.0;
const Y0: f64 = 6_780_000.0;

fn tmp_dir(name: &str) -> PathBuf { crate::common::fresh_dir("defaults", name) }

use crate::common::{printed as text, run_cli as seisgpu};

/// A 2-D line at UTM coordinates: 9 shots every 50 m, 24 receivers every 25 m behind each, over a
/// point diffractor under the middle of the midpoints (two-way time 0.4 s at 2000 m/s).
fn utm_line() -> (TraceSet, (f64, f64)) {
    let mut h = Vec::new();
    for s in 0..9 {
        for r in 0..24 {
            let sx = X0 + s as f64 * 50.0;
            h.push(TraceHeader { sx, sy: Y0, gx: sx + 50.0 + r as f64 * 25.0, gy: Y0, ..Default::default() });
        }
    }
    let mut t = TraceSet::zeros(h, 250, 0.004);
    let (xd, yd) = (X0 + 25.0 + 200.0 + 0.5 * 23.0 * 12.5, Y0);
    seisgpu_host::synth::events::diffractor(&mut t, xd, yd, 400.0, 2000.0, 25.0);
    (t, (xd, yd))
}

fn write(dir: &Path, name: &str, t: &TraceSet) -> PathBuf {
    let p = dir.join(name);
    write_segy(&p, t, &WriteOptions::default()).unwrap();
    p
}

/// The image column (x) of the largest |amplitude| near tau.
fn focus_x(grid: &ktm::ImageGrid, data: &[f32]) -> f64 {
    let (i, _) = data.iter().enumerate().fold((0, 0.0f32), |b, (i, v)| if v.abs() > b.1 { (i, v.abs()) } else { b });
    grid.x((i / grid.ntau) / grid.ny)
}

#[test]
fn ktm_and_pstm_image_a_utm_survey_over_its_midpoints_by_default() {
    let (t, (xd, _)) = utm_line();
    let (g, line) = grid::complete(&GridRequest::default(), &t).unwrap();
    assert!(line.unwrap().contains("image grid from the data"));
    assert!((g.dx - 12.5).abs() < 1e-9 && g.ny == 1 && g.x0 > X0 && g.x0 < X0 + 100.0 && g.ntau == 250, "{g:?}");
    let ig = g;
    let img = ktm::migrate(&t, &ktm::Params::full(ig, ktm::Velocity::Constant(2000.0)), &[Backend::Cpu]).unwrap();
    assert!((focus_x(&ig, &img.data) - xd).abs() <= 2.0 * g.dx, "ktm focus at {} m, diffractor at {xd} m", focus_x(&ig, &img.data));

    // The CLI: the grid printed, an image over the data, for both engines.
    let dir = tmp_dir("utm");
    let input = write(&dir, "line.sgy", &t);
    let out = dir.join("ktm.npy");
    let o = seisgpu(&["--device", "cpu", "ktm", "migrate", "--input", input.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("ktm: image grid from the data"), "{}", text(&o));
    let (shape, data) = seisgpu_host::io::npy::read_f32(&out).unwrap();
    assert_eq!(shape, vec![1, g.nx, 1, 250]);
    assert!((focus_x(&ig, &data) - xd).abs() <= 2.0 * g.dx);
    let out = dir.join("pstm.npy");
    let o = seisgpu(&["--device", "cpu", "pstm", "migrate", "--input", input.to_str().unwrap(), "--traveltime", "exact", "-o",
        out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("pstm: image grid from the data"), "{}", text(&o));
    let (shape, data) = seisgpu_host::io::npy::read_f32(&out).unwrap();
    assert_eq!(shape, vec![g.nx, 1, 1, 250]);
    assert!((focus_x(&ig, &data) - xd).abs() <= 2.0 * g.dx, "pstm focus at {} m", focus_x(&ig, &data));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_grid_no_trace_reaches_and_traces_without_coordinates_fail_without_output() {
    let (t, _) = utm_line();
    let dir = tmp_dir("reach");
    let input = write(&dir, "line.sgy", &t);
    for cmd in ["ktm", "pstm"] {
        let out = dir.join(format!("{cmd}.npy"));
        let o = seisgpu(&["--device", "cpu", cmd, "migrate", "--input", input.to_str().unwrap(), "--x0", "0", "--y0", "0", "--nx", "21",
            "--ny", "21", "-o", out.to_str().unwrap()]);
        assert!(!o.status.success() && text(&o).contains("no trace reaches the image"), "{cmd}: {}", text(&o));
        assert!(text(&o).contains("451"), "{cmd}: the message gives the data's extent: {}", text(&o));
        assert!(!out.exists(), "{cmd} wrote an output");
    }
    // No coordinates at all: both refuse, before any work.
    let mut bare = t.clone();
    bare.headers.iter_mut().for_each(|h| *h = TraceHeader { offset: h.gx - h.sx, ..Default::default() });
    let input = write(&dir, "bare.sgy", &bare);
    for cmd in ["ktm", "pstm"] {
        let out = dir.join(format!("{cmd}-bare.npy"));
        let o = seisgpu(&["--device", "cpu", cmd, "migrate", "--input", input.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        assert!(!o.status.success() && text(&o).contains("no source/receiver coordinates"), "{cmd}: {}", text(&o));
        assert!(!out.exists());
    }
    let p = pstm_params(&grid::complete(&GridRequest::default(), &t).unwrap().0);
    let e = pstm::migrate(&bare, &p, pstm::TraveltimeMode::Exact, pstm::TraveltimeModel::Dsr, &[Backend::Cpu]).unwrap_err().to_string();
    assert!(e.contains("no source/receiver coordinates"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

fn pstm_params(g: &grid::ImageGrid) -> pstm::PstmParams {
    pstm::PstmParams { nx: g.nx, ny: g.ny, x0: g.x0, y0: g.y0, dx: g.dx, dy: g.dy, nz: g.ntau, tau0: g.tau0, dtau: g.dtau, noff: 1,
        offset0: 0.0, doffset: 1e6, vrms: vec![2000.0; g.ntau], eta: vec![], aperture: 800.0, stretch: 0.5, dynamic_max_step: 32,
        gpu: pstm::GpuTuning::read_only_cache() }
}

#[test]
fn gpu_migrations_image_a_utm_survey_over_its_midpoints() {
    let Some(gpu) = gpu_or_skip("gpu_migrations_image_a_utm_survey_over_its_midpoints") else { return };
    let (t, (xd, _)) = utm_line();
    let g = grid::complete(&GridRequest::default(), &t).unwrap().0;
    let ig = g;
    let p = ktm::Params::full(ig, ktm::Velocity::Constant(2000.0));
    let cpu = ktm::migrate(&t, &p, &[Backend::Cpu]).unwrap();
    let on_gpu = ktm::migrate(&t, &p, &[Backend::Gpu(gpu.clone())]).unwrap();
    assert!(seisgpu_lab::bench::rel_l2(&on_gpu.data, &cpu.data) < 1e-4);
    assert!((focus_x(&ig, &on_gpu.data) - xd).abs() <= 2.0 * g.dx);
    let pp = pstm_params(&g);
    let (m, d) = (pstm::TraveltimeMode::Static8, pstm::TraveltimeModel::Dsr);
    let img = pstm::migrate(&t, &pp, m, d, &[Backend::Gpu(gpu.clone())]).unwrap();
    assert!(img.stats.traces_used == t.len());
    let mut far = pp.clone();
    far.x0 = 0.0;
    far.y0 = 0.0;
    let e = pstm::migrate(&t, &far, m, d, &[Backend::Gpu(gpu)]).unwrap_err().to_string();
    assert!(e.contains("no trace reaches the image"), "{e}");
}

/// One marine-like shot at UTM coordinates: receivers every 12.5 m over 1200 m, none within 60 m
/// of the source (the offset gap); a direct wave at 1500 m/s (slope 1/1500 s/m, far steeper than
/// the synthetic preset's 1e-4 s/m) and a reflection.
fn shot_with_gap() -> TraceSet {
    let xs = X0 + 600.0;
    let h: Vec<TraceHeader> = (0..97).map(|k| X0 + k as f64 * 12.5).filter(|gx| (gx - xs).abs() >= 60.0)
        .map(|gx| TraceHeader { sx: xs, sy: Y0, gx, gy: Y0, offset: gx - xs, ..Default::default() }).collect();
    let mut t = TraceSet::zeros(h, 300, 0.004);
    for i in 0..t.len() {
        let off = t.headers[i].offset as f32;
        seisgpu_host::synth::add_ricker(t.trace_mut(i), 0.004, 0.04 + off.abs() / 1500.0, 20.0, 1.0);
        seisgpu_host::synth::add_ricker(t.trace_mut(i), 0.004, (0.3f32 * 0.3 + off * off / 2500.0 / 2500.0).sqrt() + 0.5, 20.0, 0.5);
    }
    seisgpu_host::synth::add_noise(&mut t.data, 0.02, 5);
    t
}

/// The A picked at the direct wave's time on the parameter trace nearest x (m, absolute).
fn direct_wave_a(est: &nlbf::Estimate, t: &TraceSet, x: f64) -> f32 {
    let i = ((x - est.origin.0) / est.grid.sx).round() as usize;
    let xp = est.origin.0 + i as f64 * est.grid.sx;
    let it = ((0.04 + (xp - t.headers[0].sx).abs() / 1500.0) / t.dt as f64).round() as usize;
    est.operator(i, it)[0]
}

#[test]
fn nlbf_ranges_from_the_data_keep_steep_events_and_the_gap_is_copied_through() {
    let t = shot_with_gap();
    let preset = nlbf::synth::params_synthetic_2d();
    let mut p = preset;
    let (space, line) = nlbf::slopes::from_data(&t, &p, 1400.0).unwrap();
    p.search = space;
    assert!(line.contains("1400 m/s") && space.a.max >= 1.0 / 1400.0, "{line}");
    let est = nlbf::estimate(&t, &p, &[Backend::Cpu]).unwrap();
    // The gap's parameter trace has an empty (B, E) aperture: unestimated, not an error.
    assert!(est.unestimated_count() >= 1 && est.unestimated_count() < est.grid.len(), "{:?}", est.unestimated);
    let truth = 1.0 / 1500.0f32;
    // Down-dip of the source (x < xs, the time falls with x) and up-dip.
    for (x, want) in [(X0 + 140.0, -truth), (X0 + 980.0, truth)] {
        let a = direct_wave_a(&est, &t, x);
        assert!((a - want).abs() <= 2.0 * space.a.step as f32, "A {a} at x {x}, the direct wave's {want}");
    }
    // The synthetic preset's ranges cannot reach the direct wave (what the derived ranges fix).
    let old = nlbf::estimate(&t, &preset, &[Backend::Cpu]).unwrap();
    assert!(direct_wave_a(&old, &t, X0 + 980.0) <= 1e-4 + 1e-9);

    let ep = EnhanceParams { aperture: p.aperture_c };
    let out = nlbf::enhance(&t, &p.coords, &est, &ep, &[Backend::Cpu]).unwrap();
    let copied = nlbf::slopes::copied_traces(&t, &p.coords, &est).unwrap();
    assert!(copied > 0 && copied < t.len(), "{copied}");
    let mut seen = 0;
    for i in 0..t.len() {
        let x = (t.headers[i].gx - est.origin.0) as f32;
        if nlbf::slopes::touches_unestimated(&est, x, 0.0) {
            assert_eq!(out.trace(i), t.trace(i), "trace {i} next to the gap is copied through");
            seen += 1;
        }
    }
    assert_eq!(seen, copied);

    // The CLI: ranges printed, the counts in the summary.
    let dir = tmp_dir("nlbf");
    let input = write(&dir, "shot.sgy", &t);
    let out_dir = dir.join("out");
    let o = seisgpu(&["--device", "cpu", "nlbf", "enhance", "--input", input.to_str().unwrap(), "--out", out_dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("search ranges from the data") && text(&o).contains("copied through"), "{}", text(&o));
    // An existing file as the output folder: named in the error, before the search.
    let o = seisgpu(&["--device", "cpu", "nlbf", "estimate", "--input", input.to_str().unwrap(), "--out", input.to_str().unwrap()]);
    assert!(!o.status.success() && text(&o).contains(input.to_str().unwrap()) && text(&o).contains("folder"), "{}", text(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn gpu_nlbf_leaves_the_gap_unestimated_as_the_cpu() {
    let Some(gpu) = gpu_or_skip("gpu_nlbf_leaves_the_gap_unestimated_as_the_cpu") else { return };
    let t = shot_with_gap();
    let mut p = nlbf::synth::params_synthetic_2d();
    p.search = nlbf::slopes::from_data(&t, &p, 1400.0).unwrap().0;
    let cpu = nlbf::estimate(&t, &p, &[Backend::Cpu]).unwrap();
    let g = nlbf::estimate(&t, &p, &[Backend::Gpu(gpu.clone())]).unwrap();
    assert_eq!(g.unestimated, cpu.unestimated);
    for (q, u) in cpu.unestimated.iter().enumerate() {
        if !u {
            assert_eq!(&g.code[q * t.ns..(q + 1) * t.ns], &cpu.code[q * t.ns..(q + 1) * t.ns], "parameter trace {q}");
        }
    }
    let ep = EnhanceParams { aperture: p.aperture_c };
    let a = nlbf::enhance(&t, &p.coords, &cpu, &ep, &[Backend::Cpu]).unwrap();
    let b = nlbf::enhance(&t, &p.coords, &cpu, &ep, &[Backend::Gpu(gpu)]).unwrap();
    assert!(seisgpu_lab::bench::rel_l2(&b.data, &a.data) < 1e-5);
}

#[test]
fn truncated_npy_and_negative_option_values_get_our_messages() {
    let dir = tmp_dir("npy");
    let p = dir.join("volume.npy");
    seisgpu_host::io::npy::write_npy(&p, &vec![1.0; 4 * 6 * 8], &[4, 6, 8]).unwrap();
    let bytes = std::fs::read(&p).unwrap();
    std::fs::write(&p, &bytes[..bytes.len() - 100]).unwrap();
    let out = dir.join("out.npy");
    let o = seisgpu(&["--device", "cpu", "wavepacket", "denoise", "--input", p.to_str().unwrap(), "--output", out.to_str().unwrap()]);
    assert!(!o.status.success() && text(&o).contains("volume.npy") && text(&o).contains("truncated"), "{}", text(&o));
    assert!(!text(&o).contains("failed to fill whole buffer"), "{}", text(&o));
    for cmd in ["ktm", "pstm"] {
        let o = seisgpu(&["--device", "cpu", cmd, "migrate", "--velocity", "-2000", "-o", out.to_str().unwrap()]);
        assert!(!o.status.success() && !text(&o).contains("unexpected argument"), "{cmd}: {}", text(&o));
        assert!(text(&o).contains("-2000") && text(&o).contains("positive"), "{cmd}: {}", text(&o));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
