//! Panels cut out of .npy arrays: 2-D sections (traces, samples), 3-D volumes by inline,
//! crossline or time slice, 4-D images with a class (or offset) axis summed or picked. The axes'
//! names and spacing come from the array's sidecar ([`crate::io::sidecar`]) or a `--layout`;
//! without either, the last axis is time in samples.
//!
//! Only the values shown are read: the file is read in runs along its last axis, so a panel of a
//! volume larger than memory costs the panel plus one run.

use std::fs::File;
use std::path::Path;

use anyhow::Context;

use super::Axes;
use crate::io::sidecar::{ArrayMeta, AxisMeta};

/// Which panel of a 3-D or 4-D array to show (at most one of inline, crossline, time slice).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    /// Index along the first horizontal axis: a section across the second.
    pub inline: Option<usize>,
    /// Index along the second horizontal axis: a section across the first.
    pub crossline: Option<usize>,
    /// A map view at this time (ms; m for a depth axis)...
    pub time_slice: Option<f64>,
    /// ... or at this sample index of the vertical axis.
    pub sample: Option<usize>,
    /// Index along the class (or offset) axis of a 4-D array; `None`: their sum.
    pub class: Option<usize>,
}

/// A panel ready for [`super::render_png`]: trace-major values, axes, and what it shows.
#[derive(Debug, Clone)]
pub struct Panel {
    pub data: Vec<f32>,
    pub n_traces: usize,
    pub n_samples: usize,
    pub axes: Axes,
    /// What it is, for the title ("inline 40 of volume", "semblance panel", ...).
    pub what: String,
}

/// Most values read at once along the last axis.
const RUN: usize = 1 << 20;

/// Names of a vertical (time or depth) axis.
fn is_vertical(name: &str) -> bool { matches!(name, "time" | "tau" | "t" | "twt" | "depth" | "z" | "sample" | "samples") }
/// Names of the axis a 4-D array is stacked over.
fn is_stack(name: &str) -> bool { matches!(name, "class" | "classes" | "offset" | "offsets" | "noff" | "offset class") }

/// What the outputs of this project hold, by file name, where no sidecar says it.
fn known_output(stem: &str) -> Option<&'static str> {
    Some(match stem {
        "S" => "semblance",
        "A" | "B" | "C" | "D" | "E" => "NLBF traveltime coefficient",
        "enhanced" => "enhanced traces",
        "input" => "input traces",
        _ => return None,
    })
}

/// The array's header: shape, value size, byte order, and where its data start.
struct NpyHead {
    shape: Vec<usize>,
    size: usize,
    big: bool,
    fortran: bool,
    data_at: u64,
}

/// The header through [`crate::io::npy::open`] (its checks: a .npy file holding every value it
/// announces), with the float layout the runs decode.
fn read_head(path: &Path) -> anyhow::Result<(File, NpyHead)> {
    let (f, h) = crate::io::npy::open(path)?;
    let (size, big) = h.float(path)?;
    Ok((f, NpyHead { shape: h.shape, size, big, fortran: h.fortran, data_at: h.data_at as u64 }))
}

/// Reads values by runs: from the file (C order) or, for Fortran-order arrays, from memory.
enum Source {
    File { f: File, head: NpyHead, bytes: Vec<u8> },
    Memory(Vec<f32>),
}

impl Source {
    fn run(&mut self, flat: usize, len: usize, out: &mut Vec<f32>, path: &Path) -> anyhow::Result<()> {
        out.clear();
        match self {
            Source::Memory(v) => out.extend_from_slice(&v[flat..flat + len]),
            Source::File { f, head, bytes } => {
                use std::os::unix::fs::FileExt;
                bytes.resize(len * head.size, 0);
                f.read_exact_at(bytes, head.data_at + (flat * head.size) as u64).with_context(|| format!("reading {}", path.display()))?;
                let big = head.big;
                if head.size == 4 {
                    out.extend(bytes.chunks_exact(4).map(|b| {
                        let b = [b[0], b[1], b[2], b[3]];
                        if big { f32::from_be_bytes(b) } else { f32::from_le_bytes(b) }
                    }));
                } else {
                    out.extend(bytes.chunks_exact(8).map(|b| {
                        let b: [u8; 8] = b.try_into().expect("8 bytes");
                        (if big { f64::from_be_bytes(b) } else { f64::from_le_bytes(b) }) as f32
                    }));
                }
            }
        }
        Ok(())
    }
}

/// Axis names, units and spacing: from `--layout` (names), the sidecar (all), or the shape.
/// Returns the axes and whether the layout was assumed.
fn describe_axes(path: &Path, shape: &[usize], layout: Option<&str>) -> anyhow::Result<(Vec<AxisMeta>, Option<String>, bool)> {
    let meta = ArrayMeta::read(path)?;
    if let Some(m) = &meta {
        m.validate(&crate::io::sidecar::sidecar_path(path).display().to_string(), shape.len())?;
    }
    let description = meta.as_ref().and_then(|m| m.description.clone());
    if let Some(l) = layout {
        let names: Vec<String> = l.split(',').map(|s| s.trim().to_lowercase()).collect();
        if names.len() != shape.len() || names.iter().any(|n| n.is_empty()) {
            crate::bail_param!("layout", "{}: --layout {l} names {} axes; the array has shape {shape:?}", path.display(), names.len());
        }
        // Spacing from the sidecar where it has one, names from the layout.
        let axes = names.iter().enumerate().map(|(k, n)| match &meta {
            Some(m) => AxisMeta { name: n.clone(), ..m.axes[k].clone() },
            None => AxisMeta::index(n),
        }).collect();
        return Ok((axes, description, false));
    }
    if let Some(m) = meta {
        return Ok((m.axes, description, false));
    }
    let names: &[&str] = match shape.len() {
        2 => &["trace", "sample"],
        3 if shape[2] == 2 => crate::bail_input!("{}: shape {shape:?} looks like a plane of complex values (re, im), not a volume; \
            give --layout if it is one", path.display()),
        3 => &["inline", "crossline", "sample"],
        4 => &["class", "x", "y", "sample"],
        _ => crate::bail_input!("{}: cannot interpret an array of shape {shape:?} as a section or volume (2-D traces x samples, 3-D n1 x n2 x samples, \
            4-D classes x nx x ny x samples); give --layout or a sidecar", path.display()),
    };
    Ok((names.iter().map(|n| AxisMeta::index(n)).collect(), description, shape.len() > 2))
}

fn plural(name: &str) -> String { if name.ends_with('s') { format!("{name}es") } else { format!("{name}s") } }

fn label(a: &AxisMeta) -> String {
    match a.unit.as_deref() {
        Some(u) if u == "s" && is_vertical(&a.name) => format!("{} (ms)", a.name),
        Some(u) if !u.is_empty() => format!("{} ({u})", a.name),
        _ => a.name.clone(),
    }
}

/// (origin, step) in plotted units: seconds become ms.
fn coords(a: &AxisMeta) -> (f64, f64) {
    if a.unit.as_deref() == Some("s") && is_vertical(&a.name) { (a.origin * 1e3, a.step * 1e3) } else { (a.origin, a.step) }
}

fn index_label(a: &AxisMeta, k: usize) -> String {
    let (o, s) = coords(a);
    match a.unit.as_deref() {
        Some(u) if !u.is_empty() => format!("{} {} {} (index {k})", a.name, super::format_tick(o + s * k as f64), if u == "s" { "ms" } else { u }),
        _ => format!("{} {k}", a.name),
    }
}

/// Cuts the panel chosen by `sel` out of the .npy array at `path`, at most `max_traces` traces
/// of `max_samples` samples (evenly decimated beyond).
pub fn npy_panel(path: &Path, layout: Option<&str>, sel: &Selection, max_traces: usize, max_samples: usize) -> anyhow::Result<Panel> {
    let (f, head) = read_head(path)?;
    let shape = head.shape.clone();
    let (axes_meta, description, assumed) = describe_axes(path, &shape, layout)?;
    let nd = shape.len();
    if !(2..=4).contains(&nd) {
        crate::bail_input!("{}: cannot plot an array of shape {shape:?} ({nd} axes; 2 to 4 can be plotted)", path.display());
    }
    if let Some(k) = shape.iter().position(|&d| d == 0) {
        crate::bail_input!("{}: shape {shape:?} is empty along axis {k}: nothing to plot", path.display());
    }
    let verticals: Vec<usize> = (0..nd).filter(|&k| is_vertical(&axes_meta[k].name)).collect();
    let v = match verticals[..] {
        [] => nd - 1,
        [k] => k,
        _ => crate::bail_input!("{}: axes {verticals:?} are all named as time/depth; one vertical axis expected", path.display()),
    };
    let others: Vec<usize> = (0..nd).filter(|&k| k != v).collect();
    let stack = (nd == 4).then(|| others.iter().copied().find(|&k| is_stack(&axes_meta[k].name)).unwrap_or(others[0]));
    let horiz: Vec<usize> = others.iter().copied().filter(|&k| Some(k) != stack).collect();
    let name = path.file_name().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let mut what = vec![description.or_else(|| known_output(&stem).map(String::from)).unwrap_or_else(|| match nd {
        2 => "section".into(),
        3 => "volume".into(),
        _ => "image".into(),
    })];

    // pinned: (axis, index); across and down: the panel's axes.
    let mut pinned: Vec<(usize, usize)> = Vec::new();
    let check = |axis: usize, k: usize, flag: &str| -> anyhow::Result<usize> {
        if k >= shape[axis] {
            crate::bail_param!(flag.trim_start_matches('-'), "{}: {flag} {k} is outside axis {axis} ({}, {} long) of shape {shape:?}", path.display(), axes_meta[axis].name, shape[axis]);
        }
        Ok(k)
    };
    let chosen = [sel.inline.is_some(), sel.crossline.is_some(), sel.time_slice.is_some() || sel.sample.is_some()].iter().filter(|b| **b).count();
    if chosen > 1 || (sel.time_slice.is_some() && sel.sample.is_some()) {
        crate::bail_param!(if sel.time_slice.is_some() && sel.sample.is_some() { "sample" } else { "inline" }, "choose one of --inline, --crossline, --time-slice and --sample");
    }
    let (across, down) = if nd == 2 {
        if chosen > 0 {
            crate::bail_param!(if sel.inline.is_some() { "inline" } else if sel.crossline.is_some() { "crossline" } else if sel.time_slice.is_some() { "time-slice" } else { "sample" }, "{}: a 2-D array of shape {shape:?} is one section; --inline/--crossline/--time-slice/--sample choose within volumes", path.display());
        }
        (horiz[0], v)
    } else if let Some(k) = sel.crossline {
        pinned.push((horiz[1], check(horiz[1], k, "--crossline")?));
        what.push(index_label(&axes_meta[horiz[1]], k));
        (horiz[0], v)
    } else if sel.time_slice.is_some() || sel.sample.is_some() {
        let k = match (sel.time_slice, sel.sample) {
            (Some(t), _) => {
                let (o, s) = coords(&axes_meta[v]);
                let k = ((t - o) / s).round();
                if axes_meta[v].unit.is_none() {
                    crate::bail_param!("time-slice", "{}: the {} axis is in samples (no sidecar gives its interval): use --sample K instead of --time-slice", path.display(), axes_meta[v].name);
                }
                if !(k >= 0.0 && k < shape[v] as f64) {
                    crate::bail_param!("time-slice", "{}: --time-slice {t} is outside the {} axis ({} .. {} {})", path.display(), axes_meta[v].name,
                        super::format_tick(o), super::format_tick(o + s * (shape[v] - 1) as f64), match axes_meta[v].unit.as_deref() { Some("s") => "ms", Some(u) => u, None => "" });
                }
                k as usize
            }
            (None, Some(k)) => check(v, k, "--sample")?,
            _ => unreachable!("one of the two is set"),
        };
        pinned.push((v, k));
        what.push(format!("slice at {}", index_label(&axes_meta[v], k)));
        // A map view: the second horizontal axis across, the first down.
        (horiz[1], horiz[0])
    } else {
        let k = match sel.inline {
            Some(k) => check(horiz[0], k, "--inline")?,
            None => shape[horiz[0]] / 2,
        };
        pinned.push((horiz[0], k));
        what.push(format!("{}{}", index_label(&axes_meta[horiz[0]], k), if sel.inline.is_none() { " (middle)" } else { "" }));
        (horiz[1], v)
    };
    match (stack, sel.class) {
        (Some(c), Some(k)) => {
            pinned.push((c, check(c, k, "--class")?));
            what.push(format!("{} {k} of {}", axes_meta[c].name, shape[c]));
        }
        (Some(c), None) => what.push(format!("sum of {} {}", shape[c], plural(&axes_meta[c].name))),
        (None, Some(_)) => crate::bail_param!("class", "{}: --class picks along the class axis of a 4-D image; shape {shape:?} has none", path.display()),
        (None, None) => {}
    }
    let (na, nd_) = (shape[across], shape[down]);
    let (sa, sd) = (na.div_ceil(max_traces.max(1)), nd_.div_ceil(max_samples.max(1)));
    let (pa, pd) = (na.div_ceil(sa), nd_.div_ceil(sd));
    if sa > 1 {
        what.push(format!("every {sa} traces"));
    }
    if assumed {
        what.push(format!("axes assumed ({})", axes_meta.iter().map(|a| a.name.as_str()).collect::<Vec<_>>().join(", ")));
    }

    // The index lists of every axis, then an odometer over all but the last, reading runs of it.
    let lists: Vec<Vec<usize>> = (0..nd).map(|k| {
        if let Some(&(_, i)) = pinned.iter().find(|(a, _)| *a == k) {
            vec![i]
        } else if k == across {
            (0..na).step_by(sa).collect()
        } else if k == down {
            (0..nd_).step_by(sd).collect()
        } else {
            (0..shape[k]).collect() // the stack axis, summed
        }
    }).collect();
    let mut strides = vec![1usize; nd];
    for k in (0..nd - 1).rev() {
        strides[k] = strides[k + 1] * shape[k + 1];
    }
    let mut src = if head.fortran {
        Source::Memory(crate::io::npy::read_npy_f32(path)?.data)
    } else {
        Source::File { f, head, bytes: Vec::new() }
    };
    let mut data = vec![0.0f32; pa * pd];
    let last = nd - 1;
    let mut pos = vec![0usize; nd]; // position in each axis's list
    let mut run = Vec::new();
    'outer: loop {
        let base: usize = (0..last).map(|k| lists[k][pos[k]] * strides[k]).sum();
        // The wanted indices of the last axis, read in runs of at most RUN values (single values
        // where they lie far apart): memory stays bounded whatever the axis's length.
        let want = &lists[last];
        let sparse = want.len() > 1 && want[1] - want[0] > 64;
        let mut p = 0;
        while p < want.len() {
            let start = want[p];
            let end = if sparse { start + 1 } else { (start + RUN).min(want[want.len() - 1] + 1) };
            src.run(base + start, end - start, &mut run, path)?;
            while p < want.len() && want[p] < end {
                let mut at = pos.clone();
                at[last] = p;
                data[at[across] * pd + at[down]] += run[want[p] - start];
                p += 1;
            }
        }
        for k in (0..last).rev() {
            pos[k] += 1;
            if pos[k] < lists[k].len() {
                continue 'outer;
            }
            pos[k] = 0;
        }
        break;
    }
    if let Some(i) = data.iter().position(|x| !x.is_finite()) {
        crate::bail_input!("{}: the panel's trace {} sample {} is not finite ({}): the array holds NaN or infinite values", path.display(), i / pd, i % pd, data[i]);
    }
    let (to, ts) = coords(&axes_meta[down]);
    let (xo, xs) = coords(&axes_meta[across]);
    let axes = Axes {
        t0: to, dt: ts * sd as f64, time_label: label(&axes_meta[down]),
        first_trace: xo, trace_step: xs * sa as f64, trace_label: label(&axes_meta[across]), trace_values: None,
    };
    let what = format!("{name}: {}", what.join(", "));
    Ok(Panel { data, n_traces: pa, n_samples: pd, axes, what })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::npy::write_npy;
    use crate::io::sidecar::AxisMeta;

    fn tmp(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("seisgpu-plot-npy-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join(name)
    }

    /// value = 1000 a + 100 b + 10 c + d (shape up to 10 per axis), so every panel value names its place.
    fn coded(shape: &[usize]) -> Vec<f32> {
        let n: usize = shape.iter().product();
        (0..n).map(|mut i| {
            let mut v = 0.0;
            let mut w = 1.0;
            for &d in shape.iter().rev() {
                v += (i % d) as f32 * w;
                i /= d;
                w *= 10.0;
            }
            v
        }).collect()
    }

    #[test]
    fn sections_of_a_volume_read_the_right_values() {
        let p = tmp("vol.npy");
        write_npy(&p, &coded(&[4, 5, 6]), &[4, 5, 6]).unwrap();
        let sel = |i, x, s| Selection { inline: i, crossline: x, sample: s, ..Default::default() };
        let a = npy_panel(&p, None, &sel(Some(2), None, None), 100, 100).unwrap();
        assert_eq!((a.n_traces, a.n_samples), (5, 6));
        assert_eq!(a.data[3 * 6 + 4], 234.0);
        assert!(a.what.contains("inline 2") && a.what.contains("axes assumed"), "{}", a.what);
        let b = npy_panel(&p, None, &sel(None, Some(1), None), 100, 100).unwrap();
        assert_eq!((b.n_traces, b.data[3 * 6 + 5]), (4, 315.0));
        let c = npy_panel(&p, None, &sel(None, None, Some(5)), 100, 100).unwrap();
        // Map view: crosslines across, inlines down.
        assert_eq!((c.n_traces, c.n_samples, c.data[4 * 4 + 3]), (5, 4, 345.0));
        // Default: the middle inline; decimation keeps every 2nd trace and sample.
        let d = npy_panel(&p, None, &Selection::default(), 3, 3).unwrap();
        assert_eq!((d.n_traces, d.n_samples, d.data[1 * 3 + 2]), (3, 3, 224.0));
        assert_eq!((d.axes.trace_step, d.axes.dt), (2.0, 2.0));
        let e = npy_panel(&p, None, &sel(Some(4), None, None), 100, 100).unwrap_err().to_string();
        assert!(e.contains("--inline 4") && e.contains("[4, 5, 6]"), "{e}");
    }

    #[test]
    fn long_traces_read_in_bounded_runs() {
        let p = tmp("long.npy");
        for (ns, max_samples) in [(20_000usize, 100usize), (1_100_000, 2_000_000)] {
            let n = 2 * 2 * ns;
            write_npy(&p, &(0..n).map(|i| i as f32).collect::<Vec<_>>(), &[2, 2, ns as u64]).unwrap();
            let a = npy_panel(&p, None, &Selection::default(), 100, max_samples).unwrap();
            let step = ns.div_ceil(max_samples);
            assert_eq!((a.n_traces, a.n_samples, a.axes.dt), (2, ns.div_ceil(step), step as f64));
            for (j, k) in [(0, 0), (1, 3), (1, a.n_samples - 1)] {
                assert_eq!(a.data[j * a.n_samples + k], (2 * ns + j * ns + k * step) as f32, "ns {ns} trace {j} sample {k}");
            }
        }
    }

    #[test]
    fn a_ktm_image_sums_or_picks_classes_and_a_depth_first_image_follows_its_sidecar() {
        let p = tmp("ktm.npy");
        write_npy(&p, &coded(&[3, 4, 5, 6]), &[3, 4, 5, 6]).unwrap();
        let s = npy_panel(&p, None, &Selection { inline: Some(1), ..Default::default() }, 100, 100).unwrap();
        assert_eq!(s.data[2 * 6 + 3], 3.0 * 123.0 + 1000.0 * (0.0 + 1.0 + 2.0));
        assert!(s.what.contains("sum of 3 classes"), "{}", s.what);
        let c = npy_panel(&p, None, &Selection { inline: Some(1), class: Some(2), ..Default::default() }, 100, 100).unwrap();
        assert_eq!(c.data[2 * 6 + 3], 2123.0);
        // pstm: (nx, ny, noff, nz), offsets summed by name.
        let o = npy_panel(&p, Some("x,y,offset,time"), &Selection { inline: Some(2), ..Default::default() }, 100, 100).unwrap();
        assert_eq!((o.n_traces, o.n_samples), (4, 6));
        assert_eq!(o.data[3 * 6 + 1], (0..5).map(|k| 2301.0 + 10.0 * k as f32).sum::<f32>());
        assert!(o.what.contains("sum of 5 offsets"), "{}", o.what);
        // srm: (nz, ny, nx), depth first, 5 m samples.
        let q = tmp("srm.npy");
        write_npy(&q, &coded(&[6, 3, 4]), &[6, 3, 4]).unwrap();
        ArrayMeta { description: Some("srm depth image".into()), axes: vec![AxisMeta::new("depth", "m", 0.0, 5.0), AxisMeta::new("y", "m", 0.0, 10.0),
            AxisMeta::new("x", "m", 100.0, 10.0)] }.write(&q).unwrap();
        let z = npy_panel(&q, None, &Selection { inline: Some(1), ..Default::default() }, 100, 100).unwrap();
        assert_eq!((z.n_traces, z.n_samples, z.data[3 * 6 + 4]), (4, 6, 413.0));
        assert_eq!((z.axes.time_label.as_str(), z.axes.dt, z.axes.first_trace), ("depth (m)", 5.0, 100.0));
        assert!(z.what.contains("srm depth image") && z.what.contains("y 10 m"), "{}", z.what);
        // --layout instead of a sidecar.
        let l = npy_panel(&q, Some("depth,y,x"), &Selection { crossline: Some(2), ..Default::default() }, 100, 100).unwrap();
        assert_eq!((l.n_traces, l.data[1 * 6 + 5]), (3, 512.0));
        assert!(npy_panel(&q, Some("a,b"), &Selection::default(), 9, 9).unwrap_err().to_string().contains("[6, 3, 4]"));
    }

    #[test]
    fn arrays_it_cannot_interpret_are_errors_naming_the_shape() {
        let p = tmp("odd.npy");
        write_npy(&p, &[0.0; 24], &[2, 3, 2, 2, 1]).unwrap();
        assert!(npy_panel(&p, None, &Selection::default(), 9, 9).unwrap_err().to_string().contains("[2, 3, 2, 2, 1]"));
        write_npy(&p, &[0.0; 8], &[8]).unwrap();
        assert!(npy_panel(&p, None, &Selection::default(), 9, 9).unwrap_err().to_string().contains("[8]"));
        write_npy(&p, &[0.0; 12], &[2, 3, 2]).unwrap();
        assert!(npy_panel(&p, None, &Selection::default(), 9, 9).unwrap_err().to_string().contains("complex"));
        write_npy(&p, &[0.0; 6], &[2, 3]).unwrap();
        assert!(npy_panel(&p, None, &Selection { inline: Some(0), ..Default::default() }, 9, 9).is_err());
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 4]).unwrap();
        assert!(npy_panel(&p, None, &Selection::default(), 9, 9).unwrap_err().to_string().contains("truncated"));
        std::fs::write(&p, b"nonsense").unwrap();
        assert!(npy_panel(&p, None, &Selection::default(), 9, 9).is_err());
    }
}
