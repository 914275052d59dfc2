//! `seisgpu bench`: every algorithm's workloads, GPU against the CPU reference in one process, with
//! the device's ceilings measured in the same run, into one report ([`Report`]).

use std::path::{Path, PathBuf};

use seisgpu_host::Backend;

use crate::bench::{measure_ceilings, BenchRow, BenchSize, Ceilings};
use crate::report::Report;
use crate::{ktm, nlbf, pstm, srm, velan, wavepacket};

/// One algorithm's benchmark: its rows at a size, given the device's ceilings.
pub type BenchFn = fn(&Backend, BenchSize, &Ceilings) -> anyhow::Result<Vec<BenchRow>>;

/// The algorithms of `seisgpu bench all`, in run order.
pub const ALGORITHMS: [(&str, BenchFn); 6] = [
    ("nlbf", nlbf::bench),
    ("ktm", ktm::bench),
    ("pstm", pstm::bench),
    ("wavepacket", wavepacket::bench),
    ("srm", srm::bench),
    ("velan", velan::bench),
];

/// The algorithms `what` names: `all`, one algorithm, or `ceilings` (none: the ceilings only).
pub fn select(what: &str) -> anyhow::Result<Vec<&'static (&'static str, BenchFn)>> {
    Ok(match what {
        "all" => ALGORITHMS.iter().collect(),
        "ceilings" => vec![],
        w => {
            let found: Vec<_> = ALGORITHMS.iter().filter(|(n, _)| *n == w).collect();
            if found.is_empty() {
                anyhow::bail!("unknown benchmark `{w}` (expected all, nlbf, ktm, pstm, pstm-accuracy, wavepacket, srm, velan or ceilings)");
            }
            found
        }
    })
}

/// An empty report of this build on `device`.
pub fn new_report(device: String, ceilings: Option<Ceilings>) -> Report {
    Report {
        date: now_utc(),
        commit: option_env!("SEISGPU_COMMIT").unwrap_or("unknown").to_string(),
        device,
        cpu_threads: seisgpu_host::rayon_threads(),
        ptx_arch: seisgpu_host::runtime::PTX_ARCH.to_string(),
        ceilings,
        rows: Vec::new(),
        failures: Vec::new(),
    }
}

/// Runs `selected` on `backend` at `size` (the ceilings first, on a GPU) and writes the report
/// into `out` after every algorithm, so a run cut short still leaves what it measured. An
/// algorithm that fails is reported and the others still run; the run then fails naming them.
pub fn run(backend: &Backend, selected: &[&(&str, BenchFn)], size: BenchSize, out: &Path) -> anyhow::Result<()> {
    let (device, ceilings) = match backend {
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
    let mut report = new_report(device, ceilings);
    let pb = seisgpu_host::progress::bar(selected.len() as u64, "bench");
    for (name, f) in selected {
        pb.set_message(name.to_string());
        let t = std::time::Instant::now();
        match f(backend, size, &ceilings.unwrap_or_default()) {
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
        report.write(out)?;
    }
    pb.finish_and_clear();
    let files = report.write(out)?;
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

/// Merges `paths` (bench.json files of runs on one device) into one report written into `out`.
pub fn merge(paths: &[PathBuf], out: &Path) -> anyhow::Result<()> {
    let reports = paths
        .iter()
        .map(|p| -> anyhow::Result<Report> {
            let f = std::fs::File::open(p).map_err(|e| anyhow::anyhow!("{}: {e}", p.display()))?;
            serde_json::from_reader(f).map_err(|e| anyhow::anyhow!("{}: not a seisgpu bench.json: {e}", p.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let report = Report::merge(reports)?;
    for f in report.write(out)? {
        eprintln!("wrote {}", f.display());
    }
    println!("{}", report.markdown());
    Ok(())
}

/// Paper 5's Table 1: static8 and dynamic against exact, on band-limited data and on white noise,
/// printed and written to `<out>/pstm-accuracy.md`.
pub fn pstm_accuracy(backend: &Backend, size: BenchSize, out: &Path) -> anyhow::Result<()> {
    use crate::pstm::{accuracy, AccuracyConfig};
    let traces = match size {
        BenchSize::Small => 200,
        BenchSize::Paper => 1000,
    };
    let mut text = String::new();
    for white_noise in [false, true] {
        let cfg = AccuracyConfig { traces, white_noise, ..Default::default() };
        let r = accuracy(backend, &cfg)?;
        text += &format!("{r}\n");
    }
    println!("{text}");
    std::fs::create_dir_all(out)?;
    let path = out.join("pstm-accuracy.md");
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
