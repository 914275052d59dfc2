//! Kirchhoff time migration: known-answer physics (diffractor focusing in constant and v(tau)
//! velocity, dipping reflector), CPU against every GPU variant on random data, dot-product tests of
//! migration against modelling, forced chunking and tiling, and bad input.

use seisgpu_host::backend::{gpu_or_skip, Backend};
use seisgpu_host::ktm::{
    self, AntiAlias, Aperture, GpuLimits, ImageGrid, OffsetClasses, Params, Variant, Velocity, VelocityVolume,
};
use seisgpu_host::pstm::{TraveltimeMode, TraveltimeModel};
use seisgpu_host::synth;
use seisgpu_host::traces::{TraceHeader, TraceSet};

use crate::common::{random_vec, rel_l2};

pub(crate) fn grid(nx: usize, ny: usize, ntau: usize, d: f64, dtau: f32) -> ImageGrid {
    ImageGrid { x0: 0.0, dx: d, nx, y0: 0.0, dy: d, ny, tau0: 0.0, dtau, ntau }
}

/// Sources on an `n x n` grid and receivers on an `m x m` grid, both centred on (cx, cy).
pub(crate) fn areal(n: usize, ds: f64, m: usize, dr: f64, cx: f64, cy: f64) -> Vec<TraceHeader> {
    let mut h = Vec::new();
    let c = |k: usize, nn: usize, d: f64| (k as f64 - (nn as f64 - 1.0) / 2.0) * d;
    for i in 0..n * n {
        for j in 0..m * m {
            let mut t = TraceHeader {
                sx: cx + c(i / n, n, ds), sy: cy + c(i % n, n, ds),
                gx: cx + c(j / m, m, dr), gy: cy + c(j % m, m, dr), ..Default::default()
            };
            t.offset = t.distance();
            h.push(t);
        }
    }
    h
}

/// Traces with a Ricker at the DSR traveltime of a point diffractor at (x, y, tau0) in RMS
/// velocity `v` (the PSTM model itself), amplitude 1.
pub(crate) fn dsr_diffractor(headers: Vec<TraceHeader>, ns: usize, dt: f32, x: f64, y: f64, tau0: f64, v: f64) -> TraceSet {
    let mut t = TraceSet::zeros(headers, ns, dt);
    for i in 0..t.len() {
        let h = t.headers[i];
        let ds2 = (h.sx - x).powi(2) + (h.sy - y).powi(2);
        let dr2 = (h.gx - x).powi(2) + (h.gy - y).powi(2);
        let tt = (tau0 * tau0 / 4.0 + ds2 / (v * v)).sqrt() + (tau0 * tau0 / 4.0 + dr2 / (v * v)).sqrt();
        synth::add_ricker(t.trace_mut(i), dt, tt as f32, 25.0, 1.0);
    }
    t
}

/// (ix, iy, it) of the peak of local energy (sum of squares over +-2 samples): the envelope peak,
/// whatever the phase of the imaged wavelet (3-D summation rotates it).
pub(crate) fn energy_peak(img: &ktm::Image) -> (usize, usize, usize) {
    let g = img.grid;
    let mut best = (0.0f64, (0, 0, 0));
    for ix in 0..g.nx {
        for iy in 0..g.ny {
            for it in 2..g.ntau - 2 {
                let e: f64 = (it - 2..=it + 2).map(|k| (img.at(0, ix, iy, k) as f64).powi(2)).sum();
                if e > best.0 {
                    best = (e, (ix, iy, it));
                }
            }
        }
    }
    best.1
}

pub(crate) fn backends(test: &str) -> Vec<Backend> {
    let mut b = vec![Backend::Cpu];
    if let Some(gpu) = gpu_or_skip(test) {
        b.push(Backend::Gpu(gpu));
    }
    b
}

#[test]
fn diffractor_focuses_in_constant_velocity() {
    let g = grid(21, 21, 150, 20.0, 0.004);
    let (x, y) = (200.0, 200.0);
    let traces = dsr_diffractor(areal(4, 120.0, 8, 80.0, x, y), 250, 0.004, x, y, 0.4, 2000.0);
    for backend in backends("diffractor_focuses_in_constant_velocity") {
        for params in [Params::bare(g, Velocity::Constant(2000.0)), Params::full(g, Velocity::Constant(2000.0))] {
            let img = ktm::migrate(&traces, &params, std::slice::from_ref(&backend)).unwrap();
            let (ix, iy, it) = energy_peak(&img);
            println!("{} rho {}: peak at ({ix}, {iy}, {it}), want (10, 10, 100)", backend.name(), params.rho_filter);
            assert!(ix.abs_diff(10) <= 1 && iy.abs_diff(10) <= 1 && it.abs_diff(100) <= 1, "peak at ({ix}, {iy}, {it})");
        }
    }
}

#[test]
fn diffractor_focuses_in_vrms_of_tau() {
    let g = grid(21, 21, 150, 20.0, 0.004);
    let vel = Velocity::Function { t0: 0.0, dt: 0.1, v: (0..8).map(|k| 1600.0 + 1000.0 * 0.1 * k as f32).collect() };
    let (x, y, tau0) = (180.0, 220.0, 0.48);
    let v_at = 1600.0 + 1000.0 * tau0;
    let traces = dsr_diffractor(areal(4, 120.0, 8, 80.0, 200.0, 200.0), 250, 0.004, x, y, tau0, v_at);
    for backend in backends("diffractor_focuses_in_vrms_of_tau") {
        let img = ktm::migrate(&traces, &Params::bare(g, vel.clone()), std::slice::from_ref(&backend)).unwrap();
        let (ix, iy, it) = energy_peak(&img);
        println!("{}: peak at ({ix}, {iy}, {it}), want (9, 11, 120)", backend.name());
        assert!(ix.abs_diff(9) <= 1 && iy.abs_diff(11) <= 1 && it.abs_diff(120) <= 1, "peak at ({ix}, {iy}, {it})");
        // A wrong velocity (10 % slow) must not focus as well: the focus is a real test.
        let slow = Velocity::Function { t0: 0.0, dt: 0.1, v: (0..8).map(|k| 0.9 * (1600.0 + 100.0 * k as f32)).collect() };
        let img_slow = ktm::migrate(&traces, &Params::bare(g, slow), std::slice::from_ref(&backend)).unwrap();
        let peak = |im: &ktm::Image| im.data.iter().fold(0.0f32, |a, &v| a.max(v.abs()));
        assert!(peak(&img_slow) < 0.8 * peak(&img), "slow velocity focuses too: {} vs {}", peak(&img_slow), peak(&img));
    }
}

#[test]
fn dipping_reflector_migrates_to_true_dip() {
    // Zero-offset traces along a 2-D line over a 30-degree reflector in 2000 m/s: the time section
    // dips at 2 sin(theta) / v, the migrated image must dip at 2 tan(theta) / v (15 % steeper).
    let (v, theta, z0) = (2000.0f64, 30f64.to_radians(), 300.0f64);
    let (ntr, dxt) = (241, 5.0);
    let headers: Vec<TraceHeader> = (0..ntr)
        .map(|i| {
            let x = -300.0 + i as f64 * dxt;
            TraceHeader { sx: x, gx: x, sy: 0.0, gy: 0.0, ..Default::default() }
        })
        .collect();
    let mut traces = TraceSet::zeros(headers, 400, 0.004);
    for i in 0..traces.len() {
        let x = traces.headers[i].sx;
        let t = 2.0 * (z0 + x * theta.tan()) * theta.cos() / v;
        if t > 0.05 {
            synth::add_ricker(traces.trace_mut(i), 0.004, t as f32, 25.0, 1.0);
        }
    }
    let g = ImageGrid { x0: 100.0, dx: 10.0, nx: 41, y0: 0.0, dy: 10.0, ny: 1, tau0: 0.0, dtau: 0.002, ntau: 600 };
    let mut params = Params::full(g, Velocity::Constant(v as f32));
    params.antialias = Some(AntiAlias { dx: dxt, dy: dxt, max_half_length: 8.0 });
    for backend in backends("dipping_reflector_migrates_to_true_dip") {
        let img = ktm::migrate(&traces, &params, std::slice::from_ref(&backend)).unwrap();
        // Peak time per column, refined by a parabola through the peak and its neighbours.
        let pts: Vec<(f64, f64)> = (0..g.nx)
            .map(|ix| {
                let col: Vec<f32> = (0..g.ntau).map(|it| img.at(0, ix, 0, it)).collect();
                let it = (1..g.ntau - 1).max_by(|&a, &b| col[a].abs().total_cmp(&col[b].abs())).unwrap();
                let (a, b, c) = (col[it - 1] as f64, col[it] as f64, col[it + 1] as f64);
                let shift = if (a - 2.0 * b + c).abs() > 0.0 { 0.5 * (a - c) / (a - 2.0 * b + c) } else { 0.0 };
                (g.x(ix), (it as f64 + shift) * g.dtau as f64)
            })
            .collect();
        let n = pts.len() as f64;
        let (mx, mt) = (pts.iter().map(|p| p.0).sum::<f64>() / n, pts.iter().map(|p| p.1).sum::<f64>() / n);
        let slope = pts.iter().map(|p| (p.0 - mx) * (p.1 - mt)).sum::<f64>() / pts.iter().map(|p| (p.0 - mx).powi(2)).sum::<f64>();
        let want = 2.0 * theta.tan() / v;
        println!("{}: image dip {slope:.6} s/m, true {want:.6}, unmigrated {:.6}", backend.name(), 2.0 * theta.sin() / v);
        assert!((slope - want).abs() < 0.03 * want, "dip {slope} vs {want}");
        // And the depth: tau at x = 300 m is 2 z(x) / v.
        let t300 = pts.iter().find(|p| (p.0 - 300.0).abs() < 1e-6).unwrap().1;
        let want300 = 2.0 * (z0 + 300.0 * theta.tan()) / v;
        println!("tau(300 m) = {t300:.4}, want {want300:.4}");
        assert!((t300 - want300).abs() < 0.006, "tau(300 m) = {t300}, want {want300}");
    }
}

/// Random geometry over and around the image area, random samples.
pub(crate) fn random_traces(ntr: usize, ns: usize, dt: f32, extent: f64, what: &str) -> TraceSet {
    let c = random_vec(4 * ntr, &format!("{what} coordinates"));
    let headers = (0..ntr)
        .map(|i| {
            let p = |k: usize| (c[4 * i + k] as f64 * 0.75 + 0.5) * extent;
            let mut h = TraceHeader { sx: p(0), sy: p(1), gx: p(2), gy: p(3), ..Default::default() };
            h.offset = h.distance();
            h
        })
        .collect();
    let mut t = TraceSet::zeros(headers, ns, dt);
    t.data = random_vec(ntr * ns, &format!("{what} samples")).into();
    t
}

/// Parameter sets that exercise every kernel flavour (bare, corrections, anti-aliasing), a velocity
/// volume and offset classes.
pub(crate) fn configs(g: ImageGrid) -> Vec<(&'static str, Params)> {
    let vfun = Velocity::Function { t0: 0.0, dt: 0.05, v: (0..12).map(|k| 1500.0 + 80.0 * k as f32).collect() };
    let mut corr = Params::bare(g, vfun.clone());
    corr.weights = true;
    corr.mute_stretch = Some(0.6);
    corr.aperture = Aperture { max_distance: 250.0, max_angle_deg: 60.0, taper: 0.3 };
    let mut full = Params::full(g, vfun);
    full.aperture = Aperture { max_distance: 400.0, max_angle_deg: 75.0, taper: 0.2 };
    full.mute_stretch = Some(0.7);
    let vol = VelocityVolume {
        x0: -10.0, dx: 40.0, nx: 4, y0: -10.0, dy: 30.0, ny: 4, t0: 0.0, dt: 0.1, nt: 5,
        v: (0..80).map(|k| 1600.0 + 7.0 * k as f32).collect(),
    };
    let mut gathers = Params::full(g, Velocity::Volume(vol));
    gathers.offset_classes = Some(OffsetClasses { first: 0.0, width: 150.0, count: 3 });
    vec![("bare", Params::bare(g, Velocity::Constant(1800.0))), ("corrections", corr), ("full", full), ("gathers+volume", gathers)]
}

#[test]
fn gpu_variants_match_cpu_on_random_data() {
    let Some(gpu) = gpu_or_skip("gpu_variants_match_cpu_on_random_data") else { return };
    // Sizes that are multiples of nothing: 7 x 5 columns, 77 times, 300 traces of 111 samples.
    let g = ImageGrid { x0: 3.0, dx: 17.0, nx: 7, y0: -4.0, dy: 13.0, ny: 5, tau0: 0.02, dtau: 0.004, ntau: 77 };
    let traces = random_traces(300, 111, 0.004, 160.0, "traces");
    let variants = [Variant::Columns, Variant::ColumnsV1, Variant::ColumnsFast, Variant::PAPER,
        Variant::Paper { block_x: 64, block_y: 2 }, Variant::Paper { block_x: 32, block_y: 3 }];
    for (name, params) in configs(g) {
        let cpu = ktm::migrate(&traces, &params, &[Backend::Cpu]).unwrap();
        assert!(cpu.data.iter().any(|&v| v != 0.0), "{name}: empty CPU image");
        for variant in variants {
            for limits in [GpuLimits::default(), GpuLimits { max_traces_per_chunk: Some(37), max_columns_per_tile: Some(11) }] {
                let p = Params { variant, limits, ..params.clone() };
                let out = ktm::migrate(&traces, &p, &[Backend::Gpu(gpu.clone())]).unwrap();
                assert!(out.data.iter().all(|v| v.is_finite()), "{name} {variant:?}: unwritten (NaN) samples");
                let err = rel_l2(&out.data, &cpu.data);
                println!("{name:15} {:22} chunked {:5}: rel L2 {err:.2e}", variant.name(), limits.max_traces_per_chunk.is_some());
                assert!(err < variant.tolerance(), "{name} {variant:?} {limits:?}: rel L2 {err}");
            }
        }
    }
}

/// Image time 0 right under zero-offset traces (source and receiver on an image column): the
/// traveltime there is ~1e-15 samples and the spreading weight's argument subnormal, which the
/// GPU's flush-to-zero reciprocal square root once turned into NaN. Every variant and parameter
/// set: finite, and the CPU's image.
#[test]
fn gpu_zero_time_under_zero_offset_traces() {
    let Some(gpu) = gpu_or_skip("gpu_zero_time_under_zero_offset_traces") else { return };
    // Inside the velocity volume of `configs` (-10..110 m inline, -10..80 m crossline).
    let g = ImageGrid { x0: 0.0, dx: 15.0, nx: 7, y0: 0.0, dy: 15.0, ny: 3, tau0: 0.0, dtau: 0.004, ntau: 41 };
    let mut traces = random_traces(150, 101, 0.004, 90.0, "traces");
    for (i, h) in traces.headers.iter_mut().take(21).enumerate() {
        let (x, y) = ((i % 7) as f64 * 15.0, (i / 7) as f64 * 15.0);
        *h = TraceHeader { sx: x, sy: y, gx: x, gy: y, ..Default::default() };
    }
    for (name, params) in configs(g) {
        let cpu = ktm::migrate(&traces, &params, &[Backend::Cpu]).unwrap();
        assert!(cpu.data.iter().all(|v| v.is_finite()), "{name}: CPU image not finite");
        for variant in [Variant::Columns, Variant::ColumnsV1, Variant::ColumnsFast, Variant::PAPER] {
            let p = Params { variant, ..params.clone() };
            let out = ktm::migrate(&traces, &p, &[Backend::Gpu(gpu.clone())]).unwrap();
            let bad = out.data.iter().filter(|v| !v.is_finite()).count();
            assert_eq!(bad, 0, "{name} {variant:?}: {bad} samples not finite");
            let err = rel_l2(&out.data, &cpu.data);
            assert!(err < variant.tolerance(), "{name} {variant:?}: rel L2 {err}");
        }
    }
}

/// The GPU's trace preprocessing (rho filter by cuFFT, pair layout, anti-aliasing integration)
/// against the CPU's (rustfft), for every combination of the two filters, on random traces of a
/// length that is not a power of two.
#[test]
fn gpu_trace_preprocessing_matches_cpu() {
    let Some(gpu) = gpu_or_skip("gpu_trace_preprocessing_matches_cpu") else { return };
    let g = ImageGrid { x0: 3.0, dx: 17.0, nx: 7, y0: -4.0, dy: 13.0, ny: 5, tau0: 0.02, dtau: 0.004, ntau: 77 };
    let traces = random_traces(301, 173, 0.004, 160.0, "prep traces");
    for (rho, aa) in [(false, false), (true, false), (false, true), (true, true)] {
        let mut params = Params::full(g, Velocity::Constant(1800.0));
        params.rho_filter = rho;
        if !aa {
            params.antialias = None;
        }
        let plan = ktm::Plan::new(&traces.headers, traces.ns, traces.dt, traces.t0, &params).unwrap();
        let cpu = ktm::prep::prepare(&traces, &plan, &params);
        let gpu_pairs = ktm::prep_gpu::prepare(&gpu, &traces, &plan, &params).unwrap();
        let (a, b): (Vec<f32>, Vec<f32>) = (gpu_pairs.pairs.iter().flatten().copied().collect(), cpu.pairs.iter().flatten().copied().collect());
        assert!(a.iter().all(|v| v.is_finite()), "rho {rho} aa {aa}: non-finite pairs");
        let err = rel_l2(&a, &b);
        println!("rho {rho:5} antialias {aa:5}: GPU vs CPU pairs rel L2 {err:.2e}");
        assert!(err < 1e-5, "rho {rho} aa {aa}: rel L2 {err}");
        // And a whole migration through it.
        let cpu_img = ktm::migrate(&traces, &params, &[Backend::Cpu]).unwrap();
        let gpu_img = ktm::migrate(&traces, &Params { prep_on_gpu: true, ..params.clone() }, &[Backend::Gpu(gpu.clone())]).unwrap();
        let err = rel_l2(&gpu_img.data, &cpu_img.data);
        println!("rho {rho:5} antialias {aa:5}: image with GPU preprocessing vs CPU rel L2 {err:.2e}");
        assert!(err < 1e-5, "rho {rho} aa {aa}: image rel L2 {err}");
    }
}

/// The columns kernels with a trace start time that makes the read offset negative (v2 falls back
/// to v1) or fractional (fast falls back to v2), and the fast kernel focusing a diffractor.
#[test]
fn columns_variants_with_trace_start_times_and_fast_focus() {
    let Some(gpu) = gpu_or_skip("columns_variants_with_trace_start_times_and_fast_focus") else { return };
    let g = ImageGrid { x0: 3.0, dx: 17.0, nx: 7, y0: -4.0, dy: 13.0, ny: 5, tau0: 0.02, dtau: 0.004, ntau: 77 };
    for t0 in [0.0, 0.006, 0.02, -0.008] {
        let mut traces = random_traces(200, 111, 0.004, 160.0, "start-time traces");
        traces.t0 = t0;
        let params = Params::bare(g, Velocity::Constant(1800.0));
        let cpu = ktm::migrate(&traces, &params, &[Backend::Cpu]).unwrap();
        for variant in [Variant::Columns, Variant::ColumnsV1, Variant::ColumnsFast] {
            let p = Params { variant, ..params.clone() };
            let out = ktm::migrate(&traces, &p, &[Backend::Gpu(gpu.clone())]).unwrap();
            let err = rel_l2(&out.data, &cpu.data);
            println!("t0 {t0:6} {:18}: rel L2 {err:.2e}", variant.name());
            assert!(err < variant.tolerance(), "t0 {t0} {variant:?}: rel L2 {err}");
        }
    }
    let g = grid(21, 21, 150, 20.0, 0.004);
    let (x, y) = (200.0, 200.0);
    let traces = dsr_diffractor(areal(4, 120.0, 8, 80.0, x, y), 250, 0.004, x, y, 0.4, 2000.0);
    let params = Params { variant: Variant::ColumnsFast, ..Params::bare(g, Velocity::Constant(2000.0)) };
    let img = ktm::migrate(&traces, &params, &[Backend::Gpu(gpu)]).unwrap();
    let (ix, iy, it) = energy_peak(&img);
    assert!(ix.abs_diff(10) <= 1 && iy.abs_diff(10) <= 1 && it.abs_diff(100) <= 1, "fast: peak at ({ix}, {iy}, {it})");
}

fn dot(a: &[f32], b: &[f32]) -> f64 { a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum() }

#[test]
fn modelling_is_the_adjoint_of_migration() {
    let g = ImageGrid { x0: 3.0, dx: 17.0, nx: 6, y0: -4.0, dy: 13.0, ny: 5, tau0: 0.02, dtau: 0.004, ntau: 61 };
    let geometry = random_traces(150, 95, 0.004, 160.0, "data");
    for backend in backends("modelling_is_the_adjoint_of_migration") {
        for (name, params) in configs(g) {
            let m_data = random_vec(params.classes() * g.len(), "image");
            let m = ktm::Image { grid: g, classes: params.classes(), class_offsets: vec![], data: m_data, skipped_traces: 0 };
            let lm = ktm::model(&m, &geometry.headers, geometry.ns, geometry.dt, geometry.t0, &params, &backend).unwrap();
            // d = L m + noise of the same size: a generic d whose dot products do not cancel to a
            // small number (which would turn f32 rounding into a large relative mismatch).
            let mut d = geometry.clone();
            let scale = seisgpu_host::synth::rms(&lm.data);
            for (v, (&l, &r)) in d.data.iter_mut().zip(lm.data.iter().zip(&geometry.data)) {
                *v = l + scale * r;
            }
            let ltd = ktm::migrate(&d, &params, std::slice::from_ref(&backend)).unwrap();
            let (a, b) = (dot(&lm.data, &d.data), dot(&m.data, &ltd.data));
            let mismatch = (a - b).abs() / a.abs().max(b.abs());
            println!("{} {name}: <L m, d> = {a:.6e}, <m, L' d> = {b:.6e}, mismatch {mismatch:.1e}", backend.name());
            assert!(mismatch < 1e-4, "{} {name}: dot-product mismatch {mismatch}", backend.name());
        }
    }
}

#[test]
fn gpu_modelling_matches_cpu_with_forced_chunks() {
    let Some(gpu) = gpu_or_skip("gpu_modelling_matches_cpu_with_forced_chunks") else { return };
    let g = ImageGrid { x0: 3.0, dx: 17.0, nx: 6, y0: -4.0, dy: 13.0, ny: 5, tau0: 0.02, dtau: 0.004, ntau: 61 };
    let d = random_traces(150, 95, 0.004, 160.0, "geometry");
    for (name, params) in configs(g) {
        let m = ktm::Image { grid: g, classes: params.classes(), class_offsets: vec![],
            data: random_vec(params.classes() * g.len(), "image"), skipped_traces: 0 };
        let cpu = ktm::model(&m, &d.headers, d.ns, d.dt, d.t0, &params, &Backend::Cpu).unwrap();
        let p = Params { limits: GpuLimits { max_traces_per_chunk: Some(23), max_columns_per_tile: Some(7) }, ..params };
        let out = ktm::model(&m, &d.headers, d.ns, d.dt, d.t0, &p, &Backend::Gpu(gpu.clone())).unwrap();
        let err = rel_l2(&out.data, &cpu.data);
        println!("modelling {name}: rel L2 {err:.2e}");
        assert!(err < 1e-5, "modelling {name}: rel L2 {err}");
    }
}

fn err_of(traces: &TraceSet, params: &Params) -> String {
    format!("{:#}", ktm::migrate(traces, params, &[Backend::Cpu]).unwrap_err())
}

/// The kernel names round-trip, and a retired one is refused with the list of kept ones.
#[test]
fn kernel_names_parse() {
    for v in [Variant::Columns, Variant::ColumnsV1, Variant::ColumnsFast] {
        assert_eq!(v.name().trim_start_matches("gpu-").parse::<Variant>(), Ok(v));
    }
    assert_eq!("paper".parse::<Variant>(), Ok(Variant::PAPER));
    let e = "image".parse::<Variant>().unwrap_err();
    assert!(e.contains("`image`") && e.contains("columns-fast") && e.contains("paper"), "{e}");
}

#[test]
fn bad_input_gives_clear_errors() {
    let g = grid(5, 4, 50, 20.0, 0.004);
    let good = random_traces(20, 60, 0.004, 100.0, "traces");
    let ok = Params::bare(g, Velocity::Constant(2000.0));
    assert!(ktm::migrate(&good, &ok, &[Backend::Cpu]).is_ok());

    let mut no_coords = good.clone();
    for h in &mut no_coords.headers {
        (h.sx, h.sy, h.gx, h.gy) = (0.0, 0.0, 0.0, 0.0);
    }
    assert!(err_of(&no_coords, &ok).contains("no source/receiver coordinates"));

    let zero_dx = Params::bare(ImageGrid { dx: 0.0, ..g }, Velocity::Constant(2000.0));
    assert!(err_of(&good, &zero_dx).contains("inline spacing dx = 0"));
    let zero_dt = TraceSet { dt: 0.0, ..good.clone() };
    assert!(err_of(&zero_dt, &ok).contains("sample interval"));

    let short = Velocity::Function { t0: 0.0, dt: 0.05, v: vec![2000.0; 3] };
    assert!(err_of(&good, &Params::bare(g, short)).contains("does not cover the image"));
    let vol = VelocityVolume { x0: 0.0, dx: 10.0, nx: 3, y0: 0.0, dy: 10.0, ny: 8, t0: 0.0, dt: 0.1, nt: 3, v: vec![2000.0; 72] };
    assert!(err_of(&good, &Params::bare(g, Velocity::Volume(vol))).contains("inline x spans"));

    let negative = Velocity::Function { t0: 0.0, dt: 0.05, v: vec![2000.0, 2100.0, -5.0, 2200.0, 2300.0] };
    let e = err_of(&good, &Params::bare(g, negative));
    assert!(e.contains("value 2") && e.contains("positive"), "{e}");
    assert!(err_of(&good, &Params::bare(g, Velocity::Constant(0.0))).contains("positive"));

    let mut empty = ok.clone();
    empty.aperture.max_distance = 0.0;
    assert!(err_of(&good, &empty).contains("empty aperture"));
    empty.aperture = Aperture { max_distance: 50.0, max_angle_deg: 90.0, taper: 0.1 };
    let mut far = good.clone();
    for h in &mut far.headers {
        (h.sx, h.gx) = (h.sx + 5000.0, h.gx + 5000.0);
    }
    assert!(err_of(&far, &empty).contains("empty aperture"));
    let mut no_angle = ok.clone();
    no_angle.aperture.max_angle_deg = 0.0;
    assert!(err_of(&good, &no_angle).contains("empty aperture"));

    // VTI traveltimes run through the PSTM engine, whose checks apply.
    let mut vti = ok.clone();
    vti.traveltime_model = TraveltimeModel::Vti;
    vti.eta = -0.1;
    assert!(err_of(&good, &vti).contains("eta must be >= 0"), "{}", err_of(&good, &vti));
    let mut dynamic = ok.clone();
    dynamic.traveltime = TraveltimeMode::Dynamic { tolerance: -1.0 };
    assert!(err_of(&good, &dynamic).contains("tolerance"), "{}", err_of(&good, &dynamic));
    let mut angle = ok.clone();
    angle.traveltime_model = TraveltimeModel::Vti;
    angle.aperture.max_angle_deg = 45.0;
    assert!(err_of(&good, &angle).contains("--max-angle"), "{}", err_of(&good, &angle));

    let mut nan = good.clone();
    nan.data[77] = f32::NAN;
    assert!(err_of(&nan, &ok).contains("trace 1 sample 17"));
}

/// The benchmark workloads at the small size run end to end (CPU, and GPU when present) with the
/// GPU checked against the CPU inside; the paper size is `seisgpu ktm bench --size paper`.
#[test]
fn bench_small_runs_and_checks() {
    let backend = gpu_or_skip("bench_small_runs_and_checks (GPU rows)").map(Backend::Gpu).unwrap_or(Backend::Cpu);
    let rows = seisgpu_lab::ktm::bench(&backend, seisgpu_lab::bench::BenchSize::Small, &Default::default()).unwrap();
    for r in &rows {
        println!("{:20} {:34} {:10} {:10.4} s {:10.3e}/s {} | {}", r.workload, r.variant, r.scope, r.stats.median_ms * 1e-3,
            r.throughput(), r.check, r.note);
    }
    assert!(rows.iter().any(|r| r.variant == "cpu-reference"));
}

/// `--traveltime-model vti` hands the migration to the PSTM engine: with eta = 0 its static8 image
/// is the Kirchhoff engine's static8 DSR image up to the engines' different rounding and record
/// edges, and options the PSTM engine lacks are refused.
#[test]
fn vti_traveltimes_run_through_the_pstm_engine() {
    let (cx, cy) = (200.0, 200.0);
    let traces = dsr_diffractor(areal(4, 100.0, 8, 50.0, cx, cy), 300, 0.004, cx, cy, 0.6, 2000.0);
    let g = grid(9, 9, 260, 50.0, 0.004);
    let exact_params = Params::bare(g, Velocity::Constant(2000.0));
    for backend in backends("vti_traveltimes_run_through_the_pstm_engine") {
        let dsr = ktm::migrate(&traces, &Params { traveltime: TraveltimeMode::Static8, ..exact_params.clone() }, std::slice::from_ref(&backend)).unwrap();
        let vti = Params { traveltime: TraveltimeMode::Static8, traveltime_model: TraveltimeModel::Vti, eta: 0.0, ..exact_params.clone() };
        let vti = ktm::migrate(&traces, &vti, std::slice::from_ref(&backend)).unwrap();
        let e = rel_l2(&vti.data, &dsr.data);
        println!("{} VTI eta 0 (PSTM engine) vs DSR (Kirchhoff engine), static8: rel L2 {e:.2e}", backend.name());
        assert!(e < 1e-4, "VTI with eta 0 differs from DSR by {e}");
        let (ix, iy, it) = energy_peak(&vti);
        assert!(ix == 4 && iy == 4 && it.abs_diff(150) <= 1, "VTI: peak at ({ix}, {iy}, {it}), want (4, 4, 150)");
    }
    let weighted = Params { traveltime_model: TraveltimeModel::Vti, ..Params::full(g, Velocity::Constant(2000.0)) };
    let e = ktm::migrate(&traces, &weighted, &[Backend::Cpu]).unwrap_err().to_string();
    assert!(e.contains("--no-weights"), "{e}");
}
