//! `seisgpu`: one command, one job per subcommand, every parameter documented with its units.

use clap::{CommandFactory, FromArgMatches, Parser};

mod cli;

#[derive(Parser)]
#[command(name = "seisgpu", version, about = "Seismic processing on the GPU (and CPU), in Rust end to end",
    long_about = "Seismic processing on the GPU, with multi-threaded CPU references.\n\
    Algorithms: NLBF semblance search (nlbf, nmo), velocity analysis (velan), Kirchhoff prestack time migration (ktm, pstm),\n\
    3D wave packets (wavepacket), Chebyshev shot-record depth migration (srm, extrapolate).\n\
    Start with `seisgpu demo` (built-in synthetic data) and `seisgpu info`.\n\n\
    Exit status: 0 on success; 2 when a parameter or the input data is at fault (the message names it); 1 for any\n\
    other failure (the GPU, a file that cannot be read or written, anything else).")]
struct Cli {
    #[command(flatten)]
    global: cli::Global,
    #[command(subcommand)]
    command: cli::Command,
}


/// The command line with negative numbers accepted as option values on every subcommand (clap
/// keeps this setting per command), so `--velocity -2000` reaches the parameter checks and gets
/// their message instead of "unexpected argument".
fn command() -> clap::Command {
    fn negatives(c: clap::Command) -> clap::Command { c.allow_negative_numbers(true).mut_subcommands(negatives) }
    negatives(Cli::command())
}

fn main() {
    let cli = Cli::from_arg_matches(&command().get_matches()).unwrap_or_else(|e| e.exit());
    seisgpu_host::backend::init_threads(cli.global.threads);
    seisgpu_host::progress::enable(cli.command.subcommand().library_progress());
    // Under mpirun (or with --mpi) this process is one rank of a job; the universe lives until
    // the end of main (dropping it finalises MPI, also after an error).
    #[cfg(feature = "mpi")]
    let universe = match cli::mpi::universe(&cli.global) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    };
    #[cfg(feature = "mpi")]
    if let Err(e) = cli::mpi::check_distributed(&cli.command.subcommand().path()) {
        // The same verdict on every rank: said once, every rank exits.
        if seisgpu_host::exec::mpi::Cluster::world().is_some_and(|c| c.is_root()) {
            eprintln!("error: {e:#}");
        }
        drop(universe);
        std::process::exit(1);
    }
    let result = cli.command.subcommand().run(&cli.global);
    if let Err(e) = result {
        #[cfg(feature = "mpi")]
        {
            cli::mpi::report(&e);
            drop(universe);
        }
        #[cfg(not(feature = "mpi"))]
        eprintln!("error: {e:#}");
        std::process::exit(seisgpu_host::ErrorKind::of(&e).exit_code());
    }
}

#[cfg(test)]
mod tests {
    /// No subcommand takes one long flag twice (flattened option groups can clash; clap checks
    /// that only in debug builds).
    #[test]
    fn command_line_is_consistent() {
        fn check(c: &clap::Command, path: &str) {
            let mut seen = std::collections::HashSet::new();
            for a in c.get_arguments() {
                if let Some(l) = a.get_long() {
                    assert!(seen.insert(l), "`{path}` takes --{l} twice");
                }
            }
            for s in c.get_subcommands() {
                check(s, &format!("{path} {}", s.get_name()));
            }
        }
        let mut c = <super::Cli as clap::CommandFactory>::command();
        c.build();
        check(&c, "seisgpu");
    }
}
