//! NLBF benchmark workloads (`nlbf-synthetic-2d`, `nlbf-crossspread-3d`), the agreement check
//! that precedes every timing, and the demo.
//!
//! Per workload, from one run: the CPU reference on all cores, the paper-faithful GPU kernel and
//! the fast GPU version (and its run-length variants), each end to end (host data in, host results
//! out) and kernel-only, with the achieved fraction of the FP32 rate.
//!
//! The CPU reference at paper size would take minutes, so it is timed on a documented subset of
//! parameter traces (every k-th, all time samples) and scaled by the ratio of the work (aperture
//! traces x combinations) of all parameter traces to that of the subset; the row says so.

use std::path::Path;
use std::time::Instant;

use seisgpu_host::nlbf::{cpu, gpu, synth, Estimate, EstimateParams, Setup};
use seisgpu_host::backend::Backend;
use crate::bench::{BenchRow, BenchSize, Ceilings, DemoRow, DemoSize, Selection};
use seisgpu_host::runtime::timing::{measure_cpu, GpuTimer, Stats};
use seisgpu_host::runtime::Gpu;
use seisgpu_host::traces::TraceSet;
use crate::scale::Workload as ScaleWorkload;

/// Largest |S difference| that counts as a near-tie or as agreement (the agreement bound, 1e-5).
pub const TIE_TOL: f32 = 1e-5;

/// How two backends' picks compare on a set of parameter traces.
#[derive(Debug, Clone, Copy, Default)]
pub struct Agreement {
    pub estimations: usize,
    /// Estimations where all three picks are identical.
    pub identical: usize,
    /// Differing estimations whose first differing phase is a near-tie (|dS| < TIE_TOL).
    pub near_ties: usize,
    /// Differing estimations that are not near-ties.
    pub bad: usize,
    /// Largest |S_a - S_b| where all picks agree.
    pub max_s_diff: f32,
    /// Estimations with identical picks but |dS| >= TIE_TOL.
    pub s_mismatch: usize,
}

impl Agreement {
    pub fn identical_fraction(&self) -> f64 { self.identical as f64 / self.estimations.max(1) as f64 }
    /// The agreement rule: >= 99.9 % identical, every difference a near-tie, S within 1e-5.
    pub fn passes(&self) -> bool { self.identical_fraction() >= 0.999 && self.bad == 0 && self.s_mismatch == 0 }
}

impl std::fmt::Display for Agreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{} identical picks ({:.4} %), {} near-ties, {} real differences, max |dS| {:.1e} where picks agree",
            self.identical, self.estimations, 100.0 * self.identical_fraction(), self.near_ties, self.bad, self.max_s_diff)
    }
}

/// Compares picks `a` and `b` (`[i * ns + t]` for `ptraces[i]`), judging differences with the CPU
/// reference's semblance of both competing picks at the first phase where they differ.
pub fn compare(setup: &Setup, data: &[f32], ptraces: &[usize], a: (&[u32], &[f32]), b: (&[u32], &[f32])) -> Agreement {
    let ns = setup.ns;
    let t = &setup.tables;
    let mut g = Agreement { estimations: ptraces.len() * ns, ..Default::default() };
    for (i, &p) in ptraces.iter().enumerate() {
        for t0 in 0..ns {
            let o = i * ns + t0;
            let (ca, cb) = (a.0[o], b.0[o]);
            if ca == cb {
                g.identical += 1;
                let d = (a.1[o] - b.1[o]).abs();
                g.max_s_diff = g.max_s_diff.max(d);
                if !(d < TIE_TOL) {
                    g.s_mismatch += 1;
                }
                continue;
            }
            let ((ad_a, be_a, c_a), (ad_b, be_b, c_b)) = (t.split(ca), t.split(cb));
            let s = |phase, combo, fixed| cpu::phase_semblance(setup, data, p, t0, phase, combo, fixed);
            let tie = if ad_a != ad_b || be_a != be_b {
                let ok_ad = ad_a == ad_b || (s(0, ad_a, (0, 0)) - s(0, ad_b, (0, 0))).abs() < TIE_TOL;
                let ok_be = be_a == be_b || (s(1, be_a, (0, 0)) - s(1, be_b, (0, 0))).abs() < TIE_TOL;
                ok_ad && ok_be
            } else {
                (s(2, c_a, (ad_a, be_a)) - s(2, c_b, (ad_a, be_a))).abs() < TIE_TOL
            };
            if tie { g.near_ties += 1 } else { g.bad += 1 }
        }
    }
    g
}

/// Work of the direct evaluation (eq. 2 per t0): shifted-sample evaluations for the listed
/// parameter traces.
pub fn direct_evaluations(setup: &Setup, ptraces: &[usize]) -> f64 {
    let t = &setup.tables;
    let n = (2 * setup.half + 1) as f64;
    ptraces
        .iter()
        .map(|&p| {
            let ap = &setup.apertures;
            (t.n_ad() * ap.list(0, p).len() + t.n_be() * ap.list(1, p).len() + t.nc * ap.list(2, p).len()) as f64
        })
        .sum::<f64>()
        * n
        * setup.ns as f64
}

/// Evaluations the fast kernels perform: the sliding scans once per computed time (padded to
/// whole blocks), the C scan N per t0.
pub fn fast_evaluations(setup: &Setup, plan: &gpu::FastPlan) -> (f64, f64) {
    let t = &setup.tables;
    let ap = &setup.apertures;
    let computed = (plan.nchunks * 32 * plan.run) as f64;
    let slide: f64 = (t.n_ad() * ap.total(0) + t.n_be() * ap.total(1)) as f64 * computed;
    let cscan = (t.nc * ap.total(2)) as f64 * (2 * setup.half + 1) as f64 * setup.ns as f64;
    (slide, cscan)
}

/// FP32 operations per shifted-sample evaluation: b - a, the interpolating FMA, the stack add and
/// the energy FMA (FMA = 2).
pub const FLOPS_PER_EVAL: f64 = 6.0;

/// Every k-th parameter trace, k chosen so that about `target` direct evaluations remain.
fn subset(setup: &Setup, target: f64) -> Vec<usize> {
    let all: Vec<usize> = (0..setup.np()).collect();
    let total = direct_evaluations(setup, &all);
    let k = ((total / target).ceil() as usize).max(1);
    (0..setup.np()).step_by(k).collect()
}

struct Workload {
    name: &'static str,
    traces: TraceSet,
    params: EstimateParams,
    paper: &'static str,
}

/// The workloads' names, in run order.
pub const NAMES: [&str; 2] = ["nlbf-synthetic-2d", "nlbf-crossspread-3d"];

/// The workloads `sel` names (the others are not even generated).
fn workloads(size: BenchSize, sel: &Selection) -> Vec<Workload> {
    let wanted = |name: &str| sel.wants(name);
    let mut v = Vec::new();
    if wanted("nlbf-synthetic-2d") {
        let (t2, p2) = synth::synthetic_2d(size);
        v.push(Workload { name: "nlbf-synthetic-2d", traces: t2, params: p2,
            paper: "paper (SEAM Arid 2D slice; line length and window unstated): V100 5.86 s, 24 Xeon cores 45.65 s (7.8x)" });
    }
    if wanted("nlbf-crossspread-3d") {
        let (t3, p3) = synth::crossspread_3d(size);
        v.push(Workload { name: "nlbf-crossspread-3d", traces: t3, params: p3,
            paper: "paper (field cross-spread, same shape): V100 147.39 s, 24 Xeon cores 1639.94 s (11.1x)" });
    }
    v
}

#[allow(clippy::too_many_arguments)]
fn row(w: &Workload, variant: &str, scope: &str, stats: Stats, work: f64, ceiling: Option<(String, f64)>, check: &str,
    note: String) -> BenchRow {
    BenchRow {
        workload: w.name.to_string(),
        variant: variant.to_string(),
        scope: scope.to_string(),
        stats,
        work,
        work_unit: "estimations (parameter trace x time sample)".to_string(),
        ceiling: ceiling.as_ref().map(|c| c.0.clone()),
        fraction_of_ceiling: ceiling.map(|c| c.1),
        check: check.to_string(),
        paper: Some(w.paper.to_string()),
        note,
    }
}

/// Progress on stderr (a long paper-size run shows its rows as they come).
fn print_row(r: &BenchRow) {
    let frac = r.fraction_of_ceiling.map(|f| format!(" {:.1} % FP32", 100.0 * f)).unwrap_or_default();
    eprintln!("ROW {} {} {} {:.3} ms{frac} | {} | {}", r.workload, r.variant, r.scope, r.stats.median_ms, r.check, r.note);
}

fn scaled(s: Stats, f: f64) -> Stats {
    Stats { median_ms: s.median_ms * f, min_ms: s.min_ms * f, max_ms: s.max_ms * f, repeats: s.repeats }
}

/// Runs every NLBF workload on the CPU reference and, with a GPU, every GPU variant.
pub fn bench(backend: &Backend, size: BenchSize, ceilings: &Ceilings) -> anyhow::Result<Vec<BenchRow>> {
    bench_selected(backend, size, ceilings, &Selection::default())
}

/// [`bench`] of the workloads `sel` names (see [`NAMES`]).
pub fn bench_selected(backend: &Backend, size: BenchSize, ceilings: &Ceilings, sel: &Selection) -> anyhow::Result<Vec<BenchRow>> {
    let mut rows = Vec::new();
    for w in workloads(size, sel) {
        let t_setup = Instant::now();
        let setup = Setup::new(&w.traces, &w.params)?;
        let setup_ms = t_setup.elapsed().as_secs_f64() * 1e3;
        let data = &w.traces.data;
        let all: Vec<usize> = (0..setup.np()).collect();
        let est = setup.estimations() as f64;
        let total_direct = direct_evaluations(&setup, &all);

        // CPU reference on all cores: a subset of parameter traces at paper size, scaled by work.
        let sub = match size {
            BenchSize::Paper => subset(&setup, 6e10),
            BenchSize::Small => all.clone(),
        };
        let sub_work = direct_evaluations(&setup, &sub);
        let scale = total_direct / sub_work;
        let mut cpu_res = (Vec::new(), Vec::new());
        let cpu_stats = measure_cpu(0, 1, || cpu_res = cpu::estimate_subset(&setup, data, &sub));
        let cpu_note = format!("{} threads; setup {setup_ms:.1} ms; {} of {} parameter traces timed ({:.1} s), \
            scaled x{scale:.2} by direct evaluations ({:.3e} in all)", rayon::current_num_threads(), sub.len(), setup.np(),
            cpu_stats.median_ms / 1e3, total_direct);
        let cpu_ms = cpu_stats.median_ms * scale;
        let r = row(&w, "cpu-reference", "end-to-end", scaled(cpu_stats, scale), est, None, "reference", cpu_note);
        print_row(&r);
        rows.push(r);

        let Backend::Gpu(g) = backend else { continue };
        let peak = if ceilings.fp32 > 0.0 { ceilings.fp32 } else { g.info().peak_fp32() };
        let frac = |evals: f64, ms: f64| Some(("FP32 FMA rate".to_string(), evals * FLOPS_PER_EVAL / (ms * 1e-3) / peak));
        let pick_sub = |c: &[u32], s: &[f32], list: &[usize]| -> (Vec<u32>, Vec<f32>) {
            list.iter().flat_map(|&p| (0..setup.ns).map(move |t| p * setup.ns + t)).map(|o| (c[o], s[o])).unzip()
        };

        // Fast version, every variant of each kernel: the sliding (A, D)/(B, E) kernel (run length
        // L, D/E values per pass G) and the C scan (C values per thread), each checked against the
        // CPU reference on its subset, then timed alone; the best of each makes gpu-best.
        let base = gpu::FastPlan::new(g, &setup, None).map_err(anyhow::Error::msg)?;
        let mut b = base.upload(g, &setup, data)?;
        let timer = GpuTimer::new(g.stream())?;
        let (slide_all, _) = fast_evaluations(&setup, &base);
        let mut best_slide: Option<(f64, (u32, u32))> = None;
        for &(l, sg) in seisgpu_host::kernels::nlbf::slide_variants(setup.half as u32) {
            let plan = match gpu::FastPlan::tuned(g, &setup, gpu::Tuning { slide: Some((l, sg)), cscan_group: None,
                cscan: Some(gpu::CSCAN_DEFAULT) }) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("{}: sliding variant L={l} G={sg} skipped: {e}", w.name);
                    continue;
                }
            };
            plan.launch(g, &setup, &mut b)?;
            let (fc, fs) = (g.download(&b.code)?, g.download(&b.sem)?);
            let (sc, ss) = pick_sub(&fc, &fs, &sub);
            let vs_cpu = compare(&setup, data, &sub, (&sc, &ss), (&cpu_res.0, &cpu_res.1));
            if !vs_cpu.passes() {
                eprintln!("REJECTED {}: gpu-fast slide L={l} G={sg} disagrees with the CPU reference: {vs_cpu}", w.name);
                continue;
            }
            let st = timer.measure(1, 5, || plan.launch_slide(g, &setup, &mut b).map_err(to_gpu))?;
            let (ev, _) = fast_evaluations(&setup, &plan);
            let r = row(&w, &format!("gpu-fast-slide-L{l}-G{sg}"), "kernel", st, est, frac(ev, st.median_ms),
                &format!("vs CPU ({} parameter traces): {vs_cpu}", sub.len()),
                format!("(A, D) + (B, E) scans only: {} ({:.3e} evaluations, {} blocks x {} threads, {} B shared)",
                    plan.slide_kernel, ev, plan.slide_cfg.grid_dim.0 * 2, plan.slide_cfg.block_dim.0, plan.slide_cfg.shared_mem_bytes));
            print_row(&r);
            rows.push(r);
            if best_slide.is_none_or(|(ms, _)| st.median_ms < ms) {
                best_slide = Some((st.median_ms, (l, sg)));
            }
        }
        let (_, slide_best) = best_slide.ok_or_else(|| anyhow::anyhow!("{}: no sliding variant ran", w.name))?;
        let mut best_cscan: Option<(f64, (u32, gpu::CscanVariant))> = None;
        // Every group with the default variant; G3 also with the other variants (staging, register
        // cap: a tuning, same results).
        let cscan_tries = seisgpu_host::kernels::nlbf::CSCAN_GROUPS.iter().flat_map(|&cg| {
            gpu::CSCAN_VARIANTS.iter().copied().filter(move |v| *v == gpu::CSCAN_DEFAULT || cg == 3).map(move |v| (cg, v))
        }).collect::<Vec<_>>();
        for (cg, cv) in cscan_tries {
            let plan = match gpu::FastPlan::tuned(g, &setup, gpu::Tuning { slide: Some(slide_best), cscan_group: Some(cg), cscan: Some(cv) }) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("{}: C-scan group {cg} variant {cv} skipped: {e}", w.name);
                    continue;
                }
            };
            let vname = if cv == gpu::CSCAN_DEFAULT { format!("gpu-fast-cscan-G{cg}") } else { format!("gpu-fast-cscan-G{cg}-{cv}") };
            plan.launch(g, &setup, &mut b)?;
            let (fc, fs) = (g.download(&b.code)?, g.download(&b.sem)?);
            let (sc, ss) = pick_sub(&fc, &fs, &sub);
            let vs_cpu = compare(&setup, data, &sub, (&sc, &ss), (&cpu_res.0, &cpu_res.1));
            if !vs_cpu.passes() {
                eprintln!("REJECTED {}: gpu-fast C scan G={cg} {cv} disagrees with the CPU reference: {vs_cpu}", w.name);
                continue;
            }
            let ct = timer.measure(1, 5, || plan.launch_cscan(g, &setup, &mut b).map_err(to_gpu))?;
            let (_, ev) = fast_evaluations(&setup, &plan);
            let (regs, local) = plan.cscan_resources(g)?;
            let r = row(&w, &vname, "kernel", ct, est, frac(ev, ct.median_ms),
                &format!("vs CPU ({} parameter traces): {vs_cpu}", sub.len()),
                format!("C scan only: {} variant {cv} ({:.3e} evaluations, {} blocks x {} threads, {} B shared, {regs} registers, \
                    {local} B local)", plan.cscan_kernel, ev, plan.cscan_cfg.grid_dim.0, plan.cscan_cfg.block_dim.0,
                    plan.cscan_cfg.shared_mem_bytes));
            print_row(&r);
            rows.push(r);
            if best_cscan.is_none_or(|(ms, _)| ct.median_ms < ms) {
                best_cscan = Some((ct.median_ms, (cg, cv)));
            }
        }
        let (_, (cg, cv)) = best_cscan.ok_or_else(|| anyhow::anyhow!("{}: no C-scan variant ran", w.name))?;
        let tuning = gpu::Tuning { slide: Some(slide_best), cscan_group: Some(cg), cscan: Some(cv) };
        let plan = gpu::FastPlan::tuned(g, &setup, tuning).map_err(anyhow::Error::msg)?;
        plan.launch(g, &setup, &mut b)?;
        let fast_all = (g.download(&b.code)?, g.download(&b.sem)?);
        let (sc, ss) = pick_sub(&fast_all.0, &fast_all.1, &sub);
        let vs_cpu = compare(&setup, data, &sub, (&sc, &ss), (&cpu_res.0, &cpu_res.1));
        anyhow::ensure!(vs_cpu.passes(), "{}: gpu-best disagrees with the CPU reference: {vs_cpu}", w.name);
        let k_stats = timer.measure(1, 7, || plan.launch(g, &setup, &mut b).map_err(to_gpu))?;
        let best_kernel_ms = k_stats.median_ms;
        let (slide_ev, cscan_ev) = fast_evaluations(&setup, &plan);
        let _ = slide_all;
        drop(b);
        let l = plan.run;
        let cscan_label = format!("{} [{}]", plan.cscan_kernel, plan.cscan_variant);

        // End to end with the best variants: a warm engine (buffers allocated once, as for a stream
        // of gathers); setup (geometry, apertures) and the finiteness check included in every
        // repeat. First the serial path (stage all, set up, both kernels, download), then the
        // pipelined one (bands over three streams), which is gpu-best.
        let mut engine = gpu::FastEngine::with_tuning(g, &setup, data, tuning)?;
        let mut serial_times = Vec::new();
        let mut serial_parts = Vec::new();
        for i in 0..6 {
            let t0 = Instant::now();
            let e = engine.estimate_serial(g, &w.traces, &w.params)?;
            if i > 0 {
                serial_times.push(t0.elapsed().as_secs_f64() * 1e3);
                let (up, ker, down) = engine.last_breakdown_ms()?;
                serial_parts.push([up, ker, down]);
            }
            anyhow::ensure!((&e.code, &e.semblance) == (&fast_all.0, &fast_all.1),
                "{}: the serial engine's result differs from the plan's", w.name);
        }
        let mut out = (Vec::new(), Vec::new());
        let mut times = Vec::new();
        let mut parts: Vec<gpu::PipelineTimes> = Vec::new();
        for i in 0..8 {
            let t0 = Instant::now();
            let e = engine.estimate(g, &w.traces, &w.params)?;
            if i > 0 {
                times.push(t0.elapsed().as_secs_f64() * 1e3);
                parts.push(engine.last_pipeline_times()?);
            }
            out = (e.code, e.semblance);
        }
        let t0 = Instant::now();
        Setup::new(&w.traces, &w.params)?;
        let setup_alone = t0.elapsed().as_secs_f64() * 1e3;
        let med = |v: Vec<f64>| seisgpu_host::runtime::timing::median(&v);
        let e2e_serial = Stats::from_samples(&serial_times);
        let spart = |q: usize| med(serial_parts.iter().map(|p| p[q]).collect());
        let serial_breakdown = format!("median parts (GPU events): upload + host staging and setup {:.1} ms, kernels \
            {:.1} ms, download {:.1} ms", spart(0), spart(1), spart(2));
        let e2e = Stats::from_samples(&times);
        let pm = |f: fn(&gpu::PipelineTimes) -> f64| med(parts.iter().map(f).collect());
        let median_parts = gpu::PipelineTimes { setup_ms: pm(|p| p.setup_ms), fill_ms: pm(|p| p.fill_ms),
            stage_ms: pm(|p| p.stage_ms),
            tail_ms: pm(|p| p.tail_ms), wall_ms: pm(|p| p.wall_ms), upload_ms: pm(|p| p.upload_ms),
            lead_ms: pm(|p| p.lead_ms), kernels_ms: pm(|p| p.kernels_ms), download_ms: pm(|p| p.download_ms),
            bands: parts.first().map_or(0, |p| p.bands) };
        let breakdown = format!("median parts: {median_parts}; Setup::new alone {setup_alone:.1} ms");
        anyhow::ensure!(out == fast_all, "{}: the pipelined engine's result differs from the plan's", w.name);
        let r = row(&w, "gpu-serial", "end-to-end", e2e_serial, est, frac(slide_ev + cscan_ev, e2e_serial.median_ms),
            "identical to gpu-fast (checked above)",
            format!("{} + {}, warm engine, no overlap: stage + setup + upload ({:.0} MB), kernels, download of packed \
                picks; {serial_breakdown}", plan.slide_kernel, cscan_label, data.len() as f64 * 4e-6));
        print_row(&r);
        rows.push(r);
        let r = row(&w, "gpu-best", "end-to-end", e2e, est, frac(slide_ev + cscan_ev, e2e.median_ms),
            "identical to gpu-fast (checked above)",
            format!("{} + {}, warm engine, pipelined: setup first pass + band 0 lists, then other bands' lists on a host thread || chunked upload ({:.0} MB) || bands of \
                parameter traces (sliding scans on one stream, C scans + downloads on a higher-priority one); {:.1}x the \
                CPU reference; {breakdown}", plan.slide_kernel, cscan_label, data.len() as f64 * 4e-6,
                cpu_ms / e2e.median_ms));
        print_row(&r);
        rows.push(r);
        // Where the end-to-end time goes: the part not hidden behind the kernels (wall minus the GPU
        // span from the first sliding scan's start to the last C scan's end), with every part.
        let overhead: Vec<f64> = parts.iter().map(|p| p.wall_ms - p.kernels_ms).collect();
        let r = row(&w, "gpu-best-overhead", "e2e-part", Stats::from_samples(&overhead), est, None,
            "timing breakdown of gpu-best end-to-end",
            format!("median = wall - kernel span (not hidden by the pipeline); {breakdown}; kernels alone (one stream, \
                no overlap) {:.1} ms", k_stats.median_ms));
        print_row(&r);
        rows.push(r);

        // Paper-faithful: one launch per parameter trace, linear in the parameter traces; at paper
        // size a calibrated subset (about 15 s) is timed and scaled by work.
        let (pc, ps) = gpu::estimate_paper_subset(g, &setup, data, &sub)?;
        let agree = compare(&setup, data, &sub, (&pc, &ps), (&cpu_res.0, &cpu_res.1));
        anyhow::ensure!(agree.passes(), "{}: gpu-paper disagrees with the CPU reference: {agree}", w.name);
        let psub: Vec<usize> = match size {
            BenchSize::Paper => {
                let cal: Vec<usize> = (0..setup.np()).step_by((setup.np() / 16).max(1)).collect();
                let t0 = Instant::now();
                gpu::estimate_paper_subset(g, &setup, data, &cal)?;
                let per = t0.elapsed().as_secs_f64() / cal.len() as f64;
                let k = ((per * setup.np() as f64 / 15.0).ceil() as usize).max(1);
                (0..setup.np()).step_by(k).collect()
            }
            BenchSize::Small => all.clone(),
        };
        let pscale = total_direct / direct_evaluations(&setup, &psub);
        let t0 = Instant::now();
        let (paper_code, paper_s) = gpu::estimate_paper_subset(g, &setup, data, &psub)?;
        let paper_ms = t0.elapsed().as_secs_f64() * 1e3 * pscale;
        let (fc, fs) = pick_sub(&fast_all.0, &fast_all.1, &psub);
        let vs_fast = compare(&setup, data, &psub, (&fc, &fs), (&paper_code, &paper_s));
        anyhow::ensure!(vs_fast.passes(), "{}: gpu-fast disagrees with gpu-paper: {vs_fast}", w.name);
        let check = format!("vs CPU ({} parameter traces): {agree}; gpu-fast vs gpu-paper ({}): {vs_fast}", sub.len(), psub.len());
        let which = format!("{} of {} parameter traces timed, scaled x{pscale:.2} by work", psub.len(), setup.np());
        let r = row(&w, "gpu-paper", "end-to-end", Stats::from_samples(&[paper_ms]), est, frac(total_direct, paper_ms), &check,
            format!("Tables 2-4: {} streams, host collection, one launch per parameter trace (block {}); 1 run; {which}",
                g.streams().len(), gpu::paper_block(g, &setup)?));
        print_row(&r);
        rows.push(r);
        let paper_kernel_ms = paper_kernel_only(g, &setup, data, &psub)? * pscale;
        let r = row(&w, "gpu-paper", "kernel", Stats::from_samples(&[paper_kernel_ms]), est, frac(total_direct, paper_kernel_ms),
            &check, format!("apertures pre-collected on the device, launches on one stream; 1 run; {which}"));
        print_row(&r);
        rows.push(r);
        let r = row(&w, "gpu-best", "kernel", k_stats, est,
            frac(slide_ev + cscan_ev, best_kernel_ms), &check,
            format!("{} + {} (L={l}): {:.1}x the paper kernel, {:.1}x the CPU reference; end to end {:.1}x gpu-paper \
                end to end", plan.slide_kernel, cscan_label, paper_kernel_ms / best_kernel_ms, cpu_ms / best_kernel_ms,
                paper_ms / e2e.median_ms));
        print_row(&r);
        rows.push(r);
    }
    Ok(rows)
}

fn to_gpu(e: seisgpu_host::nlbf::NlbfError) -> seisgpu_host::runtime::GpuError {
    match e {
        seisgpu_host::nlbf::NlbfError::Gpu(g) => g,
        seisgpu_host::nlbf::NlbfError::Invalid(m) | seisgpu_host::nlbf::NlbfError::Input(m)
        | seisgpu_host::nlbf::NlbfError::Parameter { reason: m, .. } => seisgpu_host::runtime::GpuError::BadLaunch { kernel: "nlbf".into(), why: m },
    }
}

/// Kernel-only time of the paper-faithful kernel on the listed parameter traces: their collected
/// apertures uploaded once, then all launches on one stream between two events (ms).
pub fn paper_kernel_only(g: &Gpu, setup: &Setup, data: &[f32], ptraces: &[usize]) -> anyhow::Result<f64> {
    use seisgpu_host::launch;
    use seisgpu_host::runtime::LaunchConfig;
    let ns = setup.ns;
    let ap = &setup.apertures;
    let np = ptraces.len();
    let mut offs = Vec::with_capacity(np + 1);
    let mut total = 0usize;
    for &p in ptraces {
        offs.push(total);
        total += ap.list(0, p).len() + ap.list(1, p).len() + ap.list(2, p).len();
    }
    g.ensure_fits("pre-collected apertures", total * (ns + 2) * 4)?;
    let mut rows = vec![0f32; total * ns];
    let mut geom = vec![0f32; 2 * total];
    let mut r = 0;
    for &p in ptraces {
        for ph in 0..3 {
            for &tr in ap.list(ph, p) {
                rows[r * ns..(r + 1) * ns].copy_from_slice(&data[tr as usize * ns..(tr as usize + 1) * ns]);
                let (dx, dy) = setup.offset(p, tr);
                geom[2 * r] = dx;
                geom[2 * r + 1] = dy;
                r += 1;
            }
        }
    }
    let d_rows = g.upload(&rows)?;
    drop(rows);
    let d_geom = g.upload(&geom)?;
    let t = &setup.tables;
    let vals = g.upload(&t.vals)?;
    let code = g.zeros::<u32>(np * ns)?;
    let sem = g.zeros::<f32>(np * ns)?;
    g.synchronize()?;
    let st = g.stream();
    let (rp, gp, vp) = (gpu::dptr(&d_rows, st), gpu::dptr(&d_geom, st), gpu::dptr(&vals, st));
    let (cp, sp) = (gpu::dptr(&code, st), gpu::dptr(&sem, st));
    let bd = gpu::paper_block(g, setup)?;
    let cfg = LaunchConfig { grid_dim: (ns as u32, 1, 1), block_dim: (bd, 1, 1), shared_mem_bytes: gpu::paper_shared(bd) };
    let (ns32, h32, inv_dt) = (ns as u32, setup.half as u32, setup.inv_dt);
    let (na, nb, nc, nd, ne) = (t.na as u32, t.nb as u32, t.nc as u32, t.nd as u32, t.ne as u32);
    let timer = GpuTimer::new(st)?;
    let stats = timer.measure(0, 1, || {
        for (i, &p) in ptraces.iter().enumerate() {
            let m = [ap.list(0, p).len() as u32, ap.list(1, p).len() as u32, ap.list(2, p).len() as u32];
            // Rows of ns samples, and (dx, dy) per row.
            let (rows_p, geom_p) = (rp.offset(offs[i] * ns), gp.offset(offs[i] * 2));
            let pi = i as u32;
            launch!(g, seisgpu_host::kernels::nlbf::kernels::NLBF_PAPER, cfg, &ns32, &h32, &inv_dt, &rows_p, &geom_p, &m[0], &m[1], &m[2], &vp, &na, &nb, &nc,
                &nd, &ne, &pi, &cp, &sp)?;
        }
        Ok(())
    })?;
    Ok(stats.median_ms)
}

/// The demo: a small 2D gather with known clean events plus noise; estimate on `backend`,
/// enhance, and report the signal-to-noise gain in dB against the clean signal.
pub fn demo(backend: &Backend, out_dir: &Path, size: DemoSize) -> anyhow::Result<DemoRow> {
    let t0 = Instant::now();
    let (clean, noisy, params) = demo_gather_sized(size.factor());
    let est: Estimate = seisgpu_host::nlbf::estimate(&noisy, &params, std::slice::from_ref(backend))?;
    let ep = seisgpu_host::nlbf::EnhanceParams { aperture: params.aperture_c };
    let enhanced = seisgpu_host::nlbf::enhance(&noisy, &params.coords, &est, &ep, std::slice::from_ref(backend))?;
    let seconds = t0.elapsed().as_secs_f64();
    let before = seisgpu_host::synth::snr_db(&clean.data, &noisy.data);
    let after = seisgpu_host::synth::snr_db(&clean.data, &enhanced.data);
    std::fs::create_dir_all(out_dir)?;
    let mut images = Vec::new();
    // One receiver line's worth of traces (the first shot) of each panel.
    let n = ((noisy.len() as f64).sqrt() as usize).min(noisy.len());
    for (name, t) in [("nlbf-input.png", &noisy), ("nlbf-enhanced.png", &enhanced), ("nlbf-clean.png", &clean)] {
        let path = out_dir.join(name);
        let axes = seisgpu_host::plot::Axes { trace_values: Some(t.headers[..n].iter().map(|h| h.offset).collect()), trace_label: "offset (m)".into(),
            ..seisgpu_host::plot::Axes::time_s(0.0, t.dt as f64) };
        let what = name.trim_start_matches("nlbf-").trim_end_matches(".png");
        seisgpu_host::plot::section_png_with(&path, &t.data[..n * t.ns], n, t.ns, &format!("NLBF {what}: first shot gather"), &axes)?;
        if path.exists() {
            images.push(path);
        }
    }
    let s = est.volume(seisgpu_host::nlbf::Param::S);
    let sname = out_dir.join("nlbf-semblance.png");
    let axes = seisgpu_host::plot::Axes::time_s(0.0, noisy.dt as f64).traces(0.0, 1.0, "parameter trace");
    seisgpu_host::plot::section_png_with(&sname, &s, est.grid.len(), est.ns, "NLBF semblance S of the best (A..E) per parameter trace", &axes)?;
    if sname.exists() {
        images.push(sname);
    }
    Ok(DemoRow {
        algorithm: "nlbf".into(),
        backend: backend.name().into(),
        seconds,
        quality: format!("SNR {before:.1} dB -> {after:.1} dB ({:+.1} dB) after 2+2+1 + enhancement ({} traces)", after - before, noisy.len()),
        images,
    })
}

/// The demo gather: 41 x 41 traces on a 25 m line, 0.6 s at 4 ms, four events of known operators
/// plus Gaussian noise; returns (clean, noisy, parameters).
pub fn demo_gather() -> (TraceSet, TraceSet, EstimateParams) {
    demo_gather_sized(1)
}

/// The demo gather with `k` times the line length in sources and receivers ((40 k + 1)^2 traces),
/// the events centred on the longer line.
pub fn demo_gather_sized(k: usize) -> (TraceSet, TraceSet, EstimateParams) {
    let (n, ns) = (40 * k.max(1) + 1, 150usize);
    let h = seisgpu_host::synth::geometry::line_2d(n, 25.0, n, 25.0);
    let mut clean = TraceSet::zeros(h, ns, 0.004);
    let x: Vec<f32> = clean.headers.iter().map(|h| h.gx as f32).collect();
    let y: Vec<f32> = clean.headers.iter().map(|h| h.sx as f32).collect();
    let c = 12.5 * (n - 1) as f32;
    let evs = [(0.12, 3e-5, -2e-5, 0.0, 2e-8, -2e-8), (0.25, -5e-5, 2e-5, 1e-8, 0.0, 3e-8), (0.38, 1e-5, 4e-5, 0.0, -2e-8, 0.0),
        (0.5, -2e-5, -1e-5, -1e-8, 1e-8, 1e-8)];
    let events: Vec<synth::Event> = evs
        .iter()
        .map(|&(t0, a, b, cc, d, e)| synth::Event { t0, centre: (c, c), op: [a, b, cc, d, e], amp: 1.0 })
        .collect();
    synth::add_events(&mut clean, &x, &y, &events, 20.0);
    let mut noisy = clean.clone();
    synth::add_noise_par(&mut noisy, 0.7, 77);
    let mut p = synth::params_synthetic_2d();
    p.spacing_x = 100.0;
    p.spacing_y = 100.0;
    (clean, noisy, p)
}

/// The strong-scaling workload (`seisgpu bench --gpus`, [`crate::scale`]): the paper's field
/// cross-spread shape on the search split by parameter traces.
pub fn scale_workload(size: BenchSize) -> anyhow::Result<ScaleWorkload> {

    // The paper's field cross-spread shape (94 x 224 traces, 1500 samples).
    use crate::scale::{cached, PerCount};
    use seisgpu_host::nlbf::{self, NlbfDevice, Setup, Variant};
    use rayon::prelude::*;
    let (traces, params) = nlbf::synth::crossspread_3d(size);
    let setup = Setup::new(&traces, &params)?;
    let work = setup.estimations() as f64;
    // Per device count, once: the devices (on a GPU the gather, coordinates and search
    // tables go up with its first item, in the untimed check run, and stay resident) and
    // the variant (the fast kernels' plan check). A processing job does these once for
    // many parameter sets; the timed run is the search itself: parameter traces and
    // apertures up, kernels, picks and semblance down.
    let cache: PerCount<(Variant, Vec<NlbfDevice>)> = Default::default();
    Ok(ScaleWorkload::new("scale-nlbf-crossspread-3d", work, "estimations (parameter trace x time sample)", true, move |d| {
            let state = cached(&cache, d.len(), || {
                let variant = d.iter().find(|b| b.gpu().is_some()).map_or(Variant::Cpu, |b| nlbf::variant_for(b, &setup));
                Ok((variant, d.iter().map(NlbfDevice::new).collect()))
            })?;
            let (variant, devs) = &*state;
            // The job's output: picks (as their bit patterns) then semblance, in one vector
            // that the devices write in place (the check covers both). Its pages are
            // written on all cores first, as any job's output would be.
            let n = setup.estimations();
            let mut out = Vec::new();
            rayon::iter::repeat_n(0f32, 2 * n).collect_into_vec(&mut out);
            let (code, sem) = out.split_at_mut(n);
            // SAFETY: u32 and f32 have the same size and alignment, and every bit pattern
            // is valid for both; `code` is borrowed only for the call.
            let code: &mut [u32] = unsafe { std::slice::from_raw_parts_mut(code.as_mut_ptr().cast::<u32>(), n) };
            nlbf::estimate_setup_split_into(devs, &setup, &traces.data, *variant, code, sem)?;
            Ok(out)
        }).target(3.5))
}
