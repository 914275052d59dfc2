use super::Global;

#[derive(clap::Args, Debug)]
pub struct Args {}
#[derive(clap::Args, Debug)]
pub struct NmoArgs {}

pub fn run(_args: &Args, _global: &Global) -> anyhow::Result<()> { anyhow::bail!("`nlbf` is not implemented yet") }
pub fn run_nmo(_args: &NmoArgs, _global: &Global) -> anyhow::Result<()> { anyhow::bail!("`nmo` is not implemented yet") }
