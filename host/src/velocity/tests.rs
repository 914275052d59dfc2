//! Tests of the velocity models and their readers.

use super::*;
use crate::velocity::examples::{self, Example, ExampleParams};

fn tmp(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("seisgpu-velocity-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

fn err(spec: &str) -> String { format!("{:#}", VelocityModel::parse(spec).unwrap_err()) }

#[test]
fn constant_and_pairs() {
    let m = VelocityModel::parse("2000").unwrap();
    assert_eq!(m.sample_at(&Location::default(), 0.0, 0.5, 3), vec![2000.0; 3]);
    let m = VelocityModel::parse("0:1500, 0.8:2100,2.0:3000").unwrap();
    assert_eq!(m.domain(), Domain::Time);
    let v = m.sample_at(&Location::default(), -0.4, 0.4, 8);
    assert_eq!(v[0], 1500.0); // constant before the first knot
    assert_eq!(v[1], 1500.0);
    assert!((v[2] - 1800.0).abs() < 1e-3, "{v:?}");
    assert_eq!(v[3], 2100.0);
    assert!((v[5] - 2700.0).abs() < 1e-2);
    assert_eq!(v[7], 3000.0); // constant after the last
    let d = VelocityModel::parse("depth:0:1500,1000:2500").unwrap();
    assert_eq!(d.domain(), Domain::Depth);
    assert_eq!(d.function_at(&Location::default()).at(500.0), 2000.0);
    assert!(d.expect_domain(Domain::Time, "ktm").unwrap_err().to_string().contains("depth"));
}

#[test]
fn bad_arguments_say_what_is_wrong() {
    assert!(err("-1500").contains("-1500 m/s must be positive"), "{}", err("-1500"));
    assert!(err("0").contains("must be positive"));
    assert!(err("NaN").contains("NaN"));
    let e = err("0:1500,0.5:-2000");
    assert!(e.contains("pair 2") && e.contains("-2000"), "{e}");
    let e = err("0:1500,0.5:2000,0.5:2100");
    assert!(e.contains("must increase") && e.contains("pair 3"), "{e}");
    assert!(err("0:1500,x:2000").contains("`x`"));
    assert!(err("0:1500,,1:2000").contains("empty"));
    assert!(err("no-such-file.txt").contains("no such file"));
}

#[test]
fn text_functions_interpolate_in_cdp_and_position() {
    let text = "# units: time s, velocity m/s\n\
                cdp=100 x=0 y=0 0:1500 1.0:2500   # first\n\
                \n\
                cdp=120 x=500 y=0 0:1700 2.0:3700\n";
    let set = text::parse(text, "picks.txt", None).unwrap();
    let m = VelocityModel::PerCmp(set.clone());
    // CDP 110 is half-way: the mean of both functions, on the union of their knots.
    let f = m.function_at(&Location { cdp: Some(110), x: 0.0, y: 0.0 });
    assert_eq!(f.knots.iter().map(|k| k.0).collect::<Vec<_>>(), vec![0.0, 1.0, 2.0]);
    assert!((f.at(0.0) - 1600.0).abs() < 1e-3 && (f.at(1.0) - 2600.0).abs() < 1e-3 && (f.at(2.0) - 3100.0).abs() < 1e-3);
    // Beyond the ends: the nearest function.
    assert_eq!(m.function_at(&Location { cdp: Some(90), x: 0.0, y: 0.0 }), set.functions[0].function);
    assert_eq!(m.function_at(&Location { cdp: Some(500), x: 0.0, y: 0.0 }), set.functions[1].function);
    // Without a CDP number: by position along the line (x = 125 is a quarter of the way).
    let f = m.function_at(&Location::at(125.0, 40.0));
    assert!((f.at(0.0) - 1550.0).abs() < 1e-3, "{f:?}");
    // Round trip through the writer.
    let back = text::parse(&text::format(&set, &["a note".into()]), "again", None).unwrap();
    assert_eq!(back.functions, set.functions);
    // Depth files.
    let d = text::parse("# units: depth m\nx=0 0:1500 1000:2000\n", "d.txt", None).unwrap();
    assert_eq!(d.domain, Domain::Depth);
}

#[test]
fn bad_text_names_file_line_and_value() {
    let bad = |t: &str| format!("{:#}", text::parse(t, "v.txt", None).unwrap_err());
    let e = bad("cdp=1 0:1500\ncdp=2 0:1500 0.4:-1800\n");
    assert!(e.contains("v.txt:2") && e.contains("-1800"), "{e}");
    let e = bad("cdp=1 0:1500 0.5:1600 0.4:1700\n");
    assert!(e.contains("v.txt:1") && e.contains("increase"), "{e}");
    assert!(bad("cdp=1 0:NaN\n").contains("NaN"));
    assert!(bad("0:1500\n").contains("cdp= or x="));
    assert!(bad("cdp=1 0:1500\ncdp=1 0:1600\n").contains("CDP 1 has two"));
    assert!(bad("cdp=1 vel=3 0:1500\n").contains("unknown key"));
    assert!(bad("# nothing\n").contains("no velocity functions"));
}

#[test]
fn npy_grids_in_either_axis_order_read_alike() {
    // [x, y, t] and [z, y, x]-style orders of the same model give the same columns.
    let (nx, ny, nt) = (4usize, 3usize, 5usize);
    let val = |ix: usize, iy: usize, it: usize| 1500.0 + 100.0 * ix as f32 + 10.0 * iy as f32 + it as f32;
    let mut xyt = Vec::new();
    for ix in 0..nx { for iy in 0..ny { for it in 0..nt { xyt.push(val(ix, iy, it)); } } }
    let mut tyx = Vec::new();
    for it in 0..nt { for iy in 0..ny { for ix in 0..nx { tyx.push(val(ix, iy, it)); } } }
    let ax = |n: &str, o: f64, s: f64| GridAxis { name: n.into(), origin: o, step: s };
    let a = VelocityGrid::from_array(&[nx, ny, nt], &xyt, &[ax("x", 100.0, 25.0), ax("y", 0.0, 50.0), ax("t", 0.0, 0.004)], "a").unwrap();
    let b = VelocityGrid::from_array(&[nt, ny, nx], &tyx, &[ax("t", 0.0, 0.004), ax("y", 0.0, 50.0), ax("x", 100.0, 25.0)], "b").unwrap();
    assert_eq!(a, b);
    // Bilinear between nodes, nearest beyond.
    let f = a.function_at(100.0 + 12.5, 25.0);
    assert!((f.knots[0].1 - (1500.0 + 50.0 + 5.0)).abs() < 1e-3, "{:?}", f.knots[0]);
    assert_eq!(a.function_at(-1e6, -1e6).knots[2].1, val(0, 0, 2));
    // Through a file and its sidecar; without the sidecar an error says what is needed.
    let p = tmp("grid.npy");
    crate::io::npy::write_npy(&p, &xyt, &[nx as u64, ny as u64, nt as u64]).unwrap();
    let e = format!("{:#}", VelocityModel::parse(p.to_str().unwrap()).unwrap_err());
    assert!(e.contains("needs its axes") && e.contains("grid.npy.json"), "{e}");
    let axes = [ax("x", 100.0, 25.0), ax("y", 0.0, 50.0), ax("t", 0.0, 0.004)];
    assert_eq!(VelocityModel::open(p.to_str().unwrap(), Some(&axes)).unwrap(), VelocityModel::Grid(a.clone()));
    grid::write_npy_grid(&p, &a).unwrap();
    assert_eq!(VelocityModel::parse(p.to_str().unwrap()).unwrap(), VelocityModel::Grid(a));
    // Bad values name the node.
    let mut bad = xyt.clone();
    bad[7] = -5.0;
    let e = format!("{:#}", VelocityGrid::from_array(&[nx, ny, nt], &bad, &axes, "g.npy").unwrap_err());
    assert!(e.contains("g.npy") && e.contains("flat index 7") && e.contains("-5"), "{e}");
    let e = format!("{:#}", VelocityGrid::from_array(&[nx, ny, nt], &xyt, &[ax("x", 0.0, 1.0), ax("q", 0.0, 1.0), ax("t", 0.0, 1.0)], "g").unwrap_err());
    assert!(e.contains("`q`"), "{e}");
}

#[test]
fn examples_round_trip_through_every_format() {
    let p = ExampleParams { cmps: 9, ns: 200, ..Default::default() };
    let f = examples::functions(Example::Lateral, &p, 0.1);
    let g = examples::grid(Example::Lateral, &p);
    let t = examples::traces(Example::Lateral, &p);
    // v_rms grows with time and the lens slows the middle CMP.
    let col = examples::rms_column(Example::Lateral, &p, 0.5);
    assert!(col[0] == 1500.0 && col[199] > 1600.0);
    assert!(examples::rms_column(Example::Lateral, &p, 0.5)[190] < examples::rms_column(Example::Lateral, &p, 0.0)[190]);
    let txt = tmp("lateral.txt");
    text::write(&txt, &f, &[]).unwrap();
    let npy = tmp("lateral.npy");
    grid::write_npy_grid(&npy, &g).unwrap();
    let sgy = tmp("lateral.sgy");
    crate::io::segy::write_segy(&sgy, &t, &crate::io::segy::WriteOptions { format: crate::io::segy::SampleFormat::IeeeFloat, ..Default::default() }).unwrap();
    let at = Location { cdp: Some(5), x: 4.0 * 25.0, y: 0.0 };
    let want = col[150];
    for path in [&txt, &npy, &sgy] {
        let m = VelocityModel::parse(path.to_str().unwrap()).unwrap();
        let v = m.sample_at(&at, 150.0 * p.dt, p.dt, 1)[0];
        // The text file keeps knots every 0.1 s (and 0.1 m/s): linear between them.
        assert!((v - want).abs() < 2.0, "{}: {v} against {want}", path.display());
    }
}
