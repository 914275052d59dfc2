//! SEG-Y interop with a real client, Python `segyio`: files written by segyio are read by seisgpu
//! and the other way round, for sample formats 1 (IBM) and 5 (IEEE) in both byte orders, and the
//! headers, textual header and samples are compared bit for bit. Without python3 + segyio these
//! tests print `SKIPPED <name>: ...` and pass (CI installs segyio).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use seisgpu_host::io::npy::{read_npy_f32, write_npy};
use seisgpu_host::io::segy::header::Fields;
use seisgpu_host::io::segy::ibm::{f32_to_ibm, ibm_to_f32};
use seisgpu_host::io::segy::{read_segy, write_segy, CoordinateScalar, Endian, SampleFormat, SegyReader, TextEncoding, WriteOptions};
use seisgpu_host::{TraceHeader, TraceSet};

use crate::common::random_vec;

const N_TRACES: usize = 37;
const NS: usize = 101;
const DT_US: i32 = 2000;
const DELAY_MS: i32 = 100;
/// Every printable ASCII character: where segyio's EBCDIC table and code page 037 differ too.
const TEXT_LINE2: &str = "LINE 42 !\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~ abcxyz 0123456789";

/// The raw integer header fields of trace i, the same formula as in the Python scripts below:
/// (ffid, channel, energy source point, cdp, trace in ensemble, offset, scalco, sx, sy, gx, gy,
/// inline, crossline).
fn raw_fields(i: i32) -> [i32; 13] {
    [1000 + i / 10, i % 10 + 1, 500 + i, 2000 + 3 * i, i % 10 + 1, -1500 + 37 * i, -100,
     45_100_000 + 1250 * i, 678_000_075 - 3 * i, 45_200_000 + 2501 * i, 678_100_000 + i, 10 + i / 7, 200 + i % 7]
}

const PY_FIELDS: &str = r#"
import segyio
su = segyio.su
KEYS = [su.fldr, su.tracf, su.ep, su.cdp, su.cdpt, su.offset, su.scalco, su.sx, su.sy, su.gx, su.gy, su.iline, su.xline]
def raw_fields(i):
    return [1000 + i // 10, i % 10 + 1, 500 + i, 2000 + 3 * i, i % 10 + 1, -1500 + 37 * i, -100,
            45100000 + 1250 * i, 678000075 - 3 * i, 45200000 + 2501 * i, 678100000 + i, 10 + i // 7, 200 + i % 7]
"#;

/// The trace header seisgpu should read from `raw_fields(i)` (scalar -100 applied).
fn expected_header(i: usize) -> TraceHeader {
    let r = raw_fields(i as i32);
    let c = |v: i32| v as f64 / 100.0;
    TraceHeader {
        ffid: r[0], channel: r[1], source_station: r[2], cdp: r[3], receiver_station: r[4], offset: r[5] as f64,
        sx: c(r[7]), sy: c(r[8]), gx: c(r[9]), gy: c(r[10]), inline: r[11], crossline: r[12],
        // The scripts set no trace identification code: 0 (unknown) in the file, kept as read.
        trace_id: 0,
        ..Default::default()
    }
}

/// Some(()) when python3 with segyio and numpy runs; otherwise prints the SKIPPED line.
fn segyio_or_skip(name: &str) -> Option<()> {
    let ok = Command::new("python3").args(["-c", "import segyio, numpy"]).output().map(|o| o.status.success());
    match ok {
        Ok(true) => Some(()),
        Ok(false) => {
            let _ = writeln!(std::io::stderr(), "SKIPPED {name}: python3 has no segyio/numpy (pip install segyio)");
            None
        }
        Err(e) => {
            let _ = writeln!(std::io::stderr(), "SKIPPED {name}: python3 not found ({e})");
            None
        }
    }
}

fn python(script: &str, args: &[&Path]) {
    let out = Command::new("python3").arg("-c").arg(format!("{PY_FIELDS}\n{script}")).args(args).output().expect("python3 runs");
    assert!(out.status.success(), "python failed:\n{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
}

fn tmp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("seisgpu-segyio-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn endian_name(e: Endian) -> &'static str { if e == Endian::Big { "big" } else { "little" } }

fn bits(v: &[f32]) -> Vec<u32> { v.iter().map(|x| x.to_bits()).collect() }

/// Random samples that IBM floats represent exactly, so segyio's truncating encoder and ours
/// produce the same bytes (a value with more bits is rounded differently: segyio truncates).
fn ibm_exact_samples(what: &str) -> Vec<f32> {
    random_vec(N_TRACES * NS, what).into_iter().map(|x| ibm_to_f32(f32_to_ibm(x * 1000.0))).collect()
}

const PY_WRITE: &str = r#"
import sys
import numpy as np
data_path, out_path, fmt, endian, decoded_path, line2 = sys.argv[1:7]
fmt = int(fmt)
data = np.load(data_path)
n, ns = data.shape
spec = segyio.spec()
spec.format = fmt
spec.samples = 100.0 + 2.0 * np.arange(ns)
spec.tracecount = n
spec.endian = endian
with segyio.create(out_path, spec) as f:
    cards = ["C 1 WRITTEN BY SEGYIO", "C 2 " + line2] + ["C%2d" % k for k in range(3, 41)]
    f.text[0] = "".join(c.ljust(80) for c in cards)
    for i in range(n):
        h = dict(zip(KEYS, raw_fields(i)))
        h[su.delrt] = 100
        f.header[i] = h
        f.trace[i] = data[i]
with segyio.open(out_path, ignore_geometry=True, endian=endian) as f:
    np.save(decoded_path, np.stack([f.trace[i] for i in range(f.tracecount)]).astype("<f4"))
"#;

/// segyio writes, seisgpu reads: headers, text and samples bit for bit.
fn segyio_to_seisgpu(name: &str, format: SampleFormat, endian: Endian) {
    let Some(()) = segyio_or_skip(name) else { return };
    let dir = tmp_dir(name);
    let (data_npy, sgy, decoded_npy) = (dir.join("data.npy"), dir.join("segyio.sgy"), dir.join("decoded.npy"));
    let data = ibm_exact_samples(name);
    write_npy(&data_npy, &data, &[N_TRACES as u64, NS as u64]).unwrap();
    let fmt = format.code().to_string();
    let line2 = PathBuf::from(TEXT_LINE2);
    python(PY_WRITE, &[&data_npy, &sgy, Path::new(&fmt), Path::new(endian_name(endian)), &decoded_npy, &line2]);

    let (info, set) = read_segy(&sgy).unwrap();
    assert_eq!((info.format, info.endian, info.ns, info.n_traces), (format, endian, NS, N_TRACES as u64));
    assert_eq!((set.dt, set.t0), (DT_US as f32 * 1e-6, DELAY_MS as f32 * 1e-3));
    assert_eq!(info.text_encoding, TextEncoding::Ebcdic);
    let cards = info.text_cards();
    assert_eq!(cards[0], "C 1 WRITTEN BY SEGYIO");
    assert_eq!(cards[1], format!("C 2 {TEXT_LINE2}"));
    for i in 0..N_TRACES {
        // segyio leaves the trace identification code (bytes 29-30) zero.
        assert_eq!(set.headers[i], TraceHeader { trace_id: 0, ..expected_header(i) }, "trace {i}");
    }
    // Samples: what segyio itself decodes, and the (IBM-exact) values it was given.
    let decoded = read_npy_f32(&decoded_npy).unwrap();
    assert_eq!(decoded.shape, vec![N_TRACES as u64, NS as u64]);
    assert_eq!(bits(&set.data), bits(&decoded.data), "samples differ from segyio's reading");
    assert_eq!(bits(&set.data), bits(&data), "samples differ from what segyio was given");

    // The same traces written by seisgpu have the same sample bytes as segyio's file.
    let ours = dir.join("seisgpu.sgy");
    let o = WriteOptions { format, endian, coordinate_scalar: CoordinateScalar::Fixed(-100), ..Default::default() };
    write_segy(&ours, &set, &o).unwrap();
    let (a, b) = (std::fs::read(&sgy).unwrap(), std::fs::read(&ours).unwrap());
    assert_eq!(a.len(), b.len());
    let tb = 240 + NS * 4;
    for i in 0..N_TRACES {
        let s = 3600 + i * tb + 240;
        assert!(a[s..s + NS * 4] == b[s..s + NS * 4], "trace {i}: sample bytes differ from segyio's");
        // And the header fields both programs write agree byte for byte.
        for (byte, len) in [(9, 4), (13, 4), (17, 4), (21, 4), (25, 4), (37, 4), (71, 2), (73, 16), (109, 2), (189, 8)] {
            let h = 3600 + i * tb + byte - 1;
            assert_eq!(a[h..h + len], b[h..h + len], "trace {i} header bytes {byte}..{}", byte + len - 1);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn segyio_to_seisgpu_ibm_big() { segyio_to_seisgpu("segyio_to_seisgpu_ibm_big", SampleFormat::IbmFloat, Endian::Big) }
#[test]
fn segyio_to_seisgpu_ieee_big() { segyio_to_seisgpu("segyio_to_seisgpu_ieee_big", SampleFormat::IeeeFloat, Endian::Big) }
#[test]
fn segyio_to_seisgpu_ibm_little() { segyio_to_seisgpu("segyio_to_seisgpu_ibm_little", SampleFormat::IbmFloat, Endian::Little) }
#[test]
fn segyio_to_seisgpu_ieee_little() { segyio_to_seisgpu("segyio_to_seisgpu_ieee_little", SampleFormat::IeeeFloat, Endian::Little) }

const PY_READ: &str = r#"
import sys
import numpy as np
sgy_path, endian, fields_path, decoded_path, text_path = sys.argv[1:6]
with segyio.open(sgy_path, ignore_geometry=True, endian=endian) as f:
    b = f.bin
    lines = ["%d %d %d %d" % (f.tracecount, b[segyio.BinField.Format], b[segyio.BinField.Interval], b[segyio.BinField.Samples])]
    for i in range(f.tracecount):
        h = f.header[i]
        lines.append(" ".join(str(h[k]) for k in KEYS + [su.delrt, su.ns, su.dt]))
    open(fields_path, "w").write("\n".join(lines) + "\n")
    np.save(decoded_path, np.stack([f.trace[i] for i in range(f.tracecount)]).astype("<f4"))
    open(text_path, "wb").write(bytes(f.text[0]))
"#;

/// seisgpu writes, segyio reads: every header field, the textual header and the samples.
fn seisgpu_to_segyio(name: &str, format: SampleFormat, endian: Endian) {
    let Some(()) = segyio_or_skip(name) else { return };
    let dir = tmp_dir(name);
    let headers: Vec<TraceHeader> = (0..N_TRACES).map(expected_header).collect();
    // Arbitrary f32 values (not IBM-exact): segyio must decode our rounding of them.
    let data: Vec<f32> = random_vec(N_TRACES * NS, name).into_iter().map(|x| x * 3.7e3).collect();
    let set = TraceSet { headers, data: data.into(), ns: NS, dt: DT_US as f32 * 1e-6, t0: DELAY_MS as f32 * 1e-3 };
    let sgy = dir.join("seisgpu.sgy");
    let text = format!("WRITTEN BY SEISGPU\n{TEXT_LINE2}");
    let o = WriteOptions { format, endian, text: Some(text), ..Default::default() };
    write_segy(&sgy, &set, &o).unwrap();
    // The automatic coordinate scalar picks centimetres here (.25 and .01 m coordinates).
    let raw = SegyReader::open(&sgy).unwrap().raw_trace_header(3).unwrap();
    assert_eq!(Fields::new(&raw, 1, endian).i16(71), -100);

    let (fields, decoded_npy, text_out) = (dir.join("fields.txt"), dir.join("decoded.npy"), dir.join("text.bin"));
    python(PY_READ, &[&sgy, Path::new(endian_name(endian)), &fields, &decoded_npy, &text_out]);

    let table = std::fs::read_to_string(&fields).unwrap();
    let rows: Vec<Vec<i64>> = table.lines().map(|l| l.split(' ').map(|v| v.parse().unwrap()).collect()).collect();
    assert_eq!(rows[0], vec![N_TRACES as i64, format.code() as i64, DT_US as i64, NS as i64], "binary header as segyio reads it");
    for i in 0..N_TRACES {
        let mut want: Vec<i64> = raw_fields(i as i32).iter().map(|&v| v as i64).collect();
        want.extend([DELAY_MS as i64, NS as i64, DT_US as i64]);
        assert_eq!(rows[i + 1], want, "trace {i} header as segyio reads it");
    }
    let text = std::fs::read(&text_out).unwrap();
    assert_eq!(&text[..80], format!("{:<80}", "C 1 WRITTEN BY SEISGPU").as_bytes());
    assert_eq!(&text[80..160], format!("{:<80}", format!("C 2 {TEXT_LINE2}")).as_bytes());

    let decoded = read_npy_f32(&decoded_npy).unwrap();
    let (_, ours) = read_segy(&sgy).unwrap();
    assert_eq!(bits(&decoded.data), bits(&ours.data), "segyio decodes different samples than seisgpu");
    if format == SampleFormat::IeeeFloat {
        assert_eq!(bits(&decoded.data), bits(&set.data), "IEEE samples must be exact");
    } else {
        // Rounded to nearest: within half an IBM unit (relative 2^-21 at worst).
        for (a, b) in set.data.iter().zip(&decoded.data) {
            assert!((a - b).abs() <= a.abs() * 2f32.powi(-21), "{a} -> {b}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn seisgpu_to_segyio_ibm_big() { seisgpu_to_segyio("seisgpu_to_segyio_ibm_big", SampleFormat::IbmFloat, Endian::Big) }
#[test]
fn seisgpu_to_segyio_ieee_big() { seisgpu_to_segyio("seisgpu_to_segyio_ieee_big", SampleFormat::IeeeFloat, Endian::Big) }
#[test]
fn seisgpu_to_segyio_ibm_little() { seisgpu_to_segyio("seisgpu_to_segyio_ibm_little", SampleFormat::IbmFloat, Endian::Little) }
#[test]
fn seisgpu_to_segyio_ieee_little() { seisgpu_to_segyio("seisgpu_to_segyio_ieee_little", SampleFormat::IeeeFloat, Endian::Little) }

// ---- Rust-only checks through the public API (no Python needed) ----

fn tmp_file(name: &str) -> PathBuf { tmp_dir("rust").join(name) }

#[test]
fn segy_round_trip_random_samples_all_variants() {
    let headers: Vec<TraceHeader> = (0..N_TRACES).map(expected_header).collect();
    let data = random_vec(N_TRACES * NS, "segy_round_trip");
    let set = TraceSet { headers, data: data.into(), ns: NS, dt: 0.004, t0: 0.0 };
    for format in [SampleFormat::IbmFloat, SampleFormat::IeeeFloat] {
        for endian in [Endian::Big, Endian::Little] {
            let p = tmp_file(&format!("rt-{}-{}.sgy", format.code(), endian_name(endian)));
            write_segy(&p, &set, &WriteOptions { format, endian, ..Default::default() }).unwrap();
            let (info, back) = read_segy(&p).unwrap();
            assert_eq!((info.format, info.endian), (format, endian));
            assert_eq!(back.headers, set.headers);
            let want: Vec<f32> = if format == SampleFormat::IbmFloat {
                set.data.iter().map(|&x| ibm_to_f32(f32_to_ibm(x))).collect()
            } else {
                set.data.to_vec()
            };
            assert_eq!(bits(&back.data), bits(&want), "{format:?} {endian:?}");
        }
    }
}

#[test]
fn segy_bad_input_names_file_and_trace() {
    let headers: Vec<TraceHeader> = (0..5).map(expected_header).collect();
    let set = TraceSet { headers, data: random_vec(5 * 16, "segy_bad_input").into(), ns: 16, dt: 0.004, t0: 0.0 };
    let p = tmp_file("bad.sgy");
    write_segy(&p, &set, &WriteOptions::default()).unwrap();
    let full = std::fs::read(&p).unwrap();
    let tb = 240 + 16 * 4;
    // Cut inside trace 3's samples.
    std::fs::write(&p, &full[..3600 + 3 * tb + 250]).unwrap();
    let e = read_segy(&p).unwrap_err().to_string();
    assert!(e.contains("bad.sgy") && e.contains("trace 3") && e.contains("truncated"), "{e}");
    // Shorter than the file header.
    std::fs::write(&p, &full[..1000]).unwrap();
    let e = read_segy(&p).unwrap_err().to_string();
    assert!(e.contains("bad.sgy") && e.contains("shorter than the 3600-byte"), "{e}");
    // Missing file.
    let e = read_segy(tmp_file("missing.sgy")).unwrap_err().to_string();
    assert!(e.contains("missing.sgy"), "{e}");
}

// ---- The CLI: `seisgpu synth` and `seisgpu plot` ----

/// The CLI under test: cargo's build of it, or (in a GPU bundle, where the build tree is absent) the
/// `seisgpu` beside the test executable.
fn seisgpu(args: &[&str]) -> std::process::Output {
    let bin = crate::common::seisgpu_bin();
    Command::new(&bin).args(args).output().unwrap_or_else(|e| panic!("{} does not run: {e}", bin.display()))
}

#[test]
fn cli_synth_writes_every_kind_and_plot_draws_it() {
    let dir = tmp_dir("cli");
    let small = ["--ns", "120", "--sources", "3", "--receivers", "24", "--nx", "9", "--ny", "7"];
    for kind in ["line2d", "cross-spread", "diffractor", "cube"] {
        let sgy = dir.join(format!("{kind}.sgy"));
        let npy = dir.join(format!("{kind}.npy"));
        let mut args = vec!["synth", kind, "-o", sgy.to_str().unwrap(), "--npy", npy.to_str().unwrap(), "--format", "ieee"];
        args.extend_from_slice(&small);
        let out = seisgpu(&args);
        assert!(out.status.success(), "{kind}: {}", String::from_utf8_lossy(&out.stderr));
        let (info, set) = read_segy(&sgy).unwrap();
        assert_eq!(info.ns, 120);
        let arr = read_npy_f32(&npy).unwrap();
        assert_eq!(bits(&arr.data), bits(&set.data), "{kind}: .npy and SEG-Y differ");
        let expect_traces = if kind == "cube" { 63 } else if kind == "cross-spread" { 72 } else { 72 };
        assert_eq!(set.len(), expect_traces, "{kind}");
        for style in ["density", "wiggle"] {
            let png = dir.join(format!("{kind}-{style}.png"));
            let out = seisgpu(&["plot", sgy.to_str().unwrap(), "-o", png.to_str().unwrap(), "--style", style, "--first", "2", "--count", "20"]);
            assert!(out.status.success(), "{kind} {style}: {}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(&std::fs::read(&png).unwrap()[1..4], b"PNG");
        }
    }
    // segyio sees the cube's inline/crossline geometry (bytes 189/193).
    if segyio_or_skip("cli_synth_cube_geometry_in_segyio").is_some() {
        let cube = dir.join("cube.sgy");
        let out = Command::new("python3")
            .args(["-c", "import segyio,sys\nwith segyio.open(sys.argv[1]) as f: print(len(f.ilines), len(f.xlines), f.sorting)"])
            .arg(&cube)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "9 7 2", "inlines, crosslines, inline sorting");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cli_errors_name_the_file_and_parameter() {
    let dir = tmp_dir("cli-bad");
    let sgy = dir.join("x.sgy");
    let out = seisgpu(&["synth", "line2d", "-o", sgy.to_str().unwrap(), "--ns", "64", "--sources", "1", "--receivers", "10"]);
    assert!(out.status.success());
    // Truncate inside trace 6 and plot: the error names the file and the trace.
    let bytes = std::fs::read(&sgy).unwrap();
    std::fs::write(&sgy, &bytes[..3600 + 6 * (240 + 64 * 4) + 10]).unwrap();
    let png = dir.join("x.png");
    let out = seisgpu(&["plot", sgy.to_str().unwrap(), "-o", png.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("x.sgy") && err.contains("trace 6") && err.contains("truncated"), "{err}");
    assert!(!png.exists());
    let out = seisgpu(&["synth", "line2d", "-o", sgy.to_str().unwrap(), "--freq", "90"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("peak frequency 90 Hz"), "{err}");
    let out = seisgpu(&["plot", sgy.to_str().unwrap(), "-o", png.to_str().unwrap(), "--first", "100000"]);
    assert!(!out.status.success() && String::from_utf8_lossy(&out.stderr).contains("--first 100000"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Traces with everything a result file carries from its input: UTM-sized coordinates with
/// centimetres, the CDP's own coordinates away from the midpoint, shot points (fractional too),
/// negative offsets, a 104 ms delay, dead-trace codes.
fn geometry_set() -> TraceSet {
    let headers: Vec<TraceHeader> = (0..12).map(|i| {
        let f = i as f64;
        TraceHeader {
            sx: 451_234.56 + 25.0 * f, sy: 6_781_234.07, gx: 451_834.25 - 12.5 * f, gy: 6_781_300.01 + 0.5 * f,
            offset: -600.0 + 37.0 * f, cdp: 3000 + i, inline: 120 + i / 4, crossline: 800 + i % 4, ffid: 77, channel: i + 1,
            source_station: 500 + i, receiver_station: i + 1, trace_id: if i == 5 { 2 } else { 1 },
            cdp_xy: Some((451_500.0 + 3.0 * f, 6_781_270.5)), shot_point: if i % 2 == 0 { 1001.0 + f } else { 1001.5 + f },
        }
    }).collect();
    let mut set = TraceSet::zeros(headers, 50, 0.002);
    set.t0 = 0.104;
    for (k, v) in set.data.iter_mut().enumerate() {
        *v = ((k as f32) * 0.173).sin() * 1e3;
    }
    set
}

const PY_GEOMETRY: &str = r#"
import sys
import numpy as np
path, kind, out_path, decoded_path = sys.argv[1:5]
if kind == "su":
    f = segyio.su.open(path, ignore_geometry=True, endian="little")
else:
    f = segyio.open(path, ignore_geometry=True)
def scaled(h, key, scalar):
    s = h[scalar]
    return h[key] / -s if s < 0 else h[key] * (s if s > 0 else 1)
with f:
    lines = ["%d %s %s" % (f.tracecount, repr(float(f.samples[0])), repr(float(f.samples[1] - f.samples[0])))]
    for i in range(f.tracecount):
        h = f.header[i]
        co = [scaled(h, k, su.scalco) for k in (su.sx, su.sy, su.gx, su.gy, su.cdpx, su.cdpy)]
        sp = scaled(h, 197, 201)
        ints = [h[k] for k in (su.offset, su.cdp, su.iline, su.xline, su.fldr, su.tracf, su.ep, su.cdpt, su.trid)]
        lines.append(" ".join(repr(float(v)) for v in co + [sp] + ints))
    open(out_path, "w").write("\n".join(lines) + "\n")
    np.save(decoded_path, np.stack([f.trace[i] for i in range(f.tracecount)]).astype("<f4"))
"#;

/// A result written through the output module (SEG-Y and SU) is read back with its geometry by
/// seisgpu's readers and by segyio.
fn geometry_round_trip(name: &str, ext: &str) {
    let dir = tmp_dir(name);
    let set = geometry_set();
    let path = dir.join(format!("result.{ext}"));
    seisgpu_host::io::output::write_traces(&path, &set, "geometry round trip").unwrap();
    let back = if ext == "su" { seisgpu_host::io::su::read_su(&path).unwrap() } else { read_segy(&path).unwrap().1 };
    assert_eq!(back, set, "seisgpu's reader");
    let Some(()) = segyio_or_skip(name) else { return };
    let (fields, decoded) = (dir.join("fields.txt"), dir.join("decoded.npy"));
    python(PY_GEOMETRY, &[&path, Path::new(ext), &fields, &decoded]);
    let text = std::fs::read_to_string(&fields).unwrap();
    let mut lines = text.lines();
    let head: Vec<f64> = lines.next().unwrap().split(' ').map(|v| v.parse().unwrap()).collect();
    assert_eq!(head, vec![12.0, 104.0, 2.0], "trace count, first sample (ms), interval (ms) as segyio reads them");
    for (i, line) in lines.enumerate() {
        let v: Vec<f64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
        let h = &set.headers[i];
        let (cx, cy) = h.cdp_xy.unwrap();
        let want = [h.sx, h.sy, h.gx, h.gy, cx, cy, h.shot_point, h.offset, h.cdp as f64, h.inline as f64, h.crossline as f64,
            h.ffid as f64, h.channel as f64, h.source_station as f64, h.receiver_station as f64, h.trace_id as f64];
        for (k, (a, b)) in v.iter().zip(want).enumerate() {
            assert!((a - b).abs() < 1e-6, "trace {i} field {k}: segyio reads {a}, written {b}");
        }
    }
    assert_eq!(bits(&read_npy_f32(&decoded).unwrap().data), bits(&set.data), "samples as segyio decodes them");
    let _ = std::fs::remove_dir_all(&dir);
}

// ---- Field files in: the reader's overrides, SU input and trace choice, through the CLI ----

/// A line of `n` traces of `ns` samples with UTM coordinates; the first `aux` coded 0 (auxiliary
/// channels), the rest 1.
fn field_set(n: usize, ns: usize, aux: usize) -> TraceSet {
    let headers = (0..n)
        .map(|i| TraceHeader { sx: 451_000.25, sy: 6_780_000.5, gx: 451_100.0 + 25.0 * i as f64, gy: 6_780_000.5, offset: 100.0 + 25.0 * i as f64,
            ffid: 2207, channel: i as i32 + 1, cdp: 500 + i as i32, trace_id: if i < aux { 0 } else { 1 }, ..Default::default() })
        .collect();
    let mut set = TraceSet::zeros(headers, ns, 0.004);
    let r = random_vec(n * ns, "field_set");
    set.data.copy_from_slice(&r);
    set
}

#[test]
fn seismic_unix_input_matches_and_segyio_agrees() {
    let dir = tmp_dir("su");
    let set = field_set(30, 77, 0);
    for endian in [Endian::Little, Endian::Big] {
        let sgy = dir.join(format!("a-{}.sgy", endian_name(endian)));
        write_segy(&sgy, &set, &WriteOptions { format: SampleFormat::IeeeFloat, endian, ..Default::default() }).unwrap();
        let su = dir.join(format!("a-{}.su", endian_name(endian)));
        std::fs::write(&su, &std::fs::read(&sgy).unwrap()[3600..]).unwrap();
        let (info, back) = read_segy(&su).unwrap();
        assert_eq!((info.file_format, info.endian), (seisgpu_host::io::segy::FileFormat::Su, endian));
        assert_eq!(bits(&back.data), bits(&set.data));
        assert_eq!(back.headers, set.headers);
        if segyio_or_skip("seismic_unix_input_segyio").is_some() {
            let out = Command::new("python3")
                .args(["-c", "import segyio,sys\nwith segyio.su.open(sys.argv[1], endian=sys.argv[2], ignore_geometry=True) as f:\n \
                    print(f.tracecount, len(f.samples), repr(float(f.trace[7][5])))"])
                .arg(&su)
                .arg(endian_name(endian))
                .output()
                .unwrap();
            assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
            // Compared as numbers: Python and Rust spell small floats differently (1e-05, 1e-5).
            let said = String::from_utf8_lossy(&out.stdout).to_string();
            let v: Vec<&str> = said.split_whitespace().collect();
            assert_eq!(v[..2], ["30", "77"], "{said}");
            assert_eq!(v[2].parse::<f64>().ok(), Some(set.trace(7)[5] as f64), "{said}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn result_geometry_round_trips_through_segyio_segy() { geometry_round_trip("result_geometry_segy", "sgy") }
#[test]
fn result_geometry_round_trips_through_segyio_su() { geometry_round_trip("result_geometry_su", "su") }

/// An interval the 16-bit fields cannot hold: SEG-Y keeps it in the rev 2 extended field (0 in
/// 3217 and 117: segyio, which reads only those, then falls back to its 4 ms default, as this test
/// records); SU cannot carry it and is refused.
#[test]
fn unrepresentable_interval_segy_extended_field_su_refused() {
    let name = "unrepresentable_interval";
    let dir = tmp_dir(name);
    let mut set = geometry_set();
    set.dt = 0.000_012_5;
    let sgy = dir.join("fine.sgy");
    seisgpu_host::io::output::write_traces(&sgy, &set, "12.5 us").unwrap();
    let (info, back) = read_segy(&sgy).unwrap();
    assert_eq!((info.binary.sample_interval, back.dt), (0, set.dt));
    let su = dir.join("fine.su");
    let e = format!("{:#}", seisgpu_host::io::output::write_traces(&su, &set, "12.5 us").unwrap_err());
    assert!(e.contains("fine.su") && e.contains("117-118"), "{e}");
    assert!(!su.exists());
    let Some(()) = segyio_or_skip(name) else { return };
    let (fields, decoded) = (dir.join("fields.txt"), dir.join("decoded.npy"));
    python(PY_GEOMETRY, &[&sgy, Path::new("sgy"), &fields, &decoded]);
    let first = std::fs::read_to_string(&fields).unwrap().lines().next().unwrap().to_string();
    assert_eq!(first, "12 104.0 4.0", "segyio's reading of a file without the classic interval");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cli_reads_field_files_with_defects_aux_traces_and_selection() {
    let dir = tmp_dir("cli-field");
    // A land shot with 2 auxiliary channels; trace headers saying 1500 samples where the data
    // and the binary header have 120.
    let set = field_set(26, 120, 2);
    let sgy = dir.join("shot.sgy");
    write_segy(&sgy, &set, &WriteOptions::default()).unwrap();
    let mut b = std::fs::read(&sgy).unwrap();
    for i in 0..26 {
        let off = 3600 + i * (240 + 120 * 4) + 114;
        b[off..off + 2].copy_from_slice(&1500u16.to_be_bytes());
    }
    std::fs::write(&sgy, &b).unwrap();
    let run = |extra: &[&str], out: &Path| {
        let mut args = vec!["--device", "cpu", "nmo", "--input", sgy.to_str().unwrap(), "--velocity", "0:1500,1:2500", "-o", out.to_str().unwrap()];
        args.extend_from_slice(extra);
        let o = seisgpu(&args);
        let err = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(o.status.success(), "{extra:?}: {err}");
        (read_npy_f32(out).unwrap().shape, err)
    };
    let npy = dir.join("nmo.npy");
    let (shape, err) = run(&[], &npy);
    assert_eq!(shape, [24, 120]);
    assert!(err.contains("warning") && err.contains("115-116") && err.contains("reading 120"), "{err}");
    assert!(err.contains("read 24 of 26 traces (SEG-Y), 2 non-seismic skipped"), "{err}");
    assert_eq!(run(&["--keep-aux"], &npy).0, [26, 120]);
    let (shape, err) = run(&["--select", "channel=5:9,offset=:250"], &npy);
    assert_eq!(shape, [3, 120], "{err}");
    assert!(err.contains("outside --select"), "{err}");
    assert_eq!(run(&["--samples", "120", "--dt", "2"], &npy).0, [24, 120]);
    let o = seisgpu(&["--device", "cpu", "nmo", "--input", sgy.to_str().unwrap(), "--velocity", "0:1500", "-o", npy.to_str().unwrap(),
        "--select", "chanel=1"]);
    assert!(!o.status.success() && String::from_utf8_lossy(&o.stderr).contains("unknown key `chanel`"));
    let _ = std::fs::remove_dir_all(&dir);
}
