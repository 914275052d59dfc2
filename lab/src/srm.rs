//! srm benchmark workloads and demo.
//!
//! - `srm-step`: one depth step of 16 frequency planes of both waves on a 400 x 400 grid (96 x 96
//!   for `small`), degree 15: CPU reference (all cores) and every GPU variant (the paper's kernel
//!   with 1 and with 16 planes per launch, `paperq56`, and the whole-plane cluster kernels).
//!   Reported per depth step per plane (both waves), with the effective device-memory bandwidth
//!   (the bytes each design must move, `Planes::bytes_per_step`) against the measured peak.
//! - `srm-shot`: one synthetic 3D shot, 400 x 400 x 500 depth samples and 256 frequencies (64 x 64
//!   x 50 and 32 for `small`), end to end on the GPU (traces in, image out, FFT on the device); the
//!   CPU reference on all cores is timed on a subset of frequencies and depths and scaled.

use std::path::Path;
use std::time::Instant;

use anyhow::Context;

use seisgpu_host::kernels::srm::RowMap;

use seisgpu_host::srm::design::{DesignParams, Operator};
use seisgpu_host::srm::gpu::{DeviceOperator, Planes};
use seisgpu_host::srm::synthetic::{column_peak, flat_reflector};
use seisgpu_host::srm::{cpu, design_for, gpu, validate_inputs, FreqPlan, GpuOptions, GpuVariant, SrmParams, Taper};
use seisgpu_host::backend::Backend;
use crate::bench::{rel_l2, BenchRow, BenchSize, Ceilings, DemoRow, DemoSize, Selection};
use seisgpu_host::runtime::timing::measure_cpu;
use seisgpu_host::runtime::{Gpu, GpuTimer, Stats};
use crate::scale::Workload as ScaleWorkload;

const PAPER: &str = "paper 4 (SRMIP, G80): 8x to 15x over one optimised CPU core";

fn row(workload: &str, variant: &str, scope: &str, stats: Stats, work: f64, unit: &str) -> BenchRow {
    BenchRow {
        workload: workload.into(), variant: variant.into(), scope: scope.into(), stats, work, work_unit: unit.into(),
        ceiling: None, fraction_of_ceiling: None, check: String::new(), paper: None, note: String::new(),
    }
}

/// Measured device-to-device copy bandwidth (bytes read + written per second), when the caller
/// did not pass one.
fn measure_bandwidth(gpu: &Gpu) -> anyhow::Result<f64> {
    let n = 128usize << 20; // 512 MiB of f32
    let a = gpu.zeros::<f32>(n)?;
    let mut b = gpu.zeros::<f32>(n)?;
    let timer = GpuTimer::new(gpu.stream())?;
    let st = timer.measure(2, 10, || {
        gpu.stream().memcpy_dtod(&a, &mut b).map_err(seisgpu_host::runtime::GpuError::driver("copying"))
    })?;
    Ok(2.0 * (n * 4) as f64 / (st.median_ms * 1e-3))
}

fn random_planes(len: usize, seed: u64) -> Vec<f32> {
    use rand::RngExt;
    let mut r = seisgpu_host::synth::rng(seed);
    (0..len).map(|_| r.random_range(-1.0f32..1.0)).collect()
}

/// The srm-step workload: grid, operator, slowness, row maps and random planes.
struct StepCase {
    nx: usize,
    ny: usize,
    planes: usize,
    op: Operator,
    slow: Vec<f32>,
    maps: Vec<RowMap>,
    waves: Vec<f32>,
    taper: Taper,
}

fn step_case(size: BenchSize) -> anyhow::Result<StepCase> {
    let n = if size == BenchSize::Paper { 400 } else { 96 };
    let planes = 16;
    let (d, dz) = (25.0, 10.0);
    let sp = seisgpu_host::srm::design::Spacing { dx: d, dy: d, dz, two_d: false };
    let tau = 2.0 * std::f64::consts::PI;
    let (vmin, vmax, fmin, fmax) = (1500.0, 4500.0, 5.0, 60.0);
    let op = Operator::new(DesignParams::default(), sp, tau * fmin * dz / vmax, tau * fmax * dz / vmin, 128)
        .map_err(anyhow::Error::msg)?;
    let slow: Vec<f32> = random_planes(n * n, 11).iter().map(|r| 1.0 / (3000.0 + 1500.0 * r)).collect();
    let maps = (0..planes).map(|k| op.row_map(tau * (fmin + (fmax - fmin) * k as f64 / planes as f64))).collect();
    let waves = random_planes(2 * 2 * planes * n * n, 12);
    Ok(StepCase { nx: n, ny: n, planes, op, slow, maps, waves, taper: Taper::new(n, n, 20, 0.3) })
}

/// Runs every workload on the CPU and, when present, on the GPU; GPU results are checked against
/// the CPU before they are timed.
pub fn bench(backend: &Backend, size: BenchSize, ceilings: &Ceilings) -> anyhow::Result<Vec<BenchRow>> {
    bench_with(backend, size, ceilings, false, &Selection::default())
}

/// [`bench`], optionally without the srm-shot workload (`step_only`), timing only the kernels
/// `sel` names (the srm-shot workload also runs the paper's kernel, its reference).
pub fn bench_with(backend: &Backend, size: BenchSize, ceilings: &Ceilings, step_only: bool, sel: &Selection)
    -> anyhow::Result<Vec<BenchRow>> {
    let mut rows = Vec::new();
    let threads = rayon::current_num_threads();
    // ---- srm-step ----
    let case = step_case(size)?;
    let (nx, ny, np) = (case.nx, case.ny, case.planes);
    let nxy = nx * ny;
    let mut maps2 = case.maps.clone();
    maps2.extend_from_slice(&case.maps);
    let mut want = case.waves.clone();
    cpu::step_planes(&case.op, &maps2, &case.slow, &case.taper, nx, ny, &mut want);
    let wl = "srm-step";
    let unit = "depth-step x plane (both waves)";
    let cpu_stats = measure_cpu(1, if size == BenchSize::Paper { 3 } else { 5 }, || {
        let mut w = case.waves.clone();
        cpu::step_planes(&case.op, &maps2, &case.slow, &case.taper, nx, ny, &mut w);
    });
    let mut r = row(wl, "cpu-reference", "end-to-end", cpu_stats, np as f64, unit);
    r.note = format!("{nx} x {ny}, degree {}, {np} planes x 2 waves on {threads} threads; {:.1} ms per depth step per plane",
        case.op.params.degree, cpu_stats.median_ms / np as f64);
    rows.push(r);
    eprintln!("srm bench: {} {} {:.2} ms: {}", rows[0].workload, rows[0].variant, cpu_stats.median_ms, rows[0].note);
    let cpu_plane_ms = cpu_stats.median_ms / np as f64;
    let mut best = (f64::INFINITY, GpuVariant::Paper);
    let mut best_cluster: Option<(f64, GpuVariant)> = None;
    if let Backend::Gpu(g) = backend {
        let bw = if ceilings.bandwidth > 0.0 { ceilings.bandwidth } else { measure_bandwidth(g)? };
        let dop = DeviceOperator::new(g, &case.op)?;
        let dslow = g.upload(&case.slow)?;
        let timer = GpuTimer::new(g.stream())?;
        let variants = [(GpuVariant::Paper, 1usize), (GpuVariant::Paper, 16), (GpuVariant::PaperPairCapped, 16),
            (GpuVariant::Cluster, 16), (GpuVariant::ClusterD, 16)];
        for (variant, count) in variants {
            if !sel.times(variant) {
                continue;
            }
            if let Some(k) = gpu::ClusterKernel::of(variant) {
                if let Err(e) = gpu::cluster_plan_for(g, k, nx as u32, ny as u32, count as u32) {
                    eprintln!("srm bench: {wl} gpu-{variant}-x{count} skipped: {e}");
                    continue;
                }
            }
            let mut pl = Planes::new(g, nx, ny, np, &case.taper)?;
            pl.set_maps(g, &case.maps)?;
            // Check: one step of `count` planes against the CPU.
            let load = |pl: &mut Planes| -> anyhow::Result<()> {
                let mut x = vec![f32::NAN; pl.x.len()];
                for w in 0..2 {
                    let o = 2 * w * np * nxy;
                    x[o..o + 2 * count * nxy].copy_from_slice(&case.waves[o..o + 2 * count * nxy]);
                }
                pl.x = g.upload(&x)?;
                Ok(())
            };
            load(&mut pl)?;
            pl.step(g, &dop, &dslow.slice(..), count, variant)?;
            let out = g.download(&pl.x)?;
            let (mut got, mut exp) = (Vec::new(), Vec::new());
            for w in 0..2 {
                let o = 2 * w * np * nxy;
                got.extend_from_slice(&out[o..o + 2 * count * nxy]);
                exp.extend_from_slice(&want[o..o + 2 * count * nxy]);
            }
            let err = rel_l2(&got, &exp);
            if !(err < 1e-5) {
                // Report the failure and go on with the other variants (no timing of a wrong kernel).
                let mut r = row(wl, &format!("gpu-{variant}-x{count}"), "kernel", Stats::from_samples(&[f64::NAN]), 0.0, unit);
                r.check = format!("FAILED: rel L2 {err:.2e} vs CPU");
                eprintln!("srm bench: {} {}: {}", r.workload, r.variant, r.check);
                rows.push(r);
                continue;
            }
            // Time: 10 depth steps per sample (the wavefield keeps propagating; values stay bounded).
            let reps = 10;
            let st = timer.measure(2, if size == BenchSize::Paper { 7 } else { 5 }, || {
                for _ in 0..reps {
                    pl.step(g, &dop, &dslow.slice(..), count, variant)?;
                }
                Ok(())
            })?;
            let per = Stats {
                median_ms: st.median_ms / reps as f64, min_ms: st.min_ms / reps as f64, max_ms: st.max_ms / reps as f64,
                repeats: st.repeats,
            };
            let bytes = pl.bytes_per_step(case.op.params.degree, count, variant);
            let eff = bytes / (per.median_ms * 1e-3);
            let mut r = row(wl, &format!("gpu-{variant}-x{count}"), "kernel", per, count as f64, unit);
            r.ceiling = Some(format!("device memory bandwidth {:.0} GB/s (measured copy)", bw / 1e9));
            r.fraction_of_ceiling = Some(eff / bw);
            r.check = format!("rel L2 {err:.1e} vs CPU, one depth step of {count} planes x 2 waves");
            r.note = format!("{:.1} us per depth step per plane; effective {:.0} GB/s ({:.1} MB per step); {:.0}x the \
                all-core CPU per plane", 1e3 * per.median_ms / count as f64, eff / 1e9, bytes / 1e6,
                cpu_plane_ms / (per.median_ms / count as f64));
            if variant == GpuVariant::Paper && count == 1 {
                r.paper = Some("paper kernel: one Chebyshev step per launch, both waves, 48x8 threads, 40x24 outputs".into());
            }
            eprintln!("srm bench: {} {} {:.4} ms: {}", r.workload, r.variant, r.stats.median_ms, r.note);
            rows.push(r);
            let per_plane = per.median_ms / count as f64;
            if count == np && per_plane < best.0 {
                best = (per_plane, variant);
            }
            if count == np && matches!(variant, GpuVariant::Cluster | GpuVariant::ClusterD)
                && best_cluster.is_none_or(|(ms, _)| per_plane < ms) {
                best_cluster = Some((per_plane, variant));
            }
        }
    }
    if step_only {
        return Ok(rows);
    }
    // ---- srm-shot: the fastest srm-step kernel, the fastest cluster one and the paper's ----
    let mut shot_variants = vec![best.1];
    for v in best_cluster.map(|(_, v)| v).into_iter().chain([GpuVariant::Paper]) {
        if !shot_variants.contains(&v) {
            shot_variants.push(v);
        }
    }
    rows.extend(bench_shot(backend, size, &shot_variants)?);
    Ok(rows)
}

/// The srm-shot workload.
fn bench_shot(backend: &Backend, size: BenchSize, variants: &[GpuVariant]) -> anyhow::Result<Vec<BenchRow>> {
    let mut rows = Vec::new();
    let wl = "srm-shot";
    let (n, nz, nfreq, ns, step) = if size == BenchSize::Paper { (400, 500, 256, 1024, 2) } else { (64, 50, 32, 256, 2) };
    let (d, dz, dt) = (25.0, 10.0, 0.004f32);
    let t = std::time::Instant::now();
    let (traces, model) = flat_reflector(n, n, nz, d, dz, &[0.0, 1500.0], &[2000.0, 3000.0], 2000.0f64.min(0.8 * nz as f64 * dz),
        ns, dt, 20.0, step);
    let df = 1.0 / (ns as f64 * dt as f64);
    let k0 = (5.0 / df).ceil();
    let params = SrmParams { fmin: (k0 - 0.25) * df, fmax: (k0 + nfreq as f64 - 0.75) * df, ricker_peak: 20.0, taper_width: 20,
        aperture: 1e9, nz, ..Default::default() };
    let shots = validate_inputs(&traces, &model, &params)?;
    let plan = FreqPlan::new(traces.ns, dt as f64, 0.0, params.fmin, params.fmax).map_err(anyhow::Error::msg)?;
    let setup_s = t.elapsed().as_secs_f64();
    let t = std::time::Instant::now();
    let op = design_for(&model, &params).map_err(anyhow::Error::msg)?;
    let design_s = t.elapsed().as_secs_f64();
    let (shot, grid) = &shots[0];
    let nb = plan.bins.len();
    // CPU subset: `cf` frequencies (one per thread) and `cz` depth samples, scaled to the shot.
    let threads = rayon::current_num_threads();
    let cf = threads.clamp(1, nb);
    let cz = if size == BenchSize::Paper { 12 } else { nz };
    let sub: Vec<usize> = (0..cf).map(|i| plan.bins[i * nb / cf]).collect();
    let mut cpu_img = Vec::new();
    let cst = measure_cpu(0, 1, || {
        cpu_img = cpu::migrate_shot(&op, &traces, &model, &params, &plan, shot, grid, &sub, cz);
    });
    // Per-shot work (trace FFTs, slowness window) is done once; only the rest scales.
    let fixed = measure_cpu(0, 1, || {
        let s = cpu::window_slowness(&model, grid, cz);
        let f = cpu::trace_spectra(&traces, &shot.traces, &plan);
        std::hint::black_box((s, f));
    });
    let full_fixed = measure_cpu(0, 1, || {
        let s = cpu::window_slowness(&model, grid, nz);
        let f = cpu::trace_spectra(&traces, &shot.traces, &plan);
        std::hint::black_box((s, f));
    });
    let scale = (nb as f64 / cf as f64) * ((nz - 1) as f64 / (cz - 1) as f64);
    let cpu_full_ms = full_fixed.median_ms + (cst.median_ms - fixed.median_ms).max(0.0) * scale;
    let work = (nb * (nz - 1)) as f64;
    let unit = "depth-step x frequency (both waves)";
    let mut r = row(wl, "cpu-reference", "end-to-end", Stats { median_ms: cpu_full_ms, min_ms: cpu_full_ms, max_ms: cpu_full_ms,
        repeats: 1 }, work, unit);
    r.note = format!("{n} x {n} x {nz}, {nb} frequencies, {} traces; timed on {cf} frequencies x {cz} depths on {threads} \
        threads ({:.2} s, of which {:.2} s per-shot FFT and slowness, which is not scaled) and the rest scaled by \
        {scale:.1}; operator design {design_s:.1} s and synthetic data {setup_s:.1} s \
        not included", traces.len(), cst.median_ms * 1e-3, fixed.median_ms * 1e-3);
    r.paper = Some(PAPER.into());
    eprintln!("srm bench: {} {} {:.1} ms: {}", r.workload, r.variant, r.stats.median_ms, r.note);
    rows.push(r);
    if let Backend::Gpu(g) = backend {
        let dop = DeviceOperator::new(g, &op)?;
        for &variant in variants {
            let opts = GpuOptions { variant, planes: 16 };
            let got = gpu::migrate_shot(g, &op, &dop, &traces, &model, &params, &plan, shot, grid, &sub, cz, opts)?;
            let err = rel_l2(&got, &cpu_img);
            if !(err < 1e-4) {
                let mut r = row(wl, &format!("gpu-{variant}-x16"), "end-to-end", Stats::from_samples(&[f64::NAN]), 0.0, unit);
                r.check = format!("FAILED: rel L2 {err:.2e} vs CPU on the subset");
                eprintln!("srm bench: {} {}: {}", r.workload, r.variant, r.check);
                rows.push(r);
                continue;
            }
            let t = Instant::now();
            let _img = gpu::migrate_shot(g, &op, &dop, &traces, &model, &params, &plan, shot, grid, &plan.bins, nz, opts)
                .with_context(|| format!("srm-shot on the GPU ({variant})"))?;
            let ms = t.elapsed().as_secs_f64() * 1e3;
            let mut r = row(wl, &format!("gpu-{variant}-x16"), "end-to-end",
                Stats { median_ms: ms, min_ms: ms, max_ms: ms, repeats: 1 }, work, unit);
            r.check = format!("rel L2 {err:.1e} vs CPU on the {cf}-frequency x {cz}-depth subset");
            r.note = format!("{:.1}x the all-core CPU reference ({threads} threads); {:.1} us per depth step per frequency \
                (traces up, cuFFT, injection, extrapolation, imaging, image down)", cpu_full_ms / ms, 1e3 * ms / work);
            r.paper = Some(PAPER.into());
            eprintln!("srm bench: {} {} {:.1} ms: {}", r.workload, r.variant, r.stats.median_ms, r.note);
            rows.push(r);
            if size == BenchSize::Small {
                break;
            }
        }
    }
    Ok(rows)
}

/// A 2D line over a flat reflector under two layers, migrated on the backend; the quality figure
/// is the depth error of the imaged reflector.
pub fn demo(backend: &Backend, out_dir: &Path, size: DemoSize) -> anyhow::Result<DemoRow> {
    let t = Instant::now();
    // `size` lengthens the line (the shot stays in its middle).
    let k = size.factor();
    let (nx, nz, d, dz, zr) = (200 * k + 1, 120usize, 10.0, 5.0, 400.0);
    let mid = 100 * k;
    let (traces, model) = flat_reflector(nx, 1, nz, d, dz, &[0.0, 250.0], &[1800.0, 2500.0], zr, 512, 0.004, 20.0, 1);
    let params = SrmParams { fmin: 4.0, fmax: 45.0, ricker_peak: 20.0, taper_width: 20, aperture: 1e9, ..Default::default() };
    let img = seisgpu_host::srm::migrate_with(backend, &traces, &model, &params, GpuOptions::default(), false)?;
    let want = (zr / dz).round() as i64;
    // Columns within 300 m of the shot (mid-line): farther out the line's end limits the aperture.
    let errs: Vec<i64> = (mid - 30..=mid + 30).step_by(15).map(|ix| column_peak(&img, ix, 0, 10) as i64 - want).collect();
    let worst = errs.iter().map(|e| e.abs()).max().unwrap_or(0);
    let seconds = t.elapsed().as_secs_f64();
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    // Trace-major (x), depth down.
    let mut section = vec![0.0f32; nx * nz];
    for iz in 0..nz {
        for ix in 0..nx {
            section[ix * nz + iz] = img.data[iz * nx + ix];
        }
    }
    let png = out_dir.join("srm-flat-reflector.png");
    let axes = seisgpu_host::plot::Axes::depth_m(0.0, dz).traces(0.0, d, "x (m)");
    seisgpu_host::plot::section_png_with(&png, &section, nx, nz, "srm: flat reflector at 400 m under two layers", &axes)?;
    Ok(DemoRow {
        algorithm: "srm".into(),
        backend: backend.name().into(),
        seconds,
        quality: format!("flat reflector at {zr} m imaged within {worst} depth sample(s) ({} m) over 5 columns within 300 m of the shot", worst as f64 * dz),
        images: vec![png],
    })
}

/// The strong-scaling workload (`seisgpu bench --gpus`, [`crate::scale`]): one shot window on the
/// split migration ([`seisgpu_host::srm::Migration`]).
pub fn scale_workload(size: BenchSize) -> anyhow::Result<ScaleWorkload> {
    let paper = size == BenchSize::Paper;

    // The srm-shot workload (one 400 x 400 shot window, 500 depths, 256 frequencies); small: 64 x 64.
    use crate::scale::{cached, PerCount};
    use seisgpu_host::srm::{self, synthetic::flat_reflector, GpuOptions, SrmParams};
    let (n, nz, nfreq, ns) = if paper { (400, 500, 256, 1024) } else { (48, 30, 24, 256) };
    let (d, dz, dt) = (25.0, 10.0, 0.004f32);
    let (traces, model) = flat_reflector(n, n, nz, d, dz, &[0.0, 1500.0], &[2000.0, 3000.0],
        2000.0f64.min(0.8 * nz as f64 * dz), ns, dt, 20.0, 2);
    let df = 1.0 / (ns as f64 * dt as f64);
    let k0 = (5.0 / df).ceil();
    let params = SrmParams { fmin: (k0 - 0.25) * df, fmax: (k0 + nfreq as f64 - 0.75) * df, ricker_peak: 20.0,
        taper_width: 20, aperture: 1e9, nz, table_rows: if paper { 0 } else { 48 }, ..Default::default() };
    let opts = GpuOptions { planes: if paper { 16 } else { 4 }, ..Default::default() };
    let work = (nfreq * nz * n * n) as f64;
    // Once: the operator design (the plan); per device count: the operator tables on the
    // devices. `GpuVariant::Auto` is resolved once, on the first device, for every count
    // (so all rows run the same kernel). The timed run migrates the shot: slowness window,
    // traces and their FFT up, extrapolation and imaging, one window image down per device.
    let plan = srm::MultiPlan::new(&traces, &model, &params, opts)?;
    let resolved: std::sync::Mutex<Option<GpuOptions>> = Default::default();
    let cache: PerCount<Vec<srm::SrmDevice>> = Default::default();
    Ok(ScaleWorkload::new(format!("scale-srm-shot-{n}"), work, "frequency x depth x node", false, move |d| {
            let devs = cached(&cache, d.len(), || d.iter().map(|b| srm::SrmDevice::new(b, &plan.op)).collect())?;
            let opts = {
                let mut r = resolved.lock().map_err(|_| anyhow::anyhow!("srm options poisoned"))?;
                match *r {
                    Some(o) => o,
                    None => *r.insert(plan.resolve_variant(&devs, &model, &params, opts)?),
                }
            };
            let job = srm::Migration { plan: &plan, traces: &traces, model: &model, params: &params, opts };
            Ok(seisgpu_host::exec::run(&job, &devs[..])?.data)
        }).target(3.7))
}
