//! Image and trace output. The image is written as .npy (float32, shape [classes, nx, ny, ntau],
//! tau fastest) through `AtomicFile`; the SEG-Y writer (one trace per image column and class, the
//! grid and two-way image time in the headers) plugs in at [`write_image`] once it lands in main.

use std::path::Path;

use anyhow::Context;
use npyz::WriterBuilder;

use super::Image;
use crate::io::AtomicFile;
use crate::traces::TraceSet;

/// Writes `data` with `shape` as a float32 .npy through a temporary file.
pub fn write_npy(path: &Path, shape: &[u64], data: &[f32]) -> anyhow::Result<()> {
    let mut f = AtomicFile::create(path)?;
    {
        let mut w = npyz::WriteOptions::new().default_dtype().shape(shape).writer(&mut f).begin_nd()?;
        w.extend(data.iter().copied())?;
        w.finish()?;
    }
    f.commit().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// The migrated image (format by extension: `.npy`; SEG-Y once the writer lands).
pub fn write_image(path: &Path, img: &Image) -> anyhow::Result<()> {
    let g = img.grid;
    match path.extension().and_then(|e| e.to_str()) {
        Some("npy") => write_npy(path, &[img.classes as u64, g.nx as u64, g.ny as u64, g.ntau as u64], &img.data),
        _ => anyhow::bail!("{}: ktm writes .npy images for now (SEG-Y output comes with the SEG-Y writer)", path.display()),
    }
}

/// Modelled traces as .npy (shape [traces, samples]).
pub fn write_traces(path: &Path, t: &TraceSet) -> anyhow::Result<()> {
    write_npy(path, &[t.len() as u64, t.ns as u64], &t.data)
}

/// A float32 .npy: (shape, data).
pub fn read_npy(path: &Path) -> anyhow::Result<(Vec<usize>, Vec<f32>)> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let npy = npyz::NpyFile::new(&bytes[..]).with_context(|| format!("{}: not a .npy file", path.display()))?;
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let data: Vec<f32> = npy.into_vec().with_context(|| format!("{}: expected float32 data", path.display()))?;
    Ok((shape, data))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn npy_round_trip() {
        let dir = std::env::temp_dir().join(format!("seisgpu-ktm-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.npy");
        let data: Vec<f32> = (0..24).map(|i| i as f32 * 0.5).collect();
        write_npy(&p, &[2, 3, 4], &data).unwrap();
        let (shape, back) = read_npy(&p).unwrap();
        assert_eq!(shape, vec![2, 3, 4]);
        assert_eq!(back, data);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
