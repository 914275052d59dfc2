//! The one `--velocity` argument of `nmo`, `ktm migrate`, `pstm migrate` and `srm` in each form
//! (constant, t:v pairs, per-CMP text functions from a `velan` run, a .npy grid with its sidecar,
//! legacy spellings): the same numbers as the old spellings, `velan -> nmo` flattening events,
//! laterally varying PSTM on the GPU against the CPU, and errors naming the argument.

use std::path::{Path, PathBuf};
use std::process::Output;

use seisgpu_host::backend::gpu_or_skip;
use seisgpu_host::io::npy::{read_f32, write_npy};
use seisgpu_host::io::segy::{read_segy, write_segy, WriteOptions};
use seisgpu_host::nlbf::{self, NmoParams};
use seisgpu_host::velocity::grid::write_npy_grid;
use seisgpu_host::velocity::{commands, examples, Domain, VelocityFunction, VelocityGrid, VelocityModel};
use seisgpu_host::grid::ImageGrid;
use seisgpu_host::{pstm, Backend, TraceHeader, TraceSet};

use crate::common::rel_l2;
use crate::velan::{known_gathers, TRUTH};

fn tmp_dir(name: &str) -> PathBuf { crate::common::fresh_dir("velocity-args", name) }

use crate::common::{printed as text, run_cli as seisgpu};

fn s(p: &Path) -> &str { p.to_str().unwrap() }

/// Runs `args`, asserting success.
fn ok(args: &[&str]) -> Output {
    let o = seisgpu(args);
    assert!(o.status.success(), "{args:?}: {}", text(&o));
    o
}

/// Runs `args`, asserting failure with a message holding every one of `want`.
fn fails(args: &[&str], want: &[&str]) {
    let o = seisgpu(args);
    assert!(!o.status.success(), "{args:?} succeeded: {}", text(&o));
    for w in want {
        assert!(text(&o).contains(w), "{args:?}: `{w}` not in: {}", text(&o));
    }
    assert!(!text(&o).contains("panicked"), "{}", text(&o));
}

/// A one-function grid (x nodes `xs`, one y) of `f` sampled every `dt` to `n` samples.
fn grid_of(f: &VelocityFunction, xs: &[f64], dt: f64, n: usize) -> VelocityGrid {
    let col = f.sample(0.0, dt as f32, n);
    VelocityGrid { domain: f.domain, n: [xs.len(), 1, n], origin: [xs[0], 0.0, 0.0],
        step: [if xs.len() > 1 { xs[1] - xs[0] } else { 1.0 }, 1.0, dt], v: col.repeat(xs.len()) }
}

/// Largest |a - b| over the largest |a|.
fn max_rel(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let m = a.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-30);
    a.iter().zip(b).fold(0.0f32, |d, (x, y)| d.max((x - y).abs())) / m
}

/// Residual moveout (samples) of every true reflection after NMO: (traces kept, worst, mean).
fn residuals(out: &TraceSet, t0: f32) -> (usize, usize, f64) {
    let c = (t0 / out.dt).round() as usize;
    let mut r = Vec::new();
    for i in 0..out.len() {
        let tr = out.trace(i);
        if tr[c - 2..=c + 2].iter().all(|&a| a == 0.0) {
            continue;
        }
        let peak = (c - 8..=c + 8).max_by(|&x, &y| tr[x].abs().total_cmp(&tr[y].abs())).unwrap();
        r.push(peak.abs_diff(c));
    }
    (r.len(), r.iter().max().copied().unwrap_or(0), r.iter().sum::<usize>() as f64 / r.len().max(1) as f64)
}

#[test]
fn nmo_velocity_in_every_form() {
    let dir = tmp_dir("nmo");
    let t = known_gathers(3, 40);
    let input = dir.join("cmps.sgy");
    write_segy(&input, &t, &WriteOptions::default()).unwrap();
    let out = |name: &str| dir.join(name);

    // velan picks -> nmo: every reflection flat on every CMP.
    let picks = out("picks.txt");
    ok(&["--device", "cpu", "velan", s(&input), "-o", s(&picks), "--vmin", "1400", "--vmax", "4000", "--nv", "131"]);
    ok(&["--device", "cpu", "nmo", "--input", s(&input), "--velocity", s(&picks), "-o", s(&out("picks.sgy"))]);
    let flat = read_segy(&out("picks.sgy")).unwrap().1;
    for &(t0, _) in &TRUTH {
        let (kept, worst, mean) = residuals(&flat, t0);
        assert!(kept >= 30 && worst <= 3 && mean <= 1.0, "reflection at {t0} s after velan -> nmo: {kept} kept, worst {worst}, mean {mean}");
    }

    // Pairs: the library's NMO with the same knots, to the bit.
    let pairs = "0:1800,1.0:2150,1.6:2600";
    ok(&["--device", "cpu", "nmo", "--input", s(&input), "--velocity", pairs, "-o", s(&out("pairs.sgy"))]);
    let by_pairs = read_segy(&out("pairs.sgy")).unwrap().1;
    let np = NmoParams { velocity: vec![(0.0, 1800.0), (1.0, 2150.0), (1.6, 2600.0)], max_stretch: 0.5 };
    let want = nlbf::nmo(&Backend::Cpu, &read_segy(&input).unwrap().1, &np).unwrap();
    assert_eq!(by_pairs.data, want.data);

    // A constant is the one-pair function.
    ok(&["--device", "cpu", "nmo", "--input", s(&input), "--velocity", "2000", "-o", s(&out("c.sgy"))]);
    ok(&["--device", "cpu", "nmo", "--input", s(&input), "--velocity", "0:2000", "-o", s(&out("c1.sgy"))]);
    assert_eq!(read_segy(&out("c.sgy")).unwrap().1.data, read_segy(&out("c1.sgy")).unwrap().1.data);

    // A .npy grid (sidecar) of the pairs' function: the same correction up to rounding.
    let f = VelocityFunction::parse_pairs(Domain::Time, pairs, "test").unwrap();
    let g = out("v.npy");
    write_npy_grid(&g, &grid_of(&f, &[900.0, 1200.0], 0.004, 550)).unwrap();
    ok(&["--device", "cpu", "nmo", "--input", s(&input), "--velocity", s(&g), "-o", s(&out("grid.sgy"))]);
    let by_grid = read_segy(&out("grid.sgy")).unwrap().1;
    assert!(max_rel(&by_pairs.data, &by_grid.data) < 1e-3, "grid against pairs: {}", max_rel(&by_pairs.data, &by_grid.data));

    // Errors name the argument and value.
    fails(&["--device", "cpu", "nmo", "--input", s(&input), "--velocity", "depth:0:1500", "-o", s(&out("e.sgy"))],
        &["--velocity depth:0:1500", "time"]);
    fails(&["--device", "cpu", "nmo", "--input", s(&input), "--velocity", s(&out("none.txt")), "-o", s(&out("e.sgy"))], &["none.txt"]);
    fails(&["--device", "cpu", "nmo", "--input", s(&input), "--velocity", "0:1500,0.5:x", "-o", s(&out("e.sgy"))], &["`x`"]);
    assert!(!out("e.sgy").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The library entry: per-CMP functions give each CMP's own correction (a CMP-wise model whose
/// CMPs all carry one function equals that function's NMO).
#[test]
fn nmo_model_per_cmp_equals_one_function_per_gather() {
    let mut t = known_gathers(3, 12);
    // Midpoints scattered within each CMP (the functions are found by CDP number).
    for (i, h) in t.headers.iter_mut().enumerate() {
        (h.sx, h.gx) = (h.sx + 0.7 * i as f64, h.gx + 0.7 * i as f64);
    }
    let f = |v: f32| VelocityFunction::new(Domain::Time, vec![(0.0, v), (1.6, v + 800.0)], "test").unwrap();
    let set = seisgpu_host::velocity::CmpFunctions::new(Domain::Time, (0..3).map(|c| seisgpu_host::velocity::CmpFunction {
        cdp: Some(100 + c), x: 0.0, y: 0.0, function: f(1500.0 + 200.0 * c as f32) }).collect(), "test".into()).unwrap();
    let got = nlbf::nmo_model(&Backend::Cpu, &t, &VelocityModel::PerCmp(set), 0.5).unwrap();
    for c in 0..3 {
        let idx: Vec<usize> = (0..t.len()).filter(|&i| t.headers[i].cdp == 100 + c as i32).collect();
        let sub = TraceSet { headers: idx.iter().map(|&i| t.headers[i]).collect(), data: idx.iter().flat_map(|&i| t.trace(i).to_vec()).collect::<Vec<f32>>().into(),
            ns: t.ns, dt: t.dt, t0: t.t0 };
        let want = nlbf::nmo(&Backend::Cpu, &sub, &NmoParams { velocity: f(1500.0 + 200.0 * c as f32).knots, max_stretch: 0.5 }).unwrap();
        for (k, &i) in idx.iter().enumerate() {
            assert_eq!(got.trace(i), want.trace(k), "CMP {c} trace {i}");
        }
    }
}

/// A 2-D line: 9 shots every 50 m, 24 receivers every 25 m, over a point diffractor (0.4 s at
/// 2000 m/s), 250 samples of 4 ms.
fn line() -> TraceSet {
    let mut h = Vec::new();
    for s in 0..9 {
        for r in 0..24 {
            let sx = 1000.0 + s as f64 * 50.0;
            h.push(TraceHeader { sx, sy: 500.0, gx: sx + 50.0 + r as f64 * 25.0, gy: 500.0, ..Default::default() });
        }
    }
    let mut t = TraceSet::zeros(h, 250, 0.004);
    seisgpu_host::synth::events::diffractor(&mut t, 1368.75, 500.0, 400.0, 2000.0, 25.0);
    t
}

/// Same function at both ends of the line as per-CMP text.
fn text_functions(path: &Path, knots: &str) {
    std::fs::write(path, format!("# units: time s, velocity m/s (RMS), x y m\nx=900 y=500 {knots}\nx=2000 y=500 {knots}\n")).unwrap();
}

#[test]
fn ktm_and_pstm_velocity_in_every_form() {
    let dir = tmp_dir("mig");
    let input = dir.join("line.sgy");
    write_segy(&input, &line(), &WriteOptions::default()).unwrap();
    let run = |cmd: &str, vel: &[&str], name: &str| -> Vec<f32> {
        let out = dir.join(name);
        let mut args = vec!["--device", "cpu", cmd, "migrate", "--input", s(&input), "-o", s(&out)];
        if cmd == "pstm" {
            args.extend(["--traveltime", "exact"]);
        }
        args.extend(vel);
        ok(&args);
        read_f32(&out).unwrap().1
    };
    for cmd in ["ktm", "pstm"] {
        let n = |x: &str| format!("{cmd}-{x}.npy");
        // The default is 2000 m/s.
        let c = run(cmd, &["--velocity", "2000"], &n("c"));
        assert_eq!(c, run(cmd, &[], &n("default")), "{cmd}");
        // Pairs at equal spacing; ktm's old --vrms spelling gives the same numbers.
        let pairs = "0:1800,0.5:2000,1.0:2200";
        let p = run(cmd, &["--velocity", pairs], &n("pairs"));
        if cmd == "ktm" {
            assert_eq!(p, run(cmd, &["--vrms", pairs], &n("vrms")), "ktm --vrms");
        } else {
            // The old gradient spelling of the same straight line.
            let g = run(cmd, &["--velocity", "1800", "--velocity-gradient", "400"], &n("gradient"));
            assert!(rel_l2(&g, &p) < 1e-5, "pstm: gradient against pairs of the same line: {}", rel_l2(&g, &p));
        }
        // Pairs at any spacing.
        let uneven = run(cmd, &["--velocity", "0:1800,0.3:1920,1.0:2200"], &n("uneven"));
        assert!(rel_l2(&uneven, &p) < 1e-3, "{cmd}: uneven pairs of the same line: {}", rel_l2(&uneven, &p));
        // Per-CMP text functions (a laterally varying model that happens to be uniform).
        let txt = dir.join("v.txt");
        text_functions(&txt, "0:1800 0.5:2000 1.0:2200");
        let by_text = run(cmd, &["--velocity", s(&txt)], &n("text"));
        assert!(rel_l2(&by_text, &p) < 1e-3, "{cmd}: text functions against pairs: {}", rel_l2(&by_text, &p));
        // A .npy grid with its sidecar.
        let f = VelocityFunction::parse_pairs(Domain::Time, pairs, "test").unwrap();
        let g = dir.join("v.npy");
        write_npy_grid(&g, &grid_of(&f, &[900.0, 1450.0, 2000.0], 0.01, 101)).unwrap();
        let by_grid = run(cmd, &["--velocity", s(&g)], &n("grid"));
        assert!(rel_l2(&by_grid, &p) < 1e-3, "{cmd}: grid against pairs: {}", rel_l2(&by_grid, &p));
        // A laterally varying model changes the image.
        std::fs::write(&txt, "x=900 y=500 0:2400 1.0:2600\nx=2000 y=500 0:1500 1.0:1700\n").unwrap();
        let lateral = run(cmd, &["--velocity", s(&txt)], &n("lateral"));
        assert!(rel_l2(&lateral, &p) > 0.05, "{cmd}: a lateral model made no difference");
        // Errors name the argument.
        let out = dir.join(n("bad"));
        let base = ["--device", "cpu", cmd, "migrate", "--input", s(&input), "-o", s(&out)];
        fails(&[&base[..], &["--velocity", "depth:0:1500,500:2000"]].concat(), &["--velocity depth:0:1500,500:2000", "time"]);
        fails(&[&base[..], &["--velocity", "0:1500,0.2:1400x"]].concat(), &["--velocity 0:1500,0.2:1400x", "1400x"]);
        fails(&[&base[..], &["--velocity", "0:1500,0.2:-3"]].concat(), &["-3", "positive"]);
        assert!(!out.exists());
    }
    let out = dir.join("bad.npy");
    fails(&["--device", "cpu", "pstm", "migrate", "--input", s(&input), "-o", s(&out), "--velocity", "0:1800,1:2200",
        "--velocity-gradient", "100"], &["--velocity-gradient 100", "constant"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// PSTM with v_rms at every image column ([`commands::pstm_vrms`] of a laterally varying model):
/// the GPU against the CPU.
#[test]
fn gpu_pstm_lateral_velocity_equals_cpu() {
    let Some(gpu) = gpu_or_skip("gpu_pstm_lateral_velocity_equals_cpu") else { return };
    let t = line();
    let ep = examples::ExampleParams { cmps: 21, cmp_spacing: 50.0, first_cdp: 1, ns: 250, dt: 0.004, v0: 1600.0 };
    let mut funcs = examples::functions(examples::Example::Lateral, &ep, 0.04);
    for (k, f) in funcs.functions.iter_mut().enumerate() {
        (f.cdp, f.x, f.y) = (None, 900.0 + 50.0 * k as f64, 500.0);
    }
    let model = VelocityModel::PerCmp(funcs);
    let (nx, ny, nz) = (40, 1, 250);
    let vrms = commands::pstm_vrms(&model, &ImageGrid { x0: 1000.0, dx: 12.5, nx, y0: 500.0, dy: 12.5, ny, tau0: 0.0, dtau: 0.004, ntau: nz }, "test").unwrap();
    assert_eq!(vrms.len(), nx * ny * nz);
    assert!(vrms[..nz] != vrms[(nx - 1) * nz..], "the model does not vary laterally");
    let p = pstm::PstmParams { nx, ny, x0: 1000.0, y0: 500.0, dx: 12.5, dy: 12.5, nz, tau0: 0.0, dtau: 0.004, noff: 1, offset0: 0.0,
        doffset: 1e6, vrms, eta: vec![], aperture: 800.0, stretch: 0.5, dynamic_max_step: 32, gpu: pstm::GpuTuning::fastest() };
    for mode in [pstm::TraveltimeMode::Exact, pstm::TraveltimeMode::Static8] {
        let cpu = pstm::migrate(&t, &p, mode, pstm::TraveltimeModel::Dsr, &[Backend::Cpu]).unwrap();
        let g = pstm::migrate(&t, &p, mode, pstm::TraveltimeModel::Dsr, &[Backend::Gpu(gpu.clone())]).unwrap();
        let e = rel_l2(&g.unpadded(), &cpu.unpadded());
        assert!(e < 1e-4, "{mode:?}: GPU against CPU rel L2 {e}");
    }
}

#[test]
fn srm_velocity_in_every_form() {
    let dir = tmp_dir("srm");
    // One 2D shot over a scatterer in 2000 m/s: 41 nodes of 20 m, 40 depths of 10 m.
    let (t, model) = seisgpu_host::srm::synthetic::point_scatterer(41, 1, 40, 20.0, 10.0, 2000.0, (400.0, 0.0), (400.0, 0.0, 250.0), 256,
        0.004, 20.0, 1);
    let traces = dir.join("shot.npy");
    let geometry = dir.join("geom.npy");
    write_npy(&traces, &t.data, &[t.len() as u64, t.ns as u64]).unwrap();
    let geom: Vec<f32> = t.headers.iter().flat_map(|h| [h.sx as f32, h.sy as f32, h.gx as f32, h.gy as f32]).collect();
    write_npy(&geometry, &geom, &[t.len() as u64, 4]).unwrap();
    let legacy = dir.join("model.npy");
    write_npy(&legacy, &model.v, &[model.nz as u64, model.nx as u64]).unwrap();
    let run = |vel: &[&str], name: &str| -> Vec<f32> {
        let out = dir.join(name);
        let mut args = vec!["--device", "cpu", "srm", "--traces", s(&traces), "--geometry", s(&geometry), "--dx", "20", "--dy", "20",
            "--dz", "10", "--aperture", "0", "--fmax", "25", "-o", s(&out)];
        args.extend(vel);
        ok(&args);
        read_f32(&out).unwrap().1
    };
    // The model as a grid file, as a constant, as pairs and as a depth grid with its sidecar.
    // (srm sums its frequencies in parallel, so two runs agree to rounding, not to the bit.)
    let want = run(&["--velocity", s(&legacy)], "legacy.npy");
    let same = |got: Vec<f32>, what: &str| {
        assert_eq!(got.len(), want.len(), "{what}: image size");
        assert!(rel_l2(&got, &want) < 1e-6, "{what} against the model file: rel L2 {}", rel_l2(&got, &want));
    };
    same(run(&["--velocity", "depth:2000", "--nz", "40"], "constant.npy"), "constant");
    same(run(&["--velocity", "depth:0:2000,390:2000"], "pairs.npy"), "pairs");
    let f = VelocityFunction::constant(Domain::Depth, 2000.0, "test").unwrap();
    let g = dir.join("v.npy");
    let mut grid = grid_of(&f, &[0.0, 400.0, 800.0], 10.0, 40);
    grid.v.iter_mut().for_each(|v| *v = 2000.0);
    write_npy_grid(&g, &grid).unwrap();
    same(run(&["--velocity", s(&g)], "grid.npy"), "a depth grid with its sidecar");
    // A library check of the sampling: a v(z) profile equals the lateral repeat of its samples.
    let pm = VelocityModel::parse("depth:0:1500,200:2500").unwrap();
    let e = commands::srm_model(&pm, 1 << 20, 1 << 20, 30, 20.0, 20.0, 10.0, 0.0, 0.0, "--velocity x").unwrap_err().to_string();
    assert!(e.contains("--velocity x") && e.contains("too large"), "{e}");
    let m = commands::srm_model(&pm, 5, 2, 30, 20.0, 20.0, 10.0, 0.0, 0.0, "test").unwrap();
    let vz: Vec<f32> = VelocityFunction::parse_pairs(Domain::Depth, "0:1500,200:2500", "t").unwrap().sample(0.0, 10.0, 30);
    let want_m = seisgpu_host::srm::VelocityModel::from_profile(&vz, 5, 2, 20.0, 20.0, 10.0, 0.0, 0.0);
    assert_eq!((m.v, m.nx, m.ny, m.nz), (want_m.v, want_m.nx, want_m.ny, want_m.nz));
    // Time models and a constant without --nz are errors naming the argument.
    let bad = dir.join("bad.npy");
    let base = ["--device", "cpu", "srm", "--traces", s(&traces), "--geometry", s(&geometry), "-o", s(&bad)];
    fails(&[&base[..], &["--velocity", "0:1500,1:2500"]].concat(), &["--velocity 0:1500,1:2500", "depth"]);
    fails(&[&base[..], &["--velocity", "depth:2000"]].concat(), &["--velocity depth:2000", "--nz"]);
    fails(&[&base[..], &["--velocity", "depth:0:2000,300:-5"]].concat(), &["-5"]);
    assert!(!dir.join("bad.npy").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Per-CMP NMO on the GPU (one launch per CMP) against the CPU.
#[test]
fn gpu_nmo_model_per_cmp_equals_cpu() {
    let Some(gpu) = gpu_or_skip("gpu_nmo_model_per_cmp_equals_cpu") else { return };
    let t = known_gathers(4, 24);
    let ep = examples::ExampleParams { cmps: 4, cmp_spacing: 25.0, first_cdp: 100, ns: 550, dt: 0.004, v0: 1500.0 };
    let model = VelocityModel::PerCmp(examples::functions(examples::Example::Lateral, &ep, 0.1));
    let cpu = nlbf::nmo_model(&Backend::Cpu, &t, &model, 0.5).unwrap();
    let g = nlbf::nmo_model(&Backend::Gpu(gpu), &t, &model, 0.5).unwrap();
    let worst = g.data.iter().zip(&cpu.data).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(worst <= 1e-5, "per-CMP NMO: GPU and CPU differ by {worst}");
    assert!(cpu.data.iter().any(|&v| v != 0.0));
}
