//! .npy in and out for srm (f32 and f64 arrays read as f32, C order). Outputs go through
//! `AtomicFile` (temporary file, then rename).

use std::path::Path;

use anyhow::{bail, Context};
use npyz::WriterBuilder;

use crate::io::AtomicFile;

/// Reads an f32 (or f64, converted) C-order array; returns (shape, values).
pub fn read_f32(path: &Path) -> anyhow::Result<(Vec<usize>, Vec<f32>)> { crate::io::npy::read_f32(path) }

/// Writes an f32 C-order array of `shape` atomically.
pub fn write_f32(path: &Path, shape: &[usize], data: &[f32]) -> anyhow::Result<()> {
    let n: usize = shape.iter().product();
    if n != data.len() {
        bail!("writing {}: {} values for shape {shape:?}", path.display(), data.len());
    }
    let mut file = AtomicFile::create(path)?;
    {
        let dims: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
        let mut w = npyz::WriteOptions::<f32>::new().default_dtype().shape(&dims).writer(file.writer()).begin_nd()?;
        w.extend(data.iter().copied())?;
        w.finish()?;
    }
    file.commit().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn round_trip() {
        let dir = std::env::temp_dir().join(format!("seisgpu-srm-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.npy");
        let data: Vec<f32> = (0..24).map(|i| i as f32 * 0.5 - 3.0).collect();
        write_f32(&p, &[2, 3, 4], &data).unwrap();
        let (shape, back) = read_f32(&p).unwrap();
        assert_eq!(shape, vec![2, 3, 4]);
        assert_eq!(back, data);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
