//! PNG images of sections and gathers: variable density (red-white-blue) or wiggle traces with
//! filled positive lobes, amplitudes clipped at the 99th percentile of |a|, time down.
//!
//! The traces are rasterised by hand into an RGB buffer (one pass, no per-pixel backend calls);
//! plotters draws the title, axes and labels on top with the compiled-in DejaVu font (no system
//! fontconfig needed), and the `png` crate encodes the buffer into an [`AtomicFile`].

use std::path::Path;

use anyhow::{bail, Context};
use plotters::prelude::*;

use crate::io::AtomicFile;

/// How traces are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    /// Grey-scale (or red-white-blue) variable density, clipped at a percentile of |amplitude|.
    #[default]
    Density,
    /// Wiggle traces with filled positive lobes.
    Wiggle,
}

impl std::str::FromStr for Style {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "density" | "vd" => Ok(Style::Density),
            "wiggle" | "wig" => Ok(Style::Wiggle),
            o => Err(format!("unknown plot style `{o}` (expected density or wiggle)")),
        }
    }
}

/// Axis annotation: what the trace and sample indices mean.
#[derive(Debug, Clone)]
pub struct Axes {
    /// Time of sample 0 and the sample interval, in the unit of `time_label`.
    pub t0: f64,
    pub dt: f64,
    pub time_label: String,
    /// Number of trace 0 (e.g. its index in the file), the step between plotted traces' numbers
    /// (e.g. a decimation) and the label of the horizontal axis.
    pub first_trace: f64,
    pub trace_step: f64,
    pub trace_label: String,
    /// Percentile of |amplitude| where the colour (or wiggle) saturates, in (0, 100].
    pub clip_percentile: f64,
}

impl Default for Axes {
    fn default() -> Self {
        Axes { t0: 0.0, dt: 1.0, time_label: "sample".into(), first_trace: 0.0, trace_step: 1.0, trace_label: "trace".into(), clip_percentile: 99.0 }
    }
}

/// Writes `data` (trace-major: trace i is `data[i * n_samples..(i + 1) * n_samples]`, time down)
/// as a PNG at `path`. `title` names the panel; the axes count traces and samples (see
/// [`section_png_with`] for times and trace numbers).
pub fn section_png(path: &Path, data: &[f32], n_traces: usize, n_samples: usize, style: Style, title: &str) -> anyhow::Result<()> {
    section_png_with(path, data, n_traces, n_samples, style, title, &Axes::default())
}

/// The |amplitude| at percentile `p` (0..=100), from at most ~1M evenly strided values.
pub fn clip_level(data: &[f32], p: f64) -> f32 {
    let stride = (data.len() / (1 << 20)).max(1);
    let mut a: Vec<f32> = data.iter().step_by(stride).map(|v| v.abs()).collect();
    if a.is_empty() {
        return 1.0;
    }
    let k = (((p / 100.0) * (a.len() - 1) as f64).round() as usize).min(a.len() - 1);
    let (_, v, _) = a.select_nth_unstable_by(k, |x, y| x.total_cmp(y));
    let v = *v;
    if v > 0.0 { v } else { data.iter().fold(0.0f32, |m, x| m.max(x.abs())).max(f32::MIN_POSITIVE) }
}

/// Red-white-blue: -1 blue, 0 white, +1 red (values are already clipped to [-1, 1]).
fn rwb(v: f32) -> [u8; 3] {
    let w = (255.0 * (1.0 - v.abs())).round() as u8;
    if v >= 0.0 { [255, w, w] } else { [w, w, 255] }
}

/// Plot-area size for a section: about 1.5 px per sample and 2..8 px per trace, bounded.
fn plot_size(n_traces: usize, n_samples: usize, style: Style) -> (u32, u32) {
    let per_trace = if style == Style::Wiggle { 8 } else { 4 };
    let w = (n_traces * per_trace).clamp(400, 1600) as u32;
    let h = ((n_samples as f64 * 1.5) as usize).clamp(400, 1000) as u32;
    (w, h)
}

/// The same as [`section_png`] with axes in physical units.
pub fn section_png_with(path: &Path, data: &[f32], n_traces: usize, n_samples: usize, style: Style, title: &str,
    axes: &Axes) -> anyhow::Result<()> {
    if n_traces == 0 || n_samples == 0 {
        bail!("{}: nothing to plot ({n_traces} traces of {n_samples} samples)", path.display());
    }
    if data.len() != n_traces * n_samples {
        bail!("{}: {} values for {n_traces} traces of {n_samples} samples", path.display(), data.len());
    }
    if let Some(i) = data.iter().position(|v| !v.is_finite()) {
        bail!("{}: trace {} sample {} is not finite ({}); refusing to plot", path.display(), i / n_samples, i % n_samples, data[i]);
    }
    if !(axes.trace_step > 0.0 && axes.dt > 0.0) {
        bail!("plot axes: trace step {} and sample interval {} must be positive", axes.trace_step, axes.dt);
    }
    if !(axes.clip_percentile > 0.0 && axes.clip_percentile <= 100.0) {
        bail!("clip percentile {} is outside (0, 100]", axes.clip_percentile);
    }
    let clip = clip_level(data, axes.clip_percentile);
    let (pw, ph) = plot_size(n_traces, n_samples, style);
    let (left, right, top, bottom) = (80u32, 30u32, 45u32, 55u32);
    let (w, h) = (pw + left + right, ph + top + bottom);
    let mut buf = vec![255u8; (w * h * 3) as usize];

    // Traces span [first_trace - 0.5, last + 0.5] horizontally, samples [t0 - dt/2, t_end + dt/2].
    let x_range = (axes.first_trace - 0.5 * axes.trace_step)..(axes.first_trace + (n_traces as f64 - 0.5) * axes.trace_step);
    let t_start = axes.t0 - 0.5 * axes.dt;
    let t_end = axes.t0 + (n_samples as f64 - 0.5) * axes.dt;
    crate::report::register_fonts();

    // Pass 1: the plotting area's pixel rectangle for this layout.
    let (xr, yr) = {
        let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
        let chart = chart_builder(&root, title, left, bottom, top, right)
            .build_cartesian_2d(x_range.clone(), -t_end..-t_start)
            .map_err(|e| anyhow::anyhow!("plot layout: {e}"))?;
        chart.plotting_area().get_pixel_range()
    };
    let (x0, y0) = (xr.start.max(0) as usize, yr.start.max(0) as usize);
    let (aw, ah) = ((xr.end - xr.start).max(1) as usize, (yr.end - yr.start).max(1) as usize);

    // Pass 2: the traces.
    let put = |buf: &mut [u8], x: usize, y: usize, c: [u8; 3]| {
        if x < w as usize && y < h as usize {
            let i = (y * w as usize + x) * 3;
            buf[i..i + 3].copy_from_slice(&c);
        }
    };
    // Amplitude of trace `tr` at fractional sample `s` (linear interpolation), clipped to [-1, 1].
    let sample = |tr: usize, s: f64| -> f32 {
        let s = s.clamp(0.0, (n_samples - 1) as f64);
        let i = (s.floor() as usize).min(n_samples - 1);
        let f = (s - i as f64) as f32;
        let a = data[tr * n_samples + i];
        let b = data[tr * n_samples + (i + 1).min(n_samples - 1)];
        ((a + f * (b - a)) / clip).clamp(-1.0, 1.0)
    };
    let row_sample = |py: usize| (py as f64 + 0.5) / ah as f64 * n_samples as f64 - 0.5;
    match style {
        Style::Density => {
            for py in 0..ah {
                let s = row_sample(py);
                for px in 0..aw {
                    let tr = ((px as f64 + 0.5) / aw as f64 * n_traces as f64) as usize;
                    put(&mut buf, x0 + px, y0 + py, rwb(sample(tr.min(n_traces - 1), s)));
                }
            }
        }
        Style::Wiggle => {
            // At least 3 px between drawn traces; decimate evenly beyond that.
            let spacing = aw as f64 / n_traces as f64;
            let step = (3.0 / spacing).ceil().max(1.0) as usize;
            let gain = spacing * step as f64; // a clipped sample reaches the next drawn trace
            for tr in (0..n_traces).step_by(step) {
                let base = x0 as f64 + (tr as f64 + 0.5) * spacing;
                let mut prev: Option<(f64, usize)> = None;
                for py in 0..ah {
                    let a = sample(tr, row_sample(py)) as f64;
                    let x = base + a * gain;
                    let y = y0 + py;
                    if a > 0.0 {
                        for px in base.round() as i64..=x.round() as i64 {
                            put(&mut buf, px.max(0) as usize, y, [0, 0, 0]);
                        }
                    }
                    // The line: join this row's point to the previous one.
                    let (xa, xb) = match prev {
                        Some((xp, _)) => (xp.min(x), xp.max(x)),
                        None => (x, x),
                    };
                    for px in xa.round() as i64..=xb.round() as i64 {
                        put(&mut buf, px.max(0) as usize, y, [0, 0, 0]);
                    }
                    prev = Some((x, y));
                }
            }
        }
    }

    // Pass 3: frame, ticks, labels and title on top.
    {
        let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
        let mut chart = chart_builder(&root, title, left, bottom, top, right)
            .build_cartesian_2d(x_range, -t_end..-t_start)
            .map_err(|e| anyhow::anyhow!("plot layout: {e}"))?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(axes.trace_label.as_str())
            .y_desc(axes.time_label.as_str())
            .y_label_formatter(&|v| format_tick(-*v))
            .x_label_formatter(&|v| format_tick(*v))
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .draw()
            .map_err(|e| anyhow::anyhow!("plot axes: {e}"))?;
        root.draw(&Text::new(format!("clip {:.3e} (p{})", clip, axes.clip_percentile), (w as i32 - 150, h as i32 - 16), ("sans-serif", 11)))
            .map_err(|e| anyhow::anyhow!("plot text: {e}"))?;
        root.present().map_err(|e| anyhow::anyhow!("plot: {e}"))?;
    }
    write_png(path, &buf, w, h)
}

fn chart_builder<'a, 'b>(root: &'a DrawingArea<BitMapBackend<'b>, plotters::coord::Shift>, title: &str, left: u32, bottom: u32,
    top: u32, right: u32) -> ChartBuilder<'a, 'b, BitMapBackend<'b>> {
    let mut b = ChartBuilder::on(root);
    b.caption(title, ("sans-serif", 18))
        .margin_top(top.saturating_sub(35))
        .margin_right(right)
        .margin_left(8)
        .x_label_area_size(bottom)
        .y_label_area_size(left);
    b
}

/// Tick labels without float noise (0.30000000000000004 -> 0.3).
fn format_tick(v: f64) -> String {
    let r = (v * 1e6).round() / 1e6;
    if r == r.trunc() { format!("{}", r as i64) } else { format!("{r}") }
}

/// Encodes an RGB buffer as PNG through a temporary file renamed into place.
pub fn write_png(path: &Path, rgb: &[u8], w: u32, h: u32) -> anyhow::Result<()> {
    let mut file = AtomicFile::create(path)?;
    {
        let mut enc = png::Encoder::new(&mut file, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc.write_header().with_context(|| format!("{}: PNG header", path.display()))?;
        wr.write_image_data(rgb).with_context(|| format!("{}: PNG data", path.display()))?;
        wr.finish().with_context(|| format!("{}: PNG", path.display()))?;
    }
    file.commit().with_context(|| format!("{}: cannot finish the file", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth;

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("seisgpu-plot-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    fn gather() -> crate::TraceSet {
        let mut t = crate::TraceSet::zeros(synth::geometry::line_2d(1, 25.0, 48, 25.0), 300, 0.004);
        synth::events::hyperbolic_reflection(&mut t, 0.4, 2000.0, 20.0, 1.0);
        synth::events::hyperbolic_reflection(&mut t, 0.8, 2500.0, 20.0, -0.7);
        t
    }

    #[test]
    fn writes_density_and_wiggle_pngs() {
        let t = gather();
        for style in [Style::Density, Style::Wiggle] {
            let p = tmp(&format!("{style:?}.png"));
            section_png(&p, &t.data, t.len(), t.ns, style, "test gather").unwrap();
            let bytes = std::fs::read(&p).unwrap();
            assert_eq!(&bytes[1..4], b"PNG");
            let dec = png::Decoder::new(std::io::Cursor::new(bytes));
            let mut r = dec.read_info().unwrap();
            let mut img = vec![0; r.output_buffer_size()];
            let info = r.next_frame(&mut img).unwrap();
            let (w, h) = (info.width, info.height);
            assert!(w >= 400 && h >= 400);
            // Both styles put dark or coloured pixels in the plot (not a blank image).
            let inked = img.chunks(3).filter(|c| c != &[255, 255, 255]).count();
            assert!(inked as u32 > w * h / 50, "{style:?}: {inked} inked pixels");
        }
    }

    #[test]
    fn clip_is_the_99th_percentile() {
        let mut v: Vec<f32> = (0..1000).map(|i| i as f32 / 10.0 - 50.0).collect();
        v[3] = 1e9; // one spike does not set the scale
        let c = clip_level(&v, 99.0);
        assert!((49.0..=50.0).contains(&c), "{c}");
        assert_eq!(clip_level(&[0.0; 10], 99.0), f32::MIN_POSITIVE);
    }

    #[test]
    fn bad_input_is_an_error() {
        let p = tmp("bad.png");
        assert!(section_png(&p, &[1.0; 10], 3, 4, Style::Density, "x").is_err());
        let e = section_png(&p, &[1.0, f32::NAN, 0.0, 0.0], 2, 2, Style::Density, "x").unwrap_err().to_string();
        assert!(e.contains("trace 0 sample 1"), "{e}");
    }
}
