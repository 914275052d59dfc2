//! Wave-packet benchmark workloads (issue 6): forward and inverse of N^3 cubes at epsilon 1e-4 and
//! 1e-6 (N = 128, 256, 512 for `paper`; 32, 48 for `small`), and a 1024 x 512 x 512 volume through
//! the fragment path. Every GPU variant (the paper's 3D stencil, the separable USFFT, the exact
//! lattice FFT) is checked against the CPU reference before it is timed; kernel-only times use
//! CUDA events, end-to-end times the wall clock from host data to host results; per-stage times
//! come from events between the steps (global FFT, gather, box FFTs, correction).

use std::path::Path;
use std::sync::Arc;

use anyhow::Result;
use num_complex::Complex32;

use super::apps;
use super::cpu::CpuEngine;
use super::fragments::Fragmented;
use super::gpu::GpuEngine;
use super::{Finest, Frame, FrameParams, Gather, Params};
use crate::backend::Backend;
use crate::bench::{rel_l2, BenchRow, BenchSize, Ceilings, DemoRow};
use crate::runtime::timing::measure_cpu;
use crate::runtime::{GpuTimer, Stats};

/// Relative L2 difference of complex vectors, in f64, without copies.
fn rel_l2_c(a: &[Complex32], b: &[Complex32]) -> f64 {
    use rayon::prelude::*;
    let (num, den) = a.par_chunks(1 << 16).zip(b.par_chunks(1 << 16)).map(|(x, y)| {
        let (mut n, mut d) = (0.0f64, 0.0f64);
        for (p, q) in x.iter().zip(y) {
            n += ((p.re - q.re) as f64).powi(2) + ((p.im - q.im) as f64).powi(2);
            d += (q.re as f64).powi(2) + (q.im as f64).powi(2);
        }
        (n, d)
    }).reduce(|| (0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
    if den == 0.0 { num.sqrt() } else { (num / den).sqrt() }
}

fn row(workload: &str, variant: &str, scope: &str, stats: Stats, work: f64, unit: &str, check: &str, note: String) -> BenchRow {
    BenchRow {
        workload: workload.to_string(),
        variant: variant.to_string(),
        scope: scope.to_string(),
        stats,
        work,
        work_unit: unit.to_string(),
        ceiling: None,
        fraction_of_ceiling: None,
        check: check.to_string(),
        paper: None,
        note,
    }
}

fn single(ms: f64) -> Stats { Stats::from_samples(&[ms]) }

/// A realistic test cube: dipping and curved events plus noise at a tenth of their RMS.
fn test_cube(n: usize) -> Vec<f32> {
    let mut v = apps::synthetic_cube([n, n, n], 0.004, 25.0);
    let s = crate::synth::rms(&v) * 0.1;
    crate::synth::add_noise(&mut v, s, 99);
    v
}

/// Wall-clock statistics of a fallible closure.
fn wall<F: FnMut() -> Result<()>>(warmup: usize, repeats: usize, mut f: F) -> Result<Stats> {
    for _ in 0..warmup {
        f()?;
    }
    let mut t = Vec::new();
    for _ in 0..repeats.max(1) {
        let s = std::time::Instant::now();
        f()?;
        t.push(s.elapsed().as_secs_f64() * 1e3);
    }
    Ok(Stats::from_samples(&t))
}

/// CUDA-event statistics of a fallible closure on the GPU's default stream.
fn events<F: FnMut() -> Result<()>>(timer: &GpuTimer, warmup: usize, repeats: usize, mut f: F) -> Result<Stats> {
    for _ in 0..warmup {
        f()?;
    }
    let mut t = Vec::new();
    for _ in 0..repeats.max(1) {
        timer.start()?;
        f()?;
        t.push(timer.stop_ms()?);
    }
    Ok(Stats::from_samples(&t))
}

/// Median per-category stage times (ms) over `runs` profiles.
fn stages(e: &mut GpuEngine, forward: bool, runs: usize) -> Result<Vec<(String, f64)>> {
    let mut per: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for _ in 0..runs {
        let mut sums: std::collections::BTreeMap<String, f64> = Default::default();
        for (label, ms) in e.profile(forward)? {
            *sums.entry(label.split(':').next().unwrap_or(label).to_string()).or_default() += ms;
        }
        for (k, v) in sums {
            per.entry(k).or_default().push(v);
        }
    }
    Ok(per.into_iter().map(|(k, v)| (k, crate::runtime::median(&v))).collect())
}

/// All workloads of issue 6 on `backend` (and the CPU reference beside it).
pub fn bench(backend: &Backend, size: BenchSize, ceilings: &Ceilings) -> Result<Vec<BenchRow>> {
    bench_with(backend, size, ceilings, &mut |_| {})
}

/// [`bench`], handing each workload's rows to `progress` as soon as they are measured.
pub fn bench_with(backend: &Backend, size: BenchSize, _ceilings: &Ceilings, progress: &mut dyn FnMut(&[BenchRow]))
    -> Result<Vec<BenchRow>> {
    let cubes: &[usize] = match size {
        BenchSize::Small => &[32, 48],
        BenchSize::Paper => &[128, 256, 512],
    };
    let mut rows = Vec::new();
    for &n in cubes {
        for eps in [1e-4, 1e-6] {
            let r = bench_cube(backend, size, n, eps)?;
            progress(&r);
            rows.extend(r);
        }
    }
    let r = bench_fragments(backend, size)?;
    progress(&r);
    rows.extend(r);
    Ok(rows)
}

fn bench_cube(backend: &Backend, size: BenchSize, n: usize, eps: f64) -> Result<Vec<BenchRow>> {
    let mut rows = Vec::new();
    let f = test_cube(n);
    let samples = (n * n * n) as f64;
    let params = |gather| Params { eps, gather, frame: FrameParams::default() };
    let fr = Arc::new(Frame::new(n, &params(Gather::Separable))?);
    let box_points = fr.total as f64;
    let (wf, wi) = (format!("wavepacket-forward-{n}-eps{eps:e}"), format!("wavepacket-inverse-{n}-eps{eps:e}"));
    let red = format!("redundancy {:.2}, {} boxes, P = {}, q = {}", fr.redundancy(), fr.box_count(), fr.p(), fr.geom.q);
    let paper = size == BenchSize::Paper;

    // CPU reference (separable USFFT, all cores): the coefficients every GPU variant is checked against.
    let mut reference = None;
    let mut cpu_fwd_ms = f64::NAN;
    let mut cpu_inv_ms = f64::NAN;
    if !paper || n <= 128 || (n <= 256 && eps == 1e-4) {
        let cpu = CpuEngine::new(fr.clone());
        let c = cpu.forward(&f);
        let back = cpu.inverse(&c);
        let rt = rel_l2(&back, &f);
        let reps = if n >= 256 { 1 } else { 3 };
        let sf = measure_cpu(0, reps, || drop(cpu.forward(&f)));
        let si = measure_cpu(0, reps, || drop(cpu.inverse(&c)));
        cpu_fwd_ms = sf.median_ms;
        cpu_inv_ms = si.median_ms;
        let threads = rayon::current_num_threads();
        let chk = format!("inverse(forward) rel L2 {rt:.1e}");
        rows.push(row(&wf, "cpu-reference", "end-to-end", sf, samples, "samples", &chk, format!("separable USFFT, {threads} threads; {red}")));
        rows.push(row(&wi, "cpu-reference", "end-to-end", si, samples, "samples", &chk, format!("separable USFFT, {threads} threads")));
        if (!paper && n == 32 || paper && n == 128) && eps == 1e-4 {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
            let (s1f, s1i) = pool.install(|| (measure_cpu(0, 1, || drop(cpu.forward(&f))), measure_cpu(0, 1, || drop(cpu.inverse(&c)))));
            rows.push(row(&wf, "cpu-reference-1thread", "end-to-end", s1f, samples, "samples", &chk, "separable USFFT, 1 thread".into()));
            rows.push(row(&wi, "cpu-reference-1thread", "end-to-end", s1i, samples, "samples", &chk, "separable USFFT, 1 thread".into()));
            let stencil = CpuEngine::new(Arc::new(Frame::new(n, &params(Gather::Stencil))?));
            let cs = stencil.forward(&f);
            let err = rel_l2_c(&cs, &c);
            let ssf = measure_cpu(0, 1, || drop(stencil.forward(&f)));
            let ssi = measure_cpu(0, 1, || drop(stencil.inverse(&c)));
            let chk = format!("vs separable rel L2 {err:.1e}");
            rows.push(row(&wf, "cpu-paper-stencil", "end-to-end", ssf, samples, "samples", &chk, format!("paper's 3D stencil, {threads} threads")));
            rows.push(row(&wi, "cpu-paper-stencil", "end-to-end", ssi, samples, "samples", &chk, format!("paper's 3D stencil, {threads} threads")));
        }
        reference = Some(c);
    }

    let Backend::Gpu(gpu) = backend else { return Ok(rows) };
    let timer = GpuTimer::new(gpu.stream())?;
    let (warm, reps) = if n >= 512 { (1, 3) } else { (2, 7) };
    // The exact lattice variant first: the check for the others where the CPU is not run.
    let mut exact: Option<Vec<Complex32>> = None;
    for (gather, variant) in [(Gather::Lattice, "gpu-lattice"), (Gather::Separable, "gpu-separable"), (Gather::Stencil, "gpu-paper")] {
        let frg = Arc::new(Frame::new(n, &params(gather))?);
        let mut e = GpuEngine::new(gpu.clone(), frg.clone())?;
        let c = e.forward(&f)?;
        let back = e.inverse(&c)?;
        let rt = rel_l2(&back, &f);
        let (against, what) = match (&reference, &exact) {
            (Some(r), _) => (r, "CPU"),
            (None, Some(x)) => (x, "GPU lattice (exact)"),
            (None, None) => (&c, "itself"),
        };
        let err = rel_l2_c(&c, against);
        let chk = format!("vs {what} rel L2 {err:.1e}; inverse(forward) {rt:.1e}");
        if gather == Gather::Lattice {
            exact = Some(c.clone());
        }
        // The paper's stencil at 512^3 runs seconds per transform: one timed run of each.
        let (warm, reps, runs) = if n >= 512 && gather == Gather::Stencil { (0, 1, 1) } else { (warm, reps, 3) };
        let kf = events(&timer, warm, reps, || e.forward_device())?;
        // End to end from and to page-locked host buffers (the engine's own).
        e.pinned_buffers()?.0.copy_from_slice(&f);
        let ef = wall(warm.min(1), reps.min(3), || e.forward_pinned())?;
        let ki = events(&timer, warm, reps, || e.inverse_device())?;
        e.pinned_buffers()?.1.copy_from_slice(&c);
        let ei = wall(warm.min(1), reps.min(3), || e.inverse_pinned())?;
        // And from ordinary (pageable) host memory, as `Engine::forward` takes it.
        let pageable = if n <= 256 {
            let mut host_c = vec![Complex32::default(); frg.total];
            let pf = wall(1, 2, || {
                e.upload_volume(&f)?;
                e.forward_device()?;
                e.download_coeffs(&mut host_c)
            })?;
            let pi = wall(1, 2, || {
                e.upload_coeffs(&c)?;
                e.inverse_device()?;
                e.download_volume().map(drop)
            })?;
            Some((pf, pi))
        } else {
            None
        };
        let sf = stages(&mut e, true, runs)?;
        let si = stages(&mut e, false, runs)?;
        let speed = |cpu: f64, gpu: &Stats| if cpu.is_finite() { format!(", x{:.1} vs CPU all cores", cpu / gpu.median_ms) } else { String::new() };
        rows.push(row(&wf, variant, "kernel", kf, samples, "samples", &chk, format!("{red}{}", speed(cpu_fwd_ms, &kf))));
        rows.push(row(&wf, variant, "end-to-end", ef, samples, "samples", &chk,
            format!("pinned host buffers{}", speed(cpu_fwd_ms, &ef))));
        rows.push(row(&wi, variant, "kernel", ki, samples, "samples", &chk, format!("{red}{}", speed(cpu_inv_ms, &ki))));
        rows.push(row(&wi, variant, "end-to-end", ei, samples, "samples", &chk, format!("pinned host buffers{}", speed(cpu_inv_ms, &ei))));
        if let Some((pf, pi)) = pageable {
            rows.push(row(&wf, variant, "end-to-end-pageable", pf, samples, "samples", &chk, String::new()));
            rows.push(row(&wi, variant, "end-to-end-pageable", pi, samples, "samples", &chk, String::new()));
        }
        for (forward, st, w) in [(true, &sf, &wf), (false, &si, &wi)] {
            let get = |k: &str| st.iter().find(|(c, _)| c == k).map(|x| x.1).unwrap_or(0.0);
            for (cat, ms) in st.iter() {
                rows.push(row(w, variant, &format!("stage:{cat}"), single(*ms), box_points, "box points", &chk, String::new()));
            }
            // The gather's throughput including its share of the global FFT (and the correction);
            // the inverse's includes the gather over boxes (combine).
            let ms = get("gather") + get("fft") + get("corr") + if forward { 0.0 } else { get("combine") };
            rows.push(row(w, variant, if forward { "gather+fft (forward)" } else { "gather+fft (inverse)" }, single(ms), box_points,
                "box points", &chk, format!("{:.2e} box points/s", box_points / (ms * 1e-3))));
        }
    }
    Ok(rows)
}

fn bench_fragments(backend: &Backend, size: BenchSize) -> Result<Vec<BenchRow>> {
    let (shape, cube) = match size {
        BenchSize::Small => ([96, 64, 80], 32),
        BenchSize::Paper => ([1024, 512, 512], 256),
    };
    if size == BenchSize::Paper && !matches!(backend, Backend::Gpu(_)) {
        return Ok(Vec::new()); // hours on a CPU; the 256^3 rows give the per-cube CPU time
    }
    let mut vol = vec![0.0f32; shape.iter().product()];
    crate::synth::add_noise(&mut vol, 1.0, 5);
    let params = Params { eps: 1e-4, ..Params::default() };
    let overlap = (cube / 8).max(4);
    let tr = Fragmented::new(backend, shape, cube, overlap, &params, true)?;
    let out = tr.process(&vol, |_, _| {})?;
    let err = rel_l2(&out, &vol);
    let stats = wall(0, 1, || tr.process(&vol, |_, _| {}).map(drop))?;
    let w = format!("wavepacket-fragments-{}x{}x{}-eps1e-4", shape[0], shape[1], shape[2]);
    Ok(vec![row(&w, &format!("{}-fragments", backend.name()), "end-to-end", stats, vol.len() as f64, "samples",
        &format!("forward+inverse rel L2 {err:.1e}"),
        format!("{} cubes of {cube}^3 (overlap >= {overlap}), {} engine(s), forward + inverse per cube", tr.tiling.count(), tr.engines()))])
}

/// Rows as a full table, one line each.
pub fn table(rows: &[BenchRow]) -> String {
    let mut s = String::new();
    for r in rows {
        s += &format!("{:<44} {:<22} {:<22} {:>10.3} ms {:>10.3e} {}/s | {} | {}\n", r.workload, r.variant, r.scope,
            r.stats.median_ms, r.throughput(), r.work_unit, r.check, r.note);
    }
    s
}

pub fn print_rows(rows: &[BenchRow]) { print!("{}", table(rows)); }

/// One row as JSON.
pub fn row_json(row: &BenchRow) -> String { serde_json::to_string(row).unwrap_or_default() }

/// One line per (workload, variant): kernel and end-to-end times, stages, gather throughput.
pub fn summary(rows: &[BenchRow]) -> String {
    let mut keys: Vec<(String, String)> = Vec::new();
    for r in rows {
        let k = (r.workload.clone(), r.variant.clone());
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut s = String::new();
    for (w, v) in keys {
        let rs: Vec<&BenchRow> = rows.iter().filter(|r| r.workload == w && r.variant == v).collect();
        let w = w.trim_start_matches("wavepacket-");
        let mut line = format!("{w:<30} {v:<21}");
        for r in &rs {
            match r.scope.as_str() {
                "kernel" => line += &format!(" kern {:.2}", r.stats.median_ms),
                "end-to-end" => line += &format!(" e2e {:.1}", r.stats.median_ms),
                "end-to-end-pageable" => line += &format!(" e2e-pageable {:.1}", r.stats.median_ms),
                sc if sc.starts_with("stage:") => line += &format!(" {} {:.2}", &sc[6..], r.stats.median_ms),
                sc if sc.starts_with("gather+fft") => line += &format!(" | {:.2e} pts/s", r.throughput()),
                _ => {}
            }
        }
        if let Some(r) = rs.iter().find(|r| r.scope == "kernel" || r.scope == "end-to-end") {
            let speed = r.note.split(", ").find(|p| p.contains(" vs CPU")).unwrap_or("");
            line += &format!(" | {} {}", r.check.split(';').next().unwrap_or(""), speed);
        }
        s += line.trim_end();
        s += "\n";
    }
    s
}

/// Demo: denoising, compression and interpolation of a small synthetic cube on `backend`.
pub fn demo(backend: &Backend, out_dir: &Path) -> Result<DemoRow> {
    let t0 = std::time::Instant::now();
    let shape = [40, 40, 64];
    let clean = apps::synthetic_cube(shape, 0.004, 25.0);
    let mut noisy = clean.clone();
    let sigma = crate::synth::rms(&clean) * 0.5;
    crate::synth::add_noise(&mut noisy, sigma, 3);
    let directional = Params { frame: FrameParams { finest: Finest::Directional, ..FrameParams::default() }, ..Params::default() };
    let tr = Fragmented::new(backend, shape, 256, 32, &directional, false)?;
    let d = apps::denoise(&tr, &noisy, None, 3.0)?;
    let (before, after) = (apps::snr_db_on(&clean, &noisy, 64, None), apps::snr_db_on(&clean, &d.volume, 64, None));
    let live = apps::random_dead_traces(40 * 40, 0.3, 5);
    let p = apps::interpolate(&tr, &clean, &live, apps::InterpMethod::Pocs { iterations: 8, final_fraction: 0.002 })?;
    let sp = apps::snr_db_on(&clean, &p.volume, 64, Some(&live));
    let tc = Fragmented::new(backend, shape, 256, 32, &Params::default(), false)?;
    let c = apps::compress(&tc, &clean, 0.05)?;
    std::fs::create_dir_all(out_dir)?;
    let mut images = Vec::new();
    // The inline through the middle of the cube: 40 traces of 64 samples.
    let section = |v: &[f32]| v[20 * 40 * 64..21 * 40 * 64].to_vec();
    let gaps: Vec<f32> = {
        let mut g = clean.clone();
        for (t, &l) in live.iter().enumerate() {
            if !l {
                g[t * 64..(t + 1) * 64].fill(0.0);
            }
        }
        g
    };
    for (name, v, title) in [
        ("wavepacket-noisy.png", &noisy, "noisy inline"),
        ("wavepacket-denoised.png", &d.volume, "denoised (3 sigma)"),
        ("wavepacket-gaps.png", &gaps, "30% traces missing"),
        ("wavepacket-pocs.png", &p.volume, "POCS interpolation"),
    ] {
        let path = out_dir.join(name);
        crate::plot::section_png(&path, &section(v), 40, 64, crate::plot::Style::Density, title)?;
        if path.exists() {
            images.push(path);
        }
    }
    Ok(DemoRow {
        algorithm: "wavepacket".into(),
        backend: backend.name().into(),
        seconds: t0.elapsed().as_secs_f64(),
        quality: format!(
            "denoise SNR {before:.1} -> {:.1} dB (sigma estimated {:.3}, true {sigma:.3}); CR {:.3} at {:.1} dB; 30% missing traces POCS {sp:.1} dB",
            after, d.sigma, c.ratio, c.snr_db
        ),
        images,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_bench_and_demo_run_on_the_cpu() {
        let rows = bench(&Backend::Cpu, BenchSize::Small, &Ceilings::default()).unwrap();
        print!("{}", summary(&rows));
        assert!(rows.iter().any(|r| r.workload.contains("fragments")));
        assert!(rows.iter().all(|r| r.stats.median_ms.is_finite() && r.stats.median_ms > 0.0), "{}", table(&rows));
    }

    #[test]
    fn demo_runs_on_the_cpu() {
        let d = demo(&Backend::Cpu, &std::env::temp_dir().join("seisgpu-wp-demo")).unwrap();
        println!("{d:?}");
        assert!(d.quality.contains("dB"));
    }
}
