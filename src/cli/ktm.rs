//! `seisgpu ktm`: Kirchhoff prestack time migration (paper 2), its adjoint (modelling), and the
//! algorithm's benchmark and demo.

use std::path::PathBuf;

use anyhow::Context;
use seisgpu_lab::bench::{BenchSize, Ceilings};
use seisgpu_host::ktm::{
    self, AntiAlias, Aperture, GpuLimits, Image, ImageGrid, OffsetClasses, Params, Variant, Velocity, VelocityVolume,
};
use seisgpu_host::pstm::{TraveltimeMode, TraveltimeModel};
use seisgpu_host::grid::GridRequest;
use seisgpu_host::traces::{TraceHeader, TraceSet};
use seisgpu_host::velocity::VelocityModel;

use super::Global;

#[derive(clap::Args, Debug)]
#[command(about = "Kirchhoff prestack time migration into an (inline x, crossline y, two-way time tau) image",
    long_about = "Kirchhoff prestack time migration (paper 2) with double-square-root traveltimes in RMS velocity: exact, or\n\
    interpolated along image time (--traveltime static8|dynamic, paper 5).\n\
    The image time axis tau is TWO-WAY vertical time (as in production PSTM; the paper's equation writes one-way tau).\n\
    `migrate` images traces, `model` is its exact adjoint (demigration), `bench` and `demo` run the built-in workloads.")]
pub struct Args {
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(clap::Subcommand, Debug)]
pub enum Cmd {
    /// Migrate traces into an image (.npy, shape [classes, nx, ny, ntau], tau fastest; or SEG-Y by extension).
    Migrate(MigrateArgs),
    /// Kirchhoff modelling (the adjoint): traces from an image .npy, into the input's geometry.
    Model(ModelArgs),
    /// The ktm benchmark workloads (paper Tables 1 and 2): CPU reference and every GPU kernel.
    Bench(BenchArgs),
    /// Migrate a built-in synthetic diffractor with every correction on; prints the focus.
    Demo(DemoArgs),
}

#[derive(clap::Args, Debug, Clone)]
pub struct InputArgs {
    /// Built-in synthetic input: `diffractor` (3-D areal survey over a point diffractor at the
    /// image centre, tau = 0.4 s), `reflector` (2-D zero-offset line over a 30-degree dipping
    /// reflector) or `random` (noise traces scattered over the image area).
    #[arg(long, default_value = "diffractor")]
    pub synthetic: String,
    /// Prestack SEG-Y or Seismic Unix input (source and receiver coordinates in the headers).
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// Traces of the `random` input.
    #[arg(long, default_value_t = 1000)]
    pub traces: usize,
    /// How the input file is read.
    #[command(flatten)]
    pub read: super::input::InputArgs,
}

/// The image grid; with a SEG-Y input every option left out comes from the data (the CDP
/// positions' extent at their bin spacing, the traces' time axis), and the grid is printed.
#[derive(clap::Args, Debug, Clone)]
pub struct GridArgs {
    /// Image origin, inline x (m, in the traces' coordinate frame); default: the data's first CDP x (synthetics: 0).
    #[arg(long)]
    pub x0: Option<f64>,
    /// Inline bin spacing (m); default: the data's CDP spacing (synthetics: 20).
    #[arg(long)]
    pub dx: Option<f64>,
    /// Inline bins; default: over the data's CDPs (synthetics: 21).
    #[arg(long)]
    pub nx: Option<usize>,
    /// Image origin, crossline y (m); default: the data's first CDP y (synthetics: 0).
    #[arg(long)]
    pub y0: Option<f64>,
    /// Crossline bin spacing (m); default: the data's CDP spacing (synthetics: 20).
    #[arg(long)]
    pub dy: Option<f64>,
    /// Crossline bins; default: over the data's CDPs (synthetics: 21).
    #[arg(long)]
    pub ny: Option<usize>,
    /// First image time (s, two-way vertical time); default: the record's start (synthetics: 0).
    #[arg(long)]
    pub tau0: Option<f32>,
    /// Image time step (s, two-way); default: the sample interval (synthetics: 0.004).
    #[arg(long)]
    pub dtau: Option<f32>,
    /// Image time samples; default: to the record's end (synthetics: 150).
    #[arg(long)]
    pub ntau: Option<usize>,
}

impl GridArgs {
    fn request(&self) -> GridRequest {
        GridRequest { x0: self.x0, dx: self.dx, nx: self.nx, y0: self.y0, dy: self.dy, ny: self.ny, tau0: self.tau0, dtau: self.dtau,
            ntau: self.ntau }
    }
    /// The grid of the built-in synthetics (they are made on it): the options, else fixed values.
    fn synthetic(&self) -> ImageGrid {
        let d = ImageGrid { x0: 0.0, dx: 20.0, nx: 21, y0: 0.0, dy: 20.0, ny: 21, tau0: 0.0, dtau: 0.004, ntau: 150 };
        self.request().or(&d)
    }
}


/// The parameters and the input: with a SEG-Y input the grid's missing options come from its
/// headers (the chosen grid printed on stderr); a synthetic input is made on the options' grid.
pub fn params_and_input(o: &MigrationOptions, i: &InputArgs) -> anyhow::Result<(Params, TraceSet)> {
    if i.input.is_some() {
        let traces = input(i, &o.grid.synthetic())?;
        let (grid, line) = seisgpu_host::grid::complete(&o.grid.request(), &traces)?;
        if let Some(line) = line {
            eprintln!("ktm: {line}");
        }
        return Ok((params_on(o, grid)?, traces));
    }
    let p = params(o)?;
    let traces = input(i, &p.grid)?;
    Ok((p, traces))
}

#[derive(clap::Args, Debug, Clone)]
pub struct MigrationOptions {
    #[command(flatten)]
    pub grid: GridArgs,
    /// RMS velocity v_rms (m/s): a constant; t:v pairs (s two-way : m/s, any spacing, linear in
    /// between, constant beyond the ends); a text file of per-CMP functions (what `velan -o`
    /// writes) or a .npy grid with its JSON sidecar or a SEG-Y velocity volume, sampled on every
    /// image column (laterally varying v_rms(x, y, tau)).
    #[arg(long, value_name = "VELOCITY", alias = "vrms", default_value = "2000")]
    pub velocity: String,
    /// Laterally varying RMS velocity: .npy of shape [nx, ny, nt] (m/s, t fastest), on the grid
    /// given by --velocity-grid; trilinearly interpolated onto the image, which it must cover.
    #[arg(long, hide = true)]
    pub velocity_npy: Option<PathBuf>,
    /// Grid of --velocity-npy: `x0,dx,y0,dy,t0,dt` (m, m, m, m, s, s).
    #[arg(long, hide = true)]
    pub velocity_grid: Option<String>,
    /// Maximum distance from the image point to a trace midpoint (m); default: no limit.
    #[arg(long)]
    pub aperture: Option<f64>,
    /// Maximum angle from the vertical at the image point to the midpoint (degrees, up to 90).
    #[arg(long, default_value_t = 90.0)]
    pub max_angle: f64,
    /// Cosine taper over this outer fraction of the aperture radius.
    #[arg(long, default_value_t = 0.1)]
    pub taper: f64,
    /// Skip the rho (anticausal half-derivative) filter on the traces.
    #[arg(long)]
    pub no_rho: bool,
    /// GPU runs: rho filter (cuFFT) and trace layout on the GPU instead of the host's cores.
    #[arg(long)]
    pub prep_on_gpu: bool,
    /// Skip the amplitude weights (cos / sqrt(v r)).
    #[arg(long)]
    pub no_weights: bool,
    /// Skip the anti-aliasing triangle filter.
    #[arg(long)]
    pub no_antialias: bool,
    /// Longest anti-aliasing triangle half-length (samples).
    #[arg(long, default_value_t = 8.0)]
    pub aa_max: f32,
    /// Trace spacing for the anti-alias limit, `dx,dy` (m); default: the bin size.
    #[arg(long)]
    pub aa_spacing: Option<String>,
    /// Stretch mute: drop contributions stretched by more than this fraction (0..1).
    #[arg(long)]
    pub mute_stretch: Option<f32>,
    /// Common-offset image gathers: `first,width,count` (m, m, classes) of |offset|.
    #[arg(long)]
    pub offset_classes: Option<String>,
    /// Traveltime computation: exact (every image sample), static8 (exact every 8th image sample,
    /// linear between) or dynamic (steps of 8..32 samples under a 0.1 ms traveltime error), paper 5;
    /// with every correction. With --traveltime-model vti the PSTM engine runs it (unit weights:
    /// add --no-weights --no-antialias).
    #[arg(long, default_value = "exact")]
    pub traveltime: String,
    /// Traveltime model: dsr (straight-ray double square root) or vti (non-hyperbolic, with --eta;
    /// runs in the PSTM engine).
    #[arg(long, default_value = "dsr")]
    pub traveltime_model: String,
    /// Anellipticity eta for --traveltime-model vti (dimensionless, >= 0).
    #[arg(long, default_value_t = 0.0)]
    pub eta: f32,
    /// GPU kernel: columns (default), columns-v1 (the first columns kernel), columns-fast (approximate
    /// square roots: positions within ~1e-5 samples of the exact ones) or paper (data-domain).
    #[arg(long, default_value = "columns")]
    pub kernel: String,
    /// Block shape of the paper kernel, `XxY` (threads per trace loop x image-time loop).
    #[arg(long, default_value = "128x1")]
    pub paper_block: String,
    /// Cap on traces per GPU chunk (normally planned from free GPU memory).
    #[arg(long)]
    pub max_traces_per_chunk: Option<usize>,
    /// Cap on image columns per GPU tile (rounded to whole inline rows).
    #[arg(long)]
    pub max_columns_per_tile: Option<usize>,
}

#[derive(clap::Args, Debug)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub opts: MigrationOptions,
    /// Output image: .npy (float32, shape [classes, nx, ny, ntau]), .sgy/.segy (SEG-Y) or .su (Seismic
    /// Unix): one trace per class and image column, bin centre in CDP X/Y, two-way vertical time.
    #[arg(long, short, alias = "out", default_value = "ktm-image.sgy")]
    pub output: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct ModelArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub opts: MigrationOptions,
    /// Image to model from (.npy, float32, shape [classes, nx, ny, ntau] or [nx, ny, ntau]).
    #[arg(long)]
    pub image: PathBuf,
    /// Output traces in the input's geometry: .sgy/.segy (SEG-Y) or .su (Seismic Unix) with the input's
    /// trace headers, or .npy (float32, shape [traces, samples]).
    #[arg(long, short, alias = "out", default_value = "ktm-model.sgy")]
    pub output: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// `small` (seconds on a 2-core CPU) or `paper` (the paper's sizes).
    #[arg(long, default_value = "small")]
    pub size: BenchSize,
    /// Run only these workloads (comma-separated names: ktm-table2-<traces>, ktm-table1); an unknown
    /// name is an error listing the known ones at this --size.
    #[arg(long, value_name = "NAME[,NAME...]")]
    pub case: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct DemoArgs {
    /// Folder for the demo's images.
    #[arg(long, default_value = "out/demo")]
    pub out_dir: PathBuf,
}

pub fn run(args: &Args, global: &Global) -> anyhow::Result<()> {
    match &args.cmd {
        Cmd::Migrate(a) => run_migrate(a, global),
        Cmd::Model(a) => run_model(a, global),
        Cmd::Bench(a) => {
            let cases = a.case.as_deref().map(|c| seisgpu_lab::bench::parse_cases(c, &seisgpu_lab::ktm::names(a.size))).transpose()?;
            let backend = global.backend()?;
            let sel = seisgpu_lab::bench::Selection { cases, ..Default::default() };
            let rows = seisgpu_lab::ktm::bench_selected(&backend, a.size, &Ceilings::default(), &sel)?;
            println!("{:18} {:33} {:10} {:>10} {:>10}  check | note", "workload", "variant", "scope", "median s", "contrib/s");
            for r in &rows {
                // The paper's figure once per workload (on the CPU row).
                let paper = match (&r.paper, r.variant.as_str()) {
                    (Some(p), "cpu-reference") => format!(" | paper: {p}"),
                    _ => String::new(),
                };
                let ceiling = match (&r.ceiling, r.fraction_of_ceiling) {
                    (Some(c), Some(f)) => format!(" | {:.0} % of {c}", 100.0 * f),
                    _ => String::new(),
                };
                println!("{:18} {:33} {:10} {:>10.4} {:>10.3e}  {} | {}{ceiling}{paper}", r.workload, r.variant, r.scope,
                    r.stats.median_ms * 1e-3, r.throughput(), r.check, r.note);
            }
            Ok(())
        }
        Cmd::Demo(a) => {
            let backend = global.backend()?;
            let row = seisgpu_lab::ktm::demo(&backend, &a.out_dir, seisgpu_lab::bench::DemoSize::Small)?;
            println!("ktm demo on {} in {:.2} s: {}", row.backend, row.seconds, row.quality);
            Ok(())
        }
    }
}

fn parse_list(s: &str, n: usize, what: &str) -> anyhow::Result<Vec<f64>> {
    let v: Vec<f64> = s.split(',').map(|x| x.trim().parse::<f64>()).collect::<Result<_, _>>()
        .map_err(|e| seisgpu_host::Error::parameter(what.trim_start_matches('-'), format!("{what}: `{s}` is not a comma-separated list of numbers: {e}")))?;
    if v.len() != n {
        seisgpu_host::bail_param!(what.trim_start_matches('-'), "{what}: expected {n} numbers, got {} in `{s}`", v.len());
    }
    Ok(v)
}

/// Builds the parameters from the options (errors name the option).
pub fn params(o: &MigrationOptions) -> anyhow::Result<Params> { params_on(o, o.grid.synthetic()) }

/// [`params`] on the image grid `grid`.
pub fn params_on(o: &MigrationOptions, grid: ImageGrid) -> anyhow::Result<Params> {
    let g = &grid;
    let velocity = if let Some(path) = &o.velocity_npy {
        let vg = parse_list(o.velocity_grid.as_deref().context("--velocity-npy needs --velocity-grid x0,dx,y0,dy,t0,dt")?, 6,
            "--velocity-grid")?;
        let (shape, v) = seisgpu_host::io::npy::read_f32(path)?;
        if shape.len() != 3 {
            seisgpu_host::bail_input!("--velocity-npy {}: shape {shape:?}, expected [nx, ny, nt]", path.display());
        }
        Velocity::Volume(VelocityVolume { x0: vg[0], dx: vg[1], nx: shape[0], y0: vg[2], dy: vg[3], ny: shape[1], t0: vg[4] as f32,
            dt: vg[5] as f32, nt: shape[2], v })
    } else {
        let what = format!("--velocity {}", o.velocity);
        let model = VelocityModel::parse(&o.velocity).with_context(|| what.clone())?;
        seisgpu_host::velocity::commands::ktm_velocity(&model, g, &what)?
    };
    let mut p = Params::full(grid, velocity);
    p.rho_filter = !o.no_rho;
    p.prep_on_gpu = o.prep_on_gpu;
    p.weights = !o.no_weights;
    p.antialias = if o.no_antialias {
        None
    } else {
        let (dx, dy) = match &o.aa_spacing {
            Some(s) => {
                let v = parse_list(s, 2, "--aa-spacing")?;
                (v[0], v[1])
            }
            None => (g.dx, g.dy),
        };
        Some(AntiAlias { dx, dy, max_half_length: o.aa_max })
    };
    p.aperture = Aperture { max_distance: o.aperture.unwrap_or(f64::INFINITY), max_angle_deg: o.max_angle, taper: o.taper };
    p.mute_stretch = o.mute_stretch;
    if let Some(s) = &o.offset_classes {
        let v = parse_list(s, 3, "--offset-classes")?;
        p.offset_classes = Some(OffsetClasses { first: v[0], width: v[1], count: v[2] as usize });
    }
    p.traveltime = match o.traveltime.as_str() {
        "exact" => TraveltimeMode::Exact,
        "static8" => TraveltimeMode::Static8,
        "dynamic" => TraveltimeMode::Dynamic { tolerance: 1e-4 },
        other => seisgpu_host::bail_param!("traveltime", "--traveltime `{other}`: expected exact, static8 or dynamic"),
    };
    p.traveltime_model = match o.traveltime_model.as_str() {
        "dsr" => TraveltimeModel::Dsr,
        "vti" => TraveltimeModel::Vti,
        other => seisgpu_host::bail_param!("traveltime-model", "--traveltime-model `{other}`: expected dsr or vti"),
    };
    p.eta = o.eta;
    p.variant = match o.kernel.as_str() {
        "paper" => {
            let (x, y) = o.paper_block.split_once('x').context("--paper-block: expected XxY, e.g. 128x1")?;
            Variant::Paper { block_x: x.parse().context("--paper-block x")?, block_y: y.parse().context("--paper-block y")? }
        }
        other => other.parse::<Variant>().map_err(anyhow::Error::msg)?,
    };
    p.limits = GpuLimits { max_traces_per_chunk: o.max_traces_per_chunk, max_columns_per_tile: o.max_columns_per_tile };
    Ok(p)
}

/// The input traces: SEG-Y (source and receiver coordinates from the trace headers) or a built-in
/// synthetic on the image grid.
pub fn input(i: &InputArgs, grid: &ImageGrid) -> anyhow::Result<TraceSet> {
    if let Some(p) = &i.input {
        let (_, traces) = i.read.read(p)?;
        return Ok(traces);
    }
    let (cx, cy) = (grid.x(grid.nx / 2), grid.y(grid.ny / 2));
    match i.synthetic.as_str() {
        "diffractor" => {
            let mut h = Vec::new();
            for s in 0..16 {
                for r in 0..64 {
                    let (sx, sy) = (cx + (s / 4) as f64 * 120.0 - 180.0, cy + (s % 4) as f64 * 120.0 - 180.0);
                    let (gx, gy) = (cx + (r / 8) as f64 * 80.0 - 280.0, cy + (r % 8) as f64 * 80.0 - 280.0);
                    h.push(TraceHeader { sx, sy, gx, gy, ..Default::default() });
                }
            }
            let mut t = TraceSet::zeros(h, 250, 0.004);
            seisgpu_host::synth::events::diffractor(&mut t, cx, cy, 400.0, 2000.0, 25.0);
            Ok(t)
        }
        "reflector" => {
            let (v, theta, z0) = (2000.0f64, 30f64.to_radians(), 300.0f64);
            let h: Vec<TraceHeader> = (0..241).map(|k| {
                let x = grid.x0 - 400.0 + k as f64 * 5.0;
                TraceHeader { sx: x, gx: x, sy: cy, gy: cy, ..Default::default() }
            }).collect();
            let mut t = TraceSet::zeros(h, 400, 0.004);
            for k in 0..t.len() {
                let x = t.headers[k].sx - grid.x0;
                let tt = 2.0 * (z0 + x * theta.tan()) * theta.cos() / v;
                if tt > 0.05 {
                    seisgpu_host::synth::add_ricker(t.trace_mut(k), 0.004, tt as f32, 25.0, 1.0);
                }
            }
            Ok(t)
        }
        "random" => Ok(seisgpu_lab::ktm::scattered_traces(i.traces, 500, 0.004, grid, 2000.0, 7)),
        other => seisgpu_host::bail_param!("synthetic", "--synthetic `{other}`: expected diffractor, reflector or random"),
    }
}

fn run_migrate(a: &MigrateArgs, global: &Global) -> anyhow::Result<()> {
    global.prepare_output(&a.output)?;
    #[cfg(feature = "mpi")]
    if let Some(cluster) = global.cluster() {
        return migrate_distributed(a, &rank_params(&a.opts, &a.input)?, global, &cluster);
    }
    let (p, traces) = params_and_input(&a.opts, &a.input)?;
    let t0 = std::time::Instant::now();
    let devices = global.devices()?;
    let (img, times) = match devices.as_slice() {
        [backend] => {
            let (img, times) = ktm::migrate_timed(&traces, &p, backend)?;
            (img, Some(times))
        }
        _ => (ktm::migrate(&traces, &p, &devices)?, None),
    };
    let t = t0;
    eprintln!("ktm: {} traces into {} x {} x {} x {} (classes x inline x crossline x time) in {:.3} s{}", traces.len(), img.classes,
        p.grid.nx, p.grid.ny, p.grid.ntau, t.elapsed().as_secs_f64(),
        if img.skipped_traces > 0 { format!("; {} traces in no offset class", img.skipped_traces) } else { String::new() });
    let tw = std::time::Instant::now();
    ktm::output::write_image(&a.output, &img)?;
    let write_s = tw.elapsed().as_secs_f64();
    eprintln!("ktm: wrote {}", a.output.display());
    if let Some(tm) = times {
        eprintln!("ktm: time split: preparation {:.3} s, upload {:.3} s, kernels {:.3} s, download {:.3} s, write {:.3} s",
            tm.prepare_s, tm.upload_s, tm.kernels_s, tm.download_s, write_s);
    }
    Ok(())
}

/// [`params_and_input`] for an MPI rank: the grid's missing options from a SEG-Y input's headers.
#[cfg(feature = "mpi")]
fn rank_params(o: &MigrationOptions, i: &InputArgs) -> anyhow::Result<Params> {
    let Some(path) = &i.input else { return params(o) };
    let mut r = seisgpu_host::io::segy::SegyReader::open(path).with_context(|| format!("opening {}", path.display()))?;
    let headers = r.read_headers().with_context(|| format!("reading the trace headers of {}", path.display()))?;
    let info = r.info();
    let (grid, _) = seisgpu_host::grid::complete_from_headers(&o.grid.request(), &headers, info.ns, info.dt, info.t0)?;
    params_on(o, grid)
}

/// `ktm migrate` as one rank of an MPI job: each rank reads only its share of a SEG-Y input
/// (built-in synthetics are made on every rank), migrates its work items; the ranks sum the
/// image, each writing its block of the image (.npy or SEG-Y) into the output.
#[cfg(feature = "mpi")]
fn migrate_distributed(a: &MigrateArgs, p: &Params, global: &Global, cluster: &seisgpu_host::exec::mpi::Cluster)
    -> anyhow::Result<()> {
    use seisgpu_host::exec::mpi::{self, TraceSource};
    use seisgpu_host::io::output::OutputFormat;
    // Decided before the work, the same on every rank.
    if OutputFormat::from_path(&a.output)? == OutputFormat::Su {
        seisgpu_host::bail_param!("output", "{}: under MPI the image is written as .npy or SEG-Y (each rank its block); run without MPI for SU", a.output.display());
    }
    let devices = global.rank_devices(cluster)?;
    let synthetic;
    let mut chosen = None;
    let source = match &a.input.input {
        Some(path) => a.input.read.mpi_source(path, &mut chosen)?,
        None => {
            synthetic = input(&a.input, &p.grid)?;
            TraceSource::Memory(&synthetic)
        }
    };
    let t = std::time::Instant::now();
    let ranked = ktm::distributed::migrate(cluster, &source, p, &devices)?;
    let (g, classes) = (p.grid, ranked.image.classes);
    if cluster.is_root() {
        eprintln!("ktm: {} ranks migrated into {} x {} x {} x {} (classes x inline x crossline x time) in {:.3} s",
            cluster.size(), classes, g.nx, g.ny, g.ntau, t.elapsed().as_secs_f64());
    }
    match OutputFormat::from_path(&a.output)? {
        // Each rank sums and writes its block of image traces.
        OutputFormat::Npy => mpi::write_npy_sum(cluster, &a.output, &[classes, g.nx, g.ny, g.ntau], ranked.partial, g.ntau,
            g.ntau)?,
        OutputFormat::Segy => {
            // SEG-Y: each rank sums and writes its block of image traces, headers and all.
            let (headers, opts) = ktm::output::segy_layout(&ranked.image);
            mpi::write_segy_sum(cluster, &a.output, &headers, &opts, g.ntau, g.dtau, g.tau0, ranked.partial)?;
        }
        OutputFormat::Su => unreachable!("refused above"),
    }
    if cluster.is_root() {
        eprintln!("ktm: wrote {}", a.output.display());
    }
    Ok(())
}

fn run_model(a: &ModelArgs, global: &Global) -> anyhow::Result<()> {
    global.prepare_output(&a.output)?;
    let (p, geometry) = params_and_input(&a.opts, &a.input)?;
    let (shape, data) = seisgpu_host::io::npy::read_f32(&a.image)?;
    let g = p.grid;
    let classes = match shape.as_slice() {
        [nx, ny, nt] if (*nx, *ny, *nt) == (g.nx, g.ny, g.ntau) => 1,
        [c, nx, ny, nt] if (*nx, *ny, *nt) == (g.nx, g.ny, g.ntau) => *c,
        _ => seisgpu_host::bail_input!("--image {}: shape {shape:?} does not match the grid {} x {} x {}", a.image.display(), g.nx, g.ny, g.ntau),
    };
    let img = Image { grid: g, classes, class_offsets: vec![], data, skipped_traces: 0 };
    let backend = global.backend()?;
    let out = ktm::model(&img, &geometry.headers, geometry.ns, geometry.dt, geometry.t0, &p, &backend)?;
    ktm::output::write_traces(&a.output, &out)?;
    eprintln!("ktm: modelled {} traces of {} samples into {}", out.len(), out.ns, a.output.display());
    Ok(())
}

impl super::Subcommand for Args {
    fn run(&self, global: &super::Global) -> anyhow::Result<()> { run(self, global) }
    fn library_progress(&self) -> bool { !matches!(self.cmd, Cmd::Bench(_) | Cmd::Demo(_)) }
    fn path(&self) -> String { match self.cmd { Cmd::Migrate(_) => "ktm migrate", _ => "ktm" }.to_string() }
}
