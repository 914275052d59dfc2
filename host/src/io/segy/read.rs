//! The streaming reader.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::header::{parse_trace_header_with, TraceTiming};
use super::{decode_samples, HeaderBytes, ReaderOptions, Result, SampleFormat, SegyError, SegyInfo};
use crate::traces::{TraceHeader, TraceSet};

/// One trace: its header and samples.
#[derive(Debug, Clone, PartialEq)]
pub struct Trace {
    pub header: TraceHeader,
    pub samples: Vec<f32>,
}

/// Reads a SEG-Y file trace by trace or chunk by chunk; memory stays bounded by what is asked
/// for, so files larger than memory can be processed.
pub struct SegyReader {
    path: PathBuf,
    file: BufReader<File>,
    info: SegyInfo,
    /// Index of the trace the next sequential read returns.
    next: u64,
    /// Where the file cursor is (so sequential reads do not seek).
    pos: u64,
    /// Whether bytes 215-216 (time scalar) are honoured: SEG-Y rev 1 and later.
    time_scalar: bool,
    /// Trace 0's delay recording time (ms) as its header holds it; `info.t0` is its f32 rounding,
    /// so other traces are compared with this, not with t0.
    delay_ms: f64,
    /// Sample counts a trace header may give besides 0 (`None`: not checked, `--samples` given).
    ns_ok: Option<[usize; 2]>,
    /// Where the geometry fields are in the trace headers.
    bytes: HeaderBytes,
    buf: Vec<u8>,
}

/// Reads a whole SEG-Y file into memory.
pub fn read_segy(path: impl AsRef<Path>) -> Result<(SegyInfo, TraceSet)> {
    let mut r = SegyReader::open(path)?;
    let n = r.info.n_traces;
    let set = r.read_range(0, n)?;
    // A partial trace at the end is an error, not something to drop silently.
    r.check_tail()?;
    Ok((r.info, set))
}

impl SegyReader {
    /// Opens a file and reads its textual and binary headers (and trace 0's header where the
    /// binary header leaves the sample count or interval out), deciding SEG-Y or SU by the
    /// extension and the content.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> { Self::open_with(path, &ReaderOptions::default()) }

    /// [`SegyReader::open`] with overrides for what the file's headers get wrong.
    pub fn open_with(path: impl AsRef<Path>, opts: &ReaderOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let p = path.as_path();
        let mut file = File::open(p).map_err(|e| SegyError::io(p, e))?;
        let file_len = file.metadata().map_err(|e| SegyError::io(p, e))?.len();
        let l = super::open::layout(p, &mut file, file_len, opts)?;
        let file = BufReader::with_capacity(1 << 20, file);
        Ok(SegyReader { path, file, info: l.info, next: 0, pos: u64::MAX, time_scalar: l.time_scalar, delay_ms: l.delay_ms,
            ns_ok: l.ns_ok, bytes: opts.bytes, buf: Vec::new() })
    }

    pub fn info(&self) -> &SegyInfo { &self.info }
    pub fn path(&self) -> &Path { &self.path }
    /// Index of the trace the next sequential read returns.
    pub fn position(&self) -> u64 { self.next }
    /// Traces left for sequential reads.
    pub fn remaining(&self) -> u64 { self.info.n_traces - self.next.min(self.info.n_traces) }

    /// Moves the sequential position to trace `i` (0-based; `n_traces` is the end).
    pub fn seek_trace(&mut self, i: u64) -> Result<()> {
        if i > self.info.n_traces {
            return Err(SegyError::invalid(&self.path, format!("trace {i} is past the end ({} traces)", self.info.n_traces)));
        }
        self.next = i;
        Ok(())
    }

    /// The error for a partial trace after the last whole one, if the file has one.
    pub fn check_tail(&self) -> Result<()> {
        if self.info.trailing_bytes > 0 {
            let t = self.info.n_traces;
            return Err(SegyError::Truncated {
                path: self.path.display().to_string(),
                trace: t,
                offset: self.info.trace_offset(t),
                have: self.info.trailing_bytes,
                need: self.info.trace_bytes,
            });
        }
        Ok(())
    }

    /// Reads the raw bytes of `count` traces starting at `start` into `self.buf`.
    fn fill(&mut self, start: u64, count: u64) -> Result<()> {
        let n = self.info.n_traces;
        if start + count > n {
            if start + count == n + 1 && self.info.trailing_bytes > 0 && start <= n {
                return self.check_tail();
            }
            return Err(SegyError::invalid(&self.path, format!("traces {start}..{} asked for, the file has {n}", start + count)));
        }
        let off = self.info.trace_offset(start);
        if self.pos != off {
            self.file.seek(SeekFrom::Start(off)).map_err(|e| SegyError::io(&self.path, e))?;
        }
        let len = (count * self.info.trace_bytes) as usize;
        self.buf.resize(len, 0);
        if let Err(e) = self.file.read_exact(&mut self.buf) {
            // The file shrank since it was opened: say which trace is short.
            self.pos = u64::MAX;
            return Err(if e.kind() == std::io::ErrorKind::UnexpectedEof {
                SegyError::Truncated { path: self.path.display().to_string(), trace: start, offset: off, have: 0, need: self.info.trace_bytes }
            } else {
                SegyError::io(&self.path, e)
            });
        }
        self.pos = off + len as u64;
        Ok(())
    }

    /// Decodes one trace's bytes (header + samples) and checks it against the file's layout.
    fn decode(&self, index: u64, bytes: &[u8], samples: &mut [f32], expected_delay: f64) -> Result<TraceHeader> {
        let info = &self.info;
        let (h, t): (TraceHeader, TraceTiming) = parse_trace_header_with(&bytes[..240], info.endian, self.time_scalar, &self.bytes);
        let path = || self.path.display().to_string();
        if self.ns_ok.is_some_and(|ok| t.ns != 0 && !ok.contains(&(t.ns as usize))) && info.ns <= u16::MAX as usize {
            return Err(SegyError::InconsistentSamples {
                path: path(), trace: index, offset: info.trace_offset(index), found: t.ns as usize, expected: info.ns,
            });
        }
        if t.delay_ms != expected_delay {
            return Err(SegyError::InconsistentDelay {
                path: path(), trace: index, offset: info.trace_offset(index), found: t.delay_ms, expected: expected_delay,
            });
        }
        if let Some(i) = decode_samples(&bytes[240..], info.format, info.endian, samples) {
            return Err(SegyError::NonFinite {
                path: path(),
                trace: index,
                sample: i,
                value: samples[i],
                what: if info.format == SampleFormat::IbmFloat { " (IBM value outside the f32 range)" } else { "" },
            });
        }
        Ok(h)
    }

    /// Reads trace `i` (random access; the sequential position moves past it).
    pub fn read_trace(&mut self, i: u64) -> Result<Trace> {
        self.fill(i, 1)?;
        let mut samples = vec![0.0f32; self.info.ns];
        let buf = std::mem::take(&mut self.buf);
        let delay = self.delay_ms;
        let r = self.decode(i, &buf, &mut samples, delay);
        self.buf = buf;
        self.next = i + 1;
        Ok(Trace { header: r?, samples })
    }

    /// Reads traces `start .. start + count` into a trace set (decoded in parallel). The file is
    /// read in blocks of about 16 MiB, so the raw bytes never take more memory than that.
    pub fn read_range(&mut self, start: u64, count: u64) -> Result<TraceSet> {
        let ns = self.info.ns;
        let block = ((16 << 20) / self.info.trace_bytes).max(1);
        let mut data = vec![0.0f32; count as usize * ns];
        let mut headers = Vec::with_capacity(count as usize);
        let mut done = 0u64;
        while done < count {
            let c = block.min(count - done);
            let out = &mut data[done as usize * ns..(done + c) as usize * ns];
            headers.extend(self.decode_block(start + done, c, out)?);
            done += c;
        }
        self.next = start + count;
        Ok(TraceSet { headers, data: data.into(), ns, dt: self.info.dt, t0: self.info.t0 })
    }

    /// Reads and decodes traces `start .. start + count` into `out` (count * ns samples).
    fn decode_block(&mut self, start: u64, count: u64, out: &mut [f32]) -> Result<Vec<TraceHeader>> {
        let (ns, tb) = (self.info.ns, self.info.trace_bytes as usize);
        self.fill(start, count)?;
        let buf = std::mem::take(&mut self.buf);
        let delay = self.delay_ms;
        let decoded: Vec<Result<TraceHeader>> = {
            let this = &*self;
            buf.par_chunks(tb)
                .zip(out.par_chunks_mut(ns))
                .enumerate()
                .map(|(k, (bytes, out))| this.decode(start + k as u64, bytes, out, delay))
                .collect()
        };
        self.buf = buf;
        // The first bad trace by index is the one reported (deterministic, unlike a parallel
        // short-circuit).
        decoded.into_iter().collect()
    }

    /// Reads the next chunk of at most `max_traces` traces from the sequential position; `None`
    /// at the end of the file (after an error for a partial last trace, if there is one).
    pub fn read_chunk(&mut self, max_traces: usize) -> Result<Option<TraceSet>> {
        let left = self.remaining();
        if left == 0 {
            if self.next == self.info.n_traces && self.info.trailing_bytes > 0 {
                self.next += 1; // report the partial trace once
                self.check_tail()?;
            }
            return Ok(None);
        }
        let count = left.min(max_traces.max(1) as u64);
        self.read_range(self.next, count).map(Some)
    }

    /// Iterates over the remaining traces one by one (each item owns its samples).
    pub fn traces(&mut self) -> Traces<'_> { Traces { reader: self, done: false } }

    /// Every trace's header, without decoding the samples (short traces are read whole in blocks, long ones
    /// header by header): for a job that plans from the geometry and then reads only the traces it needs (an MPI rank's
    /// shots). The samples' checks come with [`SegyReader::read_range`].
    pub fn read_headers(&mut self) -> Result<Vec<TraceHeader>> {
        let (n, tb) = (self.info.n_traces, self.info.trace_bytes);
        let (endian, time_scalar, at) = (self.info.endian, self.time_scalar, self.bytes);
        let parse = |b: &[u8]| parse_trace_header_with(&b[..240], endian, time_scalar, &at).0;
        if tb > 8192 {
            return (0..n).map(|i| self.raw_trace_header(i).map(|b| parse(&b))).collect();
        }
        // Short traces: reading them whole, block by block, costs less than a seek per header.
        let block = ((16 << 20) / tb).max(1);
        let mut headers = Vec::with_capacity(n as usize);
        let mut start = 0;
        while start < n {
            let count = block.min(n - start);
            self.fill(start, count)?;
            headers.extend(self.buf.chunks_exact(tb as usize).map(parse));
            start += count;
        }
        Ok(headers)
    }

    /// The raw 240 bytes of trace `i`'s header, for fields seisgpu does not interpret
    /// (read them with [`header::Fields`](super::header::Fields) and `info().endian`).
    pub fn raw_trace_header(&mut self, i: u64) -> Result<[u8; 240]> {
        if i >= self.info.n_traces {
            return Err(SegyError::invalid(&self.path, format!("trace {i} is past the end ({} traces)", self.info.n_traces)));
        }
        let off = self.info.trace_offset(i);
        // Straight from the file: through the buffer, every seek would refill 1 MiB for 240 bytes.
        // The buffer is then stale, so the next sequential read must seek (which empties it).
        let f = self.file.get_mut();
        f.seek(SeekFrom::Start(off)).map_err(|e| SegyError::io(&self.path, e))?;
        let mut h = [0u8; 240];
        f.read_exact(&mut h).map_err(|e| SegyError::io(&self.path, e))?;
        self.pos = u64::MAX;
        Ok(h)
    }
}

/// Iterator over the traces of a [`SegyReader`] from its sequential position.
pub struct Traces<'a> {
    reader: &'a mut SegyReader,
    done: bool,
}

impl Iterator for Traces<'_> {
    type Item = Result<Trace>;
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = &mut *self.reader;
        if r.next >= r.info.n_traces {
            self.done = true;
            return r.check_tail().err().map(Err);
        }
        let t = r.read_trace(r.next);
        if t.is_err() {
            self.done = true;
        }
        Some(t)
    }
}
