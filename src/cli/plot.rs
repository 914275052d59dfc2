//! `seisgpu plot`: a PNG of a SEG-Y file or of a range of its traces.

use std::path::PathBuf;

use seisgpu_host::io::segy::SegyReader;
use seisgpu_host::plot::{section_png_with, Axes, Style};

use super::Global;

/// Traces plotted when --count is not given (a PNG wider than this shows nothing more).
const DEFAULT_MAX_TRACES: u64 = 5000;

#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:\n  seisgpu plot line.sgy -o line.png\n  seisgpu plot xs.sgy -o gather.png --first 128 --count 64 --style wiggle")]
pub struct Args {
    /// SEG-Y file to plot (only the traces plotted are read).
    pub input: PathBuf,
    /// Output PNG (written to a temporary file, then renamed).
    #[arg(short, long)]
    pub out: PathBuf,
    /// `density` (red-white-blue variable density) or `wiggle` (wiggle traces, positive lobes
    /// filled).
    #[arg(long, default_value = "density")]
    pub style: Style,
    /// First trace to plot (0-based index in the file).
    #[arg(long, default_value_t = 0)]
    pub first: u64,
    /// Number of traces to plot [default: the rest of the file, at most 5000].
    #[arg(long)]
    pub count: Option<u64>,
    /// Plot every k-th trace of the range (decimation for long files).
    #[arg(long, default_value_t = 1)]
    pub every: u64,
    /// Percentile of |amplitude| (0-100] at which the colours (wiggles) saturate.
    #[arg(long, default_value_t = 99.0)]
    pub clip_percentile: f64,
    /// Title [default: the file name and the trace range].
    #[arg(long)]
    pub title: Option<String>,
}

pub fn run(args: &Args, _global: &Global) -> anyhow::Result<()> {
    let mut r = SegyReader::open(&args.input)?;
    let info = r.info().clone();
    let n = info.n_traces;
    if args.first >= n {
        anyhow::bail!("{}: --first {} is past the last trace (the file has {n} traces)", args.input.display(), args.first);
    }
    if args.every == 0 {
        anyhow::bail!("--every must be at least 1");
    }
    let available = n - args.first;
    let span = match args.count {
        Some(0) => anyhow::bail!("--count must be at least 1"),
        Some(c) if c > available => {
            anyhow::bail!("{}: --first {} --count {c} runs past the end (the file has {n} traces)", args.input.display(), args.first)
        }
        Some(c) => c,
        None => {
            let c = available.min(DEFAULT_MAX_TRACES * args.every);
            if c < available {
                eprintln!("seisgpu plot: plotting traces {}..{} of {n}; use --first/--count/--every for others", args.first, args.first + c);
            }
            c
        }
    };
    if args.first + span == n {
        // The range reaches the end of the file: a partial last trace is an error, not a
        // silently shorter plot.
        r.check_tail()?;
    }
    let set = if args.every == 1 {
        r.read_range(args.first, span)?
    } else {
        let mut data = Vec::new();
        let mut k = 0;
        for i in (args.first..args.first + span).step_by(args.every as usize) {
            data.extend_from_slice(&r.read_trace(i)?.samples);
            k += 1;
        }
        seisgpu_host::TraceSet { headers: vec![Default::default(); k], data, ns: info.ns, dt: info.dt, t0: info.t0 }
    };
    let name = args.input.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let title = args.title.clone().unwrap_or_else(|| {
        format!("{name}: traces {}..{}{}", args.first, args.first + span - 1,
            if args.every > 1 { format!(" every {}", args.every) } else { String::new() })
    });
    let axes = Axes {
        t0: info.t0 as f64 * 1e3,
        dt: info.dt as f64 * 1e3,
        time_label: "time (ms)".into(),
        first_trace: args.first as f64,
        trace_step: args.every as f64,
        trace_label: "trace (index in file)".into(),
        clip_percentile: args.clip_percentile,
    };
    section_png_with(&args.out, &set.data, set.len(), set.ns, args.style, &title, &axes)?;
    eprintln!("seisgpu plot: wrote {} ({} traces x {} samples, {:?})", args.out.display(), set.len(), set.ns, args.style);
    Ok(())
}
