//! The devices of a job: `--gpus N|all` ([`GpuCount`]) opened as GPUs, or as CPU work queues.

use std::sync::Arc;

use crate::backend::{Backend, DeviceChoice};
use crate::runtime::{Gpu, GpuError};

/// `--gpus N|all`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GpuCount {
    All,
    N(usize),
}

impl std::str::FromStr for GpuCount {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(GpuCount::All);
        }
        match s.parse::<usize>() {
            Ok(0) | Err(_) => Err(format!("--gpus takes a positive count or `all`, not `{s}`")),
            Ok(n) => Ok(GpuCount::N(n)),
        }
    }
}

/// Opens the requested GPUs (ordinals 0..N).
pub fn open_gpus(count: GpuCount) -> Result<Vec<Arc<Gpu>>, GpuError> {
    let available = Gpu::device_count();
    let n = match count {
        GpuCount::All => available,
        GpuCount::N(n) if n > available => return Err(GpuError::BadOrdinal { ordinal: n - 1, count: available }),
        GpuCount::N(n) => n,
    };
    if n == 0 {
        return Err(GpuError::NoDevice);
    }
    let gpus: Vec<Arc<Gpu>> = (0..n).map(Gpu::open).collect::<Result<_, _>>()?;
    // Peer access between every pair, once, with the contexts (one-time setup, like them): the
    // device-side image sums (`crate::exec::reduce::sum_parts`) then copy over NVLink instead of through the host.
    // Best effort: where it fails the driver stages the copies through the host (slower, same sums).
    if gpus.len() > 1 {
        let _ = crate::runtime::reduce::enable_peers(&gpus);
    }
    Ok(gpus)
}

/// The devices of `--gpus N|all` under a `--device` choice, and a line saying what they are.
///
/// `--device cpu --gpus N` gives N CPU work queues (each runs the rayon reference on its items):
/// the split and the reduction are then exactly those of N GPUs, so they are tested on machines
/// without one. `all` is one queue on the CPU (the reference already uses every core). `auto`
/// takes the GPUs when they open and falls back to CPU queues, saying why.
pub fn backends(choice: DeviceChoice, count: GpuCount) -> Result<(Vec<Backend>, String), GpuError> {
    let cpu = |why: String| {
        let n = match count {
            GpuCount::All => 1,
            GpuCount::N(n) => n,
        };
        let note = format!("{n} CPU work queue(s) ({} threads){why}", rayon::current_num_threads());
        (vec![Backend::Cpu; n], note)
    };
    let gpus = |gpus: Vec<Arc<Gpu>>| {
        let names: Vec<String> = gpus.iter().map(|g| format!("{}: {}", g.info().ordinal, g.info().name)).collect();
        let note = format!("{} GPU(s) ({})", gpus.len(), names.join(", "));
        (gpus.into_iter().map(Backend::Gpu).collect(), note)
    };
    match choice {
        DeviceChoice::Cpu => Ok(cpu(", as requested".into())),
        DeviceChoice::Gpu => Ok(gpus(open_gpus(count)?)),
        DeviceChoice::Auto => match open_gpus(count) {
            Ok(g) => Ok(gpus(g)),
            Err(e) => Ok(cpu(format!(", because the GPUs asked for are not usable: {e}"))),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_cpu_queues_for_device_cpu() {
        let (b, note) = backends(DeviceChoice::Cpu, GpuCount::N(3)).unwrap();
        assert_eq!(b.len(), 3);
        assert!(b.iter().all(|b| b.gpu().is_none()) && note.contains("3 CPU"), "{note}");
        assert_eq!(backends(DeviceChoice::Cpu, GpuCount::All).unwrap().0.len(), 1);
    }

    #[test]
    fn gpu_count_parses() {
        assert_eq!("all".parse::<GpuCount>(), Ok(GpuCount::All));
        assert_eq!("4".parse::<GpuCount>(), Ok(GpuCount::N(4)));
        assert!("0".parse::<GpuCount>().is_err());
    }
}
