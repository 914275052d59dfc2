//! The JSON sidecar of a .npy output: what the array is and what each axis means, so plots (and
//! Python users) get physical axes without guessing from the shape.
//!
//! The sidecar of `image.npy` is `image.npy.json`:
//!
//! ```json
//! { "description": "ktm image",
//!   "axes": [ {"name": "class"},
//!             {"name": "x", "unit": "m", "origin": 0.0, "step": 25.0},
//!             {"name": "y", "unit": "m", "origin": 0.0, "step": 25.0},
//!             {"name": "time", "unit": "ms", "origin": 0.0, "step": 4.0} ] }
//! ```
//!
//! One entry per array axis, in the array's order (C order: the last axis fastest). `origin` is
//! the coordinate of index 0 and `step` the spacing (defaults 0 and 1: indices). Names in the
//! field's words; plots treat `time`/`tau` (unit ms or s), `depth`/`z` (m) and `sample` as the
//! vertical axis, and `class`/`offset` on a 4-D array as the axis summed into a stack.

use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use super::AtomicFile;

/// One axis of an array: its name, unit, and the coordinate of each index (origin + index * step).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AxisMeta {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    #[serde(default)]
    pub origin: f64,
    #[serde(default = "one")]
    pub step: f64,
}

fn one() -> f64 { 1.0 }

impl AxisMeta {
    /// An axis counted in indices (origin 0, step 1, no unit).
    pub fn index(name: &str) -> Self { AxisMeta { name: name.into(), unit: None, origin: 0.0, step: 1.0 } }
    /// An axis in physical units.
    pub fn new(name: &str, unit: &str, origin: f64, step: f64) -> Self {
        AxisMeta { name: name.into(), unit: Some(unit.into()), origin, step }
    }
}

/// What a .npy array holds: a short description (used in plot titles) and its axes.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ArrayMeta {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub axes: Vec<AxisMeta>,
}

/// The sidecar's path: `<file>.json` beside the array (`image.npy` -> `image.npy.json`).
pub fn sidecar_path(npy: &Path) -> PathBuf {
    let mut name = npy.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(".json");
    npy.with_file_name(name)
}

impl ArrayMeta {
    /// Checks the axes' origins and steps are finite and the steps positive; `ndim` is the
    /// array's number of axes, which the sidecar must match.
    pub fn validate(&self, what: &str, ndim: usize) -> anyhow::Result<()> {
        if self.axes.len() != ndim {
            crate::bail_input!("{what}: {} axes described for an array of {ndim} axes", self.axes.len());
        }
        for (k, a) in self.axes.iter().enumerate() {
            if a.name.trim().is_empty() {
                crate::bail_input!("{what}: axis {k} has no name");
            }
            if !a.origin.is_finite() || !a.step.is_finite() || a.step <= 0.0 || a.origin.abs() > 1e12 || a.step > 1e12 {
                crate::bail_input!("{what}: axis {k} ({}) origin {} step {}: the origin must be finite and the step positive and finite", a.name, a.origin, a.step);
            }
        }
        Ok(())
    }

    /// Writes the sidecar of `npy` (through a temporary file renamed into place).
    pub fn write(&self, npy: &Path) -> anyhow::Result<()> {
        let path = sidecar_path(npy);
        let mut file = AtomicFile::create(&path)?;
        serde_json::to_writer_pretty(&mut file, self).with_context(|| format!("{}: write failed", path.display()))?;
        file.commit().with_context(|| format!("{}: cannot finish the file", path.display()))
    }

    /// Reads the sidecar of `npy`; `None` when there is none. A sidecar that does not parse is
    /// an error naming it (not silently ignored).
    pub fn read(npy: &Path) -> anyhow::Result<Option<Self>> {
        let path = sidecar_path(npy);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let meta: ArrayMeta = serde_json::from_str(&text).with_context(|| format!("{}: not an array description (expected {{\"axes\": [{{\"name\": ...}}, ...]}})", path.display()))?;
        Ok(Some(meta))
    }
}

/// The description of a grid image's .npy (as [`super::output::write_grid`] writes it: samples
/// last, the other axes in the trace order), or `None` where the shape does not match the grid
/// (then no sidecar is better than a wrong one).
pub fn of_grid(img: &super::output::GridImage) -> Option<ArrayMeta> {
    use super::output::{SampleAxis, TraceOrder};
    let g = img.grid;
    let metres = |name: &str, origin: f64, step: f64| {
        if step > 0.0 && step.is_finite() && origin.is_finite() { AxisMeta::new(name, "m", origin, step) } else { AxisMeta::index(name) }
    };
    let (x, y) = (metres("x", g.x0, g.dx), metres("y", g.y0, g.dy));
    let (sample, ns) = match img.axis {
        // The f32 seconds as the decimals they print as (0.004 s is 4 ms, not 4.0000002).
        SampleAxis::Time { n, step, first } => {
            let ms = |v: f32| v.to_string().parse::<f64>().unwrap_or(v as f64) * 1e3;
            (AxisMeta::new("time", "ms", ms(first), ms(step)), n)
        }
        SampleAxis::Depth { n, step, first } => (AxisMeta::new("depth", "m", first, step), n),
    };
    let nc = g.classes();
    let (class, offset) = (AxisMeta::index("class"), AxisMeta::index("offset"));
    let four = img.npy_shape.len() == 4;
    let (axes, dims): (Vec<AxisMeta>, Vec<usize>) = match (g.order, four) {
        (TraceOrder::ClassXY, true) => (vec![class, x, y, sample], vec![nc, g.nx, g.ny, ns]),
        (TraceOrder::ClassXY, false) => (vec![x, y, sample], vec![g.nx, g.ny, ns]),
        (TraceOrder::XYClass, true) => (vec![x, y, offset, sample], vec![g.nx, g.ny, nc, ns]),
        (TraceOrder::XYClass, false) => (vec![x, y, sample], vec![g.nx, g.ny, ns]),
        (TraceOrder::ClassYX, true) => (vec![class, y, x, sample], vec![nc, g.ny, g.nx, ns]),
        (TraceOrder::ClassYX, false) => (vec![y, x, sample], vec![g.ny, g.nx, ns]),
    };
    if dims != img.npy_shape {
        return None;
    }
    Some(ArrayMeta { description: Some(img.title.trim_start_matches("seisgpu ").to_string()), axes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_images_describe_their_axes() {
        use crate::io::output::{Grid, GridImage, SampleAxis, TraceOrder};
        let grid = Grid { nx: 4, ny: 3, x0: 100.0, y0: 0.0, dx: 25.0, dy: 0.0, class_offsets: vec![0.0, 500.0], order: TraceOrder::ClassXY,
            inline_along_y: false };
        let data = vec![0.0; 2 * 4 * 3 * 10];
        let img = GridImage { title: "seisgpu ktm: image".into(), grid: &grid, axis: SampleAxis::Time { n: 10, step: 0.004, first: 0.0 }, data: &data,
            npy_shape: vec![2, 4, 3, 10] };
        let m = of_grid(&img).unwrap();
        let names: Vec<&str> = m.axes.iter().map(|a| a.name.as_str()).collect();
        assert_eq!((names, m.description.as_deref()), (vec!["class", "x", "y", "time"], Some("ktm: image")));
        assert_eq!((m.axes[1].origin, m.axes[1].step, m.axes[2].unit.as_deref(), m.axes[3].step), (100.0, 25.0, None, 4.0));
        m.validate("ktm", 4).unwrap();
        // A shape that is not the grid's gets no sidecar.
        assert!(of_grid(&GridImage { npy_shape: vec![4, 2, 3, 10], ..img }).is_none());
    }

    #[test]
    fn round_trip_defaults_and_errors() {
        let dir = std::env::temp_dir().join(format!("seisgpu-sidecar-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let npy = dir.join("image.npy");
        assert_eq!(sidecar_path(&npy), dir.join("image.npy.json"));
        assert_eq!(ArrayMeta::read(&npy).unwrap(), None);
        let m = ArrayMeta { description: Some("ktm image".into()), axes: vec![AxisMeta::index("class"), AxisMeta::new("time", "ms", 0.0, 4.0)] };
        m.write(&npy).unwrap();
        assert_eq!(ArrayMeta::read(&npy).unwrap(), Some(m.clone()));
        m.validate("x", 2).unwrap();
        assert!(m.validate("x", 3).unwrap_err().to_string().contains("2 axes described"));
        // Omitted origin and step are indices.
        std::fs::write(sidecar_path(&npy), r#"{"axes": [{"name": "trace"}, {"name": "depth", "unit": "m", "step": 5}]}"#).unwrap();
        let r = ArrayMeta::read(&npy).unwrap().unwrap();
        assert_eq!((r.axes[0].origin, r.axes[0].step, r.axes[1].step), (0.0, 1.0, 5.0));
        std::fs::write(sidecar_path(&npy), r#"{"axes": [{"name": "trace", "step": 0}]}"#).unwrap();
        let e = ArrayMeta::read(&npy).unwrap().unwrap().validate("s", 1).unwrap_err().to_string();
        assert!(e.contains("axis 0 (trace)"), "{e}");
        std::fs::write(sidecar_path(&npy), "{").unwrap();
        let e = format!("{:#}", ArrayMeta::read(&npy).unwrap_err());
        assert!(e.contains("image.npy.json"), "{e}");
    }
}
