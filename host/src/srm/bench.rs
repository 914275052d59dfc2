//! srm benchmark workloads (placeholder).

use std::path::Path;

use crate::backend::Backend;
use crate::bench::{BenchRow, BenchSize, Ceilings, DemoRow};

/// Runs this algorithm's benchmark workloads on `backend` (and the CPU reference beside it).
pub fn bench(_backend: &Backend, _size: BenchSize, _ceilings: &Ceilings) -> anyhow::Result<Vec<BenchRow>> {
    anyhow::bail!("srm benchmarks are not implemented yet")
}

/// The demo step: run on built-in synthetic data, write PNGs under `out_dir`, return the table row.
pub fn demo(_backend: &Backend, _out_dir: &Path) -> anyhow::Result<DemoRow> {
    anyhow::bail!("srm demo is not implemented yet")
}
