//! `seisgpu`: one command, one job per subcommand, every parameter documented with its units.

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

mod cli;

#[derive(Parser)]
#[command(name = "seisgpu", version, about = "Seismic processing on the GPU (and CPU), in Rust end to end",
    long_about = "Seismic processing on the GPU, with multi-threaded CPU references.\n\
    Algorithms: NLBF semblance search (nlbf, nmo), velocity analysis (velan), Kirchhoff prestack time migration (ktm, pstm),\n\
    3D wave packets (wavepacket), Chebyshev shot-record depth migration (srm, extrapolate).\n\
    Start with `seisgpu demo` (built-in synthetic data) and `seisgpu info`.")]
struct Cli {
    #[command(flatten)]
    global: cli::Global,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// GPU and CPU found, PTX architecture, device limits.
    Info(cli::info::Args),
    /// Write built-in synthetic data as SEG-Y (gathers, cubes), and velocity models (SEG-Y, text, .npy).
    Synth(cli::synth::Args),
    /// PNG of any output: SEG-Y/SU gathers and sections, .npy sections, volume slices and 4-D images (density with colour bar, or wiggle).
    Plot(cli::plot::Args),
    /// Nonlinear beamforming: 2+2+1 semblance search (estimate) and enhancement (enhance).
    Nlbf(cli::nlbf::Args),
    /// NMO correction with a stretch mute.
    Nmo(cli::nlbf::NmoArgs),
    /// Velocity analysis: semblance panels of CMP gathers, automatic v_rms picks, NMO with them.
    Velan(cli::velan::Args),
    /// Kirchhoff prestack time migration (and its adjoint, modelling).
    Ktm(cli::ktm::Args),
    /// PSTM with interpolated traveltimes (exact, static8, dynamic; DSR or VTI), paper 5's engine.
    Pstm(cli::pstm::Args),
    /// 3D wave-packet transform: forward, inverse, denoise, compress, interpolate.
    Wavepacket(cli::wavepacket::Args),
    /// Shot-record depth migration with Chebyshev wavefield extrapolation.
    Srm(cli::srm::Args),
    /// Extrapolate one frequency plane or an impulse response with the Chebyshev operator.
    Extrapolate(cli::srm::ExtrapolateArgs),
    /// Benchmarks: GPU against the CPU reference, with the device's ceilings.
    Bench(cli::bench::Args),
    /// The main job: all five algorithms on built-in synthetic data, one table, PNG images.
    Demo(cli::demo::Args),
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
    seisgpu_host::progress::enable(cli.library_progress());
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
    if let Err(e) = cli::mpi::check_distributed(&cli.command_name()) {
        // The same verdict on every rank: said once, every rank exits.
        if seisgpu_host::exec::mpi::Cluster::world().is_some_and(|c| c.is_root()) {
            eprintln!("error: {e:#}");
        }
        drop(universe);
        std::process::exit(1);
    }
    let result = match &cli.command {
        Command::Info(a) => cli::info::run(a, &cli.global),
        Command::Synth(a) => cli::synth::run(a, &cli.global),
        Command::Plot(a) => cli::plot::run(a, &cli.global),
        Command::Nlbf(a) => cli::nlbf::run(a, &cli.global),
        Command::Nmo(a) => cli::nlbf::run_nmo(a, &cli.global),
        Command::Velan(a) => cli::velan::run(a, &cli.global),
        Command::Ktm(a) => cli::ktm::run(a, &cli.global),
        Command::Pstm(a) => cli::pstm::run(a, &cli.global),
        Command::Wavepacket(a) => cli::wavepacket::run(a, &cli.global),
        Command::Srm(a) => cli::srm::run(a, &cli.global),
        Command::Extrapolate(a) => cli::srm::run_extrapolate(a, &cli.global),
        Command::Bench(a) => cli::bench::run(a, &cli.global),
        Command::Demo(a) => cli::demo::run(a, &cli.global),
    };
    if let Err(e) = result {
        #[cfg(feature = "mpi")]
        {
            cli::mpi::report(&e);
            drop(universe);
        }
        #[cfg(not(feature = "mpi"))]
        eprintln!("error: {e:#}");
        std::process::exit(1);
    }
}

impl Cli {
    /// Whether the library's progress bars show: on for the processing commands, off for the
    /// benchmarks and demos (they draw their own bar over their many runs).
    fn library_progress(&self) -> bool {
        !matches!(&self.command, Command::Bench(_) | Command::Demo(_) | Command::Info(_))
            && !matches!(&self.command, Command::Ktm(a) if matches!(a.cmd, cli::ktm::Cmd::Bench(_) | cli::ktm::Cmd::Demo(_)))
            && !matches!(&self.command, Command::Pstm(a) if !matches!(a.command, cli::pstm::Command::Migrate(_)))
            && !matches!(&self.command, Command::Srm(a) if matches!(a.command, Some(cli::srm::SrmCommand::Bench(_))))
    }

    /// The subcommand path, e.g. `ktm migrate` (which ones run distributed under MPI).
    #[cfg(feature = "mpi")]
    fn command_name(&self) -> String {
        match &self.command {
            Command::Ktm(a) => match a.cmd {
                cli::ktm::Cmd::Migrate(_) => "ktm migrate",
                _ => "ktm",
            },
            Command::Srm(a) if a.command.is_none() => "srm",
            Command::Pstm(a) => match a.command {
                cli::pstm::Command::Migrate(_) => "pstm migrate",
                _ => "pstm",
            },
            Command::Srm(_) => "srm design/bench",
            Command::Info(_) => "info",
            Command::Synth(_) => "synth",
            Command::Plot(_) => "plot",
            Command::Nlbf(a) => match a.command {
                cli::nlbf::NlbfCommand::Estimate(_) => "nlbf estimate",
                cli::nlbf::NlbfCommand::Enhance(_) => "nlbf enhance",
            },
            Command::Nmo(_) => "nmo",
            Command::Velan(_) => "velan",
            Command::Wavepacket(a) => match a.command {
                cli::wavepacket::Command::Forward { .. } => "wavepacket forward",
                cli::wavepacket::Command::Inverse { .. } => "wavepacket inverse",
                cli::wavepacket::Command::Denoise { .. } => "wavepacket denoise",
                cli::wavepacket::Command::Compress { .. } => "wavepacket compress",
                cli::wavepacket::Command::Interpolate { .. } => "wavepacket interpolate",
                _ => "wavepacket",
            },
            Command::Extrapolate(_) => "extrapolate",
            Command::Bench(_) => "bench",
            Command::Demo(_) => "demo",
        }
        .to_string()
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
