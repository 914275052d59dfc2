//! Post-stack cubes from SEG-Y trace sets: traces placed on the (inline, crossline) grid given by
//! their headers. Missing traces are zero-filled and reported, so interpolation can fill them.

use crate::traces::TraceSet;

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
    set.validate(what).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(!set.is_empty(), "{what}: no traces");
    if let Some(i) = set.headers.iter().position(|h| h.inline == 0 && h.crossline == 0) {
        anyhow::bail!("{what}: trace {i} has no inline/crossline numbers (bytes 189 and 193 are zero)");
    }
    let (il0, il1) = set.headers.iter().fold((i32::MAX, i32::MIN), |(a, b), h| (a.min(h.inline), b.max(h.inline)));
    let (xl0, xl1) = set.headers.iter().fold((i32::MAX, i32::MIN), |(a, b), h| (a.min(h.crossline), b.max(h.crossline)));
    let (nil, nxl) = ((il1 - il0) as usize + 1, (xl1 - xl0) as usize + 1);
    anyhow::ensure!(nil.saturating_mul(nxl) <= 64 * set.len().max(1),
        "{what}: inlines {il0}..{il1} x crosslines {xl0}..{xl1} is far larger than the {} traces present", set.len());
    let ns = set.ns;
    let mut data = vec![0.0f32; nil * nxl * ns];
    let mut filled = vec![false; nil * nxl];
    for (i, h) in set.headers.iter().enumerate() {
        let cell = (h.inline - il0) as usize * nxl + (h.crossline - xl0) as usize;
        anyhow::ensure!(!filled[cell], "{what}: trace {i} repeats inline {} crossline {}", h.inline, h.crossline);
        filled[cell] = true;
        data[cell * ns..(cell + 1) * ns].copy_from_slice(set.trace(i));
    }
    let missing = filled.iter().filter(|f| !**f).count();
    Ok(Cube { data, shape: [nil, nxl, ns], first_inline: il0, first_crossline: xl0, missing })
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
}
