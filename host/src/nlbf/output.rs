//! Writing the estimate: one `.npy` volume per parameter (shape ny x nx x ns, C order), the
//! parameter-trace positions and a JSON description, every file through [`AtomicFile`].

use std::io::Write;
use std::path::Path;

use anyhow::Context;

use super::{Aperture, Estimate, EstimateParams, Param, Range};
use crate::io::output::{write_grid, Grid, GridImage, OutputFormat, SampleAxis, TraceOrder};
use crate::io::{npy, AtomicFile};

/// The header of the volumes' `.npy` files (MPI ranks write their parts behind it): [`crate::io::npy::header`].
pub fn npy_header(descr: &str, shape: &[usize]) -> Vec<u8> { npy::header(shape, descr) }

/// Checks that the output folder `dir` can be one: an existing file there is an error naming it.
pub fn check_dir(dir: &Path) -> std::io::Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(std::io::Error::new(std::io::ErrorKind::AlreadyExists,
            format!("{} is an existing file, not a folder: the output is a folder of .npy files (give a new or folder path)",
                dir.display())));
    }
    Ok(())
}

/// Writes A.npy .. E.npy and S.npy (ny x nx x ns), positions.npy (ny x nx x 2: x, y in m) and
/// nlbf.json (grid, sampling, units, `extra` fields) into `dir`. Returns the files written.
pub fn write_estimate(dir: &Path, est: &Estimate, extra: serde_json::Value) -> anyhow::Result<Vec<std::path::PathBuf>> {
    check_dir(dir)?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating the folder {}", dir.display()))?;
    let shape = [est.grid.ny, est.grid.nx, est.ns].map(|d| d as u64);
    let mut files = Vec::new();
    for p in Param::ALL {
        let path = dir.join(format!("{}.npy", p.name()));
        npy::write_npy(&path, &est.volume(p), &shape)?;
        files.push(path);
    }
    files.extend(write_description(dir, est, extra)?);
    Ok(files)
}

/// The estimate's volumes as SEG-Y or SU files (`A.sgy` .. `S.sgy`, or `.su`; one trace per
/// parameter trace, y-major as in the .npy volumes, its position in CDP X/Y: the search's x and y
/// coordinates), or as [`write_estimate`] for .npy; with positions.npy and nlbf.json.
pub fn write_estimate_as(dir: &Path, est: &Estimate, extra: serde_json::Value, format: OutputFormat)
    -> anyhow::Result<Vec<std::path::PathBuf>> {
    let ext = match format {
        OutputFormat::Npy => return write_estimate(dir, est, extra),
        OutputFormat::Segy => "sgy",
        OutputFormat::Su => "su",
    };
    std::fs::create_dir_all(dir)?;
    let grid = volume_grid(est);
    let mut files = Vec::new();
    for p in Param::ALL {
        let path = dir.join(format!("{}.{ext}", p.name()));
        let data = est.volume(p);
        let img = GridImage {
            title: format!("seisgpu nlbf: parameter {} ({}) per parameter trace", p.name(), p.unit()),
            grid: &grid, axis: SampleAxis::Time { n: est.ns, step: est.dt, first: 0.0 }, data: &data,
            npy_shape: vec![est.grid.ny, est.grid.nx, est.ns],
        };
        write_grid(&path, &img)?;
        files.push(path);
    }
    files.extend(description(dir, est, extra, ext)?);
    Ok(files)
}

/// The parameter traces as an image grid: y-major, inline numbers along y.
pub fn volume_grid(est: &Estimate) -> Grid {
    Grid { nx: est.grid.nx, ny: est.grid.ny, x0: est.origin.0, y0: est.origin.1, dx: est.grid.sx, dy: est.grid.sy,
        class_offsets: Vec::new(), order: TraceOrder::ClassYX, inline_along_y: true }
}

/// positions.npy and nlbf.json of [`write_estimate`] (from `est`'s grid and sampling alone: its
/// picks may be a part or none).
pub fn write_description(dir: &Path, est: &Estimate, extra: serde_json::Value) -> anyhow::Result<Vec<std::path::PathBuf>> {
    description(dir, est, extra, "npy")
}

fn description(dir: &Path, est: &Estimate, extra: serde_json::Value, ext: &str) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut files = Vec::new();
    let pos: Vec<f64> = est.positions().into_iter().flat_map(|(x, y)| [x, y]).collect();
    let path = dir.join("positions.npy");
    npy::write_npy_f64(&path, &pos, &[est.grid.ny as u64, est.grid.nx as u64, 2])?;
    files.push(path);
    let meta = serde_json::json!({
        "grid": { "nx": est.grid.nx, "ny": est.grid.ny, "spacing_x_m": est.grid.sx, "spacing_y_m": est.grid.sy,
                  "origin_x_m": est.origin.0, "origin_y_m": est.origin.1 },
        "samples": est.ns, "sample_interval_s": est.dt,
        "volumes": Param::ALL.iter().map(|p| serde_json::json!({"file": format!("{}.{ext}", p.name()), "unit": p.unit()}))
            .collect::<Vec<_>>(),
        "layout": "volume[iy][ix][t]; parameter trace (ix, iy) at origin + (ix * spacing_x, iy * spacing_y)",
        "run": extra,
    });
    let path = dir.join("nlbf.json");
    let mut f = AtomicFile::create(&path)?;
    f.write_all(serde_json::to_string_pretty(&meta)?.as_bytes())?;
    f.commit()?;
    files.push(path);
    Ok(files)
}

/// The run's description for nlbf.json: variant, backend, seconds and every search parameter.
pub fn run_info(variant: &str, backend: &str, seconds: f64, p: &EstimateParams) -> serde_json::Value {
    let r = |r: &Range| serde_json::json!([r.min, r.step, r.max]);
    let ap = |a: &Aperture| serde_json::json!([a.x, a.y]);
    serde_json::json!({
        "variant": variant, "backend": backend, "seconds": seconds,
        "params": {
            "x": p.coords.x.name(), "y": p.coords.y.name(), "x_scale": p.coords.x_scale, "y_scale": p.coords.y_scale,
            "spacing_x_m": p.spacing_x, "spacing_y_m": p.spacing_y,
            "aperture_ad_m": ap(&p.aperture_ad), "aperture_be_m": ap(&p.aperture_be), "aperture_c_m": ap(&p.aperture_c),
            "window_samples": p.window,
            "a_s_per_m": r(&p.search.a), "b_s_per_m": r(&p.search.b), "c_s_per_m2": r(&p.search.c),
            "d_s_per_m2": r(&p.search.d), "e_s_per_m2": r(&p.search.e),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_volumes_header_is_that_of_the_written_files() {
        let dir = std::env::temp_dir().join(format!("seisgpu-nlbf-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("x.npy");
        npy::write_npy(&p, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], &[2, 3]).unwrap();
        let b = std::fs::read(&p).unwrap();
        let h = npy_header("<f4", &[2, 3]);
        assert_eq!(&b[..h.len()], &h[..]);
        assert_eq!(h.len() % 64, 0);
        assert_eq!(f32::from_le_bytes(b[h.len()..h.len() + 4].try_into().unwrap()), 1.0);
        assert_eq!(b.len(), h.len() + 24);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
