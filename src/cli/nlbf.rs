//! `seisgpu nlbf estimate|enhance` and `seisgpu nmo`.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use seisgpu_lab::bench::BenchSize;
use seisgpu_host::io::output::{self, OutputFormat};
use seisgpu_host::nlbf::{self, Aperture, CoordKey, EnhanceParams, EstimateParams, Range, Setup};
use seisgpu_host::velocity::{Domain, VelocityModel};
use seisgpu_host::{Backend, TraceSet};

use super::Global;

#[derive(clap::Args, Debug)]
#[command(about = "Nonlinear beamforming: the 2+2+1 search for local traveltime operators and the enhancement",
    long_about = "Nonlinear beamforming (Sun, Silvestrov & Bakulin 2022). The local traveltime operator of an NLBF \
    parameter trace at (x0, y0) and time t0 is dt = A dx + B dy + C dx dy + D dx^2 + E dy^2 (dx = x - x0, dy = y - y0). \
    `estimate` finds {A, B, C, D, E} and the semblance S for every parameter trace and time sample with the 2+2+1 \
    method: scan (A, D) with B = C = E = 0 on aperture 1, scan (B, E) with A = C = D = 0 on aperture 2, then scan C \
    with the others fixed on aperture 3. `enhance` stacks every trace with its neighbours along the operators.")]
pub struct Args {
    #[command(subcommand)]
    pub command: NlbfCommand,
}

#[derive(clap::Subcommand, Debug)]
pub enum NlbfCommand {
    /// 2+2+1 search: {A, B, C, D, E, S} for every parameter trace and time sample (.npy volumes).
    Estimate(EstimateArgs),
    /// Search, then stack every trace with its neighbours along the interpolated operators.
    Enhance(EnhanceArgs),
}

/// Where the gather comes from.
#[derive(clap::Args, Debug)]
pub struct InputArgs {
    /// Input SEG-Y or Seismic Unix file (one prestack gather: cross-spread, shot or receiver gather, or a 2D line).
    #[arg(long, conflicts_with = "synthetic")]
    pub input: Option<PathBuf>,
    /// Built-in synthetic gather instead of a file: `synthetic-2d` (2D line, the paper's synthetic
    /// example), `crossspread-3d` (the paper's field cross-spread shape) or `demo` (small, with
    /// known clean events). Its preset search parameters apply unless given below.
    #[arg(long)]
    pub synthetic: Option<String>,
    /// Size of the synthetic gather: `small` (seconds on a laptop) or `paper` (the benchmark's full size).
    #[arg(long, default_value = "small")]
    pub size: BenchSize,
    /// How the input file is read.
    #[command(flatten)]
    pub read: super::input::InputArgs,
}

/// The search parameters. Unset ones come from `--preset` (or the synthetic gather's preset).
#[derive(clap::Args, Debug)]
pub struct SearchArgs {
    /// Preset of every search parameter: `synthetic-2d` (the paper's 2D values: spacing 140 m,
    /// apertures 400x35, 35x400, 400x400 m, A, B in [-1e-4:1e-5:1e-4] s/m, C, D, E in
    /// [-1.25e-7:0.25e-7:1.25e-7] s/m^2, window 11, x = receiver-x, y = source-x) or
    /// `crossspread-3d` (spacing 50 m, apertures 300x35, 35x300, 300x300 m, A, B in
    /// [-1e-3:1.33e-5:1e-3] s/m, x = receiver-x, y = source-y).
    #[arg(long)]
    pub preset: Option<String>,
    /// Header field giving the operator's x coordinate: receiver-x, receiver-y, source-x, source-y,
    /// receiver-station, source-station, midpoint-x, midpoint-y, offset, inline, crossline, cdp,
    /// channel, ffid.
    #[arg(long)]
    pub x: Option<CoordKey>,
    /// Header field giving the operator's y coordinate (same choices as --x).
    #[arg(long)]
    pub y: Option<CoordKey>,
    /// Metres per unit of the x header value (1 for positions; the station spacing in m for
    /// station numbers).
    #[arg(long)]
    pub x_scale: Option<f64>,
    /// Metres per unit of the y header value.
    #[arg(long)]
    pub y_scale: Option<f64>,
    /// Spacing of the NLBF parameter traces along x (m).
    #[arg(long)]
    pub spacing_x: Option<f64>,
    /// Spacing of the NLBF parameter traces along y (m).
    #[arg(long)]
    pub spacing_y: Option<f64>,
    /// Aperture of the (A, D) scan: x extent by y extent in metres, e.g. `400x35`.
    #[arg(long)]
    pub aperture_ad: Option<ApertureArg>,
    /// Aperture of the (B, E) scan (m), e.g. `35x400`.
    #[arg(long)]
    pub aperture_be: Option<ApertureArg>,
    /// Aperture of the C scan (m), e.g. `400x400`.
    #[arg(long)]
    pub aperture_c: Option<ApertureArg>,
    /// Time window N in samples (odd: t0 - (N-1)/2 .. t0 + (N-1)/2).
    #[arg(long)]
    pub window: Option<usize>,
    /// Search range of A (s/m) as min:step:max.
    #[arg(long, allow_hyphen_values = true)]
    pub a: Option<Range>,
    /// Search range of B (s/m) as min:step:max.
    #[arg(long, allow_hyphen_values = true)]
    pub b: Option<Range>,
    /// Search range of C (s/m^2) as min:step:max.
    #[arg(long, allow_hyphen_values = true)]
    pub c: Option<Range>,
    /// Search range of D (s/m^2) as min:step:max.
    #[arg(long, allow_hyphen_values = true)]
    pub d: Option<Range>,
    /// Search range of E (s/m^2) as min:step:max.
    #[arg(long, allow_hyphen_values = true)]
    pub e: Option<Range>,
    /// Smallest apparent velocity the search keeps (m/s): with a file input and no --preset, the
    /// ranges of A and B reach +-1/velocity s/m (steps from the sample interval and the apertures,
    /// C, D, E from the apertures; printed); the default keeps the direct wave and refractions.
    #[arg(long, default_value_t = nlbf::slopes::DEFAULT_MIN_VELOCITY)]
    pub min_velocity: f64,
    /// Implementation: `auto` (fast GPU version when a GPU is used, else the CPU reference),
    /// `cpu`, `gpu-paper` (the paper's GPU design) or `gpu-fast`.
    #[arg(long, default_value = "auto")]
    pub variant: String,
}

/// An aperture `XxY` in metres.
#[derive(Debug, Clone, Copy)]
pub struct ApertureArg(pub Aperture);

impl std::str::FromStr for ApertureArg {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (x, y) = s.split_once(['x', 'X']).ok_or_else(|| format!("aperture `{s}` is not <x>x<y> (metres)"))?;
        let num = |v: &str| v.trim().parse::<f64>().map_err(|e| format!("aperture `{s}`: {e}"));
        Ok(ApertureArg(Aperture { x: num(x)?, y: num(y)? }))
    }
}

#[derive(clap::Args, Debug)]
pub struct EstimateArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub search: SearchArgs,
    /// Output folder: A, B, C, D, E, S volumes (.npy of ny x nx x samples, or SEG-Y/SU with one trace
    /// per parameter trace: see --format), positions.npy (m), nlbf.json.
    #[arg(long = "output", short, alias = "out", value_name = "OUTPUT", default_value = "nlbf-estimate")]
    pub out: PathBuf,
    /// Format of the volumes in the output folder: npy, sgy (SEG-Y) or su (Seismic Unix).
    #[arg(long, default_value = "npy")]
    pub format: FolderFormat,
}

#[derive(clap::Args, Debug)]
pub struct EnhanceArgs {
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub search: SearchArgs,
    /// Neighbours stacked with each trace: x extent by y extent in metres (default: the C aperture).
    #[arg(long)]
    pub aperture: Option<ApertureArg>,
    /// Output: a file (.sgy, .segy, .su or .npy) for the enhanced traces alone, in the input's
    /// geometry; or a folder for enhanced, input (traces x samples) and the estimate's volumes,
    /// in --format.
    #[arg(long = "output", short, alias = "out", value_name = "OUTPUT", default_value = "nlbf-enhanced.sgy")]
    pub out: PathBuf,
    /// Format of the files in an output folder: npy, sgy (SEG-Y) or su (Seismic Unix).
    #[arg(long, default_value = "npy")]
    pub format: FolderFormat,
}

/// The format of the files of an output folder (`--format`).
#[derive(Debug, Clone, Copy)]
pub struct FolderFormat(pub OutputFormat);

impl std::str::FromStr for FolderFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        OutputFormat::from_path(std::path::Path::new(&format!("x.{s}"))).map(FolderFormat)
            .map_err(|_| format!("unknown format `{s}` (npy, sgy, segy or su)"))
    }
}

impl FolderFormat {
    fn ext(self) -> &'static str {
        match self.0 {
            OutputFormat::Npy => "npy",
            OutputFormat::Segy => "sgy",
            OutputFormat::Su => "su",
        }
    }
}

/// Where `nlbf enhance` writes: one file (by its extension), or a folder.
enum EnhanceOutput {
    File,
    Folder,
}

/// Checks the output before the search: a file's folder, or the output folder (made when missing).
fn enhance_output(a: &EnhanceArgs) -> anyhow::Result<EnhanceOutput> {
    if a.out.extension().is_some() && !a.out.is_dir() {
        output::prepare(&a.out)?;
        Ok(EnhanceOutput::File)
    } else {
        output::prepare_dir(&a.out)?;
        Ok(EnhanceOutput::Folder)
    }
}

/// Checks the estimate's output folder before the search (made when missing).
fn estimate_output(a: &EstimateArgs) -> anyhow::Result<()> {
    if a.out.extension().is_some() && !a.out.is_dir() && OutputFormat::from_path(&a.out).is_ok() {
        seisgpu_host::bail_param!("output", "{}: `nlbf estimate` writes a folder of volumes; give a folder name (and --format sgy or su for SEG-Y or SU volumes)",
            a.out.display());
    }
    output::prepare_dir(&a.out)
}

#[derive(clap::Args, Debug)]
#[command(about = "NMO correction with a stretch mute (as the paper applies before the 2+2+1 search)")]
pub struct NmoArgs {
    #[command(flatten)]
    pub input: InputArgs,
    /// RMS velocity v_rms(t) (m/s): a constant; time:velocity pairs (s:m/s), comma-separated,
    /// times increasing, e.g. `0:1500,1.0:2200,2.5:3000` (linear in between, constant beyond the
    /// ends); a text file of per-CMP functions (what `velan -o` writes); a .npy grid with its JSON
    /// sidecar; or a SEG-Y velocity volume. Per-CMP models are interpolated to each trace's CDP.
    #[arg(long, value_name = "VELOCITY")]
    pub velocity: String,
    /// Stretch mute: samples whose stretch (t - t0) / t0 exceeds this are zeroed (0.5 = 50 %).
    #[arg(long, default_value_t = 0.5)]
    pub max_stretch: f32,
    /// Output: .sgy/.segy (SEG-Y) or .su (Seismic Unix) with the input's trace headers, or .npy
    /// (float32, traces x samples).
    #[arg(long = "output", short, alias = "out", value_name = "OUTPUT", default_value = "nmo.sgy")]
    pub out: PathBuf,
}

/// Reads the gather: a synthetic one, or SEG-Y.
fn read_input(a: &InputArgs) -> anyhow::Result<(TraceSet, Option<EstimateParams>)> {
    match (&a.input, &a.synthetic) {
        (_, Some(name)) => {
            let (t, p) = match name.as_str() {
                "synthetic-2d" => nlbf::synth::synthetic_2d(a.size),
                "crossspread-3d" => nlbf::synth::crossspread_3d(a.size),
                "demo" => {
                    let (_, noisy, p) = seisgpu_lab::nlbf::demo_gather();
                    (noisy, p)
                }
                other => seisgpu_host::bail_param!("synthetic", "unknown synthetic gather `{other}` (synthetic-2d, crossspread-3d or demo)"),
            };
            Ok((t, Some(p)))
        }
        (Some(path), None) => Ok((a.read.read(path)?.1, None)),
        (None, None) => seisgpu_host::bail_param!("input", "give an input: --input <SEG-Y file> or --synthetic <name>"),
    }
}

/// The search parameters: the preset's, or with a file input and no `--preset` the search ranges
/// from the data (`layout`: its headers and sampling; printed), then the options given.
fn params_from(s: &SearchArgs, preset: Option<EstimateParams>, layout: Option<&TraceSet>) -> anyhow::Result<EstimateParams> {
    let from_data = s.preset.is_none() && preset.is_none();
    let mut p = match s.preset.as_deref() {
        Some("synthetic-2d") => nlbf::synth::params_synthetic_2d(),
        Some("crossspread-3d") => nlbf::synth::params_crossspread_3d(),
        Some(o) => seisgpu_host::bail_param!("preset", "unknown preset `{o}` (synthetic-2d or crossspread-3d)"),
        None => preset.unwrap_or_else(nlbf::synth::params_synthetic_2d),
    };
    let c = &mut p.coords;
    if let Some(v) = s.x { c.x = v; }
    if let Some(v) = s.y { c.y = v; }
    if let Some(v) = s.x_scale { c.x_scale = v; }
    if let Some(v) = s.y_scale { c.y_scale = v; }
    if let Some(v) = s.spacing_x { p.spacing_x = v; }
    if let Some(v) = s.spacing_y { p.spacing_y = v; }
    if let Some(v) = s.aperture_ad { p.aperture_ad = v.0; }
    if let Some(v) = s.aperture_be { p.aperture_be = v.0; }
    if let Some(v) = s.aperture_c { p.aperture_c = v.0; }
    if let Some(v) = s.window { p.window = v; }
    if let (true, Some(t)) = (from_data, layout) {
        let (space, line) = nlbf::slopes::from_data(t, &p, s.min_velocity)?;
        p.search = space;
        eprintln!("nlbf: {line}");
    }
    if let Some(v) = s.a { p.search.a = v; }
    if let Some(v) = s.b { p.search.b = v; }
    if let Some(v) = s.c { p.search.c = v; }
    if let Some(v) = s.d { p.search.d = v; }
    if let Some(v) = s.e { p.search.e = v; }
    Ok(p)
}

/// The search over the devices of `--gpus` (split by parameter traces): the estimate and the
/// variant's name.
fn run_estimate_split(devices: &[Backend], t: &TraceSet, p: &EstimateParams, variant: &str)
    -> anyhow::Result<(nlbf::Estimate, String)> {
    let v = variant_on(devices, variant)?;
    let est = nlbf::estimate_split(devices, t, p, v)?;
    eprintln!("nlbf: {} x {} parameter traces in {} work items on {} devices", est.grid.nx, est.grid.ny,
        nlbf::work_items(est.grid.len()).len(), devices.len());
    Ok((est, format!("{} on {} devices", v.map_or("auto".to_string(), |v| format!("{v:?}")), devices.len())))
}

/// The variant `--variant` forces on `devices` (several of `--gpus`, or an MPI rank's): `None`
/// for `auto` (chosen per setup), an error for a GPU variant without GPUs.
fn variant_on(devices: &[Backend], variant: &str) -> anyhow::Result<Option<nlbf::Variant>> {
    let gpus = devices.iter().any(|b| b.gpu().is_some());
    Ok(match variant {
        "auto" => None,
        "cpu" => Some(nlbf::Variant::Cpu),
        "gpu-fast" if gpus => Some(nlbf::Variant::GpuFast),
        "gpu-paper" if gpus => Some(nlbf::Variant::GpuPaper),
        "gpu-fast" | "gpu-paper" => seisgpu_host::bail_param!("variant", "--variant {variant} needs GPUs (--device gpu or auto with --gpus)"),
        o => seisgpu_host::bail_param!("variant", "unknown variant `{o}` (auto, cpu, gpu-paper, gpu-fast)"),
    })
}

/// Runs the search with the requested variant; returns the estimate and the variant's name.
fn run_estimate(backend: &Backend, t: &TraceSet, p: &EstimateParams, variant: &str) -> anyhow::Result<(nlbf::Estimate, String)> {
    let v = match (variant, backend) {
        ("auto", Backend::Cpu) | ("cpu", _) => nlbf::Variant::Cpu,
        ("auto", Backend::Gpu(_)) | ("gpu-fast", _) => nlbf::Variant::GpuFast,
        ("gpu-paper", _) => nlbf::Variant::GpuPaper,
        (o, _) => seisgpu_host::bail_param!("variant", "unknown variant `{o}` (auto, cpu, gpu-paper, gpu-fast)"),
    };
    if v != nlbf::Variant::Cpu && backend.gpu().is_none() {
        seisgpu_host::bail_param!("variant", "--variant {variant} needs a GPU (and --device gpu or auto)");
    }
    let setup = Setup::new(t, p)?;
    eprintln!("nlbf: {} traces x {} samples, {} x {} parameter traces, {} (A, D) x {} (B, E) x {} C combinations, {:?}",
        setup.ntr(), setup.ns, setup.grid.nx, setup.grid.ny, setup.tables.n_ad(), setup.tables.n_be(), setup.tables.nc, v);
    let (code, s) = match v {
        nlbf::Variant::GpuFast => {
            let g = backend.gpu().unwrap();
            match nlbf::gpu::FastPlan::new(g, &setup, None) {
                Ok(plan) => plan.run(g, &setup, &t.data)?,
                Err(why) => {
                    eprintln!("nlbf: the fast GPU kernels do not apply ({why}); using the paper-faithful kernel");
                    nlbf::gpu::estimate_paper(g, &setup, &t.data)?
                }
            }
        }
        other => nlbf::estimate_with(other, backend, &setup, &t.data)?,
    };
    Ok((nlbf::Estimate::from_setup(&setup, code, s), format!("{v:?}")))
}

/// The gather's source for the MPI ranks (a synthetic gather is made on every rank, a file is read
/// by parts), its preset search parameters, and the variant of `--variant`.
#[cfg(feature = "mpi")]
fn rank_input<'a>(input: &'a InputArgs, variant: &str, devices: &[Backend], cluster: &seisgpu_host::exec::mpi::Cluster,
    synthetic: &'a mut Option<TraceSet>) -> anyhow::Result<(seisgpu_host::exec::mpi::TraceSource<'a>, Option<EstimateParams>,
    Option<nlbf::Variant>)> {
    use seisgpu_host::exec::mpi::TraceSource;
    let mut preset = None;
    if input.synthetic.is_some() {
        let (t, p) = cluster.agree("making the gather", read_input(input))?;
        *synthetic = Some(t);
        preset = p;
    }
    let source = match &input.input {
        _ if synthetic.is_some() => TraceSource::Memory(synthetic.as_ref().expect("made above")),
        Some(path) => input.read.mpi_source(path, synthetic)?,
        None => seisgpu_host::bail_param!("input", "give an input: --input <SEG-Y file> or --synthetic <name>"),
    };
    Ok((source, preset, variant_on(devices, variant)?))
}

/// A SEG-Y input's headers and sampling (no samples), for the search ranges under MPI.
#[cfg(feature = "mpi")]
fn rank_layout(input: &InputArgs) -> anyhow::Result<Option<TraceSet>> {
    let (Some(path), None) = (&input.input, &input.synthetic) else { return Ok(None) };
    let mut r = seisgpu_host::io::segy::SegyReader::open(path).with_context(|| format!("opening {}", path.display()))?;
    let headers = r.read_headers().with_context(|| format!("reading the trace headers of {}", path.display()))?;
    let i = r.info();
    Ok(Some(TraceSet { headers, data: Vec::new().into(), ns: i.ns, dt: i.dt, t0: i.t0 }))
}

/// `nlbf estimate` as one rank of an MPI job: every rank reads the trace headers and plans the
/// whole search, searches its block of parameter traces from the input traces their apertures
/// hold (the only ones it reads of a SEG-Y file) and writes its block of the volumes.
#[cfg(feature = "mpi")]
fn estimate_distributed(a: &EstimateArgs, global: &Global, cluster: &seisgpu_host::exec::mpi::Cluster) -> anyhow::Result<()> {
    use seisgpu_host::nlbf::distributed;
    if a.format.0 != OutputFormat::Npy {
        seisgpu_host::bail_param!("format", "under MPI `nlbf estimate` writes .npy volumes only (each rank its block); run without MPI for --format {}",
            a.format.ext());
    }
    let t0 = Instant::now();
    let devices = global.rank_devices(cluster)?;
    let mut synthetic = None;
    let (source, preset, v) = rank_input(&a.input, &a.search.variant, &devices, cluster, &mut synthetic)?;
    let p = params_from(&a.search, preset, rank_layout(&a.input)?.as_ref())?;
    let share = distributed::estimate(cluster, &source, &p, &devices, v)?;
    let secs = t0.elapsed().as_secs_f64();
    let name = format!("{} on {} ranks", v.map_or("auto".to_string(), |v| format!("{v:?}")), cluster.size());
    distributed::write_estimate(cluster, &a.out, &share, nlbf::output::run_info(&name, devices[0].name(), secs, &p))
        .with_context(|| format!("writing the estimate to {}", a.out.display()))?;
    if cluster.is_root() {
        println!("2+2+1 search: {} estimations in {secs:.3} s ({name}); wrote 8 files to {}", share.setup.estimations(),
            a.out.display());
    }
    Ok(())
}

/// `nlbf enhance` as one rank of an MPI job: the search as `nlbf estimate` splits it, the picks
/// gathered on every rank, then each rank enhances its block of the traces from the traces their
/// neighbours are (the only ones it reads of a SEG-Y file) and writes its block of every output.
#[cfg(feature = "mpi")]
fn enhance_distributed(a: &EnhanceArgs, global: &Global, cluster: &seisgpu_host::exec::mpi::Cluster) -> anyhow::Result<()> {
    use seisgpu_host::nlbf::distributed;
    if a.out.extension().is_some() || a.format.0 != OutputFormat::Npy {
        seisgpu_host::bail_param!("output", "{}: under MPI `nlbf enhance` writes a folder of .npy files only (each rank its block of traces); give a folder \
            without --format, or run without MPI for SEG-Y, SU or a single file", a.out.display());
    }
    let t0 = Instant::now();
    let devices = global.rank_devices(cluster)?;
    let mut synthetic = None;
    let (source, preset, v) = rank_input(&a.input, &a.search.variant, &devices, cluster, &mut synthetic)?;
    let p = params_from(&a.search, preset, rank_layout(&a.input)?.as_ref())?;
    let ep = EnhanceParams { aperture: a.aperture.map(|x| x.0).unwrap_or(p.aperture_c) };
    let part = distributed::enhance(cluster, &source, &p, &ep, &devices, v)?;
    let secs = t0.elapsed().as_secs_f64();
    let name = format!("{} on {} ranks", v.map_or("auto".to_string(), |v| format!("{v:?}")), cluster.size());
    distributed::write_enhanced(cluster, &a.out, &part, nlbf::output::run_info(&name, devices[0].name(), secs, &p))
        .with_context(|| format!("writing the enhancement to {}", a.out.display()))?;
    if cluster.is_root() {
        println!("enhanced {} traces in {secs:.3} s (search + enhancement, {name}); wrote {}", part.ntr,
            a.out.join("enhanced.npy").display());
    }
    Ok(())
}

pub fn run(args: &Args, global: &Global) -> anyhow::Result<()> {
    #[cfg(feature = "mpi")]
    if let Some(cluster) = global.cluster() {
        return match &args.command {
            NlbfCommand::Estimate(a) => estimate_distributed(a, global, &cluster),
            NlbfCommand::Enhance(a) => enhance_distributed(a, global, &cluster),
        };
    }
    let devices = global.backends()?;
    let backend = match &devices {
        Some(d) => d[0].clone(),
        None => global.backend()?,
    };
    let search = |t: &TraceSet, p: &EstimateParams, variant: &str| match &devices {
        Some(d) => run_estimate_split(d, t, p, variant),
        None => run_estimate(&backend, t, p, variant),
    };
    match &args.command {
        NlbfCommand::Estimate(a) => {
            estimate_output(a)?;
            let (t, preset) = read_input(&a.input)?;
            let p = params_from(&a.search, preset, Some(&t))?;
            let t0 = Instant::now();
            let (est, variant) = search(&t, &p, &a.search.variant)?;
            let secs = t0.elapsed().as_secs_f64();
            let files = nlbf::output::write_estimate_as(&a.out, &est,
                nlbf::output::run_info(&variant, backend.name(), secs, &p), a.format.0)
                .with_context(|| format!("writing the estimate to {}", a.out.display()))?;
            let s = &est.semblance;
            let mean = s.iter().map(|&v| v as f64).sum::<f64>() / s.len().max(1) as f64;
            println!("2+2+1 search: {} estimations in {secs:.3} s ({variant}); mean S {mean:.3}; {} of {} parameter traces \
                unestimated (empty aperture); wrote {} files to {}", s.len(), est.unestimated_count(), est.grid.len(), files.len(),
                a.out.display());
        }
        NlbfCommand::Enhance(a) => {
            let form = enhance_output(a)?;
            let (t, preset) = read_input(&a.input)?;
            let p = params_from(&a.search, preset, Some(&t))?;
            let t0 = Instant::now();
            let (est, variant) = search(&t, &p, &a.search.variant)?;
            let ep = EnhanceParams { aperture: a.aperture.map(|x| x.0).unwrap_or(p.aperture_c) };
            let out = match &devices {
                Some(d) => nlbf::enhance(&t, &p.coords, &est, &ep, d)?,
                None => nlbf::enhance(&t, &p.coords, &est, &ep, std::slice::from_ref(&backend))?,
            };
            let secs = t0.elapsed().as_secs_f64();
            let copied = nlbf::slopes::copied_traces(&t, &p.coords, &est)?;
            let written = match form {
                EnhanceOutput::File => {
                    output::write_traces(&a.out, &out, "seisgpu nlbf enhance: traces enhanced by nonlinear beamforming")?;
                    a.out.clone()
                }
                EnhanceOutput::Folder => {
                    nlbf::output::write_estimate_as(&a.out, &est, nlbf::output::run_info(&variant, backend.name(), secs, &p),
                        a.format.0)?;
                    let (enhanced, input) = (a.out.join(format!("enhanced.{}", a.format.ext())), a.out.join(format!("input.{}", a.format.ext())));
                    output::write_traces(&enhanced, &out, "seisgpu nlbf enhance: traces enhanced by nonlinear beamforming")?;
                    output::write_traces(&input, &t, "seisgpu nlbf enhance: the input traces")?;
                    enhanced
                }
            };
            println!("enhanced {} traces in {secs:.3} s (search + enhancement, {variant}); {} of {} parameter traces unestimated \
                (empty aperture), {copied} traces copied through unenhanced; wrote {}", out.len() - copied, est.unestimated_count(),
                est.grid.len(), written.display());
        }
    }
    Ok(())
}

pub fn run_nmo(args: &NmoArgs, global: &Global) -> anyhow::Result<()> {
    output::prepare(&args.out)?;
    let backend = global.backend()?;
    let (t, _) = read_input(&args.input)?;
    let model = VelocityModel::parse(&args.velocity).with_context(|| format!("--velocity {}", args.velocity))?;
    model.expect_domain(Domain::Time, &format!("nmo --velocity {}", args.velocity))?;
    let t0 = Instant::now();
    let out = nlbf::nmo_model(&backend, &t, &model, args.max_stretch).with_context(|| format!("--velocity {}", args.velocity))?;
    let secs = t0.elapsed().as_secs_f64();
    output::write_traces(&args.out, &out, "seisgpu nmo: NMO-corrected traces (stretch mute applied)")?;
    let muted = out.data.iter().filter(|&&v| v == 0.0).count();
    println!("NMO: {} traces in {secs:.3} s; {:.1} % of samples muted; wrote {}", out.len(),
        100.0 * muted as f64 / out.data.len().max(1) as f64, args.out.display());
    Ok(())
}

impl super::Subcommand for Args {
    fn run(&self, global: &super::Global) -> anyhow::Result<()> { run(self, global) }
    fn path(&self) -> String { match self.command { NlbfCommand::Estimate(_) => "nlbf estimate", NlbfCommand::Enhance(_) => "nlbf enhance" }.to_string() }
}

impl super::Subcommand for NmoArgs {
    fn run(&self, global: &super::Global) -> anyhow::Result<()> { run_nmo(self, global) }
    fn path(&self) -> String { "nmo".to_string() }
}
