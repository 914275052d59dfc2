//! pstm workloads: the speed table (`pstm-table2`, the paper's Table 2 image and trace count), the
//! accuracy table (`pstm-accuracy`, the paper's Table 1 bands), and the demo.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use anyhow::Context;
use seisgpu_host::kernels::pstm::traveltime::{Dsr, Vti};
use seisgpu_host::kernels::pstm::DEAD;
use rayon::prelude::*;

use seisgpu_host::pstm::{count_pairs, cpu, plan, GpuTuning, PstmImage, PstmParams, TraveltimeMode, TraveltimeModel,
    DEFAULT_DYNAMIC_TOLERANCE};
use seisgpu_host::backend::Backend;
use crate::scale::Workload as ScaleWorkload;
use crate::bench::{rel_l2, BenchRow, BenchSize, Ceilings, DemoRow, DemoSize};
use seisgpu_host::runtime::timing::measure_cpu;
use seisgpu_host::runtime::{GpuTimer, Stats};
use seisgpu_host::synth;
use seisgpu_host::traces::TraceSet;

mod workloads;
pub use workloads::{band_limited, fast_noise, smooth_model, survey, table2};

/// Modes in the order they are benchmarked (the production one first).
fn modes() -> [TraveltimeMode; 3] {
    [TraveltimeMode::Static8, TraveltimeMode::Exact, TraveltimeMode::Dynamic { tolerance: DEFAULT_DYNAMIC_TOLERANCE }]
}

fn subset(t: &TraceSet, n: usize) -> TraceSet {
    let step = (t.len() / n.max(1)).max(1);
    let idx: Vec<usize> = (0..t.len()).step_by(step).take(n).collect();
    let mut s = TraceSet::zeros(idx.iter().map(|&i| t.headers[i]).collect(), t.ns, t.dt);
    s.t0 = t.t0;
    for (k, &i) in idx.iter().enumerate() {
        s.trace_mut(k).copy_from_slice(t.trace(i));
    }
    s
}

/// SASS instructions (per thread) per contribution of a kernel, for its row's issue ceiling: sm_90,
/// `.maxnreg 80`, the hot path of one trace through a full 48-layer chunk (every 8-sample step
/// FAST, no slow-path sqrt/division, converged warps), walked through the disassembly of the trace
/// loop (`scripts/pstm-sass-count.py`; docs/notes/pstm.md, "Counted issue limit") and divided by the
/// 48 contributions per lane. Includes the per-trace walk, the exact evaluations, the step
/// classification, the staging copy and the per-layer interpolate + gather + add (8.5 per FAST
/// layer from shared memory, 9.5 from global). Returns (count, exact): `exact` false where the
/// count is a lower bound (the unbatched static8 layer path and textures run more instructions
/// than the batched path counted; dynamic's step selection is divergent and data dependent, the
/// count is one walked path of it).
pub fn instr_per_contribution(mode: TraveltimeMode, model: TraveltimeModel, t: &GpuTuning) -> (f64, bool) {
    let smem = t.smem && !t.texture;
    // Lean static8 kernels (`GpuTuning::lean`, counted at the commit that added them; the DSR path
    // without the 33rd-point evaluation, the VTI one with it, as the rows below).
    let lean = smem && t.lean && mode == TraveltimeMode::Static8;
    if lean {
        // (More instructions on this all-FAST path than the first lean kernels had, fewer in the
        // units that are not all FAST, which the count does not walk; docs/notes/pstm.md, "Lean2".)
        let per_trace = match model {
            TraveltimeModel::Dsr => 1069.0,
            TraveltimeModel::Vti => 1477.0,
        };
        return ((per_trace / 48.0f64 * 10.0).round() / 10.0, true);
    }
    let per_trace = match (mode, model, smem) {
        (TraveltimeMode::Static8, TraveltimeModel::Dsr, true) => 1422.0,
        (TraveltimeMode::Static8, TraveltimeModel::Vti, true) => 1770.0,
        (TraveltimeMode::Static8, TraveltimeModel::Dsr, false) => 1330.0,
        (TraveltimeMode::Static8, TraveltimeModel::Vti, false) => 1650.0,
        (TraveltimeMode::Exact, TraveltimeModel::Dsr, true) => 3115.0,
        (TraveltimeMode::Exact, TraveltimeModel::Vti, true) => 5347.0,
        (TraveltimeMode::Exact, TraveltimeModel::Dsr, false) => 2857.0,
        (TraveltimeMode::Exact, TraveltimeModel::Vti, false) => 4977.0,
        // (dynamic: the smem DSR kernel's walked path; the others not walked, the same used)
        (TraveltimeMode::Dynamic { .. }, _, _) => 3725.0,
    };
    let exact = match mode {
        TraveltimeMode::Static8 => t.batched_units && !t.texture,
        TraveltimeMode::Exact => true,
        TraveltimeMode::Dynamic { .. } => false,
    };
    ((per_trace / 48.0f64 * 10.0).round() / 10.0, exact)
}

#[allow(clippy::too_many_arguments)]
fn row(workload: &str, variant: &str, scope: &str, stats: Stats, work: f64, check: String, paper: Option<String>,
    note: String) -> BenchRow {
    BenchRow {
        workload: workload.into(),
        variant: variant.into(),
        scope: scope.into(),
        stats,
        work,
        work_unit: "contributions".into(),
        ceiling: None,
        fraction_of_ceiling: None,
        check,
        paper,
        note,
    }
}

/// Runs `pstm-table2` (every mode and model, CPU reference on a subset, every GPU variant on the
/// full trace count, GPU checked against the CPU first) and returns the rows.
pub fn bench(backend: &Backend, size: BenchSize, ceilings: &Ceilings) -> anyhow::Result<Vec<BenchRow>> {
    bench_impl(backend, size, None, None, &[], &SUITE_VARIANTS.map(String::from), ceilings)
}

/// The launch shapes `seisgpu bench` (the whole suite) measures, so it fits its ten minutes: the
/// paper's, the old default, the best read-only-cache shape and the shared-memory shapes that
/// led the full sweep (`seisgpu pstm bench` runs every shape). `=` means the exact name.
const SUITE_VARIANTS: [&str; 6] = ["=gpu-w10-r96", "=gpu-w8-r80-lockstep-batched", "=gpu-w8-r80-smem-batched",
    "=gpu-w8-r80-smem-batched-t2x4", "=gpu-w8-r80-smem-batched-t2x4-lean2",
    "=gpu-paper (block 32x10, textures)"];

/// [`bench`] with the GPU trace count overridden (the paper's is 450,000) and an optional time
/// budget (s) after which the remaining GPU measurements are skipped (said on stderr).
pub fn bench_traces(backend: &Backend, size: BenchSize, n_traces: Option<usize>, budget_s: Option<f64>)
    -> anyhow::Result<Vec<BenchRow>> {
    bench_filtered(backend, size, n_traces, budget_s, &[], &[])
}

/// [`bench_traces`] restricted to the (mode, model) labels (e.g. `static8-dsr`, `exact-dsr`) in
/// `labels` and to the GPU variants whose name contains one of `variants` (`gpu-best` and the
/// paper's shape always run); empty lists = everything. A name that starts with `=` must match
/// exactly.
pub fn bench_filtered(backend: &Backend, size: BenchSize, n_traces: Option<usize>, budget_s: Option<f64>,
    labels: &[String], filter: &[String]) -> anyhow::Result<Vec<BenchRow>> {
    bench_impl(backend, size, n_traces, budget_s, labels, filter, &Ceilings::default())
}

/// [`bench_filtered`] with the device's measured ceilings (zero: the nominal peak is used for the
/// issue limit of each GPU kernel row).
fn bench_impl(backend: &Backend, size: BenchSize, n_traces: Option<usize>, budget_s: Option<f64>,
    labels: &[String], filter: &[String], ceilings: &Ceilings) -> anyhow::Result<Vec<BenchRow>> {
    let (p, ntr, ns) = table2(size);
    let ntr = n_traces.unwrap_or(ntr);
    let wl = "pstm-table2";
    let t0 = Instant::now();
    let traces = fast_noise(survey(ntr, &p, p.aperture as f64, 3000.0, 11), ns, 0.004, 5);
    let cpu_n = match size {
        BenchSize::Paper => 96,
        BenchSize::Small => 300,
    };
    let cpu_traces = subset(&traces, cpu_n);
    let (pairs, work) = count_pairs(&p, &plan(&traces, &p, TraveltimeMode::Exact)?);
    eprintln!("pstm bench: {} traces of {} samples, {pairs} trace-column pairs, {work} contributions ({:.1} s)",
        traces.len(), ns, t0.elapsed().as_secs_f64());
    let paper_note = "paper Table 3: CPU dynamic kernel 54320 s (Xeon E5620, 4 cores), GPU static8 kernel 2383 s (Tesla C1060), 22.76x";
    let mut rows = Vec::new();
    let mut best: (GpuTuning, Option<BenchRow>) = (p.gpu, None);
    let (m, d, v) = (modes(), TraveltimeModel::Dsr, TraveltimeModel::Vti);
    // static8 for both models first (the production mode and the VTI-vs-DSR comparison), then the rest.
    for (mode, model) in [(m[0], d), (m[0], v), (m[1], d), (m[2], d), (m[1], v), (m[2], v)] {
        {
            let label = format!("{}-{}", mode.name(), model.name());
            if !labels.is_empty() && !labels.contains(&label) {
                continue;
            }
            // CPU reference on the subset.
            let pl = plan(&cpu_traces, &p, mode)?;
            let (_, work_cpu) = count_pairs(&p, &pl);
            let mut cpu_img = None;
            let st = measure_cpu(0, 1, || cpu_img = Some(cpu::migrate(&cpu_traces, &p, &pl, mode, model)));
            let cpu_img = cpu_img.unwrap();
            rows.push(row(wl, &format!("cpu-reference {label}"), "end-to-end", st, work_cpu as f64, "reference".into(),
                Some(paper_note.into()),
                format!("{} of {} traces, {} threads, {} exact evaluations", cpu_traces.len(), traces.len(),
                    rayon::current_num_threads(), cpu_img.stats.exact_evals)));
            eprintln!("pstm bench: cpu {label}: {:.3} s, {:.3e} contributions/s", st.median_ms * 1e-3,
                work_cpu as f64 / (st.median_ms * 1e-3));
            let Backend::Gpu(gpu) = backend else { continue };
            if budget_s.is_some_and(|b| t0.elapsed().as_secs_f64() > b) {
                eprintln!("pstm bench: time budget spent, GPU {label} skipped");
                continue;
            }
            // GPU on the same subset, checked against the CPU before timing.
            let gimg = seisgpu_host::pstm::gpu::migrate(gpu, &cpu_traces, &p, &pl, mode, model)?;
            let check_err = rel_l2(&gimg.data, &cpu_img.data);
            let check = format!("rel L2 vs CPU on {} traces = {check_err:.1e}", cpu_traces.len());
            anyhow::ensure!(check_err < 1e-5, "GPU {label} differs from the CPU reference: {check}");
            // Full trace count, kernel only.
            let plf = plan(&traces, &p, mode)?;
            // static8-DSR (measured first) tries launch shapes; the fastest read-only-cache one is
            // then `gpu-best` for every other mode. The paper's shape (textures) is measured too.
            let tune = |w: u32, r: u32| GpuTuning { warps: w, max_regs: r, ..p.gpu };
            let batched = |t: GpuTuning| GpuTuning { batched_units: true, ..t };
            let lockstep = |t: GpuTuning| GpuTuning { lockstep: true, ..t };
            // Traces staged in shared memory per block (`*_smem` kernels); `tile_x` columns along x.
            let smem = |t: GpuTuning, tile_x: u32| GpuTuning { smem: true, tile_x, ..t };
            // Lean per-unit work (`*_smem_lean2` kernels; static8 only, the other modes ignore it).
            let lean2 = |t: GpuTuning| GpuTuning { lean: true, ..t };
            let mut variants: Vec<(String, GpuTuning)> = if mode == TraveltimeMode::Static8 && model == TraveltimeModel::Dsr {
                vec![("gpu-w10-r96".into(), tune(10, 96)), ("gpu-w8-r80".into(), tune(8, 80)), ("gpu-w4-r128".into(), tune(4, 128)),
                    ("gpu-w8-r80-batched".into(), batched(tune(8, 80))), ("gpu-w8-r80-lockstep".into(), lockstep(tune(8, 80))),
                    ("gpu-w8-r80-lockstep-batched".into(), lockstep(batched(tune(8, 80)))),
                    ("gpu-w16-r80-lockstep-batched".into(), lockstep(batched(tune(16, 80)))),
                    ("gpu-w10-r96-lockstep-batched".into(), lockstep(batched(tune(10, 96)))),
                    ("gpu-w8-r80-smem".into(), smem(tune(8, 80), 1)),
                    ("gpu-w8-r80-smem-batched".into(), smem(batched(tune(8, 80)), 1)),
                    ("gpu-w8-r80-smem-batched-t2x4".into(), smem(batched(tune(8, 80)), 2)),
                    ("gpu-w8-r80-smem-batched-t4x2".into(), smem(batched(tune(8, 80)), 4)),
                    ("gpu-w4-r80-smem-batched".into(), smem(batched(tune(4, 80)), 1)),
                    ("gpu-w16-r80-smem-batched-t4x4".into(), smem(batched(tune(16, 80)), 4)),
                    ("gpu-w10-r96-smem-batched".into(), smem(batched(tune(10, 96)), 1)),
                    ("gpu-w8-r96-smem-batched-t2x4".into(), smem(batched(tune(8, 96)), 2)),
                    ("gpu-w8-r80-smem-batched-t2x4-lean2".into(), lean2(smem(batched(tune(8, 80)), 2))),
                    ("gpu-paper (block 32x10, textures)".into(), GpuTuning::paper())]
            } else if mode == TraveltimeMode::Static8 {
                vec![("gpu-best".into(), best.0), ("gpu-w8-r80-smem-batched-t2x4".into(), smem(batched(tune(8, 80)), 2)),
                    ("gpu-w8-r80-smem-batched-t2x4-lean2".into(), lean2(smem(batched(tune(8, 80)), 2))),
                    ("gpu-paper (block 32x10, textures)".into(), GpuTuning::paper())]
            } else if model == TraveltimeModel::Dsr {
                // The old and the new trace path with static8's best shapes, so the static8/exact
                // ratio is read at equal footing.
                vec![("gpu-best".into(), best.0), ("gpu-w8-r80-lockstep-batched".into(), lockstep(batched(tune(8, 80)))),
                    ("gpu-w8-r80-smem".into(), smem(tune(8, 80), 1)), ("gpu-w8-r80-smem-t2x4".into(), smem(tune(8, 80), 2)),
                    ("gpu-w8-r80-smem-batched-t2x4".into(), smem(batched(tune(8, 80)), 2))]
            } else {
                // (No `-lean2` row here: exact and dynamic ignore it, so it would time the same kernel.)
                vec![("gpu-best".into(), best.0), ("gpu-w8-r80-smem-batched-t2x4".into(), smem(batched(tune(8, 80)), 2))]
            };
            variants.retain(|(n, _)| filter.is_empty() || n.starts_with("gpu-best")
                || filter.iter().any(|f| f.strip_prefix('=').map_or(n.contains(f.as_str()), |exact| n == exact)));
            let mut prep: Option<seisgpu_host::pstm::gpu::Prepared> = None;
            for (vname, tuning) in variants {
                let mut pt = p.clone();
                pt.gpu = tuning;
                // Each launch shape is checked against the CPU on the subset before it is timed.
                let gv = seisgpu_host::pstm::gpu::migrate(gpu, &cpu_traces, &pt, &pl, mode, model)?;
                let ev = rel_l2(&gv.data, &cpu_img.data);
                anyhow::ensure!(ev < 1e-5, "GPU {vname} {label} differs from the CPU reference: rel L2 {ev:.1e}");
                let check = format!("rel L2 vs CPU on {} traces = {ev:.1e}", cpu_traces.len());
                // Same data on the device: only the launch shape / register cap changes.
                let reuse = prep.as_ref().is_some_and(|pr| !pr.texture && !tuning.texture);
                if reuse {
                    prep.as_mut().unwrap().retune(&pt, mode, model)?;
                } else {
                    drop(prep.take()); // free the device memory first
                    prep = Some(seisgpu_host::pstm::gpu::Prepared::new(gpu, &traces, &pt, &plf, mode, model, false)?);
                }
                let pr = prep.as_mut().unwrap();
                let timer = GpuTimer::new(gpu.stream())?;
                // The first run is timed too; long ones are not repeated (device-time budget).
                let first = timer.measure(0, 1, || pr.run())?;
                let st = if first.median_ms > 3000.0 {
                    first
                } else {
                    let reps = if first.median_ms > 700.0 { 2 } else { 5 };
                    timer.measure(0, reps, || pr.run())?
                };
                let mut r = row(wl, &format!("{vname} {label}"), "kernel", st, work as f64, check.clone(), Some(paper_note.into()),
                    String::new());
                // Latency-bound kernels (Nsight Compute): the fraction of the counted issue limit.
                let (ipc, exact_count) = instr_per_contribution(mode, model, &tuning);
                crate::bench::set_issue_ceiling(&mut r, ipc, if exact_count { "SASS instr/contribution" } else {
                    "SASS instr/contribution, lower bound" }, crate::bench::peak_issue(ceilings, gpu.info().peak_fp32()));
                let issue = format!("{}{:.0}% of issue limit ({ipc} SASS/contribution)", if exact_count { "" } else { ">= " },
                    100.0 * r.fraction_of_ceiling.unwrap_or(0.0));
                r.note = format!("{issue}; {} traces, {pairs} trace-column pairs, aperture {} m; {}", plf.traces_used, p.aperture,
                    pr.describe());
                eprintln!("pstm bench: {vname} {label}: {:.3} s ({} runs), {:.3e} contributions/s, {issue}; {}", st.median_ms * 1e-3,
                    st.repeats, work as f64 / (st.median_ms * 1e-3), pr.describe());
                if mode == TraveltimeMode::Static8 && model == TraveltimeModel::Dsr && !tuning.texture
                    && st.median_ms < best.1.as_ref().map_or(f64::INFINITY, |b: &BenchRow| b.stats.median_ms)
                {
                    best = (tuning, Some(r.clone()));
                }
                rows.push(r);
            }
            if let (TraveltimeMode::Static8, TraveltimeModel::Dsr, Some(b)) = (mode, model, &best.1) {
                let mut r = b.clone();
                r.note = format!("gpu-best = {}; {}", r.variant, r.note);
                r.variant = format!("gpu-best {label}");
                rows.push(r);
            }
            drop(prep);
            // End to end (plan, pack, upload, kernels, download, pair count) for the production mode.
            if mode == TraveltimeMode::Static8 || size == BenchSize::Small {
                let mut pb = p.clone();
                pb.gpu = best.0;
                seisgpu_host::runtime::phases::take_marks();
                let t = Instant::now();
                let img = seisgpu_host::pstm::migrate(&traces, &pb, mode, model, std::slice::from_ref(backend))?;
                let s = t.elapsed().as_secs_f64() * 1e3;
                let marks = seisgpu_host::runtime::phases::marks_line(&seisgpu_host::runtime::phases::take_marks());
                rows.push(row(wl, &format!("gpu-best {label}"), "end-to-end",
                    Stats { median_ms: s, min_ms: s, max_ms: s, repeats: 1 }, img.stats.contributions as f64, check.clone(),
                    None, format!("plan + pack + upload + kernels + download + pair count (streamed by batch; {marks})")));
                eprintln!("pstm bench: end-to-end {label}: {:.3} s", s * 1e-3);
            }
        }
    }
    Ok(rows)
}

/// Writes `v` as pretty JSON through an atomic file.
pub fn write_json<T: serde::Serialize>(path: &Path, v: &T) -> anyhow::Result<()> {
    let mut f = seisgpu_host::io::AtomicFile::create(path).with_context(|| format!("creating {}", path.display()))?;
    serde_json::to_writer_pretty(&mut f, v)?;
    f.commit().with_context(|| format!("writing {}", path.display()))
}

// ---- accuracy (paper Table 1) ---------------------------------------------------------------------

/// Upper edges of the paper's relative-error bands after the exact-zero band.
pub const BANDS: [f64; 8] = [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, f64::INFINITY];
pub const BAND_NAMES: [&str; 9] =
    ["0", "0 - 1e-6", "1e-6 - 1e-5", "1e-5 - 1e-4", "1e-4 - 1e-3", "1e-3 - 1e-2", "1e-2 - 0.1", "0.1 - 1", ">= 1"];

/// One column of the accuracy table.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ModeAccuracy {
    pub mode: String,
    /// Image samples per band of |(|I_mode| - |I_exact|) / |I_exact|| (paper section 4.1);
    /// samples where the exact image is 0 and the mode's is not count as >= 1.
    pub bands: [u64; 9],
    /// Samples compared (exact or mode image non-zero).
    pub samples: u64,
    pub rel_l2: f64,
    /// Largest |traveltime error| in samples over the samples live in both (inside aperture and mute).
    pub max_dt_samples: f64,
    pub exact_evals: u64,
    pub seconds: f64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct AccuracyReport {
    pub data: String,
    pub model: String,
    pub traces: usize,
    pub image: String,
    pub exact_evals: u64,
    pub tolerance_s: f32,
    pub tolerance_rule: String,
    pub columns: Vec<ModeAccuracy>,
}

impl std::fmt::Display for AccuracyReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "PSTM traveltime accuracy (paper Table 1): {} traces, {}, {} traveltimes, image {}", self.traces,
            self.data, self.model, self.image)?;
        writeln!(f, "dynamic tolerance {:.3} ms ({})", self.tolerance_s * 1e3, self.tolerance_rule)?;
        write!(f, "{:<34}", "relative error band")?;
        for c in &self.columns {
            write!(f, "{:>14}", c.mode)?;
        }
        writeln!(f)?;
        for (b, name) in BAND_NAMES.iter().enumerate() {
            write!(f, "{name:<34}")?;
            for c in &self.columns {
                write!(f, "{:>14}", c.bands[b])?;
            }
            writeln!(f)?;
        }
        let line = |f: &mut std::fmt::Formatter<'_>, name: &str, v: &dyn Fn(&ModeAccuracy) -> String| -> std::fmt::Result {
            write!(f, "{name:<34}")?;
            for c in &self.columns {
                write!(f, "{:>14}", v(c))?;
            }
            writeln!(f)
        };
        line(f, "samples compared", &|c| c.samples.to_string())?;
        line(f, "relative L2 vs exact", &|c| format!("{:.3e}", c.rel_l2))?;
        line(f, "max traveltime error (samples)", &|c| format!("{:.4}", c.max_dt_samples))?;
        line(f, "exact evaluations", &|c| c.exact_evals.to_string())?;
        line(f, "seconds (migration)", &|c| format!("{:.2}", c.seconds))?;
        write!(f, "(exact mode: {} evaluations)", self.exact_evals)
    }
}

/// What [`accuracy`] migrates.
#[derive(Debug, Clone)]
pub struct AccuracyConfig {
    pub traces: usize,
    pub white_noise: bool,
    pub model: TraveltimeModel,
    /// Dynamic tolerance (s); `None`: the smallest at which dynamic makes no more exact
    /// evaluations than static8 (equal speed, see [`equal_speed_tolerance`]).
    pub tolerance: Option<f32>,
    /// Ricker peak frequency (Hz) of the band-limited data.
    pub ricker_hz: f32,
}

impl Default for AccuracyConfig {
    fn default() -> Self { Self { traces: 1000, white_noise: false, model: TraveltimeModel::Dsr, tolerance: None, ricker_hz: 25.0 } }
}

/// The accuracy workload's image: 12 x 12 columns of 25 m, 500 samples of 4 ms, 600 m aperture,
/// 50% stretch mute, lateral smooth v and eta; traces of 2.4 s with offsets to 2000 m.
pub fn accuracy_setup(cfg: &AccuracyConfig) -> (PstmParams, TraceSet) {
    let mut p = PstmParams {
        nx: 12,
        ny: 12,
        x0: 1000.0,
        y0: 2000.0,
        dx: 25.0,
        dy: 25.0,
        nz: 500,
        tau0: 0.0,
        dtau: 0.004,
        noff: 1,
        offset0: 0.0,
        doffset: 1e6,
        vrms: vec![],
        eta: vec![],
        aperture: 600.0,
        stretch: 0.5,
        dynamic_max_step: 32,
        gpu: GpuTuning::read_only_cache(),
    };
    smooth_model(&mut p, true);
    let h = survey(cfg.traces, &p, 400.0, 2000.0, 21);
    let t = if cfg.white_noise { synth::noise_traces(h, 600, 0.004, 22) } else { band_limited(h, 600, 0.004, cfg.ricker_hz, &p) };
    (p, t)
}

/// Exact evaluations a mode makes over all pairs of a run (the CPU cost that interpolation saves).
pub fn count_evals(traces: &TraceSet, p: &PstmParams, mode: TraveltimeMode, model: TraveltimeModel) -> anyhow::Result<u64> {
    let pl = plan(traces, p, mode)?;
    let n = std::sync::atomic::AtomicU64::new(0);
    let kp = &pl.kp;
    let coefs = seisgpu_host::pstm::shared_coefs(p, kp);
    (0..p.columns()).into_par_iter().for_each(|col| {
        let (x, y) = ((col / p.ny) as f32 * kp.dx, (col % p.ny) as f32 * kp.dy);
        let mut scratch = (Vec::new(), Vec::new());
        let (iv2, eta) = seisgpu_host::pstm::column_coefs(p, &coefs, col, &mut scratch, kp.nz_pad as usize);
        let (mut pos, mut pts, mut e) = (vec![0.0; kp.nz_pad as usize], Vec::new(), 0u64);
        for b in &pl.batches {
            for k in 0..p.noff as u32 {
                cpu::for_each_trace(kp, b, k, x, y, |_, ds2, dr2| {
                    let c = kp.ctx(ds2, dr2);
                    e += match model {
                        TraveltimeModel::Dsr => cpu::positions::<Dsr>(mode, kp, &c, iv2, eta, &mut pos, &mut pts),
                        TraveltimeModel::Vti => cpu::positions::<Vti>(mode, kp, &c, iv2, eta, &mut pos, &mut pts),
                    };
                });
            }
        }
        n.fetch_add(e, std::sync::atomic::Ordering::Relaxed);
    });
    Ok(n.into_inner())
}

/// The smallest dynamic tolerance (s, to 2%) at which dynamic makes no more exact evaluations than
/// static8: "equally fast" by the count of the work interpolation saves.
pub fn equal_speed_tolerance(traces: &TraceSet, p: &PstmParams, model: TraveltimeModel) -> anyhow::Result<f32> {
    let target = count_evals(traces, p, TraveltimeMode::Static8, model)?;
    let (mut lo, mut hi) = (1e-7f64, 4e-2f64);
    for _ in 0..24 {
        let mid = (lo * hi).sqrt();
        if count_evals(traces, p, TraveltimeMode::Dynamic { tolerance: mid as f32 }, model)? <= target {
            hi = mid;
        } else {
            lo = mid;
        }
        if hi / lo < 1.02 {
            break;
        }
    }
    Ok(hi as f32)
}

fn bands(img: &[f32], exact: &[f32]) -> ([u64; 9], u64) {
    let mut b = [0u64; 9];
    let mut n = 0;
    for (&m, &e) in img.iter().zip(exact) {
        if m == 0.0 && e == 0.0 {
            continue;
        }
        n += 1;
        let r = if e == 0.0 { f64::INFINITY } else { ((m.abs() as f64 - e.abs() as f64) / e.abs() as f64).abs() };
        if r == 0.0 {
            b[0] += 1;
        } else {
            b[1 + BANDS.iter().position(|&u| r < u).unwrap_or(7)] += 1;
        }
    }
    (b, n)
}

fn max_dt(p: &PstmParams, traces: &TraceSet, mode: TraveltimeMode, model: TraveltimeModel) -> anyhow::Result<f64> {
    let pl = plan(traces, p, mode)?;
    let nz = p.nz;
    let best = std::sync::Arc::new(std::sync::Mutex::new(0.0f64));
    let g = {
        let best = best.clone();
        move |pos: &[Vec<f32>]| {
            let (pe, pm) = (&pos[0], &pos[1]);
            let mut m = 0.0f64;
            for (a, b) in pe[..nz].iter().zip(&pm[..nz]) {
                if *a != DEAD && *b != DEAD {
                    m = m.max((a - b).abs() as f64);
                }
            }
            let mut bb = best.lock().unwrap();
            *bb = bb.max(m);
        }
    };
    match model {
        TraveltimeModel::Dsr => cpu::for_each_pair_positions::<Dsr, _>(p, &pl, &[TraveltimeMode::Exact, mode], g),
        TraveltimeModel::Vti => cpu::for_each_pair_positions::<Vti, _>(p, &pl, &[TraveltimeMode::Exact, mode], g),
    }
    let v = *best.lock().unwrap();
    Ok(v)
}

/// The accuracy table: the exact, static8 and dynamic images of the same traces (on `backend`),
/// per-sample relative-error bands, relative L2 and the largest traveltime error.
pub fn accuracy(backend: &Backend, cfg: &AccuracyConfig) -> anyhow::Result<AccuracyReport> {
    let (p, traces) = accuracy_setup(cfg);
    let (tol, rule) = match cfg.tolerance {
        Some(t) => (t, "given".to_string()),
        None => (equal_speed_tolerance(&traces, &p, cfg.model)?, "smallest with no more exact evaluations than static8".into()),
    };
    let run = |mode| -> anyhow::Result<(PstmImage, f64)> {
        let t = Instant::now();
        let img = seisgpu_host::pstm::migrate(&traces, &p, mode, cfg.model, std::slice::from_ref(backend))?;
        Ok((img, t.elapsed().as_secs_f64()))
    };
    let (exact, _) = run(TraveltimeMode::Exact)?;
    let exact_evals = count_evals(&traces, &p, TraveltimeMode::Exact, cfg.model)?;
    let mut columns = Vec::new();
    for mode in [TraveltimeMode::Static8, TraveltimeMode::Dynamic { tolerance: tol }] {
        let (img, secs) = run(mode)?;
        let (b, n) = bands(&img.data, &exact.data);
        columns.push(ModeAccuracy {
            mode: mode.name().into(),
            bands: b,
            samples: n,
            rel_l2: rel_l2(&img.data, &exact.data),
            max_dt_samples: max_dt(&p, &traces, mode, cfg.model)?,
            exact_evals: count_evals(&traces, &p, mode, cfg.model)?,
            seconds: secs,
        });
    }
    Ok(AccuracyReport {
        data: if cfg.white_noise { "white noise".into() } else { format!("band-limited (Ricker {} Hz, 4 ms)", cfg.ricker_hz) },
        model: cfg.model.name().into(),
        traces: traces.len(),
        image: format!("{} x {} x {} (4 ms), aperture {} m, stretch mute {}%", p.nx, p.ny, p.nz, p.aperture, p.stretch * 100.0),
        exact_evals,
        tolerance_s: tol,
        tolerance_rule: rule,
        columns,
    })
}

// ---- demo ------------------------------------------------------------------------------------------

/// The demo: four diffractors in band-limited data, migrated with exact and static8 traveltimes;
/// writes the inline section through the first diffractor. Quality: static8's relative L2 against
/// exact, and where the strongest diffractor focuses.
pub fn demo(backend: &Backend, out_dir: &Path, size: DemoSize) -> anyhow::Result<DemoRow> {
    let t = Instant::now();
    // `size` widens the image; the trace count grows with its area.
    let k = size.factor();
    let c = 10 * k; // the diffractor's column index in x and y
    let mut p = PstmParams {
        nx: 20 * k,
        ny: 20 * k,
        x0: 0.0,
        y0: 0.0,
        dx: 25.0,
        dy: 25.0,
        nz: 300,
        tau0: 0.0,
        dtau: 0.004,
        noff: 1,
        offset0: 0.0,
        doffset: 1e6,
        vrms: vec![2000.0; 300],
        eta: vec![],
        aperture: 500.0,
        stretch: 0.5,
        dynamic_max_step: 32,
        gpu: GpuTuning::read_only_cache(),
    };
    p.vrms = vec![2000.0; p.nz];
    let h = survey(3000 * k * k, &p, 300.0, 1200.0, 31);
    let mut traces = TraceSet::zeros(h, 350, 0.004);
    // One diffractor at column (c, c) = (25 c m, 25 c m), 600 m deep: tau = 0.6 s at 2000 m/s (sample 150).
    let xd = 25.0 * c as f64;
    synth::events::diffractor(&mut traces, xd, xd, 600.0, 2000.0, 25.0);
    let exact = seisgpu_host::pstm::migrate(&traces, &p, TraveltimeMode::Exact, TraveltimeModel::Dsr, std::slice::from_ref(backend))?;
    let s8 = seisgpu_host::pstm::migrate(&traces, &p, TraveltimeMode::Static8, TraveltimeModel::Dsr, std::slice::from_ref(backend))?;
    let err = rel_l2(&s8.data, &exact.data);
    let stack = s8.stack();
    let (imax, _) = stack.iter().enumerate().fold((0, 0.0f32), |a, (i, &v)| if v.abs() > a.1 { (i, v.abs()) } else { a });
    let (col, z) = (imax / p.nz, imax % p.nz);
    let (ix, iy) = (col / p.ny, col % p.ny);
    std::fs::create_dir_all(out_dir).with_context(|| format!("creating {}", out_dir.display()))?;
    let section: Vec<f32> = (0..p.ny).flat_map(|j| stack[(c * p.ny + j) * p.nz..(c * p.ny + j + 1) * p.nz].to_vec()).collect();
    let png = out_dir.join("pstm_static8_inline.png");
    let axes = seisgpu_host::plot::Axes::time_s(p.tau0 as f64, p.dtau as f64).traces(p.y0, p.dy, "y (m)");
    seisgpu_host::plot::section_png_with(&png, &section, p.ny, p.nz, &format!("PSTM static8 stack, x = {} m (through the diffractor)", p.x0 + p.dx * c as f64), &axes)?;
    let mut quality = String::new();
    let _ = write!(quality, "static8 vs exact rel L2 {:.2}%; diffractor (ix {c}, iy {c}, z 150) focused at (ix {ix}, iy {iy}, z {z}); {} traces",
        err * 100.0, traces.len());
    Ok(DemoRow {
        algorithm: "pstm".into(),
        backend: backend.name().into(),
        seconds: t.elapsed().as_secs_f64(),
        quality,
        images: if png.exists() { vec![png] } else { vec![] },
    })
}

#[cfg(test)]
mod probe {
    use super::*;

    /// Times the host steps of a paper-size GPU migration (plan, pack, pair count): not a test.
    #[test]
    #[ignore]
    fn pstm_host_steps_paper() {
        let (p, ntr, ns) = table2(BenchSize::Paper);
        let t = Instant::now();
        let traces = fast_noise(survey(ntr, &p, p.aperture as f64, 3000.0, 11), ns, 0.004, 5);
        eprintln!("survey {:.3} s", t.elapsed().as_secs_f64());
        let t = Instant::now();
        p.validate(TraveltimeMode::Static8, TraveltimeModel::Vti).unwrap();
        eprintln!("parameters {:.3} s", t.elapsed().as_secs_f64());
        let t = Instant::now();
        traces.validate("x").unwrap();
        eprintln!("validate {:.3} s", t.elapsed().as_secs_f64());
        let t = Instant::now();
        let pl = plan(&traces, &p, TraveltimeMode::Static8).unwrap();
        eprintln!("plan {:.3} s ({} batches)", t.elapsed().as_secs_f64(), pl.batches.len());
        let t = Instant::now();
        for b in &pl.batches {
            let v = cpu::pack_batch(&traces, b, pl.packed_len());
            std::hint::black_box(&v);
        }
        eprintln!("pack {:.3} s", t.elapsed().as_secs_f64());
        let t = Instant::now();
        {
            let plen = pl.packed_len();
            let rows = (16 << 20) / (plen * 8);
            let mut buf = vec![[0.0f32; 2]; rows * plen];
            for b in &pl.batches {
                for r in b.index.chunks(rows) {
                    cpu::pack_rows(&traces, r, plen, &mut buf[..r.len() * plen]);
                    std::hint::black_box(&buf);
                }
            }
        }
        eprintln!("pack into a reused 16 MB buffer {:.3} s", t.elapsed().as_secs_f64());
        let t = Instant::now();
        let c = count_pairs(&p, &pl);
        eprintln!("count {:.3} s {c:?}", t.elapsed().as_secs_f64());
    }

    /// Times one work item's host steps (of 16) at the scaling workload (90,000 traces).
    #[test]
    #[ignore]
    fn pstm_item_steps_90k() {
        let (p, _, ns) = table2(BenchSize::Paper);
        let traces = fast_noise(survey(90_000, &p, p.aperture as f64, 3000.0, 11), ns, 0.004, 5);
        let items = seisgpu_host::pstm::work_items(traces.len());
        for i in [0usize, 7] {
            let t = Instant::now();
            let chunk = traces.slice(items[i].clone());
            let a = t.elapsed().as_secs_f64();
            let t = Instant::now();
            chunk.validate("x").unwrap();
            let b = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let pl = plan(&chunk, &p, TraveltimeMode::Static8).unwrap();
            let c = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let co = seisgpu_host::pstm::Coefs::new(&p, &pl.kp, 8);
            std::hint::black_box(&co);
            let d = t.elapsed().as_secs_f64();
            let t = Instant::now();
            for bt in &pl.batches {
                std::hint::black_box(cpu::pack_batch(&chunk, bt, pl.packed_len()));
            }
            let e = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let n = count_pairs(&p, &pl);
            let f = t.elapsed().as_secs_f64();
            eprintln!("item {i}: slice {a:.3} validate {b:.3} plan {c:.3} coefs {d:.3} pack {e:.3} count {f:.3} s {n:?}");
        }
    }
}

/// The strong-scaling workload (`seisgpu bench --gpus`, [`crate::scale`]): Table 2's image with a fifth
/// of its traces on the split migration ([`seisgpu_host::pstm::Migration`]); small: the small table.
pub fn scale_workload(size: BenchSize) -> anyhow::Result<ScaleWorkload> {
    let paper = size == BenchSize::Paper;

    // Table 2's image (50 x 1097 x 1504) with a fifth of its 450,000 traces; small: the small table.
    use seisgpu_host::pstm::{self, TraveltimeMode, TraveltimeModel};
    use self::workloads as pb;
    let (mut p, ntr, ns) = pb::table2(size);
    p.gpu = pstm::GpuTuning::fastest(); // what `seisgpu pstm migrate` runs
    let ntr = if paper { ntr / 5 } else { ntr };
    let traces = pb::band_limited(pb::survey(ntr, &p, p.aperture as f64 * 0.5, 3000.0, 5), ns, 0.004, 25.0, &p);
    let (mode, model) = (TraveltimeMode::Static8, TraveltimeModel::Dsr);
    let work = pstm::count_pairs(&p, &pstm::plan(&traces, &p, mode)?).1 as f64;
    Ok(ScaleWorkload::new(format!("scale-pstm-table2-{ntr}"), work, "contributions (pair x image sample)", false, move |d| {
        Ok(seisgpu_host::exec::run(&seisgpu_host::pstm::Migration::of(&traces, &p, mode, model)?, d)?.data)
    }))
}
