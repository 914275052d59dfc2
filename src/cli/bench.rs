//! `seisgpu bench`: the arguments of the benchmark harness (`seisgpu_lab::harness`), and the
//! strong-scaling run over several devices.

use std::path::PathBuf;

use seisgpu_host::Backend;
use seisgpu_lab::bench::BenchSize;
use seisgpu_lab::harness::{self, now_utc};
use seisgpu_lab::report::Report;
use seisgpu_lab::scale;

use super::Global;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// What to benchmark: all, nlbf, ktm, pstm, pstm-accuracy (paper 5's Table 1), wavepacket, srm, velan,
    /// or ceilings (device ceilings only). With `--gpus N|all`: strong scaling of the pipelines on
    /// 1, 2, 4, ... of those devices instead (speed-up and efficiency against one device).
    #[arg(default_value = "all")]
    pub what: String,
    /// Problem size: `small` (seconds on a laptop CPU) or `paper` (the papers' workloads).
    #[arg(long, default_value = "small")]
    pub size: BenchSize,
    /// Folder for bench.json, bench.md and the PNG charts.
    #[arg(long, default_value = "bench-out")]
    pub out: PathBuf,
    /// Instead of measuring, merge these bench.json files (runs on the same device) and write the
    /// combined Markdown, JSON and charts into --out.
    #[arg(long, num_args = 1..)]
    pub merge: Vec<PathBuf>,
    /// Run only these workloads (comma-separated names, e.g. `ktm-table2-4096,nlbf-crossspread-3d`):
    /// the ktm and nlbf workloads have names; only the benchmarks owning one run. An unknown name is
    /// an error listing the known ones at this --size. With --gpus: the scaling workloads (e.g.
    /// `scale-wavepacket-480x480x480`) instead.
    #[arg(long, value_name = "NAME[,NAME...]")]
    pub case: Option<String>,
    /// SRM GPU kernels to time (comma-separated: paper, paperq56, cluster, clusterd); default all.
    #[arg(long, value_name = "KERNEL[,KERNEL...]")]
    pub kernels: Option<String>,
}

pub fn run(args: &Args, global: &Global) -> anyhow::Result<()> {
    if !args.merge.is_empty() {
        return harness::merge(&args.merge, &args.out);
    }
    if args.what == "pstm-accuracy" {
        return harness::pstm_accuracy(&global.backend()?, args.size, &args.out);
    }
    let selected = harness::select(&args.what)?;
    if global.gpus.is_some() {
        anyhow::ensure!(args.kernels.is_none(), "--kernels picks single-device SRM kernels; the strong-scaling rows (--gpus) time each pipeline's split");
    }
    if let Some(devices) = global.backends()? {
        let names: Vec<&str> = selected.iter().map(|a| a.name).collect();
        return scaling(args, &devices, &names);
    }
    let (selected, sel) = harness::narrow(selected, args.size, args.case.as_deref(), args.kernels.as_deref())?;
    harness::run(&global.backend()?, &selected, &sel, args.size, &args.out)
}

/// `seisgpu bench [what] --gpus N|all`: strong scaling of each selected pipeline on 1, 2, 4, ...
/// of the devices (`seisgpu_lab::scale`), into the same report files.
fn scaling(args: &Args, devices: &[Backend], names: &[&str]) -> anyhow::Result<()> {
    let device = match devices[0].gpu() {
        Some(g) => format!("{} x {}", devices.len(), g.info().name),
        None => format!("{} CPU work queue(s) (one machine's cores: the rows exercise the split, not a speed-up)", devices.len()),
    };
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
    for name in names {
        let t = std::time::Instant::now();
        let rows = scale_workloads(name, args.size).map(|w| {
            known.extend(w.iter().map(|w| w.name.clone()));
            scale_cases(w, args.case.as_deref())
        }).and_then(|w| {
            targets.extend(scale::targets(&w));
            scale::bench(w, devices)
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
        report.write(&args.out)?;
    }
    if let Some(case) = &args.case {
        anyhow::ensure!(!report.rows.is_empty() || !report.failures.is_empty(),
            "--case {case}: no scaling workload of that name; known at this --size: {}", known.join(", "));
    }
    let files = report.write(&args.out)?;
    println!("{}", report.markdown());
    let table = scale::summary(&report.rows, &targets);
    println!("\nStrong scaling ({}):\n\n{table}", report.device);
    let summary = args.out.join("scaling.md");
    std::fs::write(&summary, format!("# Strong scaling\n\n{} ({}), commit {}\n\n{table}", report.device, report.date, report.commit))
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", summary.display()))?;
    for f in files.iter().chain([&summary]) {
        eprintln!("wrote {}", f.display());
    }
    if !report.failures.is_empty() {
        anyhow::bail!("{} scaling benchmark(s) failed: {}", report.failures.len(),
            report.failures.iter().map(|f| f.0.as_str()).collect::<Vec<_>>().join(", "));
    }
    Ok(())
}

/// The scaling workloads named in `case` (comma-separated; all without it).
fn scale_cases(workloads: Vec<scale::Workload>, case: Option<&str>) -> Vec<scale::Workload> {
    let Some(case) = case else { return workloads };
    let names: Vec<&str> = case.split(',').map(str::trim).collect();
    workloads.into_iter().filter(|w| names.contains(&w.name.as_str())).collect()
}

/// The strong-scaling workloads of the pipeline `name` (each made by its `seisgpu_lab` module).
fn scale_workloads(name: &str, size: BenchSize) -> anyhow::Result<Vec<scale::Workload>> {
    use seisgpu_lab::{ktm, nlbf, pstm, srm};
    Ok(match name {
        "nlbf" => vec![nlbf::scale_workload(size)?],
        "ktm" => vec![ktm::scale_workload(size)?],
        "pstm" => vec![pstm::scale_workload(size)?],
        "wavepacket" => seisgpu_lab::wavepacket::scaling::scale_workloads(size)?,
        "srm" => vec![srm::scale_workload(size)?],
        other => anyhow::bail!("no scaling workload for `{other}` (expected one of nlbf, ktm, pstm, wavepacket, srm)"),
    })
}
