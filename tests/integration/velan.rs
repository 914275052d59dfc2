//! Velocity analysis: picks of known v_rms (CPU and GPU), NMO with the picks, GPU against CPU on
//! random gathers, the CLI end to end and its messages for bad input.

use seisgpu_host::backend::gpu_or_skip;
use seisgpu_host::traces::{TraceHeader, TraceSet};
use seisgpu_host::velan::{self, cpu, gpu, pick, Gathers, Scan, VelanParams};
use seisgpu_host::velocity::{Location, VelocityModel};
use seisgpu_host::{synth, Backend};

use crate::common::random_vec;

/// The reflectors of the known model: (t0 s, v_rms m/s), v_rms increasing with plausible Dix
/// interval velocities (2400 and 3400 m/s).
pub(crate) const TRUTH: [(f32, f32); 3] = [(0.5, 1800.0), (1.0, 2150.0), (1.6, 2600.0)];

/// `cmps` CMP gathers of `fold` traces, offsets 50..2450 m, the three reflections (25 Hz Ricker)
/// and a little noise.
pub(crate) fn known_gathers(cmps: usize, fold: usize) -> TraceSet {
    let mut headers = Vec::new();
    for c in 0..cmps {
        let xc = 1000.0 + 25.0 * c as f64;
        for k in 0..fold {
            let off = 50.0 + 2400.0 * k as f64 / (fold - 1) as f64;
            headers.push(TraceHeader { sx: xc - off / 2.0, gx: xc + off / 2.0, offset: off, cdp: 100 + c as i32, ..Default::default() });
        }
    }
    let mut t = TraceSet::zeros(headers, 550, 0.004);
    for &(t0, v) in &TRUTH {
        synth::events::hyperbolic_reflection(&mut t, t0, v, 25.0, 1.0);
    }
    synth::add_noise(&mut t.data, 0.02, 3);
    t
}

fn scan_params() -> VelanParams { VelanParams { vmin: 1400.0, vmax: 4000.0, nv: 131, window: 0.04, eta: 0.0, max_stretch: 0.6 } }

/// Every true reflector has a pick within 20 ms (half the window) and 2 %, and the picked function
/// is within 2 % at each reflector's time.
fn check_picks(picks: &[Vec<pick::Pick>], what: &str) {
    for (c, p) in picks.iter().enumerate() {
        for &(t0, v) in &TRUTH {
            let near = p.iter().find(|k| (k.t - t0).abs() <= 0.020);
            let Some(k) = near else { panic!("{what}: CMP {c}: no pick near {t0} s; picks {p:?}") };
            assert!((k.v - v).abs() <= 0.02 * v, "{what}: CMP {c}: pick {k:?} against {v} m/s");
        }
        let f = seisgpu_host::velocity::VelocityFunction { domain: seisgpu_host::velocity::Domain::Time,
            knots: p.iter().map(|k| (k.t, k.v)).collect() };
        for &(t0, v) in &TRUTH {
            assert!((f.at(t0) - v).abs() <= 0.02 * v, "{what}: CMP {c}: function {} at {t0} s against {v}", f.at(t0));
        }
    }
}

#[test]
fn cpu_picks_known_velocities_and_nmo_flattens_them() {
    let t = known_gathers(4, 48);
    let g = Gathers::new(&t, 12.5).unwrap();
    assert_eq!(g.len(), 4);
    assert_eq!(g.location[1].cdp, Some(101));
    let p = scan_params();
    let scan = Scan::new(&p, &g).unwrap();
    let panels = velan::semblance(&Backend::Cpu, &g, &p).unwrap();
    assert!(panels.values.iter().all(|s| (0.0..=1.0 + 1e-5).contains(s)));
    let picks = pick::pick_all(&g, &panels, &scan, 0.2, 6);
    check_picks(&picks, "CPU");

    // NMO with the picked functions: every reflection is flat (its peak within 3 samples of t0 on
    // every trace the stretch mute keeps, 1 on average; uncorrected, far traces are 100+ late).
    let funcs = pick::functions(&g, &picks, "test").unwrap();
    let model = VelocityModel::PerCmp(funcs);
    let vrms: Vec<Vec<f32>> = g.location.iter().map(|l| model.sample_at(l, 0.0, t.dt, t.ns)).collect();
    let out = velan::nmo_gathers(&t, &g, &vrms, p.max_stretch);
    for &(t0, _) in &TRUTH {
        let c = (t0 / t.dt).round() as usize;
        let mut residual = Vec::new();
        for i in 0..out.len() {
            let tr = out.trace(i);
            if tr[c - 2..=c + 2].iter().all(|&a| a == 0.0) {
                continue; // muted
            }
            let peak = (c - 8..=c + 8).max_by(|&x, &y| tr[x].abs().total_cmp(&tr[y].abs())).unwrap();
            residual.push(peak.abs_diff(c));
        }
        let worst = residual.iter().max().copied().unwrap_or(0);
        let mean = residual.iter().sum::<usize>() as f64 / residual.len().max(1) as f64;
        println!("reflection at {t0} s: {} traces kept, residual moveout max {worst} samples, mean {mean:.2}", residual.len());
        assert!(residual.len() >= 40 && worst <= 3 && mean <= 1.0, "reflection at {t0} s not flat: {residual:?}");
    }
    // Uncorrected, the far traces are far from flat (the test would notice a no-op).
    let far = t.trace(47);
    let c = (1.0 / t.dt).round() as usize;
    let peak = (c - 8..=c + 8).max_by(|&x, &y| far[x].abs().total_cmp(&far[y].abs())).unwrap();
    assert!(peak.abs_diff(c) > 2);
}

#[test]
fn gathers_from_midpoint_bins_without_cdp_numbers() {
    let mut t = known_gathers(3, 24);
    for h in &mut t.headers {
        h.cdp = 0;
    }
    let g = Gathers::new(&t, 25.0).unwrap();
    assert_eq!(g.len(), 3);
    assert!(g.location.iter().all(|l| l.cdp.is_none()));
    assert!((g.location[2].x - 1050.0).abs() < 1e-9);
    let fold: Vec<usize> = (0..g.len()).map(|i| g.traces(i).len()).collect();
    assert_eq!(fold, vec![24; 3]);
}

#[test]
fn bad_parameters_are_errors_naming_them() {
    let t = known_gathers(1, 8);
    let g = Gathers::new(&t, 12.5).unwrap();
    let e = |p: VelanParams| format!("{:#}", velan::semblance(&Backend::Cpu, &g, &p).unwrap_err());
    assert!(e(VelanParams { vmin: -100.0, ..scan_params() }).contains("--vmin -100"));
    assert!(e(VelanParams { vmax: 1000.0, ..scan_params() }).contains("--vmax"));
    assert!(e(VelanParams { nv: 1, ..scan_params() }).contains("--nv"));
    assert!(e(VelanParams { window: 2.0, ..scan_params() }).contains("--window"));
    assert!(e(VelanParams { eta: f32::NAN, ..scan_params() }).contains("--eta"));
    let mut bad = t.clone();
    bad.data[5 * bad.ns + 3] = f32::NAN;
    let e = format!("{:#}", Gathers::new(&bad, 12.5).unwrap_err());
    assert!(e.contains("trace 5 sample 3"), "{e}");
}

#[test]
fn gpu_picks_known_velocities() {
    let Some(g0) = gpu_or_skip("gpu_picks_known_velocities") else { return };
    let t = known_gathers(4, 48);
    let g = Gathers::new(&t, 12.5).unwrap();
    let p = scan_params();
    let scan = Scan::new(&p, &g).unwrap();
    let panels = velan::semblance(&Backend::Gpu(g0), &g, &p).unwrap();
    let picks = pick::pick_all(&g, &panels, &scan, 0.2, 6);
    check_picks(&picks, "GPU");
    let cpu_panels = velan::semblance(&Backend::Cpu, &g, &p).unwrap();
    assert_eq!(picks, pick::pick_all(&g, &cpu_panels, &scan, 0.2, 6), "GPU and CPU picks differ");
}

/// Random gathers of uneven folds (1 to 70 traces, one with offsets so long at low velocity that
/// its samples cannot be staged), sizes not multiples of the block: bit-identical panels, into a
/// NaN-poisoned buffer, hyperbolic and with eta, with a delayed first sample.
#[test]
fn gpu_equals_cpu_on_random_gathers() {
    let Some(g0) = gpu_or_skip("gpu_equals_cpu_on_random_gathers") else { return };
    let folds = [1usize, 7, 70, 33, 2, 64, 19];
    let ns = 517;
    let ntr: usize = folds.iter().sum();
    let mut headers = Vec::new();
    for (c, &f) in folds.iter().enumerate() {
        for k in 0..f {
            let off = if c == 2 { 8000.0 * (k + 1) as f64 / f as f64 } else { 37.0 * k as f64 + 3.0 * c as f64 };
            headers.push(TraceHeader { sx: 0.0, gx: off, offset: off, cdp: c as i32 + 1, ..Default::default() });
        }
    }
    let mut t = TraceSet::zeros(headers, ns, 0.004);
    t.t0 = 0.1;
    t.data = random_vec(ntr * ns, "velan gathers").into();
    let g = Gathers::new(&t, 12.5).unwrap();
    for (eta, h_ms) in [(0.0f32, 44.0f32), (0.12, 12.0)] {
        let p = VelanParams { vmin: 600.0, vmax: 4100.0, nv: 37, window: h_ms * 1e-3, eta, max_stretch: 2.5 };
        let scan = Scan::new(&p, &g).unwrap();
        let want = cpu::semblance(&g, &scan);
        let r = gpu::Resident::upload(&g0, &g, &scan).unwrap();
        let mut out = g0.poisoned(want.len()).unwrap();
        gpu::launch_all(&g0, &r, &g, &scan, &mut out).unwrap();
        let got = g0.download(&out).unwrap();
        let bad = got.iter().zip(&want).position(|(a, b)| a.to_bits() != b.to_bits());
        if let Some(i) = bad {
            let (gi, rest) = (i / (p.nv * ns), i % (p.nv * ns));
            panic!("eta {eta}: panel value {i} (gather {gi}, velocity {}, t0 {}) differs: GPU {} CPU {}", rest / ns, rest % ns, got[i], want[i]);
        }
        // The batched path with its own buffer gives the same.
        assert_eq!(gpu::semblance(&g0, &g, &scan).unwrap(), want);
    }
}

// ---- The CLI ----

fn seisgpu(args: &[&str]) -> std::process::Output {
    std::process::Command::new(crate::common::seisgpu_bin()).args(args).output().expect("seisgpu runs")
}

fn tmp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("seisgpu-velan-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn cli_velan_writes_picks_panels_and_nmo() {
    let dir = tmp_dir("cli");
    let input = dir.join("cmps.sgy");
    seisgpu_host::io::segy::write_segy(&input, &known_gathers(3, 40), &Default::default()).unwrap();
    let (picks, sem, png, nmo) = (dir.join("picks.txt"), dir.join("sem.sgy"), dir.join("png"), dir.join("nmo.sgy"));
    let o = seisgpu(&["--device", "cpu", "velan", input.to_str().unwrap(), "-o", picks.to_str().unwrap(), "--vmin", "1400", "--vmax",
        "4000", "--nv", "66", "--semblance", sem.to_str().unwrap(), "--png", png.to_str().unwrap(), "--nmo", nmo.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // The picks read back as a velocity model, within 2 % at the reflectors.
    let m = VelocityModel::parse(picks.to_str().unwrap()).unwrap();
    for &(t0, v) in &TRUTH {
        let got = m.function_at(&Location { cdp: Some(101), x: 0.0, y: 0.0 }).at(t0);
        assert!((got - v).abs() <= 0.02 * v, "{got} against {v} at {t0} s");
    }
    let (_, s) = seisgpu_host::io::segy::read_segy(&sem).unwrap();
    assert_eq!((s.len(), s.ns), (3 * 66, 550));
    assert_eq!(std::fs::read_dir(&png).unwrap().count(), 3);
    let (_, n) = seisgpu_host::io::segy::read_segy(&nmo).unwrap();
    assert_eq!(n.len(), 120);

    // Bad input: our messages, negative numbers included.
    let e = seisgpu(&["--device", "cpu", "velan", input.to_str().unwrap(), "-o", picks.to_str().unwrap(), "--vmin", "-1500"]);
    let msg = String::from_utf8_lossy(&e.stderr);
    assert!(!e.status.success() && msg.contains("--vmin -1500"), "{msg}");
    let e = seisgpu(&["--device", "cpu", "velan", input.to_str().unwrap(), "-o", picks.to_str().unwrap(), "--nv", "-5"]);
    let msg = String::from_utf8_lossy(&e.stderr);
    assert!(!e.status.success() && msg.contains("--nv -5 must be"), "{msg}");
    let e = seisgpu(&["--device", "cpu", "velan", dir.join("none.sgy").to_str().unwrap(), "-o", picks.to_str().unwrap()]);
    assert!(!e.status.success() && String::from_utf8_lossy(&e.stderr).contains("none.sgy"));
    // CMPs thinner than --min-fold: the error says so (not "lower the threshold") and no file is written.
    let thin = dir.join("thin.sgy");
    seisgpu_host::io::segy::write_segy(&thin, &known_gathers(3, 5), &Default::default()).unwrap();
    let out = dir.join("thin-picks.txt");
    let e = seisgpu(&["--device", "cpu", "velan", thin.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let msg = String::from_utf8_lossy(&e.stderr);
    assert!(!e.status.success() && msg.contains("has 5 traces, fewer than --min-fold 6"), "{msg}");
    assert!(!out.exists());
}

#[test]
fn cli_synth_velocity_writes_models_every_command_reads() {
    let dir = tmp_dir("synth");
    for (name, model) in [("v.txt", "lateral"), ("v.npy", "lateral"), ("v.sgy", "lateral"), ("g.txt", "gradient")] {
        let out = dir.join(name);
        let o = seisgpu(&["synth", "velocity", "-o", out.to_str().unwrap(), "--model", model, "--nx", "11", "--ns", "300", "--format", "ieee"]);
        assert!(o.status.success(), "{name}: {}", String::from_utf8_lossy(&o.stderr));
        let m = VelocityModel::parse(out.to_str().unwrap()).unwrap();
        let v = m.sample_at(&Location { cdp: Some(3), x: 50.0, y: 0.0 }, 0.0, 0.004, 300);
        assert!((v[0] - 1500.0).abs() < 1.0 && v[299] > v[0], "{name}: {} .. {}", v[0], v[299]);
    }
    let o = seisgpu(&["synth", "velocity", "-o", dir.join("bad.txt").to_str().unwrap(), "--velocity", "-3"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("velocity must be positive"));
}
