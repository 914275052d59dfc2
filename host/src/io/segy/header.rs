//! Binary and trace header layouts. Byte numbers in this file are the standard's 1-based ones
//! (binary header 3201..3600, trace header 1..240), so they can be checked against the SEG-Y
//! rev 2.0 tables directly.

use crate::traces::TraceHeader;

use super::{Endian, SampleFormat};

/// Reads big- or little-endian fields from a header by their standard byte numbers.
#[derive(Clone, Copy)]
pub struct Fields<'a> {
    bytes: &'a [u8],
    /// Standard byte number of `bytes[0]` (3201 for the binary header, 1 for a trace header).
    first: usize,
    big: bool,
}

impl<'a> Fields<'a> {
    pub fn new(bytes: &'a [u8], first: usize, endian: Endian) -> Self { Fields { bytes, first, big: endian == Endian::Big } }
    fn get<const N: usize>(&self, byte: usize) -> [u8; N] {
        let i = byte - self.first;
        let mut a = [0u8; N];
        a.copy_from_slice(&self.bytes[i..i + N]);
        if !self.big {
            a.reverse();
        }
        a
    }
    pub fn i16(&self, byte: usize) -> i16 { i16::from_be_bytes(self.get(byte)) }
    pub fn u16(&self, byte: usize) -> u16 { u16::from_be_bytes(self.get(byte)) }
    pub fn i32(&self, byte: usize) -> i32 { i32::from_be_bytes(self.get(byte)) }
    pub fn u32(&self, byte: usize) -> u32 { u32::from_be_bytes(self.get(byte)) }
    pub fn u64(&self, byte: usize) -> u64 { u64::from_be_bytes(self.get(byte)) }
    pub fn f64(&self, byte: usize) -> f64 { f64::from_be_bytes(self.get(byte)) }
    pub fn u8(&self, byte: usize) -> u8 { self.bytes[byte - self.first] }
}

/// Writes fields by standard byte number (the counterpart of [`Fields`]).
pub struct FieldsMut<'a> {
    bytes: &'a mut [u8],
    first: usize,
    big: bool,
}

impl<'a> FieldsMut<'a> {
    pub fn new(bytes: &'a mut [u8], first: usize, endian: Endian) -> Self { FieldsMut { bytes, first, big: endian == Endian::Big } }
    fn put<const N: usize>(&mut self, byte: usize, mut a: [u8; N]) {
        if !self.big {
            a.reverse();
        }
        let i = byte - self.first;
        self.bytes[i..i + N].copy_from_slice(&a);
    }
    pub fn i16(&mut self, byte: usize, v: i16) { self.put(byte, v.to_be_bytes()) }
    pub fn u16(&mut self, byte: usize, v: u16) { self.put(byte, v.to_be_bytes()) }
    pub fn i32(&mut self, byte: usize, v: i32) { self.put(byte, v.to_be_bytes()) }
    pub fn u32(&mut self, byte: usize, v: u32) { self.put(byte, v.to_be_bytes()) }
    pub fn u64(&mut self, byte: usize, v: u64) { self.put(byte, v.to_be_bytes()) }
    pub fn f64(&mut self, byte: usize, v: f64) { self.put(byte, v.to_be_bytes()) }
    pub fn u8(&mut self, byte: usize, v: u8) { self.bytes[byte - self.first] = v }
}

/// The integer SEG-Y rev 2 stores at bytes 3297-3300 so a reader can tell the byte order.
pub const BYTE_ORDER_CONSTANT: u32 = 16_909_060; // 0x01020304

/// The binary header fields seisgpu reads (the rest of the 400 bytes is kept raw in `SegyInfo`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct BinaryHeader {
    /// 3201-3204, 3205-3208, 3209-3212.
    pub job_id: i32,
    pub line_number: i32,
    pub reel_number: i32,
    /// 3213-3214: data traces per ensemble.
    pub traces_per_ensemble: i16,
    /// 3217-3218: sample interval (microseconds, or Hz / m / ft for other domains).
    pub sample_interval: u16,
    /// 3221-3222: samples per data trace.
    pub samples_per_trace: u16,
    /// 3225-3226: data sample format code.
    pub format_code: i16,
    /// 3227-3228: ensemble fold; 3229-3230: trace sorting code.
    pub ensemble_fold: i16,
    pub sorting_code: i16,
    /// 3255-3256: 1 = metres, 2 = feet.
    pub measurement_system: i16,
    /// 3269-3272 (rev 2): extended samples per trace; overrides 3221 when nonzero.
    pub ext_samples_per_trace: i32,
    /// 3273-3280 (rev 2): extended sample interval (IEEE double); overrides 3217 when nonzero.
    pub ext_sample_interval: f64,
    /// 3297-3300 (rev 2): 16909060 when the file's byte order is the one it was read in.
    pub byte_order_constant: u32,
    /// 3501, 3502: SEG-Y format revision (major, minor); 0 for files before rev 1.
    pub revision_major: u8,
    pub revision_minor: u8,
    /// 3503-3504: fixed length trace flag.
    pub fixed_length: i16,
    /// 3505-3506: number of 3200-byte extended textual headers (-1: variable, ended by a stanza).
    pub extended_text_headers: i16,
    /// 3507-3510 (rev 2): maximum number of additional 240-byte trace headers.
    pub additional_trace_headers: i32,
    /// 3513-3520 (rev 2): number of traces in the file (0: not given).
    pub traces_in_file: u64,
    /// 3521-3528 (rev 2): byte offset of the first trace (0: after the textual headers).
    pub first_trace_offset: u64,
    /// 3529-3532 (rev 2): number of 3200-byte data trailer stanza records.
    pub trailer_stanzas: i32,
}

impl BinaryHeader {
    pub fn parse(bytes: &[u8], endian: Endian) -> Self {
        let f = Fields::new(bytes, 3201, endian);
        BinaryHeader {
            job_id: f.i32(3201),
            line_number: f.i32(3205),
            reel_number: f.i32(3209),
            traces_per_ensemble: f.i16(3213),
            sample_interval: f.u16(3217),
            samples_per_trace: f.u16(3221),
            format_code: f.i16(3225),
            ensemble_fold: f.i16(3227),
            sorting_code: f.i16(3229),
            measurement_system: f.i16(3255),
            ext_samples_per_trace: f.i32(3269),
            ext_sample_interval: f.f64(3273),
            byte_order_constant: f.u32(3297),
            revision_major: f.u8(3501),
            revision_minor: f.u8(3502),
            fixed_length: f.i16(3503),
            extended_text_headers: f.i16(3505),
            additional_trace_headers: f.i32(3507),
            traces_in_file: f.u64(3513),
            first_trace_offset: f.u64(3521),
            trailer_stanzas: f.i32(3529),
        }
    }

    /// The binary header seisgpu writes: SEG-Y rev 2.0, fixed-length traces, no extended
    /// textual headers, the byte-order constant, sample count and interval in the extended
    /// fields and, where they hold it exactly, the classic ones ([`classic_interval`]; else 0
    /// there: rev 2 readers take 3273-3280). `traces_in_file` is patched in when the writer finishes.
    pub fn emit(ns: usize, dt_s: f32, format: SampleFormat, endian: Endian, out: &mut [u8]) {
        let dt_us = dt_s as f64 * 1e6;
        let mut f = FieldsMut::new(out, 3201, endian);
        f.i32(3201, 1);
        f.i32(3205, 1);
        f.i32(3209, 1);
        f.u16(3217, classic_interval(dt_s).unwrap_or(0));
        f.u16(3219, classic_interval(dt_s).unwrap_or(0));
        f.u16(3221, u16::try_from(ns).unwrap_or(0));
        f.u16(3223, u16::try_from(ns).unwrap_or(0));
        f.i16(3225, format.code());
        f.i16(3255, 1); // metres
        f.i32(3269, i32::try_from(ns).unwrap_or(0));
        f.f64(3273, dt_us);
        f.u32(3297, BYTE_ORDER_CONSTANT);
        f.u8(3501, 2);
        f.u8(3502, 0);
        f.i16(3503, 1);
        f.i16(3505, 0);
        f.u64(3521, 3600);
    }
}

/// The 16-bit sample interval field's value (whole microseconds, bytes 3217-3218 and 117-118) for
/// an interval `dt_s` (s), when it holds it exactly: 1..=65535 us, reading it back giving the same
/// f32. `None` otherwise: a rounded value would be read as the interval by every reader that does
/// not know the rev 2 extended field (segyio among them), silently.
pub fn classic_interval(dt_s: f32) -> Option<u16> {
    let r = (dt_s as f64 * 1e6).round();
    (r >= 1.0 && r <= u16::MAX as f64 && (r * 1e-6) as f32 == dt_s).then_some(r as u16)
}

/// Applies a SEG-Y scalar (bytes 71-72 for coordinates, 215-216 for times): positive multiplies,
/// negative divides, zero means one.
pub fn apply_scalar(raw: i32, scalar: i16) -> f64 {
    match scalar {
        0 | 1 => raw as f64,
        s if s > 0 => raw as f64 * s as f64,
        s => raw as f64 / (-(s as i32)) as f64,
    }
}

/// Stores `v` with `scalar` (the inverse of [`apply_scalar`]), rounded to the nearest integer;
/// `None` when it does not fit an i32 or is not finite.
pub fn unapply_scalar(v: f64, scalar: i16) -> Option<i32> {
    let s = match scalar {
        0 | 1 => v,
        s if s > 0 => v / s as f64,
        s => v * (-(s as i32)) as f64,
    }
    .round();
    if s.is_finite() && s >= i32::MIN as f64 && s <= i32::MAX as f64 { Some(s as i32) } else { None }
}

/// Picks the coordinate scalar for a set of values (metres): the coarsest of 1, -10, -100,
/// -1000, -10000 that stores every value exactly (to 1e-6 of a stored unit), else the finest that
/// keeps every value inside an i32, else a multiplying scalar for huge values. `None` when no
/// scalar can hold them (non-finite values, or beyond 2^31 * 10000).
pub fn choose_scalar(values: impl Iterator<Item = f64> + Clone) -> Option<i16> {
    let mut max = 0.0f64;
    for v in values.clone() {
        if !v.is_finite() {
            return None;
        }
        max = max.max(v.abs());
    }
    let fits = |d: f64| max * d <= i32::MAX as f64;
    for d in [1i16, 10, 100, 1000, 10000] {
        let df = d as f64;
        if fits(df) && values.clone().all(|v| ((v * df) - (v * df).round()).abs() <= 1e-6) {
            return Some(if d == 1 { 1 } else { -d });
        }
    }
    for d in [10000i16, 1000, 100, 10, 1] {
        if fits(d as f64) {
            return Some(if d == 1 { 1 } else { -d });
        }
    }
    [10i16, 100, 1000, 10000].into_iter().find(|&m| max / m as f64 <= i32::MAX as f64)
}

/// What a trace header says besides the geometry: sample count, interval and first-sample time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TraceTiming {
    /// 115-116.
    pub ns: u16,
    /// 117-118 (microseconds).
    pub dt_us: u16,
    /// 109-110 delay recording time with the 215-216 time scalar applied (milliseconds).
    pub delay_ms: f64,
}

/// Reads the geometry and timing of one 240-byte trace header. `time_scalar` says whether bytes
/// 215-216 are honoured (SEG-Y rev 1 and later).
pub fn parse_trace_header(bytes: &[u8], endian: Endian, time_scalar: bool) -> (TraceHeader, TraceTiming) {
    let f = Fields::new(bytes, 1, endian);
    let scalco = f.i16(71);
    let coord = |b| apply_scalar(f.i32(b), scalco);
    let mut h = TraceHeader {
        ffid: f.i32(9),
        channel: f.i32(13),
        source_station: f.i32(17),
        cdp: f.i32(21),
        receiver_station: f.i32(25),
        offset: f.i32(37) as f64,
        sx: coord(73),
        sy: coord(77),
        gx: coord(81),
        gy: coord(85),
        inline: f.i32(189),
        crossline: f.i32(193),
        trace_id: f.i16(29),
        cdp_xy: None,
        shot_point: apply_scalar(f.i32(197), f.i16(201)),
    };
    // The CDP's own coordinates only where they say something the midpoint does not: zero in both
    // fields is how files say "not given", and the midpoint to the stored precision is what writers
    // (ours included) put there by default, so a round trip keeps `cdp_xy` as it was.
    let (cx, cy) = (coord(181), coord(185));
    let unit = apply_scalar(1, scalco).abs();
    let (mx, my) = h.midpoint();
    if (f.i32(181), f.i32(185)) != (0, 0) && ((cx - mx).abs() > unit || (cy - my).abs() > unit) {
        h.cdp_xy = Some((cx, cy));
    }
    let tscal = if time_scalar { f.i16(215) } else { 0 };
    let timing = TraceTiming { ns: f.u16(115), dt_us: f.u16(117), delay_ms: apply_scalar(f.i16(109) as i32, tscal) };
    (h, timing)
}

/// Why a trace header could not be written.
pub enum EmitError {
    /// A coordinate does not fit the scaled i32 field (the field's name).
    Coordinate(&'static str, f64),
    Offset(f64),
    /// The shot point number does not fit bytes 197-200 with any scalar.
    ShotPoint(f64),
}

/// Fills a 240-byte trace header. `index` is the trace's position in the file (0-based); `dt_field`
/// the sample interval field's value (bytes 117-118, [`classic_interval`], 0 when it cannot hold it).
#[allow(clippy::too_many_arguments)]
pub fn emit_trace_header(h: &TraceHeader, index: u64, ns: usize, dt_field: u16, delay: (i16, i16), scalco: i16,
    endian: Endian, out: &mut [u8]) -> Result<(), EmitError> {
    out.fill(0);
    let seq = i32::try_from(index + 1).unwrap_or(i32::MAX);
    let mut f = FieldsMut::new(out, 1, endian);
    f.i32(1, seq);
    f.i32(5, seq);
    f.i32(9, h.ffid);
    f.i32(13, h.channel);
    f.i32(17, h.source_station);
    f.i32(21, h.cdp);
    f.i32(25, h.receiver_station);
    f.i16(29, h.trace_id);
    f.i16(35, 1); // data use: production
    if !h.offset.is_finite() || h.offset.round().abs() > i32::MAX as f64 {
        return Err(EmitError::Offset(h.offset));
    }
    f.i32(37, h.offset.round() as i32);
    f.i16(69, 1);
    f.i16(71, scalco);
    let (mx, my) = h.cdp_position();
    for (byte, name, v) in [(73, "source x", h.sx), (77, "source y", h.sy), (81, "group x", h.gx), (85, "group y", h.gy),
        (181, "CDP x", mx), (185, "CDP y", my)] {
        f.i32(byte, unapply_scalar(v, scalco).ok_or(EmitError::Coordinate(name, v))?);
    }
    f.i16(89, 1); // coordinate units: length (metres or feet)
    f.i16(109, delay.0);
    f.u16(115, u16::try_from(ns).unwrap_or(0));
    f.u16(117, dt_field);
    f.i32(189, h.inline);
    f.i32(193, h.crossline);
    // Shot point with its own scalar (201-202): the coarsest that stores it exactly.
    let sp_scalar = choose_scalar(std::iter::once(h.shot_point)).ok_or(EmitError::ShotPoint(h.shot_point))?;
    f.i32(197, unapply_scalar(h.shot_point, sp_scalar).ok_or(EmitError::ShotPoint(h.shot_point))?);
    f.i16(201, sp_scalar);
    f.i16(215, delay.1);
    Ok(())
}

/// Delay recording time (109-110, ms) and its time scalar (215-216) for a first-sample time `t0`
/// (s): whole milliseconds when exact, else the coarsest dividing scalar that holds it exactly in
/// an i16, else the finest that fits (rounded). `None` when even whole ms overflow an i16.
pub fn delay_fields(t0: f32) -> Option<(i16, i16)> {
    let ms = t0 as f64 * 1e3;
    let mut best = None;
    for d in [1i32, 10, 100, 1000, 10000] {
        let v = ms * d as f64;
        if v.abs() > i16::MAX as f64 {
            break;
        }
        let scalar = if d == 1 { 1 } else { -(d as i16) };
        best = Some((v.round() as i16, scalar));
        // Exact in f32 terms: reading it back gives the same f32 t0.
        if ((v.round() / d as f64 * 1e-3) as f32) == t0 {
            return best;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn scalars_apply_both_ways() {
        assert_eq!(apply_scalar(12345, -100), 123.45);
        assert_eq!(apply_scalar(12, 10), 120.0);
        assert_eq!(apply_scalar(7, 0), 7.0);
        assert_eq!(unapply_scalar(123.45, -100), Some(12345));
        assert_eq!(unapply_scalar(120.0, 10), Some(12));
        assert_eq!(unapply_scalar(3e9, 1), None);
        assert_eq!(choose_scalar([1.0, 2.0, -3.0].into_iter()), Some(1));
        assert_eq!(choose_scalar([1.5, 2.25].into_iter()), Some(-100));
        assert_eq!(choose_scalar([100001.23, 5.0].into_iter()), Some(-100));
        assert_eq!(choose_scalar([1.0 / 3.0, 5e6].into_iter()), Some(-100));
        assert_eq!(choose_scalar([5e9].into_iter()), Some(10));
        assert_eq!(choose_scalar([f64::NAN].into_iter()), None);
    }
    #[test]
    fn delays() {
        assert_eq!(delay_fields(0.0), Some((0, 1)));
        assert_eq!(delay_fields(0.1), Some((100, 1)));
        assert_eq!(delay_fields(-0.05), Some((-50, 1)));
        assert_eq!(delay_fields(0.0125), Some((125, -10)));
        assert_eq!(delay_fields(40.0), None);
    }
    #[test]
    fn classic_interval_only_when_exact() {
        assert_eq!(classic_interval(0.002), Some(2000));
        assert_eq!(classic_interval(0.000_25), Some(250));
        assert_eq!(classic_interval(0.065_535), Some(65535));
        assert_eq!(classic_interval(0.000_012_5), None);
        assert_eq!(classic_interval(0.1), None);
        assert_eq!(classic_interval(0.000_000_4), None);
    }
    #[test]
    fn trace_header_round_trips_id_cdp_coordinates_and_shot_point() {
        let h = TraceHeader { sx: 500_100.25, sy: 6_700_200.5, gx: 500_300.75, gy: 6_700_100.0, offset: -212.0, cdp: 77,
            inline: 12, crossline: 345, ffid: 9, channel: 4, trace_id: 2, cdp_xy: Some((500_190.0, 6_700_155.5)),
            shot_point: 1012.5, ..Default::default() };
        for endian in [Endian::Big, Endian::Little] {
            let mut b = [0u8; 240];
            emit_trace_header(&h, 0, 10, 2000, (0, 1), -100, endian, &mut b).ok().unwrap();
            let (back, timing) = parse_trace_header(&b, endian, true);
            assert_eq!(back, h);
            assert_eq!(timing.dt_us, 2000);
            let f = Fields::new(&b, 1, endian);
            assert_eq!((f.i16(29), f.i32(197), f.i16(201)), (2, 10125, -10));
            // Without own CDP coordinates, the midpoint goes to 181-188 and reads back as `None`.
            let m = TraceHeader { cdp_xy: None, ..h };
            emit_trace_header(&m, 0, 10, 2000, (0, 1), -100, endian, &mut b).ok().unwrap();
            assert_eq!(Fields::new(&b, 1, endian).i32(181), 50_020_050);
            assert_eq!(parse_trace_header(&b, endian, true).0, m);
        }
    }
}
