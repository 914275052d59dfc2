//! `--traveltime-model vti`: the Kirchhoff engine hands the migration to the PSTM engine of paper 5
//! (`crate::pstm`), which computes VTI traveltimes (exact, static8 or dynamic). DSR traveltimes,
//! interpolated ones included, stay in the Kirchhoff engine (`gpu_kernels::ktm::interp`).
//! The rho filter runs here first, so the preprocessing is the one the exact path uses; the PSTM
//! engine sums unit-weight contributions, so amplitude weights, anti-aliasing and angle/taper
//! apertures are refused with a message rather than silently dropped.

use rayon::prelude::*;

use super::prep::RhoFilter;
use super::{velocity_on_grid, Image, Params};
use crate::backend::Backend;
use crate::pstm::{self, PstmParams};
use crate::traces::TraceSet;

/// Whether `params` asks for traveltimes that only the PSTM engine computes (VTI).
pub fn needed(params: &Params) -> bool { params.traveltime_model != pstm::TraveltimeModel::Dsr }

/// The full aperture as a distance: the farthest any trace midpoint lies from any image column
/// (plus a metre), so every trace contributes to every column as in the exact path.
fn full_aperture(traces: &TraceSet, g: &super::ImageGrid) -> f32 {
    let (xa, xb, ya, yb) = (g.x0, g.x(g.nx - 1), g.y0, g.y(g.ny - 1));
    let far = traces.headers.iter().map(|h| {
        let (mx, my) = h.midpoint();
        let dx = (mx - xa).abs().max((mx - xb).abs());
        let dy = (my - ya).abs().max((my - yb).abs());
        (dx * dx + dy * dy).sqrt()
    });
    (far.fold(0.0f64, f64::max) + 1.0) as f32
}

/// Migrates through the PSTM engine; the image comes back in the Kirchhoff engine's layout.
pub fn migrate(traces: &TraceSet, params: &Params, devices: &[Backend]) -> anyhow::Result<Image> {
    let what = format!("traveltime {} with model {}", params.traveltime.name(), params.traveltime_model.name());
    crate::ensure_param!(!params.weights && params.antialias.is_none(), "traveltime-model",
        "{what} runs in the PSTM engine, which has no amplitude weights or anti-aliasing: add --no-weights \
         --no-antialias, or use --traveltime-model dsr");
    let a = &params.aperture;
    // A taper only matters at a finite edge (the full aperture carries a nominal one).
    crate::ensure_param!(a.max_angle_deg >= 90.0 && (a.taper == 0.0 || !a.max_distance.is_finite()), "traveltime-model",
        "{what} runs in the PSTM engine, whose aperture is a maximum distance only: drop --max-angle and --taper, or use --traveltime-model dsr");
    let g = params.grid;
    let vrms = velocity_on_grid(&params.velocity, &g)?;
    let eta = if params.traveltime_model == pstm::TraveltimeModel::Vti { vec![params.eta; g.ntau] } else { Vec::new() };
    let (noff, offset0, doffset) = match &params.offset_classes {
        Some(c) => (c.count, c.first as f32, c.width as f32),
        None => (1, 0.0, f32::MAX),
    };
    let p = PstmParams {
        nx: g.nx,
        ny: g.ny,
        x0: g.x0,
        y0: g.y0,
        dx: g.dx,
        dy: g.dy,
        nz: g.ntau,
        tau0: g.tau0,
        dtau: g.dtau,
        noff,
        offset0,
        doffset,
        vrms,
        eta,
        aperture: if a.max_distance.is_finite() { a.max_distance as f32 } else { full_aperture(traces, &g) },
        stretch: params.mute_stretch.unwrap_or(1e6),
        dynamic_max_step: 32,
        gpu: crate::pstm::GpuTuning::fastest(),
    };
    let filtered;
    let input = if params.rho_filter {
        let rho = RhoFilter::new(traces.ns, traces.dt);
        let mut t = traces.clone();
        let ns = t.ns;
        t.data.par_chunks_mut(ns).for_each_init(|| rho.buffers(), |b, tr| rho.apply(tr, false, b));
        filtered = t;
        &filtered
    } else {
        traces
    };
    let img = pstm::migrate(input, &p, params.traveltime, params.traveltime_model, devices)?;
    // PSTM layout ((ix*ny + iy)*noff + k)*nz_pad + z  ->  Kirchhoff layout (k*ncols + col)*ntau + z.
    let ncols = g.ncols();
    let mut data = vec![0.0f32; noff * ncols * g.ntau];
    for k in 0..noff {
        for col in 0..ncols {
            let (ix, iy) = (col / g.ny, col % g.ny);
            data[(k * ncols + col) * g.ntau..(k * ncols + col + 1) * g.ntau].copy_from_slice(img.trace(ix, iy, k));
        }
    }
    let class_offsets = match &params.offset_classes {
        Some(c) => (0..c.count).map(|k| c.first + (k as f64 + 0.5) * c.width).collect(),
        None => vec![0.0],
    };
    Ok(Image { grid: g, classes: noff, class_offsets, data, skipped_traces: 0 })
}
