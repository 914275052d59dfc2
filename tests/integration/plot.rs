//! `seisgpu plot` on every kind of output, through the built CLI: SEG-Y gathers and stacks,
//! Seismic Unix files, .npy sections, volumes by inline, crossline and time slice, 4-D ktm
//! images, srm depth images with their sidecar; and bad files, which must end in a clear error
//! (never a panic or a hang).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use seisgpu_host::io::npy::write_npy;
use seisgpu_host::io::segy::{write_segy, SampleFormat, WriteOptions};
use seisgpu_host::io::sidecar::{ArrayMeta, AxisMeta};
use seisgpu_host::plot::segy::{segy_panel, Key, TraceRange};
use seisgpu_host::synth;
use seisgpu_host::TraceSet;

fn tmp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("seisgpu-plot-it-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs the CLI with a deadline: a plot that does not finish in 60 s is a hang, a test failure.
fn seisgpu(args: &[&str]) -> (bool, String) {
    let bin = crate::common::seisgpu_bin();
    let mut child = Command::new(&bin).args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn()
        .unwrap_or_else(|e| panic!("{} does not run: {e}", bin.display()));
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut err = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
            assert!(!err.contains("panicked"), "seisgpu {args:?} panicked: {err}");
            return (status.success(), err);
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("seisgpu {args:?} did not finish in 60 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn plot(input: &Path, png: &Path, extra: &[&str]) -> String {
    let mut args = vec!["plot", input.to_str().unwrap(), "-o", png.to_str().unwrap()];
    args.extend_from_slice(extra);
    let (ok, err) = seisgpu(&args);
    assert!(ok, "plot {} {extra:?}: {err}", input.display());
    err
}

/// Decodes a PNG: RGB bytes, width, height.
fn decode(p: &Path) -> (Vec<u8>, usize, usize) {
    let dec = png::Decoder::new(std::io::Cursor::new(std::fs::read(p).unwrap()));
    let mut r = dec.read_info().unwrap();
    let mut img = vec![0; r.output_buffer_size()];
    let info = r.next_frame(&mut img).unwrap();
    assert_eq!(info.color_type, png::ColorType::Rgb);
    (img, info.width as usize, info.height as usize)
}

/// The PNG has a plot area with ink in it and, for density plots, the colour bar right of it:
/// red (+clip) at its top, blue (-clip) at its bottom for the seismic map on signed data.
fn check_png(p: &Path, bar: bool) {
    let (img, w, h) = decode(p);
    assert!((500..=2000).contains(&w) && (500..=1200).contains(&h), "{}: {w} x {h}", p.display());
    let px = |x: usize, y: usize| [img[(y * w + x) * 3], img[(y * w + x) * 3 + 1], img[(y * w + x) * 3 + 2]];
    let inked = (70..h - 60).flat_map(|y| (90..w - 120).map(move |x| (x, y))).filter(|&(x, y)| px(x, y) != [255, 255, 255]).count();
    assert!(inked > (w - 210) * (h - 130) / 20, "{}: {inked} inked pixels: blank", p.display());
    if bar {
        let x = w - 110 + 16 + 9;
        let (top, bottom) = (px(x, 70), px(x, h - 62));
        assert!(top[0] > 200 && top[2] < 60, "{}: colour bar top {top:?}", p.display());
        assert!(bottom[2] > 200 && bottom[0] < 60, "{}: colour bar bottom {bottom:?}", p.display());
    }
}

/// A shot gather, ffid 12: 48 channels at 25 m, 300 samples at 4 ms, two reflections.
fn gather() -> TraceSet {
    let mut t = TraceSet::zeros(synth::geometry::line_2d(1, 25.0, 48, 25.0), 300, 0.004);
    for h in &mut t.headers {
        h.ffid = 12;
    }
    synth::events::hyperbolic_reflection(&mut t, 0.4, 2000.0, 20.0, 1.0);
    synth::events::hyperbolic_reflection(&mut t, 0.8, 2500.0, 20.0, -0.7);
    t
}

/// A (n1, n2, ns) volume with a dipping reflector: a Ricker at t = 0.2 s + 2 ms per n1 + 1 ms per n2.
fn volume(n1: usize, n2: usize, ns: usize) -> Vec<f32> {
    let mut v = vec![0.0f32; n1 * n2 * ns];
    for i in 0..n1 {
        for j in 0..n2 {
            let tr = &mut v[(i * n2 + j) * ns..(i * n2 + j + 1) * ns];
            synth::add_ricker(tr, 0.004, 0.2 + 0.002 * i as f32 + 0.001 * j as f32, 20.0, 1.0);
            synth::add_ricker(tr, 0.004, 0.5, 15.0, -0.5);
        }
    }
    v
}

#[test]
fn plot_segy_gather_and_stack_with_keys_gain_and_colour_bar() {
    let dir = tmp_dir("segy");
    let t = gather();
    let sgy = dir.join("shot.sgy");
    write_segy(&sgy, &t, &WriteOptions { format: SampleFormat::IeeeFloat, ..Default::default() }).unwrap();
    let png = dir.join("shot.png");
    let err = plot(&sgy, &png, &[]);
    assert!(err.contains("gather, ffid 12"), "{err}");
    check_png(&png, true);
    for extra in [&["--agc", "200", "--colormap", "gray"][..], &["--style", "wiggle", "--key", "channel"], &["--clip", "0.5", "--every", "2"]] {
        plot(&sgy, &png, extra);
        let (_, w, h) = decode(&png);
        assert!(w > 400 && h > 400);
    }
    // A stack: CDPs varying at zero offset, labelled by CDP.
    let mut s = gather();
    for (k, h) in s.headers.iter_mut().enumerate() {
        (h.offset, h.cdp, h.gx, h.sx, h.ffid, h.inline, h.crossline) = (0.0, 1000 + k as i32, 25.0 * k as f64, 25.0 * k as f64, k as i32, 0, 0);
    }
    let stack = dir.join("stack.sgy");
    write_segy(&stack, &s, &WriteOptions::default()).unwrap();
    let err = plot(&stack, &png, &[]);
    assert!(err.contains("stack.sgy: stack, traces 0..47"), "{err}");
    check_png(&png, true);
    // Depth: from the textual header's card, or --depth; the axis reads in m.
    let depth = dir.join("depth.sgy");
    write_segy(&depth, &s, &WriteOptions { text: Some(format!("srm depth image\n{}", seisgpu_host::plot::segy::DEPTH_CARD)), ..Default::default() }).unwrap();
    let panel = segy_panel(&depth, &TraceRange::default(), None, false).unwrap();
    assert_eq!((panel.axes.time_label.as_str(), panel.axes.dt), ("depth (m)", 4.0));
    let panel = segy_panel(&stack, &TraceRange::default(), Some(Key::Offset), true).unwrap();
    assert_eq!((panel.axes.time_label.as_str(), panel.axes.trace_label.as_str()), ("depth (m)", "offset (m)"));
    let panel = segy_panel(&stack, &TraceRange { first: 3, count: Some(20), every: 4, ..Default::default() }, None, false).unwrap();
    assert_eq!((panel.n_traces, panel.axes.time_label.as_str(), panel.axes.trace_values.as_ref().unwrap()[1]), (5, "time (ms)", 1007.0));
    plot(&depth, &png, &["--agc", "100"]);
    check_png(&png, true);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A Seismic Unix file (written by `write_su`), labelled by offset like its SEG-Y twin; --depth
/// makes its axis depth.
#[test]
fn plot_seismic_unix() {
    let dir = tmp_dir("su");
    let su = dir.join("shot.su");
    seisgpu_host::io::su::write_su(&su, &gather()).unwrap();
    let png = dir.join("su.png");
    let err = plot(&su, &png, &["--first", "4", "--count", "40"]);
    assert!(err.contains("shot.su: gather, ffid 12, traces 4..43"), "{err}");
    check_png(&png, true);
    let panel = segy_panel(&su, &TraceRange { every: 3, ..Default::default() }, None, true).unwrap();
    assert_eq!((panel.n_traces, panel.axes.time_label.as_str(), panel.axes.trace_label.as_str()), (16, "depth (m)", "offset (m)"));
    let (ok, err) = seisgpu(&["plot", su.to_str().unwrap(), "-o", png.to_str().unwrap(), "--first", "48"]);
    assert!(!ok && err.contains("--first 48"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn plot_npy_sections_volumes_and_images() {
    let dir = tmp_dir("npy");
    let png = dir.join("out.png");
    // 2-D (traces, samples), e.g. nlbf enhance's enhanced.npy.
    let t = gather();
    let sec = dir.join("enhanced.npy");
    write_npy(&sec, &t.data, &[t.len() as u64, t.ns as u64]).unwrap();
    let err = plot(&sec, &png, &[]);
    assert!(err.contains("enhanced traces"), "{err}");
    check_png(&png, true);
    // 3-D (n1, n2, samples) by inline, crossline, time slice and sample, with a sidecar's axes.
    let (n1, n2, ns) = (20, 30, 200);
    let vol = dir.join("cube.npy");
    write_npy(&vol, &volume(n1, n2, ns), &[n1 as u64, n2 as u64, ns as u64]).unwrap();
    let err = plot(&vol, &png, &[]);
    assert!(err.contains("inline 10 (middle)") && err.contains("axes assumed"), "{err}");
    check_png(&png, true);
    for extra in [&["--crossline", "7"][..], &["--sample", "60"]] {
        plot(&vol, &png, extra);
        check_png(&png, true);
    }
    ArrayMeta { description: Some("wave-packet volume".into()), axes: vec![AxisMeta::new("inline", "m", 0.0, 25.0),
        AxisMeta::new("crossline", "m", 0.0, 25.0), AxisMeta::new("time", "s", 0.0, 0.004)] }.write(&vol).unwrap();
    let err = plot(&vol, &png, &["--time-slice", "240", "--agc", "100"]);
    assert!(err.contains("wave-packet volume") && err.contains("slice at time 240 ms"), "{err}");
    check_png(&png, true);
    let (ok, err) = seisgpu(&["plot", vol.to_str().unwrap(), "-o", png.to_str().unwrap(), "--time-slice", "5000"]);
    assert!(!ok && err.contains("--time-slice 5000"), "{err}");
    // 4-D ktm image (classes, nx, ny, ntau): the sum of classes, or one.
    let (nc, nx, ny, nt) = (3, 16, 12, 150);
    let mut img = Vec::new();
    for c in 0..nc {
        img.extend(volume(nx, ny, nt).into_iter().map(|v| v * (c + 1) as f32));
    }
    let ktm = dir.join("ktm-image.npy");
    write_npy(&ktm, &img, &[nc as u64, nx as u64, ny as u64, nt as u64]).unwrap();
    let err = plot(&ktm, &png, &["--inline", "5"]);
    assert!(err.contains("sum of 3 classes"), "{err}");
    check_png(&png, true);
    let err = plot(&ktm, &png, &["--crossline", "3", "--class", "2"]);
    assert!(err.contains("class 2 of 3"), "{err}");
    check_png(&png, true);
    let (ok, err) = seisgpu(&["plot", ktm.to_str().unwrap(), "-o", png.to_str().unwrap(), "--class", "3"]);
    assert!(!ok && err.contains("--class 3"), "{err}");
    // srm depth image (nz, ny, nx): depth first, from its sidecar or --layout.
    let (nz, ny, nx) = (120, 5, 40);
    let cube = volume(ny, nx, nz);
    let mut depth_first = vec![0.0f32; nz * ny * nx];
    for iy in 0..ny {
        for ix in 0..nx {
            for iz in 0..nz {
                depth_first[(iz * ny + iy) * nx + ix] = cube[(iy * nx + ix) * nz + iz];
            }
        }
    }
    let srm = dir.join("srm-image.npy");
    write_npy(&srm, &depth_first, &[nz as u64, ny as u64, nx as u64]).unwrap();
    let err = plot(&srm, &png, &["--layout", "depth,y,x"]);
    assert!(err.contains("y 2") && err.contains("120 samples"), "{err}");
    check_png(&png, true);
    ArrayMeta { description: Some("srm depth image".into()), axes: vec![AxisMeta::new("depth", "m", 0.0, 5.0), AxisMeta::new("y", "m", 0.0, 10.0),
        AxisMeta::new("x", "m", 0.0, 10.0)] }.write(&srm).unwrap();
    let err = plot(&srm, &png, &["--inline", "2", "--colormap", "gray", "--style", "wiggle"]);
    assert!(err.contains("srm depth image") && err.contains("y 20 m"), "{err}");
    // Semblance (non-negative): a sequential colour map, bar from 0 to the clip.
    let sem = dir.join("S.npy");
    let s: Vec<f32> = volume(n1, n2, ns).iter().map(|v| v.abs().min(1.0)).collect();
    write_npy(&sem, &s, &[n1 as u64, n2 as u64, ns as u64]).unwrap();
    let err = plot(&sem, &png, &["--inline", "4"]);
    assert!(err.contains("semblance"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn plot_refuses_bad_files_with_clear_errors() {
    let dir = tmp_dir("bad");
    let png = dir.join("bad.png");
    let t = gather();
    let good = dir.join("good.sgy");
    write_segy(&good, &t, &WriteOptions { format: SampleFormat::IeeeFloat, ..Default::default() }).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let tb = 240 + 4 * t.ns;
    let run = |p: &Path, extra: &[&str]| {
        let mut args = vec!["plot", p.to_str().unwrap(), "-o", png.to_str().unwrap()];
        args.extend_from_slice(extra);
        let (ok, err) = seisgpu(&args);
        assert!(!ok, "plot {} {extra:?} succeeded", p.display());
        assert!(!png.exists(), "no PNG is left behind");
        err
    };
    // Sample interval 0 in the binary header (and its rev 2 extended field) and every trace header.
    let mut b = bytes.clone();
    b[3216..3218].copy_from_slice(&[0, 0]);
    b[3272..3280].copy_from_slice(&f64::INFINITY.to_be_bytes());
    for i in 0..t.len() {
        b[3600 + i * tb + 116..3600 + i * tb + 118].copy_from_slice(&[0, 0]);
    }
    let p = dir.join("dt0.sgy");
    std::fs::write(&p, &b).unwrap();
    let err = run(&p, &[]);
    assert!(err.contains("dt0.sgy") && err.contains("interval"), "{err}");
    // No traces.
    let p = dir.join("empty.sgy");
    std::fs::write(&p, &bytes[..3600]).unwrap();
    let err = run(&p, &[]);
    assert!(err.contains("empty.sgy"), "{err}");
    // A huge sample count in the headers of a short file.
    let mut b = bytes.clone();
    b[3220..3222].copy_from_slice(&65535u16.to_be_bytes());
    b[3268..3272].copy_from_slice(&1_000_000i32.to_be_bytes());
    for i in 0..t.len() {
        b[3600 + i * tb + 114..3600 + i * tb + 116].copy_from_slice(&65535u16.to_be_bytes());
    }
    let p = dir.join("huge-ns.sgy");
    std::fs::write(&p, &b).unwrap();
    let err = run(&p, &[]);
    assert!(err.contains("huge-ns.sgy"), "{err}");
    // .npy: NaN values, a truncated file, a shape it cannot show, a bad sidecar, misplaced flags.
    let p = dir.join("nan.npy");
    let mut v = t.data.clone();
    v[7] = f32::NAN;
    write_npy(&p, &v, &[t.len() as u64, t.ns as u64]).unwrap();
    assert!(run(&p, &[]).contains("not finite"));
    let p = dir.join("five.npy");
    write_npy(&p, &[0.0; 32], &[2, 2, 2, 2, 2]).unwrap();
    assert!(run(&p, &[]).contains("[2, 2, 2, 2, 2]"));
    let p = dir.join("short.npy");
    write_npy(&p, &t.data, &[t.len() as u64, t.ns as u64]).unwrap();
    let b = std::fs::read(&p).unwrap();
    std::fs::write(&p, &b[..b.len() / 2]).unwrap();
    assert!(run(&p, &[]).contains("truncated"));
    let p = dir.join("sidecar.npy");
    write_npy(&p, &t.data, &[t.len() as u64, t.ns as u64]).unwrap();
    std::fs::write(dir.join("sidecar.npy.json"), r#"{"axes": [{"name": "trace"}, {"name": "time", "unit": "ms", "step": "inf"}]}"#).unwrap();
    assert!(run(&p, &[]).contains("sidecar.npy.json"));
    std::fs::write(dir.join("sidecar.npy.json"), r#"{"axes": [{"name": "trace"}, {"name": "time", "unit": "ms", "step": 1e300}]}"#).unwrap();
    assert!(run(&p, &[]).contains("axis 1 (time)"));
    assert!(run(&good, &["--inline", "3"]).contains("--inline"));
    assert!(run(&good, &["--agc=-5"]).contains("AGC window"));
    assert!(run(&dir.join("x.txt"), &[]).contains("unknown file type"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The commands' .npy images carry their sidecar, and plot reads its axes: ktm in two-way time,
/// srm (depth first) in depth, without a --layout.
#[test]
fn plot_reads_the_sidecars_the_commands_write() {
    use seisgpu_host::plot::npy::{npy_panel, Selection};
    let dir = tmp_dir("sidecars");
    let (diff, ktm, srm) = (dir.join("diff.sgy"), dir.join("ktm.npy"), dir.join("srm.npy"));
    let s = |p: &Path| p.to_str().unwrap().to_string();
    for args in [
        vec!["synth".to_string(), "diffractor".into(), "-o".into(), s(&diff), "--ns".into(), "150".into(), "--sources".into(), "3".into(),
            "--receivers".into(), "31".into()],
        ["ktm", "migrate", "--input", &s(&diff), "--nx", "21", "--ny", "2", "--ntau", "80", "--dx", "20", "--dy", "20", "-o", &s(&ktm)].map(String::from).to_vec(),
        ["srm", "--synthetic", "scatterer", "--fmax", "12", "--nz", "8", "--table-rows", "48", "--planes", "3", "-o", &s(&srm)].map(String::from).to_vec(),
    ] {
        let a: Vec<&str> = args.iter().map(|x| x.as_str()).collect();
        let (ok, err) = seisgpu(&a);
        assert!(ok, "{a:?}: {err}");
    }
    let k = npy_panel(&ktm, None, &Selection::default(), 1000, 1000).unwrap();
    assert_eq!((k.n_traces, k.n_samples, k.axes.time_label.as_str(), k.axes.trace_label.as_str(), k.axes.trace_step), (2, 80, "time (ms)", "y (m)", 20.0));
    assert!(k.what.contains("ktm") && !k.what.contains("assumed"), "{}", k.what);
    let z = npy_panel(&srm, None, &Selection::default(), 1000, 1000).unwrap();
    assert_eq!((z.n_samples, z.axes.time_label.as_str(), z.axes.trace_label.as_str()), (8, "depth (m)", "x (m)"));
    let png = dir.join("srm.png");
    plot(&srm, &png, &[]);
    check_png(&png, true);
    let _ = std::fs::remove_dir_all(&dir);
}
