//! Every command's `-o/--output` as a user runs it: `.sgy`, `.su` and `.npy` hold the same samples,
//! SEG-Y and SU carry the geometry (the input's trace headers, or the image grid's), an unknown
//! extension or a missing folder fails at once, naming the path. Runs the built `seisgpu` binary on
//! small synthetic inputs (made with `seisgpu synth`), on the CPU.

use std::path::{Path, PathBuf};
use std::process::Command;

use seisgpu_host::io::npy::read_npy_f32;
use seisgpu_host::io::output::traces_from_slices;
use seisgpu_host::io::segy::read_segy;
use seisgpu_host::io::su::read_su;
use seisgpu_host::TraceSet;

fn tmp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("seisgpu-output-cli-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn seisgpu(args: &[&str]) -> std::process::Output {
    let mut a = vec!["--device", "cpu", "--threads", "1"];
    a.extend(args);
    Command::new(crate::common::seisgpu_bin()).args(&a).output().expect("seisgpu runs")
}

fn ok(args: &[&str]) {
    let out = seisgpu(args);
    assert!(out.status.success(), "seisgpu {}:\n{}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

fn fails(args: &[&str]) -> String {
    let out = seisgpu(args);
    assert!(!out.status.success(), "seisgpu {} should fail", args.join(" "));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn s(p: &Path) -> &str { p.to_str().unwrap() }

/// Runs `args -o <dir>/<stem>.{sgy,su,npy}` and returns the three files read back; `-o .txt` and
/// `-o <missing folder>/x.sgy` fail naming the path, writing nothing.
fn three_ways(dir: &Path, stem: &str, args: &[&str]) -> (TraceSet, TraceSet, (Vec<u64>, Vec<f32>)) {
    let p = |ext: &str| dir.join(format!("{stem}.{ext}"));
    for ext in ["sgy", "su", "npy"] {
        let out = p(ext);
        let mut a = args.to_vec();
        a.extend(["-o", s(&out)]);
        ok(&a);
    }
    let txt = p("txt");
    let mut a = args.to_vec();
    a.extend(["-o", s(&txt)]);
    let e = fails(&a);
    assert!(e.contains(s(&txt)) && e.contains(".sgy") && e.contains(".su") && e.contains(".npy"), "{stem}: {e}");
    assert!(!txt.exists());
    let missing = dir.join("no-such-folder").join("x.sgy");
    let mut a = args.to_vec();
    a.extend(["--output", s(&missing)]);
    let e = fails(&a);
    assert!(e.contains(s(&missing)) && e.contains("does not exist"), "{stem}: {e}");
    let npy = read_npy_f32(p("npy")).unwrap();
    (read_segy(p("sgy")).unwrap().1, read_su(p("su")).unwrap(), (npy.shape, npy.data))
}

/// Trace outputs keep the input's headers in SEG-Y and SU; all three hold the same samples.
fn check_traces(input: &TraceSet, (sgy, su, (shape, npy)): (TraceSet, TraceSet, (Vec<u64>, Vec<f32>)), what: &str) {
    assert_eq!(sgy.headers, input.headers, "{what}: SEG-Y headers");
    assert_eq!(su.headers, input.headers, "{what}: SU headers");
    assert_eq!((sgy.ns, sgy.dt, sgy.t0), (input.ns, input.dt, input.t0), "{what}: sampling");
    assert_eq!(shape, vec![input.len() as u64, input.ns as u64], "{what}: .npy shape");
    assert_eq!(sgy.data, npy, "{what}: SEG-Y and .npy samples");
    assert_eq!(su.data, npy, "{what}: SU and .npy samples");
}

#[test]
fn cli_trace_outputs_keep_the_input_geometry() {
    let dir = tmp_dir("traces");
    let line = dir.join("line.sgy");
    ok(&["synth", "line2d", "-o", s(&line), "--ns", "200", "--sources", "3", "--receivers", "16"]);
    let input = read_segy(&line).unwrap().1;
    check_traces(&input, three_ways(&dir, "nmo", &["nmo", "--input", s(&line), "--velocity", "0:1500,1:2200"]), "nmo");

    let diff = dir.join("diff.sgy");
    ok(&["synth", "diffractor", "-o", s(&diff), "--ns", "150", "--sources", "3", "--receivers", "31"]);
    let input = read_segy(&diff).unwrap().1;
    let image = dir.join("image.npy");
    let grid = ["--nx", "21", "--ny", "1", "--ntau", "80"];
    let mut a = vec!["ktm", "migrate", "--input", s(&diff)];
    a.extend(grid);
    a.extend(["-o", s(&image)]);
    ok(&a);
    let mut a = vec!["ktm", "model", "--input", s(&diff), "--image", s(&image)];
    a.extend(grid);
    check_traces(&input, three_ways(&dir, "model", &a), "ktm model");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn cli_nlbf_outputs() {
    let dir = tmp_dir("nlbf");
    let (sgy, su, (shape, npy)) = three_ways(&dir, "enhanced", &["nlbf", "enhance", "--synthetic", "demo"]);
    assert_eq!(sgy.headers, su.headers);
    assert_eq!(shape, vec![sgy.len() as u64, sgy.ns as u64]);
    assert!(sgy.data == npy && su.data == npy);
    // The estimate: a folder of volumes in --format; the SEG-Y volumes one trace per parameter trace.
    let est = |f: &str| dir.join(format!("est-{f}"));
    for f in ["npy", "sgy", "su"] {
        ok(&["nlbf", "estimate", "--synthetic", "demo", "-o", s(&est(f)), "--format", f]);
    }
    let a = read_npy_f32(est("npy").join("A.npy")).unwrap();
    let (_, a_sgy) = read_segy(est("sgy").join("A.sgy")).unwrap();
    let a_su = read_su(est("su").join("A.su")).unwrap();
    assert_eq!(a_sgy.len() as u64, a.shape[0] * a.shape[1]);
    assert!(a_sgy.data == a.data && a_su.data == a.data);
    let json = std::fs::read_to_string(est("sgy").join("nlbf.json")).unwrap();
    assert!(json.contains("\"A.sgy\""), "{json}");
    // Inline numbers count rows (y), crosslines columns (x), as the .npy's (ny, nx) axes.
    let last = a_sgy.headers.last().unwrap();
    assert_eq!((last.inline as u64, last.crossline as u64), (a.shape[0], a.shape[1]));
    let e = fails(&["nlbf", "estimate", "--synthetic", "demo", "-o", s(&dir.join("est.sgy"))]);
    assert!(e.contains("est.sgy") && e.contains("--format"), "{e}");
    let e = fails(&["nlbf", "estimate", "--synthetic", "demo", "-o", s(&est("x")), "--format", "txt"]);
    assert!(e.contains("txt"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Grid outputs: one trace per bin (and class), bin centres and inline/crossline in the headers.
#[test]
fn cli_image_outputs_carry_the_grid() {
    let dir = tmp_dir("images");
    let diff = dir.join("diff.sgy");
    ok(&["synth", "diffractor", "-o", s(&diff), "--ns", "150", "--sources", "3", "--receivers", "31"]);
    let (sgy, su, (shape, npy)) =
        three_ways(&dir, "ktm", &["ktm", "migrate", "--input", s(&diff), "--nx", "21", "--ny", "2", "--ntau", "80", "--dx", "20"]);
    assert_eq!(shape, vec![1, 21, 2, 80]);
    assert!(sgy.data == npy && su.data == npy && sgy.headers == su.headers);
    let h = &sgy.headers[5]; // ix 2, iy 1
    assert_eq!((h.inline, h.crossline, h.cdp, h.cdp_position().0 - sgy.headers[0].sx), (3, 2, 6, 40.0));

    let (sgy, su, (shape, npy)) = three_ways(&dir, "pstm", &["pstm", "migrate", "--traces", "200", "--nx", "5", "--ny", "6",
        "--nz", "50", "--ns", "120", "--noff", "2", "--doffset", "400", "--x0", "431000", "--y0", "6700000.5"]);
    assert_eq!(shape, vec![5, 6, 2, 50]);
    assert!(sgy.data == npy && su.data == npy && sgy.headers == su.headers);
    let h = &sgy.headers[2 * 6 * 2 + 3 * 2 + 1]; // ix 2, iy 3, class 1
    assert_eq!((h.inline, h.crossline, h.offset, h.sx, h.sy), (3, 4, 600.0, 431_050.0, 6_700_075.5));

    let (sgy, su, (shape, npy)) = three_ways(&dir, "srm", &["srm", "--synthetic", "scatterer", "--fmax", "12", "--nz", "8",
        "--table-rows", "48", "--planes", "3"]);
    let (nz, ny, nx) = (shape[0] as usize, shape[1] as usize, shape[2] as usize);
    assert_eq!((sgy.len(), sgy.ns), (ny * nx, nz));
    // Depth in metres read as milliseconds; one thread: the same sums in every run.
    assert_eq!((sgy.dt, su.dt), (0.01, 0.01));
    assert!(sgy.data == traces_from_slices(&npy, nz, ny, nx) && su.data == sgy.data);
    let h = &sgy.headers[nx + 2]; // iy 1, ix 2: inline counts y nodes
    assert_eq!((h.inline, h.crossline), (2, 3));

    let vol = ["--input", "synth:20x18x32:0.3", "--cube", "16", "--overlap", "4"];
    let mut a = vec!["wavepacket", "denoise", "--sigma", "0.05"];
    a.extend(vol);
    let (sgy, su, (shape, npy)) = three_ways(&dir, "wp-denoise", &a);
    assert_eq!(shape, vec![20, 18, 32]);
    assert!(sgy.data == npy && su.data == npy);
    assert_eq!((sgy.headers[18].inline, sgy.headers[18].crossline, sgy.dt), (2, 1, 0.004));
    let wpk = dir.join("c.wpk");
    let mut a = vec!["wavepacket", "forward"];
    a.extend(vol);
    a.extend(["-o", s(&wpk)]);
    ok(&a);
    let (sgy, _, (_, npy)) = three_ways(&dir, "wp-inverse", &["wavepacket", "inverse", "--input", s(&wpk), "--sample-interval", "2"]);
    assert!(sgy.data == npy && sgy.dt == 0.002);

    // A complex plane is .npy only.
    let e = fails(&["extrapolate", "--nx", "16", "--ny", "16", "-o", s(&dir.join("plane.sgy"))]);
    assert!(e.contains("plane.sgy") && e.contains(".npy"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
