//! `seisgpu demo`: the main job. Built-in synthetic survey, all five algorithms, one table, PNGs.

use std::path::PathBuf;

use seisgpu_lab::bench::DemoSize;

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

pub fn run(args: &Args, global: &Global) -> anyhow::Result<()> {
    let backend = global.backend()?;
    seisgpu_lab::demo::run(&backend, &args.out, args.size)
}

impl super::Subcommand for Args {
    fn run(&self, global: &super::Global) -> anyhow::Result<()> { run(self, global) }
    fn library_progress(&self) -> bool { false }
    fn path(&self) -> String { "demo".to_string() }
}
