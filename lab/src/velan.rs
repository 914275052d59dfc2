//! Velocity-analysis benchmark: `velan-survey`, a survey-sized scan (paper size: 10,000 CMPs of
//! 60 traces x 1500 samples at 4 ms, offsets 50 to 3000 m, 200 trial velocities from 1400 to
//! 4500 m/s, 40 ms window; small: 64 CMPs of 60 x 500, 50 velocities).
//!
//! Rows: the CPU reference on all cores (at paper size timed on a subset of CMPs and scaled by
//! their number: the note says so), the GPU kernel with the gathers resident (all CMPs' panels
//! into device memory), and the GPU end to end (gathers uploaded, panels downloaded). The GPU's
//! panels are checked against the CPU's on the subset first (bit-identical expected). Ceiling:
//! instruction issue, at the kernel's count of instructions per evaluation.

use rayon::prelude::*;

use seisgpu_host::velan::{cpu, gpu, Gathers, Scan, VelanParams};
use seisgpu_host::backend::Backend;
use crate::bench::{peak_issue, set_issue_ceiling, BenchRow, BenchSize, Ceilings};
use seisgpu_host::runtime::timing::{measure_cpu, GpuTimer, Stats};
use seisgpu_host::velocity::Location;

/// Instructions one thread issues per evaluation (trace x t0 x velocity) in the kernel's inner
/// loop on the shared-memory path, hyperbolic moveout: 37 PTX instructions (moveout FMA, position,
/// liveness, split, staged-span test, two shared loads, interpolation, three accumulations,
/// branches), the correctly rounded square root counted as the ~8 SASS instructions it expands to.
/// An estimate from the PTX (no disassembly of the sm_90 code yet).
pub const INSTR_PER_EVAL: f64 = 44.0;

/// The workload's gathers: noise traces (the cost does not depend on the samples), offsets
/// 50 to 3000 m, CDP numbers 1.. every 25 m.
pub fn survey(cmps: usize, fold: usize, ns: usize, dt: f32, seed: u64) -> Gathers {
    let mut data = vec![0f32; cmps * fold * ns];
    data.par_chunks_mut(fold * ns).enumerate().for_each(|(i, c)| seisgpu_host::synth::add_noise(c, 1.0, seed ^ (i as u64 + 1)));
    let x2: Vec<f32> = (0..cmps * fold).map(|k| {
        let x = 50.0 + 2950.0 * (k % fold) as f32 / (fold.max(2) - 1) as f32;
        x * x
    }).collect();
    Gathers {
        data, ns, dt, t_first: 0.0,
        trace0: (0..=cmps).map(|g| (g * fold) as u32).collect(),
        x2,
        input: (0..cmps * fold).collect(),
        location: (0..cmps).map(|g| Location { cdp: Some(g as i32 + 1), x: 25.0 * g as f64, y: 0.0 }).collect(),
    }
}

fn scaled(s: Stats, f: f64) -> Stats { Stats { median_ms: s.median_ms * f, min_ms: s.min_ms * f, max_ms: s.max_ms * f, repeats: s.repeats } }

pub fn bench(backend: &Backend, size: BenchSize, ceilings: &Ceilings) -> anyhow::Result<Vec<BenchRow>> {
    let (cmps, fold, ns, nv, sub_n) = match size {
        BenchSize::Paper => (10_000, 60, 1500, 200, 64),
        BenchSize::Small => (64, 60, 500, 50, 64),
    };
    let g = survey(cmps, fold, ns, 0.004, 7);
    let p = VelanParams { vmin: 1400.0, vmax: 4500.0, nv, window: 0.04, eta: 0.0, max_stretch: 0.5 };
    let scan = Scan::new(&p, &g)?;
    let evals = (cmps * fold * ns * nv) as f64;
    let unit = "semblance evaluations (trace x t0 x velocity)";
    let row = |variant: &str, scope: &str, stats: Stats, check: String, note: String| BenchRow {
        workload: "velan-survey".into(), variant: variant.into(), scope: scope.into(), stats, work: evals, work_unit: unit.into(),
        ceiling: None, fraction_of_ceiling: None, check, paper: None, note,
    };
    let mut rows = Vec::new();

    let sub = g.subset(0..sub_n.min(cmps));
    let mut cpu_panels = Vec::new();
    let st = measure_cpu(0, 1, || cpu_panels = cpu::semblance(&sub, &scan));
    let factor = cmps as f64 / sub.len() as f64;
    rows.push(row("cpu-reference", "end-to-end", scaled(st, factor), "reference".into(),
        format!("{} threads; {} of {cmps} CMPs timed ({:.2} s), scaled x{factor:.1}; {fold} traces x {ns} samples, {nv} velocities",
            rayon::current_num_threads(), sub.len(), st.median_ms / 1e3)));

    let Backend::Gpu(gpu_dev) = backend else { return Ok(rows) };
    let gd = gpu_dev.as_ref();
    // Agreement on the subset before any timing.
    let gpu_sub = gpu::semblance(gd, &sub, &scan)?;
    let worst = gpu_sub.iter().zip(&cpu_panels).map(|(a, b)| (a - b).abs()).fold(0.0f32, f32::max);
    anyhow::ensure!(worst <= 1e-6, "velan-survey: GPU panels differ from the CPU reference by {worst}");
    let check = format!("vs CPU on {} CMPs: max |dS| {worst:.1e}", sub.len());

    let r = gpu::Resident::upload(gd, &g, &scan)?;
    let mut out = gd.zeros::<f32>(cmps * nv * ns)?;
    let timer = GpuTimer::new(gd.stream())?;
    let k = timer.measure(1, 5, || gpu::launch_all(gd, &r, &g, &scan, &mut out))?;
    let (cfg, _) = gpu::config(&scan, ns, gpu::batch_gathers(nv, ns));
    let mut kr = row("gpu", "kernel", k, check.clone(), format!("velan_semblance, blocks of {} threads, {} B shared, {} launches",
        cfg.block_dim.0, cfg.shared_mem_bytes, cmps.div_ceil(gpu::batch_gathers(nv, ns))));
    set_issue_ceiling(&mut kr, INSTR_PER_EVAL, "instr/evaluation, PTX estimate", peak_issue(ceilings, gd.info().peak_fp32()));
    rows.push(kr);
    drop((r, out));

    let mut failed = None;
    let e2e = measure_cpu(1, 3, || {
        if let Err(e) = gpu::semblance(gd, &g, &scan) {
            failed = Some(e);
        }
    });
    if let Some(e) = failed {
        return Err(e.context("velan-survey end to end"));
    }
    let mut er = row("gpu", "end-to-end", e2e, check, format!("gathers uploaded, {:.1} GB of panels downloaded",
        (cmps * nv * ns * 4) as f64 / 1e9));
    set_issue_ceiling(&mut er, INSTR_PER_EVAL, "instr/evaluation, PTX estimate", peak_issue(ceilings, gd.info().peak_fp32()));
    rows.push(er);
    for r in &rows {
        eprintln!("ROW {} {} {} {:.3} ms | {} | {}", r.workload, r.variant, r.scope, r.stats.median_ms, r.check, r.note);
    }
    Ok(rows)
}
