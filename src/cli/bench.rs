//! `seisgpu bench`: the arguments of the benchmark harness (`seisgpu_lab::harness`) and of the
//! strong-scaling run over several devices (`seisgpu_lab::scale::run`).

use std::path::PathBuf;

use seisgpu_lab::bench::BenchSize;
use seisgpu_lab::harness;
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
        seisgpu_host::ensure_param!(args.kernels.is_none(), "kernels", "--kernels picks single-device SRM kernels; the strong-scaling rows (--gpus) time each pipeline's split");
    }
    if let Some(devices) = global.backends()? {
        return scale::run(&devices, &selected, args.size, args.case.as_deref(), &args.out);
    }
    let (selected, sel) = harness::narrow(selected, args.size, args.case.as_deref(), args.kernels.as_deref())?;
    harness::run(&global.backend()?, &selected, &sel, args.size, &args.out)
}

impl super::Subcommand for Args {
    fn run(&self, global: &super::Global) -> anyhow::Result<()> { run(self, global) }
    fn library_progress(&self) -> bool { false }
    fn path(&self) -> String { "bench".to_string() }
}
