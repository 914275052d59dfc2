//! The public entries' errors by kind, on generated fixtures: the variant, the parameter's name
//! and the message (the same text as before the errors were typed).

use super::*;
use crate::backend::Backend;
use crate::synth::{self, geometry};
use crate::TraceSet;

/// A 2-D line of 8 shots into 48 receivers, 150 samples of 4 ms, one diffractor.
fn line() -> TraceSet {
    let mut traces = TraceSet::zeros(geometry::line_2d(8, 100.0, 48, 25.0), 150, 0.004);
    synth::events::diffractor(&mut traces, 600.0, 0.0, 400.0, 2000.0, 25.0);
    traces
}

fn ktm_params() -> crate::ktm::Params {
    use crate::ktm::{ImageGrid, Params, Velocity};
    let grid = ImageGrid { x0: 0.0, dx: 25.0, nx: 49, y0: 0.0, dy: 25.0, ny: 1, tau0: 0.0, dtau: 0.004, ntau: 150 };
    Params::bare(grid, Velocity::Constant(2000.0))
}

/// The error's kind, parameter name and message, through the root of its context layers.
fn parts(e: &Error) -> (ErrorKind, Option<&str>, String) { (e.kind(), e.parameter_name(), e.to_string()) }

#[test]
fn ktm_errors_by_kind() {
    let mut p = ktm_params();
    p.grid.dx = -1.0;
    let e = crate::ktm::migrate(&line(), &p, &[Backend::Cpu]).unwrap_err();
    assert!(matches!(e, Error::Parameter { .. }), "{e:?}");
    assert_eq!(parts(&e), (ErrorKind::Parameter, Some("dx"), "image grid: inline spacing dx = -1 m must be positive".into()));

    let mut p = ktm_params();
    p.aperture.taper = 2.0;
    let e = crate::ktm::migrate(&line(), &p, &[Backend::Cpu]).unwrap_err();
    assert_eq!(parts(&e), (ErrorKind::Parameter, Some("taper"), "aperture taper 2 must be a fraction in [0, 1]".into()));

    let mut traces = line();
    traces.data[3 * traces.ns + 7] = f32::NAN;
    let e = crate::ktm::migrate(&traces, &ktm_params(), &[Backend::Cpu]).unwrap_err();
    assert!(matches!(e, Error::Input(_)), "{e:?}");
    assert_eq!(parts(&e), (ErrorKind::Input, None, "ktm input: trace 3 sample 7 is not finite".into()));

    let mut traces = line();
    traces.headers.iter_mut().for_each(|h| (h.sx, h.sy, h.gx, h.gy) = (0.0, 0.0, 0.0, 0.0));
    let e = crate::ktm::migrate(&traces, &ktm_params(), &[Backend::Cpu]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Input);
    assert!(e.to_string().contains("carry no source/receiver coordinates"), "{e}");

    let e = crate::ktm::migrate(&line(), &ktm_params(), &[]).unwrap_err();
    assert!(matches!(e, Error::Internal(_)), "{e:?}");
    assert_eq!(e.to_string(), "ktm: no device to migrate on");
    assert!(!e.is_usage());
}

fn pstm_params() -> crate::pstm::PstmParams {
    crate::pstm::PstmParams {
        nx: 49, ny: 1, x0: 0.0, y0: 0.0, dx: 25.0, dy: 25.0, nz: 150, tau0: 0.0, dtau: 0.004,
        noff: 1, offset0: 0.0, doffset: 5000.0, vrms: vec![2000.0; 150], eta: Vec::new(),
        aperture: 1000.0, stretch: 0.6, dynamic_max_step: 32, gpu: crate::pstm::GpuTuning::read_only_cache(),
    }
}

#[test]
fn pstm_errors_by_kind() {
    use crate::pstm::{migrate, TraveltimeMode, TraveltimeModel};
    let run = |traces: &TraceSet, p: &crate::pstm::PstmParams| {
        migrate(traces, p, TraveltimeMode::Exact, TraveltimeModel::Dsr, &[Backend::Cpu]).map(|_| ()).unwrap_err()
    };
    let e = run(&line(), &crate::pstm::PstmParams { aperture: -5.0, ..pstm_params() });
    assert_eq!(parts(&e), (ErrorKind::Parameter, Some("aperture"), "aperture = -5 m must be positive".into()));
    let e = run(&line(), &crate::pstm::PstmParams { vrms: vec![2000.0; 7], ..pstm_params() });
    assert_eq!(e.parameter_name(), Some("velocity"));
    assert!(e.to_string().starts_with("vrms has 7 values"), "{e}");

    let mut traces = line();
    traces.data[11] = f32::INFINITY;
    let e = run(&traces, &pstm_params());
    assert_eq!(parts(&e), (ErrorKind::Input, None, "input traces: trace 0 sample 11 is not finite".into()));
    assert!(e.is_usage());
}

#[test]
fn wavepacket_errors_by_kind() {
    use crate::wavepacket::fragments::Fragmented;
    use crate::wavepacket::{apps, Params};
    let params = Params::default();
    let e = Fragmented::new(&Backend::Cpu, [32, 32, 32], 8, 0, &params, false).err().unwrap();
    assert_eq!(parts(&e), (ErrorKind::Parameter, Some("cube"), "cube side 8 is too small (at least 16)".into()));
    let e = Fragmented::new(&Backend::Cpu, [32, 32, 32], 16, 12, &params, false).err().unwrap();
    assert_eq!(parts(&e), (ErrorKind::Parameter, Some("overlap"), "overlap 12 is more than half the cube side 16".into()));

    let job = Fragmented::new(&Backend::Cpu, [20, 20, 20], 16, 2, &params, false).unwrap();
    let mut vol = vec![0.0f32; 20 * 20 * 20];
    vol[(2 * 20 + 3) * 20 + 5] = f32::NAN;
    let e = job.forward(&vol).unwrap_err();
    assert_eq!(parts(&e), (ErrorKind::Input, None, "wave-packet forward: sample 5 of trace (2, 3) is not finite (NaN)".into()));

    let e = apps::denoise(&job, &vec![0.0; 8000], Some(1.0), -3.0).err().unwrap();
    assert_eq!(parts(&e), (ErrorKind::Parameter, Some("k"), "threshold factor k = -3 must be positive".into()));
    let e = apps::compress(&job, &vec![0.0; 8000], 1.5).err().unwrap();
    assert_eq!(e.parameter_name(), Some("ratio"));
}

#[test]
fn nlbf_errors_by_kind() {
    use crate::nlbf::{estimate, EstimateParams};
    let traces = crate::synth::noise_traces(geometry::line_2d(41, 25.0, 41, 25.0), 50, 0.004, 1);
    let params = crate::nlbf::synth::params_synthetic_2d();
    let e = estimate(&traces, &EstimateParams { window: 4, ..params.clone() }, &[Backend::Cpu]).err().unwrap();
    assert!(matches!(e, Error::Parameter { .. }), "{e:?}");
    assert_eq!(parts(&e), (ErrorKind::Parameter, Some("window"), "time window of 4 samples: it must be odd (centred on t0)".into()));
    let mut bad = params.clone();
    bad.search.a.step = -1.0;
    let e = estimate(&traces, &bad, &[Backend::Cpu]).err().unwrap();
    assert_eq!(parts(&e), (ErrorKind::Parameter, Some("a"), "search range of A: step -1 must be positive".into()));

    let mut nan = traces.clone();
    nan.data[3 * nan.ns + 7] = f32::NAN;
    let e = estimate(&nan, &params, &[Backend::Cpu]).err().unwrap();
    assert_eq!(parts(&e), (ErrorKind::Input, None, "input traces: trace 3 sample 7 is not finite".into()));

    let e = estimate(&traces, &params, &[]).err().unwrap();
    assert_eq!((e.kind(), e.to_string()), (ErrorKind::Internal, "nlbf: no device to search on".into()));
}

/// A GPU error under context and inside a failed work item keeps its kind and its whole text.
#[test]
fn gpu_errors_keep_their_context() {
    let raw = anyhow::Error::new(GpuError::NoDevice).context("GPU migration");
    let text = format!("{raw:#}");
    assert_eq!(ErrorKind::of(&raw), ErrorKind::Gpu);
    let e = Error::classify(raw);
    assert!(matches!(e.root(), Error::Gpu(GpuError::NoDevice)), "{e:?}");
    assert_eq!(e.to_string(), "GPU migration");
    assert_eq!(format!("{:#}", anyhow::Error::new(e)), text);

    let item = WorkError { device: 1, item: 3, source: anyhow::Error::new(GpuError::NoDevice).context("cube 3") };
    let raw = anyhow::Error::new(item).context("wave-packet forward");
    let text = format!("{raw:#}");
    let e = Error::classify(raw);
    assert_eq!(e.kind(), ErrorKind::Gpu);
    assert_eq!(ErrorKind::Gpu.exit_code(), 1);
    assert_eq!(format!("{:#}", anyhow::Error::new(e)), text);
}

/// A parameter error raised in the internals and given context on its way up is found again, and
/// prints as before.
#[test]
fn classification_keeps_the_chain() {
    let inner: anyhow::Error = Error::parameter("dx", "image grid: inline spacing dx = -1 m must be positive").into();
    let raw = inner.context("planning the migration");
    let text = format!("{raw:#}");
    assert_eq!(ErrorKind::of(&raw), ErrorKind::Parameter);
    let e = Error::classify(raw);
    assert!(matches!(&e, Error::Context { message, .. } if message == "planning the migration"), "{e:?}");
    assert_eq!(e.parameter_name(), Some("dx"));
    assert_eq!(ErrorKind::Parameter.exit_code(), 2);
    assert_eq!(format!("{:#}", anyhow::Error::new(e)), text);
    assert_eq!(text, "planning the migration: image grid: inline spacing dx = -1 m must be positive");

    // Untyped chains stay Internal, with every layer.
    let raw = anyhow::anyhow!("root cause").context("outer");
    let e = Error::classify(raw);
    assert!(matches!(e, Error::Internal(_)));
    // `{:#}` of the error itself prints the chain as anyhow's does; `{}` the outer layer only.
    assert_eq!((format!("{e:#}"), format!("{e}")), ("outer: root cause".to_string(), "outer".to_string()));
    assert_eq!(format!("{:#}", anyhow::Error::new(e)), "outer: root cause");
    let typed = Error::classify(anyhow::Error::new(Error::Parameter { name: "dx".into(), reason: "dx = -1 m".into() }).context("image grid"));
    assert_eq!(format!("{typed:#}"), "image grid: dx = -1 m");
}

#[test]
fn io_errors_by_kind() {
    let path = std::env::temp_dir().join(format!("seisgpu-error-missing-{}.sgy", std::process::id()));
    let segy = crate::io::segy::read_segy(&path).err().unwrap();
    let text = segy.to_string();
    let e = Error::from(segy);
    assert_eq!(e.kind(), ErrorKind::Io);
    assert_eq!(e.to_string(), text);
    assert!(text.starts_with(&path.display().to_string()), "{text}");

    let raw = anyhow::Error::new(std::io::Error::new(std::io::ErrorKind::PermissionDenied, "denied")).context("writing image.sgy");
    let e = Error::classify(raw);
    assert!(matches!(e.root(), Error::Io { path: None, .. }), "{e:?}");
    assert_eq!(format!("{:#}", anyhow::Error::new(e)), "writing image.sgy: denied");
}

/// A file in a fresh temporary folder of this test process.
fn tmp_file(name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("seisgpu-error-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, bytes).unwrap();
    path
}

/// The kind and full text of an internal (`anyhow`) error, as an entry classifies it.
fn classified(e: anyhow::Error) -> (ErrorKind, Option<String>, String) {
    let kind = ErrorKind::of(&e);
    let e = Error::classify(e);
    assert_eq!(e.kind(), kind, "{e:?}");
    (kind, e.parameter_name().map(str::to_string), format!("{e:#}"))
}

#[test]
fn npy_files_that_are_not_npy_are_input_errors() {
    use crate::io::npy;
    let garbage = tmp_file("garbage.npy", b"this is not a numpy file at all");
    let (kind, _, text) = classified(npy::read_f32(&garbage).unwrap_err());
    assert_eq!(kind, ErrorKind::Input);
    assert!(text.contains(&garbage.display().to_string()) && text.contains("is not a .npy file"), "{text}");

    // A good header over too few bytes: truncated.
    let good = tmp_file("good.npy", b"");
    npy::write_npy(&good, &[1.0; 12], &[3, 4]).unwrap();
    let bytes = std::fs::read(&good).unwrap();
    let short = tmp_file("short.npy", &bytes[..bytes.len() - 8]);
    let (kind, _, text) = classified(npy::read_f32(&short).unwrap_err());
    assert_eq!(kind, ErrorKind::Input);
    assert!(text.contains(&short.display().to_string()) && text.contains("truncated"), "{text}");

    // The magic and a header length, then a dictionary npyz cannot parse.
    let mut bad_dict = b"\x93NUMPY\x01\x00\x16\x00".to_vec();
    bad_dict.extend_from_slice(b"{'descr': nonsense }  \n");
    let bad_dict = tmp_file("bad-dict.npy", &bad_dict);
    let (kind, _, text) = classified(npy::read_npy_f32(&bad_dict).unwrap_err());
    assert_eq!(kind, ErrorKind::Input, "{text}");
    assert!(text.contains(&bad_dict.display().to_string()), "{text}");

    // Another dtype.
    let ints = tmp_file("ints.npy", b"");
    npy::write_npy_f64(&ints, &[1.0; 4], &[4]).unwrap();
    let mut b = std::fs::read(&ints).unwrap();
    let at = b.windows(3).position(|w| w == b"<f8").unwrap();
    b[at + 1..at + 3].copy_from_slice(b"i8");
    std::fs::write(&ints, &b).unwrap();
    let (kind, _, text) = classified(npy::read_npy_f32(&ints).unwrap_err());
    assert_eq!(kind, ErrorKind::Input);
    assert!(text.contains("dtype '<i8' is not supported"), "{text}");

    // A file that is not there stays an I/O failure.
    let missing = garbage.with_file_name("missing.npy");
    assert_eq!(classified(npy::read_f32(&missing).unwrap_err()).0, ErrorKind::Io);
}

#[test]
fn velocity_files_and_arguments_by_kind() {
    use crate::velocity::{Domain, VelocityModel};
    let file = tmp_file("vel.txt", b"# seisgpu velocity functions\ncdp=1 0.0:1500 0.5:1800\ncdp=2 0.0:1500 0.4:abc\n");
    let (kind, name, text) = classified(VelocityModel::parse(file.to_str().unwrap()).unwrap_err());
    assert_eq!((kind, name), (ErrorKind::Input, None));
    assert!(text.contains(&file.display().to_string()) && text.contains("`abc`"), "{text}");

    let twice = tmp_file("twice.txt", b"cdp=1 0.0:1500\ncdp=1 0.0:1600\n");
    assert_eq!(classified(VelocityModel::parse(twice.to_str().unwrap()).unwrap_err()).0, ErrorKind::Input);

    // A grid without its axes.
    let grid = tmp_file("grid.npy", b"");
    crate::io::npy::write_npy(&grid, &[2000.0; 6], &[2, 3]).unwrap();
    let (kind, _, text) = classified(VelocityModel::parse(grid.to_str().unwrap()).unwrap_err());
    assert_eq!(kind, ErrorKind::Input);
    assert!(text.contains("needs its axes"), "{text}");

    // The argument itself: the `velocity` parameter.
    for spec in ["0:2000,0.5:-3", "0:2000,0:2500", "", "-5", "no-such-velocity-file.txt"] {
        let (kind, name, text) = classified(VelocityModel::parse(spec).unwrap_err());
        assert_eq!((kind, name.as_deref()), (ErrorKind::Parameter, Some("velocity")), "{spec}: {text}");
    }
    let m = VelocityModel::parse("depth:0:1500,1000:2500").unwrap();
    let (kind, name, _) = classified(m.expect_domain(Domain::Time, "ktm --velocity").unwrap_err());
    assert_eq!((kind, name.as_deref()), (ErrorKind::Parameter, Some("velocity")));
}

#[test]
fn ktm_velocity_that_misses_the_image_names_velocity() {
    let mut p = ktm_params();
    p.velocity = crate::ktm::Velocity::Function { t0: 0.0, dt: 0.1, v: vec![2000.0; 3] };
    let e = crate::ktm::migrate(&line(), &p, &[Backend::Cpu]).unwrap_err();
    assert_eq!(e.parameter_name(), Some("velocity"), "{e:#}");
    assert!(e.to_string().contains("does not cover the image"), "{e}");
}

#[test]
fn wavepacket_files_and_frames_by_kind() {
    let bad = tmp_file("coeffs.wpc", b"definitely not coefficients");
    let (kind, _, text) = classified(crate::wavepacket::coeffs_io::read_coeffs(&bad).unwrap_err());
    assert_eq!(kind, ErrorKind::Input);
    assert!(text.contains(&bad.display().to_string()), "{text}");
    let tiny = tmp_file("tiny.wpc", b"ab");
    assert_eq!(classified(crate::wavepacket::coeffs_io::read_coeffs(&tiny).unwrap_err()).0, ErrorKind::Input);

    let flat = tmp_file("flat.npy", b"");
    crate::io::npy::write_npy(&flat, &[0.0; 6], &[2, 3]).unwrap();
    assert_eq!(classified(crate::wavepacket::coeffs_io::read_volume(&flat).unwrap_err()).0, ErrorKind::Input);

    // More scales than a cube of 16 resolves.
    let params = crate::wavepacket::Params { frame: crate::wavepacket::FrameParams { scales: 9, ..Default::default() }, ..Default::default() };
    let e = crate::wavepacket::fragments::Fragmented::new(&Backend::Cpu, [16, 16, 16], 16, 0, &params, false).err().unwrap();
    assert_eq!(e.parameter_name(), Some("scales"), "{e:#}");
}

#[test]
fn plot_output_gain_and_sidecar_checks_by_kind() {
    use crate::plot::Clip;
    let (kind, name, _) = classified(Clip::Percentile(0.0).validate().unwrap_err());
    assert_eq!((kind, name.as_deref()), (ErrorKind::Parameter, Some("clip-percentile")));
    let (_, name, _) = classified(Clip::Value(-1.0).validate().unwrap_err());
    assert_eq!(name.as_deref(), Some("clip"));

    let (kind, name, text) = classified(crate::io::output::OutputFormat::from_path(std::path::Path::new("image.txt")).unwrap_err());
    assert_eq!((kind, name.as_deref()), (ErrorKind::Parameter, Some("output")));
    assert!(text.contains("image.txt"), "{text}");

    let (kind, name, _) = classified(crate::gain::agc_rms_cpu(&[0.0; 10], 3, 1).unwrap_err());
    assert_eq!((kind, name.as_deref()), (ErrorKind::Parameter, Some("ns")));

    let meta = crate::io::sidecar::ArrayMeta { description: None, axes: vec![crate::io::sidecar::AxisMeta::new("x", "m", 0.0, -1.0)] };
    let (kind, _, text) = classified(meta.validate("image.npy.json", 1).unwrap_err());
    assert_eq!(kind, ErrorKind::Input);
    assert!(text.starts_with("image.npy.json: axis 0"), "{text}");
}

#[test]
fn srm_parameters_and_cube_headers_by_kind() {
    let p = crate::srm::SrmParams { fmin: 30.0, fmax: 10.0, ..Default::default() };
    let e = p.validate(0.004).unwrap_err();
    assert_eq!(parts(&e), (ErrorKind::Parameter, Some("fmin"), "frequency band [30 Hz, 10 Hz]: need 0 < fmin < fmax".into()));
    let p = crate::srm::SrmParams { aperture: -1.0, ..Default::default() };
    assert_eq!(p.validate(0.004).unwrap_err().parameter_name(), Some("aperture"));

    // Traces without inline/crossline numbers cannot be placed in a cube.
    let mut headers = line().headers;
    headers[2].inline = 0;
    headers[2].crossline = 0;
    let (kind, _, text) = classified(crate::io::cube::CubeGrid::from_headers(&headers, "cube.sgy").err().unwrap());
    assert_eq!(kind, ErrorKind::Input);
    assert!(text.contains("cube.sgy: trace 2 has no inline/crossline numbers"), "{text}");
}
