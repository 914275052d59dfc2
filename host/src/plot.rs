//! PNG images of sections and gathers (variable density and wiggle). API fixed here; the
//! implementation arrives with the I/O work (until then these calls write nothing and return Ok).

use std::path::Path;

/// How traces are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    /// Grey-scale (or red-white-blue) variable density, clipped at a percentile of |amplitude|.
    #[default]
    Density,
    /// Wiggle traces with filled positive lobes.
    Wiggle,
}

/// Writes `data` (trace-major: trace i is `data[i * n_samples..(i + 1) * n_samples]`, time down)
/// as a PNG at `path`. `title` names the panel; `dt` (s) and `dx` (m or trace units) label the axes.
pub fn section_png(path: &Path, data: &[f32], n_traces: usize, n_samples: usize, style: Style, title: &str) -> anyhow::Result<()> {
    let _ = (path, data, n_traces, n_samples, style, title);
    Ok(())
}
