//! `seisgpu demo`: the main job. Built-in synthetic survey, all five algorithms, one table, PNGs.

use std::path::PathBuf;

use seisgpu_host::bench::{DemoRow, DemoSize};
use seisgpu_host::{ktm, nlbf, pstm, srm, wavepacket, Backend};

use super::Global;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Folder for the before/after PNG images (created if missing).
    #[arg(long, default_value = "seisgpu-demo")]
    pub out: PathBuf,
    /// Size of the built-in survey: `small` (under a minute on a 2-core CPU), `medium` or `large`
    /// (every survey 2x or 4x wider along each horizontal axis; the wave-packet cube also in time).
    #[arg(long, default_value = "small")]
    pub size: DemoSize,
}

type DemoFn = fn(&Backend, &std::path::Path, DemoSize) -> anyhow::Result<DemoRow>;

const STEPS: [(&str, DemoFn); 5] = [
    ("NLBF (2+2+1 semblance)", nlbf::bench::demo),
    ("Kirchhoff PSTM", ktm::bench::demo),
    ("PSTM static8 traveltimes", pstm::bench::demo),
    ("3D wave packets", wavepacket::bench::demo),
    ("Chebyshev SRM", srm::bench::demo),
];

pub fn run(args: &Args, global: &Global) -> anyhow::Result<()> {
    let backend = global.backend()?;
    std::fs::create_dir_all(&args.out)?;
    let total = std::time::Instant::now();
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    let pb = seisgpu_host::progress::bar(STEPS.len() as u64, "demo");
    for (name, f) in STEPS {
        pb.set_message(name);
        match f(&backend, &args.out, args.size) {
            Ok(row) => rows.push(row),
            Err(e) => {
                pb.suspend(|| eprintln!("{name}: FAILED: {e:#}"));
                failed.push(name);
            }
        }
        pb.inc(1);
    }
    pb.finish_and_clear();
    println!("{:<28} {:<8} {:>9}  {}", "algorithm", "backend", "time (s)", "quality");
    for r in &rows {
        println!("{:<28} {:<8} {:>9.2}  {}", r.algorithm, r.backend, r.seconds, r.quality);
    }
    println!("total {:.1} s ({:?} size); images in {}", total.elapsed().as_secs_f64(), args.size, args.out.display());
    if !failed.is_empty() {
        anyhow::bail!("demo step(s) failed: {}", failed.join(", "));
    }
    Ok(())
}
