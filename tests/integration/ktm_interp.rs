//! Kirchhoff migration with interpolated traveltimes (static8, dynamic): the GPU against the CPU
//! reference of the same mode on random data and awkward sizes, a diffractor focusing as with exact
//! traveltimes (CPU and GPU), the image error against exact, and several devices equal to one.

use seisgpu_host::backend::{gpu_or_skip, Backend};
use seisgpu_host::ktm::{self, GpuLimits, ImageGrid, Params, Variant, Velocity};
use seisgpu_host::pstm::TraveltimeMode;

use crate::common::rel_l2;
use crate::ktm::{areal, backends, configs, dsr_diffractor, energy_peak, grid, random_traces};

const MODES: [TraveltimeMode; 2] = [TraveltimeMode::Static8, TraveltimeMode::Dynamic { tolerance: 1e-4 }];

/// Every flavour (bare, corrections, anti-aliasing, velocity volume with offset classes) in both
/// modes: the GPU reads the CPU's positions bit for bit (sums and amplitude approximations differ:
/// the exact kernels' tolerance), resident and forced into chunks and tiles (whose image starts as
/// NaN: every sample must be written). 7 x 5 columns, 77 image times (a partial segment), 300
/// traces (not a multiple of a batch or a staging pass).
#[test]
fn gpu_interpolated_traveltimes_match_cpu_on_random_data() {
    let Some(gpu) = gpu_or_skip("gpu_interpolated_traveltimes_match_cpu_on_random_data") else { return };
    let g = ImageGrid { x0: 3.0, dx: 17.0, nx: 7, y0: -4.0, dy: 13.0, ny: 5, tau0: 0.02, dtau: 0.004, ntau: 77 };
    let traces = random_traces(300, 111, 0.004, 160.0, "traces");
    for mode in MODES {
        for (name, params) in configs(g) {
            let params = Params { traveltime: mode, ..params };
            let cpu = ktm::migrate(&traces, &params, &[Backend::Cpu]).unwrap();
            assert!(cpu.data.iter().any(|&v| v != 0.0), "{name}: empty CPU image");
            for limits in [GpuLimits::default(), GpuLimits { max_traces_per_chunk: Some(37), max_columns_per_tile: Some(11) }] {
                let p = Params { limits, ..params.clone() };
                let out = ktm::migrate(&traces, &p, &[Backend::Gpu(gpu.clone())]).unwrap();
                assert!(out.data.iter().all(|v| v.is_finite()), "{name} {mode:?}: unwritten (NaN) samples");
                let err = rel_l2(&out.data, &cpu.data);
                println!("{:8} {name:15} chunked {:5}: rel L2 {err:.2e}", mode.name(), limits.max_traces_per_chunk.is_some());
                assert!(err < 1e-5, "{name} {mode:?} {limits:?}: rel L2 {err}");
            }
        }
        // The paper's kernel has no interpolated flavour: a clear error, not an exact image.
        let p = Params { traveltime: mode, variant: Variant::PAPER, ..Params::bare(g, Velocity::Constant(1800.0)) };
        let e = format!("{:#}", ktm::migrate(&traces, &p, &[Backend::Gpu(gpu.clone())]).unwrap_err());
        assert!(e.contains("--kernel columns"), "{e}");
    }
    // Trace start times that make the read offset negative or fractional.
    for t0 in [0.006f32, 0.02, -0.008] {
        let mut t = random_traces(200, 111, 0.004, 160.0, "start-time traces");
        t.t0 = t0;
        for mode in MODES {
            let p = Params { traveltime: mode, ..Params::bare(g, Velocity::Constant(1800.0)) };
            let cpu = ktm::migrate(&t, &p, &[Backend::Cpu]).unwrap();
            let out = ktm::migrate(&t, &p, &[Backend::Gpu(gpu.clone())]).unwrap();
            let err = rel_l2(&out.data, &cpu.data);
            println!("t0 {t0:6} {:8}: rel L2 {err:.2e}", mode.name());
            assert!(err < 1e-5, "t0 {t0} {mode:?}: rel L2 {err}");
        }
    }
}

/// The bare static8 kernel at a read offset >= 0 reads each (trace, 256-sample block row) one of
/// three ways: every node below the trace end (no clamp), every node past it (not read), or
/// straddling it (clamped). Traces of 1.2 s under an image of 2.4 s give all three (near traces
/// inside in the first block row, far ones straddling, every trace past the end below it), a
/// partial last block row, 301 traces (a partial batch) and chunks of 37 traces; the image
/// starts as NaN, so every sample must be written.
#[test]
fn gpu_static8_reads_inside_straddling_and_past_the_trace_end_as_cpu() {
    let Some(gpu) = gpu_or_skip("gpu_static8_reads_inside_straddling_and_past_the_trace_end_as_cpu") else { return };
    let g = ImageGrid { x0: -20.0, dx: 29.0, nx: 9, y0: 5.0, dy: 31.0, ny: 7, tau0: 0.0, dtau: 0.004, ntau: 600 };
    let traces = random_traces(301, 300, 0.004, 500.0, "trace-end traces");
    let p = Params { traveltime: TraveltimeMode::Static8, ..Params::bare(g, Velocity::Constant(1800.0)) };
    let cpu = ktm::migrate(&traces, &p, &[Backend::Cpu]).unwrap();
    let rows = |img: &[f32], z: std::ops::Range<usize>| img.chunks(g.ntau).map(|c| c[z.clone()].iter().map(|v| v.abs()).sum::<f32>()).sum::<f32>();
    assert!(rows(&cpu.data, 0..256) > 0.0 && rows(&cpu.data, 300..600) == 0.0, "want data in the first block row, none below the record");
    for limits in [GpuLimits::default(), GpuLimits { max_traces_per_chunk: Some(37), max_columns_per_tile: Some(11) }] {
        let out = ktm::migrate(&traces, &Params { limits, ..p.clone() }, &[Backend::Gpu(gpu.clone())]).unwrap();
        assert!(out.data.iter().all(|v| v.is_finite()), "{limits:?}: unwritten (NaN) samples");
        let err = rel_l2(&out.data, &cpu.data);
        println!("static8 trace end, chunked {:5}: rel L2 {err:.2e}", limits.max_traces_per_chunk.is_some());
        assert!(err < 1e-5, "{limits:?}: rel L2 {err}");
    }
}

/// A point diffractor focuses at the same bin and time with static8 and dynamic traveltimes as
/// with exact ones, bare and with every correction, on the CPU and the GPU; the images stay within
/// 2 % (rel L2) of the exact image on band-limited data.
#[test]
fn interpolated_diffractor_focuses_as_exact() {
    let (cx, cy) = (200.0, 200.0);
    let traces = dsr_diffractor(areal(4, 100.0, 8, 50.0, cx, cy), 300, 0.004, cx, cy, 0.6, 2000.0);
    let g = grid(9, 9, 260, 50.0, 0.004);
    for backend in backends("interpolated_diffractor_focuses_as_exact") {
        for (what, base) in [("bare", Params::bare(g, Velocity::Constant(2000.0))), ("full", Params::full(g, Velocity::Constant(2000.0)))] {
            let exact = ktm::migrate(&traces, &base, std::slice::from_ref(&backend)).unwrap();
            for mode in MODES {
                let img = ktm::migrate(&traces, &Params { traveltime: mode, ..base.clone() }, std::slice::from_ref(&backend)).unwrap();
                assert!(img.data.iter().all(|v| v.is_finite()));
                let e = rel_l2(&img.data, &exact.data);
                println!("{} {what} {}: rel L2 vs exact {e:.2e}", backend.name(), mode.name());
                assert!(e < 0.02, "{what} {mode:?}: rel L2 {e} vs the exact image");
                let (ix, iy, it) = energy_peak(&img);
                assert!(ix == 4 && iy == 4 && it.abs_diff(150) <= 1, "{what} {mode:?}: peak at ({ix}, {iy}, {it}), want (4, 4, 150)");
            }
        }
    }
}

/// Dynamic with a zero tolerance takes 8-sample steps wherever a longer one is not exactly linear,
/// which on curved moveout is everywhere: the static8 image. A huge tolerance takes 32-sample steps
/// and is the coarsest image, still focused.
#[test]
fn dynamic_tolerance_spans_static8_to_32_sample_steps() {
    let (cx, cy) = (200.0, 200.0);
    let traces = dsr_diffractor(areal(3, 100.0, 6, 60.0, cx, cy), 300, 0.004, cx, cy, 0.6, 2000.0);
    let g = grid(9, 9, 200, 50.0, 0.004);
    let base = Params::bare(g, Velocity::Constant(2000.0));
    let run = |mode| ktm::migrate(&traces, &Params { traveltime: mode, ..base.clone() }, &[Backend::Cpu]).unwrap();
    let (exact, s8) = (run(TraveltimeMode::Exact), run(TraveltimeMode::Static8));
    let d0 = run(TraveltimeMode::Dynamic { tolerance: 0.0 });
    let e0 = rel_l2(&d0.data, &s8.data);
    assert!(e0 < 1e-3, "dynamic with zero tolerance vs static8: rel L2 {e0}");
    let coarse = run(TraveltimeMode::Dynamic { tolerance: 1.0 });
    let (ec, e8) = (rel_l2(&coarse.data, &exact.data), rel_l2(&s8.data, &exact.data));
    println!("vs exact: static8 {e8:.2e}, dynamic tolerance 0 {:.2e}, dynamic tolerance 1 s {ec:.2e}", rel_l2(&d0.data, &exact.data));
    assert!(ec >= e8, "32-sample steps ({ec}) more accurate than static8 ({e8})");
    let (ix, iy, it) = energy_peak(&coarse);
    assert!(ix == 4 && iy == 4 && it.abs_diff(150) <= 2, "coarse: peak at ({ix}, {iy}, {it})");
}

/// Several devices equal one: on CPU work queues (always) and on GPUs (two or more): the split
/// sums regroup f32 additions only.
#[test]
fn interpolated_split_equals_single_device() {
    let g = ImageGrid { x0: 0.0, dx: 25.0, nx: 17, y0: 0.0, dy: 25.0, ny: 13, tau0: 0.0, dtau: 0.004, ntau: 97 };
    let traces = random_traces(613, 140, 0.004, 300.0, "split traces");
    let mut devices = vec![(vec![Backend::Cpu; 3], Backend::Cpu)];
    if let Some(gpu) = gpu_or_skip("interpolated_split_equals_single_device (GPU part)") {
        let n = seisgpu_host::runtime::Gpu::device_count();
        match seisgpu_host::exec::open_gpus(seisgpu_host::exec::GpuCount::N(n.max(1))) {
            Ok(gs) if gs.len() >= 2 => devices.push((gs.into_iter().map(Backend::Gpu).collect(), Backend::Gpu(gpu))),
            _ => println!("SKIPPED interpolated_split_equals_single_device (GPU part): needs 2 GPUs, {n} visible"),
        }
    }
    for (many, one) in devices {
        for mode in MODES {
            for (name, base) in [("bare", Params::bare(g, Velocity::Constant(2100.0))), ("full", Params::full(g, Velocity::Constant(2100.0)))] {
                let p = Params { traveltime: mode, ..base };
                let single = ktm::migrate(&traces, &p, std::slice::from_ref(&one)).unwrap();
                let split = ktm::migrate(&traces, &p, &many).unwrap();
                let e = rel_l2(&split.data, &single.data);
                println!("{} x {} {} {name}: split vs single rel L2 {e:.2e}", many.len(), one.name(), mode.name());
                assert!(e < 1e-6, "{mode:?} {name}: split vs single rel L2 {e}");
                assert!(single.data.iter().any(|&v| v != 0.0));
            }
        }
    }
}

/// Modelling is the adjoint of the exact migration only: interpolated traveltimes are refused.
#[test]
fn modelling_refuses_interpolated_traveltimes() {
    let g = grid(5, 5, 40, 20.0, 0.004);
    let p = Params { traveltime: TraveltimeMode::Static8, ..Params::bare(g, Velocity::Constant(2000.0)) };
    let img = ktm::Image { grid: g, classes: 1, class_offsets: vec![0.0], data: vec![0.0; g.len()], skipped_traces: 0 };
    let h = areal(2, 20.0, 2, 20.0, 40.0, 40.0);
    let e = ktm::model(&img, &h, 60, 0.004, 0.0, &p, &Backend::Cpu).unwrap_err().to_string();
    assert!(e.contains("exact traveltimes only"), "{e}");
}
