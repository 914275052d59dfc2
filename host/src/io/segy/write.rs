//! The streaming writer (through `AtomicFile`: a failed write never replaces a good file).

use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use super::header::{choose_scalar, classic_interval, delay_fields, emit_trace_header, BinaryHeader, EmitError, FieldsMut};
use super::{ebcdic, encode_samples, Endian, Result, SampleFormat, SegyError, TextEncoding};
use crate::io::AtomicFile;
use crate::traces::{TraceHeader, TraceSet};

/// How source and group coordinates are stored (trace header bytes 71-72).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CoordinateScalar {
    /// The coarsest of 1, -10, -100, -1000, -10000 that stores every coordinate exactly (else
    /// the finest that fits): chosen over the whole set by [`write_segy`], per trace by
    /// [`SegyWriter::write_trace`].
    #[default]
    Auto,
    /// This scalar for every trace (positive multiplies, negative divides).
    Fixed(i16),
}

/// How a SEG-Y file is written.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// 1 (IBM float, the default: what most readers expect) or 5 (IEEE float, exact).
    pub format: SampleFormat,
    pub endian: Endian,
    pub text_encoding: TextEncoding,
    /// Lines for the textual header (up to 38, each cut at 76 characters; seisgpu adds the card
    /// numbers and the rev 2 closing cards). `None` writes a description of the data.
    pub text: Option<String>,
    pub coordinate_scalar: CoordinateScalar,
}

/// Writes traces one at a time or in sets; `finish` makes the file appear. After any error the
/// writer is poisoned: later writes and `finish` fail (naming the first error) and the file is
/// never committed, so a refused trace can never leave a file with that trace missing.
pub struct SegyWriter {
    enc: TraceEncoder,
    out: AtomicFile,
    written: u64,
    buf: Vec<u8>,
    poisoned: Option<String>,
}

/// The bytes of a SEG-Y file without the file: its head ([`TraceEncoder::new`]) and the bytes of
/// any traces at their place ([`TraceEncoder::encode_set`]), exactly as [`SegyWriter`] writes them.
/// MPI ranks each encode their block of traces into one file this way.
pub struct TraceEncoder {
    path: PathBuf,
    ns: usize,
    dt: f32,
    /// Bytes 117-118: the interval in whole microseconds, 0 when that cannot hold it exactly.
    dt_field: u16,
    delay: (i16, i16),
    opts: WriteOptions,
}
/// Writes a trace set as one SEG-Y file.
pub fn write_segy(path: impl AsRef<Path>, set: &TraceSet, opts: &WriteOptions) -> Result<()> {
    let path = path.as_ref();
    if set.ns > 0 && set.data.len() == set.len() * set.ns
        && let Some(i) = set.data.iter().position(|v| !v.is_finite())
    {
        return Err(SegyError::NonFinite { path: path.display().to_string(), trace: (i / set.ns) as u64, sample: i % set.ns,
            value: set.data[i], what: ": non-finite samples cannot be written" });
    }
    set.validate("trace set to write").map_err(|m| SegyError::invalid(path, m))?;
    let mut opts = opts.clone();
    if opts.coordinate_scalar == CoordinateScalar::Auto {
        let coords = set.headers.iter().flat_map(header_coordinates);
        let s = choose_scalar(coords).ok_or_else(|| {
            SegyError::invalid(path, "source/group/CDP coordinates are not finite or too large for any coordinate scalar")
        })?;
        opts.coordinate_scalar = CoordinateScalar::Fixed(s);
    }
    let mut w = SegyWriter::create(path, set.ns, set.dt, set.t0, &opts)?;
    w.write_set(set)?;
    w.finish()?;
    Ok(())
}

/// The coordinates a trace header stores with the coordinate scalar: source, group, CDP (m).
pub fn header_coordinates(h: &TraceHeader) -> [f64; 6] {
    let (cx, cy) = h.cdp_position();
    [h.sx, h.sy, h.gx, h.gy, cx, cy]
}

fn default_text(ns: usize, dt: f32, t0: f32, opts: &WriteOptions) -> Vec<String> {
    vec![
        format!("written by seisgpu {}", env!("CARGO_PKG_VERSION")),
        format!("SEG-Y rev 2.0, sample format {} ({:?}), {:?}-endian", opts.format.code(), opts.format, opts.endian),
        format!("{ns} samples per trace, interval {} ms, first sample at {} ms", dt * 1e3, t0 * 1e3),
        if classic_interval(dt).is_some() { "sample interval in bytes 3217, 117 (us) and 3273 (rev 2, double)".into() }
        else { "sample interval only in bytes 3273-3280 (rev 2): 3217 and 117 cannot hold it in whole us".into() },
        "coordinates in metres with the scalar of bytes 71-72; offset (37-40) in whole metres".into(),
        "bytes: ffid 9, channel 13, energy source point 17, CDP 21, trace in ensemble 25".into(),
        "bytes: source x/y 73/77, group x/y 81/85, CDP x/y 181/185, inline 189, crossline 193".into(),
        "bytes: trace identification code 29, shot point 197 with its scalar 201".into(),
    ]
}

impl TraceEncoder {
    /// Checks the layout and encodes the textual and binary headers (3600 bytes, the trace count
    /// `traces` in bytes 3513-3520; `path` names the file in errors).
    pub fn new(path: impl AsRef<Path>, ns: usize, dt: f32, t0: f32, opts: &WriteOptions, traces: u64) -> Result<(TraceEncoder, Vec<u8>)> {
        let path = path.as_ref().to_path_buf();
        let p = path.as_path();
        if !matches!(opts.format, SampleFormat::IbmFloat | SampleFormat::IeeeFloat) {
            return Err(SegyError::invalid(p, format!("writing sample format {} is not supported (use 1 or 5)", opts.format.code())));
        }
        if ns == 0 {
            return Err(SegyError::invalid(p, "cannot write traces with zero samples"));
        }
        if ns > i32::MAX as usize {
            return Err(SegyError::invalid(p, format!("{ns} samples per trace do not fit SEG-Y")));
        }
        if !(dt > 0.0 && dt.is_finite()) {
            return Err(SegyError::invalid(p, format!("sample interval {dt} s is not positive")));
        }
        let delay = delay_fields(t0).ok_or_else(|| {
            SegyError::invalid(p, format!("first-sample time {t0} s does not fit the delay recording time field (bytes 109-110, +-32.767 s)"))
        })?;
        if let CoordinateScalar::Fixed(s) = opts.coordinate_scalar
            && !matches!(s.unsigned_abs(), 0 | 1 | 10 | 100 | 1000 | 10000)
        {
            return Err(SegyError::invalid(p, format!("coordinate scalar {s} is not one of +-1, 10, 100, 1000, 10000")));
        }

        let mut head = vec![0u8; 3600];
        let lines = match &opts.text {
            Some(t) => t.lines().map(str::to_string).collect(),
            None => default_text(ns, dt, t0, opts),
        };
        if lines.len() > 38 {
            return Err(SegyError::invalid(p, format!("textual header has {} lines, at most 38 fit (cards 39-40 are the rev 2 end cards)", lines.len())));
        }
        let mut cards = String::with_capacity(3200);
        for k in 0..40 {
            let body = match k {
                38 => "SEG-Y_REV2.0".to_string(),
                39 => "END TEXTUAL HEADER".to_string(),
                _ => lines.get(k).cloned().unwrap_or_default(),
            };
            let card: String = format!("C{:2} {}", k + 1, body).chars().take(80).collect();
            cards.push_str(&format!("{card:<80}"));
        }
        ebcdic::encode(&cards, opts.text_encoding, &mut head[..3200]);
        BinaryHeader::emit(ns, dt, opts.format, opts.endian, &mut head[3200..]);
        FieldsMut::new(&mut head[3512..3520], 3513, opts.endian).u64(3513, traces);
        let dt_field = classic_interval(dt).unwrap_or(0);
        Ok((TraceEncoder { path, ns, dt, dt_field, delay, opts: opts.clone() }, head))
    }

    /// Bytes per trace (header and samples).
    pub fn trace_bytes(&self) -> usize { 240 + self.ns * self.opts.format.size() }

    /// Fills one trace header into `out`, naming the trace on failure.
    fn header(&self, h: &TraceHeader, index: u64, out: &mut [u8]) -> Result<()> {
        let scalco = match self.opts.coordinate_scalar {
            CoordinateScalar::Fixed(s) => s,
            CoordinateScalar::Auto => choose_scalar(header_coordinates(h).into_iter()).unwrap_or(1),
        };
        let bad = |msg: String| SegyError::BadTrace { path: self.path.display().to_string(), trace: index, msg };
        emit_trace_header(h, index, self.ns, self.dt_field, self.delay, scalco, self.opts.endian, out).map_err(|e| match e {
            EmitError::Coordinate(name, v) => bad(format!("{name} {v} m does not fit the header field with coordinate scalar {scalco}")),
            EmitError::Offset(v) => bad(format!("offset {v} m does not fit bytes 37-40")),
            EmitError::ShotPoint(v) => bad(format!("shot point {v} does not fit bytes 197-200 with any scalar")),
        })
    }

    fn check_finite(&self, samples: &[f32], index: u64) -> Result<()> {
        if let Some(i) = samples.iter().position(|v| !v.is_finite()) {
            return Err(SegyError::NonFinite { path: self.path.display().to_string(), trace: index, sample: i, value: samples[i],
                what: ": non-finite samples cannot be written" });
        }
        Ok(())
    }

    /// Checks a set against the file's layout (sample count and interval, finite samples; `first`:
    /// the file's number of its first trace, for the messages).
    fn check_set(&self, set: &TraceSet, first: u64) -> Result<()> {
        if set.ns != self.ns || set.dt != self.dt {
            return Err(SegyError::invalid(&self.path, format!(
                "trace set has {} samples at {} s, the file {} at {} s", set.ns, set.dt, self.ns, self.dt)));
        }
        if set.data.len() != set.len() * set.ns {
            return Err(SegyError::invalid(&self.path, format!("{} samples for {} traces of {}", set.data.len(), set.len(), set.ns)));
        }
        if let Some(i) = set.data.iter().position(|v| !v.is_finite()) {
            let t = i / self.ns;
            return self.check_finite(set.trace(t), first + t as u64);
        }
        Ok(())
    }

    /// Encodes `headers` (the file's traces `first`, `first + 1`, ...) and their samples `data`
    /// into `buf` (resized to their bytes): headers sequentially (cheap, and the first bad one is
    /// the one reported), samples in parallel.
    pub(crate) fn encode_block(&self, headers: &[TraceHeader], data: &[f32], first: u64, buf: &mut Vec<u8>) -> Result<()> {
        let tb = self.trace_bytes();
        buf.resize(headers.len() * tb, 0);
        headers.iter().enumerate().try_for_each(|(k, h)| self.header(h, first + k as u64, &mut buf[k * tb..k * tb + 240]))?;
        let (format, endian, ns) = (self.opts.format, self.opts.endian, self.ns);
        buf.par_chunks_mut(tb).zip(data.par_chunks(ns)).for_each(|(o, s)| encode_samples(s, format, endian, &mut o[240..]));
        Ok(())
    }

    /// The bytes of every trace of `set`, numbered in the file from `first`: what [`SegyWriter`]
    /// writes for them (with a fixed coordinate scalar, chosen over the whole file, the bytes do
    /// not depend on how the traces are cut into sets).
    pub fn encode_set(&self, set: &TraceSet, first: u64) -> Result<Vec<u8>> {
        self.check_set(set, first)?;
        let mut buf = Vec::new();
        self.encode_block(&set.headers, &set.data, first, &mut buf)?;
        Ok(buf)
    }
}

impl SegyWriter {
    /// Creates the (temporary) file and writes the textual and binary headers.
    pub fn create(path: impl AsRef<Path>, ns: usize, dt: f32, t0: f32, opts: &WriteOptions) -> Result<Self> {
        let (enc, head) = TraceEncoder::new(path, ns, dt, t0, opts, 0)?;
        let p = enc.path.as_path();
        let mut out = AtomicFile::create(p).map_err(|e| SegyError::io(p, e))?;
        out.write_all(&head).map_err(|e| SegyError::io(p, e))?;
        Ok(SegyWriter { enc, out, written: 0, buf: Vec::new(), poisoned: None })
    }

    pub fn traces_written(&self) -> u64 { self.written }

    /// The error for a write after an earlier one failed.
    fn check_poisoned(&self) -> Result<()> {
        match &self.poisoned {
            Some(first) => Err(SegyError::invalid(&self.enc.path, format!("not written: an earlier write failed ({first})"))),
            None => Ok(()),
        }
    }

    /// Records the first error: the writer takes no more traces and never commits.
    fn poison<T>(&mut self, r: Result<T>) -> Result<T> {
        if let Err(e) = &r
            && self.poisoned.is_none()
        {
            self.poisoned = Some(e.to_string());
        }
        r
    }

    /// Appends one trace.
    pub fn write_trace(&mut self, h: &TraceHeader, samples: &[f32]) -> Result<()> {
        self.check_poisoned()?;
        let r = self.write_trace_inner(h, samples);
        self.poison(r)
    }

    fn write_trace_inner(&mut self, h: &TraceHeader, samples: &[f32]) -> Result<()> {
        let index = self.written;
        let e = &self.enc;
        if samples.len() != e.ns {
            return Err(SegyError::BadTrace { path: e.path.display().to_string(), trace: index,
                msg: format!("{} samples given, the file has {} per trace", samples.len(), e.ns) });
        }
        e.check_finite(samples, index)?;
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(e.trace_bytes(), 0);
        let r = e.header(h, index, &mut buf[..240]);
        if r.is_ok() {
            encode_samples(samples, e.opts.format, e.opts.endian, &mut buf[240..]);
        }
        let r = r.and_then(|_| self.out.write_all(&buf).map_err(|err| SegyError::io(&e.path, err)));
        self.buf = buf;
        r?;
        self.written += 1;
        Ok(())
    }

    /// Appends every trace of `set` (same sample count and interval), encoding in parallel.
    pub fn write_set(&mut self, set: &TraceSet) -> Result<()> {
        self.check_poisoned()?;
        let r = self.write_set_inner(set);
        self.poison(r)
    }

    fn write_set_inner(&mut self, set: &TraceSet) -> Result<()> {
        self.enc.check_set(set, self.written)?;
        let ns = self.enc.ns;
        // Blocks of about 32 MiB keep the buffer bounded for large sets.
        let block = ((32 << 20) / self.enc.trace_bytes()).max(1);
        let mut buf = std::mem::take(&mut self.buf);
        let mut result = Ok(());
        for (b, headers) in set.headers.chunks(block).enumerate() {
            let first = b * block;
            result = self.enc.encode_block(headers, &set.data[first * ns..(first + headers.len()) * ns], self.written, &mut buf);
            if result.is_err() {
                break;
            }
            if let Err(e) = self.out.write_all(&buf) {
                result = Err(SegyError::io(&self.enc.path, e));
                break;
            }
            self.written += headers.len() as u64;
        }
        self.buf = buf;
        result
    }

    /// Drops the temporary file, leaving any file at the path as it was.
    pub fn abandon(self) {}

    /// Records the trace count in the binary header and moves the file into place; an error
    /// (nothing committed) when any write failed.
    pub fn finish(mut self) -> Result<u64> {
        self.check_poisoned()?;
        let mut count = [0u8; 8];
        FieldsMut::new(&mut count, 3513, self.enc.opts.endian).u64(3513, self.written);
        let p = self.enc.path.clone();
        let w = self.out.writer();
        w.seek(SeekFrom::Start(3512)).map_err(|e| SegyError::io(&p, e))?;
        w.write_all(&count).map_err(|e| SegyError::io(&p, e))?;
        w.seek(SeekFrom::End(0)).map_err(|e| SegyError::io(&p, e))?;
        self.out.commit().map_err(|e| SegyError::io(&p, e))?;
        Ok(self.written)
    }
}
