use super::Global;

#[derive(clap::Args, Debug)]
pub struct Args {}

pub fn run(_args: &Args, _global: &Global) -> anyhow::Result<()> {
    anyhow::bail!("`pstm` is not implemented yet")
}
