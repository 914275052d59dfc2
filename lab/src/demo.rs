//! `seisgpu demo`: the main job. Built-in synthetic survey, all five algorithms, one table, PNGs.

use std::path::Path;

use seisgpu_host::Backend;

use crate::bench::{DemoRow, DemoSize};
use crate::{ktm, nlbf, pstm, srm, wavepacket};

/// One algorithm's demo: its images into a folder, its row of the table.
pub type DemoFn = fn(&Backend, &Path, DemoSize) -> anyhow::Result<DemoRow>;

/// The demo's steps, in run order.
pub const STEPS: [(&str, DemoFn); 5] = [
    ("NLBF (2+2+1 semblance)", nlbf::demo),
    ("Kirchhoff PSTM", ktm::demo),
    ("PSTM static8 traveltimes", pstm::demo),
    ("3D wave packets", wavepacket::demo),
    ("Chebyshev SRM", srm::demo),
];

/// Runs every step on `backend` (images into `out`, created if missing) and prints the table; a
/// step that fails is reported and the others still run, then the demo fails naming them.
pub fn run(backend: &Backend, out: &Path, size: DemoSize) -> anyhow::Result<()> {
    std::fs::create_dir_all(out)?;
    let total = std::time::Instant::now();
    let mut rows = Vec::new();
    let mut failed = Vec::new();
    let pb = seisgpu_host::progress::bar(STEPS.len() as u64, "demo");
    for (name, f) in STEPS {
        pb.set_message(name);
        match f(backend, out, size) {
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
    println!("total {:.1} s ({:?} size); images in {}", total.elapsed().as_secs_f64(), size, out.display());
    if !failed.is_empty() {
        anyhow::bail!("demo step(s) failed: {}", failed.join(", "));
    }
    Ok(())
}
