//! What every benchmark reports: the problem size and the measured row (the harness, reports and
//! charts are the `seisgpu-lab` crate; the strong-scaling rows of [`crate::scale`] are built here).

use serde::{Deserialize, Serialize};

use crate::runtime::Stats;

/// Problem size of a benchmark run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum BenchSize {
    /// Small enough for a CPU-only CI machine (seconds).
    Small,
    /// The papers' workloads.
    Paper,
}

impl std::str::FromStr for BenchSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "small" => Ok(Self::Small),
            "paper" => Ok(Self::Paper),
            o => Err(format!("unknown size `{o}` (expected small or paper)")),
        }
    }
}

/// One measured line: a workload run by one variant in one scope.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BenchRow {
    /// Workload name, e.g. `nlbf-crossspread-3d`.
    pub workload: String,
    /// `cpu-reference`, `gpu-paper`, `gpu-best`, ...
    pub variant: String,
    /// `kernel` (device time only) or `end-to-end` (host data in, host results out).
    pub scope: String,
    pub stats: Stats,
    /// Amount of work, in `work_unit`s (e.g. trace-sample contributions), for throughput.
    pub work: f64,
    pub work_unit: String,
    /// The ceiling that bounds this kernel and the fraction of it reached, when known.
    pub ceiling: Option<String>,
    pub fraction_of_ceiling: Option<f64>,
    /// How the result was checked against the reference before timing.
    pub check: String,
    /// The paper's figure for this workload, when it has one.
    pub paper: Option<String>,
    pub note: String,
}

impl BenchRow {
    pub fn throughput(&self) -> f64 { self.work / (self.stats.median_ms * 1e-3) }
}

/// Relative L2 difference ||a - b|| / ||b|| in f64.
pub fn rel_l2(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len(), "rel_l2 of slices of different lengths");
    let (mut num, mut den) = (0.0f64, 0.0f64);
    for (&x, &y) in a.iter().zip(b) {
        let d = x as f64 - y as f64;
        num += d * d;
        den += (y as f64) * (y as f64);
    }
    if den == 0.0 { num.sqrt() } else { (num / den).sqrt() }
}
