//! Integration tests, one binary (so the GPU bundle carries one file). One module per area.
//! GPU tests open the GPU through `seisgpu_host::backend::gpu_or_skip`, which prints
//! `SKIPPED <test>: ...` and returns `None` on machines without one.

mod common;

mod bench;
mod defaults;
mod exit;

mod ktm;
mod ktm_interp;
mod ktm_resident;
mod nlbf;
mod output;
mod plot;
mod pstm;
mod runtime;
mod scale;
mod segy;
mod srm;
mod srm_cluster;
mod velan;
mod velocity_args;
mod wavepacket;
