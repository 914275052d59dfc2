//! SEG-Y rev 0 / 1 / 2 reading and writing, and Seismic Unix reading.
//!
//! * Textual header in EBCDIC or ASCII (detected; see [`ebcdic`]), binary header, 240-byte trace
//!   headers with the fields seisgpu uses ([`TraceHeader`]): source and group coordinates with the
//!   coordinate scalar (bytes 71-72) applied both ways, offset, CDP, inline/crossline (rev 2 bytes
//!   189/193), samples, interval, delay time (with the rev 1 time scalar, bytes 215-216), field
//!   record, channel, energy source point, trace identification code, CDP x/y.
//! * Sample formats 1 (IBM float, see [`ibm`]: exact where representable, rounded to nearest
//!   otherwise), 5 (IEEE float); reading also takes 2 (int32), 3 (int16) and 8 (int8).
//! * Big- and little-endian: the byte order is detected from the rev 2 byte-order constant
//!   (bytes 3297-3300 = 16909060) and, for older files, from the format code (bytes 3225-3226).
//! * Field files ([`SegyReader::open_with`], [`ReaderOptions`]): where the binary and trace
//!   headers disagree on the sample count, the count the file's size agrees with is read, with one
//!   warning in [`SegyInfo::warnings`]; `samples` and `dt` override both. Extended textual headers
//!   a revision 0 file does not announce are found by their content. Every binary header value
//!   used is range-checked (error naming its bytes). [`HeaderBytes`] moves the geometry fields of
//!   non-standard files.
//! * Seismic Unix files (SEG-Y trace headers and IEEE samples, no file header, either byte order)
//!   are read through the same API, chosen by the `.su` extension or by content
//!   ([`SegyInfo::file_format`]).
//! * [`SegyReader`] streams: single traces, chunks of N traces or an iterator, with memory bounded
//!   by the chunk, for files larger than memory. [`read_segy`] reads a whole file;
//!   [`crate::io::input::read_traces`] adds trace selection and skips non-seismic traces.
//!   [`SegyWriter`] streams out through [`AtomicFile`](super::AtomicFile); [`write_segy`] writes a
//!   [`TraceSet`].
//! * Errors ([`SegyError`]) name the file, and the trace (0-based index and byte offset) when one
//!   is at fault.
//!
//! Why our own code: the maintained Rust SEG-Y crates were looked at first. `giga-segy-in`/`-out`
//! (last release 2023) memory-map the whole file and have no chunked streaming API, which the
//! larger-than-memory requirement needs; the others are unmaintained or read-only. The format is
//! small enough that a reader and writer checked bit for bit against segyio (the reference client,
//! see tests/integration/segy.rs) is the cheaper and safer path.
//!
//! Not supported (a clear error, never silent garbage): variable-length traces (unless
//! `samples` says they all have one length), rev 2 additional trace headers, a variable number of
//! trailer stanzas, samples formats other than 1, 2, 3, 5, 8 (and 1, 5 on write), traces with
//! different delay times in one file (a [`TraceSet`] has a single first-sample time), writing SU.
//! The offset (bytes 37-40) is an unscaled integer in SEG-Y, so writing rounds it to whole metres.

pub mod ebcdic;
pub mod header;
pub mod ibm;
mod open;
pub mod options;
mod read;
mod write;

use std::path::Path;

pub use ebcdic::TextEncoding;
pub use header::BinaryHeader;
pub use options::{FileFormat, HeaderBytes, ReaderOptions};
pub use read::{read_segy, SegyReader, Trace};
pub use write::{header_coordinates, write_segy, CoordinateScalar, SegyWriter, TraceEncoder, WriteOptions};

#[allow(unused_imports)]
use crate::traces::{TraceHeader, TraceSet};

/// Byte order of the binary fields and samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum Endian {
    /// The SEG-Y standard's byte order (and the only one before rev 2).
    #[default]
    Big,
    /// Allowed by rev 2 (and detected through the byte-order constant).
    Little,
}

impl std::str::FromStr for Endian {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "big" | "be" => Ok(Endian::Big),
            "little" | "le" => Ok(Endian::Little),
            o => Err(format!("unknown byte order `{o}` (expected big or little)")),
        }
    }
}

/// Data sample format (binary header bytes 3225-3226).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub enum SampleFormat {
    /// 1: 4-byte IBM floating point.
    #[default]
    IbmFloat,
    /// 2: 4-byte two's complement integer.
    Int32,
    /// 3: 2-byte two's complement integer.
    Int16,
    /// 5: 4-byte IEEE floating point.
    IeeeFloat,
    /// 8: 1-byte two's complement integer.
    Int8,
}

impl SampleFormat {
    pub fn from_code(code: i16) -> Option<Self> {
        Some(match code {
            1 => Self::IbmFloat,
            2 => Self::Int32,
            3 => Self::Int16,
            5 => Self::IeeeFloat,
            8 => Self::Int8,
            _ => return None,
        })
    }
    pub fn code(self) -> i16 {
        match self {
            Self::IbmFloat => 1,
            Self::Int32 => 2,
            Self::Int16 => 3,
            Self::IeeeFloat => 5,
            Self::Int8 => 8,
        }
    }
    /// Bytes per sample.
    pub fn size(self) -> usize {
        match self {
            Self::IbmFloat | Self::Int32 | Self::IeeeFloat => 4,
            Self::Int16 => 2,
            Self::Int8 => 1,
        }
    }
    /// Every code defined by SEG-Y rev 2 (used to tell the byte order of pre-rev-2 files).
    fn is_defined_code(code: i16) -> bool { matches!(code, 1..=12 | 15 | 16) }
}

impl std::str::FromStr for SampleFormat {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "ibm" | "1" => Ok(Self::IbmFloat),
            "ieee" | "5" => Ok(Self::IeeeFloat),
            o => Err(format!("unknown sample format `{o}` (expected ibm (format 1) or ieee (format 5))")),
        }
    }
}

/// Everything about a SEG-Y file except its traces.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SegyInfo {
    /// The 3200-byte textual header, decoded (40 cards of 80 characters, no line breaks).
    pub text: String,
    pub text_encoding: TextEncoding,
    /// Extended textual headers (rev 1+), decoded.
    pub extended_text: Vec<String>,
    pub binary: BinaryHeader,
    pub endian: Endian,
    pub format: SampleFormat,
    /// Samples per trace.
    pub ns: usize,
    /// Sample interval (s).
    pub dt: f32,
    /// Time of the first sample (s): trace 0's delay recording time.
    pub t0: f32,
    /// Complete traces in the file.
    pub n_traces: u64,
    /// Byte offset of trace 0's header.
    pub data_offset: u64,
    /// Bytes per trace (240 + ns * sample size).
    pub trace_bytes: u64,
    /// Bytes after the last complete trace that do not make a whole trace (a truncated file).
    pub trailing_bytes: u64,
    /// File length (bytes).
    pub file_len: u64,
    /// SEG-Y, or Seismic Unix (no textual or binary header: `text` empty, `binary` all zero).
    pub file_format: FileFormat,
    /// What the reader worked around (one line each, naming the file and the header bytes): header
    /// fields that disagree with the file, unannounced extended textual headers.
    pub warnings: Vec<String>,
}

impl SegyInfo {
    /// One line for logs: traces, samples, interval, format, byte order.
    pub fn summary(&self) -> String {
        if self.file_format == FileFormat::Su {
            return format!("{} traces x {} samples at {} ms (t0 {} ms), Seismic Unix, {:?}-endian",
                self.n_traces, self.ns, self.dt * 1e3, self.t0 * 1e3, self.endian);
        }
        format!("{} traces x {} samples at {} ms (t0 {} ms), format {} ({:?}), {:?}-endian, rev {}.{}, textual header {:?}",
            self.n_traces, self.ns, self.dt * 1e3, self.t0 * 1e3, self.format.code(), self.format, self.endian,
            self.binary.revision_major, self.binary.revision_minor, self.text_encoding)
    }
    /// The textual header as 40 lines of 80 characters.
    pub fn text_cards(&self) -> Vec<String> {
        let chars: Vec<char> = self.text.chars().collect();
        chars.chunks(80).map(|c| c.iter().collect::<String>().trim_end().to_string()).collect()
    }
    /// Byte offset of trace `i`'s header.
    pub fn trace_offset(&self, i: u64) -> u64 { self.data_offset + i * self.trace_bytes }
}

/// What can go wrong reading or writing SEG-Y. Every message names the file.
#[derive(Debug, thiserror::Error)]
pub enum SegyError {
    // The I/O error's text is in the message (not also a `source`, which `{:#}` would print twice).
    #[error("{path}: {error}")]
    Io { path: String, error: std::io::Error },
    #[error("{path}: file is {len} bytes, shorter than the 3600-byte SEG-Y file header (3200-byte textual + 400-byte binary header)")]
    TooShort { path: String, len: u64 },
    #[error("{path}: sample format code {code} (binary header bytes 3225-3226, read {endian:?}-endian) is not supported; \
             supported: 1 (IBM float), 2 (int32), 3 (int16), 5 (IEEE float), 8 (int8){hint}")]
    BadFormat { path: String, code: i16, endian: Endian, hint: String },
    #[error("{path}: zero samples per trace (binary header bytes 3221-3222{ext} and trace 0 header bytes 115-116)")]
    ZeroSamples { path: String, ext: &'static str },
    #[error("{path}: zero sample interval (binary header bytes 3217-3218 and trace 0 header bytes 117-118)")]
    ZeroInterval { path: String },
    #[error("{path}: trace {trace} (byte {offset}) has {found} samples in header bytes 115-116 but the file's traces have {expected}; \
             variable-length traces are not supported (give --samples N to read every trace with N samples)")]
    InconsistentSamples { path: String, trace: u64, offset: u64, found: usize, expected: usize },
    #[error("{path}: trace {trace} (byte {offset}) has delay recording time {found} ms (bytes 109-110) but trace 0 has {expected} ms; \
             traces with different first-sample times cannot be read into one trace set")]
    InconsistentDelay { path: String, trace: u64, offset: u64, found: f64, expected: f64 },
    #[error("{path}: trace {trace} (byte {offset}) is truncated: the file ends after {have} of its {need} bytes")]
    Truncated { path: String, trace: u64, offset: u64, have: u64, need: u64 },
    #[error("{path}: trace {trace} sample {sample} is not finite ({value}){what}")]
    NonFinite { path: String, trace: u64, sample: usize, value: f32, what: &'static str },
    #[error("{path}: trace {trace}: {msg}")]
    BadTrace { path: String, trace: u64, msg: String },
    #[error("{path}: {msg}")]
    Invalid { path: String, msg: String },
}

impl SegyError {
    pub(crate) fn io(path: &Path, error: std::io::Error) -> Self { SegyError::Io { path: path.display().to_string(), error } }
    pub(crate) fn invalid(path: &Path, msg: impl Into<String>) -> Self {
        SegyError::Invalid { path: path.display().to_string(), msg: msg.into() }
    }
}

pub type Result<T> = std::result::Result<T, SegyError>;

/// Decodes `ns` samples of `format` from `bytes` into `out`; returns the index of the first
/// non-finite sample, if any (only possible for the float formats).
fn decode_samples(bytes: &[u8], format: SampleFormat, endian: Endian, out: &mut [f32]) -> Option<usize> {
    let be = endian == Endian::Big;
    match format {
        SampleFormat::IbmFloat => ibm::decode(bytes, be, out),
        SampleFormat::IeeeFloat => {
            for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                let b = [b[0], b[1], b[2], b[3]];
                *o = if be { f32::from_be_bytes(b) } else { f32::from_le_bytes(b) };
            }
        }
        SampleFormat::Int32 => {
            for (o, b) in out.iter_mut().zip(bytes.chunks_exact(4)) {
                let b = [b[0], b[1], b[2], b[3]];
                *o = (if be { i32::from_be_bytes(b) } else { i32::from_le_bytes(b) }) as f32;
            }
            return None;
        }
        SampleFormat::Int16 => {
            for (o, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
                let b = [b[0], b[1]];
                *o = (if be { i16::from_be_bytes(b) } else { i16::from_le_bytes(b) }) as f32;
            }
            return None;
        }
        SampleFormat::Int8 => {
            for (o, &b) in out.iter_mut().zip(bytes) {
                *o = b as i8 as f32;
            }
            return None;
        }
    }
    out.iter().position(|v| !v.is_finite())
}

/// Encodes finite samples as format 1 or 5.
fn encode_samples(samples: &[f32], format: SampleFormat, endian: Endian, out: &mut [u8]) {
    let be = endian == Endian::Big;
    match format {
        SampleFormat::IbmFloat => ibm::encode(samples, be, out),
        SampleFormat::IeeeFloat => {
            for (&x, o) in samples.iter().zip(out.chunks_exact_mut(4)) {
                o.copy_from_slice(&if be { x.to_be_bytes() } else { x.to_le_bytes() });
            }
        }
        // The writer only accepts formats 1 and 5 (checked in `SegyWriter::create`).
        _ => unreachable!("writing sample format {format:?} is not supported"),
    }
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod field_tests;
#[cfg(test)]
mod mutation_tests;
