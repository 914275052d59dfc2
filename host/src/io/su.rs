//! Seismic Unix (.su) traces: SEG-Y trace headers and IEEE float samples, no textual or binary
//! file header, in the byte order of the machine that wrote them (little-endian: every host
//! seisgpu runs on). The sample count and interval live only in each trace header (bytes 115-116,
//! 117-118), so an interval that is not a whole number of microseconds up to 65535 cannot be
//! written (an error, never a rounded interval).

use std::io::Read;
use std::path::Path;

use super::segy::header::{choose_scalar, classic_interval, parse_trace_header};
use super::segy::{header_coordinates, CoordinateScalar, Endian, Result, SampleFormat, SegyError, TraceEncoder, WriteOptions};
use super::AtomicFile;
use crate::traces::{TraceHeader, TraceSet};

/// Writes `set` as a Seismic Unix file through a temporary file renamed into place.
pub fn write_su(path: impl AsRef<Path>, set: &TraceSet) -> Result<()> {
    let path = path.as_ref();
    set.validate("trace set to write").map_err(|m| SegyError::invalid(path, m))?;
    if set.ns > u16::MAX as usize {
        return Err(SegyError::invalid(path, format!("{} samples per trace do not fit the SU trace header (bytes 115-116, at most 65535)", set.ns)));
    }
    if classic_interval(set.dt).is_none() {
        return Err(SegyError::invalid(path, format!(
            "sample interval {} s is not a whole number of microseconds in 1..65535, all that SU's trace header \
             (bytes 117-118) can hold; write SEG-Y (.sgy), whose rev 2 binary header carries any interval", set.dt)));
    }
    let scalar = choose_scalar(set.headers.iter().flat_map(header_coordinates))
        .ok_or_else(|| SegyError::invalid(path, "source/group/CDP coordinates are not finite or too large for any coordinate scalar"))?;
    let opts = WriteOptions { format: SampleFormat::IeeeFloat, endian: Endian::Little, coordinate_scalar: CoordinateScalar::Fixed(scalar),
        ..Default::default() };
    let (enc, _) = TraceEncoder::new(path, set.ns, set.dt, set.t0, &opts, set.len() as u64)?;
    let mut out = AtomicFile::create(path).map_err(|e| SegyError::io(path, e))?;
    // Blocks of about 32 MiB keep the buffer bounded for large sets.
    let block = ((32 << 20) / enc.trace_bytes()).max(1);
    let mut buf = Vec::new();
    for (b, headers) in set.headers.chunks(block).enumerate() {
        let first = b * block;
        enc.encode_block(headers, &set.data[first * set.ns..(first + headers.len()) * set.ns], first as u64, &mut buf)?;
        std::io::Write::write_all(&mut out, &buf).map_err(|e| SegyError::io(path, e))?;
    }
    out.commit().map_err(|e| SegyError::io(path, e))
}

/// Reads a little-endian Seismic Unix file (as [`write_su`] and SU itself on PCs write them).
pub fn read_su(path: impl AsRef<Path>) -> Result<TraceSet> {
    let path = path.as_ref();
    let mut bytes = Vec::new();
    std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut bytes)).map_err(|e| SegyError::io(path, e))?;
    let p = path.display().to_string();
    if bytes.is_empty() {
        return Ok(TraceSet { headers: Vec::new(), data: Vec::new(), ns: 0, dt: 0.0, t0: 0.0 });
    }
    if bytes.len() < 240 {
        return Err(SegyError::Truncated { path: p, trace: 0, offset: 0, have: bytes.len() as u64, need: 240 });
    }
    let (_, first) = parse_trace_header(&bytes[..240], Endian::Little, true);
    let ns = first.ns as usize;
    if ns == 0 {
        return Err(SegyError::invalid(path, "trace 0 has zero samples (bytes 115-116, read little-endian)"));
    }
    if first.dt_us == 0 {
        return Err(SegyError::invalid(path, "trace 0 has a zero sample interval (bytes 117-118, read little-endian)"));
    }
    let tb = 240 + 4 * ns;
    let n = bytes.len().div_ceil(tb);
    let mut headers: Vec<TraceHeader> = Vec::with_capacity(n);
    let mut data = vec![0f32; n * ns];
    for (i, (chunk, out)) in bytes.chunks(tb).zip(data.chunks_mut(ns)).enumerate() {
        let offset = (i * tb) as u64;
        if chunk.len() < tb {
            return Err(SegyError::Truncated { path: p, trace: i as u64, offset, have: chunk.len() as u64, need: tb as u64 });
        }
        let (h, t) = parse_trace_header(&chunk[..240], Endian::Little, true);
        if t.ns as usize != ns {
            return Err(SegyError::InconsistentSamples { path: p, trace: i as u64, offset, found: t.ns as usize, expected: ns });
        }
        if t.delay_ms != first.delay_ms {
            return Err(SegyError::InconsistentDelay { path: p, trace: i as u64, offset, found: t.delay_ms, expected: first.delay_ms });
        }
        for (o, b) in out.iter_mut().zip(chunk[240..].chunks_exact(4)) {
            *o = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
        if let Some(k) = out.iter().position(|v| !v.is_finite()) {
            return Err(SegyError::NonFinite { path: p, trace: i as u64, sample: k, value: out[k], what: "" });
        }
        headers.push(h);
    }
    Ok(TraceSet { headers, data, ns, dt: (first.dt_us as f64 * 1e-6) as f32, t0: (first.delay_ms * 1e-3) as f32 })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("seisgpu-su-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d.join(name)
    }

    fn set() -> TraceSet {
        let headers = (0..5).map(|i| TraceHeader { sx: 431_000.5 + i as f64, sy: 7_001_000.25, gx: 431_500.0, gy: 7_001_100.0,
            offset: -300.0 + 10.0 * i as f64, cdp: 100 + i, inline: 7, crossline: 20 + i, ffid: 3, channel: i + 1,
            cdp_xy: Some((431_260.0, 7_001_060.0)), shot_point: 55.5, ..Default::default() }).collect();
        let mut t = TraceSet::zeros(headers, 17, 0.002);
        t.t0 = 0.1;
        for (k, v) in t.data.iter_mut().enumerate() {
            *v = (k as f32 * 0.37).sin();
        }
        t
    }

    #[test]
    fn su_round_trip_keeps_geometry_and_samples() {
        let p = tmp("a.su");
        let t = set();
        write_su(&p, &t).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().len(), 5 * (240 + 17 * 4));
        let back = read_su(&p).unwrap();
        assert_eq!(back, t);
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn su_refuses_intervals_and_lengths_it_cannot_hold() {
        let p = tmp("b.su");
        let mut t = set();
        t.dt = 0.000_012_5;
        let e = write_su(&p, &t).unwrap_err().to_string();
        assert!(e.contains("b.su") && e.contains("0.0000125 s") && e.contains("117-118"), "{e}");
        let mut t = set();
        t.dt = 0.1;
        assert!(write_su(&p, &t).unwrap_err().to_string().contains("SEG-Y"));
        assert!(!p.exists());
    }
}
