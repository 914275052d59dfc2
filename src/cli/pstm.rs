//! `seisgpu pstm`: paper 5's PSTM engine with exact, static 8-point or dynamic traveltimes (DSR or
//! VTI), its accuracy table (paper Table 1) and its speed table (paper Tables 2-3).

use std::path::PathBuf;

use anyhow::Context;

use seisgpu_lab::bench::BenchSize;
use seisgpu_host::grid::{ImageGrid, GridRequest};
use seisgpu_host::io::output::{self, Grid, GridImage, SampleAxis, TraceOrder};
use seisgpu_lab::pstm::{self as pb, AccuracyConfig};
use seisgpu_host::velocity::{commands, Domain, VelocityModel};
use seisgpu_host::pstm::{migrate, GpuTuning, PstmImage, PstmParams, TraveltimeMode, TraveltimeModel, DEFAULT_DYNAMIC_TOLERANCE};

use super::Global;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(clap::Subcommand, Debug)]
pub enum Command {
    /// Migrate SEG-Y traces or built-in synthetic data (3D survey, point diffractors) into an image
    /// (.sgy, .su or .npy by the output's extension).
    Migrate(MigrateArgs),
    /// The accuracy table (paper Table 1): static8 and dynamic against exact, per-sample
    /// relative-error bands, relative L2, largest traveltime error.
    Accuracy(AccuracyArgs),
    /// The speed table (`pstm-table2`): every mode and model, CPU reference and GPU variants.
    Bench(BenchArgs),
}

#[derive(clap::Args, Debug)]
pub struct TraveltimeArgs {
    /// Traveltime scheme: exact (every image sample), static8 (exact every 8th sample, linear
    /// between; paper 5) or dynamic (steps of 8-32 samples chosen by an error test).
    #[arg(long, default_value = "static8")]
    pub traveltime: String,
    /// Traveltime formula: dsr (straight-ray double square root) or vti (non-hyperbolic, eta).
    #[arg(long = "traveltime-model", default_value = "dsr")]
    pub model: TraveltimeModel,
    /// Dynamic mode: largest midpoint interpolation error accepted (s).
    #[arg(long, default_value_t = DEFAULT_DYNAMIC_TOLERANCE)]
    pub tolerance: f32,
    /// Dynamic mode: largest step (samples): 8, 16, 24 or 32.
    #[arg(long, default_value_t = 32)]
    pub max_step: u32,
}

#[derive(clap::Args, Debug)]
pub struct MigrateArgs {
    #[command(flatten)]
    pub tt: TraveltimeArgs,
    /// Image columns along x and y; with --input, default: over the data's CDPs (synthetic: 40 x 40).
    #[arg(long)]
    pub nx: Option<usize>,
    #[arg(long)]
    pub ny: Option<usize>,
    /// Image column spacing along x and y (m); with --input, default: the data's CDP spacing (synthetic: 25).
    #[arg(long)]
    pub dx: Option<f64>,
    #[arg(long)]
    pub dy: Option<f64>,
    /// Image time samples and their interval (s); with --input, default: the traces' sampling to the
    /// record's end (synthetic: 500 of 0.004 s).
    #[arg(long)]
    pub nz: Option<usize>,
    #[arg(long)]
    pub dtau: Option<f32>,
    /// Offset classes: count, first class start and class width (m).
    #[arg(long, default_value_t = 1)]
    pub noff: usize,
    #[arg(long, default_value_t = 0.0)]
    pub offset0: f32,
    #[arg(long, default_value_t = 1.0e6)]
    pub doffset: f32,
    /// RMS velocity v_rms (m/s): a constant (v_rms at tau = 0 with --velocity-gradient); t:v pairs
    /// (s two-way : m/s, any spacing, linear in between, constant beyond the ends); a text file of
    /// per-CMP functions (what `velan -o` writes), a .npy grid with its JSON sidecar or a SEG-Y
    /// velocity volume, sampled on every image column (laterally varying v_rms(x, y, tau)).
    #[arg(long, value_name = "VELOCITY", default_value = "2000")]
    pub velocity: String,
    /// Increase of a constant --velocity per second of image time (m/s/s); only with a constant.
    #[arg(long, default_value_t = 0.0)]
    pub velocity_gradient: f32,
    /// Effective eta for the VTI traveltime (dimensionless, >= 0).
    #[arg(long, default_value_t = 0.08)]
    pub eta: f32,
    /// Migration aperture: largest midpoint-to-column distance (m).
    #[arg(long, default_value_t = 800.0)]
    pub aperture: f32,
    /// Stretch mute: samples with traveltime above (1 + stretch) x image time are muted.
    #[arg(long, default_value_t = 0.5)]
    pub stretch: f32,
    /// Synthetic traces (3D survey, offsets to 2000 m) and their length (samples of 4 ms).
    #[arg(long, default_value_t = 20000)]
    pub traces: usize,
    #[arg(long, default_value_t = 600)]
    pub ns: usize,
    /// GPU: columns (warps) per block, register cap, traces through a texture.
    #[arg(long, default_value_t = GpuTuning::fastest().warps)]
    pub warps: u32,
    #[arg(long, default_value_t = GpuTuning::fastest().max_regs)]
    pub max_regs: u32,
    #[arg(long)]
    pub texture: bool,
    /// Input traces (SEG-Y or Seismic Unix; source and group coordinates from the trace headers,
    /// with their scalar). Default: a built-in synthetic survey of --traces traces over the image.
    #[arg(long)]
    pub input: Option<PathBuf>,
    /// How the input file is read.
    #[command(flatten)]
    pub read: super::input::InputArgs,
    /// Image origin: x of the first inline column, y of the first crossline column (m); with
    /// --input, default: the data's first CDP (synthetic: 0, 0).
    #[arg(long)]
    pub x0: Option<f64>,
    #[arg(long)]
    pub y0: Option<f64>,
    /// Output image: .npy (float32, shape (nx, ny, noff, nz)), .sgy/.segy (SEG-Y) or .su (Seismic Unix):
    /// one trace per image column and offset class, bin centre in CDP X/Y, two-way vertical time.
    #[arg(long, short, alias = "out", default_value = "pstm-image.sgy")]
    pub output: PathBuf,
}

#[derive(clap::Args, Debug)]
pub struct AccuracyArgs {
    /// Traveltime formula: dsr or vti.
    #[arg(long = "traveltime-model", default_value = "dsr")]
    pub model: TraveltimeModel,
    /// Input traces (the paper used 1000).
    #[arg(long, default_value_t = 1000)]
    pub traces: usize,
    /// White noise instead of band-limited (Ricker) data.
    #[arg(long)]
    pub white_noise: bool,
    /// Ricker peak frequency of the band-limited data (Hz).
    #[arg(long, default_value_t = 25.0)]
    pub ricker_hz: f32,
    /// Dynamic tolerance (s); default: the smallest that is as fast as static8.
    #[arg(long)]
    pub tolerance: Option<f32>,
    /// Also write the report as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// small (seconds on a CPU) or paper (NX 50, NY 1097, NZ 1504, 450,000 traces).
    #[arg(long, default_value = "small")]
    pub size: BenchSize,
    /// GPU trace count (default: 450,000 for `paper`, as in the paper).
    #[arg(long)]
    pub traces: Option<usize>,
    /// Skip the remaining GPU measurements after this many seconds.
    #[arg(long)]
    pub budget_s: Option<f64>,
    /// Only these mode-model pairs (comma-separated, e.g. `static8-dsr,exact-dsr`; default all).
    #[arg(long, value_delimiter = ',')]
    pub modes: Vec<String>,
    /// Only the GPU variants whose name contains one of these (comma-separated, e.g.
    /// `smem,w8-r80-lockstep-batched`); `gpu-best` always runs.
    #[arg(long, value_delimiter = ',')]
    pub variants: Vec<String>,
    /// Also write the rows as JSON.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn run(args: &Args, global: &Global) -> anyhow::Result<()> {
    match &args.command {
        Command::Migrate(a) => run_migrate(a, global),
        Command::Accuracy(a) => {
            let backend = global.backend()?;
            let cfg = AccuracyConfig {
                traces: a.traces,
                white_noise: a.white_noise,
                model: a.model,
                tolerance: a.tolerance,
                ricker_hz: a.ricker_hz,
            };
            let r = pb::accuracy(&backend, &cfg)?;
            println!("{r}");
            if let Some(path) = &a.json {
                pb::write_json(path, &r)?;
            }
            Ok(())
        }
        Command::Bench(a) => {
            let backend = global.backend()?;
            let rows = pb::bench_filtered(&backend, a.size, a.traces, a.budget_s, &a.modes, &a.variants)?;
            println!("{:<14} {:<52} {:<11} {:>11} {:>14}  check", "workload", "variant", "scope", "median s", "contrib/s");
            for r in &rows {
                println!("{:<14} {:<52} {:<11} {:>11.4} {:>14.3e}  {}", r.workload, r.variant, r.scope, r.stats.median_ms * 1e-3,
                    r.throughput(), r.check);
            }
            if let Some(path) = &a.json {
                pb::write_json(path, &rows)?;
            }
            Ok(())
        }
    }
}

impl MigrateArgs {
    fn grid(&self) -> GridRequest {
        GridRequest { x0: self.x0, dx: self.dx, nx: self.nx, y0: self.y0, dy: self.dy, ny: self.ny, tau0: None, dtau: self.dtau,
            ntau: self.nz }
    }
}

/// The built-in synthetic survey's image grid (it is made over it) where the options leave it open.
const SYNTHETIC_GRID: ImageGrid = ImageGrid { x0: 0.0, dx: 25.0, nx: 40, y0: 0.0, dy: 25.0, ny: 40, tau0: 0.0, dtau: 0.004, ntau: 500 };

fn run_migrate(a: &MigrateArgs, global: &Global) -> anyhow::Result<()> {
    global.prepare_output(&a.output)?;
    let mode = TraveltimeMode::parse(&a.tt.traveltime, a.tt.tolerance)?;
    #[cfg(feature = "mpi")]
    if let Some(cluster) = global.cluster() {
        let g = match &a.input {
            Some(path) => {
                // The grid from the chosen traces' headers alone (every rank the same).
                let (r, headers, choice) = seisgpu_host::io::input::choose_traces(path, &a.read.options())?;
                let chosen: Vec<_> = choice.indices.iter().map(|&i| headers[i]).collect();
                let info = r.info();
                seisgpu_host::grid::complete_from_headers(&a.grid(), &chosen, info.ns, info.dt, info.t0)?.0
            }
            None => a.grid().or(&SYNTHETIC_GRID),
        };
        return migrate_distributed(a, global, &cluster, &pstm_params(a, &g)?, mode);
    }
    let (p, traces) = match &a.input {
        Some(path) => {
            let traces = a.read.read(path)?.1;
            let (g, line) = seisgpu_host::grid::complete(&a.grid(), &traces)?;
            if let Some(line) = line {
                eprintln!("pstm: {line}");
            }
            let p = pstm_params(a, &g)?;
            p.validate(mode, a.tt.model)?;
            (p, traces)
        }
        None => {
            let p = pstm_params(a, &a.grid().or(&SYNTHETIC_GRID))?;
            p.validate(mode, a.tt.model)?;
            let h = pb::survey(a.traces, &p, a.aperture as f64 * 0.5, 2000.0, 41);
            let traces = pb::band_limited(h, a.ns, 0.004, 25.0, &p);
            (p, traces)
        }
    };
    let model = a.tt.model;
    let t = std::time::Instant::now();
    let img = migrate(&traces, &p, mode, model, &global.devices()?)?;
    let secs = t.elapsed().as_secs_f64();
    eprintln!("pstm: {} traces used, {} contributions in {secs:.2} s ({:.3e}/s), {} {} traveltimes",
        img.stats.traces_used, img.stats.contributions, img.stats.contributions as f64 / secs, mode.name(), model.name());
    let grid = image_grid(&img, &p);
    let data = img.unpadded();
    output::write_grid(&a.output, &grid_image(&img, &p, &grid, &data))
}

/// v_rms per image sample of `--velocity` (and `--velocity-gradient`) on the image grid `g`.
fn vrms(a: &MigrateArgs, g: &ImageGrid) -> anyhow::Result<Vec<f32>> {
    let what = format!("--velocity {}", a.velocity);
    let model = VelocityModel::parse(&a.velocity).with_context(|| what.clone())?;
    match &model {
        VelocityModel::Function(f) if f.knots.len() == 1 && f.domain == Domain::Time => {
            let v0 = f.knots[0].1;
            Ok((0..g.ntau).map(|z| v0 + a.velocity_gradient * (g.tau0 + z as f32 * g.dtau)).collect())
        }
        _ if a.velocity_gradient != 0.0 => {
            seisgpu_host::bail_param!("velocity-gradient", "--velocity-gradient {} applies to a constant --velocity only; {what} is a velocity function", a.velocity_gradient)
        }
        _ => commands::pstm_vrms(&model, g, &what),
    }
}

/// The parameters of the options on the image grid `g`.
fn pstm_params(a: &MigrateArgs, g: &ImageGrid) -> anyhow::Result<PstmParams> {
    let model = a.tt.model;
    Ok(PstmParams {
        nx: g.nx,
        ny: g.ny,
        x0: g.x0,
        y0: g.y0,
        dx: g.dx,
        dy: g.dy,
        nz: g.ntau,
        tau0: g.tau0,
        dtau: g.dtau,
        noff: a.noff,
        offset0: a.offset0,
        doffset: a.doffset,
        vrms: vrms(a, g)?,
        eta: if model == TraveltimeModel::Vti { vec![a.eta; g.ntau] } else { vec![] },
        aperture: a.aperture,
        stretch: a.stretch,
        dynamic_max_step: a.tt.max_step,
        // The measured fastest shape; `--texture` selects the paper's trace path (no shared-memory staging).
        gpu: if a.texture {
            GpuTuning { warps: a.warps, max_regs: a.max_regs, texture: true, ..GpuTuning::read_only_cache() }
        } else {
            // (The lean static8 kernels are written for the default block of 8 warps.)
            GpuTuning { warps: a.warps, max_regs: a.max_regs, tile_x: if a.warps % 2 == 0 { 2 } else { 1 },
                lean: a.warps == GpuTuning::fastest().warps, ..GpuTuning::fastest() }
        },
    })
}

/// `pstm migrate` as one rank of an MPI job on the parameters `p`.
#[cfg(feature = "mpi")]
fn migrate_distributed(a: &MigrateArgs, global: &Global, cluster: &seisgpu_host::exec::mpi::Cluster, p: &PstmParams,
    mode: TraveltimeMode) -> anyhow::Result<()> {
    let (model, p) = (a.tt.model, p.clone());
    p.validate(mode, model)?;
    let synthetic = || {
        let h = pb::survey(a.traces, &p, a.aperture as f64 * 0.5, 2000.0, 41);
        pb::band_limited(h, a.ns, 0.004, 25.0, &p)
    };
    use seisgpu_host::exec::mpi::{self, TraceSource};
    use seisgpu_host::io::output::OutputFormat;
    let format = OutputFormat::from_path(&a.output)?;
    if format == OutputFormat::Su {
        seisgpu_host::bail_param!("output", "{}: under MPI the image is written as .npy or SEG-Y (each rank its block); run without MPI for SU",
            a.output.display());
    }
    let devices = global.rank_devices(cluster)?;
    let t = std::time::Instant::now();
    let made;
    let mut chosen = None;
    let source = match &a.input {
        Some(path) => a.read.mpi_source(path, &mut chosen)?,
        None => {
            made = synthetic();
            TraceSource::Memory(&made)
        }
    };
    let ranked = seisgpu_host::pstm::distributed::migrate(cluster, &source, &p, mode, model, &devices)?;
    let img = &ranked.image;
    if cluster.is_root() {
        eprintln!("pstm: {} ranks, {} traces used, {} contributions in {:.2} s", cluster.size(), img.stats.traces_used,
            img.stats.contributions, t.elapsed().as_secs_f64());
    }
    // Each rank sums and writes its block of image traces (their padding dropped).
    match format {
        OutputFormat::Npy => mpi::write_npy_sum(cluster, &a.output, &[img.nx, img.ny, img.noff, img.nz], ranked.partial,
            img.nz_pad, img.nz),
        _ => {
            let grid = image_grid(img, &p);
            let (headers, opts, dt, t0) = grid_image(img, &p, &grid, &[]).segy_layout();
            let partial = ranked.partial.map(|v| v.chunks(img.nz_pad).flat_map(|c| c[..img.nz].iter().copied()).collect());
            mpi::write_segy_sum(cluster, &a.output, &headers, &opts, img.nz, dt, t0, partial)
        }
    }
}

/// The image's traces as a grid: x, then y, then offset class (the .npy's order), inline = ix + 1,
/// offset = the class's centre offset0 + (k + 1/2) doffset (0 for a single class: all offsets).
fn image_grid(img: &PstmImage, p: &PstmParams) -> Grid {
    Grid { nx: img.nx, ny: img.ny, x0: p.x0, y0: p.y0, dx: p.dx, dy: p.dy,
        class_offsets: if img.noff > 1 { (0..img.noff).map(|k| (p.offset0 + (k as f32 + 0.5) * p.doffset) as f64).collect() }
            else { Vec::new() },
        order: TraceOrder::XYClass, inline_along_y: false }
}

/// The unpadded image `data` (empty for a layout alone) on `grid`.
fn grid_image<'a>(img: &PstmImage, p: &PstmParams, grid: &'a Grid, data: &'a [f32]) -> GridImage<'a> {
    GridImage {
        title: "seisgpu pstm: prestack time migration image, TWO-WAY vertical time".into(),
        grid, axis: SampleAxis::Time { n: img.nz, step: p.dtau, first: p.tau0 }, data,
        npy_shape: vec![img.nx, img.ny, img.noff, img.nz],
    }
}

impl super::Subcommand for Args {
    fn run(&self, global: &super::Global) -> anyhow::Result<()> { run(self, global) }
    fn library_progress(&self) -> bool { matches!(self.command, Command::Migrate(_)) }
    fn path(&self) -> String { match self.command { Command::Migrate(_) => "pstm migrate", _ => "pstm" }.to_string() }
}
