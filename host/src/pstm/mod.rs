//! PSTM traveltimes (paper 5): exact, static 8-point and dynamic interpolation, DSR and VTI.
//! Placeholder; see its issue. Shape: mod.rs (params, validation, driver), cpu.rs, gpu.rs, bench.rs.

pub mod bench;

/// How traveltimes are computed along image time (`--traveltime`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum TraveltimeMode {
    /// Exact at every image sample (the reference).
    #[default]
    Exact,
    /// Exact at every 8th image sample, linear between (paper 5's GPU scheme).
    Static8,
    /// Steps of 8, 16, 24 or 32 samples where the interpolation error stays under `tolerance` (s).
    Dynamic { tolerance: f32 },
}

/// Which traveltime formula (`--traveltime-model`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum TraveltimeModel {
    /// Straight-ray double square root with RMS velocity.
    #[default]
    Dsr,
    /// Anisotropic (VTI, eta) non-hyperbolic traveltime.
    Vti,
}
