//! Post-stack cubes from SEG-Y trace sets: traces placed on the (inline, crossline) grid given by
//! their headers. Missing traces are zero-filled and reported, so interpolation can fill them.

use crate::traces::{TraceHeader, TraceSet};

/// A regular cube, `data[(il * n_xl + xl) * ns + t]` (time fastest).
#[derive(Debug, Clone)]
pub struct Cube {
    pub data: Vec<f32>,
    /// (inlines, crosslines, samples).
    pub shape: [usize; 3],
    pub first_inline: i32,
    pub first_crossline: i32,
    /// Grid cells with no trace (zero-filled).
    pub missing: usize,
}

/// Places every trace at its (inline, crossline) header position. Errors name the trace when its
/// numbers are missing (both zero) or when two traces claim one position.
pub fn cube_from_traces(set: &TraceSet, what: &str) -> anyhow::Result<Cube> {
    set.validate(what).map_err(crate::error::Error::Input)?;
    let grid = CubeGrid::from_headers(&set.headers, what)?;
    let ns = set.ns;
    let mut data = vec![0.0f32; grid.cells() * ns];
    for (i, &cell) in grid.cell_of.iter().enumerate() {
        data[cell * ns..(cell + 1) * ns].copy_from_slice(set.trace(i));
    }
    Ok(Cube { data, shape: [grid.inlines, grid.crosslines, ns], first_inline: grid.first_inline,
        first_crossline: grid.first_crossline, missing: grid.missing })
}

/// Where the traces of a post-stack SEG-Y cube go, from their headers alone: the (inline,
/// crossline) grid and each trace's cell (`inline index * crosslines + crossline index`).
pub struct CubeGrid {
    pub inlines: usize,
    pub crosslines: usize,
    pub first_inline: i32,
    pub first_crossline: i32,
    /// The cell of every trace, in trace order.
    pub cell_of: Vec<usize>,
    /// Cells without a trace.
    pub missing: usize,
}

impl CubeGrid {
    /// The grid of the traces' headers; errors name the trace (no inline/crossline numbers, a
    /// repeated cell) or the grid (far larger than the traces present).
    pub fn from_headers(headers: &[TraceHeader], what: &str) -> anyhow::Result<CubeGrid> {
        crate::ensure_input!(!headers.is_empty(), "{what}: no traces");
        if let Some(i) = headers.iter().position(|h| h.inline == 0 && h.crossline == 0) {
            crate::bail_input!("{what}: trace {i} has no inline/crossline numbers (bytes 189 and 193 are zero)");
        }
        let (il0, il1) = headers.iter().fold((i32::MAX, i32::MIN), |(a, b), h| (a.min(h.inline), b.max(h.inline)));
        let (xl0, xl1) = headers.iter().fold((i32::MAX, i32::MIN), |(a, b), h| (a.min(h.crossline), b.max(h.crossline)));
        // Spans in i64: numbers at the ends of the i32 range overflow an i32 difference.
        let (nil, nxl) = (il1 as i64 - il0 as i64 + 1, xl1 as i64 - xl0 as i64 + 1);
        crate::ensure_input!((nil as u128) * (nxl as u128) <= 64 * headers.len() as u128,
            "{what}: inlines {il0}..{il1} x crosslines {xl0}..{xl1} (bytes 189 and 193, or their --bytes) is far larger than the {} traces \
             present", headers.len());
        let (nil, nxl) = (nil as usize, nxl as usize);
        let mut filled = vec![false; nil * nxl];
        let mut cell_of = Vec::with_capacity(headers.len());
        for (i, h) in headers.iter().enumerate() {
            let cell = (h.inline as i64 - il0 as i64) as usize * nxl + (h.crossline as i64 - xl0 as i64) as usize;
            crate::ensure_input!(!filled[cell], "{what}: trace {i} repeats inline {} crossline {}", h.inline, h.crossline);
            filled[cell] = true;
            cell_of.push(cell);
        }
        let missing = filled.iter().filter(|f| !**f).count();
        Ok(CubeGrid { inlines: nil, crosslines: nxl, first_inline: il0, first_crossline: xl0, cell_of, missing })
    }

    pub fn cells(&self) -> usize { self.inlines * self.crosslines }
}

/// Rows (inline indices, the cube's first axis) of a post-stack SEG-Y (or SU) cube, reading only
/// their traces: every trace header is read and the traces chosen ([`super::input::choose_traces`]:
/// `--select`, non-seismic traces) are placed ([`CubeGrid`]), `rows_of(shape)` names the rows
/// wanted, and those rows' traces are read run by run of consecutive trace numbers (an MPI rank's
/// slab). Returns the cube's shape, the rows' samples (missing cells zero) and the cube's count of
/// missing cells. A sample that is not finite is named by its trace number.
pub fn read_cube_rows(path: &std::path::Path, opts: &super::input::ReadOptions,
    rows_of: impl FnOnce([usize; 3]) -> anyhow::Result<std::ops::Range<usize>>) -> anyhow::Result<([usize; 3], Vec<f32>, usize)> {
    use anyhow::Context;
    let what = path.display().to_string();
    let (mut r, headers, choice) = super::input::choose_traces(path, opts)?;
    let ns = r.info().ns;
    let chosen: Vec<TraceHeader> = choice.indices.iter().map(|&i| headers[i]).collect();
    let grid = CubeGrid::from_headers(&chosen, &what)?;
    let shape = [grid.inlines, grid.crosslines, ns];
    let rows = rows_of(shape)?;
    anyhow::ensure!(rows.start <= rows.end && rows.end <= grid.inlines, "{what}: rows {rows:?} of {} inlines", grid.inlines);
    let (lo, hi) = (rows.start * grid.crosslines, rows.end * grid.crosslines);
    // (index into the chosen traces, trace number in the file) of the traces in the rows.
    let wanted: Vec<(usize, usize)> = choice.indices.iter().enumerate().filter(|&(k, _)| (lo..hi).contains(&grid.cell_of[k]))
        .map(|(k, &i)| (k, i)).collect();
    let mut slab = vec![0.0f32; (hi - lo) * ns];
    for run in wanted.chunk_by(|a, b| b.1 == a.1 + 1) {
        let (first, last) = (run[0].1, run[run.len() - 1].1);
        let part = r.read_range(first as u64, run.len() as u64).with_context(|| format!("reading traces {first}..{} of {what}", last + 1))?;
        for (j, &(k, i)) in run.iter().enumerate() {
            let tr = part.trace(j);
            if let Some(s) = tr.iter().position(|v| !v.is_finite()) {
                crate::bail_input!("{what}: trace {i} sample {s} is not finite ({})", tr[s]);
            }
            let cell = grid.cell_of[k] - lo;
            slab[cell * ns..(cell + 1) * ns].copy_from_slice(tr);
        }
    }
    Ok((shape, slab, grid.missing))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traces::TraceHeader;

    #[test]
    fn places_traces_and_counts_holes() {
        let h: Vec<TraceHeader> = [(10, 5), (10, 6), (11, 6)]
            .iter()
            .map(|&(il, xl)| TraceHeader { inline: il, crossline: xl, ..Default::default() })
            .collect();
        let mut set = TraceSet::zeros(h, 3, 0.004);
        set.data.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32 + 1.0);
        let c = cube_from_traces(&set, "t.sgy").unwrap();
        assert_eq!(c.shape, [2, 2, 3]);
        assert_eq!(c.missing, 1);
        assert_eq!(&c.data[9..12], &[7.0, 8.0, 9.0]);
        assert_eq!(&c.data[6..9], &[0.0, 0.0, 0.0]);
        set.headers[2] = set.headers[1];
        assert!(cube_from_traces(&set, "t.sgy").unwrap_err().to_string().contains("trace 2 repeats"));
    }

    #[test]
    fn extreme_inline_numbers_are_an_error_not_an_overflow() {
        let h = |il, xl| TraceHeader { inline: il, crossline: xl, ..Default::default() };
        for hs in [vec![h(i32::MIN, 1), h(i32::MAX, 1)], vec![h(1, i32::MIN), h(1, i32::MAX)], vec![h(i32::MIN, i32::MIN), h(i32::MAX, i32::MAX)]] {
            let e = CubeGrid::from_headers(&hs, "x.sgy").err().unwrap().to_string();
            assert!(e.contains("far larger"), "{e}");
        }
        // At the ends of the range but a small span: fine.
        let g = CubeGrid::from_headers(&[h(i32::MAX, i32::MIN), h(i32::MAX - 1, i32::MIN + 1)], "x.sgy").unwrap();
        assert_eq!((g.inlines, g.crosslines, g.missing), (2, 2, 2));
    }
}
