//! Rasterising a panel (traces across, time or depth down) into an RGB buffer, with axes, title,
//! gain note and colour bar, encoded as PNG.
//!
//! The traces are rasterised by hand (one pass, no per-pixel backend calls); plotters draws the
//! frame, ticks and labels on top with the compiled-in DejaVu font (no system fontconfig needed).

use std::path::Path;

use anyhow::{bail, Context};
use plotters::prelude::*;
use plotters::style::text_anchor;

use super::gain::{agc, format_amplitude};
use super::{Axes, Colormap, Look, Style};
use crate::io::AtomicFile;

/// Plot-area size for a section: about 1.5 px per sample and 2..8 px per trace, bounded.
fn plot_size(n_traces: usize, n_samples: usize, style: Style) -> (u32, u32) {
    let per_trace = if style == Style::Wiggle { 8 } else { 4 };
    let w = n_traces.saturating_mul(per_trace).clamp(500, 1600) as u32;
    let h = ((n_samples as f64 * 1.5) as usize).clamp(400, 1000) as u32;
    (w, h)
}

/// Width of the colour bar strip and the margin that holds it and its labels (pixels).
pub const BAR_WIDTH: u32 = 18;
const BAR_MARGIN: u32 = 110;

/// Checks an axis's coordinates can be ticked: finite, increasing, and a span the f64 coordinates
/// resolve (plotters' tick search does not end on an infinite or empty range).
fn check_range(what: &str, start: f64, end: f64) -> anyhow::Result<()> {
    if !(start.is_finite() && end.is_finite() && start.abs() < 1e15 && end.abs() < 1e15) {
        crate::bail_input!("plot axes: the {what} axis runs {start}..{end}: not finite or out of range");
    }
    if !(end - start > 1e-9 * start.abs().max(end.abs())) || end <= start {
        crate::bail_input!("plot axes: the {what} axis runs {start}..{end}: empty at f64 precision");
    }
    Ok(())
}

/// Writes the panel `data` (trace-major: trace i is `data[i * n_samples..(i + 1) * n_samples]`,
/// drawn top to bottom) as a PNG at `path`. The title's second line says the gain and clip.
pub fn render_png(path: &Path, data: &[f32], n_traces: usize, n_samples: usize, title: &str, axes: &Axes, look: &Look) -> anyhow::Result<()> {
    if n_traces == 0 || n_samples == 0 {
        crate::bail_input!("{}: nothing to plot ({n_traces} traces of {n_samples} samples)", path.display());
    }
    if n_traces.checked_mul(n_samples) != Some(data.len()) {
        bail!("{}: {} values for {n_traces} traces of {n_samples} samples", path.display(), data.len());
    }
    if let Some(i) = data.iter().position(|v| !v.is_finite()) {
        crate::bail_input!("{}: trace {} sample {} is not finite ({}); refusing to plot", path.display(), i / n_samples, i % n_samples, data[i]);
    }
    if !(axes.trace_step > 0.0 && axes.dt > 0.0 && axes.trace_step.is_finite() && axes.dt.is_finite()) {
        crate::bail_input!("plot axes: trace step {} and sample interval {} must be positive and finite", axes.trace_step, axes.dt);
    }
    if let Some(v) = &axes.trace_values {
        if v.len() != n_traces {
            bail!("plot axes: {} trace labels for {n_traces} traces", v.len());
        }
    }
    look.clip.validate()?;
    // Traces span [first - step/2, last + step/2] horizontally (trace positions 0..n when each
    // trace is labelled by its own header value), samples [t0 - dt/2, t_end + dt/2].
    let x_range = match axes.trace_values {
        Some(_) => -0.5..(n_traces as f64 - 0.5),
        None => (axes.first_trace - 0.5 * axes.trace_step)..(axes.first_trace + (n_traces as f64 - 0.5) * axes.trace_step),
    };
    let t_start = axes.t0 - 0.5 * axes.dt;
    let t_end = axes.t0 + (n_samples as f64 - 0.5) * axes.dt;
    check_range(&axes.trace_label, x_range.start, x_range.end)?;
    check_range(&axes.time_label, t_start, t_end)?;

    let mut gained;
    let mut data = data;
    let mut gain_note = Vec::new();
    if let Some(win) = look.agc {
        if !(win > 0.0 && win.is_finite()) {
            crate::bail_param!("agc", "AGC window {win} must be positive and finite");
        }
        gained = data.to_vec();
        agc(&mut gained, n_samples, (win / axes.dt).round().max(1.0).min(n_samples as f64) as usize);
        data = &gained;
        gain_note.push(format!("AGC {} {}", super::format_tick(win), axes.time_unit()));
    }
    let signed = data.iter().any(|v| *v < 0.0);
    let clip = look.clip.level(data);
    gain_note.push(look.clip.describe(clip));
    let cmap = look.colormap.unwrap_or_else(|| Colormap::default_for(signed));
    if look.style == Style::Density {
        gain_note.push(format!("{cmap:?}").to_lowercase());
    }

    let (pw, ph) = plot_size(n_traces, n_samples, look.style);
    let bar = look.style == Style::Density;
    let (left, right, top, bottom) = (80u32, if bar { BAR_MARGIN } else { 30 }, 62u32, 55u32);
    let (w, h) = (pw + left + right, ph + top + bottom);
    let mut buf = vec![255u8; (w as usize) * (h as usize) * 3];
    super::register_fonts();

    // Pass 1: the plotting area's pixel rectangle for this layout.
    let (xr, yr) = {
        let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
        let chart = chart_builder(&root, left, bottom, top, right)
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
    // Amplitude of trace `tr` at fractional sample `s` (linear interpolation), over the clip.
    let sample = |tr: usize, s: f64| -> f32 {
        let s = s.clamp(0.0, (n_samples - 1) as f64);
        let i = (s.floor() as usize).min(n_samples - 1);
        let f = (s - i as f64) as f32;
        let a = data[tr * n_samples + i];
        let b = data[tr * n_samples + (i + 1).min(n_samples - 1)];
        (a + f * (b - a)) / clip
    };
    let to_u = |v: f32| if signed { 0.5 + 0.5 * v } else { v };
    let row_sample = |py: usize| (py as f64 + 0.5) / ah as f64 * n_samples as f64 - 0.5;
    match look.style {
        Style::Density => {
            for py in 0..ah {
                let s = row_sample(py);
                for px in 0..aw {
                    let tr = ((px as f64 + 0.5) / aw as f64 * n_traces as f64) as usize;
                    put(&mut buf, x0 + px, y0 + py, cmap.rgb(to_u(sample(tr.min(n_traces - 1), s)), signed));
                }
            }
            // The colour bar: the top is +clip, the bottom -clip (0 for non-negative data).
            let bx = x0 + aw + 16;
            for py in 0..ah {
                let u = 1.0 - (py as f32 + 0.5) / ah as f32;
                for px in 0..BAR_WIDTH as usize {
                    put(&mut buf, bx + px, y0 + py, cmap.rgb(u, signed));
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
                let mut prev: Option<f64> = None;
                for py in 0..ah {
                    let a = sample(tr, row_sample(py)).clamp(-1.0, 1.0) as f64;
                    let x = base + a * gain;
                    let y = y0 + py;
                    if a > 0.0 {
                        for px in base.round() as i64..=x.round() as i64 {
                            put(&mut buf, px.max(0) as usize, y, [0, 0, 0]);
                        }
                    }
                    // The line: join this row's point to the previous one.
                    let (xa, xb) = match prev {
                        Some(xp) => (xp.min(x), xp.max(x)),
                        None => (x, x),
                    };
                    for px in xa.round() as i64..=xb.round() as i64 {
                        put(&mut buf, px.max(0) as usize, y, [0, 0, 0]);
                    }
                    prev = Some(x);
                }
            }
        }
    }

    // Pass 3: frame, ticks, labels, title and colour-bar labels on top.
    {
        let root = BitMapBackend::with_buffer(&mut buf, (w, h)).into_drawing_area();
        let err = |e: DrawingAreaErrorKind<_>| anyhow::anyhow!("plot text: {e}");
        let mut chart = chart_builder(&root, left, bottom, top, right)
            .build_cartesian_2d(x_range, -t_end..-t_start)
            .map_err(|e| anyhow::anyhow!("plot layout: {e}"))?;
        let values = axes.trace_values.as_deref();
        let x_label = |v: &f64| match values {
            // Ticks at trace positions carry that trace's header value; others stay blank.
            Some(vals) => {
                let i = v.round();
                if (v - i).abs() < 1e-6 && i >= 0.0 && (i as usize) < vals.len() { super::format_tick(vals[i as usize]) } else { String::new() }
            }
            None => super::format_tick(*v),
        };
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc(axes.trace_label.as_str())
            .y_desc(axes.time_label.as_str())
            .y_label_formatter(&|v| super::format_tick(-*v))
            .x_label_formatter(&x_label)
            .label_style(("sans-serif", 13))
            .axis_desc_style(("sans-serif", 14))
            .draw()
            .map_err(|e| anyhow::anyhow!("plot axes: {e}"))?;
        let centred = |size: u32| TextStyle::from(("sans-serif", size).into_font()).pos(text_anchor::Pos::new(text_anchor::HPos::Center, text_anchor::VPos::Top));
        // Centred over the image; long titles get a smaller font (DejaVu Sans averages ~0.55 em per character).
        let mid = (w / 2) as i32;
        let size = (((w - 16) as f64 / (0.56 * title.chars().count().max(1) as f64)).floor() as u32).clamp(10, 18);
        root.draw(&Text::new(title.to_string(), (mid, 6), centred(size))).map_err(err)?;
        root.draw(&Text::new(gain_note.join(", "), (mid, 30), centred(12).color(&RGBColor(70, 70, 70)))).map_err(err)?;
        if bar {
            let bx = (x0 + aw + 16) as i32;
            let (top_v, bot_v) = (clip as f64, if signed { -(clip as f64) } else { 0.0 });
            root.draw(&Rectangle::new([(bx - 1, y0 as i32 - 1), (bx + BAR_WIDTH as i32, (y0 + ah) as i32)], BLACK.stroke_width(1))).map_err(err)?;
            let lx = bx + BAR_WIDTH as i32 + 4;
            for (frac, v) in [(0.0, top_v), (0.5, 0.5 * (top_v + bot_v)), (1.0, bot_v)] {
                let y = y0 as i32 + (frac * ah as f64) as i32;
                root.draw(&PathElement::new(vec![(bx + BAR_WIDTH as i32, y), (lx - 1, y)], BLACK)).map_err(err)?;
                root.draw(&Text::new(format_amplitude(v), (lx, y - 6), ("sans-serif", 11))).map_err(err)?;
            }
            root.draw(&Text::new("amplitude".to_string(), (bx - 8, y0 as i32 - 16), ("sans-serif", 11))).map_err(err)?;
        }
        root.present().map_err(|e| anyhow::anyhow!("plot: {e}"))?;
    }
    write_png(path, &buf, w, h)
}

fn chart_builder<'a, 'b>(root: &'a DrawingArea<BitMapBackend<'b>, plotters::coord::Shift>, left: u32, bottom: u32, top: u32,
    right: u32) -> ChartBuilder<'a, 'b, BitMapBackend<'b>> {
    let mut b = ChartBuilder::on(root);
    b.margin_top(top).margin_right(right).margin_left(8).x_label_area_size(bottom).y_label_area_size(left);
    b
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
