//! `seisgpu wavepacket`: the 3D wave-packet transform (paper 3) and its applications.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args as ClapArgs, Subcommand};
use seisgpu_host::io::output::{self, Grid, GridImage, OutputFormat, SampleAxis, TraceOrder};
use seisgpu_host::wavepacket::apps::{self, InterpMethod};
use seisgpu_host::wavepacket::coeffs_io::{self, Header};
use seisgpu_host::wavepacket::fragments::{Fragmented, Tiling};
use seisgpu_host::wavepacket::{Finest, Frame, FrameParams, Gather, Params};

use super::Global;

#[derive(clap::Args, Debug)]
pub struct Args {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Volume -> wave-packet coefficients (.wpk file).
    Forward {
        #[command(flatten)]
        io: Io,
        #[command(flatten)]
        frame: FrameArgs,
    },
    /// Coefficients (.wpk) -> volume (.npy, .sgy or .su). The frame is read from the file.
    Inverse {
        /// Coefficient file written by `wavepacket forward`.
        #[arg(long)]
        input: PathBuf,
        /// Output volume: .npy (float32, shape n1 x n2 x samples), .sgy/.segy (SEG-Y) or .su (Seismic
        /// Unix): one trace per (n1, n2) position, inline = axis-1 index + 1, crossline = axis-2 index + 1.
        #[arg(long, short, alias = "out")]
        output: PathBuf,
        #[command(flatten)]
        sampling: VolumeSampling,
        /// Cube engines on every visible GPU (fragmented volumes).
        #[arg(long)]
        all_gpus: bool,
    },
    /// Random-noise suppression: hard threshold at k sigma per box.
    Denoise {
        #[command(flatten)]
        io: Io,
        #[command(flatten)]
        frame: FrameArgs,
        /// Noise standard deviation in data units; estimated from the finest scale when absent.
        #[arg(long)]
        sigma: Option<f32>,
        /// Threshold factor k (threshold = k sigma ||psi_b||, dimensionless).
        #[arg(long, default_value_t = 3.0)]
        k: f32,
    },
    /// Compression: keep the CR x samples largest coefficients, write the reconstruction.
    Compress {
        #[command(flatten)]
        io: Io,
        #[command(flatten)]
        frame: FrameArgs,
        /// Compression ratio CR = kept coefficients / samples (the paper's figures use 0.02).
        #[arg(long, default_value_t = 0.02)]
        cr: f64,
    },
    /// Interpolation of missing (dead) traces.
    Interpolate {
        #[command(flatten)]
        io: Io,
        #[command(flatten)]
        frame: FrameArgs,
        /// Trace mask (.npy, n1 x n2, nonzero = live). Default: all-zero traces are the dead ones.
        #[arg(long)]
        mask: Option<PathBuf>,
        /// `pocs` (iterative thresholding, decreasing threshold) or `single` (the paper's one pass).
        #[arg(long, default_value = "pocs")]
        method: String,
        /// POCS iterations.
        #[arg(long, default_value_t = 30)]
        iterations: usize,
        /// POCS final threshold as a fraction of the largest coefficient (dimensionless).
        #[arg(long, default_value_t = 0.002)]
        final_fraction: f32,
        /// Single pass: compression ratio CR of the kept coefficients.
        #[arg(long, default_value_t = 0.02)]
        cr: f64,
    },
    /// Prints the frame for a cube side: scales, wedges, box shapes, coefficients, redundancy.
    Frame {
        /// Cube side N (samples).
        #[arg(long, default_value_t = 256)]
        n: usize,
        #[command(flatten)]
        frame: FrameArgs,
    },
}

/// Input and output volumes.
#[derive(ClapArgs, Debug)]
pub struct Io {
    /// Input volume: a .npy file (float32/64, n1 x n2 x samples, samples fastest), or
    /// `synth:N1xN2xN3[:noise]` for the built-in synthetic cube (4 ms sampling, 25 Hz Ricker events;
    /// `noise` adds white noise at that fraction of the signal RMS).
    #[arg(long)]
    pub input: String,
    /// Output file: the volume as .npy (float32, n1 x n2 x samples), .sgy/.segy (SEG-Y) or .su
    /// (Seismic Unix: one trace per (n1, n2) position, inline = axis-1 index + 1, crossline = axis-2
    /// index + 1); coefficients (.wpk) for `forward`.
    #[arg(long, short, alias = "out")]
    pub output: PathBuf,
    #[command(flatten)]
    pub sampling: VolumeSampling,
    /// How a SEG-Y or SU cube is read.
    #[command(flatten)]
    pub read: super::input::InputArgs,
}

/// The samples axis of a volume written as traces.
#[derive(ClapArgs, Debug, Clone)]
pub struct VolumeSampling {
    /// Sample interval of the volume's last (fastest) axis for SEG-Y and SU output (ms; a .npy
    /// volume carries none).
    #[arg(long = "sample-interval", default_value_t = 4.0)]
    pub sample_interval_ms: f32,
}

/// Checks an output volume's path before the work: its format and folder, and under MPI a format
/// the ranks can write in blocks (.npy).
fn prepare_volume(path: &Path, global: &Global) -> Result<OutputFormat> {
    let format = global.prepare_output(path)?;
    if format != OutputFormat::Npy && global.mpi_ranks() {
        seisgpu_host::bail_param!("output", "{}: under MPI a volume is written as .npy (each rank its rows); run without MPI for SEG-Y or SU", path.display());
    }
    Ok(format)
}

/// Writes a volume (n1 x n2 x samples) by `path`'s extension.
fn write_volume(path: &Path, vol: &[f32], shape: [usize; 3], sampling: &VolumeSampling) -> Result<()> {
    if OutputFormat::from_path(path)? == OutputFormat::Npy {
        return coeffs_io::write_volume(path, vol, shape);
    }
    let dt = sampling.sample_interval_ms * 1e-3;
    if !(dt > 0.0 && dt.is_finite()) {
        seisgpu_host::bail_param!("sample-interval", "--sample-interval {} ms must be positive", sampling.sample_interval_ms);
    }
    let [n1, n2, n3] = shape;
    let grid = Grid { nx: n1, ny: n2, x0: 0.0, y0: 0.0, dx: 0.0, dy: 0.0, class_offsets: Vec::new(), order: TraceOrder::ClassXY,
        inline_along_y: false };
    output::write_grid(path, &GridImage {
        title: "seisgpu wavepacket: volume, x = axis 1, y = axis 2 (coordinates 0)".into(),
        grid: &grid, axis: SampleAxis::Time { n: n3, step: dt, first: 0.0 }, data: vol, npy_shape: shape.to_vec(),
    })
}

/// Transform options.
#[derive(ClapArgs, Debug, Clone)]
pub struct FrameArgs {
    /// USFFT accuracy epsilon (relative, in (0, 1)).
    #[arg(long, default_value_t = 1e-4)]
    pub eps: f64,
    /// Spectrum evaluation: `separable` (USFFT per axis), `stencil` (the paper's 3D USFFT) or
    /// `lattice` (exact FFT on the frame lattice).
    #[arg(long, default_value = "separable")]
    pub gather: Gather,
    /// Finest scale: `isotropic` (redundancy under 4) or `directional` (better denoising and
    /// interpolation, redundancy 5-7). Default: directional for denoise/interpolate, else isotropic.
    #[arg(long)]
    pub finest: Option<String>,
    /// Wedges per face axis at the finest directional scale (0 = automatic).
    #[arg(long, default_value_t = 0)]
    pub wedges: usize,
    /// Scales including the low-pass (0 = automatic).
    #[arg(long, default_value_t = 0)]
    pub scales: usize,
    /// Radial window transition, as a fraction of the scale's radius.
    #[arg(long, default_value_t = 0.5)]
    pub tau: f32,
    /// Angular window overlap, as a fraction of the wedge half-width.
    #[arg(long, default_value_t = 0.35)]
    pub beta: f32,
    /// Zero guard band added around each cube (samples per side).
    #[arg(long, default_value_t = 0)]
    pub guard: usize,
    /// Cube side for volumes that do not fit one cube (samples; the paper used 256); default: the
    /// one of 64, 128, 256 whose cubes hold the fewest samples for the volume (printed).
    #[arg(long)]
    pub cube: Option<usize>,
    /// Minimum overlap of neighbouring cubes (samples).
    #[arg(long, default_value_t = 32)]
    pub overlap: usize,
    /// Send cubes to every visible GPU.
    #[arg(long)]
    pub all_gpus: bool,
}

impl FrameArgs {
    /// The cube side: `--cube`, else chosen for the volume's shape (and said once, by `say`).
    fn cube_for(&self, shape: [usize; 3], say: bool) -> Result<usize> {
        if let Some(c) = self.cube {
            return Ok(c);
        }
        let (side, line) = seisgpu_host::wavepacket::auto_cube(shape, self.overlap)?;
        if say {
            eprintln!("seisgpu: {line}");
        }
        Ok(side)
    }

    fn params(&self, default_finest: Finest) -> Result<Params> {
        let finest = match self.finest.as_deref() {
            None => default_finest,
            Some("isotropic") => Finest::Isotropic,
            Some("directional") => Finest::Directional,
            Some(o) => seisgpu_host::bail_param!("finest", "--finest {o}: expected isotropic or directional"),
        };
        Ok(Params {
            eps: self.eps,
            gather: self.gather,
            frame: FrameParams { scales: self.scales, wedges: self.wedges, tau: self.tau, beta: self.beta, finest, guard: self.guard },
        })
    }
}

/// Reads the input volume (or builds the synthetic one).
fn read_input(spec: &str, read: &super::input::InputArgs) -> Result<(Vec<f32>, [usize; 3])> {
    if let Some(rest) = spec.strip_prefix("synth:") {
        let mut parts = rest.split(':');
        let dims: Vec<usize> = parts
            .next()
            .unwrap_or("")
            .split('x')
            .map(|d| d.parse::<usize>())
            .collect::<Result<_, _>>()
            .with_context(|| format!("--input {spec}: expected synth:N1xN2xN3[:noise]"))?;
        if dims.len() != 3 || dims.contains(&0) {
            seisgpu_host::bail_param!("input", "--input {spec}: expected three positive sizes, e.g. synth:128x128x256");
        }
        let shape = [dims[0], dims[1], dims[2]];
        let mut v = apps::synthetic_cube(shape, 0.004, 25.0);
        if let Some(noise) = parts.next() {
            let frac: f32 = noise.parse().with_context(|| format!("--input {spec}: noise `{noise}` is not a number"))?;
            let s = seisgpu_host::synth::rms(&v) * frac;
            seisgpu_host::synth::add_noise(&mut v, s, 1);
        }
        return Ok((v, shape));
    }
    let path = Path::new(spec);
    match path.extension().and_then(|e| e.to_str()) {
        Some("npy") => coeffs_io::read_volume(path),
        Some("sgy") | Some("segy") | Some("su") => {
            let (_, traces) = read.read(path)?;
            let cube = seisgpu_host::io::cube::cube_from_traces(&traces, spec)?;
            if cube.missing > 0 {
                eprintln!("seisgpu: {spec}: {} of {} (inline, crossline) cells have no trace; zero-filled", cube.missing,
                    cube.shape[0] * cube.shape[1]);
            }
            Ok((cube.data, cube.shape))
        }
        _ => seisgpu_host::bail_param!("input", "--input {spec}: expected a .npy volume, a SEG-Y or SU cube (.sgy/.segy/.su, placed by inline/crossline) or synth:N1xN2xN3"),
    }
}

/// The transform's cube engines: one per device of `--gpus`, else the backend's (and every other
/// visible GPU with `--all-gpus`).
fn engines(global: &Global, tiling: Tiling, params: &Params, all_gpus: bool) -> Result<Fragmented> {
    match global.backends()? {
        Some(devices) => {
            if all_gpus {
                seisgpu_host::bail_param!("all-gpus", "--all-gpus and --gpus both choose the devices: give one (--gpus all takes every GPU)");
            }
            Ok(Fragmented::on_backends(&devices, tiling, params)?)
        }
        None => Ok(Fragmented::from_tiling(&global.backend()?, tiling, params, all_gpus)?),
    }
}

fn transform(global: &Global, shape: [usize; 3], fa: &FrameArgs, finest: Finest) -> Result<Fragmented> {
    let params = fa.params(finest)?;
    let tr = engines(global, Tiling::new(shape, fa.cube_for(shape, true)?, fa.overlap)?, &params, fa.all_gpus)?;
    eprintln!("seisgpu: {} cube(s) of {}^3 on {} engine(s); {}", tr.tiling.count(), tr.tiling.cube, tr.engines(),
        tr.frame.describe().lines().next().unwrap_or(""));
    Ok(tr)
}

/// An application's cubes: all of them on this process's engines, or under MPI (one rank of
/// several) this rank's block of them on the rank's devices, from and into the rank's slab of the
/// volume, the statistics combined over the ranks and each rank writing its rows of the output
/// ([`seisgpu_host::wavepacket::distributed::RankCubes`]).
struct AppJob {
    tr: Fragmented,
    #[cfg(feature = "mpi")]
    cluster: Option<seisgpu_host::exec::mpi::Cluster>,
}

impl AppJob {
    /// The job and its input: the whole volume, or under MPI the rank's slab of it.
    fn open(global: &Global, io: &Io, fa: &FrameArgs, finest: Finest) -> Result<(AppJob, Vec<f32>)> {
        let input = io.input.as_str();
        #[cfg(feature = "mpi")]
        if let Some(cluster) = global.cluster() {
            if fa.all_gpus {
                seisgpu_host::bail_param!("all-gpus", "--all-gpus under MPI: each rank takes its devices from --device/--gpus");
            }
            let (slab, shape) = read_slab(&cluster, input, &io.read, fa)?;
            let devices = global.rank_devices(&cluster)?;
            let tr = Fragmented::on_backends(&devices, Tiling::new(shape, fa.cube_for(shape, cluster.is_root())?, fa.overlap)?, &fa.params(finest)?)?;
            if cluster.is_root() {
                eprintln!("seisgpu: {} cube(s) of {}^3 over {} ranks", tr.tiling.count(), tr.tiling.cube, cluster.size());
            }
            return Ok((AppJob { tr, cluster: Some(cluster) }, slab));
        }
        let (vol, shape) = read_input(input, &io.read)?;
        let job = AppJob {
            tr: transform(global, shape, fa, finest)?,
            #[cfg(feature = "mpi")]
            cluster: None,
        };
        Ok((job, vol))
    }

    fn run<T>(&self, app: impl FnOnce(&dyn apps::CubeJob) -> Result<T>) -> Result<T> {
        #[cfg(feature = "mpi")]
        if let Some(cluster) = &self.cluster {
            return app(&seisgpu_host::wavepacket::distributed::RankCubes { cluster, tr: &self.tr });
        }
        app(&self.tr)
    }

    /// `local`, or under MPI the same failure on every rank when any rank failed.
    fn agree<T>(&self, what: &str, local: Result<T>) -> Result<T> {
        #[cfg(feature = "mpi")]
        if let Some(cluster) = &self.cluster {
            return cluster.agree(what, local);
        }
        let _ = what;
        local
    }

    /// Writes the output volume from `slab` (under MPI each rank its rows, into one file), then
    /// prints the summary (on rank 0 alone).
    fn write(&self, path: &Path, sampling: &VolumeSampling, slab: &[f32], summary: impl FnOnce()) -> Result<()> {
        #[cfg(feature = "mpi")]
        if let Some(cluster) = &self.cluster {
            seisgpu_host::wavepacket::distributed::write_volume(cluster, path, &self.tr.tiling, slab)?;
            if cluster.is_root() {
                summary();
            }
            return Ok(());
        }
        write_volume(path, slab, self.tr.tiling.shape, sampling)?;
        summary();
        Ok(())
    }
}

/// A trace mask (.npy of n1 x n2 entries, non-zero = live trace).
fn read_mask(p: &Path, [n1, n2]: [usize; 2]) -> Result<Vec<bool>> {
    let npy = seisgpu_host::io::npy::read_any_f32(p).with_context(|| format!("{}: not a usable .npy mask", p.display()))?;
    if npy.len() != n1 * n2 {
        seisgpu_host::bail_input!("{}: mask of {} entries for {n1} x {n2} traces", p.display(), npy.len());
    }
    Ok(npy.into_iter().map(|v| v != 0.0).collect())
}

/// This rank's slab of the input volume ([`seisgpu_host::wavepacket::distributed::rows`]: the rows
/// its block of cubes reads) and the volume's shape. A .npy volume is read by rows and a SEG-Y
/// cube by its rows' traces (after every header), so no rank holds more than its slab; a
/// synthetic volume is made whole, then cut.
#[cfg(feature = "mpi")]
fn read_slab(cluster: &seisgpu_host::exec::mpi::Cluster, input: &str, read: &super::input::InputArgs, frame: &FrameArgs)
    -> Result<(Vec<f32>, [usize; 3])> {
    use seisgpu_host::wavepacket::distributed;
    let path = Path::new(input);
    let npy = !input.starts_with("synth:") && path.extension().and_then(|e| e.to_str()) == Some("npy");
    if npy {
        let shape = cluster.agree("reading the volume's shape", seisgpu_host::io::npy::read_rows_f32(path, 0..0))?.0;
        let [n1, n2, n3] = shape[..] else { seisgpu_host::bail_input!("{input}: a {}-D array; a volume must be 3-D (n1, n2, samples)", shape.len()) };
        let rows = distributed::rows(cluster, &Tiling::new([n1, n2, n3], frame.cube_for([n1, n2, n3], false)?, frame.overlap)?);
        let read = seisgpu_host::io::npy::read_rows_f32(path, rows).map(|(_, v)| v);
        return Ok((cluster.agree("reading the volume", read)?, [n1, n2, n3]));
    }
    let segy = !input.starts_with("synth:") && matches!(path.extension().and_then(|e| e.to_str()), Some("sgy") | Some("segy") | Some("su"));
    if segy {
        // Every header (to place the traces), then only the traces of this rank's rows.
        let read = seisgpu_host::io::cube::read_cube_rows(path, &read.options(), |shape| {
            Ok(distributed::rows(cluster, &Tiling::new(shape, frame.cube_for(shape, false)?, frame.overlap)?))
        });
        let (shape, slab, missing) = cluster.agree("reading the volume", read)?;
        if cluster.is_root() && missing > 0 {
            eprintln!("seisgpu: {input}: {missing} of {} (inline, crossline) cells have no trace; zero-filled", shape[0] * shape[1]);
        }
        return Ok((slab, shape));
    }
    let (mut vol, shape) = cluster.agree("reading the volume", read_input(input, read))?;
    let rows = distributed::rows(cluster, &Tiling::new(shape, frame.cube_for(shape, false)?, frame.overlap)?);
    let row = shape[1] * shape[2];
    vol.truncate(rows.end * row);
    vol.drain(..rows.start * row);
    Ok((vol, shape))
}

/// `wavepacket forward` as one rank of an MPI job: each rank reads its slab of the volume
/// ([`read_slab`]), transforms its block of cubes on its devices and writes their coefficients at
/// their place in the file.
#[cfg(feature = "mpi")]
fn forward_distributed(cluster: &seisgpu_host::exec::mpi::Cluster, global: &Global, input: &str, read: &super::input::InputArgs,
    frame: &FrameArgs, output: &std::path::Path) -> Result<()> {
    use seisgpu_host::wavepacket::distributed;
    let t0 = std::time::Instant::now();
    if frame.all_gpus {
        seisgpu_host::bail_param!("all-gpus", "--all-gpus under MPI: each rank takes its devices from --device/--gpus");
    }
    let (slab, shape) = read_slab(cluster, input, read, frame)?;
    let devices = global.rank_devices(cluster)?;
    let tr = Fragmented::on_backends(&devices, Tiling::new(shape, frame.cube_for(shape, cluster.is_root())?, frame.overlap)?, &frame.params(Finest::Isotropic)?)?;
    let first_row = distributed::rows(cluster, &tr.tiling).start;
    let count = distributed::forward(cluster, &tr, &slab, first_row, output)?;
    if cluster.is_root() {
        println!("{{\"coefficients\": {count}, \"cubes\": {}, \"ranks\": {}, \"seconds\": {:.3}}}", tr.tiling.count(),
            cluster.size(), t0.elapsed().as_secs_f64());
    }
    Ok(())
}

/// `wavepacket inverse` as one rank of an MPI job: every rank reads the header and the
/// coefficients of its block of cubes and inverts those cubes; the ranks exchange the planes that
/// fall in each other's slabs, and each writes its rows of the volume.
#[cfg(feature = "mpi")]
fn inverse_distributed(cluster: &seisgpu_host::exec::mpi::Cluster, global: &Global, input: &std::path::Path,
    output: &std::path::Path) -> Result<()> {
    let t0 = std::time::Instant::now();
    let read = coeffs_io::read_coeffs_of_cubes(input, |h| cluster.share(h.tiling.count()));
    let (h, mine) = cluster.agree("reading the coefficients", read)?;
    let devices = global.rank_devices(cluster)?;
    let tr = Fragmented::on_backends(&devices, h.tiling.clone(), &h.params)?;
    if tr.frame.total != h.per_cube {
        seisgpu_host::bail_input!("{}: {} coefficients per cube in the file, this build's frame has {}", input.display(), h.per_cube, tr.frame.total);
    }
    let slab = seisgpu_host::wavepacket::distributed::inverse(cluster, &tr, &mine)?;
    seisgpu_host::wavepacket::distributed::write_volume(cluster, output, &tr.tiling, &slab)?;
    if cluster.is_root() {
        println!("{{\"samples\": {}, \"ranks\": {}, \"seconds\": {:.3}}}", h.tiling.shape.iter().product::<usize>(), cluster.size(),
            t0.elapsed().as_secs_f64());
    }
    Ok(())
}

pub fn run(args: &Args, global: &Global) -> Result<()> {
    let t0 = std::time::Instant::now();
    match &args.command {
        Command::Frame { n, frame } => {
            let fr = Frame::new(*n, &frame.params(Finest::Isotropic)?)?;
            print!("{}", fr.describe());
            return Ok(());
        }
        Command::Forward { io, frame } => {
            #[cfg(feature = "mpi")]
            if let Some(cluster) = global.cluster() {
                return forward_distributed(&cluster, global, &io.input, &io.read, frame, &io.output);
            }
            let (vol, shape) = read_input(&io.input, &io.read)?;
            let tr = transform(global, shape, frame, Finest::Isotropic)?;
            let c = tr.forward(&vol)?;
            let header = Header { version: 1, tiling: tr.tiling.clone(), params: tr.frame.params.clone(), per_cube: tr.frame.total };
            coeffs_io::write_coeffs(&io.output, &header, &c)?;
            println!("{{\"coefficients\": {}, \"redundancy\": {:.3}, \"seconds\": {:.3}}}", c.len(),
                c.len() as f64 / vol.len() as f64, t0.elapsed().as_secs_f64());
        }
        Command::Inverse { input, output, sampling, all_gpus } => {
            prepare_volume(output, global)?;
            #[cfg(feature = "mpi")]
            if let Some(cluster) = global.cluster() {
                return inverse_distributed(&cluster, global, input, output);
            }
            let (h, c) = coeffs_io::read_coeffs(input)?;
            let tr = engines(global, h.tiling.clone(), &h.params, *all_gpus)?;
            if tr.frame.total != h.per_cube {
                seisgpu_host::bail_input!("{}: {} coefficients per cube in the file, this build's frame has {}", input.display(), h.per_cube, tr.frame.total);
            }
            let vol = tr.inverse(&c)?;
            write_volume(output, &vol, h.tiling.shape, sampling)?;
            println!("{{\"samples\": {}, \"seconds\": {:.3}}}", vol.len(), t0.elapsed().as_secs_f64());
        }
        Command::Denoise { io, frame, sigma, k } => {
            prepare_volume(&io.output, global)?;
            let (job, vol) = AppJob::open(global, io, frame, Finest::Directional)?;
            let d = job.run(|j| Ok(apps::denoise(j, &vol, *sigma, *k)?))?;
            job.write(&io.output, &io.sampling, &d.volume, || {
                println!("{{\"sigma\": {}, \"estimated\": {}, \"kept_fraction\": {:.5}, \"seconds\": {:.3}}}", d.sigma,
                    d.estimated, d.kept_fraction, t0.elapsed().as_secs_f64());
            })?;
        }
        Command::Compress { io, frame, cr } => {
            prepare_volume(&io.output, global)?;
            let (job, vol) = AppJob::open(global, io, frame, Finest::Isotropic)?;
            let c = job.run(|j| Ok(apps::compress(j, &vol, *cr)?))?;
            job.write(&io.output, &io.sampling, &c.volume, || {
                println!("{{\"kept\": {}, \"cr\": {:.5}, \"rel_error\": {:.5}, \"snr_db\": {:.2}, \"seconds\": {:.3}}}", c.kept,
                    c.ratio, c.rel_error, c.snr_db, t0.elapsed().as_secs_f64());
            })?;
        }
        Command::Interpolate { io, frame, mask, method, iterations, final_fraction, cr } => {
            prepare_volume(&io.output, global)?;
            let method = match method.as_str() {
                "pocs" => InterpMethod::Pocs { iterations: *iterations, final_fraction: *final_fraction },
                "single" => InterpMethod::SinglePass { ratio: *cr },
                o => seisgpu_host::bail_param!("method", "--method {o}: expected pocs or single"),
            };
            let (job, vol) = AppJob::open(global, io, frame, Finest::Directional)?;
            let [n1, n2, _] = job.tr.tiling.shape;
            let mask = match mask {
                Some(p) => Some(job.agree("reading the trace mask", read_mask(p, [n1, n2]))?),
                None => None,
            };
            let r = job.run(|j| {
                let live = match mask {
                    Some(m) => m,
                    // Traces that hold data (each rank looks at its rows; the mask is gathered).
                    None => apps::live_traces(j, &vol)?,
                };
                Ok(apps::interpolate(j, &vol, &live, method)?)
            })?;
            job.write(&io.output, &io.sampling, &r.volume, || {
                println!("{{\"missing_traces\": {}, \"iterations\": {}, \"seconds\": {:.3}}}", r.missing, r.iterations,
                    t0.elapsed().as_secs_f64());
            })?;
        }
    }
    eprintln!("seisgpu: done in {:.2} s", t0.elapsed().as_secs_f64());
    Ok(())
}

impl super::Subcommand for Args {
    fn run(&self, global: &super::Global) -> anyhow::Result<()> { run(self, global) }
    fn path(&self) -> String { (match self.command {
            Command::Forward { .. } => "wavepacket forward",
            Command::Inverse { .. } => "wavepacket inverse",
            Command::Denoise { .. } => "wavepacket denoise",
            Command::Compress { .. } => "wavepacket compress",
            Command::Interpolate { .. } => "wavepacket interpolate",
            #[allow(unreachable_patterns)]
            _ => "wavepacket",
        }).to_string() }
}
