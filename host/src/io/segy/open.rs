//! Working out a file's layout when it is opened: SEG-Y or Seismic Unix, where the traces start
//! and end, how many samples they have and at what interval, and what to warn about. Every
//! binary header value used is range-checked here, with an error naming its bytes.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use super::header::{parse_trace_header, BinaryHeader, Fields, TraceTiming, BYTE_ORDER_CONSTANT};
use super::{ebcdic, Endian, FileFormat, ReaderOptions, Result, SampleFormat, SegyError, SegyInfo, TextEncoding};

/// What [`super::SegyReader`] needs besides the open file.
pub(super) struct Layout {
    pub info: SegyInfo,
    /// Whether bytes 215-216 (time scalar) are honoured: SEG-Y rev 1 and later, and SU.
    pub time_scalar: bool,
    /// Trace 0's delay recording time (ms) as its header holds it.
    pub delay_ms: f64,
    /// The sample counts (besides 0) a trace header may give without error: the file's and trace
    /// 0's (which differ where the file's own evidence overrode the trace headers); `None` where
    /// `--samples` was given and the headers' counts are not looked at.
    pub ns_ok: Option<[usize; 2]>,
}

/// Extended textual header records looked for by content after a binary header that does not
/// announce them (at most this many).
const MAX_UNANNOUNCED_TEXT: usize = 256;
/// Traces followed header by header to tell a variable-length file from a truncated one.
const MAX_WALK: u64 = 100_000;

pub(super) fn layout(path: &Path, file: &mut File, file_len: u64, opts: &ReaderOptions) -> Result<Layout> {
    if let Some(n) = opts.samples.filter(|&n| n == 0 || n > i32::MAX as usize) {
        return Err(SegyError::invalid(path, format!("--samples {n}: samples per trace must be 1..{}", i32::MAX)));
    }
    if let Some(dt) = opts.dt.filter(|dt| !(dt.is_finite() && *dt > 0.0)) {
        return Err(SegyError::invalid(path, format!("--dt {} ms: the sample interval must be a finite positive number", dt * 1e3)));
    }
    opts.bytes.validate().map_err(|m| SegyError::invalid(path, format!("--bytes: {m}")))?;
    let format = match opts.format {
        Some(f) => f,
        None if has_su_extension(path) => FileFormat::Su,
        None => {
            // Content: an SU file starts with a trace header and samples, never with text.
            let mut head = vec![0u8; file_len.min(3200) as usize];
            read_at(file, path, 0, &mut head)?;
            let text = head.len() == 3200 && looks_textual(&head);
            if !text && su_endian(file, path, file_len, opts)?.is_some() && segy_head_implausible(file, path, file_len)? {
                FileFormat::Su
            } else {
                FileFormat::Segy
            }
        }
    };
    match format {
        FileFormat::Segy => segy_layout(path, file, file_len, opts),
        FileFormat::Su => su_layout(path, file, file_len, opts),
    }
}

fn has_su_extension(path: &Path) -> bool { path.extension().and_then(|e| e.to_str()).is_some_and(|e| e.eq_ignore_ascii_case("su")) }

fn read_at(file: &mut File, path: &Path, offset: u64, buf: &mut [u8]) -> Result<()> {
    file.seek(SeekFrom::Start(offset)).map_err(|e| SegyError::io(path, e))?;
    file.read_exact(buf).map_err(|e| SegyError::io(path, e))
}

/// Whether a 3200-byte record is text: nearly all of it printable in ASCII or in EBCDIC, or a
/// rev 1+ `((SEG: ...))` stanza. Trace headers (mostly zero bytes) and samples are not.
pub(super) fn looks_textual(rec: &[u8]) -> bool {
    let printable = |c: u8| (0x20..0x7f).contains(&c);
    let ascii = rec.iter().filter(|&&c| printable(c)).count();
    let ebcdic = rec.iter().filter(|&&c| printable(ebcdic::EBCDIC_TO_ASCII[c as usize])).count();
    if ascii.max(ebcdic) * 10 >= rec.len() * 9 {
        return true;
    }
    let stanza = |enc| ebcdic::decode(rec, enc).contains("((SEG:");
    stanza(TextEncoding::Ascii) || stanza(TextEncoding::Ebcdic)
}

/// Whether the 3600-byte SEG-Y file header makes no sense (too short, or a sample format code
/// undefined in either byte order).
fn segy_head_implausible(file: &mut File, path: &Path, file_len: u64) -> Result<bool> {
    if file_len < 3600 {
        return Ok(true);
    }
    let mut bin = vec![0u8; 400];
    read_at(file, path, 3200, &mut bin)?;
    Ok(match detect_endian(path, &bin) {
        Ok(e) => SampleFormat::from_code(Fields::new(&bin, 3201, e).i16(3225)).is_none(),
        Err(_) => true,
    })
}

/// The byte order in which trace 0's header describes the file as SU: a positive sample count
/// (bytes 115-116, or `--samples`) whose traces of 240 + 4 x ns bytes make up the whole file,
/// and a positive interval (bytes 117-118, or `--dt`). Where both orders fit, the one whose own
/// count is the one used, then little-endian (what today's machines write).
fn su_endian(file: &mut File, path: &Path, file_len: u64, opts: &ReaderOptions) -> Result<Option<Endian>> {
    if file_len < 240 {
        return Ok(None);
    }
    let mut h = [0u8; 240];
    read_at(file, path, 0, &mut h)?;
    let fits = |e: Endian| {
        let f = Fields::new(&h, 1, e);
        let ns = opts.samples.unwrap_or(f.u16(115) as usize) as u64;
        let own = f.u16(115) as u64 == ns;
        (ns > 0 && (f.u16(117) > 0 || opts.dt.is_some()) && file_len.is_multiple_of(240 + 4 * ns)).then_some(own)
    };
    Ok(match (fits(Endian::Little), fits(Endian::Big)) {
        (Some(le), Some(be)) => Some(if be && !le { Endian::Big } else { Endian::Little }),
        (Some(_), None) => Some(Endian::Little),
        (None, Some(_)) => Some(Endian::Big),
        (None, None) => None,
    })
}

fn su_layout(path: &Path, file: &mut File, file_len: u64, opts: &ReaderOptions) -> Result<Layout> {
    let Some(endian) = su_endian(file, path, file_len, opts)? else {
        let mut h = [0u8; 240];
        let got = if file_len >= 240 { read_at(file, path, 0, &mut h).is_ok() } else { false };
        let (le, be) = (Fields::new(&h, 1, Endian::Little), Fields::new(&h, 1, Endian::Big));
        return Err(SegyError::invalid(path, if got {
            format!("not a Seismic Unix file: trace 0's header gives {} samples (bytes 115-116) and interval {} us (bytes 117-118) read \
                     little-endian, {} and {} read big-endian, and neither makes the {file_len} bytes whole traces of 240 + 4 x samples bytes \
                     (give --samples N if the count is known)", le.u16(115), le.u16(117), be.u16(115), be.u16(117))
        } else {
            format!("not a Seismic Unix file: {file_len} bytes, shorter than one 240-byte trace header")
        }));
    };
    let mut h = [0u8; 240];
    read_at(file, path, 0, &mut h)?;
    let (_, t) = parse_trace_header(&h, endian, true);
    let ns = opts.samples.unwrap_or(t.ns as usize);
    let dt = match opts.dt {
        Some(dt) => dt,
        None => t.dt_us as f32 * 1e-6,
    };
    let trace_bytes = 240 + 4 * ns as u64;
    let info = SegyInfo {
        text: String::new(),
        text_encoding: TextEncoding::Ascii,
        extended_text: Vec::new(),
        binary: BinaryHeader::default(),
        endian,
        format: SampleFormat::IeeeFloat,
        ns,
        dt,
        t0: (t.delay_ms * 1e-3) as f32,
        n_traces: file_len / trace_bytes,
        data_offset: 0,
        trace_bytes,
        trailing_bytes: file_len % trace_bytes,
        file_len,
        file_format: FileFormat::Su,
        warnings: Vec::new(),
    };
    let ns_ok = opts.samples.is_none().then_some([ns, ns]);
    Ok(Layout { info, time_scalar: true, delay_ms: t.delay_ms, ns_ok })
}

pub(super) fn detect_endian(path: &Path, bin: &[u8]) -> Result<Endian> {
    let be = Fields::new(bin, 3201, Endian::Big);
    let le = Fields::new(bin, 3201, Endian::Little);
    // Rev 2: the byte-order constant decides. Older files are big-endian by definition, but
    // little-endian files without the constant exist (written by PC programs): a format code that
    // is only defined when read little-endian tells them apart (swapped codes are >= 256).
    let endian = if be.u32(3297) == BYTE_ORDER_CONSTANT {
        Endian::Big
    } else if le.u32(3297) == BYTE_ORDER_CONSTANT {
        Endian::Little
    } else if SampleFormat::is_defined_code(be.i16(3225)) {
        Endian::Big
    } else if SampleFormat::is_defined_code(le.i16(3225)) {
        Endian::Little
    } else {
        return Err(SegyError::BadFormat {
            path: path.display().to_string(),
            code: be.i16(3225),
            endian: Endian::Big,
            hint: " (not a SEG-Y file, or a corrupt binary header: the code is undefined in either byte order; \
                   a Seismic Unix file needs the .su extension or whole traces of 240 + 4 x samples bytes)".into(),
        });
    };
    Ok(endian)
}

/// Trace 0's timing at `offset`, when a whole trace header is there.
fn timing_at(file: &mut File, path: &Path, offset: u64, end: u64, endian: Endian, time_scalar: bool) -> Result<Option<TraceTiming>> {
    if offset.checked_add(240).is_none_or(|e| e > end) {
        return Ok(None);
    }
    let mut h = [0u8; 240];
    read_at(file, path, offset, &mut h)?;
    Ok(Some(parse_trace_header(&h, endian, time_scalar).1))
}

fn segy_layout(path: &Path, file: &mut File, file_len: u64, opts: &ReaderOptions) -> Result<Layout> {
    let p = path;
    if file_len < 3600 {
        return Err(SegyError::TooShort { path: p.display().to_string(), len: file_len });
    }
    let mut head = vec![0u8; 3600];
    read_at(file, p, 0, &mut head)?;
    let (text_bytes, bin) = head.split_at(3200);
    let text_encoding = ebcdic::detect(text_bytes);
    let text = ebcdic::decode(text_bytes, text_encoding);
    let endian = detect_endian(p, bin)?;
    let binary = BinaryHeader::parse(bin, endian);
    let Some(format) = SampleFormat::from_code(binary.format_code) else {
        return Err(SegyError::BadFormat { path: p.display().to_string(), code: binary.format_code, endian, hint: String::new() });
    };
    let size = format.size() as u64;
    let rev = binary.revision_major;
    let time_scalar = rev >= 1;
    let mut warnings = Vec::new();
    let mut pos = 3600u64;

    // The binary header's sample count (rev 2 extended field first).
    let (bin_ns, bin_ns_bytes) = if rev >= 2 && binary.ext_samples_per_trace != 0 {
        let n = binary.ext_samples_per_trace;
        if n < 0 {
            return Err(SegyError::invalid(p, format!("extended samples per trace {n} (binary header bytes 3269-3272) is negative")));
        }
        (n as usize, "3269-3272")
    } else {
        (binary.samples_per_trace as usize, "3221-3222")
    };

    // Extended textual headers: announced (rev 1+), else looked for by content.
    let mut extended_text = Vec::new();
    let count = binary.extended_text_headers;
    let explicit_offset = rev >= 2 && binary.first_trace_offset != 0;
    if rev >= 1 && count != 0 {
        if count < -1 {
            return Err(SegyError::invalid(p, format!("invalid number of extended textual headers {count} (binary header bytes 3505-3506)")));
        }
        let mut rec = vec![0u8; 3200];
        loop {
            if pos + 3200 > file_len {
                return Err(SegyError::invalid(p, format!(
                    "the binary header announces extended textual headers (bytes 3505-3506: {count}) but the file ends inside header {}",
                    extended_text.len())));
            }
            read_at(file, p, pos, &mut rec)?;
            pos += 3200;
            let s = ebcdic::decode(&rec, ebcdic::detect(&rec));
            let end = s.contains("((SEG: EndText))");
            extended_text.push(s);
            if (count > 0 && extended_text.len() == count as usize) || (count == -1 && end) {
                break;
            }
        }
    } else if !explicit_offset {
        let recs = unannounced_text(p, file, file_len, &binary, bin_ns, size, endian, time_scalar, opts)?;
        if !recs.is_empty() {
            warnings.push(format!("{}: skipped {} extended textual header record(s) of 3200 bytes after the binary header, found by their \
                content (the binary header, revision {rev}, does not announce them in bytes 3505-3506)", p.display(), recs.len()));
            pos += 3200 * recs.len() as u64;
            extended_text = recs.iter().map(|r| ebcdic::decode(r, ebcdic::detect(r))).collect();
        }
    }

    let mut data_offset = pos;
    let mut trailer_bytes = 0u64;
    if rev >= 2 {
        let extra = binary.additional_trace_headers;
        if extra > 0 {
            return Err(SegyError::invalid(p, format!("{extra} additional trace headers per trace (binary header bytes 3507-3510) are not supported")));
        } else if extra < 0 {
            return Err(SegyError::invalid(p, format!("negative number of additional trace headers {extra} (binary header bytes 3507-3510)")));
        }
        let o = binary.first_trace_offset;
        if o != 0 {
            // The standard position is fine even in a file without traces (what a writer leaves
            // for an empty set); anywhere else must leave room for a trace header.
            if o < pos || o > file_len || (o != pos && o + 240 > file_len) {
                return Err(SegyError::invalid(p, format!(
                    "byte offset of the first trace {o} (binary header bytes 3521-3528) is outside {pos}..{} (the file headers end at byte \
                     {pos}, the file is {file_len} bytes and a trace header takes 240)", file_len.saturating_sub(240).max(pos))));
            }
            data_offset = o;
        }
        let n = binary.trailer_stanzas;
        if n < 0 {
            return Err(SegyError::invalid(p, format!("number of data trailer stanza records {n} (binary header bytes 3529-3532) is negative; \
                a variable number of trailer records is not supported")));
        }
        if n > 0 {
            trailer_bytes = n as u64 * 3200;
            let room = file_len - data_offset;
            if trailer_bytes + 240 > room {
                return Err(SegyError::invalid(p, format!(
                    "{n} data trailer stanza record(s) (binary header bytes 3529-3532) of 3200 bytes leave no room for a trace in the {room} \
                     bytes after byte {data_offset}")));
            }
        }
    }
    let data_len = file_len - data_offset - trailer_bytes;
    let data_end = data_offset + data_len;

    let first = timing_at(file, p, data_offset, data_end, endian, time_scalar)?;
    let t_ns = first.map_or(0, |t| t.ns as usize);
    let (ns, ns_ok) = match opts.samples {
        Some(n) => {
            let tb = 240 + n as u64 * size;
            if data_len > 0 && tb > data_len {
                return Err(SegyError::invalid(p, format!("--samples {n}: a trace of 240 + {n} x {size} bytes is longer than the {data_len} bytes \
                    of trace data after byte {data_offset}")));
            }
            (n, None)
        }
        None => {
            let ns = choose_ns(p, file, data_offset, data_len, size, (bin_ns, bin_ns_bytes), t_ns, endian, time_scalar, &mut warnings)?;
            (ns, Some([ns, t_ns]))
        }
    };
    if ns == 0 {
        return Err(SegyError::ZeroSamples { path: p.display().to_string(), ext: if rev >= 2 { ", extended bytes 3269-3272" } else { "" } });
    }

    // Sample interval: `--dt`, else the binary header (rev 2 extended field first), else trace 0.
    let dt = match opts.dt {
        Some(dt) => dt,
        None => {
            let mut dt_us = binary.sample_interval as f64;
            let ext = binary.ext_sample_interval;
            if rev >= 2 && ext != 0.0 {
                let s = (ext * 1e-6) as f32;
                if !(ext.is_finite() && ext > 0.0 && s.is_finite() && s > 0.0) {
                    return Err(SegyError::invalid(p, format!("extended sample interval {ext} us (binary header bytes 3273-3280) is not a \
                        finite positive interval (in seconds as a 32-bit float); give --dt MS to override")));
                }
                dt_us = ext;
            }
            if dt_us <= 0.0 {
                dt_us = first.map_or(0.0, |t| t.dt_us as f64);
            }
            if dt_us <= 0.0 {
                return Err(SegyError::ZeroInterval { path: p.display().to_string() });
            }
            (dt_us * 1e-6) as f32
        }
    };
    let trace_bytes = 240 + ns as u64 * size;
    let info = SegyInfo {
        text,
        text_encoding,
        extended_text,
        endian,
        format,
        ns,
        dt,
        t0: first.map(|t| (t.delay_ms * 1e-3) as f32).unwrap_or(0.0),
        n_traces: data_len / trace_bytes,
        data_offset,
        trace_bytes,
        trailing_bytes: data_len % trace_bytes,
        file_len,
        binary,
        file_format: FileFormat::Segy,
        warnings,
    };
    Ok(Layout { info, time_scalar, delay_ms: first.map_or(0.0, |t| t.delay_ms), ns_ok })
}

/// Extended textual header records after a binary header that does not announce them (rev 0,
/// or a count of 0): the run of 3200-byte records at byte 3600 that read as text, kept when the
/// count at bytes 3505-3506 or the file size (whole traces after them) agrees. Text that neither
/// agrees with is an error rather than traces of garbage.
#[allow(clippy::too_many_arguments)]
fn unannounced_text(p: &Path, file: &mut File, file_len: u64, binary: &BinaryHeader, bin_ns: usize, size: u64, endian: Endian,
    time_scalar: bool, opts: &ReaderOptions) -> Result<Vec<Vec<u8>>> {
    let mut recs: Vec<Vec<u8>> = Vec::new();
    while recs.len() < MAX_UNANNOUNCED_TEXT {
        let off = 3600 + 3200 * recs.len() as u64;
        if off + 3200 > file_len {
            break;
        }
        let mut rec = vec![0u8; 3200];
        read_at(file, p, off, &mut rec)?;
        if !looks_textual(&rec) {
            break;
        }
        recs.push(rec);
    }
    if recs.is_empty() {
        return Ok(recs);
    }
    let m = recs.len();
    let count = binary.extended_text_headers;
    let k = if count > 0 && count as usize <= m {
        Some(count as usize)
    } else if count == -1 {
        recs.iter().position(|r| ebcdic::decode(r, ebcdic::detect(r)).contains("((SEG: EndText))")).map(|i| i + 1)
    } else {
        None
    };
    let k = match k {
        Some(k) => Some(k),
        None => {
            let mut found = None;
            for k in (1..=m).rev() {
                let off = 3600 + 3200 * k as u64;
                let len = file_len - off;
                let t_ns = timing_at(file, p, off, file_len, endian, time_scalar)?.map_or(0, |t| t.ns as usize);
                let cands = [opts.samples.unwrap_or(0), bin_ns, t_ns];
                if len > 0 && cands.iter().any(|&n| n > 0 && len.is_multiple_of(240 + n as u64 * size)) {
                    found = Some(k);
                    break;
                }
            }
            found
        }
    };
    let Some(k) = k else {
        return Err(SegyError::invalid(p, format!(
            "bytes 3600..{} read as {m} textual record(s) of 3200 bytes, which the binary header (revision {}, bytes 3505-3506: {count}) does not \
             announce, and skipping them does not leave whole traces either: not a readable SEG-Y file (give --samples N if the sample \
             count is wrong)", 3600 + 3200 * m as u64, binary.revision_major)));
    };
    recs.truncate(k);
    Ok(recs)
}

/// The samples per trace where the binary header (`bin`: count and its bytes) and trace 0's
/// header (`t_ns`) may disagree: the count that divides the trace data into whole traces, else
/// the one that puts trace 1's header where it is; one warning when they disagree. A file whose
/// trace headers chain through traces of different lengths to its end is variable-length: an error.
#[allow(clippy::too_many_arguments)]
fn choose_ns(p: &Path, file: &mut File, data_offset: u64, data_len: u64, size: u64, bin: (usize, &str), t_ns: usize, endian: Endian,
    time_scalar: bool, warnings: &mut Vec<String>) -> Result<usize> {
    let (bin_ns, bin_bytes) = bin;
    let end = data_offset + data_len;
    let whole = |n: usize| data_len.is_multiple_of(240 + n as u64 * size);
    if bin_ns == 0 || t_ns == 0 || t_ns == bin_ns {
        let ns = if bin_ns == 0 { t_ns } else { bin_ns };
        if ns > 0 && !whole(ns) {
            variable_length_check(p, file, data_offset, end, size, endian, time_scalar)?;
        }
        return Ok(ns);
    }
    let mut next_agrees = |n: usize| -> Result<bool> {
        let off = data_offset + 240 + n as u64 * size;
        Ok(timing_at(file, p, off, end, endian, time_scalar)?.is_some_and(|t| t.ns as usize == t_ns))
    };
    let (ns, why) = match (whole(bin_ns), whole(t_ns)) {
        (true, false) => (bin_ns, "that makes whole traces of the file"),
        (false, true) => (t_ns, "that makes whole traces of the file"),
        (true, true) => {
            if next_agrees(t_ns)? && !next_agrees(bin_ns)? {
                (t_ns, "that puts trace 1's header where one is")
            } else {
                (bin_ns, "of the binary header (both make whole traces)")
            }
        }
        (false, false) => {
            variable_length_check(p, file, data_offset, end, size, endian, time_scalar)?;
            (bin_ns, "of the binary header (neither makes whole traces: the file looks truncated)")
        }
    };
    warnings.push(format!(
        "{}: the binary header (bytes {bin_bytes}) says {bin_ns} samples per trace, trace 0's header (bytes 115-116) says {t_ns}; \
         reading {ns}, the count {why} (give --samples N to choose)", p.display()));
    Ok(ns)
}

/// Follows the trace headers' own counts (bytes 115-116) from the first trace: if they lead
/// exactly to the end of the trace data through traces of different lengths, the file is
/// variable-length, which is an error; otherwise (a truncated file, counts that lead nowhere)
/// nothing is concluded here.
#[allow(clippy::too_many_arguments)]
fn variable_length_check(p: &Path, file: &mut File, data_offset: u64, end: u64, size: u64, endian: Endian, time_scalar: bool) -> Result<()> {
    let (mut off, mut seen, mut k) = (data_offset, BTreeSet::new(), 0u64);
    while k < MAX_WALK {
        let Some(t) = timing_at(file, p, off, end, endian, time_scalar)? else { break };
        if t.ns == 0 {
            break;
        }
        seen.insert(t.ns);
        off += 240 + t.ns as u64 * size;
        k += 1;
    }
    if off == end && seen.len() > 1 {
        let counts: Vec<String> = seen.iter().take(8).map(|n| n.to_string()).collect();
        return Err(SegyError::invalid(p, format!(
            "traces have different sample counts (trace header bytes 115-116: {}) and no single count makes whole traces of the file; \
             variable-length traces are not supported (give --samples N if every trace has N samples)", counts.join(", "))));
    }
    Ok(())
}
