//! One file per subcommand: its `Args` (clap, with units in every help line) and its `run`.

pub mod bench;
pub mod demo;
pub mod info;
pub mod ktm;
pub mod nlbf;
pub mod plot;
pub mod pstm;
pub mod srm;
pub mod synth;
pub mod wavepacket;

use seisgpu_host::{Backend, DeviceChoice};

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
}

impl Global {
    /// Opens the backend and says which one runs (on stderr, so pipes stay clean).
    pub fn backend(&self) -> anyhow::Result<Backend> {
        let (backend, note) = Backend::select(self.device, self.gpu)?;
        eprintln!("seisgpu: running on {note}");
        Ok(backend)
    }
}
