//! Every command's result file, its format by extension: SEG-Y (`.sgy`, `.segy`), Seismic Unix
//! (`.su`) or NumPy (`.npy`). Two kinds of results:
//!
//! * traces in the input's geometry ([`write_traces`]: NMO-corrected gathers, NLBF-enhanced and
//!   KTM-modelled traces): the input's trace headers carried through, so a SEG-Y reader gets the
//!   coordinates, CDP, offset, inline/crossline, shot point and delay back;
//! * images and volumes on a regular grid ([`write_grid`]): one trace per bin and offset class,
//!   the bin centre in CDP X/Y (and source = group = bin centre), inline/crossline and CDP numbers,
//!   the class's offset in the offset field; a depth axis is stored as time with metres read as
//!   milliseconds (the 16-bit interval field holds no fractions of a metre), said in the textual
//!   header.
//!
//! [`prepare`] checks the path before a computation starts: a known extension, an existing folder
//! that can be written to, so a long run never ends in "cannot create".

use std::path::Path;

use anyhow::{bail, Context};

use super::segy::header::choose_scalar;
use super::segy::{write_segy, CoordinateScalar, SampleFormat, WriteOptions};
use crate::traces::{TraceHeader, TraceSet};

/// A result file's format, from its extension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    /// SEG-Y rev 2, IEEE float samples, big-endian (`.sgy`, `.segy`).
    Segy,
    /// Seismic Unix: trace headers and IEEE float samples, little-endian, no file header (`.su`).
    Su,
    /// NumPy float32 array (`.npy`).
    Npy,
}

/// The extensions [`OutputFormat::from_path`] accepts, for messages.
pub const EXTENSIONS: &str = ".sgy or .segy (SEG-Y), .su (Seismic Unix), .npy (NumPy)";

impl OutputFormat {
    /// The format of `path` by its extension (any case); an error naming the path otherwise.
    pub fn from_path(path: &Path) -> anyhow::Result<Self> {
        let ext = path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        Ok(match ext.as_deref() {
            Some("sgy") | Some("segy") => Self::Segy,
            Some("su") => Self::Su,
            Some("npy") => Self::Npy,
            Some(e) => crate::bail_param!("output", "{}: unknown output format `.{e}` (use {EXTENSIONS})", path.display()),
            None => crate::bail_param!("output", "{}: no extension to tell the output format (use {EXTENSIONS})", path.display()),
        })
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::Segy => "SEG-Y",
            Self::Su => "SU",
            Self::Npy => ".npy",
        }
    }
}

/// The format of `path`, after checking that its folder exists and can be written to (and that
/// `path` is not a folder): called before the computation, so a mistyped path fails at once.
pub fn prepare(path: &Path) -> anyhow::Result<OutputFormat> {
    let format = OutputFormat::from_path(path)?;
    check_writable(path)?;
    Ok(format)
}

/// Checks that a file can be created at `path`: its folder exists and takes a new file.
pub fn check_writable(path: &Path) -> anyhow::Result<()> {
    // File-system errors ([`crate::Error::Io`]: an OSError in Python), with the path in front.
    let io = |kind, why: String| crate::Error::Io { path: Some(path.to_path_buf()), source: std::io::Error::new(kind, why) };
    if path.is_dir() {
        return Err(io(std::io::ErrorKind::IsADirectory, "is a folder; give a file name".into()).into());
    }
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    if !dir.is_dir() {
        return Err(io(std::io::ErrorKind::NotFound, format!("folder {} does not exist", dir.display())).into());
    }
    probe(dir).with_context(|| format!("{}: cannot write into folder {}", path.display(), dir.display()))
}

/// Creates `dir` (and its parents) when missing and checks that files can be written into it.
pub fn prepare_dir(dir: &Path) -> anyhow::Result<()> {
    if dir.exists() && !dir.is_dir() {
        crate::bail_param!("output", "{}: exists and is not a folder", dir.display());
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create output folder {}", dir.display()))?;
    probe(dir).with_context(|| format!("cannot write into output folder {}", dir.display()))
}

/// Creates and removes a file in `dir`: the one check that answers for permissions, read-only
/// mounts and quotas alike.
fn probe(dir: &Path) -> std::io::Result<()> {
    let p = dir.join(format!(".seisgpu-probe-{}", std::process::id()));
    std::fs::File::create(&p)?;
    std::fs::remove_file(&p)
}

/// The write options of every SEG-Y result: IEEE floats (exact), a coordinate scalar fixed over
/// all `headers` (so any block of traces encodes as it does in the whole file), `text` lines.
pub fn segy_options(headers: &[TraceHeader], text: Option<String>) -> WriteOptions {
    let coords = headers.iter().flat_map(super::segy::header_coordinates);
    WriteOptions {
        format: SampleFormat::IeeeFloat,
        text,
        coordinate_scalar: choose_scalar(coords).map_or(CoordinateScalar::Auto, CoordinateScalar::Fixed),
        ..Default::default()
    }
}

/// Writes traces with their headers (the input's geometry): SEG-Y, SU, or .npy of shape
/// (traces, samples). `what` is a line for the SEG-Y textual header.
pub fn write_traces(path: &Path, set: &TraceSet, what: &str) -> anyhow::Result<()> {
    match OutputFormat::from_path(path)? {
        OutputFormat::Segy => {
            let text = format!("{what}\n{} traces, {} samples at {} ms, first sample at {} ms\n\
                trace headers from the input: source/group X/Y 73-88 (scalar 71),\n\
                CDP 21 and its X/Y 181/185, offset 37, inline 189, crossline 193,\n\
                field record 9, channel 13, shot point 197 (scalar 201), delay 109",
                set.len(), set.ns, set.dt * 1e3, set.t0 * 1e3);
            write_segy(path, set, &segy_options(&set.headers, Some(text))).with_context(|| format!("writing {}", path.display()))
        }
        OutputFormat::Su => super::su::write_su(path, set).with_context(|| format!("writing {}", path.display())),
        OutputFormat::Npy => super::npy::write_npy(path, &set.data, &[set.len() as u64, set.ns as u64]),
    }
}

/// The order of an image's traces in its data (slowest index first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TraceOrder {
    /// Offset class, then x, then y (KTM images, volumes).
    ClassXY,
    /// x, then y, then offset class (PSTM images).
    XYClass,
    /// Offset class, then y, then x (NLBF parameter volumes, SRM images).
    ClassYX,
}

/// What the samples of a grid's traces are.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SampleAxis {
    /// Time (s): `n` samples of `step` from `first`.
    Time { n: usize, step: f32, first: f32 },
    /// Depth (m): written as time with metres read as milliseconds.
    Depth { n: usize, step: f64, first: f64 },
}

impl SampleAxis {
    pub fn len(&self) -> usize {
        match *self {
            Self::Time { n, .. } | Self::Depth { n, .. } => n,
        }
    }
    pub fn is_empty(&self) -> bool { self.len() == 0 }
    /// The interval and first-sample time the file carries (s).
    pub fn file_sampling(&self) -> (f32, f32) {
        match *self {
            Self::Time { step, first, .. } => (step, first),
            Self::Depth { step, first, .. } => ((step * 1e-3) as f32, (first * 1e-3) as f32),
        }
    }
    fn describe(&self) -> String {
        match *self {
            Self::Time { n, step, first } => format!("time axis: {n} samples at {} ms from {} ms", step * 1e3, first * 1e3),
            Self::Depth { n, step, first } => format!("DEPTH axis: {n} samples at {step} m from {first} m, as time: 1 ms = 1 m"),
        }
    }
}

/// A regular grid of bins (and offset classes) whose traces make an image or a volume.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    pub nx: usize,
    pub ny: usize,
    /// Centre of bin (0, 0) and the bin spacing (m).
    pub x0: f64,
    pub y0: f64,
    pub dx: f64,
    pub dy: f64,
    /// The offset classes' centre offsets (m); empty for an image without classes.
    pub class_offsets: Vec<f64>,
    pub order: TraceOrder,
    /// Inline numbers count y bins (and crosslines x bins) instead of the other way round.
    pub inline_along_y: bool,
}

impl Grid {
    pub fn classes(&self) -> usize { self.class_offsets.len().max(1) }
    /// Traces of the image: bins times classes.
    pub fn traces(&self) -> usize { self.nx * self.ny * self.classes() }

    /// Every trace's header, in the data's order: bin centre as source, group and CDP position,
    /// inline/crossline numbers from 1, CDP = the bin's running number from 1 (x-major, or y-major
    /// with `inline_along_y`), offset = the class's centre.
    pub fn headers(&self) -> Vec<TraceHeader> {
        let (nx, ny, nc) = (self.nx, self.ny, self.classes());
        let mut out = Vec::with_capacity(self.traces());
        let mut push = |ix: usize, iy: usize, c: usize| {
            let (x, y) = (self.x0 + ix as f64 * self.dx, self.y0 + iy as f64 * self.dy);
            let (il, xl, bin) = if self.inline_along_y { (iy, ix, iy * nx + ix) } else { (ix, iy, ix * ny + iy) };
            out.push(TraceHeader {
                sx: x, sy: y, gx: x, gy: y,
                offset: self.class_offsets.get(c).copied().unwrap_or(0.0),
                cdp: bin as i32 + 1,
                inline: il as i32 + 1,
                crossline: xl as i32 + 1,
                ..Default::default()
            });
        };
        match self.order {
            TraceOrder::ClassXY => (0..nc).for_each(|c| (0..nx).for_each(|ix| (0..ny).for_each(|iy| push(ix, iy, c)))),
            TraceOrder::XYClass => (0..nx).for_each(|ix| (0..ny).for_each(|iy| (0..nc).for_each(|c| push(ix, iy, c)))),
            TraceOrder::ClassYX => (0..nc).for_each(|c| (0..ny).for_each(|iy| (0..nx).for_each(|ix| push(ix, iy, c)))),
        }
        out
    }
}

/// An image or volume to write: trace-major `data` (each trace `axis.len()` samples, the traces
/// in `grid.order`), `npy_shape` the .npy shape of that same memory.
pub struct GridImage<'a> {
    /// One line naming the result for the textual header (e.g. "seisgpu ktm: migrated image").
    pub title: String,
    pub grid: &'a Grid,
    pub axis: SampleAxis,
    pub data: &'a [f32],
    pub npy_shape: Vec<usize>,
}

impl GridImage<'_> {
    /// The SEG-Y layout: every trace's header, the write options (with the textual header) and
    /// the file's interval and first-sample time (s); for writers of blocks of the file (MPI).
    pub fn segy_layout(&self) -> (Vec<TraceHeader>, WriteOptions, f32, f32) {
        let g = self.grid;
        let headers = g.headers();
        let order = match g.order {
            TraceOrder::ClassXY => "class, then x, then y",
            TraceOrder::XYClass => "x, then y, then class",
            TraceOrder::ClassYX => "class, then y, then x",
        };
        let (il, xl) = if g.inline_along_y { ("y", "x") } else { ("x", "y") };
        let text = format!("{}\n{}\nx bins: {} from {} m by {} m\ny bins: {} from {} m by {} m\n\
            bin centre in CDP X/Y 181/185 and source = group X/Y 73-88\n\
            inline 189 = {il} bin + 1, crossline 193 = {xl} bin + 1, CDP 21 = bin + 1\n\
            {} offset class(es), offset 37 = class centre (m)\ntrace order: {order}",
            self.title, self.axis.describe(), g.nx, g.x0, g.dx, g.ny, g.y0, g.dy, g.classes());
        let opts = segy_options(&headers, Some(text));
        let (dt, t0) = self.axis.file_sampling();
        (headers, opts, dt, t0)
    }

    fn check(&self, path: &Path) -> anyhow::Result<()> {
        let n = self.grid.traces() * self.axis.len();
        if self.data.len() != n || self.npy_shape.iter().product::<usize>() != n {
            bail!("{}: {} samples for {} traces of {} (.npy shape {:?})", path.display(), self.data.len(), self.grid.traces(),
                self.axis.len(), self.npy_shape);
        }
        Ok(())
    }
}

/// Writes an image or volume as SEG-Y, SU or .npy (by `path`'s extension).
pub fn write_grid(path: &Path, img: &GridImage) -> anyhow::Result<()> {
    img.check(path)?;
    let format = OutputFormat::from_path(path)?;
    if format == OutputFormat::Npy {
        let shape: Vec<u64> = img.npy_shape.iter().map(|&d| d as u64).collect();
        super::npy::write_npy(path, img.data, &shape)?;
        // The axes' names and spacing beside the array, for plots and Python users.
        return match super::sidecar::of_grid(img) {
            Some(meta) => meta.write(path),
            None => Ok(()),
        };
    }
    let (headers, opts, dt, t0) = img.segy_layout();
    let set = TraceSet { headers, data: img.data.to_vec().into(), ns: img.axis.len(), dt, t0 };
    let r = match format {
        OutputFormat::Segy => write_segy(path, &set, &opts).map_err(anyhow::Error::from),
        _ => super::su::write_su(path, &set).map_err(anyhow::Error::from),
    };
    r.with_context(|| format!("writing {}", path.display()))
}

/// Trace-major data (bins y-major, x fastest; samples fastest) from a (samples, ny, nx) array:
/// the SEG-Y traces of a depth cube held z-slowest.
pub fn traces_from_slices(data: &[f32], n: usize, ny: usize, nx: usize) -> Vec<f32> {
    let mut out = vec![0.0f32; data.len()];
    for (k, slice) in data.chunks(ny * nx).enumerate().take(n) {
        for (b, &v) in slice.iter().enumerate() {
            out[b * n + k] = v;
        }
    }
    out
}

#[cfg(test)]
#[path = "output_tests.rs"]
mod tests;
