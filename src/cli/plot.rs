//! `seisgpu plot`: a PNG of what any command writes: SEG-Y and Seismic Unix traces, .npy sections,
//! volumes (by inline, crossline or time slice) and 4-D images (one class, or their sum).

use std::path::PathBuf;

use seisgpu_host::plot::npy::{npy_panel, Selection};
use seisgpu_host::plot::segy::{segy_panel, Key, TraceRange};
use seisgpu_host::plot::{render_png, Clip, Colormap, Look, Style};

use super::Global;

/// Most traces (and samples) of a .npy panel; more are decimated evenly (a PNG is at most 1600
/// pixels wide, 1000 high).
const NPY_MAX_TRACES: usize = 4000;
const NPY_MAX_SAMPLES: usize = 4000;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  seisgpu plot line.sgy -o line.png --agc 500\n  seisgpu plot xs.sgy -o gather.png --first 128 --count 64 --style wiggle --key offset\n  \
    seisgpu plot nlbf-out/S.npy -o semblance.png --crossline 10\n  seisgpu plot ktm-image.npy -o inline.png --inline 40 --class 0\n  \
    seisgpu plot srm-image.npy -o depth.png --layout depth,y,x\n\n\
    .npy arrays: the last axis is time (samples) unless the array's sidecar (<file>.json, with each axis's name, unit, origin and step) \
    or --layout says otherwise. 3-D arrays are (n1, n2, samples) and 4-D ones (classes, nx, ny, samples) by default.")]
pub struct Args {
    /// File to plot: SEG-Y (.sgy, .segy), Seismic Unix (.su) or .npy (2-D to 4-D float32/float64).
    pub input: PathBuf,
    /// Output PNG (written to a temporary file, then renamed).
    #[arg(short, long)]
    pub out: PathBuf,
    /// `density` (variable density with a colour bar) or `wiggle` (wiggle traces, positive lobes
    /// filled).
    #[arg(long, default_value = "density")]
    pub style: Style,
    /// Colour map for density plots: `seismic` (blue-white-red), `gray` (positive black) or
    /// `viridis` [default: seismic for signed data, viridis for non-negative data such as semblance].
    #[arg(long)]
    pub colormap: Option<Colormap>,
    /// Automatic gain control: window length in ms (in m for a depth axis, in samples where the
    /// vertical axis is in samples).
    #[arg(long, value_name = "MS")]
    pub agc: Option<f64>,
    /// Percentile (percent, 0-100] of |amplitude| at which the colours (wiggles) saturate.
    #[arg(long, default_value_t = 99.0, conflicts_with = "clip")]
    pub clip_percentile: f64,
    /// Amplitude (in the data's units, after AGC) at which the colours (wiggles) saturate, instead
    /// of a percentile.
    #[arg(long, value_name = "VALUE")]
    pub clip: Option<f32>,
    /// Title [default: the file name, what is shown; the gain is always on the line below].
    #[arg(long)]
    pub title: Option<String>,

    /// SEG-Y/SU: first trace to plot (0-based index in the file).
    #[arg(long, default_value_t = 0, help_heading = "SEG-Y and SU")]
    pub first: u64,
    /// SEG-Y/SU: number of traces to plot [default: the rest of the file, at most 5000 plotted].
    #[arg(long, help_heading = "SEG-Y and SU")]
    pub count: Option<u64>,
    /// SEG-Y/SU: plot every k-th trace of the range (decimation for long files).
    #[arg(long, default_value_t = 1, help_heading = "SEG-Y and SU")]
    pub every: u64,
    /// SEG-Y/SU: trace-header value labelling the horizontal axis: offset (m), cdp, channel, ffid,
    /// inline, crossline or trace (index) [default: offset for a gather, cdp for a stack, the
    /// other line number for an inline or crossline, else trace].
    #[arg(long, help_heading = "SEG-Y and SU")]
    pub key: Option<Key>,
    /// SEG-Y/SU: the samples are depth (m; the sample-interval field in mm) although the textual
    /// header does not say so.
    #[arg(long, help_heading = "SEG-Y and SU")]
    pub depth: bool,

    /// .npy volumes: section at this index along the first horizontal axis (default: the middle one).
    #[arg(long, value_name = "K", help_heading = ".npy arrays")]
    pub inline: Option<usize>,
    /// .npy volumes: section at this index along the second horizontal axis.
    #[arg(long, value_name = "K", help_heading = ".npy arrays")]
    pub crossline: Option<usize>,
    /// .npy volumes: map view at this time (ms; m for a depth axis; nearest sample).
    #[arg(long, value_name = "MS", help_heading = ".npy arrays")]
    pub time_slice: Option<f64>,
    /// .npy volumes: map view at this sample index of the time (depth) axis.
    #[arg(long, value_name = "K", help_heading = ".npy arrays")]
    pub sample: Option<usize>,
    /// .npy 4-D images (ktm migrate: classes, nx, ny, ntau): plot this class [default: the sum of
    /// all classes].
    #[arg(long, value_name = "K", help_heading = ".npy arrays")]
    pub class: Option<usize>,
    /// .npy: names of the array's axes in order, comma-separated, where the shape is ambiguous:
    /// time, depth or sample for the vertical axis, class or offset for the axis a 4-D image is
    /// summed over, any other word for a horizontal axis (e.g. `depth,y,x` for srm images,
    /// `x,y,offset,time` for pstm images).
    #[arg(long, alias = "axes", value_name = "NAMES", help_heading = ".npy arrays")]
    pub layout: Option<String>,
}

pub fn run(args: &Args, _global: &Global) -> anyhow::Result<()> {
    let ext = args.input.extension().map(|e| e.to_string_lossy().to_lowercase()).unwrap_or_default();
    let npy_only = args.inline.is_some() || args.crossline.is_some() || args.time_slice.is_some() || args.sample.is_some() || args.class.is_some()
        || args.layout.is_some();
    let segy_only = args.first != 0 || args.count.is_some() || args.every != 1 || args.key.is_some() || args.depth;
    let panel = match ext.as_str() {
        "npy" => {
            if segy_only {
                seisgpu_host::bail_param!("first", "{}: --first/--count/--every/--key/--depth apply to SEG-Y and SU files", args.input.display());
            }
            let sel = Selection { inline: args.inline, crossline: args.crossline, time_slice: args.time_slice, sample: args.sample, class: args.class };
            if let Some(t) = args.time_slice.filter(|t| !t.is_finite()) {
                seisgpu_host::bail_param!("time-slice", "--time-slice {t} is not a finite time");
            }
            npy_panel(&args.input, args.layout.as_deref(), &sel, NPY_MAX_TRACES, NPY_MAX_SAMPLES)?
        }
        "sgy" | "segy" | "su" => {
            if npy_only {
                seisgpu_host::bail_param!("inline", "{}: --inline/--crossline/--time-slice/--sample/--class/--layout apply to .npy arrays", args.input.display());
            }
            let range = TraceRange { first: args.first, count: args.count, every: args.every, ..Default::default() };
            segy_panel(&args.input, &range, args.key, args.depth)?
        }
        _ => seisgpu_host::bail_param!("input", "{}: unknown file type (expected .sgy, .segy, .su or .npy)", args.input.display()),
    };
    let clip = match args.clip {
        Some(v) => Clip::Value(v),
        None => Clip::Percentile(args.clip_percentile),
    };
    let look = Look { style: args.style, colormap: args.colormap, clip, agc: args.agc };
    let title = args.title.clone().unwrap_or_else(|| panel.what.clone());
    render_png(&args.out, &panel.data, panel.n_traces, panel.n_samples, &title, &panel.axes, &look)?;
    eprintln!("seisgpu plot: wrote {} ({}; {} traces x {} samples, {:?})", args.out.display(), panel.what, panel.n_traces, panel.n_samples, args.style);
    Ok(())
}

impl super::Subcommand for Args {
    fn run(&self, global: &super::Global) -> anyhow::Result<()> { run(self, global) }
    fn path(&self) -> String { "plot".to_string() }
}
