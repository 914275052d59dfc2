//! Backend choice: `--device auto|gpu|cpu` and `--threads`.

use std::sync::Arc;

use crate::runtime::{Gpu, GpuError};

/// What the user asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceChoice {
    /// The GPU when a driver and a device are present, the CPU otherwise.
    #[default]
    Auto,
    /// The GPU; an error when there is none.
    Gpu,
    /// The CPU references (rayon), even when a GPU is present.
    Cpu,
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "gpu" => Ok(Self::Gpu),
            "cpu" => Ok(Self::Cpu),
            other => Err(format!("unknown device `{other}` (expected auto, gpu or cpu)")),
        }
    }
}

/// Where the work runs.
#[derive(Clone)]
pub enum Backend {
    Cpu,
    Gpu(Arc<Gpu>),
}

impl Backend {
    /// Resolves a choice. `Auto` falls back to the CPU and says why in the returned note.
    pub fn select(choice: DeviceChoice, ordinal: usize) -> Result<(Backend, String), GpuError> {
        match choice {
            DeviceChoice::Cpu => Ok((Backend::Cpu, format!("CPU ({} threads), as requested", rayon::current_num_threads()))),
            DeviceChoice::Gpu => {
                let gpu = Gpu::open(ordinal)?;
                let note = format!("GPU {}: {}", ordinal, gpu.info().name);
                Ok((Backend::Gpu(gpu), note))
            }
            DeviceChoice::Auto => match Gpu::open(ordinal) {
                Ok(gpu) => {
                    let note = format!("GPU {}: {} (auto)", ordinal, gpu.info().name);
                    Ok((Backend::Gpu(gpu), note))
                }
                Err(e) => Ok((Backend::Cpu, format!("CPU ({} threads), because no GPU is usable: {e}", rayon::current_num_threads()))),
            },
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Backend::Cpu => "cpu",
            Backend::Gpu(_) => "gpu",
        }
    }
    pub fn gpu(&self) -> Option<&Arc<Gpu>> {
        match self {
            Backend::Gpu(g) => Some(g),
            Backend::Cpu => None,
        }
    }
}

/// Sets the size of rayon's global pool (`--threads`; 0 = all cores). Call once, early.
pub fn init_threads(threads: usize) {
    if threads > 0 {
        let _ = rayon::ThreadPoolBuilder::new().num_threads(threads).build_global();
    }
}

/// For GPU tests: opens GPU 0, or prints why the test is skipped and returns `None`.
pub fn gpu_or_skip(test: &str) -> Option<Arc<Gpu>> {
    match Gpu::open(0) {
        Ok(g) => Some(g),
        Err(e) => {
            // Straight to stderr, not `println!`: the test harness captures the print macros, and a
            // skipped GPU test must say so in CI's log.
            use std::io::Write;
            let _ = writeln!(std::io::stderr(), "SKIPPED {test}: no usable GPU ({e})");
            None
        }
    }
}
