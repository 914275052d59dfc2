//! The image grid a migration takes from its data when the user gives none: the extent of the
//! traces' CDP positions (their own CDP coordinates where the headers carry them, else the
//! source-receiver midpoints), binned at the data's CDP spacing, and the traces' time axis.
//! Shared by `ktm migrate` and `pstm migrate`; also the checks that a run reaches its image at all.


use crate::traces::TraceHeader;

/// The image grid of the migrations (KTM, PSTM): inline x, crossline y (m, in the trace
/// coordinates' frame, axis-aligned), columns at (x0 + ix dx, y0 + iy dy), two-way vertical times
/// tau0 + it dtau (s).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ImageGrid {
    pub x0: f64,
    pub dx: f64,
    pub nx: usize,
    pub y0: f64,
    pub dy: f64,
    pub ny: usize,
    pub tau0: f32,
    pub dtau: f32,
    pub ntau: usize,
}

/// The grid the user asked for: each `None` is taken from the data.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct GridRequest {
    pub x0: Option<f64>,
    pub dx: Option<f64>,
    pub nx: Option<usize>,
    pub y0: Option<f64>,
    pub dy: Option<f64>,
    pub ny: Option<usize>,
    pub tau0: Option<f32>,
    pub dtau: Option<f32>,
    pub ntau: Option<usize>,
}

impl GridRequest {
    /// Whether every field is given (nothing to take from the data).
    pub fn is_complete(&self) -> bool {
        self.x0.is_some() && self.dx.is_some() && self.nx.is_some() && self.y0.is_some() && self.dy.is_some() && self.ny.is_some()
            && self.tau0.is_some() && self.dtau.is_some() && self.ntau.is_some()
    }
    /// The request with every missing field from `d`.
    pub fn or(&self, d: &ImageGrid) -> ImageGrid {
        ImageGrid { x0: self.x0.unwrap_or(d.x0), dx: self.dx.unwrap_or(d.dx), nx: self.nx.unwrap_or(d.nx), y0: self.y0.unwrap_or(d.y0),
            dy: self.dy.unwrap_or(d.dy), ny: self.ny.unwrap_or(d.ny), tau0: self.tau0.unwrap_or(d.tau0),
            dtau: self.dtau.unwrap_or(d.dtau), ntau: self.ntau.unwrap_or(d.ntau) }
    }
}

/// Most image columns a default grid has (4M: a 2000 x 2000 survey at its bin size); larger
/// extents get coarser bins, and the printed grid says so.
pub const MAX_DEFAULT_COLUMNS: usize = 1 << 22;

impl ImageGrid {
    /// One line for the user: the grid and where it came from.
    pub fn describe(&self, how: &str) -> String {
        format!("image grid from the data ({how}): x {:.1}..{:.1} m every {:.2} m ({} columns), y {:.1}..{:.1} m every {:.2} m ({}), \
            tau {:.3}..{:.3} s every {} ms ({} samples); set --x0/--dx/--nx, --y0/--dy/--ny, --tau0/--dtau/--ntau to choose it",
            self.x0, self.x0 + (self.nx - 1) as f64 * self.dx, self.dx, self.nx, self.y0, self.y0 + (self.ny - 1) as f64 * self.dy,
            self.dy, self.ny, self.tau0, self.tau0 + (self.ntau - 1) as f32 * self.dtau, self.dtau * 1e3, self.ntau)
    }
}

/// Refuses traces that carry no source/receiver coordinates (every one zero): a migration needs
/// them. `who` names the command in the message.
pub fn require_coordinates(headers: &[TraceHeader], who: &str) -> anyhow::Result<()> {
    crate::ensure_input!(!headers.is_empty(), "{who}: no input traces");
    if headers.iter().all(|h| h.sx == 0.0 && h.sy == 0.0 && h.gx == 0.0 && h.gy == 0.0) {
        crate::bail_input!("{who}: the {} trace headers carry no source/receiver coordinates (all zero); migration needs sx, sy, gx, gy \
               (SEG-Y bytes 73-88 with the scalar of bytes 71-72)", headers.len());
    }
    if let Some(i) = headers.iter().position(|h| ![h.sx, h.sy, h.gx, h.gy].iter().all(|c| c.is_finite())) {
        crate::bail_input!("{who}: trace {i} has a coordinate that is not finite");
    }
    Ok(())
}

/// The grid over the data: the CDP positions' extent binned at their spacing (see
/// [`bin_size`]), the traces' times (`ns` samples of `dt` from `t0`, from time 0 at the
/// earliest). Returns the grid and how the bin size was found (for the printed line).
pub fn from_data(headers: &[TraceHeader], ns: usize, dt: f32, t0: f32) -> anyhow::Result<(ImageGrid, String)> {
    let (tau0, ntau) = time_axis(headers, ns, dt, t0)?;
    let pos: Vec<(f64, f64)> = headers.iter().map(|h| h.cdp_position()).collect();
    let (xmin, xmax) = pos.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (ymin, ymax) = pos.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let (mut bin, mut how) = bin_size(headers, &pos);
    let count = |extent: f64, d: f64| (extent / d + 0.5).floor() as usize + 1;
    while count(xmax - xmin, bin) * count(ymax - ymin, bin) > MAX_DEFAULT_COLUMNS {
        bin *= 1.25;
        how = format!("{how}, coarsened to stay under {MAX_DEFAULT_COLUMNS} columns");
    }
    let g = ImageGrid { x0: xmin, dx: bin, nx: count(xmax - xmin, bin), y0: ymin, dy: bin, ny: count(ymax - ymin, bin), tau0, dtau: dt, ntau };
    Ok((g, how))
}

/// Image times from 0 (or the record's start when it is later) to the record's end: the first
/// time and the count, at the sample interval; the traces checked to have coordinates and a time
/// axis first.
fn time_axis(headers: &[TraceHeader], ns: usize, dt: f32, t0: f32) -> anyhow::Result<(f32, usize)> {
    require_coordinates(headers, "image grid")?;
    crate::ensure_input!(ns >= 1 && dt > 0.0 && dt.is_finite(), "image grid: traces of {ns} samples at {dt} s have no time axis");
    let tau0 = t0.max(0.0);
    let t_end = t0 + (ns - 1) as f32 * dt;
    Ok((tau0, (((t_end - tau0) / dt).floor() as usize + 1).max(1)))
}

/// The grid of `req` with every missing field from the data ([`from_data`]), and the line to
/// print when any was missing (`None` when the user gave the whole grid).
pub fn complete(req: &GridRequest, traces: &crate::traces::TraceSet) -> anyhow::Result<(ImageGrid, Option<String>)> {
    complete_from_headers(req, &traces.headers, traces.ns, traces.dt, traces.t0)
}

/// [`complete`] from the headers and the sampling alone (an MPI rank before it reads its traces).
pub fn complete_from_headers(req: &GridRequest, headers: &[TraceHeader], ns: usize, dt: f32, t0: f32)
    -> anyhow::Result<(ImageGrid, Option<String>)> {
    if req.is_complete() {
        return Ok((req.or(&ImageGrid { x0: 0.0, dx: 1.0, nx: 1, y0: 0.0, dy: 1.0, ny: 1, tau0: 0.0, dtau: 1.0, ntau: 1 }), None));
    }
    let given_xy = req.x0.is_some() && req.dx.is_some() && req.nx.is_some() && req.y0.is_some() && req.dy.is_some() && req.ny.is_some();
    let (d, how) = if given_xy {
        // Only the time axis is missing: no bin from the positions (a nearest-neighbour search over
        // every trace, tens of ms for tens of thousands of traces).
        let (tau0, ntau) = time_axis(headers, ns, dt, t0)?;
        (ImageGrid { x0: 0.0, dx: 1.0, nx: 1, y0: 0.0, dy: 1.0, ny: 1, tau0, dtau: dt, ntau }, "the traces' time axis".to_string())
    } else {
        from_data(headers, ns, dt, t0)?
    };
    let mut g = req.or(&d);
    // A bin size given without a count: the count that covers the data at that size.
    let cover = |given: Option<usize>, lo: f64, extent: f64, d: f64| given.unwrap_or(((lo + extent) / d + 0.5).floor().max(0.0) as usize + 1);
    g.nx = cover(req.nx, d.x0 - g.x0, (d.nx - 1) as f64 * d.dx, g.dx);
    g.ny = cover(req.ny, d.y0 - g.y0, (d.ny - 1) as f64 * d.dy, g.dy);
    if req.ntau.is_none() {
        let t_end = d.tau0 + (d.ntau - 1) as f32 * d.dtau;
        g.ntau = (((t_end - g.tau0) / g.dtau).floor().max(0.0) as usize) + 1;
    }
    Ok((g, Some(g.describe(&how))))
}

/// The CDP (bin) spacing of the data (m) and how it was found: from the CDP numbers where the
/// headers number the CDPs (the distance between the positions of CDPs whose numbers differ by
/// one; on a 3-D survey, of neighbouring inline/crossline cells, the smaller of the two
/// directions), else from the positions alone (the median distance from each distinct position to
/// its nearest neighbour, positions closer than 0.5 m counting as one).
pub fn bin_size(headers: &[TraceHeader], pos: &[(f64, f64)]) -> (f64, String) {
    use std::collections::HashMap;
    let median = |mut v: Vec<f64>| -> Option<f64> {
        v.retain(|d| *d > 0.1 && d.is_finite());
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(v[v.len() / 2])
    };
    // Mean position per key.
    let centres = |key: &dyn Fn(&TraceHeader) -> (i64, i64)| -> HashMap<(i64, i64), (f64, f64)> {
        let mut sum: HashMap<(i64, i64), (f64, f64, f64)> = HashMap::new();
        for (h, p) in headers.iter().zip(pos) {
            let e = sum.entry(key(h)).or_insert((0.0, 0.0, 0.0));
            *e = (e.0 + p.0, e.1 + p.1, e.2 + 1.0);
        }
        sum.into_iter().map(|(k, (x, y, n))| (k, (x / n, y / n))).collect()
    };
    let steps = |c: &HashMap<(i64, i64), (f64, f64)>, step: (i64, i64)| -> Vec<f64> {
        c.iter().filter_map(|(k, p)| c.get(&(k.0 + step.0, k.1 + step.1)).map(|q| (p.0 - q.0).hypot(p.1 - q.1))).collect()
    };
    let distinct = |f: &dyn Fn(&TraceHeader) -> i32| {
        let mut v: Vec<i32> = headers.iter().map(f).collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    };
    if distinct(&|h| h.inline) > 1 && distinct(&|h| h.crossline) > 1 {
        let c = centres(&|h| (h.inline as i64, h.crossline as i64));
        let (il, xl) = (median(steps(&c, (0, 1))), median(steps(&c, (1, 0))));
        if let Some(b) = match (il, xl) { (Some(a), Some(b)) => Some(a.min(b)), (a, b) => a.or(b) } {
            return (b, format!("bins of {b:.2} m from the inline/crossline numbers"));
        }
    }
    if distinct(&|h| h.cdp) > 1 {
        let c = centres(&|h| (h.cdp as i64, 0));
        if let Some(b) = median(steps(&c, (1, 0))) {
            return (b, format!("bins of {b:.2} m from the CDP numbers"));
        }
    }
    // Distinct positions (to 0.5 m), each one's nearest neighbour through a hash of cells.
    let mut pts: Vec<(i64, i64)> = pos.iter().map(|p| ((p.0 * 2.0).round() as i64, (p.1 * 2.0).round() as i64)).collect();
    pts.sort_unstable();
    pts.dedup();
    if pts.len() < 2 {
        return (25.0, "one CDP position: bins of 25 m".into());
    }
    let pts: Vec<(f64, f64)> = pts.iter().map(|&(x, y)| (x as f64 * 0.5, y as f64 * 0.5)).collect();
    let (xmin, xmax) = pts.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (ymin, ymax) = pts.iter().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), p| (a.min(p.1), b.max(p.1)));
    // Cells about the mean spacing of the points over their extent (a line: its length / count).
    let (w, h) = ((xmax - xmin).max(0.5), (ymax - ymin).max(0.5));
    let n = pts.len() as f64;
    let cell = if w.min(h) <= 1.0 { w.max(h) / n } else { (w * h / n).sqrt() }.max(0.5) * 2.0;
    let key = |p: &(f64, f64)| (((p.0 - xmin) / cell).floor() as i64, ((p.1 - ymin) / cell).floor() as i64);
    let mut cells: HashMap<(i64, i64), Vec<usize>> = HashMap::new();
    for (i, p) in pts.iter().enumerate() {
        cells.entry(key(p)).or_default().push(i);
    }
    let nearest: Vec<f64> = pts.iter().enumerate().filter_map(|(i, p)| {
        let (cx, cy) = key(p);
        let mut best = f64::INFINITY;
        for dx in -1..=1 {
            for dy in -1..=1 {
                for &j in cells.get(&(cx + dx, cy + dy)).map(|v| v.as_slice()).unwrap_or(&[]) {
                    if j != i {
                        best = best.min((p.0 - pts[j].0).hypot(p.1 - pts[j].1));
                    }
                }
            }
        }
        best.is_finite().then_some(best)
    }).collect();
    match median(nearest) {
        Some(b) => (b, format!("bins of {b:.2} m from the midpoint spacing")),
        None => {
            let b = (w.max(h) / n).max(1.0);
            (b, format!("bins of {b:.2} m from the midpoints' extent"))
        }
    }
}

/// Distance (m) from a point to the rectangle [x0, x1] x [y0, y1] (0 inside).
pub fn distance_to_rect(p: (f64, f64), (x0, x1): (f64, f64), (y0, y1): (f64, f64)) -> f64 {
    let ex = (x0 - p.0).max(0.0).max(p.0 - x1);
    let ey = (y0 - p.1).max(0.0).max(p.1 - y1);
    ex.hypot(ey)
}

/// Errors when no trace can put energy into the image: the shortest two-way traveltime from any
/// trace's source to the image area and back to its receiver, straight rays at `vmax` (the
/// fastest velocity of the model, m/s), is past the end of the record (`t_end`, s). This is a
/// lower bound of every traveltime the migration computes, so nothing would be summed: the image
/// grid is far from the data (the message gives both extents). `who` names the command.
pub fn check_record_reaches(headers: &[TraceHeader], used: impl Fn(usize) -> bool + Sync, x: (f64, f64), y: (f64, f64), vmax: f64,
    t_end: f64, who: &str) -> anyhow::Result<()> {
    use rayon::prelude::*;
    // In parallel: this runs before every migration (450,000 traces at paper size).
    let tmin = headers.par_iter().enumerate().filter(|(i, _)| used(*i))
        .map(|(_, h)| (distance_to_rect((h.sx, h.sy), x, y) + distance_to_rect((h.gx, h.gy), x, y)) / vmax)
        .reduce(|| f64::INFINITY, f64::min);
    if tmin > t_end {
        let mid = headers.iter().enumerate().filter(|(i, _)| used(*i)).map(|(_, h)| h.cdp_position());
        let (mx0, mx1, my0, my1) = mid.fold((f64::INFINITY, f64::NEG_INFINITY, f64::INFINITY, f64::NEG_INFINITY),
            |(a, b, c, d), p| (a.min(p.0), b.max(p.0), c.min(p.1), d.max(p.1)));
        crate::bail_param!("x0", "{who}: no trace reaches the image: the shortest traveltime from a trace to the image area is {tmin:.2} s at \
               {vmax:.0} m/s, past the record's end at {t_end:.2} s. The image spans x {:.1}..{:.1} m, y {:.1}..{:.1} m; the \
               data's midpoints x {mx0:.1}..{mx1:.1} m, y {my0:.1}..{my1:.1} m: leave out --x0/--y0 (and --nx/--ny) to image \
               over the data", x.0, x.1, y.0, y.1);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(x0: f64, y0: f64, shots: usize, ds: f64, chans: usize, dg: f64) -> Vec<TraceHeader> {
        let mut h = Vec::new();
        for s in 0..shots {
            for c in 0..chans {
                let sx = x0 + s as f64 * ds;
                h.push(TraceHeader { sx, sy: y0, gx: sx + 100.0 + c as f64 * dg, gy: y0, ..Default::default() });
            }
        }
        h
    }

    #[test]
    fn a_line_at_utm_coordinates_gets_a_grid_over_its_midpoints() {
        let h = line(451_000.0, 6_780_000.0, 10, 50.0, 24, 25.0);
        let (g, how) = from_data(&h, 500, 0.004, 0.0).unwrap();
        assert!(how.contains("midpoint spacing"), "{how}");
        assert!((g.dx - 12.5).abs() < 1e-9, "{g:?}");
        assert!((g.x0 - 451_050.0).abs() < 1e-6 && g.ny == 1 && (g.y0 - 6_780_000.0).abs() < 1e-6, "{g:?}");
        let last = g.x0 + (g.nx - 1) as f64 * g.dx;
        assert!((last - (451_000.0 + 450.0 + 50.0 + 23.0 * 12.5)).abs() < 1e-6, "{g:?}");
        assert_eq!((g.tau0, g.dtau, g.ntau), (0.0, 0.004, 500));
    }

    #[test]
    fn a_grid_given_in_x_and_y_takes_only_the_time_axis_from_the_data() {
        let h = line(451_000.0, 6_780_000.0, 10, 50.0, 24, 25.0);
        let req = GridRequest { x0: Some(451_100.0), dx: Some(20.0), nx: Some(7), y0: Some(6_780_000.0), dy: Some(20.0), ny: Some(1),
            ..Default::default() };
        let (g, line) = complete_from_headers(&req, &h, 500, 0.004, 0.1).unwrap();
        // The time axis as with the bin from the data too.
        let (d, _) = complete_from_headers(&GridRequest { x0: None, ..req }, &h, 500, 0.004, 0.1).unwrap();
        assert_eq!(g, ImageGrid { x0: 451_100.0, dx: 20.0, nx: 7, y0: 6_780_000.0, dy: 20.0, ny: 1, tau0: d.tau0, dtau: d.dtau, ntau: d.ntau });
        assert!(line.unwrap().contains("the traces' time axis"));
        // A time step given without a count: the count that covers the record, as from the whole grid.
        let coarse = GridRequest { dtau: Some(0.008), ..req };
        let whole = GridRequest { x0: None, ..coarse };
        let ((a, _), (b, _)) = (complete_from_headers(&coarse, &h, 500, 0.004, 0.1).unwrap(), complete_from_headers(&whole, &h, 500, 0.004, 0.1).unwrap());
        assert_eq!((a.tau0, a.dtau, a.ntau), (b.tau0, b.dtau, b.ntau));
        let mut zero = h.clone();
        zero.iter_mut().for_each(|t| (t.sx, t.gx, t.sy, t.gy) = (0.0, 0.0, 0.0, 0.0));
        assert!(complete_from_headers(&req, &zero, 500, 0.004, 0.0).unwrap_err().to_string().contains("no source/receiver coordinates"));
    }

    #[test]
    fn cdp_numbers_and_inline_crossline_numbers_give_the_bin() {
        // CDP numbered every 12.5 m along x, with some scatter of the midpoints.
        let mut h = line(1000.0, 0.0, 6, 50.0, 16, 25.0);
        for t in h.iter_mut() {
            t.cdp = ((t.midpoint().0 - 1000.0) / 12.5).round() as i32 + 100;
        }
        let (b, how) = bin_size(&h, &h.iter().map(|t| t.midpoint()).collect::<Vec<_>>());
        assert!((b - 12.5).abs() < 1e-9 && how.contains("CDP numbers"), "{b} {how}");
        // A 3-D grid of 20 x 10 m cells numbered by inline and crossline.
        let mut h = Vec::new();
        for il in 0..5 {
            for xl in 0..7 {
                let (x, y) = (500.0 + xl as f64 * 20.0, 800.0 + il as f64 * 10.0);
                h.push(TraceHeader { sx: x - 50.0, gx: x + 50.0, sy: y, gy: y, inline: il + 1, crossline: xl + 1, ..Default::default() });
            }
        }
        let (g, how) = from_data(&h, 100, 0.002, 0.0).unwrap();
        assert!(how.contains("inline/crossline") && (g.dx - 10.0).abs() < 1e-9, "{how} {g:?}");
        assert_eq!((g.nx, g.ny), (13, 5));
    }

    #[test]
    fn traces_without_coordinates_and_far_grids_are_refused() {
        let h = vec![TraceHeader::default(); 5];
        let e = require_coordinates(&h, "pstm").unwrap_err().to_string();
        assert!(e.contains("pstm") && e.contains("no source/receiver coordinates"), "{e}");
        let h = line(451_000.0, 6_780_000.0, 2, 50.0, 4, 25.0);
        let e = check_record_reaches(&h, |_| true, (0.0, 400.0), (0.0, 400.0), 3000.0, 2.0, "ktm").unwrap_err().to_string();
        assert!(e.contains("no trace reaches the image") && e.contains("451050"), "{e}");
        assert!(check_record_reaches(&h, |_| true, (451_000.0, 451_400.0), (6_780_000.0, 6_780_000.0), 3000.0, 2.0, "ktm").is_ok());
        // Only the traces taken part count.
        assert!(check_record_reaches(&h, |i| i > 100, (451_000.0, 451_400.0), (6_780_000.0, 6_780_000.0), 3000.0, 2.0, "ktm").is_err());
    }
}
