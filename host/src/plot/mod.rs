//! PNG images of sections, gathers, slices and panels: variable density (colour bar beside) or
//! wiggle traces with filled positive lobes, time or depth down, traces across, physical axes,
//! a title that says what is shown and a second line that says the gain.
//!
//! [`render`] draws a panel; [`npy`] and [`segy`] cut panels out of what the commands write (2-D
//! to 4-D .npy arrays with their [`crate::io::sidecar`], SEG-Y and Seismic Unix files); [`gain`]
//! holds AGC and clipping, [`colour`] the colour maps.

use std::path::Path;

pub mod colour;
pub mod gain;
pub mod npy;
pub mod render;
pub mod segy;

pub use colour::Colormap;
pub use gain::{agc, clip_level, Clip};
pub use render::{render_png, write_png};

/// Registers the compiled-in DejaVu font for plotters' text (no system fonts needed).
pub fn register_fonts() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font("sans-serif", plotters::style::FontStyle::Normal, dejavu::sans::regular());
    });
}

/// How traces are drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Style {
    /// Variable density through a colour map, with a colour bar.
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
    /// Time (or depth) of sample 0 and the sample interval, in the unit named in `time_label`
    /// (e.g. "time (ms)", "depth (m)").
    pub t0: f64,
    pub dt: f64,
    pub time_label: String,
    /// Coordinate of trace 0, the step between plotted traces' coordinates (e.g. a spacing in m,
    /// or a decimation) and the label of the horizontal axis.
    pub first_trace: f64,
    pub trace_step: f64,
    pub trace_label: String,
    /// A header value for each plotted trace (offsets, CDPs, ...): ticks sit at trace positions
    /// and show these values, which need not be uniform. Replaces first_trace/trace_step.
    pub trace_values: Option<Vec<f64>>,
}

impl Default for Axes {
    fn default() -> Self {
        Axes { t0: 0.0, dt: 1.0, time_label: "sample".into(), first_trace: 0.0, trace_step: 1.0, trace_label: "trace".into(), trace_values: None }
    }
}

impl Axes {
    /// Traces numbered from 0, time in ms from `t0` and `dt` in seconds.
    pub fn time_s(t0: f64, dt: f64) -> Self { Axes { t0: t0 * 1e3, dt: dt * 1e3, time_label: "time (ms)".into(), ..Default::default() } }
    /// Traces numbered from 0, depth in m.
    pub fn depth_m(z0: f64, dz: f64) -> Self { Axes { t0: z0, dt: dz, time_label: "depth (m)".into(), ..Default::default() } }
    /// The horizontal axis: coordinate of trace 0, spacing, label.
    pub fn traces(mut self, first: f64, step: f64, label: &str) -> Self {
        self.first_trace = first;
        self.trace_step = step;
        self.trace_label = label.into();
        self
    }
    /// The unit of the vertical axis (the part of its label in parentheses), "samples" if none.
    pub fn time_unit(&self) -> &str {
        match (self.time_label.find('('), self.time_label.rfind(')')) {
            (Some(a), Some(b)) if b > a + 1 => &self.time_label[a + 1..b],
            _ => "samples",
        }
    }
}

/// How amplitudes become pixels.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Look {
    pub style: Style,
    /// Colour map [default: seismic for signed data, viridis for non-negative data].
    pub colormap: Option<Colormap>,
    pub clip: Clip,
    /// AGC window in the unit of the vertical axis (ms for time), if any.
    pub agc: Option<f64>,
}

/// Writes `data` (trace-major: trace i is `data[i * n_samples..(i + 1) * n_samples]`, time down)
/// as a PNG at `path` in the default look (density, clip at p99), axes in indices.
pub fn section_png(path: &Path, data: &[f32], n_traces: usize, n_samples: usize, style: Style, title: &str) -> anyhow::Result<()> {
    render_png(path, data, n_traces, n_samples, title, &Axes::default(), &Look { style, ..Default::default() })
}

/// The same as [`section_png`] with axes in physical units, in the default look.
pub fn section_png_with(path: &Path, data: &[f32], n_traces: usize, n_samples: usize, title: &str, axes: &Axes) -> anyhow::Result<()> {
    render_png(path, data, n_traces, n_samples, title, axes, &Look::default())
}

/// Tick labels without float noise (0.30000000000000004 -> 0.3).
pub fn format_tick(v: f64) -> String {
    let r = (v * 1e6).round() / 1e6;
    if r == r.trunc() && r.abs() < 1e15 { format!("{}", r as i64) } else { format!("{r}") }
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

    fn decode(p: &std::path::Path) -> (Vec<u8>, u32, u32) {
        let dec = png::Decoder::new(std::io::Cursor::new(std::fs::read(p).unwrap()));
        let mut r = dec.read_info().unwrap();
        let mut img = vec![0; r.output_buffer_size()];
        let info = r.next_frame(&mut img).unwrap();
        (img, info.width, info.height)
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
    fn bad_input_is_an_error() {
        let p = tmp("bad.png");
        assert!(section_png(&p, &[1.0; 10], 3, 4, Style::Density, "x").is_err());
        let e = section_png(&p, &[1.0, f32::NAN, 0.0, 0.0], 2, 2, Style::Density, "x").unwrap_err().to_string();
        assert!(e.contains("trace 0 sample 1"), "{e}");
    }

    #[test]
    fn axes_that_cannot_be_ticked_are_errors_not_hangs() {
        let p = tmp("axes.png");
        let data = [1.0f32, -1.0, 0.5, 0.0];
        for (t0, dt) in [(0.0, f64::INFINITY), (0.0, f64::NAN), (f64::NAN, 4.0), (f64::INFINITY, 4.0), (1e20, 1.0), (0.0, 0.0), (0.0, -4.0)] {
            let axes = Axes { t0, dt, ..Axes::time_s(0.0, 0.004) };
            let e = section_png_with(&p, &data, 2, 2, "x", &axes).unwrap_err().to_string();
            assert!(e.contains("axis") || e.contains("interval"), "t0 {t0} dt {dt}: {e}");
        }
        let axes = Axes::default().traces(f64::NEG_INFINITY, 1.0, "offset");
        assert!(section_png_with(&p, &data, 2, 2, "x", &axes).is_err());
        let axes = Axes { trace_values: Some(vec![1.0]), ..Axes::default() };
        assert!(section_png_with(&p, &data, 2, 2, "x", &axes).unwrap_err().to_string().contains("1 trace labels for 2"));
        let look = Look { clip: Clip::Percentile(0.0), ..Default::default() };
        assert!(render_png(&p, &data, 2, 2, "x", &Axes::default(), &look).is_err());
        let look = Look { agc: Some(f64::NAN), ..Default::default() };
        assert!(render_png(&p, &data, 2, 2, "x", &Axes::default(), &look).is_err());
    }

    #[test]
    fn the_colour_bar_is_drawn_right_of_the_section() {
        let t = gather();
        let p = tmp("bar.png");
        let axes = Axes { trace_values: Some(t.headers.iter().map(|h| h.offset).collect()), ..Axes::time_s(0.0, t.dt as f64) };
        let look = Look { colormap: Some(Colormap::Gray), agc: Some(200.0), ..Default::default() };
        render_png(&p, &t.data, t.len(), t.ns, "gather", &axes, &look).unwrap();
        let (img, w, h) = decode(&p);
        // A column right of the plot area runs from black (+clip) at the top to white at the bottom.
        let bar_col = (w - 110 + 16 + render::BAR_WIDTH / 2) as usize;
        let grey = |y: usize| img[(y * w as usize + bar_col) * 3] as i32;
        let (top, bottom) = (grey(80), grey(h as usize - 70));
        assert!(top < 40 && bottom > 215, "bar: top {top} bottom {bottom}");
    }
}
