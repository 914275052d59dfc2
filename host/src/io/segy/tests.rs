//! Rust-only round trips and bad-input tests (the segyio interop tests are in
//! tests/integration/segy.rs).

use std::path::PathBuf;

use super::header::{Fields, FieldsMut};
use super::*;
use crate::synth;

fn tmp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("seisgpu-segy-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// A small set with fractional coordinates, negative offsets, a delay and random samples.
fn sample_set(n_traces: usize, ns: usize) -> TraceSet {
    let mut headers = synth::geometry::line_2d(1, 25.0, n_traces, 12.5);
    for (i, h) in headers.iter_mut().enumerate() {
        h.sx = 451_000.25 + i as f64 * 0.5;
        h.sy = 6_780_000.75;
        h.gx += 451_100.0;
        h.gy = 6_780_010.5 - i as f64;
        h.offset = -(i as f64) * 12.0 - 3.0;
        h.inline = 1000 + i as i32 / 4;
        h.crossline = 2000 + i as i32 % 4;
    }
    let mut t = synth::noise_traces(headers, ns, 0.002, 11);
    t.t0 = 0.1;
    t
}

fn opts(format: SampleFormat, endian: Endian) -> WriteOptions { WriteOptions { format, endian, ..Default::default() } }

#[test]
fn round_trips_ibm_and_ieee_in_both_byte_orders() {
    let set = sample_set(23, 97);
    for format in [SampleFormat::IbmFloat, SampleFormat::IeeeFloat] {
        for endian in [Endian::Big, Endian::Little] {
            let p = tmp(&format!("rt-{}-{endian:?}.sgy", format.code()));
            write_segy(&p, &set, &opts(format, endian)).unwrap();
            let (info, back) = read_segy(&p).unwrap();
            assert_eq!((info.format, info.endian, info.ns, info.n_traces), (format, endian, 97, 23));
            assert_eq!((back.dt, back.t0, back.ns), (set.dt, set.t0, set.ns));
            assert_eq!(info.binary.traces_in_file, 23);
            assert_eq!(info.text_encoding, TextEncoding::Ebcdic);
            assert!(info.text.starts_with("C 1 written by seisgpu"), "{}", &info.text[..80]);
            assert_eq!(std::fs::metadata(&p).unwrap().len(), 3600 + 23 * (240 + 97 * 4));
            for (a, b) in set.headers.iter().zip(&back.headers) {
                assert_eq!(a, b, "headers differ");
            }
            if format == SampleFormat::IeeeFloat {
                assert!(set.data.iter().zip(&back.data).all(|(a, b)| a.to_bits() == b.to_bits()));
            } else {
                // IBM keeps 21..24 significant bits: relative error at most 2^-21 (half an ulp).
                for (a, b) in set.data.iter().zip(&back.data) {
                    assert!((a - b).abs() <= a.abs() * 2f32.powi(-21), "{a} {b}");
                }
                // And what was read back re-encodes to the same bytes (IBM values are exact).
                let p2 = tmp(&format!("rt2-{endian:?}.sgy"));
                write_segy(&p2, &back, &opts(format, endian)).unwrap();
                assert_eq!(std::fs::read(&p).unwrap(), std::fs::read(&p2).unwrap());
            }
        }
    }
}

#[test]
fn coordinates_are_scaled_both_ways() {
    let set = sample_set(5, 8);
    let p = tmp("scalco.sgy");
    write_segy(&p, &set, &WriteOptions::default()).unwrap();
    let mut r = SegyReader::open(&p).unwrap();
    let raw = r.raw_trace_header(1).unwrap();
    let f = Fields::new(&raw, 1, Endian::Big);
    assert_eq!(f.i16(71), -100, "centimetres are needed for .25 / .75 coordinates");
    assert_eq!(f.i32(73), 45_100_075); // 451000.75 m
    assert_eq!(f.i32(77), 678_000_075);
    assert_eq!(f.i32(37), -15);
    assert_eq!(f.i32(189), 1000);
    assert_eq!(f.i32(193), 2001);
    assert_eq!(f.i16(109), 100);
    assert_eq!(f.u16(115), 8);
    assert_eq!(f.u16(117), 2000);

    // A fixed positive scalar multiplies: coordinates in units of 10 m.
    let mut coarse = set.clone();
    for h in &mut coarse.headers {
        (h.sx, h.sy, h.gx, h.gy) = (1230.0, 4560.0, 7890.0, 10.0);
    }
    let o = WriteOptions { coordinate_scalar: CoordinateScalar::Fixed(10), ..Default::default() };
    write_segy(&p, &coarse, &o).unwrap();
    let mut r = SegyReader::open(&p).unwrap();
    let raw = r.raw_trace_header(0).unwrap();
    assert_eq!(Fields::new(&raw, 1, Endian::Big).i32(73), 123);
    assert_eq!(read_segy(&p).unwrap().1.headers[0].sx, 1230.0);
}

#[test]
fn ascii_text_and_fractional_delay() {
    let mut set = sample_set(3, 10);
    set.t0 = 0.0125;
    let p = tmp("ascii.sgy");
    let o = WriteOptions { text_encoding: TextEncoding::Ascii, text: Some("CLIENT TEST\nLINE 7 [a|b]".into()), ..Default::default() };
    write_segy(&p, &set, &o).unwrap();
    assert_eq!(&std::fs::read(&p).unwrap()[..15], b"C 1 CLIENT TEST");
    let (info, back) = read_segy(&p).unwrap();
    assert_eq!(info.text_encoding, TextEncoding::Ascii);
    assert_eq!(info.text_cards()[1], "C 2 LINE 7 [a|b]");
    assert_eq!(info.text_cards()[39], "C40 END TEXTUAL HEADER");
    assert_eq!(back.t0, 0.0125);
}

#[test]
fn streaming_chunks_and_iterator_match_the_whole_read() {
    let set = sample_set(50, 33);
    let p = tmp("chunks.sgy");
    write_segy(&p, &set, &opts(SampleFormat::IeeeFloat, Endian::Little)).unwrap();
    let mut r = SegyReader::open(&p).unwrap();
    let mut got = Vec::new();
    let mut sizes = Vec::new();
    while let Some(c) = r.read_chunk(16).unwrap() {
        sizes.push(c.len());
        got.extend_from_slice(&c.data);
    }
    assert_eq!(sizes, [16, 16, 16, 2]);
    assert_eq!(got, set.data);
    r.seek_trace(45).unwrap();
    let rest: Vec<Trace> = r.traces().collect::<Result<_>>().unwrap();
    assert_eq!(rest.len(), 5);
    assert_eq!(rest[0].samples, set.trace(45));
    assert_eq!(rest[4].header, set.headers[49]);
    let t = r.read_trace(7).unwrap();
    assert_eq!(t.samples, set.trace(7));
    assert_eq!(r.read_range(10, 3).unwrap().data, set.data[10 * 33..13 * 33]);
}

#[test]
fn streaming_writer_matches_write_segy() {
    let set = sample_set(9, 12);
    let (a, b) = (tmp("sw-a.sgy"), tmp("sw-b.sgy"));
    let o = WriteOptions { coordinate_scalar: CoordinateScalar::Fixed(-100), ..Default::default() };
    write_segy(&a, &set, &o).unwrap();
    let mut w = SegyWriter::create(&b, set.ns, set.dt, set.t0, &o).unwrap();
    for i in 0..set.len() {
        w.write_trace(&set.headers[i], set.trace(i)).unwrap();
    }
    assert_eq!(w.finish().unwrap(), 9);
    assert_eq!(std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
}

#[test]
fn encoded_pieces_make_the_written_file() {
    // An MPI rank's view: the head (trace count known up front) and its block of traces' bytes.
    let set = sample_set(11, 13);
    let a = tmp("enc-a.sgy");
    let o = WriteOptions { coordinate_scalar: CoordinateScalar::Fixed(-100), format: SampleFormat::IeeeFloat, ..Default::default() };
    write_segy(&a, &set, &o).unwrap();
    let (enc, mut bytes) = TraceEncoder::new(&a, set.ns, set.dt, set.t0, &o, set.len() as u64).unwrap();
    for r in [0..4, 4..5, 5..11] {
        bytes.extend(enc.encode_set(&set.slice(r.clone()), r.start as u64).unwrap());
    }
    assert_eq!(std::fs::read(&a).unwrap(), bytes);
    let mut bad = set.slice(5..11);
    bad.data[2 * 13 + 4] = f32::NAN;
    assert!(enc.encode_set(&bad, 5).unwrap_err().to_string().contains("trace 7"));
}

/// Writes `bytes` and returns the error message of reading it whole.
fn read_err(name: &str, bytes: &[u8]) -> String {
    let p = tmp(name);
    std::fs::write(&p, bytes).unwrap();
    let e = read_segy(&p).expect_err("should fail").to_string();
    assert!(e.contains(&p.display().to_string()), "error does not name the file: {e}");
    e
}

fn good_file(endian: Endian) -> Vec<u8> {
    // A file name per call: tests run in parallel threads.
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let k = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let p = tmp(&format!("good-{endian:?}-{k}.sgy"));
    write_segy(&p, &sample_set(6, 20), &opts(SampleFormat::IbmFloat, endian)).unwrap();
    std::fs::read(p).unwrap()
}

#[test]
fn truncated_file_names_the_partial_trace() {
    let f = good_file(Endian::Big);
    let tb = 240 + 20 * 4;
    let e = read_err("trunc.sgy", &f[..3600 + 4 * tb + 100]);
    assert!(e.contains(&format!("trace 4 (byte {})", 3600 + 4 * tb)) && e.contains("100 of its 320 bytes"), "{e}");
    // Streaming: four good chunks' worth of traces, then the error.
    let p = tmp("trunc.sgy");
    let mut r = SegyReader::open(&p).unwrap();
    assert_eq!(r.read_chunk(10).unwrap().unwrap().len(), 4);
    assert!(r.read_chunk(10).unwrap_err().to_string().contains("trace 4"));
    assert!(r.read_chunk(10).unwrap().is_none());
    let mut r = SegyReader::open(&p).unwrap();
    let items: Vec<_> = r.traces().collect();
    assert_eq!(items.len(), 5);
    assert!(items[4].as_ref().unwrap_err().to_string().contains("truncated"));
}

#[test]
fn short_file_bad_format_zero_samples() {
    let e = read_err("short.sgy", &[0x40u8; 3599]);
    assert!(e.contains("3599 bytes, shorter than the 3600-byte"), "{e}");

    let mut f = good_file(Endian::Big);
    FieldsMut::new(&mut f[3200..3600], 3201, Endian::Big).i16(3225, 4);
    let e = read_err("fmt4.sgy", &f);
    assert!(e.contains("sample format code 4") && e.contains("3225-3226"), "{e}");

    // An undefined code and no byte-order constant: neither byte order makes sense.
    let mut f = good_file(Endian::Big);
    let mut b = FieldsMut::new(&mut f[3200..3600], 3201, Endian::Big);
    b.i16(3225, 0x1234);
    b.u32(3297, 0);
    assert!(read_err("fmtbad.sgy", &f).contains("not a SEG-Y file"));

    let mut f = good_file(Endian::Big);
    let mut b = FieldsMut::new(&mut f[3200..3600], 3201, Endian::Big);
    b.u16(3221, 0);
    b.i32(3269, 0);
    FieldsMut::new(&mut f[3600..3840], 1, Endian::Big).u16(115, 0);
    let e = read_err("ns0.sgy", &f);
    assert!(e.contains("zero samples per trace"), "{e}");
}

#[test]
fn inconsistent_sample_counts_name_the_trace() {
    let mut f = good_file(Endian::Little);
    let tb = 240 + 20 * 4;
    let off = 3600 + 3 * tb;
    FieldsMut::new(&mut f[off..off + 240], 1, Endian::Little).u16(115, 21);
    let e = read_err("nsbad.sgy", &f);
    assert!(e.contains(&format!("trace 3 (byte {off}) has 21 samples")), "{e}");

    let mut f = good_file(Endian::Big);
    let off = 3600 + 5 * tb;
    FieldsMut::new(&mut f[off..off + 240], 1, Endian::Big).i16(109, 7);
    let e = read_err("delay.sgy", &f);
    assert!(e.contains("trace 5") && e.contains("delay recording time 7 ms"), "{e}");
}

#[test]
fn wrong_binary_sample_count_is_overridden_by_trace_headers() {
    // A field-file defect: the binary header says 1000 samples, the traces have 20.
    let mut f = good_file(Endian::Big);
    let mut b = FieldsMut::new(&mut f[3200..3600], 3201, Endian::Big);
    b.u16(3221, 1000);
    b.i32(3269, 1000);
    let p = tmp("nsfix.sgy");
    std::fs::write(&p, &f).unwrap();
    let (info, set) = read_segy(&p).unwrap();
    assert_eq!((info.ns, set.len()), (20, 6));
}

#[test]
fn ibm_overflow_on_read_names_trace_and_sample() {
    let mut f = good_file(Endian::Big);
    let off = 3600 + 2 * (240 + 20 * 4) + 240 + 4 * 7;
    f[off..off + 4].copy_from_slice(&0x7FFF_FFFFu32.to_be_bytes());
    let e = read_err("ibmovf.sgy", &f);
    assert!(e.contains("trace 2 sample 7 is not finite") && e.contains("IBM"), "{e}");
}

#[test]
fn non_finite_samples_are_refused_on_write() {
    let mut set = sample_set(4, 10);
    set.trace_mut(2)[3] = f32::NAN;
    let p = tmp("nan.sgy");
    let _ = std::fs::remove_file(&p);
    let e = write_segy(&p, &set, &WriteOptions::default()).unwrap_err().to_string();
    assert!(e.contains("trace 2 sample 3 is not finite") && e.contains("nan.sgy"), "{e}");
    assert!(!p.exists(), "a failed write must not leave a file");
    let mut w = SegyWriter::create(&p, 10, 0.002, 0.0, &WriteOptions::default()).unwrap();
    w.write_trace(&set.headers[0], set.trace(0)).unwrap();
    let e = w.write_trace(&set.headers[2], set.trace(2)).unwrap_err().to_string();
    assert!(e.contains("trace 1 sample 3"), "{e}");
    drop(w);
    assert!(!p.exists());
}

#[test]
fn bad_coordinates_are_refused_on_write() {
    let mut set = sample_set(3, 4);
    set.headers[1].gx = 5e12;
    let p = tmp("coord.sgy");
    let o = WriteOptions { coordinate_scalar: CoordinateScalar::Fixed(-100), ..Default::default() };
    let e = write_segy(&p, &set, &o).unwrap_err().to_string();
    assert!(e.contains("trace 1") && e.contains("group x"), "{e}");
}

#[test]
fn little_endian_without_byte_order_constant_is_detected() {
    let mut f = good_file(Endian::Little);
    FieldsMut::new(&mut f[3200..3600], 3201, Endian::Little).u32(3297, 0);
    let p = tmp("le-noconst.sgy");
    std::fs::write(&p, &f).unwrap();
    let (info, set) = read_segy(&p).unwrap();
    assert_eq!((info.endian, set.len()), (Endian::Little, 6));
}

#[test]
fn extended_textual_headers_are_skipped() {
    let f = good_file(Endian::Big);
    let mut g = f[..3600].to_vec();
    let mut ext = vec![0x40u8; 3200];
    ebcdic::encode("((SEG: EndText))", TextEncoding::Ebcdic, &mut ext);
    g.extend_from_slice(&ext);
    g.extend_from_slice(&f[3600..]);
    let mut b = FieldsMut::new(&mut g[3200..3600], 3201, Endian::Big);
    b.i16(3505, 1);
    b.u64(3521, 0);
    let p = tmp("ext.sgy");
    std::fs::write(&p, &g).unwrap();
    let (info, set) = read_segy(&p).unwrap();
    assert_eq!((info.extended_text.len(), info.data_offset, set.len()), (1, 6800, 6));
    assert!(info.extended_text[0].starts_with("((SEG: EndText))"));
}

#[test]
fn integer_formats_are_read() {
    // Hand-built format 3 (int16) file from a good one: rewrite the format and the samples.
    let f = good_file(Endian::Big);
    let mut g = f[..3600].to_vec();
    FieldsMut::new(&mut g[3200..3600], 3201, Endian::Big).i16(3225, 3);
    for t in 0..6 {
        let off = 3600 + t * 320;
        g.extend_from_slice(&f[off..off + 240]);
        for s in 0..20i16 {
            g.extend_from_slice(&(s * 100 - t as i16).to_be_bytes());
        }
    }
    let p = tmp("int16.sgy");
    std::fs::write(&p, &g).unwrap();
    let (info, set) = read_segy(&p).unwrap();
    assert_eq!(info.format, SampleFormat::Int16);
    assert_eq!(set.trace(2)[3], 298.0);
}

#[test]
fn empty_trace_set_round_trips() {
    let set = TraceSet::zeros(Vec::new(), 50, 0.004);
    let p = tmp("empty.sgy");
    write_segy(&p, &set, &WriteOptions::default()).unwrap();
    let (info, back) = read_segy(&p).unwrap();
    assert_eq!((info.n_traces, back.ns, back.dt), (0, 50, 0.004));
}

#[test]
fn a_writer_that_refused_a_trace_commits_nothing() {
    let mut set = sample_set(4, 10);
    set.trace_mut(2)[3] = f32::INFINITY;
    let p = tmp("poisoned.sgy");
    std::fs::write(&p, b"old").unwrap();
    // One trace at a time: the refused trace poisons the writer; later good traces and `finish` fail.
    let mut w = SegyWriter::create(&p, 10, 0.002, 0.0, &WriteOptions::default()).unwrap();
    w.write_trace(&set.headers[0], set.trace(0)).unwrap();
    assert!(w.write_trace(&set.headers[2], set.trace(2)).is_err());
    let e = w.write_trace(&set.headers[3], set.trace(3)).unwrap_err().to_string();
    assert!(e.contains("earlier write failed") && e.contains("sample 3"), "{e}");
    let e = w.finish().unwrap_err().to_string();
    assert!(e.contains("poisoned.sgy") && e.contains("earlier write failed"), "{e}");
    assert_eq!(std::fs::read(&p).unwrap(), b"old", "the old file stays");
    // Sets: the same.
    let mut w = SegyWriter::create(&p, 10, 0.002, 0.0, &WriteOptions::default()).unwrap();
    assert!(w.write_set(&set).is_err());
    assert!(w.write_set(&set.slice(0..1)).is_err());
    assert!(w.finish().is_err());
    assert_eq!(std::fs::read(&p).unwrap(), b"old");
    let w = SegyWriter::create(&p, 10, 0.002, 0.0, &WriteOptions::default()).unwrap();
    w.abandon();
    assert_eq!(std::fs::read(&p).unwrap(), b"old");
    let leftovers = std::fs::read_dir(p.parent().unwrap()).unwrap().filter(|e| {
        e.as_ref().unwrap().file_name().to_string_lossy().starts_with(".poisoned.sgy.tmp")
    }).count();
    assert_eq!(leftovers, 0);
}

#[test]
fn intervals_the_classic_field_cannot_hold_go_to_the_extended_field_only() {
    for (dt, classic) in [(0.002f32, 2000u16), (0.000_012_5, 0), (0.1, 0)] {
        let mut set = sample_set(3, 8);
        set.dt = dt;
        let p = tmp("interval.sgy");
        write_segy(&p, &set, &WriteOptions::default()).unwrap();
        let (info, back) = read_segy(&p).unwrap();
        assert_eq!(back.dt, dt);
        assert_eq!(info.binary.sample_interval, classic);
        assert_eq!(info.binary.ext_sample_interval, dt as f64 * 1e6);
        let b = std::fs::read(&p).unwrap();
        assert_eq!(Fields::new(&b[3600..3840], 1, Endian::Big).u16(117), classic);
        if classic == 0 {
            assert!(info.text.contains("only in bytes 3273-3280"), "{}", info.text);
        }
    }
}
