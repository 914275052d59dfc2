//! seisgpu host side: the GPU runtime, the CPU references, data I/O and the pipelines.
//!
//! One module per algorithm, each in the same shape as its device twin in `gpu-kernels/src/<algo>`:
//! `mod.rs` (parameters, validation, the public driver that picks CPU or GPU), `cpu.rs` (the rayon
//! reference), `gpu.rs` (uploads, launches, downloads), `bench.rs` (the benchmark workloads).
//! Pure math (moveout, traveltime, weights, recursions) lives in `gpu_kernels` and is shared.

pub mod backend;
pub mod bench;
#[cfg(feature = "mpi")]
pub mod distributed;
pub mod gain;
pub mod grid;
pub mod io;
pub mod multi;
pub mod plot;
pub mod progress;
pub mod report;
pub mod runtime;
pub mod scale;
pub mod synth;
pub mod traces;
pub mod velocity;

pub mod ktm;
pub mod nlbf;
pub mod pstm;
pub mod srm;
pub mod velan;
pub mod wavepacket;

pub use backend::{Backend, DeviceChoice};
pub use traces::{TraceHeader, TraceSet};
pub use gpu_kernels as kernels;

/// Threads in rayon's global pool.
pub fn rayon_threads() -> usize { rayon::current_num_threads() }
