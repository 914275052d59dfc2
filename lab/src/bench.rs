//! What every benchmark reports, so `seisgpu bench` can print one table, JSON and charts: the
//! problem size, the measured rows, the device's ceilings, the demo's rows.

use serde::{Deserialize, Serialize};

/// Problem size of a benchmark run: the host's synthetic survey size (`small` or `paper`).
pub use seisgpu_host::synth::Size as BenchSize;
pub use seisgpu_host::synth::rel_l2;
use seisgpu_host::runtime::Stats;

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
use seisgpu_host::srm::GpuVariant;

/// Which workloads and kernels a run times (`seisgpu bench --case`, `--kernels`); the default,
/// everything.
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Workload names to run alone (`None`: every workload).
    pub cases: Option<Vec<String>>,
    /// The SRM GPU kernels to time (`None`: every one).
    pub kernels: Option<Vec<GpuVariant>>,
}

impl Selection {
    /// Whether the workload `name` runs.
    pub fn wants(&self, name: &str) -> bool { self.cases.as_ref().is_none_or(|c| c.iter().any(|n| n == name)) }

    /// Whether the SRM kernel `k` is timed.
    pub fn times(&self, k: GpuVariant) -> bool { self.kernels.as_ref().is_none_or(|o| o.contains(&k)) }
}

/// The SRM kernels the benchmark times, by the names `--kernels` takes.
pub const SRM_KERNELS: [GpuVariant; 4] = [GpuVariant::Paper, GpuVariant::PaperPairCapped, GpuVariant::Cluster, GpuVariant::ClusterD];

/// Parses a `--case` list: comma-separated names, each one of `known` (else an error listing them).
pub fn parse_cases(list: &str, known: &[String]) -> anyhow::Result<Vec<String>> {
    let cases: Vec<String> = list.split(',').map(|c| c.trim().to_string()).filter(|c| !c.is_empty()).collect();
    anyhow::ensure!(!cases.is_empty(), "--case `{list}`: no workload named (known: {})", known.join(", "));
    for c in &cases {
        anyhow::ensure!(known.contains(c), "--case: unknown workload `{c}` (known: {})", known.join(", "));
    }
    Ok(cases)
}

/// Parses a `--kernels` list: comma-separated SRM kernel names (paper, paperq56, cluster, clusterd).
pub fn parse_kernels(list: &str) -> anyhow::Result<Vec<GpuVariant>> {
    let names = || SRM_KERNELS.iter().map(|k| k.to_string()).collect::<Vec<_>>().join(", ");
    let kernels: Vec<GpuVariant> = list
        .split(',')
        .map(|k| k.trim())
        .filter(|k| !k.is_empty())
        .map(|k| match k.parse::<GpuVariant>() {
            Ok(v) if SRM_KERNELS.contains(&v) => Ok(v),
            _ => Err(anyhow::anyhow!("--kernels: unknown kernel `{k}` (known: {})", names())),
        })
        .collect::<anyhow::Result<_>>()?;
    anyhow::ensure!(!kernels.is_empty(), "--kernels `{list}`: no kernel named (known: {})", names());
    Ok(kernels)
}

/// Size of the `seisgpu demo` run: `small` (the default: under a minute on a 2-core CPU),
/// `medium` and `large` scale every demo's survey by 2 and 4 along each horizontal axis (the
/// wave-packet cube also in time), for GPU runs or patient CPUs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DemoSize {
    Small,
    Medium,
    Large,
}

impl DemoSize {
    /// Linear scale factor of the horizontal axes.
    pub fn factor(self) -> usize {
        match self {
            Self::Small => 1,
            Self::Medium => 2,
            Self::Large => 4,
        }
    }
}

impl std::str::FromStr for DemoSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "small" => Ok(Self::Small),
            "medium" => Ok(Self::Medium),
            "large" => Ok(Self::Large),
            o => Err(format!("unknown demo size `{o}` (expected small, medium or large)")),
        }
    }
}

/// The device's measured ceilings (one measurement per run).
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Ceilings {
    /// Device-to-device copy, bytes read + written per second.
    pub bandwidth: f64,
    /// FP32 FMA rate, flop/s.
    pub fp32: f64,
    /// Special-function (ex2/rsqrt) rate, op/s.
    pub sfu: f64,
}

/// Peak instruction issue rate of a device, in thread instructions per second: each SM issues one
/// warp instruction per scheduler per cycle, the same slots an FP32 FMA (2 flop per lane) takes, so
/// half the FP32 rate: the measured one (`ceilings.fp32`) when there is one, else `nominal_fp32`.
pub fn peak_issue(ceilings: &Ceilings, nominal_fp32: f64) -> f64 {
    if ceilings.fp32 > 0.0 { ceilings.fp32 / 2.0 } else { nominal_fp32 / 2.0 }
}

/// Marks `row` as bound by instruction issue: `instr` SASS instructions (per thread) per unit of
/// work, counted from the kernel's disassembly, at `peak` thread instructions/s (see [`peak_issue`])
/// give the ceiling `peak / instr` work units/s; sets the ceiling text and the fraction reached.
/// `what` qualifies the count (e.g. "SASS instr/contribution").
pub fn set_issue_ceiling(row: &mut BenchRow, instr: f64, what: &str, peak: f64) {
    let ceiling = peak / instr;
    row.ceiling = Some(format!("issue limit ({instr} {what}) {ceiling:.2e}/s"));
    row.fraction_of_ceiling = Some(row.throughput() / ceiling);
}

/// One line of `seisgpu demo`'s table.
#[derive(Debug, Clone, Serialize)]
pub struct DemoRow {
    pub algorithm: String,
    pub backend: String,
    pub seconds: f64,
    /// The quality figure that matters for this algorithm, in words with its number.
    pub quality: String,
    pub images: Vec<std::path::PathBuf>,
}

/// Measures the device's ceilings: a 1 GiB device-to-device copy (bytes read + written), the FP32
/// FMA rate and the SFU (`ex2.approx`) rate, each the median of several timed runs after warm-up.
pub fn measure_ceilings(gpu: &seisgpu_host::runtime::Gpu) -> seisgpu_host::runtime::error::GpuResult<Ceilings> {
    use seisgpu_host::launch;
    use seisgpu_host::runtime::{GpuTimer, LaunchConfig};
    let timer = GpuTimer::new(gpu.stream())?;

    let n = 1usize << 28; // 1 GiB of f32
    let src = gpu.upload(&vec![1.0f32; n])?;
    let mut dst = gpu.zeros::<f32>(n)?;
    let copy = timer.measure(2, 7, || {
        gpu.stream()
            .memcpy_dtod(&src, &mut dst)
            .map_err(seisgpu_host::runtime::GpuError::driver("device-to-device copy"))
    })?;
    let bandwidth = 2.0 * (n * 4) as f64 / (copy.median_ms * 1e-3);
    drop((src, dst));

    let blocks = gpu.info().multiprocessors as u32 * 8;
    let threads = 256u32;
    let cfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 };
    let total = (blocks * threads) as f64;
    let mut out = gpu.zeros::<f32>((blocks * threads) as usize)?;
    let (iters, seed) = (8192u32, 0.5f32);
    let fma = timer.measure(1, 5, || launch!(gpu, seisgpu_host::kernels::ceilings::FMA_RATE, cfg, &iters, &seed, &mut out))?;
    let fp32 = total * iters as f64 * 16.0 * 2.0 / (fma.median_ms * 1e-3);
    let sfu_iters = 2048u32;
    let sfu_t = timer.measure(1, 5, || launch!(gpu, seisgpu_host::kernels::ceilings::SFU_RATE, cfg, &sfu_iters, &seed, &mut out))?;
    let sfu = total * sfu_iters as f64 * 8.0 / (sfu_t.median_ms * 1e-3);
    Ok(Ceilings { bandwidth, fp32, sfu })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_and_kernel_lists() {
        let known: Vec<String> = ["a-1", "b-2"].iter().map(|s| s.to_string()).collect();
        assert_eq!(parse_cases(" b-2, a-1 ", &known).unwrap(), ["b-2", "a-1"]);
        let e = parse_cases("a-1,c", &known).unwrap_err().to_string();
        assert!(e.contains("`c`") && e.contains("a-1, b-2"), "{e}");
        assert!(parse_cases(",", &known).is_err());
        assert_eq!(parse_kernels("clusterd,paper").unwrap(), [GpuVariant::ClusterD, GpuVariant::Paper]);
        let e = parse_kernels("auto").unwrap_err().to_string();
        assert!(e.contains("`auto`") && e.contains("paper, paperq56, cluster, clusterd"), "{e}");
        let sel = Selection { cases: Some(vec!["a-1".into()]), kernels: Some(vec![GpuVariant::Cluster]) };
        assert!(sel.wants("a-1") && !sel.wants("b-2") && sel.times(GpuVariant::Cluster) && !sel.times(GpuVariant::Paper));
        assert!(Selection::default().wants("anything") && Selection::default().times(GpuVariant::Paper));
    }
}
