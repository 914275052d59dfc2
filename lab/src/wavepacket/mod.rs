//! Wave-packet benchmark workloads, planned to fit `seisgpu bench all --size paper` into ten
//! minutes on an H100: the wave-packet share is about 150 s.
//!
//! Paper size ([`plan`]):
//! - forward and inverse of N^3 cubes, N = 128, 256, 512: every GPU variant (the exact lattice FFT,
//!   the separable USFFT, the paper's 3D stencil) at epsilon 1e-4, the separable USFFT at 1e-6 (the
//!   lattice does not depend on epsilon; the stencil at 1e-6 costs 1728 terms per box point and
//!   says nothing the separable one does not);
//! - the CPU reference (separable USFFT, all cores) at 128^3 and 256^3 only (512^3 would be about
//!   20 s per forward on 16 cores), once on one thread and the paper's stencil on the CPU at 128^3;
//! - a 1024 x 512 x 512 volume through the fragment path (cubes of 256), on the GPU only.
//!
//! Every GPU variant is checked before it is timed: against the CPU reference where the CPU runs,
//! against the GPU lattice variant (exact) at 512^3; inverse(forward) is checked everywhere.
//! Kernel-only times are CUDA events on device-resident data; end-to-end times are the wall clock
//! from page-locked host buffers (and from pageable memory up to 256^3); per-stage times come from
//! events between the steps (global FFT, gathers, box FFTs, the inverse's gather over boxes,
//! correction). Workloads are named `wavepacket-forward-eps1e-4@256`, so the report's scaling chart
//! draws one line per (direction, epsilon, variant) over N.
//!
//! [`estimate`] gives each workload's expected time on the H100 machine from the measured numbers
//! of docs/notes/wavepacket.md (printed before the run; [`dry_run`] prints it without running), and
//! a time guard stops adding repeats once the run is past [`TIME_GUARD_S`] (rows say so).

use std::cell::Cell;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use num_complex::Complex32;
use rayon::prelude::*;

use seisgpu_host::wavepacket::apps;
use seisgpu_host::wavepacket::cpu::CpuEngine;
use seisgpu_host::wavepacket::fragments::Fragmented;
use seisgpu_host::wavepacket::gpu::GpuEngine;
use seisgpu_host::wavepacket::{Finest, Frame, FrameParams, Gather, Params};
use seisgpu_host::backend::Backend;
use crate::bench::{BenchRow, BenchSize, Ceilings, DemoRow, DemoSize};
use seisgpu_host::runtime::{GpuTimer, Stats};

mod estimate;
pub mod scaling;
pub use estimate::{dry_run, estimate, Estimate};

/// Seconds into the wave-packet benchmark after which no more repeats are added (each measurement
/// still runs once). The whole paper-size run is planned at about 100 s on the H100 machine.
pub const TIME_GUARD_S: f64 = 120.0;

// ---- the plan -----------------------------------------------------------------------------------

/// One N^3 cube at one epsilon.
#[derive(Clone, Debug)]
pub struct CubeWork {
    pub n: usize,
    pub eps: f64,
    /// Timed repeats of the CPU reference after its reference run (which is the warm-up and gives
    /// the coefficients the GPU is checked against); `None`: the CPU reference does not run.
    pub cpu_repeats: Option<usize>,
    /// Also the CPU reference on one thread and the paper's stencil on the CPU (one run each).
    pub cpu_extras: bool,
    /// GPU variants, in order (the lattice first: it is the exact check where the CPU does not run).
    pub gpu: Vec<Gather>,
}

/// The fragment path on a volume of any shape.
#[derive(Clone, Debug)]
pub struct FragmentWork {
    pub shape: [usize; 3],
    pub cube: usize,
    pub overlap: usize,
    /// Timed passes after the check pass.
    pub repeats: usize,
    /// Whether the CPU runs it (small size only: at paper size it would take many minutes).
    pub on_cpu: bool,
}

#[derive(Clone, Debug)]
pub struct Plan {
    pub size: BenchSize,
    pub cubes: Vec<CubeWork>,
    pub fragments: FragmentWork,
}

const ALL_GPU: [Gather; 3] = [Gather::Lattice, Gather::Separable, Gather::Stencil];

/// The workloads of `size` (see the module documentation).
pub fn plan(size: BenchSize) -> Plan {
    let cube = |n, eps, cpu_repeats, cpu_extras, gpu: &[Gather]| CubeWork { n, eps, cpu_repeats, cpu_extras, gpu: gpu.to_vec() };
    let sep = [Gather::Separable];
    match size {
        BenchSize::Small => Plan {
            size,
            cubes: vec![
                cube(32, 1e-4, Some(3), true, &ALL_GPU),
                cube(32, 1e-6, Some(3), false, &sep),
                cube(48, 1e-4, Some(3), false, &ALL_GPU),
                cube(48, 1e-6, Some(3), false, &sep),
            ],
            fragments: FragmentWork { shape: [96, 64, 80], cube: 32, overlap: 4, repeats: 3, on_cpu: true },
        },
        BenchSize::Paper => Plan {
            size,
            cubes: vec![
                cube(128, 1e-4, Some(3), true, &ALL_GPU),
                cube(128, 1e-6, Some(3), false, &sep),
                cube(256, 1e-4, Some(3), false, &ALL_GPU),
                // One timed repeat after the reference run: 1e-6 is the second accuracy, and each
                // forward + inverse costs about 4.5 s on 16 cores.
                cube(256, 1e-6, Some(1), false, &sep),
                cube(512, 1e-4, None, false, &ALL_GPU),
                cube(512, 1e-6, None, false, &sep),
            ],
            fragments: FragmentWork { shape: [1024, 512, 512], cube: 256, overlap: 32, repeats: 3, on_cpu: false },
        },
    }
}

/// Workload name: the scaling chart groups the rows of one stem (before '@') over N.
pub fn workload(direction: &str, n: usize, eps: f64) -> String { format!("wavepacket-{direction}-eps{eps:e}@{n}") }

fn fragment_workload(f: &FragmentWork) -> String {
    format!("wavepacket-fragments-eps1e-4@{}x{}x{}", f.shape[0], f.shape[1], f.shape[2])
}

fn variant_name(g: Gather) -> &'static str {
    match g {
        Gather::Lattice => "gpu-lattice",
        Gather::Separable => "gpu-separable",
        Gather::Stencil => "gpu-paper",
    }
}

fn params(eps: f64, gather: Gather) -> Params { Params { eps, gather, frame: FrameParams::default() } }

/// GPU repeats: (kernel warm-up, kernel repeats, end-to-end repeats after one warm-up).
fn gpu_repeats(n: usize) -> (usize, usize, usize) { if n >= 512 { (1, 3, 3) } else { (2, 7, 5) } }

/// Pageable end-to-end runs (warm-up + repeats) for cubes up to 256^3.
const PAGEABLE: (usize, usize) = (1, 2);
/// Per-stage profiles (medians of this many).
const PROFILES: usize = 3;

// ---- measuring ----------------------------------------------------------------------------------

/// Relative L2 difference of complex vectors, in f64, without copies.
fn rel_l2_c(a: &[Complex32], b: &[Complex32]) -> f64 {
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

/// [`crate::bench::rel_l2`] over all cores (512^3 and the fragment volume are 10^8 samples).
fn rel_l2_par(a: &[f32], b: &[f32]) -> f64 {
    let (num, den) = a.par_chunks(1 << 16).zip(b.par_chunks(1 << 16)).map(|(x, y)| {
        x.iter().zip(y).fold((0.0f64, 0.0f64), |(n, d), (&p, &q)| (n + (p as f64 - q as f64).powi(2), d + (q as f64).powi(2)))
    }).reduce(|| (0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1));
    if den == 0.0 { num.sqrt() } else { (num / den).sqrt() }
}

/// Gaussian noise of standard deviation `sigma` added over all cores (fixed seeds per chunk).
fn add_noise_par(v: &mut [f32], sigma: f32, seed: u64) {
    v.par_chunks_mut(1 << 20).enumerate().for_each(|(i, c)| seisgpu_host::synth::add_noise(c, sigma, seed.wrapping_mul(1_000_003) + i as u64));
}

/// A realistic test cube: dipping and curved events plus noise at a tenth of their RMS.
fn test_cube(n: usize) -> Vec<f32> {
    let mut v = apps::synthetic_cube([n, n, n], 0.004, 25.0);
    let s = (v.par_iter().map(|&x| (x as f64).powi(2)).sum::<f64>() / v.len() as f64).sqrt() as f32 * 0.1;
    add_noise_par(&mut v, s, 99);
    v
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

/// The paper's figures (Tesla C2050 against sequential CPU code), on the rows they compare with.
fn paper_figure(direction: &str) -> Option<String> {
    match direction {
        "forward" => Some("45x over sequential CPU (Tesla C2050)".into()),
        "inverse" => Some("35x over sequential CPU (Tesla C2050)".into()),
        _ => None,
    }
}

/// Wall-clock milliseconds of one run.
fn wall_ms<F: FnOnce() -> Result<()>>(f: F) -> Result<f64> {
    let t = Instant::now();
    f()?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// The benchmark's clock: repeats stop once it is past the guard.
struct Clock {
    t0: Instant,
    guard_s: f64,
    /// Measurements that got fewer repeats than planned.
    cut: Cell<usize>,
}

/// Statistics of a measurement, and how many repeats were planned.
struct Timed {
    stats: Stats,
    planned: usize,
}

impl Timed {
    /// What the time guard did, for the row's note ("" when nothing).
    fn guard_note(&self, guard_s: f64) -> String {
        if self.stats.repeats < self.planned {
            format!("; time guard ({guard_s:.0} s) passed: {} of {} repeats", self.stats.repeats, self.planned)
        } else {
            String::new()
        }
    }
}

impl Clock {
    fn new(guard_s: f64) -> Self { Self { t0: Instant::now(), guard_s, cut: Cell::new(0) } }
    fn elapsed_s(&self) -> f64 { self.t0.elapsed().as_secs_f64() }
    fn past(&self) -> bool { self.elapsed_s() > self.guard_s }

    /// `warm` untimed runs (at most one once past the guard), then up to `reps` timed runs of
    /// `one` (which returns its milliseconds); only the first once past the guard.
    fn repeat(&self, warm: usize, reps: usize, mut one: impl FnMut() -> Result<f64>) -> Result<Timed> {
        let warm = if self.past() { warm.min(1) } else { warm };
        for _ in 0..warm {
            one()?;
        }
        let planned = reps.max(1);
        let mut t = Vec::with_capacity(planned);
        while t.len() < planned {
            if !t.is_empty() && self.past() {
                self.cut.set(self.cut.get() + 1);
                break;
            }
            t.push(one()?);
        }
        Ok(Timed { stats: Stats::from_samples(&t), planned })
    }
}

/// Rows as they come: printed on stderr at once (a long paper-size run shows its progress),
/// handed to `progress` per workload.
struct Sink<'a> {
    rows: Vec<BenchRow>,
    flushed: usize,
    progress: &'a mut dyn FnMut(&[BenchRow]),
}

impl Sink<'_> {
    fn push(&mut self, r: BenchRow) {
        eprintln!("ROW {} {} {} {:.3} ms | {} | {}", r.workload, r.variant, r.scope, r.stats.median_ms, r.check, r.note);
        self.rows.push(r);
    }
    fn flush(&mut self) {
        if self.flushed < self.rows.len() {
            (self.progress)(&self.rows[self.flushed..]);
            self.flushed = self.rows.len();
        }
    }
    /// A variant that failed its check or its run: a visible row without a time or a throughput.
    fn failed(&mut self, workload: &str, variant: &str, what: String) {
        eprintln!("wavepacket bench: {workload} {variant}: {what}");
        self.push(row(workload, variant, "failed", single(0.0), 0.0, "none", &format!("FAILED: {what}"), String::new()));
    }
}

/// All wave-packet workloads on `backend` (and the CPU reference beside it).
pub fn bench(backend: &Backend, size: BenchSize, ceilings: &Ceilings) -> Result<Vec<BenchRow>> {
    bench_with(backend, size, ceilings, &mut |_| {})
}

/// [`bench`], handing each workload's rows to `progress` as soon as they are measured.
pub fn bench_with(backend: &Backend, size: BenchSize, ceilings: &Ceilings, progress: &mut dyn FnMut(&[BenchRow]))
    -> Result<Vec<BenchRow>> {
    let mut rows = run_plan(backend, &plan(size), TIME_GUARD_S, progress)?;
    memory_floor_fractions(&mut rows, ceilings.bandwidth);
    Ok(rows)
}

/// Bytes per sample and per box point that any forward or inverse must move through device
/// memory: the volume once (4 B per sample), and the box array (8 B per complex box point)
/// written once and read and written by the batched box FFTs.
const FLOOR_BYTES: (f64, f64) = (4.0, 24.0);

/// Gives every GPU kernel row its fraction of the device's copy bandwidth, counting only the
/// transform's memory floor ([`FLOOR_BYTES`]). The gathers are bound by L1 and load issue, not by
/// DRAM (the stage rows show them dominating), so a low fraction here says how far the transform
/// is from being a pure streaming pass, not that DRAM is busy.
fn memory_floor_fractions(rows: &mut [BenchRow], bandwidth: f64) {
    if !(bandwidth > 0.0) {
        return;
    }
    let box_points: Vec<Option<f64>> = rows
        .iter()
        .map(|r| {
            rows.iter()
                .find(|s| s.workload == r.workload && s.variant == r.variant && s.scope.starts_with("stage:"))
                .map(|s| s.work)
        })
        .collect();
    for (r, bp) in rows.iter_mut().zip(box_points) {
        let (Some(bp), true) = (bp, r.scope == "kernel" && r.variant.starts_with("gpu")) else { continue };
        let bytes = FLOOR_BYTES.0 * r.work + FLOOR_BYTES.1 * bp;
        let rate = bytes / (r.stats.median_ms * 1e-3);
        r.ceiling = Some(format!("memory floor ({:.2} GB: 4 B/sample + 24 B/box point) at copy bandwidth {:.0} GB/s", bytes * 1e-9,
            bandwidth * 1e-9));
        r.fraction_of_ceiling = Some(rate / bandwidth);
    }
}

/// Runs `plan` on `backend`, adding no repeats once past `guard_s` seconds.
pub fn run_plan(backend: &Backend, plan: &Plan, guard_s: f64, progress: &mut dyn FnMut(&[BenchRow])) -> Result<Vec<BenchRow>> {
    let clock = Clock::new(guard_s);
    let threads = rayon::current_num_threads();
    let on_gpu = matches!(backend, Backend::Gpu(_));
    let est = estimate(plan, threads, on_gpu)?;
    let est_total: f64 = est.iter().map(Estimate::total).sum();
    eprintln!("wavepacket bench: {} workloads, estimated {est_total:.0} s (model of the H100 machine, {threads} CPU threads); \
        time guard {guard_s:.0} s", est.len());
    for e in &est {
        eprintln!("  {} ~{:.1} s ({})", e.workload, e.total(), e.what);
    }
    let mut sink = Sink { rows: Vec::new(), flushed: 0, progress };
    let mut cube: Option<(usize, Vec<f32>)> = None;
    // The exact GPU lattice coefficients of the last N without a CPU reference (the check there).
    let mut exact: Option<(usize, Vec<Complex32>)> = None;
    // CPU reference forward + inverse (ms) per N at eps 1e-4: the fragment path's comparison.
    let mut cpu_pairs: Vec<(usize, f64)> = Vec::new();
    for (w, e) in plan.cubes.iter().zip(&est) {
        if w.cpu_repeats.is_none() && !(on_gpu && !w.gpu.is_empty()) {
            continue; // nothing of this workload runs on this backend
        }
        let t = clock.elapsed_s();
        if cube.as_ref().is_none_or(|c| c.0 != w.n) {
            cube = Some((w.n, test_cube(w.n)));
        }
        let f = &cube.as_ref().unwrap().1;
        bench_cube(backend, w, f, &clock, &mut exact, &mut cpu_pairs, &mut sink)?;
        sink.flush();
        eprintln!("wavepacket bench: {} in {:.1} s (estimated {:.1} s), {:.1} s so far", e.workload, clock.elapsed_s() - t,
            e.total(), clock.elapsed_s());
    }
    drop((cube, exact));
    let t = clock.elapsed_s();
    bench_fragments(backend, &plan.fragments, &clock, &cpu_pairs, &mut sink)?;
    sink.flush();
    eprintln!("wavepacket bench: fragments in {:.1} s (estimated {:.1} s); {} rows in {:.1} s (estimated {est_total:.0} s){}",
        clock.elapsed_s() - t, est.last().map_or(0.0, Estimate::total), sink.rows.len(), clock.elapsed_s(),
        if clock.cut.get() > 0 { format!("; the time guard cut the repeats of {} measurements", clock.cut.get()) } else { String::new() });
    Ok(sink.rows)
}

fn bench_cube(backend: &Backend, w: &CubeWork, f: &[f32], clock: &Clock, exact: &mut Option<(usize, Vec<Complex32>)>,
    cpu_pairs: &mut Vec<(usize, f64)>, sink: &mut Sink) -> Result<()> {
    let (n, eps) = (w.n, w.eps);
    let samples = (n * n * n) as f64;
    let fr = Arc::new(Frame::new(n, &params(eps, Gather::Separable))?);
    let (wf, wi) = (workload("forward", n, eps), workload("inverse", n, eps));
    let red = format!("redundancy {:.2}, {} boxes, P = {}, q = {}", fr.redundancy(), fr.box_count(), fr.p(), fr.geom.q);
    let threads = rayon::current_num_threads();
    let g = clock.guard_s;

    // CPU reference (separable USFFT, all cores): the coefficients the GPU variants are checked against.
    let mut reference = None;
    let mut cpu = [f64::NAN; 2];
    let mut cpu1 = [f64::NAN; 2];
    if let Some(reps) = w.cpu_repeats {
        let mut e = CpuEngine::new(fr.clone());
        // The reference run, also the warm-up.
        let c = e.forward(f);
        let rt = rel_l2_par(&e.inverse(&c), f);
        let chk = format!("inverse(forward) rel L2 {rt:.1e}");
        let sf = clock.repeat(0, reps, || wall_ms(|| {
            e.forward(f);
            Ok(())
        }))?;
        let si = clock.repeat(0, reps, || wall_ms(|| {
            e.inverse(&c);
            Ok(())
        }))?;
        cpu = [sf.stats.median_ms, si.stats.median_ms];
        if eps == 1e-4 {
            cpu_pairs.push((n, cpu[0] + cpu[1]));
        }
        let what = format!("separable USFFT, {threads} threads; {red}; reference run + {reps} timed");
        sink.push(row(&wf, "cpu-reference", "end-to-end", sf.stats, samples, "samples", &chk, format!("{what}{}", sf.guard_note(g))));
        sink.push(row(&wi, "cpu-reference", "end-to-end", si.stats, samples, "samples", &chk, format!("{what}{}", si.guard_note(g))));
        if w.cpu_extras {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
            let (s1f, s1i) = pool.install(|| {
                let t = Instant::now();
                e.forward(f);
                let tf = t.elapsed().as_secs_f64() * 1e3;
                let t = Instant::now();
                e.inverse(&c);
                (single(tf), single(t.elapsed().as_secs_f64() * 1e3))
            });
            cpu1 = [s1f.median_ms, s1i.median_ms];
            sink.push(row(&wf, "cpu-reference-1thread", "end-to-end", s1f, samples, "samples", &chk, "separable USFFT, 1 thread, one run".into()));
            sink.push(row(&wi, "cpu-reference-1thread", "end-to-end", s1i, samples, "samples", &chk, "separable USFFT, 1 thread, one run".into()));
            // The paper's 3D stencil on the CPU: its one timed forward is also its check.
            e.gather = Gather::Stencil;
            let t = Instant::now();
            let cs = e.forward(f);
            let ssf = single(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            e.inverse(&c);
            let ssi = single(t.elapsed().as_secs_f64() * 1e3);
            let chk = format!("vs separable rel L2 {:.1e}", rel_l2_c(&cs, &c));
            let note = format!("paper's 3D stencil, {threads} threads, one run");
            sink.push(row(&wf, "cpu-paper-stencil", "end-to-end", ssf, samples, "samples", &chk, note.clone()));
            sink.push(row(&wi, "cpu-paper-stencil", "end-to-end", ssi, samples, "samples", &chk, note));
        }
        reference = Some(c);
    }

    let Backend::Gpu(gpu) = backend else { return Ok(()) };
    let Some(&first) = w.gpu.first() else { return Ok(()) };
    let mut e = GpuEngine::new(gpu.clone(), Arc::new(Frame::new(n, &params(eps, first))?))?;
    let timer = GpuTimer::new(gpu.stream())?;
    for &gather in &w.gpu {
        let v = Variant { w, f, wf: &wf, wi: &wi, red: &red, cpu, cpu1, reference: reference.as_deref() };
        if let Err(err) = v.run(&mut e, &timer, gather, clock, exact, sink) {
            sink.failed(&wf, variant_name(gather), format!("{err:#}"));
        }
        sink.flush();
    }
    Ok(())
}

/// One GPU variant of one cube workload.
struct Variant<'a> {
    w: &'a CubeWork,
    f: &'a [f32],
    wf: &'a str,
    wi: &'a str,
    red: &'a str,
    /// CPU reference forward and inverse (ms), all cores and one thread (NaN where not run).
    cpu: [f64; 2],
    cpu1: [f64; 2],
    reference: Option<&'a [Complex32]>,
}

impl Variant<'_> {
    fn run(&self, e: &mut GpuEngine, timer: &GpuTimer, gather: Gather, clock: &Clock, exact: &mut Option<(usize, Vec<Complex32>)>,
        sink: &mut Sink) -> Result<()> {
        let (w, f, wf, wi) = (self.w, self.f, self.wf, self.wi);
        let (n, eps) = (w.n, w.eps);
        let samples = (n * n * n) as f64;
        let box_points = e.frame().total as f64;
        let variant = variant_name(gather);
        e.set_gather(gather)?;

        // Check before timing: forward from the page-locked volume, against the CPU reference or,
        // where the CPU does not run, the exact lattice variant; then inverse(forward).
        e.pinned_buffers()?.0.copy_from_slice(f);
        e.forward_pinned()?;
        let exact_here = exact.as_ref().filter(|x| x.0 == n && x.1.len() == e.frame().total).map(|x| &x.1[..]);
        let (err, what) = match (self.reference, exact_here) {
            (Some(r), _) => (Some(rel_l2_c(e.pinned_buffers()?.1, r)), "CPU"),
            (None, Some(x)) if gather != Gather::Lattice => (Some(rel_l2_c(e.pinned_buffers()?.1, x)), "GPU lattice (exact)"),
            _ => (None, ""),
        };
        if gather == Gather::Lattice && self.reference.is_none() {
            *exact = Some((n, e.pinned_buffers()?.1.to_vec()));
        }
        // Pageable timing (up to 256^3) needs the coefficients in ordinary memory.
        let coeffs = if n <= 256 { Some(e.pinned_buffers()?.1.to_vec()) } else { None };
        e.inverse_pinned()?;
        let rt = rel_l2_par(e.pinned_buffers()?.0, f);
        let chk = match err {
            Some(x) => format!("vs {what} rel L2 {x:.1e}; inverse(forward) {rt:.1e}"),
            None => format!("exact (M^3 FFT); inverse(forward) {rt:.1e}"),
        };
        // The variants differ from one another by the USFFT's error (about epsilon); a bug is O(1).
        let tol = 20.0 * eps.max(1e-6);
        if err.is_some_and(|x| !(x <= tol)) || !(rt <= tol) {
            sink.failed(wf, variant, format!("REJECTED, not timed: {chk} (tolerance {tol:.0e})"));
            return Ok(());
        }

        let (warm, reps, e2e) = gpu_repeats(n);
        let g = clock.guard_s;
        // Kernel only: device-resident data, CUDA events. Each timed inverse follows an untimed
        // forward, so it transforms real coefficients (the box FFTs work in place).
        let kf = clock.repeat(warm, reps, || {
            timer.start()?;
            e.forward_device()?;
            Ok(timer.stop_ms()?)
        })?;
        let ki = clock.repeat(warm, reps, || {
            e.forward_device()?;
            timer.start()?;
            e.inverse_device()?;
            Ok(timer.stop_ms()?)
        })?;
        // End to end from and to the engine's page-locked host buffers (what `Engine::roundtrip`
        // and the fragment path use); the forward leaves the inverse's input in the buffer.
        e.pinned_buffers()?.0.copy_from_slice(f);
        let ef = clock.repeat(1, e2e, || wall_ms(|| e.forward_pinned()))?;
        let ei = clock.repeat(1, e2e, || wall_ms(|| e.inverse_pinned()))?;
        // And from ordinary (pageable) host memory, as `Engine::forward` takes it.
        let pageable = match &coeffs {
            Some(c) => {
                let mut host_c = vec![Complex32::default(); c.len()];
                let pf = clock.repeat(PAGEABLE.0, PAGEABLE.1, || wall_ms(|| {
                    e.upload_volume(f)?;
                    e.forward_device()?;
                    e.download_coeffs(&mut host_c)
                }))?;
                let pi = clock.repeat(PAGEABLE.0, PAGEABLE.1, || wall_ms(|| {
                    e.upload_coeffs(c)?;
                    e.inverse_device()?;
                    e.download_volume().map(drop)
                }))?;
                Some((pf, pi))
            }
            None => None,
        };
        let sf = stages(e, true, clock)?;
        let si = stages(e, false, clock)?;

        let threads = rayon::current_num_threads();
        let speed = |d: usize, s: &Stats| {
            let mut t = String::new();
            if self.cpu[d].is_finite() {
                t += &format!(", x{:.1} vs CPU {threads} threads", self.cpu[d] / s.median_ms);
            }
            if self.cpu1[d].is_finite() {
                t += &format!(", x{:.0} vs CPU 1 thread", self.cpu1[d] / s.median_ms);
            }
            t
        };
        let paper = |d: &str| if gather == Gather::Stencil || eps == 1e-4 { paper_figure(d) } else { None };
        for (d, dir, wl, k, ee, st) in [(0, "forward", wf, &kf, &ef, &sf), (1, "inverse", wi, &ki, &ei, &si)] {
            let mut r = row(wl, variant, "kernel", k.stats, samples, "samples", &chk,
                format!("{}{}{}", self.red, speed(d, &k.stats), k.guard_note(g)));
            r.paper = paper(dir);
            sink.push(r);
            let mut r = row(wl, variant, "end-to-end", ee.stats, samples, "samples", &chk,
                format!("page-locked host buffers{}{}", speed(d, &ee.stats), ee.guard_note(g)));
            r.paper = paper(dir);
            sink.push(r);
            if let Some((pf, pi)) = &pageable {
                let p = if d == 0 { pf } else { pi };
                sink.push(row(wl, variant, "end-to-end-pageable", p.stats, samples, "samples", &chk,
                    format!("pageable host memory{}", p.guard_note(g))));
            }
            let get = |k: &str| st.iter().find(|(c, _)| c == k).map_or(0.0, |x| x.1);
            for (cat, ms) in st.iter() {
                sink.push(row(wl, variant, &format!("stage:{cat}"), single(*ms), box_points, "box points", &chk, stage_meaning(cat).into()));
            }
            // The gather's throughput including its share of the global FFT and the correction;
            // the inverse's includes the gather over boxes (combine).
            let ms = get("gather") + get("fft") + get("corr") + if d == 0 { 0.0 } else { get("combine") };
            let stages_txt = st.iter().map(|(c, ms)| format!("{c} {ms:.2}")).collect::<Vec<_>>().join(", ");
            sink.push(row(wl, variant, &format!("gather+fft ({dir})"), single(ms), box_points, "box points", &chk,
                format!("{:.2e} box points/s ({dir} gather incl. global FFT{}); stages ms: {stages_txt}", box_points / (ms * 1e-3),
                    if d == 0 { "" } else { " and the gather over boxes" })));
        }
        Ok(())
    }
}

/// What each per-stage category holds.
fn stage_meaning(cat: &str) -> &'static str {
    match cat {
        "fft" => "global FFT (USFFT lines, P^3 grid or M^3 lattice)",
        "gather" => "USFFT gathers and the forward's box fill (window x spectrum)",
        "box-fft" => "batched box FFTs",
        "combine" => "inverse: gather over the covering boxes at every lattice point",
        "corr" => "Gaussian correction and zero padding / cropping",
        _ => "",
    }
}

/// Median per-category stage times (ms) over [`PROFILES`] profiles (one once past the guard); each
/// inverse profile follows an untimed forward.
fn stages(e: &mut GpuEngine, forward: bool, clock: &Clock) -> Result<Vec<(String, f64)>> {
    let mut per: std::collections::BTreeMap<String, Vec<f64>> = Default::default();
    for i in 0..PROFILES {
        if i > 0 && clock.past() {
            break;
        }
        if !forward {
            e.forward_device()?;
        }
        let mut sums: std::collections::BTreeMap<String, f64> = Default::default();
        for (label, ms) in e.profile(forward)? {
            *sums.entry(label.split(':').next().unwrap_or(label).to_string()).or_default() += ms;
        }
        for (k, v) in sums {
            per.entry(k).or_default().push(v);
        }
    }
    Ok(per.into_iter().map(|(k, v)| (k, seisgpu_host::runtime::median(&v))).collect())
}

fn bench_fragments(backend: &Backend, fw: &FragmentWork, clock: &Clock, cpu_pairs: &[(usize, f64)], sink: &mut Sink) -> Result<()> {
    if !fw.on_cpu && !matches!(backend, Backend::Gpu(_)) {
        eprintln!("wavepacket bench: {} skipped on the CPU (many minutes; the cube rows give the per-cube CPU time)",
            fragment_workload(fw));
        return Ok(());
    }
    let mut vol = vec![0.0f32; fw.shape.iter().product()];
    add_noise_par(&mut vol, 1.0, 5);
    let params = Params { eps: 1e-4, ..Params::default() };
    let tr = Fragmented::new(backend, fw.shape, fw.cube, fw.overlap, &params, true)?;
    let wl = fragment_workload(fw);
    let variant = format!("{}-fragments", backend.name());
    // The check pass, also the warm-up: forward + inverse of every cube must give the volume back.
    let out = tr.process_with(&vol, seisgpu_host::wavepacket::CoeffEdit::Identity)?.volume;
    let err = rel_l2_par(&out, &vol);
    drop(out);
    let chk = format!("forward+inverse rel L2 {err:.1e}");
    if !(err <= 2e-3) {
        sink.failed(&wl, &variant, format!("REJECTED, not timed: {chk}"));
        return Ok(());
    }
    // Identity edit: the coefficients stay on the device (as a thresholding app's do).
    let st = clock.repeat(0, fw.repeats, || wall_ms(|| Ok(tr.process_with(&vol, seisgpu_host::wavepacket::CoeffEdit::Identity).map(drop)?)))?;
    let count = tr.tiling.count();
    let samples = vol.len() as f64;
    let mut note = format!("{count} cubes of {}^3 (overlap >= {}), {} engine(s), forward + inverse per cube (coefficients stay on the device), check pass + {} timed{}",
        tr.tiling.cube, fw.overlap, tr.engines(), fw.repeats, st.guard_note(clock.guard_s));
    // The CPU reference is not run on the whole volume (minutes): its cost is the cube count times
    // the forward + inverse of one cube measured above, extraction and merging not counted.
    let on_gpu = matches!(backend, Backend::Gpu(_));
    if let Some(&(_, pair)) = cpu_pairs.iter().find(|p| p.0 == tr.tiling.cube).filter(|_| on_gpu) {
        let est = single(pair * count as f64);
        note += &format!(", x{:.1} vs the CPU reference's estimate", est.median_ms / st.stats.median_ms);
        sink.push(row(&wl, &variant, "end-to-end", st.stats, samples, "samples", &chk, note));
        sink.push(row(&wl, "cpu-reference-estimated", "end-to-end", est, samples, "samples", "not run",
            format!("not run: {count} x the CPU reference's {0}^3 forward + inverse measured in this run ({pair:.0} ms), \
                all cores; extraction and merging not counted", tr.tiling.cube)));
    } else {
        sink.push(row(&wl, &variant, "end-to-end", st.stats, samples, "samples", &chk, note));
    }
    Ok(())
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
                "failed" => line += &format!(" {}", r.check),
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
pub fn demo(backend: &Backend, out_dir: &Path, size: DemoSize) -> Result<DemoRow> {
    let t0 = std::time::Instant::now();
    // `size` scales the cube along all three axes (cubes above 256 go through the fragment path).
    let k = size.factor();
    let (n1, n3) = (40 * k, 64 * k);
    let shape = [n1, n1, n3];
    let clean = apps::synthetic_cube(shape, 0.004, 25.0);
    let mut noisy = clean.clone();
    let sigma = seisgpu_host::synth::rms(&clean) * 0.5;
    seisgpu_host::synth::add_noise(&mut noisy, sigma, 3);
    let directional = Params { frame: FrameParams { finest: Finest::Directional, ..FrameParams::default() }, ..Params::default() };
    let tr = Fragmented::new(backend, shape, 256, 32, &directional, false)?;
    let d = apps::denoise(&tr, &noisy, None, 3.0)?;
    let (before, after) = (apps::snr_db_on(&clean, &noisy, n3, None), apps::snr_db_on(&clean, &d.volume, n3, None));
    let live = apps::random_dead_traces(n1 * n1, 0.3, 5);
    let p = apps::interpolate(&tr, &clean, &live, apps::InterpMethod::Pocs { iterations: 8, final_fraction: 0.002 })?;
    let sp = apps::snr_db_on(&clean, &p.volume, n3, Some(&live));
    let tc = Fragmented::new(backend, shape, 256, 32, &Params::default(), false)?;
    let c = apps::compress(&tc, &clean, 0.05)?;
    std::fs::create_dir_all(out_dir)?;
    let mut images = Vec::new();
    // The inline through the middle of the cube: n1 traces of n3 samples.
    let mid = n1 / 2;
    let section = |v: &[f32]| v[mid * n1 * n3..(mid + 1) * n1 * n3].to_vec();
    let gaps: Vec<f32> = {
        let mut g = clean.clone();
        for (t, &l) in live.iter().enumerate() {
            if !l {
                g[t * n3..(t + 1) * n3].fill(0.0);
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
        let axes = seisgpu_host::plot::Axes::time_s(0.0, 0.004).traces(0.0, 1.0, "crossline (index)");
        seisgpu_host::plot::section_png_with(&path, &section(v), n1, n3, &format!("wave packets: {title}, inline {mid}"), &axes)?;
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
mod tests;
