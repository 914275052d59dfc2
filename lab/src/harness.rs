//! `seisgpu bench`: every algorithm's workloads, GPU against the CPU reference in one process, with
//! the device's ceilings measured in the same run, into one report ([`Report`]).

use std::path::{Path, PathBuf};

use seisgpu_host::Backend;

use crate::bench::{measure_ceilings, parse_cases, parse_kernels, BenchRow, BenchSize, Ceilings, Selection};
use crate::report::Report;
use crate::{ktm, nlbf, pstm, srm, velan, wavepacket};

/// One algorithm's benchmark: its rows at a size, given the device's ceilings, of what a
/// [`Selection`] picks.
pub type BenchFn = fn(&Backend, BenchSize, &Ceilings, &Selection) -> anyhow::Result<Vec<BenchRow>>;

/// One algorithm's strong-scaling workloads at a size (`seisgpu bench --gpus`, [`crate::scale`]).
pub type ScaleFn = fn(BenchSize) -> anyhow::Result<Vec<crate::scale::Workload>>;

/// One algorithm of `seisgpu bench`: the one place the lab lists it.
pub struct Algorithm {
    pub name: &'static str,
    pub bench: BenchFn,
    /// Its workloads that `--case` can name, at a size (none: it runs whole or not at all).
    pub cases: fn(BenchSize) -> Vec<String>,
    /// Its strong-scaling workloads, if it has a multi-device split.
    pub scale: Option<ScaleFn>,
}

fn no_cases(_: BenchSize) -> Vec<String> { Vec::new() }
fn nlbf_cases(_: BenchSize) -> Vec<String> { nlbf::NAMES.iter().map(|n| n.to_string()).collect() }
fn pstm_bench(b: &Backend, s: BenchSize, c: &Ceilings, _: &Selection) -> anyhow::Result<Vec<BenchRow>> { pstm::bench(b, s, c) }
fn wavepacket_bench(b: &Backend, s: BenchSize, c: &Ceilings, _: &Selection) -> anyhow::Result<Vec<BenchRow>> { wavepacket::bench(b, s, c) }
fn srm_bench(b: &Backend, s: BenchSize, c: &Ceilings, sel: &Selection) -> anyhow::Result<Vec<BenchRow>> { srm::bench_with(b, s, c, false, sel) }
fn velan_bench(b: &Backend, s: BenchSize, c: &Ceilings, _: &Selection) -> anyhow::Result<Vec<BenchRow>> { velan::bench(b, s, c) }
fn nlbf_scale(s: BenchSize) -> anyhow::Result<Vec<crate::scale::Workload>> { Ok(vec![nlbf::scale_workload(s)?]) }
fn ktm_scale(s: BenchSize) -> anyhow::Result<Vec<crate::scale::Workload>> { Ok(vec![ktm::scale_workload(s)?]) }
fn pstm_scale(s: BenchSize) -> anyhow::Result<Vec<crate::scale::Workload>> { Ok(vec![pstm::scale_workload(s)?]) }
fn srm_scale(s: BenchSize) -> anyhow::Result<Vec<crate::scale::Workload>> { Ok(vec![srm::scale_workload(s)?]) }

/// The algorithms of `seisgpu bench all`, in run order.
pub const ALGORITHMS: [Algorithm; 6] = [
    Algorithm { name: "nlbf", bench: nlbf::bench_selected, cases: nlbf_cases, scale: Some(nlbf_scale) },
    Algorithm { name: "ktm", bench: ktm::bench_selected, cases: ktm::names, scale: Some(ktm_scale) },
    Algorithm { name: "pstm", bench: pstm_bench, cases: no_cases, scale: Some(pstm_scale) },
    Algorithm { name: "wavepacket", bench: wavepacket_bench, cases: no_cases, scale: Some(wavepacket::scaling::scale_workloads) },
    Algorithm { name: "srm", bench: srm_bench, cases: no_cases, scale: Some(srm_scale) },
    Algorithm { name: "velan", bench: velan_bench, cases: no_cases, scale: None },
];

/// The algorithms `what` names: `all`, one algorithm, or `ceilings` (none: the ceilings only).
pub fn select(what: &str) -> anyhow::Result<Vec<&'static Algorithm>> {
    Ok(match what {
        "all" => ALGORITHMS.iter().collect(),
        "ceilings" => vec![],
        w => {
            let found: Vec<_> = ALGORITHMS.iter().filter(|a| a.name == w).collect();
            if found.is_empty() {
                let names: Vec<&str> = ALGORITHMS.iter().map(|a| a.name).collect();
                anyhow::bail!("unknown benchmark `{w}` (expected all, {}, pstm-accuracy or ceilings)", names.join(", "));
            }
            found
        }
    })
}

/// Narrows `selected` by `--case` (comma-separated workload names, each one of the selected
/// algorithms' at `size`; only the algorithms owning a named workload then run) and `--kernels`
/// (SRM kernels; srm must be selected). Unknown names are an error listing the known ones.
pub fn narrow(selected: Vec<&'static Algorithm>, size: BenchSize, case: Option<&str>, kernels: Option<&str>)
    -> anyhow::Result<(Vec<&'static Algorithm>, Selection)> {
    let mut sel = Selection::default();
    let mut selected = selected;
    if let Some(list) = kernels {
        anyhow::ensure!(selected.iter().any(|a| a.name == "srm"), "--kernels picks SRM kernels, but srm is not among the benchmarks run");
        sel.kernels = Some(parse_kernels(list)?);
    }
    if let Some(list) = case {
        let known: Vec<String> = selected.iter().flat_map(|a| (a.cases)(size)).collect();
        let cases = parse_cases(list, &known)?;
        selected.retain(|a| (a.cases)(size).iter().any(|c| cases.contains(c)));
        sel.cases = Some(cases);
    }
    Ok((selected, sel))
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
pub fn run(backend: &Backend, selected: &[&Algorithm], sel: &Selection, size: BenchSize, out: &Path) -> anyhow::Result<()> {
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
    for a in selected {
        let name = a.name;
        pb.set_message(name);
        let t = std::time::Instant::now();
        match (a.bench)(backend, size, &ceilings.unwrap_or_default(), sel) {
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
