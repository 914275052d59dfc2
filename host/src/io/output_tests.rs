//! Tests of the trace and image writers.

use super::*;
use crate::io::segy::read_segy;

fn tmp(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("seisgpu-output-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d.join(name)
}

#[test]
fn format_by_extension_and_clear_errors() {
    assert_eq!(OutputFormat::from_path(Path::new("a/b.SGY")).unwrap(), OutputFormat::Segy);
    assert_eq!(OutputFormat::from_path(Path::new("b.segy")).unwrap(), OutputFormat::Segy);
    assert_eq!(OutputFormat::from_path(Path::new("b.su")).unwrap(), OutputFormat::Su);
    assert_eq!(OutputFormat::from_path(Path::new("b.npy")).unwrap(), OutputFormat::Npy);
    let e = OutputFormat::from_path(Path::new("out/x.txt")).unwrap_err().to_string();
    assert!(e.contains("out/x.txt") && e.contains(".txt") && e.contains(".sgy") && e.contains(".su") && e.contains(".npy"), "{e}");
    let e = OutputFormat::from_path(Path::new("image")).unwrap_err().to_string();
    assert!(e.contains("image") && e.contains("no extension"), "{e}");
}

#[test]
fn prepare_checks_the_folder_before_any_work() {
    let ok = tmp("fine.sgy");
    assert_eq!(prepare(&ok).unwrap(), OutputFormat::Segy);
    assert!(!ok.exists());
    let missing = tmp("no-such-folder").join("x.npy");
    let e = prepare(&missing).unwrap_err().to_string();
    assert!(e.contains("no-such-folder/x.npy") && e.contains("does not exist"), "{e}");
    let dir = tmp("a-folder.sgy");
    std::fs::create_dir_all(&dir).unwrap();
    assert!(prepare(&dir).unwrap_err().to_string().contains("is a folder"));
    assert!(prepare(Path::new("plain.npy")).is_ok());
}

#[test]
fn grid_headers_follow_the_data_order() {
    let g = Grid { nx: 2, ny: 3, x0: 500_000.0, y0: 6_000_000.0, dx: 12.5, dy: 25.0, class_offsets: vec![100.0, 300.0],
        order: TraceOrder::XYClass, inline_along_y: false };
    let h = g.headers();
    assert_eq!(h.len(), 12);
    // Trace 7: ix 1, iy 0, class 1.
    assert_eq!((h[7].sx, h[7].gy, h[7].offset, h[7].inline, h[7].crossline, h[7].cdp), (500_012.5, 6_000_000.0, 300.0, 2, 1, 4));
    let g = Grid { order: TraceOrder::ClassYX, inline_along_y: true, class_offsets: vec![], ..g };
    let h = g.headers();
    assert_eq!(h.len(), 6);
    assert_eq!((h[1].sx, h[1].sy, h[1].inline, h[1].crossline, h[1].cdp), (500_012.5, 6_000_000.0, 1, 2, 2));
}

#[test]
fn depth_image_round_trips_with_metres_as_milliseconds() {
    let g = Grid { nx: 3, ny: 2, x0: 1000.0, y0: 2000.0, dx: 10.0, dy: 20.0, class_offsets: vec![], order: TraceOrder::ClassYX,
        inline_along_y: true };
    let data: Vec<f32> = (0..6 * 5).map(|i| i as f32).collect();
    let img = GridImage { title: "test depth image".into(), grid: &g, axis: SampleAxis::Depth { n: 5, step: 12.5, first: 0.0 },
        data: &data, npy_shape: vec![2, 3, 5] };
    let p = tmp("depth.sgy");
    write_grid(&p, &img).unwrap();
    let (info, set) = read_segy(&p).unwrap();
    assert_eq!(info.binary.sample_interval, 12500);
    assert!(info.text.contains("DEPTH axis") && info.text.contains("1 ms = 1 m"), "{}", info.text);
    assert_eq!(set.data, data);
    assert_eq!(set.headers, g.headers());
    let s = tmp("depth.su");
    write_grid(&s, &img).unwrap();
    assert_eq!(crate::io::su::read_su(&s).unwrap().headers, g.headers());
    let n = tmp("depth.npy");
    write_grid(&n, &img).unwrap();
    assert_eq!(crate::io::npy::read_npy_f32(&n).unwrap().shape, vec![2u64, 3, 5]);
}

#[test]
fn slices_to_traces() {
    // (n 2, ny 1, nx 3): trace ix holds [z0, z1].
    assert_eq!(traces_from_slices(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 2, 1, 3), vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0]);
}

#[test]
fn textual_header_lines_fit_their_cards() {
    // UTM-sized grids and the longest titles: no line may be cut at the card's 76 characters.
    let g = Grid { nx: 1000, ny: 1000, x0: 431_000.125, y0: 6_700_000.375, dx: 12.5, dy: 37.5, class_offsets: vec![50.0; 12],
        order: TraceOrder::XYClass, inline_along_y: false };
    let data = vec![0f32; 0];
    let img = GridImage { title: "seisgpu pstm: prestack time migration image, TWO-WAY vertical time".into(), grid: &g,
        axis: SampleAxis::Depth { n: 1501, step: 12.5, first: 0.0 }, data: &data, npy_shape: vec![] };
    let text = img.segy_layout().1.text.unwrap();
    for line in text.lines() {
        assert!(line.chars().count() <= 76, "{line:?} is {} characters", line.chars().count());
    }
    let mut set = TraceSet::zeros(vec![TraceHeader::default(); 2], 4, 0.002);
    set.t0 = 0.104;
    let p = tmp("text.sgy");
    write_traces(&p, &set, "seisgpu nlbf enhance: traces enhanced by nonlinear beamforming").unwrap();
    let (info, _) = read_segy(&p).unwrap();
    let cards = info.text_cards();
    assert!(cards.iter().any(|c| c.ends_with("shot point 197 (scalar 201), delay 109")), "{cards:?}");
}
