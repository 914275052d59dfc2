//! seisgpu's lab: the benchmark harness and workloads of every algorithm, the reports and charts
//! of `seisgpu bench`, and `seisgpu demo`.
//!
//! One module per algorithm (`bench()` times its workloads: the CPU reference on all cores and
//! every GPU variant, each checked against the CPU before it is timed; most also have `demo()`),
//! [`bench`] (the row types and the device's ceilings), [`scale`] (the strong-scaling rows of
//! `seisgpu bench --gpus` over each algorithm's `scale_workload`), [`report`] (bench.json, bench.md,
//! PNG charts), [`harness`] (the `seisgpu bench` run over the algorithms), [`demo`], and [`micro`]
//! (the `cargo bench` micro-benchmarks of `lab/benches/`).

pub mod bench;
pub mod demo;
pub mod harness;
pub mod micro;
pub mod report;
pub mod scale;

pub mod ktm;
pub mod ktm_interp;
pub mod nlbf;
pub mod pstm;
pub mod srm;
pub mod velan;
pub mod wavepacket;
