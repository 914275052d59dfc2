//! `seisgpu synth`: writes a built-in synthetic data set as SEG-Y (and optionally .npy).

use std::path::PathBuf;

use anyhow::Context;
use seisgpu_host::io::npy::write_npy;
use seisgpu_host::io::output::{self, OutputFormat};
use seisgpu_host::io::segy::{write_segy, Endian, SampleFormat, TextEncoding, WriteOptions};
use seisgpu_host::synth::datasets::{build, Kind, Params};

use super::Global;

#[derive(clap::Args, Debug)]
#[command(allow_negative_numbers = true, after_help = "Examples:\n  seisgpu synth line2d -o line.sgy\n  seisgpu synth cross-spread -o xs.sgy --noise 0.2\n  \
    seisgpu synth diffractor -o diff.sgy --depth 600 --scatterers 20\n  seisgpu synth cube -o cube.sgy --nx 128 --ny 96 --npy cube.npy\n  \
    seisgpu synth velocity -o vrms.txt --model gradient\n  seisgpu synth velocity -o vrms.npy --nx 101 --bin 25")]
pub struct Args {
    /// Data set: `line2d` (2D shot gathers, three hyperbolic reflections), `cross-spread` (3D
    /// cross-spread: hyperbolic reflections and a dipping curved event), `diffractor` (2D line over
    /// a point diffractor, for migration), `cube` (post-stack 3D cube: dipping planes, syncline,
    /// dome, diffraction), `velocity` (an RMS velocity model in two-way time: see --model).
    pub kind: Kind,
    /// Output file, by extension: .sgy/.segy (SEG-Y, with --format, --endian, --ascii), .su (Seismic
    /// Unix) or .npy (float32 samples alone); written to a temporary file, then renamed. For
    /// `velocity`: `.sgy`/`.segy` (one trace per CDP), `.npy` (grid [x, t] with its `.json` axes) or
    /// anything else (text, one CMP function per line, knots every 0.1 s); every form is a valid
    /// `--velocity` argument.
    #[arg(short, long = "output", alias = "out", value_name = "OUTPUT")]
    pub out: PathBuf,
    /// Velocity model: `gradient` (one v_rms(t): interval velocity --velocity + 600 m/s per s) or
    /// `lateral` (the gradient along a line of --nx CMPs every --bin m, with a slow lens in the middle).
    #[arg(long, default_value = "lateral")]
    pub model: seisgpu_host::velocity::examples::Example,
    /// Also write the samples as a float32 .npy array of shape (traces, samples) (cube: (inlines,
    /// crosslines, samples)).
    #[arg(long)]
    pub npy: Option<PathBuf>,
    /// Samples per trace [default: 751; cross-spread 501; cube 256].
    #[arg(long)]
    pub ns: Option<usize>,
    /// Sample interval in milliseconds [default: 4].
    #[arg(long)]
    pub dt_ms: Option<f32>,
    /// Ricker wavelet peak frequency in Hz [default: 25; cube 30].
    #[arg(long)]
    pub freq: Option<f32>,
    /// Gaussian noise standard deviation, relative to the strongest event's amplitude (1)
    /// [default: 0.05].
    #[arg(long)]
    pub noise: Option<f32>,
    /// Random seed for the noise and the scatterers (the same seed gives the same file).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of sources (shots; cross-spread: along the source line) [default: 5; cross-spread 48;
    /// diffractor 11].
    #[arg(long)]
    pub sources: Option<usize>,
    /// Number of receivers per shot [default: 96; cross-spread 64; diffractor 121].
    #[arg(long)]
    pub receivers: Option<usize>,
    /// Source spacing in metres [default: 200; cross-spread 25; diffractor 150].
    #[arg(long)]
    pub source_spacing: Option<f64>,
    /// Receiver spacing in metres [default: 25; diffractor 12.5].
    #[arg(long)]
    pub receiver_spacing: Option<f64>,
    /// Velocity in m/s: of the shallowest reflection (deeper ones are faster), of the constant
    /// medium around the diffractor, or the velocity model's interval velocity at t = 0
    /// [default: 2000; velocity 1500].
    #[arg(long)]
    pub velocity: Option<f64>,
    /// Diffractor depth in metres, below the middle of the receiver line [default: 800].
    #[arg(long)]
    pub depth: Option<f64>,
    /// Random point scatterers added to the diffractor data set (scattered noise) [default: 0].
    #[arg(long)]
    pub scatterers: Option<usize>,
    /// Cube: number of inlines [default: 64]; velocity: number of CMPs [default: 41].
    #[arg(long)]
    pub nx: Option<usize>,
    /// Cube: number of crosslines [default: 48].
    #[arg(long)]
    pub ny: Option<usize>,
    /// Cube: bin size in metres (inline and crossline) [default: 12.5]; velocity: CMP spacing in
    /// metres [default: 25].
    #[arg(long)]
    pub bin: Option<f64>,
    /// Sample format: `ibm` (format 1, what most readers expect) or `ieee` (format 5, exact).
    #[arg(long, default_value = "ibm")]
    pub format: SampleFormat,
    /// Byte order: `big` (the SEG-Y standard) or `little` (SEG-Y rev 2).
    #[arg(long, default_value = "big")]
    pub endian: Endian,
    /// Write the textual header in ASCII instead of EBCDIC.
    #[arg(long)]
    pub ascii: bool,
}

/// The parameters: each data set's defaults with the options given on the command line.
pub fn params(a: &Args) -> Params {
    let mut p = Params::default_for(a.kind);
    macro_rules! set {
        ($($f:ident),*) => { $(if let Some(v) = a.$f { p.$f = v; })* };
    }
    set!(ns, freq, noise, sources, receivers, source_spacing, receiver_spacing, velocity, depth, scatterers, nx, ny, bin);
    if let Some(ms) = a.dt_ms {
        p.dt = ms * 1e-3;
    }
    p.seed = a.seed;
    p
}

pub fn run(args: &Args, _global: &Global) -> anyhow::Result<()> {
    let p = params(args);
    if args.kind == Kind::Velocity {
        output::check_writable(&args.out)?;
        return velocity_model(args, &p);
    }
    let format = output::prepare(&args.out)?;
    let set = build(args.kind, &p).map_err(|e| anyhow::anyhow!("synth {:?}: {e}", args.kind))?;
    let text = format!(
        "seisgpu synthetic data set: {:?}\nseed {}, peak frequency {} Hz, noise {} (relative), velocity {} m/s\n\
         {} traces, {} samples at {} ms",
        args.kind, p.seed, p.freq, p.noise, p.velocity, set.len(), set.ns, set.dt * 1e3
    );
    let opts = WriteOptions {
        format: args.format,
        endian: args.endian,
        text_encoding: if args.ascii { TextEncoding::Ascii } else { TextEncoding::Ebcdic },
        text: Some(text),
        ..Default::default()
    };
    let shape: Vec<u64> = if args.kind == Kind::Cube {
        vec![p.nx as u64, p.ny as u64, set.ns as u64]
    } else {
        vec![set.len() as u64, set.ns as u64]
    };
    match format {
        OutputFormat::Segy => write_segy(&args.out, &set, &opts)?,
        OutputFormat::Su => seisgpu_host::io::su::write_su(&args.out, &set)?,
        OutputFormat::Npy => write_npy(&args.out, &set.data, &shape)?,
    }
    if let Some(npy) = &args.npy {
        write_npy(npy, &set.data, &shape).with_context(|| "writing the .npy copy")?;
    }
    let layout = match format {
        OutputFormat::Segy => format!("format {}, {:?}-endian", args.format.code(), args.endian),
        f => f.name().to_string(),
    };
    eprintln!("seisgpu synth: wrote {} ({} traces x {} samples at {} ms, {layout})", args.out.display(), set.len(), set.ns, set.dt * 1e3);
    Ok(())
}

/// `synth velocity`: the example model in the form the output's extension asks for.
fn velocity_model(args: &Args, p: &Params) -> anyhow::Result<()> {
    use seisgpu_host::velocity::{examples, grid, text};
    p.validate(Kind::Velocity).map_err(|e| anyhow::anyhow!("synth velocity: {e}"))?;
    let e = examples::ExampleParams { cmps: p.nx, cmp_spacing: p.bin, first_cdp: 1, ns: p.ns, dt: p.dt, v0: p.velocity as f32 };
    let ext = args.out.extension().and_then(|x| x.to_str()).unwrap_or("").to_ascii_lowercase();
    let form = match ext.as_str() {
        "sgy" | "segy" => {
            let set = examples::traces(args.model, &e);
            let opts = WriteOptions { format: args.format, endian: args.endian,
                text_encoding: if args.ascii { TextEncoding::Ascii } else { TextEncoding::Ebcdic },
                text: Some(format!("seisgpu synthetic velocity model: {:?}\nRMS velocity (m/s) in two-way time, one trace per CDP", args.model)),
                ..Default::default() };
            write_segy(&args.out, &set, &opts)?;
            "SEG-Y, one trace per CDP"
        }
        "npy" => {
            grid::write_npy_grid(&args.out, &examples::grid(args.model, &e))?;
            "grid [x, t] with its .json axes"
        }
        _ => {
            let note = format!("synthetic {:?} model: RMS velocity from interval velocity {} m/s + 600 m/s per s", args.model, p.velocity);
            text::write(&args.out, &examples::functions(args.model, &e, 0.1), &[note])?;
            "text, one function per CMP"
        }
    };
    let cmps = if args.model == examples::Example::Gradient { 1 } else { p.nx };
    eprintln!("seisgpu synth: wrote {} ({form}: {cmps} CMP(s), {} samples at {} ms)", args.out.display(), p.ns, p.dt * 1e3);
    Ok(())
}

impl super::Subcommand for Args {
    fn run(&self, global: &super::Global) -> anyhow::Result<()> { run(self, global) }
    fn path(&self) -> String { "synth".to_string() }
}
