//! Strong scaling: a job's multi-device split on 1, 2, 4 (, 8, ...) of the given devices, one
//! fixed workload (each algorithm's module of this crate makes its [`Workload`]s), wall-clock time of the
//! whole job (host data in, host result out) and the speed-up over one device. `seisgpu bench
//! --gpus N|all` prints these rows and a summary table ([`summary`]).
//!
//! What a timed run includes: everything a job does with its input on devices that are already
//! open: planning the items, host preparation, uploads, kernels, downloads, the reduction of the
//! devices' parts (images summed on the GPUs, [`seisgpu_host::exec::reduce::sum_parts`], each GPU downloading
//! its slice of the sum; with one, the image comes down whole). What it excludes, as one-time
//! setup that a processing job pays once for many inputs: opening the devices (context, peer
//! access between them), loading and JIT-compiling modules (the untimed check run before the timed
//! runs does it), and whatever a workload makes once per device count outside the timing (FFT
//! plans and engines, operator designs and tables, data resident on each device: [`cached`]).
//!
//! Before timing, every count's result is checked against the one-device result: bit-exact where
//! the split does not change the summation (`exact`: concatenations, sums in item order),
//! relative L2 below 1e-6 where each device sums its own block of items and the device images
//! are then summed in device order (a different N regroups the f32 sums; the on-device sum gives
//! the same bits as the host sum in device order). The timed runs' last result is compared bit for
//! bit with the check run (the static split makes a given N repeatable). Counts above the devices
//! given are skipped with a note; with one device only its row is produced. On CPU work queues
//! (`--device cpu --gpus N`) the rows exercise the code path: the queues share the same cores, so
//! they do not speed anything up.

use anyhow::{ensure, Context, Result};

use seisgpu_host::runtime::memory::HostSamples;
use seisgpu_host::runtime::{phases, timing};
use seisgpu_host::Backend;

use std::path::Path;

use crate::bench::{rel_l2, BenchRow, BenchSize};
use crate::harness::{now_utc, Algorithm};
use crate::report::Report;

/// Device counts measured out of `available`: 1, 2, 4, 8, ... up to it, and `available` itself.
pub fn counts(available: usize) -> Vec<usize> {
    let mut c: Vec<usize> = std::iter::successors(Some(1usize), |&k| Some(k * 2)).take_while(|&k| k <= available).collect();
    if available > 0 && c.last() != Some(&available) {
        c.push(available);
    }
    c
}

/// The whole split job on some devices, its result as f32s (for the checks).
pub type Job = Box<dyn Fn(&[Backend]) -> Result<HostSamples>>;

/// A job whose result is an ordinary vector.
pub fn pageable(job: impl Fn(&[Backend]) -> Result<Vec<f32>> + 'static) -> Job { Box::new(move |d| job(d).map(HostSamples::Pageable)) }

/// One scaling workload, prepared once (each algorithm's `bench.rs` makes its own).
pub struct Workload {
    pub name: String,
    /// The work of one run, in `unit`s.
    pub work: f64,
    pub unit: String,
    /// Results equal bit for bit across device counts.
    pub exact: bool,
    /// The whole split job on some devices, its result as f32s (for the checks).
    pub run: Job,
    /// Takes back a result the harness is done with (its memory serves a later run), where the
    /// job writes into reusable buffers; without it results are freed after the timing.
    pub recycle: Option<Box<dyn Fn(HostSamples)>>,
    /// The speed-up on 4 devices this workload aims at.
    pub target_on_4: Option<f64>,
    /// What the paper reports for this kind of split, for the 1-device row.
    pub paper: Option<String>,
}

impl Workload {
    /// A workload whose job returns an ordinary vector, no recycling, no target.
    pub fn new(name: impl Into<String>, work: f64, unit: impl Into<String>, exact: bool,
        job: impl Fn(&[Backend]) -> Result<Vec<f32>> + 'static) -> Workload {
        Workload { name: name.into(), work, unit: unit.into(), exact, run: pageable(job), recycle: None, target_on_4: None, paper: None }
    }

    pub fn target(mut self, on_4: f64) -> Workload {
        self.target_on_4 = Some(on_4);
        self
    }
}

/// The strong-scaling rows of `workloads` on `devices` (all of them the same kind).
pub fn bench(workloads: Vec<Workload>, devices: &[Backend]) -> Result<Vec<BenchRow>> {
    ensure!(!devices.is_empty(), "scaling bench: no device");
    let mut rows = Vec::new();
    for w in workloads {
        rows.extend(bench_workload(w, devices)?);
    }
    Ok(rows)
}

fn bench_workload(w: Workload, devices: &[Backend]) -> Result<Vec<BenchRow>> {
    let kind = if devices[0].gpu().is_some() { "gpu" } else { "cpu-queue" };
    let mut rows = Vec::new();
    let mut one: Option<(HostSamples, f64)> = None;
    for &n in &counts(devices.len()) {
        let devs = &devices[..n];
        // The check run: also the warm-up (module loads, resident data, per-count setup).
        let t_check = std::time::Instant::now();
        let got = (w.run)(devs).with_context(|| format!("{} on {n} device(s)", w.name))?;
        let t_check = t_check.elapsed().as_secs_f64();
        let mut check = match &one {
            None => "reference (1 device)".to_string(),
            Some((want, _)) => {
                let (got, want) = (got.as_slice()?, want.as_slice()?);
                ensure!(got.len() == want.len(), "{}: {} values on {n} devices, {} on one", w.name, got.len(), want.len());
                let e = rel_l2(&got, want);
                let same = got.iter().zip(want).all(|(a, b)| a.to_bits() == b.to_bits());
                if w.exact {
                    ensure!(same, "{}: the {n}-device result differs from the 1-device one (rel L2 {e:.2e})", w.name);
                    "bit-exact vs 1 device".to_string()
                } else {
                    ensure!(e < 1e-6, "{}: the {n}-device result differs from the 1-device one by rel L2 {e:.2e}", w.name);
                    if same { "bit-exact vs 1 device".to_string() } else { format!("rel L2 {e:.1e} vs 1 device") }
                }
            }
        };
        // Median of repeats, timed around the job alone: handing a result back (and poisoning it
        // for its next use) is the harness's work, done between the timed runs. Seven repeats for
        // jobs under 0.2 s (run-to-run spread on the 4 x H200 VM is a few ms, a tenth of such a
        // job), three for jobs of a few seconds, one for the long ones (~12 s on one GPU), which
        // keeps the whole `--size paper` scaling run within minutes.
        let mut repeats = if t_check < 5.0 { 3 } else { 1 };
        let mut err = None;
        let mut last = None;
        // The earlier timed runs' results, freed after the timing: unmapping a big result (442 MB
        // for a 480^3 volume) is not the next run's work.
        let mut spent: Vec<HostSamples> = Vec::new();
        // The last timed run's wall-clock marks (phases::mark): where its serial time goes.
        let mut marks = Vec::new();
        let mut times = Vec::new();
        while times.len() < repeats {
            phases::take_marks();
            let t = std::time::Instant::now();
            let r = (w.run)(devs);
            times.push(t.elapsed().as_secs_f64() * 1e3);
            marks = phases::take_marks();
            if times.len() == 1 && times[0] < 200.0 {
                repeats = 7;
            }
            match r {
                Ok(v) => match (last.replace(v), &w.recycle) {
                    (Some(old), Some(r)) => r(old),
                    (old, _) => spent.extend(old),
                },
                Err(e) => {
                    err = Some(e);
                    break;
                }
            }
        }
        let stats = timing::Stats::from_samples(&times);
        drop(spent);
        if let Some(e) = err {
            return Err(e.context(format!("{} on {n} device(s), timed run", w.name)));
        }
        if let Some(v) = last {
            let (vs, gs) = (v.as_slice()?, got.as_slice()?);
            let same = vs.len() == gs.len() && vs.iter().zip(gs).all(|(a, b)| a.to_bits() == b.to_bits());
            check += if same { "; repeatable bit for bit" } else { "; NOT repeatable bit for bit" };
            if !same {
                eprintln!("WARNING {}: {n}-device runs differ from each other (rel L2 {:.1e})", w.name, rel_l2(vs, gs));
            }
            if let Some(r) = &w.recycle {
                r(v);
            }
        }
        let t = stats.median_ms;
        let note = match &one {
            None => format!("{n} {kind}; speed-up 1.00x"),
            Some((_, t1)) => format!("{n} {kind}s; speed-up {:.2}x vs 1 (efficiency {:.0} %)", t1 / t, 100.0 * t1 / t / n as f64),
        };
        let note = if marks.is_empty() { note } else { format!("{note}; last run: {}", phases::marks_line(&marks)) };
        match (&one, &w.recycle) {
            (None, _) => one = Some((got, t)),
            (Some(_), Some(r)) => r(got),
            _ => {}
        }
        rows.push(BenchRow {
            workload: w.name.clone(),
            variant: format!("{n}-{kind}"),
            scope: "end-to-end".into(),
            stats,
            work: w.work,
            work_unit: w.unit.clone(),
            ceiling: None,
            fraction_of_ceiling: None,
            check,
            paper: if n == 1 {
                match (&w.paper, w.target_on_4) {
                    (Some(p), Some(t)) => Some(format!("{p}; target >= {t:.1}x on 4")),
                    (Some(p), None) => Some(p.clone()),
                    (None, Some(t)) => Some(format!("target >= {t:.1}x on 4")),
                    (None, None) => None,
                }
            } else {
                None
            },
            note,
        });
    }
    let skipped: Vec<usize> = [2usize, 4].into_iter().filter(|&k| k > devices.len()).collect();
    if !skipped.is_empty() {
        let msg = format!("{}: {} device(s) given; the {skipped:?}-device rows need more (run on nvidia-h200-x2/x4)",
            w.name, devices.len());
        eprintln!("SKIPPED {msg}");
        if let Some(r) = rows.last_mut() {
            r.note += &format!("; {skipped:?}-device rows skipped: {} device(s)", devices.len());
        }
    }
    Ok(rows)
}

/// Per-device-count state of a workload, made on its first run with that count (untimed: the
/// check run) and reused by the timed runs.
pub type PerCount<T> = std::sync::Mutex<Vec<(usize, std::sync::Arc<T>)>>;

pub fn cached<T>(cache: &PerCount<T>, n: usize, make: impl FnOnce() -> Result<T>) -> Result<std::sync::Arc<T>> {
    let mut c = cache.lock().map_err(|_| anyhow::anyhow!("per-device-count cache poisoned"))?;
    if let Some((_, v)) = c.iter().find(|(k, _)| *k == n) {
        return Ok(v.clone());
    }
    let v = std::sync::Arc::new(make()?);
    c.push((n, v.clone()));
    Ok(v)
}

/// The scaling rows as one table: devices, median time, speed-up and efficiency against the
/// workload's 1-device row, the target on 4 devices (`targets`: (workload, speed-up) pairs), and the check.
pub fn summary(rows: &[BenchRow], targets: &[(String, f64)]) -> String {
    let target_on_4 = |w: &str| targets.iter().find(|(n, _)| n == w).map(|(_, t)| *t);
    let devices = |r: &BenchRow| r.variant.split('-').next().and_then(|n| n.parse::<usize>().ok());
    let mut out = String::from("| workload | devices | median (s) | speed-up | efficiency | target (4 devices) | check |\n\
        |---|---:|---:|---:|---:|---|---|\n");
    for r in rows {
        let Some(n) = devices(r) else { continue };
        let one = rows.iter().find(|o| o.workload == r.workload && devices(o) == Some(1));
        let t = r.stats.median_ms / 1e3;
        let (speed, eff) = match one {
            Some(o) => {
                let s = o.stats.median_ms / r.stats.median_ms;
                (format!("{s:.2}x"), format!("{:.0} %", 100.0 * s / n as f64))
            }
            None => ("-".into(), "-".into()),
        };
        let target = match (target_on_4(&r.workload), n, one) {
            (Some(g), 4, Some(o)) => {
                let s = o.stats.median_ms / r.stats.median_ms;
                format!("{g:.1}x: {}", if s >= g { "met" } else { "NOT met" })
            }
            (Some(g), _, _) => format!("{g:.1}x"),
            (None, _, _) => "-".into(),
        };
        out += &format!("| {} | {n} | {t:.3} | {speed} | {eff} | {target} | {} |\n", r.workload, r.check);
    }
    out
}

/// The (workload, target speed-up on 4 devices) pairs of `workloads`, for [`summary`].
pub fn targets(workloads: &[Workload]) -> Vec<(String, f64)> {
    workloads.iter().filter_map(|w| w.target_on_4.map(|t| (w.name.clone(), t))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_summary_has_speed_up_and_target() {
        let row = |w: &str, n: usize, ms: f64| BenchRow {
            workload: w.into(), variant: format!("{n}-gpu"), scope: "end-to-end".into(),
            stats: timing::Stats::from_samples(&[ms]), work: 1.0, work_unit: "x".into(), ceiling: None,
            fraction_of_ceiling: None, check: "ok".into(), paper: None, note: String::new(),
        };
        let rows = [row("scale-a", 1, 4000.0), row("scale-a", 4, 1000.0),
            row("scale-b", 1, 200.0), row("scale-b", 4, 80.0)];
        let targets = [("scale-a".to_string(), 3.7), ("scale-b".to_string(), 3.5)];
        let t = summary(&rows, &targets);
        assert!(t.contains("| scale-a | 4 | 1.000 | 4.00x | 100 % | 3.7x: met |"), "{t}");
        assert!(t.contains("| scale-b | 4 | 0.080 | 2.50x | 62 % | 3.5x: NOT met |"), "{t}");
    }

    #[test]
    fn scale_counts_are_powers_of_two_then_all() {
        assert_eq!(counts(1), vec![1]);
        assert_eq!(counts(2), vec![1, 2]);
        assert_eq!(counts(4), vec![1, 2, 4]);
        assert_eq!(counts(6), vec![1, 2, 4, 6]);
        assert_eq!(counts(8), vec![1, 2, 4, 8]);
    }
}

/// `seisgpu bench [what] --gpus N|all`: strong scaling of each selected algorithm's workloads
/// (those `case` names, comma-separated; all without it) on 1, 2, 4, ... of `devices`, into the
/// report files in `out` and `scaling.md`. Algorithms without a multi-device split are skipped.
pub fn run(devices: &[Backend], selected: &[&Algorithm], size: BenchSize, case: Option<&str>, out: &Path) -> Result<()> {
    let device = match devices[0].gpu() {
        Some(g) => format!("{} x {}", devices.len(), g.info().name),
        None => format!("{} CPU work queue(s) (one machine's cores: the rows exercise the split, not a speed-up)", devices.len()),
    };
    let scalable: Vec<&str> = crate::harness::ALGORITHMS.iter().filter(|a| a.scale.is_some()).map(|a| a.name).collect();
    ensure!(selected.iter().any(|a| a.scale.is_some()),
        "--gpus: {} has no multi-device split to scale (scaling workloads: {})",
        selected.iter().map(|a| a.name).collect::<Vec<_>>().join(", "), scalable.join(", "));
    if devices.len() < 2 {
        eprintln!("SKIPPED scaling rows beyond 1 device: {} device(s) given (run on nvidia-h200-x2/x4)", devices.len());
    }
    let mut report = Report {
        date: now_utc(),
        commit: option_env!("SEISGPU_COMMIT").unwrap_or("unknown").to_string(),
        device,
        cpu_threads: seisgpu_host::rayon_threads(),
        ptx_arch: seisgpu_host::runtime::PTX_ARCH.to_string(),
        ceilings: None,
        rows: Vec::new(),
        failures: Vec::new(),
    };
    let mut targets = Vec::new();
    let mut known = Vec::new();
    for a in selected {
        let (name, Some(workloads)) = (a.name, a.scale) else {
            eprintln!("SKIPPED scale-{}: no multi-device split", a.name);
            continue;
        };
        let t = std::time::Instant::now();
        let rows = workloads(size).map(|w| {
            known.extend(w.iter().map(|w| w.name.clone()));
            scale_cases(w, case)
        }).and_then(|w| {
            targets.extend(self::targets(&w));
            bench(w, devices)
        });
        match rows {
            Ok(rows) => {
                eprintln!("scale-{name}: {} rows in {:.1} s", rows.len(), t.elapsed().as_secs_f64());
                report.rows.extend(rows);
            }
            Err(e) => {
                eprintln!("scale-{name}: FAILED: {e:#}");
                report.failures.push((format!("scale-{name}"), format!("{e:#}")));
            }
        }
        report.write(out)?;
    }
    if let Some(case) = case {
        anyhow::ensure!(!report.rows.is_empty() || !report.failures.is_empty(),
            "--case {case}: no scaling workload of that name; known at this --size: {}", known.join(", "));
    }
    let files = report.write(out)?;
    println!("{}", report.markdown());
    let table = summary(&report.rows, &targets);
    println!("\nStrong scaling ({}):\n\n{table}", report.device);
    let summary_file = out.join("scaling.md");
    std::fs::write(&summary_file, format!("# Strong scaling\n\n{} ({}), commit {}\n\n{table}", report.device, report.date, report.commit))
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", summary_file.display()))?;
    for f in files.iter().chain([&summary_file]) {
        eprintln!("wrote {}", f.display());
    }
    if !report.failures.is_empty() {
        anyhow::bail!("{} scaling benchmark(s) failed: {}", report.failures.len(),
            report.failures.iter().map(|f| f.0.as_str()).collect::<Vec<_>>().join(", "));
    }
    Ok(())
}

/// The scaling workloads named in `case` (comma-separated; all without it).
fn scale_cases(workloads: Vec<Workload>, case: Option<&str>) -> Vec<Workload> {
    let Some(case) = case else { return workloads };
    let names: Vec<&str> = case.split(',').map(str::trim).collect();
    workloads.into_iter().filter(|w| names.contains(&w.name.as_str())).collect()
}
