//! The MPI side of the CLI (feature `mpi`): starting MPI, which subcommands run distributed, and
//! error reports that name the rank without printing the same failure once per rank.

use seisgpu_host::exec::mpi::{self as distributed, Cluster, JobFailed};

use super::Global;

/// Subcommands that split their work across MPI ranks.
pub const DISTRIBUTED: [&str; 10] = ["ktm migrate", "pstm migrate", "srm", "nlbf estimate", "nlbf enhance", "wavepacket forward",
    "wavepacket inverse", "wavepacket denoise", "wavepacket compress", "wavepacket interpolate"];

/// MPI's universe when this process is a rank (launched by mpirun, or `--mpi`), else `None`.
pub fn universe(global: &Global) -> anyhow::Result<Option<distributed::Universe>> {
    if global.mpi || distributed::launched_by_mpirun() {
        Ok(Some(distributed::init()?))
    } else {
        Ok(None)
    }
}

/// A job of several ranks may only run the subcommands that split their work (the others would
/// each do the whole job and write the same output).
pub fn check_distributed(command: &str) -> anyhow::Result<()> {
    let Some(c) = Cluster::world() else { return Ok(()) };
    if c.size() > 1 && !DISTRIBUTED.contains(&command) && command != "info" {
        anyhow::bail!("`seisgpu {command}` does not split its work across MPI ranks (those that do: {}); run it \
            without mpirun (`--gpus` spreads it over the GPUs of one machine)", DISTRIBUTED.join(", "));
    }
    Ok(())
}

/// Prints a failed run's error. A failure every rank agreed on ([`JobFailed`]) is printed once,
/// by rank 0; any other error under a job of several ranks is printed with its rank and ends
/// the whole job (the other ranks may be waiting for this one).
pub fn report(e: &anyhow::Error) {
    let Some(c) = Cluster::world() else {
        eprintln!("error: {e:#}");
        return;
    };
    if e.downcast_ref::<JobFailed>().is_some() {
        if c.is_root() {
            eprintln!("error: {e:#}");
        }
    } else if c.size() > 1 {
        c.abort(&format!("{e:#}"));
    } else {
        eprintln!("error: {e:#}");
    }
}
