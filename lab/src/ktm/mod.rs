//! ktm benchmark workloads (paper 2, Tables 1 and 2) and the demo.
//!
//! - `ktm-table2`: N traces of 1024 samples at 4 ms, sources and receivers scattered over the
//!   image area (3-D geometry, offsets up to ~4 km), migrated into a 255 x 255 x 1024 image with full
//!   aperture, N = 4096, 8192, 40960, 83968 (paper: CPU 2096..49663 s on 4 Nehalem threads, GPU
//!   100..2616 s on a Tesla C1060).
//! - `ktm-table1`: 6727 traces x 640 samples into a 1 x 255 x 1248 image (paper: 0.9 s), with the
//!   paper's block-shape sweep for its kernel.
//!
//! Every workload: the CPU reference on all cores (on a subset of the traces, scaled, for the
//! big ones: the note says which), each GPU variant checked against the CPU on that subset, then
//! timed kernel-only (CUDA events, traces and image resident) and end to end (host traces in, host
//! image out, including the CPU preprocessing and transfers). `--size small` shrinks everything to
//! seconds on a 2-core CPU.

use std::path::Path;

use seisgpu_host::ktm::{migrate, Image, ImageGrid, Params, Plan, Variant, Velocity};
use seisgpu_host::backend::Backend;
use crate::bench::{rel_l2, BenchRow, BenchSize, Ceilings, DemoRow, DemoSize, Selection};
use seisgpu_host::runtime::timing::measure_cpu;
use seisgpu_host::runtime::{Gpu, GpuTimer, Stats};
use seisgpu_host::traces::{TraceHeader, TraceSet};

mod workloads;
pub use workloads::{names, scattered_traces, vrms, workloads, workloads_named, Workload};
use crate::scale::Workload as ScaleWorkload;

/// SASS instructions per contribution of the bare columns kernels (sm_90, from the disassembly of
/// their inner loops; docs/notes/ktm.md): v1 205 for 8 image times of one trace, v2 396 and fast
/// 248 for 8 image times of two traces.
pub fn columns_instr_per_contribution(v: Variant) -> Option<f64> {
    match v {
        Variant::ColumnsV1 => Some(25.6),
        Variant::Columns => Some(24.75),
        Variant::ColumnsFast => Some(15.5),
        _ => None,
    }
}

/// SASS instructions per contribution of the other kernels' trace loops (sm_90, nvdisasm of the
/// embedded PTX at the commit that added this; docs/notes/ktm.md), with `true` where the count is a
/// lower bound: the paper's kernel runs 43 per (trace, image sample) in its stride loop, plus a
/// block reduction per image sample that is not counted.
pub fn other_instr_per_contribution(v: Variant) -> Option<(f64, bool)> {
    match v {
        Variant::Paper { .. } => Some((43.0, true)),
        _ => None,
    }
}

/// The production kernel (`ktm_mig_columns_aa`: rho-filtered pairs, weights, triangle
/// anti-aliasing with three samples per contribution): its trace loop runs, per 4 image times of one
/// trace, 445 SASS instructions where all four fetch their samples inside the untapered aperture,
/// 285 where none does (outside the trace's time range or at zero weight), 529 with the cosine
/// taper at the aperture edge. The bench uses the smallest, 71.25 per contribution, as a lower
/// bound (the share of each path depends on the data: 111.25 gave 106% on the H100).
pub const COLUMNS_AA_INSTR_PER_CONTRIBUTION: f64 = 71.25;

/// The first `n` traces of a set.
pub(crate) fn subset(t: &TraceSet, n: usize) -> TraceSet {
    let n = n.min(t.len());
    TraceSet { headers: t.headers[..n].to_vec(), data: t.data[..n * t.ns].to_vec().into(), ns: t.ns, dt: t.dt, t0: t.t0 }
}

fn scale(s: Stats, f: f64) -> Stats {
    Stats { median_ms: s.median_ms * f, min_ms: s.min_ms * f, max_ms: s.max_ms * f, repeats: s.repeats }
}

/// CUDA-event timing of `f` on the GPU's default stream: warm-up, then the median of repeats.
pub(crate) fn time_gpu(gpu: &Gpu, warmup: usize, repeats: usize, mut f: impl FnMut() -> anyhow::Result<()>) -> anyhow::Result<Stats> {
    let timer = GpuTimer::new(gpu.stream())?;
    for _ in 0..warmup {
        f()?;
    }
    gpu.synchronize()?;
    let mut v = Vec::with_capacity(repeats);
    for _ in 0..repeats.max(1) {
        timer.start()?;
        f()?;
        v.push(timer.stop_ms()?);
    }
    Ok(Stats::from_samples(&v))
}

/// Runs every workload on the CPU reference and (when `backend` is a GPU) every GPU variant.
pub fn bench(backend: &Backend, size: BenchSize, ceilings: &Ceilings) -> anyhow::Result<Vec<BenchRow>> {
    bench_selected(backend, size, ceilings, &Selection::default())
}

/// [`bench`] of the workloads `sel` names (see [`names`]).
pub fn bench_selected(backend: &Backend, size: BenchSize, ceilings: &Ceilings, sel: &Selection) -> anyhow::Result<Vec<BenchRow>> {
    let mut rows = Vec::new();
    for wl in workloads_named(size, |n| sel.wants(n)) {
        rows.extend(bench_workload(backend, size, ceilings, &wl)?);
    }
    Ok(rows)
}

/// The rows of one workload.
pub fn bench_workload(backend: &Backend, size: BenchSize, ceilings: &Ceilings, wl: &Workload) -> anyhow::Result<Vec<BenchRow>> {
    let mut rows = Vec::new();
    let n = wl.traces.len();
    let full_work = n as f64 * wl.params.grid.len() as f64;
    // CPU reference: all traces at the small size, a subset of 32 (scaled) at the paper's.
    let n_cpu = match size {
        BenchSize::Small => n,
        BenchSize::Paper => 32.min(n),
    };
    let sub = subset(&wl.traces, n_cpu);
    let mut cpu_image = None;
    let cpu_stats = measure_cpu(0, if size == BenchSize::Small { 3 } else { 2 }, || {
        cpu_image = Some(migrate(&sub, &wl.params, &[Backend::Cpu]).expect("CPU migration"));
    });
    let cpu_image: Image = cpu_image.expect("measured at least once");
    let scaled = n as f64 / n_cpu as f64;
    let cpu_row = BenchRow {
        workload: wl.name.clone(),
        variant: "cpu-reference".into(),
        scope: "end-to-end".into(),
        stats: scale(cpu_stats, scaled),
        work: full_work,
        work_unit: "contributions".into(),
        ceiling: None,
        fraction_of_ceiling: None,
        check: "reference".into(),
        paper: wl.paper.clone(),
        note: format!("{} threads; {}", rayon::current_num_threads(),
            if n_cpu < n { format!("timed on the first {n_cpu} of {n} traces, scaled by {scaled:.0}") } else { "all traces".into() }),
    };
    let cpu_rate = cpu_row.throughput();
    rows.push(cpu_row);
    let Some(gpu) = backend.gpu() else { return Ok(rows) };

    // Every variant on the 4096-trace case and Table 1; the larger Table 2 cases (the same kernel
    // on more traces, the throughput barely moves) time the default, its approximate sibling and
    // the paper's kernel, so the suite stays within its ten minutes.
    let mut variants = if wl.name.starts_with("ktm-table2") && n > 40960 {
        vec![Variant::Columns]
    } else if wl.name.starts_with("ktm-table2") && n > 4096 {
        vec![Variant::Columns, Variant::ColumnsFast, Variant::PAPER]
    } else {
        vec![Variant::Columns, Variant::ColumnsV1, Variant::ColumnsFast, Variant::PAPER]
    };
    if wl.name == "ktm-table1" {
        // The paper's Table 1 sweep of its kernel's block shape.
        variants.extend([(64, 1), (256, 1), (512, 1), (64, 2), (128, 2), (256, 2), (64, 4), (128, 4), (64, 8)]
            .map(|(x, y)| Variant::Paper { block_x: x, block_y: y }));
    }
    let peak_issue = crate::bench::peak_issue(ceilings, gpu.info().peak_fp32());
    for variant in variants {
        let params = Params { variant, ..wl.params.clone() };
        // Check against the CPU on the CPU's subset first.
        let check_img = migrate(&sub, &params, std::slice::from_ref(backend))?;
        let err = rel_l2(&check_img.data, &cpu_image.data);
        anyhow::ensure!(err < variant.tolerance(), "{} {}: GPU differs from the CPU reference (rel L2 {err:.2e})", wl.name,
            variant.name());
        let check = format!("rel L2 {err:.1e} vs CPU on {n_cpu} traces");
        // A probe on a few hundred traces sizes the timed run: the default kernel runs on every
        // trace unless one launch would take over 6 s, the others on as many as 0.75 s allows
        // (scaled, and said in the note), so the whole benchmark fits a few minutes.
        let probe = subset(&wl.traces, 512.min(n));
        let probe_plan = Plan::new(&probe.headers, probe.ns, probe.dt, probe.t0, &params)?;
        let probe_prep = seisgpu_host::ktm::prep::prepare(&probe, &probe_plan, &params);
        let mut res = seisgpu_host::ktm::gpu::Resident::new(gpu, &probe_plan, &probe_prep)?;
        let p = time_gpu(gpu, 1, 1, || res.run(gpu, variant))?;
        drop(res);
        let traces_per_s = probe.len() as f64 / (p.median_ms * 1e-3);
        let budget_s = if variant.is_columns() { 6.0 } else { 0.75 };
        let n_gpu = n.min(((traces_per_s * budget_s) as usize).max(probe.len()));
        let traces = subset(&wl.traces, n_gpu);
        let f = n as f64 / n_gpu as f64;
        let note_sub = if n_gpu < n { format!("timed on {n_gpu} of {n} traces, scaled by {f:.2}; ") } else { String::new() };
        let plan = Plan::new(&traces.headers, traces.ns, traces.dt, traces.t0, &params)?;
        let prep = seisgpu_host::ktm::prep::prepare(&traces, &plan, &params);
        let mut res = seisgpu_host::ktm::gpu::Resident::new(gpu, &plan, &prep)?;
        let est_s = n_gpu as f64 / traces_per_s;
        let (warm, reps) = if est_s > 2.0 { (1, 2) } else if est_s > 0.5 { (1, 3) } else { (2, 5) };
        let k = time_gpu(gpu, warm, reps, || res.run(gpu, variant))?;
        drop(res);
        let mut kernel_row = BenchRow {
            workload: wl.name.clone(),
            variant: variant.name(),
            scope: "kernel".into(),
            stats: scale(k, f),
            work: full_work,
            work_unit: "contributions".into(),
            ceiling: None,
            fraction_of_ceiling: None,
            check: check.clone(),
            paper: wl.paper.clone(),
            note: String::new(),
        };
        let rate = kernel_row.throughput();
        kernel_row.note = format!("{note_sub}{:.2e} contributions/s, {:.1}x the CPU reference", rate, rate / cpu_rate);
        if let Some(ipc) = columns_instr_per_contribution(variant) {
            crate::bench::set_issue_ceiling(&mut kernel_row, ipc, "SASS instr/contribution", peak_issue);
        } else if let Some((ipc, lower)) = other_instr_per_contribution(variant) {
            let what = if lower { "SASS instr/contribution, lower bound" } else { "SASS instr/contribution" };
            crate::bench::set_issue_ceiling(&mut kernel_row, ipc, what, peak_issue);
        }
        rows.push(kernel_row);
        // End to end: host traces in, host image out (preprocessing, uploads, launches, download).
        let e2e = measure_cpu(if est_s > 0.5 { 0 } else { 1 }, if est_s > 0.5 { 1 } else { 3 }, || {
            migrate(&traces, &params, std::slice::from_ref(backend)).expect("GPU migration");
        });
        let mut row = BenchRow {
            workload: wl.name.clone(),
            variant: variant.name(),
            scope: "end-to-end".into(),
            stats: scale(e2e, f),
            work: full_work,
            work_unit: "contributions".into(),
            ceiling: None,
            fraction_of_ceiling: None,
            check,
            paper: wl.paper.clone(),
            note: String::new(),
        };
        row.note = format!("{note_sub}{:.1}x the CPU reference", row.throughput() / cpu_rate);
        rows.push(row);
    }
    // Interpolated traveltimes (paper 5) beside the exact columns rows: the 4096- and 40960-trace cases.
    if wl.name.starts_with("ktm-table2") && (size == BenchSize::Small || n == 4096 || n == 40960) {
        rows.extend(crate::ktm_interp::rows(gpu, wl, &sub, &cpu_image, cpu_rate, peak_issue)?);
    }
    // The production configuration (rho filter, weights, anti-aliasing) with the default kernel.
    if wl.name.starts_with("ktm-table2") && n <= 8192 {
        let params = Params::full(wl.params.grid, vrms());
        let check_cpu = migrate(&subset(&sub, 16), &params, &[Backend::Cpu])?;
        let check_gpu = migrate(&subset(&sub, 16), &params, std::slice::from_ref(backend))?;
        let err = rel_l2(&check_gpu.data, &check_cpu.data);
        anyhow::ensure!(err < 1e-5, "{} full corrections: GPU differs from the CPU (rel L2 {err:.2e})", wl.name);
        let plan = Plan::new(&wl.traces.headers, wl.traces.ns, wl.traces.dt, wl.traces.t0, &params)?;
        let prep = seisgpu_host::ktm::prep::prepare(&wl.traces, &plan, &params);
        let mut res = seisgpu_host::ktm::gpu::Resident::new(gpu, &plan, &prep)?;
        let k = time_gpu(gpu, 1, 3, || res.run(gpu, Variant::Columns))?;
        let mut row = BenchRow {
            workload: wl.name.clone(),
            variant: "gpu-columns+rho+weights+antialias".into(),
            scope: "kernel".into(),
            stats: k,
            work: full_work,
            work_unit: "contributions".into(),
            ceiling: None,
            fraction_of_ceiling: None,
            check: format!("rel L2 {err:.1e} vs CPU on 16 traces"),
            paper: None,
            note: String::new(),
        };
        row.note = format!("{:.2e} contributions/s", row.throughput());
        crate::bench::set_issue_ceiling(&mut row, COLUMNS_AA_INSTR_PER_CONTRIBUTION, "SASS instr/contribution, lower bound",
            peak_issue);
        rows.push(row);
    }
    Ok(rows)
}

/// A small 3-D survey over a point diffractor, migrated with every correction on: how well it
/// focuses is the quality figure. Seconds on a 2-core CPU.
pub fn demo(backend: &Backend, out_dir: &Path, size: DemoSize) -> anyhow::Result<DemoRow> {
    // `size` widens the image and the receiver patch (traces grow with its square).
    let k = size.factor();
    let n = 20 * k + 1;
    let c = 10 * k; // the centre bin, where the diffractor sits
    let g = ImageGrid { x0: 0.0, dx: 20.0, nx: n, y0: 0.0, dy: 20.0, ny: n, tau0: 0.0, dtau: 0.004, ntau: 150 };
    let (x, y, tau0, v) = (20.0 * c as f64, 20.0 * c as f64, 0.4f64, 2000.0f64);
    let nr = 8 * k; // receivers per side
    let half = 40.0 * (nr - 1) as f64;
    let mut headers = Vec::new();
    for i in 0..16 {
        for j in 0..nr * nr {
            let (sx, sy) = (x + (i / 4) as f64 * 120.0 - 180.0, y + (i % 4) as f64 * 120.0 - 180.0);
            let (gx, gy) = (x + (j / nr) as f64 * 80.0 - half, y + (j % nr) as f64 * 80.0 - half);
            headers.push(TraceHeader { sx, sy, gx, gy, ..Default::default() });
        }
    }
    let mut traces = TraceSet::zeros(headers, 250, 0.004);
    for i in 0..traces.len() {
        let h = traces.headers[i];
        let leg = |px: f64, py: f64| (tau0 * tau0 / 4.0 + ((px - x).powi(2) + (py - y).powi(2)) / (v * v)).sqrt();
        seisgpu_host::synth::add_ricker(traces.trace_mut(i), 0.004, (leg(h.sx, h.sy) + leg(h.gx, h.gy)) as f32, 25.0, 1.0);
    }
    seisgpu_host::synth::add_noise(&mut traces.data, 0.5, 5);
    let params = Params::full(g, Velocity::Constant(v as f32));
    let t = std::time::Instant::now();
    let img = migrate(&traces, &params, std::slice::from_ref(backend))?;
    let seconds = t.elapsed().as_secs_f64();
    // Envelope peak (local energy over +-2 samples).
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
    let (ix, iy, it) = best.1;
    let rms = seisgpu_host::synth::rms(&img.data) as f64;
    let peak = img.data.iter().fold(0.0f32, |a, &b| a.max(b.abs())) as f64;
    std::fs::create_dir_all(out_dir)?;
    let path = out_dir.join("ktm-diffractor-inline.png");
    let section: Vec<f32> = (0..g.nx).flat_map(|kx| (0..g.ntau).map(move |kt| (kx, kt))).map(|(kx, kt)| img.at(0, kx, c, kt)).collect();
    let axes = seisgpu_host::plot::Axes::time_s(g.tau0 as f64, g.dtau as f64).traces(g.x0, g.dx, "x (m)");
    seisgpu_host::plot::section_png_with(&path, &section, g.nx, g.ntau, &format!("ktm: migrated diffractor, y = {} m", g.y0 + g.dy * c as f64), &axes)?;
    Ok(DemoRow {
        algorithm: "ktm".into(),
        backend: backend.name().into(),
        seconds,
        quality: format!("diffractor focused at bin ({ix}, {iy}), sample {it} (true ({c}, {c}), 100): off by {} bins, {} samples; \
            peak/rms {:.0} (noisy input, S/N 2, {} traces)", ix.abs_diff(c).max(iy.abs_diff(c)), it.abs_diff(100), peak / rms, traces.len()),
        images: if path.exists() { vec![path] } else { vec![] },
    })
}

/// The strong-scaling workload (`seisgpu bench --gpus`, [`crate::scale`]): Table 2's 40960-trace run
/// on the split migration ([`seisgpu_host::ktm::Migration`]); small: its 1/32.
pub fn scale_workload(size: BenchSize) -> anyhow::Result<ScaleWorkload> {
    let paper = size == BenchSize::Paper;

    // Table 2's 40960-trace run (255 x 255 x 1024 image, full aperture); small: its 1/32.
    let all = workloads(size);
    let pick = if paper { "ktm-table2-40960" } else { "ktm-table2-256" };
    let w = all.into_iter().find(|w| w.name == pick).ok_or_else(|| anyhow::anyhow!("no {pick} workload"))?;
    let work = w.traces.len() as f64 * w.params.grid.len() as f64;
    let (traces, params) = (w.traces, w.params);
    Ok(ScaleWorkload::new(format!("scale-{}", w.name), work, "contributions (trace x image sample)", false, move |d| {
        Ok(seisgpu_host::exec::run(&seisgpu_host::ktm::Migration::of(&traces, &params)?, d)?.data)
    }).target(3.7))
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_are_the_workloads_names() {
        use super::*;
        let size = BenchSize::Small;
        let built: Vec<String> = workloads(size).into_iter().map(|w| w.name).collect();
        assert_eq!(names(size), built);
        let one: Vec<String> = workloads_named(size, |n| n == "ktm-table1").into_iter().map(|w| w.name).collect();
        assert_eq!(one, ["ktm-table1"]);
    }
}
