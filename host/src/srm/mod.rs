//! srm (placeholder; see its issue). Shape: mod.rs (params, validation, driver), cpu.rs, gpu.rs, bench.rs.

pub mod bench;
pub mod design;
