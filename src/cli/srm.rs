//! `seisgpu srm` (shot-record depth migration), `seisgpu srm design` (operator accuracy table),
//! `seisgpu srm bench` (this algorithm's benchmarks) and `seisgpu extrapolate` (one plane or an
//! impulse response through the Chebyshev operator).

use std::path::PathBuf;

use anyhow::Context;
use seisgpu_lab::bench::{BenchSize, Ceilings};
use seisgpu_host::srm::design::{DesignParams, FilterKind, Operator, Spacing};
use seisgpu_host::srm::impulse::compare_with_phase_shift;
use seisgpu_host::io::sidecar::{ArrayMeta, AxisMeta};
use seisgpu_host::io::npy;
use seisgpu_host::srm::{self, cpu, synthetic, GpuOptions, GpuVariant, SrmParams, Taper, VelocityModel};
use seisgpu_host::io::output::{self, Grid, GridImage, OutputFormat, SampleAxis, TraceOrder};
use seisgpu_host::traces::{TraceHeader, TraceSet};

use super::Global;

/// Operator design options shared by the subcommands.
#[derive(clap::Args, Debug, Clone)]
pub struct OperatorArgs {
    /// Chebyshev polynomial degree N (Laplacian applications per depth step; the paper uses ~15).
    #[arg(long, default_value_t = 15)]
    pub degree: usize,
    /// Design angle (degrees from vertical): the operator is fitted to exp(i kz dz) up to this
    /// propagation angle; steeper waves and evanescent ones are damped.
    #[arg(long, default_value_t = 60.0)]
    pub max_angle: f64,
    /// Second-derivative filter (radius 4): `optimised` (fit up to 0.7 Nyquist) or `taylor8`.
    #[arg(long, default_value = "optimised")]
    pub filter: FilterKind,
}

impl OperatorArgs {
    fn params(&self) -> DesignParams {
        DesignParams { degree: self.degree, max_angle_deg: self.max_angle, filter: self.filter }
    }
}

#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Args {
    #[command(subcommand)]
    pub command: Option<SrmCommand>,
    #[command(flatten)]
    pub migrate: MigrateArgs,
}

#[derive(clap::Subcommand, Debug)]
pub enum SrmCommand {
    /// Print the operator's accuracy (amplitude and phase error against exp(i kz dz)) by propagation
    /// angle, for the w dz / v range of a velocity range and frequency band.
    Design(DesignArgs),
    /// Run the srm benchmarks (srm-step, srm-shot): GPU variants against the all-core CPU reference.
    Bench(BenchArgs),
}

/// Migration: shots and a velocity model in, a depth image out.
#[derive(clap::Args, Debug)]
pub struct MigrateArgs {
    /// Interval velocity v(z) or v(x, y, z) (m/s), depth-domain: a constant with --nz; depth:velocity
    /// pairs (`depth:0:1500,800:2500`, m:m/s, linear in between, constant below the last); a text
    /// file of per-CMP functions in depth; a .npy grid with a JSON sidecar of x, y, z axes; these are
    /// sampled on a grid of --dx, --dy over the traces' extent plus --aperture, at --dz to --nz
    /// depths (default: the deepest knot). Or a model grid as it is: .npy float32/64 of shape
    /// (nz, ny, nx), or (nz, nx) for a 2D line, without sidecar (at --dx, --dy, --dz from --x0,
    /// --y0); or SEG-Y (.sgy/.segy), one trace per (inline, crossline) node with depth samples
    /// down the trace: crossline numbers run along x, inline numbers along y, the samples along
    /// depth at --dz (the file's sample interval is not used for depth). A time-domain model is an
    /// error.
    #[arg(long, value_name = "VELOCITY", required_unless_present = "synthetic")]
    pub velocity: Option<String>,
    /// Lateral grid spacings and depth step of the velocity model (m).
    #[arg(long, default_value_t = 25.0)]
    pub dx: f64,
    #[arg(long, default_value_t = 25.0)]
    pub dy: f64,
    #[arg(long, default_value_t = 10.0)]
    pub dz: f64,
    /// Position of the model's first node in the traces' coordinates (m), for a model grid file
    /// (other forms are laid over the traces).
    #[arg(long, default_value_t = 0.0)]
    pub x0: f64,
    #[arg(long, default_value_t = 0.0)]
    pub y0: f64,
    /// Shot gathers: SEG-Y (.sgy/.segy) or Seismic Unix (.su; source and receiver coordinates from
    /// the trace headers, scaled by scalco; sample interval from the file), or .npy of shape
    /// (traces, samples) with --geometry, sampled at --dt. Traces of one shot share a source position.
    #[arg(long, required_unless_present = "synthetic")]
    pub traces: Option<PathBuf>,
    /// Geometry for .npy traces, .npy of shape (traces, 4): source x, source y, receiver x,
    /// receiver y (m).
    #[arg(long)]
    pub geometry: Option<PathBuf>,
    /// How a SEG-Y or SU trace file is read (its `--dt` also gives the interval of .npy traces and
    /// built-in data: default 4 ms).
    #[command(flatten)]
    pub read: super::input::InputArgs,
    /// Built-in data instead of files: `flat` (one 3D shot over a flat reflector at 500 m under
    /// two layers) or `scatterer` (one 3D shot, point scatterer in 2000 m/s).
    #[arg(long)]
    pub synthetic: Option<String>,
    /// Frequency band migrated (Hz).
    #[arg(long, default_value_t = 5.0)]
    pub fmin: f64,
    #[arg(long, default_value_t = 40.0)]
    pub fmax: f64,
    /// Peak frequency of the zero-phase Ricker source wavelet (Hz).
    #[arg(long, default_value_t = 20.0)]
    pub ricker: f64,
    #[command(flatten)]
    pub operator: OperatorArgs,
    /// Absorbing edge taper: width (nodes) and strength (edge node scaled by exp(-strength^2) per step).
    #[arg(long, default_value_t = 20)]
    pub taper_width: usize,
    #[arg(long, default_value_t = 0.3)]
    pub taper_strength: f64,
    /// Migration aperture: extra width (m) around each shot's source and receivers.
    #[arg(long, default_value_t = 1000.0)]
    pub aperture: f64,
    /// Coefficient-table rows (0: about one per 0.01 of w dz / v).
    #[arg(long, default_value_t = 0)]
    pub table_rows: usize,
    /// Depth samples to image (0: the whole model).
    #[arg(long, default_value_t = 0)]
    pub nz: usize,
    /// GPU kernel: paper (the paper's, one Chebyshev step per launch), paperq56 (loads hoisted, one
    /// 16-byte coefficient load per lookup, 56 registers), cluster (all Chebyshev steps in one launch, the plane on chip in a thread-block
    /// cluster; compute capability 9.0+), clusterd (cluster's second generation: neighbour-only
    /// synchronisation, no spills; tables of <= 4096 rows), auto (time each on the shot's grid, keep the
    /// fastest), best (the default: clusterd where it runs, else cluster, else paperq56; the fastest
    /// measured on the H100).
    #[arg(long, default_value = "best")]
    pub kernel: GpuVariant,
    /// Frequency planes per GPU launch.
    #[arg(long, default_value_t = 16)]
    pub planes: usize,
    /// Output depth image: .npy (float32, shape (nz, ny, nx)), .sgy/.segy (SEG-Y) or .su (Seismic Unix):
    /// one trace per (x, y) node, inline counting y nodes and crossline x nodes from 1 (as a SEG-Y
    /// velocity's), depth stored as time with 1 ms = 1 m. Default: srm-<synthetic>.sgy.
    #[arg(long, short, alias = "out", required_unless_present = "synthetic")]
    pub output: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct DesignArgs {
    #[command(flatten)]
    pub operator: OperatorArgs,
    /// Grid spacings (m).
    #[arg(long, default_value_t = 25.0)]
    pub dx: f64,
    #[arg(long, default_value_t = 25.0)]
    pub dy: f64,
    #[arg(long, default_value_t = 10.0)]
    pub dz: f64,
    /// Velocity range (m/s) and frequency band (Hz) the table covers.
    #[arg(long, default_value_t = 1500.0)]
    pub vmin: f64,
    #[arg(long, default_value_t = 4500.0)]
    pub vmax: f64,
    #[arg(long, default_value_t = 5.0)]
    pub fmin: f64,
    #[arg(long, default_value_t = 40.0)]
    pub fmax: f64,
    /// Table rows (0: about one per 0.01 of w dz / v).
    #[arg(long, default_value_t = 0)]
    pub rows: usize,
    /// Values of w dz / v to report (evenly spread over the range).
    #[arg(long, default_value_t = 6)]
    pub samples: usize,
}

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// `small` (seconds on a CPU) or `paper` (400 x 400 grids, 500 depths, 256 frequencies).
    #[arg(long, default_value = "small")]
    pub size: BenchSize,
    /// Only the srm-step workload (one depth step, every kernel checked against the CPU and timed);
    /// skips the srm-shot workload.
    #[arg(long)]
    pub step_only: bool,
    /// GPU kernels to time (comma-separated: paper, paperq56, cluster, clusterd); default all. The
    /// srm-shot workload also runs the paper's kernel, its reference.
    #[arg(long, value_name = "KERNEL[,KERNEL...]")]
    pub kernels: Option<String>,
}

/// `seisgpu extrapolate`: one frequency plane through `steps` depth steps in constant velocity.
#[derive(clap::Args, Debug)]
pub struct ExtrapolateArgs {
    /// Grid nodes along x and y (ny = 1: a 2D line).
    #[arg(long, default_value_t = 128)]
    pub nx: usize,
    #[arg(long, default_value_t = 128)]
    pub ny: usize,
    /// Grid spacings and depth step (m).
    #[arg(long, default_value_t = 10.0)]
    pub dx: f64,
    #[arg(long, default_value_t = 10.0)]
    pub dy: f64,
    #[arg(long, default_value_t = 10.0)]
    pub dz: f64,
    /// Constant velocity (m/s).
    #[arg(long, default_value_t = 2000.0)]
    pub velocity: f64,
    /// Frequency of the plane (Hz).
    #[arg(long, default_value_t = 20.0)]
    pub freq: f64,
    /// Depth steps.
    #[arg(long, default_value_t = 1)]
    pub steps: usize,
    #[command(flatten)]
    pub operator: OperatorArgs,
    /// Input plane, .npy of shape (ny, nx, 2) (re, im); default: a unit impulse at the centre, whose
    /// response is compared with exact phase-shift extrapolation.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Output plane, .npy float32 of shape (ny, nx, 2) (re, im): a complex plane, not traces, so
    /// .npy only.
    #[arg(long, short, alias = "out")]
    pub output: Option<PathBuf>,
}

pub fn run(args: &Args, global: &Global) -> anyhow::Result<()> {
    match &args.command {
        Some(SrmCommand::Design(d)) => run_design(d),
        Some(SrmCommand::Bench(b)) => run_bench(b, global),
        None => run_migrate(&args.migrate, global),
    }
}

fn run_migrate(a: &MigrateArgs, global: &Global) -> anyhow::Result<()> {
    // Under MPI a file input is read by the ranks, each its shots' traces (`srm_read_share`):
    // here only the layout of a .npy input (its headers from the geometry), none for SEG-Y (the
    // ranks read its headers).
    let out = a.output.clone().unwrap_or_else(|| PathBuf::from(format!("srm-{}.sgy", a.synthetic.as_deref().unwrap_or("image"))));
    let format = global.prepare_output(&out)?;
    if format != OutputFormat::Npy && global.mpi_ranks() {
        seisgpu_host::bail_param!("output", "{}: under MPI the depth image is written as .npy (each rank its block of rows); run without MPI for SEG-Y or SU",
            out.display());
    }
    let by_ranks = global.mpi_ranks() && a.synthetic.is_none();
    let (traces, model): (Option<TraceSet>, VelocityModel) = match a.synthetic.as_deref() {
        None if by_ranks => {
            let layout = npy_layout(a)?;
            let m = read_model(a, layout.as_ref())?;
            (layout, m)
        }
        Some("flat") => {
            let (t, m) = synthetic::flat_reflector(61, 61, 70, 20.0, 10.0, &[0.0, 300.0], &[1800.0, 2400.0], 500.0, 512,
                (a.dt_ms() * 1e-3) as f32, a.ricker as f32, 1);
            (Some(t), m)
        }
        Some("scatterer") => {
            let (t, m) = synthetic::point_scatterer(61, 61, 60, 20.0, 10.0, 2000.0, (500.0, 600.0), (700.0, 600.0, 400.0), 512,
                (a.dt_ms() * 1e-3) as f32, a.ricker as f32, 1);
            (Some(t), m)
        }
        Some(o) => seisgpu_host::bail_param!("synthetic", "unknown synthetic data set `{o}` (expected flat or scatterer)"),
        None => {
            let t = read_traces(a)?;
            let m = read_model(a, Some(&t))?;
            (Some(t), m)
        }
    };
    let params = SrmParams {
        design: a.operator.params(), fmin: a.fmin, fmax: a.fmax, ricker_peak: a.ricker, taper_width: a.taper_width,
        taper_strength: a.taper_strength, aperture: a.aperture, table_rows: a.table_rows, nz: a.nz,
    };
    let opts = GpuOptions { variant: a.kernel, planes: a.planes };
    #[cfg(feature = "mpi")]
    if let Some(cluster) = global.cluster() {
        // The (shot, frequency group) items are split; a file input is read by the ranks, each
        // its shots' traces (built-in data is made on every rank).
        use seisgpu_host::exec::mpi::{self, TraceSource};
        let devices = global.rank_devices(&cluster)?;
        let t = std::time::Instant::now();
        let mut chosen = None;
        let source = match (a.traces.as_deref(), &traces) {
            (Some(p), None) => a.read.mpi_source(p, &mut chosen)?,
            (Some(p), Some(layout)) if by_ranks => TraceSource::NpyRows { traces: p, layout },
            (_, Some(t)) => TraceSource::Memory(t),
            (None, None) => seisgpu_host::bail_param!("traces", "--traces is required"),
        };
        let ranked = srm::distributed::migrate(&cluster, &source, &model, &params, opts, &devices)?;
        let img = &ranked.image;
        if cluster.is_root() {
            eprintln!("seisgpu srm: {} ranks, {} x {} x {} image in {:.2} s", cluster.size(), img.nx, img.ny, img.nz,
                t.elapsed().as_secs_f64());
        }
        // Each rank sums and writes its block of image rows.
        mpi::write_npy_sum(&cluster, &out, &[img.nz, img.ny, img.nx], ranked.partial, img.nx, img.nx)?;
        if cluster.is_root() {
            eprintln!("seisgpu srm: wrote {}", out.display());
        }
        return Ok(());
    }
    let traces = traces.context("--traces is required")?;
    let t = std::time::Instant::now();
    let img = srm::migrate(&traces, &model, &params, opts, &global.devices()?)?;
    eprintln!("seisgpu srm: {} traces, {} x {} x {} image in {:.2} s", traces.len(), img.nx, img.ny, img.nz,
        t.elapsed().as_secs_f64());
    write_image(&out, format, &img, &model)?;
    eprintln!("seisgpu srm: wrote {}", out.display());
    Ok(())
}

/// The depth image as .npy (nz, ny, nx) or as traces on the model's grid (SEG-Y, SU): one per (x,
/// y) node, y-major, inline = iy + 1 and crossline = ix + 1 (the layout a SEG-Y velocity is read in).
fn write_image(out: &std::path::Path, format: OutputFormat, img: &srm::Image, model: &VelocityModel) -> anyhow::Result<()> {
    if format == OutputFormat::Npy {
        npy::write_npy(out, &img.data, &[img.nz, img.ny, img.nx].map(|d| d as u64))?;
        // Depth first: the sidecar says so, so plots put depth down without a --layout.
        let metres = |name: &str, origin: f64, step: f64| if step > 0.0 { AxisMeta::new(name, "m", origin, step) } else { AxisMeta::index(name) };
        return ArrayMeta { description: Some("srm: shot-record depth migration image".into()),
            axes: vec![metres("depth", 0.0, model.dz), metres("y", model.y0, model.dy), metres("x", model.x0, model.dx)] }.write(out);
    }
    let grid = Grid { nx: img.nx, ny: img.ny, x0: model.x0, y0: model.y0, dx: model.dx, dy: model.dy, class_offsets: Vec::new(),
        order: TraceOrder::ClassYX, inline_along_y: true };
    let data = output::traces_from_slices(&img.data, img.nz, img.ny, img.nx);
    output::write_grid(out, &GridImage {
        title: "seisgpu srm: shot-record depth migration image".into(),
        grid: &grid, axis: SampleAxis::Depth { n: img.nz, step: model.dz, first: 0.0 }, data: &data,
        npy_shape: vec![img.ny, img.nx, img.nz],
    })
}

/// True for a SEG-Y or SU file name (.sgy, .segy, .su, any case).
fn is_segy(p: &std::path::Path) -> bool {
    p.extension().and_then(|e| e.to_str()).is_some_and(|e| ["sgy", "segy", "su"].iter().any(|x| e.eq_ignore_ascii_case(x)))
}

impl MigrateArgs {
    /// Sample interval of .npy traces and built-in data (ms).
    fn dt_ms(&self) -> f64 { self.read.dt_ms.map_or(4.0, f64::from) }
}

/// The interval-velocity grid of `--velocity`: a SEG-Y cube or a sidecar-less .npy as they are
/// ([`read_model_file`]), any other form sampled on a grid over `traces` ([`sample_model`]).
fn read_model(a: &MigrateArgs, traces: Option<&TraceSet>) -> anyhow::Result<VelocityModel> {
    let spec = a.velocity.as_deref().context("--velocity is required")?;
    let path = std::path::Path::new(spec.trim());
    let npy_as_is = path.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy"))
        && seisgpu_host::velocity::grid::sidecar_path(path).is_none();
    if path.is_file() && (is_segy(path) || npy_as_is) {
        return read_model_file(a, path);
    }
    let what = format!("--velocity {spec}");
    let model = seisgpu_host::velocity::VelocityModel::parse(spec).with_context(|| what.clone())?;
    sample_model(a, &model, traces, &what)
}

/// `model` sampled at --dz down to --nz depths (default: its deepest knot) and every --dx, --dy
/// over the sources and receivers plus --aperture (one row for a line along x).
fn sample_model(a: &MigrateArgs, model: &seisgpu_host::velocity::VelocityModel, traces: Option<&TraceSet>, what: &str)
    -> anyhow::Result<VelocityModel> {
    use seisgpu_host::velocity::commands;
    if !(a.dx > 0.0 && a.dy > 0.0 && a.dz > 0.0) {
        seisgpu_host::bail_param!("dx", "--dx {}, --dy {}, --dz {} m must be positive", a.dx, a.dy, a.dz);
    }
    let nz = if a.nz > 0 { a.nz } else { (commands::deepest(model) / a.dz).ceil() as usize + 1 };
    if nz < 2 {
        seisgpu_host::bail_param!("nz", "{what} reaches no depth: give --nz (depth samples at --dz {} m)", a.dz);
    }
    let t = traces.with_context(|| format!("{what}: a velocity function is laid over the traces' extent, unknown before the ranks \
        read the SEG-Y traces; give a model grid file (.npy of shape (nz, ny, nx) without sidecar, or SEG-Y)"))?;
    let (mut lo, mut hi) = ([f64::INFINITY; 2], [f64::NEG_INFINITY; 2]);
    for h in &t.headers {
        for (x, y) in [(h.sx, h.sy), (h.gx, h.gy)] {
            lo = [lo[0].min(x), lo[1].min(y)];
            hi = [hi[0].max(x), hi[1].max(y)];
        }
    }
    if !(lo[0].is_finite() && hi[0].is_finite() && lo[1].is_finite() && hi[1].is_finite()) {
        seisgpu_host::bail_input!("{what}: the traces have no coordinates to lay the velocity on");
    }
    let axis = |lo: f64, hi: f64, d: f64| -> (f64, usize) {
        let o = ((lo - a.aperture) / d).floor() * d;
        (o, (((hi + a.aperture - o) / d - 1e-9).ceil() as usize).saturating_add(1))
    };
    let (x0, nx) = axis(lo[0], hi[0], a.dx);
    // A line along x stays a 2D model (one row).
    let (y0, ny) = if hi[1] - lo[1] < 0.5 * a.dy { (lo[1], 1) } else { axis(lo[1], hi[1], a.dy) };
    commands::srm_model(model, nx, ny, nz, a.dx, a.dy, a.dz, x0, y0, what)
}

/// A model grid file as it is: SEG-Y (one trace per inline, crossline node) or a .npy of shape
/// (nz, ny, nx) or (nz, nx), at --dx, --dy, --dz from --x0, --y0.
fn read_model_file(a: &MigrateArgs, path: &std::path::Path) -> anyhow::Result<VelocityModel> {
    let (nz, ny, nx, v) = if is_segy(path) {
        // One trace per (inline, crossline) node; a missing node would be a hole of zero
        // velocity, so it is an error here rather than a silent zero.
        // Every trace is a node, whatever its identification code.
        let opts = seisgpu_host::io::input::ReadOptions { keep_non_seismic: true, ..Default::default() };
        let (_, set, _) = seisgpu_host::io::input::read_traces(path, &opts)?;
        let cube = seisgpu_host::io::cube::cube_from_traces(&set, &path.display().to_string())?;
        let [nil, nxl, nz] = cube.shape;
        if cube.missing > 0 {
            seisgpu_host::bail_input!("{}: {} of the {nil} x {nxl} (inline, crossline) nodes have no velocity trace", path.display(), cube.missing);
        }
        // (inline = y, crossline = x, depth fastest) -> (nz, ny, nx).
        let mut v = vec![0.0f32; nz * nil * nxl];
        for iy in 0..nil {
            for ix in 0..nxl {
                let tr = &cube.data[(iy * nxl + ix) * nz..(iy * nxl + ix + 1) * nz];
                for (iz, &x) in tr.iter().enumerate() {
                    v[(iz * nil + iy) * nxl + ix] = x;
                }
            }
        }
        (nz, nil, nxl, v)
    } else {
        let (shape, v) = npy::read_f32(path)?;
        let (nz, ny, nx) = match shape[..] {
            [nz, ny, nx] => (nz, ny, nx),
            [nz, nx] => (nz, 1, nx),
            _ => seisgpu_host::bail_input!("{}: velocity must have shape (nz, ny, nx) or (nz, nx), got {shape:?}", path.display()),
        };
        (nz, ny, nx, v)
    };
    let m = VelocityModel { v, nx, ny, nz, dx: a.dx, dy: a.dy, dz: a.dz, x0: a.x0, y0: a.y0 };
    m.validate().map_err(|e| seisgpu_host::Error::input(format!("{}: {e}", path.display())))?;
    Ok(m)
}

/// The layout of a file input for the MPI ranks (`srm_read_share` reads the samples): for .npy
/// traces every header (from the geometry) and the sampling, no samples; `None` for SEG-Y (the
/// ranks read its headers).
fn npy_layout(a: &MigrateArgs) -> anyhow::Result<Option<TraceSet>> {
    let tp = a.traces.as_ref().context("--traces is required")?;
    if is_segy(tp) {
        if a.geometry.is_some() {
            seisgpu_host::bail_param!("geometry", "--geometry is for .npy traces; {} is SEG-Y and carries its coordinates in its trace headers", tp.display());
        }
        return Ok(None);
    }
    let (shape, _) = npy::read_rows_f32(tp, 0..0)?;
    let [ntr, ns] = shape[..] else { seisgpu_host::bail_input!("{}: traces must have shape (traces, samples), got {shape:?}", tp.display()) };
    Ok(Some(TraceSet { headers: npy_headers(a, ntr)?, data: Vec::new().into(), ns, dt: (a.dt_ms() * 1e-3) as f32, t0: 0.0 }))
}

/// Trace headers from the `--geometry` .npy of (sx, sy, gx, gy) per trace, for `ntr` traces.
fn npy_headers(a: &MigrateArgs, ntr: usize) -> anyhow::Result<Vec<TraceHeader>> {
    let tp = a.traces.as_ref().context("--traces is required")?;
    let gp = a.geometry.as_ref().with_context(|| format!("--geometry is required with .npy traces ({})", tp.display()))?;
    let (gshape, geom) = npy::read_f32(gp)?;
    if gshape != [ntr, 4] {
        seisgpu_host::bail_input!("{}: geometry must have shape ({ntr}, 4) (sx, sy, gx, gy per trace), got {gshape:?}", gp.display());
    }
    Ok(geom.chunks(4).enumerate().map(|(i, g)| {
        let mut h = TraceHeader { sx: g[0] as f64, sy: g[1] as f64, gx: g[2] as f64, gy: g[3] as f64, channel: i as i32 + 1,
            ..Default::default() };
        h.offset = h.distance();
        h
    }).collect())
}

fn read_traces(a: &MigrateArgs) -> anyhow::Result<TraceSet> {
    let tp = a.traces.as_ref().context("--traces is required")?;
    if is_segy(tp) {
        if a.geometry.is_some() {
            seisgpu_host::bail_param!("geometry", "--geometry is for .npy traces; {} is SEG-Y and carries its coordinates in its trace headers", tp.display());
        }
        let (_, t) = a.read.read(tp)?;
        srm::check_segy_coordinates(&t.headers, tp)?;
        t.validate(&tp.display().to_string()).map_err(anyhow::Error::msg)?;
        return Ok(t);
    }
    let (shape, data) = npy::read_f32(tp)?;
    let [ntr, ns] = shape[..] else { seisgpu_host::bail_input!("{}: traces must have shape (traces, samples), got {shape:?}", tp.display()) };
    let t = TraceSet { headers: npy_headers(a, ntr)?, data: data.into(), ns, dt: (a.dt_ms() * 1e-3) as f32, t0: 0.0 };
    t.validate(&tp.display().to_string()).map_err(anyhow::Error::msg)?;
    Ok(t)
}

fn run_design(a: &DesignArgs) -> anyhow::Result<()> {
    if !(a.vmin > 0.0 && a.vmax >= a.vmin) {
        seisgpu_host::bail_param!("vmin", "velocity range [{} m/s, {} m/s] is empty or not positive", a.vmin, a.vmax);
    }
    if !(a.fmin > 0.0 && a.fmax > a.fmin) {
        seisgpu_host::bail_param!("fmin", "frequency band [{} Hz, {} Hz]: need 0 < fmin < fmax", a.fmin, a.fmax);
    }
    let tau = 2.0 * std::f64::consts::PI;
    let (pmin, pmax) = (tau * a.fmin * a.dz / a.vmax, tau * a.fmax * a.dz / a.vmin);
    let rows = if a.rows > 0 { a.rows } else { (((pmax - pmin) / 0.01).ceil() as usize + 1).clamp(8, 4096) };
    let sp = Spacing { dx: a.dx, dy: a.dy, dz: a.dz, two_d: false };
    let t = std::time::Instant::now();
    let op = Operator::new(a.operator.params(), sp, pmin, pmax, rows).map_err(anyhow::Error::msg)?;
    println!("operator: degree {}, design angle {} deg, {} filter (taps {:?}), {rows} table rows over w dz / v = {pmin:.3} .. \
        {pmax:.3}, designed in {:.1} s", a.operator.degree, a.operator.max_angle, a.operator.filter,
        op.taps.map(|c| (c * 1e6).round() / 1e6), t.elapsed().as_secs_f64());
    println!("largest |G| over all rows: {:.6} (stability: <= 1)", op.max_gain.iter().cloned().fold(0.0, f64::max));
    let angles: Vec<f64> = [0.0, 15.0, 30.0, 45.0, 60.0, 75.0].into_iter().filter(|&x| x <= a.operator.max_angle + 1e-9)
        .chain(std::iter::once(a.operator.max_angle)).collect::<Vec<_>>();
    let mut angles = angles;
    angles.dedup_by(|x, y| (*x - *y).abs() < 1e-9);
    print!("{:>9} {:>8} {:>8}", "w dz / v", "f (Hz)*", "v (m/s)*");
    for &an in &angles {
        print!("   <= {an:>4.0} deg: amp / phase(mrad)");
    }
    println!();
    let n = a.samples.max(1);
    for i in 0..n {
        // Midway between table rows where possible: the table's interpolation error shows too.
        let p = pmin + (pmax - pmin) * (i as f64 + 0.5) / n as f64;
        print!("{p:>9.3} {:>8.1} {:>8.0}", p * a.vmin / (tau * a.dz), tau * a.fmax * a.dz / p);
        for &an in &angles {
            let (amp, ph, _) = op.accuracy(p, an);
            print!("   {:>17.1e} / {:>7.2}", amp, ph * 1e3);
        }
        println!();
    }
    println!("* the frequency at vmin and the velocity at fmax that give this w dz / v. Errors are per depth step, the \
        largest over azimuths 0..45 deg and angles up to the column's, filter and table interpolation included.");
    Ok(())
}

fn run_bench(a: &BenchArgs, global: &Global) -> anyhow::Result<()> {
    let kernels = a.kernels.as_deref().map(seisgpu_lab::bench::parse_kernels).transpose()?;
    let backend = global.backend()?;
    let sel = seisgpu_lab::bench::Selection { kernels, ..Default::default() };
    let rows = seisgpu_lab::srm::bench_with(&backend, a.size, &Ceilings::default(), a.step_only, &sel)?;
    println!("{:<10} {:<22} {:<11} {:>12} {:>9}  {}", "workload", "variant", "scope", "median ms", "of ceil", "check / note");
    for r in rows {
        let frac = r.fraction_of_ceiling.map(|f| format!("{:.0}%", 100.0 * f)).unwrap_or_default();
        println!("{:<10} {:<22} {:<11} {:>12.4} {:>9}  {} | {}", r.workload, r.variant, r.scope, r.stats.median_ms, frac, r.check,
            r.note);
    }
    Ok(())
}

pub fn run_extrapolate(a: &ExtrapolateArgs, _global: &Global) -> anyhow::Result<()> {
    if a.nx == 0 || a.ny == 0 || a.steps == 0 {
        seisgpu_host::bail_param!("nx", "grid {} x {} and {} steps: all must be at least 1", a.nx, a.ny, a.steps);
    }
    if !(a.velocity > 0.0 && a.freq > 0.0) {
        seisgpu_host::bail_param!("velocity", "velocity {} m/s and frequency {} Hz must be positive", a.velocity, a.freq);
    }
    if let Some(out) = &a.output
        && output::prepare(out)? != OutputFormat::Npy
    {
        seisgpu_host::bail_param!("output", "{}: a complex frequency plane is written as .npy only (shape (ny, nx, 2): re, im)", out.display());
    }
    let sp = Spacing { dx: a.dx, dy: a.dy, dz: a.dz, two_d: a.ny == 1 };
    let p = 2.0 * std::f64::consts::PI * a.freq * a.dz / a.velocity;
    let op = Operator::new(a.operator.params(), sp, 0.95 * p, 1.05 * p, 3).map_err(anyhow::Error::msg)?;
    let (nx, ny) = (a.nx, a.ny);
    let mut plane = match &a.input {
        Some(path) => {
            let (shape, d) = npy::read_f32(path)?;
            if shape != [ny, nx, 2] {
                seisgpu_host::bail_input!("{}: input plane must have shape ({ny}, {nx}, 2), got {shape:?}", path.display());
            }
            d
        }
        None => {
            let mut d = vec![0.0f32; 2 * nx * ny];
            d[2 * ((ny / 2) * nx + nx / 2)] = 1.0;
            d
        }
    };
    let slow = vec![(1.0 / a.velocity) as f32; nx * ny];
    let map = op.row_map(2.0 * std::f64::consts::PI * a.freq);
    let bar = seisgpu_host::progress::work(a.steps as u64, "extrapolation steps");
    for _ in 0..a.steps {
        cpu::step_planes(&op, &[map], &slow, &Taper::none(nx, ny), nx, ny, &mut plane);
        bar.inc(1);
    }
    drop(bar);
    if a.input.is_none() {
        let e = compare_with_phase_shift(&plane, nx, ny, a.dx, a.dy, a.dz, a.velocity, a.freq, a.steps, a.operator.max_angle);
        let reach = a.steps * a.operator.degree * 4;
        println!("impulse response after {} step(s), w dz / v = {p:.3}: up to {} deg, |amplitude error| <= {:.2e}, \
            |phase error| <= {:.2e} rad over {} wavenumbers", a.steps, a.operator.max_angle, e.amplitude, e.phase, e.count);
        let (da, dp, _) = op.accuracy(p, a.operator.max_angle);
        println!("design's per-step bound: amplitude {da:.2e}, phase {dp:.2e} rad");
        if 2 * reach >= nx.min(if ny == 1 { nx } else { ny }) {
            println!("note: the operator reaches {reach} nodes, beyond half the grid: the zero edges alter the response");
        }
    }
    if let Some(out) = &a.output {
        npy::write_npy(out, &plane, &[ny as u64, nx as u64, 2])?;
        println!("wrote {}", out.display());
    }
    Ok(())
}

impl super::Subcommand for Args {
    fn run(&self, global: &super::Global) -> anyhow::Result<()> { run(self, global) }
    fn library_progress(&self) -> bool { !matches!(self.command, Some(SrmCommand::Bench(_))) }
    fn path(&self) -> String { if self.command.is_none() { "srm" } else { "srm design/bench" }.to_string() }
}

impl super::Subcommand for ExtrapolateArgs {
    fn run(&self, global: &super::Global) -> anyhow::Result<()> { run_extrapolate(self, global) }
    fn path(&self) -> String { "extrapolate".to_string() }
}
