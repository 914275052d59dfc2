//! Files: wave-packet coefficients (`.wpk`) and 3D volumes as `.npy`.
//!
//! `.wpk` layout: the line `SEISGPU-WPK1`, a little-endian u64 header length, the header as JSON
//! ([`Header`]: volume shape, cube tiling, transform parameters), then the coefficients as
//! little-endian (re, im) f32 pairs, cube after cube. Every write goes through [`AtomicFile`].

use std::io::{Read, Write};
use std::path::Path;

use anyhow::{ensure, Context, Result};
use num_complex::Complex32;
use serde::{Deserialize, Serialize};

use super::fragments::Tiling;
use super::Params;
use crate::io::AtomicFile;

const MAGIC: &[u8] = b"SEISGPU-WPK1\n";

/// What a coefficient file needs to be inverted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Header {
    pub version: u32,
    pub tiling: Tiling,
    pub params: Params,
    /// Complex coefficients per cube.
    pub per_cube: usize,
}

/// The bytes before the coefficients: magic, header length, header.
pub fn head_bytes(header: &Header) -> Result<Vec<u8>> {
    let json = serde_json::to_vec(header)?;
    let mut head = MAGIC.to_vec();
    head.extend((json.len() as u64).to_le_bytes());
    head.extend(json);
    Ok(head)
}

/// Coefficients as the file stores them: little-endian (re, im) f32 pairs.
pub fn coeff_bytes(coeffs: &[Complex32]) -> Vec<u8> {
    coeffs.iter().flat_map(|c| c.re.to_le_bytes().into_iter().chain(c.im.to_le_bytes())).collect()
}

/// Writes coefficients (cube after cube) with their header.
pub fn write_coeffs(path: &Path, header: &Header, coeffs: &[Complex32]) -> Result<()> {
    ensure!(coeffs.len() == header.per_cube * header.tiling.count(),
        "{} coefficients for {} cubes of {}", coeffs.len(), header.tiling.count(), header.per_cube);
    let mut f = AtomicFile::create(path)?;
    f.write_all(&head_bytes(header)?)?;
    for chunk in coeffs.chunks(1 << 17) {
        f.write_all(&coeff_bytes(chunk))?;
    }
    f.commit().with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}

/// Reads a coefficient file, checking its magic, header and length.
pub fn read_coeffs(path: &Path) -> Result<(Header, Vec<Complex32>)> {
    let (header, mut f) = open_coeffs(path)?;
    let count = header.per_cube * header.tiling.count();
    let mut bytes = Vec::new();
    f.read_to_end(&mut bytes)?;
    crate::ensure_input!(bytes.len() == 8 * count, "{}: {} bytes of coefficients, the header says {count} coefficients ({} bytes)",
        path.display(), bytes.len(), 8 * count);
    Ok((header, from_bytes(&bytes)))
}

/// The coefficients of some cubes alone (an MPI rank's share): the header, then the coefficients
/// of the cubes `cubes(&header)` names, read from their place in the file, whose length is checked
/// against the header.
pub fn read_coeffs_of_cubes(path: &Path, cubes: impl FnOnce(&Header) -> std::ops::Range<usize>) -> Result<(Header, Vec<Complex32>)> {
    use std::io::{Seek, SeekFrom};
    let (header, mut f) = open_coeffs(path)?;
    let cubes = cubes(&header);
    let count = header.per_cube * header.tiling.count();
    let start = f.stream_position()?;
    let len = f.get_ref().metadata()?.len() - start;
    crate::ensure_input!(len == 8 * count as u64, "{}: {len} bytes of coefficients, the header says {count} coefficients ({} bytes)",
        path.display(), 8 * count);
    ensure!(cubes.end <= header.tiling.count(), "{}: cubes {cubes:?} of {}", path.display(), header.tiling.count());
    f.seek(SeekFrom::Start(start + (8 * cubes.start * header.per_cube) as u64))?;
    let mut bytes = vec![0u8; 8 * cubes.len() * header.per_cube];
    f.read_exact(&mut bytes).with_context(|| format!("{}: reading the coefficients of cubes {cubes:?}", path.display()))?;
    Ok((header, from_bytes(&bytes)))
}

fn from_bytes(bytes: &[u8]) -> Vec<Complex32> {
    bytes
        .chunks_exact(8)
        .map(|b| Complex32::new(f32::from_le_bytes([b[0], b[1], b[2], b[3]]), f32::from_le_bytes([b[4], b[5], b[6], b[7]])))
        .collect()
}

/// Opens a coefficient file and reads its header (magic, length, JSON, version), leaving the
/// reader at the first coefficient.
fn open_coeffs(path: &Path) -> Result<(Header, std::io::BufReader<std::fs::File>)> {
    let mut f = std::io::BufReader::new(std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?);
    let mut magic = vec![0u8; MAGIC.len()];
    f.read_exact(&mut magic).map_err(|e| crate::error::malformed(e, format!("{}: too short for a coefficient file", path.display())))?;
    if magic != MAGIC {
        crate::bail_input!("{}: not a seisgpu wave-packet coefficient file (bad magic)", path.display());
    }
    let mut len = [0u8; 8];
    f.read_exact(&mut len)?;
    let len = u64::from_le_bytes(len) as usize;
    crate::ensure_input!(len < 1 << 24, "{}: header of {len} bytes is implausible", path.display());
    let mut json = vec![0u8; len];
    f.read_exact(&mut json)?;
    let header: Header = serde_json::from_slice(&json).map_err(|e| crate::Error::input(format!("{}: bad header: {e}", path.display())))?;
    crate::ensure_input!(header.version == 1, "{}: coefficient file version {} (this build reads 1)", path.display(), header.version);
    Ok((header, f))
}

/// Reads a 3D `.npy` volume (f32 or f64, C order); returns samples and shape (n1, n2, n3), n3 fastest.
pub fn read_volume(path: &Path) -> Result<(Vec<f32>, [usize; 3])> {
    let (shape, data) = crate::io::npy::read_f32(path)?;
    crate::ensure_input!(shape.len() == 3, "{}: a {}-D array; a volume must be 3-D (n1, n2, samples)", path.display(), shape.len());
    Ok((data, [shape[0], shape[1], shape[2]]))
}

/// Writes a 3D f32 volume as `.npy` (atomically).
pub fn write_volume(path: &Path, data: &[f32], shape: [usize; 3]) -> Result<()> {
    crate::io::npy::write_npy(path, data, &shape.map(|d| d as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coefficient_and_volume_files_round_trip() {
        let dir = std::env::temp_dir().join(format!("seisgpu-wpk-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tiling = Tiling::new([10, 12, 14], 256, 32).unwrap();
        let header = Header { version: 1, tiling, params: Params::default(), per_cube: 5 };
        let c: Vec<Complex32> = (0..5).map(|i| Complex32::new(i as f32, -(i as f32) * 0.5)).collect();
        let p = dir.join("c.wpk");
        write_coeffs(&p, &header, &c).unwrap();
        let (h, back) = read_coeffs(&p).unwrap();
        assert_eq!(h, header);
        assert_eq!(back, c);
        std::fs::write(dir.join("bad.wpk"), b"nonsense, not coefficients").unwrap();
        assert!(read_coeffs(&dir.join("bad.wpk")).unwrap_err().to_string().contains("magic"));
        let v: Vec<f32> = (0..24).map(|i| i as f32 * 0.25).collect();
        let pv = dir.join("v.npy");
        write_volume(&pv, &v, [2, 3, 4]).unwrap();
        let (w, shape) = read_volume(&pv).unwrap();
        assert_eq!((w, shape), (v, [2, 3, 4]));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_share_of_the_cubes_reads_from_its_place_and_a_short_file_is_refused() {
        let dir = std::env::temp_dir().join(format!("seisgpu-wpk-share-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let tiling = Tiling::new([70, 45, 90], 32, 8).unwrap();
        let n = tiling.count();
        assert!(n >= 4, "{n} cubes");
        let header = Header { version: 1, tiling, params: Params::default(), per_cube: 7 };
        let c: Vec<Complex32> = (0..7 * n).map(|i| Complex32::new(i as f32 * 0.75, 3.0 - i as f32)).collect();
        let p = dir.join("c.wpk");
        write_coeffs(&p, &header, &c).unwrap();
        for cubes in [0..1, 1..3, 2..n, n..n] {
            let (h, got) = read_coeffs_of_cubes(&p, |_| cubes.clone()).unwrap();
            assert_eq!(h, header);
            assert_eq!(got, c[7 * cubes.start..7 * cubes.end], "cubes {cubes:?}");
        }
        assert!(read_coeffs_of_cubes(&p, |h| 0..h.tiling.count() + 1).is_err());
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() - 4]).unwrap();
        let e = read_coeffs_of_cubes(&p, |_| 0..1).unwrap_err().to_string();
        assert!(e.contains("the header says"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
