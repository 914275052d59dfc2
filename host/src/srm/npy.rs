//! .npy in and out for srm (f32 and f64 arrays read as f32, C order). Outputs go through
//! `AtomicFile` (temporary file, then rename). Kept here until the shared io helper lands.

use std::path::Path;

use anyhow::{bail, Context};
use npyz::WriterBuilder;

use crate::io::AtomicFile;

/// Reads an f32 (or f64, converted) C-order array; returns (shape, values).
pub fn read_f32(path: &Path) -> anyhow::Result<(Vec<usize>, Vec<f32>)> {
    let bytes = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let npy = npyz::NpyFile::new(&bytes[..]).with_context(|| format!("{} is not a .npy file", path.display()))?;
    if npy.order() != npyz::Order::C {
        bail!("{}: Fortran-order arrays are not supported (save with numpy's default C order)", path.display());
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let dtype = npy.dtype();
    let data = match npy.try_data::<f32>() {
        Ok(r) => r.collect::<std::io::Result<Vec<f32>>>().with_context(|| format!("reading {}", path.display()))?,
        Err(npy) => match npy.try_data::<f64>() {
            Ok(r) => r.collect::<std::io::Result<Vec<f64>>>().with_context(|| format!("reading {}", path.display()))?.into_iter().map(|v| v as f32).collect(),
            Err(_) => bail!("{}: dtype {dtype:?} is not float32 or float64", path.display()),
        },
    };
    Ok((shape, data))
}

/// Rows `rows` of a 2D f32 (or f64, converted) C-order array, read from their place in the file
/// (an MPI rank's traces); returns (shape, values of those rows).
pub fn read_rows_f32(path: &Path, rows: std::ops::Range<usize>) -> anyhow::Result<(Vec<usize>, Vec<f32>)> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = std::fs::File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    // The header: magic, version, header length (u16 in format 1, u32 in 2 and 3), dictionary.
    let mut pre = [0u8; 12];
    f.read_exact(&mut pre).with_context(|| format!("{} is not a .npy file", path.display()))?;
    let data_at = match pre[6] {
        1 => 10 + u16::from_le_bytes([pre[8], pre[9]]) as usize,
        2 | 3 => 12 + u32::from_le_bytes([pre[8], pre[9], pre[10], pre[11]]) as usize,
        v => bail!("{}: .npy format version {v}", path.display()),
    };
    let mut head = vec![0u8; data_at];
    f.seek(SeekFrom::Start(0))?;
    f.read_exact(&mut head).with_context(|| format!("{}: truncated .npy header", path.display()))?;
    let npy = npyz::NpyFile::new(&head[..]).with_context(|| format!("{} is not a .npy file", path.display()))?;
    if npy.order() != npyz::Order::C {
        bail!("{}: Fortran-order arrays are not supported (save with numpy's default C order)", path.display());
    }
    let shape: Vec<usize> = npy.shape().iter().map(|&d| d as usize).collect();
    let [n, width] = shape[..] else { bail!("{}: expected a 2D array, got shape {shape:?}", path.display()) };
    if rows.end > n {
        bail!("{}: rows {rows:?} of {n}", path.display());
    }
    let descr = npy.dtype().descr();
    let size = match descr.trim_matches(|c| c == '\'' || c == '"') {
        "<f4" => 4,
        "<f8" => 8,
        d => bail!("{}: dtype {d} is not little-endian float32 or float64", path.display()),
    };
    let len = f.metadata()?.len();
    let need = (data_at + n * width * size) as u64;
    if len < need {
        bail!("{}: {len} bytes, the header's {n} x {width} values need {need}", path.display());
    }
    f.seek(SeekFrom::Start((data_at + rows.start * width * size) as u64))?;
    let mut bytes = vec![0u8; rows.len() * width * size];
    f.read_exact(&mut bytes).with_context(|| format!("reading rows {rows:?} of {}", path.display()))?;
    let values = if size == 4 {
        bytes.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect()
    } else {
        bytes.chunks_exact(8).map(|b| f64::from_le_bytes(b.try_into().expect("8 bytes")) as f32).collect()
    };
    Ok((shape, values))
}

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
        write_f32(&p, &[6, 4], &data).unwrap();
        for rows in [0..1, 2..5, 6..6] {
            let (shape, got) = read_rows_f32(&p, rows.clone()).unwrap();
            assert_eq!((shape, got), (vec![6, 4], data[rows.start * 4..rows.end * 4].to_vec()));
        }
        assert!(read_rows_f32(&p, 5..7).is_err());
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 4]).unwrap();
        assert!(read_rows_f32(&p, 0..1).unwrap_err().to_string().contains("need"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
