//! `seisgpu bench`: every algorithm's workloads, GPU against the CPU reference in one
//! process, with the device's ceilings measured in the same run.

use std::path::PathBuf;

use seisgpu_host::bench::{measure_ceilings, BenchRow, BenchSize, Ceilings};
use seisgpu_host::exec::scale;
use seisgpu_host::report::Report;
use seisgpu_host::{ktm, nlbf, pstm, srm, velan, wavepacket, Backend};

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
}

type BenchFn = fn(&Backend, BenchSize, &Ceilings) -> anyhow::Result<Vec<BenchRow>>;

const ALGORITHMS: [(&str, BenchFn); 6] = [
    ("nlbf", nlbf::bench::bench),
    ("ktm", ktm::bench::bench),
    ("pstm", pstm::bench::bench),
    ("wavepacket", wavepacket::bench::bench),
    ("srm", srm::bench::bench),
    ("velan", velan::bench::bench),
];

pub fn run(args: &Args, global: &Global) -> anyhow::Result<()> {
    if !args.merge.is_empty() {
        let reports = args
            .merge
            .iter()
            .map(|p| -> anyhow::Result<Report> {
                let f = std::fs::File::open(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
                serde_json::from_reader(f).map_err(|e| anyhow::anyhow!("{}: not a seisgpu bench.json: {e}", p.display()))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let report = Report::merge(reports)?;
        for f in report.write(&args.out)? {
            eprintln!("wrote {}", f.display());
        }
        println!("{}", report.markdown());
        return Ok(());
    }
    if args.what == "pstm-accuracy" {
        return pstm_accuracy(args, global);
    }
    let selected: Vec<&(&str, BenchFn)> = match args.what.as_str() {
        "all" => ALGORITHMS.iter().collect(),
        "ceilings" => vec![],
        w => {
            let found: Vec<_> = ALGORITHMS.iter().filter(|(n, _)| *n == w).collect();
            if found.is_empty() {
                anyhow::bail!("unknown benchmark `{w}` (expected all, nlbf, ktm, pstm, pstm-accuracy, wavepacket, srm, velan or ceilings)");
            }
            found
        }
    };
    if let Some(devices) = global.backends()? {
        let names: Vec<&str> = selected.iter().map(|(n, _)| *n).collect();
        return scaling(args, &devices, &names);
    }
    let backend = global.backend()?;
    let (device, ceilings) = match &backend {
        Backend::Gpu(gpu) => {
            let c = measure_ceilings(gpu)?;
            eprintln!(
                "ceilings: copy {:.0} GB/s, FP32 {:.1} TFLOP/s, SFU {:.2} Top/s",
                c.bandwidth / 1e9,
                c.fp32 / 1e12,
                c.sfu / 1e12
            );
            (gpu.info().name.clone(), Some(c))
        }
        Backend::Cpu => ("CPU only".to_string(), None),
    };
    let mut report = Report {
        date: now_utc(),
        commit: option_env!("SEISGPU_COMMIT").unwrap_or("unknown").to_string(),
        device,
        cpu_threads: seisgpu_host::rayon_threads(),
        ptx_arch: seisgpu_host::runtime::PTX_ARCH.to_string(),
        ceilings,
        rows: Vec::new(),
        failures: Vec::new(),
    };
    let pb = seisgpu_host::progress::bar(selected.len() as u64, "bench");
    for (name, f) in selected {
        pb.set_message(name.to_string());
        let t = std::time::Instant::now();
        match f(&backend, args.size, &ceilings.unwrap_or_default()) {
            Ok(rows) => {
                eprintln!("{name}: {} rows in {:.1} s", rows.len(), t.elapsed().as_secs_f64());
                report.rows.extend(rows)
            }
            Err(e) => {
                eprintln!("{name}: FAILED: {e:#}");
                report.failures.push((name.to_string(), format!("{e:#}")));
            }
        }
        pb.inc(1);
        // Written after every algorithm, so a run cut short still leaves what it measured.
        report.write(&args.out)?;
    }
    pb.finish_and_clear();
    let files = report.write(&args.out)?;
    println!("{}", report.markdown());
    for f in files {
        eprintln!("wrote {}", f.display());
    }
    if !report.failures.is_empty() {
        anyhow::bail!("{} benchmark(s) failed: {}", report.failures.len(),
            report.failures.iter().map(|f| f.0.as_str()).collect::<Vec<_>>().join(", "));
    }
    Ok(())
}

/// `seisgpu bench [what] --gpus N|all`: strong scaling of each selected pipeline on 1, 2, 4, ...
/// of the devices (`seisgpu_host::exec::scale`), into the same report files.
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
    for name in names {
        let t = std::time::Instant::now();
        let rows = scale_workloads(name, args.size).and_then(|w| {
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

/// The strong-scaling workloads of the pipeline `name` (each algorithm's `bench.rs` makes them).
fn scale_workloads(name: &str, size: BenchSize) -> anyhow::Result<Vec<scale::Workload>> {
    Ok(match name {
        "nlbf" => vec![nlbf::bench::scale_workload(size)?],
        "ktm" => vec![ktm::bench::scale_workload(size)?],
        "pstm" => vec![pstm::bench::scale_workload(size)?],
        "wavepacket" => wavepacket::scaling::scale_workloads(size)?,
        "srm" => vec![srm::bench::scale_workload(size)?],
        other => anyhow::bail!("no scaling workload for `{other}` (expected one of nlbf, ktm, pstm, wavepacket, srm)"),
    })
}

/// Paper 5's Table 1: static8 and dynamic against exact, on band-limited data and on white noise,
/// printed and written to `<out>/pstm-accuracy.md`.
fn pstm_accuracy(args: &Args, global: &Global) -> anyhow::Result<()> {
    use seisgpu_host::pstm::bench::{accuracy, AccuracyConfig};
    let backend = global.backend()?;
    let traces = match args.size {
        BenchSize::Small => 200,
        BenchSize::Paper => 1000,
    };
    let mut text = String::new();
    for white_noise in [false, true] {
        let cfg = AccuracyConfig { traces, white_noise, ..Default::default() };
        let r = accuracy(&backend, &cfg)?;
        text += &format!("{r}\n");
    }
    println!("{text}");
    std::fs::create_dir_all(&args.out)?;
    let path = args.out.join("pstm-accuracy.md");
    let mut f = seisgpu_host::io::AtomicFile::create(&path)?;
    std::io::Write::write_all(&mut f, text.as_bytes())?;
    f.commit()?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// UTC date and time without a date crate: days since the epoch to a civil date (Hinnant's algorithm).
pub fn now_utc() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let (days, rem) = ((secs / 86400) as i64, secs % 86400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!("{y:04}-{m:02}-{d:02} {:02}:{:02} UTC", rem / 3600, (rem % 3600) / 60)
}
