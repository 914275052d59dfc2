//! One entry for every command that reads traces from a file: the format (SEG-Y or Seismic
//! Unix), the header overrides, the trace selection and the non-seismic rule, then only the
//! chosen traces' samples.

use std::path::Path;

use anyhow::Context;

use super::segy::{FileFormat, ReaderOptions, SegyInfo, SegyReader};
use super::select::{choose, Choice, TraceSelection};
use crate::traces::{TraceHeader, TraceSet};

/// How to read an input file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReadOptions {
    /// Sample count, interval, header bytes and format overrides.
    pub reader: ReaderOptions,
    /// Header ranges a trace must meet (all traces when `None`).
    pub select: Option<TraceSelection>,
    /// Keep the non-seismic traces ([`super::select::non_seismic`]) instead of skipping them.
    pub keep_non_seismic: bool,
}

/// What was read, for the one line a command prints.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadReport {
    pub format: FileFormat,
    /// Traces in the file.
    pub in_file: u64,
    /// Traces left out by the selection ranges.
    pub unselected: usize,
    /// Non-seismic traces skipped.
    pub non_seismic: usize,
    /// Traces read.
    pub read: usize,
    /// The reader's warnings (header fields it overrode, records it skipped), one line each.
    pub warnings: Vec<String>,
}

impl ReadReport {
    /// One line: traces read of those in the file, and why the others were left out.
    pub fn line(&self, path: &Path) -> String {
        let fmt = match self.format {
            FileFormat::Segy => "SEG-Y",
            FileFormat::Su => "Seismic Unix",
        };
        let mut s = format!("{}: read {} of {} traces ({fmt})", path.display(), self.read, self.in_file);
        if self.unselected > 0 {
            s += &format!(", {} outside --select", self.unselected);
        }
        if self.non_seismic > 0 {
            s += &format!(", {} non-seismic skipped (dead, auxiliary, ...: --keep-aux keeps them)", self.non_seismic);
        }
        s
    }
}

/// Opens `path` with the options' overrides and chooses its traces from the headers alone:
/// the reader (for reading the chosen traces, e.g. with [`read_chosen`]), every trace's header
/// and the choice. An empty file, or a choice that leaves nothing, is an error naming the file.
pub fn choose_traces(path: &Path, opts: &ReadOptions) -> anyhow::Result<(SegyReader, Vec<TraceHeader>, Choice)> {
    let what = path.display();
    let mut r = SegyReader::open_with(path, &opts.reader)?;
    // A partial trace at the end is an error, not something to drop silently.
    r.check_tail()?;
    crate::ensure_input!(r.info().n_traces > 0, "{what}: the file holds no traces ({} bytes)", r.info().file_len);
    let headers = r.read_headers().with_context(|| format!("reading the trace headers of {what}"))?;
    let choice = choose(&headers, opts.select.as_ref(), opts.keep_non_seismic);
    crate::ensure_input!(!choice.indices.is_empty(), "{what}: no trace left to read: {} in the file, {} outside --select, {} non-seismic \
        (--keep-aux keeps those)", headers.len(), choice.unselected, choice.non_seismic);
    Ok((r, headers, choice))
}

/// Reads the traces `indices` (ascending) run by run of consecutive traces.
pub fn read_chosen(r: &mut SegyReader, indices: &[usize]) -> anyhow::Result<TraceSet> {
    let info = r.info();
    let (ns, n) = (info.ns, info.n_traces);
    if indices.len() as u64 == n && indices.iter().enumerate().all(|(k, &i)| k == i) {
        return Ok(r.read_range(0, n)?);
    }
    let mut set = TraceSet { headers: Vec::with_capacity(indices.len()), data: Vec::with_capacity(indices.len() * ns).into(), ns, dt: info.dt,
        t0: info.t0 };
    for run in indices.chunk_by(|a, b| *b == a + 1) {
        let part = r.read_range(run[0] as u64, run.len() as u64)?;
        set.headers.extend(part.headers);
        set.data.to_mut().extend_from_slice(&part.data);
    }
    Ok(set)
}

/// Reads the chosen traces of a SEG-Y or SU file (see [`ReadOptions`]).
pub fn read_traces(path: impl AsRef<Path>, opts: &ReadOptions) -> anyhow::Result<(SegyInfo, TraceSet, ReadReport)> {
    let path = path.as_ref();
    let (mut r, _, choice) = choose_traces(path, opts)?;
    let set = read_chosen(&mut r, &choice.indices)?;
    let info = r.info().clone();
    let report = ReadReport { format: info.file_format, in_file: info.n_traces, unselected: choice.unselected,
        non_seismic: choice.non_seismic, read: set.len(), warnings: info.warnings.clone() };
    Ok((info, set, report))
}

/// Everything a command does with an input file, every error ignored: open, every header, the
/// cube grid, ranges and chunks of traces, the tail check, [`read_traces`]. The entry of the
/// reader's fuzz target (`fuzz/`) and of its mutation test: what they look for is a panic, a hang
/// or a runaway allocation in here; errors are the expected outcome.
#[doc(hidden)]
pub fn exercise_reader(p: &Path, format: Option<FileFormat>) {
    let o = ReaderOptions { format, ..Default::default() };
    if let Ok(mut r) = SegyReader::open_with(p, &o) {
        let n = r.info().n_traces;
        if let Ok(h) = r.read_headers() {
            let _ = super::cube::CubeGrid::from_headers(&h, "exercise");
        }
        let _ = r.read_range(0, n.min(64));
        let _ = r.read_range(n.saturating_sub(3), 3.min(n));
        let _ = r.seek_trace(0);
        while let Ok(Some(_)) = r.read_chunk(7) {}
        let _ = r.check_tail();
    }
    let _ = read_traces(p, &ReadOptions { reader: o, ..Default::default() });
}
