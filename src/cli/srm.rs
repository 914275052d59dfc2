use super::Global;

#[derive(clap::Args, Debug)]
pub struct Args {}
#[derive(clap::Args, Debug)]
pub struct ExtrapolateArgs {}

pub fn run(_args: &Args, _global: &Global) -> anyhow::Result<()> { anyhow::bail!("`srm` is not implemented yet") }
pub fn run_extrapolate(_args: &ExtrapolateArgs, _global: &Global) -> anyhow::Result<()> {
    anyhow::bail!("`extrapolate` is not implemented yet")
}
