//! NLBF: the 2+2+1 search (known answers, CPU vs every GPU variant), enhancement, NMO, bad input.

use seisgpu_host::backend::gpu_or_skip;
use seisgpu_lab::bench::BenchSize;
use seisgpu_lab::nlbf::{compare, demo_gather};
use seisgpu_host::nlbf::{self, cpu, gpu, synth, Aperture, Coordinates, EnhanceParams, EstimateParams, NmoParams, Range,
    SearchSpace, Setup};
use seisgpu_host::synth::geometry;
use seisgpu_host::{Backend, TraceSet};

use crate::common::{random_vec, test_seed};

/// A small 2D search (the paper's 2D ranges) on a line of `nrec` receivers x `nsrc` sources.
fn params_small(spacing: f64) -> EstimateParams {
    let mut p = synth::params_synthetic_2d();
    p.spacing_x = spacing;
    p.spacing_y = spacing;
    p
}

/// Random samples in [-1, 1) (fresh seed, printed) on a 2D line.
fn random_line(nsrc: usize, nrec: usize, ns: usize) -> TraceSet {
    let h = geometry::line_2d(nsrc, 25.0, nrec, 25.0);
    let data = random_vec(h.len() * ns, "nlbf traces");
    TraceSet { headers: h, data: data.into(), ns, dt: 0.004, t0: 0.0 }
}

/// A gather with events of known operators centred on parameter traces, light noise.
/// Returns the gather, the parameters and the (parameter trace, sample, operator) to find.
fn known_answer_gather() -> (TraceSet, EstimateParams, Vec<(usize, usize, [f32; 5])>) {
    let p = params_small(150.0);
    let h = geometry::line_2d(25, 25.0, 25, 25.0);
    // 2 ms sampling, 30 Hz and light noise: one step of D or E moves the outermost traces by half
    // a sample, so the true grid value is resolvable whatever the noise draw.
    let mut t = TraceSet::zeros(h, 320, 0.002);
    let x: Vec<f32> = t.headers.iter().map(|h| h.gx as f32).collect();
    let y: Vec<f32> = t.headers.iter().map(|h| h.sx as f32).collect();
    let tab = nlbf::Tables::new(&p.search);
    // Operators on the search grid: (iA, iB, iC, iD, iE).
    let picks = [(14usize, 6usize, 5usize, 7usize, 3usize), (4, 15, 8, 5, 6), (10, 10, 2, 9, 5)];
    let centres = [(300.0f32, 300.0f32), (150.0, 300.0), (300.0, 150.0)];
    let times = [0.16f32, 0.32, 0.48];
    let mut events = Vec::new();
    let mut want = Vec::new();
    for ((&(ia, ib, ic, id, ie), &c), &t0) in picks.iter().zip(&centres).zip(&times) {
        let op = [tab.a()[ia], tab.b()[ib], tab.c()[ic], tab.d()[id], tab.e()[ie]];
        events.push(synth::Event { t0, centre: c, op, amp: 1.0 });
        let pt = (c.1 / 150.0) as usize * 5 + (c.0 / 150.0) as usize; // grid 5 x 5 at 150 m
        want.push((pt, (t0 / 0.002).round() as usize, op));
    }
    synth::add_events(&mut t, &x, &y, &events, 30.0);
    synth::add_noise_par(&mut t, 0.02, test_seed());
    (t, p, want)
}

fn check_known_answer(code: &[u32], sem: &[f32], setup: &Setup, want: &[(usize, usize, [f32; 5])], who: &str) {
    for &(p, t0, op) in want {
        let o = p * setup.ns + t0;
        let got = setup.tables.decode(code[o]);
        assert_eq!(got, op, "{who}: parameter trace {p}, sample {t0}: picked {got:?}, true {op:?} (S = {})", sem[o]);
        assert!(sem[o] > 0.8, "{who}: S = {} at the event", sem[o]);
    }
}

#[test]
fn cpu_estimates_known_operators() {
    let (t, p, want) = known_answer_gather();
    let s = Setup::new(&t, &p).unwrap();
    assert_eq!((s.grid.nx, s.grid.ny), (5, 5));
    let (code, sem) = cpu::estimate(&s, &t.data);
    check_known_answer(&code, &sem, &s, &want, "cpu");
}

#[test]
fn gpu_variants_estimate_known_operators() {
    let Some(g) = gpu_or_skip("gpu_variants_estimate_known_operators") else { return };
    let (t, p, want) = known_answer_gather();
    let s = Setup::new(&t, &p).unwrap();
    let (code, sem) = gpu::estimate_paper(&g, &s, &t.data).unwrap();
    check_known_answer(&code, &sem, &s, &want, "gpu-paper");
    let (code, sem) = gpu::FastPlan::new(&g, &s, None).unwrap().run(&g, &s, &t.data).unwrap();
    check_known_answer(&code, &sem, &s, &want, "gpu-fast");
}

/// CPU vs the paper-faithful kernel vs every run length of the fast kernel on fresh random data,
/// at sizes that are not multiples of any block size; outputs poisoned before the fast run.
#[test]
fn gpu_variants_match_cpu_on_random_data() {
    let Some(g) = gpu_or_skip("gpu_variants_match_cpu_on_random_data") else { return };
    let t = random_line(23, 29, 137);
    let p = params_small(140.0);
    let s = Setup::new(&t, &p).unwrap();
    let all: Vec<usize> = (0..s.np()).collect();
    let (cc, cs) = cpu::estimate(&s, &t.data);
    let (pc, ps) = gpu::estimate_paper(&g, &s, &t.data).unwrap();
    let a = compare(&s, &t.data, &all, (&pc, &ps), (&cc, &cs));
    println!("gpu-paper vs cpu: {a}");
    assert!(a.passes(), "gpu-paper vs cpu: {a}");
    // Every sliding variant (run length L, D/E values per pass G) with the default C scan, then
    // every C-scan group with the default sliding variant.
    let mut tunings: Vec<gpu::Tuning> = gpu_kernels_variants().into_iter()
        .map(|v| gpu::Tuning { slide: Some(v), cscan_group: None, cscan: Some(gpu::CSCAN_DEFAULT) }).collect();
    // Every C-scan group with every C-scan variant (staging, register cap: the tuning of the C scan).
    for cg in [1u32, 2, 3, 4] {
        for cv in gpu::CSCAN_VARIANTS {
            tunings.push(gpu::Tuning { slide: None, cscan_group: Some(cg), cscan: Some(cv) });
        }
    }
    let mut ran = 0;
    for tune in tunings {
        let Ok(plan) = gpu::FastPlan::tuned(&g, &s, tune) else {
            println!("{tune:?} does not apply here");
            continue;
        };
        ran += 1;
        let mut b = plan.upload(&g, &s, &t.data).unwrap();
        b.code = g.upload(&vec![u32::MAX; s.estimations()]).unwrap();
        b.sem = g.poisoned(s.estimations()).unwrap();
        b.picks = g.upload(&vec![u32::MAX; 2 * s.estimations()]).unwrap();
        plan.launch(&g, &s, &mut b).unwrap();
        let (fc, fs) = (g.download(&b.code).unwrap(), g.download(&b.sem).unwrap());
        let n_codes = (s.tables.n_ad() * s.tables.n_be() * s.tables.nc) as u32;
        let who = format!("{} + {} [{}]", plan.slide_kernel, plan.cscan_kernel, plan.cscan_variant);
        assert!(fc.iter().all(|&c| c < n_codes), "{who}: an estimation was not written");
        assert!(fs.iter().all(|v| v.is_finite() && (0.0..=1.0 + 1e-6).contains(v)), "{who}: S not written or out of range");
        let a = compare(&s, &t.data, &all, (&fc, &fs), (&pc, &ps));
        println!("{who} vs gpu-paper: {a}");
        assert!(a.passes(), "{who} vs gpu-paper: {a}");
        let a = compare(&s, &t.data, &all, (&fc, &fs), (&cc, &cs));
        assert!(a.passes(), "{who} vs cpu: {a}");
    }
    assert!(ran >= 8, "only {ran} variants applied");
}

/// An MPI rank's part of the search on a GPU: its block of parameter traces, from only the input
/// traces their apertures hold (`Setup::subset_reading`), on fresh random data; every pick and
/// semblance equals the whole search's on the same GPU, bit for bit (fast and paper kernels),
/// outputs poisoned before each run.
#[test]
fn gpu_rank_parts_reading_their_apertures_equal_the_whole_search() {
    let Some(g) = gpu_or_skip("gpu_rank_parts_reading_their_apertures_equal_the_whole_search") else { return };
    let t = random_line(23, 29, 137);
    let s = Setup::new(&t, &params_small(140.0)).unwrap();
    let backend = Backend::Gpu(g.clone());
    for variant in [nlbf::Variant::GpuFast, nlbf::Variant::GpuPaper] {
        let whole = nlbf::NlbfDevice::new(&backend);
        let n = s.estimations();
        let (mut code, mut sem) = (vec![u32::MAX; n], vec![f32::NAN; n]);
        nlbf::estimate_item_into(variant, &whole, &s, &t.data, 0..s.np(), &mut code, &mut sem).unwrap();
        for part in [0..7, 7..s.np() / 2, s.np() / 2..s.np()] {
            let (sub, wanted) = s.subset_reading(part.clone());
            assert!(wanted.len() < s.ntr(), "{part:?}: reads every trace");
            let data: Vec<f32> = wanted.iter().flat_map(|&k| t.data[k * t.ns..(k + 1) * t.ns].iter().copied()).collect();
            let dev = nlbf::NlbfDevice::new(&backend);
            let m = part.len() * s.ns;
            let (mut c, mut e) = (vec![u32::MAX; m], vec![f32::NAN; m]);
            nlbf::estimate_item_into(variant, &dev, &sub, &data, 0..part.len(), &mut c, &mut e).unwrap();
            let at = part.start * s.ns..part.end * s.ns;
            assert_eq!(c, code[at.clone()], "{variant:?} {part:?}: picks");
            assert!(e.iter().zip(&sem[at]).all(|(a, b)| a.to_bits() == b.to_bits()), "{variant:?} {part:?}: semblance");
        }
    }
}

fn gpu_kernels_variants() -> Vec<(u32, u32)> { seisgpu_host::kernels::nlbf::slide_variants(5).to_vec() }

/// The cross-spread search space (151 A and B values) on the small cross-spread workload with
/// events; the fast engine end to end against the CPU reference.
#[test]
fn gpu_fast_matches_cpu_on_crossspread() {
    let Some(g) = gpu_or_skip("gpu_fast_matches_cpu_on_crossspread") else { return };
    let (t, p) = synth::crossspread_3d(BenchSize::Small);
    let s = Setup::new(&t, &p).unwrap();
    let all: Vec<usize> = (0..s.np()).collect();
    let (cc, cs) = cpu::estimate(&s, &t.data);
    let mut engine = gpu::FastEngine::new(&g, &s, &t.data, None).unwrap();
    let (fc, fs) = engine.process(&g, &s, &t.data).unwrap();
    let a = compare(&s, &t.data, &all, (&fc, &fs), (&cc, &cs));
    println!("gpu-fast (engine) vs cpu on crossspread-3d small: {a}");
    assert!(a.passes(), "{a}");
    // A second gather through the same engine (different data) gives that gather's answer.
    let mut t2 = t.clone();
    synth::add_noise_par(&mut t2, 0.5, test_seed());
    let (c2, s2) = engine.process(&g, &s, &t2.data).unwrap();
    let (cc2, cs2) = cpu::estimate(&s, &t2.data);
    let a = compare(&s, &t2.data, &all, (&c2, &s2), (&cc2, &cs2));
    assert!(a.passes(), "second gather: {a}");
    // The one-pass entry (finiteness checked while staging, geometry built during the copies).
    let est = engine.estimate(&g, &t2, &p).unwrap();
    assert_eq!((est.code.as_slice(), est.semblance.as_slice()), (c2.as_slice(), s2.as_slice()));
    let mut bad = t2.clone();
    bad.data[7 * bad.ns + 5] = f32::INFINITY;
    let e = engine.estimate(&g, &bad, &p).unwrap_err().to_string();
    assert!(e.contains("trace 7 sample 5 is not finite"), "{e}");
}

/// The pipelined engine (bands of parameter traces over three streams, chunked upload, setup on a
/// host thread) gives exactly the serial engine's result for any banding, on the cross-spread
/// (source-major: early bands need a prefix of the gather) and on a 2D line with random samples;
/// results poisoned between runs; a non-finite sample is still reported by trace and sample.
#[test]
fn gpu_pipelined_engine_equals_serial() {
    let Some(g) = gpu_or_skip("gpu_pipelined_engine_equals_serial") else { return };
    let (mut t, p) = synth::crossspread_3d(BenchSize::Small);
    synth::add_noise_par(&mut t, 0.3, test_seed());
    let line = random_line(13, 23, 97);
    let p2 = params_small(140.0);
    for (t, p) in [(&t, &p), (&line, &p2)] {
        let s = Setup::new(t, p).unwrap();
        let all: Vec<usize> = (0..s.np()).collect();
        let mut engine = gpu::FastEngine::new(&g, &s, &t.data, None).unwrap();
        let serial = engine.estimate_serial(&g, t, p).unwrap();
        // Every C-scan variant (deep staging, JIT copies with a register cap) through the pipelined
        // path: the same bits as the default C scan.
        for cv in gpu::CSCAN_VARIANTS {
            let tune = gpu::Tuning { cscan: Some(cv), ..gpu::Tuning::default() };
            let Ok(mut e2) = gpu::FastEngine::with_tuning(&g, &s, &t.data, tune) else {
                println!("C-scan variant {cv} does not apply here");
                continue;
            };
            let est = e2.estimate(&g, t, p).unwrap();
            assert!(est.code == serial.code, "C-scan variant {cv}: picks differ from the default");
            assert!(est.semblance.iter().zip(&serial.semblance).all(|(x, y)| x.to_bits() == y.to_bits()),
                "C-scan variant {cv}: S differs from the default");
        }
        let (cc, cs) = cpu::estimate(&s, &t.data);
        let a = compare(&s, &t.data, &all, (&serial.code, &serial.semblance), (&cc, &cs));
        assert!(a.passes(), "serial engine vs cpu: {a}");
        let ends: [&[f64]; 5] = [&gpu::BAND_ENDS, &[1.0], &[0.5, 1.0], &[0.01, 0.02, 0.03, 0.5, 0.99],
            &[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.97, 0.99]];
        for e in ends {
            // Poison the device outputs so a band that never ran cannot pass unnoticed.
            engine.bufs.code = g.upload(&vec![u32::MAX; s.estimations()]).unwrap();
            engine.bufs.sem = g.upload(&vec![f32::NAN; s.estimations()]).unwrap();
            let est = engine.estimate_bands(&g, t, p, e).unwrap();
            assert!(est.code == serial.code, "bands {e:?}: picks differ from the serial engine");
            assert!(est.semblance.iter().zip(&serial.semblance).all(|(x, y)| x.to_bits() == y.to_bits()),
                "bands {e:?}: S differs from the serial engine");
            let times = engine.last_pipeline_times().unwrap();
            println!("bands {e:?}: {times}");
            assert!(times.kernels_ms > 0.0 && times.lead_ms >= 0.0);
        }
        let mut bad = t.clone();
        bad.data[7 * bad.ns + 5] = f32::NAN;
        let err = engine.estimate(&g, &bad, p).unwrap_err().to_string();
        assert!(err.contains("trace 7 sample 5 is not finite"), "{err}");
        // The engine still works after the error.
        let again = engine.estimate(&g, t, p).unwrap();
        assert!(again.code == serial.code);
    }
}

/// Windows other than 11 samples use their own compiled kernels.
#[test]
fn gpu_fast_other_windows() {
    let Some(g) = gpu_or_skip("gpu_fast_other_windows") else { return };
    let t = random_line(17, 21, 101);
    for w in [3usize, 7, 15] {
        let mut p = params_small(140.0);
        p.window = w;
        let s = Setup::new(&t, &p).unwrap();
        let all: Vec<usize> = (0..s.np()).collect();
        let (cc, cs) = cpu::estimate(&s, &t.data);
        let (fc, fs) = gpu::FastPlan::new(&g, &s, None).unwrap().run(&g, &s, &t.data).unwrap();
        let a = compare(&s, &t.data, &all, (&fc, &fs), (&cc, &cs));
        assert!(a.passes(), "window {w}: {a}");
    }
}

#[test]
fn enhancement_raises_signal_to_noise() {
    let (clean, noisy, p) = demo_gather();
    let est = nlbf::estimate(&noisy, &p, &[Backend::Cpu]).unwrap();
    let ep = EnhanceParams { aperture: p.aperture_c };
    let out = nlbf::enhance(&noisy, &p.coords, &est, &ep, &[Backend::Cpu]).unwrap();
    let before = seisgpu_host::synth::snr_db(&clean.data, &noisy.data);
    let after = seisgpu_host::synth::snr_db(&clean.data, &out.data);
    println!("SNR {before:.2} dB -> {after:.2} dB");
    assert!(after - before > 6.0, "enhancement gained only {:.2} dB ({before:.2} -> {after:.2})", after - before);
}

/// An MPI rank's part of the enhancement: its block of traces, from only the traces their
/// neighbour lists hold (`EnhanceSetup::subset_reading`), on random data and a random estimate:
/// the whole enhancement's rows bit for bit, on the CPU and (where there is one) the GPU, the
/// GPU's output poisoned first.
#[test]
fn enhancement_parts_reading_their_neighbours_equal_the_whole() {
    let t = random_line(13, 17, 61);
    let p = params_small(140.0);
    let s = Setup::new(&t, &p).unwrap();
    // Any picks will do: random codes (every one valid).
    let n_codes = (s.tables.n_ad() * s.tables.n_be() * s.tables.nc) as u32;
    let code: Vec<u32> = random_vec(s.estimations(), "nlbf codes").iter().map(|v| ((v.abs() * 1e6) as u32) % n_codes).collect();
    let est = nlbf::Estimate::from_setup(&s, code, vec![0.0; s.estimations()]);
    let ep = EnhanceParams { aperture: Aperture { x: 130.0, y: 70.0 } };
    let setup = nlbf::EnhanceSetup::new(&t, &p.coords, &est, &ep).unwrap();
    let whole = cpu::enhance(&setup, &est, &t.data);
    let gpu = gpu_or_skip("enhancement_parts_reading_their_neighbours_equal_the_whole (GPU part)");
    let ns = t.ns;
    // `--gpus`: three CPU queues, then the GPUs.
    let three = nlbf::enhance(&t, &p.coords, &est, &ep, &[Backend::Cpu, Backend::Cpu, Backend::Cpu]).unwrap();
    assert!(three.data.iter().zip(&whole).all(|(a, b)| a.to_bits() == b.to_bits()), "3 CPU queues vs one");
    for part in [0..1, 5..60, 60..t.len()] {
        let (sub, order) = setup.subset_reading(part.clone());
        assert_eq!(&order[..part.len()], &part.clone().collect::<Vec<_>>()[..]);
        assert!(order.len() < t.len(), "{part:?}: reads every trace");
        let data: Vec<f32> = order.iter().flat_map(|&k| t.data[k * ns..(k + 1) * ns].iter().copied()).collect();
        let got = cpu::enhance(&sub, &est, &data);
        let want = &whole[part.start * ns..part.end * ns];
        assert!(got.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()) && got.len() == want.len(), "{part:?}: CPU");
        if let Some(g) = &gpu {
            let b = gpu::EnhanceBuffers::upload(g, &sub, &est, &data).unwrap();
            let mut out = g.poisoned(part.len() * ns).unwrap();
            gpu::enhance_launch(g, &sub, &est, &b, &mut out).unwrap();
            let on_gpu = g.download(&out).unwrap();
            let full = gpu::enhance(g, &setup, &est, &t.data).unwrap();
            let want = &full[part.start * ns..part.end * ns];
            assert!(on_gpu.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits()), "{part:?}: GPU");
        }
    }
    if let Some(g) = &gpu {
        let one = gpu::enhance(g, &setup, &est, &t.data).unwrap();
        let split = nlbf::enhance(&t, &p.coords, &est, &ep, &[Backend::Gpu(g.clone()), Backend::Gpu(g.clone())]).unwrap();
        assert!(split.data.iter().zip(&one).all(|(a, b)| a.to_bits() == b.to_bits()), "2 GPU queues vs one GPU");
    }
}

#[test]
fn gpu_enhancement_and_nmo_match_cpu() {
    let Some(g) = gpu_or_skip("gpu_enhancement_and_nmo_match_cpu") else { return };
    let (_, noisy, p) = demo_gather();
    let est = nlbf::estimate(&noisy, &p, &[Backend::Cpu]).unwrap();
    let ep = EnhanceParams { aperture: Aperture { x: 130.0, y: 70.0 } };
    let setup = nlbf::EnhanceSetup::new(&noisy, &p.coords, &est, &ep).unwrap();
    let want = cpu::enhance(&setup, &est, &noisy.data);
    let b = gpu::EnhanceBuffers::upload(&g, &setup, &est, &noisy.data).unwrap();
    let mut out = g.poisoned(noisy.data.len()).unwrap();
    gpu::enhance_launch(&g, &setup, &est, &b, &mut out).unwrap();
    let got = g.download(&out).unwrap();
    let worst = got.iter().zip(&want).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(got.iter().all(|v| v.is_finite()), "enhancement left unwritten samples");
    assert!(worst <= 1e-5, "enhancement: GPU and CPU differ by {worst}");

    // NMO on random data (odd sizes), several velocities and offsets.
    let t = random_line(7, 13, 203);
    let np = NmoParams { velocity: vec![(0.0, 1500.0), (0.4, 2100.0), (0.8, 2600.0)], max_stretch: 0.4 };
    let want = nlbf::nmo(&Backend::Cpu, &t, &np).unwrap();
    let got = nlbf::nmo(&Backend::Gpu(g.clone()), &t, &np).unwrap();
    let worst = got.data.iter().zip(&want.data).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max);
    assert!(worst <= 1e-6, "NMO: GPU and CPU differ by {worst}");
    assert!(want.data.iter().any(|&v| v == 0.0) && want.data.iter().any(|&v| v != 0.0));
}

#[test]
fn bad_input_is_a_clear_error() {
    let t = random_line(9, 9, 40);
    let run = |p: EstimateParams| nlbf::estimate(&t, &p, &[Backend::Cpu]).unwrap_err().to_string();
    let base = params_small(100.0);

    // Parameter traces with an empty (B, E) aperture are left unestimated, the others searched.
    let mut p = base;
    p.aperture_be = Aperture { x: 10.0, y: 10.0 };
    p.spacing_x = 30.0;
    let est = nlbf::estimate(&t, &p, &[Backend::Cpu]).unwrap();
    assert!(est.unestimated_count() > 0 && est.unestimated_count() < est.grid.len(), "{:?}", est.unestimated);

    for (step, what) in [(0.0, "step 0 must be positive"), (-1e-5, "step -0.00001 must be positive")] {
        let mut p = base;
        p.search.b.step = step;
        let e = run(p);
        assert!(e.contains("search range of B") && e.contains(what), "{e}");
    }
    let mut p = base;
    p.search.e = Range::new(1e-7, 1e-8, -1e-7);
    let e = run(p);
    assert!(e.contains("search range of E") && e.contains("below min"), "{e}");

    let mut p = base;
    p.window = 41;
    let e = run(p);
    assert!(e.contains("window of 41 samples is longer than the traces (40 samples)"), "{e}");

    let mut p = base;
    p.coords = Coordinates { x: nlbf::CoordKey::SourceY, ..Coordinates::LINE_2D };
    let e = run(p);
    assert!(e.contains("x coordinate (source-y) is zero on every trace"), "{e}");

    let mut p = base;
    p.spacing_x = 0.0;
    assert!(run(p).contains("spacing in x is 0 m"));

    let mut bad = t.clone();
    bad.data[5 * 40 + 3] = f32::NAN;
    let e = nlbf::estimate(&bad, &base, &[Backend::Cpu]).unwrap_err().to_string();
    assert!(e.contains("trace 5 sample 3 is not finite"), "{e}");

    let np = NmoParams { velocity: vec![(0.0, -3.0)], max_stretch: 0.5 };
    let e = nlbf::nmo(&Backend::Cpu, &t, &np).unwrap_err().to_string();
    assert!(e.contains("velocity positive"), "{e}");

    let s = SearchSpace { a: Range::new(-1.0, 1e-7, 1.0), ..base.search };
    let e = run(EstimateParams { search: s, ..base });
    assert!(e.contains("search range of A") && e.contains("values (at most"), "{e}");
}

/// `seisgpu bench nlbf --size small` must finish in seconds on a 2-core CPU.
#[test]
fn bench_small_runs() {
    let backend = match gpu_or_skip("bench_small_runs (GPU part)") {
        Some(g) => Backend::Gpu(g),
        None => Backend::Cpu,
    };
    let rows = seisgpu_lab::nlbf::bench(&backend, BenchSize::Small, &Default::default()).unwrap();
    for r in &rows {
        println!("{:<22} {:<16} {:<10} {:>10.3} ms  {}  {}", r.workload, r.variant, r.scope, r.stats.median_ms, r.check, r.note);
    }
    assert!(rows.iter().any(|r| r.variant == "cpu-reference" && r.workload == "nlbf-crossspread-3d"));
}

/// The paper-size benchmark (GPU machine): `integration nlbf_bench_paper --ignored --nocapture`.
#[test]
#[ignore]
fn nlbf_bench_paper() {
    let Some(g) = gpu_or_skip("nlbf_bench_paper") else { return };
    println!("{}", g.info());
    use seisgpu_host::kernels::nlbf::{self as k, kernels::{NLBF_ENHANCE, NLBF_NMO, NLBF_PAPER}};
    let mut names = vec![NLBF_PAPER.name(), NLBF_ENHANCE.name(), NLBF_NMO.name()];
    for &(l, sg) in k::slide_variants(5) {
        names.extend(k::slide_kernel_g(l, 5, sg).map(|d| d.name()));
    }
    for &cg in k::CSCAN_GROUPS.iter() {
        names.extend(k::cscan_kernel(5, cg).map(|d| d.name()));
        names.extend(k::cscan_deep_kernel(5, cg).map(|d| d.name()));
    }
    for kname in names {
        // A name the module lacks is reported, not fatal: the timings below matter more.
        let Ok((regs, local, maxt)) = gpu::kernel_resources(&g, kname) else {
            println!("KERNEL {kname:<20} not in the module");
            continue;
        };
        println!("KERNEL {kname:<20} {regs:>4} regs, {local:>5} B local, max {maxt} threads/block");
    }
    let rows = seisgpu_lab::nlbf::bench(&Backend::Gpu(g), BenchSize::Paper, &Default::default()).unwrap();
    for r in &rows {
        let frac = r.fraction_of_ceiling.map(|f| format!("{:.1} % FP32", 100.0 * f)).unwrap_or_default();
        println!("SUMMARY {:<20} {:<15} {:<10} median {:>11.3} ms (min {:.3}, max {:.3}, n {}) {frac}", r.workload, r.variant,
            r.scope, r.stats.median_ms, r.stats.min_ms, r.stats.max_ms, r.stats.repeats);
    }
}
