//! seisgpu host side: the GPU runtime, the CPU references, data I/O and the pipelines.
//!
//! One module per algorithm, each in the same shape as its device twin in `gpu-kernels/src/<algo>`:
//! `mod.rs` (parameters, validation, the public driver that picks CPU or GPU and one device or
//! several), `cpu.rs` (the rayon reference), `gpu.rs` (uploads, launches, downloads), `distributed.rs`
//! (feature `mpi`: the algorithm across MPI ranks). How a job runs on one device, several or MPI
//! ranks is [`exec`]'s: each algorithm describes its multi-device job once as an [`exec::Job`]. The
//! benchmarks (their workloads and surveys, the strong-scaling bench), reports and the demo are the
//! `seisgpu-lab` crate, and no benchmark code is here; what it times below the
//! drivers (each algorithm's GPU engine or resident buffers, e.g. `ktm::gpu::Resident`,
//! `wavepacket::gpu::GpuEngine`) is public for it.
//! Pure math (moveout, traveltime, weights, recursions) lives in `gpu_kernels` and is shared.
//!
//! # Walk-through
//!
//! A synthetic line with one point diffractor ([`synth`]), written to SEG-Y and read back
//! ([`io::segy`]), migrated by Kirchhoff time migration on the CPU ([`ktm::migrate`] on
//! [`Backend::Cpu`]; `Backend::Gpu` runs the same call on a GPU), and the image written as SEG-Y.
//!
//! ```
//! use seisgpu_host::io::segy::{read_segy, write_segy, SampleFormat, WriteOptions};
//! use seisgpu_host::ktm::{self, ImageGrid, Params, Velocity};
//! use seisgpu_host::{synth, Backend, TraceSet};
//!
//! # fn main() -> anyhow::Result<()> {
//! // 8 shots 100 m apart into 48 receivers 25 m apart, 150 samples of 4 ms; a diffractor 600 m
//! // along the line, 400 m deep, in 2000 m/s: its apex at 0.4 s two-way time.
//! let mut traces = TraceSet::zeros(synth::geometry::line_2d(8, 100.0, 48, 25.0), 150, 0.004);
//! synth::events::diffractor(&mut traces, 600.0, 0.0, 400.0, 2000.0, 25.0);
//!
//! // SEG-Y out and back in (IEEE floats: every sample exact; the default is IBM floats).
//! let dir = std::env::temp_dir().join(format!("seisgpu-walk-through-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let opts = WriteOptions { format: SampleFormat::IeeeFloat, ..Default::default() };
//! write_segy(dir.join("line.sgy"), &traces, &opts)?;
//! let (_info, line) = read_segy(dir.join("line.sgy"))?;
//! assert_eq!((line.len(), line.ns, &line.data), (traces.len(), traces.ns, &traces.data));
//!
//! // Migration onto 49 image points 25 m apart along the line, 150 image times of 4 ms.
//! let grid = ImageGrid { x0: 0.0, dx: 25.0, nx: 49, y0: 0.0, dy: 25.0, ny: 1, tau0: 0.0, dtau: 0.004, ntau: 150 };
//! let image = ktm::migrate(&line, &Params::bare(grid, Velocity::Constant(2000.0)), &[Backend::Cpu])?;
//!
//! // The energy focuses at the diffractor: x = 600 m (point 24), tau = 0.4 s (sample 100).
//! let at = |(ix, it): (usize, usize)| image.at(0, ix, 0, it).abs();
//! let peak = (0..grid.nx).flat_map(|ix| (0..grid.ntau).map(move |it| (ix, it)))
//!     .max_by(|&a, &b| at(a).total_cmp(&at(b))).unwrap();
//! assert!(peak.0.abs_diff(24) <= 1 && peak.1.abs_diff(100) <= 2, "peak at {peak:?}");
//!
//! // The image by its extension: .sgy (one trace per image point), .su or .npy.
//! ktm::output::write_image(&dir.join("image.sgy"), &image)?;
//! std::fs::remove_dir_all(&dir)?;
//! # Ok(())
//! # }
//! ```

pub mod backend;
pub mod error;
pub mod exec;
pub mod gain;
pub mod grid;
pub mod io;
pub mod plot;
pub mod progress;
pub mod runtime;
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
pub use error::{Error, ErrorKind};
pub use traces::{Samples, TraceHeader, TraceSet};
pub use gpu_kernels as kernels;

/// Threads in rayon's global pool.
pub fn rayon_threads() -> usize { rayon::current_num_threads() }
