//! Files as field tapes and other programs write them, built byte by byte: sample counts that
//! disagree between headers, unannounced extended textual headers, Seismic Unix files, header
//! values at the ends of their ranges, non-standard header bytes, non-seismic traces.

use std::path::PathBuf;

use super::header::FieldsMut;
use super::*;
use crate::io::input::{read_traces, ReadOptions};
use crate::io::select::TraceSelection;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("seisgpu-segy-field-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn put(name: &str, bytes: &[u8]) -> PathBuf {
    let p = tmp(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A file to build: `ns` samples per trace in the data, `bin_ns` in the binary header and
/// `header_ns` in every trace header.
#[derive(Clone)]
pub(super) struct Fixture {
    format: SampleFormat,
    endian: Endian,
    pub(super) rev: u8,
    bin_ns: u16,
    pub(super) header_ns: u16,
    ns: usize,
    n: usize,
    dt_us: u16,
    /// Records written between the binary header and the traces.
    pub(super) text_records: Vec<Vec<u8>>,
    pub(super) trace_id: fn(usize) -> i16,
}

impl Fixture {
    pub(super) fn new(format: SampleFormat, endian: Endian, ns: usize, n: usize) -> Self {
        Fixture { format, endian, rev: 1, bin_ns: ns as u16, header_ns: ns as u16, ns, n, dt_us: 2000, text_records: Vec::new(),
            trace_id: |_| 1 }
    }
    /// Sample j of trace i: a whole number every format holds exactly.
    fn value(i: usize, j: usize) -> f32 { ((i * 7 + j) % 100) as f32 - 50.0 }

    fn trace_header(&self, i: usize, out: &mut [u8]) {
        let mut f = FieldsMut::new(out, 1, self.endian);
        f.i32(1, i as i32 + 1);
        f.i32(9, 100 + i as i32 / 4);
        f.i32(13, i as i32 % 4 + 1);
        f.i32(21, 500 + i as i32);
        f.i16(29, (self.trace_id)(i));
        f.i32(37, 25 * i as i32 - 50);
        f.i16(71, -100);
        f.i32(73, 45_100_075 + i as i32);
        f.i32(77, 678_000_050);
        f.i32(81, 45_110_000);
        f.i32(85, 678_000_050);
        f.u16(115, self.header_ns);
        f.u16(117, self.dt_us);
        f.i32(189, 10 + i as i32 / 3);
        f.i32(193, 20 + i as i32 % 3);
    }

    fn samples(&self, i: usize, out: &mut Vec<u8>) {
        let be = self.endian == Endian::Big;
        for j in 0..self.ns {
            let v = Self::value(i, j);
            match self.format {
                SampleFormat::IbmFloat => {
                    let mut b = [0u8; 4];
                    ibm::encode(&[v], be, &mut b);
                    out.extend_from_slice(&b);
                }
                SampleFormat::IeeeFloat => out.extend_from_slice(&if be { v.to_be_bytes() } else { v.to_le_bytes() }),
                SampleFormat::Int32 => out.extend_from_slice(&if be { (v as i32).to_be_bytes() } else { (v as i32).to_le_bytes() }),
                SampleFormat::Int16 => out.extend_from_slice(&if be { (v as i16).to_be_bytes() } else { (v as i16).to_le_bytes() }),
                SampleFormat::Int8 => out.push(v as i8 as u8),
            }
        }
    }

    pub(super) fn segy(&self) -> Vec<u8> {
        let mut b = vec![0x40u8; 3200];
        ebcdic::encode("C 1 FIELD TAPE", TextEncoding::Ebcdic, &mut b[..80]);
        b.resize(3600, 0);
        let mut f = FieldsMut::new(&mut b[3200..3600], 3201, self.endian);
        f.u16(3217, self.dt_us);
        f.u16(3221, self.bin_ns);
        f.i16(3225, self.format.code());
        f.u8(3501, self.rev);
        for r in &self.text_records {
            b.extend_from_slice(r);
        }
        self.traces(&mut b);
        b
    }

    pub(super) fn su(&self) -> Vec<u8> {
        let mut b = Vec::new();
        self.traces(&mut b);
        b
    }

    fn traces(&self, b: &mut Vec<u8>) {
        for i in 0..self.n {
            let k = b.len();
            b.resize(k + 240, 0);
            self.trace_header(i, &mut b[k..]);
            self.samples(i, b);
        }
    }

    fn check(&self, set: &TraceSet) {
        assert_eq!((set.len(), set.ns), (self.n, self.ns));
        for i in 0..self.n {
            assert!(set.trace(i).iter().enumerate().all(|(j, &v)| v == Self::value(i, j)), "trace {i}");
        }
    }
}

const FORMATS: [SampleFormat; 5] = [SampleFormat::IbmFloat, SampleFormat::Int32, SampleFormat::Int16, SampleFormat::IeeeFloat, SampleFormat::Int8];

pub(super) fn text_record(s: &str, enc: TextEncoding) -> Vec<u8> {
    let mut r = vec![if enc == TextEncoding::Ebcdic { 0x40 } else { b' ' }; 3200];
    ebcdic::encode(s, enc, &mut r[..s.len()]);
    r
}

#[test]
fn trace_headers_with_the_wrong_sample_count_in_every_format_and_byte_order() {
    for format in FORMATS {
        for endian in [Endian::Big, Endian::Little] {
            // The field-tape defect: trace headers 150, binary header and data 60.
            let mut fx = Fixture::new(format, endian, 60, 9);
            fx.header_ns = 150;
            let p = put(&format!("ns-tr-{}-{endian:?}.sgy", format.code()), &fx.segy());
            let (info, set) = read_segy(&p).unwrap();
            fx.check(&set);
            assert_eq!(info.warnings.len(), 1, "{:?}", info.warnings);
            let w = &info.warnings[0];
            assert!(w.contains("3221-3222") && w.contains("115-116") && w.contains("says 150") && w.contains("reading 60"), "{w}");
            // The reverse: a wrong binary header, right trace headers.
            let mut fx = Fixture::new(format, endian, 60, 9);
            fx.bin_ns = 1500;
            let p = put(&format!("ns-bin-{}-{endian:?}.sgy", format.code()), &fx.segy());
            let (info, set) = read_segy(&p).unwrap();
            fx.check(&set);
            assert_eq!(info.warnings.len(), 1);
        }
    }
}

#[test]
fn zero_counts_in_trace_headers_are_fine_and_overrides_win() {
    let mut fx = Fixture::new(SampleFormat::IeeeFloat, Endian::Big, 30, 4);
    fx.header_ns = 0;
    fx.dt_us = 0;
    let mut b = fx.segy();
    FieldsMut::new(&mut b[3200..3600], 3201, Endian::Big).u16(3217, 4000);
    let p = put("ns0.sgy", &b);
    let (info, set) = read_segy(&p).unwrap();
    fx.check(&set);
    assert!(info.warnings.is_empty());
    assert_eq!(set.dt, 0.004);
    // --samples and --dt: no warning, no per-trace count check.
    let mut fx = Fixture::new(SampleFormat::IeeeFloat, Endian::Big, 30, 4);
    fx.header_ns = 77;
    fx.bin_ns = 0;
    let p = put("nsover.sgy", &fx.segy());
    let o = ReaderOptions { samples: Some(30), dt: Some(0.001), ..Default::default() };
    let mut r = SegyReader::open_with(&p, &o).unwrap();
    assert!(r.info().warnings.is_empty());
    let set = r.read_range(0, 4).unwrap();
    fx.check(&set);
    assert_eq!(set.dt, 0.001);
    let o = ReaderOptions { samples: Some(100_000), ..Default::default() };
    let e = SegyReader::open_with(&p, &o).err().unwrap().to_string();
    assert!(e.contains("--samples 100000") && e.contains("longer than"), "{e}");
}

#[test]
fn variable_length_traces_are_an_error_that_names_the_override() {
    let fx = Fixture::new(SampleFormat::IeeeFloat, Endian::Big, 20, 1);
    let mut b = fx.segy();
    for ns in [30usize, 20, 30] {
        let g = Fixture::new(SampleFormat::IeeeFloat, Endian::Big, ns, 1);
        b.extend_from_slice(&g.su());
    }
    let p = put("varlen.sgy", &b);
    let e = read_segy(&p).unwrap_err().to_string();
    assert!(e.contains("different sample counts") && e.contains("20, 30") && e.contains("--samples"), "{e}");
    // One odd trace in a file of whole traces: that trace is named.
    let mut fx = Fixture::new(SampleFormat::IeeeFloat, Endian::Big, 20, 5);
    fx.n = 5;
    let mut b = fx.segy();
    let off = 3600 + 2 * 320;
    FieldsMut::new(&mut b[off..off + 240], 1, Endian::Big).u16(115, 21);
    let e = read_segy(put("odd.sgy", &b)).unwrap_err().to_string();
    assert!(e.contains("trace 2") && e.contains("21 samples") && e.contains("--samples"), "{e}");
}

#[test]
fn revision_0_extended_textual_headers_are_found_by_content() {
    for (enc, count) in [(TextEncoding::Ebcdic, 0i16), (TextEncoding::Ascii, 0), (TextEncoding::Ebcdic, 2)] {
        let mut fx = Fixture::new(SampleFormat::IbmFloat, Endian::Big, 25, 6);
        fx.rev = 0;
        fx.text_records = vec![text_record("C 1 PROCESSING HISTORY", enc), text_record("((SEG: EndText))", enc)];
        let mut b = fx.segy();
        FieldsMut::new(&mut b[3200..3600], 3201, Endian::Big).i16(3505, count);
        let p = put(&format!("rev0-{enc:?}-{count}.sgy"), &b);
        let (info, set) = read_segy(&p).unwrap();
        fx.check(&set);
        assert_eq!((info.extended_text.len(), info.data_offset), (2, 3600 + 6400));
        assert!(info.extended_text[0].starts_with("C 1 PROCESSING HISTORY"));
        assert!(info.warnings[0].contains("2 extended textual header record(s)"), "{:?}", info.warnings);
        let mut r = SegyReader::open(&p).unwrap();
        assert_eq!(r.read_headers().unwrap()[5].cdp, 505);
    }
    // Text that the file size does not agree with skipping: an error, not garbage traces.
    let mut fx = Fixture::new(SampleFormat::IbmFloat, Endian::Big, 25, 6);
    fx.rev = 0;
    fx.text_records = vec![text_record("C 1 HISTORY", TextEncoding::Ascii)];
    let mut b = fx.segy();
    b.truncate(b.len() - 7);
    let e = read_segy(put("rev0-bad.sgy", &b)).unwrap_err().to_string();
    assert!(e.contains("textual record") && e.contains("revision 0"), "{e}");
}

#[test]
fn seismic_unix_files_in_both_byte_orders() {
    for endian in [Endian::Big, Endian::Little] {
        let fx = Fixture::new(SampleFormat::IeeeFloat, endian, 50, 7);
        let bytes = fx.su();
        // By extension and by content.
        for name in [format!("cmp-{endian:?}.su"), format!("cmp-{endian:?}.dat")] {
            let p = put(&name, &bytes);
            let (info, set) = read_segy(&p).unwrap();
            assert_eq!((info.file_format, info.endian, info.data_offset, set.dt), (FileFormat::Su, endian, 0, 0.002), "{name}");
            fx.check(&set);
            assert_eq!(set.headers[3].sx, 451_000.78);
            assert_eq!(set.headers[3].offset, 25.0);
            assert!(info.summary().contains("Seismic Unix"));
            let mut r = SegyReader::open(&p).unwrap();
            assert_eq!(r.read_headers().unwrap().len(), 7);
        }
    }
    // A .su file that is not one.
    let e = read_segy(put("bad.su", &[7u8; 1000])).unwrap_err().to_string();
    assert!(e.contains("not a Seismic Unix file") && e.contains("bad.su"), "{e}");
    // Forced SEG-Y on an SU file: the SEG-Y error.
    let p = put("forced.su", &Fixture::new(SampleFormat::IeeeFloat, Endian::Little, 50, 7).su());
    let o = ReaderOptions { format: Some(FileFormat::Segy), ..Default::default() };
    assert!(SegyReader::open_with(&p, &o).is_err());
}

#[test]
fn binary_header_values_out_of_range_name_their_bytes() {
    let base = |rev: u8| {
        let mut fx = Fixture::new(SampleFormat::IeeeFloat, Endian::Big, 20, 4);
        fx.rev = rev;
        fx.segy()
    };
    let err = |name: &str, b: &[u8]| read_segy(put(name, b)).unwrap_err().to_string();
    for (k, v) in [f64::INFINITY, f64::NAN, -4000.0, 1e300, 1e-300].into_iter().enumerate() {
        let mut b = base(2);
        FieldsMut::new(&mut b[3200..3600], 3201, Endian::Big).f64(3273, v);
        let e = err(&format!("dt-{k}.sgy"), &b);
        assert!(e.contains("3273-3280"), "{v}: {e}");
    }
    // 0 in the extended field means "not given": the classic field stands.
    let mut b = base(2);
    FieldsMut::new(&mut b[3200..3600], 3201, Endian::Big).f64(3273, 0.0);
    assert_eq!(read_segy(put("dt-zero.sgy", &b)).unwrap().1.dt, 0.002);
    let mut b = base(2);
    FieldsMut::new(&mut b[3200..3600], 3201, Endian::Big).i32(3269, -5);
    assert!(err("ns-neg.sgy", &b).contains("3269-3272"));
    for n in [1i32, 2, 1000, i32::MAX, -1, -7] {
        let mut b = base(2);
        FieldsMut::new(&mut b[3200..3600], 3201, Endian::Big).i32(3529, n);
        let e = err(&format!("trailer-{n}.sgy"), &b);
        assert!(e.contains("3529-3532"), "{n}: {e}");
    }
    for o in [1u64, 3599, 3600 + 4 * 320, 3600 + 4 * 320 - 100, u64::MAX, u64::MAX - 100] {
        let mut b = base(2);
        FieldsMut::new(&mut b[3200..3600], 3201, Endian::Big).u64(3521, o);
        let e = err(&format!("first-{o}.sgy"), &b);
        assert!(e.contains("3521-3528"), "{o}: {e}");
    }
    for n in [-2i16, i16::MIN, i16::MAX, 1] {
        let mut b = base(1);
        FieldsMut::new(&mut b[3200..3600], 3201, Endian::Big).i16(3505, n);
        let e = err(&format!("ext-{n}.sgy"), &b);
        assert!(e.contains("3505-3506"), "{n}: {e}");
    }
    let mut b = base(2);
    FieldsMut::new(&mut b[3200..3600], 3201, Endian::Big).i32(3507, -1);
    assert!(err("addl.sgy", &b).contains("3507-3510"));
}

#[test]
fn header_byte_overrides_and_utm_coordinates() {
    let fx = Fixture::new(SampleFormat::IbmFloat, Endian::Big, 10, 6);
    let p = put("bytes.sgy", &fx.segy());
    let (_, std) = read_segy(&p).unwrap();
    assert_eq!((std.headers[4].inline, std.headers[4].crossline, std.headers[4].cdp), (11, 21, 504));
    assert_eq!((std.headers[0].sx, std.headers[0].gy), (451_000.75, 6_780_000.5));
    let bytes: HeaderBytes = "inline=9,crossline=13,cdp=1,sx=81,offset=21".parse().unwrap();
    let o = ReaderOptions { bytes, ..Default::default() };
    let mut r = SegyReader::open_with(&p, &o).unwrap();
    let h = r.read_headers().unwrap();
    let set = r.read_range(0, 6).unwrap();
    assert_eq!(h, set.headers);
    assert_eq!((h[4].inline, h[4].crossline, h[4].cdp, h[4].offset, h[4].sx), (101, 1, 5, 504.0, 451_100.0));
    let o = ReaderOptions { bytes: HeaderBytes { inline: 238, ..Default::default() }, ..Default::default() };
    assert!(SegyReader::open_with(&p, &o).err().unwrap().to_string().contains("--bytes"));
}

#[test]
fn extreme_inline_numbers_in_a_file_are_an_error() {
    let fx = Fixture::new(SampleFormat::IeeeFloat, Endian::Little, 10, 2);
    let mut b = fx.segy();
    FieldsMut::new(&mut b[3200..3600], 3201, Endian::Little).u32(3297, header::BYTE_ORDER_CONSTANT);
    let t1 = 3600 + 280;
    FieldsMut::new(&mut b[3600..3840], 1, Endian::Little).i32(189, i32::MIN);
    FieldsMut::new(&mut b[t1..t1 + 240], 1, Endian::Little).i32(189, i32::MAX);
    let p = put("extreme.sgy", &b);
    let e = crate::io::cube::read_cube_rows(&p, &ReadOptions::default(), |s| Ok(0..s[0])).unwrap_err().to_string();
    assert!(e.contains("far larger"), "{e}");
}

#[test]
fn non_seismic_traces_are_skipped_unless_kept_and_selection_reads_only_the_chosen() {
    // A land shot: channels 1 and 2 auxiliary (coded 0), channel 7 dead (coded 2).
    let mut fx = Fixture::new(SampleFormat::IbmFloat, Endian::Big, 16, 12);
    fx.trace_id = |i| match i { 0 | 1 => 0, 7 => 2, _ => 1 };
    let p = put("shot.sgy", &fx.segy());
    let (_, set, rep) = read_traces(&p, &ReadOptions::default()).unwrap();
    assert_eq!((set.len(), rep.in_file, rep.non_seismic, rep.unselected), (9, 12, 3, 0));
    assert_eq!(set.trace(0), fx_trace(2, 16));
    assert!(rep.line(&p).contains("read 9 of 12 traces (SEG-Y), 3 non-seismic skipped"), "{}", rep.line(&p));
    let o = ReadOptions { keep_non_seismic: true, ..Default::default() };
    assert_eq!(read_traces(&p, &o).unwrap().1.len(), 12);
    // ffid = 100 + i / 4, offset = 25 i - 50.
    let o = ReadOptions { select: Some("ffid=101:102,offset=:200".parse::<TraceSelection>().unwrap()), ..Default::default() };
    let (_, set, rep) = read_traces(&p, &o).unwrap();
    assert_eq!((set.len(), rep.unselected, rep.non_seismic), (6, 5, 1));
    let cdps: Vec<i32> = set.headers.iter().map(|h| h.cdp).collect();
    assert_eq!(cdps, [504, 505, 506, 508, 509, 510]);
    assert_eq!(set.trace(5), fx_trace(10, 16));
    let o = ReadOptions { select: Some("ffid=7".parse().unwrap()), ..Default::default() };
    let e = read_traces(&p, &o).unwrap_err().to_string();
    assert!(e.contains("shot.sgy") && e.contains("no trace left") && e.contains("12 outside --select"), "{e}");
    // All coded 0: all kept.
    let mut fx = Fixture::new(SampleFormat::IbmFloat, Endian::Big, 16, 5);
    fx.trace_id = |_| 0;
    assert_eq!(read_traces(put("zeros.sgy", &fx.segy()), &ReadOptions::default()).unwrap().1.len(), 5);
}

fn fx_trace(i: usize, ns: usize) -> Vec<f32> { (0..ns).map(|j| Fixture::value(i, j)).collect() }

#[test]
fn a_file_without_traces_is_an_error_naming_it() {
    let fx = Fixture::new(SampleFormat::IbmFloat, Endian::Big, 16, 0);
    let p = put("none.sgy", &fx.segy());
    let e = read_traces(&p, &ReadOptions::default()).unwrap_err().to_string();
    assert!(e.contains("none.sgy") && e.contains("no traces"), "{e}");
}
