//! One file per subcommand: its `Args` (clap, with units in every help line) and its `run`.

pub mod bench;
pub mod demo;
pub mod info;
pub mod input;
pub mod ktm;
#[cfg(feature = "mpi")]
pub mod mpi;
pub mod nlbf;
pub mod plot;
pub mod pstm;
pub mod srm;
pub mod synth;
pub mod velan;
pub mod wavepacket;

use seisgpu_host::exec::GpuCount;
use seisgpu_host::{Backend, DeviceChoice};

/// A subcommand (`Args` of its file): what it runs, whether the library's progress bars show, and
/// its path (MPI runs the distributed ones).
pub trait Subcommand {
    fn run(&self, global: &Global) -> anyhow::Result<()>;
    /// Off for benchmarks and demos: they draw their own bar over their many runs.
    fn library_progress(&self) -> bool { true }
    /// The subcommand path, e.g. `ktm migrate`.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    fn path(&self) -> String;
}

/// The subcommands, in `seisgpu --help` order: one line each (its help, its variant, its `Args`).
macro_rules! commands {
    ($($(#[$doc:meta])* $variant:ident($args:ty),)*) => {
        #[derive(clap::Subcommand)]
        pub enum Command { $($(#[$doc])* $variant($args),)* }
        impl Command {
            pub fn subcommand(&self) -> &dyn Subcommand { match self { $(Command::$variant(a) => a,)* } }
        }
    };
}

commands! {
    /// GPU and CPU found, PTX architecture, device limits.
    Info(info::Args),
    /// Write built-in synthetic data as SEG-Y (gathers, cubes), and velocity models (SEG-Y, text, .npy).
    Synth(synth::Args),
    /// PNG of any output: SEG-Y/SU gathers and sections, .npy sections, volume slices and 4-D images (density with colour bar, or wiggle).
    Plot(plot::Args),
    /// Nonlinear beamforming: 2+2+1 semblance search (estimate) and enhancement (enhance).
    Nlbf(nlbf::Args),
    /// NMO correction with a stretch mute.
    Nmo(nlbf::NmoArgs),
    /// Velocity analysis: semblance panels of CMP gathers, automatic v_rms picks, NMO with them.
    Velan(velan::Args),
    /// Kirchhoff prestack time migration (and its adjoint, modelling).
    Ktm(ktm::Args),
    /// PSTM with interpolated traveltimes (exact, static8, dynamic; DSR or VTI), paper 5's engine.
    Pstm(pstm::Args),
    /// 3D wave-packet transform: forward, inverse, denoise, compress, interpolate.
    Wavepacket(wavepacket::Args),
    /// Shot-record depth migration with Chebyshev wavefield extrapolation.
    Srm(srm::Args),
    /// Extrapolate one frequency plane or an impulse response with the Chebyshev operator.
    Extrapolate(srm::ExtrapolateArgs),
    /// Benchmarks: GPU against the CPU reference, with the device's ceilings.
    Bench(bench::Args),
    /// The main job: all five algorithms on built-in synthetic data, one table, PNG images.
    Demo(demo::Args),
}

/// Options every subcommand takes.
#[derive(clap::Args, Debug, Clone)]
pub struct Global {
    /// Where to run: `auto` (GPU when present, else CPU), `gpu` (error without one) or `cpu`.
    #[arg(long, global = true, default_value = "auto")]
    pub device: DeviceChoice,
    /// GPU ordinal to use.
    #[arg(long, global = true, default_value_t = 0)]
    pub gpu: usize,
    /// CPU threads for the CPU paths (0 = all cores).
    #[arg(long, global = true, default_value_t = 0)]
    pub threads: usize,
    /// Split the work over several devices: N GPUs (ordinals 0..N-1) or `all` visible GPUs, one host
    /// thread each (`nlbf estimate|enhance` by parameter traces, then enhance by traces, and `wavepacket` by cubes: results
    /// independent of N; `ktm migrate`, `pstm migrate` by trace chunks and `srm` by shots and
    /// frequencies, each GPU a fixed block of them into one resident image, the images summed in
    /// device order: repeatable for a given N, other N differ by f32 rounding; `bench`:
    /// strong-scaling rows). With `--device cpu`, N CPU work queues: the same split and sums.
    #[arg(long, global = true)]
    pub gpus: Option<GpuCount>,
    /// Run as one rank of an MPI job (implied when mpirun starts seisgpu): `ktm migrate`,
    /// `pstm migrate`, `srm`, `nlbf estimate|enhance` and `wavepacket forward|inverse|denoise|compress|
    /// interpolate` split their work items across the ranks, each rank on its own devices
    /// (`--device`, `--gpus`), reading only the input it needs (SEG-Y trace ranges, a .npy
    /// volume's rows) and writing its part of the output into one file (an .npy image's block,
    /// its parameter traces of the NLBF volumes, its rows of a wave-packet volume, its cubes'
    /// coefficients, its traces of a SEG-Y image). The output's folder must be one every rank sees.
    #[cfg(feature = "mpi")]
    #[arg(long, global = true)]
    pub mpi: bool,
}

impl Global {
    /// Opens the backend and says which one runs (on stderr, so pipes stay clean).
    pub fn backend(&self) -> anyhow::Result<Backend> {
        let (backend, note) = Backend::select(self.device, self.gpu)?;
        eprintln!("seisgpu: running on {note}");
        Ok(backend)
    }

    /// This rank's cluster when running under MPI (collective: every rank calls it at the same
    /// point of the same subcommand).
    #[cfg(feature = "mpi")]
    pub fn cluster(&self) -> Option<seisgpu_host::exec::mpi::Cluster> { seisgpu_host::exec::mpi::Cluster::world() }

    /// Whether this process is a rank of an MPI job (never without the `mpi` feature).
    pub fn mpi_ranks(&self) -> bool {
        #[cfg(feature = "mpi")]
        return self.cluster().is_some();
        #[cfg(not(feature = "mpi"))]
        false
    }

    /// This rank's devices under MPI (see `Cluster::local_devices`), agreed on by all ranks.
    #[cfg(feature = "mpi")]
    pub fn rank_devices(&self, c: &seisgpu_host::exec::mpi::Cluster) -> anyhow::Result<Vec<Backend>> {
        let (devices, note) = c.agree("opening the devices", c.local_devices(self.device, self.gpu, self.gpus))?;
        // One write of the whole line (the ranks share the terminal).
        let line = format!("seisgpu: rank {} of {}: running on {note}\n", c.rank(), c.size());
        eprint!("{line}");
        Ok(devices)
    }

    /// Checks a result path before the work ([`seisgpu_host::io::output::prepare`]): its format by
    /// extension, its folder. Under MPI every rank checks and all agree, so a folder that one rank
    /// cannot see fails every rank at once (collective) instead of leaving the others waiting.
    pub fn prepare_output(&self, path: &std::path::Path) -> anyhow::Result<seisgpu_host::io::output::OutputFormat> {
        let checked = seisgpu_host::io::output::prepare(path);
        #[cfg(feature = "mpi")]
        if let Some(cluster) = self.cluster() {
            return cluster.agree("checking the output", checked);
        }
        checked
    }

    /// The devices of `--gpus` (`None` without it: the single-device path runs).
    pub fn backends(&self) -> anyhow::Result<Option<Vec<Backend>>> {
        let Some(count) = self.gpus else { return Ok(None) };
        let (backends, note) = seisgpu_host::exec::backends(self.device, count)?;
        eprintln!("seisgpu: running on {note}");
        Ok(Some(backends))
    }

    /// The devices a job runs on: those of `--gpus` (the work split over them), else the one of
    /// `--device`/`--gpu`.
    pub fn devices(&self) -> anyhow::Result<Vec<Backend>> {
        match self.backends()? {
            Some(d) => Ok(d),
            None => Ok(vec![self.backend()?]),
        }
    }
}
