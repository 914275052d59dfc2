//! How every command reads traces from a file: SEG-Y or Seismic Unix (`.su`, or by content),
//! overrides for headers that are wrong or non-standard, the trace selection, and the
//! non-seismic traces skipped.

use std::path::Path;

use seisgpu_host::io::input::{read_traces, ReadOptions};
use seisgpu_host::io::segy::{HeaderBytes, ReaderOptions, SegyInfo};
use seisgpu_host::io::select::TraceSelection;
use seisgpu_host::TraceSet;

/// Options for reading traces from a SEG-Y or SU file.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct InputArgs {
    /// Samples per trace, overriding the binary and trace headers (count; for files whose headers
    /// disagree with their data, or variable-length files whose traces all have this many).
    #[arg(long, value_name = "N")]
    pub samples: Option<usize>,
    /// Sample interval (ms), overriding the binary and trace headers.
    #[arg(long = "dt", value_name = "MS")]
    pub dt_ms: Option<f32>,
    /// Read only the traces whose headers lie in these inclusive ranges: `key=lo:hi[,key=...]`, keys
    /// ffid, channel, offset (m), cdp, inline, crossline, traceid; either end may be left out
    /// (`offset=:500`), `key=v` picks one value.
    #[arg(long, value_name = "KEY=LO:HI,...")]
    pub select: Option<TraceSelection>,
    /// Keep the non-seismic traces (skipped by default): those coded dead, dummy, time break,
    /// sweep, ... (trace identification code, bytes 29-30, 2 and up), and in a file that codes its
    /// seismic traces 1, every trace coded otherwise (auxiliary channels).
    #[arg(long)]
    pub keep_aux: bool,
    /// Trace header bytes (1-based, 4-byte integers) of non-standard files: `key=byte[,key=...]`,
    /// keys inline (189), crossline (193), cdp (21), offset (37), sx (73), sy (77), gx (81), gy
    /// (85), cdpx (181), cdpy (185); coordinates take the scalar of bytes 71-72.
    #[arg(long, value_name = "KEY=BYTE,...")]
    pub bytes: Option<HeaderBytes>,
}

impl InputArgs {
    pub fn options(&self) -> ReadOptions {
        ReadOptions {
            reader: ReaderOptions { samples: self.samples, dt: self.dt_ms.map(|ms| ms * 1e-3), bytes: self.bytes.unwrap_or_default(),
                format: None },
            select: self.select.clone(),
            keep_non_seismic: self.keep_aux,
        }
    }

    /// Reads the chosen traces of `path`, printing the reader's warnings and one line of what
    /// was read to stderr.
    pub fn read(&self, path: &Path) -> anyhow::Result<(SegyInfo, TraceSet)> {
        let (info, set, report) = read_traces(path, &self.options())?;
        for w in &report.warnings {
            eprintln!("seisgpu: warning: {w}");
        }
        eprintln!("seisgpu: {}", report.line(path));
        Ok((info, set))
    }

    /// The traces of `path` for the MPI ranks: read by parts from the file where nothing is
    /// overridden and every trace is kept, else (the trace numbering changes) the chosen traces
    /// read whole into `holder` on every rank.
    #[cfg(feature = "mpi")]
    pub fn mpi_source<'a>(&self, path: &'a Path, holder: &'a mut Option<TraceSet>)
        -> anyhow::Result<seisgpu_host::exec::mpi::TraceSource<'a>> {
        use seisgpu_host::exec::mpi::TraceSource;
        let opts = self.options();
        let plain = opts.reader == ReaderOptions::default() && opts.select.is_none() && {
            let (_, headers, choice) = seisgpu_host::io::input::choose_traces(path, &opts)?;
            choice.indices.len() == headers.len()
        };
        if plain {
            return Ok(TraceSource::Segy(path));
        }
        *holder = Some(self.read(path)?.1);
        Ok(TraceSource::Memory(holder.as_ref().expect("just read")))
    }
}
